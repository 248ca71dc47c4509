"""AFRClassifier: Anytime Feature Representations (cost-sensitive boosted-tree features + SVM readout).

The representation φ(x) is a vector of S·(blocks) dimensions per one-vs-all problem, each a sum of
small regression trees. Trees are grown by gradient descent on a smooth count of validation errors
of a squared-hinge SVM trained on that representation (`afr_svm`); a split on a group nobody has
paid for yet loses λ·c_g of its gain (`cost_cart`), and λ halves after every block of S new
dimensions, so cheap groups are used first and costly ones only once they pay off. Whenever a tree
first uses a new group a *stage* is closed: the trees so far plus the readout (SVM + Platt scaling)
of that moment. Stage k predicts with the state s_k = Σ of all trees of stages ≤ k, so the
representation accumulates while the readout is refit per stage (`trees.TreeStageModel`).

Training data are split (stratified) 50/40/10 into T (fits the SVM), V (the outer loss) and O
(early stopping). Choices this implementation makes where the paper leaves room, all documented in
docs/nonlinear.md: a new dimension starts from one cost-penalised tree fitted to the residual y − f
of its problem; gradient trees are fitted to the normalised negative gradient and added with step
η·(scale of that dimension); C moves by ±`C_step` in log C along the sign of ∂L/∂log C; a tree that
lowers O accuracy is rolled back and ends its dimension; training stops after `max_blocks` blocks,
when every group is paid, or after `patience` blocks without a better O accuracy.
"""

from __future__ import annotations

import numbers
from dataclasses import replace

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import validate_data

from edgeseq.errors import InputError
from edgeseq.messages import columns_text
from edgeseq.train.trees.afr_svm import fit_svm, outer_gradients, outer_loss, platt
from edgeseq.train.base import (_wrap_validation, check_table_columns, classification_targets, fit_feature_names,
                                fitted_attribute)
from edgeseq.train.trees.cost_cart import Binner, BinnedRows, fit_cost_tree
from edgeseq.forms.groups import check_groups
from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel

C_MIN, C_MAX = 1e-3, 1e3
EMPTY_HALVINGS = 30  # λ halvings tried before λ = 0 while no tree has been built (the paper's ε)


class _Problem:
    """One binary (one-vs-all) AFR problem: labels, weights, its representation columns and its SVM."""

    def __init__(self, y_pm: np.ndarray, C0: float):
        self.y = y_pm
        pos = y_pm > 0
        n, n_pos = y_pm.size, int(pos.sum())
        # "balanced" weights: each class contributes equally to both losses
        self.beta = np.where(pos, n / (2.0 * max(n_pos, 1)), n / (2.0 * max(n - n_pos, 1)))
        self.dims: list[int] = []  # global state indices of this problem's dimensions
        self.logC = float(np.log(C0))
        self.sol = None


