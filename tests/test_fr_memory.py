"""CS-G-FR's memory: the rows of K and the columns of its factor's L⁻¹C_S,: that nothing reads once a
group is selected are given back to the operating system (`edgeseq.train.linear.releasable`).

* `ReleasableRows` returns pages (resident memory drops) and never touches neighbouring rows.
* An FR selection that releases gives bit-identical picks, losses and weights to one that does not,
  and the released rows really read as zeros afterwards (so a reader of dead rows would be caught).
* A factor cannot be rebuilt from a released K (one clear error instead of wrong scores).
* Whole fits in fresh processes: releasing lowers the peak resident memory by about one k × k array.
"""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from edgeseq.train.linear.basis import build_working_problem
from edgeseq.train.glm.select import GLMState, select_glm, working_design
from edgeseq.train.linear.releasable import ReleasableRows
from edgeseq.train.linear.stats import sufficient_statistics

LINUX = sys.platform.startswith("linux")


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS")).split()[1]) * 1024


@pytest.mark.skipif(not LINUX, reason="resident memory is read from /proc")
def test_released_rows_leave_resident_memory_and_spare_their_neighbours():
    buf = ReleasableRows((64, 131072))  # 64 MiB, one MiB a row
    buf.array[:] = 2.0
    before = _rss_bytes()
    buf.release(slice(8, 40))
    after = _rss_bytes()
    assert before - after >= 30 * 2**20, (before, after)
    assert buf.array[7].min() == 2.0 and buf.array[40].min() == 2.0 and buf.array[8:40].max() == 0.0
    buf.array[8:40, 0] = 1.0  # a write makes pages resident again; rerelease gives them back
    buf.rerelease()
    assert buf.array[8:40].max() == 0.0 and buf.array[40, 0] == 2.0


def _problem(seed=0, n=300, n_groups=15, dim=40):
    rng = np.random.default_rng(seed)
    D = n_groups * dim
    X = rng.normal(size=(n, D)) + rng.normal(size=(n, 1))  # one shared factor: correlated groups
    y = rng.integers(0, 3, size=n)
    X[:, :4] += y[:, None]
    X[:, 200:203] -= y[:, None]
    Y = np.eye(3)[y]
    cols = np.arange(D)
    prob = build_working_problem(sufficient_statistics(X, Y, columns=cols), [dim] * n_groups, True)
    return X, Y, cols, prob


def test_releasing_gives_the_same_fr_selection_bit_for_bit():
    X, Y, cols, prob = _problem()
    costs = np.linspace(1.0, 2.0, prob.n_groups)
    kept = select_glm(GLMState(prob, working_design(X, cols, prob), Y, "softmax", 1e-3), costs, method="fr")
    X2, Y2, cols2, prob2 = _problem()
    state = GLMState(prob2, working_design(X2, cols2, prob2), Y2, "softmax", 1e-3, release_selected=True)
    freed = select_glm(state, costs, method="fr")
    assert freed.order == kept.order
    np.testing.assert_array_equal(freed.log_loss, kept.log_loss)
    for j in range(1, len(kept.order) + 1):
        np.testing.assert_array_equal(np.vstack(freed.prefix_weights[j]), np.vstack(kept.prefix_weights[j]))
    first = prob2.slices[freed.order[0]]
    assert prob2.k_storage.released[first].all()
    # the whole pages inside those rows were given back: they read as zeros now (only the two pages at
    # the edges, shared with live rows, keep their numbers) ...
    assert np.mean(prob2.K[first] == 0.0) > 0.9
    assert np.mean(prob.K[first] == 0.0) < 0.1  # ... where the problem that kept them still holds them


def test_a_factor_is_not_rebuilt_from_released_rows():
    X, Y, cols, prob = _problem(n_groups=4)
    state = GLMState(prob, working_design(X, cols, prob), Y, "softmax", 1e-3, release_selected=True)
    select_glm(state, np.ones(4), method="fr", )
    state._bound = None  # e.g. a switched curvature: the factor would have to be rebuilt from K
    with pytest.raises(ValueError, match="released"):
        state.scores("fr", [0], np.ones(4))


