"""Every selection method against a brute-force implementation written here from the definitions
(docs/design.md): whitening by eigendecomposition of the data itself, a fresh ridge solve per prefix and
per candidate, scores computed on the n rows. Nothing from edgeseq's training code is reused."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from edgeseq import AnytimeRegressor

TIE_RTOL = 1e-9


def _whiten(Xc, whiten):
    n = Xc.shape[0]
    if not whiten:
        s = Xc.std(axis=0)
        keep = s > 1e-12 * max(1.0, np.abs(Xc).max())
        return Xc[:, keep] / s[keep]
    S = Xc.T @ Xc / n
    ev, U = np.linalg.eigh(S)
    if ev[-1] <= 1e-24:
        return np.zeros((n, 0))
    keep = ev > 1e-10 * ev[-1]
    return Xc @ (U[:, keep] / np.sqrt(ev[keep]))


def _ridge(Zs, yt, l2):
    n = Zs.shape[0]
    if Zs.shape[1] == 0:
        return np.zeros((0, yt.shape[1]))
    return np.linalg.solve(Zs.T @ Zs / n + l2 * np.eye(Zs.shape[1]), Zs.T @ yt / n)


def _objective(Zs, yt, l2):
    w = _ridge(Zs, yt, l2)
    return 0.5 * float(np.sum((Zs.T @ yt / Zs.shape[0]) * w)), w


def brute_force(X, y, groups, costs, method, whiten=True, l2=1e-5, doubling=False):
    """Greedy sequence and training explained-variance curve, straight from the definitions."""
    n = X.shape[0]
    y = y.reshape(n, -1)
    sd = y.std(axis=0)
    sd[sd == 0] = 1
    yt = (y - y.mean(axis=0)) / sd
    Xc = X - X.mean(axis=0)
    Z = [_whiten(Xc[:, g], whiten) for g in groups]
    Xstd = [Xc[:, g] / np.where(Xc[:, g].std(0) > 0, Xc[:, g].std(0), np.inf) for g in groups]
    order, spent = [], 0.0
    usable = [z.shape[1] > 0 for z in Z]
    for step in range(len(groups)):
        rem = [g for g in range(len(groups)) if g not in order]
        pool = [g for g in rem if usable[g]] or rem
        if doubling:
            lim = min(costs) if step == 0 else spent
            pool = [g for g in pool if costs[g] <= lim] or [min(pool, key=lambda g: (costs[g], g))]
        Zs = np.hstack([Z[g] for g in order]) if order else np.zeros((n, 0))
        F0, w = _objective(Zs, yt, l2)
        r = yt - Zs @ w
        sc = []
        for g in pool:
            if not any(usable[h] for h in rem):
                sc.append(0.0)
            elif method == "fr":
                sc.append((_objective(np.hstack([Zs, Z[g]]), yt, l2)[0] - F0) / costs[g])
            elif method == "single":
                sc.append(np.max(np.sum((Xstd[g].T @ r / n) ** 2, axis=1)) / costs[g])
            else:
                b = Z[g].T @ r / n
                sc.append(np.sum(b ** 2) / (1.0 if method == "gomp" else costs[g]))
        sc = np.array(sc)
        best = sc.max()
        g = pool[int(np.nonzero(sc >= best - TIE_RTOL * max(abs(best), 1e-300))[0][0])]
        order.append(g)
        spent += costs[g]
    curve = []
    for j in range(len(order) + 1):
        Zs = np.hstack([Z[g] for g in order[:j]]) if j else np.zeros((n, 0))
        pred = Zs @ _ridge(Zs, yt, l2)
        mse = np.mean((yt - pred) ** 2, axis=0) * sd ** 2
        var = y.var(axis=0)
        curve.append(1 - mse.sum() / var.sum())
    return order, np.array(curve)


def random_problem(rng, n=80, sizes=(2, 3, 1, 4, 2), n_out=1, noise=0.5, collinear=False):
    D = sum(sizes)
    A = rng.normal(size=(D, D)) * 0.4 + np.eye(D)
    X = rng.normal(size=(n, D)) @ A + rng.normal(size=D) * 3
    if collinear:
        X[:, 1] = 2 * X[:, 0] - 1  # rank-deficient first group
    w = rng.normal(size=(D, n_out)) * rng.uniform(0, 2, size=(D, 1))
    y = X @ w + noise * rng.normal(size=(n, n_out))
    perm = rng.permutation(D)
    groups, s = [], 0
    for k in sizes:
        groups.append(sorted(perm[s:s + k].tolist()))
        s += k
    costs = rng.choice([1.0, 2.0, 3.5, 5.0, 8.0], size=len(sizes)).tolist()
    return X, (y[:, 0] if n_out == 1 else y), groups, costs


CASES = [("omp", True), ("fr", True), ("single", True), ("gomp", True), ("omp", False), ("fr", False)]


@pytest.mark.parametrize("method,whiten", CASES)
@pytest.mark.parametrize("seed", range(4))
def test_matches_brute_force(method, whiten, seed):
    rng = np.random.default_rng(seed)
    X, y, groups, costs = random_problem(rng, n_out=1 + seed % 2, collinear=seed == 3)
    est = AnytimeRegressor(groups, costs, method=method, whiten=whiten, l2=1e-5).fit(X, y)
    order, curve = brute_force(X, y, groups, costs, method, whiten)
    assert est.sequence_.tolist() == order
    np.testing.assert_allclose(est.train_curve_, curve, atol=1e-8)


@pytest.mark.parametrize("method", ["omp", "fr"])
def test_doubling_matches_brute_force(method):
    for seed in range(5):
        rng = np.random.default_rng(100 + seed)
        X, y, groups, costs = random_problem(rng, sizes=(1, 2, 2, 1, 3, 1))
        est = AnytimeRegressor(groups, costs, method=method, doubling=True, whiten=True, l2=1e-5).fit(X, y)
        order, curve = brute_force(X, y, groups, costs, method, doubling=True)
        assert est.sequence_.tolist() == order
        np.testing.assert_allclose(est.train_curve_, curve, atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(1, 4), min_size=1, max_size=6),
       n_out=st.integers(1, 3), method=st.sampled_from(["omp", "fr", "single", "gomp"]),
       whiten=st.booleans(), l2=st.sampled_from([1e-5, 1e-2, 0.3]))
def test_property_matches_brute_force(seed, sizes, n_out, method, whiten, l2):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(sum(sizes) + 5, 60))
    X, y, groups, costs = random_problem(rng, n=n, sizes=tuple(sizes), n_out=n_out)
    est = AnytimeRegressor(groups, costs, method=method, whiten=whiten, l2=l2).fit(X, y)
    order, curve = brute_force(X, y, groups, costs, method, whiten, l2=l2)
    assert est.sequence_.tolist() == order
    np.testing.assert_allclose(est.train_curve_, curve, atol=1e-8)


def test_fr_predicted_gain_equals_refit_increase():
    rng = np.random.default_rng(7)
    X, y, groups, costs = random_problem(rng, n=200, sizes=(3, 2, 4, 1, 2, 3))
    est = AnytimeRegressor(groups, costs, method="fr", whiten=True, l2=1e-5).fit(X, y)
    n = X.shape[0]
    yt = ((y - y.mean()) / y.std())[:, None]
    Z = [_whiten(X[:, g] - X[:, g].mean(0), True) for g in groups]
    F = [_objective(np.hstack([Z[g] for g in est.sequence_[:j]]) if j else np.zeros((n, 0)), yt, est.l2)[0]
         for j in range(len(groups) + 1)]
    predicted = est.selection_scores_ * est.costs_[est.sequence_]
    np.testing.assert_allclose(predicted, np.diff(F), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.objective_path_, F, rtol=1e-9, atol=1e-12)


def test_train_curve_is_the_real_explained_variance():
    rng = np.random.default_rng(3)
    X, y, groups, costs = random_problem(rng, n_out=2)
    est = AnytimeRegressor(groups, costs, method="fr", whiten=True, l2=0.1).fit(X, y)
    for j, pred in enumerate(est.staged_predict(X)):
        frac = 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean(0)) ** 2)
        assert est.train_curve_[j] == pytest.approx(frac, abs=1e-10)
