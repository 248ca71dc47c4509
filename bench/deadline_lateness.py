"""How late `AnytimeSession.run(..., deadline_s=...)` returns: the distribution of (return time - deadline).

Usage: python bench/deadline_lateness.py [--runs 300] [--deadline 0.006] [--extract-ms 1.5] [--tag after]

Writes bench/results/deadline_lateness.json. The model is the cost-sequenced digits LightGBM export of
bench/tree_runtime_speed.py (100 rounds x 10 classes, 8 row groups). Every extractor takes
``--extract-ms`` of wall time in one of two ways: ``spin`` (a pure-Python busy loop, which holds the
GIL the whole time, the hard case for a thread hand-off) and ``sleep`` (``time.sleep``, which
releases it, like an extractor waiting on a sensor or running a GIL-free numpy kernel). Each run's
lateness is ``perf_counter()`` after ``run`` returns minus (start + deadline); negative is early.

The machine is shared: the load average is recorded with every row, and each configuration is run
unpinned, pinned to one core where ``os.sched_setaffinity`` is allowed, and pinned with SCHED_FIFO
priority where ``os.sched_setscheduler`` is allowed (root or CAP_SYS_NICE; skipped otherwise). Results from different
``--tag`` values (e.g. the code before and after a change) are kept side by side in the file. Runs
are 6 ms apart, so a SCHED_FIFO run never uses the whole of a second, which would let the kernel's
real-time throttle stop it for 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from _results import RESULTS, command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from tree_runtime_speed import models

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


def lateness_ms(sess, extractors, X, runs: int, deadline: float) -> tuple[np.ndarray, list[int]]:
    late, prefixes = np.empty(runs), []
    for i in range(runs):
        sess.wait_idle(1.0)  # an abandoned extractor from the previous run must not make this one "busy"
        time.sleep(PAUSE_S)
        t0 = time.perf_counter()
        r = sess.run(extractors, deadline_s=deadline, inputs=X[i % len(X)])
        late[i] = (time.perf_counter() - t0 - deadline) * 1e3
        prefixes.append(r.prefix)
    return late, prefixes


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
    args = ap.parse_args(argv)
    X, by_name = models()
    model = by_name["cost-sequenced"]
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"load average {load}")
    rows, summary = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model"
        export_model(model, out)
        allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
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
                with AnytimeSession(out) as sess:
                    ex = {n: _extractor(c, args.extract_ms / 1e3, how)
                          for n, c in zip(model.group_names, model.group_columns)}
                    lateness_ms(sess, ex, X, 20, args.deadline)  # warm-up (starts the worker thread)
                    if pinned == 2:  # the waiting thread must outrank the worker it shares the core with
                        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(11))
                    load_now = ", ".join(f"{v:.2f}" for v in os.getloadavg())
                    late, prefixes = lateness_ms(sess, ex, X, args.runs, args.deadline)
                    sess.wait_idle(1.0)
                if pinned == 2:
                    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # the next worker inherits 10
                q = np.percentile(late, [50, 90, 99])
                row = [args.tag, how, where, load_now, *(round(float(v), 3) for v in (*q, late.max())),
                       round(float(np.mean(prefixes)), 2)]
                print(row)
                rows.append(row)
                summary[f"{args.tag}/{how}/{('unpinned', 'pinned', 'pinned-fifo')[pinned]}"] = {
                    "p50_ms": q[0], "p90_ms": q[1], "p99_ms": q[2], "max_ms": float(late.max()),
                    "mean_prefix": float(np.mean(prefixes)), "load": load_now}
        _normal()
        if allowed:
            os.sched_setaffinity(0, set(allowed))
    path = RESULTS / "deadline_lateness.json"
    old = {}
    try:  # keep the rows of other tags (the code before a change), replace this tag's
        old = json.loads(path.read_text(encoding="utf-8"))
        rows = [r for r in old["tables"][0]["rows"] if r[0] != args.tag] + rows
        summary = {k: v for k, v in old.get("summary", {}).items() if not k.startswith(args.tag + "/")} | summary
    except (OSError, ValueError, KeyError, IndexError):
        pass
    rows.sort(key=lambda r: (r[0] != "before", r[0], r[1], r[2]))
    env = " ".join(f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS",) if k in os.environ)
    nice = f"nice -n {os.nice(0)} " if os.nice(0) else ""
    commands = {**(old.get("commands", {}) if isinstance(old, dict) else {}),
                args.tag: f"{env} {nice}{command_line()}".strip()}
    table = {"title": f"Lateness (return time - deadline, ms; negative is early) of AnytimeSession.run with "
                      f"deadline_s={args.deadline}, 8 extractors of {args.extract_ms} ms each, cost-sequenced "
                      f"digits LightGBM export, {args.runs} runs per row; 'load' is the 1/5/15-minute load "
                      f"average of the shared 2-core machine when the row was measured",
             "columns": ["code", "extractor", "affinity", "load", "p50", "p90", "p99", "max", "mean prefix"],
             "rows": rows}
    write_result("deadline_lateness", {"runs": args.runs, "deadline_s": args.deadline,
                                       "extract_ms": args.extract_ms, "summary": summary, "commands": commands,
                                       "tables": [table]},
                 command_line(), machine_info(load))  # the plain command; "commands" keeps each tag's environment


if __name__ == "__main__":
    main()
