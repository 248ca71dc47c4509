"""The working basis of training: group whitening (default) or per-column standardisation.

Training runs on Z_g = (X_g - μ_g) T_g. With whitening, T_g = U Λ^{-1/2} from the group's covariance,
so Z_gᵀZ_g/n = I and CS-G-OMP's score becomes ‖b_g‖²/c_g; null directions (constant, duplicated or
collinear columns) are dropped here. The whitened Gram is derived blockwise from the raw centred
covariance, K_gh = T_gᵀ Σ_gh T_h, so the data is read only once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgeseq.train.linear.group_stats import GroupBlockStats
from edgeseq.train.linear.releasable import ReleasableRows
from edgeseq.train.linear.stats import SufficientStats

EIG_RTOL = 1e-10  # correlation-matrix directions with eigenvalue <= EIG_RTOL * largest are dropped
CONST_RTOL = 1e-12  # a column whose spread is below this fraction of its own mean carries no signal


@dataclass
class WorkingProblem:
    """Everything the selection needs, in the working basis (sizes: d used raw columns, k working dims).

    Built by `build_working_problem`; the selection and the refits read only this, and folding maps
    the learnt working-basis weights back to raw columns with `transforms`.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = X @ [1.0, -2.0, 0.5]
    >>> prob = build_working_problem(sufficient_statistics(X, y), [2, 1], whiten=True)
    >>> prob.n_groups, prob.K.shape, prob.q.shape
    (2, (3, 3), (3, 1))
    """

    K: np.ndarray | None  # (k, k)   Zᵀ Z / n; None when only its diagonal blocks were computed (k_blocks)
    q: np.ndarray  # (k, P)   Zᵀ ỹ / n with ỹ centred and scaled per output
    transforms: list[np.ndarray]  # per group: (d_g, k_g) raw-centred -> working
    slices: list[slice]  # per group: its working dims
    raw_slices: list[slice]  # per group: its raw columns inside the stats' column order
    y_mean: np.ndarray  # (P,)
    y_scale: np.ndarray  # (P,) σ_y per output (1 where y is constant)
    x_mean: np.ndarray  # (d,)
    cov_xx: np.ndarray  # (d, d) raw centred covariance (used by the linear `single` score; (0, 0) if not kept)
    cov_xy_scaled: np.ndarray  # (d, P) raw centred cross-covariance with the scaled target
    x_std: np.ndarray  # (d,)
    k_blocks: list[np.ndarray] | None = None  # per group Z_gᵀ Z_g / n when K is None (within-group statistics)
    k_storage: ReleasableRows | None = None  # K's buffer, whose rows `release_k_rows` can give back

    @property
    def n_working(self) -> int:
        """k, the number of working dimensions (all groups).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(50, 3)); X[:, 2] = X[:, 1]
        >>> build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 2], whiten=True).n_working
        2
        """
        return self.slices[-1].stop if self.slices else 0

    def k_diagonal(self) -> np.ndarray:
        """diag(K), from K or from its diagonal blocks.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(50, 2))
        >>> build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 1], whiten=True).k_diagonal().tolist()
        [1.0, 1.0]
        """
        if self.K is not None:
            return np.diag(self.K)
        return np.concatenate([np.diag(b) for b in self.k_blocks]) if self.k_blocks else np.zeros(0)

    def k_group_block(self, g: int) -> np.ndarray:
        """K's diagonal block of group g, (k_g, k_g).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(50, 3))
        >>> build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 2], whiten=True).k_group_block(1).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
        """
        s = self.slices[g]
        return self.K[s, s] if self.K is not None else self.k_blocks[g]

    def k_cross(self, cols, g: int) -> np.ndarray:
        """K's rows `cols` (working dims of other groups) against group g's dims, (len(cols), k_g).

        Zero when only the diagonal blocks were computed: what a block-diagonal preconditioner uses.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(50, 2)); X[:, 1] += X[:, 0]
        >>> prob = build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 1], whiten=True)
        >>> bool(prob.k_cross([0], 1)[0, 0] > 0.5)
        True
        """
        s = self.slices[g]
        if self.K is None:
            return np.zeros((len(cols), s.stop - s.start))
        return self.K[s][:, list(cols)].T  # from g's own rows (K is exactly symmetric): others' may be released

    def release_k_rows(self, g: int) -> None:
        """Give back the memory of K's rows of group g, which its owner will not read again.

        CS-G-FR's GLM score reads K only on rows of groups not yet selected (and reads g's cross
        blocks from g's own rows while g is appended), so once g is in, its rows are dead weight: a
        gigabyte of K at the thesis's width is returned as the selection proceeds. Only the owner of
        this problem may call it (afterwards those rows are undefined).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(50, 2))
        >>> prob = build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 1], whiten=True)
        >>> prob.release_k_rows(0)   # group 0's rows are dead from now on; group 1's are intact
        >>> float(prob.K[1, 1])
        1.0
        """
        if self.k_storage is not None:
            self.k_storage.release(self.slices[g])

    @property
    def n_groups(self) -> int:
        """Number of groups (usable or not).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(50, 4))
        >>> build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 1, 2], whiten=True).n_groups
        3
        """
        return len(self.slices)

    def usable(self, g: int) -> bool:
        """Whether group `g` kept at least one working dimension (an all-constant group did not).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(50, 2)); X[:, 1] = 7.0  # column 1 is constant
        >>> prob = build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 1], whiten=True)
        >>> prob.usable(0), prob.usable(1)
        (True, False)
        """
        return self.slices[g].stop > self.slices[g].start


def _group_transform(cov: np.ndarray, mean: np.ndarray, whiten: bool) -> np.ndarray:
    """Raw-centred -> working map of one group, (d_g, k_g); unit-free, so columns of very different
    scales (or offsets) in one group are treated alike.

    A column is constant when its variance is rounding noise around its OWN mean. Whitening
    decomposes the correlation matrix D^-½ Σ D^-½ = U Λ Uᵀ, so T = D^-½ U Λ^-½ and the null-direction
    test (λ <= EIG_RTOL · λ_max) does not depend on the columns' units.
    """
    d = cov.shape[0]
    var = np.diag(cov)
    live = np.nonzero(_varies(var, mean))[0]
    if live.size == 0:
        return np.zeros((d, 0))
    inv_sd = 1.0 / np.sqrt(var[live])
    T = np.zeros((d, live.size))
    if not whiten:
        T[live, np.arange(live.size)] = inv_sd
        return T
    corr = cov[np.ix_(live, live)] * inv_sd[:, None] * inv_sd[None, :]
    evals, evecs = np.linalg.eigh(corr)
    keep = evals > EIG_RTOL * evals[-1]
    # deterministic sign: largest-magnitude entry of each eigenvector positive
    vecs = evecs[:, keep]
    signs = np.sign(vecs[np.argmax(np.abs(vecs), axis=0), np.arange(vecs.shape[1])])
    signs[signs == 0] = 1.0
    return T[:, :0] if not keep.any() else _embed(live, d, inv_sd[:, None] * vecs * signs / np.sqrt(evals[keep]))


def _varies(var: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Which columns carry signal: variance above rounding noise around the column's own mean (a
    column of variance <= 0 never does). The one test of every basis, whitened or standardised."""
    return var > (CONST_RTOL * np.abs(mean)) ** 2


