"""One ONNX graph per layer-block stage: conv branches and the dense block over the carried state.

Contract (a function of the intermediate form `LayerBlockModel`; not yet part of `export_model`):

* stage 0 is the prior, built exactly like linear prefix 0 and tree stage 0: input ``n`` [N, 1],
  output ``y`` = c_0 per row (and the link's outputs); no state;
* stage k >= 1 takes one float32 input [N, d_g] per group it *reads* (for a plain network the group
  it pays for; an ensemble member may re-read a group paid earlier), in extraction order and under
  the caller's sanitised names, then ``state_in`` [N, S_{k−1}] unless the stage ignores the state
  (stage 1 and every reset stage). A flat group enters ``MatMul``; a windowed group is reshaped to
  [N, C, L] (its columns are channel-major, which is NCW) and runs ``Conv`` (1-D, no padding),
  ``Relu``, ``MaxPool``/``AveragePool`` (floor mode) and a ``Reshape`` to [N, F] before its ``MatMul``. The
  terms are summed with the bias and pass a ``Relu``, whose output is ``state_out`` [N, H_k]; then
  ``y = state_out @ V_k + c_k`` and the link in core ops (``proba``, ``label`` for classifiers).
  Outputs in order: ``y``, [``proba``, ``label``], ``state_out``.

Only core operators at opset 17, IR version 10 (`onnx_graphs.finish_model`), so the graphs run in
onnxruntime and in the ONNX reference evaluator alike.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edgeseq.errors import ExportError
from edgeseq.format import BIAS_NAME, STATE_IN, STATE_OUT
from edgeseq.export.onnx_graphs import affine_nodes, finish_model, prefix0_parts, tensor_input

POOL_OPS = {"max": "MaxPool", "avg": "AveragePool"}


def stage_inputs(model, k: int) -> list[int]:
    """Groups stage k reads, in extraction order (the order of its graph's group inputs).

    Examples
    --------
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> from edgeseq.export.kinds.layer_blocks.onnx import stage_inputs
    >>> [stage_inputs(_example_model(), k) for k in range(3)]
    [[], [0], [1]]
    """
    if k == 0:
        return []
    read = {inj.group for inj in model.stages[k].injections}
    return [g for g in model.groups_required(k) if g in read]


def _injection_nodes(inj, x: str, tag: str) -> tuple[list, list, str]:
    """Nodes and initializers turning group input `x` into the term fed to the MatMul with U; returns its name."""
    br = inj.conv
    if br is None:
        return [], [], x
    inits = [numpy_helper.from_array(np.array([-1, br.channels, br.length], np.int64), f"{tag}/shape"),
             numpy_helper.from_array(br.W.astype(np.float32), f"{tag}/conv_w"),
             numpy_helper.from_array(br.b.astype(np.float32), f"{tag}/conv_b")]
    nodes = [helper.make_node("Reshape", [x, f"{tag}/shape"], [f"{tag}/ncw"]),
             helper.make_node("Conv", [f"{tag}/ncw", f"{tag}/conv_w", f"{tag}/conv_b"], [f"{tag}/conv"],
                              kernel_shape=[br.kernel], strides=[br.stride]),
             helper.make_node("Relu", [f"{tag}/conv"], [f"{tag}/relu"])]
    last = f"{tag}/relu"
    if br.pool != "none":
        nodes.append(helper.make_node(POOL_OPS[br.pool], [last], [f"{tag}/pool"], kernel_shape=[br.pool_size],
                                      strides=[br.pool_size]))
        last = f"{tag}/pool"
    # back to [N, F] channel-major by Reshape, not Flatten: CoreML's ML Program takes no Flatten
    inits.append(numpy_helper.from_array(np.array([-1, br.out_width], np.int64), f"{tag}/flat_shape"))
    nodes.append(helper.make_node("Reshape", [last, f"{tag}/flat_shape"], [f"{tag}/flat"]))
    return nodes, inits, f"{tag}/flat"


def build_layer_block_graph(model, k: int, input_names, *, model_name: str = "edgeseq",
                            batch_size: int | None = None, labels: str = "graph") -> onnx.ModelProto:
    """The ONNX model of stage `k` of a `LayerBlockModel` (see the module docstring for the contract).

    Parameters
    ----------
    model : LayerBlockModel
    k : int
        Stage index, 0..K.
    input_names : list of str
        Sanitised ONNX input name of each original group (must not be ``state_in`` / ``state_out``).
    model_name : str, default="edgeseq"
        Graph name stem.
    batch_size : int, optional
        Fix the first dimension of every input and output (default symbolic ``N``).
    labels : {"graph", "runtime"}, default="graph"
        "runtime" leaves a classifier's ArgMax out (mobile execution providers run none).

    Returns
    -------
    onnx.ModelProto

    Raises
    ------
    ExportError
        If `k` is out of range or an input name collides with the state's names.

    Examples
    --------
    Stage 2 of a two-group model reads the window "w" (a conv branch) and the state of stage 1:

    >>> import numpy as np, onnx, onnxruntime as ort
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> from edgeseq.export.kinds.layer_blocks.onnx import build_layer_block_graph
    >>> model = _example_model()
    >>> g = build_layer_block_graph(model, 2, ["a", "w"])
    >>> onnx.checker.check_model(g, full_check=True)
    >>> [i.name for i in g.graph.input], [o.name for o in g.graph.output]
    (['w', 'state_in'], ['y', 'state_out'])
    >>> X = np.random.default_rng(0).normal(size=(3, 6)).astype(np.float32)
    >>> s1, _ = model.step(1, X, None)
    >>> sess = ort.InferenceSession(g.SerializeToString(), providers=["CPUExecutionProvider"])
    >>> y, s2 = sess.run(None, {"w": X[:, 2:], "state_in": s1.astype(np.float32)})
    >>> bool(np.allclose(y, model.decision(X, 2), rtol=1e-5, atol=1e-6))
    True
    """
    if not 0 <= k < len(model.stages):
        raise ExportError(f"stage must be in 0..{len(model.stages) - 1}, got {k!r}")
    if any(n in (STATE_IN, STATE_OUT) for n in input_names):
        raise ExportError(f"group input names must not be {STATE_IN!r} or {STATE_OUT!r}, the state's names")
    s, P = model.stages[k], model.n_outputs
    inits = [numpy_helper.from_array(s.c.astype(np.float32), BIAS_NAME)]
    extra = ()
    if k == 0:
        inputs, prior_inits, terms = prefix0_parts(P, batch_size)
        inits += prior_inits
        nodes, acc = affine_nodes(terms)
    else:
        groups = stage_inputs(model, k)
        inputs = [tensor_input(input_names[g], model.group_columns[g].size, batch_size) for g in groups]
        by_group = {inj.group: inj for inj in s.injections}
        nodes, terms = [], []
        for g in groups:
            tag = f"g{g}"
            more, more_inits, term = _injection_nodes(by_group[g], input_names[g], tag)
            nodes += more
            inits += more_inits + [numpy_helper.from_array(by_group[g].U.astype(np.float32), f"{tag}/U")]
            terms.append((term, f"{tag}/U"))
        if s.W is not None:
            inputs.append(tensor_input(STATE_IN, s.W.shape[0], batch_size))
            inits.append(numpy_helper.from_array(s.W.astype(np.float32), "state/W"))
            terms.append((STATE_IN, "state/W"))
        block, acc = affine_nodes(terms)
        inits += [numpy_helper.from_array(s.b.astype(np.float32), "block/b"),
                  numpy_helper.from_array(s.V.astype(np.float32), "head/V")]
        nodes += block + [helper.make_node("Add", [acc, "block/b"], ["block/z"]),
                          helper.make_node("Relu", ["block/z"], [STATE_OUT]),
                          helper.make_node("MatMul", [STATE_OUT, "head/V"], ["head/z"])]
        acc = "head/z"
        extra = (tensor_input(STATE_OUT, s.width, batch_size),)
    nodes.append(helper.make_node("Add", [acc, BIAS_NAME], ["y"]))
    what = "prior" if k == 0 else f"width {s.width}, {s.macs} MACs"
    return finish_model(nodes, inputs, inits, P, model.link, f"{model_name}_stage_{k}",
                        f"edgeseq layer-block stage {k} of {len(model.stages) - 1}: {what}, link {model.link}",
                        batch_size, extra_outputs=extra, labels=labels)


def run_stages_onnxruntime(model, X: np.ndarray, input_names) -> list[dict]:
    """Run every stage graph in onnxruntime on rows X, feeding each stage the previous one's state_out.

    Returns one dict of outputs per stage. The reference chaining for tests and benchmarks.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> from edgeseq.export.kinds.layer_blocks.onnx import run_stages_onnxruntime
    >>> out = run_stages_onnxruntime(_example_model(), np.zeros((2, 6)), ["a", "w"])
    >>> [sorted(o) for o in out]
    [['y'], ['state_out', 'y'], ['state_out', 'y']]
    """
    import onnxruntime as ort

    X32 = np.asarray(X, np.float32)
    state, results = None, []
    for k in range(len(model.stages)):
        g = build_layer_block_graph(model, k, input_names)
        sess = ort.InferenceSession(g.SerializeToString(), providers=["CPUExecutionProvider"])
        feed = {}
        for inp in g.graph.input:
            if inp.name == "n":
                feed["n"] = np.ones((X32.shape[0], 1), np.float32)
            elif inp.name == STATE_IN:
                feed[STATE_IN] = state
            else:
                feed[inp.name] = X32[:, model.group_columns[list(input_names).index(inp.name)]]
        outs = dict(zip([o.name for o in g.graph.output], sess.run(None, feed)))
        if STATE_OUT in outs:
            state = outs[STATE_OUT]
        results.append(outs)
    return results
