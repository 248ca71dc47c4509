"""`export_model`: FittedSequence -> out/ (prefix graphs, generated C, manifest), written atomically.

Everything is written into a fresh temporary directory beside `out_dir`, verified with the same
checks a reader runs (`read_verified`), and only then swapped into place (`edgeseq.io.atomic`). A
crash at any point leaves `out_dir` holding the old or the new export, never a half-written one; the
next export to the same place cleans up what the crash left.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx

from edgeseq.errors import ExportError, InputError, OutputError
from edgeseq.io.atomic import atomic_write_bytes, recover_dir, replace_dir, temp_dir_for
from edgeseq.messages import clip
from edgeseq.forms.linear import MAX_SAMPLE_VALUES, FittedSequence, check_name, sample_count, sample_rows

from edgeseq.export import onnx_graphs
from edgeseq.format import (C_HEADER, C_SOURCE, FORMAT, FORMAT_VERSION, MANIFEST, prefix_file, dump_manifest, labels_entry, manifest_checksum,
                       listed_files, read_verified, sha256_file, validate_manifest)
from edgeseq.export.names import onnx_input_names
from edgeseq.export.target import prepare_target as _prepare_target

N_CHECK_ROWS = 512
MAX_BATCH_SIZE = 1 << 16



_F32_MAX = float(np.finfo(np.float32).max)


def check_float32(seq: FittedSequence) -> None:
    """Refuse weights that are not finite or do not fit float32 (they would become inf on export).

    Raises
    ------
    ExportError
        Naming the prefix and whether coefficients or intercept are at fault.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> from edgeseq.export.writer import check_float32
    >>> check_float32(seq)  # an ordinary model passes silently
    >>> seq.coefs[1][...] = 1e39
    >>> check_float32(seq)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: prefix 1 has coefficients of magnitude 1e+39, beyond float32's 3.4e+38; ...
    """
    for j in range(seq.n_prefixes):
        for what, arr in (("coefficients", seq.coefs[j]), ("intercept", seq.intercepts[j])):
            if arr.size and not np.all(np.isfinite(arr)):
                raise ExportError(f"prefix {j} has non-finite {what}; the model cannot be exported")
            worst = float(np.max(np.abs(arr))) if arr.size else 0.0
            if worst > _F32_MAX:
                raise ExportError(
                    f"prefix {j} has {what} of magnitude {worst:.3g}, beyond float32's {_F32_MAX:.3g}; "
                    "rescale the input features (or increase l2) and retrain")


def sample_inputs(seq: FittedSequence, check_stats=None, n: int = N_CHECK_ROWS) -> np.ndarray:
    """Rows for the float32 check: `check_stats` rows if given, else N(mean, std) of the training data
    (standard normal when the sequence has no statistics). Seeded, so exports are reproducible.

    Parameters
    ----------
    seq : FittedSequence
    check_stats : array-like, optional
        Finite (n, n_features_in) rows to use instead of drawn ones.
    n : int
        Rows to draw (reduced by `sample_count` for wide models).

    Raises
    ------
    ExportError
        If `check_stats` has the wrong shape or non-finite values.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> from edgeseq.export.writer import sample_inputs
    >>> rows = sample_inputs(seq, n=16)
    >>> rows.shape, np.array_equal(rows, sample_inputs(seq, n=16))
    ((16, 2), True)
    >>> sample_inputs(seq, check_stats=X[:3]).shape
    (3, 2)
    """
    if check_stats is not None:
        X = np.asarray(check_stats, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != seq.n_features_in or not np.all(np.isfinite(X)):
            raise ExportError(f"check_stats must be a finite (n, {seq.n_features_in}) array of sample rows")
        return X
    return sample_rows(seq.n_features_in, sample_count(n, seq.n_features_in), mean=seq.feature_mean,
                       std=seq.feature_std)


def float32_diffs(seq: FittedSequence, X: np.ndarray) -> list[float]:
    """Worst |float32 - float64| prediction (after the link) per prefix, on sample rows X.

    The float32 side rounds inputs and weights to float32 and accumulates in float32, as a device does.
    The numbers go into the manifest so a user sees how much precision the device build gives up.

    Returns
    -------
    list of float
        One worst absolute difference per prefix.

    Raises
    ------
    ExportError
        If a prefix overflows float32 on these rows.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> from edgeseq.export.writer import float32_diffs
    >>> d = float32_diffs(seq, X)
    >>> len(d) == seq.n_prefixes, max(d) < 1e-5
    (True, True)
    """
    diffs = []
    X32 = X.astype(np.float32)
    for j in range(seq.n_prefixes):
        cols = seq.prefix_columns(j)
        z64 = seq.linear_from_prefix_features(j, X[:, cols])
        z32 = X32[:, cols] @ seq.coefs[j].astype(np.float32) + seq.intercepts[j].astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            d = np.abs(seq.apply_link(z32.astype(np.float64)) - seq.apply_link(z64))
        worst = float(np.max(d)) if d.size else 0.0
        if not np.isfinite(worst):
            raise ExportError(f"prefix {j} overflows float32 on inputs drawn from the training statistics; "
                              "rescale the input features and retrain")
        diffs.append(worst)
    return diffs


def _jsonable(obj):
    """Plain JSON values from numpy/tuples; non-finite numbers become null (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    if obj is None or isinstance(obj, str):
        return obj
    return str(obj)


def _c_generator():
    """The C generator's functions (another module's job); a clear error if it is missing."""
    try:
        from edgeseq.export import c_codegen
    except ImportError as exc:
        raise ExportError(f"the C code generator (edgeseq.export.c_codegen) is not available: {exc}") from None
    return c_codegen


def build_manifest(seq, model_name, input_names, prefix_files, diffs, c_files, c_prefix, batch_size=None,
                   ort=None, labels: str = "graph", c_int16: dict | None = None) -> dict:
    """The manifest dict (with its checksum) for files already written.

    Parameters
    ----------
    seq : FittedSequence
    model_name : str
    input_names : list of str
        ONNX input name of each group.
    prefix_files : list of (str, str)
        (file name, sha256) of each prefix graph.
    diffs : list of float
        `float32_diffs` per prefix.
    c_files : list of dict
        ``{"file", "sha256"}`` of the other files.
    c_prefix : str
    batch_size : int, optional
    ort : dict, optional
        The ORT-format entry, if written.
    labels : {"graph", "runtime"}
        Where a classifier's label is chosen; recorded only when it is the runtime.
    c_int16 : dict, optional
        `c_int16.int16_manifest_entry` when the C model is the int16 one; a float32 export's
        manifest stays exactly as before (no ``dtype`` key in ``c``).

    Returns
    -------
    dict
        Validated manifest, including ``manifest_sha256``.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> from edgeseq.export.names import onnx_input_names
    >>> from edgeseq.export.writer import build_manifest
    >>> files = [(f"prefix_{j}.onnx", "0" * 64) for j in range(seq.n_prefixes)]
    >>> m = build_manifest(seq, "demo", onnx_input_names(seq.group_names), files, [0.0] * seq.n_prefixes,
    ...                    [{"file": f, "sha256": "0" * 64} for f in ("edgeseq_model.h", "edgeseq_model.c")], "demo")
    >>> m["model_name"], len(m["prefixes"]) == seq.n_prefixes, len(m["manifest_sha256"])
    ('demo', True, 64)
    """
    cum = seq.cum_cost
    fnames = seq.feature_names
    groups = []
    for k, g in enumerate(seq.order.tolist()):
        cols = seq.group_columns[g].tolist()
        groups.append({"name": seq.group_names[g], "input_name": input_names[g], "index": g,
                       "columns": cols, "column_names": None if fnames is None else [fnames[c] for c in cols],
                       "dim": len(cols), "cost": float(seq.costs[g]), "cum_cost": float(cum[k + 1])})
    prefixes = []
    for j, (fname, sha) in enumerate(prefix_files):
        train = seq.train_metrics[j] if j < len(seq.train_metrics) else None
        prefixes.append({"index": j, "file": fname, "sha256": sha, "cum_cost": float(cum[j]),
                         "inputs": [input_names[g] for g in seq.order[:j]] or [onnx_graphs.PREFIX0_INPUT],
                         "metrics": {"train": _jsonable(train) if train else None},
                         "float32_max_abs_diff": diffs[j]})
    m = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "model_name": model_name,
        "task": seq.task, "link": seq.link,
        "outputs": {"names": list(seq.output_names), "n_outputs": seq.n_outputs,
                    "classes": None if seq.classes is None else _jsonable(seq.classes.tolist()),
                    "y_was_1d": bool(seq.y_was_1d)},
        "dtype": "float32", "onnx": {"opset": onnx_graphs.OPSET, "ir_version": onnx_graphs.IR_VERSION},
        "batch_size": None if batch_size is None else int(batch_size),
        "ort": ort,
        "n_features_in": int(seq.n_features_in),
        "feature_names": None if fnames is None else list(fnames),
        "feature_mean": None if seq.feature_mean is None else _jsonable(seq.feature_mean),
        "feature_std": None if seq.feature_std is None else _jsonable(seq.feature_std),
        "groups": groups, "prefixes": prefixes, "files": c_files,
        "c": {"prefix": c_prefix, "header": C_HEADER, "source": C_SOURCE,
              **({} if c_int16 is None else {"dtype": "int16", "int16": c_int16})},
        "doubling_violations": [int(v) for v in seq.doubling_violations],
        "provenance": _jsonable(seq.provenance),
        **labels_entry(labels),
    }
    m["manifest_sha256"] = manifest_checksum(m)
    validate_manifest(m)
    return m


