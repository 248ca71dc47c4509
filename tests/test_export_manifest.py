"""export_model + manifest: schema, checksums (recomputed independently), tamper detection,
round trip through sequence_from_export, float32 refusal, atomic and non-clobbering writes."""

from __future__ import annotations

import hashlib
import json
import os

import jsonschema
import numpy as np
import pytest
from sequences import random_sequence

from edgeseq.errors import EdgeseqError, ExportError, IntegrityError
from edgeseq.export.kinds.affine import c_float as affine_c_float
from edgeseq.format import load_schema, read_verified
from edgeseq.export.kinds.affine.reader import sequence_from_export
from edgeseq.export.kinds.affine.writer import sample_inputs
from edgeseq.export.writer import export_model


@pytest.fixture
def seq():
    s = random_sequence(np.random.default_rng(11), (2, 3, 1, 4), n_outputs=2)
    s.feature_mean = np.linspace(-5, 100, s.n_features_in)
    s.feature_std = np.linspace(0.1, 20, s.n_features_in)
    s.train_metrics = [{"explained_variance": float(v)} for v in np.linspace(0, 0.9, s.n_prefixes)]
    return s


@pytest.fixture
def out(tmp_path, seq):
    d = tmp_path / "out"
    export_model(seq, d, model_name="demo")
    return d


