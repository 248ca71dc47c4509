"""The statistics pass over a row-chunked ``dask.array``: one task per partition, a tree of merges.

Why: squared-loss training needs only the sufficient statistics, and statistics of disjoint row sets
merge exactly (Chan's update, :meth:`SufficientStats.merge`). So each worker reduces the partitions
it holds to D×D numbers, and only those travel: no row leaves its worker. Partial results are merged
pairwise (a tree of depth ⌈log2 P⌉ over P partitions), on the workers as well.

The per-column reference that keeps the pass copy-free and exact with large offsets
(:mod:`edgeseq.train.linear.chunk_moments`) is chosen on the worker holding partition 0 and sent to every
partition task (2·D numbers), so all partitions share one frame, exactly as the in-memory pass does.

Where it runs: the `client` given, else the active ``distributed`` client, else (no cluster at all)
partition by partition in this process through dask's own scheduler. Dask is an optional extra:
this module imports it only when a dask array is actually passed.
"""

from __future__ import annotations

import numpy as np

from edgeseq.errors import InputError
from edgeseq.train.linear.chunk_moments import Reference
from edgeseq.train.linear.stats import (SufficientStats, as_2d_y, iter_array_chunks, columns_reference,
                                 finish_statistics, probe_reference, shifted_statistics)


def is_dask_array(X) -> bool:
    """True for a ``dask.array.Array`` (checked without importing dask).

    Not importing dask keeps the check free for users who do not have the extra installed.

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> from edgeseq.train.distributed.stats import is_dask_array
    >>> is_dask_array(da.zeros((4, 2), chunks=2)), is_dask_array(np.zeros((4, 2)))
    (True, False)
    """
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "chunks") and hasattr(X, "to_delayed")


def _require_dask():
    try:
        import dask  # noqa: F401
        import dask.array  # noqa: F401
    except ImportError as exc:  # pragma: no cover - only without the extra
        raise InputError("fitting a dask array needs the optional extra: pip install 'edgeseq[dask]'") from exc


def active_client(client):
    """The client to run on: the one given, else the active distributed client, else None.

    Every cluster path (statistics, GLM passes) picks its place with this one rule.

    Examples
    --------
    >>> from edgeseq.train.distributed.stats import active_client
    >>> given = object()
    >>> active_client(given) is given
    True
    """
    if client is not None:
        return client
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):  # no distributed installed, or no client started
        return None


def check_dask_X(X) -> tuple[int, int]:
    """Shape checks a dask array needs before any task runs: 2-D, real numbers, known row chunks.

    Returns
    -------
    tuple of int
        (n rows, D columns).

    Raises
    ------
    InputError
        If X is not 2-D, not real numbers, has unknown chunk sizes or fewer than 2 rows.

    Examples
    --------
    >>> import dask.array as da
    >>> from edgeseq.train.distributed.stats import check_dask_X
    >>> check_dask_X(da.zeros((10, 3), chunks=(4, 3)))
    (10, 3)
    >>> check_dask_X(da.zeros(10, chunks=4))
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: ...
    """
    if X.ndim != 2:
        raise InputError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise InputError(f"X must be real numbers, got dtype {X.dtype}")
    if any(np.isnan(c) for c in X.chunks[0]):
        raise InputError("X has partitions of unknown length (e.g. from a dask DataFrame); call "
                         "X.compute_chunk_sizes() first")
    n, d = (int(s) for s in X.shape)
    if n < 2:
        raise InputError(f"n_samples={n}: need at least 2 samples to fit")
    return n, d


