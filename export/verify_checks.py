"""The checks every kind of export shares in `edgeseq verify`: reports, row checks and int16 figures.

`verify` (linear exports and the dispatch on the manifest's stage kind) and `verify_trees` (tree
exports) both build their report from these pieces. They live in their own module, below both, so
neither verify module imports the other's internals: the import graph stays free of cycles (see
`tests/test_layering.py`). Every name here is also importable from `edgeseq.evaluate.verify`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgeseq.errors import CCompilerError, InputError
from edgeseq.runtime.session import ClassifierPrediction

EPS32 = float(np.finfo(np.float32).eps)



N_SAMPLES = 256



@dataclass
class PrefixCheck:
    """How one prefix of an export fared: worst runtime-vs-numpy differences and their ratio to the float32 bound.

    A ratio is the worst difference divided by that row's bound, so any ratio above 1 is a real
    disagreement whatever the magnitude of the features.

    Examples
    --------
    >>> from edgeseq.export.verify_checks import PrefixCheck
    >>> PrefixCheck(prefix=1, group="a", cum_cost=1.0, onnx_diff=2e-7, onnx_ratio=0.1).ok
    True
    """
    prefix: int
    group: str | None          # the group this prefix adds (None for prefix 0)
    cum_cost: float
    onnx_diff: float           # worst |onnx - numpy|
    onnx_ratio: float          # worst difference / its row's bound (<= 1 passes)
    c_diff: float | None = None
    c_ratio: float | None = None
    label_mismatches: int = 0  # clear-margin rows where onnx or C picks another class than numpy

    @property
    def ok(self) -> bool:
        """Every runtime within the bound (ratio <= 1) and no clear-margin label disagreement.

        Examples
        --------
        >>> from edgeseq.export.verify_checks import PrefixCheck
        >>> PrefixCheck(1, "a", 1.0, onnx_diff=2e-7, onnx_ratio=0.1, c_diff=1e-3, c_ratio=40.0).ok
        False
        >>> PrefixCheck(1, "a", 1.0, onnx_diff=0.0, onnx_ratio=0.0, label_mismatches=1).ok
        False
        """
        ratios = [self.onnx_ratio] + ([] if self.c_ratio is None else [self.c_ratio])
        return all(r <= 1.0 for r in ratios) and self.label_mismatches == 0



@dataclass
class VerifyReport:
    """The checks of every prefix, what rows they ran on, and why the C column is missing if it is.

    Examples
    --------
    >>> from edgeseq.export.verify_checks import PrefixCheck, VerifyReport
    >>> rep = VerifyReport(n_rows=2, source="demo", checks=[PrefixCheck(0, None, 0.0, 0.0, 0.0)])
    >>> rep.ok, rep.c_note
    (True, None)
    """
    n_rows: int
    source: str
    checks: list[PrefixCheck] = field(default_factory=list)
    c_note: str | None = None  # why the C column is missing, when it is
    # what the regenerated-files check established (each kind regenerates its own files)
    files_line: str = ("generated files ok: the C model and every prefix graph are byte-identical to what edgeseq "
                       "generates from the verified weights (only that regenerated C is compiled)")
    stop_note: str | None = None  # per-input stopping: Python vs C stopping stages, when checked
    stop_mismatches: int = 0  # rows where they differ (any fails the report)

    @property
    def ok(self) -> bool:
        """Whether every prefix passed.

        Examples
        --------
        >>> from edgeseq.export.verify_checks import PrefixCheck, VerifyReport
        >>> good, bad = PrefixCheck(0, None, 0.0, 0.0, 0.0), PrefixCheck(1, "a", 1.0, 1.0, 5.0)
        >>> VerifyReport(2, "demo", [good]).ok, VerifyReport(2, "demo", [good, bad]).ok
        (True, False)
        """
        return all(c.ok for c in self.checks) and not self.stop_mismatches



def _missing_compiler(compiler, require_c: bool) -> str | None:
    """None when a C compiler is found; the C column's note when not (CCompilerError if C is required)."""
    from edgeseq.export.c_harness import find_c_compiler

    try:
        find_c_compiler(compiler)
    except CCompilerError as exc:
        if require_c:
            raise
        return f"C column skipped: {exc}"
    return None



# The int16 figures check (`check_int16_figures`): a stage fails when the integer model, on rows inside
# the recorded feature ranges, is further from float than INT16_FACTOR x (what the manifest records +
# what an int16 model calibrated on those very rows loses), plus a small absolute slack. Regression
# compares the INT16_QUANTILE of |int16 - float| over the rows (a few rows on a threshold that one
# scale puts on the other side are not a forgery), classifiers the fraction of rows whose label differs.
INT16_FACTOR = 2.0



INT16_QUANTILE = 0.9



INT16_AGREEMENT_SLACK = 0.02



INT16_ERROR_SLACK = 1e-9  # relative to 1 + the distance



MIN_INT16_ROWS = 16



