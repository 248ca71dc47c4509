"""Anytime curves: hand-computed values, step-function reading, Oracle, and scikit-learn references."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, brier_score_loss, log_loss, r2_score

from edgeseq.metrics.curves import AnytimeCurve, oracle_curve, prefix_at_budget, value_at_budget
from edgeseq.errors import InputError
from edgeseq.evaluate.anytime import anytime_curve
from edgeseq.forms.linear import FittedSequence
from sequences import random_sequence


def _two_group_regression() -> FittedSequence:
    # group "a" = column 0 (cost 1), group "b" = column 1 (cost 2); order a, b
    return FittedSequence(
        task="regression", link="identity", n_features_in=2, group_names=("a", "b"),
        group_columns=(np.array([0]), np.array([1])), costs=np.array([1.0, 2.0]), order=np.array([0, 1]),
        coefs=(np.zeros((0, 1)), np.array([[1.0]]), np.array([[1.0], [0.5]])),
        intercepts=np.array([[2.5], [0.0], [0.0]]), output_names=("y",), provenance={"method": "hand"})


def test_regression_curve_by_hand():
    X = np.array([[1.0, 0.0], [2.0, 1.0], [3.0, 0.0], [4.0, 1.0]])
    y = np.array([1.0, 2.0, 3.0, 4.0])  # mean 2.5, sum of squares about the mean 5
    c = anytime_curve(_two_group_regression(), X, y)
    # prefix 0 predicts 2.5 (F = 0); prefix 1 predicts y exactly (F = 1);
    # prefix 2 adds 0.5 on rows 1 and 3: SSE = 0.5, F = 1 - 0.5/5 = 0.9
    np.testing.assert_allclose(c.values, [0.0, 1.0, 0.9], atol=1e-15)
    np.testing.assert_array_equal(c.costs, [0.0, 1.0, 3.0])
    assert c.group_names == ("a", "b") and c.label == "hand"
    assert c.accuracy is None and c.log_loss is None


def _binary_sequence() -> FittedSequence:
    ln3 = np.log(3.0)
    return FittedSequence(
        task="classification", link="sigmoid", n_features_in=1, group_names=("x",),
        group_columns=(np.array([0]),), costs=np.array([2.0]), order=np.array([0]),
        coefs=(np.zeros((0, 1)), np.array([[ln3]])), intercepts=np.zeros((2, 1)),
        output_names=("neg", "pos"), classes=np.array(["neg", "pos"]))


def test_binary_curve_by_hand():
    X = np.array([[-1.0], [1.0], [1.0], [1.0]])
    y = np.array(["neg", "pos", "pos", "pos"])
    c = anytime_curve(_binary_sequence(), X, y, label="b")
    # one-hot columns have means 1/4, 3/4: SS = 2 * 4 * 3/16 = 1.5
    # prefix 0: p = (.5, .5) everywhere, squared error 0.5 per row -> F = 1 - 2/1.5 = -1/3;
    #   argmax tie goes to the first class "neg": accuracy 1/4; log-loss ln 2
    # prefix 1: p(pos) = 3/4 on x=1, 1/4 on x=-1; squared error 2/16 per row -> F = 1 - .5/1.5 = 2/3;
    #   all correct; log-loss ln(4/3)
    np.testing.assert_allclose(c.values, [-1 / 3, 2 / 3], rtol=1e-14)
    np.testing.assert_allclose(c.accuracy, [0.25, 1.0])
    np.testing.assert_allclose(c.log_loss, [np.log(2.0), np.log(4 / 3)], rtol=1e-14)


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_regression_matches_sklearn_r2(n_outputs):
    rng = np.random.default_rng(1)
    seq = random_sequence(rng, (2, 3, 1), n_outputs=n_outputs)
    X = rng.normal(size=(50, seq.n_features_in))
    Y = rng.normal(size=(50, n_outputs)) + X[:, :1]
    c = anytime_curve(seq, X, Y[:, 0] if n_outputs == 1 else Y)
    for j in range(seq.n_prefixes):
        # "total over outputs" is scikit-learn's variance-weighted R²
        ref = r2_score(Y, seq.linear(X, j), multioutput="variance_weighted")
        assert c.values[j] == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_binary_matches_sklearn_metrics():
    rng = np.random.default_rng(2)
    seq = random_sequence(rng, (2, 2), link="sigmoid")
    X = rng.normal(size=(80, seq.n_features_in))
    y = np.where(rng.random(80) < 0.4, "c1", "c0")
    c = anytime_curve(seq, X, y)
    y01 = (y == "c1").astype(float)
    for j in range(seq.n_prefixes):
        p = seq.apply_link(seq.linear(X, j))
        assert c.values[j] == pytest.approx(1 - brier_score_loss(y01, p[:, 1]) / y01.var(), rel=1e-12)
        assert c.log_loss[j] == pytest.approx(log_loss(y, p, labels=["c0", "c1"]), rel=1e-9)
        assert c.accuracy[j] == accuracy_score(y, seq.classes[np.argmax(p, axis=1)])


def test_softmax_matches_sklearn_metrics_and_extreme_logits_stay_finite():
    rng = np.random.default_rng(3)
    seq = random_sequence(rng, (3, 1, 2), n_outputs=4, link="softmax", scale=40.0)  # near-0 probabilities
    X = rng.normal(size=(60, seq.n_features_in))
    y = seq.classes[rng.integers(0, 4, size=60)]
    c = anytime_curve(seq, X, y)
    assert np.all(np.isfinite(c.log_loss))
    for j in range(seq.n_prefixes):
        z = seq.linear(X, j)
        k = np.searchsorted(seq.classes, y)
        ref_ll = np.mean(np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1) - z[np.arange(60), k])
        assert c.log_loss[j] == pytest.approx(ref_ll, rel=1e-9)
        p = seq.apply_link(z)
        assert c.accuracy[j] == accuracy_score(y, seq.classes[np.argmax(p, axis=1)])
        onehot = np.eye(4)[k]
        assert c.values[j] == pytest.approx(r2_score(onehot, p, multioutput="variance_weighted"), rel=1e-12)


def test_estimator_like_object_is_accepted():
    class Fitted:
        fitted_sequence_ = _two_group_regression()
    X = np.array([[1.0, 0.0], [2.0, 1.0], [3.0, 0.0], [4.0, 1.0]])
    c = anytime_curve(Fitted(), X, np.array([1.0, 2.0, 3.0, 4.0]), label="est")
    assert c.label == "est" and c.values[1] == 1.0


@pytest.mark.parametrize("bad, match", [
    (dict(X=np.ones((4, 3))), "shape"),
    (dict(X=np.array([[np.nan, 0.0], [2.0, 1.0], [3.0, 0.0], [4.0, 1.0]])), "NaN"),
    (dict(y=np.ones(4)), "constant"),
    (dict(y=np.array([1.0, np.inf, 3.0, 4.0])), "NaN or Inf"),
    (dict(y=np.ones(3)), "shape"),
])
def test_bad_regression_inputs(bad, match):
    args = dict(X=np.array([[1.0, 0.0], [2.0, 1.0], [3.0, 0.0], [4.0, 1.0]]), y=np.array([1.0, 2.0, 3.0, 4.0]))
    args.update(bad)
    with pytest.raises(InputError, match=match):
        anytime_curve(_two_group_regression(), args["X"], args["y"])


def test_bad_classification_inputs_and_models():
    with pytest.raises(InputError, match="not one of the model's classes"):
        anytime_curve(_binary_sequence(), np.zeros((2, 1)), np.array(["neg", "other"]))
    with pytest.raises(InputError, match="same class"):
        anytime_curve(_binary_sequence(), np.zeros((2, 1)), np.array(["neg", "neg"]))
    with pytest.raises(InputError, match="fitted_sequence_"):
        anytime_curve(object(), np.zeros((2, 1)), np.zeros(2))


# ------------------------------------------------------------------------------------- step reading
def _hand_curve() -> AnytimeCurve:
    return AnytimeCurve(costs=[0, 1, 3, 6], values=[0, 0.5, 0.8, 0.9], group_names=("a", "b", "c"), label="h")


@pytest.mark.parametrize("budget, prefix", [(0, 0), (0.999, 0), (1, 1), (2.9, 1), (3, 2), (5.99, 2), (6, 3),
                                            (1e9, 3), (np.inf, 3)])
def test_value_at_budget_is_an_inclusive_step(budget, prefix):
    c = _hand_curve()
    assert prefix_at_budget(c, budget) == prefix
    assert value_at_budget(c, budget) == c.values[prefix]


@pytest.mark.parametrize("budget", [-1.0, np.nan, "x"])
def test_value_at_budget_rejects_bad_budgets(budget):
    with pytest.raises(InputError):
        value_at_budget(_hand_curve(), budget)


def test_value_at_budget_agrees_with_fitted_sequence():
    rng = np.random.default_rng(4)
    seq = random_sequence(rng, (1, 2, 3, 1))
    c = AnytimeCurve(costs=seq.cum_cost, values=np.arange(5.0), group_names=("a", "b", "c", "d"))
    for b in np.concatenate([seq.cum_cost, rng.uniform(0, seq.cum_cost[-1] * 1.2, 30)]):
        assert prefix_at_budget(c, b) == seq.prefix_for_budget(b)


def test_oracle_by_hand():
    c = AnytimeCurve(costs=[0, 4, 5, 7], values=[0.1, 0.5, 1.0, 1.1], group_names=("a", "b", "c"),
                     order=[2, 0, 1], label="m")
    o = oracle_curve(c)
    # gains .4, .5, .1 at costs 4, 1, 2: gain per cost .1, .5, .05 -> order b, a, c
    assert o.group_names == ("b", "a", "c")
    np.testing.assert_array_equal(o.order, [0, 2, 1])
    np.testing.assert_allclose(o.costs, [0, 1, 5, 7])
    np.testing.assert_allclose(o.values, [0.1, 0.6, 1.0, 1.1])
    assert o.label == "Oracle(m)"


@pytest.mark.parametrize("kw, match", [
    (dict(costs=[1, 2], values=[0, 1]), "start at cost 0"),
    (dict(costs=[0, 2, 2], values=[0, 1, 1], group_names=("a", "b")), "strictly increasing"),
    (dict(costs=[0, 2], values=[0, np.nan]), "finite"),
    (dict(costs=[0, 2], values=[0, 1, 2]), "one per prefix"),
    (dict(costs=[0, 2], values=[0, 1], group_names=()), "group names"),
    (dict(costs=[0, 2], values=[0, 1], accuracy=[1.0]), "accuracy"),
])
def test_curve_validation(kw, match):
    kw.setdefault("group_names", ("a",))
    with pytest.raises(InputError, match=match):
        AnytimeCurve(**kw)


def test_curve_of_a_fitted_regressor_matches_its_training_curve():
    from sklearn.datasets import load_diabetes

    from edgeseq import AnytimeRegressor
    X, y = load_diabetes(return_X_y=True)
    reg = AnytimeRegressor(groups=[[0, 1], [2], [3], [4, 5, 6, 7], [8], [9]], costs=[1, 2, 3, 4, 1, 2]).fit(X, y)
    c = anytime_curve(reg, X, y)
    # train_curve_ comes from the D-space statistics, the curve from predictions on the rows
    np.testing.assert_allclose(c.values, reg.train_curve_, atol=1e-10)
    np.testing.assert_array_equal(c.costs, reg.cum_cost_)


def test_curve_of_a_fitted_classifier_matches_its_training_metrics():
    from sklearn.datasets import load_breast_cancer

    from edgeseq import AnytimeClassifier
    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[:250], y[:250]
    groups = [[i, i + 10, i + 20] for i in range(6)]  # mean / se / worst of a measurement
    clf = AnytimeClassifier(groups=groups, costs=np.arange(1.0, 7.0)).fit(X, y)
    c = anytime_curve(clf, X, y)
    np.testing.assert_allclose(c.accuracy, clf.train_accuracy_, atol=1e-12)
    np.testing.assert_allclose(c.log_loss, clf.train_log_loss_, rtol=1e-8)
    assert c.values[0] == pytest.approx(0.0, abs=1e-12)  # prefix 0 is the training prior
    assert c.values[-1] > 0.5
