"""GLM selection over row partitions that stay where they are (a Dask cluster, or this process).

Why: a logistic or softmax model's gradient depends on every row, so unlike squared loss there are no
sufficient statistics to merge once; each loss/gradient evaluation is a pass over the rows. On a
cluster that pass is a map over the partitions plus a sum: every partition task computes its share of
the loss, of Z_Sᵀ(∇φ(f) − Y) and of the intercept's gradient with the *same* code the in-memory fit runs
over its chunks (`glm_fit.link_pass` over a `WorkingDesign` of that partition's rows), and the shares are
added on the workers in a tree (depth ⌈log_8 P⌉: the sums are small, round trips are not).

What travels:

* once per fit: each partition's rows from where they are read to the worker that keeps them (X and
  the class labels; nothing when a loader reads a shard on its worker), and the design template
  (used columns, means and the group transforms, O(D + Σ k_g²) numbers) to the workers;
* per evaluation: the selected groups' weights and intercepts, (m + 1)·P numbers, sent once (one
  task holds them and the partition tasks fetch them), and back P·(m + 2) + 1 numbers per partition;
* per scoring step: the same weights out, the candidates' gradient blocks back, O(k·P) per partition;
  binary FR also returns the weighted Gram blocks its score test needs, O(k·m + Σ k_g²) per partition.

The linear predictor f (n × P) is never sent anywhere: a partition recomputes its own share of f from
the weights whenever a pass needs it, so the tasks are pure and Dask can rerun any of them on another
worker when one dies.

Where it runs: the `client` given, else the active ``distributed`` client, else partition by partition
in this process (the rule of the regression path, `dask_stats.active_client`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgeseq.errors import InputError
from edgeseq.train.distributed.stats import active_client, partitioned_statistics, raise_partition_error, row_blocks, tree_reduce
from edgeseq.train.glm.design import WorkingDesign
from edgeseq.train.glm.fit import GRAD_TOL, class_targets, link_pass, mean_function, n_correct
from edgeseq.train.glm.select import GLMState, weighted_gram_sums
from edgeseq.train.linear.stats import SufficientStats


FAN_IN = 8  # children per node of the sum tree: the sums are small, the scheduler round trips are not

@dataclass(frozen=True)
class PartitionFit:
    """What an evaluation on partitions returns in place of the linear predictor f (which stays put).

    Examples
    --------
    >>> from edgeseq.train.distributed.glm import PartitionFit
    >>> PartitionFit(loss=0.25, correct=90).correct
    90
    """
    loss: float  # mean data loss over all rows
    correct: int  # rows the predictor classifies as their target


# ---------------------------------------------------------------- tasks (run where the partition is)
def _same(value):
    """A task that holds `value`: sent once, fetched by every partition task, recomputable if lost."""
    return value


def _item(pair, i: int):
    return pair[i]


def _add(*parts):
    """Element-wise sum of nested tuples/lists of arrays and numbers: one node of the reduction tree."""
    if isinstance(parts[0], (tuple, list)):
        return type(parts[0])(_add(*items) for items in zip(*parts))
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def _labels_part(xb, yb, label: str, start: int, rows: int):
    """The distinct labels of one partition and their counts; bad labels are reported by partition and row."""
    yb = np.asarray(yb)
    if yb.ndim == 2 and yb.shape[1] == 1:
        yb = yb[:, 0]
    if yb.ndim != 1 or yb.shape[0] != rows:
        raise InputError(f"{label}: y has shape {yb.shape}, expected ({rows},): one class label per row")
    if yb.dtype.kind not in "biufUS":  # objects, complex numbers, dates: not labels
        raise InputError(f"{label}: class labels must be numbers or strings, got dtype {yb.dtype}")
    if yb.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(yb))
        if bad.size:
            raise InputError(f"{label}: y contains NaN or Inf at row {start + int(bad[0])} (row {int(bad[0])} "
                             f"of {label}); every row needs a class label")
        frac = np.flatnonzero(yb != np.round(yb))
        if frac.size:
            r = int(frac[0])
            raise InputError(f"{label}: y has the non-integer value {yb[r]:g} at row {start + r}: a classifier is "
                             f"for class labels (integers or strings), not a continuous target")
    return np.unique(yb, return_counts=True)


def _targets_part(xb, yb, classes: np.ndarray):
    """The refit's targets of one partition (0/1 column or one-hot), built where its labels are."""
    yb = np.asarray(yb).reshape(-1)
    return class_targets(np.searchsorted(classes, yb), classes.size)


