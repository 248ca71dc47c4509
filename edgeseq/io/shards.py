"""Training data split over many files ("shards"), each one partition of a Dask statistics pass.

Why: data larger than one machine's memory usually already lives as many files. Each shard becomes
one partition whose statistics task reads the file itself, on its worker, so only the statistics
travel (see :mod:`edgeseq.train.dask_stats`). The client reads nothing but file headers: the .npy header (shape,
dtype) or the CSV header line; CSV row counts are counted by the workers.

Shards are a directory (every ``*.npy`` or ``*.csv`` in it) or a glob pattern, in sorted name order
(zero-pad shard numbers). All shards have the same kind, columns and dtype; the first mismatch is one
error naming the shard.

* ``.npy``: a 2-D numeric array per shard; the target is the column ``--target INDEX`` (default: the
  last column). GROUPS.json column indices count the *feature* columns (the target removed).
* ``.csv``: a header row, the same header in every shard; ``--target NAME``; GROUPS.json refers to
  header names or header indices, as for a single CSV file.
"""

from __future__ import annotations

import csv
import glob
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgeseq.errors import InputError
from edgeseq.io.data import Dataset, read_csv

SUFFIXES = (".npy", ".csv")
MAX_SHARDS = 100_000  # bounds the task graph a bad glob could build


def is_shard_source(source) -> bool:
    """A directory, a glob pattern or a single .npy file: read as shards (single .csv/.npz: not)."""
    text = str(source)
    return Path(text).is_dir() or any(c in text for c in "*?[") or Path(text).suffix.lower() == ".npy"


def find_shards(source) -> list[Path]:
    """The shard files of a directory or glob pattern, sorted by name, all of one kind."""
    text = str(source)
    p = Path(text)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in SUFFIXES)
    elif p.is_file():
        files = [p]
    else:
        files = sorted(Path(f) for f in glob.glob(text) if Path(f).is_file()
                       and Path(f).suffix.lower() in SUFFIXES)
    if not files:
        raise InputError(f"no .npy or .csv shards in {text}")
    if len(files) > MAX_SHARDS:
        raise InputError(f"{text} matches {len(files)} shards; at most {MAX_SHARDS} are supported "
                         "(join small files into fewer shards)")
    kinds = sorted({f.suffix.lower() for f in files})
    if len(kinds) > 1:
        raise InputError(f"{text} mixes {' and '.join(kinds)} shards; use one kind")
    return files


@dataclass
class ShardSet:
    """What the headers say: the files, their kind, columns, dtype and (once known) row counts."""

    paths: list[Path]
    kind: str  # ".npy" or ".csv"
    n_cols: int  # columns per shard, target included
    dtype: np.dtype
    target: int | str  # .npy: column index; .csv: header name
    header: tuple[str, ...] | None  # .csv only
    rows: list[int] | None = None

    @property
    def n_features(self) -> int:
        return self.n_cols - 1

    def layout(self) -> Dataset:
        """A row-less Dataset with the column layout, for checking GROUPS.json (io.data.read_groups)."""
        if self.kind == ".csv":
            t = self.header.index(self.target)
            names = tuple(h for i, h in enumerate(self.header) if i != t)
            return Dataset(np.empty((0, self.n_features)), np.empty(0), names, self.header, t)
        return Dataset(np.empty((0, self.n_features)), np.empty(0), None, None, None)

    def names(self) -> list[str]:
        return [f"shard {p}" for p in self.paths]

    def count_rows(self, client=None) -> list[int]:
        """.npy: from the headers. CSV: each worker counts its shards' data rows (nothing else returns)."""
        if self.rows is None:
            paths = [str(p) for p in self.paths]
            self.rows = client.gather(client.map(_count_csv_rows, paths)) if client is not None \
                else [_count_csv_rows(p) for p in paths]
            empty = [p for p, r in zip(self.paths, self.rows) if r == 0]
            if empty:
                raise InputError(f"shard {empty[0]} has a header but no data rows")
        return self.rows

    def partitions(self, client=None) -> list:
        """[(loader, first row, rows)] per shard: each statistics task reads its own shard on its worker."""
        rows = self.count_rows(client)
        starts = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(int).tolist()
        return [(ShardLoader(str(p), self.kind, self.target, self.n_cols), a, n)
                for p, a, n in zip(self.paths, starts, rows)]


