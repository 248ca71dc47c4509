"""Where an AnytimeBoostingClassifier fit spends its CPU time, stage by stage and phase by phase.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/boosting_phases.py [--stages 12] [--param value ...]
        [--mnist-costs bench/mnist_costs.json]

Fits the classifier as `bench/tree_orders.py` does on the MNIST bank (split 0: the 70 % training
part, ``n_jobs=1``, ``random_state=0``) and prints, after every stage line, the CPU seconds of that
stage's LightGBM calls split by phase (the candidates' *probes*, the chosen candidate *grown*, the
*restart* from the prior) and by what LightGBM did in them (``construct``: building the binned
`Dataset`, ``update``: the boosting rounds, ``predict``), with the call counts, the rounds and the
widest column set of each phase. Estimator parameters are given as ``--param name=value`` (a Python
literal, e.g. ``--param max_tree_columns=None``, ``--param n_jobs=None`` for LightGBM's default
threads); ``--stages N`` stops after N stages. ``--mnist-costs FILE`` scores the groups with a stored
calibration instead of this machine's cached one (`bench/tree_orders.py`'s option of the same name): the
search's path depends on the relative costs, so only then is the fit the one that script's split 0
row recorded; the calibration is part of the parameter set's name. The per-stage CPU seconds are written to
``bench/results/boosting_phases.json`` (with the machine's load), one table per parameter set (a
run replaces the table of its own parameters and keeps the others), and a table of whole fits
with one row per parameter set: the tree search, the comparison with the linear model (its fit
on the search's rows and the scoring) and the linear model's refit on all rows when it is kept,
in wall and CPU seconds. The docs' account of the fit time (docs/nonlinear.md) renders both.
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
from _results import LOAD_AT_IMPORT, RESULTS, command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from tree_orders import MNIST_COSTS, mnist

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
    ap.add_argument("--mnist-costs", default=None, metavar="FILE")
    args = ap.parse_args()
    kw = {"n_jobs": 1, **{k: ast.literal_eval(v) for k, v in (p.split("=", 1) for p in args.param)}}
    MNIST_COSTS["path"] = args.mnist_costs
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

    est = AnytimeBoostingClassifier(groups, costs, random_state=0, **kw)
    try:
        est.fit(Xa, ya, progress=progress)
    except Enough:
        pass
    wall, cpu_s = round(time.perf_counter() - w0, 1), round(time.process_time() - c0, 1)
    finished = args.stages is None or state["stage"] <= args.stages
    total = {"wall_s": wall, "cpu_s": cpu_s, "params": {k: repr(v) for k, v in kw.items()}, "X": list(Xa.shape),
             "classes": int(np.unique(ya).size), "finished": finished, "load_end": machine_info()["load_end"]}
    print(json.dumps(total), file=sys.stdout)
    if finished:
        rows.append(["end", f"fit returned: model_kind_={est.model_kind_!r}", wall, cpu_s, 0.0, 0.0, 0.0, 0.0, 0.0, 0])
    params = ", ".join(f"{k}={v!r}" for k, v in kw.items()) + \
        ("" if args.mnist_costs is None else f", costs from {args.mnist_costs}")
    title = (f"AnytimeBoostingClassifier on the MNIST bank (split 0, {params}): CPU seconds per progress line and "
             "phase (probe, grow and restart: their LightGBM calls; construct: binning the Datasets, an upper bound; "
             "rounds: the boosting rounds), cumulative wall and CPU seconds of the fit")
    table = {"title": title, "columns": ["stage", "line", "wall (s)", "CPU (s)", "probe CPU", "grow CPU",
                                         "restart CPU", "construct CPU", "rounds CPU", "columns <="], "rows": rows}
    old = previous()
    # (a whole-fit table of an earlier title describes fits this code no longer makes: the file's history keeps it)
    tables = [t for t in old.get("tables", []) if t["title"] != title and not t["title"].startswith(WHOLE_PREFIX)]
    whole = [r for r in next((t["rows"] for t in old.get("tables", []) if t["title"] == WHOLE["title"]), [])
             if r[0] != params]
    if finished:
        whole.append([params, *whole_fit(rows, est), wall, cpu_s, LOAD_AT_IMPORT, total["load_end"],
                      time.strftime("%Y-%m-%d", time.gmtime())])
    tables = [{**WHOLE, "rows": whole}] * bool(whole) + [*tables, table]  # the docs page shows no empty table
    write_result("boosting_phases", {"total": total, "tables": tables}, command_line())


# one row per parameter set; a run replaces its own row (see the module notes)
WHOLE_PREFIX = "Whole fits of AnytimeBoostingClassifier"
WHOLE = {"title": "Whole fits of AnytimeBoostingClassifier on the MNIST bank (split 0, 3,500 rows x 3,130 columns "
                  "of the training part, 10 classes): the tree search (final stages included), the comparison with "
                  "the linear anytime model (its fit on the search's training rows, l2 and whitening chosen on the "
                  "search's held-out rows, and the scoring), the kept linear model's refit on all rows",
         "columns": ["parameters", "kept", "tree stages", "search wall (s)", "search CPU (s)", "comparison CPU (s)",
                     "linear refit CPU (s)", "total wall (s)", "total CPU (s)", "load start", "load end", "date"]}


def previous() -> dict:
    """The result file as it is (its tables of other parameter sets are kept), or {} when absent."""
    try:
        return json.loads((RESULTS / "boosting_phases.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def whole_fit(rows, est) -> list:
    """[kept model, tree stages, search wall, search CPU, comparison CPU, refit CPU] from the progress rows.

    The search ends at the last line before the comparison's ("validation area"); the comparison at
    that line; the refit, when the linear model is kept, runs from there to the end of the fit.
    """
    at = next((i for i, r in enumerate(rows) if str(r[1]).startswith("validation area")), None)
    end = rows[-1]
    stages = len(est.trace_["chosen"]) + bool(est.trace_["final_stage_rounds"])  # the search's, whichever is kept
    if at is None:  # compare_linear=False: the search is the whole fit
        return [est.model_kind_, stages, end[2], end[3], 0.0, 0.0]
    search = rows[at - 1]
    return [est.model_kind_, stages, search[2], search[3], round(rows[at][3] - search[3], 1),
            round(end[3] - rows[at][3], 1)]


if __name__ == "__main__":
    main()
