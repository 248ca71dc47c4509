"""`export_model`: a fitted model -> out/ (stage graphs, generated C, manifest), written atomically.

The model's stage kind (`edgeseq.export.kinds`) writes its files (the affine kind: `kinds.affine.writer`).

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

from edgeseq.errors import ExportError, InputError, OutputError
from edgeseq.io.atomic import recover_dir, replace_dir, temp_dir_for
from edgeseq.messages import clip
from edgeseq.forms.linear import check_name

from edgeseq.export import onnx_graphs
from edgeseq.export.choices import check_choice
from edgeseq.export.target import prepare_target as _prepare_target

MAX_BATCH_SIZE = 1 << 16


def _c_generator():
    """The C generator's functions (another module's job); a clear error if it is missing."""
    try:
        from edgeseq.export import c_codegen
    except ImportError as exc:
        raise ExportError(f"the C code generator (edgeseq.export.c_codegen) is not available: {exc}") from None
    return c_codegen


def export_model(seq, out_dir, *, c_prefix=None, force=False, model_name=None,
                 check_stats=None, batch_size=None, ort=False, labels: str = "graph", c_dtype: str = "float32",
                 calibration=None, tree_ops: str = "ai-onnx-ml", stop_data=None,
                 max_disagreement: float = 0.005, stop_rule: str = "auto", stop_statistic: str = "auto",
                 c_trees: str = "table", c_link: str = "commit") -> dict:
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
    `stop_rule`: "auto" (default: "scaled" when the stop data are enough to shape it, else "shared"),
    "scaled", "shared" (one threshold for every stage) or "per-stage" (see `calibrate_stopping`).
    `stop_statistic`: "auto" (default: "logit_gap" for a float C model, "top2_margin" for an int16
    one), "logit_gap" (top-two gap of the raw scores) or "top2_margin" (of the probabilities).
    `c_trees`: float tree stages only -- "table" (default: node tables the runtime walks, started by
    ``es_init``), "code" (each stage a generated C function, started by ``es_init_code``; the same
    bits, fewer instructions on Cortex-M, more flash and a compile time that grows with the model) or
    "auto" (code up to `c_float.CODE_AUTO_MAX_NODES` nodes, tables beyond); the form written is
    recorded as the manifest's ``c.trees`` (absent: table) so verify regenerates the same C.
    `c_link`: float C of linear and tree models only -- "commit" (default: every stage commits its
    probabilities) or "read" (every stage commits its raw scores and ``es_current`` applies the link:
    the same bits, no ``expf`` per stage, the link paid on each read instead); recorded as the
    manifest's ``c.link`` (absent: commit).

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
    check_choice(tree_ops, TREE_OPS, "tree ops")  # linear prefixes are core operators whichever is asked
    check_choice(c_dtype, ("float32", "int16"), "C dtype")
    from edgeseq.export.kinds.trees.c_float import C_TREES
    check_choice(c_trees, C_TREES, "C tree form")
    if c_trees == "code" and c_dtype == "int16":
        raise ExportError("the int16 C keeps its tree stages as tables; --c-trees code needs --c-dtype float32")
    from edgeseq.export.c_codegen import C_LINKS
    check_choice(c_link, C_LINKS, "C link mode")
    if c_link == "read" and c_dtype == "int16":
        raise ExportError("the int16 C links at every commit; --c-link read needs --c-dtype float32")
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
                                            tree_ops=tree_ops, c_trees=c_trees, c_link=c_link))
    if stop_data is not None:  # per-input stopping is the spine's: calibrated on the written export
        write = _with_stopping(write, stop_data, max_disagreement, getattr(write, "int16", None), stop_rule,
                               stop_statistic)
    return _write_atomically(out, force, write)


def _with_stopping(write, stop_data, max_disagreement, int16=None, rule: str = "auto", statistic: str = "auto"):
    """`write`, followed by the stopping calibration on the written export (on the integer model's own
    outputs when `int16` = (model, quantised model) is given)."""
    from edgeseq.export.stopping import add_stopping

    return lambda tmp: add_stopping(tmp, write(tmp), stop_data, max_disagreement, int16=int16, rule=rule,
                                    statistic=statistic)


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
