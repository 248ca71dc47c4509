"""How late `AnytimeSession.run(..., deadline_s=...)` returns: the distribution of (return time - deadline).

Usage: python bench/deadline_lateness.py [--runs 300] [--deadline 0.006] [--extract-ms 1.5] [--tag after]
       [--models cost-sequenced linear] [--no-defer-gc]

Writes bench/results/deadline_lateness.json. Two models of the digits (8 row groups of 8 pixels, unit
costs): the cost-sequenced LightGBM export of bench/tree_runtime_speed.py (100 rounds x 10 classes),
the issue's model, whose first stage needs 5 of the 8 groups -- 7.5 ms of extraction at 1.5 ms each,
past a 6 ms deadline, so every run returns the prior (mean prefix 0, correctly: no stage can be
committed in time); and a linear `AnytimeClassifier` with one stage per group, where a 6 ms run
commits about three stages, so the commit and its reserve are measured too. Every extractor takes
``--extract-ms`` of wall time in one of two ways: ``spin`` (a pure-Python busy loop, which holds the
GIL the whole time, the hard case for a thread hand-off) and ``sleep`` (``time.sleep``, which
releases it, like an extractor waiting on a sensor or running a GIL-free numpy kernel). Each run's
lateness is ``perf_counter()`` after ``run`` returns minus (start + deadline); negative is early.

The machine is shared: the load average is recorded with every row, and each configuration is run
unpinned, pinned to one core where ``os.sched_setaffinity`` is allowed, and pinned with SCHED_FIFO
priority where ``os.sched_setscheduler`` is allowed (root or CAP_SYS_NICE; skipped otherwise). Results from different
``--tag`` values (e.g. the code before and after a change) are kept side by side in the file. Runs
are 6 ms apart, so a SCHED_FIFO run never uses the whole of a second, which would let the kernel's
real-time throttle stop it for 50 ms. The cyclic garbage collections that start inside timed runs are
counted (``gc in runs``; the session holds the collector off during deadline runs unless
``defer_gc=False``), and the duration of every collection in the process is recorded.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from _results import RESULTS, command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from tree_runtime_speed import models

from edgeseq import AnytimeClassifier
from edgeseq.export.writer import export_model
from edgeseq.runtime.session import AnytimeSession


PAUSE_S = 0.006  # between runs: a real-time thread stays under Linux's throttle (95% of every second)


def _extractor(cols, seconds: float, how: str):
    if how == "sleep":
        def extract(x):
            time.sleep(seconds)
            return x[cols]
    else:
        def extract(x):
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass
            return x[cols]
    return extract


class GCLog:
    """Start and end times of every cyclic garbage collection in this process (gc.callbacks)."""

    def __init__(self):
        self.spans, self._start = [], None

    def __call__(self, phase, info):
        if phase == "start":
            self._start = time.perf_counter()
        elif self._start is not None:
            self.spans.append((self._start, time.perf_counter(), info["generation"]))


GC_LOG = GCLog()


class Phases:
    """Where a timed-out run's time goes, stamped through the runtime's private hooks (bench only):
    the reserve (deadline - the instant the loop stops waiting), the wake-up (that instant -> the
    waiting thread back from its wait, holding the GIL) and the wrap-up (-> `run` returned)."""

    def __init__(self):
        from edgeseq.runtime import session, worker
        self.clock = self.woke = None
        phases, clock_cls, wait = self, session._Clock, worker.ExtractorWorker.wait

        class Clock(clock_cls):
            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                phases.clock = self

        def stamped_wait(w, ticket, timeout):
            out = wait(w, ticket, timeout)
            phases.woke = time.perf_counter()
            return out

        session._Clock, worker.ExtractorWorker.wait = Clock, stamped_wait

    def take(self, returned: float) -> tuple[float, float, float] | None:
        """(reserve, wake-up, wrap-up) in ms of the run that just returned, or None if it did not wait."""
        c, woke = self.clock, self.woke
        self.clock = self.woke = None
        if c is None or c.end is None or woke is None or woke < c.end:
            return None
        return (c.deadline - c.end) * 1e3, (woke - c.end) * 1e3, (returned - woke) * 1e3


PHASES = Phases()


def lateness_ms(sess, extractors, X, runs: int, deadline: float, phases=None) -> tuple[np.ndarray, list[int], int]:
    """(lateness of each run in ms, its committed prefix, how many collections started inside a run);
    the phases of every run that stopped waiting at the clock are appended to `phases`."""
    late, prefixes, inside = np.empty(runs), [], 0
    for i in range(runs):
        sess.wait_idle(1.0)  # an abandoned extractor from the previous run must not make this one "busy"
        time.sleep(PAUSE_S)
        n = len(GC_LOG.spans)
        t0 = time.perf_counter()
        r = sess.run(extractors, deadline_s=deadline, inputs=X[i % len(X)])
        t1 = time.perf_counter()
        late[i] = (t1 - t0 - deadline) * 1e3
        prefixes.append(r.prefix)
        got = PHASES.take(t1)
        if phases is not None and got is not None and r.timed_out:
            phases.append(got)
        inside += sum(1 for a, _, _ in GC_LOG.spans[n:] if t0 <= a <= t1)
    return late, prefixes, inside


def linear_model(X):
    """The digits with one linear stage per row group: a run commits a stage every 1.5 ms."""
    from sklearn.datasets import load_digits
    _, y = load_digits(return_X_y=True)
    groups = [list(range(8 * r, 8 * r + 8)) for r in range(8)]
    est = AnytimeClassifier(groups, np.ones(8), group_names=[f"g{r}" for r in range(8)]).fit(X, y)
    return est.fitted_sequence_


def stage_groups(model) -> list[int]:
    """How many groups each stage 1..K needs computed in all (the first is what a run must finish)."""
    stages = getattr(model, "stages", None)
    if stages is None:  # a linear sequence: one group per stage
        return list(range(1, len(model.group_names) + 1))
    out, n = [], 0
    for st in stages[1:]:
        n += len(st.new_groups)
        out.append(n)
    return out


def _pin() -> str:
    """Pin this process (every thread it starts later inherits it) to its last allowed core."""
    if not hasattr(os, "sched_setaffinity"):
        return "not available on this OS"
    cpus = sorted(os.sched_getaffinity(0))
    try:
        os.sched_setaffinity(0, {cpus[-1]})
    except OSError as exc:
        return f"refused: {exc}"
    return f"core {cpus[-1]}"


def _realtime() -> str:
    """Raise this thread (and the worker threads it starts later) to SCHED_FIFO priority 10."""
    if not hasattr(os, "sched_setscheduler"):
        return "not available on this OS"
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except OSError as exc:  # PermissionError without CAP_SYS_NICE / an RLIMIT_RTPRIO allowance
        return f"refused: {exc}"
    return "SCHED_FIFO 10"


def _normal() -> None:
    if hasattr(os, "sched_setscheduler"):
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--deadline", type=float, default=0.006, help="seconds")
    ap.add_argument("--extract-ms", type=float, default=1.5)
    ap.add_argument("--tag", default="after", help="label of this code version in the results table")
    ap.add_argument("--no-defer-gc", action="store_true",
                    help="AnytimeSession(defer_gc=False): the collector may run inside a run (the code before it was held off)")
    ap.add_argument("--models", nargs="+", default=["cost-sequenced", "linear"], choices=["cost-sequenced", "linear"])
    args = ap.parse_args(argv)
    X, by_name = models()
    by_name["linear"] = linear_model(X)
    gc.callbacks.append(GC_LOG)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"load average {load}")
    rows, summary, structure, split = [], {}, [], []
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    for name in args.models:
        model = by_name[name]
        groups = stage_groups(model)
        structure.append([name, len(groups), " ".join(map(str, groups)), round(groups[0] * args.extract_ms, 2),
                          int(sum(1 for g in groups if g * args.extract_ms <= args.deadline * 1e3))])
        _measure(name, model, X, args, load, rows, summary, split)
        _normal()
        if allowed:
            os.sched_setaffinity(0, set(allowed))
    spans = np.array([(b - a) * 1e3 for a, b, _ in GC_LOG.spans]) if GC_LOG.spans else np.zeros(0)
    gens = np.array([g for _, _, g in GC_LOG.spans], int)
    gc_rows = [[g, int((gens == g).sum()), round(float(spans[gens == g].max()), 3) if (gens == g).any() else None]
               for g in (0, 1, 2)]
    _write(args, rows, summary, structure, gc_rows, split, load)


def _measure(name, model, X, args, load, rows, summary, split) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model"
        export_model(model, out)
        for pinned in (0, 1, 2):  # unpinned; pinned to one core; pinned and real-time priority
            where = "unpinned"
            if pinned:
                where = _pin()
                if pinned == 2 and where.startswith("core"):
                    rt = _realtime()
                    where = f"{where}, {rt}" if not rt.startswith("refused") else rt
                if "refused" in where or "not available" in where:
                    print(f"{where}; skipped")
                    continue
            for how in ("spin", "sleep"):
                with AnytimeSession(out, defer_gc=not args.no_defer_gc) as sess:
                    ex = {n: _extractor(c, args.extract_ms / 1e3, how)
                          for n, c in zip(model.group_names, model.group_columns)}
                    lateness_ms(sess, ex, X, 20, args.deadline)  # warm-up (starts the worker thread)
                    if pinned == 2:  # the waiting thread must outrank the worker it shares the core with
                        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(11))
                    load_now = ", ".join(f"{v:.2f}" for v in os.getloadavg())
                    phases = []
                    late, prefixes, inside = lateness_ms(sess, ex, X, args.runs, args.deadline, phases)
                    sess.wait_idle(1.0)
                if pinned == 2:
                    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # the next worker inherits 10
                q = np.percentile(late, [50, 90, 99])
                row = [args.tag, name, how, where, load_now, *(round(float(v), 3) for v in (*q, late.max())),
                       round(float(np.mean(prefixes)), 2), inside]
                print(row, flush=True)
                rows.append(row)
                ph = np.array(phases).reshape(-1, 3)
                split.append([name, how, where, len(ph)] + [
                    round(float(np.percentile(ph[:, k], p)), 3) if len(ph) else None for k in range(3) for p in (50, 99)])
                summary[f"{args.tag}/{name}/{how}/{('unpinned', 'pinned', 'pinned-fifo')[pinned]}"] = {
                    "p50_ms": q[0], "p90_ms": q[1], "p99_ms": q[2], "max_ms": float(late.max()),
                    "mean_prefix": float(np.mean(prefixes)), "gc_in_runs": inside, "load": load_now}


def _migrate(row: list) -> list:
    """A row written before the model and ``gc in runs`` columns: the cost-sequenced model, not counted."""
    return row if len(row) == 11 else [row[0], "cost-sequenced", *row[1:], None]


def _write(args, rows, summary, structure, gc_rows, split, load) -> None:
    path = RESULTS / "deadline_lateness.json"
    old = {}
    try:  # keep the rows of other tags (the code before a change), replace this tag's
        old = json.loads(path.read_text(encoding="utf-8"))
        rows = [_migrate(r) for r in old["tables"][0]["rows"] if r[0] != args.tag] + rows
        summary = {(k if k.count("/") == 3 else k.replace("/", "/cost-sequenced/", 1)): v
                   for k, v in old.get("summary", {}).items() if not k.startswith(args.tag + "/")} | summary
    except (OSError, ValueError, KeyError, IndexError):
        pass
    rows.sort(key=lambda r: (r[0] != "before", r[0], r[1], r[2], r[3]))
    env = " ".join(f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS",) if k in os.environ)
    nice = f"nice -n {os.nice(0)} " if os.nice(0) else ""
    commands = {**(old.get("commands", {}) if isinstance(old, dict) else {}),
                args.tag: f"{env} {nice}{command_line()}".strip()}
    table = {"title": f"Lateness (return time - deadline, ms; negative is early) of AnytimeSession.run with "
                      f"deadline_s={args.deadline}, 8 extractors of {args.extract_ms} ms each, cost-sequenced "
                      f"digits LightGBM export, {args.runs} runs per row; 'load' is the 1/5/15-minute load "
                      f"average of the shared 2-core machine when the row was measured",
             "columns": ["code", "model", "extractor", "affinity", "load", "p50", "p90", "p99", "max", "mean prefix",
                         "gc in runs"],
             "rows": rows}
    stages = {"title": f"The models' stages (code {args.tag!r}): how many of the 8 groups each stage needs computed, "
                       f"and the extraction time before the first stage can commit at {args.extract_ms} ms per group",
              "columns": ["model", "stages", "groups needed by stage 1..K", "ms to stage 1",
                          f"stages within {args.deadline * 1e3:g} ms"], "rows": structure}
    gcs = {"title": f"Cyclic garbage collections in the benchmark process (code {args.tag!r}; every one, in or out "
                    f"of a run): a collection holds the GIL, so one inside a run makes it that late",
           "columns": ["generation", "collections", "longest ms"], "rows": gc_rows}
    phases = {"title": f"Where a timed-out run's time goes (code {args.tag!r}; ms, p50 and p99 over the runs that "
                       f"stopped waiting at the clock): the reserve is how early the loop stops waiting (the measured "
                       f"commit and wrap-up), the wake-up runs from then until the waiting thread is back with the GIL "
                       f"(the scheduler, then the hand-off from a spinning extractor), the wrap-up from then until "
                       f"run returns (the report, the result, the GIL shared with the abandoned extractor)",
              "columns": ["model", "extractor", "affinity", "runs", "reserve p50", "reserve p99", "wake-up p50",
                          "wake-up p99", "wrap-up p50", "wrap-up p99"], "rows": split}
    write_result("deadline_lateness", {"runs": args.runs, "deadline_s": args.deadline,
                                       "extract_ms": args.extract_ms, "summary": summary, "commands": commands,
                                       "tables": [table, stages, phases, gcs]},
                 command_line(), machine_info(load))  # the plain command; "commands" keeps each tag's environment


if __name__ == "__main__":
    main()
