"""The joined graph of a linear/GLM prefix (`edgeseq.runtime.fuse.joined_prefix`): one input, one
``Gemm`` by the weights read from the exported graph, and a one-node link (a sigmoid prefix's
``Gemm`` computes ``[-y, y]`` and one ``Sigmoid`` gives ``[1 - p, p]``).

On random models (regression, binary, 3 and 4 classes; random group widths, order and budgets,
prefix 0 included) `ExportedModel.predict` must agree with the prefix graph the anytime loop runs
(probabilities and scores to 1e-6, the label the argmax of the returned probabilities) and with the
estimator's own float64 prediction (to float32 rounding of the weights), in the bound (small batch)
and transposed (large batch) paths. Negative controls: one weight of the joined graph moved by a
little is caught by the same comparison; a NaN in a group the prefix does not pay for cannot reach
the answer, while one in a paid group is refused."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from edgeseq import AnytimeClassifier, AnytimeRegressor
from edgeseq.errors import RuntimeInputError
from edgeseq.export.writer import export_model
from edgeseq.runtime.fuse import SIGNED_LOGITS, FuseError, joined_prefix
from edgeseq.runtime.model import ClassifierPrediction, ExportedModel
from edgeseq.runtime.ort import PrefixRunner

RTOL = 1e-6  # joined vs prefix graph: float32 sums in another order
KINDS = ["regression", "binary", "softmax3", "softmax4"]


def _model(kind: str, seed: int):
    """A random linear model: 4-6 groups of 1-4 columns, random costs; the target from all columns."""
    rng = np.random.default_rng(seed)
    widths = rng.integers(1, 5, size=int(rng.integers(4, 7)))
    bounds = np.concatenate([[0], np.cumsum(widths)])
    groups = [list(range(bounds[k], bounds[k + 1])) for k in range(len(widths))]
    X = rng.normal(size=(300, int(bounds[-1])))
    z = X @ rng.normal(size=X.shape[1])
    costs = rng.uniform(0.5, 3.0, size=len(groups))
    if kind == "regression":
        est = AnytimeRegressor(groups, costs).fit(X, z + 0.1 * rng.normal(size=len(z)))
    else:
        k = 2 if kind == "binary" else int(kind[-1])
        # noisy labels keep the logits moderate (|y| of a few units), so float32 rounding of the sums,
        # ~1e-7 of their terms, moves a probability by well under RTOL, as in tests/test_runtime_joined.py
        y = np.digitize(z + z.std() * rng.normal(size=len(z)), np.quantile(z, np.linspace(0, 1, k + 1)[1:-1]))
        est = AnytimeClassifier(groups, costs).fit(X, y)
    return est.fitted_sequence_, rng


@pytest.fixture(scope="module", params=[(k, s) for k in KINDS for s in (0, 1)], ids=lambda p: f"{p[0]}-{p[1]}")
def exported(request, tmp_path_factory):
    kind, seed = request.param
    seq, rng = _model(kind, seed)
    out = tmp_path_factory.mktemp("lin") / "out"
    export_model(seq, out)
    return seq, out, rng


def _feats(seq, X):
    return {seq.group_names[g]: X[:, seq.group_columns[g]].astype(np.float32) for g in range(len(seq.group_names))}


def _staged(sess: ExportedModel, feats, j: int):
    """(answer, raw score) of prefix j from the prefix graph the anytime loop runs."""
    if j == 0:
        outs = sess._runners[0].run_rows(len(next(iter(feats.values()))))
    else:
        arrays = [feats[name] for name, _ in sess._plan[j]]
        outs, _ = sess._runners[j].call(arrays, arrays[0].shape[0])
    y = np.asarray(outs[0], np.float64).reshape(len(outs[0]), -1)
    return (y if sess.task == "regression" else np.asarray(outs[1], np.float64)), y


def _answer(pred):
    if isinstance(pred, ClassifierPrediction):
        return pred.proba.astype(np.float64), pred.score.astype(np.float64)
    v = np.asarray(pred, np.float64).reshape(len(pred), -1)
    return v, v


def _close(got, want, rtol=RTOL) -> bool:
    return bool(np.all(np.abs(got - want) <= rtol * max(1.0, float(np.abs(want).max()))))


@pytest.mark.parametrize("n", [1, 7, 300])  # bound input buffer, bound again, transposed
def test_joined_linear_agrees_with_the_prefix_graphs_and_the_estimator(exported, n):
    seq, out, rng = exported
    sess = ExportedModel(out)
    X = rng.normal(size=(n, seq.n_features_in)).astype(np.float32).astype(np.float64)
    feats = _feats(seq, X)
    budgets = [0.0, *rng.uniform(0, sess.cum_cost[-1], size=3), float(sess.cum_cost[-1]), None]
    seen = set()
    for budget in budgets:
        j = sess.prefix_for_budget(budget if budget is not None else np.inf)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # prefix 0 warns that the budget affords nothing
            pred = sess.predict(feats, budget=budget)
        got, score = _answer(pred)
        want, want_score = _staged(sess, feats, j)
        assert _close(got, want) and _close(score, want_score), (budget, j)
        own = seq.apply_link(seq.linear(X, j))  # float64, from the fitted weights
        assert _close(got, own.reshape(n, -1), rtol=2e-5), (budget, j)
        if isinstance(pred, ClassifierPrediction):
            assert np.array_equal(pred.label_index, pred.proba.argmax(axis=1))
        if j:
            seen.add(j)
            assert sess._fused[j].joined, j  # the joined graph ran, not the fallback
    assert seen


def test_the_joined_linear_graph_is_one_gemm_and_a_one_node_link(exported):
    onnx = pytest.importorskip("onnx")
    seq, out, _ = exported
    sess = ExportedModel(out)
    p = sess.manifest["prefixes"][-1]
    graph = (out / p["file"]).read_bytes()
    link = {"identity": [], "sigmoid": ["Sigmoid", "ArgMax"], "softmax": ["Softmax", "ArgMax"]}[sess.link]
    for transposed, head in ((False, ["Gemm"]), (True, ["Gemm", "Transpose"])):
        model = onnx.load_from_string(joined_prefix(graph, transposed=transposed)[0])
        assert [n.op_type for n in model.graph.node] == head + link
        outs = [o.name for o in model.graph.output]
        assert (SIGNED_LOGITS in outs and "y" not in outs) == (sess.link == "sigmoid")
        assert len(model.graph.input) == 1 and len(model.graph.initializer) == 2  # the weights, the bias


def _mutated_runner(graph: bytes, sess: ExportedModel, delta: float) -> PrefixRunner:
    """The joined graph with one weight moved by `delta` (its largest, in the last column)."""
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper
    model, name = joined_prefix(graph)
    m = onnx.load_from_string(model)
    w = next(t for t in m.graph.initializer if t.name == "joined/W")
    W = numpy_helper.to_array(w).copy()
    W[np.abs(W[:, -1]).argmax(), -1] += delta
    w.CopyFrom(numpy_helper.from_array(W, "joined/W"))
    outputs = [o for o in sess._runners[-1].outputs]
    signed = sess.link == "sigmoid"
    if signed:
        outputs = [SIGNED_LOGITS if o == "y" else o for o in outputs]
    runner = PrefixRunner(m.SerializeToString(), [name], outputs, "mutated", sess._squeeze, signed=signed)
    runner.joined = True
    return runner


@pytest.mark.parametrize("delta", [0.0, 1e-3])
def test_a_mutated_weight_is_caught(exported, delta):
    """Negative control: the comparison above sees a weight moved by 1e-3 (and passes unmoved)."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    feats = _feats(seq, rng.normal(size=(40, seq.n_features_in)))
    graph = (out / sess.manifest["prefixes"][j]["file"]).read_bytes()
    outs, _ = _mutated_runner(graph, sess, delta).call_joined([feats[g] for g, _ in sess._plan[j]], 40)
    got = np.asarray(outs[0], np.float64).reshape(40, -1)
    assert _close(got, _staged(sess, feats, j)[1]) == (delta == 0.0)


