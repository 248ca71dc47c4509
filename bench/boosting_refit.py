"""Whether `AnytimeBoosting*`'s kept trees should be regrown on all training rows (``refit``), on data nobody tuned on.

The stagewise search holds out a quarter of the training rows to score its candidates and stop
their rounds. ``refit=True`` then regrows the kept stages on every training row with the groups and
round counts the search chose (`replay_stages`), as the kept linear model is refitted on all rows.
Whether that helps is a question about data the estimator was not designed on, so this benchmark
fits both settings on data sets apart from `bench/tree_orders.py`'s (other seeds and sizes of its
interactions problem, an XOR across groups, wine, a `make_classification` problem, Friedman #1 and
diabetes for the regressor) and on digits, three stratified 70/30 splits each, and records per
split the test timeliness (mean test accuracy, or R² for the regressor, over budgets uniform in
[0, total cost] of the step curve), the full-budget score, which model the comparison kept and the
fit time. Where the comparison keeps the linear model, ``refit`` changes nothing (it regrows trees
only), and the row says so.

Run (one core, one BLAS thread; a few minutes)::

    OMP_NUM_THREADS=1 python bench/boosting_refit.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from afr_trees import digits_groups, step_timeliness  # noqa: I001  (bench/ is on sys.path)
from _results import command_line, write_result
from sklearn.datasets import load_diabetes, load_digits, load_wine, make_classification, make_friedman1
from sklearn.model_selection import train_test_split
from tree_orders import estimator_curve, interactions

from edgeseq import AnytimeBoostingClassifier, AnytimeBoostingRegressor


def xor_groups(n: int = 2000, seed: int = 0):
    """Label = (x0·x4 > 0) xor (x8 > 1), 5 % flipped: an interaction across the two cheapest groups."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 12))
    y = ((X[:, 0] * X[:, 4] > 0) ^ (X[:, 8] > 1)).astype(int)
    return X, np.where(rng.random(n) < 0.05, 1 - y, y), [list(range(3 * g, 3 * g + 3)) for g in range(4)], \
        np.array([1.0, 2.0, 3.0, 8.0])


def friedman(n: int, seed: int):
    """Friedman #1 (5 informative columns of 12), the informative ones spread over six groups."""
    X, y = make_friedman1(n_samples=n, n_features=12, noise=1.0, random_state=seed)
    return X, y, [[0, 5], [1, 6], [2, 7], [3, 8], [4, 9], [10, 11]], np.array([1.0, 1.0, 2.0, 2.0, 4.0, 4.0])


def wine():
    X, y = load_wine(return_X_y=True)
    return X, y, [list(range(i, 13, 4)) for i in range(4)], np.array([1.0, 2.0, 3.0, 4.0])


def three_classes():
    X, y = make_classification(n_samples=5000, n_features=20, n_informative=8, n_redundant=4, n_classes=3,
                               n_clusters_per_class=2, random_state=0)
    return X, y, [list(range(4 * g, 4 * g + 4)) for g in range(5)], np.array([1.0, 2.0, 4.0, 8.0, 16.0])


def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return X, y, [[0, 1], [2, 3], [4, 5, 6], [7, 8, 9]], np.array([1.0, 2.0, 4.0, 8.0])


# name, data, classifier?
CASES = (("interactions, seed 1", lambda: interactions(seed=1), True),
         ("interactions, seed 2", lambda: interactions(seed=2), True),
         ("interactions, 2,000 rows", lambda: interactions(n=2000, seed=3), True),
         ("XOR across groups, 2,000 rows", xor_groups, True),
         ("XOR across groups, 6,000 rows", lambda: xor_groups(6000, 1), True),
         ("digits", lambda: (*load_digits(return_X_y=True), *digits_groups()), True),
         ("wine", wine, True),
         ("make_classification, 3 classes", three_classes, True),
         ("Friedman #1, 3,000 rows (regressor)", lambda: friedman(3000, 0), False),
         ("Friedman #1, 1,500 rows (regressor)", lambda: friedman(1500, 1), False),
         ("diabetes (regressor)", diabetes, False))


def staged_scores(est, Xt, yt, classifier: bool) -> list[float]:
    """Test accuracy (classifier) or R² (regressor) of every stage."""
    if classifier:
        return estimator_curve(est, Xt, yt)
    return [1.0 - float(np.mean((p - yt) ** 2)) / float(np.var(yt)) for p in est.staged_predict(Xt)]


def one_split(X, y, groups, costs, classifier: bool, seed: int) -> dict:
    stratify = y if classifier else None
    Xa, Xt, ya, yt = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=stratify)
    Est = AnytimeBoostingClassifier if classifier else AnytimeBoostingRegressor
    out = {}
    for refit in (False, True):
        t0 = time.perf_counter()
        est = Est(groups, costs, n_jobs=1, random_state=seed, refit=refit).fit(Xa, ya)
        fit_s = time.perf_counter() - t0
        curve = staged_scores(est, Xt, yt, classifier)
        out[refit] = {"timeliness": step_timeliness(est.cum_cost_, curve, float(np.sum(costs))),
                      "final": curve[-1], "kept": est.model_kind_, "fit_s": fit_s}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=3)
    args = ap.parse_args()
    runs, rows = {}, []
    for name, make, classifier in CASES:
        X, y, groups, costs = make()
        runs[name] = []
        for seed in range(args.splits):
            r = one_split(X, y, groups, costs, classifier, seed)
            runs[name].append({"seed": seed, "no_refit": r[False], "refit": r[True]})
            a, b = r[False], r[True]
            rows.append([name, seed, a["kept"], round(a["timeliness"], 4), round(b["timeliness"], 4),
                         round(b["timeliness"] - a["timeliness"], 4), round(a["final"], 4), round(b["final"], 4),
                         round(a["fit_s"], 2), round(b["fit_s"], 2)])
            print(*rows[-1], sep=" | ", flush=True)
    kept = [r for r in rows if r[2] == "trees"]
    diffs = np.array([r[5] for r in kept])
    summary = [[len(kept), int(np.sum(diffs > 0)), int(np.sum(diffs < 0)), round(float(np.mean(diffs)), 4),
                round(float(np.min(diffs)), 4), round(float(np.max(diffs)), 4),
                round(float(np.sum([r[9] for r in kept]) / np.sum([r[8] for r in kept])), 3)]]
    tables = [{"title": "AnytimeBoosting with refit=False and refit=True (the default), per data set and split: test "
                        "timeliness over budgets uniform in [0, total cost] (accuracy; R² for the regressor), "
                        "full-budget score and fit seconds (n_jobs=1); the model the comparison kept",
               "columns": ["data set", "split", "kept", "timeliness, no refit", "timeliness, refit", "difference",
                           "final, no refit", "final, refit", "fit s, no refit", "fit s, refit"],
               "rows": rows},
              {"title": "Over the splits where trees were kept (with linear kept, refit changes nothing): how often "
                        "refit raised or lowered the test timeliness, and the total fit time's ratio",
               "columns": ["splits with trees", "refit higher", "refit lower", "mean difference", "smallest",
                           "largest", "fit time, refit / no refit"],
               "rows": summary}]
    print(summary)
    write_result("boosting_refit", {"runs": runs, "tables": tables}, command_line())


if __name__ == "__main__":
    main()
