"""The int16 arithmetic every kind's integer model shares, and the bit-exact simulation of its links.

Why one module: the integer decisions that do not depend on the kind -- feature scales, the weight
scale of an affine readout with the accumulator's headroom proof (`quantize_affine`), the link tables
-- are taken by the same code for linear prefixes (`kinds.affine.quantize.quantize_sequence`) and tree
stages (`kinds.trees.quantize.quantize_trees`), and land in an `Int16Model` (or its tree subclass).
The C emitters only print that object and the simulations (`link_q`, `dequantize` here, the kinds'
`simulate` / `simulate_trees`) only execute it; nothing recomputes anything, so C and Python cannot
drift apart.

The arithmetic (docs/integer-models.md), for feature i of the full prefix (sequence order) and prefix j:

* feature: ``x_q = sat16(rint(x * 2**s_i) - O_i)`` -- a power-of-two scale ``s_i`` and an integer
  offset ``O_i`` (real offset ``O_i * 2**-s_i``). Power-of-two scales cost at most one bit of range
  against a free scale, and let an extractor that already works in fixed point quantise with one
  shift and one subtraction (no multiply, no division, no float);
* weights: ``w_q = rint(w * 2**-s_i * 2**S_j)`` (int16) and ``b_q = rint((b + sum_i w * O_i * 2**-s_i) * 2**S_j)``
  (int32), one power-of-two scale ``S_j`` per prefix, the largest with ``max |w_q| <= 32767``;
* accumulation: ``z_q = b_q + sum_i x_q * w_q`` in int32, then ``z ~ z_q * 2**-S_j``. The headroom
  proof: ``|x_q| <= 32768``, so every partial sum is bounded by ``H_p = |b_q| + 32768 * sum_i |w_q|``;
  when ``H_p <= 2**31 - 1`` for every output p nothing can overflow. Where it does not hold, ``S_j``
  is lowered (each step halves ``H_p``) until it does; a prefix whose largest weight would then keep
  fewer than `MIN_WEIGHT_BITS` bits is refused (ExportError) instead of exported imprecise;
* links: identity returns ``z_q`` (scale ``2**S_j`` per prefix, recorded); sigmoid looks the smaller
  probability up in a table indexed by ``|z|`` in steps of ``2**-TABLE_SHIFT`` (probabilities in
  units of ``2**-15``, label ``z_q > 0``); softmax takes the label by integer argmax of ``z_q`` (first
  maximum) and the probabilities from an ``exp(-d)`` table and one integer division each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from edgeseq.errors import ExportError, InputError
from edgeseq.forms.linear import FittedSequence

INT16_MIN, INT16_MAX = -32768, 32767
INT32_MAX = 2**31 - 1
PROB_SHIFT = 15  # probabilities in units of 2**-15 (so 32768 means 1)
TABLE_SHIFT = 5  # link tables step |z| (or zmax - z) by 2**-5
TABLE_LEN = 512  # ... over [0, 16): beyond it sigmoid and exp round to their limit in Q15
MIN_WEIGHT_BITS = 8  # a prefix whose largest |w_q| is below 2**(MIN_WEIGHT_BITS - 1) is refused
SHIFT_LIMIT = 60  # |s_i|, |S_j| stay below it: every shift in C is < 64 bits


@dataclass
class Int16Model:
    """Everything the int16 C model and its simulation compute with; all of it integers.

    Attributes
    ----------
    link : str
        "identity", "sigmoid" or "softmax" (as the FittedSequence).
    n_outputs, n_pred : int
        Width of ``z`` and of a prediction (2 for sigmoid).
    feature_shift, feature_offset : int64 arrays (n_features,)
        ``s_i`` and ``O_i`` of each feature of the full prefix, sequence order.
    coefs : tuple of int64 arrays
        ``coefs[j]`` is ``(d_j, P)``, every value in int16 range.
    intercepts : int64 array (J + 1, P)
        ``b_q`` of each prefix (int32 range).
    weight_shift : int64 array (J + 1,)
        ``S_j``: ``z ~ z_q * 2**-S_j``.
    headroom : int64 array (J + 1,)
        ``max_p H_p`` of each prefix, proven ``<= 2**31 - 1``.
    reduced_bits : int64 array (J + 1,)
        How many bits ``S_j`` was lowered below the weight range for the headroom.
    table : int64 array
        The link table (empty for identity), int16 values.
    cum_cost : float64 array (J + 1,)
        The budget thresholds (copied from the sequence, compared exactly).
    feature_source : str
        Where the feature ranges came from ("calibration-data").
    loss : list of dict
        Per prefix: accuracy loss (percentage points) or explained-variance loss versus float.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.kinds.affine.quantize import quantize_sequence
    >>> X = np.random.default_rng(1).normal(size=(100, 2)); y = 3 * X[:, 0]
    >>> qm = quantize_sequence(AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, y).fitted_sequence_, X, y)
    >>> bool(qm.headroom.max() <= 2**31 - 1), qm.link, len(qm.coefs)
    (True, 'identity', 3)
    """

    link: str
    n_outputs: int
    n_pred: int
    feature_shift: np.ndarray
    feature_offset: np.ndarray
    coefs: tuple
    intercepts: np.ndarray
    weight_shift: np.ndarray
    headroom: np.ndarray
    reduced_bits: np.ndarray
    table: np.ndarray
    cum_cost: np.ndarray
    feature_source: str = "calibration-data"
    loss: list = field(default_factory=list)


# ------------------------------------------------------------------ integer primitives (C semantics)

def floor_shift(v, k: int):
    """``floor(v / 2**k)`` of int64 values for k >= 0: C's portable ``v >= 0 ? v >> k : ~(~v >> k)``.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.quantize import floor_shift
    >>> floor_shift(np.array([-5, -4, 5]), 1).tolist()
    [-3, -2, 2]
    """
    return np.right_shift(np.asarray(v, dtype=np.int64), k)  # numpy's >> on int64 is arithmetic (floor)


def table_index(u, shift: int):
    """Index into a link table of ``u * 2**-shift`` (u >= 0) in steps of ``2**-TABLE_SHIFT``: floor, saturated.

    The C runtime computes the same in uint32 (`es16_table_index`).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.quantize import table_index
    >>> table_index(np.array([0, 31, 32, 10**9]), 10).tolist()   # 2**-10 units: 32 -> 1/32 -> index 1
    [0, 0, 1, 511]
    """
    u = np.asarray(u, dtype=np.int64)
    d = int(shift) - TABLE_SHIFT
    if d >= 0:
        idx = u >> d if d < 63 else np.zeros_like(u)
    else:
        limit = (TABLE_LEN - 1) >> -d
        idx = np.where(u > limit, TABLE_LEN - 1, u << min(-d, 62))
    return np.minimum(idx, TABLE_LEN - 1)


def sigmoid_table() -> np.ndarray:
    """The smaller class probability at |z| in bucket i, in units of 2**-15: ``rint(2**15 * (1 - sigmoid((i + 1/2) / 32)))``.

    Bucket midpoints keep every entry below one half, so the label is the sign of ``z_q``.

    Examples
    --------
    >>> from edgeseq.export.quantize import sigmoid_table
    >>> t = sigmoid_table(); int(t[0]), int(t[-1]), bool((t[:-1] >= t[1:]).all())
    (16256, 0, True)
    """
    mid = (np.arange(TABLE_LEN, dtype=np.float64) + 0.5) * 2.0**-TABLE_SHIFT
    return np.rint(2.0**PROB_SHIFT / (1.0 + np.exp(mid))).astype(np.int64)


def exp_table() -> np.ndarray:
    """``rint(32767 * exp(-i / 32))``: the softmax weight of a class ``i / 32`` below the maximum.

    Examples
    --------
    >>> from edgeseq.export.quantize import exp_table
    >>> t = exp_table(); int(t[0]), int(t[32]), int(t[-1])
    (32767, 12054, 0)
    """
    return np.rint(INT16_MAX * np.exp(-np.arange(TABLE_LEN, dtype=np.float64) * 2.0**-TABLE_SHIFT)).astype(np.int64)


# ------------------------------------------------------------------ choosing the scales

def _max_shift(value: float, limit: float) -> int:
    """Largest integer s (|s| < SHIFT_LIMIT) with ``value * 2**s <= limit`` (value >= 0)."""
    if value == 0.0 or not math.isfinite(value):
        return SHIFT_LIMIT - 1 if value == 0.0 else -(SHIFT_LIMIT - 1)
    s = math.floor(math.log2(limit / value))
    while math.ldexp(value, s) > limit:
        s -= 1
    while math.ldexp(value, s + 1) <= limit:
        s += 1
    return max(-(SHIFT_LIMIT - 1), min(SHIFT_LIMIT - 1, s))


def feature_scales(X_prefix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column ``(s_i, O_i)``: the calibration range ``[lo, hi]`` maps into int16 around ``O_i``.

    ``s_i`` is the largest shift with ``(hi - lo) / 2 * 2**s_i + 1 <= 32767`` (the +1 covers the two
    roundings) and ``|mid| * 2**s_i <= 2**30`` (so the offset fits int32 with room).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.quantize import feature_scales
    >>> s, o = feature_scales(np.array([[0.0, 100.0], [16.0, 100.0]]))
    >>> s.tolist(), o.tolist()     # [0, 16] -> 11 bits around 8; the constant column keeps its value
    ([11, 23], [16384, 838860800])
    """
    lo, hi = X_prefix.min(axis=0), X_prefix.max(axis=0)
    shifts, offsets = [], []
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        mid, half = a / 2.0 + b / 2.0, b / 2.0 - a / 2.0  # halves first: no overflow near the float64 limit
        s = min(_max_shift(half, INT16_MAX - 1.0), _max_shift(abs(mid), 2.0**30))
        if math.ldexp(half, s) > INT16_MAX - 1.0 or math.ldexp(abs(mid), s) > 2.0**30:
            raise InputError(f"calibration column {i} of the prefix spans [{a:.3g}, {b:.3g}], beyond what an int16 "
                             f"feature with a shift of at least -{SHIFT_LIMIT - 1} can hold; rescale that feature")
        shifts.append(s)
        offsets.append(int(np.rint(math.ldexp(mid, s))))
    return np.array(shifts, dtype=np.int64), np.array(offsets, dtype=np.int64)


