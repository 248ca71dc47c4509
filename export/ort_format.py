"""ORT-format copies of the prefix graphs and the operator list of a reduced onnxruntime build.

`edgeseq export --ort` runs onnxruntime's own converter (onnxruntime.tools.convert_onnx_models_to_ort)
on the prefix graphs: each `prefix_XXX.onnx` gets a `prefix_XXX.ort` (the format of onnxruntime's
minimal and mobile builds, graph optimisations applied ahead of time), and
`required_operators.config` lists the operators they use, which a minimal onnxruntime build takes
as `--include_ops_by_config` so the binary carries only those kernels. The ONNX graphs stay the
reference; the manifest lists the ORT files with their sha256 like every other file.
"""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
import tempfile
from pathlib import Path

from edgeseq.errors import ExportError

OPERATORS_CONFIG = "required_operators.config"


def write_ort_files(export_dir, onnx_files: list[str]) -> tuple[list[str], str]:
    """Convert `onnx_files` (names in `export_dir`) to ORT format beside them.

    Returns (ORT file names in the same order, the operator config's name). The conversion runs in
    a scratch directory, so only these files reach `export_dir`; the config's comment lines name the
    models without the scratch path, so an export does not depend on where it was made.

    Parameters
    ----------
    export_dir : str or path-like
        Directory holding the ONNX files; the ORT files and the config are written there.
    onnx_files : list of str
        File names in `export_dir`.

    Returns
    -------
    tuple of (list of str, str)

    Raises
    ------
    ExportError
        If this onnxruntime has no converter or the conversion fails.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.writer import export_model
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> import tempfile
    >>> out = tempfile.mkdtemp() + "/ort_demo"
    >>> manifest = export_model(seq, out)
    >>> from edgeseq.export.ort_format import write_ort_files
    >>> write_ort_files(out, ["prefix_001.onnx", "prefix_002.onnx"])
    (['prefix_001.ort', 'prefix_002.ort'], 'required_operators.config')
    >>> import pathlib  # the config names the models without the scratch directory's path
    >>> [line for line in pathlib.Path(out, "required_operators.config").read_text().splitlines()
    ...  if line.startswith("# -")]
    ['# - prefix_001.ort', '# - prefix_002.ort']
    """
    try:
        from onnxruntime.tools.convert_onnx_models_to_ort import OptimizationStyle, convert_onnx_models_to_ort
    except ImportError as exc:
        raise ExportError(f"this onnxruntime cannot write ORT-format files ({exc})") from None
    export_dir = Path(export_dir)
    with tempfile.TemporaryDirectory(prefix="edgeseq_ort_") as work:
        src, dst = Path(work) / "onnx", Path(work) / "ort"
        src.mkdir()
        for name in onnx_files:
            shutil.copyfile(export_dir / name, src / name)
        chatter = io.StringIO()
        loggers = [logging.getLogger(n) for n in ("ort_format_model", "ort_format_model.utils")]
        levels = [lg.level for lg in loggers]
        for lg in loggers:
            lg.setLevel(logging.WARNING)
        try:
            with contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
                convert_onnx_models_to_ort(src, output_dir=dst, optimization_styles=[OptimizationStyle.Fixed])
        except Exception as exc:  # noqa: BLE001 -- the converter raises plain exceptions
            raise ExportError(f"onnxruntime could not convert the graphs to ORT format: {exc}") from None
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)
        ort_files = [Path(name).with_suffix(".ort").name for name in onnx_files]
        missing = [f for f in [*ort_files, OPERATORS_CONFIG] if not (dst / f).is_file()]
        if missing:
            raise ExportError(f"the ORT converter did not write {', '.join(missing)}:\n{chatter.getvalue()[-500:]}")
        for name in ort_files:
            shutil.copyfile(dst / name, export_dir / name)
        lines = (dst / OPERATORS_CONFIG).read_text(encoding="utf-8").splitlines()
        text = "\n".join(line.replace(f"{dst}/", "") if line.startswith("#") else line for line in lines)
        (export_dir / OPERATORS_CONFIG).write_text(text + "\n", encoding="utf-8")
    return ort_files, OPERATORS_CONFIG
