"""Public API of AnytimeRegressor: attributes, budgets/prefixes, bad input, scikit-learn conventions."""

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator

from edgeseq import AnytimeRegressor
from edgeseq.errors import EdgeseqError, GroupSpecError, InputError, NotFittedError

GROUPS, COSTS = [[0, 1], [2, 3, 4], [5]], [1.0, 2.5, 0.5]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 7))
    y = X @ rng.normal(size=7) + 0.3 * rng.normal(size=120)
    return X, y


@pytest.fixture(scope="module")
def fitted(data):
    return AnytimeRegressor(GROUPS, COSTS, method="fr").fit(*data)


def test_attributes(fitted, data):
    X, _ = data
    J = 3
    assert sorted(fitted.sequence_.tolist()) == [0, 1, 2]
    np.testing.assert_allclose(fitted.cum_cost_, np.concatenate([[0], np.cumsum(np.array(COSTS)[fitted.sequence_])]))
    assert fitted.coef_path_.shape == (J + 1, 7) and fitted.intercept_path_.shape == (J + 1,)
    assert np.all(fitted.coef_path_[:, 6] == 0)  # column 6 is in no group
    assert np.all(fitted.coef_path_[0] == 0)
    for j in range(J + 1):
        np.testing.assert_allclose(fitted.predict(X, prefix=j), X @ fitted.coef_path_[j] + fitted.intercept_path_[j])
    assert len(fitted.train_curve_) == J + 1 and fitted.train_curve_[0] == 0
    assert np.all(np.diff(fitted.train_curve_) >= -1e-12)


def test_budget_selects_longest_affordable_prefix(fitted, data):
    X, _ = data
    cum = fitted.cum_cost_
    for j, c in enumerate(cum):
        np.testing.assert_array_equal(fitted.predict(X, budget=c), fitted.predict(X, prefix=j))  # inclusive
        if j:
            np.testing.assert_array_equal(fitted.predict(X, budget=np.nextafter(c, 0)), fitted.predict(X, prefix=j - 1))
    np.testing.assert_array_equal(fitted.predict(X, budget=1e9), fitted.predict(X))
    staged = list(fitted.staged_predict(X))
    assert len(staged) == 4
    for j, p in enumerate(staged):
        np.testing.assert_array_equal(p, fitted.predict(X, prefix=j))


def test_multi_output_shapes(data):
    X, y = data
    Y = np.column_stack([y, -2 * y + 1])
    est = AnytimeRegressor(GROUPS, COSTS).fit(X, Y)
    assert est.predict(X).shape == (120, 2)
    assert est.coef_path_.shape == (4, 2, 7)
    np.testing.assert_allclose(est.predict(X)[:, 1], -2 * est.predict(X)[:, 0] + 1, atol=1e-9)
    est1 = AnytimeRegressor(GROUPS, COSTS).fit(X, y[:, None])
    assert est1.predict(X).shape == (120, 1)


@pytest.mark.parametrize("groups,costs,match", [
    ([[0, 1], [1, 2]], [1, 1], "appears in groups 0 and 1"),
    ([[0, 0], [2]], [1, 1], "twice in group 0"),
    ([[0, 1], [9]], [1, 1], r"references column\(s\) \[9\]"),
    ([[0, 1], []], [1, 1], "group 1 is empty"),
    ([[0, 1], [2]], None, "costs are missing"),
    ([[0, 1], [2]], [1], "got 1 costs for 2 groups"),
    ([[0, 1], [2]], [1, 0], "cost of group 1 is 0.0"),
    ([[0, 1], [2]], [1, -2], "cost of group 1 is -2.0"),
    ([[0, 1], [2]], [1, np.nan], "cost of group 1 is nan"),
    ([[0, 1], [2]], [1, np.inf], "cost of group 1 is inf"),
    ([[0, 1.5], [2]], [1, 1], "integer column indices"),
])
def test_bad_group_specs(data, groups, costs, match):
    with pytest.raises(GroupSpecError, match=match):
        AnytimeRegressor(groups, costs).fit(*data)


