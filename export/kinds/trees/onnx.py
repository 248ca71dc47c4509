"""One ONNX graph per tree stage: the stage's trees add into the carried state, then the readout.

Contract (the manifest's ``stage_kind: "trees"``; see docs/export-format.md):

* stage 0 is the prior, built exactly like linear prefix 0 (`onnx_graphs.prefix0_parts`): input
  ``n`` [N, 1], output ``y`` = link(b_0) per row; its state is zero and is not an input or output;
* stage k >= 1 takes one float32 input per group required by stages 1..k, in that order and under
  the same sanitised names as linear graphs, then ``state_in`` [N, S]. Its trees are one
  ``ai.onnx.ml`` ``TreeEnsembleRegressor`` (ml opset 3, ``aggregate_function="SUM"``,
  ``n_targets=S``, ``BRANCH_LEQ`` on float32 thresholds) over the Concat of those inputs, with every
  split's feature index remapped into that concatenation; ``state_out = state_in + trees(x)``;
  then ``y = state_out @ W_k + guard + b_k`` and the link in core ops (``proba``, ``label`` for
  classifiers), where ``guard = inputs @ 0`` (a zero column) is 0 for finite inputs and NaN otherwise (a
  tree would route NaN silently; this way ``y`` is non-finite exactly when an input is, and a runtime
  checks one output, as for affine prefixes). Outputs in order: ``y``, [``proba``, ``label``],
  ``state_out``.

The remap is where "a stage reads only groups already computed" is proven for the device: a split on
a column outside the stage's groups has no position in the concatenation and is an ExportError here
(`TreeStageModel` already refuses such a model; this re-asserts it at the point that would break).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgeseq.errors import ExportError
from edgeseq.format import BIAS_NAME, STATE_IN, STATE_OUT
from edgeseq.export.onnx_graphs import (OPSET, affine_nodes, finish_model, prefix0_parts, tensor_input,
                                        weight_name)
from edgeseq.export.kinds.trees.onnx_core import core_increment_nodes, read_core_stage_trees
from edgeseq.export.kinds.trees.attributes import TREE_ATTRIBUTES, feature_remap, stage_tree_attributes  # noqa: F401

ML_DOMAIN = "ai.onnx.ml"
ML_OPSET = 3  # what older phone runtimes have
READOUT = weight_name("state")  # the readout weight W_k (S x P)
TREES_NODE = "trees"
TREE_OPS = ("ai-onnx-ml", "core")  # how a stage's trees are written; the first is the default
def _increment_nodes(model, k: int, x: str | None, tree_ops: str = "ai-onnx-ml") -> tuple[list, list]:
    """(nodes, initializers) computing ``state_out`` from ``state_in`` and the stage's trees over the stage input `x`."""
    s, S = model.stages[k], model.ensemble.n_targets
    if s.tree_stop == s.tree_start:
        return [helper.make_node("Identity", [STATE_IN], [STATE_OUT])], []
    if x is None:  # no group computed yet: every tree is a single leaf (TreeStageModel checked it),
        raise ExportError(f"stage {k} holds trees but no group is computed by then; fold its constant "
                          f"leaves into the readout bias instead")  # and a TreeEnsembleRegressor needs an X
    if tree_ops == "core":
        return core_increment_nodes(model, k, x, feature_remap(model, k))
    att = stage_tree_attributes(model, k, feature_remap(model, k))
    return [helper.make_node("TreeEnsembleRegressor", [x], ["trees/out"], name=TREES_NODE, domain=ML_DOMAIN,
                             n_targets=S, aggregate_function="SUM", post_transform="NONE", **att),
            helper.make_node("Add", [STATE_IN, "trees/out"], [STATE_OUT])], []


def _guard_nodes(x: str, width: int) -> tuple[list, list]:
    """``guard`` [N, 1] = x @ 0: 0 for finite rows, NaN when any input value is NaN or ±Inf (IEEE: 0·NaN
    and 0·Inf are NaN, and a NaN term makes the sum NaN; onnxruntime's CPU kernels keep that).

    A tree routes NaN down a branch like any number, so without this a non-finite input could give a
    finite, wrong prediction. Added to the readout, it makes ``y`` non-finite exactly when an input
    is, so a runtime checks one output (as for affine prefixes) instead of every input. A MatMul, not
    Mul + ReduceSum, because NNAPI and CoreML run MatMul but NNAPI has no ReduceSum.
    """
    inits = [numpy_helper.from_array(np.zeros((width, 1), np.float32), "guard/zero")]
    return [helper.make_node("MatMul", [x, "guard/zero"], ["guard"])], inits


