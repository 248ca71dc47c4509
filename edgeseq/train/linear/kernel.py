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

from edgeseq.train.linear.basis import WorkingProblem
from edgeseq.train.linear.releasable import ReleasableRows
from edgeseq.train.triangular import solve_triangular

SCHUR_RTOL = 1e-10  # Schur-complement eigenvalues below this (relative to C_gg's scale) are a null space
TIE_RTOL = 1e-9  # scores this close to the best count as ties; ties go to the lowest group index
SCHUR_GATHER_BYTES = 16 << 20  # FR's candidate scoring copies at most this much of V at a time


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
        # C = K + λI is never formed (at thousands of working columns each k × k copy is a gigabyte):
        # its blocks are read from K with λ added on the diagonal. L and V grow inside buffers sized
        # for every working dimension; their pages become resident only once written. V is stored
        # transposed (a row per working column) so that the columns of selected groups, which nothing
        # reads again, can be given back (`release_selected`).
        self.K = K
        self.q = q
        self.l2 = l2
        k = K.shape[0]
        # (both in anonymous maps of small pages: numpy asks for 2 MiB huge pages for large arrays, and
        # filling a lower triangle then makes the whole square resident -- measured: all of it, not half)
        self._L = ReleasableRows((k, k)).array
        self._Vt = ReleasableRows((k, k))
        self.m = 0  # rows of L and V so far
        self.u = np.zeros((0, q.shape[1]))
        self.blocks: list[tuple[int, slice, np.ndarray, slice]] = []  # (group, working slice, B_g, rows)
        self._plain: list[bool] = []  # per block: B_g is the identity (no direction dropped), B_g @ w is w

    @property
    def L(self) -> np.ndarray:
        """Lower Cholesky factor of C_S (m, m), a view.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import CholeskyFactor
        >>> f = CholeskyFactor(4.0 * np.eye(2), np.ones((2, 1)), l2=0.0)
        >>> f.append(0, slice(0, 1), np.ones((1, 1)))
        >>> f.L.tolist()
        [[2.0]]
        """
        return self._L[:self.m, :self.m]

    @property
    def V(self) -> np.ndarray:
        """L⁻¹ C_{S,:} (m, k), a view (Fortran-ordered: the transpose of the stored rows).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import CholeskyFactor
        >>> f = CholeskyFactor(np.array([[4.0, 2.0], [2.0, 4.0]]), np.ones((2, 1)), l2=0.0)
        >>> f.append(0, slice(0, 1), np.ones((1, 1)))
        >>> f.V.tolist()
        [[2.0, 1.0]]
        """
        return self._Vt.array[:, :self.m].T

    def c_block(self, rows: slice, cols=None) -> np.ndarray:
        """C[rows, cols] = K[rows, cols] + λI where they overlap (cols default: all columns).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import CholeskyFactor
        >>> f = CholeskyFactor(np.ones((3, 3)), np.ones((3, 1)), l2=0.5)
        >>> f.c_block(slice(1, 2)).tolist()
        [[1.0, 1.5, 1.0]]
        """
        cols = slice(0, self.K.shape[0]) if cols is None else cols
        out = np.array(self.K[rows, cols])
        idx = np.arange(rows.start, rows.stop)
        inside = (idx >= cols.start) & (idx < cols.stop)
        out[np.nonzero(inside)[0], idx[inside] - cols.start] += self.l2
        return out

    def diag_blocks(self, cols: np.ndarray) -> np.ndarray:
        """C_gg for a stack of candidate blocks, `cols` (m, k) their working columns: (m, k, k).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import CholeskyFactor
        >>> f = CholeskyFactor(np.eye(2), np.ones((2, 1)), l2=0.5)
        >>> f.diag_blocks(np.array([[0], [1]])).ravel().tolist()
        [1.5, 1.5]
        """
        return self.K[cols[:, :, None], cols[:, None, :]] + self.l2 * np.eye(cols.shape[1])

    def vt_rows(self, cols: np.ndarray) -> np.ndarray:
        """Rows of Vᵀ for a stack of candidate blocks, `cols` (c, k) their working columns: (c, k, m), a copy.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import CholeskyFactor
        >>> K = np.array([[4.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 1.0]])
        >>> f = CholeskyFactor(K, np.ones((3, 1)), l2=0.0)
        >>> f.append(0, slice(0, 1), np.ones((1, 1)))
        >>> f.vt_rows(np.array([[1], [2]])).tolist()   # V = L⁻¹ K[0, :] = [2, 1, 0]
        [[[1.0]], [[0.0]]]
        """
        return self._Vt.array[cols, :self.m]

    def gradient(self) -> np.ndarray:
        """b = q − C_{:,S} w(S): the correlation of every working direction with the current residual.

        Examples
        --------
        Before any group is selected it is q itself; after selecting a group its own block is zero
        (that is what the refit means):

        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import CholeskyFactor
        >>> K = np.array([[1.0, 0.5], [0.5, 1.0]]); q = np.array([[1.0], [0.8]])
        >>> f = CholeskyFactor(K, q, l2=0.0)
        >>> f.gradient().ravel().tolist()
        [1.0, 0.8]
        >>> f.append(0, slice(0, 1), f.gradient()[0:1])
        >>> np.round(f.gradient().ravel(), 12).tolist()
        [0.0, 0.3]
        """
        return self.q - self.V.T @ self.u

    def schur(self, s: slice) -> np.ndarray:
        """Schur complement M_g of the working block `s` given the groups selected so far.

        Examples
        --------
        It equals the textbook C_gg − C_gS C_SS⁻¹ C_Sg:

        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import CholeskyFactor
        >>> K = np.array([[2.0, 0.5], [0.5, 1.0]]); q = np.ones((2, 1))
        >>> f = CholeskyFactor(K, q, l2=0.0)
        >>> f.append(0, slice(0, 1), q[0:1])
        >>> float(f.schur(slice(1, 2))[0, 0]), 1.0 - 0.5 * 0.5 / 2.0
        (0.875, 0.875)
        """
        Vg = self.V[:, s]
        return self.c_block(s, s) - Vg.T @ Vg

    def append(self, g: int, s: slice, b_g: np.ndarray) -> None:
        """Select group `g` (working block `s`, current gradient block `b_g`): grow L, V and u by its rows.

        Directions of the block that lie in the span of the selected groups are dropped, so a collinear
        group adds nothing instead of breaking the factor.

        Examples
        --------
        The weights after appending are the ridge solution of the selected blocks, solved directly:

        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import CholeskyFactor
        >>> rng = np.random.default_rng(0)
        >>> A = rng.normal(size=(20, 3)); K = A.T @ A / 20; q = A.T @ rng.normal(size=(20, 1)) / 20
        >>> f = CholeskyFactor(K, q, l2=0.1)
        >>> f.append(2, slice(2, 3), f.gradient()[2:3]); f.append(0, slice(0, 1), f.gradient()[0:1])
        >>> w = np.linalg.solve(K[np.ix_([2, 0], [2, 0])] + 0.1 * np.eye(2), q[[2, 0]])
        >>> bool(np.allclose(np.vstack(f.weights()), w))
        True
        """
        M = self.schur(s)
        B, Lg = reduced_cholesky(M, self.c_block(s, s))
        Vg = self.V[:, s] @ B  # (m, k')
        # (finite by construction: K and q are checked where the statistics are made, Lg is a factor)
        new_rows = solve_triangular(Lg, B.T @ (self.c_block(s) - self.V[:, s].T @ self.V), lower=True) \
            if Lg.size else np.zeros((0, self.V.shape[1]))
        new_u = solve_triangular(Lg, B.T @ b_g, lower=True) if Lg.size else \
            np.zeros((0, self.u.shape[1]))
        m, kk = self.m, Lg.shape[0]
        self._L[m:m + kk, :m] = Vg.T
        self._L[m:m + kk, m:m + kk] = Lg
        self._Vt.array[:, m:m + kk] = new_rows.T
        if self._Vt.released.any():  # that write touched the released columns' pages again
            self._Vt.rerelease()
        self.m = m + kk
        self.u = np.vstack([self.u, new_u])
        self.blocks.append((g, s, B, slice(m, m + kk)))
        self._plain.append(B.shape[0] == B.shape[1] and np.array_equal(B, np.eye(B.shape[0])))

    def release_selected(self, s: slice) -> None:
        """Give back the memory of V's columns `s` (a group just appended): nothing reads them again.

        Only for callers that, like CS-G-FR's GLM score, read V on candidate columns alone; afterwards
        those columns of `V` (and of `gradient`) are undefined (they read as zeros where whole pages
        were given back).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import CholeskyFactor
        >>> f = CholeskyFactor(np.array([[4.0, 2.0], [2.0, 4.0]]), np.ones((2, 1)), l2=0.0)
        >>> f.append(0, slice(0, 1), np.ones((1, 1))); f.release_selected(slice(0, 1))
        >>> f.V[:, 1].tolist()   # column 1 (a candidate) is intact
        [1.0]
        """
        self._Vt.release(s)

    def weights(self, n_blocks: int | None = None) -> list[np.ndarray]:
        """Working-space weights of the first `n_blocks` selected groups (prefix refit, exact).

        Examples
        --------
        The first block alone gives the exact refit of prefix 1, without refactorising:

        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import CholeskyFactor
        >>> K = np.array([[1.0, 0.5], [0.5, 1.0]]); q = np.array([[1.0], [0.8]])
        >>> f = CholeskyFactor(K, q, l2=0.0)
        >>> f.append(0, slice(0, 1), f.gradient()[0:1]); f.append(1, slice(1, 2), f.gradient()[1:2])
        >>> [w.ravel().round(4).tolist() for w in f.weights(1)], [w.ravel().round(4).tolist() for w in f.weights()]
        ([[1.0]], [[0.8], [0.4]])
        """
        blocks = self.blocks if n_blocks is None else self.blocks[:n_blocks]
        m = blocks[-1][3].stop if blocks else 0
        w = solve_triangular(self.L[:m, :m], self.u[:m], lower=True, trans=True) if m else \
            self.u[:0]
        # (the identity's product is w itself, exactly: one product per block and prefix saved; in C
        # order as products return it, since later reductions over the blocks depend on the layout)
        w = np.ascontiguousarray(w)
        return [w[rows] if plain else B @ w[rows] for (_, _, B, rows), plain in zip(blocks, self._plain)]


