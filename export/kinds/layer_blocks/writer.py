"""Layer-block exports: a LayerBlockModel -> one ONNX graph per stage + manifest.json
(``stage_kind: "layer_blocks"``) + the C model of `c_layer_blocks`.

`edgeseq.export.writer.export_model` calls `write_layer_export` inside its temporary directory for a
LayerBlockModel or a fitted AnytimeNet estimator, so the export appears atomically and is re-read with
the reader's own checks (`edgeseq.format.read_verified`) first, exactly as linear and tree exports.

Manifest entry of stage k (besides index, file, sha256, cum_cost, metrics, float32_max_abs_diff):
``inputs`` -- the group inputs its graph reads, in list order, then ``state_in`` unless the stage
ignores the state (stage 1 and every reset stage); ``new_groups`` and ``cost`` as for tree stages;
``commit`` (false: the stage runs for its state but never answers); ``width`` (columns of its
``state_out``); ``macs``. A windowed group carries ``shape`` = [channels, length].
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from edgeseq.errors import ExportError
from edgeseq.format import (FORMAT, FORMAT_VERSION, MANIFEST, STATE_IN, dump_manifest, labels_entry,
                            manifest_checksum, prefix_file, read_verified, sha256_file, validate_manifest)
from edgeseq.io.atomic import atomic_write_bytes
from edgeseq.forms.layer_blocks import LayerBlockModel
from edgeseq.export import onnx_graphs
from edgeseq.export.kinds.layer_blocks.c_float import layer_layout, write_c_layer_blocks
from edgeseq.export.kinds.layer_blocks.onnx import build_layer_block_graph, stage_inputs
from edgeseq.export.kinds.trees.writer import _classes, c_entry, tree_input_names

N_CHECK_ROWS = 256


def float32_stage_diffs(model: LayerBlockModel, n: int = N_CHECK_ROWS, seed: int = 0) -> list[float]:
    """Worst |float32 - float64| prediction of each stage on seeded N(0, 1) rows (states chained).

    Raises
    ------
    ExportError
        If a stage overflows float32 on these rows.

    Examples
    --------
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> d = float32_stage_diffs(_example_model(), n=16)
    >>> len(d), d[0], max(d) < 1e-5
    (3, 0.0, True)
    """
    X = np.random.default_rng(seed).normal(size=(n, model.n_features))
    diffs = []
    with np.errstate(over="ignore", invalid="ignore"):
        for k, (z64, z32) in enumerate(zip(model.staged_decision(X), model.staged_decision(X, np.float32))):
            p64, p32 = model.apply_link(z64), model.apply_link(z32.astype(np.float64))
            worst = float(np.max(np.abs(p32 - p64)))
            if not np.isfinite(worst):
                raise ExportError(f"stage {k} overflows float32 on standard-normal rows; rescale the features and refit")
            diffs.append(worst)
    return diffs


def build_layer_manifest(model: LayerBlockModel, model_name: str, input_names: list, stage_files: list,
                         diffs: list, files: list, c: dict, batch_size=None, labels: str = "graph",
                         classes=None, source: str = "") -> dict:
    """The manifest dict (with its checksum) of a layer-block export whose files are written.

    Examples
    --------
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> c_files = [{"file": "m.h", "sha256": "0" * 64}, {"file": "m.c", "sha256": "0" * 64}]
    >>> m = build_layer_manifest(_example_model(), "demo", ["a", "w"], [(f"s{k}.onnx", "0" * 64) for k in range(3)],
    ...                          [0.0] * 3, c_files, {"prefix": "demo", "header": "m.h", "source": "m.c"})
    >>> m["stage_kind"], [p["inputs"] for p in m["prefixes"]], m["groups"][1]["shape"]
    ('layer_blocks', [['n'], ['a'], ['w', 'state_in']], [1, 4])
    """
    lay = layer_layout(model)
    order = lay.order + [g for g in range(len(model.group_names)) if g not in set(lay.order)]
    groups, cum = [], 0.0
    for g in order:
        cols = model.group_columns[g].tolist()
        cum += float(model.costs[g])
        entry = {"name": model.group_names[g], "input_name": input_names[g], "index": g, "columns": cols,
                 "column_names": None, "dim": len(cols), "cost": float(model.costs[g]), "cum_cost": cum}
        if g in lay.windows:
            entry["shape"] = list(lay.windows[g])
        groups.append(entry)
    stages, cum = [], 0.0
    for k, ((fname, sha), s) in enumerate(zip(stage_files, model.stages)):
        cum += s.cost
        reads = [input_names[g] for g in stage_inputs(model, k)]
        inputs = [onnx_graphs.PREFIX0_INPUT] if k == 0 else reads + ([STATE_IN] if s.W is not None else [])
        stages.append({"index": k, "file": fname, "sha256": sha, "cum_cost": cum, "inputs": inputs,
                       "metrics": {"train": None}, "float32_max_abs_diff": diffs[k],
                       "new_groups": [input_names[g] for g in s.new_groups], "cost": s.cost,
                       "commit": bool(s.commit), "width": s.width, "macs": int(s.macs)})
    P = model.n_outputs
    n_classes = 2 if model.link == "sigmoid" else P
    m = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "model_name": model_name,
        "task": "regression" if model.link == "identity" else "classification", "link": model.link,
        "stage_kind": "layer_blocks",
        "outputs": {"names": list(model.output_names), "n_outputs": P, "classes": _classes(model, n_classes, classes),
                    "y_was_1d": model.link == "identity" and P == 1},
        "dtype": "float32",
        "onnx": {"opset": onnx_graphs.OPSET, "ir_version": onnx_graphs.IR_VERSION},
        "batch_size": None if batch_size is None else int(batch_size), "ort": None,
        "n_features_in": model.n_features, "feature_names": None, "feature_mean": None, "feature_std": None,
        "groups": groups, "prefixes": stages, "files": files, "c": c, "doubling_violations": [],
        "provenance": {"stage_kind": "layer_blocks", "source": source or type(model).__name__,
                       "stage_macs": [int(v) for v in model.stage_macs]},
        **labels_entry(labels),
    }
    m["manifest_sha256"] = manifest_checksum(m)
    validate_manifest(m)
    return m


def write_layer_export(model: LayerBlockModel, tmp: Path, model_name: str, c_prefix: str, batch_size=None,
                       labels: str = "graph", classes=None, source: str = "") -> dict:
    """Write every file of a layer-block export into the fresh directory `tmp`; return the manifest.

    Raises
    ------
    ExportError
        A model the C or ONNX emitters refuse, one without a stage beyond the prior, or a stage that
        overflows float32 on the check rows.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> m = write_layer_export(_example_model(), Path(tempfile.mkdtemp()), "demo", "demo")
    >>> [p["file"] for p in m["prefixes"]], sorted(f["file"] for f in m["files"])
    (['prefix_000.onnx', 'prefix_001.onnx', 'prefix_002.onnx'], ['edgeseq_model.c', 'edgeseq_model.h'])
    """
    model = layer_layout(model).model  # re-validated through the constructor
    if len(model.stages) < 2:
        raise ExportError("the model has no stage beyond the prior; there is nothing to export")
    input_names = tree_input_names(model.group_names)
    diffs = float32_stage_diffs(model)
    stage_files = []
    for k in range(len(model.stages)):
        graph = build_layer_block_graph(model, k, input_names, model_name=model_name, batch_size=batch_size,
                                        labels=labels)
        onnx.checker.check_model(graph, full_check=True)
        fname = prefix_file(k, len(model.stages))
        atomic_write_bytes(tmp / fname, graph.SerializeToString())
        stage_files.append((fname, sha256_file(tmp / fname)))
    written = write_c_layer_blocks(model, tmp, c_prefix, model_name)
    c_files = [{"file": Path(f).name, "sha256": sha256_file(tmp / Path(f).name)} for f in written]
    manifest = build_layer_manifest(model, model_name, input_names, stage_files, diffs, c_files,
                                    c_entry(c_files, c_prefix), batch_size, labels, classes, source)
    atomic_write_bytes(tmp / MANIFEST, dump_manifest(manifest))
    read_verified(tmp)  # the reader's own checks, before anything becomes visible
    return manifest
