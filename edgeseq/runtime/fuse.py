"""One ONNX graph for tree stages 1..j, built in memory from the stage graphs, for batch `predict`.

Why: a tree export has one graph per stage, each stage adding its trees to the state the previous
one passed on. The anytime loop needs them apart (it commits each stage as soon as its groups are
in), but a batch prediction at a fixed stage j would otherwise pay one onnxruntime call per stage;
one graph pays one. The fused graph is the stage graphs' nodes chained by wiring stage i's
``state_out`` to stage i+1's ``state_in``, with every other name prefixed by its stage, and the
nodes that feed no output of stage j (earlier stages' readouts) left out. Its inputs and outputs
are stage j's, in the same order, so the same runner calls either.

The device runtime does not depend on the ``onnx`` package, so this works on the protobuf wire
format directly: it decodes only the fields it renames (tensor names in nodes, initializers, value
infos, graph inputs and outputs) and copies every other field byte for byte. A graph it does not
understand (subgraph attributes, sparse initializers, differing opsets) is refused with
`FuseError`, and the caller keeps the stage chain.

`joined_prefix` and `joined_tree_stages` go further for a batch prediction: one float32 input ``x``,
the concatenation of the groups' arrays (the runtime writes them side by side into one buffer), so
onnxruntime wraps one input instead of one per group, and no Concat node runs. For an affine prefix
the per-group MatMul/Add chain and the bias become one Gemm by the stacked weight blocks (the
prefix's weight matrix over its columns, as the export wrote it), and a sigmoid link one node; for
tree stages 1..j, their TreeEnsembleRegressor nodes become one (their trees, renumbered, summed in
one pass), which onnxruntime runs at the cost of one stage instead of j. Both change only the order
of float32 operations, so they agree with the stage graphs to rounding (tests/test_runtime_joined.py
and tests/test_runtime_joined_linear.py check 1e-6 relative), not bit for bit.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["SIGNED_LOGITS", "FuseError", "fuse_stages", "joined_prefix", "joined_tree_stages"]

_LEN = 2  # wire type of length-delimited fields
# ModelProto
_M_GRAPH, _M_OPSET = 7, 8
# GraphProto
_G_NODE, _G_INIT, _G_SPARSE, _G_INPUT, _G_OUTPUT, _G_VALUE_INFO = 1, 5, 15, 11, 12, 13
# NodeProto, AttributeProto, TensorProto, ValueInfoProto
_N_INPUT, _N_OUTPUT, _N_NAME, _N_OP, _N_ATTR, _N_DOMAIN = 1, 2, 3, 4, 5, 7
# ValueInfoProto.type -> TypeProto.tensor_type -> (elem_type, shape -> dim -> dim_value)
_V_TYPE, _TY_TENSOR, _TT_ELEM, _TT_SHAPE, _SH_DIM, _DIM_VALUE = 2, 1, 1, 2, 1, 1
# TensorProto: dims, data_type, float_data, raw_data; AttributeProto: name, floats, ints, strings
_T_DIMS, _T_TYPE, _T_FLOATS, _T_RAW, _FLOAT, _DOUBLE = 1, 2, 4, 9, 1, 11
_A_NAME, _A_I, _A_FLOATS, _A_INTS, _A_STRINGS, _A_TYPE, _A_INT = 1, 3, 7, 8, 9, 20, 2
_A_G, _A_GRAPHS = 6, 11
_T_NAME, _V_NAME = 8, 1
STATE_IN, STATE_OUT = "state_in", "state_out"


class FuseError(ValueError):
    """The stage graphs use something the fuser does not rewrite; keep the stage chain.

    Examples
    --------
    >>> fuse_stages([b"\\x0f"])
    Traceback (most recent call last):
    ...
    edgeseq.runtime.fuse.FuseError: unsupported protobuf wire type 7
    """


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise FuseError("truncated or malformed protobuf varint")
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, bytes | None, bytes]]:
    """The fields of a serialized message in order: (field number, wire type, payload, raw), where
    payload is the content of a length-delimited field (None for the others) and raw the whole
    field with its tag, to copy unchanged."""
    out, i = [], 0
    while i < len(buf):
        start = i
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(buf, i)
            payload = None
        elif wire == 1:
            i += 8
            payload = None
        elif wire == _LEN:
            n, i = _varint(buf, i)
            payload, i = buf[i:i + n], i + n
        elif wire == 5:
            i += 4
            payload = None
        else:
            raise FuseError(f"unsupported protobuf wire type {wire}")
        if i > len(buf):
            raise FuseError("truncated protobuf field")
        out.append((field, wire, payload, buf[start:i]))
    return out


def _str(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        raise FuseError("a name is not UTF-8") from None


def _enc_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(field: int, payload: bytes) -> bytes:
    return _enc_varint(field << 3 | _LEN) + _enc_varint(len(payload)) + payload


def _renamed(msg: bytes, name_field: int, rename) -> tuple[bytes, str]:
    """`msg` with its string field `name_field` passed through `rename`; also the new name."""
    parts, new = [], ""
    for field, wire, payload, raw in _fields(msg):
        if field == name_field and wire == _LEN:
            new = rename(_str(payload))
            parts.append(_field(field, new.encode("utf-8")))
        else:
            parts.append(raw)
    return b"".join(parts), new


def _name_of(msg: bytes, name_field: int) -> str:
    return next((_str(p) for f, w, p, _ in _fields(msg) if f == name_field and w == _LEN), "")


def _node(msg: bytes, rename, prefix: str) -> tuple[bytes, list[str], list[str]]:
    """A NodeProto with its input/output names renamed and its own name prefixed."""
    parts, ins, outs = [], [], []
    for field, wire, payload, raw in _fields(msg):
        if field in (_N_INPUT, _N_OUTPUT) and wire == _LEN:
            name = _str(payload)
            name = rename(name) if name else name  # "" marks an omitted optional input
            (ins if field == _N_INPUT else outs).append(name)
            parts.append(_field(field, name.encode("utf-8")))
        elif field == _N_NAME and wire == _LEN:
            parts.append(_field(field, (prefix + _str(payload)).encode("utf-8")) if payload else raw)
        else:
            if field == _N_ATTR and any(f in (_A_G, _A_GRAPHS) for f, *_ in _fields(payload)):
                raise FuseError("a node has a subgraph attribute")
            parts.append(raw)
    return b"".join(parts), ins, outs


def fuse_stages(stages: list[bytes]) -> bytes:
    """The serialized model of tree stages 1..j (`stages`, serialized ModelProtos in order) as one graph.

    Parameters
    ----------
    stages : list of bytes
        Serialized stage graphs 1..j of one export; each reads ``state_in`` and writes ``state_out``.

    Returns
    -------
    bytes
        A serialized ModelProto with stage j's inputs and outputs computing stage j's outputs.

    Raises
    ------
    FuseError
        When a graph uses a construct the fuser does not rewrite (the chain must be used instead).

    Examples
    --------
    >>> import onnxruntime as ort
    >>> model, X, out, m = toy_tree_export()  # a 6-tree LightGBM regression, one group per column, exported
    >>> stages = [(out / p["file"]).read_bytes() for p in m["prefixes"][1:]]
    >>> fused = ort.InferenceSession(fuse_stages(stages), providers=["CPUExecutionProvider"])
    >>> [i.name for i in fused.get_inputs()] == m["prefixes"][-1]["inputs"]
    True
    """
    if not stages:
        raise FuseError("no stage to fuse")
    models = [_fields(s) for s in stages]
    opsets = {tuple(raw for f, _, _, raw in mf if f == _M_OPSET) for mf in models}
    if len(opsets) != 1:
        raise FuseError("the stage graphs import different opsets")
    graphs = []
    for mf in models:
        g = [x for x in mf if x[0] == _M_GRAPH]
        if len(g) != 1:
            raise FuseError("a stage model has no graph")
        graphs.append(_fields(g[0][2]))
    last = len(graphs) - 1
    final_inputs = [_name_of(p, _V_NAME) for f, _, p, _ in graphs[last] if f == _G_INPUT]
    final_outputs = [_name_of(p, _V_NAME) for f, _, p, _ in graphs[last] if f == _G_OUTPUT]
    shared = set(final_inputs) - {STATE_IN}  # group inputs: one tensor for every stage
    nodes, inits, infos = [], [], []  # (bytes, inputs, outputs) / (bytes, name)
    for s, g in enumerate(graphs):
        own_inputs = {_name_of(p, _V_NAME) for f, _, p, _ in g if f == _G_INPUT}
        if not own_inputs - {STATE_IN} <= shared:
            raise FuseError(f"stage {s + 1} reads an input the last stage does not have")

        def rename(name, s=s):
            if name in shared:
                return name
            if name == STATE_IN:
                return STATE_IN if s == 0 else f"s{s}/{STATE_OUT}"  # the previous stage's state
            if s == last and name in final_outputs:
                return name
            return f"s{s + 1}/{name}"
        for field, wire, payload, _ in g:
            if field == _G_NODE:
                nodes.append(_node(payload, rename, f"s{s + 1}/"))
            elif field == _G_INIT:
                inits.append(_renamed(payload, _T_NAME, rename))
            elif field == _G_VALUE_INFO:
                infos.append(_renamed(payload, _V_NAME, rename))
            elif field == _G_SPARSE:
                raise FuseError("sparse initializers are not fused")
    # keep what stage j's outputs need, in order (nodes of a valid graph are topologically sorted)
    needed, keep = set(final_outputs), []
    for node in reversed(nodes):
        if needed.intersection(node[2]):
            keep.append(node[0])
            needed.update(i for i in node[1] if i)
    keep.reverse()
    body = [*(_field(_G_NODE, n) for n in keep),
            *(_field(_G_INIT, b) for b, name in inits if name in needed),
            *(_field(_G_VALUE_INFO, b) for b, name in infos if name in needed)]
    rest = [raw for f, _, _, raw in graphs[last] if f not in (_G_NODE, _G_INIT, _G_VALUE_INFO)]
    graph = b"".join(body + rest)
    model = [raw for f, _, _, raw in models[last] if f != _M_GRAPH]
    return b"".join(model) + _field(_M_GRAPH, graph)


# ------------------------------------------------------------------ one input for a batch prediction

def _varint_field(field: int, value: int) -> bytes:
    return _enc_varint(field << 3) + _enc_varint(value)


def _node_parts(msg: bytes) -> tuple[str, list[str], list[str]]:
    """(op_type, inputs, outputs) of a NodeProto."""
    op, ins, outs = "", [], []
    for field, wire, payload, _ in _fields(msg):
        if wire == _LEN and field == _N_OP:
            op = _str(payload)
        elif wire == _LEN and field in (_N_INPUT, _N_OUTPUT):
            (ins if field == _N_INPUT else outs).append(_str(payload))
    return op, ins, outs


def _sub(msg: bytes, field: int) -> bytes:
    """The payload of the first length-delimited `field` of `msg` (b"" when absent)."""
    return next((p for f, w, p, _ in _fields(msg) if f == field and w == _LEN), b"")


def _input_shape(info: bytes) -> tuple[bytes, int]:
    """(the raw first dimension, the second dimension's size) of a float32 [N, d] graph input."""
    tensor = _sub(_sub(info, _V_TYPE), _TY_TENSOR)
    elem = next((v for f, w, _, raw in _fields(tensor) if f == _TT_ELEM and w == 0
                 for v in [_varint(raw, 1)[0]]), None)
    dims = [raw for f, w, _, raw in _fields(_sub(tensor, _TT_SHAPE)) if f == _SH_DIM and w == _LEN]
    if elem != _FLOAT or len(dims) != 2:
        raise FuseError("a graph input is not a float32 matrix")
    width = [v for f, w, p, raw in _fields(_fields(dims[1])[0][2]) if f == _DIM_VALUE and w == 0
             for v in [_varint(raw, 1)[0]]]
    if len(width) != 1:
        raise FuseError("a graph input has no fixed width")
    return dims[0], width[0]


def _matrix_input(name: str, first_dim: bytes, width: int, elem: int = _FLOAT) -> bytes:
    """A ValueInfoProto: float32 (or `elem`) input `name` of shape [first_dim (copied as is), width]."""
    shape = first_dim + _field(_SH_DIM, _varint_field(_DIM_VALUE, width))
    tensor = _varint_field(_TT_ELEM, elem) + _field(_TT_SHAPE, shape)
    return _field(_V_NAME, name.encode("utf-8")) + _field(_V_TYPE, _field(_TY_TENSOR, tensor))


def _repeated_ints(parts: list, field: int) -> list[int]:
    """The values of repeated integer `field` among parsed `parts`, packed or not."""
    values = []
    for f, w, p, raw in parts:
        if f == field and w == 0:
            values.append(_varint(raw, 1)[0])
        elif f == field and w == _LEN:
            i = 0
            while i < len(p):
                v, i = _varint(p, i)
                values.append(v)
    return values


def _float_tensor(msg: bytes, ndim: int = 2) -> np.ndarray:
    """A float32 TensorProto's values as an array of `ndim` dimensions (raw or packed float data)."""
    parts = _fields(msg)
    dims, kind = _repeated_ints(parts, _T_DIMS), _repeated_ints(parts, _T_TYPE)
    values = np.frombuffer(b"".join(p for f, w, p, _ in parts if f in (_T_RAW, _T_FLOATS) and w == _LEN), "<f4")
    if kind != [_FLOAT] or len(dims) != ndim or values.size != int(np.prod(dims)):
        raise FuseError("a weight is not an inline float32 tensor of the expected rank")
    return values.reshape(dims)


def _float_tensor_1d(msg: bytes) -> np.ndarray:
    return _float_tensor(msg, 1)


def _graph_of(model: bytes) -> tuple[list, list]:
    """(the model's fields, its graph's fields)."""
    mf = _fields(model)
    g = [p for f, _, p, _ in mf if f == _M_GRAPH]
    if len(g) != 1:
        raise FuseError("a model has no graph")
    return mf, _fields(g[0])


def _model_with(mf: list, gf: list, nodes: list[bytes], inits: list[bytes], inputs: list[bytes],
                drop_outputs: tuple = (), add_outputs: list[bytes] = ()) -> bytes:
    """`mf` with its graph's nodes, initializers and inputs replaced (value infos dropped: optional),
    the outputs named in `drop_outputs` left out and the ValueInfoProtos `add_outputs` added."""
    rest = [raw for f, _, p, raw in gf if f not in (_G_NODE, _G_INIT, _G_INPUT, _G_VALUE_INFO)
            and not (f == _G_OUTPUT and _name_of(p, _V_NAME) in drop_outputs)]
    graph = b"".join([*(_field(_G_NODE, n) for n in nodes), *(_field(_G_INIT, t) for t in inits),
                      *(_field(_G_INPUT, i) for i in inputs), *rest, *(_field(_G_OUTPUT, o) for o in add_outputs)])
    return b"".join(raw for f, _, _, raw in mf if f != _M_GRAPH) + _field(_M_GRAPH, graph)


def _malformed_is_a_fuse_error(fn):
    """`fn` with an index or key error on a graph missing a part (an input, an output) raised as a
    FuseError, so a caller keeps the exported graphs instead of failing."""
    @functools.wraps(fn)
    def refusing(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (IndexError, KeyError) as exc:
            raise FuseError(f"a graph lacks a part the joiner reads ({type(exc).__name__})") from None
    return refusing


SIGNED_LOGITS = "joined/z"  # a sigmoid prefix's joined graph outputs [-y, y] under this name (not y)


def _float_init(name: str, values: np.ndarray) -> bytes:
    """A TensorProto: float32 initializer `name` holding `values` (raw little-endian data)."""
    return b"".join(_varint_field(_T_DIMS, d) for d in values.shape) + _varint_field(_T_TYPE, _FLOAT) \
        + _field(_T_NAME, name.encode("utf-8")) + _field(_T_RAW, np.ascontiguousarray(values, "<f4").tobytes())


def _node_of(op: str, ins: list[str], outs: list[str], attrs: bytes = b"") -> bytes:
    """A NodeProto of the default domain."""
    return b"".join(_field(_N_INPUT, i.encode("utf-8")) for i in ins) \
        + b"".join(_field(_N_OUTPUT, o.encode("utf-8")) for o in outs) + _field(_N_OP, op.encode()) + attrs


def _ints_attr(name: str, values: list[int]) -> bytes:
    """A node's integer-list attribute (AttributeProto INTS, unpacked as onnx writes it)."""
    return _field(_N_ATTR, _field(_A_NAME, name.encode()) + b"".join(_varint_field(_A_INTS, v) for v in values)
                  + _varint_field(_A_TYPE, 7))  # INTS


def _int_attr(name: str, value: int) -> bytes:
    """A node's integer attribute (AttributeProto INT)."""
    return _field(_N_ATTR, _field(_A_NAME, name.encode()) + _varint_field(_A_I, value) + _varint_field(_A_TYPE, _A_INT))


def _sigmoid_tail(nodes: list[bytes], parts: list, inits: dict) -> bool:
    """True when `nodes` (after ``y``; `parts` their op, inputs and outputs) start with the export's
    sigmoid link: ``p1 = Sigmoid(y)``, ``p0 = Sub(1, p1)``, ``proba = Concat(p0, p1)`` along columns."""
    if [op for op, _, _ in parts[:3]] != ["Sigmoid", "Sub", "Concat"]:
        return False
    try:
        (_, s_in, (p1,)), (_, (one, p1_), (p0,)), (_, c_in, c_out) = parts[:3]
    except ValueError:
        raise FuseError("a link node has an unexpected number of inputs or outputs") from None
    axis = _repeated_ints(_attributes(nodes[2]).get("axis", []), _A_I)
    return s_in == ["y"] and p1_ == p1 and one in inits and c_in == [p0, p1] and c_out == ["proba"] \
        and axis in ([1], [-1]) and _float_tensor(inits[one], 1).tolist() == [1.0]


@_malformed_is_a_fuse_error
def joined_prefix(model: bytes, joined: str = "joined/x", transposed: bool = False,
                  columns=None, rows_first: bool = False, float64: bool = False) -> tuple[bytes, str]:
    """An affine prefix graph with one input `joined`: its groups side by side, one ``Gemm`` and the link.

    A prefix graph multiplies each group's input by its own weight block and adds the products
    (so a device can feed groups as they come); for a batch whose groups are all at hand, one
    ``Gemm`` by the stacked blocks and the bias does that work in one kernel, with one input to
    wrap. onnxruntime pays a few microseconds per node at one row, so the link is cut to one node as
    well: a sigmoid link (``Sigmoid``, ``Sub``, ``Concat`` in the prefix graph) becomes one
    ``Sigmoid`` of the two columns ``[-y, y]``, which the ``Gemm`` computes with the weights and the
    bias negated beside themselves: that is ``[sigmoid(-y), sigmoid(y)]`` = ``[1 - p, p]`` to float32
    rounding. That graph outputs ``[-y, y]`` as `SIGNED_LOGITS` in place of ``y`` (the runner takes
    its second column). A softmax link, the label's ``ArgMax`` and the identity are kept as exported.
    Every weight is read from the graph; nothing is recomputed.

    Parameters
    ----------
    model : bytes
        A serialized affine prefix graph of one or more groups (`export/kinds/affine/onnx.py`).
    joined : str, default="joined/x"
        Name of the new input (the groups' arrays concatenated along columns, in input order).
    transposed : bool, default=False
        Take that input transposed, [d, N] (each group's columns as rows, which numpy fills from
        (N, d_g) arrays several times faster than it concatenates narrow columns): the ``Gemm``
        then multiplies the transposed weights by it, [P, d] x [d, N] (the fast shape for onnxruntime's
        kernel; ``transA`` on the input is not), and one ``Transpose`` gives the rows back.
    columns : sequence of int or None, default=None
        Where each column of the groups side by side sits in the input: a permutation of 0..d-1
        (the groups' original columns, when the prefix reads every one of them). The weight rows are
        placed in that order, so the input is the caller's feature matrix itself; each output value
        is the same sum of the same products as without, in another order.
    rows_first : bool, default=False
        With `transposed`: the input stays [N, d] and the ``Gemm`` reads it transposed (``transB``),
        [P, d] x [N, d]^T: the fast shape without copying the input transposed first (measured in
        onnxruntime 1.31 at 1,000 rows of 30 columns and P = 1, 2, 4: 1.5-2x faster than the plain
        ``Gemm`` of the input by the [d, P] weights).
    float64 : bool, default=False
        With `columns`: the input is float64 and a ``Cast`` to float32 comes first (the same
        round-to-nearest conversion numpy's ``astype`` makes), so float64 features need no cast
        in Python.

    Returns
    -------
    model : bytes
        A serialized ModelProto with the same outputs (``y`` as `SIGNED_LOGITS` for a sigmoid link),
        computed from the one input.
    name : str
        The input's name, `joined`.

    Raises
    ------
    FuseError
        When the graph is not the per-group MatMul/Add chain over inline float32 weights, the bias
        and one of the export's links.

    Examples
    --------
    >>> import numpy as np, onnxruntime as ort
    >>> est, X, out, p = toy_prefix(2)  # toy_export() (float32 rows) and prefix 2's manifest entry
    >>> model, name = joined_prefix((out / p["file"]).read_bytes())
    >>> one = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    >>> name, [i.name for i in one.get_inputs()], one.get_inputs()[0].shape
    ('joined/x', ['joined/x'], ['N', 3])
    >>> y = one.run(["y"], {"joined/x": X[:4]})[0][:, 0]
    >>> bool(np.allclose(y, est.predict(X[:4]), atol=1e-5))
    True
    """
    mf, gf = _graph_of(model)
    inputs = [p for f, _, p, _ in gf if f == _G_INPUT]
    names = [_name_of(p, _V_NAME) for p in inputs]
    nodes = [p for f, _, p, _ in gf if f == _G_NODE]
    inits = {_name_of(p, _T_NAME): p for f, _, p, _ in gf if f == _G_INIT}
    if not names or joined in names or len(nodes) < 2 * len(names):
        raise FuseError("not an affine prefix graph of one or more groups")
    blocks, acc = [], None
    for k, name in enumerate(names):  # MatMul(in_0, W_0); then MatMul(in_k, W_k), Add(acc, that)
        op, ins, outs = _node_parts(nodes[max(2 * k - 1, 0)])
        if op != "MatMul" or len(ins) != 2 or ins[0] != name or ins[1] not in inits:
            raise FuseError("the graph does not start with one MatMul per group")
        blocks.append(ins[1])
        acc = outs[0] if k == 0 else acc
        if k:
            op, add_in, add_out = _node_parts(nodes[2 * k])
            if op != "Add" or sorted(add_in) != sorted([acc, outs[0]]):
                raise FuseError("the group products are not summed in a chain")
            acc = add_out[0]
    op, ins, outs = _node_parts(nodes[2 * len(names) - 1])
    if op != "Add" or len(ins) != 2 or ins[0] != acc or ins[1] not in inits or outs != ["y"]:
        raise FuseError("the products are not followed by the bias, giving y")
    weights = [_float_tensor(inits[b]) for b in blocks]
    if [w.shape[0] for w in weights] != [_input_shape(i)[1] for i in inputs] or len({w.shape[1] for w in weights}) != 1:
        raise FuseError("the weight blocks do not match the inputs' widths")
    W, b, first = np.concatenate(weights), _float_tensor(inits[ins[1]], 1), _input_shape(inputs[0])[0]
    if columns is not None:
        if sorted(columns) != list(range(W.shape[0])):
            raise FuseError("the columns are not a permutation of the groups' columns")
        W = W[np.argsort(columns)]  # row c: the weights of input column c
    if b.shape != (W.shape[1],):
        raise FuseError("the bias does not match the weights")
    tail = nodes[2 * len(names):]
    parts = [_node_parts(n) for n in tail]
    out, drop, add = "y", (), []
    if _sigmoid_tail(tail, parts, inits):
        W, b = np.concatenate([-W, W], axis=1), np.concatenate([-b, b])  # negation is exact
        out, drop, add = SIGNED_LOGITS, ("y",), [_matrix_input(SIGNED_LOGITS, first, 2)]
        tail, after = [_node_of("Sigmoid", [out], ["proba"])] + tail[3:], parts[3:]
    elif not parts or (parts[0][0] == "Softmax" and parts[0][1] == ["y"]):
        after = parts[1:]
    else:
        raise FuseError("the link is not one the joiner knows")
    if any(set(ins) & {"y", *names} for _, ins, _ in after):
        raise FuseError("a node after the link reads y or an input")
    x, cast = joined, []
    if float64:
        if columns is None or (transposed and not rows_first):
            raise FuseError("a float64 input is for the feature matrix (columns, rows first)")
        x = joined + "/f32"
        cast = [_node_of("Cast", [joined], [x], _int_attr("to", _FLOAT))]
    if not transposed:
        head = [_node_of("Gemm", [x, "joined/W", "joined/b"], [out])]
        tensors = [_float_init("joined/W", W), _float_init("joined/b", b)]
        info = _matrix_input(joined, first, W.shape[0], _DOUBLE if float64 else _FLOAT)
    else:
        trans_b = _int_attr("transB", 1) if rows_first else b""
        head = [_node_of("Gemm", ["joined/W", x, "joined/b"], [out + "/T"], trans_b),
                _node_of("Transpose", [out + "/T"], [out], _ints_attr("perm", [1, 0]))]
        tensors = [_float_init("joined/W", W.T), _float_init("joined/b", b[:, None])]
        shape = _field(_SH_DIM, _varint_field(_DIM_VALUE, W.shape[0])) + first
        tensor_type = _varint_field(_TT_ELEM, _FLOAT) + _field(_TT_SHAPE, shape)
        info = _matrix_input(joined, first, W.shape[0], _DOUBLE if float64 else _FLOAT) if rows_first else \
            _field(_V_NAME, joined.encode()) + _field(_V_TYPE, _field(_TY_TENSOR, tensor_type))
    head = cast + head
    read = {i for n in tail for i in _node_parts(n)[1]}
    kept = [p for name, p in inits.items() if name in read and name not in blocks] + tensors
    return _model_with(mf, gf, head + tail, kept, [info], drop_outputs=drop, add_outputs=add), joined


_TREE_OP = "TreeEnsembleRegressor"
_TREE_SCALARS = ("n_targets", "aggregate_function", "post_transform")
_TREE_LISTS = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
               "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
               "target_treeids", "target_nodeids", "target_ids", "target_weights")
_TREE_IDS = ("nodes_treeids", "target_treeids")


def _attributes(node: bytes) -> dict[str, list]:
    """A tree node's attributes: name -> its raw fields other than the name (values, type)."""
    out = {}
    for field, wire, payload, _ in _fields(node):
        if field == _N_ATTR and wire == _LEN:
            parts = _fields(payload)
            name = next((_str(p) for f, w, p, _ in parts if f == _A_NAME and w == _LEN), "")
            out[name] = [(f, w, p, raw) for f, w, p, raw in parts if f != _A_NAME]
    return out


def _stage_increment(gf: list) -> tuple[list[str], bytes | None, str | None, list[bytes]]:
    """(group inputs, the tree node or None, the tree node's input, the stage's other nodes) of a tree
    stage graph whose increment is ``state_out = state_in + trees(x)`` or ``Identity(state_in)``."""
    groups = [n for n in (_name_of(p, _V_NAME) for f, _, p, _ in gf if f == _G_INPUT) if n != STATE_IN]
    tree, tree_in, trees_out, rest, increment = None, None, None, [], 0
    concat = groups[0] if len(groups) == 1 else None
    for f, _, p, _ in gf:
        if f != _G_NODE:
            continue
        op, ins, outs = _node_parts(p)
        if op == "Concat" and ins == groups and concat is None:
            concat = outs[0]
        elif op == _TREE_OP and tree is None:
            tree, tree_in, trees_out = p, ins[0], outs[0]
        elif outs == [STATE_OUT] and ((op == "Add" and sorted(ins) == sorted([STATE_IN, trees_out or "?"]))
                                      or (op == "Identity" and ins == [STATE_IN])):
            increment += 1
        else:
            rest.append(p)
    if increment != 1 or (tree is not None and (tree_in != concat or concat is None)):
        raise FuseError("a tree stage is not state_out = state_in + one TreeEnsembleRegressor over its groups")
    return groups, tree, concat, rest


@_malformed_is_a_fuse_error
def joined_tree_stages(stages: list[bytes], columns=None) -> tuple[bytes, str]:
    """Tree stages 1..j (serialized, in order) as one graph of one input and one TreeEnsembleRegressor.

    Stage i's trees read the concatenation of the groups stages 1..i require, a prefix of stage j's
    (the export remaps every split into it), so every stage's trees can read stage j's concatenation
    unchanged; their node lists are joined with tree ids renumbered, and the node writes
    ``state_out`` from a zero start (what stage 1 is fed). Stage j's readout and link follow, without
    its guard (`_without_guard`: the caller checks that the input is finite). The input is stage j's
    concatenation (named as stage j names it), and ``state_in`` is gone.

    Parameters
    ----------
    stages : list of bytes
        Serialized stage graphs 1..j of one export (``ai-onnx-ml`` tree form).
    columns : sequence of int or None, default=None
        Where each column of stage j's groups side by side sits in the input: a permutation of them
        (the groups' original columns, when stage j reads every one). Each split's feature index is
        mapped through it, so the input is the caller's feature matrix itself; every split compares
        the same value with the same threshold.

    Returns
    -------
    model : bytes
        A serialized ModelProto with stage j's outputs and one float32 input of all its groups' columns.
    name : str
        That input's name.

    Raises
    ------
    FuseError
        For a stage in another form (core tree operators), differing opsets or tree attributes this
        does not merge (base values, tensor-valued attributes).

    Examples
    --------
    >>> import numpy as np, onnxruntime as ort
    >>> model, X, out, m = toy_tree_export()  # a 6-tree LightGBM regression, one group per column, exported
    >>> joined, name = joined_tree_stages([(out / p["file"]).read_bytes() for p in m["prefixes"][1:]])
    >>> one = ort.InferenceSession(joined, providers=["CPUExecutionProvider"])
    >>> cols = dict(zip(model.group_names, model.group_columns))   # stage j's groups side by side:
    >>> x = np.hstack([X[:5, cols[g["name"]]] for g in m["groups"] if g["input_name"] in m["prefixes"][-1]["inputs"]])
    >>> name, [i.name for i in one.get_inputs()], one.get_inputs()[0].shape[1] == x.shape[1]
    ('x', ['x'], True)
    >>> y = one.run(["y"], {"x": x.astype(np.float32)})[0][:, 0]
    >>> bool(np.allclose(y, model.predict(X[:5])[:, 0], rtol=1e-6, atol=1e-6))
    True
    """
    if not stages:
        raise FuseError("no stage to fuse")
    parsed = [_graph_of(s) for s in stages]
    if len({tuple(raw for f, _, _, raw in mf if f == _M_OPSET) for mf, _ in parsed}) != 1:
        raise FuseError("the stage graphs import different opsets")
    mf, gf = parsed[-1]
    groups, _, joined, rest = _stage_increment(gf)
    merged: dict[str, list] = {}
    offset, scalars, trees, keys = 0, None, 0, {}
    for _, g in parsed:
        own, tree, _, _ = _stage_increment(g)
        if own != groups[:len(own)]:
            raise FuseError("a stage's groups are not a prefix of the last stage's")
        if tree is None:
            continue
        att = _attributes(tree)
        if set(att) - set(_TREE_SCALARS) - set(_TREE_LISTS) or not set(_TREE_SCALARS) <= set(att) \
                or set(att) != keys.setdefault("keys", set(att)):
            raise FuseError("a tree node has attributes the merge does not know")
        these = {k: [raw for *_, raw in att[k]] for k in _TREE_SCALARS}
        if scalars not in (None, these):
            raise FuseError("the tree nodes differ in targets or aggregation")
        scalars, ids = these, {k: _repeated_ints(att[k], _A_INTS) for k in _TREE_IDS}
        for k in (k for k in _TREE_LISTS if k in att):  # values joined; the type field kept once
            values = (_A_FLOATS, _A_INTS, _A_STRINGS)
            if k in _TREE_IDS:
                merged.setdefault(k, []).extend(_varint_field(_A_INTS, v + offset) for v in ids[k])
            elif k == "nodes_featureids" and columns is not None:
                merged.setdefault(k, []).extend(_varint_field(_A_INTS, columns[v])
                                                for v in _repeated_ints(att[k], _A_INTS))
            else:
                merged.setdefault(k, []).extend(raw for f, _, _, raw in att[k] if f in values)
            merged.setdefault(f"{k}/type", [raw for f, _, _, raw in att[k] if f not in values])
        offset += max(ids["nodes_treeids"], default=-1) + 1
        trees += 1
    if not trees or joined is None:
        raise FuseError("no stage holds trees")
    attrs = [_field(_N_ATTR, _field(_A_NAME, k.encode()) + b"".join(v)) for k, v in scalars.items()]
    attrs += [_field(_N_ATTR, _field(_A_NAME, k.encode()) + b"".join(merged[k]) + b"".join(merged[f"{k}/type"]))
              for k in _TREE_LISTS if k in merged]
    rest = _without_guard(rest, joined)
    out, rest, base = _folded_readout(rest, {_name_of(p, _T_NAME): p for f, _, p, _ in gf if f == _G_INIT})
    if base is not None:  # the bias, added after the trees' sum as the Add did (FLOATS = 6)
        attrs.append(_field(_N_ATTR, _field(_A_NAME, b"base_values") + b"".join(
            _enc_varint(_A_FLOATS << 3 | 5) + v.tobytes() for v in base.astype("<f4")) + _varint_field(_A_TYPE, 6)))
    node = _field(_N_INPUT, joined.encode()) + _field(_N_OUTPUT, out.encode()) \
        + _field(_N_NAME, b"trees") + _field(_N_OP, _TREE_OP.encode()) + b"".join(attrs) \
        + _field(_N_DOMAIN, b"ai.onnx.ml")
    inputs = {_name_of(p, _V_NAME): p for f, _, p, _ in gf if f == _G_INPUT}
    first = _input_shape(inputs[groups[0]])[0]
    width = sum(_input_shape(inputs[g])[1] for g in groups)
    if columns is not None and sorted(columns) != list(range(width)):
        raise FuseError("the columns are not a permutation of the groups' columns")
    read = {i for n in rest for i in _node_parts(n)[1]}
    inits = [p for f, _, p, _ in gf if f == _G_INIT and _name_of(p, _T_NAME) in read]
    return _model_with(mf, gf, [node] + rest, inits, [_matrix_input(joined, first, width)],
                       drop_outputs=() if out == STATE_OUT else (STATE_OUT,)), joined


def _folded_readout(nodes: list[bytes], inits: dict) -> tuple[str, list[bytes], np.ndarray | None]:
    """(what the tree node writes, the nodes left, the bias to add in it or None).

    ``y = state_out @ W + b`` with W the identity (a LightGBM import: one state column per output)
    is the trees' sum plus b, which the tree node adds itself (``base_values``, after the sum): then
    the node writes ``y`` and the readout's two nodes go, and so does the ``state_out`` output,
    which a batch prediction does not read. Otherwise nothing changes."""
    parts = [_node_parts(n) for n in nodes]
    if len(parts) < 2 or parts[0][0] != "MatMul" or parts[0][1][0] != STATE_OUT or parts[1][0] != "Add" \
            or parts[1][1] != [parts[0][2][0], parts[1][1][1]] or parts[0][1][1] not in inits \
            or parts[1][1][1] not in inits or any(STATE_OUT in ins for _, ins, _ in parts[1:]):
        return STATE_OUT, nodes, None
    try:
        w, b = _float_tensor(inits[parts[0][1][1]]), _float_tensor_1d(inits[parts[1][1][1]])
    except FuseError:
        return STATE_OUT, nodes, None
    if w.shape[0] != w.shape[1] or not np.array_equal(w, np.eye(w.shape[0], dtype=np.float32)) \
            or b.shape != (w.shape[0],):
        return STATE_OUT, nodes, None
    return parts[1][2][0], nodes[2:], b


def _without_guard(nodes: list[bytes], x: str) -> list[bytes]:
    """`nodes` without the guard ``g = x @ 0`` and the ``Add`` of it to the readout, whose readers
    read the readout instead. The guard makes a stage's ``y`` NaN for a non-finite input (a tree
    routes NaN silently); the runtime checks the joined input buffer itself, for less than two
    nodes cost in onnxruntime (`PrefixRunner.call_joined` with ``check_inputs``)."""
    parts = [_node_parts(n) for n in nodes]
    guard = [k for k, (op, ins, _) in enumerate(parts) if op == "MatMul" and ins[:1] == [x]]
    if len(guard) != 1:
        raise FuseError("the last stage has no guard on its input")
    g = parts[guard[0]][2][0]
    add = [k for k, (op, ins, _) in enumerate(parts) if op == "Add" and g in ins and len(ins) == 2]
    if len(add) != 1 or any(g in ins for k, (_, ins, _) in enumerate(parts) if k not in add):
        raise FuseError("the guard is not added once to the readout")
    (other,), added = [i for i in parts[add[0]][1] if i != g], parts[add[0]][2][0]
    return [_node(n, lambda name: other if name == added else name, "")[0]
            for k, n in enumerate(nodes) if k not in (guard[0], add[0])]
