"""Generate the int16 `edgeseq_model.h` / `edgeseq_model.c` of a tree-stage model (AFR, imported LightGBM)
for `runtime_c/edgeseq_runtime_i16.c` (kind ES16_KIND_TREES).

The emitter prints the `TreeInt16Model` that `edgeseq.export.kinds.trees.quantize` decided -- int32 node
values (thresholds ``t_q``, leaves ``leaf_q``), the state shifts, per-stage int16 readouts, int32
intercepts, weight shifts, the link table, feature scales -- and the stage layout `c_trees.tree_layout`
proved (groups in sequence order, features remapped to pushed positions, per-stage depth); it computes
nothing itself. The shared tables and the descriptor come from `c_int16.int16_descriptor`, so a
linear and a tree int16 model differ only in their kind and their stage tables. The text holds integer
types only (no `float`, no `double`): a Cortex-M0 build links no soft-float routine.
"""

from __future__ import annotations

import numpy as np

from edgeseq.errors import ExportError
from edgeseq.export.c_codegen import c_model_name, c_u32_list, validate_c_prefix, write_c_files
from edgeseq.export.c_int16 import c_int_rows, int16_descriptor, int16_entry, int16_header_text
from edgeseq.export.kinds.trees.c_float import TreeLayout, _work_per_push, c_tree_tables, tree_layout
from edgeseq.export.names import c_comment_text
from edgeseq.export.quantize import INT16_MAX, INT16_MIN, INT32_MAX
from edgeseq.export.kinds.trees.quantize import THRESHOLD_MAX, THRESHOLD_MIN, TreeInt16Model, leaf_bounds, state_entry
from edgeseq.format import C_HEADER
from edgeseq.forms.trees import TreeStageModel


def _check(qm: TreeInt16Model, layout: TreeLayout) -> None:
    """The integer tables against the proved layout, and their proofs re-run (a mismatch is an
    out-of-bounds read or an overflow in C, so it is refused before any text is written)."""
    model, ens = layout.model, layout.model.ensemble
    K, S, P = len(model.stages), ens.n_targets, model.n_outputs
    split = ens.feature >= 0
    same = (np.array_equal(qm.node_feature, layout.feature) and np.array_equal(qm.left, ens.left)
            and np.array_equal(qm.right, ens.right) and np.array_equal(qm.roots, ens.roots)
            and np.array_equal(qm.target, ens.target) and np.array_equal(qm.stage_depth, layout.depth)
            and list(qm.order) == list(layout.order) and list(qm.group_stage) == list(layout.group_stage))
    shapes = (qm.n_stages == K and qm.n_state == S and qm.n_outputs == P and len(qm.coefs) == K
              and all(c.shape == (S, P) for c in qm.coefs) and qm.intercepts.shape == (K, P)
              and qm.weight_shift.shape == (K,) and qm.state_shift.shape == (S,) and qm.link == model.link
              and qm.feature_shift.shape == qm.columns.shape and qm.feature_offset.shape == qm.columns.shape)
    if not (same and shapes):
        raise ExportError("the integer tree model's tables disagree with the tree model; refusing to generate C")
    values = qm.node_value
    bounds = leaf_bounds(values, ~split, qm.roots, qm.target, S)
    if np.any(values[split] < THRESHOLD_MIN) or np.any(values[split] > THRESHOLD_MAX) \
            or max(bounds, default=0) > INT32_MAX or np.any(np.abs(values) > INT32_MAX):
        raise ExportError("an integer tree threshold or the state's int32 headroom bound fails; refusing to generate C")
    if any((b >> int(r)) > INT16_MAX or not 0 <= r <= 31 for b, r in zip(bounds, qm.state_shift.tolist())):
        raise ExportError("a state shift leaves the readout input beyond int16; refusing to generate C")
    if np.any(qm.headroom > INT32_MAX):
        raise ExportError("a readout's int32 headroom bound fails; refusing to generate C")


