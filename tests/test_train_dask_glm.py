"""AnytimeClassifier on a row-chunked dask array, on a real two-process LocalCluster, equals the in-memory fit.

The reference is the in-memory classifier (itself checked against brute force and scikit-learn
elsewhere). The cluster is real: two worker processes, so every loss/gradient evaluation really is a
map over partitions that live in other processes plus a sum, and errors really come back from a worker.
"""

import os
import signal

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

distributed = pytest.importorskip("distributed", reason="the optional 'dask' extra is not installed")
from clusters import two_worker_client  # noqa: E402
da = pytest.importorskip("dask.array", reason="the optional 'dask' extra is not installed")

from edgeseq import AnytimeClassifier  # noqa: E402
from edgeseq.errors import InputError  # noqa: E402
from edgeseq.train.distributed import glm as dask_glm  # noqa: E402
from edgeseq.train.linear.basis import build_working_problem  # noqa: E402
from edgeseq.train.glm.design import WorkingDesign  # noqa: E402
from edgeseq.train.glm.fit import GRAD_TOL, class_targets, objective_gradient  # noqa: E402
from edgeseq.train.glm.select import GLMState, select_glm, working_design  # noqa: E402
from edgeseq.train.linear.stats import sufficient_statistics  # noqa: E402

GROUPS = [[0, 1], [2, 3, 4], [5], [6, 7], [8, 9, 10]]
COSTS = [1.0, 2.0, 1.0, 3.0, 2.0]
L2 = 1e-2


@pytest.fixture(scope="module")
def client():
    with two_worker_client() as c:
        yield c


def _data(seed=0, n=900, classes=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 11))
    X[:, 0] = 1e4 + X[:, 0]  # an offset column: the centring must happen on the workers too
    X[:, 3] += 0.7 * X[:, 2]
    B = rng.normal(size=(11, classes)) * (rng.random((11, 1)) < 0.7)
    logits = (X - X.mean(axis=0)) @ B + rng.gumbel(size=(n, classes))
    return X, np.argmax(logits, axis=1)


def _assert_same_fit(b, a):
    assert b.sequence_.tolist() == a.sequence_.tolist()
    assert b.classes_.tolist() == a.classes_.tolist() and b.n_features_in_ == a.n_features_in_
    np.testing.assert_allclose(b.train_log_loss_, a.train_log_loss_, rtol=0, atol=1e-8)
    np.testing.assert_array_equal(b.train_accuracy_, a.train_accuracy_)
    assert np.all(b.grad_norms_ <= GRAD_TOL)


@pytest.mark.parametrize("classes", [2, 3], ids=["binary", "multiclass"])
@pytest.mark.parametrize("method", ["omp", "fr"])
def test_cluster_fit_equals_in_memory_fit(client, method, classes):
    X, y = _data(classes=classes)
    a = AnytimeClassifier(GROUPS, COSTS, method=method, l2=L2).fit(X, y)
    lines = []
    b = AnytimeClassifier(GROUPS, COSTS, method=method, l2=L2).fit(da.from_array(X, chunks=(300, 11)), y,
                                                                   progress=lines.append, client=client)
    _assert_same_fit(b, a)
    # two solutions within the gradient tolerance of one strictly convex objective
    np.testing.assert_allclose(b.predict_proba(X), a.predict_proba(X), rtol=0, atol=1e-5)
    # progress: the statistics pass by partition, then every step with its refit's evaluations
    assert lines[0] == "statistics pass over 900 rows in 3 partitions on 2 workers"
    assert [ln for ln in lines if ln.startswith("statistics: ")] == [f"statistics: partition {k}/3 done" for k in (1, 2, 3)]
    assert [ln for ln in lines if ln.startswith("selection step")] == [
        f"selection step {j + 1}/5: g{g} (refit: {b.n_evals_[j + 1]:.3g} passes over the rows, training log-loss "
        f"{b.train_log_loss_[j + 1]:.4g})" for j, g in enumerate(b.sequence_)]


