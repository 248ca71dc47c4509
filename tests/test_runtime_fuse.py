"""Batch `predict` on tree exports runs stages 1..j as one graph (one onnxruntime call): the joined
graph (one input, one tree node; tests/test_runtime_joined.py) agrees with the stage chain to float32
rounding, and the stage graphs chained into one (`fuse_stages`, the fallback) equal it bit for bit,
at every stage, in the bound (small batches) and plain (large batches) paths; a graph neither can
rewrite falls back to the chain."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from edgeseq.export.writer import export_model
from edgeseq.runtime import fuse
from edgeseq.runtime.fuse import FuseError, fuse_stages
from edgeseq.runtime.model import ClassifierPrediction, ExportedModel

from tree_models import afr_model, data, lightgbm_model

MODELS = {"lgbm-identity": lambda: lightgbm_model("identity"), "lgbm-softmax": lambda: lightgbm_model("softmax"),
          "afr-3": lambda: afr_model(3).stage_model_}


def features(model, X):
    return {model.group_names[g]: X[:, model.group_columns[g]].astype(np.float32)
            for g in range(len(model.group_names))}


def outputs(pred):
    return [pred.proba, pred.label_index] if isinstance(pred, ClassifierPrediction) else [np.asarray(pred)]


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request, tmp_path_factory):
    model = MODELS[request.param]()
    out = tmp_path_factory.mktemp("fuse") / "out"
    export_model(model, out)
    return model, out


def _chain(sess, feats, j):
    arrays = [feats[name] for name, _ in sess._plan[j]]
    outs, _ = sess.run_stages(arrays, j)
    return outs


def _refuse(*_):
    raise FuseError("a node has a subgraph attribute")


@pytest.mark.parametrize("n", [1, 7, 300])
def test_fused_predict_equals_the_stage_chain_bit_for_bit(exported, n, monkeypatch):
    model, out = exported
    monkeypatch.setattr("edgeseq.runtime.model.joined_tree_stages", _refuse)  # the chained graph
    sess = ExportedModel(out)
    X, _ = data(n, seed=n)
    feats = features(model, X)
    for j in range(1, sess.n_prefixes):
        got = sess.predict(feats, prefix=j)
        chain = _chain(sess, feats, j)
        assert sess._fused[j] is not None and not sess._fused[j].joined  # the fused graph was built and used
        y = chain[0] if not isinstance(got, ClassifierPrediction) else chain[1]
        want = y[:, 0] if sess._squeeze and y.ndim == 2 else y
        assert np.array_equal(outputs(got)[0], want), j


def test_fused_graph_has_one_stage_worth_of_calls_and_is_kept(exported):
    model, out = exported
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    feats = features(model, data(4, seed=1)[0])
    sess.predict(feats, prefix=j)
    first = sess._fused[j]
    calls = []
    for r in sess._runners:
        r.call = lambda *a, _r=r: calls.append(_r) or type(r).call(_r, *a)
    sess.predict(feats, prefix=j)
    assert sess._fused[j] is first and calls == []  # no per-stage runner was called


def test_negative_control_a_broken_wiring_disagrees(exported):
    """The comparison above can fail: fusing the stages without stage 1 (stage 2 then starts from a
    zero state) gives different outputs from the chain."""
    model, out = exported
    sess = ExportedModel(out)
    ps = sess.manifest["prefixes"]
    j = len(ps) - 1
    if j < 2:
        pytest.skip("one stage only")
    X, _ = data(50, seed=3)
    feats = features(model, X)
    good = fuse_stages([(out / p["file"]).read_bytes() for p in ps[1:j + 1]])
    broken = fuse_stages([(out / p["file"]).read_bytes() for p in ps[2:j + 1]])
    by_input = {g["input_name"]: feats[g["name"]] for g in sess.manifest["groups"]}
    feed = {i: by_input[i] for i in ps[j]["inputs"] if i != "state_in"}
    feed["state_in"] = np.zeros((50, sess._state_width), np.float32)
    run = [ort.InferenceSession(b, providers=["CPUExecutionProvider"]).run(["state_out"], feed)[0]
           for b in (good, broken)]
    assert np.array_equal(run[0], _chain(sess, feats, j)[-1])
    assert not np.allclose(run[1], run[0], atol=1e-3)


def test_a_graph_that_cannot_be_fused_falls_back_to_the_chain(exported, monkeypatch):
    model, out = exported
    sess = ExportedModel(out)
    monkeypatch.setattr("edgeseq.runtime.model.joined_tree_stages", _refuse)
    monkeypatch.setattr("edgeseq.runtime.model.fuse_stages", _refuse)
    feats = features(model, data(9, seed=2)[0])
    j = sess.n_prefixes - 1
    got = outputs(sess.predict(feats, prefix=j))[0]
    assert (sess._fused[j] is None) == (j > 1)
    chain = _chain(sess, feats, j)
    assert np.array_equal(got, chain[1] if isinstance(sess.predict(feats, prefix=j), ClassifierPrediction)
                          else chain[0])


@pytest.mark.parametrize("blob", [b"\x0a", b"\x0f\x00", b"\x3a\x05abc", b"\x08\x07"])
def test_malformed_bytes_are_a_fuse_error(blob):
    with pytest.raises(FuseError):
        fuse.fuse_stages([blob])


def test_a_name_that_is_not_utf8_is_a_fuse_error():
    node = b"\x0a\x02\xff\xfe"                      # NodeProto input[0] = b"\xff\xfe"
    graph = b"\x0a" + bytes([len(node)]) + node      # GraphProto node[0]
    with pytest.raises(FuseError, match="UTF-8"):
        fuse_stages([b"\x3a" + bytes([len(graph)]) + graph])
