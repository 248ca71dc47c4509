"""from_lightgbm: regression, binary and multiclass models become stage sequences whose last stage
reproduces LightGBM's predictions (boundary values included), every stage a prefix of the boosted
trees in boosting order, and unsupported or crafted dumps fail with one clear line."""

import copy

import numpy as np
import pytest

from edgeseq.errors import GroupSpecError, InputTypeError, ModelFormatError
from edgeseq.train.lightgbm_import import from_lightgbm, from_lightgbm_dump

from tree_models import boundary_rows

lgb = pytest.importorskip("lightgbm", reason="LightGBM is an optional extra: pip install 'edgeseq[trees]'")

GROUPS = [[0, 1], [2, 3], [4], [5, 6, 7]]
COSTS = [1.0, 2.0, 4.0, 8.0]
PARAMS = dict(n_estimators=30, num_leaves=7, learning_rate=0.2, min_child_samples=5, verbose=-1,
              deterministic=True, force_row_wise=True, n_jobs=1)


def data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8)).round(2)  # ties: rows fall exactly on thresholds' neighbours
    score = X[:, 0] + X[:, 2] * X[:, 3] + 0.5 * X[:, 5] - X[:, 7] ** 2
    return X.astype(np.float32).astype(np.float64), score  # float32-representable, as devices see them


def test_regression_last_stage_reproduces_predict_and_stages_are_prefixes():
    X, s = data()
    reg = lgb.LGBMRegressor(**PARAMS).fit(X, s)
    model = from_lightgbm(reg, GROUPS, COSTS)
    Xt = np.vstack([X, boundary_rows(model, X)])
    np.testing.assert_allclose(model.predict(Xt)[:, 0], reg.predict(Xt), rtol=0, atol=1e-9)
    booster = reg.booster_
    for k, st in enumerate(model.stages):
        n = st.tree_stop
        want = booster.predict(Xt, num_iteration=n) if n else np.full(len(Xt), model.stages[0].b[0])
        np.testing.assert_allclose(model.predict(Xt, stage=k)[:, 0], want, atol=1e-9)
    # the order rule: a stage starts exactly where a tree first uses a new group
    seen = set()
    owner = {c: g for g, cols in enumerate(GROUPS) for c in cols}
    for k, st in enumerate(model.stages[1:], start=1):
        first_groups = {owner[int(f)] for f in model.ensemble.features_of_trees([st.tree_start])}
        assert set(st.new_groups) == first_groups - seen
        for t in range(st.tree_start + 1, st.tree_stop):
            assert {owner[int(f)] for f in model.ensemble.features_of_trees([t])} <= seen | first_groups
        seen |= first_groups


def test_binary_and_multiclass_probabilities():
    X, s = data(seed=1)
    y2 = (s > np.median(s)).astype(int)
    clf = lgb.LGBMClassifier(**PARAMS).fit(X, np.array(["no", "yes"])[y2])
    model = from_lightgbm(clf, GROUPS, COSTS)
    Xt = np.vstack([X, boundary_rows(model, X)])
    np.testing.assert_allclose(model.predict(Xt), clf.predict_proba(Xt), atol=1e-7)
    assert model.output_names == ("no", "yes") and model.link == "sigmoid"
    y3 = np.digitize(s, np.quantile(s, [1 / 3, 2 / 3]))
    clf3 = lgb.LGBMClassifier(**PARAMS).fit(X, y3)
    model3 = from_lightgbm(clf3.booster_, GROUPS, COSTS)  # a bare Booster works too
    np.testing.assert_allclose(model3.predict(Xt), clf3.predict_proba(Xt), atol=1e-7)
    assert model3.link == "softmax" and model3.ensemble.n_targets == 3
    assert model3.ensemble.target[:6].tolist() == [0, 1, 2, 0, 1, 2]  # class-major tree order
    # the root threshold (a double in LightGBM) became the largest float32 not above it
    t0 = clf.booster_.dump_model()["tree_info"][0]["tree_structure"]["threshold"]
    t32 = model.ensemble.threshold[0]
    assert float(t32) <= t0 < float(np.nextafter(t32, np.float32(np.inf)))


