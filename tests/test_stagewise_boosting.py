"""AnytimeBoostingClassifier / AnytimeBoostingRegressor: the stagewise search against a plainly written
reference loop, the "never below linear" rule, and export -> verify -> runtimes like any tree model."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.metrics import log_loss

import edgeseq
from edgeseq.errors import InputError, NotFittedError
from edgeseq.forms.groups import check_groups
from edgeseq.train.trees.stagewise_boosting import (AnytimeBoostingClassifier, AnytimeBoostingRegressor, boost_stages,
                                              stage_model)

lgb = pytest.importorskip("lightgbm")

PARAMS = {"learning_rate": 0.3, "num_leaves": 4, "min_child_samples": 5, "num_threads": 1, "seed": 0}
GROUPS, COSTS = [[0, 1], [2, 3], [4, 5]], [1.0, 2.0, 3.0]


def _tiny(task: str, n: int = 240, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    if task == "multiclass":
        y = (X[:, 2] > 0).astype(int) + (X[:, 4] > 0.5).astype(int)
    else:
        y = (X[:, 2] + 0.5 * X[:, 4] * X[:, 5] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X[:160], y[:160], X[160:], y[160:]


def _reference(task, n_classes, Xf, yf, Xv, yv, groups, costs, max_rounds=30, stopping=5, probe=None, top=None,
               cap=None, rows=None):
    """The greedy search written out plainly: LightGBM from the current scores per candidate group,
    scored with scikit-learn's log-loss; returns (scores per stage, choices, final validation scores).

    With `probe` rounds: each candidate is scored by `probe` rounds on the paid columns plus its own
    (the lowest validation loss over those rounds, read round by round), and only the best one is
    grown with early stopping; without, every candidate is grown in full. With `top` as well, the
    candidates probed at an earlier stage are probed again only if among the `top` best by their latest score.
    With `cap`: a fit on more than `cap` columns samples `cap` of them per tree (feature_fraction). With
    `rows`: the probes train on those training rows only."""
    freq = np.bincount(yf, minlength=n_classes) / yf.size
    prior = np.log(freq[1] / freq[0])[None] if task == "binary" else np.log(freq)
    Ff, Fv = np.tile(prior, (len(yf), 1)), np.tile(prior, (len(yv), 1))

    def loss(F):
        p = 1 / (1 + np.exp(-F[:, 0])) if task == "binary" else np.exp(F) / np.exp(F).sum(axis=1, keepdims=True)
        return log_loss(yv, p, labels=list(range(n_classes)))

    params = {"objective": task, "metric": "binary_logloss" if task == "binary" else "multi_logloss",
              "verbose": -1, "deterministic": True, "force_row_wise": True, **PARAMS}
    if task == "multiclass":
        params["num_class"] = n_classes
    base = params

    def sampled(cols):
        return {**base, "feature_fraction": cap / len(cols)} if cap is not None and len(cols) > cap else base

    def grow(cols):
        params = sampled(cols)
        init_f = Ff[:, 0] if task == "binary" else Ff  # a 2-D init_score: LightGBM's own layout rule
        init_v = Fv[:, 0] if task == "binary" else Fv
        dtr = lgb.Dataset(Xf[:, cols], yf, init_score=init_f, params=params)
        dva = lgb.Dataset(Xv[:, cols], yv, init_score=init_v, reference=dtr, params=params)
        b = lgb.train(params, dtr, max_rounds, valid_sets=[dva], callbacks=[lgb.early_stopping(stopping, verbose=False)])
        it = b.best_iteration
        return (b.predict(Xf[:, cols], raw_score=True, num_iteration=it).reshape(len(yf), -1),
                b.predict(Xv[:, cols], raw_score=True, num_iteration=it).reshape(len(yv), -1))

    def probe_loss(cols):  # `probe` rounds, no early stopping; the best validation loss among them
        params = sampled(cols)
        r = np.arange(len(yf)) if rows is None else rows
        init_f = Ff[r, 0] if task == "binary" else Ff[r]
        b = lgb.train(params, lgb.Dataset(Xf[r][:, cols], yf[r], init_score=init_f, params=params), probe)
        return min(loss(Fv + b.predict(Xv[:, cols], raw_score=True, num_iteration=r).reshape(len(yv), -1))
                   for r in range(1, b.current_iteration() + 1))

    paid, all_scores, chosen, last = [], [], [], {}
    while len(paid) < len(groups):
        before, scores, fits = loss(Fv), {}, {}
        order = [g for g in range(len(groups)) if g not in paid]
        if probe is not None and top is not None:  # never probed first, then by the latest probe score
            order = [g for g in order if g not in last] + sorted((g for g in order if g in last), key=lambda g: -last[g])
        again = 0
        for g in order:
            if probe is not None and top is not None and g in last:
                if again == top:  # only the `top` best by their latest probe are probed again
                    break
                again += 1
            if probe is None:
                fits[g] = grow(sorted(c for h in paid + [g] for c in groups[h]))
                scores[(g,)] = (before - loss(Fv + fits[g][1])) / costs[g]
            else:
                scores[(g,)] = (before - probe_loss(sorted(c for h in paid + [g] for c in groups[h]))) / costs[g]
        last.update({c[0]: v for c, v in scores.items()})
        best = max(scores, key=scores.get)
        if probe is not None:
            fits[best[0]] = grow(sorted(c for h in paid + [best[0]] for c in groups[h]))
        if before - loss(Fv + fits[best[0]][1]) <= 0:
            break
        all_scores.append(scores)
        chosen.append(best)
        paid.append(best[0])
        Ff, Fv = Ff + fits[best[0]][0], Fv + fits[best[0]][1]
    return all_scores, chosen, Fv


@pytest.mark.parametrize("task,probe,top,cap", [("binary", None, None, None), ("multiclass", None, None, None),
                                                ("binary", 3, None, None), ("multiclass", 3, 1, None),
                                                ("binary", 3, None, 3), ("multiclass", 3, None, "rows")])
def test_stages_match_a_plainly_written_reference_loop(task, probe, top, cap):
    from edgeseq.train.trees.stagewise_boosting import probe_subsample

    Xf, yf, Xv, yv = _tiny(task)
    n_classes = int(yf.max()) + 1
    spec = check_groups(GROUPS, COSTS, None, 6)
    rows, cap = (100, None) if cap == "rows" else (None, cap)  # probes on 100 of the 160 training rows
    stages, prior, trace = boost_stages(Xf, yf, Xv, yv, spec, task, n_classes=n_classes,
                                        params={**PARAMS, "max_tree_columns": cap}, max_rounds=30, stopping_rounds=5,
                                        final_rounds=False, restart=False, probe_rounds=probe, probe_top=top,
                                        probe_rows=rows)
    ref_scores, ref_chosen, ref_Fv = _reference(task, n_classes, Xf, yf, Xv, yv, GROUPS, COSTS, probe=probe, top=top,
                                                cap=cap, rows=probe_subsample(len(yf), rows, PARAMS["seed"]))
    if cap is not None or rows is not None:  # not vacuous: sampling columns or rows changes the search's scores
        _, _, whole = boost_stages(Xf, yf, Xv, yv, spec, task, n_classes=n_classes, params=PARAMS, max_rounds=30,
                                   stopping_rounds=5, final_rounds=False, restart=False, probe_rounds=probe,
                                   probe_top=top)
        assert whole.scores[0] != trace.scores[0] or whole.scores[1] != trace.scores[1]
    assert trace.chosen == ref_chosen and len(ref_chosen) >= 2  # not vacuous: at least two stages chosen
    if top is not None:  # not vacuous: the lazy screen left a candidate unprobed at some stage
        assert any(len(got) < len(GROUPS) - k for k, got in enumerate(trace.scores))
    for got, want in zip(trace.scores, ref_scores):
        assert got.keys() == want.keys()
        np.testing.assert_allclose([got[k] for k in want], list(want.values()), rtol=1e-6, atol=1e-9)
    # the assembled tree stages reproduce LightGBM's raw scores (feature indices mapped back correctly)
    model = stage_model(stages, prior, spec, 6, task, tuple(str(c) for c in range(n_classes)))
    last = list(model.staged_decision(Xv))[-1]
    np.testing.assert_allclose(last, ref_Fv, rtol=1e-5, atol=1e-5)
    for s in model.stages[1:]:  # each stage reads only what it and earlier stages paid for
        used = model.ensemble.features_of_trees(range(s.tree_start, s.tree_stop))
        assert set(used.tolist()) <= set(model.columns_required(model.stages.index(s)).tolist())


def test_a_cross_group_interaction_is_found_as_a_pair():
    """No single group lowers the loss of y = [x0·x2 > 0] by more than noise; the pair is committed."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 6))
    y = (X[:, 0] * X[:, 2] > 0).astype(int)
    spec = check_groups(GROUPS, COSTS, None, 6)
    _, _, trace = boost_stages(X[:300], y[:300], X[300:450], y[300:450], spec, "binary", n_classes=2,
                               params={"num_threads": 1}, min_gain=0.02)
    assert trace.chosen[0] == (0, 1) and set(trace.scores[0]) == {(0, 1), (0, 2), (1, 2)}
    # control: with the default floor a cheap single group's noise gain may win first; either way
    # the estimator ends up paying the two groups that carry the signal and predicts it
    clf = AnytimeBoostingClassifier(GROUPS, COSTS, n_jobs=1, random_state=0).fit(X[:450], y[:450])
    assert clf.model_kind_ == "trees" and {0, 1} <= {g for s in clf.stage_groups_ for g in s}
    assert clf.score(X[450:], y[450:]) > 0.9