def test_bad_names(data):
    with pytest.raises(GroupSpecError, match="unique"):
        AnytimeRegressor([[0], [1]], [1, 1], group_names=["a", "a"]).fit(*data)
    with pytest.raises(GroupSpecError, match="non-empty string"):
        AnytimeRegressor([[0], [1]], [1, 1], group_names=["a", ""]).fit(*data)
    with pytest.raises(GroupSpecError, match="2 group names for 1"):
        AnytimeRegressor([[0]], [1], group_names=["a", "b"]).fit(*data)


def test_bad_data(data):
    X, y = data
    est = AnytimeRegressor(GROUPS, COSTS)
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(InputError, match=r"NaN or Inf .*\[2\]"):
        est.fit(Xn, y)
    yn = y.copy()
    yn[0] = np.inf
    with pytest.raises(InputError, match="y contains"):
        est.fit(X, yn)
    with pytest.raises(InputError, match="inconsistent numbers of samples"):
        est.fit(X, y[:-1])
    with pytest.raises(InputError, match="n_samples=1"):
        est.fit(X[:1], y[:1])
    with pytest.raises(InputError, match="method must be one of"):
        AnytimeRegressor(GROUPS, COSTS, method="lasso").fit(X, y)
    with pytest.raises(InputError, match="l2 must be"):
        AnytimeRegressor(GROUPS, COSTS, l2=-1).fit(X, y)


def test_bad_predict_calls(fitted, data):
    X, _ = data
    with pytest.raises(InputError, match="budget must be"):
        fitted.predict(X, budget=-0.1)
    with pytest.raises(InputError, match="budget must be"):
        fitted.predict(X, budget=float("nan"))
    with pytest.raises(InputError, match=r"prefix must be an integer in 0..3"):
        fitted.predict(X, prefix=4)
    with pytest.raises(InputError, match="prefix must be"):
        fitted.predict(X, prefix=-1)
    with pytest.raises(InputError, match="not both"):
        fitted.predict(X, prefix=1, budget=1.0)
    with pytest.raises(InputError, match="X has 6 features"):
        fitted.predict(X[:, :6])
    Xn = X.copy()
    Xn[0, fitted.groups_[fitted.sequence_[0]][0]] = np.nan
    with pytest.raises(InputError, match="NaN or Inf"):
        fitted.predict(Xn)
    np.testing.assert_array_equal(fitted.predict(Xn[1:]), fitted.predict(X[1:]))
    with pytest.raises(NotFittedError, match="not fitted"):
        AnytimeRegressor(GROUPS, COSTS).predict(X)
    assert issubclass(InputError, EdgeseqError) and issubclass(InputError, ValueError)


def test_scikit_learn_check_estimator():
    check_estimator(AnytimeRegressor())


def test_pipeline_and_clone(data):
    from sklearn.base import clone
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    X, y = data
    pipe = make_pipeline(StandardScaler(), AnytimeRegressor(GROUPS, COSTS)).fit(X, y)
    direct = AnytimeRegressor(GROUPS, COSTS).fit(X, y)  # whitening makes per-column scaling irrelevant
    np.testing.assert_allclose(pipe.predict(X), direct.predict(X), rtol=1e-6, atol=1e-9)
    c = clone(AnytimeRegressor(GROUPS, COSTS, method="fr", doubling=True))
    assert c.get_params()["method"] == "fr" and not hasattr(c, "sequence_")


def test_progress_reports_every_step(data):
    lines = []
    est = AnytimeRegressor(GROUPS, COSTS, group_names=["a", "b", "c"], l2=1e-5, whiten=True).fit(*data, progress=lines.append)
    assert lines[0].startswith("statistics pass over 120 rows")
    rows = [ln for ln in lines[1:] if ln.startswith("statistics: ")]
    assert rows and rows[-1] == "statistics: 120/120 rows"  # the pass, by chunk
    names = ["a", "b", "c"]
    assert lines[1 + len(rows):] == [f"selection step {j + 1}/3: {names[g]}" for j, g in enumerate(est.sequence_)]
