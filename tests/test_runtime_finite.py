"""The cheap checks of predict's fast path against plain numpy: the finiteness tests of outputs (a
Python sum for a few values; above, `isfinite` into a buffer compared bytewise), and the cached
per-shape input checks, which must reject exactly what the general path rejects, with its messages."""

import numpy as np
import pytest

from edgeseq.errors import RuntimeInputError
from edgeseq.runtime.session import AnytimeSession
from edgeseq.runtime.ort import _SUM_MAX, BIND_MAX_ROWS, _finite_test, all_finite
from sequences import random_sequence
from test_runtime_support import exported

F32 = np.finfo(np.float32)
FINITE_EXTREMES = (F32.max, -F32.max, F32.tiny, float(F32.smallest_subnormal), -0.0)
SIZES = sorted({1, 2, 3, _SUM_MAX - 1, _SUM_MAX, _SUM_MAX + 1, 17, 63, 64, 65, 130})


@pytest.mark.parametrize("size", SIZES)
def test_all_finite_finds_every_nan_and_inf_at_every_position(size):
    rng = np.random.default_rng(size)
    y = (rng.normal(size=size) * 1e30).astype(np.float32)  # large values: sums would overflow float32
    y[: len(FINITE_EXTREMES)] = FINITE_EXTREMES[:size]
    assert all_finite(y) and all_finite(y.reshape(-1, 1))
    for pos in range(size):
        for bad in (np.nan, np.inf, -np.inf):
            z = y.copy()
            z[pos] = bad
            assert not all_finite(z) and not all_finite(z.reshape(-1, 1)), (pos, bad)
            assert np.isfinite(z).all() == all_finite(z)  # the reference


@pytest.mark.parametrize("size", SIZES)
def test_bound_buffer_test_reads_the_current_contents(size):
    buf = np.zeros((size, 1), np.float32)
    finite = _finite_test(buf)
    assert finite()
    buf[size // 2, 0] = np.inf
    assert not finite()
    buf[size // 2, 0] = F32.max
    assert finite()
    buf[-1, 0] = np.nan
    assert not finite()


@pytest.fixture(scope="module")
def three_groups(tmp_path_factory):
    seq = random_sequence(np.random.default_rng(21), (3, 5, 2), n_outputs=2)
    return seq, AnytimeSession(exported(seq, tmp_path_factory.mktemp("fin")))


def _float32_features(seq, n, seed=0):
    X = np.random.default_rng(seed).normal(size=(n, seq.n_features_in)).astype(np.float32)
    return {seq.group_names[g]: np.ascontiguousarray(X[:, seq.group_columns[g]]) for g in range(seq.n_groups)}


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("n", [_SUM_MAX + 1, BIND_MAX_ROWS, BIND_MAX_ROWS + 1, 200])
def test_nan_in_a_float32_batch_names_its_group(three_groups, n):
    """Batches above the Python-sum size, on the bound path (<= BIND_MAX_ROWS) and above it; no
    floating-point warning or error escapes, even when numpy is told to raise on them."""
    seq, sess = three_groups
    J = seq.n_prefixes - 1
    for g in seq.order:
        name = seq.group_names[g]
        for row, bad in ((0, np.nan), (n // 2, np.inf), (n - 1, -np.inf)):
            feats = _float32_features(seq, n)
            feats[name][row, -1] = bad
            with np.errstate(all="raise"), pytest.raises(RuntimeInputError, match="NaN/Inf") as e:
                sess.predict(feats, prefix=J)
            assert repr(name) in str(e.value) and f"row {row}," in str(e.value)
    clean = _float32_features(seq, n)
    assert np.isfinite(sess.predict(clean, prefix=J)).all()  # nothing sticks in the reused buffers


def test_output_overflow_in_a_bound_batch_names_the_row(tmp_path):
    seq = random_sequence(np.random.default_rng(22), (2,))
    seq.coefs[1][:] = 1e30
    sess = AnytimeSession(exported(seq, tmp_path))
    x = np.zeros((BIND_MAX_ROWS, 2), np.float32)
    x[37] = 1e10
    with pytest.raises(RuntimeInputError, match="overflows float32 at row 37"):
        sess.predict({seq.group_names[0]: x})


@pytest.mark.parametrize("n", [1, 7, BIND_MAX_ROWS])
@pytest.mark.parametrize("mutate, match", [
    (lambda f, names, n: f.update({names[1]: np.zeros((n + 1, f[names[1]].shape[1]), np.float32)}),
     "different numbers of rows"),
    (lambda f, names, n: f.update({names[2]: np.zeros((n, f[names[2]].shape[1] + 1), np.float32)}), "shape"),
    (lambda f, names, n: f.update({names[1]: f[names[1]][:, :, None]}), "shape"),
    (lambda f, names, n: f.update({names[0]: np.zeros((0, f[names[0]].shape[1]), np.float32)}), "no rows"),
    (lambda f, names, n: f.update({names[0]: f[names[0]][0]}) if n > 1 else f.update({"x": f[names[0]]}),
     "different numbers of rows|unknown group"),
    (lambda f, names, n: f.update({"nope": f[names[0]]}), "unknown group"),
    (lambda f, names, n: f.pop(names[2]), "missing"),
])
def test_float32_inputs_fail_as_clearly_as_others(three_groups, n, mutate, match):
    """Every bad float32 batch (the fast path's input) is refused with the general path's message,
    before and after its shapes were cached by a good call of the same size."""
    seq, sess = three_groups
    names = [seq.group_names[g] for g in seq.order]
    J = seq.n_prefixes - 1
    for _ in range(2):
        sess.predict(_float32_features(seq, n), prefix=J)  # caches the shapes of this batch size
        feats = _float32_features(seq, n)
        mutate(feats, names, n)
        with pytest.raises(RuntimeInputError, match=match):
            sess.predict(feats, prefix=J)
        with pytest.raises(RuntimeInputError, match=match):  # the general path agrees
            sess.predict({k: v.astype(np.float64) for k, v in feats.items()}, prefix=J)
