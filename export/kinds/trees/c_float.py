"""Generate `edgeseq_model.h` / `edgeseq_model.c` for a tree-stage model (AFR, imported LightGBM).

The single source is `edgeseq.forms.trees.TreeStageModel`: this module only lays its arrays out for
the C runtime (`runtime_c/`, kind ES_KIND_TREES) and decides nothing a training step decided. What
it does add is the C view of the same numbers:

* groups in *sequence order* (the stages' new groups, stage after stage) and, per group, the stage
  it belongs to; a push completes that stage when it is the stage's last group;
* split features remapped from raw column indices to positions in the features pushed so far (the
  groups' columns concatenated in sequence order, see `tree_feature_order`);
* one 8-byte `es_tree_node` per node, each tree in pre-order (`tree_preorder`): split
  ``{threshold, feature, right}`` compared as ``x <= threshold`` on float32, its left child the next
  node and its right child ``right`` nodes on; leaf ``{value, 0, 0}`` in place, the value
  rounded to float32;
* per stage: its tree range, its trees' maximum depth (the bound of the C walk) and its readout.

Everything the C will index is re-proved here before any text is written (the ensemble is rebuilt
through `TreeEnsemble`'s validating constructor, stage ranges and remapped features are checked
against the C integer types), and every float must be finite in float32 -- including a proven bound
on the state and the readout, so the C state can never overflow. One ExportError line otherwise.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from edgeseq.errors import EdgeseqError, ExportError
from edgeseq.format import C_HEADER
from edgeseq.export.c_codegen import (c_descriptor, c_float, c_link_enum, c_float_rows, c_header_text, c_model_name,
                                      c_model_tables, c_u32_list, validate_c_prefix, write_c_files)
from edgeseq.export.choices import check_choice
from edgeseq.export.names import c_comment_text
from edgeseq.forms.trees import TreeEnsemble, TreeStageModel

_C_INDEX_MAX = (1 << 31) - 1  # every count and index must fit int32_t / uint32_t with room to spare
_FLT_MAX = float(np.finfo(np.float32).max)
_NODE_OFFSET_MAX = 0xFFFF  # the C node's 16-bit right-child offset and feature index (0xFFFF marks a leaf)


@dataclasses.dataclass(frozen=True)
class TreeLayout:
    """The C view of a TreeStageModel: what `write_c_tree_model` emits, as arrays.

    Attributes
    ----------
    model : TreeStageModel
        The model, its ensemble and stages re-validated (what the emitter reads).
    order : list of int
        Original group indices in sequence order (the order es_push expects them).
    group_stage : list of int
        The stage each sequence position belongs to (1..K).
    feature : numpy.ndarray
        Per node: position of its split feature among the pushed features, or -1 at a leaf.
    depth : numpy.ndarray
        Per stage: the maximum depth of its trees (0 without trees).
    node_visits, macs : numpy.ndarray
        Per stage: worst-case node visits (sum over its trees of depth + 1) and readout
        multiply-adds (n_state x P).
    push_stages : list of range
        The stages each push runs (index j = push of sequence position j); ``reset_stages`` those
        es_init / es_reset run.

    Examples
    --------
    >>> layout = tree_layout(_demo_model())
    >>> layout.order, layout.group_stage, layout.feature.tolist()
    ([0, 1], [1, 2], [0, -1, -1, -1])
    >>> [list(r) for r in layout.push_stages], list(layout.reset_stages)
    ([[1], [2]], [0])
    """

    model: TreeStageModel
    order: list
    group_stage: list
    feature: np.ndarray
    depth: np.ndarray
    node_visits: np.ndarray
    macs: np.ndarray
    push_stages: list
    reset_stages: range


def tree_feature_order(model: TreeStageModel) -> np.ndarray:
    """Raw feature columns in the order the C runtime holds them: each group's columns, groups in
    sequence order. ``X[:, tree_feature_order(model)]`` is what the driver pushes (and what
    `c_harness.run_c` expects for an exported tree model's directory).

    Examples
    --------
    >>> tree_feature_order(_demo_model()).tolist()
    [0, 1]
    """
    order = _sequence(model)[0]
    cols = [model.group_columns[g] for g in order]
    return np.concatenate(cols).astype(np.int64) if cols else np.zeros(0, np.int64)


def _sequence(model: TreeStageModel) -> tuple[list, list]:
    order = [int(g) for s in model.stages for g in s.new_groups]
    group_stage = [k for k, s in enumerate(model.stages) for _ in s.new_groups]
    return order, group_stage


def _revalidated(model: TreeStageModel) -> TreeStageModel:
    """The model with its ensemble rebuilt through the validating constructors (arrays reached by
    object.__setattr__ or a re-enabled write flag are checked again), as an ExportError."""
    try:
        ens = model.ensemble
        rebuilt = TreeEnsemble(**{f.name: getattr(ens, f.name) for f in dataclasses.fields(TreeEnsemble)})
        fields = {f.name: getattr(model, f.name) for f in dataclasses.fields(TreeStageModel)}
        return TreeStageModel(**{**fields, "ensemble": rebuilt})
    except EdgeseqError as exc:
        raise ExportError(f"cannot generate C for this tree model: {exc}") from None


def tree_layout(model: TreeStageModel) -> TreeLayout:
    """Validate `model` for the C runtime and compute its C layout (see `TreeLayout`).

    Raises
    ------
    ExportError
        A corrupt ensemble or stage table, a count beyond the C integer types, a stage without new
        groups that costs something (C runs it in its predecessor's push, so no budget could stop
        between them as Python's rule can), a stage reading a feature not pushed by then.

    Examples
    --------
    >>> tree_layout(_demo_model()).depth.tolist()
    [0, 1, 0]
    """
    model = _revalidated(model)
    ens, stages = model.ensemble, model.stages
    order, group_stage = _sequence(model)
    P, S = model.n_outputs, ens.n_targets
    if max(ens.n_nodes, ens.n_trees, len(stages) + 1, S, P, ens.n_features, S * P) > _C_INDEX_MAX:
        raise ExportError("the tree model is too large for the C runtime's 32-bit indices")
    for k, s in enumerate(stages[1:], start=1):
        if not s.new_groups and s.cost != 0.0:
            raise ExportError(f"stage {k} needs no new group but costs {s.cost!r}: the C runtime runs it in "
                              f"stage {k - 1}'s push, so its cost must be 0")
    position = np.full(ens.n_features, -1, np.int64)
    cols = tree_feature_order(model)
    position[cols] = np.arange(cols.size)
    split = ens.feature >= 0
    feature = np.where(split, position[np.where(split, ens.feature, 0)], -1)
    pushed = np.cumsum([0] + [int(model.group_columns[g].size) for g in order])
    depth, visits = np.zeros(len(stages), np.int64), np.zeros(len(stages), np.int64)
    for k, s in enumerate(stages):
        d_k = int(pushed[sum(1 for st in group_stage if st <= k)])
        if s.tree_stop > s.tree_start:
            a, b = ens.tree_range(s.tree_start)[0], ens.tree_range(s.tree_stop - 1)[1]
            used = feature[a:b][split[a:b]]
            if used.size and (used.min() < 0 or used.max() >= d_k):
                raise ExportError(f"stage {k} splits on a feature that is not pushed by then; refusing to generate C")
            depth[k] = int(ens.depth[s.tree_start:s.tree_stop].max())
            visits[k] = int((ens.depth[s.tree_start:s.tree_stop].astype(np.int64) + 1).sum())
    macs = np.full(len(stages), S * P, np.int64)
    # stages each push runs: up to the stage of the next group minus one (all stages after the last)
    limits = [st - 1 for st in group_stage] + [len(stages) - 1]
    push_stages = [range(limits[j] + 1, limits[j + 1] + 1) for j in range(len(order))]
    _check_float32(model)
    return TreeLayout(model, order, group_stage, feature, depth, visits, macs, push_stages, range(0, limits[0] + 1))


def _check_float32(model: TreeStageModel) -> None:
    """Leaves, readouts and a proven bound on |state| and |z| must be finite in float32.

    |s_i| <= A_i = sum over trees into dimension i of max |leaf| (float32-rounded), and
    |z_p| <= sum_i |W_ip| A_i + |b_p|; requiring both <= FLT_MAX / 2 leaves far more room than the
    float32 rounding of the partial sums can take, so the C state and readout never overflow.
    """
    ens = model.ensemble
    leaf = ens.feature < 0
    with np.errstate(over="ignore"):
        leaves32 = np.abs(ens.value.astype(np.float32)).astype(np.float64)
    if not np.all(np.isfinite(leaves32[leaf])):
        raise ExportError("a leaf value overflows float32; the model cannot be exported to C")
    A = np.zeros(ens.n_targets)
    for t in range(ens.n_trees):
        a, b = ens.tree_range(t)
        A[ens.target[t]] += leaves32[a:b][leaf[a:b]].max()
    for k, s in enumerate(model.stages):
        with np.errstate(over="ignore"):
            finite = np.all(np.isfinite(s.W.astype(np.float32))) and np.all(np.isfinite(s.b.astype(np.float32)))
        zmax = (np.abs(s.W).T @ A + np.abs(s.b)).max() if finite else np.inf
        if not finite or A.max(initial=0.0) > _FLT_MAX / 2 or zmax > _FLT_MAX / 2:
            raise ExportError(f"stage {k}'s readout or the tree state could overflow float32 (bound {zmax:.3g}); "
                              "rescale the targets and refit")


def _work_per_push(layout: TreeLayout) -> list:
    return [(int(layout.node_visits[list(r)].sum()), int(layout.macs[list(r)].sum())) for r in layout.push_stages]


def _header(model: TreeStageModel, layout: TreeLayout, prefix: str, name: str, code_header: str = "") -> str:
    ens, P = model.ensemble, model.n_outputs
    n_pred = 2 if model.link == "sigmoid" else P
    sizes = [int(model.group_columns[g].size) for g in layout.order]
    work = _work_per_push(layout)
    reset = (int(layout.node_visits[list(layout.reset_stages)].sum()), int(layout.macs[list(layout.reset_stages)].sum()))
    rows = [f" *   push {j + 1:>3} ({c_comment_text(model.group_names[g])}): stages "
            f"{_stage_text(layout.push_stages[j])}, {v} node visits + {m} multiply-adds"
            for j, (g, (v, m)) in enumerate(zip(layout.order, work))]
    summary = (f" * Link: {model.link}; tree stages: {len(model.stages)} stages, {len(layout.order)} groups, "
               f"{ens.n_trees} trees, {ens.n_nodes} nodes,\n * state of {ens.n_targets} floats, {P} readout outputs, "
               f"{sum(sizes)} features in the full sequence.\n"
               f" * Work of each push (tree walks: at most depth + 1 node visits per tree; readout: state x outputs\n"
               f" * multiply-adds per stage run):\n"
               f" *   es_init / es_reset: stages {_stage_text(layout.reset_stages)}, {reset[0]} node visits + "
               f"{reset[1]} multiply-adds\n" + ("\n".join(rows) if rows else " *   (no groups)"))
    worst = max(work, key=sum, default=(0, 0))
    cost = (f"/* worst case of one es_push: node visits (one float compare each), readout multiply-adds, their sum */\n"
            f"#define {prefix}_NODE_VISITS_PER_PUSH_MAX {max((v for v, _ in work), default=0)}u\n"
            f"#define {prefix}_MACS_PER_PUSH_MAX {max((m for _, m in work), default=0)}u\n"
            f"#define {prefix}_WORK_PER_PUSH_MAX {sum(worst)}u\n"
            f"#define {prefix}_N_STATE {ens.n_targets}u\n"
            f"#define {prefix}_N_TREES {ens.n_trees}u\n"
            f"#define {prefix}_N_NODES {ens.n_nodes}u" + (f"\n{code_header}" if code_header else ""))
    return c_header_text(prefix, name, generator="c_trees.py", summary=summary, group_names=model.group_names,
                         order=layout.order, sizes=sizes, n_outputs=P, n_pred=n_pred, n_stages=len(model.stages),
                         work_floats=f"({sum(sizes)}u + {P}u + 2u * {n_pred}u + {ens.n_targets}u)",
                         work_comment="features + readout outputs + 2 prediction slots + tree state",
                         cost_defines=cost)


def _stage_text(r: range) -> str:
    return "none" if len(r) == 0 else (f"{r.start}" if len(r) == 1 else f"{r.start}-{r.stop - 1}")


def tree_preorder(model: TreeStageModel) -> tuple[np.ndarray, np.ndarray]:
    """The C node order: each tree's nodes in pre-order from its root (left subtree first), so a
    split's left child is the next node; and per C node the distance to its right child (0 at a leaf).

    The walk of a pre-order array goes left by stepping to the adjacent node and right by a short
    jump, and a leaf sits where the walk arrives: one 8-byte node per step, no child table. Trees keep
    their node ranges (the permutation stays inside each tree), so ``tree_root`` is unchanged.

    Returns
    -------
    order : numpy.ndarray
        ``order[c]`` is the ensemble node stored at C position c.
    right : numpy.ndarray
        Per C position: C position of the right child minus c, or 0 at a leaf.

    Raises
    ------
    ExportError
        A tree of more than 65,535 nodes (the 16-bit offset of the C node).

    Examples
    --------
    >>> order, right = tree_preorder(_demo_model())
    >>> order.tolist(), right.tolist()
    ([0, 1, 2, 3], [2, 0, 0, 0])
    """
    ens = model.ensemble
    order = np.empty(ens.n_nodes, np.int64)
    right = np.zeros(ens.n_nodes, np.int64)
    left_of, right_of, split = ens.left.tolist(), ens.right.tolist(), (ens.feature >= 0).tolist()
    for t in range(ens.n_trees):
        a, b = ens.tree_range(t)
        if b - a > _NODE_OFFSET_MAX:
            raise ExportError(f"tree {t} has {b - a} nodes; the C runtime's 16-bit offsets allow {_NODE_OFFSET_MAX}")
        c, stack, pending = a, [a], []  # pending: (C position of a split, its right child) to patch
        placed = {}
        while stack:
            i = stack.pop()
            order[c], placed[i] = i, c
            if split[i]:
                stack.append(right_of[i])
                stack.append(left_of[i])
                pending.append((c, right_of[i]))
            c += 1
        if c != b:
            raise ExportError(f"cannot generate C for this tree model: tree {t} has nodes its root does not reach")
        for pos, r in pending:
            right[pos] = placed[r] - pos
    return order, right


def _nodes(model: TreeStageModel, layout: TreeLayout, prefix: str) -> str:
    ens = model.ensemble
    if ens.n_features > _NODE_OFFSET_MAX - 1:
        raise ExportError(f"a tree model of {ens.n_features} features is too wide for the C runtime's 16-bit "
                          f"feature index (at most {_NODE_OFFSET_MAX - 1})")
    order, right = tree_preorder(model)
    stage_of = np.zeros(ens.n_trees, np.int64)
    for k, s in enumerate(model.stages):
        stage_of[s.tree_start:s.tree_stop] = k
    lines = []
    first = set(ens.roots.tolist())
    tree = -1
    for c in range(ens.n_nodes):
        if c in first:
            tree += 1
            lines.append(f"    /* tree {tree}: stage {stage_of[tree]}, adds to state {int(ens.target[tree])} */")
        i = int(order[c])
        if ens.feature[i] >= 0:
            lines.append(f"    {{{c_float(ens.threshold[i])}, {int(layout.feature[i])}u, {int(right[c])}u}},")
        else:
            lines.append(f"    {{{c_float(ens.value[i])}, 0u, 0u}},")
    return f"static const es_tree_node {prefix}_node[] = {{\n" + "\n".join(lines) + "\n};\n"


C_TREES = ("auto", "table", "code")
# `auto` writes code up to this many nodes: below CODE_CHUNK_MIN_NODES (no chunks) gcc -O2 spends a
# near-constant CPU time per node of the code form (bench/tree_code_compile.py, rendered in
# docs/c-runtime.md: 0.28 ms on the 100-tree regression on an idle Intel Xeon, 0.7-0.9 ms on a loaded
# AMD EPYC), so this cut keeps its compile within about 2 s even on the slower machine; beyond it the
# tables compile as data in a fraction of a second at any size
CODE_AUTO_MAX_NODES = 2_500
# the code form walks a stage of more than CODE_CHUNK_MIN_NODES nodes in chunk functions of at most
# CODE_CHUNK_TREES trees (`tree_code`); chosen from the chunk table of bench/tree_code_compile.py
# (gcc 12 -O2 CPU time on x86-64, emulated Cortex-M4F ticks at -O2, flash at -Os). On the digits
# model's 998-tree, 24,636-node stage every chunk size from 4 to 16 compiles in about a third of the
# time of one function (their differences are within the run-to-run spread on a loaded machine) and
# runs fewer ticks (gcc optimises small functions better than one beyond its limits); the ticks fall
# and the flash grows with the chunk size (a call per chunk): 8 runs ~7 % fewer ticks than 4 at
# ~1 % more flash than one function, 16 ~4 % fewer than 8 but at ~3 %. On the regression model's 82-tree,
# 5,002-node stage chunks of 8 save little compile time and cost ~8 % of flash (gcc -Os spends more
# code on small functions than its limits let it spend on a very large one), so stages below
# CODE_CHUNK_MIN_NODES stay one function.
CODE_CHUNK_TREES = 8
CODE_CHUNK_MIN_NODES = 10_000


def resolve_c_trees(model: TreeStageModel, c_trees: str = "auto") -> str:
    """The form of the float C tree stages: "table" (8-byte nodes walked by the runtime) or "code".

    ``"auto"`` picks the code form for models of at most `CODE_AUTO_MAX_NODES` nodes and the tables
    beyond: the code form is faster on Cortex-M cores (M4F and M0 measured) but its compile time grows
    with the model, most of a millisecond of gcc -O2 per node (less than half of that in a stage
    written in chunks, see `tree_code`), while the tables compile as data. At 1,000 trees no
    code form compiles in 2 s, even unoptimised; the tables do, in a fraction of a second.

    Raises
    ------
    ExportError
        `c_trees` is not one of `C_TREES`.

    Examples
    --------
    >>> resolve_c_trees(_demo_model()), resolve_c_trees(_demo_model(), "table")
    ('code', 'table')
    """
    check_choice(c_trees, C_TREES, "C tree form")
    if c_trees != "auto":
        return c_trees
    return "code" if model.ensemble.n_nodes <= CODE_AUTO_MAX_NODES else "table"


def _c_above(feature: int, threshold, bits: str) -> str:
    """C condition "not (x[feature] <= threshold)" on the bit pattern of x, as one integer compare.

    For finite float32 x and t the order of the bit patterns gives the float order (IEEE 754 keeps
    magnitudes sorted within a sign): when t >= +0 (or t is -0, the same threshold), x <= t exactly
    when the pattern of x as int32 is <= that of +|t| (a negative x, -0 included, has the sign bit,
    so it is below every non-negative pattern); when t < 0, x <= t exactly when x is negative with a
    magnitude >= |t|, that is when its pattern as uint32 is >= t's. es_push refuses NaN and +-Inf
    and `c_float` refuses a non-finite threshold, so the two operands are always finite. An integer
    compare with a constant replaces the float compare and the move of the FPU flags on Cortex-M4F
    (one instruction fewer per split) and a library call on cores without an FPU, and the compiler
    decides a later split on the same feature from the integer ranges the earlier ones established
    (it threads the jump; float compares it keeps) -- at the price of more compile time per node.

    Examples
    --------
    >>> _c_above(3, 0.5, "b"), _c_above(0, -0.0, "b"), _c_above(1, -1.5, "b")
    ('b(x + 3) > 0x3f000000 /* 0.5f */', 'b(x + 0) > 0 /* -0.0f */', '(uint32_t)b(x + 1) < 0xbfc00000u /* -1.5f */')
    """
    t = np.float32(threshold)
    text = c_float(t)  # refuses a non-finite threshold
    u = int(np.array(t, np.float32).view(np.uint32))
    if t == 0.0:
        return f"{bits}(x + {feature}) > 0 /* {text} */"
    if u < 0x80000000:
        return f"{bits}(x + {feature}) > 0x{u:08x} /* {text} */"
    return f"(uint32_t){bits}(x + {feature}) < 0x{u:08x}u /* {text} */"


def _tree_chain(ens, layout: TreeLayout, t: int, order: np.ndarray, right: np.ndarray, acc: str,
                bits: str) -> list[str]:
    """Tree t as a branch chain in its C pre-order: a split falls through to its left child (the next
    node) when ``x[f] <= t`` and jumps to its right child otherwise; a leaf sets ``leaf`` and jumps to
    the tree's end (the last leaf of the pre-order falls through), where one addition adds it to
    `acc` -- the walk's addition, written once per tree rather than once per leaf (less flash). Every
    label is a right child, the target of exactly one jump, or the end, so no label is unused."""
    a, b = ens.tree_range(t)
    targets = {c + int(right[c]) for c in range(a, b) if right[c] != 0}
    rows, end_used = [], False  # (label or "", statement)
    for c in range(a, b):
        i = int(order[c])
        label = f"t{t}_{c - a}" if c in targets else ""
        if ens.feature[i] >= 0:
            rows.append((label, f"if ({_c_above(int(layout.feature[i]), ens.threshold[i], bits)}) "
                                f"goto t{t}_{c - a + int(right[c])};"))
        elif c == b - 1:
            rows.append((label, f"leaf = {c_float(ens.value[i])};"))
        else:
            rows.append((label, f"leaf = {c_float(ens.value[i])}; goto t{t}_end;"))
            end_used = True
    rows.append((f"t{t}_end" if end_used else "", f"{acc} += leaf;"))
    return [f"    /* tree {t} */"] + [f"{lab}: {st}" if lab else f"    {st}" for lab, st in rows]


def _stage_trees(stage) -> range:
    """The trees of a stage in the order the code form adds their leaves: tree order, as the walk."""
    return range(stage.tree_start, stage.tree_stop)


def _readout_code(stage, p_out: int) -> tuple[list[str], set]:
    """Stage readout ``z = b_k + s W_k`` as C statements (one per output) and the state entries read.

    The runtime's readout (``es_affine``) adds ``s[i] * W[i][p]`` to ``b[p]`` for every i in order;
    here the terms with ``W[i][p] == 0`` are left out and ``s[i] * 1`` is written ``s[i]``, which
    gives the same float32 bits: ``s[i] * 0`` is a zero (s is finite), and adding a zero to a sum
    changes it only when the sum is -0 (then ``-0 + +0`` is ``+0``); a sum that starts at
    ``b[p] != -0`` can never be -0 before its first non-zero term, since a product with a non-zero
    weight is -0 only for a zero s[i] and ``x + (-x)`` is ``+0``. So for ``b[p] == -0`` every term is
    written. An imported boosted ensemble's readout is ``I`` (a random forest's ``I / n``): one
    addition per output instead of ``n_state`` multiply-adds.

    Examples
    --------
    >>> from edgeseq.forms.trees import TreeStage
    >>> st = TreeStage((), 0.0, 0, 0, np.array([[1.0, 0.0], [0.0, 0.5]]), np.array([0.25, -0.0]))
    >>> _readout_code(st, 2)
    (['    z[0] = 0.25f + s0;', '    z[1] = -0.0f + s0 * 0.0f + s1 * 0.5f;'], {0, 1})
    """
    W, b = np.asarray(stage.W, np.float32), np.asarray(stage.b, np.float32)
    rows, used = [], set()
    for q in range(p_out):
        every = b[q] == 0.0 and np.signbit(b[q])
        expr = c_float(b[q])
        for i in range(W.shape[0]):
            if W[i, q] != 0.0 or every:
                used.add(i)
                expr += f" + s{i}" if W[i, q] == 1.0 else f" + s{i} * {c_float(W[i, q])}"
        rows.append(f"    z[{q}] = {expr};")
    return rows, used


def _tree_chunks(ens, trees, per_chunk: int) -> list[tuple[int, list]]:
    """The chunks of a stage's trees: (state entry, trees) per chunk, each at most `per_chunk` trees
    that all add to that entry, consecutive among that entry's trees, ordered by their first tree.

    The float32 sum of a state entry depends only on the order of the leaves added to it, and each
    entry's trees keep their tree order (its chunks are called in the order of their trees), so the
    sums are the table walk's bit for bit; trees adding to other entries do not touch it.

    Examples
    --------
    >>> ens = _demo_model().ensemble
    >>> _tree_chunks(ens, range(2), 1)
    [(0, [0]), (0, [1])]
    """
    runs, chunks = {}, []
    for t in trees:
        i = int(ens.target[t])
        if i not in runs or len(runs[i]) == per_chunk:
            runs[i] = []
            chunks.append((i, runs[i]))
        runs[i].append(t)
    return chunks


def tree_code(model: TreeStageModel, layout: TreeLayout, prefix: str) -> tuple[str, str]:
    """(header text, source text) of the code form of the tree stages (see `resolve_c_trees`).

    Per stage a ``static`` function ``<prefix>_stage<k>(x, state, z)``: the state entries its
    trees add to held in locals, then each tree as a branch chain (`_tree_chain`) adding its leaf
    to its target's local -- tree after tree, the float32 additions of the runtime's table walk in
    the same order, so the two forms give the same bits -- the locals stored back, and the stage's
    readout written into z (`_readout_code`, the bits of the runtime's). A split compares the bit
    pattern of x with the threshold's as integers (`_c_above`).

    A stage of more than `CODE_CHUNK_MIN_NODES` nodes and `CODE_CHUNK_TREES` trees walks its trees
    in chunk functions ``float <prefix>_stage<k>_<c>(x, s)`` instead (`_tree_chunks`): each takes
    one state entry's value, adds the leaves of at most `CODE_CHUNK_TREES` of that entry's trees
    (consecutive among them, in tree order) and returns it; the stage function holds the entries in
    locals, calls the chunks in the order of their first trees, stores the entries back and reads
    out. Each entry gets the same float32 additions in the same order as in one function, so the
    bits do not change. The split is for the compiler: gcc's time on one function grows faster than
    linearly with its branches, so a large stage compiles in chunks in about a third of the time
    (the chunk table of bench/tree_code_compile.py); a chunk's call passes and returns one float in
    registers, a few instructions. The sizes are chosen from that table: chunks of 8 trees keep the
    flash within about 1 % and run fewer Cortex-M4F ticks than one function; stages under 10,000
    nodes compile near-linearly as one function, where chunks would only cost flash (the comment at
    `CODE_CHUNK_TREES` gives the figures).

    Then the table ``<prefix>_tree_code`` for ``es_init_code``, tied to ``<prefix>_model`` (whose
    descriptor then has no node tables, so no runtime can walk tables that are not there). Each
    feature and state index read was proved in range by `tree_layout` (features pushed by the stage); the source also
    asserts the largest of each against the model's sizes at compile time.

    Examples
    --------
    >>> h, c = tree_code(_demo_model(), tree_layout(_demo_model()), "m")
    >>> print(h.splitlines()[1])
    #define m_TREE_CODE 1
    >>> print(chr(10).join(c.splitlines()[23:36]))
    static void m_stage1(const float *x, float *state, float *z)
    {
        float s0 = state[0];
        float leaf = 0.0f; /* the leaf a tree reaches, added once at its end */
        (void)x; /* a stage of leaves alone reads no feature */
        /* tree 0 */
        if (m_bits(x + 0) > 0x3f000000 /* 0.5f */) goto t0_2;
        leaf = 1.0f; goto t0_end;
    t0_2: leaf = 2.0f;
    t0_end: s0 += leaf;
        state[0] = s0;
        z[0] = 0.0f + s0;
    }
    """
    ens, stages = model.ensemble, model.stages
    order, right = tree_preorder(model)
    funcs, table = [], []
    max_feature = int(layout.feature.max(initial=-1))
    bits = f"{prefix}_bits"
    per_chunk = max(1, int(CODE_CHUNK_TREES))
    for k, st in enumerate(stages):
        trees = _stage_trees(st)
        readout, read = _readout_code(st, model.n_outputs)
        added = sorted({int(ens.target[t]) for t in trees})
        name = f"{prefix}_stage{k}"
        nodes = ens.tree_range(st.tree_stop - 1)[1] - ens.tree_range(st.tree_start)[0] if len(trees) else 0
        body = [f"static void {name}(const float *x, float *state, float *z)", "{"]
        body += [f"    float s{i} = state[{i}];" for i in sorted(read | set(added))]
        if len(trees) > per_chunk and nodes > CODE_CHUNK_MIN_NODES:  # chunk functions (`_tree_chunks`)
            for c, (i, run) in enumerate(_tree_chunks(ens, trees, per_chunk)):
                funcs.append("\n".join(
                    [f"static float {name}_{c}(const float *x, float s)", "{",
                     "    float leaf = 0.0f; /* the leaf a tree reaches, added once at its end */",
                     "    (void)x; /* a chunk of leaves alone reads no feature */"]
                    + [row for t in run for row in _tree_chain(ens, layout, t, order, right, "s", bits)]
                    + ["    return s;", "}"]))
                body.append(f"    s{i} = {name}_{c}(x, s{i});")
        else:
            if len(trees):
                body += ["    float leaf = 0.0f; /* the leaf a tree reaches, added once at its end */"]
            body += ["    (void)x; /* a stage of leaves alone reads no feature */"]
            if not read and not added:
                body += ["    (void)state;"]
            for t in trees:
                body += _tree_chain(ens, layout, t, order, right, f"s{int(ens.target[t])}", bits)
        body += [f"    state[{i}] = s{i};" for i in added]
        funcs.append("\n".join(body + readout + ["}"]))
        table.append(name)
    header = (f"/* the tree stages as code (no node tables): start with es_init_code(&st, &{prefix}_tree_code, ...) */\n"
              f"#define {prefix}_TREE_CODE 1\n"
              f"extern const es_tree_code {prefix}_tree_code;")
    bound = f"{int(ens.target.max(initial=0))}u < {prefix}_N_STATE"
    if max_feature >= 0:
        bound = f"{max_feature}u < {prefix}_N_FEATURES && {bound}"
    source = (f"/* TREE STAGES AS CODE (es_init_code): the same leaves added in the same order as the table walk;\n"
              f"   the largest feature and state index the code reads, asserted at compile time */\n"
              f"typedef char {prefix}_code_reads_in_range[{bound} ? 1 : -1];\n\n"
              + (f"/* the bit pattern of a pushed feature (finite: es_push refuses NaN and +-Inf); a split\n"
                 f"   compares it with its threshold's as an integer, which orders finite floats as <= does */\n"
                 f"static int32_t {bits}(const float *p)\n{{\n    union {{\n        float f;\n        int32_t i;\n"
                 f"    }} b;\n    b.f = *p;\n    return b.i;\n}}\n\n" if bool((ens.feature >= 0).any()) else "")
              + "\n\n".join(funcs)
              + f"\n\nstatic const es_tree_stage_fn {prefix}_stage_code[] = {{ {', '.join(table)} }};\n"
              f"const es_tree_code {prefix}_tree_code = {{ &{prefix}_model, {len(stages)}u, {prefix}_stage_code }};\n")
    return header, source


def c_tree_tables(layout: TreeLayout, prefix: str, nodes: str) -> list[str]:
    """The index tables every tree C model carries (float and int16 alike): the node array text
    `nodes`, tree roots and targets (when there are trees) and the stage of each group position.

    Examples
    --------
    >>> parts = c_tree_tables(tree_layout(_demo_model()), "m", "/* nodes */")
    >>> parts[1].splitlines()[0], parts[2].splitlines()[-1]
    ('static const uint32_t m_tree_root[] = { 0u, 3u };', 'static const uint32_t m_group_stage[] = { 1u, 2u };')
    """
    ens = layout.model.ensemble
    parts = []
    if ens.n_trees > 0 and nodes:  # none for the code form (`tree_code`)
        parts.append(nodes)
        parts.append(f"static const uint32_t {prefix}_tree_root[] = {{ {c_u32_list(ens.roots)} }};\n"
                     f"static const uint32_t {prefix}_tree_target[] = {{ {c_u32_list(ens.target)} }};\n")
    if layout.order:
        parts.append(f"/* the stage each group (sequence order) belongs to */\n"
                     f"static const uint32_t {prefix}_group_stage[] = {{ {c_u32_list(layout.group_stage)} }};\n")
    return parts


def _source(model: TreeStageModel, layout: TreeLayout, prefix: str, name: str, code_source: str = "",
            c_link: str = "commit") -> str:
    ens, stages = model.ensemble, model.stages
    sizes = [int(model.group_columns[g].size) for g in layout.order]
    have_trees, have_groups = ens.n_trees > 0 and not code_source, bool(layout.order)  # code: no node tables
    parts = [f"/* Generated by edgeseq (export/c_trees.py) -- do not edit. Model: {c_comment_text(name)} */\n"
             f"#include \"{C_HEADER}\"\n"]
    parts += c_tree_tables(layout, prefix, _nodes(model, layout, prefix) if have_trees else "")
    bounds = [s.tree_start for s in stages] + [stages[-1].tree_stop]
    ptr = lambda ok, what: f"{prefix}_{what}" if ok else "0"  # noqa: E731
    parts.append(f"""/* stage k owns trees stage_tree[k] .. stage_tree[k+1]-1, whose longest path has stage_depth[k] compares */
static const uint32_t {prefix}_stage_tree[] = {{ {c_u32_list(bounds)} }};
static const uint32_t {prefix}_stage_depth[] = {{ {c_u32_list(layout.depth)} }};
/* readout of each stage: W_k ({ens.n_targets} x {model.n_outputs} row-major), stage after stage, and b_k */
static const float {prefix}_readout_w[] = {{
{c_float_rows(np.concatenate([s.W.ravel() for s in stages]))}
}};
static const float {prefix}_readout_b[] = {{
{c_float_rows(np.concatenate([s.b.ravel() for s in stages]))}
}};
{c_model_tables(prefix, group_names=model.group_names, order=layout.order, sizes=sizes,
                output_names=model.output_names, cum_cost=model.cum_cost)}
static const es_trees {prefix}_trees = {{
    {len(stages)}u,
    {ens.n_targets}u,
    {ens.n_trees}u,
    {ens.n_nodes if have_trees else 0}u,
    {ptr(have_groups, "group_stage")},
    {prefix}_stage_tree,
    {prefix}_stage_depth,
    {prefix}_readout_w,
    {prefix}_readout_b,
    {ptr(have_trees, "tree_root")},
    {ptr(have_trees, "tree_target")},
    {ptr(have_trees, "node")}
}};

{c_descriptor(prefix, name, model.link, coef="0", intercept="0", kind="ES_KIND_TREES", trees=f"&{prefix}_trees",
              c_link=c_link)}""")
    if code_source:
        parts.append(code_source)
    return "\n".join(parts)


def write_c_tree_model(model: TreeStageModel, out_dir, prefix: str, model_name: str | None = None,
                       c_trees: str = "table", c_link: str = "commit") -> list[str]:
    """Write edgeseq_model.h/.c for a tree-stage model into out_dir; return the file names written.

    `c_link`: "commit" (default) applies the link at every stage's commit, "read" commits raw scores
    and lets ``es_current`` apply it (`edgeseq.export.c_codegen.c_link_enum`; the same bits, no
    ``expf`` per stage, the link's cost moved to each read).

    Same contract as `c_codegen.write_c_model`: `prefix` starts every C symbol and macro (validated),
    `model_name` (default: prefix) is the descriptor's name string, both files are written
    atomically. The header adds the tree constants ``<prefix>_N_STAGES``, ``_N_STATE``, ``_N_TREES``,
    ``_N_NODES`` and the worst-case work of one push, ``_NODE_VISITS_PER_PUSH_MAX``,
    ``_MACS_PER_PUSH_MAX`` (readout) and ``_WORK_PER_PUSH_MAX`` (their sum over the worst push).

    Raises
    ------
    InputError
        For an invalid `prefix` (as `write_c_model`).
    ExportError
        The model is inconsistent or too large for the C integer types, a value is not finite in
        float32, its state or readout could overflow float32, or a stage without new groups costs
        something (see `tree_layout`).

    Examples
    --------
    >>> import pathlib, subprocess, tempfile
    >>> from edgeseq.export.c_harness import runtime_dir
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> write_c_tree_model(_demo_model(), d, "demo")
    ['edgeseq_model.h', 'edgeseq_model.c']
    >>> "#define demo_N_STAGES 3u" in (d / "edgeseq_model.h").read_text()
    True
    >>> subprocess.run(["gcc", "-std=c99", "-c", "-I", str(runtime_dir()), str(d / "edgeseq_model.c"),
    ...                 "-o", str(d / "m.o")]).returncode
    0
    """
    validate_c_prefix(prefix)
    if not isinstance(model, TreeStageModel):
        raise ExportError(f"write_c_tree_model needs a TreeStageModel, got {type(model).__name__}")
    c_link_enum(model.link, c_link)  # an unknown mode fails before anything is written
    form = resolve_c_trees(model, c_trees)
    layout = tree_layout(model)
    name = c_model_name(prefix, model_name)
    checked = layout.model
    code_h, code_c = tree_code(checked, layout, prefix) if form == "code" and checked.ensemble.n_trees else ("", "")
    return write_c_files(out_dir, _header(checked, layout, prefix, name, code_h),
                         _source(checked, layout, prefix, name, code_c, c_link))


def _demo_model() -> TreeStageModel:
    """The two-group, two-tree model of `edgeseq.forms.trees`' examples (for the doctests here)."""
    from edgeseq.forms.trees import TreeStage
    ens = TreeEnsemble(feature=[0, -1, -1, -1], threshold=[0.5, 0, 0, 0], left=[1, -1, -1, -1],
                       right=[2, -1, -1, -1], value=[1.0, 1.0, 2.0, 10.0], roots=[0, 3], target=[0, 0],
                       n_features=2, n_targets=1)
    one, zero = np.ones((1, 1)), np.zeros(1)
    return TreeStageModel(group_names=("a", "b"), group_columns=([0], [1]), costs=[1.0, 2.0], ensemble=ens,
                          stages=(TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero),
                                  TreeStage((1,), 2.0, 1, 2, one, zero)),
                          link="identity", output_names=("y",))
