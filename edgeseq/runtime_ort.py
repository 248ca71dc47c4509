"""onnxruntime sessions for prefix graphs: single-threaded, created once, called on the fastest path.

Latency on a device matters more than throughput, and a runtime that spins up thread pools per
session competes with the feature extractors for the cores. So every session is single-threaded
(intra/inter-op threads 1, sequential execution, no spinning). The call path is
the compiled session's `run` (what `InferenceSession.run` calls after re-validating its arguments,
which we validated once at load time) with a pre-built output-name list. For these tiny affine graphs
IO binding measured no faster once the per-call copies into bound buffers are counted, and it would
make a session's calls stateful (see bench/python_runtime_speed.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .errors import IntegrityError

PREFIX0_INPUT = "n"  # prefix 0's only input, float32 [N, 0]: carries the batch size (export contract)


def session_options() -> ort.SessionOptions:
    """Options for low-latency single-threaded inference (shared with the benchmark's bare baseline)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    so.log_severity_level = 3
    return so


def load_verified_bytes(path: Path, sha256: str) -> bytes:
    """The file's bytes, re-checked against the manifest, so the graph we run is the one verified."""
    data = Path(path).read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise IntegrityError(f"{path}: sha256 changed after verification (modified while loading)")
    return data


class PrefixRunner:
    """One prefix graph: its session, its input order and the outputs we read (`y` always first)."""

    def __init__(self, model_bytes: bytes, inputs: list[str], outputs: list[str], where: str):
        try:
            self.session = ort.InferenceSession(model_bytes, sess_options=session_options(),
                                                providers=["CPUExecutionProvider"])
        except Exception as exc:  # a listed, checksummed file that still is not a loadable graph
            raise IntegrityError(f"{where}: onnxruntime cannot load it ({exc})") from None
        got = [i.name for i in self.session.get_inputs()]
        if got != list(inputs):
            raise IntegrityError(f"{where}: graph inputs {got} differ from the manifest's {list(inputs)}")
        have = {o.name for o in self.session.get_outputs()}
        if not set(outputs) <= have:
            raise IntegrityError(f"{where}: graph lacks output(s) {sorted(set(outputs) - have)}")
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        # the compiled session object behind InferenceSession.run: same call, without the wrapper's
        # per-call re-validation of output names and feeds (we validated both at load time)
        inner = getattr(self.session, "_sess", None)
        self._run = inner.run if inner is not None else (lambda o, f, _opts: self.session.run(o, f))

    def run_feeds(self, feeds: dict) -> list[np.ndarray]:
        """Outputs for a {input name: float32 (N, d_g) C-contiguous array} feed."""
        return self._run(self.outputs, feeds, None)

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Outputs for float32 (N, d_g) arrays in input order (prefix 0: pass an empty list)."""
        if not arrays:
            return self.run_rows(1)
        return self._run(self.outputs, dict(zip(self.inputs, arrays)), None)

    def run_rows(self, n: int) -> list[np.ndarray]:
        """Prefix 0 for n rows (its only input carries the batch size)."""
        return self._run(self.outputs, {PREFIX0_INPUT: np.zeros((n, 0), np.float32)}, None)
