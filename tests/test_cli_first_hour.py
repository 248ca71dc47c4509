"""What a new user meets in the first hour: ambiguous targets, typos in GROUPS.json, budgets that buy
nothing, and the promise that the Python API and `edgeseq train` build the same model."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.datasets import load_breast_cancer

from edgeseq import AnytimeClassifier
from edgeseq.cli import main
from edgeseq.io.model_io import load_model


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def bc(tmp_path_factory):
    d = tmp_path_factory.mktemp("first_hour")
    data = load_breast_cancer()
    names = list(data.feature_names)
    with open(d / "bc.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["malignant"] + names)
        for row, t in zip(data.data, data.target):
            w.writerow([int(t)] + [repr(float(v)) for v in row])
    measures = [n[len("mean "):] for n in names[:10]]
    groups = [{"name": m, "columns": [f"mean {m}", f"{m} error", f"worst {m}"], "cost": 1.0 + i}
              for i, m in enumerate(measures)]
    doc = {"groups": groups, "cost_unit": "ms", "measured_on": {"machine": "bench-1"}}
    (d / "groups.json").write_text(json.dumps(doc))
    return d, data, groups, doc


def _one_line_error(res) -> str:
    assert res.exit_code != 0
    lines = [ln for ln in res.output.splitlines() if ln.strip()]  # progress lines (stderr) come first
    errors = [ln for ln in lines if ln.startswith("Error:")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in res.output, res.output
    return errors[0]


def test_two_valued_target_without_task_is_refused_with_a_hint(bc, tmp_path):
    d, *_ = bc
    line = _one_line_error(invoke("train", d / "bc.csv", "--target", "malignant", "--groups", d / "groups.json",
                                  "-o", tmp_path / "m.pkl"))
    assert "--task classification" in line and "--task regression" in line
    assert not (tmp_path / "m.pkl").exists()
    res = invoke("train", d / "bc.csv", "--target", "malignant", "--groups", d / "groups.json", "--task",
                 "regression", "-o", tmp_path / "m.pkl", "--quiet")
    assert res.exit_code == 0, res.output  # said explicitly: fitted as numbers


@pytest.mark.parametrize("doc, hint", [
    ({"groups": [{"nmae": "a", "columns": [1], "cost": 1}]}, "did you mean 'name'"),
    ({"groups": [{"name": "a", "columns": [1], "cots": 1}]}, "did you mean 'cost'"),
    ({"groups": [{"name": "a", "columns": [1], "cost": 1}], "cost_units": "ms"}, "did you mean 'cost_unit'"),
    ({"groups": [{"name": "a", "columns": ["mean radus"], "cost": 1}]}, "did you mean 'mean radius'"),
])
def test_groups_json_typos_get_a_did_you_mean(bc, tmp_path, doc, hint):
    d, *_ = bc
    (tmp_path / "g.json").write_text(json.dumps(doc))
    line = _one_line_error(invoke("train", d / "bc.csv", "--target", "malignant", "--groups", tmp_path / "g.json",
                                  "--task", "classification", "-o", tmp_path / "m.pkl"))
    assert hint in line and len(line) < 400


def test_unknown_column_without_a_near_name_does_not_dump_the_header(bc, tmp_path):
    d, *_ = bc
    (tmp_path / "g.json").write_text(json.dumps({"groups": [{"name": "a", "columns": ["zzzz"], "cost": 1}]}))
    line = _one_line_error(invoke("train", d / "bc.csv", "--target", "malignant", "--groups", tmp_path / "g.json",
                                  "--task", "classification", "-o", tmp_path / "m.pkl"))
    assert "zzzz" in line and "mean radius" not in line


def test_python_api_builds_the_same_model_as_the_cli(bc, tmp_path):
    """Feature names and cost provenance reach the estimator as inputs: no patching after fit."""
    d, data, groups, doc = bc
    res = invoke("train", d / "bc.csv", "--target", "malignant", "--groups", d / "groups.json", "--task",
                 "classification", "-o", tmp_path / "cli.pkl", "--quiet")
    assert res.exit_code == 0, res.output
    cli = load_model(tmp_path / "cli.pkl").fitted_sequence_
    names = list(data.feature_names)
    api = AnytimeClassifier(groups=[[names.index(c) for c in g["columns"]] for g in groups],
                            costs=[g["cost"] for g in groups], group_names=[g["name"] for g in groups],
                            feature_names=names, cost_provenance={k: doc[k] for k in ("measured_on", "cost_unit")},
                            ).fit(data.data, data.target).fitted_sequence_
    assert api.feature_names == cli.feature_names == tuple(names)
    assert api.provenance == cli.provenance
    assert api.provenance["cost_unit"] == "ms" and api.provenance["costs_measured_on"] == {"machine": "bench-1"}
    assert api.order.tolist() == cli.order.tolist()
    for a, b in zip(api.coefs, cli.coefs):
        np.testing.assert_array_equal(a, b)


def test_bad_estimator_inputs_are_clear():
    X, y = np.random.default_rng(0).normal(size=(20, 3)), np.arange(20) % 2
    with pytest.raises(Exception, match=r"feature_names repeats a name \('a', 'a', 'b'\)"):
        AnytimeClassifier(feature_names=["a", "a", "b"]).fit(X, y)
    with pytest.raises(Exception, match="feature_names must be 3 names, one per column of X"):
        AnytimeClassifier(feature_names=["a", "b"]).fit(X, y)
    with pytest.raises(Exception, match="cost_provenance must be a dict"):
        AnytimeClassifier(cost_provenance={"measured": "x"}).fit(X, y)


def test_run_warns_when_the_budget_buys_no_group(bc, tmp_path):
    d, *_ = bc
    assert invoke("train", d / "bc.csv", "--target", "malignant", "--groups", d / "groups.json", "--task",
                  "classification", "-o", tmp_path / "m.pkl", "--quiet").exit_code == 0
    assert invoke("export", tmp_path / "m.pkl", tmp_path / "out", "--quiet").exit_code == 0
    res = invoke("run", tmp_path / "out", d / "bc.csv", "--ignore", "malignant", "--budget", "0.5")
    assert res.exit_code == 0, res.output
    assert "affords no group" in res.output
    res = invoke("run", tmp_path / "out", d / "bc.csv", "--ignore", "malignant", "--budget", "100")
    assert "affords no group" not in res.output  # negative control
