"""The GLM path at scale: the chunked working design, the grown preconditioner and the memory they bound.

* `WorkingDesign` passes equal dense products with the materialised working design (numpy here),
  with large column offsets, groups whose columns are not one run, float32 rows and many chunks.
* `BoundFactor` grown block by block equals scipy's Cholesky factor of the whole matrix.
* The classifier's chunked path selects the same sequence as the materialised path, with refits
  within the tolerance, and counts its passes over the rows.
* Memory: a whole selection allocates far less than one n × k working design (tracemalloc sees
  numpy's allocations; the control shows it does see one materialised design).
"""

import tracemalloc

import numpy as np
import pytest
from scipy.linalg import cholesky

from edgeseq import AnytimeClassifier
from edgeseq.train.linear.basis import build_working_problem
from edgeseq.train.glm.design import WorkingDesign
from edgeseq.train.glm.fit import GRAD_TOL, BoundFactor, objective_gradient
from edgeseq.train.glm.select import GLMState, select_glm, working_design
from edgeseq.train.linear.stats import sufficient_statistics


def _problem(seed=0, n=300, sizes=(3, 4, 2, 5), offset=0.0, dtype=np.float64, shuffle=False):
    rng = np.random.default_rng(seed)
    D = sum(sizes)
    X = rng.normal(size=(n, D)) @ rng.normal(size=(D, D)) + offset * rng.uniform(0.5, 1.0, size=D)
    y = rng.integers(0, 3, size=n)
    X[:, :3] += y[:, None]
    cols = np.arange(D)
    if shuffle:  # groups whose raw columns are scattered across X
        cols = rng.permutation(D)
    Y = np.eye(3)[y]
    X = X.astype(dtype)
    prob = build_working_problem(sufficient_statistics(X, Y, columns=cols), list(sizes), True)
    return X, Y, cols, prob


@pytest.mark.parametrize("offset,dtype,shuffle", [(0.0, np.float64, False), (1e5, np.float64, True),
                                                  (0.0, np.float32, True), (0.0, np.float32, False)])
def test_chunked_passes_equal_dense_products(offset, dtype, shuffle):
    X, Y, cols, prob = _problem(offset=offset, dtype=dtype, shuffle=shuffle)
    Z = working_design(X, cols, prob)  # the reference: the materialised design
    design = WorkingDesign(X, cols, prob, chunk_rows=37)
    rng = np.random.default_rng(1)
    R = rng.normal(size=(X.shape[0], 3))
    scale = np.abs(Z).max() * np.abs(R).sum(axis=0).max()
    np.testing.assert_allclose(design.gradient(R), Z.T @ R, rtol=0, atol=1e-12 * scale)
    order = [2, 0, 3]
    Zs = np.hstack([Z[:, prob.slices[g]] for g in order])
    np.testing.assert_allclose(design.columns(order), Zs, rtol=0, atol=1e-12 * np.abs(Z).max())
    W, b = rng.normal(size=(Zs.shape[1], 3)), rng.normal(size=3)
    f, G = design.fused_pass(order, W, b, lambda fc, rows: fc - Y[rows])
    np.testing.assert_allclose(f, Zs @ W + b, rtol=0, atol=1e-10 * np.abs(Zs @ W).max())
    np.testing.assert_allclose(G, Zs.T @ (Zs @ W + b - Y), rtol=1e-10, atol=1e-10 * np.abs(G).max())
    assert design.passes == 3 and -(-X.shape[0] // 37) > 1  # three passes, each over many chunks


def test_large_offsets_need_the_centring():
    """Negative control: the centred chunk is what keeps offsets harmless; the uncentred algebra
    X(TW) − μ(TW), the shortcut the design does not take, loses the digits the test above keeps."""
    X, Y, cols, prob = _problem(offset=1e9, shuffle=False)
    Z = working_design(X, cols, prob)
    design = WorkingDesign(X, cols, prob, chunk_rows=50)
    W = np.random.default_rng(2).normal(size=(prob.slices[0].stop, 3))
    exact = Z[:, prob.slices[0]] @ W
    f, _ = design.fused_pass([0], W, np.zeros(3), lambda fc, rows: fc * 0.0)
    W_raw = design.to_raw([0], W)
    shortcut = X[:, cols[prob.raw_slices[0]]] @ W_raw - prob.x_mean[prob.raw_slices[0]] @ W_raw
    err_centred, err_shortcut = np.abs(f - exact).max(), np.abs(shortcut - exact).max()
    assert err_centred < 1e-9 * np.abs(exact).max()
    assert err_shortcut > 1e3 * max(err_centred, 1e-300)


def test_grown_preconditioner_equals_the_whole_factor():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(80, 9)) @ rng.normal(size=(9, 9))
    K = A.T @ A / 80
    bf = BoundFactor("sigmoid", 1e-3)
    for lo, hi in ((0, 4), (4, 5), (5, 9)):
        bf.append(K[:lo, lo:hi], K[lo:hi, lo:hi])
    R = cholesky(0.25 * K + 1e-3 * np.eye(9))
    np.testing.assert_allclose(bf.dense(), R, rtol=0, atol=1e-12)
    V = rng.normal(size=(9, 3))
    np.testing.assert_allclose(bf.solve(V), np.linalg.solve(R, V), rtol=1e-10)
    np.testing.assert_allclose(bf.solve_t(V), np.linalg.solve(R.T, V), rtol=1e-10)
    np.testing.assert_allclose(bf.mul(V), R @ V, rtol=1e-12)


