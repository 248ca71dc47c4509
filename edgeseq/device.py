"""The device entry point: batch predictions of a CSV from an export, with the runtime's dependencies only.

`edgeseq run` needs click and lives beside the trainer's commands; a device that only runs exported
models has numpy, onnxruntime and jsonschema and nothing else (see the README's device install). This
module is the same `run` without click: ``edgeseq-run OUT_DIR DATA [--budget B] [-o FILE]`` (or
``python -m edgeseq.device ...``). `predict_csv` is the one implementation both commands call.
"""

from __future__ import annotations

import csv
import sys
from contextlib import nullcontext
from pathlib import Path


def _header(sess) -> list[str]:
    if sess.task == "regression":
        outs = list(sess.output_names)
    else:
        outs = ["label"] + [f"proba_{c}" for c in sess.classes.tolist()]
    return ["row", "prefix", "cum_cost"] + outs


def _fmt(v) -> str:
    """float32 values round-trip with 9 significant digits."""
    return format(float(v), ".9g")


def predict_csv(out_dir, data, *, budget: float | None = None, ignore=(), output=None, warn=None) -> list[int]:
    """Write one CSV line of predictions per row of `data`, with the prefix each row used.

    Each row uses the longest prefix allowed by `budget` whose groups are all present in that row: an
    empty cell or NaN in a group means the group was not computed, so the row falls back to the prefix
    before it (the anytime semantics for logged data).

    Parameters
    ----------
    out_dir : str or Path
        An export directory (verified before anything is loaded).
    data : str or Path
        A CSV with a header, or an .npz with X.
    budget : float or None, default=None
        Cost budget per row; None uses every group.
    ignore : sequence of str, default=()
        DATA columns to leave out when columns are matched by position.
    output : str or Path or None, default=None
        Where the CSV goes (written atomically); None writes it to standard output.
    warn : callable or None, default=None
        Receives one-line warnings (the budget affords no group); None prints them to standard error.

    Returns
    -------
    list of int
        How many rows used each prefix.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
    >>> data = tempfile.mkdtemp() + "/rows.npz"; np.savez(data, X=X[:4])
    >>> predict_csv(out, data, budget=1.0, output=tempfile.mkdtemp() + "/preds.csv")
    [0, 4, 0]
    """
    import numpy as np  # here, not at import: the module loads with the command's --help

    from edgeseq.budget import budget_affords_nothing
    from edgeseq.format import stage_group_counts
    from edgeseq.io.atomic import atomic_output
    from edgeseq.io.feature_rows import available_prefix, group_arrays, read_feature_rows
    from edgeseq.runtime.session import AnytimeSession

    warn = warn or (lambda message: print(message, file=sys.stderr))
    sess = AnytimeSession(out_dir)
    rows = read_feature_rows(data, sess.manifest, ignore)
    j_max = sess.n_prefixes - 1 if budget is None else sess.prefix_for_budget(budget)
    if budget_affords_nothing(sess.cum_cost, budget):
        warn(f"warning: budget {budget:g} affords no group (the first costs {sess.cum_cost[1]:g}); every "
             "row gets the prior (prefix 0)")
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
    return np.bincount(prefix, minlength=sess.n_prefixes).tolist()


def summary(counts: list[int], output) -> str:
    """The line both commands print after writing `output`: how many rows used each prefix.

    Examples
    --------
    >>> summary([0, 3, 0, 2], "preds.csv")
    'wrote 5 predictions to preds.csv; rows per prefix: 1: 3, 3: 2'
    """
    return (f"wrote {sum(counts)} predictions to {output}; rows per prefix: "
            + ", ".join(f"{j}: {c}" for j, c in enumerate(counts) if c))


def main(argv=None) -> int:
    """``edgeseq-run OUT_DIR DATA [--budget B] [--ignore COL] [-o FILE]``; returns the exit status.

    edgeseq's own errors are printed as one line without a traceback (status 1), as `edgeseq` does.

    Examples
    --------
    >>> main(["/no/such/export", "rows.csv"])
    1
    """
    import argparse

    from edgeseq.errors import EdgeseqError

    parser = argparse.ArgumentParser(
        prog="edgeseq-run", description="Batch predictions of DATA (CSV with a header, or .npz with X) from the "
        "export OUT_DIR, one CSV line per row with the prefix used; needs only numpy, onnxruntime and jsonschema.")
    parser.add_argument("out_dir", metavar="OUT_DIR", type=Path)
    parser.add_argument("data", metavar="DATA", type=Path)
    parser.add_argument("--budget", type=float, help="cost budget per row (default: all groups)")
    parser.add_argument("--ignore", action="append", default=[], metavar="COL",
                        help="a DATA column to leave out when columns are matched by position; repeatable")
    parser.add_argument("-o", "--output", type=Path, help="write the CSV here instead of standard output")
    args = parser.parse_args(argv)
    try:
        counts = predict_csv(args.out_dir, args.data, budget=args.budget, ignore=tuple(args.ignore),
                             output=args.output)
    except EdgeseqError as exc:
        print(f"Error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.output:
        print(summary(counts, args.output), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
