"""Triangular solves on small blocks, LAPACK called directly.

The greedy selections and the GLM's refits solve with one small triangular block at a time: a
selection step solves with the new group's factor (a few columns), each weight refit solves with the
prefix's factor, and every evaluation of a GLM refit solves once per selected group with that group's
panel of the factor (thousands of evaluations per fit). scipy's `scipy.linalg.solve_triangular`
spends tens of microseconds per call on its own argument handling (array-API dispatch, batching,
dtype and layout checks) around a LAPACK ``trtrs`` that on such blocks takes a few.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack
from scipy.linalg import solve_triangular as _scipy_solve_triangular


def solve_triangular(a: np.ndarray, b: np.ndarray, *, lower: bool, trans: bool = False) -> np.ndarray:
    """x with a x = b (``trans``: aᵀ x = b) for a triangular `a`, as ``scipy.linalg.solve_triangular(a, b,
    lower=lower, trans=trans, check_finite=False)`` gives it: the same numbers.

    The same LAPACK routine (``dtrtrs``) with scipy's layout rule: an `a` that is not column-major is
    solved as the transposed system (its transpose is, with ``lower`` and ``trans`` flipped), so
    LAPACK reads it where it lies. Anything but float64 2-D `a` and `b` goes to scipy's function.

    Parameters
    ----------
    a : numpy.ndarray
        (k, k) triangular, any layout; only the triangle named by `lower` is read.
    b : numpy.ndarray
        (k, P) right-hand sides (not modified).
    lower : bool
        Whether `a` is lower triangular.
    trans : bool, default=False
        Solve with aᵀ instead of a.

    Returns
    -------
    numpy.ndarray
        (k, P), column-major.

    Raises
    ------
    numpy.linalg.LinAlgError
        For a zero on the diagonal of `a`, as scipy raises it.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import linalg
    >>> a = np.array([[2.0, 0.0], [1.0, 4.0]]); b = np.array([[2.0, 1.0], [9.0, 3.0]])
    >>> solve_triangular(a, b, lower=True).tolist()
    [[1.0, 0.5], [2.0, 0.625]]
    >>> all(np.array_equal(solve_triangular(m, b, lower=True, trans=t),
    ...                    linalg.solve_triangular(m, b, lower=True, trans=t, check_finite=False))
    ...     for m in (a, np.asfortranarray(a)) for t in (False, True))
    True
    """
    if not (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype == np.float64
            and a.ndim == b.ndim == 2):
        return _scipy_solve_triangular(a, b, lower=lower, trans=int(trans), check_finite=False)
    if a.flags.f_contiguous:
        x, info = lapack.dtrtrs(a, b, lower=int(lower), trans=int(trans))
    else:
        x, info = lapack.dtrtrs(a.T, b, lower=int(not lower), trans=int(not trans))
    if info > 0:
        raise np.linalg.LinAlgError(f"singular matrix: resolution failed at diagonal {info - 1}")
    if info < 0:
        raise ValueError(f"illegal value in {-info}-th argument of internal trtrs")
    return x