def test_never_below_linear_on_a_purely_linear_signal():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 8))
    w = np.array([1.0, 0.5, -1.0, 0.3, 0.8, -0.4, 0.6, 0.2])
    y = (X @ w + 0.3 * rng.normal(size=300) > 0).astype(int)
    groups, costs = [[0, 1], [2, 3], [4, 5], [6, 7]], [1.0, 1.0, 2.0, 2.0]
    clf = AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=0).fit(X, y)
    lin_val, tree_val = clf.validation_curve_linear_, clf.validation_curve_trees_
    assert clf.model_kind_ == "linear"
    # negative control: the trees alone fall below the linear curve somewhere on validation
    assert min(t - l for t, l in zip(tree_val, lin_val)) < 0
    # the kept model is the linear one refit on all rows: the same predictions, stage for stage
    ref = edgeseq.AnytimeClassifier(groups, costs).fit(X, y)
    for got, want in zip(clf.staged_predict_proba(X), ref.staged_predict_proba(X)):
        np.testing.assert_allclose(got, want)
    np.testing.assert_array_equal(clf.cum_cost_, ref.cum_cost_)
    with pytest.raises(AttributeError):
        clf.stage_model_  # noqa: B018  (a linear fit has no tree stages to export)
    off = AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=0, compare_linear=False).fit(X, y)
    assert off.model_kind_ == "trees"


