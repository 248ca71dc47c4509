"""Shared by the benchmarks: describe the machine and write ``bench/results/<name>.json``.

Why one helper: the docs page renders every ``bench/results/*.json`` (``docs/hooks.py``), so every
benchmark must record the same things in the same keys: the ``command`` that reproduces it, the
``machine`` it ran on (with the load average at its start and end, since the machines are shared
and a loaded machine skews absolute times), the ``date`` and its ``tables`` (``[{"title",
"columns", "rows"}]``) laid out for the page. A benchmark that dies half-way must not leave a
truncated file for the page to show, hence the temp file and ``os.replace``.

Scripts run as ``python bench/<name>.py``, so this module is imported as ``_results`` (the
script's folder is first on ``sys.path``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from edgeseq.extractors.calibrate import machine_info as _base_machine_info

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parents[1]
RESERVED = ("command", "machine", "date")


def _load() -> str:
    """The 1-, 5- and 15-minute load averages as text ('n/a' where the OS has none)."""
    try:
        return ", ".join(f"{v:.2f}" for v in os.getloadavg())
    except (AttributeError, OSError):
        return "n/a"


LOAD_AT_IMPORT = _load()  # the benchmark imports this module first thing: the load at its start


def _blas() -> str:
    """The BLAS numpy uses and its thread count (via threadpoolctl when installed)."""
    try:
        import numpy  # noqa: F401  (threadpoolctl only sees libraries already loaded)
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl not installed)"
    libs = [f"{i.get('internal_api', '?')} {i.get('version') or ''} ({i.get('num_threads')} threads)".replace("  ", " ")
            for i in threadpool_info() if i.get("user_api") == "blas"]
    return "; ".join(libs) or "none loaded"


def machine_info(load_start: str | None = None) -> dict:
    """The project's machine description plus what benchmarks need: load averages, onnxruntime, BLAS.

    Builds on :func:`edgeseq.extractors.calibrate.machine_info` (one description of the machine for
    measured costs and benchmarks alike), flattened to scalar values because the docs page shows
    only those. ``load_start`` defaults to the load when this module was imported (the script's
    start); ``load_end`` is taken now.
    """
    base = _base_machine_info()
    info = {"machine": base["machine"], "cpu": base["cpu"], "cores": os.cpu_count(), "python": base["python"]}
    versions = dict(base.get("versions", {}))
    try:
        versions["onnxruntime"] = metadata.version("onnxruntime")
    except metadata.PackageNotFoundError:
        versions["onnxruntime"] = "not installed"
    info.update(versions)
    info["blas"] = _blas()
    info["load_start"] = load_start if load_start is not None else LOAD_AT_IMPORT
    info["load_end"] = _load()
    return info


def command_line(argv: list[str] | None = None) -> str:
    """The command that reproduces this run: ``python <script relative to the repo> <args>``."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    try:
        script = script.relative_to(ROOT)
    except ValueError:
        pass
    return shlex.join(["python", str(script), *argv[1:]])


def _check_tables(tables) -> None:
    """Fail before writing if ``tables`` is not what the docs hook renders."""
    if not isinstance(tables, list):
        raise TypeError("payload['tables'] must be a list of {'title', 'columns', 'rows'}")
    for t in tables:
        if not isinstance(t, dict) or not isinstance(t.get("columns"), list) or not isinstance(t.get("rows"), list):
            raise TypeError(f"table {t!r:.80} needs 'columns' and 'rows' lists")
        for row in t["rows"]:
            if len(row) != len(t["columns"]):
                raise ValueError(f"table {t.get('title')!r}: row {row!r:.80} has {len(row)} cells for "
                                 f"{len(t['columns'])} columns")


def _jsonable(obj):
    """numpy scalars and arrays as plain JSON values (anything else is an error, not a silent str())."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def write_result(name: str, payload: dict, command: str, machine: dict | None = None,
                 results_dir: Path | None = None) -> Path:
    """Write ``<results_dir>/<name>.json`` atomically; return its path.

    The document is ``payload`` (which should hold a ``tables`` list) followed by ``command``,
    ``machine`` (:func:`machine_info` now, unless given) and ``date`` (UTC). The payload keys come
    first so readers that look at the first entry (the anytime-quality data sets) still find it.
    Everything is serialised before any file is opened, and the file appears only by ``os.replace``
    of a complete temp file: a failure leaves the previous result untouched and no partial file.
    NaN/inf are refused (strict JSON) rather than written as tokens other readers reject.
    """
    clash = [k for k in RESERVED if k in payload]
    if clash:
        raise ValueError(f"payload must not set {clash}: write_result records them")
    if "tables" in payload:
        _check_tables(payload["tables"])
    doc = {**payload, "command": str(command), "machine": machine if machine is not None else machine_info(),
           "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    text = json.dumps(doc, indent=1, default=_jsonable, allow_nan=False) + "\n"
    out_dir = Path(results_dir) if results_dir is not None else RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{name}.json"
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
