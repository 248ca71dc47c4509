"""from_lightgbm: regression, binary and multiclass models become stage sequences whose last stage
reproduces LightGBM's predictions (boundary values included), every stage a prefix of the boosted
trees in boosting order, and unsupported or crafted dumps fail with one clear line."""

import copy

import numpy as np
import pytest

from edgeseq.errors import GroupSpecError, InputTypeError, ModelFormatError
from edgeseq.train.trees.lightgbm_import import from_lightgbm, from_lightgbm_dump, from_lightgbm_text

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
    (lambda d: d.update(objective="poisson"), ModelFormatError, "poisson.* is refused: it predicts exp"),
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


# ----------------------------------------------------------------------------- every objective (issue 24 item 2)
def _objective_data(objective, seed=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(240, 8)).astype(np.float32).astype(np.float64)
    s = X[:, 0] + X[:, 2] * X[:, 3] + 0.5 * X[:, 5] - 0.3 * X[:, 7] ** 2 + 0.3 * rng.normal(size=240)
    group = None
    if objective in ("poisson", "gamma", "tweedie"):
        y = np.exp(s / 3)
    elif objective in ("regression", "regression_l1", "huber", "fair", "quantile"):
        y = s
    elif objective == "mape":
        y = 3 + s
    elif objective in ("binary",):
        y = (s > 0).astype(float)
    elif objective in ("cross_entropy", "cross_entropy_lambda"):
        y = 1 / (1 + np.exp(-s))
    elif objective in ("lambdarank", "rank_xendcg"):
        y, group = np.digitize(s, [-0.5, 0.5]).astype(float), [24] * 10
    else:  # multiclass, multiclassova: num_class set by the case
        y = None
    return X, s, y, group


# (objective, extra parameters, imported?) - every objective LightGBM 4 knows, and the parameters that
# change what its predict computes
OBJECTIVES = [
    ("regression", {}, True), ("regression", {"reg_sqrt": True}, False),
    ("regression", {"boost_from_average": False}, True),
    ("regression_l1", {}, True), ("regression_l1", {"reg_sqrt": True}, False),
    ("huber", {}, True), ("huber", {"reg_sqrt": True}, True),  # huber ignores reg_sqrt: predict is the raw score
    ("fair", {}, True), ("fair", {"reg_sqrt": True}, False),
    ("quantile", {"alpha": 0.3}, True), ("quantile", {"reg_sqrt": True}, False),
    ("mape", {}, True), ("mape", {"reg_sqrt": True}, False),
    ("poisson", {}, False), ("gamma", {}, False), ("tweedie", {}, False),
    ("binary", {}, True), ("binary", {"sigmoid": 2.5}, True), ("binary", {"sigmoid": 0.4}, True),
    ("binary", {"boost_from_average": False}, True), ("binary", {"is_unbalance": True}, True),
    ("cross_entropy", {}, True), ("cross_entropy_lambda", {}, False),
    ("multiclass", {"num_class": 3}, True), ("multiclass", {"num_class": 2}, True),
    ("multiclass", {"num_class": 4, "boost_from_average": False}, True),
    ("multiclassova", {"num_class": 3}, False),
    ("lambdarank", {}, True), ("rank_xendcg", {}, True),
]


@pytest.mark.parametrize("objective, extra, imported", OBJECTIVES,
                         ids=[f"{o}-{'-'.join(f'{k}={v}' for k, v in e.items())}" for o, e, _ in OBJECTIVES])
