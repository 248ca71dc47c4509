"""Budget parity: Python's rule, the Python/ONNX anytime loop and the compiled C runtime pick the same
prefix at every budget, exact boundaries included, for costs whose cumulative sums float32 cannot hold.

The reference is `edgeseq.budget.longest_affordable_prefix` (the one rule). C answers each budget
twice (`es_prefix_for_budget` and a firmware-style loop on `es_group_info.cum_cost`), for ~80 cost
vectors linked into one program. The negative control shows that these budgets do separate the
exact rule from float32-stored thresholds (the representation C used before), so agreement here is
not vacuous.
"""

from __future__ import annotations

import numpy as np
import pytest
from c_support import boundary_budgets
from sequences import random_sequence
from test_runtime_support import exported, group_features

from edgeseq.export.c_harness import run_c_budgets
from edgeseq.runtime.loop import Step, anytime_loop
from edgeseq.runtime.session import AnytimeSession
from edgeseq.budget import longest_affordable_prefix

ISSUE_COSTS = [0.1, 0.7, 0.3] * 4  # cumulative 2.8, 3.6, 5.1, ... are not float32 values


def cost_vectors(rng) -> list:
    """Decimal costs (not binary fractions), tiny, huge (beyond float32), mixed, near-zero and random."""
    out = [ISSUE_COSTS, [0.1] * 12, [0.2, 0.1, 0.7, 0.3, 0.6], [1e-13, 3e-13, 2e-13], [1e9, 1.0, 3.0, 1e-7],
           [3e38, 3e38, 1.0], [1e-300, 0.1, 1e-300, 0.2], [1.0, 2.0, 4.0]]  # costs are > 0 (zero is refused)
    for k in range(72):
        J = int(rng.integers(1, 14))
        kind = k % 4
        if kind == 0:
            costs = rng.integers(1, 100, size=J) / 10.0
        elif kind == 1:
            costs = rng.integers(1, 1000, size=J) / 100.0
        elif kind == 2:
            costs = rng.uniform(0.0, 5.0, size=J)
        else:
            costs = 10.0 ** rng.uniform(-12, 12, size=J)
        out.append([float(c) for c in costs])
    return out


def sequence_with_costs(costs, rng):
    seq = random_sequence(rng, group_sizes=[1] * len(costs), n_unused=0)
    seq.costs = np.asarray(costs, dtype=np.float64)  # random_sequence draws its own; keep the order it drew
    return seq


def python_loop_prefix(seq, budget: float) -> int:
    """The anytime loop the ONNX session runs, with a stand-in commit (no onnxruntime needed)."""
    steps = [Step(seq.group_names[g], 1, float(seq.costs[g])) for g in seq.order]
    extractors = {s.name: (lambda _inp: np.zeros(1)) for s in steps}
    return anytime_loop(steps, lambda j, rows: j, None, extractors, budget=budget).prefix


@pytest.fixture(scope="module")
def cases():
    rng = np.random.default_rng(13)
    seqs = [sequence_with_costs(c, rng) for c in cost_vectors(rng)]
    return seqs, [boundary_budgets(s.cum_cost, rng) for s in seqs]


def test_c_and_python_loop_follow_the_rule_at_every_budget(cases):
    seqs, budgets = cases
    got = run_c_budgets(seqs, budgets)
    assert got.shape == (sum(len(b) for b in budgets), 2)
    k = 0
    for seq, bs in zip(seqs, budgets):
        for b in bs:
            want = longest_affordable_prefix(seq.cum_cost, b)
            assert want == int(np.sum(seq.cum_cost <= b)) - 1  # the rule written out (cum is monotone)
            assert tuple(got[k]) == (want, want), (list(seq.costs[seq.order]), b.hex(), tuple(got[k]), want)
            assert python_loop_prefix(seq, float(b)) == want, (list(seq.costs[seq.order]), b.hex())
            k += 1


def test_negative_control_float32_thresholds_disagree_in_c(cases, monkeypatch):
    """The same C check fails when the generator stores float32-rounded cumulative costs (the old
    representation): these budgets do separate the exact rule from float32 thresholds."""
    import edgeseq.export.c_codegen as codegen
    seqs, budgets = cases
    # the first five cost vectors stay finite in float32 (the sixth overflows it)
    monkeypatch.setattr(codegen, "c_double", lambda v: float(np.float32(v)).hex())
    with np.errstate(over="ignore"):
        got = run_c_budgets(seqs[:5], budgets[:5])
    want = np.concatenate([[longest_affordable_prefix(s.cum_cost, b) for b in bs]
                           for s, bs in zip(seqs[:5], budgets[:5])])
    print("float32 thresholds disagree on", np.sum(got[:, 0] != want), "of", len(want))
    assert np.sum(got[:, 0] != want) > 10 and np.sum(got[:, 1] != want) > 10
    # the issue's symptom: a budget just below a cumulative cost still affords that prefix
    cum = seqs[0].cum_cost
    n0 = len(budgets[0])
    below = {float(np.nextafter(c, 0)) for c in cum[1:]}
    assert any(got[k, 0] > want[k] for k in range(n0) if float(budgets[0][k]) in below)


def test_exported_session_agrees_at_the_issue_budgets(tmp_path):
    """The ONNX session (batch and anytime loop, reading costs from manifest.json) at the issue's costs."""
    rng = np.random.default_rng(5)
    seq = sequence_with_costs(ISSUE_COSTS, rng)
    seq.order = np.arange(len(ISSUE_COSTS))  # computation order = the issue's cost order
    cum = seq.cum_cost
    budgets = boundary_budgets(cum, rng)
    X = rng.normal(size=(1, seq.n_features_in))
    feats = group_features(seq, X)
    extractors = {name: (lambda _inp, v=v: v[0]) for name, v in feats.items()}
    c = run_c_budgets([seq], [budgets])
    with AnytimeSession(exported(seq, tmp_path)) as sess:
        for k, b in enumerate(budgets):
            want = longest_affordable_prefix(cum, b)
            assert sess.prefix_for_budget(b) == want
            assert sess.run(extractors, budget=b).prefix == want
            assert tuple(c[k]) == (want, want)
