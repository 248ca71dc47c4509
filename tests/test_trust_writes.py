"""Writes never destroy a user's file (issue 11 items 6, 10): every writer goes through
edgeseq.io.atomic, so a failure is one OutputError line and the earlier file is intact; a crash in the
middle of `export --force` leaves the old or the new export, and the next export cleans up."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner
from hostile import valid_sequence

from edgeseq.cli import main
from edgeseq.errors import OutputError
from edgeseq.export.writer import export_model
from edgeseq.io import atomic
from edgeseq.io.model_io import load_model, save_model


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _disk_full(monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(atomic.os, "fsync", full)


def test_failed_write_keeps_the_earlier_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "model.pkl"
    save_model(valid_sequence(), path)
    before = path.read_bytes()
    _disk_full(monkeypatch)
    with pytest.raises(OutputError, match="No space left") as info:
        save_model(valid_sequence("softmax", 3), path)
    assert "\n" not in str(info.value)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.pkl"]


def test_negative_control_successful_write_replaces_and_keeps_mode(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("old")
    path.chmod(0o640)
    atomic.atomic_write_text(path, "new")
    assert path.read_text() == "new" and (path.stat().st_mode & 0o777) == 0o640
    assert os.listdir(tmp_path) == ["f.txt"]


def test_exception_inside_the_block_removes_the_temporary(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("kept")
    with pytest.raises(ZeroDivisionError):
        with atomic.atomic_output(path, "w") as f:
            f.write("partial")
            1 / 0
    assert path.read_text() == "kept" and os.listdir(tmp_path) == ["x.csv"]


def _train_args(tmp_path, out):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    np.savez(tmp_path / "d.npz", X=X, y=X @ [1.0, 2.0, 3.0])
    (tmp_path / "g.json").write_text(json.dumps({"groups": [{"name": "a", "columns": [0], "cost": 1},
                                                            {"name": "b", "columns": [1, 2], "cost": 2}]}))
    return ["train", tmp_path / "d.npz", "--groups", tmp_path / "g.json", "--quiet", "-o", out]


def test_train_to_a_missing_directory_is_one_line(tmp_path):
    r = invoke(*_train_args(tmp_path, tmp_path / "nonexistent" / "m.pkl"))
    assert r.exit_code != 0 and r.output.strip().startswith("Error: OutputError: cannot write")
    assert len(r.output.strip().splitlines()) == 1


def test_train_on_a_full_disk_keeps_the_previous_model(tmp_path, monkeypatch):
    out = tmp_path / "m.pkl"
    assert invoke(*_train_args(tmp_path, out)).exit_code == 0
    before = out.read_bytes()
    _disk_full(monkeypatch)
    r = invoke(*_train_args(tmp_path, out))
    assert r.exit_code != 0 and "OutputError" in r.output and len(r.output.strip().splitlines()) == 1
    assert out.read_bytes() == before
    load_model(out)


def test_run_to_a_missing_directory_is_one_line(tmp_path):
    seq = valid_sequence()
    export_model(seq, tmp_path / "out")
    np.savez(tmp_path / "rows.npz", X=np.zeros((3, seq.n_features_in)))
    r = invoke("run", tmp_path / "out", tmp_path / "rows.npz", "-o", tmp_path / "nonexistent" / "p.csv")
    assert r.exit_code != 0 and r.output.strip().startswith("Error: OutputError: cannot write")


_CRASH = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {tests!r})
    from hostile import valid_sequence
    from edgeseq.io import atomic
    from edgeseq.export.writer import export_model
    real = os.replace
    def crash(a, b):
        real(a, b)
        if str(b).endswith("/dir"):  # the old export is parked: die before the new one moves in
            os._exit(9)
    atomic.os.replace = crash
    atomic._exchange = lambda a, b: False  # the two-rename path (systems without RENAME_EXCHANGE)
    export_model(valid_sequence("softmax", 3), {out!r}, force=True)
""")


def test_crash_between_the_renames_of_force_is_repaired(tmp_path):
    out = tmp_path / "out"
    export_model(valid_sequence(), out)
    before = sorted(p.name for p in out.iterdir())
    tests = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", _CRASH.format(tests=tests, out=str(out))], timeout=300)
    assert proc.returncode == 9
    assert not out.exists()  # what a crash between two renames leaves (the bug this repairs)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    atomic.recover_dir(out)
    assert sorted(p.name for p in out.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # parked copy and temporary gone


def test_export_cleans_dead_temporaries_but_not_live_ones(tmp_path):
    out = tmp_path / "out"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / f".out.tmp-{dead}-abc").mkdir()
    live = tmp_path / f".out.tmp-{os.getppid()}-abc"  # the test runner's parent: still running
    live.mkdir()
    export_model(valid_sequence(), out)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", live.name])


def test_force_swaps_atomically_where_the_system_can(tmp_path):
    out = tmp_path / "out"
    export_model(valid_sequence(), out)
    m = export_model(valid_sequence("softmax", 3), out, force=True)
    assert m["link"] == "softmax" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