def test_every_objective_is_imported_exactly_or_refused_in_one_line(objective, extra, imported):
    X, s, y, group = _objective_data(objective)
    if y is None:
        y = np.digitize(s, np.quantile(s, np.linspace(0, 1, extra["num_class"] + 1)[1:-1])).astype(float)
    params = dict(objective=objective, num_leaves=7, learning_rate=0.3, min_data_in_leaf=5, verbose=-1,
                  deterministic=True, force_row_wise=True, num_threads=1, **extra)
    booster = lgb.train(params, lgb.Dataset(X, y, group=group), num_boost_round=12)
    Xt = X[:120]
    if not imported:
        for reader in (lambda: from_lightgbm(booster, GROUPS, COSTS),
                       lambda: from_lightgbm_dump(booster.dump_model(), GROUPS, COSTS)):
            with pytest.raises(ModelFormatError, match=f"LightGBM objective '{objective}") as exc:
                reader()
            assert "\n" not in str(exc.value) and len(str(exc.value)) < 400
        # control: the refusal is deserved - LightGBM's predict is not the raw score
        assert not np.allclose(booster.predict(Xt), booster.predict(Xt, raw_score=True))
        return
    model = from_lightgbm(booster, GROUPS, COSTS)
    Xt = np.vstack([Xt, boundary_rows(model, Xt)])  # float32 rows on, and beside, the thresholds
    want, got = booster.predict(Xt), model.predict(Xt)
    if model.link == "sigmoid":
        np.testing.assert_allclose(got[:, 0] + got[:, 1], 1.0, atol=1e-12)
        got = got[:, 1]
    elif model.link == "identity":
        got = got[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    # the other reader (the JSON dump) builds the same model: the same predictions at every stage
    other = from_lightgbm_dump(booster.dump_model(), GROUPS, COSTS)
    assert [s.tree_stop for s in other.stages] == [s.tree_stop for s in model.stages]
    for k in range(len(model.stages)):
        np.testing.assert_array_equal(other.predict(Xt, stage=k), model.predict(Xt, stage=k))


def test_reg_sqrt_refusal_names_the_fix():
    X, s, y, _ = _objective_data("regression")
    reg = lgb.LGBMRegressor(**{**PARAMS, "n_estimators": 5}, reg_sqrt=True).fit(X, s)
    with pytest.raises(ModelFormatError, match=r"'regression sqrt' \(reg_sqrt=True\) predicts the square"):
        from_lightgbm(reg, GROUPS, COSTS)


@pytest.mark.parametrize("objective, message", [
    (None, "names no objective"),  # a custom objective function: LightGBM writes none
    ("regression sqrt", "reg_sqrt=True"),
    ("regression_l1 sqrt", "reg_sqrt=True"),
    ("regression alpha:0.5", "parameters"),
    ("binary", "parameters"),
    ("binary sigmoid:1 sqrt", "reg_sqrt"),
    ("binary sigmoid:0", "sigmoid coefficient"),
    ("binary sigmoid:1e400", "sigmoid coefficient"),
    ("binary sigmoid:x", "not a number"),
    ("binary sigmoid:1 sigmoid:2", "repeated"),
    ("multiclass num_class:3", "inconsistent"),  # the dump has one tree per round
    ("multiclass num_class:2", "inconsistent"),
    ("multiclassova num_class:1 sigmoid:1", "one independent sigmoid"),
    ("custom", "not supported"),
    ("poisson max_delta_step:0.7", "exp"),
    (["regression"], "short string"),
    ("regression " + "x" * 500, "short string"),
])
def test_crafted_objective_strings_are_refused(dump, objective, message):
    d = copy.deepcopy(dump)
    if objective is None:
        d.pop("objective")
    else:
        d["objective"] = objective
    with pytest.raises(ModelFormatError, match=message) as exc:
        from_lightgbm_dump(d, GROUPS, COSTS)
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 400


# ----------------------------------------------------------------------------- bounds (issue 24 items 7, 11, 14)
def stump_dump(per_iter=1, n_trees=1, objective=None, **stump):
    """A hand-written dump of `n_trees` stumps on feature 0 (a few hundred bytes)."""
    tree = {"split_feature": 0, "threshold": 0.5, "decision_type": "<=", "left_child": {"leaf_value": -1.0},
            "right_child": {"leaf_value": 1.0}, **stump}
    if objective is None:
        objective = "regression" if per_iter == 1 else f"multiclass num_class:{per_iter}"
    return {"max_feature_idx": 7, "num_class": per_iter, "num_tree_per_iteration": per_iter, "objective": objective,
            "tree_info": [{"num_leaves": 2, "tree_structure": copy.deepcopy(tree)} for _ in range(n_trees)]}


def _traced(call):
    """(result or the EdgeseqError raised, peak traced bytes)."""
    import tracemalloc
    tracemalloc.start()
    try:
        try:
            out = call()
        except ModelFormatError as exc:
            out = exc
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_300_byte_dump_cannot_claim_10000_classes():
    import json

    d = stump_dump(per_iter=10_000, n_trees=1)
    assert len(json.dumps(d)) < 400
    err, peak = _traced(lambda: from_lightgbm_dump(d, GROUPS, COSTS))
    from edgeseq.train.trees.lightgbm_import import MAX_CLASSES
    assert isinstance(err, ModelFormatError), err  # the old import built two 10,000 x 10,000 readouts (1.6 GB)
    assert f"num_tree_per_iteration must be an integer in 1..{MAX_CLASSES}" in str(err)
    assert peak < 1 << 20, peak
    # under the documented cap, the classes are bounded by the trees present
    err, peak = _traced(lambda: from_lightgbm_dump(stump_dump(per_iter=MAX_CLASSES, n_trees=1), GROUPS, COSTS))
    assert isinstance(err, ModelFormatError) and "not a whole number of rounds" in str(err), err
    assert peak < 1 << 20, peak
    # negative control: 300 genuine classes import, and the trace does see their 300 x 300 readouts
    model, peak = _traced(lambda: from_lightgbm_dump(stump_dump(per_iter=300, n_trees=300), GROUPS, COSTS))
    assert model.ensemble.n_targets == 300 and len(model.output_names) == 300
    assert peak > 2 * 300 * 300 * 8, peak


def _huge(digits=401):
    return int("9" * digits)


@pytest.mark.parametrize("edit, message", [
    (lambda d: first_leaf(first_split(d)).update(leaf_value=_huge()), "leaf value an integer of 401 digits"),
    (lambda d: first_leaf(first_split(d)).update(leaf_value=-_huge()), "leaf value an integer of 401 digits"),
    (lambda d: first_leaf(first_split(d)).update(leaf_value=1e39), "float32's range"),  # the runtimes' type
    (lambda d: first_leaf(first_split(d)).update(leaf_value="1"), "is not a number"),
    (lambda d: first_split(d).update(threshold=_huge()), "threshold is an integer of 401 digits"),
    (lambda d: first_split(d).update(threshold=-_huge()), "threshold is an integer of 401 digits"),
    (lambda d: first_split(d).update(threshold="0.5"), "is not a number"),
    (lambda d: first_split(d).update(split_feature=_huge()), "split feature an integer of 401 digits"),
    (lambda d: d.update(max_feature_idx=_huge()), "max_feature_idx"),
    (lambda d: d.update(num_tree_per_iteration=_huge()), "num_tree_per_iteration"),
    (lambda d: d["tree_info"][0].update(num_leaves=_huge()), "nodes; at most"),
    (lambda d: d["tree_info"][0].update(num_leaves=10 ** 6), "num_leaves says 1000000"),
    (lambda d: d.update(num_class=_huge()), "inconsistent"),
    (lambda d: d.update(objective="binary sigmoid:" + "9" * 150), "sigmoid coefficient"),
])
def test_huge_and_out_of_range_numbers_fail_with_one_short_line(dump, edit, message):
    """A JSON dump holds integers of any length (json.loads keeps them exact): each becomes one line."""
    import json

    d = json.loads(json.dumps(dump))  # what a dump read from a file is
    edit(d)
    d = json.loads(json.dumps(d))
    with pytest.raises(ModelFormatError, match=message) as exc:
        from_lightgbm_dump(d, GROUPS, COSTS)
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 300


def test_threshold_above_float32_range_sends_every_row_left(dump):
    d = copy.deepcopy(dump)
    first_split(d).update(threshold=1e300)
    model = from_lightgbm_dump(d, GROUPS, COSTS)
    assert model.ensemble.threshold[0] == np.finfo(np.float32).max


def test_node_count_is_refused_from_the_header_before_any_tree_is_read():
    from edgeseq.forms.trees import MAX_NODES

    d = stump_dump(n_trees=20)
    for info in d["tree_info"]:
        info["num_leaves"] = MAX_NODES // 8
    d["tree_info"][-1]["tree_structure"] = None  # never reached: the counts refuse the model first
    with pytest.raises(ModelFormatError, match=f"nodes; at most {MAX_NODES}"):
        from_lightgbm_dump(d, GROUPS, COSTS)
    d = stump_dump(n_trees=3)
    d["tree_info"][1]["num_leaves"] = 1  # a count that lies is refused too (the cap was checked on it)
    with pytest.raises(ModelFormatError, match="tree 1: num_leaves says 1, the tree has 2 leaves"):
        from_lightgbm_dump(d, GROUPS, COSTS)
    assert from_lightgbm_dump(stump_dump(n_trees=3), GROUPS, COSTS).ensemble.n_nodes == 9  # control


def test_long_imports_report_progress():
    X, s = data(seed=6)
    reg = lgb.LGBMRegressor(**PARAMS).fit(X, s)
    lines = []
    from_lightgbm(reg, GROUPS, COSTS, progress=lines.append)
    assert lines[0] == "LightGBM import: printing the model"
    assert len(lines) == 11 and lines[-1].startswith("LightGBM import: 30/30 trees, "), lines


# ----------------------------------------------------------------------------- the float32 contract (item 12)
@pytest.mark.parametrize("kind", ["regression", "binary"])
def test_float64_rows_on_thresholds_follow_the_float32_contract_everywhere(kind, tmp_path):
    """Rows placed exactly on LightGBM's float64 thresholds: the Python model, the exported graphs run by
    the Python runtime (onnxruntime) and LightGBM on the float32-cast rows all agree; LightGBM on the
    float64 rows does not (the negative control: the contract is float32, and these rows test it)."""
    from edgeseq.export.writer import export_model
    from edgeseq.runtime.model import ExportedModel

    X, s = data(seed=7)
    est = (lgb.LGBMRegressor(**PARAMS).fit(X, s) if kind == "regression"
           else lgb.LGBMClassifier(**PARAMS).fit(X, (s > np.median(s)).astype(int)))
    model = from_lightgbm(est, GROUPS, COSTS, group_names=["a", "b", "c", "d"])
    splits = []

    def walk(node):
        if "split_feature" in node:
            splits.append((node["split_feature"], node["threshold"]))
            walk(node["left_child"])
            walk(node["right_child"])
    for info in est.booster_.dump_model()["tree_info"]:
        walk(info["tree_structure"])
    X64 = np.repeat(X[:1], len(splits), axis=0)
    for i, (f, t) in enumerate(splits):
        X64[i, f] = t  # a float64 threshold: almost never a float32 value
    X32 = X64.astype(np.float32)
    lgb_predict = est.predict if kind == "regression" else (lambda Z: est.predict_proba(Z)[:, 1])
    ours = model.predict(X64)[:, 0 if kind == "regression" else 1]
    np.testing.assert_allclose(ours, lgb_predict(X32.astype(np.float64)), rtol=0, atol=1e-9)
    assert np.sum(~np.isclose(ours, lgb_predict(X64), rtol=0, atol=1e-9)) >= 3  # control: float64 differs

    out = tmp_path / "out"
    export_model(model, out)
    runtime = ExportedModel(out)

    def run(dtype):
        pred = runtime.predict({name: X64[:, cols].astype(dtype) for name, cols in
                                zip(model.group_names, model.group_columns)})
        return np.asarray(pred if kind == "regression" else pred.proba[:, 1], np.float64).ravel()
    np.testing.assert_allclose(run(np.float64), ours, rtol=1e-5, atol=1e-5)  # float64 rows in: cast inside
    np.testing.assert_array_equal(run(np.float64), run(np.float32))


# ----------------------------------------------------------------------------- the text reader
@pytest.fixture(scope="module")
def text():
    X, s = data(seed=4)
    return lgb.LGBMRegressor(**{**PARAMS, "n_estimators": 3}).fit(X, s).booster_.model_to_string()


def _line(text, key, new, tree=0):
    """`text` with tree `tree`'s (or the header's, tree=None) line `key=...` replaced by `key=new`."""
    lines = text.split("\n")
    start = lines.index(f"Tree={tree}") if tree is not None else 0
    i = next(j for j in range(start, len(lines)) if lines[j].startswith(key + "="))
    lines[i] = f"{key}={new}"
    return "\n".join(lines)


def _first(text, key, tree=0):
    lines = text.split("\n")
    start = lines.index(f"Tree={tree}")
    return next(l for l in lines[start:] if l.startswith(key + "=")).split("=", 1)[1].split()


@pytest.mark.parametrize("edit, error, message", [
    (lambda s: _line(s, "threshold", " ".join(["9" * 401] + _first(s, "threshold")[1:])), ModelFormatError,
     "NaN/Inf thresholds"),
    (lambda s: _line(s, "threshold", " ".join(["nan"] + _first(s, "threshold")[1:])), ModelFormatError,
     "NaN/Inf thresholds"),
    (lambda s: _line(s, "leaf_value", " ".join(["1e39"] + _first(s, "leaf_value")[1:])), ModelFormatError,
     "float32's range"),
    (lambda s: _line(s, "leaf_value", " ".join(["x"] + _first(s, "leaf_value")[1:])), ModelFormatError,
     "not a number"),
    (lambda s: _line(s, "split_feature", " ".join(["9" * 401] + _first(s, "split_feature")[1:])), ModelFormatError,
     "not an integer"),
    (lambda s: _line(s, "split_feature", " ".join(["8"] + _first(s, "split_feature")[1:])), ModelFormatError,
     "outside 0..7"),
    (lambda s: _line(s, "left_child", " ".join(["0"] + _first(s, "left_child")[1:])), ModelFormatError,
     "points backwards"),
    (lambda s: _line(s, "left_child", " ".join(["-99"] + _first(s, "left_child")[1:])), ModelFormatError,
     "outside its tree"),
    (lambda s: _line(s, "decision_type", " ".join(["1"] + _first(s, "decision_type")[1:])), ModelFormatError,
     "categorical"),
    (lambda s: _line(s, "decision_type", " ".join(["4"] + _first(s, "decision_type")[1:])), ModelFormatError,
     "zero-as-missing"),
    (lambda s: _line(s, "num_cat", "1"), ModelFormatError, "categorical"),
    (lambda s: _line(s, "is_linear", "1"), ModelFormatError, "linear-tree"),
    (lambda s: _line(s, "threshold", "0.5"), ModelFormatError, "threshold has 1 values"),
    (lambda s: _line(s, "num_leaves", "9" * 401), ModelFormatError, "num_leaves must be an integer"),
    (lambda s: _line(s, "num_leaves", str(2 ** 23)), ModelFormatError, "nodes; at most"),
    (lambda s: _line(s, "num_leaves", "0"), ModelFormatError, "num_leaves must be positive"),
    (lambda s: _line(s, "max_feature_idx", "9" * 401, tree=None), ModelFormatError, "max_feature_idx"),
    (lambda s: _line(s, "num_tree_per_iteration", "10000", tree=None), ModelFormatError, "num_tree_per_iteration"),
    (lambda s: _line(s, "num_tree_per_iteration", "2", tree=None), ModelFormatError, "objective"),
    (lambda s: _line(s, "objective", "regression sqrt", tree=None), ModelFormatError, "reg_sqrt"),
    (lambda s: s.replace("\nobjective=regression\n", "\n"), ModelFormatError, "names no objective"),
    (lambda s: s.replace("\nTree=1\n", "\nTree=7\n"), ModelFormatError, "tree 1 is labelled '7'"),
    (lambda s: s.replace("num_leaves=", "num_leaf=", 1), ModelFormatError, "tree 0 has no num_leaves line"),
    (lambda s: s.replace("version=v4\n", "version=v4\naverage_output\n"), ModelFormatError, "random-forest"),
    (lambda s: s[:s.index("\nTree=")], ModelFormatError, "no trees"),
    (lambda s: "{" + s, ModelFormatError, "not a LightGBM text model"),
])
def test_crafted_text_models_fail_with_one_line(text, edit, error, message):
    assert from_lightgbm_text(text, GROUPS, COSTS).ensemble.n_trees == 3  # control: the intact text loads
    with pytest.raises(error, match=message) as exc:
        from_lightgbm_text(edit(text), GROUPS, COSTS)
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 300


def test_the_docs_state_the_caps_the_code_enforces():
    from pathlib import Path

    from edgeseq.train.trees.lightgbm_import import MAX_CLASSES, MAX_TREES
    from edgeseq.forms.trees import MAX_NODES

    root = Path(__file__).resolve().parents[1] / "docs"
    for page in ("nonlinear.md", "threat-model.md"):
        text = (root / page).read_text()
        for cap in (MAX_CLASSES, MAX_TREES, MAX_NODES):
            assert f"{cap:,}" in text, (page, cap)


def test_text_reader_equals_the_dump_reader_and_reads_windows_line_ends(text):
    X, _ = data(seed=4)
    booster = lgb.Booster(model_str=text)
    model = from_lightgbm_text(text.replace("\n", "\r\n"), GROUPS, COSTS)
    np.testing.assert_array_equal(model.predict(X), from_lightgbm_dump(booster.dump_model(), GROUPS, COSTS).predict(X))
    np.testing.assert_allclose(model.predict(X)[:, 0], booster.predict(X.astype(np.float32)), atol=1e-9)


def test_too_many_trees_are_refused_before_lightgbm_prints_the_model(monkeypatch):
    import edgeseq.train.trees.lightgbm_import as imp

    X, s = data(seed=8)
    booster = lgb.LGBMRegressor(**PARAMS).fit(X, s).booster_
    printed = []

    class Watched:  # the Booster, recording whether its (costly) model text was asked for
        num_trees = booster.num_trees

        def model_to_string(self):
            printed.append(True)
            return booster.model_to_string()
        dump_model = booster.dump_model
    assert from_lightgbm(Watched(), GROUPS, COSTS).ensemble.n_trees == 30 and printed  # control
    printed.clear()
    monkeypatch.setattr(imp, "MAX_TREES", 29)
    with pytest.raises(ModelFormatError, match="30 trees; at most 29"):
        from_lightgbm(Watched(), GROUPS, COSTS)
    assert not printed
