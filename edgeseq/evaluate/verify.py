"""`edgeseq verify`: integrity of out/, then numpy vs onnxruntime vs compiled C on every stage.

The manifest's ``stage_kind`` names the kind (`edgeseq.export.kinds`); that kind's verify regenerates its
files, rebuilds its intermediate form from the verified export and compares every runtime against the
form's own float64 reference within a float32 bound (see `edgeseq.export.kinds.affine.verify` and
`edgeseq.export.kinds.trees.verify`). This module makes that one lookup and prints the report.
"""

from __future__ import annotations

import numpy as np

# the report types every kind fills (their names stay importable from here)
from edgeseq.export.verify_checks import PrefixCheck, VerifyReport  # noqa: F401


def verify_export(out_dir, X: np.ndarray | None = None, *, source: str = "", use_c: bool = True,
                  require_c: bool = False, compiler=None) -> VerifyReport:
    """Check out/ (its schema, checksums and files) and compare the runtimes, for any stage kind.

    Parameters
    ----------
    out_dir : path
        An export directory.
    X : array of shape (n, n_features_in) or None, default=None
        Rows to compare on; default: rows drawn from the export's stored statistics.
    source : str, default=""
        Where `X` came from, for the report.
    use_c, require_c : bool, default=True, False
        Compare the compiled C runtime too; fail (`CCompilerError`) rather than skip without a compiler.
    compiler : str or None, default=None
        C compiler to use.

    Returns
    -------
    VerifyReport

    Raises
    ------
    IntegrityError
        The export directory fails its checks.
    ExportError
        The manifest names a stage kind this edgeseq does not know.
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
    from edgeseq.export.kinds import kind_of_manifest
    from edgeseq.format import read_verified

    kind = kind_of_manifest(read_verified(out_dir))
    return kind.verify(out_dir, X, source=source, use_c=use_c, require_c=require_c, compiler=compiler)


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
    lines = [rep.files_line,
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
    if rep.stop_note:
        lines.append(rep.stop_note)
    bad = [c.prefix for c in rep.checks if not c.ok]
    lines.append("all prefixes agree within the float32 bound" if not bad else
                 f"MISMATCH at prefix(es) {bad}: a runtime differs from numpy beyond the float32 bound")
    return lines
