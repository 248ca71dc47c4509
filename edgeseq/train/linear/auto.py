"""Choosing the ridge penalty and the working basis on the data (``l2="auto"``, ``whiten="auto"``).

An anytime model has one penalty for all its prefixes. It is chosen on the validation loss of the
*full-budget* prefix (all groups): that model is the same whatever order the selection later picks,
so its cross-validated loss needs no selection run per candidate penalty, and it is the prefix with
the most columns, the one a too-small penalty hurts most (shorter prefixes have fewer columns and so
fewer noise directions to fit). Summing over prefixes would need one selection per fold and penalty.

Rows go to K folds by their index, row i to fold i mod K, so the folds do not depend on how the data
is chunked or partitioned (the same folds in memory, in shards and on a cluster) and sorted data
still gives each fold every part of it. Each fold builds its own working basis (whitening or
standardisation) from the rows it fits, never from the rows it is scored on, and fits a ridge (or
GLM) in that basis with its own intercept: what cross-validating a pipeline of scaler and model
does. A basis built from all rows lets the scored rows shape it; for exact whitening of a group
nearly as wide as the rows this matters: the noise directions it amplifies are then partly the
scored rows' own, and whitening looks better on the folds than it does on new rows (seen on the
MNIST bank, where a basis from all rows chose whitening and a held-out split chose
standardisation, which tested better).

The penalty is constant in *sum* form across fits, as scikit-learn's ``alpha`` and ``C``: a fold fit
on n_tr of the n rows uses λ·n/n_tr in the mean-form objective, so the λ chosen on folds is the one
whose full fit the folds estimated (the best mean-form penalty shrinks like 1/n).

Squared loss: each fold's training statistics are all rows' with the fold's taken out (Chan's
merge solved for the rest), and its basis is built from them; one eigendecomposition of the fold's working Gram serves every penalty of
the grid, and the held-out loss comes from the held-out fold's own statistics, so no row is read
again. GLM: the fold's basis comes from all rows' statistics with the scored rows' taken out
(`without_rows`); a short path of penalties from strong to weak, each fit warm-started from the
previous one, scored by held-out log-loss.

Whitening (``whiten="auto"``): exact group whitening gives every direction of a group unit
variance, including directions that hold only noise; when a group is nearly as wide as the row
count those are amplified and a uniform ridge in the whitened space does not hold them back. The
same cross-validation therefore also scores per-column standardisation, and the pair (basis,
penalty) with the lowest held-out loss is used; for the GLM, within that basis, the strongest penalty
whose held-out loss is within `GLM_CHOICE_RTOL` of the lowest (see `_best`: a weak penalty's fold
fits stop where the warm start left them, so an equal score is no evidence for it).
"""

from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import lapack  # imported before any `threadpool_limits`: a library loaded inside one escapes it
from threadpoolctl import threadpool_info, threadpool_limits

from edgeseq.errors import InputError
from edgeseq.train.linear.basis import (build_working_problem, group_transforms, standardising_map, target_scale,
                                        times_basis)
from edgeseq.train.linear.group_stats import GroupBlockStats, group_block_statistics, without_rows
from edgeseq.train.linear.stats import SufficientStats, sufficient_statistics

N_FOLDS = 5
# mean-form penalties in the working space (unit-variance columns and target): from "almost none"
# to "stronger than the signal"; ascending, so exact ties go to the smaller penalty (as scikit-learn's grids;
# the GLM's choice prefers the stronger one within GLM_CHOICE_RTOL, see `_best`)
L2_GRID = tuple(float(v) for v in 10.0 ** np.arange(-6.0, 2.01, 0.5))
GLM_L2_GRID = tuple(float(v) for v in 10.0 ** np.arange(-6.0, 1.01, 1.0))
FALLBACK_L2 = 1e-4  # too few rows for folds (fewer than 2 per fold): no choice is possible
MIN_FOLD_ROWS = 2
PATH_PATIENCE = 2  # GLM path: stop after the held-out loss rose this many penalties in a row past its best
# GLM choice: a penalty weaker than another is taken only when its held-out log-loss is lower by more
# than this fraction (see `_best`); the squared loss's choice is exact and takes the plain minimum
GLM_CHOICE_RTOL = 0.001
CV_MAX_CELLS = 25_000_000  # GLM folds read at most this many working-design entries (200 MB of float64)
# columns above which "auto" is not cross-validated: every fold holds a width x width matrix (the ridge
# folds' statistics, the GLM folds' preconditioner and its factor), K of them at once; 4,096 columns
# keep the K = 5 folds under 0.7 GB, while 11,016 columns would need 4.9 GB and 80 factorisations of
# 11,016 x 11,016 for the GLM's path
CV_MAX_WIDTH = 4096
# a fold's statistics pass is cut into this many runs of its rows when each holds at least
# FOLD_PART_MIN_ROWS (`fold_parts`): the runs are the tasks the passes' threads share
FOLD_PARTS = 2
FOLD_PART_MIN_ROWS = 4096


