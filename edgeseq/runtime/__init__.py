"""The Python runtime: load a verified export and predict, or run the anytime loop on a device.

Imports only numpy, onnxruntime, the format contract (`edgeseq.format`), the budget rule
(`edgeseq.budget`), bounded messages and `edgeseq.errors`: a device install needs nothing else.
"""

from edgeseq.runtime.loop import GroupReport, RunResult
from edgeseq.runtime.model import ClassifierPrediction, ExportedModel
from edgeseq.runtime.session import AnytimeSession
from edgeseq.errors import SessionBusyError

__all__ = ["AnytimeSession", "ClassifierPrediction", "ExportedModel", "GroupReport", "RunResult", "SessionBusyError"]
