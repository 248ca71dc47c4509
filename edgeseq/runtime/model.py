"""A loaded, verified export: batch predictions of any prefix with onnxruntime.

`ExportedModel(out_dir)` is what a phone or robot needs to answer from features it already has;
`edgeseq.runtime.session.AnytimeSession` builds the anytime loop on top of it. This module imports
only numpy, onnxruntime, the format contract and the intermediate form's budget rule — never the
training or export code.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter, itemgetter
from pathlib import Path

import numpy as np

from edgeseq.errors import IntegrityError, RuntimeInputError
from edgeseq.format import STATE_IN, STATE_OUT, labels_of, read_verified, stage_group_counts
from edgeseq.runtime.fuse import SIGNED_LOGITS, FuseError, fuse_stages, joined_prefix, joined_tree_stages
from edgeseq.runtime.inputs import as_group_array, check_group_keys
from edgeseq.runtime.ort import BIND_MAX_ROWS, PrefixRunner, load_verified_bytes
from edgeseq.runtime.stopping import check_stop, predict_stopped
from edgeseq.budget import resolve_prefix, warn_if_budget_affords_nothing

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_PLAIN_BUDGETS = (type(None), float, int, np.float64)  # budgets whose prefix `predict` keeps (hashable, exact)
_BUDGETS_KEPT = 64  # distinct budgets kept per model
_SHAPES_KEPT = 8  # batch sizes whose array shapes `predict` keeps per prefix
_SHAPE, _DTYPE = attrgetter("shape"), attrgetter("dtype")  # (map() applies them in C, no Python loop)

__all__ = ["ClassifierPrediction", "ExportedModel"]


@dataclass
class ClassifierPrediction:
    """Classifier output of one prefix: labels (from the manifest's classes) and probabilities.

    Attributes
    ----------
    label : ndarray of shape (N,)
        Predicted labels, as the original class labels (``classes[label_index]``).
    proba : float32 ndarray of shape (N, n_classes)
        Class probabilities, in the order of the manifest's ``classes``.
    label_index : int64 ndarray of shape (N,)
        Index of the predicted class into ``classes`` (the argmax of `proba`).
    prefix : int
        The prefix that produced the prediction.
    score : float32 ndarray of shape (N, n_outputs) or None, default=None
        The raw scores before the link (logits), as the graph computes them: what the ``logit_gap``
        stopping statistic reads (`edgeseq.runtime.stopping.logit_gap`). None where unknown.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = np.where(X[:, 1] > 0, "up", "down")
    >>> est = AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0], group_names=["a", "b"]).fit(X, y)
    >>> out = tempfile.mkdtemp() + "/out"
    >>> _ = export_model(est.fitted_sequence_, out)
    >>> pred = ExportedModel(out).predict({"a": X[:5, [0]], "b": X[:5, [1]]})
    >>> isinstance(pred, ClassifierPrediction), pred.prefix, pred.proba.shape
    (True, 2, (5, 2))
    >>> bool((pred.label == np.array(["down", "up"])[pred.label_index]).all())
    True
    >>> bool((pred.label_index == pred.proba.argmax(axis=1)).all())
    True
    """

    label: np.ndarray        # (N,) original class labels
    proba: np.ndarray        # (N, n_classes) float32
    label_index: np.ndarray  # (N,) int64 index into `classes`
    prefix: int
    score: np.ndarray | None = None  # (N, n_outputs) float32 raw scores before the link


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


@np.errstate(over="ignore")  # overflow becomes inf, which the check of the input reports
def _to_float32(X: np.ndarray) -> np.ndarray:
    """A float64 matrix cast to float32 as `as_group_array` casts it (a decorator costs less than a
    ``with np.errstate`` block per call)."""
    return X.astype(np.float32)


def _take_all(names: tuple):
    """A function of the features dict returning the list of its values under `names`, in order, in
    one C call (`operator.itemgetter`); KeyError for a missing name, TypeError for a non-mapping."""
    if not names:  # (prefix 0: `predict` never asks)
        return lambda d: []
    take = itemgetter(*names)
    if len(names) == 1:
        return lambda d: [take(d)]
    return lambda d: list(take(d))


class ExportedModel:
    """A verified export directory, ready to predict in batches.

    Loading verifies the directory (schema, manifest checksum, sha256 of every file) and creates one
    single-threaded onnxruntime session per prefix, once. `predict` runs, per prefix, one joined
    graph built on its first call (one input, one Gemm and its link or one tree node: `edgeseq.runtime.fuse`);
    `AnytimeSession` adds the anytime loop, which runs the prefix graphs.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(200, 4)); y = X @ [1.0, 2.0, 0.5, 0.0]
    >>> est = AnytimeRegressor(groups=[[0, 1], [2, 3]], costs=[1.0, 2.0]).fit(X, y)
    >>> out = tempfile.mkdtemp() + "/out"
    >>> _ = export_model(est.fitted_sequence_, out)
    >>> model = ExportedModel(out)
    >>> model.n_prefixes
    3
    >>> model.predict({name: X[:2, cols] for name, cols in zip(model.group_names, ([0, 1], [2, 3]))}).shape
    (2,)
    """

    def __init__(self, out_dir):
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
        self._trees = "state_width" in m  # stateful stages (trees) carry a float32 state from stage to stage
        # layer-block stages (neural networks): each stage reads some groups and, unless it resets, the
        # previous stage's state (of its own width); a stage with commit false never answers a budget
        self._layers = all("commit" in p for p in m["prefixes"])  # stages that say whether they answer
        position = {g.input_name: k for k, g in enumerate(self.groups)}
        self._reads = [[position[i] for i in p["inputs"] if i in position] for p in m["prefixes"]]
        self._takes_state = [STATE_IN in p["inputs"] for p in m["prefixes"]]
        self._committing = np.array([k for k, p in enumerate(m["prefixes"]) if p.get("commit", True)], np.int64)
        self._counts = stage_group_counts(m)  # groups computed once stage j has run (a prefix of groups)
        self._plan = [tuple((g.name, g.dim) for g in self.groups[:c]) for c in self._counts]
        # per prefix: its groups' arrays from the dict in one C call, the float32 dtypes they must have,
        # and the shapes a batch of n rows has (shapes -> n, for the batch sizes seen: `predict`)
        self._take = [_take_all(tuple(name for name, _ in plan)) for plan in self._plan]
        self._f32s = [(_F32,) * len(plan) for plan in self._plan]
        self._rows_of: list[dict] = [{} for _ in self._plan]
        self._n_features = int(m["n_features_in"])
        self._matrix_runners: dict[tuple, tuple | None] = {}  # (prefix, float64) -> its graphs over X
        self._n_runners = len(m["prefixes"])
        self._matrix_calls: dict[tuple, tuple] = {}  # (prefix, float64) -> `_matrix_call`'s pair
        self._state_width = int(m.get("state_width") or 0)
        self.cum_cost = np.array([p["cum_cost"] for p in m["prefixes"]], dtype=np.float64)
        outs = m["outputs"]
        self.output_names = tuple(outs["names"])
        self.n_outputs = int(outs["n_outputs"])
        self.classes = None if outs["classes"] is None else np.array(outs["classes"])
        self._squeeze = bool(outs.get("y_was_1d", False)) and self.task == "regression"
        # "runtime" labels: the graphs end at proba (mobile providers run no ArgMax); _format picks the label
        self._label_in_graph = labels_of(m) == "graph"
        wanted = ["y"] if self.task == "regression" else ["y", "proba", "label"][:3 if self._label_in_graph else 2]
        self._runners = [PrefixRunner(load_verified_bytes(out / p["file"], p["sha256"]), p["inputs"],
                                      wanted + [STATE_OUT] if (self._trees or self._layers) and j else wanted,
                                      str(out / p["file"]),
                                      self._squeeze) for j, p in enumerate(m["prefixes"])]
        for p, r in zip(m["prefixes"][1:], self._runners[1:]) if self._trees else ():
            if r._dims[-1] != self._state_width:
                raise IntegrityError(f"{out / p['file']}: state_in has {r._dims[-1]} columns, the manifest's "
                                     f"state_width is {self._state_width}")
        # prefix 0 answers the same for every row (its graph reads no feature): its one-row outputs,
        # repeated, are what the graph returns for n rows, without an onnxruntime call
        self._prior_row = [o.copy() for o in self._runners[0].run_rows(1)]
        self._prefix0 = _read_only(self._format(self._runners[0].run_rows(1), 0))  # shared by results
        self._by_budget: dict = {}  # budget -> its prefix, for the budgets predict has resolved
        self._fused: dict[int, PrefixRunner | None] = {}  # prefix j -> the one graph predict runs (`_fuse`)

    # ------------------------------------------------------------------ structure
    @property
    def n_prefixes(self) -> int:
        """J + 1 (prefix 0 predicts without any group).

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
        >>> model = ExportedModel(out)
        >>> model.n_prefixes, len(model.group_names) + 1, len(model.cum_cost)
        (3, 3, 3)
        """
        return len(self._runners)

    def prefix_for_budget(self, budget) -> int:
        """Longest prefix whose cumulative cost is <= budget (inclusive, exact: the estimator's rule).

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
        >>> model = ExportedModel(out)
        >>> model.cum_cost.tolist()
        [0.0, 1.0, 3.0]
        >>> [model.prefix_for_budget(b) for b in (0.5, 1.0, 2.9, 3.0)]
        [0, 1, 1, 2]
        >>> all(model.prefix_for_budget(b) == est.fitted_sequence_.prefix_for_budget(b) for b in (0.5, 1.0, 3.0))
        True
        """
        return self._round_to_committing(resolve_prefix(self.cum_cost, budget=budget))

    def _resolve_prefix(self, budget, prefix, stacklevel: int = 4) -> int:
        j = resolve_prefix(self.cum_cost, budget, prefix)
        warn_if_budget_affords_nothing(self.cum_cost, budget, stacklevel=stacklevel)
        return j if prefix is not None else self._round_to_committing(j)

    def _round_to_committing(self, j: int) -> int:
        """The last stage at or before j whose prediction may answer (every stage but a layer-block
        stage with commit false)."""
        ok = self._committing
        return int(ok[ok <= j][-1])

    # ------------------------------------------------------------------ batch
    def predict(self, features_by_group: dict, budget=None, prefix=None, stop=None):
        """Predictions of the longest prefix allowed (by `budget` in cost units, or `prefix`; else all).

        With ``stop="confident"`` (an export calibrated with stop data, see `edgeseq.runtime.stopping`)
        each row stops at the first stage, up to that prefix, whose answer passes its threshold; the
        result's ``prefix`` is then an int64 array with each row's stage.

        `features_by_group` is a dict or one numpy array. Keys are group names; groups beyond the
        prefix may be present and are ignored (not even checked; at prefix 0 their first dimension
        gives the number of rows). Arrays are (N, d_g) (or (d_g,) for one row); float32 (N, d_g)
        arrays of a batch size seen before skip the conversion step and the per-group checks (their
        shapes and dtypes are compared in one step; non-finite values are caught on the answer).
        One array is the features laid out as in training, (N, n_features_in) or (n_features_in,),
        each group's columns where the manifest's ``columns`` say (what the estimator's `predict`
        takes); a float32 or float64 matrix at a prefix that reads every column of a linear model
        goes to onnxruntime as one input, with no per-group work (see `_predict_matrix`), any other
        is split into its groups' columns and checked as the dict.
        Returns (N,) for a regression trained on 1-D y, (N, P) otherwise, and a
        `ClassifierPrediction` for classifiers.

        Raises
        ------
        RuntimeInputError
            For a missing or unknown group, a wrong width, different row counts or non-finite values
            (naming the group), or a matrix whose width is not n_features_in.

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
        >>> model = ExportedModel(out)
        >>> feats = {"a": X[:4, [0]], "b": X[:4, 1:]}
        >>> yb = model.predict(feats, budget=1.0)            # prefix 1: group "a" only
        >>> bool(np.allclose(yb, est.predict(X[:4], prefix=1), atol=1e-5))   # float32 vs float64
        True
        >>> model.predict({"a": X[:4, [0]]}, prefix=1).shape  # later groups are not needed
        (4,)
        >>> yx = model.predict(X[:4])                         # one matrix, columns as in training
        >>> bool(np.allclose(yx, est.predict(X[:4]), atol=1e-5)), bool(np.allclose(yx, model.predict(feats), atol=1e-6))
        (True, True)
        >>> model.predict({"a": X[:4, [0]]}, prefix=2)
        Traceback (most recent call last):
        ...
        edgeseq.errors.RuntimeInputError: ...
        """
        X = j = None
        if type(features_by_group) is np.ndarray:  # one matrix, its columns as in training
            dtype, shape = features_by_group.dtype, features_by_group.shape
            if (dtype is _F32 or dtype is _F64) and stop is None and len(shape) == 2 and shape[0] \
                    and shape[1] == self._n_features:
                # a prefix's matrix graph seen before: one look-up, then its call (`_matrix_call`)
                j = prefix if budget is None and type(prefix) is int and 0 < prefix < self._n_runners \
                    else self._prefix_of(budget, prefix)  # (`_prefix_of`'s common case, without the call)
                fast = self._matrix_calls.get((j, dtype is _F64))
                if fast is not None:
                    return fast[shape[0] > BIND_MAX_ROWS](features_by_group, shape[0])
            X = self._check_matrix(features_by_group)
            if stop is not None or X.ndim == 1:
                features_by_group = self._as_groups(X)
        if stop is not None:
            thr = check_stop(stop, self.manifest)
            return predict_stopped(self, features_by_group, thr, self._resolve_prefix(budget, prefix))
        if j is None:
            j = self._prefix_of(budget, prefix)
        if X is not None:
            got = self._predict_matrix(X, j)
            if got is not None:
                return got
            features_by_group = self._as_groups(X)
        if j == 0:  # no features needed; any given only tell the number of rows
            check_group_keys(features_by_group, self._by_name, ())
            rows = {name: np.shape(v)[0] if np.ndim(v) == 2 else 1 for name, v in features_by_group.items()}
            n = _same_rows(rows)
            return self._format([np.repeat(o, n, axis=0) for o in self._prior_row], 0)
        # fast path: every group float32 with the shapes of a batch size seen before, checked in C
        # (two maps and two tuple comparisons, no loop over the groups); finiteness is checked once,
        # on the output, below. Anything else takes the general path, which converts or names the error.
        try:
            arrays = self._take[j](features_by_group)
        except (KeyError, TypeError):
            check_group_keys(features_by_group, self._by_name, [g for g, _ in self._plan[j]])  # the clear error
            raise
        try:
            n = self._rows_of[j].get(tuple(map(_SHAPE, arrays)))
            if n is not None and tuple(map(_DTYPE, arrays)) != self._f32s[j]:
                n = None
        except (AttributeError, TypeError):  # lists, scalars, objects without a hashable shape
            n = None
        if n is None:
            arrays = self._checked_arrays(features_by_group, j)
            n = arrays[0].shape[0]
            rows_of = self._rows_of[j]
            if len(rows_of) >= _SHAPES_KEPT:
                rows_of.clear()  # (one step, safe when several threads predict)
            rows_of[tuple(map(_SHAPE, arrays))] = n
        if len(features_by_group) > len(arrays) and not self._name_set.issuperset(features_by_group):
            check_group_keys(features_by_group, self._by_name, ())  # names the unknown keys
        if self._layers:
            outs, finite = self.run_layer_stages(arrays, j)
        else:
            fused = self._fused[j] if j in self._fused else self._fuse(j)
            if fused is None:
                outs, finite = self.run_stages(arrays, j)
            elif fused.joined:
                outs, finite = fused.call_joined(arrays, n)
            elif self._trees:
                outs, finite = fused.call([*arrays, np.zeros((n, self._state_width), np.float32)], n)
            else:
                outs, finite = fused.call(arrays, n)
        if not finite:
            self._explain_nonfinite(features_by_group, j, outs[0])
        return outs[0] if self._regression else self._format(outs, j)

    def _prefix_of(self, budget, prefix) -> int:
        """The prefix `predict` runs: a budget seen before is a dictionary look-up (up to
        `_BUDGETS_KEPT` of them), an int prefix in range is taken as is, anything else is resolved."""
        if prefix is None and type(budget) in _PLAIN_BUDGETS:
            j = self._by_budget.get(budget)  # a budget seen before (None: every group)
            if j is None:
                j = self._resolve_prefix(budget, None, 5)  # (the warning names predict's caller)
                if j and len(self._by_budget) < _BUDGETS_KEPT:  # (prefix 0 warns, so it is never kept)
                    self._by_budget[budget] = j
            return j
        if budget is None and type(prefix) is int and 0 < prefix < len(self._runners):
            return prefix  # the common case, without the general checks
        return self._resolve_prefix(budget, prefix, 5)

    def _check_matrix(self, X: np.ndarray) -> np.ndarray:
        """`X` when it is (N, n_features_in) or (n_features_in,), else the error saying what is expected."""
        if X.ndim not in (1, 2) or X.shape[-1] != self._n_features:
            raise RuntimeInputError(
                f"a features matrix must have shape (N, {self._n_features}) or ({self._n_features},), the "
                f"columns as in training (each group's columns as the manifest lists them); got shape "
                f"{X.shape}")
        return X

    def _predict_matrix(self, X: np.ndarray, j: int):
        """`predict` of prefix j for a 2-D features matrix laid out as in training (each group's
        columns are the manifest's ``columns`` of it: what the estimator's own `predict` takes), or
        None when the fast path does not apply.

        Fast path: a float32 or float64 matrix of N >= 1 rows, in any memory layout, at a prefix that
        reads every column and whose batch graph is a joined one. Linear: a graph of the same Gemm
        with its weight rows in the matrix's column order (`joined_prefix` with `columns`, built once
        per prefix and dtype; above `BIND_MAX_ROWS` rows it reads the matrix transposed) takes the
        matrix as its input, copied once into the bound buffer or, from `_IN_PLACE_MIN_FLOATS` values
        and C-contiguous, bound where it lies (above 4 MB, read in place by `run`), float64 cast to
        float32 in the graph as `as_group_array` casts it; a NaN/Inf
        (or a float64 beyond float32) reaches the answer and is reported as for the dict. Trees: the
        one tree node with each split's feature index mapped to the matrix's column
        (`joined_tree_stages` with `columns`), fed the matrix as `call_joined` feeds the groups side
        by side, whose input check catches a NaN/Inf; float64 is cast in numpy first. No per-group
        work in either. For anything else (another dtype, a prefix that reads some columns only, a
        layer-block export) `predict` takes each group's columns as an array, and the dict's path,
        checks and errors."""
        if not j or not X.shape[0] or not (X.dtype is _F32 or X.dtype is _F64):
            return None
        key = (j, X.dtype is _F64 and not self._trees)
        runners = self._matrix_runners[key] if key in self._matrix_runners else self._matrix_runner(*key)
        if runners is None:
            return None
        n = X.shape[0]
        if self._trees:  # one tree node over the matrix: its input checked for NaN/Inf as it is bound
            outs, finite = runners[0].call_joined([_to_float32(X) if X.dtype is _F64 else X], n)
        else:
            outs, finite = runners[n > BIND_MAX_ROWS].call([X], n)
        if not finite:
            self._explain_nonfinite(self._as_groups(X), j, outs[0])
        return outs[0] if self._regression else self._format(outs, j)

    def _matrix_runner(self, j: int, float64: bool) -> tuple[PrefixRunner, PrefixRunner] | None:
        """The runners of prefix j's joined graph over the whole feature matrix, for up to
        `BIND_MAX_ROWS` rows and above (built on first use, then kept), or None when prefix j does
        not read every column or has no joined graph. Linear: above `BIND_MAX_ROWS` rows the graph
        reads the matrix transposed (``transB``: the fast shape for onnxruntime's kernel, see
        `joined_prefix`), bound up to 4 MB of input; with `float64` the graphs take float64 and
        cast it to float32 first (`joined_prefix`'s ``float64``). Trees: one tree graph for every
        batch size (`joined_tree_stages` with ``columns``), float32 only."""
        runners = None
        if j and not self._layers and self._counts[j] == len(self.groups):
            fused = self._fused[j] if j in self._fused else self._fuse(j)
            cols = [c for g in self.manifest["groups"] for c in g["columns"]]
            if self._trees and fused is not None and fused.joined and len(cols) == self._n_features:
                ps = self.manifest["prefixes"][1:j + 1]
                try:
                    model, name = joined_tree_stages([load_verified_bytes(self.out_dir / p["file"], p["sha256"])
                                                      for p in ps], columns=cols)
                    runner = PrefixRunner(model, [name], fused.outputs, f"{self.out_dir / ps[-1]['file']} "
                                          f"(prefix {j}, joined, columns as in training)", self._squeeze)
                    runner.joined, runner.check_inputs = True, True
                    runners = (runner, runner)
                except (FuseError, IntegrityError):
                    runners = None
                if runners is not None:  # float64 is cast first, as `_predict_matrix` casts it
                    calls = self._matrix_call(j, runner, runner, check_input=True)
                    self._matrix_calls[j, False] = calls
                    self._matrix_calls[j, True] = tuple((lambda X, n, f=f: f(_to_float32(X), n, X)) for f in calls)
            elif not self._trees and fused is not None and fused.joined and len(cols) == self._n_features:
                p = self.manifest["prefixes"][j]
                graph = load_verified_bytes(self.out_dir / p["file"], p["sha256"])
                where = f"{self.out_dir / p['file']} (prefix {j}, joined, columns as in training)"
                try:
                    runners = tuple(PrefixRunner(model, [name], fused.outputs, where, self._squeeze,
                                                 signed=fused._signed, bind_large=wide)
                                    for wide in (False, True)
                                    for model, name in [joined_prefix(graph, columns=cols, transposed=wide,
                                                                      rows_first=wide, float64=float64)])
                except (FuseError, IntegrityError):
                    runners = None
                if runners is not None:
                    self._matrix_calls[j, float64] = self._matrix_call(j, *runners)
        self._matrix_runners[j, float64] = runners
        return runners

    def _matrix_call(self, j: int, small: PrefixRunner, large: PrefixRunner, check_input: bool = False):
        """`_predict_matrix` of prefix j as two functions of (X, n), for up to `BIND_MAX_ROWS` rows
        and above, made once per prefix and dtype: `predict` calls one right after its shape test
        and one dictionary look-up, so a call pays no other dispatch (the dtype test, the runner and
        the result's fields are bound here, not looked up per call; each runner's
        `PrefixRunner.one_input_call` goes to its bound buffers directly). With `check_input` (the
        joined tree graph) a NaN/Inf in X is caught on the input, as `call_joined` catches it. Same
        runners, same checks and same answers as `_predict_matrix`."""
        explain, as_groups, classes, fmt = self._explain_nonfinite, self._as_groups, self.classes, self._format
        # classes 0..K-1 as int64 (what integer targets give): the labels are the indices, copied
        # (a memcpy, several times cheaper than the look-up at 1,000 rows), equal bit for bit
        label_of = None if classes is None else np.ndarray.copy if classes.dtype == np.int64 and \
            np.array_equal(classes, np.arange(len(classes))) else classes.__getitem__
        label_in_graph = self._label_in_graph

        def finish(outs: list, finite: bool, X: np.ndarray):
            if not finite:
                explain(as_groups(X), j, outs[0])
            if classes is None:
                return outs[0]
            if label_in_graph:  # (the label from the graph's ArgMax)
                return ClassifierPrediction(label_of(outs[2]), outs[1], outs[2], j, outs[0])
            return fmt(outs, j)

        return small.one_input_call(finish, check_input), large.one_input_call(finish, check_input)

    def _as_groups(self, X: np.ndarray) -> dict:
        """Each group's columns of a features matrix (a copy: the columns need not be adjacent)."""
        return {g["name"]: X[..., g["columns"]] for g in self.manifest["groups"]}

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
        for name, dim in self._plan[j]:
            as_group_array(name, features_by_group[name], dim)  # raises for NaN/Inf/overflow
        row = int(np.argwhere(~np.isfinite(y))[0][0])
        raise RuntimeInputError(
            f"prefix {j} overflows float32 at row {row} (the features are finite but too large for the "
            f"model's weights); rescale the features as in training")

    def _fuse(self, j: int) -> PrefixRunner | None:
        """The graph `predict` runs for prefix j (built on first use, then kept): one onnxruntime call.

        First choice, a joined graph (`edgeseq.runtime.fuse`): one input, the groups side by side, and
        for an affine prefix one Gemm by its weight matrix and a one-node link, for tree stages 1..j
        one tree node; its
        runner has ``joined`` set. A graph the joiner does not rewrite keeps, for an affine prefix, its
        own graph, and for trees the stage graphs chained into one (`fuse_stages`, fed stage j's inputs
        and a zero state), or None when that fails too: `run_stages` chains them then. The anytime
        loop keeps the stage graphs: it commits each stage as its groups come in."""
        ps = self.manifest["prefixes"][1:j + 1]
        where = f"{self.out_dir / ps[-1]['file']} (prefix {j}, joined)"
        outputs = [o for o in self._runners[j].outputs if o != STATE_OUT]  # (a batch reads no state)
        try:
            if self._trees:
                model, name = joined_tree_stages([load_verified_bytes(self.out_dir / p["file"], p["sha256"])
                                                  for p in ps])
            else:
                graph = load_verified_bytes(self.out_dir / ps[-1]["file"], ps[-1]["sha256"])
                model, name = joined_prefix(graph)
            signed = not self._trees and self.link == "sigmoid"  # the joined graph outputs [-y, y]
            if signed:
                outputs = [SIGNED_LOGITS if o == "y" else o for o in outputs]
            runner = PrefixRunner(model, [name], outputs, where, self._squeeze, signed=signed)
            runner.joined, runner.check_inputs = True, self._trees  # joined tree stages have no guard
            if not self._trees and runner.batch is None:  # large batches: the input transposed
                runner.wide = PrefixRunner(joined_prefix(graph, transposed=True)[0], [name], outputs, where,
                                           self._squeeze, transposed=True, signed=signed)
        except (FuseError, IntegrityError):
            runner = None if self._trees and j > 1 else self._runners[j]
        if runner is None:
            try:
                model = fuse_stages([load_verified_bytes(self.out_dir / p["file"], p["sha256"]) for p in ps])
                runner = PrefixRunner(model, ps[-1]["inputs"], self._runners[j].outputs,
                                      f"{self.out_dir / ps[-1]['file']} (stages 1-{j} fused)", self._squeeze)
            except (FuseError, IntegrityError):
                runner = None
        self._fused[j] = runner
        return runner

    def run_stages(self, arrays: list[np.ndarray], j: int) -> tuple[list[np.ndarray], bool]:
        """Tree exports: run stages 1..j in turn, each stage's ``state_out`` fed to the next one's
        ``state_in``; returns stage j's outputs (``y`` first, the state last) and whether all is finite.

        `arrays` are the float32 (N, d_g) arrays of the groups stage j needs, in manifest order;
        stage i reads the first of them that it needs. A tree routes NaN like any number, so every
        stage graph adds a guard (its inputs times a zero column) to ``y``: stage j's ``y`` is non-finite
        exactly when one of the inputs is, and, as for affine prefixes, only that output is checked.

        Examples
        --------
        >>> import numpy as np, tempfile
        >>> import lightgbm
        >>> from edgeseq import from_lightgbm
        >>> from edgeseq.export.writer import export_model
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 3)); y = X[:, 0] + 2 * X[:, 2]
        >>> model = from_lightgbm(lightgbm.LGBMRegressor(n_estimators=5, num_leaves=4, verbose=-1).fit(X, y),
        ...                       groups=[[0, 1], [2]], costs=[1.0, 3.0], group_names=["a", "b"])
        >>> out = tempfile.mkdtemp() + "/out"
        >>> _ = export_model(model, out)
        >>> exported = ExportedModel(out)
        >>> feats = {"a": X[:4, :2].astype(np.float32), "b": X[:4, 2:].astype(np.float32)}
        >>> last = exported.n_prefixes - 1
        >>> outs, finite = exported.run_stages([feats[name] for name in exported.group_names], last)
        >>> finite, bool(np.allclose(outs[0], model.predict(X[:4])[:, 0], atol=1e-5)), outs[-1].shape
        (True, True, (4, 1))
        """
        n = arrays[0].shape[0]
        state = np.zeros((n, self._state_width), np.float32)
        outs, finite = None, True
        for i in range(1, j + 1):  # stage j reads every group of stages 1..j: its guard covers them all
            outs, finite = self._runners[i].call(arrays[:self._counts[i]] + [state], n)
            state = outs[-1]
        return outs, finite

    def run_layer_stages(self, arrays: list[np.ndarray], j: int) -> tuple[list[np.ndarray], bool]:
        """Layer-block exports: run stages 1..j in turn, each stage fed the groups its graph reads and,
        unless it resets, the previous stage's ``state_out``; returns stage j's outputs (``y`` first, its
        state last) and whether every input and ``y`` is finite.

        `arrays` are the float32 (N, d_g) arrays of the groups stage j needs, in manifest order. A
        reset stage drops the state, so a non-finite value read only by earlier stages need not reach
        stage j's ``y``: the inputs are checked themselves.

        Examples
        --------
        >>> import numpy as np, tempfile
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> from edgeseq.export.writer import export_model
        >>> model = _example_model(); out = tempfile.mkdtemp() + "/net"
        >>> _ = export_model(model, out)
        >>> exported = ExportedModel(out)
        >>> X = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
        >>> outs, finite = exported.run_layer_stages([X[:, :2], X[:, 2:]], 2)
        >>> finite, bool(np.allclose(outs[0], model.decision(X, 2)[:, 0], rtol=1e-5, atol=1e-6)), outs[-1].shape
        (True, True, (4, 3))
        """
        n = arrays[0].shape[0]
        state, outs, finite = None, None, True
        for i in range(1, j + 1):
            feed = [arrays[p] for p in self._reads[i]] + ([state] if self._takes_state[i] else [])
            outs, finite = self._runners[i].call(feed, n)
            state = outs[-1]
        return outs, finite and all(bool(np.isfinite(a).all()) for a in arrays)

    def _format(self, outs: list[np.ndarray], j: int):
        if self.task == "regression":
            return outs[0]  # (N,) when trained on 1-D y: the runners squeeze it
        proba = outs[1]  # (the label, then a tree stage's state, follow it)
        # the first most probable class, as ONNX ArgMax (select_last_index=0) and the C runtime pick it
        idx = outs[2] if self._label_in_graph else np.argmax(proba, axis=1).astype(np.int64)
        return ClassifierPrediction(self.classes[idx], proba, idx, j, outs[0])
