"""Bounded text for error messages: a hostile file must never turn one error line into megabytes.

Every message that quotes a value read from an untrusted artefact (a list of columns, an order, a
name) goes through `brief`, so an error stays one readable line whatever the file holds.
"""

from __future__ import annotations

MAX_ITEMS = 8  # items of a long sequence shown before "... N more"
MAX_CHARS = 200  # characters of one quoted value


def brief(value, max_items: int = MAX_ITEMS, max_chars: int = MAX_CHARS) -> str:
    """`repr` of `value`, shortened: the first items of a long sequence then "... N more", and at most
    `max_chars` characters (a cut string says how much was left out).

    Sequences (list, tuple, 1-D array) are summarised without converting the whole of them, so the
    cost is bounded by `max_items`, not by the value's length.

    Examples
    --------
    >>> brief(list(range(1000)))
    '[0, 1, 2, 3, 4, 5, 6, 7, ... 992 more]'
    >>> brief((1, "a"))
    "(1, 'a')"
    >>> len(brief("x" * 10**6)) < 300            # a megabyte of text stays one short line
    True
    >>> class Table:
    ...     def __repr__(self):
    ...         return "Table(a=1,\\n      b=2)"
    >>> brief(Table())                              # a multi-line repr becomes one line
    'Table(a=1, b=2)'
    """
    import numpy as np  # here: the command line quotes values without loading numpy at start-up

    if isinstance(value, np.ndarray) and value.ndim != 1:
        return f"<array of shape {value.shape}>"
    if isinstance(value, (list, tuple, np.ndarray)):
        n = len(value)
        head = [brief(v, max_items, max_chars // 4 + 8) for v in value[:max_items]]
        more = f", ... {n - max_items} more" if n > max_items else ""
        open_, close = ("(", ")") if isinstance(value, tuple) else ("[", "]")
        text = open_ + ", ".join(head) + more + close
    elif isinstance(value, dict):
        keys = [brief(k, max_items, max_chars // 4 + 8) for k in list(value)[:max_items]]
        more = f", ... {len(value) - max_items} more" if len(value) > max_items else ""
        text = "{" + ", ".join(f"{k}: ..." for k in keys) + more + "}"
    elif isinstance(value, (str, bytes)) and len(value) > max_chars:
        text = repr(value[:max_chars])
    else:
        try:
            text = repr(value)
        except Exception:  # a repr that fails must not hide the real error
            text = f"<{type(value).__name__}>"
        if "\n" in text or "\r" in text:  # a multi-line repr (an estimator, a table) as one line
            text = " ".join(text.split())
    return clip(text, max_chars)


def clip(text: str, max_chars: int = MAX_CHARS) -> str:
    """`text` itself (no quotes added), cut to `max_chars` with a note of how much was left out.

    Examples
    --------
    >>> clip("short")
    'short'
    >>> clip("abcdefghij", max_chars=4)
    'abcd... (6 more characters)'
    """
    text = str(text)
    return text if len(text) <= max_chars else f"{text[:max_chars]}... ({len(text) - max_chars} more characters)"


def columns_text(cols, names=None, max_items: int = MAX_ITEMS) -> str:
    """Columns for an error message: by name when the caller knows the names, else by index.

    A user who gave a CSV header or a data frame thinks in column names; "column(s) [1]" makes
    them count. At most `max_items` are listed, and each name is quoted with `brief`.

    Examples
    --------
    >>> columns_text([1, 3], ("ax", "ay", "mic", "lux"))
    "'ay', 'lux'"
    >>> columns_text([1, 3]), columns_text(range(20))
    ('1, 3', '0, 1, 2, 3, 4, 5, 6, 7, ... 12 more')
    """
    cols = [int(c) for c in list(cols)]
    known = names is not None and all(0 <= c < len(names) for c in cols)
    shown = [brief(names[c], max_chars=60) if known else str(c) for c in cols[:max_items]]
    more = f", ... {len(cols) - max_items} more" if len(cols) > max_items else ""
    return ", ".join(shown) + more
