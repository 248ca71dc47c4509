"""Compile cost of the two float C tree forms, the figure behind ``c_trees="auto"``.

Usage: python bench/tree_code_compile.py [--quick]

For the two LightGBM models of bench/peers.py (100 trees x 31 leaves; the digits multiclass, 1,000
trees x 15 leaves) it writes the model's C in each form (``table``: node tables; ``code``: one
function per stage) and measures the CPU seconds (user + system of the compiler process, so a
shared machine's load inflates them far less than wall time) that ``gcc -std=c99 -O2 -c`` takes on
it, and the milliseconds per node. ``auto`` writes code up to ``CODE_AUTO_MAX_NODES`` nodes: the cut
keeps the code form's compile near the 2 s budget. Writes bench/results/tree_code_compile.json.
``--quick`` keeps the 100-tree model only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from peers import digits, regression

from edgeseq.export.c_harness import runtime_dir
from edgeseq.export.kinds.trees.c_float import CODE_AUTO_MAX_NODES, resolve_c_trees, write_c_tree_model


def compile_cpu_seconds(src: Path) -> float:
    """CPU seconds (children's user + system) of one gcc -O2 compile of `src`."""
    before = os.times()
    subprocess.run(["gcc", "-std=c99", "-O2", "-c", f"-I{runtime_dir()}", f"-I{src.parent}", str(src),
                    "-o", str(src.with_suffix(".o"))], check=True)
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the 100-tree model only")
    args = ap.parse_args(argv)
    info = machine_info()
    models = [("regression, LightGBM 100 trees x 31 leaves", regression)]
    if not args.quick:
        models.append(("multiclass digits, LightGBM 1,000 trees x 15 leaves", digits))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for title, make in models:
            model = make()[2]
            n = model.ensemble.n_nodes
            for form in ("table", "code"):
                d = Path(tmp) / f"{len(rows)}"
                d.mkdir()
                write_c_tree_model(model, d, "m", c_trees=form)
                s = compile_cpu_seconds(d / "edgeseq_model.c")
                rows.append([title, n, form, round(s, 2), round(1000 * s / n, 3), resolve_c_trees(model, "auto")])
                print(f"{title}: {form} {s:.2f} s CPU ({1000 * s / n:.3f} ms per node)", flush=True)
    table = {"title": f"gcc -O2 CPU seconds to compile the model's C, per form (c_trees=\"auto\" writes code up to "
                      f"{CODE_AUTO_MAX_NODES:,} nodes)",
             "columns": ["model", "nodes", "c_trees", "compile CPU s (gcc -O2)", "ms per node", "auto picks"],
             "rows": rows}
    write_result("tree_code_compile", {"code_auto_max_nodes": CODE_AUTO_MAX_NODES, "tables": [table],
                                       "run_as": "OMP_NUM_THREADS=1 nice -n 10"},
                 command_line(), machine_info(info["load_start"]))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
