"""Draw the docs' anytime-curve pictures: ``python docs/gen_figures.py [--only curve|tree-orders]``.

``anytime_curve.png`` comes from a small fit; ``tree_orders.png`` is drawn from the per-split anytime
curves that ``bench/tree_orders.py`` stored in ``bench/results/tree_orders.json`` (nothing is
refitted, so the picture shows exactly the measured runs). The images are committed (``docs/images/anytime_curve.png``) so the site builds without computing
anything; run this script again when the picture should reflect the current code. It fits
``AnytimeClassifier`` on the bundled 8x8 digits with the digits bank's stored extractor costs
(microseconds per image), once cost-sensitive (CS-G-OMP) and once ignoring costs (G-OMP), and plots
the held-out accuracy of the prediction available at each budget: a step function of the budget.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def curves(seed: int = 0):
    """Held-out anytime curves of CS-G-OMP and G-OMP on the digits bank (70/30 stratified split)."""
    from sklearn.model_selection import train_test_split

    from edgeseq import AnytimeClassifier
    from edgeseq.evaluate import anytime_curve
    from edgeseq.extractors.datasets import digits_data

    d = digits_data()
    tr, te = train_test_split(np.arange(len(d.y)), test_size=0.3, random_state=seed, stratify=d.y)
    out = {}
    for label, method in (("CS-G-OMP (cost-sensitive)", "omp"), ("G-OMP (ignores cost)", "gomp")):
        est = AnytimeClassifier(d.columns, d.costs, method=method, l2=0.1, group_names=d.names)
        est.fit(d.X[tr], d.y[tr])
        out[label] = anytime_curve(est, d.X[te], d.y[te], label=label)
    return out


def draw(curve_by_label, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    for (label, c), style in zip(curve_by_label.items(), ("-", "--")):
        x = np.maximum(c.costs, 1.0)  # log axis: prefix 0 (cost 0) is drawn at the left edge
        x = np.append(x, c.costs[-1] * 1.5)
        y = np.append(c.accuracy, c.accuracy[-1])
        ax.step(x, y, where="post", linestyle=style, linewidth=2, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("budget: cumulative extractor cost (µs per image, log scale)")
    ax.set_ylabel("held-out accuracy")
    ax.set_title("Anytime curve: the prediction available at each budget (digits)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(0.12, 0.45))  # the empty area between the curves
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def mean_step_curve(splits: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Mean over splits of the accuracy available at each budget (each split's curve is a step function).

    Examples
    --------
    >>> from gen_figures import mean_step_curve  # doctest: +SKIP
    >>> grid, acc = mean_step_curve([{"cum_cost": [0, 1, 4], "accuracy": [0.5, 0.7, 0.9]},
    ...                              {"cum_cost": [0, 2], "accuracy": [0.5, 0.8]}])
    >>> grid.tolist(), acc.round(3).tolist()
    ([0.0, 1.0, 2.0, 4.0], [0.5, 0.6, 0.75, 0.85])
    """
    grid = np.unique(np.concatenate([np.asarray(s["cum_cost"], float) for s in splits]))
    per_split = []
    for s in splits:
        cost, acc = np.asarray(s["cum_cost"], float), np.asarray(s["accuracy"], float)
        per_split.append(acc[np.searchsorted(cost, grid, side="right") - 1])  # last stage with cost <= B
    return grid, np.mean(per_split, axis=0)


def draw_tree_orders(runs: dict, path: Path) -> None:
    """One panel per data set: the mean test accuracy at each budget of every method in ``runs``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(runs)
    cols = 2
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(11, 3.8 * rows), dpi=100, squeeze=False)
    methods = sorted({m for by_method in runs.values() for m in by_method})
    look = {m: (f"C{i}", ("-", "--", "-.", ":")[i % 4]) for i, m in enumerate(methods)}  # same look in every panel
    for ax, name in zip(axes.ravel(), names):
        curves = {m: mean_step_curve(entry["splits"]) for m, entry in runs[name].items()}
        costs = np.concatenate([g for g, _ in curves.values()])
        left = costs[costs > 0].min() / 3 if np.any(costs > 0) else 1e-3  # log axis: cost 0 drawn here
        right = costs.max() * 1.5 if costs.max() > 0 else 1.0
        for method, (grid, acc) in curves.items():
            color, style = look[method]
            ax.step(np.append(np.maximum(grid, left), right), np.append(acc, acc[-1]), where="post", color=color,
                    linestyle=style, linewidth=1.6, label=f"{method} ({len(runs[name][method]['splits'])} splits)")
        ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel("budget: cumulative group cost (log scale)")
        ax.set_ylabel("mean test accuracy")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    for ax in axes.ravel()[len(names):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=("curve", "tree-orders"), default=None)
    p.add_argument("--out-dir", type=Path, default=HERE / "images")
    args = p.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "curve"):
        draw(curves(), args.out_dir / "anytime_curve.png")
        print(f"wrote {args.out_dir / 'anytime_curve.png'}")
    if args.only in (None, "tree-orders"):
        import json

        doc = json.loads((HERE.parent / "bench" / "results" / "tree_orders.json").read_text(encoding="utf-8"))
        draw_tree_orders(doc["runs"], args.out_dir / "tree_orders.png")
        print(f"wrote {args.out_dir / 'tree_orders.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