def headroom(w_q: np.ndarray, b_q: np.ndarray) -> int:
    """``max_p |b_q[p]| + 32768 * sum_i |w_q[i, p]|`` with Python integers (exact): the int32 bound.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.quantize import headroom
    >>> headroom(np.array([[32767], [32767]]), np.array([0])) <= 2**31 - 1  # two full-scale weights fit...
    True
    >>> headroom(np.array([[32767], [32767], [2]]), np.array([0])) > 2**31 - 1  # ...with one more 2, not
    True
    """
    sums = [int(abs(int(b))) + 32768 * int(np.abs(w_q[:, p].astype(object)).sum()) for p, b in enumerate(b_q)]
    return max(sums)


def check_headroom(w_q: np.ndarray, b_q: np.ndarray, where: str) -> int:
    """The proof obligation of the int32 accumulator: ExportError unless `headroom` <= 2**31 - 1.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.quantize import check_headroom
    >>> check_headroom(np.array([[32767], [32767]]), np.array([65535]), "prefix 2")
    2147483647
    >>> check_headroom(np.array([[32767], [32767]]), np.array([65536]), "prefix 2")
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: prefix 2: int32 accumulation could overflow (bound 2147483648 > 2147483647 fails)
    """
    h = headroom(w_q, b_q)
    if h > INT32_MAX or np.abs(w_q).max(initial=0) > INT16_MAX:
        raise ExportError(f"{where}: int32 accumulation could overflow (bound {h} > {INT32_MAX} fails)"
                          if h > INT32_MAX else f"{where}: a weight exceeds int16")
    return h


