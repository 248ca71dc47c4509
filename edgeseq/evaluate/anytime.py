"""Evaluation entry point: the anytime curve of any fitted model on any data (docs/evaluation.md).

`anytime_curve` evaluates every prefix j = 0..J of a FittedSequence (or of an estimator exposing
`fitted_sequence_`) on (X, y) and returns an :class:`~edgeseq.metrics.curves.AnytimeCurve`.

What F is
---------
* Regression: F_j = 1 - MSE_j / Var(y), the fraction of the variance of y explained by prefix j on
  the evaluated data; with several outputs, squared errors and variances are summed over outputs
  (F = 1 - sum SSE / sum SS), so every output counts by its variance.
* Classification: the same definition applied to the one-hot target Y and the predicted class
  probabilities P, F_j = 1 - sum ||Y - P_j||^2 / sum ||Y - mean(Y)||^2 (the Brier skill score).
  Chosen over the log-loss reduction because it is exactly the "fraction of variance of y
  explained" (what the papers plot for their binary data set), is bounded above by 1 and stays finite
  when a probability is exactly 0 or 1, so areas under the curve never blow up. Prefix 0 predicts
  the training prior, so F_0 = 0 on the training data (and near 0 on held-out data). Accuracy and
  log-loss per prefix are kept alongside (``curve.accuracy``, ``curve.log_loss``).

The α-stopping cost, the plateau rule and α-timeliness live in :mod:`edgeseq.metrics.timeliness` and are
re-exported here so that ``edgeseq.evaluate.anytime`` is the single entry point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgeseq.metrics.curves import AnytimeCurve, oracle_curve, prefix_at_budget, value_at_budget
from edgeseq.errors import InputError
from edgeseq.forms.linear import apply_link
from edgeseq.forms.protocol import form_of, staged_answers
from edgeseq.metrics.timeliness import alpha_stopping_cost, plateau_alpha, timeliness


# ------------------------------------------------------------------------------------- building curves
@dataclass(frozen=True)
class _Steps:
    """What a curve needs of a model, whatever its kind: the per-step readouts and their costs.

    Linear prefixes (FittedSequence) and tree stages (TreeStageModel) both yield one readout z per
    step and share the link; only how the readouts are computed and named differs.
    """

    link: str
    classes: np.ndarray | None
    n_outputs: int
    n_features_in: int
    group_columns: tuple
    costs: np.ndarray
    step_names: tuple
    order: np.ndarray | None
    default_label: str
    readouts: object  # X -> iterable of (n, P) readouts, steps 0..J


def _steps(model) -> _Steps:
    form = form_of(model)  # the stage protocol (edgeseq.forms.protocol): no question of which kind it is
    if form is None:
        raise InputError(
            f"expected a FittedSequence, a TreeStageModel or a fitted edgeseq estimator (with `fitted_sequence_` "
            f"or `stage_model_`), got {type(model).__name__}; fit the estimator first")
    classes = form.classes
    if classes is None and form.link != "identity":  # e.g. a LightGBM Booster: labels 0..C-1, as exported
        classes = np.arange(2 if form.link == "sigmoid" else form.n_outputs)
    order = getattr(form, "order", None)  # stages that add one group each name it by its index
    provenance = form.provenance
    return _Steps(form.link, classes, form.n_outputs, form.n_features_in, form.group_columns, form.cum_cost,
                  form.stage_names, None if order is None else np.array(order),
                  str(provenance.get("method", "model")) if provenance else "model",
                  lambda X: staged_answers(form, X))


def _check_X(seq: _Steps, X) -> np.ndarray:
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"X must be numeric: {exc}") from exc
    if X.ndim != 2 or X.shape[1] != seq.n_features_in:
        raise InputError(f"X must have shape (n, {seq.n_features_in}), got {X.shape}")
    if X.shape[0] < 1:
        raise InputError("X has no rows; an anytime curve needs at least one sample")
    used = np.concatenate([np.zeros(0, dtype=np.int64), *seq.group_columns])
    if not np.all(np.isfinite(X[:, used])):
        raise InputError("X contains NaN or Inf in columns the model uses; impute or drop those rows")
    return X


def _regression_targets(seq: _Steps, y, n: int) -> np.ndarray:
    try:
        Y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"regression targets must be numeric: {exc}") from exc
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape != (n, seq.n_outputs):
        raise InputError(f"y must have shape ({n},) or ({n}, {seq.n_outputs}), got {np.shape(y)}")
    if not np.all(np.isfinite(Y)):
        raise InputError("y contains NaN or Inf")
    return Y


def _class_indices(seq: _Steps, y, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(f"class labels y must have shape ({n},), got {y.shape}")
    lookup = {c: i for i, c in enumerate(np.asarray(seq.classes).tolist())}
    idx = np.empty(n, dtype=np.int64)
    for i, lab in enumerate(y.tolist()):
        k = lookup.get(lab)
        if k is None:
            raise InputError(
                f"label {lab!r} (row {i}) is not one of the model's classes {list(lookup)}; "
                "evaluate only on classes the model was trained on")
        idx[i] = k
    return idx


def _explained(sse: float, ss: float) -> float:
    return 1.0 - sse / ss


def _log_loss_from_linear(seq: _Steps, z: np.ndarray, k: np.ndarray) -> float:
    """Mean negative log-likelihood computed from the linear outputs, so p = 0 never yields log(0)."""
    if seq.link == "sigmoid":
        s = np.where(k == 1, -z[:, 0], z[:, 0])  # -log p(true) = softplus(s)
        return float(np.mean(np.logaddexp(0.0, s)))
    m = z.max(axis=1)
    lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
    return float(np.mean(lse - z[np.arange(z.shape[0]), k]))


def anytime_curve(model_or_sequence, X, y, label: str | None = None) -> AnytimeCurve:
    """The anytime curve of a fitted model (FittedSequence, TreeStageModel or estimator) on data (X, y).

    For tree models a step is a stage; its name joins the groups the stage newly pays for.

    Regression: F_j = 1 - MSE_j / Var(y) summed over outputs. Classification: F_j is the explained
    variance of the one-hot target by the class probabilities, plus accuracy and log-loss per prefix.

    Parameters
    ----------
    model_or_sequence : estimator, FittedSequence or TreeStageModel
        A fitted ``AnytimeRegressor`` / ``AnytimeClassifier`` or its ``fitted_sequence_``, a fitted
        ``AFRClassifier``, or a ``TreeStageModel`` (``from_lightgbm``, ``sequence_trees``).
    X : array of shape (n, D)
        Raw features, the columns the model was trained on.
    y : array of shape (n,) or (n, P)
        Targets (regression) or labels (classification).
    label : str, optional
        The curve's name in reports and plots.

    Returns
    -------
    AnytimeCurve
        One point per prefix 0..J: cumulative cost and value.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.evaluate import anytime_curve
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4))
    >>> y = 3 * X[:, 2] + X[:, 0] + 0.1 * rng.normal(size=200)
    >>> est = AnytimeRegressor([[0, 1], [2, 3]], [1.0, 5.0], group_names=["cheap", "rich"]).fit(X, y)
    >>> curve = anytime_curve(est, X, y)
    >>> curve.costs.tolist(), curve.group_names
    ([0.0, 5.0, 6.0], ('rich', 'cheap'))
    >>> curve.values.round(3).tolist()
    [0.0, 0.913, 0.999]
    """
    seq = _steps(model_or_sequence)
    X = _check_X(seq, X)
    n = X.shape[0]
    values = np.empty(len(seq.costs))
    if seq.link == "identity":
        Y = _regression_targets(seq, y, n)
        ss = float(np.sum((Y - Y.mean(axis=0)) ** 2))
        if ss <= 0.0:
            raise InputError("y is constant on these rows, so the explained-variance fraction is undefined")
        for j, z in enumerate(seq.readouts(X)):
            values[j] = _explained(float(np.sum((Y - z) ** 2)), ss)
        acc = ll = None
        metric = "explained variance (1 - MSE/Var(y))"
    else:
        k = _class_indices(seq, y, n)
        n_classes = len(seq.classes)
        onehot = np.zeros((n, n_classes))
        onehot[np.arange(n), k] = 1.0
        ss = float(np.sum((onehot - onehot.mean(axis=0)) ** 2))
        if ss <= 0.0:
            raise InputError("all rows have the same class, so the explained-variance fraction is undefined")
        acc, ll = np.empty(len(seq.costs)), np.empty(len(seq.costs))
        for j, z in enumerate(seq.readouts(X)):
            proba = apply_link(seq.link, z)
            values[j] = _explained(float(np.sum((onehot - proba) ** 2)), ss)
            acc[j] = float(np.mean(np.argmax(proba, axis=1) == k))
            ll[j] = _log_loss_from_linear(seq, z, k)
        metric = "explained variance of one-hot y by the probabilities (Brier skill)"
    return AnytimeCurve(costs=seq.costs, values=values, group_names=seq.step_names, order=seq.order,
                        label=seq.default_label if label is None else label, metric=metric,
                        accuracy=acc, log_loss=ll)


__all__ = ["AnytimeCurve", "anytime_curve", "prefix_at_budget", "value_at_budget", "oracle_curve",
           "alpha_stopping_cost", "plateau_alpha", "timeliness"]
