"""The anytime loop's policies with fake per-prefix predictors (no onnxruntime involved).

The fake commit returns (prefix, sum of every feature so far), so each test can check exactly which
prefix was committed and from which values.
"""

import threading
import time

import numpy as np
import pytest

from edgeseq.runtime.loop import Step, anytime_loop
from edgeseq.runtime.worker import ExtractorWorker

STEPS = [Step("a", 2, 1.0), Step("b", 1, 2.0), Step("c", 3, 4.0)]


def commit(j, rows):
    return (j, float(sum(r.sum() for r in rows)))


def const(values):
    return lambda _inputs: np.asarray(values, dtype=float)


EXTRACTORS = {"a": const([1, 2]), "b": const([10]), "c": const([100, 200, 300])}


def statuses(out):
    return [r.status for r in out.report]


def test_all_groups_computed_without_limits():
    out = anytime_loop(STEPS, commit, "p0", EXTRACTORS)
    assert out.prediction == (3, 613.0) and out.prefix == 3
    assert out.spent_cost == 7.0 and out.stopped_by == "complete"
    assert statuses(out) == ["ok"] * 3
    assert all(r.elapsed_s is not None and r.elapsed_s >= 0 for r in out.report)


@pytest.mark.parametrize("budget, prefix", [(0.0, 0), (0.999, 0), (1.0, 1), (2.9, 1), (3.0, 2),
                                            (6.99, 2), (7.0, 3), (float("inf"), 3)])
def test_budget_is_inclusive_and_never_exceeded(budget, prefix):
    out = anytime_loop(STEPS, commit, "p0", EXTRACTORS, budget=budget)
    assert out.prefix == prefix
    assert out.spent_cost <= budget
    if prefix < 3:
        assert out.report[prefix].status == "over_budget" and out.stopped_by == "budget"
        assert all(s == "not_reached" for s in statuses(out)[prefix + 1:])


def test_budget_float_rounding_counts_as_equal():
    steps = [Step("a", 1, 0.1), Step("b", 1, 0.2)]
    out = anytime_loop(steps, commit, "p0", {"a": const([1]), "b": const([2])}, budget=0.1 + 0.2)
    assert out.prefix == 2


def test_extractors_receive_inputs_and_are_not_called_past_the_budget():
    calls = []

    def rec(name, dim):
        def f(inputs):
            calls.append((name, inputs))
            return np.zeros(dim)
        return f
    ex = {s.name: rec(s.name, s.dim) for s in STEPS}
    anytime_loop(STEPS, commit, "p0", ex, inputs="sample", budget=3.5)
    assert calls == [("a", "sample"), ("b", "sample")]


def test_raising_extractor_keeps_last_committed_prediction():
    def boom(_):
        raise ZeroDivisionError("sensor offline")
    out = anytime_loop(STEPS, commit, "p0", {**EXTRACTORS, "b": boom})
    assert out.prediction == (1, 3.0) and out.prefix == 1
    assert statuses(out) == ["ok", "error", "not_reached"]
    assert "ZeroDivisionError" in out.report[1].message and "sensor offline" in out.report[1].message
    assert isinstance(out.report[1].exception, ZeroDivisionError)
    assert out.spent_cost == 3.0 and out.stopped_by == "error"


@pytest.mark.parametrize("bad, why", [([1, 2], "shape"), ([np.nan], "NaN"), ([np.inf], "NaN/Inf"),
                                      (["x"], "numeric"), (np.zeros((2, 1)), "rows"), (None, "numeric"),
                                      ([1e300], "overflow")])
def test_bad_extractor_output_is_reported_not_raised(bad, why):
    out = anytime_loop(STEPS, commit, "p0", {**EXTRACTORS, "b": lambda _: bad})
    assert out.prefix == 1 and out.prediction == (1, 3.0)
    assert out.report[1].status == "invalid" and why in out.report[1].message
    assert "'b'" in out.report[1].message


def test_one_row_2d_output_is_accepted():
    out = anytime_loop(STEPS, commit, "p0", {**EXTRACTORS, "b": const([[10]])})
    assert out.prefix == 3


def test_missing_extractor_stops_there():
    out = anytime_loop(STEPS, commit, "p0", {"a": EXTRACTORS["a"], "c": EXTRACTORS["c"]})
    assert out.prefix == 1 and statuses(out) == ["ok", "no_extractor", "not_reached"]


def test_prefix0_prediction_when_nothing_fits():
    out = anytime_loop(STEPS, commit, "p0", EXTRACTORS, budget=0.5)
    assert out.prediction == "p0" and out.prefix == 0 and out.spent_cost == 0.0


