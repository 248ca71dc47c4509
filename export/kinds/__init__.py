"""The stage-kind registry: one lookup, keyed by the manifest's ``stage_kind``, instead of kind branches.

An export is a sequence of stages of one *kind*: ``"affine"`` (linear prefixes of a `FittedSequence`) or
``"trees"`` (boosted-tree increments of a carried state, `TreeStageModel`). Everything that differs by
kind lives in one folder per kind (``export/kinds/<kind>/``) behind one object, the `StageKind`:
its ONNX stage graphs and manifest entry (`StageKind.writer`), its float C tables (`StageKind.write_c`),
its int16 quantisation and C tables (inside `writer` when ``c_dtype="int16"``), how an export of that kind
is read back (`StageKind.read_back`), and the reference that `verify` compares against
(`StageKind.verify`). `export_model`, `verify_export`, the C build harness and the CLI each make one lookup
here (`kind_of_model` for a fitted model, `kind_named` for a manifest) and never branch on the kind.

The shared spine stays single and kind-blind: graph outputs and links (`onnx_graphs.finish_model`), the C
descriptor (`c_codegen.c_descriptor`), the format contract and its per-kind layout table
(`edgeseq.format.STAGE_LAYOUTS`), the budget rule, atomic writes and both C runtimes.

Adding a kind means one new folder whose ``kind`` module defines ``KIND`` (a `StageKind` naming its
functions) plus one line in `BUILTIN` -- or, for a kind that lives outside the package (the test suite's toy kind), one call of
`register`. A kind whose stages the C runtime cannot run keeps the default `StageKind.write_c`, which
says so (ExportError).

Examples
--------
>>> from edgeseq.export.kinds import kind_named, registered
>>> registered()
('affine', 'trees', 'layer_blocks')
>>> kind_named("trees").name, kind_named("trees").noun
('trees', 'tree-stage')
>>> kind_named("wavelets")
Traceback (most recent call last):
...
edgeseq.errors.ExportError: unknown stage kind 'wavelets': this edgeseq knows 'affine', 'trees', 'layer_blocks'; upgrade edgeseq or re-export the model
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from edgeseq.errors import ExportError
from edgeseq.messages import brief

# stage_kind -> the module whose KIND implements it (imported on first use: a kind's exporters load onnx)
BUILTIN = {
    "affine": "edgeseq.export.kinds.affine.kind",
    "trees": "edgeseq.export.kinds.trees.kind",
    "layer_blocks": "edgeseq.export.kinds.layer_blocks.kind",
}
_REGISTERED: dict[str, StageKind] = {}


@dataclass(frozen=True)
class ExportRequest:
    """What `export_model` was asked for, beyond the model: handed unchanged to the kind's `writer`.

    Parameters
    ----------
    model_name : str
        Written into every graph, the C and the manifest (already checked).
    c_prefix : str
        The C identifier prefix (already checked).
    source : object
        The object `export_model` was given (an estimator or the form itself): its class names the
        export's source, and an estimator's own labels (``classes_``) are taken from it.
    check_stats : array or None, default=None
        Sample rows for the float32-vs-float64 check (affine kind).
    batch_size : int or None, default=None
        A fixed row count of every graph (checked by the spine).
    ort : bool, default=False
        Also write ORT-format graphs.
    labels : {"graph", "runtime"}, default="graph"
        Where a classifier's label is chosen.
    c_dtype : {"float32", "int16"}, default="float32"
        The C model's arithmetic.
    calibration : tuple or None, default=None
        ``(X, y)`` rows for the int16 quantisation.
    tree_ops : {"ai-onnx-ml", "core"}, default="ai-onnx-ml"
        The operator set of tree-stage graphs.
    c_trees : {"table", "code", "auto"}, default="table"
        The form of float C tree stages (`edgeseq.export.kinds.trees.c_float.resolve_c_trees`).
    c_link : {"commit", "read"}, default="commit"
        Where the float C applies the link (`edgeseq.export.c_codegen.c_link_enum`).

    Examples
    --------
    >>> ExportRequest("demo", "demo", None).c_dtype
    'float32'
    """

    model_name: str
    c_prefix: str
    source: object
    check_stats: object = None
    batch_size: int | None = None
    ort: bool = False
    labels: str = "graph"
    c_dtype: str = "float32"
    calibration: object = None
    tree_ops: str = "ai-onnx-ml"
    c_trees: str = "table"
    c_link: str = "commit"

    def calibration_rows(self):
        """``(X, y)`` of the int16 quantisation, or one clear line when none were given.

        Examples
        --------
        >>> ExportRequest("demo", "demo", None, calibration=([[0.0]], None)).calibration_rows()
        ([[0.0]], None)
        >>> ExportRequest("demo", "demo", None).calibration_rows()
        Traceback (most recent call last):
        ...
        edgeseq.errors.ExportError: --c-dtype int16 needs calibration rows for the feature ranges (--calibration-data FILE); the model file stores no sample rows
        """
        if self.calibration is None:
            raise ExportError("--c-dtype int16 needs calibration rows for the feature ranges "
                              "(--calibration-data FILE); the model file stores no sample rows")
        return self.calibration


def _no_c(form, out_dir, prefix: str, model_name: str | None = None) -> list[str]:
    raise ExportError(f"the C runtime has no tables for {type(form).__name__} stages")


def _rows_as_given(form, X):
    return X


def _no_rows(manifest: dict) -> list[str]:
    return [f"{p['index']:>4}  cum_cost {p['cum_cost']:.4g}  {p['file']}" for p in manifest["prefixes"]]


def _accept(form) -> None:
    return None


def _no_int16(form, qm, X):
    raise ExportError(f"integer C is not available for {type(form).__name__} stages")


@dataclass(frozen=True)
class StageKind:
    """What one kind of stage model brings to the spine: its name, its form, and one function per job.

    Parameters
    ----------
    name : str
        The manifest's ``stage_kind``.
    noun : str
        How the CLI names one stage graph ("prefix", "tree-stage").
    form : type
        The intermediate form class of this kind (`edgeseq.forms`).
    writer : callable
        ``writer(form, request) -> (tmp_dir -> manifest)``: checks and quantises first (it may refuse
        the model), then returns the function that writes every file of the export into a fresh
        directory (`export_model` runs it inside its atomic write).
    read_back : callable
        ``read_back(out_dir) -> form``: the form an export of this kind holds, from its verified files.
    verify : callable
        ``verify(out_dir, X, *, source, use_c, require_c, compiler) -> VerifyReport``: the runtimes
        against the form's own float64 reference.
    check : callable, default=accept every form
        ``check(form)``: refuse (ExportError) a form that cannot be exported, before anything else.
    write_c : callable, default=refuse
        ``write_c(form, out_dir, prefix, model_name) -> file names``: the float C model; by default
        ExportError (the C runtimes know the table layouts of their built-in kinds only).
    c_rows : callable, default=rows as given
        ``c_rows(form, X)``: raw rows in the column order the generated C reads.
    manifest_rows : callable, default=one line per stage
        ``manifest_rows(manifest) -> lines``: the per-stage table of ``edgeseq inspect``.
    int16_rows : callable, default=refuse
        ``int16_rows(form, qm, X) -> int16 array``: raw rows X as the kind's int16 C model reads them
        (its columns in sequence order, quantised with the quantised model `qm`).
    int16_staged : callable, default=refuse
        ``int16_staged(form, qm, X) -> list``: per stage, the integer model's bit-exact outputs for
        rows X (what per-input stopping of an int16 export is calibrated and checked on).

    Examples
    --------
    >>> from edgeseq.export.kinds import kind_named
    >>> kind = kind_named("affine")
    >>> kind.name, kind.noun, kind.form.__name__
    ('affine', 'prefix', 'FittedSequence')
    """

    name: str
    noun: str
    form: type
    writer: Callable
    read_back: Callable
    verify: Callable
    # defaults through factories: a function as a plain default would become a class attribute
    check: Callable = field(default_factory=lambda: _accept)
    write_c: Callable = field(default_factory=lambda: _no_c)
    c_rows: Callable = field(default_factory=lambda: _rows_as_given)
    manifest_rows: Callable = field(default_factory=lambda: _no_rows)
    int16_rows: Callable = field(default_factory=lambda: _no_int16)
    int16_staged: Callable = field(default_factory=lambda: _no_int16)

    def form_of(self, obj):
        """The form to export when `obj` is this kind's form or an estimator fitted to one, else None.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeRegressor
        >>> from edgeseq.export.kinds import kind_named
        >>> X = np.random.default_rng(0).normal(size=(30, 2))
        >>> est = AnytimeRegressor().fit(X, X[:, 0])
        >>> kind_named("affine").form_of(est) is est.fitted_sequence_, kind_named("trees").form_of(est)
        (True, None)
        """
        from edgeseq.forms.protocol import form_of

        if isinstance(obj, self.form):
            return obj
        form = form_of(obj)  # an estimator's fitted_sequence_ / stage_model_
        return form if isinstance(form, self.form) else None


def register(kind: StageKind) -> StageKind:
    """Make `kind` known under ``kind.name`` (a kind defined outside the package, e.g. in a test).

    Examples
    --------
    >>> from edgeseq.export.kinds import StageKind, register, registered, unregister
    >>> toy = StageKind("toy", "toy-stage", tuple, writer=None, read_back=None, verify=None)
    >>> register(toy) is toy, "toy" in registered()
    (True, True)
    >>> unregister("toy")
    """
    if not isinstance(kind, StageKind) or not isinstance(kind.name, str) or not kind.name:
        raise ExportError(f"a stage kind must be a named StageKind, got {brief(kind)}")
    _REGISTERED[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Forget a kind added with `register` (the built-in kinds stay).

    Examples
    --------
    >>> from edgeseq.export.kinds import registered, unregister
    >>> unregister("not-there"); registered()
    ('affine', 'trees', 'layer_blocks')
    """
    _REGISTERED.pop(name, None)