def row_blocks(X, y, y_of=as_2d_y):
    """One (source, first row, length) per row partition; the source is the pair of delayed blocks.

    X's column chunks are joined (every pass needs whole rows) and y is split like X's rows; an
    in-memory y is first checked and shaped by ``y_of(y, n_rows)`` (float targets by default, class
    labels for a classifier).

    Returns
    -------
    tuple
        (list of ((X block, y block), first row, rows), number of columns)

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> from edgeseq.train.distributed.stats import row_blocks
    >>> blocks, d = row_blocks(da.zeros((5, 3), chunks=(2, 2)), np.arange(5.0))
    >>> [(start, rows) for _, start, rows in blocks], d
    ([(0, 2), (2, 2), (4, 1)], 3)
    """
    import dask.array as da

    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # one block per row partition: the Gram needs whole rows
    if is_dask_array(y):
        if y.shape[0] != X.shape[0]:
            raise InputError(f"X has {X.shape[0]} rows but y has {y.shape[0]}; they must match")
        y = y.rechunk((X.chunks[0],) + tuple((s,) for s in y.shape[1:]))
    else:
        y = y_of(y, X.shape[0])
        y = da.from_array(y, chunks=(X.chunks[0],) + y.shape[1:])
    xs = X.to_delayed().ravel()
    ys = y.to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(int)
    return list(zip(zip(xs, ys), starts.tolist(), [int(c) for c in X.chunks[0]])), int(X.shape[1])


def _open(source):
    """A partition's rows: a loader (called here, on the worker) or an (X block, y block) pair."""
    return source() if callable(source) else source


def _probe(source, cols, d: int, name: str) -> Reference:
    """Runs where partition 0 lives: only the chosen shift (2·D numbers) comes back."""
    xb, yb = _open(source)
    xb = np.asarray(xb)
    _check_block_shape(xb, name, d, None)
    return probe_reference(xb, yb, cols)


def _check_block_shape(xb, k: str, d: int, rows: int | None) -> None:
    if xb.ndim != 2 or xb.shape[1] != d:
        raise InputError(f"{k} has shape {xb.shape}: expected {d} columns like the others")
    if rows is not None and xb.shape[0] != rows:
        raise InputError(f"{k} has {xb.shape[0]} rows, its dask chunk declared {rows}")


def partition_statistics(source, cols, ref: Reference, k, start: int, rows: int, d: int):
    """Statistics of partition `k` (rows start..start+rows-1) in `ref`'s frame; runs on the worker.

    `source` is the (X block, y block) pair or a loader that reads them where the task runs (shards:
    then no row ever moves between processes). `k` is the partition's number or its name (e.g. its
    shard file) for messages. A non-finite value is reported here, where the rows are, by partition,
    global row and column.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import probe_reference
    >>> from edgeseq.train.distributed.stats import partition_statistics
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(12, 3)); y = rng.normal(size=12)
    >>> ref = probe_reference(X, y)
    >>> partition_statistics((X[5:], y[5:]), None, ref, 1, 5, 7, 3).n
    7
    >>> X[6, 1] = np.nan
    >>> partition_statistics(lambda: (X[5:], y[5:]), None, ref, "shard_1.npy", 5, 7, 3)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: shard_1.npy: X contains NaN or Inf at row 6 (row 1 of shard_1.npy), column 1; clean or impute it first
    """
    k = k if isinstance(k, str) else f"partition {k}"
    xb, yb = _open(source)
    xb = np.asarray(xb)
    _check_block_shape(xb, k, d, rows)
    if not np.issubdtype(xb.dtype, np.number) or np.issubdtype(xb.dtype, np.complexfloating):
        raise InputError(f"{k}: X must be real numbers, got dtype {xb.dtype}")
    total, _ = shifted_statistics(iter_array_chunks(xb, yb, None), cols, ref, what=f"{k}, chunk")
    if total is not None:
        xbad = ~(np.isfinite(total.x_mean) & np.isfinite(np.diag(total.xx)))
        if xbad.any() or not (np.isfinite(total.y_mean).all() and np.isfinite(np.diag(total.yy)).all()):
            _report_non_finite(xb, yb, cols, k, start)
    return total


def _report_non_finite(xb, yb, cols, k: str, start: int):
    used = xb if cols is None else xb[:, cols]
    with np.errstate(invalid="ignore", over="ignore"):
        bad_rows = np.flatnonzero(~np.isfinite(used).all(axis=1))
        if bad_rows.size:
            r = int(bad_rows[0])
            c = int(np.flatnonzero(~np.isfinite(used[r]))[0])
            col = c if cols is None else int(cols[c])
            raise InputError(f"{k}: X contains NaN or Inf at row {start + r} (row {r} of {k}), column "
                             f"{col}; clean or impute it first")
        ybad = np.flatnonzero(~np.isfinite(as_2d_y(yb, xb.shape[0])).all(axis=1))
        if ybad.size:
            raise InputError(f"{k}: y contains NaN or Inf at row {start + int(ybad[0])}; every "
                             f"target must be a finite number")
    raise InputError(f"{k}: X has values too large to square in column(s) "
                     f"{np.flatnonzero(~np.isfinite((used.astype(np.float64) ** 2).sum(0)))[:10].tolist()}")


