"""Cost-aware stagewise boosting: greedy group sequencing with LightGBM trees as the learner per stage.

Stage k starts from the raw scores F of stages 0..k-1 (stage 0: the prior). For every group g not
yet paid, LightGBM continues boosting (``init_score`` = F) on the columns of the paid groups plus
g, with early stopping on the validation rows; the candidate's score is the validation loss it
removes per unit of cost, ``(loss before - loss after) / c_g`` (the gain-per-cost rule of CS-G-FR,
measured on held-out rows). The best candidate's trees are committed as the stage; the search
stops when every group is paid or no candidate lowers the validation loss.

Probe, then grow (``probe_rounds``, default `PROBE_ROUNDS`): growing every candidate to its
early-stopped length costs a full LightGBM fit per candidate and stage (on the MNIST bank, 48
candidates of about 2.5 CPU-s each at stage 1 alone). Each candidate is therefore scored by a
*probe*: ``probe_rounds`` rounds from the current scores on the same columns (paid plus its own),
its score the same gain per cost with the lowest validation loss among those rounds. Only the best
candidate is then grown to its early-stopped length, and that grown loss must clear the
`min_gain` floor; when it does not, the next candidates in score order (a positive score, at most
`FLOOR_TRIES` more) are grown in turn and the first that clears it is the stage. Gain per cost
favours a very cheap group with a tiny gain: on the MNIST bank one such group below the floor
ended the search after ten stages, and the last stage on all groups then paid the 38 left at once.
The probe reads the paid columns too, so a group whose signal is an interaction with a paid group
(x0·x2 with group 0 paid) is seen by its probe. ``probe_rounds=None`` is the full
search (every candidate grown in full).

Candidates probed at an earlier stage are screened by that probe (``probe_top``, default
`PROBE_TOP`): only the ``probe_top`` with the highest latest probe score are probed again; groups
never probed are always probed, so every group is probed at stage 1 and a data set with at most
``probe_top`` + 1 groups is never screened. Paying for more groups usually lowers every group's
gain, so a group far down at its last probe rarely comes first later; the exception is a group
whose signal is an interaction with a group paid since (its gain rises), which the screen sees only
if its last score kept it among the top ``probe_top``. (A lazy rule, stopping once a fresh score
beats the next older one, missed exactly that case: x0·x2 with group 0 just paid.)
``probe_top=None`` probes every candidate at every stage.

The probes train on a seeded sample of at most ``probe_rows`` (default `PROBE_ROWS`) of the
training rows, scored on all the validation rows; the chosen candidate is grown, and a restart
fitted, on all training rows. A probe only ranks the candidates, and with many groups the probes
are most of a stage's time (on the MNIST bank, 8 or more probes of ten rounds per stage against one
grown candidate). Data sets with at most ``probe_rows`` training rows (breast cancer and digits in
`bench/tree_orders.py`) probe on all of them, as before; so does a dask X (the rows stay on the
workers, where ``lightgbm.dask`` trains), whose probes may therefore rank otherwise than in memory.

For the chosen candidate (from stage 2 on) the search also boosts afresh from the prior on every
column paid with it and takes those trees instead when their validation loss is lower (a
*restart*; the stage's floor is checked on the better of the two): continued boosting can only fit what
the earlier stages left of the training rows' residuals, and after a few stages that is little,
so a newly paid group may add nothing on training rows although it would on new ones. A restart is
a LightGBM fit on every paid column, as long as the rest of a stage together; when it lost at a
stage (the continued trees validated better), the next stage tries none, unless its continued
trees do not clear the stage floor, so a stopping decision never depends on the skip. A skipped
restart changes the result only when it would have won, and on the MNIST bank restarts lost at
several stages, often two in a row. Finally LightGBM adds
rounds on all paid groups, appended to the last stage when they lower the validation loss; and
when groups are left unpaid, a last stage boosts on *all* groups and pays the remaining ones when
that lowers the validation loss: a group that buys little on its own per unit cost may still buy
accuracy at full budget, and a stage at the total cost does not change the curve below it.

Column sampling (``max_tree_columns``, default `TREE_COLUMNS`): a boosting round costs time in
proportion to the columns it reads, and every fit of the search (probe, grow, restart) reads all
paid columns, so once a wide group is paid every later fit slows down with it (on the MNIST bank,
paying a 936-column group took the rounds from 0.1 to about 0.8 CPU-s each, and one stage to 160
CPU-s). A fit on more columns than the cap therefore grows each tree on that many of them drawn at
random (LightGBM's ``feature_fraction`` = cap / columns, seeded by ``random_state``), as random
forests and LightGBM's own column sampling do; a fit on at most the cap reads all of them, so
data sets with no more columns than the cap (breast cancer, digits, the interactions problem)
fit exactly as without it. `replay_stages` samples alike (the final rounds appended to a last
stage are regrown in one fit with it, so they draw other columns than the search's second fit
did). ``max_tree_columns=None``: no sampling.

The committed trees form a tree stage (`edgeseq.forms.trees`): the state is the sum of the trees,
the readout is the identity plus the prior, and every tree reads only columns of groups paid by
its stage, which `TreeStageModel` checks on construction and the exporter proves again. A
restarted stage opens a state block of its own (P more state dimensions) and its readout, and the
later stages' that continue from it, read only that block.

"Never below linear": a tree stage's state holds only tree outputs, so a linear prefix score
cannot be added to it without a new stage kind. The estimators therefore compare the boosted
stages' anytime curve with the linear anytime model's (fitted on the same rows, with the same
groups and costs), as the area under the step curve over budgets in [0, total cost] of a per-row
score (the negative Brier score for classes, the negative squared error for values). Each row has
its own area under its own two curves, so the comparison is paired: the trees are kept only when
their mean area exceeds the linear model's (by more than `COMPARE_Z` standard errors of the paired
difference, 0 by default); otherwise the estimator *is* that linear model (``model_kind_ == "linear"``; it is
then refitted on all rows and exports as linear prefixes), unless the two areas tie within a standard
error and the trees' score with every group paid is clearly the better (`comparison_verdict`: the
area gives the stage at the total cost no weight, so a label only the last groups reveal together
ties the areas at chance). A refit after a comparison half (below)
takes the penalty and basis the compared fit chose (`reused_choice`) instead of
choosing again: on the MNIST bank that choice was most of a linear fit's time, and a second one on
more rows made the refit the most expensive part of the whole fit. With ``refit=True`` kept trees are
regrown on all rows too (`replay_stages`: the groups and round counts the search chose, no early
stopping; the default, since more rows for the same trees scored better on test rows of data sets
nobody tuned on, `bench/boosting_refit.py`).

The comparison is scored on rows the search did not fit. Below `CV_MAX_ROWS` training rows it is
cross-validated: every row is scored by the two models fitted on the other folds (`CV_FOLDS`; the
trees are the search's stages regrown there with `replay_stages`, the linear model is fitted
afresh), and the search keeps all held-out rows; a comparison half of a small data set is too
few rows to tell the models apart (on breast cancer it held 50). Because the regrown stages'
groups and round counts were chosen on some of the scored rows, the trees must win there by more
than `CV_COMPARE_Z` standard errors. From `CV_MAX_ROWS` rows on, the held-out rows (``validation_fraction`` of all
rows) are split in two halves (stratified for classes): the *search* half chooses the groups and
stops the rounds, the *comparison* half only scores the two curves. Scoring the trees on the rows
that chose their groups and stopped their rounds would be optimistic (those rows were fitted by
the search), so the trees would be kept where the linear model is better on new rows. The
compared classifier chooses its penalty and basis on the search half, where the trees' rounds
were stopped (`AnytimeClassifier.fit`'s ``validation``; one GLM fit per penalty, where its
5-fold choice had been about two fifths of a whole fit's time on the MNIST bank); the compared
regressor cross-validates on its training rows as a direct fit does (from statistics, about
one fit's cost). With fewer
than `MIN_COMPARE_ROWS` held-out rows no half is large enough to score anything, and both roles
share the held-out rows.

A row-chunked dask X with fewer than `CV_MAX_ROWS` rows is computed and fitted in memory (so it
takes the same choices); a larger one trains on the active ``distributed`` client: the same seeded split (only the
labels are gathered to draw it), the training rows kept on the workers, every candidate grown by
``lightgbm.dask`` from ``init_score`` as a dask array of the current raw scores, and cut where
LightGBM's early stopping would stop (`early_stopped_rounds`, replayed on the held-out rows, which
are gathered). LightGBM's data-parallel learner does not grow the in-memory trees bit for bit.
"""

from __future__ import annotations

import numbers
import warnings
from itertools import combinations
from dataclasses import dataclass, field, replace

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import validate_data

from edgeseq.errors import InputError
from edgeseq.train.trees.afr import _split
from edgeseq.train.distributed.stats import active_client, check_dask_X, is_dask_array
from edgeseq.train.base import (_wrap_validation, check_table_columns, classification_targets, fit_feature_names,
                                fitted_attribute)
from edgeseq.forms.groups import GroupSpec, check_groups
from edgeseq.train.trees.lightgbm_import import _read_tree
from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel

TASKS = ("regression", "binary", "multiclass")
PROBE_ROUNDS = 10  # boosting rounds of a candidate's probe (see the module notes); None: the full search
# the probes train on a seeded sample of at most this many training rows (all of them below it); the chosen
# candidate is grown, and restarts are fitted, on all rows (module notes). None: all rows
PROBE_ROWS = 1000
# when the best candidate by gain per cost does not clear the stage floor, at most this many next ones
# (in score order, with a positive score) are grown before the stage falls back to pairs or the search stops
FLOOR_TRIES = 3
PROBE_TOP = 8  # at most this many candidates probed at an earlier stage are probed again per stage; None: all
# above this many columns each tree samples this many of them (LightGBM's feature_fraction; see the module
# notes): a round's cost grows with its columns, and on the MNIST bank the paid columns pass a thousand
TREE_COLUMNS = 128
MAX_PAIR_GROUPS = 8  # pairs are tried among this many cheapest unpaid groups (at most 28 candidates)
# the trees are kept when their mean per-row area beats the linear one by more than this many standard
# errors of the paired difference; 0, 0.5 and 1 were tried on validation rows of the benchmark's splits
# (never its test rows): 1 and 0.5 turned down trees that were the better model there (digits), 0 did not
COMPARE_Z = 0.0
# when the two areas tie (the trees' mean per-row area no more than this many standard errors below the
# linear model's), the trees are kept if their full-budget per-row score beats the linear model's by more
# than FULL_BUDGET_Z standard errors (`comparison_verdict`): a second test, so it asks for a clear margin
AREA_TIE_Z = 1.0
FULL_BUDGET_Z = 2.0
MIN_COMPARE_ROWS = 20  # held-out rows below which the linear comparison shares the search's rows
# below this many training rows the comparison with the linear model is cross-validated (`CV_FOLDS` folds of
# all rows, the search's stages regrown on each fold's other rows) and the search keeps every held-out row:
# on breast cancer (398 rows) a comparison half holds 50 rows, too few to tell the two models apart
CV_MAX_ROWS = 3000
CV_FOLDS = 3
# the cross-validated comparison's margin, in standard errors: the regrown stages' groups and round counts
# were chosen on some of the rows it scores, which flatters the trees. On breast cancer splits of the
# benchmark's training part (validated on rows of it, the test rows unused) no margin kept trees that were
# worse there; on digits and the interactions problem the trees win by several standard errors
CV_COMPARE_Z = 1.0
_METRIC = {"regression": "l2", "binary": "binary_logloss", "multiclass": "multi_logloss"}


