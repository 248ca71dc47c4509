"""AnytimeSession.predict on real exports: every prefix against the float64 FittedSequence, budgets,
output shapes, and clear errors for bad input or a tampered export."""

import numpy as np
import onnxruntime as ort
import pytest

from edgeseq import AnytimeRegressor
from edgeseq.errors import InputError, IntegrityError, RuntimeInputError
from edgeseq.runtime.session import AnytimeSession, ClassifierPrediction
from edgeseq.forms.linear import sample_rows as draw_rows
from sequences import random_sequence
from test_runtime_support import assert_matches_reference, exported, group_features

CASES = {
    "reg1": dict(group_sizes=(2, 3, 1), n_outputs=1, link="identity"),
    "reg_multi": dict(group_sizes=(4, 1, 2, 3), n_outputs=3, link="identity"),
    "sigmoid": dict(group_sizes=(3, 2), link="sigmoid"),
    "softmax": dict(group_sizes=(1, 5, 2), n_outputs=4, link="softmax"),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def model(request, tmp_path_factory):
    rng = np.random.default_rng(sorted(CASES).index(request.param))
    seq = random_sequence(rng, **CASES[request.param])
    out = exported(seq, tmp_path_factory.mktemp(request.param))
    return seq, AnytimeSession(out)


def sample_rows(seq, n=64, seed=1):
    """Ordinary, huge and tiny magnitudes, so the float32 bound is exercised across scales."""
    return draw_rows(seq.n_features_in, n, seed=seed, extreme_scale=1e4)


def test_every_prefix_matches_float64_reference(model):
    seq, sess = model
    X = sample_rows(seq)
    feats = group_features(seq, X)
    assert sess.n_prefixes == seq.n_prefixes
    for j in range(seq.n_prefixes):
        assert_matches_reference(sess, seq, X, j, sess.predict(feats, prefix=j))


def test_budget_selects_longest_prefix_inclusive(model):
    seq, sess = model
    X = sample_rows(seq, 8)
    feats = group_features(seq, X)
    cum = seq.cum_cost
    for j in range(seq.n_prefixes):
        assert sess.prefix_for_budget(cum[j]) == j
        if j:  # just below (beyond the 1e-12 relative slack for float rounding) buys one prefix less
            assert sess.prefix_for_budget(cum[j] * (1 - 1e-9)) == j - 1
        ref = sess.predict(feats, prefix=j)
        got = sess.predict(feats, budget=float(cum[j]))
        if isinstance(ref, ClassifierPrediction):
            assert np.array_equal(got.proba, ref.proba) and got.prefix == j
        else:
            assert np.array_equal(got, ref)
    assert sess.prefix_for_budget(float("inf")) == seq.n_prefixes - 1


def test_groups_beyond_the_prefix_are_not_needed(model):
    seq, sess = model
    X = sample_rows(seq, 5)
    first = seq.group_names[seq.order[0]]
    pred = sess.predict({first: X[:, seq.group_columns[seq.order[0]]]}, prefix=1)
    assert_matches_reference(sess, seq, X, 1, pred)
    # prefix 0 needs nothing; with no features it answers for one row
    p0 = sess.predict({}, prefix=0)
    assert (p0.proba.shape[0] if isinstance(p0, ClassifierPrediction) else p0.shape[0]) == 1


@pytest.fixture(scope="module")
def reg(tmp_path_factory):
    seq = random_sequence(np.random.default_rng(11), (2, 3, 1), names=["a b", 'q"uote\n', "ünï"])
    return seq, AnytimeSession(exported(seq, tmp_path_factory.mktemp("reg")))


def test_one_dimensional_row_and_squeezed_output(reg):
    seq, sess = reg
    X = sample_rows(seq, 3)
    out = sess.predict(group_features(seq, X))
    assert out.shape == (3,) and out.dtype == np.float32
    one = sess.predict({k: v[0] for k, v in group_features(seq, X).items()})
    assert one.shape == (1,) and one[0] == out[0]


def test_multi_output_shape(tmp_path):
    seq = random_sequence(np.random.default_rng(3), (2, 2), n_outputs=3)
    sess = AnytimeSession(exported(seq, tmp_path))
    X = sample_rows(seq, 7)
    assert sess.predict(group_features(seq, X)).shape == (7, 3)
    assert sess.predict({}, prefix=0).shape == (1, 3)


def test_missing_group_is_named(reg):
    seq, sess = reg
    feats = group_features(seq, sample_rows(seq, 2))
    last = seq.group_names[seq.order[-1]]
    del feats[last]
    with pytest.raises(RuntimeInputError, match="missing") as e:
        sess.predict(feats)
    assert repr(last) in str(e.value)
    sess.predict(feats, prefix=seq.n_prefixes - 2)  # fine without the last group


@pytest.mark.parametrize("mutate, match", [
    (lambda f: f.update({"nope": np.zeros((2, 1))}), "unknown group"),
    (lambda f: f.update({"a b": np.zeros((2, 5))}), "shape"),
    (lambda f: f.update({"a b": np.zeros((2, 2, 1))}), "shape"),
    (lambda f: f.update({"a b": np.zeros((0, 2))}), "no rows"),
    (lambda f: f.update({"a b": np.zeros((3, 2))}), "different numbers of rows"),
    (lambda f: f.update({"a b": np.full((2, 2), np.nan)}), "NaN"),
    (lambda f: f.update({"a b": np.array([[1.0, np.inf], [0, 0]])}), "NaN/Inf"),
    (lambda f: f.update({"a b": np.array([[1e39, 0], [0, 0]])}), "overflow"),
    (lambda f: f.update({"a b": np.array([["x", "y"], ["z", "w"]])}), "numeric"),
])
def test_bad_features_fail_clearly(reg, mutate, match):
    seq, sess = reg
    feats = group_features(seq, sample_rows(seq, 2))
    mutate(feats)
    with pytest.raises(RuntimeInputError, match=match):
        sess.predict(feats)


def test_hostile_group_name_is_quoted_in_messages(reg):
    seq, sess = reg
    feats = group_features(seq, sample_rows(seq, 2))
    feats['q"uote\n'] = np.zeros((2, 7))
    with pytest.raises(RuntimeInputError) as e:
        sess.predict(feats)
    assert "\n" not in str(e.value) and "'q\"uote\\n'" in str(e.value)


@pytest.mark.parametrize("kwargs, match", [
    (dict(budget=1.0, prefix=1), "either budget or prefix"),
    (dict(prefix=99), "prefix must be"),
    (dict(prefix=True), "prefix must be"),
    (dict(prefix=1.0), "prefix must be"),
    (dict(budget=-1), "budget"),
    (dict(budget=float("nan")), "budget"),
    (dict(budget="cheap"), "budget"),
])
def test_bad_budget_or_prefix(reg, kwargs, match):
    """The runtime resolves budgets with the estimators' resolver: the same InputError, same words."""
    seq, sess = reg
    with pytest.raises(InputError, match=match):
        sess.predict(group_features(seq, sample_rows(seq, 2)), **kwargs)


def test_not_a_dict(reg):
    with pytest.raises(RuntimeInputError, match="dict"):
        reg[1].predict([np.zeros(2)])


def test_sessions_are_single_threaded(reg):
    so = reg[1]._runners[0].session.get_session_options()
    assert so.intra_op_num_threads == 1 and so.inter_op_num_threads == 1
    assert so.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_tampered_export_is_refused(tmp_path):
    seq = random_sequence(np.random.default_rng(2), (2, 1))
    out = exported(seq, tmp_path)
    f = out / "prefix_001.onnx"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x01
    f.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="prefix_001.onnx"):
        AnytimeSession(out)


