"""Tree stages in the Python runtime: AnytimeSession.predict at stage k vs bare onnxruntime
InferenceSession.run calls of the same stage graphs 1..k chained by hand, side by side in one run
(target: AnytimeSession <= 1.3x bare). predict runs stages 1..k fused into one graph
(edgeseq.runtime.fuse), so from stage 2 on it is one onnxruntime call against the chain's k.

Usage: python bench/tree_runtime_speed.py [--reps 40] [--calls 100] [--quick]

Writes bench/results/tree_runtime_speed.json. The model is a 100-round LightGBM classifier on the
digits pixels (8 row groups, unit costs; 10 classes, so 1,000 trees), imported with
`edgeseq.from_lightgbm` (boosting order) and, for a model with more stages, sequenced by cost with
`edgeseq.sequence_trees`. The bare chain uses the same single-threaded session options, pre-built
feeds and feeds each stage's ``state_out`` to the next ``state_in`` (the best case for it); the
contenders are timed in interleaved blocks and the fastest block of each is kept (see
python_runtime_speed.py).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from python_runtime_speed import per_call_us
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from edgeseq import from_lightgbm, sequence_trees
from edgeseq.export.writer import export_model
from edgeseq.runtime.ort import session_options
from edgeseq.runtime.session import AnytimeSession


def models():
    import lightgbm as lgb
    X, y = load_digits(return_X_y=True)
    groups, costs = [list(range(8 * r, 8 * r + 8)) for r in range(8)], np.ones(8)
    Xf, Xv, yf, yv = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    clf = lgb.LGBMClassifier(n_estimators=100, num_leaves=15, verbose=-1, n_jobs=1).fit(Xf, yf)
    boosting = from_lightgbm(clf, groups, costs)
    return X, {"boosting order": boosting, "cost-sequenced": sequence_trees(boosting, Xv, yv)}


def bare_chain(out: Path, manifest: dict, feats: dict, k: int):
    """The stage graphs 1..k as plain InferenceSessions with pre-built feeds, the state passed by hand."""
    sessions = [ort.InferenceSession(str(out / p["file"]), sess_options=session_options(),
                                     providers=["CPUExecutionProvider"]) for p in manifest["prefixes"][1:k + 1]]
    inputs = [[i for i in p["inputs"] if i != "state_in"] for p in manifest["prefixes"][1:k + 1]]
    by_input = {g["input_name"]: feats[g["name"]] for g in manifest["groups"] if g["name"] in feats}
    n = next(iter(feats.values())).shape[0]
    state0 = np.zeros((n, manifest["state_width"]), np.float32)

    def call():
        state = state0
        for s, names in zip(sessions, inputs):
            proba, state = s.run(["proba", "state_out"], {**{i: by_input[i] for i in names}, "state_in": state})
        return proba
    return call


def bench_model(model, X, n_rows: int, calls: int, reps: int) -> list[list]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model"
        manifest = export_model(model, out)
        Xr = X[:n_rows].astype(np.float32)
        feats = {n: np.ascontiguousarray(Xr[:, c]) for n, c in zip(model.group_names, model.group_columns)}
        with AnytimeSession(out) as sess:
            for k in range(1, len(model.stages)):
                bare = bare_chain(out, manifest, feats, k)
                assert np.array_equal(sess.predict(feats, prefix=k).proba, bare())  # the same graphs, same numbers
                t = per_call_us({"anytime": lambda: sess.predict(feats, prefix=k), "bare": bare}, calls, reps)
                trees = sum(p["n_trees"] for p in manifest["prefixes"][1:k + 1])
                rows.append([k, trees, t["anytime"], t["bare"], t["anytime"] / t["bare"]])
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40, help="interleaved blocks per contender")
    ap.add_argument("--calls", type=int, default=100, help="calls per block")
    ap.add_argument("--quick", action="store_true", help="10 blocks of 30 calls")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.calls = 10, 30
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['machine']}, onnxruntime {info['onnxruntime']}, load {info['load_start']}")
    X, by_name = models()
    worst, tables = 0.0, []
    for name, model in by_name.items():
        for n_rows in (1, 64):
            rows = bench_model(model, X, n_rows, args.calls, args.reps)
            worst = max(worst, max(r[-1] for r in rows))
            for r in rows:
                print(f"{name:>15} N={n_rows:<3} stage {r[0]}: {r[1]:>5} trees  anytime {r[2]:9.1f} µs  "
                      f"bare {r[3]:9.1f} µs  ratio {r[4]:.2f}")
            tables.append({"title": f"{name}, batch N = {n_rows}: predict at stage k vs the bare chain of stage "
                                    f"graphs 1..k (µs per call, fastest of {args.reps} interleaved blocks of "
                                    f"{args.calls}); target anytime/bare <= 1.3",
                           "columns": ["stage", "trees run", "anytime µs", "bare chain µs", "anytime/bare"],
                           "rows": rows})
    print(f"worst AnytimeSession/bare ratio: {worst:.2f} (target <= 1.3)")
    write_result("tree_runtime_speed", {"reps": args.reps, "calls": args.calls, "worst_anytime_over_bare": worst,
                                        "target_ratio": 1.3, "tables": tables}, command_line())


if __name__ == "__main__":
    main()
