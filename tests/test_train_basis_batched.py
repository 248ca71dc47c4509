"""The working basis built for many groups at once is the one built group by group, to the bit.

`group_transforms` whitens groups of one size in one stacked decomposition, and
`standardising_map` gives the standardised basis of every column at once; both must equal what
`_group_transform` gives one group at a time (the reference here), constant columns and dropped
directions included, or a fit and its cross-validated choice would depend on how groups are sized.
"""

import numpy as np
import pytest

from edgeseq.train.linear import basis
from edgeseq.train.linear.stats import sufficient_statistics


def _one_by_one(stats, sizes, whiten):
    out, r = [], 0
    for s in sizes:
        rs = slice(r, r + s)
        out.append(basis._group_transform(stats.xx[rs, rs] / stats.n, stats.x_mean[rs], whiten))
        r += s
    return out


def _problem(seed: int):
    """Groups of sizes 1, 3 and 5 mixed, columns of very different scales and offsets; some trials
    with a constant column, a duplicated column (a dropped direction) or a nearly constant one."""
    rng = np.random.default_rng(seed)
    sizes = [int(s) for s in rng.choice([1, 3, 5], size=rng.integers(2, 12))]
    d, n = sum(sizes), int(rng.integers(4, 60))
    X = rng.normal(size=(n, d)) @ (np.eye(d) + 0.5 * rng.normal(size=(d, d)))
    X = X * rng.choice([1e-3, 1.0, 1e4], size=d) + 10 * rng.normal(size=d)
    if seed % 3 == 0:
        X[:, rng.integers(d)] = 7.0
    if seed % 4 == 0:
        X[:, 1] = 2 * X[:, 0]
    if seed % 5 == 0:
        X[:, -1] = 1e6 + 1e-9 * rng.normal(size=n)  # spread far below its mean's rounding: constant
    return sufficient_statistics(X, X[:, 0]), sizes


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("whiten", [True, False])
def test_group_transforms_equal_the_one_by_one_maps(seed, whiten):
    stats, sizes = _problem(seed)
    want = _one_by_one(stats, sizes, whiten)
    got, raw, work = basis.group_transforms(stats, sizes, whiten)
    assert [t.shape for t in got] == [t.shape for t in want]
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert [r.stop - r.start for r in raw] == sizes
    assert [w.stop - w.start for w in work] == [t.shape[1] for t in want]


@pytest.mark.parametrize("seed", range(30))
def test_standardising_map_is_the_standardised_basis(seed):
    stats, sizes = _problem(seed)
    maps = _one_by_one(stats, sizes, False)
    starts = np.cumsum([0, *sizes[:-1]])
    cols = [a + np.argmax(t != 0, axis=0) for t, a in zip(maps, starts)]
    scales = [t[np.argmax(t != 0, axis=0), np.arange(t.shape[1])] for t in maps]
    got_cols, got_scales = basis.standardising_map(stats)
    assert np.array_equal(got_cols, np.concatenate(cols).astype(np.int64))
    assert np.array_equal(got_scales, np.concatenate(scales))


def test_the_problems_reach_every_branch():
    """Negative control: the trials hold groups whitened together and groups left to the one-by-one
    path (a constant column or a dropped direction), so neither side of the equality is vacuous."""
    together = alone = 0
    for seed in range(30):
        stats, sizes = _problem(seed)
        r = 0
        for s in sizes:
            cov = stats.xx[r:r + s, r:r + s] / stats.n
            regular = basis._whitening_maps(cov[None], stats.x_mean[None, r:r + s])[0] is not None
            together += regular
            alone += not regular
            r += s
    assert together > 50 and alone >= 5
