"""The layer-block kind: an anytime neural network whose stages are blocks of layers, each with an exit.

`KIND` is what the registry (`edgeseq.export.kinds`) hands the spine: the export writer
(`writer.write_layer_export`: stage graphs of `onnx`, the manifest with each stage's inputs, commit
flag, width and multiply-accumulates), the float C tables (`c_float.write_c_layer_blocks`, run by the
float C runtime's `es_step`), the C row order (`c_float.layer_block_feature_order`: windows time-major),
the read-back (`verify.layer_model_from_export`) and the verify reference (`verify.verify_layer_export`).
Integer C is not offered for this kind yet: the writer refuses ``c_dtype="int16"`` in one line.

Examples
--------
>>> from edgeseq.export.kinds.layer_blocks.kind import KIND
>>> from edgeseq.forms.layer_blocks import _example_model
>>> KIND.name, KIND.form_of(_example_model()) is not None, KIND.form_of(3.0)
('layer_blocks', True, None)
"""

from __future__ import annotations

import numpy as np

from edgeseq.errors import ExportError, InputError
from edgeseq.export.kinds import ExportRequest, StageKind
from edgeseq.forms.layer_blocks import LayerBlockModel


def _writer(form, request: ExportRequest):
    from edgeseq.export.kinds.layer_blocks.writer import write_layer_export

    r = request
    if r.c_dtype != "float32":
        raise ExportError("integer C is not available for layer-block models yet; export with c_dtype 'float32'")
    if r.c_link != "commit":
        raise ExportError("layer-block C links at every commit; --c-link read applies to linear and tree models")
    classes = None if form is r.source else getattr(r.source, "classes_", None)  # an estimator's own labels
    return lambda tmp: write_layer_export(form, tmp, r.model_name, r.c_prefix, r.batch_size, r.labels, classes,
                                          source=type(r.source).__name__)


def _write_c(form, out_dir, prefix: str, model_name: str | None = None) -> list[str]:
    from edgeseq.export.kinds.layer_blocks.c_float import write_c_layer_blocks

    return write_c_layer_blocks(form, out_dir, prefix, model_name)


def _c_rows(form, X):
    """Raw rows in the model's feature layout, reordered to the generated C's layout (windows time-major)."""
    from edgeseq.export.kinds.layer_blocks.c_float import layer_block_feature_order

    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != form.n_features:
        raise InputError(f"X must have shape (n, {form.n_features}) (the model's raw features), got {X.shape}")
    return X[:, layer_block_feature_order(form)]


def _read_back(out_dir):
    from edgeseq.export.kinds.layer_blocks.verify import layer_model_from_export

    return layer_model_from_export(out_dir)


def _verify(out_dir, X=None, *, source: str = "", use_c: bool = True, require_c: bool = False, compiler=None):
    from edgeseq.export.kinds.layer_blocks.verify import verify_layer_export

    return verify_layer_export(out_dir, X, source=source, use_c=use_c, require_c=require_c, compiler=compiler)


def _manifest_rows(m: dict) -> list[str]:
    """One row per stage: the groups it pays for, its cost, width, multiply-accumulates and commit flag."""
    head = f"{'stage':>5}  {'new groups':<30} {'cost':>9} {'cum_cost':>9} {'width':>6} {'MACs':>8} {'commit':>6}  file"
    lines = [head, "-" * len(head)]
    names = {g["input_name"]: g["name"] for g in m["groups"]}
    for p in m["prefixes"]:
        new = ", ".join(names.get(n, n) for n in p.get("new_groups", [])) or "-"
        lines.append(f"{p['index']:>5}  {new[:30]:<30} {p['cost']:>9.4g} {p['cum_cost']:>9.4g} {p['width']:>6} "
                     f"{p['macs']:>8} {str(bool(p['commit'])).lower():>6}  {p['file']}")
    return lines


KIND = StageKind("layer_blocks", "layer-block stage", LayerBlockModel, writer=_writer, read_back=_read_back,
                 verify=_verify, write_c=_write_c, c_rows=_c_rows, manifest_rows=_manifest_rows)
