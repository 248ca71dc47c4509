"""Flash and RAM of the default anytime networks on Cortex-M4F (and M3), from the build.

For each data set of bench/neural_quality.py (the same groups, costs, window shapes and training
split), `AnytimeNetClassifier` with its default architecture (one dense block of 32 units per stage, a
conv branch per windowed group, the linear CS-G-OMP group order) is fitted, exported with
`edgeseq.export_model` (ONNX graphs + the float C model), and the exported C is built into the
minimal firmware image of bench/c_footprint.py (runtime_c/examples/m4_footprint.c, driven with
es_next / es_step; arm-none-eabi-gcc -Os, nano newlib, --gc-sections). `arm-none-eabi-size` gives
flash (text + data) and RAM (data + bss: the static es_state and work buffer included); the work
buffer (``<prefix>_WORK_FLOATS`` x 4 bytes) and the
multiply-accumulates of each stage (``<prefix>_STAGE_MACS``) are read from the generated header.

Sizes depend on the architecture, not on how well the weights are trained, so the networks train
for at most ``--max-epochs`` epochs (default 5) to keep the run to a minute or two.

    python bench/neural_footprint.py [--datasets digits basic_motions mnist] [--max-epochs 5]

basic_motions needs the optional ``bench`` extra (sktime's wheel holds the data); mnist is the
MNIST-5k image rows (7 groups of 4 rows), read from the cached, hash-checked file.
Writes bench/results/neural_footprint.json.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import command_line, write_result  # noqa: I001  (bench/ is on sys.path)
from neural_quality import DATASETS
from sklearn.model_selection import train_test_split

from edgeseq import AnytimeNetClassifier, export_model
from edgeseq.export.c_arm import ARM_CC, TARGETS, footprint, missing_tools
from edgeseq.export.c_harness import model_prefix
from edgeseq.format import C_HEADER, C_SOURCE

DEFAULT_DATASETS = ("digits", "basic_motions", "mnist")
LABELS = {"digits": "digits (8 rows of 8 pixels)", "basic_motions": "BasicMotions (4 windows of 3 x 50)",
          "mnist": "MNIST-5k (7 groups of 4 image rows)"}


def header_figures(c_dir: Path) -> dict:
    """WORK_FLOATS, N_STATE, MACS_PER_STEP_MAX and the STAGE_MACS list of the generated model in `c_dir`."""
    prefix = model_prefix(c_dir)
    header = (c_dir / C_HEADER).read_text(encoding="ascii")
    source = (c_dir / C_SOURCE).read_text(encoding="ascii")

    def const(name):  # a literal or a sum of products of literals, e.g. (64u + 10u + 2u * 32u)
        m = re.search(rf"#define {prefix}_{name} (.+)", header)
        expr = m.group(1).split("/*")[0].strip().replace("u", "") if m else ""
        if not re.fullmatch(r"[\d\s()+*]+", expr):
            raise SystemExit(f"{c_dir / C_HEADER}: no literal {prefix}_{name} ({expr!r})")
        return int(eval(expr, {"__builtins__": {}}))  # digits, spaces, brackets, + and * only (checked above)
    macs = re.search(rf"{prefix}_STAGE_MACS\[[^\]]*\] = \{{([^}}]*)\}}", source)
    if macs is None:
        raise SystemExit(f"the generated model in {c_dir} has no {prefix}_STAGE_MACS table")
    return {"work_floats": const("WORK_FLOATS"), "n_state": const("N_STATE"),
            "macs_per_step_max": const("MACS_PER_STEP_MAX"),
            "stage_macs": [int(v.strip().rstrip("u")) for v in macs.group(1).split(",") if v.strip()]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=list(DEFAULT_DATASETS), choices=sorted(DATASETS))
    ap.add_argument("--max-epochs", type=int, default=5)
    args = ap.parse_args(argv)
    missing = missing_tools(run=False)
    if missing:
        print(f"neural_footprint: {missing}", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgeseq_nfp_") as tmp:
        for name in args.datasets:
            X, y, groups, costs, names, shapes, split, net_kw = DATASETS[name]()
            Xa, _, ya, _ = train_test_split(X, y, stratify=y, random_state=0, **split)
            est = AnytimeNetClassifier(groups, costs, group_names=names, group_shapes=shapes,
                                       max_epochs=args.max_epochs, random_state=0, **net_kw).fit(Xa, ya)
            out = Path(tmp) / name
            manifest = export_model(est, out, c_prefix=f"net_{name}")
            c_dir = out / Path(manifest["c"]["header"]).parent  # the C files sit beside the graphs
            figures = header_figures(c_dir)
            model = est.stage_model_
            n_params = int(sum(a.size for st in model.stages for a in _arrays(st)))
            for target in TARGETS.values():
                sizes = footprint(c_dir, target, Path(tmp) / f"{name}_{target.name}")
                row = {"data": name, "model": LABELS[name], "target": target.name, "stages": len(model.stages) - 1,
                       "features": int(sum(len(g) for g in groups)), "classes": len(est.classes_),
                       "parameters": n_params, **figures, "work_bytes": 4 * figures["work_floats"], **sizes}
                rows.append(row)
                print(f"{name:14} {target.name:10} model {sizes['model_flash']:7} B  image flash "
                      f"{sizes['image_flash']:7} B  RAM {sizes['image_ram']:6} B  work {row['work_bytes']:6} B  "
                      f"MACs {figures['stage_macs']}", flush=True)
    version = subprocess.run([ARM_CC, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    table = {"title": f"Default anytime networks: Cortex-M sizes in bytes and multiply-accumulates ({version}, -Os)",
             "columns": ["data (groups)", "target", "parameters", "model flash", "image flash", "image RAM",
                         "work buffer", "MACs per stage"],
             "rows": [[r["model"], r["target"], r["parameters"], r["model_flash"], r["image_flash"], r["image_ram"],
                       r["work_bytes"], ", ".join(str(m) for m in r["stage_macs"][1:])] for r in rows]}
    doc = {"compiler": version,
           "flags": "-std=c99 -Os -ffunction-sections -fdata-sections, --specs=nano.specs --specs=nosys.specs "
                    "-Wl,--gc-sections",
           "max_epochs": args.max_epochs,
           "columns": {"parameters": "float weights and biases of every stage (dense, injections, convolutions, heads)",
                       "runtime_text": "bytes of code of edgeseq_runtime.o (every kind's code: no -DES_LINEAR_ONLY)",
                       "model_flash": "bytes of edgeseq_model.o (weights, costs, names, stage descriptors)",
                       "image_flash": "text + data of the linked minimal firmware (runtime, model, newlib startup)",
                       "image_ram": "data + bss of that image (es_state, work buffer, the firmware's two feature arrays, newlib)",
                       "work_bytes": "<prefix>_WORK_FLOATS x 4: the work buffer, part of image_ram",
                       "n_state": "<prefix>_N_STATE: floats of one of the two ping-pong state buffers",
                       "macs_per_step_max": "<prefix>_MACS_PER_STEP_MAX: the largest stage",
                       "stage_macs": "<prefix>_STAGE_MACS: multiply-accumulates of each stage (stage 0 is the prior)"},
           "notes": "Sizes depend on the architecture only; the networks train for max_epochs epochs to keep the "
                    "run short. The MACs per stage column leaves out stage 0 (the prior: no compute).",
           "results": rows, "tables": [table]}
    print(f"wrote {write_result('neural_footprint', doc, command_line())}")
    return 0


def _arrays(stage):
    """The weight arrays of one layer-block stage (dense W and b, head V and c, each injection's U and conv)."""
    out = [a for a in (stage.W, stage.b, stage.V, stage.c) if a is not None]
    for inj in stage.injections:
        out.append(inj.U)
        if inj.conv is not None:
            out += [inj.conv.W, inj.conv.b]
    return out


if __name__ == "__main__":
    sys.exit(main())
