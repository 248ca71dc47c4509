"""The anytime curve as data: one (cumulative cost, value) point per prefix, read as a step function.

An :class:`AnytimeCurve` holds one point per prefix j = 0..J: the cumulative cost c(S_j) (c_0 = 0)
and the value F_j of that prefix on some data (docs/concepts.md). The prediction available at budget B
is the one of the longest prefix with c(S_j) <= B (inclusive), so a curve is a *step* function of B
(:func:`value_at_budget`). Building curves from models is :mod:`edgeseq.evaluate.anytime`; stopping costs and
timeliness are :mod:`edgeseq.metrics.timeliness`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgeseq.errors import InputError
from edgeseq.budget import longest_affordable_prefix

# the budget rule is exact and shared: edgeseq.budget.longest_affordable_prefix


@dataclass
class AnytimeCurve:
    """Cumulative costs and values of prefixes 0..J, plus the group order that produced them.

    Examples
    --------
    >>> from edgeseq.evaluate import AnytimeCurve
    >>> from edgeseq.metrics.curves import value_at_budget
    >>> curve = AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b"))
    >>> curve.total_cost, curve.final_value, curve.gains.tolist()
    (4.0, 0.9, [0.6, 0.30000000000000004])
    >>> value_at_budget(curve, 3.9), value_at_budget(curve, 4.0)   # a step function, inclusive
    (0.6, 0.9)
    """

    costs: np.ndarray  # (J+1,) cumulative cost c(S_j), costs[0] == 0, strictly increasing
    values: np.ndarray  # (J+1,) F_j
    group_names: tuple[str, ...]  # names of the groups in computation order (length J)
    order: np.ndarray | None = None  # original group indices in computation order, when known
    label: str = ""
    metric: str = "explained variance"
    accuracy: np.ndarray | None = None  # (J+1,) classifiers only
    log_loss: np.ndarray | None = None  # (J+1,) classifiers only, natural log, mean over rows

    def __post_init__(self) -> None:
        self.costs = np.asarray(self.costs, dtype=np.float64).reshape(-1)
        self.values = np.asarray(self.values, dtype=np.float64).reshape(-1)
        self.group_names = tuple(str(g) for g in self.group_names)
        n = self.costs.shape[0]
        if n < 1:
            raise InputError("an anytime curve needs at least the point of prefix 0")
        if self.values.shape != (n,):
            raise InputError(f"got {self.values.shape[0]} values for {n} costs; give one per prefix 0..J")
        if len(self.group_names) != n - 1:
            raise InputError(f"got {len(self.group_names)} group names for {n - 1} steps; give one per group")
        if not (np.all(np.isfinite(self.costs)) and np.all(np.isfinite(self.values))):
            raise InputError("curve costs and values must be finite (no NaN/Inf)")
        if self.costs[0] != 0.0:
            raise InputError(f"the curve must start at cost 0 (prefix 0), got {self.costs[0]!r}")
        if np.any(np.diff(self.costs) <= 0):
            raise InputError("cumulative costs must be strictly increasing (every group costs > 0)")
        if self.order is not None:
            self.order = np.asarray(self.order, dtype=np.int64).reshape(-1)
            if self.order.shape != (n - 1,):
                raise InputError("order must list one group index per step")
        for name in ("accuracy", "log_loss"):
            arr = getattr(self, name)
            if arr is not None:
                arr = np.asarray(arr, dtype=np.float64).reshape(-1)
                if arr.shape != (n,):
                    raise InputError(f"{name} must have one entry per prefix 0..{n - 1}")
                setattr(self, name, arr)

    @property
    def n_steps(self) -> int:
        """J, the number of groups in the sequence.

        Examples
        --------
        >>> from edgeseq.evaluate import AnytimeCurve
        >>> AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b")).n_steps
        2
        """
        return self.costs.shape[0] - 1

    @property
    def step_costs(self) -> np.ndarray:
        """Cost of each group in computation order (length J).

        Examples
        --------
        >>> from edgeseq.evaluate import AnytimeCurve
        >>> AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b")).step_costs.tolist()
        [1.0, 3.0]
        """
        return np.diff(self.costs)

    @property
    def gains(self) -> np.ndarray:
        """F_j - F_{j-1}: what each group added (length J).

        Examples
        --------
        A negative gain shows a group that made the prediction worse on this data:

        >>> from edgeseq.evaluate import AnytimeCurve
        >>> AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.5, 0.25], group_names=("a", "b")).gains.tolist()
        [0.5, -0.25]
        """
        return np.diff(self.values)

    @property
    def total_cost(self) -> float:
        """Cumulative cost of the whole sequence, c(S_J).

        Examples
        --------
        >>> from edgeseq.evaluate import AnytimeCurve
        >>> AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b")).total_cost
        4.0
        """
        return float(self.costs[-1])

    @property
    def final_value(self) -> float:
        """F_J, the value once every group is computed.

        Examples
        --------
        >>> from edgeseq.evaluate import AnytimeCurve
        >>> AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b")).final_value
        0.9
        """
        return float(self.values[-1])


# ------------------------------------------------------------------------------------- reading curves
def prefix_at_budget(curve: AnytimeCurve, budget: float) -> int:
    """Index of the longest prefix with c(S_j) <= budget (inclusive).

    This is the rule every runtime applies, so a curve read at budget B shows what a device would
    deliver with B to spend.

    Raises
    ------
    InputError
        The budget is not a number, is NaN or is negative.

    Examples
    --------
    >>> from edgeseq.evaluate import AnytimeCurve
    >>> from edgeseq.metrics.curves import prefix_at_budget
    >>> curve = AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b"))
    >>> [prefix_at_budget(curve, b) for b in (0.0, 0.99, 1.0, 3.5, 100.0)]
    [0, 0, 1, 1, 2]
    """
    try:
        budget = float(budget)
    except (TypeError, ValueError) as exc:
        raise InputError(f"budget must be a number, got {budget!r}") from exc
    if np.isnan(budget) or budget < 0:
        raise InputError(f"budget must be a number >= 0, got {budget!r}")
    return longest_affordable_prefix(curve.costs, budget)


def value_at_budget(curve: AnytimeCurve, budget: float) -> float:
    """F of the prediction available at `budget`: the step function F(B) = F_{prefix_at_budget(B)}.

    Examples
    --------
    >>> from edgeseq.evaluate import AnytimeCurve
    >>> from edgeseq.metrics.curves import value_at_budget
    >>> curve = AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.1, 0.6, 0.9], group_names=("a", "b"))
    >>> value_at_budget(curve, 0.5), value_at_budget(curve, 4.0)
    (0.1, 0.9)
    """
    return float(curve.values[prefix_at_budget(curve, budget)])


def oracle_curve(curve: AnytimeCurve, label: str | None = None) -> AnytimeCurve:
    """Karayev et al.'s Oracle: the same groups reordered by gain per cost, descending.

    Each group keeps the gain F_j - F_{j-1} and cost it had in `curve` (the marginal benefits are
    assumed not to change when reordered). Ties keep the original order. Accuracy and log-loss are
    not additive in this way, so the oracle curve has none. The result is a reference for how good
    an order could be given the measured gains, not a model that can be trained or deployed.

    Examples
    --------
    >>> from edgeseq.evaluate import AnytimeCurve, oracle_curve
    >>> measured = AnytimeCurve(costs=[0.0, 4.0, 5.0], values=[0.0, 0.3, 0.9], group_names=("slow", "fast"))
    >>> best = oracle_curve(measured)
    >>> best.group_names, best.costs.tolist(), best.values.round(3).tolist()
    (('fast', 'slow'), [0.0, 1.0, 5.0], [0.0, 0.6, 0.9])
    """
    ratio = curve.gains / curve.step_costs
    perm = np.argsort(-ratio, kind="stable")
    costs = np.concatenate([[0.0], np.cumsum(curve.step_costs[perm])])
    values = curve.values[0] + np.concatenate([[0.0], np.cumsum(curve.gains[perm])])
    return AnytimeCurve(costs=costs, values=values,
                        group_names=tuple(curve.group_names[i] for i in perm),
                        order=None if curve.order is None else curve.order[perm],
                        label=f"Oracle({curve.label})" if label is None else label, metric=curve.metric)
