"""CLI: train -> export -> inspect on scikit-learn's breast cancer data (10 measurement groups of
mean / standard error / worst), through click's runner and once as a real subprocess; clear one-line
errors for bad input."""

from __future__ import annotations

import csv
import json
import pickle
import re
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from sklearn.datasets import load_breast_cancer

from edgeseq.cli import main
from edgeseq.format import read_verified
from edgeseq.io.model_io import load_model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bc")
    bc = load_breast_cancer()
    names = list(bc.feature_names)
    with open(d / "bc.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["diagnosis"] + names)  # target first: GROUPS.json indices refer to the header
        for row, t in zip(bc.data, bc.target):
            w.writerow([int(t)] + [repr(float(v)) for v in row])
    measures = [n[len("mean "):] for n in names[:10]]
    groups = [{"name": m, "columns": [f"mean {m}", f"{m} error", f"worst {m}"], "cost": 1.0 + (i % 4)}
              for i, m in enumerate(measures)]
    (d / "groups.json").write_text(json.dumps({"groups": groups, "measured_on": "transcribed"}))
    np.savez(d / "bc.npz", X=bc.data, y=bc.target.astype(float), feature_names=np.array(names))
    by_index = [{"name": m, "columns": [i, i + 10, i + 20], "cost": 1.0 + (i % 4)} for i, m in enumerate(measures)]
    (d / "groups_idx.json").write_text(json.dumps({"groups": by_index}))
    return d, bc


def _runner() -> CliRunner:
    """stdout and stderr kept apart (click < 8.2 needs mix_stderr=False; 8.2+ always separates)."""
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def invoke(*args):
    return _runner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_train_export_inspect_with_click_runner(files, tmp_path):
    d, bc = files
    res = invoke("train", "--task", "regression", d / "bc.csv", "--target", "diagnosis", "--groups", d / "groups.json",
                 "--method", "fr", "-o", tmp_path / "m.pkl")
    assert res.exit_code == 0, res.output
    assert "explained_variance" in res.output and "mean radius" not in res.output  # group names, not columns
    est = load_model(tmp_path / "m.pkl")
    assert est.fitted_sequence_.feature_names == tuple(bc.feature_names)
    res = invoke("export", tmp_path / "m.pkl", tmp_path / "out", "--c-prefix", "bc_model")
    assert res.exit_code == 0, res.output
    m = read_verified(tmp_path / "out")
    assert m["c"]["prefix"] == "bc_model" and m["model_name"] == "m" and len(m["groups"]) == 10
    assert m["groups"][0]["column_names"][0].startswith("mean ")
    # the exported full-budget graph reproduces the trained estimator on the real data
    last = m["prefixes"][-1]
    sess = ort.InferenceSession(str(tmp_path / "out" / last["file"]), providers=["CPUExecutionProvider"])
    feed = {g["input_name"]: bc.data[:, g["columns"]].astype(np.float32) for g in m["groups"]}
    np.testing.assert_allclose(sess.run(["y"], feed)[0].ravel(), est.predict(bc.data), atol=1e-4)
    res = invoke("inspect", tmp_path / "out")
    assert res.exit_code == 0 and "prefix_010.onnx" in res.output and "concave points" in res.output
    res = invoke("inspect", tmp_path / "out", "--json")
    assert json.loads(res.output) == m


def test_npz_index_groups_and_plain_pickle(files, tmp_path):
    d, bc = files
    res = invoke("train", "--task", "regression", d / "bc.npz", "--groups", d / "groups_idx.json", "--doubling", "--no-whiten",
                 "--l2", "0.01", "-o", tmp_path / "m.pkl", "--quiet")
    assert res.exit_code == 0, res.output
    est = load_model(tmp_path / "m.pkl")
    (tmp_path / "plain.pkl").write_bytes(pickle.dumps(est))  # what a Python user writes
    res = invoke("export", tmp_path / "plain.pkl", tmp_path / "out")
    assert res.exit_code == 0, res.output
    assert read_verified(tmp_path / "out")["provenance"]["doubling"] is True


@pytest.mark.parametrize("case", ["unknown_column", "bad_json", "bad_target", "not_empty", "evil_pickle",
                                  "index_out_of_range", "target_as_feature"])
def test_errors_are_one_line_and_nonzero(files, tmp_path, case):
    d, _ = files
    groups = d / "groups.json"
    args = ["train", d / "bc.csv", "--target", "diagnosis", "--groups", groups, "-o", tmp_path / "m.pkl",
            "--task", "regression"]
    spec = {"unknown_column": {"groups": [{"name": "a", "columns": ["no such"], "cost": 1}]},
            "index_out_of_range": {"groups": [{"name": "a", "columns": [99], "cost": 1}]},
            "target_as_feature": {"groups": [{"name": "a", "columns": ["diagnosis"], "cost": 1}]}}
    if case in spec:
        (tmp_path / "g.json").write_text(json.dumps(spec[case]))
        args[5] = tmp_path / "g.json"
    elif case == "bad_json":
        (tmp_path / "g.json").write_text('{"groups": [')
        args[5] = tmp_path / "g.json"
    elif case == "bad_target":
        args[3] = "nope"
    elif case == "not_empty":
        assert invoke(*args).exit_code == 0
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "x").write_text("x")
        args = ["export", tmp_path / "m.pkl", tmp_path / "out"]
    elif case == "evil_pickle":
        (tmp_path / "evil.pkl").write_bytes(pickle.dumps(subprocess.Popen))
        args = ["export", tmp_path / "evil.pkl", tmp_path / "out"]
    res = invoke(*args)
    assert isinstance(res.exception, SystemExit) and res.exit_code != 0
    err = res.stderr.strip().splitlines()  # progress lines may come first; the error is one last line
    assert err[-1].startswith("Error:") and sum(e.startswith("Error:") for e in err) == 1, res.stderr
    quiet = invoke(*args, "--quiet")  # --quiet: that one line is all
    assert quiet.exit_code != 0 and quiet.stdout == "" and quiet.stderr.strip() == err[-1], quiet.stderr
    text = err[-1]
    expected = {"unknown_column": "unknown column 'no such'", "bad_json": "not valid JSON",
                "bad_target": "target column 'nope'", "not_empty": "--force", "evil_pickle": "forbidden global",
                "index_out_of_range": "out of range", "target_as_feature": "is the target"}[case]
    assert expected in text


