"""Generate the int16 `edgeseq_model.h` / `edgeseq_model.c` (for runtime_c/edgeseq_runtime_i16.c) from an Int16Model.

The emitter prints the integer tables `edgeseq.export.quantize` decided -- feature shifts and
offsets, per-prefix int16 weights, int32 intercepts, weight shifts, the link table -- and the
cumulative costs as the uint64 bit patterns of their float64 values; it computes nothing itself. The
generated text holds integer types only (no `float`, no `double`), so a Cortex-M0 build links no
soft-float routine. Names and symbols follow the float generator (`c_codegen`): every symbol starts
with the caller's prefix, group names reach the C only through `c_string_literal` and the
sanitised identifiers.
"""

from __future__ import annotations

import struct

import numpy as np

from edgeseq.errors import ExportError
from edgeseq.export.c_codegen import c_coef_arrays, c_model_name, c_u32_list, validate_c_prefix, write_c_files
from edgeseq.export.names import c_comment_text, c_identifiers, c_string_literal
from edgeseq.export.quantize import INT16_MAX, INT16_MIN, INT32_MAX, TABLE_SHIFT, Int16Model
from edgeseq.format import C_HEADER
from edgeseq.forms.linear import FittedSequence

_LINK = {"identity": "ES16_LINK_IDENTITY", "sigmoid": "ES16_LINK_SIGMOID", "softmax": "ES16_LINK_SOFTMAX"}
_PER_LINE = 10


def c_int_rows(values, lo: int, hi: int, suffix: str = "") -> str:
    """Body of a C initializer of integers in [lo, hi], ten per indented line; ExportError outside.

    The lowest value of a signed type is written as ``(-MAX - 1)``: ``-32768`` would be the negation
    of an int constant, fine, but ``-2147483648`` is not an int constant in C.

    Examples
    --------
    >>> from edgeseq.export.c_int16 import c_int_rows
    >>> c_int_rows([1, -2, -32768], -32768, 32767)
    '    1, -2, (-32767 - 1),'
    >>> c_int_rows([], 0, 1)
    '    0,'
    """
    vals = [int(v) for v in np.asarray(values).ravel()]
    if any(v < lo or v > hi for v in vals):
        raise ExportError(f"an integer table value is outside [{lo}, {hi}]; refusing to generate C")
    text = [f"(-{hi} - 1){suffix}" if v == lo and lo < 0 else f"{v}{suffix}" for v in vals] or ["0"]
    lines = [", ".join(text[i:i + _PER_LINE]) for i in range(0, len(text), _PER_LINE)]
    return "\n".join("    " + line + "," for line in lines)


def double_bits(value: float) -> int:
    """The IEEE-754 binary64 bit pattern of `value` (what the int16 runtime compares budgets on).

    Examples
    --------
    >>> from edgeseq.export.c_int16 import double_bits
    >>> hex(double_bits(1.0)), double_bits(0.0), double_bits(2.5) > double_bits(2.25)
    ('0x3ff0000000000000', 0, True)
    """
    return struct.unpack("<Q", struct.pack("<d", float(value)))[0]


def _check(qm: Int16Model, seq: FittedSequence) -> None:
    """The sizes the runtime will index, re-proved from the arrays (a mistake here is an out-of-bounds read)."""
    J, P = seq.n_groups, qm.n_outputs
    d = 0
    for j in range(J + 1):
        if j:
            d += int(seq.group_sizes[int(seq.order[j - 1])])
        if qm.coefs[j].shape != (d, P):
            raise ExportError(f"prefix {j}: integer weights are {qm.coefs[j].shape}, expected {(d, P)}")
    if qm.intercepts.shape != (J + 1, P) or qm.weight_shift.shape != (J + 1,) or qm.feature_shift.shape != (d,) \
            or qm.feature_offset.shape != (d,) or len(seq.output_names) != qm.n_pred or qm.link != seq.link:
        raise ExportError("the integer model's tables disagree with the sequence; refusing to generate C")
    if np.any(qm.headroom > INT32_MAX):
        raise ExportError("an int32 headroom bound fails; refusing to generate C")


