"""The statistics pass: chunked = one-shot = numpy's own moments; iterables, memmaps and merges."""

import numpy as np
import pytest

from edgeseq import AnytimeRegressor
from edgeseq.errors import InputError
from edgeseq.train.linear.stats import sufficient_statistics


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
    a = AnytimeRegressor(groups, costs, l2=1e-5, whiten=True).fit_from_stats(sufficient_statistics(pieces), n_features=5)
    b = AnytimeRegressor(groups, costs, l2=1e-5, whiten=True).fit(X, Y[:, 0])
    assert a.sequence_.tolist() == b.sequence_.tolist()
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-7, atol=1e-9)  # X has a 1e6 offset column
    with pytest.raises(InputError, match="statistics cover"):
        AnytimeRegressor([[0, 1], [3, 4]], [1.0, 2.0], l2=1e-5, whiten=True).fit_from_stats(sufficient_statistics(X, Y), n_features=5)


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


# ---------------------------------------------------------------- the copy-free chunk kernel
def _offset_data(seed=7, n=3000, plain=8):
    """Columns a raw Gram cannot handle: offset 1e6 with spread 1e-3, offset 1e4 with spread 1, and plain ones."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 5 + plain))
    Z[:, 1] += 0.5 * Z[:, 0]  # correlated, so cross moments matter too
    Z[:, 3] += 0.3 * Z[:, 1]
    X = Z * ([1e-3, 1e-3, 1.0, 1.0, 1e2] + [1.0] * plain) + ([1e6, -1e6, 1e4, 0.5, 3.0] + [0.0] * plain)
    Y = np.column_stack([Z[:, 0] + 0.1 * rng.normal(size=n), 1e5 + Z[:, 2]])
    return X, Y


def _brute(X, Y):
    """Two-pass float64 reference: centre with the exact mean (math.fsum), then multiply."""
    import math
    mx = np.array([math.fsum(c) / len(c) for c in X.T])
    my = np.array([math.fsum(c) / len(c) for c in Y.T])
    Xc, Yc = X - mx, Y - my
    return mx, Xc.T @ Xc, Xc.T @ Yc, Yc.T @ Yc


def _close_to_brute(s, X, Y, tol=1e-9):
    mx, xx, xy, yy = _brute(X, Y)
    np.testing.assert_allclose(s.x_mean, mx, rtol=1e-13)
    d = np.sqrt(np.diag(xx))
    np.testing.assert_allclose(s.xx / np.outer(d, d), xx / np.outer(d, d), atol=tol)  # correlation scale
    e = np.sqrt(np.diag(yy))
    np.testing.assert_allclose(s.xy / np.outer(d, e), xy / np.outer(d, e), atol=tol)
    np.testing.assert_allclose(s.yy, yy, rtol=1e-12)


@pytest.mark.parametrize("chunk_rows", [97, 1000, 5000])
def test_offset_columns_match_brute_force_on_the_shifted_path(chunk_rows, monkeypatch):
    import edgeseq.train.linear.chunk_moments as cm
    paths = []
    shifted, copy = cm._shifted, cm._centred_copy
    monkeypatch.setattr(cm, "_shifted", lambda *a: paths.append("shift") or shifted(*a))
    monkeypatch.setattr(cm, "_centred_copy", lambda *a: paths.append("copy") or copy(*a))
    X, Y = _offset_data()
    s = sufficient_statistics(X, Y, chunk_rows=chunk_rows)
    _close_to_brute(s, X, Y)
    assert paths and set(paths) == {"shift"}  # the fast path really ran, on every chunk
    ref = cm.Reference.from_probe(X, Y)
    assert ref.cols.tolist() == [0, 1, 2]  # only the offset columns are copied


def test_mostly_offset_columns_take_the_exact_copy(monkeypatch):
    """3 offset columns of 5: shifting them apart would cost more than one copy of the chunk."""
    import edgeseq.train.linear.chunk_moments as cm
    paths = []
    copy = cm._centred_copy
    monkeypatch.setattr(cm, "_centred_copy", lambda *a: paths.append("copy") or copy(*a))
    X, Y = _offset_data(plain=0)
    _close_to_brute(sufficient_statistics(X, Y, chunk_rows=1000), X, Y)
    assert paths == ["copy"] * 3


def test_rank_one_correction_of_a_raw_gram_is_not_enough():
    """Negative control: the tolerance above rejects the copy-free shortcut without the per-column shift."""
    X, Y = _offset_data()
    n = X.shape[0]
    m = X.mean(0)
    raw = X.T @ X - n * np.outer(m, m)
    _, xx, _, _ = _brute(X, Y)
    d = np.sqrt(np.diag(xx))
    assert np.abs(raw / np.outer(d, d) - xx / np.outer(d, d)).max() > 1e-3


def test_drifting_chunks_fall_back_to_the_exact_copy(monkeypatch):
    """Rows sorted so later chunks sit thousands of deviations from the first chunk's reference."""
    import edgeseq.train.linear.chunk_moments as cm
    paths = []
    copy = cm._centred_copy
    monkeypatch.setattr(cm, "_centred_copy", lambda *a: paths.append("copy") or copy(*a))
    rng = np.random.default_rng(8)
    X = np.column_stack([np.repeat([0.0, 1e7, -3e4], 400) + rng.normal(size=1200) * 1e-2,
                         rng.normal(size=1200)])
    Y = rng.normal(size=(1200, 1))
    s = sufficient_statistics(X, Y, chunk_rows=400)
    _close_to_brute(s, X, Y)
    # chunk 2 drifted (1e7 against a spread of 1e-2 so far) and took the exact copy; chunk 3's -3e4
    # lies within 32 standard deviations of the spread merged by then (chunk 2's jump), so its raw
    # products round no worse than the sums already carry: fast path, and still close to brute force
    assert len(paths) == 1


