"""AFR on the MNIST bank: fit time (target ≤ 10 min on 2 cores) and anytime quality next to CS-G-OMP.

    .venv/bin/python bench/afr_mnist.py [--seed 0]

The MNIST bank (edgeseq[images]: 5,000 images, 48 extractor groups, costs measured on this machine on
first use and cached) is split 70/30, stratified. AFRClassifier and AnytimeClassifier (CS-G-OMP) are fit
at their defaults on the 70 %; reported: fit time, number of stages, full-budget test accuracy and the
step accuracy-timeliness over budgets uniform in [0, total cost of all groups]. One split: a fit of both
takes several minutes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _results import command_line, write_result  # noqa: I001  (bench/ is on sys.path)
from afr_trees import step_timeliness
from sklearn.model_selection import train_test_split

from edgeseq import AFRClassifier, AnytimeClassifier
from edgeseq.extractors.datasets import mnist_data


def run(seed: int) -> dict:
    d = mnist_data()
    Xa, Xt, ya, yt = train_test_split(d.X, d.y, test_size=0.3, random_state=seed, stratify=d.y)
    costs = np.asarray(d.costs, dtype=float)
    out = {"n_train": int(len(ya)), "n_test": int(len(yt)), "groups": len(d.columns), "columns": int(d.X.shape[1]),
           "costs_measured_on": d.measured_on}
    for name, make in (("CS-G-OMP", lambda: AnytimeClassifier(d.columns, costs)),
                       ("AFR", lambda: AFRClassifier(d.columns, costs))):
        t0, c0 = time.perf_counter(), time.process_time()
        est = make().fit(Xa, ya)
        fit_s, fit_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        acc = [float(np.mean(p == yt)) for p in est.staged_predict(Xt)]
        out[name] = {"fit_s": fit_s, "fit_cpu_s": fit_cpu_s, "stages": len(acc) - 1, "final_accuracy": acc[-1],
                     "step_timeliness": step_timeliness(est.cum_cost_, acc, float(costs.sum()))}
        print(name, out[name], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    res = run(args.seed)
    rows = [[m, f"{res[m]['fit_s']:.0f}", f"{res[m]['fit_cpu_s']:.0f}", res[m]["stages"], f"{res[m]['final_accuracy']:.3f}",
             f"{res[m]['step_timeliness']:.3f}"] for m in ("AFR", "CS-G-OMP")]
    table = {"title": f"MNIST bank ({res['groups']} groups, {res['columns']} columns; {res['n_train']} training, "
                      f"{res['n_test']} test images, one stratified split); AFR fit target ≤ 600 s",
             "columns": ["method", "fit (s)", "fit CPU (s, all threads)", "stages", "final accuracy", "step timeliness"], "rows": rows}
    path = write_result("afr_mnist", {"seed": args.seed, "results": res, "tables": [table]}, command_line())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
