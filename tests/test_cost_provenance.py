"""Measured-cost provenance (docs/own-data.md): GROUPS.json's measured_on / cost_unit reach the model, the
manifest, `edgeseq inspect` and `edgeseq report`; bad provenance is refused with a clear line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgeseq.cli import main
from edgeseq.io.cost_provenance import cost_summary, read_cost_provenance
from edgeseq.errors import GroupSpecError, IntegrityError
from edgeseq.format import manifest_checksum, read_verified, validate_manifest
from edgeseq.io.model_io import as_sequence, load_model

MEASURED = {"machine": "Linux x86_64, 2 cores", "cpu": "Test CPU 9000", "python": "3.11.7",
            "versions": {"numpy": "2.4.6"}, "date": "2026-11-22T14:24:24Z", "threads": 1,
            "n_samples": 50, "repeats": 3, "warmup": 1}
UNIT = "microseconds per item"


def invoke(*args):
    res = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return res


def _data(d, measured=True):
    """A small regression .npz and a GROUPS.json as `edgeseq calibrate` writes it (by hand here)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6))
    y = X @ rng.normal(size=6) + 0.1 * rng.normal(size=120)
    np.savez(d / "train.npz", X=X[:80], y=y[:80])
    np.savez(d / "test.npz", X=X[80:], y=y[80:])
    groups = [{"name": f"g{k}", "columns": [2 * k, 2 * k + 1], "cost": [1.5, 4.0, 20.0][k], "dim": 2}
              for k in range(3)]
    doc = {"groups": groups, "cost_unit": UNIT, "measured_on": MEASURED} if measured else {"groups": groups}
    (d / "groups.json").write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """calibrate-style GROUPS.json -> train -> export, measured and not measured."""
    out = {}
    for measured in (True, False):
        d = tmp_path_factory.mktemp("measured" if measured else "given")
        _data(d, measured)
        res = invoke("train", d / "train.npz", "--groups", d / "groups.json", "-o", d / "m.pkl", "--quiet")
        assert res.exit_code == 0, res.output
        res = invoke("export", d / "m.pkl", d / "out", "--quiet")
        assert res.exit_code == 0, res.output
        out[measured] = d
    return out


def test_train_stores_the_measured_on_and_unit_in_the_model(pipeline):
    seq = as_sequence(load_model(pipeline[True] / "m.pkl"))
    assert seq.provenance["costs_measured_on"] == MEASURED and seq.provenance["cost_unit"] == UNIT
    given = as_sequence(load_model(pipeline[False] / "m.pkl"))
    assert given.provenance["costs_measured_on"] is None and given.provenance["cost_unit"] is None


def test_manifest_carries_the_provenance_and_inspect_prints_it(pipeline):
    m = read_verified(pipeline[True] / "out")
    assert m["provenance"]["costs_measured_on"] == MEASURED and m["provenance"]["cost_unit"] == UNIT
    res = invoke("inspect", pipeline[True] / "out")
    assert res.exit_code == 0
    assert ("costs: microseconds per item, measured on Test CPU 9000, Linux x86_64, 2 cores "
            "(2026-11-22T14:24:24Z)") in res.output.splitlines()
    res = invoke("inspect", pipeline[False] / "out")
    assert "costs: as given (not measured)" in res.output.splitlines()


def test_train_prints_where_the_costs_come_from(tmp_path):
    _data(tmp_path)
    res = invoke("train", "--task", "regression", tmp_path / "train.npz", "--groups", tmp_path / "groups.json", "-o", tmp_path / "m.pkl")
    assert res.exit_code == 0 and "measured on Test CPU 9000" in res.output


def test_report_notes_the_machine_and_labels_the_axis_with_the_unit(pipeline, tmp_path, monkeypatch):
    import edgeseq.evaluate.report as report

    seen = {}
    original = report._plot

    def spy(curves, c_alpha, alpha, out_dir, title, cost_unit, *rest):
        seen["cost_unit"] = cost_unit
        return original(curves, c_alpha, alpha, out_dir, title, cost_unit, *rest)

    monkeypatch.setattr(report, "_plot", spy)
    d = pipeline[True]
    res = invoke("report", d / "m.pkl", d / "test.npz", "-o", tmp_path / "rep")
    assert res.exit_code == 0, res.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "- costs: microseconds per item, measured on Test CPU 9000, Linux x86\\_64, 2 cores" in md
    assert seen["cost_unit"] == UNIT
    d = pipeline[False]
    res = invoke("report", d / "m.pkl", d / "test.npz", "-o", tmp_path / "rep2", "--no-plots")
    assert "- costs: as given (not measured)" in (tmp_path / "rep2" / "report.md").read_text()


def test_the_schema_types_the_provenance_keys(pipeline):
    m = read_verified(pipeline[True] / "out")
    for key, bad in (("costs_measured_on", "somewhere"), ("costs_measured_on", {"cpu": "x"}), ("cost_unit", 3)):
        tampered = json.loads(json.dumps(m))
        tampered["provenance"][key] = bad
        tampered["manifest_sha256"] = manifest_checksum(tampered)
        with pytest.raises(IntegrityError, match="provenance"):
            validate_manifest(tampered)


@pytest.mark.parametrize("doc, match", [
    ({"measured_on": ["x"]}, "must be an object"),
    ({"measured_on": {"cpu": "x"}}, "name the machine"),
    ({"measured_on": {"machine": "m", "date": 5}}, "measured_on.date"),
    ({"measured_on": {"machine": "m", "threads": float("nan")}}, "NaN"),
    ({"cost_unit": ""}, "cost_unit"),
    ({"cost_unit": 7}, "cost_unit"),
])
def test_bad_provenance_is_refused(doc, match):
    with pytest.raises(GroupSpecError, match=match):
        read_cost_provenance(doc, "groups.json")


def test_bad_provenance_is_one_line_in_train(tmp_path):
    _data(tmp_path)
    doc = json.loads((tmp_path / "groups.json").read_text())
    doc["measured_on"] = {"cpu": "only"}
    (tmp_path / "groups.json").write_text(json.dumps(doc))
    res = CliRunner().invoke(main, ["train", str(tmp_path / "train.npz"), "--groups", str(tmp_path / "groups.json"),
                                    "-o", str(tmp_path / "m.pkl")])
    assert isinstance(res.exception, SystemExit) and res.exit_code != 0
    assert "GroupSpecError" in res.output and "name the machine" in res.output


def test_summary_is_one_printable_line_and_keeps_a_hand_written_machine():
    prov = read_cost_provenance({"measured_on": "Raspberry Pi 4\n\x1b[31m", "cost_unit": "ms"}, "g.json")
    assert prov == {"costs_measured_on": {"machine": "Raspberry Pi 4\n\x1b[31m"}, "cost_unit": "ms"}
    assert cost_summary(prov) == "costs: ms, measured on Raspberry Pi 4 [31m"
    assert cost_summary({"cost_unit": "ms"}) == "costs: ms, as given (not measured)"
    assert cost_summary({}) == "costs: as given (not measured)"
