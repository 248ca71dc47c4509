"""Reading a file named by the user with a bound on time and memory: regular files only, at most N bytes.

A size check by ``stat().st_size`` says nothing about a character device, a FIFO or a serial port:
their size is 0 while a read of "everything" never ends (``/dev/zero`` fills memory, a FIFO or a
terminal waits forever for a writer). Every reader of an untrusted or user-named file (a model file,
GROUPS.json, a device log, a CSV, a shard) therefore opens it here: the path must name a regular file
(after following symbolic links: a link to ``/dev/zero`` is refused like ``/dev/zero``), checked both
before opening (opening some devices has effects: a serial port may reset the board) and on the open
descriptor (the path could be swapped in between), and `read_bounded` reads at most one byte more
than its bound, so a file that grows while it is read is refused too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from edgeseq.errors import InputError
from edgeseq.messages import clip

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))
# never wait for a FIFO's writer nor adopt a terminal while opening (should the path be swapped after
# its check); regular files ignore both flags. Flags a platform lacks (Windows) count as 0.
_OPEN_FLAGS = os.O_RDONLY
for _flag in ("O_NONBLOCK", "O_NOCTTY", "O_BINARY", "O_CLOEXEC"):
    _OPEN_FLAGS |= getattr(os, _flag, 0)


def file_kind(mode: int) -> str:
    """What a ``st_mode`` names, in words ("a FIFO (named pipe)", "a character device", ...).

    Examples
    --------
    >>> import os
    >>> from edgeseq.io.bounded import file_kind
    >>> file_kind(os.stat(".").st_mode)
    'a directory'
    """
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refuse_kind(path: Path, what: str, mode: int, error) -> None:
    if not stat.S_ISREG(mode):
        tail = "" if stat.S_ISDIR(mode) else "; save its content to a file and pass that"
        raise error(f"{what} {path} is {file_kind(mode)}, not a regular file{tail}")


def check_regular(path, what: str = "file", error=InputError) -> None:
    """Raise `error` unless `path` names a regular file (a symbolic link is followed); nothing is opened.

    For commands that check their inputs before starting work; the reader itself still opens the
    file with `open_regular`, which checks again what it opened.

    Examples
    --------
    >>> import tempfile
    >>> from edgeseq.io.bounded import check_regular
    >>> check_regular(tempfile.mkdtemp(), "data file")
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: data file ... is a directory, not a regular file
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {clip(exc)}") from None
    _refuse_kind(path, what, mode, error)


def open_regular(path, what: str = "file", error=InputError):
    """Open `path` for binary reading if, and only if, it is a regular file.

    Parameters
    ----------
    path : str or Path
        The file; a symbolic link is followed, and what it points to must be a regular file.
    what : str, default="file"
        Names the file in messages ("device log", "groups file", ...).
    error : type, default=InputError
        The `EdgeseqError` subclass to raise (a model file raises `ModelFormatError`).

    Returns
    -------
    io.BufferedReader
        Open in binary mode; the caller closes it (``with open_regular(...) as f``).

    Raises
    ------
    error
        One line: the file is missing or unreadable, or is a device, FIFO, socket or directory.

    Examples
    --------
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> from edgeseq.io.bounded import open_regular
    >>> p = Path(tempfile.mkdtemp()) / "notes.txt"
    >>> _ = p.write_text("hello")
    >>> with open_regular(p) as f:
    ...     f.read()
    b'hello'
    >>> open_regular(os.devnull, "device log")
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: device log /dev/null is a character device, not a regular file; save its content to a file and pass that
    """
    path = Path(path)
    check_regular(path, what, error)  # before opening: opening a device can act on it (reset a board)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {clip(exc)}") from None
    try:
        _refuse_kind(path, what, os.fstat(fd).st_mode, error)  # what was opened, if the path changed meanwhile
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(path, max_bytes: int, what: str = "file", error=InputError, hint: str = "") -> bytes:
    """The bytes of the regular file `path`, refused when it holds more than `max_bytes`.

    The size is checked before reading, and the read itself stops one byte past the bound, so the
    memory used is at most ``max_bytes + 1`` whatever the file does meanwhile.

    Parameters
    ----------
    path : str or Path
    max_bytes : int
        The most the caller accepts.
    what : str, default="file"
        Names the file in messages.
    error : type, default=InputError
        The `EdgeseqError` subclass to raise.
    hint : str, default=""
        Appended to the "too large" message (what to do instead).

    Raises
    ------
    error
        As `open_regular`, or the file holds more than `max_bytes` bytes (the message says the bound).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from edgeseq.io.bounded import read_bounded
    >>> p = Path(tempfile.mkdtemp()) / "groups.json"
    >>> _ = p.write_text('{"groups": []}')
    >>> read_bounded(p, 100, "groups file")
    b'{"groups": []}'
    >>> read_bounded(p, 10, "groups file", hint="is it a GROUPS.json?")
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: groups file ... is 14 bytes, over the 10-byte limit; is it a GROUPS.json?
    """
    path = Path(path)
    tail = f"; {hint}" if hint else ""
    with open_regular(path, what, error) as f:
        try:
            size = os.fstat(f.fileno()).st_size
            data = f.read(max_bytes + 1) if size <= max_bytes else b""
        except OSError as exc:
            raise error(f"cannot read {what} {path}: {clip(exc)}") from None
    if size > max_bytes:
        raise error(f"{what} {path} is {size:,} bytes, over the {max_bytes:,}-byte limit{tail}")
    if len(data) > max_bytes:
        raise error(f"{what} {path} grew past the {max_bytes:,}-byte limit while it was read{tail}")
    return data


__all__ = ["check_regular", "file_kind", "open_regular", "read_bounded"]