def validation_loss(task: str, F: np.ndarray, y: np.ndarray) -> float:
    """Mean loss of raw scores F (n, P) on targets y: squared error, or log-loss of the sigmoid/softmax.

    The same losses LightGBM minimises (``l2``, ``binary_logloss``, ``multi_logloss``), computed
    here in float64 so candidate scores do not depend on LightGBM's metric rounding.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.stagewise_boosting import validation_loss
    >>> round(validation_loss("binary", np.zeros((2, 1)), np.array([0, 1])), 6)  # log 2
    0.693147
    >>> validation_loss("regression", np.array([[1.0], [3.0]]), np.array([0.0, 3.0]))
    0.5
    """
    if task == "regression":
        return float(np.mean((y - F[:, 0]) ** 2))
    if task == "binary":
        z = F[:, 0]
        return float(np.mean(np.logaddexp(0.0, z) - y * z))
    m = F.max(axis=1, keepdims=True)
    lse = (m[:, 0] + np.log(np.exp(F - m).sum(axis=1)))
    return float(np.mean(lse - F[np.arange(F.shape[0]), y.astype(np.int64)]))


def prior_scores(task: str, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Stage 0's raw score (P,): the mean, the log-odds or the log class frequencies of y.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.stagewise_boosting import prior_scores
    >>> prior_scores("binary", np.array([0, 1, 1, 1]), 2).round(4).tolist()
    [1.0986]
    """
    if task == "regression":
        return np.array([float(np.mean(y))])
    freq = np.bincount(y.astype(np.int64), minlength=n_classes) / y.size
    freq = np.clip(freq, 1e-12, None)
    if task == "binary":
        return np.array([float(np.log(freq[1] / freq[0]))])
    return np.log(freq)


@dataclass
class BoostingTrace:
    """What the greedy search saw: per stage, the candidates' scores and the choice.

    ``scores[k]`` maps each candidate probed at stage k+1 (a tuple of groups: one, or two when no single
    group lowered the loss) to its validation loss decrease per unit cost there (of its probe); ``chosen[k]`` is the
    committed candidate; ``rounds[k]`` the boosting rounds kept;
    ``loss`` the validation loss after stage 0, 1, ... (and after the final rounds, if any);
    ``final_stage_rounds`` the rounds of the last stage that pays every group left unpaid (0: none);
    ``restarts`` the stages (1, 2, ...) whose trees were boosted afresh from the prior (`boost_stages`);
    ``passed_over[k]`` how many candidates ranked above the committed one were grown at that stage and
    did not clear the floor (`boost_stages`' ``floor_tries``).

    Examples
    --------
    >>> from edgeseq.train.trees.stagewise_boosting import BoostingTrace
    >>> BoostingTrace(loss=[0.69]).chosen
    []
    """

    scores: list = field(default_factory=list)
    chosen: list = field(default_factory=list)
    rounds: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    final_rounds: int = 0
    final_stage_rounds: int = 0
    restarts: list = field(default_factory=list)
    passed_over: list = field(default_factory=list)


def _lgb_params(task: str, n_classes: int, params: dict, n_cols: int | None = None) -> dict:
    """LightGBM's parameters for a fit on `n_cols` columns.

    ``params["max_tree_columns"]`` (default `TREE_COLUMNS`; None: no cap) is edgeseq's, not LightGBM's:
    above that many columns each tree samples that many of them (``feature_fraction``), see the
    module notes.

    Examples
    --------
    >>> from edgeseq.train.trees.stagewise_boosting import _lgb_params
    >>> _lgb_params("binary", 2, {"max_tree_columns": 100}, 400)["feature_fraction"]
    0.25
    >>> "feature_fraction" in _lgb_params("binary", 2, {"max_tree_columns": 100}, 100)
    False
    """
    params = dict(params)
    cap = params.pop("max_tree_columns", TREE_COLUMNS)
    out = {"objective": task, "metric": _METRIC[task], "verbose": -1, "deterministic": True,
           "force_row_wise": True, **params}
    if task == "multiclass":
        out["num_class"] = n_classes
    if cap is not None and n_cols is not None and n_cols > cap:
        out["feature_fraction"] = cap / n_cols
    return out


def _continue_boosting(task, n_classes, params, Xf, yf, Ff, Xv, yv, Fv, cols, max_rounds, stopping_rounds):
    """Boost from raw scores (Ff, Fv) on columns `cols`; (booster, rounds kept, val increment, loss after).

    A dask `Xf` trains through ``lightgbm.dask`` on the active client (`_continue_boosting_dask`).
    """
    if is_dask_array(Xf):
        return _continue_boosting_dask(task, n_classes, params, Xf, yf, Ff, Xv, yv, Fv, cols, max_rounds,
                                       stopping_rounds)
    import lightgbm as lgb

    init_f, init_v = Ff.ravel(order="F"), Fv.ravel(order="F")  # LightGBM's class-major layout
    full = _lgb_params(task, n_classes, params, len(cols))
    dtrain = lgb.Dataset(Xf[:, cols], yf, init_score=init_f, params=full)
    dval = lgb.Dataset(Xv[:, cols], yv, init_score=init_v, reference=dtrain, params=full)
    booster = lgb.train(full, dtrain, num_boost_round=max_rounds,
                        valid_sets=[dval], callbacks=[lgb.early_stopping(stopping_rounds, verbose=False)])
    rounds = int(booster.best_iteration) or booster.current_iteration()
    inc_v = np.asarray(booster.predict(Xv[:, cols], raw_score=True, num_iteration=rounds)).reshape(len(yv), -1)
    return booster, rounds, inc_v, validation_loss(task, Fv + inc_v, yv)


def lightgbm_dask():
    """LightGBM's Dask module, or one clear `InputError` naming what is missing.

    Examples
    --------
    >>> from edgeseq.train.trees.stagewise_boosting import lightgbm_dask
    >>> lightgbm_dask().__name__
    'lightgbm.dask'
    """
    try:
        import dask.array  # noqa: F401  (lightgbm.dask imports these only when it trains)
        import distributed  # noqa: F401
        import pandas  # noqa: F401
        import lightgbm.dask as lgb_dask
    except ImportError as exc:
        raise InputError(f"boosting on a dask array needs LightGBM's Dask module, with dask, distributed and "
                         f"pandas ({exc.name or 'one'} is missing): pip install 'edgeseq[trees,dask]'") from exc
    return lgb_dask


def early_stopped_rounds(task: str, booster, Xv, yv, Fv, stopping_rounds: int) -> int:
    """The round count LightGBM's early stopping would keep, replayed on a booster trained to the end.

    Round by round, the validation loss of ``Fv`` plus the first r rounds is compared with the best so
    far; the replay stops `stopping_rounds` rounds after the last strict improvement and keeps the
    best (the rule of LightGBM's `early_stopping` callback). The Dask path needs it because its
    training runs a fixed number of rounds; the held-out rows are scored here, one round at a time.

    Examples
    --------
    >>> import numpy as np, lightgbm as lgb
    >>> from edgeseq.train.trees.stagewise_boosting import early_stopped_rounds
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 2)); y = X[:, 0] + rng.normal(size=200)
    >>> params = {"verbose": -1, "num_threads": 1, "learning_rate": 0.3, "metric": "l2"}
    >>> ref = lgb.train(params, lgb.Dataset(X[:150], y[:150]), 100, valid_sets=[lgb.Dataset(X[150:], y[150:])],
    ...                 callbacks=[lgb.early_stopping(5, verbose=False)])
    >>> full = lgb.train(params, lgb.Dataset(X[:150], y[:150]), 100)
    >>> early_stopped_rounds("regression", full, X[150:], y[150:], np.zeros((50, 1)), 5) == ref.best_iteration
    True
    """
    F = np.array(Fv, dtype=np.float64)
    best, best_r = np.inf, 0
    for r in range(booster.current_iteration()):
        F = F + np.asarray(booster.predict(Xv, raw_score=True, start_iteration=r, num_iteration=1)).reshape(F.shape)
        loss = validation_loss(task, F, yv)
        if loss < best:
            best, best_r = loss, r + 1
        elif r + 1 - best_r >= stopping_rounds:
            break
    return best_r or booster.current_iteration()


def _continue_boosting_dask(task, n_classes, params, Xf, yf, Ff, Xv, yv, Fv, cols, max_rounds, stopping_rounds):
    """`_continue_boosting` on row-chunked dask arrays (Xf, yf, Ff): ``lightgbm.dask`` on the active client.

    LightGBM's distributed (data-parallel) learner grows `max_rounds` rounds where the partitions
    live, from ``init_score = Ff``; the rounds are then cut where early stopping would have stopped,
    scored on the held-out rows (Xv, yv, Fv), which this process holds.
    """
    booster = _dask_booster(task, n_classes, params, Xf, yf, Ff, cols, max_rounds)
    rounds = early_stopped_rounds(task, booster, Xv[:, cols], yv, Fv, stopping_rounds)
    inc_v = np.asarray(booster.predict(Xv[:, cols], raw_score=True, num_iteration=rounds)).reshape(len(yv), -1)
    return booster, rounds, inc_v, validation_loss(task, Fv + inc_v, yv)


def _dask_booster(task, n_classes, params, X, y, F, cols, rounds: int):
    """`rounds` rounds of ``lightgbm.dask`` on the columns `cols` of the row-chunked dask X (labels y,
    ``init_score`` F, both chunked like X's rows) on the active client; the fitted booster.

    The regressor wrapper passes the objective through unchanged (the classifier's would re-encode
    the class indices and choose its own objective); only the booster is kept. The search's
    candidates and `replay_stages` both train through it.
    """
    lgb_dask = lightgbm_dask()
    full = _lgb_params(task, n_classes, params, len(cols))
    full.pop("num_threads", None)  # lightgbm.dask gives each worker its own thread count
    model = lgb_dask.DaskLGBMRegressor(n_estimators=int(rounds), client=_client(), **full)
    with warnings.catch_warnings():  # it warns that it sets the threads per worker itself, once per fit
        warnings.filterwarnings("ignore", message="Parameter (n_jobs|num_threads) will be ignored")
        model.fit(X[:, cols], y, init_score=F[:, 0] if F.shape[1] == 1 else F)
    return model.booster_


def _client():
    """The active ``distributed`` client, or one clear `InputError`: ``lightgbm.dask`` trains only on one."""
    client = active_client(None)
    if client is None:
        raise InputError("boosting on a dask array trains through lightgbm.dask, which needs an active "
                         "distributed client: start one first (distributed.Client(...))")
    return client


def _start_scores(prior: np.ndarray, X):
    """Stage 0's raw scores (n, P) for the rows of X: numpy, or a dask array chunked like X's rows."""
    if is_dask_array(X):
        import dask.array as da
        return da.zeros((X.shape[0], prior.size), chunks=(X.chunks[0], prior.size)) + prior
    return np.tile(prior, (X.shape[0], 1))


def _raw_increment(booster, X, cols, rounds: int, F):
    """F plus the booster's first `rounds` rounds on the rows of X (partition by partition for dask)."""
    if is_dask_array(X):
        P = F.shape[1]
        inc = X[:, cols].map_blocks(
            lambda b: np.asarray(booster.predict(b, raw_score=True, num_iteration=rounds)).reshape(len(b), P),
            dtype=np.float64, chunks=(X.chunks[0], (P,)), meta=np.empty((0, P)))
        return (F + inc).persist()  # every candidate of the next stage starts from these scores
    return F + np.asarray(booster.predict(X[:, cols], raw_score=True, num_iteration=rounds)).reshape(F.shape)


def boost_stages(X_fit, y_fit, X_val, y_val, spec: GroupSpec, task: str, *, n_classes: int = 1,
                 params: dict | None = None, max_rounds: int = 100, stopping_rounds: int = 10,
                 final_rounds: bool = True, min_gain: float = 1e-4, restart: bool = True,
                 probe_rounds: int | None = PROBE_ROUNDS, probe_top: int | None = PROBE_TOP,
                 probe_rows: int | None = PROBE_ROWS, floor_tries: int = FLOOR_TRIES, progress=None):
    """The functional core: the greedy stagewise boosting search, returning its stages.

    Parameters
    ----------
    X_fit, y_fit : ndarray
        Rows the trees are trained on (y: values, or class indices 0..n_classes-1).
    X_val, y_val : ndarray
        Rows the candidates are scored and the rounds early-stopped on.
    spec : GroupSpec
        The feature groups and their costs (`check_groups`).
    task : {"regression", "binary", "multiclass"}
        LightGBM objective, which fixes the loss and the link.
    n_classes : int, default=1
        Number of classes (multiclass).
    params : dict or None, default=None
        Further LightGBM parameters (learning rate, leaves, threads, seed); its key
        ``"max_tree_columns"`` (default `TREE_COLUMNS`, None: no cap) is edgeseq's: a fit on more
        columns grows each tree on that many of them, drawn at random (see the module notes).
    max_rounds : int, default=100
        Boosting rounds per candidate at most (early stopping usually keeps fewer).
    stopping_rounds : int, default=10
        Early-stopping patience on the validation loss.
    final_rounds : bool, default=True
        Add rounds on all paid groups at the end (appended to the last stage), then, if groups are
        left unpaid, a last stage of rounds on all groups that pays for them, each kept only when it
        lowers the validation loss.
    min_gain : float, default=1e-4
        A candidate must lower the validation loss by more than this fraction of stage 0's (the
        prior's) loss to be committed, so a group that buys nothing measurable is not paid for.
    restart : bool, default=True
        For each chosen candidate from stage 2 on (and for a last stage on all groups), also boost
        afresh from the prior on every column paid with it, and take those trees instead when their
        validation loss is lower by more than the `min_gain` floor (`trace.restarts`); the stage's
        own floor is then checked on the better of the two. Continued boosting fits the
        residuals the earlier stages left on the *training* rows, and once those are near zero (a
        few stages of 15-leaf trees memorise a thousand rows) a newly paid group has nothing left
        to fit there, however much it would add on new rows; trees grown from the prior see it
        afresh. A restarted stage's trees write to a state block of their own and its readout reads
        only that block (`stage_model`), so the stages before it are unchanged. After a stage whose
        restart lost, the next stage tries none (unless its continued trees do not clear the
        floor): see the module notes.
    probe_rounds : int or None, default=PROBE_ROUNDS
        Rounds of each candidate's probe (paid columns plus its own); the best is then grown,
        early-stopped. ``None``: every candidate is grown in full.
    probe_top : int or None, default=PROBE_TOP
        Of the candidates probed at an earlier stage, only this many with the highest latest probe
        score are probed again at each stage. ``None``: all.
    probe_rows : int or None, default=PROBE_ROWS
        The probes train on a seeded sample (`probe_subsample`, seeded by ``params["seed"]``) of
        this many of the rows of `X_fit` when it has more; ``None``: all rows. A dask `X_fit` is
        probed on all its rows.
    floor_tries : int, default=FLOOR_TRIES
        When the best candidate by score, grown (and restarted), does not lower the validation
        loss by more than the `min_gain` floor, the next ones in score order with a positive
        score are grown in turn, at most this many, and the first that clears the floor is the
        stage (``trace.passed_over``). Gain per cost favours a cheap group with a tiny gain; on
        the MNIST bank one such group below the floor stopped the search after ten stages, and
        the last stage then paid the 38 groups left at once. ``0``: only the best is grown.
    progress : callable or None, default=None
        Receives one line of text per stage.

    Returns
    -------
    stages : list of (tuple of int, list of dict)
        Per committed stage: the groups it newly pays for and the LightGBM tree dumps (feature
        indices already mapped to the columns of X).
    prior : ndarray of shape (P,)
        Stage 0's raw score.
    trace : BoostingTrace
        The candidates' scores and choices, for inspection and tests.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.groups import check_groups
    >>> from edgeseq.train.trees.stagewise_boosting import boost_stages
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(300, 2)); y = (X[:, 1] > 0).astype(int)
    >>> spec = check_groups([[0], [1]], [1.0, 2.0], None, 2)
    >>> stages, prior, trace = boost_stages(X[:200], y[:200], X[200:], y[200:], spec, "binary",
    ...                                     n_classes=2, params={"num_threads": 1, "learning_rate": 0.3})
    >>> [groups for groups, _ in stages], trace.chosen
    ([(1,)], [(1,)])
    """
    params = dict(params or {})
    probing = probe_rounds is not None
    # the probes' training rows: all, or a seeded sample of `probe_rows` of them (the module notes)
    sub = probe_subsample(X_fit.shape[0], probe_rows, int(params.get("seed", 0))) \
        if probing and not is_dask_array(X_fit) else None
    Xp, yp = (X_fit, y_fit) if sub is None else (X_fit[sub], np.asarray(y_fit)[sub])
    probe = int(probe_rounds) if probing else max_rounds
    prior = prior_scores(task, np.asarray(y_fit), n_classes)  # a dask y: its n labels are gathered
    Ff = _start_scores(prior, X_fit)
    Fv = np.tile(prior, (X_val.shape[0], 1))
    trace = BoostingTrace(loss=[validation_loss(task, Fv, y_val)])
    floor = min_gain * max(abs(trace.loss[0]), 1e-12)
    paid: list[int] = []
    stages: list = []
    J = len(spec.columns)
    last: dict = {}  # each candidate's latest probe score
    lost = False  # the previous stage tried a restart and kept its continued trees
    while len(paid) < J:
        before = trace.loss[-1]
        unpaid = [g for g in range(J) if g not in paid]
        # single groups first; when none pays (an interaction across groups, invisible to any one of
        # them), pairs of the cheapest unpaid groups, scored by their joint gain per joint cost
        for candidates in ([(g,) for g in unpaid],
                           [p for p in combinations(sorted(unpaid, key=lambda g: (spec.costs[g], g))[:MAX_PAIR_GROUPS],
                                                    2)]):
            scores, fits, reprobed = {}, {}, 0
            for cand in _probe_order(candidates, last, probe_top if probing else None):
                if probing and probe_top is not None and cand in last:  # the screen (module notes)
                    if reprobed >= probe_top:
                        break
                    reprobed += 1
                cols = np.sort(np.concatenate([spec.columns[h] for h in paid + list(cand)]))
                booster, rounds, inc_v, after = _continue_boosting(task, n_classes, params, Xp, yp,
                                                                   Ff if sub is None else Ff[sub], X_val, y_val, Fv,
                                                                   cols, probe, stopping_rounds)
                scores[cand] = (before - after) / float(sum(spec.costs[g] for g in cand))
                fits[cand] = (booster, rounds, inc_v, after, cols)
            last.update(scores)
            # by score, highest first (ties: the lowest groups); the best is grown first, and when it
            # does not clear the floor the next ones with a positive score, at most `floor_tries` more
            ranked = sorted(scores, key=lambda c: (-scores[c], c))
            ranked = ranked[:1] + [c for c in ranked[1:1 + floor_tries] if scores[c] > 0]
            passed = False
            for failed, best in enumerate(ranked):
                if probing:  # grow the candidate to its early-stopped length
                    cols = fits[best][4]
                    fits[best] = (*_continue_boosting(task, n_classes, params, X_fit, y_fit, Ff, X_val, y_val, Fv,
                                                      cols, max_rounds, stopping_rounds), cols)
                booster, rounds, inc_v, after, cols = fits[best]
                base_f, base_v, fresh = Ff, Fv, False
                # stage 1 starts from the prior anyway; after a stage whose restart lost, one stage goes
                # without (`restart`), unless its continued trees do not clear the floor
                tried = restart and stages and (not lost or before - after <= floor)
                if tried:
                    # tried before the floor: once the training residuals are fitted, continued boosting
                    # may not clear it although trees grown afresh on the same columns would
                    again = _restarted(task, n_classes, params, prior, X_fit, y_fit, X_val, y_val, cols,
                                       max_rounds, stopping_rounds, after, floor)
                    if again is not None:
                        booster, rounds, inc_v, after, base_f, base_v = again
                        fresh = True
                if before - after > floor:
                    passed = True
                    break
            if passed:
                break
        else:
            best = None
        if best is None:
            if progress is not None:
                progress(f"stage {len(stages) + 1}: no group lowers the validation loss; stopping")
            break
        trace.scores.append(scores)
        trace.passed_over.append(failed)
        lost = bool(tried) and not fresh
        if fresh:
            trace.restarts.append(len(stages) + 1)
        trees = _trees(booster, rounds, cols)
        stages.append((best, trees))
        paid.extend(best)
        Ff = _raw_increment(booster, X_fit, cols, rounds, base_f)
        Fv = base_v + inc_v
        trace.chosen.append(best)
        trace.rounds.append(rounds)
        trace.loss.append(after)
        if progress is not None:
            progress(f"stage {len(stages)}: {' + '.join(spec.names[g] for g in best)} ({rounds} rounds"
                     f"{', afresh from the prior' if fresh else ''}, validation "
                     f"loss {before:.4g} -> {after:.4g}, {len(scores)} candidates"
                     f"{f', {failed} better per cost below the floor' if failed else ''})")
    if final_rounds and stages:
        cols = np.sort(np.concatenate([spec.columns[h] for h in paid]))
        booster, rounds, inc_v, after = _continue_boosting(task, n_classes, params, X_fit, y_fit, Ff, X_val, y_val,
                                                           Fv, cols, max_rounds, stopping_rounds)
        if trace.loss[-1] - after > floor:
            stages[-1] = (stages[-1][0], stages[-1][1] + _trees(booster, rounds, cols))
            trace.final_rounds = rounds
            trace.loss.append(after)
            if progress is not None:
                progress(f"final rounds on all paid groups: {rounds} rounds, validation loss {after:.4g}")
            Ff = _raw_increment(booster, X_fit, cols, rounds, Ff)
            Fv = Fv + inc_v
    rest = tuple(g for g in range(J) if g not in paid)
    if final_rounds and rest:
        # the search stops when no group pays for itself per unit cost; boosting on every group may
        # still lower the loss at full budget, which a stage at the total cost buys without changing
        # the curve at any smaller budget
        before = trace.loss[-1]
        cols = np.sort(np.concatenate([spec.columns[h] for h in range(J)]))
        booster, rounds, inc_v, after = _continue_boosting(task, n_classes, params, X_fit, y_fit, Ff, X_val, y_val,
                                                           Fv, cols, max_rounds, stopping_rounds)
        again = _restarted(task, n_classes, params, prior, X_fit, y_fit, X_val, y_val, cols, max_rounds,
                           stopping_rounds, after, floor) if restart else None
        if again is not None:
            booster, rounds, inc_v, after = again[:4]
        if before - after > floor:
            stages.append((rest, _trees(booster, rounds, cols)))
            if again is not None:
                trace.restarts.append(len(stages))
            trace.final_stage_rounds = rounds
            trace.loss.append(after)
            if progress is not None:
                progress(f"final stage on all groups (pays {len(rest)} more): {rounds} rounds, validation loss "
                         f"{before:.4g} -> {after:.4g}")
    return stages, prior, trace


def probe_subsample(n: int, probe_rows: int | None, seed: int) -> np.ndarray | None:
    """The rows (sorted indices) of a seeded sample of `probe_rows` of n training rows, or None for all.

    Examples
    --------
    >>> from edgeseq.train.trees.stagewise_boosting import probe_subsample
    >>> probe_subsample(10, 4, 0).size, probe_subsample(10, 10, 0), probe_subsample(10, None, 0)
    (4, None, None)
    """
    if probe_rows is None or n <= probe_rows:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, int(probe_rows), replace=False))


