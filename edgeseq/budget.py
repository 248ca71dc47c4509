"""The one budget rule: which prefix (stage) a budget buys, and the checks of its arguments.

Every part of edgeseq that turns a budget into a prefix — the estimators, the Python runtime and
its anytime loop, the skl2onnx converter, `edgeseq run`, the curves — calls these functions, so all
of them accept, refuse and round exactly alike. The module is tiny on purpose: the device runtime
imports it, and it needs only numpy.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from edgeseq.errors import EdgeseqWarning, InputError
from edgeseq.messages import brief


def longest_affordable_prefix(cum_cost, budget: float) -> int:
    """The one budget rule every part of edgeseq uses: the longest prefix j with cum_cost[j] <= budget.

    Exact comparison (no slack), so the estimator, the Python runtime, `edgeseq run` and the curves
    agree to the last bit; a budget equal to a prefix's cumulative cost affords it.

    Parameters
    ----------
    cum_cost : array_like of float
        Cumulative cost of each prefix, ``cum_cost[0] == 0.0`` and non-decreasing.
    budget : float
        An already checked budget (see `check_budget`), ``>= 0``.

    Returns
    -------
    int
        Index of the longest affordable prefix (0 when only the prior is affordable).

    Examples
    --------
    A budget equal to a cumulative cost buys that prefix; a hair less does not:

    >>> cum = [0.0, 1.0, 3.0]
    >>> longest_affordable_prefix(cum, 3.0), longest_affordable_prefix(cum, 2.999)
    (2, 1)
    >>> longest_affordable_prefix(cum, 0.0)
    0
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
        raise InputError(f"budget must be a number >= 0 in cost units, got {brief(budget)}")
    return float(budget)


def check_prefix_index(prefix, n_prefixes: int) -> int:
    """A prefix index as an int in 0..n_prefixes-1 (bools and floats refused).

    ``True`` is an ``int`` in Python and ``2.0`` compares equal to ``2``; both are refused so a
    caller's mistake is reported rather than silently indexing prefix 1 or 2.

    Raises
    ------
    InputError
        When `prefix` is not an integer in ``0..n_prefixes-1``.

    Examples
    --------
    >>> import numpy as np
    >>> check_prefix_index(np.int64(2), 3)
    2
    >>> check_prefix_index(True, 3)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: prefix must be an integer in 0..2, got True
    """
    if isinstance(prefix, (bool, np.bool_)) or not isinstance(prefix, numbers.Integral) \
            or not 0 <= prefix < n_prefixes:
        raise InputError(f"prefix must be an integer in 0..{n_prefixes - 1}, got {brief(prefix)}")
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
    rather than silently returning the prior. No budget (``None``) and a model without groups
    afford "everything", so they are never reported.

    Examples
    --------
    >>> cum = [0.0, 2.0, 5.0]
    >>> budget_affords_nothing(cum, 1.5), budget_affords_nothing(cum, 2.0), budget_affords_nothing(cum, None)
    (True, False, False)
    """
    return budget is not None and len(cum_cost) > 1 and float(budget) < float(cum_cost[1])


def warn_if_budget_affords_nothing(cum_cost, budget, stacklevel: int = 3) -> None:
    """Warn (EdgeseqWarning) that `budget` buys no group, so the prediction is the prior.

    Parameters
    ----------
    cum_cost : array_like of float
        Cumulative cost of each prefix.
    budget : float or None
        The caller's budget; ``None`` never warns.
    stacklevel : int, default 3
        Passed to `warnings.warn`, so the warning points at the user's call, not at edgeseq.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_if_budget_affords_nothing([0.0, 2.0], 1.0)
    ...     warn_if_budget_affords_nothing([0.0, 2.0], 2.0)   # affords the first group: silent
    >>> [type(w.message).__name__ for w in caught]
    ['EdgeseqWarning']
    """
    if budget_affords_nothing(cum_cost, budget):
        warnings.warn(f"budget {float(budget):.17g} affords no group (the first of the sequence costs "
                      f"{float(cum_cost[1]):g}): the prediction is the prior, prefix 0", EdgeseqWarning,
                      stacklevel=stacklevel)
