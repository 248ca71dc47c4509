"""Checks on the features a runtime receives, so bad input fails before it reaches onnxruntime.

onnxruntime would happily propagate NaN, silently broadcast or raise an opaque shape error; these
checks turn every such case into a `RuntimeInputError` that names the group and says what to fix.
Group names are shown with ``repr`` so hostile names (newlines, quotes, control characters) cannot
garble a message.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from edgeseq.errors import RuntimeInputError

_NUMERIC_KINDS = "biuf"


def as_group_array(name: str, value, dim: int, *, one_row: bool = False) -> np.ndarray:
    """`value` as a C-contiguous float32 array of shape (N, dim), or a RuntimeInputError.

    A 1-D array of length `dim` counts as one row. With `one_row`, exactly one row is required
    (the anytime loop handles one sample at a time).

    Raises
    ------
    RuntimeInputError
        Naming the group: not numeric, wrong shape, no rows, NaN/Inf or values beyond float32.

    Examples
    --------
    >>> a = as_group_array("audio", [1, 2, 3], 3)
    >>> a.dtype.name, a.shape, a.flags["C_CONTIGUOUS"]
    ('float32', (1, 3), True)
    >>> as_group_array("audio", [[1.0, float("nan"), 3.0]], 3)
    Traceback (most recent call last):
    ...
    edgeseq.errors.RuntimeInputError: features of group 'audio': 1 value(s) are NaN/Inf ...
    >>> as_group_array("audio", [1e300, 0, 0], 3)        # finite in float64, not in float32
    Traceback (most recent call last):
    ...
    edgeseq.errors.RuntimeInputError: ...overflows float32...
    """
    try:
        arr = np.asarray(value)
    except Exception as exc:  # e.g. ragged nested lists
        raise RuntimeInputError(f"features of group {name!r} are not an array: {exc}") from exc
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise RuntimeInputError(
            f"features of group {name!r} must be numeric, got dtype {arr.dtype}; convert them to float")
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] != dim:
        want = f"({dim},)" if one_row else f"(N, {dim}) or ({dim},)"
        raise RuntimeInputError(
            f"features of group {name!r} have shape {np.shape(value)}; expected {want} "
            f"(the group has {dim} feature{'s' if dim != 1 else ''})")
    if arr.shape[0] == 0:
        raise RuntimeInputError(f"features of group {name!r} have no rows")
    if one_row and arr.shape[0] != 1:
        raise RuntimeInputError(
            f"features of group {name!r} have {arr.shape[0]} rows; the anytime loop takes one sample, "
            f"shape ({dim},) — use predict() for batches")
    with np.errstate(over="ignore"):  # overflow becomes inf and is reported just below
        out = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(out).all():
        bad = ~np.isfinite(out)
        row, col = (int(i) for i in np.argwhere(bad)[0])
        src = arr[row, col]
        what = "overflows float32" if np.isfinite(src) else f"is {float(src)}"
        raise RuntimeInputError(
            f"features of group {name!r}: {int(bad.sum())} value(s) are NaN/Inf or overflow float32 "
            f"(first at row {row}, column {col}, which {what}); clean or impute them before predicting")
    return out


def check_group_keys(given, known: dict, needed) -> None:
    """Unknown keys and missing needed groups are errors that list the offending names.

    Parameters
    ----------
    given : Mapping
        What the caller passed, keyed by group name.
    known : dict
        The model's group names (only membership is used).
    needed : iterable of str
        Groups the requested prefix reads.

    Examples
    --------
    >>> known = {"a": 0, "b": 1}
    >>> check_group_keys({"a": [1.0]}, known, ["a"])          # "b" is not needed: fine
    >>> check_group_keys({"a": [1.0], "c": [2.0]}, known, ["a"])
    Traceback (most recent call last):
    ...
    edgeseq.errors.RuntimeInputError: unknown group name(s) 'c'; the model's groups are 'a', 'b'
    >>> check_group_keys({"a": [1.0]}, known, ["a", "b"])
    Traceback (most recent call last):
    ...
    edgeseq.errors.RuntimeInputError: missing features for group(s) 'b', ...
    """
    if not isinstance(given, Mapping):
        raise RuntimeInputError(
            f"features must be a dict mapping group name -> array, got {type(given).__name__}")
    unknown = [k for k in given if k not in known]
    if unknown:
        raise RuntimeInputError(
            f"unknown group name(s) {', '.join(map(repr, unknown))}; the model's groups are "
            f"{', '.join(map(repr, known))}")
    missing = [g for g in needed if g not in given]
    if missing:
        raise RuntimeInputError(
            f"missing features for group(s) {', '.join(map(repr, missing))}, which the requested prefix "
            f"needs; pass them, or ask for a smaller budget/prefix")


def _nonnegative(value, what: str, allow_inf: bool) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if isinstance(value, bool) or np.isnan(v) or v < 0 or (np.isinf(v) and not allow_inf):
        raise RuntimeInputError(f"{what} must be a {'' if allow_inf else 'finite '}number >= 0, got {value!r}")
    return v


def check_deadline(deadline_s) -> float | None:
    """None, or a finite number of seconds >= 0.

    Examples
    --------
    >>> check_deadline(None), check_deadline(1), check_deadline(0.25)
    (None, 1.0, 0.25)
    >>> check_deadline(float("inf"))
    Traceback (most recent call last):
    ...
    edgeseq.errors.RuntimeInputError: deadline_s (seconds) must be a finite number >= 0, got inf
    """
    return None if deadline_s is None else _nonnegative(deadline_s, "deadline_s (seconds)", False)
