"""Intermediate forms: the fitted stage models every kind exports, numpy-only.

A device tool or the Python runtime may import them without the training or export stack.
"""
