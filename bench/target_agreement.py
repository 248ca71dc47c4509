"""How closely every target reproduces numpy: max |prediction - float64 numpy| per model and target.

For the three reference models of bench/c_footprint.py (regression, binary, multiclass; 40 held-out
rows each), every prefix is evaluated on every target and compared with the FittedSequence in float64
(the linear output for the regression, the class probabilities for the classifiers):

* C: the host build (gcc), Cortex-M4F and Cortex-M3 under qemu-system-arm (bare metal);
* ONNX: edgeseq's Python runtime (onnxruntime), `onnx.reference`, OpenVINO (f32 hint), tract.

Targets whose tools are missing are recorded as unavailable with the reason. Writes
bench/results/target_agreement.json.

    python bench/target_agreement.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from c_footprint import KINDS, reference_model
from _results import command_line, write_result  # noqa: E402  (bench/ is on sys.path)

from edgeseq.errors import EdgeseqError
from edgeseq.export.c_arm import TARGETS, missing_tools, run_driver_arm
from edgeseq.export.c_harness import run_c_model
from edgeseq.export.onnx_runners import prefix_feed, run_graph
from edgeseq.export.writer import export_model
from edgeseq.runtime.session import AnytimeSession

HERE = Path(__file__).resolve().parent


def _c_targets(out: Path, features):
    """{target: list of per-prefix predictions} for the C builds (or an error string)."""
    res = {"c-host-gcc": lambda: run_c_model(out, features).predictions}
    for name, target in TARGETS.items():
        res[name] = (lambda t=target: run_driver_arm(out, features, t)[0].predictions)
    return res


def _onnx_targets(out: Path, m: dict, X, seq):
    def session():
        feats = {seq.group_names[g]: X[:, seq.group_columns[g]] for g in range(seq.n_groups)}
        with AnytimeSession(out) as sess:
            preds = [sess.predict(feats, prefix=j) for j in range(seq.n_prefixes)]
        return [np.reshape(p, (len(X), -1)) if seq.link == "identity" else p.proba for p in preds]

    def graphs(runtime):
        key = "y" if seq.link == "identity" else "proba"
        return [run_graph(runtime, out / p["file"], prefix_feed(m, X, p["index"]))[key] for p in m["prefixes"]]

    res = {"python-runtime-onnxruntime": session}
    for runtime in ("onnx-reference", "openvino", "tract"):
        res[runtime] = (lambda r=runtime: graphs(r))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    arm_missing = missing_tools()
    rows = []
    with tempfile.TemporaryDirectory(prefix="edgeseq_agree_") as tmp:
        for kind in KINDS:
            seq, X = reference_model(kind)
            out = Path(tmp) / kind
            m = export_model(seq, out, c_prefix=kind[:3])
            features = X[:, seq.prefix_columns(len(seq.order))]
            refs = [seq.apply_link(seq.linear(X, j)) for j in range(seq.n_prefixes)]
            scale = max(float(np.max(np.abs(r))) for r in refs)
            targets = {**_c_targets(out, features), **_onnx_targets(out, m, X, seq)}
            for name, run in targets.items():
                row = {"model": kind, "link": seq.link, "target": name}
                if arm_missing and name in TARGETS:
                    row["unavailable"] = arm_missing
                else:
                    try:
                        preds = run()
                        diff = max(float(np.max(np.abs(np.asarray(p, np.float64) - r))) for p, r in zip(preds, refs))
                        row.update(max_abs_diff=diff, max_abs_reference=scale, prefixes=seq.n_prefixes, rows=len(X))
                    except EdgeseqError as exc:
                        row["unavailable"] = str(exc).splitlines()[0]
                rows.append(row)
                shown = f"{row['max_abs_diff']:.3g}" if "max_abs_diff" in row else "unavailable: " + row["unavailable"]
                print(f"{kind:10} {name:28} max |diff| {shown}")
    table = {"title": "max |prediction - numpy float64| over held-out rows and prefixes",
             "columns": ["model", "target", "max abs diff", "max abs reference"],
             "rows": [[r["model"], r["target"], f"{r['max_abs_diff']:.3g}" if "max_abs_diff" in r else
                       "unavailable", f"{r['max_abs_reference']:.3g}" if "max_abs_reference" in r else ""]
                      for r in rows]}
    doc = {
           "what": "max over held-out rows and prefixes of |prediction - numpy float64| (regression: the linear "
                   "output; classifiers: probabilities); max_abs_reference is the largest |numpy| value",
           "results": rows, "tables": [table]}
    print(f"wrote {write_result('target_agreement', doc, command_line())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
