"""`edgeseq train --model boosting`: fit AnytimeBoosting{Classifier,Regressor} and print its stages.

Kept apart from `train_cmd` so that command's own code (the linear estimators, shards, Dask) stays
as it is; the boosting estimators train in memory only.
"""

from __future__ import annotations

from edgeseq.errors import InputError


def stage_table(est) -> list[str]:
    """One line per stage: stage, groups it adds, cumulative cost (the fitted model's own stages).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeBoostingRegressor
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 2))
    >>> est = AnytimeBoostingRegressor([[0], [1]], [1.0, 2.0], group_names=["a", "b"], n_jobs=1).fit(X, X[:, 1])
    >>> print("\\n".join(stage_table(est)[:3]))
    stage  groups added                cum_cost
    -------------------------------------------
        0  (none: prior/mean)                 0
        1  b                                  2
    """
    names = est.group_names_
    head = f"{'stage':>5}  {'groups added':<24} {'cum_cost':>12}"
    lines = [head, "-" * len(head)]
    for k, (groups, cum) in enumerate(zip(est.stage_groups_, est.cum_cost_)):
        added = " + ".join(names[g] for g in groups) if groups else "(none: prior/mean)"
        lines.append(f"{k:>5}  {added[:24]:<24} {cum:>12.4g}")
    return lines


def fit_boosting(ds, spec, task: str, sharded: bool, progress):
    """The fitted boosting estimator for in-memory data `ds` and groups `spec` (progress lines on `say`).

    Raises
    ------
    InputError
        For shards or a Dask scheduler: the boosting estimators train in memory.
    """
    if sharded:
        raise InputError("--model boosting trains in memory; give a single CSV/.npz/Parquet file, "
                         "not shards or a Dask scheduler")
    from edgeseq import AnytimeBoostingClassifier, AnytimeBoostingRegressor

    cls = AnytimeBoostingClassifier if task == "classification" else AnytimeBoostingRegressor
    est = cls(spec.columns, spec.costs, group_names=spec.names)
    with progress.stage("fit", f"{cls.__name__}: LightGBM stages chosen by validation gain per cost over "
                               f"{len(spec.names)} groups"):
        est.fit(ds.X, ds.y, progress=progress.say)
    progress.say(f"kept the {est.model_kind_} model (larger area under the validation curve)")
    return est

