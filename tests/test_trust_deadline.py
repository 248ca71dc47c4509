"""Deadline mode stays on time when the slow part is converting an extractor's result (issue 11
item 8): conversion runs on the worker inside the deadline; far deadlines work; SystemExit from an
extractor reaches the caller with and without a deadline."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from sequences import random_sequence
from test_runtime_support import exported

from edgeseq.runtime.session import AnytimeSession


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    seq = random_sequence(np.random.default_rng(8), (2, 1, 2))
    return seq, exported(seq, tmp_path_factory.mktemp("deadline"))


@pytest.fixture
def sess(model):
    s = AnytimeSession(model[1])
    yield s
    s.release.set()
    s.wait_idle(10)
    s.close()


@pytest.fixture(autouse=True)
def _release(sess):
    sess.release = threading.Event()


def _extractors(seq, first_value):
    ex = {seq.group_names[g]: (lambda x, c=seq.group_columns[g]: x[c]) for g in range(seq.n_groups)}
    ex[seq.group_names[seq.order[0]]] = lambda x: first_value
    return ex


class SlowArray:
    def __init__(self, release, values):
        self.release, self.values = release, values

    def __array__(self, dtype=None, copy=None):
        self.release.wait(5)
        return np.asarray(self.values, dtype=dtype)


class SlowLen:
    def __init__(self, release, n):
        self.release, self.n = release, n

    def __len__(self):
        self.release.wait(5)
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return 0.0


class Endless:
    """A sequence whose items never come (until the test releases it, so no thread outlives the test)."""

    def __init__(self, release):
        self.release = release

    def __len__(self):
        return 2

    def __getitem__(self, i):
        while not self.release.wait(0.01):
            pass
        raise IndexError(i)


@pytest.mark.parametrize("kind", ["array", "len", "endless"])
def test_slow_conversion_counts_against_the_deadline(model, sess, kind):
    seq, _ = model
    dim = int(seq.group_columns[int(seq.order[0])].size)
    value = {"array": lambda: SlowArray(sess.release, np.zeros(dim)), "len": lambda: SlowLen(sess.release, dim),
             "endless": lambda: Endless(sess.release)}[kind]()
    t = time.perf_counter()
    r = sess.run(_extractors(seq, value), deadline_s=0.05, inputs=np.zeros(seq.n_features_in))
    took = time.perf_counter() - t
    assert took < 0.6, took
    assert r.prefix == 0 and r.report[0].status == "timeout"


def test_negative_control_fast_conversion_completes(model, sess):
    seq, _ = model
    dim = int(seq.group_columns[int(seq.order[0])].size)
    sess.release.set()
    r = sess.run(_extractors(seq, SlowArray(sess.release, np.zeros(dim))), deadline_s=5.0,
                 inputs=np.zeros(seq.n_features_in))
    assert r.prefix == seq.n_prefixes - 1 and r.stopped_by == "complete"


def test_far_deadline_is_no_limit(model, sess):
    seq, _ = model
    x = np.zeros(seq.n_features_in)
    ex = {seq.group_names[g]: (lambda v, c=seq.group_columns[g]: v[c]) for g in range(seq.n_groups)}
    r = sess.run(ex, deadline_s=1e10, inputs=x)
    assert r.prefix == seq.n_prefixes - 1


@pytest.mark.parametrize("deadline", [None, 5.0])
def test_system_exit_reaches_the_caller_in_both_modes(model, sess, deadline):
    seq, _ = model

    def leave(_):
        raise SystemExit(3)
    with pytest.raises(SystemExit):
        sess.run(_extractors(seq, None) | {seq.group_names[seq.order[0]]: leave}, deadline_s=deadline,
                 inputs=np.zeros(seq.n_features_in))
    assert sess.wait_idle(5)
