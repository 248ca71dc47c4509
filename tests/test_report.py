"""Reports: Markdown/JSON contents against hand-computed numbers, hostile names, plots or their
explicit skip, and `edgeseq report` end to end on a fitted model."""

import builtins
import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from edgeseq.cli import main
from edgeseq.metrics.curves import AnytimeCurve
from edgeseq.errors import InputError
from edgeseq.evaluate.anytime import anytime_curve
from edgeseq.evaluate.report import md_escape, write_report
from edgeseq.metrics.timeliness import alpha_stopping_cost, plateau_alpha, timeliness

try:
    import matplotlib  # noqa: F401
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False


def _curves():
    ref = AnytimeCurve(costs=[0, 10, 30], values=[0, 0.99, 1.0], group_names=("a", "b"), label="ref")
    other = AnytimeCurve(costs=[0, 5, 30], values=[0, 0.2, 0.9], group_names=("b", "a"), label="other",
                         accuracy=[0.1, 0.5, 0.8], log_loss=[2.3, 1.0, 0.5])
    return {"ref": ref, "other": other}


def _table_rows(md: str, header_start: str) -> list[str]:
    lines = md.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith(header_start))
    rows = []
    for ln in lines[i + 2:]:
        if not ln.startswith("|"):
            break
        rows.append(ln)
    return rows


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]  # split on unescaped pipes


def test_report_numbers_by_hand(tmp_path):
    files = write_report(_curves(), tmp_path, reference="ref")
    # plateau rule on ref: 99% at cost 10, the last 1% costs 20 > 20% of 30 -> α = .99, c_α = 10
    assert files.alpha == 0.99 and files.c_alpha == 10.0
    md = files.markdown.read_text()
    rows = {(_cells(r)[0]): _cells(r) for r in _table_rows(md, "| method")}
    # ref: step 0 on [0,10) -> 0; trapezoid .99·10/2 / 10 = .495
    assert rows["ref"][2:4] == ["0.0000", "0.4950"]
    # other: step .2 on [5,10) -> .1; trapezoid .2·5/2 + (.2 + .2 + .7·5/25)/2·5 = .5 + 1.35 = 1.85 -> .185
    assert rows["other"][2:4] == ["0.1000", "0.1850"]
    per_prefix = [_cells(r) for r in _table_rows(md, "| step | group | cost | cumulative cost | F | accuracy")]
    assert per_prefix[2] == ["2", "a", "25.0000", "30.0000", "0.9000", "0.8000", "0.5000"]
    data = json.loads(files.json.read_text())
    assert data["c_alpha"] == 10.0 and data["curves"]["other"]["accuracy"] == [0.1, 0.5, 0.8]
    assert data["summary"][1]["timeliness_trapezoid"] == pytest.approx(0.185)


def test_given_alpha_and_reference_curve_object(tmp_path):
    curves = _curves()
    files = write_report(curves, tmp_path, reference=curves["other"], alpha=0.5)
    assert files.c_alpha == 30.0  # .45 is first reached at the last point of "other"
    with pytest.raises(InputError, match="reference"):
        write_report(curves, tmp_path, reference="nope")
    with pytest.raises(InputError, match="at least one"):
        write_report({}, tmp_path)
    with pytest.raises(InputError, match="not an AnytimeCurve"):
        write_report({"x": [0, 1]}, tmp_path)


@pytest.mark.skipif(not HAVE_MPL, reason="matplotlib (the 'plots' extra) is not installed")
def test_plots_are_png_files(tmp_path):
    files = write_report(_curves(), tmp_path, reference="ref", title="costs in $ (not mathtext $x")
    assert [p.name for p in files.plots] == ["anytime_curves.png", "anytime_accuracy.png"]
    for p in files.plots:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![anytime_curves](anytime_curves.png)" in files.markdown.read_text()
    assert files.plots_skipped is None