class AFRClassifier(ClassifierMixin, BaseEstimator):
    """Anytime classifier whose stages add cost-sensitive boosted-tree features read out by an SVM.

    Parameters
    ----------
    groups, costs, group_names : the feature groups and their extraction costs (as `AnytimeClassifier`;
        ``groups=None`` means one unit-cost group per column).
    n_dims : S, dimensions added per block (per one-vs-all problem).
    n_trees : T, gradient trees per dimension at most (besides its initial tree).
    max_depth : depth of every tree.
    learning_rate : η, step of a gradient tree relative to its dimension's scale.
    lambda0 : initial cost penalty λ in "fraction of the gradient's variance per cost unit"; None
        means 0.1 / (smallest cost), so the first block can afford only cheap groups.
    max_blocks : at most this many blocks (λ halves after each).
    patience : stop after this many blocks without a better O accuracy.
    a : steepness of the smooth validation-error count σ(−a y f).
    C0, C_step : initial SVM C and its step in log C.
    max_bins, min_samples_leaf : histogram resolution and leaf size of the trees.
    random_state : seed of the T/V/O split.
    feature_names : names of the raw columns (length n_features), recorded in the model and its
        export so tables are matched by column name; default the columns of a data frame given to
        `fit`, else none.

    Attributes
    ----------
    stage_model_ : TreeStageModel
        The fitted stages; what `export_model` and the runtimes take.
    classes_ : ndarray of shape (n_classes,)
        The class labels, in the order of the predicted probabilities.
    n_features_in_ : int
        Number of columns seen by `fit`.
    cum_cost_ : ndarray of shape (n_stages,)
        Cumulative cost of each stage (stage 0, the prior, costs 0).
    stage_groups_ : list of list of int
        The group indices each stage adds.
    C_ : ndarray of shape (n_problems,)
        The final SVM C of each one-vs-all problem.
    n_trees_ : int
        Number of gradient trees in the fitted ensemble.
    holdout_accuracy_ : ndarray of shape (n_blocks,)
        Accuracy on the held-out O split after each block.

    Examples
    --------
    Two groups, the second four times as costly; stage 0 is the prior, each later stage pays one group:

    >>> import numpy as np
    >>> from edgeseq.train.trees.afr import AFRClassifier
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(80, 4)); y = (X[:, 0] + 0.5 * X[:, 2] > 0).astype(int)
    >>> clf = AFRClassifier(groups=[[0, 1], [2, 3]], costs=[1.0, 4.0], n_dims=1, n_trees=2, max_blocks=2).fit(X, y)
    >>> clf.cum_cost_.tolist(), clf.stage_groups_
    ([0.0, 1.0, 5.0], [[], [0], [1]])
    >>> clf.score(X, y) > 0.9
    True
    """

    def __init__(self, groups=None, costs=None, group_names=None, n_dims=4, n_trees=4, max_depth=2,
                 learning_rate=0.3, lambda0=None, max_blocks=8, patience=3, a=5.0, C0=1.0, C_step=0.1,
                 max_bins=32, min_samples_leaf=5, random_state=0, feature_names=None):
        self.groups = groups
        self.costs = costs
        self.group_names = group_names
        self.n_dims = n_dims
        self.n_trees = n_trees
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.lambda0 = lambda0
        self.max_blocks = max_blocks
        self.patience = patience
        self.a = a
        self.C0 = C0
        self.C_step = C_step
        self.max_bins = max_bins
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state
        self.feature_names = feature_names

    # ------------------------------------------------------------------ fit
    def _check_params(self) -> None:
        ints = {"n_dims": 1, "n_trees": 0, "max_depth": 1, "max_blocks": 1, "patience": 1, "max_bins": 2,
                "min_samples_leaf": 1}
        for name, lo in ints.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
                raise InputError(f"{name} must be an integer >= {lo}, got {v!r}")
        if self.max_depth > 16 or self.max_bins > 1024:
            raise InputError("max_depth must be <= 16 and max_bins <= 1024")
        pos = {"learning_rate": self.learning_rate, "a": self.a, "C0": self.C0}
        if self.lambda0 is not None:
            pos["lambda0"] = self.lambda0
        for name, v in pos.items():
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(v) or v <= 0:
                raise InputError(f"{name} must be a finite number > 0, got {v!r}")
        if isinstance(self.C_step, bool) or not isinstance(self.C_step, numbers.Real) \
                or not np.isfinite(self.C_step) or self.C_step < 0:
            raise InputError(f"C_step must be a finite number >= 0, got {self.C_step!r}")

    def fit(self, X, y):
        """Learn the representation, the per-stage readouts and the stage sequence.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            At least 10 rows (the data are split 50/40/10); columns of the groups must be finite.
        y : array-like of shape (n_samples,)
            Class labels, at least two classes.

        Returns
        -------
        AFRClassifier
            self.

        Raises
        ------
        InputError
            On invalid parameters, too few rows, a single class or non-finite used columns.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.trees.afr import AFRClassifier
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(80, 4)); y = (X[:, 0] + 0.5 * X[:, 2] > 0).astype(int)
        >>> clf = AFRClassifier(groups=[[0, 1], [2, 3]], costs=[1.0, 4.0], n_dims=1, n_trees=2, max_blocks=2).fit(X, y)
        >>> clf.n_trees_ == clf.stage_model_.ensemble.n_trees, clf.classes_.tolist()
        (True, [0, 1])
        >>> AFRClassifier().fit(X[:5], y[:5])
        Traceback (most recent call last):
        ...
        edgeseq.errors.InputError: n_samples=5: AFR splits the data 50/40/10 and needs at least 10 rows
        """
        self._check_params()
        X, y, classes, k = classification_targets(
            self, X, y, min_samples=10, why="AFR splits the data 50/40/10 and needs at least 10 rows")
        names = fit_feature_names(self, X.shape[1])
        spec = check_groups(self.groups, self.costs, self.group_names, X.shape[1], feature_names=names)
        used = np.concatenate(spec.columns)
        bad = used[~np.isfinite(X[:, used]).all(axis=0)]
        if bad.size:
            raise InputError(f"X contains NaN or Inf in column(s) {columns_text(bad, names)} of the groups; clean "
                             "or impute them first")
        fit = _AFRFit(self, X, k, classes.size, spec)
        # the stage model carries its labels and column names: a saved model is evaluated, reported and
        # exported alone, and tables are matched by name
        self.stage_model_ = replace(fit.run(), classes=classes, output_names=tuple(str(c) for c in classes),
                                    feature_names=names)
        self.classes_ = classes
        self.C_ = np.array([np.exp(p.logC) for p in fit.problems])
        self.n_trees_ = self.stage_model_.ensemble.n_trees
        self.cum_cost_ = self.stage_model_.cum_cost
        self.stage_groups_ = [list(s.new_groups) for s in self.stage_model_.stages]
        self.holdout_accuracy_ = np.array(fit.block_accuracy)
        return self

    # ------------------------------------------------------------------ prediction
    def _model(self) -> TreeStageModel:
        return fitted_attribute(self, "stage_model_")

    def _rows(self, X, model: TreeStageModel, k: int) -> np.ndarray:
        check_table_columns(X, model.feature_names)
        X = _wrap_validation(lambda: validate_data(self, X, accept_sparse=False, ensure_all_finite=False,
                                                   dtype=(np.float64, np.float32), reset=False))
        return model.check_rows(X, k)

    def decision_function(self, X, budget=None, stage=None):
        """Readout of the chosen stage: (n,) logit of classes_[1] (binary) or (n, n_classes).

        Examples
        --------
        For two classes the sigmoid of the logit is the probability of ``classes_[1]``:

        >>> import numpy as np
        >>> from edgeseq.train.trees.afr import AFRClassifier
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(80, 4)); y = (X[:, 0] + 0.5 * X[:, 2] > 0).astype(int)
        >>> clf = AFRClassifier(groups=[[0, 1], [2, 3]], costs=[1.0, 4.0], n_dims=1, n_trees=2, max_blocks=2).fit(X, y)
        >>> z = clf.decision_function(X[:5])
        >>> np.allclose(1 / (1 + np.exp(-z)), clf.predict_proba(X[:5])[:, 1])
        True
        """
        model = self._model()
        k = model.resolve_stage(budget, stage)
        z = model.decision(self._rows(X, model, k), k)
        return z[:, 0] if model.link == "sigmoid" else z

    def predict_proba(self, X, budget=None, stage=None):
        """Class probabilities (n, n_classes) of the last stage within `budget`, or of `stage`.

        Columns of groups the chosen stage does not need may be NaN (not extracted).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.trees.afr import AFRClassifier
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(80, 4)); y = (X[:, 0] + 0.5 * X[:, 2] > 0).astype(int)
        >>> clf = AFRClassifier(groups=[[0, 1], [2, 3]], costs=[1.0, 4.0], n_dims=1, n_trees=2, max_blocks=2).fit(X, y)
        >>> p = clf.predict_proba(X[:3], budget=1.0)
        >>> p.shape, np.allclose(p.sum(axis=1), 1)
        ((3, 2), True)
        >>> X_cheap = X[:3].copy(); X_cheap[:, 2:] = np.nan  # the costly group not extracted
        >>> np.allclose(clf.predict_proba(X_cheap, budget=1.0), p)
        True
        """
        model = self._model()
        k = model.resolve_stage(budget, stage)
        return model.apply_link(model.decision(self._rows(X, model, k), k))

    def predict(self, X, budget=None, stage=None):
        """Most probable class of the last stage within `budget`, or of `stage` (default: the last).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.trees.afr import AFRClassifier
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(80, 4)); y = (X[:, 0] + 0.5 * X[:, 2] > 0).astype(int)
        >>> clf = AFRClassifier(groups=[[0, 1], [2, 3]], costs=[1.0, 4.0], n_dims=1, n_trees=2, max_blocks=2).fit(X, y)
        >>> np.array_equal(clf.predict(X, stage=1), clf.classes_[clf.predict_proba(X, stage=1).argmax(axis=1)])
        True
        """
        proba = self.predict_proba(X, budget=budget, stage=stage)
        return self.classes_[np.argmax(proba, axis=1)]

    def staged_predict_proba(self, X):
        """Yield the class probabilities of stage 0, 1, ..., K (the state carried across stages).

        Every tree is evaluated once, so this is the cheap way to get an anytime curve.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.trees.afr import AFRClassifier
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(80, 4)); y = (X[:, 0] + 0.5 * X[:, 2] > 0).astype(int)
        >>> clf = AFRClassifier(groups=[[0, 1], [2, 3]], costs=[1.0, 4.0], n_dims=1, n_trees=2, max_blocks=2).fit(X, y)
        >>> staged = list(clf.staged_predict_proba(X[:4]))
        >>> len(staged) == len(clf.cum_cost_), all(np.allclose(p, clf.predict_proba(X[:4], stage=k))
        ...                                         for k, p in enumerate(staged))
        (True, True)
        """
        model = self._model()
        X = self._rows(X, model, len(model.stages) - 1)
        for z in model.staged_decision(X):
            yield model.apply_link(z)

    def staged_predict(self, X):
        """Yield the predicted classes of stage 0, 1, ..., K.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.trees.afr import AFRClassifier
        >>> rng = np.random.default_rng(0); X = rng.normal(size=(80, 4)); y = (X[:, 0] + 0.5 * X[:, 2] > 0).astype(int)
        >>> clf = AFRClassifier(groups=[[0, 1], [2, 3]], costs=[1.0, 4.0], n_dims=1, n_trees=2, max_blocks=2).fit(X, y)
        >>> [float(np.mean(p == y)) for p in clf.staged_predict(X)]  # training accuracy per stage
        [0.575, 0.8625, 0.9875]
        """
        for proba in self.staged_predict_proba(X):
            yield self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


