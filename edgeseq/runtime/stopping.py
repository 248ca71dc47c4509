"""The per-input stopping rule both runtimes apply: stop once the committed stage is confident enough.

A classifier's stage k is *confident* for a row when a statistic of its output reaches the stage's
threshold, both in float32: ``statistic >= threshold[k]``. The export records which statistic
(manifest ``stopping.statistic``):

* ``"top2_margin"``: the margin between the two largest class probabilities, ``top1 - top2``, in
  [0, 1]. It saturates: once the runner-up's probability is below float32's resolution near 1 (a
  logit gap of about 17), every such row has margin exactly 1, confidently wrong ones included.
* ``"logit_gap"``: the gap between the two largest raw scores before the link (the logits; ``|z|``
  for a binary sigmoid model, its distance to the decision boundary), in [0, inf). It does not
  saturate, so a stage's very confident rows stay ordered by how confident they are.

The C runtime (`es_set_stop_statistic` / `es16_set_stop`) computes the same float32 difference from
the values it commits (the logit gap before applying the link) and compares it with the same float32
threshold, so the two runtimes stop at the same stage whenever their values agree to the last bit
(and the calibration keeps every threshold away from the values it saw, see
`edgeseq.export.stopping`). `never` is a threshold no value reaches.

This module is numpy-only: the Python runtime, the calibration and `verify` share it.
"""

from __future__ import annotations

import numpy as np

from edgeseq.errors import RuntimeInputError

__all__ = ["STOP_MODES", "STATISTICS", "NEVER", "NEVER_GAP", "never", "top2_margin", "logit_gap", "statistic_of",
           "stage_statistic", "stop_stages", "stop_thresholds", "check_stop"]

STOP_MODES = (None, "confident")
STATISTICS = ("top2_margin", "logit_gap")
NEVER = 2.0  # a threshold no margin (at most 1) reaches: the stage never stops
NEVER_GAP = float(np.finfo(np.float32).max)  # the logit gap's "never" (a finite gap never exceeds it)


def never(statistic: str = "top2_margin") -> float:
    """The threshold that never stops a row under `statistic` (`NEVER` or `NEVER_GAP`).

    Examples
    --------
    >>> from edgeseq.runtime.stopping import never
    >>> never("top2_margin"), never("logit_gap") > 1e38
    (2.0, True)
    """
    return NEVER_GAP if statistic == "logit_gap" else NEVER


def logit_gap(score) -> np.ndarray:
    """Float32 gap between the two largest raw scores of each row (``|z|`` for one score: a sigmoid).

    The scores are the stage's outputs before the link (`ClassifierPrediction.score`). A binary
    sigmoid model's logits are (0, z), so its gap is ``|z|``; a softmax model's is ``z_top1 - z_top2``,
    the log of the ratio of its two largest probabilities, computed without the link's rounding.

    Parameters
    ----------
    score : array-like of shape (n_samples, n_outputs)
        Raw scores (converted to float32).

    Returns
    -------
    float32 ndarray of shape (n_samples,)
        In [0, inf).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.runtime.stopping import logit_gap
    >>> logit_gap(np.array([[3.0, 1.0, 2.5], [0.0, 40.0, -1.0]], np.float32)).tolist()
    [0.5, 40.0]
    >>> logit_gap(np.array([[-2.0], [0.5]], np.float32)).tolist()
    [2.0, 0.5]
    """
    z = np.asarray(score, dtype=np.float32)
    if z.ndim != 2 or z.shape[1] == 0:
        raise RuntimeInputError(f"scores must be a 2-D (n, n_outputs) array, got shape {z.shape}")
    if z.shape[1] == 1:
        return np.abs(z[:, 0])
    top = np.sort(z, axis=1)
    return (top[:, -1] - top[:, -2]).astype(np.float32)


def statistic_of(manifest: dict) -> str:
    """The stopping statistic of an export (``"top2_margin"`` for an entry that does not name one).

    Examples
    --------
    >>> from edgeseq.runtime.stopping import statistic_of
    >>> statistic_of({"stopping": {"statistic": "logit_gap"}}), statistic_of({"stopping": {}})
    ('logit_gap', 'top2_margin')
    """
    return (manifest.get("stopping") or {}).get("statistic", "top2_margin")


def stage_statistic(pred, statistic: str) -> np.ndarray:
    """The stopping statistic of a `ClassifierPrediction`: `top2_margin` of its probabilities or
    `logit_gap` of its scores.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.runtime.model import ClassifierPrediction
    >>> from edgeseq.runtime.stopping import stage_statistic
    >>> z = np.array([[0.0, 30.0]], np.float32)
    >>> p = ClassifierPrediction(np.array([1]), np.array([[0.0, 1.0]], np.float32), np.array([1]), 1, z)
    >>> stage_statistic(p, "top2_margin").tolist(), stage_statistic(p, "logit_gap").tolist()
    ([1.0], [30.0])
    """
    if statistic == "logit_gap":
        if pred.score is None:
            raise RuntimeInputError("the logit-gap stopping statistic needs the stage's raw scores")
        return logit_gap(pred.score)
    return top2_margin(pred.proba)


def top2_margin(proba) -> np.ndarray:
    """Float32 margin ``top1 - top2`` of each row of class probabilities (the stopping statistic).

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Class probabilities as a runtime commits them (converted to float32).

    Returns
    -------
    float32 ndarray of shape (n_samples,)
        In [0, 1]; 1 for a single class.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.runtime.stopping import top2_margin
    >>> top2_margin(np.array([[0.7, 0.2, 0.1], [0.5, 0.5, 0.0]], np.float32)).tolist()
    [0.5, 0.0]
    """
    p = np.asarray(proba, dtype=np.float32)
    if p.ndim != 2 or p.shape[1] == 0:
        raise RuntimeInputError(f"probabilities must be a 2-D (n, n_classes) array, got shape {p.shape}")
    if p.shape[1] == 1:
        return np.ones(p.shape[0], np.float32)
    top = np.sort(p, axis=1)
    return (top[:, -1] - top[:, -2]).astype(np.float32)