def _nodes(qm: TreeInt16Model, layout: TreeLayout, prefix: str) -> str:
    ens = layout.model.ensemble
    lines = []
    for t in range(ens.n_trees):
        a, b = ens.tree_range(t)
        k = int(np.searchsorted(qm.stage_tree, t, side="right") - 1)
        lines.append(f"    /* tree {t}: stage {k}, adds to state {int(ens.target[t])} */")
        lines += [f"    {{{int(qm.node_feature[i])}, {int(qm.node_value[i])}, {{{int(ens.left[i])}u, {int(ens.right[i])}u}}}},"
                  if qm.node_feature[i] >= 0 else f"    {{-1, {int(qm.node_value[i])}, {{0u, 0u}}}},"
                  for i in range(a, b)]
    return f"static const es16_tree_node {prefix}_node[] = {{\n" + "\n".join(lines) + "\n};\n"


def _header(qm: TreeInt16Model, layout: TreeLayout, prefix: str, name: str) -> str:
    model, ens = layout.model, layout.model.ensemble
    sizes = [int(model.group_columns[g].size) for g in layout.order]
    work = _work_per_push(layout)
    cost = (f"/* worst case of one es16_push: node visits (one int32 compare each), readout multiply-adds */\n"
            f"#define {prefix}_NODE_VISITS_PER_PUSH_MAX {max((v for v, _ in work), default=0)}u\n"
            f"#define {prefix}_MACS_PER_PUSH_MAX {max((m for _, m in work), default=0)}u\n"
            f"#define {prefix}_N_STATE {ens.n_targets}u\n"
            f"#define {prefix}_N_TREES {ens.n_trees}u\n"
            f"#define {prefix}_N_NODES {ens.n_nodes}u")
    summary = (f"Integer (int16) tree-stage model for runtime_c/edgeseq_runtime_i16.c: link {model.link};\n"
               f" * {len(model.stages)} stages, {len(layout.order)} groups, {ens.n_trees} trees, {ens.n_nodes} nodes, "
               f"an int32 state of {ens.n_targets},\n * {model.n_outputs} outputs, {sum(sizes)} features.")
    return int16_header_text(prefix, name, generator="c_int16_trees.py", summary=summary,
                             group_names=model.group_names, n_groups=len(layout.order), n_stages=len(model.stages),
                             n_outputs=model.n_outputs,
                             n_pred=qm.n_pred, n_features=sum(sizes),
                             work_words=f"({model.n_outputs}u + 2u * {qm.n_pred}u + {ens.n_targets}u)",
                             work_comment="outputs + 2 prediction slots + the int32 tree state", cost_defines=cost)


def _source(qm: TreeInt16Model, layout: TreeLayout, prefix: str, name: str) -> str:
    model, ens = layout.model, layout.model.ensemble
    have_trees, have_groups = ens.n_trees > 0, bool(layout.order)
    parts = [f"/* Generated by edgeseq (export/c_int16_trees.py) -- do not edit. Model: {c_comment_text(name)} */\n"
             f"#include \"{C_HEADER}\"\n"]
    parts += c_tree_tables(layout, prefix, _nodes(qm, layout, prefix) if have_trees else "")
    for k in range(qm.n_stages):
        parts.append(f"/* stage {k}: readout {qm.n_state} x {qm.n_outputs} row-major; z = z_q * 2^-{int(qm.weight_shift[k])}; "
                     f"headroom bound {int(qm.headroom[k])} */\n"
                     f"static const int16_t {prefix}_coef_{k}[] = {{\n{c_int_rows(qm.coefs[k], INT16_MIN, INT16_MAX)}\n}};\n")
    coef_table = (f"static const int16_t *const {prefix}_coef[] = {{\n"
                  + ",\n".join(f"    {prefix}_coef_{k}" for k in range(qm.n_stages)) + "\n};\n")
    bounds = ", ".join(str(b) for b in qm.state_bound.tolist())
    ptr = lambda ok, what: f"{prefix}_{what}" if ok else "0"  # noqa: E731
    parts.append(f"""/* stage k owns trees stage_tree[k] .. stage_tree[k+1]-1; its walk stops after stage_depth[k] compares */
static const uint32_t {prefix}_stage_tree[] = {{ {c_u32_list(qm.stage_tree)} }};
static const uint32_t {prefix}_stage_depth[] = {{ {c_u32_list(qm.stage_depth)} }};
/* u_d = floor(s_d / 2^state_shift[d]); proved |s_d| <= {bounds} */
static const int32_t {prefix}_state_shift[] = {{
{c_int_rows(qm.state_shift, 0, 31)}
}};
static const es16_trees {prefix}_trees = {{
    {qm.n_stages}u,
    {qm.n_state}u,
    {ens.n_trees}u,
    {ens.n_nodes}u,
    {ptr(have_groups, "group_stage")},
    {prefix}_stage_tree,
    {prefix}_stage_depth,
    {ptr(have_trees, "tree_root")},
    {ptr(have_trees, "tree_target")},
    {ptr(have_trees, "node")},
    {prefix}_state_shift
}};
""")
    sizes = [int(model.group_columns[g].size) for g in layout.order]
    parts.append(int16_descriptor(qm, prefix, name, coef_table=coef_table, order=layout.order, sizes=sizes,
                                  group_names=model.group_names, output_names=model.output_names,
                                  kind="ES16_KIND_TREES", trees=f"&{prefix}_trees"))
    return "\n".join(parts)


