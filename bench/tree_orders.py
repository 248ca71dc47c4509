"""The nonlinear options side by side: AFR, a LightGBM ensemble in boosting order, the same ensemble
sequenced by cost, LightGBM's own cost-efficient boosting (CEGB), and the linear CS-G-OMP and CS-G-FR
classifiers.

    .venv/bin/python bench/tree_orders.py [--splits 3] [--datasets breast_cancer digits interactions]
    .venv/bin/python bench/tree_orders.py --datasets mnist --merge [--methods AFR ...]

Data: breast cancer (10 measurements × mean/se/worst = 10 groups, costs 1..10), digits (8 pixel-row
groups, unit costs), a synthetic problem whose label depends on interactions within and across
groups (6 groups of 4 columns, costs 1, 2, 4, 8, 16, 32; the label is a within-group product of the
cheapest group AND a cross-group sum, OR a threshold on the most expensive group, 5 % flipped), and
the MNIST bank (5,000 images, 48 extractor groups, 3,130 columns, costs in µs measured on this
machine; needs edgeseq[images] and its feature cache). Per stratified 70/30 split, the training part
is split again 75/25: LightGBM (100 rounds, 15 leaves) is trained on the 75 %, and
`edgeseq.sequence_trees` uses the 25 % to choose the order and refit the readouts; boosting order
uses the same ensemble, so the two differ only in order and readout. LightGBM-CEGB trains on the
same 75 % with `cegb_penalty_feature_coupled` = the cost of each feature's group (LightGBM charges
per feature, edgeseq per group: every feature of a group carries the group's cost) and is imported
in boosting order. LightGBM-CEGB (tuned) does the same for every ``cegb_tradeoff`` in a grid
(1e-3 .. 100) and keeps the one with the best step timeliness on the 25 %. AFR, CS-G-OMP, CS-G-FR and
AnytimeBoosting (stagewise; it holds out its own 25 % for early stopping, the candidate scores and
the comparison with the linear model; with its default ``refit=True`` kept trees are then regrown on
the whole training part) fit the whole training part; "AnytimeBoosting (stagewise, no refit)" is the
same fit with ``refit=False`` (the search's trees kept as grown).

Scores per split: full-budget test accuracy; the step accuracy-timeliness over budgets uniform in
[0, total cost] (the mean test accuracy of a random budget); the α-timeliness (docs/evaluation.md) on test
accuracy, with c_α taken from the CS-G-OMP training-accuracy curve of the same split by the plateau
rule (on banks whose costs span orders of magnitude the [0, total cost] average is dominated by the
final accuracy; [0, c_α] looks at the budgets where the orders differ); fit seconds (wall clock, and for AFR and the
linear models also CPU seconds of the process, which a shared, loaded machine inflates less); for the
cost-sequenced ensemble also the seconds of `sequence_trees` alone (`sequence_s`, `sequence_cpu_s`). The anytime
curve (cumulative cost, test accuracy per stage) of every method and split is kept in the result
file, so the docs' figures are drawn from it. Summaries are mean ± std over the splits.

``--merge`` keeps the data sets and methods of the existing result file that this run does not
compute, and of the methods it does compute the splits (seeds) it does not: a slow data set can be
run on its own, a split at a time, by several processes at once (the file is re-read when it is
written, and every split records the command that fitted it). ``--methods`` limits the run to some
methods (the CS-G-OMP reference curve is fitted too, since c_α needs it, unless a ``--merge`` run on the
MNIST bank finds that split's CS-G-OMP record on the same calibration: `recorded_reference`). The file is rewritten after every
split, so an interrupted run keeps the splits it finished. ``--note`` keeps a sentence with the
run's records (what was left out, how loaded the machine was); every split records the load
averages at its start and end (``load_start``, ``load_end``). ``--merge-from OTHER.json`` fits
nothing: it copies the records (and stopped fits) of ``--datasets`` × ``--methods`` from another
result file into this one and recomputes the summaries, so runs made on two branches join without hand editing.
``--rescore`` fits nothing either: after the CS-G-OMP reference of a data set was fitted again (new
defaults change its training curve, so c_α), every other recorded split of that data set is scored
against it, its α-timeliness recomputed from its stored test curve (`rescore`).
``--mnist-costs bench/mnist_costs.json`` scores the MNIST bank with that stored calibration instead of the
cached one (re-measured whenever the extractor code changes), so rows recorded on different days compare.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from afr_trees import digits_groups, step_timeliness  # noqa: I001  (bench/ is on sys.path)
from _results import RESULTS, command_line, machine_info, write_result
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

from edgeseq import AFRClassifier, AnytimeBoostingClassifier, AnytimeClassifier, from_lightgbm, sequence_trees
from edgeseq.evaluate import AnytimeCurve
from edgeseq.metrics.timeliness import alpha_stopping_cost, plateau_alpha, timeliness

METHODS = ("AFR", "LightGBM (boosting order)", "LightGBM (cost-sequenced)", "LightGBM-CEGB", "LightGBM-CEGB (tuned)",
           "AnytimeBoosting (stagewise)", "AnytimeBoosting (stagewise, no refit)", "CS-G-OMP (linear)", "CS-G-FR (linear)")
CEGB_TRADEOFFS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)  # LightGBM-CEGB (tuned): the grid searched on validation
DATASETS = ("breast_cancer", "digits", "interactions", "mnist")
SCORES = ("step_timeliness", "alpha_timeliness", "final_accuracy", "fit_s")
LGBM = dict(n_estimators=100, num_leaves=15, learning_rate=0.1, verbose=-1, n_jobs=1, deterministic=True,
            force_row_wise=True)


def interactions(n: int = 4000, seed: int = 0):
    """Label = (x0·x1 > 0 and x4 + x8 > 0) or x20 > 1.5, with 5 % of the labels flipped.

    x0·x1 is an interaction within the cheapest group (no linear model sees it), x4 + x8 one across
    groups 2 and 3, and x20 belongs to the most expensive group.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 24))
    y = (((X[:, 0] * X[:, 1] > 0) & (X[:, 4] + X[:, 8] > 0)) | (X[:, 20] > 1.5)).astype(int)
    flip = rng.random(n) < 0.05
    return X, np.where(flip, 1 - y, y), [list(range(4 * g, 4 * g + 4)) for g in range(6)], 2.0 ** np.arange(6)


