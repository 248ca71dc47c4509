"""Command-line interface: `edgeseq train | export | inspect | verify | run | report | calibrate`."""

from ._main import main
from . import train_cmd, export_cmd, runtime_cmd, report_cmd, calibrate_cmd  # noqa: F401  (register commands)

__all__ = ["main"]