@dataclass
class Choice:
    """The chosen penalty and basis, with the cross-validated loss of every candidate.

    Examples
    --------
    >>> Choice(l2=0.1, whiten=False, n_folds=5).l2
    0.1
    """

    l2: float
    whiten: bool
    n_folds: int
    scores: dict = field(default_factory=dict)  # {whiten: array of mean held-out loss per grid value}
    grid: tuple = ()
    held_out: int = 0  # rows given apart from the fitted ones that scored the choice (no folds then)

    def provenance(self) -> dict:
        """What the manifest records about the choice (JSON-ready).

        Examples
        --------
        >>> Choice(l2=0.1, whiten=True, n_folds=5, grid=(0.1, 1.0)).provenance()["l2_choice"]
        'cross-validation: 5 folds (row i in fold i mod 5), full-budget validation loss, 2 penalties'
        >>> Choice(l2=0.1, whiten=True, n_folds=0, grid=(0.1, 1.0), held_out=40).provenance()["l2_choice"]
        'held-out rows: 40 rows not fitted, full-budget validation loss, 2 penalties'
        """
        if self.held_out:
            return {"l2_choice": f"held-out rows: {self.held_out} rows not fitted, full-budget validation loss, "
                                 f"{len(self.grid)} penalties"}
        if not self.n_folds:
            return {}
        return {"l2_choice": f"cross-validation: {self.n_folds} folds (row i in fold i mod {self.n_folds}), "
                             f"full-budget validation loss, {len(self.grid)} penalties"}


