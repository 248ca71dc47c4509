"""Cost-penalised least-squares regression trees on histograms (numpy), charged per feature *group*.

Why our own CART: AFR needs the Greedy Miser split rule with edgeseq's semantics: a split on a
feature of a group not yet paid for loses λ·c_g of its gain, and the group is charged once — by the
first tree (and within it, the first split) that uses it; afterwards every feature of that group is
free. LightGBM's cost-efficient boosting penalises *features*, not groups, and keeps its own
"used" set across the whole boosting run; mapping our rule onto it per call is possible but costs a
library round-trip per tree. A histogram CART in numpy is exact to the rule and fast enough for
depth-limited trees.

Gains are expressed as the *fraction* of the target's total sum of squares a split removes, so the
penalty λ·c_g has one meaning (fraction of variance per cost unit) whatever the gradient's scale.

Split statistics (per column and bin: the target's sum and the row count) are products of one sparse
one-hot matrix of the bin codes with a few dense columns (`BinnedRows`), all nodes of a tree level
at once: the same sums in the same order as a ``bincount`` per node, without building an
(n_rows × n_columns) index array per node — on the MNIST bank (3,130 columns) this is what bounds
an AFR fit's time.

Thresholds are float32 values of the training data and rows are binned by the same float32
comparison the evaluator uses (``x <= t``), so the fitted leaf assignment and
`TreeEnsemble.predict` agree exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class Binner:
    """Per-column float32 split candidates and the bin code of each row (bin k ⟺ edge[k-1] < x <= edge[k]).

    Parameters
    ----------
    X : numpy.ndarray
        Training rows; candidates are their distinct float32 values (at most ``max_bins - 1`` per
        column, by quantile), never the largest one (its right side would be empty).
    columns : array-like of int
        Columns to bin.
    max_bins : int
        Bins per column.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.cost_cart import Binner, fit_cost_tree
    >>> X = np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 6.0], [3.0, 6.0]]); t = np.array([0.0, 0.0, 1.0, 1.0])
    >>> b = Binner(X, [0, 1], max_bins=8)
    >>> [e.tolist() for e in b.edges]
    [[0.0, 1.0, 2.0], [5.0]]
    """

    def __init__(self, X: np.ndarray, columns: np.ndarray, max_bins: int = 32):
        X32 = np.asarray(X, dtype=np.float32)
        self.columns = np.asarray(columns, dtype=np.int64)
        self.edges = []
        for c in self.columns.tolist():
            u = np.unique(X32[:, c])
            cand = u[:-1]  # a split at the largest value would leave the right side empty
            if cand.size > max_bins - 1:
                q = np.linspace(0, cand.size - 1, max_bins - 1).round().astype(np.int64)
                cand = cand[np.unique(q)]
            self.edges.append(cand.astype(np.float32))
        self.n_bins = max(max_bins, 2)

    def codes(self, X: np.ndarray) -> np.ndarray:
        """Bin codes (n, n_columns) uint8/uint16 of any rows, by float32 ``x <= edge`` comparisons.

        The comparison is the evaluator's, so "bin <= k" is exactly "x <= edges[k]" at prediction time.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.trees.cost_cart import Binner, fit_cost_tree
        >>> X = np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 6.0], [3.0, 6.0]]); t = np.array([0.0, 0.0, 1.0, 1.0])
        >>> b = Binner(X, [0, 1], max_bins=8)
        >>> b.codes(X).tolist()
        [[0, 0], [1, 0], [2, 1], [3, 1]]
        >>> b.codes(np.array([[1.5, 4.0]])).tolist()
        [[2, 0]]
        """
        X32 = np.asarray(X, dtype=np.float32)
        out = np.empty((X32.shape[0], self.columns.size), dtype=np.uint16)
        for j, (c, e) in enumerate(zip(self.columns.tolist(), self.edges)):
            out[:, j] = np.searchsorted(e, X32[:, c], side="left")
        return out


class BinnedRows:
    """The bin codes of a fixed set of rows and their one-hot matrix, built once, reused by every tree.

    ``H`` (n_columns·n_bins × n_rows, CSR) has a one where row i falls into bin k of column j, so
    ``H @ v`` is, for every (column, bin), the sum of ``v`` over its rows — in increasing row order,
    as ``numpy.bincount`` would add them.

    Parameters
    ----------
    codes : numpy.ndarray
        (n_rows, n_columns) bin codes from `Binner.codes`.
    n_bins : int
        Bins per column (`Binner.n_bins`).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.cost_cart import Binner, BinnedRows
    >>> X = np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 6.0], [3.0, 6.0]]); t = np.array([0.0, 0.0, 1.0, 1.0])
    >>> b = Binner(X, [0, 1], max_bins=4)
    >>> rows = BinnedRows(b.codes(X), b.n_bins)
    >>> (sums, counts), = rows.histograms(t, [np.array([1, 2, 3])])
    >>> sums.tolist(), counts.tolist()
    ([[0.0, 0.0, 1.0, 1.0], [0.0, 2.0, 0.0, 0.0]], [[0.0, 1.0, 1.0, 1.0], [1.0, 2.0, 0.0, 0.0]])
    """

    NODES_PER_PRODUCT = 4  # a product costs ~ nnz·(2·nodes); beyond a few nodes the rows are few anyway

    def __init__(self, codes: np.ndarray, n_bins: int):
        from scipy.sparse import csc_matrix

        self.codes = np.asarray(codes)
        n, m = self.codes.shape
        self.n_bins, self.n_columns = int(n_bins), m
        bins = self.codes.astype(np.int64) + (np.arange(m, dtype=np.int64) * self.n_bins)[None, :]
        # column i of the CSC matrix holds row i's m bins: the CSR conversion sorts each bin's rows
        self.H = csc_matrix((np.ones(n * m), bins.ravel(), np.arange(0, n * m + 1, max(m, 1))),
                            shape=(m * self.n_bins, n)).tocsr()

    def histograms(self, target: np.ndarray, node_rows: list) -> list:
        """(sums, counts), each (n_columns, n_bins), of `target` over each node's rows.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.trees.cost_cart import BinnedRows
        >>> rows = BinnedRows(np.array([[0], [1], [1]]), 2)
        >>> [(s.tolist(), c.tolist()) for s, c in rows.histograms(np.array([1.0, 2.0, 3.0]), [np.arange(3), np.array([2])])]
        [([[1.0, 5.0]], [[1.0, 2.0]]), ([[0.0, 3.0]], [[0.0, 1.0]])]
        """
        out = []
        shape = (self.n_columns, self.n_bins)
        for start in range(0, len(node_rows), self.NODES_PER_PRODUCT):
            chunk = node_rows[start:start + self.NODES_PER_PRODUCT]
            V = np.zeros((self.codes.shape[0], 2 * len(chunk)))
            for i, rows in enumerate(chunk):
                V[rows, 2 * i] = target[rows]
                V[rows, 2 * i + 1] = 1.0
            R = self.H @ V
            out.extend((R[:, 2 * i].reshape(shape), R[:, 2 * i + 1].reshape(shape)) for i in range(len(chunk)))
        return out


@dataclass
class FittedTree:
    """One tree in the local layout of `TreeEnsemble` (root 0, children after parents) + the groups it paid.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.cost_cart import Binner, fit_cost_tree
    >>> X = np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 6.0], [3.0, 6.0]]); t = np.array([0.0, 0.0, 1.0, 1.0])
    >>> b = Binner(X, [0, 1], max_bins=8)
    >>> tree = fit_cost_tree(b, b.codes(X), t, np.array([0, 1]), np.array([1.0, 1.0]), paid=(), lam=0.0,
    ...                      max_depth=1, min_samples_leaf=1)
    >>> tree.feature.tolist(), tree.threshold.tolist(), tree.value.tolist(), tree.new_groups
    ([0, -1, -1], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], (0,))
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    new_groups: tuple[int, ...]  # groups this tree uses that were not paid before it, in first-use order

    @property
    def n_splits(self) -> int:
        """Number of split (non-leaf) nodes; 0 means the tree is a single leaf and adds nothing.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.trees.cost_cart import Binner, fit_cost_tree
        >>> X = np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 6.0], [3.0, 6.0]]); t = np.array([0.0, 0.0, 1.0, 1.0])
        >>> b = Binner(X, [0, 1], max_bins=8)
        >>> fit_cost_tree(b, b.codes(X), t, np.array([0, 1]), np.ones(2), paid=(), lam=0.0,
        ...               max_depth=2, min_samples_leaf=1).n_splits
        1
        """
        return int(np.sum(self.feature >= 0))