def merge_pair(a: SufficientStats | None, b: SufficientStats | None):
    """One node of the reduction tree (empty partitions are None).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> from edgeseq.train.distributed.stats import merge_pair
    >>> X = np.arange(8.0).reshape(4, 2); y = np.arange(4.0)
    >>> a, b = sufficient_statistics(X[:2], y[:2]), sufficient_statistics(X[2:], y[2:])
    >>> merge_pair(a, None) is a, merge_pair(None, None), merge_pair(a, b).n
    (True, None, 4)
    """
    if a is None:
        return b
    if b is None:
        return a
    return a.merge(b)


def tree_reduce(parts: list, merge, fan_in: int = 2):
    """Reduction in ⌈log_fan_in P⌉ levels; `merge(*nodes)` builds one node (a task or a value) from ≤ fan_in.

    A balanced tree keeps the critical path short on a cluster (a left fold would be P levels); a
    wider fan-in trades a little width per node for fewer levels, i.e. fewer scheduler round trips
    when each node is cheap (the GLM's small gradient sums).

    Raises
    ------
    InputError
        If `parts` is empty.

    Examples
    --------
    >>> from edgeseq.train.distributed.stats import tree_reduce
    >>> tree_reduce([1, 2, 3, 4, 5], lambda a, b: (a, b))
    (((1, 2), (3, 4)), 5)
    >>> tree_reduce(list(range(10)), lambda a, b: a + b) == sum(range(10))
    True
    >>> tree_reduce([1, 2, 3, 4, 5], lambda *nodes: nodes, fan_in=4)
    ((1, 2, 3, 4), 5)
    """
    if not parts:
        raise InputError("no data: X has no rows")
    while len(parts) > 1:
        nxt = [merge(*parts[i:i + fan_in]) if len(parts[i:i + fan_in]) > 1 else parts[i]
               for i in range(0, len(parts), fan_in)]
        parts = nxt
    return parts[0]


def dask_sufficient_statistics(X, y, *, columns=None, client=None, progress=None,
                               names=None) -> SufficientStats:
    """Sufficient statistics of a row-chunked dask array X (and y) without gathering its rows.

    Parameters
    ----------
    X : dask.array.Array, (n, D), chunked along rows (column chunks are joined first).
    y : numpy or dask array, (n,) or (n, P); a numpy y is split to match X's row partitions.
    columns : the used columns (as in :func:`edgeseq.train.linear.stats.sufficient_statistics`).
    client : a ``distributed.Client``; default the active one, else dask's local scheduler.
    progress : callable receiving one line of text as partitions finish.
    names : optional name of each row partition for error messages (e.g. its shard file).

    Returns
    -------
    SufficientStats
        The same statistics `edgeseq.train.linear.stats.sufficient_statistics` computes in memory.

    Examples
    --------
    Without a distributed client the partitions are computed in this process:

    >>> import numpy as np
    >>> import dask.array as da
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> from edgeseq.train.distributed.stats import dask_sufficient_statistics
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(12, 3)); y = rng.normal(size=12)
    >>> s = dask_sufficient_statistics(da.from_array(X, chunks=(5, 3)), y)
    >>> s.n, np.allclose(s.xx, sufficient_statistics(X, y).xx), np.allclose(s.xy, sufficient_statistics(X, y).xy)
    (12, True, True)
    """
    _require_dask()
    n, _ = check_dask_X(X)
    blocks, d = row_blocks(X, y)
    return partitioned_statistics(blocks, n, d, columns=columns, client=client, progress=progress, names=names)


