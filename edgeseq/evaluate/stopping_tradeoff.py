"""What per-input early stopping would buy on some data: disagreement against mean cost for a range of δ.

`edgeseq report` adds this beside the anytime curve for classifiers: the rows are split in two
seeded halves, the stopping rule is calibrated on one half at each δ (`edgeseq.export.stopping`,
95 % Clopper-Pearson bound) and measured on the other: the mean cost of the stopping stage relative
to the full cost, and the share of rows whose stopped answer differs from the full model's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from edgeseq.errors import InputError
from edgeseq.evaluate.anytime import _check_X, _steps
from edgeseq.export.stopping import calibrate_stopping
from edgeseq.io.atomic import atomic_output, atomic_write_text
from edgeseq.runtime.stopping import logit_gap, stop_stages, top2_margin
from edgeseq.forms.linear import apply_link

DELTAS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)

__all__ = ["DELTAS", "stopping_tradeoff", "write_stopping_section"]


def stopping_tradeoff(model, X, deltas=DELTAS, seed: int = 0, statistic: str = "logit_gap") -> list[dict]:
    """Per δ: mean cost / full cost and disagreement with the full model on held-out half of `X`.

    Parameters
    ----------
    model : FittedSequence, TreeStageModel or fitted edgeseq classifier
    X : array-like of shape (n_samples, n_features_in)
        Rows never used for training; half calibrate, half measure.
    deltas : sequence of float, default=DELTAS
    seed : int, default=0
        Seeds the split.
    statistic : {"logit_gap", "top2_margin"}, default="logit_gap"
        The stopping statistic (`edgeseq.runtime.stopping`), the export's default for a float model.

    Returns
    -------
    list of dict
        ``{"delta", "cost_ratio", "disagreement", "n_calibration", "n_measured"}`` per δ.

    Raises
    ------
    InputError
        For a regression model or fewer than 4 rows.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.evaluate.stopping_tradeoff import stopping_tradeoff
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(2000, 3)); y = X @ [2.0, 1.0, 0.5] > 0
    >>> est = AnytimeClassifier([[0], [1], [2]], [1.0, 1.0, 1.0]).fit(X[:500], y[:500])
    >>> rows = stopping_tradeoff(est, X[500:], deltas=(0.001, 0.05))
    >>> rows[0]["cost_ratio"] >= rows[1]["cost_ratio"], rows[1]["cost_ratio"] < 1.0
    (True, True)
    """
    steps = _steps(model)
    if steps.link == "identity":
        raise InputError("early stopping applies to classifiers; this model is a regression")
    X = _check_X(steps, X)
    n = X.shape[0]
    if n < 4:
        raise InputError("the stopping trade-off needs at least 4 rows (half calibrate, half measure)")
    scores = [np.asarray(z, dtype=np.float32).reshape(n, -1) for z in steps.readouts(X)]
    probas = [np.asarray(apply_link(steps.link, z), dtype=np.float32) for z in scores]
    perm = np.random.default_rng(seed).permutation(n)
    cal, ev = np.sort(perm[: n // 2]), np.sort(perm[n // 2:])
    margins = np.stack([logit_gap(z[ev]) if statistic == "logit_gap" else top2_margin(p[ev])
                        for z, p in zip(scores, probas)])
    labels = np.stack([p[ev].argmax(axis=1) for p in probas])
    costs = np.asarray(steps.costs, dtype=np.float64)
    rows = []
    for delta in deltas:
        rule = calibrate_stopping([p[cal] for p in probas], costs, float(delta), statistic=statistic,
                                  scores_by_stage=[z[cal] for z in scores])
        stages = stop_stages(margins, rule.thresholds)
        rows.append({"delta": float(delta), "cost_ratio": float(costs[stages].mean() / costs[-1]),
                     "disagreement": float(np.mean(labels[stages, np.arange(ev.size)] != labels[-1])),
                     "n_calibration": int(cal.size), "n_measured": int(ev.size)})
    return rows


def write_stopping_section(out_dir, rows: list[dict], plots: bool = True) -> list[Path]:
    """Append the trade-off table to ``report.md``, write ``stopping.json`` and, with matplotlib,
    ``stopping.png`` (disagreement against mean cost); returns the files written.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from edgeseq.evaluate.stopping_tradeoff import write_stopping_section
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "report.md").write_text("# r\\n")
    >>> rows = [{"delta": 0.01, "cost_ratio": 0.5, "disagreement": 0.004, "n_calibration": 50, "n_measured": 50}]
    >>> [p.name for p in write_stopping_section(d, rows, plots=False)]
    ['report.md', 'stopping.json']
    >>> "| 0.01 | 0.5 | 0.004 |" in (d / "report.md").read_text()
    True
    """
    out = Path(out_dir)
    md = ["", "## Early stopping per input", "",
          f"Calibrated on {rows[0]['n_calibration']} rows, measured on the other {rows[0]['n_measured']} "
          "(95 % Clopper-Pearson bound; see the early-stopping page of the documentation): the mean cost of "
          "the stage each row stops at, relative to computing every group, and the share of rows whose "
          "answer differs from the full model's.", "",
          "| δ | mean cost / full cost | disagreement |", "|---|---|---|"]
    md += [f"| {r['delta']:g} | {r['cost_ratio']:.4g} | {r['disagreement']:.4g} |" for r in rows]
    written = [out / "report.md", out / "stopping.json"]
    png = out / "stopping.png" if plots and _plot(rows, out / "stopping.png") else None
    if png is not None:
        md += ["", f"![stopping]({png.name})"]
        written.append(png)
    text = (out / "report.md").read_text(encoding="utf-8") if (out / "report.md").is_file() else ""
    atomic_write_text(out / "report.md", text + "\n".join(md) + "\n")
    atomic_write_text(out / "stopping.json", json.dumps({"stopping": rows}, indent=1))
    return written


def _plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([r["cost_ratio"] for r in rows], [r["disagreement"] for r in rows], "o-")
    for r in rows:
        ax.annotate(f"δ={r['delta']:g}", (r["cost_ratio"], r["disagreement"]), fontsize=7)
    ax.set_xlabel("mean cost / full cost")
    ax.set_ylabel("disagreement with the full model")
    ax.set_title("Early stopping per input")
    fig.tight_layout()
    with atomic_output(path) as f:
        fig.savefig(f, dpi=110, format="png")
    plt.close(fig)
    return True
