"""Where a full prediction's instructions go on the emulated Cortex-M4F: edgeseq's code form vs emlearn.

Usage: python bench/m4f_profile.py [--quick]

bench/peers.py reports SysTick ticks of one full prediction (qemu ``-icount shift=0``: every
instruction is 1 ns of virtual time, a tick of the mps2-an386 SysTick 40 ns, so 40 instructions).
This script builds the same ELF (bench/peers_time.c, -O2, 16 pseudo-random rows) for edgeseq's tree
stages as code (``c_trees="code"``: es_reset, es_next_group once, then es_push_next of every group,
es_current; the multiclass model also with ``c_link="read"``, the link applied by es_current; and each
again with one es_push_all for the whole row instead of the es_push_next loop) and
for emlearn's inline code, runs it under qemu with an execution trace (``-d in_asm,exec,nochain``) and
counts the instructions each function executes from the first call of the prediction to the report
at the end, per prediction. The model's generated functions (edgeseq's stages, emlearn's per-class
predict) are summed as one row. It measures how far the anytime loop's own work (copying and checking each group, the per-stage
readout, link and double-buffered commit) is from the tree code. ``--quick``: the regression only.

Writes bench/results/m4f_profile.json.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import peers  # noqa: I001  (bench/ is on sys.path)
from _results import command_line, machine_info, write_result

TRACE_TB = re.compile(r"Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
INSN = re.compile(r"0x([0-9a-f]+):\s")


def functions(elf: Path) -> list:
    """(start, size, name) of every text symbol of `elf`, sorted by address."""
    out = subprocess.run(["arm-none-eabi-nm", "-S", str(elf)], capture_output=True, text=True, check=True).stdout
    rows = [(int(p[0], 16), int(p[1], 16), p[3]) for p in (line.split() for line in out.splitlines())
            if len(p) == 4 and p[2] in "tT"]
    return sorted(rows)


SPANS = ("es_push_next", "es_push_all", "es_current")  # per call: everything from the call's entry back to its caller


def profile(elf: Path, log: Path) -> tuple[dict, int, dict]:
    """(instructions per function, number of predictions, instructions of each call of the `SPANS`
    functions -- the function and all it calls, until contender_predict runs again) between the first
    contender_predict and the final printf of peers_time.c."""
    from edgeseq.export.c_arm import QEMU, TARGETS
    target = TARGETS["cortex-m4f"]
    subprocess.run([QEMU, "-M", target.machine, "-cpu", target.qemu_cpu, "-nographic", "-monitor", "none",
                    "-serial", "none", "-icount", "shift=0", "-d", "in_asm,exec,nochain", "-D", str(log),
                    "-semihosting-config", "enable=on,target=native,arg=x", "-kernel", str(elf)],
                   check=True, capture_output=True, timeout=900)
    funcs = functions(elf)
    starts = [f[0] for f in funcs]

    def name(pc: int) -> str:
        i = bisect.bisect_right(starts, pc) - 1
        return funcs[i][2] if i >= 0 and pc < funcs[i][0] + funcs[i][1] else "?"

    predict = next(f[0] for f in funcs if f[2] == "contender_predict")
    stop = {f[0] for f in funcs if f[2] in ("printf", "_printf_r", "iprintf")}
    entry = {f[0]: f[2] for f in funcs if f[2] in SPANS}
    spans, open_span = collections.defaultdict(list), None
    tb_len, counts, calls, current, started = {}, collections.Counter(), 0, None, False
    with open(log, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("IN:"):
                current = None
                continue
            t = TRACE_TB.match(line)
            if t:
                pc = int(t.group(1), 16)
                if pc in stop and started:
                    break
                calls += pc == predict
                started = started or pc == predict
                if started:
                    fn = name(pc)
                    counts[fn] += tb_len.get(pc, 0)
                    if open_span is not None and fn == "contender_predict":
                        open_span = None  # the call returned
                    if pc in entry:
                        spans[entry[pc]].append(0)
                        open_span = entry[pc]
                    if open_span is not None:
                        spans[open_span][-1] += tb_len.get(pc, 0)
                continue
            m = INSN.match(line)
            if m:
                if current is None:  # the first instruction of a translated block: its address names it
                    current = int(m.group(1), 16)
                    tb_len[current] = 0
                tb_len[current] += 1
    return dict(counts), calls, dict(spans)


def rows_for(title: str, contender: str, counts: dict, calls: int, ticks: int, prefix: str) -> list:
    grouped = collections.Counter()
    for fn, n in counts.items():
        grouped["the model's generated tree code" if fn.startswith(prefix) else fn] += n
    total = sum(grouped.values())
    rows = [[title, contender, fn, round(n / calls, 1), round(100.0 * n / total, 1)]
            for fn, n in grouped.most_common() if n / total >= 0.01]
    rest = total - sum(n for fn, n in grouped.items() if n / total >= 0.01)
    rows.append([title, contender, "other (each < 1 %)", round(rest / calls, 1), round(100.0 * rest / total, 1)])
    rows.append([title, contender, f"total (SysTick ticks {ticks} x 40 = {ticks * 40})", round(total / calls, 1),
                 100.0])
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the regression model only")
    args = ap.parse_args(argv)
    info = machine_info()
    specs = [("regression, LightGBM 100 trees x 31 leaves", peers.regression)]
    if not args.quick:
        specs.append(("multiclass digits, LightGBM 1,000 trees x 15 leaves", peers.digits))
    rows, span_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for title, make in specs:
            X, _, model = make()
            n_feat, n_out = X.shape[1], model.n_outputs
            rows_of = (peers.CODE_ROW, peers.READ_ROW) if model.link != "identity" else (peers.CODE_ROW,)
            rows_of += (peers.CODE_ALL_ROW, peers.READ_ALL_ROW) if model.link != "identity" else (peers.CODE_ALL_ROW,)
            for contender in (*rows_of, "emlearn inline"):
                d = tmp / f"{len(rows)}"
                d.mkdir()
                if contender.startswith("edgeseq"):
                    c_link = "read" if "c_link=read" in contender else "commit"
                    c = peers.edgeseq_source(model, d, c_trees="code", c_link=c_link,
                                             push_all=contender.endswith("es_push_all"))
                    prefix = "m_stage"
                else:
                    c, prefix = peers.emlearn_source(model, d, n_feat, n_out), "eml"
                _, ticks = peers.arm_figures(c, d, n_feat, n_out)
                counts, calls, spans = profile(d / "ticks.elf", d / "trace.log")
                rows += rows_for(title, contender, counts, calls, ticks, prefix)
                span_rows += [[title, contender, fn, len(v), round(sum(v) / len(v), 1), max(v)]
                              for fn, v in spans.items()]
                print(f"{title} / {contender}: {ticks} ticks, {sum(counts.values()) / calls:.0f} instructions",
                      flush=True)
    table = {"title": "Instructions per full prediction on the emulated Cortex-M4F, by function (qemu execution "
                      "trace of bench/peers.py's -O2 ELF, 16 rows; 40 instructions = 1 SysTick tick); edgeseq: "
                      "es_reset + es_next_group + es_push_next of every group + es_current with the tree stages "
                      "as code (the es_push_all rows: es_reset + one es_push_all + es_current)",
             "columns": ["model", "contender", "function", "instructions per prediction", "% of the prediction"],
             "rows": rows}
    calls = {"title": "Instructions per call on the emulated Cortex-M4F (the same traces): es_push_next with "
                      "everything it runs (the copy and check of the group, the stages it completes -- their tree "
                      "code, readout, link and commit -- and the next group's record), es_push_all (one call for the "
                      "whole row: the copy and check of every value, then every stage with its commit), and es_current (with the "
                      "link on read: the copy of the committed scores and the softmax)",
             "columns": ["model", "contender", "call", "calls traced", "mean instructions", "max instructions"],
             "rows": span_rows}
    write_result("m4f_profile", {"quick": args.quick, "tables": [table, calls]}, command_line(),
                 machine_info(info["load_start"]))


if __name__ == "__main__":
    sys.exit(main())