def n_folds_for(n: int) -> int:
    """Folds used for `n` rows: `N_FOLDS`, fewer when the rows are few, 0 when no choice is possible.

    Examples
    --------
    >>> n_folds_for(1000), n_folds_for(6), n_folds_for(3)
    (5, 3, 0)
    """
    k = min(N_FOLDS, n // MIN_FOLD_ROWS)
    return k if k >= 2 else 0


def cv_fits_width(width: int, l2, whiten) -> bool:
    """Whether "auto" can be cross-validated on `width` working columns; when not, warn in one line.

    Above `CV_MAX_WIDTH` columns the folds would hold K matrices of width x width at once (on the
    thesis-shaped bank of 11,016 columns, 4.9 GB beyond the data); the fit then uses the documented
    fallback (`fixed`: l2 = 1e-4, per-column standardisation) and says so.

    Examples
    --------
    >>> import warnings
    >>> cv_fits_width(100, "auto", "auto")
    True
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     cv_fits_width(11016, "auto", "auto")
    False
    >>> print(caught[0].message)
    11016 columns: l2/whiten="auto" is not cross-validated above 4096 columns (5 folds of 11016 x 11016); using l2=0.0001, whiten=False; pass both to choose them
    """
    if l2 != "auto" and whiten != "auto" or width <= CV_MAX_WIDTH:
        return True
    import warnings

    from edgeseq.errors import EdgeseqWarning

    c = fixed(l2, whiten)
    warnings.warn(f'{width} columns: l2/whiten="auto" is not cross-validated above {CV_MAX_WIDTH} columns '
                  f'({N_FOLDS} folds of {width} x {width}); using l2={c.l2:g}, whiten={c.whiten}; pass both to '
                  f'choose them', EdgeseqWarning, stacklevel=3)
    return False


def fold_statistics(X, y, columns, n_folds: int, progress=None) -> list[SufficientStats]:
    """Statistics of each fold (rows i with i mod K = f); their merge is the statistics of all rows.

    Each fold's rows (a strided view of X, read in place) are read in `fold_parts` consecutive runs,
    one statistics pass per run, merged in order into the fold's statistics. The passes are
    independent, so they run side by side on as many threads as the BLAS may use
    (`blas_threads`), each pass on one BLAS thread: the chunked pass's own work (per-chunk
    corrections and merges, the products with y) runs on one core per pass, where a single pass on
    two BLAS threads shares only its products. How the rows are cut depends on the data's shape
    alone, and the runs are merged in a fixed order, so the statistics are the same to the bit on
    any number of threads. Memory: while the passes run, each worker's run in progress holds its own
    d × d sums besides the folds finished so far, and a finished run may wait for its fold's
    earlier one: a few d × d arrays more than the K folds' own.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.random.default_rng(0).normal(size=(10, 2)); y = X[:, 0]
    >>> folds = fold_statistics(X, y, None, 3)
    >>> [f.n for f in folds], bool(np.allclose(merge_folds(folds).xx, sufficient_statistics(X, y).xx))
    ([4, 3, 3], True)
    """
    # X[f::K] is a view: each fold's pass reads its rows in place (the statistics pass forms a strided
    # chunk's Gram with numpy rather than copying the chunk for BLAS), so the passes together read
    # every row once and cost what one pass over all rows costs
    parts = fold_parts(X.shape[0], n_folds)

    def run(task: tuple[int, int]) -> SufficientStats:
        f, h = task
        rows = X[f::n_folds]
        a, b = h * rows.shape[0] // parts, (h + 1) * rows.shape[0] // parts
        return sufficient_statistics(rows[a:b], y[f::n_folds][a:b], columns=columns, progress=progress)

    tasks = [(f, h) for f in range(n_folds) for h in range(parts)]
    with side_by_side(len(tasks), "edgeseq-folds") as run_all:
        return _merged_runs(run_all(run, tasks), n_folds, parts)


def _merged_runs(runs, n_folds: int, parts: int) -> list[SufficientStats]:
    """Each fold's statistics from its `parts` runs, in order (`runs` yields them fold after fold):
    the first run absorbs the others as they arrive, so only a few runs wait unmerged at a time."""
    runs = iter(runs)
    folds = []
    for _ in range(n_folds):
        fold = next(runs)
        for _ in range(parts - 1):
            fold.absorb(next(runs))
        folds.append(fold)
    return folds


def fold_parts(n_rows: int, n_folds: int) -> int:
    """How many consecutive runs of rows each fold's statistics pass is cut into (`fold_statistics`):
    `FOLD_PARTS` when every run holds at least `FOLD_PART_MIN_ROWS` rows, else 1.

    Why cut a fold at all: K folds on two threads leave one thread idle for the last fold (three
    rounds of passes for five folds); ten runs balance as five rounds of two. Small data keeps one
    pass per fold: there a pass costs little and each run adds a pass's fixed work.

    Examples
    --------
    >>> fold_parts(300_000, 5), fold_parts(1_000, 5)
    (2, 1)
    """
    return FOLD_PARTS if n_rows // n_folds >= FOLD_PARTS * FOLD_PART_MIN_ROWS else 1


def merge_folds(folds) -> SufficientStats:
    """All rows' statistics from the folds' (exact merge, a fresh object).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.arange(8.0).reshape(4, 2); y = np.arange(4.0)
    >>> merge_folds(fold_statistics(X, y, None, 2)).n
    4
    """
    total = SufficientStats.empty(folds[0].x_mean.shape[0], folds[0].y_mean.shape[0])
    for f in folds:
        total.absorb(f)
    return total


@dataclass
class FoldBasis:
    """A fold's working basis: the part of a `WorkingProblem` that `_project` reads (the ridge folds
    form their Gram themselves, so nothing else of a working problem is built per fold).

    Examples
    --------
    >>> import numpy as np
    >>> FoldBasis([np.eye(2)], [slice(0, 2)], [slice(0, 2)], np.zeros(2)).slices
    [slice(0, 2, None)]
    """

    transforms: list
    raw_slices: list
    slices: list
    x_mean: np.ndarray


def _basis_map(prob):
    """The working basis as one map of the raw columns: (columns, scales) when it only standardises,
    else None: the group transforms are then applied block by block (`_times_basis`)."""
    if all(np.all(np.count_nonzero(Tg, axis=0) == 1) for Tg in prob.transforms):  # one raw column each
        rows = [np.argmax(Tg != 0, axis=0) for Tg in prob.transforms]
        cols = [rs.start + r for r, rs in zip(rows, prob.raw_slices)]
        scales = [Tg[r, np.arange(r.size)] for Tg, r in zip(prob.transforms, rows)]
        if not cols:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return np.concatenate(cols).astype(np.int64), np.concatenate(scales)
    return None


def _times_basis(prob, A: np.ndarray) -> np.ndarray:
    """A @ T for the working problem's block-diagonal (d, k) basis map T (`times_basis`)."""
    return times_basis(prob.transforms, prob.raw_slices, prob.slices, A)


def _project(prob, stats: SufficientStats, y_scale: np.ndarray, tmap):
    """One row set in the working basis: (n, Σ z̃z̃ᵀ, Σ z̃ỹᵀ, Σ ỹ², mean z, mean y), sums centred on its own
    means and the target divided by `y_scale` (the unit every fold's loss is counted in); `tmap` is
    `_basis_map(prob)`, formed once for the fold's two row sets."""
    xy = stats.xy / y_scale
    dx = stats.x_mean - prob.x_mean
    if isinstance(tmap, tuple):  # standardisation: a column selection and a scale
        cols, sc = tmap
        K = (stats.xx if cols.size == stats.xx.shape[0] else stats.xx[np.ix_(cols, cols)]) * np.outer(sc, sc)
        q, zbar = xy[cols] * sc[:, None], dx[cols] * sc
    else:
        K = _times_basis(prob, _times_basis(prob, stats.xx).T)  # Tᵀ xx T (xx is symmetric)
        K = (K + K.T) / 2  # exactly symmetric for eigh, as the rounding of the two products is not
        q, zbar = _times_basis(prob, xy.T).T, _times_basis(prob, dx[None, :])[0]
    return stats.n, K, q, np.diag(stats.yy) / y_scale ** 2, zbar, stats.y_mean / y_scale


def _capsule_function(module, name: str, argtypes):
    """A C function exported by a Cython module (`module.__pyx_capi__[name]`) as a ctypes callable.

    ctypes releases the GIL for the duration of a call through a CFUNCTYPE, which scipy's own
    wrapper of some LAPACK routines (``dsytrd`` among them) does not: called from two threads, those
    run one at a time. None when the module does not export `name` this way.
    """
    try:
        capsule = module.__pyx_capi__[name]
        # prototypes of our own, not set on the shared `ctypes.pythonapi` entries other code may use
        get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
        get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", ctypes.pythonapi))
        pointer = get_pointer(capsule, get_name(capsule))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return ctypes.CFUNCTYPE(None, *argtypes)(pointer) if pointer else None


def _load_dsytrd():
    from scipy.linalg import cython_lapack

    dp, ip = ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)
    return _capsule_function(cython_lapack, "dsytrd", [ctypes.c_char_p, ip, dp, ip, dp, dp, dp, dp, ip, ip])


