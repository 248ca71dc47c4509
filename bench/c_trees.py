"""C tree stages: ns of a tree stage's push against a bare loop over the same trees.

Both are compiled in the same run with the same compiler and flags (bench/c_trees_speed.c). The
models are LightGBM ensembles imported with `edgeseq.from_lightgbm` (boosting order, identity
link): the timed push is each model's most expensive one (the most node visits, as the generated
header counts them). Target (issue 12): push <= 1.3x the bare loop. Both walk one tree at a time
(the runtime is built with ES_TREE_LANES=1, the bare loop's walk): this measures the runtime's
overhead around the walk, not the choice of walk, which bench/peers.py compares on whole rows.

    python bench/c_trees.py [--iters N] [--cc gcc] [--quick]

Writes bench/results/c_trees.json.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np

from _cbench import c_bench_setup  # noqa: I001  (bench/ is on sys.path)
from _results import command_line, write_result

from edgeseq.export.c_harness import STRICT_FLAGS, compile_c, runtime_dir
from edgeseq.export.kinds.trees.c_float import tree_layout, write_c_tree_model

HERE = Path(__file__).resolve().parent
SHAPES = [  # (label, number of groups x features per group, trees, leaves per tree)
    ("100 trees, 31 leaves, 4 groups", 4, 100, 31),
    ("100 trees, 7 leaves, 4 groups", 4, 100, 7),
    ("300 trees, 15 leaves, 2 groups", 2, 300, 15),
]


def lightgbm_model(n_groups: int, n_trees: int, leaves: int, seed: int = 0):
    """A TreeStageModel imported from a LightGBM regressor on a synthetic interaction problem."""
    import lightgbm as lgb

    from edgeseq.train.trees.lightgbm_import import from_lightgbm
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2000, 4 * n_groups))
    y = X[:, 0] * X[:, 1] + np.sin(X[:, 2]) + X[:, -1] ** 2 + 0.1 * rng.normal(size=2000)
    reg = lgb.LGBMRegressor(n_estimators=n_trees, num_leaves=leaves, learning_rate=0.1, min_child_samples=5,
                            verbose=-1, deterministic=True, force_row_wise=True, n_jobs=1).fit(X, y)
    groups = [list(range(4 * g, 4 * g + 4)) for g in range(n_groups)]
    return from_lightgbm(reg, groups, [1.0] * n_groups)


def main(argv=None) -> None:
    iters, cc, version = c_bench_setup(__doc__.splitlines()[0], 20000, argv)
    print(f"{'model':34} {'trees':>6} {'visits':>7} {'push ns':>9} {'bare ns':>9} {'ratio':>6}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (label, n_groups, n_trees, leaves) in enumerate(SHAPES):
            model = lightgbm_model(n_groups, n_trees, leaves)
            layout = tree_layout(model)
            visits = [int(layout.node_visits[list(r)].sum()) for r in layout.push_stages]
            pos = int(np.argmax(visits))
            trees = sum(model.stages[s].tree_stop - model.stages[s].tree_start for s in layout.push_stages[pos])
            mdir = Path(tmp) / f"m{k}"
            write_c_tree_model(model, mdir, "bench")
            exe = compile_c([runtime_dir() / "edgeseq_runtime.c", mdir / "edgeseq_model.c", HERE / "c_trees_speed.c"],
                            Path(tmp) / f"bench{k}", include_dirs=[mdir, runtime_dir()],
                            defines=["ES_PREFIX=bench", "ES_TREE_LANES=1"], compiler=cc)
            out = subprocess.run([str(exe), str(iters), str(pos)], capture_output=True, text=True, check=True).stdout
            push_ns, bare_ns = map(float, out.split())
            rows.append([label, trees, visits[pos], push_ns, bare_ns, push_ns / bare_ns])
            print(f"{label:34} {trees:6d} {visits[pos]:7d} {push_ns:9.1f} {bare_ns:9.1f} {push_ns / bare_ns:6.2f}")
    print("\ntarget: push/bare <= 1.3 (the model's most expensive push, restored before each repeat)")
    write_result("c_trees", {
        "compiler": version, "flags": " ".join(STRICT_FLAGS) + " -O2",
        "targets": {"push_ratio_max": 1.3},
        "worst_push_ratio": max(r[5] for r in rows),
        "tables": [{"title": f"ns of a tree model's most expensive push vs a bare loop over the same trees, both "
                             f"walking one tree at a time (ES_TREE_LANES=1) ({version}); target: push/bare <= 1.3",
                    "columns": ["model", "trees in the push", "node visits (bound)", "push ns", "bare ns",
                                "push/bare"],
                    "rows": rows}]}, command_line())


if __name__ == "__main__":
    main()
