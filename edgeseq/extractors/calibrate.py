"""Measure what each feature group really costs, and write it down with where it was measured.

Costs drive the whole sequencing, so guessed costs give a wrong order. Here every group's extractor
is timed single-threaded (BLAS/OpenMP pools limited to one thread), after a warm-up, as the median
over repeats of the mean time per item, and written to a GROUPS.json that `edgeseq train --groups`
reads::

    {"groups": [{"name": "hog", "columns": [0, 1, ...], "cost": 12.5, "dim": 36}, ...],
     "cost_unit": "microseconds per item",
     "measured_on": {"machine": ..., "cpu": ..., "python": ..., "versions": {...}, "date": ..., "threads": 1}}

**The bank protocol.** A *bank* is an ordered collection of named extractors. Each extractor is a
callable taking ONE input item (e.g. an image as a numpy array) and returning a 1-D array of floats
whose length never depends on the item. Accepted forms (see :func:`as_bank`): a mapping
``{name: callable}``, a sequence of ``(name, callable)`` pairs or :class:`Extractor` objects, or a
zero-argument factory returning one of those. Columns of the feature matrix are laid out group after
group, in bank order.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from edgeseq.errors import GroupSpecError, InputError, ModelFormatError
from edgeseq.io.atomic import atomic_write_text

COST_UNIT = "microseconds per item"
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
_VERSIONED = ("numpy", "scipy", "scikit-learn", "scikit-image", "edgeseq")


@dataclass(frozen=True)
class Extractor:
    """One feature group: a name and a callable mapping one item to a fixed-length 1-D float array.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.extractors.calibrate import Extractor
    >>> mean = Extractor("mean", lambda img: [float(np.mean(img))])
    >>> mean.name, mean.fn(np.array([[1.0, 3.0]]))
    ('mean', [2.0])
    """

    name: str
    fn: Callable[[object], np.ndarray]


def as_bank(obj) -> tuple[Extractor, ...]:
    """Normalise any accepted bank form to a tuple of :class:`Extractor` (see the module docstring).

    Raises
    ------
    InputError, GroupSpecError
        An unusable form, an empty bank, a non-callable entry, or bad or repeated names.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.extractors.calibrate import as_bank
    >>> [e.name for e in as_bank({"mean": np.mean, "max": np.max})]
    ['mean', 'max']
    >>> as_bank([("a", np.mean), ("a", np.max)])
    Traceback (most recent call last):
    ...
    edgeseq.errors.GroupSpecError: extractor names must be unique; repeated: ['a']
    """
    if callable(obj) and not isinstance(obj, (Mapping, Sequence)):
        try:
            obj = obj()
        except Exception as exc:  # the user's factory: report it as bad input, not a crash
            raise InputError(f"the bank factory {getattr(obj, '__name__', obj)!r} raised "
                             f"{type(exc).__name__}: {exc}") from exc
    if isinstance(obj, Mapping):
        items = list(obj.items())
    elif isinstance(obj, (list, tuple)):
        items = []
        for i, e in enumerate(obj):
            if isinstance(e, Extractor):
                items.append((e.name, e.fn))
            elif isinstance(e, (list, tuple)) and len(e) == 2:
                items.append(tuple(e))
            else:
                raise InputError(f"bank entry {i} must be an Extractor or a (name, callable) pair, got {e!r}")
    else:
        raise InputError(f"a bank must be a mapping name -> callable, a list of (name, callable) pairs, "
                         f"or a factory returning one; got {type(obj).__name__}")
    if not items:
        raise InputError("the bank is empty: give at least one extractor")
    names = [n for n, _ in items]
    for n, fn in items:
        if not isinstance(n, str) or not n or "\x00" in n:
            raise GroupSpecError(f"extractor names must be non-empty strings without NUL, got {n!r}")
        if not callable(fn):
            raise InputError(f"extractor {n!r} is not callable")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise GroupSpecError(f"extractor names must be unique; repeated: {dup}")
    return tuple(Extractor(n, fn) for n, fn in items)


def _as_row(name: str, value) -> np.ndarray:
    row = np.asarray(value, dtype=np.float64).reshape(-1)
    if row.size == 0:
        raise InputError(f"extractor {name!r} returned no features")
    if not np.all(np.isfinite(row)):
        raise InputError(f"extractor {name!r} returned NaN or Inf; extractors must return finite floats")
    return row


def _apply(e: Extractor, item, index: int):
    """One extractor on one item; its own exceptions become an InputError naming it and the item."""
    try:
        value = e.fn(item)
    except Exception as exc:
        raise InputError(f"extractor {e.name!r} raised {type(exc).__name__} on item {index}: {exc}") from exc
    return _as_row(e.name, value)


def group_block(e: Extractor, items: Sequence) -> np.ndarray:
    """One group's features of every item, (n_items, dim); refuses a width that varies between items.

    Raises
    ------
    InputError
        The extractor raised, returned non-finite values, or widths that differ between items.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.extractors.calibrate import Extractor, group_block
    >>> stats = Extractor("stats", lambda v: [min(v), max(v)])
    >>> group_block(stats, [[1, 5], [2, 3, 9]]).tolist()
    [[1.0, 5.0], [2.0, 9.0]]
    >>> group_block(Extractor("head", lambda v: v[:2]), [[1, 5], [2]])
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: extractor 'head' returned different lengths [1, 2] for different items (2 for item 0, 1 for item 1); a group's dimension must be fixed
    """
    rows = [_apply(e, it, i) for i, it in enumerate(items)]
    dims = {r.size for r in rows}
    if len(dims) != 1:
        first = next(i for i, r in enumerate(rows) if r.size != rows[0].size)
        raise InputError(f"extractor {e.name!r} returned different lengths {sorted(dims)} for "
                         f"different items ({rows[0].size} for item 0, {rows[first].size} for item "
                         f"{first}); a group's dimension must be fixed")
    return np.vstack(rows)


def column_names(doc_or_columns, names: Sequence[str] | None = None) -> list[str]:
    """Header names ``<group>_<k>`` for the feature columns, in column order (unique: k is an integer).

    Examples
    --------
    >>> from edgeseq.extractors.calibrate import column_names
    >>> column_names([[0, 1], [2]], ["hist", "edges"])
    ['hist_0', 'hist_1', 'edges_0']
    >>> column_names({"groups": [{"name": "a", "columns": [0]}, {"name": "b", "columns": [1, 2]}]})
    ['a_0', 'b_0', 'b_1']
    """
    if isinstance(doc_or_columns, Mapping):
        groups = doc_or_columns["groups"]
        names, doc_or_columns = [g["name"] for g in groups], [g["columns"] for g in groups]
    out = {}
    for n, cols in zip(names, doc_or_columns):
        for k, c in enumerate(cols):
            out[c] = f"{n}_{k}"
    return [out[c] for c in sorted(out)]


def extract(bank, items: Iterable, progress: Callable[[str], None] | None = None):
    """Apply every extractor to every item: returns ``(X, columns)``, X of shape (n_items, D).

    ``columns[k]`` lists the column indices of group k (contiguous, in bank order).

    Raises
    ------
    InputError
        No items, or an extractor failed (see `group_block`).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.extractors.calibrate import extract
    >>> X, columns = extract({"mean": lambda v: [np.mean(v)], "ends": lambda v: [v[0], v[-1]]},
    ...                      [np.array([1.0, 2.0, 3.0]), np.array([4.0, 4.0, 7.0])])
    >>> X.tolist(), columns
    ([[2.0, 1.0, 3.0], [5.0, 4.0, 7.0]], [[0], [1, 2]])
    """
    bank = as_bank(bank)
    items = list(items)
    if not items:
        raise InputError("no input items to extract features from")
    blocks, columns, start = [], [], 0
    for e in bank:
        block = group_block(e, items)
        blocks.append(block)
        columns.append(list(range(start, start + block.shape[1])))
        start += block.shape[1]
        if progress:
            progress(f"extracted {e.name} ({block.shape[1]} features)")
    return np.hstack(blocks), columns


@contextmanager
def single_threaded():
    """Limit BLAS/OpenMP pools to one thread (threadpoolctl) and set the usual env vars meanwhile.

    Costs measured with several threads would not be the costs of a single-core device, and would
    depend on the machine's load; timing under this context keeps them comparable.

    Examples
    --------
    >>> import os
    >>> from edgeseq.extractors.calibrate import single_threaded
    >>> before = os.environ.get("OMP_NUM_THREADS")
    >>> with single_threaded():
    ...     print(os.environ["OMP_NUM_THREADS"])
    1
    >>> os.environ.get("OMP_NUM_THREADS") == before  # restored afterwards
    True
    """
    from threadpoolctl import threadpool_limits

    saved = {k: os.environ.get(k) for k in _THREAD_VARS}
    os.environ.update({k: "1" for k in _THREAD_VARS})
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _check_passes(repeats: int, warmup: int) -> None:
    if repeats < 1 or warmup < 0:
        raise InputError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")


def time_per_item(fn: Callable, items: Sequence, repeats: int = 5, warmup: int = 1) -> float:
    """Median over `repeats` of (wall time of one pass over `items`) / len(items), in seconds.

    The median makes one slow pass (a page fault, another process) change nothing.

    Raises
    ------
    InputError
        ``repeats < 1`` or ``warmup < 0``.

    Examples
    --------
    >>> import time
    >>> from edgeseq.extractors.calibrate import time_per_item
    >>> t = time_per_item(lambda item: time.sleep(0.001), [1, 2], repeats=3, warmup=0)
    >>> 0.001 <= t < 1.0  # seconds per item: at least the sleep
    True
    """
    _check_passes(repeats, warmup)
    for _ in range(warmup):
        for it in items:
            fn(it)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for it in items:
            fn(it)
        samples.append((time.perf_counter() - t0) / len(items))
    return float(statistics.median(samples))


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict:
    """Where and with what the costs were measured (shown wherever costs are shown).

    Examples
    --------
    >>> from edgeseq.extractors.calibrate import machine_info
    >>> info = machine_info()
    >>> sorted(info), info["threads"], "numpy" in info["versions"]
    (['cpu', 'date', 'machine', 'python', 'threads', 'versions'], 1, True)
    """
    versions = {}
    for dist in _VERSIONED:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return {
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
        "cpu": _cpu_name(),
        "python": platform.python_version(),
        "versions": versions,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "threads": 1,
    }


def calibrate_bank(bank, samples: Sequence, repeats: int = 5, warmup: int = 1,
              progress: Callable[[str], None] | None = None) -> dict:
    """Time every extractor of `bank` on `samples`; return the GROUPS.json document (a dict).

    Costs are in microseconds per item. The feature layout (`columns`) is the one :func:`extract`
    produces for the same bank.

    Raises
    ------
    InputError
        No samples, bad repeats/warmup, or an extractor that fails or varies in width.

    Examples
    --------
    A dearer extractor gets a larger cost; the layout is `extract`'s:

    >>> import numpy as np
    >>> from edgeseq.extractors.calibrate import calibrate_bank
    >>> bank = {"cheap": lambda v: [v[0]], "dear": lambda v: np.sort(np.tile(v, 300))[:2]}
    >>> doc = calibrate_bank(bank, [np.arange(50.0)] * 5, repeats=3)
    >>> [(g["name"], g["columns"]) for g in doc["groups"]], doc["cost_unit"]
    ([('cheap', [0]), ('dear', [1, 2])], 'microseconds per item')
    >>> doc["groups"][1]["cost"] > doc["groups"][0]["cost"]
    True
    """
    bank = as_bank(bank)
    samples = list(samples)
    if not samples:
        raise InputError("calibration needs at least one sample input")
    _check_passes(repeats, warmup)
    groups, start = [], 0
    with single_threaded():
        for e in bank:
            # every sample, not just the first: a varying width must fail here, before anything is written
            dim = group_block(e, samples).shape[1]
            try:
                cost = time_per_item(e.fn, samples, repeats=repeats, warmup=warmup) * 1e6
            except Exception as exc:
                raise InputError(f"extractor {e.name!r} raised {type(exc).__name__} while being timed: "
                                 f"{exc}") from exc
            if not cost > 0:
                raise InputError(f"extractor {e.name!r} measured a non-positive time; use more samples")
            groups.append({"name": e.name, "columns": list(range(start, start + dim)),
                           "cost": float(f"{cost:.6g}"), "dim": dim})
            start += dim
            if progress:
                progress(f"{e.name}: {cost:.4g} us/item ({dim} features)")
    info = machine_info()
    info.update({"n_samples": len(samples), "repeats": repeats, "warmup": warmup})
    return {"groups": groups, "cost_unit": COST_UNIT, "measured_on": info}


def write_groups_json(doc: dict, path) -> Path:
    """Write a calibration document as pretty JSON (creating parent directories).

    Examples
    --------
    >>> from edgeseq.extractors.calibrate import read_calibration, write_groups_json
    >>> doc = {"groups": [{"name": "a", "columns": [0], "cost": 1.5, "dim": 1}], "cost_unit": "us"}
    >>> import tempfile
    >>> path = write_groups_json(doc, tempfile.mkdtemp() + "/cal/GROUPS.json")
    >>> read_calibration(path) == doc
    True
    """
    path = Path(path)
    parts = []
    for key, value in doc.items():
        if key == "groups":  # one group a line: readable diffs of stored costs
            value_text = "[\n  " + ",\n  ".join(json.dumps(g) for g in value) + "\n ]"
        else:
            value_text = json.dumps(value, indent=1).replace("\n", "\n ")
        parts.append(f" {json.dumps(key)}: {value_text}")
    atomic_write_text(path, "{\n" + ",\n".join(parts) + "\n}\n", make_parents=True)
    return path


def read_calibration(path, bank=None, sample=None) -> dict:
    """Load a GROUPS.json written by :func:`calibrate`, checking it (and, given a bank, that it fits).

    A stored file that no longer matches the bank is refused rather than silently mis-assigning
    costs: recalibrate instead. Given `bank`, the group names and order must match; given `sample`
    too (one input item), every group's stored width ('columns', and 'dim' when present) must equal
    what the bank extracts from it now, laid out group after group — a changed dimension is caught.

    Raises
    ------
    ModelFormatError
        Unreadable or malformed file, or one that does not match `bank` / `sample`.

    Examples
    --------
    A stored file whose widths no longer match the bank is refused:

    >>> import numpy as np
    >>> from edgeseq.extractors.calibrate import read_calibration, write_groups_json
    >>> doc = {"groups": [{"name": "ends", "columns": [0, 1], "cost": 2.0}]}
    >>> import tempfile
    >>> path = write_groups_json(doc, tempfile.mkdtemp() + "/GROUPS.json")
    >>> read_calibration(path, bank={"ends": lambda v: [v[0], v[-1]]}, sample=[1, 2, 3])["groups"][0]["cost"]
    2.0
    >>> read_calibration(path, bank={"ends": lambda v: [v[0]]}, sample=[1, 2, 3])
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: ...GROUPS.json: group 'ends' is stored as 2 columns 0..1, but the bank now extracts 1 features at columns 0..0; a dimension changed: recalibrate (e.g. --recalibrate)
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"cannot read calibration file {path}: {exc}") from exc
    groups = doc.get("groups") if isinstance(doc, dict) else None
    if not isinstance(groups, list) or not groups:
        raise ModelFormatError(f"{path}: expected an object with a non-empty 'groups' list")
    for i, g in enumerate(groups):
        if not isinstance(g, dict) or not {"name", "columns", "cost"} <= g.keys():
            raise ModelFormatError(f"{path}: group {i} needs 'name', 'columns' and 'cost'")
        c = g["cost"]
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not np.isfinite(c) or c <= 0:
            raise ModelFormatError(f"{path}: group {g['name']!r} has cost {c!r}; costs must be positive")
        if not isinstance(g["columns"], list) or "dim" in g and g["dim"] != len(g["columns"]):
            raise ModelFormatError(f"{path}: group {g['name']!r} says dim {g.get('dim')!r} but lists "
                                   f"columns {g['columns']!r}")
    if bank is not None:
        bank = as_bank(bank)
        want = [e.name for e in bank]
        have = [g["name"] for g in groups]
        if want != have:
            raise ModelFormatError(f"{path} was measured for groups {have}, but the bank has {want}; "
                                   f"recalibrate (e.g. --recalibrate)")
        if sample is not None:
            _check_layout(path, groups, bank, sample)
    return doc


def _span(cols: list) -> str:
    return f"{cols[0]}..{cols[-1]}" if cols else "(none)"


def _check_layout(path, groups: list, bank: tuple, sample) -> None:
    """Refuse stored columns that differ from the layout the bank extracts from `sample` now."""
    start = 0
    for g, e in zip(groups, bank):
        dim = _apply(e, sample, 0).size
        if g["columns"] != list(range(start, start + dim)):
            raise ModelFormatError(f"{path}: group {e.name!r} is stored as {len(g['columns'])} columns "
                                   f"{_span(g['columns'])}, but the bank now extracts {dim} features at "
                                   f"columns {start}..{start + dim - 1}; a dimension changed: "
                                   f"recalibrate (e.g. --recalibrate)")
        start += dim
