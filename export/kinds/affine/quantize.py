"""The affine kind's int16 quantisation: an `Int16Model` of a linear/GLM sequence, and its bit-exact simulation.

Every integer decision for a `FittedSequence` -- feature scales, per-prefix weight scales, the
accumulator's headroom, the link table -- is taken here once, from the sequence and the calibration
rows, and lands in an `Int16Model`. The C emitter (`kinds.affine.c_int16`) only prints that object and
`simulate` only executes it; neither recomputes anything, so C and Python cannot drift apart. The
arithmetic itself (feature scales, `quantize_affine` with its headroom proof, the link tables and
`link_q`) is the int16 spine in `edgeseq.export.quantize`, shared with the trees' quantiser.

Examples
--------
>>> import numpy as np
>>> from edgeseq import AnytimeClassifier
>>> from edgeseq.export.kinds.affine.quantize import quantize_sequence, quantize_features, simulate
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(200, 4)); y = (X[:, 0] + X[:, 2] > 0).astype(int)
>>> seq = AnytimeClassifier(groups=[[0, 1], [2, 3]], costs=[1.0, 2.0]).fit(X, y).fitted_sequence_
>>> qm = quantize_sequence(seq, X, y)
>>> pred, label = simulate(qm, quantize_features(qm, X), 2)
>>> pred.dtype, bool((label == seq.apply_link(seq.linear(X, 2)).argmax(1)).mean() > 0.97)
(dtype('int64'), True)
"""

from __future__ import annotations

import numpy as np

from edgeseq.errors import InputError
from edgeseq.export.quantize import (INT16_MAX, INT16_MIN, INT32_MAX, SHIFT_LIMIT, Int16Model, _at_shift,
                                     _class_indices, exp_table, feature_scales, headroom, link_q, loss_entry,
                                     quantize_affine, sigmoid_table)
from edgeseq.forms.linear import FittedSequence


def quantize_features(qm: Int16Model, X_prefix) -> np.ndarray:
    """int16 feature rows as the extractor must deliver them: ``sat16(rint(x * 2**s_i) - O_i)``.

    `X_prefix` holds the columns of the full prefix in sequence order (`FittedSequence.prefix_columns`).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.kinds.affine.quantize import quantize_sequence, quantize_features
    >>> X = np.random.default_rng(1).normal(size=(100, 2)); y = X[:, 0]
    >>> seq = AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, y).fitted_sequence_
    >>> qm = quantize_sequence(seq, X, y)
    >>> xq = quantize_features(qm, X[:, seq.prefix_columns(2)]); xq.dtype, int(abs(xq).max()) <= 32767
    (dtype('int16'), True)
    """
    X = np.asarray(X_prefix, dtype=np.float64)
    q = np.rint(np.ldexp(X, qm.feature_shift)) - qm.feature_offset
    return np.clip(q, INT16_MIN, INT16_MAX).astype(np.int16)


def _prefix_weights(seq: FittedSequence, j: int, shifts: np.ndarray, offsets: np.ndarray):
    """Prefix j's weights and intercept folded onto the quantised features, in float64 (real units of z)."""
    d = seq.coefs[j].shape[0]
    w = np.ldexp(seq.coefs[j], -shifts[:d, None])
    b = seq.intercepts[j] + (seq.coefs[j] * np.ldexp(offsets[:d].astype(np.float64), -shifts[:d])[:, None]).sum(axis=0)
    return w, b


def float32_weights(seq: FittedSequence) -> FittedSequence:
    """`seq` with its weights and intercepts rounded to float32, as every graph and the float C carry them.

    The integer model is quantised from these values, so `edgeseq verify` can rebuild it bit for bit
    from the weights an export keeps (its graphs) and the scales its manifest records.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.kinds.affine.quantize import float32_weights
    >>> X = np.random.default_rng(1).normal(size=(50, 2))
    >>> seq = AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, X[:, 0] / 3).fitted_sequence_
    >>> bool(np.array_equal(float32_weights(seq).coefs[2], seq.coefs[2].astype(np.float32)))
    True
    """
    import dataclasses

    return dataclasses.replace(seq, coefs=[np.asarray(c, np.float32).astype(np.float64) for c in seq.coefs],
                               intercepts=np.asarray(seq.intercepts, np.float32).astype(np.float64))


