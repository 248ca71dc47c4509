"""Sparse baseline: KKT conditions checked in n-space, scikit-learn Lasso/LinearRegression references,
λ_max exactness, path-to-sequence reading and folding into raw-space FittedSequence objects."""

import numpy as np
import pytest
from sklearn.linear_model import Lasso, LinearRegression

from edgeseq.errors import GroupSpecError, InputError
from edgeseq.evaluate.anytime import anytime_curve
from edgeseq.train.linear.sparse import kkt_violation, solve_group_lasso, sparse_path

KKT_TOL = 1e-6  # the solver stops at 1e-7 relative KKT violation; n-space recomputation adds rounding


def _data(seed=0, n=300, P=1):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, 4))
    X = np.column_stack([base[:, 0], base[:, 0] + 0.3 * rng.normal(size=n),  # correlated pair
                         base[:, 1] * 5 + 2, base[:, 2], base[:, 3] * 0.1, rng.normal(size=(n, 3)),
                         rng.normal(size=n) * 3 - 1])
    W = rng.normal(size=(X.shape[1], P))
    Y = X @ W + rng.normal(size=(n, P))
    groups = [[0, 1], [2], [3, 4], [5, 6, 7], [8]]
    costs = [1.0, 2.0, 0.5, 4.0, 3.0]
    return X, (Y[:, 0] if P == 1 else Y), groups, costs


def _working_design(sp, X, Y):
    """Z and ỹ rebuilt in n-space from the raw data, independently of the solver's K and q."""
    prob = sp.meta["problem"]
    Y2 = Y.reshape(len(Y), -1)
    cols = np.concatenate([np.asarray(g) for g in sp.path_sequence.group_columns])
    Xc = X[:, cols] - X[:, cols].mean(axis=0)
    Z = np.column_stack([Xc[:, rs] @ T for rs, T in zip(prob.raw_slices, prob.transforms)])
    yt = (Y2 - Y2.mean(axis=0)) / Y2.std(axis=0)
    return prob, Z, yt


@pytest.mark.parametrize("whiten, P", [(True, 1), (False, 1), (True, 2)])
def test_every_path_point_satisfies_kkt_in_n_space(whiten, P):
    X, Y, groups, costs = _data(P=P)
    sp = sparse_path(X, Y, groups, costs, whiten=whiten, n_lambdas=12)
    prob, Z, yt = _working_design(sp, X, Y)
    n = X.shape[0]
    for lam, w in zip(sp.lambdas, sp.coef_path):
        corr = Z.T @ (yt - Z @ w) / n  # X_gᵀ r / n
        for g, s in enumerate(prob.slices):
            nw = np.linalg.norm(w[s])
            if nw > 0:
                np.testing.assert_allclose(corr[s], lam * costs[g] * w[s] / nw, atol=KKT_TOL * lam * costs[g])
            else:
                assert np.linalg.norm(corr[s]) <= lam * costs[g] * (1 + KKT_TOL)
    assert sp.n_activated == len(groups)  # λ_min = 1e-3 λ_max frees every group here


def test_lambda_max_is_exact():
    X, y, groups, costs = _data(1)
    sp = sparse_path(X, y, groups, costs, n_lambdas=3)
    prob = sp.meta["problem"]
    ratios = [np.linalg.norm(prob.q[s]) / c for s, c in zip(prob.slices, costs)]
    assert sp.lambdas[0] == pytest.approx(max(ratios), rel=1e-14)
    assert not np.any(sp.coef_path[0])  # w = 0 is optimal at λ_max ...
    w, _ = solve_group_lasso(prob.K, prob.q, prob.slices, np.asarray(costs), 0.999 * sp.lambdas[0])
    active = [g for g, s in enumerate(prob.slices) if np.any(w[s])]
    assert active == [int(np.argmax(ratios))]  # ... and just below it only the argmax group enters


@pytest.mark.parametrize("lam_frac", [0.5, 0.1, 0.02])
def test_single_column_groups_with_unit_costs_match_sklearn_lasso(lam_frac):
    X, y, _, _ = _data(2)
    D = X.shape[1]
    sp = sparse_path(X, y, [[j] for j in range(D)], np.ones(D), n_lambdas=2, lambda_min_ratio=lam_frac)
    lam = sp.lambdas[-1]
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    ref = Lasso(alpha=lam, fit_intercept=False, tol=1e-14, max_iter=100_000).fit(Xs, ys).coef_
    prob = sp.meta["problem"]
    signs = np.array([np.sign(T[0, 0]) for T in prob.transforms])  # whitening may flip a column's sign
    np.testing.assert_allclose(sp.coef_path[-1][:, 0] * signs, ref, atol=1e-6)


def test_path_and_refit_sequences_fold_to_raw_space():
    X, y, groups, costs = _data(3)
    sp = sparse_path(X, y, groups, costs, n_lambdas=15, l2=0.0)
    prob, Z, yt = _working_design(sp, X, y)
    path, refit = sp.path_sequence, sp.refit_sequence
    assert path.order.tolist() == refit.order.tolist() == sp.order.tolist()
    for j in range(path.n_prefixes):
        i = sp.prefix_path_index[j]
        w = np.zeros_like(prob.q) if i < 0 else sp.coef_path[i]
        expected = (Z @ w)[:, 0] * y.std() + y.mean()  # training-space prediction, unscaled
        np.testing.assert_allclose(path.linear(X, j)[:, 0], expected, atol=1e-9 * y.std())
        # the path solution of prefix j uses only the first j groups
        used = set(sp.order[:j].tolist())
        assert all(not np.any(w[s]) for g, s in enumerate(prob.slices) if g not in used)
        # the refit with l2 = 0 is ordinary least squares on the prefix's raw columns
        cols = refit.prefix_columns(j)
        ref = LinearRegression().fit(X[:, cols], y).predict(X[:, cols]) if j else np.full(len(y), y.mean())
        np.testing.assert_allclose(refit.linear(X, j)[:, 0], ref, atol=1e-8 * y.std())


