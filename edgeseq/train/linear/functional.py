"""The functional core: sequence a squared-loss problem from its statistics, without an estimator.

As scikit-learn's ``orthogonal_mp_gram`` works from the Gram matrix, `sequence_from_gram` works from
the covariance arrays alone, so statistics computed anywhere (a database, a cluster, a stream) can be
sequenced and exported. `AnytimeRegressor` runs the same `fit_sequence` after its statistics pass.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from edgeseq.errors import InputError
from edgeseq.forms.linear import FittedSequence
from edgeseq.train.linear.basis import build_working_problem
from edgeseq.forms.groups import GroupSpec, check_groups
from edgeseq.train.linear.fold import fold_regression
from edgeseq.train.linear.selection import SelectionResult, select_sequence
from edgeseq.train.linear.stats import SufficientStats


def fit_sequence(stats: SufficientStats, spec: GroupSpec, n_features: int, *, method: str, l2: float,
                 whiten: bool, doubling: bool, y_was_1d: bool, provenance: dict,
                 progress=None) -> tuple[FittedSequence, SelectionResult]:
    """Whitening, greedy selection and folding from statistics of the used columns in group order.

    Parameters
    ----------
    stats : SufficientStats
    spec : GroupSpec
    n_features : int
    method, l2, whiten, doubling
        As for `AnytimeRegressor`.
    y_was_1d : bool
        Whether predictions should be 1-D.
    provenance : dict
        Recorded in the sequence.

    Returns
    -------
    (FittedSequence, SelectionResult)

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.functional import fit_sequence
    >>> from edgeseq.forms.groups import check_groups
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X @ [0.0, 1.0, 3.0]
    >>> spec = check_groups(None, None, None, n_features=3)
    >>> seq, res = fit_sequence(sufficient_statistics(X, y), spec, 3, method="omp", l2=1e-5, whiten=True,
    ...                         doubling=False, y_was_1d=True, provenance={})
    >>> seq.order.tolist(), res.explained[:, 0].round(2).tolist()
    ([2, 1, 0], [0.0, 0.9, 1.0, 1.0])
    """
    # D-space work is many small products: threaded BLAS only adds contention (10x slower under load)
    with threadpool_limits(limits=1, user_api="blas"):
        prob = build_working_problem(stats, spec.sizes, whiten)
        result = select_sequence(prob, spec.costs, method=method, l2=float(l2), doubling=bool(doubling),
                                 progress=progress)
    return fold_regression(prob, result, spec, stats, n_features, y_was_1d, provenance), result


def sequence_from_gram(cov_xx, cov_xy, var_y, groups, costs, *, n_samples: int, x_mean=None, y_mean=None,
                       method: str = "omp", l2: float = 1e-5, whiten: bool = True, doubling: bool = False,
                       group_names=None) -> FittedSequence:
    """Learn the group order and every prefix's ridge model from covariance arrays.

    Parameters
    ----------
    cov_xx : ndarray of shape (D, D)
        Centred covariance of the features, XᵀX/n after removing the column means.
    cov_xy : ndarray of shape (D,) or (D, P)
        Centred cross-covariance of the features with the target(s).
    var_y : float or ndarray of shape (P,)
        Variance of each target (only the diagonal of the target covariance is used).
    groups, costs, group_names
        As for `AnytimeRegressor` (column indices refer to the rows of `cov_xx`).
    n_samples : int
        Number of rows the statistics summarise (recorded in the model's provenance).
    x_mean, y_mean : array-like, optional
        Column and target means, for the intercepts (zeros if omitted: centred data).
    method, l2, whiten, doubling
        As for `AnytimeRegressor`.

    Returns
    -------
    FittedSequence
        The intermediate form every exporter and runtime consumes.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3)); y = X @ [2.0, 0.0, 1.0]
    >>> Xc, yc = X - X.mean(0), y - y.mean()
    >>> seq = sequence_from_gram(Xc.T @ Xc / 500, Xc.T @ yc / 500, yc.var(), [[0], [1], [2]], [1.0, 1.0, 1.0],
    ...                          n_samples=500)
    >>> seq.order.tolist()[:2]
    [0, 2]
    """
    cov_xx = np.asarray(cov_xx, dtype=np.float64)
    if cov_xx.ndim != 2 or cov_xx.shape[0] != cov_xx.shape[1]:
        raise InputError(f"cov_xx must be a square (D, D) array, got shape {cov_xx.shape}")
    D = cov_xx.shape[0]
    y_was_1d = np.ndim(cov_xy) == 1
    cov_xy = np.asarray(cov_xy, dtype=np.float64).reshape(D, -1)
    P = cov_xy.shape[1]
    var_y = np.broadcast_to(np.asarray(var_y, dtype=np.float64), (P,))
    x_mean = np.zeros(D) if x_mean is None else np.asarray(x_mean, dtype=np.float64).reshape(D)
    y_mean = np.zeros(P) if y_mean is None else np.asarray(y_mean, dtype=np.float64).reshape(P)
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 2:
        raise InputError(f"n_samples must be an integer >= 2, got {n_samples!r}")
    for name, a in (("cov_xx", cov_xx), ("cov_xy", cov_xy), ("var_y", var_y), ("x_mean", x_mean),
                    ("y_mean", y_mean)):
        if not np.isfinite(a).all():
            raise InputError(f"{name} contains NaN or Inf")
    spec = check_groups(groups, costs, group_names, D)
    used = np.concatenate(spec.columns)
    n = int(n_samples)
    stats = SufficientStats(n=n, x_mean=x_mean[used], y_mean=y_mean, xx=cov_xx[np.ix_(used, used)] * n,
                            xy=cov_xy[used] * n, yy=np.diag(var_y) * n)
    provenance = {"method": method, "whiten": bool(whiten), "doubling": bool(doubling), "l2": float(l2),
                  "n_samples": n, "data_fingerprint": stats.fingerprint(), "estimator": "sequence_from_gram"}
    seq, _ = fit_sequence(stats, spec, D, method=method, l2=l2, whiten=whiten, doubling=doubling,
                          y_was_1d=y_was_1d, provenance=provenance)
    return seq
