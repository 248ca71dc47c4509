"""`edgeseq verify` and `edgeseq run`: integrity (a flipped byte in any file fails), the numpy vs
onnxruntime vs C comparison (and that it can fail), data input, CSV output, clean errors."""

import csv
import hashlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import numpy_helper

from edgeseq.cli import main
from edgeseq.format import dump_manifest, manifest_checksum, read_verified
from edgeseq.runtime.session import AnytimeSession
from edgeseq.evaluate import verify as runtime_verify
from sequences import random_sequence
from test_runtime_support import exported, group_features

HAVE_CC = any(shutil.which(c) for c in ("gcc", "cc", "clang"))
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler installed")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    base = tmp_path_factory.mktemp("cli_rt")
    out = {}
    for k, (link, P) in enumerate([("identity", 1), ("identity", 2), ("sigmoid", 1), ("softmax", 3)]):
        seq = random_sequence(np.random.default_rng(20 + k), (2, 3, 1), n_outputs=P, link=link)
        out[f"{link}{P}"] = (seq, exported(seq, base, f"{link}{P}"))
    return out


def table_rows(output):
    return [ln for ln in output.splitlines() if ln.strip().endswith((" ok", "MISMATCH"))]


@needs_cc
@pytest.mark.parametrize("kind", ["identity1", "identity2", "sigmoid1", "softmax3"])
def test_verify_passes_with_c_column(exports, kind):
    seq, out = exports[kind]
    r = invoke("verify", out, "--require-c")
    assert r.exit_code == 0, r.output
    rows = table_rows(r.output)
    assert len(rows) == seq.n_prefixes and all(ln.endswith(" ok") for ln in rows)
    assert "C column skipped" not in r.output
    assert "integrity ok" in r.output


def test_verify_skips_c_without_a_compiler_unless_required(exports, tmp_path, monkeypatch):
    _, out = exports["identity1"]
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler on PATH
    monkeypatch.delenv("CC", raising=False)
    r = invoke("verify", out)
    assert r.exit_code == 0 and "C column skipped" in r.output
    r = invoke("verify", out, "--require-c")
    assert isinstance(r.exception, SystemExit) and r.exit_code != 0 and "no C compiler" in r.output


def _flip(path: Path, pos: int, mask: int):
    data = bytearray(path.read_bytes())
    data[pos] ^= mask
    path.write_bytes(bytes(data))


def test_a_single_changed_byte_anywhere_fails_verify(exports, tmp_path):
    """Every byte of the smallest file, and 32 positions spread over every other file of out/ (first
    and last byte included), each flipped on its own with varying bit masks, must fail `verify`."""
    _, src = exports["sigmoid1"]
    out = tmp_path / "copy"
    shutil.copytree(src, out)
    files = sorted(p for p in out.iterdir())
    assert {p.name for p in files} >= {"manifest.json", "edgeseq_model.h", "edgeseq_model.c", "prefix_000.onnx"}
    smallest = min(files, key=lambda p: p.stat().st_size)
    for f in files:
        original = f.read_bytes()
        positions = range(len(original)) if f == smallest else \
            sorted(set(np.linspace(0, len(original) - 1, 32).astype(int)))
        for k, pos in enumerate(positions):
            _flip(f, pos, (0x01, 0x20, 0x80, 0xFF)[k % 4])
            r = invoke("verify", out, "--no-c")
            assert r.exit_code != 0, (f.name, pos)
            assert isinstance(r.exception, SystemExit) and "IntegrityError" in r.output
            f.write_bytes(original)
    assert invoke("verify", out, "--no-c").exit_code == 0  # restored: passes again


def test_extra_or_missing_file_fails_verify(exports, tmp_path):
    _, src = exports["identity1"]
    out = tmp_path / "copy"
    shutil.copytree(src, out)
    (out / "notes.txt").write_text("hi")
    r = invoke("verify", out, "--no-c")
    assert r.exit_code != 0 and "notes.txt" in r.output
    (out / "notes.txt").unlink()
    (out / "prefix_001.onnx").unlink()
    r = invoke("verify", out, "--no-c")
    assert r.exit_code != 0 and "prefix_001.onnx" in r.output


