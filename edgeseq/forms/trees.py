"""Regression-tree ensembles and tree stages as plain, validated arrays.

Why a separate representation: AFR and imported LightGBM models both end up as "sums of small
trees, read out per stage". Emitters (ONNX TreeEnsembleRegressor, C ``static const`` arrays) and
runtimes must be able to *trust* the arrays they are given: every index they will follow is checked
here, once, so a crafted or corrupted model can be refused with one clear line instead of making
generated code read outside its arrays.

Layout of a `TreeEnsemble` (all trees' nodes in one flat set of arrays)
----------------------------------------------------------------------
* Tree ``t`` owns the contiguous node range ``roots[t] .. roots[t+1]-1`` (the last tree ends at
  ``n_nodes``); its root is ``roots[t]``.
* Node ``i`` is a *leaf* when ``feature[i] == -1``; its output is ``value[i]`` and
  ``left[i] == right[i] == -1``.
* Otherwise it is a split: go to ``left[i]`` when ``float32(x[feature[i]]) <= threshold[i]`` (a
  float32), else to ``right[i]``. Children are absolute node indices inside the same tree and always
  *after* their parent, which makes cycles impossible by construction (and cheap to check).
* ``target[t]`` is the state dimension tree ``t`` adds its leaf value to; ``depth[t]`` is the
  number of comparisons on the longest root-to-leaf path (0 for a single-leaf tree), so a traversal
  can be bounded by it.

The comparison is the one ONNX ``TreeEnsembleRegressor`` (``BRANCH_LEQ`` on float32 inputs) and
LightGBM (``x <= threshold`` for numerical splits) use, so all three agree at the boundary values.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from edgeseq.errors import InputError, ModelFormatError
from edgeseq.budget import resolve_prefix
from edgeseq.format import MAX_UNUSED_TRAILING
from edgeseq.messages import brief, columns_text
from edgeseq.forms.linear import LINKS, apply_link, check_feature_names, check_name, renamed

MAX_DEPTH = 32  # a bound on traversal work per tree; deeper trees are refused, not truncated
MAX_NODES = 1 << 24  # bounds memory and generated-code size of one ensemble


@dataclass(frozen=True)
class TreeEnsemble:
    """A validated ensemble of regression trees; see the module docstring for the layout.

    Every index an emitter or runtime will follow is checked on construction, so a corrupted or
    crafted model is refused here rather than making generated code read outside its arrays.

    Parameters
    ----------
    feature, threshold, left, right, value : array-like
        Per-node split feature (-1 at leaves), float32 threshold, child indices and leaf value.
    roots, target : array-like
        Per tree: first node and the state dimension it adds to.
    n_features, n_targets : int
        Raw feature count and state dimension.

    Raises
    ------
    ModelFormatError
        If any invariant of the layout does not hold.

    Examples
    --------
    Tree 0 splits on feature 0 at 0.5 (leaves 1 and 2); tree 1 is a single leaf worth 10:

    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble
    >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
    ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
    ...                    target=[0, 0], n_features=2, n_targets=1)
    >>> ens.predict(np.array([[0.0, 0.0], [0.5, 0.0], [0.7, 0.0]])).ravel().tolist()
    [11.0, 11.0, 12.0]
    >>> TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[2, -1, -1], right=[1, -1, -1],
    ...              value=[0, 1, 2], roots=[0], target=[0], n_features=1, n_targets=1).n_trees
    1
    >>> TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[0, -1, -1], right=[2, -1, -1],
    ...              value=[0, 1, 2], roots=[0], target=[0], n_features=1, n_targets=1)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: tree ensemble: a left child points backwards or outside its tree ...
    """

    feature: np.ndarray  # int32 (n_nodes,), -1 for leaves
    threshold: np.ndarray  # float32 (n_nodes,), 0 for leaves
    left: np.ndarray  # int32 (n_nodes,), -1 for leaves
    right: np.ndarray  # int32 (n_nodes,), -1 for leaves
    value: np.ndarray  # float64 (n_nodes,), leaf outputs (ignored at splits)
    roots: np.ndarray  # int32 (n_trees,), first node of each tree (roots[0] == 0, increasing)
    target: np.ndarray  # int32 (n_trees,), state dimension each tree adds to
    n_features: int  # raw feature count the feature indices refer to
    n_targets: int  # state dimension

    def __post_init__(self) -> None:
        conv = {"feature": np.int32, "threshold": np.float32, "left": np.int32, "right": np.int32,
                "value": np.float64, "roots": np.int32, "target": np.int32}
        for name, dtype in conv.items():
            raw = getattr(self, name)
            arr = np.asarray(raw)
            if arr.ndim != 1:
                raise ModelFormatError(f"tree ensemble: {name} must be a 1-D array, got shape {arr.shape}")
            if np.issubdtype(dtype, np.integer) and arr.size and not np.issubdtype(arr.dtype, np.integer):
                raise ModelFormatError(f"tree ensemble: {name} must hold integers, got dtype {arr.dtype}")
            if np.issubdtype(dtype, np.integer) and arr.size and (arr.min() < -1 or arr.max() > MAX_NODES):
                raise ModelFormatError(f"tree ensemble: {name} has out-of-range entries")
            with np.errstate(over="ignore"):  # a float32 overflow becomes Inf, refused below
                arr = np.array(arr, dtype=dtype)  # a private copy: later edits of the caller's array cannot reach it
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        for name in ("n_features", "n_targets"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 1 <= v <= MAX_NODES:
                raise ModelFormatError(f"tree ensemble: {name} must be a positive integer, got {v!r}")
            object.__setattr__(self, name, int(v))
        object.__setattr__(self, "depth", _validate(self))

    @property
    def n_trees(self) -> int:
        """Number of trees.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> ens.n_trees
        2
        """
        return int(self.roots.shape[0])

    @property
    def n_nodes(self) -> int:
        """Number of nodes of all trees together.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> ens.n_nodes
        4
        """
        return int(self.feature.shape[0])

    def tree_range(self, t: int) -> tuple[int, int]:
        """Node index range [start, stop) of tree t.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> ens.tree_range(0), ens.tree_range(1)
        ((0, 3), (3, 4))
        """
        stop = int(self.roots[t + 1]) if t + 1 < self.n_trees else self.n_nodes
        return int(self.roots[t]), stop

    def features_of_trees(self, trees) -> np.ndarray:
        """Sorted distinct raw feature indices split on by the given trees.

        This is what decides which feature groups a stage needs extracted.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> ens.features_of_trees([0]).tolist(), ens.features_of_trees([1]).tolist()
        ([0], [])
        """
        used = [self.feature[slice(*self.tree_range(t))] for t in trees]
        used = np.concatenate(used) if used else np.zeros(0, np.int32)
        return np.unique(used[used >= 0]).astype(np.int64)

    def select(self, trees) -> "TreeEnsemble":
        """A new ensemble made of the given trees (in the given order), node indices renumbered.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> sub = ens.select([1, 0])
        >>> sub.roots.tolist(), sub.n_nodes
        ([0, 1], 4)
        >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
        >>> np.array_equal(sub.predict(X), ens.predict(X))
        True
        """
        parts, roots, offset = [], [], 0
        for t in trees:
            a, b = self.tree_range(int(t))
            shift = offset - a
            ch = lambda c: np.where(c >= 0, c + shift, -1)  # noqa: E731
            parts.append((self.feature[a:b], self.threshold[a:b], ch(self.left[a:b]), ch(self.right[a:b]),
                          self.value[a:b]))
            roots.append(offset)
            offset += b - a
        cols = list(zip(*parts)) if parts else [[np.zeros(0)]] * 5
        return TreeEnsemble(*(np.concatenate(c) for c in cols), roots=np.array(roots, np.int64),
                            target=self.target[np.asarray(list(trees), dtype=np.int64)],
                            n_features=self.n_features, n_targets=self.n_targets)

    # ------------------------------------------------------------------ evaluation
    def tree_outputs(self, X, trees=None) -> np.ndarray:
        """Leaf value reached by every row in every tree: (n, n_selected_trees), float64.

        X is cast to float32 before comparing (as ONNX and LightGBM do); rows must be finite in the
        features the trees read (the caller validates inputs; NaN would silently go right here).

        Examples
        --------
        The split is ``x <= threshold`` after float32 rounding, as in ONNX and LightGBM:

        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> ens.tree_outputs(np.array([[0.5, 0.0], [0.50000001, 0.0], [0.6, 0.0]])).tolist()
        [[1.0, 10.0], [1.0, 10.0], [2.0, 10.0]]
        """
        X32 = _as_rows(X, self.n_features)
        trees = range(self.n_trees) if trees is None else trees
        rows = np.arange(X32.shape[0])
        out = []
        for t in trees:
            node = np.full(X32.shape[0], self.roots[t], dtype=np.int64)
            for _ in range(int(self.depth[t])):
                f = self.feature[node]
                split = f >= 0
                xv = X32[rows, np.where(split, f, 0)]
                nxt = np.where(xv <= self.threshold[node], self.left[node], self.right[node])
                node = np.where(split, nxt, node)
            out.append(self.value[node])
        return np.column_stack(out) if out else np.zeros((X32.shape[0], 0))

    def predict(self, X, trees=None) -> np.ndarray:
        """Sum of the trees' outputs into their target dimensions: (n, n_targets), float64.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
        >>> np.array_equal(ens.predict(X)[:, 0], ens.tree_outputs(X).sum(axis=1))
        True
        >>> ens.predict(X, trees=[1]).ravel().tolist()
        [10.0, 10.0]
        """
        trees = np.arange(self.n_trees) if trees is None else np.asarray(list(trees), dtype=np.int64)
        leaves = self.tree_outputs(X, trees)
        out = np.zeros((leaves.shape[0], self.n_targets))
        for k, t in enumerate(trees.tolist()):
            out[:, self.target[t]] += leaves[:, k]
        return out


def _as_rows(X, n_features: int) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != n_features:
        raise InputError(f"trees expect rows of {n_features} features, got an array of shape {X.shape}")
    return X.astype(np.float32, copy=False)


def _validate(ens: TreeEnsemble) -> np.ndarray:
    """Check every invariant an emitter relies on; return each tree's depth (int32)."""
    n, T = ens.feature.shape[0], ens.roots.shape[0]
    if n > MAX_NODES:
        raise ModelFormatError(f"tree ensemble has {n} nodes; at most {MAX_NODES} are supported")
    for name in ("threshold", "left", "right", "value"):
        if getattr(ens, name).shape[0] != n:
            raise ModelFormatError(f"tree ensemble: {name} has {getattr(ens, name).shape[0]} entries, "
                                   f"expected one per node ({n})")
    if ens.target.shape[0] != T:
        raise ModelFormatError(f"tree ensemble: {ens.target.shape[0]} targets for {T} trees")
    if T and (ens.roots[0] != 0 or np.any(np.diff(ens.roots) <= 0) or ens.roots[-1] >= n):
        raise ModelFormatError("tree ensemble: tree roots must start at 0 and increase strictly inside the nodes")
    if T == 0 and n:
        raise ModelFormatError("tree ensemble: nodes without any tree")
    if T and (ens.target.min() < 0 or ens.target.max() >= ens.n_targets):
        raise ModelFormatError(f"tree ensemble: target dimension outside 0..{ens.n_targets - 1}")
    leaf = ens.feature == -1
    split = ~leaf
    if np.any(ens.feature[split] >= ens.n_features) or np.any(ens.feature < -1):
        bad = int(np.flatnonzero((ens.feature >= ens.n_features) | (ens.feature < -1))[0])
        raise ModelFormatError(f"tree ensemble: node {bad} splits on feature {int(ens.feature[bad])}, "
                               f"outside 0..{ens.n_features - 1}")
    if not np.all(np.isfinite(ens.threshold[split])):
        raise ModelFormatError("tree ensemble: a split threshold is NaN or Inf (after float32 rounding)")
    if not np.all(np.isfinite(ens.value)):
        raise ModelFormatError("tree ensemble: a leaf value is NaN or Inf")
    if np.any(ens.left[leaf] != -1) or np.any(ens.right[leaf] != -1):
        raise ModelFormatError("tree ensemble: a leaf has children")
    ends = np.append(ens.roots[1:], n).astype(np.int64)
    tree_of = np.repeat(np.arange(T), np.diff(np.append(ens.roots, n))) if T else np.zeros(0, np.int64)
    idx = np.arange(n)
    for name in ("left", "right"):
        ch = getattr(ens, name)[split].astype(np.int64)
        own_end = ends[tree_of[split]]
        if np.any(ch <= idx[split]) or np.any(ch >= own_end):
            raise ModelFormatError(f"tree ensemble: a {name} child points backwards or outside its tree "
                                   f"(children must follow their parent within the same tree)")
    parents = np.zeros(n, np.int64)
    np.add.at(parents, ens.left[split].astype(np.int64), 1)
    np.add.at(parents, ens.right[split].astype(np.int64), 1)
    is_root = np.zeros(n, bool)
    is_root[ens.roots.astype(np.int64)] = True
    if np.any(parents[is_root] != 0) or np.any(parents[~is_root] != 1):
        raise ModelFormatError("tree ensemble: every non-root node needs exactly one parent (a tree, not a graph)")
    # children follow parents, so one forward sweep computes depths
    node_depth = np.zeros(n, np.int64)
    for i in np.flatnonzero(split).tolist():
        d = node_depth[i] + 1
        node_depth[ens.left[i]] = d
        node_depth[ens.right[i]] = d
    depth = np.array([node_depth[a:b].max() for a, b in zip(ens.roots.tolist(), ends.tolist())], np.int32)
    if T and depth.max() > MAX_DEPTH:
        raise ModelFormatError(f"tree ensemble: a tree has depth {int(depth.max())}; at most {MAX_DEPTH} is supported")
    depth.setflags(write=False)
    return depth


