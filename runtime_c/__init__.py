"""The model-independent C runtime, shipped inside the Python package so tools can compile it."""

from pathlib import Path


def source_dir() -> Path:
    """Directory holding edgeseq_runtime.h/.c (and examples/)."""
    return Path(__file__).resolve().parent
