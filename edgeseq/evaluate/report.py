"""Write anytime-curve reports: Markdown tables (always) and PNG plots (with the `plots` extra).

`write_report` takes several methods' curves at once so one plot compares them; the α-stopping cost
comes from one *reference* curve (by convention CS-G-OMP on the training data) and is applied to
every curve, so their timeliness values are comparable.
"""

from __future__ import annotations

import html
import json
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgeseq.io.atomic import atomic_output, atomic_write_text
from edgeseq.metrics.curves import AnytimeCurve
from edgeseq.errors import InputError
from edgeseq.metrics.timeliness import alpha_stopping_cost, plateau_alpha, timeliness

_MD_SPECIAL = "\\`*_[]|~"  # what can break a table cell or start emphasis/links/code


@dataclass
class ReportFiles:
    """What `write_report` wrote, and the numbers it computed.

    Examples
    --------
    >>> from edgeseq.evaluate import AnytimeCurve
    >>> from edgeseq.evaluate.report import write_report
    >>> curve = AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b"))
    >>> import tempfile
    >>> files = write_report({"CS-G-OMP": curve}, tempfile.mkdtemp() + "/rep", plots=False)
    >>> files.markdown.name, files.json.name, files.plots, files.plots_skipped
    ('report.md', 'report.json', [], 'not requested')
    """

    markdown: Path
    json: Path
    plots: list[Path] = field(default_factory=list)
    plots_skipped: str | None = None  # why no PNG was written, when none was
    alpha: float = 1.0
    c_alpha: float = 0.0
    summary: list[dict] = field(default_factory=list)  # one row per curve


def md_escape(text) -> str:
    """Make any string (e.g. a hostile group name) inert inside a Markdown table cell.

    Group names and labels come from users; without escaping, a ``|`` would split a table cell and
    ``*`` or ``<`` would turn into formatting or HTML.

    Examples
    --------
    >>> from edgeseq.evaluate.report import md_escape
    >>> print(md_escape("a|b *c* <br>"))
    a\\|b \\*c\\* &lt;br&gt;
    """
    s = html.escape(str(text), quote=False)
    s = " ".join(s.splitlines()) if s else s
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in s)