def test_real_regressor_fit_matches_estimator(tmp_path):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 7)) * [1, 10, 0.1, 1, 5, 1, 2]
    y = X @ rng.normal(size=7) + 0.1 * rng.normal(size=300)
    groups = [[0, 1], [2], [3, 4, 5], [6]]
    est = AnytimeRegressor(groups=groups, costs=[1.0, 2.0, 0.5, 3.0]).fit(X, y)
    seq = est.fitted_sequence_
    sess = AnytimeSession(exported(seq, tmp_path))
    feats = group_features(seq, X)
    for j in range(seq.n_prefixes):
        got = sess.predict(feats, prefix=j)
        assert_matches_reference(sess, seq, X, j, got)
        np.testing.assert_allclose(got, est.predict(X, prefix=j),
                                   atol=float(np.max(np.abs(y))) * 1e-5)


def test_nan_and_inf_are_caught_at_every_position_even_with_zero_weights(tmp_path):
    """predict checks finiteness on the output (one check instead of one per group): prove that every
    NaN/Inf input reaches it, including through all-zero weight rows (Inf * 0 = NaN)."""
    seq = random_sequence(np.random.default_rng(12), (3, 2), n_outputs=2)
    for j in range(1, seq.n_prefixes):
        seq.coefs[j][0] = 0.0  # a whole zero row in every prefix
    seq.coefs[2][:] = 0.0      # and a prefix whose weights are all zero
    sess = AnytimeSession(exported(seq, tmp_path))
    X = np.ones((3, seq.n_features_in), np.float32)
    for j in range(1, seq.n_prefixes):
        for g in seq.order[:j]:
            name = seq.group_names[g]
            for col in range(len(seq.group_columns[g])):
                for bad in (np.nan, np.inf, -np.inf):
                    feats = {k: np.ascontiguousarray(v) for k, v in group_features(seq, X).items()}
                    feats[name][1, col] = bad
                    with pytest.raises(RuntimeInputError, match="NaN/Inf") as e:
                        sess.predict(feats, prefix=j)
                    assert repr(name) in str(e.value)


