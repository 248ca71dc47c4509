"""AnytimeRegressor: cost-sensitive group sequencing for squared loss (CS-G-OMP, CS-G-FR, ...)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import RegressorMixin

from edgeseq.train.functional import fit_sequence
from edgeseq.train.base import AnytimeBase, step_reporter
from edgeseq.train.dask_stats import check_dask_X, dask_sufficient_statistics
from edgeseq.errors import EdgeseqWarning, InputError
from edgeseq.train.groups import GroupSpec
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
    feature_names : optional name of every raw column (length D), carried into the model and the
        export manifest so columns can be matched by name (``edgeseq run`` reads CSV headers).
    cost_provenance : optional ``{"measured_on": ..., "cost_unit": ...}`` as in GROUPS.json: where and
        in what unit the costs were measured; recorded in the model's provenance and the manifest.


    Examples
    --------
    An informative but dearer group is still picked first when its gain per cost is larger:

    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4))
    >>> y = 3 * X[:, 2] + X[:, 0] + 0.1 * rng.normal(size=200)
    >>> est = AnytimeRegressor(groups=[[0, 1], [2, 3]], costs=[1.0, 5.0], group_names=["cheap", "rich"]).fit(X, y)
    >>> est.sequence_.tolist(), est.cum_cost_.tolist()
    ([1, 0], [0.0, 5.0, 6.0])
    >>> est.train_curve_.round(3).tolist()        # training explained variance of prefixes 0, 1, 2
    [0.0, 0.913, 0.999]
    >>> bool(np.allclose(est.predict(X[:2], budget=0.5), y.mean()))   # below every prefix: the mean
    True
    >>> bool(np.allclose(est.predict(X[:2], budget=5.0), est.predict(X[:2], prefix=1)))
    True
    """

    _y_numeric = True

    def __init__(self, groups=None, costs=None, method="omp", whiten=True, doubling=False, l2=1e-5,
                 group_names=None, feature_names=None, cost_provenance=None):
        self.groups = groups
        self.costs = costs
        self.method = method
        self.whiten = whiten
        self.doubling = doubling
        self.l2 = l2
        self.group_names = group_names
        self.feature_names = feature_names
        self.cost_provenance = cost_provenance

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

        Parameters
        ----------
        X : array (n, D)
        y : array (n,) or (n, P)
        progress : callable, optional
        client : distributed.Client, optional
            Where to reduce a dask array's partitions.

        Returns
        -------
        self

        Raises
        ------
        InputError, GroupSpecError
            Bad parameters, non-finite data in used columns, or a bad group specification.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeRegressor
        >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X @ [1.0, 0.0, 2.0]
        >>> lines = []
        >>> est = AnytimeRegressor(groups=[[0], [1], [2]], costs=[1.0, 1.0, 1.0]).fit(X, y, progress=lines.append)
        >>> est.sequence_.tolist()
        [2, 0, 1]
        >>> lines[-1]
        'selection step 3/3: g1'
        """
        self._check_params()
        if self._cluster_fit(X, client):
            return self._fit_dask(X, y, progress=progress, client=client)
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

        Examples
        --------
        Statistics of two chunks, merged, give the same model as one pass over all rows:

        >>> import numpy as np
        >>> from edgeseq import AnytimeRegressor
        >>> from edgeseq.train.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X @ [1.0, 0.0, 2.0]
        >>> stats = sufficient_statistics(X[:60], y[:60]).merge(sufficient_statistics(X[60:], y[60:]))
        >>> est = AnytimeRegressor(groups=[[0], [1], [2]], costs=[1.0, 1.0, 1.0]).fit_from_stats(stats, n_features=3)
        >>> ref = AnytimeRegressor(groups=[[0], [1], [2]], costs=[1.0, 1.0, 1.0]).fit(X, y)
        >>> bool(np.allclose(est.predict(X[:5]), ref.predict(X[:5])))
        True
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
        seq, result = fit_sequence(stats, spec, n_features, method=self.method, l2=self.l2, whiten=self.whiten,
                                   doubling=self.doubling, y_was_1d=y_was_1d, provenance=self._provenance(stats),
                                   progress=step_reporter(progress, spec))
        for g in result.unusable:
            warnings.warn(f"group {spec.names[g]!r} has no usable direction (constant or empty after "
                          f"whitening); it is placed last with zero gain", EdgeseqWarning, stacklevel=3)
        self._publish(self._with_inputs(seq), spec)
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
        """Prediction of the longest prefix within `budget` (inclusive), or of `prefix`; default all groups.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeRegressor
        >>> X = np.random.default_rng(0).normal(size=(100, 2)); y = X @ [2.0, 1.0]
        >>> est = AnytimeRegressor(groups=[[0], [1]], costs=[1.0, 3.0]).fit(X, y)
        >>> bool(np.allclose(est.predict(X[:3]), y[:3], atol=1e-3))  # all groups: near exact
        True
        >>> bool(np.allclose(est.predict(X[:3], budget=2.0), est.predict(X[:3], prefix=1)))  # 2.0 affords group 0 only
        True
        """
        seq, z = self._linear(X, budget, prefix)
        return z[:, 0] if seq.y_was_1d else z

    def staged_predict(self, X):
        """Yield the prediction of prefix 0, 1, ..., J (what the device holds after each group).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeRegressor
        >>> X = np.random.default_rng(0).normal(size=(100, 2)); y = X @ [2.0, 1.0]
        >>> est = AnytimeRegressor(groups=[[0], [1]], costs=[1.0, 3.0]).fit(X, y)
        >>> errors = [float(np.mean((p - y) ** 2)) for p in est.staged_predict(X)]  # after each group
        >>> errors[0] > errors[1] > errors[2], round(errors[2], 6)
        (True, 0.0)
        """
        for seq, z in self._staged_linear(X):
            yield z[:, 0] if seq.y_was_1d else z
