"""Core-operator tree stages (``--tree-ops core``) against numpy, in every runtime that runs them.

Random ensembles (preorder storage, so the writer's breadth-first reordering is exercised; several
stages; regression, binary and multiclass; a carried state wider than one) are run stage by stage,
the state carried from graph to graph, in onnxruntime, onnx.reference, tract and OpenVINO (f32), on
rows drawn on, and one float32 step either side of, every threshold. Negative controls: the same
graph with ``Less`` in place of ``LessOrEqual`` fails on the threshold rows (they are what decide the
split direction), and tract and OpenVINO refuse the ``ai.onnx.ml`` form (why the core form exists).
"""

from __future__ import annotations

import json
import logging

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from edgeseq.cli import main
from edgeseq.errors import EdgeseqError, ExportError, IntegrityError
from edgeseq.export.kinds.trees.verify import verify_tree_export
from edgeseq.export.onnx_runners import RuntimeUnavailable, run_graph
from edgeseq.export.kinds.trees.onnx import build_stage_graph
from edgeseq.export.kinds.trees.onnx_core import splits_first
from edgeseq.export.writer import export_model
from edgeseq.export.kinds.trees.writer import tree_input_names
from edgeseq.format import STATE_IN, dump_manifest, manifest_checksum, read_verified
from edgeseq.io.model_io import save_model

from tree_models import boundary_rows, lightgbm_model, random_tree_model, rows

TOL = 1e-5
CASES = {  # link, n_outputs, state width, trees per stage, depth
    "regression": ("identity", 1, 1, (3, 4, 2), 4),
    "binary": ("sigmoid", 1, 1, (2, 3, 3), 3),
    "multiclass": ("softmax", 4, 4, (5, 6, 4), 3),
}
STAGE_GROUPS = ((0,), (1,), (2,))


def _model(name, seed=0):
    link, P, S, trees, depth = CASES[name]
    return random_tree_model(np.random.default_rng(seed), group_sizes=(2, 3, 1), stage_groups=STAGE_GROUPS,
                             trees_per_stage=trees, n_state=S, n_outputs=P, link=link, depth=depth)


def _rows(model, seed=1):
    X = rows(np.random.default_rng(seed), model, 30)
    return np.vstack([X, boundary_rows(model, X, limit=200)]).astype(np.float32)


def _run(runtime, path, feed):
    try:
        return run_graph(runtime, path, feed)
    except RuntimeUnavailable as exc:
        pytest.skip(str(exc))


def run_stages(model, X32, runtime, tmp_path, tree_ops="core", edit=None):
    """Every stage's outputs from `runtime`, the state carried from graph to graph."""
    names = tree_input_names(model.group_names)
    state = np.zeros((X32.shape[0], model.ensemble.n_targets), np.float32)
    outs = []
    for k in range(len(model.stages)):
        g = build_stage_graph(model, k, names, tree_ops=tree_ops)
        if edit is not None:
            edit(g)
        onnx.checker.check_model(g, full_check=True)
        path = tmp_path / f"{runtime}_{k}.onnx"
        path.write_bytes(g.SerializeToString())
        feed = {"n": np.zeros((X32.shape[0], 1), np.float32)} if k == 0 else {
            **{names[gi]: np.ascontiguousarray(X32[:, model.group_columns[gi]]) for gi in model.groups_required(k)},
            STATE_IN: state}
        res = _run(runtime, path, feed)
        if k:
            state = np.asarray(res["state_out"])
        outs.append(res)
    return outs


def _worst(model, X32, outs) -> float:
    worst = 0.0
    for k, res in enumerate(outs):
        ref = model.predict(X32.astype(np.float64), stage=k)
        got = res["y"] if model.link == "identity" else res["proba"]
        worst = max(worst, float(np.max(np.abs(np.asarray(got, np.float64) - ref))))
        if model.link != "identity":
            clear = np.sort(ref, axis=1)[:, -1] - np.sort(ref, axis=1)[:, -2] > 1e-4
            assert np.array_equal(np.asarray(res["label"])[clear], ref[clear].argmax(axis=1))
    return worst


@pytest.mark.parametrize("runtime", ["onnxruntime", "onnx-reference", "tract", "openvino"])
@pytest.mark.parametrize("case", list(CASES))
def test_core_stages_match_numpy_in_every_runtime(case, runtime, tmp_path):
    model = _model(case)
    X32 = _rows(model)
    assert _worst(model, X32, run_stages(model, X32, runtime, tmp_path)) <= TOL


def test_core_form_holds_only_core_operators():
    model = _model("multiclass")
    names = tree_input_names(model.group_names)
    for k in range(len(model.stages)):
        g = build_stage_graph(model, k, names, tree_ops="core")
        assert [o.domain for o in g.opset_import] == [""] and g.opset_import[0].version == 17 and g.ir_version == 10
        assert {n.domain for n in g.graph.node} <= {""}
        assert [i.name for i in g.graph.input] == [i.name for i in build_stage_graph(model, k, names).graph.input]
        assert [o.name for o in g.graph.output] == [o.name for o in build_stage_graph(model, k, names).graph.output]


