"""Cost-sensitive sequencing of a boosted ensemble: which groups to pay for first, and which trees that buys.

Why: an imported ensemble in boosting order (`from_lightgbm`) pays for a group whenever the next tree
happens to split on it, however expensive the group and however little that tree adds. But the
trees' sum is order-free: any subset of trees is a predictor, and a tree can be evaluated as soon as
every group it splits on has been computed. So the order can be chosen for the budget.

The greedy rule, the tree analogue of CS-G-OMP/FR: at each step, for every distinct set M of groups
that some still-locked tree is missing, paying for M unlocks every tree whose groups are then all paid;
score the move by the validation loss decrease it buys divided by its cost, with the readout refit for
the unlocked trees, and take the best. A stage is one move; its trees are the ones it unlocks (kept in
boosting order). Per stage the readout is small — per state dimension the sum of the unlocked trees'
outputs, mapped by W_k (n_targets × P) plus b_k — refit on the validation rows: least squares with a
ridge penalty for the identity link, the GLM refit (`edgeseq.train.glm.fit.refit`, L2 logistic or
softmax) for classifiers. The readout corrects the scale and bias of a partial sum, which boosting
never trained to stand alone. The last stage, where every tree is unlocked, keeps the ensemble's own
readout, so the full budget predicts exactly what the user's model predicts.

The cost of a step is the number of moves scored times one small refit. Moves are scored cheapest
first, and the scoring stops at the first move whose cost makes even the largest conceivable gain (the
whole current loss: a loss is never below zero) no better per cost than the best move so far; every
later move costs at least as much. The chosen stages are exactly those of scoring every move.

The result is an ordinary `TreeStageModel` (trees reordered by stage), so every emitter and runtime
takes it as it takes the boosting-order import. Whether it beats boosting order is an empirical
question the benchmark answers per data set (`bench/anytime_quality.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from edgeseq.errors import InputError
# imported here, not in the refit: a BLAS library loaded inside `threadpool_limits` escapes the limit
from edgeseq.train.glm.fit import GRAD_TOL, refit
from edgeseq.forms.trees import TreeStage, TreeStageModel

MAX_MOVES_PER_STEP = 2_000  # bounds the work of one step on a huge, fragmented ensemble
# Candidate moves are scored with refits to this gradient tolerance (the loss is then within ~tol² of
# its optimum, far below the differences between moves); the chosen move is refit to the GLM default.
SCORE_TOL = 1e-3


@dataclass
class _Readout:
    W: np.ndarray  # (n_targets, P)
    b: np.ndarray  # (P,)
    loss: float


class _ReadoutFitter:
    """Refits the per-stage readout on validation rows: ridge (identity) or the GLM refit (sigmoid/softmax)."""

    def __init__(self, model: TreeStageModel, y, l2: float):
        self.link, self.l2 = model.link, float(l2)
        y = np.asarray(y)
        if self.link == "identity":
            Y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
            if Y.shape[1] != model.n_outputs:
                raise InputError(f"y has {Y.shape[1]} outputs per row, the model predicts {model.n_outputs}")
            if not np.all(np.isfinite(Y)):
                raise InputError("y contains NaN or Inf")
        else:
            classes = np.asarray(model.classes)
            index = {c: i for i, c in enumerate(classes.tolist())}
            try:
                k = np.array([index[v] for v in y.tolist()])
            except (KeyError, TypeError):
                bad = next(v for v in y.tolist() if v not in index)
                raise InputError(f"y holds label {bad!r}, which is not one of the model's classes "
                                 f"{classes.tolist()[:10]}") from None
            Y = (k == 1).astype(np.float64)[:, None] if self.link == "sigmoid" else np.eye(len(classes))[k]
        self.Y = Y

    def fit(self, Z: np.ndarray, warm: _Readout | None, tol: float | None = None) -> _Readout:
        """Readout of state Z (n, n_targets); an all-zero Z (no tree yet) gives the prior."""
        n, m = Z.shape
        P = self.Y.shape[1]
        if not Z.any():
            Z = np.zeros((n, 0))
        if self.link == "identity":
            b = self.Y.mean(axis=0)
            if Z.shape[1] == 0:
                W = np.zeros((m, P))
                return _Readout(W, b, float(np.mean((self.Y - b) ** 2)))
            zc, yc = Z - Z.mean(axis=0), self.Y - b
            A = zc.T @ zc / n + self.l2 * np.eye(m)
            W = np.linalg.solve(A, zc.T @ yc / n)
            b = b - Z.mean(axis=0) @ W
            return _Readout(W, b, float(np.mean((Z @ W + b - self.Y) ** 2)))
        W0 = np.zeros((Z.shape[1], P)) if warm is None or Z.shape[1] == 0 else warm.W
        b0 = np.zeros(P) if warm is None else warm.b
        fit = refit(Z, self.Y, Z.T @ Z / n, W0, b0, self.link, self.l2, tol=GRAD_TOL if tol is None else tol)
        W = fit.W if Z.shape[1] else np.zeros((m, P))
        return _Readout(W, fit.b, fit.loss)


def _tree_group_matrix(model: TreeStageModel) -> np.ndarray:
    """(n_trees, n_groups) bool: tree t splits on a column of group g (the validated ensemble's features)."""
    ens = model.ensemble
    owner = np.full(ens.n_features, -1)
    for g, cols in enumerate(model.group_columns):
        owner[cols] = g
    uses = np.zeros((ens.n_trees, len(model.group_columns)), dtype=bool)
    for t in range(ens.n_trees):
        uses[t, owner[ens.features_of_trees([t])]] = True
    return uses


def _set_cost(costs: np.ndarray, groups) -> float:
    """Cost of a set of groups, summed in increasing group order (so it never depends on set iteration)."""
    return float(sum(costs[g] for g in sorted(groups)))


def candidate_moves(uses: np.ndarray, locked: np.ndarray, paid: np.ndarray, costs: np.ndarray,
                    limit: int = MAX_MOVES_PER_STEP) -> list[tuple[frozenset, float, np.ndarray]]:
    """The moves of one greedy step, in scoring order, each with the locked trees it unlocks.

    A move is a distinct set M of groups that some locked tree is still missing; paying for M unlocks
    every locked tree whose missing groups all lie in M. Why a matrix: a step of a large ensemble
    (1,000 trees, hundreds of moves) asked "is tree t's missing set inside M" once per tree and move in
    Python; as one product of the (trees × groups) missing matrix with the (groups × moves) complement
    it is a single BLAS call. Moves are ordered by (cost, sorted groups) and cut at `limit`, and a
    move's trees keep the order of `locked`.

    Parameters
    ----------
    uses : array (n_trees, n_groups) of bool
        Which groups each tree splits on.
    locked : array of int
        Trees not yet unlocked (increasing).
    paid : array (n_groups,) of bool
        Groups already paid for.
    costs : array (n_groups,)
    limit : int
        At most this many moves, the cheapest.

    Returns
    -------
    list of (frozenset, float, array)
        Per move: its missing groups, their cost, and the trees it unlocks.

    Examples
    --------
    Tree 0 needs group 0, tree 1 groups 0 and 1, tree 2 group 2; group 0 is not paid yet:

    >>> import numpy as np
    >>> from edgeseq.train.trees.tree_sequencing import candidate_moves
    >>> uses = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1]], dtype=bool)
    >>> moves = candidate_moves(uses, np.arange(3), np.zeros(3, bool), np.array([1.0, 2.0, 0.5]))
    >>> [(sorted(m), c, t.tolist()) for m, c, t in moves]
    [([2], 0.5, [2]), ([0], 1.0, [0]), ([0, 1], 3.0, [0, 1])]
    """
    missing = uses[locked] & ~paid
    rows = np.unique(missing, axis=0)
    sets = [frozenset(np.flatnonzero(r).tolist()) for r in rows]
    cost = [_set_cost(costs, m) for m in sets]
    order = sorted(range(len(sets)), key=lambda j: (cost[j], sorted(sets[j])))[:limit]
    # tree i is unlocked by move j when none of its missing groups lies outside j
    outside = missing.astype(np.float64) @ (~rows[order]).T.astype(np.float64)
    return [(sets[j], cost[j], locked[outside[:, k] == 0]) for k, j in enumerate(order)]


def sequence_trees(model: TreeStageModel, X_val, y_val, *, l2: float = 1e-3, progress=None) -> TreeStageModel:
    """Re-sequence a tree-stage model by cost: groups chosen by validation-loss decrease per cost.

    Parameters
    ----------
    model : TreeStageModel
        Typically ``from_lightgbm(...)`` (any tree-stage model whose trees add into the state).
    X_val, y_val : array-like
        Validation rows (raw feature layout) and targets (values, or class labels of ``model.classes``);
        keep them apart from the rows the ensemble was trained on, or the refit readouts overfit.
    l2 : float
        Ridge penalty of the readout refits (per row, as in the GLM refit).
    progress : callable, optional
        Called with one line per chosen stage.

    Returns
    -------
    TreeStageModel
        The same trees and groups; stages in the chosen order, each with its refit readout; the last
        stage is the whole ensemble with its own readout (the original model's prediction).

    Raises
    ------
    InputError
        On rows of the wrong width, non-finite features, or labels the model does not know.

    Examples
    --------
    Group "b" is expensive and its tree adds little; boosting order pays for it first, the cost
    rule pays for the cheap, informative group "a" first:

    >>> import numpy as np
    >>> from edgeseq.train.trees.lightgbm_import import from_lightgbm_dump
    >>> from edgeseq.train.trees.tree_sequencing import sequence_trees
    >>> leaf = lambda v: {"leaf_value": v}
    >>> dump = {"max_feature_idx": 1, "objective": "regression", "tree_info": [
    ...     {"tree_structure": {"split_feature": 1, "threshold": 0.0, "left_child": leaf(-0.1), "right_child": leaf(0.1)}},
    ...     {"tree_structure": {"split_feature": 0, "threshold": 0.0, "left_child": leaf(-1.0), "right_child": leaf(1.0)}}]}
    >>> boosting = from_lightgbm_dump(dump, groups=[[0], [1]], costs=[1.0, 5.0], group_names=["a", "b"])
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 2)); y = np.sign(X[:, 0]) + 0.1 * np.sign(X[:, 1])
    >>> [boosting.group_names[s.new_groups[0]] for s in boosting.stages[1:]]
    ['b', 'a']
    >>> costly = sequence_trees(boosting, X, y)
    >>> [costly.group_names[s.new_groups[0]] for s in costly.stages[1:]], costly.cum_cost.tolist()
    (['a', 'b'], [0.0, 1.0, 6.0])
    >>> bool(np.allclose(costly.predict(X), boosting.predict(X)))   # the full budget: the same model
    True
    """
    ens = model.ensemble
    X = model.check_rows(X_val, len(model.stages) - 1)
    if X.shape[0] != len(np.asarray(y_val)):
        raise InputError(f"X_val has {X.shape[0]} rows, y_val {len(np.asarray(y_val))}")
    fitter = _ReadoutFitter(model, y_val, l2)
    outputs = ens.tree_outputs(X)  # (n, n_trees): every tree evaluated once
    into_state = np.eye(ens.n_targets)[ens.target]  # (n_trees, n_targets): tree t adds to its target

    def state_of(trees) -> np.ndarray:
        trees = np.asarray(trees, dtype=np.int64)
        return outputs[:, trees] @ into_state[trees]

    uses = _tree_group_matrix(model)
    paid = np.zeros(uses.shape[1], dtype=bool)
    constant = ~uses.any(axis=1)
    unlocked = np.flatnonzero(constant).tolist()  # constant trees join the first stage
    locked = np.flatnonzero(~constant)
    # The refits are many small products ((n × n_targets) by (n_targets × P)): a second BLAS thread
    # gains nothing on them and, on a loaded machine, spins (measured 25x slower per triangular solve
    # with two OpenBLAS threads on the shared 2-core machine); the results do not change.
    with threadpool_limits(limits=1, user_api="blas"):
        Z = state_of(unlocked)
        current = fitter.fit(np.zeros_like(Z), None)
        stages = [TreeStage((), 0.0, 0, 0, np.zeros((ens.n_targets, model.n_outputs)), current.b)]
        order: list[int] = []
        pending = list(unlocked)
        while locked.size:
            best, scored = None, 0
            moves = candidate_moves(uses, locked, paid, model.costs, MAX_MOVES_PER_STEP)
            for missing, cost, gained in moves:
                if best is not None and current.loss / cost <= best[0] * (1 + 1e-12) + 1e-300:
                    break  # a loss is never below 0: this move and every costlier one after it cannot win
                scored += 1
                trial = fitter.fit(Z + state_of(gained), current, SCORE_TOL)
                score = (current.loss - trial.loss) / cost
                if best is None or score > best[0] * (1 + 1e-12) + 1e-300:
                    best = (score, missing, gained, trial, cost)
            score, missing, gained, trial, cost = best
            trial = fitter.fit(Z + state_of(gained), trial)  # the chosen readout, to the full tolerance
            paid[list(missing)] = True
            locked = np.setdiff1d(locked, gained)
            Z = Z + state_of(gained)
            trees = sorted(pending + gained.tolist())
            pending = []
            new_groups = tuple(sorted(missing, key=lambda g: (model.costs[g], g)))
            if not locked.size:  # the whole ensemble: the model's own readout, so the full budget is unchanged
                last = model.stages[-1]
                trial = _Readout(last.W, last.b, np.nan)
            stages.append(TreeStage(new_groups, cost, len(order), len(order) + len(trees), trial.W, trial.b))
            order.extend(trees)
            current = trial
            if progress is not None:
                progress(f"tree sequencing: stage {len(stages) - 1} pays {[model.group_names[g] for g in new_groups]} "
                         f"(cost {cost:g}), unlocks {len(trees)} trees, {locked.size} still locked; "
                         f"{scored} of {len(moves)} moves scored")
    if pending:  # only constant trees: one stage that pays for nothing
        stages.append(TreeStage((), 0.0, 0, len(pending), model.stages[-1].W, model.stages[-1].b))
        order.extend(pending)
    return TreeStageModel(model.group_names, model.group_columns, model.costs, ens.select(order), tuple(stages),
                          model.link, model.output_names, classes=model.classes)


__all__ = ["sequence_trees"]