@pytest.mark.parametrize("method,shuffle", [("omp", True), ("fr", True), ("omp", False), ("fr", False)])
def test_chunked_selection_equals_materialised_selection(method, shuffle):
    X, Y, cols, prob = _problem(seed=4, n=400, shuffle=shuffle, offset=2.0)  # shuffle: copied; else in place
    costs = np.array([1.0, 2.0, 0.5, 1.5])
    design = WorkingDesign(X, cols, prob, chunk_rows=29)
    assert all(design.copied) if shuffle else not any(design.copied)
    chunked = select_glm(GLMState(prob, design, Y, "softmax", 1e-3), costs, method=method)
    dense = select_glm(GLMState(prob, working_design(X, cols, prob), Y, "softmax", 1e-3), costs, method=method)
    assert chunked.order == dense.order
    assert not chunked.not_converged and np.all(chunked.grad_norms <= GRAD_TOL)
    np.testing.assert_allclose(chunked.log_loss, dense.log_loss, rtol=0, atol=1e-8)
    # each prefix's solution is optimal for the dense objective too (gradient recomputed here)
    Z = working_design(X, cols, prob)
    for j in range(1, len(chunked.order) + 1):
        Zs = np.hstack([Z[:, prob.slices[g]] for g in chunked.order[:j]])
        W = np.vstack(chunked.prefix_weights[j])
        _, gW, gb, _ = objective_gradient(Zs, Y, W, chunked.intercepts[j], "softmax", 1e-3)
        assert max(np.abs(gW).max(), np.abs(gb).max()) <= 1.01 * GRAD_TOL


def test_passes_per_step_are_counted():
    X, Y, cols, prob = _problem(seed=5)
    clf = AnytimeClassifier(groups=[list(range(0, 3)), list(range(3, 7)), list(range(7, 9)), list(range(9, 14))],
                            costs=[1.0, 1.0, 1.0, 1.0]).fit(X, Y.argmax(axis=1))
    # OMP: one scoring pass plus the refit's evaluations, every step
    np.testing.assert_array_equal(clf.n_passes_, clf.n_evals_[1:] + 1)
    assert clf.n_passes_.shape == (4,) and np.all(clf.n_evals_[1:] >= 1)


