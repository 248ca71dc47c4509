"""The stage protocol: what every intermediate form answers, under the same names, by the same rules.

A fitted anytime model of any kind -- linear prefixes (`FittedSequence`), tree stages
(`TreeStageModel`), layer blocks (`LayerBlockModel`) -- is a sequence of stages 0..K with
cumulative costs. Whatever reads a model rather than an export (curves, reports, the budget rule, the
exporters' checks) asks it through these names and never asks which kind it is:

``link``, ``n_outputs``, ``classes``
    The link of the per-stage decision values and the outputs it maps them to.
``cum_cost``
    Cumulative cost (K + 1,) of stages 0..K; stage 0 costs nothing.
``prefix_for_budget(budget)``
    The last stage the budget affords, by the one rule of `edgeseq.budget` (no form re-implements it).
``prefix_columns(k)``
    The raw feature columns stage k reads (every group computed once stage k has run).
``staged_decision(X)``
    The decision values (n, P) of every stage 0..K on raw rows X, before the link.
``validate()``
    Re-check the form's own invariants (after unpickling or editing).

Sample rows for checks come from `edgeseq.forms.linear.sample_rows` (the training statistics a form
stores) for every kind.

Examples
--------
>>> import numpy as np
>>> from edgeseq import AnytimeRegressor
>>> from edgeseq.forms.protocol import form_of, is_form
>>> X = np.random.default_rng(0).normal(size=(40, 2))
>>> est = AnytimeRegressor().fit(X, X[:, 0])
>>> form = form_of(est)
>>> form is est.fitted_sequence_, is_form(form)
(True, True)
>>> [z.shape for z in form.staged_decision(X[:3])]
[(3, 1), (3, 1), (3, 1)]
>>> form_of(3.0) is None
True
"""

from __future__ import annotations

import numpy as np

# the attribute under which a fitted estimator holds its form (linear estimators, then tree estimators)
FORM_ATTRIBUTES = ("fitted_sequence_", "stage_model_")
# what every form answers (see the module docstring): values, then methods
STAGE_PROTOCOL = ("link", "n_outputs", "n_features_in", "classes", "group_columns", "stage_names", "provenance",
                  "cum_cost", "prefix_for_budget", "prefix_columns", "staged_decision", "validate")
_METHODS = ("prefix_for_budget", "prefix_columns", "staged_decision", "validate")


def is_form(obj) -> bool:
    """Whether `obj` answers the stage protocol (an intermediate form instance, whatever its kind).

    Examples
    --------
    >>> from edgeseq.forms.protocol import is_form
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> is_form(_demo_model()), is_form(type(_demo_model())), is_form(3.0)
    (True, False, False)
    """
    if isinstance(obj, type):
        return False
    return all(hasattr(obj, name) for name in STAGE_PROTOCOL) and all(callable(getattr(obj, m)) for m in _METHODS)


def form_of(obj):
    """The intermediate form `obj` is or holds (a fitted estimator's ``fitted_sequence_`` or
    ``stage_model_``); None when it is neither.

    Examples
    --------
    >>> from edgeseq.forms.protocol import form_of
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> model = _demo_model()
    >>> form_of(model) is model
    True
    """
    if is_form(obj):
        return obj
    if isinstance(obj, type):
        return None
    for name in FORM_ATTRIBUTES:
        form = getattr(obj, name, None)
        if is_form(form):
            return form
    return None


def staged_answers(form, X):
    """The decision values the model answers with after each stage, for rows `X`.

    A stage that does not commit (an EANN member that lost to an earlier exit on validation; see
    `LayerBlockModel.committing`) never answers: after it, the model still answers with the last
    committing stage. A form without a `committing` attribute commits every stage, so this is its
    `staged_decision`.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.protocol import staged_answers
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> model = _example_model()
    >>> X = np.zeros((2, model.n_features))
    >>> len(list(staged_answers(model, X))) == len(model.cum_cost)
    True
    """
    committing = getattr(form, "committing", None)
    if committing is None:
        yield from form.staged_decision(X)
        return
    commits = set(np.asarray(committing).tolist())
    last = None
    for k, z in enumerate(form.staged_decision(X)):
        last = z if k in commits or last is None else last
        yield last
