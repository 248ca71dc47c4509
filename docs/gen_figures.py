"""Draw the docs' anytime-curve picture from a small fit: ``python docs/gen_figures.py``.

The image is committed (``docs/images/anytime_curve.png``) so the site builds without computing
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=HERE / "images" / "anytime_curve.png")
    args = p.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    draw(curves(), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
