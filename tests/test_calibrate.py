"""Calibration: bank forms, feature layout, timing semantics, GROUPS.json round trip and the CLI."""

import csv
import json
import os
import time

import numpy as np
import pytest
from click.testing import CliRunner

from edgeseq.cli import main
from edgeseq.errors import GroupSpecError, InputError, ModelFormatError
from edgeseq.extractors.calibrate import (Extractor, as_bank, calibrate_bank, extract, read_calibration,
                                          single_threaded, time_per_item, write_groups_json)


def _sum(x):
    return np.array([np.sum(x)])


def _first3(x):
    return np.asarray(x, dtype=float).ravel()[:3]


def _slow(x):
    time.sleep(0.003)
    return np.array([1.0, 2.0])


BANK_TEXT = """
import numpy as np
BANK = {"total": lambda x: np.array([x.sum()]), "square": lambda x: (x ** 2).ravel()}
"""


@pytest.mark.parametrize("form", [
    {"a": _sum, "b": _first3},
    [("a", _sum), ("b", _first3)],
    [Extractor("a", _sum), Extractor("b", _first3)],
    lambda: {"a": _sum, "b": _first3},
])
def test_bank_forms_normalise_to_the_same_extractors(form):
    bank = as_bank(form)
    assert [e.name for e in bank] == ["a", "b"] and bank[0].fn is _sum


@pytest.mark.parametrize("bad, err", [
    ({}, InputError), ([("a", _sum), ("a", _first3)], GroupSpecError), ({"a": 3}, InputError),
    ({"": _sum}, GroupSpecError), ({"a\x00b": _sum}, GroupSpecError), (42, InputError), ([_sum], InputError),
])
def test_bad_banks_are_refused(bad, err):
    with pytest.raises(err):
        as_bank(bad)


def test_extract_lays_groups_out_contiguously_in_bank_order():
    items = [np.arange(4.0) + k for k in range(5)]
    X, cols = extract({"a": _sum, "b": _first3}, items)
    assert cols == [[0], [1, 2, 3]]
    np.testing.assert_array_equal(X[:, 0], [np.sum(it) for it in items])
    np.testing.assert_array_equal(X[:, 1:], np.vstack([it[:3] for it in items]))


def test_extract_rejects_varying_length_and_non_finite_output():
    items = [np.ones(2), np.ones(3)]
    with pytest.raises(InputError, match="different lengths"):
        extract({"raw": lambda x: x}, items)
    with pytest.raises(InputError, match="NaN or Inf"):
        extract({"bad": lambda x: np.array([np.nan, 1.0])}, [np.zeros(2)])
    with pytest.raises(InputError, match="no input items"):
        extract({"a": _sum}, [])


def test_time_per_item_counts_warmup_and_repeats_and_measures_per_item():
    calls = []

    def fn(x):
        calls.append(x)
        time.sleep(0.002)

    t = time_per_item(fn, [1, 2, 3], repeats=3, warmup=2)
    assert len(calls) == (2 + 3) * 3
    assert 0.002 <= t < 0.2  # per item (not per pass): at least the sleep, far below a whole pass x 100


def test_single_threaded_limits_pools_and_restores_environment():
    from threadpoolctl import threadpool_info

    before = os.environ.get("OMP_NUM_THREADS")
    with single_threaded():
        assert os.environ["OMP_NUM_THREADS"] == "1" and os.environ["OPENBLAS_NUM_THREADS"] == "1"
        assert all(p["num_threads"] == 1 for p in threadpool_info())
    assert os.environ.get("OMP_NUM_THREADS") == before