def _whitening_maps(covs: np.ndarray, means: np.ndarray) -> list:
    """`_group_transform` with whitening for a stack of same-size groups' covariances (m, s, s) and
    column means (m, s), the
    m decompositions in one call of numpy's `eigh` (the same LAPACK routine per matrix, so the same
    numbers): a list of m maps, None for a group with a constant column or a dropped direction,
    which `_group_transform` handles alone.

    Why: a hundred groups of five cost a hundred Python-level decompositions, and the
    cross-validated choice of ``whiten`` builds this basis once per fold (bench/train_speed.py).
    Every map is the same to the bit as `_group_transform`'s: the same operations in the same order
    on each group's numbers.
    """
    var = np.diagonal(covs, axis1=1, axis2=2)
    live = _varies(var, means).all(axis=1)
    inv_sd = 1.0 / np.sqrt(np.where(live[:, None], var, 1.0))  # (a group with a constant column: not used)
    corr = covs * inv_sd[:, :, None] * inv_sd[:, None, :]
    evals, evecs = np.linalg.eigh(corr)
    regular = live & (evals > EIG_RTOL * evals[:, -1:]).all(axis=1)
    evals = np.where(regular[:, None], evals, 1.0)
    rows = np.argmax(np.abs(evecs), axis=1)  # (m, s): each eigenvector's largest-magnitude entry
    signs = np.sign(np.take_along_axis(evecs, rows[:, None, :], axis=1))[:, 0, :]
    signs[signs == 0] = 1.0
    maps = inv_sd[:, :, None] * evecs * signs[:, None, :] / np.sqrt(evals)[:, None, :]
    return [maps[i] if regular[i] else None for i in range(len(maps))]


