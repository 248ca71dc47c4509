"""AnytimeNetClassifier / AnytimeNetRegressor: the scikit-learn contract, costs, the budget rule with
non-committing stages, windows, the default group order, and refused inputs."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator

from edgeseq import AnytimeNetClassifier, AnytimeNetRegressor, AnytimeRegressor
from edgeseq.errors import EdgeseqWarning, InputError, ModelFormatError
from edgeseq.forms.layer_blocks import LayerBlockModel

SMALL = dict(hidden=8, max_epochs=15, batch_size=32)


def test_scikit_learn_check_estimator_classifier():
    check_estimator(AnytimeNetClassifier(order="given", **SMALL), expected_failed_checks={
        # an anytime model reads only the groups its stage has paid for: NaN in a group that is never
        # extracted is legitimate input, not an error
        "check_estimators_nan_inf": "stages read only the groups they paid for"})


def test_scikit_learn_check_estimator_regressor():
    check_estimator(AnytimeNetRegressor(order="given", hidden=8, max_epochs=40), expected_failed_checks={
        "check_estimators_nan_inf": "stages read only the groups they paid for"})


@pytest.fixture(scope="module")
def xor():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = np.where(X[:, 0] * X[:, 2] > 0, "on", "off")
    return X, y


def test_stage_cost_is_groups_plus_macs(xor):
    X, y = xor
    clf = AnytimeNetClassifier([[0, 1], [2, 3], [4]], [1.0, 2.0, 0.5], order="given", cost_per_mac=1e-3,
                               hidden=16, random_state=0).fit(X, y)
    model = clf.stage_model_
    assert isinstance(model, LayerBlockModel)
    macs = model.stage_macs
    # stage 1: 2 inputs x H + head H; stage 2: state H x H + 2 x H + head; stage 3: H x H + 1 x H + head
    H = 16
    assert macs.tolist() == [0, 2 * H + H, H * H + 2 * H + H, H * H + H + H]
    np.testing.assert_allclose(np.diff(clf.cum_cost_), np.array([1.0, 2.0, 0.5]) + 1e-3 * macs[1:])
    assert clf.score(X, y) > 0.9  # the XOR needs groups 0 and 1 together
    staged = [np.mean(p == y) for p in clf.staged_predict(X)]
    assert staged[1] < 0.75 < staged[2]  # one factor alone says nothing; the product does


def test_budget_reads_only_paid_groups_and_warns_below_the_first(xor):
    X, y = xor
    clf = AnytimeNetClassifier([[0, 1], [2, 3], [4]], [1.0, 2.0, 0.5], order="given", random_state=0,
                               **SMALL).fit(X, y)
    Xn = X.copy()
    Xn[:, 2:] = np.nan
    np.testing.assert_allclose(clf.predict_proba(Xn, budget=1.5), clf.predict_proba(X, stage=1))
    with pytest.raises(InputError, match="NaN or Inf"):
        clf.predict(Xn, budget=10.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p0 = clf.predict_proba(X[:3], budget=0.5)
    assert any(issubclass(w.category, EdgeseqWarning) for w in caught)
    np.testing.assert_allclose(p0, clf.predict_proba(X[:3], stage=0))


def test_non_committing_stages_are_skipped_by_the_budget_rule(xor):
    X, y = xor
    clf = AnytimeNetClassifier([[0, 1], [2, 3], [4]], [1.0, 2.0, 0.5], order="given", random_state=0,
                               **SMALL).fit(X, y)
    m = clf.stage_model_
    quiet = dataclasses.replace(m, stages=m.stages[:2] + (dataclasses.replace(m.stages[2], commit=False),)
                                + m.stages[3:])
    cum = quiet.cum_cost
    assert quiet.prefix_for_budget(cum[2]) == 1 and quiet.prefix_for_budget(np.nextafter(cum[3], 0)) == 1
    assert quiet.prefix_for_budget(cum[3]) == 3
    np.testing.assert_allclose(quiet.predict(X, budget=cum[2]), m.predict(X, stage=1))
    with pytest.raises(ModelFormatError):  # the prior always commits
        dataclasses.replace(m, stages=(dataclasses.replace(m.stages[0], commit=False),) + m.stages[1:])


def test_eann_commits_only_improving_exits():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 4))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + X[:, 2] * X[:, 3]
    reg = AnytimeNetRegressor([[0], [1], [2], [3]], [1.0] * 4, order="given", eann_base=2, random_state=0,
                              **SMALL).fit(X, y)
    m = reg.stage_model_
    assert len(m.stages) == 1 + 1 + 2 + 4
    assert sorted(g for s in m.stages for g in s.new_groups) == [0, 1, 2, 3]
    # committing exits improve on the validation rows the estimator held out, so on all rows the
    # committed curve is near-monotone; the skipped stages exist and are followed by later committing ones
    commits = [s.commit for s in m.stages]
    assert commits[0] and sum(commits) >= 3
    for k in range(len(m.stages)):
        j = m.prefix_for_budget(float(m.cum_cost[k]))
        assert m.stages[j].commit and j <= k and all(not m.stages[i].commit for i in range(j + 1, k + 1))


def _validation_rows(est, n: int) -> np.ndarray:
    """The rows `fit` holds out, re-derived from its seed (the test checks the derivation below)."""
    from sklearn.utils import check_random_state
    rng = np.random.default_rng(check_random_state(est.random_state).randint(1 << 31))
    return rng.permutation(n)[:int(round(est.validation_fraction * n))]


def test_single_network_commits_only_exits_that_improve_on_validation():
    """commit="improving" trains the same network as commit="every" (the default for one network) and closes exactly the
    exits whose validation log-loss does not beat the prior and every earlier committing exit,
    recomputed here by brute force from the "every" network's staged probabilities."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(240, 8))
    y = (X[:, 0] + 0.3 * rng.normal(size=240) > 0).astype(int)   # group 0 says it all; the rest is noise
    kw = dict(groups=[[0], [1, 2], [3, 4], [5, 6], [7]], costs=[1.0] * 5, order="given", hidden=16,
              max_epochs=60, batch_size=32, validation_fraction=0.3, random_state=0)
    every = AnytimeNetClassifier(commit="every", **kw).fit(X, y)
    improving = AnytimeNetClassifier(commit="improving", **kw).fit(X, y)
    default = AnytimeNetClassifier(**kw).fit(X, y)
    assert [s.commit for s in default.stage_model_.stages] == [s.commit for s in every.stage_model_.stages]
    assert all(s.commit for s in every.stage_model_.stages)
    for a, b in zip(every.staged_predict_proba(X), improving.staged_predict_proba(X)):
        np.testing.assert_array_equal(a, b)      # the same network; only the commit flags differ
    va = _validation_rows(improving, len(y))
    losses = [float(-np.mean(np.log(np.clip(p[np.arange(va.size), y[va]], 1e-300, None))))
              for p in every.staged_predict_proba(X[va])]
    best, want = losses[0], [True]
    for lo in losses[1:]:
        want.append(lo < best - 1e-9 * abs(best))
        best = lo if want[-1] else best
    got = [s.commit for s in improving.stage_model_.stages]
    assert got == want
    assert not all(got)    # negative control: the noise groups do close some exit, so the rule is not vacuous
    committed = np.array(losses)[got]
    assert np.all(np.diff(committed) < 0)
    with pytest.raises(InputError, match="commit must be"):
        AnytimeNetClassifier(commit="sometimes", **kw).fit(X, y)