def fit_cost_tree(binner: Binner, codes, target: np.ndarray, column_group: np.ndarray,
                  group_costs: np.ndarray, paid, lam: float, max_depth: int = 3,
                  min_samples_leaf: int = 5) -> FittedTree:
    """Greedy least-squares tree of depth <= max_depth with the per-group cost penalty.

    Parameters
    ----------
    binner, codes : split candidates and the rows' bin codes (``codes[:, j]`` for ``binner.columns[j]``),
        as an array or as `BinnedRows` (build that once when many trees are fitted on the same rows).
    target : (n,) values to fit (AFR: the negative gradient).
    column_group : (n_columns,) group index of each binned column.
    group_costs : cost of every group; ``paid`` : groups already paid (free).
    lam : λ ≥ 0; a split on an unpaid group must remove more than λ·c_g of the target's total
        sum of squares (as a fraction) to be taken. Nodes are expanded breadth-first, so within a
        tree the first split on a group pays for it and later splits on it are free.

    Returns
    -------
    FittedTree
        With the groups it paid for in ``new_groups``.

    Examples
    --------
    Both columns separate the target perfectly; without a penalty the first column wins the tie,
    with one the cheap group is chosen, and a penalty above every gain leaves a single leaf:

    >>> import numpy as np
    >>> from edgeseq.train.trees.cost_cart import Binner, fit_cost_tree
    >>> X = np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 6.0], [3.0, 6.0]]); t = np.array([0.0, 0.0, 1.0, 1.0])
    >>> b = Binner(X, [0, 1], max_bins=8)
    >>> codes, groups = b.codes(X), np.array([0, 1])
    >>> def fit(costs, lam):
    ...     return fit_cost_tree(b, codes, t, groups, np.array(costs), paid=(), lam=lam, max_depth=1, min_samples_leaf=1)
    >>> fit([1.0, 0.1], 0.0).new_groups, fit([1.0, 0.1], 0.5).new_groups, fit([20.0, 20.0], 0.5).n_splits
    ((0,), (1,), 0)
    >>> fit_cost_tree(b, codes, t, groups, np.array([20.0, 20.0]), paid={0}, lam=0.5, max_depth=1,
    ...               min_samples_leaf=1).feature.tolist()  # group 0 already paid: free
    [0, -1, -1]
    """
    target = np.asarray(target, dtype=np.float64)
    n = target.shape[0]
    sst = float(np.sum((target - target.mean()) ** 2))
    paid_now = set(int(g) for g in paid)
    new_groups: list[int] = []
    nb = binner.n_bins
    binned = codes if isinstance(codes, BinnedRows) else BinnedRows(codes, nb)
    n_edges = np.array([e.size for e in binner.edges])
    bin_ok = np.arange(nb)[None, :] < n_edges[:, None]  # split "bin <= k" needs edge k to exist
    feature, threshold, left, right, value = [], [], [], [], []
    queue = [(np.arange(n), 0)]  # (rows, depth) in node-index order
    head = 0
    while head < len(queue):  # one tree level per pass: its nodes' histograms in one product
        level = range(head, len(queue))
        head = len(queue)
        splittable = [i for i in level if queue[i][1] < max_depth and queue[i][0].size >= 2 * min_samples_leaf
                      and sst > 0]
        hists = dict(zip(splittable, binned.histograms(target, [queue[i][0] for i in splittable])))
        for node in level:
            rows, depth = queue[node]
            feature.append(-1)
            threshold.append(0.0)
            left.append(-1)
            right.append(-1)
            value.append(float(target[rows].mean()) if rows.size else 0.0)
            if node not in hists:
                continue
            sums, cnts = hists[node]
            gl, nl = np.cumsum(sums, axis=1), np.cumsum(cnts, axis=1)
            G, N = float(target[rows].sum()), float(rows.size)
            gr, nr = G - gl, N - nl
            ok = bin_ok & (nl >= min_samples_leaf) & (nr >= min_samples_leaf)
            with np.errstate(divide="ignore", invalid="ignore"):
                gain = np.where(ok, gl ** 2 / nl + gr ** 2 / nr - G ** 2 / N, -np.inf) / sst
            # the charge is decided node by node, in node order: a group paid by an earlier node is free
            charge = np.array([0.0 if g in paid_now else lam * group_costs[g] for g in column_group.tolist()])
            score = gain - charge[:, None]
            best = int(np.argmax(score))  # ties: lowest column, then lowest threshold
            j, k = divmod(best, nb)
            if not np.isfinite(score[j, k]) or score[j, k] <= 0 or gain[j, k] <= 1e-12:
                continue
            g = int(column_group[j])
            if g not in paid_now:
                paid_now.add(g)
                new_groups.append(g)
            goes_left = binned.codes[rows, j] <= k
            value[node] = 0.0
            feature[node] = int(binner.columns[j])
            threshold[node] = float(binner.edges[j][k])
            left[node] = len(queue)
            queue.append((rows[goes_left], depth + 1))
            right[node] = len(queue)
            queue.append((rows[~goes_left], depth + 1))
    return FittedTree(np.array(feature, np.int32), np.array(threshold, np.float32), np.array(left, np.int32),
                      np.array(right, np.int32), np.array(value), tuple(new_groups))