def _objective_part(xb, Yb, template: WorkingDesign, groups, Wb, link: str):
    """This partition's loss sum, Z_Sᵀ(∇φ(f) − Y), Σ(∇φ(f) − Y) and correct count at (W, b)."""
    W, b = Wb
    f, G, gb, loss = link_pass(template.on_rows(xb), groups, W, b, Yb, link)
    return loss, G, gb, n_correct(f, Yb, link)


def _candidate_part(xb, Yb, template: WorkingDesign, groups, Wb, cands, link: str):
    """Z_candsᵀ(∇φ(f) − Y) of this partition at the fit (W, b) of `groups`, in one pass.

    f is recomputed from the weights in the same pass: the candidates join the selected groups with
    zero weights, so the forward product is f itself and the backward product holds their blocks.
    """
    W, b = Wb
    k_c = sum(template.slices[g].stop - template.slices[g].start for g in cands)
    W_ext = np.vstack([W, np.zeros((k_c, W.shape[1]))])
    _, G, _, _ = link_pass(template.on_rows(xb), list(groups) + list(cands), W_ext, b, Yb, link)
    return G[W.shape[0]:]


def _raw_gradient_part(xb, Yb, template: WorkingDesign, raw: WorkingDesign, groups, Wb, link: str):
    """(X_used − μ)ᵀ(∇φ(f) − Y) of this partition on every used raw column (the `single` score)."""
    W, b = Wb
    f, _, _, _ = link_pass(template.on_rows(xb), groups, W, b, Yb, link)
    return raw.on_rows(xb).gradient(mean_function(f, link) - Yb)


def _weighted_part(xb, Yb, template: WorkingDesign, cols, Wb, cands, link: str):
    """This partition's `weighted_gram_sums` per class at w = p(1 − p), f recomputed chunk by chunk."""
    W, b = Wb
    sums = None
    for rows, Zc in template.on_rows(xb).chunks():
        p = mean_function(Zc[:, cols] @ W + b, link)
        w = p * (1.0 - p)
        sums = [weighted_gram_sums(Zc, w[:, c:c + 1], cols, cands, template.slices, None if sums is None else sums[c])
                for c in range(w.shape[1])]
    # only the candidates' diagonal blocks of C are filled: send those, not the k × k array
    return [(H, WSZ, [C[template.slices[g], template.slices[g]] for g in cands]) for H, WSZ, C in sums]


