"""One check for an export option that must be one of a fixed set of names (tree ops, C dtype, C tree form,
C link mode): the same one-line error wherever the option is read, so the writer can refuse a bad option
before it writes anything and each generator still guards itself.
"""

from __future__ import annotations

from edgeseq.errors import ExportError
from edgeseq.messages import clip


def check_choice(value, choices, what: str) -> str:
    """Return `value` when it is one of `choices`; otherwise raise one `ExportError` line naming them.

    Parameters
    ----------
    value : object
        The option as the caller received it (from the CLI or Python); only its clipped repr reaches the
        message, so an arbitrary object cannot make the error line long.
    choices : sequence of str
        The names the option accepts, in the order the message lists them.
    what : str
        What the option is, as the message names it (e.g. ``"C link mode"``).

    Returns
    -------
    str
        `value`, unchanged.

    Raises
    ------
    ExportError
        `value` is not one of `choices`.

    Examples
    --------
    >>> from edgeseq.export.choices import check_choice
    >>> check_choice("read", ("commit", "read"), "C link mode")
    'read'
    >>> check_choice("late", ("commit", "read"), "C link mode")
    Traceback (most recent call last):
    ...
    edgeseq.errors.ExportError: C link mode 'late' is not one of 'commit', 'read'
    """
    if not isinstance(value, str) or value not in choices:
        raise ExportError(f"{what} {clip(repr(value), 60)} is not one of {', '.join(map(repr, choices))}")
    return value