def _xor_across_groups(n, seed):
    """(x0·x4 > 0) xor (x8 > 1), 5 % flipped: no stage before the three groups are all paid beats chance."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 12))
    y = ((X[:, 0] * X[:, 4] > 0) ^ (X[:, 8] > 1)).astype(int)
    return X, np.where(rng.random(n) < 0.05, 1 - y, y)


def test_tied_areas_keep_the_trees_that_win_at_full_budget(monkeypatch):
    """bench/boosting_refit.py's XOR across groups, split 0: the anytime areas tie at chance (the stage
    at the total cost has no weight in them), and a linear model at chance used to be kept over trees
    that classify the held-out rows well with every group paid."""
    from sklearn.model_selection import train_test_split
    from edgeseq.train.trees import stagewise_boosting as sb

    X, y = _xor_across_groups(6000, 1)
    Xa, Xt, ya, yt = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    groups, costs = [list(range(3 * g, 3 * g + 3)) for g in range(4)], [1.0, 2.0, 3.0, 8.0]
    lines = []
    clf = AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=0).fit(Xa, ya, progress=lines.append)
    cmp = clf.comparison_
    assert clf.model_kind_ == "trees" and cmp["kept_by"] == "full budget"
    # the areas tie: the trees' is not larger, and lower by less than a standard error
    assert -sb.AREA_TIE_Z * cmp["standard_error"] <= cmp["mean_difference"] <= 0
    assert cmp["full_budget_mean_difference"] > sb.FULL_BUDGET_Z * cmp["full_budget_standard_error"]
    assert any(line.startswith("the two curves tie within a standard error") for line in lines)
    assert clf.score(Xt, yt) > 0.9
    # control: without the full-budget test the same fit keeps the linear model, at chance
    monkeypatch.setattr(sb, "FULL_BUDGET_Z", np.inf)
    lin = AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=0).fit(Xa, ya)
    assert lin.model_kind_ == "linear" and lin.comparison_["kept_by"] is None
    assert lin.score(Xt, yt) < 0.55


def test_linear_chosen_on_rows_the_search_did_not_use_breast_cancer(monkeypatch):
    """Breast cancer, the benchmark's split 2: compared on a comparison half (50 rows, the rule from
    3,000 rows on) the trees looked better and were kept, and they are worse on the test rows; the
    cross-validated comparison (every one of the 398 rows, models from the other folds) keeps the
    linear model."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split
    from edgeseq.train.trees import stagewise_boosting as sb

    X, y = load_breast_cancer(return_X_y=True)
    groups, costs = [[i, i + 10, i + 20] for i in range(10)], np.arange(1.0, 11.0)
    Xa, Xt, ya, yt = train_test_split(X, y, test_size=0.3, random_state=2, stratify=y)

    def test_area(est):
        return sb.step_area(est.cum_cost_, [float(np.mean(p == yt)) for p in est.staged_predict(Xt)], costs.sum())

    clf = AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=2).fit(Xa, ya)
    assert clf.model_kind_ == "linear" and clf.comparison_["rows"] == len(ya)
    # control: on a comparison half the trees are kept, and they are worse on the test rows
    monkeypatch.setattr(sb, "CV_MAX_ROWS", 0)
    half = AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=2).fit(Xa, ya)
    assert half.model_kind_ == "trees" and half.comparison_["rows"] < 60
    assert test_area(half) < test_area(clf) - 0.01


def test_regressor_stages_and_budget_rule():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 6))
    y = np.abs(X[:, 2]) + 0.5 * np.abs(X[:, 4]) + 0.05 * rng.normal(size=400)
    reg = AnytimeBoostingRegressor(GROUPS, COSTS, n_jobs=1, random_state=0).fit(X, y)
    assert reg.model_kind_ == "trees" and reg.stage_groups_[1] == [1]
    staged = list(reg.staged_predict(X))
    assert len(staged) == len(reg.cum_cost_)
    np.testing.assert_allclose(reg.predict(X, budget=reg.cum_cost_[1]), staged[1])
    np.testing.assert_allclose(staged[0], np.mean(staged[0]))  # stage 0: the mean
    Xn = X.copy()
    Xn[:, [0, 1, 4, 5]] = np.nan  # groups stage 1 does not need: not extracted
    np.testing.assert_allclose(reg.predict(Xn, budget=reg.cum_cost_[1]), staged[1])
    assert reg.score(X, y) > 0.9


