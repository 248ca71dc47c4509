"""`edgeseq train`: fit an anytime model from a CSV/.npz and GROUPS.json, save it as a model file."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, NamedTuple

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


def estimator_from(**by_task: str) -> Callable:
    """A `ModelKind.build` for an estimator taking ``(groups, costs, *, group_names, feature_names)``:
    ``estimator_from(classification="edgeseq.train.trees.afr:AFRClassifier")``; imported only when used.

    Examples
    --------
    >>> build = estimator_from(classification="edgeseq.train.trees.afr:AFRClassifier")
    >>> type(build("classification", groups=[[0]], costs=[1.0], group_names=["a"], feature_names=None)).__name__
    'AFRClassifier'
    """
    def build(task: str, *, groups, costs, group_names, feature_names, **_linear_only):
        import importlib

        module, name = by_task[task].split(":")
        cls = getattr(importlib.import_module(module), name)
        return cls(groups, costs, group_names=group_names, feature_names=feature_names)
    return build


class ModelKind(NamedTuple):
    """One `edgeseq train --model` choice: how to build its estimator and what it can learn."""

    build: Callable  # (task, groups=, costs=, group_names=, feature_names=, method=, ...) -> estimator
    tasks: tuple[str, ...]
    help: str
    shards: bool = False  # can it train on shards / a Dask cluster
    progress: bool = False  # does its fit take progress=<callable> for progress lines


# `edgeseq train --model NAME`: adding a model kind is one line here
MODELS = {
    "linear": ModelKind(_estimator, ("regression", "classification"), "one linear model per prefix of groups "
                        "(CS-G-OMP and relatives; --method picks the selection)", shards=True, progress=True),
    "afr": ModelKind(estimator_from(classification="edgeseq.train.trees.afr:AFRClassifier"), ("classification",),
                     "tree stages: cost-sensitive boosted-tree features with an SVM readout (AFRClassifier; "
                     "classification only)"),
    "boosting": ModelKind(estimator_from(regression="edgeseq.train.trees.stagewise_boosting:AnytimeBoostingRegressor",
                                         classification="edgeseq.train.trees.stagewise_boosting:AnytimeBoostingClassifier"),
                          ("regression", "classification"), "tree stages: LightGBM rounds per group chosen by "
                          "validation gain per cost, kept only when they beat the linear model on validation "
                          "(AnytimeBoosting*; needs edgeseq[trees])", progress=True),
}


def tree_stage_table(model) -> list[str]:
    """One line per tree stage: stage, the groups it adds, trees, cumulative cost."""
    head = f"{'stage':>5}  {'new groups':<30} {'trees':>6} {'cum_cost':>10}"
    lines = [head, "-" * len(head)]
    for k, (st, cum) in enumerate(zip(model.stages, model.cum_cost)):
        new = ", ".join(model.group_names[g] for g in st.new_groups) or "(none: prior)"
        lines.append(f"{k:>5}  {new[:30]:<30} {st.tree_stop - st.tree_start:>6} {cum:>10.4g}")
    return lines


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


def _refuse_non_finite(ds, spec, path) -> None:
    """NaN/Inf in a grouped column, named as the file names it (the estimators only know indices)."""
    import numpy as np

    from edgeseq.messages import columns_text

    used = np.concatenate(spec.columns)
    bad = used[~np.isfinite(ds.X[:, used]).all(axis=0)]
    if bad.size:
        raise InputError(f"{path}: NaN or Inf in column(s) {columns_text(bad, ds.feature_names)} of the groups; "
                         "training needs every grouped value (clean or impute them first)")


MAX_LABEL_VALUES = 10  # an integer target with at most this many values looks like class labels
MIN_ROWS_PER_CLASS = 5  # fewer rows per class on average: not a classification problem


def label_warning(y) -> str | None:
    """A one-line warning when an integer target with few values is about to train a regression.

    Labels 0/1/2 fitted as numbers give a model that predicts 1.4; the user most likely meant
    classes, but counts (0..5 visits) are numbers too, so this warns instead of refusing.

    Examples
    --------
    >>> import numpy as np
    >>> label_warning(np.array([0.0, 1.0, 2.0, 1.0]))
    'warning: the target has 3 distinct integer values (0, 1, 2): training a regression; pass --task classification if they are class labels (--task regression silences this)'
    >>> label_warning(np.linspace(0, 1, 50)) is None
    True
    """
    import numpy as np

    values = np.unique(y)
    if y.ndim != 1 or not 2 < values.size <= MAX_LABEL_VALUES or not np.all(values == np.round(values)):
        return None
    shown = ", ".join(f"{v:g}" for v in values[:5]) + (", ..." if values.size > 5 else "")
    return (f"warning: the target has {values.size} distinct integer values ({shown}): training a regression; "
            "pass --task classification if they are class labels (--task regression silences this)")


def refuse_implausible_classes(y) -> None:
    """Refuse a classification target with too few rows per class: a continuous target read as labels.

    Examples
    --------
    >>> import numpy as np
    >>> refuse_implausible_classes(np.array([0, 1, 2] * 10))
    >>> refuse_implausible_classes(np.array([str(v) for v in np.arange(40) * 1.5]))
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: --task classification: the target has 40 distinct values in 40 rows (1 row per class on average, fewer than 5): it looks continuous; pass --task regression, or give class labels
    """
    import numpy as np

    n, n_classes = len(y), np.unique(y).size
    if n_classes > 2 and n < MIN_ROWS_PER_CLASS * n_classes:
        raise InputError(f"--task classification: the target has {n_classes} distinct values in {n} rows "
                         f"({n / n_classes:.2g} row{'s' if n != n_classes else ''} per class on average, fewer "
                         f"than {MIN_ROWS_PER_CLASS}): it looks continuous; pass --task regression, or give class "
                         "labels")


@main.command("train")
@click.argument("data", type=click.Path(path_type=Path))
@click.option("--target", help="Target column (CSV, Parquet; for .npy shards a column index, default the last). "
                               ".npz files carry the target as array 'y'.")
@click.option("--groups", "groups_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help='GROUPS.json: {"groups": [{"name": ..., "columns": [names or 0-based indices], "cost": ...}]}')
@click.option("--model", "model_kind", type=click.Choice(list(MODELS)), default="linear", show_default=True,
              help="What to learn: " + "; ".join(f"{k}: {v.help}" for k, v in MODELS.items())
              + ". A LightGBM model you trained yourself: edgeseq import-lightgbm.")
@click.option("--method", type=click.Choice(METHOD_CHOICES), default="omp", show_default=True,
              help="Selection score: omp (CS-G-OMP), fr (CS-G-FR), single (best single column), gomp (cost ignored).")
@click.option("--doubling", is_flag=True, help="Restrict each pick to groups no costlier than the cost so far.")
@click.option("--no-whiten", is_flag=True, help="Standardise columns instead of whitening each group (default: "
              "whichever of the two cross-validates better).")
@click.option("--l2", type=float, default=None, help="L2 penalty (default: chosen by 5-fold cross-validation).")
@click.option("--task", type=click.Choice(["regression", "classification"]), default=None,
              help="What the target is. Default: regression (classification for --model afr), except that a "
                   "target with exactly two distinct values is refused until you say which you mean, and an "
                   "integer target with few values is warned about.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Model file to write (pickle with a format version; load it with edgeseq.io.model_io.load_model).")
@click.option("--quiet", is_flag=True, help="Print nothing but errors (no progress on stderr, no sequence table).")
@click.option("--scheduler", metavar="ADDRESS", help="Dask scheduler to train on (regression: the statistics "
              "pass; classification: every pass of the selection). DATA is then shards: a directory or glob of "
              ".npy/CSV/Parquet files. Needs edgeseq[dask].")
@click.option("--workers", type=int, help="Train on the shards on a local Dask cluster of N worker processes. "
              "Needs edgeseq[dask].")
@click.pass_context
def train_command(ctx, data, target, groups_path, model_kind, method, doubling, no_whiten, l2, task, output, quiet,
                  scheduler, workers):
    """Learn the group order and one model per stage; write MODEL.pkl.

    Progress (stages with elapsed time) goes to stderr, the sequence table to stdout.

    \b
    edgeseq train data.csv --target y --groups groups.json -o model.pkl
    edgeseq train data.csv --target label --groups groups.json --model afr -o model.pkl
    edgeseq train 'shards/part-*.npy' --groups groups.json --workers 4 -o model.pkl
    """
    from edgeseq.io.data import read_data, read_groups
    from edgeseq.io.model_io import save_model
    from edgeseq.cli.progress import Progress

    from edgeseq.io.shards import is_shard_source, open_shards
    from edgeseq.cli.train_shards import cluster_client, fit_shards

    kind = MODELS[model_kind]
    if model_kind != "linear":
        linear_only = [f"--{n.replace('_', '-')}" for n in ("method", "doubling", "no_whiten", "l2")
                       if ctx.get_parameter_source(n) is not click.core.ParameterSource.DEFAULT]
        if linear_only:
            raise click.UsageError(f"{', '.join(linear_only)}: only for --model linear")
    if task is None and kind.tasks == ("classification",):
        task = "classification"
    if task is not None and task not in kind.tasks:
        raise click.UsageError(f"--model {model_kind} learns {' or '.join(kind.tasks)}, not {task}")
    progress = Progress(quiet)
    sharded = is_shard_source(data) or scheduler is not None or workers is not None
    if sharded and not kind.shards:
        raise click.UsageError(f"--model {model_kind} trains on one data file in memory, not on shards")
    with progress.stage("read data", str(data)):
        ds = open_shards(data, target) if sharded else read_data(data, target, task or "regression")
    if task is None and not sharded:
        _refuse_ambiguous_target(ds.y)
        warning = label_warning(ds.y)
        if warning:
            click.echo(warning, err=True)
    if task == "classification" and not sharded:
        refuse_implausible_classes(ds.y)
    task = task or "regression"
    if sharded:
        progress.say(f"data: {len(ds.paths)} {ds.kind} shards, {ds.n_features} feature columns")
    else:
        progress.say(f"data: {ds.X.shape[0]} rows x {ds.X.shape[1]} feature columns")
    layout = ds.layout() if sharded else ds
    spec = read_groups(groups_path, layout)
    n_used = sum(len(c) for c in spec.columns)
    progress.say(f"groups: {len(spec.names)} groups over {n_used} columns ({groups_path})")
    if not sharded:
        _refuse_non_finite(ds, spec, data)
    params = {} if l2 is None else {"l2": l2}
    est = kind.build(task, groups=spec.columns, costs=spec.costs, method=method, whiten=False if no_whiten else "auto",
                     doubling=doubling, group_names=spec.names, feature_names=layout.feature_names,
                     cost_provenance=spec.cost_provenance, **params)
    rows = f"{len(ds.paths)} shards" if sharded else f"{ds.X.shape[0]} rows"
    if model_kind == "linear":
        passes = ", each a pass over the rows per evaluation" if task == "classification" else ""
        what = f"{type(est).__name__} (method {method}): statistics pass over {rows}, then {len(spec.names)} " \
               f"selection steps{passes}"
    else:
        what = f"{type(est).__name__} on {rows}"
    with progress.stage("fit", what):
        if sharded:
            with cluster_client(scheduler, workers) as client:
                fit_shards(est, ds, spec, client, progress.say)
        elif kind.progress:
            est.fit(ds.X, ds.y, progress=progress.say)
        else:
            est.fit(ds.X, ds.y)
    if getattr(est, "model_kind_", None) == "linear":  # a boosting fit that kept the linear model
        progress.say("kept the linear model: the trees' validation curve did not beat it (the model's comparison_ "
                     "holds the paired differences)")
    with progress.stage("save", str(output)):
        save_model(est, output)
    if not quiet:
        seq = getattr(est, "fitted_sequence_", None)
        for line in sequence_table(seq) if seq is not None else tree_stage_table(est.stage_model_):
            click.echo(line)
        if seq is not None:
            click.echo(cost_summary(seq.provenance))
            click.echo(penalty_summary(seq.provenance))
        click.echo(f"wrote {output}")
