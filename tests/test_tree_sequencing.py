"""Cost-sensitive sequencing of imported LightGBM ensembles (edgeseq.train.trees.tree_sequencing).

References: every stage's readout is refit independently with scikit-learn (Ridge / LogisticRegression)
on the state the stage's trees give; each chosen move is the brute-force best gain per cost among all
moves, recomputed here from scratch; the full budget reproduces LightGBM's own predictions.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

lgb = pytest.importorskip("lightgbm")
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402

from edgeseq import from_lightgbm  # noqa: E402
from edgeseq.errors import InputError  # noqa: E402
from edgeseq.train.trees.tree_sequencing import sequence_trees  # noqa: E402

GROUPS = [[0, 1], [2], [3, 4], [5]]
COSTS = np.array([4.0, 1.0, 2.0, 8.0])
L2 = 1e-3


def _data(task, seed=0, n=600):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    score = 2 * X[:, 2] + X[:, 0] * X[:, 3] + 0.3 * X[:, 5] + 0.3 * rng.normal(size=n)
    if task == "regression":
        return X, score
    if task == "binary":
        return X, (score > 0).astype(int)
    return X, np.digitize(score, [-1.0, 0.5])  # 3 classes


def _fitted(task, seed=0):
    X, y = _data(task, seed)
    est = lgb.LGBMRegressor if task == "regression" else lgb.LGBMClassifier
    model = est(n_estimators=20, num_leaves=4, learning_rate=0.2, verbose=-1, n_jobs=1).fit(X[:400], y[:400])
    return model, X, y


def _state(sm, X, k):
    """Sum of the stage-k trees' outputs per target dimension (independent of the module's code)."""
    out = np.zeros((len(X), sm.ensemble.n_targets))
    leaves = sm.ensemble.tree_outputs(X, range(sm.stages[k].tree_stop))
    for t in range(sm.stages[k].tree_stop):
        out[:, sm.ensemble.target[t]] += leaves[:, t]
    return out


def _reference_loss(sm, Z, y):
    """Validation loss of the sklearn-refit readout on state Z (the same objective, another solver)."""
    n = len(y)
    if sm.link == "identity":
        r = Ridge(alpha=L2 * n).fit(Z, y)
        return float(np.mean((r.predict(Z) - y) ** 2)), r
    if not Z.any():
        p = np.mean(y[:, None] == sm.classes[None, :], axis=0)
        return float(-np.mean(np.log(p[np.searchsorted(sm.classes, y)]))), None
    r = LogisticRegression(C=1 / (n * L2), tol=1e-10, max_iter=10_000).fit(Z, y)
    p = r.predict_proba(Z)
    return float(-np.mean(np.log(p[np.arange(n), np.searchsorted(r.classes_, y)]))), r


@pytest.mark.parametrize("task", ["regression", "binary", "multiclass"])
def test_each_stage_is_the_brute_force_best_move_with_a_refit_readout(task):
    model, X, y = _fitted(task)
    Xv, yv = X[400:], y[400:]
    boosting = from_lightgbm(model, GROUPS, COSTS)
    sm = sequence_trees(boosting, Xv, yv, l2=L2)
    owner = np.repeat(np.arange(4), [2, 1, 2, 1])
    tree_groups = [set(owner[sm.ensemble.features_of_trees([t])].tolist()) for t in range(sm.ensemble.n_trees)]
    paid: set = set()
    prev_loss = _reference_loss(sm, np.zeros((len(yv), 1)), yv)[0]
    for k in range(1, len(sm.stages)):
        stage = sm.stages[k]
        Z = _state(sm, Xv, k)
        if k < len(sm.stages) - 1:  # the readout is the independent refit of this state
            loss, ref = _reference_loss(sm, Z, yv)
            z = Z @ stage.W + stage.b
            if task == "regression":
                np.testing.assert_allclose(z[:, 0], ref.predict(Z), atol=1e-8)
            else:
                want = ref.decision_function(Z)
                got = z[:, 0] if task == "binary" else z - z.mean(axis=1, keepdims=True)
                want = want if task == "binary" else want - want.mean(axis=1, keepdims=True)
                np.testing.assert_allclose(got, want, atol=2e-3)
            # brute force over every move: the chosen one has the largest loss decrease per cost
            locked = [t for t in range(sm.ensemble.n_trees) if not tree_groups[t] <= paid]
            moves = {frozenset(tree_groups[t] - paid) for t in locked}
            scores = {}
            for m in moves:
                unlocked = [t for t in range(sm.ensemble.n_trees) if tree_groups[t] <= paid | m]
                Zm = np.zeros_like(Z)
                leaves = sm.ensemble.tree_outputs(Xv, unlocked)
                for j, t in enumerate(unlocked):
                    Zm[:, sm.ensemble.target[t]] += leaves[:, j]
                scores[m] = (prev_loss - _reference_loss(sm, Zm, yv)[0]) / COSTS[list(m)].sum()
            best = max(scores.values())
            chosen = frozenset(stage.new_groups)
            assert scores[chosen] >= best - 1e-6 * max(1.0, abs(best)), (k, scores, chosen)
            prev_loss = loss
        paid |= set(stage.new_groups)
        # the stage reads only what is paid: NaN in every other column changes nothing
        Xnan = Xv.copy()
        Xnan[:, [c for g in range(4) if g not in paid for c in GROUPS[g]]] = np.nan
        np.testing.assert_array_equal(sm.predict(Xnan, stage=k), sm.predict(Xv, stage=k))


@pytest.mark.parametrize("task", ["regression", "binary", "multiclass"])
def test_the_full_budget_is_the_users_model(task):
    model, X, y = _fitted(task, seed=1)
    sm = sequence_trees(from_lightgbm(model, GROUPS, COSTS), X[400:], y[400:])
    assert sorted(g for s in sm.stages for g in s.new_groups) == sorted({g for s in sm.stages for g in s.new_groups})
    full = sm.predict(X)
    want = model.predict(X)[:, None] if task == "regression" else model.predict_proba(X)
    np.testing.assert_allclose(full, want, rtol=1e-5, atol=1e-6)


def test_cost_order_beats_boosting_order_when_the_first_trees_use_an_expensive_weak_group():
    """Negative control for the comparison: boosting order pays for group 3 (cost 8, weak) early."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1200, 6))
    y = 2 * X[:, 2] + 0.5 * X[:, 5] + 0.2 * rng.normal(size=1200)
    weak = lgb.LGBMRegressor(n_estimators=5, num_leaves=4, verbose=-1, n_jobs=1).fit(X[:800, 5:6], y[:800])
    rest = lgb.LGBMRegressor(n_estimators=20, num_leaves=4, verbose=-1, n_jobs=1).fit(
        X[:800], y[:800] - weak.predict(X[:800, 5:6]))
    dump = rest.booster_.dump_model()
    first = weak.booster_.dump_model()["tree_info"]
    for info in first:  # the one-column model's feature 0 is column 5
        stack = [info["tree_structure"]]
        while stack:
            node = stack.pop()
            if "split_feature" in node:
                node["split_feature"] = 5
                stack += [node["left_child"], node["right_child"]]
    dump["tree_info"] = first + dump["tree_info"]  # boosting order: the weak, expensive trees come first
    from edgeseq.train.trees.lightgbm_import import from_lightgbm_dump
    boosting = from_lightgbm_dump(dump, GROUPS, COSTS)
    costly = sequence_trees(boosting, X[800:1000], y[800:1000])
    assert boosting.stages[1].new_groups == (3,)  # boosting order pays the cost-8 group first
    assert costly.stages[1].new_groups == (1,)  # the cost rule pays the cheap, strong group first

    def mean_error_over_budgets(sm):
        Xt, yt = X[1000:], y[1000:]
        budgets = np.linspace(0, COSTS.sum(), 61)
        return np.mean([np.mean((sm.predict(Xt, budget=b)[:, 0] - yt) ** 2) for b in budgets])

    assert mean_error_over_budgets(costly) < 0.8 * mean_error_over_budgets(boosting)