def _at_shift(w: np.ndarray, b: np.ndarray, s: int) -> tuple:
    """(w_q, b_q) of weights and intercept at the power-of-two scale 2**s; b_q is None beyond int32."""
    w_q = np.rint(np.ldexp(w, s)).astype(np.int64)
    with np.errstate(over="ignore"):
        b_f = np.rint(np.ldexp(b, s))
    return w_q, (b_f.astype(np.int64) if np.all(np.abs(b_f) <= INT32_MAX) else None)


def quantize_affine(w: np.ndarray, b: np.ndarray, j: int, what: str = "prefix") -> tuple:
    """(w_q, b_q, S, H, reduced) of ``z = b + x @ w`` over int16 inputs: the largest weight scale, lowered
    until the headroom proof holds (module text). Shared by the linear prefixes and the tree stages'
    readouts, so both carry one proof; `what` and `j` name the prefix or stage in an ExportError.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.quantize import quantize_affine
    >>> w_q, b_q, S, H, reduced = quantize_affine(np.array([[0.5], [-0.25]]), np.array([1.0]), 1, "stage")
    >>> w_q.ravel().tolist(), int(b_q[0]), S, reduced
    ([16384, -8192], 32768, 15, 0)
    """
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(b))):
        raise ExportError(f"{what} {j}: weights are not finite; the model cannot be quantised")
    wmax = float(np.abs(w).max(initial=0.0))
    s0 = _max_shift(wmax, INT16_MAX) if wmax > 0 else _max_shift(float(np.abs(b).max(initial=0.0)), 2.0**30)
    s = s0
    while True:
        w_q, b_q = _at_shift(w, b, s)
        if b_q is not None and headroom(w_q, b_q) <= INT32_MAX:
            h = headroom(w_q, b_q)
            break
        s -= 1
        if s <= -SHIFT_LIMIT:
            raise ExportError(f"{what} {j}: no weight scale keeps int32 accumulation in range")
    if wmax > 0 and int(np.abs(w_q).max()) < 2 ** (MIN_WEIGHT_BITS - 1):
        raise ExportError(f"{what} {j}: int32 headroom leaves the largest weight {int(np.abs(w_q).max())} "
                          f"(< {MIN_WEIGHT_BITS} bits; intercept or weight sum too large against it); "
                          "export this model with --c-dtype float32")
    check_headroom(w_q, b_q, f"{what} {j}")
    return w_q, b_q, s, h, s0 - s


