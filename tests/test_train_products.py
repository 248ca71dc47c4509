"""`edgeseq.train.products`: A W and Aᵀ B in the faster orientation equal the plain products.

The reference is an einsum over float64 copies (not the BLAS call the helpers choose between); the
layout assertions show each branch is the one taken, so the value checks cannot pass only because
every case fell through to the plain product.
"""

import numpy as np
import pytest

from edgeseq.train.linear.auto import LowerTriangular
from edgeseq.train.products import narrow_product, transposed_product


def _layouts(rng, n, k, dtype):
    base = rng.normal(size=(n, k + 3)).astype(dtype)
    return {
        "C": np.ascontiguousarray(base[:, :k]),
        "F": np.asfortranarray(base[:, :k]),
        "column slice": base[:, 1:k + 1],            # rows contiguous, row stride k + 3
        "every other row": np.ascontiguousarray(base[:, :k])[::2],
    }


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("P", [1, 2, 10])
def test_both_products_equal_the_plain_sums_in_every_layout(dtype, rtol, P):
    rng = np.random.default_rng(P)
    for name, A in _layouts(rng, 301, 37, dtype).items():
        B = rng.normal(size=(A.shape[0], P)).astype(dtype)
        W = rng.normal(size=(A.shape[1], P)).astype(dtype)
        want_t = np.einsum("ik,ip->kp", A.astype(np.float64), B.astype(np.float64))
        want_n = np.einsum("ik,kp->ip", A.astype(np.float64), W.astype(np.float64))
        got_t, got_n = transposed_product(A, B), narrow_product(A, W)
        assert got_t.shape == (37, P) and got_n.shape == (A.shape[0], P), name
        assert got_t.dtype == dtype and got_n.dtype == dtype, name
        scale_t = np.abs(A).T.astype(np.float64) @ np.abs(B).astype(np.float64)
        scale_n = np.abs(A).astype(np.float64) @ np.abs(W).astype(np.float64)
        assert np.all(np.abs(got_t - want_t) <= rtol * scale_t), name
        assert np.all(np.abs(got_n - want_n) <= rtol * scale_n), name


def test_row_major_operands_take_the_other_orientation_and_others_do_not():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(50, 6))
    B, W = rng.normal(size=(50, 3)), rng.normal(size=(6, 3))
    # the fast branch returns the transpose of a C-ordered product: Fortran-ordered
    assert transposed_product(A, B).flags.f_contiguous and not transposed_product(A, B).flags.c_contiguous
    assert narrow_product(A, W).flags.f_contiguous and not narrow_product(A, W).flags.c_contiguous
    # control: a column-major A, or a single column, keeps the plain product (C-ordered result)
    F = np.asfortranarray(A)
    assert transposed_product(F, B).flags.c_contiguous and narrow_product(F, W).flags.c_contiguous
    assert transposed_product(A, B[:, :1]).flags.c_contiguous and narrow_product(A, W[:, :1]).flags.c_contiguous


def test_a_triangular_design_is_multiplied_by_its_own_routine():
    rng = np.random.default_rng(1)
    L = np.tril(rng.normal(size=(7, 7)))
    Z, B = LowerTriangular(L), rng.normal(size=(7, 2))
    np.testing.assert_allclose(transposed_product(Z, B), L.T @ B, rtol=1e-12)
    np.testing.assert_allclose(narrow_product(Z, B), L @ B, rtol=1e-12)
