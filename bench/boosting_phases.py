"""Where an AnytimeBoostingClassifier fit spends its CPU time, stage by stage and phase by phase.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/boosting_phases.py [--stages 12] [--param value ...]

Fits the classifier as `bench/tree_orders.py` does on the MNIST bank (split 0: the 70 % training
part, ``n_jobs=1``, ``random_state=0``) and prints, after every stage line, the CPU seconds of that
stage's LightGBM calls split by phase (the candidates' *probes*, the chosen candidate *grown*, the
*restart* from the prior) and by what LightGBM did in them (``construct``: building the binned
`Dataset`, ``update``: the boosting rounds, ``predict``), with the call counts, the rounds and the
widest column set of each phase. Estimator parameters are given as ``--param name=value`` (a Python
literal, e.g. ``--param max_tree_columns=None``); ``--stages N`` stops after N stages. The per-stage
CPU seconds are written to ``bench/results/boosting_phases.json`` (with the machine's load); the
docs' account of the fit time (docs/nonlinear.md) discusses them.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from collections import defaultdict

import lightgbm as lgb
import numpy as np
from sklearn.model_selection import train_test_split
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from tree_orders import mnist

from edgeseq import AnytimeBoostingClassifier
from edgeseq.train.trees import stagewise_boosting as sb

PHASES = ("probe", "grow", "restart")
PARTS = ("total", "construct", "update", "predict")


class Enough(Exception):
    """Raised from the progress line after --stages stages."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", type=int, default=None)
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args()
    kw = {k: ast.literal_eval(v) for k, v in (p.split("=", 1) for p in args.param)}
    X, y, groups, costs = mnist()
    Xa, _, ya, _ = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    cpu, calls = defaultdict(float), defaultdict(int)
    state = {"stage": 1, "phase": None}
    probe_rounds = kw.get("probe_rounds", sb.PROBE_ROUNDS)

    def timed(part, f):
        def wrapper(*a, **k):
            c = time.process_time()
            try:
                return f(*a, **k)
            finally:
                key = (state["stage"], state["phase"], part)
                cpu[key] += time.process_time() - c
                calls[key] += 1
        return wrapper

    real_continue, real_restart = sb._continue_boosting, sb._restarted

    def continued(*a):
        if state["phase"] != "restart":
            state["phase"] = "probe" if a[10] == probe_rounds else "grow"
        out = real_continue(*a)
        s, ph = state["stage"], state["phase"]
        calls[(s, ph, "rounds")] += out[1]
        calls[(s, ph, "columns")] = max(calls[(s, ph, "columns")], len(a[9]))
        return out

    def restarted(*a, **k):
        state["phase"] = "restart"
        try:
            return real_restart(*a, **k)
        finally:
            state["phase"] = None

    sb._continue_boosting, sb._restarted = timed("total", continued), restarted
    # nested calls (a validation set constructs its reference) are counted in each: an upper bound
    lgb.Dataset.construct = timed("construct", lgb.Dataset.construct)
    lgb.Booster.update = timed("update", lgb.Booster.update)
    lgb.Booster.predict = timed("predict", lgb.Booster.predict)
    c0, w0 = time.process_time(), time.perf_counter()
    rows = []

    def progress(line: str) -> None:
        print(f"[{time.perf_counter() - w0:7.1f} s wall {time.process_time() - c0:7.1f} s CPU] {line}", flush=True)
        s = state["stage"]
        rows.append([s, line, round(time.perf_counter() - w0, 1), round(time.process_time() - c0, 1),
                     *(round(cpu[(s, ph, "total")], 2) for ph in PHASES),
                     round(sum(cpu[(s, ph, "construct")] for ph in PHASES), 2),
                     round(sum(cpu[(s, ph, "update")] for ph in PHASES), 2),
                     max(calls[(s, ph, "columns")] for ph in PHASES)])
        for ph in PHASES:
            if calls[(s, ph, "total")]:
                parts = ", ".join(f"{p} {cpu[(s, ph, p)]:.2f} s / {calls[(s, ph, p)]}" for p in PARTS)
                print(f"    {ph:8s} {parts}; rounds {calls[(s, ph, 'rounds')]}, columns <= "
                      f"{calls[(s, ph, 'columns')]}", flush=True)
        state["stage"] += 1
        if args.stages is not None and state["stage"] > args.stages and line.startswith("stage"):
            raise Enough

    est = AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=0, **kw)
    try:
        est.fit(Xa, ya, progress=progress)
    except Enough:
        pass
    total = {"wall_s": round(time.perf_counter() - w0, 1), "cpu_s": round(time.process_time() - c0, 1),
             "params": {k: repr(v) for k, v in kw.items()}, "X": list(Xa.shape), "classes": int(np.unique(ya).size),
             "finished": args.stages is None or state["stage"] <= args.stages, "load_end": machine_info()["load_end"]}
    print(json.dumps(total), file=sys.stdout)
    title = ("AnytimeBoostingClassifier on the MNIST bank (split 0, n_jobs=1"
             + "".join(f", {k}={v!r}" for k, v in kw.items()) + "): CPU seconds per progress line and phase "
             "(probe, grow and restart: their LightGBM calls; construct: binning the Datasets, an upper bound; "
             "rounds: the boosting rounds), cumulative wall and CPU seconds of the fit")
    write_result("boosting_phases", {"total": total, "tables": [{
        "title": title, "columns": ["stage", "line", "wall (s)", "CPU (s)", "probe CPU", "grow CPU", "restart CPU",
                                    "construct CPU", "rounds CPU", "columns <="],
        "rows": rows}]}, command_line())


if __name__ == "__main__":
    main()
