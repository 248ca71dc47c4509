"""`verify` for an export with per-input stopping: Python and C stop every row at the same stage.

The thresholds recorded in the manifest are re-checked against the graphs: the Python runtime
(onnxruntime on the verified graphs, `ExportedModel.predict(stop="confident")`) and the compiled,
regenerated C model (`es_set_stop`) run the stopping rule on the same rows; every row must stop at
the same stage with the same label.
"""

from __future__ import annotations

import numpy as np

from edgeseq.export.stopping import c_stop_stages, c_stop_stages_i16, group_features, int16_rows, int16_staged
from edgeseq.runtime.stopping import stop_stages, stop_thresholds, top2_margin


def check_stopping(report, c_dir, manifest: dict, exported, X, compiler=None, c_stages=None) -> None:
    """Compare the stopping stages of Python and C on rows X; record the result in `report`.

    Parameters
    ----------
    report : VerifyReport
        Gets ``stop_note`` and ``stop_mismatches`` (any mismatch fails it).
    c_dir : str or Path
        The regenerated float C model (the only C verify compiles).
    manifest : dict
        The verified manifest (with its ``stopping`` entry).
    exported : ExportedModel
        The loaded export.
    X : ndarray of shape (n_samples, n_features_in)
        Rows to compare on.
    compiler : str, optional
    c_stages : tuple of ndarray, optional
        (stage, label) per row when the caller already ran the C stopping loop (a layer-block model
        runs it with its own driver, `run_layer_stop`); `c_dir` is then not compiled.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.writer import export_model
    >>> from edgeseq.evaluate.verify import verify_export
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(1200, 2)); y = X[:, 0] + 0.3 * X[:, 1] > 0
    >>> est = AnytimeClassifier([[0], [1]], [1.0, 1.0]).fit(X[:400], y[:400])
    >>> out = tempfile.mkdtemp() + "/out"
    >>> _ = export_model(est.fitted_sequence_, out, stop_data=X[400:], max_disagreement=0.02)
    >>> rep = verify_export(out, X[:50])
    >>> rep.ok, rep.stop_mismatches, rep.stop_note.split(":")[0]
    (True, 0, 'stopping')
    """
    py = exported.predict(group_features(manifest, X), stop="confident")
    stage, label = c_stop_stages(c_dir, manifest, X, compiler=compiler) if c_stages is None else c_stages
    _record(report, stage, label, py.prefix, py.label_index, "Python and C")


def check_stopping_i16(report, c_dir, manifest: dict, model, qm, X, compiler=None) -> None:
    """`check_stopping` for an int16 C model: its stopping loop against the integer simulation
    (`int16_staged`, the probabilities the thresholds were calibrated on) with the manifest's
    thresholds, on rows X quantised with the recorded scales.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.export.writer import export_model
    >>> from edgeseq.evaluate.verify import verify_export
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(1200, 2)); y = X[:, 0] + 0.3 * X[:, 1] > 0
    >>> est = AnytimeClassifier([[0], [1]], [1.0, 1.0]).fit(X[:400], y[:400])
    >>> out = tempfile.mkdtemp() + "/out"
    >>> _ = export_model(est.fitted_sequence_, out, c_dtype="int16", calibration=(X[:400], y[:400]),
    ...                  stop_data=X[400:], max_disagreement=0.02)
    >>> rep = verify_export(out, X[:50])
    >>> rep.ok, rep.stop_note.split(":")[0]
    (True, 'stopping')
    """
    staged = int16_staged(model, qm, X)
    margins = np.stack([top2_margin(np.ldexp(p.astype(np.float64), -15)) for p, _ in staged])
    want = stop_stages(margins, stop_thresholds(manifest))
    want_label = np.stack([lab for _, lab in staged])[want, np.arange(len(want))]
    stage, label = c_stop_stages_i16(c_dir, int16_rows(model, qm, X), compiler=compiler)
    _record(report, stage, label, want, want_label, "the integer simulation and the int16 C")


def _record(report, stage, label, want, want_label, who: str) -> None:
    bad = int(np.count_nonzero((stage != want) | (label != want_label)))
    report.stop_mismatches = bad
    share = np.bincount(want, minlength=int(want.max(initial=0)) + 1) / max(len(want), 1)
    report.stop_note = (f"stopping: {who} stop at the same stage with the same label on "
                        f"{len(stage) - bad}/{len(stage)} rows (share stopping per stage: "
                        f"{', '.join(f'{s:.2f}' for s in share)})")