@dataclass(frozen=True)
class ShardLoader:
    """Reads one shard as (X, y) where it is called (a few bytes to send; the rows stay on the worker)."""

    path: str
    kind: str
    target: int | str
    n_cols: int

    def __call__(self):
        return (_load_npy if self.kind == ".npy" else _load_csv)(self.path, self.target, self.n_cols)


def open_shards(source, target: str | None) -> ShardSet:
    """Find the shards and check their headers agree; no rows are read here."""
    paths = find_shards(source)
    return _open_npy(paths, target) if paths[0].suffix.lower() == ".npy" else _open_csv(paths, target)


def _npy_header(path: Path):
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = {(1, 0): np.lib.format.read_array_header_1_0,
                    (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read is None:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = read(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read shard {path} as .npy: {exc}") from None
    return shape, dtype


def _open_npy(paths: list[Path], target) -> ShardSet:
    first_shape, first_dtype = _npy_header(paths[0])
    rows = []
    for path in paths:
        shape, dtype = _npy_header(path)
        if len(shape) != 2:
            raise InputError(f"shard {path}: need a 2-D array (rows, columns with the target), got shape {shape}")
        if dtype.kind not in "iuf":
            raise InputError(f"shard {path}: dtype {dtype} is not a real number type")
        if shape[1] != first_shape[1]:
            raise InputError(f"shard {path} has {shape[1]} columns, shard {paths[0]} has {first_shape[1]}")
        if dtype != first_dtype:
            raise InputError(f"shard {path} has dtype {dtype}, shard {paths[0]} has {first_dtype}; "
                             "write every shard with the same dtype")
        if shape[0] == 0:
            raise InputError(f"shard {path} has no rows")
        rows.append(int(shape[0]))
    n_cols = int(first_shape[1])
    if n_cols < 2:
        raise InputError(f"shard {paths[0]}: need at least one feature column and the target column")
    if target is None:
        t = n_cols - 1
    else:
        try:
            t = int(target)
        except ValueError:
            raise InputError(f".npy shards have no column names: --target must be a column index, "
                             f"got {target!r}") from None
        if not 0 <= t < n_cols:
            raise InputError(f"--target {t} is out of range 0..{n_cols - 1} for the shards' columns")
    return ShardSet(paths, ".npy", n_cols, first_dtype, t, None, rows)


def _csv_header(path: Path) -> tuple[str, ...]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            first = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read shard {path}: {exc}") from None
    if not first:
        raise InputError(f"shard {path} has no header row")
    return tuple(h.strip() for h in first)


def _open_csv(paths: list[Path], target) -> ShardSet:
    header = _csv_header(paths[0])
    for path in paths[1:]:
        other = _csv_header(path)
        if other != header:
            raise InputError(f"shard {path} has header {list(other)[:8]}..., shard {paths[0]} has "
                             f"{list(header)[:8]}...; every CSV shard needs the same columns")
    if target is None:
        raise InputError("give the target column of the CSV shards with --target COL")
    if target not in header:
        raise InputError(f"shard {paths[0]}: target column {target!r} is not in the header {list(header)}")
    return ShardSet(paths, ".csv", len(header), np.dtype(np.float64), target, header)


# ---------------------------------------------------------------- run on the workers
def _load_npy(path: str, t: int, n_cols: int):
    arr = np.load(path, mmap_mode="r", allow_pickle=False)
    if arr.ndim != 2 or arr.shape[1] != n_cols:
        raise InputError(f"shard {path} changed since it was opened: shape {arr.shape}")
    X = arr[:, :t] if t == n_cols - 1 else np.delete(arr, t, axis=1)  # a view of the file when the target is last
    return X, np.asarray(arr[:, t], dtype=np.float64)


def _load_csv(path: str, target: str, n_cols: int):
    ds = read_csv(path, target)  # its errors name the file, line and column
    return ds.X, ds.y


def _count_csv_rows(path: str) -> int:
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            return max(0, sum(1 for row in csv.reader(fh) if row) - 1)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read shard {path}: {exc}") from None
