"""Flash and RAM of the C runtime + generated models on Cortex-M4F and Cortex-M3, from the build.

For three models trained on bundled scikit-learn data (a regression, a binary and a multiclass
classifier; the same ones the emulated-core tests run), a minimal firmware image
(runtime_c/examples/m4_footprint.c: static state, one anytime pass, an interrupt-style read) is
built with arm-none-eabi-gcc -Os, nano newlib and --gc-sections; `arm-none-eabi-size` gives the
figures written to bench/results/c_footprint.json (flash = text + data, RAM = data + bss). A
regression model is built with -DES_IDENTITY_ONLY, as its firmware would be (no expf, no libm).

    python bench/c_footprint.py
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from edgeseq.export.c_arm import ARM_CC, TARGETS, footprint, missing_tools
from edgeseq.export.c_codegen import write_c_model
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




def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    missing = missing_tools(run=False)
    if missing:
        print(f"c_footprint: {missing}", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgeseq_fp_") as tmp:
        for kind in KINDS:
            seq, _ = reference_model(kind)
            mdir = Path(tmp) / kind
            write_c_model(seq, mdir, kind[:3])
            for target in TARGETS.values():
                sizes = footprint(mdir, target, Path(tmp) / f"{kind}_{target.name}",
                                  identity_only=seq.link == "identity")
                rows.append({"model": kind, "link": seq.link, "groups": seq.n_groups,
                             "features": int(seq.group_sizes.sum()), "outputs": seq.n_outputs,
                             "target": target.name, "identity_only_runtime": seq.link == "identity", **sizes})
                print(f"{kind:10} {target.name:10} runtime {sizes['runtime_text']:6} B  model "
                      f"{sizes['model_flash']:6} B  image flash {sizes['image_flash']:6} B  RAM {sizes['image_ram']:6} B")
    version = subprocess.run([ARM_CC, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    table = {"title": f"Cortex-M sizes in bytes ({version})",
             "columns": ["model", "target", "runtime code", "model", "image flash", "image RAM"],
             "rows": [[r["model"], r["target"], r["runtime_text"], r["model_flash"], r["image_flash"],
                       r["image_ram"]] for r in rows]}
    doc = {"compiler": version,
           "flags": "-std=c99 -Os -ffunction-sections -fdata-sections, --specs=nano.specs --specs=nosys.specs "
                    "-Wl,--gc-sections",
           "columns": {"runtime_text": "bytes of code of edgeseq_runtime.o",
                       "model_flash": "bytes of edgeseq_model.o (weights, costs, names, descriptor)",
                       "image_flash": "text + data of the linked minimal firmware (runtime, model, newlib startup)",
                       "image_ram": "data + bss of that image (state, work buffer, newlib)"},
           "results": rows, "tables": [table]}
    print(f"wrote {write_result('c_footprint', doc, command_line())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
