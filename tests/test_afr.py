"""AFRClassifier end to end: breast cancer (binary, 10 costed groups) and digits (multiclass) with the
default hyper-parameters, the anytime stage rule, the cost rule on the fitted stages, the
scikit-learn API and its errors."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.model_selection import train_test_split

import edgeseq
from edgeseq.errors import InputError, NotFittedError
from edgeseq.train.trees.afr import AFRClassifier

BC_GROUPS = [[i, i + 10, i + 20] for i in range(10)]  # mean / se / worst of each measurement
BC_COSTS = np.arange(1.0, 11.0)


@pytest.fixture(scope="module")
def bc():
    X, y = load_breast_cancer(return_X_y=True)
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    return AFRClassifier(BC_GROUPS, BC_COSTS).fit(Xa, ya), Xb, yb


def test_breast_cancer_defaults_learn_an_anytime_classifier(bc):
    model, Xb, yb = bc
    acc = [float(np.mean(p == yb)) for p in model.staged_predict(Xb)]
    assert acc[0] == pytest.approx(np.mean(yb == 1))  # stage 0: the prior (majority class)
    assert acc[-1] >= 0.9 and max(acc[1:]) >= 0.9
    assert np.all(np.diff(model.cum_cost_) > 0)
    sm = model.stage_model_
    assert len(sm.stages) >= 2 and sm.ensemble.n_trees == model.n_trees_ > 0


def test_cost_rule_on_fitted_stages(bc):
    """Every group is charged once, by the stage whose first tree uses it; no tree reads a group of a
    later stage; stage costs are exactly the new groups' costs."""
    model, *_ = bc
    sm = model.stage_model_
    owner = np.full(30, -1)
    for g, cols in enumerate(BC_GROUPS):
        owner[cols] = g
    paid = []
    for k, st in enumerate(sm.stages):
        assert st.cost == pytest.approx(BC_COSTS[list(st.new_groups)].sum())
        assert not set(st.new_groups) & set(paid)
        paid += list(st.new_groups)
        trees = range(st.tree_start, st.tree_stop)
        used = {int(owner[f]) for f in sm.ensemble.features_of_trees(trees)}
        assert used <= set(paid)
        if k:
            first = {int(owner[f]) for f in sm.ensemble.features_of_trees([st.tree_start])}
            assert set(st.new_groups) <= first  # the first tree of the stage is the one that pays
    assert model.cum_cost_[-1] == pytest.approx(BC_COSTS[paid].sum())


def test_budget_and_stage_selection(bc):
    model, Xb, _ = bc
    staged = list(model.staged_predict_proba(Xb))
    for k, c in enumerate(model.cum_cost_):
        np.testing.assert_allclose(model.predict_proba(Xb, budget=c), staged[k], rtol=1e-12)
        np.testing.assert_allclose(model.predict_proba(Xb, stage=k), staged[k], rtol=1e-12)
    np.testing.assert_allclose(model.predict_proba(Xb, budget=model.cum_cost_[1] - 1e-9), staged[0])
    np.testing.assert_allclose(model.predict_proba(Xb), staged[-1])
    z = model.decision_function(Xb)
    assert z.shape == (Xb.shape[0],)
    np.testing.assert_allclose(1 / (1 + np.exp(-z)), staged[-1][:, 1], rtol=1e-10)


def test_unextracted_groups_may_be_missing(bc):
    model, Xb, _ = bc
    k = 1
    X = Xb.copy()
    unused = np.setdiff1d(np.arange(30), model.stage_model_.prefix_columns(k))
    X[:, unused] = np.nan
    np.testing.assert_allclose(model.predict_proba(X, stage=k), model.predict_proba(Xb, stage=k))
    with pytest.raises(InputError, match="NaN or Inf"):
        model.predict_proba(X)  # the last stage needs more groups
    X2 = Xb.copy()
    X2[0, model.stage_model_.prefix_columns(k)[0]] = np.inf
    with pytest.raises(InputError, match="NaN or Inf"):
        model.predict_proba(X2, stage=k)


def test_digits_multiclass_defaults():
    X, y = load_digits(return_X_y=True)
    groups = [list(range(8 * r, 8 * r + 8)) for r in range(8)]  # image rows, equal costs
    Xa, Xb, ya, yb = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    model = AFRClassifier(groups, np.ones(8)).fit(Xa, ya)
    acc = [float(np.mean(p == yb)) for p in model.staged_predict(Xb)]
    assert acc[-1] >= 0.88 and acc[-1] > acc[1] + 0.5
    proba = model.predict_proba(Xb)
    assert proba.shape == (Xb.shape[0], 10)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert model.decision_function(Xb, stage=1).shape == (Xb.shape[0], 10)
    assert model.stage_model_.link == "softmax" and len(model.C_) == 10


