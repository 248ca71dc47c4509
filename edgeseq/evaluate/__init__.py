"""Evaluation: anytime curves, α-timeliness, reports, and verification of exports."""

from edgeseq.evaluate.anytime import anytime_curve
from edgeseq.metrics.curves import AnytimeCurve, oracle_curve
from edgeseq.metrics.timeliness import alpha_stopping_cost, plateau_alpha, timeliness

__all__ = ["AnytimeCurve", "alpha_stopping_cost", "anytime_curve", "oracle_curve", "plateau_alpha", "timeliness"]
