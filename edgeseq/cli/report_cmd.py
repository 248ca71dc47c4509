"""`edgeseq report MODEL DATA -o DIR`: anytime curves, timeliness and per-prefix tables for any model."""

from __future__ import annotations

from pathlib import Path

import click

from edgeseq.io.cost_provenance import cost_summary, cost_unit_of
from edgeseq.cli._main import main


def _training_reference(seq):
    """The model's own training curve (from its stored per-prefix training metrics), if it has one (tree
    stages store none)."""
    from edgeseq.metrics.curves import AnytimeCurve

    vals = [m.get("explained_variance") if isinstance(m, dict) else None for m in getattr(seq, "train_metrics", ())]
    if not vals or len(vals) != len(seq.cum_cost) or any(not isinstance(v, (int, float)) for v in vals):
        return None
    method = str(seq.provenance.get("method", "model")) if seq.provenance else "model"
    return AnytimeCurve(costs=seq.cum_cost, values=vals, order=seq.order,
                        group_names=tuple(seq.group_names[g] for g in seq.order), label=f"{method} (training)")


@main.command("report")
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("data", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Directory to write report.md, report.json and the PNG plots into.")
@click.option("--target", help="Target column (CSV). .npz files carry the target as array 'y'.")
@click.option("--train-data", type=click.Path(dir_okay=False, path_type=Path),
              help="Training data for the reference curve (default: the model's stored training curve).")
@click.option("--alpha", type=click.FloatRange(0.0, 1.0), default=None,
              help="α for the stopping cost; default: the plateau rule on the reference curve.")
@click.option("--no-plots", is_flag=True, help="Write only the tables.")
@click.option("--quiet", is_flag=True, help="Print nothing but errors.")
def report_command(model, data, out_dir, target, train_data, alpha, no_plots, quiet):
    """Evaluate every prefix (or tree stage) of MODEL on DATA; write curves, timeliness and tables to -o DIR.

    \b
    edgeseq report model.pkl test.csv --target y -o report/
    """
    from edgeseq.io.data import in_model_order, read_data
    from edgeseq.evaluate.anytime import anytime_curve
    from edgeseq.io.model_io import as_exportable, load_model
    from edgeseq.evaluate.report import write_report

    seq = as_exportable(load_model(model))  # a FittedSequence, or a TreeStageModel (AFR, LightGBM import)
    task = getattr(seq, "task", None) or ("regression" if seq.link == "identity" else "classification")
    provenance = seq.provenance
    ds = read_data(data, target, task)
    name = str(provenance.get("method", "model")) if provenance else "model"
    X = in_model_order(ds, getattr(seq, "feature_names", None), data)  # by header name when the model has names
    curves = {f"{name} on {data.name}": anytime_curve(seq, X, ds.y, label=f"{name} on {data.name}")}
    n_stages, n_groups = len(seq.stage_names), len(seq.group_names)
    size = f"{n_groups} groups" if n_stages == n_groups else f"{n_stages} stages over {n_groups} groups"
    notes = [f"model {model.name}: {task}, link {seq.link}, {size}", cost_summary(provenance)]
    if train_data is not None:
        tr = read_data(train_data, target, task)
        reference = anytime_curve(seq, in_model_order(tr, getattr(seq, "feature_names", None), train_data), tr.y,
                                  label=f"{name} on {train_data.name}")
        curves[reference.label] = reference
    else:
        reference = _training_reference(seq)
        if reference is not None:
            curves[reference.label] = reference
        else:
            reference = next(iter(curves.values()))
            notes.append("the model stores no training curve and no --train-data was given: the stopping "
                         "cost comes from the evaluated data itself")
    files = write_report(curves, out_dir, reference=reference, alpha=alpha, notes=notes,
                         title=f"Anytime curves of {model.name}", cost_unit=cost_unit_of(provenance),
                         plots=not no_plots)
    if task == "classification" and X.shape[0] >= 4:  # what per-input stopping would save, beside the curves
        from edgeseq.evaluate.stopping_tradeoff import stopping_tradeoff, write_stopping_section
        write_stopping_section(out_dir, stopping_tradeoff(seq, X), plots=not no_plots)
    if not quiet:
        for r in files.summary:
            click.echo(f"{r['curve']}: timeliness step {r['timeliness_step']:.4f}, "
                       f"trapezoid {r['timeliness_trapezoid']:.4f}, final F {r['final_value']:.4f}")
        click.echo(f"α = {files.alpha:.2f}, c_α = {files.c_alpha:.4g}")
        if no_plots:
            click.echo("plots skipped (--no-plots)")
        elif files.plots_skipped:
            click.echo(f"plots skipped: {files.plots_skipped}")
        click.echo(f"wrote {files.markdown}" + "".join(f", {p}" for p in files.plots))