def test_errors_and_determinism():
    X, y, _, _ = _tiny("binary")
    with pytest.raises(NotFittedError):
        AnytimeBoostingClassifier().predict(X)
    with pytest.raises(InputError, match="num_leaves"):
        AnytimeBoostingClassifier(num_leaves=1).fit(X, y)
    with pytest.raises(InputError, match="validation_fraction"):
        AnytimeBoostingClassifier(validation_fraction=0.9).fit(X, y)
    with pytest.raises(InputError, match="max_tree_columns"):
        AnytimeBoostingClassifier(max_tree_columns=0).fit(X, y)
    with pytest.raises(InputError, match="probe_rows"):
        AnytimeBoostingClassifier(probe_rows=5).fit(X, y)
    a = AnytimeBoostingClassifier(GROUPS, COSTS, max_rounds=20, n_jobs=1, random_state=0, compare_linear=False).fit(X, y)
    b = AnytimeBoostingClassifier(GROUPS, COSTS, max_rounds=20, n_jobs=2, random_state=0, compare_linear=False).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert edgeseq.AnytimeBoostingClassifier is AnytimeBoostingClassifier


def test_scikit_learn_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator
    expected = {"check_estimators_nan_inf": "stages read only the groups they paid for"}
    # the classifier without the linear comparison (its fits are the slow part), the regressor with it
    check_estimator(AnytimeBoostingClassifier(max_rounds=5, n_jobs=1, compare_linear=False),
                    expected_failed_checks=expected)
    check_estimator(AnytimeBoostingRegressor(max_rounds=5, n_jobs=1), expected_failed_checks=expected)


@pytest.mark.parametrize("kind", ["multiclass", "regression"])
def test_export_verify_save_load_and_runtimes(kind, tmp_path):
    """export -> verify (numpy vs onnxruntime vs C per stage) -> Python runtime, and save/load."""
    import shutil

    from edgeseq.evaluate.verify import verify_export
    from edgeseq.export.writer import export_model
    from edgeseq.io.model_io import as_exportable, load_model, save_model
    from edgeseq.runtime.model import ExportedModel

    Xf, yf, Xv, yv = _tiny("multiclass")
    X, y = np.vstack([Xf, Xv]), np.concatenate([yf, yv])
    if kind == "multiclass":
        est = AnytimeBoostingClassifier(GROUPS, COSTS, max_rounds=20, n_jobs=1, random_state=0,
                                        compare_linear=False).fit(X, y)
    else:
        est = AnytimeBoostingRegressor(GROUPS, COSTS, max_rounds=20, n_jobs=1, random_state=0,
                                       compare_linear=False).fit(X, X[:, 2] ** 2 + X[:, 4])
    save_model(est, tmp_path / "m.pkl")
    back = load_model(tmp_path / "m.pkl")
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    model = as_exportable(back)
    assert model is back.stage_model_
    export_model(model, tmp_path / "out")
    has_c = any(shutil.which(c) for c in ("gcc", "clang", "cc"))
    rep = verify_export(tmp_path / "out", require_c=has_c)
    assert rep.ok and len(rep.checks) == len(model.stages)
    exported = ExportedModel(tmp_path / "out")
    feats = {model.group_names[g]: X[:, model.group_columns[g]] for g in range(len(model.group_names))}
    for k in range(len(model.stages)):
        ref = model.predict(X.astype(np.float32).astype(np.float64), stage=k)
        pred = exported.predict(feats, prefix=k)
        got = np.asarray(getattr(pred, "proba", pred)).reshape(ref.shape)
        np.testing.assert_allclose(got, ref, atol=1e-4)
    if kind == "multiclass" and has_c:  # the integer C model of the same stages
        export_model(model, tmp_path / "out16", c_dtype="int16", calibration=(X, y))
        rep16 = verify_export(tmp_path / "out16", require_c=True)
        assert rep16.ok and "bit-identical to the integer simulation at every stage" in rep16.c_note


def test_cli_train_model_boosting(tmp_path):
    import json

    from edgeseq.cli._main import main
    import edgeseq.cli.train_cmd  # noqa: F401  (registers the command)
    from edgeseq.io.model_io import load_model

    Xf, yf, Xv, yv = _tiny("binary")
    X, y = np.vstack([Xf, Xv]), np.concatenate([yf, yv])
    np.savez(tmp_path / "d.npz", X=X, y=y)
    (tmp_path / "groups.json").write_text(json.dumps({"groups": [
        {"name": f"g{i}", "columns": cols, "cost": c} for i, (cols, c) in enumerate(zip(GROUPS, COSTS))]}))
    r = CliRunner().invoke(main, ["train", str(tmp_path / "d.npz"), "--groups", str(tmp_path / "groups.json"),
                                  "--task", "classification", "--model", "boosting", "-o", str(tmp_path / "m.pkl")])
    assert r.exit_code == 0, r.output
    assert "cum_cost" in r.output and "wrote" in r.output  # the stage (trees) or prefix (linear) table
    est = load_model(tmp_path / "m.pkl")
    assert type(est).__name__ == "AnytimeBoostingClassifier" and est.score(X, y) > 0.7
    # the progress says which model was kept: the linear one, or trees regrown on all rows (the default)
    kept_line = "kept the linear model: the trees' validation curve did not beat it"
    regrown_line = f"trees regrown on all {len(X):,} rows"
    assert (kept_line in r.output, regrown_line in r.output) == (est.model_kind_ == "linear", est.model_kind_ == "trees")