def stop_stages(margins, thresholds, last=None) -> np.ndarray:
    """Each row's stopping stage: the first stage k <= `last` with ``margins[k] >= thresholds[k]``
    (float32), else `last` (default: the final stage).

    Parameters
    ----------
    margins : array-like of shape (n_stages, n_samples)
        `top2_margin` of every stage's probabilities.
    thresholds : array-like of shape (n_stages,)
        Float32 thresholds (`NEVER` for a stage that never stops).
    last : int, optional
        The last stage a row may reach (a budget's stage); default ``n_stages - 1``.

    Returns
    -------
    int64 ndarray of shape (n_samples,)

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.runtime.stopping import stop_stages
    >>> m = np.array([[0.1, 0.1, 0.1], [0.2, 0.9, 0.5], [0.4, 0.95, 0.6]], np.float32)
    >>> stop_stages(m, np.array([0.5, 0.5, 0.5], np.float32)).tolist()
    [2, 1, 1]
    >>> stop_stages(m, np.array([0.5, 0.5, 0.5], np.float32), last=1).tolist()
    [1, 1, 1]
    """
    m = np.asarray(margins, dtype=np.float32)
    thr = np.asarray(thresholds, dtype=np.float32)
    last = m.shape[0] - 1 if last is None else int(last)
    hit = m[:last + 1] >= thr[:last + 1, None]
    hit[last] = True
    return np.argmax(hit, axis=0).astype(np.int64)


def stop_thresholds(manifest: dict) -> np.ndarray | None:
    """The float32 thresholds of an export's ``stopping`` entry, one per stage (None without one).

    Examples
    --------
    >>> from edgeseq.runtime.stopping import stop_thresholds
    >>> stop_thresholds({}) is None
    True
    >>> stop_thresholds({"stopping": {"thresholds": [2.0, 0.5, 0.5]}}).dtype
    dtype('float32')
    """
    entry = manifest.get("stopping")
    return None if entry is None else np.asarray(entry["thresholds"], dtype=np.float32)


def check_stop(stop, manifest: dict) -> np.ndarray | None:
    """Thresholds for a `stop` argument (None: no stopping); RuntimeInputError for an unknown mode or
    ``"confident"`` on an export calibrated without stopping.

    Examples
    --------
    >>> from edgeseq.runtime.stopping import check_stop
    >>> check_stop(None, {}) is None
    True
    >>> check_stop("confident", {})
    Traceback (most recent call last):
    ...
    edgeseq.errors.RuntimeInputError: stop="confident" needs an export with stopping thresholds (export it with --stop-data FILE)
    """
    if stop not in STOP_MODES:
        raise RuntimeInputError(f"stop must be None or 'confident', got {stop!r:.40}")
    if stop is None:
        return None
    thr = stop_thresholds(manifest)
    if thr is None:
        raise RuntimeInputError('stop="confident" needs an export with stopping thresholds '
                                "(export it with --stop-data FILE)")
    return thr


def predict_stopped(model, features_by_group: dict, thresholds: np.ndarray, last: int):
    """`ExportedModel.predict(..., stop="confident")`: each row's answer at its stopping stage.

    Runs stages 0..`last` on every row (a batch has all features already; what stopping saves on a
    device is the extraction the anytime loop skips) and picks per row the first confident stage.
    The result's ``prefix`` is an int64 array of each row's stage.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.writer import export_model
    >>> from edgeseq.runtime.model import ExportedModel
    >>> from edgeseq.runtime.stopping import predict_stopped
    >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = X[:, 0] > 0
    >>> out = tempfile.mkdtemp() + "/out"
    >>> _ = export_model(AnytimeClassifier([[0], [1]], [1.0, 1.0]).fit(X, y).fitted_sequence_, out)
    >>> model = ExportedModel(out)
    >>> feats = {g["name"]: X[:4, g["columns"]] for g in model.manifest["groups"]}
    >>> pred = predict_stopped(model, feats, np.array([2.0, 0.0, 0.0], np.float32), last=2)
    >>> pred.prefix.tolist()                    # stage 0 never stops; stage 1 always does
    [1, 1, 1, 1]
    """
    from dataclasses import replace

    preds = [model.predict(features_by_group, prefix=k) for k in range(last + 1)]
    n = preds[-1].proba.shape[0]
    if preds[0].proba.shape[0] != n:  # prefix 0 counts rows from any group given
        preds[0] = replace(preds[0], proba=np.broadcast_to(preds[0].proba[:1], (n, preds[0].proba.shape[1])),
                          label=np.broadcast_to(preds[0].label[:1], (n,)),
                          label_index=np.broadcast_to(preds[0].label_index[:1], (n,)),
                          score=None if preds[0].score is None else
                          np.broadcast_to(preds[0].score[:1], (n, preds[0].score.shape[1])))
    statistic = statistic_of(model.manifest)
    stages = stop_stages(np.stack([stage_statistic(p, statistic) for p in preds]), thresholds, last)
    rows = np.arange(n)
    proba = np.stack([p.proba for p in preds])[stages, rows]
    idx = np.stack([p.label_index for p in preds])[stages, rows].astype(np.int64)
    return replace(preds[-1], label=model.classes[idx], proba=proba, label_index=idx, prefix=stages)
