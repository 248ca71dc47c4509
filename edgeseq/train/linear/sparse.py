"""The Sparse baseline: cost-weighted group lasso along a decreasing λ path (docs/evaluation.md).

    min_w  ½ n⁻¹ ‖ỹ − Z w‖²_F + λ Σ_g c_g ‖w_g‖_F

on the same working basis as the estimators (centred columns, each group whitened or standardised by
:mod:`edgeseq.train.linear.basis`, each output centred and scaled by σ_y), using the same one-pass statistics
(:mod:`edgeseq.train.linear.stats`): the loss is ½wᵀKw − ⟨q, w⟩ + const, so the solver never touches the n rows.

Solver: block coordinate descent with a proximal-gradient step per block, step 1/L_g with
L_g = λ_max(K_gg). On whitened data K_gg = I, so each block step is the *exact* block minimiser, a
group soft-threshold. Every 5 sweeps the iterates are Anderson-extrapolated (as skglm and celer do;
kept only if the objective drops). Each λ is warm-started from the previous one. Convergence is declared when
the KKT conditions hold to `tol` relative to λ:

* active g  (w_g ≠ 0): ‖∇_g + λ c_g w_g/‖w_g‖‖ ≤ tol·λ·c_g
* inactive g (w_g = 0): ‖∇_g‖ ≤ (1 + tol)·λ·c_g,       with ∇_g = (K w − q)_g = −Z_gᵀr/n.

λ_max = max_g ‖q_g‖/c_g is exact: it is the smallest λ for which w = 0 satisfies the KKT conditions.

The sequence is the order in which groups first become non-zero along the path. Groups entering at
the same λ are ordered by their KKT ratio ‖∇_g‖/c_g at the previous path point (the one that would
enter first on a finer grid), ties to the lowest index. Groups never activated by the end of the path
are appended by the same ratio at the last path point, then groups with no usable direction (constant
columns), by index. Prefix j's *path* solution is the last path point before the (j+1)-th group first
becomes non-zero (its active set is within the first j groups; members may be zero there); the
*refit* of prefix j is the ridge fit (K_SS + l2·I)⁻¹q_S on those groups, as the estimators fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from edgeseq.train.linear.basis import WorkingProblem, build_working_problem
from edgeseq.errors import InputError
from edgeseq.forms.groups import check_groups
from edgeseq.train.linear.fold import fold_regression
from edgeseq.train.linear.selection import SelectionResult
from edgeseq.forms.linear import FittedSequence
from edgeseq.train.linear.stats import sufficient_statistics


# ------------------------------------------------------------------------------------- the solver
def group_lipschitz(K: np.ndarray, slices) -> np.ndarray:
    """L_g = largest eigenvalue of K_gg (1 on whitened data): the block step size is 1/L_g.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.sparse import group_lipschitz
    >>> K = np.diag([1.0, 4.0, 3.0])
    >>> group_lipschitz(K, [slice(0, 1), slice(1, 3), slice(3, 3)]).tolist()  # empty group: 1
    [1.0, 4.0, 1.0]
    """
    out = np.ones(len(slices))
    for g, s in enumerate(slices):
        if s.stop > s.start:
            out[g] = max(float(np.linalg.eigvalsh(K[s, s])[-1]), 1e-300)
    return out


def kkt_violation(K: np.ndarray, q: np.ndarray, w: np.ndarray, slices, costs: np.ndarray, lam: float,
                  Kw: np.ndarray | None = None) -> np.ndarray:
    """Per group, how far w is from optimality at λ, in units of λ·c_g (0 means the KKT condition holds).

    The solver's stopping test: it measures optimality in the same units for every group whatever its cost.

    Examples
    --------
    At λ_max = max_g ‖q_g‖/c_g, w = 0 is optimal, and just below it is not:

    >>> import numpy as np
    >>> from edgeseq.train.linear.sparse import kkt_violation
    >>> K, q = np.eye(2), np.array([[2.0], [1.0]])
    >>> slices, costs = [slice(0, 1), slice(1, 2)], np.array([1.0, 1.0])
    >>> kkt_violation(K, q, np.zeros((2, 1)), slices, costs, lam=2.0).tolist()
    [0.0, 0.0]
    >>> kkt_violation(K, q, np.zeros((2, 1)), slices, costs, lam=1.0).tolist()
    [1.0, 0.0]
    """
    grad = (K @ w if Kw is None else Kw) - q
    out = np.zeros(len(slices))
    for g, s in enumerate(slices):
        if s.stop == s.start:
            continue
        wg, gg = w[s], grad[s]
        nw = np.linalg.norm(wg)
        scale = lam * costs[g]
        if nw > 0:
            out[g] = np.linalg.norm(gg + scale * wg / nw) / scale
        else:
            out[g] = max(0.0, np.linalg.norm(gg) / scale - 1.0)
    return out


def _objective(Kw, q, w, slices, costs, lam) -> float:
    pen = sum(costs[g] * np.linalg.norm(w[s]) for g, s in enumerate(slices))
    return float(0.5 * np.sum(w * Kw) - np.sum(q * w) + lam * pen)


def _anderson(history: list[np.ndarray]) -> np.ndarray | None:
    """Anderson extrapolation of the last iterates (Bertrand & Massias 2021), or None if degenerate."""
    U = np.array([(b - a).ravel() for a, b in zip(history[:-1], history[1:])])
    try:
        z = np.linalg.solve(U @ U.T, np.ones(U.shape[0]))
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(z)) or z.sum() == 0:
        return None
    c = z / z.sum()
    return np.tensordot(c, np.array(history[1:]), axes=1)


def solve_group_lasso(K: np.ndarray, q: np.ndarray, slices, costs: np.ndarray, lam: float,
                      w0: np.ndarray | None = None, *, tol: float = 1e-7, max_sweeps: int = 100_000,
                      lipschitz: np.ndarray | None = None, anderson: int = 5) -> tuple[np.ndarray, int]:
    """Minimise ½wᵀKw − ⟨q, w⟩ + λ Σ c_g‖w_g‖_F by block coordinate descent; returns (w, sweeps).

    Every `anderson` sweeps the last iterates are extrapolated (Anderson acceleration, as skglm and
    celer do) and the extrapolation is kept only if it lowers the objective, so the iteration stays
    monotone. Raises InputError if the KKT tolerance is not reached within `max_sweeps` full sweeps.

    Parameters
    ----------
    K : array (k, k)
    q : array (k, P)
    slices : list of slice
        Working columns of each group.
    costs : array (J,)
        Penalty weight of each group.
    lam : float
        λ > 0.
    w0 : array (k, P), optional
        Warm start (the path passes the previous λ's solution).

    Returns
    -------
    w : array (k, P)
    sweeps : int

    Raises
    ------
    InputError
        λ <= 0, or no convergence within `max_sweeps`.

    Examples
    --------
    With one column per group and unit costs this is the Lasso; scikit-learn's solver agrees:

    >>> import numpy as np
    >>> from sklearn.linear_model import Lasso
    >>> from edgeseq.train.linear.sparse import solve_group_lasso
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 4)); y = X @ [2.0, 0.0, -1.0, 0.1] + 0.1 * rng.normal(size=100)
    >>> K, q = X.T @ X / 100, (X.T @ y / 100)[:, None]
    >>> w, _ = solve_group_lasso(K, q, [slice(i, i + 1) for i in range(4)], np.ones(4), lam=0.2, tol=1e-10)
    >>> ref = Lasso(alpha=0.2, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y).coef_
    >>> bool(np.allclose(w[:, 0], ref, atol=1e-6)), (w[:, 0] == 0).tolist()
    (True, [False, True, False, True])
    """
    if not lam > 0:
        raise InputError(f"λ must be > 0, got {lam!r}")
    L = group_lipschitz(K, slices) if lipschitz is None else lipschitz
    w = np.zeros_like(q) if w0 is None else np.array(w0, dtype=np.float64)
    live = [g for g, s in enumerate(slices) if s.stop > s.start]
    cols = {g: np.ascontiguousarray(K[:, slices[g]]) for g in live}
    Kw = K @ w
    history = [w.copy()]
    check_every = anderson if anderson else 5
    for sweep in range(1, max_sweeps + 1):
        for g in live:
            s = slices[g]
            u = w[s] - (Kw[s] - q[s]) / L[g]
            nu = np.linalg.norm(u)
            thr = lam * costs[g] / L[g]
            # a block within rounding of its threshold (e.g. the first group at exactly λ_max) stays zero
            new = (1.0 - thr / nu) * u if nu > thr * (1.0 + 1e-12) else np.zeros_like(u)
            delta = new - w[s]
            if np.any(delta):
                Kw += cols[g] @ delta
                w[s] = new
        if anderson:
            history.append(w.copy())
        if sweep % check_every:
            continue
        Kw = K @ w  # refresh: no drift from the incremental updates
        if anderson:
            extr = _anderson(history)
            if extr is not None:
                K_extr = K @ extr
                if _objective(K_extr, q, extr, slices, costs, lam) < _objective(Kw, q, w, slices, costs, lam):
                    w, Kw = extr, K_extr
            history = [w.copy()]
        if np.max(kkt_violation(K, q, w, slices, costs, lam, Kw=Kw), initial=0.0) <= tol:
            return w, sweep
    raise InputError(f"group lasso did not reach KKT tolerance {tol} at λ={lam:.3g} in {max_sweeps} "
                     "sweeps; raise max_sweeps or tol")


def _skglm_solver(prob: WorkingProblem, costs: np.ndarray, tol: float):
    """The optional skglm backend (`pip install 'edgeseq[sparse]'`), fed a k-row pseudo-design.

    skglm works on rows; A = √k·E^{1/2}Vᵀ and b = √k·E^{-1/2}Vᵀq (K = VEVᵀ, positive part) satisfy
    AᵀA/k = K and Aᵀb/k = q (q lies in the range of K), so ½k⁻¹‖b − Aw‖² is our loss up to a constant
    and the problem stays in D-space.
    """
    try:
        from skglm import GeneralizedLinearEstimator
        from skglm.datafits import QuadraticGroup
        from skglm.penalties import WeightedGroupL2
        from skglm.solvers import GroupBCD
    except ImportError:
        raise InputError("solver='skglm' needs the optional skglm package: pip install 'edgeseq[sparse]'") from None
    if prob.q.shape[1] != 1:
        raise InputError("solver='skglm' handles one output only; use the default solver='bcd' for several")
    live = [g for g, s in enumerate(prob.slices) if s.stop > s.start]
    idx = np.concatenate([np.arange(prob.slices[g].start, prob.slices[g].stop) for g in live])
    e, V = np.linalg.eigh(prob.K[np.ix_(idx, idx)])
    keep = e > 1e-12 * e[-1]
    k = idx.size
    A = np.sqrt(k) * (np.sqrt(e[keep])[:, None] * V[:, keep].T)
    b = np.sqrt(k) * (V[:, keep].T @ prob.q[idx, 0]) / np.sqrt(e[keep])
    ptr = np.concatenate([[0], np.cumsum([prob.slices[g].stop - prob.slices[g].start for g in live])])
    ptr, gidx, weights = ptr.astype(np.int32), np.arange(k, dtype=np.int32), costs[live].astype(np.float64)

    def solve(lam: float, w0: np.ndarray) -> tuple[np.ndarray, int]:
        est = GeneralizedLinearEstimator(
            datafit=QuadraticGroup(ptr, gidx),
            penalty=WeightedGroupL2(alpha=lam, weights=weights, grp_ptr=ptr, grp_indices=gidx),
            solver=GroupBCD(tol=tol * lam * float(weights.min()) / 10, max_iter=1000, max_epochs=100_000,
                            fit_intercept=False))
        est.fit(A, b)
        w = np.zeros_like(prob.q)
        w[idx, 0] = est.coef_
        worst = np.max(kkt_violation(prob.K, prob.q, w, prob.slices, costs, lam), initial=0.0)
        if worst > tol:
            raise InputError(f"skglm stopped at KKT violation {worst:.3g} > tol={tol} at λ={lam:.3g}; "
                             "raise tol or use solver='bcd'")
        return w, int(getattr(est, "n_iter_", 0) or 0)
    return solve


# ------------------------------------------------------------------------------------- the path
@dataclass
class SparsePath:
    """A cost-weighted group-lasso path and the two anytime sequences read from it.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.sparse import sparse_path
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = 2 * X[:, 0] + X[:, 2]
    >>> sp = sparse_path(X, y, [[0], [1], [2]], [1.0, 1.0, 1.0], n_lambdas=10)
    >>> sp.lambdas.shape, sp.coef_path.shape, sp.order.tolist()
    ((10,), (10, 3, 1), [0, 2, 1])
    """

    lambdas: np.ndarray  # (L,) decreasing, lambdas[0] == λ_max
    coef_path: np.ndarray  # (L, k, P) working-basis solutions
    order: np.ndarray  # (J,) group indices in activation order (never-activated appended)
    entry_index: np.ndarray  # (J,) path index at which each group first became non-zero, -1 if never
    prefix_path_index: np.ndarray  # (J+1,) path index of prefix j's path solution (-1: w = 0)
    sweeps: np.ndarray  # (L,) BCD sweeps used per λ
    path_sequence: FittedSequence  # prefix j = path solution with the first j groups
    refit_sequence: FittedSequence  # prefix j = ridge refit of the first j groups
    meta: dict = field(default_factory=dict)

    @property
    def n_activated(self) -> int:
        """Number of groups that became non-zero somewhere on the path.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.sparse import sparse_path
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(200, 3)); y = 2 * X[:, 0] + X[:, 2]
        >>> sparse_path(X, y, [[0], [1], [2]], [1.0, 1.0, 1.0], n_lambdas=5, lambda_min_ratio=0.3).n_activated
        2
        """
        return int(np.sum(self.entry_index >= 0))


def _check_Xy(X, y):
    try:
        X = np.asarray(X, dtype=np.float64)
        Y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"X and y must be numeric: {exc}") from exc
    if X.ndim != 2:
        raise InputError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if Y.ndim not in (1, 2) or Y.shape[0] != X.shape[0]:
        raise InputError(f"y must have shape ({X.shape[0]},) or ({X.shape[0]}, P), got {Y.shape}")
    if X.shape[0] < 2:
        raise InputError("need at least 2 rows to fit the Sparse baseline")
    return X, Y


def _activation_order(prob: WorkingProblem, costs, lambdas, coef_path) -> tuple[np.ndarray, np.ndarray]:
    J = prob.n_groups
    entry = np.full(J, -1, dtype=np.int64)
    order: list[int] = []

    def ratio(w):
        grad = prob.K @ w - prob.q
        return np.array([np.linalg.norm(grad[s]) / costs[g] for g, s in enumerate(prob.slices)])

    prev = np.zeros_like(prob.q)
    for i, w in enumerate(coef_path):
        new = [g for g, s in enumerate(prob.slices) if entry[g] < 0 and np.any(w[s] != 0)]
        if new:
            r = ratio(prev)
            new.sort(key=lambda g: (-r[g], g))
            for g in new:
                entry[g] = i
            order.extend(new)
        prev = w
    r = ratio(prev)
    rest = [g for g in range(J) if entry[g] < 0 and prob.usable(g)]
    order.extend(sorted(rest, key=lambda g: (-r[g], g)))
    order.extend(g for g in range(J) if not prob.usable(g))
    return np.array(order, dtype=np.int64), entry


def _explained(prob: WorkingProblem, w: np.ndarray) -> np.ndarray:
    """Training explained-variance fraction of each (scaled) output for working weights w."""
    return 2.0 * np.sum(prob.q * w, axis=0) - np.sum(w * (prob.K @ w), axis=0)


def _ridge(prob: WorkingProblem, groups, l2: float) -> np.ndarray:
    w = np.zeros_like(prob.q)
    idx = np.concatenate([np.arange(prob.slices[g].start, prob.slices[g].stop) for g in groups]) \
        if len(groups) else np.zeros(0, dtype=np.int64)
    if idx.size:
        C = prob.K[np.ix_(idx, idx)] + l2 * np.eye(idx.size)
        w[idx] = np.linalg.solve(C, prob.q[idx])
    return w


def _sequence(prob, spec, stats, n_features, order, prefix_w, y_was_1d, provenance, extra_metrics):
    """Fold prefix weights into a raw-space FittedSequence exactly as the estimators do."""
    explained = np.array([_explained(prob, w) for w in prefix_w])
    result = SelectionResult(
        order=[int(g) for g in order],
        prefix_weights=[[w[prob.slices[g]] for g in order[:j]] for j, w in enumerate(prefix_w)],
        objective=0.5 * np.array([np.sum(prob.q * w) for w in prefix_w]), explained=explained, scores=[])
    seq = fold_regression(prob, result, spec, stats, n_features, y_was_1d, provenance)
    var = stats.var_y
    weights = var / var.sum()
    for j in range(len(prefix_w)):
        seq.train_metrics.append({"explained_variance": float(explained[j] @ weights), **extra_metrics[j]})
    return seq


def sparse_path(X, y, groups, costs, group_names=None, *, whiten: bool = True, n_lambdas: int = 50,
                lambda_min_ratio: float = 1e-3, l2: float = 1e-5, tol: float = 1e-7,
                max_sweeps: int = 100_000, solver: str = "bcd") -> SparsePath:
    """Fit the cost-weighted group-lasso path on (X, y) and read its anytime sequences.

    λ runs geometrically from λ_max down to `lambda_min_ratio`·λ_max in `n_lambdas` steps. Returns a
    :class:`SparsePath` whose `path_sequence` and `refit_sequence` are FittedSequence objects, so the
    curve, report and export code applies to them unchanged. `solver="skglm"` uses skglm's GroupBCD
    (optional extra, one output only) instead of the built-in solver; both stop at the same KKT `tol`.

    It is the Sparse baseline the greedy methods are compared against: the group order implied by when
    each group enters a cost-weighted group-lasso path.

    Raises
    ------
    InputError
        Bad X/y shapes, constant y, bad path parameters or an unknown solver.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.sparse import sparse_path
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = 2 * X[:, 0] + X[:, 2]
    >>> sp = sparse_path(X, y, [[0], [1], [2]], [1.0, 1.0, 1.0], n_lambdas=10)
    >>> sp.refit_sequence.order.tolist()
    [0, 2, 1]
    >>> bool(np.allclose(sp.refit_sequence.linear(X, 2)[:, 0], y, atol=1e-3))  # refit of the first two groups
    True
    """
    X, Y = _check_Xy(X, y)
    if not (isinstance(n_lambdas, (int, np.integer)) and n_lambdas >= 2):
        raise InputError(f"n_lambdas must be an integer >= 2, got {n_lambdas!r}")
    if not 0.0 < lambda_min_ratio < 1.0:
        raise InputError(f"lambda_min_ratio must be in (0, 1), got {lambda_min_ratio!r}")
    if not (np.isfinite(l2) and l2 >= 0):
        raise InputError(f"l2 must be a finite number >= 0, got {l2!r}")
    if solver not in ("bcd", "skglm"):
        raise InputError(f"solver must be 'bcd' or 'skglm', got {solver!r}")
    spec = check_groups(groups, costs, group_names, X.shape[1])
    stats = sufficient_statistics(X, Y, columns=np.concatenate(spec.columns))
    if not np.any(stats.var_y > 0):
        raise InputError("y is constant; there is nothing for the Sparse baseline to explain")
    prob = build_working_problem(stats, spec.sizes, whiten)
    cost_arr = spec.costs
    q_norms = np.array([np.linalg.norm(prob.q[s]) for s in prob.slices])
    lam_max = float(np.max(q_norms / cost_arr))
    if not lam_max > 0:
        raise InputError("no group is correlated with y (λ_max = 0); the path is empty")
    lambdas = lam_max * np.geomspace(1.0, lambda_min_ratio, n_lambdas)
    if solver == "skglm":
        step = _skglm_solver(prob, cost_arr, tol)
    else:
        L = group_lipschitz(prob.K, prob.slices)

        def step(lam, w0):
            return solve_group_lasso(prob.K, prob.q, prob.slices, cost_arr, lam, w0, tol=tol,
                                     max_sweeps=max_sweeps, lipschitz=L)
    w = np.zeros_like(prob.q)
    path, sweeps = [], []
    # the solver does many small products; BLAS threads only add contention there (30x slower measured
    # on a loaded 2-core machine), so it runs single-threaded
    with threadpool_limits(limits=1, user_api="blas"):
        for lam in lambdas:
            w, n_sw = step(lam, w)
            path.append(w.copy())
            sweeps.append(n_sw)
        coef_path = np.array(path)
        order, entry = _activation_order(prob, cost_arr, lambdas, coef_path)
        refit_w = [_ridge(prob, [g for g in order[:j] if prob.usable(g)], l2) for j in range(len(order) + 1)]
    J = len(order)
    m = int(np.sum(entry >= 0))
    # prefix j's path point: the last one before order[j] enters; after all activations, the last one
    pidx = np.array([-1] + [entry[order[j]] - 1 if j < m else len(lambdas) - 1 for j in range(1, J + 1)])
    path_w = [np.zeros_like(prob.q) if i < 0 else coef_path[i] for i in pidx]
    y_was_1d = Y.ndim == 1
    base = {"whiten": bool(whiten), "n_samples": int(stats.n), "data_fingerprint": stats.fingerprint(),
            "lambda_max": lam_max, "lambda_min_ratio": float(lambda_min_ratio), "n_lambdas": int(n_lambdas),
            "tol": float(tol), "solver": solver}
    lam_of = [{"lambda": float(lambdas[max(i, 0)])} for i in pidx]  # w = 0 is optimal at λ_max
    D = X.shape[1]
    path_seq = _sequence(prob, spec, stats, D, order, path_w, y_was_1d, {"method": "sparse-path", **base}, lam_of)
    refit_seq = _sequence(prob, spec, stats, D, order, refit_w, y_was_1d,
                          {"method": "sparse-refit", "l2": float(l2), **base}, lam_of)
    return SparsePath(lambdas=lambdas, coef_path=coef_path, order=order, entry_index=entry,
                      prefix_path_index=pidx, sweeps=np.array(sweeps), path_sequence=path_seq,
                      refit_sequence=refit_seq, meta={"problem": prob, **base})


__all__ = ["SparsePath", "sparse_path", "solve_group_lasso", "kkt_violation", "group_lipschitz"]
