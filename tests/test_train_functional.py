"""The functional core and model files of earlier releases."""

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes

from edgeseq import AnytimeRegressor
from edgeseq.errors import InputError
from edgeseq.io.model_io import load_model
from edgeseq.train.linear.functional import sequence_from_gram

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("method", ["omp", "fr", "single", "gomp"])
@pytest.mark.parametrize("whiten", [True, False])
def test_sequence_from_gram_equals_the_estimator(method, whiten):
    """Covariances computed by hand (float64, two-pass) give the estimator's sequence and weights."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 7)) @ rng.normal(size=(7, 7)) + rng.normal(size=7) * 10
    y = X @ rng.normal(size=7) + rng.normal(size=300)
    groups, costs = [[0, 1], [2], [3, 4, 5], [6]], [1.0, 0.5, 2.0, 1.5]
    est = AnytimeRegressor(groups=groups, costs=costs, method=method, whiten=whiten, l2=1e-5).fit(X, y)
    Xc, yc = X - X.mean(0), y - y.mean()
    seq = sequence_from_gram(Xc.T @ Xc / 300, Xc.T @ yc / 300, yc.var(), groups, costs, n_samples=300,
                             x_mean=X.mean(0), y_mean=y.mean(), method=method, whiten=whiten)
    ref = est.fitted_sequence_
    assert seq.order.tolist() == ref.order.tolist()
    # two float64 routes to the same covariances (two-pass here, the estimator's shifted one-pass):
    # agreement to ~1e-8 of the largest coefficient, far inside what any selection decision notices
    for a, b in zip(seq.coefs, ref.coefs):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-8 * max(1.0, float(np.abs(b).max(initial=0.0))))
    np.testing.assert_allclose(seq.intercepts, ref.intercepts, rtol=1e-7, atol=1e-8)


def test_sequence_from_gram_refuses_bad_arrays():
    with pytest.raises(InputError, match="square"):
        sequence_from_gram(np.zeros((2, 3)), np.zeros(2), 1.0, [[0]], [1.0], n_samples=10)
    with pytest.raises(InputError, match="NaN"):
        sequence_from_gram(np.full((2, 2), np.nan), np.zeros(2), 1.0, [[0], [1]], [1.0, 1.0], n_samples=10)
    with pytest.raises(InputError, match="n_samples"):
        sequence_from_gram(np.eye(2), np.zeros(2), 1.0, [[0], [1]], [1.0, 1.0], n_samples=1)


def test_model_files_of_0_1_0_load_and_predict_identically():
    """Files pickled by edgeseq 0.1.0 name its flat modules (edgeseq.regressor, ...).

    The stored predictions were computed on another CPU, whose BLAS kernels round a dot product's
    last bit differently (an Intel Xeon differs from the AMD EPYC that wrote them by one ulp on 7 of
    40 rows): values agree to 1e-12 relative, a few ulps, which any change of a weight would exceed;
    labels agree exactly."""
    expected = json.loads((FIXTURES / "model_0.1.0_expected.json").read_text())
    Xd, _ = load_diabetes(return_X_y=True)
    Xb, _ = load_breast_cancer(return_X_y=True)
    reg = load_model(FIXTURES / "model_0.1.0_regressor.pkl")
    clf = load_model(FIXTURES / "model_0.1.0_classifier.pkl")
    seq = load_model(FIXTURES / "model_0.1.0_sequence.pkl")
    assert b"edgeseq.regressor" in (FIXTURES / "model_0.1.0_regressor.pkl").read_bytes()  # really the old path
    for got, want in zip(reg.staged_predict(Xd[:40]), expected["regressor_staged"]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    for got, want in zip(clf.staged_predict_proba(Xb[:40]), expected["classifier_staged_proba"]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    for got, want in zip(clf.staged_predict(Xb[:40]), expected["classifier_staged"]):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(seq.linear(Xd[:40], seq.n_prefixes - 1)[:, 0], expected["regressor_staged"][-1],
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("whiten", [True, False])
def test_the_working_gram_equals_the_dense_product_in_any_slabs(whiten, monkeypatch):
    """K = Tᵀ Σ T, assembled slab by slab with one product per group, against T formed densely; groups
    of mixed widths with a constant and a duplicated column. Per-column standardisation gives the same
    numbers to the bit whatever the slabs; K is exactly symmetric off its diagonal blocks."""
    import edgeseq.train.linear.basis as basis
    from edgeseq.train.linear.stats import sufficient_statistics

    rng = np.random.default_rng(8)
    sizes = [1, 7, 3, 12, 2, 9, 4]
    d = sum(sizes)
    X = rng.normal(size=(500, d)) @ (np.eye(d) + 0.3 * rng.normal(size=(d, d))) + rng.normal(size=d)
    X[:, 3] = 2.5
    X[:, 9] = X[:, 8]
    stats = sufficient_statistics(X, X[:, 0] + rng.normal(size=500))
    probs = {}
    for slab in (0, 1 << 40):  # a slab per few groups (a sixteenth of K) and one slab for all
        monkeypatch.setattr(basis, "GRAM_SLAB_BYTES", slab)
        probs[slab] = basis.build_working_problem(stats, sizes, whiten)
    prob = probs[0]
    T = np.zeros((d, prob.n_working))
    for Tg, rs, sl in zip(prob.transforms, prob.raw_slices, prob.slices):
        T[rs, sl] = Tg
    dense = T.T @ (stats.xx / stats.n) @ T
    off = np.ones_like(dense, dtype=bool)
    for s in prob.slices:
        off[s, s] = False
    assert off.any() and len(prob.slices) == len(sizes) and prob.n_working < d  # not vacuous: dropped columns
    for K in (probs[0].K, probs[1 << 40].K):
        np.testing.assert_allclose(K[off], dense[off], rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(K[off], K.T[off])
        if whiten:
            for s in prob.slices:
                np.testing.assert_array_equal(K[s, s], np.eye(s.stop - s.start))
        else:
            np.testing.assert_allclose(K, dense, rtol=1e-12, atol=1e-14)
    if not whiten:
        np.testing.assert_array_equal(probs[0].K, probs[1 << 40].K)
