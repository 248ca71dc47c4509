"""One exception hierarchy, so callers (and the CLI) can catch edgeseq's own errors precisely.

Every message says what was wrong and, where it can, how to fix it. Classes also inherit the
matching builtin (ValueError, ...) so that generic code and scikit-learn's checks behave naturally.
"""

from sklearn.exceptions import NotFittedError as _SklearnNotFittedError


class EdgeseqError(Exception):
    """Base class of every error edgeseq raises on purpose."""


class InputError(EdgeseqError, ValueError):
    """Bad user input: NaN/Inf, wrong shapes, mismatched lengths, out-of-range arguments."""


class InputTypeError(InputError, TypeError):
    """Input of an unusable type (sparse matrix, dicts in X, ...)."""


class GroupSpecError(InputError):
    """Bad feature-group specification: overlaps, empty or unknown columns, bad costs or names."""


class NotFittedError(EdgeseqError, _SklearnNotFittedError):
    """The estimator is used before `fit` (also a scikit-learn NotFittedError, as its checks expect)."""


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


class OutputError(InputError):
    """An output path cannot be written (missing directory, no permission, disk full); nothing that
    existed before is changed."""