def test_bad_validation_data_is_one_clear_error():
    model, X, y = _fitted("multiclass")
    sm = from_lightgbm(model, GROUPS, COSTS)
    with pytest.raises(InputError, match="label 7, which is not one of the model's classes"):
        sequence_trees(sm, X[400:], np.where(np.arange(200) == 3, 7, y[400:]))
    with pytest.raises(InputError, match="X must have shape"):
        sequence_trees(sm, X[400:, :5], y[400:])
    with pytest.raises(InputError, match="X_val has 200 rows, y_val 199"):
        sequence_trees(sm, X[400:], y[401:])
    Xbad = X[400:].copy()
    Xbad[5, 2] = np.inf
    with pytest.raises(InputError, match="NaN or Inf"):
        sequence_trees(sm, Xbad, y[400:])


def test_progress_reports_every_stage():
    model, X, y = _fitted("regression")
    lines = []
    sm = sequence_trees(from_lightgbm(model, GROUPS, COSTS), X[400:], y[400:], progress=lines.append)
    assert len(lines) == len(sm.stages) - 1 and all(line.startswith("tree sequencing: stage") for line in lines)


def test_moves_cover_every_group_exactly_once():
    model, X, y = _fitted("binary", seed=2)
    sm = sequence_trees(from_lightgbm(model, GROUPS, COSTS), X[400:], y[400:])
    paid = list(itertools.chain.from_iterable(s.new_groups for s in sm.stages))
    assert len(paid) == len(set(paid)) and set(paid) <= set(range(4))
    assert sm.ensemble.n_trees == model.booster_.num_trees()