# ------------------------------------------------------------------ the simulation (C semantics)

def link_q(qm: Int16Model, z: np.ndarray, j: int) -> tuple[np.ndarray, np.ndarray]:
    """(prediction int64 (n, n_pred), label int64 (n,)) from ``z_q`` of prefix j, as `es16_link` computes them.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.quantize import Int16Model, link_q, sigmoid_table
    >>> qm = Int16Model("sigmoid", 1, 2, np.zeros(0, np.int64), np.zeros(0, np.int64), (np.zeros((0, 1), np.int64),),
    ...                 np.array([[0]]), np.array([5]), np.array([0]), np.array([0]), sigmoid_table(), np.array([0.0]))
    >>> link_q(qm, np.array([[0], [64], [-64]]), 0)[0].tolist()   # z = 0, +2, -2 (2**-5 units)
    [[16512, 16256], [3853, 28915], [28915, 3853]]
    """
    n = z.shape[0]
    if qm.link == "identity":
        return z.copy(), np.full(n, -1, dtype=np.int64)
    S = int(qm.weight_shift[j])
    if qm.link == "sigmoid":
        zz = z[:, 0]
        small = qm.table[table_index(np.abs(zz), S)]
        big = (1 << PROB_SHIFT) - small
        pos = zz > 0
        pred = np.stack([np.where(pos, small, big), np.where(pos, big, small)], axis=1)
        return pred.astype(np.int64), pos.astype(np.int64)
    label = np.argmax(z, axis=1).astype(np.int64)  # first maximum
    dz = z.max(axis=1, keepdims=True) - z
    e = qm.table[table_index(dz, S)]
    total = e.sum(axis=1, keepdims=True)
    pred = ((e << PROB_SHIFT) + (total >> 1)) // total
    return pred.astype(np.int64), label


