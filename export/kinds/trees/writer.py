"""Tree-stage exports: a TreeStageModel -> one ONNX graph per stage + manifest.json (``stage_kind: "trees"``).

`edgeseq.export.writer.export_model` calls `write_tree_export` inside its temporary directory, so a
tree export appears atomically and is re-read with the reader's own checks (`read_verified`)
before it becomes visible, exactly like a linear one. The stage graphs are built by
`edgeseq.export.kinds.trees.onnx`; the C model of tree stages is written by a separate emitter, called at
the one marked place below (`write_c_tree_files`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from edgeseq.errors import ExportError
from edgeseq.format import (FORMAT, FORMAT_VERSION, MANIFEST, STATE_IN, STATE_OUT, dump_manifest, labels_entry,
                            manifest_checksum, prefix_file, read_verified, sha256_file, validate_manifest)
from edgeseq.io.atomic import atomic_write_bytes
from edgeseq.forms.linear import sample_count
from edgeseq.export import onnx_graphs
from edgeseq.export.choices import check_choice
from edgeseq.export.kinds.trees import onnx as onnx_trees
from edgeseq.export.names import RESERVED_ONNX_NAMES, c_identifier, unique_names

N_CHECK_ROWS = 512
_F32_MAX = float(np.finfo(np.float32).max)
TREE_RESERVED_NAMES = RESERVED_ONNX_NAMES | {STATE_IN, STATE_OUT}


def tree_input_names(group_names) -> list[str]:
    """ONNX input names of the groups: as for linear graphs, and never the state's names either.

    Examples
    --------
    >>> from edgeseq.export.kinds.trees.writer import tree_input_names
    >>> tree_input_names(["color", "state_in", "y"])
    ['color', 'state_in_2', 'y_2']
    """
    return unique_names(group_names, c_identifier, TREE_RESERVED_NAMES)


def check_tree_float32(model) -> None:
    """Refuse leaves and readouts that do not fit float32 (they would become inf in the graphs).

    Thresholds were rounded to float32 and checked finite when the ensemble was built.

    Raises
    ------
    ExportError
        Naming what is too large.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.writer import check_tree_float32
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 1e39], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> check_tree_float32(model)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: a leaf value has magnitude 1e+39, beyond float32's 3.4e+38; the model cannot be exported
    """
    parts = [("a leaf value", model.ensemble.value)]
    for k, s in enumerate(model.stages):
        parts += [(f"stage {k}'s readout weights", s.W), (f"stage {k}'s readout bias", s.b)]
    for what, arr in parts:
        worst = float(np.max(np.abs(arr))) if arr.size else 0.0
        if not np.isfinite(worst) or worst > _F32_MAX:
            raise ExportError(f"{what} has magnitude {worst:.3g}, beyond float32's {_F32_MAX:.3g}; "
                              "the model cannot be exported")


def check_row_count(model, n: int) -> int:
    """How many of `n` check rows a tree model gets: fewer for a very wide or very large model.

    The checks allocate rows of ``n_features`` values and, per row, one leaf of every tree and one value
    per state dimension; `edgeseq.forms.linear.sample_count` caps the larger of those widths, so a model file's
    counts cannot make a check allocate far more than the model itself.

    Examples
    --------
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.writer import check_row_count
    >>> check_row_count(_demo_model(), 512)
    512
    """

    ens = model.ensemble
    return sample_count(n, max(ens.n_features, ens.n_trees, ens.n_targets))


def threshold_rows(model, n: int = N_CHECK_ROWS, seed: int = 0) -> np.ndarray:
    """Rows that exercise the trees: each feature set to one of its split thresholds, exactly or nudged.

    Drawn rows around a mean say little about trees; rows on and next to the thresholds take both
    branches of every split and hit the boundary (``x == threshold`` goes left) on purpose. A
    feature no tree splits on is drawn from N(0, 1). Seeded, so exports and checks are reproducible.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.writer import threshold_rows
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=2, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a", "b"), ([0], [1]), [1.0, 1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> X = threshold_rows(model, n=64)
    >>> X.shape, bool((X[:, 0] == 0.5).any()), bool((X[:, 0] > 0.5).any()), bool((X[:, 0] < 0.5).any())
    ((64, 2), True, True, True)
    """
    ens = model.ensemble
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, ens.n_features))
    split = ens.feature >= 0
    for f in np.unique(ens.feature[split]).tolist():
        t = ens.threshold[split & (ens.feature == f)].astype(np.float64)
        pick = t[rng.integers(0, t.size, n)]
        step = rng.choice([-1.0, 0.0, 0.0, 1.0], n)  # on the threshold half of the time
        nudge = np.maximum(np.abs(pick), 1.0) * 10.0 ** rng.uniform(-7, 0, n)
        # clipped: a threshold near float32's limit must not be nudged past it (the row would be inf)
        X[:, f] = np.clip(pick + step * nudge, -_F32_MAX, _F32_MAX).astype(np.float32)
    return X


def float32_stage_diffs(model, X: np.ndarray) -> list[float]:
    """Worst |float32 - float64| prediction per stage, the float32 side summing as a device does.

    Leaves, readout and inputs are rounded to float32 and the state accumulates in float32, tree by
    tree in storage order; the numbers go into the manifest (``float32_max_abs_diff``).

    Raises
    ------
    ExportError
        If a stage overflows float32 on these rows.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.writer import float32_stage_diffs
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 0.1, 2.0], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> d = float32_stage_diffs(model, np.array([[0.0], [1.0]]))
    >>> d[0], 0 < d[1] < 1e-8     # 0.1 is not a float32
    (0.0, True)
    """
    ens = model.ensemble
    X32 = X.astype(np.float32)
    leaves = ens.tree_outputs(X32)  # (n, T) float64
    state32 = np.zeros((X.shape[0], ens.n_targets), np.float32)
    diffs = []
    with np.errstate(over="ignore", invalid="ignore"):
        for k, (s, z64) in enumerate(zip(model.stages, model.staged_decision(X32))):
            for t in range(s.tree_start, s.tree_stop):
                state32[:, ens.target[t]] += leaves[:, t].astype(np.float32)
            z32 = state32 @ s.W.astype(np.float32) + s.b.astype(np.float32)
            d = np.abs(model.apply_link(z32.astype(np.float64)) - model.apply_link(z64))
            worst = float(np.max(d)) if d.size else 0.0
            if not np.isfinite(worst):
                raise ExportError(f"stage {k} overflows float32 on rows at the trees' thresholds; the leaves or "
                                  "readout are too large for a float32 device")
            diffs.append(worst)
    return diffs


def write_c_tree_files(model, out_dir: Path, c_prefix: str, model_name: str, c_trees: str = "table",
                       c_link: str = "commit") -> list[str]:
    """The C model of the tree stages (``edgeseq_model.h/.c`` for the C runtime), via `c_trees`;
    `c_trees` is the form of the stages ("table" or "code", see `c_float.resolve_c_trees`), `c_link`
    where the link is applied ("commit" or "read", see `edgeseq.export.c_codegen.c_link_enum`).

    Returns the names of the files written directly in `out_dir`, one ``.h`` and one ``.c``; the
    manifest's ``c`` entry is filled from them (see `c_entry`) and ``files`` lists them with their sha256.

    Examples
    --------
    >>> import tempfile
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.writer import write_c_tree_files
    >>> sorted(write_c_tree_files(_demo_model(), tempfile.mkdtemp(), "demo", "demo"))
    ['edgeseq_model.c', 'edgeseq_model.h']
    """
    from edgeseq.export.kinds.trees import c_float

    return [Path(f).name for f in c_float.write_c_tree_model(model, out_dir, c_prefix, model_name, c_trees, c_link)]


def c_entry(c_files: list[dict], c_prefix: str) -> dict | None:
    """The manifest's ``c`` entry from the C emitter's files (None when it wrote none).

    Raises
    ------
    ExportError
        If the emitter wrote something other than one header and one source.

    Examples
    --------
    >>> from edgeseq.export.kinds.trees.writer import c_entry
    >>> c_entry([], "demo") is None
    True
    >>> c_entry([{"file": "m.h", "sha256": "0" * 64}, {"file": "m.c", "sha256": "0" * 64}], "demo")
    {'prefix': 'demo', 'header': 'm.h', 'source': 'm.c'}
    """
    if not c_files:
        return None
    heads = [f["file"] for f in c_files if f["file"].endswith(".h")]
    srcs = [f["file"] for f in c_files if f["file"].endswith(".c")]
    if len(heads) != 1 or len(srcs) != 1 or len(c_files) != 2:
        raise ExportError(f"the tree C emitter wrote {[f['file'] for f in c_files]}, expected one .h and one .c")
    return {"prefix": c_prefix, "header": heads[0], "source": srcs[0]}


def group_order(model) -> list[int]:
    """Original group indices in manifest order: as the stages require them, then the unused ones.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.writer import group_order
    >>> ens = TreeEnsemble(feature=[1, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=3, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a", "b", "c"), ([0], [1], [2]), [1.0, 1.0, 1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((1,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> group_order(model)
    [1, 0, 2]
    """
    required = model.groups_required(len(model.stages) - 1)
    return required + [g for g in range(len(model.group_names)) if g not in set(required)]


def _classes(model, n_classes: int, classes=None) -> list:
    """Class labels for the manifest: the estimator's, the model's, else 0..n_classes-1."""
    if model.link == "identity":
        return None
    classes = model.classes if classes is None else classes
    if classes is None:
        return list(range(n_classes))
    labels = np.asarray(classes).tolist()
    if len(labels) != n_classes:
        raise ExportError(f"the model has {n_classes} classes but {len(labels)} class labels")
    return labels


def build_tree_manifest(model, model_name: str, input_names: list[str], stage_files: list, diffs: list,
                        files: list, c: dict | None, batch_size=None, ort=None, source: str = "",
                        classes=None, labels: str = "graph", tree_ops: str = "ai-onnx-ml") -> dict:
    """The manifest dict (with its checksum) of a tree-stage export whose files are written.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.writer import build_tree_manifest
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> m = build_tree_manifest(model, "demo", ["a"], [("prefix_000.onnx", "0" * 64), ("prefix_001.onnx", "0" * 64)],
    ...                         [0.0, 0.0], [], None)
    >>> m["stage_kind"], m["state_width"], [p["inputs"] for p in m["prefixes"]]
    ('trees', 1, [['n'], ['a', 'state_in']])
    """
    order = group_order(model)
    fnames = model.feature_names  # raw column names, so `edgeseq run` matches a table by name
    groups, cum = [], 0.0
    for g in order:
        cols = model.group_columns[g].tolist()
        cum += float(model.costs[g])
        groups.append({"name": model.group_names[g], "input_name": input_names[g], "index": g, "columns": cols,
                       "column_names": None if fnames is None else [fnames[c] for c in cols],
                       "dim": len(cols), "cost": float(model.costs[g]), "cum_cost": cum})
    stages, cum = [], 0.0
    for k, ((fname, sha), s) in enumerate(zip(stage_files, model.stages)):
        cum += s.cost
        required = [input_names[g] for g in model.groups_required(k)]
        stages.append({"index": k, "file": fname, "sha256": sha, "cum_cost": cum,
                       "inputs": [*required, STATE_IN] if k else [onnx_graphs.PREFIX0_INPUT],
                       "metrics": {"train": None}, "float32_max_abs_diff": diffs[k],
                       "new_groups": [input_names[g] for g in s.new_groups], "cost": s.cost,
                       **onnx_trees.stage_facts(model, k)})
    P = model.n_outputs
    n_classes = 2 if model.link == "sigmoid" else P
    m = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "model_name": model_name,
        "task": "regression" if model.link == "identity" else "classification", "link": model.link,
        "stage_kind": "trees", "state_width": model.ensemble.n_targets,
        "outputs": {"names": list(model.output_names), "n_outputs": P, "classes": _classes(model, n_classes, classes),
                    "y_was_1d": model.link == "identity" and P == 1},
        "dtype": "float32",
        "onnx": {"opset": onnx_graphs.OPSET, "ir_version": onnx_graphs.IR_VERSION,
                 **({"tree_ops": "core"} if tree_ops == "core" else {"ml_opset": onnx_trees.ML_OPSET})},
        "batch_size": None if batch_size is None else int(batch_size), "ort": ort,
        "n_features_in": model.ensemble.n_features, "feature_names": None if fnames is None else list(fnames),
        "feature_mean": None,
        "feature_std": None, "groups": groups, "prefixes": stages, "files": files,
        "c": c, "doubling_violations": [],
        "provenance": {"stage_kind": "trees", "source": source or type(model).__name__,
                       "n_trees": model.ensemble.n_trees},
        **labels_entry(labels),
    }
    m["manifest_sha256"] = manifest_checksum(m)
    validate_manifest(m)
    return m


def write_tree_export(model, tmp: Path, model_name: str, c_prefix: str, batch_size=None, ort=False,
                      source: str = "", classes=None, labels: str = "graph", c_int16=None,
                      tree_ops: str = "ai-onnx-ml", c_trees: str = "table", c_link: str = "commit") -> dict:
    """Write every file of a tree export into the (fresh, temporary) directory `tmp`; return the manifest.

    `c_int16`: None (the float C of `c_trees`) or ``(TreeInt16Model, manifest entry)`` -- the integer C
    of `c_int16_trees` and its ``c.int16`` entry (`quantize_trees.tree_int16_manifest_entry`).
    `tree_ops`: "ai-onnx-ml" (one TreeEnsembleRegressor per stage) or "core" (core operators only,
    `onnx_trees_core`; recorded as the manifest's ``onnx.tree_ops``).
    `c_trees`: the form of the float C tree stages, "table", "code" or "auto" (`c_float.resolve_c_trees`);
    the code form is recorded as the manifest's ``c.trees`` ("code"; absent means tables).
    `c_link`: "commit" or "read" (`edgeseq.export.c_codegen.c_link_enum`); "read" of a sigmoid or softmax
    model is recorded as the manifest's ``c.link`` (absent means commit).

    Raises
    ------
    ExportError
        For a model that does not fit float32, overflows on the check rows, or whose trees read a
        group not computed by their stage.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from pathlib import Path
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.writer import write_tree_export
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> m = write_tree_export(model, Path(tempfile.mkdtemp()), "demo", "demo")
    >>> [p["file"] for p in m["prefixes"]], m["c"]["prefix"], sorted(f["file"] for f in m["files"])
    (['prefix_000.onnx', 'prefix_001.onnx'], 'demo', ['edgeseq_model.c', 'edgeseq_model.h'])
    """
    from edgeseq.io.model_io import check_tree_model

    check_tree_model(model, "the tree model")  # every construction check again, through the classes
    check_tree_float32(model)
    if model.stages[0].cost != 0:
        raise ExportError(f"stage 0 costs {model.stages[0].cost}; the prior must cost nothing to be exported")
    if len(model.stages) < 2:
        raise ExportError("the model has no stage beyond the prior; there is nothing to export")
    if len(model.stages) > 1 and not model.stages[1].new_groups:
        raise ExportError("stage 1 requires no group; a stage after the prior must read at least one group")
    check_choice(tree_ops, onnx_trees.TREE_OPS, "tree ops")
    if tree_ops == "core":  # the node order the core tables are read back in (LightGBM's already)
        from edgeseq.export.kinds.trees.onnx_core import splits_first
        model = splits_first(model)
    input_names = tree_input_names(model.group_names)
    diffs = float32_stage_diffs(model, threshold_rows(model, check_row_count(model, N_CHECK_ROWS)))
    stage_files = []
    for k in range(len(model.stages)):
        graph = onnx_trees.build_stage_graph(model, k, input_names, model_name=model_name, batch_size=batch_size,
                                             labels=labels, tree_ops=tree_ops)
        onnx.checker.check_model(graph, full_check=True)
        fname = prefix_file(k, len(model.stages))
        atomic_write_bytes(tmp / fname, graph.SerializeToString())
        stage_files.append((fname, sha256_file(tmp / fname)))
    c_files = []
    from edgeseq.export.kinds.trees.c_float import resolve_c_trees
    form = resolve_c_trees(model, c_trees) if c_int16 is None else "table"
    if c_int16 is None:
        written = write_c_tree_files(model, tmp, c_prefix, model_name, form, c_link)
    else:
        from edgeseq.export.kinds.trees.c_int16 import write_c_int16_tree_model
        written = write_c_int16_tree_model(model, c_int16[0], tmp, c_prefix, model_name)
    for f in written:
        p = Path(f) if Path(f).is_absolute() else tmp / f
        if p.parent.resolve() != tmp.resolve() or not p.is_file():
            raise ExportError(f"the tree C emitter reported {f!r}, which is not a file directly in the export")
        c_files.append({"file": p.name, "sha256": sha256_file(p)})
    c = c_entry(c_files, c_prefix)
    if c_int16 is not None:
        c = {**c, "dtype": "int16", "int16": c_int16[1]}
    elif form == "code":
        c = {**c, "trees": "code"}
    if c_int16 is None and c_link == "read" and model.link != "identity":
        c = {**c, "link": "read"}
    ort_entry = None
    if ort:
        from edgeseq.export.ort_format import write_ort_files
        ort_files, config = write_ort_files(tmp, [f for f, _ in stage_files])
        c_files += [{"file": f, "sha256": sha256_file(tmp / f)} for f in [*ort_files, config]]
        ort_entry = {"prefixes": ort_files, "operators_config": config}
    manifest = build_tree_manifest(model, model_name, input_names, stage_files, diffs, c_files, c, batch_size,
                                   ort_entry, source, classes, labels, tree_ops)
    atomic_write_bytes(tmp / MANIFEST, dump_manifest(manifest))
    read_verified(tmp)  # the reader's own checks, before anything becomes visible
    return manifest