def inside_int16_ranges(X: np.ndarray, columns, shift, offset) -> np.ndarray:
    """Rows of `X` (raw columns) whose quantised features do not saturate: inside the recorded ranges.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.verify_checks import inside_int16_ranges
    >>> inside_int16_ranges(np.array([[0.5], [9.0]]), [0], np.array([12]), np.array([0])).tolist()
    [True, False]
    """
    q = np.rint(np.ldexp(np.asarray(X, np.float64)[:, np.asarray(columns, np.int64)], shift)) - offset
    return np.all(np.abs(q) <= 32767, axis=1)



def int16_range_rows(columns, shift, offset, n_features: int, n: int, seed: int = 0, span=None) -> np.ndarray:
    """Rows drawn uniformly inside the recorded int16 feature ranges (optionally narrowed to `span`).

    The range of feature i is where ``rint(x * 2**s_i) - O_i`` fits int16; `span` (lo, hi arrays) narrows
    it to where the model decides (a tree's thresholds), when that overlaps the range. Columns outside
    `columns` are 0.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.verify_checks import int16_range_rows
    >>> X = int16_range_rows([1], np.array([12]), np.array([4096]), 2, 100)
    >>> X.shape, bool(X[:, 0].max() == 0), bool(X[:, 1].min() >= -7 and X[:, 1].max() <= 9)
    ((100, 2), True, True)
    """
    shift, offset = np.asarray(shift, np.int64), np.asarray(offset, np.float64)
    lo = np.ldexp(offset - 32767 + 0.5, -shift)
    hi = np.ldexp(offset + 32767 - 0.5, -shift)
    if span is not None:
        a, b = np.maximum(lo, span[0]), np.minimum(hi, span[1])
        overlap = a < b
        lo, hi = np.where(overlap, a, lo), np.where(overlap, b, hi)
    X = np.zeros((n, n_features))
    X[:, np.asarray(columns, np.int64)] = np.random.default_rng(seed).uniform(lo, hi, size=(n, len(lo)))
    return X.astype(np.float32).astype(np.float64)



def int16_distances(qm, staged, X: np.ndarray, regression: bool) -> list:
    """Per stage/prefix, per row: |int16 - float| (worst output; regression) or whether the labels differ.

    `staged(qm, X)` yields ``(float prediction, integer prediction, integer label)`` per stage.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees
    >>> from edgeseq.export.kinds.trees.verify import tree_int16_staged
    >>> from edgeseq.export.verify_checks import int16_distances
    >>> model, X = _demo_model(), np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> d = int16_distances(quantize_trees(model, X), lambda q, rows: tree_int16_staged(model, q, rows), X, True)
    >>> [float(v.max()) for v in d]
    [0.0, 0.0, 0.0]
    """
    from edgeseq.export.quantize import dequantize

    out = []
    for k, (f, pred, label) in enumerate(staged(qm, X)):
        if regression:
            zf = np.asarray(f, np.float64).reshape(X.shape[0], -1)
            out.append(np.abs(dequantize(qm, pred, k).reshape(X.shape[0], -1) - zf).max(axis=1))
        else:
            out.append((np.asarray(label) != np.argmax(f, axis=1)).astype(np.float64))
    return out



