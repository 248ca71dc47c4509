"""The selection kernel shared by linear and GLM selection: an incremental block Cholesky factor.

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

import numpy as np
from scipy.linalg import solve_triangular

from edgeseq.train.basis import WorkingProblem

SCHUR_RTOL = 1e-10  # Schur-complement eigenvalues below this (relative to C_gg's scale) are a null space
TIE_RTOL = 1e-9  # scores this close to the best count as ties; ties go to the lowest group index


class CholeskyFactor:
    """The growing factorisation of C_S, in the working basis.

    Examples
    --------
    >>> import numpy as np
    >>> K, q = np.eye(2), np.array([[1.0], [0.5]])
    >>> f = CholeskyFactor(K, q, l2=0.0)
    >>> f.append(0, slice(0, 1), f.gradient()[0:1])
    >>> f.weights()[0].ravel().tolist()
    [1.0]
    """

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
        return schur_complement(self.C, self.V, s)

    def append(self, g: int, s: slice, b_g: np.ndarray) -> None:
        M = self.schur(s)
        B, Lg = reduced_cholesky(M, self.C[s, s])
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


def schur_complement(C: np.ndarray, V: np.ndarray, s: slice) -> np.ndarray:
    """M_g = C_gg − V_gᵀ V_g: what a candidate block adds beyond the span of the selected ones."""
    Vg = V[:, s]
    return C[s, s] - Vg.T @ Vg


class SchurBlocks:
    """Explicit (C, V) blocks read by `schur_gains`: e.g. a weighted Hessian instead of C = K + λI."""

    def __init__(self, C: np.ndarray, V: np.ndarray):
        self.C = C
        self.V = V

    def schur(self, s: slice) -> np.ndarray:
        return schur_complement(self.C, self.V, s)


def reduced_cholesky(M: np.ndarray, C_gg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def schur_gains(factor, b: np.ndarray, slices, cands) -> np.ndarray:
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


def single_column_scores(prob: WorkingProblem, grad: np.ndarray, cands) -> np.ndarray:
    """Best single standardised original column of each candidate group, from the raw-column gradient.

    `grad` (d, P) holds x̃_jᵀ r / n for every used raw column j (r the residual); the score of a group
    is max over its columns of Σ_p (grad_jp / std_j)². Never a max over whitened axes, which would
    depend on the basis. Linear and GLM selection compute `grad` their own way and share this.
    """
    std = np.where(prob.x_std > 0, prob.x_std, np.inf)
    per_col = np.sum((grad / std[:, None]) ** 2, axis=1)
    return np.array([per_col[prob.raw_slices[g]].max(initial=0.0) for g in cands])


def step_pool(prob: WorkingProblem, remaining: list[int], costs: np.ndarray, doubling: bool,
              limit: float) -> tuple[list[int], bool, bool]:
    """Candidates of one step: the usable remaining groups (else all remaining ones; they score 0),
    restricted under Doubling to costs <= `limit` (else the cheapest, flagged as a violation).

    Returns (pool, any_usable, violated).
    """
    usable = [g for g in remaining if prob.usable(g)]
    pool = usable or list(remaining)
    if not doubling:
        return pool, bool(usable), False
    eligible = [g for g in pool if costs[g] <= limit * (1 + 1e-12)]
    if eligible:
        return eligible, bool(usable), False
    return [min(pool, key=lambda g: (costs[g], g))], bool(usable), True


def pick_best(scores: np.ndarray, cands: list[int]) -> int:
    best = scores.max()
    tol = TIE_RTOL * max(abs(best), 1e-300)
    return cands[int(np.nonzero(scores >= best - tol)[0][0])]