MNIST_COSTS = {"path": None}  # --mnist-costs: the calibration every MNIST method of a run is scored with


def mnist():
    """The MNIST bank: features from the shared cache; extractor costs as measured on this machine
    (the cached calibration), or from the calibration file given with --mnist-costs, so runs made on
    different days (or loads) score every method with the same costs."""
    from edgeseq.extractors import mnist as bank
    from edgeseq.extractors.calibrate import read_calibration
    from edgeseq.extractors.datasets import mnist_data
    d = mnist_data()
    costs = np.asarray(d.costs, dtype=float)
    if MNIST_COSTS["path"]:
        doc = read_calibration(MNIST_COSTS["path"], bank=bank.bank(), sample=d.images[0])  # names and widths checked
        costs = np.array([g["cost"] for g in doc["groups"]], dtype=float)
        MNIST_COSTS["measured_on"] = doc.get("measured_on", {}).get("date")
    MNIST_COSTS["total"] = float(costs.sum())
    return d.X, d.y, [list(c) for c in d.columns], costs


def datasets(names):
    every = {"breast_cancer": lambda: (*load_breast_cancer(return_X_y=True), [[i, i + 10, i + 20] for i in range(10)],
                                       np.arange(1.0, 11.0)),
             "digits": lambda: (*load_digits(return_X_y=True), *digits_groups()),
             "interactions": interactions,
             "mnist": mnist}
    for n in names:
        yield n, every[n]()


def staged_accuracy(model, classes, Xt, yt) -> list[float]:
    """Test accuracy of every stage of a TreeStageModel (labels = the most probable class)."""
    out = []
    for z in model.staged_decision(Xt):
        p = model.apply_link(z)
        out.append(float(np.mean(classes[np.argmax(p, axis=1)] == yt)))
    return out