@pytest.mark.parametrize("n", [1, 300])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_value_in_an_unpaid_group_cannot_reach_the_answer(exported, n, bad):
    """The joined input holds only the prefix's groups: a NaN/Inf in a later group changes nothing,
    one in a paid group is refused naming it."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    X = rng.normal(size=(n, seq.n_features_in))
    feats = _feats(seq, X)
    j = sess.n_prefixes - 2  # the last group is not paid for
    unpaid = next(g.name for g in sess.groups[sess._counts[j]:])
    clean = _answer(sess.predict(feats, prefix=j))[0]
    feats[unpaid] = feats[unpaid].copy()
    feats[unpaid][n - 1, -1] = bad
    assert np.array_equal(_answer(sess.predict(feats, prefix=j))[0], clean)
    paid = sess._plan[j][-1][0]
    feats[paid] = feats[paid].copy()
    feats[paid][n - 1, 0] = bad
    with pytest.raises(RuntimeInputError, match=repr(paid)):
        sess.predict(feats, prefix=j)


def _tanh(m):
    next(n for n in m.graph.node if n.op_type == "Sigmoid").op_type = "Tanh"


def _rows(m):
    next(a for n in m.graph.node if n.op_type == "Concat" for a in n.attribute if a.name == "axis").i = 0


@pytest.mark.parametrize("edit", [_tanh, _rows], ids=["tanh", "concat-rows"])
def test_an_unknown_link_is_a_fuse_error(tmp_path, edit):
    """A sigmoid link edited into another function (another op, probabilities stacked as rows) is
    refused with FuseError, so `_fuse` keeps the prefix graph (tests/test_runtime_joined.py checks
    that fallback for a graph missing a part); the unedited graph joins."""
    onnx = pytest.importorskip("onnx")
    seq, _ = _model("binary", 3)
    out = tmp_path / "out"
    export_model(seq, out)
    p = ExportedModel(out).manifest["prefixes"][-1]
    m = onnx.load(out / p["file"])
    joined_prefix(m.SerializeToString())
    edit(m)
    with pytest.raises(FuseError, match="link"):
        joined_prefix(m.SerializeToString())
