"""Tree models end to end: fit (AFR) or import (LightGBM) -> save_model -> `edgeseq export` -> load with
ExportedModel -> the TreeStageModel's predictions at every stage and budget; model files round-trip
through the restricted unpickler and crafted ones are refused with one line; `edgeseq verify` and
`edgeseq inspect` on tree exports, including a tampered graph."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgeseq.cli._main import main
from edgeseq.errors import IntegrityError, ModelFormatError
from edgeseq.evaluate.verify import verify_export
from edgeseq.export.writer import export_model
from edgeseq.format import dump_manifest, manifest_checksum, sha256_file
from edgeseq.io.model_io import load_model, save_model
from edgeseq.runtime.model import ClassifierPrediction, ExportedModel
from edgeseq.forms.trees import TreeStageModel

import edgeseq.cli.export_cmd  # noqa: F401  (registers the commands)
import edgeseq.cli.runtime_cmd  # noqa: F401

from tree_models import afr_model, boundary_rows, data, lightgbm_model, stage_bound


def _values(pred):
    return pred.proba if isinstance(pred, ClassifierPrediction) else np.asarray(pred)


@pytest.mark.parametrize("which", ["afr", "lightgbm"])
def test_fit_save_export_cli_load_predict(which, tmp_path):
    obj = afr_model(2) if which == "afr" else lightgbm_model("softmax")
    model = obj.stage_model_ if which == "afr" else obj
    save_model(obj, tmp_path / "model.pkl")
    loaded = load_model(tmp_path / "model.pkl")
    assert type(loaded) is type(obj)
    r = CliRunner().invoke(main, ["export", str(tmp_path / "model.pkl"), str(tmp_path / "out"), "--quiet"])
    assert r.exit_code == 0, r.output
    exported = ExportedModel(tmp_path / "out")
    X, _ = data(100, seed=21)
    X = np.vstack([X, boundary_rows(model, X)])
    X32 = X.astype(np.float32)
    feats = {model.group_names[g]: X[:, model.group_columns[g]] for g in range(len(model.group_names))}
    for k in range(len(model.stages)):
        ref = model.predict(X32.astype(np.float64), stage=k)
        got = _values(exported.predict(feats, prefix=k)).reshape(ref.shape)
        assert (np.abs(got - ref) / stage_bound(model, X32, k)).max() <= 1.0
    cum = model.cum_cost
    for b in sorted({*cum.tolist(), *(cum[1:] - 1e-6).tolist(), *(cum + 1e-6).tolist()}):
        k = model.prefix_for_budget(b)
        got = _values(exported.predict(feats, budget=b)).reshape(model.predict(X, stage=k).shape)
        assert (np.abs(got - model.predict(X32.astype(np.float64), stage=k))
                / stage_bound(model, X32, k)).max() <= 1.0, b


def test_saved_models_round_trip_exactly(tmp_path):
    for obj in (afr_model(3), lightgbm_model("identity")):
        save_model(obj, tmp_path / "m.pkl")
        back = load_model(tmp_path / "m.pkl")
        a = obj.stage_model_ if isinstance(obj, TreeStageModel) is False else obj
        b = back.stage_model_ if isinstance(back, TreeStageModel) is False else back
        X, _ = data(40, seed=22)
        np.testing.assert_array_equal(a.predict(X), b.predict(X))
        np.testing.assert_array_equal(a.ensemble.depth, b.ensemble.depth)


def _crafted(model: TreeStageModel, field: str, value) -> TreeStageModel:
    """A copy of `model` whose ensemble has `field` replaced without any check (what a file can hold)."""
    import copy

    bad = copy.deepcopy(model)
    object.__setattr__(bad.ensemble, field, value)
    return bad


@pytest.mark.parametrize("field, edit, match", [
    ("left", lambda a: np.where(np.arange(a.size) == np.flatnonzero(a >= 0)[0], 10**6, a),
     "left child points backwards or outside its tree"),
    ("threshold", lambda a: np.where(np.arange(a.size) == 0, np.nan, a).astype(np.float32), "threshold is NaN"),
    ("value", lambda a: np.where(np.arange(a.size) == 1, np.inf, a), "leaf value is NaN or Inf"),
    ("feature", lambda a: np.where(a >= 0, 99, a), "splits on feature 99"),
])
def test_crafted_tree_model_files_are_refused_with_one_line(tmp_path, field, edit, match):
    model = lightgbm_model("identity")
    bad = _crafted(model, field, edit(getattr(model.ensemble, field).copy()))
    save_model(bad, tmp_path / "bad.pkl")
    with pytest.raises(ModelFormatError, match=match) as err:
        load_model(tmp_path / "bad.pkl")
    assert "\n" not in str(err.value)
    r = CliRunner().invoke(main, ["export", str(tmp_path / "bad.pkl"), str(tmp_path / "out")])
    assert r.exit_code != 0 and "Traceback" not in r.output and not (tmp_path / "out").exists()


def test_crafted_afr_file_is_refused_too(tmp_path):
    import copy

    est = copy.deepcopy(afr_model(2))
    ens = est.stage_model_.ensemble
    object.__setattr__(ens, "threshold", np.full(ens.n_nodes, np.nan, np.float32))
    save_model(est, tmp_path / "bad.pkl")
    with pytest.raises(ModelFormatError, match="threshold is NaN"):
        load_model(tmp_path / "bad.pkl")


def test_an_unmodified_crafted_copy_loads(tmp_path):
    """Negative control for the refusals above: the same deep copy, left intact, loads."""
    model = lightgbm_model("identity")
    save_model(_crafted(model, "left", model.ensemble.left.copy()), tmp_path / "ok.pkl")
    assert isinstance(load_model(tmp_path / "ok.pkl"), TreeStageModel)


def test_verify_and_inspect_on_a_tree_export(tmp_path):
    export_model(lightgbm_model("sigmoid"), tmp_path / "out")
    rep = verify_export(tmp_path / "out", use_c=False)
    assert rep.ok and len(rep.checks) == len(lightgbm_model("sigmoid").stages)
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "out"), "--no-c"])
    assert r.exit_code == 0, r.output
    assert "every tree-stage graph is byte-identical" in r.output
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "out")])
    assert r.exit_code == 0 and "carried state of width 1" in r.output and "new groups" in r.output


def _export_with_edited_trees(tmp_path, attribute: str, edit):
    """A tree export whose stage-1 TreeEnsembleRegressor attribute was edited, every checksum recomputed."""
    import onnx

    out = tmp_path / "out"
    export_model(lightgbm_model("identity"), out)
    m = json.loads((out / "manifest.json").read_text())
    p = m["prefixes"][1]
    g = onnx.load(str(out / p["file"]))
    node = next(n for n in g.graph.node if n.op_type == "TreeEnsembleRegressor")
    edit(next(a for a in node.attribute if a.name == attribute))
    (out / p["file"]).write_bytes(g.SerializeToString())
    p["sha256"] = sha256_file(out / p["file"])
    m["manifest_sha256"] = manifest_checksum(m)
    (out / "manifest.json").write_bytes(dump_manifest(m))
    return out


def test_verify_refuses_a_tampered_stage_graph_with_recomputed_checksums(tmp_path):
    def average(att):
        att.s = b"AVERAGE"  # a graph edgeseq would never write, though every tree is still readable

    out = _export_with_edited_trees(tmp_path, "aggregate_function", average)
    with pytest.raises(IntegrityError, match="differs from the stage graph edgeseq generates"):
        verify_export(out, use_c=False)


def test_verify_catches_a_runtime_that_drops_the_state(tmp_path, monkeypatch):
    """Negative control for verify's comparison: a runtime feeding a zero state fails the check."""
    from edgeseq.runtime import model as runtime_model

    export_model(lightgbm_model("identity"), tmp_path / "out")
    real = runtime_model.ExportedModel.run_stages

    def forgetful(self, arrays, j):
        outs, finite = real(self, arrays, j)
        if j >= 2:
            outs, finite = self._runners[j].call(arrays[:self._counts[j]]
                                                 + [np.zeros((arrays[0].shape[0], self._state_width), np.float32)],
                                                 arrays[0].shape[0])
        return outs, finite

    monkeypatch.setattr(runtime_model.ExportedModel, "run_stages", forgetful)
    # predict runs the stage chain (not the fused graph, whose wiring tests/test_runtime_fuse.py checks)
    monkeypatch.setattr(runtime_model.ExportedModel, "_fuse", lambda self, j: None)
    rep = verify_export(tmp_path / "out", use_c=False)
    assert not rep.ok and [c.prefix for c in rep.checks if not c.ok] == list(range(2, len(rep.checks)))


