"""Per-prefix latency of AnytimeSession.predict vs a bare onnxruntime InferenceSession.run of the same
graph vs numpy `x @ w + b`, measured side by side in one run (target: AnytimeSession <= 1.3x bare).

Usage: python bench/python_runtime_speed.py [--reps 60] [--calls 200] [--quick]

Writes bench/results/python_runtime_speed.json.

The contenders are timed in interleaved blocks (anytime, bare, numpy, anytime, ...) and the
fastest block of each is kept; many short blocks make that minimum robust on a shared, loaded machine
(a burst from a neighbour spoils a block, not the whole measurement). The
bare session uses the same single-threaded options; its feeds are pre-built (the best case for it).
`iobind` is the IO-binding alternative measured for the record (what AnytimeSession would have to
do with caller arrays: copy into pre-bound buffers, run, copy the output out).
Also reported: the anytime loop's own overhead per group (`run` with trivial extractors), inline
(no deadline) and on the worker thread (with a deadline).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _results import command_line, machine_info, write_result  # noqa: E402  (bench/ is on sys.path)
from sequences import random_sequence  # noqa: E402

from edgeseq.export.writer import export_model  # noqa: E402
from edgeseq.runtime.session import AnytimeSession  # noqa: E402
from edgeseq.runtime.ort import session_options  # noqa: E402

GROUP_SIZES = (4, 16, 8, 32, 2, 64, 8, 16)


def per_call_us(fns: dict, calls: int, reps: int) -> dict:
    """Interleaved blocks of `calls` calls; the fastest block per function, in microseconds per call.

    Every round times the functions in a new order (a seeded shuffle), so no function is always timed
    right after the same one: one that always follows a heavy one is slowed by what that one left in
    the caches (in `bench/peers.py`, edgeseq's one-row prediction timed right after LightGBM's own
    predict took 21 µs per call against 16 µs when timed elsewhere in the round).
    """
    best = {k: float("inf") for k in fns}
    items = list(fns.items())
    order = np.random.default_rng(0)
    for _ in range(reps):
        for i in order.permutation(len(items)):
            k, f = items[i]
            t = time.perf_counter()
            for _ in range(calls):
                f()
            best[k] = min(best[k], (time.perf_counter() - t) / calls)
    return {k: v * 1e6 for k, v in best.items()}


def bench_predict(seq, out: Path, n_rows: int, calls: int, reps: int) -> list[tuple]:
    sess = AnytimeSession(out)
    X = np.random.default_rng(1).normal(size=(n_rows, seq.n_features_in)).astype(np.float32)
    feats = {seq.group_names[g]: np.ascontiguousarray(X[:, seq.group_columns[g]]) for g in range(seq.n_groups)}
    rows = []
    for j in range(1, seq.n_prefixes):
        p = sess.manifest["prefixes"][j]
        bare = ort.InferenceSession(str(out / p["file"]), sess_options=session_options(),
                                    providers=["CPUExecutionProvider"])
        feeds = {g["input_name"]: feats[g["name"]] for g in sess.manifest["groups"][:j]}
        xj = np.ascontiguousarray(X[:, seq.prefix_columns(j)])
        w = seq.coefs[j].astype(np.float32)
        b = seq.intercepts[j].astype(np.float32)
        ref = bare.run(["y"], feeds)[0][:, 0]
        assert np.array_equal(sess.predict(feats, prefix=j), ref)  # same graph, same numbers
        iobound = _io_binding_call(bare, feeds, n_rows)
        assert np.array_equal(iobound()[:, 0], ref)
        t = per_call_us({"anytime": lambda: sess.predict(feats, prefix=j),
                         "bare": lambda: bare.run(["y"], feeds),
                         "iobind": iobound,
                         "numpy": lambda: xj @ w + b}, calls, reps)
        rows.append((j, xj.shape[1], t["anytime"], t["bare"], t["iobind"], t["numpy"]))
    return rows


def _io_binding_call(session, feeds: dict, n_rows: int):
    """The IO-binding alternative a session would need for arbitrary caller arrays: inputs and
    output bound once to our own buffers, the caller's values copied in, the result copied out."""
    io = session.io_binding()
    bufs = {k: np.empty_like(v) for k, v in feeds.items()}
    for k, v in bufs.items():
        io.bind_cpu_input(k, v)
    y = np.empty((n_rows, 1), np.float32)
    io.bind_output("y", "cpu", 0, np.float32, list(y.shape), y.ctypes.data)

    def call():
        for k, v in feeds.items():
            np.copyto(bufs[k], v)
        session.run_with_iobinding(io)
        return y.copy()
    return call


