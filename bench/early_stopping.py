"""Per-input early stopping: mean cost and disagreement with the full model at δ in {0.001, 0.005, 0.02}.

    python bench/early_stopping.py [--splits 3] [--datasets digits mnist]
    # or one process per data set, then the results file from both:
    python bench/early_stopping.py --datasets digits --raw d.json --raw-only
    python bench/early_stopping.py --datasets mnist --raw m.json --raw-only
    python bench/early_stopping.py --merge d.json m.json
    # or one model added to the existing results file (its other records kept):
    python bench/early_stopping.py --datasets digits --models "neural (AnytimeNetClassifier)" --add

For each data set (the digits bank: 1,797 images, stored extractor costs; the MNIST bank: 5,000
images, 48 extractor groups, costs measured on this machine when missing) and each model (the linear
anytime classifier, CS-G-OMP at its defaults, LightGBM imported as tree stages, and the anytime
neural network at its defaults, one dense block per group in the linear order), over seeded
stratified splits of 30 % training, 50 % calibration and 20 % test rows (``--calibration-share``; the
calibration rows are held out from training, so the bound still holds: more of them lowers the
Clopper-Pearson bound's price, at the cost of a model fitted on fewer rows): at each δ (95 %
Clopper-Pearson bound), each stopping statistic (the logit gap, the probability margin) and each
rule ("auto" -- "scaled" when the rows allow it --, "shared", "per-stage"), the thresholds are
calibrated on the calibration rows' staged outputs exactly as ``export_model(stop_data=...)`` does,
and the test rows' stopping stages are compared with the full model (disagreement). The default
export (rule "auto", per statistic) is also written end to end: its manifest's thresholds must be the
ones calibrated here, the Python runtime's ``predict(stop="confident")`` must give the same stages,
and the compiled C runtime's stopping loop (``es_set_stop_statistic``) the same stage and label on
every test row. Reported: mean cost of the stopping stage / full cost, test disagreement, the
calibration bound, the share of rows stopping at each stage and the Python-vs-C agreement.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from _results import command_line, write_result  # noqa: I001  (bench/ is on sys.path)
from sklearn.model_selection import train_test_split

from edgeseq import AnytimeClassifier, AnytimeNetClassifier, from_lightgbm
from edgeseq.export.stopping import c_stop_stages, calibrate_stopping, group_features, staged_outputs
from edgeseq.export.writer import export_model
from edgeseq.runtime.model import ExportedModel
from edgeseq.runtime.stopping import STATISTICS, logit_gap, stop_stages, top2_margin

DELTAS = (0.001, 0.005, 0.02)
RULES = ("auto", "shared", "per-stage")  # "auto" is "scaled" whenever the rows allow it


def _data(name: str):
    from edgeseq.extractors.datasets import digits_data, mnist_data

    return digits_data() if name == "digits" else mnist_data()


def _models(d):
    import lightgbm

    def linear(X, y):
        return AnytimeClassifier(d.columns, d.costs, group_names=d.names).fit(X, y).fitted_sequence_

    def trees(X, y):
        lgb = lightgbm.LGBMClassifier(n_estimators=60, num_leaves=15, learning_rate=0.1, verbose=-1,
                                      n_jobs=1).fit(X, y)
        return from_lightgbm(lgb, d.columns, d.costs, group_names=d.names)

    def neural(X, y):
        return AnytimeNetClassifier(d.columns, d.costs, group_names=d.names, random_state=0).fit(X, y).stage_model_

    return {"linear (CS-G-OMP)": linear, "LightGBM trees": trees, "neural (AnytimeNetClassifier)": neural}


MODEL_NAMES = ("linear (CS-G-OMP)", "LightGBM trees", "neural (AnytimeNetClassifier)")


TEST_SHARE = 0.2


def _stopped(stats, labels, thr):
    """(stage, label index) per row under thresholds `thr`: what predict(stop="confident") returns."""
    stages = stop_stages(stats, thr)
    return stages, labels[stages, np.arange(labels.shape[1])]


def one_split(d, make, seed: int, tmp: Path, cal_share: float = 0.5) -> dict:
    Xa, Xte, ya, yte = train_test_split(d.X, d.y, test_size=TEST_SHARE, random_state=seed, stratify=d.y)
    Xtr, Xcal, ytr, ycal = train_test_split(Xa, ya, test_size=cal_share / (1 - TEST_SHARE), random_state=seed,
                                            stratify=ya)
    t0 = time.perf_counter()
    model = make(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    base = tmp / f"s{seed}_base"
    m = export_model(model, base, force=True)
    em = ExportedModel(base)
    cum = np.asarray(em.cum_cost, dtype=np.float64)
    cal_p, cal_z = staged_outputs(em, Xcal)  # what add_stopping calibrates on
    te_p, te_z = staged_outputs(em, Xte)
    te_lab = np.stack([p.argmax(axis=1) for p in te_p])
    te_stat = {"top2_margin": np.stack([top2_margin(p) for p in te_p]),
               "logit_gap": np.stack([logit_gap(z) for z in te_z])}
    closed = [not p.get("commit", True) for p in m["prefixes"]]
    out = {}
    for stat, rule, delta in [(st, r, dl) for st in STATISTICS for r in RULES for dl in DELTAS]:
        fitted = calibrate_stopping(cal_p, cum, delta, rule=rule, closed=closed, statistic=stat,
                                    scores_by_stage=cal_z)
        stage, lab = _stopped(te_stat[stat], te_lab, fitted.thresholds)
        row = {"cost_ratio": float(cum[stage].mean() / cum[-1]),
               "test_disagreement": float(np.mean(lab != te_lab[-1])),
               "test_accuracy_stopped": float(np.mean(em.classes[lab] == yte)),
               "test_accuracy_full": float(np.mean(em.classes[te_lab[-1]] == yte)),
               "calibration_disagreement": fitted.disagreement, "calibration_bound": fitted.disagreement_bound,
               "calibration_cost_ratio": fitted.mean_cost / fitted.full_cost, "rule_used": fitted.rule,
               "n_scan": fitted.n_test,
               "stop_share_test": (np.bincount(stage, minlength=len(cum)) / len(Xte)).tolist(),
               "n_calibration": int(len(Xcal)), "n_test": int(len(Xte))}
        if rule == "auto":  # the default export, end to end: Python runtime and compiled C on the test rows
            path = tmp / f"s{seed}_{stat}_{delta}"
            me = export_model(model, path, stop_data=(Xcal, ycal), max_disagreement=delta, force=True,
                              stop_rule=rule, stop_statistic=stat)
            assert me["stopping"]["thresholds"] == [float(t) for t in fitted.thresholds]
            py = ExportedModel(path).predict(group_features(me, Xte), stop="confident")
            assert np.array_equal(py.prefix, stage) and np.array_equal(py.label_index, lab)
            cs, cl = c_stop_stages(path, me, Xte)
            row["python_c_same_stage"] = float(np.mean((cs == py.prefix) & (cl == py.label_index)))
        out[f"{stat} {rule} {delta}"] = row
    return {"fit_s": fit_s, "n_stages": len(m["prefixes"]), "by_delta": out}


def run(datasets, splits: int, cal_share: float = 0.5, raw: Path | None = None, models=MODEL_NAMES) -> dict:
    res = {}
    with tempfile.TemporaryDirectory(prefix="edgeseq_stopbench_") as tmp:
        for name in datasets:
            d = _data(name)
            res[name] = {"n_rows": int(len(d.y)), "groups": len(d.columns), "costs_measured_on": d.measured_on,
                         "splits": splits, "load_before": Path("/proc/loadavg").read_text().split()[:3], "models": {}}
            for mname, make in _models(d).items():
                if mname not in models:
                    continue
                runs = res[name]["models"][mname] = []
                for seed in range(splits):
                    runs.append(one_split(d, make, seed, Path(tmp), cal_share))
                    res[name]["splits_done"] = min(len(r) for r in res[name]["models"].values())
                    if raw is not None:  # after every split: a run cut short keeps what it measured
                        raw.write_text(json.dumps(res))
                res[name]["load_after"] = Path("/proc/loadavg").read_text().split()[:3]
                for key in runs[0]["by_delta"]:
                    r = [x["by_delta"][key] for x in runs]
                    print(name, mname, key, f"cost {np.mean([x['cost_ratio'] for x in r]):.3f}",
                          f"disagree {np.mean([x['test_disagreement'] for x in r]):.4f}",
                          "C same " + (f"{min(x['python_c_same_stage'] for x in r):.4f}"
                                       if "python_c_same_stage" in r[0] else "-"), flush=True)
    return res


def _tables(res: dict, splits: int) -> list[dict]:
    rows, shares = [], []
    for name, dres in res.items():
        for mname, runs in dres["models"].items():
            if not runs:  # a run cut short before this model's first split
                continue
            for stat, rule, delta in [(st, r, dl) for st in STATISTICS for r in RULES for dl in DELTAS]:
                r = [x["by_delta"][f"{stat} {rule} {delta}"] for x in runs]

                def ms(key, fmt="{:.3f}"):
                    v = np.array([x[key] for x in r])
                    return f"{fmt.format(v.mean())} ± {fmt.format(v.std())}"
                used = sorted({x["rule_used"] for x in r})
                shown = rule + ("" if used == [rule] else f" ({'/'.join(used)})")
                rows.append([name, mname, stat, shown, f"{delta:g}",
                             ms("cost_ratio"), ms("test_disagreement", "{:.4f}"),
                             f"{max(x['test_disagreement'] for x in r):.4f}", ms("calibration_bound", "{:.4f}"),
                             ms("test_accuracy_stopped"), ms("test_accuracy_full"),
                             f"{100 * min(x['python_c_same_stage'] for x in r):.1f} %" if "python_c_same_stage" in r[0]
                             else "-"])
            r = [x["by_delta"]["logit_gap auto 0.005"] for x in runs]
            width = max(len(x["stop_share_test"]) for x in r)  # an import's stage count may differ per split
            share = np.mean([np.pad(x["stop_share_test"], (0, width - len(x["stop_share_test"]))) for x in r], axis=0)
            shares.append([name, mname, " ".join(f"{s:.2f}" for s in share)
                           + ("" if all(len(x["stop_share_test"]) == width for x in r) else
                              " (stage counts differ per split: " + ", ".join(str(len(x["stop_share_test"])) for x in r) + ")")])
    done = {k: v.get("splits_done", v.get("splits", splits)) for k, v in res.items()}
    n_cal = {name: dres["models"][next(iter(dres["models"]))][0]["by_delta"]["logit_gap auto 0.005"]["n_calibration"]
             for name, dres in res.items()}
    return [
        {"title": f"Early stopping at δ (95 % Clopper-Pearson bound on the calibration rows; mean ± sd over "
                  f"splits: {', '.join(f'{k} {done[k]}' for k in res)}; calibration rows: "
                  f"{', '.join(f'{k} {v}' for k, v in n_cal.items())}; Python = C: the default export, end to end)",
         "columns": ["data", "model", "statistic", "rule (used)", "δ", "mean cost / full cost", "test disagreement", "worst split",
                     "calibration bound", "accuracy (stopped)", "accuracy (full)", "Python = C stage"],
         "rows": rows},
        {"title": "Share of test rows stopping at each stage (stage 0 first), the default (logit gap, auto rule), "
                  "δ = 0.005, mean over splits",
         "columns": ["data", "model", "share per stage"], "rows": shares},
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--datasets", nargs="+", default=["digits", "mnist"], choices=["digits", "mnist"])
    ap.add_argument("--calibration-share", type=float, default=0.5,
                    help="share of all rows held out for calibration (the test share is 0.2; training the rest)")
    ap.add_argument("--raw", type=Path, default=Path(tempfile.gettempdir()) / "edgeseq_early_stopping_raw.json",
                    help="where the raw results go (kept should rendering the tables fail)")
    ap.add_argument("--raw-only", action="store_true", help="write only --raw, no results file (for --merge)")
    ap.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    ap.add_argument("--add", action="store_true",
                    help="add this run's models to the existing results file, keeping its other models' records")
    ap.add_argument("--merge", nargs="+", type=Path, default=None,
                    help="render the results file from raw files of earlier runs (data sets run in parallel)")
    args = ap.parse_args()
    if not 0.0 < args.calibration_share < 1.0 - TEST_SHARE:
        ap.error(f"--calibration-share must lie in (0, {1.0 - TEST_SHARE:g})")
    if args.merge:
        res = {k: v for f in args.merge for k, v in json.loads(f.read_text()).items()}
        args.splits = max(v.get("splits", args.splits) for v in res.values())
    else:
        res = run(args.datasets, args.splits, args.calibration_share, args.raw, args.models)
        args.raw.write_text(json.dumps(res))
        if args.raw_only:
            print(f"wrote {args.raw}")
            return
        if args.add:  # model by model into what the results file already holds
            from _results import RESULTS
            old = json.loads((RESULTS / "early_stopping.json").read_text(encoding="utf-8"))
            merged = old["results"]
            for name, dres in res.items():
                merged.setdefault(name, dres)["models"].update(dres["models"])
                merged[name].setdefault("added", []).append({"models": list(dres["models"]), "command": command_line(),
                                                             "load_before": dres["load_before"],
                                                             "load_after": dres.get("load_after")})
            res = merged
    path = write_result("early_stopping", {"splits": args.splits, "deltas": list(DELTAS),
                                           "split_shares": {"train": round(1.0 - TEST_SHARE - args.calibration_share, 6),
                                                            "calibration": args.calibration_share, "test": TEST_SHARE},
                                           "results": res,
                                           "tables": _tables(res, args.splits)},
                        command_line() if not (args.merge or args.add) else "; ".join(
                            [f"python bench/early_stopping.py --splits {v['splits']} "
                             f"--datasets {k} --raw {k}.json --raw-only" for k, v in res.items()]
                            + [f"python bench/early_stopping.py --merge {' '.join(f'{k}.json' for k in res)}"]
                            + [a["command"] for v in res.values() for a in v.get("added", [])]))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
