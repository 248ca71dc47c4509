"""Per-input early stopping: calibrate the stage thresholds on held-out rows, record them in an export.

An anytime classifier can stop computing groups once the committed stage's answer is settled. The
rule (`edgeseq.runtime.stopping`) is the same in every runtime: stage k stops a row when a float32
statistic of its output -- the gap between its two largest raw scores (``"logit_gap"``, the default
for float C models) or between its two largest probabilities (``"top2_margin"``) -- reaches
``threshold[k]``. This module chooses the thresholds so that the stopped answer differs from the
full-budget answer on at most a share δ (`max_disagreement`) of new rows, and records them (manifest
``stopping`` entry, C tables ``<prefix>_stop_threshold`` and ``<prefix>_stop_statistic``).

How the thresholds are chosen (and why)
---------------------------------------
* **Per-stage thresholds λ·s_k with one scanned scalar** (``rule="scaled"``, what the default
  ``"auto"`` picks when `scaled_split` leaves enough rows to shape). The shape s_k (how far the
  remaining groups move a stage-k answer, `_change`) is learned on a seeded shaping part; λ is
  scanned, as below, on the scan part only, which holds at least `rows_needed` (δ) rows. Shaping
  and scan rows never mix, so the test below holds for the scanned λ exactly as for one threshold.
  Early stages that are confidently wrong on a few rows are what defeats the shared threshold; a
  stage whose answers the last groups still move a lot here needs a proportionally larger gap.
* **One shared threshold t, scanned from cautious to bold** (``rule="shared"``; "auto" falls back to
  it when the rows are too few to shape). Every
  stage gets the same t; candidate values run from "never stop" down through the margins seen on
  the calibration rows. One scalar keeps the search a *fixed sequence* of nested rules (a bolder
  rule stops every row at the same stage or earlier), for which the test below needs no
  multiple-comparison correction.
* **Finite-sample correction (Clopper-Pearson, fixed-sequence testing).** For each candidate, in
  order, count the calibration rows d whose stopped answer differs from the full answer at this
  candidate *or at any more cautious one* (the monotone envelope of the loss: a row, once counted,
  stays counted, so d can only grow along the scan), and compute the one-sided Clopper-Pearson upper
  bound U(d, n) at `confidence`. Accept candidates while U <= δ and stop at the first that fails;
  the answer is the last accepted one. Because the enveloped loss is monotone along a nested family,
  the scan fails to stop before the first rule whose enveloped risk exceeds δ only when that one
  rule's binomial count falls below its Clopper-Pearson bound: with probability at least
  `confidence` (over the draw of the calibration rows) the chosen rule's disagreement rate on new
  rows from the same distribution is at most δ (the envelope is an upper bound of the plain loss).
  Picking the boldest candidate whose *empirical* rate is <= δ (``corrected=False``) has no such
  guarantee: it is tuned to the calibration rows' noise and exceeds δ on fresh rows (the tests
  show it).
* **Per-stage thresholds** (``rule="per-stage"``): when early stages are confidently wrong, one
  shared threshold stops at the first of them; a threshold per stage can keep such a stage closed.
  The path of per-stage rules must not be chosen on the rows that test it, so it is shaped on a
  seeded half of the rows (at level λ, stage k admits its largest-margin rows as far as their own
  Clopper-Pearson bound stays <= λ) and tested, as above, on the other half, which then needs twice
  the rows for the same δ (``bench/early_stopping.py`` measures both rules).
* **Cost.** The scan moves toward bolder rules only, so the accepted rule is the cheapest of the
  sequence that passes; its mean cost and the share of rows stopping at each stage are recorded.
* **Thresholds between margins.** Each candidate lies between two distinct calibration margins,
  several float32 steps from both, so no calibration row sits on a threshold where the last bit of
  a probability (onnxruntime's exp vs the C library's) could flip the decision.
* Feasibility: with d = 0 the bound is 1 - (1 - confidence)^(1/n), so δ = 0.005 at 95 % needs
  n >= 598 calibration rows before any stopping is allowed; with fewer, every threshold is "never".

Regression exports have no stopping rule (a stage's own output does not bound the change still to
come); calibrating one raises `ExportError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgeseq.errors import ExportError
from edgeseq.runtime.stopping import NEVER, STATISTICS, logit_gap, never, stop_stages, top2_margin

__all__ = ["StopRule", "clopper_pearson_upper", "rows_needed", "scaled_split", "calibrate_stopping",
           "stopping_entry", "stop_c_text", "append_stop_c", "staged_proba", "staged_outputs", "int16_staged",
           "add_stopping", "c_stop_stages", "c_stop_stages_i16"]

RULES = ("auto", "scaled", "shared", "per-stage")
MAX_CANDIDATES = 2000  # thresholds tried at most (quantiles of the distinct margins beyond that)
GUARD_ULPS = 4  # float32 steps between a threshold and the nearest calibration margin
GAP_GUARD_REL = 2.0 ** -10  # logit gap: distance to the nearest calibration gap, relative to max(gap, 1)
MIN_SHAPE = 100  # "scaled": fewest shaping rows (below, "auto" falls back to "shared")
SCAN_SHARE = 0.5  # "scaled": the scan part is at least this share of the rows (and >= rows_needed)
SHAPE_QUANTILE = 0.95  # "scaled": s_k is this quantile of how far the remaining groups move stage k


def clopper_pearson_upper(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial rate after `k` events in `n` trials.

    Parameters
    ----------
    k : int
        Events seen (rows whose stopped answer differs).
    n : int
        Trials (calibration rows), >= 1.
    confidence : float, default=0.95
        Probability that the true rate is at most the bound.

    Returns
    -------
    float

    Examples
    --------
    >>> from edgeseq.export.stopping import clopper_pearson_upper
    >>> round(clopper_pearson_upper(0, 598), 5), round(clopper_pearson_upper(1, 598), 5)
    (0.005, 0.00791)
    """
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(confidence, k + 1, n - k))