def _probe_order(candidates, last: dict, probe_top) -> list:
    """Candidates in probing order: never probed first (in their given order), then by their latest
    probe score, highest first; with no screen (``probe_top=None`` or no scores), the given order.

    Examples
    --------
    >>> from edgeseq.train.trees.stagewise_boosting import _probe_order
    >>> _probe_order([(0,), (1,), (2,)], {(0,): 0.1, (1,): 0.3}, 8)
    [(2,), (1,), (0,)]
    """
    if probe_top is None or not last:
        return list(candidates)
    new = [c for c in candidates if c not in last]
    return new + sorted((c for c in candidates if c in last), key=lambda c: -last[c])


def _trees(booster, rounds: int, cols: np.ndarray) -> list[dict]:
    """The first `rounds` rounds' tree dumps, split features mapped from the column subset to X's columns."""
    info = booster.dump_model(num_iteration=rounds)["tree_info"]

    def remap(node):
        if isinstance(node, dict) and "split_feature" in node:
            node["split_feature"] = int(cols[int(node["split_feature"])])
            remap(node.get("left_child"))
            remap(node.get("right_child"))

    for t in info:
        remap(t["tree_structure"])
    return info


def _restarted(task, n_classes, params, prior, X_fit, y_fit, X_val, y_val, cols, max_rounds, stopping_rounds,
               after: float, floor: float):
    """Boost afresh from the prior on `cols`; (booster, rounds, val increment, loss, start scores fit, val),
    or None unless its validation loss is below `after` by more than `floor`."""
    start_f, start_v = _start_scores(prior, X_fit), np.tile(prior, (X_val.shape[0], 1))
    booster, rounds, inc_v, loss = _continue_boosting(task, n_classes, params, X_fit, y_fit, start_f, X_val, y_val,
                                                      start_v, cols, max_rounds, stopping_rounds)
    if after - loss > floor:
        return booster, rounds, inc_v, loss, start_f, start_v
    return None


