"""One chunked pass over the data: means and centred second moments of [X, y].

For squared loss every quantity the selection needs is a function of these statistics, so the
selection itself runs in D-space and never touches the n rows again. Chunks are combined with
Chan's pairwise update (exact and numerically stable), which is also how statistics computed on
different machines or files merge: this is the seam a distributed engine plugs into.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from edgeseq.errors import InputError
from edgeseq.train.linear.releasable import ReleasableRows
from edgeseq.train.linear.chunk_moments import PROBE_ROWS, Reference, absorb_chunk, add_outer, chunk_moments, mirror_lower

RELEASABLE_MIN_COLUMNS = 256  # from this width the pass sums into memory its consumer can give back
_CHUNK_BYTES = 64 * 2**20  # bound on the rows read at a time (the chunk itself is used in place)


@dataclass
class SufficientStats:
    """Counts, means and centred co-moment sums of the used columns of X and of y.

    For squared loss everything the selection needs is a function of these numbers, so they are
    all the training pass has to keep (O(d²) memory, whatever the row count).

    Parameters
    ----------
    n : int
        Number of rows.
    x_mean, y_mean : numpy.ndarray
        Column means of X, shape (d,), and of y, shape (P,).
    xx, xy, yy : numpy.ndarray
        Centred co-moment sums (not yet divided by `n`), shapes (d, d), (d, P), (P, P).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.array([[1.0, 2.0], [3.0, 1.0], [5.0, 4.0]]); y = np.array([1.0, 0.0, 2.0])
    >>> s = sufficient_statistics(X, y)
    >>> s.n, np.allclose(s.x_mean, X.mean(axis=0)), np.allclose(s.xx, (X - X.mean(0)).T @ (X - X.mean(0)))
    (3, True, True)
    """

    n: int
    x_mean: np.ndarray  # (d,)
    y_mean: np.ndarray  # (P,)
    xx: np.ndarray  # (d, d)  sum of centred x xᵀ (divide by n for the covariance)
    xy: np.ndarray  # (d, P)
    yy: np.ndarray  # (P, P)
    # the buffer behind xx when the pass built it in releasable memory (wide data): whoever consumes the
    # statistics may give its rows back as it goes (`edgeseq.train.linear.basis.build_working_problem`)
    xx_storage: ReleasableRows | None = None

    @property
    def cov_xx(self) -> np.ndarray:
        """Population covariance of X, ``xx / n`` (shape (d, d)).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.array([[1.0, 2.0], [3.0, 1.0], [5.0, 4.0]])
        >>> np.allclose(sufficient_statistics(X, np.zeros(3)).cov_xx, np.cov(X.T, bias=True))
        True
        """
        return self.xx / self.n

    @property
    def cov_xy(self) -> np.ndarray:
        """Population cross-covariance of X and y, ``xy / n`` (shape (d, P)).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.array([[1.0], [2.0], [4.0]]); y = np.array([2.0, 1.0, 6.0])
        >>> bool(np.isclose(sufficient_statistics(X, y).cov_xy[0, 0], np.cov(X[:, 0], y, bias=True)[0, 1]))
        True
        """
        return self.xy / self.n

    @property
    def var_y(self) -> np.ndarray:
        """Population variance of each output, ``diag(yy) / n`` (shape (P,)).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> y = np.array([2.0, 1.0, 6.0])
        >>> np.allclose(sufficient_statistics(np.ones((3, 1)), y).var_y, y.var())
        True
        """
        return np.diag(self.yy) / self.n

    @classmethod
    def empty(cls, d: int, p: int, *, releasable: bool = False) -> "SufficientStats":
        """Statistics of no rows (zeros), to merge chunks into; xx in releasable memory if asked.

        Examples
        --------
        >>> from edgeseq.train.linear.stats import SufficientStats
        >>> s = SufficientStats.empty(3, 1, releasable=True)
        >>> s.n, s.xx.shape, s.xx_storage is not None
        (0, (3, 3), True)
        """
        storage = ReleasableRows((d, d)) if releasable else None
        xx = storage.array if storage is not None else np.zeros((d, d))
        return cls(0, np.zeros(d), np.zeros(p), xx, np.zeros((d, p)), np.zeros((p, p)), xx_storage=storage)

    def xx_diagonal(self) -> np.ndarray:
        """The centred second moments of each column, ``diag(xx)`` (a view: no d × d work).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> sufficient_statistics(np.array([[0.0], [2.0]]), [0.0, 1.0]).xx_diagonal().tolist()
        [2.0]
        """
        return np.diag(self.xx)

    def merge(self, other: "SufficientStats") -> "SufficientStats":
        """Combine statistics of two disjoint row sets (Chan et al.'s parallel update).

        This is how chunks, files or machines are combined: exact, and stable because it never
        forms raw (uncentred) sums of squares.

        Parameters
        ----------
        other : SufficientStats
            Statistics of other rows with the same columns.

        Returns
        -------
        SufficientStats
            The statistics of both row sets together.

        Raises
        ------
        InputError
            If the two have different numbers of X columns or outputs.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(10, 3)); y = rng.normal(size=10)
        >>> both = sufficient_statistics(X[:4], y[:4]).merge(sufficient_statistics(X[4:], y[4:]))
        >>> whole = sufficient_statistics(X, y)
        >>> both.n, np.allclose(both.xx, whole.xx), np.allclose(both.xy, whole.xy)
        (10, True, True)
        """
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        out = SufficientStats(self.n, self.x_mean.copy(), self.y_mean.copy(), self.xx.copy(), self.xy.copy(),
                              self.yy.copy())
        return out.absorb(other)

    def absorb(self, other: "SufficientStats") -> "SufficientStats":
        """`merge` in place: add `other`'s rows into these arrays and return self.

        The chunked pass merges one chunk at a time; forming the merged d × d sums as new arrays held
        four or five d × d temporaries at once (gigabytes at ten thousand columns). Here the outer
        product is added a band of rows at a time, so the only d × d arrays are the two being merged.
        The arithmetic is the same, in the same order, as `merge`.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(10, 3)); y = rng.normal(size=10)
        >>> a = sufficient_statistics(X[:4], y[:4]); b = sufficient_statistics(X[4:], y[4:])
        >>> merged = a.merge(b)
        >>> a.absorb(b) is a, np.array_equal(a.xx, merged.xx), a.n
        (True, True, 10)
        """
        if other.n == 0:
            return self
        if self.n == 0:
            self.n, self.x_mean, self.y_mean = other.n, other.x_mean.copy(), other.y_mean.copy()
            self.xx, self.xy, self.yy = other.xx.copy(), other.xy.copy(), other.yy.copy()
            return self
        if self.x_mean.shape != other.x_mean.shape or self.y_mean.shape != other.y_mean.shape:
            raise InputError("cannot merge statistics of data with different numbers of columns")
        n = self.n + other.n
        dx = other.x_mean - self.x_mean
        dy = other.y_mean - self.y_mean
        f = self.n * other.n / n
        for acc, part, left, right in ((self.xx, other.xx, dx, dx), (self.xy, other.xy, dx, dy),
                                       (self.yy, other.yy, dy, dy)):
            acc += part
            add_outer(acc, left, right, f)
        self.n = n
        self.x_mean = self.x_mean + dx * (other.n / n)
        self.y_mean = self.y_mean + dy * (other.n / n)
        return self

    def without(self, part: "SufficientStats") -> "SufficientStats":
        """The statistics of these rows but `part`'s (`merge` solved for the rest; `part`'s rows must
        be some of these). One d × d pass, where merging the other parts would take one per part: a
        cross-validation fold's training statistics from all rows' and the fold's own.

        Parameters
        ----------
        part : SufficientStats
            Statistics of some of these rows, in the same columns.

        Returns
        -------
        SufficientStats
            The statistics of the other rows (a fresh object; these are not changed).

        Raises
        ------
        ValueError
            If `part` holds as many rows as these or more (no rows would be left).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(10, 3)) + 5.0; y = rng.normal(size=10)
        >>> rest = sufficient_statistics(X, y).without(sufficient_statistics(X[:3], y[:3]))
        >>> ref = sufficient_statistics(X[3:], y[3:])
        >>> rest.n, bool(np.allclose(rest.xx, ref.xx)), bool(np.allclose(rest.xy, ref.xy))
        (7, True, True)
        """
        r, x_rest, y_rest, dx, dy, f = rest_of(self, part)
        xx, xy, yy = self.xx - part.xx, self.xy - part.xy, self.yy - part.yy
        for acc, left, right in ((xx, dx, dx), (xy, dx, dy), (yy, dy, dy)):
            add_outer(acc, left, right, -f)
        return SufficientStats(r, x_rest, y_rest, xx, xy, yy)

    def take(self, idx) -> "SufficientStats":
        """Statistics of a subset (or reordering) of the columns: they are just the matching entries.

        Parameters
        ----------
        idx : array-like of int
            Column indices of X, in the order wanted.

        Returns
        -------
        SufficientStats

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(6, 3)); y = rng.normal(size=6)
        >>> sub = sufficient_statistics(X, y).take([2, 0])
        >>> np.allclose(sub.xx, sufficient_statistics(X[:, [2, 0]], y).xx)
        True
        """
        idx = np.asarray(idx, dtype=np.int64)
        return SufficientStats(n=self.n, x_mean=self.x_mean[idx], y_mean=self.y_mean,
                               xx=self.xx[np.ix_(idx, idx)], xy=self.xy[idx], yy=self.yy)

    def fingerprint(self) -> str:
        """Short hash of the statistics: identifies the training data without storing it.

        Returns
        -------
        str
            16 hexadecimal characters of a SHA-256 over n, the means and the co-moments.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.array([[1.0, 2.0], [3.0, 1.0]]); y = np.array([0.0, 1.0])
        >>> a = sufficient_statistics(X, y).fingerprint()
        >>> len(a), a == sufficient_statistics(X.copy(), y).fingerprint(), a == sufficient_statistics(X, 1 - y).fingerprint()
        (16, True, False)
        """
        return fingerprint_of(self.n, (self.x_mean, self.y_mean, self.xx, self.xy, self.yy))


def rest_of(total, part) -> tuple:
    """Chan's merge solved for the rows of `total` that are not `part`'s: (their count, their X and
    y means, the part's mean minus theirs for X and y, and the weight f = r·m/n of the outer products
    to take out of the co-moment sums). Shared by `SufficientStats.without` and
    `edgeseq.train.linear.group_stats.without_rows`.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.array([[0.0], [2.0], [4.0], [6.0]]); y = np.zeros(4)
    >>> r, x_rest, _, dx, _, f = rest_of(sufficient_statistics(X, y), sufficient_statistics(X[:1], y[:1]))
    >>> r, x_rest.tolist(), dx.tolist(), f
    (3, [4.0], [-4.0], 0.75)
    """
    n, m = total.n, part.n
    r = n - m
    if r <= 0:
        raise ValueError(f"cannot take {m} rows out of {n}")
    x_rest, y_rest = (n * total.x_mean - m * part.x_mean) / r, (n * total.y_mean - m * part.y_mean) / r
    return r, x_rest, y_rest, part.x_mean - x_rest, part.y_mean - y_rest, r * m / n


def fingerprint_of(n: int, arrays) -> str:
    """16 hexadecimal characters of a SHA-256 over a row count and float64 arrays (their buffers).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import fingerprint_of
    >>> a = fingerprint_of(3, [np.zeros(2)])
    >>> len(a), a == fingerprint_of(4, [np.zeros(2)])
    (16, False)
    """
    h = hashlib.sha256()
    h.update(np.int64(n).tobytes())
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64))  # its buffer: the same bytes, no copy
    return h.hexdigest()[:16]


def as_2d_y(y, n_rows: int | None = None) -> np.ndarray:
    """y as float64 (n, P), checked against the row count of X.

    Parameters
    ----------
    y : array-like
        1-D (one output) or 2-D targets.
    n_rows : int, optional
        Row count of X, if it should be checked.

    Returns
    -------
    numpy.ndarray
        Shape (n, P).

    Raises
    ------
    InputError
        If y has more than two dimensions or the wrong number of rows.

    Examples
    --------
    >>> from edgeseq.train.linear.stats import as_2d_y
    >>> as_2d_y([1, 2, 3]).shape
    (3, 1)
    >>> as_2d_y([1, 2], n_rows=3)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: X has 3 rows but y has 2; they must match
    """
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2:
        raise InputError(f"y must be 1-D or 2-D, got shape {y.shape}")
    if n_rows is not None and y.shape[0] != n_rows:
        raise InputError(f"X has {n_rows} rows but y has {y.shape[0]}; they must match")
    return y


def default_chunk_rows(d: int, p: int = 1) -> int:
    """Rows per chunk of the statistics pass over an array: about 64 MiB, but never fewer than d / 2.

    Why the floor: besides its products (rows · d² multiply-adds), every chunk costs a few passes over
    d × d arrays -- its own Gram is allocated, centred by a rank-one term and merged into the total.
    At ten thousand columns a 64 MiB chunk is only ~760 rows, and those d² passes made the statistics
    pass 1.8x a bare Gram; with at least d / 2 rows they are amortised over d / 2 rows of products
    (measured 1.04x at n = 5,000, D = 11,016). The chunk itself is a view of X, so the floor costs
    memory only where a chunk must be copied (float32 input, scattered columns, the exact path).

    Examples
    --------
    >>> from edgeseq.train.linear.stats import default_chunk_rows
    >>> default_chunk_rows(63), default_chunk_rows(11016, 10)
    (131072, 5508)
    """
    return max(1, _CHUNK_BYTES // (8 * max(1, d + p)), (d + 1) // 2)


def iter_array_chunks(X, y, chunk_rows: int | None):
    """(X rows, y rows) views of an array X, a bounded number of bytes at a time.

    Parameters
    ----------
    X : numpy.ndarray
        2-D array (a memmap is read chunk by chunk).
    y : array-like
        Targets, 1-D or 2-D.
    chunk_rows : int or None
        Rows per chunk; None picks `default_chunk_rows`.

    Yields
    ------
    tuple of numpy.ndarray
        ``(X[start:stop], y2[start:stop])`` with y as 2-D.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import iter_array_chunks
    >>> [(xc.shape, yc.shape) for xc, yc in iter_array_chunks(np.zeros((5, 2)), np.zeros(5), 2)]
    [((2, 2), (2, 1)), ((2, 2), (2, 1)), ((1, 2), (1, 1))]
    """
    n, d = X.shape
    y2 = as_2d_y(y, n)
    rows = chunk_rows or default_chunk_rows(d, y2.shape[1])
    for start in range(0, n, rows):
        yield X[start:start + rows], y2[start:start + rows]


def sufficient_statistics(data, y=None, *, columns=None, chunk_rows: int | None = None,
                          progress=None) -> SufficientStats:
    """Means and centred co-moments of X[:, columns] and y in one chunked pass.

    `data` is either an array-like X (ndarray or np.memmap; rows are read `chunk_rows` at a time and
    used in place, so memory stays O(d²) plus one chunk) together with `y`, or an iterable of
    `(X_chunk, y_chunk)` pairs (then `y` must be None) for data that does not fit in memory or arrives
    in pieces. Non-finite values are detected and reported by column. `progress` (a callable taking
    one line of text) hears about every tenth of the rows of an array X, or about every chunk of an
    iterable.

    Parameters
    ----------
    data : array-like or iterable of (X_chunk, y_chunk)
        The feature matrix, or chunks of rows with their targets.
    y : array-like, optional
        Targets when `data` is an array; must be None for an iterable.
    columns : array-like of int, optional
        Only these columns of X (in this order); all columns if None.
    chunk_rows : int, optional
        Rows read at a time from an array X.
    progress : callable, optional
        Receives one line of text now and then.

    Returns
    -------
    SufficientStats

    Raises
    ------
    InputError
        On no rows, mismatched shapes or non-finite values (naming the columns).

    Examples
    --------
    An array and the same rows as chunks give the same statistics:

    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(1); X = rng.normal(size=(9, 3)); y = rng.normal(size=9)
    >>> a = sufficient_statistics(X, y, columns=[0, 2])
    >>> b = sufficient_statistics(((X[i:i + 4], y[i:i + 4]) for i in range(0, 9, 4)), columns=[0, 2])
    >>> np.allclose(a.xx, b.xx), np.allclose(a.x_mean, X[:, [0, 2]].mean(axis=0))
    (True, True)
    >>> sufficient_statistics(np.array([[1.0], [np.nan]]), [0.0, 1.0])
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: X contains NaN or Inf (or values too large to square) in column(s) [0]; clean or impute them first
    """
    if y is not None:
        X = data
        if not hasattr(X, "shape") or len(X.shape) != 2:
            X = np.asarray(X)
        if X.ndim != 2:
            raise InputError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
        chunks: Iterable = iter_array_chunks(X, y, chunk_rows)
    else:
        chunks = data
    cols = None if columns is None else np.asarray(columns, dtype=np.int64)
    on_chunk = None if progress is None else _row_reporter(progress, X.shape[0] if y is not None else None)
    total, ref = shifted_statistics(chunks, cols, on_chunk=on_chunk)
    if total is None:
        raise InputError("no data: X has no rows")
    return finish_statistics(total, ref, cols)


def _row_reporter(progress, n_rows: int | None):
    """on_chunk callback: a line per tenth of `n_rows` (or per chunk when the total is unknown)."""
    seen = [0, 0]  # rows so far, tenths reported

    def on_chunk(rows: int) -> None:
        seen[0] += rows
        if n_rows is None:
            progress(f"statistics: {seen[0]:,} rows")
        elif seen[0] * 10 // n_rows > seen[1]:
            seen[1] = seen[0] * 10 // n_rows
            progress(f"statistics: {seen[0]:,}/{n_rows:,} rows")
    return on_chunk


def shifted_statistics(chunks: Iterable, cols=None, ref: Reference | None = None, *, fast: bool = True,
                       what: str = "chunk", first: int = 0, on_chunk=None):
    """Merge the chunks' statistics in the frame shifted by `ref` (chosen from the first chunk if None).

    Returns (statistics or None when there were no rows, reference): the partial result a worker sends
    to a reduction. `what`/`first` name the pieces in error messages; `on_chunk(rows)` is told each
    chunk's row count (progress).

    The shift (a reference row near the data) keeps the co-moments accurate when the means are large
    compared with the spread; `finish_statistics` undoes it.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import shifted_statistics, finish_statistics, sufficient_statistics
    >>> rng = np.random.default_rng(2); X = rng.normal(size=(8, 2)) + 1e6; y = rng.normal(size=8)
    >>> part, ref = shifted_statistics([(X[:5], y[:5]), (X[5:], y[5:])])
    >>> np.allclose(finish_statistics(part, ref).xx, sufficient_statistics(X, y).xx)
    True
    >>> shifted_statistics([])
    (None, None)
    """
    view, take = _column_plan(cols)
    total: SufficientStats | None = None
    n_cols = None
    lower_only = False
    for i, pair in enumerate(chunks, start=first):
        try:
            xc, yc = pair
        except (TypeError, ValueError) as exc:
            raise InputError(f"{what} {i} must be an (X_chunk, y_chunk) pair") from exc
        xc = _as_2d_chunk(xc, f"{what} {i}")
        if n_cols is None:
            n_cols = xc.shape[1]
            if cols is not None and cols.size and not (0 <= cols.min() and cols.max() < n_cols):
                raise InputError(f"columns must be indices in 0..{n_cols - 1}")
        elif xc.shape[1] != n_cols:
            raise InputError(f"{what} {i} has {xc.shape[1]} columns, earlier {what}s had {n_cols}")
        if xc.shape[0] == 0:
            continue
        xc = np.asarray(view(xc), dtype=np.float64)  # a view when possible; float32 input is widened here
        yc = as_2d_y(yc, xc.shape[0])
        if total is not None and yc.shape[1] != total.y_mean.shape[0]:
            raise InputError(f"{what} {i}: y has {yc.shape[1]} outputs, earlier {what}s had "
                             f"{total.y_mean.shape[0]}")
        if ref is None:
            ref = Reference.from_probe(xc, yc)
        if total is None and fast and xc.shape[1] >= RELEASABLE_MIN_COLUMNS:
            total = SufficientStats.empty(xc.shape[1], yc.shape[1], releasable=True)
        if total is not None and fast and absorb_chunk(total, xc, yc, ref):
            lower_only = True  # the chunk's products went into total's lower triangle only
        else:
            part = SufficientStats(*chunk_moments(xc, yc, ref, fast=fast))
            # (an empty releasable total that this chunk could not be merged into is dropped unused)
            total = part if total is None or total.n == 0 else total.absorb(part)  # in place: no d × d temporaries
            del part  # else the last chunk's d × d Gram stays alive while the next one is computed
        if on_chunk is not None:
            on_chunk(xc.shape[0])
    if lower_only:
        mirror_lower(total.xx)
    if total is not None and take is not None:
        total = total.take(take)
        ref = ref.take(take)
    return total, ref


def probe_reference(xc, yc, cols=None) -> Reference:
    """The frame `shifted_statistics` would choose from this first chunk (for passes split over workers).

    Every worker must shift by the same reference for their partial statistics to merge, so the
    reference is chosen once from the first chunk and handed out.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import probe_reference, shifted_statistics
    >>> rng = np.random.default_rng(3); X = rng.normal(size=(6, 2)); y = rng.normal(size=6)
    >>> ref = probe_reference(X, y)
    >>> _, chosen = shifted_statistics([(X, y)])
    >>> np.array_equal(ref.x_shift, chosen.x_shift)
    True
    """
    view, _ = _column_plan(cols)
    xc = _as_2d_chunk(xc, "chunk 0")
    yc = as_2d_y(yc, xc.shape[0])[:PROBE_ROWS]
    return Reference.from_probe(np.asarray(view(xc[:PROBE_ROWS]), dtype=np.float64), yc)


def columns_reference(ref: Reference, cols=None) -> Reference:
    """`probe_reference`'s frame expressed on `cols` in their order (what `finish_statistics` needs).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import probe_reference, columns_reference
    >>> rng = np.random.default_rng(3); X = rng.normal(size=(6, 4)); y = rng.normal(size=6)
    >>> cols = np.array([3, 1])
    >>> ref = columns_reference(probe_reference(X, y, cols), cols)
    >>> ref.x_shift.shape
    (2,)
    >>> columns_reference(ref) is ref
    True
    """
    _, take = _column_plan(cols)
    return ref if take is None else ref.take(take)


def finish_statistics(total: SufficientStats, ref: Reference, cols=None) -> SufficientStats:
    """Leave the shifted frame (add the reference back to the means) and check every value is finite.

    Parameters
    ----------
    total : SufficientStats
        Merged statistics in the shifted frame.
    ref : Reference
        The shift they were computed in.
    cols : numpy.ndarray, optional
        Column indices, only to name bad columns in the error.

    Raises
    ------
    InputError
        If any column of X or y had a NaN or Inf.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import shifted_statistics, finish_statistics
    >>> X = np.array([[10.0], [12.0]]); y = np.array([1.0, 3.0])
    >>> s = finish_statistics(*shifted_statistics([(X, y)]))
    >>> float(s.x_mean[0]), float(s.y_mean[0])
    (11.0, 2.0)
    """
    total = SufficientStats(n=total.n, x_mean=total.x_mean + ref.x_shift, y_mean=total.y_mean + ref.y_ref,
                            xx=total.xx, xy=total.xy, yy=total.yy, xx_storage=total.xx_storage)
    _check_finite(total, cols)
    return total


def _as_2d_chunk(xc, where: str) -> np.ndarray:
    if not hasattr(xc, "shape") or not hasattr(xc, "dtype"):
        xc = np.asarray(xc)
    if len(xc.shape) != 2:
        raise InputError(f"{where}: X must be 2-D, got shape {xc.shape}")
    if not np.issubdtype(xc.dtype, np.number) or np.issubdtype(xc.dtype, np.complexfloating):
        raise InputError(f"X must be real numbers, got dtype {xc.dtype}")
    return xc


def _column_plan(cols):
    """How to read `cols` from a chunk: a slice view of their span, then pick the entries (no row copy).

    A span much wider than the columns used would waste Gram work, so then the columns are copied.
    Returns (chunk -> array, indices to take from the span's statistics or None).
    """
    if cols is None or cols.size == 0:
        return (lambda xc: xc if cols is None else xc[:, cols]), None
    lo, hi = int(cols.min()), int(cols.max()) + 1
    if np.array_equal(cols, np.arange(lo, hi)):
        return (lambda xc: xc[:, lo:hi]), None
    if 2 * cols.size * cols.size >= (hi - lo) ** 2:
        return (lambda xc: xc[:, lo:hi]), cols - lo
    return (lambda xc: xc[:, cols]), None


def _check_finite(s: SufficientStats, cols) -> None:
    """A NaN/Inf anywhere in a column makes that column's mean or variance non-finite."""
    bad_x = ~(np.isfinite(s.x_mean) & np.isfinite(np.diag(s.xx)))
    if bad_x.any():
        where = np.nonzero(bad_x)[0]
        names = where if cols is None else cols[where]
        raise InputError(f"X contains NaN or Inf (or values too large to square) in column(s) "
                         f"{names[:10].tolist()}{' ...' if len(names) > 10 else ''}; clean or impute them first")
    if not (np.all(np.isfinite(s.y_mean)) and np.all(np.isfinite(np.diag(s.yy)))):
        raise InputError("y contains NaN or Inf; every target must be a finite number")