@pytest.mark.parametrize("task,cap", [("binary", None), ("multiclass", None), ("binary", 3)])
def test_replay_on_the_search_rows_reproduces_the_search(task, cap):
    """Regrowing the chosen stages (groups, round counts) on the rows the search trained on gives the
    search's trees back, final rounds included; on all rows the same plan gives other trees. With
    column sampling (`cap`) the replay samples alike; without it (the control) the trees differ."""
    from edgeseq.train.trees.stagewise_boosting import replay_stages

    Xf, yf, Xv, yv = _tiny(task)
    n_classes = int(yf.max()) + 1
    spec = check_groups(GROUPS, COSTS, None, 6)
    params = {**PARAMS, "max_tree_columns": cap}
    stages, prior, trace = boost_stages(Xf, yf, Xv, yv, spec, task, n_classes=n_classes, params=params,
                                        max_rounds=30, stopping_rounds=5, final_rounds=cap is None)
    assert len(stages) >= 2
    names = tuple(str(c) for c in range(n_classes))
    again = replay_stages(Xf, yf, spec, task, stages, n_classes=n_classes, params=params, restarts=trace.restarts)
    if cap is not None:
        whole = replay_stages(Xf, yf, spec, task, stages, n_classes=n_classes, params=PARAMS, restarts=trace.restarts)
        assert not np.allclose(list(stage_model(whole, prior, spec, 6, task, names, trace.restarts)
                                    .staged_decision(Xv))[-1],
                               list(stage_model(stages, prior, spec, 6, task, names, trace.restarts)
                                    .staged_decision(Xv))[-1], atol=1e-3)
    assert [g for g, _ in again] == [g for g, _ in stages] and [len(t) for _, t in again] == [len(t) for _, t in stages]
    a = stage_model(stages, prior, spec, 6, task, names, trace.restarts)
    b = stage_model(again, prior, spec, 6, task, names, trace.restarts)
    for za, zb in zip(a.staged_decision(Xv), b.staged_decision(Xv)):
        np.testing.assert_allclose(za, zb, atol=1e-6)
    X, y = np.vstack([Xf, Xv]), np.concatenate([yf, yv])
    other = stage_model(replay_stages(X, y, spec, task, stages, n_classes=n_classes, params=params,
                                      restarts=trace.restarts), prior, spec, 6, task, names, trace.restarts)
    assert not np.allclose(list(other.staged_decision(Xv))[-1], list(a.staged_decision(Xv))[-1], atol=1e-3)


def test_the_comparison_score_is_the_brier_score_and_the_area_is_per_row():
    """The per-row score against scikit-learn's Brier score, and per-row areas whose mean is the
    area of the mean curve (what makes the paired comparison the same comparison of areas)."""
    from sklearn.metrics import brier_score_loss
    from edgeseq.train.trees.stagewise_boosting import _row_brier, step_area, step_weights

    rng = np.random.default_rng(0)
    p1 = rng.random(40)
    y = (rng.random(40) < p1).astype(int)
    rows = _row_brier(np.column_stack([1 - p1, p1]), y)
    # two classes: the squared distance counts both coordinates, twice scikit-learn's binary score
    np.testing.assert_allclose(-rows.mean(), 2 * brier_score_loss(y, p1))
    curves = rng.normal(size=(4, 40))  # 4 stages x 40 rows
    cum = [0.0, 1.0, 2.5, 6.0]
    per_row = step_weights(cum, 7.0) @ curves
    np.testing.assert_allclose(per_row.mean(), step_area(cum, curves.mean(axis=1), 7.0))
    assert not np.allclose(per_row, per_row.mean())  # not vacuous: rows differ


def test_refit_regrows_the_kept_stages_on_all_rows():
    X, y, Xv, yv = _tiny("binary")
    kw = dict(max_rounds=20, n_jobs=1, random_state=0, compare_linear=False)
    lines_a, lines_b = [], []
    a = AnytimeBoostingClassifier(GROUPS, COSTS, refit=False, **kw).fit(X, y, progress=lines_a.append)
    b = AnytimeBoostingClassifier(GROUPS, COSTS, **kw).fit(X, y, progress=lines_b.append)  # the default regrows them
    assert b.get_params()["refit"] is True
    assert lines_b[-1] == f"trees regrown on all {len(X):,} rows with the search's groups and round counts"
    assert lines_b[:-1] == lines_a and not any(line.startswith("trees regrown") for line in lines_a)
    assert a.stage_groups_ == b.stage_groups_ and a.n_trees_ == b.n_trees_
    assert not np.allclose(a.predict_proba(Xv), b.predict_proba(Xv))  # other rows, other trees
    with pytest.raises(InputError, match="refit must be True or False"):
        AnytimeBoostingClassifier(refit="yes").fit(X, y)


def _restart_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = (np.sin(2 * X[:, 0]) + np.abs(X[:, 2]) + np.abs(X[:, 4]) - 1.5 + 0.2 * rng.normal(size=300) > 0).astype(int)
    return X[:150], y[:150], X[150:], y[150:]


RESTART_PARAMS = {"learning_rate": 0.3, "num_leaves": 8, "min_child_samples": 3, "num_threads": 1, "seed": 0}