def chains(n_stages: int, restarts) -> list[int]:
    """The state block of stages 1..n_stages: a restarted stage opens the next block, others continue one.

    Examples
    --------
    >>> from edgeseq.train.trees.stagewise_boosting import chains
    >>> chains(4, [3])
    [0, 0, 1, 1]
    """
    out, c = [], 0
    for k in range(1, n_stages + 1):
        c += k in set(restarts) and k > 1
        out.append(c)
    return out


def replay_stages(X, y, spec: GroupSpec, task: str, stages, *, n_classes: int = 1, params: dict | None = None,
                  restarts=()):
    """Regrow `boost_stages`' stages on other rows: the same groups per stage, the same rounds.

    Stage k's trees read the columns of the groups paid by stages 1..k and continue from the raw
    scores of the stages before it, exactly as in the search, but with no candidates and no early
    stopping: the search chose the groups and the round counts on held-out rows, and this fit uses
    every row for the trees (as the linear model is refitted on all rows once chosen). A stage in
    `restarts` (the search's ``trace.restarts``) is regrown from the prior, as the search grew it.
    A row-chunked dask X (with y a dask array chunked like its rows) is regrown on the active
    client through ``lightgbm.dask``, its raw scores updated partition by partition, as the search
    grows its candidates there.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.groups import check_groups
    >>> from edgeseq.train.trees.stagewise_boosting import boost_stages, replay_stages
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(300, 2)); y = X[:, 0] + (X[:, 1] > 0)
    >>> spec = check_groups([[0], [1]], [1.0, 2.0], None, 2)
    >>> stages, _, _ = boost_stages(X[:200], y[:200], X[200:], y[200:], spec, "regression", params={"num_threads": 1})
    >>> again = replay_stages(X, y, spec, "regression", stages, params={"num_threads": 1})
    >>> [g for g, _ in again] == [g for g, _ in stages], [len(t) for _, t in again] == [len(t) for _, t in stages]
    (True, True)
    """
    import lightgbm as lgb

    params = dict(params or {})
    P = n_classes if task == "multiclass" else 1
    dask = is_dask_array(X)
    prior = prior_scores(task, np.asarray(y.compute() if is_dask_array(y) else y), n_classes)
    F = _start_scores(prior, X)
    paid: list[int] = []
    out = []
    for k, (groups, trees) in enumerate(stages, start=1):
        paid.extend(groups)
        cols = np.sort(np.concatenate([spec.columns[h] for h in paid]))
        rounds = len(trees) // P
        if k in restarts:
            F = _start_scores(prior, X)
        if dask:
            booster = _dask_booster(task, n_classes, params, X, y, F, cols, rounds)
        else:
            full = _lgb_params(task, n_classes, params, len(cols))  # the search's column sampling too
            booster = lgb.train(full, lgb.Dataset(X[:, cols], y, init_score=F.ravel(order="F"), params=full),
                                num_boost_round=rounds)
        rounds = booster.current_iteration()  # fewer when no split is left to make
        out.append((tuple(groups), _trees(booster, rounds, cols)))
        F = _raw_increment(booster, X, cols, rounds, F)
    return out


def stage_model(stages, prior: np.ndarray, spec: GroupSpec, n_features: int, task: str,
                output_names, restarts=()) -> TreeStageModel:
    """Assemble `boost_stages`' result into a validated `TreeStageModel` (state = sum of trees).

    Every stage's readout is ``W = I, b = prior``: the state is LightGBM's raw score minus the prior.
    A multiclass round holds one tree per class, so tree t adds to state dimension t mod P. With
    `restarts` (stages boosted afresh from the prior) the state has one block of P per chain of
    stages (`chains`); a stage's trees add to its chain's block and its readout reads only that block.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.groups import check_groups
    >>> from edgeseq.train.trees.stagewise_boosting import boost_stages, stage_model
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(300, 2)); y = X[:, 0] + (X[:, 1] > 0)
    >>> spec = check_groups([[0], [1]], [1.0, 2.0], None, 2)
    >>> stages, prior, _ = boost_stages(X[:200], y[:200], X[200:], y[200:], spec, "regression",
    ...                                 params={"num_threads": 1})
    >>> model = stage_model(stages, prior, spec, 2, "regression", ("y",))
    >>> model.cum_cost.tolist()
    [0.0, 1.0, 3.0]
    """
    P = prior.size
    arrays = {k: [] for k in ("feature", "threshold", "left", "right", "value")}
    owner = np.full(n_features, -1)
    for g, cols in enumerate(spec.columns):
        owner[cols] = g
    roots, targets, bounds = [], [], [0]
    block = chains(len(stages), restarts)
    n_state = P * (max(block) + 1 if block else 1)
    t = 0
    for k, (_, trees) in enumerate(stages):
        for i, info in enumerate(trees):
            roots.append(len(arrays["feature"]))
            targets.append(block[k] * P + i % P)
            _read_tree(info["tree_structure"], t, arrays, owner, n_features)
            t += 1
        bounds.append(t)
    ens = TreeEnsemble(**{k: np.array(v) for k, v in arrays.items()}, roots=np.array(roots, np.int64),
                       target=np.array(targets, np.int64), n_features=n_features, n_targets=n_state)
    out = [TreeStage((), 0.0, 0, 0, np.zeros((n_state, P)), prior)]  # no state yet: the readout is the prior alone
    for k, (groups, _) in enumerate(stages):
        W = np.zeros((n_state, P))
        W[block[k] * P:(block[k] + 1) * P] = np.eye(P)
        out.append(TreeStage(tuple(groups), float(sum(spec.costs[g] for g in groups)), bounds[k], bounds[k + 1],
                             W, prior))
    link = {"regression": "identity", "binary": "sigmoid", "multiclass": "softmax"}[task]
    return TreeStageModel(spec.names, spec.columns, spec.costs, ens, tuple(out), link, tuple(output_names))


