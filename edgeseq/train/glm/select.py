"""Greedy cost-sensitive group selection for logistic / multinomial models (thesis Algorithm 5).

Unlike squared loss, a GLM's gradient depends on the rows, so every evaluation is a pass over them.
The working design Z = (X_used − μ) T is never materialised: `glm_design.WorkingDesign` reads the raw
rows chunk by chunk and moves the block-diagonal transform onto the weights, so memory beyond X stays
O(chunk + k²). The refits' preconditioner factor grows by one block per step (`glm_fit.BoundFactor`)
instead of being refactorised. Each step:

1. candidate gradient blocks G_g = Z_gᵀ(∇φ(f) − Y)/n at the current optimum (one n×k×P product);
2. score: OMP ‖G_g‖_F²/c_g (gomp: no cost), single: best standardised raw column, FR: the score test
   ½⟨G_g, M_g⁻¹G_g⟩/c_g, M_g the Schur complement of the loss Hessian for g given the selected set
   (and the intercept) — the gain of the local quadratic model, with no refit per candidate;
3. append the winner (ties: lowest group index) and refit all selected groups jointly (glm_fit).

FR curvature: binary uses the exact Hessian (weighted Gram Zᵀdiag(p(1−p))Z/n + λI). Multinomial uses
Böhning's constant bound ½(I − 11ᵀ/P) ⊗ K + λI by default — on class-centred gradients its Schur
complement is ½(K_gg + 2λI − C_gS C_S⁻¹ C_Sg) with C = K + 2λI, i.e. the linear case's incremental
factor on K (no pass over the rows). ``fr_hessian="diag"`` instead uses per-class weights p_k(1−p_k);
README "classification" gives the measurement that chose the bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from scipy.linalg import solve_triangular

from edgeseq.train.linear.basis import WorkingProblem
from edgeseq.train.glm.design import WorkingDesign
from edgeseq.train.glm.fit import (BOUND_SCALE, GRAD_TOL, BoundFactor, Refit, design_objective, mean_function,
                                   n_correct, prior_curvature, refit)
from edgeseq.format import METHODS
from edgeseq.train.linear.kernel import CholeskyFactor, SchurBlocks, pick_best, schur_gains, single_column_scores, step_pool
from edgeseq.train.products import transposed_product

FR_HESSIANS = ("bohning", "diag")
# Methods whose score compares a group with the selected ones (a Schur complement) and so reads the
# cross-group blocks of the Gram; the others score each group on its own, and their refits only use K
# as a preconditioner, so the within-group blocks suffice (`edgeseq.train.linear.group_stats`).
CROSS_GRAM_METHODS = frozenset({"fr"})
_CHUNK_BYTES = 64 * 2**20


@dataclass
class GLMSelectionResult:
    """Order, per-prefix working weights and intercepts, and training diagnostics of a GLM selection.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.glm.select import GLMState, select_glm, working_design
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); Y = (X[:, 2] - X[:, 0] > 0).astype(float)[:, None]
    >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 1, 1], whiten=True)
    >>> res = select_glm(GLMState(prob, working_design(X, np.arange(3), prob), Y, "sigmoid", 1e-3), np.ones(3))
    >>> res.intercepts.shape, bool(res.log_loss[0] > res.log_loss[-1]), res.not_converged
    ((4, 1), True, [])
    """
    order: list[int]
    prefix_weights: list[list[np.ndarray]]  # prefix j: working-space weights (k_g, P) of order[:j]
    intercepts: np.ndarray  # (J+1, P)
    log_loss: np.ndarray  # (J+1,) training mean log-loss of each prefix
    accuracy: np.ndarray  # (J+1,) training accuracy of each prefix
    grad_norms: np.ndarray  # (J+1,) ‖∇r‖_∞ at each prefix's solution
    n_evals: np.ndarray  # (J+1,) full-pass equivalents of objective/gradient evaluations of each refit
    scores: list[float]
    passes: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (J,) passes over the rows of each step
    not_converged: list[int] = field(default_factory=list)  # prefixes whose refit missed GRAD_TOL
    doubling_violations: list[int] = field(default_factory=list)
    unusable: list[int] = field(default_factory=list)


def working_design(X, used: np.ndarray, prob: WorkingProblem) -> np.ndarray:
    """Z = (X[:, used] − μ) T, block by block and in row chunks (bounded temporaries).

    Examples
    --------
    The whitened design has identity covariance within each group:

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.glm.select import working_design
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.random.default_rng(0).normal(size=(100, 2)) @ [[1.0, 0.8], [0.0, 0.5]]
    >>> prob = build_working_problem(sufficient_statistics(X, X[:, :1]), [2], whiten=True)
    >>> Z = working_design(X, np.arange(2), prob)
    >>> bool(np.allclose(Z.T @ Z / 100, np.eye(2)))
    True
    """
    n = X.shape[0]
    k = prob.n_working
    Z = np.empty((n, k))
    d = max(1, used.size)
    rows = max(1, _CHUNK_BYTES // (8 * d))
    for start in range(0, n, rows):
        xc = np.asarray(X[start:start + rows][:, used], dtype=np.float64) - prob.x_mean
        for T, rs, s in zip(prob.transforms, prob.raw_slices, prob.slices):
            if T.shape[1]:
                Z[start:start + rows, s] = xc[:, rs] @ T
    return Z


class GLMState:
    """The greedy state: selected groups, their refit, and the scores of the remaining groups.

    Parameters
    ----------
    prob : WorkingProblem
    Z : WorkingDesign or array (n, k)
        The training rows as a chunked `WorkingDesign` (what the classifier passes: nothing of size
        n × k is built), or a materialised `working_design` (small problems, tests).
    Y : array (n, 1) or (n, P)
        0/1 target (sigmoid) or one-hot classes (softmax).
    link : {"sigmoid", "softmax"}
    l2 : float
    X, used : optional
        Raw rows and used columns (only the ``single`` score reads them).
    fr_hessian : {"bohning", "diag"}
        Curvature used by the FR score for multinomial models.
    release_selected : bool
        Give back the memory of what nothing reads once a group is selected: its rows of ``prob.K``
        and its columns of the FR score's factor (`WorkingProblem.release_k_rows`,
        `CholeskyFactor.release_selected`). Only for an owner of `prob` that will not read K again
        (the classifier); the FR score's memory then stays near one k × k array.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.glm.select import GLMState, working_design
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); Y = (X[:, 2] - X[:, 0] > 0).astype(float)[:, None]
    >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 1, 1], whiten=True)
    >>> state = GLMState(prob, working_design(X, np.arange(3), prob), Y, "sigmoid", l2=1e-3)
    >>> state.order, state.fit.W.shape, round(state.fit.loss, 2)  # empty: the intercept-only model
    ([], (0, 1), 0.69)
    """

    def __init__(self, prob: WorkingProblem, Z, Y: np.ndarray, link: str, l2: float,
                 X=None, used=None, fr_hessian: str = "bohning", tol: float = GRAD_TOL,
                 release_selected: bool = False):
        if fr_hessian not in FR_HESSIANS:
            raise ValueError(f"fr_hessian must be one of {FR_HESSIANS}, got {fr_hessian!r}")
        self.prob, self.Y, self.link, self.l2 = prob, Y, link, l2
        self.X, self.used, self.fr_hessian, self.tol = X, used, fr_hessian, tol
        self.release_selected = release_selected
        self._released = False  # whether some rows of K were given back (then no factor can be rebuilt)
        # a design object (chunked, or partitioned on a cluster: `dask_glm`) is used as is
        self.design = WorkingDesign.from_array(Z, prob) if isinstance(Z, np.ndarray) else Z
        self.n, self.P = self.design.n, Y.shape[1]
        self.cols: list[int] = []  # working columns of the selected groups, in selection order
        self.order: list[int] = []
        self._bound: CholeskyFactor | None = None
        diag = prob.k_diagonal()
        self._precond = BoundFactor(link, l2, float(diag.mean()) if diag.size else 1.0, prior_curvature(Y, link))
        self._scored = None  # (fit, groups, G) of the last `gradient` call
        self.fit = refit(self._objective(), Y, None, np.zeros((0, self.P)), np.zeros(self.P), link, l2, tol)

    def _selected(self) -> list[int]:
        """Selected groups that have working columns, in selection order (the rows of fit.W)."""
        return [g for g in self.order if self.prob.usable(g)]

    def _objective(self):
        return design_objective(self.design, self._selected(), self.Y, self.link, self.l2)

    # ------------------------------------------------------------------ scores
    def residual(self) -> np.ndarray:
        """∇φ(f) − Y on the training rows: predicted probabilities minus targets.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.select import GLMState, working_design
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(4, 1)); Y = np.array([[1.0], [1.0], [1.0], [0.0]])
        >>> prob = build_working_problem(sufficient_statistics(X, Y), [1], whiten=True)
        >>> state = GLMState(prob, working_design(X, np.arange(1), prob), Y, "sigmoid", l2=1e-3)
        >>> state.residual().ravel().round(4).tolist()  # prior model predicts 3/4 everywhere
        [-0.25, -0.25, -0.25, 0.75]
        """
        return mean_function(self.fit.f, self.link) - self.Y

    def gradient(self, groups=None) -> np.ndarray:
        """G = Zᵀ(∇φ(f) − Y)/n (k, P) on the working columns of `groups` (default all; zero elsewhere).

        The candidates' blocks are the score input, so scoring reads only the candidates' columns: the
        selected ones, whose gradient the refit has just driven to zero, are not read again.

        Examples
        --------
        Only the column that drives the label has a large gradient at the prior:

        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.select import GLMState, working_design
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(500, 2)); Y = (X[:, 1] > 0).astype(float)[:, None]
        >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 1], whiten=True)
        >>> G = GLMState(prob, working_design(X, np.arange(2), prob), Y, "sigmoid", l2=1e-3).gradient()
        >>> bool(abs(G[1, 0]) > 10 * abs(G[0, 0]))
        True
        """
        groups = range(self.prob.n_groups) if groups is None else [g for g in groups if self.prob.usable(g)]
        G = np.zeros((self.prob.n_working, self.P))
        rows = self._gradient_rows(list(groups)) / self.n
        r = 0
        for g in groups:
            s = self.prob.slices[g]
            G[s] = rows[r:r + s.stop - s.start]
            r += s.stop - s.start
        self._scored = (self.fit, set(groups), G)  # the next refit starts from this gradient (`add`)
        return G

    def _gradient_rows(self, groups: list[int]) -> np.ndarray:
        """Z_groupsᵀ(∇φ(f) − Y), unscaled, in working-column order (a cluster state computes it remotely)."""
        return self.design.gradient(self.residual(), groups)

    def scores(self, method: str, cands: list[int], costs: np.ndarray) -> np.ndarray:
        """Score of every candidate group under `method` (higher is better).

        Examples
        --------
        A costly informative group can lose to a cheap one under OMP, but not without costs (gomp):

        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.select import GLMState, working_design
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(500, 2)); Y = (2 * X[:, 1] + X[:, 0] > 0).astype(float)[:, None]
        >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 1], whiten=True)
        >>> state = GLMState(prob, working_design(X, np.arange(2), prob), Y, "sigmoid", l2=1e-3)
        >>> costs = np.array([1.0, 100.0])
        >>> [int(np.argmax(state.scores(m, [0, 1], costs))) for m in ("omp", "gomp", "fr")]
        [0, 1, 0]
        """
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")
        if method == "single":
            return self._single(cands) / costs[cands]
        G = self.gradient(cands)
        if method == "fr":
            return self._fr_gains(G, cands) / costs[cands]
        norms = np.array([np.sum(G[self.prob.slices[g]] ** 2) for g in cands])
        return norms if method == "gomp" else norms / costs[cands]

    def _single(self, cands) -> np.ndarray:
        """Best single standardised raw column per group: Σ_p (x̃_jᵀ r_p / n)² / var_j."""
        return single_column_scores(self.prob, self._raw_gradient() / self.n, cands)

    def _raw_gradient(self) -> np.ndarray:
        """(X_used − μ)ᵀ(∇φ(f) − Y) on every used raw column, unscaled."""
        R = self.residual()
        self.design.passes += 1  # a pass over the raw rows too
        grad = np.zeros((self.used.size, self.P))
        rows = max(1, _CHUNK_BYTES // (8 * max(1, self.used.size)))
        for start in range(0, self.n, rows):
            xc = np.asarray(self.X[start:start + rows][:, self.used], dtype=np.float64) - self.prob.x_mean
            grad += transposed_product(xc, R[start:start + rows])
        return grad

    def _fr_gains(self, G: np.ndarray, cands) -> np.ndarray:
        if self.link == "softmax" and self.fr_hessian == "bohning":
            s = BOUND_SCALE["softmax"]
            if self._bound is None:
                if self._released:
                    raise ValueError("K's rows of the selected groups were released; the FR factor cannot be rebuilt")
                if self.prob.K is None:
                    raise ValueError("the FR score needs the cross-group Gram: build the working problem "
                                     "from the full statistics, not the within-group ones")
                self._bound = CholeskyFactor(self.prob.K, np.zeros((self.prob.K.shape[0], 1)), self.l2 / s)
                for g in self.order:
                    self._grow_bound(g)
            return schur_gains(self._bound, G, self.prob.slices, cands) / s
        total = np.zeros(len(cands))
        for c, sums in enumerate(self._weighted_sums(cands)):
            total += schur_gains(self._weighted_schur(sums, cands), G[:, c:c + 1], self.prob.slices, cands)
        return total

    def _weighted_sums(self, cands) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per class: the unscaled weighted Gram sums `weighted_gram_sums` adds up, w = p(1 − p) at the fit.

        Binary: the exact Hessian's weights (n, 1); multinomial: per-class diagonal approximation (n, P).
        One pass over the row chunks of the working design per class; nothing of size n × k is kept.
        """
        p = mean_function(self.fit.f, self.link)
        weights = p * (1.0 - p)
        out = []
        for c in range(weights.shape[1]):
            sums = None
            for rows, Zc in self.design.chunks():
                sums = weighted_gram_sums(Zc, weights[rows, c:c + 1], self.cols, cands, self.prob.slices, sums)
            out.append(sums)
        return out

    def _weighted_schur(self, sums, cands) -> SchurBlocks:
        """Blocks of H = [1, Z]ᵀ diag(w) [1, Z]/n + λI(no intercept) needed by the Schur complements."""
        n, m = self.n, len(self.cols)
        H_SS, WSZ, C = sums  # fresh sums of this step: scaled in place
        H_SS /= n
        H_SS[1:, 1:] += self.l2 * np.eye(m)
        L = np.linalg.cholesky(H_SS + 1e-12 * max(1.0, float(np.trace(H_SS))) * np.eye(m + 1))
        V = solve_triangular(L, WSZ / n, lower=True)  # (m+1, k), working-column order
        for g in cands:
            s = self.prob.slices[g]
            C[s, s] = C[s, s] / n + self.l2 * np.eye(s.stop - s.start)
        return SchurBlocks(C, V)

    # ------------------------------------------------------------------ growth
    def add(self, g: int) -> Refit:
        """Append group g and refit all selected groups jointly, warm-started from the previous prefix.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.select import GLMState, working_design
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 2)); Y = (X[:, 1] > 0).astype(float)[:, None]
        >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 1], whiten=True)
        >>> state = GLMState(prob, working_design(X, np.arange(2), prob), Y, "sigmoid", l2=1e-2)
        >>> before = state.fit.loss
        >>> fit = state.add(1)
        >>> state.order, fit.converged, bool(fit.loss < before)
        ([1], True, True)
        """
        s = self.prob.slices[g]
        kg = s.stop - s.start
        if kg:
            self._precond.append(self.prob.k_cross(self.cols, g), self.prob.k_group_block(g))
        self.cols.extend(range(s.start, s.stop))
        self.order.append(g)
        if self._bound is not None:
            self._grow_bound(g)
            if self.release_selected:  # both factors have read g's rows of K: nothing will again
                self.prob.release_k_rows(g)
                self._bound.release_selected(s)
                self._released = True
        W0 = np.vstack([self.fit.W, np.zeros((kg, self.P))])
        self.fit = refit(self._objective(), self.Y, None, W0, self.fit.b, self.link, self.l2, self.tol,
                         self._precond, self._start(g))
        return self.fit

    def _start(self, g: int):
        """(r, ∂r/∂W, ∂r/∂b, f) at the warm start: the previous optimum (same f, same r) with g's block at
        zero, whose gradient is g's block of the scores' gradient (λ·0 adds nothing). None when the
        scores did not compute it (``single``) — the refit then evaluates the start itself."""
        fit = self.fit
        scored, self._scored = self._scored, None
        if scored is None or scored[0] is not fit or fit.gW is None or (self.prob.usable(g) and g not in scored[1]):
            return None
        gW = np.vstack([fit.gW, scored[2][self.prob.slices[g]]])
        return fit.objective, gW, fit.gb, fit.f

    def _grow_bound(self, g: int) -> None:
        s = self.prob.slices[g]
        self._bound.append(g, s, np.zeros((s.stop - s.start, 1)))

    def weights(self) -> list[np.ndarray]:
        """Current working-space weights split per selected group.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.select import GLMState, working_design
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 3)); Y = (X[:, 1] > 0).astype(float)[:, None]
        >>> prob = build_working_problem(sufficient_statistics(X, Y), [2, 1], whiten=True)
        >>> state = GLMState(prob, working_design(X, np.arange(3), prob), Y, "sigmoid", l2=1e-2)
        >>> _ = state.add(1); _ = state.add(0)
        >>> [w.shape for w in state.weights()]  # in selection order: group 1 then group 0
        [(1, 1), (2, 1)]
        """
        out, r = [], 0
        for g in self.order:
            kg = self.prob.slices[g].stop - self.prob.slices[g].start
            out.append(self.fit.W[r:r + kg].copy())
            r += kg
        return out

    def accuracy(self) -> float:
        """Training accuracy of the current prefix (what the classifier's training curve records).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.select import GLMState, working_design
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 1)); Y = (X[:, 0] > 0).astype(float)[:, None]
        >>> prob = build_working_problem(sufficient_statistics(X, Y), [1], whiten=True)
        >>> state = GLMState(prob, working_design(X, np.arange(1), prob), Y, "sigmoid", l2=1e-3)
        >>> _ = state.add(0)
        >>> state.accuracy()  # separable data
        1.0
        """
        return self._n_correct() / self.n

    def _n_correct(self) -> int:
        return n_correct(self.fit.f, self.Y, self.link)


