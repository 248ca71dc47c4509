"""Greedy cost-sensitive group selection in D-space with an incremental block Cholesky factor.

With C = K + λI and the selected set S, we keep L (Cholesky factor of C_S), V = L⁻¹ C_{S,:} and
u = L⁻¹ q_S. Then, for every candidate g at once:

* ridge weights        w(S) = L⁻ᵀ u,                       objective F(S) = ½‖u‖²
* gradient             b = q − C_{:,S} w(S) = q − Vᵀu
* Schur complement     M_g = C_gg − V_{:,g}ᵀ V_{:,g}          (FR gain ½ b_gᵀ M_g⁻¹ b_g, no refit)

and appending g adds rows [V_{:,g}ᵀ, L_g] to L (L_g = chol M_g) and L_g⁻¹(C_{g,:} − V_{:,g}ᵀV) to V.
Directions of a new group that are (numerically) inside the span of S are dropped at that point
(its basis B_g), so the factor stays well defined even with λ = 0 and collinear groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import solve_triangular

from edgeseq.format import METHODS
from edgeseq.train.basis import WorkingProblem

SCHUR_RTOL = 1e-10  # Schur-complement eigenvalues below this (relative to C_gg's scale) are a null space
TIE_RTOL = 1e-9  # scores this close to the best count as ties; ties go to the lowest group index


@dataclass
class SelectionResult:
    order: list[int]
    prefix_weights: list[list[np.ndarray]]  # prefix j: working-space weights (k_g, P) of order[:j]
    objective: np.ndarray  # F(S_j) = ½‖u_j‖², j = 0..J
    explained: np.ndarray  # per output p: explained fraction of scaled variance, (J+1, P)
    scores: list[float]  # winning score of each step
    doubling_violations: list[int] = field(default_factory=list)  # 1-based steps
    unusable: list[int] = field(default_factory=list)  # groups with no usable direction


class _Factor:
    """The growing factorisation of C_S, in the working basis."""

    def __init__(self, K: np.ndarray, q: np.ndarray, l2: float):
        self.C = K + l2 * np.eye(K.shape[0])
        self.q = q
        self.l2 = l2
        k = K.shape[0]
        self.L = np.zeros((0, 0))
        self.V = np.zeros((0, k))
        self.u = np.zeros((0, q.shape[1]))
        self.blocks: list[tuple[int, slice, np.ndarray, slice]] = []  # (group, working slice, B_g, rows)

    def gradient(self) -> np.ndarray:
        return self.q - self.V.T @ self.u

    def schur(self, s: slice) -> np.ndarray:
        Vg = self.V[:, s]
        return self.C[s, s] - Vg.T @ Vg

    def append(self, g: int, s: slice, b_g: np.ndarray) -> None:
        M = self.schur(s)
        B, Lg = _reduced_cholesky(M, self.C[s, s])
        Vg = self.V[:, s] @ B  # (m, k')
        new_rows = solve_triangular(Lg, B.T @ (self.C[s, :] - self.V[:, s].T @ self.V), lower=True) \
            if Lg.size else np.zeros((0, self.V.shape[1]))
        new_u = solve_triangular(Lg, B.T @ b_g, lower=True) if Lg.size else np.zeros((0, self.u.shape[1]))
        m, kk = self.L.shape[0], Lg.shape[0]
        L = np.zeros((m + kk, m + kk))
        L[:m, :m] = self.L
        L[m:, :m] = Vg.T
        L[m:, m:] = Lg
        self.L = L
        self.V = np.vstack([self.V, new_rows])
        self.u = np.vstack([self.u, new_u])
        self.blocks.append((g, s, B, slice(m, m + kk)))

    def weights(self, n_blocks: int | None = None) -> list[np.ndarray]:
        """Working-space weights of the first `n_blocks` selected groups (prefix refit, exact)."""
        blocks = self.blocks if n_blocks is None else self.blocks[:n_blocks]
        m = blocks[-1][3].stop if blocks else 0
        w = solve_triangular(self.L[:m, :m], self.u[:m], lower=True, trans="T") if m else self.u[:0]
        return [B @ w[rows] for (_, _, B, rows) in blocks]


def _reduced_cholesky(M: np.ndarray, C_gg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Basis B of M's non-null directions and the Cholesky factor of Bᵀ M B."""
    k = M.shape[0]
    if k == 0:
        return np.zeros((0, 0)), np.zeros((0, 0))
    tol = SCHUR_RTOL * max(1.0, float(np.trace(C_gg)) / k)
    try:
        if np.linalg.eigvalsh(M)[0] > tol:
            return np.eye(k), np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        pass
    evals, evecs = np.linalg.eigh(M)
    keep = evals > tol
    return evecs[:, keep], np.diag(np.sqrt(evals[keep]))


