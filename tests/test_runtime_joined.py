"""Batch `predict` at a fixed budget runs one joined graph (`edgeseq.runtime.fuse`): one input (the
groups side by side), one Gemm for an affine prefix, one tree node for tree stages 1..j. It must
agree with the per-stage anytime loop (`AnytimeSession.run`, one row at a time, and the stage graphs
on the whole batch) to float32 rounding, 1e-6 relative, on random models of every kind that takes
this path (linear regression, binary and multiclass GLMs, LightGBM and AFR trees), at the full budget
and a mid budget, in the bound (small batch) and plain (large batch) paths; and the comparison would
catch a wrong column order (negative control). Layer-block exports keep their stage chain."""

from __future__ import annotations

import numpy as np
import pytest

from edgeseq import AnytimeClassifier, AnytimeRegressor
from edgeseq.errors import RuntimeInputError
from edgeseq.export.writer import export_model
from edgeseq.runtime.fuse import FuseError, joined_prefix, joined_tree_stages
from edgeseq.runtime.model import ClassifierPrediction, ExportedModel
from edgeseq.runtime.session import AnytimeSession

from layer_models import rich_model
from test_runtime_fuse import features
from tree_models import afr_model, data, lightgbm_model

RTOL = 1e-6
GROUPS = [[0, 1], [2], [3, 4, 5], [6, 7]]  # unequal widths: a shifted column shows


def _linear(kind: str):
    rng = np.random.default_rng(len(kind))
    X = rng.normal(size=(240, 8))
    z = X @ rng.normal(size=8)
    if kind == "regression":
        return AnytimeRegressor(GROUPS, [1.0, 2.0, 1.0, 3.0]).fit(X, z).fitted_sequence_
    y = (z > 0).astype(int) if kind == "binary" else np.digitize(z, [-1.0, 1.0])
    return AnytimeClassifier(GROUPS, [1.0, 2.0, 1.0, 3.0]).fit(X, y).fitted_sequence_


MODELS = {"linear": lambda: _linear("regression"), "glm-binary": lambda: _linear("binary"),
          "glm-softmax": lambda: _linear("softmax"), "lgbm-identity": lambda: lightgbm_model("identity"),
          "lgbm-softmax": lambda: lightgbm_model("softmax"), "afr-3": lambda: afr_model(3).stage_model_}


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request, tmp_path_factory):
    model = MODELS[request.param]()
    out = tmp_path_factory.mktemp("joined") / "out"
    export_model(model, out)
    return model, out


def _values(pred) -> np.ndarray:
    """The answer as a float (n, k) matrix: a classifier's probabilities, a regression's values."""
    v = pred.proba if isinstance(pred, ClassifierPrediction) else np.asarray(pred)
    return v.reshape(v.shape[0], -1).astype(np.float64)


def _staged(sess: ExportedModel, feats, j: int) -> np.ndarray:
    """Prefix j from the stage graphs the anytime loop runs (the chain for trees)."""
    arrays = [feats[name] for name, _ in sess._plan[j]]
    n = arrays[0].shape[0]
    if sess._trees:
        outs, _ = sess.run_stages(arrays, j)
    else:
        outs, _ = sess._runners[j].call(arrays, n)
    v = outs[0] if sess.task == "regression" else outs[1]
    return v.reshape(n, -1).astype(np.float64)


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(np.all(np.abs(got - want) <= RTOL * max(1.0, float(np.abs(want).max()))))


@pytest.mark.parametrize("n", [1, 5, 200])
def test_joined_predict_agrees_with_the_stage_graphs_at_every_prefix(exported, n):
    model, out = exported
    sess = ExportedModel(out)
    feats = features(model, data(n, seed=n)[0])
    for j in range(1, sess.n_prefixes):
        got = _values(sess.predict(feats, prefix=j))
        assert _close(got, _staged(sess, feats, j)), j
        many_groups = len(sess._plan[j]) > 1
        assert sess._fused[j].joined or not (sess._trees or many_groups), j  # the joined graph ran