def standardising_map(stats) -> tuple[np.ndarray, np.ndarray]:
    """The standardised basis (``whiten=False``) as one map of the raw columns: (columns kept, their
    1 / σ), in column order; working column i is raw column ``columns[i]`` times ``scales[i]``.

    What `group_transforms` gives without whitening (each group's diagonal map, its constant
    columns left out), to the bit, formed for all columns at once: the cross-validated choice of
    ``whiten`` needs only this per fold, not the per-group matrices.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.random.default_rng(0).normal(size=(50, 3)) * [1.0, 2.0, 4.0]; X[:, 1] = 3.0
    >>> cols, scales = standardising_map(sufficient_statistics(X, X[:, 0]))
    >>> cols.tolist(), bool(np.allclose(scales, 1 / X[:, [0, 2]].std(axis=0)))
    ([0, 2], True)
    """
    var = np.diag(stats.xx) / stats.n
    cols = np.nonzero(_varies(var, stats.x_mean))[0]
    return cols.astype(np.int64), 1.0 / np.sqrt(var[cols])


def _embed(rows: np.ndarray, d: int, block: np.ndarray) -> np.ndarray:
    out = np.zeros((d, block.shape[1]))
    out[rows] = block
    return out


def target_scale(stats) -> np.ndarray:
    """σ_y per output (1 where y is constant): the unit the working problem's target is scaled to.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> target_scale(sufficient_statistics(np.zeros((4, 2)), np.array([[1.0, 5.0], [3.0, 5.0]] * 2))).tolist()
    [1.0, 1.0]
    """
    scale = np.sqrt(stats.var_y)
    scale[~(scale > 0)] = 1.0
    return scale


def group_transforms(stats: SufficientStats | GroupBlockStats, group_sizes, whiten: bool) -> tuple[list, list, list]:
    """The working basis alone: per group its raw-centred -> working map, its raw columns and its
    working dims, (transforms, raw_slices, slices) as `WorkingProblem` holds them.

    What `build_working_problem` starts from, and all a caller needs that only maps sums into the
    basis (the cross-validation of ``l2="auto"`` builds one basis per fold and forms K itself).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.random.default_rng(0).normal(size=(50, 3)) * [1.0, 2.0, 4.0]
    >>> T, raw, work = group_transforms(sufficient_statistics(X, X[:, 0]), [1, 2], whiten=False)
    >>> [t.shape for t in T], raw, work
    ([(1, 1), (2, 2)], [slice(0, 1, None), slice(1, 3, None)], [slice(0, 1, None), slice(1, 3, None)])
    """
    blockwise = isinstance(stats, GroupBlockStats)
    sizes = [int(size) for size in group_sizes]
    bounds = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
    raw_slices = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    def cov(g: int) -> np.ndarray:
        return (stats.blocks[g] if blockwise else stats.xx[raw_slices[g], raw_slices[g]]) / stats.n

    transforms = [None] * len(sizes)
    if whiten:  # groups of one size whitened together (`_whitening_maps`), the others one by one below
        for size in set(sizes) - {0}:
            same = [g for g, s in enumerate(sizes) if s == size]
            if len(same) > 1:
                maps = _whitening_maps(np.stack([cov(g) for g in same]),
                                       np.stack([stats.x_mean[raw_slices[g]] for g in same]))
                for g, T in zip(same, maps):
                    transforms[g] = T
    slices, k = [], 0
    for g, rs in enumerate(raw_slices):
        if transforms[g] is None:
            transforms[g] = _group_transform(cov(g), stats.x_mean[rs], whiten)
        slices.append(slice(k, k + transforms[g].shape[1]))
        k += transforms[g].shape[1]
    return transforms, raw_slices, slices