@pytest.mark.parametrize("kind", ["identity", "softmax"])
def test_verify_compares_numpy_onnxruntime_and_c_per_stage(kind, tmp_path):
    """The C column of a tree export: regenerated C, compiled, within the bound at every stage."""
    import shutil
    if shutil.which("gcc") is None and shutil.which("clang") is None and shutil.which("cc") is None:
        pytest.skip("no C compiler")
    model = lightgbm_model(kind)
    export_model(model, tmp_path / "out")
    rep = verify_export(tmp_path / "out", require_c=True)
    assert rep.ok and rep.c_note is None and len(rep.checks) == len(model.stages)
    assert all(c.c_ratio is not None and c.c_ratio <= 1.0 for c in rep.checks)
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "out"), "--require-c"])
    assert r.exit_code == 0, r.output


def test_verify_refuses_edited_c_in_a_tree_export_before_compiling(tmp_path):
    """Negative control: C that came inside the export is never compiled; an edit is refused."""
    export_model(lightgbm_model("identity"), tmp_path / "out")
    src = tmp_path / "out" / "edgeseq_model.c"
    src.write_text(src.read_text() + "\n/* extra */\n")
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    next(f for f in m["files"] if f["file"] == src.name)["sha256"] = sha256_file(src)
    m["manifest_sha256"] = manifest_checksum(m)
    (tmp_path / "out" / "manifest.json").write_bytes(dump_manifest(m))
    with pytest.raises(IntegrityError, match="differs from the C model edgeseq generates"):
        verify_export(tmp_path / "out", require_c=True)


