"""The ONNX spine every stage kind builds on: inputs, the affine sum, the prior, outputs and links.

A kind's graph builder (`kinds.affine.onnx.build_prefix_graph`, the trees' and layer blocks' `onnx`
modules) assembles its own nodes from these parts and ends with `finish_model`, which adds the outputs
every kind shares: output `y` float32 [N, P] (linear output / logits) and, for classifiers, ``proba``
float32 [N, n_classes] (sigmoid -> [1 - p, p]; softmax) and ``label`` int64 [N], the index into the
manifest's `classes`. Prefix or stage 0 is the prior (`prefix0_parts`): a single float32 input `n` of
shape [N, 1] that only carries the batch size N, multiplied by a 1 x P zero weight. Format 1 exports
used [N, 0] and a 0 x P weight; OpenVINO reads such zero-size tensors as scalars and cannot load them,
hence format 2 (`prefix0_width` gives the width of either).
Only core-domain ops (MatMul, Add, Sigmoid, Sub, Concat, Softmax, ArgMax), with opset and IR version
pinned so the pinned onnxruntime loads every graph. Weight initializers are named `W/<input_name>`
(`weight_name`).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgeseq.format import PREFIX0_INPUT, PREFIX0_WIDTH

OPSET = 17
IR_VERSION = 10  # onnx 1.23 writes IR 14 by default; onnxruntime 1.31 loads <= 13


def weight_name(input_name: str) -> str:
    """Initializer name of a group's weight block (no group input can contain '/').

    Examples
    --------
    >>> from edgeseq.export.onnx_graphs import weight_name
    >>> weight_name("color")
    'W/color'
    """
    return f"W/{input_name}"


def prefix0_width(format_version: int) -> int:
    """Columns of prefix 0's batch-carrying input `n` in an export of this format version.

    Format 1 used a zero-width input, which some runtimes (OpenVINO) cannot load; readers of both
    formats feed the width the graph declares.

    Examples
    --------
    >>> prefix0_width(1), prefix0_width(2)
    (0, 1)
    """
    return 0 if format_version == 1 else PREFIX0_WIDTH


def _batch_dim(batch_size):
    """The first dimension of every input and output: symbolic "N", or a fixed size (see build_prefix_graph)."""
    return "N" if batch_size is None else int(batch_size)


def tensor_input(name: str, d: int, batch_size=None):
    """A float32 graph input (or output) [N, d], N symbolic or fixed by `batch_size`.

    Examples
    --------
    >>> from edgeseq.export.onnx_graphs import tensor_input
    >>> [d.dim_param or d.dim_value for d in tensor_input("a", 3).type.tensor_type.shape.dim]
    ['N', 3]
    """
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [_batch_dim(batch_size), int(d)])


LABELS = ("graph", "runtime")  # where a classifier's label is chosen: an in-graph ArgMax, or the runtime


def _link_nodes(link: str, n_classes: int, batch_size=None, labels: str = "graph") -> tuple[list, list]:
    """Nodes and outputs that turn `y` into `proba` (and `label`, unless the runtime picks it) for classifiers."""
    if link == "identity":
        return [], []
    if link == "sigmoid":
        nodes = [
            helper.make_node("Sigmoid", ["y"], ["link/p1"]),
            helper.make_node("Sub", ["link/one", "link/p1"], ["link/p0"]),
            helper.make_node("Concat", ["link/p0", "link/p1"], ["proba"], axis=1),
        ]
    else:
        nodes = [helper.make_node("Softmax", ["y"], ["proba"], axis=1)]
    n = _batch_dim(batch_size)
    outputs = [helper.make_tensor_value_info("proba", TensorProto.FLOAT, [n, n_classes])]
    if labels == "graph":  # NNAPI and CoreML run no ArgMax: with "runtime" the graph ends at proba
        nodes.append(helper.make_node("ArgMax", ["proba"], ["label"], axis=1, keepdims=0))
        outputs.append(helper.make_tensor_value_info("label", TensorProto.INT64, [n]))
    return nodes, outputs


def prefix0_parts(P: int, batch_size=None) -> tuple[list, list, list]:
    """Prefix 0's input `n` ([N, 1]), its zero weight and the one (input, weight) term to multiply.

    Shared by every graph that predicts without any group (linear prefix 0, tree stage 0): the
    zero weight times the batch-carrying input gives N rows of the bias.

    Examples
    --------
    >>> from edgeseq.export.onnx_graphs import prefix0_parts
    >>> inputs, inits, terms = prefix0_parts(3)
    >>> [i.name for i in inputs], [t.name for t in inits], terms
    (['n'], ['W/n'], [('n', 'W/n')])
    """
    inputs = [tensor_input(PREFIX0_INPUT, PREFIX0_WIDTH, batch_size)]
    inits = [numpy_helper.from_array(np.zeros((PREFIX0_WIDTH, P), np.float32), weight_name(PREFIX0_INPUT))]
    return inputs, inits, [(PREFIX0_INPUT, weight_name(PREFIX0_INPUT))]


def affine_nodes(terms) -> tuple[list, str]:
    """MatMul of every (input, weight) term, summed left to right; returns the nodes and the sum's name.

    Examples
    --------
    >>> from edgeseq.export.onnx_graphs import affine_nodes
    >>> nodes, acc = affine_nodes([("a", "W/a"), ("b", "W/b")])
    >>> [n.op_type for n in nodes], acc
    (['MatMul', 'MatMul', 'Add'], 'sum/1')
    """
    nodes, acc = [], None
    for k, (x, w) in enumerate(terms):
        out = f"mm/{k}"
        nodes.append(helper.make_node("MatMul", [x, w], [out]))
        if acc is not None:
            nodes.append(helper.make_node("Add", [acc, out], [f"sum/{k}"]))
            out = f"sum/{k}"
        acc = out
    return nodes, acc


def finish_model(nodes, inputs, inits, P: int, link: str, graph_name: str, doc: str, batch_size=None,
                 extra_outputs=(), opsets=(("", OPSET),), labels: str = "graph") -> onnx.ModelProto:
    """The model around `nodes`, which must compute ``y`` [N, P]: link outputs, pinned IR and opsets.

    One place decides the outputs (``y``, then ``proba`` and, unless `labels` is "runtime", ``label``
    for classifiers, then `extra_outputs`), the IR version and the opset imports, so linear prefixes and tree stages
    cannot drift apart.

    Examples
    --------
    >>> import numpy as np, onnx
    >>> from onnx import helper, numpy_helper
    >>> from edgeseq.export.onnx_graphs import finish_model, prefix0_parts, affine_nodes
    >>> inputs, inits, terms = prefix0_parts(1)
    >>> nodes, acc = affine_nodes(terms)
    >>> nodes.append(helper.make_node("Add", [acc, "b"], ["y"]))
    >>> inits.append(numpy_helper.from_array(np.zeros(1, np.float32), "b"))
    >>> m = finish_model(nodes, inputs, inits, 1, "sigmoid", "demo", "a prior")
    >>> onnx.checker.check_model(m, full_check=True)
    >>> [o.name for o in m.graph.output], m.ir_version
    (['y', 'proba', 'label'], 10)
    >>> m = finish_model(nodes, inputs, inits, 1, "sigmoid", "demo", "a prior", labels="runtime")
    >>> [o.name for o in m.graph.output], "ArgMax" in [n.op_type for n in m.graph.node]
    (['y', 'proba'], False)
    """
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [_batch_dim(batch_size), P])]
    n_classes = 2 if link == "sigmoid" else P
    link_nodes, link_outputs = _link_nodes(link, n_classes, batch_size, labels)
    if link == "sigmoid":
        inits.append(numpy_helper.from_array(np.ones((1,), np.float32), "link/one"))
    graph = helper.make_graph(nodes + link_nodes, graph_name, inputs, outputs + link_outputs + list(extra_outputs),
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                              ir_version=IR_VERSION, producer_name="edgeseq")
    model.doc_string = doc
    return model


