"""Shared helpers of the runtime tests (no tests here): real exports and a float64 reference."""

import numpy as np

from edgeseq.export.writer import export_model

EPS32 = float(np.finfo(np.float32).eps)


def exported(seq, tmp_path, name="out"):
    """Export `seq` with the real exporter; returns the directory."""
    out = tmp_path / name
    export_model(seq, out)
    return out


def group_features(seq, X):
    """{group name: X[:, its columns]} for every group."""
    return {seq.group_names[g]: X[:, seq.group_columns[g]] for g in range(seq.n_groups)}


def agrees(got, want, rtol: float = 1e-6) -> bool:
    """`got` equals `want` to float32 rounding (relative to the largest |want|, at least 1).

    Batch `predict` runs a joined graph (one Gemm, one tree node: edgeseq.runtime.fuse), the
    anytime loop the stage graphs, so the same sums are added in another order."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= rtol * max(1.0, np.abs(want).max())))


def linear_tolerance(seq, X, j):
    """Bound on |float32 - float64| of the linear output of prefix j, per row and output.

    Rounding x and w to float32 and accumulating d products in float32 errs by at most about
    (d + 2) * eps32 * sum|x_i w_i| (plus eps32 * |b|); a factor 4 covers summation-order differences.
    """
    cols = seq.prefix_columns(j)
    mag = np.abs(X[:, cols]) @ np.abs(seq.coefs[j]) + np.abs(seq.intercepts[j])
    return 4 * (len(cols) + 2) * EPS32 * mag + 1e-30


def assert_matches_reference(session, seq, X, j, pred):
    """`pred` (a session's output for prefix j) equals the float64 FittedSequence within float32 bounds."""
    z = seq.linear(X, j)
    tol = linear_tolerance(seq, X, j)
    if seq.task == "regression":
        ref = z[:, 0] if seq.y_was_1d else z
        got = np.asarray(pred, dtype=np.float64)
        assert got.shape == ref.shape
        assert np.all(np.abs(got - ref) <= (tol[:, 0] if seq.y_was_1d else tol)), np.max(np.abs(got - ref))
        return
    proba = seq.apply_link(z)
    # sigmoid and softmax are 1-Lipschitz in the max-norm, so the logits' bound carries over
    bound = tol.max(axis=1, keepdims=True) * 2 + 2 * EPS32
    assert pred.proba.shape == proba.shape
    assert np.all(np.abs(pred.proba - proba) <= bound)
    top2 = np.sort(proba, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 4 * bound[:, 0]  # labels only where no tie within rounding
    want = np.argmax(proba, axis=1)
    assert np.array_equal(pred.label_index[clear], want[clear])
    assert np.array_equal(pred.label, np.asarray(seq.classes)[pred.label_index])
    assert pred.prefix == j
