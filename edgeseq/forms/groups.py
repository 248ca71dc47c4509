"""Validate and normalise the feature-group specification (groups, costs, names).

Every estimator and the CLI go through here, so a bad specification fails the same way everywhere,
with a message naming the offending group or column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgeseq.errors import GroupSpecError, InputError
from edgeseq.messages import brief, columns_text
from edgeseq.forms.linear import check_name


_MIN_COST = float(np.finfo(np.float64).tiny)  # subnormal costs make cost ratios overflow to inf


@dataclass(frozen=True)
class GroupSpec:
    """A checked partition of (some of) the D columns into costed, named groups.

    Examples
    --------
    >>> from edgeseq.forms.groups import check_groups
    >>> spec = check_groups([[0, 1], [2]], [2.0, 0.5], ["color", "edges"], n_features=3)
    >>> spec.names, spec.costs.tolist()
    (('color', 'edges'), [2.0, 0.5])
    """

    columns: tuple[np.ndarray, ...]  # raw column indices of each group, as given
    costs: np.ndarray  # float64, one positive finite cost per group
    names: tuple[str, ...]

    @property
    def n_groups(self) -> int:
        """Number of groups.

        Examples
        --------
        >>> from edgeseq.forms.groups import check_groups
        >>> check_groups(None, None, None, n_features=4).n_groups  # one group per column
        4
        """
        return len(self.columns)

    @property
    def sizes(self) -> np.ndarray:
        """Number of columns in each group, as int64.

        Examples
        --------
        >>> from edgeseq.forms.groups import check_groups
        >>> check_groups([[0, 1, 3], [2]], [1.0, 1.0], None, n_features=4).sizes.tolist()
        [3, 1]
        """
        return np.array([len(c) for c in self.columns], dtype=np.int64)


def _groups_from_labels(labels: np.ndarray) -> tuple[list[np.ndarray], list[str] | None]:
    """A length-D label array: one group per distinct label; None/negative labels mean unused."""
    is_unused = np.array([lab is None or (isinstance(lab, (int, np.integer)) and lab < 0)
                          or (isinstance(lab, (float, np.floating)) and (np.isnan(lab) or lab < 0))
                          for lab in labels.tolist()])
    used = [lab for lab, u in zip(labels.tolist(), is_unused) if not u]
    kinds = {type(lab) for lab in used}
    if len(kinds) > 1 and not all(issubclass(k, (int, float)) for k in kinds):
        raise GroupSpecError(f"group labels mix types {sorted(k.__name__ for k in kinds)}; use one type")
    uniq = sorted(set(used), key=lambda v: (str(type(v)), v))
    columns = [np.array([i for i, lab in enumerate(labels.tolist()) if not is_unused[i] and lab == u],
                        dtype=np.int64) for u in uniq]
    names = [str(u) for u in uniq] if uniq and isinstance(uniq[0], str) else None
    return columns, names


def _as_group_columns(groups, n_features: int) -> tuple[list[np.ndarray], list[str] | None]:
    if groups is None:
        return [np.array([j], dtype=np.int64) for j in range(n_features)], None
    if isinstance(groups, np.ndarray) and groups.ndim == 1 and groups.dtype != object:
        if groups.shape[0] != n_features:
            raise GroupSpecError(
                f"a group-label array must have one label per column: got {groups.shape[0]} labels "
                f"for {n_features} columns")
        return _groups_from_labels(groups)
    groups = list(groups)
    if groups and all(np.isscalar(g) or g is None for g in groups):
        if len(groups) != n_features:
            raise GroupSpecError(
                f"a group-label list must have one label per column: got {len(groups)} labels for "
                f"{n_features} columns (or pass a list of lists of column indices)")
        return _groups_from_labels(np.array(groups, dtype=object))
    columns = []
    for i, g in enumerate(groups):
        arr = np.asarray(g)
        if arr.ndim != 1:
            raise GroupSpecError(f"group {i} must be a flat list of column indices, got shape {arr.shape}")
        if arr.size == 0:
            raise GroupSpecError(f"group {i} is empty; every group needs at least one column")
        if not np.issubdtype(arr.dtype, np.integer):
            if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
                arr = arr.astype(np.int64)
            else:
                raise GroupSpecError(f"group {i} must contain integer column indices, got {g!r}")
        columns.append(arr.astype(np.int64))
    return columns, None


def check_groups(groups, costs, names, n_features: int, feature_names=None) -> GroupSpec:
    """Normalise and validate a group specification against a data set of `n_features` columns.

    `groups=None` means one group per column; then `costs=None` means unit costs.

    `groups` may also be one label per column (None or a negative label leaves the column unused);
    string labels become the group names.

    Parameters
    ----------
    groups : list of lists of int, array of labels, or None
        Column indices of each group, or one group label per column.
    costs : sequence of float or None
        One positive finite extraction cost per group.
    names : sequence of str or None
        Unique non-empty group names; default ``g0, g1, ...`` (or the string labels).
    n_features : int
        Number of columns of X.
    feature_names : sequence of str or None, default=None
        Names of X's columns, used only to name columns in messages (indices otherwise).

    Returns
    -------
    GroupSpec

    Raises
    ------
    GroupSpecError
        Overlapping, empty or out-of-range groups; missing, non-positive or miscounted costs; bad names.

    Examples
    --------
    >>> from edgeseq.forms.groups import check_groups
    >>> spec = check_groups(["a", "b", "a", None], [1.0, 3.0], None, n_features=4)
    >>> spec.names, [c.tolist() for c in spec.columns]
    (('a', 'b'), [[0, 2], [1]])
    >>> check_groups([[0], [0, 1]], [1.0, 1.0], None, n_features=2)
    Traceback (most recent call last):
    ...
    edgeseq.errors.GroupSpecError: column 0 appears in groups 0 and 1; groups must not overlap
    >>> check_groups([[0], [0, 1]], [1.0, 1.0], ["imu", "audio"], n_features=2, feature_names=["ax", "mic"])
    Traceback (most recent call last):
    ...
    edgeseq.errors.GroupSpecError: column 'ax' appears in groups 'imu' and 'audio'; groups must not overlap
    """
    columns, label_names = _as_group_columns(groups, n_features)
    if not columns:
        raise GroupSpecError("no feature groups: give at least one group of columns")
    seen: dict[int, int] = {}
    # messages name groups and columns as the caller does, when the caller gave usable names
    if names is not None and not isinstance(names, str):
        names = list(names)
    named = isinstance(names, list) and len(names) == len(columns) and all(isinstance(n, str) for n in names)
    if feature_names is not None and (isinstance(feature_names, str) or len(feature_names) != n_features):
        feature_names = None
    for i, cols in enumerate(columns):
        bad = cols[(cols < 0) | (cols >= n_features)]
        if bad.size:
            raise GroupSpecError(
                f"group {i} references column(s) {bad.tolist()} but X has {n_features} columns "
                f"(valid indices are 0..{n_features - 1})")
        for c in cols.tolist():
            if c in seen:
                gname = lambda k: brief(names[k]) if named else str(k)  # noqa: E731
                where = "twice in group" if seen[c] == i else f"in groups {gname(seen[c])} and"
                raise GroupSpecError(f"column {columns_text([c], feature_names)} appears {where} {gname(i)}; "
                                     "groups must not overlap")
            seen[c] = i

    if costs is None:
        if groups is not None:
            raise GroupSpecError("costs are missing: give one positive cost per group")
        cost_arr = np.ones(len(columns))
    else:
        try:
            cost_arr = np.asarray(costs, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise GroupSpecError(f"costs must be numbers, got {costs!r}") from exc
    if cost_arr.shape[0] != len(columns):
        raise GroupSpecError(f"got {cost_arr.shape[0]} costs for {len(columns)} groups; give one per group")
    for i, c in enumerate(cost_arr.tolist()):
        if not np.isfinite(c) or c < _MIN_COST:
            raise GroupSpecError(f"cost of group {i} is {c!r}; costs must be finite and at least {_MIN_COST:.3g} "
                                 "(smaller positive numbers lose precision when costs are compared)")

    if names is None:
        names = label_names if label_names is not None else [f"g{i}" for i in range(len(columns))]
    names = list(names)
    if len(names) != len(columns):
        raise GroupSpecError(f"got {len(names)} group names for {len(columns)} groups")
    for i, nm in enumerate(names):
        try:
            check_name(nm, f"group name {i}")  # the rule every emitter relies on (C string limit)
        except InputError as exc:
            raise GroupSpecError(str(exc)) from None
    dup = {nm for nm in names if names.count(nm) > 1}
    if dup:
        raise GroupSpecError(f"group names must be unique; repeated: {sorted(dup)}")
    return GroupSpec(columns=tuple(columns), costs=cost_arr, names=tuple(names))
