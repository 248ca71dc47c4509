"""AnytimeClassifier: cost-sensitive group sequencing for logistic (binary) and softmax (multiclass) models."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data
from threadpoolctl import threadpool_limits

from edgeseq.train.base import AnytimeBase, _wrap_validation, step_reporter
from edgeseq.train.basis import build_working_problem
from edgeseq.errors import EdgeseqWarning, InputError
from edgeseq.train.glm_fit import GRAD_TOL
from edgeseq.train.glm_select import GLMSelectionResult, GLMState, select_glm, working_design
from edgeseq.train.groups import GroupSpec
from edgeseq.sequence import FittedSequence
from edgeseq.train.stats import SufficientStats, sufficient_statistics


class AnytimeClassifier(ClassifierMixin, AnytimeBase):
    """Learn the order in which to compute feature groups and one (multinomial) logistic model per prefix.

    Binary problems use one logit and a sigmoid link (probability of ``classes_[1]``); three or more
    classes use one logit per class and a softmax link. Prefix 0 predicts the class prior.

    Parameters
    ----------
    groups, costs, group_names, whiten, doubling : as in `AnytimeRegressor`.
    method : "omp" (CS-G-OMP: ‖gradient block‖²/cost), "fr" (CS-G-FR: score-test gain/cost),
        "single" (best single standardised column), "gomp" (cost ignored).
    l2 : L2 penalty λ/2‖W‖² on the working-space (whitened) weights; intercepts are not penalised.
        It also keeps the weights finite on perfectly separable data.

    Learned attributes (besides those of `AnytimeRegressor`): ``classes_``; ``train_accuracy_`` and
    ``train_log_loss_`` per prefix 0..J; ``train_curve_`` is ``train_accuracy_``; ``grad_norms_``
    (‖∇r‖_∞ at each prefix's refit, below ``GRAD_TOL`` when converged); ``n_evals_`` (passes over
    the training rows spent by each prefix's refit).
    """

    _fr_hessian = "bohning"  # multinomial FR curvature (see README "classification"); not a parameter

    def __init__(self, groups=None, costs=None, method="omp", whiten=True, doubling=False, l2=1e-4,
                 group_names=None):
        self.groups = groups
        self.costs = costs
        self.method = method
        self.whiten = whiten
        self.doubling = doubling
        self.l2 = l2
        self.group_names = group_names

    def fit(self, X, y, *, progress=None):
        """Materialise the working design once, then select and refit greedily (glm_select).

        `progress`: optional callable receiving one line of text per stage and selection step.
        """
        self._check_params()
        self._refuse_dask(X)
        X, y = _wrap_validation(lambda: validate_data(
            self, X, y, accept_sparse=False, ensure_all_finite=False, dtype=(np.float64, np.float32),
            multi_output=False, y_numeric=False, ensure_min_samples=1))
        _wrap_validation(lambda: check_classification_targets(y))
        if X.shape[0] < 2:
            raise InputError(f"n_samples={X.shape[0]}: need at least 2 samples to fit")
        classes, k = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise InputError(f"y has a single class ({classes[0]!r}); a classifier needs at least 2 classes")
        link = "sigmoid" if classes.size == 2 else "softmax"
        Y = (k == 1).astype(np.float64)[:, None] if link == "sigmoid" else np.eye(classes.size)[k]
        spec = self._group_spec(X.shape[1])
        used = np.concatenate(spec.columns)
        if progress is not None:
            progress(f"statistics pass over {X.shape[0]:,} rows x {used.size} columns")
        stats = sufficient_statistics(X, Y, columns=used)
        # skinny (n×m)·(m×P) products are memory-bound and the D-space ones small: a second BLAS
        # thread gains nothing and, on a loaded machine, spins (measured 5x slower; see README)
        with threadpool_limits(limits=1, user_api="blas"):
            prob = build_working_problem(stats, spec.sizes, self.whiten)
            state = GLMState(prob, working_design(X, used, prob), Y, link, float(self.l2), X=X, used=used,
                             fr_hessian=self._fr_hessian)
            result = select_glm(state, spec.costs, method=self.method, doubling=bool(self.doubling),
                                progress=step_reporter(progress, spec))
        self._warn(result, spec)
        seq = fold_glm(prob, result, spec, stats, X.shape[1], link, classes, self._provenance(stats))
        self.classes_ = classes
        self._publish(seq, spec)
        self.train_accuracy_ = result.accuracy
        self.train_log_loss_ = result.log_loss
        self.train_curve_ = result.accuracy
        self.grad_norms_ = result.grad_norms
        self.n_evals_ = result.n_evals
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
                          f"{GRAD_TOL:g}; increase l2 or rescale the features", EdgeseqWarning, stacklevel=3)

    def _provenance(self, stats: SufficientStats) -> dict:
        return {**super()._provenance(stats), "grad_tol": GRAD_TOL, "fr_hessian": self._fr_hessian}

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X, budget=None, prefix=None):
        """Logits of the chosen prefix: (n,) for binary problems (logit of classes_[1]), else (n, n_classes)."""
        seq, z = self._linear(X, budget, prefix)
        return z[:, 0] if seq.link == "sigmoid" else z

    def predict_proba(self, X, budget=None, prefix=None):
        """Class probabilities (n, n_classes) of the longest prefix within `budget`, or of `prefix`."""
        seq, z = self._linear(X, budget, prefix)
        return seq.apply_link(z)

    def predict(self, X, budget=None, prefix=None):
        """The most probable class (ties: the first class in ``classes_``)."""
        proba = self.predict_proba(X, budget, prefix)  # first: raises NotFittedError before classes_ is read
        return self.classes_[np.argmax(proba, axis=1)]

    def score(self, X, y, sample_weight=None):
        """Accuracy of the full model; labels never seen in training are an error, not a silent miss."""
        self._check_fitted()
        known = set(self.classes_.tolist())
        unseen = sorted({v for v in np.asarray(y).ravel().tolist() if v not in known}, key=str)
        if unseen:
            raise InputError(f"y contains label(s) {unseen[:10]} not seen in training; "
                             f"the model knows {self.classes_[:20].tolist()}")
        return super().score(X, y, sample_weight=sample_weight)

    def staged_predict_proba(self, X):
        """Yield the class probabilities of prefix 0, 1, ..., J."""
        for seq, z in self._staged_linear(X):
            yield seq.apply_link(z)

    def staged_predict(self, X):
        """Yield the predicted classes of prefix 0, 1, ..., J (what the device holds after each group)."""
        for proba in self.staged_predict_proba(X):
            yield self.classes_[np.argmax(proba, axis=1)]


def fold_glm(prob, result: GLMSelectionResult, spec: GroupSpec, stats: SufficientStats, n_features: int,
             link: str, classes: np.ndarray, provenance: dict) -> FittedSequence:
    """Raw-space maps of every prefix: β_g = T_g W_g, β_0 = b − Σ μ_gᵀ β_g (no target scaling for GLMs)."""
    P = result.intercepts.shape[1]
    coefs, intercepts = [], []
    for j, ws in enumerate(result.prefix_weights):
        groups = result.order[:j]
        beta = np.vstack([prob.transforms[g] @ w for g, w in zip(groups, ws)]) if j else np.zeros((0, P))
        mu = np.concatenate([prob.x_mean[prob.raw_slices[g]] for g in groups]) if j else np.zeros(0)
        coefs.append(beta)
        intercepts.append(result.intercepts[j] - mu @ beta)
    used = np.concatenate(spec.columns)
    mean, std = np.zeros(n_features), np.ones(n_features)
    mean[used] = stats.x_mean
    std[used] = np.sqrt(np.maximum(np.diag(stats.cov_xx), 0.0))
    return FittedSequence(
        task="classification", link=link, n_features_in=n_features, group_names=spec.names,
        group_columns=spec.columns, costs=spec.costs, order=np.array(result.order), coefs=tuple(coefs),
        intercepts=np.array(intercepts), output_names=tuple(str(c) for c in classes), classes=classes,
        doubling_violations=tuple(result.doubling_violations), provenance=provenance, y_was_1d=False,
        feature_mean=mean, feature_std=std)
