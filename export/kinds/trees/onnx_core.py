"""Tree stages in core ONNX operators only (``--tree-ops core``): the GEMM form of a tree ensemble.

tract and OpenVINO have no ``ai.onnx.ml.TreeEnsembleRegressor`` and onnxruntime's mobile execution
providers leave it on the CPU; this form writes the same stage graphs (same inputs, outputs and
readout as `onnx_trees`) with the trees as a tensor program, the "GEMM strategy" of tree compilation,
in operators NNAPI and CoreML both run (MatMul, Sub, Mul, Clip, Relu, Reshape, Transpose, Squeeze,
Add: no Gather, comparison or Equal, which one of them lacks):

* ``MatMul`` with a one-hot selection matrix [F, T*I] picks, per internal node, the input column it
  splits on (T trees of the stage, each padded to I internal nodes; x * 1 plus zeros is x exactly);
* ``d = x - t`` against the float32 thresholds, scaled by 2^126 and clipped to [0, 1], then scaled
  by 2^23 and clipped again: 1 where ``x > t`` (goes right), 0 where ``x <= t`` (goes left) -- exactly the split of
  `TreeEnsemble.tree_outputs`, the C runtime and LightGBM: for finite float32 values ``x - t`` is 0
  only when they are equal and otherwise at least 2^-149 in magnitude, which the scaling takes to 1
  or beyond (an overflow to inf clips to 1 too). A runtime that flushes subnormals to zero would send
  x right of t only when ``x - t`` >= 2^-126, i.e. differ from the model within 1.2e-38 of a
  threshold; a NaN input gives NaN here and the stage's guard makes ``y`` NaN anyway;
* a batched ``MatMul`` with the path matrix [T, I, L] (+1 where the leaf lies right of the node, -1
  left of it, 0 off its path) gives, per leaf, the right turns taken minus the left turns refused;
  it equals the leaf's number of right turns R for exactly the reached leaf and is at most R - 1
  elsewhere, so ``Relu(turns - (R - 1))`` is the one-hot of the reached leaf;
* ``MatMul`` with the leaf values [T, L, 1] gives each tree's output, and a ``MatMul`` with the
  trees' one-hot targets [T, S] sums them into the state increment.

Every product is of 0, 1 or -1 with an exact float32 value and every count is a small integer, so the
leaf reached and its value are exact; only the summation order over trees differs from a sequential
sum (float32 rounding, well inside the 1e-5 `edgeseq verify` checks).

The tables hold each tree's internal nodes and its leaves in storage order, and `read_core_stage_trees`
rebuilds the tree stored splits first, then leaves (`splits_first`): the layout LightGBM imports
already have, so their C model is the same whichever form the graphs take, and the rebuilt model
regenerates byte-identical graphs (what `edgeseq verify` requires).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from edgeseq.format import STATE_IN, STATE_OUT
from edgeseq.export.kinds.trees.attributes import TREE_ATTRIBUTES, stage_tree_attributes

PREFIX = "trees/"
TABLES = ("select", "threshold", "path", "count", "leaf", "target")
# 2^126 * 2^23 = 2^149 takes the smallest float32 difference, 2^-149, to 1; two factors with a Clip
# between them, since 2^149 is no float32 and a runtime may fold two constant factors into one (tract does)
SCALES = (2.0 ** 126, 2.0 ** 23)


def _splits_and_leaves(ens, t: int) -> tuple[list, list]:
    """(internal nodes, leaves) of tree `t` as absolute indices, each in storage order."""
    a, b = ens.tree_range(t)
    split = ens.feature[a:b] >= 0
    return (a + np.flatnonzero(split)).tolist(), (a + np.flatnonzero(~split)).tolist()


def core_tables(model, k: int, remap: np.ndarray) -> dict:
    """The GEMM tables of stage `k`'s trees, split features remapped into its input columns by `remap`.

    Returns
    -------
    dict
        ``select`` float32 (F, T*I) one-hot columns (F: the stage's input width), ``threshold``
        float32 (T*I,), ``path`` float32 (T, I, L), ``count`` float32 (T, 1, L) (a leaf's right turns
        minus one), ``leaf`` float32 (T, L, 1), ``target`` float32 (T, S); I and L are the largest
        internal-node and leaf counts of a tree of the stage (I at least 1). Padded nodes split on
        column 0 and lie on no path; padded leaves need an impossible count and hold 0.

    Examples
    --------
    One stump: ``x <= 0.5`` goes to the leaf 1.0, else 2.0:

    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.onnx_core import core_tables
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> t = core_tables(model, 1, np.array([0]))
    >>> t["path"].tolist(), t["count"].tolist(), t["leaf"].ravel().tolist()
    ([[[-1.0, 1.0]]], [[[-1.0, 0.0]]], [1.0, 2.0])
    """
    stage_tree_attributes(model, k, remap)  # the one place that refuses a split on an uncomputed group
    ens, s = model.ensemble, model.stages[k]
    trees = list(range(s.tree_start, s.tree_stop))
    parts = [_splits_and_leaves(ens, t) for t in trees]
    T = len(trees)
    I = max([1] + [len(p[0]) for p in parts])
    L = max(len(p[1]) for p in parts)
    feature = np.zeros((T, I), np.int64)
    threshold = np.zeros((T, I), np.float32)
    path = np.zeros((T, I, L), np.float32)
    count = np.full((T, 1, L), I, np.float32)  # turns are at most 0 on a padded leaf: never reached
    leaf = np.zeros((T, L, 1), np.float32)
    target = np.zeros((T, ens.n_targets), np.float32)
    for j, (t, (inner, leaves)) in enumerate(zip(trees, parts)):
        target[j, int(ens.target[t])] = 1.0
        pos = {n: c for c, n in enumerate(inner)}
        lpos = {n: c for c, n in enumerate(leaves)}
        for c, n in enumerate(inner):
            feature[j, c] = remap[int(ens.feature[n])]
            threshold[j, c] = np.float32(ens.threshold[n])
        # walk down once: every leaf inherits its ancestors' turns
        stack = [(ens.tree_range(t)[0], [])]
        while stack:
            n, turns = stack.pop()
            if ens.feature[n] >= 0:
                stack += [(int(ens.left[n]), turns + [(pos[n], -1.0)]), (int(ens.right[n]), turns + [(pos[n], 1.0)])]
                continue
            c = lpos[n]
            for r, sign in turns:
                path[j, r, c] = sign
            count[j, 0, c] = sum(1 for _, sign in turns if sign > 0) - 1
            leaf[j, c, 0] = np.float32(ens.value[n])
    width = int(np.count_nonzero(remap >= 0))
    select = np.zeros((width, T * I), np.float32)
    select[feature.ravel(), np.arange(T * I)] = 1.0
    return {"select": select, "threshold": threshold.ravel(), "path": path, "count": count,
            "leaf": leaf, "target": target}


def core_increment_nodes(model, k: int, x: str, remap: np.ndarray) -> tuple[list, list]:
    """(nodes, initializers) computing ``state_out = state_in + trees(x)`` in core operators.

    Examples
    --------
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.onnx import feature_remap
    >>> from edgeseq.export.kinds.trees.onnx_core import core_increment_nodes
    >>> model = _demo_model()
    >>> nodes, inits = core_increment_nodes(model, 1, "x", feature_remap(model, 1))
    >>> sorted({n.op_type for n in nodes})
    ['Add', 'Clip', 'MatMul', 'Mul', 'Relu', 'Reshape', 'Squeeze', 'Sub', 'Transpose']
    """
    tab = core_tables(model, k, remap)
    T, I = tab["path"].shape[:2]
    inits = [numpy_helper.from_array(tab[name], PREFIX + name) for name in TABLES]
    inits += [numpy_helper.from_array(np.array([0, T, I], np.int64), PREFIX + "shape"),
              numpy_helper.from_array(np.array([2], np.int64), PREFIX + "axis"),
              numpy_helper.from_array(np.float32(SCALES[0]), PREFIX + "scale_hi"),
              numpy_helper.from_array(np.float32(SCALES[1]), PREFIX + "scale_lo"),
              numpy_helper.from_array(np.float32(0.0), PREFIX + "zero"),
              numpy_helper.from_array(np.float32(1.0), PREFIX + "one")]
    n = helper.make_node
    p = PREFIX
    nodes = [
        n("MatMul", [x, p + "select"], [p + "values"]),
        n("Sub", [p + "values", p + "threshold"], [p + "diff"]),
        n("Mul", [p + "diff", p + "scale_hi"], [p + "diff_hi"]),
        n("Clip", [p + "diff_hi", p + "zero", p + "one"], [p + "step_hi"]),
        n("Mul", [p + "step_hi", p + "scale_lo"], [p + "diff_lo"]),
        n("Clip", [p + "diff_lo", p + "zero", p + "one"], [p + "goes_right"]),
        n("Reshape", [p + "goes_right", p + "shape"], [p + "compare3"]),
        n("Transpose", [p + "compare3"], [p + "by_tree"], perm=[1, 0, 2]),
        n("MatMul", [p + "by_tree", p + "path"], [p + "turns"]),
        n("Sub", [p + "turns", p + "count"], [p + "excess"]),
        n("Relu", [p + "excess"], [p + "onehot"]),
        n("MatMul", [p + "onehot", p + "leaf"], [p + "tree_out3"]),
        n("Squeeze", [p + "tree_out3", p + "axis"], [p + "tree_out"]),
        n("Transpose", [p + "tree_out"], [p + "per_row"], perm=[1, 0]),
        n("MatMul", [p + "per_row", p + "target"], [p + "out"]),
        n("Add", [STATE_IN, p + "out"], [STATE_OUT]),
    ]
    return nodes, inits


def read_core_stage_trees(model_proto) -> dict | None:
    """The trees of a core-form stage graph as ``TreeEnsembleRegressor``-style attribute lists (None: none).

    The same shape of answer as `onnx_trees.read_stage_trees`, so `edgeseq verify` rebuilds its numpy
    reference from either form with one code path. Each tree is rebuilt from its path matrix: a
    node's left (right) child is the internal node whose leaves are exactly those left (right) of it,
    or the single leaf there; nodes are numbered splits first, then leaves, each in table order.

    Raises
    ------
    ValueError
        If the tables are not those of a set of binary trees.

    Examples
    --------
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.onnx import build_stage_graph, read_stage_trees
    >>> from edgeseq.export.kinds.trees.onnx_core import read_core_stage_trees
    >>> model = _demo_model()
    >>> core = read_core_stage_trees(build_stage_graph(model, 2, ["a", "c"], tree_ops="core"))
    >>> ml = read_stage_trees(build_stage_graph(model, 2, ["a", "c"]))
    >>> core == ml
    True
    """
    inits = {t.name[len(PREFIX):]: numpy_helper.to_array(t) for t in model_proto.graph.initializer
             if t.name.startswith(PREFIX)}
    if not inits:
        return None
    if any(name not in inits for name in TABLES):
        raise ValueError(f"a core-form stage graph holds the tables {sorted(inits)}, expected {list(TABLES)}")
    path, count, leaf, target = inits["path"], inits["count"], inits["leaf"], inits["target"]
    if path.ndim != 3 or count.shape != (path.shape[0], 1, path.shape[2]) or leaf.shape != (*path.shape[::2], 1):
        raise ValueError("the core-form tables have inconsistent shapes")
    T, I, L = path.shape
    select = inits["select"]
    if select.ndim != 2 or select.shape[1] != T * I or not np.all(np.isin(select, (0.0, 1.0))) \
            or np.any(select.sum(axis=0) != 1):
        raise ValueError("the selection matrix is not one-hot per split")
    feature, threshold = select.argmax(axis=0).reshape(T, I), inits["threshold"].reshape(T, I)
    if target.shape[0] != T or not np.all(np.isin(target, (0.0, 1.0))) or np.any(target.sum(axis=1) != 1):
        raise ValueError("each tree needs exactly one target")
    if not np.all(np.isin(path, (-1.0, 0.0, 1.0))):
        raise ValueError("a path matrix entry is not -1, 0 or 1")
    att = {"aggregate_function": "SUM", "n_targets": int(target.shape[1]), "post_transform": "NONE"}
    att |= {key: [] for key in TREE_ATTRIBUTES}
    for t in range(T):
        leaves = [c for c in range(L) if count[t, 0, c] < I]
        inner = [r for r in range(I) if np.any(path[t, r] != 0)]
        if len(leaves) != len(inner) + 1 or inner != list(range(len(inner))) or leaves != list(range(len(leaves))):
            raise ValueError(f"tree {t}: {len(inner)} splits and {len(leaves)} leaves do not form a binary tree")
        under = {r: frozenset(np.flatnonzero(path[t, r]).tolist()) for r in inner}
        by_set = {v: r for r, v in under.items()}

        def child(r, sign):
            side = frozenset(np.flatnonzero(path[t, r] == -sign).tolist())  # -1 marks the left side
            if len(side) == 1:
                return ("leaf", next(iter(side)))
            if side not in by_set:
                raise ValueError(f"tree {t}: node {r}'s {'left' if sign > 0 else 'right'} leaves are no subtree")
            return ("node", by_set[side])

        order = [("node", r) for r in inner] + [("leaf", c) for c in leaves]  # splits first, then leaves
        local = {item: i for i, item in enumerate(order)}
        for r in inner:  # the children of a split follow it (TreeEnsemble checks the rest: one tree)
            for sign in (1.0, -1.0):
                c = child(r, sign)
                if c not in local or (c[0] == "node" and c[1] <= r):
                    raise ValueError(f"tree {t}: node {r}'s children do not follow it")
        tgt = int(np.flatnonzero(target[t])[0])
        for item in order:
            i = local[item]
            att["nodes_treeids"].append(t)
            att["nodes_nodeids"].append(i)
            if item[0] == "node":
                r = item[1]
                att["nodes_featureids"].append(int(feature[t, r]))
                att["nodes_modes"].append("BRANCH_LEQ")
                att["nodes_values"].append(float(threshold[t, r]))
                att["nodes_truenodeids"].append(local[child(r, 1.0)])
                att["nodes_falsenodeids"].append(local[child(r, -1.0)])
            else:
                att["nodes_featureids"].append(0)
                att["nodes_modes"].append("LEAF")
                att["nodes_values"].append(0.0)
                att["nodes_truenodeids"].append(0)
                att["nodes_falsenodeids"].append(0)
                att["target_treeids"].append(t)
                att["target_nodeids"].append(i)
                att["target_ids"].append(tgt)
                att["target_weights"].append(float(leaf[t, item[1], 0]))
    return att


def splits_first(model):
    """`model` with every tree stored splits first, then leaves, each in their order (same predictions).

    The layout `read_core_stage_trees` rebuilds from a core-form graph; exporting the reordered model
    makes the C model and the graphs regenerable from what `edgeseq verify` reads back. LightGBM
    imports are stored this way already (then `model` itself is returned, so their C is the same
    whichever form the graphs take).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.onnx_core import splits_first
    >>> ens = TreeEnsemble(feature=[0, 0, -1, -1, -1], threshold=[0.5, 0.25, 0, 0, 0], left=[1, 2, -1, -1, -1],
    ...                    right=[4, 3, -1, -1, -1], value=[0, 0, 1.0, 2.0, 3.0], roots=[0], target=[0],
    ...                    n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> splits_first(model) is model
    True
    >>> ens = TreeEnsemble(feature=[0, -1, 0, -1, -1], threshold=[0.5, 0, 0.75, 0, 0], left=[1, -1, 3, -1, -1],
    ...                    right=[2, -1, 4, -1, -1], value=[0, 1.0, 0, 2.0, 3.0], roots=[0], target=[0],
    ...                    n_features=1, n_targets=1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> sf = splits_first(model)
    >>> sf.ensemble.feature.tolist(), sf.ensemble.left.tolist(), sf.ensemble.value.tolist()
    ([0, 0, -1, -1, -1], [2, 3, -1, -1, -1], [0.0, 0.0, 1.0, 2.0, 3.0])
    >>> X = np.array([[0.1], [0.6], [0.9]])
    >>> bool(np.array_equal(sf.predict(X), model.predict(X)))
    True
    """
    import dataclasses

    from edgeseq.forms.trees import TreeEnsemble

    ens = model.ensemble
    order = np.concatenate([np.concatenate(_splits_and_leaves(ens, t)) for t in range(ens.n_trees)] or
                           [np.zeros(0)]).astype(np.int64)
    if np.array_equal(order, np.arange(order.size)):
        return model
    new_of = np.empty_like(order)
    new_of[order] = np.arange(order.size)
    split = ens.feature[order] >= 0
    child = {name: np.where(split, new_of[np.where(split, getattr(ens, name)[order], 0)], -1)
             for name in ("left", "right")}
    new = TreeEnsemble(feature=ens.feature[order], threshold=ens.threshold[order], value=ens.value[order],
                       roots=new_of[ens.roots], target=ens.target, n_features=ens.n_features,
                       n_targets=ens.n_targets, **child)
    return dataclasses.replace(model, ensemble=new)
