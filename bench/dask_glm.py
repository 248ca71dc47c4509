"""GLM selection (AnytimeClassifier) on a Dask LocalCluster against one process: seconds per evaluation.

    python bench/dask_glm.py                                # 200,000 x 64, 8 groups, 3 classes, 8 partitions
    python bench/dask_glm.py --rows 1000000 --partitions 16

A logistic/softmax selection reads the rows at every loss/gradient evaluation. On a cluster each of
those passes is a map over the partitions plus a tree sum, so its cost is the slowest partition's pass
plus a few scheduler round trips. Measured in one run, on the same data and settings:

* the in-process fit (BLAS on one thread, as each worker runs): wall seconds, passes over the rows;
* the cluster fit (one X partition per dask chunk, kept on the workers): the same;
* one bare evaluation at zero weights, repeated: in process and on the cluster (the round-trip floor);
* that both fits chose the same groups in the same order.

Results go to bench/results/dask_glm.json with the machine and the load average.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

from _results import command_line, write_result
from edgeseq import AnytimeClassifier
from edgeseq.train.linear.basis import build_working_problem
from edgeseq.train.distributed.glm import PartitionedDesign, partition_dask_arrays, partitioned_targets
from edgeseq.train.glm.design import WorkingDesign
from edgeseq.train.glm.fit import class_targets, design_objective
from edgeseq.train.linear.stats import sufficient_statistics


def make_data(rows: int, d: int, classes: int, chunk: int, seed: int = 0):
    """X as a dask array generated chunk by chunk where it is computed (no n x D array in the graph),
    the same X in memory for the in-process reference, and labels of a sparse softmax model."""
    import dask.array as da

    Xd = da.random.default_rng(seed).normal(size=(rows, d), chunks=(chunk, d))
    X = Xd.compute()
    rng = np.random.default_rng(seed + 1)
    B = rng.normal(size=(d, classes)) * (rng.random((d, 1)) < 0.5) / np.sqrt(d)
    y = np.argmax(X @ B * 4 + rng.gumbel(size=(rows, classes)), axis=1)
    return Xd, X, y


def seconds_per_evaluation(evaluate, k: int, P: int, reps: int) -> float:
    """Fastest of `reps` evaluations at zero weights on the first k working columns."""
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        evaluate(np.zeros((k, P)), np.zeros(P))
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--method", default="omp")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    chunk = -(-args.rows // args.partitions)
    Xd, X, y = make_data(args.rows, args.d, args.classes, chunk)
    size = args.d // args.groups
    groups = [list(range(g * size, (g + 1) * size)) for g in range(args.groups)]
    costs = list(np.linspace(1.0, 3.0, args.groups))
    used = np.concatenate(groups)
    Y = class_targets(y, args.classes)
    P = Y.shape[1]
    prob = build_working_problem(sufficient_statistics(X, Y, columns=used), [size] * args.groups, True)
    k = prob.slices[args.groups // 2 - 1].stop  # half the groups selected: a mid-selection evaluation

    with threadpool_limits(limits=1, user_api="blas"):
        t0 = time.perf_counter()
        mem = AnytimeClassifier(groups, costs, method=args.method, l2=1e-3).fit(X, y)
        t_mem = time.perf_counter() - t0
        ev_mem = seconds_per_evaluation(design_objective(WorkingDesign(X, used, prob), range(args.groups // 2), Y,
                                                         "softmax" if P > 1 else "sigmoid", 1e-3), k, P, args.reps)
    print(f"in process: {t_mem:.2f} s, {int(mem.n_passes_.sum())} passes; one evaluation {ev_mem * 1e3:.1f} ms",
          flush=True)

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        client.run(lambda: __import__("edgeseq.train.distributed.glm"))  # imports are not the fit's cost
        t0 = time.perf_counter()
        dist = AnytimeClassifier(groups, costs, method=args.method, l2=1e-3).fit(Xd, y, client=client)
        t_dist = time.perf_counter() - t0
        t = partitioned_targets(partition_dask_arrays(Xd, y, client), used)
        design = PartitionedDesign.over(t.rows, used, prob)
        ev_dist = seconds_per_evaluation(design.objective(range(args.groups // 2), t.link, 1e-3), k, P, args.reps)
    print(f"cluster: {t_dist:.2f} s, {int(dist.n_passes_.sum())} passes; one evaluation {ev_dist * 1e3:.1f} ms",
          flush=True)

    same = dist.sequence_.tolist() == mem.sequence_.tolist()
    p_mem, p_dist = int(mem.n_passes_.sum()), int(dist.n_passes_.sum())
    result = {
        "rows": args.rows, "D": args.d, "groups": args.groups, "classes": args.classes, "method": args.method,
        "partitions": args.partitions, "workers": args.workers, "threads_per_worker": 1,
        "same_sequence": same,
        "seconds": {"fit_in_process": t_mem, "fit_cluster": t_dist,
                    "evaluation_in_process": ev_mem, "evaluation_cluster": ev_dist},
        "passes": {"in_process": p_mem, "cluster": p_dist},
        "seconds_per_pass": {"in_process": t_mem / p_mem, "cluster": t_dist / p_dist},
        "cluster_vs_in_process": {"fit": t_dist / t_mem, "evaluation": ev_dist / ev_mem},
    }
    result["tables"] = [
        {"title": f"AnytimeClassifier ({args.method}) on {args.rows:,} x {args.d}, {args.groups} groups, "
                  f"{args.classes} classes: one process vs LocalCluster of {args.workers} workers "
                  f"({args.partitions} partitions)",
         "columns": ["where", "fit seconds", "passes over the rows", "seconds per pass",
                     "one evaluation (s, half the groups selected)"],
         "rows": [["one process, 1 BLAS thread", f"{t_mem:.3g}", p_mem, f"{t_mem / p_mem:.3g}", f"{ev_mem:.3g}"],
                  [f"LocalCluster, {args.workers} workers", f"{t_dist:.3g}", p_dist, f"{t_dist / p_dist:.3g}",
                   f"{ev_dist:.3g}"]]}]
    print(json.dumps({k: result[k] for k in ("seconds", "passes", "cluster_vs_in_process", "same_sequence")},
                     indent=1))
    print(f"wrote {write_result('dask_glm', result, command_line())}")


if __name__ == "__main__":
    main()
