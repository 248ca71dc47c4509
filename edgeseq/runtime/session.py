"""Python runtime: run an exported model (`out/`) with onnxruntime, in batch or as an anytime loop.

`AnytimeSession(out_dir)` verifies the export (schema, manifest checksum, sha256 of every file),
creates one single-threaded onnxruntime session per prefix once, and offers

* `predict(features_by_group, budget=None, prefix=None)` — batch predictions of one prefix;
* `run(extractors, budget=None, deadline_s=None, inputs=None)` — the anytime loop for one sample:
  groups are computed in the learned order and each prefix's prediction is committed as soon as
  its group is done, so an answer is always ready (policies in `runtime_loop` and the README).

Thread policy: extractors of one session never run concurrently. Without a deadline they run on
the calling thread; with one they run on the session's single worker thread, which the loop can
walk away from. While an extractor that overran its deadline is still running, the session is
`busy`: a new run with a deadline waits for it only until that run's own deadline (then returns
the prefix-0 prediction, reported `busy`); a new run without a deadline raises `SessionBusyError`
(waiting could be forever) — call `wait_idle(timeout)` first. No second thread is ever started.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgeseq.errors import EdgeseqError, RuntimeInputError
from edgeseq.runtime.inputs import as_group_array, check_budget, check_deadline, check_group_keys
from edgeseq.runtime.loop import BUSY, GroupReport, Step, _Clock, anytime_loop
from edgeseq.runtime.ort import BIND_MAX_ROWS, PrefixRunner, load_verified_bytes
from edgeseq.runtime.worker import ExtractorWorker
from edgeseq.sequence import longest_affordable_prefix

_F32 = np.dtype(np.float32)

__all__ = ["AnytimeSession", "ClassifierPrediction", "RunResult", "GroupReport", "SessionBusyError"]


class SessionBusyError(EdgeseqError, RuntimeError):
    """A run cannot start: an extractor of an earlier run overran its deadline and is still running."""


@dataclass
class ClassifierPrediction:
    """Classifier output of one prefix: labels (from the manifest's classes) and probabilities."""

    label: np.ndarray        # (N,) original class labels
    proba: np.ndarray        # (N, n_classes) float32
    label_index: np.ndarray  # (N,) int64 index into `classes`
    prefix: int


@dataclass
class RunResult:
    """Outcome of one anytime run (one sample).

    `prediction` is what `predict` returns for that one row at `prefix`: an array of shape (1,)
    or (1, P) for regression, a `ClassifierPrediction` with one row for classifiers.
    """

    prediction: object
    prefix: int
    spent_cost: float   # cost units of every group started (a failed or timed-out one included)
    prefix_cost: float  # cumulative cost of the committed prefix
    elapsed_s: float
    stopped_by: str     # complete | budget | deadline | timeout | busy | error | invalid | no_extractor
    report: list[GroupReport] = field(default_factory=list)

    @property
    def timed_out(self) -> bool:
        return self.stopped_by in ("deadline", "timeout", "busy")


@dataclass(frozen=True)
class _Group:
    name: str
    input_name: str
    dim: int
    cost: float


def _same_rows(rows: dict) -> int:
    """The common number of rows of a batch (1 when no group is given), or an error listing them."""
    if len(set(rows.values())) > 1:
        detail = ", ".join(f"{k!r}: {v}" for k, v in rows.items())
        raise RuntimeInputError(f"groups have different numbers of rows ({detail}); pass one row per "
                                f"sample in every group")
    return next(iter(rows.values()), 1)


def _read_only(pred):
    """Mark the arrays of a prediction that is shared between results read-only."""
    for a in (pred.label, pred.proba, pred.label_index) if isinstance(pred, ClassifierPrediction) else (pred,):
        a.setflags(write=False)
    return pred


class AnytimeSession:
    """A verified export directory, ready to predict (see the module docstring for the policies).

    Parameters
    ----------
    out_dir : str or Path
        A directory written by ``edgeseq export`` / ``export_model``. It is verified (schema,
        checksums, no missing or extra file) before anything is loaded; a failure is an
        ``IntegrityError`` naming the file.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.writer import export_model
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 4))
    >>> y = X[:, 2] + 0.1 * rng.normal(size=100)
    >>> est = AnytimeRegressor([[0, 1], [2, 3]], [1.0, 5.0], group_names=["a", "b"]).fit(X, y)
    >>> out = tempfile.mkdtemp() + "/export"
    >>> _ = export_model(est.fitted_sequence_, out)
    >>> with AnytimeSession(out) as sess:
    ...     batch = sess.predict({"a": X[:4, :2], "b": X[:4, 2:]}, budget=5.0)   # prefix 1: group "b"
    ...     r = sess.run({"a": lambda row: row[:2], "b": lambda row: row[2:]}, budget=5.0, inputs=X[0])
    >>> bool(np.allclose(batch, est.predict(X[:4], prefix=1), atol=1e-5))    # float32 on the device
    True
    >>> r.prefix, r.stopped_by, r.spent_cost
    (1, 'budget', 5.0)
    """

    def __init__(self, out_dir):
        from edgeseq.export.manifest import read_verified  # the export package owns the format

        out = Path(out_dir)
        m = read_verified(out)
        self.out_dir = out
        self.manifest = m
        self.task: str = m["task"]
        self.link: str = m["link"]
        self._regression = self.task == "regression"
        self.groups = tuple(_Group(g["name"], g["input_name"], int(g["dim"]), float(g["cost"]))
                            for g in m["groups"])
        self.group_names = tuple(g.name for g in self.groups)
        self._by_name = {g.name: k for k, g in enumerate(self.groups)}
        self._name_set = frozenset(self._by_name)
        self._needed = [frozenset(self.group_names[:j]) for j in range(len(self.groups) + 1)]
        self._plan = [tuple((g.name, g.dim) for g in self.groups[:j])
                      for j in range(len(self.groups) + 1)]
        self._shapes: list[dict] = [{} for _ in self._plan]  # per prefix: first group's shape -> shapes
        self.cum_cost = np.array([p["cum_cost"] for p in m["prefixes"]], dtype=np.float64)
        outs = m["outputs"]
        self.output_names = tuple(outs["names"])
        self.n_outputs = int(outs["n_outputs"])
        self.classes = None if outs["classes"] is None else np.array(outs["classes"])
        self._squeeze = bool(outs.get("y_was_1d", False)) and self.task == "regression"
        wanted = ["y"] if self.task == "regression" else ["y", "proba", "label"]
        self._runners = [PrefixRunner(load_verified_bytes(out / p["file"], p["sha256"]), p["inputs"],
                                      wanted, str(out / p["file"]), self._squeeze) for p in m["prefixes"]]
        self._steps = [Step(g.name, g.dim, g.cost) for g in self.groups]
        self._prefix0 = _read_only(self._format(self._runners[0].run_rows(1), 0))  # shared by results
        self._run_lock = threading.Lock()
        self._worker: ExtractorWorker | None = None
        self._finalizer = None
        self._closed = False

    # ------------------------------------------------------------------ structure
    @property
    def n_prefixes(self) -> int:
        """J + 1 (prefix 0 predicts without any group)."""
        return len(self._runners)

    def prefix_for_budget(self, budget) -> int:
        """Longest prefix whose cumulative cost is <= budget (inclusive, exact: the estimator's rule)."""
        return longest_affordable_prefix(self.cum_cost, check_budget(budget))

    def _resolve_prefix(self, budget, prefix) -> int:
        if budget is not None and prefix is not None:
            raise RuntimeInputError("pass either budget or prefix, not both")
        if prefix is None:
            return self.n_prefixes - 1 if budget is None else self.prefix_for_budget(budget)
        if isinstance(prefix, bool) or not isinstance(prefix, (int, np.integer)) \
                or not 0 <= prefix < self.n_prefixes:
            raise RuntimeInputError(f"prefix must be an integer in 0..{self.n_prefixes - 1}, got {prefix!r}")
        return int(prefix)

    # ------------------------------------------------------------------ batch
    def predict(self, features_by_group: dict, budget=None, prefix=None):
        """Predictions of the longest prefix allowed (by `budget` in cost units, or `prefix`; else all).

        Keys are group names; groups beyond the prefix may be present and are ignored (not even
        checked; at prefix 0 their first dimension gives the number of rows). Arrays are (N, d_g) (or
        (d_g,) for one row); float32 (N, d_g) arrays skip the conversion step.
        Returns (N,) for a regression trained on 1-D y, (N, P) otherwise, and a
        `ClassifierPrediction` for classifiers.
        """
        if budget is None and type(prefix) is int and 0 < prefix < len(self._runners):
            j = prefix  # the common case, without the general checks
        else:
            j = self._resolve_prefix(budget, prefix)
        if j == 0:  # no features needed; any given only tell the number of rows
            check_group_keys(features_by_group, self._by_name, ())
            rows = {name: np.shape(v)[0] if np.ndim(v) == 2 else 1 for name, v in features_by_group.items()}
            return self._format(self._runners[0].run_rows(_same_rows(rows)), 0)
        # fast path: float32 arrays of exactly the shapes expected for the first group's number of
        # rows (cached per prefix and shape); finiteness is checked once, on the output, below
        arrays = []
        try:
            a = features_by_group[self._plan[j][0][0]]
            shapes = self._shapes[j].get(a.shape) if type(a) is np.ndarray else None
            for name, shape in shapes or self._expected_shapes(j, a):
                a = features_by_group[name]
                if type(a) is not np.ndarray or a.dtype is not _F32 or a.shape != shape:
                    arrays = []
                    break
                arrays.append(a)
            if not arrays:
                arrays = self._checked_arrays(features_by_group, j)
        except (KeyError, TypeError, IndexError):
            check_group_keys(features_by_group, self._by_name, self.group_names[:j])  # the clear error
            raise
        if len(features_by_group) > j and not self._name_set.issuperset(features_by_group):
            check_group_keys(features_by_group, self._by_name, ())  # names the unknown keys
        outs, finite = self._runners[j].call(arrays, arrays[0].shape[0])
        if not finite:
            self._explain_nonfinite(features_by_group, j, outs[0])
        return outs[0] if self._regression else self._format(outs, j)

    def _expected_shapes(self, j: int, first) -> tuple:
        """((name, (n, d_g)), ...) for prefix j when `first`, the first group's value, is a float32
        (n, d_1) array with 1 <= n <= BIND_MAX_ROWS (then cached under its shape); () otherwise."""
        plan = self._plan[j]
        if not (type(first) is np.ndarray and first.dtype is _F32 and first.ndim == 2
                and first.shape[1] == plan[0][1] and 1 <= first.shape[0] <= BIND_MAX_ROWS):
            return ()
        n = first.shape[0]
        shapes = self._shapes[j][first.shape] = tuple((name, (n, dim)) for name, dim in plan)
        return shapes

    def _checked_arrays(self, features_by_group, j: int) -> list[np.ndarray]:
        """Prefix j's arrays, converted and checked group by group (any dtype, layout, 1-D rows, lists):
        the general path, and the one whose errors name the group and say what is wrong."""
        arrays, n = [], -1
        for name, dim in self._plan[j]:
            a = features_by_group[name]
            if not (type(a) is np.ndarray and a.dtype is _F32 and a.ndim == 2 and a.shape[1] == dim
                    and a.shape[0]):
                a = as_group_array(name, a, dim)
            if a.shape[0] != n:
                if n >= 0:
                    self._rows_error(features_by_group, j)
                n = a.shape[0]
            arrays.append(a)
        return arrays

    def _rows_error(self, features_by_group, j: int):
        _same_rows({g: np.shape(features_by_group[g])[0] if np.ndim(features_by_group[g]) == 2 else 1
                    for g, _ in self._plan[j]})

    def _explain_nonfinite(self, features_by_group, j: int, y: np.ndarray):
        """Raise the precise error for a non-finite output.

        NaN/Inf inputs always reach `y` (NaN*w and Inf*0 are NaN, nothing skips a weight), so one
        check on the small output replaces a check on every input; this finds the culprit."""
        for g in self.groups[:j]:
            as_group_array(g.name, features_by_group[g.name], g.dim)  # raises for NaN/Inf/overflow
        row = int(np.argwhere(~np.isfinite(y))[0][0])
        raise RuntimeInputError(
            f"prefix {j} overflows float32 at row {row} (the features are finite but too large for the "
            f"model's weights); rescale the features as in training")

    def _format(self, outs: list[np.ndarray], j: int):
        if self.task == "regression":
            return outs[0]  # (N,) when trained on 1-D y: the runners squeeze it
        _, proba, idx = outs
        return ClassifierPrediction(self.classes[idx], proba, idx, j)

    # ------------------------------------------------------------------ anytime loop
    def run(self, extractors: dict, budget=None, deadline_s=None, inputs=None) -> RunResult:
        """Anytime loop for one sample: compute groups in order, commit each prefix, stop in time.

        `extractors[name](inputs)` returns the features of group `name` for the sample, shape (d_g,)
        or (1, d_g). Groups start only while their cost fits in the remaining `budget` (cost units);
        with `deadline_s` (seconds from this call) the run returns on time even if an extractor
        overruns. An extractor that raises or returns bad data ends the run; the last committed
        prediction is returned and the report says what happened. Never raises for extractor faults.
        """
        if not isinstance(extractors, dict):
            raise RuntimeInputError(f"extractors must be a dict mapping group name -> callable, "
                                    f"got {type(extractors).__name__}")
        check_group_keys(extractors, self._by_name, ())
        bad = [k for k, f in extractors.items() if not callable(f)]
        if bad:
            raise RuntimeInputError(f"extractor(s) for {', '.join(map(repr, bad))} are not callable")
        budget = check_budget(budget)
        deadline_s = check_deadline(deadline_s)
        if self._closed:
            raise EdgeseqError("this AnytimeSession is closed; create a new one to run the anytime loop")
        clock = _Clock(deadline_s)
        if deadline_s is None:
            return self._run_locked(extractors, budget, None, inputs, clock, None)
        if not self._run_lock.acquire(timeout=max(0.0, clock.remaining())):
            return self._busy_result(clock, "another run of this session was still in progress")
        try:
            worker = self._get_worker()
            if not worker.wait_idle(max(0.0, clock.remaining())):
                label, age = worker.running_job() or ("?", 0.0)
                return self._busy_result(clock, f"the extractor of group {label!r} from an earlier run is "
                                                f"still running ({age:.3g} s); its result will be discarded")
            return self._finish(anytime_loop(self._steps, self._commit, self._prefix0, extractors,
                                             inputs, budget, deadline_s, worker, clock))
        finally:
            self._run_lock.release()

    def _run_locked(self, extractors, budget, deadline_s, inputs, clock, worker) -> RunResult:
        with self._run_lock:
            if self.busy:
                label, age = self._worker.running_job() or ("?", 0.0)
                raise SessionBusyError(
                    f"the extractor of group {label!r} overran an earlier run's deadline and is still "
                    f"running ({age:.3g} s); extractors of one session never run concurrently. Call "
                    f"wait_idle(timeout) first, or pass deadline_s to wait at most that long")
            return self._finish(anytime_loop(self._steps, self._commit, self._prefix0, extractors,
                                             inputs, budget, deadline_s, worker, clock))

    def _commit(self, j: int, rows: list[np.ndarray]):
        """Prediction of prefix j from the loop's validated rows (finite, one row each)."""
        outs, finite = self._runners[j].run(rows)
        if not finite:
            raise RuntimeInputError(f"prefix {j} overflows float32 (the features are finite but too large "
                                    f"for the model's weights); rescale the features as in training")
        return self._format(outs, j)

    def _finish(self, out) -> RunResult:
        pred = out.prediction
        if isinstance(pred, ClassifierPrediction) and pred is self._prefix0:
            pred = dataclasses.replace(pred)  # its arrays are read-only; the object is the caller's
        return RunResult(pred, out.prefix, out.spent_cost, float(self.cum_cost[out.prefix]),
                         out.elapsed_s, out.stopped_by, out.report)

    def _busy_result(self, clock: _Clock, why: str) -> RunResult:
        report = [GroupReport(g.name, "not_reached", g.cost) for g in self.groups]
        if report:
            report[0].status, report[0].message = BUSY, why
        pred = dataclasses.replace(self._prefix0) if isinstance(self._prefix0, ClassifierPrediction) \
            else self._prefix0
        return RunResult(pred, 0, 0.0, 0.0, clock.elapsed(), BUSY, report)

    # ------------------------------------------------------------------ worker lifecycle
    def _get_worker(self) -> ExtractorWorker:
        if self._worker is None:
            self._worker = ExtractorWorker(f"edgeseq-extractor-{id(self):x}")
            # close the thread when the session is garbage-collected (the worker does not refer back)
            self._finalizer = weakref.finalize(self, ExtractorWorker.close, self._worker)
        return self._worker

    @property
    def busy(self) -> bool:
        """True while an extractor that overran an earlier deadline is still running."""
        return self._worker is not None and self._worker.busy

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no overrunning extractor is running; True if idle."""
        return self._worker is None or self._worker.wait_idle(timeout)

    def close(self) -> None:
        """Stop the worker thread (it exits as soon as any still-running extractor returns).

        `predict` keeps working; `run` raises afterwards."""
        self._closed = True
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
