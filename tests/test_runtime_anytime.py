"""AnytimeSession.run on real exports: committed predictions equal `predict` of that prefix, budgets,
deadlines with overrunning extractors, the busy policy, and no thread leaks."""

import gc
import threading
import time

import numpy as np
import pytest

from edgeseq.errors import EdgeseqError, RuntimeInputError
from edgeseq.runtime.session import AnytimeSession, ClassifierPrediction, SessionBusyError
from sequences import random_sequence
from test_runtime_support import agrees, exported, group_features


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    seq = random_sequence(np.random.default_rng(4), (2, 3, 1, 2))
    return seq, exported(seq, tmp_path_factory.mktemp("anytime"))


@pytest.fixture
def sess(model):
    s = AnytimeSession(model[1])
    yield s
    s.close()


def row_extractors(seq):
    """One extractor per group that slices the sample row passed as `inputs`."""
    return {seq.group_names[g]: (lambda x, c=seq.group_columns[g]: x[c]) for g in range(seq.n_groups)}


def name_at(seq, k):
    return seq.group_names[seq.order[k]]


def test_run_commits_the_same_prediction_as_predict(model, sess):
    seq, _ = model
    x = np.random.default_rng(0).normal(size=seq.n_features_in)
    want = sess.predict(group_features(seq, x[None, :]))
    for deadline in (None, 5.0):
        r = sess.run(row_extractors(seq), inputs=x, deadline_s=deadline)
        assert r.prefix == seq.n_prefixes - 1 and r.stopped_by == "complete"
        assert agrees(r.prediction, want)  # the loop's stage graph vs predict's joined graph
        assert r.spent_cost == pytest.approx(seq.cum_cost[-1]) and r.prefix_cost == r.spent_cost
        assert r.elapsed_s > 0 and [g.status for g in r.report] == ["ok"] * seq.n_groups
        assert [g.name for g in r.report] == [name_at(seq, k) for k in range(seq.n_groups)]


def test_budget_stops_before_a_group_that_does_not_fit(model, sess):
    seq, _ = model
    x = np.random.default_rng(1).normal(size=seq.n_features_in)
    for j in range(seq.n_prefixes):
        budget = seq.cum_cost[j] + 0.5 * (seq.cum_cost[j + 1] - seq.cum_cost[j]) if j < seq.n_groups \
            else seq.cum_cost[j]
        r = sess.run(row_extractors(seq), budget=budget, inputs=x)
        assert r.prefix == j and r.spent_cost <= budget
        assert agrees(r.prediction, sess.predict(group_features(seq, x[None, :]), prefix=j))


def test_overrunning_extractor_returns_on_time_then_busy_policy(model, sess):
    seq, _ = model
    x = np.zeros(seq.n_features_in)
    release = threading.Event()
    ex = row_extractors(seq)
    second = name_at(seq, 1)
    inner = ex[second]
    ex[second] = lambda v: (release.wait(10), inner(v))[1]
    t = time.perf_counter()
    r = sess.run(ex, deadline_s=0.2, inputs=x)
    took = time.perf_counter() - t
    assert 0.19 <= took < 0.7, took
    assert r.prefix == 1 and r.stopped_by == "timeout" and r.timed_out
    assert r.report[1].status == "timeout"
    assert agrees(r.prediction, sess.predict(group_features(seq, x[None, :]), prefix=1))
    assert sess.busy
    # policy: with a deadline, wait at most that long, then answer with prefix 0, reported busy
    t = time.perf_counter()
    r2 = sess.run(row_extractors(seq), deadline_s=0.1, inputs=x)
    assert time.perf_counter() - t < 0.6
    assert r2.prefix == 0 and r2.stopped_by == "busy" and repr(second) in r2.report[0].message
    # without a deadline: refuse instead of blocking forever
    with pytest.raises(SessionBusyError, match="wait_idle"):
        sess.run(row_extractors(seq), inputs=x)
    release.set()
    assert sess.wait_idle(5) and not sess.busy
    r3 = sess.run(row_extractors(seq), inputs=x)
    assert r3.prefix == seq.n_prefixes - 1


def test_busy_worker_is_waited_for_within_the_deadline(model, sess):
    seq, _ = model
    x = np.zeros(seq.n_features_in)
    ex = row_extractors(seq)
    first = name_at(seq, 0)
    inner = ex[first]
    ex[first] = lambda v: (time.sleep(0.3), inner(v))[1]
    r = sess.run(ex, deadline_s=0.05, inputs=x)
    assert r.prefix == 0 and r.report[0].status == "timeout"
    r2 = sess.run(row_extractors(seq), deadline_s=3.0, inputs=x)  # the overrun ends in ~0.25 s
    assert r2.prefix == seq.n_prefixes - 1


def test_raising_and_invalid_extractors_keep_the_committed_prediction(model, sess):
    seq, _ = model
    x = np.ones(seq.n_features_in)
    p2 = sess.predict(group_features(seq, x[None, :]), prefix=2)
    for bad, status in ((lambda v: 1 / 0, "error"), (lambda v: np.full(1, np.nan), "invalid")):
        ex = {**row_extractors(seq), name_at(seq, 2): bad}
        for deadline in (None, 2.0):
            r = sess.run(ex, inputs=x, deadline_s=deadline)
            assert r.prefix == 2 and r.report[2].status == status
            assert agrees(r.prediction, p2)


