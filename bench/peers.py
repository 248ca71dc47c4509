"""edgeseq against the code generators users pick instead: m2cgen, emlearn (inline), tl2cgen.

Usage: python bench/peers.py [--quick] [--rounds 5] [--passes 2] [--no-arm] [--arm-all] [--only NAME ...]
       [--python-only | --c-only]

Writes bench/results/peers.json. Contenders are optional extras of this benchmark only (the
``bench`` section of constraints.txt); one that is not installed is reported as such, not measured.

Models: a LightGBM regression of 100 trees x 31 leaves (20 columns in 5 groups), the digits
multiclass LightGBM of 100 rounds x 10 classes = 1,000 trees x 15 leaves (8 groups of 8 pixels) and,
for m2cgen only, a 30-column logistic model (edgeseq's anytime fit against scikit-learn's
LogisticRegression on the same rows). ``--quick`` keeps the regression only.

C, per contender and model (bench/peers_time.c; each contender its own process, compiled with
gcc -O2, the same rows, ``--rounds`` rounds of the contenders in turn, the fastest kept):

* host ns per full prediction -- edgeseq: ``es_reset`` + ``es_push`` of every group + ``es_current``
  (the anytime pass, every stage committed); a peer: its predict function on the row;
* the seconds gcc -O2 takes to compile the model's C file (edgeseq: edgeseq_model.c; the runtime
  is compiled once per firmware, whatever the model);
* Cortex-M4F flash: text + data of the objects built -Os (edgeseq: runtime + model), arm-none-eabi-size;
* emulated Cortex-M4F SysTick ticks of one prediction (-O2, qemu ``-icount shift=0``: instruction
  -counted virtual time, mean over 16 rows; not cycles of a real core);
* max |error| of every prediction (regression value, class probabilities) against the model's own
  predict (LightGBM, scikit-learn; for edgeseq's linear model its Python prediction).

m2cgen returns a binary linear model's logit: its glue applies the sigmoid, so every contender
returns the same probabilities. emlearn converts only scikit-learn forests, so its row feeds it the same LightGBM trees through a
shim (`emlearn_source`): its inline tree code, emitted by emlearn's own generator with float-exact
constants and ``x < nextafter(t)`` for LightGBM's ``x <= t``, summed per class; it measures emlearn's
tree code, not a path an emlearn user has.

It also times ``es_init`` against ``es_reset`` per row (the C docs quote it: ``es_init`` validates
the whole model and is meant to run once), and in Python, ``ExportedModel.predict`` at the last
stage against LightGBM's ``predict`` and treelite's and lleaves' where installed, at N = 1 and 1,000.

The Python table also has, per model, one onnxruntime session on a plain conversion of the model
(onnxmltools for LightGBM, skl2onnx for the logistic model; no ZipMap, the session options edgeseq
uses), the 30-column logistic model (edgeseq vs scikit-learn's ``predict_proba`` and its skl2onnx
graph), and a ``max |error|`` column: each contender's largest difference from the model's own
predict over the timed rows. lleaves compiles the LightGBM trees to machine code with LLVM
(llvmlite); onnxruntime and edgeseq interpret a TreeEnsemble node. ``--python-only`` measures the
Python table alone and merges it into the existing results file (the C tables are kept as they are).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from python_runtime_speed import per_call_us

from edgeseq.export.c_harness import compile_c, runtime_dir

HERE = Path(__file__).resolve().parent
HOST_FLAGS = ("-O2", "-w")  # peers' generated code is not warning-clean; edgeseq's is checked by its tests
GLUE_ES = """#include <stdint.h>
#include "edgeseq_model.h"
static float work[m_WORK_FLOATS];
static es_state st;
void contender_init(void);
void contender_predict(const float *row, float *out);
void contender_init(void) { (void)es_init(&st, &m_model, work, m_WORK_FLOATS); }
void contender_predict(const float *row, float *out)
{
    es_group_info g;
    const float *v = row;
    es_status r;
    (void)es_reset(&st);
    r = es_next_group(&st, &g);
    while (r == ES_OK) { /* the one-call loop: es_push_next pushes g and names the next group */
        const float *const cur = v;
        v += g.dim;
        r = es_push_next(&st, g.group, cur, g.dim, &g);
    }
    (void)es_current(&st, out, 0, 0);
}
"""

# the same prediction with one call for the whole row (its groups in sequence order, concatenated)
GLUE_ALL = """    (void)es_reset(&st);
    (void)es_push_all(&st, row, m_N_FEATURES);
    (void)es_current(&st, out, 0, 0);
}
"""


# ----------------------------------------------------------------------------------------------- models

def regression():
    """(X, LightGBM regressor, edgeseq TreeStageModel): 100 trees x 31 leaves, 20 columns in 5 groups."""
    import lightgbm as lgb

    from edgeseq import from_lightgbm
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 20)).astype(np.float32).astype(np.float64)
    y = X[:, :5].sum(axis=1) + np.sin(X[:, 5]) + X[:, 6] * X[:, 7] + 0.1 * rng.normal(size=2000)
    reg = lgb.LGBMRegressor(n_estimators=100, num_leaves=31, verbose=-1, n_jobs=1, deterministic=True).fit(X, y)
    return X, reg, from_lightgbm(reg, [list(range(4 * g, 4 * g + 4)) for g in range(5)], np.ones(5))


def digits():
    """(X, LightGBM classifier, edgeseq model): digits, 100 rounds x 10 classes x 15 leaves, 8 groups."""
    import lightgbm as lgb
    from sklearn.datasets import load_digits

    from edgeseq import from_lightgbm
    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float64)
    clf = lgb.LGBMClassifier(n_estimators=100, num_leaves=15, verbose=-1, n_jobs=1, deterministic=True).fit(X, y)
    return X, clf, from_lightgbm(clf, [list(range(8 * r, 8 * r + 8)) for r in range(8)], np.ones(8))


def logistic():
    """(X, scikit-learn LogisticRegression, edgeseq FittedSequence): 30 columns, 10 groups of 3."""
    from sklearn.linear_model import LogisticRegression

    from edgeseq import AnytimeClassifier
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 30)).astype(np.float32).astype(np.float64)
    y = (X @ rng.normal(size=30) > 0).astype(int)
    est = AnytimeClassifier(groups=[list(range(3 * g, 3 * g + 3)) for g in range(10)], costs=np.ones(10)).fit(X, y)
    return X, LogisticRegression(max_iter=1000).fit(X, y), est.fitted_sequence_


def softmax_linear():
    """(X, scikit-learn LogisticRegression, edgeseq FittedSequence): 4 classes, 30 columns, 10 groups of 3
    (the Python table only: a softmax link)."""
    from sklearn.linear_model import LogisticRegression

    from edgeseq import AnytimeClassifier
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 30)).astype(np.float32).astype(np.float64)
    y = np.digitize(X @ rng.normal(size=30) + rng.normal(size=2000), [-2.0, 0.0, 2.0])
    est = AnytimeClassifier(groups=[list(range(3 * g, 3 * g + 3)) for g in range(10)], costs=np.ones(10)).fit(X, y)
    return X, LogisticRegression(max_iter=1000).fit(X, y), est.fitted_sequence_


def linear_regression():
    """(X, scikit-learn LinearRegression, edgeseq FittedSequence): 30 columns, 10 groups of 3 (the
    Python table only: an identity link)."""
    from sklearn.linear_model import LinearRegression

    from edgeseq import AnytimeRegressor
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 30)).astype(np.float32).astype(np.float64)
    y = X @ rng.normal(size=30) + rng.normal(size=2000)
    est = AnytimeRegressor(groups=[list(range(3 * g, 3 * g + 3)) for g in range(10)], costs=np.ones(10)).fit(X, y)
    return X, LinearRegression().fit(X, y), est.fitted_sequence_


# linear models measured in the Python table only (no C contender is built for them)
PYTHON_ONLY_CASES = (("softmax linear, 4 classes, 30 columns in 10 groups", softmax_linear),
                     ("linear regression, 30 columns in 10 groups", linear_regression))


# ------------------------------------------------------------------------------------------ contenders

def edgeseq_source(model, d: Path, lanes: int | None = None, c_trees: str = "table", c_link: str = "commit",
                   push_all: bool = False):
    """(model C files, runtime C files, glue, column order of a row, n_out, defines); `lanes` forces
    the tree walk (ES_TREE_LANES) on every target, None keeps each target's default; `c_trees` "code"
    writes the tree stages as code (started by es_init_code); `c_link` "read" commits raw scores and
    links in es_current; `push_all` pushes the whole row with one es_push_all instead of the es_push_next loop."""
    from edgeseq.export.c_harness import write_c_for
    from edgeseq.export.kinds.affine.c_float import write_c_model
    from edgeseq.export.kinds.trees.c_float import tree_feature_order, write_c_tree_model
    from edgeseq.forms.trees import TreeStageModel
    if isinstance(model, TreeStageModel) and (c_trees == "code" or c_link != "commit"):
        write_c_tree_model(model, d, "m", c_trees=c_trees, c_link=c_link)
    elif c_link != "commit":
        write_c_model(model, d, "m", c_link=c_link)
    else:
        write_c_for(model, d, "m")
    if isinstance(model, TreeStageModel):
        cols = tree_feature_order(model)
    else:
        cols = np.concatenate([np.asarray(model.group_columns[g]) for g in model.order])
    glue = GLUE_ES if not push_all else GLUE_ES[:GLUE_ES.index("    es_group_info g;")] + GLUE_ALL
    (d / "glue.c").write_text(glue if c_trees != "code" else glue.replace(
        "(void)es_init(&st, &m_model, work, m_WORK_FLOATS);", "(void)es_init_code(&st, &m_tree_code, work, m_WORK_FLOATS);"))
    n_out = 2 if model.link == "sigmoid" else model.n_outputs
    defines = () if lanes is None else (f"ES_TREE_LANES={lanes}",)
    return [d / "edgeseq_model.c"], [runtime_dir() / "edgeseq_runtime.c"], d / "glue.c", cols, n_out, defines


def m2cgen_source(est, d: Path, n_feat: int, n_out: int):
    import m2cgen
    code = m2cgen.export_to_c(est)
    (d / "model.c").write_text(code)
    single = "double score(double * input)" in code
    call = ("out[0] = (float)score(in);" if single and n_out == 1 else
            # a binary linear model: m2cgen returns the logit; the caller applies the sigmoid
            "{ float p = 1.0f / (1.0f + expf(-(float)score(in))); out[0] = 1.0f - p; out[1] = p; }" if single else
            f"double o[{n_out}]; int k; score(in, o); for (k = 0; k < {n_out}; ++k) out[k] = (float)o[k];")
    decl = "double score(double *input);" if single else "void score(double *input, double *output);"
    (d / "glue.c").write_text(f"""#include <math.h>
{decl}
void contender_init(void) {{}}
void contender_predict(const float *row, float *out)
{{
    double in[{n_feat}]; int i;
    for (i = 0; i < {n_feat}; ++i) in[i] = row[i];
    {call}
}}
""")
    return [d / "model.c"], [], d / "glue.c", np.arange(n_feat), n_out, ()


def _exact_float(v) -> str:
    """A float32 value as a C float literal that reads back exactly (9 significant digits)."""
    text = f"{float(np.float32(v)):.9g}"
    return (text if any(c in text for c in ".en") else text + ".0") + "f"


def emlearn_source(model, d: Path, n_feat: int, n_out: int):
    """emlearn's inline generator on the LightGBM trees (see the module docstring): one forest per class."""
    from emlearn import cgen, trees as eml
    ens = model.ensemble
    saved = cgen.constant
    cgen.constant = lambda val, dtype="float": _exact_float(val) if dtype == "float" else saved(val, dtype)
    parts, calls = ["#include <stdint.h>"], []
    try:
        for k in range(ens.n_targets):
            nodes, roots, leaves = [], [], []
            for t in np.flatnonzero(ens.target == k):
                a, b = ens.tree_range(int(t))
                # splits get node numbers, leaves -(leaf number) - 1 (emlearn's forest tuple)
                split_ids = {i: n for n, i in enumerate(i for i in range(a, b) if ens.feature[i] >= 0)}
                leaf_ids = {i: n for n, i in enumerate(i for i in range(a, b) if ens.feature[i] < 0)}
                base_n, base_l = len(nodes), len(leaves)
                ref = lambda i: base_n + split_ids[i] if i in split_ids else -(base_l + leaf_ids[i]) - 1  # noqa: E731
                for i in split_ids:
                    thr = np.nextafter(np.float32(ens.threshold[i]), np.float32(np.inf))  # x < thr == x <= t
                    nodes.append([int(ens.feature[i]), float(thr), ref(int(ens.left[i])), ref(int(ens.right[i]))])
                leaves += [float(np.float32(ens.value[i])) for i in leaf_ids]
                roots.append(ref(a))
            code = eml.generate_c_inlined((nodes, roots, leaves), f"eml{k}", n_feat, classifier=False,
                                          include_proba=False)
            parts.append(code.replace(f"return avg/{len(roots)};", "return avg;"))  # a boosted sum, not a mean
            calls.append(f"out[{k}] = eml{k}_predict(row, {n_feat});")
    finally:
        cgen.constant = saved
    (d / "model.c").write_text("\n".join(parts))
    link = ""
    if model.link == "softmax":
        link = f"""{{ float m = out[0], s = 0.0f; int k;
        for (k = 1; k < {n_out}; ++k) m = out[k] > m ? out[k] : m;
        for (k = 0; k < {n_out}; ++k) {{ out[k] = expf(out[k] - m); s += out[k]; }}
        for (k = 0; k < {n_out}; ++k) out[k] /= s; }}"""
    decls = "\n".join(f"float eml{k}_predict(const float *features, int32_t features_length);"
                      for k in range(ens.n_targets))
    (d / "glue.c").write_text(f"""#include <math.h>
#include <stdint.h>
{decls}
void contender_init(void) {{}}
void contender_predict(const float *row, float *out)
{{
    {' '.join(calls)}
    {link}
}}
""")
    return [d / "model.c"], [], d / "glue.c", np.arange(n_feat), n_out, ()