def test_windowed_group_gets_a_conv_branch_and_shapes_are_checked():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 24 + 2))
    y = X[:, :8].max(axis=1) + X[:, 24]
    groups = [list(range(24)), [24, 25]]
    reg = AnytimeNetRegressor(groups, [3.0, 1.0], group_shapes=[(3, 8), None], order="given", random_state=0,
                              **SMALL).fit(X, y)
    br = reg.stage_model_.stages[1].injections[0].conv
    assert (br.channels, br.length, br.kernel, br.pool) == (3, 8, 5, "max")
    for bad in ([(4, 8), None], [(3, 8)], [(3, 8), (1, 1)], [(0, 24), None], [("3", 8), None]):
        with pytest.raises(InputError, match="group_shapes"):
            AnytimeNetRegressor(groups, [3.0, 1.0], group_shapes=bad, **SMALL).fit(X, y)
    with pytest.raises(InputError, match="leave no output"):
        AnytimeNetRegressor(groups, [3.0, 1.0], group_shapes=[(3, 8), None], conv={"kernel": 9}, **SMALL).fit(X, y)


def test_default_order_is_the_linear_cs_g_omp_order():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    y = (X[:, 3] + 0.3 * X[:, 1] > 0).astype(int)
    groups, costs = [[0], [1], [2], [3]], [1.0, 1.0, 1.0, 1.0]
    lines = []
    clf = AnytimeNetClassifier(groups, costs, random_state=0, **SMALL).fit(X, y, progress=lines.append)
    lin = AnytimeRegressor(groups, costs).fit(X, np.eye(2)[y])  # CS-G-OMP on one-hot class indicators
    assert clf.sequence_.tolist() == lin.sequence_.tolist() and clf.sequence_[0] == 3
    assert [s.new_groups for s in clf.stage_model_.stages[1:]] == [(g,) for g in lin.sequence_.tolist()]
    assert lines[0].startswith("group order (linear CS-G-OMP): g3") and lines[-1].startswith("done:")
    given = AnytimeNetClassifier(groups, costs, order="given", random_state=0, **SMALL).fit(X, y)
    assert given.sequence_.tolist() == [0, 1, 2, 3]


