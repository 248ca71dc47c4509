"""The affine kind's export writer: prefix graphs, the float32 check, the manifest and the C of a FittedSequence.

`edgeseq.export.writer.export_model` hands a `FittedSequence` to this kind (`kind.KIND.writer`), which
calls `_write_all` inside the spine's temporary directory, so a failure anywhere leaves the
previous export untouched. The graphs come from `onnx.build_prefix_graph`, the C from the writer the
kind chose (`c_float.write_c_model`, or the int16 one), and the manifest (`build_manifest`) is checked
by the reader's own code (`edgeseq.format.read_verified`) before anything becomes visible.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from edgeseq.errors import ExportError
from edgeseq.export import onnx_graphs
from edgeseq.export.kinds.affine.onnx import build_prefix_graph
from edgeseq.export.names import onnx_input_names
from edgeseq.format import (C_HEADER, C_SOURCE, FORMAT, FORMAT_VERSION, MANIFEST, dump_manifest, labels_entry,
                            manifest_checksum, prefix_file, read_verified, sha256_file, validate_manifest)
from edgeseq.forms.linear import FittedSequence, sample_count, sample_rows
from edgeseq.io.atomic import atomic_write_bytes


N_CHECK_ROWS = 512


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
    >>> from edgeseq.export.kinds.affine.writer import check_float32
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
    >>> from edgeseq.export.kinds.affine.writer import sample_inputs
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
    >>> from edgeseq.export.kinds.affine.writer import float32_diffs
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


def build_manifest(seq, model_name, input_names, prefix_files, diffs, c_files, c_prefix, batch_size=None,
                   ort=None, labels: str = "graph", c_int16: dict | None = None, c_link: str = "commit") -> dict:
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
        `kinds.affine.c_int16.int16_manifest_entry` when the C model is the int16 one; a float32 export's
        manifest stays exactly as before (no ``dtype`` key in ``c``).
    c_link : {"commit", "read"}, default="commit"
        Where the float C applies the link; recorded as ``c.link`` only when it is "read" (and the link
        is not the identity, which has nothing to defer).

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
    >>> from edgeseq.export.kinds.affine.writer import build_manifest
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
              **({} if c_int16 is None else {"dtype": "int16", "int16": c_int16}),
              **({"link": "read"} if c_link == "read" and seq.link != "identity" else {})},
        "doubling_violations": [int(v) for v in seq.doubling_violations],
        "provenance": _jsonable(seq.provenance),
        **labels_entry(labels),
    }
    m["manifest_sha256"] = manifest_checksum(m)
    validate_manifest(m)
    return m


def _write_all(seq, tmp: Path, model_name, c_prefix, check_stats, write_c_model, batch_size=None,
               ort=False, labels: str = "graph", c_int16: dict | None = None, c_link: str = "commit") -> dict:
    input_names = onnx_input_names(seq.group_names)
    diffs = float32_diffs(seq, sample_inputs(seq, check_stats))
    prefix_files = []
    for j in range(seq.n_prefixes):
        model = build_prefix_graph(seq, j, input_names, model_name=model_name, batch_size=batch_size, labels=labels)
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
                              ort_entry, labels, c_int16, c_link)
    atomic_write_bytes(tmp / MANIFEST, dump_manifest(manifest))
    read_verified(tmp)  # the reader's own checks, before anything becomes visible
    return manifest