def test_force_never_deletes_a_directory_that_is_not_an_export(files, tmp_path):
    d, _ = files
    assert invoke("train", "--task", "regression", d / "bc.npz", "--groups", d / "groups_idx.json", "-o", tmp_path / "m.pkl",
                  "--quiet").exit_code == 0
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    (home / "notes.txt").write_text("precious")
    res = invoke("export", tmp_path / "m.pkl", home, "--force")
    assert res.exit_code != 0 and "earlier edgeseq export" in res.stderr and "nothing was deleted" in res.stderr
    assert (home / "notes.txt").read_text() == "precious" and (home / "sub").is_dir()
    assert invoke("export", tmp_path / "m.pkl", tmp_path / "out").exit_code == 0
    assert invoke("export", tmp_path / "m.pkl", tmp_path / "out", "--force").exit_code == 0
    read_verified(tmp_path / "out")


@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("cell", ["", "   ", "\t"])
def test_empty_target_cells_are_refused_with_the_line(tmp_path, task, cell):
    """An empty label would otherwise become a class '' that the classifier learns and predicts."""
    from edgeseq.io.data import read_data
    from edgeseq.errors import InputError

    path = tmp_path / "d.csv"
    path.write_text(f"a,b,y\n1,2,0\n3,4,{cell}\n5,6,1\n7,8,{cell}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 3: the target 'y' is empty.*2 row\(s\).*lines 3, 5"):
        read_data(path, "y", task)
    path.write_text("a,b,y\n1,2,0\n3,4,1\n", encoding="utf-8")
    assert read_data(path, "y", task).y.tolist() == [0, 1]


def test_empty_string_labels_in_npz_are_refused(tmp_path):
    from edgeseq.io.data import read_data
    from edgeseq.errors import InputError

    np.savez(tmp_path / "d.npz", X=np.ones((3, 2)), y=np.array(["a", " ", "b"]))
    with pytest.raises(InputError, match=r"y\[1\] is an empty label"):
        read_data(tmp_path / "d.npz")


