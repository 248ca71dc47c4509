"""Linear selection: statistics, whitening, greedy group selection, folding and the linear estimators."""
