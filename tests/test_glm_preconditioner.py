"""The refit's preconditioner: Böhning's bound with the penalty's share matched to the prior curvature.

* `prior_curvature` is mean_k p_k(1 − p_k) of the targets, within [s/1000, s], and takes class
  frequencies as well as targets (what a cluster's state passes).
* `BoundFactor` with a curvature c factorises s·K + (s/c)·λ·I exactly (scipy's Cholesky).
* On standardised, strongly correlated columns the matched factor reaches the same optimum (both
  gradients below the tolerance, objective values within what strong convexity allows) in clearly fewer evaluations than
  the bound alone (c = s, the jitter λ); the control is a whitened basis, where the group's block is
  the identity and the two take about as many.
"""

import numpy as np
import pytest
from scipy.linalg import cholesky

from edgeseq.train.glm.fit import BOUND_SCALE, CURVATURE_FLOOR, GRAD_TOL, BoundFactor, objective_gradient, \
    prior_curvature, refit
from edgeseq.train.linear.basis import build_working_problem
from edgeseq.train.linear.stats import sufficient_statistics


def test_prior_curvature_is_the_mean_class_variance_within_the_bound():
    Y = np.eye(4)[np.array([0] * 50 + [1] * 30 + [2] * 15 + [3] * 5)]
    p = Y.mean(axis=0)
    assert prior_curvature(Y, "softmax") == pytest.approx(np.mean(p * (1 - p)), rel=1e-15)
    assert prior_curvature(p[None, :], "softmax") == prior_curvature(Y, "softmax")  # frequencies
    assert prior_curvature(np.array([[1.0], [0.0], [0.0], [0.0]]), "sigmoid") == pytest.approx(3 / 16)
    # one positive in a million rows: the floor, a thousandth of the bound
    rare = np.zeros((1_000_000, 1)); rare[0] = 1.0
    assert prior_curvature(rare, "sigmoid") == BOUND_SCALE["sigmoid"] * CURVATURE_FLOOR
    assert prior_curvature(np.array([[1.0, 0.0], [0.0, 1.0]]), "softmax") <= BOUND_SCALE["softmax"]


def test_factor_with_a_curvature_is_the_cholesky_of_the_matched_matrix():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(60, 7)) @ rng.normal(size=(7, 7))
    K = A.T @ A / 60
    c, l2 = 0.09, 1e-3
    bf = BoundFactor("softmax", l2, curvature=c)
    for lo, hi in ((0, 3), (3, 7)):
        bf.append(K[:lo, lo:hi], K[lo:hi, lo:hi])
    np.testing.assert_allclose(bf.dense(), cholesky(0.5 * K + (0.5 / c) * l2 * np.eye(7)), rtol=0, atol=1e-12)
    # no curvature: the bound alone, jitter λ (what the factor was before)
    np.testing.assert_allclose(BoundFactor.of(K, "softmax", l2).dense(), cholesky(0.5 * K + l2 * np.eye(7)),
                               rtol=0, atol=1e-12)


def _correlated(whiten: bool):
    """10 classes, one group of 40 columns mixed by a random basis (a correlation matrix whose
    eigenvalues spread over several decades), in the standardised or whitened basis."""
    rng = np.random.default_rng(5)
    n, d, P = 1500, 40, 10
    y = rng.integers(0, P, size=n)
    X = (rng.normal(size=(n, d)) + rng.normal(size=(P, d))[y]) @ rng.normal(size=(d, d)) / np.sqrt(d)
    Y = np.eye(P)[y]
    prob = build_working_problem(sufficient_statistics(X, Y), [d], whiten=whiten)
    Z = (X - prob.x_mean) @ prob.transforms[0]
    return Z, Y, prob.K


def _fits(whiten: bool, l2: float = 1e-4):
    Z, Y, K = _correlated(whiten)
    W0, b0 = np.zeros((Z.shape[1], Y.shape[1])), np.zeros(Y.shape[1])
    bound = refit(Z, Y, K, W0, b0, "softmax", l2, factor=BoundFactor.of(K, "softmax", l2))
    matched = refit(Z, Y, K, W0, b0, "softmax", l2)  # the default: matched to the prior curvature
    return Z, Y, bound, matched


@pytest.mark.parametrize("whiten", [False, True])
def test_both_factors_reach_the_same_optimum(whiten):
    Z, Y, bound, matched = _fits(whiten)
    values, sq_norms = [], []
    for fit in (bound, matched):
        assert fit.converged
        r, gW, gb, _ = objective_gradient(Z, Y, fit.W, fit.b, "softmax", 1e-4)  # recomputed, not the fit's
        assert max(np.abs(gW).max(), np.abs(gb).max()) <= GRAD_TOL
        values.append(r)
        sq_norms.append(float(np.sum(gW ** 2) + np.sum(gb ** 2)))
    # r is at least λ-strongly convex (λ = 1e-4) in W and, the softmax's flat direction aside (in
    # which the gradient is zero), in b at these class frequencies: each value is within ‖∇r‖² / (2λ)
    # of the optimum
    assert abs(values[0] - values[1]) <= (sq_norms[0] + sq_norms[1]) / (2 * 1e-4)


def test_matched_factor_needs_fewer_evaluations_on_correlated_standardised_columns():
    _, _, bound, matched = _fits(whiten=False)
    assert matched.n_evals <= 0.7 * bound.n_evals, (matched.n_evals, bound.n_evals)
    # control: whitened, the group's block of K is the identity, so the factor is a multiple of it
    # either way and the evaluation counts stay close
    _, _, wb, wm = _fits(whiten=True)
    assert abs(wm.n_evals - wb.n_evals) <= 0.25 * wb.n_evals, (wm.n_evals, wb.n_evals)
