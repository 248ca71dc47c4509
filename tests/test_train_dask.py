"""Fitting a row-chunked dask array on a real two-process LocalCluster equals the in-memory fit.

The reference is the in-memory estimator (itself checked against brute force elsewhere); the cluster
is real (two worker processes), so statistics really travel between processes and errors really come
back from a worker.
"""

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason="the optional 'dask' extra is not installed")
from clusters import two_worker_client  # noqa: E402
da = pytest.importorskip("dask.array", reason="the optional 'dask' extra is not installed")

from edgeseq import AnytimeRegressor  # noqa: E402
from edgeseq.errors import InputError  # noqa: E402
from edgeseq.train.distributed import stats as dask_stats  # noqa: E402
from edgeseq.train.linear.stats import sufficient_statistics  # noqa: E402

GROUPS = [[0, 1, 2], [3, 4], [5, 6, 7], [8], [9, 10, 11]]
COSTS = [1.0, 2.0, 3.0, 1.0, 2.0]


@pytest.fixture(scope="module")
def client():
    with two_worker_client() as c:
        yield c


def _data(seed=0, n=3000, d=12, p=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 0] = 1e6 + 1e-3 * X[:, 0]  # the offset column the copy-free pass must keep exact
    X[:, 4] += 0.8 * X[:, 3]
    W = rng.normal(size=(d, p)) * (rng.random((d, 1)) < 0.6)
    Y = X[:, 1:] @ W[1:] + rng.normal(size=(n, p))
    return X, (Y[:, 0] if p == 1 else Y)


