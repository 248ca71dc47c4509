"""Moments of one chunk of rows at the speed of a bare Gram, without losing precision to offsets.

Why this module exists: centring a chunk in a copy before ``X.T @ X`` is exact but costs a full
extra memory pass (the statistics pass took ~1.9x a bare Gram). The raw Gram with a rank-one
correction, ``X.T @ X - n m mᵀ``, needs no copy but cancels catastrophically when a column's mean
is large against its spread (relative error ~ eps·(mean/std)²: useless for an offset of 1e6 and a
spread of 1e-3). A correction applied *after* the product cannot recover what the product rounded
away, so the shift must happen before it -- but only where it matters:

* a :class:`Reference` is taken once from the first rows: columns whose mean exceeds
  ``SHIFT_RATIO`` standard deviations ("offset columns") get shifted by that mean, in a copy of just
  those columns; every other column is used in place (its error, eps·SHIFT_RATIO², is negligible);
* one syrk on the chunk in place, one gemm of the chunk against the shifted offset columns, one gemm
  against ``[y - ref_y, 1]`` (cross products and column sums in the same pass), then the rank-one
  correction to centre on the chunk's own mean;
* when more than a quarter of the columns are offset columns, their extra products would cost more
  than a copy of the chunk, so the chunk is centred in a copy (the exact path below);
* if the chunk's mean has drifted more than ``DRIFT_RATIO`` standard deviations from the reference in
  any column (or the computed variance is not trustworthy), the chunk is recomputed exactly by
  centring it in a copy. The check is sound: a variance garbled by cancellation is at most
  ~eps·mean², far below mean²/DRIFT_RATIO², so it always triggers.

Means are returned *relative to the reference* (the "shifted frame"): Chan's merge of chunk means
that are stored as 1e6 + 1e-5 would round the small part away (float64 keeps ~1e-10 of it), so
chunks are merged in the shifted frame and the reference is added back once at the end
(`edgeseq.train.linear.stats`). Co-moments do not depend on the frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgeseq.train.products import transposed_product

SHIFT_RATIO = 8.0  # |mean| / std above which a column is shifted in a copy (error eps·64 otherwise)
DRIFT_RATIO = 32.0  # |chunk mean - reference| / std above which a chunk is centred in a full copy
PROBE_ROWS = 1024  # rows of the first chunk used to choose the reference
# up to this width a chunk's own Gram (at most 32 MiB) is formed by numpy and added to the sums; above
# it scipy's syrk sums in place (no second d x d array: 970 MB at 11,016 columns)
CHUNK_GRAM_MAX_COLUMNS = 2048


@dataclass(frozen=True)
class Reference:
    """Per-column shift chosen from a probe of the first rows: offset columns and their shift.

    Only columns whose mean exceeds ``SHIFT_RATIO`` standard deviations are shifted: those are the
    ones where the raw Gram would cancel catastrophically.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.chunk_moments import Reference
    >>> X = np.column_stack([np.arange(5.0), 1e6 + np.arange(5.0)]); y = np.ones((5, 1))
    >>> ref = Reference.from_probe(X, y)
    >>> ref.cols.tolist(), ref.x_shift.tolist(), ref.y_ref.tolist()
    ([1], [0.0, 1000002.0], [1.0])
    """

    cols: np.ndarray  # indices of the offset columns (shifted in a copy)
    x_shift: np.ndarray  # shift of every column: the probe's mean on offset columns, zero elsewhere
    y_ref: np.ndarray  # shift of every target

    @classmethod
    def from_probe(cls, xc: np.ndarray, yc: np.ndarray) -> "Reference":
        """The reference chosen from the first ``PROBE_ROWS`` rows of a chunk.

        Parameters
        ----------
        xc : numpy.ndarray
            Chunk of X, (n, D).
        yc : numpy.ndarray
            Its targets, (n, P).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.chunk_moments import Reference
        >>> X = np.array([[0.0, 100.0], [2.0, 101.0]]); y = np.array([[1.0], [3.0]])
        >>> ref = Reference.from_probe(X, y)
        >>> ref.cols.tolist(), ref.x_shift.tolist(), ref.y_ref.tolist()
        ([1], [0.0, 100.5], [2.0])
        """
        probe, yprobe = xc[:PROBE_ROWS], yc[:PROBE_ROWS]
        with np.errstate(invalid="ignore", over="ignore"):
            mean, std = probe.mean(axis=0), probe.std(axis=0)
            offset = np.abs(mean) > SHIFT_RATIO * std  # NaN compares False: it is reported later
            return cls(cols=np.flatnonzero(offset), x_shift=np.where(offset, mean, 0.0),
                       y_ref=yprobe.mean(axis=0))

    def take(self, idx) -> "Reference":
        """The reference of a subset (or reordering) of the columns.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.chunk_moments import Reference
        >>> ref = Reference(cols=np.array([1]), x_shift=np.array([0.0, 5.0, 0.0]), y_ref=np.zeros(1))
        >>> sub = ref.take([2, 1])
        >>> sub.cols.tolist(), sub.x_shift.tolist()
        ([1], [0.0, 5.0])
        """
        shift = self.x_shift[idx]
        return Reference(cols=np.flatnonzero(shift), x_shift=shift, y_ref=self.y_ref)


def chunk_moments(xc: np.ndarray, yc: np.ndarray, ref: Reference, *, fast: bool = True):
    """(n, x_mean, y_mean, xx, xy, yy) of one float64 chunk: means in `ref`'s shifted frame, co-moments
    centred on the chunk's own mean.

    `fast=False` (and any drifted chunk) takes the exact path through a centred copy.

    Parameters
    ----------
    xc : numpy.ndarray
        Chunk of X, float64 (n, D).
    yc : numpy.ndarray
        Its targets, float64 (n, P).
    ref : Reference
        The shift shared by all chunks of the pass.
    fast : bool
        Use the in-place Gram with a rank-one correction when it is accurate.

    Returns
    -------
    tuple
        (n, x_mean - ref.x_shift, y_mean - ref.y_ref, xx, xy, yy).

    Examples
    --------
    A column with offset 1e6 and spread 1e-3 keeps its variance, which a raw Gram would lose:

    >>> import numpy as np
    >>> from edgeseq.train.linear.chunk_moments import Reference, chunk_moments
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.normal(size=50), 1e6 + 1e-3 * rng.normal(size=50)]); y = rng.normal(size=(50, 1))
    >>> ref = Reference.from_probe(X, y)
    >>> n, mx, my, xx, xy, yy = chunk_moments(X, y, ref)
    >>> Xc = X - X.mean(axis=0)
    >>> n, np.allclose(mx + ref.x_shift, X.mean(axis=0)), np.allclose(xx, Xc.T @ Xc, rtol=1e-9, atol=0)
    (50, True, True)
    >>> np.allclose(chunk_moments(X, y, ref, fast=False)[3], xx, rtol=1e-9, atol=0)
    True
    """
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # non-finite input is reported later
        if fast:
            out = _shifted(xc, yc, ref)
            if out is not None:
                return out
        return _centred_copy(xc, yc, ref)


def absorb_chunk(total, xc: np.ndarray, yc: np.ndarray, ref: Reference) -> bool:
    """Merge one chunk into `total` (statistics in `ref`'s shifted frame) in place; a wide chunk without its Gram.

    Why: a wide chunk's own Gram is a second d × d array beside the running sums -- at ten thousand
    columns the statistics pass held two gigabytes for one. Here the chunk's products go straight
    into the sums (wide chunks: one BLAS ``syrk`` with beta = 1, updating the lower triangle of
    ``total.xx``), and the chunk's centring and Chan's merge term are added as rank-one updates in
    place; the caller mirrors the lower triangle once at the end of the pass (`mirror_lower`). The arithmetic is the
    fast path's (`chunk_moments`): same products, same corrections, the cancellation between the raw
    products and the chunk's mean bounded the same way, summed in another order.

    Only for chunks the fast path takes as they are: no offset columns in `ref` and no drift of the
    chunk's mean (checked first, against the running spread of the rows merged so far); returns
    False, touching nothing, otherwise -- the caller then takes `chunk_moments` and `absorb`.

    Up to ``CHUNK_GRAM_MAX_COLUMNS`` columns the chunk's Gram is formed by numpy (its syrk) and
    added to the sums: a d × d temporary of at most 32 MiB. Why not scipy's in-place syrk there too:
    numpy and scipy each bundle their own OpenBLAS, each with its own pool of threads, and a pool
    keeps its threads spinning for a while after a call; alternating numpy's product with y and
    scipy's syrk chunk by chunk left one pool spinning while the other worked, and with two threads
    the statistics pass took 2.3x a bare Gram (wall and CPU, idle machine), against 1.2x on one. With
    one library there is one pool. numpy also reads a chunk of strided rows (every K-th row of X: a
    cross-validation fold) in place, where the scipy wrapper would first copy it. Wider chunks keep
    the in-place syrk: their product takes seconds, so a pool's spinning is lost in it.

    Parameters
    ----------
    total : SufficientStats
        Running statistics (possibly of no rows yet: `SufficientStats.empty`), merged into in place.
    xc, yc : numpy.ndarray
        The chunk (float64, (n, d) and (n, P)).
    ref : Reference

    Returns
    -------
    bool
        Whether the chunk was merged.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.chunk_moments import Reference, absorb_chunk, mirror_lower
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(40, 3)) + 5.0; y = rng.normal(size=(40, 1))
    >>> total = sufficient_statistics(X[:20], y[:20])
    >>> ref = Reference(cols=np.zeros(0, dtype=int), x_shift=np.zeros(3), y_ref=np.zeros(1))
    >>> absorb_chunk(total, X[20:], y[20:], ref), mirror_lower(total.xx) is total.xx
    (True, True)
    >>> bool(np.allclose(total.xx, sufficient_statistics(X, y).xx, rtol=1e-12))
    True
    """
    from scipy.linalg.blas import dsyrk

    if ref.cols.size or not (total.xx.flags.c_contiguous and total.xx.dtype == np.float64):
        return False  # (a non-contiguous total would be copied by the BLAS wrapper, not updated in place)
    n, P = xc.shape[0], yc.shape[1]
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite input is reported at the end of the pass
        ys, XY = _target_products(xc, yc, ref)
        sums, y_sums = XY[:, P], ys[:, :P].sum(axis=0)
        mx, my = sums / n, y_sums / n
        yc0 = ys[:, :P] - my
        yy = yc0.T @ yc0
        # narrow: numpy's syrk (both triangles), in numpy's thread pool like the products above; its
        # diagonal is the first chunk's sums of squares for the drift test (no extra pass over the chunk)
        gram = xc.T @ xc if xc.shape[1] <= CHUNK_GRAM_MAX_COLUMNS else None
        if _drifted(total, xc, mx, my, yy, n, None if gram is None else np.diag(gram)):
            return False
        N = total.n + n
        f = total.n * n / N
        dx, dy = mx - total.x_mean, my - total.y_mean
        if gram is not None:
            total.xx += gram
            del gram
        else:
            dsyrk(1.0, xc.T, beta=1.0, c=total.xx.T, lower=0, overwrite_c=1)  # total.xx's lower triangle += xcᵀxc
        add_outer(total.xx, sums, mx, -1.0)  # the chunk's centring: − s sᵀ/n
        add_outer(total.xx, dx, dx, f)  # Chan's merge term
        total.xy += XY[:, :P] - np.outer(sums, my)
        add_outer(total.xy, dx, dy, f)
        total.yy += yy
        add_outer(total.yy, dy, dy, f)
    total.n = N
    total.x_mean = total.x_mean + dx * (n / N)
    total.y_mean = total.y_mean + dy * (n / N)
    return True


def _drifted(total, xc, mx, my, yy, n, squares=None) -> bool:
    """Whether the chunk's mean sits more than DRIFT_RATIO standard deviations from the reference.

    The spread is the running one of the rows merged so far (the diagonal of the sums: exact, and
    free), so a chunk costs no extra pass; the first chunk has none yet and uses its own sums of
    squares (`squares`, the diagonal of its Gram when that was formed; else one pass). Bounding the chunk's mean by the running spread bounds the rounding of its raw products
    the same way (eps · DRIFT_RATIO² · n · var per entry), which is what the test is for.
    """
    if total.n:
        var_x, var_y = np.diag(total.xx) / total.n, np.diag(total.yy) / total.n
    else:
        if squares is None:
            squares = np.einsum("ij,ij->j", xc, xc)
        var_x, var_y = (squares - n * mx * mx) / n, np.diag(yy) / n
    return bool((mx * mx > DRIFT_RATIO**2 * var_x).any() or (my * my > DRIFT_RATIO**2 * var_y).any())


def mirror_lower(a: np.ndarray) -> np.ndarray:
    """Copy the lower triangle of square `a` onto its upper triangle in place, a band at a time.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.chunk_moments import mirror_lower
    >>> mirror_lower(np.array([[1.0, 9.0], [2.0, 3.0]])).tolist()
    [[1.0, 2.0], [2.0, 3.0]]
    """
    d = a.shape[0]
    band = max(1, 2**21 // max(1, d))
    for start in range(0, d, band):
        stop = min(d, start + band)
        block = a[start:stop, start:stop]
        upper = np.triu_indices(stop - start, 1)
        block[upper] = block.T[upper]
        a[start:stop, stop:] = a[stop:, start:stop].T
    return a


def add_outer(acc: np.ndarray, left: np.ndarray, right: np.ndarray, f: float) -> np.ndarray:
    """acc += f · left rightᵀ in place, a band of rows at a time: no temporary the size of acc.

    At ten thousand columns each d × d temporary is a gigabyte; ``acc + f * np.outer(...)`` makes
    two. The result is bit for bit the same (the same operations on the same numbers).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.chunk_moments import add_outer
    >>> acc = np.ones((3, 2)); l, r = np.arange(3.0), np.array([1.0, 2.0])
    >>> want = acc + 0.5 * np.outer(l, r)
    >>> np.array_equal(add_outer(acc, l, r, 0.5), want)
    True
    """
    band = max(1, 2**21 // max(1, right.size))
    for start in range(0, left.size, band):
        acc[start:start + band] += f * np.outer(left[start:start + band], right)
    return acc


def _centred_copy(xc, yc, ref: Reference):
    n = xc.shape[0]
    xs, ys = xc - ref.x_shift, yc - ref.y_ref  # the one copy
    mx, my = xs.mean(axis=0), ys.mean(axis=0)
    xs -= mx
    ys -= my
    return n, mx, my, xs.T @ xs, xs.T @ ys, ys.T @ ys


def _target_products(xc, yc, ref: Reference):
    """([y − y_ref, 1] (n, P+1), xcᵀ[y − y_ref, 1]): the cross products with y and the column sums, one
    pass (in the orientation that is fastest over a row-major chunk, `transposed_product`: this
    product is the statistics pass's second read of every chunk)."""
    P = yc.shape[1]
    ys = np.empty((xc.shape[0], P + 1))
    np.subtract(yc, ref.y_ref, out=ys[:, :P])
    ys[:, P] = 1.0
    return ys, transposed_product(xc, ys)


def _shifted(xc, yc, ref: Reference):
    B = ref.cols
    if 4 * B.size > xc.shape[1]:  # many offset columns: their extra products would cost more than one copy
        return None
    n, P = xc.shape[0], yc.shape[1]
    G = xc.T @ xc  # numpy runs syrk for a transposed pair of the same buffer: no copy of the chunk
    ys, XY = _target_products(xc, yc, ref)
    if B.size:
        xb = xc[:, B] - ref.x_shift[B]  # the only copy: offset columns
        GB = xc.T @ xb
        G[:, B] = GB
        G[B, :] = GB.T
        G[np.ix_(B, B)] = xb.T @ xb
        XY[B] = xb.T @ ys
    sums, y_sums = XY[:, P], ys[:, :P].sum(axis=0)
    xx = add_outer(G, sums, sums / n, -1.0)  # G − s sᵀ/n in place
    xy = XY[:, :P] - np.outer(sums, y_sums / n)
    ym = y_sums / n
    yc0 = ys[:, :P] - ym
    yy = yc0.T @ yc0
    dx, var_x = sums / n, np.diag(xx) / n
    dy, var_y = ym, np.diag(yy) / n
    drifted = (dx * dx > DRIFT_RATIO**2 * var_x).any() or (dy * dy > DRIFT_RATIO**2 * var_y).any()
    if drifted:
        return None
    return n, dx, dy, xx, xy, yy
