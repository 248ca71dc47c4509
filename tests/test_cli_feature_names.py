"""Issue 19's first-hour defects on the tree paths: every model kind records its feature names and every
table entry point matches columns by name or refuses; LightGBM files have a CLI way in; `train --model afr`;
implausible class counts; refusals that need no model are fast."""

from __future__ import annotations

import csv
import json
import pickle
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from edgeseq.cli import main
from edgeseq.errors import InputError, ModelFormatError, RuntimeInputError
from edgeseq.io.model_io import load_model, save_model

NAMES = ["ax", "ay", "mic", "lux", "temp", "hum"]
GROUPS = [{"name": "imu", "columns": ["ax", "ay"], "cost": 1.0},
          {"name": "audio", "columns": ["mic", "lux"], "cost": 2.0},
          {"name": "env", "columns": ["temp", "hum"], "cost": 4.0}]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line_error(res) -> str:
    assert res.exit_code != 0, res.output
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in res.output, res.output
    return errors[0]


def write_csv(path, X, y, order):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([NAMES[i] for i in order] + ["label"])
        for row, t in zip(X, y):
            w.writerow([repr(float(row[i])) for i in order] + [int(t)])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("names")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(160, 6)) * np.array([1, 1, 3, 3, 10, 10])
    y = (X[:, 0] + 0.3 * X[:, 2] - 0.1 * X[:, 4] > 0).astype(int) + (X[:, 1] > 1)  # 3 classes
    write_csv(d / "train.csv", X, y, range(6))
    write_csv(d / "shuffled.csv", X, y, [4, 2, 0, 5, 1, 3])  # same rows, header intact, columns reordered
    (d / "groups.json").write_text(json.dumps({"groups": GROUPS}))
    return d, X, y


def predictions(path):
    with open(path, newline="") as f:
        return [r["label"] for r in csv.DictReader(f)]


@pytest.fixture(scope="module")
def afr_export(data):
    d, X, y = data
    res = invoke("train", d / "train.csv", "--target", "label", "--groups", d / "groups.json", "--model", "afr",
                 "-o", d / "afr.pkl")
    assert res.exit_code == 0, res.output
    assert invoke("export", d / "afr.pkl", d / "afr_out", "--quiet").exit_code == 0
    return d / "afr.pkl", d / "afr_out"


def test_cli_trained_afr_matches_a_reordered_csv_by_name(data, afr_export):
    d, X, y = data
    model_file, out = afr_export
    est = load_model(model_file)
    assert est.stage_model_.feature_names == tuple(NAMES)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["feature_names"] == NAMES
    assert [g["column_names"] for g in manifest["groups"]] == [
        [NAMES[c] for c in g["columns"]] for g in manifest["groups"]]
    for src in ("train.csv", "shuffled.csv"):
        res = invoke("run", out, d / src, "-o", d / f"pred_{src}")
        assert res.exit_code == 0, res.output
    by_name = predictions(d / "pred_shuffled.csv")
    assert by_name == predictions(d / "pred_train.csv")
    assert np.mean(np.array(by_name, dtype=int) == y) > 0.8
    # negative control: read by position, the shuffled table gives other predictions
    order = [4, 2, 0, 5, 1, 3]
    assert not np.array_equal(est.stage_model_.predict(X[:, order]).argmax(1), est.stage_model_.predict(X).argmax(1))
    res = invoke("verify", out, "--data", d / "shuffled.csv", "--no-c")
    assert res.exit_code == 0, res.output


def test_a_table_without_a_model_column_is_refused_in_one_line(data, afr_export, tmp_path):
    d, X, y = data
    rows = (d / "shuffled.csv").read_text().splitlines()
    cut = [",".join(r.split(",")[1:]) for r in rows]  # drops "temp"
    (tmp_path / "cut.csv").write_text("\n".join(cut) + "\n")
    line = one_line_error(invoke("run", afr_export[1], tmp_path / "cut.csv"))
    assert "'temp'" in line and "not in the header" in line


