"""Reading inference data for `edgeseq run` / `edgeseq verify`: the model's columns, by name or position.

Unlike training data (`edgeseq.io.data`), inference data has no target column and may carry extra
columns (ids, timestamps) or leave later groups uncomputed. So columns are matched to the model by
header name when the model knows its feature names (extra columns ignored), else by position;
an empty CSV cell or NaN means "not computed" and is kept as NaN (the caller decides what that
means); anything else that is not a number is an error naming the line and column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgeseq.errors import InputError, IntegrityError
from edgeseq.io.bounded import check_regular, open_regular
from edgeseq.format import stage_group_counts
from edgeseq.io.data import csv_rows, parse_float
from edgeseq.messages import brief


@dataclass
class FeatureRows:
    r"""Inference rows in the model's raw column order, and the file they came from.

    Attributes
    ----------
    X : float64 ndarray of shape (n, D)
        NaN marks a value that is missing (a group not computed for that row).
    source : str
        The file name, for messages.

    Examples
    --------
    >>> import numpy as np
    >>> manifest = {"n_features_in": 3, "feature_names": ["ax", "ay", "mic"],
    ...             "groups": [{"name": "imu", "columns": [0, 1]}, {"name": "audio", "columns": [2]}]}
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "rows.csv"
    >>> _ = p.write_text("id,mic,ay,ax\n7,0.5,2,1\n8,,4,3\n")   # any order, an extra column, a gap
    >>> rows = read_feature_rows(p, manifest)
    >>> rows.X.tolist(), rows.source == str(p)
    ([[1.0, 2.0, 0.5], [3.0, 4.0, nan]], True)
    """

    X: np.ndarray  # (n, D) float64 in the model's raw column order; NaN = missing / not computed
    source: str


def _model_columns(manifest: dict) -> list[int]:
    """The raw columns the model's groups use; a manifest that disagrees with itself (read without
    `read_verified`) is an IntegrityError here rather than an IndexError deep in the matching."""
    D, names = manifest["n_features_in"], manifest["feature_names"]
    if names is not None and len(names) != D:
        raise IntegrityError(f"manifest feature_names has {len(names)} entries, n_features_in is {D}")
    used = sorted(c for g in manifest["groups"] for c in g["columns"])
    if used and not 0 <= used[0] <= used[-1] < D:
        raise IntegrityError(f"manifest groups use column {used[-1] if used[-1] >= D else used[0]}, "
                             f"outside 0..{D - 1} (n_features_in {D})")
    return used


def _select(header: list[str] | None, n_cols: int, manifest: dict, path, ignore=()) -> list[int]:
    """For each raw model column 0..D-1 the index of the file column holding it (-1: unused by the model)."""
    D, names = manifest["n_features_in"], manifest["feature_names"]
    used = _model_columns(manifest)
    if names is not None and header is not None:
        missing = [names[c] for c in used if names[c] not in header]
        if missing:
            raise InputError(f"{path}: column(s) {missing} that the model uses are not in the header {header}")
        return [header.index(names[c]) if c in used else -1 for c in range(D)]
    keep = [i for i in range(n_cols) if header is None or header[i] not in ignore]
    if len(keep) != D:
        raise InputError(f"{path}: {len(keep)} feature columns, the model expects {D} (the model has no "
                         f"feature names to match by, so columns are taken by position; leave out "
                         f"extra columns such as the target or an id with --ignore COL)")
    return keep


def _cell(text: str, where: str) -> float:
    text = text.strip()
    if text == "" or text.lower() == "nan":
        return float("nan")  # a group not computed for this row: run falls back to the prefix before it
    return parse_float(text, where)


def _read_csv(path: Path, manifest: dict, ignore=()) -> np.ndarray:
    numbered = csv_rows(path)
    lines, rows = [n for n, _ in numbered], [r for _, r in numbered]
    if len(rows) < 2:
        raise InputError(f"{path}: needs a header row and at least one data row")
    header = [h.strip() for h in rows[0]]
    unknown = [c for c in ignore if c not in header]
    if unknown:
        raise InputError(f"{path}: column(s) {unknown} to ignore are not in the header {header}")
    pick = _select(header, len(header), manifest, path, ignore)
    X = np.full((len(rows) - 1, len(pick)), np.nan)
    for r, row in enumerate(rows[1:]):
        if len(row) != len(header):
            raise InputError(f"{path}, line {lines[r + 1]}: {len(row)} fields, the header has {len(header)}")
        for c, i in enumerate(pick):
            if i >= 0:
                X[r, c] = _cell(row[i], f"{path}, line {lines[r + 1]}, column {brief(header[i])}")
    return X


def _read_npz(path: Path, manifest: dict) -> np.ndarray:
    try:
        with open_regular(path, "data file") as f, np.load(f, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except InputError:  # open_regular's own line (not a regular file)
        raise
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path} as .npz without pickles: {exc}") from None
    X = arrays.get("X")
    if X is None or X.ndim != 2 or not np.issubdtype(X.dtype, np.number):
        raise InputError(f"{path} needs a numeric 2-D array 'X'; it has {sorted(arrays)}")
    header = None
    if "feature_names" in arrays and arrays["feature_names"].shape == (X.shape[1],):
        header = [str(v) for v in arrays["feature_names"].tolist()]
    pick = _select(header, X.shape[1], manifest, path)
    out = np.full((X.shape[0], len(pick)), np.nan)
    for c, i in enumerate(pick):
        if i >= 0:
            out[:, c] = X[:, i]
    return out


def read_feature_rows(path, manifest: dict, ignore=()) -> FeatureRows:
    r"""Rows of DATA (.csv with a header, or .npz with X [and feature_names]) in the model's column order.

    `ignore`: CSV columns left out before columns are matched by position (target, ids).

    Columns are matched by header name when the manifest has feature names (extra columns are
    ignored), else by position. Empty cells and "nan" are kept as NaN: "not computed".

    Raises
    ------
    InputError
        For a missing file or column, or a cell that is not a number (naming line and column).

    Examples
    --------
    >>> import numpy as np
    >>> manifest = {"n_features_in": 3, "feature_names": ["ax", "ay", "mic"],
    ...             "groups": [{"name": "imu", "columns": [0, 1]}, {"name": "audio", "columns": [2]}]}
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "rows.csv"
    >>> _ = p.write_text("id,mic,ay,ax\n7,0.5,2,1\n8,,4,3\n")   # any order, an extra column, a gap
    >>> read_feature_rows(p, manifest).X[:, 2].tolist()
    [0.5, nan]
    >>> by_position = {**manifest, "feature_names": None}
    >>> read_feature_rows(p, by_position, ignore=["id"]).X[0].tolist()   # file order: mic, ay, ax
    [0.5, 2.0, 1.0]
    """
    path = Path(path)
    check_regular(path, "data file")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        X = _read_npz(path, manifest)
    elif suffix in (".csv", ".txt"):
        X = _read_csv(path, manifest, tuple(ignore))
    else:
        raise InputError(f"{path}: unsupported data format {suffix!r}; use .csv (with a header) or .npz")
    if X.shape[0] == 0:
        raise InputError(f"{path} holds no rows")
    return FeatureRows(X, str(path))


def group_arrays(manifest: dict, X: np.ndarray) -> dict:
    """{group name: X[:, its columns]} for every group of the manifest.

    The input `ExportedModel.predict` takes, from rows in raw column order.

    Examples
    --------
    >>> import numpy as np
    >>> manifest = {"n_features_in": 3, "feature_names": ["ax", "ay", "mic"],
    ...             "groups": [{"name": "imu", "columns": [0, 1]}, {"name": "audio", "columns": [2]}]}
    >>> X = np.array([[1.0, 2.0, 3.0]])
    >>> {k: v.tolist() for k, v in group_arrays(manifest, X).items()}
    {'imu': [[1.0, 2.0]], 'audio': [[3.0]]}
    """
    return {g["name"]: X[:, g["columns"]] for g in manifest["groups"]}


def available_prefix(manifest: dict, X: np.ndarray) -> np.ndarray:
    """Per row, the longest prefix whose groups are all present (no NaN): a missing value in a group
    means the device had not computed that group yet.

    The manifest's groups are in computation order, so prefix k needs groups 0..k-1; in a tree-stage
    export, stage k needs the first ``stage_group_counts(manifest)[k]`` groups.

    Examples
    --------
    >>> import numpy as np
    >>> manifest = {"n_features_in": 3, "feature_names": ["ax", "ay", "mic"],
    ...             "groups": [{"name": "imu", "columns": [0, 1]}, {"name": "audio", "columns": [2]}]}
    >>> X = np.array([[1.0, 2.0, 3.0],          # everything computed
    ...               [1.0, 2.0, np.nan],       # audio not yet
    ...               [np.nan, 2.0, 3.0]])      # imu incomplete: audio alone buys nothing
    >>> available_prefix(manifest, X).tolist()
    [2, 1, 0]
    >>> stages = [{"new_groups": []}, {"new_groups": ["imu", "audio"]}]   # one stage needing both
    >>> available_prefix({**manifest, "stage_kind": "trees", "prefixes": stages}, X).tolist()
    [1, 0, 0]
    """
    prefix = np.full(X.shape[0], len(manifest["groups"]), dtype=np.int64)
    for k in range(len(manifest["groups"]) - 1, -1, -1):
        missing = np.isnan(X[:, manifest["groups"][k]["columns"]]).any(axis=1)
        prefix[missing] = k
    if "prefixes" not in manifest:  # a bare group table, no stages listed: stage j completes group j
        return prefix
    # groups present -> the last stage they complete (for linear prefixes stage j completes group j: the same)
    counts = np.asarray(stage_group_counts(manifest))
    return np.searchsorted(counts, prefix, side="right") - 1