def weighted_gram_sums(Zc: np.ndarray, wc: np.ndarray, cols: list[int], cands, slices, sums=None):
    """Add one row chunk's [1, Z_S]ᵀ diag(w) [1, Z_S], [1, Z_S]ᵀ diag(w) Z and candidates' Z_gᵀ diag(w) Z_g.

    What the FR score test needs from the rows, as sums: in process they run over the chunks of one
    design, on a cluster over each partition's chunks and then across partitions.

    Parameters
    ----------
    Zc : array (r, k)
        Working columns of a row chunk (all groups).
    wc : array (r, 1)
        Row weights.
    cols : list of int
        Working columns of the selected groups, in selection order.
    cands : list of int
    slices : list of slice
        Working columns of every group.
    sums : tuple of arrays or None
        The running (H_SS, WSZ, C); None starts from zeros.

    Returns
    -------
    tuple of arrays
        (H_SS (m+1, m+1), WSZ (m+1, k), C (k, k), filled on the candidates' diagonal blocks).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.glm.select import weighted_gram_sums
    >>> Z = np.arange(12.0).reshape(4, 3); w = np.full((4, 1), 0.5)
    >>> H, WSZ, C = weighted_gram_sums(Z, w, [0], [1], [slice(0, 1), slice(1, 3)])
    >>> bool(np.allclose(H, 0.5 * np.c_[np.ones(4), Z[:, 0]].T @ np.c_[np.ones(4), Z[:, 0]]))
    True
    >>> bool(np.allclose(C[1:, 1:], 0.5 * Z[:, 1:].T @ Z[:, 1:])), bool(np.allclose(C[0, 0], 0.0))
    (True, True)
    """
    m, k = len(cols), Zc.shape[1]
    H_SS, WSZ, C = sums if sums is not None else (np.zeros((m + 1, m + 1)), np.zeros((m + 1, k)), np.zeros((k, k)))
    S1 = np.hstack([np.ones((Zc.shape[0], 1)), Zc[:, cols]])
    WS = S1 * wc
    H_SS += WS.T @ S1
    WSZ += WS.T @ Zc
    for g in cands:
        s = slices[g]
        Zg = Zc[:, s]
        C[s, s] += (Zg * wc).T @ Zg
    return H_SS, WSZ, C


