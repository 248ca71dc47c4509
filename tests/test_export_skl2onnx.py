"""skl2onnx: an AnytimeRegressor alone and at the end of a Pipeline converts to a core-op graph on
raw X whose output matches predict (full budget, and fixed prefix/budget via options)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.datasets import load_diabetes
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from edgeseq import AnytimeRegressor
from edgeseq.export import register_skl2onnx

skl2onnx = pytest.importorskip("skl2onnx")
EPS32 = 2.0 ** -24


@pytest.fixture(scope="module")
def data():
    X, y = load_diabetes(return_X_y=True)
    X = X * np.linspace(10, 1000, X.shape[1]) + 50  # raw features on different scales, not centred
    return X, np.column_stack([y, 0.5 * y + X[:, 0]])


def _run(onx, X):
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: X.astype(np.float32)})[0]


def _bound(seq, X, j):
    """float32 rounding of inputs/weights and accumulation (as in test_export_onnx), x4."""
    cols = seq.prefix_columns(j)
    return 4 * (len(cols) + 3) * EPS32 * (np.abs(X[:, cols]) @ np.abs(seq.coefs[j]) + np.abs(seq.intercepts[j]))


@pytest.mark.parametrize("multi", [False, True])
def test_estimator_full_budget(data, multi):
    X, Y = data
    y = Y if multi else Y[:, 0]
    assert "EdgeseqAnytimeRegressor" in register_skl2onnx()
    est = AnytimeRegressor(groups=[[0, 1], [2], [3, 4, 5], [6, 7, 8, 9]], costs=[1, 2, 3, 4]).fit(X, y)
    onx = skl2onnx.to_onnx(est, X[:1].astype(np.float32), target_opset=17)
    assert [n.op_type for n in onx.graph.node] == ["Gather", "MatMul", "Add"]
    assert {n.domain for n in onx.graph.node} <= {""}
    out = _run(onx, X)
    seq = est.fitted_sequence_
    pred = est.predict(X).reshape(out.shape)
    assert np.all(np.abs(out - pred) <= _bound(seq, X, seq.n_prefixes - 1))


def test_pipeline_after_standard_scaler(data):
    X, Y = data
    register_skl2onnx()
    pipe = make_pipeline(StandardScaler(), AnytimeRegressor(groups=[[0, 1, 2], [3], [4, 5, 6, 7, 8, 9]],
                                                            costs=[2, 1, 5])).fit(X, Y[:, 0])
    out = _run(skl2onnx.to_onnx(pipe, X[:1].astype(np.float32), target_opset=17), X).ravel()
    # the scaler runs in float32 too: scaled inputs are O(3), so the error is a few float32 ulps of
    # the O(300) output times the number of terms
    np.testing.assert_allclose(out, pipe.predict(X), rtol=0, atol=40 * 10 * EPS32 * np.abs(pipe.predict(X)).max())


def test_fixed_prefix_and_budget_options(data):
    X, Y = data
    register_skl2onnx()
    est = AnytimeRegressor(groups=[[0, 1], [2], [3, 4, 5], [6, 7, 8, 9]], costs=[1, 2, 3, 4]).fit(X, Y[:, 0])
    seq = est.fitted_sequence_
    for j in range(seq.n_prefixes):
        onx = skl2onnx.to_onnx(est, X[:1].astype(np.float32), options={id(est): {"prefix": j}},
                               target_opset=17)
        out = _run(onx, X).ravel()
        assert np.all(np.abs(out - est.predict(X, prefix=j)) <= _bound(seq, X, j).ravel())
    budget = float(seq.cum_cost[2]) + 0.5
    onx = skl2onnx.to_onnx(est, X[:1].astype(np.float32), options={id(est): {"budget": budget}}, target_opset=17)
    np.testing.assert_allclose(_run(onx, X).ravel(), est.predict(X, budget=budget),
                               atol=float(_bound(seq, X, 2).max()))


@pytest.mark.parametrize("dataset", ["breast_cancer", "iris"])
def test_classifier_labels_and_probabilities(dataset):
    """zipmap=False keeps the graph in the core domain; labels are the original classes."""
    from sklearn.datasets import load_breast_cancer, load_iris

    from edgeseq import AnytimeClassifier

    register_skl2onnx()
    if dataset == "iris":
        X, y = load_iris(return_X_y=True)
        groups = [[0, 1], [2], [3]]
    else:
        X, t = load_breast_cancer(return_X_y=True)
        y = np.array(["benign", "malignant"])[t]
        groups = [[i, i + 10, i + 20] for i in range(10)]
    est = AnytimeClassifier(groups=groups, costs=list(range(1, len(groups) + 1))).fit(X, y)
    onx = skl2onnx.to_onnx(est, X[:1].astype(np.float32), options={id(est): {"zipmap": False}}, target_opset=17)
    assert {n.domain for n in onx.graph.node} <= {""}
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    label, proba = sess.run(None, {sess.get_inputs()[0].name: X.astype(np.float32)})
    ref = est.predict_proba(X)
    np.testing.assert_allclose(proba, ref, atol=1e-4)
    clear = np.abs(np.sort(ref, axis=1)[:, -1] - np.sort(ref, axis=1)[:, -2]) > 1e-3
    np.testing.assert_array_equal(label[clear], est.predict(X)[clear])
