"""Linear defaults on real data: old fixed defaults vs l2/whiten chosen by cross-validation vs scikit-learn.

    python bench/linear_defaults.py               # digits, breast cancer, diabetes, BasicMotions (aeon); 3 splits
    python bench/linear_defaults.py --splits 5

Each data set is split at random (stratified for classes) into halves, --splits times. On each
split: edgeseq's estimators with the parameters that were the defaults before (``l2=1e-4`` or
``1e-5``, exact whitening), with the current defaults (``l2="auto"``, ``whiten="auto"``), and
scikit-learn on standardised columns (``LogisticRegression`` with its default C, and the
cross-validated ``LogisticRegressionCV`` / ``RidgeCV``). The score is the full-budget test accuracy
(classification) or test R² (regression). The sensor set (BasicMotions: 6 channels of 100 samples,
one group per channel, 80 recordings) is read from the ``aeon`` wheel when it is installed and
skipped (with a note in the results) otherwise. Results go to bench/results/linear_defaults.json.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV, RidgeCV
from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from _results import command_line, write_result
from edgeseq import AnytimeClassifier, AnytimeRegressor


def digits():
    X, y = load_digits(return_X_y=True)
    return X, y, [list(range(8 * r, 8 * r + 8)) for r in range(8)], "classification"  # one group per image row


def breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return X, y, [list(range(0, 10)), list(range(10, 20)), list(range(20, 30))], "classification"  # mean, se, worst


def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return X, y, [[0, 1], [2, 3], [4, 5, 6, 7, 8, 9]], "regression"  # demographics, body, blood serum


def basic_motions():
    from aeon.datasets import load_basic_motions

    Xtr, ytr = load_basic_motions(split="train")
    Xte, yte = load_basic_motions(split="test")
    X = np.concatenate([Xtr, Xte]).astype(np.float64)  # (cases, 6 channels, 100 samples)
    n, c, t = X.shape
    return X.reshape(n, c * t), np.concatenate([ytr, yte]), [list(range(k * t, (k + 1) * t)) for k in range(c)], \
        "classification"


DATA = {"digits": digits, "breast_cancer": breast_cancer, "diabetes": diabetes, "basic_motions": basic_motions}


def methods(task, groups):
    costs = np.arange(1.0, len(groups) + 1)
    std = StandardScaler
    if task == "classification":
        return {
            "edgeseq, old defaults (l2=1e-4, whiten=True)": lambda: AnytimeClassifier(groups, costs, l2=1e-4, whiten=True),
            "edgeseq, new defaults (auto)": lambda: AnytimeClassifier(groups, costs),
            "LogisticRegression (standardised, C=1)": lambda: make_pipeline(std(), LogisticRegression(max_iter=5000)),
            "LogisticRegressionCV (standardised)": lambda: make_pipeline(std(), LogisticRegressionCV(max_iter=5000)),
        }
    return {
        "edgeseq, old defaults (l2=1e-5, whiten=True)": lambda: AnytimeRegressor(groups, costs, l2=1e-5, whiten=True),
        "edgeseq, new defaults (auto)": lambda: AnytimeRegressor(groups, costs),
        "RidgeCV (standardised)": lambda: make_pipeline(std(), RidgeCV(alphas=np.logspace(-3, 3, 13))),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--data", nargs="*", default=list(DATA))
    args = ap.parse_args()
    load_start = os.getloadavg()
    results, notes, rows = {}, [], []
    for name in args.data:
        try:
            X, y, groups, task = DATA[name]()
        except ImportError as exc:
            notes.append(f"{name}: skipped ({exc})")
            print(notes[-1], flush=True)
            continue
        cv = (StratifiedShuffleSplit if task == "classification" else ShuffleSplit)(
            n_splits=args.splits, test_size=0.5, random_state=0)
        per = {m: {"score": [], "fit_s": [], "l2": [], "whiten": []} for m in methods(task, groups)}
        for split, (tr, te) in enumerate(cv.split(X, y)):
            for m, make in methods(task, groups).items():
                est = make()
                t = time.perf_counter()
                with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
                    warnings.simplefilter("ignore")
                    est.fit(X[tr], y[tr])
                per[m]["fit_s"].append(time.perf_counter() - t)
                per[m]["score"].append(float(est.score(X[te], y[te])))
                per[m]["l2"].append(getattr(est, "l2_", None))
                per[m]["whiten"].append(getattr(est, "whiten_", None))
                print(f"{name} split {split} {m}: {per[m]['score'][-1]:.4f} ({per[m]['fit_s'][-1]:.2f} s)", flush=True)
        results[name] = {"task": task, "n": int(X.shape[0]), "features": int(X.shape[1]), "groups": len(groups),
                         "methods": per}
        metric = "accuracy" if task == "classification" else "R²"
        for m, r in per.items():
            s = np.array(r["score"])
            chosen = ", ".join(f"{l2:g}/{'w' if w else 's'}" for l2, w in zip(r["l2"], r["whiten"])) \
                if r["l2"][0] is not None else ""
            rows.append([name, f"{X.shape[0]} × {X.shape[1]}, {len(groups)} groups", m,
                         f"{s.mean():.4f} ± {s.std():.4f} ({metric})", f"{np.median(r['fit_s']):.2f}", chosen])
    payload = {"data": results, "notes": notes, "splits": args.splits,
               "load_average_start": list(load_start), "load_average_end": list(os.getloadavg()),
               "tables": [{"title": f"Full-budget test score, mean ± std over {args.splits} random half/half splits",
                           "columns": ["data", "shape", "method", "test score", "fit s (median)",
                                       "chosen l2 / basis per split (w: whitened, s: standardised)"],
                           "rows": rows}]}
    print(f"wrote {write_result('linear_defaults', payload, command_line())}")


if __name__ == "__main__":
    main()
