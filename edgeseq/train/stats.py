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
from edgeseq.train.chunk_moments import PROBE_ROWS, Reference, chunk_moments

_CHUNK_BYTES = 64 * 2**20  # bound on the rows read at a time (the chunk itself is used in place)


@dataclass
class SufficientStats:
    """Counts, means and centred co-moment sums of the used columns of X and of y."""

    n: int
    x_mean: np.ndarray  # (d,)
    y_mean: np.ndarray  # (P,)
    xx: np.ndarray  # (d, d)  sum of centred x xᵀ (divide by n for the covariance)
    xy: np.ndarray  # (d, P)
    yy: np.ndarray  # (P, P)

    @property
    def cov_xx(self) -> np.ndarray:
        return self.xx / self.n

    @property
    def cov_xy(self) -> np.ndarray:
        return self.xy / self.n

    @property
    def var_y(self) -> np.ndarray:
        return np.diag(self.yy) / self.n

    def merge(self, other: "SufficientStats") -> "SufficientStats":
        """Combine statistics of two disjoint row sets (Chan et al.'s parallel update)."""
        if other.n == 0:
            return self
        if self.n == 0:
            return other
        if self.x_mean.shape != other.x_mean.shape or self.y_mean.shape != other.y_mean.shape:
            raise InputError("cannot merge statistics of data with different numbers of columns")
        n = self.n + other.n
        dx = other.x_mean - self.x_mean
        dy = other.y_mean - self.y_mean
        f = self.n * other.n / n
        return SufficientStats(
            n=n,
            x_mean=self.x_mean + dx * (other.n / n),
            y_mean=self.y_mean + dy * (other.n / n),
            xx=self.xx + other.xx + f * np.outer(dx, dx),
            xy=self.xy + other.xy + f * np.outer(dx, dy),
            yy=self.yy + other.yy + f * np.outer(dy, dy),
        )

    def take(self, idx) -> "SufficientStats":
        """Statistics of a subset (or reordering) of the columns: they are just the matching entries."""
        idx = np.asarray(idx, dtype=np.int64)
        return SufficientStats(n=self.n, x_mean=self.x_mean[idx], y_mean=self.y_mean,
                               xx=self.xx[np.ix_(idx, idx)], xy=self.xy[idx], yy=self.yy)

    def fingerprint(self) -> str:
        """Short hash of the statistics: identifies the training data without storing it."""
        h = hashlib.sha256()
        h.update(np.int64(self.n).tobytes())
        for a in (self.x_mean, self.y_mean, self.xx, self.xy, self.yy):
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
        return h.hexdigest()[:16]


def as_2d_y(y, n_rows: int | None = None) -> np.ndarray:
    """y as float64 (n, P), checked against the row count of X."""
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2:
        raise InputError(f"y must be 1-D or 2-D, got shape {y.shape}")
    if n_rows is not None and y.shape[0] != n_rows:
        raise InputError(f"X has {n_rows} rows but y has {y.shape[0]}; they must match")
    return y


def iter_array_chunks(X, y, chunk_rows: int | None):
    """(X rows, y rows) views of an array X, a bounded number of bytes at a time."""
    n, d = X.shape
    y2 = as_2d_y(y, n)
    rows = chunk_rows or max(1, _CHUNK_BYTES // (8 * max(1, d + y2.shape[1])))
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
    """
    view, take = _column_plan(cols)
    total: SufficientStats | None = None
    n_cols = None
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
        part = SufficientStats(*chunk_moments(xc, yc, ref, fast=fast))
        total = part if total is None else total.merge(part)
        if on_chunk is not None:
            on_chunk(xc.shape[0])
    if total is not None and take is not None:
        total = total.take(take)
        ref = ref.take(take)
    return total, ref


def probe_reference(xc, yc, cols=None) -> Reference:
    """The frame `shifted_statistics` would choose from this first chunk (for passes split over workers)."""
    view, _ = _column_plan(cols)
    xc = _as_2d_chunk(xc, "chunk 0")
    yc = as_2d_y(yc, xc.shape[0])[:PROBE_ROWS]
    return Reference.from_probe(np.asarray(view(xc[:PROBE_ROWS]), dtype=np.float64), yc)


def columns_reference(ref: Reference, cols=None) -> Reference:
    """`probe_reference`'s frame expressed on `cols` in their order (what `finish_statistics` needs)."""
    _, take = _column_plan(cols)
    return ref if take is None else ref.take(take)


def finish_statistics(total: SufficientStats, ref: Reference, cols=None) -> SufficientStats:
    """Leave the shifted frame (add the reference back to the means) and check every value is finite."""
    total = SufficientStats(n=total.n, x_mean=total.x_mean + ref.x_shift, y_mean=total.y_mean + ref.y_ref,
                            xx=total.xx, xy=total.xy, yy=total.yy)
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
