"""AnytimeRegressor: cost-sensitive group sequencing for squared loss (CS-G-OMP, CS-G-FR, ...)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import RegressorMixin

from edgeseq.train.linear.auto import (check_fold_count, choose_ridge, cv_fits_width, fixed, fold_statistics,
                                       merge_folds, n_folds_for)
from edgeseq.train.linear.functional import fit_sequence
from edgeseq.train.base import AnytimeBase, step_reporter
from edgeseq.train.distributed.stats import check_dask_X, dask_fold_statistics, dask_sufficient_statistics
from edgeseq.errors import EdgeseqWarning, InputError
from edgeseq.forms.groups import GroupSpec
from edgeseq.train.linear.stats import SufficientStats, sufficient_statistics


class AnytimeRegressor(RegressorMixin, AnytimeBase):
    """Learn the order in which to compute feature groups and one ridge model per prefix.

    Parameters
    ----------
    groups : list of lists of int, array of shape (D,) of group labels, or None
        Column indices of each group. None means one group per column (with ``costs=None``: unit
        costs). Columns in no group are unused.
    costs : array-like of shape (n_groups,) or None
        One positive finite cost per group.
    method : {"omp", "fr", "single", "gomp"}, default="omp"
        "omp" (CS-G-OMP), "fr" (CS-G-FR), "single" (best single column), "gomp" (cost ignored).
    whiten : bool or "auto", default="auto"
        Group whitening (True), per-column standardisation (False: the paper's *no-whiten*), or the
        one of the two with the lower cross-validated loss ("auto"). Exact whitening gives a group's
        noise directions unit variance too; it suits groups much narrower than the row count.
    doubling : bool, default=False
        Restrict each pick to groups costing at most the total cost so far (Doubling algorithm).
    l2 : float or "auto", default="auto"
        Ridge penalty λ in the working (whitened, unit-variance-target) space. "auto" picks it from a
        grid by 5-fold cross-validation of the full-budget model, from per-fold statistics of the
        same single pass (see the training page of the docs).
    group_names : list of str, default=None
        Unique names used by the export and the runtimes (default g0, g1, ...).
    feature_names : list of str, default=None
        Name of every raw column (length D), carried into the model and the export manifest so
        columns can be matched by name (``edgeseq run`` reads CSV headers).
    cost_provenance : dict, default=None
        ``{"measured_on": ..., "cost_unit": ...}`` as in GROUPS.json: where and in what unit the
        costs were measured; recorded in the model's provenance and the manifest.

    Attributes
    ----------
    l2_ : float
        The penalty used (the chosen one when ``l2="auto"``).
    whiten_ : bool
        Whether the groups were whitened (the chosen basis when ``whiten="auto"``).
    cv_scores_ : dict
        Mean held-out loss over the folds for each penalty of ``l2_grid_``, keyed by basis
        ("whiten", "standardise"); empty when nothing was chosen.
    l2_grid_ : ndarray
        The penalties compared (empty when nothing was chosen).


    Examples
    --------
    An informative but dearer group is still picked first when its gain per cost is larger:

    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4))
    >>> y = 3 * X[:, 2] + X[:, 0] + 0.1 * rng.normal(size=200)
    >>> est = AnytimeRegressor(groups=[[0, 1], [2, 3]], costs=[1.0, 5.0], group_names=["cheap", "rich"]).fit(X, y)
    >>> est.l2_, est.whiten_            # chosen by cross-validation: little noise, little penalty
    (0.001, False)
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

    def __init__(self, groups=None, costs=None, *, method="omp", whiten="auto", doubling=False, l2="auto",
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
        k = n_folds_for(X.shape[0]) if self._chooses() and cv_fits_width(used.size, self.l2, self.whiten) else 0
        stats = fold_statistics(X, y, used, k) if k else sufficient_statistics(X, y, columns=used, progress=progress)
        return self._fit_stats(stats, spec, n_features=X.shape[1], y_was_1d=np.ndim(y) == 1,
                               progress=progress)

    def _fit_dask(self, X, y, *, progress, client):
        n, d = check_dask_X(X)
        spec = self._group_spec(d)
        self.n_features_in_ = d
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        used = np.concatenate(spec.columns)
        k = n_folds_for(n) if self._chooses() and cv_fits_width(used.size, self.l2, self.whiten) else 0
        stats = dask_fold_statistics(X, y, k, columns=used, client=client, progress=progress) if k else \
            dask_sufficient_statistics(X, y, columns=used, client=client, progress=progress)
        return self._fit_stats(stats, spec, n_features=d, y_was_1d=np.ndim(y) == 1, progress=progress)

    def fit_from_stats(self, stats, n_features: int, *, y_was_1d: bool = True, progress=None):
        """Fit from precomputed statistics (see `edgeseq.train.linear.stats.sufficient_statistics`).

        `stats` must cover the used columns in group order: ``np.concatenate(groups)`` as listed.
        This is the seam for data that never fits in memory or lives on several machines. With
        ``l2="auto"`` or ``whiten="auto"`` pass a list of per-fold statistics instead (fold f: the
        rows i with i mod K = f, see `edgeseq.train.linear.auto.fold_statistics`); they merge exactly into
        the statistics of all rows.

        Examples
        --------
        Statistics of two chunks, merged, give the same model as one pass over all rows:

        >>> import numpy as np
        >>> from edgeseq import AnytimeRegressor
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X @ [1.0, 0.0, 2.0]
        >>> stats = sufficient_statistics(X[:60], y[:60]).merge(sufficient_statistics(X[60:], y[60:]))
        >>> fixed = dict(groups=[[0], [1], [2]], costs=[1.0, 1.0, 1.0], l2=1e-5, whiten=True)
        >>> est = AnytimeRegressor(**fixed).fit_from_stats(stats, n_features=3)
        >>> ref = AnytimeRegressor(**fixed).fit(X, y)
        >>> bool(np.allclose(est.predict(X[:5]), ref.predict(X[:5])))
        True

        Per-fold statistics let the estimator choose its penalty as `fit` does:

        >>> from edgeseq.train.linear.auto import fold_statistics
        >>> folds = fold_statistics(X, y, None, 5)
        >>> est = AnytimeRegressor(groups=[[0], [1], [2]], costs=[1.0, 1.0, 1.0]).fit_from_stats(folds, n_features=3)
        >>> est.l2_ == AnytimeRegressor(groups=[[0], [1], [2]], costs=[1.0, 1.0, 1.0]).fit(X, y).l2_
        True
        """
        self._check_params()
        spec = self._group_spec(int(n_features))
        folds = list(stats) if isinstance(stats, (list, tuple)) else None
        if folds is not None:
            if not folds or not all(isinstance(f, SufficientStats) for f in folds):
                raise InputError("stats must be a SufficientStats or a non-empty list of them (one per fold)")
            stats = merge_folds(folds)
        else:
            check_fold_count(self.l2, self.whiten)
        if stats.x_mean.shape[0] != int(spec.sizes.sum()):
            raise InputError(f"statistics cover {stats.x_mean.shape[0]} columns but the groups use "
                             f"{int(spec.sizes.sum())}; compute them with columns=np.concatenate(groups)")
        if stats.n < 2:
            raise InputError(f"n_samples={stats.n}: need at least 2 samples to fit")
        self.n_features_in_ = int(n_features)
        return self._fit_stats(folds if folds is not None else stats, spec, n_features=int(n_features),
                               y_was_1d=y_was_1d, progress=progress)

    def _chooses(self) -> bool:
        return self.l2 == "auto" or self.whiten == "auto"

    def _choose(self, stats, spec: GroupSpec, progress):
        """(statistics of all rows, Choice) from one SufficientStats or a list of per-fold ones."""
        if not isinstance(stats, list):
            return stats, fixed(self.l2, self.whiten)
        total = merge_folds(stats)
        if len(stats) < 2 or any(f.n < 1 for f in stats) or not self._chooses():
            return total, fixed(self.l2, self.whiten)
        choice = choose_ridge(stats, spec.sizes, l2=self.l2, whiten=self.whiten, total=total)
        if progress is not None:
            progress(f"chose l2={choice.l2:.3g}, whiten={choice.whiten} ({len(stats)}-fold cross-validation)")
        return total, choice

    def _fit_stats(self, stats, spec: GroupSpec, *, n_features: int, y_was_1d: bool, progress=None):
        stats, choice = self._choose(stats, spec, progress)
        seq, result = fit_sequence(stats, spec, n_features, method=self.method, l2=choice.l2, whiten=choice.whiten,
                                   doubling=self.doubling, y_was_1d=y_was_1d, provenance=self._provenance(stats, choice),
                                   progress=step_reporter(progress, spec))
        self._publish_choice(choice)
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