def estimator_curve(est, X, y) -> list[float]:
    """Accuracy of every stage of a fitted edgeseq classifier (AFR or linear) on (X, y)."""
    return [float(np.mean(p == y)) for p in est.staged_predict(X)]


def reference_c_alpha(cum_cost, train_accuracy) -> tuple[float, float]:
    """(α, c_α) from the CS-G-OMP *training* accuracy curve by the plateau rule (docs/evaluation.md)."""
    ref = AnytimeCurve(costs=cum_cost, values=train_accuracy, group_names=[""] * (len(cum_cost) - 1))
    alpha = plateau_alpha(ref)
    return alpha, alpha_stopping_cost(ref, alpha)


def step_curve_mean(cum_cost, acc, c_alpha: float) -> float:
    """Mean test accuracy over budgets uniform in [0, c_α] of the step curve (the stage available)."""
    curve = AnytimeCurve(costs=cum_cost, values=acc, group_names=[""] * (len(cum_cost) - 1))
    return timeliness(curve, c_alpha, kind="step")


def _lightgbm_methods(X, Xf, yf, Xv, yv, Xt, yt, groups, costs, wanted, extra: dict) -> dict:
    """The LightGBM rows; ``extra`` receives the sequencing's own wall and CPU seconds (fit_s adds LightGBM's)."""
    import lightgbm as lgb
    row = {}
    if wanted & {"LightGBM (boosting order)", "LightGBM (cost-sequenced)"}:
        t0 = time.perf_counter()
        clf = lgb.LGBMClassifier(**LGBM).fit(Xf, yf)
        boosting = from_lightgbm(clf, groups, costs)
        t_lgbm = time.perf_counter() - t0
        row["LightGBM (boosting order)"] = (t_lgbm, boosting.cum_cost,
                                            staged_accuracy(boosting, clf.classes_, Xt, yt))
        if "LightGBM (cost-sequenced)" in wanted:
            t0, c0 = time.perf_counter(), time.process_time()
            costly = sequence_trees(boosting, Xv, yv)
            t_seq = time.perf_counter() - t0
            extra["LightGBM (cost-sequenced)"] = {"sequence_s": t_seq, "sequence_cpu_s": time.process_time() - c0}
            row["LightGBM (cost-sequenced)"] = (t_lgbm + t_seq, costly.cum_cost,
                                                staged_accuracy(costly, clf.classes_, Xt, yt))
    if "LightGBM-CEGB (tuned)" in wanted:
        t0 = time.perf_counter()
        cm, classes = _tuned_cegb(X, Xf, yf, Xv, yv, groups, costs, extra)
        row["LightGBM-CEGB (tuned)"] = (time.perf_counter() - t0, cm.cum_cost, staged_accuracy(cm, classes, Xt, yt))
    if "LightGBM-CEGB" in wanted:
        feature_cost = np.zeros(X.shape[1])
        for g, cols in enumerate(groups):
            feature_cost[cols] = costs[g]
        t0 = time.perf_counter()
        cegb = lgb.LGBMClassifier(**LGBM, cegb_tradeoff=1.0,
                                  cegb_penalty_feature_coupled=(feature_cost / feature_cost.sum()).tolist()).fit(Xf, yf)
        cm = from_lightgbm(cegb, groups, costs)
        row["LightGBM-CEGB"] = (time.perf_counter() - t0, cm.cum_cost, staged_accuracy(cm, cegb.classes_, Xt, yt))
    return row


def _tuned_cegb(X, Xf, yf, Xv, yv, groups, costs, extra: dict):
    """LightGBM-CEGB with ``cegb_tradeoff`` chosen on the validation rows by step timeliness over
    [0, total cost]; every column carries its group's cost in ``cegb_penalty_feature_coupled``."""
    import lightgbm as lgb
    feature_cost = np.zeros(X.shape[1])
    for g, cols in enumerate(groups):
        feature_cost[cols] = costs[g]
    best = None
    for tradeoff in CEGB_TRADEOFFS:
        est = lgb.LGBMClassifier(**LGBM, cegb_tradeoff=tradeoff,
                                 cegb_penalty_feature_coupled=feature_cost.tolist()).fit(Xf, yf)
        model = from_lightgbm(est, groups, costs)
        score = step_timeliness(model.cum_cost, staged_accuracy(model, est.classes_, Xv, yv), float(np.sum(costs)))
        if best is None or score > best[0]:
            best = (score, tradeoff, model, est.classes_)
    extra["LightGBM-CEGB (tuned)"] = {"cegb_tradeoff": best[1], "validation_step_timeliness": best[0]}
    return best[2], best[3]


