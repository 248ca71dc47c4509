"""The attribute tables of a tree stage, shared by both ONNX forms of tree stages.

`onnx_trees` writes them into an ``ai.onnx.ml`` ``TreeEnsembleRegressor``; `onnx_trees_core` builds
its selection, path and leaf matrices from the same lists, and reads a core graph back into them.
Keeping them here, below both, is what lets each form import the other's reader without a cycle.
"""

from __future__ import annotations

import numpy as np

from edgeseq.errors import ExportError

TREE_ATTRIBUTES = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
                   "nodes_truenodeids", "nodes_falsenodeids", "target_treeids", "target_nodeids", "target_ids",
                   "target_weights")  # the per-node and per-leaf attribute lists of a TreeEnsembleRegressor


def feature_remap(model, k: int) -> np.ndarray:
    """Raw feature index -> column of stage k's concatenated inputs (-1: not computed by then).

    Examples
    --------
    Groups "a" (raw column 1) and "b" (raw column 0); stage 1 requires "a", stage 2 "b":

    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.attributes import feature_remap
    >>> ens = TreeEnsemble(feature=[1, -1, -1, 0, -1, -1], threshold=[0.5, 0, 0, 0.0, 0, 0],
    ...                    left=[1, -1, -1, 4, -1, -1], right=[2, -1, -1, 5, -1, -1],
    ...                    value=[0, 1.0, 2.0, 0, 10.0, 20.0], roots=[0, 3], target=[0, 0], n_features=2, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a", "b"), ([1], [0]), [1.0, 2.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
    ...      TreeStage((1,), 2.0, 1, 2, one, zero)), "identity", ("y",))
    >>> feature_remap(model, 1).tolist(), feature_remap(model, 2).tolist()
    ([-1, 0], [1, 0])
    """
    remap = np.full(model.ensemble.n_features, -1, dtype=np.int64)
    offset = 0
    for g in model.groups_required(k):
        cols = model.group_columns[g]
        remap[cols] = offset + np.arange(cols.size)
        offset += cols.size
    return remap


def stage_tree_attributes(model, k: int, remap: np.ndarray) -> dict:
    """The TreeEnsembleRegressor attributes of stage k's trees, features remapped with `remap`.

    Node ids are local to each tree (its nodes in storage order); leaves carry one target entry each
    (the tree's state dimension, the leaf value rounded to float32).

    Raises
    ------
    ExportError
        If a split reads a column `remap` has no position for (a group not computed by stage k).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.attributes import feature_remap, stage_tree_attributes
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> att = stage_tree_attributes(model, 1, feature_remap(model, 1))
    >>> att["nodes_modes"], att["nodes_truenodeids"], att["target_weights"]
    (['BRANCH_LEQ', 'LEAF', 'LEAF'], [1, 0, 0], [1.0, 2.0])
    >>> stage_tree_attributes(model, 1, np.array([-1]))
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: stage 1: tree 0 splits on raw feature 0, which belongs to no group computed by then...
    """
    ens, s = model.ensemble, model.stages[k]
    att = {key: [] for key in TREE_ATTRIBUTES}
    for local, t in enumerate(range(s.tree_start, s.tree_stop)):
        a, b = ens.tree_range(t)
        feat = ens.feature[a:b].astype(np.int64)
        split = feat >= 0
        cols = remap[np.where(split, feat, 0)]
        if np.any(split & (cols < 0)):
            bad = int(feat[np.flatnonzero(split & (cols < 0))[0]])
            raise ExportError(f"stage {k}: tree {t} splits on raw feature {bad}, which belongs to no group "
                              f"computed by then; the model cannot be exported")
        n = b - a
        att["nodes_treeids"] += [local] * n
        att["nodes_nodeids"] += list(range(n))
        att["nodes_featureids"] += np.where(split, cols, 0).tolist()
        att["nodes_modes"] += ["BRANCH_LEQ" if sp else "LEAF" for sp in split.tolist()]
        att["nodes_values"] += np.where(split, ens.threshold[a:b], 0).astype(np.float32).tolist()
        att["nodes_truenodeids"] += np.where(split, ens.left[a:b] - a, 0).tolist()
        att["nodes_falsenodeids"] += np.where(split, ens.right[a:b] - a, 0).tolist()
        leaves = np.flatnonzero(~split)
        att["target_treeids"] += [local] * leaves.size
        att["target_nodeids"] += leaves.tolist()
        att["target_ids"] += [int(ens.target[t])] * leaves.size
        att["target_weights"] += ens.value[a:b][leaves].astype(np.float32).tolist()
    return att
