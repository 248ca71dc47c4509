"""The compiled C runtime + generated model equals numpy float64 on every prefix (float32 bound).

Bound (see c_support.float32_bound): |C - numpy| <= 2 (d_j + 3) 2^-24 (sum_i |x_i w_i| + |b|)
(+ 2^-20 after a sigmoid/softmax link), per row and prefix.
"""

import zlib

import numpy as np
import pytest
from c_support import SAN, assert_matches_numpy, float32_bound, sanitizer_compilers
from sequences import random_sequence

from edgeseq.export.c_harness import predict_all_prefixes_c, run_c


def _inputs(rng, seq, n=12):
    """Ordinary rows plus rows of large, tiny and mixed magnitudes (all finite in float32)."""
    D = seq.n_features_in
    base = rng.normal(size=(n, D))
    mixed = base * 10.0 ** rng.integers(-30, 30, size=(1, D))
    return np.vstack([base, base[:4] * 1e15, base[:4] * 1e-15, base[:4] * 1e-42, mixed[:6],
                      np.zeros((1, D))])


def _features(seq, X):
    return X[:, seq.prefix_columns(len(seq.order))]


CASES = [
    ("identity", (2, 3, 1), 1, 1.0),
    ("identity", (1, 1, 1, 1, 1), 3, 1.0),
    ("identity", (17, 4, 33), 2, 1e-3),
    ("sigmoid", (3, 5, 2, 1), 1, 1.0),
    ("softmax", (4, 2, 6), 5, 1.0),
    ("softmax", (1, 9), 3, 1e6),
]


@pytest.mark.parametrize("link,sizes,P,scale", CASES)
def test_every_prefix_matches_numpy(link, sizes, P, scale):
    rng = np.random.default_rng(zlib.crc32(repr((link, sizes, P)).encode()))
    seq = random_sequence(rng, sizes, n_outputs=P, link=link, scale=scale)
    X = _inputs(rng, seq)
    run = run_c(seq, _features(seq, X))
    assert_matches_numpy(seq, X, run.predictions)
    for j, labels in enumerate(run.labels):
        if link == "identity":
            assert np.all(labels == -1)
        else:  # the first maximum of C's own probabilities, and numpy's argmax where clearly apart
            assert np.array_equal(labels, run.predictions[j].argmax(axis=1))
            ref = seq.apply_link(seq.linear(X, j))
            top2 = np.sort(ref, axis=1)[:, -2:]
            clear = top2[:, 1] - top2[:, 0] > 1e-4
            assert np.array_equal(labels[clear], ref[clear].argmax(axis=1))


def _one_feature_classifier(link, intercepts, coef):
    """Prefix 0 = the intercept alone; prefix 1 = x * coef + 0 (one group of one feature)."""
    from edgeseq.forms.linear import FittedSequence
    k = 2 if link == "sigmoid" else len(coef)
    classes = np.array([f"c{i}" for i in range(k)])
    return FittedSequence(task="classification", link=link, n_features_in=1, group_names=("a",),
                          group_columns=(np.array([0]),), costs=np.array([1.0]), order=np.array([0]),
                          coefs=(np.zeros((0, len(coef))), np.array([coef], dtype=float)),
                          intercepts=np.array([intercepts, [0.0] * len(coef)], dtype=float),
                          output_names=tuple(classes.tolist()), classes=classes, y_was_1d=False)


def test_label_is_the_first_maximum_of_the_returned_probabilities():
    """A logit too small to move float32 probabilities off a tie gives the FIRST class (as ONNX
    ArgMax does), not the sign of z; wherever the probabilities differ, the larger one wins."""
    seq = _one_feature_classifier("sigmoid", [1e-8], [1.0])
    X = np.array([[1e-8], [0.0], [-1e-8], [2.0 ** -24], [2.0 ** -22], [-2.0 ** -22]])
    run = run_c(seq, X)
    np.testing.assert_array_equal(run.predictions[0], 0.5)
    np.testing.assert_array_equal(run.labels[0], 0)  # z = 1e-8 > 0, yet the probabilities tie: class 0
    p = run.predictions[1]
    np.testing.assert_array_equal(p[:3], 0.5)
    np.testing.assert_array_equal(run.labels[1][:3], [0, 0, 0])
    assert p[3, 1] > p[3, 0] and p[4, 1] > p[4, 0] and p[5, 0] > p[5, 1]  # rounding moved them apart
    np.testing.assert_array_equal(run.labels[1][3:], [1, 1, 0])

    soft = _one_feature_classifier("softmax", [0.0, 1e-9, 0.0], [1.0, 1.0, 1.0])
    run = run_c(soft, np.array([[0.0]]))
    assert np.all(run.predictions[0] == run.predictions[0][0, 0])  # expf(-1e-9) == 1: a 3-way tie
    assert run.labels[0][0] == 0  # logit argmax would be class 1