def linear_choice(est) -> dict:
    """A linear estimator's chosen penalty and basis, and the lowest cross-validated loss of each basis."""
    return {"l2": float(est.l2_), "whiten": bool(est.whiten_),
            "cv_best": {k: float(np.min(v)) for k, v in getattr(est, "cv_scores_", {}).items()}}


def one_split(X, y, groups, costs, seed: int, wanted: set, time_limit: float | None = None,
              unfinished: dict | None = None, reference: tuple | None = None) -> dict:
    """Every wanted method on one stratified split: per method the scores and the test anytime curve.

    A stagewise fit still running after `time_limit` wall seconds is stopped at its next stage line
    and left out of the result; `unfinished` then receives its record (seed, wall and CPU seconds,
    the stage lines with their wall and CPU times, the limit). `reference` (α, c_α), given only when
    CS-G-OMP is not wanted, replaces its fit (`recorded_reference`: on the MNIST bank that fit is ~8 minutes).
    """
    Xa, Xt, ya, yt = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    Xf, Xv, yf, yv = train_test_split(Xa, ya, test_size=0.25, random_state=seed, stratify=ya)
    extra: dict = {}  # per method, further measurements kept in its record
    row = _lightgbm_methods(X, Xf, yf, Xv, yv, Xt, yt, groups, costs, wanted, extra)
    cpu = {}  # CPU seconds of the fit, for the methods whose fit-time target matters (AFR)
    if reference is not None:
        alpha, c_alpha = reference
    else:
        t0 = time.perf_counter()
        omp = AnytimeClassifier(groups, costs).fit(Xa, ya)
        row["CS-G-OMP (linear)"] = (time.perf_counter() - t0, omp.cum_cost_, estimator_curve(omp, Xt, yt))
        extra["CS-G-OMP (linear)"] = linear_choice(omp)
        alpha, c_alpha = reference_c_alpha(omp.cum_cost_, estimator_curve(omp, Xa, ya))
    for name, make in (("CS-G-FR (linear)", lambda: AnytimeClassifier(groups, costs, method="fr")),
                       ("AFR", lambda: AFRClassifier(groups, costs)),
                       ("AnytimeBoosting (stagewise)",
                        lambda: AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=seed)),
                       ("AnytimeBoosting (stagewise, no refit)",
                        lambda: AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=seed, refit=False))):
        if name in wanted:
            t0, c0 = time.perf_counter(), time.process_time()
            est = make()
            if "AnytimeBoosting" in name:  # a line per stage, kept with its wall and CPU time (the MNIST fit is long)
                progress = StageProgress(name, seed, time_limit)
                try:
                    est = est.fit(Xa, ya, progress=progress)
                except FitTimeLimit:
                    if unfinished is not None:
                        unfinished[name] = {"seed": seed, "wall_s": time.perf_counter() - t0,
                                            "cpu_s": time.process_time() - c0, "time_limit_s": time_limit,
                                            "stages": progress.lines}
                    continue
                extra[name] = {"stages": progress.lines}
            else:
                est = est.fit(Xa, ya)
            row[name] = (time.perf_counter() - t0, est.cum_cost_, estimator_curve(est, Xt, yt))
            cpu[name] = time.process_time() - c0
            if hasattr(est, "l2_"):
                extra.setdefault(name, {}).update(linear_choice(est))
            if hasattr(est, "model_kind_"):
                extra.setdefault(name, {}).update(
                    {"model_kind": est.model_kind_, "restarts": est.trace_["restarts"],
                     **({"comparison": est.comparison_} if hasattr(est, "comparison_") else {})})
    horizon = float(np.sum(costs))
    return {m: {"seed": seed, "fit_s": t, "final_accuracy": acc[-1], "step_timeliness": step_timeliness(cc, acc, horizon),
                "alpha": alpha, "c_alpha": c_alpha, "alpha_timeliness": step_curve_mean(cc, acc, c_alpha),
                "cum_cost": [float(c) for c in cc], "accuracy": acc, **({"fit_cpu_s": cpu[m]} if m in cpu else {}), **extra.get(m, {})}
            for m, (t, cc, acc) in row.items() if m in wanted}