def _schur_gains(factor: _Factor, b: np.ndarray, slices, cands) -> np.ndarray:
    """FR gain ½ b_gᵀ M_g⁺ b_g of every candidate, batched over groups of equal working size."""
    gains = np.zeros(len(cands))
    by_size: dict[int, list[int]] = {}
    for i, g in enumerate(cands):
        by_size.setdefault(slices[g].stop - slices[g].start, []).append(i)
    for k, idx in by_size.items():
        if k == 0:
            continue
        cols = np.array([np.arange(slices[cands[i]].start, slices[cands[i]].stop) for i in idx])  # (m, k)
        Vg = factor.V[:, cols]  # (rows, m, k)
        Cgg = factor.C[cols[:, :, None], cols[:, None, :]]  # (m, k, k)
        M = Cgg - np.einsum("rmi,rmj->mij", Vg, Vg)
        bb = b[cols]  # (m, k, P)
        tol = SCHUR_RTOL * np.maximum(1.0, np.trace(Cgg, axis1=1, axis2=2) / k)[:, None]
        evals, evecs = np.linalg.eigh(M)
        proj = np.einsum("mki,mkp->mip", evecs, bb)  # coordinates of b in M's eigenbasis
        inv = np.where(evals > tol, 1.0 / np.where(evals > tol, evals, 1.0), 0.0)
        gains[idx] = 0.5 * np.einsum("mi,mip->m", inv, proj ** 2)
    return gains


def _single_scores(prob: WorkingProblem, factor: _Factor, cands) -> np.ndarray:
    """Best single standardised original column of each group: (column · residual / n)²."""
    d = prob.cov_xx.shape[0]
    beta = np.zeros((d, prob.q.shape[1]))
    for (g, _, _, _), w in zip(factor.blocks, factor.weights()):
        beta[prob.raw_slices[g]] = prob.transforms[g] @ w
    grad = prob.cov_xy_scaled - prob.cov_xx @ beta
    std = np.where(prob.x_std > 0, prob.x_std, np.inf)
    per_col = np.sum((grad / std[:, None]) ** 2, axis=1)
    return np.array([per_col[prob.raw_slices[g]].max(initial=0.0) for g in cands])


def _pick(scores: np.ndarray, cands: list[int]) -> int:
    best = scores.max()
    tol = TIE_RTOL * max(abs(best), 1e-300)
    return cands[int(np.nonzero(scores >= best - tol)[0][0])]


def select_sequence(prob: WorkingProblem, costs: np.ndarray, *, method: str = "omp", l2: float = 1e-5,
                    doubling: bool = False, c_min: float | None = None, progress=None) -> SelectionResult:
    """Order all groups greedily; return the order and the exact ridge refit of every prefix.

    `progress(step, n_steps, group)` is called after each pick (for long runs' progress display).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")
    J = prob.n_groups
    costs = np.asarray(costs, dtype=np.float64)
    factor = _Factor(prob.K, prob.q, l2)
    remaining = list(range(J))
    unusable = [g for g in range(J) if not prob.usable(g)]
    order, scores, violations = [], [], []
    spent = 0.0
    c_first = float(costs.min()) if c_min is None else float(c_min)
    for step in range(1, J + 1):
        usable_left = [g for g in remaining if prob.usable(g)]
        pool = usable_left if usable_left else list(remaining)
        if doubling:
            limit = c_first if step == 1 else spent
            eligible = [g for g in pool if costs[g] <= limit * (1 + 1e-12)]
            if not eligible:
                cheapest = min(pool, key=lambda g: (costs[g], g))
                eligible = [cheapest]
                violations.append(step)
            pool = eligible
        b = factor.gradient()
        if not usable_left:
            sc = np.zeros(len(pool))
        elif method == "fr":
            sc = _schur_gains(factor, b, prob.slices, pool) / costs[pool]
        elif method == "single":
            sc = _single_scores(prob, factor, pool) / costs[pool]
        else:
            norms = np.array([np.sum(b[prob.slices[g]] ** 2) for g in pool])
            sc = norms if method == "gomp" else norms / costs[pool]
        g = _pick(sc, pool)
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
        wsq = sum((np.sum(w ** 2, axis=0) for w in ws), np.zeros(P))
        explained[j] = np.sum(u ** 2, axis=0) + l2 * wsq
    return SelectionResult(order=order, prefix_weights=weights, objective=objective, explained=explained,
                           scores=scores, doubling_violations=violations, unusable=unusable)
