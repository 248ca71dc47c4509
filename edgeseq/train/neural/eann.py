"""EANN (an ensemble of exponentially deepening anytime networks) and the OPT baseline.

EANN: members of depth 1, b, b², … (the last one capped at the full depth) run one after another as
consecutive stages. A member's stage j reads the groups the full network's stage j reads; groups an
earlier member already paid cost nothing again. A member's first stage resets the state (it ignores
the previous member's hidden vector). Each member is trained alone with the chosen weight scheme.
A stage whose exit does not beat (lower validation loss) the best exit committed before it gets
``commit=False``: it runs, but the budget rule never answers with it, so the answers along the
stages only ever improve on validation.

OPT: for each depth i, a network of depth i trained for its last exit alone — the reference each
exit of an anytime network is compared with.
"""

from __future__ import annotations

import math
from dataclasses import replace

from edgeseq.errors import InputError
from edgeseq.train.neural.net import NetSpec, StageSpec


def member_depths(n_layers: int, base: float) -> list[int]:
    """Depths of the EANN members: ⌈b⁰⌉, ⌈b¹⌉, … while below `n_layers`, then `n_layers` itself.

    Examples
    --------
    >>> from edgeseq.train.neural.eann import member_depths
    >>> member_depths(8, 2), member_depths(6, 2), member_depths(3, 10)
    ([1, 2, 4, 8], [1, 2, 4, 6], [1, 3])
    """
    if not base > 1:
        raise InputError(f"the EANN base must be a number > 1, got {base!r}")
    depths, i = [], 0
    while True:
        d = min(math.ceil(base ** i - 1e-9), n_layers)
        if not depths or d > depths[-1]:
            depths.append(d)
        if d >= n_layers:
            return depths
        i += 1


def member_spec(full: NetSpec, depth: int) -> NetSpec:
    """The first `depth` stages of `full` as a network of its own (each stage pays what it reads).

    Examples
    --------
    >>> from edgeseq.train.neural.net import NetSpec, StageSpec
    >>> from edgeseq.train.neural.eann import member_spec
    >>> full = NetSpec(([0], [1]), (None, None), (None, None),
    ...                (StageSpec((0,), (0,), 4), StageSpec((1,), (1,), 4)), "identity", 1)
    >>> len(member_spec(full, 1).stages)
    1
    """
    stages = tuple(StageSpec(s.reads, s.reads, s.width, reset=(j == 0)) for j, s in enumerate(full.stages[:depth]))
    return replace(full, stages=stages)


def eann_spec(full: NetSpec, depths) -> NetSpec:
    """All members as one chain of stages: resets at each member's start, groups paid once.

    Examples
    --------
    >>> from edgeseq.train.neural.net import NetSpec, StageSpec
    >>> from edgeseq.train.neural.eann import eann_spec
    >>> full = NetSpec(([0], [1]), (None, None), (None, None),
    ...                (StageSpec((0,), (0,), 4), StageSpec((1,), (1,), 4)), "identity", 1)
    >>> [(s.reads, s.new, s.reset) for s in eann_spec(full, [1, 2]).stages]
    [((0,), (0,), True), ((0,), (), True), ((1,), (1,), False)]
    """
    stages, paid = [], set()
    for d in depths:
        for j, s in enumerate(full.stages[:d]):
            new = tuple(g for g in s.reads if g not in paid)
            paid.update(new)
            stages.append(StageSpec(s.reads, new, s.width, reset=(j == 0)))
    return replace(full, stages=tuple(stages))


def merge_member_params(members: list[dict]) -> dict:
    """The members' parameters renumbered into the chained network's stage indices.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.eann import merge_member_params
    >>> sorted(merge_member_params([{"0/b": np.zeros(1)}, {"0/b": np.ones(1), "1/b": np.ones(1)}]))
    ['0/b', '1/b', '2/b']
    """
    out, offset = {}, 0
    for p in members:
        n = 1 + max(int(k.split("/")[0]) for k in p)
        for k, v in p.items():
            i, name = k.split("/", 1)
            out[f"{int(i) + offset}/{name}"] = v
        offset += n
    return out


def commits_from_losses(prior_loss: float, stage_losses) -> list[bool]:
    """Which stages commit: those whose validation loss is below every earlier committed one.

    Examples
    --------
    >>> from edgeseq.train.neural.eann import commits_from_losses
    >>> commits_from_losses(1.0, [0.8, 0.9, 0.5, 0.5])
    [True, False, True, False]
    """
    best, out = float(prior_loss), []
    for lo in stage_losses:
        ok = float(lo) < best
        out.append(ok)
        if ok:
            best = float(lo)
    return out


def cost_inflation(b: float, n: int, z: float) -> float:
    """C = x / x' of Prop. 4.4.1: at depth z of member n + 1 (depth bⁿ), cost spent over the competitor's.

    The budget spent is x = z + (bⁿ − 1)/(b − 1) layers. For z <= bⁿ⁻¹ the answer is member n's last
    exit, competitive with the optimal of depth x' = bⁿ⁻¹; beyond it the answer is member n + 1's
    exit at depth z, competitive with x' = z. Member 1 (n = 0) is the optimal itself.

    Examples
    --------
    >>> from edgeseq.train.neural.eann import cost_inflation
    >>> cost_inflation(2, 0, 1.0), cost_inflation(2, 3, 4.0)    # x = 4 + 7 against x' = 4
    (1.0, 2.75)
    """
    if n == 0:
        return 1.0
    x = z + (b ** n - 1) / (b - 1)
    return x / (b ** (n - 1) if z <= b ** (n - 1) else z)


def prop_4_4_1_bounds(b: float) -> tuple[float, float]:
    """(sup_B C, the bound on E[C]) of Prop. 4.4.1: 2 + 1/(b−1) and 1 − 1/(2b) + (1 + ln b)/(b − 1).

    Examples
    --------
    >>> from edgeseq.train.neural.eann import prop_4_4_1_bounds
    >>> [round(v, 3) for v in prop_4_4_1_bounds(2)]
    [3.0, 2.443]
    """
    return 2 + 1 / (b - 1), 1 - 1 / (2 * b) + (1 + math.log(b)) / (b - 1)


def opt_specs(full: NetSpec) -> list[NetSpec]:
    """OPT: one network per depth i = 1..L (the first i stages), each to be trained for its last exit alone.

    Train each with ``scheme = [0, …, 0, 1]`` (`train_net` accepts fixed weights).

    Examples
    --------
    >>> from edgeseq.train.neural.net import NetSpec, StageSpec
    >>> from edgeseq.train.neural.eann import opt_specs
    >>> full = NetSpec(([0], [1]), (None, None), (None, None),
    ...                (StageSpec((0,), (0,), 4), StageSpec((1,), (1,), 4)), "identity", 1)
    >>> [len(s.stages) for s in opt_specs(full)]
    [1, 2]
    """
    return [replace(full, stages=full.stages[:i]) for i in range(1, len(full.stages) + 1)]