def dequantize(qm: Int16Model, pred: np.ndarray, j: int) -> np.ndarray:
    """Real-valued predictions: ``z_q * 2**-S_j`` (identity) or probabilities ``p * 2**-15``.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.quantize import Int16Model, dequantize
    >>> qm = Int16Model("identity", 1, 1, np.zeros(0, np.int64), np.zeros(0, np.int64), (np.zeros((0, 1), np.int64),),
    ...                 np.array([[0]]), np.array([4]), np.array([0]), np.array([0]), np.zeros(0, np.int64), np.array([0.0]))
    >>> dequantize(qm, np.array([[24]]), 0).tolist()
    [[1.5]]
    """
    shift = int(qm.weight_shift[j]) if qm.link == "identity" else PROB_SHIFT
    return np.ldexp(np.asarray(pred, dtype=np.float64), -shift)


def loss_entry(qm, j: int, f, pred, label, ref=None, *, regression: bool) -> dict:
    """What stage/prefix j of an integer model loses against its float model `f` (predictions (n, P)).

    One rule for every integer model (linear prefixes and tree stages), so their manifest entries mean
    the same: ``accuracy_loss_pp`` and ``label_agreement`` for classifiers (`ref`: true class indices,
    or None to compare with float's own labels), ``explained_variance_loss`` and ``max_abs_error``
    (real units, via `dequantize`) for regression (`ref`: true targets, or None for float's values).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.quantize import Int16Model, loss_entry
    >>> qm = Int16Model("softmax", 2, 2, np.zeros(0, np.int64), np.zeros(0, np.int64), (), np.zeros((1, 2), np.int64),
    ...                 np.array([0]), np.array([0]), np.array([0]), np.zeros(0, np.int64), np.array([0.0]))
    >>> f = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> e = loss_entry(qm, 0, f, None, np.array([0, 0]), np.array([0, 1]), regression=False)
    >>> e["accuracy_loss_pp"], e["label_agreement"]
    (50.0, 0.5)
    """
    n = len(f)
    entry = {"index": j, "reference": "targets" if ref is not None else "float predictions"}
    if regression:
        zf = np.asarray(f, dtype=np.float64).reshape(n, -1)
        zi = dequantize(qm, pred, j)
        r = zf if ref is None else np.asarray(ref, dtype=np.float64).reshape(n, -1)
        entry["explained_variance_loss"] = float(_explained_variance(r, zf) - _explained_variance(r, zi))
        entry["max_abs_error"] = float(np.abs(zi - zf).max())
    else:
        lf = np.argmax(f, axis=1)
        r = lf if ref is None else np.asarray(ref)
        entry["accuracy_loss_pp"] = float(100.0 * ((lf == r).mean() - (label == r).mean()))
        entry["label_agreement"] = float((label == lf).mean())
    return entry


def _class_indices(seq: FittedSequence, y) -> np.ndarray:
    """Index into ``seq.classes`` of every calibration label; InputError for a label the model does not know."""
    index = {c: i for i, c in enumerate(np.asarray(seq.classes).tolist())}
    labels = np.asarray(y).tolist()
    unknown = [v for v in labels if v not in index]
    if unknown:
        raise InputError(f"calibration label {unknown[0]!r} is not one of the model's classes "
                         f"{list(index)[:10]}")
    return np.array([index[v] for v in labels], dtype=np.int64)


def _explained_variance(y: np.ndarray, p: np.ndarray) -> float:
    """Explained variance (averaged over outputs); 1 - var(y - p) / var(y), 0 for constant y."""
    vy = y.var(axis=0)
    ev = np.where(vy > 0, 1.0 - (y - p).var(axis=0) / np.where(vy > 0, vy, 1.0), 0.0)
    return float(ev.mean())