def build_stage_graph(model, k: int, input_names, *, model_name: str = "edgeseq",
                      batch_size: int | None = None, labels: str = "graph",
                      tree_ops: str = "ai-onnx-ml") -> onnx.ModelProto:
    """The ONNX model of stage `k` of a TreeStageModel (see the module docstring for the contract).

    Parameters
    ----------
    model : TreeStageModel
    k : int
        Stage index, 0..K.
    input_names : list of str
        Sanitised ONNX input name of each original group.
    model_name : str
        Graph name stem.
    batch_size : int, optional
        Fix the first dimension of every input and output (default symbolic ``N``).
    labels : {"graph", "runtime"}
        "runtime" leaves a classifier's ArgMax out (mobile execution providers run none).
    tree_ops : {"ai-onnx-ml", "core"}, default="ai-onnx-ml"
        How the trees are written: one ``ai.onnx.ml`` TreeEnsembleRegressor, or core operators only
        (`edgeseq.export.kinds.trees.onnx_core`) for runtimes without the ML domain (tract, OpenVINO,
        mobile execution providers).

    Returns
    -------
    onnx.ModelProto

    Raises
    ------
    ExportError
        If a tree reads a group not computed by stage k.

    Examples
    --------
    Two groups, one tree per paid stage; stage 2's graph reads both groups and the carried state:

    >>> import numpy as np, onnxruntime as ort
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.onnx import build_stage_graph
    >>> ens = TreeEnsemble(feature=[0, -1, -1, 1, -1, -1], threshold=[0.5, 0, 0, 0.0, 0, 0],
    ...                    left=[1, -1, -1, 4, -1, -1], right=[2, -1, -1, 5, -1, -1],
    ...                    value=[0, 1.0, 2.0, 0, 10.0, 20.0], roots=[0, 3], target=[0, 0], n_features=2, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a", "b"), ([0], [1]), [1.0, 2.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
    ...      TreeStage((1,), 2.0, 1, 2, one, zero)), "identity", ("y",))
    >>> g = build_stage_graph(model, 2, ["a", "c"])
    >>> [i.name for i in g.graph.input], [o.name for o in g.graph.output]
    (['a', 'c', 'state_in'], ['y', 'state_out'])
    >>> sess = ort.InferenceSession(g.SerializeToString(), providers=["CPUExecutionProvider"])
    >>> X = np.array([[0.5, 0.0], [0.7, 1.0]], np.float32)
    >>> y, state = sess.run(None, {"a": X[:, :1], "c": X[:, 1:], "state_in": np.array([[1.0], [2.0]], np.float32)})
    >>> y.ravel().tolist(), model.predict(X, stage=2).ravel().tolist()   # the state fed in is stage 1's
    ([11.0, 22.0], [11.0, 22.0])
    """
    s, S, P = model.stages[k], model.ensemble.n_targets, model.n_outputs
    inits = [numpy_helper.from_array(s.b.astype(np.float32), BIAS_NAME)]
    if k == 0:
        inputs, prior_inits, terms = prefix0_parts(P, batch_size)
        inits += prior_inits
        nodes, acc = affine_nodes(terms)
        if tree_ops == "core":  # n [N, 1] * W [1, P] is n @ W; onnxruntime fuses MatMul + Add into one Gemm,
            nodes[0].op_type = "Mul"  # leaving no inner value, and its mobile usability checker then fails
        extra, opsets = (), (("", OPSET),)
    else:
        names = [input_names[g] for g in model.groups_required(k)]
        inputs = [tensor_input(n, model.group_columns[g].size, batch_size)
                  for n, g in zip(names, model.groups_required(k))]
        inputs.append(tensor_input(STATE_IN, S, batch_size))
        inits.append(numpy_helper.from_array(s.W.astype(np.float32), READOUT))
        nodes, x = [], names[0] if names else None
        if len(names) > 1:
            nodes.append(helper.make_node("Concat", names, ["x"], axis=1))
            x = "x"
        tree_nodes, tree_inits = _increment_nodes(model, k, x, tree_ops)
        nodes += tree_nodes
        inits += tree_inits
        nodes.append(helper.make_node("MatMul", [STATE_OUT, READOUT], ["readout"]))
        acc = "readout"
        if x is not None:
            guard, guard_inits = _guard_nodes(x, sum(model.group_columns[g].size for g in model.groups_required(k)))
            nodes += guard + [helper.make_node("Add", ["readout", "guard"], ["readout/guarded"])]
            inits += guard_inits
            acc = "readout/guarded"
        extra = (tensor_input(STATE_OUT, S, batch_size),)
        opsets = (("", OPSET),) if tree_ops == "core" else (("", OPSET), (ML_DOMAIN, ML_OPSET))
    nodes.append(helper.make_node("Add", [acc, BIAS_NAME], ["y"]))
    n_trees = s.tree_stop - s.tree_start
    return finish_model(nodes, inputs, inits, P, model.link, f"{model_name}_stage_{k}",
                        f"edgeseq tree stage {k} of {len(model.stages) - 1}: {n_trees} trees, link {model.link}",
                        batch_size, extra_outputs=extra, opsets=opsets, labels=labels)