def fold_blocks(blocks, fold: int, n_folds: int):
    """The rows of fold `fold` (global row i with i mod `n_folds` = `fold`) of every partition.

    `blocks` pairs each partition ``(source, first row, rows)`` with its label. The folds of
    `edgeseq.train.linear.auto` are defined on global row numbers, so they are the same whether the rows
    are in memory, in shards or in dask partitions. Each source is sliced where it is read (on its
    worker); partitions with no row in the fold are left out, with their labels.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(10.0)[:, None]; y = np.arange(10.0)
    >>> blocks = [(((X[:4], y[:4]), 0, 4), "a"), ((lambda: (X[4:], y[4:]), 4, 6), "b")]
    >>> [(lab, (src() if callable(src) else src)[1].tolist()) for (src, _, _), lab in fold_blocks(blocks, 1, 3)]
    [('a', [1.0]), ('b', [4.0, 7.0])]
    """
    out = []
    for (source, start, rows), label in blocks:
        first = (fold - start) % n_folds
        count = len(range(first, rows, n_folds))
        if count == 0:
            continue
        cut = slice(first, None, n_folds)
        if callable(source):
            src = (lambda load, cut: lambda: tuple(a[cut] for a in load()))(source, cut)
        else:
            src = tuple(a[cut] for a in source)
        out.append(((src, start + first, count), label))
    return out


def dask_fold_statistics(X, y, n_folds: int, *, columns=None, client=None, progress=None) -> list[SufficientStats]:
    """`dask_sufficient_statistics` of each fold (global row i in fold i mod `n_folds`).

    What ``l2="auto"`` needs on a cluster: the same folds, hence the same choice, as in memory
    (`edgeseq.train.linear.auto.fold_statistics`).

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> from edgeseq.train.linear.auto import fold_statistics
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(12, 3)); y = rng.normal(size=12)
    >>> folds = dask_fold_statistics(da.from_array(X, chunks=(5, 3)), y, 3)
    >>> [f.n for f in folds], bool(np.allclose(folds[1].xx, fold_statistics(X, y, None, 3)[1].xx))
    ([4, 4, 4], True)
    """
    _require_dask()
    check_dask_X(X)
    blocks, d = row_blocks(X, y)
    return partitioned_fold_statistics(blocks, n_folds, d, columns=columns, client=client, progress=progress)


def partitioned_fold_statistics(blocks, n_folds: int, d: int, *, columns=None, client=None, progress=None,
                                names=None) -> list[SufficientStats]:
    """`partitioned_statistics` of each fold of `blocks` (see `fold_blocks`): one pass over the
    partitions per fold, each partition sliced where it is read.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(12.0).reshape(6, 2); y = np.arange(6.0)
    >>> folds = partitioned_fold_statistics([((X[:4], y[:4]), 0, 4), ((X[4:], y[4:]), 4, 2)], 2, 2)
    >>> [f.x_mean.tolist() for f in folds]
    [[4.0, 5.0], [6.0, 7.0]]
    """
    say = progress or (lambda msg: None)
    labels = list(names) if names is not None else [f"partition {k}" for k in range(len(blocks))]
    out = []
    try:
        for f in range(n_folds):
            part = fold_blocks(list(zip(blocks, labels)), f, n_folds)
            say(f"cross-validation fold {f + 1}/{n_folds}")
            out.append(partitioned_statistics([b for b, _ in part], sum(b[2] for b, _ in part), d, columns=columns,
                                              client=client, progress=progress, names=[lab for _, lab in part]))
    except InputError:
        # a bad value or block: the pass over whole partitions names its true row and shape
        partitioned_statistics(blocks, sum(b[2] for b in blocks), d, columns=columns, client=client,
                               names=labels)
        raise
    return out