@dataclass
class StopRule:
    """The calibrated stopping rule and what it did on the calibration rows.

    Attributes
    ----------
    thresholds : float32 ndarray of shape (n_stages,)
        Per stage; `edgeseq.runtime.stopping.NEVER` where the stage never stops.
    max_disagreement, confidence : float
        δ and the confidence of the bound.
    corrected : bool
        Whether the Clopper-Pearson bound (True) or the empirical rate (False) was held to δ.
    n_calibration : int
    disagreement : float
        Share of calibration rows whose stopped answer differs from the full answer.
    disagreement_bound : float
        Clopper-Pearson upper bound at `confidence` from the rows the rule was tested on.
    mean_cost, full_cost : float
        Mean cumulative cost of the stopping stage on the calibration rows, and the full cost.
    stop_share : ndarray of shape (n_stages,)
        Share of calibration rows stopping at each stage.
    rule : {"scaled", "shared", "per-stage"}
        Which family of rules was scanned.
    n_test : int
        Calibration rows the rule was tested on (all of them for "shared", half for "per-stage", the
        scan part of `scaled_split` for "scaled").
    statistic : {"top2_margin", "logit_gap"}
        What the thresholds are compared with.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.stopping import calibrate_stopping
    >>> rng = np.random.default_rng(0)
    >>> easy = np.tile([[0.99, 0.01]], (700, 1)).astype(np.float32)
    >>> rule = calibrate_stopping([np.tile([[0.5, 0.5]], (700, 1)), easy, easy], [0.0, 1.0, 3.0])
    >>> rule.stop_share.tolist(), rule.mean_cost
    ([0.0, 1.0, 0.0], 1.0)
    """

    thresholds: np.ndarray
    max_disagreement: float
    confidence: float
    corrected: bool
    n_calibration: int
    disagreement: float
    disagreement_bound: float
    mean_cost: float
    full_cost: float
    stop_share: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rule: str = "shared"
    n_test: int = 0
    statistic: str = "top2_margin"


def _guard(v: np.ndarray, statistic: str) -> np.ndarray:
    """How far (float64) a threshold must stay from a calibration value `v` of `statistic`: GUARD_ULPS
    float32 steps of a probability margin; for a logit gap GAP_GUARD_REL of max(v, 1), because a gap is
    the difference of two scores whose last bits differ between runtimes (onnxruntime's summation
    order vs the C loop's), an error on the scale of the scores rather than of the gap."""
    step = np.spacing(np.abs(v).astype(np.float32)).astype(np.float64) * GUARD_ULPS
    if statistic == "logit_gap":
        step = np.maximum(step, GAP_GUARD_REL * np.maximum(np.abs(v).astype(np.float64), 1.0))
    return step


def _candidates(margins: np.ndarray, statistic: str = "top2_margin", limit: bool = True) -> np.ndarray:
    """Float32 thresholds between distinct values (descending), each `_guard` clear of both."""
    vals = np.unique(margins.astype(np.float32))[::-1]  # descending
    vals = vals[vals >= 0]  # closed stages hold -1
    if vals.size == 0:
        return np.zeros(0, np.float32)
    hi, lo = vals[:-1], vals[1:]
    lo = np.append(lo, np.float32(0.0)) if vals[-1] > 0 else lo
    hi = vals[:lo.size]
    mid = ((hi.astype(np.float64) + lo.astype(np.float64)) / 2).astype(np.float32)
    m64 = mid.astype(np.float64)
    ok = (m64 - lo >= _guard(lo, statistic)) & (hi - m64 >= _guard(hi, statistic))
    cand = mid[ok]
    if limit and cand.size > MAX_CANDIDATES:
        cand = cand[np.linspace(0, cand.size - 1, MAX_CANDIDATES).round().astype(int)]
    return cand


def rows_needed(max_disagreement: float, confidence: float = 0.95) -> int:
    """Fewest rows on which 0 disagreements give a Clopper-Pearson bound <= δ: ceil(ln(1-c) / ln(1-δ)).

    A rule can stop rows only if the rows it is tested on number at least this many.

    Examples
    --------
    >>> from edgeseq.export.stopping import rows_needed
    >>> rows_needed(0.005), rows_needed(0.001), rows_needed(0.02)
    (598, 2995, 149)
    """
    n = int(np.ceil(np.log1p(-confidence) / np.log1p(-max_disagreement)))
    while n > 1 and clopper_pearson_upper(0, n - 1, confidence) <= max_disagreement:
        n -= 1
    while clopper_pearson_upper(0, n, confidence) > max_disagreement:
        n += 1
    return n


def scaled_split(n: int, max_disagreement: float, confidence: float = 0.95) -> tuple[int, int] | None:
    """(shaping rows, scan rows) of the "scaled" rule for `n` calibration rows, or None when too few.

    The scan part gets max(`rows_needed`(δ), ceil(SCAN_SHARE * n)) rows: enough that a rule with no
    disagreement can pass, and half of a large set, so that each disagreement costs the bound little;
    the shaping part gets the rest and must hold at least MIN_SHAPE rows.

    Examples
    --------
    >>> from edgeseq.export.stopping import scaled_split
    >>> scaled_split(899, 0.005), scaled_split(2500, 0.005), scaled_split(650, 0.005)
    ((301, 598), (1250, 1250), None)
    """
    n_scan = max(rows_needed(max_disagreement, confidence), int(np.ceil(SCAN_SHARE * n)))
    return None if n - n_scan < MIN_SHAPE else (n - n_scan, n_scan)


