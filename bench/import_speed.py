"""Start-up cost: fresh-interpreter import times and `edgeseq ... --help` wall times, side by side.

A device that only runs an export should pay little more than onnxruntime itself to start
(`import edgeseq.runtime` <= 1.3x `import onnxruntime`), the lazy top-level `import edgeseq` should
cost next to nothing, and every `--help` should answer within 0.4 s. Each case runs in a fresh
interpreter (`python -c ...`); the cases are interleaved round by round (so a burst of load on the
shared machine hits all of them, not one) after one untimed warm-up round (bytecode caches), and
the median of the rounds is kept. `python -c pass` is measured too: the interpreter's own start,
included in every other figure.

    python bench/import_speed.py [--repeats 9] [--quick]

Writes bench/results/import_speed.json.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
RATIO_GOAL = 1.3
HELP_GOAL_S = 0.4
CLI = "from edgeseq.cli import main; main()"
IMPORTS = {  # label -> code run by `python -c`
    "interpreter start (pass)": "pass",
    "import onnxruntime": "import onnxruntime",
    "import edgeseq.runtime": "import edgeseq.runtime",
    "import edgeseq (lazy)": "import edgeseq",
    "import edgeseq.train.linear.regressor": "import edgeseq.train.linear.regressor",
}


def subcommands() -> list[str]:
    """The CLI's subcommands, read from the click group itself (a new command is measured too)."""
    from edgeseq.cli import main

    return sorted(main.commands)


def cases() -> dict[str, list[str]]:
    """label -> argv of every measured case."""
    out = {label: [sys.executable, "-c", code] for label, code in IMPORTS.items()}
    out["edgeseq --help"] = [sys.executable, "-c", CLI, "--help"]
    for sub in subcommands():
        out[f"edgeseq {sub} --help"] = [sys.executable, "-c", CLI, sub, "--help"]
    return out


def wall(argv: list[str]) -> float:
    """Wall time of one fresh process, in seconds; a failing case stops the benchmark."""
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[1:])} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return elapsed


def measure(runs: dict[str, list[str]], repeats: int) -> dict[str, list[float]]:
    """Interleaved rounds: every case once per round; one warm-up round first, not kept."""
    times = {label: [] for label in runs}
    for r in range(repeats + 1):
        for label, argv in runs.items():
            t = wall(argv)
            if r:
                times[label].append(t)
    return times


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9, help="timed rounds; the median is reported")
    ap.add_argument("--quick", action="store_true", help="5 rounds (about a minute)")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats = 5
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['machine']}, Python {info['python']}, onnxruntime "
          f"{info['onnxruntime']}, load average at start {info['load_start']}")
    times = measure(cases(), args.repeats)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["import edgeseq.runtime"] / med["import onnxruntime"]
    helps = {k: v for k, v in med.items() if k.endswith("--help")}
    worst_help = max(helps, key=helps.get)
    rows = []
    print(f"\nmedian of {args.repeats} interleaved rounds, fresh interpreter each (seconds)")
    for label, m in med.items():
        goal = f"<= {HELP_GOAL_S:g} s" if label in helps else ""
        verdict = ("OK" if m <= HELP_GOAL_S else "TOO SLOW") if label in helps else ""
        rows.append([label, m, min(times[label]), max(times[label]), goal, verdict])
        print(f"  {label:40} {m:7.3f}  (min {min(times[label]):.3f}, max {max(times[label]):.3f}) {verdict}")
    print(f"\nimport edgeseq.runtime / import onnxruntime = {ratio:.2f} (goal <= {RATIO_GOAL})  "
          f"{'OK' if ratio <= RATIO_GOAL else 'TOO SLOW'}")
    print(f"slowest help: {worst_help} {helps[worst_help]:.3f} s (goal <= {HELP_GOAL_S} s)")
    write_result("import_speed", {
        "repeats": args.repeats, "median_s": med, "runtime_over_onnxruntime": ratio, "ratio_goal": RATIO_GOAL,
        "slowest_help": worst_help, "slowest_help_s": helps[worst_help], "help_goal_s": HELP_GOAL_S,
        "tables": [
            {"title": f"Ratio measured in the same run (goal <= {RATIO_GOAL:g})",
             "columns": ["ratio", "value", "verdict"],
             "rows": [["import edgeseq.runtime / import onnxruntime", ratio,
                       "OK" if ratio <= RATIO_GOAL else "TOO SLOW"]]},
            {"title": f"Wall time of a fresh interpreter, seconds: median of {args.repeats} interleaved rounds "
                      "(the first line is the interpreter's own start, included in all others)",
             "columns": ["case", "median s", "min s", "max s", "goal", "verdict"], "rows": rows}]},
        command_line(), machine=machine_info(info["load_start"]))


if __name__ == "__main__":
    main()