class _AFRFit:
    """The outer loop of one fit (kept apart from the estimator so its state is local)."""

    def __init__(self, est: AFRClassifier, X: np.ndarray, k: np.ndarray, n_classes: int, spec):
        self.est, self.X, self.spec = est, X, spec
        idx = np.arange(X.shape[0])
        rs = est.random_state if isinstance(est.random_state, numbers.Integral) else 0
        self.iT, rest = _split(idx, k, 0.5, rs)
        self.iV, self.iO = _split(rest, k[rest], 0.2, rs)
        self.iF = np.concatenate([self.iT, self.iV])  # rows the trees are fitted on
        self.link = "sigmoid" if n_classes == 2 else "softmax"
        labels = [k == 1] if n_classes == 2 else [k == c for c in range(n_classes)]
        self.problems = [_Problem(np.where(lab, 1.0, -1.0), est.C0) for lab in labels]
        used = np.concatenate(spec.columns)
        self.binner = Binner(X[self.iF], used, est.max_bins)
        self.codes_F = BinnedRows(self.binner.codes(X[self.iF]), self.binner.n_bins)
        self.X32 = X.astype(np.float32)
        owner = np.full(X.shape[1], -1)
        for g, cols in enumerate(spec.columns):
            owner[cols] = g
        self.col_group = owner[used]
        self.phi = np.zeros((X.shape[0], 0))
        self.trees: list = []  # (FittedTree, global dim, scale)
        self.paid: set[int] = set()
        self.stages: list[TreeStage] = []
        self.open: tuple | None = None  # (new_groups, first tree index) of the stage being built
        prior = np.bincount(k, minlength=n_classes) / k.size
        b0 = np.log(prior[1] / prior[0])[None] if n_classes == 2 else np.log(np.maximum(prior, 1e-300))
        self.b0 = b0  # stage 0: softmax(log prior) is exactly the prior
        # a problem without dimensions yet, inside a later stage, scores with its prior log-odds: the
        # same scale as the Platt-scaled scores of the others
        self.b_odds = b0 if n_classes == 2 else np.log(np.maximum(prior, 1e-300) / np.maximum(1 - prior, 1e-300))
        self.block_accuracy: list[float] = []

    # ---------------------------------------------------------------- SVM and readouts
    def _Phi(self, p: _Problem, rows) -> np.ndarray:
        return self.phi[np.ix_(rows, p.dims)]

    def _refit(self, p: _Problem) -> None:
        p.sol = fit_svm(self._Phi(p, self.iT), p.y[self.iT], p.beta[self.iT], float(np.exp(p.logC)), warm=p.sol)

    def _f(self, p: _Problem, rows) -> np.ndarray:
        if p.sol is None or not p.dims:
            return np.zeros(len(rows))
        return self._Phi(p, rows) @ p.sol.w + p.sol.b

    def _acc_O(self, p: _Problem) -> float:
        return float(np.mean(np.sign(self._f(p, self.iO)) == p.y[self.iO]))

    def _holdout_score(self) -> tuple[float, float]:
        """(mean O accuracy, −mean smooth O loss) over the problems: compared lexicographically, so
        a block that leaves the (coarse) accuracy unchanged still counts when it lowers the loss."""
        acc = float(np.mean([self._acc_O(p) for p in self.problems]))
        loss = float(np.mean([outer_loss(self._f(p, self.iO), p.y[self.iO], p.beta[self.iO], self.est.a)
                              / p.beta[self.iO].sum() for p in self.problems]))
        return acc, -loss

    def _readout(self) -> tuple[np.ndarray, np.ndarray]:
        """(W, b) of the current SVMs with Platt scaling folded in, for the state as it is now."""
        n_state = self.phi.shape[1]
        P = len(self.problems)
        W, b = np.zeros((n_state, P)), self.b_odds.astype(np.float64).copy()
        for c, p in enumerate(self.problems):
            if p.sol is None or not p.dims:
                continue
            A, B = platt(self._f(p, self.iV), (p.y[self.iV] > 0).astype(np.float64))
            W[p.dims, c] = A * p.sol.w
            b[c] = A * p.sol.b + B
        return W, b

    # ---------------------------------------------------------------- trees and stages
    def _propose(self, p: _Problem, dim: int, target: np.ndarray, lam: float, scale: float | None):
        """Fit one cost-penalised tree to `target` (on T ∪ V); None when it has no split."""
        tree = fit_cost_tree(self.binner, self.codes_F, target, self.col_group, self.spec.costs,
                             self.paid, lam, self.est.max_depth, self.est.min_samples_leaf)
        if tree.n_splits == 0:
            return None
        out = _tree_output(tree, self.X32)
        return tree, out, 1.0 if scale is None else self.est.learning_rate * scale

    def _accept(self, tree, dim: int, step: float, readout_before) -> None:
        """Record an accepted tree; one that pays a new group closes the stage in progress with the
        readout of the moment before it (``readout_before``) and opens the next."""
        if tree.new_groups:
            if self.open is not None:
                self._close(readout_before)
            self.open = (tuple(tree.new_groups), len(self.trees))
            self.paid.update(tree.new_groups)
        self.trees.append((tree, dim, step))

    def _close(self, readout) -> None:
        groups, start = self.open
        W, b = readout  # W is padded to the final state size in _model()
        self.stages.append((groups, start, len(self.trees), W, b))

    def run(self) -> TreeStageModel:
        est, spec = self.est, self.spec
        lam = est.lambda0 if est.lambda0 is not None else 0.1 / float(spec.costs.min())
        eps = lam * 2.0 ** -EMPTY_HALVINGS
        best, stale, block = (-np.inf, -np.inf), 0, 0
        while block < est.max_blocks:
            for _s in range(est.n_dims):
                for p in self.problems:
                    self._grow_dimension(p, lam)
            if not self.trees:
                # Nothing built yet: the paper's outer loop runs while λ > ε, so only λ moves (an
                # empty block counts toward neither max_blocks nor patience); the last try is λ = 0,
                # where any split with a positive gain is taken and a depth-2 tree can start a
                # symmetric interaction (x·y) whose first split alone gains almost nothing.
                if lam == 0.0:
                    break
                lam = lam / 2.0 if lam > eps else 0.0
                continue
            block += 1
            score = self._holdout_score()
            self.block_accuracy.append(score[0])
            if score > best:
                best, stale = score, 0
            else:
                stale += 1
            if stale >= est.patience or len(self.paid) == spec.n_groups and stale:
                break
            lam /= 2.0
        if self.open is None:
            raise InputError("AFR found no tree with a split on these data, even with no cost penalty "
                             "(the classes may not be separable by its shallow trees); try "
                             "AnytimeBoostingClassifier, which boosts deeper LightGBM trees per stage")
        self._close(self._readout())
        return self._model()

    def _grow_dimension(self, p: _Problem, lam: float) -> None:
        est = self.est
        fit_rows = self.iF
        resid = p.y[fit_rows] - self._f(p, fit_rows)
        first = self._propose(p, -1, resid, lam, None)
        if first is None:
            return
        tree, out, _ = first
        readout_before = self._readout() if tree.new_groups else None
        dim = self.phi.shape[1]
        scale = float(np.sqrt(np.mean(out[fit_rows] ** 2))) or 1.0
        self.phi = np.column_stack([self.phi, out])
        p.dims.append(dim)
        self._accept(tree, dim, 1.0, readout_before)
        self._refit(p)
        best_acc = self._acc_O(p)
        for _t in range(est.n_trees):
            T, V = self.iT, self.iV
            dT, dV, dC = outer_gradients(p.sol, self._Phi(p, T), p.y[T], p.beta[T], self._Phi(p, V), p.y[V],
                                         p.beta[V], est.a)
            j = p.dims.index(dim)
            grad = np.concatenate([dT[:, j], dV[:, j]])
            rms = float(np.sqrt(np.mean(grad ** 2)))
            if rms == 0.0:
                break
            prop = self._propose(p, dim, -grad / rms, lam, scale)
            if prop is None:
                break
            tree, out, step = prop
            readout_before = self._readout() if tree.new_groups else None
            if float(out[fit_rows] @ grad) >= 0:  # not a descent direction
                break
            saved = (self.phi[:, dim].copy(), p.sol, p.logC)
            self.phi[:, dim] += step * out
            if abs(dC) * np.exp(p.logC) > 1e-6 * float(p.beta[V].sum()):  # dL/dlog C = C·dL/dC
                p.logC = float(np.clip(p.logC - est.C_step * np.sign(dC), np.log(C_MIN), np.log(C_MAX)))
            self._refit(p)
            acc = self._acc_O(p)
            if acc < best_acc:  # early stopping on O: roll the tree back and end this dimension
                self.phi[:, dim], p.sol, p.logC = saved
                break
            best_acc = acc
            self._accept(tree, dim, step, readout_before)

    def _model(self) -> TreeStageModel:
        n_state = self.phi.shape[1]
        P = len(self.problems)
        ens = _ensemble(self.trees, self.X.shape[1], max(n_state, 1))
        stages = [TreeStage((), 0.0, 0, 0, np.zeros((max(n_state, 1), P)), self.b0)]
        for groups, start, stop, W, b in self.stages:
            W_full = np.zeros((max(n_state, 1), P))
            W_full[:W.shape[0]] = W
            stages.append(TreeStage(groups, float(sum(self.spec.costs[g] for g in groups)), start, stop, W_full, b))
        outputs = tuple(str(c) for c in range(2 if self.link == "sigmoid" else P))
        return TreeStageModel(self.spec.names, self.spec.columns, self.spec.costs, ens, tuple(stages), self.link,
                              outputs)