@pytest.mark.parametrize("task", ["regression", "multiclass"])
def test_a_sequenced_model_exports_verifies_and_runs_like_the_model(task, tmp_path):
    """Multi-group stages and refit readouts go through the same emitters and runtime as boosting order."""
    from edgeseq.evaluate.verify import verify_export
    from edgeseq.export.writer import export_model
    from edgeseq.runtime.model import ClassifierPrediction, ExportedModel

    model, X, y = _fitted(task, seed=4)
    sm = sequence_trees(from_lightgbm(model, GROUPS, COSTS), X[400:], y[400:])
    export_model(sm, tmp_path / "out")
    assert verify_export(tmp_path / "out", use_c=False).ok
    exported = ExportedModel(tmp_path / "out")
    X32 = X.astype(np.float32).astype(np.float64)
    feats = {sm.group_names[g]: X32[:, GROUPS[g]] for g in range(4)}
    for k in range(len(sm.stages)):
        got = exported.predict(feats, prefix=k)
        got = got.proba if isinstance(got, ClassifierPrediction) else np.asarray(got)
        np.testing.assert_allclose(got.reshape(len(X), -1), sm.predict(X32, stage=k), rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- the fast bookkeeping
def _reference_sequence(sm, Xv, yv, limit, carry=True):
    """The greedy loop written the straightforward way: per step, per move, per tree, in Python sets.

    The readout refit is the module's own (`_ReadoutFitter`, checked against scikit-learn above), so
    what this compares is the bookkeeping: the moves, their order and cap, the trees each unlocks and
    the state they add. ``carry=False`` is a deliberately broken variant (a stage's state forgets the
    trees of earlier stages), the negative control. Returns per stage (groups paid, trees, W, b).
    """
    from edgeseq.train.trees.tree_sequencing import SCORE_TOL, _ReadoutFitter

    ens = sm.ensemble
    fit = _ReadoutFitter(sm, yv, L2)
    leaves = ens.tree_outputs(Xv)
    owner = np.full(ens.n_features, -1)
    for g, cols in enumerate(sm.group_columns):
        owner[cols] = g
    needs = [frozenset(owner[ens.features_of_trees([t])].tolist()) for t in range(ens.n_trees)]

    def state(trees):
        out = np.zeros((len(Xv), ens.n_targets))
        for t in trees:
            out[:, ens.target[t]] += leaves[:, t]
        return out

    def cost(m):
        return float(sum(sm.costs[g] for g in sorted(m)))

    paid, done = frozenset(), [t for t in range(ens.n_trees) if not needs[t]]
    locked = [t for t in range(ens.n_trees) if needs[t]]
    current = fit.fit(np.zeros((len(Xv), ens.n_targets)), None)
    stages, pending = [], list(done)
    while locked:
        moves = sorted({needs[t] - paid for t in locked}, key=lambda m: (cost(m), sorted(m)))[:limit]
        best = None
        for m in moves:
            gained = [t for t in locked if needs[t] <= paid | m]
            trial = fit.fit(state(done * carry + gained), current, SCORE_TOL)
            score = (current.loss - trial.loss) / cost(m)
            if best is None or score > best[0] * (1 + 1e-12) + 1e-300:
                best = (score, m, gained, trial)
        _, m, gained, trial = best
        trial = fit.fit(state(done * carry + gained), trial)
        paid, done = paid | m, done + gained
        locked = [t for t in locked if t not in gained]
        stages.append((sorted(m), sorted(pending + gained), trial.W, trial.b))
        pending, current = [], trial
    return stages


def _stages_of(sm, original):
    """(groups paid, original tree indices, W, b) per stage after stage 0, via the trees' node arrays."""
    def key(ens, t):
        a, b = ens.tree_range(t)
        return ens.feature[a:b].tobytes() + ens.threshold[a:b].tobytes() + ens.value[a:b].tobytes()

    where = {key(original.ensemble, t): t for t in range(original.ensemble.n_trees)}
    return [(sorted(s.new_groups), sorted(where[key(sm.ensemble, t)] for t in range(s.tree_start, s.tree_stop)),
             s.W, s.b) for s in sm.stages[1:]]


def _same_stages(got, want) -> bool:
    return len(got) == len(want) and all(
        g[0] == w[0] and g[1] == w[1] and np.allclose(g[2], w[2], atol=1e-6) and np.allclose(g[3], w[3], atol=1e-6)
        for g, w in zip(got[:-1], want[:-1])) and got[-1][:2] == want[-1][:2]


@pytest.mark.parametrize("task, limit", [("regression", 2_000), ("multiclass", 2_000), ("multiclass", 3)])
def test_the_vectorised_moves_choose_what_the_straightforward_loop_chooses(task, limit, monkeypatch):
    """Same stages, trees and readouts as the set-based loop that scores every move (the loss bound
    skips some here), with the move cap too. Negative control:
    a reference whose state forgets the earlier stages' trees differs here, so the comparison can fail."""
    import edgeseq.train.trees.tree_sequencing as ts

    rng = np.random.default_rng(7)
    X = rng.normal(size=(700, 12))
    score = X[:, 0] * X[:, 5] + X[:, 3] - X[:, 9] * X[:, 11] + 0.5 * X[:, 7] + 0.3 * rng.normal(size=700)
    y = score if task == "regression" else np.digitize(score, [-0.7, 0.7])
    est = lgb.LGBMRegressor if task == "regression" else lgb.LGBMClassifier
    model = est(n_estimators=12, num_leaves=6, learning_rate=0.3, colsample_bytree=0.6, verbose=-1,
                n_jobs=1).fit(X[:450], y[:450])
    groups = [[0, 1], [2], [3, 4], [5], [6, 7], [8], [9, 10], [11]]
    boosting = from_lightgbm(model, groups, [3.0, 1.0, 2.0, 30.0, 1.5, 40.0, 2.5, 60.0])  # a wide span, as on real banks
    Xv, yv = X[450:], y[450:]
    monkeypatch.setattr(ts, "MAX_MOVES_PER_STEP", limit)
    lines = []
    got = _stages_of(ts.sequence_trees(boosting, Xv, yv, l2=L2, progress=lines.append), boosting)
    scored = [tuple(map(int, line.split("; ")[1].split()[0:3:2])) for line in lines]  # (scored, moves) per step
    if limit < 2_000:  # the cap binds: the first step has more moves than it lets through
        uses = ts._tree_group_matrix(boosting)
        assert len(ts.candidate_moves(uses, np.flatnonzero(uses.any(axis=1)), np.zeros(8, bool), boosting.costs,
                                      10**6)) > limit
    else:
        assert any(k < m for k, m in scored), "the loss bound skipped no move: the comparison does not test it"
    want = _reference_sequence(boosting, Xv, yv, limit)
    assert len(want) >= 3, "too few stages for the comparison to mean anything"
    assert _same_stages(got, want), (got, want)
    broken = _reference_sequence(boosting, Xv, yv, limit, carry=False)
    assert not _same_stages(got, broken)