def schur_complement(C: np.ndarray, V: np.ndarray, s: slice) -> np.ndarray:
    """M_g = C_gg − V_gᵀ V_g: what a candidate block adds beyond the span of the selected ones.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.kernel import schur_complement
    >>> C = np.array([[1.0, 0.6], [0.6, 1.0]])
    >>> V = np.array([[1.0, 0.6]])  # L⁻¹ C_{S,:} with S = {0} and L = 1
    >>> float(schur_complement(C, V, slice(1, 2))[0, 0])
    0.64
    """
    Vg = V[:, s]
    return C[s, s] - Vg.T @ Vg


class SchurBlocks:
    """Explicit (C, V) blocks read by `schur_gains`: e.g. a weighted Hessian instead of C = K + λI.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.kernel import SchurBlocks, schur_gains
    >>> H = np.diag([2.0, 4.0]); b = np.array([[2.0], [2.0]])
    >>> schur_gains(SchurBlocks(H, np.zeros((0, 2))), b, [slice(0, 1), slice(1, 2)], [0, 1]).tolist()
    [1.0, 0.5]
    """

    def __init__(self, C: np.ndarray, V: np.ndarray):
        self.C = C
        self.V = V

    def schur(self, s: slice) -> np.ndarray:
        """Schur complement of block `s`, as `CholeskyFactor.schur`.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import SchurBlocks
        >>> SchurBlocks(np.eye(2), np.array([[0.0, 0.5]])).schur(slice(1, 2)).tolist()
        [[0.75]]
        """
        return schur_complement(self.C, self.V, s)

    def diag_blocks(self, cols: np.ndarray) -> np.ndarray:
        """C_gg for a stack of candidate blocks, `cols` (m, k) their working columns, as `CholeskyFactor`.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import SchurBlocks
        >>> SchurBlocks(np.diag([2.0, 3.0]), np.zeros((0, 2))).diag_blocks(np.array([[1]])).tolist()
        [[[3.0]]]
        """
        return self.C[cols[:, :, None], cols[:, None, :]]

    def vt_rows(self, cols: np.ndarray) -> np.ndarray:
        """Rows of Vᵀ for a stack of candidate blocks, as `CholeskyFactor.vt_rows`.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.kernel import SchurBlocks
        >>> SchurBlocks(np.eye(2), np.array([[0.0, 0.5]])).vt_rows(np.array([[1]])).tolist()
        [[[0.5]]]
        """
        return self.V.T[cols]


