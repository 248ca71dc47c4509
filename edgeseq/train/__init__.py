"""Training: groups, statistics, whitening, selection, GLM refits, folding, the estimators."""