def registered() -> tuple[str, ...]:
    """The names of every known kind, built-in ones first.

    Examples
    --------
    >>> from edgeseq.export.kinds import registered
    >>> registered()[:3]
    ('affine', 'trees', 'layer_blocks')
    """
    return tuple(BUILTIN) + tuple(n for n in _REGISTERED if n not in BUILTIN)


def kind_named(name) -> StageKind:
    """The kind of a manifest's ``stage_kind`` (one clear line for a kind this edgeseq does not know).

    Examples
    --------
    >>> from edgeseq.export.kinds import kind_named
    >>> kind_named("trees").noun
    'tree-stage'
    >>> kind_named(3)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: unknown stage kind 3: this edgeseq knows 'affine', 'trees', 'layer_blocks'; upgrade edgeseq or re-export the model
    """
    if isinstance(name, str) and name in _REGISTERED:
        return _REGISTERED[name]
    if isinstance(name, str) and name in BUILTIN:
        return register(importlib.import_module(BUILTIN[name]).KIND)
    known = ", ".join(map(repr, registered()))
    raise ExportError(f"unknown stage kind {brief(name)}: this edgeseq knows {known}; upgrade edgeseq or "
                      "re-export the model")


def kind_of_manifest(manifest: dict) -> StageKind:
    """The kind of an export, from its manifest (absent ``stage_kind``: affine, as every early export).

    Examples
    --------
    >>> from edgeseq.export.kinds import kind_of_manifest
    >>> kind_of_manifest({}).name, kind_of_manifest({"stage_kind": "trees"}).name
    ('affine', 'trees')
    """
    from edgeseq.format import stage_kind

    return kind_named(stage_kind(manifest))


def kind_of_model(obj) -> tuple[StageKind, object]:
    """``(kind, form)`` for a fitted model: the first kind whose `StageKind.form_of` recognises it.

    Examples
    --------
    >>> from edgeseq.export.kinds import kind_of_model
    >>> kind_of_model(3.0)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: export_model needs a fitted model of a known stage kind (a FittedSequence, a TreeStageModel or a fitted AFRClassifier), got float
    """
    for name in registered():
        kind = kind_named(name)
        form = kind.form_of(obj)
        if form is not None:
            return kind, form
    raise ExportError("export_model needs a fitted model of a known stage kind (a FittedSequence, a "
                      f"TreeStageModel or a fitted AFRClassifier), got {type(obj).__name__}")
