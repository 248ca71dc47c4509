"""Costs measured on the target device, from its log into GROUPS.json.

The learned order is only as good as the costs it was given; the costs that matter are those of the
core the model runs on. The firmware side (``runtime_c/edgeseq_costs.h``) times each extractor on
the board and prints one line, ``EDGESEQ_COSTS {json}``, over whatever channel the board has (UART,
semihosting, RTT). This module finds that line in a captured log, checks it, and writes the costs
into a copy of the user's GROUPS.json — groups, columns and everything else unchanged — with
``cost_unit`` and ``measured_on`` naming the board, so `edgeseq train` learns the board's order and
every report says where the costs came from.

A device log is untrusted input: it is read as a regular file with a size bound (see
:mod:`edgeseq.io.bounded`), and every problem is one line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from edgeseq.errors import GroupSpecError, InputError
from edgeseq.io.bounded import read_bounded
from edgeseq.messages import brief, clip

LINE_TAG = "EDGESEQ_COSTS "  # ES_COSTS_LINE_TAG in edgeseq_costs.h
DEVICE_FORMAT = "edgeseq-device-costs"
MAX_LOG_BYTES = 16 << 20  # a serial log is small; refuse anything larger before reading it
MAX_REPEATS = 1001  # ES_COSTS_MAX_REPEATS
MAX_GROUPS = 4096  # ES_COSTS_MAX_GROUPS
_TOP_KEYS = ("format", "version", "machine", "unit", "repeats", "overhead", "groups")


@dataclass(frozen=True)
class DeviceCosts:
    """One measurement from the device: per group the median counter delta minus the counter's own cost.

    Examples
    --------
    >>> from edgeseq.io.device_costs import DeviceCosts
    >>> DeviceCosts("board", "cycles", 15, {"imu": 120.0}).costs["imu"]
    120.0
    """

    machine: str
    unit: str
    repeats: int
    costs: dict  # group name -> cost (median - overhead), > 0


def _count(value, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(f"device costs: {what} must be an integer in {lo}..{hi}, got {brief(value)}")
    return value


def _text(value, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise InputError(f"device costs: {what} must be a non-empty string of at most 200 characters, "
                         f"got {brief(value)}")
    return value.strip()


def parse_device_costs(text: str, where: str = "device log") -> DeviceCosts:
    """Find the one ``EDGESEQ_COSTS`` line in a device's output and check it.

    Parameters
    ----------
    text : str
        The captured log; other lines (boot messages, the program's own prints) are ignored.
    where : str
        Names the log in messages.

    Raises
    ------
    InputError
        No tagged line or more than one, malformed JSON, a missing or mistyped field, a repeated group
        name, or a group whose median does not exceed the counter's own overhead (the counter is too
        coarse for that extractor: time several calls per sample on the device instead).

    Examples
    --------
    >>> from edgeseq.io.device_costs import parse_device_costs
    >>> log = ('boot ok\\nEDGESEQ_COSTS {"format": "edgeseq-device-costs", "version": 1, "machine": "M4 board", '
    ...        '"unit": "cycles", "repeats": 15, "overhead": 6, "groups": [{"name": "imu", "median": 126}]}\\n')
    >>> parse_device_costs(log).costs
    {'imu': 120.0}
    >>> parse_device_costs("boot ok\\n")
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: device log holds no line starting with 'EDGESEQ_COSTS ': did the measurement program run to the end?
    """
    lines = [ln[ln.index(LINE_TAG) + len(LINE_TAG):] for ln in text.splitlines() if LINE_TAG in ln]
    if not lines:
        raise InputError(f"{where} holds no line starting with {LINE_TAG!r}: did the measurement program run "
                         f"to the end?")
    if len(lines) > 1:
        raise InputError(f"{where} holds {len(lines)} lines starting with {LINE_TAG!r}: keep the one measurement "
                         f"to use")
    try:
        doc = json.loads(lines[0])
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{where}: the {LINE_TAG.strip()} line is not valid JSON ({clip(exc)}); was the line "
                         f"cut by the serial buffer?") from None
    if not isinstance(doc, dict) or doc.get("format") != DEVICE_FORMAT or doc.get("version") != 1:
        raise InputError(f"{where}: the {LINE_TAG.strip()} line is not an {DEVICE_FORMAT} version 1 record")
    unknown = sorted(set(doc) - set(_TOP_KEYS))
    if unknown:
        raise InputError(f"device costs: unknown field {brief(unknown[0])}")
    machine, unit = _text(doc.get("machine"), "'machine'"), _text(doc.get("unit"), "'unit'")
    repeats = _count(doc.get("repeats"), "'repeats'", 1, MAX_REPEATS)
    overhead = _count(doc.get("overhead"), "'overhead'", 0, 2**32 - 1)
    groups = doc.get("groups")
    if not isinstance(groups, list) or not 1 <= len(groups) <= MAX_GROUPS:
        raise InputError(f"device costs: 'groups' must be a list of 1..{MAX_GROUPS} measurements")
    costs = {}
    for i, g in enumerate(groups):
        if not isinstance(g, dict) or set(g) != {"name", "median"}:
            raise InputError(f"device costs: group {i} must be {{\"name\": ..., \"median\": ...}}")
        name = _text(g["name"], f"group {i}'s name")
        median = _count(g["median"], f"group {brief(name)}'s median", 0, 2**32 - 1)
        if name in costs:
            raise InputError(f"device costs: group {brief(name)} is measured twice")
        if median <= overhead:
            raise InputError(f"device costs: group {brief(name)} measured {median} {unit}, not more than reading "
                             f"the counter itself ({overhead}): the counter is too coarse for it; time a loop "
                             f"of several calls on the device and divide")
        costs[name] = float(median - overhead)
    return DeviceCosts(machine, unit, repeats, costs)


def read_device_log(path) -> DeviceCosts:
    """:func:`parse_device_costs` of a log file: a regular file of at most MAX_LOG_BYTES.

    The log is saved from the board's channel first: a serial port, FIFO or other device is refused
    unread (its size says nothing, and reading it would wait for the board or never end), and a file
    larger than the bound is refused before it is read.

    Examples
    --------
    >>> import os
    >>> from pathlib import Path
    >>> from edgeseq.io.device_costs import read_device_log
    >>> read_device_log(Path("no-such.log"))
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: device log no-such.log does not exist
    >>> read_device_log(os.devnull)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: device log /dev/null is a character device, not a regular file; save its content to a file and pass that
    """
    data = read_bounded(path, MAX_LOG_BYTES, "device log",
                        hint=f"a cost measurement needs far less: pass the part holding the {LINE_TAG.strip()} line")
    return parse_device_costs(data.decode("utf-8", errors="replace"), f"device log {path}")


def apply_device_costs(groups_doc: dict, device: DeviceCosts) -> dict:
    """A copy of a parsed GROUPS.json whose costs, ``cost_unit`` and ``measured_on`` come from `device`.

    Every group of the document must have been measured and every measurement must name a group: a
    silently kept development-machine cost would mix two units in one order.

    Raises
    ------
    GroupSpecError
        A group without a measurement, or a measurement of no group (with a "did you mean" hint).

    Examples
    --------
    >>> from edgeseq.io.device_costs import DeviceCosts, apply_device_costs
    >>> doc = {"groups": [{"name": "imu", "columns": [0, 1], "cost": 0.2}], "cost_unit": "ms"}
    >>> new = apply_device_costs(doc, DeviceCosts("M4 board", "cycles", 15, {"imu": 120.0}))
    >>> new["groups"][0]["cost"], new["cost_unit"], new["measured_on"]["machine"]
    (120.0, 'cycles', 'M4 board')
    >>> apply_device_costs(doc, DeviceCosts("M4 board", "cycles", 15, {"imu_": 120.0}))
    Traceback (most recent call last):
    ...
    edgeseq.errors.GroupSpecError: device costs: group 'imu' was not measured on the device; did you mean 'imu_'?
    """
    from edgeseq.io.data import did_you_mean  # lazy: data.py pulls in numpy and the CSV reader

    groups = groups_doc.get("groups") if isinstance(groups_doc, dict) else None
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise GroupSpecError('GROUPS.json must hold {"groups": [{"name": ..., "columns": [...], "cost": ...}, ...]}')
    names = [g.get("name") for g in groups]
    for name in names:
        if name not in device.costs:
            raise GroupSpecError(f"device costs: group {brief(name)} was not measured on the device"
                                 f"{did_you_mean(name, device.costs)}")
    extra = [n for n in device.costs if n not in names]
    if extra:
        raise GroupSpecError(f"device costs: {brief(extra[0])} is measured but is no group of GROUPS.json"
                             f"{did_you_mean(extra[0], [str(n) for n in names])}")
    out = {k: v for k, v in groups_doc.items() if k not in ("cost_unit", "measured_on")}
    out["groups"] = [{**g, "cost": device.costs[g["name"]]} for g in groups]
    out["cost_unit"] = device.unit
    out["measured_on"] = {"machine": device.machine,
                          "method": f"on the device: median of {device.repeats} runs, counter overhead subtracted"}
    assert all(math.isfinite(g["cost"]) and g["cost"] > 0 for g in out["groups"])
    return out


__all__ = ["LINE_TAG", "DeviceCosts", "parse_device_costs", "read_device_log", "apply_device_costs"]