def test_blocks_declare_stages_and_widths():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 3))
    y = X.sum(axis=1)
    reg = AnytimeNetRegressor([[0], [1], [2]], [1.0, 1.0, 1.0], group_names=["a", "b", "c"],
                              blocks=[{"groups": ["b"], "width": 4}, {"groups": [], "width": 6},
                                      {"groups": [0, "c"], "width": 5}], random_state=0, **SMALL).fit(X, y)
    m = reg.stage_model_
    assert [(s.new_groups, s.width) for s in m.stages[1:]] == [((1,), 4), ((), 6), ((0, 2), 5)]
    for bad in ([{"groups": ["b"]}, {"groups": ["b"]}], [{"groups": []}], "abc", [{"groups": ["z"]}],
                [{"groups": [0], "width": 0}], [{"groups": [0], "depth": 2}]):
        with pytest.raises(InputError):
            AnytimeNetRegressor([[0], [1], [2]], [1.0] * 3, group_names=["a", "b", "c"], blocks=bad, **SMALL).fit(X, y)


@pytest.mark.parametrize("param,value", [("scheme", "cosine"), ("hidden", 0), ("max_epochs", 1.5),
                                         ("learning_rate", 0.0), ("validation_fraction", 0.95), ("gamma", 2.0),
                                         ("eann_base", 1.0), ("order", "random"), ("cost_per_mac", -1.0)])
def test_bad_parameters_are_refused_with_one_line(param, value):
    X = np.random.default_rng(5).normal(size=(30, 2))
    with pytest.raises(InputError, match=param):
        AnytimeNetRegressor(**{param: value}).fit(X, X[:, 0])


def test_seeded_fits_repeat_and_seeds_matter():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(100, 3))
    y = (X[:, 0] > 0).astype(int)
    a = AnytimeNetClassifier(random_state=3, **SMALL).fit(X, y).predict_proba(X)
    b = AnytimeNetClassifier(random_state=3, **SMALL).fit(X, y).predict_proba(X)
    c = AnytimeNetClassifier(random_state=4, **SMALL).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_opt_networks_train_each_depth_for_its_last_exit():
    from edgeseq.train.neural.estimators import opt_networks
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] * X[:, 2] + X[:, 1]
    est = AnytimeNetRegressor([[0, 1], [2, 3]], [1.0, 2.0], order="given", hidden=16, random_state=0).fit(X, y)
    opts = opt_networks(est, X, y)
    assert [len(o.stage_model_.stages) - 1 for o in opts] == [1, 2]
    assert [o.loss_weights_.tolist() for o in opts] == [[1.0], [0.0, 1.0]]
    # the deep OPT network learns the product through its only trained exit (early stopping watches
    # that exit, not the untrained one before it)
    assert opts[1].score(X, y) > 0.8 > opts[0].score(X, y)
    with pytest.raises(InputError, match="eann_base"):
        opt_networks(AnytimeNetRegressor([[0, 1], [2, 3]], [1.0, 2.0], eann_base=2, **SMALL).fit(X, y), X, y)
