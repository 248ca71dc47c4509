"""Where the group costs came from, carried from GROUPS.json to every place costs are shown.

docs/own-data.md: measured costs are stored with the machine and library versions, and every place that
shows them says "measured on <machine>". `edgeseq calibrate` writes ``measured_on`` and ``cost_unit``
into GROUPS.json; `edgeseq train` copies them into ``FittedSequence.provenance`` under the keys below,
the export manifest carries the provenance unchanged, and `edgeseq inspect` / `edgeseq report` print
:func:`cost_summary`. Costs without ``measured_on`` are said to be "as given (not measured)".
"""

from __future__ import annotations

import json
import re

from edgeseq.errors import GroupSpecError
from edgeseq.messages import brief

MEASURED_ON = "costs_measured_on"  # provenance key: the GROUPS.json "measured_on" object, or None
COST_UNIT = "cost_unit"  # provenance key: the GROUPS.json "cost_unit" string, or None

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def read_cost_provenance(doc: dict, where) -> dict:
    """The provenance entries ``{costs_measured_on, cost_unit}`` of a parsed GROUPS.json document.

    `measured_on`, when present, must be a JSON object naming the machine (a non-empty string
    "machine"), or a hand-written non-empty string, kept as ``{"machine": text}``; `cost_unit`, when
    present, a non-empty string. Non-finite numbers are refused because the export manifest is strict
    JSON.

    Raises
    ------
    GroupSpecError
        Naming `where` and the field.

    Examples
    --------
    >>> read_cost_provenance({"measured_on": "my laptop", "cost_unit": "ms"}, "GROUPS.json")
    {'costs_measured_on': {'machine': 'my laptop'}, 'cost_unit': 'ms'}
    >>> read_cost_provenance({}, "GROUPS.json")                  # costs as given
    {'costs_measured_on': None, 'cost_unit': None}
    >>> read_cost_provenance({"measured_on": {"cpu": "x86"}}, "GROUPS.json")
    Traceback (most recent call last):
    ...
    edgeseq.errors.GroupSpecError: GROUPS.json: 'measured_on' must name the machine ...
    """
    measured, unit = doc.get("measured_on"), doc.get("cost_unit")
    if isinstance(measured, str) and measured.strip():
        measured = {"machine": measured}
    if measured is not None:
        if not isinstance(measured, dict):
            raise GroupSpecError(f"{where}: 'measured_on' must be an object (as `edgeseq calibrate` writes) "
                                 f"or a string naming the machine, got {brief(measured)}")
        machine = measured.get("machine")
        if not isinstance(machine, str) or not machine.strip():
            raise GroupSpecError(f"{where}: 'measured_on' must name the machine the costs were measured on "
                                 "(a non-empty string 'machine'); remove 'measured_on' if they were not measured")
        for key in ("cpu", "date"):
            if key in measured and not isinstance(measured[key], str):
                raise GroupSpecError(f"{where}: 'measured_on.{key}' must be a string")
        try:
            json.dumps(measured, allow_nan=False, default=_not_json)
        except ValueError:
            raise GroupSpecError(f"{where}: 'measured_on' holds NaN or Infinity; JSON numbers must be finite") from None
        except TypeError as exc:
            raise GroupSpecError(f"{where}: 'measured_on' holds {exc}, which is not JSON") from None
        if _has_huge_int(measured):
            raise GroupSpecError(f"{where}: 'measured_on' holds an integer beyond +-2**53 (JSON readers lose its "
                                 "digits); write it as a string")
    if unit is not None and (not isinstance(unit, str) or not unit.strip()):
        raise GroupSpecError(f"{where}: 'cost_unit' must be a non-empty string such as \"microseconds per item\", "
                             f"got {brief(unit)}")
    return {MEASURED_ON: measured, COST_UNIT: unit}


def _not_json(value):
    raise TypeError(f"a {type(value).__name__}")


def _has_huge_int(value, depth: int = 0) -> bool:
    """An int beyond JSON's exact range anywhere in `value` (json.dumps has already bounded the depth)."""
    if isinstance(value, dict):
        return any(_has_huge_int(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_huge_int(v, depth + 1) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53


def check_cost_provenance(provenance, where: str) -> None:
    """The cost entries of a model's provenance obey GROUPS.json's rules (`read_cost_provenance`).

    A model file is untrusted: what it records as "measured on" reaches the export manifest (strict
    JSON) and every report, so NaN, Infinity, integers JSON cannot carry or a non-string machine are
    refused here rather than silently turned into null.

    Raises
    ------
    GroupSpecError
        Naming `where` and the field.

    Examples
    --------
    >>> check_cost_provenance({"costs_measured_on": {"machine": "pi4"}, "cost_unit": "ms"}, "model file")
    >>> check_cost_provenance({"costs_measured_on": {"machine": "pi4", "t": float("nan")}}, "model file")
    Traceback (most recent call last):
    ...
    edgeseq.errors.GroupSpecError: model file: 'measured_on' holds NaN or Infinity; JSON numbers must be finite
    """
    if not isinstance(provenance, dict):
        return
    doc = {"measured_on": provenance.get(MEASURED_ON), "cost_unit": provenance.get(COST_UNIT)}
    if isinstance(doc["measured_on"], str):  # stored as an object by read_cost_provenance
        raise GroupSpecError(f"{where}: 'measured_on' must be an object naming the machine")
    read_cost_provenance(doc, where)


def _clean(text) -> str:
    """One printable line: a hostile GROUPS.json cannot inject terminal escapes or line breaks."""
    return " ".join(_CONTROL.sub(" ", str(text)).split())


def cost_unit_of(provenance) -> str:
    r"""The cost unit recorded in a model's provenance, or "" when none was given.

    The text is cleaned to one printable line (a hostile file cannot inject terminal escapes).

    Examples
    --------
    >>> cost_unit_of({"cost_unit": "ms per\nframe"}), cost_unit_of({}), cost_unit_of(None)
    ('ms per frame', '', '')
    """
    unit = provenance.get(COST_UNIT) if isinstance(provenance, dict) else None
    return _clean(unit) if isinstance(unit, str) else ""


def cost_summary(provenance) -> str:
    """"costs: <unit>, measured on <cpu>, <machine> (<date>)", or "costs: as given (not measured)".

    The one line `edgeseq inspect` and `edgeseq report` print, so a reader knows whether costs
    are measurements and on what.

    Examples
    --------
    >>> prov = read_cost_provenance({"measured_on": {"machine": "pi4", "cpu": "Cortex-A72",
    ...                                              "date": "2026-01-02"}, "cost_unit": "ms"}, "G")
    >>> cost_summary(prov)
    'costs: ms, measured on Cortex-A72, pi4 (2026-01-02)'
    >>> cost_summary({"cost_unit": "ms"})
    'costs: ms, as given (not measured)'
    """
    unit = cost_unit_of(provenance)
    measured = provenance.get(MEASURED_ON) if isinstance(provenance, dict) else None
    if not isinstance(measured, dict) or not isinstance(measured.get("machine"), str):
        return f"costs: {unit + ', ' if unit else ''}as given (not measured)"
    unit = unit or "unit not given"
    where = ", ".join(_clean(measured[k]) for k in ("cpu", "machine") if isinstance(measured.get(k), str))
    date = measured.get("date")
    return f"costs: {unit}, measured on {where}" + (f" ({_clean(date)})" if isinstance(date, str) else "")


__all__ = ["MEASURED_ON", "COST_UNIT", "read_cost_provenance", "check_cost_provenance", "cost_unit_of",
           "cost_summary"]