def build_working_problem(stats: SufficientStats | GroupBlockStats, group_sizes, whiten: bool, keep_cov: bool = True,
                          consume: bool = False) -> WorkingProblem:
    """Whiten (or standardise) each group and express K, q in that basis.

    `stats` must hold the used columns group after group, in group-index order, with `group_sizes`.

    Parameters
    ----------
    stats : SufficientStats or GroupBlockStats
        Centred sums of the used columns and the target. From `GroupBlockStats` (within-group blocks
        only) K is not formed: ``K`` is None and ``k_blocks`` holds its diagonal blocks, which is all
        that selections scoring each group on its own need.
    group_sizes : sequence of int
        Number of raw columns of each group, in order.
    whiten : bool
        Whiten each group (True) or only standardise its columns (False).
    keep_cov : bool
        Keep the raw covariance in ``cov_xx`` (a d × d copy, read only by the linear ``single``
        score). GLM selection passes False: at thousands of columns that copy is a gigabyte, and the
        blocks K is built from are read from ``stats.xx`` directly either way.
    consume : bool
        The caller will not read `stats` again: rows of ``stats.xx`` are given back to the system
        as soon as K no longer needs them (when the pass built them in releasable memory), so K and
        the sums never both occupy a full d × d at once. Not with `keep_cov`.

    Returns
    -------
    WorkingProblem

    Examples
    --------
    Whitening makes each group's diagonal block of K the identity, and drops the collinear direction
    of a duplicated column:

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 3)); X[:, 1] = 2 * X[:, 0]  # column 1 duplicates column 0
    >>> prob = build_working_problem(sufficient_statistics(X, X.sum(axis=1)), [2, 1], whiten=True)
    >>> prob.slices
    [slice(0, 1, None), slice(1, 2, None)]
    >>> np.allclose(prob.K[0:1, 0:1], np.eye(1))
    True
    """
    n = stats.n  # cov blocks are xx[a, b] / n, so no d × d covariance is formed here
    blockwise = isinstance(stats, GroupBlockStats)  # only the within-group blocks were computed
    diag_cov = stats.xx_diagonal() / n
    y_scale = target_scale(stats)
    cov_xy = stats.cov_xy / y_scale
    transforms, raw_slices, slices = group_transforms(stats, group_sizes, whiten)
    k = slices[-1].stop if slices else 0
    storage = None if blockwise else ReleasableRows((k, k))
    K, k_blocks = (None, [T.T @ (B / n) @ T for T, B in zip(transforms, stats.blocks)]) if blockwise else \
        (_whitened_gram(storage.array, stats.xx, n, transforms, raw_slices, slices,
                        stats.xx_storage if consume and not keep_cov else None), None)
    q = np.vstack([T.T @ cov_xy[rs] for T, rs in zip(transforms, raw_slices)]) if k else \
        np.zeros((0, cov_xy.shape[1]))
    if whiten:  # exact identity on diagonal blocks: removes rounding so OMP's K_gg^{-1} is truly I
        for g, s in enumerate(slices):
            if blockwise:
                k_blocks[g] = np.eye(s.stop - s.start)
            else:
                K[s, s] = np.eye(s.stop - s.start)
    return WorkingProblem(K=K, q=q, transforms=transforms, slices=slices, raw_slices=raw_slices,
                          y_mean=stats.y_mean, y_scale=y_scale, x_mean=stats.x_mean,
                          cov_xx=stats.cov_xx if keep_cov and not blockwise else np.zeros((0, 0)),
                          cov_xy_scaled=cov_xy, x_std=np.sqrt(np.maximum(diag_cov, 0.0)), k_blocks=k_blocks,
                          k_storage=storage)


# K is assembled in slabs of block rows whose left products take at most this, or a sixteenth of K: a
# small temporary beside K, and few slabs (each costs one product per group)
GRAM_SLAB_BYTES = 4 << 20


