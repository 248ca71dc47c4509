"""int16 versus float32 C models on cores without an FPU: flash, RAM and time of a full anytime pass.

For the three reference models of bench/c_footprint.py (diabetes regression, breast-cancer binary,
digits multiclass) and three tree-stage models (AFR on digits and on breast cancer, a 100-tree
LightGBM regression on diabetes), quantised on their training rows (`edgeseq export --c-dtype int16`),
this builds for the emulated Cortex-M3 (mps2-an385) and Cortex-M0 (microbit), both -mfloat-abi=soft:

* the minimal firmware image of each build (runtime_c/examples/i16_footprint.c or m4_footprint.c, -Os,
  nano newlib, --gc-sections; the float regression runtime with -DES_IDENTITY_ONLY, no expf): flash = text + data, RAM = data + bss, from `arm-none-eabi-size`, and
  the soft-float routines it links (`arm-none-eabi-nm`);
* bench/c_int16_cycles.c: the median over 9 passes of SysTick ticks for one full pass (reset and every
  push) under `qemu-system-arm -icount shift=0`. That is instruction-counted virtual time -- the same
  every run, comparable between the two builds on one core -- not cycles of a real chip;
* the accuracy (explained-variance) loss of every prefix (tree models: stage) versus float, on the
  calibration rows and on the held-out rows.

The float and int16 passes of a tree model read different (random) feature values, so they may take
different paths; every walk is bounded by its stage's depth, so the ticks compare the two arithmetics,
not one row.

Writes bench/results/c_int16.json.

    python bench/c_int16.py
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from edgeseq.export.c_arm import ARM_CC, INT_TARGETS, build_arm, missing_tools, run_qemu, section_sizes
from edgeseq.export.kinds.affine.c_float import write_c_model
from edgeseq.export.c_harness import model_prefix, runtime_dir
from edgeseq.export.kinds.affine.c_int16 import write_c_int16_model
from edgeseq.export.kinds.trees.c_int16 import write_c_int16_tree_model
from edgeseq.export.kinds.trees.c_float import write_c_tree_model
from edgeseq.export.c_int16_run import firmware_image, int16_prefix, soft_float_symbols
from edgeseq.export.kinds.affine.quantize import prefix_losses, quantize_sequence
from edgeseq.export.kinds.trees.quantize import quantize_trees, stage_losses
from _results import command_line, write_result  # noqa: E402  (bench/ is on sys.path)
from c_footprint import KINDS, N_TEST, reference_model  # noqa: E402

HERE = Path(__file__).resolve().parent
ICOUNT = ("-icount", "shift=0")


def _data(kind: str):
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
    return {"regression": load_diabetes, "binary": load_breast_cancer, "multiclass": load_digits}[kind](return_X_y=True)


TREE_KINDS = ("afr-digits", "afr-breast-cancer", "lightgbm-diabetes")


def tree_reference(kind: str):
    """(TreeStageModel, X, y, classes, n_train): a tree-stage reference model fitted on all but the last
    N_TEST rows (a seeded shuffle first: the bundled sets are ordered), for the int16 tree rows."""
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits

    from edgeseq.train.trees.afr import AFRClassifier
    loader = {"afr-digits": load_digits, "afr-breast-cancer": load_breast_cancer, "lightgbm-diabetes": load_diabetes}
    X, y = loader[kind](return_X_y=True)
    perm = np.random.default_rng(0).permutation(len(X))
    X, y = X[perm], y[perm]
    n = len(X) - N_TEST
    if kind == "lightgbm-diabetes":
        import lightgbm as lgb

        from edgeseq.train.trees.lightgbm_import import from_lightgbm
        reg = lgb.LGBMRegressor(n_estimators=100, num_leaves=31, min_child_samples=5, verbose=-1, deterministic=True,
                                force_row_wise=True, n_jobs=1).fit(X[:n], y[:n])
        return from_lightgbm(reg, [[i] for i in range(X.shape[1])], [1.0] * X.shape[1]), X, y, None, n
    groups = ([list(range(r * 8, r * 8 + 8)) for r in range(8)] if kind == "afr-digits"
              else [list(range(i, 30, 10)) for i in range(10)])
    clf = AFRClassifier(groups, np.arange(1, len(groups) + 1, dtype=float), random_state=0).fit(X[:n], y[:n])
    return clf.stage_model_, X, y, clf.classes_, n


def _tree_losses(kind: str, tmp: Path) -> dict:
    """Quantise a tree reference model, write its int16 and float C, return its loss record."""
    model, X, y, classes, n = tree_reference(kind)
    qm = quantize_trees(model, X[:n], y[:n], classes=classes)
    held_out = stage_losses(model, qm, X[n:], y[n:], classes=classes)
    key = "explained_variance_loss" if model.link == "identity" else "accuracy_loss_pp"
    write_c_int16_tree_model(model, qm, tmp / f"{kind}_int16", "tree")
    write_c_tree_model(model, tmp / f"{kind}_float32", "tree")
    return {"model": kind, "metric": key, "calibration": [p[key] for p in qm.loss],
            "held_out": [p[key] for p in held_out], "reduced_bits": qm.reduced_bits.tolist(),
            "state_shift": qm.state_shift.tolist()}


def _ticks(mdir: Path, target, build: Path, int16: bool) -> int:
    define = f"ES16_PREFIX={int16_prefix(mdir)}" if int16 else f"ES_PREFIX={model_prefix(mdir)}"
    rt = runtime_dir() / ("edgeseq_runtime_i16.c" if int16 else "edgeseq_runtime.c")
    elf = build_arm([rt, mdir / "edgeseq_model.c", HERE / "c_int16_cycles.c"], build / "cycles.elf", target,
                    include_dirs=[mdir, runtime_dir()], defines=[define], opt="-Os")
    out = run_qemu(elf, target, extra=ICOUNT).stdout.split()
    return int(out[out.index("ticks") + 1])


def _build_row(kind: str, dtype: str, mdir: Path, target, tmp: Path) -> dict:
    build = tmp / f"{kind}_{dtype}_{target.name}"
    elf = firmware_image(mdir, target, build, int16=dtype == "int16", identity_only=kind in ("regression",
                                                                                              "lightgbm-diabetes"),
                         trees=kind in TREE_KINDS)
    objs = {p.name: p for p in build.glob("*.o")}
    sizes = section_sizes([*objs.values(), elf])
    rt = "edgeseq_runtime_i16.o" if dtype == "int16" else "edgeseq_runtime.o"
    image = sizes["firmware.elf"]
    model = sizes["edgeseq_model.o"]
    return {"model": kind, "dtype": dtype, "target": target.name, "runtime_text": sizes[rt]["text"],
            "model_flash": model["text"] + model["data"], "image_flash": image["text"] + image["data"],
            "image_ram": image["data"] + image["bss"], "soft_float_symbols": len(soft_float_symbols(elf)),
            "ticks_full_pass": _ticks(mdir, target, build, dtype == "int16")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    missing = missing_tools()
    if missing:
        print(f"c_int16: {missing}", file=sys.stderr)
        return 1
    rows, losses = [], []
    with tempfile.TemporaryDirectory(prefix="edgeseq_i16b_") as tmp:
        tmp = Path(tmp)
        for kind in KINDS:
            seq, X_test = reference_model(kind)
            X, y = _data(kind)
            qm = quantize_sequence(seq, X[:-N_TEST], y[:-N_TEST])
            held_out = prefix_losses(seq, qm, X_test, y[-N_TEST:])
            key = "accuracy_loss_pp" if seq.task == "classification" else "explained_variance_loss"
            losses.append({"model": kind, "metric": key, "calibration": [p[key] for p in qm.loss],
                           "held_out": [p[key] for p in held_out], "reduced_bits": qm.reduced_bits.tolist()})
            write_c_int16_model(seq, qm, tmp / f"{kind}_int16", kind[:3])
            write_c_model(seq, tmp / f"{kind}_float32", kind[:3])
        for kind in TREE_KINDS:
            losses.append(_tree_losses(kind, tmp))
        for kind in KINDS + TREE_KINDS:
            for target in INT_TARGETS.values():
                for dtype in ("float32", "int16"):
                    r = _build_row(kind, dtype, tmp / f"{kind}_{dtype}", target, tmp)
                    rows.append(r)
                    print(f"{kind:10} {target.name:9} {dtype:7} flash {r['image_flash']:6} B  RAM {r['image_ram']:5} B  "
                          f"model {r['model_flash']:6} B  soft-float routines {r['soft_float_symbols']:2}  "
                          f"ticks {r['ticks_full_pass']}")
    version = subprocess.run([ARM_CC, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    by = {(r["model"], r["target"], r["dtype"]): r for r in rows}
    size_table = {"title": f"int16 versus float32 C on cores without an FPU, bytes ({version})",
                  "columns": ["model", "target", "flash float32", "flash int16", "RAM float32", "RAM int16",
                              "model float32", "model int16", "soft-float routines float32 / int16"],
                  "rows": [[k, t, by[k, t, "float32"]["image_flash"], by[k, t, "int16"]["image_flash"],
                            by[k, t, "float32"]["image_ram"], by[k, t, "int16"]["image_ram"],
                            by[k, t, "float32"]["model_flash"], by[k, t, "int16"]["model_flash"],
                            f"{by[k, t, 'float32']['soft_float_symbols']} / {by[k, t, 'int16']['soft_float_symbols']}"]
                           for k in KINDS + TREE_KINDS for t in INT_TARGETS]}
    tick_table = {"title": "One full anytime pass (reset + every push), SysTick ticks under qemu -icount shift=0 "
                           "(instruction-counted virtual time, not real-core cycles)",
                  "columns": ["model", "target", "float32", "int16", "float32 / int16"],
                  "rows": [[k, t, by[k, t, "float32"]["ticks_full_pass"], by[k, t, "int16"]["ticks_full_pass"],
                            round(by[k, t, "float32"]["ticks_full_pass"] / by[k, t, "int16"]["ticks_full_pass"], 2)]
                           for k in KINDS + TREE_KINDS for t in INT_TARGETS]}
    loss_table = {"title": "Loss of the int16 model versus float per prefix or tree stage (accuracy: percentage "
                           "points; regression: explained variance), calibration rows / held-out rows",
                  "columns": ["model", "metric", "worst prefix, calibration", "worst prefix, held out",
                              "per prefix, held out"],
                  "rows": [[r["model"], r["metric"], max(r["calibration"]), max(r["held_out"]),
                            ", ".join(f"{v:.3g}" for v in r["held_out"])] for r in losses]}
    doc = {"compiler": version, "qemu": ["qemu-system-arm", *ICOUNT],
           "columns": {"image_flash": "text + data of the minimal firmware image", "image_ram": "data + bss",
                       "model_flash": "text + data of edgeseq_model.o",
                       "soft_float_symbols": "__aeabi_f*/__aeabi_d* and libgcc float routines linked",
                       "ticks_full_pass": "median SysTick ticks of one full pass under -icount shift=0"},
           "results": rows, "losses": losses, "tables": [size_table, tick_table, loss_table]}
    print(f"wrote {write_result('c_int16', doc, command_line())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