# ---------------------------------------------------------------- the partitions
class PartitionedRows:
    """Row partitions kept in memory where they were read, and the map (plus tree sum) over them.

    Parameters
    ----------
    client : distributed.Client or None
        None: the partitions are numpy arrays in this process and every map runs here.
    xs, ys : list
        Per partition its X block and y block (futures on the cluster, arrays here).
    starts, counts : list of int
        First global row and row count of every partition.
    labels : list of str
        Partition names for messages ("partition 3", a shard's file).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.distributed.glm import PartitionedRows
    >>> X = np.arange(10.0).reshape(5, 2); y = np.array([0, 1, 1, 0, 1])
    >>> rows = PartitionedRows.from_blocks([((X[:2], y[:2]), 0, 2), (lambda: (X[2:], y[2:]), 2, 3)], 2, client=None)
    >>> rows.map(lambda xb, yb: xb.shape[0]), rows.map_sum(lambda xb, yb: float(xb.sum()))
    ([2, 3], 45.0)
    """

    def __init__(self, client, xs, ys, starts, counts, labels, n_features: int | None = None):
        self.client, self.xs, self.ys = client, list(xs), list(ys)
        self.starts, self.counts, self.labels = list(starts), list(counts), list(labels)
        self.n = int(sum(counts))
        self.n_features = n_features

    @classmethod
    def split(cls, X, Y, at) -> PartitionedRows:
        """In-memory rows cut before each row in `at`: partitions in this process (examples, tests).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.distributed.glm import PartitionedRows
        >>> rows = PartitionedRows.split(np.zeros((5, 2)), np.arange(5), [2])
        >>> rows.counts, rows.labels, rows.ys[1].tolist()
        ([2, 3], ['partition 0', 'partition 1'], [2, 3, 4])
        """
        edges = [0, *at, X.shape[0]]
        blocks = [((X[a:b], Y[a:b]), a, b - a) for a, b in zip(edges[:-1], edges[1:])]
        return cls.from_blocks(blocks, X.shape[1], None)

    @classmethod
    def from_blocks(cls, blocks, n_features: int, client, labels=None) -> PartitionedRows:
        """Read every partition once, on the worker that will keep it (or here without a client).

        Parameters
        ----------
        blocks : list of (source, int, int)
            As `dask_stats.partitioned_statistics` takes them: per partition a zero-argument loader
            or an (X block, y block) pair of dask delayed objects or arrays, its first row and row count.
        n_features : int
            Columns of X.
        client : distributed.Client or None
        labels : list of str, optional

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.distributed.glm import PartitionedRows
        >>> X = np.ones((4, 1)); y = np.array([0, 1, 0, 1])
        >>> rows = PartitionedRows.from_blocks([((X[:1], y[:1]), 0, 1), ((X[1:], y[1:]), 1, 3)], 1, None)
        >>> rows.n, rows.labels
        (4, ['partition 0', 'partition 1'])
        """
        blocks = [b for b in blocks if b[2] > 0]  # an empty partition adds nothing to any sum
        if client is not None:
            from edgeseq.train.distributed.logs import quiet_expected_errors

            quiet_expected_errors(client)  # a partition's own error reaches the user as one line
        labels = [f"partition {k}" for k in range(len(blocks))] if labels is None else list(labels)
        xs, ys = [], []
        for source, _, _ in blocks:
            if client is None:
                import dask

                xb, yb = source() if callable(source) else dask.compute(*source)
            elif callable(source):
                pair = client.submit(source, pure=False)
                xb, yb = client.submit(_item, pair, 0), client.submit(_item, pair, 1)
            else:
                xb, yb = client.compute(list(source))
            xs.append(xb)
            ys.append(yb)
        return cls(client, xs, ys, [b[1] for b in blocks], [b[2] for b in blocks], labels, n_features)

    def with_y(self, ys) -> PartitionedRows:
        """The same X partitions with other per-partition targets (e.g. built by `keep`).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.distributed.glm import PartitionedRows
        >>> rows = PartitionedRows(None, [np.ones((2, 1))], [np.zeros(2)], [0], [2], ["p0"])
        >>> rows.with_y([np.ones(2)]).map(lambda xb, yb: yb.tolist())
        [[1.0, 1.0]]
        """
        return PartitionedRows(self.client, self.xs, ys, self.starts, self.counts, self.labels, self.n_features)

    def put(self, value):
        """`value` held once on the cluster (a task that returns it), or `value` itself here.

        Examples
        --------
        >>> from edgeseq.train.distributed.glm import PartitionedRows
        >>> PartitionedRows(None, [], [], [], [], []).put(3)
        3
        """
        return value if self.client is None else self.client.submit(_same, value, pure=False)

    def keep(self, fn, *args, indexed: bool = False) -> list:
        """``fn(x block, y block, *args)`` per partition, results left where they were computed.

        With ``indexed=True`` fn also receives the partition's name, first row and row count after the
        blocks (for messages that name the partition and row).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.distributed.glm import PartitionedRows
        >>> rows = PartitionedRows(None, [np.ones((2, 1))], [np.array([3, 4])], [0], [2], ["p0"])
        >>> [y.tolist() for y in rows.keep(lambda xb, yb, c: yb + c, 1)]
        [[4, 5]]
        """
        where = [(lab, a, c) if indexed else () for lab, a, c in zip(self.labels, self.starts, self.counts)]
        if self.client is None:
            return [fn(x, y, *w, *args) for x, y, w in zip(self.xs, self.ys, where)]
        return [self.client.submit(fn, x, y, *w, *args, pure=False) for x, y, w in zip(self.xs, self.ys, where)]

    def map(self, fn, *args, indexed: bool = False) -> list:
        """``fn(x block, y block, *args)`` per partition, results brought here in partition order.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.distributed.glm import PartitionedRows
        >>> rows = PartitionedRows(None, [np.ones((2, 1)), np.ones((1, 1))], [None, None], [0, 2], [2, 1], ["a", "b"])
        >>> rows.map(lambda xb, yb: len(xb))
        [2, 1]
        """
        parts = self.keep(fn, *args, indexed=indexed)
        if self.client is None:
            return parts
        self._check(parts)
        return self.client.gather(parts)

    def map_sum(self, fn, *args):
        """Σ over partitions of ``fn(x block, y block, *args)`` (nested tuples of arrays add element-wise).

        On a cluster the sum is a tree of additions on the workers (`FAN_IN` children per node, so
        ⌈log_FAN_IN P⌉ levels); only the root comes back.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.distributed.glm import PartitionedRows
        >>> rows = PartitionedRows.split(np.ones((3, 1)), np.zeros(3), [2])
        >>> rows.map_sum(lambda xb, yb: (len(xb), xb.sum(axis=0)))
        (3, array([3.]))
        """
        parts = self.keep(fn, *args)
        if self.client is None:
            return tree_reduce(parts, _add)
        root = tree_reduce(parts, lambda *nodes: self.client.submit(_add, *nodes, pure=False), fan_in=FAN_IN)
        try:
            return root.result()
        except Exception:
            self._check(parts)  # the failing partition's own error, named
            raise

    def _check(self, parts) -> None:
        from distributed import wait

        wait(parts)
        for k, fut in enumerate(parts):
            if fut.status == "error":
                raise_partition_error(fut, self.counts[k], self.labels[k])