PEAK_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import edgeseq.train.linear.classifier as cm
    from edgeseq import AnytimeClassifier
    if sys.argv[1] == "keep":
        init = cm.GLMState.__init__
        cm.GLMState.__init__ = lambda self, *a, **k: init(self, *a, **{**k, "release_selected": False})
    rng = np.random.default_rng(0)
    n, G, d = 300, 60, 40
    X = rng.normal(size=(n, G * d)); y = rng.integers(0, 3, n); X[:, :5] += y[:, None]
    groups = [list(range(g * d, g * d + d)) for g in range(G)]
    def hwm():
        return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) * 1024
    base = hwm()
    clf = AnytimeClassifier(groups=groups, costs=np.ones(G), method="fr", l2=1e-4, whiten=True).fit(X, y)
    print(json.dumps({"growth": hwm() - base, "sequence": clf.sequence_.tolist()}))
""")


@pytest.mark.skipif(not LINUX, reason="peak resident memory is read from /proc")
def test_a_whole_fr_fit_peaks_about_one_k_by_k_array_lower():
    runs = {}
    for mode in ("release", "keep"):
        out = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, mode], check=True, capture_output=True, text=True,
                             env={"OPENBLAS_NUM_THREADS": "1", "PATH": "", "PYTHONPATH": ":".join(sys.path)})
        runs[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    gram = (60 * 40) ** 2 * 8
    assert runs["release"]["sequence"] == runs["keep"]["sequence"]
    assert runs["keep"]["growth"] - runs["release"]["growth"] >= 0.8 * gram, runs


def _centred_reference(X, Y):
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    return Xc.T @ Xc, Xc.T @ Yc, Yc.T @ Yc


@pytest.mark.parametrize("drift", [False, True])
def test_chunks_merged_in_place_equal_the_centred_two_pass_statistics(drift):
    rng = np.random.default_rng(11)
    X = rng.normal(size=(900, 30)) * rng.uniform(0.5, 3.0, size=30) + rng.uniform(-4, 4, size=30)
    Y = rng.normal(size=(900, 2)) + X[:, :2]
    if drift:  # rows 400..499 sit far from the reference: that chunk takes the exact path, the others in place
        X[400:500, 3] += 500.0
    s = sufficient_statistics(X, Y, chunk_rows=100)
    xx, xy, yy = _centred_reference(X, Y)
    np.testing.assert_allclose(s.xx, xx, rtol=1e-11, atol=1e-10 * np.abs(xx).max())
    np.testing.assert_array_equal(s.xx, s.xx.T)  # the mirrored triangle
    np.testing.assert_allclose(s.xy, xy, rtol=1e-11, atol=1e-10 * np.abs(xy).max())
    np.testing.assert_allclose(s.yy, yy, rtol=1e-11)
    np.testing.assert_allclose(s.x_mean, X.mean(axis=0), rtol=1e-13, atol=1e-13)


def test_the_statistics_pass_holds_one_d_by_d_array():
    import tracemalloc

    from edgeseq.train.linear.stats import shifted_statistics

    rng = np.random.default_rng(12)
    X, Y = rng.normal(size=(1200, 4000)), rng.normal(size=(1200, 1))
    gram = 4000 * 4000 * 8  # wide enough that the rank-one updates' 16 MiB bands are small beside it
    peaks = {}
    for fast in (True, False):
        chunks = [(X[i:i + 200], Y[i:i + 200]) for i in range(0, 1200, 200)]
        tracemalloc.start()
        try:
            shifted_statistics(chunks, fast=fast)
            peaks[fast] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peaks[False] >= 2 * gram  # control: a chunk's own Gram beside the sums
    assert peaks[True] < 1.5 * gram, peaks


def test_building_k_gives_back_the_sums_it_has_read():
    rng = np.random.default_rng(13)
    X = rng.normal(size=(400, 600)) + rng.normal(size=(400, 1))
    Y = np.eye(3)[rng.integers(0, 3, 400)]
    kept = sufficient_statistics(X, Y)
    consumed = sufficient_statistics(X, Y)
    assert consumed.xx_storage is not None  # wide enough: the pass summed into releasable memory
    a = build_working_problem(kept, [40] * 15, True, keep_cov=False)
    b = build_working_problem(consumed, [40] * 15, True, keep_cov=False, consume=True)
    np.testing.assert_array_equal(a.K, b.K)  # the same K, bit for bit
    assert consumed.xx_storage.released.all() and not kept.xx_storage.released.any()
    assert np.mean(consumed.xx == 0.0) > 0.9 and np.mean(kept.xx == 0.0) < 0.01  # pages really given back