@pytest.mark.parametrize("cc", sanitizer_compilers())
def test_under_sanitizers_and_both_compilers(cc):
    rng = np.random.default_rng(7)
    seq = random_sequence(rng, (3, 1, 4), n_outputs=4, link="softmax")
    X = _inputs(rng, seq)
    preds = predict_all_prefixes_c(seq, _features(seq, X), compiler=cc, flags=SAN, extra=("-O1", "-g"))
    assert_matches_numpy(seq, X, preds)


def test_group_list_input_and_model_dir(tmp_path):
    """Features may come as one array per group (sequence order); a model directory works too."""
    from edgeseq.export.kinds.affine.c_float import write_c_model
    rng = np.random.default_rng(3)
    seq = random_sequence(rng, (2, 2), n_outputs=1)
    write_c_model(seq, tmp_path, "dirmodel")
    X = rng.normal(size=(5, seq.n_features_in))
    per_group = [X[:, seq.group_columns[g]] for g in seq.order]
    assert_matches_numpy(seq, X, predict_all_prefixes_c(tmp_path, per_group))


def test_wrong_feature_count_is_an_error():
    from edgeseq.errors import InputError
    seq = random_sequence(np.random.default_rng(0), (2, 3))
    with pytest.raises(InputError, match="expects 5"):
        predict_all_prefixes_c(seq, np.zeros((2, 4)))
    with pytest.raises(InputError, match="finite"):
        predict_all_prefixes_c(seq, np.full((2, 5), np.nan))


def test_fitted_regressor_and_classifiers():
    """Real fits (AnytimeRegressor, binary and multiclass AnytimeClassifier) through the same path."""
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris

    from edgeseq import AnytimeClassifier, AnytimeRegressor
    Xd, yd = load_diabetes(return_X_y=True)
    groups = [[0, 1], [2], [3, 4, 5], [6, 7, 8, 9]]
    reg = AnytimeRegressor(groups=groups, costs=[1.0, 0.5, 2.0, 3.0]).fit(Xd, yd)
    Xb, yb = load_breast_cancer(return_X_y=True)
    clf = AnytimeClassifier(groups=[list(range(i, 30, 10)) for i in range(10)], costs=np.arange(1, 11.0)).fit(Xb, yb)
    Xi, yi = load_iris(return_X_y=True)
    multi = AnytimeClassifier(groups=[[0, 1], [2], [3]], costs=[1.0, 2.0, 1.5]).fit(Xi, yi)
    for est, X in ((reg, Xd), (clf, Xb), (multi, Xi)):
        seq = est.fitted_sequence_
        rows = X[:40]
        preds = predict_all_prefixes_c(seq, _features(seq, rows))
        assert_matches_numpy(seq, rows, preds)
        if seq.link == "identity":  # and the estimator's own predict agrees with the sequence
            np.testing.assert_allclose(est.predict(rows, prefix=seq.n_prefixes - 1), preds[-1][:, 0],
                                       rtol=1e-5, atol=1e-5 * np.abs(yd).max())


def test_export_directory_runs_in_c(tmp_path):
    """`export_model` output (what `edgeseq export` writes) compiles and matches est.predict per prefix."""
    from sklearn.datasets import load_diabetes

    from edgeseq import AnytimeRegressor
    from edgeseq.export.writer import export_model
    X, y = load_diabetes(return_X_y=True)
    est = AnytimeRegressor(groups=[[0, 1], [2, 3], [4, 5, 6, 7, 8, 9]], costs=[1.0, 2.0, 3.0],
                           group_names=["age/sex */", 'bmi "bp"', "blood\\serum"]).fit(X, y)
    out = tmp_path / "out"
    export_model(est.fitted_sequence_, out, c_prefix="diab")
    seq = est.fitted_sequence_
    preds = predict_all_prefixes_c(out, [X[:30, seq.group_columns[g]] for g in seq.order])
    for j, p in enumerate(preds):
        ref = est.predict(X[:30], prefix=j)
        np.testing.assert_allclose(p[:, 0], ref, rtol=0, atol=float(float32_bound(seq, X[:30], j).max()))