@pytest.mark.parametrize("method", ["omp", "fr"])
def test_cluster_fit_equals_in_memory_fit(client, method):
    X, y = _data()
    a = AnytimeRegressor(GROUPS, COSTS, method=method).fit(X, y)
    b = AnytimeRegressor(GROUPS, COSTS, method=method).fit(da.from_array(X, chunks=(700, 12)), y)
    assert b.sequence_.tolist() == a.sequence_.tolist()
    np.testing.assert_allclose(b.coef_path_, a.coef_path_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(b.intercept_path_, a.intercept_path_, rtol=1e-12)
    assert b.n_features_in_ == 12
    # predictions add terms of size 1e6·|β_0| that the intercept cancels: equal to their rounding (~1e-9)
    np.testing.assert_allclose(b.predict(X), a.predict(X), rtol=0, atol=1e-8)


def test_multi_output_dask_y_column_chunks_and_explicit_client(client):
    """y as a dask array chunked differently from X, X split along columns too: both are re-aligned."""
    X, Y = _data(1, n=2500, p=2)
    a = AnytimeRegressor(GROUPS, COSTS, method="fr").fit(X, Y)
    Xd = da.from_array(X, chunks=(600, 5))
    Yd = da.from_array(Y, chunks=(1000, 2))
    b = AnytimeRegressor(GROUPS, COSTS, method="fr").fit(Xd, Yd, client=client)
    assert b.sequence_.tolist() == a.sequence_.tolist()
    np.testing.assert_allclose(b.coef_path_, a.coef_path_, rtol=0, atol=1e-10)


def test_statistics_match_the_in_memory_pass_and_report_progress(client):
    X, y = _data(2, n=2000)
    lines = []
    s = dask_stats.dask_sufficient_statistics(da.from_array(X, chunks=(300, 12)), y, columns=[5, 6, 0, 1],
                                              progress=lines.append)
    ref = sufficient_statistics(X, y, columns=[5, 6, 0, 1])
    assert s.n == ref.n
    np.testing.assert_allclose(s.x_mean, ref.x_mean, rtol=1e-14)
    d = np.sqrt(np.diag(ref.xx))
    np.testing.assert_allclose(s.xx / np.outer(d, d), ref.xx / np.outer(d, d), atol=1e-11)
    np.testing.assert_allclose(s.xy, ref.xy, rtol=1e-9)
    assert lines[0].startswith("statistics pass over 2,000 rows in 7 partitions on 2 workers")
    assert [ln for ln in lines if "done" in ln] == [f"statistics: partition {k}/7 done" for k in range(1, 8)]


def test_without_a_cluster_partitions_run_in_this_process(monkeypatch):
    monkeypatch.setattr(dask_stats, "active_client", lambda c: None)
    X, y = _data(3, n=900)
    lines = []
    s = dask_stats.dask_sufficient_statistics(da.from_array(X, chunks=(400, 12)), y, progress=lines.append)
    ref = sufficient_statistics(X, y)
    np.testing.assert_allclose(s.yy, ref.yy, rtol=1e-12)
    np.testing.assert_allclose(s.x_mean, ref.x_mean, rtol=1e-14)
    assert "in this process" in lines[0] and lines[-1] == "statistics: partition 3/3 done"


def test_tree_reduction_depth_is_log2_of_the_partitions():
    calls = []

    def merge(a, b):
        calls.append((a, b))
        return max(a, b) + 1  # the depth of the node

    assert dask_stats.tree_reduce([0] * 5, merge) == 3  # ceil(log2 5)
    assert len(calls) == 4  # P - 1 merges
    assert dask_stats.tree_reduce([0] * 8, merge) == 3
    with pytest.raises(InputError, match="no data"):
        dask_stats.tree_reduce([], merge)


def test_nan_in_a_partition_names_partition_row_and_column(client):
    X, y = _data(4, n=2000)
    good = da.from_array(X, chunks=(500, 12))
    AnytimeRegressor(GROUPS, COSTS).fit(good, y)  # negative control: the clean data fits
    X[1234, 7] = np.nan  # partition 2 (rows 1000..1499), row 234 of it
    with pytest.raises(InputError) as exc:
        AnytimeRegressor(GROUPS, COSTS).fit(da.from_array(X, chunks=(500, 12)), y)
    msg = str(exc.value)
    assert msg == ("partition 2: X contains NaN or Inf at row 1234 (row 234 of partition 2), column 7; "
                   "clean or impute it first")
    y2 = y.copy()
    y2[1600] = np.inf
    with pytest.raises(InputError, match=r"partition 3: y contains NaN or Inf at row 1600"):
        AnytimeRegressor(GROUPS, COSTS).fit(good, y2)


def _worker_failure_logs(client) -> int:
    """How many "Compute Failed" records the workers have logged (their own in-memory log)."""
    return sum("Compute Failed" in msg for entries in client.get_worker_logs().values() for _, msg in entries)


def test_an_expected_error_is_one_line_without_a_worker_log_but_a_crash_is_still_logged(client):
    """Issue 24 item 14: the workers logged their own ERROR and traceback of an edgeseq error the client
    then printed as its one line. Regression (statistics pass) and classification (GLM passes) alike."""
    import operator

    from edgeseq import AnytimeClassifier

    before = _worker_failure_logs(client)
    X, y = _data(9, n=1200)
    X[900, 4] = np.nan
    with pytest.raises(InputError, match=r"^partition 3: X contains NaN or Inf at row 900"):
        AnytimeRegressor(groups=GROUPS, costs=COSTS).fit(da.from_array(X, chunks=(300, 12)), y)
    with pytest.raises(InputError, match=r"^partition 3: X contains NaN or Inf at row 900"):
        AnytimeClassifier(groups=GROUPS, costs=COSTS).fit(da.from_array(X, chunks=(300, 12)), y > 0)
    assert _worker_failure_logs(client) == before
    # negative control: a genuine crash in a task is still logged by the worker that ran it
    with pytest.raises(ZeroDivisionError):
        client.submit(operator.truediv, 1, 0, pure=False).result()
    assert _worker_failure_logs(client) == before + 1


def test_partition_with_a_different_column_count(client):
    """A block whose data disagree with the shape its dask chunk declared (e.g. a bad shard)."""
    from dask import delayed
    X, y = _data(5, n=900)
    pieces = [X[:300], X[300:600, :11], X[600:]]  # partition 1 lost a column
    Xd = da.concatenate([da.from_delayed(delayed(lambda a: a)(p), shape=(p.shape[0], 12), dtype=float)
                         for p in pieces])
    with pytest.raises(InputError, match=r"^partition 1 has shape \(300, 11\): expected 12 columns like the others$"):
        AnytimeRegressor(GROUPS, COSTS).fit(Xd, y)


def test_bad_dask_inputs_fail_before_any_task():
    X, y = _data(6, n=100)
    with pytest.raises(InputError, match="2-D"):
        AnytimeRegressor(GROUPS, COSTS).fit(da.from_array(X[:, 0], chunks=50), y)
    with pytest.raises(InputError, match="rows but y has"):
        AnytimeRegressor(GROUPS, COSTS).fit(da.from_array(X, chunks=(50, 12)), da.from_array(y[:90]))
    with pytest.raises(InputError, match="dask array"):
        AnytimeRegressor(GROUPS, COSTS).fit(X, y, client=object())


class _DiesOnce:
    """A partition loader that kills its worker process the first time it runs (a marker file remembers)."""

    def __init__(self, X, y, marker):
        self.X, self.y, self.marker = X, y, str(marker)

    def __call__(self):
        import os
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)  # the worker process dies mid-pass, without any cleanup
        return self.X, self.y


