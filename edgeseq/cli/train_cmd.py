"""`edgeseq train`: fit an anytime model from a CSV/.npz and GROUPS.json, save it as a model file."""

from __future__ import annotations

from pathlib import Path

import click

from edgeseq.io.cost_provenance import cost_summary
from edgeseq.errors import InputError
from edgeseq.cli._main import main

from edgeseq.format import METHODS as METHOD_CHOICES


def _estimator(task: str, **params):
    if task == "regression":
        from edgeseq import AnytimeRegressor
        return AnytimeRegressor(**params)
    try:
        from edgeseq import AnytimeClassifier
    except ImportError:
        raise InputError("--task classification needs AnytimeClassifier, which this edgeseq build "
                         "does not have yet") from None
    return AnytimeClassifier(**params)


def sequence_table(seq) -> list[str]:
    """One line per prefix: step, group, cost, cumulative cost, training score."""
    metric = "explained_variance" if seq.task == "regression" else "accuracy"
    head = f"{'step':>4}  {'group':<24} {'cost':>10} {'cum_cost':>10} {('train ' + metric):>26}"
    lines = [head, "-" * len(head)]
    for j in range(seq.n_prefixes):
        name = "(none: prior/mean)" if j == 0 else seq.group_names[seq.order[j - 1]]
        cost = "" if j == 0 else f"{seq.costs[seq.order[j - 1]]:.4g}"
        tm = seq.train_metrics[j] if j < len(seq.train_metrics) else {}
        score = tm.get(metric)
        lines.append(f"{j:>4}  {name[:24]:<24} {cost:>10} {seq.cum_cost[j]:>10.4g} "
                     f"{'' if score is None else f'{score:.4f}':>26}")
    return lines


def penalty_summary(provenance: dict) -> str:
    """The penalty and basis training used, and whether they were chosen or given (one line).

    Examples
    --------
    >>> penalty_summary({"l2": 0.01, "whiten": False, "l2_param": "auto", "whiten_param": "auto",
    ...                  "l2_choice": "cross-validation: 5 folds"})
    'l2=0.01, standardised columns (both chosen by cross-validation: 5 folds)'
    >>> penalty_summary({"l2": 1e-05, "whiten": True})
    'l2=1e-05, group whitening (as given)'
    """
    chosen = [k for k in ("l2", "whiten") if provenance.get(k + "_param") == "auto"]
    how = {0: "as given", 1: f"{chosen[0] if chosen else ''} chosen by ", 2: "both chosen by "}[len(chosen)]
    if chosen:
        how += str(provenance.get("l2_choice", "cross-validation")).split(",")[0]
    basis = "group whitening" if provenance.get("whiten") else "standardised columns"
    return f"l2={float(provenance.get('l2', float('nan'))):.3g}, {basis} ({how})"


def _refuse_ambiguous_target(y) -> None:
    """A 0/1 (two-valued) target without --task is most likely a class label: say so, do not guess."""
    import numpy as np

    values = np.unique(y)
    if y.ndim == 1 and values.size == 2:
        raise InputError(f"the target has exactly two distinct values ({values[0]:g}, {values[1]:g}): pass "
                         "--task classification for a classifier, or --task regression to fit them as numbers")


@main.command("train")
@click.argument("data", type=click.Path(path_type=Path))
@click.option("--target", help="Target column (CSV, Parquet; for .npy shards a column index, default the last). "
                               ".npz files carry the target as array 'y'.")
@click.option("--groups", "groups_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help='GROUPS.json: {"groups": [{"name": ..., "columns": [names or 0-based indices], "cost": ...}]}')
@click.option("--method", type=click.Choice(METHOD_CHOICES), default="omp", show_default=True,
              help="Selection score: omp (CS-G-OMP), fr (CS-G-FR), single (best single column), gomp (cost ignored).")
@click.option("--doubling", is_flag=True, help="Restrict each pick to groups no costlier than the cost so far.")
@click.option("--no-whiten", is_flag=True, help="Standardise columns instead of whitening each group (default: "
              "whichever of the two cross-validates better).")
@click.option("--l2", type=float, default=None, help="L2 penalty (default: chosen by 5-fold cross-validation).")
@click.option("--task", type=click.Choice(["regression", "classification"]), default=None,
              help="What the target is. Default: regression, except that a target with exactly two distinct "
                   "values is refused until you say which you mean.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Model file to write (pickle with a format version; load it with edgeseq.io.model_io.load_model).")
@click.option("--quiet", is_flag=True, help="Print nothing but errors (no progress on stderr, no sequence table).")
@click.option("--scheduler", metavar="ADDRESS", help="Dask scheduler to train on (regression: the statistics "
              "pass; classification: every pass of the selection). DATA is then shards: a directory or glob of "
              ".npy/CSV/Parquet files. Needs edgeseq[dask].")
@click.option("--workers", type=int, help="Train on the shards on a local Dask cluster of N worker processes. "
              "Needs edgeseq[dask].")
def train_command(data, target, groups_path, method, doubling, no_whiten, l2, task, output, quiet,
                  scheduler, workers):
    """Learn the group order and one linear model per prefix; write MODEL.pkl.

    Progress (stages with elapsed time) goes to stderr, the sequence table to stdout.

    \b
    edgeseq train data.csv --target y --groups groups.json -o model.pkl
    edgeseq train 'shards/part-*.npy' --groups groups.json --workers 4 -o model.pkl
    """
    from edgeseq.io.data import read_data, read_groups
    from edgeseq.io.model_io import save_model
    from edgeseq.cli.progress import Progress

    from edgeseq.io.shards import is_shard_source, open_shards
    from edgeseq.cli.train_shards import cluster_client, fit_shards

    progress = Progress(quiet)
    sharded = is_shard_source(data) or scheduler is not None or workers is not None
    with progress.stage("read data", str(data)):
        ds = open_shards(data, target) if sharded else read_data(data, target, task or "regression")
    if task is None and not sharded:
        _refuse_ambiguous_target(ds.y)
    task = task or "regression"
    if sharded:
        progress.say(f"data: {len(ds.paths)} {ds.kind} shards, {ds.n_features} feature columns")
    else:
        progress.say(f"data: {ds.X.shape[0]} rows x {ds.X.shape[1]} feature columns")
    layout = ds.layout() if sharded else ds
    spec = read_groups(groups_path, layout)
    n_used = sum(len(c) for c in spec.columns)
    progress.say(f"groups: {len(spec.names)} groups over {n_used} columns ({groups_path})")
    params = {} if l2 is None else {"l2": l2}
    est = _estimator(task, groups=spec.columns, costs=spec.costs, method=method, whiten=False if no_whiten else "auto",
                     doubling=doubling, group_names=spec.names, feature_names=layout.feature_names,
                     cost_provenance=spec.cost_provenance, **params)
    rows = f"{len(ds.paths)} shards" if sharded else f"{ds.X.shape[0]} rows"
    passes = ", each a pass over the rows per evaluation" if task == "classification" else ""
    with progress.stage("fit", f"{type(est).__name__} (method {method}): statistics pass over "
                               f"{rows}, then {len(spec.names)} selection steps{passes}"):
        if sharded:
            with cluster_client(scheduler, workers) as client:
                fit_shards(est, ds, spec, client, progress.say)
        else:
            est.fit(ds.X, ds.y, progress=progress.say)
    seq = est.fitted_sequence_
    with progress.stage("save", str(output)):
        save_model(est, output)
    if not quiet:
        for line in sequence_table(seq):
            click.echo(line)
        click.echo(cost_summary(seq.provenance))
        click.echo(penalty_summary(seq.provenance))
        click.echo(f"wrote {output}")