def _header(seq: FittedSequence, qm: Int16Model, prefix: str, name: str) -> str:
    J, P = seq.n_groups, qm.n_outputs
    sizes = seq.group_sizes[seq.order]
    n_feat = int(sizes.sum())
    macs = [int(s) * P for s in np.cumsum(sizes)]
    return int16_header_text(
        prefix, name, generator="c_int16.py",
        summary=f"Integer (int16) model for runtime_c/edgeseq_runtime_i16.c: link {seq.link}; {J} groups; {P} outputs;\n"
                f" * {n_feat} features in the full prefix.",
        group_names=seq.group_names, n_groups=J, n_stages=J + 1, n_outputs=P, n_pred=qm.n_pred, n_features=n_feat,
        work_words=f"({P}u + 2u * {qm.n_pred}u)", work_comment="outputs + 2 prediction slots",
        cost_defines=f"/* worst-case int16 x int16 multiply-adds of one es16_push (the last one) */\n"
                     f"#define {prefix}_MACS_PER_PUSH_MAX {max(macs) if macs else 0}u")


def int16_header_text(prefix: str, name: str, *, generator: str, summary: str, group_names, n_groups: int, n_stages: int,
                      n_outputs: int, n_pred: int, n_features: int, work_words: str, work_comment: str,
                      cost_defines: str) -> str:
    """The generated header of an int16 model of any kind: sizes, work buffer, RAM, group indices, externs.

    `n_groups` counts the groups the runtime pushes (a tree model may leave some of `group_names` unused).

    Examples
    --------
    >>> from edgeseq.export.c_int16 import int16_header_text
    >>> h = int16_header_text("m", "m", generator="x.py", summary="demo", group_names=("a",), n_groups=1, n_stages=2,
    ...                       n_outputs=1, n_pred=1, n_features=3, work_words="3u", work_comment="words",
    ...                       cost_defines="")
    >>> "#define m_N_STAGES 2u" in h, "extern const es16_model m_model;" in h
    (True, True)
    """
    groups = "\n".join(f"#define {prefix}_GROUP_{ident} {g}u /* {c_comment_text(group_names[g])} */"
                       for g, ident in enumerate(c_identifiers(group_names)))
    guard = f"{prefix}_EDGESEQ_MODEL_H"
    return f"""/* Generated by edgeseq (export/{generator}) -- do not edit.
 * Model: {c_comment_text(name)}
 * {summary} The extractor delivers feature i (sequence order) as
 * sat16(rint(x * 2^{prefix}_feature_shift[i]) - {prefix}_feature_offset[i]).
 */
#ifndef {guard}
#define {guard}

#include "edgeseq_runtime_i16.h"

#define {prefix}_N_GROUPS {n_groups}u
#define {prefix}_N_STAGES {n_stages}u
#define {prefix}_N_OUTPUTS {n_outputs}u
#define {prefix}_N_PRED {n_pred}u
#define {prefix}_N_FEATURES {n_features}u
/* int32 words of work buffer es16_init needs: {work_comment} */
#define {prefix}_WORK_WORDS {work_words}
{cost_defines}
/* RAM of one anytime state: the es16_state struct, the feature buffer and the work buffer */
#define {prefix}_STATE_RAM_BYTES (sizeof(es16_state) + {prefix}_N_FEATURES * sizeof(int16_t) + \\
                                  {prefix}_WORK_WORDS * sizeof(int32_t))

/* original group indices, as es16_push expects them */
{groups}

extern const int32_t {prefix}_feature_shift[];
extern const int32_t {prefix}_feature_offset[];
extern const es16_model {prefix}_model;

#endif /* {guard} */
"""


def _source(seq: FittedSequence, qm: Int16Model, prefix: str, name: str) -> str:
    order = [int(g) for g in seq.order]
    arrays, coef_table = c_coef_arrays(
        seq, prefix, "int16_t", lambda j: c_int_rows(qm.coefs[j], INT16_MIN, INT16_MAX),
        note=lambda j: f"; z = z_q * 2^-{int(qm.weight_shift[j])}; headroom bound {int(qm.headroom[j])}")
    return "\n".join([f"/* Generated by edgeseq (export/c_int16.py) -- do not edit. Model: {c_comment_text(name)} */\n"
                      f"#include \"{C_HEADER}\"\n", *arrays,
                      int16_descriptor(qm, prefix, name, coef_table=coef_table, order=order,
                                       sizes=[int(seq.group_sizes[g]) for g in order], group_names=seq.group_names,
                                       output_names=seq.output_names)])