def test_negative_control_strict_comparison_fails_on_the_threshold_rows(tmp_path):
    """`x < t` instead of `x <= t` (each threshold moved one float32 step down): equal on rows off the
    thresholds, wrong on rows exactly on one."""
    model = _model("regression")

    def strict(g):
        for i, t in enumerate(g.graph.initializer):
            if t.name == "trees/threshold":
                below = np.nextafter(onnx.numpy_helper.to_array(t), np.float32(-np.inf))
                g.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(below, t.name))

    X = rows(np.random.default_rng(1), model, 30)
    on = np.vstack([X, boundary_rows(model, X, limit=200)]).astype(np.float32)
    off = np.random.default_rng(2).normal(size=(40, model.ensemble.n_features)).astype(np.float32)  # no ties
    assert _worst(model, off, run_stages(model, off, "onnxruntime", tmp_path, edit=strict)) <= TOL
    assert _worst(model, on, run_stages(model, on, "onnxruntime", tmp_path, edit=strict)) > 1e-3


@pytest.mark.parametrize("runtime", ["tract", "openvino"])
def test_negative_control_ml_form_is_refused_by_tract_and_openvino(runtime, tmp_path):
    model = _model("regression")
    X32 = _rows(model)
    with pytest.raises(Exception, match="(?i)TreeEnsemble"):  # noqa: B017 -- each runtime's own error
        run_stages(model, X32, runtime, tmp_path, tree_ops="ai-onnx-ml")


def test_splits_first_keeps_predictions_and_is_idempotent():
    model = _model("multiclass")
    bf = splits_first(model)
    assert bf is not model and splits_first(bf) is bf
    X = _rows(model).astype(np.float64)
    for k in range(len(model.stages)):
        assert np.array_equal(bf.predict(X, stage=k), model.predict(X, stage=k))


@pytest.mark.parametrize("case", ["regression", "multiclass"])
def test_core_export_verifies_and_records_its_form(case, tmp_path):
    model = _model(case, seed=3)
    m = export_model(model, tmp_path / "core", tree_ops="core")
    assert m["onnx"]["tree_ops"] == "core" and "ml_opset" not in m["onnx"]
    rep = verify_tree_export(tmp_path / "core", use_c=False)
    assert rep.ok and len(rep.checks) == len(model.stages)
    ml = export_model(model, tmp_path / "ml")
    assert "tree_ops" not in ml["onnx"]  # an older manifest without the field: the ai.onnx.ml form


def test_lightgbm_core_export_keeps_the_c_model(tmp_path):
    """LightGBM trees are stored breadth-first already: the C model is byte-identical in both forms."""
    model = lightgbm_model("softmax")
    a, b = (export_model(model, tmp_path / "ml", model_name="m"),
            export_model(model, tmp_path / "core", model_name="m", tree_ops="core"))
    for name in (a["c"]["header"], a["c"]["source"]):
        assert (tmp_path / "ml" / name).read_bytes() == (tmp_path / "core" / name).read_bytes()
    assert verify_tree_export(tmp_path / "core", use_c=False).ok
    assert b["prefixes"][1]["sha256"] != a["prefixes"][1]["sha256"]


def _retable(out, k, name, change):
    """Edit one core table of stage k's graph, re-hash the file, re-sign the manifest."""
    import hashlib

    m = json.loads((out / "manifest.json").read_text())
    p = m["prefixes"][k]
    g = onnx.load(str(out / p["file"]))
    for i, t in enumerate(g.graph.initializer):
        if t.name == f"trees/{name}":
            arr = onnx.numpy_helper.to_array(t).copy()
            change(arr)
            g.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(arr, t.name))
    data = g.SerializeToString()
    (out / p["file"]).write_bytes(data)
    p["sha256"] = hashlib.sha256(data).hexdigest()
    m["manifest_sha256"] = manifest_checksum(m)
    (out / "manifest.json").write_bytes(dump_manifest(m))


@pytest.mark.parametrize("name, change, match", [
    ("path", lambda a: a.__setitem__((0, 0, 0), 2.0), "not -1, 0 or 1"),
    ("path", lambda a: a.__setitem__((0, 0, slice(None)), 0.0), "binary tree|no subtree|one tree"),
    ("count", lambda a: a.__setitem__((0, 0, 0), a[0, 0, 0] + 1), "byte-identical|differs|identical"),
    ("target", lambda a: a.__setitem__((0, slice(None)), 1.0), "exactly one target"),
])
def test_verify_refuses_edited_core_tables(tmp_path, name, change, match):
    model = _model("multiclass", seed=4)
    export_model(model, tmp_path / "out", tree_ops="core")
    _retable(tmp_path / "out", 1, name, change)
    with pytest.raises(IntegrityError, match=match):
        verify_tree_export(tmp_path / "out", use_c=False)


