"""bench/tree_orders.py's ``--rescore``: every split scored against the current CS-G-OMP reference,
from its stored test curve, by the same function the fits are scored with."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from test_bench_results import BENCH, _load


@pytest.fixture(scope="module")
def tree_orders():
    sys.path.insert(0, str(BENCH))  # the script imports its sibling modules
    try:
        yield _load("bench_tree_orders", BENCH / "tree_orders.py")
    finally:
        sys.path.remove(str(BENCH))


def test_the_recomputed_alpha_timeliness_is_the_one_the_fits_recorded(tree_orders):
    """Every committed split whose (α, c_α) is its reference's: recomputing its α-timeliness from its
    stored curve gives the recorded value, so a rescored split is scored as a fitted one would be."""
    runs = json.loads((BENCH / "results" / "tree_orders.json").read_text(encoding="utf-8"))["runs"]
    checked = 0
    for by_method in runs.values():
        for record in by_method.values():
            for r in record["splits"]:
                got = tree_orders.step_curve_mean(r["cum_cost"], r["accuracy"], r["c_alpha"])
                assert got == pytest.approx(r["alpha_timeliness"], rel=1e-12, abs=1e-12)
                checked += 1
    assert checked > 50
    assert tree_orders.rescore(copy.deepcopy(runs), list(runs)) == {}  # nothing to change: already consistent


def test_rescore_moves_every_split_to_its_seeds_reference_and_nothing_else(tree_orders):
    def split(seed, c_alpha, total=None):
        return {"seed": seed, "alpha": 1.0, "c_alpha": c_alpha, "alpha_timeliness": 0.0, "cum_cost": [0.0, 1.0, 4.0],
                "accuracy": [0.1, 0.5, 0.9], **({"costs_total": total} if total else {})}

    runs = {"d": {"CS-G-OMP (linear)": {"splits": [split(0, 4.0), split(1, 1.0)]},
                  "AFR": {"splits": [split(0, 1.0), split(1, 1.0)]},
                  "other costs": {"splits": [split(0, 1.0, total=9.0)]}}}
    changed = tree_orders.rescore(runs, ["d"])
    assert list(changed["d"]) == ["AFR"]
    moved, same = runs["d"]["AFR"]["splits"]
    assert moved["c_alpha"] == 4.0 and "rescored" in moved
    assert moved["alpha_timeliness"] == pytest.approx((0.1 * 1 + 0.5 * 3) / 4)  # step curve over [0, 4]
    assert same["alpha_timeliness"] == 0.0 and "rescored" not in same  # its reference did not change
    assert runs["d"]["other costs"]["splits"][0]["c_alpha"] == 1.0  # another calibration is not comparable
