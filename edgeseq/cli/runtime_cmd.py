"""`edgeseq verify` (integrity + numpy vs onnxruntime vs C) and `edgeseq run` (batch predictions as CSV)."""

from __future__ import annotations

from pathlib import Path

import click

from edgeseq.cli._main import main

_OUT = click.Path(exists=True, file_okay=False, path_type=Path)
_DATA = click.Path(dir_okay=False, path_type=Path)
_IGNORE = click.option("--ignore", "ignore", multiple=True, metavar="COL",
                       help="A DATA column to leave out (e.g. the target or an id) when columns are matched "
                            "by position; repeatable.")


@main.command("verify")
@click.argument("out_dir", type=_OUT)
@click.option("--data", type=_DATA, help="Sample rows (.csv with a header, or .npz with X); default: rows "
                                          "drawn from the feature statistics stored in the manifest.")
@_IGNORE
@click.option("--require-c", is_flag=True, help="Fail when no C compiler is found (default: skip the C column).")
@click.option("--no-c", is_flag=True, help="Do not compile the C runtime (compare numpy and onnxruntime only).")
@click.option("--cc", help="C compiler to use (default: $CC, gcc, cc or clang).")
def verify_command(out_dir, data, ignore, require_c, no_c, cc):
    """Check OUT_DIR (schema, manifest checksum, sha256 of every file, no extra files), require its C
    model and graphs to be byte-identical to what edgeseq generates from its weights, then compare
    numpy, onnxruntime and the C runtime (compiled from the regenerated copy, never from OUT_DIR) on
    every prefix. Exits non-zero on any problem."""
    from edgeseq.format import read_verified

    from edgeseq.io.feature_rows import read_feature_rows
    from edgeseq.errors import VerifyMismatch
    from edgeseq.evaluate.verify import format_report, verify_export

    if require_c and no_c:
        raise click.UsageError("--require-c and --no-c contradict each other")
    manifest = read_verified(out_dir)  # raises IntegrityError naming the file and the problem
    click.echo(f"{out_dir}: integrity ok (schema, manifest checksum, sha256 of every file, no extra files)")
    X, source = None, ""
    if data is not None:
        rows = read_feature_rows(data, manifest, ignore)
        X, source = rows.X, rows.source
    rep = verify_export(out_dir, X, source=source, use_c=not no_c, require_c=require_c, compiler=cc)
    for line in format_report(rep):
        click.echo(line)
    if not rep.ok:
        raise VerifyMismatch(f"{out_dir}: runtimes disagree beyond the float32 bound (table above)")


@main.command("run")
@click.argument("out_dir", type=_OUT)
@click.argument("data", type=_DATA)
@click.option("--budget", type=float, help="Cost budget per row (cost units): the longest prefix whose "
                                           "cumulative cost fits is used. Default: all groups.")
@_IGNORE
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the CSV here instead of standard output.")
def run_command(out_dir, data, budget, ignore, output):
    """Batch predictions of DATA as CSV, one line per row with the prefix used.

    Each row uses the longest prefix allowed by --budget whose groups are all present in that row: an
    empty cell or NaN in a group means the group was not computed, so the row falls back to the prefix
    before it (the anytime semantics for logged data). Inf or non-numbers are errors.
    """
    from edgeseq.device import predict_csv, summary  # here, not at import: `edgeseq --help` stays fast

    counts = predict_csv(out_dir, data, budget=budget, ignore=ignore, output=output,
                         warn=lambda message: click.echo(message, err=True))
    if output:
        click.echo(summary(counts, output), err=True)