def _write_all(seq, tmp: Path, model_name, c_prefix, check_stats, write_c_model, batch_size=None,
               ort=False, labels: str = "graph", c_int16: dict | None = None) -> dict:
    input_names = onnx_input_names(seq.group_names)
    diffs = float32_diffs(seq, sample_inputs(seq, check_stats))
    prefix_files = []
    for j in range(seq.n_prefixes):
        model = onnx_graphs.build_prefix_graph(seq, j, input_names, model_name=model_name, batch_size=batch_size,
                                               labels=labels)
        onnx.checker.check_model(model, full_check=True)
        fname = prefix_file(j, seq.n_prefixes)
        atomic_write_bytes(tmp / fname, model.SerializeToString())
        prefix_files.append((fname, sha256_file(tmp / fname)))
    written = write_c_model(seq, tmp, c_prefix, model_name=model_name)
    c_files = []
    for f in written:
        p = Path(f)
        p = p if p.is_absolute() else tmp / p
        if p.parent.resolve() != tmp.resolve() or not p.is_file():
            raise ExportError(f"the C generator reported {f!r}, which is not a file directly in the export")
        c_files.append({"file": p.name, "sha256": sha256_file(p)})
    got = sorted(f["file"] for f in c_files)
    if got != sorted([C_HEADER, C_SOURCE]):
        raise ExportError(f"the C generator wrote {got}, expected {C_HEADER} and {C_SOURCE}")
    ort_entry = None
    if ort:
        from edgeseq.export.ort_format import write_ort_files
        ort_files, config = write_ort_files(tmp, [f for f, _ in prefix_files])
        c_files += [{"file": f, "sha256": sha256_file(tmp / f)} for f in [*ort_files, config]]
        ort_entry = {"prefixes": ort_files, "operators_config": config}
    manifest = build_manifest(seq, model_name, input_names, prefix_files, diffs, c_files, c_prefix, batch_size,
                              ort_entry, labels, c_int16)
    atomic_write_bytes(tmp / MANIFEST, dump_manifest(manifest))
    read_verified(tmp)  # the reader's own checks, before anything becomes visible
    return manifest




