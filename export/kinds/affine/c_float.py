"""The affine kind's float C tables: a FittedSequence as static const data for runtime_c.

The generated files hold only data (per-prefix coefficients and intercepts, group dimensions,
cumulative costs, link, names) plus one `es_model` descriptor (``ES_KIND_LINEAR``); all logic lives in
the model-independent runtime (`runtime_c/edgeseq_runtime.c`). The header layout, the descriptor, the
float literals and the atomic file writes are the spine's (`edgeseq.export.c_codegen`), shared with the
other kinds; this module decides only the affine tables. The generator comment in the files still
reads ``export/c_codegen.py``, as it always has, so exports stay byte-identical across versions.
"""

from __future__ import annotations

import numpy as np

from edgeseq.errors import ExportError
from edgeseq.export.c_codegen import (c_descriptor, c_float_rows, c_header_text, c_link_enum, c_model_name,
                                      c_model_tables, validate_c_prefix, write_c_files)
from edgeseq.export.names import c_comment_text
from edgeseq.format import C_HEADER
from edgeseq.forms.linear import FittedSequence


def _check_float32(seq: FittedSequence) -> None:
    """Refuse weights that overflow float32 (the C model would silently hold inf)."""
    for j, (coef, icpt) in enumerate(zip(seq.coefs, seq.intercepts)):
        for what, arr in (("coefficients", coef), ("intercept", icpt)):
            with np.errstate(over="ignore"):
                ok = np.all(np.isfinite(arr.astype(np.float32)))
            if not ok:
                raise ExportError(f"prefix {j} {what} overflow float32 (max |value| {np.max(np.abs(arr)):.3g} > "
                                  f"{np.finfo(np.float32).max:.3g}); rescale the features and refit")


def _check_indexed_sizes(seq: FittedSequence) -> None:
    """Re-prove, from the arrays themselves, every length the runtime will index through the
    descriptor: coef_j holds (sum of the first j group dims) x P floats, the intercept table
    (J + 1) x P, one cumulative cost per prefix, one name per group and per prediction slot.
    Validation already implies this; the emitter checks it again where a mistake would become an
    out-of-bounds read on a device."""
    J, P = len(seq.order), int(seq.intercepts.shape[1])
    n_pred = 2 if seq.link == "sigmoid" else P
    d = 0
    for j in range(J + 1):
        if j:
            d += int(seq.group_columns[int(seq.order[j - 1])].size)
        if seq.coefs[j].size != d * P or seq.coefs[j].shape != (d, P):
            raise ExportError(f"prefix {j} has {seq.coefs[j].size} coefficients; the C runtime would read "
                              f"{d} x {P}; refusing to generate C")
    if seq.intercepts.size != (J + 1) * P or seq.cum_cost.size != J + 1 or len(seq.output_names) != n_pred \
            or len(seq.group_names) != J or (seq.link == "sigmoid" and P != 1):
        raise ExportError("the model's table sizes disagree with its group and output counts; "
                          "refusing to generate C")


def _header(seq: FittedSequence, prefix: str, model_name: str) -> str:
    J, P = len(seq.order), seq.n_outputs
    n_pred = 2 if seq.link == "sigmoid" else P
    sizes = seq.group_sizes[seq.order]
    n_feat = int(sizes.sum())
    macs = [int(s) * P for s in np.cumsum(sizes)]
    mac_table = "\n".join(
        f" *   push {k + 1:>3} ({c_comment_text(seq.group_names[seq.order[k]])}): {macs[k]} multiply-adds"
        for k in range(J))
    summary = (f" * Link: {seq.link}; {J} groups; {P} linear outputs; {n_feat} features in the full prefix.\n"
               f" * Cost of each push (one dot product per output over all features pushed so far):\n"
               f"{mac_table if mac_table else ' *   (no groups)'}")
    cost = (f"/* worst-case multiply-adds of one es_push (the last one) */\n"
            f"#define {prefix}_MACS_PER_PUSH_MAX {max(macs) if macs else 0}u")
    return c_header_text(prefix, model_name, generator="c_codegen.py", summary=summary, group_names=seq.group_names, order=seq.order,
                         sizes=sizes, n_outputs=P, n_pred=n_pred, n_stages=J + 1,
                         work_floats=f"({n_feat}u + {P}u + 2u * {n_pred}u)",
                         work_comment="features + linear outputs + 2 prediction slots",
                         cost_defines=cost)


