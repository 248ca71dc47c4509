"""Run a prefix graph of an export in one of several ONNX runtimes, from raw feature rows.

edgeseq's own runtime (`edgeseq.runtime`) builds its feeds and sessions itself; this module is for
running the `prefix_XXX.onnx` files directly in other runtimes -- onnxruntime, the ONNX reference
implementation, OpenVINO (with the f32 precision hint), tract -- as the cross-runtime tests and
bench/target_agreement.py do. Each runner returns {output name: numpy array}.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgeseq.errors import EdgeseqError, RuntimeUnavailable
from edgeseq.export.onnx_graphs import prefix0_width
from edgeseq.format import PREFIX0_INPUT

RUNTIMES = ("onnxruntime", "onnx-reference", "openvino", "tract")


def prefix_feed(manifest: dict, X, j: int) -> dict:
    """{input name: float32 (N, d_g) array} for prefix `j` of a verified export, from raw rows X (N, D).

    Prefix 0 gets its batch-carrying input `n` of the width the export's format version declares.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> import tempfile
    >>> manifest = export_model(seq, tempfile.mkdtemp() + "/feed_demo")
    >>> from edgeseq.export.onnx_runners import prefix_feed
    >>> {name: a.shape for name, a in prefix_feed(manifest, X[:3], 2).items()}
    {'g0': (3, 1), 'g1': (3, 1)}
    >>> list(prefix_feed(manifest, X[:3], 0))
    ['n']
    """
    X = np.asarray(X)
    groups = manifest["groups"][:j]
    if not groups:
        return {PREFIX0_INPUT: np.zeros((len(X), prefix0_width(manifest["format_version"])), np.float32)}
    return {g["input_name"]: np.ascontiguousarray(X[:, g["columns"]], dtype=np.float32) for g in groups}


def _import(module: str, extra: str):
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise RuntimeUnavailable(f"{module} is not installed (pip install 'edgeseq[{extra}]'): {exc}") from None


def _onnxruntime(path: Path, feed: dict) -> dict:
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return {o.name: v for o, v in zip(sess.get_outputs(), sess.run(None, feed))}


def _reference(path: Path, feed: dict) -> dict:
    from onnx.reference import ReferenceEvaluator
    sess = ReferenceEvaluator(str(path))
    with np.errstate(over="ignore", invalid="ignore"):  # its Sigmoid evaluates both branches
        return dict(zip(sess.output_names, sess.run(None, feed)))


def _openvino(path: Path, feed: dict) -> dict:
    """Compiled with INFERENCE_PRECISION_HINT f32: OpenVINO's CPU plugin may default to bf16."""
    ov = _import("openvino", "openvino")
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    if compiled.get_property("INFERENCE_PRECISION_HINT") != ov.Type.f32:
        raise EdgeseqError(f"OpenVINO did not accept the f32 precision hint for {path}")
    res = compiled(feed)
    return {o.any_name: np.asarray(res[o]) for o in compiled.outputs}


def _tract(path: Path, feed: dict) -> dict:
    tract = _import("tract", "tract")
    model = tract.onnx().load(str(path))
    inputs = [model.input_name(i) for i in range(model.input_count())]
    outputs = [model.output_name(i) for i in range(model.output_count())]
    res = model.into_model().into_runnable().run([feed[name] for name in inputs])
    return {name: t.to_numpy() for name, t in zip(outputs, res)}


_RUNNERS = {"onnxruntime": _onnxruntime, "onnx-reference": _reference, "openvino": _openvino, "tract": _tract}


def run_graph(runtime: str, path, feed: dict) -> dict:
    """Outputs of the graph at `path` for `feed` in `runtime` (one of RUNTIMES).

    RuntimeUnavailable when that runtime's package is missing.

    Raises
    ------
    ValueError
        If `runtime` is not one of RUNTIMES.
    RuntimeUnavailable
        If that runtime's package is not installed.

    Examples
    --------
    onnxruntime and the ONNX reference implementation agree with each other and with float64:

    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> import tempfile
    >>> out = tempfile.mkdtemp() + "/runner_demo"
    >>> manifest = export_model(seq, out)
    >>> from edgeseq.export.onnx_runners import prefix_feed, run_graph
    >>> feed = prefix_feed(manifest, X[:4], 2)
    >>> ort_y = run_graph("onnxruntime", out + "/prefix_002.onnx", feed)["y"]
    >>> ref_y = run_graph("onnx-reference", out + "/prefix_002.onnx", feed)["y"]
    >>> z64 = seq.linear_from_prefix_features(2, X[:4][:, seq.prefix_columns(2)])
    >>> np.allclose(ort_y, ref_y, atol=1e-6), np.allclose(ort_y, z64, atol=1e-5)
    (True, True)
    """
    if runtime not in _RUNNERS:
        raise ValueError(f"unknown runtime {runtime!r}; expected one of {RUNTIMES}")
    return _RUNNERS[runtime](Path(path), feed)
