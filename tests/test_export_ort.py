"""`edgeseq export --ort`: ORT-format graphs (onnxruntime's minimal/mobile format) and the operator
config of a reduced onnxruntime build, listed and checksummed in the manifest like every file."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from sequences import random_sequence

from edgeseq.cli import main
from edgeseq.errors import IntegrityError
from edgeseq.export.onnx_runners import prefix_feed, run_graph
from edgeseq.format import read_verified
from edgeseq.export.writer import export_model
from edgeseq.io.model_io import save_model

pytest.importorskip("onnxruntime.tools.convert_onnx_models_to_ort", reason="this onnxruntime has no ORT converter")


@pytest.mark.parametrize("link,P", [("identity", 2), ("softmax", 4)])
def test_ort_files_run_like_the_onnx_graphs(tmp_path, link, P):
    seq = random_sequence(np.random.default_rng(P), (3, 2, 4), n_outputs=P, link=link)
    out = tmp_path / "out"
    m = export_model(seq, out, ort=True)
    assert read_verified(out) == m
    X = np.random.default_rng(1).normal(size=(6, seq.n_features_in))
    for p, ort_file in zip(m["prefixes"], m["ort"]["prefixes"]):
        assert ort_file == p["file"].replace(".onnx", ".ort")
        feed = prefix_feed(m, X, p["index"])
        ref = run_graph("onnxruntime", out / p["file"], feed)
        got = run_graph("onnxruntime", out / ort_file, feed)
        assert set(got) == set(ref)
        for name in ref:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-6, atol=1e-6)
    config = (out / m["ort"]["operators_config"]).read_text()
    ops = {op for line in config.splitlines() if not line.startswith("#") for op in line.split(";")[2].split(",")}
    assert ops & {"MatMul", "Gemm"} and ("Softmax" in ops) == (link == "softmax")
    assert str(tmp_path) not in config and "/tmp" not in config  # no scratch paths in the export


def test_a_modified_ort_file_is_detected(tmp_path):
    seq = random_sequence(np.random.default_rng(0), (2, 1), n_outputs=1)
    m = export_model(seq, tmp_path / "out", ort=True)
    path = tmp_path / "out" / m["ort"]["prefixes"][1]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="sha256"):
        read_verified(tmp_path / "out")


def test_cli_ort_flag_and_default(tmp_path):
    seq = random_sequence(np.random.default_rng(0), (2, 1), n_outputs=1)
    save_model(seq, tmp_path / "m.pkl")
    res = CliRunner().invoke(main, ["export", str(tmp_path / "m.pkl"), str(tmp_path / "o"), "--ort", "--quiet"])
    assert res.exit_code == 0 and res.output == "", res.output  # the converter's chatter does not leak
    assert len(read_verified(tmp_path / "o")["ort"]["prefixes"]) == seq.n_prefixes
    shown = CliRunner().invoke(main, ["inspect", str(tmp_path / "o")]).output
    assert "batch size dynamic; ORT-format files yes (operators: required_operators.config)" in shown
    res = CliRunner().invoke(main, ["export", str(tmp_path / "m.pkl"), str(tmp_path / "d"), "--quiet"])
    assert res.exit_code == 0 and read_verified(tmp_path / "d")["ort"] is None
    assert not list((tmp_path / "d").glob("*.ort"))
