"""The statistics pass on a Dask LocalCluster over .npy shards on disk, against one process.

    python bench/dask_speed.py                                  # 4M x 64 float32 (~1 GiB), 2 workers
    python bench/dask_speed.py --rows 100000000 --workers 2 --result dask_out_of_core
                                                               # ~26 GiB: larger than this machine's memory

Writes the shards (float32, target in the last column) under --dir, then measures in one run:

* the single-process pass over the same memory-mapped shards, BLAS on one thread (the per-worker
  reference: each worker runs one thread) and with BLAS's default threads (on a loaded machine
  OpenBLAS threads can spin and be far slower: both are recorded);
* the cluster pass (one partition per shard, statistics merged as a tree on the workers): rows/second in
  total and per worker, peak resident memory per worker (VmHWM);
* the constants of the cost model of a cluster fit: bytes one partition's statistics take on the
  wire (pickled), seconds of one merge at this D, the reduction depth ceil(log2 P).

Results go to bench/results/dask_speed.json with the machine and the load average. On a machine
with more memory than the data, the shards stay in the page cache after writing: then the figures
measure compute, not disk; the JSON says which case it was (data_bytes vs memory_bytes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import shutil
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from _results import command_line, write_result
from edgeseq.io.shards import open_shards
from edgeseq.train.distributed.stats import partitioned_statistics
from edgeseq.train.linear.stats import sufficient_statistics


def write_shards(out: Path, rows: int, d: int, shard_rows: int, seed: int = 0) -> tuple[list[Path], bool]:
    """Write the shards, or reuse a complete earlier set with the same shape and seed (the marker file
    is written only after the last shard, so an interrupted write is never reused); says which."""
    marker, shape = out / "COMPLETE.json", {"rows": rows, "d": d, "shard_rows": shard_rows, "seed": seed}
    if marker.is_file() and json.loads(marker.read_text()) == shape:
        return sorted(out.glob("part-*.npy")), True
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d).astype(np.float32)
    paths = []
    for i, start in enumerate(range(0, rows, shard_rows)):
        m = min(shard_rows, rows - start)
        path = out / f"part-{i:05d}.npy"
        arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(m, d + 1))
        for a in range(0, m, 500_000):  # in slabs: bounded memory whatever the shard size
            b = min(m, a + 500_000)
            x = rng.standard_normal((b - a, d), dtype=np.float32)
            arr[a:b, :d] = x
            arr[a:b, d] = x @ w + rng.standard_normal(b - a, dtype=np.float32)
        arr.flush()
        del arr
        paths.append(path)
    marker.write_text(json.dumps(shape))
    return paths, False


def single_process(paths):
    def chunks():
        for p in paths:
            arr = np.load(p, mmap_mode="r")
            yield arr[:, :-1], arr[:, -1]
    return sufficient_statistics(chunks())


def in_memory_rows_per_second(paths, max_bytes: int = 2**30) -> float:
    """Rows/second of the single-process pass over shards already in RAM (the first ones, up to
    `max_bytes`): the reference a worker reading from disk is compared with."""
    held, size = [], 0
    for p in paths:
        arr = np.load(p)  # read fully into memory, not memory-mapped
        held.append(arr)
        size += arr.nbytes
        if size >= max_bytes:
            break
    with threadpool_limits(limits=1, user_api="blas"):
        t0 = time.perf_counter()
        sufficient_statistics((a[:, :-1], a[:, -1]) for a in held)
        seconds = time.perf_counter() - t0
    return sum(len(a) for a in held) / seconds


def peak_rss(client) -> dict:
    def vmhwm():
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return -1
    return client.run(vmhwm)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--shard-rows", type=int, default=250_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=Path(f"/tmp/edgeseq-dask-bench-{os.getpid()}"))
    ap.add_argument("--keep", action="store_true",
                    help="keep the shards afterwards (a later run with the same --dir and shape reuses them)")
    ap.add_argument("--result", default="dask_speed",
                    help="name of the result file under bench/results (the out-of-core run keeps its own)")
    args = ap.parse_args()
    from distributed import Client, LocalCluster, get_task_stream

    load_start = os.getloadavg()
    t0 = time.perf_counter()
    paths, reused = write_shards(args.dir, args.rows, args.d, args.shard_rows)
    t_write = time.perf_counter() - t0
    data_bytes = sum(p.stat().st_size for p in paths)
    print(f"{len(paths)} shards, {data_bytes / 2**30:.2f} GiB ready in {t_write:.1f} s", flush=True)

    with threadpool_limits(limits=1, user_api="blas"):
        t0 = time.perf_counter()
        ref = single_process(paths)
        t_single = time.perf_counter() - t0
    t0 = time.perf_counter()
    single_process(paths)
    t_single_mt = time.perf_counter() - t0
    print(f"single process: {t_single:.2f} s on one BLAS thread, {t_single_mt:.2f} s default threads", flush=True)
    rps_in_memory = in_memory_rows_per_second(paths)

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        client.run(lambda: __import__("edgeseq.train.distributed.stats"))  # imports are not the pass's cost
        shards = open_shards(args.dir, None)
        parts = shards.partitions(client)
        t_cluster = np.inf
        for _ in range(2):  # fastest of two: the first also warms the workers' caches
            t0 = time.perf_counter()
            with get_task_stream(client) as ts:
                got = partitioned_statistics(parts, args.rows, args.d, client=client, names=shards.names())
            t_cluster = min(t_cluster, time.perf_counter() - t0)
        busy = {}
        for task in ts.data:  # where the workers' time went, in the last round
            kind = task["key"][0] if isinstance(task["key"], tuple) else task["key"]
            kind = str(kind).rsplit("-", 1)[0]
            for phase in task["startstops"]:
                name = f"{kind}:{phase['action']}"
                busy[name] = busy.get(name, 0.0) + phase["stop"] - phase["start"]
        rss = peak_rss(client)
    print(f"cluster ({args.workers} workers): {t_cluster:.2f} s", flush=True)
    err = float(np.max(np.abs(got.xx - ref.xx)) / np.max(np.abs(ref.xx)))

    part = sufficient_statistics(np.load(paths[0], mmap_mode="r")[:, :-1], np.load(paths[0], mmap_mode="r")[:, -1])
    wire = len(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
    reps = 200
    t0 = time.perf_counter()
    for _ in range(reps):
        part.merge(part)
    t_merge = (time.perf_counter() - t0) / reps
    P = len(paths)
    result = {
        "rows": args.rows, "D": args.d, "dtype": "float32", "shards": P, "shard_rows": args.shard_rows,
        "workers": args.workers, "threads_per_worker": 1,
        "data_bytes": data_bytes, "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "load_average_start": list(load_start), "load_average_end": list(os.getloadavg()),
        "shards_reused": reused, "seconds": {"write_shards": t_write, "single_process_pass_1_thread": t_single,
                    "single_process_pass_default_threads": t_single_mt, "cluster_pass": t_cluster},
        "rows_per_second": {"in_memory_single_process_1_thread": rps_in_memory,
                            "single_process_1_thread": args.rows / t_single,
                            "single_process_default_threads": args.rows / t_single_mt,
                            "cluster_total": args.rows / t_cluster,
                            "cluster_per_worker": args.rows / t_cluster / args.workers},
        "per_worker_vs_single_process_1_thread": t_single / (t_cluster * args.workers),
        "per_worker_vs_in_memory_single_process": args.rows / t_cluster / args.workers / rps_in_memory,
        "cluster_speedup_vs_single_process_1_thread": t_single / t_cluster,
        "peak_rss_bytes_per_worker": sorted(rss.values()),
        "worker_seconds_by_task_and_phase": dict(sorted(busy.items(), key=lambda kv: -kv[1])),
        "cost_model": {"statistics_bytes_per_partition": wire, "merge_seconds": t_merge,
                       "reduction_depth": math.ceil(math.log2(P)) if P > 1 else 0,
                       "merges": P - 1},
        "max_relative_difference_cluster_vs_single": err,
    }
    rps, cm = result["rows_per_second"], result["cost_model"]
    result["tables"] = [
        {"title": f"Statistics pass over {args.rows:,} x {args.d} float32 rows in {P} .npy shards",
         "columns": ["where", "seconds", "rows per second"],
         "rows": [["one process, shards already in RAM (up to 1 GiB of them), 1 BLAS thread", "",
                   f"{rps['in_memory_single_process_1_thread']:.3g}"],
                  ["one process, 1 BLAS thread", f"{t_single:.3g}", f"{rps['single_process_1_thread']:.3g}"],
                  ["one process, default BLAS threads", f"{t_single_mt:.3g}",
                   f"{rps['single_process_default_threads']:.3g}"],
                  [f"LocalCluster, {args.workers} workers (per worker)", f"{t_cluster:.3g}",
                   f"{rps['cluster_per_worker']:.3g}"]]},
        {"title": "Cost model of the tree reduction (what crosses the network per partition, and the merge)",
         "columns": ["statistics bytes per partition", "merge seconds", "reduction depth", "merges"],
         "rows": [[cm["statistics_bytes_per_partition"], f"{cm['merge_seconds']:.3g}", cm["reduction_depth"],
                   cm["merges"]]]}]
    print(json.dumps({k: result[k] for k in ("rows_per_second", "cost_model", "peak_rss_bytes_per_worker")},
                     indent=1))
    print(f"wrote {write_result(args.result, result, command_line())}")
    if not args.keep:
        shutil.rmtree(args.dir)


if __name__ == "__main__":
    main()