def _check_names(names, field: str, n) -> int:
    """`names` is a tuple of distinct bounded strings (`n` of them unless None); return how many."""
    if type(names) is not tuple or (n is not None and len(names) != n):
        raise ModelFormatError(f"tree model: {field} must be a tuple of {'' if n is None else n} names, "
                               f"got {brief(names)}")
    for i, name in enumerate(names):
        try:
            check_name(name, f"{field}[{i}]")
        except InputError as exc:
            raise ModelFormatError(f"tree model: {exc}") from None
    if field == "output_names" and len(set(names)) != len(names):
        raise ModelFormatError(f"tree model: {field} repeats a name")
    return len(names)


def _check_width(group_columns, n_features: int) -> None:
    """Every group's columns are a non-empty 1-D integer array, and `n_features` is justified by them.

    A tree model has no per-feature array (names, statistics) that would vouch for its width, so at
    most `MAX_UNUSED_TRAILING` columns may belong to no group: otherwise a few bytes could claim
    millions of features and every row an export or verify draws would be sized by that claim.
    """
    named = 0
    for g, cols in enumerate(group_columns):
        if type(cols) is not np.ndarray or cols.ndim != 1 or cols.size == 0:
            raise ModelFormatError(f"tree model: group {g}'s columns must be a non-empty 1-D integer array, "
                                   f"got {brief(cols)}")
        named += cols.size
    if n_features > named + MAX_UNUSED_TRAILING:
        raise ModelFormatError(f"tree model: the ensemble reads rows of {n_features} features but the groups name "
                               f"only {named} columns; at most {MAX_UNUSED_TRAILING} columns may belong to no group")


