"""Refit of a generalized linear model on the selected working columns (logistic or multinomial).

Objective (docs/design.md; thesis eq. 3.27) on the working design Z_S (centred, group-whitened):

    r(W, b) = (1/n) Σ_i [φ(f_i) − y_iᵀ f_i] + λ/2 ‖W‖_F²,    f_i = Z_S,i W + b,

φ(f) = log(1 + e^f) (binary, one logit) or logsumexp(f) (multinomial, one-hot Y); the intercept b is
not penalised. Minimised with scipy's L-BFGS, warm-started from the previous prefix, in the variables
V = R W where RᵀR = s·K_S + (s/c)·λI is Böhning's curvature bound (s = ¼ binary, ½ multinomial) with
the penalty's share matched to the loss's curvature c at the prior (`prior_curvature`): in those
variables the Hessian is close to a multiple of the identity, so L-BFGS needs few iterations even
when the selected groups are strongly correlated with each other.

Convergence: we stop when ‖∇r‖_∞ ≤ GRAD_TOL in the working space (intercept included), checked
on the true gradient of every accepted iterate; a refit that stops otherwise is reported as not
converged (the caller warns).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from edgeseq.forms.linear import sigmoid, softmax
from edgeseq.train.products import narrow_product, transposed_product
from edgeseq.train.triangular import solve_triangular

GRAD_TOL = 1e-5  # stop when every entry of the objective's gradient is at most this (working space)
MAX_ITER = 5000
MAXCOR = 20  # L-BFGS memory
BOUND_SCALE = {"sigmoid": 0.25, "softmax": 0.5}  # Böhning: Hessian of φ ≤ s·(I − 11ᵀ/P) (binary: p(1−p) ≤ ¼)
CURVATURE_FLOOR = 1e-3  # `prior_curvature` is at least this fraction of the bound (a class of a few rows)


def mean_function(f: np.ndarray, link: str) -> np.ndarray:
    """∇φ(f): probabilities of class 1 (sigmoid, (n, 1)) or of every class (softmax, (n, P)).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.glm.fit import mean_function
    >>> mean_function(np.array([[0.0], [np.log(3.0)]]), "sigmoid").ravel().round(3).tolist()
    [0.5, 0.75]
    >>> mean_function(np.zeros((1, 4)), "softmax").tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """
    return sigmoid(f) if link == "sigmoid" else softmax(f)


def data_loss(f: np.ndarray, Y: np.ndarray, link: str) -> float:
    """Mean negative log-likelihood (1/n) Σ φ(f_i) − y_iᵀ f_i, computed without overflow.

    Examples
    --------
    It is scikit-learn's log-loss, and stays finite for huge logits:

    >>> import numpy as np
    >>> from sklearn.metrics import log_loss
    >>> from edgeseq.train.glm.fit import data_loss, mean_function
    >>> f = np.array([[2.0], [-1.0], [0.5]]); Y = np.array([[1.0], [0.0], [0.0]])
    >>> p1 = mean_function(f, "sigmoid")[:, 0]
    >>> bool(np.isclose(data_loss(f, Y, "sigmoid"), log_loss(Y[:, 0], p1)))
    True
    >>> data_loss(np.array([[800.0]]), np.array([[0.0]]), "sigmoid")
    800.0
    """
    if link == "sigmoid":
        return float(np.mean(np.logaddexp(0.0, f[:, 0]) - Y[:, 0] * f[:, 0]))
    return float(np.mean(logsumexp(f, axis=1) - np.sum(Y * f, axis=1)))


def loss_and_mean(f: np.ndarray, Y: np.ndarray, link: str) -> tuple[float, np.ndarray]:
    """Σ_i φ(f_i) − y_iᵀ f_i and ∇φ(f) of a chunk of rows, sharing one exponential.

    The passes compute both on each chunk while it is at hand: a separate `data_loss` over the whole
    linear predictor took as long as the link itself.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.glm.fit import data_loss, loss_and_mean, mean_function
    >>> f = np.array([[2.0, -1.0, 0.5], [800.0, 0.0, -3.0]]); Y = np.eye(3)[[1, 0]]
    >>> total, p = loss_and_mean(f, Y, "softmax")
    >>> bool(np.isclose(total / 2, data_loss(f, Y, "softmax"))), bool(np.allclose(p, mean_function(f, "softmax")))
    (True, True)
    >>> total, p = loss_and_mean(f[:, :1], Y[:, :1], "sigmoid")
    >>> bool(np.isclose(total / 2, data_loss(f[:, :1], Y[:, :1], "sigmoid")))
    True
    """
    if link == "sigmoid":
        return float(np.sum(np.logaddexp(0.0, f[:, 0]) - Y[:, 0] * f[:, 0])), sigmoid(f)
    top = f.max(axis=1, keepdims=True)
    e = np.exp(f - top)
    total = e.sum(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(total[:, 0])
    e /= total
    return float(np.sum(lse) - np.sum(Y * f)), e


def prior_intercept(Y: np.ndarray, link: str) -> np.ndarray:
    """Intercept-only optimum: the log prior (binary: log-odds; multinomial: centred log frequencies).

    Examples
    --------
    With one positive in four rows the intercept-only model predicts 1/4:

    >>> import numpy as np
    >>> from edgeseq.train.glm.fit import mean_function, prior_intercept
    >>> Y = np.array([[1.0], [0.0], [0.0], [0.0]])
    >>> b = prior_intercept(Y, "sigmoid")
    >>> float(mean_function(b[None, :], "sigmoid")[0, 0])
    0.25
    """
    freq = Y.mean(axis=0)
    if link == "sigmoid":
        return np.log(freq) - np.log1p(-freq)
    logp = np.log(freq)
    return logp - logp.mean()


def class_targets(k: np.ndarray, n_classes: int) -> np.ndarray:
    """The refit's Y from class indices: a 0/1 column of class 1 (two classes) or one-hot rows.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.glm.fit import class_targets
    >>> class_targets(np.array([1, 0]), 2).tolist(), class_targets(np.array([2, 0]), 3).tolist()
    ([[1.0], [0.0]], [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    """
    return (k == 1).astype(np.float64)[:, None] if n_classes == 2 else np.eye(n_classes)[k]


@dataclass
class Refit:
    """The solution of one GLM refit and how it was reached (the convergence flag is what the caller warns on).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.glm.fit import refit
    >>> Y = np.array([[1.0], [0.0], [1.0], [1.0]])
    >>> fit = refit(np.zeros((4, 0)), Y, np.zeros((0, 0)), np.zeros((0, 1)), np.zeros(1), "sigmoid", l2=0.0)
    >>> fit.converged, fit.n_evals, round(float(fit.b[0]), 4)  # intercept only: closed form log(3)
    (True, 0, 1.0986)
    """
    W: np.ndarray  # (m, P) working-space weights of the selected columns
    b: np.ndarray  # (P,)
    f: np.ndarray  # (n, P) linear predictor on the training rows
    loss: float  # data loss (mean log-loss) at the solution
    grad_norm: float  # ‖∇r‖_∞ at the solution, working space
    n_evals: float  # objective + gradient evaluations, in float64 full-pass equivalents
    converged: bool
    objective: float | None = None  # r(W, b) at the solution (penalty included)
    gW: np.ndarray | None = None  # ∂r/∂W at the solution: with the next group's gradient, the next refit's start
    gb: np.ndarray | None = None  # ∂r/∂b at the solution


def objective_gradient(Zs: np.ndarray, Y: np.ndarray, W: np.ndarray, b: np.ndarray, link: str,
                       l2: float) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """r(W, b), ∂r/∂W, ∂r/∂b and the linear predictor f; the two products run in Zs's dtype.

    Examples
    --------
    The gradient matches central finite differences of the objective:

    >>> import numpy as np
    >>> from edgeseq.train.glm.fit import objective_gradient
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.normal(size=(30, 2)); Y = (rng.random((30, 1)) < 0.5).astype(float)
    >>> W, b = np.array([[0.3], [-0.2]]), np.array([0.1])
    >>> r, gW, gb, f = objective_gradient(Z, Y, W, b, "sigmoid", 0.1)
    >>> e = np.array([[1e-6], [0.0]])
    >>> fd = (objective_gradient(Z, Y, W + e, b, "sigmoid", 0.1)[0]
    ...       - objective_gradient(Z, Y, W - e, b, "sigmoid", 0.1)[0]) / 2e-6
    >>> bool(np.isclose(fd, gW[0, 0], atol=1e-7))
    True
    """
    n = Zs.shape[0]
    if W.size:
        f = narrow_product(Zs, W.astype(Zs.dtype, copy=False)).astype(np.float64, copy=False) + b
    else:
        f = np.broadcast_to(b, (n, b.shape[0])).copy()
    total, mean = loss_and_mean(f, Y, link)  # one exponential for both (scipy's logsumexp cost 3x the rest)
    R = mean - Y
    gW = transposed_product(Zs, R.astype(Zs.dtype, copy=False)).astype(np.float64, copy=False) / n + l2 * W
    gb = R.mean(axis=0)
    return total / n + 0.5 * l2 * float(np.sum(W * W)), gW, gb, f


def prior_curvature(Y: np.ndarray, link: str) -> float:
    """The loss's curvature per class column at the prior, mean_k p_k(1 − p_k), within [s/1000, s].

    Why: the refit's Hessian in W is about c·K_S + λI, where c is the loss's curvature (p(1 − p)
    for one logit), while Böhning's bound puts s ≥ c in its place. A preconditioner s·K_S + λI then
    scales the directions the data pins down (large eigenvalues of K_S) by s and the ones only the
    penalty pins down by λ: their curvatures relative to it differ by s/c, which is 5.6 for ten
    balanced classes and grows as the model becomes confident. With the penalty's share raised to
    (s/c)·λ the two agree at the prior. In a whitened basis each group's block of K_S is the
    identity and the choice hardly matters; on standardised, strongly correlated columns it cut
    the refits' passes over the rows about twofold (a synthetic thesis-shaped problem, 1,347 to 572
    evaluations; the MNIST bank, 3,240 to 1,917, the same test accuracy). `Y` is the 0/1 or one-hot
    targets, or their class frequencies (a cluster's state passes those).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.glm.fit import prior_curvature
    >>> round(prior_curvature(np.eye(10)[np.arange(100) % 10], "softmax"), 6)  # ten balanced classes
    0.09
    >>> prior_curvature(np.array([[1.0], [0.0]]), "sigmoid")  # p = ½: the bound itself
    0.25
    """
    p = np.asarray(Y, dtype=np.float64).mean(axis=0)
    s = BOUND_SCALE[link]
    return float(min(s, max(np.mean(p * (1.0 - p)), s * CURVATURE_FLOOR)))


class BoundFactor:
    """The preconditioner's factor R (RᵀR = s·K_S + jitter·I), grown by one block per selected group.

    Refactorising s·K_S at every refit cost O(m³) (plus O(m³) for an explicit inverse): at thousands
    of selected columns that, not the passes over the rows, dominated the whole selection. Appending a
    block costs O(m² k_g): R₁₂ = R₁₁⁻ᵀ A₁₂, R₂₂ = chol(A₂₂ − R₁₂ᵀR₁₂). R is stored as its column panels
    [R₁₂; R₂₂], one per block, so only the upper triangle is held, nothing is reallocated when a block
    is added, and the solves are one small triangular solve plus one product per block.

    Parameters
    ----------
    link : {"sigmoid", "softmax"}
    l2 : float
    scale : float, default=1.0
        Typical diagonal of K (1 for whitened or standardised columns); sets the jitter when λ = 0.
    curvature : float or None, default=None
        The loss's curvature c the penalty's share is matched to (`prior_curvature`): jitter =
        λ·s/c. None takes c = s, the jitter λ.

    Examples
    --------
    The grown factor equals the one factorised at once, and solves with it:

    >>> import numpy as np
    >>> from scipy.linalg import cholesky
    >>> from edgeseq.train.glm.fit import BoundFactor
    >>> A = np.random.default_rng(0).normal(size=(50, 4)); K = A.T @ A / 50
    >>> bf = BoundFactor("softmax", 0.1)
    >>> bf.append(np.zeros((0, 3)), K[:3, :3]); bf.append(K[:3, 3:], K[3:, 3:])
    >>> R = cholesky(0.5 * K + 0.1 * np.eye(4))
    >>> bool(np.allclose(bf.dense(), R)), bool(np.allclose(bf.solve(np.eye(4)), np.linalg.inv(R)))
    (True, True)
    """

    def __init__(self, link: str, l2: float, scale: float = 1.0, curvature: float | None = None):
        self.s = BOUND_SCALE[link]
        self.jitter = max(l2 * (1.0 if curvature is None else self.s / curvature), 1e-10 * max(1.0, self.s * scale))
        self.m = 0
        # (first row of the block, first non-zero row above it, R[top:end, block] (end - top, k_g)): a block
        # with no cross-Gram against the selected ones (within-group statistics) stores only its R₂₂
        self.panels: list[tuple[int, int, np.ndarray]] = []

    @classmethod
    def of(cls, K_S: np.ndarray, link: str, l2: float, curvature: float | None = None) -> BoundFactor:
        """The factor of a whole K_S at once (jitter scaled by K_S's mean diagonal when λ = 0).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.glm.fit import BoundFactor
        >>> BoundFactor.of(np.eye(2), "sigmoid", 0.0).dense().round(6).tolist()
        [[0.5, 0.0], [0.0, 0.5]]
        """
        m = K_S.shape[0]
        factor = cls(link, l2, float(np.trace(K_S)) / max(m, 1), curvature)
        factor.append(np.zeros((0, m)), K_S)
        return factor

    def append(self, K_Sg: np.ndarray, K_gg: np.ndarray) -> None:
        """Add a block: K_Sg (m, k_g) its cross-Gram with the selected columns, K_gg (k_g, k_g) its own.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.glm.fit import BoundFactor
        >>> bf = BoundFactor("sigmoid", 0.0)
        >>> bf.append(np.zeros((0, 1)), np.array([[4.0]]))
        >>> bf.append(np.array([[2.0]]), np.array([[4.0]]))  # RᵀR = ¼K + jitter·I
        >>> bf.dense().round(4).tolist()
        [[1.0, 0.5], [0.0, 0.866]]
        """
        kg = K_gg.shape[0]
        top = 0 if K_Sg.any() else self.m  # R₁₂ = R₁₁⁻ᵀ·0 is exactly zero: not stored, not multiplied
        R12 = self.solve_t(self.s * K_Sg)[top:]
        A22 = self.s * K_gg + self.jitter * np.eye(kg) - R12.T @ R12
        self.panels.append((self.m, top, np.vstack([R12, np.linalg.cholesky(A22).T])))
        self.m += kg

    def solve(self, V: np.ndarray) -> np.ndarray:
        """R⁻¹ V (back substitution, last block first).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.glm.fit import BoundFactor
        >>> BoundFactor.of(np.eye(2), "sigmoid", 0.0).solve(np.ones((2, 1))).ravel().round(6).tolist()
        [2.0, 2.0]
        """
        X = np.array(V, dtype=np.float64)
        for start, top, panel in reversed(self.panels):
            end = top + panel.shape[0]
            X[start:end] = solve_triangular(panel[start - top:], X[start:end], lower=False)
            X[top:start] -= panel[:start - top] @ X[start:end]
        return X

    def solve_t(self, G: np.ndarray) -> np.ndarray:
        """R⁻ᵀ G (forward substitution, first block first).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.glm.fit import BoundFactor
        >>> bf = BoundFactor.of(np.array([[4.0, 2.0], [2.0, 4.0]]), "sigmoid", 0.0)
        >>> bool(np.allclose(bf.dense().T @ bf.solve_t(np.ones((2, 1))), 1.0))
        True
        """
        Y = np.array(G, dtype=np.float64)
        for start, top, panel in self.panels:
            end = top + panel.shape[0]
            Y[start:end] -= panel[:start - top].T @ Y[top:start]
            Y[start:end] = solve_triangular(panel[start - top:], Y[start:end], lower=False, trans=True)
        return Y

    def mul(self, W: np.ndarray) -> np.ndarray:
        """R W.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.glm.fit import BoundFactor
        >>> bf = BoundFactor.of(np.array([[4.0, 2.0], [2.0, 4.0]]), "sigmoid", 0.0)
        >>> bool(np.allclose(bf.mul(bf.solve(np.ones((2, 3)))), 1.0))
        True
        """
        out = np.zeros((self.m, W.shape[1]))
        for start, top, panel in self.panels:
            end = top + panel.shape[0]
            out[top:end] += panel @ W[start:end]
        return out

    def dense(self) -> np.ndarray:
        """R as one (m, m) upper triangular array (tests and small problems).

        Examples
        --------
        >>> from edgeseq.train.glm.fit import BoundFactor
        >>> BoundFactor("softmax", 0.0).dense().shape
        (0, 0)
        """
        R = np.zeros((self.m, self.m))
        for start, top, panel in self.panels:
            end = top + panel.shape[0]
            R[top:end, start:end] = panel
        return R


class _Problem:
    """r in the preconditioned variables θ = (b, V), V = R W, evaluated by `evaluate(W, b)`.

    Every evaluation is a pass over the rows, so none is repeated: the last point is remembered
    (scipy's L-BFGS re-evaluates its starting point), and the start can be given already evaluated
    (`start`: the previous prefix's optimum with the new group at zero, whose gradient the scores
    have just computed). `n_evals` counts the passes actually made.
    """

    def __init__(self, evaluate, P, factor: BoundFactor, l2, start=None):
        self.evaluate, self.P, self.factor, self.l2 = evaluate, P, factor, l2
        self.last: dict = {}
        self.n_evals = 0
        self.start = start  # (r, ∂r/∂W, ∂r/∂b, f) at the first point asked for, or None

    def __call__(self, theta):
        P = self.P
        if self.last and np.array_equal(theta, self.last["theta"]):
            return self.last["value"]
        W = self.factor.solve(theta[P:].reshape(-1, P))
        b = theta[:P]
        if self.start is not None:
            (r, gW, gb, f), self.start = self.start, None
        else:
            r, gW, gb, f = self.evaluate(W, b)
            self.n_evals += 1
        gV = self.factor.solve_t(gW)  # ∂r/∂V = R⁻ᵀ ∂r/∂W
        value = (r, np.concatenate([gb, gV.ravel()]))
        self.last = dict(theta=theta.copy(), r=r, gW=gW, gb=gb, f=f, W=W, b=b, value=value)
        return value

    def grad_norm(self) -> float:
        return max(float(np.max(np.abs(self.last["gW"]))), float(np.max(np.abs(self.last["gb"]))))

    def minimize(self, theta0, tol) -> int:
        """L-BFGS from theta0 until ‖∇r‖_∞ <= tol (checked on every accepted iterate); returns evaluations."""
        self(theta0)
        if self.grad_norm() <= tol:
            return self.n_evals

        def callback(intermediate_result):
            if np.array_equal(intermediate_result.x, self.last["theta"]) and self.grad_norm() <= tol:
                raise StopIteration

        res = minimize(self, theta0, jac=True, method="L-BFGS-B", callback=callback,
                       options={"maxiter": MAX_ITER, "maxcor": MAXCOR, "gtol": 0.0, "ftol": 0.0})
        if not np.array_equal(res.x, self.last["theta"]):
            self(res.x)
        return self.n_evals


def refit(Zs, Y: np.ndarray, K_S: np.ndarray | None, W0: np.ndarray, b0: np.ndarray, link: str,
          l2: float, tol: float = GRAD_TOL, factor: BoundFactor | None = None, start=None) -> Refit:
    """Minimise r(W, b) over the selected columns, warm-started at (W0, b0).

    Every evaluation is one pass over the rows. The selection passes a chunked design (see
    `design_objective`) and the incrementally grown preconditioner factor (`BoundFactor`), so neither
    the selected columns nor a fresh factorisation is ever built; a plain array still works for small
    problems and tests.

    Parameters
    ----------
    Zs : array (n, m) or callable
        Selected working columns, or ``evaluate(W, b) -> (r, ∂r/∂W, ∂r/∂b, f)`` over them.
    Y : array (n, 1) or (n, P)
        0/1 target of class 1 (sigmoid) or one-hot classes (softmax).
    K_S : array (m, m) or None
        ``Zs.T @ Zs / n``, for the preconditioner (unused when `factor` is given).
    W0, b0 : arrays (m, P), (P,)
        Warm start.
    link : {"sigmoid", "softmax"}
    l2 : float
        Ridge penalty λ on W (not on b).
    tol : float
        Stop when ‖∇r‖_∞ is at most this.
    factor : BoundFactor, optional
        The factor of s·K_S + jitter·I, grown by the caller (otherwise factorised here from K_S).
    start : tuple, optional
        ``(r, ∂r/∂W, ∂r/∂b, f)`` at (W0, b0) when the caller already knows them (saves a pass).

    Returns
    -------
    Refit

    Examples
    --------
    The optimum is scikit-learn's L2 logistic regression with C = 1 / (n λ):

    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from edgeseq.train.glm.fit import refit
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.normal(size=(200, 2)); y = (Z @ [1.5, -1.0] + rng.normal(size=200) > 0).astype(float)
    >>> fit = refit(Z, y[:, None], Z.T @ Z / 200, np.zeros((2, 1)), np.zeros(1), "sigmoid", l2=0.01)
    >>> ref = LogisticRegression(C=1 / (200 * 0.01), tol=1e-10).fit(Z, y)
    >>> fit.converged, bool(np.allclose(fit.W[:, 0], ref.coef_[0], atol=1e-4))
    (True, True)
    """
    m, P = W0.shape
    evaluate = Zs if callable(Zs) else (lambda W, b: objective_gradient(Zs, Y, W, b, link, l2))
    if m == 0:  # intercept only: closed form
        b = prior_intercept(Y, link)
        r, gW, gb, f = evaluate(W0, b)
        return Refit(W0, b, f, r, float(np.max(np.abs(gb))), 0, True, r, gW, gb)
    factor = BoundFactor.of(K_S, link, l2, prior_curvature(Y, link)) if factor is None else factor
    theta = np.concatenate([b0, factor.mul(W0).ravel()])
    exact = _Problem(evaluate, P, factor, l2, start)
    evals = exact.minimize(theta, tol)
    last, norm = exact.last, exact.grad_norm()
    return Refit(last["W"], last["b"], last["f"], _loss_of(last["f"], Y, link), norm, evals, norm <= tol,
                 last["r"], last["gW"], last["gb"])


def _loss_of(f, Y, link) -> float:
    """Mean data loss at f; an evaluation that kept its rows elsewhere (a cluster) returns it as f.loss."""
    return f.loss if hasattr(f, "loss") else data_loss(f, Y, link)


def design_objective(design, groups, Y: np.ndarray, link: str, l2: float):
    """`evaluate(W, b)` for `refit`: r, ∂r/∂W, ∂r/∂b and f from one fused pass over a chunked design.

    `design` is a `glm_design.WorkingDesign` (anything with its `fused_pass`); `groups` the selected
    groups in the order of W's rows.

    Examples
    --------
    It agrees with `objective_gradient` on the materialised columns:

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.glm.design import WorkingDesign
    >>> from edgeseq.train.glm.fit import design_objective, objective_gradient
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); Y = np.eye(3)[rng.integers(0, 3, 60)]
    >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 2], whiten=True)
    >>> d = WorkingDesign(X, np.arange(3), prob, chunk_rows=16)
    >>> W, b = rng.normal(size=(2, 3)), rng.normal(size=3)
    >>> got = design_objective(d, [1], Y, "softmax", 0.1)(W, b)
    >>> want = objective_gradient(d.columns([1]), Y, W, b, "softmax", 0.1)
    >>> all(np.allclose(a, c) for a, c in zip(got, want))
    True
    """
    n = Y.shape[0]

    def evaluate(W, b):
        f, G, gb, loss = link_pass(design, groups, W, b, Y, link)
        r = loss / n + 0.5 * l2 * float(np.sum(W * W))
        return r, G / n + l2 * W, gb / n, f

    return evaluate


def link_pass(design, groups, W: np.ndarray, b: np.ndarray, Y: np.ndarray, link: str):
    """f = Z_S W + b, the unscaled sums Z_Sᵀ(∇φ(f) − Y), Σ_i (∇φ(f_i) − y_i) and the summed data loss
    Σ_i φ(f_i) − y_iᵀ f_i in one pass over `design` (the loss per chunk, sharing the link's exponential).

    The one place where a pass over rows becomes loss-gradient material: the in-memory objective
    divides the sums by n, a cluster adds them over its partitions first (`dask_glm`), so both
    evaluate the same expression.

    Returns
    -------
    f : array (n, P)
    G : array (m, P)
    gb : array (P,)
    loss : float
        The data loss summed over the rows (divide by n for the mean).

    Examples
    --------
    On a materialised design (identity transforms) the sums are plain products:

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.glm.design import WorkingDesign
    >>> from edgeseq.train.glm.fit import data_loss, link_pass, mean_function
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> Z = np.random.default_rng(1).normal(size=(30, 2)); Y = (Z[:, :1] > 0).astype(float)
    >>> d = WorkingDesign.from_array(Z, build_working_problem(sufficient_statistics(Z, Y), [1, 1], whiten=False))
    >>> f, G, gb, loss = link_pass(d, [0], np.ones((1, 1)), np.zeros(1), Y, "sigmoid")
    >>> R = mean_function(Z[:, :1], "sigmoid") - Y
    >>> bool(np.allclose(f, Z[:, :1])), bool(np.allclose(G, Z[:, :1].T @ R)), bool(np.allclose(gb, R.sum(axis=0)))
    (True, True, True)
    >>> bool(np.isclose(loss / 30, data_loss(Z[:, :1], Y, "sigmoid")))
    True
    """
    gb = np.zeros(Y.shape[1])
    loss = [0.0]

    def residual(f_rows, rows):
        chunk_loss, p = loss_and_mean(f_rows, Y[rows], link)
        loss[0] += chunk_loss
        R = p - Y[rows]
        gb[:] += R.sum(axis=0)
        return R

    f, G = design.fused_pass(groups, W, b, residual)
    return f, G, gb, loss[0]


def n_correct(f: np.ndarray, Y: np.ndarray, link: str) -> int:
    """How many rows the linear predictor f classifies as their target Y does (0/1 column or one-hot).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.glm.fit import n_correct
    >>> n_correct(np.array([[1.0], [-2.0], [0.5]]), np.array([[1.0], [1.0], [1.0]]), "sigmoid")
    2
    >>> n_correct(np.array([[0.0, 3.0], [2.0, 1.0]]), np.eye(2)[[1, 1]], "softmax")
    1
    """
    pred = (f[:, 0] > 0).astype(int) if link == "sigmoid" else np.argmax(f, axis=1)
    truth = Y[:, 0].astype(int) if link == "sigmoid" else np.argmax(Y, axis=1)
    return int(np.sum(pred == truth))
