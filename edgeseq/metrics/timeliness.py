"""α-stopping cost, the plateau rule and α-timeliness (docs/evaluation.md; the papers' §5.2).

Linear predictors plateau long before every group is computed, and the plateau would dominate an
area under the whole curve. So the curve is cut at the α-stopping cost c_α of a *reference* curve
(CS-G-OMP on the training data) and scored by its mean value over budgets uniform in [0, c_α].

Readings of the definitions, as implemented:

* c_α is the cumulative cost of the first prefix j with F_j >= α·F_J on the reference curve (F_J its
  final value, which must be > 0). "Reaches" tolerates a relative float error of 1e-12·|F_J|.
* Plateau rule: for α = 0.95, 0.96, ..., 0.99 (integer percents, so no float drift) take the first α
  with c_{α+0.01} - c_α > 0.20 · c_J, i.e. the *additional* cost needed to go from α to α + 1% of the
  final value exceeds 20% of the reference curve's total cost c_J (the cost of all its groups). This
  is the papers' "at least 95% of the total objective has been achieved and the next 1% requires more
  than 20% feature costs". If no α qualifies the curve has no plateau and α = 1.
* Timeliness (1/c_α)∫_0^{c_α} F(B) dB with F(B) either the step function (the prediction really
  available at budget B; the honest anytime semantics) or the piecewise-linear interpolation through
  the points (c_j, F_j) (what the papers' tables appear to use). Past a curve's last point F stays at
  F_J (nothing more is computed). For c_α = 0 both return the limit of the mean, F_0.
"""

from __future__ import annotations

import numpy as np

from edgeseq.metrics.curves import AnytimeCurve
from edgeseq.errors import InputError

_REACH_TOL = 1e-12


def _check_alpha(alpha) -> float:
    try:
        alpha = float(alpha)
    except (TypeError, ValueError) as exc:
        raise InputError(f"alpha must be a number in [0, 1], got {alpha!r}") from exc
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"alpha must be in [0, 1], got {alpha!r}")
    return alpha


def alpha_stopping_cost(reference_curve: AnytimeCurve, alpha: float) -> float:
    """c_α: the first cumulative cost at which the reference curve reaches α of its final value.

    Examples
    --------
    >>> from edgeseq.evaluate import AnytimeCurve, alpha_stopping_cost
    >>> ref = AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b"))
    >>> alpha_stopping_cost(ref, 0.5), alpha_stopping_cost(ref, 0.95)
    (1.0, 4.0)
    """
    alpha = _check_alpha(alpha)
    final = reference_curve.final_value
    if not final > 0.0:
        raise InputError(
            f"the reference curve's final value is {final!r}; α-stopping costs need a reference that "
            "explains some variance (use the training-data curve of CS-G-OMP)")
    target = alpha * final - _REACH_TOL * abs(final)
    j = int(np.nonzero(reference_curve.values >= target)[0][0])
    return float(reference_curve.costs[j])


def plateau_alpha(reference_curve: AnytimeCurve, start: float = 0.95, extra_cost_fraction: float = 0.20) -> float:
    """The smallest α on the 1% grid from `start` whose next 1% costs > `extra_cost_fraction` of c_J; else 1.

    Examples
    --------
    >>> from edgeseq.evaluate import AnytimeCurve, plateau_alpha
    >>> ref = AnytimeCurve(costs=[0.0, 1.0, 2.0, 10.0], values=[0.0, 0.5, 0.96, 1.0],
    ...                    group_names=("a", "b", "c"))
    >>> plateau_alpha(ref)        # 96% costs 2; the next 1% needs the last group, 8 of the total 10
    0.96
    """
    start_pct = int(round(_check_alpha(start) * 100))
    if abs(start_pct / 100 - float(start)) > 1e-9:
        raise InputError(f"start must be on the 1% grid (e.g. 0.95), got {start!r}")
    if not 0.0 < extra_cost_fraction < 1.0:
        raise InputError(f"extra_cost_fraction must be in (0, 1), got {extra_cost_fraction!r}")
    limit = extra_cost_fraction * reference_curve.total_cost
    for pct in range(start_pct, 100):
        extra = alpha_stopping_cost(reference_curve, (pct + 1) / 100) - alpha_stopping_cost(reference_curve, pct / 100)
        if extra > limit:
            return pct / 100
    return 1.0


def timeliness(curve: AnytimeCurve, c_alpha: float, kind: str = "step") -> float:
    """(1/c_α) ∫_0^{c_α} F(B) dB for the step function (`kind="step"`) or the linear interpolation
    through the curve's points (`kind="trapezoid"`).

    Examples
    --------
    >>> from edgeseq.evaluate import AnytimeCurve, timeliness
    >>> curve = AnytimeCurve(costs=[0.0, 1.0, 4.0], values=[0.0, 0.6, 0.9], group_names=("a", "b"))
    >>> round(timeliness(curve, 4.0), 4)                      # (0 * 1 + 0.6 * 3) / 4
    0.45
    >>> round(timeliness(curve, 4.0, kind="trapezoid"), 4)    # (0.3 * 1 + 0.75 * 3) / 4
    0.6375
    """
    try:
        c_alpha = float(c_alpha)
    except (TypeError, ValueError) as exc:
        raise InputError(f"c_alpha must be a number >= 0, got {c_alpha!r}") from exc
    if not np.isfinite(c_alpha) or c_alpha < 0:
        raise InputError(f"c_alpha must be a finite number >= 0, got {c_alpha!r}")
    if kind not in ("step", "trapezoid"):
        raise InputError(f"kind must be 'step' or 'trapezoid', got {kind!r}")
    c, F = curve.costs, curve.values
    if c_alpha == 0.0:
        return float(F[0])
    if kind == "step":
        # F_j holds on [c_j, c_{j+1}); the last value holds to infinity
        right = np.minimum(np.append(c[1:], np.inf), c_alpha)
        widths = np.clip(right - c, 0.0, None)
        return float(np.dot(F, widths / c_alpha))  # normalise first: exact even for subnormal c_alpha
    inside = c < c_alpha
    xs = np.append(c[inside], c_alpha)
    end_value = np.interp(c_alpha, c, F) if c_alpha <= c[-1] else F[-1]
    ys = np.append(F[inside], end_value)
    return float(np.sum(np.diff(xs) / c_alpha * (ys[1:] + ys[:-1]) / 2.0))


__all__ = ["alpha_stopping_cost", "plateau_alpha", "timeliness"]
