"""`edgeseq verify` (integrity + numpy vs onnxruntime vs C) and `edgeseq run` (batch predictions as CSV)."""

from __future__ import annotations

import csv
import sys
from contextlib import nullcontext
from pathlib import Path

import click

from edgeseq.cli._main import main
from edgeseq.io.atomic import atomic_output

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


def _header(sess) -> list[str]:
    if sess.task == "regression":
        outs = list(sess.output_names)
    else:
        outs = ["label"] + [f"proba_{c}" for c in sess.classes.tolist()]
    return ["row", "prefix", "cum_cost"] + outs


def _fmt(v) -> str:
    """float32 values round-trip with 9 significant digits."""
    return format(float(v), ".9g")


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
    import numpy as np  # here, not at import: `edgeseq --help` stays fast

    from edgeseq.runtime.session import AnytimeSession
    from edgeseq.budget import budget_affords_nothing
    from edgeseq.format import stage_group_counts
    from edgeseq.io.feature_rows import available_prefix, group_arrays, read_feature_rows

    sess = AnytimeSession(out_dir)
    rows = read_feature_rows(data, sess.manifest, ignore)
    j_max = sess.n_prefixes - 1 if budget is None else sess.prefix_for_budget(budget)
    if budget_affords_nothing(sess.cum_cost, budget):
        click.echo(f"warning: budget {budget:g} affords no group (the first costs {sess.cum_cost[1]:g}); every "
                   "row gets the prior (prefix 0)", err=True)
    prefix = np.minimum(available_prefix(sess.manifest, rows.X), j_max)
    feats = group_arrays(sess.manifest, rows.X)
    needs = stage_group_counts(sess.manifest)  # groups prefix (or tree stage) j reads
    lines: list = [None] * rows.X.shape[0]
    for j in np.unique(prefix).tolist():
        idx = np.nonzero(prefix == j)[0]
        pred = sess.predict({g: a[idx] for g, a in list(feats.items())[:needs[j]]}, prefix=j)
        for k, i in enumerate(idx.tolist()):
            k = k if j else 0  # prefix 0 is one constant row
            if sess.task == "regression":
                vals = [_fmt(v) for v in np.atleast_1d(pred[k])]
            else:
                vals = [str(pred.label[k])] + [_fmt(v) for v in pred.proba[k]]
            lines[i] = [str(i), str(j), _fmt(sess.cum_cost[j])] + vals
    with atomic_output(output, "w", newline="", encoding="utf-8") if output else nullcontext(sys.stdout) as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(_header(sess))
        w.writerows(lines)
    if output:
        counts = np.bincount(prefix, minlength=sess.n_prefixes)
        click.echo(f"wrote {len(lines)} predictions to {output}; rows per prefix: "
                   + ", ".join(f"{j}: {c}" for j, c in enumerate(counts.tolist()) if c), err=True)