def test_output_overflow_is_an_error(tmp_path):
    seq = random_sequence(np.random.default_rng(13), (2,))
    seq.coefs[1][:] = 1e30
    sess = AnytimeSession(exported(seq, tmp_path))
    with pytest.raises(RuntimeInputError, match="overflows float32"):
        sess.predict({seq.group_names[0]: np.full((1, 2), 1e10, np.float32)})


def test_fast_and_general_input_paths_agree(reg):
    """float32 C-contiguous arrays skip conversion; every other layout/dtype must give the same numbers."""
    seq, sess = reg
    X = sample_rows(seq, 6)
    fast = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in group_features(seq, X).items()}
    want = sess.predict(fast)
    for convert in (lambda v: v.astype(np.float64), lambda v: np.asfortranarray(v),
                    lambda v: v.astype(">f4"), lambda v: v.tolist(),
                    lambda v: np.repeat(v, 2, axis=0)[::2]):
        got = sess.predict({k: convert(v) for k, v in fast.items()})
        assert np.array_equal(got, want)


def test_prefix0_takes_the_number_of_rows_from_any_group(reg):
    seq, sess = reg
    feats = group_features(seq, sample_rows(seq, 4))
    feats[seq.group_names[0]][0, 0] = np.nan  # not needed at prefix 0, so not checked
    assert sess.predict(feats, prefix=0).shape == (4,)
    assert np.all(sess.predict(feats, prefix=0) == sess.predict({}, prefix=0)[0])


def _bare(sess, j, feats):
    """The graph predict ran (the joined one: tests/test_runtime_joined.py) through the public
    onnxruntime API, for comparison with the bound path."""
    r = sess._fused.get(j) or sess._runners[j]
    arrays = [np.ascontiguousarray(feats[g.name], dtype=np.float32) for g in sess.groups[:j]]
    feeds = {r.inputs[0]: np.concatenate(arrays, axis=1)} if r.joined else dict(zip(r.inputs, arrays))
    return r.session.run(r.outputs, feeds)


@pytest.mark.parametrize("kind", ["reg_multi", "softmax"])
def test_io_bound_path_equals_plain_run_for_every_batch_size(kind, tmp_path):
    seq = random_sequence(np.random.default_rng(30), **CASES[kind])
    sess = AnytimeSession(exported(seq, tmp_path))
    J = seq.n_prefixes - 1
    kept = []
    for n in (1, 2, 1, 3, 5, 7, 64, 65, 1, 300):  # more sizes than the binding cache holds, and above it
        X = sample_rows(seq, n, seed=n)
        feats = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in group_features(seq, X).items()}
        got = sess.predict(feats, prefix=J)
        want = _bare(sess, J, feats)
        if seq.task == "regression":
            assert np.array_equal(got, want[0])
        else:
            assert np.array_equal(got.proba, want[1]) and np.array_equal(got.label_index, want[2])
        kept.append((got, want))
    for got, want in kept:  # results are the caller's copies, not views of reused buffers
        assert np.array_equal(got if seq.task == "regression" else got.proba,
                              want[0] if seq.task == "regression" else want[1])


def test_concurrent_predicts_get_their_own_results(reg):
    import threading
    seq, sess = reg
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(200):
            X = rng.normal(size=(1 + seed % 3, seq.n_features_in))
            feats = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in group_features(seq, X).items()}
            if not np.array_equal(sess.predict(feats), _bare(sess, seq.n_prefixes - 1, feats)[0][:, 0]):
                errors.append(seed)
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
