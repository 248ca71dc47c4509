"""The affine kind's ONNX graphs: one graph per prefix, raw group features in, affine output (plus link) out.

Contract (also in the README and the manifest):
* inputs: one float32 tensor per computed group, named by its sanitised `input_name`, shape
  [N, d_g], in sequence order; prefix 0 has no group, so it takes a single float32 input `n` of
  shape [N, 1] whose only job is to carry the batch size N (feed ``np.zeros((N, 1), np.float32)``;
  it is multiplied by a 1 x P zero weight, so any finite values give the intercept exactly).
  Format 1 exports used [N, 0] and a 0 x P weight; OpenVINO reads such zero-size tensors as
  scalars and cannot load them, hence format 2 (`onnx_graphs.prefix0_width` gives the width of either);
* output `y` float32 [N, P] = sum_g x_g @ W_g + b (linear output / logits);
* classifiers also output `proba` float32 [N, n_classes] (sigmoid -> [1 - p, p]; softmax) and
  `label` int64 [N], the index into the manifest's `classes`.
Weights are stored per group as initializers `W/<input_name>` (d_g x P) and `b` (P,), which is what
`read_prefix_weights` (and so `reader.sequence_from_export`) reads back. The outputs, links, opset and
IR version come from the shared spine (`edgeseq.export.onnx_graphs.finish_model`).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgeseq.export.onnx_graphs import affine_nodes, finish_model, prefix0_parts, tensor_input, weight_name
from edgeseq.format import BIAS_NAME, PREFIX0_INPUT


def prefix_weight_blocks(seq, j: int) -> list[np.ndarray]:
    """Split coefs[j] (rows in sequence order) into one (d_g, P) block per computed group.

    The graph multiplies each group's input by its own block, so a device can feed the groups it has
    computed without concatenating them first.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.kinds.affine.onnx import prefix_weight_blocks
    >>> X = np.random.default_rng(0).normal(size=(100, 3)); y = X @ [1.0, -2.0, 0.5]
    >>> seq = AnytimeRegressor([[0, 1], [2]], [1.0, 2.0]).fit(X, y).fitted_sequence_
    >>> [b.shape for b in prefix_weight_blocks(seq, 2)]
    [(2, 1), (1, 1)]
    """
    sizes = seq.group_sizes[seq.order[:j]]
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    return [seq.coefs[j][bounds[k]:bounds[k + 1]] for k in range(j)]


def build_prefix_graph(seq, j: int, input_names, *, model_name: str = "edgeseq",
                       batch_size: int | None = None, labels: str = "graph") -> onnx.ModelProto:
    """The ONNX model of prefix `j` of a FittedSequence.

    `input_names[g]` is the sanitised input name of ORIGINAL group index g (see names.onnx_input_names).
    `batch_size` fixes the first dimension of every input and output (default: symbolic "N"): mobile
    execution providers such as NNAPI and CoreML take no node of a graph with dynamic shapes.
    `labels="runtime"` leaves a classifier's ArgMax out (neither of them runs it): the graph ends at
    ``proba`` and the runtime picks the first most probable class.
    Weights are cast to float32 here; the caller checks overflow first (`writer.check_float32`).

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
    >>> from edgeseq.export.kinds.affine.onnx import build_prefix_graph
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
    >>> from edgeseq.export.kinds.affine.onnx import build_prefix_graph, read_prefix_weights
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