def calibrate_stopping(proba_by_stage, cum_cost, max_disagreement: float = 0.005, *, confidence: float = 0.95,
                       corrected: bool = True, labels_by_stage=None, rule: str = "auto",
                       closed=None, statistic: str = "top2_margin", scores_by_stage=None) -> StopRule:
    """Choose the stopping thresholds from every stage's outputs on calibration rows.

    Parameters
    ----------
    proba_by_stage : list of array-like of shape (n_samples, n_classes)
        Each stage's committed probabilities (stage 0 first), as the runtime computes them.
    cum_cost : array-like of shape (n_stages,)
        Cumulative cost of each stage.
    max_disagreement : float, default=0.005
        δ: the largest share of new rows whose stopped answer may differ from the full answer.
    confidence : float, default=0.95
        Probability with which the bound holds (over the draw of calibration rows).
    corrected : bool, default=True
        Hold the Clopper-Pearson upper bound to δ (the guarantee); False holds the empirical rate
        to δ instead, which overfits the calibration rows (kept for the tests' negative control).
    labels_by_stage : list of array-like of shape (n_samples,), optional
        Each stage's answer when it is not the first largest probability (the int16 model picks its
        label from the integer scores before rounding); default the argmax of the probabilities.
    rule : {"auto", "scaled", "shared", "per-stage"}, default="auto"
        "scaled": a threshold per stage, λ·s_k, whose shape s_k (a high quantile of how far the
        remaining groups move a stage-k answer, in the statistic's units) is learned on a seeded
        part of the rows (`scaled_split`) and whose one scalar λ is scanned on the rest. "shared": one
        threshold for every stage, scanned on all rows. "per-stage": a threshold per stage, shaped on
        half of the rows and tested on the other half. "auto": "scaled" when `scaled_split` allows it
        (it depends on n, δ and `confidence` only, never on the rows' values), else "shared".
    closed : array-like of bool of shape (n_stages,), optional
        Stages that may never stop a row: a layer-block stage with ``commit: false`` publishes no
        answer, so no runtime can stop there; its threshold is `never` and its values are ignored.
    statistic : {"top2_margin", "logit_gap"}, default="top2_margin"
        What a threshold is compared with (`edgeseq.runtime.stopping`).
    scores_by_stage : list of array-like of shape (n_samples, n_outputs), optional
        Each stage's raw scores before the link; required for ``statistic="logit_gap"``.

    Returns
    -------
    StopRule

    Raises
    ------
    ExportError
        For δ or `confidence` outside (0, 1), an unknown rule or statistic, or stages of different
        shapes.

    Examples
    --------
    Too few rows for δ = 0.005 (598 needed at 95 %): the rule never stops.

    >>> import numpy as np
    >>> from edgeseq.export.stopping import calibrate_stopping
    >>> p = [np.tile([[0.9, 0.1]], (100, 1))] * 2
    >>> calibrate_stopping(p, [0.0, 1.0]).stop_share.tolist()
    [0.0, 1.0]
    >>> calibrate_stopping(p, [0.0, 1.0], 0.05).stop_share.tolist()
    [1.0, 0.0]
    """
    for name, v in (("max_disagreement", max_disagreement), ("confidence", confidence)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not 0.0 < float(v) < 1.0:
            raise ExportError(f"{name} must be a number in (0, 1), got {v!r:.40}")
    if statistic not in STATISTICS:
        raise ExportError(f"statistic must be one of {', '.join(map(repr, STATISTICS))}, got {statistic!r:.40}")
    if rule not in RULES:
        raise ExportError(f"rule must be one of {', '.join(map(repr, RULES))}, got {rule!r:.40}")
    probas = [np.asarray(p, dtype=np.float32) for p in proba_by_stage]
    cum_cost = np.asarray(cum_cost, dtype=np.float64)
    if not probas or len(probas) != cum_cost.size or any(p.shape != probas[0].shape for p in probas):
        raise ExportError("stopping needs one (n, n_classes) probability array per stage, all of one shape")
    n = probas[0].shape[0]
    if n == 0:
        raise ExportError("stopping needs at least one calibration row")
    if statistic == "logit_gap":
        if scores_by_stage is None or len(scores_by_stage) != len(probas) or any(
                np.shape(z)[:1] != (n,) or np.ndim(z) != 2 for z in scores_by_stage):
            raise ExportError("the logit-gap statistic needs one (n, n_outputs) score array per stage")
        margins = np.stack([logit_gap(z) for z in scores_by_stage])
    else:
        margins = np.stack([top2_margin(p) for p in probas])
    closed = np.zeros(len(probas), bool) if closed is None else np.asarray(closed, bool)
    if closed.shape != (len(probas),):
        raise ExportError("closed must hold one flag per stage")
    margins[closed] = -1.0  # below every candidate (all > 0): a closed stage never stops a row
    labels = np.stack([np.argmax(p, axis=1) for p in probas] if labels_by_stage is None else
                      [np.asarray(lab) for lab in labels_by_stage])
    differs = labels != labels[-1]  # (n_stages, n): stage k's answer is not the full answer
    K = len(probas) - 1
    split = scaled_split(n, max_disagreement, confidence)
    if rule in ("auto", "scaled"):
        rule = "scaled" if split is not None and K else "shared"  # too few rows to shape: the shared rule
    never_t = never(statistic)
    cands = _candidates(margins[:K][~closed[:K]], statistic) if K else np.zeros(0, np.float32)
    test = np.arange(n)
    perm = np.random.default_rng(0).permutation(n)  # seeded, so exports are reproducible
    if rule == "shared":
        path = np.repeat(cands[:, None], K, axis=1)
    elif rule == "scaled":
        shape, test = np.sort(perm[:split[0]]), np.sort(perm[split[0]:])
        raw = scores_by_stage if statistic == "logit_gap" else probas
        vals = np.stack([np.asarray(v, np.float64)[shape] for v in raw])  # (K + 1, n_shape, P)
        if vals.shape[2] == 1:  # a sigmoid's logits are (0, z)
            vals = np.concatenate([np.zeros_like(vals), vals], axis=2)
        path = _scaled_path(margins[:K], _change(vals, labels[:K, shape]), closed[:K], statistic, never_t)
    else:  # the shape from one half of the rows, the test on the other
        shape, test = np.sort(perm[: n // 2]), np.sort(perm[n // 2:])
        path = _per_stage_path(margins[:K, shape], differs[:K, shape], cands, confidence, never_t)
    chosen = _scan(margins[:, test], differs[:, test], path, max_disagreement, confidence, corrected,
                   shared=rule == "shared")
    thr = np.full(K + 1, never_t, np.float32)
    if chosen >= 0:
        thr[:K] = np.where(closed[:K], np.float32(never_t), path[chosen])
        thr[K] = path[chosen].min(initial=never_t)  # the last stage ends the loop anyway; kept informative
    stages = stop_stages(margins, thr)
    d_test = int(np.count_nonzero(differs[stages[test], test]))
    d = int(np.count_nonzero(differs[stages, np.arange(n)]))
    return StopRule(thr, float(max_disagreement), float(confidence), bool(corrected), int(n), d / n,
                    clopper_pearson_upper(d_test, test.size, confidence), float(cum_cost[stages].mean()),
                    float(cum_cost[-1]), np.bincount(stages, minlength=K + 1) / n, rule, int(test.size), statistic)


def _change(values: np.ndarray, top: np.ndarray) -> np.ndarray:
    """(K, n): how far the rest of the groups move each row's stage-k answer, in the statistic's units.

    `values` (K + 1, n, P) are every stage's scores (logits, or probabilities), `top` (K, n) each
    stage's answer. change_k = max over classes c of (v_final - v_k)[c] - (v_final - v_k)[top_k], at
    least 0: the final answer differs from stage k's only if some class gains on top_k by more than
    their gap at stage k, so a row is wrong at stage k only when change_k >= its top-two gap.
    """
    move = values[-1][None] - values[:-1]  # (K, n, P)
    own = np.take_along_axis(move, top[..., None], axis=2)
    return np.maximum((move - own).max(axis=2), 0.0)


def _scaled_path(values: np.ndarray, change: np.ndarray, closed: np.ndarray, statistic: str,
                 never_t: float) -> np.ndarray:
    """The "scaled" rule's path (P, K), cautious to bold: stage k's threshold is the smallest guarded
    candidate of stage k >= λ·s_k, for λ falling through every value where some stage's threshold
    changes (at most MAX_CANDIDATES of them, spread evenly).

    s_k, the shape: the SHAPE_QUANTILE quantile of `change` (K, n_shape), how far the remaining
    groups moved the shaping rows' stage-k answers (`_change`): a stage whose answers the last groups
    still move a lot needs a larger gap to stop. It is learned from every shaping row (not only the
    few that end wrong, whose largest gap is too noisy to shape on); a stage whose answers never
    moved gets the smallest positive s of the others (1 when none moved). The candidates of stage k
    lie between its distinct values on all calibration rows, guarded as in `_candidates`, so no row
    sits on a threshold. The path is nested (every threshold falls or stays as λ falls).
    """
    K = values.shape[0]
    s = np.quantile(change, SHAPE_QUANTILE, axis=1) if change.shape[1] else np.zeros(K)
    pos = (s > 0) & ~closed
    s = np.where(pos, s, s[pos].min() if pos.any() else 1.0).astype(np.float64)
    per_stage = [np.zeros(0, np.float32) if closed[k] else _candidates(values[k], statistic, limit=False)[::-1]
                 for k in range(K)]  # ascending
    lams = np.unique(np.concatenate([c.astype(np.float64) / s[k] for k, c in enumerate(per_stage)]
                                    + [np.zeros(0)]))
    lams = lams[::-1]  # descending: cautious to bold
    if lams.size > MAX_CANDIDATES:
        lams = lams[np.linspace(0, lams.size - 1, MAX_CANDIDATES).round().astype(int)]
    path = np.full((lams.size, K), never_t, np.float32)
    for k, c in enumerate(per_stage):
        if c.size == 0:
            continue
        # the smallest candidate >= λ s_k (candidates are exact float32 values; compare in float64 with
        # a relative tolerance so that λ = c / s_k maps back to c)
        idx = np.searchsorted(c.astype(np.float64), lams * s[k] * (1 - 1e-12), side="left")
        ok = idx < c.size
        path[ok, k] = c[idx[ok]]
    return path


def _per_stage_path(margins: np.ndarray, differs: np.ndarray, cands: np.ndarray, confidence: float,
                    never_t: float = NEVER) -> np.ndarray:
    """Per-stage thresholds (P, K), conservative to bold, from the shape rows: at level λ, stage k admits
    its j rows of largest margin for the largest j whose Clopper-Pearson bound on their disagreement
    rate is <= λ (a stage where few rows are sure opens late, and only as far as its rows support).

    Each threshold is snapped down to a candidate (between two distinct calibration margins); the path
    is nested: every stage's threshold falls, or stays, as λ grows.
    """
    K, n = margins.shape
    if K == 0 or n == 0 or cands.size == 0:
        return np.zeros((0, K), np.float32)
    order = np.argsort(-margins, axis=1, kind="stable")
    m_sorted = np.take_along_axis(margins, order, axis=1)
    bad = np.cumsum(np.take_along_axis(differs, order, axis=1), axis=1)
    ucb = _cp_upper(bad, np.arange(1, n + 1)[None, :], confidence)  # (K, n)
    best = np.minimum.accumulate(ucb[:, ::-1], axis=1)[:, ::-1]  # the lowest bound from j rows on
    levels = np.unique(best)
    asc = cands[::-1]  # ascending
    path = np.full((levels.size, K), never_t, np.float32)
    for k in range(K):
        j = np.searchsorted(best[k], levels, side="right")  # rows admitted: largest j with bound <= level
        m = m_sorted[k, np.maximum(j - 1, 0)]  # the smallest admitted margin
        idx = np.searchsorted(asc, m, side="right") - 1  # the largest candidate <= it
        ok = (j > 0) & (idx >= 0)
        path[ok, k] = asc[idx[ok]]
    return path


def _scan(margins: np.ndarray, differs: np.ndarray, path: np.ndarray, delta: float, confidence: float,
          corrected: bool, chunk: int = 128, shared: bool = False) -> int:
    """Fixed-sequence test along `path` (P, K) on the test rows: the index of the last rule before the
    first failure (-1: none passes).

    Corrected: a row counts against rule p if its answer differed at any rule up to p (the monotone
    envelope of the loss, so the count can only grow along the path) and the Clopper-Pearson bound of
    that count must be <= δ. Uncorrected: the plain count over the rows must be <= δ. `shared`: every
    stage's threshold is the same, so a row stops after as many stages as have a running maximum
    margin below it (the same stages, found faster).
    """
    K, n = margins.shape[0] - 1, margins.shape[1]
    if path.shape[0] == 0 or n == 0:
        return -1
    cols = np.arange(n)[:, None]
    seen = np.zeros(n, bool)
    counts = []
    run_max = np.maximum.accumulate(margins[:K], axis=0) if shared else None
    for i in range(0, path.shape[0], chunk):
        thr = path[i:i + chunk].T  # (K, c)
        if shared:
            stage = (run_max[:, :, None] < thr[:1, None, :]).sum(axis=0)  # (n, c)
        else:
            hit = margins[:K, :, None] >= thr[:, None, :]  # (K, n, c)
            stage = np.where(hit.any(axis=0), hit.argmax(axis=0), K)  # (n, c)
        dis = differs[stage, cols]
        if corrected:
            dis = np.logical_or.accumulate(dis, axis=1) | seen[:, None]
            seen = dis[:, -1]
        counts.append(dis.sum(axis=0))
    counts = np.concatenate(counts)
    rates = _cp_upper(counts, n, confidence) if corrected else counts / n
    failed = np.flatnonzero(rates > delta)
    return (int(failed[0]) if failed.size else path.shape[0]) - 1


def _cp_upper(k: np.ndarray, n: int, confidence: float) -> np.ndarray:
    """`clopper_pearson_upper` for an array of counts."""
    from scipy.stats import beta

    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(k >= n, 1.0, beta.ppf(confidence, k + 1, np.maximum(n - k, 1)))  # n may be an array


def stopping_entry(rule: StopRule) -> dict:
    """The manifest's ``stopping`` entry for `rule` (thresholds as the float32 values runtimes compare).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.stopping import calibrate_stopping, stopping_entry
    >>> e = stopping_entry(calibrate_stopping([np.tile([[0.9, 0.1]], (100, 1))] * 2, [0.0, 1.0], 0.05))
    >>> e["statistic"], e["n_calibration"], e["thresholds"][0] == float(np.float32(e["thresholds"][0]))
    ('top2_margin', 100, True)
    """
    return {"statistic": rule.statistic, "bound": "clopper-pearson" if rule.corrected else "empirical",
            "max_disagreement": rule.max_disagreement, "confidence": rule.confidence,
            "n_calibration": rule.n_calibration, "disagreement": rule.disagreement,
            "disagreement_bound": rule.disagreement_bound, "rule": rule.rule, "n_test": rule.n_test,
            "mean_cost": rule.mean_cost,
            "full_cost": rule.full_cost, "thresholds": [float(t) for t in rule.thresholds],
            "stop_share": [float(s) for s in rule.stop_share]}


def stop_c_text(prefix: str, thresholds, int16: bool = False, statistic: str = "top2_margin") -> tuple[str, str]:
    """(header lines, source lines) declaring and defining the table ``<prefix>_stop_threshold``.

    The float model also gets ``<prefix>_stop_statistic`` (ES_STOP_MARGIN or ES_STOP_LOGIT_GAP), the
    statistic the thresholds apply to: firmware passes both to `es_set_stop_statistic`.

    The float model's table holds the float32 thresholds (C99 hexadecimal constants, exact); the
    int16 model's (`int16`) the same thresholds in units of 2^-15, its probabilities' unit, rounded
    up: a threshold t lies between two multiples of 2^-15 (see `calibrate_stopping`), so for an
    integer margin m, ``m >= ceil(t * 2^15)`` exactly when ``m * 2^-15 >= t``.

    Examples
    --------
    >>> from edgeseq.export.stopping import stop_c_text
    >>> h, c = stop_c_text("m", [2.0, 0.5])
    >>> h.splitlines()
    ['extern const float m_stop_threshold[2];', 'extern const uint32_t m_stop_statistic;']
    >>> "0x1.0000000000000p-1f" in c
    True
    >>> stop_c_text("m", [2.0, 0.50001], int16=True)[1].splitlines()[-1]
    'const int32_t m_stop_threshold[2] = { 65536, 16385 };'
    """
    thr = np.asarray(thresholds, dtype=np.float32)
    if int16:
        q = np.minimum(np.ceil(thr.astype(np.float64) * 32768.0), 65536.0).astype(np.int64)
        ctype, unit, call = "int32_t", "units of 2^-15", "es16_set_stop"
        body = ", ".join(str(int(v)) for v in q)
    else:
        ctype, unit, call = "float", "float32", "es_set_stop_statistic"
        body = ", ".join(f"{float(v).hex()}f" for v in thr)  # C99 hexadecimal constants: exact float32 values
    n = thr.size
    gap = statistic == "logit_gap"
    what = ("gap between its two largest raw scores (before the link; |z| for a sigmoid)" if gap else
            "margin between its\n   two largest probabilities")
    header = f"extern const {ctype} {prefix}_stop_threshold[{n}];\n"
    source = (f"\n/* per-input stopping (edgeseq export --stop-data): stage k is confident when the {what} is\n"
              f"   >= {prefix}_stop_threshold[k] ({unit}); pass the table to {call} */\n"
              f"const {ctype} {prefix}_stop_threshold[{n}] = {{ {body} }};\n")
    if not int16:
        header += f"extern const uint32_t {prefix}_stop_statistic;\n"
        source += (f"const uint32_t {prefix}_stop_statistic = {1 if gap else 0}u; /* "
                   f"{'ES_STOP_LOGIT_GAP' if gap else 'ES_STOP_MARGIN'} */\n")
    return header, source


def append_stop_c(c_dir, manifest: dict) -> None:
    """Add the stopping table of `manifest` to the generated C model in `c_dir` (nothing without one).

    The one place that writes it, used by the exporter and by `verify`'s regeneration, so a
    regenerated model is byte-identical to the exported one.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from edgeseq.export.stopping import append_stop_c
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "edgeseq_model.h").write_text("#ifndef G\\n#define G\\n#endif /* G */\\n")
    >>> _ = (d / "edgeseq_model.c").write_text("/* model */\\n")
    >>> append_stop_c(d, {"c": {"prefix": "m"}, "stopping": {"thresholds": [2.0, 0.25]}})
    >>> "extern const float m_stop_threshold[2];" in (d / "edgeseq_model.h").read_text()
    True
    """
    from edgeseq.format import C_HEADER, C_SOURCE, c_dtype
    from edgeseq.io.atomic import atomic_write_text

    entry = manifest.get("stopping")
    if entry is None or not manifest.get("c"):
        return
    c_dir = Path(c_dir)
    header, source = stop_c_text(manifest["c"]["prefix"], entry["thresholds"], c_dtype(manifest) == "int16",
                                 entry.get("statistic", "top2_margin"))
    h = (c_dir / C_HEADER).read_text(encoding="ascii")
    cut = h.rindex("#endif")
    atomic_write_text(c_dir / C_HEADER, h[:cut] + header + "\n" + h[cut:], encoding="ascii")
    atomic_write_text(c_dir / C_SOURCE, (c_dir / C_SOURCE).read_text(encoding="ascii") + source, encoding="ascii")


def staged_outputs(exported, X) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(probabilities, raw scores) of every stage on raw rows `X` (n, n_features_in), float32, from an
    `ExportedModel`: exactly what the Python runtime commits, and the scores before the link that
    the ``logit_gap`` statistic reads.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.stopping import staged_outputs
    >>> from edgeseq.export.writer import export_model
    >>> from edgeseq.runtime.model import ExportedModel
    >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = X[:, 1] > 0
    >>> out = tempfile.mkdtemp() + "/out"
    >>> _ = export_model(AnytimeClassifier([[0], [1]], [1.0, 1.0]).fit(X, y).fitted_sequence_, out)
    >>> p, z = staged_outputs(ExportedModel(out), X[:5])
    >>> [a.shape for a in p], [a.shape for a in z]
    ([(5, 2), (5, 2), (5, 2)], [(5, 1), (5, 1), (5, 1)])
    """
    feats = group_features(exported.manifest, X)
    preds = [exported.predict(feats, prefix=k) for k in range(exported.n_prefixes)]
    return [p.proba for p in preds], [np.asarray(p.score, np.float32) for p in preds]


def staged_proba(exported, X) -> list[np.ndarray]:
    """Every stage's float32 probabilities on raw rows `X`: the first half of `staged_outputs`.

    Examples
    --------
    >>> from edgeseq.export.stopping import staged_outputs, staged_proba
    >>> staged_proba.__doc__.split(":")[1].strip().startswith("the first half")
    True
    """
    return staged_outputs(exported, X)[0]


def group_features(manifest: dict, X) -> dict:
    """{group name: float32 columns of X} for every group of an export (X holds its raw columns).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.stopping import group_features
    >>> m = {"n_features_in": 3, "groups": [{"name": "a", "columns": [2]}, {"name": "b", "columns": [0, 1]}]}
    >>> {k: v.shape for k, v in group_features(m, np.zeros((4, 3))).items()}
    {'a': (4, 1), 'b': (4, 2)}
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != manifest["n_features_in"] or X.shape[0] == 0:
        raise ExportError(f"stop data must be a non-empty (n, {manifest['n_features_in']}) array of the model's "
                          f"raw columns, got shape {X.shape}")
    if not np.all(np.isfinite(X.astype(np.float32))):
        raise ExportError("stop data must be finite in float32")
    return {g["name"]: np.ascontiguousarray(X[:, g["columns"]], dtype=np.float32) for g in manifest["groups"]}


def int16_staged(model, qm, X) -> list:
    """Every stage's integer (probabilities in units of 2^-15, label) of an int16 model on raw rows X:
    the integer simulation, bit-identical to the int16 C runtime.

    `model` is the FittedSequence or TreeStageModel that `qm` (`quantize_sequence` /
    `quantize_trees`) quantises.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.kinds.affine.quantize import quantize_sequence
    >>> from edgeseq.export.stopping import int16_staged
    >>> X = np.random.default_rng(0).normal(size=(80, 2)); y = X[:, 0] > 0
    >>> seq = AnytimeClassifier([[0], [1]], [1.0, 1.0]).fit(X, y).fitted_sequence_
    >>> out = int16_staged(seq, quantize_sequence(seq, X, y), X[:3])
    >>> len(out), out[2][0].shape, int(out[2][0][0].sum())
    (3, (3, 2), 32768)
    """
    from edgeseq.export.kinds import kind_of_model

    kind, form = kind_of_model(model)
    return kind.int16_staged(form, qm, X)


def int16_rows(model, qm, X) -> np.ndarray:
    """Raw rows X as an int16 C model reads them (its columns in sequence order, quantised).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.kinds.affine.quantize import quantize_sequence
    >>> from edgeseq.export.stopping import int16_rows
    >>> X = np.random.default_rng(0).normal(size=(80, 2)); y = X[:, 0] > 0
    >>> seq = AnytimeClassifier([[0], [1]], [1.0, 1.0]).fit(X, y).fitted_sequence_
    >>> int16_rows(seq, quantize_sequence(seq, X, y), X[:3]).dtype
    dtype('int16')
    """
    from edgeseq.export.kinds import kind_of_model

    kind, form = kind_of_model(model)
    return kind.int16_rows(form, qm, np.asarray(X, dtype=np.float64))


def add_stopping(tmp, manifest: dict, stop_data, max_disagreement: float, confidence: float = 0.95,
                 int16=None, rule: str = "auto", statistic: str = "auto") -> dict:
    """Calibrate on `stop_data` with the export just written in `tmp`, add the C table and the
    manifest entry, rewrite the manifest; returns it. Runs before the export becomes visible.

    `stop_data` is X or (X, y) (y is not needed: disagreement is measured against the full model).
    `int16` = (model, quantised model) for an int16 C model: the thresholds are then chosen on the
    integer model's own probabilities (`int16_staged`), which that C runtime reproduces bit for bit.
    `statistic`: "auto" is "logit_gap" for a float C model and "top2_margin" for an int16 one (whose C
    runtime compares the probability margin only).

    Examples
    --------
    `export_model(..., stop_data=...)` calls it on its temporary directory; on a finished export:

    >>> import numpy as np, tempfile
    >>> from pathlib import Path
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.stopping import add_stopping
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(800, 2)); y = X[:, 0] + 0.2 * X[:, 1] > 0
    >>> out = Path(tempfile.mkdtemp()) / "out"
    >>> m = export_model(AnytimeClassifier([[0], [1]], [1.0, 1.0]).fit(X[:200], y[:200]).fitted_sequence_, out)
    >>> m = add_stopping(out, m, X[200:], 0.05)
    >>> m["stopping"]["n_calibration"], "_stop_threshold[3]" in (out / "edgeseq_model.h").read_text()
    (600, True)
    """
    from edgeseq.format import (C_HEADER, C_SOURCE, MANIFEST, dump_manifest, manifest_checksum, read_verified,
                                sha256_file, validate_manifest)
    from edgeseq.io.atomic import atomic_write_bytes
    from edgeseq.runtime.model import ExportedModel

    if manifest["task"] == "regression":
        raise ExportError("per-input stopping applies to classifiers (a regression stage does not bound the "
                          "change still to come); export without --stop-data")
    X = stop_data[0] if isinstance(stop_data, tuple) else stop_data
    tmp = Path(tmp)
    cum_cost = [p["cum_cost"] for p in manifest["prefixes"]]
    closed = [not p.get("commit", True) for p in manifest["prefixes"]]  # layer blocks: unpublished stages
    if statistic == "auto":
        statistic = "logit_gap" if int16 is None else "top2_margin"
    if statistic not in ("top2_margin", "logit_gap"):
        raise ExportError(f"stop statistic must be 'auto', 'logit_gap' or 'top2_margin', got {statistic!r:.40}")
    if int16 is None:
        probas, scores = staged_outputs(ExportedModel(tmp), X)
        fitted = calibrate_stopping(probas, cum_cost, max_disagreement, confidence=confidence, rule=rule,
                                    closed=closed, statistic=statistic, scores_by_stage=scores)
    elif statistic != "top2_margin":
        raise ExportError("an int16 C model stops on the probability margin only; export it with "
                          "stop statistic 'top2_margin' (or 'auto')")
    else:
        group_features(manifest, X)  # the same checks of the rows
        staged = int16_staged(*int16, X)
        fitted = calibrate_stopping([np.ldexp(p.astype(np.float64), -15) for p, _ in staged], cum_cost,
                                  max_disagreement, confidence=confidence, labels_by_stage=[lab for _, lab in staged],
                                  rule=rule)
    m = dict(manifest)
    m["stopping"] = stopping_entry(fitted)
    append_stop_c(tmp, m)
    m["files"] = [dict(f, sha256=sha256_file(tmp / f["file"])) if f["file"] in (C_HEADER, C_SOURCE) else f
                  for f in m["files"]]
    m.pop("manifest_sha256", None)
    m["manifest_sha256"] = manifest_checksum(m)
    validate_manifest(m)
    atomic_write_bytes(tmp / MANIFEST, dump_manifest(m))
    read_verified(tmp)
    return m


def c_rows(manifest: dict, X, n_features: int) -> np.ndarray:
    """Raw rows X as the C runtime reads them: the export's groups' columns in sequence order.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.stopping import c_rows
    >>> m = {"n_features_in": 3, "groups": [{"name": "a", "columns": [2]}, {"name": "b", "columns": [0, 1]}]}
    >>> c_rows(m, np.arange(6.0).reshape(2, 3), 3).tolist()
    [[2.0, 0.0, 1.0], [5.0, 3.0, 4.0]]
    """
    feats = group_features(manifest, X)
    return np.hstack([feats[g["name"]] for g in manifest["groups"]])[:, :n_features]


def c_stop_stages(c_dir, manifest: dict, X, *, compiler=None, flags=None, extra=("-O2",), target=None,
                  order=None):
    """Run the compiled C runtime's stopping loop (`es_set_stop`, runtime_c/tests/stop_driver.c) on
    raw rows X; returns (stage, label) int64 arrays, one entry per row.

    `c_dir` holds the float C model of a stopping export (`verify` passes the regenerated copy, never
    the shipped one). With `target` (an `edgeseq.export.c_arm.TARGETS` entry) the loop runs on the
    emulated Cortex-M core instead of the host. `order`: the raw columns in the order the C model
    takes them, when that is not the groups' columns in sequence order (a layer-block model's windowed
    groups are time-major: `layer_block_feature_order`).

    Raises
    ------
    CCompilerError
        When the build fails or the runtime refuses a row.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.stopping import c_stop_stages
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(1000, 2)); y = X[:, 0] > 0
    >>> out = tempfile.mkdtemp() + "/out"
    >>> m = export_model(AnytimeClassifier([[0], [1]], [1.0, 1.0]).fit(X[:300], y[:300]).fitted_sequence_, out,
    ...                  stop_data=X[300:], max_disagreement=0.02)
    >>> stage, label = c_stop_stages(out, m, X[:5], extra=("-O0",))
    >>> stage.shape, bool(np.all(stage <= 2))
    ((5,), True)
    """
    from edgeseq.export.c_harness import model_consts

    if order is None:
        rows = c_rows(manifest, X, model_consts(c_dir)["N_FEATURES"])
    else:
        group_features(manifest, X)  # the same checks of the rows
        rows = np.asarray(X, dtype=np.float64)[:, np.asarray(order, dtype=np.int64)]
    return _run_stop_driver(c_dir, np.ascontiguousarray(rows, dtype=np.float32), compiler=compiler, flags=flags,
                            extra=extra, target=target)


def c_stop_stages_i16(c_dir, xq, *, compiler=None, flags=None, extra=("-O2",), target=None):
    """`c_stop_stages` for an int16 C model (`es16_set_stop`, runtime_c/tests/stop_driver_i16.c) on
    int16 feature rows `xq` (sequence order, quantised as the extractor delivers them).

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.kinds.affine.quantize import quantize_from_manifest, quantize_features
    >>> from edgeseq.export.stopping import c_stop_stages_i16
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(1000, 2)); y = X[:, 0] > 0
    >>> seq = AnytimeClassifier([[0], [1]], [1.0, 1.0]).fit(X[:300], y[:300]).fitted_sequence_
    >>> out = tempfile.mkdtemp() + "/out"
    >>> m = export_model(seq, out, c_dtype="int16", calibration=(X[:300], y[:300]), stop_data=X[300:],
    ...                  max_disagreement=0.02)
    >>> xq = quantize_features(quantize_from_manifest(seq, m["c"]["int16"]), X[:5, seq.prefix_columns(2)])
    >>> stage, label = c_stop_stages_i16(out, xq, extra=("-O0",))
    >>> stage.shape
    (5,)
    """
    return _run_stop_driver(c_dir, np.ascontiguousarray(xq, dtype=np.int16), compiler=compiler, flags=flags,
                            extra=extra, target=target)


def _run_stop_driver(c_dir, rows: np.ndarray, *, compiler, flags, extra, target):
    """Build the float (float32 rows) or int16 (int16 rows) stopping driver, run it on `rows`, parse it."""
    import re
    import subprocess
    import tempfile

    from edgeseq.errors import CCompilerError
    from edgeseq.export.c_harness import STRICT_FLAGS, compile_c, runtime_dir

    c_dir, rdir = Path(c_dir), runtime_dir()
    header = (c_dir / "edgeseq_model.h").read_text(encoding="ascii")
    i16 = rows.dtype == np.int16
    prefix = re.search(r"extern const es(?:16)?_model (\w+)_model;", header).group(1)
    runtime, driver, macro = (("edgeseq_runtime_i16.c", "stop_driver_i16.c", "ES16_PREFIX") if i16 else
                              ("edgeseq_runtime.c", "stop_driver.c", "ES_PREFIX"))
    sources = [rdir / runtime, c_dir / "edgeseq_model.c", rdir / "tests" / driver]
    defines = [f"{macro}={prefix}"]
    with tempfile.TemporaryDirectory(prefix="edgeseq_stop_") as tmp:
        rows.tofile(Path(tmp) / "rows.bin")
        if target is None:
            exe = compile_c(sources, Path(tmp) / "stop_driver", include_dirs=[c_dir, rdir], defines=defines,
                            compiler=compiler, flags=STRICT_FLAGS if flags is None else flags, extra=extra)
            proc = subprocess.run([str(exe), str(Path(tmp) / "rows.bin")], capture_output=True, text=True)
        else:
            from edgeseq.export.c_arm import build_arm, run_qemu

            elf = build_arm(sources, Path(tmp) / "stop_driver.elf", target, include_dirs=[c_dir, rdir], defines=defines)
            proc = run_qemu(elf, target, ["rows.bin"], cwd=tmp, check=False)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or not lines or lines[-1] != "done" or len(lines) != rows.shape[0] + 1:
        raise CCompilerError(f"the C stopping driver failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}")
    tok = [line.split() for line in lines[:-1]]
    if any(t[1] == "ERR" for t in tok):
        raise CCompilerError(f"the C runtime refused a row: {next(t for t in tok if t[1] == 'ERR')}")
    return np.array([int(t[1]) for t in tok]), np.array([int(t[2]) for t in tok])
