"""`edgeseq verify`: integrity of out/, then numpy vs onnxruntime vs compiled C on every prefix.

The C model and the graphs are first regenerated from the verified weights and must match the
shipped files byte for byte (`regenerate`); only the regenerated C is compiled.

The reference is numpy in float64 on the exported float32 weights (`sequence_from_export`) and
float32-rounded inputs, so a difference measures only how the runtime accumulates in float32. A
difference counts as a mismatch when it exceeds the float32 bound of that row,
4 (d + 2) eps32 (|x| @ |W| + |b|) for the linear output (d = features of the prefix); for
classifiers the probabilities get the same bound plus 4 eps32 (sigmoid and softmax are
contractions in the max-norm), and labels must agree wherever the top two probabilities are
further apart than twice that bound.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field

import numpy as np

from edgeseq.errors import CCompilerError, InputError
from edgeseq.evaluate.regenerate import check_generated_files
from edgeseq.sequence import sample_rows
from edgeseq.runtime.session import AnytimeSession, ClassifierPrediction
from edgeseq.io.feature_rows import group_arrays

EPS32 = float(np.finfo(np.float32).eps)
N_SAMPLES = 256


@dataclass
class PrefixCheck:
    """How one prefix of an export fared: worst runtime-vs-numpy differences and their ratio to the float32 bound.

    A ratio is the worst difference divided by that row's bound, so any ratio above 1 is a real
    disagreement whatever the magnitude of the features.

    Examples
    --------
    >>> from edgeseq.evaluate.verify import PrefixCheck
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
        >>> from edgeseq.evaluate.verify import PrefixCheck
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
    >>> from edgeseq.evaluate.verify import PrefixCheck, VerifyReport
    >>> rep = VerifyReport(n_rows=2, source="demo", checks=[PrefixCheck(0, None, 0.0, 0.0, 0.0)])
    >>> rep.ok, rep.c_note
    (True, None)
    """
    n_rows: int
    source: str
    checks: list[PrefixCheck] = field(default_factory=list)
    c_note: str | None = None  # why the C column is missing, when it is
    kind: str = "affine"  # the export's stage kind (what the regenerated-files line says)

    @property
    def ok(self) -> bool:
        """Whether every prefix passed.

        Examples
        --------
        >>> from edgeseq.evaluate.verify import PrefixCheck, VerifyReport
        >>> good, bad = PrefixCheck(0, None, 0.0, 0.0, 0.0), PrefixCheck(1, "a", 1.0, 1.0, 5.0)
        >>> VerifyReport(2, "demo", [good]).ok, VerifyReport(2, "demo", [good, bad]).ok
        (True, False)
        """
        return all(c.ok for c in self.checks)


def manifest_sample_rows(manifest: dict, n: int = N_SAMPLES, seed: int = 0) -> np.ndarray:
    """Rows from the export's stored training statistics, with x1e3 and x1e-3 magnitudes mixed in.

    `edgeseq verify` needs inputs even when the user has no data at hand; rows around the training
    means, with some scaled far up and down, exercise both typical and badly-conditioned accumulations.

    Examples
    --------
    >>> from edgeseq.evaluate.verify import manifest_sample_rows
    >>> m = {"n_features_in": 3, "feature_mean": [0.0, 10.0, -5.0], "feature_std": [1.0, 2.0, 0.5]}
    >>> X = manifest_sample_rows(m, n=8)
    >>> X.shape, bool((manifest_sample_rows(m, n=8) == X).all())  # deterministic for a given seed
    ((8, 3), True)
    """
    from edgeseq.export.writer import sample_count  # a wide model gets fewer rows, not a huge allocation

    D = manifest["n_features_in"]
    return sample_rows(D, sample_count(n, D), mean=manifest.get("feature_mean"), std=manifest.get("feature_std"),
                       seed=seed, extreme_scale=1e3)


def _reference(seq, X32: np.ndarray, j: int):
    """float64 prediction and per-row, per-output bound of prefix j (see the module docstring)."""
    cols = seq.prefix_columns(j)
    z = seq.linear(X32, j)
    bound = 4 * (len(cols) + 2) * EPS32 * (np.abs(X32[:, cols]) @ np.abs(seq.coefs[j])
                                           + np.abs(seq.intercepts[j]))
    if seq.link == "identity":
        return z, bound + 1e-37
    p = seq.apply_link(z)
    return p, np.repeat(bound.max(axis=1, keepdims=True), p.shape[1], axis=1) + 4 * EPS32


def _compare(got: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> tuple[float, float]:
    got = np.asarray(got, dtype=np.float64).reshape(ref.shape)
    d = np.abs(got - ref)
    d[~np.isfinite(got)] = np.inf
    return float(d.max(initial=0.0)), float((d / bound).max(initial=0.0))


def _label_mismatches(labels: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> int:
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * bound[:, 0]
    return int(np.sum(np.asarray(labels)[clear] != np.argmax(ref, axis=1)[clear]))


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


def c_predictions(c_dir, manifest: dict, X32: np.ndarray, *, require_c: bool, compiler=None):
    """(C run, None) or (None, note) when no compiler is found and C is not required.

    `c_dir` holds the C model regenerated by `check_generated_files`, never the export's own copy.

    Examples
    --------
    With a compiler that does not exist and C not required, the C column is skipped with a note:

    >>> import numpy as np
    >>> from edgeseq.evaluate.verify import c_predictions
    >>> run, note = c_predictions("unused", {"groups": []}, np.zeros((1, 1)), require_c=False,
    ...                           compiler="no-such-cc")
    >>> run is None, note.startswith("C column skipped")
    (True, True)
    """
    from edgeseq.export.c_harness import run_c

    missing = _missing_compiler(compiler, require_c)
    if missing:
        return None, missing
    groups = [X32[:, g["columns"]] for g in manifest["groups"]]
    return run_c(str(c_dir), groups, compiler=compiler), None


def int16_c_column(c_dir, manifest: dict, seq, X32: np.ndarray, *, require_c: bool, compiler=None):
    """(per-prefix worst |C - simulation| in integer units, note) for an int16 export, or (None, note).

    An int16 C model is not compared with numpy's float64 prediction under a float32 bound: its answer
    is defined by the integer arithmetic, so the regenerated C (`c_dir`) runs the rows quantised with
    the manifest's scales and must equal `quantize.simulate` bit for bit at every prefix. The note
    also states how far the integer predictions land from the float model.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.evaluate.verify import int16_c_column
    >>> diffs, note = int16_c_column("unused", {}, None, np.zeros((1, 1)), require_c=False, compiler="no-such-cc")
    >>> diffs is None, note.startswith("C column skipped")
    (True, True)
    """
    from edgeseq.export.c_int16_run import run_int16_host
    from edgeseq.export.quantize import dequantize, quantize_features, quantize_from_manifest, simulate

    missing = _missing_compiler(compiler, require_c)
    if missing:
        return None, missing
    qm = quantize_from_manifest(seq, manifest["c"]["int16"])
    xq = quantize_features(qm, X32[:, seq.prefix_columns(seq.n_groups)])
    run, _ = run_int16_host(str(c_dir), xq, compiler=compiler)
    diffs, far = [], 0.0
    for j in range(seq.n_prefixes):
        sim = simulate(qm, xq, j)[0]
        diffs.append(int(np.abs(run.pred[j].astype(np.int64) - sim).max(initial=0)))
        ref = seq.linear(X32, j) if seq.link == "identity" else seq.apply_link(seq.linear(X32, j))
        far = max(far, float(np.abs(dequantize(qm, sim, j) - ref).max(initial=0.0)))
    verdict = "bit-identical to" if not any(diffs) else "DIFFERENT from"
    return diffs, (f"C column: the int16 C model, {verdict} the integer simulation at every prefix "
                   f"(|C - simulation| in integer units); its largest distance from the float model is {far:.3g}")


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
    >>> from edgeseq.evaluate.verify import inside_int16_ranges
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
    >>> from edgeseq.evaluate.verify import int16_range_rows
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
    >>> from edgeseq.export.c_trees import _demo_model
    >>> from edgeseq.export.quantize_trees import quantize_trees
    >>> from edgeseq.evaluate.verify_trees import tree_int16_staged
    >>> from edgeseq.evaluate.verify import int16_distances
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
    >>> from edgeseq.export.quantize import quantize_sequence
    >>> from edgeseq.evaluate.verify import check_int16_figures, linear_int16_staged
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


def linear_int16_staged(seq, qm, X: np.ndarray):
    """(float prediction, integer prediction, integer label) of every prefix of a linear int16 model.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.quantize import quantize_sequence
    >>> from edgeseq.evaluate.verify import linear_int16_staged
    >>> X = np.random.default_rng(1).normal(size=(50, 2))
    >>> seq = AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, X[:, 0]).fitted_sequence_
    >>> len(list(linear_int16_staged(seq, quantize_sequence(seq, X), X)))
    3
    """
    from edgeseq.export.quantize import quantize_features, simulate

    xq = quantize_features(qm, X[:, seq.prefix_columns(seq.n_groups)])
    for j in range(seq.n_prefixes):
        yield (seq.apply_link(seq.linear(X, j)), *simulate(qm, xq, j))


def linear_int16_figures(manifest: dict, seq, X32: np.ndarray) -> str:
    """`check_int16_figures` for a linear int16 export: on verify's rows inside the recorded ranges and on
    rows drawn inside those ranges.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.evaluate.verify import linear_int16_figures
    >>> from edgeseq.export.manifest import sequence_from_export
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(100, 2))
    >>> out = tempfile.mkdtemp() + "/out"
    >>> m = export_model(AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, X[:, 0]).fitted_sequence_, out,
    ...                  c_dtype="int16", calibration=(X, None))
    >>> linear_int16_figures(m, sequence_from_export(out), X).startswith("int16 figures ok")
    True
    """
    from edgeseq.export.quantize import quantize_from_manifest, quantize_sequence
    from edgeseq.export.writer import sample_count

    entry = manifest["c"]["int16"]
    qm = quantize_from_manifest(seq, entry)
    cols = seq.prefix_columns(seq.n_groups)
    own = X32[inside_int16_ranges(X32, cols, qm.feature_shift, qm.feature_offset)]
    drawn = int16_range_rows(cols, qm.feature_shift, qm.feature_offset, seq.n_features_in,
                             sample_count(N_SAMPLES, seq.n_features_in))
    return check_int16_figures(entry["prefixes"], seq.task == "regression",
                               lambda q, rows: linear_int16_staged(seq, q, rows), qm,
                               lambda rows: quantize_sequence(seq, rows),
                               [("of verify's rows inside the recorded ranges", own),
                                ("rows drawn inside the recorded ranges", drawn)])


def verify_export(out_dir, X: np.ndarray | None = None, *, source: str = "", use_c: bool = True,
                  require_c: bool = False, compiler=None) -> VerifyReport:
    """Check out/ (AnytimeSession verifies schema, checksums and files) and compare the runtimes.

    Parameters
    ----------
    out_dir : path
        An export directory.
    X : array of shape (n, n_features_in), optional
        Rows to compare on; default `manifest_sample_rows`.
    source : str
        Where `X` came from, for the report.
    use_c, require_c : bool
        Compare the compiled C runtime too; fail (`CCompilerError`) rather than skip without a compiler.
    compiler : str, optional
        C compiler to use.

    Returns
    -------
    VerifyReport

    Raises
    ------
    IntegrityError
        The export directory fails its checks.
    InputError
        `X` has the wrong width or non-finite values.

    Examples
    --------
    >>> from edgeseq.evaluate.verify import verify_export
    >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
    >>> rep = verify_export(out, use_c=False)
    >>> rep.ok, [c.prefix for c in rep.checks], rep.c_note
    (True, [0, 1, 2], 'C column skipped (--no-c)')
    """
    from edgeseq.format import read_verified, stage_kind

    if stage_kind(read_verified(out_dir)) == "trees":
        from edgeseq.evaluate.verify_trees import verify_tree_export

        return verify_tree_export(out_dir, X, source=source, use_c=use_c, require_c=require_c, compiler=compiler)
    with tempfile.TemporaryDirectory(prefix="edgeseq_verify_") as c_dir:
        return _verify(out_dir, X, source, use_c, require_c, compiler, c_dir)


def _verify(out_dir, X, source, use_c, require_c, compiler, c_dir) -> VerifyReport:
    from edgeseq.export.manifest import read_verified, sequence_from_export
    from edgeseq.format import c_dtype

    m = read_verified(out_dir)
    seq = sequence_from_export(out_dir)
    check_generated_files(out_dir, m, seq, c_dir)  # before anything is loaded or compiled
    sess = AnytimeSession(out_dir)
    if X is None:
        X = manifest_sample_rows(m)
        source = f"{X.shape[0]} rows drawn from the stored feature statistics"
    X32 = checked_rows(X, m, source).astype(np.float64)
    crun, int16_diffs = None, None
    if c_dtype(m) == "int16":  # integer predictions: bit-exact against quantize.simulate, not numpy's bound
        figures = linear_int16_figures(m, seq, X32)
        int16_diffs, note = (None, "C column skipped (--no-c)") if not use_c else \
            int16_c_column(c_dir, m, seq, X32, require_c=require_c, compiler=compiler)
        note = f"{note}; {figures}"
    else:
        crun, note = (None, "C column skipped (--no-c)") if not use_c else \
            c_predictions(c_dir, m, X32, require_c=require_c, compiler=compiler)
    report = VerifyReport(X.shape[0], source, c_note=note)
    feats = group_arrays(m, X32)
    for j in range(sess.n_prefixes):
        ref, bound = _reference(seq, X32, j)
        report.checks.append(prefix_check(j, m["groups"][j - 1]["name"] if j else None, float(sess.cum_cost[j]),
                                          sess.predict(feats, prefix=j), ref, bound, crun))
        if int16_diffs is not None:  # exactness is the bound: any difference fails the prefix
            report.checks[-1].c_diff, report.checks[-1].c_ratio = float(int16_diffs[j]), (np.inf if int16_diffs[j] else 0.0)
    sess.close()
    return report


def checked_rows(X, manifest: dict, source: str) -> np.ndarray:
    """`X` as float32 rows of the export's width, or an InputError saying what is wrong with them.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.evaluate.verify import checked_rows
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


