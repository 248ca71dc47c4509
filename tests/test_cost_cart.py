"""Cost-penalised histogram CART: the group is charged λ·c_g once (first tree / first split that uses
it), paid groups are free, the split is the brute-force best, and the fitted leaves equal the
TreeEnsemble evaluator's (same float32 x <= t decisions)."""

import numpy as np
import pytest

from edgeseq.train.trees.cost_cart import Binner, BinnedRows, fit_cost_tree
from edgeseq.forms.trees import TreeEnsemble


def problem(seed=0, n=400):
    """x0 (group 0, cost 1) explains a little of the target, x1 (group 1, cost 10) a lot; x2 is in group 1 too."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = 1.0 * (X[:, 0] > 0) + 2.0 * (X[:, 1] > 0.3) + 1.0 * (X[:, 2] > -0.5) + 0.1 * rng.normal(size=n)
    return X, y


COL_GROUP = np.array([0, 1, 1])
COSTS = np.array([1.0, 10.0])


def fit(X, y, paid, lam, depth=1, **kw):
    b = Binner(X, np.arange(3), max_bins=64)
    return fit_cost_tree(b, b.codes(X), y, COL_GROUP, COSTS, paid, lam, max_depth=depth, **kw)


def test_expensive_group_is_charged_until_paid():
    X, y = problem()
    free = fit(X, y, paid=set(), lam=0.0)
    assert free.feature[0] == 1 and free.new_groups == (1,)  # unpenalised: the strong, costly feature
    gain1 = split_gain(X, y, 1)
    gain0 = split_gain(X, y, 0)
    lo, hi = (gain1 - gain0) / 9.0, gain0  # λ in (lo, hi): x1's penalised gain below x0's, x0's still > 0
    assert lo < hi
    lam = (lo + hi) / 2
    cheap = fit(X, y, paid=set(), lam=lam)
    assert cheap.feature[0] == 0 and cheap.new_groups == (0,)
    paid = fit(X, y, paid={1}, lam=lam)  # the same λ once group 1 is paid: free again
    assert paid.feature[0] == 1 and paid.new_groups == ()
    none = fit(X, y, paid=set(), lam=1.0)  # nothing buys its cost: a single leaf
    assert none.n_splits == 0 and none.value[0] == pytest.approx(y.mean())


def split_gain(X, y, col):
    """Best single-split SSE reduction on one column, as a fraction of the total, by brute force."""
    sst = np.sum((y - y.mean()) ** 2)
    best = 0.0
    x = X[:, col].astype(np.float32)
    for t in np.unique(x)[:-1]:
        left = x <= t
        if left.sum() < 5 or (~left).sum() < 5:
            continue
        red = sst - np.sum((y[left] - y[left].mean()) ** 2) - np.sum((y[~left] - y[~left].mean()) ** 2)
        best = max(best, red / sst)
    return best


def test_root_split_is_brute_force_best_with_all_bins():
    X, y = problem(seed=3, n=60)  # 60 distinct values < 64 bins: every threshold is a candidate
    tree = fit(X, y, paid={0, 1}, lam=0.0)
    f = int(tree.feature[0])
    assert split_gain(X, y, f) == pytest.approx(max(split_gain(X, y, c) for c in range(3)), rel=1e-9)
    left = X[:, f].astype(np.float32) <= tree.threshold[0]
    sst = np.sum((y - y.mean()) ** 2)
    got = (sst - np.sum((y[left] - y[left].mean()) ** 2) - np.sum((y[~left] - y[~left].mean()) ** 2)) / sst
    assert got == pytest.approx(split_gain(X, y, f), rel=1e-9)


def test_group_is_charged_once_within_a_tree():
    """Depth 2: after the root pays group 1, a second split on x2 (also group 1) is free, while the
    same split would not pay λ·c_1 on its own."""
    X, y = problem(seed=1)
    lam = 0.05  # 10 × 0.05 = 50% of the variance: only the first, strong x1 split clears it
    tree = fit(X, y, paid=set(), lam=lam, depth=2)
    used = tree.feature[tree.feature >= 0].tolist()
    assert used[0] == 1 and 2 in used[1:] and tree.new_groups == (1,)
    # negative control: x2 alone (x1 removed from the candidates) cannot pay for group 1 at this λ
    b = Binner(X, np.array([0, 2]), max_bins=64)
    alone = fit_cost_tree(b, b.codes(X), y, np.array([0, 1]), COSTS, set(), lam, max_depth=1)
    assert 2 not in alone.feature.tolist()


def test_leaves_match_the_ensemble_evaluator_exactly():
    X, y = problem(seed=2)
    X[:50, 1] = np.round(X[:50, 1], 1)  # ties at thresholds
    b = Binner(X, np.arange(3), max_bins=16)
    tree = fit_cost_tree(b, b.codes(X), y, COL_GROUP, COSTS, {0, 1}, 0.0, max_depth=3, min_samples_leaf=3)
    ens = TreeEnsemble(tree.feature, tree.threshold, tree.left, tree.right, tree.value, roots=[0], target=[0],
                       n_features=3, n_targets=1)
    pred = ens.predict(X)[:, 0]
    # every leaf's value is the mean target of the rows the evaluator sends there
    for v in np.unique(pred):
        assert v == pytest.approx(y[pred == v].mean(), rel=1e-12)
    assert ens.depth[0] <= 3 and tree.n_splits >= 3


def test_binner_codes_agree_with_float32_comparison():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 1))
    b = Binner(X, np.array([0]), max_bins=8)
    Xt = np.concatenate([X, b.edges[0][:, None].astype(np.float64)])  # rows exactly at each edge
    codes = b.codes(Xt)[:, 0]
    for k, e in enumerate(b.edges[0]):
        np.testing.assert_array_equal(codes <= k, Xt[:, 0].astype(np.float32) <= e)


def _bincount_histograms(codes, t, rows, n_bins):
    """The per-node statistics as a plain bincount over the node's rows (the independent reference)."""
    m = codes.shape[1]
    flat = codes[rows].astype(np.int64) + (np.arange(m) * n_bins)[None, :]
    sums = np.bincount(flat.ravel(), weights=np.repeat(t[rows], m), minlength=m * n_bins).reshape(m, n_bins)
    counts = np.bincount(flat.ravel(), minlength=m * n_bins).reshape(m, n_bins)
    return sums, counts