def test_without_matplotlib_tables_are_written_and_the_skip_is_said(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_mpl(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_mpl)
    files = write_report(_curves(), tmp_path, reference="ref")
    assert files.plots == [] and "matplotlib is not installed" in files.plots_skipped
    assert "Plots: skipped (matplotlib is not installed" in files.markdown.read_text()
    assert not list(tmp_path.glob("*.png"))


def test_hostile_group_names_stay_inside_their_cell(tmp_path):
    evil = "a|b\n## <script>alert(1)</script> `x` *y* [l](http://e)"
    c = AnytimeCurve(costs=[0, 1, 2], values=[0, 0.5, 1.0], group_names=(evil, "ok"), label="m|x")
    files = write_report({"m|x": c}, tmp_path, plots=False)
    md = files.markdown.read_text()
    assert "<script>" not in md and "\n## <" not in md
    rows = [_cells(r) for r in _table_rows(md, "| step | group")]
    assert all(len(r) == 5 for r in rows)
    assert rows[1][1] == md_escape(evil)
    assert md_escape("x|y") == "x\\|y" and md_escape("<b>") == "&lt;b&gt;"


def _fit_and_save(tmp_path):
    from sklearn.datasets import load_diabetes

    from edgeseq import AnytimeRegressor
    from edgeseq.io.model_io import save_model
    X, y = load_diabetes(return_X_y=True)
    groups = [[0, 1], [2], [3], [4, 5, 6, 7], [8], [9]]
    reg = AnytimeRegressor(groups=groups, costs=[1, 2, 3, 4, 1, 2]).fit(X[:300], y[:300])
    save_model(reg, tmp_path / "model.pkl")
    np.savez(tmp_path / "test.npz", X=X[300:], y=y[300:])
    np.savez(tmp_path / "train.npz", X=X[:300], y=y[:300])
    return reg, X, y


def test_cli_report_end_to_end(tmp_path):
    reg, X, y = _fit_and_save(tmp_path)
    out = tmp_path / "rep"
    res = CliRunner().invoke(main, ["report", str(tmp_path / "model.pkl"), str(tmp_path / "test.npz"),
                                    "-o", str(out), "--no-plots"])
    assert res.exit_code == 0, res.output
    test_curve = anytime_curve(reg, X[300:], y[300:])
    train_curve = AnytimeCurve(costs=reg.cum_cost_, values=reg.train_curve_, group_names=test_curve.group_names)
    a = plateau_alpha(train_curve)
    ca = alpha_stopping_cost(train_curve, a)
    data = json.loads((out / "report.json").read_text())
    assert data["alpha"] == a and data["c_alpha"] == ca
    row = data["summary"][0]
    assert row["curve"] == "omp on test.npz"
    assert row["timeliness_step"] == pytest.approx(timeliness(test_curve, ca, "step"), rel=1e-12)
    np.testing.assert_allclose(data["curves"]["omp on test.npz"]["values"], test_curve.values, rtol=1e-12)
    assert f"timeliness step {timeliness(test_curve, ca):.4f}" in res.output
    assert "plots skipped (--no-plots)" in res.output.splitlines()
    assert "Plots: skipped (not requested)." in (out / "report.md").read_text()


def test_cli_report_with_training_data_and_errors(tmp_path):
    _fit_and_save(tmp_path)
    out = tmp_path / "rep2"
    res = CliRunner().invoke(main, ["report", str(tmp_path / "model.pkl"), str(tmp_path / "test.npz"),
                                    "-o", str(out), "--train-data", str(tmp_path / "train.npz"),
                                    "--alpha", "0.9", "--quiet", "--no-plots"])
    assert res.exit_code == 0, res.output
    data = json.loads((out / "report.json").read_text())
    assert data["alpha"] == 0.9 and data["reference"] == "omp on train.npz"
    res = CliRunner().invoke(main, ["report", str(tmp_path / "missing.pkl"), str(tmp_path / "test.npz"),
                                    "-o", str(out)])
    assert isinstance(res.exception, SystemExit) and res.exit_code != 0 and "does not exist" in res.output
    np.savez(tmp_path / "bad.npz", X=np.zeros((5, 3)), y=np.arange(5.0))
    res = CliRunner().invoke(main, ["report", str(tmp_path / "model.pkl"), str(tmp_path / "bad.npz"),
                                    "-o", str(out)])
    assert isinstance(res.exception, SystemExit) and res.exit_code != 0 and "shape (n, 10)" in res.output


@pytest.mark.parametrize("where", ["under_a_file", "under_dev_null"])
def test_cli_report_unwritable_output_is_one_line_naming_the_path(tmp_path, where):
    _fit_and_save(tmp_path)
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "rep" if where == "under_a_file" else Path("/dev/null/x")
    res = CliRunner().invoke(main, ["report", str(tmp_path / "model.pkl"), str(tmp_path / "test.npz"),
                                    "-o", str(out), "--no-plots"])
    assert isinstance(res.exception, SystemExit) and res.exit_code != 0, res.exception
    assert f"InputError: cannot write the report to {out}" in res.output
    assert (tmp_path / "afile").read_text() == "x"


def test_write_report_unwritable_file_names_it(tmp_path):
    (tmp_path / "report.md").mkdir()  # a directory where the Markdown file must go
    with pytest.raises(InputError, match=re.escape(f"cannot write {tmp_path / 'report.md'}")):
        write_report(_curves(), tmp_path, reference="ref", plots=False)


def test_sparse_and_estimator_curves_in_one_report(tmp_path):
    from sklearn.datasets import load_diabetes

    from edgeseq import AnytimeRegressor
    from edgeseq.train.linear.sparse import sparse_path
    X, y = load_diabetes(return_X_y=True)
    groups, costs = [[0, 1], [2], [3], [4, 5, 6, 7], [8], [9]], [1, 2, 3, 4, 1, 2]
    reg = AnytimeRegressor(groups=groups, costs=costs).fit(X, y)
    sp = sparse_path(X, y, groups, costs, n_lambdas=20)
    curves = {"CS-G-OMP": anytime_curve(reg, X, y), "Sparse": anytime_curve(sp.path_sequence, X, y),
              "Sparse refit": anytime_curve(sp.refit_sequence, X, y)}
    files = write_report(curves, tmp_path, reference="CS-G-OMP", plots=False)
    assert [r["curve"] for r in files.summary] == list(curves)
    assert files.markdown.read_text().count("per prefix") == 3


def test_cli_report_for_a_classifier_says_where_the_stopping_cost_came_from(tmp_path):
    from sklearn.datasets import load_breast_cancer

    from edgeseq import AnytimeClassifier
    from edgeseq.io.model_io import save_model
    X, y = load_breast_cancer(return_X_y=True)
    clf = AnytimeClassifier(groups=[[i, i + 10, i + 20] for i in range(4)], costs=[1, 2, 3, 4]).fit(X[:250], y[:250])
    save_model(clf, tmp_path / "clf.pkl")
    np.savez(tmp_path / "test.npz", X=X[250:], y=y[250:])
    out = tmp_path / "rep"
    res = CliRunner().invoke(main, ["report", str(tmp_path / "clf.pkl"), str(tmp_path / "test.npz"),
                                    "-o", str(out), "--no-plots"])
    assert res.exit_code == 0, res.output
    md = (out / "report.md").read_text()
    assert "stores no training curve" in md and "| accuracy | log-loss |" in md
    data = json.loads((out / "report.json").read_text())
    curve = data["curves"]["omp on test.npz"]
    expected = [float(np.mean(clf.predict(X[250:], prefix=j) == y[250:])) for j in range(5)]
    np.testing.assert_allclose(curve["accuracy"], expected)


@pytest.mark.parametrize("kind", ["identity", "softmax"])
def test_anytime_curve_of_a_tree_model_is_its_stages(kind):
    """One point per stage; values, accuracy and log-loss recomputed here from the stages' predictions."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from tree_models import data, lightgbm_model
    model = lightgbm_model(kind)
    X, s = data(200, seed=9)
    y = s if kind == "identity" else np.digitize(s, [-0.5, 0.5])
    curve = anytime_curve(model, X, y)
    np.testing.assert_array_equal(curve.costs, model.cum_cost)
    assert curve.group_names == tuple(" + ".join(model.group_names[g] for g in st.new_groups)
                                      for st in model.stages[1:])
    for k in range(len(model.stages)):
        p = model.predict(X, stage=k)
        if kind == "identity":
            want = 1 - np.sum((y - p[:, 0]) ** 2) / np.sum((y - y.mean()) ** 2)
        else:
            onehot = np.eye(3)[y]
            want = 1 - np.sum((onehot - p) ** 2) / np.sum((onehot - onehot.mean(axis=0)) ** 2)
            assert curve.accuracy[k] == pytest.approx(np.mean(p.argmax(axis=1) == y), abs=1e-12)
            assert curve.log_loss[k] == pytest.approx(-np.mean(np.log(p[np.arange(len(y)), y])), rel=1e-9)
        assert curve.values[k] == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_cli_report_on_a_tree_model(tmp_path):
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from tree_models import data, lightgbm_model
    from edgeseq.io.model_io import save_model
    model = lightgbm_model("softmax")
    save_model(model, tmp_path / "trees.pkl")
    X, s = data(150, seed=10)
    np.savez(tmp_path / "test.npz", X=X, y=np.digitize(s, [-0.5, 0.5]))
    res = CliRunner().invoke(main, ["report", str(tmp_path / "trees.pkl"), str(tmp_path / "test.npz"),
                                    "-o", str(tmp_path / "rep"), "--no-plots"])
    assert res.exit_code == 0, res.output
    data_ = json.loads((tmp_path / "rep" / "report.json").read_text())
    curve = data_["curves"]["tree stages on test.npz"]
    assert curve["costs"] == model.cum_cost.tolist() and len(curve["values"]) == len(model.stages)
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "stages over 4 groups" in md and "timeliness" in res.output


def test_plots_keep_one_colour_per_method_show_the_prior_and_explain_themselves(tmp_path, monkeypatch):
    plt = pytest.importorskip("matplotlib.pyplot")
    figs, close = [], plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: (figs.append(fig), close(fig)))
    c, g = [0.0, 1.0, 3.0, 6.0], ("a", "b", "c")
    curves = {  # accuracy only on some curves: the second plot has fewer lines than the first
        "Oracle": AnytimeCurve(costs=c, values=[-0.2, 0.7, 0.85, 0.9], group_names=g),
        "Sparse": AnytimeCurve(costs=c, values=[-0.2, 0.5, 0.7, 0.9], group_names=g, accuracy=[0.4, 0.7, 0.8, 0.9]),
        "CS-G-OMP": AnytimeCurve(costs=c, values=[-0.2, 0.6, 0.82, 0.9], group_names=g,
                                 accuracy=[0.4, 0.78, 0.88, 0.9]),
    }
    files = write_report(curves, tmp_path, reference="CS-G-OMP", main=("CS-G-OMP",), bounds=("Oracle",))
    assert [p.name for p in files.plots] == ["anytime_curves.png", "anytime_accuracy.png"] and len(figs) == 2
    seen = {}
    for fig in figs:
        ax = fig.axes[0]
        lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("stopping")}
        for key, ln in lines.items():
            assert seen.setdefault(key, ln.get_color()) == ln.get_color(), key  # same colour in every plot
        thick = lines["CS-G-OMP"]
        assert all(thick.get_linewidth() > ln.get_linewidth() and thick.get_zorder() > ln.get_zorder()
                   for k, ln in lines.items() if k != "CS-G-OMP")
        assert "Oracle" not in lines or lines["Oracle"].get_linestyle() == ":"  # a bound, drawn dotted
        prior = min(float(np.min(ln.get_ydata())) for ln in lines.values())
        assert ax.get_ylim()[0] < prior  # the prior (prefix 0) is inside the axes, not cut off
        words = " ".join([ax.get_ylabel(), ax.get_xlabel()] + [t.get_text() for t in ax.get_legend().get_texts()])
        assert "α" not in words and not words.split("(")[0].strip().endswith(" F")  # no symbols as labels
        caption = " ".join(t.get_text() for t in fig.texts)
        assert "stopping budget" in caption and "CS-G-OMP first reaches" in caption
    assert len(set(seen.values())) == 3 and lines["Sparse"].get_color() == seen["Sparse"]
    assert "stopping budget" in files.markdown.read_text()
    # negative control: without `main`, the first curve is the one drawn on top
    figs.clear()
    write_report(curves, tmp_path / "default", reference="CS-G-OMP")
    lines = {ln.get_label(): ln for ln in figs[0].axes[0].get_lines()}
    assert lines["Oracle"].get_linewidth() > lines["Sparse"].get_linewidth()