def reduced_cholesky(M: np.ndarray, C_gg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Basis B of M's non-null directions and the Cholesky factor of Bᵀ M B.

    Examples
    --------
    A rank-one M keeps one direction:

    >>> import numpy as np
    >>> from edgeseq.train.linear.kernel import reduced_cholesky
    >>> M = np.ones((2, 2))
    >>> B, L = reduced_cholesky(M, M)
    >>> B.shape, bool(np.allclose(L @ L.T, B.T @ M @ B))
    ((2, 1), True)
    """
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
    """FR gain ½ b_gᵀ M_g⁺ b_g of every candidate, batched over groups of equal working size.

    Examples
    --------
    The gain is what the objective ½‖u‖² would grow by if the group were added (checked here by adding it):

    >>> import numpy as np
    >>> from edgeseq.train.linear.kernel import CholeskyFactor, schur_gains
    >>> K = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.1], [0.2, 0.1, 1.0]]); q = np.array([[0.9], [0.7], [0.3]])
    >>> f = CholeskyFactor(K, q, l2=0.0)
    >>> f.append(0, slice(0, 1), f.gradient()[0:1])
    >>> before = 0.5 * float(np.sum(f.u ** 2))
    >>> gain = schur_gains(f, f.gradient(), [slice(0, 1), slice(1, 2), slice(2, 3)], [1])[0]
    >>> f.append(1, slice(1, 2), f.gradient()[1:2])
    >>> bool(np.isclose(before + gain, 0.5 * float(np.sum(f.u ** 2))))
    True
    """
    gains = np.zeros(len(cands))
    by_size: dict[int, list[int]] = {}
    for i, g in enumerate(cands):
        by_size.setdefault(slices[g].stop - slices[g].start, []).append(i)
    for k, idx in by_size.items():
        if k == 0:
            continue
        starts = np.array([slices[cands[i]].start for i in idx])
        cols = starts[:, None] + np.arange(k)  # (m, k)
        Cgg = factor.diag_blocks(cols)  # (m, k, k)
        M = np.empty_like(Cgg)
        # V_gᵀ V_g of a batch of candidates at once: their rows of Vᵀ gathered (c, k, rows), one stacked
        # product (numpy runs BLAS's syrk per candidate, as it did for one candidate's view: the same
        # numbers); batches bounded by SCHUR_GATHER_BYTES, so the gather never copies much of V
        step = max(1, SCHUR_GATHER_BYTES // max(1, 8 * k * factor.V.shape[0]))
        for lo in range(0, len(idx), step):
            Vt = factor.vt_rows(cols[lo:lo + step])
            M[lo:lo + step] = Cgg[lo:lo + step] - Vt @ Vt.transpose(0, 2, 1)
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

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.linear.kernel import single_column_scores
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = 3 * X[:, 2] + 0.1 * X[:, 0]
    >>> prob = build_working_problem(sufficient_statistics(X, y), [2, 1], whiten=True)
    >>> scores = single_column_scores(prob, prob.cov_xy_scaled, [0, 1])
    >>> int(np.argmax(scores))  # group 1 holds the column that explains y
    1
    """
    std = np.where(prob.x_std > 0, prob.x_std, np.inf)
    per_col = np.sum((grad / std[:, None]) ** 2, axis=1)
    return np.array([per_col[prob.raw_slices[g]].max(initial=0.0) for g in cands])


