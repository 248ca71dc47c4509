"""One exception hierarchy, so callers (and the CLI) can catch edgeseq's own errors precisely.

Every message says what was wrong and, where it can, how to fix it. Classes also inherit the
matching builtin (ValueError, ...) so that generic code and scikit-learn's checks behave naturally.

Every exception and warning class of edgeseq lives here. The two that also subclass scikit-learn's
classes (`NotFittedError`, `RefitConvergenceWarning`) are created on first access (PEP 562), so a
device that only imports the runtime never loads scikit-learn.

Examples
--------
>>> from edgeseq.errors import EdgeseqError, InputError
>>> issubclass(InputError, (EdgeseqError, ValueError))
True
"""

from __future__ import annotations


class EdgeseqError(Exception):
    """Base class of every error edgeseq raises on purpose.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.errors import EdgeseqError, GroupSpecError
    >>> try:
    ...     AnytimeRegressor(groups=[[0, 1], [1, 2]], costs=[1.0, 1.0]).fit(np.ones((5, 3)), np.arange(5.0))
    ... except GroupSpecError as exc:
    ...     print(isinstance(exc, (EdgeseqError, ValueError)))
    True
    """


class InputError(EdgeseqError, ValueError):
    """Bad user input: NaN/Inf, wrong shapes, mismatched lengths, out-of-range arguments."""


class InputTypeError(InputError, TypeError):
    """Input of an unusable type (sparse matrix, dicts in X, ...)."""


class GroupSpecError(InputError):
    """Bad feature-group specification: overlaps, empty or unknown columns, bad costs or names."""


class ModelFormatError(EdgeseqError):
    """A model file cannot be loaded: unknown version, forbidden content, corruption."""


class ExportError(EdgeseqError):
    """A model cannot be exported faithfully (e.g. weights overflow float32)."""


class IntegrityError(EdgeseqError):
    """An export directory fails its checks: schema, checksums, missing or extra files."""


class RuntimeInputError(InputError):
    """A runtime received features it cannot use: missing groups, wrong shapes, NaN/Inf."""


class EdgeseqWarning(UserWarning):
    """Something the user should know about but that does not stop the work (e.g. a useless group)."""


class SessionBusyError(EdgeseqError, RuntimeError):
    """An anytime run was started on a session whose previous run has not finished."""


class VerifyMismatch(EdgeseqError):
    """`edgeseq verify` found a runtime whose predictions differ from the model's beyond the bound."""


class CCompilerError(EdgeseqError):
    """No usable C compiler, or the generated C did not compile or run."""


class DataUnavailableError(EdgeseqError):
    """A bundled data set's source package is missing or its content fails its hash."""


def _not_fitted_error():
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    class NotFittedError(EdgeseqError, SklearnNotFittedError):
        """The estimator is used before `fit` (also a scikit-learn NotFittedError, as its checks expect)."""

    return NotFittedError


def _refit_convergence_warning():
    from sklearn.exceptions import ConvergenceWarning

    class RefitConvergenceWarning(EdgeseqWarning, ConvergenceWarning):
        """A GLM refit stopped before its gradient tolerance (also scikit-learn's ConvergenceWarning)."""

    return RefitConvergenceWarning


_LAZY_CLASSES = {"NotFittedError": _not_fitted_error, "RefitConvergenceWarning": _refit_convergence_warning}


def __getattr__(name: str):
    make = _LAZY_CLASSES.get(name)
    if make is None:
        raise AttributeError(f"module 'edgeseq.errors' has no attribute {name!r}")
    cls = make()
    cls.__module__ = __name__
    globals()[name] = cls  # created once: every import sees the same class
    return cls
