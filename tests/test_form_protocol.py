"""The intermediate forms answer the stage protocol under the same names, by the same rule.

`FittedSequence` (linear), `TreeStageModel` (trees) and `LayerBlockModel` (layer blocks) each answer
`prefix_for_budget` and `prefix_columns`; the budget goes through `edgeseq.budget` for all of them,
so on the same cumulative costs they pick the same stage at every boundary budget (each cumulative
cost and its float neighbours) and refuse bad budgets with the same message. The earlier tree names
(`stage_for_budget`, `columns_required`) remain as aliases that warn and give the same answers.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from c_support import boundary_budgets
from sequences import random_sequence
from tree_models import random_tree_model

from edgeseq.budget import check_budget, longest_affordable_prefix
from edgeseq.errors import InputError
from edgeseq.forms.layer_blocks import _example_model

# decimal costs whose sums are not exact, tiny costs, and a huge cost next to small ones
COSTS = [[0.1, 0.7, 0.3], [1e-13, 3e-13, 2e-13], [1e9, 1.0, 3.0], [0.2, 0.1, 0.7, 0.3]]
BAD_BUDGETS = [-1.0, -1e-300, float("nan"), True, np.bool_(True), np.bool_(False), "1.0", 1j, [1.0], -np.inf]


def _pair(costs, seed=0):
    """A FittedSequence and a TreeStageModel over the same groups, costs and group order."""
    rng = np.random.default_rng(seed)
    J = len(costs)
    seq = random_sequence(rng, group_sizes=(1,) * J, n_unused=1)
    seq = dataclasses.replace(seq, costs=np.asarray(costs, float))
    tree = random_tree_model(rng, group_sizes=(1,) * J, stage_groups=tuple((int(g),) for g in seq.order),
                             trees_per_stage=(1,) * J, costs=costs)
    return seq, tree


@pytest.mark.parametrize("costs", COSTS, ids=lambda c: str(c[:2]))
def test_same_stage_at_every_boundary_budget(costs):
    seq, tree = _pair(costs)
    cum = seq.cum_cost
    assert np.array_equal(tree.cum_cost, cum)  # the precondition: the same costs, summed alike
    budgets = boundary_budgets(cum, np.random.default_rng(1))
    neighbours = {*cum, *np.nextafter(cum, -np.inf), *np.nextafter(cum, np.inf)}
    assert {b for b in neighbours if b >= 0} <= set(budgets)
    answers = [(seq.prefix_for_budget(b), tree.prefix_for_budget(b)) for b in budgets]
    want = [longest_affordable_prefix(cum, b) for b in budgets]
    assert [a for a, _ in answers] == want and [b for _, b in answers] == want
    # the boundaries do separate stages: a budget one step below each cumulative cost buys one stage less
    assert all(seq.prefix_for_budget(np.nextafter(c, -np.inf)) == j - 1 for j, c in enumerate(cum) if j)
    assert seq.prefix_for_budget(None) == tree.prefix_for_budget(None) == len(cum) - 1


@pytest.mark.parametrize("budget", BAD_BUDGETS, ids=repr)
def test_bad_budgets_are_refused_with_the_same_message(budget):
    seq, tree = _pair(COSTS[0])
    with pytest.raises(InputError) as ref:
        check_budget(budget)
    messages = set()
    for form in (seq, tree, _example_model()):
        with pytest.raises(InputError) as exc:
            form.prefix_for_budget(budget)
        messages.add(str(exc.value))
    assert messages == {str(ref.value)}
    assert len(str(ref.value)) < 400  # the bounded message (`brief`), not a repr of anything


def test_a_long_bad_budget_is_quoted_briefly():
    """Negative control of the old tree copy: it quoted the whole value (repr) and accepted numpy bools."""
    _, tree = _pair(COSTS[0])
    with pytest.raises(InputError) as exc:
        tree.prefix_for_budget("9" * 10_000)
    assert len(str(exc.value)) < 400


def test_same_columns_per_stage():
    """prefix_columns(k): the columns of the groups bought by stage k, in extraction order, in every form."""
    seq, tree = _pair(COSTS[3])
    for form in (seq, tree):
        for k in range(len(form.cum_cost)):
            want = [c for g in seq.order[:k] for c in form.group_columns[g]]
            assert form.prefix_columns(k).tolist() == want
    block = _example_model()
    assert block.prefix_columns(len(block.stages) - 1).size > 0


def test_old_tree_names_are_warning_aliases():
    _, tree = _pair(COSTS[0])
    block = _example_model()
    with pytest.warns(DeprecationWarning, match="prefix_for_budget"):
        assert tree.stage_for_budget(0.85) == tree.prefix_for_budget(0.85)
    with pytest.warns(DeprecationWarning, match="prefix_columns"):
        assert tree.columns_required(2).tolist() == tree.prefix_columns(2).tolist()
    with pytest.warns(DeprecationWarning, match="prefix_for_budget"):
        assert block.stage_for_budget(1.0) == block.prefix_for_budget(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names never warn
        tree.prefix_for_budget(1.0), tree.prefix_columns(1), block.prefix_for_budget(1.0)


def test_alias_warning_names_the_class_it_was_called_on():
    with pytest.warns(DeprecationWarning, match="LayerBlockModel.columns_required"):
        _example_model().columns_required(1)


def test_every_form_answers_the_stage_protocol():
    """`edgeseq.forms.protocol.is_form`: all three forms, and an estimator through `form_of`."""
    from edgeseq.forms.protocol import form_of, is_form

    seq, tree = _pair(COSTS[0])
    blocks = _example_model()
    for form in (seq, tree, blocks):
        assert is_form(form) and form_of(form) is form
        X = np.zeros((2, getattr(form, "n_features_in", None) or form.n_features))
        z = list(form.staged_decision(X))
        assert len(z) == len(form.cum_cost) and all(v.shape == (2, form.n_outputs) for v in z)

    class Fitted:
        stage_model_ = tree
    assert form_of(Fitted()) is tree
    # negative control: neither a plain object nor a form class is a form
    assert form_of(object()) is None and form_of(type(seq)) is None and not is_form(object())
