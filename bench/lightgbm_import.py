"""Cost of importing a LightGBM model (`edgeseq.from_lightgbm`), in microseconds per tree node.

An import has two parts: LightGBM prints its model as JSON (`Booster.dump_model()`, LightGBM's own
code) and edgeseq walks the dump's trees into flat arrays, checks every number and builds the stages
(`from_lightgbm_dump`). Both grow with the number of nodes; this measures each on ensembles of
growing size (regression, 255-leaf trees at most 12 deep, on 8 features), best of `--repeats` runs.

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

    from edgeseq.train.lightgbm_import import from_lightgbm_dump

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 8))
    y = X[:, 0] + X[:, 1] * X[:, 2] - X[:, 5] ** 2 + rng.normal(size=5000)
    groups, costs = [[0, 1, 2, 3], [4, 5], [6, 7]], [1.0, 2.0, 4.0]
    rows = []
    for n_rounds in args.rounds:
        booster = lgb.train(dict(objective="regression", num_leaves=255, max_depth=12, min_data_in_leaf=2, verbose=-1,
                                 num_threads=1, deterministic=True), lgb.Dataset(X, y), n_rounds)
        dump_s, walk_s = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            dump = booster.dump_model()
            t1 = time.perf_counter()
            model = from_lightgbm_dump(dump, groups, costs)
            walk_s.append(time.perf_counter() - t1)
            dump_s.append(t1 - t0)
        n = model.ensemble.n_nodes
        d, w = min(dump_s) / n * 1e6, min(walk_s) / n * 1e6
        rows.append([model.ensemble.n_trees, n, d, w, d + w])
        print(f"{model.ensemble.n_trees:5d} trees {n:8d} nodes: dump_model {d:.2f} us/node, "
              f"from_lightgbm_dump {w:.2f} us/node, total {d + w:.2f} us/node")
    write_result("lightgbm_import", {"tables": [{
        "title": f"LightGBM import, microseconds per node (best of {args.repeats}); the dump is LightGBM's own "
                 "code, the walk edgeseq's",
        "columns": ["trees", "nodes", "dump_model us/node", "from_lightgbm_dump us/node", "total us/node"],
        "rows": rows}]}, command_line(), machine=machine_info())


if __name__ == "__main__":
    main()
