"""One ONNX graph per prefix: raw group features in, affine output (plus link for classifiers) out.

Contract (also in the README and the manifest):
* inputs: one float32 tensor per computed group, named by its sanitised `input_name`, shape
  [N, d_g], in sequence order; prefix 0 has no group, so it takes a single float32 input `n` of
  shape [N, 1] whose only job is to carry the batch size N (feed ``np.zeros((N, 1), np.float32)``;
  it is multiplied by a 1 x P zero weight, so any finite values give the intercept exactly).
  Format 1 exports used [N, 0] and a 0 x P weight; OpenVINO reads such zero-size tensors as
  scalars and cannot load them, hence format 2 (`prefix0_width` gives the width of either);
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

from edgeseq.format import BIAS_NAME, PREFIX0_INPUT, PREFIX0_WIDTH

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


def prefix_weight_blocks(seq, j: int) -> list[np.ndarray]:
    """Split coefs[j] (rows in sequence order) into one (d_g, P) block per computed group.

    The graph multiplies each group's input by its own block, so a device can feed the groups it has
    computed without concatenating them first.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.onnx_graphs import prefix_weight_blocks
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X @ [1.0, -2.0, 0.5]
    >>> seq = AnytimeRegressor([[0, 1], [2]], [1.0, 2.0]).fit(X, y).fitted_sequence_
    >>> [b.shape for b in prefix_weight_blocks(seq, 2)]
    [(2, 1), (1, 1)]
    """
    sizes = seq.group_sizes[seq.order[:j]]
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    return [seq.coefs[j][bounds[k]:bounds[k + 1]] for k in range(j)]


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


def build_prefix_graph(seq, j: int, input_names, *, model_name: str = "edgeseq",
                       batch_size: int | None = None, labels: str = "graph") -> onnx.ModelProto:
    """The ONNX model of prefix `j` of a FittedSequence.

    `input_names[g]` is the sanitised input name of ORIGINAL group index g (see names.onnx_input_names).
    `batch_size` fixes the first dimension of every input and output (default: symbolic "N"): mobile
    execution providers such as NNAPI and CoreML take no node of a graph with dynamic shapes.
    `labels="runtime"` leaves a classifier's ArgMax out (neither of them runs it): the graph ends at
    ``proba`` and the runtime picks the first most probable class.
    Weights are cast to float32 here; the caller checks overflow first (writer.check_float32).

    Parameters
    ----------
    seq : FittedSequence
    j : int
        Prefix index, 0..J (prefix 0 is the prior: an empty input and only a bias).
    input_names : list of str
        Sanitised input name of each original group.
    model_name : str
        Graph name stem.

    Returns
    -------
    onnx.ModelProto
        Inputs: one float32 tensor (N, d_g) per computed group; outputs ``y`` (and ``proba``, ``label``
        for classifiers).

    Examples
    --------
    The graph's output agrees with the fitted sequence's own prediction (up to float32):

    >>> import numpy as np, onnxruntime as ort
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.names import onnx_input_names
    >>> from edgeseq.export.onnx_graphs import build_prefix_graph
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X @ [1.0, -2.0, 0.5]
    >>> est = AnytimeRegressor([[0, 1], [2]], [1.0, 2.0], group_names=["a", "b"]).fit(X, y)
    >>> names = onnx_input_names(est.fitted_sequence_.group_names)
    >>> model = build_prefix_graph(est.fitted_sequence_, 1, names)
    >>> [i.name for i in model.graph.input]
    ['a']
    >>> sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    >>> out = sess.run(["y"], {"a": X[:5, :2].astype(np.float32)})[0]
    >>> bool(np.allclose(out[:, 0], est.predict(X[:5], prefix=1), atol=1e-5))
    True
    """
    seq._check_prefix(j)
    P = seq.n_outputs
    groups = [int(g) for g in seq.order[:j]]
    inits = [numpy_helper.from_array(seq.intercepts[j].astype(np.float32), BIAS_NAME)]
    if j == 0:
        inputs, prior_inits, terms = prefix0_parts(P, batch_size)
        inits += prior_inits
    else:
        inputs, terms = [], []
        for g, block in zip(groups, prefix_weight_blocks(seq, j)):
            name = input_names[g]
            inputs.append(tensor_input(name, block.shape[0], batch_size))
            inits.append(numpy_helper.from_array(block.astype(np.float32), weight_name(name)))
            terms.append((name, weight_name(name)))
    nodes, acc = affine_nodes(terms)
    nodes.append(helper.make_node("Add", [acc, BIAS_NAME], ["y"]))
    return finish_model(nodes, inputs, inits, P, seq.link, f"{model_name}_prefix_{j}",
                        f"edgeseq prefix {j} of {seq.n_prefixes - 1}: link {seq.link}", batch_size, labels=labels)


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


def read_prefix_weights(model: onnx.ModelProto, input_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(coef (d_j, P) float64 in input order, intercept (P,) float64) from a prefix graph's initializers.

    Used to check an export: the weights read back from the graph file must be the ones that were written.

    Raises
    ------
    ValueError
        The graph's inputs are not `input_names`.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.onnx_graphs import build_prefix_graph, read_prefix_weights
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X @ [1.0, -2.0, 0.5]
    >>> seq = AnytimeRegressor([[0, 1], [2]], [1.0, 2.0], group_names=["a", "b"]).fit(X, y).fitted_sequence_
    >>> coef, b = read_prefix_weights(build_prefix_graph(seq, 2, ["a", "b"]), ["a", "b"])
    >>> bool(np.allclose(coef, seq.coefs[2], rtol=1e-6)), bool(np.allclose(b, seq.intercepts[2], rtol=1e-6))
    (True, True)
    """
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