def test_a_restart_is_boosting_afresh_from_the_prior_written_plainly(tmp_path):
    """Stage 2 of this problem is better grown afresh from the prior on the paid columns than continued
    (the first stage's trees left little of the training residuals): the search takes those trees, as
    a plainly written LightGBM fit from the prior finds, and the stage model reads them from a state
    block of their own; without restarts (the negative control) the loss after stage 2 is higher."""
    from edgeseq.evaluate.verify import verify_export
    from edgeseq.export.writer import export_model

    Xf, yf, Xv, yv = _restart_data()
    spec = check_groups(GROUPS, COSTS, None, 6)
    kw = dict(n_classes=2, params=RESTART_PARAMS, max_rounds=60, stopping_rounds=5)
    stages, prior, trace = boost_stages(Xf, yf, Xv, yv, spec, "binary", **kw)
    _, _, plain = boost_stages(Xf, yf, Xv, yv, spec, "binary", restart=False, **kw)
    assert trace.restarts == [2] and plain.restarts == []
    assert trace.chosen[:2] == plain.chosen[:2]  # the same groups; only stage 2's trees differ
    assert trace.loss[2] < plain.loss[2] - 0.02

    # the reference: LightGBM from the prior on the columns of the groups paid by stage 2
    cols = sorted(c for g in trace.chosen[0] + trace.chosen[1] for c in GROUPS[g])
    params = {"objective": "binary", "metric": "binary_logloss", "verbose": -1, "deterministic": True,
              "force_row_wise": True, **RESTART_PARAMS}
    p0 = np.log(yf.mean() / (1 - yf.mean()))
    dtr = lgb.Dataset(Xf[:, cols], yf, init_score=np.full(len(yf), p0), params=params)
    dva = lgb.Dataset(Xv[:, cols], yv, init_score=np.full(len(yv), p0), reference=dtr, params=params)
    b = lgb.train(params, dtr, 60, valid_sets=[dva], callbacks=[lgb.early_stopping(5, verbose=False)])
    z = p0 + b.predict(Xv[:, cols], raw_score=True, num_iteration=b.best_iteration)
    assert trace.rounds[1] == b.best_iteration
    np.testing.assert_allclose(trace.loss[2], log_loss(yv, 1 / (1 + np.exp(-z))), rtol=1e-6)

    model = stage_model(stages, prior, spec, 6, "binary", ("0", "1"), trace.restarts)
    assert model.ensemble.n_targets == 2  # two state blocks: stage 1's, and stages 2.. (restarted)
    staged = list(model.staged_decision(Xv))
    np.testing.assert_allclose(staged[2][:, 0], z, rtol=1e-6, atol=1e-6)  # stage 1's trees are not read
    # control: the same stages read as one block (stage 2 adding to stage 1's scores) give another curve
    flat = stage_model(stages, prior, spec, 6, "binary", ("0", "1"))
    assert not np.allclose(list(flat.staged_decision(Xv))[2], staged[2], atol=1e-3)
    # the block layout exports and verifies per stage like any tree model (numpy, onnxruntime, C)
    import shutil
    export_model(model, tmp_path / "out")
    rep = verify_export(tmp_path / "out", require_c=any(shutil.which(c) for c in ("gcc", "clang", "cc")))
    assert rep.ok and len(rep.checks) == len(model.stages)
    # and in int16 C: the restarted block's state is quantised like any other target's
    export_model(model, tmp_path / "out16", c_dtype="int16", calibration=(Xf, yf))
    rep16 = verify_export(tmp_path / "out16", require_c=any(shutil.which(c) for c in ("gcc", "clang", "cc")))
    assert rep16.ok


