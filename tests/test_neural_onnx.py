"""Per-stage ONNX graphs of layer-block models, chained in onnxruntime against the float64 numpy forward.

The models are trained for a few epochs on small data (the weights are then realistic, not random),
with a windowed group under each pooling kind, and an EANN chain (reset stages, `commit=False`
stages). Every stage's graph passes the full ONNX checker, uses only core operators, and agrees with
the intermediate form: max |y_onnx − y_numpy| / max |y_numpy| <= 1e-5 per stage, argmax identical.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from edgeseq import AnytimeNetClassifier, AnytimeNetRegressor
from edgeseq.export.onnx_graphs import IR_VERSION, OPSET
from edgeseq.export.kinds.layer_blocks.onnx import build_layer_block_graph, run_stages_onnxruntime

CORE_OPS = {"MatMul", "Gemm", "Add", "Relu", "Conv", "MaxPool", "AveragePool", "Flatten", "Reshape", "Softmax",
            "Sigmoid", "Sub", "Concat", "ArgMax"}


def _window_data(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2 * 10 + 3 + 24))  # window (2 x 10), flat (3), window (3 x 8)
    score = X[:, :10].max(axis=1) + X[:, 20] - X[:, 23:31].mean(axis=1)
    return X, score


GROUPS = [list(range(20)), [20, 21, 22], list(range(23, 47))]
SHAPES = [(2, 10), None, (3, 8)]


@pytest.fixture(scope="module")
def models():
    X, score = _window_data()
    y3 = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    clf = AnytimeNetClassifier(GROUPS, [2.0, 1.0, 3.0], group_names=["acc", "temp", "gyro"], group_shapes=SHAPES,
                               order="given", hidden=8, conv={"filters": 4, "kernel": 3, "stride": 2, "pool": "avg",
                                                              "pool_size": 2},
                               max_epochs=15, random_state=0).fit(X, y3)
    binary = AnytimeNetClassifier(GROUPS, [2.0, 1.0, 3.0], group_shapes=SHAPES, order="given", hidden=8,
                                  max_epochs=10, random_state=1).fit(X, (score > 0).astype(int))
    reg = AnytimeNetRegressor(GROUPS, [2.0, 1.0, 3.0], group_shapes=SHAPES, order="given", hidden=8, eann_base=2,
                              max_epochs=10, random_state=2).fit(X, score)
    return X, {"softmax": clf, "sigmoid": binary, "eann": reg}


def _names(model):
    return [f"in_{n}" for n in model.group_names]


@pytest.mark.parametrize("which", ["softmax", "sigmoid", "eann"])
def test_chained_stages_in_onnxruntime_match_the_float64_forward(models, which):
    X, ests = models
    model = ests[which].stage_model_
    outs = run_stages_onnxruntime(model, X, _names(model))
    ref = list(model.staged_decision(X))
    assert len(outs) == len(ref) == len(model.stages)
    for k, (o, z) in enumerate(zip(outs, ref)):
        err = np.max(np.abs(o["y"] - z)) / max(np.max(np.abs(z)), 1e-30)
        assert err <= 1e-5, (k, err)
        if z.shape[1] > 1:
            assert np.array_equal(o["y"].argmax(axis=1), z.argmax(axis=1))
        if model.link != "identity":
            np.testing.assert_allclose(o["proba"], model.apply_link(z), rtol=1e-4, atol=1e-6)
    if which == "eann":
        assert len(model.stages) == 1 + 1 + 2 + 3  # members of depth 1, 2, 3 chained
        assert [s.W is None for s in model.stages[1:]] == [True, True, False, True, False, False]  # resets


def test_the_agreement_check_can_fail(models):
    """Negative control: one initializer nudged by 1e-3 breaks the 1e-5 agreement."""
    import onnxruntime as ort
    X, ests = models
    model = ests["softmax"].stage_model_
    g = build_layer_block_graph(model, 1, _names(model))
    for init in g.graph.initializer:
        if init.name.endswith("/U"):
            arr = onnx.numpy_helper.to_array(init).copy()
            arr[0, 0] += 1e-3 * max(1.0, abs(arr[0, 0]))
            init.CopyFrom(onnx.numpy_helper.from_array(arr, init.name))
    sess = ort.InferenceSession(g.SerializeToString(), providers=["CPUExecutionProvider"])
    cols = model.group_columns[0]
    y = sess.run(["y"], {"in_acc": X[:, cols].astype(np.float32)})[0]
    z = model.decision(X, 1)
    assert np.max(np.abs(y - z)) / np.max(np.abs(z)) > 1e-5


def test_graphs_are_checked_core_opset_17_ir_10(models):
    _, ests = models
    for est in ests.values():
        model = est.stage_model_
        for k in range(len(model.stages)):
            g = build_layer_block_graph(model, k, _names(model), batch_size=1 if k % 2 else None)
            onnx.checker.check_model(g, full_check=True)
            assert g.ir_version == IR_VERSION == 10
            assert [(o.domain, o.version) for o in g.opset_import] == [("", OPSET)] and OPSET == 17
            assert {n.op_type for n in g.graph.node} <= CORE_OPS
            names = [i.name for i in g.graph.input]
            s = model.stages[k]
            assert ("state_in" in names) == (k > 0 and s.W is not None)
            outs = [o.name for o in g.graph.output]
            assert outs[0] == "y" and (outs[-1] == "state_out") == (k > 0)


def test_onnx_reference_evaluator_agrees_on_a_small_net(models):
    from onnx.reference import ReferenceEvaluator
    X, ests = models
    model = ests["softmax"].stage_model_
    X = X[:16]
    state = None
    for k, z in enumerate(model.staged_decision(X)):
        g = build_layer_block_graph(model, k, _names(model))
        feed = {}
        for inp in g.graph.input:
            if inp.name == "n":
                feed["n"] = np.ones((len(X), 1), np.float32)
            elif inp.name == "state_in":
                feed["state_in"] = state
            else:
                g_idx = _names(model).index(inp.name)
                feed[inp.name] = X[:, model.group_columns[g_idx]].astype(np.float32)
        res = dict(zip([o.name for o in g.graph.output], ReferenceEvaluator(g).run(None, feed)))
        state = res.get("state_out", state)
        assert np.max(np.abs(res["y"] - z)) / np.max(np.abs(z)) <= 1e-5


def test_float32_numpy_forward_matches_onnxruntime(models):
    X, ests = models
    model = ests["sigmoid"].stage_model_
    outs = run_stages_onnxruntime(model, X, _names(model))
    for o, z32 in zip(outs, model.staged_decision(X, dtype=np.float32)):
        assert z32.dtype == np.float32
        np.testing.assert_allclose(o["y"], z32, rtol=1e-5, atol=1e-5 * np.max(np.abs(z32)))