def test_cli_run_on_a_tree_export_uses_the_last_stage_each_row_completes(tmp_path):
    model = lightgbm_model("identity")
    export_model(model, tmp_path / "out")
    X, _ = data(6, seed=23)
    order = model.groups_required(len(model.stages) - 1)
    X[1, model.group_columns[order[-1]]] = np.nan     # last group missing -> the stage before
    X[2, model.group_columns[order[0]]] = np.nan      # first group missing -> the prior
    np.savez(tmp_path / "rows.npz", X=X)
    r = CliRunner().invoke(main, ["run", str(tmp_path / "out"), str(tmp_path / "rows.npz")])
    assert r.exit_code == 0, r.output
    lines = [line.split(",") for line in r.output.strip().splitlines()[1:]]
    K = len(model.stages) - 1
    counts = np.cumsum([len(s.new_groups) for s in model.stages])
    stage_without_last = int(np.searchsorted(counts, len(order) - 1, side="right") - 1)
    assert [int(line[1]) for line in lines] == [K, stage_without_last, 0, K, K, K]
    for line, x in zip(lines, X):
        k = int(line[1])
        assert float(line[3]) == pytest.approx(model.predict(x[None], stage=k)[0, 0], abs=1e-5)


@pytest.mark.parametrize("attribute, value, match", [
    ("nodes_treeids", 10**9, "a node belongs to a tree outside"),
    ("nodes_featureids", 10**6, "a split reads a column outside the stage's inputs"),
    ("nodes_truenodeids", 10**6, "child points backwards or outside"),
])
def test_verify_refuses_crafted_tree_ids_in_a_graph_quickly(tmp_path, attribute, value, match):
    """A resealed graph whose ids point anywhere is one IntegrityError, found before any loop over them."""
    import time

    def set_first(att):
        att.ints[0] = value

    out = _export_with_edited_trees(tmp_path, attribute, set_first)
    t0 = time.perf_counter()
    with pytest.raises(IntegrityError, match=match):
        verify_export(out, use_c=False)
    assert time.perf_counter() - t0 < 5


def test_verify_refuses_a_manifest_whose_tree_counts_disagree_with_the_graphs(tmp_path):
    from hostile import reseal

    export_model(lightgbm_model("identity"), tmp_path / "out")
    reseal(tmp_path / "out", lambda m: m["prefixes"][1].update(n_nodes=m["prefixes"][1]["n_nodes"] + 1))
    with pytest.raises(IntegrityError, match="stage 1's graph holds"):
        verify_export(tmp_path / "out", use_c=False)


def test_readers_of_the_other_kind_refuse_clearly(tmp_path):
    from edgeseq.export.kinds.affine.reader import sequence_from_export

    export_model(lightgbm_model("identity"), tmp_path / "out")
    with pytest.raises(IntegrityError, match="holds tree stages, not affine prefixes"):
        sequence_from_export(tmp_path / "out")
    save_model(lightgbm_model("identity"), tmp_path / "m.pkl")
    from edgeseq.io.model_io import as_sequence

    with pytest.raises(ModelFormatError, match="holds a tree model"):
        as_sequence(load_model(tmp_path / "m.pkl"))


def test_a_bare_tree_ensemble_is_not_a_model_file(tmp_path):
    import pickle

    (tmp_path / "ens.pkl").write_bytes(pickle.dumps(lightgbm_model("identity").ensemble))
    with pytest.raises(ModelFormatError, match="bare TreeEnsemble"):
        load_model(tmp_path / "ens.pkl")


@pytest.mark.parametrize("kind", ["identity", "softmax"])
def test_make_check_model_runs_the_firmware_demo_on_a_tree_export(kind, tmp_path):
    """The firmware-shaped demo, the interrupt test and the fuzzer (`make -C runtime_c check-model`,
    gcc and clang under ASan/UBSan) run on an `edgeseq export` of a tree model as on a linear one."""
    import re
    import shutil
    import subprocess

    from edgeseq.export.c_harness import runtime_dir
    make = shutil.which("make")
    if make is None or (shutil.which("gcc") is None and shutil.which("clang") is None):
        pytest.skip("make or a C compiler is missing")
    model = lightgbm_model(kind)
    export_model(model, tmp_path / "out")
    proc = subprocess.run([make, "--no-print-directory", "-C", str(runtime_dir()), "check-model",
                           f"MODEL_DIR={tmp_path / 'out'}", f"BUILD={tmp_path / 'build'}", "FUZZ_SECONDS=1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    answers = [int(a) for a in re.findall(r"answer at tick \d+: prefix (\d+) of (?:\d+)", proc.stdout)]
    assert answers and all(0 <= a < len(model.stages) for a in answers), proc.stdout[-2000:]
    assert "torn 0" in proc.stdout and "no finding" in proc.stdout
