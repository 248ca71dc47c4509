"""Turn arbitrary group names into safe ONNX input names, C identifiers, C strings and C comments.

Group names come from users (CSV headers, JSON files) and may contain anything: quotes,
backslashes, `*/`, newlines, `??` trigraph starters, non-ASCII, C keywords, leading digits. They
must never reach generated C or a graph unescaped, and two different names must never map to the
same identifier. Everything here is pure string work so the C generator, the ONNX builder and the
manifest all agree on the same mapping.
"""

from __future__ import annotations

import re

from edgeseq.format import BIAS_NAME, PREFIX0_INPUT
from edgeseq.errors import ExportError
from edgeseq.messages import brief

# translation limit of C99 (5.2.4.1): 4095 characters in a string literal, after concatenation
MAX_C_STRING_BYTES = 4095

# C99 + C11 keywords, plus names the C preprocessor/standard library make unusable as identifiers.
C_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int
long register restrict return short signed sizeof static struct switch typedef union unsigned void
volatile while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert
_Thread_local bool true false NULL asm typeof main errno assert offsetof
""".split())

# Output and internal names of the prefix graphs that are valid identifiers (outputs, the prefix-0
# input, the bias initializer); a group input must never take one of them. Other internal names
# contain '/' and cannot collide. tests/test_export_onnx.py checks this against the built graphs.
RESERVED_ONNX_NAMES = frozenset({"y", "proba", "label", PREFIX0_INPUT, BIAS_NAME})

_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")


def c_identifier(name: str) -> str:
    """A valid, non-reserved C identifier derived from `name` (not unique: see `c_identifiers`).

    Characters outside [A-Za-z0-9_] become `_`; a leading digit or underscore (reserved
    `_X`/`__x` forms) gets a `g_` prefix; keywords get a trailing `_`.

    Examples
    --------
    >>> from edgeseq.export.names import c_identifier
    >>> c_identifier("2nd moment"), c_identifier("int"), c_identifier("_x")
    ('g_2nd_moment', 'int_', 'g__x')
    """
    ident = _NOT_IDENT.sub("_", str(name))
    if not ident or ident[0].isdigit() or ident[0] == "_":
        ident = "g_" + ident
    if ident in C_KEYWORDS:
        ident += "_"
    return ident


def unique_names(names, make=c_identifier, reserved=frozenset()) -> list[str]:
    """Apply `make` to each name and resolve collisions (after sanitising) with `_2`, `_3`, ... suffixes.

    Suffixed results are checked against every name already taken and against `reserved`, so the
    result is injective and keeps the input order.

    Parameters
    ----------
    names : iterable of str
        Names to map, in order.
    make : callable, default `c_identifier`
        Sanitiser applied to each name before collisions are resolved.
    reserved : set of str
        Results that must never be produced.

    Returns
    -------
    list of str
        One distinct result per input name.

    Examples
    --------
    Two names that sanitise alike still get distinct identifiers:

    >>> from edgeseq.export.names import unique_names
    >>> unique_names(["a b", "a-b", "a_b_2"])
    ['a_b', 'a_b_2', 'a_b_2_2']
    >>> unique_names(["y"], reserved={"y"})
    ['y_2']
    """
    base = [make(n) for n in names]
    taken = set(reserved)
    out = []
    for b in base:
        cand, k = b, 2
        while cand in taken:
            cand = f"{b}_{k}"
            k += 1
        taken.add(cand)
        out.append(cand)
    return out


def c_identifiers(names) -> list[str]:
    """Unique C identifiers for a list of group names, in order.

    Examples
    --------
    >>> from edgeseq.export.names import c_identifiers
    >>> c_identifiers(["hist", "hist!", "for"])
    ['hist', 'hist_', 'for_']
    """
    return unique_names(names, c_identifier)


def onnx_input_names(names) -> list[str]:
    """Unique ONNX input names for groups: identifier-safe and never an output/internal graph name.

    Examples
    --------
    A group called ``y`` must not shadow the graph's output ``y``:

    >>> from edgeseq.export.names import onnx_input_names
    >>> onnx_input_names(["y", "x"])
    ['y_2', 'x']
    """
    return unique_names(names, c_identifier, RESERVED_ONNX_NAMES)


def _octal_bytes(ch: str) -> str:
    return "".join(f"\\{b:03o}" for b in ch.encode("utf-8"))


_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "?": "\\?", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def c_string_literal(name: str) -> str:
    """A C99 string literal (with its quotes) whose bytes are the UTF-8 encoding of `name`.

    `?` is always written `\\?` (no trigraph can form); control and non-ASCII characters become
    three-digit octal escapes of their UTF-8 bytes (an octal escape never swallows a following digit,
    unlike `\\x`). C99 compilers need accept only 4095 bytes per literal, so a longer name (or one
    that is not valid Unicode, e.g. a lone surrogate from an undecodable file name) is an ExportError.

    Examples
    --------
    >>> from edgeseq.export.names import c_string_literal
    >>> print(c_string_literal('say "hi"??'))
    "say \\"hi\\"\\?\\?"
    >>> print(c_string_literal("é"))
    "\\303\\251"
    """
    try:
        size = len(str(name).encode("utf-8"))
    except UnicodeEncodeError:
        raise ExportError(f"name {brief(name)} is not valid Unicode text; it cannot be written to C") from None
    if size > MAX_C_STRING_BYTES:
        raise ExportError(f"name {brief(name, max_chars=40)} is {size} bytes of UTF-8; C99 string literals "
                          f"hold at most {MAX_C_STRING_BYTES}")
    parts = []
    for ch in str(name):
        if ch in _STRING_ESCAPES:
            parts.append(_STRING_ESCAPES[ch])
        elif " " <= ch <= "~":
            parts.append(ch)
        else:
            parts.append(_octal_bytes(ch))
    return '"' + "".join(parts) + '"'


def c_comment_text(name: str) -> str:
    """Text that can sit inside a `/* ... */` comment without ending it, nesting or splicing lines.

    Printable ASCII stays readable; a backslash is doubled; `*/`, `/*` and `??` are broken with a
    backslash; newlines, other control and non-ASCII characters become `\\n` / `\\xNN` (UTF-8 bytes).
    The result has no newline, so it also never continues a line.

    Examples
    --------
    >>> from edgeseq.export.names import c_comment_text
    >>> print(c_comment_text("evil */ name"))
    evil *\\/ name
    >>> print(c_comment_text("two\\nlines"))
    two\\nlines
    """
    out: list[str] = []
    prev = ""
    for ch in str(name):
        if ch == "\\":
            piece = "\\\\"
        elif ch == "/" and prev == "*":
            piece = "\\/"
        elif ch == "*" and prev == "/":
            piece = "\\*"
        elif ch == "?" and prev == "?":
            piece = "\\?"
        elif ch in "\n\r\t":
            piece = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch]
        elif " " <= ch <= "~":
            piece = ch
        else:
            piece = "".join(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
        out.append(piece)
        prev = piece[-1]
    text = "".join(out)
    # a trailing '*' or '/' could fuse with the comment delimiters written around the text
    return text + " " if text.endswith(("*", "/")) else text