_DSYTRD = _load_dsytrd()


def _dsytrd(S: np.ndarray, lwork: int):
    """LAPACK's ``dsytrd`` of S's lower triangle, as ``scipy.linalg.lapack.dsytrd(S, lower=1)`` returns it.

    Through scipy's Cython LAPACK with the GIL released (`_capsule_function`), so that the folds of
    the cross-validated choice reduce their matrices on two cores at once; the same routine of the
    same library, so the same numbers. Falls back to scipy's wrapper when that entry is missing.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.random.default_rng(0).normal(size=(6, 6)); S = A @ A.T
    >>> ours, ref = _dsytrd(S, 64), lapack.dsytrd(S, lower=1, lwork=64)
    >>> all(np.array_equal(np.tril(x), np.tril(y)) if np.ndim(x) == 2 else np.array_equal(x, y) for x, y in zip(ours, ref))
    True
    """
    k = S.shape[0]
    if _DSYTRD is None or k < 1:
        return lapack.dsytrd(S, lower=1, lwork=lwork)
    a = np.array(S, dtype=np.float64, order="F")
    d, e, tau, work = np.empty(k), np.empty(max(k - 1, 0)), np.empty(max(k - 1, 0)), np.empty(max(lwork, 1))
    n, lw, info = ctypes.c_int(k), ctypes.c_int(max(lwork, 1)), ctypes.c_int(0)
    ptr = ctypes.POINTER(ctypes.c_double)
    _DSYTRD(b"L", ctypes.byref(n), a.ctypes.data_as(ptr), ctypes.byref(n), d.ctypes.data_as(ptr),
            e.ctypes.data_as(ptr), tau.ctypes.data_as(ptr), work.ctypes.data_as(ptr), ctypes.byref(lw),
            ctypes.byref(info))
    return a, d, e, tau, info.value


