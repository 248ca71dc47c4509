"""Costs measured on the device: runtime_c/edgeseq_costs.{h,c} on the host and on emulated Cortex-M cores,
the EDGESEQ_COSTS line parsed by `edgeseq calibrate --from-device`, and `edgeseq train` using the result.

The host test program drives a simulated counter whose every advance is known, so the expected costs
are exact; on qemu (with -icount, instruction-counted virtual time) the SysTick counter gives
deterministic costs whose order follows the extractors' work, and the DWT counter, which qemu does not
model, must be reported as a counter that does not advance (the negative control: a silent zero cost
would be the bug).
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from c_support import SAN, sanitizer_compilers
from click.testing import CliRunner

from edgeseq.cli import main
from edgeseq.errors import GroupSpecError, InputError
from edgeseq.export.c_arm import TARGETS, build_arm, missing_tools, run_qemu
from edgeseq.export.c_harness import compile_c, runtime_dir
from edgeseq.io import device_costs
from edgeseq.io.device_costs import DeviceCosts, apply_device_costs, parse_device_costs

RT = runtime_dir()
SIM_COSTS = {"imu": 20.0, 'depth "HOG"': 35.0, "tab\there\\": 1000.0}  # WORK[g] * DIM[g] in costs_test.c


def _line(**over) -> str:
    doc = {"format": "edgeseq-device-costs", "version": 1, "machine": "board", "unit": "cycles", "repeats": 5,
           "overhead": 4, "groups": [{"name": "a", "median": 14}, {"name": "b", "median": 104}]} | over
    return "EDGESEQ_COSTS " + json.dumps(doc)


@pytest.mark.parametrize("cc", sanitizer_compilers())
def test_measurement_on_a_simulated_counter_is_exact_under_sanitizers(cc, tmp_path):
    """Overhead subtraction, medians dropping outliers, 32- and 24-bit wrap, errors, JSON escaping."""
    exe = compile_c([RT / "edgeseq_costs.c", RT / "tests" / "costs_test.c"], tmp_path / "costs_test",
                    include_dirs=[RT], compiler=cc, flags=SAN, extra=("-g", "-O1"), libs=())
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    got = parse_device_costs(r.stdout)
    assert got.costs == SIM_COSTS  # names with quotes, tabs and backslashes survive the C escaping
    assert (got.machine, got.unit, got.repeats) == ('sim "board"', "ticks", 9)


def test_parse_refuses_each_malformed_record():
    assert parse_device_costs("noise\n" + _line() + "\nmore noise").costs == {"a": 10.0, "b": 100.0}
    bad = {
        "": "holds no line starting with",
        _line() + "\n" + _line(): "holds 2 lines",
        "EDGESEQ_COSTS {\"format\": ": "is not valid JSON",
        _line(format="other"): "is not an edgeseq-device-costs version 1 record",
        _line(extra=1): "unknown field 'extra'",
        _line(repeats=0): "'repeats' must be an integer in 1..1001",
        _line(overhead=-1): "'overhead' must be an integer",
        _line(unit=""): "'unit' must be a non-empty string",
        _line(groups=[{"name": "a", "median": 4}]): "not more than reading the counter itself",
        _line(groups=[{"name": "a", "median": 9}, {"name": "a", "median": 9}]): "measured twice",
        _line(groups=[{"name": "a", "median": 9.5}]): "median must be an integer",
        _line(groups=[]): "'groups' must be a list of 1..4096",
        _line(groups=[{"name": "a"}]): "must be {\"name\": ..., \"median\": ...}",
    }
    for text, message in bad.items():
        with pytest.raises(InputError, match=None) as info:
            parse_device_costs(text)
        assert message in str(info.value) and "\n" not in str(info.value), (text, str(info.value))


def test_a_log_larger_than_the_bound_is_refused_unread(tmp_path, monkeypatch):
    log = tmp_path / "big.log"
    log.write_text(_line() + "\n" + "x" * 200)
    assert device_costs.read_device_log(log).costs == {"a": 10.0, "b": 100.0}
    monkeypatch.setattr(device_costs, "MAX_LOG_BYTES", 100)
    with pytest.raises(InputError, match="over the 100-byte limit; a cost measurement needs far less"):
        device_costs.read_device_log(log)


def test_every_group_must_be_measured_and_every_measurement_must_be_a_group():
    doc = {"groups": [{"name": "a", "columns": [0], "cost": 1.0}, {"name": "b", "columns": [1], "cost": 2.0}]}
    new = apply_device_costs(doc, DeviceCosts("M0 board", "cycles", 5, {"a": 10.0, "b": 100.0}))
    assert [g["cost"] for g in new["groups"]] == [10.0, 100.0] and doc["groups"][0]["cost"] == 1.0  # a copy
    with pytest.raises(GroupSpecError, match="group 'b' was not measured on the device"):
        apply_device_costs(doc, DeviceCosts("M0 board", "cycles", 5, {"a": 10.0}))
    with pytest.raises(GroupSpecError, match="'c' is measured but is no group of GROUPS.json"):
        apply_device_costs(doc, DeviceCosts("M0 board", "cycles", 5, {"a": 10.0, "b": 1.0, "c": 1.0}))


def test_calibrate_from_device_writes_a_new_groups_file_and_keeps_the_old(tmp_path):
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"groups": [{"name": "a", "columns": [0], "cost": 1},
                                             {"name": "b", "columns": [1], "cost": 2}], "cost_unit": "ms"}))
    before = groups.read_bytes()
    (tmp_path / "board.log").write_text("boot\n" + _line() + "\n")
    out = tmp_path / "groups.board.json"
    r = CliRunner().invoke(main, ["calibrate", "--from-device", str(tmp_path / "board.log"), "--groups", str(groups),
                                  "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert [g["cost"] for g in doc["groups"]] == [10.0, 100.0] and doc["cost_unit"] == "cycles"
    assert doc["measured_on"]["machine"] == "board" and groups.read_bytes() == before
    # a bad log: one line, nothing written
    (tmp_path / "bad.log").write_text("boot\n")
    r = CliRunner().invoke(main, ["calibrate", "--from-device", str(tmp_path / "bad.log"), "--groups", str(groups),
                                  "-o", str(tmp_path / "never.json")])
    assert r.exit_code != 0 and "holds no line starting with" in r.output
    assert not (tmp_path / "never.json").exists()
    r = CliRunner().invoke(main, ["calibrate", "--from-device", str(tmp_path / "board.log"), "-o", str(out)])
    assert r.exit_code != 0 and "--from-device and --groups go together" in r.output


# ---------------------------------------------------------------------------------- emulated cores
_MISSING = missing_tools()
needs_qemu = pytest.mark.skipif(_MISSING is not None, reason=f"emulated Cortex-M tests skipped: {_MISSING}")
ICOUNT = ("-icount", "shift=0")  # virtual time counts instructions: costs are reproducible


def _measure_on(target: str, clock: str, tmp_path):
    machine = f"qemu {TARGETS[target].machine} ({target})"
    elf = build_arm([RT / "edgeseq_costs.c", RT / "examples" / "measure_costs.c"], tmp_path / f"mc_{target}.elf",
                    TARGETS[target], include_dirs=[RT], defines=[clock, f'ES_MACHINE="{machine}"'])
    return run_qemu(elf, TARGETS[target], check=False, extra=ICOUNT)


@needs_qemu
def test_costs_measured_on_emulated_cores_follow_the_work_and_the_fpu(tmp_path):
    costs = {}
    for target in ("cortex-m4f", "cortex-m3"):
        runs = [_measure_on(target, "ES_CLOCK_SYSTICK", tmp_path) for _ in range(2)]
        assert all(r.returncode == 0 for r in runs), runs[0].stdout
        got = [parse_device_costs(r.stdout) for r in runs]
        assert got[0] == got[1]  # instruction-counted time: the same costs twice
        costs[target] = got[0].costs
        c = costs[target]
        assert c["stats"] < c["band_energy"] < c["autocorr"], c  # the example extractors' work grows
    # the M3 computes float in software: every float-heavy extractor costs it several times more
    assert all(costs["cortex-m3"][g] > 3 * costs["cortex-m4f"][g] for g in costs["cortex-m3"]), costs


@needs_qemu
def test_a_counter_the_core_does_not_have_is_an_error_not_a_zero_cost(tmp_path):
    r = _measure_on("cortex-m4f", "ES_CLOCK_DWT", tmp_path)  # qemu does not model the DWT cycle counter
    assert r.returncode == 2 and "the counter did not advance while group stats ran" in r.stdout
    assert "EDGESEQ_COSTS" not in r.stdout


@needs_qemu
def test_from_the_board_to_a_model_trained_with_its_costs(tmp_path):
    """The documented loop: measure on the (emulated) board, write GROUPS.json, train with it."""
    r = _measure_on("cortex-m3", "ES_CLOCK_SYSTICK", tmp_path)
    (tmp_path / "board.log").write_text(r.stdout)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 14))
    y = X[:, 0] + X[:, 2] + 3 * X[:, 6] + 0.1 * rng.normal(size=300)  # every group is informative
    header = ",".join([f"x{i}" for i in range(14)] + ["y"])
    np.savetxt(tmp_path / "data.csv", np.column_stack([X, y]), delimiter=",", header=header, comments="")
    (tmp_path / "groups.json").write_text(json.dumps({"groups": [
        {"name": "stats", "columns": [0, 1], "cost": 1},
        {"name": "band_energy", "columns": [2, 3, 4, 5], "cost": 1},
        {"name": "autocorr", "columns": list(range(6, 14)), "cost": 1}]}))
    runner = CliRunner()
    res = runner.invoke(main, ["calibrate", "--from-device", str(tmp_path / "board.log"),
                               "--groups", str(tmp_path / "groups.json"), "-o", str(tmp_path / "groups.m3.json")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["train", str(tmp_path / "data.csv"), "--target", "y", "--groups",
                               str(tmp_path / "groups.m3.json"), "-o", str(tmp_path / "model.pkl"), "--quiet"])
    assert res.exit_code == 0, res.output
    from edgeseq.io.model_io import as_sequence, load_model
    seq = as_sequence(load_model(tmp_path / "model.pkl"))
    measured = parse_device_costs(r.stdout).costs
    assert sorted(seq.costs.tolist()) == sorted(measured.values())  # the board's costs, not the placeholders
    assert seq.provenance["costs_measured_on"]["machine"] == "qemu mps2-an385 (cortex-m3)"