def step_area(cum_cost, values, horizon: float) -> float:
    """Mean of the step curve (the last affordable stage's value) over budgets uniform in [0, horizon].

    The step timeliness of `edgeseq.metrics.timeliness`, on a bare (costs, values) pair.

    Examples
    --------
    >>> from edgeseq.train.trees.stagewise_boosting import step_area
    >>> step_area([0.0, 1.0, 3.0], [0.5, 0.8, 0.9], 4.0)  # (0.5 * 1 + 0.8 * 2 + 0.9 * 1) / 4
    0.75
    """
    from edgeseq.metrics.curves import AnytimeCurve
    from edgeseq.metrics.timeliness import timeliness

    curve = AnytimeCurve(costs=cum_cost, values=values, group_names=[""] * (len(cum_cost) - 1))
    return timeliness(curve, horizon, kind="step")


def step_weights(cum_cost, horizon: float) -> np.ndarray:
    """Weight of each stage in `step_area` (the share of budgets in [0, horizon] it answers).

    `step_area` is linear in the stage values, so ``step_area(c, v, h) == step_weights(c, h) @ v``;
    applied to per-row values it gives each row's area, which the paired comparison needs.

    Examples
    --------
    >>> from edgeseq.train.trees.stagewise_boosting import step_weights
    >>> step_weights([0.0, 1.0, 3.0], 4.0).tolist()
    [0.25, 0.5, 0.25]
    """
    K = len(cum_cost)
    return np.array([step_area(cum_cost, np.eye(K)[k], horizon) for k in range(K)])


def keep_trees(rows_trees: np.ndarray, rows_linear: np.ndarray, z: float | None = None) -> bool:
    """Keep the trees only when their mean per-row area exceeds the linear model's by more than `z`
    standard errors of the paired difference (default `COMPARE_Z`: any margin; a tie goes to linear).

    The comparison is paired (the same rows under both curves), so its noise is that of the per-row
    difference, and `comparison_` reports it: on a comparison slice of a few dozen rows a gap
    within one standard error is common. A larger `z` (the one-standard-error rule of
    cross-validation at 1) prefers the simpler model more; on the benchmark's validation rows it
    turned down trees that were the better model, so the default asks only for a larger mean.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.stagewise_boosting import keep_trees
    >>> rng = np.random.default_rng(0); lin = rng.normal(size=50); noisy = lin + rng.normal(size=50) + 0.1
    >>> keep_trees(lin + 0.5, lin), keep_trees(lin, lin), keep_trees(noisy, lin), keep_trees(noisy, lin, z=1.0)
    (True, False, True, False)
    """
    d = _paired(rows_trees, rows_linear)
    return bool(d["mean_difference"] > (COMPARE_Z if z is None else z) * d["standard_error"])


def _paired(rows_a, rows_b) -> dict:
    """Mean of the per-row difference a - b, its standard error and the number of rows."""
    d = np.asarray(rows_a, dtype=np.float64) - np.asarray(rows_b, dtype=np.float64)
    return {"mean_difference": float(np.mean(d)), "rows": int(d.size),
            "standard_error": float(np.std(d, ddof=1) / np.sqrt(d.size)) if d.size > 1 else 0.0}


def comparison_verdict(area_trees, area_linear, full_trees, full_linear, z: float | None = None) -> str | None:
    """Why the trees are kept ("area" or "full budget"), or None when the linear model is.

    First the anytime curves (`keep_trees` with margin `z`). When the trees do not win there but
    tie (their mean per-row area is within `AREA_TIE_Z` standard errors below the linear model's),
    the full budget decides: the trees are kept when their per-row score with every group paid
    beats the linear model's by more than `FULL_BUDGET_Z` standard errors of that paired
    difference. The step curve's area over [0, total cost] gives the stage at the total cost no
    weight, so a label that only the last groups together reveal (an interaction across three
    groups: no stage before the last is better than chance, for either model) tied the two areas
    and kept a linear model at chance that the trees beat at full budget (`bench/boosting_refit.py`,
    the XOR across groups). A curve no worse within noise and a clearly better full-budget
    prediction: the trees, not the linear model, are the better anytime model there.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.stagewise_boosting import comparison_verdict
    >>> lin = np.random.default_rng(0).normal(size=200); tie = lin + np.resize([0.1, -0.1], 200) - 0.001
    >>> comparison_verdict(lin + 0.5, lin, lin, lin), comparison_verdict(tie, lin, lin + 1.0, lin)
    ('area', 'full budget')
    >>> comparison_verdict(tie, lin, lin, lin), comparison_verdict(lin - 1.0, lin, lin + 1.0, lin)
    (None, None)
    """
    if keep_trees(area_trees, area_linear, z):
        return "area"
    area = _paired(area_trees, area_linear)
    if area["mean_difference"] < -AREA_TIE_Z * area["standard_error"]:
        return None  # the linear curve is better: its full budget cannot buy the trees back
    full = _paired(full_trees, full_linear)
    return "full budget" if full["mean_difference"] > FULL_BUDGET_Z * full["standard_error"] else None


def _row_brier(proba: np.ndarray, y_idx: np.ndarray) -> np.ndarray:
    """Per-row negative Brier score: minus the squared distance of the probabilities to the one-hot class.

    The classifiers compare the two models' curves of this. Like the log-loss it is a proper score
    (it rewards calibrated probabilities, and it moves smoothly where accuracy moves in steps of
    1/n), but it is bounded: one confidently wrong row costs at most 2, where under the log-loss it
    costs up to 34 nats and on a comparison slice of a hundred rows outweighs a better accuracy on
    all the others (trees early-stopped on other rows are often confidently wrong on a few).

    Examples
    --------
    >>> import numpy as np
    >>> _row_brier(np.array([[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]]), np.array([0, 1, 1])).tolist()
    [-0.5, -0.0, -2.0]
    """
    onehot = np.zeros_like(proba, dtype=np.float64)
    onehot[np.arange(y_idx.size), y_idx] = 1.0
    return -np.sum((proba - onehot) ** 2, axis=1)


def _cv_folds(y, stratify: bool, seed: int):
    """`CV_FOLDS` (train, test) index pairs over all rows (stratified for classes), or None when a class
    has fewer than two rows (no fold split would hold it on both sides).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.trees.stagewise_boosting import _cv_folds
    >>> [te.size for _, te in _cv_folds(np.arange(30) % 2, True, 0)]
    [10, 10, 10]
    >>> _cv_folds(np.array([0, 0, 0, 1]), True, 0) is None
    True
    """
    from sklearn.model_selection import KFold, StratifiedKFold

    y = np.asarray(y)
    if stratify:
        smallest = int(np.bincount(y.astype(np.int64)).min(initial=y.size, where=np.bincount(y.astype(np.int64)) > 0))
        if smallest < 2:
            return None
        cv = StratifiedKFold(min(CV_FOLDS, smallest), shuffle=True, random_state=seed)
    else:
        if y.size < 2 * CV_FOLDS:
            return None
        cv = KFold(CV_FOLDS, shuffle=True, random_state=seed)
    return list(cv.split(np.zeros((y.size, 1)), y))


def _dask_rows(X, rows: np.ndarray):
    """The rows of a dask X in the order given (the in-memory split's order), kept on the workers."""
    return X[rows].persist()


def _dask_like(y: np.ndarray, X):
    """A numpy y as a dask array chunked like X's rows (``lightgbm.dask`` pairs their partitions)."""
    import dask.array as da
    return da.from_array(y, chunks=(X.chunks[0],))


def dask_targets(est, X, y, min_samples: int = 10) -> tuple:
    """Check a row-chunked dask X before any pass; (X with whole rows per chunk, y gathered as numpy).

    The labels are one value per row, so they are gathered; the rows stay where they are. The
    Dask module, the client and the parameters the Dask path lacks are checked first, so a missing
    piece fails in one line before any data moves.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from edgeseq import AnytimeBoostingRegressor
    >>> from edgeseq.train.trees.stagewise_boosting import dask_targets
    >>> dask_targets(AnytimeBoostingRegressor(), da.zeros((20, 2), chunks=5), np.zeros(20))
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: boosting on a dask array trains through lightgbm.dask, which needs an active distributed client: start one first (distributed.Client(...))
    """
    lightgbm_dask()
    _client()
    n, d = check_dask_X(X)
    if n < min_samples:
        raise InputError(f"n_samples={n}: boosting holds out validation rows and needs at least {min_samples}")
    est.n_features_in_ = d
    if hasattr(est, "feature_names_in_"):
        del est.feature_names_in_
    y = np.asarray(y.compute() if is_dask_array(y) else y)
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(f"y must hold one value per row of X ({n}), got shape {y.shape}")
    return X.rechunk({1: -1}), y


def reused_choice(lin, n_lin: int, n: int) -> tuple[float, bool]:
    """(l2, whiten) for refitting the linear model `lin`, fitted on `n_lin` rows, on `n` rows without choosing again.

    `lin` chose its penalty and basis by cross-validation on its own training rows (``l2="auto"``,
    ``whiten="auto"``); the refit on all n rows takes the same basis and the same penalty in *sum*
    form, the convention of the cross-validated choice itself (`edgeseq.train.linear.auto`: a fit on
    m rows uses λ·n_lin/m in the mean-form objective, as scikit-learn's ``C`` is held across fits), so
    ``l2 = lin.l2_ · n_lin / n``. On the MNIST bank the choice was most of a linear fit, and the refit
    on more rows was the most expensive one.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.train.trees.stagewise_boosting import reused_choice
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(300, 4)); y = (X[:, 0] > 0).astype(int)
    >>> lin = AnytimeClassifier([[0, 1], [2, 3]], [1.0, 1.0]).fit(X[:200], y[:200])
    >>> l2, whiten = reused_choice(lin, 200, 300)
    >>> bool(np.isclose(l2 * 300, lin.l2_ * 200)), whiten == lin.whiten_
    (True, True)
    """
    return float(lin.l2_) * n_lin / n, bool(lin.whiten_)


