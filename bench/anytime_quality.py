"""The papers' Tables 1-2 on real extractor banks: test α-timeliness of every method, 5 random splits.

    python bench/anytime_quality.py [--datasets digits mnist] [--splits 5] [--out bench/results] [--quick]

For each data set (the digits bank; the MNIST bank, which needs edgeseq[images]) and each random
stratified 70/30 train/test split: fit CS-G-OMP, single, no-whiten, G-OMP, CS-G-FR, Doubling
(CS-G-FR score, each pick at most the cost so far), and the Sparse baseline (cost-weighted group
lasso path, ridge refits of its prefixes) on the training part, with one-hot class targets (squared
loss: F is the explained variance of the one-hot labels, as the papers' tables use). FR-Oracle and
OMP-Oracle reorder the test curves of CS-G-FR / CS-G-OMP by gain per cost. α is the plateau-rule α
of CS-G-OMP's training curve, c_α its stopping cost; every curve is scored by its test α-timeliness
(step and trapezoid). Also times the fits of CS-G-OMP, CS-G-FR and the Sparse path side by side.
Costs are the measured extractor costs (digits: the stored calibration; MNIST: measured on this
machine on first use), so the figures say where they were measured. Writes
bench/results/anytime_quality.json (and a Markdown summary next to it). `--quick` (about a minute):
digits only, 2 splits, 3 values of λ, 10 Sparse penalties.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from sklearn.model_selection import train_test_split

from edgeseq import AnytimeRegressor
from edgeseq.evaluate.anytime import alpha_stopping_cost, anytime_curve, oracle_curve, plateau_alpha, timeliness
from edgeseq.errors import DataUnavailableError
from edgeseq.train.linear.sparse import sparse_path

# the thesis's methods whiten their groups (whiten=True, no longer the default): "no-whiten" is the ablation
FITTED = {"CS-G-OMP": dict(method="omp", whiten=True), "single": dict(method="single", whiten=True),
          "no-whiten": dict(method="omp", whiten=False), "G-OMP": dict(method="gomp", whiten=True),
          "CS-G-FR": dict(method="fr", whiten=True), "Doubling": dict(method="fr", doubling=True, whiten=True)}
COLUMNS = ["CS-G-OMP", "single", "no-whiten", "G-OMP", "CS-G-FR", "Doubling", "FR-Oracle", "OMP-Oracle",
           "Sparse"]
ALL_COLUMNS = COLUMNS + ["Sparse (path)"]


def load(name: str):
    from edgeseq.extractors.datasets import digits_data, mnist_data

    return digits_data() if name == "digits" else mnist_data(progress=lambda m: print("  ", m, flush=True))


def choose_l2(data, grid) -> tuple[float, dict]:
    """λ by validation, as the papers did: CS-G-OMP fitted on 75% of split 0's training part, scored by
    its α-timeliness on the other 25% (α and c_α from its own training curve)."""
    tr, _ = train_test_split(np.arange(len(data.y)), test_size=0.3, random_state=0, stratify=data.y)
    fit_idx, val_idx = train_test_split(tr, test_size=0.25, random_state=0, stratify=data.y[tr])
    Y = np.eye(10)[data.y]
    scores = {}
    for l2 in grid:
        model = AnytimeRegressor(data.columns, data.costs, l2=l2, whiten=True, group_names=data.names)
        model.fit(data.X[fit_idx], Y[fit_idx])
        ref = anytime_curve(model, data.X[fit_idx], Y[fit_idx])
        c_alpha = alpha_stopping_cost(ref, plateau_alpha(ref))
        scores[l2] = timeliness(anytime_curve(model, data.X[val_idx], Y[val_idx]), c_alpha)
        print(f"  validation: l2={l2:g} -> step timeliness {scores[l2]:.4f}", flush=True)
    return max(scores, key=scores.get), scores


def one_split(data, seed: int, l2: float, sparse_kw: dict):
    """Test curves of every method on one split, the reference α and c_α, and fit times (s)."""
    tr, te = train_test_split(np.arange(len(data.y)), test_size=0.3, random_state=seed, stratify=data.y)
    Ytr, Yte = np.eye(10)[data.y[tr]], np.eye(10)[data.y[te]]
    curves, seconds = {}, {}
    for name, kw in FITTED.items():
        t = time.perf_counter()
        model = AnytimeRegressor(data.columns, data.costs, l2=l2, group_names=data.names, **kw).fit(data.X[tr], Ytr)
        seconds[name] = time.perf_counter() - t
        curves[name] = anytime_curve(model, data.X[te], Yte, label=name)
        if name == "CS-G-OMP":
            reference = anytime_curve(model, data.X[tr], Ytr)
    curves["FR-Oracle"] = oracle_curve(curves["CS-G-FR"])
    curves["OMP-Oracle"] = oracle_curve(curves["CS-G-OMP"])
    t = time.perf_counter()
    sp = sparse_path(data.X[tr], Ytr, data.columns, data.costs, data.names, l2=l2, **sparse_kw)
    seconds["Sparse"] = time.perf_counter() - t
    curves["Sparse"] = anytime_curve(sp.refit_sequence, data.X[te], Yte)
    curves["Sparse (path)"] = anytime_curve(sp.path_sequence, data.X[te], Yte)
    alpha = plateau_alpha(reference)
    c_alpha = alpha_stopping_cost(reference, alpha)
    scores = {k: {kind: timeliness(c, c_alpha, kind) for kind in ("step", "trapezoid")} for k, c in curves.items()}
    return scores, alpha, c_alpha, seconds, {k: float(c.values[-1]) for k, c in curves.items()}


def cells(runs: list, kind: str) -> list[str]:
    """'mean ± std' over the splits of every column's `kind` timeliness; the best mean in bold."""
    vals = {c: np.array([r[0][c][kind] for r in runs]) for c in ALL_COLUMNS}
    best = max(np.mean(vals[c]) for c in ALL_COLUMNS)
    return [f"**{vals[c].mean():.4f} ± {vals[c].std():.4f}**" if np.isclose(vals[c].mean(), best)
            else f"{vals[c].mean():.4f} ± {vals[c].std():.4f}" for c in ALL_COLUMNS]


