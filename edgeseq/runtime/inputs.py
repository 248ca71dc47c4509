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
    """Unknown keys and missing needed groups are errors that list the offending names."""
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
    """None, or a finite number of seconds >= 0."""
    return None if deadline_s is None else _nonnegative(deadline_s, "deadline_s (seconds)", False)