def test_order_is_first_activation_and_train_metrics_match_the_curve():
    X, y, groups, costs = _data(4)
    sp = sparse_path(X, y, groups, costs, n_lambdas=30)
    entries = sp.entry_index[sp.order]
    assert np.all(np.diff(entries[entries >= 0]) >= 0)  # first activations are in path order
    for seq in (sp.path_sequence, sp.refit_sequence):
        c = anytime_curve(seq, X, y)
        train = [m["explained_variance"] for m in seq.train_metrics]
        np.testing.assert_allclose(c.values, train, atol=1e-10)
    assert sp.path_sequence.provenance["method"] == "sparse-path"
    assert sp.refit_sequence.provenance["method"] == "sparse-refit"


def test_never_activated_and_constant_groups_are_appended():
    X, y, groups, costs = _data(5)
    X = np.column_stack([X, np.full(len(y), 7.0)])  # a constant group: no usable direction
    groups = groups + [[X.shape[1] - 1]]
    costs = costs[:-1] + [1e6] + [1.0]  # group 4 so expensive it never enters
    sp = sparse_path(X, y, groups, costs, n_lambdas=5, lambda_min_ratio=0.05)
    assert sp.order[-1] == 5 and sp.entry_index[5] == -1
    assert sp.entry_index[4] == -1 and 4 in sp.order.tolist()
    assert sp.n_activated == 4


def test_kkt_violation_detects_a_wrong_solution():
    X, y, groups, costs = _data(6)
    sp = sparse_path(X, y, groups, costs, n_lambdas=4)
    prob = sp.meta["problem"]
    w = sp.coef_path[-1]
    assert np.max(kkt_violation(prob.K, prob.q, w, prob.slices, np.asarray(costs), sp.lambdas[-1])) <= 1e-7
    assert np.max(kkt_violation(prob.K, prob.q, 1.1 * w, prob.slices, np.asarray(costs), sp.lambdas[-1])) > 1e-3


@pytest.mark.parametrize("kw, err, match", [
    (dict(n_lambdas=1), InputError, "n_lambdas"),
    (dict(lambda_min_ratio=0.0), InputError, "lambda_min_ratio"),
    (dict(l2=-1.0), InputError, "l2"),
    (dict(costs=[1, 2, 3]), GroupSpecError, "costs"),
    (dict(groups=[[0, 1], [1]], costs=[1, 1]), GroupSpecError, "overlap"),
])
def test_bad_arguments(kw, err, match):
    X, y, groups, costs = _data(7, n=40)
    args = {"groups": groups, "costs": costs, **kw}
    with pytest.raises(err, match=match):
        sparse_path(X, y, **args)


def test_bad_data():
    X, y, groups, costs = _data(8, n=40)
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(InputError, match="NaN"):
        sparse_path(Xn, y, groups, costs)
    with pytest.raises(InputError, match="constant"):
        sparse_path(X, np.ones(len(y)), groups, costs)
    with pytest.raises(InputError, match="shape"):
        sparse_path(X, y[:-1], groups, costs)


def test_anderson_acceleration_reaches_the_plain_bcd_solution():
    X, y, groups, costs = _data(9, P=2)
    sp = sparse_path(X, y, groups, costs, n_lambdas=3, lambda_min_ratio=0.01)
    prob = sp.meta["problem"]
    c = np.asarray(costs)
    w_plain, n_plain = solve_group_lasso(prob.K, prob.q, prob.slices, c, sp.lambdas[-1], anderson=0, tol=1e-9)
    w_acc, n_acc = solve_group_lasso(prob.K, prob.q, prob.slices, c, sp.lambdas[-1], tol=1e-9)
    np.testing.assert_allclose(w_acc, w_plain, atol=1e-7)
    with pytest.raises(InputError, match="did not reach"):
        solve_group_lasso(prob.K, prob.q, prob.slices, c, sp.lambdas[-1], anderson=0, tol=1e-12, max_sweeps=5)


def test_optional_skglm_backend_agrees_with_the_builtin_solver():
    pytest.importorskip("skglm", reason="skglm (the optional 'sparse' extra) is not installed")
    X, y, groups, costs = _data(10)
    ours = sparse_path(X, y, groups, costs, n_lambdas=8)
    ref = sparse_path(X, y, groups, costs, n_lambdas=8, solver="skglm")
    np.testing.assert_allclose(ref.coef_path, ours.coef_path, atol=1e-6)
    assert ref.order.tolist() == ours.order.tolist()
    with pytest.raises(InputError, match="one output"):
        sparse_path(X, np.column_stack([y, -y]), groups, costs, solver="skglm")


def test_unknown_solver_is_rejected():
    X, y, groups, costs = _data(11, n=40)
    with pytest.raises(InputError, match="solver"):
        sparse_path(X, y, groups, costs, solver="spams")