def times_basis(transforms, raw_slices, slices, A: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """A @ T for the block-diagonal (d, k) basis map T, one product per group: (m, d) -> (m, k), into `out`.

    Why not one product with T formed densely: T is all zeros outside its diagonal blocks, and the
    dense form costs d x d x k multiply-adds where the blocks cost d x Σ d_g k_g.

    Examples
    --------
    >>> import numpy as np
    >>> T = [np.array([[2.0]]), np.array([[1.0, 0.0], [1.0, 1.0]])]
    >>> times_basis(T, [slice(0, 1), slice(1, 3)], [slice(0, 1), slice(1, 3)], np.ones((1, 3))).tolist()
    [[2.0, 2.0, 1.0]]
    """
    out = np.zeros((A.shape[0], slices[-1].stop if slices else 0)) if out is None else out
    stack = _square_stack(transforms, raw_slices, slices, A.shape[1])
    if stack is not None:  # every group square, of one size, side by side: one batched product
        m, (G, s, _) = A.shape[0], stack.shape
        out[...] = np.einsum("mgs,gsk->mgk", A.reshape(m, G, s), stack, optimize=True).reshape(m, G * s)
        return out
    for Tg, rs, sl in zip(transforms, raw_slices, slices):
        out[:, sl] = A[:, rs] @ Tg
    return out


def _square_stack(transforms, raw_slices, slices, width: int) -> np.ndarray | None:
    """The maps as one (G, s, s) array when every group has s raw columns and keeps all s, the groups
    side by side from column 0 to `width` in both bases (whitened groups of one size, nothing
    dropped: the common case); else None.

    Why: `times_basis` is then one batched product instead of G small ones, whose Python cost is most
    of the time at a hundred groups of five (a third of it, measured at D = 500).
    """
    if len(transforms) < 2:
        return None
    s = transforms[0].shape[0]
    for g, (Tg, rs, sl) in enumerate(zip(transforms, raw_slices, slices)):
        if Tg.shape != (s, s) or rs.start != g * s or rs.stop != (g + 1) * s or sl != rs:
            return None
    return np.stack(transforms) if len(transforms) * s == width else None


def _whitened_gram(K: np.ndarray, xx: np.ndarray, n: int, transforms, raw_slices, slices,
                   release: ReleasableRows | None = None) -> np.ndarray:
    """K = Zᵀ Z / n assembled into `K`, K_ab = (T_aᵀ (xx_ab / n)) T_b (no d × d covariance formed).

    Why slabs of block rows rather than one product per pair of groups: with a hundred groups the
    5,050 small products of the pairs cost more in Python than in arithmetic (0.2 s at D = 500,
    more than the greedy selection after it). A slab of groups A is two passes of one product per
    group: L = T_Aᵀ (xx_A,: / n), then L T column block by column block; each entry is the same
    sum as in the pairwise product (to the bit when the group transforms only scale, per-column
    standardisation; within rounding otherwise, as BLAS may order a sum differently in a taller
    product). Blocks below the diagonal are then copied from those above: K is exactly symmetric
    off the diagonal blocks.

    A slab reads xx only on the rows of its own groups, so once it is done nothing reads those rows
    again and `release` (the sums' buffer, when the caller consumes them) gives them back: K grows as
    xx shrinks.
    """
    d = xx.shape[0]
    cap = max(GRAM_SLAB_BYTES, K.shape[0] ** 2 * 8 // 16)
    a = 0
    while a < len(transforms):
        b, width = a, 0  # the slab: groups a..b-1, at least one, left products within `cap`
        while b < len(transforms) and (b == a or (width + transforms[b].shape[1]) * d * 8 <= cap):
            width += transforms[b].shape[1]
            b += 1
        rows = slice(slices[a].start, slices[b - 1].stop)
        L = np.empty((width, d))
        for g in range(a, b):
            L[slices[g].start - rows.start:slices[g].stop - rows.start] = transforms[g].T @ (xx[raw_slices[g]] / n)
        times_basis(transforms, raw_slices, slices, L, out=K[rows])
        if release is not None:
            release.release(slice(raw_slices[a].start, raw_slices[b - 1].stop))
        a = b
    for s in slices:  # the lower blocks from the upper ones: exactly symmetric
        K[s.stop:, s] = K[s, s.stop:].T
        K[s, s] = K[s, s].T.copy()  # a diagonal block as it always was stored: transposed
    return K
