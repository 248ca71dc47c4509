"""The fitted sequence: the single intermediate form between training and everything downstream.

Training decides the group order and one affine map per prefix in *raw* feature space (whitening
and scaling already folded in). The ONNX, C and manifest emitters and both runtimes consume only
this object, so none of them recomputes what training decided (the m2cgen pattern:
model -> intermediate form -> emitters).

Conventions
-----------
* Groups keep their original index ``0..J-1`` (``group_names``, ``group_columns``, ``costs``).
* ``order`` lists group indices in computation order; prefix ``j`` uses ``order[:j]``.
* ``coefs[j]`` has shape ``(d_j, P)`` where ``d_j`` is the total size of the groups in ``order[:j]``;
  its rows follow the *concatenation of those groups' raw columns in sequence order*
  (``prefix_columns(j)``). ``intercepts[j]`` has shape ``(P,)``. Prefix 0 has an empty coef.
* The linear output ``z = x_prefix @ coefs[j] + intercepts[j]`` is the prediction for
  ``link == "identity"``; ``"sigmoid"`` (P == 1, binary: probability of ``classes[1]``) and
  ``"softmax"`` (P == n_classes) turn it into probabilities.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, field

import numpy as np

from edgeseq.errors import EdgeseqWarning, InputError

LINKS = ("identity", "sigmoid", "softmax")


def longest_affordable_prefix(cum_cost, budget: float) -> int:
    """The one budget rule every part of edgeseq uses: the longest prefix j with cum_cost[j] <= budget.

    Exact comparison (no slack), so the estimator, the Python runtime, `edgeseq run` and the curves
    agree to the last bit; a budget equal to a prefix's cumulative cost affords it.
    """
    return int(np.nonzero(np.asarray(cum_cost) <= budget)[0][-1])


def check_budget(budget) -> float:
    """A budget as a float: a real number >= 0 in the model's cost units (``inf`` affords everything).

    Examples
    --------
    >>> check_budget(3)
    3.0
    """
    if isinstance(budget, (bool, np.bool_)) or not isinstance(budget, numbers.Real) \
            or math.isnan(budget) or budget < 0:
        raise InputError(f"budget must be a number >= 0 in cost units, got {_short_repr(budget)}")
    return float(budget)


def check_prefix_index(prefix, n_prefixes: int) -> int:
    """A prefix index as an int in 0..n_prefixes-1 (bools and floats refused)."""
    if isinstance(prefix, (bool, np.bool_)) or not isinstance(prefix, numbers.Integral) \
            or not 0 <= prefix < n_prefixes:
        raise InputError(f"prefix must be an integer in 0..{n_prefixes - 1}, got {_short_repr(prefix)}")
    return int(prefix)


def resolve_prefix(cum_cost, budget=None, prefix=None) -> int:
    """The prefix a prediction uses: by `budget` (the budget rule), by index, or the last one.

    The single resolver behind the estimators' ``predict(budget=, prefix=)``, the Python runtime, the
    skl2onnx converter and ``edgeseq run``, so all of them accept and refuse the same arguments.

    Examples
    --------
    >>> resolve_prefix([0.0, 1.0, 3.0], budget=2.5)
    1
    >>> resolve_prefix([0.0, 1.0, 3.0])
    2
    """
    n_prefixes = len(cum_cost)
    if budget is not None and prefix is not None:
        raise InputError("give either budget or prefix, not both")
    if prefix is not None:
        return check_prefix_index(prefix, n_prefixes)
    if budget is None:
        return n_prefixes - 1
    return longest_affordable_prefix(cum_cost, check_budget(budget))


def budget_affords_nothing(cum_cost, budget) -> bool:
    """True when `budget` is below the first stage's cost: the answer is then the prior (prefix 0).

    Callers report it (a warning in the CLI and the estimators, a flag on the runtime's result)
    rather than silently returning the prior.
    """
    return budget is not None and len(cum_cost) > 1 and float(budget) < float(cum_cost[1])


def warn_if_budget_affords_nothing(cum_cost, budget, stacklevel: int = 3) -> None:
    """Warn (EdgeseqWarning) that `budget` buys no group, so the prediction is the prior."""
    if budget_affords_nothing(cum_cost, budget):
        warnings.warn(f"budget {float(budget):.17g} affords no group (the first of the sequence costs "
                      f"{float(cum_cost[1]):g}): the prediction is the prior, prefix 0", EdgeseqWarning,
                      stacklevel=stacklevel)


def _short_repr(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def sample_rows(n_features: int, n: int, *, mean=None, std=None, seed: int = 0,
                extreme_scale: float | None = None) -> np.ndarray:
    """Seeded synthetic rows N(mean, std) (standard normal without statistics) for numerical checks.

    The export's float32 check and `edgeseq verify` draw their rows here, so both see the same
    distribution. With `extreme_scale` s, the first eighth of the rows is multiplied by s and the
    second eighth by 1/s, so a check also covers magnitudes far from the training data.

    Examples
    --------
    >>> sample_rows(3, 4, mean=[10.0, 0.0, 0.0], std=[0.0, 1.0, 1.0])[:, 0].tolist()
    [10.0, 10.0, 10.0, 10.0]
    """
    Z = np.random.default_rng(seed).standard_normal((n, n_features))
    X = Z if mean is None or std is None else np.asarray(mean, dtype=np.float64) + Z * np.asarray(std)
    if extreme_scale is not None:
        k = n // 8
        X[:k] *= extreme_scale
        X[k:2 * k] /= extreme_scale
    return X


def sigmoid(z: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function."""
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax with the max subtracted first (no overflow)."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def apply_link(link: str, z: np.ndarray) -> np.ndarray:
    """Map linear outputs (n, P) to predictions: identity, or class probabilities (n, n_classes)."""
    if link == "identity":
        return z
    if link == "sigmoid":
        p1 = sigmoid(z[:, 0])
        return np.column_stack([1.0 - p1, p1])
    return softmax(z)


@dataclass
class FittedSequence:
    """Order, costs, per-prefix raw-space affine maps and link of a fitted anytime model.

    The one intermediate form between training and everything after it: exporters, runtimes and
    evaluation read a model only through this object (an estimator's ``fitted_sequence_``).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 4))
    >>> y = X[:, 2] + 0.1 * rng.normal(size=100)
    >>> seq = AnytimeRegressor(groups=[[0, 1], [2, 3]], costs=[1.0, 5.0]).fit(X, y).fitted_sequence_
    >>> seq.task, seq.link, seq.n_prefixes
    ('regression', 'identity', 3)
    >>> seq.cum_cost.tolist(), seq.prefix_for_budget(5.0)
    ([0.0, 5.0, 6.0], 1)
    >>> seq.prefix_columns(1).tolist()           # raw columns the prefix-1 model reads
    [2, 3]
    >>> seq.linear(X[:3], 0).shape               # prefix 0: the training mean, one output
    (3, 1)
    """

    task: str  # "regression" or "classification"
    link: str  # one of LINKS
    n_features_in: int
    group_names: tuple[str, ...]
    group_columns: tuple[np.ndarray, ...]
    costs: np.ndarray
    order: np.ndarray
    coefs: tuple[np.ndarray, ...]
    intercepts: np.ndarray  # (J+1, P)
    output_names: tuple[str, ...]  # regression: one name per output; classification: class labels as str
    classes: np.ndarray | None = None  # classification: the original labels
    feature_names: tuple[str, ...] | None = None  # raw column names, when known (CSV header)
    train_metrics: list[dict] = field(default_factory=list)  # one dict per prefix 0..J
    doubling_violations: tuple[int, ...] = ()  # steps (1-based prefix index) where Doubling had no eligible group
    provenance: dict = field(default_factory=dict)  # method, l2, whiten, n_samples, data fingerprint, ...
    y_was_1d: bool = True  # regression: predict returns (n,) rather than (n, 1)
    # training-data column statistics (length D, float64), so exporters and `verify` can draw realistic
    # sample inputs; None when unknown
    feature_mean: np.ndarray | None = None
    feature_std: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.order = np.asarray(self.order, dtype=np.int64)
        self.costs = np.asarray(self.costs, dtype=np.float64)
        self.intercepts = np.asarray(self.intercepts, dtype=np.float64)
        self.coefs = tuple(np.asarray(c, dtype=np.float64) for c in self.coefs)
        self.group_columns = tuple(np.asarray(c, dtype=np.int64) for c in self.group_columns)
        for name in ("feature_mean", "feature_std"):
            if getattr(self, name) is not None:
                setattr(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        self.validate()

    # ----------------------------------------------------------------- structure
    @property
    def n_groups(self) -> int:
        return len(self.group_names)

    @property
    def n_prefixes(self) -> int:
        """J + 1: prefix 0 (nothing computed) to prefix J (all groups)."""
        return len(self.order) + 1

    @property
    def n_outputs(self) -> int:
        return int(self.intercepts.shape[1])

    @property
    def cum_cost(self) -> np.ndarray:
        """Cumulative cost of each prefix, starting at 0.0 (length J + 1)."""
        return np.concatenate([[0.0], np.cumsum(self.costs[self.order])])

    @property
    def group_sizes(self) -> np.ndarray:
        return np.array([len(c) for c in self.group_columns], dtype=np.int64)

    def prefix_columns(self, j: int) -> np.ndarray:
        """Raw column indices used by prefix j, in the row order of ``coefs[j]``."""
        self._check_prefix(j)
        if j == 0:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([self.group_columns[g] for g in self.order[:j]])

    def prefix_for_budget(self, budget: float) -> int:
        """Longest prefix whose cumulative cost is <= budget (inclusive)."""
        return resolve_prefix(self.cum_cost, budget=budget)

    def validate(self) -> None:
        """Internal consistency: catches a hand-edited or corrupted object before anything is emitted."""
        J = len(self.group_names)
        if self.link not in LINKS:
            raise InputError(f"unknown link {self.link!r}; expected one of {LINKS}")
        if self.task not in ("regression", "classification"):
            raise InputError(f"unknown task {self.task!r}")
        if len(self.group_columns) != J or self.costs.shape != (J,):
            raise InputError("group names, columns and costs must have one entry per group")
        if sorted(self.order.tolist()) != list(range(J)):
            raise InputError(f"order must be a permutation of the {J} groups, got {self.order.tolist()}")
        if len(self.coefs) != J + 1 or self.intercepts.shape[0] != J + 1 or self.intercepts.ndim != 2:
            raise InputError("need one coefficient matrix and one intercept row per prefix 0..J")
        P = self.intercepts.shape[1]
        sizes = self.group_sizes
        d = 0
        for j in range(J + 1):
            if j > 0:
                d += int(sizes[self.order[j - 1]])
            if self.coefs[j].shape != (d, P):
                raise InputError(f"coefs[{j}] has shape {self.coefs[j].shape}, expected {(d, P)}")
        if len(self.output_names) != (2 if self.link == "sigmoid" else P):
            raise InputError("output_names must name every output (both classes for a sigmoid link)")
        for name in ("feature_mean", "feature_std"):
            v = getattr(self, name)
            if v is not None and v.shape != (self.n_features_in,):
                raise InputError(f"{name} must have one entry per feature ({self.n_features_in})")

    def _check_prefix(self, j) -> None:
        check_prefix_index(j, self.n_prefixes)

    # ----------------------------------------------------------------- prediction
    def linear_from_prefix_features(self, j: int, x_prefix: np.ndarray) -> np.ndarray:
        """Linear output of prefix j from the concatenated prefix features (n, d_j) -> (n, P)."""
        self._check_prefix(j)
        x_prefix = np.asarray(x_prefix, dtype=np.float64)
        return x_prefix @ self.coefs[j] + self.intercepts[j]

    def linear(self, X: np.ndarray, j: int) -> np.ndarray:
        """Linear output of prefix j from full raw rows X (n, D) -> (n, P)."""
        return self.linear_from_prefix_features(j, np.asarray(X)[:, self.prefix_columns(j)])

    def apply_link(self, z: np.ndarray) -> np.ndarray:
        """Map linear outputs to predictions: identity, or class probabilities (n, n_classes)."""
        return apply_link(self.link, z)
