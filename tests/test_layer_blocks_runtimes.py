"""Layer-block stage graphs in the other ONNX runtimes and on the mobile execution providers.

Every stage graph of a layer-block export (dense blocks with group injection, 1-D convolution with
stride, max and average pooling over windowed groups, a stage that does not commit, a reset stage) is
run alone in `onnx.reference`, OpenVINO (f32 precision hint) and tract, fed the groups it reads and the
float64 reference state of the stage before it, and compared with the numpy float64 forward. The same
graphs exported with a fixed batch of 1 are checked with onnxruntime's mobile usability checker: NNAPI
and CoreML must take every node (a classifier's ArgMax left to the runtime with ``labels="runtime"``).
Negative controls: a dynamic batch dimension blocks both providers, and a wrong state fails the
comparison.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from layer_models import rich_model, rows

from edgeseq.export.onnx_runners import RuntimeUnavailable, run_graph
from edgeseq.export.writer import export_model
from edgeseq.format import STATE_IN, read_verified

LINKS = ["identity", "sigmoid", "softmax"]


@pytest.fixture(scope="module", params=LINKS)
def exported(request, tmp_path_factory):
    model = rich_model(request.param, seed=3)
    d = tmp_path_factory.mktemp(f"lb_{request.param}")
    export_model(model, d / "dyn")
    export_model(model, d / "one", batch_size=1, labels="runtime" if request.param != "identity" else "graph")
    return model, d / "dyn", d / "one"


def _reference(model, X):
    """Per stage: (incoming float64 state or None, float64 decision values)."""
    state, out = None, []
    for k in range(len(model.stages)):
        new_state, z = model.step(k, X, state)
        out.append((state, z))
        state = new_state
    return out


def _feed(model, m, k, X, state_in):
    position = {g["input_name"]: j for j, g in enumerate(m["groups"])}
    feed = {}
    for name in m["prefixes"][k]["inputs"]:
        if name == STATE_IN:
            feed[name] = np.asarray(state_in, np.float32)
        elif name in position:
            g = m["groups"][position[name]]["index"]
            feed[name] = X[:, model.group_columns[g]].astype(np.float32)
        else:  # prefix 0's one-column placeholder
            feed[name] = np.zeros((X.shape[0], 1), np.float32)
    return feed


def _run(runtime, path, feed):
    try:
        return run_graph(runtime, path, feed)
    except RuntimeUnavailable as exc:
        pytest.skip(str(exc))


def _assert_close(got, ref, what):
    got = np.asarray(got, np.float64).reshape(ref.shape)
    scale = np.maximum(np.abs(ref), 1.0)
    assert np.max(np.abs(got - ref) / scale) <= 1e-4, what


@pytest.mark.parametrize("runtime", ["onnx-reference", "openvino", "tract"])
def test_every_stage_graph_in_other_runtimes(exported, runtime):
    model, dyn, _ = exported
    m = read_verified(dyn)
    X = rows(7, seed=5)
    for k, (state_in, z) in enumerate(_reference(model, X)):
        if k == 0:
            continue
        outs = _run(runtime, dyn / m["prefixes"][k]["file"], _feed(model, m, k, X, state_in))
        _assert_close(outs["y"], z if model.link != "identity" or z.shape[1] > 1 else z[:, 0], (runtime, k))


def test_a_wrong_state_fails_the_comparison(exported):
    """Negative control: feeding the stage before's state shifted by one changes the answer."""
    model, dyn, _ = exported
    m = read_verified(dyn)
    X = rows(7, seed=5)
    ref = _reference(model, X)
    k = next(k for k in range(1, len(model.stages)) if STATE_IN in m["prefixes"][k]["inputs"])
    state_in, z = ref[k]
    outs = run_graph("onnx-reference", dyn / m["prefixes"][k]["file"], _feed(model, m, k, X, state_in + 1.0))
    with pytest.raises(AssertionError):
        _assert_close(outs["y"], z, "shifted state")


def _checker():
    return pytest.importorskip("onnxruntime.tools.mobile_helpers.usability_checker",
                               reason="this onnxruntime has no mobile usability checker")


def _supported(uc, path):
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    nnapi = uc.check_nnapi_partitions(model, True)
    coreml = uc.check_coreml_partitions(model, True, "coreml_supported_mlprogram_ops.md")
    return nnapi.num_nodes, nnapi.num_supported_nodes, coreml.num_supported_nodes, nnapi.unsupported_ops


def test_mobile_providers_take_every_node_at_batch_size_one(exported):
    uc = _checker()
    model, dyn, one = exported
    for p in read_verified(one)["prefixes"]:
        n, nnapi, coreml, unsupported = _supported(uc, dyn / p["file"])
        assert nnapi == 0 and coreml == 0  # negative control: a dynamic batch dimension blocks both
        n, nnapi, coreml, unsupported = _supported(uc, one / p["file"])
        assert nnapi == coreml == n, (p["file"], n, nnapi, coreml, unsupported)
