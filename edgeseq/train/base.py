"""What the anytime estimators share: parameter checks, input validation, budget -> prefix, folding.

The estimators own training; everything after training goes through `fitted_sequence_` (a
FittedSequence), so prediction here and in the exported artefacts is the same computation.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from edgeseq.errors import InputError, InputTypeError, NotFittedError
from edgeseq.train.distributed.stats import is_dask_array
from edgeseq.forms.groups import GroupSpec, check_groups
from edgeseq.format import METHODS
from edgeseq.io.cost_provenance import read_cost_provenance
from edgeseq.budget import resolve_prefix, warn_if_budget_affords_nothing
from edgeseq.messages import brief, columns_text
from edgeseq.forms.linear import FittedSequence, check_feature_names


def _wrap_validation(call):
    """Run a scikit-learn validation call, re-raising its errors as edgeseq's own (same message)."""
    try:
        return call()
    except (ValueError, TypeError) as exc:
        if isinstance(exc, InputError):
            raise
        # one line: scikit-learn's messages (e.g. on feature names) span several
        raise (InputTypeError if isinstance(exc, TypeError) else InputError)(" ".join(str(exc).split())) from exc


def fit_feature_names(est, n_features: int) -> tuple[str, ...] | None:
    """The raw column names a fit records.

    The `feature_names` parameter when given, else the columns of a data frame passed to `fit`
    (scikit-learn's ``feature_names_in_``, which `validate_data` has just set), else None. The
    model keeps them so every table entry point can match columns by name (`check_table_columns`,
    `edgeseq run`).

    Raises
    ------
    InputError
        When the parameter and the data frame's columns disagree, or the names are not valid.

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> est = BaseEstimator(); est.feature_names = ["ax", "ay"]
    >>> fit_feature_names(est, 2)
    ('ax', 'ay')
    """
    given = getattr(est, "feature_names", None)
    seen = getattr(est, "feature_names_in_", None)
    names = check_feature_names(given, n_features) if given is not None else None
    if seen is None:
        return names
    seen = check_feature_names(seen, n_features, "the columns of X")
    if names is not None and seen != names:
        raise InputError(f"feature_names {brief(names)} differ from the columns of X {brief(seen)}; give one or "
                         "the other")
    est.feature_names_in_ = np.asarray(seen, dtype=str)  # a str array: model files hold plain arrays only
    return seen


def check_table_columns(X, names) -> None:
    """Refuse, in one line, a data frame whose columns are not the model's `names` in order.

    A model with names must never read a reordered table by position; an array has no names and is
    read by position, as everywhere in scikit-learn.

    Raises
    ------
    InputError
        Naming the missing columns, or saying the order differs.

    Examples
    --------
    >>> import numpy as np
    >>> check_table_columns(np.zeros((1, 2)), ("ax", "ay"))      # an array: by position
    """
    if names is None:
        return
    from sklearn.utils.validation import _get_feature_names

    got = _wrap_validation(lambda: _get_feature_names(X))
    if got is None:
        return
    got = tuple(str(g) for g in got)
    if got != tuple(names):
        missing = [n for n in names if n not in got]
        why = f"lack {brief(missing)}" if missing else "are in another order or have extra ones"
        raise InputError(f"X's columns {why}; the model reads {brief(tuple(names))} by name, in that order "
                         "(select them: X[list(names)])")


def classification_targets(est, X, y, min_samples: int = 2, why: str = "need at least 2 samples to fit"):
    """Validated (X, y, classes, class index of each row) for a classifier's `fit`.

    Shared by AnytimeClassifier and AFRClassifier, so both refuse the same inputs with the same words.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.base import BaseEstimator
    >>> X, y, classes, k = classification_targets(BaseEstimator(), np.zeros((3, 1)), ["b", "a", "b"])
    >>> classes.tolist(), k.tolist()
    (['a', 'b'], [1, 0, 1])
    """
    from sklearn.utils.multiclass import check_classification_targets

    X, y = _wrap_validation(lambda: validate_data(
        est, X, y, accept_sparse=False, ensure_all_finite=False, dtype=(np.float64, np.float32),
        multi_output=False, y_numeric=False, ensure_min_samples=1))
    _wrap_validation(lambda: check_classification_targets(y))
    if X.shape[0] < min_samples:
        raise InputError(f"n_samples={X.shape[0]}: {why}")
    classes, k = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise InputError(f"y has a single class ({classes[0]!r}); a classifier needs at least 2 classes")
    return X, y, classes, k


def fitted_attribute(est, name: str):
    """`est.<name>`, or edgeseq's NotFittedError (also scikit-learn's) before `fit`.

    Examples
    --------
    >>> from edgeseq import AnytimeRegressor
    >>> try:
    ...     fitted_attribute(AnytimeRegressor(), "fitted_sequence_")
    ... except NotFittedError as exc:
    ...     print(str(exc).split(";")[0])
    this AnytimeRegressor is not fitted yet
    """
    try:
        check_is_fitted(est, name)
    except Exception as exc:
        raise NotFittedError(f"this {type(est).__name__} is not fitted yet; call fit(X, y) first") from exc
    return getattr(est, name)


