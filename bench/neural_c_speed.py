"""C layer-block stages: ns of each es_step against a bare loop doing the same multiply-accumulates, and
a whole forward pass against emlearn's eml_net on the same dense layers.

The networks are dense chains (one group of 32 features paid by stage 1, then stages that only read
the state, softmax exits), the shape emlearn's MLP can also run: its layers are the same weights
(stage 1's group matrix, each later stage's state matrix, the last exit head). edgeseq additionally
computes an exit head at every stage (counted in its MACs). Everything is compiled in the same run with
the same compiler and ``-std=c99 -O2`` (emlearn's header is not warning-free under edgeseq's strict
flags). Each clock read times a batch of 16 calls (a step of the smallest net is a few clock ticks
long); the median over the batches is taken in each run, and the minimum over 9 interleaved runs of
every binary (the run least disturbed by other processes on a shared machine) is reported. The full
pass is timed alone: reset, pushes and steps, no clock read inside. Two bare loops: one
accumulator per output (the plain loop), and es_step's own kernel (four output rows at a time, each
still summed in index order) without the runtime, whose ratio is the runtime's overhead (checks, link,
commit). Targets (issue 20): es_step <= 1.2 x the bare loop; a full pass no slower than eml_net.

    python bench/neural_c_speed.py [--iters N] [--cc gcc] [--quick]

Writes bench/results/neural_c_speed.json (emlearn columns are empty when emlearn is not installed:
``pip install emlearn``).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np

from _cbench import c_bench_setup  # noqa: I001  (bench/ is on sys.path)
from _results import command_line, write_result

from edgeseq.export.c_codegen import c_float_rows
from edgeseq.export.c_harness import compile_c, runtime_dir
from edgeseq.export.kinds.layer_blocks.c_float import write_c_layer_blocks
from edgeseq.forms.layer_blocks import Injection, LayerBlockModel, LayerBlockStage

HERE = Path(__file__).resolve().parent
FLAGS = ("-std=c99",)
REPEATS = 9  # runs of each benchmark binary, interleaved; the minimum of each figure is reported
SHAPES = [("32 in, 4 stages of width 64, 4 classes", 32, 64, 4, 4, False),
          ("32 in, 4 stages of width 32, 4 classes", 32, 32, 4, 4, False),
          ("16 in, 3 stages of width 16, 2 classes", 16, 16, 3, 2, False),
          # the same small net with only the last exit committed: the earlier stages still compute
          # their heads (they are in the stage graphs) but skip the link and the commit, so the gap
          # to the row above is what publishing an answer at every stage costs
          ("16 in, 3 stages of width 16, 2 classes, last exit only committed", 16, 16, 3, 2, True)]


def dense_chain(d: int, H: int, K: int, P: int, seed: int = 0, last_only: bool = False) -> LayerBlockModel:
    """Stage 1 reads a group of d features into width H; stages 2..K read only the state. With
    `last_only`, stages 1..K-1 are ``commit=False`` (no link, no commit; same weights)."""
    rng = np.random.default_rng(seed)
    w = lambda *s: rng.normal(scale=1.0 / np.sqrt(s[0]), size=s)  # noqa: E731
    stages = [LayerBlockStage((), 0.0, None, (), np.zeros(0), np.zeros((0, P)), np.zeros(P))]
    for k in range(1, K + 1):
        inj = (Injection(0, w(d, H)),) if k == 1 else ()
        stages.append(LayerBlockStage((0,) if k == 1 else (), 1.0, None if k == 1 else w(H, H), inj,
                                      rng.normal(scale=0.1, size=H), w(H, P), np.zeros(P),
                                      commit=not last_only or k == K))
    return LayerBlockModel(("x",), (np.arange(d),), [1.0], tuple(stages), "softmax",
                           tuple(f"c{i}" for i in range(P)), n_features=d)


def eml_header(model: LayerBlockModel) -> str:
    """emlearn's EmlNet of the same dense layers (weights [in][out], as eml_net_forward reads them)."""
    s = model.stages
    layers = [(s[1].injections[0].U, s[1].b, "EmlNetActivationRelu")]
    layers += [(st.W, st.b, "EmlNetActivationRelu") for st in s[2:]]
    layers.append((s[-1].V, s[-1].c, "EmlNetActivationSoftmax"))
    parts, inits = ["#include <eml_net.h>\n"], []
    for i, (W, b, act) in enumerate(layers):
        parts.append(f"static const float eml_w{i}[] = {{\n{c_float_rows(W)}\n}};\n"
                     f"static const float eml_b{i}[] = {{\n{c_float_rows(b)}\n}};\n")
        inits.append(f"{{ {W.shape[1]}, {W.shape[0]}, eml_w{i}, eml_b{i}, {act} }}")
    width = max(W.shape[1] for W, _, _ in layers)
    parts.append(f"static const EmlNetLayer eml_layers[] = {{ {', '.join(inits)} }};\n"
                 f"static float eml_act1[{width}], eml_act2[{width}];\n"
                 f"static EmlNet eml_model = {{ {len(layers)}, eml_layers, eml_act1, eml_act2, {width} }};\n"
                 f"#define EML_N_IN {layers[0][0].shape[0]}\n#define EML_N_OUT {layers[-1][0].shape[1]}\n")
    macs = sum(W.size for W, _, _ in layers)
    return "".join(parts), macs