def test_calibrate_bank_document_maps_costs_to_the_right_groups(tmp_path):
    items = [np.arange(4.0)] * 4
    doc = calibrate_bank({"slow": _slow, "cheap": _first3}, items, repeats=2, warmup=0)
    g = {d["name"]: d for d in doc["groups"]}
    assert g["slow"]["columns"] == [0, 1] and g["cheap"]["columns"] == [2, 3, 4]
    assert g["slow"]["dim"] == 2 and g["cheap"]["dim"] == 3
    assert g["slow"]["cost"] >= 3000 > g["cheap"]["cost"] > 0  # microseconds per item
    m = doc["measured_on"]
    assert {"machine", "cpu", "python", "versions", "date", "threads"} <= m.keys() and m["threads"] == 1
    assert m["versions"]["numpy"] == np.__version__ and doc["cost_unit"] == "microseconds per item"
    path = write_groups_json(doc, tmp_path / "sub" / "groups.json")
    assert json.loads(path.read_text()) == doc
    assert read_calibration(path, bank={"slow": _slow, "cheap": _first3}) == doc


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["groups"][0].update(cost=-1.0), "costs must be positive"),
    (lambda d: d["groups"][0].update(cost=True), "costs must be positive"),
    (lambda d: d["groups"][1].pop("columns"), "needs 'name', 'columns' and 'cost'"),
    (lambda d: d.update(groups=[]), "non-empty 'groups'"),
])
def test_read_calibration_rejects_tampered_files(tmp_path, edit, match):
    doc = {"groups": [{"name": "a", "columns": [0], "cost": 1.0}, {"name": "b", "columns": [1], "cost": 2.0}]}
    edit(doc)
    p = tmp_path / "g.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match=match):
        read_calibration(p)


def test_read_calibration_refuses_a_file_for_another_bank(tmp_path):
    p = write_groups_json({"groups": [{"name": "a", "columns": [0], "cost": 1.0}]}, tmp_path / "g.json")
    with pytest.raises(ModelFormatError, match="recalibrate"):
        read_calibration(p, bank={"b": _sum})
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ModelFormatError, match="cannot read"):
        read_calibration(tmp_path / "bad.json")


def test_calibrate_bank_checks_the_width_on_every_sample():
    var = {"var": lambda x: np.zeros(1 if x[0] < 2 else 2)}
    with pytest.raises(InputError, match=r"'var' returned different lengths \[1, 2\].*item 2"):
        calibrate_bank(var, [np.array([k]) for k in range(4)], repeats=1, warmup=0)


def test_extractor_exceptions_name_the_extractor_and_item():
    def boom(x):
        if x[0] == 3:
            raise ValueError("bad item")
        return x

    with pytest.raises(InputError, match=r"extractor 'boom' raised ValueError on item 3: bad item"):
        extract({"boom": boom}, [np.array([k]) for k in range(5)])
    with pytest.raises(InputError, match="factory"):
        as_bank(lambda: 1 / 0)


def test_read_calibration_with_a_sample_refuses_a_changed_dimension(tmp_path):
    items = [np.arange(4.0)] * 2
    p = write_groups_json(calibrate_bank({"a": _first3, "b": _sum}, items, repeats=1, warmup=0),
                          tmp_path / "g.json")
    assert read_calibration(p, bank={"a": _first3, "b": _sum}, sample=items[0])
    narrower = {"a": lambda x: np.asarray(x)[:2], "b": _sum}  # same names, one dimension changed
    assert read_calibration(p, bank=narrower)  # names alone cannot tell
    with pytest.raises(ModelFormatError, match=r"'a' is stored as 3 columns 0..2.*extracts 2.*recalibrate"):
        read_calibration(p, bank=narrower, sample=items[0])
    doc = json.loads(p.read_text())
    doc["groups"][1]["dim"] = 2  # 'dim' contradicting 'columns' is a tampered file
    p.write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match="says dim 2"):
        read_calibration(p)


def test_cli_calibrates_a_bank_from_a_module_file(tmp_path):
    (tmp_path / "mybank.py").write_text(BANK_TEXT)
    samples = np.arange(24.0).reshape(6, 2, 2)
    np.save(tmp_path / "s.npy", samples)
    out, feats = tmp_path / "g.json", tmp_path / "X.npy"
    res = CliRunner().invoke(main, ["calibrate", f"{tmp_path / 'mybank.py'}:BANK", str(tmp_path / "s.npy"),
                                    "-o", str(out), "--repeats", "1", "--features-out", str(feats), "--quiet"])
    assert res.exit_code == 0, res.output
    doc = read_calibration(out)
    assert [g["name"] for g in doc["groups"]] == ["total", "square"]
    assert [g["columns"] for g in doc["groups"]] == [[0], [1, 2, 3, 4]]
    X = np.load(feats)
    np.testing.assert_array_equal(X[:, 0], samples.sum(axis=(1, 2)))
    np.testing.assert_array_equal(X[:, 1:], (samples ** 2).reshape(6, 4))