def int16_descriptor(qm, prefix: str, name: str, *, coef_table: str, order, sizes, group_names, output_names,
                     kind: str = "ES16_KIND_LINEAR", trees: str = "0") -> str:
    """The tables every int16 model kind shares and its ``es16_model`` descriptor, as C text.

    `qm` is an `Int16Model` or a `quantize_trees.TreeInt16Model` (both carry the feature scales, the
    per-stage intercepts and weight shifts, the link table and the per-stage costs); `coef_table` is
    the C text of the ``<prefix>_coef`` pointer table, `kind`/`trees` the kind and the tree descriptor.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.quantize import quantize_sequence
    >>> from edgeseq.export.c_int16 import int16_descriptor
    >>> X = np.random.default_rng(0).normal(size=(50, 1))
    >>> seq = AnytimeRegressor([[0]], [1.0]).fit(X, X[:, 0]).fitted_sequence_
    >>> text = int16_descriptor(quantize_sequence(seq, X), "m", "m", coef_table="", order=[0], sizes=[1],
    ...                         group_names=("a",), output_names=("y",))
    >>> text.splitlines()[-4:]
    ['    m_output_name,', '    ES16_KIND_LINEAR,', '    0', '};']
    """
    names = ",\n".join(f"    {c_string_literal(group_names[g])}" for g in order) or "    0"
    outs = ",\n".join(f"    {c_string_literal(n)}" for n in output_names)
    cost_bits = ", ".join(f"UINT64_C(0x{double_bits(c):016x})" for c in qm.cum_cost)
    has_table = qm.table.size > 0
    table = (f"static const int16_t {prefix}_link_table[] = {{\n{c_int_rows(qm.table, 0, INT16_MAX)}\n}};\n"
             if has_table else "")
    return f"""const int32_t {prefix}_feature_shift[] = {{
{c_int_rows(qm.feature_shift, -60, 60)}
}};
const int32_t {prefix}_feature_offset[] = {{
{c_int_rows(qm.feature_offset, -INT32_MAX - 1, INT32_MAX)}
}};
{coef_table}static const int32_t {prefix}_intercept[] = {{
{c_int_rows(qm.intercepts, -INT32_MAX - 1, INT32_MAX)}
}};
static const int32_t {prefix}_weight_shift[] = {{
{c_int_rows(qm.weight_shift, -60, 60)}
}};
{table}/* cumulative cost of each stage: bit patterns of the binary64 values Python's budget rule compares */
static const uint64_t {prefix}_cum_cost_bits[] = {{ {cost_bits} }};
static const uint32_t {prefix}_group_index[] = {{ {c_u32_list(order)} }};
static const uint32_t {prefix}_group_dim[] = {{ {c_u32_list(sizes)} }};
static const char *const {prefix}_group_name[] = {{
{names}
}};
static const char *const {prefix}_output_name[] = {{
{outs}
}};

const es16_model {prefix}_model = {{
    ES16_ABI_VERSION,
    {c_string_literal(name)},
    {_LINK[qm.link]},
    {prefix}_N_GROUPS,
    {prefix}_N_OUTPUTS,
    {prefix}_N_PRED,
    {prefix}_N_FEATURES,
    {prefix}_group_index,
    {prefix}_group_dim,
    {prefix}_cum_cost_bits,
    {prefix}_coef,
    {prefix}_intercept,
    {prefix}_weight_shift,
    {f"{prefix}_link_table" if has_table else "0"},
    {qm.table.size}u,
    {TABLE_SHIFT if has_table else 0},
    {prefix}_feature_shift,
    {prefix}_feature_offset,
    {prefix}_group_name,
    {prefix}_output_name,
    {kind},
    {trees}
}};
"""