# ---------------------------------------------------------------- the design over partitions
class PartitionedDesign:
    """The `WorkingDesign` passes a GLM selection needs, each one map over the partitions plus a sum.

    Parameters
    ----------
    rows : PartitionedRows
        X partitions with the refit's targets (0/1 column or one-hot) as their y.
    template : WorkingDesign
        The design over zero rows: used columns, means, group transforms (sent to the workers once).
    raw : WorkingDesign
        The centred used raw columns over zero rows (`WorkingDesign.centred`), for the `single` score.

    Examples
    --------
    A pass over two partitions equals the pass over all rows:

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.distributed.glm import PartitionedDesign, PartitionedRows
    >>> from edgeseq.train.glm.design import WorkingDesign
    >>> from edgeseq.train.glm.fit import design_objective
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 3)); Y = (X[:, :1] > 0).astype(float)
    >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 2], whiten=True)
    >>> d = PartitionedDesign.over(PartitionedRows.split(X, Y, [15]), np.arange(3), prob)
    >>> W, b = rng.normal(size=(2, 1)), np.zeros(1)
    >>> r, gW, gb, fit = d.objective([1], "sigmoid", 0.1)(W, b)
    >>> want = design_objective(WorkingDesign(X, np.arange(3), prob), [1], Y, "sigmoid", 0.1)(W, b)
    >>> bool(np.isclose(r, want[0])), bool(np.allclose(gW, want[1])), d.passes
    (True, True, 1)
    """

    def __init__(self, rows: PartitionedRows, template: WorkingDesign, raw: WorkingDesign):
        self.rows, self.slices, self.n = rows, list(template.slices), rows.n
        self._template = rows.put(template)
        self._raw_template = raw  # sent only if the `single` score asks for it
        self._raw = None
        self.passes = 0

    @classmethod
    def over(cls, rows: PartitionedRows, used, prob) -> PartitionedDesign:
        """The design of `prob` (used raw columns `used`) over `rows`; templates built over zero rows.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.distributed.glm import PartitionedDesign, PartitionedRows
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(9, 3)); Y = np.ones((9, 1))
        >>> rows = PartitionedRows.split(X, Y, [4])
        >>> d = PartitionedDesign.over(rows, [2, 0], build_working_problem(sufficient_statistics(X[:, [2, 0]], Y), [1, 1], True))
        >>> d.n, d.slices
        (9, [slice(0, 1, None), slice(1, 2, None)])
        """
        none = np.empty((0, rows.n_features))
        used = np.asarray(used, dtype=np.int64)
        return cls(rows, WorkingDesign(none, used, prob), WorkingDesign.centred(none, used, prob.x_mean))

    def objective(self, groups, link: str, l2: float):
        """`evaluate(W, b)` for `glm_fit.refit`: r, ∂r/∂W, ∂r/∂b and a `PartitionFit` in place of f.

        Examples
        --------
        See the class example.

        >>> from edgeseq.train.distributed.glm import PartitionedDesign
        >>> callable(PartitionedDesign.objective)
        True
        """
        groups = list(groups)

        def evaluate(W, b):
            loss, G, gb, correct = self._sum(_objective_part, self._template, groups, self.rows.put((W, b)), link)
            r = loss / self.n + 0.5 * l2 * float(np.sum(W * W))
            return r, G / self.n + l2 * W, gb / self.n, PartitionFit(loss / self.n, int(correct))

        return evaluate

    def candidate_gradient(self, groups, W, b, cands, link: str) -> np.ndarray:
        """Z_candsᵀ(∇φ(f) − Y), unscaled, f = Z_groups W + b: one pass, only the weights travel out.

        Examples
        --------
        Against the chunked in-memory design at the same weights:

        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.distributed.glm import PartitionedDesign, PartitionedRows
        >>> from edgeseq.train.glm.design import WorkingDesign
        >>> from edgeseq.train.glm.fit import mean_function
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(1).normal(size=(30, 2)); Y = (X[:, :1] > 0).astype(float)
        >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 1], whiten=True)
        >>> full, W = WorkingDesign(X, np.arange(2), prob), np.ones((1, 1))
        >>> R = mean_function(full.columns([0]) @ W, "sigmoid") - Y
        >>> d = PartitionedDesign.over(PartitionedRows.split(X, Y, [10]), np.arange(2), prob)
        >>> bool(np.allclose(d.candidate_gradient([0], W, np.zeros(1), [1], "sigmoid"), full.gradient(R, [1])))
        True
        """
        return self._sum(_candidate_part, self._template, list(groups), self.rows.put((W, b)), list(cands), link)

    def raw_gradient(self, groups, W, b, link: str) -> np.ndarray:
        """(X_used − μ)ᵀ(∇φ(f) − Y) on every used raw column, unscaled (the `single` score's input).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.distributed.glm import PartitionedDesign, PartitionedRows
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(2).normal(size=(12, 2)); Y = (X[:, :1] > 0).astype(float)
        >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 1], whiten=True)
        >>> d = PartitionedDesign.over(PartitionedRows.split(X, Y, [5]), np.arange(2), prob)
        >>> g = d.raw_gradient([], np.zeros((0, 1)), np.zeros(1), "sigmoid")   # at f = 0: p = 1/2
        >>> bool(np.allclose(g, (X - prob.x_mean).T @ (0.5 - Y)))
        True
        """
        if self._raw is None:
            self._raw = self.rows.put(self._raw_template)
        return self._sum(_raw_gradient_part, self._template, self._raw, list(groups), self.rows.put((W, b)), link)

    def weighted_sums(self, cols, W, b, cands, link: str) -> list:
        """Per class, `glm_select.weighted_gram_sums` over all rows at w = p(1 − p) of f = Z[:, cols] W + b.

        Examples
        --------
        With zero weights every row weighs p(1 − p) = 1/4:

        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.distributed.glm import PartitionedDesign, PartitionedRows
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(3).normal(size=(16, 2)); Y = (X[:, :1] > 0).astype(float)
        >>> d = PartitionedDesign.over(PartitionedRows.split(X, Y, [6]), np.arange(2),
        ...                            build_working_problem(sufficient_statistics(X, Y), [1, 1], whiten=True))
        >>> (H, WSZ, C), = d.weighted_sums([], np.zeros((0, 1)), np.zeros(1), [0, 1], "sigmoid")
        >>> float(H[0, 0]), bool(np.allclose(np.diag(C), 0.25 * 16))     # w = 1/4; whitened columns
        (4.0, True)
        """
        cands = list(cands)
        k = self.slices[-1].stop if self.slices else 0
        out = []
        for H, WSZ, blocks in self._sum(_weighted_part, self._template, list(cols), self.rows.put((W, b)), cands, link):
            C = np.zeros((k, k))
            for g, block in zip(cands, blocks):
                C[self.slices[g], self.slices[g]] = block
            out.append((H, WSZ, C))
        return out

    def _sum(self, fn, *args):
        self.passes += 1
        return self.rows.map_sum(fn, *args)


