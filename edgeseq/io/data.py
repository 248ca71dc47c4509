"""Reading training data (CSV with a header row, or .npz) and GROUPS.json for the CLI.

Every problem is reported as an InputError / GroupSpecError that names the file, row or column, so
`edgeseq train` can print one clear line.

GROUPS.json: ``{"groups": [{"name": "imu", "columns": ["ax", "ay"], "cost": 0.5}, ...]}``. Columns are
given by header name or by 0-based index *into the data file's columns* (for CSV the header, target
column included; for .npz the columns of X). Extra keys are allowed; "dim", when present, must equal
the number of columns. The top-level "measured_on" and "cost_unit" that `edgeseq calibrate` writes are
checked and kept (`GroupsFile.cost_provenance`), so the model can say where its costs were measured.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgeseq.io.bounded import check_regular, open_regular, read_bounded
from edgeseq.io.cost_provenance import read_cost_provenance
from edgeseq.errors import GroupSpecError, InputError
from edgeseq.messages import brief, clip


@dataclass
class Dataset:
    r"""Training data as read from a file: features, target and where the columns came from.

    Attributes
    ----------
    X : float64 ndarray of shape (n, D)
        The feature columns (every column but the target).
    y : ndarray of shape (n,)
        The target: float64 for regression; labels for classification.
    feature_names : tuple of str or None
        Names of the columns of `X`, when the file has them.
    source_columns : tuple of str or None
        CSV only: the whole header, target included (GROUPS.json indices refer to it).
    target_index : int or None
        CSV only: position of the target in the header.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "train.csv"
    >>> _ = p.write_text("ax,y,ay\n1.0,10,2.0\n3.0,20,4.0\n")
    >>> ds = read_csv(p, "y")
    >>> ds.X.tolist(), ds.y.tolist(), ds.feature_names, ds.target_index
    ([[1.0, 2.0], [3.0, 4.0]], [10.0, 20.0], ('ax', 'ay'), 1)
    """

    X: np.ndarray  # (n, D) float64
    y: np.ndarray  # (n,) float64 or labels
    feature_names: tuple[str, ...] | None
    source_columns: tuple[str, ...] | None  # CSV: the whole header (GROUPS.json indices refer to it)
    target_index: int | None  # CSV: position of the target in the header


# ASCII decimal only: Python's float() also takes "1_000", Arabic-Indic and fullwidth digits, which
# a data file should not silently turn into numbers
_NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
                     re.ASCII | re.IGNORECASE)
_CANONICAL_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})", re.ASCII)


def parse_float(text: str, where: str) -> float:
    r"""`text` as a float, accepting only ASCII decimal notation (and inf/nan); InputError naming `where`.

    Python's `float` also reads ``"1_000"`` and non-ASCII digits, which a data file should not
    silently turn into numbers.

    Examples
    --------
    >>> parse_float("-1.5e3", "data.csv, line 2")
    -1500.0
    >>> float("1_000"), float("\uff11")            # what float() alone would accept
    (1000.0, 1.0)
    >>> parse_float("1_000", "data.csv, line 2")
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: data.csv, line 2: '1_000' is not a number (ASCII decimal, e.g. -1.5e3)
    """
    if not _NUMBER.fullmatch(text):
        raise InputError(f"{where}: {brief(text)} is not a number (ASCII decimal, e.g. -1.5e3)")
    return float(text)


MAX_ROW_CHARS = 1 << 20  # one CSV row (all its physical lines): ~100,000 numeric columns


def iter_csv_rows(path, what: str = "data file"):
    r"""Yield (physical line number, fields) of every non-empty row of a CSV file, one row at a time.

    The file must be a regular file (`edgeseq.io.bounded.open_regular`), and no row may be longer
    than `MAX_ROW_CHARS` characters (its line ends and quoted newlines included): the row is refused
    as soon as its text passes the bound, before it is held whole, so a file holding one endless line
    costs a bounded amount of memory. A UTF-8 byte-order mark is ignored (as in GROUPS.json).

    Raises
    ------
    InputError
        One line naming the file (and for a long row its line and the bound).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "d.csv"
    >>> _ = p.write_text("a,b\n1,2\n")
    >>> next(iter_csv_rows(p))
    (1, ['a', 'b'])
    """
    line = 0
    room = MAX_ROW_CHARS  # characters the row being parsed may still take

    def lines(f):
        nonlocal line, room
        while True:
            text = f.readline(room + 1)
            if not text:
                return
            line += 1
            room -= len(text)
            if room < 0:
                raise InputError(f"{path}, line {line}: a row longer than {MAX_ROW_CHARS:,} characters, the limit "
                                 f"for one CSV row; is this a CSV file?")
            yield text

    try:
        with open_regular(path, what) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(lines(f))
            for row in reader:
                room = MAX_ROW_CHARS
                if row:
                    yield reader.line_num, row
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read {what} {path}: {clip(exc)}") from None


def csv_rows(path) -> list[tuple[int, list[str]]]:
    r"""(physical line number, fields) of every non-empty row, so errors name the line a user sees;
    a UTF-8 byte-order mark is ignored (as in GROUPS.json). Rows are bounded as in `iter_csv_rows`.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "d.csv"
    >>> _ = p.write_bytes('\ufeffa,b\n\n"x\ny",2\n'.encode("utf-8"))   # BOM, empty line, quoted newline
    >>> csv_rows(p)
    [(1, ['a', 'b']), (4, ['x\ny', '2'])]
    """
    return list(iter_csv_rows(path))


def _target_values(cells: list[str], task: str, path) -> np.ndarray:
    """Regression: float64. Classification: int64 labels when every cell is an integer written
    canonically ("7", "-3"), else the labels as written - "01" and "1" stay two classes."""
    if task == "classification":
        if all(_CANONICAL_INT.fullmatch(c) for c in cells):
            return np.array([int(c) for c in cells], dtype=np.int64)
        return np.array(cells, dtype=object).astype(str)
    bad = next((c for c in cells if not _NUMBER.fullmatch(c)), None)
    if bad is not None:
        raise InputError(f"{path}: target value {brief(bad)} is not a number; for class labels use "
                         "--task classification")
    return np.array([float(c) for c in cells], dtype=np.float64)


def read_csv(path, target: str, task: str = "regression") -> Dataset:
    r"""CSV with a header row; every column except `target` must be numeric.

    Parameters
    ----------
    path : str or Path
    target : str
        Header name of the target column (it may be anywhere in the row).
    task : {"regression", "classification"}
        Classification keeps labels as written, or as int64 when all are canonical integers.

    Raises
    ------
    InputError
        Naming the line and column of the first bad value.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "train.csv"
    >>> _ = p.write_text("ax,y,ay\n1.0,10,2.0\n3.0,20,4.0\n")
    >>> read_csv(p, "y", task="classification").y.tolist()
    [10, 20]
    >>> _ = p.write_text("ax,y\n1.0,10\noops,20\n")
    >>> read_csv(p, "y")
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: ...line 3, column 'ax': 'oops' is not a number ...
    """
    path = Path(path)
    numbered = csv_rows(path)
    lines, rows = [n for n, _ in numbered], [r for _, r in numbered]
    if len(rows) < 2:
        raise InputError(f"{path}: needs a header row and at least one data row")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header):
        raise InputError(f"{path}: repeated column names in the header")
    if target not in header:
        raise InputError(f"{path}: target column {brief(target)} is not in the header {brief(header)}")
    t = header.index(target)
    feats = [i for i in range(len(header)) if i != t]
    X = np.empty((len(rows) - 1, len(feats)))
    for r, row in enumerate(rows[1:]):
        if len(row) != len(header):
            raise InputError(f"{path}, line {lines[r + 1]}: {len(row)} fields, the header has {len(header)}")
        for k, i in enumerate(feats):
            X[r, k] = parse_float(row[i].strip(), f"{path}, line {lines[r + 1]}, column {brief(header[i])}")
    cells = [row[t].strip() for row in rows[1:]]
    empty = [line for line, c in zip(lines[1:], cells) if not c]
    if empty:  # else a classifier would learn a class '' (and regression would fail without a line)
        raise InputError(f"{path}, line {empty[0]}: the target {target!r} is empty; every row needs a "
                         f"{'label' if task == 'classification' else 'value'} "
                         f"({len(empty)} row(s) lack one, lines {', '.join(map(str, empty[:5]))}"
                         f"{', ...' if len(empty) > 5 else ''})")
    y = _target_values(cells, task, path)
    return Dataset(X, y, tuple(header[i] for i in feats), tuple(header), t)


def read_npz(path, target: str | None = None) -> Dataset:
    """.npz with arrays X (n, D), y (n,) and optionally feature_names (D,); never unpickles.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "d.npz"
    >>> np.savez(p, X=np.eye(2), y=np.array([0.5, 1.5]), feature_names=np.array(["a", "b"]))
    >>> ds = read_npz(p)
    >>> ds.X.dtype.name, ds.y.tolist(), ds.feature_names
    ('float64', [0.5, 1.5], ('a', 'b'))
    >>> np.savez(p, X=np.array([None, 1], dtype=object), y=np.zeros(2))
    >>> read_npz(p)                                     # object arrays would need pickle: refused
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: cannot read ... as .npz without pickles: ...
    """
    path = Path(path)
    try:
        with open_regular(path, "data file") as f, np.load(f, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except InputError:  # open_regular's own line (not a regular file)
        raise
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path} as .npz without pickles: {exc}") from None
    if target not in (None, "y"):
        raise InputError(f"{path}: .npz files carry the target as array 'y'; omit --target")
    missing = [k for k in ("X", "y") if k not in arrays]
    if missing:
        raise InputError(f"{path} lacks array(s) {missing}; it has {sorted(arrays)}")
    X, y = arrays["X"], arrays["y"]
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise InputError(f"{path}: need X of shape (n, D) and y of shape (n,), got {X.shape} and {y.shape}")
    if not np.issubdtype(X.dtype, np.number):
        raise InputError(f"{path}: X must be numeric, got dtype {X.dtype}")
    if y.dtype.kind in "US":
        empty = np.flatnonzero(np.char.strip(y.astype(str)) == "")
        if empty.size:
            raise InputError(f"{path}: y[{empty[0]}] is an empty label ({empty.size} row(s) of y are "
                             "empty or whitespace); every row needs a label")
    names = None
    if "feature_names" in arrays:
        fn = arrays["feature_names"]
        if fn.shape != (X.shape[1],):
            raise InputError(f"{path}: feature_names must have one entry per column of X ({X.shape[1]})")
        names = tuple(str(v) for v in fn.tolist())
    return Dataset(X.astype(np.float64), y, names, None, None)


def read_data(path, target: str | None = None, task: str = "regression") -> Dataset:
    r"""Dispatch on the suffix: .csv (needs `target`) or .npz.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "train.csv"
    >>> _ = p.write_text("ax,y,ay\n1.0,10,2.0\n3.0,20,4.0\n")
    >>> read_data(p, target="y").X.shape
    (2, 2)
    >>> read_data(p)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: ...: give the target column of the CSV with --target COL
    """
    path = Path(path)
    check_regular(path, "data file")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return read_npz(path, target)
    if suffix in (".csv", ".txt"):
        if target is None:
            raise InputError(f"{path}: give the target column of the CSV with --target COL")
        return read_csv(path, target, task)
    raise InputError(f"{path}: unsupported data format {suffix!r}; use .csv (with a header) or .npz")


def in_model_order(ds: Dataset, names, path) -> np.ndarray:
    r"""``ds.X`` with its columns in the model's order: matched by header name when the model and the
    file both have names (any order, extra columns ignored), else as the file has them.

    For commands that read a labelled table and hand it to a model (`edgeseq report`, the
    calibration rows of `edgeseq export`), so a reordered header never feeds columns by position.

    Raises
    ------
    InputError
        Naming the model's columns the file lacks.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "test.csv"
    >>> _ = p.write_text("ay,y,ax\n2.0,10,1.0\n")
    >>> in_model_order(read_csv(p, "y"), ("ax", "ay"), p).tolist()
    [[1.0, 2.0]]
    >>> in_model_order(read_csv(p, "y"), ("ax", "mic"), p)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: ...: the model's column(s) ['mic'] are not in the file's columns ('ay', 'ax')
    """
    if names is None or ds.feature_names is None:
        return ds.X
    missing = [n for n in names if n not in ds.feature_names]
    if missing:
        raise InputError(f"{path}: the model's column(s) {brief(missing)} are not in the file's columns "
                         f"{brief(ds.feature_names)}")
    return ds.X[:, [ds.feature_names.index(n) for n in names]]


@dataclass
class GroupsFile:
    r"""A checked GROUPS.json: per group its columns of ``Dataset.X``, cost and name.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "train.csv"
    >>> _ = p.write_text("ax,y,ay\n1.0,10,2.0\n3.0,20,4.0\n")
    >>> g = Path(p.parent / "GROUPS.json")
    >>> _ = g.write_text('{"groups": [{"name": "x", "columns": ["ax"], "cost": 1},'
    ...                  ' {"name": "z", "columns": [2], "cost": 3}], "cost_unit": "ms"}')
    >>> spec = read_groups(g, read_csv(p, "y"))
    >>> spec.columns, spec.costs, spec.names, spec.cost_provenance
    ([[0], [1]], [1.0, 3.0], ['x', 'z'], {'cost_unit': 'ms'})
    """

    columns: list[list[int]]  # indices into Dataset.X
    costs: list[float]
    names: list[str]
    # the GROUPS.json "measured_on"/"cost_unit" fields, checked: the estimators' `cost_provenance`
    cost_provenance: dict = field(default_factory=dict)


GROUPS_KEYS = ("groups", "measured_on", "cost_unit")  # what a GROUPS.json document may hold
GROUP_KEYS = ("name", "columns", "cost", "dim")  # what each group may hold


def closest(word: str, known, n: int = 3) -> list[str]:
    """The known names closest to a mistyped one (for "did you mean" hints).

    Examples
    --------
    >>> closest("nmae", ["name", "columns", "cost"])
    ['name']
    """
    import difflib

    return difflib.get_close_matches(str(word), [str(k) for k in known], n=n, cutoff=0.6)


def did_you_mean(word, known) -> str:
    """The "; did you mean ...?" tail of an error message, or "" when nothing is close.

    One wording for every "unknown name" error (GROUPS.json keys and columns, device cost names).

    Examples
    --------
    >>> from edgeseq.io.data import did_you_mean
    >>> did_you_mean("nmae", ["name", "columns"]), did_you_mean("zzz", ["name"])
    ("; did you mean 'name'?", '')
    """
    near = closest(word, known)
    return f"; did you mean {' or '.join(map(repr, near))}?" if near else ""


def _check_keys(obj: dict, allowed, where: str) -> None:
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        k = unknown[0]
        raise GroupSpecError(f"{where}: unknown key {str(k)[:80]!r}{did_you_mean(k, allowed)} "
                             f"(allowed: {', '.join(allowed)})")


def _column_index(ref, ds: Dataset, gname: str) -> int:
    """Map one GROUPS.json column reference (name or 0-based index) to a column of X."""
    cols = ds.source_columns or ds.feature_names
    n_cols = len(cols) if cols is not None else ds.X.shape[1]
    if isinstance(ref, bool) or not isinstance(ref, (int, str)):
        raise GroupSpecError(f"group {brief(gname)}: column {brief(ref)} must be a header name or a 0-based index")
    if isinstance(ref, str):
        if cols is None or ref not in cols:
            if cols is None:
                hint = " (the file has no column names: use 0-based indices)"
            else:
                hint = did_you_mean(ref, cols) or f" (the data has {len(cols)} columns, none named like it)"
            raise GroupSpecError(f"group {brief(gname)}: unknown column {brief(ref)}{hint}")
        idx = cols.index(ref)
    else:
        if not 0 <= ref < n_cols:
            raise GroupSpecError(f"group {brief(gname)}: column index {brief(ref)} is out of range 0..{n_cols - 1}")
        idx = ref
    if ds.target_index is None:
        return idx
    if idx == ds.target_index:
        raise GroupSpecError(f"group {brief(gname)}: column {brief(ref)} is the target; it cannot be a feature")
    return idx - (idx > ds.target_index)


MAX_GROUPS_BYTES = 16 << 20  # a GROUPS.json is small; a larger file is refused unread


def read_groups_doc(path):
    r"""The parsed JSON of a GROUPS.json file, read as a regular file of at most MAX_GROUPS_BYTES.

    The one reader of GROUPS.json text (`read_groups`, ``calibrate --from-device``): a device, FIFO or
    oversized file is refused before it is read, and a UTF-8 byte-order mark is ignored, as in CSV.

    Raises
    ------
    GroupSpecError
        One line: missing, not a regular file, too large, or not valid JSON.

    Examples
    --------
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> g = Path(tempfile.mkdtemp()) / "GROUPS.json"
    >>> _ = g.write_text('{"groups": []}')
    >>> read_groups_doc(g)
    {'groups': []}
    >>> read_groups_doc(os.devnull)
    Traceback (most recent call last):
    ...
    edgeseq.errors.GroupSpecError: groups file /dev/null is a character device, not a regular file; save its content to a file and pass that
    """
    data = read_bounded(path, MAX_GROUPS_BYTES, "groups file", GroupSpecError, hint="is it a GROUPS.json?")
    try:
        return json.loads(data.decode("utf-8-sig"))  # a BOM is ignored, as in CSV
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, 5000-digit ints
        raise GroupSpecError(f"{path} is not valid JSON: {clip(exc)}") from None


def read_groups(path, ds: Dataset) -> GroupsFile:
    r"""Parse and check GROUPS.json against the data set's columns.

    Columns are header names or 0-based indices into the file's columns (the CSV header, target
    included), mapped here to columns of ``ds.X``.

    Raises
    ------
    GroupSpecError
        Naming the group and the problem, with a "did you mean" hint for mistyped names.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "train.csv"
    >>> _ = p.write_text("ax,y,ay\n1.0,10,2.0\n3.0,20,4.0\n")
    >>> g = Path(p.parent / "GROUPS.json")
    >>> _ = g.write_text('{"groups": [{"name": "x", "columns": ["ay", 0], "cost": 2.5}]}')
    >>> read_groups(g, read_csv(p, "y")).columns    # "ay" is X's column 1; header index 0 is X's 0
    [[1, 0]]
    >>> _ = g.write_text('{"groups": [{"name": "x", "columns": ["ayy"], "cost": 1}]}')
    >>> read_groups(g, read_csv(p, "y"))
    Traceback (most recent call last):
    ...
    edgeseq.errors.GroupSpecError: group 'x': unknown column 'ayy'; did you mean 'ay'?
    """
    path = Path(path)
    doc = read_groups_doc(path)
    groups = doc.get("groups") if isinstance(doc, dict) else None
    if not isinstance(groups, list) or not groups:
        raise GroupSpecError(f'{path} must hold {{"groups": [{{"name": ..., "columns": [...], "cost": ...}}, ...]}}')
    _check_keys(doc, GROUPS_KEYS, str(path))
    read_cost_provenance(doc, path)  # checks the fields; the estimator records them
    out = GroupsFile([], [], [], {k: doc[k] for k in ("measured_on", "cost_unit") if k in doc})
    for i, g in enumerate(groups):
        if not isinstance(g, dict):
            raise GroupSpecError(f"{path}: group {i} must be an object with name, columns and cost")
        _check_keys(g, GROUP_KEYS, f"{path}: group {i}")
        name = g.get("name", f"g{i}")
        if not isinstance(name, str) or not name:
            raise GroupSpecError(f"{path}: group {i} has name {brief(name)}; names must be non-empty strings")
        cols = g.get("columns")
        if not isinstance(cols, list) or not cols:
            raise GroupSpecError(f"{path}: group {brief(name)} needs a non-empty list 'columns'")
        cost = g.get("cost")
        try:  # float() of a 400-digit integer overflows
            value = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else math.nan
        except OverflowError:
            value = math.inf
        if not math.isfinite(value) or value <= 0:
            raise GroupSpecError(f"{path}: group {brief(name)} has cost {brief(cost)}; give a positive finite "
                                 "number")
        if "dim" in g and g["dim"] != len(cols):
            raise GroupSpecError(f"{path}: group {brief(name)} says dim {brief(g['dim'])} but lists {len(cols)} "
                                 "columns")
        out.columns.append([_column_index(c, ds, name) for c in cols])
        out.costs.append(value)
        out.names.append(name)
    return out
