"""The Python runtime on tree-stage exports: `ExportedModel.predict` and `AnytimeSession.run` carry the
state across stages and agree with the TreeStageModel at every stage and at budgets at and around every
cumulative cost; NaN inputs are refused even though a tree would route them silently."""

from __future__ import annotations

import numpy as np
import pytest

from edgeseq.errors import RuntimeInputError
from edgeseq.export.writer import export_model
from edgeseq.runtime.model import ClassifierPrediction, ExportedModel
from edgeseq.runtime.session import AnytimeSession

from tree_models import afr_model, boundary_rows, data, lightgbm_model, stage_bound


def features(model, X):
    return {model.group_names[g]: X[:, model.group_columns[g]] for g in range(len(model.group_names))}


def extractors(model):
    return {model.group_names[g]: (lambda cols: (lambda row: row[cols]))(model.group_columns[g])
            for g in range(len(model.group_names))}


def budgets(model):
    cum = model.cum_cost
    return sorted({0.0, *cum.tolist(), *(cum[1:] - 1e-9).tolist(), *(cum + 0.5).tolist()})


def as_values(pred):
    return pred.proba if isinstance(pred, ClassifierPrediction) else np.asarray(pred)


MODELS = {"lgbm-identity": lambda: lightgbm_model("identity"), "lgbm-sigmoid": lambda: lightgbm_model("sigmoid"),
          "lgbm-softmax": lambda: lightgbm_model("softmax"), "afr-3": lambda: afr_model(3).stage_model_}


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request, tmp_path_factory):
    model = MODELS[request.param]()
    out = tmp_path_factory.mktemp("rt") / "out"
    export_model(model, out)
    sess = AnytimeSession(out)
    yield model, sess
    sess.close()


def test_predict_matches_every_stage_within_the_float32_bound(exported):
    model, sess = exported
    X, _ = data(120, seed=7)
    X = np.vstack([X, boundary_rows(model, X)]).astype(np.float32).astype(np.float64)
    feats = features(model, X)
    assert sess.n_prefixes == len(model.stages)
    for k in range(len(model.stages)):
        got = as_values(sess.predict(feats, prefix=k))
        ref = model.predict(X, stage=k)
        ratio = np.abs(got.reshape(ref.shape) - ref) / stage_bound(model, X.astype(np.float32), k)
        assert ratio.max() <= 1.0, (k, ratio.max())


def test_budgets_at_and_around_every_cum_cost_pick_the_model_stage(exported):
    model, sess = exported
    X, _ = data(20, seed=8)
    feats = features(model, X)
    for b in budgets(model):
        k = model.prefix_for_budget(b)
        assert sess.prefix_for_budget(b) == k
        got = as_values(sess.predict(feats, budget=b))
        np.testing.assert_allclose(got.reshape(-1), as_values(sess.predict(feats, prefix=k)).reshape(-1))
        assert np.abs(got.reshape(model.predict(X, stage=k).shape) - model.predict(X, stage=k)).max() < 1e-4


def test_anytime_run_commits_the_stage_the_budget_affords(exported):
    model, sess = exported
    X, _ = data(3, seed=9)
    ex = extractors(model)
    for b in budgets(model):
        k = model.prefix_for_budget(b)
        r = sess.run(ex, budget=b, inputs=X[0])
        assert r.prefix == k and r.prefix_cost == pytest.approx(model.cum_cost[k]), b
        want = as_values(sess.predict(features(model, X[:1]), prefix=k))
        np.testing.assert_allclose(as_values(r.prediction).reshape(-1), want.reshape(-1), rtol=0, atol=1e-6)
        done = sum(g.status == "ok" for g in r.report)
        assert done == len(model.groups_required(k))  # no group started that its stage cannot afford


def test_an_extractor_failing_inside_a_stage_leaves_the_previous_stage_committed(exported):
    model, sess = exported
    X, _ = data(3, seed=10)
    ex = extractors(model)
    last = model.groups_required(len(model.stages) - 1)[-1]
    ex[model.group_names[last]] = lambda row: [np.nan] * model.group_columns[last].size
    r = sess.run(ex, inputs=X[0])
    k = len(model.stages) - 2
    assert r.stopped_by == "invalid" and r.prefix == k
    want = as_values(sess.predict(features(model, X[:1]), prefix=k))
    np.testing.assert_allclose(as_values(r.prediction).reshape(-1), want.reshape(-1), atol=1e-6)


def test_nan_features_are_refused_although_a_tree_would_route_them(exported):
    model, sess = exported
    X, _ = data(4, seed=11)
    first = model.groups_required(1)[0]
    X[1, model.group_columns[first][0]] = np.nan
    feats = {k: v.astype(np.float32) for k, v in features(model, X).items()}
    with pytest.raises(RuntimeInputError, match="NaN"):
        sess.predict(feats, prefix=1)
    with pytest.raises(RuntimeInputError, match="NaN"):
        sess.predict(features(model, X), prefix=len(model.stages) - 1)


