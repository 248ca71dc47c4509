"""Anytime metrics: the anytime curve and alpha-timeliness, numpy-only (training and reports share them)."""
