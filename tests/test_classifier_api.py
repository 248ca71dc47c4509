"""AnytimeClassifier's scikit-learn surface and its hard inputs (labels, imbalance, separability)."""

import warnings

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from edgeseq import AnytimeClassifier
from edgeseq.errors import EdgeseqWarning, InputError, NotFittedError
from edgeseq.train.glm.fit import GRAD_TOL


def blobs(seed=0, n=200, n_classes=3, D=6, sep=1.5):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    X = rng.normal(size=(n, D)) + sep * rng.normal(size=(n_classes, D))[y]
    return X, y


GROUPS = [[0, 1], [2], [3, 4, 5]]
COSTS = [1.0, 0.5, 2.0]


@parametrize_with_checks([AnytimeClassifier(), AnytimeClassifier(method="fr", whiten=False)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("labels", [np.array(["cat", "dog", "emu"]), np.array([-3, 10, 7]),
                                    np.array([1.0, 2.0, 5.0])])
def test_labels_are_returned_as_given(labels):
    X, k = blobs()
    y = labels[k]
    clf = AnytimeClassifier(groups=GROUPS, costs=COSTS).fit(X, y)
    assert sorted(clf.classes_.tolist()) == sorted(labels.tolist())
    assert set(clf.predict(X).tolist()) <= set(labels.tolist())
    assert clf.score(X, y) > 0.8
    assert clf.fitted_sequence_.output_names == tuple(str(c) for c in clf.classes_)
    assert clf.fitted_sequence_.link == "softmax" and clf.fitted_sequence_.task == "classification"


def test_binary_shapes_and_consistency():
    X, k = blobs(n_classes=2)
    y = np.array(["no", "yes"])[k]
    clf = AnytimeClassifier(groups=GROUPS, costs=COSTS).fit(X, y)
    assert clf.fitted_sequence_.link == "sigmoid" and clf.fitted_sequence_.n_outputs == 1
    z, proba = clf.decision_function(X), clf.predict_proba(X)
    assert z.shape == (len(X),) and proba.shape == (len(X), 2)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-z)), rtol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), np.where(z > 0, "yes", "no"))
    assert clf.coef_.shape == (1, X.shape[1])  # scikit-learn's binary layout (LogisticRegression)
    assert clf.coef_path_.shape == (len(GROUPS) + 1, 1, X.shape[1])


def test_prefix0_is_the_class_prior_and_staged_matches_prefixes():
    X, y = blobs(n=300, n_classes=4)
    clf = AnytimeClassifier(groups=GROUPS, costs=COSTS).fit(X, y)
    prior = np.bincount(y) / len(y)
    np.testing.assert_allclose(clf.predict_proba(X, prefix=0), np.tile(prior, (len(X), 1)), rtol=1e-12)
    staged = list(clf.staged_predict_proba(X))
    assert len(staged) == len(GROUPS) + 1
    for j, p in enumerate(staged):
        np.testing.assert_array_equal(p, clf.predict_proba(X, prefix=j))
        np.testing.assert_array_equal(list(clf.staged_predict(X))[j], clf.predict(X, prefix=j))
    # budgets: the longest prefix whose cumulative cost fits (inclusive)
    cum = clf.cum_cost_
    np.testing.assert_array_equal(clf.predict_proba(X, budget=cum[2]), staged[2])
    np.testing.assert_array_equal(clf.predict_proba(X, budget=cum[2] * 0.999), staged[1])


def test_train_curves_are_recomputed_accuracy_and_log_loss():
    X, y = blobs(n=300, n_classes=3, sep=0.8)
    clf = AnytimeClassifier(groups=GROUPS, costs=COSTS, method="fr").fit(X, y)
    for j, proba in enumerate(clf.staged_predict_proba(X)):
        assert clf.train_accuracy_[j] == pytest.approx(np.mean(clf.classes_[proba.argmax(1)] == y))
        ll = -np.mean(np.log(proba[np.arange(len(y)), y]))
        assert clf.train_log_loss_[j] == pytest.approx(ll, rel=1e-9)
        assert clf.fitted_sequence_.train_metrics[j]["accuracy"] == clf.train_accuracy_[j]
    np.testing.assert_array_equal(clf.train_curve_, clf.train_accuracy_)
    assert np.all(np.diff(clf.train_log_loss_) < 0)


def test_single_class_and_unseen_labels():
    X, _ = blobs()
    with pytest.raises(InputError, match="single class"):
        AnytimeClassifier().fit(X, np.full(len(X), "a"))
    X, k = blobs(n_classes=2)
    clf = AnytimeClassifier(groups=GROUPS, costs=COSTS).fit(X, k)
    y_new = k.copy()
    y_new[:10] = 7  # a label never seen in training: a clear error naming it
    with pytest.raises(InputError, match=r"label\(s\) \[7\] not seen in training"):
        clf.score(X, y_new)
    assert clf.score(X, k) > 0.5
    with pytest.raises(InputError, match="Unknown label type"):
        AnytimeClassifier().fit(X, np.linspace(0, 1, len(X)))