def export_model(seq, out_dir, *, c_prefix=None, force=False, model_name=None,
                 check_stats=None, batch_size=None, ort=False, labels: str = "graph", c_dtype: str = "float32",
                 calibration=None, tree_ops: str = "ai-onnx-ml", stop_data=None,
                 max_disagreement: float = 0.005, stop_rule: str = "shared") -> dict:
    """Write the export of `seq` into `out_dir` and return its manifest.

    `seq` is a FittedSequence (linear prefixes), or a TreeStageModel / fitted AFRClassifier (tree
    stages, written by `edgeseq.export.kinds.trees.writer`; `check_stats` does not apply to them).

    `model_name` defaults to `out_dir`'s name; `c_prefix` (a C identifier) to one derived from it.
    `check_stats`: optional (n, D) sample rows for the float32-vs-float64 check (default: rows drawn
    from the training statistics stored in `seq`). Refuses a non-empty `out_dir`; with `force` it
    replaces only an earlier edgeseq export (manifest.json with "format": "edgeseq-export" listing every
    entry) - never an arbitrary directory, which --force would otherwise delete.
    `batch_size`: fix the number of rows of every graph (for mobile execution providers, which take no
    node of a graph with a dynamic dimension); edgeseq's runtime then pads and splits batches to it.
    `ort`: also write each graph in ORT format and the operator config of a minimal onnxruntime
    build (see ort_format).
    `labels`: "runtime" leaves a classifier's ArgMax out of the graphs (NNAPI and CoreML run none);
    edgeseq's runtime then picks the first most probable class itself, as the C runtime does.
    `c_dtype`: "float32" (default) or "int16" -- the integer C model of `export/c_int16.py` (linear and
    GLM models) or `export/kinds/trees/c_int16.py` (tree stages) for cores without an FPU; it needs
    `calibration`, a pair (X, y) of rows with
    the model's raw columns (y may be None) from which the feature ranges and the recorded
    accuracy/explained-variance loss are taken.
    `tree_ops`: tree stages only -- "ai-onnx-ml" (default, one ``ai.onnx.ml`` TreeEnsembleRegressor
    per stage) or "core" (core operators only, for tract, OpenVINO and mobile execution providers;
    see `edgeseq.export.kinds.trees.onnx_core`).
    `stop_data`: classifiers only -- held-out rows X (or a pair (X, y); y is not used) with the model's
    raw columns on which per-input stopping thresholds are calibrated (`edgeseq.export.stopping`) so
    that at most `max_disagreement` of new rows stop with another answer than the full model; the
    thresholds go into the manifest's ``stopping`` entry and the C table ``<prefix>_stop_threshold``.
    `stop_rule`: "shared" (one threshold for every stage) or "per-stage" (see `calibrate_stopping`).

    Returns
    -------
    dict
        The manifest, as written to ``manifest.json``.

    Raises
    ------
    ExportError
        If the model cannot be exported as asked (weights beyond float32, bad name or batch size, a
        non-empty `out_dir` that is not an earlier export).
    OutputError
        If the files cannot be written; an earlier export in `out_dir` is then unchanged.

    Examples
    --------
    One ONNX graph per prefix; writing again into the same directory needs `force`:

    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> from edgeseq.export.writer import export_model
    >>> import tempfile
    >>> out = tempfile.mkdtemp() + "/demo_export"
    >>> m = export_model(seq, out)
    >>> [p["file"] for p in m["prefixes"]]
    ['prefix_000.onnx', 'prefix_001.onnx', 'prefix_002.onnx']
    >>> export_model(seq, out)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: ...demo_export is not empty; choose another directory or pass --force to replace it
    >>> export_model(seq, out, force=True)["model_name"]
    'demo_export'
    """
    from edgeseq.export.kinds import ExportRequest, kind_of_model

    kind, form = kind_of_model(seq)  # the one lookup: everything kind-specific is the kind's
    kind.check(form)
    _check_batch_size(batch_size)
    from edgeseq.export.kinds.trees.onnx import TREE_OPS
    if tree_ops not in TREE_OPS:  # linear prefixes are core operators whichever is asked
        raise ExportError(f"tree ops {tree_ops!r} is not one of {', '.join(map(repr, TREE_OPS))}")
    if c_dtype not in ("float32", "int16"):
        raise ExportError(f"C dtype {c_dtype!r} is not one of 'float32', 'int16'")
    check_labels(labels, form.link)
    out = Path(out_dir).absolute()
    model_name = model_name or out.name or "model"
    try:
        check_name(model_name, "model name")  # it is written into every graph, the C and the manifest
    except InputError as exc:
        raise ExportError(f"{exc}; pass another --model-name") from None
    cgen = _c_generator()
    c_prefix = cgen.default_c_prefix(model_name) if c_prefix is None else cgen.validate_c_prefix(c_prefix)
    write = kind.writer(form, ExportRequest(model_name, c_prefix, seq, check_stats=check_stats, batch_size=batch_size,
                                            ort=ort, labels=labels, c_dtype=c_dtype, calibration=calibration,
                                            tree_ops=tree_ops))
    if stop_data is not None:  # per-input stopping is the spine's: calibrated on the written export
        write = _with_stopping(write, stop_data, max_disagreement, getattr(write, "int16", None), stop_rule)
    return _write_atomically(out, force, write)