def bench_loop(seq, out: Path, calls: int, reps: int) -> dict:
    sess = AnytimeSession(out)
    x = np.zeros(seq.n_features_in)
    ex = {seq.group_names[g]: (lambda v, c=seq.group_columns[g]: v[c]) for g in range(seq.n_groups)}
    feats = {seq.group_names[g]: x[None, seq.group_columns[g]].astype(np.float32) for g in range(seq.n_groups)}
    J = seq.n_groups
    t = per_call_us({"inline": lambda: sess.run(ex, inputs=x),
                     "worker": lambda: sess.run(ex, inputs=x, deadline_s=10.0),
                     "predict_all": lambda: [sess.predict(feats, prefix=j) for j in range(1, J + 1)]},
                    max(calls // 10, 10), reps)
    sess.close()
    return {k: v for k, v in t.items()} | {"groups": J}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=60, help="interleaved blocks per contender")
    ap.add_argument("--calls", type=int, default=200, help="calls per block")
    ap.add_argument("--quick", action="store_true", help="30 blocks of 100 calls (well under a minute)")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.calls = 30, 100
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['machine']}, Python {info['python']}, numpy {info['numpy']}, "
          f"onnxruntime {info['onnxruntime']}, load average at start {info['load_start']}")
    seq = random_sequence(np.random.default_rng(0), GROUP_SIZES)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model"
        export_model(seq, out)
        print(f"model: {seq.n_groups} groups of sizes {seq.group_sizes[seq.order].tolist()} in sequence order, "
              f"1 output; {args.reps} interleaved blocks of {args.calls} calls, fastest block kept")
        worst, tables = 0.0, []
        for n_rows in (1, 64):
            rows = []
            print(f"\nbatch N = {n_rows}: microseconds per call, and ratios to bare InferenceSession.run")
            print(f"{'prefix':>6} {'d':>4} {'anytime':>9} {'bare ort':>9} {'iobind':>9} {'numpy':>9} "
                  f"{'anytime/bare':>13} {'iobind/bare':>12} {'numpy/bare':>11}")
            for j, d, a, b, io, n in bench_predict(seq, out, n_rows, args.calls, args.reps):
                worst = max(worst, a / b)
                rows.append([j, d, a, b, io, n, a / b, io / b, n / b])
                print(f"{j:>6} {d:>4} {a:>9.2f} {b:>9.2f} {io:>9.2f} {n:>9.2f} {a / b:>13.2f} "
                      f"{io / b:>12.2f} {n / b:>11.2f}")
            tables.append({"title": f"Batch N = {n_rows}: microseconds per call per prefix (fastest of {args.reps} "
                                    f"interleaved blocks of {args.calls} calls); target anytime/bare <= 1.3",
                           "columns": ["prefix", "d", "anytime µs", "bare ort µs", "iobind µs", "numpy µs",
                                       "anytime/bare", "iobind/bare", "numpy/bare"], "rows": rows})
        loop = bench_loop(seq, out, args.calls, args.reps)
        J = loop["groups"]
        print(f"\nanytime loop, one sample through all {J} groups with trivial extractors (microseconds):")
        print(f"  run() inline (no deadline)      {loop['inline']:9.1f}  ({loop['inline'] / J:.1f} per group)")
        print(f"  run() on the worker (deadline)  {loop['worker']:9.1f}  ({loop['worker'] / J:.1f} per group)")
        print(f"  predict() of prefixes 1..{J}       {loop['predict_all']:9.1f}  (the commits alone)")
        print(f"\nworst AnytimeSession/bare ratio: {worst:.2f} (target <= 1.3)")
        tables.append({"title": f"Anytime loop: one sample through all {J} groups, trivial extractors",
                       "columns": ["call", "µs", "µs per group"],
                       "rows": [["run() inline (no deadline)", loop["inline"], loop["inline"] / J],
                                ["run() on the worker (deadline)", loop["worker"], loop["worker"] / J],
                                [f"predict() of prefixes 1..{J}", loop["predict_all"], loop["predict_all"] / J]]})
        write_result("python_runtime_speed", {
            "group_sizes": list(GROUP_SIZES), "reps": args.reps, "calls": args.calls,
            "worst_anytime_over_bare": worst, "target_ratio": 1.3, "tables": tables}, command_line())


if __name__ == "__main__":
    main()