def _rewrite_consistently(out: Path, fname: str, scale: float):
    """Change a prefix graph's weights and re-seal the manifest: integrity passes, numbers are wrong
    (what a buggy exporter would produce)."""
    model = onnx.load(str(out / fname))
    for t in model.graph.initializer:
        if t.name.startswith("W/"):
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(scale), t.name))
    (out / fname).write_bytes(model.SerializeToString())
    m = json.loads((out / "manifest.json").read_text())
    for p in m["prefixes"]:
        if p["file"] == fname:
            p["sha256"] = hashlib.sha256((out / fname).read_bytes()).hexdigest()
    m["manifest_sha256"] = manifest_checksum(m)
    (out / "manifest.json").write_bytes(dump_manifest(m))
    read_verified(out)  # integrity is intact


@needs_cc
def test_verify_refuses_files_edgeseq_would_not_generate(exports, tmp_path):
    """Graphs rewritten with consistent checksums: the shipped C model no longer matches what edgeseq
    generates from the (new) weights, so verify stops before compiling or loading anything."""
    _, src = exports["identity2"]
    out = tmp_path / "copy"
    shutil.copytree(src, out)
    _rewrite_consistently(out, "prefix_002.onnx", 1.001)
    r = invoke("verify", out)
    assert r.exit_code != 0 and "IntegrityError" in r.output and "edgeseq_model" in r.output


@needs_cc
def test_verify_reports_c_mismatch_with_nonzero_exit(exports, monkeypatch):
    """The C column can fail: perturb what the compiled (regenerated) C returns at one prefix."""
    from edgeseq.export import c_harness

    _, out = exports["identity2"]
    real = c_harness.run_c

    def skewed(*args, **kwargs):
        run = real(*args, **kwargs)
        run.predictions[2] = run.predictions[2] * 1.001
        return run
    monkeypatch.setattr(c_harness, "run_c", skewed)
    r = invoke("verify", out)
    assert r.exit_code != 0 and "VerifyMismatch" in r.output
    rows = table_rows(r.output)
    assert rows[2].endswith("MISMATCH") and all(rows[j].endswith(" ok") for j in (0, 1, 3))


def test_verify_reports_onnx_mismatch(exports, monkeypatch):
    """The onnxruntime column can fail too: perturb what the session returns at one prefix."""
    seq, out = exports["softmax3"]
    real = AnytimeSession.predict

    def skewed(self, feats, budget=None, prefix=None):
        pred = real(self, feats, budget=budget, prefix=prefix)
        if prefix == 1:
            pred.proba = pred.proba + np.float32(1e-4)
        return pred
    monkeypatch.setattr(AnytimeSession, "predict", skewed)
    rep = runtime_verify.verify_export(out, use_c=False)
    assert [c.ok for c in rep.checks] == [True, False, True, True]
    assert rep.checks[1].onnx_ratio > 1


def test_verify_with_data_file(exports, tmp_path):
    seq, out = exports["identity1"]
    X = np.random.default_rng(3).normal(size=(20, seq.n_features_in))
    np.savez(tmp_path / "d.npz", X=X)
    r = invoke("verify", out, "--data", tmp_path / "d.npz", "--no-c")
    assert r.exit_code == 0 and "on 20 rows" in r.output
    X[0, seq.group_columns[0][0]] = np.nan
    np.savez(tmp_path / "bad.npz", X=X)
    r = invoke("verify", out, "--data", tmp_path / "bad.npz", "--no-c")
    assert r.exit_code != 0 and "complete rows" in r.output


# ---------------------------------------------------------------------------- run
def write_csv(path, X, names, extra=True):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow((["id"] if extra else []) + list(names) + (["target"] if extra else []))
        for i, row in enumerate(X):
            cells = ["" if np.isnan(v) else repr(float(v)) for v in row]
            w.writerow(([f"r{i}"] if extra else []) + cells + (["0"] if extra else []))


def read_out(text):
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], rows[1:]


def test_run_csv_per_row_prefix_and_values(exports, tmp_path):
    seq, out = exports["identity2"]
    sess = AnytimeSession(out)
    X = np.random.default_rng(5).normal(size=(9, seq.n_features_in))
    X[2, seq.group_columns[seq.order[1]][0]] = np.nan  # second group missing -> prefix 1
    X[5, seq.group_columns[seq.order[0]][0]] = np.nan  # first group missing -> prefix 0
    names = [f"f{i}" for i in range(seq.n_features_in)]
    write_csv(tmp_path / "d.csv", X, names)
    r = invoke("run", out, tmp_path / "d.csv", "--ignore", "id", "--ignore", "target")
    assert r.exit_code == 0, r.output
    head, rows = read_out(r.output)
    assert head == ["row", "prefix", "cum_cost", "y0", "y1"]
    prefixes = [int(row[1]) for row in rows]
    assert prefixes == [3, 3, 1, 3, 3, 0, 3, 3, 3]
    assert [int(row[0]) for row in rows] == list(range(9))  # the row of the input, not of its prefix's subset
    for i, row in enumerate(rows):
        j = prefixes[i]
        feats = {k: v[i:i + 1] for k, v in group_features(seq, X).items()
                 if k in [seq.group_names[g] for g in seq.order[:j]]}
        want = sess.predict(feats, prefix=j)[0]
        assert np.array_equal(np.array(row[3:], dtype=np.float32), want)  # %.9g round-trips float32
        assert float(row[2]) == pytest.approx(seq.cum_cost[j])