def _check_classes(classes, link: str, n_classes: int) -> None:
    """None (regression, or labels 0..n-1), else one distinct, finite, plain label per class."""
    if classes is None:
        return
    if link == "identity":
        raise ModelFormatError(f"tree model: a regression model has no classes, got {brief(classes)}")
    ok = type(classes) is np.ndarray and classes.ndim == 1 and classes.shape[0] == n_classes \
        and classes.dtype.kind in "biufU" and (classes.dtype.kind != "f" or np.all(np.isfinite(classes)))
    if not ok or np.unique(classes).size != n_classes:
        raise ModelFormatError(f"tree model: classes must be a 1-D array of {n_classes} distinct finite labels "
                               f"(numbers or strings), got {brief(classes)}")
    if classes.dtype.kind == "U":
        for i, c in enumerate(classes.tolist()):
            try:
                check_name(c, f"classes[{i}]", allow_empty=True)
            except InputError as exc:
                raise ModelFormatError(f"tree model: {exc}") from None


@dataclass(frozen=True)
class TreeStage:
    """One anytime stage: the groups it newly requires, its cost, its trees and its readout.

    State update s_k = s_{k-1} + Σ_{trees t of this stage} tree_t(x); prediction link(s_kᵀ W + b).
    ``trees`` is the half-open range [tree_start, tree_stop) of the ensemble (boosting order).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeStage
    >>> s = TreeStage(new_groups=(0,), cost=1.0, tree_start=0, tree_stop=3, W=np.ones((1, 1)), b=np.zeros(1))
    >>> s.tree_stop - s.tree_start
    3
    """

    new_groups: tuple[int, ...]
    cost: float
    tree_start: int
    tree_stop: int
    W: np.ndarray  # (n_state, P) readout
    b: np.ndarray  # (P,)


