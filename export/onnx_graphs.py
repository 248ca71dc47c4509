"""One ONNX graph per prefix: raw group features in, affine output (plus link for classifiers) out.

Contract (also in the README and the manifest):
* inputs: one float32 tensor per computed group, named by its sanitised `input_name`, shape
  [N, d_g], in sequence order; prefix 0 has no group, so it takes a single float32 input `n` of
  shape [N, 0] whose only job is to carry the batch size N (feed ``np.zeros((N, 0), np.float32)``);
* output `y` float32 [N, P] = sum_g x_g @ W_g + b (linear output / logits);
* classifiers also output `proba` float32 [N, n_classes] (sigmoid -> [1 - p, p]; softmax) and
  `label` int64 [N], the index into the manifest's `classes`.
Only core-domain ops (MatMul, Add, Sigmoid, Sub, Concat, Softmax, ArgMax), with opset and IR version
pinned so the pinned onnxruntime loads every graph. Weights are stored per group as initializers
`W/<input_name>` (d_g x P) and `b` (P,), which is what `sequence_from_export` reads back.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 10  # onnx 1.23 writes IR 14 by default; onnxruntime 1.31 loads <= 13
PREFIX0_INPUT = "n"
BIAS_NAME = "b"


def weight_name(input_name: str) -> str:
    """Initializer name of a group's weight block (no group input can contain '/')."""
    return f"W/{input_name}"


def prefix_weight_blocks(seq, j: int) -> list[np.ndarray]:
    """Split coefs[j] (rows in sequence order) into one (d_g, P) block per computed group."""
    sizes = seq.group_sizes[seq.order[:j]]
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    return [seq.coefs[j][bounds[k]:bounds[k + 1]] for k in range(j)]


def _tensor_input(name: str, d: int):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", int(d)])


def _link_nodes(link: str, n_classes: int) -> tuple[list, list]:
    """Nodes and outputs that turn `y` into `proba` and `label` for classifiers."""
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
    nodes.append(helper.make_node("ArgMax", ["proba"], ["label"], axis=1, keepdims=0))
    outputs = [helper.make_tensor_value_info("proba", TensorProto.FLOAT, ["N", n_classes]),
               helper.make_tensor_value_info("label", TensorProto.INT64, ["N"])]
    return nodes, outputs


def build_prefix_graph(seq, j: int, input_names, *, model_name: str = "edgeseq") -> onnx.ModelProto:
    """The ONNX model of prefix `j` of a FittedSequence.

    `input_names[g]` is the sanitised input name of ORIGINAL group index g (see names.onnx_input_names).
    Weights are cast to float32 here; the caller checks overflow first (writer.check_float32).
    """
    seq._check_prefix(j)
    P = seq.n_outputs
    groups = [int(g) for g in seq.order[:j]]
    inits = [numpy_helper.from_array(seq.intercepts[j].astype(np.float32), BIAS_NAME)]
    nodes = []
    if j == 0:
        inputs = [_tensor_input(PREFIX0_INPUT, 0)]
        inits.append(numpy_helper.from_array(np.zeros((0, P), np.float32), weight_name(PREFIX0_INPUT)))
        terms = [(PREFIX0_INPUT, weight_name(PREFIX0_INPUT))]
    else:
        inputs, terms = [], []
        for g, block in zip(groups, prefix_weight_blocks(seq, j)):
            name = input_names[g]
            inputs.append(_tensor_input(name, block.shape[0]))
            inits.append(numpy_helper.from_array(block.astype(np.float32), weight_name(name)))
            terms.append((name, weight_name(name)))
    acc = None
    for k, (x, w) in enumerate(terms):
        out = f"mm/{k}"
        nodes.append(helper.make_node("MatMul", [x, w], [out]))
        if acc is not None:
            nodes.append(helper.make_node("Add", [acc, out], [f"sum/{k}"]))
            out = f"sum/{k}"
        acc = out
    nodes.append(helper.make_node("Add", [acc, BIAS_NAME], ["y"]))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", P])]
    n_classes = 2 if seq.link == "sigmoid" else P
    link_nodes, link_outputs = _link_nodes(seq.link, n_classes)
    if seq.link == "sigmoid":
        inits.append(numpy_helper.from_array(np.ones((1,), np.float32), "link/one"))
    graph = helper.make_graph(nodes + link_nodes, f"{model_name}_prefix_{j}", inputs,
                              outputs + link_outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=IR_VERSION, producer_name="edgeseq")
    model.doc_string = f"edgeseq prefix {j} of {seq.n_prefixes - 1}: link {seq.link}"
    return model


def read_prefix_weights(model: onnx.ModelProto, input_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(coef (d_j, P) float64 in input order, intercept (P,) float64) from a prefix graph's initializers."""
    got = [i.name for i in model.graph.input]
    if got != list(input_names):
        raise ValueError(f"graph inputs are {got}, the manifest says {list(input_names)}")
    if any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer):
        raise ValueError("an initializer refers to external data; edgeseq graphs hold their weights inline")
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    blocks = [inits[weight_name(n)] for n in input_names if n != PREFIX0_INPUT]
    b = inits[BIAS_NAME].astype(np.float64)
    if not blocks:
        return np.zeros((0, b.shape[0])), b
    return np.concatenate(blocks, axis=0).astype(np.float64), b
