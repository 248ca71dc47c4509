"""Atomic writes: every file and directory edgeseq writes appears whole or not at all.

A file is written to a temporary file in the same directory, flushed to disk (fsync) and renamed over
the target (`os.replace`, atomic on POSIX and Windows), so a crash, a full disk or an exception while
writing leaves the earlier file untouched and no half-written one. Every writer of the package -
model files, predictions, reports, calibration output, feature tables, exports - goes through here.

A directory (an export) is built beside its target and swapped in. On Linux the swap is one atomic
`renameat2(RENAME_EXCHANGE)`; elsewhere it is two renames, and a crash between them leaves the old
directory parked in a hidden `.<name>.old-<pid>-*` folder. `recover_dir` (run before every export to
that target) puts it back and removes temporaries whose process is gone, so after any crash the
target holds the old or the new version and nothing leaks.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import tempfile
from pathlib import Path

from edgeseq.errors import OutputError
from edgeseq.messages import clip


def _fail(path, exc: OSError, what: str = "") -> OutputError:
    return OutputError(f"cannot write {clip(path)}: {exc.strerror or exc}{what}; "
                       "nothing existing was changed")


def _new_file_mode(path: Path) -> int:
    """The mode the file would get from open(): kept from the file it replaces, else 0666 & ~umask."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_dir(path: Path) -> None:
    """Make the rename itself durable (best effort: not every platform can open a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_output(path, mode: str = "wb", *, make_parents: bool = False, **open_kwargs):
    """Open a temporary file beside `path` for writing; on success it replaces `path` atomically.

    Any exception inside the block (or while flushing) removes the temporary file and leaves `path`
    as it was; OSErrors become one OutputError line. `make_parents` creates missing directories.

    Examples
    --------
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp()); p = d / "report.txt"
    >>> with atomic_output(p, "w") as f:
    ...     _ = f.write("v1")
    >>> try:
    ...     with atomic_output(p, "w") as f:
    ...         _ = f.write("half of v2")
    ...         raise RuntimeError("crash while writing")
    ... except RuntimeError:
    ...     pass
    >>> p.read_text(), os.listdir(d)              # the old file, whole; no temporary left
    ('v1', ['report.txt'])
    """
    path = Path(path)
    try:
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:60]}.tmp-", dir=path.parent)
    except OSError as exc:
        raise _fail(path, exc) from None
    done = False
    try:
        with os.fdopen(fd, mode, **open_kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _new_file_mode(path))
        os.replace(tmp, path)
        done = True
        _fsync_dir(path.parent)
    except OSError as exc:
        raise _fail(path, exc) from None
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def atomic_write_bytes(path, data: bytes, *, make_parents: bool = False) -> None:
    r"""Write `data` to `path` atomically (see `atomic_output`): the old file or the new, never half.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "sub" / "model.pkl"
    >>> atomic_write_bytes(p, b"\x80\x05", make_parents=True)
    >>> p.read_bytes() == bytes([0x80, 0x05])
    True
    """
    with atomic_output(path, "wb", make_parents=make_parents) as f:
        f.write(data)


def atomic_write_text(path, text: str, *, encoding: str = "utf-8", make_parents: bool = False) -> None:
    r"""Write `text` to `path` atomically, with no newline translation (what you pass is what lands).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "pred.csv"
    >>> atomic_write_text(p, "y\r\n1.5\r\n")
    >>> p.read_bytes()                            # CRLF kept as given, on every platform
    b'y\r\n1.5\r\n'
    """
    with atomic_output(path, "w", encoding=encoding, newline="", make_parents=make_parents) as f:
        f.write(text)


# ----------------------------------------------------------------------------- directories
def _tag(out: Path, kind: str) -> str:
    return f".{out.name}.{kind}-"


def temp_dir_for(out: Path) -> Path:
    """A fresh hidden directory beside `out`, named after this process so `recover_dir` can tell a
    live writer's temporary from one a crash left behind.

    Beside `out` (same filesystem), so `replace_dir` can rename it into place.

    Examples
    --------
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> out = Path(tempfile.mkdtemp()) / "export"
    >>> tmp = temp_dir_for(out)
    >>> tmp.parent == out.parent, tmp.name.startswith(f".export.tmp-{os.getpid()}-"), tmp.is_dir()
    (True, True, True)
    """
    return Path(tempfile.mkdtemp(prefix=f"{_tag(out, 'tmp')}{os.getpid()}-", dir=out.parent))


def _alive(pid: int) -> bool:
    """Whether process `pid` still runs. On Windows os.kill would terminate it, so there every
    writer counts as alive (its temporaries are kept rather than risk deleting a live one)."""
    if pid == os.getpid() or os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but belongs to someone else
        return True
    return True


def _leftovers(out: Path, kind: str):
    """Temporaries of `kind` beside `out` whose writing process no longer runs."""
    tag = _tag(out, kind)
    for p in out.parent.glob(f"{tag}*"):
        pid = p.name[len(tag):].split("-", 1)[0]
        if p.is_dir() and not p.is_symlink() and pid.isdigit() and not _alive(int(pid)):
            yield p


def recover_dir(out) -> None:
    """Undo what a crash during `replace_dir` left: restore a parked old directory if `out` is
    missing, then delete dead writers' temporaries (a parked copy once `out` exists again).

    Temporaries of processes that still run (this one included) are left alone.

    Examples
    --------
    A writer (here a finished child process) crashed after parking the old export and before
    moving the new one in:

    >>> import os, subprocess, sys, tempfile
    >>> from pathlib import Path
    >>> child = subprocess.Popen([sys.executable, "-c", "pass"]); _ = child.wait()
    >>> root = Path(tempfile.mkdtemp()); out = root / "export"
    >>> parked = root / f".export.old-{child.pid}-x" / "dir"
    >>> parked.mkdir(parents=True); _ = (parked / "manifest.json").write_text("{}")
    >>> (root / f".export.tmp-{child.pid}-y").mkdir()     # its half-built new version
    >>> recover_dir(out)
    >>> sorted(os.listdir(root)), (out / "manifest.json").read_text()
    (['export'], '{}')
    """
    out = Path(out).absolute()
    if not out.parent.is_dir():
        return
    for old in _leftovers(out, "old"):
        if not os.path.lexists(out) and (old / "dir").is_dir():
            os.replace(old / "dir", out)
        shutil.rmtree(old, ignore_errors=True)
    for tmp in _leftovers(out, "tmp"):
        shutil.rmtree(tmp, ignore_errors=True)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic step (Linux renameat2); False where the system cannot."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: this filesystem or kernel cannot exchange
        return False
    raise OSError(err, os.strerror(err), str(b))


def replace_dir(tmp: Path, out: Path) -> None:
    """Put the finished directory `tmp` at `out`, replacing an existing `out` (see module doc).

    Readers of `out` see the old directory or the new one, never a mix.

    Examples
    --------
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> out = Path(tempfile.mkdtemp()) / "export"
    >>> out.mkdir(); _ = (out / "v").write_text("old")
    >>> tmp = temp_dir_for(out); _ = (tmp / "v").write_text("new")
    >>> replace_dir(tmp, out)
    >>> (out / "v").read_text(), os.listdir(out.parent)    # the old version is gone as well
    ('new', ['export'])
    """
    if not os.path.lexists(out):
        os.replace(tmp, out)
        _fsync_dir(out.parent)
        return
    if _exchange(tmp, out):
        _fsync_dir(out.parent)
        shutil.rmtree(tmp, ignore_errors=True)  # now the old version
        return
    old = Path(tempfile.mkdtemp(prefix=f"{_tag(out, 'old')}{os.getpid()}-", dir=out.parent))
    _swap_by_renames(tmp, out, old)
    shutil.rmtree(old, ignore_errors=True)


def _swap_by_renames(tmp: Path, out: Path, old: Path) -> None:
    """out -> old/dir, tmp -> out; the first rename is undone if the second fails. A crash in between
    is repaired by `recover_dir`."""
    os.replace(out, old / "dir")
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old / "dir", out)
        raise
    _fsync_dir(out.parent)
