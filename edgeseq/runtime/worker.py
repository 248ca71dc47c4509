"""The one thread a session runs extractors on, so a deadline can walk away from a slow extractor.

Python cannot kill a thread, so an overrunning extractor keeps running after its caller gave up.
This worker bounds the damage: one thread per session (never more), one job at a time, and a job
whose caller gave up is *abandoned* — its result (or exception) is dropped the moment it finishes,
so nothing accumulates. While an abandoned job is still running the worker is `busy`; the session
decides what a new run does then (see `AnytimeSession.run`). A job whose caller gave up before the
thread picked it up is *withdrawn* instead: it never runs, so nothing outlives the caller's return.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from dataclasses import dataclass

# what `wait` returns when the timeout passed first
ABANDONED = "abandoned"  # the job was running: it finishes in the background, its result is dropped
WITHDRAWN = "withdrawn"  # the job had not started: it was removed and will never run


def clamp_timeout(timeout: float | None) -> float | None:
    """A far timeout (a deadline of 1e10 s) means "no limit" rather than an OverflowError.

    Examples
    --------
    >>> import threading
    >>> clamp_timeout(None), clamp_timeout(0.5)
    (None, 0.5)
    >>> clamp_timeout(1e300) == threading.TIMEOUT_MAX
    True
    """
    return None if timeout is None else min(timeout, threading.TIMEOUT_MAX)


class _WhileRunning:
    """A process-wide interpreter setting changed while at least one deadline run is in progress.

    The first run to enter saves the setting and applies `_target(saved, value)`; the last to leave
    restores the saved value, unless someone else changed the setting meanwhile (their choice
    wins). `value` None changes nothing. Subclasses say how to read and write the setting."""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._lock = threading.Lock()
        cls._users = 0
        cls._saved = cls._set = None

    def __init__(self, value):
        self.value = value

    def __enter__(self):
        if self.value is not None:
            cls = type(self)
            with cls._lock:
                if cls._users == 0:
                    cls._saved = cls._get()
                    cls._put(cls._target(cls._saved, self.value))
                    cls._set = cls._get()  # as the interpreter stored it
                cls._users += 1
        return self

    def __exit__(self, *exc):
        if self.value is not None:
            cls = type(self)
            with cls._lock:
                cls._users -= 1
                if cls._users == 0 and cls._get() == cls._set:
                    cls._put(cls._saved)


class ShortSwitchInterval(_WhileRunning):
    """Lower the interpreter's GIL switch interval while at least one deadline run is waiting.

    A thread whose timed wait has expired must take the GIL back before it can return, and while
    the worker runs pure-Python code that holds the GIL, CPython hands it over only after the
    switch interval (5 ms by default) — so a deadline run would come back up to 5 ms late, or as
    late as the extractor's own end. The interval costs nothing while the waiting thread sleeps:
    it only paces hand-offs to a thread that asks for the GIL. The interval is process-wide: the
    first run to enter sets it to `seconds` (if that is shorter), the last to leave restores what
    it was, unless someone else changed it meanwhile. `seconds` None changes nothing.

    Examples
    --------
    >>> import sys
    >>> before = sys.getswitchinterval()
    >>> with ShortSwitchInterval(1e-4):
    ...     round(sys.getswitchinterval(), 6)
    0.0001
    >>> sys.getswitchinterval() == before
    True
    """

    _get = staticmethod(sys.getswitchinterval)
    _put = staticmethod(sys.setswitchinterval)
    _target = staticmethod(min)


class PausedGC(_WhileRunning):
    """Hold off CPython's automatic cyclic garbage collector while at least one deadline run is in progress.

    A collection runs on whichever thread allocates when a generation's threshold is crossed, and
    holds the GIL for all of it. In a process that has imported onnxruntime, scikit-learn and the
    like, a young collection takes fractions of a millisecond and a full one tens of milliseconds
    (`bench/deadline_lateness.py` records them): a run it lands in is late by that much, and one
    landing in a spinning extractor on the worker stalls the waiting thread just the same.
    Paused, the collection runs at the first allocation after the run returns, in the caller's
    time between runs. Reference counting still frees everything that is not in a cycle.
    `pause` None (or False) changes nothing; like the switch interval the setting is process-wide,
    nests across sessions, and is restored by the last run to leave unless someone else changed it.

    Examples
    --------
    >>> import gc
    >>> before = gc.isenabled()
    >>> with PausedGC(True):
    ...     gc.isenabled()
    False
    >>> gc.isenabled() == before
    True
    """

    _get = staticmethod(gc.isenabled)
    _put = staticmethod(lambda on: gc.enable() if on else gc.disable())
    _target = staticmethod(lambda saved, pause: False)

    def __init__(self, pause: bool | None):
        super().__init__(True if pause else None)


@dataclass
class JobOutcome:
    """What a finished job produced: its value, or the exception it raised.

    Examples
    --------
    >>> import threading
    >>> from edgeseq.runtime.worker import ExtractorWorker
    >>> w = ExtractorWorker("doc-worker")
    >>> out = w.wait(w.submit(lambda x: 1 / x, 0, "div"), 5)
    >>> out.ok, type(out.value).__name__, out.elapsed_s >= 0
    (False, 'ZeroDivisionError', True)
    >>> w.close()
    """

    ok: bool
    value: object  # the return value, or the exception when not ok
    elapsed_s: float


class ExtractorWorker:
    """A daemon thread that runs one callable at a time on behalf of a session.

    Examples
    --------
    >>> import threading
    >>> from edgeseq.runtime.worker import ExtractorWorker
    >>> w = ExtractorWorker("doc-worker")
    >>> w.wait(w.submit(str.upper, "ab", "upper"), 5).value
    'AB'
    >>> started, release = threading.Event(), threading.Event()
    >>> t = w.submit(lambda _: started.set() or release.wait(5), None, "slow")
    >>> started.wait(5)
    True
    >>> w.wait(t, 0.05), w.busy                # gave up: the job runs on, its result will be dropped
    ('abandoned', True)
    >>> release.set(); w.wait_idle(5)
    True
    >>> w.close(); w.join(5); w.alive
    False
    """

    def __init__(self, name: str = "edgeseq-extractor"):
        self._cv = threading.Condition()
        self._job = None  # (ticket, fn, arg, label)
        self._outcome: tuple[int, JobOutcome] | None = None
        self._ticket = 0
        self._running: tuple[int, str, float] | None = None  # (ticket, label, start time)
        self._abandoned: int | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ caller side
    @property
    def busy(self) -> bool:
        """True while a job is queued or running (an abandoned one included).

        Examples
        --------
        >>> import threading
        >>> from edgeseq.runtime.worker import ExtractorWorker
        >>> w = ExtractorWorker("doc-worker")
        >>> w.busy
        False
        >>> release = threading.Event()
        >>> _ = w.submit(release.wait, 5, "slow")
        >>> w.busy
        True
        >>> release.set(); w.wait_idle(5), w.busy
        (True, False)
        >>> w.close()
        """
        with self._cv:
            return self._job is not None or self._running is not None

    def running_job(self) -> tuple[str, float] | None:
        """(label, seconds it has been running) of the current job, or None when idle.

        Examples
        --------
        >>> import threading
        >>> from edgeseq.runtime.worker import ExtractorWorker
        >>> w = ExtractorWorker("doc-worker")
        >>> w.running_job() is None
        True
        >>> started, release = threading.Event(), threading.Event()
        >>> _ = w.submit(lambda _: started.set() or release.wait(5), None, "camera")
        >>> started.wait(5)
        True
        >>> label, age = w.running_job(); label, age >= 0
        ('camera', True)
        >>> release.set(); w.close()
        """
        with self._cv:
            if self._running is None:
                return None
            return self._running[1], time.perf_counter() - self._running[2]

    def submit(self, fn, arg, label: str) -> int:
        """Start `fn(arg)` on the worker; the caller must have checked it is idle.

        Returns
        -------
        int
            The ticket to pass to `wait`.

        Raises
        ------
        RuntimeError
            When the worker is closed or busy (one job at a time).

        Examples
        --------
        >>> import threading
        >>> from edgeseq.runtime.worker import ExtractorWorker
        >>> w = ExtractorWorker("doc-worker")
        >>> release = threading.Event()
        >>> ticket = w.submit(release.wait, 5, "slow")
        >>> w.submit(print, "x", "second")
        Traceback (most recent call last):
        ...
        RuntimeError: extractor worker is busy
        >>> release.set(); w.wait(ticket, 5).value
        True
        >>> w.close()
        """
        with self._cv:
            if self._closed:
                raise RuntimeError("extractor worker is closed")
            if self._job is not None or self._running is not None:
                raise RuntimeError("extractor worker is busy")
            self._ticket += 1
            self._job = (self._ticket, fn, arg, label)
            self._outcome = None
            self._cv.notify_all()
            return self._ticket

    def wait(self, ticket: int, timeout: float | None) -> JobOutcome | str:
        """The job's outcome, or, if it did not finish within `timeout`, WITHDRAWN (it had not
        started and never will) or ABANDONED (it is running; its result will be dropped).

        Examples
        --------
        >>> import threading
        >>> from edgeseq.runtime.worker import ExtractorWorker
        >>> w = ExtractorWorker("doc-worker")
        >>> w.wait(w.submit(len, "abc", "len"), 5)
        JobOutcome(ok=True, value=3, elapsed_s=...)
        >>> started, release = threading.Event(), threading.Event()
        >>> t = w.submit(lambda _: started.set() or release.wait(5), None, "slow")
        >>> started.wait(5), w.wait(t, 0.05)     # it was running: it finishes alone, unheard
        (True, 'abandoned')
        >>> release.set(); w.close()
        """
        with self._cv:
            done = self._cv.wait_for(
                lambda: self._outcome is not None and self._outcome[0] == ticket, clamp_timeout(timeout))
            if not done:
                # decided under the lock, so the thread cannot pick the job up in between
                if self._job is not None and self._job[0] == ticket:
                    self._job = None
                    self._cv.notify_all()  # wake wait_idle: the worker is idle again
                    return WITHDRAWN
                self._abandoned = ticket
                return ABANDONED
            outcome = self._outcome[1]
            self._outcome = None
            return outcome

    def wait_idle(self, timeout: float | None) -> bool:
        """Block until no job is running (True) or the timeout passes (False).

        Examples
        --------
        >>> import threading
        >>> from edgeseq.runtime.worker import ExtractorWorker
        >>> w = ExtractorWorker("doc-worker")
        >>> w.wait_idle(0)
        True
        >>> release = threading.Event()
        >>> _ = w.submit(release.wait, 5, "slow")
        >>> w.wait_idle(0.01)
        False
        >>> release.set(); w.wait_idle(5)
        True
        >>> w.close()
        """
        with self._cv:
            return self._cv.wait_for(lambda: self._job is None and self._running is None, clamp_timeout(timeout))

    def close(self) -> None:
        """Ask the thread to exit once its current job (if any) returns; does not block.

        Examples
        --------
        >>> import threading
        >>> from edgeseq.runtime.worker import ExtractorWorker
        >>> w = ExtractorWorker("doc-worker")
        >>> w.close(); w.join(5); w.alive
        False
        >>> w.submit(len, "abc", "len")
        Traceback (most recent call last):
        ...
        RuntimeError: extractor worker is closed
        """
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    @property
    def alive(self) -> bool:
        """True until the thread has exited (after `close` and the end of its current job).

        Examples
        --------
        >>> import threading
        >>> from edgeseq.runtime.worker import ExtractorWorker
        >>> w = ExtractorWorker("doc-worker")
        >>> w.alive
        True
        >>> w.close(); w.join(5); w.alive
        False
        """
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to exit (at most `timeout` seconds); call `close` first.

        Examples
        --------
        >>> import threading
        >>> from edgeseq.runtime.worker import ExtractorWorker
        >>> w = ExtractorWorker("doc-worker")
        >>> w.close()
        >>> w.join(5)
        >>> w.alive
        False
        """
        self._thread.join(timeout)

    # ------------------------------------------------------------------ worker side
    def _loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._job is not None or self._closed)
                if self._job is None:  # closed and idle
                    return
                ticket, fn, arg, label = self._job
                self._job = None
                t0 = time.perf_counter()
                self._running = (ticket, label, t0)
            try:
                outcome = JobOutcome(True, fn(arg), 0.0)
            except BaseException as exc:  # noqa: BLE001 — reported to the caller, never lost
                outcome = JobOutcome(False, exc, 0.0)
            outcome.elapsed_s = time.perf_counter() - t0
            del fn, arg
            with self._cv:
                self._running = None
                if self._abandoned == ticket:  # the caller gave up: drop the late result
                    self._abandoned = None
                else:
                    self._outcome = (ticket, outcome)
                del outcome
                self._cv.notify_all()
