"""ExportedModel.predict at a fixed budget vs one onnxruntime session on an equivalent single graph.

Usage: python bench/runtime_overhead.py [--reps 30] [--calls 50] [--quick]

Writes bench/results/runtime_overhead.json. predict at the last stage runs one joined graph
(edgeseq.runtime.fuse: one input, the groups side by side; stages 1..K's trees in one tree node, or
a linear prefix's one Gemm and a one-node link, which the label's ArgMax follows); the "stage
chain" column is K onnxruntime calls, one per stage graph, through ``run_stages``. "predict, one
matrix" is ``predict`` handed the float32 rows as in training (its fast path: the same graph with
the weight rows, or each split's feature index, in the matrix's column order; no per-group work). The single
graph is that joined graph in a plain ``InferenceSession`` with the same single-threaded options,
called with pre-built feeds (the groups already concatenated): the best a caller of onnxruntime
could do with this model (bench/peers.py compares with plain conversions, the models' own predict,
treelite and lleaves). Models: the digits LightGBM classifier of bench/tree_runtime_speed.py (100
rounds x 10 classes = 1,000 trees; boosting order, and cost-sequenced), a 100-tree LightGBM
regression on 20 columns in 5 groups, and a 30-column logistic anytime model in 10 groups.
Timing: interleaved blocks, fastest block per contender.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from python_runtime_speed import per_call_us
from tree_runtime_speed import models as digits_models

from edgeseq import AnytimeClassifier, from_lightgbm
from edgeseq.export.writer import export_model
from edgeseq.runtime.fuse import joined_prefix, joined_tree_stages
from edgeseq.runtime.model import ExportedModel
from edgeseq.runtime.ort import session_options


def regression_model():
    import lightgbm as lgb
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 20))
    y = X[:, :5].sum(axis=1) + np.sin(X[:, 5]) + 0.1 * rng.normal(size=2000)
    reg = lgb.LGBMRegressor(n_estimators=100, num_leaves=31, verbose=-1, n_jobs=1).fit(X, y)
    return X, from_lightgbm(reg, [list(range(4 * g, 4 * g + 4)) for g in range(5)], np.ones(5))


def linear_model():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 30))
    y = (X @ rng.normal(size=30) > 0).astype(int)
    groups = [list(range(3 * g, 3 * g + 3)) for g in range(10)]
    est = AnytimeClassifier(groups=groups, costs=np.ones(10)).fit(X, y)
    return X, est.fitted_sequence_


def single_graph(out: Path, manifest: dict, feats: dict, trees: bool):
    """The joined graph predict runs (edgeseq.runtime.fuse) in a plain session, fed the groups
    already side by side."""
    ps = manifest["prefixes"]
    if trees:
        model, name = joined_tree_stages([(out / p["file"]).read_bytes() for p in ps[1:]])
    else:
        model, name = joined_prefix((out / ps[-1]["file"]).read_bytes())
    sess = ort.InferenceSession(model, sess_options=session_options(), providers=["CPUExecutionProvider"])
    by_input = {g["input_name"]: feats[g["name"]] for g in manifest["groups"] if g["name"] in feats}
    feed = {name: np.concatenate([by_input[i] for i in ps[-1]["inputs"] if i != "state_in"], axis=1)}
    names = [sess.get_outputs()[0].name] if manifest["task"] == "regression" else ["proba"]
    return lambda: sess.run(names, feed)


def bench(name, model, X, n_rows, calls, reps, trees):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "m"
        manifest = export_model(model, out)
        Xr = X[:n_rows].astype(np.float32)
        feats = {g: np.ascontiguousarray(Xr[:, c]) for g, c in zip(model.group_names, model.group_columns)}
        em = ExportedModel(out)
        j = em.n_prefixes - 1
        fns = {"predict": lambda: em.predict(feats, prefix=j), "single": single_graph(out, manifest, feats, trees)}
        if trees:
            arrays = [feats[g] for g, _ in em._plan[j]]
            fns["chain"] = lambda: em.run_stages(arrays, j)
        Xc = np.ascontiguousarray(Xr)
        fns["matrix"] = lambda: em.predict(Xc, prefix=j)
        t = per_call_us(fns, calls, reps)
    row = [name, n_rows, j, round(t["predict"], 1), round(t["single"], 1),
           round(t["chain"], 1) if "chain" in t else None, round(t["predict"] / t["single"], 2),
           round(t["matrix"], 1) if "matrix" in t else None,
           round(t["matrix"] / t["single"], 2) if "matrix" in t else None]
    print(row)
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="8 blocks of 20 calls")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.calls = 8, 20
    info = machine_info()
    print(f"load {info['load_start']}")
    X, digits = digits_models()
    Xr, reg = regression_model()
    Xl, lin = linear_model()
    cases = [("digits 1,000 trees, boosting order", digits["boosting order"], X, True),
             ("digits 1,000 trees, cost-sequenced", digits["cost-sequenced"], X, True),
             ("regression 100 trees x 31 leaves", reg, Xr, True),
             ("logistic, 30 columns, 10 groups", lin, Xl, False)]
    rows = []
    for n_rows in (1, 1000):
        for name, model, data, trees in cases:
            calls = args.calls if n_rows == 1 else max(args.calls // 5, 4)
            rows.append(bench(name, model, data, n_rows, calls, args.reps, trees))
    worst = max(r[6] for r in rows)
    table = {"title": "µs per call at the last stage (fastest of interleaved blocks): ExportedModel.predict, one "
                      "onnxruntime session on the equivalent single graph (the joined graph predict runs: one "
                      "input, one tree node, or one Gemm and a one-node link) with pre-built feeds, and the "
                      "stage chain (one onnxruntime call per stage), and predict handed one float32 matrix as in "
                      "training; goal predict/single <= 1.2",
             "columns": ["model", "rows", "stages", "predict µs", "single graph µs", "stage chain µs",
                         "predict / single", "predict, one matrix µs", "one matrix / single"],
             "rows": rows}
    write_result("runtime_overhead", {"reps": args.reps, "calls": args.calls, "worst_ratio": worst,
                                      "target_ratio": 1.2, "tables": [table],
                                      "run_as": "OMP_NUM_THREADS=1 nice -n 10"},
                 command_line(), machine_info(info["load_start"]))


if __name__ == "__main__":
    main()
