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

from dataclasses import dataclass, field

import numpy as np

from edgeseq.errors import InputError

LINKS = ("identity", "sigmoid", "softmax")


def longest_affordable_prefix(cum_cost, budget: float) -> int:
    """The one budget rule every part of edgeseq uses: the longest prefix j with cum_cost[j] <= budget.

    Exact comparison (no slack), so the estimator, the Python runtime, `edgeseq run` and the curves
    agree to the last bit; a budget equal to a prefix's cumulative cost affords it.
    """
    return int(np.nonzero(np.asarray(cum_cost) <= budget)[0][-1])


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
    """Order, costs, per-prefix raw-space affine maps and link of a fitted anytime model."""

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
        budget = float(budget)
        if np.isnan(budget) or budget < 0:
            raise InputError(f"budget must be a number >= 0, got {budget!r}")
        return longest_affordable_prefix(self.cum_cost, budget)

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
        if not isinstance(j, (int, np.integer)) or isinstance(j, bool) or not 0 <= j <= len(self.order):
            raise InputError(f"prefix must be an integer in 0..{len(self.order)}, got {j!r}")

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
