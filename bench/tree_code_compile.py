"""Compile cost of the two float C tree forms, the figures behind ``c_trees="auto"`` and the code
form's chunks of trees.

Usage: python bench/tree_code_compile.py [--quick] [--chunks 4,8,16,32,64,0] [--no-arm]

For the two LightGBM models of bench/peers.py (100 trees x 31 leaves; the digits multiclass, 1,000
trees x 15 leaves) it writes the model's C in each form (``table``: node tables; ``code``: a
function per stage, a stage of more than ``CODE_CHUNK_MIN_NODES`` nodes walking its trees in chunk
functions of at most ``CODE_CHUNK_TREES`` trees) and
measures the CPU seconds (user + system of the compiler process, so a shared machine's load inflates
them far less than wall time) that ``gcc -std=c99 -O2 -c`` takes on it, and the milliseconds per
node; and the code form at ``-O0``, the floor of any optimisation level for that source. ``auto``
writes code up to ``CODE_AUTO_MAX_NODES`` nodes: the cut keeps the code form's compile near the 2 s
budget.

``--chunks`` adds a table of the code form at each chunk size, every stage of more trees chunked
whatever its node count (0: each stage's trees in one function): gcc -O2 compile CPU seconds, and with bench/peers.py's machinery the emulated
Cortex-M4F SysTick ticks of a full prediction (-O2, the ``edgeseq, c_trees=code`` row of
bench/peers.py) and the flash of runtime + model (-Os); ``--no-arm`` leaves the last two out.
Writes bench/results/tree_code_compile.json. ``--quick`` keeps the 100-tree model only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from peers import arm_figures, digits, edgeseq_source, regression

from edgeseq.export.c_harness import runtime_dir
from edgeseq.export.kinds.trees import c_float
from edgeseq.export.kinds.trees.c_float import (CODE_AUTO_MAX_NODES, CODE_CHUNK_MIN_NODES, CODE_CHUNK_TREES,
                                                resolve_c_trees, write_c_tree_model)


def compile_cpu_seconds(src: Path, opt: str = "-O2") -> float:
    """CPU seconds (children's user + system) of one gcc compile of `src` at `opt`."""
    before = os.times()
    subprocess.run(["gcc", "-std=c99", opt, "-c", f"-I{runtime_dir()}", f"-I{src.parent}", str(src),
                    "-o", str(src.with_suffix(".o"))], check=True)
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def chunk_row(title: str, X, model, chunk: int, d: Path, arm: bool) -> list:
    """[model, chunk size, compile CPU s, M4F ticks, M4F flash B] of the code form at `chunk` trees."""
    with mock.patch.multiple(c_float, CODE_CHUNK_TREES=chunk if chunk > 0 else model.ensemble.n_trees,
                             CODE_CHUNK_MIN_NODES=0):
        c = edgeseq_source(model, d, c_trees="code")
    s = compile_cpu_seconds(d / "edgeseq_model.c")
    flash, ticks = arm_figures(c, d, X.shape[1], c[4]) if arm else (None, None)
    print(f"{title}: code, chunks of {chunk or 'a whole stage'}: {s:.2f} s CPU, {ticks} ticks, {flash} B",
          flush=True)
    return [title, chunk if chunk > 0 else "whole stage", round(s, 2), ticks, flash]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the 100-tree model only")
    ap.add_argument("--chunks", default="", help="comma-separated chunk sizes to sweep (0: whole stage)")
    ap.add_argument("--no-arm", action="store_true", help="no emulated Cortex-M4F ticks or flash in the sweep")
    args = ap.parse_args(argv)
    info = machine_info()
    models = [("regression, LightGBM 100 trees x 31 leaves", regression)]
    if not args.quick:
        models.append(("multiclass digits, LightGBM 1,000 trees x 15 leaves", digits))
    chunks = [int(c) for c in args.chunks.split(",") if c.strip()]
    rows, sweep = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for title, make in models:
            X, _, model = make()
            n = model.ensemble.n_nodes
            for form, opt in (("table", "-O2"), ("code", "-O2"), ("code", "-O0")):
                d = Path(tmp) / f"{len(rows)}"
                d.mkdir()
                write_c_tree_model(model, d, "m", c_trees=form)
                s = compile_cpu_seconds(d / "edgeseq_model.c", opt)
                rows.append([title, n, form, opt, round(s, 2), round(1000 * s / n, 3), resolve_c_trees(model, "auto")])
                print(f"{title}: {form} {opt} {s:.2f} s CPU ({1000 * s / n:.3f} ms per node)", flush=True)
            for chunk in chunks:
                d = Path(tmp) / f"sweep{len(sweep)}"
                d.mkdir()
                sweep.append(chunk_row(title, X, model, chunk, d, not args.no_arm))
    tables = [{"title": f"gcc CPU seconds to compile the model's C, per form (code: stages of more than "
                        f"{CODE_CHUNK_MIN_NODES:,} nodes in chunks of {CODE_CHUNK_TREES} trees; c_trees=\"auto\" "
                        f"writes code up to {CODE_AUTO_MAX_NODES:,} nodes)",
               "columns": ["model", "nodes", "c_trees", "gcc", "compile CPU s", "ms per node", "auto picks"],
               "rows": rows}]
    if sweep:
        tables.append({"title": "The code form per chunk size (every stage of more trees chunked): gcc -O2 compile CPU s, emulated Cortex-M4F ticks of "
                                "a full prediction (-O2) and flash of runtime + model (-Os)",
                       "columns": ["model", "trees per chunk", "compile CPU s (gcc -O2)", "M4F ticks (-O2)",
                                   "M4F flash B (-Os)"],
                       "rows": sweep})
    write_result("tree_code_compile", {"code_auto_max_nodes": CODE_AUTO_MAX_NODES,
                                       "code_chunk_trees": CODE_CHUNK_TREES,
                                       "code_chunk_min_nodes": CODE_CHUNK_MIN_NODES, "tables": tables,
                                       "run_as": "OMP_NUM_THREADS=1 nice -n 10"},
                 command_line(), machine_info(info["load_start"]))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
