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
"""

from __future__ import annotations

__all__ = ["FuseError", "fuse_stages"]

_LEN = 2  # wire type of length-delimited fields
# ModelProto
_M_GRAPH, _M_OPSET = 7, 8
# GraphProto
_G_NODE, _G_INIT, _G_SPARSE, _G_INPUT, _G_OUTPUT, _G_VALUE_INFO = 1, 5, 15, 11, 12, 13
# NodeProto, AttributeProto, TensorProto, ValueInfoProto
_N_INPUT, _N_OUTPUT, _N_NAME, _N_ATTR = 1, 2, 3, 5
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
    >>> import numpy as np, tempfile, json, lightgbm
    >>> from pathlib import Path
    >>> from edgeseq import from_lightgbm
    >>> from edgeseq.export.writer import export_model
    >>> import onnxruntime as ort
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 3)); y = X[:, 0] + 2 * X[:, 2]
    >>> model = from_lightgbm(lightgbm.LGBMRegressor(n_estimators=6, num_leaves=4, verbose=-1).fit(X, y),
    ...                       groups=[[0], [1], [2]], costs=[1.0, 1.0, 1.0])
    >>> out = Path(tempfile.mkdtemp()) / "out"
    >>> m = export_model(model, out)
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
