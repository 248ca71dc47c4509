"""Per-input early stopping on an emulated Cortex-M4F: the same stopping stage as Python on every row.

    python bench/early_stopping_m4f.py [--seed 0]

The digits bank split into 40 % training, 40 % calibration and 20 % test rows (stratified, one seed;
early_stopping.py now calibrates on 50 %: this check is about Python = C, not about the savings); the linear classifier and LightGBM imported as tree stages are exported with
``stop_data`` at δ = 0.005 and δ = 0.05 (where more rows stop early). On every test row the stopping loop runs in the Python runtime
(onnxruntime), in the C runtime built for the host, and in the C runtime cross-compiled for a
Cortex-M4F (arm-none-eabi-gcc, newlib's expf, single-precision FPU) and run in qemu-system-arm
(mps2-an386). Reported: the share of rows where each C build stops at the same stage with the same
label as Python (the requirement is 100 %), how many rows stopped before the last stage (the
comparison covers them), and the mean cost ratio.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from _results import command_line, write_result  # noqa: I001  (bench/ is on sys.path)
from early_stopping import _data, _models
from sklearn.model_selection import train_test_split

from edgeseq.export.c_arm import TARGETS, missing_tools
from edgeseq.export.stopping import c_stop_stages, group_features
from edgeseq.export.writer import export_model
from edgeseq.runtime.model import ExportedModel


def run(seed: int) -> dict:
    d = _data("digits")
    Xa, Xte, ya, _ = train_test_split(d.X, d.y, test_size=0.2, random_state=seed, stratify=d.y)
    Xtr, Xcal, ytr, ycal = train_test_split(Xa, ya, test_size=0.5, random_state=seed, stratify=ya)
    out = {}
    with tempfile.TemporaryDirectory(prefix="edgeseq_stopm4f_") as tmp:
        for mname, make in _models(d).items():
            model = make(Xtr, ytr)
            for delta in (0.005, 0.05):
                path = Path(tmp) / f"{len(out)}"
                m = export_model(model, path, stop_data=(Xcal, ycal), max_disagreement=delta)
                em = ExportedModel(path)
                py = em.predict(group_features(m, Xte), stop="confident")
                host = c_stop_stages(path, m, Xte)
                arm = c_stop_stages(path, m, Xte, target=TARGETS["cortex-m4f"])
                same = {name: float(np.mean((s == py.prefix) & (lab == py.label_index)))
                        for name, (s, lab) in (("host", host), ("cortex-m4f", arm))}
                early = int(np.count_nonzero(py.prefix < em.n_prefixes - 1))
                out[f"{mname} δ={delta:g}"] = {"rows": int(len(Xte)), "stopped_early": early, **same,
                                               "cost_ratio": float(em.cum_cost[py.prefix].mean() / em.cum_cost[-1])}
                print(mname, delta, out[f"{mname} δ={delta:g}"], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    missing = missing_tools()
    if missing is not None:
        raise SystemExit(f"needs the Cortex-M tools: {missing}")
    res = run(args.seed)
    rows = [[k, v["rows"], v["stopped_early"], f"{100 * v['host']:.1f} %", f"{100 * v['cortex-m4f']:.1f} %", f"{v['cost_ratio']:.3f}"]
            for k, v in res.items()]
    table = {"title": "Stopping stage and label: Python runtime vs C runtime, host build and emulated Cortex-M4F "
                      "(digits bank, test rows of one split)",
             "columns": ["model and δ", "test rows", "rows stopped before the last stage", "host C = Python", "Cortex-M4F C = Python", "mean cost / full"],
             "rows": rows}
    path = write_result("early_stopping_m4f", {"seed": args.seed, "results": res, "tables": [table]},
                        command_line())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
