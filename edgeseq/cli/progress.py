"""Progress lines for long CLI commands: stages with elapsed time, on stderr.

stderr, so that stdout stays the command's result (tables, JSON) and can be piped; `--quiet` makes
every call a no-op. Each line starts with the time since the command began, e.g.
``[   0.41 s] fit: done in 0.38 s``.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import click


class Progress:
    """`say(msg)` prints one stamped line; `stage(msg)` brackets a block with start and done lines.

    Parameters
    ----------
    quiet : bool
        Print nothing (the CLI's ``--quiet``).
    clock : callable
        Returns seconds; injectable so tests (and this example) are deterministic.

    Examples
    --------
    Lines go to stderr; here a fake clock ticks one second per reading:

    >>> import contextlib, io, itertools
    >>> from edgeseq.cli.progress import Progress
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     p = Progress(clock=itertools.count().__next__)
    ...     p.say("reading data")
    >>> print(err.getvalue(), end="")
    [   1.00 s] reading data
    """

    def __init__(self, quiet: bool = False, clock=time.perf_counter):
        self.quiet = quiet
        self._clock = clock
        self._t0 = clock()

    def say(self, msg: str) -> None:
        """Print `msg` on stderr, stamped with the seconds since the command began (nothing when quiet).

        Examples
        --------
        >>> import contextlib, io
        >>> from edgeseq.cli.progress import Progress
        >>> err = io.StringIO()
        >>> with contextlib.redirect_stderr(err):
        ...     Progress(quiet=True).say("not printed")
        >>> err.getvalue()
        ''
        """
        if not self.quiet:
            click.echo(f"[{self._clock() - self._t0:7.2f} s] {msg}", err=True)

    @contextmanager
    def stage(self, name: str, detail: str = ""):
        """Print `name: detail ...`, run the block, then `name: done in T s` (nothing more on error).

        Examples
        --------
        >>> import contextlib, io, itertools
        >>> from edgeseq.cli.progress import Progress
        >>> err = io.StringIO()
        >>> with contextlib.redirect_stderr(err):
        ...     p = Progress(clock=itertools.count().__next__)
        ...     with p.stage("fit", "3 groups"):
        ...         pass
        >>> print(err.getvalue(), end="")
        [   1.00 s] fit: 3 groups ...
        [   4.00 s] fit: done in 1.00 s
        """
        self.say(f"{name}: {detail} ..." if detail else f"{name} ...")
        t = self._clock()
        yield
        self.say(f"{name}: done in {self._clock() - t:.2f} s")