def test_selection_never_allocates_a_working_design():
    rng = np.random.default_rng(6)
    n, sizes = 3000, (30,) * 4
    X = rng.normal(size=(n, sum(sizes)))
    y = (X[:, ::7].sum(axis=1) + rng.normal(size=n) > 0).astype(float)
    Y = y[:, None]  # binary: what remains beside the chunk is O(n) per array
    cols = np.arange(X.shape[1])
    prob = build_working_problem(sufficient_statistics(X, Y, columns=cols), list(sizes), True)
    design_bytes = n * prob.K.shape[0] * 8
    tracemalloc.start()
    try:
        working_design(X, cols, prob)  # control: the probe sees a materialised design
        _, control = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        state = GLMState(prob, WorkingDesign(X, cols, prob, chunk_rows=200), Y, "sigmoid", 1e-3)
        select_glm(state, np.ones(len(sizes)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert control >= design_bytes
    assert peak < design_bytes / 3, (peak, design_bytes)  # O(n) arrays and one chunk


def test_columns_are_read_in_place_unless_their_offset_is_large():
    """Groups whose means are a few standard deviations are read in place (rank-one mean correction,
    no copy) and still match the materialised design; a group with one large-offset column, or with
    columns scattered over X, is centred in a copy (the negative control above shows why)."""
    X, Y, cols, prob = _problem(seed=7, offset=0.0)
    X = X + 3.0 * X.std(axis=0)  # means ~3 sd: below chunk_moments.SHIFT_RATIO
    X[:, 5] += 1e9  # one offset column in the second group (columns 3..6)
    prob = build_working_problem(sufficient_statistics(X, Y, columns=cols), [3, 4, 2, 5], True)
    design = WorkingDesign(X, cols, prob, chunk_rows=41)
    assert design.copied == [False, True, False, False]
    shuffled = WorkingDesign(X, np.r_[cols[:3][::-1], cols[3:]], prob)
    assert shuffled.copied[0]  # columns 2, 1, 0: not one run of X
    Z = working_design(X, cols, prob)
    rng = np.random.default_rng(8)
    R = rng.normal(size=(X.shape[0], 3))
    scale = np.abs(Z).max() * np.abs(R).sum(axis=0).max()
    np.testing.assert_allclose(design.gradient(R), Z.T @ R, rtol=0, atol=1e-12 * scale)
    order = [3, 1, 0, 2]  # neighbours 2 and 3 are read as one slice of X
    Zs = np.hstack([Z[:, prob.slices[g]] for g in order])
    W, b = rng.normal(size=(Zs.shape[1], 3)), rng.normal(size=3)
    f, G = design.fused_pass(order, W, b, lambda fc, rows: fc - Y[rows])
    np.testing.assert_allclose(f, Zs @ W + b, rtol=0, atol=1e-11 * np.abs(Zs @ W).max())
    np.testing.assert_allclose(G, Zs.T @ (Zs @ W + b - Y), rtol=1e-10, atol=1e-10 * np.abs(G).max())


def test_refit_starts_from_the_scored_gradient():
    """The refit after a pick starts from the previous optimum, already evaluated by the scores: it
    makes one pass fewer than a refit that evaluates its start, and reaches the same solution."""
    X, Y, cols, prob = _problem(seed=9, n=400)
    seeded = GLMState(prob, WorkingDesign(X, cols, prob), Y, "softmax", 1e-3)
    plain = GLMState(prob, WorkingDesign(X, cols, prob), Y, "softmax", 1e-3)
    for g in (2, 0, 3):
        seeded.scores("omp", [h for h in range(4) if h not in seeded.order], np.ones(4))
        a, b = seeded.add(g), plain.add(g)  # plain: no scores, so nothing to start from
        assert a.n_evals == b.n_evals - 1 and a.converged and b.converged
        np.testing.assert_allclose(a.W, b.W, rtol=0, atol=1e-3)  # both within GRAD_TOL of one optimum
        assert abs(a.loss - b.loss) < 1e-8