def _split(idx: np.ndarray, k: np.ndarray, test_size: float, seed: int):
    """Stratified split when every class allows it, else a plain random split (tiny data)."""
    try:
        return train_test_split(idx, test_size=test_size, stratify=k, random_state=seed)
    except ValueError:
        return train_test_split(idx, test_size=test_size, random_state=seed)


def _tree_output(tree, X: np.ndarray) -> np.ndarray:
    """The tree's output on every row, by the one evaluator every consumer uses (`TreeEnsemble`)."""
    one = TreeEnsemble(tree.feature, tree.threshold, tree.left, tree.right, tree.value, roots=np.zeros(1, np.int64),
                       target=np.zeros(1, np.int64), n_features=X.shape[1], n_targets=1)
    return one.tree_outputs(X)[:, 0]


def _ensemble(trees: list, n_features: int, n_state: int) -> TreeEnsemble:
    """Concatenate the accepted trees, with each tree's step η·scale folded into its leaves."""
    parts, roots, targets, offset = [], [], [], 0
    for tree, dim, step in trees:
        sh = lambda c: np.where(c >= 0, c + offset, -1)  # noqa: E731
        parts.append((tree.feature, tree.threshold, sh(tree.left), sh(tree.right), tree.value * step))
        roots.append(offset)
        targets.append(dim)
        offset += tree.feature.size
    if not parts:
        z = np.zeros(0)
        return TreeEnsemble(z, z, z, z, z, z.astype(np.int64), z.astype(np.int64), n_features, n_state)
    cols = [np.concatenate(c) for c in zip(*parts)]
    return TreeEnsemble(*cols, roots=np.array(roots), target=np.array(targets), n_features=n_features,
                        n_targets=n_state)