def partitioned_statistics(blocks, n: int, d: int, *, columns=None, client=None, progress=None, names=None):
    """The pass over `blocks` = [(source, first row, rows)], source a loader or an (X, y) block pair.

    Loaders (e.g. one per shard file) make each task read its own rows on its worker.

    Parameters
    ----------
    blocks : list of (source, int, int)
        Per partition: an (X, y) pair or a zero-argument loader returning one, its first global row
        and its row count.
    n, d : int
        Total rows and columns.
    columns, client, progress, names
        As in `dask_sufficient_statistics`.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> from edgeseq.train.distributed.stats import partitioned_statistics
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(12, 3)); y = rng.normal(size=12)
    >>> blocks = [((X[:5], y[:5]), 0, 5), (lambda: (X[5:], y[5:]), 5, 7)]
    >>> s = partitioned_statistics(blocks, 12, 3, progress=print)
    statistics pass over 12 rows in 2 partitions (no distributed client: partitions computed in this process)
    statistics: partition 1/2 done
    statistics: partition 2/2 done
    >>> np.allclose(s.xx, sufficient_statistics(X, y).xx)
    True
    """
    _require_dask()
    cols = None if columns is None else np.asarray(columns, dtype=np.int64)
    if cols is not None and cols.size and not (0 <= cols.min() and cols.max() < d):
        raise InputError(f"columns must be indices in 0..{d - 1}")
    client = active_client(client)
    say = progress or (lambda msg: None)
    P = len(blocks)
    if names is not None and len(names) != P:
        raise InputError(f"{len(names)} partition names for {P} partitions")
    labels = list(names) if names is not None else [f"partition {k}" for k in range(P)]
    say(f"statistics pass over {n:,} rows in {P} partitions"
        + (f" on {len(client.nthreads())} workers" if client is not None else
           " (no distributed client: partitions computed in this process)"))
    if client is None:
        return _local(blocks, cols, d, say, labels)
    return _on_cluster(client, blocks, cols, d, say, labels)


def _local(blocks, cols, d, say, labels):
    import dask

    def rows_of(source):
        return source if callable(source) else dask.compute(*source)

    ref = _probe(rows_of(blocks[0][0]), cols, d, labels[0])
    parts = []
    for k, (source, start, rows) in enumerate(blocks):
        parts.append(partition_statistics(rows_of(source), cols, ref, labels[k], start, rows, d))
        say(f"statistics: partition {k + 1}/{len(blocks)} done")
    return _finish(tree_reduce(parts, merge_pair), ref, cols)


def _on_cluster(client, blocks, cols, d, say, labels):
    """One graph: probe, one statistics task per partition, the merge tree; blocks are freed as used."""
    from dask import delayed
    from distributed import as_completed

    from edgeseq.train.distributed.logs import quiet_expected_errors

    quiet_expected_errors(client)  # a partition's own error reaches the user as one line, not under a worker log
    ref = delayed(_probe, pure=True)(blocks[0][0], cols, d, labels[0])
    parts = [delayed(partition_statistics, pure=True)(source, cols, ref, labels[k], start, rows, d)
             for k, (source, start, rows) in enumerate(blocks)]
    root = tree_reduce(list(parts), delayed(merge_pair, pure=True))
    *part_futs, root_fut, ref_fut = client.compute([*parts, root, ref])  # released when these go out of scope
    index = {fut.key: k for k, fut in enumerate(part_futs)}
    for done, fut in enumerate(as_completed(part_futs), start=1):
        if fut.status == "error":
            raise_partition_error(fut, blocks[index[fut.key]][2], labels[index[fut.key]])
        say(f"statistics: partition {done}/{len(part_futs)} done")
    return _finish(root_fut.result(), ref_fut.result(), cols)


def raise_partition_error(fut, rows: int, label: str):
    """The worker's own error (e.g. the row holding a NaN), or what a repeatedly killed worker means.

    Examples
    --------
    >>> from edgeseq.train.distributed.stats import raise_partition_error
    >>> class KilledWorker(Exception):
    ...     pass
    >>> class Failed:  # what a distributed future that died with its worker reports
    ...     def exception(self):
    ...         return KilledWorker()
    >>> raise_partition_error(Failed(), 5000, "partition 3")
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: partition 3 (5,000 rows) killed its worker each time it ran, most likely by running out of memory: use smaller partitions (fewer rows each) or give the workers more memory
    """
    exc = fut.exception()
    if type(exc).__name__ == "KilledWorker":  # the task took its worker down every time it ran
        raise InputError(f"{label} ({rows:,} rows) killed its worker each time it ran, most likely by running "
                         f"out of memory: use smaller partitions (fewer rows each) or give the workers more "
                         f"memory") from None
    fut.result()  # re-raises the worker's exception here


def _finish(total, ref, cols):
    if total is None:
        raise InputError("no data: X has no rows")
    return finish_statistics(total, columns_reference(ref, cols), cols)