def table(name: str, runs: list, kind: str) -> list[str]:
    return [f"| {name} | " + " | ".join(cells(runs, kind)) + " |"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["digits", "mnist"], choices=["digits", "mnist"])
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--l2-grid", type=float, nargs="+", default=[1e-3, 1e-2, 1e-1, 1.0, 10.0],
                   help="ridge penalties tried on a validation split of split 0 (the best is used)")
    p.add_argument("--sparse-lambdas", type=int, default=30)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    p.add_argument("--quick", action="store_true",
                   help="digits only, 2 splits, λ from (0.01, 0.1, 1), 10 Sparse penalties (about a minute)")
    args = p.parse_args(argv)
    if args.quick:
        args.datasets, args.splits, args.l2_grid, args.sparse_lambdas = ["digits"], 2, [1e-2, 1e-1, 1.0], 10
    info = machine_info()
    sparse_kw = dict(n_lambdas=args.sparse_lambdas, tol=1e-5)
    results, md, tables, skipped = {}, [], [], []
    header = "| timeliness | " + " | ".join(ALL_COLUMNS) + " |"
    rule = "|---" * (len(COLUMNS) + 2) + "|"
    for ds in args.datasets:
        print(f"== {ds}", flush=True)
        try:
            data = load(ds)
        except DataUnavailableError as exc:
            print(f"  skipped {ds}: {exc}", flush=True)
            md += [f"### {ds}: skipped ({exc})", ""]
            skipped.append([ds, str(exc)])
            continue
        l2, val_scores = choose_l2(data, args.l2_grid)
        runs = []
        for seed in range(args.splits):
            t = time.perf_counter()
            runs.append(one_split(data, seed, l2, sparse_kw))
            print(f"  split {seed}: α={runs[-1][1]:.2f} c_α={runs[-1][2]:.4g} "
                  f"({time.perf_counter() - t:.1f} s)", flush=True)
        secs = {k: [r[3][k] for r in runs] for k in runs[0][3]}
        m = data.measured_on
        results[ds] = dict(n=len(data.y), groups=len(data.names), features=int(data.X.shape[1]),
                           cost_range=[float(data.costs.min()), float(data.costs.max())],
                           alphas=[r[1] for r in runs], c_alpha=[r[2] for r in runs],
                           timeliness=[r[0] for r in runs], final_test_F=[r[4] for r in runs],
                           fit_seconds=secs, costs_measured_on=m, l2=l2, l2_validation=val_scores)
        omp, fr, sp = (np.median(secs[k]) for k in ("CS-G-OMP", "CS-G-FR", "Sparse"))
        described = (f"{ds}: {len(data.y)} images, {len(data.names)} groups, {data.X.shape[1]} features, costs "
                     f"{data.costs.min():.3g}–{data.costs.max():.3g} µs/image (measured on {m['cpu']}, "
                     f"{m['machine']}, {m['date'][:10]})")
        alphas = ", ".join(f"{r[1]:g}" for r in runs)
        tables += [{"title": f"{described}; λ = {l2:g} (validation); α per split: {alphas}. Test α-timeliness, "
                             f"mean ± standard deviation over {args.splits} splits (best in bold)",
                    "columns": ["timeliness", *ALL_COLUMNS],
                    "rows": [[kind, *cells(runs, kind)] for kind in ("step", "trapezoid")]},
                   {"title": f"{ds}: fit time, median of {args.splits} splits in the same run",
                    "columns": ["CS-G-OMP s", "CS-G-FR s", "Sparse path s", "FR/OMP", "Sparse/OMP"],
                    "rows": [[float(omp), float(fr), float(sp), float(fr / omp), float(sp / omp)]]}]
        md += [f"### {described}", "",
               f"λ = {l2:g}, chosen on a validation split from {args.l2_grid} (validation step timeliness "
               f"{', '.join(f'{v:.3f}' for v in val_scores.values())}); α (plateau rule on CS-G-OMP's "
               f"training curve) per split: {[r[1] for r in runs]}", "",
               header, rule, *table("step", runs, "step"), *table("trapezoid", runs, "trapezoid"), "",
               f"Fit time (median of {args.splits} splits, same run): CS-G-OMP {omp:.3g} s, CS-G-FR {fr:.3g} s "
               f"(FR/OMP = {fr / omp:.2f}×), Sparse path ({args.sparse_lambdas} λ) {sp:.3g} s "
               f"(Sparse/OMP = {sp / omp:.1f}×).", ""]
    command = command_line()
    info = machine_info(info["load_start"])
    machine = (f"{info['cpu']}, {info['machine']}, Python {info['python']}, load average {info['load_start']} "
               f"at start, {info['load_end']} at end; {args.splits} splits")
    text = "\n".join([f"Measured by `{command}` ({machine}).", "", *md])
    print(text)
    if skipped:
        tables.append({"title": "Skipped data sets", "columns": ["data set", "reason"], "rows": skipped})
    # the data sets first: readers take the first entry as a data set's results
    write_result("anytime_quality", {**results, "tables": tables}, command, machine=info, results_dir=args.out)
    (args.out / "anytime_quality.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