def test_manifest_refuses_an_unknown_tree_form(tmp_path):
    model = _model("regression")
    export_model(model, tmp_path / "out", tree_ops="core")
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    m["onnx"]["tree_ops"] = "gemm"
    m["manifest_sha256"] = manifest_checksum(m)
    (tmp_path / "out" / "manifest.json").write_bytes(dump_manifest(m))
    with pytest.raises(EdgeseqError, match="tree_ops"):
        read_verified(tmp_path / "out")
    with pytest.raises(ExportError, match="tree ops 'gemm'"):
        export_model(model, tmp_path / "other", tree_ops="gemm")


_LOG = logging.getLogger("usability_checker")


def analyze_model(path, logger):
    uc = pytest.importorskip("onnxruntime.tools.mobile_helpers.usability_checker",
                             reason="this onnxruntime has no mobile usability checker")
    return uc.analyze_model(path, logger=logger)


def _usability(path):
    uc = pytest.importorskip("onnxruntime.tools.mobile_helpers.usability_checker",
                             reason="this onnxruntime has no mobile usability checker")
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)), strict_mode=True)
    nnapi = uc.check_nnapi_partitions(model, True)
    coreml = uc.check_coreml_partitions(model, True, "coreml_supported_mlprogram_ops.md")
    return nnapi, coreml


@pytest.mark.parametrize("case", ["regression", "multiclass"])
def test_mobile_execution_providers_take_whole_core_graphs(case, tmp_path):
    """Batch size 1, labels left to the runtime: NNAPI and CoreML take every node of every stage in
    one partition, and onnxruntime's checker (`analyze_model`, which optimizes the graph first) runs
    on every stage, the prior included; the ai.onnx.ml form (negative control) leaves the tree node out."""
    model = _model(case)
    labels = "graph" if model.link == "identity" else "runtime"
    m = export_model(model, tmp_path / "core", tree_ops="core", batch_size=1, labels=labels)
    for p in m["prefixes"]:
        nnapi, coreml = _usability(tmp_path / "core" / p["file"])
        assert nnapi.num_supported_nodes == nnapi.num_nodes and nnapi.num_partitions == 1, \
            (p["file"], nnapi.unsupported_ops)
        assert coreml.num_supported_nodes == coreml.num_nodes and coreml.num_partitions == 1, \
            (p["file"], coreml.unsupported_ops)
        assert analyze_model(tmp_path / "core" / p["file"], logger=_LOG)  # the tool itself, after its optimizer
    ml = export_model(model, tmp_path / "ml", batch_size=1, labels=labels)
    nnapi, _ = _usability(tmp_path / "ml" / ml["prefixes"][1]["file"])
    assert "ai.onnx.ml:TreeEnsembleRegressor" in nnapi.unsupported_ops


def test_cli_export_tree_ops_core(tmp_path):
    model = _model("binary")
    save_model(model, tmp_path / "m.edgeseq")
    res = CliRunner().invoke(main, ["export", str(tmp_path / "m.edgeseq"), str(tmp_path / "out"),
                                    "--tree-ops", "core", "--quiet"])
    assert res.exit_code == 0, res.output
    assert read_verified(tmp_path / "out")["onnx"]["tree_ops"] == "core"
    res = CliRunner().invoke(main, ["inspect", str(tmp_path / "out")])
    assert "core operators" in res.output
    res = CliRunner().invoke(main, ["verify", str(tmp_path / "out"), "--no-c"])
    assert res.exit_code == 0, res.output


def test_core_export_for_a_minimal_onnxruntime_build(tmp_path):
    """--ort: the reduced-build operator list of a core export holds no ai.onnx.ml operator (the
    default form's does: the control)."""
    model = _model("multiclass")
    export_model(model, tmp_path / "core", tree_ops="core", ort=True, batch_size=1, labels="runtime")
    export_model(model, tmp_path / "ml", ort=True, batch_size=1, labels="runtime")
    core = (tmp_path / "core" / "required_operators.config").read_text()
    assert "ai.onnx.ml" not in core and "MatMul" in core
    assert "ai.onnx.ml" in (tmp_path / "ml" / "required_operators.config").read_text()


def test_core_export_with_integer_c_verifies(tmp_path):
    """The integer C is quantized from the same (reordered) trees the core graphs hold."""
    model = _model("regression", seed=5)
    X = rows(np.random.default_rng(6), model, 200)
    m = export_model(model, tmp_path / "out", tree_ops="core", c_dtype="int16", calibration=(X, None))
    assert m["onnx"]["tree_ops"] == "core" and m["c"]["dtype"] == "int16"
    assert verify_tree_export(tmp_path / "out", use_c=False).ok
