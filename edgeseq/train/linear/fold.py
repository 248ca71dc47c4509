"""Folding: turn each prefix's working-space weights into an affine map of the raw features.

Training happens on centred, group-whitened (and, for regression, scaled) data; the device never
sees that basis. For prefix j with groups S_j the deployed predictor is

    z = Σ_{g ∈ S_j} x_gᵀ β_g + β_0,   β_g = s · T_g w_g,   β_0 = b_j − Σ_{g ∈ S_j} μ_gᵀ β_g

where T_g is the group's working transform, μ_g its column means, s the target scale (σ_y for
squared loss, 1 for GLMs) and b_j the working-space intercept (ȳ for squared loss, the fitted
intercept for GLMs). One function serves the regressor, the classifier and the Sparse baseline.
"""

from __future__ import annotations

import numpy as np

from edgeseq.forms.linear import FittedSequence


def fold_prefix(prob, groups, weights, intercept, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Raw-space (β, β_0) of one prefix from its working weights (one block per group, in order).

    Parameters
    ----------
    prob : WorkingProblem
        Holds the group transforms, raw slices and column means of the fit.
    groups : sequence of int
        The prefix's groups in sequence order.
    weights : sequence of ndarray
        Working-space weights, one (k_g, P) block per group.
    intercept : ndarray of shape (P,)
        Working-space intercept b_j.
    scale : float
        Target scale s (σ_y for squared loss, 1 for GLMs).

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> prob = SimpleNamespace(transforms=[np.eye(1) * 2.0], raw_slices=[slice(0, 1)], x_mean=np.array([3.0]))
    >>> beta, b0 = fold_prefix(prob, [0], [np.array([[0.5]])], np.array([1.0]))
    >>> beta.ravel().tolist(), b0.tolist()   # β = 2·0.5, β_0 = 1 − 3·1
    ([1.0], [-2.0])
    """
    (beta,), (b0,) = _fold_prefixes(prob, list(groups), [weights], [intercept], scale)
    return beta, b0


def _fold_prefixes(prob, order, weight_lists, intercepts, scale) -> tuple[list, list]:
    """`fold_prefix` of several prefixes of one `order` at once: prefix i has weight_lists[i] (one
    block per group of order[:len(weight_lists[i])]) and intercept intercepts[i].

    Why: a sequence of J groups has J + 1 prefixes and J(J + 1)/2 weight blocks; folding them prefix
    by prefix took one small product per block (5,050 for 100 groups, more Python than arithmetic).
    Here each group's blocks of every prefix that holds it are mapped by one product, T_g [w_1 w_2 ...]:
    each entry the same sum as T_g w_i alone.
    """
    P = np.shape(intercepts[0])[-1] if len(intercepts) else 1
    lengths = [len(ws) for ws in weight_lists]
    n_used = max(lengths, default=0)
    sizes = [prob.raw_slices[g].stop - prob.raw_slices[g].start for g in order[:n_used]]
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
    betas = [np.empty((int(offsets[L]), P)) for L in lengths]
    for pos, g in enumerate(order[:n_used]):
        holders = [i for i, L in enumerate(lengths) if L > pos]
        W = np.concatenate([weight_lists[i][pos] for i in holders], axis=1)  # (k_g, holders · P)
        folded = (prob.transforms[g] @ W).reshape(sizes[pos], len(holders), P) * scale
        for h, i in enumerate(holders):
            betas[i][offsets[pos]:offsets[pos + 1]] = folded[:, h]
    mu = np.concatenate([prob.x_mean[prob.raw_slices[g]] for g in order[:n_used]]) if n_used else np.zeros(0)
    b0s = [np.asarray(b, dtype=np.float64) - mu[:beta.shape[0]] @ beta for b, beta in zip(intercepts, betas)]
    return betas, b0s


def raw_column_stats(spec, stats, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of every raw column (0 and 1 for columns no group uses).

    Stored on the fitted sequence so exporters and `edgeseq verify` can draw realistic inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.fold import raw_column_stats
    >>> from edgeseq.forms.groups import check_groups
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.array([[1.0, 9.0, 0.0], [3.0, 9.0, 2.0]])
    >>> spec = check_groups([[2], [0]], [1.0, 1.0], None, n_features=3)  # column 1 unused
    >>> mean, std = raw_column_stats(spec, sufficient_statistics(X, X[:, 0], columns=np.array([2, 0])), 3)
    >>> mean.tolist(), std.tolist()
    ([2.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    """
    used = np.concatenate(spec.columns)
    mean, std = np.zeros(n_features), np.ones(n_features)
    mean[used] = stats.x_mean
    std[used] = np.sqrt(np.maximum(stats.xx_diagonal() / stats.n, 0.0))  # cov_xx's diagonal, without a d × d copy
    return mean, std


def fold_sequence(prob, result, spec, stats, n_features: int, *, intercepts, scale: float = 1.0,
                  task: str, link: str, output_names, classes=None, y_was_1d: bool = False,
                  provenance: dict, column_stats: tuple[np.ndarray, np.ndarray] | None = None) -> FittedSequence:
    """The FittedSequence of a selection result: every prefix folded to raw space.

    `result` carries `order`, `prefix_weights` (per prefix, one working block per group) and
    `doubling_violations`; `intercepts` gives the working-space intercept of each prefix.

    Parameters
    ----------
    prob : WorkingProblem
    result : SelectionResult or GLMSelectionResult
    spec : GroupSpec
    stats : SufficientStats or None
        Read only for the raw columns' means and spreads; None when `column_stats` gives them.
    n_features : int
    intercepts : sequence of arrays (P,)
        Working-space intercept of each prefix.
    scale : float or array (P,)
        Target scale.
    task, link, output_names, classes, y_was_1d, provenance
        Recorded on the FittedSequence.
    column_stats : (mean, std), optional
        `raw_column_stats` computed earlier, so that a caller can free the d × d statistics before
        a long selection.

    Returns
    -------
    FittedSequence

    Examples
    --------
    Folding is exact: the raw-space prefix predicts what the working-space model predicts on whitened data.

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.linear.fold import fold_sequence
    >>> from edgeseq.forms.groups import check_groups
    >>> from edgeseq.train.linear.selection import select_sequence
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2)) + 5; y = X @ [1.0, 2.0] + 3
    >>> spec = check_groups([[0], [1]], [1.0, 1.0], None, n_features=2)
    >>> stats = sufficient_statistics(X, y)
    >>> prob = build_working_problem(stats, spec.sizes, whiten=True)
    >>> res = select_sequence(prob, spec.costs, l2=0.0)
    >>> seq = fold_sequence(prob, res, spec, stats, 2, intercepts=[prob.y_mean] * 3, scale=prob.y_scale,
    ...                     task="regression", link="identity", output_names=("y",), provenance={})
    >>> bool(np.allclose(seq.linear(X, 2)[:, 0], y))
    True
    """
    coefs, raw_intercepts = _fold_prefixes(prob, list(result.order), result.prefix_weights,
                                           list(intercepts)[:len(result.prefix_weights)], scale)
    mean, std = raw_column_stats(spec, stats, n_features) if column_stats is None else column_stats
    return FittedSequence(
        task=task, link=link, n_features_in=n_features, group_names=spec.names, group_columns=spec.columns,
        costs=spec.costs, order=np.array(result.order), coefs=tuple(coefs), intercepts=np.array(raw_intercepts),
        output_names=tuple(output_names), classes=classes,
        doubling_violations=tuple(result.doubling_violations), provenance=provenance,
        y_was_1d=bool(y_was_1d), feature_mean=mean, feature_std=std)


def fold_regression(prob, result, spec, stats, n_features: int, y_was_1d: bool,
                    provenance: dict) -> FittedSequence:
    """Squared loss: the working intercept is ȳ for every prefix and the target scale is σ_y.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.linear.fold import fold_regression
    >>> from edgeseq.forms.groups import check_groups
    >>> from edgeseq.train.linear.selection import select_sequence
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> X = np.random.default_rng(0).normal(size=(100, 2)); y = 4 * X[:, 1] + 10
    >>> spec = check_groups([[0], [1]], [1.0, 1.0], None, n_features=2)
    >>> stats = sufficient_statistics(X, y)
    >>> prob = build_working_problem(stats, spec.sizes, whiten=True)
    >>> seq = fold_regression(prob, select_sequence(prob, spec.costs, l2=0.0), spec, stats, 2, True, {})
    >>> bool(np.isclose(seq.intercepts[0, 0], y.mean())), seq.coefs[1].ravel().round(6).tolist()  # prefix 0: ȳ
    (True, [4.0])
    """
    P = prob.q.shape[1]
    return fold_sequence(prob, result, spec, stats, n_features, intercepts=[prob.y_mean] * len(result.prefix_weights),
                         scale=prob.y_scale, task="regression", link="identity",
                         output_names=("y",) if P == 1 else tuple(f"y{p}" for p in range(P)),
                         y_was_1d=y_was_1d and P == 1, provenance=provenance)
