"""Integer (int16) form of a tree-stage model, and the bit-exact simulation of its C arithmetic.

Why a sibling of `edgeseq.export.quantize`: a tree stage needs three integer decisions a linear prefix
does not (thresholds, leaves, the carried state), but its features and its readout are exactly the
linear path's: the same per-feature power-of-two scale and offset (`quantize.feature_scales`, so an
extractor's contract does not depend on the model kind), the same int16-weight / int32-accumulator
readout with its headroom proof (`quantize.quantize_affine`) and the same integer links
(`quantize.link_q`). Every decision is taken here once and lands in a `TreeInt16Model`; the C emitter
(`export/kinds/trees/c_int16.py`) prints it and `simulate_trees` executes it, nothing recomputes it.

The arithmetic, for the features in the C runtime's order (`c_trees.tree_feature_order`):

* feature: ``x_q = sat16(rint(x * 2**s_i) - O_i)``; its dequantised value is ``(x_q + O_i) * 2**-s_i``.
* threshold: a split ``x <= t`` (t float32) on feature i becomes ``x_q <= t_q`` with
  ``t_q = floor(t * 2**s_i) - O_i``, saturated to ``[-32769, 32767]`` and stored in an int32.
  *Proof.* ``x_q + O_i`` is an integer, so ``(x_q + O_i) * 2**-s_i <= t`` ⇔ ``x_q + O_i <= t * 2**s_i``
  ⇔ ``x_q + O_i <= floor(t * 2**s_i)`` ⇔ ``x_q <= t_q``: the integer decision *is* the float decision
  on the dequantised value. ``t * 2**s_i`` is exact in float64 (a float32 times a power of two with
  ``|s_i| < 60``), so the floor is exact. Saturation keeps it: ``x_q`` lies in ``[-32768, 32767]``,
  so ``t_q >= 32767`` is "always left" like ``32767``, and ``t_q <= -32769`` is "always right" like
  ``-32769`` (the one value outside int16 a threshold needs, hence int32 storage).
* leaves: ``leaf_q = rint(leaf * 2**L_d)`` (int32) with one power-of-two scale ``L_d`` per state
  dimension d. The state ``s_d`` is the sum of one leaf of every tree adding into d, accumulated in
  int32; its headroom bound ``A_d = sum over those trees of max |leaf_q|`` is proved ``<= 2**31 - 1``
  (``L_d`` is the largest scale for which it holds), so no partial sum can overflow, whatever the
  input. A tree whose largest |leaf_q| keeps fewer than `quantize.MIN_WEIGHT_BITS` bits is refused
  (ExportError) rather than exported imprecise.
* readout: the state enters the readout as int16, ``u_d = floor(s_d / 2**r_d)`` with the smallest
  ``r_d >= 0`` such that ``floor(A_d / 2**r_d) <= 32767`` (so ``|u_d| <= 32768`` is proved, not
  saturated); then stage k computes ``z_q = b_q + u @ W_q`` exactly as a linear prefix over int16
  features (``W_q`` int16 with one power-of-two scale ``S_k`` per stage, int32 accumulation, the same
  headroom proof), and the linear path's links (identity scale ``2**S_k``, sigmoid table, softmax
  argmax + exp table).

Leaves, readout weights and biases are taken after rounding to float32 -- the values every ONNX
graph and the float C carry -- so the integer model is a function of what an export keeps.

Examples
--------
>>> import numpy as np
>>> from edgeseq.export.kinds.trees.c_float import _demo_model
>>> from edgeseq.export.kinds.trees.quantize import quantize_trees, quantize_tree_features, simulate_trees
>>> model = _demo_model()                      # stage 1: x0 <= 0.5 ? 1 : 2; stage 2: + 10
>>> X = np.array([[0.0, 0.0], [0.5, 0.0], [1.0, 0.0]])
>>> qm = quantize_trees(model, X)
>>> out = simulate_trees(qm, quantize_tree_features(qm, X))
>>> [np.ldexp(pred[:, 0], -int(qm.weight_shift[k])).tolist() for k, (pred, _) in enumerate(out)]
[[0.0, 0.0, 0.0], [1.0, 1.0, 2.0], [11.0, 11.0, 12.0]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgeseq.errors import ExportError, InputError
from edgeseq.export.kinds.trees.c_float import TreeLayout, tree_feature_order, tree_layout
from edgeseq.export.quantize import (INT16_MAX, INT16_MIN, INT32_MAX, MIN_WEIGHT_BITS, Int16Model, _class_indices,
                                     exp_table, feature_scales, link_q, loss_entry, quantize_affine, sigmoid_table)
from edgeseq.forms.trees import TreeStageModel

THRESHOLD_MIN, THRESHOLD_MAX = INT16_MIN - 1, INT16_MAX  # t_q range: -32769 means "never left"


@dataclass(kw_only=True)
class TreeInt16Model(Int16Model):
    """Everything the int16 tree C model and its simulation compute with; all of it integers.

    An `Int16Model` whose "prefixes" are the stages' readouts (``coefs[k]`` is stage k's ``W_q``
    (n_state, P), ``intercepts``, ``weight_shift``, ``headroom``, ``reduced_bits`` per stage, the link
    table, ``cum_cost`` per stage, ``loss`` per stage), so the linear path's link and loss code applies
    unchanged; plus the trees and the state.

    Attributes
    ----------
    n_state : int
        State dimension.
    columns : int64 array (n_features,)
        Raw column of each feature, in the C runtime's order (groups in sequence order); the
        inherited ``feature_shift`` / ``feature_offset`` are per entry of it.
    node_feature : int64 array (n_nodes,)
        Position of each split's feature among ``columns`` (-1 at leaves).
    node_value : int64 array (n_nodes,)
        ``t_q`` at splits (in [-32769, 32767]), ``leaf_q`` at leaves (int32).
    left, right, roots, target, tree_depth : int64 arrays
        The ensemble's structure, unchanged (`TreeEnsemble`).
    stage_tree : int64 array (n_stages + 1,)
        Stage k owns trees ``stage_tree[k] .. stage_tree[k+1]-1``.
    stage_depth : int64 array (n_stages,)
        Deepest tree of each stage (the bound of the C walk).
    group_stage, order : lists of int
        The stage of each sequence position; original group indices in sequence order.
    leaf_shift, state_bound, state_shift : int64 arrays (n_state,)
        ``L_d``, the proved bound ``A_d`` on ``|s_d|`` (<= 2**31 - 1) and ``r_d``.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees
    >>> qm = quantize_trees(_demo_model(), np.array([[0.0, 0.0], [1.0, 1.0]]))
    >>> qm.state_bound.tolist(), qm.leaf_shift.tolist(), qm.state_shift.tolist()   # leaves 1, 2 | 10 into one state
    ([1610612736], [27], [16])
    """

    n_state: int
    columns: np.ndarray
    node_feature: np.ndarray
    node_value: np.ndarray
    left: np.ndarray
    right: np.ndarray
    roots: np.ndarray
    target: np.ndarray
    tree_depth: np.ndarray
    stage_tree: np.ndarray
    stage_depth: np.ndarray
    group_stage: list
    order: list
    leaf_shift: np.ndarray
    state_bound: np.ndarray
    state_shift: np.ndarray

    @property
    def n_stages(self) -> int:
        """Number of stages K + 1.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.export.kinds.trees.c_float import _demo_model
        >>> from edgeseq.export.kinds.trees.quantize import quantize_trees
        >>> quantize_trees(_demo_model(), np.zeros((1, 2))).n_stages
        3
        """
        return int(self.stage_tree.shape[0] - 1)


# ------------------------------------------------------------------ the decisions

def threshold_q(t, shift, offset) -> np.ndarray:
    """``t_q = floor(t * 2**shift) - offset`` saturated to [-32769, 32767], int64 (see the module proof).

    `t` must be float32 values (as `TreeEnsemble` stores them); the product is exact in float64.

    Examples
    --------
    With scale 2**2 (quantum 0.25) and offset 0, ``x <= 0.6`` holds on the grid for x_q <= 2 (x = 0.5):

    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.quantize import threshold_q
    >>> threshold_q(np.float32([0.6, 0.5, -1e9, 1e9]), np.array([2, 2, 2, 2]), np.array([0, 0, 0, 0])).tolist()
    [2, 2, -32769, 32767]
    """
    t = np.asarray(t, dtype=np.float32).astype(np.float64)
    scaled = np.floor(np.ldexp(t, np.asarray(shift, dtype=np.int64)))
    lo, hi = THRESHOLD_MIN + np.asarray(offset, np.float64), THRESHOLD_MAX + np.asarray(offset, np.float64)
    return (np.clip(scaled, lo, hi) - np.asarray(offset, np.float64)).astype(np.int64)  # exact: |values| < 2**33


def _tree_max_leaf(leaves: np.ndarray, is_leaf: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """Per tree, the largest |value| over its leaves (object-free, via reduceat on the node ranges)."""
    if roots.size == 0:
        return np.zeros(0)
    return np.maximum.reduceat(np.where(is_leaf, np.abs(leaves), 0), roots.astype(np.int64))


def leaf_bounds(leaf_q: np.ndarray, is_leaf: np.ndarray, roots: np.ndarray, target: np.ndarray, n_state: int) -> list:
    """``A_d``: per state dimension, the sum over its trees of max |leaf_q| (exact Python integers).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.quantize import leaf_bounds
    >>> leaf_bounds(np.array([0, 5, -7, 3]), np.array([False, True, True, True]), np.array([0, 3]),
    ...             np.array([0, 0]), 2)
    [10, 0]
    """
    per_tree = _tree_max_leaf(leaf_q.astype(np.int64), is_leaf, roots)
    bounds = [0] * n_state
    for t, d in enumerate(target.tolist()):
        bounds[d] += int(per_tree[t])
    return bounds


def _leaf_scales(value32: np.ndarray, is_leaf: np.ndarray, roots: np.ndarray, target: np.ndarray,
                 n_state: int) -> tuple[np.ndarray, np.ndarray, list]:
    """(leaf_q per node, L_d per dimension, A_d per dimension): the largest scale with A_d <= 2**31 - 1."""
    leaf_q = np.zeros(value32.shape[0], np.int64)
    shifts, bounds = np.zeros(n_state, np.int64), [0] * n_state
    per_tree = _tree_max_leaf(value32, is_leaf, roots)
    for d in range(n_state):
        trees = np.flatnonzero(target == d)
        total = float(per_tree[trees].sum()) if trees.size else 0.0
        if total == 0.0:
            continue  # no tree (or only zero leaves) adds into d: its state stays 0 at any scale
        nodes = np.concatenate([np.arange(roots[t], roots[t + 1] if t + 1 < roots.size else value32.shape[0])
                                for t in trees.tolist()])
        nodes = nodes[is_leaf[nodes]]
        s = math.floor(math.log2(INT32_MAX / total)) + 1
        while True:  # lower until the exact bound (after rounding) holds
            q = np.rint(np.ldexp(value32[nodes], s)).astype(np.int64)
            leaf_q[nodes] = q
            bound = leaf_bounds(leaf_q, is_leaf, roots, target, n_state)[d]
            if bound <= INT32_MAX:
                break
            s -= 1
        weakest = _tree_max_leaf(np.abs(leaf_q), is_leaf, roots)[trees]
        live = per_tree[trees] > 0
        if np.any(weakest[live] < 2 ** (MIN_WEIGHT_BITS - 1)):
            t = int(trees[live][np.argmin(weakest[live])])
            raise ExportError(f"state dimension {d}: the int32 headroom of its {trees.size} trees leaves tree {t}'s "
                              f"largest leaf {int(weakest[live].min())} (< {MIN_WEIGHT_BITS} bits; leaf magnitudes "
                              "differ too much between trees); export this model with --c-dtype float32")
        shifts[d], bounds[d] = s, bound
    return leaf_q, shifts, bounds


def state_shift(bound: int) -> int:
    """Smallest r >= 0 with ``floor(bound / 2**r) <= 32767``: the state enters the readout as int16.

    Examples
    --------
    >>> from edgeseq.export.kinds.trees.quantize import state_shift
    >>> state_shift(32767), state_shift(32768), state_shift(2**31 - 1)
    (0, 1, 16)
    """
    r = 0
    while (bound >> r) > INT16_MAX:
        r += 1
    return r


def _float32(a) -> np.ndarray:
    return np.asarray(a, np.float32).astype(np.float64)


def quantize_trees(model: TreeStageModel, X, y=None, *, classes=None, source: str = "calibration-data") -> TreeInt16Model:
    """The integer model of a tree-stage `model`, with feature ranges from the calibration rows `X`.

    `X` has the model's raw columns; `y` (optional) gives true targets for the recorded loss, as labels
    among `classes` (default: the model's own, else ``0..n_classes-1``; an AFRClassifier's
    ``classes_``).

    Raises
    ------
    InputError
        If `X` is empty, has the wrong width or non-finite values in the features the model reads.
    ExportError
        A corrupt model (`c_trees.tree_layout`'s checks), a tree whose leaves would keep fewer than
        `MIN_WEIGHT_BITS` bits under the state's headroom, or a readout that cannot be quantised.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees
    >>> quantize_trees(_demo_model(), np.zeros((3, 5)))
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: calibration data has 5 columns; the model reads 2
    """
    layout = tree_layout(model)  # re-validates every index and remaps features to pushed positions
    model = layout.model
    ens = model.ensemble
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != ens.n_features:
        raise InputError(f"calibration data has {X.shape[-1] if X.ndim else 0} columns; the model reads "
                         f"{ens.n_features}")
    cols = tree_feature_order(model)
    if X.shape[0] == 0 or not np.all(np.isfinite(X[:, cols])):
        raise InputError("calibration data must have at least one row and only finite values in the model's groups")
    shifts, offsets = feature_scales(X[:, cols]) if cols.size else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    qm = _build(model, layout, shifts, offsets, source)
    qm.loss = stage_losses(model, qm, X, y, classes=classes)
    return qm


def _build(model: TreeStageModel, layout: TreeLayout, shifts, offsets, source, stage_shifts=None) -> TreeInt16Model:
    """The TreeInt16Model from the feature scales (and, when rebuilding, the recorded readout shifts)."""
    ens, stages = model.ensemble, model.stages
    is_leaf = ens.feature < 0
    feat = layout.feature
    value = np.zeros(ens.n_nodes, np.int64)
    split = ~is_leaf
    value[split] = threshold_q(ens.threshold[split], shifts[feat[split]], offsets[feat[split]])
    leaf_q, L, A = _leaf_scales(_float32(ens.value), is_leaf, ens.roots.astype(np.int64),
                                ens.target.astype(np.int64), ens.n_targets)
    value[is_leaf] = leaf_q[is_leaf]
    r = np.array([state_shift(a) for a in A], np.int64)
    readouts = []
    for k, s in enumerate(stages):
        w = np.ldexp(_float32(s.W), (r - L)[:, None])  # z = sum_d W_dp * u_d * 2**(r_d - L_d) + b_p
        readouts.append(quantize_affine(w, _float32(s.b), k, "stage") if stage_shifts is None
                        else _readout_at(w, _float32(s.b), k, stage_shifts[k]))
    coefs, icpt, S, H, red = zip(*readouts)
    table = {"identity": np.zeros(0, np.int64), "sigmoid": sigmoid_table(), "softmax": exp_table()}[model.link]
    i64 = lambda a: np.asarray(a, np.int64)  # noqa: E731
    return TreeInt16Model(
        link=model.link, n_outputs=model.n_outputs, n_pred=2 if model.link == "sigmoid" else model.n_outputs,
        n_state=ens.n_targets, columns=tree_feature_order(model), feature_shift=i64(shifts),
        feature_offset=i64(offsets), node_feature=i64(feat), node_value=value, left=i64(ens.left),
        right=i64(ens.right), roots=i64(ens.roots), target=i64(ens.target), tree_depth=i64(ens.depth),
        stage_tree=i64([s.tree_start for s in stages] + [stages[-1].tree_stop]), stage_depth=i64(layout.depth),
        group_stage=list(layout.group_stage), order=list(layout.order), leaf_shift=L, state_bound=i64(A),
        state_shift=r, coefs=tuple(coefs), intercepts=i64(icpt), weight_shift=i64(S), headroom=i64(H),
        reduced_bits=i64(red), table=table, cum_cost=np.asarray(model.cum_cost, np.float64), feature_source=source)


def quantize_trees_from_manifest(model: TreeStageModel, entry: dict) -> TreeInt16Model:
    """Rebuild the integer model of a tree export from its trees (`model`, read from the graphs) and the
    scales its manifest records (`entry` = ``manifest["c"]["int16"]``), without the calibration rows.

    Why: `edgeseq verify` regenerates the int16 C and compares it byte for byte. Thresholds follow from
    the recorded feature scales, leaf scales and state shifts from the float32 leaves alone (so they
    are recomputed and must equal the recorded ones), the readouts from the recorded weight shifts,
    whose headroom proof is re-run. The per-stage loss is copied from the manifest.

    Raises
    ------
    IntegrityError
        Features that are not the model's, a scale out of range, a recorded leaf scale, bound or
        shift that is not the one the trees give, or a readout shift that breaks its proof.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.c_int16 import tree_int16_manifest_entry
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees, quantize_trees_from_manifest
    >>> model = _demo_model()
    >>> qm = quantize_trees(model, np.array([[0.0, 1.0], [1.0, 3.0]]))
    >>> entry = tree_int16_manifest_entry(qm, 2)
    >>> back = quantize_trees_from_manifest(model, entry)
    >>> bool(np.array_equal(back.node_value, qm.node_value)), back.loss == qm.loss
    (True, True)
    >>> entry["state"][0]["shift"] += 1
    >>> quantize_trees_from_manifest(model, entry)
    Traceback (most recent call last):
    ...
    edgeseq.errors.IntegrityError: manifest c.int16: the recorded state scales ... are not the ones the trees give ...
    """
    from edgeseq.errors import IntegrityError
    from edgeseq.export.quantize import SHIFT_LIMIT

    layout = tree_layout(model)
    model = layout.model
    feats, stages = entry["features"], entry["prefixes"]
    if [f["column"] for f in feats] != tree_feature_order(model).tolist() or len(stages) != len(model.stages):
        raise IntegrityError("manifest c.int16: its features or stages do not match the export's tree model")
    shifts = np.array([f["shift"] for f in feats], dtype=np.int64)
    offsets = np.array([f["offset"] for f in feats], dtype=np.int64)
    if np.any(np.abs(shifts) >= SHIFT_LIMIT) or np.any(np.abs(offsets) > INT32_MAX):
        raise IntegrityError(f"manifest c.int16: a feature shift is beyond +-{SHIFT_LIMIT - 1} or an offset beyond int32")
    try:
        qm = _build(model, layout, shifts, offsets, entry["feature_source"], stage_shifts=stages)
    except ExportError as exc:
        raise IntegrityError(f"manifest c.int16: {exc}") from None

    state = state_entry(qm)
    if entry.get("state") != state:
        raise IntegrityError(f"manifest c.int16: the recorded state scales {str(entry.get('state'))[:80]} are not "
                             f"the ones the trees give {str(state)[:80]}")
    qm.loss = [{"index": k, "reference": entry.get("loss_reference"),
                **{key: v for key, v in p.items() if key not in ("index", "weight_shift", "headroom", "reduced_bits")}}
               for k, p in enumerate(stages)]
    return qm


def _readout_at(w, b, k, recorded: dict) -> tuple:
    """A readout quantised at a recorded scale (rebuilding an export): the headroom proof re-run."""
    from edgeseq.errors import IntegrityError
    from edgeseq.export.quantize import SHIFT_LIMIT, _at_shift, headroom

    s_k = recorded["weight_shift"]
    if not isinstance(s_k, int) or abs(s_k) >= SHIFT_LIMIT:
        raise IntegrityError(f"manifest c.int16: stage {k}'s weight_shift {s_k!r} is not an integer within "
                             f"+-{SHIFT_LIMIT - 1}")
    w_q, b_q = _at_shift(w, b, s_k)
    if b_q is None or np.abs(w_q).max(initial=0) > INT16_MAX:
        raise IntegrityError(f"manifest c.int16: stage {k}'s recorded weight_shift {s_k} does not give int16 "
                             "weights and an int32 bias for the export's readout")
    h = headroom(w_q, b_q)
    if h > INT32_MAX or h != recorded["headroom"]:
        raise IntegrityError(f"manifest c.int16: stage {k}'s headroom is {h}, the manifest says {recorded['headroom']}")
    return w_q, b_q, s_k, h, recorded["reduced_bits"]


def quantize_tree_features(qm: TreeInt16Model, X) -> np.ndarray:
    """int16 feature rows in the C order, from raw rows `X`: ``sat16(rint(x * 2**s_i) - O_i)``.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees, quantize_tree_features
    >>> X = np.array([[0.0, 1.0], [1.0, 3.0]])
    >>> xq = quantize_tree_features(quantize_trees(_demo_model(), X), X); xq.dtype.name, xq.shape
    ('int16', (2, 2))
    """
    Xc = np.asarray(X, dtype=np.float64)[:, qm.columns]
    q = np.rint(np.ldexp(Xc, qm.feature_shift)) - qm.feature_offset
    return np.clip(q, INT16_MIN, INT16_MAX).astype(np.int16)


# ------------------------------------------------------------------ the simulation (C semantics)

def tree_leaves_q(qm: TreeInt16Model, xq, trees) -> np.ndarray:
    """``leaf_q`` reached by every row in each tree of `trees`: (n, len(trees)) int64.

    The walk is the C one: ``x_q <= t_q`` goes left, at most the tree's depth comparisons.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees, tree_leaves_q
    >>> qm = quantize_trees(_demo_model(), np.array([[0.0, 0.0], [1.0, 0.0]]))
    >>> xq = np.array([[qm.node_value[0], 0], [qm.node_value[0] + 1, 0]], dtype=np.int16)  # on / past t_q
    >>> (tree_leaves_q(qm, xq, [0])[:, 0] >> int(qm.leaf_shift[0])).tolist()
    [1, 2]
    """
    xq = np.asarray(xq, dtype=np.int64)
    rows = np.arange(xq.shape[0])
    out = []
    for t in trees:
        node = np.full(xq.shape[0], qm.roots[t], dtype=np.int64)
        for _ in range(int(qm.tree_depth[t])):
            f = qm.node_feature[node]
            split = f >= 0
            go_left = xq[rows, np.where(split, f, 0)] <= qm.node_value[node]
            node = np.where(split, np.where(go_left, qm.left[node], qm.right[node]), node)
        out.append(qm.node_value[node])
    return np.column_stack(out) if out else np.zeros((xq.shape[0], 0), np.int64)


def readout_input(qm: TreeInt16Model, state: np.ndarray) -> np.ndarray:
    """``u_d = floor(s_d / 2**r_d)`` (C: the portable arithmetic shift), asserted within int16 as proved.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees, readout_input
    >>> qm = quantize_trees(_demo_model(), np.zeros((1, 2)))
    >>> int(qm.state_shift[0]), readout_input(qm, np.array([[-3 << 16]])).tolist()
    (16, [[-3]])
    """
    u = np.right_shift(np.asarray(state, np.int64), qm.state_shift[None, :])
    assert np.all((u >= INT16_MIN) & (u <= INT16_MAX)), "state headroom proof violated"
    return u


def simulate_trees(qm: TreeInt16Model, xq) -> list:
    """Every stage's integer (prediction (n, n_pred), label (n,)) for int16 rows `xq` (bit-identical to the C).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees, quantize_tree_features, simulate_trees
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> qm = quantize_trees(_demo_model(), X)
    >>> [pred[:, 0].tolist() for pred, _ in simulate_trees(qm, quantize_tree_features(qm, X))][1]  # 1 and 2 at 2**25
    [33554432, 67108864]
    """
    xq = np.asarray(xq)
    state = np.zeros((xq.shape[0], qm.n_state), np.int64)
    out = []
    for k in range(qm.n_stages):
        trees = range(int(qm.stage_tree[k]), int(qm.stage_tree[k + 1]))
        leaves = tree_leaves_q(qm, xq, trees)
        for c, t in enumerate(trees):
            state[:, qm.target[t]] += leaves[:, c]
        assert np.all(np.abs(state) <= INT32_MAX), "state headroom proof violated"
        z = readout_input(qm, state) @ qm.coefs[k] + qm.intercepts[k]
        assert np.all(np.abs(z) <= INT32_MAX), "readout headroom proof violated"
        out.append(link_q(qm, z, k))
    return out


@dataclass(frozen=True)
class _Labels:
    classes: np.ndarray  # what quantize._class_indices reads


def stage_losses(model: TreeStageModel, qm: TreeInt16Model, X: np.ndarray, y=None, *, classes=None) -> list[dict]:
    """Per stage, what the integer model loses against float on rows `X` (`quantize.loss_entry`).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees
    >>> loss = quantize_trees(_demo_model(), np.array([[0.0, 0.0], [1.0, 0.0]])).loss
    >>> [round(e["max_abs_error"], 6) for e in loss]
    [0.0, 0.0, 0.0]
    """
    regression = model.link == "identity"
    if classes is None:
        classes = model.classes if model.classes is not None else np.arange(qm.n_pred)
    ref = (y if regression else _class_indices(_Labels(np.asarray(classes)), y)) if y is not None else None
    sims = simulate_trees(qm, quantize_tree_features(qm, X))
    floats = [model.apply_link(z) for z in model.staged_decision(X)]
    return [loss_entry(qm, k, f, pred, label, ref, regression=regression)
            for k, (f, (pred, label)) in enumerate(zip(floats, sims))]


def state_entry(qm: TreeInt16Model) -> list[dict]:
    """Per state dimension ``{"leaf_shift", "bound", "shift"}``: the manifest's record of the state scales.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees, state_entry
    >>> state_entry(quantize_trees(_demo_model(), np.zeros((2, 2))))
    [{'leaf_shift': 27, 'bound': 1610612736, 'shift': 16}]
    """
    return [{"leaf_shift": int(L), "bound": int(A), "shift": int(r)}
            for L, A, r in zip(qm.leaf_shift.tolist(), qm.state_bound.tolist(), qm.state_shift.tolist())]