@pytest.mark.parametrize("cmd", ["train", "export", "inspect"])
def test_help(cmd):
    res = invoke(cmd, "--help")
    assert res.exit_code == 0 and "Usage:" in res.output


def test_real_subprocess(files, tmp_path):
    d, _ = files
    cli = [sys.executable, "-c", "from edgeseq.cli import main; main()"]
    run = lambda *a: subprocess.run(cli + [str(x) for x in a], capture_output=True, text=True, timeout=120)  # noqa: E731
    r = run("train", "--task", "regression", d / "bc.csv", "--target", "diagnosis", "--groups", d / "groups.json", "-o", tmp_path / "m.pkl")
    assert r.returncode == 0, r.stderr
    r = run("export", tmp_path / "m.pkl", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    r = run("inspect", tmp_path / "out")
    assert r.returncode == 0 and "prefix_000.onnx" in r.stdout
    (tmp_path / "out" / "prefix_003.onnx").write_bytes(b"tampered")
    r = run("inspect", tmp_path / "out")
    assert r.returncode != 0 and "prefix_003.onnx" in r.stderr and "Traceback" not in r.stderr


def test_classification_train_export(files, tmp_path):
    """--task classification: the diagnosis labels (0/1 integers) become classes; the exported
    graphs' probabilities match predict_proba for every prefix."""
    d, bc = files
    res = invoke("train", "--task", "regression", d / "bc.csv", "--target", "diagnosis", "--groups", d / "groups.json",
                 "--task", "classification", "-o", tmp_path / "c.pkl")
    assert res.exit_code == 0 and "accuracy" in res.output, res.output
    assert invoke("export", tmp_path / "c.pkl", tmp_path / "out").exit_code == 0
    est = load_model(tmp_path / "c.pkl")
    m = read_verified(tmp_path / "out")
    assert m["link"] == "sigmoid" and m["outputs"]["classes"] == [0, 1]
    for p in m["prefixes"]:
        j = p["index"]
        sess = ort.InferenceSession(str(tmp_path / "out" / p["file"]), providers=["CPUExecutionProvider"])
        feed = {g["input_name"]: bc.data[:, g["columns"]].astype(np.float32) for g in m["groups"][:j]}
        proba, label = sess.run(["proba", "label"], feed or {"n": np.zeros((len(bc.data), 1), np.float32)})
        ref = est.predict_proba(bc.data, prefix=j)
        np.testing.assert_allclose(proba, ref, atol=1e-4)
        clear = np.abs(ref[:, 1] - 0.5) > 1e-3
        np.testing.assert_array_equal(np.array([0, 1])[label][clear], est.predict(bc.data, prefix=j)[clear])


def test_data_and_groups_errors_name_the_problem(tmp_path):
    from edgeseq.io.data import read_data, read_groups
    from edgeseq.errors import GroupSpecError, InputError

    csv_path = tmp_path / "d.csv"
    bad_csv = {"a,b,y\n1,2,3\n4,x,6\n": "line 3, column 'b': 'x' is not a number",
               "a,b,y\n1,2,3\n4,5\n": "line 3: 2 fields",
               "a,a,y\n1,2,3\n": "repeated column names",
               "a,b,y\n1,2,cat\n": "'cat' is not a number.*classification"}
    for text, msg in bad_csv.items():
        csv_path.write_text(text)
        with pytest.raises(InputError, match=msg):
            read_data(csv_path, "y")
    with pytest.raises(InputError, match="--target"):
        read_data(csv_path)
    (tmp_path / "d.parquet").write_text("")
    with pytest.raises(InputError, match="unsupported data format"):
        read_data(tmp_path / "d.parquet", "y")
    np.savez(tmp_path / "obj.npz", X=np.array([[1, 2]], dtype=object), y=np.array([1.0]))
    with pytest.raises(InputError, match="without pickles"):
        read_data(tmp_path / "obj.npz")
    np.savez(tmp_path / "noy.npz", X=np.ones((3, 2)))
    with pytest.raises(InputError, match=r"lacks array\(s\) \['y'\]"):
        read_data(tmp_path / "noy.npz")

    csv_path.write_text("a,b,y\n1,2,3\n4,5,6\n")
    ds = read_data(csv_path, "y")
    np.testing.assert_array_equal(ds.X, [[1, 2], [4, 5]])
    bad = {"zero cost": {"groups": [{"name": "g", "columns": ["a"], "cost": 0}]},
           "says dim 3": {"groups": [{"name": "g", "columns": ["a"], "cost": 1, "dim": 3}]},
           "non-empty list 'columns'": {"groups": [{"name": "g", "columns": [], "cost": 1}]},
           "header name or a 0-based index": {"groups": [{"name": "g", "columns": [1.5], "cost": 1}]},
           "must hold": {"not_groups": []}}
    for msg, doc in bad.items():
        (tmp_path / "g.json").write_text(json.dumps(doc))
        with pytest.raises(GroupSpecError, match=msg.replace("zero cost", "cost 0")):
            read_groups(tmp_path / "g.json", ds)
    (tmp_path / "g.json").write_text(json.dumps({"groups": [{"name": "g", "columns": ["b", 0], "cost": 1}]}))
    assert read_groups(tmp_path / "g.json", ds).columns == [[1, 0]]


STAMP = re.compile(r"^\[\s*(\d+\.\d\d) s\] ")


def _stamps(stderr: str) -> list[float]:
    """Every stderr line must be a progress line; return their elapsed times."""
    lines = stderr.splitlines()
    assert lines and all(STAMP.match(line) for line in lines), stderr
    return [float(STAMP.match(line).group(1)) for line in lines]


def test_progress_goes_to_stderr_and_quiet_silences_it(files, tmp_path):
    d, bc = files
    args = ["train", "--task", "regression", d / "bc.csv", "--target", "diagnosis", "--groups", d / "groups.json", "-o", tmp_path / "m.pkl"]
    res = invoke(*args)
    assert res.exit_code == 0, res.stderr
    t = _stamps(res.stderr)
    assert t == sorted(t)
    n, D = bc.data.shape
    for needed in (f"read data: {d / 'bc.csv'} ...", f"data: {n} rows x {D} feature columns",
                   f"groups: 10 groups over {D} columns", "fit: AnytimeRegressor (method omp): statistics pass "
                   f"over {n} rows, then 10 selection steps ...", "fit: done in", "save: done in"):
        assert needed in res.stderr, res.stderr
    assert "explained_variance" in res.stdout and not STAMP.search(res.stdout) and "done in" not in res.stdout

    quiet = invoke(*args, "--quiet")
    assert quiet.exit_code == 0 and quiet.stdout == "" and quiet.stderr == ""
    assert load_model(tmp_path / "m.pkl").fitted_sequence_.n_prefixes == 11

    res = invoke("export", tmp_path / "m.pkl", tmp_path / "out")
    assert res.exit_code == 0, res.stderr
    _stamps(res.stderr)
    assert "load model:" in res.stderr and "export: 11 prefix graphs, C model and manifest to" in res.stderr
    assert "export: done in" in res.stderr and res.stdout.startswith(f"wrote {tmp_path / 'out'}: 11 prefix graphs")
    quiet = invoke("export", tmp_path / "m.pkl", tmp_path / "out2", "--quiet")
    assert quiet.exit_code == 0 and quiet.stdout == "" and quiet.stderr == ""
    assert len(read_verified(tmp_path / "out2")["prefixes"]) == 11


def test_progress_stage_times_and_failures(capsys):
    """With a fake clock: stamps are time since start, `done` carries the stage's own time, and a
    failing stage prints no `done` line; quiet prints nothing at all."""
    from edgeseq.cli.progress import Progress

    ticks = iter([10.0, 10.5, 11.0, 13.25, 13.25, 14.0, 15.0, 21.0])
    p = Progress(clock=lambda: next(ticks))
    with p.stage("fit", "3 steps"):
        pass
    with pytest.raises(ValueError), p.stage("save"):
        raise ValueError("disk full")
    p.say("end")
    assert capsys.readouterr().err.splitlines() == [
        "[   0.50 s] fit: 3 steps ...", "[   3.25 s] fit: done in 2.25 s", "[   4.00 s] save ...",
        "[  11.00 s] end"]
    q = Progress(quiet=True)
    with q.stage("fit"):
        q.say("x")
    assert capsys.readouterr() == ("", "")