def recorded_reference(name: str, seed: int, costs_total: float | None) -> tuple | None:
    """(α, c_α) of the CS-G-OMP split with this seed already in the result file, or None.

    Only MNIST records say which calibration scored them (`costs_total`), so only they are reused, and
    only when that total is this run's: the same seed gives the same split and the same reference fit,
    so a run of other methods need not fit CS-G-OMP again (--merge runs; its records say so)."""
    path = RESULTS / "tree_orders.json"
    if name != "mnist" or costs_total is None or not path.exists():
        return None
    runs = json.loads(path.read_text(encoding="utf-8")).get("runs", {})
    r = reference_split(runs.get(name, {}), seed, costs_total)
    return None if r is None else (float(r["alpha"]), float(r["c_alpha"]))


def reference_split(by_method: dict, seed: int, costs_total: float | None) -> dict | None:
    """The CS-G-OMP record of a data set's runs with this seed and calibration (`costs_total`, None
    off the MNIST bank), or None: the split whose training curve gives every split of that seed its c_α."""
    for r in by_method.get("CS-G-OMP (linear)", {}).get("splits", []):
        if r["seed"] == seed and r.get("costs_total") == costs_total and "c_alpha" in r:
            return r
    return None


class FitTimeLimit(Exception):
    """Raised from a stagewise fit's progress line once its wall time exceeds the run's --time-limit."""


class StageProgress:
    """A stagewise fit's progress callback: prints each line to stderr and keeps [wall s, CPU s, line];
    past `limit` wall seconds it stops the fit (`FitTimeLimit`) at the line."""

    def __init__(self, name: str, seed: int, limit: float | None = None):
        self.name, self.seed, self.limit = name, seed, limit
        self.t0, self.c0, self.lines = time.perf_counter(), time.process_time(), []

    def __call__(self, line: str) -> None:
        wall, cpu = time.perf_counter() - self.t0, time.process_time() - self.c0
        self.lines.append([round(wall, 1), round(cpu, 1), line])
        print(f"  [{wall:7.1f} s wall, {cpu:7.1f} s CPU] {self.name} split {self.seed}: {line}", file=sys.stderr,
              flush=True)
        if self.limit is not None and wall > self.limit:
            raise FitTimeLimit(line)


def summary(runs: list[dict]) -> dict:
    """Mean and standard deviation of every score over the splits of one method."""
    return {k: {"mean": float(np.mean([r[k] for r in runs])), "std": float(np.std([r[k] for r in runs]))}
            for k in SCORES}


def tables(runs: dict) -> list[dict]:
    rows = []
    for name, by_method in runs.items():
        for m in METHODS:
            if m not in by_method:
                continue
            s = summary(by_method[m]["splits"])
            cpu = [r.get("fit_cpu_s") for r in by_method[m]["splits"]]
            rows.append([name, m, len(by_method[m]["splits"]),
                         *(f"{s[k]['mean']:.3f} ± {s[k]['std']:.3f}" for k in SCORES),
                         f"{np.mean(cpu):.1f}" if None not in cpu else "n/a"])
    return [{"title": "Nonlinear options: test accuracy-timeliness over budgets uniform in [0, total cost] and in "
                      "[0, c_α] (c_α from the CS-G-OMP training curve, plateau rule), full-budget accuracy and fit "
                      "time, mean ± std over the splits",
             "columns": ["data set", "method", "splits", "step timeliness [0, total]", "α-timeliness [0, c_α]",
                         "final accuracy", "fit (s)", "fit CPU (s)"], "rows": rows}]


