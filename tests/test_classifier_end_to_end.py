"""Real data end to end: fit AnytimeClassifier, export, and compare onnxruntime and the compiled C
runtime with the estimator on every prefix — probabilities within the float32 error bound
(c_support.float32_bound), labels identical except where the top two probabilities tie to float32."""

import numpy as np
import pytest
from c_support import float32_bound
from sklearn.datasets import load_breast_cancer, load_digits

from edgeseq import AnytimeClassifier
from edgeseq.errors import CCompilerError
from edgeseq.export.c_harness import find_c_compiler, run_c
from edgeseq.export.writer import export_model
from edgeseq.runtime.session import AnytimeSession


def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    names = load_breast_cancer().feature_names
    groups = [[m, m + 10, m + 20] for m in range(10)]  # mean / se / worst of each measurement
    group_names = [str(names[m]).replace("mean ", "") for m in range(10)]
    costs = np.array([1, 1, 2, 2, 1, 3, 3, 4, 1, 2], dtype=float)
    return X, y, dict(groups=groups, costs=costs, group_names=group_names)


def digits():
    X, y = load_digits(return_X_y=True)
    groups = [list(range(r * 8, r * 8 + 8)) for r in range(8)]  # one image row per group
    return X[:900], y[:900], dict(groups=groups, costs=np.linspace(1, 2, 8), l2=1e-2)


@pytest.fixture(scope="module", params=[("cancer", "omp"), ("cancer", "fr"), ("digits", "omp"),
                                        ("digits", "fr")], ids=lambda p: "-".join(p))
def exported(request, tmp_path_factory):
    data, method = request.param
    X, y, params = {"cancer": cancer, "digits": digits}[data]()
    clf = AnytimeClassifier(method=method, **params).fit(X, y)
    out = tmp_path_factory.mktemp(data) / "out"
    manifest = export_model(clf.fitted_sequence_, out, c_prefix=data)
    return clf, X, y, out, manifest


def _clear(ref, tol=1e-5):
    """Rows whose two largest probabilities differ by more than float32 can blur."""
    top2 = np.sort(ref, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0] > tol


def test_fit_quality_and_manifest(exported):
    clf, X, y, out, manifest = exported
    seq = clf.fitted_sequence_
    assert clf.score(X, y) > 0.95
    assert clf.train_accuracy_[-1] > clf.train_accuracy_[0]
    assert manifest["link"] == seq.link and manifest["task"] == "classification"
    assert [str(c) for c in manifest["outputs"]["classes"]] == [str(c) for c in clf.classes_]


def test_onnxruntime_matches_estimator_on_every_prefix(exported):
    clf, X, y, out, _ = exported
    seq = clf.fitted_sequence_
    rows = X[:200]
    with AnytimeSession(out) as sess:
        for j in range(seq.n_prefixes):
            feats = {seq.group_names[g]: rows[:, seq.group_columns[g]] for g in seq.order[:j]}
            pred = sess.predict(feats, prefix=j) if j else sess.predict({}, prefix=0)
            ref = clf.predict_proba(rows, prefix=j)
            if j == 0:
                ref = ref[:1]
            np.testing.assert_allclose(pred.proba, ref, rtol=0, atol=float(float32_bound(seq, rows, j).max()))
            want = clf.predict(rows, prefix=j)[:len(ref)]
            clear = _clear(ref)
            np.testing.assert_array_equal(pred.label[clear].astype(str), want[clear].astype(str))


def test_c_runtime_matches_estimator_on_every_prefix(exported):
    clf, X, y, out, _ = exported
    try:
        find_c_compiler()
    except CCompilerError:
        pytest.skip("no C compiler installed")
    seq = clf.fitted_sequence_
    rows = X[:200]
    run = run_c(out, [rows[:, seq.group_columns[g]] for g in seq.order])
    for j, (proba, labels) in enumerate(zip(run.predictions, run.labels)):
        ref = clf.predict_proba(rows, prefix=j)
        np.testing.assert_allclose(proba, ref, rtol=0, atol=float(float32_bound(seq, rows, j).max()))
        clear = _clear(ref)
        np.testing.assert_array_equal(clf.classes_[labels[clear]], clf.predict(rows, prefix=j)[clear])