def _with_stopping(write, stop_data, max_disagreement, int16=None, rule: str = "shared"):
    """`write`, followed by the stopping calibration on the written export (on the integer model's own
    outputs when `int16` = (model, quantised model) is given)."""
    from edgeseq.export.stopping import add_stopping

    return lambda tmp: add_stopping(tmp, write(tmp), stop_data, max_disagreement, int16=int16, rule=rule)


def check_labels(labels, link: str) -> None:
    """Refuse a `labels` choice that is not one of onnx_graphs.LABELS, or "runtime" for a regression.

    Raises
    ------
    ExportError
        Naming the choices.

    Examples
    --------
    >>> from edgeseq.export.writer import check_labels
    >>> check_labels("runtime", "softmax")
    >>> check_labels("runtime", "identity")
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: a regression model has no labels; --labels runtime applies to classifiers
    """
    if labels not in onnx_graphs.LABELS:
        raise ExportError(f"labels must be one of {', '.join(onnx_graphs.LABELS)}, got {labels!r}")
    if labels == "runtime" and link == "identity":
        raise ExportError("a regression model has no labels; --labels runtime applies to classifiers")


def _check_batch_size(batch_size) -> None:
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
                                   or not 1 <= batch_size <= MAX_BATCH_SIZE):
        raise ExportError(f"batch size must be an integer in 1..{MAX_BATCH_SIZE}, got {batch_size!r}")


def _write_atomically(out: Path, force: bool, write, not_replaceable=None, what: str = "export") -> dict:
    """Run `write(tmp)` in a fresh temporary directory beside `out`, then swap it into place.

    `not_replaceable(out)` says why --force may not delete a non-empty `out` (None: it may); the
    default accepts only an earlier export. `what` names the directory in messages.
    """
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        recover_dir(out)  # an earlier crash: restore a parked old export, drop dead temporaries
        _prepare_target(out, force, not_replaceable, what)
        tmp = temp_dir_for(out)
    except OSError as exc:
        raise OutputError(f"cannot write the {what} {clip(out)}: {exc.strerror or exc}") from None
    try:
        manifest = write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; the export is an ordinary directory
        replace_dir(tmp, out)
    except OSError as exc:
        raise OutputError(f"cannot write the {what} {clip(out)}: {exc.strerror or exc}; "
                          f"an earlier {what} there is unchanged") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already on success (renamed or swapped out)
    return manifest