class _AlwaysDies(_DiesOnce):
    def __call__(self):
        import os
        os._exit(1)


def test_a_partition_that_always_kills_its_worker_is_one_clear_error(client, tmp_path):
    """What an out-of-memory partition looks like to Dask: its worker dies every time the task runs."""
    scheduler = client.cluster.scheduler
    allowed = scheduler.allowed_failures
    scheduler.allowed_failures = 1  # give up after the second death (the default retries 3 times)
    try:
        X, y = _data(8, n=600)
        blocks = [((X[:300], y[:300]), 0, 300), (_AlwaysDies(X[300:], y[300:], tmp_path / "m"), 300, 300)]
        # Dask blames every task that was running on a worker when it died, so a partition sharing the
        # dying worker with the poisoned one (here partition 0) can exhaust its retries first; either is
        # reported in the same one clear line
        with pytest.raises(InputError, match=r"^partition [01] \(300 rows\) killed its worker each time it ran, "
                                             r"most likely by running out of memory: use smaller partitions"):
            dask_stats.partitioned_statistics(blocks, 600, 12, client=client)
    finally:
        scheduler.allowed_failures = allowed
    client.wait_for_workers(2, timeout=60)  # the nannies restart the workers for the next test


def test_a_worker_killed_mid_pass_is_retried_and_the_result_is_unchanged(client, tmp_path):
    """Runs last in this module: the cluster continues with the worker its nanny restarted."""
    X, y = _data(7, n=1200)
    marker = tmp_path / "died"
    blocks = [((X[:400], y[:400]), 0, 400), (_DiesOnce(X[400:800], y[400:800], marker), 400, 400),
              ((X[800:], y[800:]), 800, 400)]
    s = dask_stats.partitioned_statistics(blocks, 1200, 12, client=client)
    assert marker.exists()  # the worker really died
    calm = [((X[a:a + 400], y[a:a + 400]), a, 400) for a in (0, 400, 800)]
    same = dask_stats.partitioned_statistics(calm, 1200, 12, client=client)
    # the retried partition is counted once, not lost and not doubled
    assert s.n == same.n == 1200
    # Equal to rounding, not bit for bit: BLAS sums in an order that depends on where the pickled block
    # lands in memory and on the worker's threads, so two clean runs may differ in the last bits too
    for a, b in ((s.x_mean, same.x_mean), (s.xx, same.xx), (s.xy, same.xy), (s.yy, same.yy)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())
    ref = sufficient_statistics(X, y)
    np.testing.assert_allclose(s.x_mean, ref.x_mean, rtol=1e-12, atol=1e-15)
    d = np.sqrt(np.diag(ref.xx))
    np.testing.assert_allclose(s.xx / np.outer(d, d), ref.xx / np.outer(d, d), atol=1e-11)
