"""`fold_statistics` cut into runs and run on several threads: the same statistics on any thread count.

From `FOLD_PART_MIN_ROWS` rows per run, each fold's pass is cut into `FOLD_PARTS` runs of its rows
that run side by side on the BLAS's threads (one BLAS thread each) and are merged in a fixed order.
The statistics must not depend on how many threads ran them (to the bit), must be each fold's own
(against one pass over the fold's rows, to rounding), and an error in one run must surface as the
one-pass error, without the other runs held to the end.
"""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from edgeseq.errors import InputError
from edgeseq.train.linear import auto
from edgeseq.train.linear.stats import sufficient_statistics

K = 5


def _data(rows: int = K * auto.FOLD_PARTS * auto.FOLD_PART_MIN_ROWS + 7, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 6)) * [1.0, 1e-3, 1e3, 1.0, 1.0, 1.0] + [0.0, 0.0, 0.0, 1e6, 5.0, 0.0]
    return X, X @ rng.normal(size=6) + rng.normal(size=rows)


def _arrays(s):
    return [s.n, s.x_mean, s.y_mean, s.xx, s.xy, s.yy]


def test_the_runs_are_cut_on_this_data():
    """Negative control for the tests below: this data is cut into runs; a tenth of it is not."""
    X, _ = _data()
    assert auto.fold_parts(X.shape[0], K) == auto.FOLD_PARTS > 1
    assert auto.fold_parts(X.shape[0] // 10, K) == 1


def test_one_and_two_threads_give_the_same_statistics_to_the_bit():
    X, y = _data()
    got = {}
    for threads in (1, 2):
        with threadpool_limits(threads, "blas"):
            got[threads] = auto.fold_statistics(X, y, None, K)
    for a, b in zip(got[1], got[2]):
        assert all(np.array_equal(u, v) for u, v in zip(_arrays(a), _arrays(b)))


def test_each_fold_holds_its_own_rows():
    """Against one pass over the fold's rows i mod K = f (the offset column included: its mean is
    merged in the shifted frame), to rounding."""
    X, y = _data()
    with threadpool_limits(2, "blas"):
        folds = auto.fold_statistics(X, y, None, K)
    for f, fold in enumerate(folds):
        ref = sufficient_statistics(X[f::K], y[f::K])
        assert fold.n == ref.n == X[f::K].shape[0]
        for u, v in zip(_arrays(fold)[1:], _arrays(ref)[1:]):
            assert np.allclose(u, v, rtol=1e-10, atol=1e-9 * np.abs(v).max())
    assert not np.allclose(folds[0].xx, folds[1].xx, rtol=1e-6)  # the folds are different rows


def test_an_error_in_one_run_is_the_one_pass_error():
    X, y = _data()
    X[K * 3 + 2, 4] = np.nan  # row 17: fold 2, its first run
    with pytest.raises(InputError) as one_pass:
        sufficient_statistics(X[2::K], y[2::K])
    with threadpool_limits(2, "blas"), pytest.raises(InputError) as runs:
        auto.fold_statistics(X, y, None, K)
    assert str(runs.value) == str(one_pass.value)
