"""Rebuild the intermediate form from an export (what `edgeseq verify` compares the runtimes with).

The manifest's format, checksums and checks live in `edgeseq.format`; this module adds what needs
onnx: reading the prefix weights back out of the graphs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgeseq.errors import InputError, IntegrityError
from edgeseq.export.kinds.affine.onnx import read_prefix_weights
from edgeseq.format import MANIFEST, read_verified
from edgeseq.forms.linear import FittedSequence


def sequence_from_export(out_dir) -> FittedSequence:
    """Rebuild the FittedSequence of a verified export (weights are the float32 values, upcast).

    This is the independent reading `edgeseq verify` compares every runtime against: it trusts
    only what the files say, after their checksums were verified.

    Parameters
    ----------
    out_dir : str or path-like
        An export written by `edgeseq.export.writer.export_model`.

    Returns
    -------
    FittedSequence

    Raises
    ------
    IntegrityError
        If a file fails its checksum or the graphs disagree with the manifest.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> import tempfile
    >>> out = tempfile.mkdtemp() + "/manifest_demo"
    >>> manifest = export_model(seq, out)
    >>> from edgeseq.export.kinds.affine.reader import sequence_from_export
    >>> back = sequence_from_export(out)
    >>> back.n_prefixes == seq.n_prefixes, all(np.array_equal(b, s.astype(np.float32))
    ...                                        for b, s in zip(back.coefs, seq.coefs))
    (True, True)
    """
    import onnx

    out = Path(out_dir)
    m = read_verified(out)
    if m.get("stage_kind") == "trees":
        raise IntegrityError(f"{out} holds tree stages, not affine prefixes; read it with "
                             "edgeseq.export.kinds.trees.verify.tree_model_from_export")
    groups = m["groups"]
    coefs, intercepts = [], []
    for p in m["prefixes"]:
        try:
            model = onnx.load(str(out / p["file"]), load_external_data=False)  # never read other files
            coef, b = read_prefix_weights(model, p["inputs"])
        except Exception as exc:  # a graph that passed its sha256 but was written by something else
            raise IntegrityError(f"{out / p['file']}: cannot read prefix weights ({exc})") from None
        coefs.append(coef)
        intercepts.append(b)
    try:
        return _rebuild(m, groups, coefs, intercepts)
    except InputError as exc:  # consistent checksums but graphs that disagree with the manifest
        raise IntegrityError(f"{out}: prefix graphs do not match {MANIFEST} ({exc})") from None


def _rebuild(m: dict, groups: list, coefs: list, intercepts: list) -> FittedSequence:
    by_index = sorted(groups, key=lambda g: g["index"])
    outs = m["outputs"]
    classes = None if outs["classes"] is None else np.array(outs["classes"])
    train = [p["metrics"]["train"] for p in m["prefixes"]]
    stats = {k: None if m[k] is None else np.array(m[k], dtype=np.float64)
             for k in ("feature_mean", "feature_std")}
    return FittedSequence(
        task=m["task"], link=m["link"], n_features_in=m["n_features_in"],
        group_names=tuple(g["name"] for g in by_index),
        group_columns=tuple(np.array(g["columns"], dtype=np.int64) for g in by_index),
        costs=np.array([g["cost"] for g in by_index], dtype=np.float64),
        order=np.array([g["index"] for g in groups], dtype=np.int64),
        coefs=tuple(coefs), intercepts=np.vstack(intercepts),
        output_names=tuple(outs["names"]), classes=classes,
        feature_names=None if m["feature_names"] is None else tuple(m["feature_names"]),
        train_metrics=[] if all(t is None for t in train) else [t or {} for t in train],
        doubling_violations=tuple(m["doubling_violations"]), provenance=dict(m["provenance"]),
        y_was_1d=outs["y_was_1d"], **stats)
