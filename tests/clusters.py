"""The two-process Dask cluster the distributed tests share, ready when it is handed over.

`LocalCluster` returns once its nannies are up; on a loaded two-core machine a worker can still be
registering with the scheduler at that moment, and a test that counts workers (or checks where tasks
ran) would then see fewer than two. Both helpers wait until the two workers have registered.
"""
from __future__ import annotations

import contextlib

WORKERS = 2
READY_TIMEOUT_S = 120


@contextlib.contextmanager
def two_worker_cluster():
    """Yield a LocalCluster of two single-thread worker processes once both have registered.

    No client is created in this process, so code under test that looks for a default client finds
    none (the CLI connects by the scheduler's address itself).
    """
    import distributed

    with distributed.LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=40) as cluster:
        cluster.wait_for_workers(WORKERS, timeout=READY_TIMEOUT_S)
        yield cluster


@contextlib.contextmanager
def two_worker_client():
    """Yield a `distributed.Client` of `two_worker_cluster` (it becomes this process's default)."""
    import distributed

    with two_worker_cluster() as cluster, distributed.Client(cluster) as client:
        yield client