def c_coef_arrays(seq: FittedSequence, prefix: str, ctype: str, rows, note=lambda j: "") -> tuple[list, str]:
    """One static array per prefix j >= 1 (``<prefix>_coef_<j>``, `ctype`, body ``rows(j)``) and the
    pointer table ``<prefix>_coef[]`` over them (entry 0 is a null pointer: prefix 0 has no weights).

    Shared by the float and the int16 generators so both lay out the per-prefix tables alike;
    `note(j)` adds text to each array's comment.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> from edgeseq.export.c_codegen import c_float_rows
    >>> from edgeseq.export.kinds.affine.c_float import c_coef_arrays
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=1, group_names=("a",),
    ...                      group_columns=([0],), costs=[1.0], order=[0],
    ...                      coefs=(np.zeros((0, 1)), np.array([[2.0]])), intercepts=np.ones((2, 1)), output_names=("y",))
    >>> arrays, table = c_coef_arrays(seq, "m", "float", lambda j: c_float_rows(seq.coefs[j]))
    >>> arrays[0].splitlines()[1], table.splitlines()[0]
    ('static const float m_coef_1[] = {', 'static const float *const m_coef[] = {')
    """
    J, P = len(seq.order), seq.n_outputs
    order = [int(g) for g in seq.order]
    arrays = [f"/* prefix {j}: after {c_comment_text(seq.group_names[order[j - 1]])}; "
              f"{seq.coefs[j].shape[0]} x {P} row-major{note(j)} */\n"
              f"static const {ctype} {prefix}_coef_{j}[] = {{\n{rows(j)}\n}};\n" for j in range(1, J + 1)]
    coef_ptrs = ",\n".join(["    0"] + [f"    {prefix}_coef_{j}" for j in range(1, J + 1)])
    return arrays, f"static const {ctype} *const {prefix}_coef[] = {{\n{coef_ptrs}\n}};\n"


def _source(seq: FittedSequence, prefix: str, model_name: str, c_link: str = "commit") -> str:
    order = [int(g) for g in seq.order]
    sizes = [int(seq.group_sizes[g]) for g in order]
    arrays, coef_table = c_coef_arrays(seq, prefix, "float", lambda j: c_float_rows(seq.coefs[j]))
    parts = [f"/* Generated by edgeseq (export/c_codegen.py) -- do not edit. Model: "
             f"{c_comment_text(model_name)} */\n#include \"{C_HEADER}\"\n", *arrays]
    tables = c_model_tables(prefix, group_names=seq.group_names, order=order, sizes=sizes,
                            output_names=seq.output_names, cum_cost=seq.cum_cost, extra=coef_table)
    parts.append(f"""static const float {prefix}_intercept[] = {{
{c_float_rows(seq.intercepts)}
}};
{tables}
{c_descriptor(prefix, model_name, seq.link, coef=f"{prefix}_coef", intercept=f"{prefix}_intercept",
              kind="ES_KIND_LINEAR", trees="0", c_link=c_link)}""")
    return "\n".join(parts)


def write_c_model(seq: FittedSequence, out_dir, prefix: str, model_name: str | None = None,
                  c_link: str = "commit") -> list[str]:
    """Write edgeseq_model.h/.c for `seq` into out_dir; return the file names written (relative).

    `prefix` starts every C symbol and macro (validated); `model_name` (default: prefix) is stored
    as the descriptor's name string. Raises ExportError when a weight overflows float32. `c_link`
    "read" commits every prefix's raw scores and lets ``es_current`` apply the link
    (`edgeseq.export.c_codegen.c_link_enum`); "commit" (default) links at every commit.

    Returns
    -------
    list of str
        ``["edgeseq_model.h", "edgeseq_model.c"]``, relative to `out_dir`.

    Raises
    ------
    InputError
        If `prefix` is not a valid C prefix.
    ExportError
        If a weight overflows float32 or the model name cannot be stored.

    Examples
    --------
    The generated source compiles against the runtime's header:

    >>> import pathlib, subprocess
    >>> import numpy as np
    >>> import edgeseq.runtime_c
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.kinds.affine.c_float import write_c_model
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> import tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> write_c_model(seq, d, "demo")
    ['edgeseq_model.h', 'edgeseq_model.c']
    >>> "extern const es_model demo_model;" in (d / "edgeseq_model.h").read_text()
    True
    >>> inc = str(pathlib.Path(edgeseq.runtime_c.__file__).parent)
    >>> subprocess.run(["gcc", "-std=c99", "-c", "-I", inc, str(d / "edgeseq_model.c"), "-o", str(d / "m.o")]).returncode
    0
    """
    validate_c_prefix(prefix)
    FittedSequence.validate(seq)  # through the class: an instance cannot bring its own
    _check_float32(seq)
    _check_indexed_sizes(seq)
    c_link_enum(seq.link, c_link)  # an unknown mode fails before anything is written
    name = c_model_name(prefix, model_name)
    return write_c_files(out_dir, _header(seq, prefix, name), _source(seq, prefix, name, c_link))