def test_lazy_top_level_name_and_errors(bc):
    assert edgeseq.AFRClassifier is AFRClassifier
    model, Xb, _ = bc
    with pytest.raises(InputError, match="either budget or stage"):
        model.predict(Xb, budget=1, stage=1)
    with pytest.raises(InputError, match="stage must be"):
        model.predict(Xb, stage=len(model.cum_cost_))
    with pytest.raises(InputError, match="budget must be"):
        model.predict(Xb, budget=-1)
    with pytest.raises(InputError, match="features"):
        model.predict(Xb[:, :5])
    with pytest.raises(NotFittedError):
        AFRClassifier().predict(Xb)
    with pytest.raises(InputError, match="n_dims"):
        AFRClassifier(n_dims=0).fit(Xb, np.arange(Xb.shape[0]) % 2)
    X, y = load_breast_cancer(return_X_y=True)
    Xn = X.copy()
    Xn[3, 0] = np.nan
    with pytest.raises(InputError, match="NaN or Inf"):
        AFRClassifier(BC_GROUPS, BC_COSTS).fit(Xn, y)


def test_deterministic_given_random_state():
    X, y = load_breast_cancer(return_X_y=True)
    a = AFRClassifier(BC_GROUPS, BC_COSTS, max_blocks=2).fit(X, y)
    b = AFRClassifier(BC_GROUPS, BC_COSTS, max_blocks=2).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    c = AFRClassifier(BC_GROUPS, BC_COSTS, max_blocks=2, random_state=1).fit(X, y)
    assert not np.array_equal(a.predict_proba(X), c.predict_proba(X))  # the seed matters (control)


def test_scikit_learn_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator
    # min_samples_leaf=1: the checks fit on as few as 12 rows, where 5-row leaves leave AFR no split (and
    # an AFR without a tree is refused rather than returned empty)
    check_estimator(AFRClassifier(n_dims=2, n_trees=2, max_blocks=2, min_samples_leaf=1), expected_failed_checks={
        # an anytime model reads only the groups its stage has paid for: NaN in a group that is never
        # extracted is legitimate input, not an error
        "check_estimators_nan_inf": "stages read only the groups they paid for"})


def test_stage_model_is_the_trained_representation_and_readout():
    """The exported arrays reproduce what training used: the state equals the representation φ the
    outer loop built (rolled-back trees excluded), and the last stage's readout is the final SVM
    with its Platt scaling."""
    from edgeseq.train.trees.afr import _AFRFit
    from edgeseq.train.trees.afr_svm import platt
    from edgeseq.forms.groups import check_groups
    X, y = load_breast_cancer(return_X_y=True)
    est = AFRClassifier(BC_GROUPS, BC_COSTS, max_blocks=3)
    fit = _AFRFit(est, X, y, 2, check_groups(BC_GROUPS, BC_COSTS, None, 30))
    model = fit.run()
    np.testing.assert_allclose(model.ensemble.predict(X), fit.phi, rtol=1e-12, atol=1e-12)
    p = fit.problems[0]
    A, B = platt(p.sol.decision(fit.phi[np.ix_(fit.iV, p.dims)]), (p.y[fit.iV] > 0).astype(float))
    z = model.decision(X, len(model.stages) - 1)[:, 0]
    np.testing.assert_allclose(z, A * p.sol.decision(fit.phi[:, p.dims]) + B, rtol=1e-10, atol=1e-10)


def _symmetric_interaction(n: int, seed: int):
    """Label = [x0·x2 > 0] with 5 % flipped: the sign of a product of a column of group 0 and one of
    group 1. Every column is independent of the label, so a linear model is at chance and no single
    split gains anything in expectation: a depth-limited greedy tree under a cost penalty has no
    first split that pays (AFR used to come back with no tree at all here)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    y = (X[:, 0] * X[:, 2] > 0).astype(int)
    return X, np.where(rng.random(n) < 0.05, 1 - y, y)


SYM_GROUPS, SYM_COSTS = [[0, 1], [2, 3], [4, 5], [6, 7]], [1.0, 2.0, 4.0, 8.0]


def test_afr_finds_a_symmetric_interaction_where_a_linear_model_is_at_chance():
    X, y = _symmetric_interaction(800, 0)
    Xt, yt = _symmetric_interaction(3000, 1)
    afr = AFRClassifier(SYM_GROUPS, SYM_COSTS).fit(X, y)
    linear = edgeseq.AnytimeClassifier(SYM_GROUPS, SYM_COSTS).fit(X, y)
    assert abs(linear.score(Xt, yt) - 0.5) < 0.05  # control: the signal is invisible to a linear model
    assert len(afr.cum_cost_) >= 2 and afr.score(Xt, yt) >= 0.70


def test_afr_that_finds_no_tree_raises_one_clear_error():
    X = np.ones((60, 4))  # no column can be split: no stage at any cost penalty
    y = np.arange(60) % 2
    with pytest.raises(InputError, match="AFR found no tree.*AnytimeBoostingClassifier"):
        AFRClassifier([[0, 1], [2, 3]], [1.0, 2.0], max_blocks=2).fit(X, y)
