"""The anytime loop on a device: `AnytimeSession` = a verified `ExportedModel` + extractors run in order.

`AnytimeSession(out_dir)` loads the export as `ExportedModel` does and offers

* `predict(features_by_group, budget=None, prefix=None)` — batch predictions of one prefix (inherited);
* `run(extractors, budget=None, deadline_s=None, inputs=None)` — the anytime loop for one sample:
  groups are computed in the learned order and each prefix's prediction is committed as soon as
  its group is done, so an answer is always ready (policies in `runtime_loop` and the README).

Thread policy: extractors of one session never run concurrently. Without a deadline they run on
the calling thread; with one they run on the session's single worker thread, which the loop can
walk away from. While an extractor that overran its deadline is still running, the session is
`busy`: a new run with a deadline waits for it only until that run's own deadline (then returns
the prefix-0 prediction, reported `busy`); a new run without a deadline raises `SessionBusyError`
(waiting could be forever) — call `wait_idle(timeout)` first. No second thread is ever started.

Returning by the deadline: a run with a deadline stops waiting early by its own measured wrap-up
(the commit of the stage an extractor completes, taking the GIL back, building the result; see
`edgeseq.runtime.loop.WrapUp`), shortens the interpreter's GIL switch interval while it waits, and
holds off the cyclic garbage collector until it has returned (`edgeseq.runtime.worker.PausedGC`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref

import numpy as np

from edgeseq.errors import EdgeseqError, RuntimeInputError, SessionBusyError
from edgeseq.runtime.inputs import check_deadline, check_group_keys
from edgeseq.runtime.loop import BUSY, GroupReport, RunResult, Step, WrapUp, _Clock, anytime_loop
from edgeseq.runtime.model import ClassifierPrediction, ExportedModel
from edgeseq.runtime.stopping import check_stop, stage_statistic, statistic_of
from edgeseq.runtime.worker import ExtractorWorker, PausedGC, ShortSwitchInterval
from edgeseq.budget import check_budget

_PAUSE_GC = PausedGC(True)  # the collector is held off while a deadline run is in progress (see PausedGC)

__all__ = ["AnytimeSession", "ClassifierPrediction", "RunResult", "GroupReport", "SessionBusyError"]


class AnytimeSession(ExportedModel):
    """A verified export with the anytime loop (see the module docstring for the policies).

    Parameters
    ----------
    out_dir : str or Path
        A directory written by ``edgeseq export`` / ``export_model``. It is verified (schema,
        checksums, no missing or extra file) before anything is loaded; a failure is an
        ``IntegrityError`` naming the file.
    switch_interval_s : float or None, default=5e-05
        The GIL switch interval (seconds) set while a run with a deadline is in progress, so that
        the waiting thread gets the interpreter back within about this long when an extractor
        running pure-Python code holds it at the deadline (``sys.setswitchinterval``; the
        default 5 ms would make such a run up to 5 ms late). The previous value is restored when
        no deadline run is in progress. ``None`` leaves the interpreter's setting alone.
    defer_gc : bool, default=True
        Hold off CPython's automatic cyclic garbage collector while a run with a deadline is in
        progress (process-wide, restored when no deadline run is in progress): a collection
        holds the GIL for up to tens of milliseconds in a large process and would make the run
        that late. The deferred collection runs at the first allocation after the run returns.
        ``False`` leaves the collector alone (e.g. when the caller manages it with ``gc.freeze``
        or ``gc.disable`` itself).

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.writer import export_model
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 4))
    >>> y = X[:, 2] + 0.1 * rng.normal(size=100)
    >>> est = AnytimeRegressor([[0, 1], [2, 3]], [1.0, 5.0], group_names=["a", "b"]).fit(X, y)
    >>> out = tempfile.mkdtemp() + "/export"
    >>> _ = export_model(est.fitted_sequence_, out)
    >>> with AnytimeSession(out) as sess:
    ...     batch = sess.predict({"a": X[:4, :2], "b": X[:4, 2:]}, budget=5.0)   # prefix 1: group "b"
    ...     r = sess.run({"a": lambda row: row[:2], "b": lambda row: row[2:]}, budget=5.0, inputs=X[0])
    >>> bool(np.allclose(batch, est.predict(X[:4], prefix=1), atol=1e-5))    # float32 on the device
    True
    >>> r.prefix, r.stopped_by, r.spent_cost
    (1, 'budget', 5.0)
    """

    def __init__(self, out_dir, *, switch_interval_s: float | None = 5e-5, defer_gc: bool = True):
        super().__init__(out_dir)
        if not isinstance(defer_gc, bool):
            raise RuntimeInputError(f"defer_gc must be True or False, got {defer_gc!r:.40}")
        self._defer_gc = defer_gc
        if switch_interval_s is not None and not (isinstance(switch_interval_s, (int, float))
                                                  and 1e-6 <= switch_interval_s <= 1.0):
            raise RuntimeInputError(f"switch_interval_s must be None or seconds in [1e-06, 1], "
                                    f"got {switch_interval_s!r:.40}")
        self._switch_interval_s = switch_interval_s
        self._wrapup = WrapUp(len(self._counts))  # measured commit and wrap-up times (see WrapUp)
        self._steps = [Step(g.name, g.dim, g.cost) for g in self.groups[:self._counts[-1]]]  # groups some stage needs
        self._stages = list(zip(self._counts, self.cum_cost.tolist())) if self._trees or self._layers else None
        self._run_lock = threading.Lock()
        self._worker: ExtractorWorker | None = None
        self._finalizer = None
        self._closed = False

    # ------------------------------------------------------------------ anytime loop
    def run(self, extractors: dict, budget=None, deadline_s=None, inputs=None, stop=None) -> RunResult:
        """Anytime loop for one sample: compute groups in order, commit each prefix, stop in time.

        `extractors[name](inputs)` returns the features of group `name` for the sample, shape (d_g,)
        or (1, d_g). Groups start only while their cost fits in the remaining `budget` (cost units);
        with `deadline_s` (seconds from this call) the run returns on time even if an extractor
        overruns. An extractor that raises or returns bad data ends the run; the last committed
        prediction is returned and the report says what happened. Never raises for extractor faults.

        Parameters
        ----------
        extractors : dict
            Group name -> callable taking `inputs` and returning that group's features.
        budget : float, optional
            Cost units the run may spend; ``None`` allows every group.
        deadline_s : float, optional
            Wall-clock seconds from this call; the run returns on time even if an extractor overruns.
        inputs : object, optional
            Passed as the only argument to every extractor (the raw sample).
        stop : {None, "confident"}, default=None
            ``"confident"`` (an export calibrated with stop data): stop computing groups once the
            committed stage's answer passes its threshold (`edgeseq.runtime.stopping`); the run then
            reports ``stopped_by="confident"``. The budget and the deadline still apply.

        Returns
        -------
        RunResult
            The last committed prediction, its prefix, the cost spent, why the loop stopped and one
            `GroupReport` per group.

        Raises
        ------
        RuntimeInputError
            For arguments that are wrong before any extractor runs (unknown group, not callable).
        SessionBusyError
            Without a deadline, while an extractor from an earlier run is still running.

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
        >>> model = AnytimeSession(out)
        >>> def broken(row):
        ...     raise ValueError("sensor unplugged")
        >>> r = model.run({"a": lambda row: row[:1], "b": broken}, inputs=X[0])
        >>> r.prefix, r.stopped_by, [g.status for g in r.report]      # prefix 1 is still an answer
        (1, 'error', ['ok', 'error'])
        >>> bool(np.allclose(r.prediction, est.predict(X[:1], prefix=1), atol=1e-5))
        True
        """
        if deadline_s is None or not self._defer_gc:
            return self._run(extractors, budget, deadline_s, inputs, stop)
        with _PAUSE_GC:  # first thing, and last out: a shared instance, so entering allocates nothing
            return self._run(extractors, budget, deadline_s, inputs, stop)

    def _run(self, extractors, budget, deadline_s, inputs, stop) -> RunResult:
        if not isinstance(extractors, dict):
            raise RuntimeInputError(f"extractors must be a dict mapping group name -> callable, "
                                    f"got {type(extractors).__name__}")
        check_group_keys(extractors, self._by_name, ())
        bad = [k for k, f in extractors.items() if not callable(f)]
        if bad:
            raise RuntimeInputError(f"extractor(s) for {', '.join(map(repr, bad))} are not callable")
        budget = None if budget is None else check_budget(budget)
        deadline_s = check_deadline(deadline_s)
        thr = check_stop(stop, self.manifest)
        stat = statistic_of(self.manifest)
        stop = None if thr is None else (lambda j, pred: bool(stage_statistic(pred, stat)[0] >= thr[j]))
        if self._closed:
            raise EdgeseqError("this AnytimeSession is closed; create a new one to run the anytime loop")
        if deadline_s is None:
            return self._run_locked(extractors, budget, None, inputs, _Clock(None), None, stop)
        # the loop stops waiting early by the measured wrap-up time, so that the return is on time
        clock = _Clock(deadline_s, self._wrapup.tail.value)
        with ShortSwitchInterval(self._switch_interval_s):
            if not self._run_lock.acquire(timeout=max(0.0, clock.remaining())):
                return self._busy_result(clock, "another run of this session was still in progress")
            try:
                worker = self._get_worker()
                if not worker.wait_idle(max(0.0, clock.remaining())):
                    label, age = worker.running_job() or ("?", 0.0)
                    return self._busy_result(clock, f"the extractor of group {label!r} from an earlier run "
                                                    f"is still running ({age:.3g} s); its result will be "
                                                    f"discarded")
                out = self._finish(anytime_loop(self._steps, self._committer(), self._prefix0, extractors,
                                                inputs, budget, deadline_s, worker, clock, self._stages,
                                                self._wrapup, stop))
                if out.timed_out:  # stopped by the clock: how long the wrap-up took past the loop's end
                    self._wrapup.tail.add(max(0.0, time.perf_counter() - clock.end))
                return out
            finally:
                self._run_lock.release()

    def _run_locked(self, extractors, budget, deadline_s, inputs, clock, worker, stop=None) -> RunResult:
        with self._run_lock:
            if self.busy:
                label, age = self._worker.running_job() or ("?", 0.0)
                raise SessionBusyError(
                    f"the extractor of group {label!r} overran an earlier run's deadline and is still "
                    f"running ({age:.3g} s); extractors of one session never run concurrently. Call "
                    f"wait_idle(timeout) first, or pass deadline_s to wait at most that long")
            return self._finish(anytime_loop(self._steps, self._committer(), self._prefix0, extractors,
                                             inputs, budget, deadline_s, worker, clock, self._stages,
                                             self._wrapup, stop))

    def _committer(self):
        """What the loop calls to commit stage j: `_commit`, or for tree stages a `_StageCommit`
        holding this run's state (each run starts from the zero state)."""
        if self._layers:
            return _LayerCommit(self)
        return _StageCommit(self) if self._trees else self._commit

    def _commit(self, j: int, rows: list, outs=None):
        """Prediction of prefix j from the loop's validated rows (finite, one row each)."""
        outs, finite = self._runners[j].run(rows) if outs is None else outs
        if not finite:
            raise RuntimeInputError(f"prefix {j} overflows float32 (the features are finite but too large "
                                    f"for the model's weights); rescale the features as in training")
        return self._format(outs, j)

    def _finish(self, out: RunResult) -> RunResult:
        if self._layers and out.prefix != self._round_to_committing(out.prefix):  # ended on a commit-false stage
            out.prefix = self._round_to_committing(out.prefix)
            out.prefix_cost = float(self.cum_cost[out.prefix])
        if isinstance(out.prediction, ClassifierPrediction) and out.prediction is self._prefix0:
            out.prediction = dataclasses.replace(out.prediction)  # its arrays are read-only; the object is the caller's
        return out

    def _busy_result(self, clock: _Clock, why: str) -> RunResult:
        report = [GroupReport(g.name, "not_reached", g.cost) for g in self.groups]
        if report:
            report[0].status, report[0].message = BUSY, why
        pred = dataclasses.replace(self._prefix0) if isinstance(self._prefix0, ClassifierPrediction) \
            else self._prefix0
        return RunResult(pred, 0, 0.0, 0.0, clock.elapsed(), BUSY, report)

    # ------------------------------------------------------------------ worker lifecycle
    def _get_worker(self) -> ExtractorWorker:
        if self._worker is None:
            self._worker = ExtractorWorker(f"edgeseq-extractor-{id(self):x}")
            # close the thread when the session is garbage-collected (the worker does not refer back)
            self._finalizer = weakref.finalize(self, ExtractorWorker.close, self._worker)
        return self._worker

    @property
    def busy(self) -> bool:
        """True while an extractor that overran an earlier deadline is still running.

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
        >>> model = AnytimeSession(out)
        >>> import threading
        >>> release = threading.Event()
        >>> slow = lambda row: release.wait(5) and row[:1]
        >>> r = model.run({"a": slow}, deadline_s=0.2, inputs=X[0])
        >>> r.stopped_by, r.prefix, model.busy       # "a" overran the deadline and still runs
        ('timeout', 0, True)
        >>> release.set(); model.wait_idle(5), model.busy
        (True, False)
        >>> model.close()
        """
        return self._worker is not None and self._worker.busy

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no overrunning extractor is running; True if idle.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait at most; ``None`` waits as long as it takes.

        Returns
        -------
        bool
            True when the session is idle, False when `timeout` passed first.

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
        >>> model = AnytimeSession(out)
        >>> model.wait_idle(0.0)                     # nothing ever overran: idle at once
        True
        >>> import threading
        >>> release = threading.Event()
        >>> r = model.run({"a": lambda row: release.wait(5) and row[:1]}, deadline_s=0.2, inputs=X[0])
        >>> model.wait_idle(0.01)                    # the overrunning extractor still holds the worker
        False
        >>> release.set(); model.wait_idle(5)
        True
        >>> model.close()
        """
        return self._worker is None or self._worker.wait_idle(timeout)

    def close(self) -> None:
        """Stop the worker thread (it exits as soon as any still-running extractor returns).

        `predict` keeps working; `run` raises afterwards. ``with AnytimeSession(...)`` calls it on exit.

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
        >>> model = AnytimeSession(out)
        >>> model.close()
        >>> model.predict({"a": X[:2, [0]]}, prefix=1).shape
        (2,)
        >>> model.run({"a": lambda row: row[:1]}, inputs=X[0])
        Traceback (most recent call last):
        ...
        edgeseq.errors.EdgeseqError: this AnytimeSession is closed; create a new one to run the anytime loop
        """
        self._closed = True
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _StageCommit:
    """Commits tree stages one after another in one run, feeding each stage's ``state_out`` into
    the next one's ``state_in`` (the loop commits stages in order, each exactly once)."""

    def __init__(self, session: AnytimeSession):
        self.session = session
        self.state = np.zeros((1, session._state_width), np.float32)

    def __call__(self, j: int, rows: list):
        s = self.session
        outs, finite = s._runners[j].call(rows[:s._counts[j]] + [self.state], 1)
        self.state = outs[-1]
        return s._commit(j, rows, (outs, finite))


class _LayerCommit:
    """Runs layer-block stages one after another in one run: each stage gets the groups its graph reads
    and, unless it resets, the previous stage's ``state_out``. A stage with commit false runs (later
    stages read its state) but the prediction returned stays the last committed one."""

    def __init__(self, session: AnytimeSession):
        self.session = session
        self.state = None
        self.last = session._prefix0

    def __call__(self, j: int, rows: list):
        s = self.session
        feed = [rows[p] for p in s._reads[j]] + ([self.state] if s._takes_state[j] else [])
        outs, finite = s._runners[j].call(feed, 1)
        self.state = outs[-1]
        if j in s._committing:
            self.last = s._commit(j, rows, (outs, finite))
        elif not finite:
            s._commit(j, rows, (outs, finite))  # raises the overflow error
        return self.last
