"""Training against peers and theory: scikit-learn's OMP, the Doubling theorem, folding, degenerate groups."""

import itertools
import warnings

import numpy as np
import pytest
from sklearn.linear_model import orthogonal_mp

from edgeseq import AnytimeRegressor
from edgeseq.train.linear.basis import build_working_problem
from edgeseq.errors import EdgeseqWarning
from edgeseq.train.linear.selection import select_sequence
from edgeseq.train.linear.stats import sufficient_statistics


@pytest.mark.parametrize("seed", range(5))
def test_omp_order_equals_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    n, D = 120, 10
    X = rng.normal(size=(n, D)) @ (np.eye(D) + 0.3 * rng.normal(size=(D, D)))
    y = X @ rng.normal(size=D) + 0.2 * rng.normal(size=n)
    est = AnytimeRegressor(None, None, method="omp", whiten=False, l2=0.0).fit(X, y)
    Xs = (X - X.mean(0)) / X.std(0)
    coefs = orthogonal_mp(Xs, y - y.mean(), n_nonzero_coefs=D, return_path=True)
    sk_order = []
    for k in range(coefs.shape[1]):
        new = [i for i in np.nonzero(coefs[:, k])[0] if i not in sk_order]
        assert len(new) == 1
        sk_order += new
    assert est.sequence_.tolist() == sk_order


def _orthogonal_design(n, D, rng):
    Q, _ = np.linalg.qr(rng.normal(size=(n, D)))
    Q -= Q.mean(0)
    Q, _ = np.linalg.qr(Q)
    return Q * np.sqrt(n)  # centred, Xᵀ X / n = I exactly (up to rounding)


def test_doubling_picks_never_exceed_cost_so_far():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 12))
    y = X @ rng.normal(size=12) * 3 + rng.normal(size=300)
    costs = rng.uniform(0.5, 20, size=12)
    costs[3] = costs.min() / 2  # make the start unambiguous
    est = AnytimeRegressor([[i] for i in range(12)], costs, method="fr", doubling=True).fit(X, y)
    seq = est.sequence_
    assert costs[seq[0]] == costs.min()
    for j in range(1, len(seq)):
        if j + 1 in est.doubling_violations_:
            assert costs[seq[j]] == min(costs[g] for g in seq[j:])  # recorded fallback: the cheapest left
        else:
            assert costs[seq[j]] <= est.cum_cost_[j] * (1 + 1e-12)


def test_doubling_violation_is_recorded():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 3))
    y = X.sum(1)
    est = AnytimeRegressor([[0], [1], [2]], [1.0, 10.0, 100.0], doubling=True).fit(X, y)
    assert est.sequence_.tolist() == [0, 1, 2]
    assert est.doubling_violations_ == [2, 3]
    assert est.fitted_sequence_.doubling_violations == (2, 3)


def test_doubling_on_the_hard_instance_of_theorem_4_1():
    """Item i costs i and is worth e^i; at every budget B the doubling prefix reaches
    (1 - e^{-γ²/(1+γ)}) of the best value of budget B/4, with γ = 1 on orthogonal features."""
    D, n = 9, 400
    rng = np.random.default_rng(5)
    X = _orthogonal_design(n, D, rng)
    value = np.exp(np.arange(1, D + 1))
    y = X @ np.sqrt(value)
    costs = np.arange(1, D + 1, dtype=float)
    est = AnytimeRegressor([[i] for i in range(D)], costs, method="fr", doubling=True, l2=1e-10).fit(X, y)
    F = est.train_curve_ * value.sum()  # unnormalised explained variance: Σ e^i over the prefix
    # c(g) = i leaves nothing affordable after the first pick (cost 1): that step is a recorded fallback
    assert est.doubling_violations_ == [2]
    factor = 1 - np.exp(-0.5)
    for B in np.linspace(costs.min(), costs.sum(), 400):
        j = est.fitted_sequence_.prefix_for_budget(B)
        opt = max((value[list(S)].sum() for r in range(D + 1) for S in itertools.combinations(range(D), r)
                   if costs[list(S)].sum() <= B / 4), default=0.0)
        assert F[j] >= factor * opt - 1e-6 * value.sum()


def test_folding_raw_space_equals_working_space():
    rng = np.random.default_rng(11)
    n, groups, costs = 150, [[0, 3], [1, 2, 5], [4], [6, 7]], [1.0, 2.0, 0.5, 4.0]
    X = rng.normal(size=(n, 8)) * [1, 100, 1e-3, 5, 1, 2, 3, 1e4] + [0, 1e3, 5, 0, -2, 0, 0, 7]
    y = np.column_stack([X @ rng.normal(size=8), rng.normal(size=n)])
    for whiten in (True, False):
        est = AnytimeRegressor(groups, costs, method="fr", whiten=whiten, l2=1e-3).fit(X, y)
        used = np.concatenate(groups)
        stats = sufficient_statistics(X, y, columns=used)
        prob = build_working_problem(stats, [len(g) for g in groups], whiten)
        res = select_sequence(prob, np.array(costs), method="fr", l2=1e-3)
        Xu = X[:, used] - stats.x_mean
        for j, ws in enumerate(res.prefix_weights):
            z = sum((Xu[:, prob.raw_slices[g]] @ prob.transforms[g] @ w for g, w in zip(res.order, ws)),
                    np.zeros((n, 2)))
            working = stats.y_mean + z * prob.y_scale
            np.testing.assert_allclose(est.predict(X, prefix=j), working, rtol=1e-10, atol=1e-10 * np.abs(y).max())