def emlearn_dir():
    try:
        import emlearn
    except ImportError:
        return None
    return Path(emlearn.includedir)


def main(argv=None) -> None:
    iters, cc, version = c_bench_setup(__doc__.splitlines()[0], 600, argv)
    eml_inc = emlearn_dir()
    eml_version = None
    if eml_inc is not None:
        from importlib.metadata import version as _v
        eml_version = _v("emlearn")
    print(f"emlearn: {eml_version or 'not installed (pip install emlearn)'}")
    stage_rows, pass_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        built = []
        for n, (label, d, H, K, P, last_only) in enumerate(SHAPES):
            model = dense_chain(d, H, K, P, last_only=last_only)
            mdir = Path(tmp) / f"m{n}"
            write_c_layer_blocks(model, mdir, "bench")
            defines, incs = ["ES_PREFIX=bench"], [mdir, runtime_dir(), HERE]
            eml_macs = None
            if eml_inc is not None:
                text, eml_macs = eml_header(model)
                (mdir / "eml_model.h").write_text(text)
                defines.append("HAVE_EMLEARN")
                incs.append(eml_inc)
            exe = compile_c([runtime_dir() / "edgeseq_runtime.c", mdir / "edgeseq_model.c", HERE / "neural_c_speed.c"],
                            Path(tmp) / f"bench{n}", include_dirs=incs, defines=defines, compiler=cc, flags=FLAGS)
            built.append((label, K, model, exe, eml_macs))
        best, run_ratios = [{} for _ in built], [[] for _ in built]
        for _ in range(REPEATS):  # interleaved: every network in every round, so load changes hit all alike
            for (_, _, _, exe, _), got, ratios in zip(built, best, run_ratios):
                out = subprocess.run([str(exe), str(iters)], capture_output=True, text=True, check=True).stdout
                run = {}
                for line in out.splitlines():
                    parts = line.split()
                    run[(parts[0], int(parts[1]) if len(parts) == 3 else 0)] = float(parts[-1])
                for key, value in run.items():
                    got[key] = min(got.get(key, np.inf), value)
                if ("eml", 0) in run:
                    ratios.append(round(run[("all", 0)] / run[("eml", 0)], 3))
        for (label, K, model, _, eml_macs), got, ratios in zip(built, best, run_ratios):
            macs = [int(m) for m in model.stage_macs]
            for k in range(1, K + 1):
                step, bare, bare4 = got[("step", k)], got[("bare", k)], got[("bare4", k)]
                stage_rows.append([label, k, macs[k], round(step, 1), round(bare, 1), round(step / bare, 3),
                                   round(bare4, 1), round(step / bare4, 3)])
                print(f"{label:64} stage {k}: {macs[k]:6d} MACs  es_step {step:8.1f} ns  bare {bare:8.1f} ns  "
                      f"ratio {step / bare:5.2f}  bare4 {bare4:8.1f} ns  ratio {step / bare4:5.2f}")
            total, eml = got[("all", 0)], got.get(("eml", 0))
            pass_rows.append([label, sum(macs), round(total, 1), eml_macs, None if eml is None else round(eml, 1),
                              None if eml is None else round(total / eml, 3),
                              " ".join(f"{r:.2f}" for r in ratios) or None])
            print(f"{label:64} full pass: {sum(macs)} MACs {total:.1f} ns; eml_net: "
                  + ("-" if eml is None else f"{eml_macs} MACs {eml:.1f} ns, ratio {total / eml:.2f}"))
    write_result("neural_c_speed", {
        "compiler": version, "flags": " ".join(FLAGS) + " -O2", "emlearn": eml_version, "iters": iters, "batch": 16, "repeats": REPEATS,
        "targets": {"step_over_bare_max": 1.2, "pass_over_eml_max": 1.0},
        "worst_step_ratio": max(r[5] for r in stage_rows),
        "worst_step_over_same_kernel": max(r[7] for r in stage_rows),
        "worst_pass_over_eml": max((r[5] for r in pass_rows if r[5] is not None), default=None),
        "tables": [
            {"title": f"ns of one es_step (median over batches of 16 calls, minimum over {REPEATS} interleaved runs) vs a bare loop doing the same multiply-accumulates "
                      f"({version}): one accumulator per output (bare), and es_step's own four-rows-at-a-time "
                      f"kernel without the runtime around it (bare4: es_step/bare4 is the runtime's overhead: "
                      f"checks, link, commit); target: es_step/bare <= 1.2",
             "columns": ["network", "stage", "MACs", "es_step ns", "bare ns", "es_step/bare", "bare4 ns",
                         "es_step/bare4"], "rows": stage_rows},
            {"title": "ns of a full pass (every stage: pushes, steps, exits, links) vs emlearn's eml_net_predict_proba "
                      "on the same dense layers (one exit only), timed block for block in alternation (minimum over "
                      "the runs; the last column: the ratio of each run's medians); target: edgeseq/eml_net <= 1",
             "columns": ["network", "edgeseq MACs", "edgeseq ns", "eml_net MACs", "eml_net ns", "edgeseq/eml_net",
                         "edgeseq/eml_net in each run"],
             "rows": pass_rows}]}, command_line())


if __name__ == "__main__":
    main()