def _ridge_path(S: np.ndarray, C: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """(S + λ I)⁻¹ C for every λ, side by side: column l·P + p is output p at penalty lam[l].

    One reduction of S serves the whole grid. Why a tridiagonal reduction (S = Q T Qᵀ, LAPACK
    ``sytrd``) rather than an eigendecomposition: the eigenvectors cost three times the reduction
    (0.04 s against 0.011 s at k = 500, ten times per cross-validated fit), and the penalties only need
    a tridiagonal solve each plus Q applied to k × L·P numbers. Falls back to the eigendecomposition
    (negative rounding-level eigenvalues clipped at zero) when a shifted T is singular.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.random.default_rng(0).normal(size=(20, 4)); S = A.T @ A; C = A.T @ np.ones((20, 2))
    >>> W = _ridge_path(S, C, np.array([0.1, 10.0]))
    >>> bool(np.allclose(W[:, 2:], np.linalg.solve(S + 10.0 * np.eye(4), C)))
    True
    """
    k, P = C.shape
    L = lam.size
    if k >= 2:
        a, d, e, tau, info = _dsytrd(S, lwork=max(1, 32 * k))
        if info == 0:
            def apply_q(B, trans):  # Q = diag(1, Q'), Q' the QR-type reflectors below the subdiagonal
                out = B.copy()
                out[1:] = lapack.dormqr("L", trans, a[1:, :-1], tau, B[1:], max(1, 64 * B.shape[1]))[0]
                return out
            b = apply_q(C, "T")
            X = np.empty((k, L * P))
            for j, lj in enumerate(lam):
                x, info = lapack.dgtsv(e, d + lj, e, b)[3:]
                if info != 0:
                    break
                X[:, j * P:(j + 1) * P] = x
            else:
                return apply_q(X, "N")
    s, V = np.linalg.eigh(S) if S.size else (np.zeros(0), np.zeros((0, 0)))
    Vq = V.T @ C  # (k, P)
    return V @ (Vq[:, None, :] / (np.maximum(s, 0.0)[:, None, None] + lam[None, :, None])).reshape(k, L * P)


def ridge_cv_losses(folds, group_sizes, whiten: bool, grid, total: SufficientStats | None = None) -> np.ndarray:
    """Mean over folds of the held-out squared error (per unit target variance, summed over outputs).

    `folds` are the statistics of each fold in the same columns (group after group, `group_sizes`),
    `total` their merge (formed here when None). Row-for-row the same numbers as building the
    working basis (`whiten` or standardise) from each fold's training rows, fitting a ridge with
    intercept on those rows in it and scoring the held-out rows: a pipeline of scaler and model,
    cross-validated as one, so the scored rows never shape the basis they are scored in. A fold's
    training statistics are all rows' with the fold's taken out; one symmetric eigendecomposition per
    fold serves the whole penalty grid, whose weights are then formed and scored for all penalties
    at once with matrix products. No row is read again.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = X[:, 0] + 0.1 * X[:, 1]
    >>> losses = ridge_cv_losses(fold_statistics(X, y, None, 4), [3], False, (1e-3, 10.0))
    >>> bool(losses[0] < losses[1])
    True
    """
    total = merge_folds(folds) if total is None else total
    return _cv_losses(folds, group_sizes, (bool(whiten),), grid, total, map)[bool(whiten)]


def _cv_losses(folds, group_sizes, bases, grid, total: SufficientStats, run) -> dict:
    """`ridge_cv_losses` of every basis in `bases` (True: whiten, False: standardise), as {basis: losses}.

    The work is cut into tasks that do not depend on each other, one per basis and fold (its
    training statistics, its basis, the two projections, the penalty path and the held-out
    scores), run through `run` (``map``, or a thread pool's). Each fold's loss is then added in
    fold order, so the result is the same to the bit however the tasks ran. A task holds one d × d
    array (its training statistics, all rows' with the fold's taken out) and two k × k projections,
    so at most as many of each exist as tasks run at once.
    """
    grid = np.asarray(grid, dtype=np.float64)
    y_scale = target_scale(total)

    def fold_loss(task):
        whiten, f = task
        # formed per task, not shared by a fold's two bases: sharing would keep K d × d arrays alive at
        # once, or put both bases in one task (fewer, longer tasks: slower on two threads); it is one
        # pass over d × d, a few per cent of a task
        train = total.without(folds[f])
        if whiten:
            basis = FoldBasis(*group_transforms(train, group_sizes, True), train.x_mean)
            tmap = _basis_map(basis)
        else:  # a standardised basis is a column selection and a scale: no per-group maps formed
            basis, tmap = FoldBasis([], [], [], train.x_mean), standardising_map(train)
        return _fold_loss(_project(basis, train, y_scale, tmap), _project(basis, folds[f], y_scale, tmap), grid,
                          total.n)

    tasks = [(w, f) for w in bases for f in range(len(folds))]
    losses = list(run(fold_loss, tasks))
    out = {}
    for i, w in enumerate(bases):
        acc = np.zeros(grid.size)
        for loss in losses[i * len(folds):(i + 1) * len(folds)]:
            acc += loss
        out[w] = acc / len(folds)
    return out


def _fold_loss(train, held, grid: np.ndarray, n: int) -> np.ndarray:
    """Held-out squared error of one fold at every penalty, from projected sums (`_project`) of its
    training and held-out rows; `n` all rows (the sum-form penalty)."""
    L = grid.size
    n_tr, S, C, _, zt, yt = train
    n_f, Sf, Cf, Y2f, zv, yv = held
    k, P = C.shape
    lam = grid * n / n_tr  # the same sum-form penalty in every fit
    # every penalty's weights side by side: column l·P + p of W is output p at penalty l
    W = _ridge_path(S / n_tr, C / n_tr, lam)
    # held-out rows centred on their own mean (Sf, Cf, Y2f) plus the shift between the two means
    fit = (W.reshape(k, L, P) * (Cf / n_f)[:, None, :]).sum(axis=0)
    quad = (W * ((Sf / n_f) @ W)).sum(axis=0).reshape(L, P)
    shift = (yv - yt)[None, :] - ((zv - zt) @ W).reshape(L, P)
    return (Y2f[None, :] / n_f - 2 * fit + quad + shift ** 2).sum(axis=1)


def blas_threads() -> int:
    """How many threads the BLAS may use here (the caller's `threadpool_limits`, else its default).

    The cross-validated choice runs that many folds at once, each on one BLAS thread: as many cores
    as the statistics pass before it used, and one when the caller limited BLAS to one.

    Examples
    --------
    >>> from threadpoolctl import threadpool_limits
    >>> with threadpool_limits(limits=1, user_api="blas"):
    ...     blas_threads()
    1
    """
    return max([int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"], default=1)


@contextmanager
def side_by_side(n_tasks: int, name: str):
    """A ``map`` that runs independent tasks side by side, each on one BLAS thread: as many at once as
    the caller lets BLAS use threads (`blas_threads`), or one after another when that is one.

    The BLAS is held to one thread inside, in the caller's thread and in every worker (a BLAS built on
    OpenMP keeps its thread count per thread): the tasks use the cores by running at once instead.
    On an error in a task the tasks not yet started are dropped, not run to the end. The folds'
    statistics passes (`fold_statistics`) and the folds of the cross-validated choice
    (`choose_ridge`) run this way; results come back in task order, so what the caller does with
    them does not depend on the thread count.

    Examples
    --------
    >>> with side_by_side(3, "example") as run_all:
    ...     list(run_all(abs, [-1, 2, -3]))
    [1, 2, 3]
    """
    workers = min(blas_threads(), n_tasks)
    with threadpool_limits(limits=1, user_api="blas"):
        if workers < 2:
            yield map
            return
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name, initializer=threadpool_limits,
                                  initargs=(1, "blas"))
        try:
            yield pool.map
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def choose_ridge(folds, group_sizes, *, l2, whiten, total: SufficientStats | None = None) -> Choice:
    """The penalty and basis with the lowest cross-validated full-budget loss (only what is "auto").

    `total` is the folds' merge when the caller has it already (formed here when None).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 40)); y = X[:, 0] + rng.normal(size=60)   # 40 columns, 60 rows: noisy
    >>> c = choose_ridge(fold_statistics(X, y, None, 5), [40], l2="auto", whiten=True)
    >>> c.l2 > 1e-3
    True
    """
    total = merge_folds(folds) if total is None else total
    bases = (True, False) if whiten == "auto" else (bool(whiten),)
    grid = L2_GRID if l2 == "auto" else (float(l2),)
    # D-space work: small products and LAPACK's reduction (level-2 BLAS at heart), each on one BLAS
    # thread as the selection is (`fit_sequence`): on the shared 2-core machine the reduction of a
    # 500 x 500 matrix took 7x its one-thread time with two threads, 20x right after a numpy product
    # (two pools competing). The cores the caller gave BLAS run independent folds instead.
    with side_by_side(len(bases) * len(folds), "edgeseq-cv") as run_all:
        scores = _cv_losses(folds, group_sizes, bases, grid, total, run_all)
    return _best(scores, grid, len(folds))


def _within_group(stats: SufficientStats, group_sizes) -> GroupBlockStats:
    """The statistics' within-group blocks only (what a basis is built from)."""
    bounds = np.concatenate([[0], np.cumsum(np.asarray(group_sizes, dtype=np.int64))])
    return GroupBlockStats(n=stats.n, x_mean=stats.x_mean, y_mean=stats.y_mean,
                           blocks=[stats.xx[a:b, a:b] for a, b in zip(bounds[:-1], bounds[1:])],
                           xy=stats.xy, yy=stats.yy)


def _best(scores: dict, grid, n_folds: int, rtol: float = 0.0) -> Choice:
    """The basis with the lowest loss (ties: the first listed, whitening) and in it the strongest
    penalty whose loss is within `rtol` of that lowest (``rtol=0``: the lowest; ties: the smaller).

    `rtol` is for the GLM (`GLM_CHOICE_RTOL`). Its fold fits stop at a gradient tolerance, and at
    penalties weaker than the data need (folds the model nearly separates) the warm-started fit
    barely moves from the stronger penalty's weights: the held-out loss then stays within rounding of
    the stronger one's and no longer measures the weaker penalty, whose fit on all rows (started
    elsewhere, along the selection) ends somewhere else. On the MNIST bank 10⁻⁵ and 10⁻⁴ scored
    alike to five digits; CS-G-FR's full fit at 10⁻⁵ then reached 0.924 test accuracy, at 10⁻⁴
    0.975. A penalty that does not clearly beat a stronger one is not evidence for the weaker fit.

    Examples
    --------
    >>> import numpy as np
    >>> scores = {True: np.array([0.0672, 0.06722, 0.0726]), False: np.array([np.inf, 0.0758, 0.0722])}
    >>> c = _best(scores, (1e-5, 1e-4, 1e-3), 5)
    >>> c.l2, c.whiten
    (1e-05, True)
    >>> _best(scores, (1e-5, 1e-4, 1e-3), 5, rtol=0.01).l2
    0.0001
    """
    best = None
    for w, s in scores.items():
        s = np.where(np.isfinite(s), s, np.inf)
        if best is None or s.min() < best[0]:
            near = np.flatnonzero(s <= s.min() * (1.0 + rtol)) if rtol and np.isfinite(s.min()) else [int(np.argmin(s))]
            best = (s.min(), w, grid[max(near, key=lambda i: grid[i])])
    return Choice(l2=float(best[2]), whiten=bool(best[1]), n_folds=n_folds, scores=scores, grid=tuple(grid))


def glm_cv_losses(Z: np.ndarray, Y: np.ndarray, link: str, grid, n_folds: int,
                  held_out: np.ndarray | None = None) -> np.ndarray:
    """Mean over folds of the held-out log-loss of the full GLM at each penalty (warm-started path).

    With `held_out` (a boolean mask over the rows of `Z`) there is one fit per penalty instead of
    `n_folds`: on the rows outside the mask, scored on the rows inside it, at the penalty the model
    fitted on exactly those rows uses (no sum-form rescaling). K times cheaper, for a caller that
    already keeps rows apart (`AnytimeClassifier.fit`'s ``validation``).

    `Z` is the working design of all rows (centred, in the chosen basis), or a function of the
    scored rows' mask giving it in a basis built without those rows (`choose_glm`: the fold's own
    basis, as a scaler fitted inside each fold would give). The path runs from the
    strongest penalty down, each fold's fit starting from its previous weights. Once the mean
    held-out loss has risen for `PATH_PATIENCE` penalties in a row past its best, the weaker ones are
    not fitted (their loss is +inf): they are the slowest fits (nearly separable data) and a loss
    that rises while the penalty shrinks is overfitting, which a weaker penalty only makes worse.

    A fold with fewer training rows m than columns d is fitted in the span of its rows: the penalty
    is λ‖W‖² and the loss reads W only through Zₜ W, so the optimal W lies in the row space of Zₜ
    (the representer theorem; the intercept is not penalised). With Zₜᵀ = Q R (Q of shape (d, m)),
    W = Q β gives Zₜ W = Rᵀ β and ‖W‖ = ‖β‖: the same optimum and held-out scores from an m-column
    fit, whose preconditioner factor costs m³ instead of d³ per penalty (on the MNIST bank, 2,100
    rows per fold against 3,130 columns: the factorisations were the largest share of the path).
    Rᵀ is lower triangular, so its products run as BLAS ``trmm`` (`LowerTriangular`), half the
    work of general ones.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.normal(size=(100, 2)); Y = (Z[:, :1] + rng.normal(size=(100, 1)) > 0).astype(float)
    >>> glm_cv_losses(Z, Y, "sigmoid", (1e-3, 100.0), 5).round(2).tolist()
    [0.58, 0.67]
    >>> glm_cv_losses(Z, Y, "sigmoid", (1e-3, 0.1), 0, held_out=np.arange(100) >= 80).round(2).tolist()
    [0.67, 0.61]
    """
    from edgeseq.train.glm.fit import data_loss, prior_intercept, refit

    grid = np.asarray(grid, dtype=np.float64)
    if held_out is None:
        fold = np.arange(Y.shape[0]) % n_folds
        scored = [fold == f for f in range(n_folds)]
        n = Y.shape[0]  # the sum-form penalty of a fit on all rows (see the module notes)
    else:
        scored = [np.asarray(held_out, dtype=bool)]
        n = int(np.count_nonzero(~scored[0]))  # the fit on those rows is the model: its own penalty
    parts = []
    for va in scored:
        tr = ~va
        Zf = Z(va) if callable(Z) else Z
        Zt, Yt, Zv = Zf[tr], Y[tr], Zf[va]
        del Zf  # a fold's own design lives only as long as its two slices are cut
        span = 0 < Zt.shape[0] < Zt.shape[1]
        if span:  # wider than its rows: fit in the rows' span (see above)
            Q, R = np.linalg.qr(Zt.T)  # Zt = Rᵀ Qᵀ, Q (d, m) orthonormal columns
            Zt, Zv = np.ascontiguousarray(R.T), Zv @ Q
        parts.append({"Z": LowerTriangular(Zt) if span else Zt, "Y": Yt, "K": Zt.T @ Zt / Zt.shape[0], "Zv": Zv,
                      "va": va,  # K: the refit's preconditioner
                      "W": np.zeros((Zt.shape[1], Y.shape[1])), "b": prior_intercept(Yt, link)})
    out = np.full(grid.size, np.inf)
    best, rising = np.inf, 0
    for i in np.argsort(-grid):
        loss = 0.0
        for p in parts:
            fit = refit(p["Z"], p["Y"], p["K"], p["W"], p["b"], link, l2=float(grid[i]) * n / p["Z"].shape[0])
            p["W"], p["b"] = fit.W, fit.b
            loss += data_loss(p["Zv"] @ fit.W + fit.b, Y[p["va"]], link)
        out[i] = loss / len(parts)
        best, rising = (out[i], 0) if out[i] < best else (best, rising + 1)
        if rising >= PATH_PATIENCE:
            break
    return out


class LowerTriangular:
    """A lower triangular (m, m) design whose products run as BLAS ``trmm`` (half a general product).

    The fit in the rows' span of `glm_cv_losses` has the triangular design Rᵀ, and every evaluation of
    its L-BFGS path multiplies by it twice (``Z @ W`` and ``Z.T @ R`` in `objective_gradient`, which
    needs only those, ``shape`` and ``dtype``). A general product reads the zero half too: on the
    MNIST bank (folds of 2,100 rows, 10 classes) a ``trmm`` took 4.3 ms against 7.2 ms, on a path of
    about 9,000 evaluations per choice. The same sums in another order, so equal to rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.auto import LowerTriangular
    >>> L = np.tril(np.arange(1.0, 10.0).reshape(3, 3)); B = np.ones((3, 2))
    >>> Z = LowerTriangular(L)
    >>> bool(np.allclose(Z @ B, L @ B)), bool(np.allclose(Z.T @ B, L.T @ B)), Z.shape
    (True, True, (3, 3))
    """

    def __init__(self, L: np.ndarray, trans: bool = False):
        self.L = np.asfortranarray(L, dtype=np.float64)  # trmm reads a Fortran-ordered matrix without a copy
        self.trans = trans
        self.shape, self.dtype = self.L.shape, self.L.dtype

    @property
    def T(self) -> "LowerTriangular":
        """The transpose: the same stored triangle, multiplied as Lᵀ (no copy, as ndarray's ``.T``).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.auto import LowerTriangular
        >>> L = np.tril(np.ones((2, 2))); Z = LowerTriangular(L).T
        >>> Z.trans, (Z @ np.eye(2)).tolist() == L.T.tolist()
        (True, True)
        """
        return LowerTriangular(self.L, not self.trans)

    def __matmul__(self, B: np.ndarray) -> np.ndarray:
        from scipy.linalg.blas import dtrmm

        return dtrmm(1.0, self.L, np.asarray(B, dtype=np.float64), lower=1, trans_a=int(self.trans))


def cv_step(n: int, width: int) -> int:
    """Every how many rows the GLM cross-validation reads: 1 until the working design would pass
    `CV_MAX_CELLS` entries, then the stride that keeps it under (rows 0, step, 2·step, ...).

    The GLM folds need the working design in memory (k fits per penalty, each several passes); on
    data that large a sample of rows decides the penalty as well as all of them would.

    Examples
    --------
    >>> cv_step(1000, 64), cv_step(60000, 11016)
    (1, 27)
    """
    return max(1, -(-int(n) * max(1, int(width)) // CV_MAX_CELLS))


def choose_glm(Xs, Ys, stats, group_sizes, link: str, *, l2, whiten, held_out: np.ndarray | None = None) -> Choice:
    """`choose_ridge` for a GLM: the same folds of the sample rows `Xs` (used columns, in group
    order) and targets `Ys`, scored by held-out log-loss; `stats` (all rows) gives the basis.

    With `held_out` (a boolean mask over the rows of `Xs`) no folds: fitted on the other rows, scored
    on those (`glm_cv_losses`); `stats` are then the fitted rows' and the Choice records the held-out
    count instead of folds.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 3)); Y = (X[:, :1] > 0).astype(float)
    >>> c = choose_glm(X, Y, sufficient_statistics(X, Y), [3], "sigmoid", l2="auto", whiten=False)
    >>> c.whiten, c.l2 < 1.0, c.n_folds
    (False, True, 5)
    >>> h = choose_glm(X, Y, sufficient_statistics(X[:90], Y[:90]), [3], "sigmoid", l2="auto", whiten=False,
    ...                held_out=np.arange(120) >= 90)
    >>> h.n_folds, h.held_out, h.provenance()["l2_choice"].split(":")[0]
    (0, 30, 'held-out rows')
    """
    from edgeseq.train.glm.select import working_design

    n_folds = n_folds_for(Xs.shape[0]) if held_out is None else 0
    if (n_folds == 0 and held_out is None) or not cv_fits_width(Xs.shape[1], l2, whiten):
        return fixed(l2, whiten)
    bases = (True, False) if whiten == "auto" else (bool(whiten),)
    grid = GLM_L2_GRID if l2 == "auto" else (float(l2),)
    cols = np.arange(Xs.shape[1])
    if held_out is None:  # each fold's basis from all rows but the ones it scores
        blocks = stats if isinstance(stats, GroupBlockStats) else _within_group(stats, group_sizes)
        groups = np.split(cols, np.cumsum(np.asarray(group_sizes, dtype=np.int64))[:-1])
        fold_stats = {}

        def fold_basis(va: np.ndarray) -> GroupBlockStats:
            key = va.tobytes()
            if key not in fold_stats:
                fold_stats[key] = without_rows(blocks, group_block_statistics(Xs[va], Ys[va], groups))
            return fold_stats[key]

    scores = {}
    for w in bases:
        if held_out is None:
            def design(va, w=w):
                return working_design(Xs, cols, build_working_problem(fold_basis(va), group_sizes, w, keep_cov=False))
        else:  # `stats` are the fitted rows' already
            design = working_design(Xs, cols, build_working_problem(stats, group_sizes, w, keep_cov=False))
        scores[w] = glm_cv_losses(design, Ys, link, grid, n_folds, held_out=held_out)
    choice = _best(scores, grid, n_folds, rtol=GLM_CHOICE_RTOL)
    if held_out is not None:
        choice.held_out = int(np.count_nonzero(held_out))
    return choice


def fixed(l2, whiten) -> Choice:
    """No choice to make (both given), or too few rows to make one (fallbacks for "auto").

    Examples
    --------
    >>> fixed("auto", "auto")
    Choice(l2=0.0001, whiten=False, n_folds=0, scores={}, grid=(), held_out=0)
    """
    return Choice(l2=FALLBACK_L2 if l2 == "auto" else float(l2),
                  whiten=False if whiten == "auto" else bool(whiten), n_folds=0)


def check_fold_count(l2, whiten) -> None:
    """Refuse an automatic choice from statistics of all rows only (no folds to choose on), in one line.

    Examples
    --------
    >>> check_fold_count("auto", True)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: l2="auto" needs per-fold statistics (a list of SufficientStats, fold f holding rows i with i mod K = f); pass a number instead
    """
    what, instead = ("l2", "a number") if l2 == "auto" else ("whiten", "True or False")
    if l2 == "auto" or whiten == "auto":
        raise InputError(f'{what}="auto" needs per-fold statistics (a list of SufficientStats, fold f holding rows '
                         f'i with i mod K = f); pass {instead} instead')