def tl2cgen_source(est, d: Path, n_feat: int, n_out: int):
    import tl2cgen
    import treelite
    tm = treelite.frontend.from_lightgbm(est.booster_)
    tl2cgen.generate_c_code(tm, str(d / "tl"), params={})
    header = (d / "tl" / "header.h").read_text()
    real = "double" if "double* result" in header or "double *result" in header else "float"
    (d / "glue.c").write_text(f"""#include "header.h"
void contender_init(void) {{}}
void contender_predict(const float *row, float *out)
{{
    union Entry data[{n_feat}]; {real} res[{n_out}]; int i;
    for (i = 0; i < {n_out}; ++i) res[i] = 0; /* predict adds every tree into result */
    for (i = 0; i < {n_feat}; ++i) data[i].fvalue = row[i];
    predict(data, 0, res);
    for (i = 0; i < {n_out}; ++i) out[i] = (float)res[i];
}}
""")
    srcs = sorted((d / "tl").glob("*.c"))
    return srcs, [], d / "glue.c", np.arange(n_feat), n_out, ()


# --------------------------------------------------------------------------------------------- running

def _compile_model(srcs, d: Path, cc: str, incs) -> tuple[list, float]:
    """Objects of the model's C files and the seconds gcc -O2 took (wall clock, files in turn)."""
    objs, t0 = [], time.perf_counter()
    for s in srcs:
        o = d / (Path(s).stem + ".o")
        subprocess.run([cc, "-std=c99", *HOST_FLAGS, "-c", *(f"-I{i}" for i in incs), str(s), "-o", str(o)],
                       check=True)
        objs.append(o)
    return objs, time.perf_counter() - t0


