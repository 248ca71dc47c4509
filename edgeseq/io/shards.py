"""Training data split over many files ("shards"), each one partition of a Dask statistics pass.

Why: data larger than one machine's memory usually already lives as many files. Each shard becomes
one partition whose statistics task reads the file itself, on its worker, so only the statistics
travel (see :mod:`edgeseq.train.distributed.stats`). The client reads nothing but file headers: the .npy header (shape,
dtype) or the CSV header line; CSV row counts are counted by the workers.

Shards are a directory (every ``*.npy``, ``*.csv`` or ``*.parquet`` in it) or a glob pattern, in sorted name order
(zero-pad shard numbers). All shards have the same kind, columns and dtype; the first mismatch is one
error naming the shard.

* ``.npy``: a 2-D numeric array per shard; the target is the column ``--target INDEX`` (default: the
  last column). GROUPS.json column indices count the *feature* columns (the target removed).
* ``.csv``: a header row, the same header in every shard; ``--target NAME``; GROUPS.json refers to
  header names or header indices, as for a single CSV file.
* ``.parquet`` (the optional ``parquet`` extra, pyarrow): numeric columns, the same names and types in
  every shard; ``--target NAME``; GROUPS.json as for CSV. Row counts and the schema come from each
  file's footer, so the client reads no rows; a null cell is reported like a NaN (shard, row, column).
"""

from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgeseq.errors import InputError
from edgeseq.io.bounded import check_regular, open_regular
from edgeseq.io.data import Dataset, iter_csv_rows, read_csv
from edgeseq.messages import brief, clip

SUFFIXES = (".npy", ".csv", ".parquet")
MAX_SHARDS = 100_000  # bounds the task graph a bad glob could build


def is_shard_source(source) -> bool:
    """A directory, a glob pattern or a single .npy file: read as shards (single .csv/.npz: not).

    Decided from the text alone (plus whether a directory exists), before anything is read.

    Examples
    --------
    >>> import tempfile
    >>> is_shard_source(tempfile.mkdtemp()), is_shard_source("data/part_*.npy"), is_shard_source("x.npy")
    (True, True, True)
    >>> is_shard_source("train.csv"), is_shard_source("train.npz")
    (False, False)
    """
    text = str(source)
    return Path(text).is_dir() or any(c in text for c in "*?[") or Path(text).suffix.lower() in (".npy", ".parquet")


def find_shards(source) -> list[Path]:
    r"""The shard files of a directory or glob pattern, sorted by name, all of one kind.

    Raises
    ------
    InputError
        When nothing matches, too many files match, or kinds (.npy, .csv, .parquet) are mixed.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> for name in ("p10.csv", "p02.csv", "notes.txt"):
    ...     _ = (d / name).write_text("x,t\n1,2\n")
    >>> [p.name for p in find_shards(d)]          # name order (zero-pad numbers); other files ignored
    ['p02.csv', 'p10.csv']
    >>> [p.name for p in find_shards(d / "p1*.csv")]
    ['p10.csv']
    """
    text = str(source)
    p = Path(text)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix.lower() in SUFFIXES)
    elif p.exists() and not any(c in text for c in "*?["):
        files = [p]  # one file named on purpose: a link is followed, as for any path the user types
    else:
        files = sorted(Path(f) for f in glob.glob(text) if Path(f).suffix.lower() in SUFFIXES)
    if not files:
        raise InputError(f"no .npy, .csv or .parquet shards in {text}")
    if len(files) > MAX_SHARDS:
        raise InputError(f"{text} matches {len(files)} shards; at most {MAX_SHARDS} are supported "
                         "(join small files into fewer shards)")
    kinds = sorted({f.suffix.lower() for f in files})
    if len(kinds) > 1:
        raise InputError(f"{text} mixes {' and '.join(kinds)} shards; use one kind")
    for f in files:  # every entry is a shard or an error: none is skipped silently
        check_regular(f, "shard")
        if f is not p:
            _check_link(f)
    return files


def _check_link(f: Path) -> None:
    """A shard found by listing a directory or a pattern may be a symbolic link only to a file in its own
    directory: a link elsewhere would make the training set depend on files nobody listed."""
    if f.is_symlink():
        home, target = os.path.realpath(f.parent), os.path.realpath(f)
        if os.path.commonpath([home, target]) != home:
            raise InputError(f"shard {f} is a symbolic link to {brief(target)}, outside its directory {f.parent}; "
                             f"copy or move the file into the directory, or pass the shards where they are")


