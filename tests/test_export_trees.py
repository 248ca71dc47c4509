"""Tree-stage exports: every stage graph, run by onnxruntime, equals the TreeStageModel to the float32
bound (identity, sigmoid, softmax; AFR and LightGBM; boundary values), the remap proves which groups a
stage reads (with a negative control), and the writer/manifest refuse what they must."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from edgeseq.errors import ExportError, IntegrityError
from edgeseq.export.kinds.trees import onnx as onnx_trees
from edgeseq.export.kinds.trees.onnx import build_stage_graph
from edgeseq.export.writer import export_model
from edgeseq.export.kinds.trees.writer import tree_input_names
from edgeseq.format import (MAX_TREE_DEPTH, MAX_TREE_NODES, STATE_IN, check_cross_fields, dump_manifest,
                            manifest_checksum, read_verified, validate_manifest)
from edgeseq.forms.trees import MAX_DEPTH, MAX_NODES, TreeEnsemble, TreeStage, TreeStageModel

from tree_models import afr_model, boundary_rows, data, lightgbm_model, stage_bound, toy_model


def run_stages(model: TreeStageModel, X32: np.ndarray, build=build_stage_graph):
    """(y or proba) of every stage from onnxruntime, the state carried from graph to graph."""
    names = tree_input_names(model.group_names)
    state = np.zeros((X32.shape[0], model.ensemble.n_targets), np.float32)
    out = []
    for k in range(len(model.stages)):
        g = build(model, k, names)
        onnx.checker.check_model(g, full_check=True)
        sess = ort.InferenceSession(g.SerializeToString(), providers=["CPUExecutionProvider"])
        if k == 0:
            feeds = {"n": np.zeros((X32.shape[0], 1), np.float32)}
        else:
            feeds = {names[gi]: X32[:, model.group_columns[gi]] for gi in model.groups_required(k)}
            feeds[STATE_IN] = state
        res = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        if k:
            state = res["state_out"]
        out.append(res["y"] if model.link == "identity" else res["proba"])
    return out


def worst_ratio(model, X, build=build_stage_graph) -> float:
    X32 = X.astype(np.float32)
    ratios = []
    for k, got in enumerate(run_stages(model, X32, build)):
        ref = model.predict(X32.astype(np.float64), stage=k)
        ratios.append(float((np.abs(got - ref) / stage_bound(model, X32, k)).max()))
    return max(ratios)


@pytest.mark.parametrize("link", ["identity", "sigmoid", "softmax"])
def test_lightgbm_stages_match_the_model_within_the_float32_bound(link):
    model = lightgbm_model(link)
    assert len(model.stages) >= 3 and model.link == link
    X, _ = data(200, seed=1)
    X = np.vstack([X, boundary_rows(model, X)])
    assert worst_ratio(model, X) <= 1.0


@pytest.mark.parametrize("n_classes", [2, 3])
def test_afr_stages_match_the_model_within_the_float32_bound(n_classes):
    model = afr_model(n_classes).stage_model_
    X, _ = data(150, seed=2)
    assert worst_ratio(model, np.vstack([X, boundary_rows(model, X)])) <= 1.0


def test_threshold_boundaries_go_left_in_onnx_as_in_the_model():
    model = toy_model()
    X = np.array([[0.5, 0.25, -1.0], [np.nextafter(np.float32(0.5), np.float32(1)), 0.25, -1.0],
                  [0.0, 0.25, np.nextafter(np.float32(-1.0), np.float32(0))], [0.0, 0.3, -2.0]], np.float32)
    got = run_stages(model, X)
    assert got[1][:, 0].tolist() == [1.0, 2.0, 1.0, 1.0]           # x0 == 0.5 goes left (leaf 1.0)
    assert got[2][:, 0].tolist() == [1 + 0.5 * (1 - 4), 1 + 0.5 * (2 - 4), 1 + 0.5 * (1 + 8), 1 + 0.5 * (1 - 4)]
    for k in range(3):
        np.testing.assert_array_equal(got[k][:, 0], model.predict(X, stage=k)[:, 0])


def test_negative_control_an_off_by_one_remap_is_caught(monkeypatch):
    """The comparison can fail: shifting every remapped column by one makes the stages disagree."""
    model = lightgbm_model("identity")
    X, _ = data(200, seed=3)
    real = onnx_trees.feature_remap

    def shifted(m, k):
        r = real(m, k)
        width = int(r.max()) + 1
        return np.where(r >= 0, (r + 1) % width, r)

    monkeypatch.setattr(onnx_trees, "feature_remap", shifted)
    assert worst_ratio(model, X) > 1.0


def test_a_tree_reading_an_uncomputed_group_is_an_export_error():
    model = toy_model()
    remap = onnx_trees.feature_remap(model, 1)
    assert remap.tolist() == [0, 1, -1]  # stage 1 computed group "ab" only
    bad = remap.copy()
    bad[1] = -1
    with pytest.raises(ExportError, match="stage 1: tree 0 splits on raw feature 1"):
        onnx_trees.stage_tree_attributes(model, 1, bad)


def test_stage_graphs_pin_ir_and_opsets_and_name_inputs_like_linear_graphs():
    model = lightgbm_model("softmax")
    names = tree_input_names(model.group_names)
    g = build_stage_graph(model, 2, names)
    assert g.ir_version == 10
    assert {(o.domain, o.version) for o in g.opset_import} == {("", 17), ("ai.onnx.ml", 3)}
    want = [names[gi] for gi in model.groups_required(2)] + ["state_in"]
    assert [i.name for i in g.graph.input] == want
    assert [o.name for o in g.graph.output] == ["y", "proba", "label", "state_out"]
    node = next(n for n in g.graph.node if n.op_type == "TreeEnsembleRegressor")
    att = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert att["aggregate_function"] == b"SUM" and att["n_targets"] == model.ensemble.n_targets
    assert set(att["nodes_modes"]) <= {b"BRANCH_LEQ", b"LEAF"}
    g0 = build_stage_graph(model, 0, names)
    assert [i.name for i in g0.graph.input] == ["n"] and [o.name for o in g0.graph.output] == ["y", "proba", "label"]


def test_a_stage_without_trees_passes_the_state_through():
    model = toy_model()
    stages = model.stages[:2] + (TreeStage((), 0.0, 1, 1, np.full((1, 1), 2.0), np.zeros(1)),) + model.stages[2:]
    m2 = TreeStageModel(model.group_names, model.group_columns, model.costs, model.ensemble, stages, "identity",
                        ("y",))
    X = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], np.float32)
    got = run_stages(m2, X)
    np.testing.assert_array_equal(got[2], 2 * got[1])
    for k in range(4):
        np.testing.assert_array_equal(got[k][:, 0], m2.predict(X, stage=k)[:, 0])


def test_the_bound_constants_agree_with_the_tree_module():
    assert MAX_TREE_DEPTH == MAX_DEPTH and MAX_TREE_NODES == MAX_NODES


# ----------------------------------------------------------------------------- writer + manifest
def test_export_writes_stage_graphs_and_a_tree_manifest(tmp_path):
    model = lightgbm_model("sigmoid")
    m = export_model(model, tmp_path / "out")
    assert m["stage_kind"] == "trees" and m["state_width"] == model.ensemble.n_targets
    assert m["c"]["header"] == "edgeseq_model.h" and sorted(f["file"] for f in m["files"]) == [
        "edgeseq_model.c", "edgeseq_model.h"]
    assert len(m["prefixes"]) == len(model.stages)
    assert [p["n_trees"] for p in m["prefixes"]] == [s.tree_stop - s.tree_start for s in model.stages]
    assert sum(len(p["new_groups"]) for p in m["prefixes"]) == len(model.groups_required(len(model.stages) - 1))
    np.testing.assert_allclose([p["cum_cost"] for p in m["prefixes"]], model.cum_cost)
    assert m["outputs"]["classes"] == [False, True]
    assert read_verified(tmp_path / "out") == m


def test_export_accepts_a_fitted_afr_classifier(tmp_path):
    est = afr_model(3)
    m = export_model(est, tmp_path / "out")
    assert m["link"] == "softmax" and m["outputs"]["classes"] == [0, 1, 2]
    assert m["provenance"]["source"] == "AFRClassifier"


def test_export_refuses_leaves_or_readouts_beyond_float32(tmp_path):
    model = toy_model()
    big = TreeStageModel(model.group_names, model.group_columns, model.costs, model.ensemble,
                         model.stages[:2] + (TreeStage((1,), 2.0, 1, 2, np.full((1, 1), 1e39), np.ones(1)),),
                         "identity", ("y",))
    with pytest.raises(ExportError, match="stage 2's readout weights has magnitude 1e\\+39"):
        export_model(big, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_stage_sum_that_overflows_float32(tmp_path):
    ens = TreeEnsemble(feature=[-1, -1], threshold=[0, 0], left=[-1, -1], right=[-1, -1], value=[3e38, 3e38],
                       roots=[0, 1], target=[0, 0], n_features=1, n_targets=1)
    one = np.ones((1, 1))
    model = TreeStageModel(("a",), ([0],), [1.0], ens, (TreeStage((), 0.0, 0, 0, one, np.zeros(1)),
                                                        TreeStage((0,), 1.0, 0, 2, one, np.zeros(1))),
                           "identity", ("y",))
    with pytest.raises(ExportError, match="stage 1 overflows float32"):
        export_model(model, tmp_path / "out")


def test_linear_manifests_stay_free_of_tree_fields(tmp_path):
    from edgeseq import AnytimeRegressor

    X, s = data(80)
    m = export_model(AnytimeRegressor(groups=[[0, 1], [2, 3]], costs=[1.0, 2.0]).fit(X[:, :4], s).fitted_sequence_,
                     tmp_path / "lin")
    assert "stage_kind" not in m and "state_width" not in m and "ml_opset" not in m["onnx"]
    assert not any(k in p for p in m["prefixes"] for k in ("new_groups", "n_trees", "cost"))


# ----------------------------------------------------------------------------- manifest refusals
@pytest.fixture(scope="module")
def tree_manifest(tmp_path_factory):
    out = tmp_path_factory.mktemp("trees") / "out"
    export_model(lightgbm_model("identity"), out)
    return json.loads((out / "manifest.json").read_text())


def _edited(m, edit):
    m = json.loads(json.dumps(m))
    edit(m)
    return m


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.pop("state_width"), "state_width is required"),
    (lambda m: m.update(state_width=1 << 20), "schema at state_width"),
    (lambda m: m["prefixes"][1].pop("n_trees"), r"prefixes\[1\] lacks"),
    (lambda m: m["prefixes"][1].update(n_trees=2_000_000), "schema at prefixes/1/n_trees"),
    (lambda m: m["prefixes"][1].update(max_depth=33), "schema at prefixes/1/max_depth"),
    (lambda m: m["prefixes"][1].update(n_nodes=m["prefixes"][1]["n_nodes"] * 1000), "no set of binary trees"),
    (lambda m: m["prefixes"][0].update(n_trees=1, n_nodes=1), r"prefixes\[0\] must require no group"),
    (lambda m: m["prefixes"][1].update(new_groups=list(reversed(m["prefixes"][1]["new_groups"])) + ["x"]),
     "in list order"),
    (lambda m: m["prefixes"][1]["inputs"].pop(), r"prefixes\[1\] has index"),
    (lambda m: m["prefixes"][1].update(cost=m["prefixes"][1]["cost"] / 2), "less than its new groups"),
    (lambda m: m["prefixes"][2].update(cum_cost=m["prefixes"][2]["cum_cost"] + 1), "running sum of the stage"),
    (lambda m: m["groups"][0].update(input_name="state_in"), "the state's names"),
    (lambda m: [p.update(n_trees=600_000, n_nodes=600_000, max_depth=0) for p in m["prefixes"][1:3]],
     "at most 1048576 trees"),
])
def test_tree_manifest_refusals(tree_manifest, edit, match):
    bad = _edited(tree_manifest, edit)
    with pytest.raises(IntegrityError, match=match):
        validate_manifest(bad)


def test_an_unedited_tree_manifest_passes_the_same_checks(tree_manifest):
    """Negative control for the refusals above: the checks accept the real manifest."""
    validate_manifest(tree_manifest)
    check_cross_fields(_edited(tree_manifest, lambda m: None))


def test_affine_manifests_refuse_tree_fields_and_a_null_c(tmp_path):
    from edgeseq import AnytimeRegressor

    X, s = data(80)
    m = export_model(AnytimeRegressor(groups=[[0, 1], [2, 3]], costs=[1.0, 2.0]).fit(X[:, :4], s).fitted_sequence_,
                     tmp_path / "lin")
    with pytest.raises(IntegrityError, match="tree-stage field"):
        validate_manifest(_edited(m, lambda x: x["prefixes"][1].update(n_trees=1)))
    with pytest.raises(IntegrityError, match="c is null"):
        validate_manifest(_edited(m, lambda x: x.update(c=None)))


def test_an_edited_tree_manifest_with_recomputed_checksum_is_refused_on_read(tmp_path):
    out = tmp_path / "out"
    export_model(lightgbm_model("identity"), out)
    m = json.loads((out / "manifest.json").read_text())
    m["prefixes"][1]["new_groups"] = []
    m["manifest_sha256"] = manifest_checksum(m)
    (out / "manifest.json").write_bytes(dump_manifest(m))
    with pytest.raises(IntegrityError, match="requires no group although it is not the prior"):
        read_verified(out)


def test_export_re_checks_an_edited_model_it_did_not_build(tmp_path):
    """A model whose arrays were changed behind the constructor's back (NaN threshold) is refused."""
    import copy

    from edgeseq.errors import ModelFormatError

    model = copy.deepcopy(lightgbm_model("identity"))
    thr = model.ensemble.threshold.copy()
    thr[0] = np.nan
    object.__setattr__(model.ensemble, "threshold", thr)
    with pytest.raises(ModelFormatError, match="the tree model is inconsistent: tree ensemble: a split threshold is NaN"):
        export_model(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("options", [{"batch_size": 4}, {"ort": True}])
def test_fixed_batch_and_ort_format_tree_exports_run(tmp_path, options):
    from edgeseq.runtime.model import ExportedModel

    model = lightgbm_model("softmax")
    m = export_model(model, tmp_path / "out", **options)
    if options.get("ort"):
        assert len(m["ort"]["prefixes"]) == len(model.stages)
    X, _ = data(10, seed=4)
    feats = {model.group_names[g]: X[:, model.group_columns[g]] for g in range(len(model.group_names))}
    got = ExportedModel(tmp_path / "out").predict(feats).proba
    np.testing.assert_allclose(got, model.predict(X), atol=1e-5)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_a_non_finite_input_makes_y_non_finite_through_the_guard(value):
    """A tree routes NaN silently; the guard (inputs @ 0, added to the readout) must not. Negative control:
    the same graph without the guard gives a finite y for the same input."""
    model = lightgbm_model("softmax")
    names = tree_input_names(model.group_names)
    k = len(model.stages) - 1
    g = build_stage_graph(model, k, names)
    X, _ = data(5, seed=3)
    feeds = {names[gi]: X[:, model.group_columns[gi]].astype(np.float32) for gi in model.groups_required(k)}
    feeds[STATE_IN] = np.zeros((5, model.ensemble.n_targets), np.float32)
    first = names[model.groups_required(k)[0]]
    feeds[first] = feeds[first].copy()
    feeds[first][2, 0] = value

    def y_of(graph):
        sess = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(["y"], feeds)[0]

    y = y_of(g)
    assert not np.isfinite(y[2]).any() and np.isfinite(np.delete(y, 2, axis=0)).all()
    unguarded = onnx.ModelProto()
    unguarded.CopyFrom(g)
    for node in unguarded.graph.node:  # y = readout + b, without the guard
        if node.op_type == "Add" and "readout/guarded" in node.input:
            node.input[list(node.input).index("readout/guarded")] = "readout"
    assert np.isfinite(y_of(unguarded)).all()