def test_features_outside_groups_and_feature_count():
    X, s = data(seed=2)
    reg = lgb.LGBMRegressor(**PARAMS).fit(X, s)
    with pytest.raises(GroupSpecError, match="splits on feature 7, which is in none of the given groups"):
        from_lightgbm(reg, [[0, 1], [2, 3], [4], [5, 6]], COSTS)
    with pytest.raises(GroupSpecError, match="LightGBM model has 8 features"):
        from_lightgbm(reg, GROUPS + [[8]], COSTS + [1.0])
    with pytest.raises(InputTypeError, match="LightGBM"):
        from_lightgbm(object(), GROUPS, COSTS)
    import edgeseq
    assert edgeseq.from_lightgbm is from_lightgbm


def test_categorical_splits_are_refused():
    X, s = data(seed=3)
    Xc = X.copy()
    Xc[:, 4] = np.abs(np.round(Xc[:, 4] * 2)) % 4
    reg = lgb.LGBMRegressor(**PARAMS).fit(Xc, s + Xc[:, 4] * 3, categorical_feature=[4])
    with pytest.raises(ModelFormatError, match="categorical split"):
        from_lightgbm(reg, GROUPS, COSTS)


@pytest.fixture(scope="module")
def dump():
    X, s = data(seed=4)
    return lgb.LGBMRegressor(**{**PARAMS, "n_estimators": 3}).fit(X, s).booster_.dump_model()


def first_split(d):
    return d["tree_info"][0]["tree_structure"]


def first_leaf(node):
    while "split_feature" in node:
        node = node["left_child"]
    return node


@pytest.mark.parametrize("edit, error, message", [
    (lambda d: first_split(d).update(threshold=float("nan")), ModelFormatError, "NaN/Inf thresholds"),
    (lambda d: first_split(d).update(threshold=float("inf")), ModelFormatError, "NaN/Inf thresholds"),
    (lambda d: first_split(d).update(threshold=-1e300), ModelFormatError, "below the float32 range"),
    (lambda d: first_leaf(first_split(d)).update(leaf_value=float("inf")), ModelFormatError, "leaf value"),
    (lambda d: first_split(d).update(split_feature=99), ModelFormatError, "outside 0..7"),
    (lambda d: first_split(d).update(split_feature=-1), ModelFormatError, "outside 0..7"),
    (lambda d: first_split(d).update(decision_type="=="), ModelFormatError, "categorical"),
    (lambda d: first_split(d).update(missing_type="Zero"), ModelFormatError, "zero-as-missing"),
    (lambda d: first_split(d).update(left_child=None), ModelFormatError, "not an object"),
    (lambda d: d.update(objective="poisson"), ModelFormatError, "not supported"),
    (lambda d: d.update(objective="binary sigmoid:nan"), ModelFormatError, "sigmoid coefficient"),
    (lambda d: d.update(average_output=True), ModelFormatError, "random-forest"),
    (lambda d: d.update(max_feature_idx="7"), ModelFormatError, "max_feature_idx"),
    (lambda d: d.pop("tree_info"), ModelFormatError, "tree_info"),
])
def test_crafted_dumps_fail_with_one_line(dump, edit, error, message):
    d = copy.deepcopy(dump)
    assert from_lightgbm_dump(copy.deepcopy(dump), GROUPS, COSTS).ensemble.n_trees == 3  # control: intact dump loads
    edit(d)
    with pytest.raises(error, match=message) as exc:
        from_lightgbm_dump(d, GROUPS, COSTS)
    assert "\n" not in str(exc.value)


def test_deep_or_cyclic_structures_are_bounded(dump):
    d = copy.deepcopy(dump)
    node = {"leaf_value": 1.0}
    for _ in range(40):  # a 40-deep chain
        node = {"split_feature": 0, "threshold": 0.0, "decision_type": "<=", "left_child": {"leaf_value": 1.0},
                "right_child": node}
    d["tree_info"][0]["tree_structure"] = node
    with pytest.raises(ModelFormatError, match="deeper than"):
        from_lightgbm_dump(d, GROUPS, COSTS)
    loop = {"split_feature": 0, "threshold": 0.0, "decision_type": "<="}
    loop["left_child"] = loop["right_child"] = loop  # a cycle: only possible in a crafted object
    d["tree_info"][0]["tree_structure"] = loop
    with pytest.raises(ModelFormatError, match="reached twice"):
        from_lightgbm_dump(d, GROUPS, COSTS)