def test_every_prefix_is_optimal_for_the_in_memory_objective(client):
    """The refit tolerance the in-memory tests use: the cluster's weights zero the in-memory gradient."""
    X, y = _data(1, n=700)
    Y = class_targets(y, 3)
    cols = np.concatenate(GROUPS)
    prob = build_working_problem(sufficient_statistics(X, Y, columns=cols), [len(g) for g in GROUPS], True)
    rows = dask_glm.partition_dask_arrays(da.from_array(X, chunks=(350, 11)), da.from_array(y, chunks=250))
    t = dask_glm.partitioned_targets(rows, cols)
    design = dask_glm.PartitionedDesign.over(t.rows, cols, prob)
    with threadpool_limits(limits=1, user_api="blas"):  # as the classifier runs them (BLAS threads spin under load)
        got = select_glm(dask_glm.PartitionedGLMState(prob, design, t.freq, "softmax", L2), np.array(COSTS))
        ref = select_glm(GLMState(prob, WorkingDesign(X, cols, prob), Y, "softmax", L2), np.array(COSTS))
    assert got.order == ref.order and not got.not_converged
    np.testing.assert_array_equal(got.passes, got.n_evals[1:] + 1)  # OMP: one scoring pass plus the refit's
    Z = working_design(X, cols, prob)
    for j in range(1, len(got.order) + 1):
        Zs = np.hstack([Z[:, prob.slices[g]] for g in got.order[:j]])
        _, gW, gb, _ = objective_gradient(Zs, Y, np.vstack(got.prefix_weights[j]), got.intercepts[j], "softmax", L2)
        assert max(np.abs(gW).max(), np.abs(gb).max()) <= 1.01 * GRAD_TOL


def test_no_pass_over_the_rows_runs_in_the_client_process(client, monkeypatch):
    """Negative control: with the design's passes broken in this process, the in-memory fit (and the
    local path) fail, while the cluster fit is unaffected: its passes ran in the worker processes."""
    X, y = _data(2, n=600, classes=2)

    def broken(*args, **kwargs):
        raise AssertionError("a pass over the rows ran in the client process")

    for name in ("fused_pass", "gradient", "chunks"):
        monkeypatch.setattr(WorkingDesign, name, broken)
    with pytest.raises(AssertionError, match="client process"):
        AnytimeClassifier(GROUPS, COSTS, method="fr", l2=L2).fit(X, y)
    Xd = da.from_array(X, chunks=(200, 11))
    with monkeypatch.context() as m:
        m.setattr(dask_glm, "active_client", lambda c: None)  # no cluster: partitions computed here
        with pytest.raises(AssertionError, match="client process"):
            AnytimeClassifier(GROUPS, COSTS, method="fr", l2=L2).fit(Xd, y)
    with distributed.get_task_stream(client) as stream:
        b = AnytimeClassifier(GROUPS, COSTS, method="fr", l2=L2).fit(Xd, y)
    assert b.sequence_.size == len(GROUPS)
    ran = [t for t in stream.data if "_objective_part" in str(t["key"])]
    assert len(ran) >= 3 * int(b.n_evals_.sum())  # every evaluation: one task per partition, on the workers
    assert {t["worker"] for t in ran} <= set(client.nthreads())


def test_without_a_cluster_partitions_run_in_this_process(monkeypatch):
    monkeypatch.setattr(dask_glm, "active_client", lambda c: None)
    X, y = _data(3, n=500)
    a = AnytimeClassifier(GROUPS, COSTS, l2=L2).fit(X, y)
    b = AnytimeClassifier(GROUPS, COSTS, l2=L2).fit(da.from_array(X, chunks=(180, 11)), y.astype(str))
    assert b.classes_.tolist() == ["0", "1", "2"]
    _assert_same_fit(b, AnytimeClassifier(GROUPS, COSTS, l2=L2).fit(X, y.astype(str)))
    np.testing.assert_allclose(b.coef_path_, a.coef_path_, rtol=0, atol=1e-6)