# ---------------------------------------------------------------------- estimators
def _check_int(name, v, lo, hi=None):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo or (hi is not None and v > hi):
        raise InputError(f"{name} must be an integer >= {lo}" + (f" and <= {hi}" if hi else "") + f", got {v!r}")


class _AnytimeBoostingBase(BaseEstimator):
    """Parameters, fit and prediction shared by the classifier and the regressor."""

    def __init__(self, groups=None, costs=None, *, group_names=None, learning_rate=0.1, num_leaves=15,
                 max_rounds=200, stopping_rounds=10, min_child_samples=20, validation_fraction=0.25,
                 compare_linear=True, n_jobs=None, random_state=None, feature_names=None, refit=True,
                 probe_rounds=PROBE_ROUNDS, probe_top=PROBE_TOP, max_tree_columns=TREE_COLUMNS,
                 probe_rows=PROBE_ROWS):
        self.groups = groups
        self.costs = costs
        self.group_names = group_names
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.max_rounds = max_rounds
        self.stopping_rounds = stopping_rounds
        self.min_child_samples = min_child_samples
        self.validation_fraction = validation_fraction
        self.compare_linear = compare_linear
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.feature_names = feature_names
        self.refit = refit
        self.probe_rounds = probe_rounds
        self.probe_top = probe_top
        self.max_tree_columns = max_tree_columns
        self.probe_rows = probe_rows

    def _check_params(self) -> None:
        _check_int("num_leaves", self.num_leaves, 2, 131072)
        _check_int("max_rounds", self.max_rounds, 1, 100_000)
        _check_int("stopping_rounds", self.stopping_rounds, 1)
        _check_int("min_child_samples", self.min_child_samples, 1)
        lr, vf = self.learning_rate, self.validation_fraction
        if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not np.isfinite(lr) or lr <= 0:
            raise InputError(f"learning_rate must be a finite number > 0, got {lr!r}")
        if isinstance(vf, bool) or not isinstance(vf, numbers.Real) or not 0.05 <= vf <= 0.5:
            raise InputError(f"validation_fraction must be a number in [0.05, 0.5], got {vf!r}")
        if not isinstance(self.compare_linear, (bool, np.bool_)):
            raise InputError(f"compare_linear must be True or False, got {self.compare_linear!r}")
        if not isinstance(self.refit, (bool, np.bool_)):
            raise InputError(f"refit must be True or False, got {self.refit!r}")
        if self.probe_rounds is not None:
            _check_int("probe_rounds", self.probe_rounds, 1, 100_000)
        if self.probe_top is not None:
            _check_int("probe_top", self.probe_top, 1)
        if self.max_tree_columns is not None:
            _check_int("max_tree_columns", self.max_tree_columns, 1)
        if self.probe_rows is not None:
            _check_int("probe_rows", self.probe_rows, 10)
        if self.n_jobs is not None:
            _check_int("n_jobs", self.n_jobs, -1)
        if self.random_state is not None:
            _check_int("random_state", self.random_state, 0, 2**31 - 1)

    def _lgb(self) -> dict:
        threads = 0 if self.n_jobs in (None, -1) else int(self.n_jobs)  # 0: OpenMP's default
        return {"learning_rate": float(self.learning_rate), "num_leaves": int(self.num_leaves),
                "min_child_samples": int(self.min_child_samples), "num_threads": threads,
                "seed": 0 if self.random_state is None else int(self.random_state),
                "max_tree_columns": None if self.max_tree_columns is None else int(self.max_tree_columns)}

    def _fit(self, X, y_idx, task, n_classes, output_names, stratify, progress):
        names = fit_feature_names(self, X.shape[1])
        spec = check_groups(self.groups, self.costs, self.group_names, X.shape[1], feature_names=names)
        self._names = names
        used = np.concatenate(spec.columns)
        dask = is_dask_array(X)
        if dask:
            import dask.array as da
            finite = bool(da.isfinite(X[:, used]).all().compute())
        else:
            finite = bool(np.all(np.isfinite(X[:, used])))
        if not finite:
            raise InputError("X contains NaN or Inf in columns of the groups; clean or impute them first")
        if dask and X.shape[0] < CV_MAX_ROWS:  # small enough to hold: trained in memory, with the same choices
            X, dask = np.asarray(X.compute()), False
        seed = 0 if self.random_state is None else int(self.random_state)
        idx = np.arange(X.shape[0])
        if stratify:  # stratified when every class allows it (AFR's split rule)
            i_fit, i_val = _split(idx, y_idx, self.validation_fraction, seed)
        else:
            i_fit, i_val = train_test_split(idx, test_size=self.validation_fraction, random_state=seed)
        i_cmp = i_val  # the rows the trees-versus-linear comparison is scored on (see the module notes)
        folds = _cv_folds(y_idx, stratify, seed) if self.compare_linear and X.shape[0] < CV_MAX_ROWS else None
        if self.compare_linear and folds is None and i_val.size >= MIN_COMPARE_ROWS:
            i_val, i_cmp = _split(i_val, y_idx[i_val], 0.5, seed) if stratify else \
                train_test_split(i_val, test_size=0.5, random_state=seed)
        # a dask X: the trees' rows stay on the workers (with their labels chunked alike); the held-out
        # rows, which score every round of every candidate, are gathered here
        X_fit = _dask_rows(X, i_fit) if dask else X[i_fit]
        X_val, X_cmp = (np.asarray(X[i].compute()) if dask else X[i] for i in (i_val, i_cmp))
        y_fit = _dask_like(y_idx[i_fit], X_fit) if dask else y_idx[i_fit]
        stages, prior, trace = boost_stages(
            X_fit, y_fit, X_val, y_idx[i_val], spec, task, n_classes=n_classes, params=self._lgb(),
            max_rounds=int(self.max_rounds), stopping_rounds=int(self.stopping_rounds),
            probe_rounds=None if self.probe_rounds is None else int(self.probe_rounds),
            probe_top=None if self.probe_top is None else int(self.probe_top),
            probe_rows=None if self.probe_rows is None else int(self.probe_rows), progress=progress)
        trees = replace(stage_model(stages, prior, spec, X.shape[1], task, output_names, trace.restarts),
                        feature_names=names)
        if task != "regression":  # the stage model carries its labels: a saved model is evaluated alone
            trees = replace(trees, classes=self.classes_)
        # plain containers with string keys: what a model file may hold besides edgeseq models and arrays
        self.trace_ = {"scores": [[[list(c), float(v)] for c, v in d.items()] for d in trace.scores],
                       "chosen": [list(c) for c in trace.chosen], "rounds": list(trace.rounds),
                       "loss": list(trace.loss), "final_rounds": trace.final_rounds,
                       "final_stage_rounds": trace.final_stage_rounds, "restarts": list(trace.restarts),
                       "passed_over": list(trace.passed_over)}
        kind, lin = "trees", None
        horizon = float(np.sum(spec.costs))
        if folds is not None:
            area_t, area_l, full_t, full_l = self._cv_areas(X, y_idx, spec, task, n_classes, output_names, stages,
                                                            trace.restarts, folds, horizon)
        else:
            rows_t = self._curve(trees.cum_cost, trees.staged_decision(X_cmp), trees, y_idx[i_cmp])
            self.validation_curve_trees_ = [float(np.mean(r)) for r in rows_t]
        if self.compare_linear and folds is None:
            lin = self._compared_linear(spec, X_fit, y_idx[i_fit], X_val, y_idx[i_val])
            rows_l = self._linear_curve(lin, X_cmp, y_idx[i_cmp])
            self.validation_curve_linear_ = [float(np.mean(r)) for r in rows_l]
            # each row's area under its own step curve; the two areas are compared row by row
            area_t = step_weights(trees.cum_cost, horizon) @ np.array(rows_t)
            area_l = step_weights(lin.cum_cost_, horizon) @ np.array(rows_l)
            full_t, full_l = rows_t[-1], rows_l[-1]  # the last stages: what a budget of the total cost buys
        if self.compare_linear:
            if progress is not None:
                progress(f"validation area over [0, {horizon:g}]: trees {np.mean(area_t):.4f}, linear "
                         f"{np.mean(area_l):.4f}")
            z = CV_COMPARE_Z if folds is not None else COMPARE_Z
            self.comparison_ = {**_paired(area_t, area_l),
                                **{f"full_budget_{k}": v for k, v in _paired(full_t, full_l).items() if k != "rows"}}
            kept_by = comparison_verdict(area_t, area_l, full_t, full_l, z)
            self.comparison_["kept_by"] = kept_by
            if kept_by is None:  # the linear model unless the trees are better
                kind = "linear"
            elif kept_by == "full budget" and progress is not None:
                progress("the two curves tie within a standard error; the trees are kept for their full-budget "
                         f"score ({np.mean(full_t):.4f} against {np.mean(full_l):.4f})")
        if kind == "trees" and self.refit:
            # as the linear model is refitted on all rows, the kept trees are regrown on all rows with
            # the groups and round counts the search chose
            if progress is not None:
                progress(f"trees regrown on all {X.shape[0]:,} rows with the search's groups and round counts")
            stages = replay_stages(X, _dask_like(y_idx, X) if dask else y_idx, spec, task, stages,
                                   n_classes=n_classes, params=self._lgb(), restarts=trace.restarts)
            trees = replace(stage_model(stages, prior_scores(task, y_idx, n_classes), spec, X.shape[1], task,
                                        output_names, trace.restarts), feature_names=names)
            if task != "regression":
                trees = replace(trees, classes=self.classes_)
        self.model_kind_ = kind
        self.group_names_ = list(spec.names)
        if kind == "linear":
            # the compared model's penalty and basis, not a second cross-validation (`reused_choice`)
            choice = () if lin is None else reused_choice(lin, X_fit.shape[0], X.shape[0])
            if progress is not None and choice:
                progress(f"linear model refitted on all {X.shape[0]:,} rows with the compared fit's choice: "
                         f"l2={choice[0]:.3g}, whiten={choice[1]}")
            self.linear_ = self._linear_estimator(spec, *choice).fit(X, self._y_for_linear(y_idx))
            if choice and "l2_choice" in lin.fitted_sequence_.provenance:
                self.linear_.fitted_sequence_.provenance["l2_choice"] = (
                    f"{lin.fitted_sequence_.provenance['l2_choice']}; fitted on the {X_fit.shape[0]} rows the "
                    f"boosting search trained on; the same basis and sum-form penalty refitted on all {X.shape[0]} rows")
            self.fitted_sequence_ = self.linear_.fitted_sequence_
            self.cum_cost_ = self.linear_.cum_cost_
            self.stage_groups_ = [[]] + [[int(g)] for g in self.linear_.sequence_]
        else:
            self.stage_model_ = trees
            self.cum_cost_ = trees.cum_cost
            self.stage_groups_ = [list(s.new_groups) for s in trees.stages]
            self.n_trees_ = trees.ensemble.n_trees
        return self

    def _y_for_linear(self, y_idx):
        return y_idx

    def _compared_linear(self, spec, X_fit, y_fit, X_val, y_val):
        """The linear model compared with the trees when the comparison has rows of its own (no folds):
        fitted on the search's training rows, its "auto" penalty and basis chosen as a direct fit
        chooses them (the regressor's cross-validation reads only statistics: about one fit's cost)."""
        return self._linear_estimator(spec).fit(X_fit, self._y_for_linear(y_fit))

    def _cv_areas(self, X, y_idx, spec, task, n_classes, output_names, stages, restarts, folds, horizon):
        """Per-row areas and full-budget scores (trees, linear, trees, linear) on every row, each scored by
        models fitted on the other folds.

        The trees are the search's stages regrown on the fold's other rows (`replay_stages`: the same
        groups and round counts), the linear model is fitted there afresh. Sets the two
        ``validation_curve_*_`` attributes (mean per stage over all rows; a linear fold with fewer
        stages repeats its last).
        """
        n = X.shape[0]
        area_t, area_l, full_t, full_l = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
        curve_t, curve_l = [], []
        for tr, te in folds:
            again = replay_stages(X[tr], y_idx[tr], spec, task, stages, n_classes=n_classes, params=self._lgb(),
                                  restarts=restarts)
            model = stage_model(again, prior_scores(task, y_idx[tr], n_classes), spec, X.shape[1], task, output_names,
                                restarts)
            rows_t = np.array(self._curve(model.cum_cost, model.staged_decision(X[te]), model, y_idx[te]))
            lin = self._linear_estimator(spec).fit(X[tr], self._y_for_linear(y_idx[tr]))
            rows_l = np.array(self._linear_curve(lin, X[te], y_idx[te]))
            area_t[te] = step_weights(model.cum_cost, horizon) @ rows_t
            area_l[te] = step_weights(lin.cum_cost_, horizon) @ rows_l
            full_t[te], full_l[te] = rows_t[-1], rows_l[-1]
            curve_t.append(rows_t)
            curve_l.append(rows_l)
        self.validation_curve_trees_ = np.concatenate(curve_t, axis=1).mean(axis=1).tolist()
        K = max(c.shape[0] for c in curve_l)
        curve_l = [np.vstack([c, np.repeat(c[-1:], K - c.shape[0], axis=0)]) for c in curve_l]
        self.validation_curve_linear_ = np.concatenate(curve_l, axis=1).mean(axis=1).tolist()
        return area_t, area_l, full_t, full_l

    # ------------------------------------------------------------------ prediction helpers
    def _model(self):
        kind = fitted_attribute(self, "model_kind_")
        return self.linear_ if kind == "linear" else self.stage_model_

    def _rows(self, X, model: TreeStageModel, k: int) -> np.ndarray:
        check_table_columns(X, model.feature_names)
        X = _wrap_validation(lambda: validate_data(self, X, accept_sparse=False, ensure_all_finite=False,
                                                   dtype=(np.float64, np.float32), reset=False))
        return model.check_rows(X, k)

    def _tree_decision(self, X, budget):
        model = self._model()
        k = model.resolve_stage(budget, None)
        return model, model.decision(self._rows(X, model, k), k)

    def _staged_tree_decision(self, X):
        model = self._model()
        X = self._rows(X, model, len(model.stages) - 1)
        for z in model.staged_decision(X):
            yield model, z

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


