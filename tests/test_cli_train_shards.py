"""`edgeseq train` on shards: a directory or glob of .npy / CSV files, in-process or on a Dask cluster.

Reference: the in-memory estimator fitted on the concatenated rows. Bad shards give one error line
naming the shard, and no model file.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

distributed = pytest.importorskip("distributed", reason="the optional 'dask' extra is not installed")
from clusters import two_worker_cluster  # noqa: E402

from edgeseq import AnytimeRegressor  # noqa: E402
from edgeseq.cli import main  # noqa: E402
from edgeseq.io.model_io import load_model  # noqa: E402

GROUPS = [[0, 1], [2, 3, 4], [5], [6, 7]]
COSTS = [1.0, 2.0, 1.5, 3.0]


def _data(seed=0, n=1200, d=8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 5] += 1e5  # an offset column
    y = X[:, [0, 2, 6]] @ [1.0, -2.0, 0.5] + 0.1 * rng.normal(size=n)
    return X, y


def _groups(tmp_path, names=None):
    cols = [[names[c] for c in g] for g in GROUPS] if names else GROUPS
    doc = {"groups": [{"name": f"g{i}", "columns": c, "cost": k} for i, (c, k) in enumerate(zip(cols, COSTS))]}
    (tmp_path / "groups.json").write_text(json.dumps(doc))
    return str(tmp_path / "groups.json")


def _npy_shards(tmp_path, X, y, sizes=(500, 300, 400)):
    d = tmp_path / "shards"
    d.mkdir()
    start = 0
    for i, m in enumerate(sizes):
        np.save(d / f"part-{i:03d}.npy", np.column_stack([X[start:start + m], y[start:start + m]]))
        start += m
    return d


def _run(*args):
    return CliRunner().invoke(main, ["train", *map(str, args)])


def _check_equal(model_path, X, y):
    got = load_model(model_path)
    ref = AnytimeRegressor(GROUPS, COSTS, group_names=[f"g{i}" for i in range(4)]).fit(X, y)
    assert got.sequence_.tolist() == ref.sequence_.tolist()
    np.testing.assert_allclose(got.coef_path_, ref.coef_path_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(got.intercept_path_, ref.intercept_path_, rtol=1e-11)


@pytest.fixture(scope="module")
def scheduler():
    with two_worker_cluster() as cluster:
        yield cluster.scheduler_address


def test_npy_directory_on_a_scheduler_equals_the_in_memory_fit(tmp_path, scheduler):
    X, y = _data()
    shards = _npy_shards(tmp_path, X, y)
    out = tmp_path / "m.pkl"
    r = _run(shards, "--groups", _groups(tmp_path), "--scheduler", scheduler, "-o", out)
    assert r.exit_code == 0, r.output
    assert "statistics: partition 3/3 done" in r.output and "on 2 workers" in r.output
    _check_equal(out, X, y)


def test_csv_glob_in_process_equals_the_in_memory_fit(tmp_path):
    X, y = _data(1, n=700)
    header = [f"f{j}" for j in range(8)]
    for i, (a, b) in enumerate([(0, 250), (250, 500), (500, 700)]):
        with open(tmp_path / f"rows-{i}.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["target"] + header)  # target first: GROUPS.json names the feature columns
            for row, t in zip(X[a:b], y[a:b]):
                w.writerow([repr(float(t))] + [repr(float(v)) for v in row])
    out = tmp_path / "m.pkl"
    r = _run(tmp_path / "rows-*.csv", "--target", "target", "--groups", _groups(tmp_path, header), "-o", out)
    assert r.exit_code == 0, r.output
    assert "no distributed client" in r.output
    _check_equal(out, X, y)


def test_local_cluster_of_workers(tmp_path):
    X, y = _data(2, n=600)
    out = tmp_path / "m.pkl"
    r = _run(_npy_shards(tmp_path, X, y, (300, 300)), "--groups", _groups(tmp_path), "--workers", "2", "-o", out)
    assert r.exit_code == 0, r.output
    _check_equal(out, X, y)


def _one_error(r, pattern, out):
    assert r.exit_code != 0
    lines = [ln for ln in r.output.splitlines() if ln.startswith("Error")]
    assert len(lines) == 1, r.output
    assert pattern in lines[0], lines[0]
    assert not out.exists()


def test_bad_shards_name_the_shard_and_write_nothing(tmp_path):
    X, y = _data(3, n=600)
    shards = _npy_shards(tmp_path, X, y, (200, 200, 200))
    groups, out = _groups(tmp_path), tmp_path / "m.pkl"
    good = np.load(shards / "part-001.npy")
    bad = good.copy()
    bad[37, 6] = np.nan
    np.save(shards / "part-001.npy", bad)
    _one_error(_run(shards, "--groups", groups, "-o", out),
               f"shard {shards / 'part-001.npy'}: X contains NaN or Inf at row 237 (row 37 of shard", out)
    np.save(shards / "part-001.npy", good[:, 1:])
    _one_error(_run(shards, "--groups", groups, "-o", out), "part-001.npy has 8 columns, shard", out)
    np.save(shards / "part-001.npy", good.astype(np.float32))
    _one_error(_run(shards, "--groups", groups, "-o", out), "part-001.npy has dtype float32", out)
    np.save(shards / "part-001.npy", good)
    _one_error(_run(tmp_path / "nothing-*.npy", "--groups", groups, "-o", out), "no .npy, .csv or .parquet shards", out)
    _one_error(_run(shards, "--groups", groups, "--target", "x", "-o", out), "must be a column index", out)
    _one_error(_run(shards, "--groups", groups, "--task", "classification", "-o", out), "a classifier is for", out)
    r = _run(shards, "--groups", groups, "-o", out)  # negative control: the repaired shards train
    assert r.exit_code == 0, r.output


def _parquet_shards(tmp_path, X, y, sizes=(250, 200, 250), types=None):
    pa = pytest.importorskip("pyarrow", reason="the optional 'parquet' extra is not installed")
    import pyarrow.parquet as pq
    d = tmp_path / "pq"
    d.mkdir(exist_ok=True)
    start = 0
    for i, m in enumerate(sizes):
        cols = {"target": y[start:start + m]} | {f"f{j}": X[start:start + m, j] for j in range(X.shape[1])}
        pq.write_table(pa.table({k: pa.array(v, type=(types or {}).get(k)) for k, v in cols.items()}),
                       d / f"part-{i:03d}.parquet")
        start += m
    return d


def test_parquet_shards_on_a_scheduler_equal_the_in_memory_fit(tmp_path, scheduler):
    X, y = _data(4, n=700)
    header = [f"f{j}" for j in range(8)]
    out = tmp_path / "m.pkl"
    r = _run(_parquet_shards(tmp_path, X, y), "--target", "target", "--groups", _groups(tmp_path, header),
             "--scheduler", scheduler, "-o", out)
    assert r.exit_code == 0, r.output
    assert "statistics: partition 3/3 done" in r.output
    _check_equal(out, X, y)


def test_bad_parquet_shards_name_the_shard_and_write_nothing(tmp_path):
    pa = pytest.importorskip("pyarrow", reason="the optional 'parquet' extra is not installed")
    import pyarrow.parquet as pq
    X, y = _data(5, n=600)
    header = [f"f{j}" for j in range(8)]
    groups, out = _groups(tmp_path, header), tmp_path / "m.pkl"
    shards = _parquet_shards(tmp_path, X, y, (200, 200, 200))
    part = shards / "part-001.parquet"
    good = pq.read_table(part)
    with_null = good.set_column(7, "f6", pa.array([None if i == 37 else v for i, v in enumerate(X[200:400, 6])]))
    pq.write_table(with_null, part)
    _one_error(_run(shards, "--target", "target", "--groups", groups, "-o", out),
               f"shard {part}: X contains NaN or Inf at row 237 (row 37 of shard", out)
    pq.write_table(good.drop_columns(["f7"]), part)
    _one_error(_run(shards, "--target", "target", "--groups", groups, "-o", out), "part-001.parquet has columns", out)
    pq.write_table(good.set_column(1, "f0", good.column("f0").cast(pa.float32())), part)
    _one_error(_run(shards, "--target", "target", "--groups", groups, "-o", out),
               "part-001.parquet: column 'f0' is float, in shard", out)
    pq.write_table(good.set_column(1, "f0", pa.array(["x"] * 200)), part)
    _one_error(_run(shards, "--target", "target", "--groups", groups, "-o", out), "column 'f0' has type string", out)
    pq.write_table(good, part)
    _one_error(_run(shards, "--groups", groups, "-o", out), "give the target column of the Parquet shards", out)
    _one_error(_run(shards, "--target", "y", "--groups", groups, "-o", out), "target column 'y' is not among", out)
    (shards / "part-002.parquet").write_bytes(b"not parquet at all")
    _one_error(_run(shards, "--target", "target", "--groups", groups, "-o", out), "as Parquet", out)
    pq.write_table(good, shards / "part-002.parquet")
    r = _run(shards, "--target", "target", "--groups", groups, "-o", out)  # negative control: repaired, it trains
    assert r.exit_code == 0, r.output


def test_classification_shards_on_a_scheduler_equal_the_in_memory_fit(tmp_path, scheduler):
    """Every pass of the GLM selection runs on the workers holding the shards; same model as in memory."""
    from edgeseq import AnytimeClassifier
    X, y = _data(5, n=600)
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(float)  # three classes
    out = tmp_path / "m.pkl"
    r = _run(_npy_shards(tmp_path, X, labels, (200, 250, 150)), "--groups", _groups(tmp_path), "--task",
             "classification", "--l2", "0.01", "--scheduler", scheduler, "-o", out)
    assert r.exit_code == 0, r.output
    assert "statistics: partition 3/3 done" in r.output and "selection step 4/4:" in r.output
    assert "passes over the rows, training log-loss" in r.output
    got = load_model(out)
    ref = AnytimeClassifier(GROUPS, COSTS, l2=0.01, group_names=[f"g{i}" for i in range(4)]).fit(X, labels)
    assert got.sequence_.tolist() == ref.sequence_.tolist() and got.classes_.tolist() == [0.0, 1.0, 2.0]
    np.testing.assert_allclose(got.train_log_loss_, ref.train_log_loss_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(got.predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-5)
