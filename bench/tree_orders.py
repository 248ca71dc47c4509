"""The nonlinear options side by side: AFR, a LightGBM ensemble in boosting order, the same ensemble
sequenced by cost, LightGBM's own cost-efficient boosting (CEGB), and the linear CS-G-OMP classifier.

    .venv/bin/python bench/tree_orders.py [--splits 3] [--datasets breast_cancer digits interactions]

Data: breast cancer (10 measurements × mean/se/worst = 10 groups, costs 1..10), digits (8 pixel-row
groups, unit costs) and a synthetic problem whose label depends on interactions within and across
groups (6 groups of 4 columns, costs 1, 2, 4, 8, 16, 32; the label is a within-group product of the
cheapest group AND a cross-group sum, OR a threshold on the most expensive group, 5 % flipped). Per stratified 70/30 split, the training part is split again 75/25: LightGBM (100 rounds,
15 leaves) is trained on the 75 %, and `edgeseq.sequence_trees` uses the 25 % to choose the order and
refit the readouts; boosting order uses the same ensemble, so the two differ only in order and
readout. LightGBM-CEGB trains on the same 75 % with `cegb_penalty_feature_coupled` = the cost of each
feature's group (LightGBM charges per feature, edgeseq per group: every feature of a group carries
the group's cost) and is imported in boosting order. AFR and CS-G-OMP fit the whole training part.
Scores: full-budget test accuracy and the step accuracy-timeliness over budgets uniform in
[0, total cost] (the mean test accuracy of a random budget), mean ± std over the splits; fit times.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from afr_trees import digits_groups, step_timeliness  # noqa: I001  (bench/ is on sys.path)
from _results import command_line, write_result
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

from edgeseq import AFRClassifier, AnytimeClassifier, from_lightgbm, sequence_trees

METHODS = ("AFR", "LightGBM (boosting order)", "LightGBM (cost-sequenced)", "LightGBM-CEGB", "CS-G-OMP (linear)")
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


def datasets(names):
    Xb, yb = load_breast_cancer(return_X_y=True)
    Xd, yd = load_digits(return_X_y=True)
    every = {"breast_cancer": lambda: (Xb, yb, [[i, i + 10, i + 20] for i in range(10)], np.arange(1.0, 11.0)),
             "digits": lambda: (Xd, yd, *digits_groups()),
             "interactions": interactions}
    return {n: every[n]() for n in names}


def staged_accuracy(model, classes, Xt, yt) -> list[float]:
    """Test accuracy of every stage of a TreeStageModel (labels = the most probable class)."""
    out = []
    for z in model.staged_decision(Xt):
        p = model.apply_link(z)
        out.append(float(np.mean(classes[np.argmax(p, axis=1)] == yt)))
    return out


def one_split(X, y, groups, costs, seed: int) -> dict:
    import lightgbm as lgb
    Xa, Xt, ya, yt = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    Xf, Xv, yf, yv = train_test_split(Xa, ya, test_size=0.25, random_state=seed, stratify=ya)
    row = {}
    t0 = time.perf_counter()
    clf = lgb.LGBMClassifier(**LGBM).fit(Xf, yf)
    boosting = from_lightgbm(clf, groups, costs)
    t_lgbm = time.perf_counter() - t0
    row["LightGBM (boosting order)"] = (t_lgbm, boosting.cum_cost, staged_accuracy(boosting, clf.classes_, Xt, yt))
    t0 = time.perf_counter()
    costly = sequence_trees(boosting, Xv, yv)
    row["LightGBM (cost-sequenced)"] = (t_lgbm + time.perf_counter() - t0, costly.cum_cost,
                                        staged_accuracy(costly, clf.classes_, Xt, yt))
    feature_cost = np.zeros(X.shape[1])
    for g, cols in enumerate(groups):
        feature_cost[cols] = costs[g]
    t0 = time.perf_counter()
    cegb = lgb.LGBMClassifier(**LGBM, cegb_tradeoff=1.0,
                              cegb_penalty_feature_coupled=(feature_cost / feature_cost.sum()).tolist()).fit(Xf, yf)
    cm = from_lightgbm(cegb, groups, costs)
    row["LightGBM-CEGB"] = (time.perf_counter() - t0, cm.cum_cost, staged_accuracy(cm, cegb.classes_, Xt, yt))
    t0 = time.perf_counter()
    afr = AFRClassifier(groups, costs).fit(Xa, ya)
    row["AFR"] = (time.perf_counter() - t0, afr.cum_cost_, [float(np.mean(p == yt)) for p in afr.staged_predict(Xt)])
    t0 = time.perf_counter()
    lin = AnytimeClassifier(groups, costs).fit(Xa, ya)
    row["CS-G-OMP (linear)"] = (time.perf_counter() - t0, lin.cum_cost_,
                                [float(np.mean(p == yt)) for p in lin.staged_predict(Xt)])
    horizon = float(np.sum(costs))
    return {m: {"fit_s": t, "final_accuracy": acc[-1], "step_timeliness": step_timeliness(cc, acc, horizon)}
            for m, (t, cc, acc) in row.items()}


def run(names, splits: int) -> dict:
    results = {}
    for name, (X, y, groups, costs) in datasets(names).items():
        runs = [one_split(X, y, groups, costs, seed) for seed in range(splits)]
        results[name] = {m: {k: {"mean": float(np.mean([r[m][k] for r in runs])),
                                 "std": float(np.std([r[m][k] for r in runs]))}
                             for k in ("fit_s", "final_accuracy", "step_timeliness")} for m in METHODS}
        for m in METHODS:
            print(name, m, {k: f"{v['mean']:.3f}±{v['std']:.3f}" for k, v in results[name][m].items()}, flush=True)
    return results


def tables(results: dict, splits: int) -> list[dict]:
    rows = [[name, m, *(f"{r[m][k]['mean']:.3f} ± {r[m][k]['std']:.3f}"
                        for k in ("step_timeliness", "final_accuracy", "fit_s"))]
            for name, r in results.items() for m in METHODS]
    return [{"title": f"Nonlinear options: test accuracy-timeliness (budgets uniform in [0, total cost]) and "
                      f"full-budget accuracy, mean ± std over {splits} splits",
             "columns": ["data set", "method", "step timeliness", "final accuracy", "fit (s)"], "rows": rows}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--datasets", nargs="+", default=["breast_cancer", "digits", "interactions"],
                    choices=["breast_cancer", "digits", "interactions"])
    args = ap.parse_args()
    results = run(args.datasets, args.splits)
    path = write_result("tree_orders", {"splits": args.splits, "results": results,
                                        "tables": tables(results, args.splits)}, command_line())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