def test_run_budget_and_output_file_for_classifier(exports, tmp_path):
    seq, out = exports["softmax3"]
    X = np.random.default_rng(6).normal(size=(5, seq.n_features_in))
    np.savez(tmp_path / "d.npz", X=X)
    budget = seq.cum_cost[2]
    r = invoke("run", out, tmp_path / "d.npz", "--budget", budget, "-o", tmp_path / "p.csv")
    assert r.exit_code == 0
    head, rows = read_out((tmp_path / "p.csv").read_text())
    assert head == ["row", "prefix", "cum_cost", "label", "proba_c0", "proba_c1", "proba_c2"]
    want = AnytimeSession(out).predict(group_features(seq, X), prefix=2)
    assert [row[3] for row in rows] == want.label.tolist()
    assert np.array_equal(np.array([row[4:] for row in rows], dtype=np.float32), want.proba)
    assert {row[1] for row in rows} == {"2"}


@pytest.mark.parametrize("args, match", [
    (["--budget", "-1"], "budget"),
])
def test_run_errors_are_one_line(exports, tmp_path, args, match):
    seq, out = exports["identity1"]
    np.savez(tmp_path / "d.npz", X=np.zeros((2, seq.n_features_in)))
    r = invoke("run", out, tmp_path / "d.npz", *args)
    assert isinstance(r.exception, SystemExit) and r.exit_code != 0 and match in r.output


def test_run_data_errors(exports, tmp_path):
    seq, out = exports["identity1"]
    X = np.zeros((2, seq.n_features_in))
    X[0, seq.group_columns[0][0]] = np.inf
    np.savez(tmp_path / "inf.npz", X=X)
    r = invoke("run", out, tmp_path / "inf.npz")
    assert r.exit_code != 0 and "NaN/Inf" in r.output
    write_csv(tmp_path / "pos.csv", np.zeros((2, seq.n_features_in)), [f"f{i}" for i in range(seq.n_features_in)])
    r = invoke("run", out, tmp_path / "pos.csv")
    assert r.exit_code != 0 and "--ignore" in r.output
    (tmp_path / "x.json").write_text("{}")
    assert "unsupported data format" in invoke("run", out, tmp_path / "x.json").output


def test_run_matches_columns_by_name_when_the_model_knows_them(tmp_path):
    seq = random_sequence(np.random.default_rng(9), (2, 1))
    seq.feature_names = tuple(f"col {i}" for i in range(seq.n_features_in))
    out = exported(seq, tmp_path)
    X = np.random.default_rng(1).normal(size=(4, seq.n_features_in))
    perm = np.random.default_rng(2).permutation(seq.n_features_in)
    write_csv(tmp_path / "d.csv", X[:, perm], [seq.feature_names[i] for i in perm])  # shuffled + extras
    r = invoke("run", out, tmp_path / "d.csv")
    assert r.exit_code == 0, r.output
    _, rows = read_out(r.output)
    want = AnytimeSession(out).predict(group_features(seq, X))
    assert np.array_equal(np.array([row[3] for row in rows], dtype=np.float32), want)


def test_real_subprocess_run_and_verify(exports, tmp_path):
    seq, out = exports["sigmoid1"]
    np.savez(tmp_path / "d.npz", X=np.ones((3, seq.n_features_in)))
    exe = [sys.executable, "-c", "from edgeseq.cli import main; main()"]
    p = subprocess.run(exe + ["run", str(out), str(tmp_path / "d.npz")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "row,prefix,cum_cost,label,proba_c0,proba_c1"
    p = subprocess.run(exe + ["verify", str(out), "--no-c"], capture_output=True, text=True)
    assert p.returncode == 0 and "all prefixes agree" in p.stdout