def test_level_histograms_equal_a_bincount_per_node_bit_for_bit():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 7))
    X[:, 2] = np.round(X[:, 2])  # few distinct values: many empty bins
    b = Binner(X, np.arange(7), max_bins=16)
    codes = b.codes(X)
    binned = BinnedRows(codes, b.n_bins)
    t = rng.normal(size=300)
    nodes = [np.arange(300)] + [np.sort(rng.choice(300, size=k, replace=False)) for k in (1, 40, 150, 7, 299)]
    assert len(nodes) > BinnedRows.NODES_PER_PRODUCT  # more than one product per call is exercised
    got = binned.histograms(t, nodes)
    for rows, (sums, counts) in zip(nodes, got):
        ref_sums, ref_counts = _bincount_histograms(codes, t, rows, b.n_bins)
        assert np.array_equal(sums, ref_sums) and np.array_equal(counts, ref_counts)
    # negative control: a node's statistics are not those of all rows
    assert not np.array_equal(got[2][0], got[0][0])


@pytest.mark.parametrize("depth", [1, 3, 5])
def test_prebuilt_binned_rows_fit_the_same_tree_as_plain_codes(depth):
    X, y = problem(seed=4, n=500)
    b = Binner(X, np.arange(3), max_bins=32)
    codes = b.codes(X)
    a = fit_cost_tree(b, codes, y, COL_GROUP, COSTS, set(), 0.001, max_depth=depth, min_samples_leaf=3)
    c = fit_cost_tree(b, BinnedRows(codes, b.n_bins), y, COL_GROUP, COSTS, set(), 0.001, max_depth=depth,
                      min_samples_leaf=3)
    assert a.n_splits >= 2 ** depth - 1 if depth <= 3 else a.n_splits > 4
    for f in ("feature", "threshold", "left", "right", "value"):
        assert np.array_equal(getattr(a, f), getattr(c, f))
    assert a.new_groups == c.new_groups
