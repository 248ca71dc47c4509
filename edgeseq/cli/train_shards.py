"""`edgeseq train` on shards (a directory or glob of .npy/CSV/Parquet files) on a Dask cluster.

Kept apart from the single-file path: it needs the optional dask extra, a cluster to talk to and
shard-by-shard error messages, none of which the in-memory path has.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from edgeseq.errors import InputError

MAX_LOCAL_WORKERS = 256


@contextmanager
def cluster_client(scheduler: str | None, workers: int | None):
    """A client on `scheduler`, on a local cluster of `workers` processes, or None (this process)."""
    if scheduler is None and workers is None:
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("--scheduler/--workers need the optional extra: pip install 'edgeseq[dask]'") from None
    if scheduler is not None and workers is not None:
        raise InputError("give either --scheduler ADDRESS (an existing cluster) or --workers N (a local one)")
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise InputError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        with client:
            yield client
        return
    if not 1 <= workers <= MAX_LOCAL_WORKERS:
        raise InputError(f"--workers must be in 1..{MAX_LOCAL_WORKERS}, got {workers}")
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        yield client


def fit_shards(est, shards, spec, client, say):
    """Each shard one partition, read by the worker that uses it.

    Regression: the statistics pass there, then the selection here (D-space only). Classification:
    the shards stay in the workers' memory and every pass of the GLM selection runs on them.
    """
    from edgeseq.train.linear.auto import cv_fits_width, n_folds_for
    from edgeseq.train.distributed.stats import partitioned_fold_statistics, partitioned_statistics

    parts = shards.partitions(client)
    if hasattr(est, "fit_partitions"):
        from edgeseq.train.distributed.glm import PartitionedRows

        rows = PartitionedRows.from_blocks(parts, shards.n_features, client, labels=shards.names())
        return est.fit_partitions(rows, progress=say)
    n = sum(p[2] for p in parts)
    used = np.concatenate(spec.columns)
    k = n_folds_for(n) if "auto" in (est.l2, est.whiten) and cv_fits_width(used.size, est.l2, est.whiten) else 0
    if k:  # per-fold statistics: the estimator chooses l2 / whitening on the same folds as in memory
        stats = partitioned_fold_statistics(parts, k, shards.n_features, columns=np.concatenate(spec.columns),
                                            client=client, progress=say, names=shards.names())
    else:
        stats = partitioned_statistics(parts, n, shards.n_features, columns=np.concatenate(spec.columns),
                                       client=client, progress=say, names=shards.names())
    return est.fit_from_stats(stats, n_features=shards.n_features, progress=say)
