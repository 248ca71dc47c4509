"""The committed benchmark results are complete, and the benchmarks write them atomically.

The docs page renders ``bench/results/*.json``; a file without its command, machine or date would
show figures nobody can reproduce or place, and a half-written file would break the page.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULT_FILES = sorted((BENCH / "results").glob("*.json"))


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results():
    return _load("bench_results_helper", BENCH / "_results.py")


def test_there_are_result_files():
    assert RESULT_FILES, "no bench/results/*.json committed"  # the per-file test below must not pass vacuously


@pytest.mark.parametrize("path", RESULT_FILES, ids=[p.stem for p in RESULT_FILES])
def test_committed_result_file_is_complete(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    command = data["command"]
    assert isinstance(command, str) and command.startswith("python bench/")
    script = command.split()[1]
    assert (ROOT / script).is_file(), f"{path.name}: the command's script {script} does not exist"
    words = command.split()
    named = words[words.index("--result") + 1] if "--result" in words[:-1] else Path(script).stem
    assert named == path.stem, f"{path.name} was written by {script} as {named}.json"
    machine = data["machine"]
    assert isinstance(machine, dict) and machine.get("cpu") and machine.get("load_start") and machine.get("load_end")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["date"])
    assert data["tables"], f"{path.name} declares no table for the docs page"
    for t in data["tables"]:
        assert t["columns"] and t["rows"] and all(len(r) == len(t["columns"]) for r in t["rows"])


def test_every_benchmark_that_writes_a_result_has_one_committed():
    writers = [p.stem for p in BENCH.glob("*.py") if "write_result(" in p.read_text(encoding="utf-8")
               and not p.stem.startswith("_")]
    converted = {"anytime_quality", "c_runtime_speed", "export_speed", "python_runtime_speed", "import_speed"}
    assert converted <= set(writers)
    missing = [w for w in writers if not (BENCH / "results" / f"{w}.json").is_file()]
    assert not missing, f"run and commit: {missing}"


def test_docs_page_shows_every_result_with_its_command():
    hooks = _load("docs_hooks_for_bench", ROOT / "docs" / "hooks.py")
    md = hooks.render_benchmarks(BENCH)
    assert "## _results" not in md  # the helper module is not a benchmark
    for path in RESULT_FILES:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert f"Command: `{data['command']}`" in md
        first = data["tables"][0]
        assert "| " + " | ".join(hooks.fmt(v) for v in first["rows"][0]) + " |" in md


def test_write_result_records_command_machine_date(results, tmp_path):
    out = results.write_result("demo", {"x": 1, "tables": [{"title": "t", "columns": ["a"], "rows": [[1.5]]}]},
                               "python bench/demo.py --quick", results_dir=tmp_path)
    data = json.loads(out.read_text())
    assert out == tmp_path / "demo.json" and list(data)[:2] == ["x", "tables"]  # payload first
    assert data["command"] == "python bench/demo.py --quick"
    assert data["machine"]["cpu"] and data["machine"]["load_end"] and data["machine"]["onnxruntime"]
    assert data["machine"]["cores"] == os.cpu_count()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.json"]


def test_machine_info_cpu_matches_proc_cpuinfo(results):
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        pytest.skip("no /proc/cpuinfo on this system")
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
             if line.startswith("model name")]
    if not names:
        pytest.skip("/proc/cpuinfo names no CPU model here")
    info = results.machine_info(load_start="1.00, 2.00, 3.00")
    assert info["cpu"] == names[0] and info["load_start"] == "1.00, 2.00, 3.00"
    assert re.fullmatch(r"[\d.]+, [\d.]+, [\d.]+", info["load_end"])


def test_command_line_is_relative_to_the_repository(results):
    assert results.command_line([str(BENCH / "x.py"), "--n", "a b"]) == "python bench/x.py --n 'a b'"


def _leaves_partial_file(writer, tmp_path: Path) -> list[str]:
    """Problems after `writer` fails half-way over an existing good file: changed or stray files."""
    target = tmp_path / "r.json"
    target.write_text('{"good": 1}\n')
    with pytest.raises(TypeError):
        writer({"a": list(range(1000)), "b": object()}, tmp_path)  # object(): not serialisable, after 'a'
    problems = []
    if target.read_text() != '{"good": 1}\n':
        problems.append("previous result overwritten")
    stray = sorted(p.name for p in tmp_path.iterdir() if p.name != "r.json")
    if stray:
        problems.append(f"stray files {stray}")
    return problems


def test_write_result_is_atomic(results, tmp_path):
    assert _leaves_partial_file(lambda payload, d: results.write_result("r", payload, "python bench/r.py",
                                                                        machine={}, results_dir=d), tmp_path) == []


def test_partial_file_check_catches_a_naive_writer(tmp_path):
    """Negative control: a writer that streams straight into the target is caught by the same check."""
    def naive(payload, d):
        with open(d / "r.json", "w") as fh:
            json.dump(payload, fh)

    assert _leaves_partial_file(naive, tmp_path) == ["previous result overwritten"]


def test_write_result_cleans_up_when_the_rename_fails(results, tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    target.write_text("old\n")

    def fail(*_):
        raise OSError("disk full")

    monkeypatch.setattr(results.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        results.write_result("r", {"tables": []}, "python bench/r.py", machine={}, results_dir=tmp_path)
    assert target.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.parametrize("payload, error", [
    ({"command": "x"}, ValueError),  # the recorded keys cannot be forged by the payload
    ({"tables": [{"title": "t", "columns": ["a", "b"], "rows": [[1]]}]}, ValueError),  # ragged row
    ({"tables": {"title": "t"}}, TypeError),
    ({"v": float("nan")}, ValueError),  # strict JSON: NaN is refused, not written as a token
])
def test_write_result_refuses_bad_payloads_before_writing(results, tmp_path, payload, error):
    with pytest.raises(error):
        results.write_result("r", payload, "python bench/r.py", machine={}, results_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