@dataclass(frozen=True)
class TreeStageModel:
    """A tree-stage anytime model: groups, ensemble, stages 0..K and the link.

    Stage 0 requires no group and holds no tree (prediction link(b_0), the prior). Every stage may
    only split on features of groups required by it or by earlier stages; this is checked, so a
    runtime following the stages can never read a group that was not extracted.

    Examples
    --------
    Two groups; stage 1 (cost 1) adds tree 0, which splits on group "a"; stage 2 (cost 2) adds tree 1:

    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
    ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
    ...                    target=[0, 0], n_features=2, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
    ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
    ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
    ...     link="identity", output_names=("y",))
    >>> X = np.array([[0.0, 5.0], [1.0, 5.0]])
    >>> [model.predict(X, stage=k).ravel().tolist() for k in range(3)]
    [[0.0, 0.0], [1.0, 2.0], [11.0, 12.0]]
    >>> TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0], ensemble=ens,
    ...     stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((1,), 2.0, 0, 2, one, zero)),
    ...     link="identity", output_names=("y",))
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: tree model: stage 1 splits on feature 0, which belongs to no group computed by then
    """

    group_names: tuple[str, ...]
    group_columns: tuple[np.ndarray, ...]
    costs: np.ndarray
    ensemble: TreeEnsemble
    stages: tuple[TreeStage, ...]
    link: str
    output_names: tuple[str, ...]
    classes: np.ndarray | None = None
    # raw column names (data frame columns, CSV header, booster); files saved before they existed
    # read the class default None
    feature_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "feature_names", check_feature_names(
            self.feature_names, self.ensemble.n_features, "tree model feature_names"))
        object.__setattr__(self, "costs", np.asarray(self.costs, dtype=np.float64))
        object.__setattr__(self, "group_columns", tuple(np.asarray(c, np.int64) for c in self.group_columns))
        for name in ("group_names", "output_names"):  # a list is taken as given; other types are refused below
            if type(getattr(self, name)) is list:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if type(self.classes) is np.ndarray and self.classes.dtype == object \
                and all(type(c) is str for c in self.classes.tolist()):  # scikit-learn's object labels
            object.__setattr__(self, "classes", np.array(self.classes.tolist(), dtype=str))
        if type(self.classes) in (list, tuple):
            try:
                object.__setattr__(self, "classes", np.asarray(self.classes))
            except ValueError:  # ragged: left as given, refused by validate
                pass
        stages = tuple(TreeStage(tuple(int(g) for g in s.new_groups), float(s.cost), int(s.tree_start),
                                 int(s.tree_stop), np.asarray(s.W, np.float64), np.asarray(s.b, np.float64))
                       for s in self.stages)
        object.__setattr__(self, "stages", stages)
        self.validate()
        s0 = self.stages[0]
        if isinstance(s0.W, np.ndarray) and s0.W.any():
            # stage 0 reads a zero state, so its weights cannot matter; every export stores them as zeros
            # (a graph of stage 0 has no state input), so keep them as zeros here too
            object.__setattr__(self, "stages", (TreeStage(s0.new_groups, s0.cost, s0.tree_start, s0.tree_stop,
                                                          np.zeros_like(s0.W), s0.b), *self.stages[1:]))

    @property
    def n_features_in(self) -> int:
        """Number of raw feature columns the model reads rows of (the ensemble's, the stage protocol's name).

        Examples
        --------
        >>> from edgeseq.export.kinds.trees.c_float import _demo_model
        >>> _demo_model().n_features_in
        2
        """
        return int(self.ensemble.n_features)

    @property
    def stage_names(self) -> tuple[str, ...]:
        """One name per stage after the prior: the groups it adds (joined with " + ").

        Examples
        --------
        >>> from edgeseq.export.kinds.trees.c_float import _demo_model
        >>> _demo_model().stage_names
        ('a', 'b')
        """
        return tuple(" + ".join(self.group_names[g] for g in s.new_groups) or "(no new group)"
                     for s in self.stages[1:])

    @property
    def provenance(self) -> dict:
        """What produced the stages, as far as the form knows (estimators keep richer provenance).

        Examples
        --------
        >>> from edgeseq.export.kinds.trees.c_float import _demo_model
        >>> _demo_model().provenance
        {'method': 'tree stages'}
        """
        return {"method": "tree stages"}

    @property
    def n_outputs(self) -> int:
        """Number of readout outputs P.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> model.n_outputs
        1
        """
        return int(self.stages[0].b.shape[0])

    @property
    def cum_cost(self) -> np.ndarray:
        """Cumulative cost after each stage (stage 0 costs nothing).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> model.cum_cost.tolist()
        [0.0, 1.0, 3.0]
        """
        return np.cumsum([s.cost for s in self.stages])

    def prefix_for_budget(self, budget: float) -> int:
        """The last stage whose cumulative cost is <= budget: the one budget rule of `edgeseq.budget`.

        The same name, rule, checks and messages as `FittedSequence.prefix_for_budget` (the runtimes
        use the same name): `edgeseq.budget.resolve_prefix` does the work for both, so the forms
        cannot drift apart. ``None`` means no limit (the last stage).

        Parameters
        ----------
        budget : float or None
            Time available, in the model's cost units.

        Returns
        -------
        int
            The stage index.

        Raises
        ------
        InputError
            If `budget` is not a number >= 0 (bools refused, numpy's included).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> [model.prefix_for_budget(b) for b in (0, 0.5, 1.0, 2.9, 3.0, 100)]
        [0, 0, 1, 1, 2, 2]
        >>> model.prefix_for_budget(-1.0)
        Traceback (most recent call last):
        ...
        edgeseq.errors.InputError: budget must be a number >= 0 in cost units, got -1.0
        """
        return resolve_prefix(self.cum_cost, budget=budget)

    def stage_for_budget(self, budget: float) -> int:
        """Deprecated alias of `prefix_for_budget` (the name every stage form shares).

        Examples
        --------
        >>> import warnings
        >>> from edgeseq.export.kinds.trees.c_float import _demo_model
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     k = _demo_model().stage_for_budget(1.0)
        >>> k, caught[0].category.__name__
        (1, 'DeprecationWarning')
        """
        renamed("TreeStageModel.stage_for_budget", "prefix_for_budget")
        return self.prefix_for_budget(budget)

    def resolve_stage(self, budget=None, stage=None) -> int:
        """The stage to use: `stage` itself, the last one within `budget`, or (neither) the last.

        Raises
        ------
        InputError
            If both are given or `stage` is out of range.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> model.resolve_stage(), model.resolve_stage(budget=1.5), model.resolve_stage(stage=0)
        (2, 1, 0)
        """
        if budget is not None and stage is not None:
            raise InputError("give either budget or stage, not both")
        if stage is not None:
            if isinstance(stage, bool) or not isinstance(stage, numbers.Integral) \
                    or not 0 <= stage < len(self.stages):
                raise InputError(f"stage must be an integer in 0..{len(self.stages) - 1}, got {stage!r}")
            return int(stage)
        if budget is not None:
            return self.prefix_for_budget(budget)
        return len(self.stages) - 1

    def groups_required(self, k: int) -> list[int]:
        """Groups computed once stage k has run, in extraction order.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> [model.groups_required(k) for k in range(3)]
        [[], [0], [0, 1]]
        """
        return [g for s in self.stages[:k + 1] for g in s.new_groups]

    def prefix_columns(self, k: int) -> np.ndarray:
        """Raw feature columns of the groups stage k requires (the ones that must be finite).

        The same name and meaning as `FittedSequence.prefix_columns`: the columns of the groups
        computed once stage k has run, in extraction order.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> model.prefix_columns(0).tolist(), model.prefix_columns(2).tolist()
        ([], [0, 1])
        """
        gs = self.groups_required(k)
        return np.concatenate([self.group_columns[g] for g in gs]) if gs else np.zeros(0, np.int64)

    def columns_required(self, k: int) -> np.ndarray:
        """Deprecated alias of `prefix_columns` (the name every stage form shares).

        Examples
        --------
        >>> import warnings
        >>> from edgeseq.export.kinds.trees.c_float import _demo_model
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", DeprecationWarning)
        ...     _demo_model().columns_required(1).tolist()
        [0]
        """
        renamed(f"{type(self).__name__}.columns_required", "prefix_columns")
        return self.prefix_columns(k)

    def validate(self) -> None:
        """Stage/ensemble consistency, readout shapes, and 'reads only extracted groups'.

        Called on construction; exposed so a loader can re-check an object it did not build.

        Raises
        ------
        ModelFormatError
            Naming the first inconsistency found.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> model.validate()  # silent when consistent
        """
        ens = self.ensemble
        if type(self.link) is not str or self.link not in LINKS:
            raise ModelFormatError(f"unknown link {brief(self.link)}; expected one of {LINKS}")
        J = _check_names(self.group_names, "group_names", None)
        if type(self.group_columns) is not tuple or len(self.group_columns) != J or self.costs.shape != (J,) \
                or not np.all(np.isfinite(self.costs)) or np.any(self.costs <= 0):
            raise ModelFormatError("tree model: need one column list and one positive finite cost per group")
        _check_width(self.group_columns, ens.n_features)  # before anything is sized by n_features
        if self.feature_names is not None:  # a loaded model skipped __post_init__'s check
            try:
                checked = check_feature_names(self.feature_names, ens.n_features, "tree model feature_names")
            except InputError as exc:
                raise ModelFormatError(str(exc)) from None
            if type(self.feature_names) is not tuple or checked != self.feature_names:
                raise ModelFormatError("tree model feature_names must be a tuple of str")
        owner = np.full(ens.n_features, -1)
        for g, cols in enumerate(self.group_columns):
            if cols.size == 0 or cols.min() < 0 or cols.max() >= ens.n_features or np.any(owner[cols] >= 0):
                raise ModelFormatError(f"tree model: group {g} has empty, out-of-range or shared columns")
            owner[cols] = g
        if not self.stages or self.stages[0].new_groups or self.stages[0].tree_start != self.stages[0].tree_stop:
            raise ModelFormatError("tree model: stage 0 must exist and require no group and no tree")
        P = self.stages[0].b.shape[0] if self.stages[0].b.ndim == 1 else -1
        if P < 1:
            raise ModelFormatError("tree model: readout bias must be a non-empty vector")
        n_names = 2 if self.link == "sigmoid" else P
        if type(self.output_names) is not tuple or len(self.output_names) != n_names \
                or (self.link == "sigmoid" and P != 1):
            raise ModelFormatError("tree model: output names must match the outputs (both classes for sigmoid)")
        _check_names(self.output_names, "output_names", n_names)
        _check_classes(self.classes, self.link, n_names)
        paid: set[int] = set()
        nxt = 0
        for k, s in enumerate(self.stages):
            if s.tree_start != nxt or s.tree_stop < s.tree_start or s.tree_stop > ens.n_trees:
                raise ModelFormatError(f"tree model: stage {k}'s trees must continue where stage {k - 1} ended")
            nxt = s.tree_stop
            for g in s.new_groups:
                if not 0 <= g < J or g in paid:
                    raise ModelFormatError(f"tree model: stage {k} requires unknown or already computed group {g}")
                paid.add(g)
            expect = sum(float(self.costs[g]) for g in s.new_groups)
            if not np.isfinite(s.cost) or s.cost < expect * (1 - 1e-12):
                raise ModelFormatError(f"tree model: stage {k} costs {s.cost!r}, less than its groups' {expect!r}")
            if s.W.shape != (ens.n_targets, P) or s.b.shape != (P,) or not np.all(np.isfinite(s.W)) \
                    or not np.all(np.isfinite(s.b)):
                raise ModelFormatError(f"tree model: stage {k}'s readout must be finite with shapes "
                                       f"({ens.n_targets}, {P}) and ({P},)")
            used = ens.features_of_trees(range(s.tree_start, s.tree_stop))
            unknown = used[(owner[used] < 0) | ~np.isin(owner[used], sorted(paid))]
            if unknown.size:
                raise ModelFormatError(f"tree model: stage {k} splits on feature {int(unknown[0])}, which belongs "
                                       f"to no group computed by then")
        if nxt != ens.n_trees:
            raise ModelFormatError(f"tree model: the stages cover {nxt} of the {ens.n_trees} trees")

    # ------------------------------------------------------------------ prediction
    def staged_decision(self, X):
        """Yield the readout (n, P) of stages 0..K, carrying the state across stages.

        One pass evaluates every tree once, which is cheaper than asking `decision` per stage.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> [z.ravel().tolist() for z in model.staged_decision(np.array([[1.0, 0.0]]))]
        [[0.0], [2.0], [12.0]]
        """
        state = np.zeros((np.asarray(X).shape[0], self.ensemble.n_targets))
        for s in self.stages:
            if s.tree_stop > s.tree_start:
                state = state + self.ensemble.predict(X, range(s.tree_start, s.tree_stop))
            yield state @ s.W + s.b

    def decision(self, X, k: int) -> np.ndarray:
        """Readout of stage k (n, P).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> model.decision(np.array([[0.0, 0.0]]), 1).tolist()
        [[1.0]]
        """
        for j, z in enumerate(self.staged_decision(X)):
            if j == k:
                return z
        raise InputError(f"stage must be in 0..{len(self.stages) - 1}, got {k!r}")

    def predict(self, X, budget=None, stage=None) -> np.ndarray:
        """Prediction of a stage: values (identity link) or class probabilities (n, n_classes).

        Only the columns of the groups the stage requires must be finite; the others may be NaN
        (not extracted).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> model.predict(np.array([[1.0, np.nan]]), budget=1.0).tolist()  # group "b" not extracted
        [[2.0]]
        """
        k = self.resolve_stage(budget, stage)
        return self.apply_link(self.decision(self.check_rows(X, k), k))

    def check_rows(self, X, k: int) -> np.ndarray:
        """X as float64 (n, n_features), refused when a column stage k reads is NaN or Inf.

        Raises
        ------
        InputError
            On a wrong shape or a non-finite value in a column stage k needs.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> model.check_rows([[1.0, np.nan]], 1).dtype
        dtype('float64')
        >>> model.check_rows([[1.0, np.nan]], 2)
        Traceback (most recent call last):
        ...
        edgeseq.errors.InputError: X contains NaN or Inf in column(s) 1 that this stage uses; clean or impute them first
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.ensemble.n_features:
            raise InputError(f"X must have shape (n, {self.ensemble.n_features}), got {X.shape}")
        cols = self.prefix_columns(k)
        bad = cols[~np.isfinite(X[:, cols]).all(axis=0)] if cols.size else cols
        if bad.size:
            raise InputError(f"X contains NaN or Inf in column(s) {columns_text(bad, self.feature_names)} that this "
                             "stage uses; clean or impute them first")
        return X

    def apply_link(self, z: np.ndarray) -> np.ndarray:
        """Readout -> prediction: identity, or class probabilities (n, n_classes).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
        >>> ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
        ...                    right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3],
        ...                    target=[0, 0], n_features=2, n_targets=1)
        >>> one, zero = np.ones((1, 1)), np.zeros(1)
        >>> model = TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0],
        ...     ensemble=ens, stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
        ...                           TreeStage((1,), 2.0, 1, 2, one, zero)),
        ...     link="identity", output_names=("y",))
        >>> model.apply_link(np.array([[3.0]])).tolist()
        [[3.0]]
        """
        return apply_link(self.link, z)
