"""Shared by the C speed benchmarks (c_runtime_speed.py, c_trees.py): their command line and the
compiler they report.

Why one helper: both compare the runtime with a bare loop compiled in the same run, so they take the
same options (``--iters``, ``--cc``, ``--quick`` = an eighth of the iterations) and must print and
record the compiler and flags the same way. Imported as ``_cbench`` (the script's folder is first on
``sys.path``).
"""

from __future__ import annotations

import argparse
import subprocess

from _results import machine_info  # noqa: I001  (bench/ is on sys.path)

from edgeseq.export.c_harness import STRICT_FLAGS, find_c_compiler


def c_bench_setup(description: str, default_iters: int, argv=None) -> tuple[int, str, str]:
    """Parse the options, find the compiler, print machine and compiler; return (iterations, cc, version).

    Examples
    --------
    >>> iters, cc, version = c_bench_setup("demo", 800, ["--quick"])  # doctest: +ELLIPSIS
    machine: ...
    compiler: ...
    >>> iters
    100
    """
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--iters", type=int, default=default_iters)
    ap.add_argument("--cc", default=None)
    ap.add_argument("--quick", action="store_true", help="an eighth of the iterations")
    args = ap.parse_args(argv)
    cc = find_c_compiler(args.cc)
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['machine']}, load average at start {info['load_start']}")
    print(f"compiler: {version}, flags: {' '.join(STRICT_FLAGS)} -O2\n")
    return (args.iters // 8 if args.quick else args.iters), cc, version
