"""Generalized linear models: the working design, the refit and the greedy GLM group selection."""
