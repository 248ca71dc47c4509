"""AnytimeRegressor: cost-sensitive group sequencing for squared loss (CS-G-OMP, CS-G-FR, ...)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import RegressorMixin
from threadpoolctl import threadpool_limits

from edgeseq.train.base import AnytimeBase, step_reporter
from edgeseq.train.basis import build_working_problem
from edgeseq.train.dask_stats import check_dask_X, dask_sufficient_statistics, is_dask_array
from edgeseq.errors import EdgeseqWarning, InputError
from edgeseq.train.groups import GroupSpec
from edgeseq.train.selection import select_sequence
from edgeseq.sequence import FittedSequence
from edgeseq.train.stats import SufficientStats, sufficient_statistics


class AnytimeRegressor(RegressorMixin, AnytimeBase):
    """Learn the order in which to compute feature groups and one ridge model per prefix.

    Parameters
    ----------
    groups : list of lists of column indices, a length-D array of group labels, or None
        None means one group per column (with ``costs=None``: unit costs). Columns in no group are unused.
    costs : one positive finite cost per group.
    method : "omp" (CS-G-OMP), "fr" (CS-G-FR), "single" (best single column), "gomp" (cost ignored).
    whiten : group whitening (True) or per-column standardisation (False: the paper's *no-whiten*).
    doubling : restrict each pick to groups costing at most the total cost so far (Doubling algorithm).
    l2 : ridge penalty λ in the working (whitened, unit-variance-target) space.
    group_names : unique names used by the export and the runtimes (default g0, g1, ...).
    """

    _y_numeric = True

    def __init__(self, groups=None, costs=None, method="omp", whiten=True, doubling=False, l2=1e-5,
                 group_names=None):
        self.groups = groups
        self.costs = costs
        self.method = method
        self.whiten = whiten
        self.doubling = doubling
        self.l2 = l2
        self.group_names = group_names

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def fit(self, X, y, *, progress=None, client=None):
        """One statistics pass over X (chunked; np.memmap works), then selection in D-space.

        `X` may also be a row-chunked ``dask.array`` (optional extra ``edgeseq[dask]``): each partition
        is reduced to its statistics where it lives and the results are merged as a tree, on `client`
        (a ``distributed.Client``), else on the active client, else partition by partition here.
        `progress`: optional callable receiving one line of text per stage, partition and selection step.
        """
        self._check_params()
        if is_dask_array(X):
            return self._fit_dask(X, y, progress=progress, client=client)
        if client is not None:
            raise InputError("client= is for fitting a dask array; X here is an in-memory array")
        X, y = self._validate_fit_X(X, y)
        spec = self._group_spec(X.shape[1])
        used = np.concatenate(spec.columns)
        if progress is not None:
            progress(f"statistics pass over {X.shape[0]:,} rows x {used.size} columns")
        stats = sufficient_statistics(X, y, columns=used, progress=progress)
        return self._fit_stats(stats, spec, n_features=X.shape[1], y_was_1d=np.ndim(y) == 1,
                               progress=progress)

    def _fit_dask(self, X, y, *, progress, client):
        n, d = check_dask_X(X)
        spec = self._group_spec(d)
        self.n_features_in_ = d
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        stats = dask_sufficient_statistics(X, y, columns=np.concatenate(spec.columns), client=client,
                                           progress=progress)
        return self._fit_stats(stats, spec, n_features=d, y_was_1d=np.ndim(y) == 1, progress=progress)

    def fit_from_stats(self, stats: SufficientStats, n_features: int, *, y_was_1d: bool = True, progress=None):
        """Fit from precomputed statistics (see `edgeseq.train.stats.sufficient_statistics`).

        `stats` must cover the used columns in group order: ``np.concatenate(groups)`` as listed.
        This is the seam for data that never fits in memory or lives on several machines.
        """
        self._check_params()
        spec = self._group_spec(int(n_features))
        if stats.x_mean.shape[0] != int(spec.sizes.sum()):
            raise InputError(f"statistics cover {stats.x_mean.shape[0]} columns but the groups use "
                             f"{int(spec.sizes.sum())}; compute them with columns=np.concatenate(groups)")
        if stats.n < 2:
            raise InputError(f"n_samples={stats.n}: need at least 2 samples to fit")
        self.n_features_in_ = int(n_features)
        return self._fit_stats(stats, spec, n_features=int(n_features), y_was_1d=y_was_1d, progress=progress)

    def _fit_stats(self, stats: SufficientStats, spec: GroupSpec, *, n_features: int, y_was_1d: bool,
                   progress=None):
        # D-space work is many small products: threaded BLAS only adds contention (10x slower under load)
        with threadpool_limits(limits=1, user_api="blas"):
            prob = build_working_problem(stats, spec.sizes, self.whiten)
            result = select_sequence(prob, spec.costs, method=self.method, l2=float(self.l2),
                                     doubling=bool(self.doubling), progress=step_reporter(progress, spec))
        for g in result.unusable:
            warnings.warn(f"group {spec.names[g]!r} has no usable direction (constant or empty after "
                          f"whitening); it is placed last with zero gain", EdgeseqWarning, stacklevel=3)
        seq = _fold(prob, result, spec, stats, n_features, y_was_1d, self._provenance(stats))
        self._publish(seq, spec)
        var = stats.var_y
        w = var / var.sum() if var.sum() > 0 else np.zeros_like(var)
        self.train_curve_ = result.explained @ w
        self.objective_path_ = result.objective
        self.selection_scores_ = np.array(result.scores)
        self.unusable_groups_ = list(result.unusable)
        for j, f in enumerate(self.train_curve_):
            seq.train_metrics.append({"explained_variance": float(f)})
        return self

    def predict(self, X, budget=None, prefix=None):
        """Prediction of the longest prefix within `budget` (inclusive), or of `prefix`; default all groups."""
        seq, z = self._linear(X, budget, prefix)
        return z[:, 0] if seq.y_was_1d else z

    def staged_predict(self, X):
        """Yield the prediction of prefix 0, 1, ..., J (what the device holds after each group)."""
        for seq, z in self._staged_linear(X):
            yield z[:, 0] if seq.y_was_1d else z


def _fold(prob, result, spec: GroupSpec, stats: SufficientStats, n_features: int, y_was_1d: bool,
          provenance: dict) -> FittedSequence:
    """Map each prefix's working-space weights to raw feature space: β_g = σ_y T_g w_g, β_0 = ȳ − μᵀβ."""
    coefs, intercepts = [], []
    for j, ws in enumerate(result.prefix_weights):
        blocks = [prob.transforms[g] @ w * prob.y_scale for g, w in zip(result.order[:j], ws)]
        beta = np.vstack(blocks) if blocks else np.zeros((0, prob.q.shape[1]))
        mu = np.concatenate([prob.x_mean[prob.raw_slices[g]] for g in result.order[:j]]) if j else np.zeros(0)
        coefs.append(beta)
        intercepts.append(prob.y_mean - mu @ beta)
    mean = np.zeros(n_features)
    std = np.ones(n_features)
    used = np.concatenate(spec.columns)
    mean[used] = stats.x_mean
    std[used] = np.sqrt(np.maximum(np.diag(stats.cov_xx), 0.0))
    P = prob.q.shape[1]
    return FittedSequence(
        task="regression", link="identity", n_features_in=n_features, group_names=spec.names,
        group_columns=spec.columns, costs=spec.costs, order=np.array(result.order), coefs=tuple(coefs),
        intercepts=np.array(intercepts), output_names=("y",) if P == 1 else tuple(f"y{p}" for p in range(P)),
        doubling_violations=tuple(result.doubling_violations), provenance=provenance,
        y_was_1d=bool(y_was_1d and P == 1), feature_mean=mean, feature_std=std)
