"""Cost of importing a LightGBM model (`edgeseq.from_lightgbm`), in microseconds per tree node.

An import has two parts: LightGBM prints its model (LightGBM's own code) and edgeseq reads it into
flat arrays, checks every number and builds the stages. `from_lightgbm` reads the text model
(`Booster.model_to_string()` + `from_lightgbm_text`, a few array operations per tree); the JSON dump
(`Booster.dump_model()` + `from_lightgbm_dump`, a Python step per node) is measured beside it. All
grow with the number of nodes; this measures each on ensembles of growing size (regression, 255-leaf
trees at most 12 deep, on 8 features), best of `--repeats` runs.

    python bench/lightgbm_import.py [--rounds 100 200 400] [--repeats 3]

Writes bench/results/lightgbm_import.json.
"""

from __future__ import annotations

import argparse
import time

from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, nargs="+", default=[100, 200, 400])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import lightgbm as lgb

    from edgeseq.train.trees.lightgbm_import import from_lightgbm, from_lightgbm_dump, from_lightgbm_text

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 8))
    y = X[:, 0] + X[:, 1] * X[:, 2] - X[:, 5] ** 2 + rng.normal(size=5000)
    groups, costs = [[0, 1, 2, 3], [4, 5], [6, 7]], [1.0, 2.0, 4.0]
    rows = []
    for n_rounds in args.rounds:
        booster = lgb.train(dict(objective="regression", num_leaves=255, max_depth=12, min_data_in_leaf=2, verbose=-1,
                                 num_threads=1, deterministic=True), lgb.Dataset(X, y), n_rounds)
        times = {k: [] for k in ("dump", "walk", "print", "text", "total")}
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            dump = booster.dump_model()
            t1 = time.perf_counter()
            from_lightgbm_dump(dump, groups, costs)
            t2 = time.perf_counter()
            text = booster.model_to_string()
            t3 = time.perf_counter()
            from_lightgbm_text(text, groups, costs)
            t4 = time.perf_counter()
            model = from_lightgbm(booster, groups, costs)
            t5 = time.perf_counter()
            for k, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                times[k].append(dt)
        n = model.ensemble.n_nodes
        us = {k: min(v) / n * 1e6 for k, v in times.items()}
        rows.append([model.ensemble.n_trees, n, us["total"], us["print"], us["text"], us["dump"], us["walk"]])
        print(f"{model.ensemble.n_trees:5d} trees {n:8d} nodes, us/node: from_lightgbm {us['total']:.2f} "
              f"(model_to_string {us['print']:.2f} + from_lightgbm_text {us['text']:.2f}); "
              f"dump_model {us['dump']:.2f} + from_lightgbm_dump {us['walk']:.2f}")
    write_result("lightgbm_import", {"tables": [{
        "title": f"LightGBM import, microseconds per node (best of {args.repeats}); model_to_string and "
                 "dump_model are LightGBM's own code, the readers edgeseq's",
        "columns": ["trees", "nodes", "from_lightgbm", "model_to_string", "from_lightgbm_text", "dump_model",
                    "from_lightgbm_dump"],
        "rows": rows}]}, command_line(), machine=machine_info())


if __name__ == "__main__":
    main()