def check_int16_figures(recorded: list, regression: bool, staged, qm, requantize, row_sets) -> str:
    """Refuse an int16 manifest whose recorded loss or scales the rows at hand cannot reproduce.

    The recorded per-stage loss was measured on calibration rows that an export does not carry, so it
    cannot be recomputed exactly. What can: on rows inside the recorded feature ranges (where the
    calibration rows were, by construction of the scales), the integer model built from the recorded
    scales (`qm`) must not be further from float than the record plus what an int16 model calibrated
    on those same rows loses (`requantize(X)`, the export's own procedure), up to a factor
    `INT16_FACTOR` and a small slack. Scales edited to something coarser, or a loss edited down, fail
    this; honest scales from wider calibration data lose about what they record.

    Parameters
    ----------
    recorded : list of dict
        ``manifest["c"]["int16"]["prefixes"]`` (``max_abs_error`` or ``label_agreement`` per stage).
    regression : bool
        Regression (identity link) or classifier.
    staged : callable
        ``staged(qm, X)`` yields (float prediction, integer prediction, integer label) per stage.
    qm : Int16Model or TreeInt16Model
        The integer model of the recorded scales.
    requantize : callable
        ``requantize(X)`` -> the integer model calibrated on `X`.
    row_sets : list of (str, ndarray)
        Named raw rows; a set with fewer than `MIN_INT16_ROWS` rows is skipped.

    Returns
    -------
    str
        A note for the report.

    Raises
    ------
    IntegrityError
        Naming the stage, the rows, and the three figures.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.kinds.affine.quantize import quantize_sequence
    >>> from edgeseq.export.kinds.affine.verify import linear_int16_staged
    >>> from edgeseq.export.verify_checks import check_int16_figures
    >>> X = np.random.default_rng(1).normal(size=(200, 2))
    >>> seq = AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, 3 * X[:, 0] + X[:, 1]).fitted_sequence_
    >>> qm = quantize_sequence(seq, X)
    >>> staged = lambda q, rows: linear_int16_staged(seq, q, rows)
    >>> requantize = lambda rows: quantize_sequence(seq, rows)
    >>> check_int16_figures(qm.loss, True, staged, qm, requantize, [("rows", X)]).startswith("int16 figures")
    True
    >>> forged = quantize_sequence(seq, X * 1e4)                   # scales for data 10,000 times wider
    >>> check_int16_figures(qm.loss, True, staged, forged, requantize, [("rows", X)])
    Traceback (most recent call last):
    ...
    edgeseq.errors.IntegrityError: manifest c.int16: stage 1's recorded loss cannot be reproduced: ...
    """
    from edgeseq.errors import IntegrityError

    what = f"the {INT16_QUANTILE:.0%} quantile of |int16 - float|" if regression else "label disagreement"
    stat = (lambda d: float(np.quantile(d, INT16_QUANTILE))) if regression else (lambda d: float(d.mean()))
    checked, worst = [], 0.0
    for name, X in row_sets:
        if X.shape[0] < MIN_INT16_ROWS:
            continue
        got = int16_distances(qm, staged, X, regression)
        ref = int16_distances(requantize(X), staged, X, regression)
        for k, rec in enumerate(recorded):
            m_got, m_ref = stat(got[k]), stat(ref[k])
            m_rec = float(rec["max_abs_error"]) if regression else 1.0 - float(rec["label_agreement"])
            slack = INT16_ERROR_SLACK * (1.0 + m_got) if regression else INT16_AGREEMENT_SLACK
            if not m_got <= INT16_FACTOR * (m_rec + m_ref) + slack:
                raise IntegrityError(f"manifest c.int16: stage {k}'s recorded loss cannot be reproduced: on "
                                     f"{X.shape[0]} {name}, {what} is {m_got:.4g} with the recorded scales, the "
                                     f"manifest records {m_rec:.4g} and an int16 model calibrated on those rows "
                                     f"has {m_ref:.4g}")
            worst = max(worst, m_got)
        checked.append(f"{X.shape[0]} {name}")
    if not checked:
        return "int16 figures not checked: too few rows inside the recorded feature ranges"
    return (f"int16 figures ok: on {' and '.join(checked)}, the integer model of the recorded scales is within "
            f"the recorded loss ({what} at most {worst:.3g})")



def checked_rows(X, manifest: dict, source: str) -> np.ndarray:
    """`X` as float32 rows of the export's width, or an InputError saying what is wrong with them.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.verify_checks import checked_rows
    >>> checked_rows([[1.0, 2.0]], {"n_features_in": 2}, "demo").dtype
    dtype('float32')
    >>> checked_rows([[np.nan, 2.0]], {"n_features_in": 2}, "demo")
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: demo: verify needs complete rows (no missing values, NaN or Inf, and nothing beyond float32's range)
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != manifest["n_features_in"]:
        raise InputError(f"verify needs rows of {manifest['n_features_in']} features, got shape {X.shape}")
    X32 = X.astype(np.float32)
    if not np.isfinite(X32).all():
        raise InputError(f"{source}: verify needs complete rows (no missing values, NaN or Inf, and "
                         "nothing beyond float32's range)")
    return X32



def _compare(got: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> tuple[float, float]:
    got = np.asarray(got, dtype=np.float64).reshape(ref.shape)
    d = np.abs(got - ref)
    d[~np.isfinite(got)] = np.inf
    return float(d.max(initial=0.0)), float((d / bound).max(initial=0.0))


def _label_mismatches(labels: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> int:
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * bound[:, 0]
    return int(np.sum(np.asarray(labels)[clear] != np.argmax(ref, axis=1)[clear]))


def prefix_check(j: int, group, cum_cost: float, pred, ref: np.ndarray, bound: np.ndarray, crun=None) -> PrefixCheck:
    """How prefix (or stage) j's runtime prediction(s) compare with the reference, row bound by row bound.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.verify_checks import prefix_check
    >>> c = prefix_check(1, "a", 1.0, np.array([1.0, 2.0]), np.array([[1.0], [2.5]]), np.full((2, 1), 0.1))
    >>> c.onnx_diff, c.ok
    (0.5, False)
    """
    is_clf = isinstance(pred, ClassifierPrediction)
    check = PrefixCheck(j, group, cum_cost, *_compare(pred.proba if is_clf else pred, ref, bound))
    if is_clf:
        check.label_mismatches = _label_mismatches(pred.label_index, ref, bound)
    if crun is not None:
        check.c_diff, check.c_ratio = _compare(crun.predictions[j], ref, bound)
        if is_clf:
            check.label_mismatches += _label_mismatches(crun.labels[j], ref, bound)
    return check