def write_c_int16_tree_model(model: TreeStageModel, qm: TreeInt16Model, out_dir, prefix: str,
                             model_name: str | None = None) -> list[str]:
    """Write the int16 edgeseq_model.h/.c of `qm` (quantised from `model`) into out_dir; return their names.

    Raises
    ------
    InputError
        If `prefix` is not a valid C prefix.
    ExportError
        A corrupt tree model (`c_trees.tree_layout`), or integer tables that disagree with it or fail
        a headroom proof.

    Examples
    --------
    The generated source compiles against the integer runtime's header and holds no float type:

    >>> import pathlib, subprocess
    >>> import numpy as np
    >>> from edgeseq.export.c_harness import runtime_dir
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees
    >>> from edgeseq.export.kinds.trees.c_int16 import write_c_int16_tree_model
    >>> model = _demo_model()
    >>> import tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> write_c_int16_tree_model(model, quantize_trees(model, np.zeros((2, 2))), d, "demo")
    ['edgeseq_model.h', 'edgeseq_model.c']
    >>> src = (d / "edgeseq_model.c").read_text()
    >>> "float" in src or "double" in src
    False
    >>> subprocess.run(["gcc", "-std=c99", "-c", "-I", str(runtime_dir()), str(d / "edgeseq_model.c"),
    ...                 "-o", str(d / "m.o")]).returncode
    0
    """
    validate_c_prefix(prefix)
    if not isinstance(model, TreeStageModel) or not isinstance(qm, TreeInt16Model):
        raise ExportError("write_c_int16_tree_model needs a TreeStageModel and its TreeInt16Model")
    layout = tree_layout(model)
    _check(qm, layout)
    name = c_model_name(prefix, model_name)
    return write_c_files(out_dir, _header(qm, layout, prefix, name), _source(qm, layout, prefix, name))


def tree_int16_manifest_entry(qm: TreeInt16Model, n_rows: int) -> dict:
    """The manifest's ``c.int16`` object of a tree-stage export: the linear entry's fields (features in
    C order, per stage the readout's weight shift, headroom and loss; ``prefixes`` holds the stages)
    and, per state dimension, the leaf shift, the proved bound and the readout shift.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees
    >>> from edgeseq.export.kinds.trees.c_int16 import tree_int16_manifest_entry
    >>> e = tree_int16_manifest_entry(quantize_trees(_demo_model(), np.zeros((2, 2))), 2)
    >>> e["state"], len(e["prefixes"])
    ([{'leaf_shift': 27, 'bound': 1610612736, 'shift': 16}], 3)
    """
    return {**int16_entry(qm, qm.columns, n_rows), "state": state_entry(qm)}
