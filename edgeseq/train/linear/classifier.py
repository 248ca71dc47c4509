"""AnytimeClassifier: cost-sensitive group sequencing for logistic (binary) and softmax (multiclass) models."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import ClassifierMixin
from threadpoolctl import threadpool_limits

from edgeseq.train.linear.auto import Choice, choose_glm, cv_step, fixed
from edgeseq.train.linear.fold import fold_sequence, raw_column_stats
from edgeseq.train.base import AnytimeBase, classification_targets, step_reporter
from edgeseq.train.distributed.stats import check_dask_X
from edgeseq.train.linear.basis import build_working_problem
from edgeseq.errors import EdgeseqWarning, InputError, RefitConvergenceWarning
from edgeseq.train.glm.fit import GRAD_TOL, class_targets
from edgeseq.train.glm.design import WorkingDesign
from edgeseq.train.glm.select import CROSS_GRAM_METHODS, GLMSelectionResult, GLMState, select_glm
from edgeseq.train.linear.group_stats import GroupBlockStats, group_block_statistics
from edgeseq.forms.groups import GroupSpec
from edgeseq.forms.linear import FittedSequence
from edgeseq.train.linear.stats import SufficientStats, sufficient_statistics


# From this many used columns on, OMP-like selections skip the cross-group blocks of the Gram. They
# only precondition the refits: without them a refit may need more passes over the rows when groups
# are strongly correlated (4 -> 5x more on a 14-column test problem), but each pass costs n·D·P
# multiply-adds against the Gram's n·D², so from about a thousand columns the Gram costs more than
# any number of extra passes seen (at 11,016 columns: 4.4 passes per step either way).
WITHIN_GROUP_MIN_COLUMNS = 1024


class AnytimeClassifier(ClassifierMixin, AnytimeBase):
    """Learn the order in which to compute feature groups and one (multinomial) logistic model per prefix.

    Binary problems use one logit and a sigmoid link (probability of ``classes_[1]``); three or more
    classes use one logit per class and a softmax link. Prefix 0 predicts the class prior. Learned
    attributes are those of `AnytimeRegressor` plus the ones listed below.

    Parameters
    ----------
    groups, costs, group_names, doubling, feature_names, cost_provenance
        As in `AnytimeRegressor`.
    method : {"omp", "fr", "single", "gomp"}, default="omp"
        "omp" (CS-G-OMP: ‖gradient block‖²/cost), "fr" (CS-G-FR: score-test gain/cost),
        "single" (best single standardised column), "gomp" (cost ignored).
    l2 : float or "auto", default="auto"
        L2 penalty λ/2‖W‖² on the working-space (whitened) weights; intercepts are not penalised.
        It also keeps the weights finite on perfectly separable data. "auto" picks it by 5-fold
        cross-validated log-loss of the full-budget model over a short warm-started path of
        penalties (on a sample of the rows when the working design would be large).
    whiten : bool or "auto", default="auto"
        As in `AnytimeRegressor`: chosen with the penalty when "auto".

    Attributes
    ----------
    classes_ : ndarray
        The class labels, as given.
    train_accuracy_, train_log_loss_ : ndarray of shape (J+1,)
        Accuracy and mean natural-log loss of every prefix 0..J on the training rows.
    train_curve_ : ndarray of shape (J+1,)
        The same as ``train_accuracy_``.
    grad_norms_ : ndarray of shape (J+1,)
        ‖∇r‖_∞ at each prefix's refit (below ``GRAD_TOL`` when converged).
    n_evals_ : ndarray of shape (J+1,)
        Passes over the training rows spent by each prefix's refit.
    n_passes_ : ndarray of shape (J,)
        Passes over the training rows of each selection step: scoring plus refit (what bounds the
        time of a step on large data).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from edgeseq import AnytimeClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = AnytimeClassifier(groups=[[0, 1], [2, 3]], costs=[1.0, 2.0],
    ...                         group_names=["sepal", "petal"]).fit(X, y)
    >>> clf.sequence_.tolist(), clf.classes_.tolist()
    ([0, 1], [0, 1, 2])
    >>> clf.train_accuracy_.round(3).tolist()     # prefix 0 is the class prior
    [0.333, 0.833, 0.98]
    >>> clf.l2_, clf.whiten_                      # chosen by cross-validation
    (0.0001, False)
    >>> clf.predict_proba(X[:1], prefix=0).round(3).tolist()
    [[0.333, 0.333, 0.333]]
    >>> clf.predict(X[[0, 50, 100]], budget=3.0).tolist()
    [0, 1, 2]
    """

    _fr_hessian = "bohning"  # multinomial FR curvature (see README "classification"); not a parameter

    def __init__(self, groups=None, costs=None, *, method="omp", whiten="auto", doubling=False, l2="auto",
                 group_names=None, feature_names=None, cost_provenance=None):
        self.groups = groups
        self.costs = costs
        self.method = method
        self.whiten = whiten
        self.doubling = doubling
        self.l2 = l2
        self.group_names = group_names
        self.feature_names = feature_names
        self.cost_provenance = cost_provenance

    def fit(self, X, y, *, progress=None, client=None, validation=None):
        """Select and refit greedily (glm_select) over a chunked working design (nothing n × k is built).

        `X` may also be a row-chunked ``dask.array`` (optional extra ``edgeseq[dask]``): its partitions
        are read once and kept where they are, and every loss/gradient evaluation of the selection is
        a map over them plus a tree sum (`edgeseq.train.distributed.glm`), on `client`, else on the active
        ``distributed`` client, else partition by partition here. Same selections and refits as in
        memory. `progress`: optional callable receiving one line of text per stage and selection step.

        Parameters
        ----------
        X : array (n, D) or dask.array.Array
        y : array (n,)
            Class labels (at least two distinct); a numpy or dask array for a dask X.
        progress : callable, optional
        client : distributed.Client, optional
            Where to run a dask array's passes.
        validation : tuple (X_val, y_val), optional
            Rows kept apart from `X` on which "auto" ``l2``/``whiten`` are chosen, instead of 5-fold
            cross-validation on `X`: each candidate penalty is fitted once, on all of `X`, and
            scored by the full-budget log-loss on these rows, so the choice costs about a fifth of
            the cross-validated one. The model is fitted on `X` alone. For data large enough that
            rows can be spared (`AnytimeBoostingClassifier` passes the rows its search stops
            boosting rounds on). Labels must be among those of `y`. Not for fixed ``l2`` and ``whiten``.

        Returns
        -------
        self

        Raises
        ------
        InputError
            Fewer than two samples or classes, non-finite used columns, bad parameters; for a dask
            array also the partition and row of a bad value or label; a `validation` pair of the
            wrong shape, with non-finite used columns or an unseen label, or given when nothing is "auto".

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeClassifier
        >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = np.where(X[:, 1] > 0, "yes", "no")
        >>> clf = AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0]).fit(X, y)
        >>> clf.classes_.tolist(), clf.sequence_.tolist(), float(clf.train_accuracy_[-1])
        (['no', 'yes'], [1, 0], 1.0)

        The same rows as a dask array (here without a cluster: partition by partition in this process):

        >>> import dask.array as da
        >>> dclf = AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0]).fit(da.from_array(X, chunks=(70, 2)), y)
        >>> dclf.sequence_.tolist(), bool(np.allclose(dclf.coef_, clf.coef_, atol=1e-6))
        ([1, 0], True)
        """
        self._check_params()
        if self._cluster_fit(X, client):
            from edgeseq.train.distributed.glm import partition_dask_arrays

            check_dask_X(X)
            return self.fit_partitions(partition_dask_arrays(X, y, client), progress=progress, validation=validation)
        X, y, classes, k = classification_targets(self, X, y)
        link = "sigmoid" if classes.size == 2 else "softmax"
        Y = class_targets(k, classes.size)
        spec = self._group_spec(X.shape[1])
        used = np.concatenate(spec.columns)
        held = self._validation_rows(validation, classes, X.shape[1], used)
        # no local name for the statistics: `_select` frees their d × d sums once K is built (a local
        # here would keep a second gigabyte alive through the whole selection at ten thousand columns)
        stats = self._statistics(X, Y, spec, used, progress)
        step = cv_step(X.shape[0] + (0 if held is None else held[0].shape[0]), used.size)
        choice = self._choose(lambda: (np.asarray(X[::step][:, used], dtype=np.float64), Y[::step]), stats, spec,
                              link, progress, held=None if held is None else (held[0][::step], held[1][::step]))
        return self._select(stats, spec, X.shape[1], classes, progress, lambda prob: GLMState(
            prob, WorkingDesign(X, used, prob), Y, link, choice.l2, X=X, used=used, fr_hessian=self._fr_hessian,
            release_selected=True), choice)

    def _validation_rows(self, validation, classes, n_features: int, used):
        """`fit`'s ``validation`` pair as (rows' used columns, class targets), or None; one-line errors."""
        if validation is None:
            return None
        if self.l2 != "auto" and self.whiten != "auto":
            raise InputError('validation= chooses l2/whiten="auto"; here both are given, so the rows would go unused')
        try:
            Xv, yv = validation
        except (TypeError, ValueError):
            raise InputError("validation= takes a pair (X_val, y_val)") from None
        try:
            Xv = np.asarray(Xv, dtype=np.float64)
        except (TypeError, ValueError) as exc:  # strings, ragged rows: numpy's message, in one line
            raise InputError(f"validation X must be numeric: {str(exc).splitlines()[0]}") from None
        yv = np.asarray(yv)
        if Xv.ndim != 2 or Xv.shape[1] != n_features or Xv.shape[0] < 1:
            raise InputError(f"validation X has shape {Xv.shape}; expected (m >= 1, {n_features}) like X")
        if yv.ndim != 1 or yv.shape[0] != Xv.shape[0]:
            raise InputError(f"validation y has shape {yv.shape}; expected ({Xv.shape[0]},), one label per row")
        Xv = np.ascontiguousarray(Xv[:, used])
        if not np.all(np.isfinite(Xv)):
            raise InputError("validation X contains NaN or Inf in columns of the groups")
        index = {c: i for i, c in enumerate(classes.tolist())}
        k = np.array([index.get(v, -1) for v in yv.tolist()], dtype=np.int64)
        if np.any(k < 0):
            raise InputError(f"validation label {yv.tolist()[int(np.argmax(k < 0))]!r} is not among the training classes "
                             f"{classes.tolist()[:10]}")
        return Xv, class_targets(k, classes.size)

    def _choose(self, sample, stats, spec: GroupSpec, link: str, progress, held=None):
        """The Choice for this fit: cross-validated on `sample()` = (rows, targets) when anything is "auto",
        or, with `held` = (rows, targets) kept apart, fitted on the sample and scored on those."""
        if self.l2 != "auto" and self.whiten != "auto":
            return fixed(self.l2, self.whiten)
        Xs, Ys = sample()
        mask = None
        if held is not None:
            mask = np.r_[np.zeros(Xs.shape[0], dtype=bool), np.ones(held[0].shape[0], dtype=bool)]
            if progress is not None:
                progress(f"choosing l2/whitening: fitted on {Xs.shape[0]:,} rows, scored on {held[0].shape[0]:,} "
                         f"held-out rows")
            Xs, Ys = np.vstack([Xs, held[0]]), np.vstack([Ys, held[1]])
        elif progress is not None:
            progress(f"choosing l2/whitening: cross-validation over {Xs.shape[0]:,} rows")
        with threadpool_limits(limits=1, user_api="blas"):
            choice = choose_glm(Xs, Ys, stats, spec.sizes, link, l2=self.l2, whiten=self.whiten, held_out=mask)
        if progress is not None:
            progress(f"chose l2={choice.l2:.3g}, whiten={choice.whiten}")
        return choice

    def _statistics(self, X, Y, spec: GroupSpec, used, progress):
        """The full statistics for CS-G-FR and for narrow data; for the methods that score groups on
        their own and at least `WITHIN_GROUP_MIN_COLUMNS` columns, only the within-group blocks
        (n·Σ d_g² instead of n·D² multiply-adds, no D × D array)."""
        if self.method in CROSS_GRAM_METHODS or used.size < WITHIN_GROUP_MIN_COLUMNS:
            if progress is not None:
                progress(f"statistics pass over {X.shape[0]:,} rows x {used.size} columns")
            return sufficient_statistics(X, Y, columns=used)
        if progress is not None:
            progress(f"within-group statistics over {X.shape[0]:,} rows: {len(spec.columns)} groups, {used.size} "
                     f"columns ({self.method} reads no cross-group block)")
        return group_block_statistics(X, Y, spec.columns, progress=progress)

    def fit_partitions(self, rows, *, progress=None, validation=None):
        """Fit on row partitions that stay where they were read (`edgeseq.train.distributed.glm.PartitionedRows`).

        What `fit` does with a dask array, and what ``edgeseq train`` does with shards (each shard one
        partition, read by its worker).

        Parameters
        ----------
        rows : PartitionedRows
            X blocks with their class labels.
        progress : callable, optional
        validation : tuple (X_val, y_val), optional
            As in `fit`: in-memory rows on which "auto" values are chosen.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeClassifier
        >>> from edgeseq.train.distributed.glm import PartitionedRows
        >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 1] > 0).astype(int)
        >>> rows = PartitionedRows.split(X, y, [90])      # two partitions, here in this process
        >>> AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0]).fit_partitions(rows).sequence_.tolist()
        [1, 0]
        """
        from edgeseq.train.distributed.glm import PartitionedDesign, PartitionedGLMState, cv_sample, partitioned_targets

        self._check_params()
        n_features = int(rows.n_features)
        spec = self._group_spec(n_features)
        used = np.concatenate(spec.columns)
        self.n_features_in_ = n_features
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        t = partitioned_targets(rows, used, progress=progress)
        held = self._validation_rows(validation, t.classes, n_features, used)
        step = cv_step(t.rows.n + (0 if held is None else held[0].shape[0]), used.size)
        choice = self._choose(lambda: cv_sample(t.rows, used, step), t.stats, spec, t.link, progress,
                              held=None if held is None else (held[0][::step], held[1][::step]))

        def state(prob):
            return PartitionedGLMState(prob, PartitionedDesign.over(t.rows, used, prob), t.freq, t.link,
                                       choice.l2, fr_hessian=self._fr_hessian)

        return self._select(t.stats, spec, n_features, t.classes, progress, state, choice)

    def _select(self, stats: SufficientStats | GroupBlockStats, spec: GroupSpec, n_features: int, classes, progress, make_state,
                choice: Choice):
        """From the statistics on: working problem, greedy selection over `make_state(prob)`, fold, publish."""
        link = "sigmoid" if classes.size == 2 else "softmax"
        provenance, column_stats = self._provenance(stats, choice), raw_column_stats(spec, stats, n_features)
        # skinny (n×m)·(m×P) products are memory-bound and the D-space ones small: a second BLAS
        # thread gains nothing and, on a loaded machine, spins (measured 5x slower; see README)
        with threadpool_limits(limits=1, user_api="blas"):
            prob = build_working_problem(stats, spec.sizes, choice.whiten, keep_cov=False, consume=True)
            del stats  # the d × d sums are K's size again; nothing below reads them (given back while K was built)
            state = make_state(prob)
            result = select_glm(state, spec.costs, method=self.method, doubling=bool(self.doubling),
                                progress=step_reporter(progress, spec))
            del state  # its k × k factors are not needed by the fold below
        self._warn(result, spec)
        seq = fold_glm(prob, result, spec, None, n_features, link, classes, provenance, column_stats)
        self.classes_ = classes
        self._publish(self._with_inputs(seq), spec)
        self._publish_choice(choice)
        self.train_accuracy_ = result.accuracy
        self.train_log_loss_ = result.log_loss
        self.train_curve_ = result.accuracy
        self.grad_norms_ = result.grad_norms
        self.n_evals_ = result.n_evals
        self.n_passes_ = result.passes
        self.selection_scores_ = np.array(result.scores)
        self.unusable_groups_ = list(result.unusable)
        for acc, ll in zip(result.accuracy, result.log_loss):
            seq.train_metrics.append({"accuracy": float(acc), "log_loss": float(ll)})
        return self

    @staticmethod
    def _warn(result: GLMSelectionResult, spec: GroupSpec) -> None:
        for g in result.unusable:
            warnings.warn(f"group {spec.names[g]!r} has no usable direction (constant or empty after "
                          f"whitening); it is placed last with zero gain", EdgeseqWarning, stacklevel=3)
        if result.not_converged:
            warnings.warn(f"the refit of prefix(es) {result.not_converged} stopped with gradient norm above "
                          f"{GRAD_TOL:g}; increase l2 or rescale the features", RefitConvergenceWarning, stacklevel=3)

    def _provenance(self, stats: SufficientStats, choice: Choice) -> dict:
        return {**super()._provenance(stats, choice), "grad_tol": GRAD_TOL, "fr_hessian": self._fr_hessian}

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X, budget=None, prefix=None):
        """Logits of the chosen prefix: (n,) for binary problems (logit of classes_[1]), else (n, n_classes).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeClassifier
        >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 1] > 0).astype(int)
        >>> clf = AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0]).fit(X, y)
        >>> clf.decision_function(X[:4]).shape
        (4,)
        >>> bool(((clf.decision_function(X) > 0) == (clf.predict(X) == 1)).all())
        True
        """
        seq, z = self._linear(X, budget, prefix)
        return z[:, 0] if seq.link == "sigmoid" else z

    def predict_proba(self, X, budget=None, prefix=None):
        """Class probabilities (n, n_classes) of the longest prefix within `budget`, or of `prefix`.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeClassifier
        >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 1] > 0).astype(int)
        >>> clf = AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0]).fit(X, y)
        >>> p = clf.predict_proba(X[:3])
        >>> p.shape, bool(np.allclose(p.sum(axis=1), 1.0))
        ((3, 2), True)
        >>> prior = clf.predict_proba(X[:3], prefix=0)  # no group computed: the class frequencies
        >>> bool(np.allclose(prior, [1 - y.mean(), y.mean()]))
        True
        """
        seq, z = self._linear(X, budget, prefix)
        return seq.apply_link(z)

    def predict(self, X, budget=None, prefix=None):
        """The most probable class (ties: the first class in ``classes_``).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeClassifier
        >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = np.where(X[:, 1] > 0, "yes", "no")
        >>> clf = AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0]).fit(X, y)
        >>> clf.predict(np.array([[0.0, 2.0], [0.0, -2.0]])).tolist()
        ['yes', 'no']
        """
        proba = self.predict_proba(X, budget, prefix)  # first: raises NotFittedError before classes_ is read
        return self.classes_[np.argmax(proba, axis=1)]

    def score(self, X, y, sample_weight=None):
        """Accuracy of the full model; labels never seen in training are an error, not a silent miss.

        Raises
        ------
        InputError
            `y` holds a label the model never saw.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeClassifier
        >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 1] > 0).astype(int)
        >>> clf = AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0]).fit(X, y)
        >>> clf.score(X, y)
        1.0
        >>> clf.score(X[:2], [0, 7])
        Traceback (most recent call last):
        ...
        edgeseq.errors.InputError: y contains label(s) [7] not seen in training; the model knows [0, 1]
        """
        self._check_fitted()
        known = set(self.classes_.tolist())
        unseen = sorted({v for v in np.asarray(y).ravel().tolist() if v not in known}, key=str)
        if unseen:
            raise InputError(f"y contains label(s) {unseen[:10]} not seen in training; "
                             f"the model knows {self.classes_[:20].tolist()}")
        return super().score(X, y, sample_weight=sample_weight)

    def staged_predict_proba(self, X):
        """Yield the class probabilities of prefix 0, 1, ..., J.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeClassifier
        >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 1] > 0).astype(int)
        >>> clf = AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0]).fit(X, y)
        >>> [p.shape for p in clf.staged_predict_proba(X[:5])]
        [(5, 2), (5, 2), (5, 2)]
        """
        for seq, z in self._staged_linear(X):
            yield seq.apply_link(z)

    def staged_predict(self, X):
        """Yield the predicted classes of prefix 0, 1, ..., J (what the device holds after each group).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeClassifier
        >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 1] > 0).astype(int)
        >>> clf = AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0]).fit(X, y)
        >>> [float(np.mean(p == y)) for p in clf.staged_predict(X)][1:]  # accuracy once each group is in
        [1.0, 1.0]
        """
        for proba in self.staged_predict_proba(X):
            yield self.classes_[np.argmax(proba, axis=1)]


def fold_glm(prob, result: GLMSelectionResult, spec: GroupSpec, stats: SufficientStats | None, n_features: int,
             link: str, classes: np.ndarray, provenance: dict, column_stats=None) -> FittedSequence:
    """GLMs: the working intercepts are the fitted ones and there is no target scaling.

    Examples
    --------
    `AnytimeClassifier.fit` calls it; the folded sequence predicts like the working-basis refit:

    >>> import numpy as np
    >>> from edgeseq import AnytimeClassifier
    >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = (X[:, 1] > 0).astype(int)
    >>> seq = AnytimeClassifier(groups=[[0], [1]], costs=[1.0, 1.0]).fit(X, y).fitted_sequence_
    >>> seq.link, seq.classes.tolist(), seq.coefs[1].shape
    ('sigmoid', [0, 1], (1, 1))
    """
    return fold_sequence(prob, result, spec, stats, n_features, intercepts=result.intercepts, task="classification",
                         link=link, output_names=[str(c) for c in classes], classes=classes, provenance=provenance,
                         column_stats=column_stats)