def write_c_int16_model(seq: FittedSequence, qm: Int16Model, out_dir, prefix: str,
                        model_name: str | None = None) -> list[str]:
    """Write the int16 edgeseq_model.h/.c of `qm` (quantised from `seq`) into out_dir; return their names.

    Returns
    -------
    list of str
        ``["edgeseq_model.h", "edgeseq_model.c"]``.

    Raises
    ------
    InputError
        If `prefix` is not a valid C prefix.
    ExportError
        If the integer tables disagree with the sequence or leave their C types.

    Examples
    --------
    The generated source compiles against the integer runtime's header and holds no float type:

    >>> import pathlib, subprocess
    >>> import numpy as np
    >>> import edgeseq.runtime_c
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.quantize import quantize_sequence
    >>> from edgeseq.export.c_int16 import write_c_int16_model
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> import tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> write_c_int16_model(seq, quantize_sequence(seq, X), d, "demo")
    ['edgeseq_model.h', 'edgeseq_model.c']
    >>> src = (d / "edgeseq_model.c").read_text()
    >>> "float" in src or "double" in src
    False
    >>> inc = str(pathlib.Path(edgeseq.runtime_c.__file__).parent)
    >>> subprocess.run(["gcc", "-std=c99", "-c", "-I", inc, str(d / "edgeseq_model.c"), "-o", str(d / "m.o")]).returncode
    0
    """
    validate_c_prefix(prefix)
    FittedSequence.validate(seq)
    _check(qm, seq)
    name = c_model_name(prefix, model_name)
    return write_c_files(out_dir, _header(seq, qm, prefix, name), _source(seq, qm, prefix, name))


def int16_manifest_entry(seq: FittedSequence, qm: Int16Model, n_rows: int) -> dict:
    """The manifest's ``c.int16`` object: the scales the extractor and the firmware need, and per prefix
    the proven headroom and what the integer model loses against float (`Int16Model.loss`).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.quantize import quantize_sequence
    >>> from edgeseq.export.c_int16 import int16_manifest_entry
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, X[:, 0]).fitted_sequence_
    >>> e = int16_manifest_entry(seq, quantize_sequence(seq, X), len(X))
    >>> e["accumulator"], [f["column"] for f in e["features"]], len(e["prefixes"])
    ('int32', [0, 1], 3)
    """
    return int16_entry(qm, seq.prefix_columns(seq.n_groups), n_rows)


def int16_entry(qm, columns, n_rows: int) -> dict:
    """The ``c.int16`` object of any integer model (`Int16Model` or `TreeInt16Model`) whose features are
    the raw `columns`, in C order: scales, and per prefix/stage the weight shift, headroom and loss.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees
    >>> from edgeseq.export.c_int16 import int16_entry
    >>> qm = quantize_trees(_demo_model(), np.array([[0.0, 1.0], [1.0, 2.0]]))
    >>> e = int16_entry(qm, qm.columns, 2)
    >>> [f["column"] for f in e["features"]], [p["index"] for p in e["prefixes"]]
    ([0, 1], [0, 1, 2])
    """
    cols = [int(c) for c in np.asarray(columns).tolist()]
    features = [{"column": int(c), "shift": int(s), "offset": int(o)}
                for c, s, o in zip(cols, qm.feature_shift.tolist(), qm.feature_offset.tolist())]
    prefixes = []
    for j in range(len(qm.weight_shift)):
        loss = {k: v for k, v in qm.loss[j].items() if k not in ("index", "reference")}
        prefixes.append({"index": j, "weight_shift": int(qm.weight_shift[j]), "headroom": int(qm.headroom[j]),
                         "reduced_bits": int(qm.reduced_bits[j]), **loss})
    return {"feature_source": qm.feature_source, "calibration_rows": int(n_rows),
            "loss_reference": qm.loss[0]["reference"] if qm.loss else "float predictions",
            "accumulator": "int32", "prob_shift": 15 if qm.link != "identity" else None,
            "link_table": None if qm.table.size == 0 else {"len": int(qm.table.size), "shift": TABLE_SHIFT},
            "features": features, "prefixes": prefixes}
