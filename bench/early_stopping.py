"""Per-input early stopping: mean cost and disagreement with the full model at δ in {0.001, 0.005, 0.02}.

    python bench/early_stopping.py [--splits 3] [--datasets digits mnist]

For each data set (the digits bank: 1,797 images, stored extractor costs; the MNIST bank: 5,000
images, 48 extractor groups, costs measured on this machine when missing) and each model (the linear
anytime classifier, CS-G-OMP at its defaults, and LightGBM imported as tree stages), over seeded
stratified splits of 30 % training, 50 % calibration and 20 % test rows (``--calibration-share``; the
calibration rows are held out from training, so the bound still holds: more of them lowers the
Clopper-Pearson bound's price, at the cost of a model fitted on fewer rows): the model is exported with
``stop_data`` = the calibration rows at each δ (95 % Clopper-Pearson bound) with each rule (one shared
threshold, or per-stage thresholds shaped on half the calibration rows), and on the test rows the
Python runtime's ``predict(stop="confident")`` is compared with the full model (disagreement) and
with the compiled C runtime's stopping loop (``es_set_stop``: same stage and label on every row).
Reported: mean cost of the stopping stage / full cost, test disagreement, the calibration bound, the
share of rows stopping at each stage and the Python-vs-C agreement.
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

from edgeseq import AnytimeClassifier, from_lightgbm
from edgeseq.export.stopping import c_stop_stages, group_features
from edgeseq.export.writer import export_model
from edgeseq.runtime.model import ExportedModel

DELTAS = (0.001, 0.005, 0.02)
RULES = ("shared", "per-stage")


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

    return {"linear (CS-G-OMP)": linear, "LightGBM trees": trees}


TEST_SHARE = 0.2


def one_split(d, make, seed: int, tmp: Path, cal_share: float = 0.5) -> dict:
    Xa, Xte, ya, yte = train_test_split(d.X, d.y, test_size=TEST_SHARE, random_state=seed, stratify=d.y)
    Xtr, Xcal, ytr, ycal = train_test_split(Xa, ya, test_size=cal_share / (1 - TEST_SHARE), random_state=seed,
                                            stratify=ya)
    t0 = time.perf_counter()
    model = make(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    out = {}
    for rule, delta in [(r, d) for r in RULES for d in DELTAS]:
        path = tmp / f"s{seed}_{delta}"
        m = export_model(model, path, stop_data=(Xcal, ycal), max_disagreement=delta, force=True, stop_rule=rule)
        em = ExportedModel(path)
        feats = group_features(m, Xte)
        stopped, full = em.predict(feats, stop="confident"), em.predict(feats)
        cost = em.cum_cost[stopped.prefix]
        stage, label = c_stop_stages(path, m, Xte)
        st = m["stopping"]
        out[f"{rule} {delta}"] = {"cost_ratio": float(cost.mean() / em.cum_cost[-1]),
                      "test_disagreement": float(np.mean(stopped.label_index != full.label_index)),
                      "test_accuracy_stopped": float(np.mean(stopped.label == yte)),
                      "test_accuracy_full": float(np.mean(full.label == yte)),
                      "calibration_disagreement": st["disagreement"], "calibration_bound": st["disagreement_bound"],
                      "threshold": st["thresholds"][0],
                      "stop_share_test": (np.bincount(stopped.prefix, minlength=em.n_prefixes) / len(Xte)).tolist(),
                      "python_c_same_stage": float(np.mean((stage == stopped.prefix) & (label == stopped.label_index))),
                      "n_calibration": int(len(Xcal)), "n_test": int(len(Xte))}
    return {"fit_s": fit_s, "n_stages": len(m["prefixes"]), "by_delta": out}


def run(datasets, splits: int, cal_share: float = 0.5) -> dict:
    res = {}
    with tempfile.TemporaryDirectory(prefix="edgeseq_stopbench_") as tmp:
        for name in datasets:
            d = _data(name)
            res[name] = {"n_rows": int(len(d.y)), "groups": len(d.columns), "costs_measured_on": d.measured_on,
                         "models": {}}
            for mname, make in _models(d).items():
                runs = [one_split(d, make, seed, Path(tmp), cal_share) for seed in range(splits)]
                res[name]["models"][mname] = runs
                for key in runs[0]["by_delta"]:
                    r = [x["by_delta"][key] for x in runs]
                    print(name, mname, key, f"cost {np.mean([x['cost_ratio'] for x in r]):.3f}",
                          f"disagree {np.mean([x['test_disagreement'] for x in r]):.4f}",
                          f"C same {min(x['python_c_same_stage'] for x in r):.4f}", flush=True)
    return res


def _tables(res: dict, splits: int) -> list[dict]:
    rows, shares = [], []
    for name, dres in res.items():
        for mname, runs in dres["models"].items():
            for rule, delta in [(r, d) for r in RULES for d in DELTAS]:
                r = [x["by_delta"][f"{rule} {delta}"] for x in runs]

                def ms(key, fmt="{:.3f}"):
                    v = np.array([x[key] for x in r])
                    return f"{fmt.format(v.mean())} ± {fmt.format(v.std())}"
                rows.append([name, mname, rule, f"{delta:g}", ms("cost_ratio"), ms("test_disagreement", "{:.4f}"),
                             f"{max(x['test_disagreement'] for x in r):.4f}", ms("calibration_bound", "{:.4f}"),
                             ms("test_accuracy_stopped"), ms("test_accuracy_full"),
                             f"{100 * min(x['python_c_same_stage'] for x in r):.1f} %"])
            r = [x["by_delta"]["shared 0.005"] for x in runs]
            width = max(len(x["stop_share_test"]) for x in r)  # an import's stage count may differ per split
            share = np.mean([np.pad(x["stop_share_test"], (0, width - len(x["stop_share_test"]))) for x in r], axis=0)
            shares.append([name, mname, " ".join(f"{s:.2f}" for s in share)
                           + ("" if all(len(x["stop_share_test"]) == width for x in r) else
                              " (stage counts differ per split: " + ", ".join(str(len(x["stop_share_test"])) for x in r) + ")")])
    n_cal = {name: dres["models"][next(iter(dres["models"]))][0]["by_delta"]["shared 0.005"]["n_calibration"]
             for name, dres in res.items()}
    return [
        {"title": f"Early stopping at δ (95 % Clopper-Pearson bound on the calibration rows; mean ± sd over "
                  f"{splits} splits; calibration rows: {', '.join(f'{k} {v}' for k, v in n_cal.items())})",
         "columns": ["data", "model", "rule", "δ", "mean cost / full cost", "test disagreement", "worst split",
                     "calibration bound", "accuracy (stopped)", "accuracy (full)", "Python = C stage"],
         "rows": rows},
        {"title": "Share of test rows stopping at each stage (stage 0 first), shared rule, δ = 0.005, mean over splits",
         "columns": ["data", "model", "share per stage"], "rows": shares},
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--datasets", nargs="+", default=["digits", "mnist"], choices=["digits", "mnist"])
    ap.add_argument("--calibration-share", type=float, default=0.5,
                    help="share of all rows held out for calibration (the test share is 0.2; training the rest)")
    args = ap.parse_args()
    if not 0.0 < args.calibration_share < 1.0 - TEST_SHARE:
        ap.error(f"--calibration-share must lie in (0, {1.0 - TEST_SHARE:g})")
    res = run(args.datasets, args.splits, args.calibration_share)
    raw = Path(tempfile.gettempdir()) / "edgeseq_early_stopping_raw.json"
    raw.write_text(json.dumps(res))  # kept should rendering the tables fail
    path = write_result("early_stopping", {"splits": args.splits, "deltas": list(DELTAS),
                                           "split_shares": {"train": round(1.0 - TEST_SHARE - args.calibration_share, 6),
                                                            "calibration": args.calibration_share, "test": TEST_SHARE},
                                           "results": res,
                                           "tables": _tables(res, args.splits)}, command_line())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
