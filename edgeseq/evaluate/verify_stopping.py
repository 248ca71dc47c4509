"""`verify` for an export with per-input stopping: Python and C stop every row at the same stage.

The thresholds recorded in the manifest are re-checked against the graphs: the Python runtime
(onnxruntime on the verified graphs, `ExportedModel.predict(stop="confident")`) and the compiled,
regenerated C model (`es_set_stop`) run the stopping rule on the same rows; every row must stop at
the same stage with the same label.
"""

from __future__ import annotations

import numpy as np

from edgeseq.export.stopping import c_stop_stages, group_features


def check_stopping(report, c_dir, manifest: dict, exported, X, compiler=None) -> None:
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
    stage, label = c_stop_stages(c_dir, manifest, X, compiler=compiler)
    bad = int(np.count_nonzero((stage != py.prefix) | (label != py.label_index)))
    report.stop_mismatches = bad
    share = np.bincount(py.prefix, minlength=len(manifest["prefixes"])) / max(len(py.prefix), 1)
    report.stop_note = (f"stopping: Python and C stop at the same stage with the same label on "
                        f"{len(stage) - bad}/{len(stage)} rows (share stopping per stage: "
                        f"{', '.join(f'{s:.2f}' for s in share)})")