def test_predict_agrees_with_the_anytime_loop_at_full_and_mid_budget(exported):
    model, out = exported
    X = data(6, seed=11)[0]
    feats = features(model, X)
    extractors = {g: (lambda i, g=g: feats[g][i]) for g in feats}
    with AnytimeSession(out) as loop:
        mid = float(loop.cum_cost[(loop.n_prefixes - 1) // 2 + 1])
        for budget in (None, mid):
            batch = _values(loop.predict(feats, budget=budget))
            rows = np.vstack([_values(loop.run(extractors, budget=budget, inputs=i).prediction) for i in range(6)])
            assert _close(batch, rows), budget
            assert loop._fused  # predict ran a joined graph, the loop its stage graphs


def test_a_wrong_column_order_is_caught(exported):
    """Negative control: the joined graph fed its groups in another order disagrees with the stages."""
    model, out = exported
    sess = ExportedModel(out)
    feats = features(model, data(50, seed=3)[0])
    j = sess.n_prefixes - 1
    sess.predict(feats, prefix=j)
    arrays = [feats[name] for name, _ in sess._plan[j]]
    swapped = np.concatenate(arrays, axis=1)[:, ::-1].copy()  # the same columns, reversed
    outs, _ = sess._fused[j].call([swapped], 50)
    v = outs[0] if sess.task == "regression" else outs[1]
    assert not _close(v.reshape(50, -1).astype(np.float64), _staged(sess, feats, j))


def test_the_joined_graphs_are_as_small_as_one_model(exported):
    """An affine prefix joins to one Gemm (the bias in it) and its link, tree stages to one tree node."""
    onnx = pytest.importorskip("onnx")
    model, out = exported
    sess = ExportedModel(out)
    ps = sess.manifest["prefixes"]
    if sess._trees:
        joined, name = joined_tree_stages([(out / p["file"]).read_bytes() for p in ps[1:]])
        ops = [n.op_type for n in onnx.load_from_string(joined).graph.node]
        assert ops.count("TreeEnsembleRegressor") == 1 and "Concat" not in ops[:1]
        W = np.asarray(model.stages[-1].W, np.float32)  # an identity readout (LightGBM) folds into the node
        folded = W.shape[0] == W.shape[1] and np.array_equal(W, np.eye(W.shape[0], dtype=np.float32))
        assert ("MatMul" not in ops) == folded and ops[0] == "TreeEnsembleRegressor"
    else:
        joined, name = joined_prefix((out / ps[-1]["file"]).read_bytes())
        ops = [n.op_type for n in onnx.load_from_string(joined).graph.node]
        assert ops[0] == "Gemm" and ops.count("Gemm") == 1 and "MatMul" not in ops
    g = onnx.load_from_string(joined).graph
    assert [i.name for i in g.input] == [name]
    assert g.input[0].type.tensor_type.shape.dim[1].dim_value == sum(d for _, d in sess._plan[-1])


def test_a_graph_in_another_form_is_refused_and_predict_keeps_the_stage_graphs(tmp_path):
    """Core-operator tree stages have no tree node to merge: FuseError, and predict still agrees."""
    model = lightgbm_model("identity")
    out = tmp_path / "core"
    export_model(model, out, tree_ops="core")
    ps = ExportedModel(out).manifest["prefixes"]
    with pytest.raises(FuseError):
        joined_tree_stages([(out / p["file"]).read_bytes() for p in ps[1:]])
    sess = ExportedModel(out)
    feats = features(model, data(9, seed=4)[0])
    j = sess.n_prefixes - 1
    assert _close(_values(sess.predict(feats, prefix=j)), _staged(sess, feats, j))
    assert not sess._fused[j].joined


def test_layer_block_exports_keep_their_stage_chain(tmp_path):
    model = rich_model("softmax")
    out = tmp_path / "net"
    export_model(model, out)
    sess = ExportedModel(out)
    X = np.random.default_rng(0).normal(size=(4, model.n_features_in)).astype(np.float32)
    feats = {name: X[:, cols] for name, cols in zip(model.group_names, model.group_columns)}
    sess.predict(feats)
    assert sess._fused == {}


@pytest.mark.parametrize("n", [1, 200])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_feature_is_refused_on_the_joined_path(exported, n, bad):
    """Joined tree graphs drop the stage's guard (x @ 0 added to y): the runtime checks the joined
    input instead, in the bound and plain paths; a tree would otherwise route NaN to a finite answer."""
    model, out = exported
    sess = ExportedModel(out)
    feats = features(model, data(n, seed=5)[0])
    j = sess.n_prefixes - 1
    name = sess._plan[j][-1][0]  # the last group: read by the last stage only
    feats[name][n - 1, -1] = bad
    with pytest.raises(RuntimeInputError, match=repr(name)):
        sess.predict(feats, prefix=j)
    assert sess._fused[j].joined or not sess._trees


def test_a_graph_missing_a_part_is_a_fuse_error_and_predict_keeps_the_exported_graphs(exported):
    """A node without its inputs (hand-edited, checksums recomputed) is refused with FuseError, not
    an IndexError, so `_fuse` falls back to the exported graphs."""
    onnx = pytest.importorskip("onnx")
    model, out = exported
    ps = ExportedModel(out).manifest["prefixes"]
    files = [out / p["file"] for p in ps[1:]]
    first = [n for n in onnx.load(files[-1]).graph.node if n.op_type in ("MatMul", "TreeEnsembleRegressor")]
    assert first
    broken = onnx.load(files[-1])
    node = next(n for n in broken.graph.node if n.name == first[0].name and n.op_type == first[0].op_type)
    del node.input[:]
    blob = broken.SerializeToString()
    with pytest.raises(FuseError):
        if "state_width" in ExportedModel(out).manifest:
            joined_tree_stages([f.read_bytes() for f in files[:-1]] + [blob])
        else:
            joined_prefix(blob)