def step_reporter(progress, spec: GroupSpec):
    """Adapt a text progress callback to the selections' (step, n_steps, group, [refit]) calls.

    A GLM selection also passes the step's refit: its passes over the rows and training loss are
    what tells a user watching a long fit whether a step is slow because its refit is hard.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from edgeseq.train.base import step_reporter
    >>> from edgeseq.forms.groups import check_groups
    >>> report = step_reporter(print, check_groups([[0], [1]], [1.0, 2.0], ["a", "b"], n_features=2))
    >>> report(1, 2, 1)
    selection step 1/2: b
    >>> report(2, 2, 0, SimpleNamespace(n_evals=7.5, loss=0.31234, converged=True))
    selection step 2/2: a (refit: 7.5 passes over the rows, training log-loss 0.3123)
    >>> step_reporter(None, None) is None  # no callback, no per-step work
    True
    """
    if progress is None:
        return None

    def report(step, n_steps, g, refit=None, *_):
        line = f"selection step {step}/{n_steps}: {spec.names[g]}"
        if refit is not None and hasattr(refit, "n_evals") and hasattr(refit, "loss"):
            line += (f" (refit: {refit.n_evals:.3g} passes over the rows, training log-loss {refit.loss:.4g}"
                     + ("" if getattr(refit, "converged", True) else ", not converged") + ")")
        progress(line)

    return report


def is_bool(v) -> bool:
    """True or False (also numpy's), never 0/1 or strings.

    Examples
    --------
    >>> is_bool(True), is_bool(np.bool_(False)), is_bool(1), is_bool("auto")
    (True, True, False, False)
    """
    return isinstance(v, (bool, np.bool_))


def is_finite_nonnegative(v) -> bool:
    """A real finite number >= 0 (not a bool, not a string).

    Examples
    --------
    >>> is_finite_nonnegative(0.5), is_finite_nonnegative(-1.0), is_finite_nonnegative(float("nan"))
    (True, False, False)
    """
    return isinstance(v, numbers.Real) and not is_bool(v) and bool(np.isfinite(v)) and v >= 0


def check_parameters(est, constraints: dict) -> None:
    """Check `est`'s parameters against a table {name: (accepts(value), description)}; one line on failure.

    Each estimator declares its table once (``_parameter_constraints``), as scikit-learn's estimators
    do, instead of spelling each check out in its own branch.

    Raises
    ------
    InputError
        The first parameter the table refuses, with what it must be.

    Examples
    --------
    >>> from edgeseq import AnytimeRegressor
    >>> check_parameters(AnytimeRegressor(l2=-1.0), AnytimeRegressor._parameter_constraints)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: l2 must be a finite number >= 0 or "auto", got -1.0
    """
    for name, (accepts, description) in constraints.items():
        value = getattr(est, name)
        try:
            ok = bool(accepts(value))
        except Exception:  # a value too odd to compare (an array, ...) is refused like any other
            ok = False
        if not ok:
            raise InputError(f"{name} must be {description}, got {value!r:.80}")