def test_classifier_predictions_carry_labels_from_the_manifest(tmp_path):
    model = lightgbm_model("softmax")
    export_model(model, tmp_path / "out")
    X, _ = data(30, seed=12)
    pred = ExportedModel(tmp_path / "out").predict(features(model, X))
    assert isinstance(pred, ClassifierPrediction)
    np.testing.assert_array_equal(pred.label_index, np.argmax(model.predict(X), axis=1))


def test_state_is_really_carried_negative_control(tmp_path, monkeypatch):
    """Feeding a zero state to every stage (no carrying) must make the later stages disagree."""
    model = lightgbm_model("identity")
    export_model(model, tmp_path / "out")
    sess = ExportedModel(tmp_path / "out")
    X, _ = data(50, seed=13)
    k = len(model.stages) - 1
    sess._fused[k] = None  # predict takes the stage chain (the fused graph: tests/test_runtime_fuse.py)
    good = sess.predict(features(model, X), prefix=k)
    real = sess._runners[k].call

    def zero_state(arrays, n):
        return real(arrays[:-1] + [np.zeros_like(arrays[-1])], n)

    monkeypatch.setattr(sess._runners[k], "call", zero_state)
    bad = sess.predict(features(model, X), prefix=k)
    ref = model.predict(X, stage=k)[:, 0]
    assert np.abs(good - ref).max() < 1e-4 and np.abs(bad - ref).max() > 1e-2


# ----------------------------------------------------------------------------- the loop with stages
from edgeseq.runtime.loop import Step, anytime_loop  # noqa: E402

STEPS = [Step("a", 1, 1.0), Step("b", 1, 2.0), Step("c", 1, 4.0)]
EXTRACT = {"a": lambda x: [1.0], "b": lambda x: [2.0], "c": lambda x: [4.0]}


def _log_commit(log):
    def commit(j, rows):
        log.append((j, len(rows)))
        return j
    return commit


@pytest.mark.parametrize("budget, want_prefix, want_commits, want_status", [
    (None, 3, [(1, 2), (2, 2), (3, 3)], ["ok", "ok", "ok"]),  # stage 2 needs nothing new: right after 1
    (2.9, 0, [], ["over_budget", "not_reached", "not_reached"]),  # stage 1 needs a and b (cost 3)
    (3.0, 1, [(1, 2)], ["ok", "ok", "over_budget"]),               # stage 2 costs 0.5 more: not affordable
    (3.5, 2, [(1, 2), (2, 2)], ["ok", "ok", "over_budget"]),
    (7.5, 3, [(1, 2), (2, 2), (3, 3)], ["ok", "ok", "ok"]),
])
def test_loop_commits_each_stage_once_when_its_groups_are_done(budget, want_prefix, want_commits, want_status):
    log = []
    stages = [(0, 0.0), (2, 3.0), (2, 3.5), (3, 7.5)]
    r = anytime_loop(STEPS, _log_commit(log), "prior", EXTRACT, budget=budget, stages=stages)
    assert r.prefix == want_prefix and log == want_commits
    assert [g.status for g in r.report] == want_status
    assert r.prefix_cost == stages[want_prefix][1]


def test_loop_without_stages_still_commits_every_group():
    """Negative control: the default (affine) schedule commits after every group."""
    log = []
    r = anytime_loop(STEPS, _log_commit(log), "prior", EXTRACT)
    assert log == [(1, 1), (2, 2), (3, 3)] and r.prefix == 3


def test_a_manifest_whose_state_width_disagrees_with_the_graphs_is_refused(tmp_path):
    import json

    from hostile import reseal

    from edgeseq.errors import IntegrityError

    export_model(lightgbm_model("softmax"), tmp_path / "out")
    reseal(tmp_path / "out", lambda m: m.update(state_width=m["state_width"] + 1))
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["state_width"] == 4
    with pytest.raises(IntegrityError, match="state_in has 3 columns, the manifest's state_width is 4"):
        ExportedModel(tmp_path / "out")


def test_deadline_runs_on_tree_exports_commit_stages(tmp_path):
    model = lightgbm_model("identity")
    export_model(model, tmp_path / "out")
    X, _ = data(2, seed=14)
    with AnytimeSession(tmp_path / "out") as sess:
        r = sess.run(extractors(model), deadline_s=30.0, inputs=X[0])
    assert r.prefix == len(model.stages) - 1 and r.stopped_by == "complete"
    assert float(np.asarray(r.prediction).ravel()[0]) == pytest.approx(model.predict(X[:1])[0, 0], abs=1e-5)