def test_manifest_checksums_recomputed_independently(out):
    raw = json.loads((out / "manifest.json").read_text())
    jsonschema.Draft202012Validator(load_schema()).validate(raw)
    body = {k: v for k, v in raw.items() if k != "manifest_sha256"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert hashlib.sha256(canon).hexdigest() == raw["manifest_sha256"]
    listed = [(p["file"], p["sha256"]) for p in raw["prefixes"]] + [(f["file"], f["sha256"]) for f in raw["files"]]
    assert sorted([f for f, _ in listed] + ["manifest.json"]) == sorted(os.listdir(out))
    for f, sha in listed:
        assert hashlib.sha256((out / f).read_bytes()).hexdigest() == sha
    assert read_verified(out) == raw
    assert raw["prefixes"][0]["inputs"] == ["n"] and raw["c"]["prefix"] == "demo"
    assert [g["cum_cost"] for g in raw["groups"]] == [p["cum_cost"] for p in raw["prefixes"][1:]]


def _files(out):
    return sorted(os.listdir(out))


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_flipping_any_byte_of_any_file_is_detected(out, where):
    for name in _files(out):
        path = out / name
        data = bytearray(path.read_bytes())
        pos = {"start": 0, "middle": len(data) // 2, "end": len(data) - 1}[where]
        original = data[pos]
        data[pos] ^= 0x01
        path.write_bytes(bytes(data))
        with pytest.raises(IntegrityError, match="manifest|" + name.replace(".", r"\.")):
            read_verified(out)
        data[pos] = original
        path.write_bytes(bytes(data))
        read_verified(out)  # restored: valid again


def test_semantic_manifest_edits_are_detected(out):
    path = out / "manifest.json"
    good = path.read_text()
    m = json.loads(good)
    m["groups"][0]["cost"] = 123.0  # content changed, checksum not updated
    path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    with pytest.raises(IntegrityError, match="manifest_sha256"):
        read_verified(out)
    path.write_text(good.replace("\n", "\r\n"))  # same content, different bytes
    with pytest.raises(IntegrityError, match="byte-identical"):
        read_verified(out)
    m = json.loads(good)
    m["format_version"] = 3
    path.write_text(json.dumps(m))
    with pytest.raises(IntegrityError, match="schema at format_version"):
        read_verified(out)
    path.write_text("{not json")
    with pytest.raises(IntegrityError, match="not valid JSON"):
        read_verified(out)


def test_missing_extra_and_unlisted_files(out):
    (out / "notes.txt").write_text("hi")
    with pytest.raises(IntegrityError, match="not listed.*notes.txt"):
        read_verified(out)
    (out / "notes.txt").unlink()
    (out / "sub").mkdir()
    with pytest.raises(IntegrityError, match="sub"):
        read_verified(out)
    (out / "sub").rmdir()
    (out / "prefix_002.onnx").unlink()
    with pytest.raises(IntegrityError, match="prefix_002.onnx.*missing"):
        read_verified(out)
    with pytest.raises(IntegrityError, match="missing"):
        read_verified(out.parent / "nowhere")


def test_sequence_round_trip(out, seq):
    back = sequence_from_export(out)
    assert back.order.tolist() == seq.order.tolist() and back.group_names == seq.group_names
    np.testing.assert_array_equal(back.costs, seq.costs)
    for a, b in zip(back.group_columns, seq.group_columns):
        np.testing.assert_array_equal(a, b)
    for j in range(seq.n_prefixes):  # exactly the float32 values, upcast
        np.testing.assert_array_equal(back.coefs[j], seq.coefs[j].astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(back.intercepts, seq.intercepts.astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(back.feature_mean, seq.feature_mean)
    np.testing.assert_array_equal(back.feature_std, seq.feature_std)
    assert back.train_metrics == seq.train_metrics and back.output_names == seq.output_names
    assert back.y_was_1d == seq.y_was_1d and back.link == seq.link and back.classes is None


def test_classifier_round_trip_keeps_classes(tmp_path):
    s = random_sequence(np.random.default_rng(2), (2, 2), n_outputs=3, link="softmax")
    export_model(s, tmp_path / "o")
    back = sequence_from_export(tmp_path / "o")
    assert back.classes.tolist() == s.classes.tolist() and back.link == "softmax"


def test_float32_difference_is_reported_on_training_statistics(out, seq):
    """Independent check: onnxruntime on rows from the stored statistics shows differences of the
    size the manifest reports (the float32 rounding of a model whose inputs are ~100)."""
    import onnxruntime as ort

    m = read_verified(out)
    X = sample_inputs(seq)
    assert abs(X.mean(axis=0) - seq.feature_mean).max() < 5 * seq.feature_std.max() / np.sqrt(len(X))
    for p in m["prefixes"][1:]:
        j = p["index"]
        sess = ort.InferenceSession(str(out / p["file"]), providers=["CPUExecutionProvider"])
        feed = {g["input_name"]: X[:, g["columns"]].astype(np.float32) for g in m["groups"][:j]}
        ort_diff = np.abs(sess.run(["y"], feed)[0] - seq.linear(X, j)).max()
        assert 0 < p["float32_max_abs_diff"]
        assert ort_diff / 8 < p["float32_max_abs_diff"] < ort_diff * 8


def test_overflowing_coefficients_are_refused(tmp_path, seq):
    coefs = list(seq.coefs)
    coefs[2] = coefs[2].copy()
    coefs[2][0, 0] = 1e39
    seq.coefs = tuple(coefs)
    with pytest.raises(ExportError, match="prefix 2.*float32"):
        export_model(seq, tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_refuses_non_empty_dir_and_force_replaces_only_an_earlier_export(tmp_path, seq):
    d = tmp_path / "o"
    d.mkdir()
    (d / "notes.txt").write_text("user data")
    (d / "sub").mkdir()
    (d / "sub" / "more.txt").write_text("more")
    with pytest.raises(ExportError, match="not empty.*--force"):
        export_model(seq, d)
    with pytest.raises(ExportError, match="has no manifest.json.*nothing was deleted"):
        export_model(seq, d, force=True)  # --force never deletes an arbitrary directory
    assert (d / "notes.txt").read_text() == "user data" and (d / "sub" / "more.txt").read_text() == "more"
    e = tmp_path / "e"
    e.mkdir()
    export_model(seq, e, force=True)  # an empty directory is fine
    first = read_verified(e)
    seq.costs = seq.costs * 2  # an earlier export is replaced by the new one
    export_model(seq, e, force=True)
    assert read_verified(e)["groups"][0]["cost"] == 2 * first["groups"][0]["cost"]
    assert sorted(os.listdir(tmp_path)) == ["e", "o"]  # no temporary or backup directories left


@pytest.mark.parametrize("change", ["notes", "subdir", "format", "garbage"])
def test_force_refuses_an_export_with_foreign_entries(tmp_path, seq, change):
    d = tmp_path / "o"
    export_model(seq, d)
    if change == "notes":
        (d / "notes.txt").write_text("mine")
    elif change == "subdir":
        (d / "sub").mkdir()
    else:
        m = json.loads((d / "manifest.json").read_text())
        m["format"] = "something-else"
        (d / "manifest.json").write_text("{" if change == "garbage" else json.dumps(m))
    before = sorted(os.listdir(d))
    why = {"notes": "does not list: notes.txt", "subdir": "does not list: sub/",
           "format": 'without "format": "edgeseq-export"', "garbage": "not readable JSON"}[change]
    with pytest.raises(ExportError, match=why):
        export_model(seq, d, force=True)
    assert sorted(os.listdir(d)) == before


def test_crash_mid_export_leaves_nothing_that_looks_valid(tmp_path, seq, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("simulated crash while writing C")

    monkeypatch.setattr(affine_c_float, "write_c_model", boom)
    with pytest.raises(RuntimeError, match="simulated"):
        export_model(seq, tmp_path / "o")
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    export_model(seq, tmp_path / "o")
    before = {f: (tmp_path / "o" / f).read_bytes() for f in _files(tmp_path / "o")}
    monkeypatch.setattr(affine_c_float, "write_c_model", boom)
    with pytest.raises(RuntimeError):
        export_model(seq, tmp_path / "o", force=True)
    assert {f: (tmp_path / "o" / f).read_bytes() for f in _files(tmp_path / "o")} == before
    assert sorted(os.listdir(tmp_path)) == ["o"]


def test_bad_c_prefix_is_a_clear_error(tmp_path, seq):
    with pytest.raises(EdgeseqError, match="C identifier"):
        export_model(seq, tmp_path / "o", c_prefix="my-model")
    export_model(seq, tmp_path / "o", c_prefix="robot_arm")
    assert read_verified(tmp_path / "o")["c"]["prefix"] == "robot_arm"
    assert "robot_arm" in (tmp_path / "o" / "edgeseq_model.h").read_text()


def test_checksums_are_not_a_signature_but_inconsistent_graphs_are_caught(out):
    """Someone who swaps graphs AND recomputes every sum passes read_verified (integrity, not
    authenticity, as documented); sequence_from_export still notices graphs that disagree."""
    from edgeseq.format import dump_manifest, manifest_checksum, sha256_file

    (out / "prefix_001.onnx").write_bytes((out / "prefix_002.onnx").read_bytes())
    m = json.loads((out / "manifest.json").read_text())
    m["prefixes"][1]["sha256"] = sha256_file(out / "prefix_001.onnx")
    m["manifest_sha256"] = manifest_checksum(m)
    (out / "manifest.json").write_bytes(dump_manifest(m))
    read_verified(out)
    with pytest.raises(IntegrityError, match="prefix_001.onnx"):
        sequence_from_export(out)


def _rehash(out, edit) -> None:
    """Edit manifest.json and recompute its checksum: what a careless tool (or an attacker) produces,
    invisible to the sha256 checks."""
    from edgeseq.format import dump_manifest, manifest_checksum

    m = json.loads((out / "manifest.json").read_text())
    edit(m)
    m["manifest_sha256"] = manifest_checksum(m)
    (out / "manifest.json").write_bytes(dump_manifest(m))


def _set_columns(m, k, cols):
    g = m["groups"][k]
    g["columns"], g["dim"] = cols, len(cols)
    g["column_names"] = [m["feature_names"][c] if c < len(m["feature_names"]) else "x" for c in cols]


_EDITS = {  # (link, edit, the field the error must name)
    "names_short": ("identity", lambda m: m.update(feature_names=m["feature_names"][:-1]), "feature_names has"),
    "names_repeat": ("identity", lambda m: m["feature_names"].__setitem__(1, m["feature_names"][0]),
                     "feature_names repeats"),
    "mean_long": ("identity", lambda m: m["feature_mean"].append(0.0), "feature_mean has"),
    "std_short": ("identity", lambda m: m["feature_std"].pop(), "feature_std has"),
    "column_names": ("identity", lambda m: m["groups"][0]["column_names"].reverse(), r"groups\[0\].column_names"),
    "column_out_of_range": ("identity", lambda m: _set_columns(m, 0, m["groups"][0]["columns"]
                                                               + [m["n_features_in"]]), r"groups\[0\].columns.*outside"),
    "columns_overlap": ("identity", lambda m: _set_columns(m, 1, m["groups"][0]["columns"]), r"groups\[1\].columns.*disjoint"),
    "column_repeated": ("identity", lambda m: _set_columns(m, 0, m["groups"][0]["columns"][:1] * 2), "disjoint"),
    "dim": ("identity", lambda m: m["groups"][0].update(dim=m["groups"][0]["dim"] + 1), r"groups\[0\].dim"),
    "group_name_repeat": ("identity", lambda m: m["groups"][1].update(name=m["groups"][0]["name"]), r"groups\[\].name"),
    "cost": ("identity", lambda m: m["groups"][0].update(cost=m["groups"][0]["cost"] * 1.5), r"groups\[0\].cum_cost"),
    "group_cum_cost": ("identity", lambda m: m["groups"][2].update(cum_cost=m["groups"][2]["cum_cost"] + 1),
                       r"groups\[2\].cum_cost.*running sum"),
    "prefix_cum_cost": ("identity", lambda m: m["prefixes"][2].update(cum_cost=m["prefixes"][2]["cum_cost"] * 0.5),
                        r"prefixes\[2\].cum_cost"),
    "prefix0_cum_cost": ("identity", lambda m: m["prefixes"][0].update(cum_cost=0.5), r"prefixes\[0\].cum_cost"),
    "identity_names": ("identity", lambda m: m["outputs"]["names"].append("extra"), "outputs.names"),
    "identity_classes": ("identity", lambda m: m["outputs"].update(classes=["a", "b"]), "outputs.classes"),
    "task_link": ("identity", lambda m: m.update(task="classification"), "link"),
    "c_header": ("identity", lambda m: m["c"].update(header="other.h"), "c.header"),
    "c_source": ("identity", lambda m: m["c"].update(source=m["prefixes"][0]["file"]), "c.source"),
    "sigmoid_n_outputs": ("sigmoid", lambda m: m["outputs"].update(n_outputs=2), "outputs.n_outputs"),
    "sigmoid_names": ("sigmoid", lambda m: m["outputs"]["names"].pop(), "outputs.names"),
    "sigmoid_classes": ("sigmoid", lambda m: m["outputs"]["classes"].append("c2"), "outputs.classes"),
    "softmax_classes": ("softmax", lambda m: m["outputs"]["classes"].pop(), "outputs.classes"),
    "softmax_names": ("softmax", lambda m: m["outputs"]["names"].pop(), "outputs.names"),
    "softmax_no_classes": ("softmax", lambda m: m["outputs"].update(classes=None), "outputs.classes"),
}


@pytest.mark.parametrize("case", sorted(_EDITS))
def test_self_consistent_checksums_do_not_hide_inconsistent_fields(tmp_path, case):
    link, edit, field = _EDITS[case]
    P = {"identity": 1, "sigmoid": 1, "softmax": 3}[link]
    s = random_sequence(np.random.default_rng(5), (2, 3, 1, 2), n_outputs=P, link=link)
    s.feature_names = tuple(f"col{i}" for i in range(s.n_features_in))
    s.feature_mean = np.zeros(s.n_features_in)
    s.feature_std = np.ones(s.n_features_in)
    out = tmp_path / "o"
    export_model(s, out)
    read_verified(out)
    _rehash(out, edit)
    with pytest.raises(IntegrityError, match=field):
        read_verified(out)


def test_runtime_data_reports_a_manifest_that_disagrees_with_itself(tmp_path, out):
    """read_feature_rows on a manifest dict that was never verified: a clear error, not an IndexError."""
    from edgeseq.io.feature_rows import read_feature_rows

    m = read_verified(out)
    D = m["n_features_in"]
    data = tmp_path / "d.csv"
    data.write_text(",".join(f"c{i}" for i in range(D)) + "\n" + ",".join("1" for _ in range(D)) + "\n")
    assert read_feature_rows(data, m).X.shape == (1, D)
    with pytest.raises(IntegrityError, match="feature_names has 2 entries, n_features_in is"):
        read_feature_rows(data, {**m, "feature_names": ["c0", "c1"]})
    bad = json.loads(json.dumps(m))
    bad["groups"][0]["columns"] = [D + 3]
    with pytest.raises(IntegrityError, match=f"column {D + 3}, outside"):
        read_feature_rows(data, bad)