@contextmanager
def _writing(path: Path):
    """Turn an OSError on the output path (not a directory, no permission, disk full) into one clear
    InputError naming the path, so `edgeseq report -o BAD` prints a line, not a traceback."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"cannot write the report to {path}: {exc.strerror or exc} "
                         f"({type(exc).__name__}); give -o a writable directory") from None


def _fmt(x, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return f"{x:.{digits}g}" if abs(x) >= 1e4 or (0 < abs(x) < 1e-3) else f"{x:.{digits}f}"


def summarize(curves: dict[str, AnytimeCurve], reference: AnytimeCurve, alpha: float | None = None):
    """(α, c_α, rows): the plateau-rule α unless given, and per curve its step/trapezoid α-timeliness.

    Parameters
    ----------
    curves : dict of str to AnytimeCurve
        The curves to score.
    reference : AnytimeCurve
        The curve whose α-stopping cost every curve's timeliness uses.
    alpha : float, optional
        Fraction of the reference's final value that defines the stopping cost.

    Returns
    -------
    alpha : float
    c_alpha : float
    rows : list of dict
        One row per curve: label, metric, step and trapezoid timeliness, final value, total cost.

    Examples
    --------
    >>> from edgeseq.evaluate import AnytimeCurve
    >>> from edgeseq.evaluate.report import summarize
    >>> ref = AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b"))
    >>> alpha, c_alpha, rows = summarize({"omp": ref}, ref, alpha=1.0)
    >>> alpha, c_alpha, round(rows[0]["timeliness_step"], 3)  # (0 * 1 + 0.6 * 3) / 4
    (1.0, 4.0, 0.45)
    """
    a = plateau_alpha(reference) if alpha is None else float(alpha)
    c_alpha = alpha_stopping_cost(reference, a)
    rows = []
    for key, c in curves.items():
        rows.append({"curve": key, "label": c.label, "metric": c.metric,
                     "timeliness_step": timeliness(c, c_alpha, "step"),
                     "timeliness_trapezoid": timeliness(c, c_alpha, "trapezoid"),
                     "final_value": c.final_value, "total_cost": c.total_cost, "n_groups": c.n_steps})
    return a, c_alpha, rows


def _resolve_reference(curves: dict[str, AnytimeCurve], reference) -> tuple[AnytimeCurve, str]:
    if isinstance(reference, AnytimeCurve):
        return reference, reference.label or "reference curve"
    if reference is None:
        key = next(iter(curves))
        return curves[key], f"{key} (no reference given: the first curve)"
    if isinstance(reference, str) and reference in curves:
        return curves[reference], reference
    raise InputError(f"reference must be an AnytimeCurve or one of the curve names {list(curves)}, got {reference!r}")


def _unit(cost_unit: str) -> str:
    return f" ({cost_unit})" if cost_unit else ""


def _prefix_table(c: AnytimeCurve, cost_unit: str = "") -> list[str]:
    extra = [("accuracy", c.accuracy), ("log-loss", c.log_loss)]
    extra = [(name, arr) for name, arr in extra if arr is not None]
    head = ["step", "group", f"cost{_unit(cost_unit)}", f"cumulative cost{_unit(cost_unit)}", "F"] \
        + [name for name, _ in extra]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for j in range(c.n_steps + 1):
        group = "(none: prior / mean)" if j == 0 else md_escape(c.group_names[j - 1])
        cost = "" if j == 0 else _fmt(float(c.step_costs[j - 1]))
        cells = [str(j), group, cost, _fmt(float(c.costs[j])), _fmt(float(c.values[j]))]
        cells += [_fmt(float(arr[j])) for _, arr in extra]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _y_range(series: dict) -> tuple[float, float]:
    """Every value of every curve, prefix 0 (the prior) included, with a small margin.

    Cutting the axis above the prior hid the first stages - the part of an anytime curve a reader
    looks at first."""
    lo = min(float(np.min(v)) for v in series.values())
    hi = max(float(np.max(v)) for v in series.values())
    pad = 0.06 * (hi - lo) if hi > lo else 0.05 * max(abs(hi), 1.0)
    return lo - pad, hi + pad


# plain axis labels for the metrics a curve can hold (the report's own words, not symbols)
PLAIN_METRICS = {"explained variance": "explained variance (1 = perfect, 0 = no better than the mean)",
                 "accuracy": "accuracy (fraction of rows classified correctly)"}


def curve_colors(keys, palette) -> dict:
    """One colour per method, fixed for every plot of a report (assigned in the order of `keys`).

    Examples
    --------
    >>> curve_colors(["CS-G-OMP", "Sparse", "Oracle"], ["red", "blue"])
    {'CS-G-OMP': 'red', 'Sparse': 'blue', 'Oracle': 'red'}
    """
    return {k: palette[i % len(palette)] for i, k in enumerate(keys)}


def plot_caption(alpha: float, reference: str, metric: str = "explained variance") -> str:
    """What the plots show, in words, for the caption under each of them.

    Examples
    --------
    >>> plot_caption(0.96, "CS-G-OMP")[:60]
    'Each curve is the score of the prediction available at a bud'
    """
    return (f"Each curve is the score of the prediction available at a budget: it steps up when a group's cost "
            f"is paid. The dashed line is the stopping budget, where {reference} first reaches {alpha:.0%} of "
            f"its final {metric}; timeliness averages a curve over budgets up to it. Thick: the method the report "
            "is about; dotted: bounds, not trainable models.")


def _plot(curves: dict[str, AnytimeCurve], c_alpha: float, alpha: float, out_dir: Path, title: str,
          cost_unit: str, main: tuple = (), bounds: tuple = (), reference: str = "the reference"
          ) -> tuple[list[Path], str | None]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "matplotlib is not installed (pip install 'edgeseq[plots]'); plots were skipped"
    first = next(iter(curves.values()))
    panels = [("values", PLAIN_METRICS.get(first.metric, first.metric), "anytime_curves.png"),
              ("accuracy", PLAIN_METRICS["accuracy"], "anytime_accuracy.png")]
    x_max = max(c.total_cost for c in curves.values())
    colors = curve_colors(curves, plt.rcParams["axes.prop_cycle"].by_key()["color"])
    caption = plot_caption(alpha, reference, first.metric)
    written = []
    for attr, ylabel, fname in panels:
        series = {k: getattr(c, attr) for k, c in curves.items() if getattr(c, attr) is not None}
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(10, 5.5))
        # baselines first, thin; the main methods last, thick and on top, so they are never hidden
        for key in sorted(series, key=lambda k: k in main):
            vals, c = series[key], curves[key]
            xs = np.append(c.costs, x_max)
            label = str(key).replace("$", r"\$")  # the caller's method name; no mathtext from user text
            style = dict(linewidth=3.2, zorder=4) if key in main else dict(linewidth=1.3, alpha=0.8, zorder=2)
            if key in bounds:
                style["linestyle"] = ":"
            ax.step(xs, np.append(vals, vals[-1]), where="post", label=label, color=colors[key], **style)
        ax.set_ylim(*_y_range(series))
        ax.axvline(c_alpha, color="grey", linestyle="--", linewidth=1, zorder=1,
                   label="stopping budget (see below)")
        positive = [float(c.step_costs[c.step_costs > 0].min()) for c in curves.values()
                    if np.any(c.step_costs > 0)]
        if positive and x_max / min(positive) > 100:  # costs spanning orders of magnitude: log-like axis
            ax.set_xscale("symlog", linthresh=min(positive))
            ax.set_xlim(left=0.0)
        ax.set_xlabel(f"budget: cost of the groups computed so far{' (' + cost_unit + ')' if cost_unit else ''}"
                      f"{'; symlog scale' if ax.get_xscale() == 'symlog' else ''}")
        ax.set_ylabel(ylabel)
        ax.set_title(title.replace("$", r"\$"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        fig.text(0.01, -0.01, caption.replace("$", r"\$"), fontsize=8.5, va="top", wrap=True)
        fig.tight_layout()
        path = out_dir / fname
        with atomic_output(path) as f:
            fig.savefig(f, dpi=130, format="png", bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written, None


def conclusion(rows: list[dict], bounds=()) -> str:
    """One line naming the method with the best step timeliness among the trainable ones.

    `bounds` are curves that are not trainable models (e.g. an oracle reordering of measured gains):
    they are named as the bound they are, never as the winner.

    Examples
    --------
    >>> conclusion([{"curve": "A", "timeliness_step": 0.8}, {"curve": "B", "timeliness_step": 0.9},
    ...             {"curve": "Oracle", "timeliness_step": 0.95}], bounds=["Oracle"])
    'Conclusion: B has the best step timeliness (0.9000), ahead of A (0.8000); Oracle (0.9500) is a bound, not a model.'
    """
    ranked = sorted((r for r in rows if r["curve"] not in bounds), key=lambda r: -r["timeliness_step"])
    if not ranked:
        return "Conclusion: no trainable method to compare."
    best = ranked[0]
    text = f"Conclusion: {best['curve']} has the best step timeliness ({_fmt(best['timeliness_step'])})"
    if len(ranked) > 1:
        text += f", ahead of {ranked[1]['curve']} ({_fmt(ranked[1]['timeliness_step'])})"
    bound_rows = [r for r in rows if r["curve"] in bounds]
    if bound_rows:
        text += "; " + ", ".join(f"{r['curve']} ({_fmt(r['timeliness_step'])})" for r in bound_rows) \
            + (" is a bound, not a model" if len(bound_rows) == 1 else " are bounds, not models")
    return text + "."


def write_report(curves: dict[str, AnytimeCurve], out_dir, reference: AnytimeCurve | str | None = None,
                 *, alpha: float | None = None, title: str = "Anytime curves", notes=(),
                 cost_unit: str = "", plots: bool = True, descriptions: dict | None = None, main=(),
                 bounds=()) -> ReportFiles:
    """Write report.md (+ report.json, + PNGs when matplotlib is available) into `out_dir`.

    `curves` maps a method name to its curve (e.g. {"CS-G-OMP": ..., "Sparse": ...}); `reference` is the
    curve (or the name of one) whose α-stopping cost all timeliness values use — by convention the
    CS-G-OMP curve on the training data. `alpha=None` applies the plateau rule to the reference.
    `notes` are extra lines for the report (e.g. "costs measured on <machine>").
    `descriptions` maps a curve name to a one-line explanation of the method; `main` names the
    curves drawn on top (the methods the report is about); `bounds` names curves that are not
    trainable models (oracles), which the conclusion line never ranks as the winner.

    Parameters
    ----------
    curves : dict of str to AnytimeCurve
        Method name -> curve.
    out_dir : path
        Created if missing.
    reference : AnytimeCurve or str, optional
        The reference curve (or its key in `curves`).

    Returns
    -------
    ReportFiles

    Raises
    ------
    InputError
        No curves, a value that is not a curve, or an output path that cannot be written.

    Examples
    --------
    >>> from edgeseq.evaluate import AnytimeCurve
    >>> from edgeseq.evaluate.report import write_report
    >>> a = AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b"))
    >>> b = AnytimeCurve(costs=[0.0, 3.0, 4.0], values=[0.0, 0.3, 0.9], group_names=("b", "a"))
    >>> import tempfile
    >>> out = tempfile.mkdtemp() + "/rep"
    >>> files = write_report({"fast first": a, "slow first": b}, out, reference="fast first", plots=False)
    >>> [r["curve"] for r in files.summary]
    ['fast first', 'slow first']
    >>> "| fast first |" in files.markdown.read_text()
    True
    """
    if not curves:
        raise InputError("write_report needs at least one curve")
    for key, c in curves.items():
        if not isinstance(c, AnytimeCurve):
            raise InputError(f"curve {key!r} is a {type(c).__name__}, not an AnytimeCurve")
    ref, ref_name = _resolve_reference(curves, reference)
    a, c_alpha, rows = summarize(curves, ref, alpha)
    out = Path(out_dir)
    with _writing(out):
        out.mkdir(parents=True, exist_ok=True)
        main = tuple(main) or (next(iter(curves)),)  # default: the first curve is what the report is about
        png, skipped = _plot(curves, c_alpha, a, out, title, cost_unit, main, tuple(bounds), str(ref_name)) \
            if plots else ([], "not requested")

    md = [f"# {md_escape(title)}", ""]
    md += [f"- {md_escape(n)}" for n in notes]
    md += [f"- reference curve for the stopping cost: {md_escape(ref_name)}",
           f"- α = {a:.2f} ({'plateau rule' if alpha is None else 'given'}), "
           f"α-stopping cost c_α = {_fmt(c_alpha)}{_unit(cost_unit)}",
           "- timeliness = mean of F over budgets uniform in [0, c_α]: *step* integrates the prediction "
           "actually available at each budget, *trapezoid* interpolates linearly between prefixes", ""]
    md += [conclusion(rows, bounds), ""]
    if descriptions:
        md += ["## Methods", ""] + [f"- **{md_escape(k)}**: {md_escape(descriptions[k])}" for k in curves
                                    if k in descriptions] + [""]
    md += ["## Timeliness", "", "| method | F measure | step timeliness | trapezoid timeliness | final F | "
           f"total cost{_unit(cost_unit)} |", "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {md_escape(r['curve'])} | {md_escape(r['metric'])} | {_fmt(r['timeliness_step'])} | "
                  f"{_fmt(r['timeliness_trapezoid'])} | {_fmt(r['final_value'])} | {_fmt(r['total_cost'])} |")
    md.append("")
    if png:
        md += ["## Plots", "", md_escape(plot_caption(a, str(ref_name), next(iter(curves.values())).metric)), ""] + [f"![{p.stem}]({p.name})" for p in png] + [""]
    else:
        md += [f"Plots: skipped ({md_escape(skipped)}).", ""]
    for key, c in curves.items():
        md += [f"## {md_escape(key)}: per prefix", ""] + _prefix_table(c, cost_unit) + [""]
    md_path = out / "report.md"
    with _writing(md_path):
        atomic_write_text(md_path, "\n".join(md))

    def _arr(x):
        return None if x is None else [float(v) for v in x]
    payload = {"alpha": a, "alpha_rule": "plateau" if alpha is None else "given", "c_alpha": c_alpha,
               "cost_unit": cost_unit, "conclusion": conclusion(rows, bounds),
               "reference": ref_name, "summary": rows, "notes": list(notes),
               "curves": {k: {"label": c.label, "metric": c.metric, "groups": list(c.group_names),
                              "costs": _arr(c.costs), "values": _arr(c.values),
                              "accuracy": _arr(c.accuracy), "log_loss": _arr(c.log_loss)}
                          for k, c in curves.items()}}
    json_path = out / "report.json"
    with _writing(json_path):
        atomic_write_text(json_path, json.dumps(payload, indent=1))
    return ReportFiles(markdown=md_path, json=json_path, plots=png, plots_skipped=None if png else skipped,
                       alpha=a, c_alpha=c_alpha, summary=rows)


__all__ = ["ReportFiles", "write_report", "summarize", "md_escape", "conclusion"]
