"""onnxruntime time per tree stage: the ai.onnx.ml form (one TreeEnsembleRegressor) vs the core form
(``--tree-ops core``: comparison, path and leaf matrices), side by side in one run.

Usage: python bench/tree_ops.py [--reps 15] [--quick]

Writes bench/results/tree_ops.json. Models: a LightGBM regression of 100 trees x 31 leaves on 12
synthetic columns in 4 groups, and a LightGBM multiclass on the digits pixels (8 row groups, 100
rounds x 10 classes = 1,000 trees x 15 leaves), both imported with `edgeseq.from_lightgbm` (boosting
order: the trees spread over the stages). Each stage graph of both exports is a single-threaded
CPUExecutionProvider session with pre-built feeds (the state fed in is a fixed array); the two forms
are timed in interleaved blocks and the fastest block of each is kept (`python_runtime_speed.per_call_us`).
Per model and batch size N (1 and 1,000) the tables give the stages' summed time (a full-budget pass),
the slowest stage and the ratio core / ai.onnx.ml; the graphs' total size on disk and session
creation time are recorded too.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from python_runtime_speed import per_call_us

from edgeseq import from_lightgbm
from edgeseq.export.writer import export_model
from edgeseq.runtime.ort import session_options

FORMS = ("ai-onnx-ml", "core")


def models():
    import lightgbm as lgb
    from sklearn.datasets import load_digits

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 12))
    y = X @ rng.normal(size=12) + np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=3000)
    reg = lgb.LGBMRegressor(n_estimators=100, num_leaves=31, verbose=-1, n_jobs=1).fit(X, y)
    Xd, yd = load_digits(return_X_y=True)
    clf = lgb.LGBMClassifier(n_estimators=100, num_leaves=15, verbose=-1, n_jobs=1).fit(Xd, yd)
    return {
        "regression, 100 trees x 31 leaves": (from_lightgbm(reg, [list(range(3 * g, 3 * g + 3)) for g in range(4)],
                                                            np.ones(4)), X),
        "digits multiclass, 1,000 trees x 15 leaves": (from_lightgbm(clf, [list(range(8 * r, 8 * r + 8))
                                                                            for r in range(8)], np.ones(8)), Xd),
    }


def stage_calls(out: Path, manifest: dict, X: np.ndarray):
    """Per stage k >= 1: a zero-argument call running its graph on X, and the session creation time."""
    calls, load_s = [], 0.0
    state = np.zeros((X.shape[0], manifest["state_width"]), np.float32)
    for p in manifest["prefixes"][1:]:
        t = time.perf_counter()
        sess = ort.InferenceSession(str(out / p["file"]), sess_options=session_options(),
                                    providers=["CPUExecutionProvider"])
        load_s += time.perf_counter() - t
        cols = {g["input_name"]: g["columns"] for g in manifest["groups"]}
        feed = {name: np.ascontiguousarray(X[:, cols[name]]) for name in p["inputs"][:-1]}
        feed["state_in"] = state
        calls.append(lambda s=sess, f=feed: s.run(None, f))
    return calls, load_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = ap.parse_args()
    reps = 3 if args.quick else args.reps
    info = machine_info()
    rows, load_rows, raw = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (model, X) in models().items():
            outs = {}
            for form in FORMS:
                out = Path(tmp) / f"{len(raw)}_{form}"
                outs[form] = (out, export_model(model, out, tree_ops=form))
            for n in (1, 1000):
                Xn = np.resize(X, (n, X.shape[1])).astype(np.float32)
                per_form = {form: stage_calls(*outs[form], Xn) for form in FORMS}
                ref = [c() for c in per_form["ai-onnx-ml"][0]]
                got = [c() for c in per_form["core"][0]]
                worst = max(float(np.max(np.abs(a[0] - b[0]))) for a, b in zip(ref, got))
                assert worst <= 1e-5, (name, n, worst)  # same predictions, or the timing means nothing
                calls = 1 if n == 1000 else 50
                stage_us = {form: [] for form in FORMS}
                for k in range(len(per_form["core"][0])):
                    t = per_call_us({form: per_form[form][0][k] for form in FORMS}, calls, reps)
                    for form in FORMS:
                        stage_us[form].append(t[form])
                total = {form: sum(v) for form, v in stage_us.items()}
                unit = 1.0 if n == 1 else 1e-3  # N=1 in microseconds, N=1,000 in milliseconds
                rows.append([name, n, len(stage_us["core"]), round(total["ai-onnx-ml"] * unit, 1),
                             round(total["core"] * unit, 1), round(max(stage_us["ai-onnx-ml"]) * unit, 1),
                             round(max(stage_us["core"]) * unit, 1), round(total["core"] / total["ai-onnx-ml"], 2)])
                raw.append({"model": name, "n": n, "stage_us": stage_us, "max_abs_diff": worst})
                if n == 1:
                    size = {form: sum((outs[form][0] / p["file"]).stat().st_size
                                      for p in outs[form][1]["prefixes"]) for form in FORMS}
                    load_rows.append([name, round(per_form["ai-onnx-ml"][1] * 1e3, 1),
                                      round(per_form["core"][1] * 1e3, 1), round(size["ai-onnx-ml"] / 1024, 1),
                                      round(size["core"] / 1024, 1)])
                print(rows[-1], flush=True)
    columns = ["model", "N", "stages", "ai-onnx-ml", "core", "slowest stage, ai-onnx-ml", "slowest stage, core",
               "core / ai-onnx-ml"]
    tables = [
        {"title": "onnxruntime, N = 1: time per full-budget pass (sum over the stage graphs), microseconds",
         "columns": columns, "rows": [r for r in rows if r[1] == 1]},
        {"title": "onnxruntime, N = 1,000: time per full-budget pass (sum over the stage graphs), milliseconds",
         "columns": columns, "rows": [r for r in rows if r[1] != 1]},
        {"title": "Session creation (all stages, ms) and graph size on disk (KiB)",
         "columns": ["model", "load ai-onnx-ml", "load core", "size ai-onnx-ml", "size core"], "rows": load_rows},
    ]
    info = machine_info(info["load_start"])
    write_result("tree_ops", {"reps": reps, "per_stage": raw, "tables": tables}, command_line(), info)


if __name__ == "__main__":
    main()
