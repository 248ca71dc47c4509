"""Generate `edgeseq_model.h` / `edgeseq_model.c` for a layer-block model (an anytime neural network).

The single source is `edgeseq.forms.layer_blocks.LayerBlockModel`; this module only lays its arrays out
for the C runtime (`runtime_c/`, kind ES_KIND_LAYERS, descriptor in `edgeseq_layers.h`) and decides
nothing training decided. What it adds is the C view of the same numbers:

* groups in *sequence order* (the stages' new groups, stage after stage) and, per group, the first
  stage that needs it; an injection reads its group at that group's offset among the pushed features;
* every dense weight transposed to [out][in] (W_k, U_{k,g}, the head V_k), so one output is one
  contiguous dot product;
* a windowed group (declared (channels, length), columns channel-major as in Python and ONNX) is
  pushed to the C runtime **time-major** (NWC: value[t * channels + c]), as a streaming sensor
  delivers it; conv weights go from the model's (filters, channels, kernel) to [filters][kernel][channels]
  and a flat injection over a windowed group gets its U columns permuted the same way
  (`layer_block_feature_order` is the column order C expects);
* per stage the dtype (float32 today: the field leaves room for integer stages), the commit flag and
  the multiply-accumulates, emitted as ``<prefix>_STAGE_MACS[k]`` and ``<prefix>_MACS_PER_STEP_MAX``.

Floats are written with nine significant digits (`c_codegen.c_float`), which round-trip float32, and
cumulative costs as exact hexadecimal doubles, so C's budget rule equals Python's.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from edgeseq.errors import EdgeseqError, ExportError
from edgeseq.format import C_HEADER
from edgeseq.export.c_codegen import (c_descriptor, c_float_rows, c_header_text, c_model_name, c_model_tables,
                                      c_u32_list, validate_c_prefix, write_c_files)
from edgeseq.export.names import c_comment_text
from edgeseq.export.kinds.layer_blocks.onnx import stage_inputs
from edgeseq.forms.layer_blocks import LayerBlockModel

_C_INDEX_MAX = (1 << 31) - 1
_POOL_ENUM = {"none": "ES_POOL_NONE", "max": "ES_POOL_MAX", "avg": "ES_POOL_AVG"}


@dataclasses.dataclass(frozen=True)
class LayerLayout:
    """The C view of a LayerBlockModel (what `layer_block_c_tables` emits), as plain lists.

    Attributes
    ----------
    model : LayerBlockModel
        The model, re-validated.
    order : list of int
        Original group indices in sequence order (the order es_push expects them).
    group_stage : list of int
        The stage (1..K) that first needs each sequence position.
    offset : dict of int to int
        Original group index -> first feature of the group among the pushed features.
    windows : dict of int to tuple of int
        Windowed groups -> (channels, length); these are pushed time-major.
    n_state, n_scratch : int
        The largest hidden width and the largest pooled conv output.

    Examples
    --------
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> lay = layer_layout(_example_model())
    >>> lay.order, lay.group_stage, lay.offset, lay.windows, lay.n_state, lay.n_scratch
    ([0, 1], [1, 2], {0: 0, 1: 2}, {1: (1, 4)}, 3, 2)
    """

    model: LayerBlockModel
    order: list
    group_stage: list
    offset: dict
    windows: dict
    n_state: int
    n_scratch: int


def _revalidated(model) -> LayerBlockModel:
    if not isinstance(model, LayerBlockModel):
        raise ExportError(f"a layer-block export needs a LayerBlockModel, got {type(model).__name__}")
    try:
        return dataclasses.replace(model)  # runs the validating constructor again
    except EdgeseqError as exc:
        raise ExportError(f"cannot generate C for this layer-block model: {exc}") from None


def _windows(model: LayerBlockModel) -> dict:
    """Group -> (channels, length) for every windowed group: declared, or implied by its conv branches."""
    win = {}
    for g, shape in enumerate(model.group_shapes or ()):
        if shape is not None:
            win[g] = (int(shape[0]), int(shape[1]))
    for k, s in enumerate(model.stages):
        for inj in s.injections:
            if inj.conv is None:
                continue
            shape = (inj.conv.channels, inj.conv.length)
            if win.setdefault(inj.group, shape) != shape:
                raise ExportError(f"stage {k}: the conv branch over group {inj.group} sees a window {shape}, "
                                  f"but the group is a window {win[inj.group]}; one layout per group")
    return win


def layer_layout(model) -> LayerLayout:
    """Validate `model` for the C runtime and compute its C layout (see `LayerLayout`).

    Raises
    ------
    ExportError
        Not a valid LayerBlockModel, a size beyond the C runtime's 32-bit indices, or conv branches
        that disagree on a group's window shape.

    Examples
    --------
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> layer_layout(_example_model()).order
    [0, 1]
    """
    model = _revalidated(model)
    order = [int(g) for s in model.stages for g in s.new_groups]
    group_stage = [k for k, s in enumerate(model.stages) for _ in s.new_groups]
    sizes = [int(model.group_columns[g].size) for g in order]
    offset = dict(zip(order, np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist() if order else []))
    n_state = max(s.width for s in model.stages)
    n_scratch = max((inj.conv.out_width for s in model.stages for inj in s.injections if inj.conv is not None),
                    default=0)
    biggest = max([model.n_features, n_state * max(n_state, 1), len(model.stages)]
                  + [inj.U.size for s in model.stages for inj in s.injections])
    if biggest > _C_INDEX_MAX:
        raise ExportError("the layer-block model is too large for the C runtime's 32-bit indices")
    return LayerLayout(model, order, group_stage, offset, _windows(model), int(n_state), int(n_scratch))


def time_major(channels: int, length: int) -> np.ndarray:
    """Permutation p with ``x_time_major = x_channel_major[p]`` for a (channels, length) window.

    Examples
    --------
    >>> time_major(2, 3).tolist()   # t0c0 t0c1 t1c0 ...
    [0, 3, 1, 4, 2, 5]
    """
    return np.arange(channels * length).reshape(channels, length).T.ravel()


def layer_block_feature_order(model) -> np.ndarray:
    """Raw columns in the order the C runtime holds them: groups in sequence order, each windowed
    group time-major. ``X[:, layer_block_feature_order(model)]`` is what a driver pushes.

    Examples
    --------
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> layer_block_feature_order(_example_model()).tolist()
    [0, 1, 2, 3, 4, 5]
    """
    lay = layer_layout(model)
    cols = []
    for g in lay.order:
        c = lay.model.group_columns[g]
        cols.append(c[time_major(*lay.windows[g])] if g in lay.windows else c)
    return np.concatenate(cols).astype(np.int64) if cols else np.zeros(0, np.int64)


def _array(name: str, values) -> str:
    return f"static const float {name}[] = {{\n{c_float_rows(values)}\n}};\n"


def _stage_tables(lay: LayerLayout, prefix: str, k: int) -> tuple[str, str]:
    """C arrays of stage k and its es_layer_stage initializer."""
    s, p = lay.model.stages[k], f"{prefix}_s{k}"
    parts = [_array(f"{p}_c", s.c)]
    if k == 0:
        return parts[0], f"    {{0u, 0u, 0u, 1u, ES_DTYPE_F32, 0, 0, 0, 0, {p}_c}}, /* stage 0: the prior */"
    H = s.width
    parts.append(_array(f"{p}_b", s.b))
    parts.append(_array(f"{p}_v", s.V.T))  # [P][H]
    if s.W is not None:
        parts.append(_array(f"{p}_w", s.W.T))  # [H][S_prev]
    inits = []
    by_group = {inj.group: inj for inj in s.injections}  # in the graphs' input order (groups as paid)
    for i, inj in enumerate(by_group[g] for g in stage_inputs(lay.model, k)):
        tag = f"{p}_i{i}"
        U = inj.U.T  # [H][n_in]
        conv = "0"
        if inj.conv is not None:
            br = inj.conv
            parts.append(_array(f"{tag}_cw", br.W.transpose(0, 2, 1)))  # [F][K][C]
            parts.append(_array(f"{tag}_cb", br.b))
            parts.append(f"static const es_conv1d {tag}_conv = {{{br.channels}u, {br.length}u, {br.kernel}u, "
                         f"{br.stride}u, {br.filters}u, {_POOL_ENUM[br.pool]}, {br.pool_size}u, {tag}_cw, {tag}_cb}};\n")
            conv = f"&{tag}_conv"
        elif inj.group in lay.windows:
            U = U[:, time_major(*lay.windows[inj.group])]  # the group arrives time-major
        parts.append(_array(f"{tag}_u", U))
        inits.append(f"    {{{lay.offset[inj.group]}u, {U.shape[1]}u, {conv}, {tag}_u}}, "
                     f"/* group {inj.group}: {c_comment_text(lay.model.group_names[inj.group])} */")
    if inits:
        parts.append(f"static const es_inject {p}_inject[] = {{\n" + "\n".join(inits) + "\n};\n")
    n_in = 0 if s.W is None else s.W.shape[0]
    what = "resets the state" if s.W is None and k > 1 else f"reads the state ({n_in})" if n_in else "first stage"
    init = (f"    {{{H}u, {n_in}u, {len(s.injections)}u, {int(s.commit)}u, ES_DTYPE_F32, "
            f"{f'{p}_w' if n_in else '0'}, {f'{p}_inject' if inits else '0'}, {p}_b, {p}_v, {p}_c}}, "
            f"/* stage {k}: width {H}, {what}, {s.macs} MACs{'' if s.commit else ', not committed'} */")
    return "".join(parts), init


def layer_block_c_tables(model, prefix: str) -> str:
    """The C tables of a layer-block model: every stage's weights and descriptor, and the ``es_layers``
    ``<prefix>_layers`` that the model descriptor points at (C99 text, ``static const`` only).

    Raises
    ------
    ExportError
        As `layer_layout`, or a weight that is not finite in float32.

    Examples
    --------
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> text = layer_block_c_tables(_example_model(), "m")
    >>> "static const es_layers m_layers = {" in text, "ES_POOL_MAX" in text
    (True, True)
    """
    validate_c_prefix(prefix)
    lay = layer_layout(model)
    arrays, inits = zip(*(_stage_tables(lay, prefix, k) for k in range(len(lay.model.stages))))
    group_stage = (f"static const uint32_t {prefix}_group_stage[] = {{ {c_u32_list(lay.group_stage)} }};\n"
                   if lay.order else "")
    return ("".join(arrays) + group_stage
            + f"static const es_layer_stage {prefix}_stage[] = {{\n" + "\n".join(inits) + "\n};\n"
            + f"const uint32_t {prefix}_STAGE_MACS[{prefix}_N_STAGES] = {{ {c_u32_list(lay.model.stage_macs)} }};\n"
            + f"static const es_layers {prefix}_layers = {{\n    {len(lay.model.stages)}u,\n    {lay.n_state}u,\n"
            + f"    {lay.n_scratch}u,\n    {prefix + '_group_stage' if lay.order else '0'},\n    {prefix}_stage\n}};\n")


def _header(lay: LayerLayout, prefix: str, name: str) -> str:
    model = lay.model
    P = model.n_outputs
    n_pred = 2 if model.link == "sigmoid" else P
    sizes = [int(model.group_columns[g].size) for g in lay.order]
    macs = [int(m) for m in model.stage_macs]
    rows = [f" *   stage {k:>3}: width {s.width}, {macs[k]} multiply-adds"
            + ("" if s.commit else " (runs, never committed)")
            + (f", needs {', '.join(c_comment_text(model.group_names[g]) for g in s.new_groups)}" if s.new_groups else "")
            for k, s in enumerate(model.stages) if k]
    wins = [f" *   {c_comment_text(model.group_names[g])}: {c} channels x {L} steps, push value[t * {c} + c]"
            for g, (c, L) in sorted(lay.windows.items())]
    summary = (f" * Link: {model.link}; layer-block stages: {len(model.stages)} stages, {len(lay.order)} groups, "
               f"{P} outputs, state of at most {lay.n_state} floats,\n * {sum(sizes)} features in the full sequence. "
               f"es_push stores a group; es_step runs one stage:\n" + ("\n".join(rows) or " *   (no stages)")
               + ("\n * Windowed groups, pushed TIME-MAJOR (channels interleaved per time step):\n" + "\n".join(wins)
                  if wins else ""))
    cost = (f"/* multiply-adds of each es_step (conv, dense block and head), and the largest */\n"
            f"extern const uint32_t {prefix}_STAGE_MACS[{len(model.stages)}];\n"
            f"#define {prefix}_MACS_PER_STEP_MAX {max(macs)}u\n"
            f"/* es_push does no arithmetic for a layer-block model */\n"
            f"#define {prefix}_MACS_PER_PUSH_MAX 0u\n"
            f"#define {prefix}_N_STATE {lay.n_state}u\n"
            f"#define {prefix}_N_SCRATCH {lay.n_scratch}u")
    return c_header_text(prefix, name, generator="c_layer_blocks.py", summary=summary, group_names=model.group_names,
                         order=lay.order, sizes=sizes, n_outputs=P, n_pred=n_pred, n_stages=len(model.stages),
                         work_floats=f"({sum(sizes)}u + {P}u + 2u * {n_pred}u + 2u * {lay.n_state}u + {lay.n_scratch}u)",
                         work_comment="features + outputs + 2 prediction slots + 2 ping-pong states + conv scratch",
                         cost_defines=cost)


def _source(lay: LayerLayout, prefix: str, name: str) -> str:
    model = lay.model
    sizes = [int(model.group_columns[g].size) for g in lay.order]
    return (f"/* Generated by edgeseq (export/kinds/layer_blocks/c_float.py) -- do not edit. Model: {c_comment_text(name)} */\n"
            f"#include \"{C_HEADER}\"\n\n"
            + layer_block_c_tables(model, prefix) + "\n"
            + c_model_tables(prefix, group_names=model.group_names, order=lay.order, sizes=sizes,
                             output_names=model.output_names, cum_cost=model.cum_cost)
            + "\n" + c_descriptor(prefix, name, model.link, coef="0", intercept="0", kind="ES_KIND_LAYERS",
                                  trees="0", layers=f"&{prefix}_layers"))


def write_c_layer_blocks(model, out_dir, prefix: str, model_name: str | None = None) -> list[str]:
    """Write edgeseq_model.h/.c for a layer-block model into out_dir; return the file names written.

    Same contract as `c_codegen.write_c_model` (validated `prefix`, atomic writes). The header adds
    ``<prefix>_N_STATE``, ``_N_SCRATCH``, ``_STAGE_MACS[k]`` and ``_MACS_PER_STEP_MAX``, and lists
    the windowed groups, which the C runtime takes time-major.

    Raises
    ------
    InputError
        For an invalid `prefix`.
    ExportError
        As `layer_block_c_tables`.

    Examples
    --------
    >>> import pathlib, subprocess, tempfile
    >>> from edgeseq.export.c_harness import runtime_dir
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> write_c_layer_blocks(_example_model(), d, "demo")
    ['edgeseq_model.h', 'edgeseq_model.c']
    >>> "#define demo_MACS_PER_STEP_MAX 30u" in (d / "edgeseq_model.h").read_text()
    True
    >>> subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-c", "-I", str(runtime_dir()),
    ...                 str(d / "edgeseq_model.c"), "-o", str(d / "m.o")]).returncode
    0
    """
    validate_c_prefix(prefix)
    lay = layer_layout(model)
    name = c_model_name(prefix, model_name)
    return write_c_files(out_dir, _header(lay, prefix, name), _source(lay, prefix, name))