def prefix_check(j: int, group, cum_cost: float, pred, ref: np.ndarray, bound: np.ndarray, crun=None) -> PrefixCheck:
    """How prefix (or stage) j's runtime prediction(s) compare with the reference, row bound by row bound.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.evaluate.verify import prefix_check
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


def format_report(rep: VerifyReport) -> list[str]:
    """The per-prefix table `edgeseq verify` prints.

    Examples
    --------
    >>> from edgeseq.evaluate.verify import PrefixCheck, VerifyReport, format_report
    >>> rep = VerifyReport(2, "demo", [PrefixCheck(0, None, 0.0, 0.0, 0.0), PrefixCheck(1, "a", 1.0, 1e-3, 5.0)])
    >>> lines = format_report(rep)
    >>> lines[-1]
    'MISMATCH at prefix(es) [1]: a runtime differs from numpy beyond the float32 bound'
    """
    lines = ["generated files ok: the C model and every prefix graph are byte-identical to what edgeseq "
             "generates from the verified weights (only that regenerated C is compiled)" if rep.kind != "trees" else
             "generated files ok: every tree-stage graph is byte-identical to what edgeseq generates from the "
             "trees and readouts read back from the export",
             f"compared numpy (float64 reference) vs onnxruntime vs C on {rep.n_rows} rows ({rep.source})"]
    if rep.c_note:
        lines.append(rep.c_note)
    head = f"{'prefix':>6}  {'group':<20} {'cum_cost':>9} {'|onnx-np|':>10} {'/bound':>7} " \
           f"{'|C-np|':>10} {'/bound':>7} {'labels':>6}  result"
    lines += [head, "-" * len(head)]
    for c in rep.checks:
        cd = "-" if c.c_diff is None else f"{c.c_diff:.3g}"
        cr = "-" if c.c_ratio is None else f"{c.c_ratio:.3g}"
        lines.append(f"{c.prefix:>6}  {('-' if c.group is None else repr(c.group))[:20]:<20} "
                     f"{c.cum_cost:>9.4g} {c.onnx_diff:>10.3g} {c.onnx_ratio:>7.3g} {cd:>10} {cr:>7} "
                     f"{c.label_mismatches:>6}  {'ok' if c.ok else 'MISMATCH'}")
    bad = [c.prefix for c in rep.checks if not c.ok]
    lines.append("all prefixes agree within the float32 bound" if not bad else
                 f"MISMATCH at prefix(es) {bad}: a runtime differs from numpy beyond the float32 bound")
    return lines