@dataclass
class ShardSet:
    """What the headers say: the files, their kind, columns, dtype and (once known) row counts.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> d = Path(tempfile.mkdtemp())
    >>> np.save(d / "part_0.npy", np.arange(6.0).reshape(2, 3))      # 2 rows: 2 features + target
    >>> np.save(d / "part_1.npy", np.arange(6.0, 15.0).reshape(3, 3))
    >>> shards = open_shards(d, None)
    >>> shards.kind, shards.n_cols, shards.target, shards.rows         # .npy rows come from the headers
    ('.npy', 3, 2, [2, 3])
    """

    paths: list[Path]
    kind: str  # ".npy", ".csv" or ".parquet"
    n_cols: int  # columns per shard, target included
    dtype: np.dtype
    target: int | str  # .npy: column index; .csv: header name
    header: tuple[str, ...] | None  # column names (.csv, .parquet)
    rows: list[int] | None = None

    @property
    def n_features(self) -> int:
        """Feature columns per shard: every column but the target.

        Examples
        --------
        >>> import tempfile
        >>> from pathlib import Path
        >>> import numpy as np
        >>> d = Path(tempfile.mkdtemp())
        >>> np.save(d / "part_0.npy", np.arange(6.0).reshape(2, 3))      # 2 rows: 2 features + target
        >>> np.save(d / "part_1.npy", np.arange(6.0, 15.0).reshape(3, 3))
        >>> shards = open_shards(d, None)
        >>> shards.n_features
        2
        """
        return self.n_cols - 1

    def layout(self) -> Dataset:
        r"""A row-less Dataset with the column layout, for checking GROUPS.json (io.data.read_groups).

        Examples
        --------
        >>> import tempfile
        >>> from pathlib import Path
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "a.csv").write_text("x,y,t\n1,2,3\n")
        >>> _ = (d / "b.csv").write_text("x,y,t\n4,5,6\n7,8,9\n")
        >>> shards = open_shards(d, "t")
        >>> ds = shards.layout()
        >>> ds.X.shape, ds.feature_names, ds.source_columns, ds.target_index
        ((0, 2), ('x', 'y'), ('x', 'y', 't'), 2)
        """
        if self.header is not None:
            t = self.header.index(self.target)
            names = tuple(h for i, h in enumerate(self.header) if i != t)
            return Dataset(np.empty((0, self.n_features)), np.empty(0), names, self.header, t)
        return Dataset(np.empty((0, self.n_features)), np.empty(0), None, None, None)

    def names(self) -> list[str]:
        r"""One label per shard ("shard <path>"), for messages about a partition.

        Examples
        --------
        >>> import tempfile
        >>> from pathlib import Path
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "a.csv").write_text("x,y,t\n1,2,3\n")
        >>> _ = (d / "b.csv").write_text("x,y,t\n4,5,6\n7,8,9\n")
        >>> shards = open_shards(d, "t")
        >>> [n.rsplit("/", 1)[-1] for n in shards.names()]
        ['a.csv', 'b.csv']
        >>> shards.names()[0].startswith("shard ")
        True
        """
        return [f"shard {p}" for p in self.paths]

    def count_rows(self, client=None) -> list[int]:
        r""".npy: from the headers. CSV: each worker counts its shards' data rows (nothing else returns).

        Parameters
        ----------
        client : dask.distributed.Client, optional
            Counts on the workers; without one, counted here.

        Examples
        --------
        >>> import tempfile
        >>> from pathlib import Path
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "a.csv").write_text("x,y,t\n1,2,3\n")
        >>> _ = (d / "b.csv").write_text("x,y,t\n4,5,6\n7,8,9\n")
        >>> shards = open_shards(d, "t")
        >>> shards.rows is None, shards.count_rows(), shards.rows
        (True, [1, 2], [1, 2])
        """
        if self.rows is None:
            paths = [str(p) for p in self.paths]
            self.rows = client.gather(client.map(_count_csv_rows, paths)) if client is not None \
                else [_count_csv_rows(p) for p in paths]
            empty = [p for p, r in zip(self.paths, self.rows) if r == 0]
            if empty:
                raise InputError(f"shard {empty[0]} has a header but no data rows")
        return self.rows

    def partitions(self, client=None) -> list:
        r"""[(loader, first row, rows)] per shard: each statistics task reads its own shard on its worker.

        Examples
        --------
        >>> import tempfile
        >>> from pathlib import Path
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "a.csv").write_text("x,y,t\n1,2,3\n")
        >>> _ = (d / "b.csv").write_text("x,y,t\n4,5,6\n7,8,9\n")
        >>> shards = open_shards(d, "t")
        >>> parts = shards.partitions()
        >>> [(start, n) for _, start, n in parts]
        [(0, 1), (1, 2)]
        >>> X, y = parts[1][0]()                       # what a worker does
        >>> X.tolist(), y.tolist()
        ([[4.0, 5.0], [7.0, 8.0]], [6.0, 9.0])
        """
        rows = self.count_rows(client)
        starts = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(int).tolist()
        return [(ShardLoader(str(p), self.kind, self.target, self.n_cols), a, n)
                for p, a, n in zip(self.paths, starts, rows)]