def test_the_cross_validated_comparison_written_plainly(monkeypatch):
    """Below CV_MAX_ROWS rows every row is scored by the search's stages regrown on the other folds and
    by a linear model fitted there: the recorded mean difference and curves against that loop written
    out with scikit-learn's StratifiedKFold and Brier score."""
    from sklearn.model_selection import StratifiedKFold
    from edgeseq.train.trees import stagewise_boosting as sb

    rng = np.random.default_rng(4)
    X = rng.normal(size=(240, 6))
    y = (X[:, 0] + np.abs(X[:, 2]) - 0.8 + 0.3 * rng.normal(size=240) > 0).astype(int)
    seen = []
    real = sb.boost_stages
    monkeypatch.setattr(sb, "boost_stages", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    clf = AnytimeBoostingClassifier(GROUPS, COSTS, max_rounds=30, n_jobs=1, random_state=0).fit(X, y)
    stages, _, trace = seen[0]
    spec = check_groups(GROUPS, COSTS, None, 6)
    H = sum(COSTS)
    diffs, curve = np.empty(240), np.zeros((len(stages) + 1, 240))
    for tr, te in StratifiedKFold(sb.CV_FOLDS, shuffle=True, random_state=0).split(X, y):
        model = stage_model(sb.replay_stages(X[tr], y[tr], spec, "binary", stages, n_classes=2, params=clf._lgb(),
                                             restarts=trace.restarts),
                            sb.prior_scores("binary", y[tr], 2), spec, 6, "binary", ("0", "1"), trace.restarts)
        lin = edgeseq.AnytimeClassifier(GROUPS, COSTS).fit(X[tr], y[tr])
        onehot = np.eye(2)[y[te]]
        t = np.array([-((model.apply_link(z) - onehot) ** 2).sum(axis=1) for z in model.staged_decision(X[te])])
        lo = np.array([-((p - onehot) ** 2).sum(axis=1) for p in lin.staged_predict_proba(X[te])])
        diffs[te] = sb.step_weights(model.cum_cost, H) @ t - sb.step_weights(lin.cum_cost_, H) @ lo
        curve[:, te] = t
    assert clf.comparison_["rows"] == 240  # every row, not a held-out half
    np.testing.assert_allclose(clf.comparison_["mean_difference"], diffs.mean(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(clf.validation_curve_trees_, curve.mean(axis=1), rtol=1e-9, atol=1e-12)
    se = diffs.std(ddof=1) / np.sqrt(diffs.size)
    assert clf.model_kind_ == ("trees" if diffs.mean() > sb.CV_COMPARE_Z * se else "linear")
    # control: the search's own trees (not regrown per fold) score other areas on these rows
    own = clf.stage_model_ if clf.model_kind_ == "trees" else stage_model(stages, seen[0][1], spec, 6, "binary",
                                                                           ("0", "1"), trace.restarts)
    assert not np.allclose(curve[-1], [-((own.apply_link(z) - np.eye(2)[y]) ** 2).sum(axis=1)
                                       for z in own.staged_decision(X)][-1])


def test_the_probe_picks_the_informative_group_over_cheaper_noise():
    """Negative control of the probe: the signal is a symmetric interaction inside the most expensive
    group (no single column, so no one-split screen, sees it); three cheaper groups hold noise. A few
    probe rounds on each group's columns must rank that group first and its stage must be grown
    past the probe (early stopping keeps more rounds than the probe had), with a score far above the
    noise groups'; the full search (``probe_rounds=None``) makes the same choice."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(500, 8))
    y = (X[:, 6] * X[:, 7] > 0).astype(int)
    spec = check_groups([[0, 1], [2, 3], [4, 5], [6, 7]], [1.0, 1.0, 1.0, 3.0], None, 8)
    kw = dict(n_classes=2, params=PARAMS, max_rounds=40, stopping_rounds=5, final_rounds=False, restart=False)
    _, _, trace = boost_stages(X[:350], y[:350], X[350:], y[350:], spec, "binary", probe_rounds=5, **kw)
    first = trace.scores[0]
    assert trace.chosen[0] == (3,) and trace.rounds[0] > 5
    assert first[(3,)] > 0.02 and all(first[(g,)] < first[(3,)] / 10 for g in range(3))
    _, _, full = boost_stages(X[:350], y[:350], X[350:], y[350:], spec, "binary", probe_rounds=None, **kw)
    assert full.chosen[0] == (3,)


def test_after_a_lost_restart_the_next_stage_tries_none(monkeypatch):
    """The restart rule: stage k tries a restart unless stage k-1 tried one and kept its continued trees
    (or k = 1); recorded by spying on the restart fits between the stage lines. Not vacuous: at least
    one restart is skipped, and one is tried after a skip."""
    from edgeseq.train.trees import stagewise_boosting as sb

    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 12))
    y = (X[:, ::2] @ np.linspace(1.0, 0.3, 6) + 0.5 * X[:, 1] * X[:, 3] + 0.5 * rng.normal(size=600) > 0).astype(int)
    spec = check_groups([[2 * g, 2 * g + 1] for g in range(6)], [1.0] * 6, None, 12)
    events = []
    real = sb._restarted
    monkeypatch.setattr(sb, "_restarted", lambda *a, **k: events.append("R") or real(*a, **k))
    _, _, trace = boost_stages(X[:400], y[:400], X[400:], y[400:], spec, "binary", n_classes=2, params=PARAMS,
                               max_rounds=40, stopping_rounds=5, final_rounds=False,
                               progress=lambda line: events.append("S"))
    tried, k = {}, 1
    for e in events:
        if e == "S":
            k += 1
        else:
            tried[k] = True
    K = len(trace.chosen)
    tried = [tried.get(k, False) for k in range(1, K + 1)]
    assert not tried[0]  # stage 1 starts from the prior
    for k in range(2, K + 1):
        lost_before = tried[k - 2] and (k - 1) not in trace.restarts
        assert tried[k - 1] == (not lost_before or k == 2), (k, tried, trace.restarts)
    assert not all(tried[1:]) and any(tried[k] and not tried[k - 1] for k in range(2, K))


def test_when_the_best_per_cost_fails_the_floor_the_next_candidate_is_tried():
    """Group 0 is very cheap and carries a weak signal: its probe has the best gain per cost, but grown it
    does not lower the validation loss by the floor. Group 1 (the strong signal) does; it must be the
    stage, and group 0 is then paid by a stage of its own once it adds enough. Negative control: with
    ``floor_tries=0`` (only the best is grown, the rule before) no single group is committed at stage 1
    and the search falls back to the pair."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 2))
    y = (2 * X[:, 1] + 0.5 * X[:, 0] + 0.5 * rng.normal(size=900) > 0).astype(int)
    spec = check_groups([[0], [1]], [0.01, 1.0], None, 2)
    kw = dict(n_classes=2, params=PARAMS, min_gain=0.05, final_rounds=False)
    _, _, trace = boost_stages(X[:600], y[:600], X[600:], y[600:], spec, "binary", **kw)
    first = trace.scores[0]
    assert first[(0,)] > first[(1,)] > 0  # the cheap group ranks first by gain per cost
    # the case is as constructed: group 0's trees, grown from the prior with early stopping as the
    # search grows them (written plainly here), do not clear the floor
    floor = 0.05 * trace.loss[0]
    freq = y[:600].mean()
    prior = np.log(freq / (1 - freq))
    p = {**PARAMS, "objective": "binary", "metric": "binary_logloss", "verbose": -1, "deterministic": True,
         "force_row_wise": True}
    dtr = lgb.Dataset(X[:600, :1], y[:600], init_score=np.full(600, prior), params=p)
    dva = lgb.Dataset(X[600:, :1], y[600:], init_score=np.full(300, prior), reference=dtr, params=p)
    b = lgb.train(p, dtr, 100, valid_sets=[dva], callbacks=[lgb.early_stopping(10, verbose=False)])
    z = prior + b.predict(X[600:, :1], raw_score=True, num_iteration=b.best_iteration)
    assert trace.loss[0] - log_loss(y[600:], 1 / (1 + np.exp(-z))) <= floor
    assert trace.chosen == [(1,), (0,)] and trace.passed_over == [1, 0]
    assert trace.loss[1] < trace.loss[0] - floor
    _, _, old = boost_stages(X[:600], y[:600], X[600:], y[600:], spec, "binary", floor_tries=0, **kw)
    assert old.chosen == [(0, 1)] and old.passed_over == [0]


def test_the_linear_refit_reuses_the_compared_fits_choice(monkeypatch):
    """With a comparison half (the rule from 3,000 rows on, here forced), a linear model kept by the
    comparison is refitted on all rows with the basis and the sum-form penalty its compared fit chose by
    its held-out rows (the search's validation half, `validation=`), instead of choosing again: one choice
    per fit, not two. The comparison itself is unchanged, and on this data the reused choice is the one
    a direct (cross-validated) fit on all rows makes (the same grid penalty and basis). Negative controls: the old path (choosing again) runs the
    cross-validation twice, and another penalty gives other probabilities, so matching them says something."""
    from edgeseq.train.linear import classifier as lc
    from edgeseq.train.trees import stagewise_boosting as sb

    # four groups of ten noisy copies of one linear factor each: a clear choice (standardised columns,
    # a strong penalty) that fits on 600 rows and on 800 make alike
    rng = np.random.default_rng(5)
    F = rng.normal(size=(800, 4))
    X = np.repeat(F, 10, axis=1) + 0.3 * rng.normal(size=(800, 40))
    y = (F @ np.array([1.0, -0.8, 0.6, 0.5]) + rng.normal(size=800) > 0).astype(int)
    groups, costs = [list(range(10 * g, 10 * g + 10)) for g in range(4)], [1.0, 1.0, 2.0, 2.0]
    monkeypatch.setattr(sb, "CV_MAX_ROWS", 0)
    fits, chosen = [], []
    real_fit, real_choose = lc.AnytimeClassifier.fit, lc.choose_glm
    monkeypatch.setattr(lc.AnytimeClassifier, "fit",
                        lambda self, X, y, **k: fits.append(real_fit(self, X, y, **k)) or fits[-1])
    monkeypatch.setattr(lc, "choose_glm", lambda *a, **k: chosen.append(real_choose(*a, **k)) or chosen[-1])
    clf = AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=0).fit(X, y)
    assert clf.model_kind_ == "linear" and len(fits) == 2 and len(chosen) == 1
    compared, final = fits
    n_fit = 600  # 25 % of the rows held out (half for the search, half for the comparison)
    assert compared.fitted_sequence_.provenance["n_samples"] == n_fit
    assert compared.fitted_sequence_.provenance["l2_choice"].startswith("held-out rows: 100 rows")
    assert final.l2 * 800 == pytest.approx(compared.l2_ * n_fit, rel=1e-12) and final.whiten == compared.whiten_
    assert final.l2_ == final.l2 and "search trained on" in final.fitted_sequence_.provenance["l2_choice"]
    direct = edgeseq.AnytimeClassifier(groups, costs).fit(X, y)  # what the old path refitted
    assert (direct.l2_, direct.whiten_) == (compared.l2_, compared.whiten_)
    ref = edgeseq.AnytimeClassifier(groups, costs, l2=final.l2, whiten=final.whiten).fit(X, y)
    other = edgeseq.AnytimeClassifier(groups, costs, l2=final.l2 * 100, whiten=final.whiten).fit(X, y)
    for got, want, far in zip(clf.staged_predict_proba(X), ref.staged_predict_proba(X), other.staged_predict_proba(X)):
        np.testing.assert_allclose(got, want)
    assert not np.allclose(got, far, atol=1e-3)
    # the old path: the comparison is the same, the refit chooses again
    fits.clear(), chosen.clear()
    monkeypatch.setattr(sb, "reused_choice", lambda *a: ())
    old = AnytimeBoostingClassifier(groups, costs, n_jobs=1, random_state=0).fit(X, y)
    assert len(chosen) == 2 and old.model_kind_ == clf.model_kind_ and old.comparison_ == clf.comparison_
    assert (old.linear_.l2_, old.linear_.whiten_) == (direct.l2_, direct.whiten_)
