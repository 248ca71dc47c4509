"""AFR's squared-hinge SVM (exact: KKT conditions, and no worse than scipy's L-BFGS) and every
gradient of the outer loss (φ on T, φ on V, C) against central finite differences of the re-solved SVM."""

import numpy as np
import pytest
from scipy.optimize import minimize

from edgeseq.train.trees.afr_svm import fit_svm, outer_gradients, outer_loss, platt, svm_objective

A = 5.0


def data(seed=0, nT=60, nV=40, S=3):
    rng = np.random.default_rng(seed)
    PT, PV = rng.normal(size=(nT, S)), rng.normal(size=(nV, S))
    yT = np.where(PT[:, 0] + 0.7 * rng.normal(size=nT) > 0, 1.0, -1.0)
    yV = np.where(PV[:, 0] + 0.7 * rng.normal(size=nV) > 0, 1.0, -1.0)
    return PT, yT, np.where(yT > 0, 2.0, 1.0), PV, yV, np.where(yV > 0, 2.0, 1.0)


def primal_gradient(P, y, beta, C, w, b):
    xi = np.maximum(0.0, 1.0 - y * (P @ w + b))
    r = C * beta * xi * y
    return np.append(w - r @ P, -r.sum())


@pytest.mark.parametrize("C", [0.01, 0.7, 50.0])
def test_svm_satisfies_kkt_and_beats_lbfgs(C):
    PT, yT, bT, *_ = data()
    sol = fit_svm(PT, yT, bT, C)
    g = primal_gradient(PT, yT, bT, C, sol.w, sol.b)
    assert np.max(np.abs(g)) < 1e-9 * max(1.0, C)  # stationarity (the objective is C¹, convex)
    m = yT * sol.decision(PT)
    np.testing.assert_array_equal(sol.active, m < 1)  # the active set is the one of the solution
    ref = minimize(lambda t: svm_objective(PT, yT, bT, C, t[:-1], t[-1]), np.zeros(4),
                   jac=lambda t: primal_gradient(PT, yT, bT, C, t[:-1], t[-1]), method="L-BFGS-B",
                   options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10000})
    assert svm_objective(PT, yT, bT, C, sol.w, sol.b) <= ref.fun + 1e-10 * max(1.0, abs(ref.fun))
    np.testing.assert_allclose(np.append(sol.w, sol.b), ref.x, atol=1e-4)
    # negative control: a perturbed solution violates stationarity
    assert np.max(np.abs(primal_gradient(PT, yT, bT, C, sol.w + 1e-3, sol.b))) > 1e-5


def test_warm_start_reaches_the_same_optimum():
    PT, yT, bT, *_ = data(seed=1)
    cold = fit_svm(PT, yT, bT, 1.0)
    warm = fit_svm(PT, yT, bT, 1.0, warm=fit_svm(PT[:, :3] * 1.1, yT, bT, 1.0))
    np.testing.assert_allclose(np.append(warm.w, warm.b), np.append(cold.w, cold.b), atol=1e-12)


def loss_of(PT, yT, bT, PV, yV, bV, C):
    s = fit_svm(PT, yT, bT, C)
    return outer_loss(s.decision(PV), yV, bV, A)


def central_difference(loss, P, i, s, eps=1e-6):
    """(loss(P + eps·e_is) − loss(P − eps·e_is)) / 2eps."""
    P1, P2 = P.copy(), P.copy()
    P1[i, s] += eps
    P2[i, s] -= eps
    return (loss(P1) - loss(P2)) / (2 * eps)


def test_outer_gradients_match_finite_differences():
    PT, yT, bT, PV, yV, bV = data(seed=2)
    C = 0.7
    sol = fit_svm(PT, yT, bT, C)
    dT, dV, dC = outer_gradients(sol, PT, yT, bT, PV, yV, bV, A)
    margin = np.abs(1 - yT * sol.decision(PT))
    eps = 1e-6
    safe = np.flatnonzero(margin > 1e-3)  # central differences stay on one side of every kink
    checked_active = checked_inactive = 0
    for i in safe[:25]:
        for s in range(PT.shape[1]):
            fd = central_difference(lambda P: loss_of(P, yT, bT, PV, yV, bV, C), PT, i, s)
            assert dT[i, s] == pytest.approx(fd, rel=1e-5, abs=1e-8)
        checked_active += bool(sol.active[i])
        checked_inactive += not sol.active[i]
    assert checked_active >= 5 and checked_inactive >= 1  # both branches of the formula were exercised
    assert np.all(dT[~sol.active] == 0)
    for j in range(0, PV.shape[0], 7):
        for s in range(PV.shape[1]):
            fd = central_difference(lambda P: loss_of(PT, yT, bT, P, yV, bV, C), PV, j, s)
            assert dV[j, s] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    fd = (loss_of(PT, yT, bT, PV, yV, bV, C + eps) - loss_of(PT, yT, bT, PV, yV, bV, C - eps)) / (2 * eps)
    assert dC == pytest.approx(fd, rel=1e-5)


def test_one_sided_dM_reading_is_wrong():
    """Negative control for the FD test: dropping the second term of the symmetric rank-2 ∂M
    (the paper's one-sided reading) gives gradients the finite differences reject."""
    PT, yT, bT, PV, yV, bV = data(seed=2)
    sol = fit_svm(PT, yT, bT, 0.7)
    dT, *_ = outer_gradients(sol, PT, yT, bT, PV, yV, bV, A)
    f = sol.decision(PV)
    from edgeseq.forms.linear import sigmoid
    s = sigmoid(A * yV * f)
    lp = -A * bV * yV * s * (1 - s)
    u = np.linalg.solve(sol.M, np.append(lp @ PV, lp.sum()))
    i = int(np.flatnonzero(sol.active)[0])
    xi = 1 - yT[i] * sol.decision(PT[i:i + 1])[0]
    one_sided = bT[i] * (yT[i] * xi * u[:-1])  # misses −(u_wᵀφ_i + u_b) w
    assert np.max(np.abs(one_sided - dT[i])) > 1e-3


def test_platt_is_the_logistic_fit_of_smoothed_targets():
    rng = np.random.default_rng(5)
    f = rng.normal(size=200)
    y01 = (f + 0.5 * rng.normal(size=200) > 0).astype(float)
    a, b = platt(f, y01)
    n1, n0 = y01.sum(), 200 - y01.sum()
    t = np.where(y01 > 0, (n1 + 1) / (n1 + 2), 1 / (n0 + 2))
    p = 1 / (1 + np.exp(-(a * f + b)))
    np.testing.assert_allclose([(p - t) @ f, (p - t).sum()], 0, atol=1e-8)  # stationarity of the log-loss
    assert a > 0
