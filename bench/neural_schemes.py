"""Anytime neural networks on digits (8 steps x 8 channels): the loss-weight schemes, EANN and OPT.

    python bench/neural_schemes.py [--seeds 3]

Each image row of scikit-learn's 8x8 digits is one step (a group of 8 values, unit cost). For each
seed (a stratified 70/30 split and the network's seed) the default `AnytimeNetClassifier` (32 units
per stage, steps in time order) is trained under every scheme (CONST, LINEAR, Half-End, SIEVE,
AdaLoss), as an EANN (base 2, AdaLoss) and as OPT (for each depth a network trained for its last exit
alone). Test accuracy at a budget of j steps (j + 0.5 cost units: the compute is priced at 4e-8 per
multiply-accumulate, so every stage that needs at most j steps is affordable) gives each anytime
curve; the last column is the mean over the 8 budgets. Writes bench/results/neural_schemes.json.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from edgeseq import AnytimeNetClassifier
from edgeseq.train.neural.estimators import opt_networks

SCHEMES = ["const", "linear", "half_end", "sieve", "adaloss"]
STEPS = 8


def curve(est, X, y) -> list[float]:
    """Test accuracy at a budget of j + 0.5 for j = 1..8 steps."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [float(np.mean(est.predict(X, budget=j + 0.5) == y)) for j in range(1, STEPS + 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    X, y = load_digits(return_X_y=True)
    groups = [list(range(8 * r, 8 * r + 8)) for r in range(STEPS)]
    names = [f"step{r}" for r in range(STEPS)]
    curves: dict[str, list[list[float]]] = {}
    fit_s: dict[str, list[float]] = {}
    for seed in range(args.seeds):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
        kw = dict(group_names=names, order="given", random_state=seed)
        for label, extra in [(s, dict(scheme=s)) for s in SCHEMES] + [("EANN (b=2, AdaLoss)", dict(eann_base=2, scheme="adaloss"))]:
            t = time.perf_counter()
            est = AnytimeNetClassifier(groups, [1.0] * STEPS, **kw, **extra).fit(Xtr, ytr)
            fit_s.setdefault(label, []).append(time.perf_counter() - t)
            curves.setdefault(label, []).append(curve(est, Xte, yte))
            if label == "adaloss":
                t = time.perf_counter()
                opts = opt_networks(est, Xtr, ytr)
                fit_s.setdefault("OPT", []).append(time.perf_counter() - t)
                curves.setdefault("OPT", []).append([float(np.mean(o.predict(Xte) == yte)) for o in opts])
            print(seed, label, np.round(curves[label][-1], 3).tolist(), flush=True)
    rows = []
    for label, cs in curves.items():
        a = np.array(cs)
        cells = [f"{m:.3f} ± {s:.3f}" for m, s in zip(a.mean(axis=0), a.std(axis=0))]
        rows.append([label, *cells, f"{a.mean(axis=1).mean():.3f} ± {a.mean(axis=1).std():.3f}",
                     f"{np.mean(fit_s[label]):.1f}"])
    opt_last = np.array(curves["OPT"])[:, -1]
    gaps = [[label, f"{100 * np.mean(np.array(cs)[:, -1] - opt_last):+.2f}",
             f"{100 * np.std(np.array(cs)[:, -1] - opt_last):.2f}"] for label, cs in curves.items() if label != "OPT"]
    write_result("neural_schemes", {
        "tables": [{"title": f"Test accuracy at a budget of j steps (mean ± std over {args.seeds} seeds)",
                    "columns": ["method", *[f"{j} steps" for j in range(1, STEPS + 1)], "mean over budgets",
                                "fit s"], "rows": rows},
                   {"title": "Final answer (8 steps) minus OPT's, percentage points (mean, std over seeds)",
                    "columns": ["method", "gap pp", "std pp"], "rows": gaps}],
        "curves": curves, "fit_seconds": fit_s, "seeds": args.seeds}, command_line(), machine_info())


if __name__ == "__main__":
    main()