def quantize_sequence(seq: FittedSequence, X, y=None, *, source: str = "calibration-data") -> Int16Model:
    """The integer model of a linear/GLM `seq`, with feature ranges from the calibration rows `X`.

    `X` has the model's raw columns (``seq.n_features_in``); `y` (optional) gives true targets for the
    recorded loss (without it, the loss is measured against the float model's own predictions).

    Raises
    ------
    InputError
        If `X` is empty, has the wrong width or non-finite values.
    ExportError
        If a prefix cannot be quantised with the int32 headroom proof (see the module text).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.kinds.affine.quantize import quantize_sequence
    >>> X = np.random.default_rng(1).normal(size=(100, 2)); y = X[:, 0]
    >>> seq = AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, y).fitted_sequence_
    >>> quantize_sequence(seq, X[:, :1])
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: calibration data has 1 columns; the model reads 2
    """
    FittedSequence.validate(seq)
    seq = float32_weights(seq)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != seq.n_features_in:
        raise InputError(f"calibration data has {X.shape[-1] if X.ndim else 0} columns; the model reads "
                         f"{seq.n_features_in}")
    if X.shape[0] == 0 or not np.all(np.isfinite(X)):
        raise InputError("calibration data must have at least one row and only finite values")
    J = seq.n_groups
    cols = seq.prefix_columns(J)
    shifts, offsets = feature_scales(X[:, cols]) if cols.size else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    prefixes = [quantize_affine(*_prefix_weights(seq, j, shifts, offsets), j) for j in range(J + 1)]
    qm = _int16_model(seq, shifts, offsets, prefixes, source)
    qm.loss = prefix_losses(seq, qm, X, y)
    return qm


def _int16_model(seq: FittedSequence, shifts, offsets, prefixes: list, source: str) -> Int16Model:
    """The Int16Model of `seq` from per-feature scales and per-prefix (w_q, b_q, S, H, reduced) tuples."""
    coefs, icpt, S, H, red = zip(*prefixes)
    table = {"identity": np.zeros(0, np.int64), "sigmoid": sigmoid_table(), "softmax": exp_table()}[seq.link]
    return Int16Model(link=seq.link, n_outputs=seq.n_outputs, n_pred=2 if seq.link == "sigmoid" else seq.n_outputs,
                      feature_shift=shifts, feature_offset=offsets, coefs=tuple(coefs),
                      intercepts=np.array(icpt, dtype=np.int64), weight_shift=np.array(S, dtype=np.int64),
                      headroom=np.array(H, dtype=np.int64), reduced_bits=np.array(red, dtype=np.int64),
                      table=table, cum_cost=np.asarray(seq.cum_cost, dtype=np.float64), feature_source=source)


def quantize_from_manifest(seq: FittedSequence, entry: dict) -> Int16Model:
    """Rebuild the integer model of an export from its weights (`seq`, read from the graphs) and the
    scales its manifest records (`entry` = ``manifest["c"]["int16"]``), without the calibration rows.

    Why: `edgeseq verify` must regenerate the int16 C and compare it byte for byte, as it does for the
    float C, and the calibration rows are not part of an export. Every integer table is a function of
    the float32 weights and the recorded shifts and offsets; the headroom proof is re-run on the
    result, and the headroom the manifest states must be the one recomputed. The per-prefix loss is
    copied from the manifest (it is not in the C).

    Raises
    ------
    IntegrityError
        If a recorded scale is out of range, gives weights outside int16 or an intercept outside int32,
        breaks the headroom proof, or disagrees with the recorded headroom.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.kinds.affine.c_int16 import int16_manifest_entry
    >>> from edgeseq.export.kinds.affine.quantize import quantize_from_manifest, quantize_sequence
    >>> X = np.random.default_rng(1).normal(size=(100, 2))
    >>> seq = AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, 3 * X[:, 0] + 0.1).fitted_sequence_
    >>> qm = quantize_sequence(seq, X)
    >>> entry = int16_manifest_entry(seq, qm, len(X))
    >>> back = quantize_from_manifest(seq, entry)
    >>> all(np.array_equal(a, b) for a, b in zip(back.coefs, qm.coefs)), np.array_equal(back.intercepts, qm.intercepts)
    (True, True)
    >>> entry["prefixes"][2]["weight_shift"] += 3           # an edited scale: weights beyond int16
    >>> quantize_from_manifest(seq, entry)
    Traceback (most recent call last):
    ...
    edgeseq.errors.IntegrityError: manifest c.int16: prefix 2's recorded weight_shift ... does not give int16 weights ...
    """
    from edgeseq.errors import IntegrityError

    seq = float32_weights(seq)
    J = seq.n_groups
    feats, prefs = entry["features"], entry["prefixes"]
    cols = seq.prefix_columns(J).tolist()
    if [f["column"] for f in feats] != cols or len(prefs) != J + 1:
        raise IntegrityError("manifest c.int16: its features or prefixes do not match the export's sequence")
    shifts = np.array([f["shift"] for f in feats], dtype=np.int64)
    offsets = np.array([f["offset"] for f in feats], dtype=np.int64)
    if np.any(np.abs(shifts) >= SHIFT_LIMIT) or np.any(np.abs(offsets) > INT32_MAX):
        raise IntegrityError(f"manifest c.int16: a feature shift is beyond +-{SHIFT_LIMIT - 1} or an offset beyond int32")
    prefixes = []
    for j, p in enumerate(prefs):
        s_j = p["weight_shift"]
        if abs(s_j) >= SHIFT_LIMIT:
            raise IntegrityError(f"manifest c.int16: prefix {j}'s weight_shift {s_j} is beyond +-{SHIFT_LIMIT - 1}")
        w_q, b_q = _at_shift(*_prefix_weights(seq, j, shifts, offsets), s_j)
        if b_q is None or np.abs(w_q).max(initial=0) > INT16_MAX:
            raise IntegrityError(f"manifest c.int16: prefix {j}'s recorded weight_shift {s_j} does not give int16 "
                                 "weights and an int32 intercept for the export's weights")
        h = headroom(w_q, b_q)
        if h > INT32_MAX or h != p["headroom"]:
            raise IntegrityError(f"manifest c.int16: prefix {j}'s headroom is {h}, the manifest says {p['headroom']}"
                                 + (" (beyond int32)" if h > INT32_MAX else ""))
        prefixes.append((w_q, b_q, s_j, h, p["reduced_bits"]))
    qm = _int16_model(seq, shifts, offsets, prefixes, entry["feature_source"])
    qm.loss = [{"index": j, "reference": entry.get("loss_reference"),
                **{k: v for k, v in p.items() if k not in ("index", "weight_shift", "headroom", "reduced_bits")}}
               for j, p in enumerate(prefs)]
    return qm


