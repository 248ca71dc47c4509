"""Untrusted export directories (issue 11 item 2 and the manifest items): `edgeseq verify` never
compiles or runs C that came inside an export, even when every checksum was recomputed; it
regenerates the C model and graphs from the verified weights and requires byte-identical files."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner
from hostile import reseal, valid_sequence
from test_runtime_support import exported

from edgeseq.cli import main

needs_cc = pytest.mark.skipif(not any(shutil.which(c) for c in ("gcc", "cc", "clang")),
                              reason="no C compiler installed")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    return exported(valid_sequence(), tmp_path_factory.mktemp("trust_export"), "out")


def _tampered(export_dir, tmp_path, text: str):
    out = tmp_path / "out"
    shutil.copytree(export_dir, out)
    with open(out / "edgeseq_model.c", "a", encoding="ascii") as f:
        f.write(text)
    reseal(out, lambda m: None)
    return out


@needs_cc
@pytest.mark.parametrize("flags", [[], ["--no-c"], ["--require-c"]])
def test_constructor_in_shipped_c_never_runs(export_dir, tmp_path, flags):
    marker = tmp_path / "PWNED"
    out = _tampered(export_dir, tmp_path, "#include <stdlib.h>\n__attribute__((constructor)) static void pwn(void)"
                                          f' {{ if (system("touch {marker}")) {{}} }}\n')
    invoke("inspect", out)  # the checksums are consistent: integrity alone cannot tell
    r = invoke("verify", out, *flags)
    assert r.exit_code != 0 and "IntegrityError" in r.output and "edgeseq_model.c" in r.output
    assert "all prefixes agree" not in r.output
    assert not marker.exists()


@needs_cc
def test_include_of_a_local_file_is_never_compiled(export_dir, tmp_path):
    out = _tampered(export_dir, tmp_path, '#include "/etc/passwd"\n')
    r = invoke("verify", out)
    assert r.exit_code != 0 and "IntegrityError" in r.output
    assert "root:" not in r.output and len(r.output.splitlines()) <= 3


def test_edited_comment_in_header_is_refused(export_dir, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(export_dir, out)
    h = out / "edgeseq_model.h"
    h.write_text(h.read_text().replace("do not edit", "do not edit!"))
    reseal(out, lambda m: None)
    r = invoke("verify", out, "--no-c")
    assert r.exit_code != 0 and "edgeseq_model.h" in r.output


@needs_cc
def test_negative_control_untouched_export_verifies_with_c(export_dir, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(export_dir, out)
    reseal(out, lambda m: None)  # resealing an unchanged export changes nothing
    r = invoke("verify", out, "--require-c")
    assert r.exit_code == 0, r.output
    assert "byte-identical" in r.output and "all prefixes agree" in r.output


def _resealed(export_dir, tmp_path, edit):
    out = tmp_path / "out"
    shutil.copytree(export_dir, out)
    reseal(out, edit)
    return out


MANIFEST_CASES = {
    "features_1e9": lambda m: m.update(n_features_in=10**9),
    "filename_newline": lambda m: m["prefixes"][0].update(file=m["prefixes"][0]["file"] + "\n"),
    "long_bad_columns": lambda m: m["groups"][0].update(columns=list(range(10**9, 10**9 + 50_000)),
                                                        dim=50_000),
    "long_inputs": lambda m: m["prefixes"][1].update(inputs=["x" * 50] * 100_000),
}


@pytest.mark.parametrize("name", sorted(MANIFEST_CASES))
@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_resealed_manifest_is_one_short_error(export_dir, tmp_path, name, command):
    out = _resealed(export_dir, tmp_path, MANIFEST_CASES[name])
    r = invoke(command, out, *(["--no-c"] if command == "verify" else []))
    assert r.exit_code != 0 and "IntegrityError" in r.output, r.output[:500]
    assert len(r.output) < 600 and r.output.strip().count("\n") == 0


@pytest.mark.parametrize("command", ["inspect", "verify", "run"])
def test_deeply_nested_manifest_is_one_error(export_dir, tmp_path, command):
    out = tmp_path / "out"
    shutil.copytree(export_dir, out)
    path = out / "manifest.json"
    path.write_text(path.read_text().replace('"provenance": {', '"provenance": {"deep": ' + '{"a":' * 100_000
                                             + "{}" + "}" * 100_000 + ", ", 1))
    data = tmp_path / "d.csv"
    data.write_text("a\n1\n")
    args = {"inspect": [out], "verify": [out, "--no-c"], "run": [out, data]}[command]
    r = invoke(command, *args)
    assert r.exit_code != 0 and "IntegrityError" in r.output and "deep" in r.output, r.output[:300]


def test_manifest_at_the_nesting_limit_still_fails_only_on_checksum(export_dir, tmp_path):
    """Negative control for the depth check: modest nesting is judged by the other checks."""
    out = _resealed(export_dir, tmp_path, lambda m: m["provenance"].update(deep={"a": {"b": {"c": 1}}}))
    r = invoke("inspect", out)
    assert r.exit_code == 0, r.output


def test_duplicate_class_labels_are_refused_in_a_manifest(tmp_path):
    from hostile import valid_sequence

    out = exported(valid_sequence("sigmoid"), tmp_path, "sig")
    reseal(out, lambda m: m["outputs"].update(classes=["a", "a"]))
    r = invoke("inspect", out)
    assert r.exit_code != 0 and "repeats a label" in r.output


def test_graph_with_external_data_is_refused_without_reading_it(export_dir, tmp_path):
    import numpy as np
    import onnx
    from onnx import TensorProto

    out = tmp_path / "out"
    shutil.copytree(export_dir, out)
    (tmp_path / "secret.bin").write_bytes(np.arange(64, dtype=np.float32).tobytes())
    path = out / "prefix_001.onnx"
    model = onnx.load(str(path))
    t = model.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "../secret.bin"), ("offset", "0"), ("length", "8")):
        e = t.external_data.add()
        e.key, e.value = k, v
    path.write_bytes(model.SerializeToString())
    reseal(out, lambda m: None)
    r = invoke("verify", out, "--no-c")
    assert r.exit_code != 0 and "IntegrityError" in r.output and "external data" in r.output


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_lone_surrogate_in_a_manifest_is_one_error(export_dir, tmp_path, command):
    out = tmp_path / "out"
    shutil.copytree(export_dir, out)
    path = out / "manifest.json"
    text = path.read_text()
    assert '"model_name": "out"' in text
    path.write_text(text.replace('"model_name": "out"', '"model_name": "o\\udcff"'))
    r = invoke(command, out)
    assert r.exit_code != 0 and "IntegrityError" in r.output and "surrogate" in r.output
