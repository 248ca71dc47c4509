"""AFR's tree learner chosen by measurement, and AFR's anytime quality next to the linear classifier
and a LightGBM ensemble imported in boosting order.

    .venv/bin/python bench/afr_trees.py [--splits 3] [--trees 200]

Part 1 (tree learner): on the digits pixels (1797 x 64, 8 row groups), fit one depth-3 regression
tree to each of `--trees` random gradient-like targets, with the numpy histogram CART of
edgeseq.train.trees.cost_cart and with LightGBM (one boosting round per call on a Dataset binned once,
its cost-efficient-boosting feature penalty set per call: λ·c_g·SST on every feature of an unpaid
group). Records time per tree side by side in one run, the variance explained (λ = 0) and how often
the two choose the same root feature; and, at a λ where the penalty binds, how often LightGBM's
per-*feature* charge leads to a different tree than edgeseq's per-*group* rule.

Part 2 (quality): breast cancer (10 groups of mean/se/worst, costs 1..10) and digits (8 row groups,
unit costs), `--splits` stratified 70/30 splits: AFRClassifier (defaults), AnytimeClassifier
(CS-G-OMP, defaults) and LightGBM (100 trees, imported with edgeseq.from_lightgbm). For each: fit
time, full-budget test accuracy and the step accuracy-timeliness over budgets uniform in
[0, total cost of all groups] (the mean test accuracy a random budget in that range gets).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

from edgeseq import AFRClassifier, AnytimeClassifier, from_lightgbm
from edgeseq.train.trees.afr import _tree_output
from edgeseq.train.trees.cost_cart import Binner, BinnedRows, fit_cost_tree
from _results import command_line, write_result  # noqa: E402  (bench/ is on sys.path)


def digits_groups():
    return [list(range(8 * r, 8 * r + 8)) for r in range(8)], np.ones(8)


def tree_learner(n_trees: int, depth: int = 3) -> dict:
    import lightgbm as lgb
    X, y = load_digits(return_X_y=True)
    groups, costs = digits_groups()
    col_group = np.repeat(np.arange(8), 8)
    rng = np.random.default_rng(0)
    targets = [(y == rng.integers(10)) - 0.1 + 0.3 * rng.normal(size=y.size) for _ in range(n_trees)]
    binner = Binner(X, np.arange(64), max_bins=32)
    codes = BinnedRows(binner.codes(X), binner.n_bins)  # built once, as AFR does (LightGBM bins its Dataset once)
    ds = lgb.Dataset(X, label=targets[0], params={"max_bin": 32, "verbose": -1, "min_data_in_bin": 1, "feature_pre_filter": False},
                     free_raw_data=False).construct()
    base = dict(objective="regression", num_leaves=2 ** depth, max_depth=depth, min_data_in_leaf=5, learning_rate=1.0,
                boost_from_average=False, verbose=-1, num_threads=1, deterministic=True, force_row_wise=True,
                lambda_l2=0.0, min_gain_to_split=0.0)

    def explained(pred, t):
        return 1 - np.sum((t - pred) ** 2) / np.sum((t - t.mean()) ** 2)

    out = {}
    for lam in (0.0, 0.05):
        paid = {0, 1}
        t_np = t_lgb = 0.0
        ev_np, ev_lgb, same_root, same_groups = [], [], 0, 0
        for t in targets:
            t0 = time.perf_counter()
            tree = fit_cost_tree(binner, codes, t, col_group, costs, paid, lam, max_depth=depth)
            t_np += time.perf_counter() - t0
            sst = float(np.sum((t - t.mean()) ** 2))
            pen = [0.0 if col_group[j] in paid else lam * costs[col_group[j]] * sst for j in range(64)]
            t0 = time.perf_counter()
            ds.set_label(t)
            params = dict(base, cegb_penalty_feature_coupled=pen, cegb_tradeoff=1.0) if lam else base
            bst = lgb.train(params, ds, num_boost_round=1)
            t_lgb += time.perf_counter() - t0
            ev_np.append(explained(_tree_output(tree, X.astype(np.float32)), t))
            ev_lgb.append(explained(bst.predict(X), t))
            root = bst.dump_model()["tree_info"][0]["tree_structure"]
            lgb_root = root.get("split_feature", -1)
            same_root += int(lgb_root == (tree.feature[0] if tree.n_splits else -1))
            lgb_feats = {n.get("split_feature") for n in _nodes(root) if "split_feature" in n}
            same_groups += int({int(col_group[f]) for f in lgb_feats} - paid == set(tree.new_groups))
        key = f"lambda={lam:g}"
        out[key] = {"numpy_ms_per_tree": 1e3 * t_np / n_trees, "lightgbm_ms_per_tree": 1e3 * t_lgb / n_trees,
                    "lightgbm_over_numpy_time": t_lgb / t_np,
                    "numpy_mean_explained": float(np.mean(ev_np)), "lightgbm_mean_explained": float(np.mean(ev_lgb)),
                    "same_root_feature_fraction": same_root / n_trees,
                    "same_newly_paid_groups_fraction": same_groups / n_trees}
        print(key, json.dumps(out[key], indent=None), flush=True)
    return {"n_trees": n_trees, "depth": depth, "data": "digits 1797x64, 8 row groups, unit costs", **out}


def _nodes(node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for k in ("left_child", "right_child"):
            if isinstance(n.get(k), dict):
                stack.append(n[k])


def step_timeliness(costs, acc, horizon: float) -> float:
    """Mean accuracy over budgets uniform in [0, horizon] of the step curve (last stage with cost <= B)."""
    costs, acc = np.asarray(costs, float), np.asarray(acc, float)
    edges = np.append(np.minimum(costs, horizon), horizon)
    return float(np.sum(np.diff(edges) * acc) / horizon)


def quality(splits: int) -> dict:
    import lightgbm as lgb
    Xb, yb = load_breast_cancer(return_X_y=True)
    Xd, yd = load_digits(return_X_y=True)
    banks = {"breast_cancer": (Xb, yb, [[i, i + 10, i + 20] for i in range(10)], np.arange(1.0, 11.0)),
             "digits": (Xd, yd, *digits_groups())}
    results = {}
    for name, (X, y, groups, costs) in banks.items():
        horizon = float(np.sum(costs))
        rows = {m: {"fit_s": [], "final_accuracy": [], "step_timeliness": []} for m in ("AFR", "CS-G-OMP", "LightGBM")}
        for seed in range(splits):
            Xa, Xt, ya, yt = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
            for m in rows:
                t0 = time.perf_counter()
                if m == "AFR":
                    est = AFRClassifier(groups, costs).fit(Xa, ya)
                    cc, accs = est.cum_cost_, [np.mean(p == yt) for p in est.staged_predict(Xt)]
                elif m == "CS-G-OMP":
                    est = AnytimeClassifier(groups, costs).fit(Xa, ya)
                    cc, accs = est.cum_cost_, [np.mean(p == yt) for p in est.staged_predict(Xt)]
                else:
                    clf = lgb.LGBMClassifier(n_estimators=100, num_leaves=15, learning_rate=0.1, verbose=-1,
                                             n_jobs=1, deterministic=True, force_row_wise=True).fit(Xa, ya)
                    sm = from_lightgbm(clf, groups, costs)
                    cc = sm.cum_cost
                    accs = [np.mean(clf.classes_[np.argmax(sm.apply_link(z), 1)] == yt)
                            for z in sm.staged_decision(Xt)]
                rows[m]["fit_s"].append(time.perf_counter() - t0)
                rows[m]["final_accuracy"].append(float(accs[-1]))
                rows[m]["step_timeliness"].append(step_timeliness(cc, accs, horizon))
        results[name] = {m: {k: {"mean": float(np.mean(v)), "std": float(np.std(v))} for k, v in r.items()}
                         for m, r in rows.items()}
        for m, r in results[name].items():
            print(name, m, {k: f"{v['mean']:.3f}±{v['std']:.3f}" for k, v in r.items()}, flush=True)
    return {"splits": splits, "horizon": "total cost of all groups", "results": results}


def tables(learner: dict, qual: dict) -> list[dict]:
    """The docs page's view of the run: the tree learners side by side, then quality per data set."""
    lam_rows = [[k.split("=", 1)[1], f"{v['numpy_ms_per_tree']:.3g}", f"{v['lightgbm_ms_per_tree']:.3g}",
                 f"{v['lightgbm_over_numpy_time']:.2f}", f"{v['numpy_mean_explained']:.3f}",
                 f"{v['lightgbm_mean_explained']:.3f}", f"{v['same_root_feature_fraction']:.2f}",
                 f"{v['same_newly_paid_groups_fraction']:.2f}"]
                for k, v in learner.items() if k.startswith("lambda=")]
    q_rows = [[name, m, *(f"{r[k]['mean']:.3f} ± {r[k]['std']:.3f}" for k in ("fit_s", "final_accuracy",
                                                                             "step_timeliness"))]
              for name, by_method in qual["results"].items() for m, r in by_method.items()]
    return [{"title": f"Cost-penalised tree learners on the same gradients ({learner['n_trees']} trees, depth "
                      f"{learner['depth']}, {learner['data']})",
             "columns": ["λ", "numpy ms/tree", "LightGBM ms/tree", "LightGBM / numpy time", "numpy explained",
                         "LightGBM explained", "same root feature", "same newly paid groups"], "rows": lam_rows},
            {"title": f"Held-out accuracy, mean ± std over {qual['splits']} splits (timeliness over the total cost)",
             "columns": ["data set", "method", "fit (s)", "final accuracy", "step timeliness"], "rows": q_rows}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--trees", type=int, default=200)
    args = ap.parse_args()
    learner, qual = tree_learner(args.trees), quality(args.splits)
    path = write_result("afr_trees", {"tree_learner": learner, "quality": qual, "tables": tables(learner, qual)},
                        command_line())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
