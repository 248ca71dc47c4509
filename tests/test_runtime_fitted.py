"""The Python runtime and `edgeseq verify` on exports of real fits (AnytimeClassifier binary and
multiclass on scikit-learn data sets, AnytimeRegressor on diabetes): every prefix against the
estimator's own predictions, and the anytime loop driven by per-group extractors."""

import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits

from edgeseq import AnytimeClassifier, AnytimeRegressor
from edgeseq.cli import main
from edgeseq.runtime.session import AnytimeSession
from test_runtime_support import agrees, assert_matches_reference, exported, group_features

HAVE_CC = any(shutil.which(c) for c in ("gcc", "cc", "clang"))


def _cancer():
    X, y = load_breast_cancer(return_X_y=True)
    groups = [[m, m + 10, m + 20] for m in range(10)]  # mean / se / worst of each measurement
    return AnytimeClassifier(groups=groups, costs=np.linspace(1, 3, 10)).fit(X, y), X


def _digits():
    X, y = load_digits(return_X_y=True)
    X, y = X[:300], y[:300]
    groups = [list(range(r * 16, r * 16 + 16)) for r in range(4)]  # bands of two image rows
    return AnytimeClassifier(groups=groups, costs=[1.0, 2.0, 3.0, 4.0]).fit(X, y), X


def _diabetes():
    X, y = load_diabetes(return_X_y=True)
    groups = [[0, 1], [2], [3], [4, 5, 6, 7], [8, 9]]
    return AnytimeRegressor(groups=groups, costs=[0.5, 1, 1, 4, 2]).fit(X, y), X


FITS = {"cancer": _cancer, "digits": _digits, "diabetes": _diabetes}


@pytest.fixture(scope="module", params=sorted(FITS))
def fitted(request, tmp_path_factory):
    est, X = FITS[request.param]()
    out = exported(est.fitted_sequence_, tmp_path_factory.mktemp(request.param))
    return est, X, out


def test_every_prefix_matches_the_estimator(fitted):
    est, X, out = fitted
    seq = est.fitted_sequence_
    sess = AnytimeSession(out)
    feats = group_features(seq, X)
    for j in range(seq.n_prefixes):
        pred = sess.predict(feats, prefix=j)
        assert_matches_reference(sess, seq, X, j, pred)
        if seq.task == "classification":
            proba = est.predict_proba(X, prefix=j)
            assert np.max(np.abs(pred.proba - proba)) < 1e-4
            top2 = np.sort(proba, axis=1)[:, -2:]
            clear = top2[:, 1] - top2[:, 0] > 1e-3
            assert np.array_equal(pred.label[clear], est.predict(X, prefix=j)[clear])
        else:
            np.testing.assert_allclose(pred, est.predict(X, prefix=j), rtol=1e-5, atol=1e-3)


def test_anytime_loop_with_per_group_extractors(fitted):
    est, X, out = fitted
    seq = est.fitted_sequence_
    with AnytimeSession(out) as sess:
        ex = {seq.group_names[g]: (lambda x, c=seq.group_columns[g]: x[c]) for g in range(seq.n_groups)}
        budget = float(seq.cum_cost[2])
        for i in (0, 7, 42):
            r = sess.run(ex, budget=budget, inputs=X[i], deadline_s=5.0)
            assert r.prefix == 2 and r.stopped_by == "budget"
            want = sess.predict(group_features(seq, X[i:i + 1]), prefix=2)
            if seq.task == "classification":
                assert agrees(r.prediction.proba, want.proba)  # stage graph vs joined graph
                assert r.prediction.label[0] == want.label[0]
            else:
                assert agrees(r.prediction, want)


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler installed")
def test_verify_real_fit_with_c(fitted):
    est, X, out = fitted
    r = CliRunner().invoke(main, ["verify", str(out), "--require-c"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert r.output.count(" ok\n") == est.fitted_sequence_.n_prefixes
