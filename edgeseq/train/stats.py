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

_CHUNK_BYTES = 64 * 2**20  # bound on the working copy of one chunk


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

    def fingerprint(self) -> str:
        """Short hash of the statistics: identifies the training data without storing it."""
        h = hashlib.sha256()
        h.update(np.int64(self.n).tobytes())
        for a in (self.x_mean, self.y_mean, self.xx, self.xy, self.yy):
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
        return h.hexdigest()[:16]


def _chunk_stats(xc: np.ndarray, yc: np.ndarray) -> SufficientStats:
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite input is reported by column later
        return _chunk_stats_raw(xc, yc)


def _chunk_stats_raw(xc: np.ndarray, yc: np.ndarray) -> SufficientStats:
    n = xc.shape[0]
    mx = xc.mean(axis=0)
    my = yc.mean(axis=0)
    xc = xc - mx
    yc = yc - my
    return SufficientStats(n=n, x_mean=mx, y_mean=my, xx=xc.T @ xc, xy=xc.T @ yc, yy=yc.T @ yc)


def _as_2d_y(y, n_rows: int | None = None) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2:
        raise InputError(f"y must be 1-D or 2-D, got shape {y.shape}")
    if n_rows is not None and y.shape[0] != n_rows:
        raise InputError(f"X has {n_rows} rows but y has {y.shape[0]}; they must match")
    return y


def _iter_array_chunks(X, y, chunk_rows: int | None):
    n, d = X.shape
    y2 = _as_2d_y(y, n)
    rows = chunk_rows or max(1, _CHUNK_BYTES // (8 * max(1, d + y2.shape[1])))
    for start in range(0, n, rows):
        yield X[start:start + rows], y2[start:start + rows]


def sufficient_statistics(data, y=None, *, columns=None, chunk_rows: int | None = None) -> SufficientStats:
    """Means and centred co-moments of X[:, columns] and y in one chunked pass.

    `data` is either an array-like X (ndarray or np.memmap; rows are read `chunk_rows` at a time, so
    memory stays O(d²) plus one chunk) together with `y`, or an iterable of `(X_chunk, y_chunk)`
    pairs (then `y` must be None) for data that does not fit in memory or arrives in pieces.
    Non-finite values are detected and reported by column.
    """
    if y is not None:
        X = data
        if not hasattr(X, "shape") or len(X.shape) != 2:
            X = np.asarray(X)
        if X.ndim != 2:
            raise InputError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
        chunks: Iterable = _iter_array_chunks(X, y, chunk_rows)
    else:
        chunks = data
    cols = None if columns is None else np.asarray(columns, dtype=np.int64)
    total: SufficientStats | None = None
    n_cols = None
    for i, pair in enumerate(chunks):
        try:
            xc, yc = pair
        except (TypeError, ValueError) as exc:
            raise InputError(f"chunk {i} must be an (X_chunk, y_chunk) pair") from exc
        xc = np.asarray(xc)
        if xc.ndim != 2:
            raise InputError(f"chunk {i}: X must be 2-D, got shape {xc.shape}")
        if n_cols is None:
            n_cols = xc.shape[1]
        elif xc.shape[1] != n_cols:
            raise InputError(f"chunk {i} has {xc.shape[1]} columns, earlier chunks had {n_cols}")
        if xc.shape[0] == 0:
            continue
        if cols is not None:
            xc = xc[:, cols]
        if not np.issubdtype(xc.dtype, np.number) or np.iscomplexobj(xc):
            raise InputError(f"X must be real numbers, got dtype {xc.dtype}")
        yc = _as_2d_y(yc, xc.shape[0])
        part = _chunk_stats(np.asarray(xc, dtype=np.float64), yc)
        if total is not None and part.y_mean.shape != total.y_mean.shape:
            raise InputError(f"chunk {i}: y has {part.y_mean.shape[0]} outputs, earlier chunks had "
                             f"{total.y_mean.shape[0]}")
        total = part if total is None else total.merge(part)
    if total is None:
        raise InputError("no data: X has no rows")
    _check_finite(total, cols)
    return total


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
