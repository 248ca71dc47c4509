"""AFR's inner and outer problems: the squared-hinge SVM, the validation loss and their gradients.

Inner problem (on the SVM's training rows T), class-weighted squared-hinge SVM:

    min_{w,b}  ½‖w‖² + ½ C Σ_i β_i max(0, 1 − y_i(wᵀφ_i + b))²,   y_i ∈ {−1, +1}.

It is smooth, convex and piecewise quadratic: for a fixed active set A = {i : y_i f_i < 1} the
minimiser solves the linear system M [w; b] = z with

    M = [[I/C + Σ_A β φφᵀ, Σ_A β φ], [Σ_A β φᵀ, Σ_A β]],   z = [Σ_A β y φ; Σ_A β y].

We solve it *exactly* by the finite Newton method (Keerthi & DeCoste 2005): solve the system of the
current active set, line-search along the step on the true objective, repeat until the active set
no longer changes; the answer is then that system's solution, to rounding.

Outer loss (on the validation rows V): L = Σ_j β_j σ(−a y_j f_j), σ the logistic function, a > 0
(a smooth count of validation errors). Its gradient with respect to the representation at every
row of T ∪ V costs one solve with the same M (the implicit-function theorem on the KKT system):
with u = M⁻¹ Σ_{j∈V} ℓ'_j [φ_j; 1] and ℓ'_j = ∂L/∂f_j = −a β_j y_j σ(a y_j f_j)(1 − σ(a y_j f_j)),

    ∂L/∂φ_j = ℓ'_j w                                   (j ∈ V)
    ∂L/∂φ_i = β_i (y_i ξ_i u_w − (u_wᵀφ_i + u_b) w)    (i ∈ A, ξ_i = 1 − y_i f_i; 0 for T \\ A)
    ∂L/∂C   = u_wᵀ w / C².

(∂M/∂φ_i is the symmetric rank-2 update β_i([δ;0][φ_i;1]ᵀ + [φ_i;1][δ;0]ᵀ); the tests check every
formula against finite differences of the exactly re-solved SVM.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from edgeseq.forms.linear import sigmoid

MAX_NEWTON = 100


@dataclass
class SVMSolution:
    """The optimum (w, b) and the active set's KKT matrix (factorised) that the gradients reuse.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.afr_svm import fit_svm, svm_objective
    >>> rng = np.random.default_rng(0); Phi = rng.normal(size=(30, 2))
    >>> y = np.sign(Phi[:, 0] + 0.3 * rng.normal(size=30)); beta = np.ones(30)
    >>> sol = fit_svm(Phi, y, beta, C=1.0)
    >>> sol.w.shape, int(sol.active.sum()) <= 30, sol.M.shape
    ((2,), True, (3, 3))
    """

    w: np.ndarray
    b: float
    C: float
    active: np.ndarray  # boolean mask over T: y_i f_i < 1
    M: np.ndarray
    n_newton: int

    def decision(self, Phi: np.ndarray) -> np.ndarray:
        """The SVM's score ``Phi @ w + b`` of every row.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.trees.afr_svm import fit_svm, svm_objective
        >>> rng = np.random.default_rng(0); Phi = rng.normal(size=(30, 2))
        >>> y = np.sign(Phi[:, 0] + 0.3 * rng.normal(size=30)); beta = np.ones(30)
        >>> sol = fit_svm(Phi, y, beta, C=1.0)
        >>> bool(np.all(sol.active == (y * sol.decision(Phi) < 1)))
        True
        """
        return Phi @ self.w + self.b


def kkt_system(Phi, y, beta, C, active):
    """M and z of the active set (see the module docstring); a tiny ridge on b keeps M invertible
    when the active set is empty (then b is not determined by the objective).

    Returns
    -------
    M : numpy.ndarray
        (S+1, S+1) symmetric matrix.
    z : numpy.ndarray
        (S+1,) right-hand side.

    Examples
    --------
    At the optimum, the system of its own active set returns the optimum itself:

    >>> import numpy as np
    >>> from edgeseq.train.trees.afr_svm import fit_svm, svm_objective
    >>> rng = np.random.default_rng(0); Phi = rng.normal(size=(30, 2))
    >>> y = np.sign(Phi[:, 0] + 0.3 * rng.normal(size=30)); beta = np.ones(30)
    >>> sol = fit_svm(Phi, y, beta, C=1.0)
    >>> from edgeseq.train.trees.afr_svm import kkt_system
    >>> M, z = kkt_system(Phi, y, beta, 1.0, sol.active)
    >>> np.allclose(np.linalg.solve(M, z), np.append(sol.w, sol.b))
    True
    """
    Pa = Phi[active]
    ba = beta[active]
    S = Phi.shape[1]
    M = np.empty((S + 1, S + 1))
    M[:S, :S] = (Pa * ba[:, None]).T @ Pa + np.eye(S) / C
    M[:S, S] = M[S, :S] = ba @ Pa
    M[S, S] = ba.sum() + (1e-12 if not active.any() else 0.0)
    yb = ba * y[active]
    z = np.append(yb @ Pa, yb.sum())
    return M, z


def svm_objective(Phi, y, beta, C, w, b) -> float:
    """½‖w‖² + ½ C Σ β ξ², ξ = max(0, 1 − y f): the inner problem's objective.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.afr_svm import svm_objective
    >>> Phi = np.array([[1.0], [-1.0]]); y = np.array([1.0, -1.0])
    >>> svm_objective(Phi, y, np.ones(2), 1.0, np.array([1.0]), 0.0)  # both on the margin: ½‖w‖²
    0.5
    >>> svm_objective(Phi, y, np.ones(2), 2.0, np.array([0.0]), 0.0)  # ξ = 1 for both
    2.0
    """
    xi = np.maximum(0.0, 1.0 - y * (Phi @ w + b))
    return 0.5 * float(w @ w) + 0.5 * C * float(beta @ xi ** 2)


def _solve(M, z):
    try:
        return cho_solve(cho_factor(M), z)
    except LinAlgError:
        return np.linalg.lstsq(M, z, rcond=None)[0]


def fit_svm(Phi, y, beta, C: float, warm: SVMSolution | None = None) -> SVMSolution:
    """Exact minimiser of the class-weighted squared-hinge SVM (finite Newton with line search).

    Parameters
    ----------
    Phi : numpy.ndarray
        Representation of the rows, (n, S).
    y : numpy.ndarray
        Labels in {-1, +1}.
    beta : numpy.ndarray
        Row (class) weights.
    C : float
        Loss weight.
    warm : SVMSolution, optional
        A previous solution to start from (few Newton steps when the data changed little).

    Returns
    -------
    SVMSolution

    Examples
    --------
    The same optimum as a general-purpose minimiser of `svm_objective`, in a few Newton steps:

    >>> import numpy as np
    >>> from edgeseq.train.trees.afr_svm import fit_svm, svm_objective
    >>> rng = np.random.default_rng(0); Phi = rng.normal(size=(30, 2))
    >>> y = np.sign(Phi[:, 0] + 0.3 * rng.normal(size=30)); beta = np.ones(30)
    >>> sol = fit_svm(Phi, y, beta, C=1.0)
    >>> from scipy.optimize import minimize
    >>> ref = minimize(lambda th: svm_objective(Phi, y, beta, 1.0, th[:2], th[2]), np.zeros(3), method="BFGS",
    ...                options={"gtol": 1e-10})
    >>> np.allclose(np.append(sol.w, sol.b), ref.x, atol=1e-5), sol.n_newton < 10
    (True, True)
    """
    Phi = np.asarray(Phi, dtype=np.float64)
    S = Phi.shape[1]
    theta = np.zeros(S + 1)
    if warm is not None and warm.w.shape == (S,):
        theta = np.append(warm.w, warm.b)
    obj = svm_objective(Phi, y, beta, C, theta[:S], theta[S])
    active = y * (Phi @ theta[:S] + theta[S]) < 1
    for it in range(1, MAX_NEWTON + 1):
        M, z = kkt_system(Phi, y, beta, C, active)
        target = _solve(M, z)
        step = target - theta
        t = 1.0
        while True:  # backtracking on the true (piecewise quadratic, convex) objective
            cand = theta + t * step
            new = svm_objective(Phi, y, beta, C, cand[:S], cand[S])
            if new <= obj + 1e-14 * max(1.0, abs(obj)) or t < 1e-10:
                break
            t *= 0.5
        theta, obj = cand, min(new, obj)
        new_active = y * (Phi @ theta[:S] + theta[S]) < 1
        if t == 1.0 and np.array_equal(new_active, active):
            break
        active = new_active
    M, _ = kkt_system(Phi, y, beta, C, active)
    return SVMSolution(theta[:S].copy(), float(theta[S]), float(C), active, M, it)


def outer_loss(f, y, beta, a: float) -> float:
    """L = Σ β σ(−a y f): a smooth count of (weighted) validation errors.

    Smooth, so it has the gradients `outer_gradients` computes; a larger `a` makes it closer to a
    0/1 count.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.afr_svm import outer_loss
    >>> y = np.array([1.0, 1.0])
    >>> round(outer_loss(np.array([3.0, -3.0]), y, np.ones(2), a=10.0), 6)  # one error
    1.0
    >>> outer_loss(np.array([0.0, 0.0]), y, np.ones(2), a=10.0)  # on the boundary: half each
    1.0
    """
    return float(beta @ sigmoid(-a * y * f))


def outer_gradients(sol: SVMSolution, Phi_T, y_T, beta_T, Phi_V, y_V, beta_V, a: float):
    """∂L/∂φ on T (n_T, S) and V (n_V, S), and ∂L/∂C, at the SVM optimum `sol` (module docstring).

    Returns
    -------
    dT : numpy.ndarray
        (n_T, S) gradient at the training rows (zero outside the active set).
    dV : numpy.ndarray
        (n_V, S) gradient at the validation rows.
    dC : float
        Derivative with respect to C.

    Examples
    --------
    ∂L/∂C agrees with a finite difference of the re-solved SVM:

    >>> import numpy as np
    >>> from edgeseq.train.trees.afr_svm import fit_svm, svm_objective
    >>> rng = np.random.default_rng(0); Phi = rng.normal(size=(30, 2))
    >>> y = np.sign(Phi[:, 0] + 0.3 * rng.normal(size=30)); beta = np.ones(30)
    >>> sol = fit_svm(Phi, y, beta, C=1.0)
    >>> from edgeseq.train.trees.afr_svm import outer_gradients, outer_loss
    >>> PV = rng.normal(size=(10, 2)); yV = np.sign(PV[:, 0]); bV = np.ones(10)
    >>> dT, dV, dC = outer_gradients(sol, Phi, y, beta, PV, yV, bV, a=5.0)
    >>> L = lambda C: outer_loss(fit_svm(Phi, y, beta, C).decision(PV), yV, bV, 5.0)
    >>> dT.shape, dV.shape, bool(np.isclose(dC, (L(1 + 1e-5) - L(1 - 1e-5)) / 2e-5, rtol=1e-5))
    ((30, 2), (10, 2), True)
    """
    w, b = sol.w, sol.b
    f_V = Phi_V @ w + b
    s = sigmoid(a * y_V * f_V)
    lp = -a * beta_V * y_V * s * (1.0 - s)
    g = np.append(lp @ Phi_V, lp.sum())
    u = _solve(sol.M, g)
    uw, ub = u[:-1], u[-1]
    dV = lp[:, None] * w[None, :]
    f_T = Phi_T @ w + b
    xi = 1.0 - y_T * f_T
    coef = np.where(sol.active, beta_T, 0.0)
    dT = coef[:, None] * ((y_T * xi)[:, None] * uw[None, :] - (Phi_T @ uw + ub)[:, None] * w[None, :])
    dC = float(uw @ w) / sol.C ** 2
    return dT, dV, dC


def platt(f: np.ndarray, y01: np.ndarray, n_iter: int = 50) -> tuple[float, float]:
    """Platt scaling: (A, B) with P(y=1 | f) = σ(A f + B), fitted by Newton on Platt's smoothed targets.

    The smoothed targets ((n₊+1)/(n₊+2), 1/(n₋+2)) keep A finite on separable scores.

    Examples
    --------
    Perfectly separated, symmetric scores: A stays finite and B is zero by symmetry:

    >>> import numpy as np
    >>> from edgeseq.train.trees.afr_svm import platt
    >>> A, B = platt(np.array([-2.0, -1.0, 1.0, 2.0]), np.array([0, 0, 1, 1]))
    >>> 0 < A < 10, abs(B) < 1e-9
    (True, True)
    """
    n_pos = float(y01.sum())
    n_neg = float(y01.size - n_pos)
    t = np.where(y01 > 0, (n_pos + 1) / (n_pos + 2), 1.0 / (n_neg + 2))
    X = np.column_stack([f, np.ones_like(f)])
    ab = np.zeros(2)
    for _ in range(n_iter):
        p = sigmoid(X @ ab)
        grad = X.T @ (p - t)
        H = (X * (p * (1 - p))[:, None]).T @ X + 1e-10 * np.eye(2)
        step = np.linalg.solve(H, grad)
        ab -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return float(ab[0]), float(ab[1])