class AnytimeBoostingClassifier(ClassifierMixin, _AnytimeBoostingBase):
    """Anytime classifier whose stages are LightGBM trees chosen group by group, by validation gain per cost.

    Each stage pays for one more feature group: the one whose boosting rounds (continued from the
    earlier stages' scores, early-stopped on held-out rows) lower the validation log-loss most per
    unit of its cost. Unlike ordering an ensemble trained with every group free, every tree here
    was grown knowing which groups it may read, so cheap stages get trees that use cheap groups
    well. A stage may instead be boosted afresh from the prior on every paid group when that scores
    better on the held-out rows (``trace_["restarts"]``). Unless the trees' area under their curve
    of the negative Brier score over budgets in [0, total cost] is larger than the linear anytime
    model's (`AnytimeClassifier`), on rows the search did not fit (cross-validated below 3,000
    rows; from 3,000 rows on, the linear model's penalty and basis are chosen on the held-out rows
    that stopped the trees' rounds), the fitted estimator is that linear model
    (``model_kind_ == "linear"``). Trees that do not win on the area but are within one standard
    error of it are kept all the same when their score with every group paid is clearly better
    (`comparison_verdict`).

    Parameters
    ----------
    groups : list of array-like of int or None, default=None
        Column indices of each feature group (``None``: one group per column).
    costs : array-like of float or None, default=None
        Extraction cost of each group (``None``: unit costs).
    group_names : list of str or None, default=None
        Names of the groups (default ``g0``, ``g1``, ...).
    learning_rate : float, default=0.1
        LightGBM's shrinkage.
    num_leaves : int, default=15
        Leaves per tree.
    max_rounds : int, default=200
        Boosting rounds per candidate stage at most; early stopping usually keeps fewer.
    stopping_rounds : int, default=10
        Early-stopping patience (rounds without a lower validation loss).
    min_child_samples : int, default=20
        LightGBM's smallest leaf.
    validation_fraction : float, default=0.25
        Share of the rows held out (stratified) to score the candidates and stop the rounds. From
        3,000 rows on, with ``compare_linear``, only half of them do; the other half only compare
        the trees with the linear model, so that comparison is not scored on rows the search
        fitted. Below 3,000 rows the comparison is cross-validated instead (see the module notes).
    compare_linear : bool, default=True
        Compare with the linear anytime model on rows the search did not fit, and keep it when its
        curve is better.
    n_jobs : int or None, default=None
        LightGBM threads (``None`` or ``-1``: OpenMP's default).
    random_state : int or None, default=None
        Seed of the validation split and of LightGBM.
    feature_names : list of str or None, default=None
        Names of the raw columns, recorded in the model and its export so that tables are matched by
        column name; default the columns of a data frame given to `fit`, else none.
    refit : bool, default=True
        Regrow kept trees on all training rows (the groups and round counts the search chose, no
        early stopping), as a kept linear model is refitted on all rows: the trees then learn from
        the held-out rows too. On the data sets of `bench/boosting_refit.py` (none of them tuned
        on) it raised the test timeliness on most splits where trees were kept, for one more
        LightGBM fit per stage of the kept trees; a dask X is regrown through ``lightgbm.dask``. ``False`` keeps the
        search's own trees, grown on the training rows only. Either way the trees export and
        verify (float32 and int16 C) alike.
    probe_rounds : int or None, default=10
        Boosting rounds of each candidate's probe (on the paid columns plus its own, as the full
        fit); only the best candidate is then grown with early stopping (see the module notes).
        ``None``: the full search, every candidate grown to its early-stopped length (slow with many
        groups or wide ones).
    probe_top : int or None, default=8
        Of the candidates probed at an earlier stage, only this many, those with the highest latest
        probe score, are probed again at each stage; never-probed groups are always probed.
        ``None``: every candidate is probed at every stage.
    probe_rows : int or None, default=1000
        The probes train on a seeded sample of this many training rows (all rows when there are
        no more); the chosen candidate is then grown, and a restart fitted, on all of them. A
        probe only ranks the candidates, and on the MNIST bank the probes were most of a stage's
        time. ``None``: the probes train on every row.
    max_tree_columns : int or None, default=128
        A LightGBM fit of the search on more columns than this grows each tree on this many of
        them, drawn at random (``feature_fraction``): a round's cost grows with its columns, and
        on a bank with wide groups (the MNIST bank's paid columns pass a thousand) the fits on all
        paid columns dominated the fit time. Data with at most this many columns in the groups
        fit exactly as without it. ``None``: every tree reads every column of its fit.

    Attributes
    ----------
    model_kind_ : {"trees", "linear"}
        Which model the validation comparison kept.
    stage_model_ : TreeStageModel
        The tree stages (when ``model_kind_ == "trees"``); exported like any tree model.
    fitted_sequence_ : FittedSequence
        The linear prefixes (when ``model_kind_ == "linear"``).
    cum_cost_ : ndarray of shape (n_stages,)
        Cumulative cost of stage 0, 1, ....
    stage_groups_ : list of list of int
        Groups each stage adds.
    trace_ : dict
        `BoostingTrace`'s fields as plain lists: ``scores`` per stage a list of [groups, score]
        pairs, ``chosen`` the committed groups per stage, ``rounds``, ``loss``, ``final_rounds``,
        ``final_stage_rounds`` (rounds of a last stage on all groups that pays the unpaid ones),
        ``restarts`` (the stages 1, 2, ... boosted afresh from the prior), ``passed_over`` (per
        stage, the candidates ranked above the committed one that did not clear the stage floor).
    validation_curve_trees_, validation_curve_linear_ : list of float
        Mean negative Brier score (minus the squared distance of the class probabilities to the
        one-hot true class) per stage of the boosted stages and of the linear model on the
        comparison rows (below 3,000 rows: on every row, each scored by the models of the other
        cross-validation folds): the curves the choice compared.
    comparison_ : dict
        ``mean_difference`` (trees minus linear, of the per-row areas under those curves),
        ``standard_error`` of it and the comparison ``rows``; ``full_budget_mean_difference`` and
        ``full_budget_standard_error``, the same of the per-row scores with every group paid; and
        ``kept_by``: ``"area"``, ``"full budget"`` (the areas tied) or ``None`` (the linear model
        was kept). Absent with ``compare_linear=False``.
    classes_ : ndarray
        The class labels.

    Examples
    --------
    Group "b" holds the signal, as an interaction no linear model sees; it is paid first:

    >>> import numpy as np
    >>> from edgeseq import AnytimeBoostingClassifier
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(400, 4))
    >>> y = (X[:, 2] * X[:, 3] > 0).astype(int)
    >>> clf = AnytimeBoostingClassifier([[0, 1], [2, 3]], [1.0, 2.0], n_jobs=1, random_state=0).fit(X, y)
    >>> clf.model_kind_, clf.stage_groups_[1]
    ('trees', [1])
    >>> clf.score(X, y) > 0.9
    True
    """

    def fit(self, X, y, *, progress=None):
        """Run the greedy stagewise search, then compare with the linear model on validation.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or dask.array.Array
            At least 10 rows; columns of the groups must be finite. A row-chunked dask array trains
            through ``lightgbm.dask`` on the active ``distributed`` client (see the module notes).
        y : array-like of shape (n_samples,) or dask.array.Array
            Class labels, at least two classes.
        progress : callable or None, default=None
            Receives one line of text per stage.

        Returns
        -------
        AnytimeBoostingClassifier
            self.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeBoostingClassifier
        >>> AnytimeBoostingClassifier().fit(np.zeros((5, 2)), [0, 1, 0, 1, 0])
        Traceback (most recent call last):
        ...
        edgeseq.errors.InputError: n_samples=5: boosting holds out validation rows and needs at least 10
        """
        self._check_params()
        if is_dask_array(X):
            from sklearn.utils.multiclass import check_classification_targets

            X, y = dask_targets(self, X, y)
            _wrap_validation(lambda: check_classification_targets(y))
            classes, k = np.unique(y, return_inverse=True)
            if classes.size < 2:
                raise InputError(f"y has a single class ({classes[0]!r}); a classifier needs at least 2 classes")
        else:
            X, y, classes, k = classification_targets(
                self, X, y, min_samples=10, why="boosting holds out validation rows and needs at least 10")
        self.classes_ = classes
        task = "binary" if classes.size == 2 else "multiclass"
        return self._fit(X, k, task, classes.size, tuple(str(c) for c in classes), True, progress)

    def _linear_estimator(self, spec, l2="auto", whiten="auto"):
        from edgeseq.train.linear.classifier import AnytimeClassifier
        return AnytimeClassifier(groups=[c.tolist() for c in spec.columns], costs=spec.costs.tolist(),
                                 group_names=list(spec.names), feature_names=self._names, l2=l2, whiten=whiten)

    def _curve(self, cum_cost, staged, model, y_idx):
        return [_row_brier(model.apply_link(z), y_idx) for z in staged]

    def _y_for_linear(self, y_idx):
        # the linear model learns the user's labels, so a saved "linear" choice carries the same
        # classes_ as this estimator (class indices would not match them)
        return self.classes_[y_idx]

    def _linear_curve(self, lin, X, y_idx):
        return [_row_brier(p, y_idx) for p in lin.staged_predict_proba(X)]

    def _compared_linear(self, spec, X_fit, y_fit, X_val, y_val):
        """As the base's, but the penalty and basis are chosen on the rows that stopped the search's
        rounds (`AnytimeClassifier.fit`'s ``validation``): one GLM fit per candidate penalty instead of
        five folds' fits, which on the MNIST bank were most of the whole fit's time (module notes)."""
        return self._linear_estimator(spec).fit(X_fit, self._y_for_linear(y_fit),
                                                validation=(X_val, self._y_for_linear(y_val)))

    def predict_proba(self, X, budget=None):
        """Class probabilities (n, n_classes) of the last stage within `budget` (default: the last stage).

        Columns of groups that stage does not need may be NaN (not extracted).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeBoostingClassifier
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = AnytimeBoostingClassifier([[0], [1]], [1.0, 1.0], n_jobs=1).fit(X, y)
        >>> np.allclose(clf.predict_proba(X[:3]).sum(axis=1), 1)
        True
        """
        if fitted_attribute(self, "model_kind_") == "linear":
            return self.linear_.predict_proba(X, budget=budget)
        model, z = self._tree_decision(X, budget)
        return model.apply_link(z)

    def predict(self, X, budget=None):
        """Most probable class of the last stage within `budget` (default: the last stage).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeBoostingClassifier
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = AnytimeBoostingClassifier([[0], [1]], [1.0, 1.0], n_jobs=1).fit(X, y)
        >>> len(set(clf.predict(X[:20], budget=0.0).tolist()))  # stage 0: the prior's class for every row
        1
        """
        proba = self.predict_proba(X, budget=budget)  # first: it says "not fitted" before classes_ is read
        return self.classes_[np.argmax(proba, axis=1)]

    def staged_predict_proba(self, X):
        """Yield the class probabilities of stage 0, 1, ..., K.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeBoostingClassifier
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = AnytimeBoostingClassifier([[0], [1]], [1.0, 1.0], n_jobs=1).fit(X, y)
        >>> len(list(clf.staged_predict_proba(X))) == len(clf.cum_cost_)
        True
        """
        if fitted_attribute(self, "model_kind_") == "linear":
            yield from self.linear_.staged_predict_proba(X)
            return
        for model, z in self._staged_tree_decision(X):
            yield model.apply_link(z)

    def staged_predict(self, X):
        """Yield the predicted classes of stage 0, 1, ..., K.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeBoostingClassifier
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = AnytimeBoostingClassifier([[0], [1]], [1.0, 1.0], n_jobs=1).fit(X, y)
        >>> [round(float(np.mean(p == y)), 2) for p in clf.staged_predict(X)][-1] > 0.95
        True
        """
        for proba in self.staged_predict_proba(X):
            yield self.classes_[np.argmax(proba, axis=1)]