def test_rank_deficient_duplicated_and_constant_columns():
    rng = np.random.default_rng(2)
    n = 100
    a, b = rng.normal(size=n), rng.normal(size=n)
    X = np.column_stack([a, a, 2 * a + 1,  # group 0: rank one
                         np.full(n, 3.7), np.full(n, -1.0),  # group 1: constant
                         b, rng.normal(size=n)])  # group 2
    y = a + 2 * b + 0.1 * rng.normal(size=n)
    with pytest.warns(EdgeseqWarning, match="g1"):
        est = AnytimeRegressor([[0, 1, 2], [3, 4], [5, 6]], [0.1, 0.1, 1.0], method="fr", l2=0.0).fit(X, y)
    assert est.sequence_[-1] == 1  # the useless group goes last, even though it is cheapest
    assert est.train_curve_[-1] == pytest.approx(est.train_curve_[-2], abs=1e-12)
    assert np.all(np.isfinite(est.coef_path_))
    assert est.train_curve_[-1] > 0.99


def test_collinear_groups_without_ridge_stay_finite():
    rng = np.random.default_rng(4)
    n = 80
    A = rng.normal(size=(n, 3))
    X = np.column_stack([A, A @ [1.0, -2.0, 0.5], A[:, :2] + 0 * A[:, :2]])  # group 1 and 2 inside group 0's span
    y = A @ [1.0, 2.0, 3.0]
    est = AnytimeRegressor([[0, 1, 2], [3], [4, 5]], [1.0, 1.0, 1.0], method="fr", l2=0.0).fit(X, y)
    assert est.sequence_[0] == 0
    np.testing.assert_allclose(est.train_curve_[1:], 1.0, atol=1e-9)
    for j in range(4):
        np.testing.assert_allclose(est.predict(X, prefix=j), y if j else y.mean(), atol=1e-8)


def test_deterministic_and_ties_to_lowest_index():
    rng = np.random.default_rng(9)
    base = rng.normal(size=(60, 1))
    X = np.hstack([base, base, base])  # three identical groups, equal costs: an exact tie
    y = base[:, 0]
    est = AnytimeRegressor([[0], [1], [2]], [1, 1, 1]).fit(X, y)
    assert est.sequence_.tolist() == [0, 1, 2]
    X2, y2 = rng.normal(size=(90, 7)), rng.normal(size=90)
    s1 = AnytimeRegressor([[0, 1], [2, 3, 4], [5, 6]], [1, 2, 3], method="fr").fit(X2, y2).sequence_
    s2 = AnytimeRegressor([[0, 1], [2, 3, 4], [5, 6]], [1, 2, 3], method="fr").fit(X2.copy(), y2).sequence_
    assert s1.tolist() == s2.tolist()


def test_unused_columns_and_label_groups():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(50, 5))
    y = X[:, 1] + X[:, 3]
    labels = np.array([-1, 0, 0, 1, 1])
    est = AnytimeRegressor(labels, [1.0, 2.0]).fit(X, y)
    assert [g.tolist() for g in est.groups_] == [[1, 2], [3, 4]]
    assert np.all(est.coef_[0] == 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        X_nan = X.copy()
        X_nan[:, 0] = np.nan  # the unused column may hold anything at predict time
        np.testing.assert_allclose(est.predict(X_nan), est.predict(X))
    named = AnytimeRegressor(["imu", "imu", "cam", None, "cam"], [1.0, 5.0]).fit(X, y)
    assert named.group_names_ == ["cam", "imu"]


@pytest.mark.parametrize("whiten", [True, False])
@pytest.mark.parametrize("method", ["omp", "fr", "single"])
def test_units_and_offsets_inside_a_group_do_not_matter(whiten, method):
    """Rescaling or shifting single columns (changing units) must not change the model's predictions:
    whitening and the constant-column test are unit-free."""
    rng = np.random.default_rng(12)
    n = 200
    X = rng.normal(size=(n, 5))
    y = X[:, 0] + 0.5 * X[:, 1] - X[:, 3] + 0.1 * rng.normal(size=n)
    groups, costs = [[0, 1], [2, 3], [4]], [1.0, 2.0, 0.5]
    ref = AnytimeRegressor(groups, costs, method=method, whiten=whiten).fit(X, y)
    for scale, shift in [([1e3, 1e-5, 1, 1, 1], 0.0), ([1, 1e-7, 1e4, 1, 1], [1e6, 0, 0, -3e5, 0])]:
        Xs = X * scale + shift
        est = AnytimeRegressor(groups, costs, method=method, whiten=whiten).fit(Xs, y)
        assert est.sequence_.tolist() == ref.sequence_.tolist()
        np.testing.assert_allclose(est.train_curve_, ref.train_curve_, atol=1e-7)
        np.testing.assert_allclose(est.predict(Xs), ref.predict(X), atol=1e-6)