@dataclass(frozen=True)
class ShardLoader:
    """Reads one shard as (X, y) where it is called (a few bytes to send; the rows stay on the worker).

    Examples
    --------
    >>> import pickle, tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> p = Path(tempfile.mkdtemp()) / "s.npy"
    >>> np.save(p, np.array([[1.0, 9.0, 2.0]]))
    >>> loader = ShardLoader(str(p), ".npy", 1, 3)                    # target: column 1
    >>> len(pickle.dumps(loader)) < 300                             # cheap to send to a worker
    True
    >>> X, y = loader()
    >>> X.tolist(), y.tolist()
    ([[1.0, 2.0]], [9.0])
    """

    path: str
    kind: str
    target: int | str
    n_cols: int

    def __call__(self):
        return _LOADERS[self.kind](self.path, self.target, self.n_cols)


def open_shards(source, target: str | None) -> ShardSet:
    r"""Find the shards and check their headers agree; no rows are read here.

    Parameters
    ----------
    source : str or Path
        A directory or a glob pattern (or one .npy file).
    target : str or None
        .npy: the target's column index as text (default: the last column); .csv: its header name.

    Raises
    ------
    InputError
        Naming the first shard whose kind, columns or dtype disagree with the first one.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> d = Path(tempfile.mkdtemp())
    >>> np.save(d / "part_0.npy", np.arange(6.0).reshape(2, 3))      # 2 rows: 2 features + target
    >>> np.save(d / "part_1.npy", np.arange(6.0, 15.0).reshape(3, 3))
    >>> shards = open_shards(d, None)
    >>> open_shards(d, "0").target                 # the target may be any column
    0
    >>> np.save(d / "part_2.npy", np.zeros((1, 4)))
    >>> open_shards(d, None)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: shard ...part_2.npy has 4 columns, shard ...part_0.npy has 3
    """
    paths = find_shards(source)
    opener = {".npy": _open_npy, ".csv": _open_csv, ".parquet": _open_parquet}[paths[0].suffix.lower()]
    return opener(paths, target)