# ---------------------------------------------------------------------- deadline (worker thread)
@pytest.fixture
def worker():
    w = ExtractorWorker("test-worker")
    yield w
    w.close()


def test_deadline_returns_on_time_when_an_extractor_overruns(worker):
    release = threading.Event()

    def slow(_):
        release.wait(5)
        return np.zeros(1)
    t = time.perf_counter()
    out = anytime_loop(STEPS, commit, "p0", {**EXTRACTORS, "b": slow}, deadline_s=0.15, worker=worker)
    took = time.perf_counter() - t
    assert 0.14 <= took < 0.6, took  # on time: not the 5 s the extractor would take
    assert out.prefix == 1 and out.prediction == (1, 3.0)
    assert statuses(out) == ["ok", "timeout", "not_reached"] and out.timed_out
    assert worker.busy
    release.set()
    assert worker.wait_idle(2)
    assert not worker.busy


def test_late_result_is_discarded(worker):
    release = threading.Event()
    big = np.ones(1)

    def slow(_):
        release.wait(5)
        return big
    out = anytime_loop(STEPS, commit, "p0", {**EXTRACTORS, "b": slow}, deadline_s=0.05, worker=worker)
    assert out.report[1].status == "timeout"
    release.set()
    assert worker.wait_idle(2)
    assert worker._outcome is None  # nothing kept from the abandoned job
    # the worker is reusable and the next job's result is its own, not the late one
    ticket = worker.submit(lambda x: x * 2, 21, "next")
    assert worker.wait(ticket, 2).value == 42


class GatedWorker(ExtractorWorker):
    """A worker whose thread picks up no job until `gate` is set: the case of a thread not yet
    scheduled when the caller's deadline passes."""

    def __init__(self):
        self.gate = threading.Event()
        super().__init__("gated-worker")

    def _loop(self):
        self.gate.wait(10)
        super()._loop()


def _never_started_job_is_withdrawn(run_until_timeout):
    """Time out while the job waits for the thread; it must never run and leave the worker idle."""
    gated = GatedWorker()
    calls = []
    try:
        result = run_until_timeout(gated, lambda _: calls.append(1) or np.zeros(1))
        assert not gated.busy and gated.wait_idle(0)  # idle at once, before the thread ever runs
        gated.gate.set()
        # the thread takes jobs in order: once a later job has returned, a leftover would have run
        assert gated.wait(gated.submit(lambda x: x + 1, 1, "later"), 5).value == 2
        assert calls == []
        return result
    finally:
        gated.gate.set()
        gated.close()


def test_wait_withdraws_a_job_the_thread_has_not_started():
    outcome = _never_started_job_is_withdrawn(
        lambda w, fn: w.wait(w.submit(fn, None, "pending"), 0.02))
    assert outcome == "withdrawn"


def test_deadline_passing_before_the_thread_starts_the_extractor():
    out = _never_started_job_is_withdrawn(
        lambda w, fn: anytime_loop(STEPS, commit, "p0", {**EXTRACTORS, "a": fn}, deadline_s=0.05, worker=w))
    assert out.prefix == 0 and out.prediction == "p0" and out.spent_cost == 0.0
    assert statuses(out) == ["deadline", "not_reached", "not_reached"] and out.stopped_by == "deadline"


def test_deadline_zero_commits_nothing(worker):
    out = anytime_loop(STEPS, commit, "p0", EXTRACTORS, deadline_s=0.0, worker=worker)
    assert out.prefix == 0 and out.report[0].status == "deadline" and out.spent_cost == 0.0


def test_deadline_and_budget_together(worker):
    out = anytime_loop(STEPS, commit, "p0", EXTRACTORS, budget=3.0, deadline_s=5.0, worker=worker)
    assert out.prefix == 2 and out.stopped_by == "budget"


def test_worker_reports_exceptions_and_values(worker):
    def boom(_):
        raise KeyError("k")
    out = anytime_loop(STEPS, commit, "p0", {**EXTRACTORS, "a": boom}, deadline_s=5, worker=worker)
    assert out.prefix == 0 and out.report[0].status == "error"
    out = anytime_loop(STEPS, commit, "p0", EXTRACTORS, deadline_s=5, worker=worker)
    assert out.prefix == 3 and out.prediction == (3, 613.0)


def test_worker_thread_exits_after_close():
    w = ExtractorWorker("closing")
    assert w.alive
    w.close()
    w.join(2)
    assert not w.alive
    with pytest.raises(RuntimeError, match="closed"):
        w.submit(lambda x: x, 1, "late")
