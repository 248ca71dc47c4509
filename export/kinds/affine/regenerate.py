"""Prove that an export's generated files are exactly what edgeseq generates from its weights.

The manifest's checksums show that nothing changed by accident, not who wrote the files: anyone can
edit `edgeseq_model.c` (say, add a function that runs at load time) and recompute every sum. But the
C model and the prefix graphs are deterministic functions of the weights and metadata, so `verify`
regenerates them from the verified content and requires the shipped files to be byte-identical.
Only the regenerated C is ever compiled, and onnxruntime only ever loads graphs equal to edgeseq's
own output - nothing that merely came inside a directory is compiled or run.
"""

from __future__ import annotations

from pathlib import Path

from edgeseq.errors import IntegrityError
from edgeseq.export.c_codegen import c_link_of
from edgeseq.export.kinds.affine.c_float import write_c_model
from edgeseq.format import C_HEADER, C_SOURCE, c_dtype, labels_of
from edgeseq.export.names import onnx_input_names
from edgeseq.export.kinds.affine.onnx import build_prefix_graph
from edgeseq.export.stopping import append_stop_c


def require_identical(shipped: Path, expected: bytes, what: str) -> None:
    """IntegrityError unless the shipped file holds exactly the bytes edgeseq generates for it.

    One check for every regenerated artefact (linear and tree graphs, linear and tree C), so that
    verify never loads or compiles anything it did not write itself.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from edgeseq.export.kinds.affine.regenerate import require_identical
    >>> f = Path(tempfile.mkdtemp()) / "model.c"
    >>> _ = f.write_bytes(b"int x;")
    >>> require_identical(f, b"int x;", "C model")      # silent: identical
    >>> require_identical(f, b"int y;", "C model")
    Traceback (most recent call last):
    ...
    edgeseq.errors.IntegrityError: ...model.c differs from the C model edgeseq generates...
    """
    if shipped.read_bytes() != expected:
        raise IntegrityError(f"{shipped} differs from the {what} edgeseq generates from the export's own "
                             "weights (edited after export, or not written by this edgeseq); it is not "
                             "compiled or loaded - re-export the model")


def check_generated_files(out_dir, manifest: dict, seq, c_dir) -> None:
    r"""Regenerate the C model into `c_dir` and every prefix graph in memory; IntegrityError unless the
    files in `out_dir` are byte-identical. `seq` is the sequence read from the verified export.
    An int16 C model (manifest ``c.dtype``) is regenerated from the export's float32 weights and the
    scales its manifest records (`quantize_from_manifest`, which re-proves the headroom), since its
    calibration rows are not part of the export.

    Parameters
    ----------
    out_dir : str or Path
        A verified export directory.
    manifest : dict
        Its manifest (from `read_verified`).
    seq : FittedSequence
        The sequence rebuilt from the export (``sequence_from_export``).
    c_dir : str or Path
        Where the regenerated C files are written (the only C that is ever compiled).

    Raises
    ------
    IntegrityError
        Naming the first shipped file that differs from what edgeseq generates.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.kinds.affine.reader import read_verified, sequence_from_export
    >>> from edgeseq.export.writer import export_model
    >>> from edgeseq.format import dump_manifest, manifest_checksum, sha256_file
    >>> X = np.random.default_rng(0).normal(size=(40, 2))
    >>> out = Path(tempfile.mkdtemp()) / "out"
    >>> _ = export_model(AnytimeRegressor([[0], [1]], [1.0, 2.0]).fit(X, X[:, 0]).fitted_sequence_, out)
    >>> check_generated_files(out, read_verified(out), sequence_from_export(out), tempfile.mkdtemp())
    >>> src = out / "edgeseq_model.c"                  # an edit, with every checksum recomputed
    >>> _ = src.write_text(src.read_text() + "\n/* extra code */\n")
    >>> import json
    >>> m = json.loads((out / "manifest.json").read_text())
    >>> next(f for f in m["files"] if f["file"] == src.name)["sha256"] = sha256_file(src)
    >>> m["manifest_sha256"] = manifest_checksum(m)
    >>> _ = (out / "manifest.json").write_bytes(dump_manifest(m))
    >>> m = read_verified(out)                          # the checksums cannot tell
    >>> check_generated_files(out, m, sequence_from_export(out), tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    edgeseq.errors.IntegrityError: ...edgeseq_model.c differs from the C model edgeseq generates...
    """
    out, c_dir = Path(out_dir), Path(c_dir)
    if c_dtype(manifest) == "float32":
        write_c_model(seq, c_dir, manifest["c"]["prefix"], model_name=manifest["model_name"],
                      c_link=c_link_of(manifest))
    else:
        from edgeseq.export.kinds.affine.c_int16 import write_c_int16_model
        from edgeseq.export.kinds.affine.quantize import quantize_from_manifest

        write_c_int16_model(seq, quantize_from_manifest(seq, manifest["c"]["int16"]), c_dir, manifest["c"]["prefix"],
                            model_name=manifest["model_name"])
    append_stop_c(c_dir, manifest)  # the stopping table, as the exporter appends it
    for name in (C_HEADER, C_SOURCE):
        require_identical(out / name, (c_dir / name).read_bytes(),
                          "C model" if c_dtype(manifest) == "float32" else "int16 C model")
    names = onnx_input_names(seq.group_names)
    for j, p in enumerate(manifest["prefixes"]):
        graph = build_prefix_graph(seq, j, names, model_name=manifest["model_name"],
                                   batch_size=manifest.get("batch_size"), labels=labels_of(manifest))
        require_identical(out / p["file"], graph.SerializeToString(), f"graph of prefix {j}")