def rescore(runs: dict, names) -> dict:
    """Every recorded split of `names` scored again against its data set's current reference: (α, c_α)
    of the CS-G-OMP record of the same seed (and, on the MNIST bank, the same calibration), and the
    α-timeliness recomputed from the split's stored test curve. Nothing is fitted: a method's test
    curve does not depend on the reference, only the budget range it is averaged over does. For
    when the reference row was fitted again (its defaults changed) and the others need not be.
    Returns the changed method records ({name: {method: record}}), ready for `save`."""
    changed: dict = {}
    for name in names:
        by_method = runs.get(name, {})
        for m, record in by_method.items():
            for r in record["splits"]:
                o = reference_split(by_method, r["seed"], r.get("costs_total"))
                if o is None or r is o or (r["alpha"], r["c_alpha"]) == (o["alpha"], o["c_alpha"]):
                    continue
                r.update(alpha=o["alpha"], c_alpha=o["c_alpha"],
                         alpha_timeliness=step_curve_mean(r["cum_cost"], r["accuracy"], o["c_alpha"]),
                         rescored="α-timeliness recomputed from this split's stored test curve against the CS-G-OMP "
                                  f"record of its seed, fitted by: {o.get('command', 'an unrecorded command')}")
                changed.setdefault(name, {})[m] = record
    return changed


