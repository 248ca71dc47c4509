"""`AnytimeClassifier.fit(..., validation=(X_val, y_val))`: "auto" l2/whiten chosen on rows kept apart.

The held-out losses equal scikit-learn's on the same split (its single-fold `LogisticRegressionCV`),
the choice is the one a brute-force search over fixed-penalty fits makes, bad pairs get one clear
line, and the stagewise boosting's comparison uses it (one GLM fit per penalty instead of five).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegressionCV
from sklearn.metrics import log_loss

from edgeseq import AnytimeClassifier
from edgeseq.errors import InputError
from edgeseq.train.linear.auto import GLM_L2_GRID, glm_cv_losses
from test_train_auto import glm_data  # the same multiclass problems as the cross-validated choice's tests

GROUPS = [[0, 1, 2], [3, 4, 5, 6, 7]]


@pytest.mark.filterwarnings("ignore::FutureWarning")  # scikit-learn's own deprecations in LogisticRegressionCV
@pytest.mark.parametrize("n_classes", [2, 3])
def test_held_out_losses_equal_scikit_learns_on_the_same_split(n_classes):
    """Fitted on the first 140 rows, scored on the last 60, at each penalty of the grid: the same
    mean log-loss as scikit-learn's logistic regression on columns standardised with the fitted rows'
    mean and deviation (the basis the choice uses), at C = 1 / (n_fit λ): no sum-form rescaling, the
    model fitted on those rows is the one used. Negative control: the cross-validation's rescaling
    (λ · n_all / n_fit) gives other losses, so equality says which penalty was fitted."""
    X, y = glm_data(n_classes, n_classes, n=200)
    n_fit = 140
    Xf, yf, Xv, yv = X[:n_fit], y[:n_fit], X[n_fit:], y[n_fit:]
    clf = AnytimeClassifier(GROUPS, [1.0, 1.0], whiten=False).fit(Xf, yf, validation=(Xv, yv))
    mu, sd = Xf.mean(axis=0), Xf.std(axis=0)
    Z = (X - mu) / sd
    split = [(np.arange(n_fit), np.arange(n_fit, X.shape[0]))]
    ref = LogisticRegressionCV(Cs=1.0 / (n_fit * np.array(GLM_L2_GRID)), cv=split, scoring="neg_log_loss", tol=1e-10,
                               max_iter=10000).fit(Z, y)
    want = -next(iter(ref.scores_.values()))[0]
    ours = clf.cv_scores_["standardise"]
    fitted = np.isfinite(ours)  # the path stops once the held-out loss keeps rising
    assert fitted.sum() >= 3 and np.ptp(want[fitted]) > 1e-3  # several penalties, not a flat curve
    np.testing.assert_allclose(ours[fitted], want[fitted], rtol=2e-4)
    assert np.isclose(1.0 / (n_fit * clf.l2_), ref.C_[0])
    assert clf.fitted_sequence_.provenance["l2_choice"].startswith(f"held-out rows: {X.shape[0] - n_fit} rows")
    assert clf.fitted_sequence_.provenance["n_samples"] == n_fit  # the model is fitted on X alone
    rescaled = LogisticRegressionCV(Cs=1.0 / (X.shape[0] * np.array(GLM_L2_GRID)), cv=split, scoring="neg_log_loss",
                                    tol=1e-10, max_iter=10000).fit(Z, y)
    assert not np.allclose(ours[fitted], -next(iter(rescaled.scores_.values()))[0][fitted], rtol=2e-4)


def test_the_choice_is_the_brute_force_one_over_fixed_penalty_fits():
    """Every (basis, penalty) pair fitted on its own with fixed values and scored on the validation
    rows at the full budget: the held-out scores agree with those fits, and the chosen pair is what
    the documented rule (lowest basis, strongest penalty within 0.1 % of its lowest) picks from them."""
    X, y = glm_data(7, 3, n=260)
    Xf, yf, Xv, yv = X[:180], y[:180], X[180:], y[180:]
    clf = AnytimeClassifier(GROUPS, [1.0, 2.0]).fit(Xf, yf, validation=(Xv, yv))
    brute = {}
    for name, whiten in (("whiten", True), ("standardise", False)):
        losses = np.full(len(GLM_L2_GRID), np.inf)
        for i, lam in enumerate(GLM_L2_GRID):
            if np.isfinite(clf.cv_scores_[name][i]):  # the path skipped the rest; they could not have won
                fit = AnytimeClassifier(GROUPS, [1.0, 2.0], l2=lam, whiten=whiten).fit(Xf, yf)
                losses[i] = log_loss(yv, fit.predict_proba(Xv), labels=fit.classes_)
        np.testing.assert_allclose(clf.cv_scores_[name], losses, rtol=1e-3)
        brute[whiten] = losses
    best = min(brute, key=lambda w: brute[w].min())
    near = [GLM_L2_GRID[i] for i in np.flatnonzero(brute[best] <= brute[best].min() * 1.001)]
    assert (clf.whiten_, clf.l2_) == (best, max(near))


def test_validation_rows_change_the_choice_and_not_the_rows_fitted():
    """A negative control for the two tests above: scored on other rows, the same fit may choose
    another penalty, but the rows fitted are X's whatever the validation rows are (the model with a
    given choice is the one a fixed-value fit on X gives)."""
    X, y = glm_data(11, 2, n=400)
    a = AnytimeClassifier(GROUPS, [1.0, 1.0]).fit(X[:200], y[:200], validation=(X[200:], y[200:]))
    flipped = 1 - y[200:]  # labels that contradict the fitted rows: the strongest penalty scores best
    b = AnytimeClassifier(GROUPS, [1.0, 1.0]).fit(X[:200], y[:200], validation=(X[200:], flipped))
    assert b.l2_ > a.l2_
    for got in (a, b):
        ref = AnytimeClassifier(GROUPS, [1.0, 1.0], l2=got.l2_, whiten=got.whiten_).fit(X[:200], y[:200])
        np.testing.assert_allclose(got.predict_proba(X), ref.predict_proba(X), atol=1e-12)


@pytest.mark.parametrize("validation, params, says", [
    ((np.zeros((5, 7)), np.zeros(5)), {}, "validation X has shape (5, 7); expected (m >= 1, 8) like X"),
    ((np.zeros((5, 8)), np.zeros(4)), {}, "validation y has shape (4,); expected (5,), one label per row"),
    ((np.full((2, 8), np.nan), [0, 1]), {}, "validation X contains NaN or Inf in columns of the groups"),
    ((np.zeros((2, 8)), [0, 7]), {}, "validation label 7 is not among the training classes [0, 1]"),
    ((np.zeros((2, 8)),), {}, "validation= takes a pair (X_val, y_val)"),
    (([["a"] * 8] * 2, [0, 1]), {}, "validation X must be numeric: could not convert string to float: 'a'"),
    (([[0.0] * 8, [0.0] * 7], [0, 1]), {}, "validation X must be numeric: "),  # ragged rows
    ((np.zeros((2, 8)), [0, 1]), {"l2": 1.0, "whiten": False}, 'validation= chooses l2/whiten="auto"'),
])
def test_a_bad_validation_pair_is_refused_in_one_line(validation, params, says):
    X, y = glm_data(0, 2, n=60)
    with pytest.raises(InputError) as err:
        AnytimeClassifier(GROUPS, [1.0, 1.0], **params).fit(X, y, validation=validation)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_dask_fit_chooses_on_the_validation_rows_as_in_memory():
    """The partitioned fit (here partition by partition in this process) samples the same rows."""
    da = pytest.importorskip("dask.array")
    X, y = glm_data(3, 3, n=200)
    held = (X[150:], y[150:])
    mem = AnytimeClassifier(GROUPS, [1.0, 1.0]).fit(X[:150], y[:150], validation=held)
    dsk = AnytimeClassifier(GROUPS, [1.0, 1.0]).fit(da.from_array(X[:150], chunks=(40, 8)), y[:150], validation=held)
    assert (dsk.l2_, dsk.whiten_) == (mem.l2_, mem.whiten_)
    np.testing.assert_allclose(dsk.cv_scores_["whiten"], mem.cv_scores_["whiten"], rtol=1e-6)
    np.testing.assert_allclose(dsk.predict_proba(X), mem.predict_proba(X), atol=1e-5)


def test_one_held_out_fit_per_penalty_instead_of_one_per_fold():
    """What makes it cheaper: the path fits one model per penalty (the cross-validation fits five)."""
    from edgeseq.train.glm import fit as glm_fit

    X, y = glm_data(5, 2, n=200)
    Y = (y == 1).astype(float)[:, None]
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    calls = []
    real = glm_fit.refit
    glm_fit.refit = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        cv = glm_cv_losses(Z, Y, "sigmoid", (1e-2, 1e-1), 5)
        n_cv = len(calls)
        calls.clear()
        held = glm_cv_losses(Z, Y, "sigmoid", (1e-2, 1e-1), 0, held_out=np.arange(200) >= 150)
    finally:
        glm_fit.refit = real
    assert n_cv == 10 and len(calls) == 2 and np.all(np.isfinite(cv)) and np.all(np.isfinite(held))