def test_python_estimators_record_table_columns_and_refuse_a_reordered_table(data):
    pa = pytest.importorskip("pyarrow")
    from edgeseq import AnytimeRegressor
    from edgeseq.train.trees.afr import AFRClassifier

    _, X, y = data
    table = pa.table({n: X[:, i] for i, n in enumerate(NAMES)})
    shuffled = table.select(["temp", "mic", "ax", "hum", "ay", "lux"])
    groups, costs = [[0, 1], [2, 3], [4, 5]], [1.0, 2.0, 4.0]
    clf = AFRClassifier(groups, costs, n_dims=1, n_trees=1, max_blocks=2).fit(table, y)
    assert clf.stage_model_.feature_names == tuple(NAMES)
    assert np.array_equal(clf.predict(table), clf.predict(X))
    reg = AnytimeRegressor(groups, costs).fit(table, X[:, 0])
    assert reg.fitted_sequence_.feature_names == tuple(NAMES)
    named = AFRClassifier(groups, costs, n_dims=1, n_trees=1, max_blocks=2, feature_names=NAMES).fit(X, y)
    for est in (clf, reg, named):
        with pytest.raises(InputError) as exc:
            est.predict(shuffled)
        assert "\n" not in str(exc.value) and "by name, in that order" in str(exc.value)
    with pytest.raises(InputError, match=r"lack \['lux'\]"):
        clf.predict(table.drop_columns(["lux"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an array is read by position, without a warning per call
        named.predict(X)
    with pytest.raises(InputError, match="differ from the columns of X"):
        AFRClassifier(groups, costs, feature_names=NAMES[::-1]).fit(table, y)


def test_the_exported_runtime_refuses_a_table_in_one_line(afr_export):
    pa = pytest.importorskip("pyarrow")
    from edgeseq.runtime.model import ExportedModel

    with pytest.raises(RuntimeInputError) as exc:
        ExportedModel(afr_export[1]).predict(pa.table({"ax": [1.0]}))
    assert "\n" not in str(exc.value) and "dict mapping group name" in str(exc.value)


def test_tree_model_files_saved_before_feature_names_still_load(afr_export, tmp_path):
    model = load_model(afr_export[0]).stage_model_
    object.__delattr__(model, "feature_names")  # what a file written before the field existed holds
    assert "feature_names" not in vars(model)
    save_model(model, tmp_path / "old.pkl")
    assert load_model(tmp_path / "old.pkl").feature_names is None


@pytest.fixture(scope="module")
def lgbm_files(data):
    lightgbm = pytest.importorskip("lightgbm")
    d, X, y = data
    params = {"objective": "multiclass", "num_class": 3, "verbose": -1, "num_leaves": 4, "min_data_in_leaf": 5}
    named = lightgbm.train(params, lightgbm.Dataset(X, y, feature_name=NAMES), 8)
    named.save_model(str(d / "named.txt"))
    (d / "named.json").write_text(json.dumps(named.dump_model()))
    unnamed = lightgbm.train(params, lightgbm.Dataset(X, y), 8)
    unnamed.save_model(str(d / "unnamed.txt"))
    with open(d / "booster.pkl", "wb") as f:
        pickle.dump(named, f)
    return d, named


@pytest.mark.parametrize("src", ["named.txt", "named.json"])
def test_import_lightgbm_records_the_booster_names_and_runs_by_name(data, lgbm_files, src):
    d, booster = lgbm_files
    _, X, y = data
    model_file, out = d / f"lgb_{src}.pkl", d / f"lgb_{src}_out"
    res = invoke("import-lightgbm", d / src, "--groups", d / "groups.json", "-o", model_file)
    assert res.exit_code == 0, res.output
    model = load_model(model_file)
    assert model.feature_names == tuple(NAMES)
    assert np.allclose(model.predict(X), booster.predict(X))  # the independent reference: LightGBM itself
    assert invoke("export", model_file, out, "--quiet").exit_code == 0
    for src_csv in ("train.csv", "shuffled.csv"):
        assert invoke("run", out, d / src_csv, "-o", d / f"lpred_{src_csv}").exit_code == 0
    assert predictions(d / "lpred_shuffled.csv") == predictions(d / "lpred_train.csv")
    assert predictions(d / "lpred_train.csv") == [str(v) for v in booster.predict(X).argmax(1)]


def test_import_lightgbm_checks_groups_against_the_booster_names(lgbm_files, tmp_path):
    d, _ = lgbm_files
    bad = {"groups": [{"name": "imu", "columns": ["ax", "ayy"], "cost": 1.0}]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    line = one_line_error(invoke("import-lightgbm", d / "named.txt", "--groups", tmp_path / "bad.json",
                                 "-o", tmp_path / "m.pkl"))
    assert "unknown column 'ayy'; did you mean 'ay'?" in line
    line = one_line_error(invoke("import-lightgbm", d / "unnamed.txt", "--groups", d / "groups.json",
                                 "-o", tmp_path / "m.pkl"))
    assert "no column names: use 0-based indices" in line
    by_index = {"groups": [{"name": g["name"], "columns": [NAMES.index(c) for c in g["columns"]], "cost": g["cost"]}
                           for g in GROUPS]}
    (tmp_path / "idx.json").write_text(json.dumps(by_index))
    assert invoke("import-lightgbm", d / "unnamed.txt", "--groups", tmp_path / "idx.json", "-o",
                  tmp_path / "m.pkl", "--quiet").exit_code == 0
    assert load_model(tmp_path / "m.pkl").feature_names is None  # Column_0.. are placeholders, not names


def test_from_lightgbm_feature_names_argument(lgbm_files):
    from edgeseq import from_lightgbm

    _, booster = lgbm_files
    groups, costs = [[0, 1], [2, 3], [4, 5]], [1.0, 2.0, 4.0]
    assert from_lightgbm(booster, groups, costs, feature_names=NAMES).feature_names == tuple(NAMES)
    with pytest.raises(InputError, match="differ from the LightGBM model's feature names"):
        from_lightgbm(booster, groups, costs, feature_names=NAMES[::-1])


@pytest.mark.parametrize("src", ["named.txt", "booster.pkl"])
def test_lightgbm_files_given_as_edgeseq_models_point_to_the_import(lgbm_files, tmp_path, src):
    d, _ = lgbm_files
    line = one_line_error(invoke("export", d / src, tmp_path / "out"))
    assert "edgeseq import-lightgbm" in line and "from_lightgbm" in line
    with pytest.raises(ModelFormatError, match="import-lightgbm"):
        load_model(d / src)


def test_train_model_choice_is_checked(data, tmp_path):
    d, *_ = data
    base = ["train", d / "train.csv", "--target", "label", "--groups", d / "groups.json", "-o", tmp_path / "m.pkl"]
    res = invoke(*base, "--model", "afr", "--method", "fr")
    assert res.exit_code == 2 and "--method: only for --model linear" in res.output
    res = invoke(*base, "--model", "afr", "--task", "regression")
    assert res.exit_code == 2 and "--model afr learns classification, not regression" in res.output


def test_classification_mistakes_are_caught(data, tmp_path):
    d, X, y = data
    rows = ["x0,x1,y"] + [f"{float(a)!r},{float(b)!r},{100 + 3 * a + b:.1f}" for a, b in X[:, :2]]
    (tmp_path / "cont.csv").write_text("\n".join(rows) + "\n")
    groups = {"groups": [{"name": "a", "columns": ["x0"], "cost": 1}, {"name": "b", "columns": ["x1"], "cost": 2}]}
    (tmp_path / "g.json").write_text(json.dumps(groups))
    line = one_line_error(invoke("train", tmp_path / "cont.csv", "--target", "y", "--groups", tmp_path / "g.json",
                                 "--task", "classification", "-o", tmp_path / "m.pkl"))
    assert "distinct values in 160 rows" in line and "--task regression" in line
    assert not (tmp_path / "m.pkl").exists()
    # labels 0/1/2 without --task: a regression is trained, with a one-line warning saying how to choose
    res = CliRunner().invoke(main, [str(a) for a in ("train", d / "train.csv", "--target", "label", "--groups",
                                                     d / "groups.json", "-o", tmp_path / "r.pkl", "--quiet")])
    assert res.exit_code == 0, res.output
    warn = [ln for ln in res.output.splitlines() if ln.startswith("warning:")]
    assert len(warn) == 1 and "3 distinct integer values (0, 1, 2)" in warn[0] and "--task classification" in warn[0]
    res = invoke("train", d / "train.csv", "--target", "label", "--groups", d / "groups.json", "--task",
                 "regression", "-o", tmp_path / "r.pkl", "--quiet")
    assert res.exit_code == 0 and "warning" not in res.output  # said explicitly: no warning
    res = invoke("train", d / "train.csv", "--target", "label", "--groups", d / "groups.json", "--task",
                 "classification", "-o", tmp_path / "c.pkl", "--quiet")
    assert res.exit_code == 0, res.output  # 3 classes in 160 rows is plausible


def test_export_refuses_a_non_empty_directory_before_loading_anything(afr_export, tmp_path, monkeypatch):
    import edgeseq.io.model_io as model_io

    def must_not_load(*a, **k):
        raise AssertionError("the model was loaded before the target was checked")

    monkeypatch.setattr(model_io, "load_model", must_not_load)
    (tmp_path / "notes.txt").write_text("mine")
    line = one_line_error(invoke("export", afr_export[0], tmp_path))
    assert "is not empty" in line and "--force" in line
    line = one_line_error(invoke("export", afr_export[0], tmp_path, "--force"))
    assert "nothing was deleted" in line and (tmp_path / "notes.txt").exists()
    # negative control: an empty target does get to loading the model
    with pytest.raises(AssertionError, match="was loaded"):
        invoke("export", afr_export[0], tmp_path / "fresh")


def test_report_reads_a_reordered_table_by_name(data, lgbm_files, tmp_path):
    d, *_ = data
    model = tmp_path / "lgb.pkl"  # (a report on an AFR model file is issue 24's, not this test's)
    assert invoke("import-lightgbm", d / "named.txt", "--groups", d / "groups.json", "-o", model).exit_code == 0
    curves = {}
    for src in ("train.csv", "shuffled.csv"):
        res = invoke("report", model, d / src, "--target", "label", "-o", tmp_path / src, "--no-plots",
                     "--quiet")
        assert res.exit_code == 0, res.output
        doc = json.loads((tmp_path / src / "report.json").read_text())
        curves[src] = next(iter(doc["curves"].values()))
    assert curves["shuffled.csv"]["accuracy"] == curves["train.csv"]["accuracy"]
    assert curves["train.csv"]["accuracy"][-1] > 0.8
    rows = (d / "shuffled.csv").read_text().splitlines()
    (tmp_path / "cut.csv").write_text("\n".join(",".join(r.split(",")[1:]) for r in rows) + "\n")
    line = one_line_error(invoke("report", model, tmp_path / "cut.csv", "--target", "label", "-o",
                                 tmp_path / "cut", "--no-plots"))
    assert "the model's column(s) ['temp'] are not in the file's columns" in line


def test_messages_name_columns_and_groups_when_names_exist(data, afr_export, tmp_path):
    from edgeseq import AnytimeRegressor
    from edgeseq.errors import GroupSpecError

    d, X, y = data
    text = (d / "train.csv").read_text().splitlines()
    cells = text[1].split(",")
    cells[NAMES.index("mic")] = "nan"
    (tmp_path / "nan.csv").write_text("\n".join([text[0], ",".join(cells)] + text[2:]) + "\n")
    line = one_line_error(invoke("train", tmp_path / "nan.csv", "--target", "label", "--groups", d / "groups.json",
                                 "--task", "regression", "-o", tmp_path / "m.pkl"))
    assert "NaN or Inf in column(s) 'mic' of the groups" in line
    with pytest.raises(GroupSpecError, match="column 'ay' appears in groups 'imu' and 'audio'"):
        AnytimeRegressor([[0, 1], [1, 2]], [1.0, 2.0], group_names=["imu", "audio"], feature_names=NAMES).fit(X, y)
    with pytest.raises(GroupSpecError, match="column 1 appears in groups 0 and 1"):  # no names: indices
        AnytimeRegressor([[0, 1], [1, 2]], [1.0, 2.0]).fit(X, y)
    est = load_model(afr_export[0])
    bad = X[:2].copy()
    bad[0, NAMES.index("hum")] = np.nan
    with pytest.raises(InputError, match="column\\(s\\) 'hum' that this stage uses"):
        est.predict(bad)
    seq = AnytimeRegressor([[0, 1], [2, 3]], [1.0, 2.0], feature_names=NAMES).fit(X, y)
    with pytest.raises(InputError, match="column\\(s\\) 'ax' that the prediction uses"):
        seq.predict(np.where(np.arange(6) == 0, np.nan, X[:2]))


def test_import_lightgbm_reads_text_models_without_lightgbm(data, lgbm_files, tmp_path, monkeypatch):
    """A text model given to the CLI is read by edgeseq's own bounded reader: LightGBM's parser (which a
    hostile file would otherwise reach) is never called, and the import still equals LightGBM's predict."""
    lgb = pytest.importorskip("lightgbm")
    d, booster = lgbm_files
    _, X, _ = data

    def refuse(*args, **kwargs):
        raise AssertionError("LightGBM's own parser was called")

    monkeypatch.setattr(lgb, "Booster", refuse)
    res = invoke("import-lightgbm", d / "named.txt", "--groups", d / "groups.json", "-o", tmp_path / "m.pkl")
    assert res.exit_code == 0, res.output
    model = load_model(tmp_path / "m.pkl")
    assert model.feature_names == tuple(NAMES)
    assert np.allclose(model.predict(X), booster.predict(X))