def build_host(c, d: Path, n_feat: int, n_out: int) -> tuple[Path, float]:
    srcs, runtime, glue, _, _, defines = c
    incs = [d, runtime_dir(), Path(glue).parent, *(Path(s).parent for s in srcs)]
    objs, seconds = _compile_model(srcs, d, "gcc", incs)
    exe = compile_c([*runtime, glue, HERE / "peers_time.c", *objs], d / "time", include_dirs=incs,
                    defines=[f"N_FEAT={n_feat}", f"N_OUT={n_out}", *defines], flags=("-std=c99",),
                    extra=HOST_FLAGS)
    return exe, seconds


def arm_figures(c, d: Path, n_feat: int, n_out: int, target=None, gc_sections: bool = False) -> tuple[int, int]:
    """(flash bytes of the -Os objects, emulated SysTick ticks per prediction at -O2) on `target`
    (default: the Cortex-M4F); `gc_sections` links the tick image as firmware is linked (functions in
    sections of their own, the ones nothing calls dropped), which the micro:bit's 256 kB flash needs for the
    1,000-tree model now that the runtime holds calls (es_push_all) the glue does not make."""
    from edgeseq.export.c_arm import ARM_CC, TARGETS, qemu_dir, run_qemu, section_sizes
    target = target or TARGETS["cortex-m4f"]
    srcs, runtime, glue, _, _, defines = c
    incs = [d, runtime_dir(), Path(glue).parent, *(Path(s).parent for s in srcs)]
    objs = []
    for s in [*runtime, *srcs]:
        o = d / (Path(s).stem + ".arm.o")
        subprocess.run([ARM_CC, "-std=c99", "-Os", "-w", "-c", *target.cpu_flags, *(f"-D{x}" for x in defines),
                        *(f"-I{i}" for i in incs),
                        str(s), "-o", str(o)], check=True)
        objs.append(o)
    flash = sum(v["text"] + v["data"] for v in section_sizes(objs).values())
    qdir = qemu_dir()
    elf = compile_c([qdir / "startup.c", *runtime, *srcs, glue, HERE / "peers_time.c"], d / "ticks.elf",
                    include_dirs=[qdir, *incs],
                    defines=["PEERS_ARM", f"N_FEAT={n_feat}", f"N_OUT={n_out}", *defines, *target.defines],
                    compiler=ARM_CC, flags=("-std=c99",),
                    extra=(*target.cpu_flags, "-O2", "-w", "-T", str(qdir / target.linker_script),
                           "--specs=rdimon.specs",
                           *(("-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections") if gc_sections else ())),
                    libs=("-lm",))
    out = run_qemu(elf, target, extra=("-icount", "shift=0"), timeout=600).stdout
    return flash, int(out.split()[-1])