def stage_facts(model, k: int) -> dict:
    """Sizes of stage k for the manifest: trees, nodes and the deepest tree's depth.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.onnx import stage_facts
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> stage_facts(model, 0), stage_facts(model, 1)
    ({'n_trees': 0, 'n_nodes': 0, 'max_depth': 0}, {'n_trees': 1, 'n_nodes': 3, 'max_depth': 1})
    """
    s, ens = model.stages[k], model.ensemble
    trees = range(s.tree_start, s.tree_stop)
    nodes = sum(ens.tree_range(t)[1] - ens.tree_range(t)[0] for t in trees)
    depth = max((int(ens.depth[t]) for t in trees), default=0)
    return {"n_trees": len(trees), "n_nodes": int(nodes), "max_depth": depth}


def read_stage_trees(model_proto: onnx.ModelProto) -> dict | None:
    """The TreeEnsembleRegressor attributes of a stage graph as plain lists (None: no trees).

    A core-form graph (``--tree-ops core``) is read by `onnx_trees_core.read_core_stage_trees`, which
    answers with the same attributes.

    What `edgeseq verify` rebuilds its numpy reference from: the trees as the file holds them.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.onnx import build_stage_graph, read_stage_trees
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> read_stage_trees(build_stage_graph(model, 1, ["a"]))["nodes_values"]
    [0.5, 0.0, 0.0]
    >>> read_stage_trees(build_stage_graph(model, 0, ["a"])) is None
    True
    """
    found = [n for n in model_proto.graph.node if n.op_type == "TreeEnsembleRegressor"]
    if not found:
        return read_core_stage_trees(model_proto)  # the core form, or no trees at all
    if len(found) > 1 or found[0].domain != ML_DOMAIN:
        raise ValueError("a stage graph holds exactly one ai.onnx.ml TreeEnsembleRegressor")
    return {a.name: _plain(helper.get_attribute_value(a)) for a in found[0].attribute}


def _plain(value):
    """An attribute value with its bytes (ONNX strings) decoded."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value


def read_readout(model_proto: onnx.ModelProto) -> tuple[np.ndarray | None, np.ndarray]:
    """(W (S, P) or None for stage 0, b (P,)) as float64 from a stage graph's initializers.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.onnx import build_stage_graph, read_readout
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero + 0.25), TreeStage((0,), 1.0, 0, 1, 2 * one, zero)),
    ...     "identity", ("y",))
    >>> W, b = read_readout(build_stage_graph(model, 1, ["a"]))
    >>> W.tolist(), b.tolist(), read_readout(build_stage_graph(model, 0, ["a"]))[1].tolist()
    ([[2.0]], [0.0], [0.25])
    """
    if any(t.data_location == TensorProto.EXTERNAL for t in model_proto.graph.initializer):
        raise ValueError("an initializer refers to external data; edgeseq graphs hold their weights inline")
    inits = {t.name: numpy_helper.to_array(t) for t in model_proto.graph.initializer}
    W = inits.get(READOUT)
    return (None if W is None else W.astype(np.float64)), inits[BIAS_NAME].astype(np.float64)
