"""Hostile or careless tabular inputs (issue 11 items 9, 12): GROUPS.json and CSV files fail with one
bounded error line, numbers are ASCII decimal only, labels are compared as written, and errors name
the physical line."""

from __future__ import annotations

import numpy as np
import pytest

from edgeseq.errors import ExportError, GroupSpecError, InputError
from edgeseq.io.data import read_csv, read_groups


@pytest.fixture
def ds(tmp_path):
    (tmp_path / "d.csv").write_text("y,a,b\n1,0.5,2\n0,1.5,3\n")
    return read_csv(tmp_path / "d.csv", "y")


def _groups(tmp_path, text: str, ds):
    p = tmp_path / "g.json"
    p.write_text(text, encoding="utf-8")
    return read_groups(p, ds)


@pytest.mark.parametrize("text", [
    '{"groups": ' + "[" * 200_000 + "]" * 200_000 + "}",
    '{"groups": [{"name": "a", "columns": ["a"], "cost": 1' + "0" * 400 + "}]}",
    '{"groups": [{"name": "a", "columns": ["a"], "cost": 1' + "0" * 5000 + "}]}",
    '{"groups": [{"name": "' + "n" * 100_000 + '", "columns": ["zz"], "cost": 1}]}',
    '{"groups": [{"name": "' + "n" * 100_000 + '", "columns": [], "cost": 1}]}',
    '{"groups": [{"name": "' + "n" * 100_000 + '", "columns": ["y"], "cost": 1}]}',
    '{"groups": [{"name": "a", "columns": ["' + "y" * 100_000 + '"], "cost": 1}]}',
    '{"groups": [{"name": "a", "columns": ["a"], "cost": 1}], "measured_on": [' + "1," * 100_000 + '1]}',
    '{"groups": [{"name": "a", "columns": ["a"], "cost": 1}], "cost_unit": [' + "1," * 100_000 + '1]}',
], ids=["nested", "cost_400_digits", "cost_5000_digits", "long_name_unknown_column", "long_name_no_columns",
        "long_name_target_column", "long_unknown_column", "measured_on_long_list", "cost_unit_long_list"])
def test_hostile_groups_file_is_one_bounded_error(tmp_path, ds, text):
    with pytest.raises(GroupSpecError) as info:
        _groups(tmp_path, text, ds)
    assert "\n" not in str(info.value) and len(str(info.value)) < 600


def test_groups_file_with_a_bom_is_read_like_a_csv_with_one(tmp_path, ds):
    g = _groups(tmp_path, '\ufeff{"groups": [{"name": "a", "columns": ["a", "b"], "cost": 2}]}', ds)
    assert g.names == ["a"] and g.costs == [2.0]


def test_subnormal_cost_is_refused_before_fitting():
    from edgeseq import AnytimeRegressor

    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(GroupSpecError, match="at least"):
        AnytimeRegressor(groups=[[0], [1]], costs=[1e-310, 1.0]).fit(X, X[:, 0])
    AnytimeRegressor(groups=[[0], [1]], costs=[1e-300, 1.0]).fit(X, X[:, 0])  # negative control


@pytest.mark.parametrize("cell", ["1_000", "\u0661\u0662", "\uff11\uff12", "0x10", "1e", " "])
def test_numbers_are_ascii_decimal_only(tmp_path, cell):
    (tmp_path / "d.csv").write_text(f"y,a\n1,{cell}\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 2"):
        read_csv(tmp_path / "d.csv", "y")


def test_negative_control_ordinary_numbers_parse(tmp_path):
    (tmp_path / "d.csv").write_text("y,a,b,c,d\n1,-1.5e3,.5,7.,+2\n", encoding="utf-8")
    assert read_csv(tmp_path / "d.csv", "y").X.tolist() == [[-1500.0, 0.5, 7.0, 2.0]]


def test_labels_are_compared_as_written(tmp_path):
    (tmp_path / "d.csv").write_text("y,a\n01,1\n1,2\n1,3\n", encoding="utf-8")
    y = read_csv(tmp_path / "d.csv", "y", task="classification").y
    assert sorted(set(y.tolist())) == ["01", "1"]
    (tmp_path / "e.csv").write_text("y,a\n-3,1\n7,2\n", encoding="utf-8")
    assert read_csv(tmp_path / "e.csv", "y", task="classification").y.tolist() == [-3, 7]


def test_errors_name_the_physical_line_after_blank_lines(tmp_path):
    (tmp_path / "d.csv").write_text("y,a\n\n1,2\n\n\n0,oops\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 6\b"):
        read_csv(tmp_path / "d.csv", "y")


def test_feature_rows_name_the_physical_line(tmp_path):
    from hostile import valid_sequence

    from edgeseq.export.writer import export_model
    from edgeseq.io.feature_rows import read_feature_rows

    seq = valid_sequence()
    m = export_model(seq, tmp_path / "out")
    D = seq.n_features_in
    (tmp_path / "r.csv").write_text(",".join(f"c{i}" for i in range(D)) + "\n\n" + ",".join(["1"] * D)
                                    + "\n\n" + ",".join(["x"] * D) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 5\b"):
        read_feature_rows(tmp_path / "r.csv", m, ())


def test_model_name_that_is_not_unicode_text(tmp_path):
    from hostile import valid_sequence

    from edgeseq.export.writer import export_model

    with pytest.raises(ExportError, match="model name"):
        export_model(valid_sequence(), tmp_path / "out", model_name="bad\udcff")
    assert not (tmp_path / "out").exists()