def test_run_argument_errors(model, sess):
    seq, _ = model
    with pytest.raises(RuntimeInputError, match="unknown group"):
        sess.run({"nope": lambda v: v})
    with pytest.raises(RuntimeInputError, match="not callable"):
        sess.run({seq.group_names[0]: 3})
    with pytest.raises(RuntimeInputError, match="dict"):
        sess.run([lambda v: v])
    with pytest.raises(RuntimeInputError, match="deadline_s"):
        sess.run({}, deadline_s=float("inf"))
    with pytest.raises(RuntimeInputError, match="deadline_s"):
        sess.run({}, deadline_s=-1)


def test_prefix0_result_is_read_only(model, sess):
    r = sess.run({}, inputs=None)
    assert r.prefix == 0 and r.report[0].status == "no_extractor"
    with pytest.raises(ValueError):
        r.prediction[0] = 1.0


def test_closed_session_refuses_runs_but_predicts(model):
    seq, out = model
    s = AnytimeSession(out)
    s.run(row_extractors(seq), inputs=np.zeros(seq.n_features_in), deadline_s=1)
    s.close()
    with pytest.raises(EdgeseqError, match="closed"):
        s.run(row_extractors(seq), deadline_s=1)
    assert s.predict({}, prefix=0).shape == (1,)


def test_no_thread_leak_across_overruns_and_sessions(model):
    seq, out = model
    x = np.zeros(seq.n_features_in)
    before = threading.active_count()
    s = AnytimeSession(out)
    ex = row_extractors(seq)
    first = name_at(seq, 0)
    ex[first] = lambda v: time.sleep(0.02)
    for _ in range(20):  # every run overruns; at most one worker thread exists for the session
        s.run(ex, deadline_s=0.005, inputs=x)
        assert threading.active_count() <= before + 1
    assert s.wait_idle(10)
    # sessions dropped without close() stop their worker when garbage-collected
    for _ in range(10):
        t = AnytimeSession(out)
        t.run(row_extractors(seq), deadline_s=1, inputs=x)
        del t
    s.close()
    del s
    gc.collect()
    deadline = time.time() + 10  # generous: on a loaded CI machine threads take a while to be scheduled
    while threading.active_count() > before and time.time() < deadline:
        time.sleep(0.01)
        gc.collect()
    assert threading.active_count() <= before  # threads of earlier tests may also have ended meanwhile


def test_concurrent_runs_do_not_overlap_extractors(model, sess):
    seq, _ = model
    x = np.zeros(seq.n_features_in)
    active, peak = [0], [0]
    lock = threading.Lock()

    def tracked(inner):
        def f(v):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.002)
            with lock:
                active[0] -= 1
            return inner(v)
        return f
    ex = {k: tracked(f) for k, f in row_extractors(seq).items()}
    results = []
    threads = [threading.Thread(target=lambda d=d: results.append(sess.run(ex, inputs=x, deadline_s=d)))
               for d in (None, 2.0, None, 2.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1 and all(r.prefix == seq.n_prefixes - 1 for r in results)


def test_classifier_run_returns_labels_and_proba(tmp_path):
    seq = random_sequence(np.random.default_rng(8), (2, 2), n_outputs=3, link="softmax")
    s = AnytimeSession(exported(seq, tmp_path))
    x = np.random.default_rng(0).normal(size=seq.n_features_in)
    r = s.run(row_extractors(seq), inputs=x, budget=seq.cum_cost[1])
    assert isinstance(r.prediction, ClassifierPrediction) and r.prefix == 1
    assert r.prediction.proba.shape == (1, 3) and r.prediction.label[0] in seq.classes
    ref = s.predict(group_features(seq, x[None, :]), prefix=1)
    assert agrees(r.prediction.proba, ref.proba)
    s.close()


def test_late_results_do_not_accumulate(model):
    """Each overrunning extractor returns 4 MB after its run gave up; none of it may be retained."""
    import tracemalloc
    seq, out = model
    s = AnytimeSession(out)
    x = np.zeros(seq.n_features_in)
    first = name_at(seq, 0)
    ex = {first: lambda v: (time.sleep(0.02), np.ones((1 << 19,)))[1]}  # 4 MB, and the wrong shape
    statuses = []
    tracemalloc.start()
    try:
        s.run(ex, deadline_s=0.005, inputs=x)
        s.wait_idle(2)
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(15):
            r = s.run(ex, deadline_s=0.005, inputs=x)
            # "deadline": on a loaded machine the worker may not pick the job up within the deadline
            statuses.append(r.report[0].status)
            s.wait_idle(2)
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
        s.close()
    assert set(statuses) <= {"timeout", "busy", "deadline"} and "timeout" in statuses, statuses
    assert grown < 1 << 20, grown  # far below one late result (4 MB)
