"""Prefix graphs: onnxruntime output equals the model's float64 prediction for every prefix.

Tolerance: weights and inputs are rounded to float32 (relative error 2**-24 each) and the dot product
accumulates d terms in float32, so |onnx - float64| <= (d + 3) * 2**-24 * (|x| @ |W| + |b|) per
output, up to second-order terms; tests use 4x that bound (`f32_bound`).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from sequences import random_sequence

from edgeseq.export.names import RESERVED_ONNX_NAMES, onnx_input_names
from edgeseq.export.kinds.affine.onnx import build_prefix_graph
from edgeseq.export.onnx_graphs import IR_VERSION, OPSET

EPS32 = 2.0 ** -24


def f32_bound(seq, X, j):
    """Per-row, per-output bound on the float32 error of prefix j's linear output (see module doc)."""
    cols = seq.prefix_columns(j)
    mag = np.abs(X[:, cols]) @ np.abs(seq.coefs[j]) + np.abs(seq.intercepts[j])
    return 4 * (len(cols) + 3) * EPS32 * mag + 1e-30


def run_prefix(model: onnx.ModelProto, seq, X, j, input_names):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    if j == 0:
        feed = {"n": np.zeros((X.shape[0], 1), np.float32)}
    else:
        feed = {input_names[g]: X[:, seq.group_columns[g]].astype(np.float32) for g in seq.order[:j]}
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feed)))


CASES = [
    dict(group_sizes=(2, 3, 1), n_outputs=1, link="identity"),
    dict(group_sizes=(1, 1, 1, 1, 1), n_outputs=3, link="identity"),
    dict(group_sizes=(7, 2, 12), n_outputs=2, link="identity", scale=1e3),
    dict(group_sizes=(3, 2), n_outputs=1, link="sigmoid"),
    dict(group_sizes=(2, 4, 1), n_outputs=4, link="softmax"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['link']}-{c['group_sizes']}-P{c['n_outputs']}")
def test_every_prefix_matches_float64(case):
    rng = np.random.default_rng(len(case["group_sizes"]) * 7 + case["n_outputs"])
    seq = random_sequence(rng, **case)
    names = onnx_input_names(seq.group_names)
    X = rng.normal(size=(50, seq.n_features_in)) * np.array([1e-3, 1.0, 1e3])[rng.integers(0, 3, seq.n_features_in)]
    for j in range(seq.n_prefixes):
        model = build_prefix_graph(seq, j, names)
        onnx.checker.check_model(model, full_check=True)
        assert model.ir_version == IR_VERSION and model.opset_import[0].version == OPSET
        assert {n.domain for n in model.graph.node} <= {""}, "core domain only"
        assert [i.name for i in model.graph.input] == ([names[g] for g in seq.order[:j]] or ["n"])
        out = run_prefix(model, seq, X, j, names)
        z = seq.linear(X, j)
        assert out["y"].dtype == np.float32 and out["y"].shape == z.shape
        assert np.all(np.abs(out["y"] - z) <= f32_bound(seq, X, j))
        if seq.link != "identity":
            proba = seq.apply_link(z)
            # the link is 1-Lipschitz per output (sigmoid 1/4, softmax <= 1) plus float32 rounding of proba
            tol = np.max(f32_bound(seq, X, j), axis=1, keepdims=True) + 4 * EPS32
            assert np.all(np.abs(out["proba"] - proba) <= tol)
            clear = np.sort(proba, axis=1)[:, -1] - np.sort(proba, axis=1)[:, -2] > 1e-4
            assert np.array_equal(out["label"][clear], np.argmax(proba, axis=1)[clear])


def test_prefix0_input_carries_the_batch_size():
    rng = np.random.default_rng(3)
    seq = random_sequence(rng, (2, 2), n_outputs=2)
    model = build_prefix_graph(seq, 0, onnx_input_names(seq.group_names))
    (inp,) = model.graph.input
    dims = inp.type.tensor_type.shape.dim
    assert inp.name == "n" and dims[0].dim_param == "N" and dims[1].dim_value == 1  # no zero-size tensor
    assert all(min(t.dims, default=1) > 0 for t in model.graph.initializer)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 7):
        (y,) = sess.run(["y"], {"n": np.zeros((n, 1), np.float32)})
        assert y.shape == (n, 2)
        np.testing.assert_array_equal(y, np.tile(seq.intercepts[0].astype(np.float32), (n, 1)))


def test_real_regressor_fits_every_prefix():
    """Through AnytimeRegressor: multi-output y, uneven group sizes, training-scale inputs."""
    from sklearn.datasets import load_diabetes

    from edgeseq import AnytimeRegressor

    X, y = load_diabetes(return_X_y=True)
    X = X * np.linspace(1, 500, X.shape[1])  # columns on very different scales
    Y = np.column_stack([y, y ** 0.5, X[:, 2] * 3 - X[:, 0]])
    for target, groups in ((y, [[0, 1, 2], [3], [4, 5, 6, 7], [8, 9]]), (Y, [[0], [1, 2], [3, 4], [5, 6, 7, 8, 9]])):
        est = AnytimeRegressor(groups=groups, costs=[1.0, 3.0, 0.5, 2.0], method="fr").fit(X, target)
        seq = est.fitted_sequence_
        names = onnx_input_names(seq.group_names)
        for j in range(seq.n_prefixes):
            out = run_prefix(build_prefix_graph(seq, j, names), seq, X, j, names)["y"]
            pred = est.predict(X, prefix=j).reshape(out.shape)
            assert np.all(np.abs(out - pred) <= f32_bound(seq, X, j))


@pytest.mark.parametrize("link,P", [("identity", 1), ("sigmoid", 1), ("softmax", 3)])
def test_group_names_equal_to_internal_graph_names(link, P):
    """A group named like a graph output or initializer ('b', 'y', 'n', ...) gets its own input name.

    Every identifier-like name used inside a built graph must be reserved, else a group called `b`
    would alias the bias initializer and the graph fails the ONNX checker.
    """
    rng = np.random.default_rng(11)
    internal = ["y", "proba", "label", "n", "b"]
    seq = random_sequence(rng, (1, 2, 1, 2, 1), n_outputs=P, link=link, names=internal)
    names = onnx_input_names(seq.group_names)
    assert not set(names) & set(internal)
    X = rng.normal(size=(9, seq.n_features_in))
    for j in range(seq.n_prefixes):
        model = build_prefix_graph(seq, j, names)
        onnx.checker.check_model(model, full_check=True)
        g = model.graph
        used = {*(i.name for i in g.initializer), *(o for nd in g.node for o in nd.output)}
        inputs = {i.name for i in g.input}
        assert not (used & inputs), f"prefix {j}: inputs alias graph names {used & inputs}"
        ident_like = {u for u in used if u.isidentifier()}
        assert ident_like <= RESERVED_ONNX_NAMES, f"unreserved internal names {ident_like - RESERVED_ONNX_NAMES}"
        out = run_prefix(model, seq, X, j, names)["y"]
        ref = X[:, seq.prefix_columns(j)] @ seq.coefs[j] + seq.intercepts[j]
        assert np.all(np.abs(out - ref) <= f32_bound(seq, X, j))
