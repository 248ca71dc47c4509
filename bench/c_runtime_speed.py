"""C runtime speed: ns per push and per current-prediction read, against a bare dot-product loop.

Both are compiled in the same run with the same compiler and flags (bench/c_runtime_speed.c), on
synthetic models of several shapes. Targets (issue 4): a full anytime pass (all pushes) <= 1.3x the
bare loops over the same floats; the worst-case (last) push <= 1.3x its bare loop; read <= 20 ns.

    python bench/c_runtime_speed.py [--iters N] [--cc gcc] [--quick]

Writes bench/results/c_runtime_speed.json.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np

from _cbench import c_bench_setup  # noqa: I001  (bench/ is on sys.path)
from _results import command_line, write_result

from edgeseq.export.c_harness import STRICT_FLAGS, compile_c, runtime_dir
from edgeseq.export.kinds.affine.c_float import write_c_model
from edgeseq.forms.linear import FittedSequence

HERE = Path(__file__).resolve().parent
SHAPES = [  # (label, group sizes, outputs, link)
    ("10 groups x 50, P=1, identity", [50] * 10, 1, "identity"),
    ("4 groups x 8, P=1, identity", [8] * 4, 1, "identity"),
    ("1 group x 500, P=1, identity", [500], 1, "identity"),
    ("10 groups x 50, P=10, softmax", [50] * 10, 10, "softmax"),
    ("5 groups x 20, binary sigmoid", [20] * 5, 1, "sigmoid"),
]


def synthetic_sequence(sizes, P, link, seed=0) -> FittedSequence:
    """A FittedSequence of the given shape with random weights (speed does not depend on their values)."""
    rng = np.random.default_rng(seed)
    J, D = len(sizes), sum(sizes)
    bounds = np.cumsum([0] + list(sizes))
    cols = tuple(np.arange(bounds[g], bounds[g + 1]) for g in range(J))
    dims = np.cumsum([0] + list(sizes))
    coefs = tuple(rng.normal(size=(int(d), P)) * 0.1 for d in dims)
    classes = None if link == "identity" else np.array([f"c{k}" for k in range(2 if link == "sigmoid" else P)])
    return FittedSequence(
        task="regression" if link == "identity" else "classification", link=link, n_features_in=D,
        group_names=tuple(f"g{g}" for g in range(J)), group_columns=cols, costs=np.ones(J), order=np.arange(J),
        coefs=coefs, intercepts=rng.normal(size=(J + 1, P)),
        output_names=tuple(classes.tolist()) if classes is not None else tuple(f"y{p}" for p in range(P)),
        classes=classes)


def main(argv=None) -> None:
    iters_base, cc, version = c_bench_setup(__doc__.splitlines()[0], 4000, argv)  # --quick: about a minute
    print(f"{'model':34} {'pass ns':>9} {'bare ns':>9} {'ratio':>6} {'last push':>9} {'bare':>8} "
          f"{'ratio':>6} {'read ns':>8}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (label, sizes, P, link) in enumerate(SHAPES):
            mdir = Path(tmp) / f"m{k}"
            write_c_model(synthetic_sequence(sizes, P, link), mdir, "bench")
            exe = compile_c([runtime_dir() / "edgeseq_runtime.c", mdir / "edgeseq_model.c", HERE / "c_runtime_speed.c"],
                            Path(tmp) / f"bench{k}", include_dirs=[mdir, runtime_dir()],
                            defines=["ES_PREFIX=bench"], compiler=cc)
            iters = max(200, iters_base * 500 // (sum(sizes) * P))
            out = subprocess.run([str(exe), str(iters)], capture_output=True, text=True, check=True).stdout
            pass_ns, bare_ns, last_ns, last_bare, read_ns = map(float, out.split())
            rows.append([label, iters, pass_ns, bare_ns, pass_ns / bare_ns, last_ns, last_bare, last_ns / last_bare,
                         read_ns])
            print(f"{label:34} {pass_ns:9.1f} {bare_ns:9.1f} {pass_ns / bare_ns:6.2f} {last_ns:9.1f} "
                  f"{last_bare:8.1f} {last_ns / last_bare:6.2f} {read_ns:8.1f}")
    print("\ntargets: push ratio <= 1.3 (pass = every push of one sample; last = the worst-case push), "
          "read <= 20 ns")
    columns = ["model", "iterations", "pass ns", "bare pass ns", "pass/bare", "last push ns", "bare last ns",
               "last/bare", "read ns"]
    worst = max(max(r[4], r[7]) for r in rows)
    write_result("c_runtime_speed", {
        "compiler": version, "flags": " ".join(STRICT_FLAGS) + " -O2",
        "targets": {"push_ratio_max": 1.3, "read_ns_max": 20.0},
        "worst_push_ratio": worst, "worst_read_ns": max(r[8] for r in rows),
        "tables": [{"title": f"ns per sample, runtime vs bare loops compiled side by side ({version}); "
                             "targets: pass/bare and last/bare <= 1.3, read <= 20 ns",
                    "columns": columns, "rows": rows}]}, command_line())


if __name__ == "__main__":
    main()
