"""Command-line interface: `edgeseq train | import-lightgbm | export | inspect | verify | run | report | calibrate`."""

from edgeseq.cli._main import main
from edgeseq.cli import train_cmd, export_cmd, runtime_cmd, report_cmd, calibrate_cmd  # noqa: F401  (register commands)
from edgeseq.cli import import_cmd  # noqa: F401  (register `edgeseq import-lightgbm`)

__all__ = ["main"]