# ------------------------------------------------------------------ the simulation (C semantics)


def linear_q(qm: Int16Model, xq, j: int) -> np.ndarray:
    """``z_q = b_q + x_q @ w_q`` of prefix j, int64, each value checked to stay in int32 as the proof says.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.quantize import Int16Model
    >>> from edgeseq.export.kinds.affine.quantize import linear_q
    >>> qm = Int16Model("identity", 1, 1, np.zeros(1, np.int64), np.zeros(1, np.int64),
    ...                 (np.zeros((0, 1), np.int64), np.array([[3]])), np.array([[1], [2]]), np.array([0, 0]),
    ...                 np.array([1, 1]), np.array([0, 0]), np.zeros(0, np.int64), np.array([0.0, 1.0]))
    >>> linear_q(qm, np.array([[5]], dtype=np.int16), 1).tolist()
    [[17]]
    """
    xq = np.asarray(xq, dtype=np.int64)
    d = qm.coefs[j].shape[0]
    z = xq[:, :d] @ qm.coefs[j] + qm.intercepts[j]
    assert np.all(np.abs(z) <= INT32_MAX), "headroom proof violated"
    return z


def simulate(qm: Int16Model, xq, j: int) -> tuple[np.ndarray, np.ndarray]:
    """Prefix j's integer prediction and label for int16 feature rows `xq` (bit-identical to the C).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.kinds.affine.quantize import quantize_sequence, quantize_features, simulate
    >>> X = np.random.default_rng(1).normal(size=(100, 2)); y = 3 * X[:, 0]
    >>> seq = AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, y).fitted_sequence_
    >>> qm = quantize_sequence(seq, X, y)
    >>> z, _ = simulate(qm, quantize_features(qm, X[:, seq.prefix_columns(2)]), 2)
    >>> bool(np.abs(np.ldexp(z[:, 0].astype(float), -int(qm.weight_shift[2])) - seq.linear(X, 2)[:, 0]).max() < 1e-2)
    True
    """
    return link_q(qm, linear_q(qm, xq, j), j)


def prefix_losses(seq: FittedSequence, qm: Int16Model, X: np.ndarray, y=None) -> list[dict]:
    """Per prefix, what the integer model loses against float on the rows `X` (targets `y` if given).

    Classifiers: ``accuracy_loss_pp`` (float accuracy minus integer accuracy, percentage points) and
    ``label_agreement`` (fraction of rows where both choose the same class). Regression:
    ``explained_variance_loss`` (float minus integer explained variance; against the float
    predictions when `y` is None) and ``max_abs_error`` versus the float prediction.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.kinds.affine.quantize import quantize_sequence, prefix_losses
    >>> X = np.random.default_rng(2).normal(size=(300, 3)); y = (X.sum(axis=1) > 0).astype(int)
    >>> seq = AnytimeClassifier([[0], [1, 2]], [1.0, 1.0]).fit(X, y).fitted_sequence_
    >>> loss = prefix_losses(seq, quantize_sequence(seq, X), X)   # no targets: against float's labels
    >>> sorted(loss[2]), loss[2]["reference"], loss[2]["label_agreement"] > 0.98
    (['accuracy_loss_pp', 'index', 'label_agreement', 'reference'], 'float predictions', True)
    """
    xq = quantize_features(qm, X[:, seq.prefix_columns(seq.n_groups)])
    ref = None if y is None or seq.task == "regression" else _class_indices(seq, y)
    return [loss_entry(qm, j, seq.apply_link(seq.linear(X, j)), *simulate(qm, xq, j),
                       y if seq.task == "regression" else ref, regression=seq.task == "regression")
            for j in range(seq.n_prefixes)]

