"""The C runtime and generated models on emulated Cortex-M cores (qemu-system-arm, bare metal).

Cortex-M4F (mps2-an386, FPU) and Cortex-M3 (mps2-an385, soft-float) run, for a regression, a binary
and a multiclass model trained on real data: every prefix of every test row (compared with numpy
within the float32 bound, and with the host gcc build: bit-identical for the identity link, whose
arithmetic is IEEE float32 adds and multiplies in the same order; within a few ulp after expf, whose
libm differs), a budget sweep over the held-out rows at every boundary budget (the firmware loop must pick
`longest_affordable_prefix` and return that prefix's prediction), the budget rule for ~80 cost
vectors, and a SysTick interrupt that checks every read during pushes, with its negative control
(a runtime that commits in place is caught tearing). Skipped, with the reason, without
arm-none-eabi-gcc + newlib + qemu-system-arm.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from c_support import assert_matches_numpy, boundary_budgets, in_place_commit_runtime, interrupt_model
from test_budget_parity import cost_vectors, sequence_with_costs

from edgeseq.export.c_arm import TARGETS, build_arm, missing_tools, run_budgets_arm, run_driver_arm, run_qemu
from edgeseq.export.kinds.affine.c_float import write_c_model
from edgeseq.export.c_harness import run_c_model, runtime_dir
from edgeseq.budget import longest_affordable_prefix

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from c_footprint import reference_model  # noqa: E402

_MISSING = missing_tools()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=f"emulated Cortex-M tests skipped: {_MISSING}")
TARGET_NAMES = list(TARGETS)
MAX_ULP_AFTER_LINK = 4  # newlib's expf is not glibc's (the M4F and M3 builds of newlib differ by a ulp, too)


@pytest.fixture(scope="module", params=["regression", "binary", "multiclass"])
def trained(request, tmp_path_factory):
    seq, X_test = reference_model(request.param)  # the models whose sizes bench/c_footprint.py records
    d = tmp_path_factory.mktemp(request.param)
    write_c_model(seq, d, request.param[:3])
    features = X_test[:, seq.prefix_columns(len(seq.order))]
    return seq, X_test, d, features, run_c_model(d, features)


def _ulps(a, b) -> int:
    ia, ib = (np.asarray(v, dtype=np.float32).view(np.int32).astype(np.int64) for v in (a, b))
    return int(np.max(np.abs(ia - ib)))


@pytest.mark.parametrize("target", TARGET_NAMES)
def test_every_prefix_and_budget_sweep_on_the_core(trained, target):
    seq, X, model_dir, features, host = trained
    budgets = boundary_budgets(seq.cum_cost, np.random.default_rng(1))
    run, sweep = run_driver_arm(model_dir, features, TARGETS[target], budgets=budgets)
    assert_matches_numpy(seq, X, run.predictions)
    worst = max(_ulps(a, b) for a, b in zip(run.predictions, host.predictions))
    print(f"\n{target} {seq.link}: max ulp distance to the host build {worst}")
    if seq.link == "identity":
        assert worst == 0
    else:
        assert worst <= MAX_ULP_AFTER_LINK
        for j, labels in enumerate(run.labels):  # the first maximum of the core's own probabilities
            assert np.array_equal(labels, run.predictions[j].argmax(axis=1))
    for b, budget in enumerate(budgets):  # the firmware loop: the rule's prefix and that prefix's prediction
        want = longest_affordable_prefix(seq.cum_cost, budget)
        assert np.all(sweep.prefix[:, b] == want), (budget.hex(), sweep.prefix[:, b], want)
        assert np.array_equal(sweep.predictions[:, b], run.predictions[want])
        assert np.array_equal(sweep.labels[:, b], run.labels[want])


@pytest.mark.parametrize("target", TARGET_NAMES)
def test_budget_rule_on_the_core(target):
    """The double comparison (an FPU-less library call on both cores) gives Python's prefix."""
    rng = np.random.default_rng(13)
    seqs = [sequence_with_costs(c, rng) for c in cost_vectors(rng)]
    budgets = [boundary_budgets(s.cum_cost, rng) for s in seqs]
    got = run_budgets_arm(seqs, budgets, TARGETS[target])
    want = np.concatenate([[longest_affordable_prefix(s.cum_cost, b) for b in bs] for s, bs in zip(seqs, budgets)])
    assert got.shape == (len(want), 2)
    assert np.array_equal(got[:, 0], want) and np.array_equal(got[:, 1], want)


SYSTICK_PERIOD = 499  # core cycles between interrupts
SYSTICK_PASSES = {"cortex-m4f": 4000, "cortex-m3": 400}  # the M3's soft-float pushes are ~10x longer
ICOUNT = ("-icount", "shift=3")  # instruction-counted time: the interrupt points repeat run after run


def _systick(tmp_path, target, runtime_source):
    d = interrupt_model(tmp_path / "model")
    elf = build_arm([runtime_source, d / "edgeseq_model.c", runtime_dir() / "tests" / "qemu" / "systick_test.c"],
                    tmp_path / "systick.elf", TARGETS[target], include_dirs=[d, runtime_dir()],
                    defines=["ES_PREFIX=safety"])
    proc = run_qemu(elf, TARGETS[target], [str(SYSTICK_PERIOD), str(SYSTICK_PASSES[target])], check=False, extra=ICOUNT)
    tok = proc.stdout.split()
    counts = {tok[i]: int(tok[i + 1]) for i in range(0, len(tok) - 1, 2) if tok[i] in ("reads", "during_push", "torn")}
    return proc.returncode, counts


@pytest.mark.parametrize("target", TARGET_NAMES)
def test_systick_reads_during_pushes_are_never_torn(tmp_path, target):
    rc, counts = _systick(tmp_path, target, runtime_dir() / "edgeseq_runtime.c")
    print(f"\n{target}: {counts}")
    assert rc == 0 and counts["torn"] == 0 and counts["during_push"] >= 500, counts


@pytest.mark.parametrize("target", TARGET_NAMES)
def test_systick_test_catches_an_in_place_commit(tmp_path, target):
    """Negative control: the same test on a runtime that overwrites the published slot fails."""
    rc, counts = _systick(tmp_path, target, in_place_commit_runtime(tmp_path))
    print(f"\n{target}, in-place commit: {counts}")
    assert rc == 1 and counts["torn"] > 0, counts

