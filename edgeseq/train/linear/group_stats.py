"""Within-group statistics only: what the GLM selections that never compare two groups need.

Why this module exists: CS-G-OMP (and ``gomp``, ``single``) score a group by its own whitened
gradient, and the refit of a prefix converges to the same optimum whatever it is preconditioned
with; the cross-group blocks of the Gram are read by nothing else. Yet the full Gram of the used
columns costs n·D² multiply-adds and a D × D array: at the thesis's MNIST shape (60,000 rows,
11,016 columns in 54 groups) that is most of an OMP fit and a gigabyte twice over (the pass's total
and its chunk). The within-group blocks cost n·Σ d_g² -- 54 times less there -- and a few megabytes.
CS-G-FR needs the cross blocks (its score is a Schur complement against the selected groups), so it
keeps the full statistics (`edgeseq.train.linear.stats.sufficient_statistics`).

Each group's statistics are the full statistics of its own columns, computed by the same chunked,
offset-safe pass (`sufficient_statistics` with ``columns=``), so every number here is bit for bit the
one the full pass computes for that block's columns, and a non-finite value is reported by its raw
column index exactly as there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgeseq.train.linear.stats import SufficientStats, fingerprint_of, rest_of, sufficient_statistics


@dataclass
class GroupBlockStats:
    """Means, within-group centred co-moments and target co-moments of the used columns.

    The layout is the full statistics' (used columns group after group), minus every cross-group
    block: ``blocks[g]`` is what ``SufficientStats.xx`` holds on group g's diagonal block.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.group_stats import group_block_statistics
    >>> from edgeseq.train.linear.stats import SufficientStats, fingerprint_of, rest_of, sufficient_statistics
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(30, 5)); y = rng.normal(size=30)
    >>> blocks = group_block_statistics(X, y, [[3, 4], [0, 1, 2]])
    >>> full = sufficient_statistics(X, y, columns=[3, 4, 0, 1, 2])
    >>> bool(np.allclose(blocks.blocks[1], full.xx[2:, 2:])), bool(np.allclose(blocks.xy, full.xy))
    (True, True)
    """

    n: int
    x_mean: np.ndarray  # (d,) used columns, group after group
    y_mean: np.ndarray  # (P,)
    blocks: list[np.ndarray]  # per group (d_g, d_g) centred co-moments
    xy: np.ndarray  # (d, P)
    yy: np.ndarray  # (P, P)

    var_y = SufficientStats.var_y  # the same definitions: they read only n, xy and yy
    cov_xy = SufficientStats.cov_xy

    def xx_diagonal(self) -> np.ndarray:
        """The centred second moments of the used columns (the full Gram's diagonal).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.group_stats import group_block_statistics
        >>> X = np.array([[0.0, 1.0], [2.0, 1.0]])
        >>> group_block_statistics(X, [0.0, 1.0], [[1], [0]]).xx_diagonal().tolist()
        [0.0, 2.0]
        """
        return np.concatenate([np.diag(b) for b in self.blocks]) if self.blocks else np.zeros(0)

    def fingerprint(self) -> str:
        """Short hash identifying the training data (over n, the means and the co-moments kept here).

        It differs from the full statistics' fingerprint of the same data (fewer co-moments go in),
        which is right: a provenance records what the fit was computed from.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.group_stats import group_block_statistics
        >>> X = np.random.default_rng(0).normal(size=(10, 2))
        >>> a = group_block_statistics(X, X[:, 0], [[0], [1]]).fingerprint()
        >>> len(a), a == group_block_statistics(X, X[:, 1], [[0], [1]]).fingerprint()
        (16, False)
        """
        return fingerprint_of(self.n, (self.x_mean, self.y_mean, *self.blocks, self.xy, self.yy))


def group_block_statistics(X, y, column_groups, *, progress=None) -> GroupBlockStats:
    """Within-group statistics of `column_groups` (lists of raw column indices), one pass per group.

    Each pass reads only its group's columns of every row (a view of the chunk; nothing of X is
    copied), so all the passes together read X about once.

    Parameters
    ----------
    X : array (n, D)
    y : array (n,) or (n, P)
    column_groups : sequence of sequences of int
        The used columns, group by group, in the order the working problem lays them out.
    progress : callable, optional
        Receives one line of text per tenth of the groups.

    Returns
    -------
    GroupBlockStats

    Raises
    ------
    InputError
        As `sufficient_statistics`: no rows, mismatched shapes, non-finite values (by raw column).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.group_stats import group_block_statistics
    >>> X = np.array([[1.0, np.nan], [2.0, 0.0]])
    >>> group_block_statistics(X, [0.0, 1.0], [[0], [1]])
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: X contains NaN or Inf (or values too large to square) in column(s) [1]; clean or impute them first
    """
    parts = []
    every = max(1, len(column_groups) // 10)
    for g, cols in enumerate(column_groups):
        parts.append(sufficient_statistics(X, y, columns=np.asarray(cols, dtype=np.int64)))
        if progress is not None and ((g + 1) % every == 0 or g + 1 == len(column_groups)):
            progress(f"within-group statistics: {g + 1} of {len(column_groups)} groups")
    if not parts:
        empty = sufficient_statistics(X, y, columns=np.zeros(0, dtype=np.int64))
        return GroupBlockStats(empty.n, empty.x_mean, empty.y_mean, [], empty.xy, empty.yy)
    first = parts[0]  # every pass computed the target's moments from the same chunks: identical
    return GroupBlockStats(first.n, np.concatenate([p.x_mean for p in parts]), first.y_mean,
                           [p.xx for p in parts], np.vstack([p.xy for p in parts]), first.yy)


def without_rows(total: GroupBlockStats, part: GroupBlockStats) -> GroupBlockStats:
    """The statistics of `total`'s rows that are not `part`'s (`SufficientStats.without` for blocks).

    `part`'s rows must be some of `total`'s. This is how a cross-validation fold gets a working
    basis built without the rows it is scored on (`edgeseq.train.linear.auto.choose_glm`): from the
    statistics of all rows, which the fit has anyway, and those of the scored rows alone.

    Parameters
    ----------
    total : GroupBlockStats
        Statistics of all rows.
    part : GroupBlockStats
        Statistics of some of those rows, in the same columns and groups.

    Returns
    -------
    GroupBlockStats
        The statistics of the other rows.

    Raises
    ------
    ValueError
        If `part` holds as many rows as `total` or more.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.group_stats import group_block_statistics, without_rows
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(30, 5)) + 3.0; y = rng.normal(size=30)
    >>> cols = [[0, 1], [2, 3, 4]]
    >>> rest = without_rows(group_block_statistics(X, y, cols), group_block_statistics(X[:8], y[:8], cols))
    >>> ref = group_block_statistics(X[8:], y[8:], cols)
    >>> rest.n, all(np.allclose(a, b) for a, b in zip(rest.blocks, ref.blocks)), bool(np.allclose(rest.xy, ref.xy))
    (22, True, True)
    """
    r, x_rest, y_rest, dx, dy, f = rest_of(total, part)
    blocks, a = [], 0
    for B, P in zip(total.blocks, part.blocks):
        d = dx[a:a + B.shape[0]]
        blocks.append(B - P - f * np.outer(d, d))
        a += B.shape[0]
    return GroupBlockStats(r, x_rest, y_rest, blocks, total.xy - part.xy - f * np.outer(dx, dy),
                           total.yy - part.yy - f * np.outer(dy, dy))


__all__ = ["GroupBlockStats", "group_block_statistics", "without_rows"]