def save(mine: dict, merge: bool, command: str, unfinished: dict | None = None) -> None:
    """Write the result file: this run's records over those already in the file (re-read now, so two
    merging runs on different data sets or methods do not undo each other).

    ``unfinished`` (data set -> method -> record) holds fits stopped by --time-limit; they are kept
    under the file's ``unfinished`` key (a later finished run of the same data set and method
    replaces its entry) and listed in the table with their wall and CPU seconds as lower bounds."""
    path = RESULTS / "tree_orders.json"
    old = json.loads(path.read_text(encoding="utf-8")) if merge and path.exists() else {}
    runs, stopped = old.get("runs", {}), old.get("unfinished", {})
    for name, by_method in mine.items():
        for m, record in by_method.items():  # the recorded splits of seeds this run did not fit are kept
            seeds = {r["seed"] for r in record["splits"]}
            kept = [r for r in runs.get(name, {}).get(m, {}).get("splits", []) if r["seed"] not in seeds]
            runs.setdefault(name, {})[m] = {**record, "splits": sorted(kept + record["splits"],
                                                                       key=lambda r: r["seed"])}
        for m, record in by_method.items():  # a finished split replaces the stopped fit of its seed
            if stopped.get(name, {}).get(m, {}).get("seed") in [r["seed"] for r in record["splits"]]:
                stopped[name].pop(m)
    for name, by_method in (unfinished or {}).items():
        stopped.setdefault(name, {}).update(by_method)
    # a method this script no longer runs (a row renamed when a default changed) is dropped, not kept
    # under a name that now means another fit
    runs = {name: {m: r for m, r in runs[name].items() if m in METHODS} for name in DATASETS if name in runs}
    stopped = {name: {m: r for m, r in stopped[name].items() if m in METHODS} for name in DATASETS
               if stopped.get(name)}
    results = {name: {m: summary(v["splits"]) for m, v in by_method.items()} for name, by_method in runs.items()}
    table = tables(runs)
    for name, by_method in stopped.items():
        for m, r in by_method.items():
            table[0]["rows"].append([name, m, f"0 (split {r['seed']} stopped at {len(r['stages'])} stage lines)", "—",
                                     "—", "—", f"> {r['wall_s']:.0f}", f"> {r['cpu_s']:.0f}"])
    write_result("tree_orders", {"results": results, "runs": runs, "tables": table,
                                 **({"unfinished": stopped} if stopped else {})}, command)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--datasets", nargs="+", default=["breast_cancer", "digits", "interactions"], choices=DATASETS)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--merge", action="store_true", help="keep what the existing result file has and this run not")
    ap.add_argument("--first-split", type=int, default=0,
                    help="run splits (seeds) first-split .. first-split + splits - 1; with --merge the splits of "
                         "other seeds already recorded for a method are kept beside them, re-read when the file is "
                         "written (a slow data set can be completed one split at a time, several at once)")
    ap.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                    help="stop a stagewise boosting fit at its first stage line after this many wall seconds and "
                         "record how far it got (the file's 'unfinished' key) instead of its scores")
    ap.add_argument("--note", default=None,
                    help="a sentence kept with this run's records (what was left out or how the machine was loaded)")
    ap.add_argument("--mnist-costs", default=None, metavar="GROUPS_JSON",
                    help="score the MNIST bank with this calibration (e.g. bench/mnist_costs.json) instead of "
                         "the cached one; its file, date and total are kept in every MNIST split record")
    ap.add_argument("--merge-from", default=None, metavar="JSON",
                    help="copy the records of --datasets and --methods from another tree_orders.json into the result "
                         "file (summaries and tables recomputed) and fit nothing: joins two branches' runs")
    ap.add_argument("--rescore", action="store_true",
                    help="fit nothing: score every recorded split of --datasets against the CS-G-OMP record of its "
                         "seed (α, c_α; α-timeliness from the stored test curve), after that reference was refitted")
    args = ap.parse_args()
    if args.rescore:
        path = RESULTS / "tree_orders.json"
        changed = rescore(json.loads(path.read_text(encoding="utf-8")).get("runs", {}), args.datasets)
        save(changed, True, command_line())
        print(f"rescored {sum(len(v) for v in changed.values())} method records in {path}")
        return
    if args.merge_from:
        other = json.loads(open(args.merge_from, encoding="utf-8").read())
        picked, stopped = ({n: {m: r for m, r in other.get(key, {}).get(n, {}).items() if m in args.methods}
                            for n in args.datasets} for key in ("runs", "unfinished"))
        save({n: v for n, v in picked.items() if v}, True, command_line(), {n: v for n, v in stopped.items() if v})
        print(f"merged {sum(len(v) for v in picked.values())} method records and "
              f"{sum(len(v) for v in stopped.values())} stopped fits into {RESULTS / 'tree_orders.json'}")
        return
    command, wanted = command_line(), set(args.methods)
    MNIST_COSTS["path"] = args.mnist_costs
    mine: dict = {}
    for name, (X, y, groups, costs) in datasets(args.datasets):
        fresh: dict = {m: [] for m in METHODS if m in wanted}
        for seed in range(args.first_split, args.first_split + args.splits):
            load_start = machine_info()["load_end"]  # the load when this split starts (1, 5, 15 minutes)
            stopped: dict = {}
            # decided once: a merging run that does not fit CS-G-OMP takes its recorded (α, c_α)
            reference = recorded_reference(name, seed, MNIST_COSTS.get("total")) \
                if args.merge and "CS-G-OMP (linear)" not in wanted else None
            if reference is not None:
                print(name, seed, f"c_α {reference[1]:g} from the recorded CS-G-OMP split (not fitted again)", flush=True)
            for m, record in one_split(X, y, groups, costs, seed, wanted, args.time_limit, stopped,
                                       reference).items():
                record.update(load_start=load_start, load_end=machine_info()["load_end"], command=command)
                if reference is not None:
                    record["reference"] = "the recorded CS-G-OMP split of this seed and calibration"
                if name == "mnist":  # which calibration scored it: runs on other costs are not comparable
                    record.update(costs_file=MNIST_COSTS["path"] or "the cached calibration",
                                  costs_measured_on=MNIST_COSTS.get("measured_on"), costs_total=MNIST_COSTS["total"])
                fresh[m].append(record)
                mine.setdefault(name, {})[m] = {"splits": fresh[m], "command": command,
                                                "load": machine_info()["load_end"],
                                                **({"note": args.note} if args.note else {})}
            for m, r in stopped.items():
                r.update(command=command, load_start=load_start, load_end=machine_info()["load_end"],
                         **({"note": args.note} if args.note else {}))
                print(name, seed, m, f"stopped after {r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU", flush=True)
            save(mine, args.merge, command, {name: stopped} if stopped else None)
            for m in fresh:
                if fresh[m] and fresh[m][-1]["seed"] == seed:
                    print(name, seed, m, {k: round(fresh[m][-1][k], 3) for k in SCORES}, flush=True)
    print(f"wrote {RESULTS / 'tree_orders.json'}")


if __name__ == "__main__":
    main()
