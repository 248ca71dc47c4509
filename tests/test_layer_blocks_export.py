"""Layer-block exports end to end: `export_model` writes one graph per stage, the manifest
(``stage_kind: "layer_blocks"``) and the C model; `ExportedModel` and `AnytimeSession` run them with the
state chained stage to stage and agree with numpy (float64) within float32 rounding; the budget rule
skips ``commit: false`` stages in every runtime; re-exporting gives the same bytes; a manifest whose
stage entries were edited is refused; a fitted AnytimeNet estimator exports, saves and loads."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from c_support import boundary_budgets
from layer_models import rich_model, rows

from edgeseq import AnytimeNetClassifier
from edgeseq.errors import IntegrityError
from edgeseq.export.writer import export_model
from edgeseq.format import MANIFEST, dump_manifest, manifest_checksum, read_verified
from edgeseq.runtime import AnytimeSession, ExportedModel


def rel_err(got, ref) -> float:
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))


def feats(model, X) -> dict:
    return {name: X[:, model.group_columns[g]] for g, name in enumerate(model.group_names)}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model = rich_model("softmax", seed=4)
    out = tmp_path_factory.mktemp("lb") / "net"
    manifest = export_model(model, out, c_prefix="net")
    return model, out, manifest


def test_manifest_describes_every_stage(exported):
    model, out, m = exported
    assert m["stage_kind"] == "layer_blocks"
    assert [p["commit"] for p in m["prefixes"]] == [s.commit for s in model.stages]
    assert [p["width"] for p in m["prefixes"]] == [s.width for s in model.stages]
    assert [p["macs"] for p in m["prefixes"]] == model.stage_macs.tolist()
    assert [p["inputs"] for p in m["prefixes"]] == [["n"], ["flat"], ["imu", "state_in"], ["imu", "state_in"],
                                                     ["flat", "mic", "pair"], ["state_in"]]
    assert [g.get("shape") for g in m["groups"]] == [None, [2, 9], [1, 6], None]
    np.testing.assert_array_equal([p["cum_cost"] for p in m["prefixes"]], model.cum_cost)
    assert read_verified(out)["manifest_sha256"] == m["manifest_sha256"]


def test_exported_model_matches_numpy_at_every_stage(exported):
    model, out, _ = exported
    X = rows(300, seed=5)
    em = ExportedModel(out)
    for k in range(len(model.stages)):
        got = em.predict(feats(model, X), prefix=k)
        ref = model.predict(X, stage=k)
        assert rel_err(got.proba, ref) <= 1e-5, f"stage {k}"
        assert np.mean(got.label_index == ref.argmax(axis=1)) >= 0.999


def test_budget_rule_skips_non_committing_stages_everywhere(exported):
    model, out, _ = exported
    em = ExportedModel(out)
    budgets = boundary_budgets(model.cum_cost, np.random.default_rng(1))
    want = [model.prefix_for_budget(b) for b in budgets]
    assert [em.prefix_for_budget(b) for b in budgets] == want
    assert 3 not in want and 2 in want  # stage 3 does not commit
    X = rows(4, seed=6)
    for b in budgets[::3]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # budgets below the first stage warn, by design
            got = em.predict(feats(model, X), budget=b)
        assert got.prefix == model.prefix_for_budget(b)
        assert rel_err(got.proba, model.predict(X, budget=b)) <= 1e-5


def test_anytime_session_runs_the_stages_in_order(exported):
    model, out, _ = exported
    X = rows(1, seed=7)
    ext = {name: (lambda row, c=model.group_columns[g]: row[c]) for g, name in enumerate(model.group_names)}
    with AnytimeSession(out) as sess:
        for b in [0.0, model.cum_cost[1], model.cum_cost[3], np.nextafter(model.cum_cost[4], 0), np.inf]:
            r = sess.run(ext, budget=float(b), inputs=X[0])
            k = model.prefix_for_budget(b)
            assert r.prefix == k and r.prefix_cost == model.cum_cost[k]
            assert rel_err(r.prediction.proba, model.predict(X, stage=k)) <= 1e-5


def test_export_again_is_byte_identical(exported, tmp_path):
    model, out, _ = exported
    export_model(model, tmp_path / "net", c_prefix="net")
    for f in out.iterdir():
        assert (tmp_path / "net" / f.name).read_bytes() == f.read_bytes(), f.name


@pytest.mark.parametrize("edit", ["state_first", "reads_unpaid", "prior_no_commit", "width_zero"])
def test_edited_stage_entries_are_refused(exported, tmp_path, edit):
    _, out, m = exported
    m = json.loads(json.dumps(m))
    p = m["prefixes"]
    if edit == "state_first":
        p[2]["inputs"] = ["state_in", "imu"]
    elif edit == "reads_unpaid":
        p[1]["inputs"] = ["mic"]
    elif edit == "prior_no_commit":
        p[0]["commit"] = False
    else:
        p[4]["width"] = 0
    m["manifest_sha256"] = manifest_checksum(m)
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in out.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    (bad / MANIFEST).write_bytes(dump_manifest(m))
    with pytest.raises(IntegrityError):
        read_verified(bad)


def test_fitted_estimator_exports_and_runs(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 10))
    y = np.where(X[:, 0] + X[:, 4] * X[:, 5] > 0, "hi", "lo")
    clf = AnytimeNetClassifier([[0, 1], list(range(2, 10))], [1.0, 3.0], group_shapes=[None, (2, 4)],
                               order="given", hidden=8, max_epochs=10, random_state=0).fit(X, y)
    m = export_model(clf, tmp_path / "clf")
    assert m["outputs"]["classes"] == ["hi", "lo"] and m["stage_kind"] == "layer_blocks"
    em = ExportedModel(tmp_path / "clf")
    got = em.predict(dict(zip(em.group_names, (X[:50, :2], X[:50, 2:]))))
    assert rel_err(got.proba, clf.predict_proba(X[:50])) <= 1e-5
    assert np.mean(got.label == clf.predict(X[:50])) >= 0.98


def test_verify_compares_numpy_onnx_and_c_at_every_stage(exported):
    from edgeseq.evaluate.verify import format_report, verify_export

    model, out, _ = exported
    rep = verify_export(out, require_c=True)
    from edgeseq.export.kinds.layer_blocks.verify import FILES_LINE

    assert rep.ok and rep.files_line == FILES_LINE and rep.c_note is None
    assert [c.prefix for c in rep.checks] == list(range(len(model.stages)))
    assert all(c.c_ratio is not None and c.c_ratio <= 1 and c.onnx_ratio <= 1 for c in rep.checks)
    assert max(c.c_diff for c in rep.checks[1:]) > 0  # float32 C is not float64 numpy: the check compares
    assert "byte-identical" in format_report(rep)[0]


def _copy_with(out, tmp_path, name, edit):
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in out.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    (bad / name).write_bytes(edit((bad / name).read_bytes()))
    m = json.loads((bad / MANIFEST).read_text())
    from edgeseq.format import sha256_file
    for f in m["files"] + m["prefixes"]:
        f["sha256"] = sha256_file(bad / f["file"])
    m["manifest_sha256"] = manifest_checksum(m)
    (bad / MANIFEST).write_bytes(dump_manifest(m))
    return bad


def test_verify_refuses_c_that_edgeseq_did_not_generate(exported, tmp_path):
    from edgeseq.evaluate.verify import verify_export

    _, out, _ = exported
    bad = _copy_with(out, tmp_path, "edgeseq_model.c", lambda b: b.replace(b"ES_DTYPE_F32, net_s2_w", b"ES_DTYPE_F32, net_s2_w ", 1))
    with pytest.raises(IntegrityError, match="C model"):
        verify_export(bad)


def test_verify_catches_a_graph_whose_weights_were_changed(exported, tmp_path):
    """The graphs are the source verify reads; a changed weight makes the shipped C differ from the C
    regenerated from them."""
    import onnx
    from onnx import numpy_helper

    from edgeseq.evaluate.verify import verify_export

    _, out, m = exported
    name = m["prefixes"][2]["file"]

    def edit(data):
        g = onnx.load_from_string(data)
        t = next(t for t in g.graph.initializer if t.name == "head/V")
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * 1.5, "head/V"))
        return g.SerializeToString()

    with pytest.raises(IntegrityError, match="C model"):
        verify_export(_copy_with(out, tmp_path, name, edit))


def test_save_and_load_through_the_restricted_unpickler(tmp_path):
    import dataclasses

    from edgeseq.errors import ModelFormatError
    from edgeseq.io.model_io import load_model, save_model

    model = rich_model("softmax", seed=8)
    save_model(model, tmp_path / "m.pkl")
    back = load_model(tmp_path / "m.pkl")
    X = rows(20)
    assert np.array_equal(back.predict(X), model.predict(X))
    # a file whose arrays disagree with each other is refused on load, in one line
    inj = model.stages[2].injections[0]
    object.__setattr__(inj.conv, "W", inj.conv.W[:, :1])
    save_model(model, tmp_path / "bad.pkl")
    with pytest.raises(ModelFormatError, match="inconsistent|malformed"):
        load_model(tmp_path / "bad.pkl")
    with pytest.raises(ModelFormatError, match="bare LayerBlockStage"):
        save_model(dataclasses.replace(rich_model().stages[1]), tmp_path / "stage.pkl")