def test_cli_builtin_digits_bank(tmp_path):
    out = tmp_path / "g.json"
    res = CliRunner().invoke(main, ["calibrate", "--bank", "digits", "-o", str(out), "--max-samples", "3",
                                    "--repeats", "1", "--warmup", "0"])
    assert res.exit_code == 0, res.output
    from edgeseq.extractors import digits

    assert read_calibration(out, bank=digits.bank())["measured_on"]["n_samples"] == 3


@pytest.mark.parametrize("args, match", [
    (["--bank", "digits", "x:BANK"], "not both"),
    ([], "either"),
    (["nocolon"], "MODULE:BANK"),
    (["no_such_module_xyz:BANK"], "cannot import"),
    (["json:NOPE"], "no attribute"),
])
def test_cli_errors_are_one_clear_line(tmp_path, args, match):
    np.save(tmp_path / "s.npy", np.zeros((2, 2)))
    extra = [str(tmp_path / "s.npy")] if args and args[0] != "--bank" else []
    res = CliRunner().invoke(main, ["calibrate", *args, *extra, "-o", str(tmp_path / "g.json")])
    # click's runner never prints tracebacks into res.output: an escaped exception shows as res.exception
    assert isinstance(res.exception, SystemExit) and res.exit_code != 0 and match in res.output


SUM_SQUARE = {"total": lambda x: np.array([x.sum()]), "square": lambda x: (x ** 2).ravel()}


def _train_checked(data, groups, *args):
    """`edgeseq train` on (data, GROUPS.json): the model has the bank's groups on the bank's columns."""
    from edgeseq.io.model_io import load_model

    out = data.parent / "m.pkl"
    res = CliRunner().invoke(main, ["train", str(data), *args, "--groups", str(groups), "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    model = load_model(out)
    seq = getattr(model, "fitted_sequence_", model)
    assert list(seq.group_names) == ["total", "square"]
    assert [c.tolist() for c in seq.group_columns] == [[0], [1, 2, 3, 4]]
    return model, seq


def test_groups_json_trains_with_edgeseq_train(tmp_path):
    """The calibration output is exactly what `edgeseq train --groups` reads (extra keys allowed)."""
    rng = np.random.default_rng(1)
    items = [rng.normal(size=(2, 2)) for _ in range(40)]
    write_groups_json(calibrate_bank(SUM_SQUARE, items[:5], repeats=1, warmup=0), tmp_path / "g.json")
    X, _ = extract(SUM_SQUARE, items)
    np.savez(tmp_path / "d.npz", X=X, y=X[:, 0] * 2.0 + X[:, 1])
    _, seq = _train_checked(tmp_path / "d.npz", tmp_path / "g.json")
    doc = read_calibration(tmp_path / "g.json")
    np.testing.assert_allclose(seq.costs, [g["cost"] for g in doc["groups"]])


def test_features_csv_has_a_header_and_trains_with_the_groups_json(tmp_path):
    """`--features-out X.csv` writes a header row; with the target appended last, `edgeseq train` reads
    it together with the GROUPS.json of the same run."""
    (tmp_path / "bank.py").write_text(BANK_TEXT)
    items = np.random.default_rng(0).normal(size=(40, 2, 2))
    np.save(tmp_path / "s.npy", items)
    out, feats = tmp_path / "g.json", tmp_path / "X.csv"
    res = CliRunner().invoke(main, ["calibrate", f"{tmp_path / 'bank.py'}:BANK", str(tmp_path / "s.npy"), "-o",
                                    str(out), "--features-out", str(feats), "--max-samples", "5", "--repeats",
                                    "1", "--quiet"])
    assert res.exit_code == 0, res.output
    with open(feats, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["total_0", "square_0", "square_1", "square_2", "square_3"]
    X = np.array(rows[1:], dtype=float)
    np.testing.assert_array_equal(X, extract(SUM_SQUARE, items)[0])
    y = 2.0 * X[:, 0] + X[:, 1]
    with open(tmp_path / "train.csv", "w", newline="") as f:
        csv.writer(f).writerows([rows[0] + ["y"]] + [r + [repr(float(v))] for r, v in zip(rows[1:], y)])
    model, _ = _train_checked(tmp_path / "train.csv", out, "--target", "y")
    np.testing.assert_allclose(model.predict(X), y, atol=1e-3)  # exact up to the small default l2
