"""Export speed: a model with 100 prefixes and D = 500 must export in <= 3 s; prints the size of out/.

Builds the FittedSequence directly with random weights (training time is not what is measured),
exports it with `export_model` (ONNX graphs + full_check, generated C, manifest, the reader's own
verification, atomic rename) and times each phase side by side in one run.

    python bench/export_speed.py [--groups 100] [--dim 5] [--repeats 3] [--quick]

Writes bench/results/export_speed.json.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)

from edgeseq.export.kinds.affine import c_float, onnx as affine_onnx
from edgeseq.format import read_verified
from edgeseq.export.names import onnx_input_names
from edgeseq.export.writer import export_model
from edgeseq.forms.linear import FittedSequence

TARGET_S = 3.0


def make_sequence(n_groups: int, dim: int, seed: int = 0) -> FittedSequence:
    rng = np.random.default_rng(seed)
    D = n_groups * dim
    cols = np.split(rng.permutation(D), n_groups)
    order = rng.permutation(n_groups)
    coefs = [rng.normal(size=(dim * j, 1)) for j in range(n_groups + 1)]
    return FittedSequence(
        task="regression", link="identity", n_features_in=D, group_names=tuple(f"g{i}" for i in range(n_groups)),
        group_columns=tuple(np.sort(c) for c in cols), costs=rng.uniform(0.1, 10, n_groups), order=order,
        coefs=tuple(coefs), intercepts=rng.normal(size=(n_groups + 1, 1)), output_names=("y",),
        feature_mean=rng.normal(size=D), feature_std=rng.uniform(0.5, 2, D))


def _best(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--dim", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3, help="best of this many runs per phase")
    ap.add_argument("--quick", action="store_true", help="one run per phase (the model size is unchanged)")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats = 1
    seq = make_sequence(args.groups, args.dim)
    work = Path(tempfile.mkdtemp(prefix="edgeseq-bench-"))
    try:
        out = work / "out"
        names = onnx_input_names(seq.group_names)

        def onnx_only():
            for j in range(seq.n_prefixes):
                m = affine_onnx.build_prefix_graph(seq, j, names)
                affine_onnx.onnx.checker.check_model(m, full_check=True)

        def c_only():
            d = work / "c"
            d.mkdir(exist_ok=True)
            c_float.write_c_model(seq, d, "bench")

        total = _best(lambda: export_model(seq, out, force=True, model_name="bench"), args.repeats)
        t_onnx = _best(onnx_only, args.repeats)
        t_c = _best(c_only, args.repeats)
        t_verify = _best(lambda: read_verified(out), args.repeats)
        size = sum(p.stat().st_size for p in out.iterdir())
        onnx_bytes = sum(p.stat().st_size for p in out.glob("*.onnx"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['machine']}, Python {info['python']}, load average at start "
          f"{info['load_start']}, at end {info['load_end']}")
    print(f"model: {seq.n_prefixes} prefixes (J = {args.groups} groups x {args.dim} features, D = {seq.n_features_in})")
    print(f"export_model total      {total:7.3f} s  ({total / TARGET_S:.2f} x the {TARGET_S:.0f} s target)  "
          f"{'OK' if total <= TARGET_S else 'TOO SLOW'}")
    print(f"  ONNX build + full_check {t_onnx:7.3f} s  ({t_onnx / total:.0%} of total)")
    print(f"  C generation            {t_c:7.3f} s  ({t_c / total:.0%})")
    print(f"  read_verified           {t_verify:7.3f} s  ({t_verify / total:.0%})")
    print(f"out/ size: {size} bytes ({onnx_bytes} in ONNX graphs, {size - onnx_bytes} in C + manifest)")
    phases = [["export_model total", total, 1.0], ["ONNX build + full_check", t_onnx, t_onnx / total],
              ["C generation", t_c, t_c / total], ["read_verified", t_verify, t_verify / total]]
    write_result("export_speed", {
        "prefixes": seq.n_prefixes, "groups": args.groups, "dim": args.dim, "features": seq.n_features_in,
        "repeats": args.repeats, "target_s": TARGET_S, "total_s": total, "within_target": total <= TARGET_S,
        "out_bytes": size, "onnx_bytes": onnx_bytes,
        "tables": [{"title": f"Export of {seq.n_prefixes} prefixes, D = {seq.n_features_in} (best of "
                             f"{args.repeats}; target: total <= {TARGET_S:g} s)",
                    "columns": ["phase", "seconds", "share of total"], "rows": phases},
                   {"title": "Size of the export folder",
                    "columns": ["part", "bytes"],
                    "rows": [["ONNX graphs", onnx_bytes], ["C + manifest", size - onnx_bytes], ["total", size]]}]},
        command_line(), machine=info)


if __name__ == "__main__":
    main()
