"""Where an export may be written: checks that need neither the model nor ONNX, run before either loads."""

from __future__ import annotations

import json
from pathlib import Path

from edgeseq.errors import ExportError
from edgeseq.format import FORMAT, MANIFEST, listed_files


def prepare_target(out: Path, force: bool, not_replaceable=None, what: str = "export") -> None:
    """Refuse an export target that is a file, or a non-empty directory without `force`, or with
    `force` one that is not an earlier export (which --force would otherwise delete).

    `not_replaceable` (default `not_an_export`) says why a directory may not be replaced, and `what`
    names what may be (a firmware bundle passes its own check and "bundle").

    Light on purpose (no numpy, ONNX or model): `edgeseq export` calls it before loading anything,
    so a refusal takes milliseconds, and the writer calls it again just before replacing.

    Raises
    ------
    ExportError
        Saying why and what to do.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp())
    >>> prepare_target(d / "new", force=False)          # absent or empty: fine
    >>> _ = (d / "notes.txt").write_text("mine")
    >>> prepare_target(d, force=True)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: --force replaces only an empty directory or an earlier edgeseq export, and ... has no manifest.json; nothing was deleted - choose another directory or remove it yourself
    """
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not force:
        raise ExportError(f"{out} is not empty; choose another directory or pass --force to replace it")
    why = (not_replaceable or not_an_export)(out)
    if why:
        raise ExportError(f"--force replaces only an empty directory or an earlier edgeseq {what}, and {out} "
                          f"{why}; nothing was deleted - choose another directory or remove it yourself")


def not_an_export(out: Path) -> str | None:
    """Why `out` is not an earlier export that --force may delete (None when it is one): its
    manifest.json must parse, say "format": "edgeseq-export", and list every entry of the directory.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> not_an_export(Path(tempfile.mkdtemp()))
    'has no manifest.json'
    """
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"has no {MANIFEST}"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"has a {MANIFEST} that is not readable JSON"
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return f'has a {MANIFEST} without "format": "{FORMAT}"'
    try:
        listed = {MANIFEST} | {e["file"] for e in listed_files(manifest)}
    except (KeyError, TypeError):
        return f"has a {MANIFEST} whose file list is unreadable"
    foreign = sorted(p.name + ("/" if p.is_dir() else "") for p in out.iterdir()
                     if p.name not in listed or p.is_symlink() or not p.is_file())
    if foreign:
        return f"holds entries its {MANIFEST} does not list: {', '.join(foreign[:5])}"
    return None