class AnytimeBase(BaseEstimator):
    """Shared machinery of AnytimeRegressor and AnytimeClassifier.

    It holds parameter checking, input validation, the budget-to-prefix rule and the scikit-learn
    style learned attributes, so the two estimators cannot drift apart on any of them.

    Examples
    --------
    >>> from edgeseq import AnytimeClassifier, AnytimeRegressor
    >>> from edgeseq.train.base import AnytimeBase
    >>> issubclass(AnytimeRegressor, AnytimeBase) and issubclass(AnytimeClassifier, AnytimeBase)
    True
    """

    # every parameter check, declared once: name -> (accepts(value), what it must be)
    _parameter_constraints = {
        "method": (lambda v: isinstance(v, str) and v in METHODS, f"one of {METHODS}"),
        "whiten": (lambda v: is_bool(v) or v == "auto", 'True, False or "auto"'),
        "doubling": (is_bool, "True or False"),
        "l2": (lambda v: v == "auto" or is_finite_nonnegative(v), 'a finite number >= 0 or "auto"'),
    }

    def _check_params(self) -> None:
        check_parameters(self, self._parameter_constraints)
        self._cost_provenance()

    def _cost_provenance(self) -> dict:
        """The checked `cost_provenance` parameter as provenance entries (GROUPS.json's own rules)."""
        doc = self.cost_provenance
        if doc is None:
            doc = {}
        if not isinstance(doc, dict) or set(doc) - {"measured_on", "cost_unit"}:
            raise InputError("cost_provenance must be a dict with keys 'measured_on' and/or 'cost_unit' "
                             f"(as in GROUPS.json), got {doc!r:.120}")
        return read_cost_provenance(doc, "cost_provenance")

    def _with_inputs(self, seq: FittedSequence) -> FittedSequence:
        """The fitted sequence with the caller's raw column names (checked against the data's width)."""
        names = fit_feature_names(self, seq.n_features_in)
        return seq if names is None else dataclasses.replace(seq, feature_names=names)

    def _cluster_fit(self, X, client) -> bool:
        """True when X is a dask array (fit it where its partitions are); `client` is only for those."""
        if is_dask_array(X):
            return True
        if client is not None:
            raise InputError("client= is for fitting a dask array; X here is an in-memory array")
        return False

    def _validate_fit_X(self, X, y):
        X, y = _wrap_validation(lambda: validate_data(
            self, X, y, accept_sparse=False, ensure_all_finite=False, dtype=(np.float64, np.float32),
            multi_output=True, y_numeric=self._y_numeric, ensure_min_samples=1))
        if X.shape[0] < 2:
            raise InputError(f"n_samples={X.shape[0]}: need at least 2 samples to fit")
        return X, y

    def _group_spec(self, n_features: int) -> GroupSpec:
        return check_groups(self.groups, self.costs, self.group_names, n_features,
                            feature_names=getattr(self, "feature_names_in_", self.feature_names))

    def _provenance(self, stats, choice) -> dict:
        """How the model was trained, for the manifest (no training data, only its fingerprint).

        ``l2`` and ``whiten`` are the values used (chosen ones when the parameters were "auto");
        ``l2_param`` / ``whiten_param`` record what was asked for, and ``l2_choice`` how it was chosen.
        """
        return {"method": self.method, "whiten": bool(choice.whiten), "doubling": bool(self.doubling),
                "l2": float(choice.l2), "l2_param": self.l2 if self.l2 == "auto" else float(self.l2),
                "whiten_param": self.whiten if self.whiten == "auto" else bool(self.whiten),
                **choice.provenance(), "n_samples": int(stats.n), "data_fingerprint": stats.fingerprint(),
                "estimator": type(self).__name__, **self._cost_provenance()}

    def _publish_choice(self, choice) -> None:
        """The values training used, as learned attributes (the chosen ones when "auto")."""
        self.l2_ = float(choice.l2)
        self.whiten_ = bool(choice.whiten)
        self.cv_scores_ = {("whiten" if w else "standardise"): s.copy() for w, s in choice.scores.items()}
        self.l2_grid_ = np.asarray(choice.grid, dtype=np.float64)

    # ------------------------------------------------------------------ prediction
    def _check_fitted(self) -> FittedSequence:
        return fitted_attribute(self, "fitted_sequence_")

    def _resolve_prefix(self, seq: FittedSequence, budget, prefix) -> int:
        j = resolve_prefix(seq.cum_cost, budget, prefix)
        warn_if_budget_affords_nothing(seq.cum_cost, budget, stacklevel=5)
        return j

    def _validate_predict_X(self, X, seq: FittedSequence, prefixes) -> np.ndarray:
        """Check X's shape; only the columns the requested prefixes use must be finite."""
        check_table_columns(X, seq.feature_names)
        X = _wrap_validation(lambda: validate_data(
            self, X, accept_sparse=False, ensure_all_finite=False, dtype=(np.float64, np.float32),
            reset=False))
        cols = np.unique(np.concatenate([seq.prefix_columns(j) for j in prefixes]))
        if cols.size:
            bad = ~np.isfinite(X[:, cols]).all(axis=0)
            if bad.any():
                raise InputError(f"X contains NaN or Inf in column(s) {columns_text(cols[bad], seq.feature_names)} "
                                 "that the prediction uses; clean or impute them first")
        return X

    def _linear(self, X, budget=None, prefix=None):
        seq = self._check_fitted()
        j = self._resolve_prefix(seq, budget, prefix)
        X = self._validate_predict_X(X, seq, [j])
        return seq, seq.linear(X, j)

    def _staged_linear(self, X):
        seq = self._check_fitted()
        X = self._validate_predict_X(X, seq, range(seq.n_prefixes))
        for j in range(seq.n_prefixes):
            yield seq, seq.linear(X, j)

    # ------------------------------------------------------------------ attributes
    def _publish(self, seq: FittedSequence, spec: GroupSpec) -> None:
        """Set the scikit-learn style learned attributes, all derived from the fitted sequence."""
        D, P, J = seq.n_features_in, seq.n_outputs, len(seq.order)
        dense = np.zeros((J + 1, P, D))  # scikit-learn's (n_targets, n_features) layout per prefix
        for j in range(J + 1):
            dense[j][:, seq.prefix_columns(j)] = seq.coefs[j].T
        squeeze = P == 1 and seq.y_was_1d
        self.fitted_sequence_ = seq
        self.sequence_ = seq.order.copy()
        self.cum_cost_ = seq.cum_cost
        self.costs_ = spec.costs.copy()
        self.groups_ = [c.copy() for c in spec.columns]
        self.group_names_ = list(spec.names)
        self.coef_path_ = dense[:, 0, :] if squeeze else dense
        self.intercept_path_ = seq.intercepts[:, 0].copy() if squeeze else seq.intercepts.copy()
        self.coef_ = self.coef_path_[-1]
        self.intercept_ = self.intercept_path_[-1]
        self.doubling_violations_ = list(seq.doubling_violations)