def run_host(exe: Path, rows: Path, passes: int, d: Path, n_out: int) -> tuple[float, np.ndarray]:
    pred = d / "pred.bin"
    out = subprocess.run([str(exe), str(rows), str(passes), str(pred)], capture_output=True, text=True,
                         check=True).stdout
    return float(out.split()[-1]), np.fromfile(pred, np.float32).reshape(-1, n_out)


def available(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def c_table(title, est, model, X, want, contenders, args, tmp: Path) -> dict:
    """One model's C rows: every installed contender built, timed in interleaved rounds, checked."""
    n_feat = X.shape[1]
    n_out = want.shape[1]
    rows_x = X[:512].astype(np.float32)
    built = {}
    for name in contenders:
        if not name.startswith("edgeseq") and not available({"emlearn inline": "emlearn"}.get(name, name)):
            built[name] = None
            continue
        d = tmp / f"{title[:3]}_{name.split()[0]}_{len(built)}"
        d.mkdir()
        if name == "edgeseq":
            c = edgeseq_source(model, d)
        elif name == CODE_ROW:  # the tree stages as generated code (c_trees="code")
            c = edgeseq_source(model, d, c_trees="code")
        elif name == READ_ROW:  # and the link applied by es_current (c_link="read")
            c = edgeseq_source(model, d, c_trees="code", c_link="read")
        elif name == LINEAR_READ_ROW:
            c = edgeseq_source(model, d, c_link="read")
        elif name == CODE_ALL_ROW:  # the whole row in one es_push_all call
            c = edgeseq_source(model, d, c_trees="code", push_all=True)
        elif name == READ_ALL_ROW:
            c = edgeseq_source(model, d, c_trees="code", c_link="read", push_all=True)
        elif name == LINEAR_READ_ALL_ROW:
            c = edgeseq_source(model, d, c_link="read", push_all=True)
        elif name.startswith("edgeseq"):  # "edgeseq, ES_TREE_LANES=n": one walk on every target
            c = edgeseq_source(model, d, int(name[-1]))
        elif name == "m2cgen":
            c = m2cgen_source(est, d, n_feat, n_out)
        elif name == "emlearn inline":
            c = emlearn_source(model, d, n_feat, n_out)
        else:
            c = tl2cgen_source(est, d, n_feat, n_out)
        exe, seconds = build_host(c, d, n_feat, n_out)
        rows_file = d / "rows.bin"
        np.ascontiguousarray(rows_x[:, c[3]]).tofile(rows_file)
        built[name] = {"c": c, "d": d, "exe": exe, "compile": seconds, "rows": rows_file, "ns": float("inf")}
        print(f"  built {name}: model C compiled in {seconds:.2f} s", flush=True)
    for _ in range(args.rounds):
        for name, b in built.items():
            if b is not None:
                ns, pred = run_host(b["exe"], b["rows"], args.passes, b["d"], n_out)
                b["ns"], b["err"] = min(b["ns"], ns), float(np.abs(pred.astype(np.float64) - want[:512]).max())
    rows = []
    for name, b in built.items():
        if b is None:
            rows.append([name, "not installed", None, None, None, None, None])
            continue
        flash = ticks = None
        n_trees = getattr(getattr(model, "ensemble", None), "n_trees", 0)
        slow = name in ("m2cgen", "tl2cgen") and n_trees >= 1000 and not args.arm_all
        if not args.no_arm and not slow:
            flash, ticks = arm_figures(b["c"], b["d"], n_feat, n_out)
        rows.append([name, round(b["ns"] / 1000, 2), None, ticks, flash, round(b["compile"], 2),
                     float(f"{b['err']:.3g}")])
        print(f"  {name}: {b['ns'] / 1000:.2f} µs, {ticks} ticks, {flash} B flash, err {b['err']:.3g}", flush=True)
    es = next((r for r in rows if r[0] == "edgeseq" and isinstance(r[1], float)), None)
    for r in rows:
        if es is not None and isinstance(r[1], float):
            r[2] = round(r[1] / es[1], 2)
    return {"title": title, "columns": ["contender", "host µs / prediction", "÷ edgeseq", "M4F ticks (-O2)",
                                        "M4F flash B (-Os)", "model C compile s (gcc -O2)", "max |error|"],
            "rows": rows}


CODE_ROW = "edgeseq, c_trees=code"
READ_ROW = "edgeseq, c_trees=code, c_link=read"
LINEAR_READ_ROW = "edgeseq, c_link=read"
CODE_ALL_ROW = "edgeseq, c_trees=code, es_push_all"
READ_ALL_ROW = "edgeseq, c_trees=code, c_link=read, es_push_all"
LINEAR_READ_ALL_ROW = "edgeseq, c_link=read, es_push_all"


def m0_table(models, args, tmp: Path) -> dict:
    """Emulated Cortex-M0 (soft float) ticks and flash of edgeseq's two tree forms, per tree model: does
    the code form win on a core without an FPU too (every compare is a library call there)?"""
    from edgeseq.export.c_arm import CORTEX_M0
    rows = []
    for title, model, n_feat, n_out in models:
        for form in ("table", "code"):
            d = tmp / f"m0_{len(rows)}"
            d.mkdir()
            c = edgeseq_source(model, d, c_trees=form)
            try:
                flash, ticks = arm_figures(c, d, n_feat, n_out, CORTEX_M0, gc_sections=True)
            except Exception as exc:  # noqa: BLE001  (e.g. the model does not fit the micro:bit's flash)
                print(f"  M0 {title} {form}: not measured ({str(exc).splitlines()[-1][:120]})", flush=True)
                flash = ticks = None
            rows.append([title, form, ticks, flash])
            print(f"  M0 {title} {form}: {ticks} ticks, {flash} B flash", flush=True)
    return {"title": "edgeseq tree forms on the emulated Cortex-M0 (micro:bit, soft float; qemu -icount SysTick ticks "
                     "per full prediction at -O2, the tick image linked with --gc-sections as firmware is; flash of the -Os "
                     "objects); None: did not fit or not run",
            "columns": ["model", "c_trees", "M0 ticks (-O2)", "M0 flash B (-Os)"], "rows": rows}


INIT_VS_RESET = """#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include "bench_timing.h"
#include "edgeseq_model.h"
static float work[m_WORK_FLOATS];
static es_state st;
static volatile uint32_t sink;
int main(void)
{
    double ti[REPEATS], tr[REPEATS];
    long i, n = 20000;
    int r;
    for (r = 0; r < REPEATS; ++r) {
        double t0 = now_ns();
        for (i = 0; i < n; ++i) { es_init(&st, &m_model, work, m_WORK_FLOATS); sink += st.seq; }
        ti[r] = (now_ns() - t0) / (double)n;
        t0 = now_ns();
        for (i = 0; i < n; ++i) { es_reset(&st); sink += st.seq; }
        tr[r] = (now_ns() - t0) / (double)n;
    }
    printf("%.1f %.1f\\n", minimum(ti), minimum(tr));
    return 0;
}
"""


def init_vs_reset(models, tmp: Path) -> dict:
    """ns of es_init and of es_reset per row (each commits stage 0), per (title, model, µs of a full
    prediction); and what calling es_init instead of es_reset does to a full prediction."""
    from edgeseq.export.c_harness import write_c_for
    rows = []
    for title, model, full_us in models:
        d = tmp / f"init_{len(rows)}"
        write_c_for(model, d, "m")
        (d / "main.c").write_text(INIT_VS_RESET)
        exe = compile_c([runtime_dir() / "edgeseq_runtime.c", d / "edgeseq_model.c", d / "main.c"], d / "init",
                        include_dirs=[d, runtime_dir(), HERE], extra=("-O2",))
        ti, tr = map(float, subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
        rows.append([title, ti, tr, full_us, round((full_us * 1000 + ti - tr) / (full_us * 1000), 2)])
        print(f"  es_init {ti:.0f} ns, es_reset {tr:.0f} ns ({title})", flush=True)
    return {"title": "es_init vs es_reset per row (host, gcc -O2, ns; both commit stage 0): es_init validates every "
                     "table of the model and is meant to run once per model, es_reset once per row",
            "columns": ["model", "es_init ns", "es_reset ns", "full prediction µs (with es_reset)",
                        "full prediction with es_init instead, ×"], "rows": rows}


def plain_onnx(est, n_feat: int):
    """(name, predict function of a float64 matrix, predict function of a float32 matrix, the same
    asking for labels and probabilities or None) for one onnxruntime session on the model converted
    plainly (onnxmltools for LightGBM, skl2onnx for scikit-learn; no ZipMap), or None when the
    converter is not installed. The float64 function casts the rows per call (as a user holding
    float64 data must); the float32 ones hand them over as they are. The first two return a
    classifier's probabilities only; the last (classifiers only) fetches its labels as well, what
    edgeseq's `ClassifierPrediction` holds, and returns the probabilities."""
    import onnxruntime as ort

    from edgeseq.runtime.ort import session_options
    lightgbm = hasattr(est, "booster_")
    if not available("onnxmltools" if lightgbm else "skl2onnx"):
        return None
    if lightgbm:
        from onnxmltools import convert_lightgbm
        from onnxmltools.convert.common.data_types import FloatTensorType
        classifier = hasattr(est, "predict_proba")
        onx = convert_lightgbm(est, initial_types=[("input", FloatTensorType([None, n_feat]))],
                               zipmap=False)
        name = "onnxruntime (onnxmltools)"
    else:
        from skl2onnx import to_onnx
        classifier = hasattr(est, "predict_proba")
        onx = to_onnx(est, np.zeros((1, n_feat), np.float32),
                      options={id(est): {"zipmap": False}} if classifier else None,
                      target_opset={"": 17, "ai.onnx.ml": 3})
        name = "onnxruntime (skl2onnx)"
    sess = ort.InferenceSession(onx.SerializeToString(), sess_options=session_options(),
                                providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0].name
    out = sess.get_outputs()[1 if classifier else 0].name  # probabilities after the label; the value
    both = (lambda X32: sess.run(None, {inp: X32})[1]) if classifier else None  # labels computed and returned too
    return (name, lambda Xn: sess.run([out], {inp: Xn.astype(np.float32)})[0],
            lambda X32: sess.run([out], {inp: X32})[0], both)


def python_table(cases, args) -> dict:
    """µs per call at the last stage: ExportedModel.predict vs LightGBM / treelite / lleaves / onnxruntime."""
    from edgeseq.export.writer import export_model
    from edgeseq.runtime.model import ExportedModel
    rows, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for title, X, est, model in cases:
            out = Path(tmp) / f"m{len(rows)}"
            export_model(model, out)
            em = ExportedModel(out)
            j = em.n_prefixes - 1
            trees = {}
            onnx = plain_onnx(est, X.shape[1])
            if onnx is not None:
                trees[onnx[0]] = onnx[1]
            lgbm = hasattr(est, "booster_")  # the logistic model: the tree contenders do not apply
            if lgbm and available("treelite"):
                import treelite
                tm = treelite.frontend.from_lightgbm(est.booster_)
                trees["treelite (gtil)"] = lambda Xn, tm=tm: treelite.gtil.predict(tm, Xn)
            if lgbm and available("lleaves"):
                import lleaves
                path = Path(tmp) / "lgb.txt"
                est.booster_.save_model(str(path))
                ll = lleaves.Model(model_file=str(path))
                try:
                    ll.compile()
                    trees["lleaves"] = lambda Xn, ll=ll: ll.predict(Xn, n_jobs=1)
                except AttributeError as exc:  # llvmlite >= 0.45 dropped the legacy pass manager lleaves 1.3 calls
                    skipped.append(f"lleaves {_version('lleaves')} failed with llvmlite {_version('llvmlite')} "
                                   f"({exc}; it needs llvmlite < 0.45): not measured")
            for n in (1, 1000):
                Xn = np.ascontiguousarray(X[:n].astype(np.float32))
                feats = {g: np.ascontiguousarray(Xn[:, c]) for g, c in zip(model.group_names, model.group_columns)}
                Xd = Xn.astype(np.float64)
                lgb_fn = est.predict_proba if hasattr(est, "predict_proba") else est.predict
                own = "LightGBM predict" if lgbm else "scikit-learn " + lgb_fn.__name__
                fns = {"edgeseq ExportedModel": lambda: em.predict(feats, prefix=j),
                       own: lambda: lgb_fn(Xd)}
                fns[MATRIX_ROWS[0]] = lambda: em.predict(Xn, prefix=j)  # one matrix as in training: predict's
                fns[MATRIX_ROWS[1]] = lambda: em.predict(Xd, prefix=j)  # fast path (the joined graph reads it)
                fns.update({k: (lambda f=f: f(Xd)) for k, f in trees.items()})
                if onnx is not None:
                    fns[onnx[0] + ORT32] = lambda f=onnx[2]: f(Xn)
                if onnx is not None and onnx[3] is not None:  # what edgeseq's prediction holds: labels too
                    fns[onnx[0] + ORT32 + BOTH] = lambda f=onnx[3]: f(Xn)
                ref = _as_matrix(lgb_fn(Xd))
                es_ref = ref if lgbm else _as_matrix(model.apply_link(model.linear(Xd, j)))  # the logistic: its own fit
                err = {k: _max_error(f(), es_ref if k.startswith("edgeseq") else ref) for k, f in fns.items()}
                calls = args.calls if n == 1 else max(args.calls // 10, 3)
                t = per_call_us(fns, calls, args.reps)
                base = t["edgeseq ExportedModel"]
                for k, v in t.items():
                    # the goal's ratio: one plain onnxruntime session handed rows of the same dtype, over edgeseq
                    peer = None if onnx is None or not k.startswith("edgeseq") else \
                        t[onnx[0] + ("" if k == MATRIX_ROWS[1] else ORT32)]
                    rows.append([title, n, k, round(v, 1), round(v / base, 2), float(f"{err[k]:.3g}"),
                                 None if peer is None else round(peer / v, 2)])
                print(f"  python {title} N={n}: " + ", ".join(f"{k} {v:.1f} µs" for k, v in t.items()), flush=True)
    note = "".join(f"; {m}" for m in dict.fromkeys(skipped)) if available("lleaves") else \
        "; lleaves was not installed: not measured"
    return {"title": "Python, µs per call at the last stage (fastest of interleaved blocks, one thread): edgeseq "
                     "ExportedModel.predict (one joined graph in onnxruntime: one input, one tree node or one Gemm and a one-node link) "
                     "fed a dict of float32 group arrays or one float32 or float64 matrix as in training, vs the "
                     "model's own predict, "
                     "treelite's, lleaves' (LLVM-compiled trees) and one onnxruntime session on a plain conversion "
                     "(onnxmltools / skl2onnx) fed float64 rows (cast per call) or float32 rows; max |error| vs the "
                     "model's own predict; onnxruntime ÷ this: the plain session fed the same dtype (float32 for "
                     f"the dict) over that edgeseq row{note}",
            "columns": ["model", "rows", "contender", "µs per call", "÷ edgeseq", "max |error|",
                        "onnxruntime ÷ this (same dtype)"], "rows": rows}


# Python table rows: edgeseq fed one matrix laid out as in training (the other edgeseq row: a dict of
# float32 group arrays), and the plain onnxruntime session fed float32 rows as they are
MATRIX_ROWS = ("edgeseq ExportedModel, one float32 matrix", "edgeseq ExportedModel, one float64 matrix")
ORT32 = ", float32 rows"
BOTH = ", labels and probabilities"  # a classifier's session asked for both outputs, as edgeseq returns both


def _as_matrix(pred) -> np.ndarray:
    """A prediction as a float64 (n, k) matrix: ClassifierPrediction -> its probabilities."""
    pred = getattr(pred, "proba", pred)
    pred = np.asarray(pred, np.float64)
    return pred.reshape(pred.shape[0], -1)


def _max_error(pred, ref: np.ndarray) -> float:
    """Largest |pred - ref|; a binary model's (n, 2) probabilities are compared by their positive column."""
    pred = _as_matrix(pred)
    if pred.shape[1] == 2 and ref.shape[1] == 1:
        pred = pred[:, 1:]
    return float(np.max(np.abs(pred - ref)))


def python_only(args) -> None:
    """Measure the Python table alone and put it in place of the one in bench/results/peers.json."""
    import json

    from _results import RESULTS
    info = machine_info()
    print(f"load {info['load_start']}", flush=True)
    cases = [("regression, LightGBM 100 trees x 31 leaves", regression)]
    if not args.quick:
        cases += [("multiclass digits, LightGBM 1,000 trees x 15 leaves", digits),
                  ("logistic, 30 columns in 10 groups", logistic), *PYTHON_ONLY_CASES]
    table = python_table([(title, *make()) for title, make in cases], args)
    table["title"] += (f" (measured on its own with --python-only, load average {info['load_start']} at the start "
                       f"and {machine_info()['load_end']} at the end)")
    path = RESULTS / "peers.json"
    old = json.loads(path.read_text(encoding="utf-8"))
    tables = [t for t in old["tables"] if not t["title"].startswith("Python, µs per call")] + [table]
    versions = {**old.get("versions", {}), **{m: _version(m) for m in PYTHON_PEERS}}
    keep = {k: v for k, v in old.items() if k not in ("tables", "versions", "command", "machine", "date")}
    write_result("peers", {**keep, "versions": versions, "tables": tables,
                           "python_table": {"command": "OMP_NUM_THREADS=1 nice -n 10 " + command_line(),
                                            "machine": machine_info(info["load_start"])}},
                 old.get("command", command_line()), old.get("machine", machine_info(info["load_start"])))


def m0_only(args) -> None:
    """Measure the Cortex-M0 table alone and put it in place of the one in bench/results/peers.json
    (its own command and machine under ``m0_table``, as ``--python-only`` records ``python_table``)."""
    import json

    from _results import RESULTS
    info = machine_info()
    print(f"load {info['load_start']}", flush=True)
    cases = [("regression, LightGBM 100 trees x 31 leaves", regression, "regression")]
    if not args.quick:
        cases += [("multiclass digits, LightGBM 1,000 trees x 15 leaves", digits, "proba")]
    models = []
    for title, make, kind in cases:
        X, est, model = make()
        n_out = 1 if kind == "regression" else est.predict_proba(X[:1]).shape[1]
        models.append((title, model, X.shape[1], n_out))
    with tempfile.TemporaryDirectory() as tmp:
        table = m0_table(models, args, Path(tmp))
    path = RESULTS / "peers.json"
    old = json.loads(path.read_text(encoding="utf-8"))
    tables = [t if not t["title"].startswith("edgeseq tree forms on the emulated Cortex-M0") else table
              for t in old["tables"]]
    if table not in tables:
        tables.append(table)
    keep = {k: v for k, v in old.items() if k not in ("tables", "command", "machine", "date")}
    write_result("peers", {**keep, "tables": tables,
                           "m0_table": {"command": command_line(), "machine": machine_info(info["load_start"])}},
                 old.get("command", command_line()), old.get("machine", machine_info(info["load_start"])))


PYTHON_PEERS = ("treelite", "lleaves", "llvmlite", "onnxmltools", "skl2onnx", "onnxruntime", "lightgbm")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the regression model only")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the contenders in turn (fastest kept)")
    ap.add_argument("--passes", type=int, default=2, help="passes over the 512 rows per timed repeat")
    ap.add_argument("--no-arm", action="store_true", help="skip the Cortex-M4F flash and emulated ticks")
    ap.add_argument("--arm-all", action="store_true",
                    help="also build m2cgen and tl2cgen for the M4F at 1,000 trees (minutes of compiling each)")
    ap.add_argument("--only", nargs="+", default=None, metavar="NAME",
                    help="C contenders to build (e.g. --only edgeseq, for a before/after run of edgeseq alone)")
    ap.add_argument("--reps", type=int, default=15, help="Python: interleaved blocks")
    ap.add_argument("--calls", type=int, default=40, help="Python: calls per block at N = 1")
    ap.add_argument("--python-only", action="store_true",
                    help="measure the Python table alone and merge it into the existing bench/results/peers.json")
    ap.add_argument("--c-only", action="store_true",
                    help="the C tables alone: the Python table and its python_table record are kept from the "
                         "existing bench/results/peers.json")
    ap.add_argument("--m0-only", action="store_true",
                    help="the Cortex-M0 table alone, merged into the existing bench/results/peers.json")
    args = ap.parse_args(argv)
    if args.python_only:
        return python_only(args)
    if args.m0_only:
        return m0_only(args)
    info = machine_info()
    print(f"load {info['load_start']}", flush=True)
    trees = ["edgeseq", "edgeseq, ES_TREE_LANES=1", "edgeseq, ES_TREE_LANES=8", CODE_ROW, "m2cgen", "emlearn inline",
             "tl2cgen"]
    tables, python_cases, init_models, m0_models = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        specs = [("regression, LightGBM 100 trees x 31 leaves", regression, [*trees, CODE_ALL_ROW], "regression")]
        if not args.quick:
            specs += [("multiclass digits, LightGBM 1,000 trees x 15 leaves", digits,
                       [*trees[:4], READ_ROW, *trees[4:], CODE_ALL_ROW, READ_ALL_ROW], "proba"),
                      ("logistic, 30 columns in 10 groups", logistic,
                       ["edgeseq", LINEAR_READ_ROW, "m2cgen", LINEAR_READ_ALL_ROW],
                       "logistic")]
        for title, make, contenders, kind in specs:
            contenders = [c for c in contenders if args.only is None or c in args.only]
            print(title, flush=True)
            X, est, model = make()
            if kind == "regression":
                want = est.predict(X[:512])[:, None]
            elif kind == "proba":
                want = est.predict_proba(X[:512])
            else:  # each contender against its own model: edgeseq's Python prediction, sklearn's for m2cgen
                want = None
            if want is None:
                k = model.n_prefixes - 1
                es_want = np.asarray(model.apply_link(model.linear(X[:512], k)), np.float64).reshape(512, -1)
                t_es = c_table(title, est, model, X, es_want, [c for c in contenders if c != "m2cgen"], args, tmp)
                t_m2 = c_table(title + " (m2cgen vs scikit-learn)", est, model, X, est.predict_proba(X[:512]),
                               ["m2cgen"], args, tmp) if available("m2cgen") and "m2cgen" in contenders else None
                t_es["rows"] += t_m2["rows"] if t_m2 else [["m2cgen", "not installed", None, None, None, None, None]]
                for r in t_es["rows"][1:]:
                    if isinstance(r[1], float):
                        r[2] = round(r[1] / t_es["rows"][0][1], 2)
                tables.append(t_es)
                init_models.append((title, model, t_es["rows"][0][1]))
                python_cases.append((title, X, est, model))
                continue
            tables.append(c_table(title, est, model, X, want, contenders, args, tmp))
            m0_models.append((title, model, X.shape[1], want.shape[1]))
            python_cases.append((title, X, est, model))
            init_models.append((title, model, tables[-1]["rows"][0][1]))
        tables.append(init_vs_reset(init_models, tmp))
        m0 = m0_table(m0_models, args, tmp) if not args.no_arm and (args.only is None or CODE_ROW in args.only) else None
    if args.c_only:  # keep the Python table (and its python_table record) of the existing results file
        import json

        from _results import RESULTS
        old = json.loads((RESULTS / "peers.json").read_text(encoding="utf-8"))
        kept = {"python_table": old["python_table"]} if "python_table" in old else {}
        tables += [t for t in old["tables"] if t["title"].startswith("Python, µs per call")]
    else:
        kept = {}
        python_cases += [(title, *make()) for title, make in (PYTHON_ONLY_CASES if not args.quick else ())]
        tables.append(python_table(python_cases, args))
    for t in tables:
        t["title"] = t["title"] if "µs" in t["title"] or "es_init" in t["title"] else (
            f"{t['title']}: per full prediction (edgeseq: es_reset + every push + es_current; its tree walk is "
            "ES_TREE_LANES=8 on the host and 1 on the M4F unless a row forces one), host gcc -O2, "
            "emulated Cortex-M4F (qemu -icount, SysTick ticks = instruction-counted time), M4F flash of the "
            "-Os objects, gcc -O2 compile time of the model's C, max |error| vs the model's own predict; "
            "m2cgen and tl2cgen are not built for the M4F at 1,000 trees without --arm-all (minutes each)")
    init = next(t for t in tables if t["title"].startswith("es_init vs"))["rows"]
    if m0 is not None:
        tables.append(m0)
    write_result("peers", {"rounds": args.rounds, "passes": args.passes, "quick": args.quick,
                           "init_instead_of_reset": [r[4] for r in init],
                           "versions": {m: _version(m) for m in ("m2cgen", "emlearn", "tl2cgen", "treelite", "lleaves")}
                           | {m: _version(m) for m in PYTHON_PEERS},
                           "run_as": "OMP_NUM_THREADS=1 nice -n 10", "tables": tables, **kept},
                 command_line(), machine_info(info["load_start"]))


def _version(name: str) -> str:
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:  # noqa: BLE001  (any failure: not installed)
        return "not installed"


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