@pytest.mark.parametrize("method,fr_hessian", [("single", "bohning"), ("gomp", "bohning"), ("fr", "diag")])
def test_every_score_reads_the_partitions_like_the_rows(method, fr_hessian):
    """The scores the cluster tests above do not reach (single: raw-column gradient; FR with per-class
    weights: weighted Gram sums for every class), on partitions in this process against the rows."""
    X, y = _data(8, n=400)
    Y = class_targets(y, 3)
    cols = np.concatenate(GROUPS)
    prob = build_working_problem(sufficient_statistics(X, Y, columns=cols), [len(g) for g in GROUPS], True)
    rows = dask_glm.PartitionedRows.split(X, Y, [150, 290])
    state = dask_glm.PartitionedGLMState(prob, dask_glm.PartitionedDesign.over(rows, cols, prob), Y.mean(axis=0),
                                         "softmax", L2, fr_hessian=fr_hessian)
    with threadpool_limits(limits=1, user_api="blas"):
        got = select_glm(state, np.array(COSTS), method=method)
        ref = select_glm(GLMState(prob, WorkingDesign(X, cols, prob), Y, "softmax", L2, X=X, used=cols,
                                  fr_hessian=fr_hessian), np.array(COSTS), method=method)
    assert got.order == ref.order
    np.testing.assert_allclose(got.scores, ref.scores, rtol=1e-8)
    np.testing.assert_allclose(got.log_loss, ref.log_loss, rtol=0, atol=1e-8)


def test_bad_values_and_labels_name_the_partition_and_row(client):
    X, y = _data(5, n=600)
    bad = X.copy()
    bad[437, 6] = np.nan  # partition 2 (rows 400..599)
    with pytest.raises(InputError) as exc:
        AnytimeClassifier(GROUPS, COSTS).fit(da.from_array(bad, chunks=(200, 11)), y)
    assert str(exc.value) == ("partition 2: X contains NaN or Inf at row 437 (row 37 of partition 2), column 6; "
                              "clean or impute it first")
    labels = y.astype(float)
    labels[250] = np.nan
    with pytest.raises(InputError, match=r"^partition 1: y contains NaN or Inf at row 250 \(row 50 of partition 1\)"):
        AnytimeClassifier(GROUPS, COSTS).fit(da.from_array(X, chunks=(200, 11)), labels)
    from dask import delayed
    pieces = [y[:300].astype(str), y[300:]]  # partition 1 holds numbers where partition 0 holds strings
    yd = da.concatenate([da.from_delayed(delayed(lambda a: a)(p), shape=(300,), dtype=object) for p in pieces])
    with pytest.raises(InputError, match=r"^partition 1: class labels are numbers but partition 0's are strings"):
        AnytimeClassifier(GROUPS, COSTS).fit(da.from_array(X, chunks=(300, 11)), yd)


def test_a_partition_with_a_different_column_count(client):
    from dask import delayed
    X, y = _data(6, n=600)
    pieces = [X[:200], X[200:400, :10], X[400:]]
    Xd = da.concatenate([da.from_delayed(delayed(lambda a: a)(p), shape=(200, 11), dtype=float) for p in pieces])
    with pytest.raises(InputError, match=r"^partition 1 has shape \(200, 10\): expected 11 columns like the others$"):
        AnytimeClassifier(GROUPS, COSTS).fit(Xd, y)
    with pytest.raises(InputError, match="one class label for each of the 600 rows"):
        AnytimeClassifier(GROUPS, COSTS).fit(da.from_array(X, chunks=(200, 11)), y[:500])


def test_a_worker_killed_mid_fit_is_retried_and_the_result_is_unchanged(client):
    """Runs last in this module: a worker process is killed (SIGKILL) between two selection steps; its
    partitions are recomputed elsewhere from their lineage and the fit continues to the same result."""
    X, y = _data(7, n=800)
    a = AnytimeClassifier(GROUPS, COSTS, method="fr", l2=L2).fit(X, y)
    pids = client.run(os.getpid)
    killed = []

    def kill_at_step_two(line):
        if line.startswith("selection step 2/") and not killed:
            pid = next(iter(pids.values()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    b = AnytimeClassifier(GROUPS, COSTS, method="fr", l2=L2).fit(da.from_array(X, chunks=(200, 11)), y,
                                                                 progress=kill_at_step_two)
    assert killed
    client.wait_for_workers(2, timeout=60)
    assert set(client.run(os.getpid).values()) != set(pids.values())  # the worker really died and came back
    _assert_same_fit(b, a)
    np.testing.assert_allclose(b.predict_proba(X), a.predict_proba(X), rtol=0, atol=1e-5)
