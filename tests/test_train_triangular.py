"""`edgeseq.train.triangular.solve_triangular` gives scipy's numbers to the bit, in every layout.

The selections and the GLM refits call it in place of `scipy.linalg.solve_triangular` for speed
alone, so any difference in the answer (a different LAPACK call, a layout solved the other way)
would change fits. Reference: scipy's own function on the same arrays.
"""

import numpy as np
import pytest
from scipy import linalg

from edgeseq.train.triangular import solve_triangular


def _layouts(a: np.ndarray):
    """C order, Fortran order, and a C-ordered block of a larger array (the factor's prefix, a panel)."""
    big = np.zeros((a.shape[0] + 3, a.shape[1] + 2))
    big[1:1 + a.shape[0], 2:] = a
    return [np.ascontiguousarray(a), np.asfortranarray(a), big[1:1 + a.shape[0], 2:]]


@pytest.mark.parametrize("k, P", [(1, 1), (3, 1), (5, 4), (17, 2), (40, 7)])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [False, True])
def test_the_same_numbers_as_scipy(k, P, lower, trans):
    rng = np.random.default_rng(k * 100 + P)
    A = rng.normal(size=(k, k)) + k * np.eye(k)
    a = np.tril(A) if lower else np.triu(A)
    a = a + 10.0 * np.triu(rng.normal(size=(k, k)), 1) * lower  # junk in the unread triangle
    for m in _layouts(a):
        for b in (rng.normal(size=(k, P)), np.asfortranarray(rng.normal(size=(k, P)))):
            b_before = b.copy()
            got = solve_triangular(m, b, lower=lower, trans=trans)
            want = linalg.solve_triangular(m, b, lower=lower, trans=int(trans), check_finite=False)
            assert got.shape == want.shape and np.array_equal(got, want)
            assert np.array_equal(b, b_before)  # the right-hand side is not overwritten


def test_the_answer_solves_the_system():
    """Negative control for the comparison above: the answer is a solution, not merely scipy's."""
    rng = np.random.default_rng(0)
    a = np.tril(rng.normal(size=(6, 6))) + 6 * np.eye(6)
    b = rng.normal(size=(6, 3))
    assert np.allclose(a @ solve_triangular(a, b, lower=True), b)
    assert np.allclose(a.T @ solve_triangular(a, b, lower=True, trans=True), b)
    assert not np.allclose(a @ solve_triangular(a, b, lower=True, trans=True), b)


def test_a_singular_factor_is_an_error_and_other_dtypes_go_to_scipy():
    a = np.array([[1.0, 0.0], [2.0, 0.0]])
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        solve_triangular(a, np.ones((2, 1)), lower=True)
    a32 = np.array([[2.0, 0.0], [1.0, 4.0]], np.float32)
    got = solve_triangular(a32, np.ones((2, 1), np.float32), lower=True)
    assert np.array_equal(got, linalg.solve_triangular(a32, np.ones((2, 1), np.float32), lower=True))