class AnytimeBoostingRegressor(RegressorMixin, _AnytimeBoostingBase):
    """Anytime regressor whose stages are LightGBM trees chosen group by group, by validation gain per cost.

    As `AnytimeBoostingClassifier`, with the squared error as the loss and the validation curve
    being the negative mean squared error per stage; when the linear anytime model
    (`AnytimeRegressor`) has the larger area under that curve, it is kept (``model_kind_ == "linear"``).

    Parameters
    ----------
    groups, costs, group_names, learning_rate, num_leaves, max_rounds, stopping_rounds, min_child_samples, validation_fraction, compare_linear, n_jobs, random_state, feature_names, refit, probe_rounds, probe_top, max_tree_columns, probe_rows
        As in `AnytimeBoostingClassifier`.

    Attributes
    ----------
    model_kind_, stage_model_, fitted_sequence_, cum_cost_, stage_groups_, trace_, comparison_
        As in `AnytimeBoostingClassifier`.
    validation_curve_trees_, validation_curve_linear_ : list of float
        Negative mean squared error per stage on the comparison rows.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeBoostingRegressor
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(400, 4)); y = np.abs(X[:, 2]) + 0.1 * X[:, 0]
    >>> reg = AnytimeBoostingRegressor([[0, 1], [2, 3]], [1.0, 2.0], n_jobs=1, random_state=0).fit(X, y)
    >>> reg.model_kind_, reg.stage_groups_[1]
    ('trees', [1])
    """

    def fit(self, X, y, *, progress=None):
        """Run the greedy stagewise search, then compare with the linear model on validation.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or dask.array.Array
            At least 10 rows; columns of the groups must be finite. A row-chunked dask array trains
            through ``lightgbm.dask`` on the active ``distributed`` client (see the module notes).
        y : array-like of shape (n_samples,) or dask.array.Array
            Finite target values.
        progress : callable or None, default=None
            Receives one line of text per stage.

        Returns
        -------
        AnytimeBoostingRegressor
            self.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeBoostingRegressor
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 2))
        >>> AnytimeBoostingRegressor([[0], [1]], [1.0, 1.0], n_jobs=1).fit(X, X[:, 0]).cum_cost_[0].item()
        0.0
        """
        self._check_params()
        if is_dask_array(X):
            X, y = dask_targets(self, X, y)
        else:
            X, y = _wrap_validation(lambda: validate_data(
                self, X, y, accept_sparse=False, ensure_all_finite=False, dtype=(np.float64, np.float32),
                multi_output=False, y_numeric=True, ensure_min_samples=1))
        if X.shape[0] < 10:
            raise InputError(f"n_samples={X.shape[0]}: boosting holds out validation rows and needs at least 10")
        y = np.asarray(y, dtype=np.float64)
        if not np.all(np.isfinite(y)):
            raise InputError("y contains NaN or Inf; clean it first")
        return self._fit(X, y, "regression", 1, ("y",), False, progress)

    def _linear_estimator(self, spec, l2="auto", whiten="auto"):
        from edgeseq.train.linear.regressor import AnytimeRegressor
        return AnytimeRegressor(groups=[c.tolist() for c in spec.columns], costs=spec.costs.tolist(),
                                group_names=list(spec.names), feature_names=self._names, l2=l2, whiten=whiten)

    def _curve(self, cum_cost, staged, model, y):
        return [-(z[:, 0] - y) ** 2 for z in staged]

    def _linear_curve(self, lin, X, y):
        return [-(np.ravel(p) - y) ** 2 for p in lin.staged_predict(X)]

    def predict(self, X, budget=None):
        """Prediction (n,) of the last stage within `budget` (default: the last stage).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeBoostingRegressor
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 2))
        >>> reg = AnytimeBoostingRegressor([[0], [1]], [1.0, 1.0], n_jobs=1).fit(X, X[:, 0])
        >>> reg.predict(X[:2], budget=0.0).shape
        (2,)
        """
        if fitted_attribute(self, "model_kind_") == "linear":
            return np.ravel(self.linear_.predict(X, budget=budget))
        return self._tree_decision(X, budget)[1][:, 0]

    def staged_predict(self, X):
        """Yield the prediction (n,) of stage 0, 1, ..., K.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeBoostingRegressor
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(100, 2))
        >>> reg = AnytimeBoostingRegressor([[0], [1]], [1.0, 1.0], n_jobs=1).fit(X, X[:, 0])
        >>> len(list(reg.staged_predict(X))) == len(reg.cum_cost_)
        True
        """
        if fitted_attribute(self, "model_kind_") == "linear":
            for p in self.linear_.staged_predict(X):
                yield np.ravel(p)
            return
        for _, z in self._staged_tree_decision(X):
            yield z[:, 0]
