"""The statistics pass: chunked = one-shot = numpy's own moments; iterables, memmaps and merges."""

import numpy as np
import pytest

from edgeseq import AnytimeRegressor
from edgeseq.errors import InputError
from edgeseq.train.stats import sufficient_statistics


def _data(seed=0, n=257, d=6, p=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1, 1e3, 1e-3, 1, 1, 1][:d] + [1e6, 0, 3, -5, 0, 2][:d]
    return X, rng.normal(size=(n, p))


def _check_against_numpy(s, X, Y):
    n = X.shape[0]
    np.testing.assert_allclose(s.x_mean, X.mean(0), rtol=1e-12, atol=1e-12)
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    scale = np.sqrt(np.outer(np.diag(Xc.T @ Xc), np.diag(Xc.T @ Xc)))
    np.testing.assert_allclose(s.xx / scale, (Xc.T @ Xc) / scale, atol=1e-10)
    np.testing.assert_allclose(s.xy, Xc.T @ Yc, rtol=1e-9, atol=1e-9 * np.abs(Xc.T @ Yc).max())
    np.testing.assert_allclose(s.yy, Yc.T @ Yc, rtol=1e-10)
    assert s.n == n


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 256, 10_000])
def test_chunked_equals_one_shot(chunk_rows):
    X, Y = _data()
    _check_against_numpy(sufficient_statistics(X, Y, chunk_rows=chunk_rows), X, Y)


def test_iterable_of_chunks_and_merge():
    X, Y = _data(1)
    pieces = [(X[i:i + 50], Y[i:i + 50]) for i in range(0, len(X), 50)]
    s_iter = sufficient_statistics(iter(pieces))
    _check_against_numpy(s_iter, X, Y)
    half = len(pieces) // 2
    merged = sufficient_statistics(pieces[:half]).merge(sufficient_statistics(pieces[half:]))
    _check_against_numpy(merged, X, Y)
    assert sufficient_statistics(X, Y).fingerprint() == sufficient_statistics(X.copy(), Y).fingerprint()
    X2 = X.copy()
    X2[0, 0] += 1.0
    assert sufficient_statistics(X2, Y).fingerprint() != sufficient_statistics(X, Y).fingerprint()


def test_columns_subset():
    X, Y = _data(2)
    cols = [4, 0, 2]
    s = sufficient_statistics(X, Y, columns=cols, chunk_rows=10)
    _check_against_numpy(s, X[:, cols], Y)


def test_memmap_fit_equals_array_fit(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 8))
    y = X @ rng.normal(size=8) + rng.normal(size=500)
    mm = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.float64, shape=X.shape)
    mm[:] = X
    mm.flush()
    mm = np.load(tmp_path / "X.npy", mmap_mode="r")
    groups, costs = [[0, 1], [2, 3, 4], [5], [6, 7]], [1, 2, 3, 4]
    a = AnytimeRegressor(groups, costs, method="fr").fit(X, y)
    b = AnytimeRegressor(groups, costs, method="fr").fit(mm, y)
    assert a.sequence_.tolist() == b.sequence_.tolist()
    np.testing.assert_allclose(a.coef_path_, b.coef_path_, rtol=1e-12, atol=1e-14)


def test_fit_from_stats_equals_fit():
    X, Y = _data(4, d=5, p=1)
    groups, costs = [[0, 1], [2], [3, 4]], [1.0, 1.0, 2.0]
    used = np.concatenate(groups)
    pieces = ((X[i:i + 40, used], Y[i:i + 40, 0]) for i in range(0, len(X), 40))
    a = AnytimeRegressor(groups, costs).fit_from_stats(sufficient_statistics(pieces), n_features=5)
    b = AnytimeRegressor(groups, costs).fit(X, Y[:, 0])
    assert a.sequence_.tolist() == b.sequence_.tolist()
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-7, atol=1e-9)  # X has a 1e6 offset column
    with pytest.raises(InputError, match="statistics cover"):
        AnytimeRegressor([[0, 1], [3, 4]], [1.0, 2.0]).fit_from_stats(sufficient_statistics(X, Y), n_features=5)


def test_nan_and_inf_are_reported_by_column():
    X, Y = _data(5)
    X[10, 3] = np.nan
    with pytest.raises(InputError, match=r"column\(s\) \[3\]"):
        sufficient_statistics(X, Y, chunk_rows=16)
    X[10, 3] = 0
    X[20, 1] = np.inf
    with pytest.raises(InputError, match=r"\[1\]"):
        sufficient_statistics(X, Y)
    Y[0, 0] = np.nan
    X[20, 1] = 0
    with pytest.raises(InputError, match="y contains NaN"):
        sufficient_statistics(X, Y)


def test_bad_chunks():
    with pytest.raises(InputError, match="no data"):
        sufficient_statistics(iter([]))
    with pytest.raises(InputError, match="columns"):
        sufficient_statistics([(np.ones((3, 2)), np.ones(3)), (np.ones((3, 3)), np.ones(3))])
    with pytest.raises(InputError, match="rows but y has"):
        sufficient_statistics([(np.ones((3, 2)), np.ones(4))])
