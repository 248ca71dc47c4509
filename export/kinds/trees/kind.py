"""The tree-stage kind: each stage adds boosted-tree leaves to a carried float32 state, then a readout.

`KIND` is what the registry (`edgeseq.export.kinds`) hands the spine: the export writer
(`writer.write_tree_export`: stage graphs of `onnx` or `onnx_core`, manifest), the float C tables
(`c_float.write_c_tree_model`), the int16 quantisation and C tables (`quantize.quantize_trees`,
`c_int16.write_c_int16_tree_model`), the read-back (`verify.tree_model_from_export`) and the verify
reference (`verify.verify_tree_export`).

Examples
--------
>>> from edgeseq.export.kinds.trees.kind import KIND
>>> from edgeseq.export.kinds.trees.c_float import _demo_model
>>> KIND.name, KIND.form_of(_demo_model()) is not None, KIND.form_of(3.0)
('trees', True, None)
"""

from __future__ import annotations

import numpy as np

from edgeseq.errors import InputError
from edgeseq.export.kinds import ExportRequest, StageKind
from edgeseq.forms.trees import TreeStageModel


def _writer(form, request: ExportRequest):
    from edgeseq.export.kinds.trees.writer import write_tree_export

    r = request
    classes = None if form is r.source else getattr(r.source, "classes_", None)  # an estimator's own labels
    if r.tree_ops == "core":  # store the trees in the order the core tables are read back in
        from edgeseq.export.kinds.trees.onnx_core import splits_first
        form = splits_first(form)
    c_int16 = _tree_int16(form, r, classes) if r.c_dtype == "int16" else None

    def write(tmp):
        return write_tree_export(form, tmp, r.model_name, r.c_prefix, r.batch_size, r.ort,
                                 source=type(r.source).__name__, classes=classes, labels=r.labels,
                                 c_int16=c_int16, tree_ops=r.tree_ops, c_trees=r.c_trees,
                                 c_link=r.c_link)
    write.int16 = None if c_int16 is None else (form, c_int16[0])  # what per-input stopping calibrates on
    return write


def _write_c(form, out_dir, prefix: str, model_name: str | None = None) -> list[str]:
    from edgeseq.export.kinds.trees.c_float import write_c_tree_model

    return write_c_tree_model(form, out_dir, prefix, model_name)


def _c_rows(form, X):
    """Raw rows in the model's feature layout, reordered to the generated C's group order."""
    from edgeseq.export.kinds.trees.c_float import tree_feature_order

    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != form.ensemble.n_features:
        raise InputError(f"X must have shape (n, {form.ensemble.n_features}) (the model's raw features), "
                         f"got {X.shape}")
    return X[:, tree_feature_order(form)]


def _read_back(out_dir):
    from edgeseq.export.kinds.trees.verify import tree_model_from_export

    return tree_model_from_export(out_dir)


def _verify(out_dir, X=None, *, source: str = "", use_c: bool = True, require_c: bool = False,
           compiler=None):
    from edgeseq.export.kinds.trees.verify import verify_tree_export

    return verify_tree_export(out_dir, X, source=source, use_c=use_c, require_c=require_c, compiler=compiler)


def _manifest_rows(m: dict) -> list[str]:
    """One row per tree stage: the groups it adds, its cost, its trees and their depth."""
    ops = "core operators" if m["onnx"].get("tree_ops") == "core" else f"ai.onnx.ml opset {m['onnx'].get('ml_opset')}"
    lines = [f"tree stages ({ops}), carried state of width {m['state_width']}; "
             f"{sum(p['n_trees'] for p in m['prefixes'])} trees, {sum(p['n_nodes'] for p in m['prefixes'])} nodes"]
    head = f"{'stage':>5}  {'new groups':<30} {'cost':>9} {'cum_cost':>9} {'trees':>6} {'nodes':>7} {'depth':>5} " \
           f"{'f32 diff':>9}  file"
    lines += [head, "-" * len(head)]
    names = {g["input_name"]: g["name"] for g in m["groups"]}
    for p in m["prefixes"]:
        new = ", ".join(names[n] for n in p["new_groups"]) or "-"
        lines.append(f"{p['index']:>5}  {new[:30]:<30} {p['cost']:>9.4g} {p['cum_cost']:>9.4g} {p['n_trees']:>6} "
                     f"{p['n_nodes']:>7} {p['max_depth']:>5} {p['float32_max_abs_diff']:>9.2g}  {p['file']}")
    unused = [g["name"] for g in m["groups"][sum(len(p["new_groups"]) for p in m["prefixes"]):]]
    if unused:
        lines.append(f"groups no stage needs (never extracted): {', '.join(unused)}")
    return lines


def _tree_int16(model, request: ExportRequest, classes):
    """(TreeInt16Model, manifest entry) of a tree model's int16 C: quantised once, here, from the rows."""
    from edgeseq.export.kinds.trees.c_int16 import tree_int16_manifest_entry
    from edgeseq.export.kinds.trees.quantize import quantize_trees

    X, y = request.calibration_rows()
    qm = quantize_trees(model, X, y, classes=classes)
    return qm, tree_int16_manifest_entry(qm, len(X))


def _int16_rows(form, qm, X):
    """Raw rows as the int16 C reads them (quantised, in the C's group order)."""
    from edgeseq.export.kinds.trees.quantize import quantize_tree_features

    return quantize_tree_features(qm, X)


def _int16_staged(form, qm, X):
    """Per stage, the integer model's bit-exact outputs (`quantize.simulate_trees`)."""
    from edgeseq.export.kinds.trees.quantize import simulate_trees

    return simulate_trees(qm, _int16_rows(form, qm, X))


KIND = StageKind("trees", "tree-stage", TreeStageModel, writer=_writer, read_back=_read_back, verify=_verify,
                 write_c=_write_c, c_rows=_c_rows, manifest_rows=_manifest_rows, int16_rows=_int16_rows,
                 int16_staged=_int16_staged)
