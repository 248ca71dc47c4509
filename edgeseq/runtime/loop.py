"""The anytime loop: compute groups in sequence order, commit each prefix's prediction, stop in time.

Independent of onnxruntime: the caller passes `commit(j, rows) -> prediction` (the session's prefix
graphs in production, a fake in tests), so the scheduling policy is tested on its own.

Policies (also in the README):
* budget (cost units): a group is started only if the prefix it completes is affordable under the
  one budget rule (cumulative cost <= budget, exactly); the first group that does not fit ends
  the run — later groups are never skipped to, because prefixes are contiguous.
* deadline (wall seconds from the call): extractors run on the session's worker thread and the
  loop waits at most until the deadline; an overrunning extractor is reported `timeout`, its late
  result is discarded, and the last committed prediction is returned at once. If the deadline
  passes before the worker thread has even started the extractor, the job is withdrawn (it never
  runs, the session stays idle) and the group is reported `deadline`.
* an extractor that raises, or returns a wrong shape / NaN / Inf, is reported (`error` /
  `invalid`) and ends the run; the last committed prediction is returned (no exception). Turning
  the returned value into an array is part of the extractor's time (on the worker, inside the
  deadline). SystemExit and KeyboardInterrupt are not reported: they reach the caller, with or
  without a deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from edgeseq.errors import EdgeseqError
from edgeseq.runtime.inputs import as_group_array
from edgeseq.runtime.worker import ABANDONED, WITHDRAWN, clamp_timeout
from edgeseq.budget import budget_affords_nothing, resolve_prefix

# status of a group in a run's report
OK = "ok"                      # computed and committed
ERROR = "error"                # the extractor raised
INVALID = "invalid"            # the extractor returned a wrong shape, NaN/Inf or non-numeric data
TIMEOUT = "timeout"            # the deadline passed while the extractor was running (result discarded)
OVER_BUDGET = "over_budget"    # not started: its cost exceeds what remains of the budget
DEADLINE = "deadline"          # not started: the deadline had already passed
BUSY = "busy"                  # not started: the worker was still running an earlier overrunning extractor
NO_EXTRACTOR = "no_extractor"  # not started: no extractor was given for this group
NOT_REACHED = "not_reached"    # not started: the run ended at an earlier group
CONFIDENT = "confident"        # run outcome: the committed stage passed its stop threshold (stop="confident")


@dataclass
class GroupReport:
    """What happened to one group in one run.

    `status` is one of the module's status constants (``"ok"``, ``"error"``, ``"invalid"``,
    ``"timeout"``, ``"over_budget"``, ``"deadline"``, ``"busy"``, ``"no_extractor"``,
    ``"not_reached"``); `message` says why in words and `exception` keeps what an extractor raised.

    Examples
    --------
    >>> from edgeseq.runtime.loop import Step, anytime_loop
    >>> steps = [Step("a", 1, 1.0), Step("b", 2, 2.0)]
    >>> commit = lambda j, rows: sum(float(r.sum()) for r in rows)   # a stand-in for the prefix models
    >>> extractors = {"a": lambda x: [x], "b": lambda x: [x, 2 * x]}
    >>> def bad(x):
    ...     raise OSError("camera busy")
    >>> r = anytime_loop(steps, commit, 0.0, {"a": extractors["a"], "b": bad}, inputs=1.0)
    >>> [(g.name, g.status) for g in r.report]
    [('a', 'ok'), ('b', 'error')]
    >>> type(r.report[1].exception).__name__
    'OSError'
    """

    name: str
    status: str
    cost: float
    elapsed_s: float | None = None  # extractor wall time (None if not started or still running)
    message: str = ""
    exception: BaseException | None = None  # what the extractor raised (status `error`)


@dataclass
class RunResult:
    """Outcome of one anytime run (one sample): the one result type of the anytime loop.

    `prediction` is what `predict` returns for that one row at `prefix`: an array of shape (1,)
    or (1, P) for regression, a `ClassifierPrediction` with one row for classifiers.
    `budget_affords_nothing` is True when the budget was below the first group's cost, so the
    answer is the prior by construction rather than because something went wrong.

    Examples
    --------
    >>> from edgeseq.runtime.loop import Step, anytime_loop
    >>> steps = [Step("a", 1, 1.0), Step("b", 2, 2.0)]
    >>> commit = lambda j, rows: sum(float(r.sum()) for r in rows)   # a stand-in for the prefix models
    >>> extractors = {"a": lambda x: [x], "b": lambda x: [x, 2 * x]}
    >>> r = anytime_loop(steps, commit, 0.0, extractors, inputs=1.0)
    >>> r.prediction, r.prefix, r.spent_cost, r.stopped_by        # 1 + (1 + 2)
    (4.0, 2, 3.0, 'complete')
    >>> r = anytime_loop(steps, commit, 0.0, extractors, inputs=1.0, budget=0.5)
    >>> r.prediction, r.prefix, r.stopped_by, r.budget_affords_nothing
    (0.0, 0, 'budget', True)
    """

    prediction: object
    prefix: int
    spent_cost: float   # cost units of every group started (a failed or timed-out one included)
    prefix_cost: float  # cumulative cost of the committed prefix
    elapsed_s: float
    stopped_by: str = "complete"  # complete | budget | deadline | timeout | busy | error | invalid | no_extractor | confident
    report: list[GroupReport] = field(default_factory=list)
    budget_affords_nothing: bool = False

    @property
    def timed_out(self) -> bool:
        """True when the run ended because time ran out (deadline passed, extractor overran, or busy).

        Examples
        --------
        >>> from edgeseq.runtime.loop import Step, anytime_loop
        >>> steps = [Step("a", 1, 1.0), Step("b", 2, 2.0)]
        >>> commit = lambda j, rows: sum(float(r.sum()) for r in rows)   # a stand-in for the prefix models
        >>> extractors = {"a": lambda x: [x], "b": lambda x: [x, 2 * x]}
        >>> anytime_loop(steps, commit, 0.0, extractors, inputs=1.0).timed_out
        False
        >>> from edgeseq.runtime.loop import RunResult
        >>> RunResult(0.0, 0, 0.0, 0.0, 0.01, stopped_by="deadline").timed_out
        True
        """
        return self.stopped_by in (TIMEOUT, DEADLINE, BUSY)


@dataclass(frozen=True)
class Step:
    """One group of the sequence as the loop sees it.

    Attributes
    ----------
    name : str
        The group's name (the key of its extractor).
    dim : int
        Number of features the extractor must return.
    cost : float
        The group's cost in the model's cost units.

    Examples
    --------
    >>> from edgeseq.runtime.loop import Step, anytime_loop
    >>> steps = [Step("a", 1, 1.0), Step("b", 2, 2.0)]
    >>> commit = lambda j, rows: sum(float(r.sum()) for r in rows)   # a stand-in for the prefix models
    >>> extractors = {"a": lambda x: [x], "b": lambda x: [x, 2 * x]}
    >>> r = anytime_loop(steps, commit, 0.0, {"a": lambda x: [x, x]}, inputs=1.0)   # 2 values, dim 1
    >>> r.prefix, r.report[0].status
    (0, 'invalid')
    """

    name: str
    dim: int
    cost: float


class _Clock:
    """Deadline bookkeeping in one place.

    `deadline` is the caller's instant; `end` is when the loop must stop waiting, earlier by
    `reserve_s`: the run's own wrap-up after it stops waiting (taking the GIL back from the worker,
    building the result, returning), so that the *return* lands by the deadline. At most half the
    deadline is reserved, the commit times the loop keeps free before `end` included (`spare` is
    what is left of that half for them): a time measured on a badly loaded machine must not leave a
    run no time to compute anything — and since a commit time is measured only when the stage
    commits, one outlier that reserved more than the deadline would otherwise keep its stage from
    ever being tried again, and every later run would return the prior."""

    def __init__(self, deadline_s: float | None, reserve_s: float = 0.0):
        self.t0 = time.perf_counter()
        self.deadline = None if deadline_s is None else self.t0 + deadline_s
        self.end = None if deadline_s is None else self.deadline - min(reserve_s, deadline_s / 2)
        self.spare = 0.0 if deadline_s is None else max(0.0, deadline_s / 2 - (self.deadline - self.end))

    def remaining(self) -> float | None:
        return None if self.end is None else clamp_timeout(self.end - time.perf_counter())

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


class TimeEstimate:
    """A running estimate of a duration that errs on the late side: mean + 4 x mean deviation.

    This is the retransmission timer of TCP (Jacobson's algorithm): one slow sample raises the
    estimate at once, and it decays back within about ten ordinary samples, so a deadline run
    reserves enough for its own wrap-up on a loaded machine without keeping one outlier for ever.

    Examples
    --------
    >>> e = TimeEstimate()
    >>> e.value
    0.0
    >>> for x in (1e-4, 1e-4, 1e-4):
    ...     e.add(x)
    >>> round(e.value * 1e6)                     # settles towards the steady duration (100 us)
    213
    >>> e.add(1e-3); round(e.value * 1e6)        # one slow sample: covered at once
    1197
    """

    __slots__ = ("mean", "dev", "n")

    def __init__(self):
        self.mean = self.dev = 0.0
        self.n = 0

    def add(self, seconds: float) -> None:
        """Take one measured duration (seconds) into the estimate.

        Examples
        --------
        >>> e = TimeEstimate()
        >>> e.add(0.002); e.n, e.mean, e.dev          # the first sample sets the mean, half of it the deviation
        (1, 0.002, 0.001)
        """
        if self.n == 0:
            self.mean, self.dev = seconds, seconds / 2
        else:
            self.dev += 0.25 * (abs(seconds - self.mean) - self.dev)
            self.mean += 0.125 * (seconds - self.mean)
        self.n += 1

    @property
    def value(self) -> float:
        """The duration to reserve, in seconds (0 before any sample).

        Examples
        --------
        >>> e = TimeEstimate()
        >>> e.value
        0.0
        >>> e.add(0.001); round(e.value, 6)            # 3x the first sample: mean + 4 x (sample / 2)
        0.003
        """
        return self.mean + 4.0 * self.dev


class WrapUp:
    """What a deadline run reserves for its own work after a wait: one `TimeEstimate` per stage
    for committing it (`commit[j]`), and one for the tail (`tail`: from the moment the loop should
    stop waiting to the moment `run` returns — taking the GIL back from a busy worker, building the
    result). The loop waits on an extractor only until the deadline minus the tail minus the
    commit time of the stages that extractor completes, so the return lands by the deadline.

    Examples
    --------
    >>> w = WrapUp(3)
    >>> w.commit[2].add(2e-4); w.tail.add(5e-5)
    >>> round(w.commit[2].value * 1e6), round(w.tail.value * 1e6)
    (600, 150)
    """

    def __init__(self, n_stages: int):
        self.commit = [TimeEstimate() for _ in range(n_stages)]
        self.tail = TimeEstimate()


class _Extract:
    """One group's work as a single job: call the extractor, then convert its result to float32.

    The conversion belongs inside the time limit: an object whose ``__array__`` or ``__len__`` is
    slow (or endless) must make the group overrun the deadline, not the loop after it. Returns
    (True, array) or (False, the EdgeseqError saying why the value is unusable)."""

    def __init__(self, extractor, step: Step):
        self.extractor, self.step = extractor, step

    def __call__(self, inputs):
        value = self.extractor(inputs)
        try:
            return True, as_group_array(self.step.name, value, self.step.dim, one_row=True)
        except EdgeseqError as exc:
            return False, exc


def _call(extractor, inputs, step: Step, worker, clock: _Clock, slack: float = 0.0):
    """Run one extractor and convert its result: inline without a deadline, on the worker with one.

    Returns (ok, value, elapsed_s), TIMEOUT (it overran and keeps running, result dropped) or
    DEADLINE (the deadline passed before the worker thread started it: it never runs). In both
    modes an Exception is reported (ok False) and anything else (SystemExit, KeyboardInterrupt) is
    re-raised to the caller. `slack` (seconds) is kept free before the clock's end: the time to
    commit what this group completes, so a result that could not be committed in time is not waited for."""
    job = _Extract(extractor, step)
    if worker is None:
        t = time.perf_counter()
        try:
            return True, job(inputs), time.perf_counter() - t
        except Exception as exc:  # noqa: BLE001 — reported, the committed prediction stands
            return False, exc, time.perf_counter() - t
    ticket = worker.submit(job, inputs, step.name)
    outcome = worker.wait(ticket, max(0.0, clock.remaining() - slack))
    if outcome == WITHDRAWN:  # the deadline passed before the thread picked the job up
        return DEADLINE
    if outcome == ABANDONED:
        return TIMEOUT
    if not outcome.ok and not isinstance(outcome.value, Exception):
        raise outcome.value  # as inline: SystemExit / KeyboardInterrupt are the caller's
    return outcome.ok, outcome.value, outcome.elapsed_s


def anytime_loop(steps: list[Step], commit, prefix0_prediction, extractors: dict, inputs=None,
                 budget: float | None = None, deadline_s: float | None = None, worker=None,
                 clock: _Clock | None = None, stages=None, wrapup: WrapUp | None = None, stop=None) -> RunResult:
    """Run the loop; `worker` must be given (and idle) when `deadline_s` is.

    The budget decides how far the loop may go with the one budget rule (`resolve_prefix` on the
    steps' cumulative costs), so a run stops exactly where `predict(budget=...)` would.

    Parameters
    ----------
    steps : list of Step
        The groups in computation order.
    commit : callable
        ``commit(j, rows)`` returns the prediction of prefix j from the validated rows of its groups.
    prefix0_prediction : object
        The answer before any group is computed (the prior).
    extractors : dict
        Group name -> callable taking `inputs`.
    inputs : object, optional
        Passed to every extractor.
    budget : float, optional
        Cost units the run may spend.
    deadline_s : float, optional
        Wall-clock seconds from the start; needs `worker`.
    worker : ExtractorWorker, optional
        The idle thread extractors run on when there is a deadline.
    stages : list of (int, float), optional
        Per stage 0..K: how many of `steps` it needs computed, and its cumulative cost. Default: one
        stage per group (affine prefixes). A tree stage may need several new groups or none; it is
        committed as soon as its last group is done, and a group is started only when the stage
        it completes is affordable (the budget rule on the stages' cumulative costs).
    wrapup : WrapUp, optional
        Per-stage commit times, measured here on every commit; with a deadline, a group is waited
        for only until the deadline minus the commit time of the stages it completes (and not
        started when that time has already passed). Default: commits are taken as instant.
    stop : callable, optional
        ``stop(j, prediction)`` is True when stage j's committed prediction is confident
        (per-input stopping): no further stage is committed and no further group started, and the
        run reports ``stopped_by="confident"``. The budget and the deadline apply as before.

    Returns
    -------
    RunResult

    Examples
    --------
    >>> from edgeseq.runtime.loop import Step, anytime_loop
    >>> steps = [Step("a", 1, 1.0), Step("b", 2, 2.0)]
    >>> commit = lambda j, rows: sum(float(r.sum()) for r in rows)   # a stand-in for the prefix models
    >>> extractors = {"a": lambda x: [x], "b": lambda x: [x, 2 * x]}
    >>> r = anytime_loop(steps, commit, "prior", extractors, inputs=1.0, budget=2.5)
    >>> r.prediction, r.prefix, r.stopped_by, [g.status for g in r.report]
    (1.0, 1, 'budget', ['ok', 'over_budget'])

    With stages, one stage needing both groups (cost 3) and a second needing nothing new:

    >>> r = anytime_loop(steps, commit, "prior", extractors, inputs=1.0, stages=[(0, 0.0), (2, 3.0), (2, 3.5)])
    >>> r.prediction, r.prefix, r.prefix_cost, r.stopped_by
    (4.0, 2, 3.5, 'complete')
    >>> r = anytime_loop(steps, commit, "prior", extractors, inputs=1.0, budget=2.5, stages=[(0, 0.0), (2, 3.0)])
    >>> r.prediction, [g.status for g in r.report]      # group "a" alone would complete no stage
    ('prior', ['over_budget', 'not_reached'])
    """
    clock = clock or _Clock(deadline_s)
    if stages is None:
        counts = list(range(len(steps) + 1))
        cum_cost = np.concatenate([[0.0], np.cumsum([s.cost for s in steps])])
    else:
        counts = [int(c) for c, _ in stages]
        cum_cost = np.array([float(c) for _, c in stages])
    limit = resolve_prefix(cum_cost, budget=budget)
    prediction, prefix, spent = prefix0_prediction, 0, 0.0
    rows: list = []
    report = [GroupReport(s.name, NOT_REACHED, s.cost) for s in steps]
    stopped = "complete"
    confident = stop is not None and bool(stop(0, prediction))
    for k, step in enumerate(steps):
        rep = report[k]
        if confident:
            stopped = CONFIDENT
            break
        if k + 1 > counts[limit]:
            rep.status, stopped = OVER_BUDGET, "budget"
            rep.message = f"cost {step.cost:g} exceeds the remaining budget {max(budget - spent, 0.0):g}" \
                if stages is None else f"the stage it belongs to does not fit in the budget {budget:g}"
            break
        if step.name not in extractors:
            rep.status, stopped = NO_EXTRACTOR, NO_EXTRACTOR
            rep.message = "no extractor was given for this group"
            break
        remaining, slack = clock.remaining(), 0.0
        if remaining is not None and wrapup is not None:
            j = prefix
            while j < limit and counts[j + 1] <= k + 1:  # the stages this group would complete
                j += 1
                slack += wrapup.commit[j].value
            slack = min(slack, clock.spare)  # the reserves together stay within half the deadline
        got = DEADLINE if remaining is not None and remaining <= slack else \
            _call(extractors[step.name], inputs, step, worker, clock, slack)
        if got == DEADLINE:  # checked here, or it passed before the worker thread picked the job up
            rep.status, stopped = DEADLINE, DEADLINE
            rep.message = "the deadline had passed before this group could start"
            break
        spent += step.cost
        if got == TIMEOUT:
            rep.status, stopped = TIMEOUT, TIMEOUT
            rep.message = ("the extractor overran the deadline; it keeps running on the session's worker "
                           "thread and its result will be discarded")
            break
        ok, value, rep.elapsed_s = got
        if not ok:
            rep.status, stopped, rep.exception = ERROR, ERROR, value
            rep.message = f"extractor raised {type(value).__name__}: {value}"
            break
        valid, value = value
        if not valid:
            rep.status, stopped, rep.message = INVALID, INVALID, str(value)
            break
        rows.append(value)
        try:
            while prefix < limit and counts[prefix + 1] <= k + 1 and not confident:  # the stages it completes
                t = time.perf_counter()
                prediction, prefix = commit(prefix + 1, rows), prefix + 1
                confident = stop is not None and bool(stop(prefix, prediction))
                if wrapup is not None:
                    wrapup.commit[prefix].add(time.perf_counter() - t)
        except EdgeseqError as exc:  # e.g. the prefix overflows float32 on these values
            rep.status, stopped, rep.message = INVALID, INVALID, str(exc)
            break
        rep.status = OK
    return RunResult(prediction, prefix, spent, float(cum_cost[prefix]), clock.elapsed(), stopped, report,
                     budget_affords_nothing(cum_cost, budget))