class PartitionedGLMState(GLMState):
    """`GLMState` whose passes over the rows run on the partitions (`PartitionedDesign`).

    Selection, scores, refits and the growing preconditioner are the in-memory state's own code; only
    where rows are read differs: the gradient blocks, the `single` score's raw gradient, the FR
    weighted Gram sums and the accuracy come from the partitions at the current weights, since the
    linear predictor f stays on them.

    Parameters
    ----------
    prob : WorkingProblem
    design : PartitionedDesign
    freq : array (P,)
        Mean of the targets (class frequencies): all the state needs of Y here, for the prior refit.
    link : {"sigmoid", "softmax"}
    l2 : float
    fr_hessian : {"bohning", "diag"}

    Examples
    --------
    The same order as the in-memory state:

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.distributed.glm import PartitionedDesign, PartitionedGLMState, PartitionedRows
    >>> from edgeseq.train.glm.design import WorkingDesign
    >>> from edgeseq.train.glm.select import GLMState, select_glm
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); Y = (2 * X[:, 2] - X[:, 0] > 0).astype(float)[:, None]
    >>> prob = build_working_problem(sufficient_statistics(X, Y), [1, 1, 1], whiten=True)
    >>> d = PartitionedDesign.over(PartitionedRows.split(X, Y, [100, 180]), np.arange(3), prob)
    >>> res = select_glm(PartitionedGLMState(prob, d, Y.mean(axis=0), "sigmoid", 1e-3), np.ones(3), method="fr")
    >>> ref = select_glm(GLMState(prob, WorkingDesign(X, np.arange(3), prob), Y, "sigmoid", 1e-3), np.ones(3),
    ...                  method="fr")
    >>> res.order == ref.order, bool(np.allclose(res.accuracy, ref.accuracy))
    (True, True)
    """

    def __init__(self, prob, design: PartitionedDesign, freq: np.ndarray, link: str, l2: float,
                 fr_hessian: str = "bohning", tol: float = GRAD_TOL):
        super().__init__(prob, design, np.asarray(freq, dtype=np.float64)[None, :], link, l2,
                         fr_hessian=fr_hessian, tol=tol)

    def _objective(self):
        return self.design.objective(self._selected(), self.link, self.l2)

    def _gradient_rows(self, groups):
        return self.design.candidate_gradient(self._selected(), self.fit.W, self.fit.b, groups, self.link)

    def _raw_gradient(self):
        return self.design.raw_gradient(self._selected(), self.fit.W, self.fit.b, self.link)

    def _weighted_sums(self, cands):
        return self.design.weighted_sums(self.cols, self.fit.W, self.fit.b, cands, self.link)

    def _n_correct(self) -> int:
        return self.fit.f.correct


