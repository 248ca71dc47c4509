"""Greedy cost-sensitive group selection for squared loss, entirely in D-space.

Works on the statistics only (K, q of the working problem) with the shared kernel
(`edgeseq.train.linear.kernel`): OMP scores ‖b_g‖²/c_g, FR scores the Schur-complement gain without refits,
`single` the best original column, `gomp` ignores costs; Doubling restricts each step's pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgeseq.format import METHODS
from edgeseq.train.linear.basis import WorkingProblem
from edgeseq.train.linear.kernel import CholeskyFactor, pick_best, schur_gains, single_column_scores, step_pool


@dataclass
class SelectionResult:
    """Order, exact per-prefix working weights and objective of a squared-loss selection.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.linear.selection import select_sequence
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = 2 * X[:, 1] + X[:, 2]
    >>> res = select_sequence(build_working_problem(sufficient_statistics(X, y), [1, 1, 1], True), np.ones(3))
    >>> res.explained[:, 0].round(1).tolist()  # fraction of variance explained by each prefix
    [0.0, 0.8, 1.0, 1.0]
    """
    order: list[int]
    prefix_weights: list[list[np.ndarray]]  # prefix j: working-space weights (k_g, P) of order[:j]
    objective: np.ndarray  # F(S_j) = ½‖u_j‖², j = 0..J
    explained: np.ndarray  # per output p: explained fraction of scaled variance, (J+1, P)
    scores: list[float]  # winning score of each step
    doubling_violations: list[int] = field(default_factory=list)  # 1-based steps
    unusable: list[int] = field(default_factory=list)  # groups with no usable direction


def _single_scores(prob: WorkingProblem, factor: CholeskyFactor, cands) -> np.ndarray:
    """Squared loss: the raw-column gradient follows from the statistics and the current weights."""
    d = prob.cov_xx.shape[0]
    beta = np.zeros((d, prob.q.shape[1]))
    for (g, _, _, _), w in zip(factor.blocks, factor.weights()):
        beta[prob.raw_slices[g]] = prob.transforms[g] @ w
    return single_column_scores(prob, prob.cov_xy_scaled - prob.cov_xx @ beta, cands)


def select_sequence(prob: WorkingProblem, costs: np.ndarray, *, method: str = "omp", l2: float = 1e-5,
                    doubling: bool = False, c_min: float | None = None, progress=None) -> SelectionResult:
    """Order all groups greedily; return the order and the exact ridge refit of every prefix.

    `progress(step, n_steps, group)` is called after each pick (for long runs' progress display).

    Parameters
    ----------
    prob : WorkingProblem
    costs : array (J,)
    method : {"omp", "fr", "single", "gomp"}
    l2 : float
        Ridge penalty of the refits.
    doubling : bool
        Restrict each step to groups costing at most what was spent so far.

    Returns
    -------
    SelectionResult

    Raises
    ------
    ValueError
        Unknown method.

    Examples
    --------
    OMP divides by cost, so a cheap weak group can come before an expensive strong one; the prefix
    weights are the ridge refits, checked here against a direct least-squares solve:

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.linear.selection import select_sequence
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = 3 * X[:, 0] + X[:, 1]
    >>> prob = build_working_problem(sufficient_statistics(X, y), [1, 1], whiten=True)
    >>> select_sequence(prob, np.array([20.0, 1.0])).order, select_sequence(prob, np.ones(2)).order
    ([1, 0], [0, 1])
    >>> res = select_sequence(prob, np.ones(2), l2=0.0)
    >>> bool(np.allclose(np.vstack(res.prefix_weights[2]), np.linalg.solve(prob.K, prob.q)))
    True
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")
    J = prob.n_groups
    costs = np.asarray(costs, dtype=np.float64)
    factor = CholeskyFactor(prob.K, prob.q, l2)
    remaining = list(range(J))
    unusable = [g for g in range(J) if not prob.usable(g)]
    order, scores, violations = [], [], []
    spent = 0.0
    c_first = float(costs.min()) if c_min is None else float(c_min)
    for step in range(1, J + 1):
        pool, any_usable, violated = step_pool(prob, remaining, costs, doubling, c_first if step == 1 else spent)
        if violated:
            violations.append(step)
        b = factor.gradient()
        if not any_usable:
            sc = np.zeros(len(pool))
        elif method == "fr":
            sc = schur_gains(factor, b, prob.slices, pool) / costs[pool]
        elif method == "single":
            sc = _single_scores(prob, factor, pool) / costs[pool]
        else:
            norms = np.array([np.sum(b[prob.slices[g]] ** 2) for g in pool])
            sc = norms if method == "gomp" else norms / costs[pool]
        g = pick_best(sc, pool)
        scores.append(float(sc[pool.index(g)]))
        factor.append(g, prob.slices[g], b[prob.slices[g]])
        order.append(g)
        remaining.remove(g)
        spent += costs[g]
        if progress is not None:
            progress(step, J, g)
    return _finish(prob, factor, order, scores, violations, unusable, l2)


def _finish(prob, factor, order, scores, violations, unusable, l2) -> SelectionResult:
    P = prob.q.shape[1]
    J = len(order)
    weights, objective, explained = [], np.zeros(J + 1), np.zeros((J + 1, P))
    for j in range(J + 1):
        ws = factor.weights(j)
        weights.append(ws)
        rows = factor.blocks[j - 1][3].stop if j else 0
        u = factor.u[:rows]
        objective[j] = 0.5 * float(np.sum(u ** 2))
        wsq = np.sum(np.vstack(ws) ** 2, axis=0) if ws else np.zeros(P)  # one reduction, not one per group
        explained[j] = np.sum(u ** 2, axis=0) + l2 * wsq
    return SelectionResult(order=order, prefix_weights=weights, objective=objective, explained=explained,
                           scores=scores, doubling_violations=violations, unusable=unusable)
