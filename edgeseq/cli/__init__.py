"""Command-line interface: `edgeseq train | import-lightgbm | export | inspect | verify | run | report | calibrate |
bundle`."""

from edgeseq.cli._main import main
from edgeseq.cli import train_cmd, export_cmd, runtime_cmd, report_cmd, calibrate_cmd  # noqa: F401  (register commands)
from edgeseq.cli import import_cmd  # noqa: F401  (register `edgeseq import-lightgbm`)
from edgeseq.cli import bundle_cmd  # noqa: F401  (register `edgeseq bundle`)

__all__ = ["main"]
