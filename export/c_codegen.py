"""The C spine every stage kind's generator shares: prefix checks, literals, header, tables, descriptor, files.

Each kind decides its own tables (`kinds.affine.c_float.write_c_model`, `kinds.trees.c_float`,
`kinds.layer_blocks.c_float`) and prints them through these helpers into `edgeseq_model.h` /
`edgeseq_model.c`: data only plus one `es_model` descriptor; all logic lives in the model-independent
runtime (`runtime_c/edgeseq_runtime.c`). Every symbol and macro starts with the caller's `prefix`, so
several models link into one firmware. Group names reach the C text only through `c_string_literal` /
`c_comment_text` (and sanitised, de-duplicated identifiers). Floats are written as `%.9g` of their
float32 value, which round-trips exactly. Cumulative costs are doubles written as C99 hexadecimal
constants (`float.hex`): the compiler converts those exactly, so C compares the same binary64 values as
Python's budget rule (see `c_double`).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from edgeseq.errors import ExportError, InputError, IntegrityError
from edgeseq.io.atomic import atomic_write_text
from edgeseq.forms.linear import check_name

from edgeseq.format import C_HEADER, C_SOURCE
from edgeseq.export.choices import check_choice
from edgeseq.export.names import C_KEYWORDS, c_comment_text, c_identifier, c_identifiers, c_string_literal

# 31 significant characters is what C99 guarantees for external identifiers; leave room for suffixes
MAX_PREFIX_LEN = 20
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_LINK_ENUM = {"identity": "ES_LINK_IDENTITY", "sigmoid": "ES_LINK_SIGMOID", "softmax": "ES_LINK_SOFTMAX"}
#: Where the C applies a model's link: "commit" (default: every stage commits probabilities) or "read"
#: (every stage commits raw scores, es_current applies the link; see `c_link_enum`).
C_LINKS = ("commit", "read")
_PER_LINE = 6


def validate_c_prefix(prefix: str) -> str:
    """Return `prefix` if it can start every generated symbol, else raise InputError saying why.

    The prefix namespaces every symbol so several models link into one firmware; it must stay short
    (C99 guarantees only 31 significant characters) and clear of the runtime's own ``es_*`` names.

    Raises
    ------
    InputError
        If it is not an identifier, too long, a C keyword or starts with ``es_``.

    Examples
    --------
    >>> from edgeseq.export.c_codegen import validate_c_prefix
    >>> validate_c_prefix("robot_arm")
    'robot_arm'
    >>> validate_c_prefix("es_arm")
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: C prefix 'es_arm' would collide with the runtime's es_* symbols; ...
    """
    if not isinstance(prefix, str) or not _IDENT.match(prefix):
        raise InputError(f"C prefix {prefix!r} must be a C identifier starting with a letter "
                         "(letters, digits, underscores), e.g. 'robot_arm'")
    if len(prefix) > MAX_PREFIX_LEN:
        raise InputError(f"C prefix {prefix!r} is longer than {MAX_PREFIX_LEN} characters; shorten it")
    if prefix in C_KEYWORDS:
        raise InputError(f"C prefix {prefix!r} is a C keyword or reserved name; choose another")
    if prefix.lower() == "es" or prefix.lower().startswith("es_"):
        raise InputError(f"C prefix {prefix!r} would collide with the runtime's es_* symbols; "
                         "choose one that does not start with 'es_'")
    return prefix


def default_c_prefix(model_name: str | None) -> str:
    """A valid prefix derived from a model name (e.g. the model file's stem): 'My model-2' -> 'my_model_2'.

    Examples
    --------
    >>> from edgeseq.export.c_codegen import default_c_prefix, validate_c_prefix
    >>> default_c_prefix("My model-2"), default_c_prefix("es thing"), default_c_prefix(None)
    ('my_model_2', 'm_es_thing', 'model')
    >>> all(validate_c_prefix(default_c_prefix(n)) for n in ("int", "2x", "a" * 40, "__"))
    True
    """
    ident = re.sub(r"_+", "_", c_identifier(str(model_name or "model")).lower()).strip("_")
    if not ident or not ident[0].isalpha():
        ident = "m_" + ident
    if ident == "es" or ident.startswith("es_"):
        ident = "m_" + ident
    ident = ident[:MAX_PREFIX_LEN].rstrip("_")
    if ident in C_KEYWORDS:
        ident = "m_" + ident
    return validate_c_prefix(ident)


def c_float(value) -> str:
    """C literal of the float32 value of `value` that the compiler reads back bit-exactly.

    Nine significant digits round-trip every float32, so the device holds exactly the weights
    Python checked.

    Raises
    ------
    ExportError
        If the value is not finite in float32.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.c_codegen import c_float
    >>> c_float(0.1), c_float(2)
    ('0.100000001f', '2.0f')
    >>> bool(np.float32(float(c_float(0.1)[:-1])) == np.float32(0.1))
    True
    >>> c_float(float("inf"))
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: value inf is not finite in float32; the model cannot be exported to C
    """
    v = np.float32(value)
    if not np.isfinite(v):
        raise ExportError(f"value {value!r} is not finite in float32; the model cannot be exported to C")
    text = "%.9g" % float(v)
    if "." not in text and "e" not in text:
        text += ".0"
    return text + "f"


def c_double(value) -> str:
    """Exact C99 literal of a finite float64: hexadecimal (`0x1.999999999999ap-4`), no decimal rounding.

    C99 6.4.4.2 converts a hexadecimal floating constant exactly when the type can represent it,
    which binary64 always can for a binary64 value; a decimal literal would depend on the compiler
    rounding correctly. This is what makes C's budget comparisons identical to Python's.

    Raises
    ------
    ExportError
        If the value is NaN or infinite.

    Examples
    --------
    >>> from edgeseq.export.c_codegen import c_double
    >>> c_double(0.1), float.fromhex(c_double(0.1)) == 0.1
    ('0x1.999999999999ap-4', True)
    """
    v = float(value)
    if not np.isfinite(v):
        raise ExportError(f"value {value!r} is not finite; the model cannot be exported to C")
    return v.hex()


def c_float_rows(values, fmt=c_float) -> str:
    """Body of a C initializer list: the values (flattened) as `fmt` literals, six per indented line.

    Examples
    --------
    >>> from edgeseq.export.c_codegen import c_double, c_float_rows
    >>> c_float_rows([0.5, 2])
    '    0.5f, 2.0f,'
    >>> c_float_rows([0.1], c_double)
    '    0x1.999999999999ap-4,'
    """
    vals = [fmt(v) for v in np.asarray(values, dtype=np.float64).ravel()]
    lines = [", ".join(vals[i:i + _PER_LINE]) for i in range(0, len(vals), _PER_LINE)]
    return "\n".join("    " + line + "," for line in lines)


def c_header_text(prefix: str, model_name: str, *, generator: str, summary: str, group_names, order, sizes,
                  n_outputs: int, n_pred: int, n_stages: int, work_floats: str, work_comment: str,
                  cost_defines: str) -> str:
    """The generated header shared by every model kind: sizes, work buffer, RAM, group macros, descriptor.

    Why shared: firmware includes one header shape whatever the model kind, so the macros it builds
    on (``<prefix>_WORK_FLOATS``, ``<prefix>_STATE_RAM_BYTES``, ``<prefix>_GROUP_*``) never diverge.
    `generator` names the emitting module in the banner; `summary` is the comment text after the
    model name (lines starting with `` * ``); `work_floats` a C expression; `cost_defines` the kind's
    ``#define`` lines for its work per push.

    Examples
    --------
    >>> from edgeseq.export.c_codegen import c_header_text
    >>> h = c_header_text("m", "demo", generator="c_codegen.py", summary=" * one group", group_names=("a",),
    ...                   order=[0], sizes=[2],
    ...                   n_outputs=1, n_pred=1, n_stages=2, work_floats="(2u + 1u + 2u * 1u)",
    ...                   work_comment="features + outputs + slots", cost_defines="#define m_MACS_PER_PUSH_MAX 2u")
    >>> "#define m_N_STAGES 2u" in h and "extern const es_model m_model;" in h
    True
    """
    guard = f"{prefix}_EDGESEQ_MODEL_H"
    idents = c_identifiers(group_names)
    group_macros = "\n".join(
        f"#define {prefix}_GROUP_{idents[g]} {g}u /* {c_comment_text(group_names[g])} */"
        for g in range(len(group_names)))
    return f"""/* Generated by edgeseq (export/{generator}) -- do not edit.
 * Model: {c_comment_text(model_name)}
{summary}
 */
#ifndef {guard}
#define {guard}

#include "edgeseq_runtime.h"

#define {prefix}_N_GROUPS {len(order)}u
#define {prefix}_N_STAGES {n_stages}u
#define {prefix}_N_OUTPUTS {n_outputs}u
#define {prefix}_N_PRED {n_pred}u
#define {prefix}_N_FEATURES {int(sum(sizes))}u
/* floats of work buffer es_init needs: {work_comment} */
#define {prefix}_WORK_FLOATS {work_floats}
{cost_defines}
/* RAM of one anytime state: the es_state struct plus its work buffer */
#define {prefix}_STATE_RAM_BYTES (sizeof(es_state) + {prefix}_WORK_FLOATS * sizeof(float))

/* original group indices, as es_push expects them */
{group_macros}

extern const es_model {prefix}_model;

#endif /* {guard} */
"""


def c_u32_list(xs) -> str:
    """A C initializer list of unsigned constants (``0u`` for an empty list: C99 forbids ``{}``).

    Examples
    --------
    >>> from edgeseq.export.c_codegen import c_u32_list
    >>> c_u32_list([3, 0]), c_u32_list([])
    ('3u, 0u', '0u')
    """
    return ", ".join(f"{int(x)}u" for x in xs) or "0u"


def c_model_tables(prefix: str, *, group_names, order, sizes, output_names, cum_cost, extra: str = "") -> str:
    """The tables every model kind's descriptor points at: cumulative costs (exact doubles), group
    indices, dimensions and names in sequence order, and the output names.

    `extra` (C text) is placed right after the costs, where the linear model keeps its coefficient
    pointer table.

    Examples
    --------
    >>> from edgeseq.export.c_codegen import c_model_tables
    >>> t = c_model_tables("m", group_names=("a", "b"), order=[1, 0], sizes=[2, 1], output_names=("y",),
    ...                    cum_cost=[0.0, 0.5, 1.5])
    >>> "static const uint32_t m_group_index[] = { 1u, 0u };" in t
    True
    """
    names = ",\n".join(f"    {c_string_literal(group_names[g])}" for g in order) or "    0"
    outs = ",\n".join(f"    {c_string_literal(n)}" for n in output_names)
    return f"""/* cumulative cost of each stage: the float64 values Python's budget rule compares, exactly */
static const double {prefix}_cum_cost[] = {{
{c_float_rows(cum_cost, c_double)}
}};
{extra}static const uint32_t {prefix}_group_index[] = {{ {c_u32_list(order)} }};
static const uint32_t {prefix}_group_dim[] = {{ {c_u32_list(sizes)} }};
static const char *const {prefix}_group_name[] = {{
{names}
}};
static const char *const {prefix}_output_name[] = {{
{outs}
}};
"""


def c_link_enum(link: str, c_link: str = "commit") -> str:
    """The C runtime's es_link value for a model's `link` applied at `c_link` ("commit" or "read").

    With "read" every stage commits its raw scores and ``es_current`` applies the link (one link per
    read instead of one per stage, the same function on the same scores: the same bits). An identity
    link has nothing to defer, so both give ``ES_LINK_IDENTITY``.

    Raises
    ------
    ExportError
        `c_link` is not one of `C_LINKS`.

    Examples
    --------
    >>> from edgeseq.export.c_codegen import c_link_enum
    >>> c_link_enum("softmax"), c_link_enum("softmax", "read"), c_link_enum("identity", "read")
    ('ES_LINK_SOFTMAX', 'ES_LINK_SOFTMAX_ON_READ', 'ES_LINK_IDENTITY')
    """
    check_choice(c_link, C_LINKS, "C link mode")
    return _LINK_ENUM[link] + ("_ON_READ" if c_link == "read" and link != "identity" else "")


def c_link_of(manifest: dict) -> str:
    """Where a float export's C applies the link, as recorded: ``c.link`` ("commit" or "read"), absent in
    exports written before the link on read existed (commit).

    Examples
    --------
    >>> from edgeseq.export.c_codegen import c_link_of
    >>> c_link_of({"c": {"prefix": "m"}}), c_link_of({"c": {"prefix": "m", "link": "read"}})
    ('commit', 'read')
    """
    return recorded_c_option(manifest, "link", C_LINKS)


def recorded_c_option(manifest: dict, key: str, choices: tuple) -> str:
    """The manifest's ``c.<key>``, one of `choices`; absent (an export written before the option
    existed) means ``choices[0]``. IntegrityError for another value (the schema refuses it too; a
    clear line if the dict came another way).

    Examples
    --------
    >>> from edgeseq.export.c_codegen import recorded_c_option
    >>> recorded_c_option({"c": None}, "trees", ("table", "code"))
    'table'
    """
    value = (manifest.get("c") or {}).get(key, choices[0])
    if value not in choices:
        raise IntegrityError(f"manifest c.{key} {str(value)[:40]!r} is not one of {', '.join(map(repr, choices))}")
    return value


def c_descriptor(prefix: str, model_name: str, link: str, *, coef: str, intercept: str, kind: str,
                 trees: str, layers: str = "0", c_link: str = "commit") -> str:
    """The ``const es_model <prefix>_model`` definition (field order of runtime_c's es_model); `c_link`
    says where the link is applied (`c_link_enum`).

    Examples
    --------
    >>> from edgeseq.export.c_codegen import c_descriptor
    >>> d = c_descriptor("m", "demo", "identity", coef="0", intercept="0", kind="ES_KIND_TREES", trees="&m_trees")
    >>> d.splitlines()[0], d.splitlines()[-4].strip()
    ('const es_model m_model = {', 'ES_KIND_TREES,')
    """
    return f"""const es_model {prefix}_model = {{
    ES_ABI_VERSION,
    {c_string_literal(model_name)},
    {c_link_enum(link, c_link)},
    {prefix}_N_GROUPS,
    {prefix}_N_OUTPUTS,
    {prefix}_N_PRED,
    {prefix}_N_FEATURES,
    {prefix}_group_index,
    {prefix}_group_dim,
    {prefix}_cum_cost,
    {coef},
    {intercept},
    {prefix}_group_name,
    {prefix}_output_name,
    {kind},
    {trees},
    {layers}
}};
"""


def c_model_name(prefix: str, model_name: str | None) -> str:
    """The name stored in the descriptor: `model_name`, or the prefix; ExportError if it cannot be stored.

    Examples
    --------
    >>> from edgeseq.export.c_codegen import c_model_name
    >>> c_model_name("demo", None), c_model_name("demo", "My model")
    ('demo', 'My model')
    """
    name = prefix if model_name is None else str(model_name)
    try:
        check_name(name, "model name")
    except InputError as exc:
        raise ExportError(str(exc)) from None
    return name


def write_c_files(out_dir, header: str, source: str) -> list[str]:
    """Write edgeseq_model.h and edgeseq_model.c atomically into out_dir; return their names.

    Each file is replaced in one rename, so an interrupted export never leaves a half-written model
    that would still compile.

    Examples
    --------
    >>> import tempfile
    >>> from edgeseq.export.c_codegen import write_c_files
    >>> write_c_files(tempfile.mkdtemp(), "/* h */", "/* c */")
    ['edgeseq_model.h', 'edgeseq_model.c']
    """
    out = Path(out_dir)
    atomic_write_text(out / C_HEADER, header, encoding="ascii", make_parents=True)
    atomic_write_text(out / C_SOURCE, source, encoding="ascii")
    return [C_HEADER, C_SOURCE]
