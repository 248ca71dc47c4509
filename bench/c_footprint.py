"""Flash and RAM of the C runtime + generated models on Cortex-M4F and Cortex-M3, from the build.

For three models trained on bundled scikit-learn data (a regression, a binary and a multiclass
classifier; the same ones the emulated-core tests run), a minimal firmware image
(runtime_c/examples/m4_footprint.c: static state, one anytime pass, an interrupt-style read) is
built with arm-none-eabi-gcc -Os, nano newlib and --gc-sections; `arm-none-eabi-size` gives the
figures written to bench/results/c_footprint.json (flash = text + data, RAM = data + bss). A
regression model is built with -DES_IDENTITY_ONLY, as its firmware would be (no expf, no libm), and
the linear models with -DES_LINEAR_ONLY (no tree-stage code).
Two tree-stage models follow (issue 12): a 100-tree LightGBM regressor on diabetes imported with
`from_lightgbm`, and AFR with default settings on digits (8 pixel-row groups, 10 classes). With
`--mnist`, also AFR at its defaults on the MNIST bank (edgeseq[images]; 70 % of the 5,000 images,
the split of bench/afr_mnist.py): its first extraction takes minutes, so it is not in the default run.

    python bench/c_footprint.py [--mnist]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from edgeseq.export.c_arm import ARM_CC, TARGETS, footprint, missing_tools
from edgeseq.export.c_harness import write_c_for
from _results import command_line, write_result  # noqa: E402  (bench/ is on sys.path)

HERE = Path(__file__).resolve().parent
KINDS = ("regression", "binary", "multiclass")
DECIMAL_COSTS = [0.1, 0.7, 0.3]  # cumulative sums float32 cannot hold: the budget-parity case
N_TEST = 40


def reference_model(kind: str):
    """(FittedSequence, held-out rows) of the reference model `kind`: diabetes (10 one-feature groups),
    breast cancer (10 groups of 3) or digits (8 pixel rows of 8, 10 classes); the last N_TEST rows are held out."""
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits

    from edgeseq import AnytimeClassifier, AnytimeRegressor
    if kind == "regression":
        (X, y), est, width = load_diabetes(return_X_y=True), AnytimeRegressor, 1
    elif kind == "binary":
        (X, y), est, width = load_breast_cancer(return_X_y=True), AnytimeClassifier, 3
    elif kind == "multiclass":
        (X, y), est, width = load_digits(return_X_y=True), AnytimeClassifier, 8
    else:
        raise ValueError(f"unknown reference model {kind!r}; expected one of {KINDS}")
    groups = [list(range(i, i + width)) for i in range(0, X.shape[1], width)]
    costs = (DECIMAL_COSTS * len(groups))[:len(groups)]
    n_train = len(X) - N_TEST
    return est(groups, costs).fit(X[:n_train], y[:n_train]).fitted_sequence_, X[n_train:]




def tree_model(kind: str):
    """(TreeStageModel, label) of the tree reference `kind`: "lightgbm-100", "afr" or "afr-mnist"."""
    import numpy as np
    from sklearn.datasets import load_diabetes, load_digits
    if kind == "lightgbm-100":
        import lightgbm as lgb

        from edgeseq.train.trees.lightgbm_import import from_lightgbm
        X, y = load_diabetes(return_X_y=True)
        reg = lgb.LGBMRegressor(n_estimators=100, num_leaves=31, min_child_samples=5, verbose=-1, deterministic=True,
                                force_row_wise=True, n_jobs=1).fit(X, y)
        return from_lightgbm(reg, [[i] for i in range(X.shape[1])], DECIMAL_COSTS * 3 + [0.1]), "diabetes"
    from edgeseq.train.trees.afr import AFRClassifier
    if kind == "afr-mnist":
        from sklearn.model_selection import train_test_split

        from edgeseq.extractors.datasets import mnist_data
        d = mnist_data()
        Xa, _, ya, _ = train_test_split(d.X, d.y, test_size=0.3, random_state=0, stratify=d.y)
        return AFRClassifier(d.columns, np.asarray(d.costs, dtype=float)).fit(Xa, ya).stage_model_, "MNIST bank"
    X, y = load_digits(return_X_y=True)
    clf = AFRClassifier([list(range(r * 8, r * 8 + 8)) for r in range(8)], np.ones(8)).fit(X, y)
    return clf.stage_model_, "digits"


TREE_KINDS = ("lightgbm-100", "afr")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mnist", action="store_true", help="also AFR on the MNIST bank (needs edgeseq[images])")
    args = ap.parse_args(argv)
    missing = missing_tools(run=False)
    if missing:
        print(f"c_footprint: {missing}", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgeseq_fp_") as tmp:
        for kind in KINDS:
            seq, _ = reference_model(kind)
            mdir = Path(tmp) / kind
            write_c_for(seq, mdir, kind[:3])
            rows += _measure(mdir, Path(tmp), kind, seq.link, {"groups": seq.n_groups,
                                                              "features": int(seq.group_sizes.sum()),
                                                              "outputs": seq.n_outputs})
        for kind in TREE_KINDS + (("afr-mnist",) if args.mnist else ()):
            model, data = tree_model(kind)
            mdir = Path(tmp) / kind
            write_c_for(model, mdir, "tree")
            ens = model.ensemble
            rows += _measure(mdir, Path(tmp), f"{kind} ({data})", model.link,
                             {"groups": sum(len(s.new_groups) for s in model.stages),
                              "features": int(sum(model.group_columns[g].size for s in model.stages
                                                  for g in s.new_groups)),
                              "outputs": model.n_outputs, "stages": len(model.stages), "trees": ens.n_trees,
                              "nodes": ens.n_nodes, "state": ens.n_targets})
    version = subprocess.run([ARM_CC, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    table = {"title": f"Cortex-M sizes in bytes ({version})",
             "columns": ["model", "target", "runtime code", "model", "image flash", "image RAM"],
             "rows": [[r["model"], r["target"], r["runtime_text"], r["model_flash"], r["image_flash"],
                       r["image_ram"]] for r in rows]}
    doc = {"compiler": version,
           "flags": "-std=c99 -Os -ffunction-sections -fdata-sections, --specs=nano.specs --specs=nosys.specs "
                    "-Wl,--gc-sections",
           "columns": {"runtime_text": "bytes of code of edgeseq_runtime.o",
                       "model_flash": "bytes of edgeseq_model.o (weights or trees, costs, names, descriptor)",
                       "image_flash": "text + data of the linked minimal firmware (runtime, model, newlib startup)",
                       "image_ram": "data + bss of that image (state, work buffer, newlib)"},
           "results": rows, "tables": [table]}
    if not args.mnist:
        doc["notes"] = ("Run without --mnist: no row for AFR on the MNIST bank (its feature extraction takes "
                        "minutes); add --mnist for it.")
    print(f"wrote {write_result('c_footprint', doc, command_line())}")
    return 0


def _measure(mdir, tmp, label: str, link: str, shape: dict) -> list:
    """One result row per target for the generated model in `mdir`."""
    rows = []
    for target in TARGETS.values():
        sizes = footprint(mdir, target, tmp / f"{label.split()[0]}_{target.name}", identity_only=link == "identity",
                          linear_only="trees" not in shape)
        rows.append({"model": label, "link": link, **shape, "target": target.name,
                     "identity_only_runtime": link == "identity", "linear_only_runtime": "trees" not in shape,
                     **sizes})
        print(f"{label:22} {target.name:10} runtime {sizes['runtime_text']:6} B  model "
              f"{sizes['model_flash']:7} B  image flash {sizes['image_flash']:7} B  RAM {sizes['image_ram']:6} B")
    return rows


if __name__ == "__main__":
    sys.exit(main())