def select_glm(state: GLMState, costs: np.ndarray, *, method: str = "omp", doubling: bool = False,
               c_min: float | None = None, progress=None) -> GLMSelectionResult:
    """Order all groups greedily from an empty GLMState; record every prefix's refit.

    Parameters
    ----------
    state : GLMState
        Fresh (nothing selected yet).
    costs : array (J,)
    method : {"omp", "fr", "single", "gomp"}
    doubling : bool
        Restrict each step to groups costing at most what was spent so far.
    progress : callable, optional
        ``progress(step, n_steps, group, refit)`` after each pick.

    Returns
    -------
    GLMSelectionResult

    Examples
    --------
    The informative groups come first, the noise group last:

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.glm.select import GLMState, select_glm, working_design
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); Y = (2 * X[:, 2] - X[:, 0] > 0).astype(float)[:, None]
    >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 1, 1], whiten=True)
    >>> res = select_glm(GLMState(prob, working_design(X, np.arange(3), prob), Y, "sigmoid", 1e-3), np.ones(3))
    >>> res.order, bool(res.accuracy[0] < res.accuracy[1] < res.accuracy[2])
    ([2, 0, 1], True)
    """
    prob = state.prob
    costs = np.asarray(costs, dtype=np.float64)
    remaining = list(range(prob.n_groups))
    fits, weights, accs = [replace(state.fit, f=None)], [[]], [state.accuracy()]
    scores, violations, passes = [], [], []
    c_first = float(costs.min()) if c_min is None else float(c_min)
    for step in range(1, prob.n_groups + 1):
        limit = float(costs[state.order].sum()) if state.order else c_first
        pool, any_usable, violated = step_pool(prob, remaining, costs, doubling, limit)
        if violated:
            violations.append(step)
        before = state.design.passes
        sc = state.scores(method, pool, costs) if any_usable else np.zeros(len(pool))
        g = pick_best(sc, pool)
        scores.append(float(sc[pool.index(g)]))
        fits.append(state.add(g))
        passes.append(state.design.passes - before)
        weights.append(state.weights())
        accs.append(state.accuracy())
        remaining.remove(g)
        if progress is not None:
            progress(step, prob.n_groups, g, fits[-1])
        fits[-1] = replace(fits[-1], f=None)  # only the summary is kept: J copies of f (n × P) add up
    return GLMSelectionResult(
        order=list(state.order), prefix_weights=weights, intercepts=np.array([f.b for f in fits]),
        log_loss=np.array([f.loss for f in fits]), accuracy=np.array(accs),
        grad_norms=np.array([f.grad_norm for f in fits]), n_evals=np.array([f.n_evals for f in fits]),
        scores=scores, passes=np.array(passes, dtype=np.int64), not_converged=[j for j, f in enumerate(fits) if not f.converged],
        doubling_violations=violations, unusable=[g for g in range(prob.n_groups) if not prob.usable(g)])