def partition_classes(rows: PartitionedRows) -> tuple[np.ndarray, np.ndarray]:
    """The classes over all partitions and how many rows each has, from one pass over the labels.

    Raises
    ------
    InputError
        A partition with a NaN label or labels of another kind (strings in one, numbers in another),
        named with its row; fewer than two classes.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.distributed.glm import PartitionedRows, partition_classes
    >>> rows = PartitionedRows(None, [None, None], [np.array(["b", "a"]), np.array(["c", "a"])], [0, 2], [2, 2],
    ...                        ["p0", "p1"])
    >>> classes, counts = partition_classes(rows)
    >>> classes.tolist(), counts.tolist()
    (['a', 'b', 'c'], [2, 1, 1])
    >>> partition_classes(rows.with_y([np.array(["a", "b"]), np.array([1, 2])]))
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: p1: class labels are numbers but p0's are strings; every partition must use the same kind
    """
    found = rows.map(_labels_part, indexed=True)
    kinds = ["strings" if u.dtype.kind in "US" else "numbers" for u, _ in found]
    for k, kind in enumerate(kinds):
        if kind != kinds[0]:
            raise InputError(f"{rows.labels[k]}: class labels are {kind} but {rows.labels[0]}'s are {kinds[0]}; "
                             f"every partition must use the same kind")
    classes = np.unique(np.concatenate([u for u, _ in found]))
    counts = np.zeros(classes.size, dtype=np.int64)
    for u, c in found:
        counts[np.searchsorted(classes, u)] += c
    if classes.size < 2:
        raise InputError(f"y has a single class ({classes[0]!r}); a classifier needs at least 2 classes")
    return classes, counts


def label_column(y, n_rows: int) -> np.ndarray:
    """An in-memory y as one class label per row (what `row_blocks` splits for a classifier).

    Raises
    ------
    InputError
        y is not one label per row of X.

    Examples
    --------
    >>> from edgeseq.train.distributed.glm import label_column
    >>> label_column([["a"], ["b"]], 2).tolist()
    ['a', 'b']
    >>> label_column([1, 2], 3)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: y has shape (2,): expected one class label for each of the 3 rows of X
    """
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n_rows:
        raise InputError(f"y has shape {y.shape}: expected one class label for each of the {n_rows} rows of X")
    return y


