"""The Python runtime: load a verified export and predict, or run the anytime loop on a device."""

from edgeseq.runtime.session import AnytimeSession, ClassifierPrediction, RunResult, SessionBusyError

__all__ = ["AnytimeSession", "ClassifierPrediction", "RunResult", "SessionBusyError"]