def step_pool(prob: WorkingProblem, remaining: list[int], costs: np.ndarray, doubling: bool,
              limit: float) -> tuple[list[int], bool, bool]:
    """Candidates of one step: the usable remaining groups (else all remaining ones; they score 0),
    restricted under Doubling to costs <= `limit` (else the cheapest, flagged as a violation).

    Returns (pool, any_usable, violated).

    Examples
    --------
    Under Doubling the second step may only pick groups costing at most what was spent so far:

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.linear.kernel import step_pool
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> prob = build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 1, 1], whiten=True)
    >>> costs = np.array([1.0, 2.0, 8.0])
    >>> step_pool(prob, [1, 2], costs, doubling=True, limit=1.0)  # nothing fits: cheapest, a violation
    ([1], True, True)
    >>> step_pool(prob, [1, 2], costs, doubling=False, limit=1.0)
    ([1, 2], True, False)
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
    """The candidate with the highest score; near-ties go to the first candidate, so runs are reproducible.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.kernel import pick_best
    >>> pick_best(np.array([0.5, 0.9, 0.9 * (1 + 1e-12)]), [4, 7, 2])
    7
    """
    best = scores.max()
    tol = TIE_RTOL * max(abs(best), 1e-300)
    return cands[int(np.nonzero(scores >= best - tol)[0][0])]