@dataclass
class PartitionedTargets:
    """What a classifier needs before its selection on partitions: rows with targets, classes, statistics.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.distributed.glm import PartitionedRows, partitioned_targets
    >>> X = np.random.default_rng(0).normal(size=(6, 2)); y = np.array([0, 1, 2, 2, 1, 0])
    >>> t = partitioned_targets(PartitionedRows.split(X, y, [3]), np.arange(2))
    >>> t.classes.tolist(), t.link, t.freq.round(3).tolist(), t.stats.n
    ([0, 1, 2], 'softmax', [0.333, 0.333, 0.333], 6)
    """
    rows: PartitionedRows  # y of each partition: the refit's targets (0/1 column or one-hot)
    classes: np.ndarray
    link: str
    freq: np.ndarray  # mean of the targets (the prior refit's only use of Y)
    stats: SufficientStats  # of X's used columns and the targets, as the in-memory fit computes them


def _every_step(xb, yb, label, start, count, used, step):
    first = (-start) % step
    return np.asarray(xb[first::step][:, used], dtype=np.float64), yb[first::step]


def cv_sample(rows: PartitionedRows, used, step: int):
    """Rows 0, step, 2·step, ... (global numbering) of the used columns, with their targets, brought here.

    The sample the GLM's penalty choice cross-validates on (`edgeseq.train.linear.auto.cv_step` bounds its
    size), the same rows as in memory whatever the partitioning.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(10.0)[:, None]; Y = np.arange(10.0)[:, None]
    >>> Xs, Ys = cv_sample(PartitionedRows.split(X, Y, [3]), np.array([0]), 4)
    >>> Xs.ravel().tolist()
    [0.0, 4.0, 8.0]
    """
    parts = rows.map(_every_step, np.asarray(used), int(step), indexed=True)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def partitioned_targets(rows: PartitionedRows, columns, progress=None) -> PartitionedTargets:
    """Classes from a pass over the labels, targets built on the partitions, then the statistics pass.

    Parameters
    ----------
    rows : PartitionedRows
        X partitions with their class labels.
    columns : array of int
        Used columns in group order.
    progress : callable, optional
        Receives the statistics pass's lines (partitions done).

    Returns
    -------
    PartitionedTargets

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.distributed.glm import PartitionedRows, partitioned_targets
    >>> X = np.ones((4, 1)); X[2, 0] = np.nan
    >>> partitioned_targets(PartitionedRows.split(X, np.array([0, 1, 1, 0]), [2]), np.arange(1))
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: partition 1: X contains NaN or Inf at row 2 (row 0 of partition 1), column 0; clean or impute it first
    """
    classes, counts = partition_classes(rows)
    link = "sigmoid" if classes.size == 2 else "softmax"
    rows = rows.with_y(rows.keep(_targets_part, classes))
    stats = partitioned_statistics([((x, Y), a, c) for x, Y, a, c in zip(rows.xs, rows.ys, rows.starts, rows.counts)],
                                   rows.n, rows.n_features, columns=columns, client=rows.client, progress=progress,
                                   names=rows.labels)
    freq = counts / rows.n
    return PartitionedTargets(rows, classes, link, freq[1:] if link == "sigmoid" else freq, stats)


def partition_dask_arrays(X, y, client=None) -> PartitionedRows:
    """A row-chunked dask X and its labels as partitions read once where they will stay.

    Parameters
    ----------
    X : dask.array.Array (n, D)
    y : numpy or dask array (n,)
        Class labels; a numpy y is split like X's rows.
    client : distributed.Client, optional
        Default: the active client, else this process.

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> from edgeseq.train.distributed.glm import partition_dask_arrays
    >>> rows = partition_dask_arrays(da.zeros((5, 2), chunks=(3, 2)), np.array(["a", "b", "a", "b", "b"]))
    >>> rows.counts, rows.ys[1].tolist()
    ([3, 2], ['b', 'b'])
    """
    blocks, d = row_blocks(X, y, y_of=label_column)
    return PartitionedRows.from_blocks(blocks, d, active_client(client))