def _npy_header(path: Path):
    """(shape, dtype) from the header, checked against the file's size: a .npy file holds exactly
    header + rows x columns x itemsize bytes, so a header claiming more rows than the file holds is
    refused here rather than failing later in a worker's memory map."""
    try:
        with open_regular(path, "shard") as fh:
            version = np.lib.format.read_magic(fh)
            read = {(1, 0): np.lib.format.read_array_header_1_0,
                    (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read is None:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = read(fh)
            data_bytes = os.fstat(fh.fileno()).st_size - fh.tell()
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read shard {path} as .npy: {clip(exc)}") from None
    claimed = math.prod(shape) * dtype.itemsize
    if claimed != data_bytes:
        raise InputError(f"shard {path}: its header says shape {brief(shape)} of {dtype} ({claimed:,} bytes of data), "
                         f"the file holds {data_bytes:,}; it is truncated or was not written by numpy.save")
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
    rows = iter_csv_rows(path, "shard")
    try:
        first = next(rows, None)
    finally:
        rows.close()
    if first is None:
        raise InputError(f"shard {path} has no header row")
    return tuple(h.strip() for h in first[1])


def _open_csv(paths: list[Path], target) -> ShardSet:
    header = _csv_header(paths[0])
    for path in paths[1:]:
        other = _csv_header(path)
        if other != header:
            raise InputError(f"shard {path} has header {brief(list(other))}, shard {paths[0]} has "
                             f"{brief(list(header))}; every CSV shard needs the same columns")
    if target is None:
        raise InputError("give the target column of the CSV shards with --target COL")
    if target not in header:
        raise InputError(f"shard {paths[0]}: target column {brief(target)} is not in the header {brief(list(header))}")
    return ShardSet(paths, ".csv", len(header), np.dtype(np.float64), target, header)


def _parquet():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("Parquet shards need pyarrow: pip install 'edgeseq[parquet]'") from None
    return pq


def _parquet_schema(path: Path) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """(column names, type names, rows) from the file's footer; no row is read."""
    pq = _parquet()
    try:
        meta = pq.ParquetFile(path).metadata
        schema = meta.schema.to_arrow_schema()
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid/ArrowIOError derive from these
        raise InputError(f"cannot read shard {path} as Parquet: {clip(exc)}") from None
    import pyarrow.types as pt

    for field in schema:
        if not (pt.is_integer(field.type) or pt.is_floating(field.type)) or pt.is_float16(field.type):
            raise InputError(f"shard {path}: column {brief(field.name)} has type {field.type}; every column must "
                             f"be an integer or float32/float64 number")
    return tuple(schema.names), tuple(str(f.type) for f in schema), int(meta.num_rows)


def _open_parquet(paths: list[Path], target) -> ShardSet:
    names, types, _ = _parquet_schema(paths[0])
    rows = []
    for path in paths:
        other, other_types, n = _parquet_schema(path)
        if other != names:
            raise InputError(f"shard {path} has columns {list(other)[:8]}..., shard {paths[0]} has "
                             f"{list(names)[:8]}...; every Parquet shard needs the same columns in the same order")
        if other_types != types:
            k = next(i for i, (a, b) in enumerate(zip(other_types, types)) if a != b)
            raise InputError(f"shard {path}: column {brief(names[k])} is {other_types[k]}, in shard {paths[0]} "
                             f"{types[k]}; write every shard with the same types")
        if n == 0:
            raise InputError(f"shard {path} has no rows")
        rows.append(n)
    if len(set(names)) != len(names):
        raise InputError(f"shard {paths[0]}: column names repeat; every column needs its own name")
    if target is None:
        raise InputError("give the target column of the Parquet shards with --target COL")
    if target not in names:
        raise InputError(f"shard {paths[0]}: target column {brief(target)} is not among its columns "
                         f"{list(names)[:12]}")
    if len(names) < 2:
        raise InputError(f"shard {paths[0]}: need at least one feature column and the target column")
    return ShardSet(paths, ".parquet", len(names), np.dtype(np.float64), target, names, rows)


# ---------------------------------------------------------------- run on the workers
def _load_npy(path: str, t: int, n_cols: int):
    check_regular(path, "shard")  # a memory map needs a path: checked again here, on the worker
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read shard {path} as .npy: {clip(exc)}") from None
    if arr.ndim != 2 or arr.shape[1] != n_cols:
        raise InputError(f"shard {path} changed since it was opened: shape {arr.shape}")
    X = arr[:, :t] if t == n_cols - 1 else np.delete(arr, t, axis=1)  # a view of the file when the target is last
    return X, np.asarray(arr[:, t], dtype=np.float64)


def _load_csv(path: str, target: str, n_cols: int):
    ds = read_csv(path, target)  # its errors name the file, line and column
    return ds.X, ds.y


def _load_parquet(path: str, target: str, n_cols: int):
    table = _parquet().read_table(path)
    if table.num_columns != n_cols:
        raise InputError(f"shard {path} changed since it was opened: {table.num_columns} columns")
    # a null becomes NaN, which the statistics pass reports by shard, row and column
    cols = [np.asarray(c.to_numpy(zero_copy_only=False), dtype=np.float64) for c in table.columns]
    t = table.column_names.index(target)
    return np.column_stack([c for i, c in enumerate(cols) if i != t]), cols[t]


_LOADERS = {".npy": _load_npy, ".csv": _load_csv, ".parquet": _load_parquet}


def _count_csv_rows(path: str) -> int:
    return max(0, sum(1 for _ in iter_csv_rows(path, "shard")) - 1)