@pytest.mark.parametrize("offsets", [False, True])
def test_equals_the_centred_copy_implementation(offsets):
    """The fast path and the previous algorithm (centre every chunk in a copy) agree to rounding."""
    from edgeseq.train.linear.stats import finish_statistics, shifted_statistics
    X, Y = _offset_data(9, n=2000) if offsets else _data(9, n=2000)
    pieces = [(X[i:i + 300], Y[i:i + 300]) for i in range(0, len(X), 300)]
    old = finish_statistics(*shifted_statistics(pieces, fast=False))
    new = sufficient_statistics(X, Y, chunk_rows=300)
    np.testing.assert_allclose(new.x_mean, old.x_mean, rtol=1e-14)
    d = np.sqrt(np.diag(old.xx))
    np.testing.assert_allclose(new.xx / np.outer(d, d), old.xx / np.outer(d, d), atol=1e-10)
    np.testing.assert_allclose(new.yy, old.yy, rtol=1e-12)


@pytest.mark.parametrize("cols", [[1, 2, 3], [3, 1, 2, 0], [0, 5], [5, 4, 3, 2, 1, 0]])
def test_column_spans_and_reorderings(cols):
    X, Y = _data(10, d=6)
    s = sufficient_statistics(X, Y, columns=cols, chunk_rows=50)
    _check_against_numpy(s, X[:, cols], Y)
    with pytest.raises(InputError, match="indices in 0..5"):
        sufficient_statistics(X, Y, columns=[0, 6])


def test_float32_and_memmap_chunks_use_the_same_kernel(tmp_path):
    X, Y = _offset_data(11, n=600)
    X32 = X[:, 3:].astype(np.float32)
    _check_against_numpy(sufficient_statistics(X32, Y, chunk_rows=128), X32.astype(np.float64), Y)


def test_progress_by_tenth_of_the_rows_and_by_chunk():
    X, Y = _data(12, n=1000)
    lines = []
    sufficient_statistics(X, Y, chunk_rows=30, progress=lines.append)
    assert len(lines) == 10 and lines[-1] == "statistics: 1,000/1,000 rows"
    assert lines[0] == "statistics: 120/1,000 rows"  # the first chunk boundary past a tenth
    lines.clear()
    sufficient_statistics([(X[:600], Y[:600]), (X[600:], Y[600:])], progress=lines.append)
    assert lines == ["statistics: 600 rows", "statistics: 1,000 rows"]


@pytest.mark.parametrize("d", [300, 2049])
def test_narrow_chunks_keep_to_numpys_blas_and_wide_ones_sum_in_place(d, monkeypatch):
    """numpy and scipy each bring an OpenBLAS with its own thread pool: alternating them chunk by chunk
    left one pool spinning while the other worked. Up to 2,048 columns the pass calls numpy only
    (scipy's in-place syrk must not run); wider, it sums in place with scipy's syrk (the control:
    the same spy sees it), and both give numpy's own moments."""
    import scipy.linalg.blas

    from edgeseq.train.linear.chunk_moments import CHUNK_GRAM_MAX_COLUMNS

    assert 300 <= CHUNK_GRAM_MAX_COLUMNS < 2049
    calls = []
    real = scipy.linalg.blas.dsyrk

    def spy(*args, **kwargs):
        calls.append(args[1].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(scipy.linalg.blas, "dsyrk", spy)
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(60, d)) + 3.0, rng.normal(size=(60, 1))
    s = sufficient_statistics(X, Y, chunk_rows=20)
    assert bool(calls) == (d > CHUNK_GRAM_MAX_COLUMNS), calls
    _check_against_numpy(s, X, Y)