def test_not_fitted_and_bad_inputs():
    X, y = blobs()
    with pytest.raises(NotFittedError):
        AnytimeClassifier().predict_proba(X)
    clf = AnytimeClassifier(groups=GROUPS, costs=COSTS).fit(X, y)
    Xbad = X.copy()
    Xbad[0, GROUPS[clf.sequence_[0]][0]] = np.nan
    with pytest.raises(InputError, match="NaN"):
        clf.predict(Xbad)
    assert clf.predict(Xbad, prefix=0).shape == (len(X),)  # prefix 0 reads no column
    with pytest.raises(InputError, match="NaN"):
        AnytimeClassifier(groups=GROUPS, costs=COSTS).fit(Xbad, y)
    with pytest.raises(InputError):
        AnytimeClassifier(method="lasso").fit(X, y)
    with pytest.raises(InputError, match="prefix"):
        clf.predict(X, prefix=99)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_extreme_imbalance(n_classes):
    rng = np.random.default_rng(3)
    n = 4000
    y = np.zeros(n, dtype=int)
    y[rng.choice(n, 4, replace=False)] = 1  # 0.1% positives
    if n_classes == 3:
        y[rng.choice(np.nonzero(y == 0)[0], 2, replace=False)] = 2
    X = rng.normal(size=(n, 6))
    X[y > 0, 0] += 3
    clf = AnytimeClassifier(groups=GROUPS, costs=COSTS).fit(X, y)
    prior = np.bincount(y) / n
    np.testing.assert_allclose(clf.predict_proba(X[:1], prefix=0)[0], prior, rtol=1e-12)
    assert np.all(clf.grad_norms_ <= GRAD_TOL)
    assert np.all(np.isfinite(clf.coef_path_))


@pytest.mark.parametrize("n_classes", [2, 3])
def test_perfectly_separable_data_stays_finite(n_classes):
    """Without the L2 term the logistic optimum is at infinity; with λ it is finite and attained."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 6))
    y = np.digitize(X[:, 2], [-0.4, 0.4]) if n_classes == 3 else (X[:, 2] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EdgeseqWarning)  # a non-converged refit would warn
        clf = AnytimeClassifier(groups=GROUPS, costs=COSTS, l2=1e-4).fit(X, y)
    assert np.all(np.isfinite(clf.coef_path_)) and np.all(np.isfinite(clf.intercept_path_))
    assert np.all(clf.grad_norms_ <= GRAD_TOL)
    assert clf.score(X, y) >= (1.0 if n_classes == 2 else 0.97)
    big = AnytimeClassifier(groups=GROUPS, costs=COSTS, l2=1e-1).fit(X, y)
    assert np.abs(big.coef_).max() < np.abs(clf.coef_).max()  # stronger L2, smaller weights


def test_constant_group_warns_and_goes_last():
    X, y = blobs()
    X[:, 2] = 5.0
    with pytest.warns(EdgeseqWarning, match="no usable direction"):
        clf = AnytimeClassifier(groups=GROUPS, costs=COSTS).fit(X, y)
    assert clf.sequence_[-1] == 1
    np.testing.assert_allclose(clf.predict_proba(X, prefix=2), clf.predict_proba(X, prefix=3), atol=1e-12)


def test_doubling_respects_cost_so_far():
    X, y = blobs(D=6)
    groups = [[0], [1], [2], [3], [4], [5]]
    costs = np.array([1.0, 1.0, 2.0, 4.0, 8.0, 100.0])
    clf = AnytimeClassifier(groups=groups, costs=costs, doubling=True, method="fr").fit(X, y)
    spent = 0.0
    for step, g in enumerate(clf.sequence_, start=1):
        limit = costs.min() if step == 1 else spent
        assert costs[g] <= limit or step in clf.doubling_violations_
        spent += costs[g]


def test_progress_reports_every_step():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 4))
    y = (X[:, 0] + X[:, 2] > 0).astype(int)
    lines = []
    est = AnytimeClassifier([[0, 1], [2, 3]], [1.0, 2.0], group_names=["a", "b"], l2=1e-4, whiten=True).fit(
        X, y, progress=lines.append)
    assert lines[0].startswith("statistics pass over 80 rows")
    assert len(lines) == 3
    for j, (line, g) in enumerate(zip(lines[1:], est.sequence_)):  # each step names its refit's passes and loss
        assert line.startswith(f"selection step {j + 1}/2: {['a', 'b'][g]} (refit: ")
        assert line.endswith(f" passes over the rows, training log-loss {est.train_log_loss_[j + 1]:.4g})")
