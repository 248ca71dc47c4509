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
from edgeseq.export.c_codegen import write_c_model
from edgeseq.format import C_HEADER, C_SOURCE
from edgeseq.export.names import onnx_input_names
from edgeseq.export.onnx_graphs import build_prefix_graph


def _same(shipped: Path, expected: bytes, what: str) -> None:
    if shipped.read_bytes() != expected:
        raise IntegrityError(f"{shipped} differs from the {what} edgeseq generates from the export's own "
                             "weights (edited after export, or not written by this edgeseq); it is not "
                             "compiled or loaded - re-export the model")


def check_generated_files(out_dir, manifest: dict, seq, c_dir) -> None:
    """Regenerate the C model into `c_dir` and every prefix graph in memory; IntegrityError unless the
    files in `out_dir` are byte-identical. `seq` is the sequence read from the verified export."""
    out, c_dir = Path(out_dir), Path(c_dir)
    write_c_model(seq, c_dir, manifest["c"]["prefix"], model_name=manifest["model_name"])
    for name in (C_HEADER, C_SOURCE):
        _same(out / name, (c_dir / name).read_bytes(), "C model")
    names = onnx_input_names(seq.group_names)
    for j, p in enumerate(manifest["prefixes"]):
        graph = build_prefix_graph(seq, j, names, model_name=manifest["model_name"])
        _same(out / p["file"], graph.SerializeToString(), f"graph of prefix {j}")
