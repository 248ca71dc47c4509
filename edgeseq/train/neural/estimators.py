"""AnytimeNetClassifier and AnytimeNetRegressor: anytime neural networks over costed feature groups.

Stage k pays for its group(s), runs one dense block (with a conv branch in front of each windowed
group) on the previous stage's hidden vector plus the new inputs, and answers through its own exit
head. All exits are trained together in float64 with hand-written backpropagation and Adam on the
weighted sum of their losses (`edgeseq.loss_weights`); the fitted object is a `LayerBlockModel`.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from edgeseq.budget import warn_if_budget_affords_nothing
from edgeseq.errors import InputError
from edgeseq.forms.layer_blocks import conv_output_length
from edgeseq.train.base import _wrap_validation, classification_targets, fitted_attribute
from edgeseq.forms.groups import check_groups
from edgeseq.train.neural import eann
from edgeseq.train.neural.layers import head_loss
from edgeseq.train.neural.net import (ConvSpec, NetSpec, Scaling, StageSpec, default_conv, exit_losses,
                                      to_stage_model, train_net)
from edgeseq.train.neural.schemes import SCHEMES

# A float multiply-accumulate with its two loads costs about 4 cycles on a Cortex-M4F; at 100 MHz
# that is 4e-8 s. Costs given in other units need their own figure (cycles: 4.0; ms: 4e-5).
DEFAULT_COST_PER_MAC = 4e-8
MAX_HIDDEN = 1024  # a Cortex-M4 has 64-256 KB of RAM; the state buffers are 2 x width floats


class _AnytimeNetBase(BaseEstimator):
    def __init__(self, groups=None, costs=None, *, group_names=None, group_shapes=None, blocks=None,
                 scheme="const", order="linear", hidden=32, conv=None, eann_base=None, commit="auto",
                 cost_per_mac=DEFAULT_COST_PER_MAC, max_epochs=100, batch_size=128, learning_rate=3e-3,
                 validation_fraction=0.1, patience=20, gamma=0.05, random_state=None):
        self.groups = groups
        self.costs = costs
        self.group_names = group_names
        self.group_shapes = group_shapes
        self.blocks = blocks
        self.scheme = scheme
        self.order = order
        self.hidden = hidden
        self.conv = conv
        self.eann_base = eann_base
        self.commit = commit
        self.cost_per_mac = cost_per_mac
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.gamma = gamma
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    def _check_params(self) -> None:
        for name, lo, hi in (("hidden", 1, MAX_HIDDEN), ("max_epochs", 1, 100_000), ("batch_size", 1, 1 << 20),
                             ("patience", 1, 100_000)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not lo <= v <= hi:
                raise InputError(f"{name} must be an integer in {lo}..{hi}, got {v!r}")
        for name, lo, hi in (("learning_rate", 0.0, 10.0), ("validation_fraction", 0.0, 0.9),
                             ("cost_per_mac", 0.0, 1e30), ("gamma", 0.0, 1.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not np.isfinite(v) or not lo <= v <= hi:
                raise InputError(f"{name} must be a number in [{lo}, {hi}], got {v!r}")
        if self.learning_rate <= 0:
            raise InputError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if not isinstance(self.scheme, str) or self.scheme not in SCHEMES:
            raise InputError(f"scheme must be one of {SCHEMES}, got {self.scheme!r}")
        if not isinstance(self.commit, str) or self.commit not in ("auto", "improving", "every"):
            raise InputError(f"commit must be 'auto', 'improving' or 'every', got {self.commit!r}")
        if self.order not in ("linear", "given"):
            raise InputError(f"order must be 'linear' or 'given', got {self.order!r}")
        if self.eann_base is not None and (isinstance(self.eann_base, bool) or not isinstance(self.eann_base, numbers.Real)
                                           or not 1 < self.eann_base <= 16):
            raise InputError(f"eann_base must be None or a number in (1, 16], got {self.eann_base!r}")

    def _shapes(self, spec) -> list:
        shapes = self.group_shapes
        if shapes is None:
            return [None] * spec.n_groups
        if isinstance(shapes, (str, bytes)) or len(shapes) != spec.n_groups:
            raise InputError(f"group_shapes must be a list with one entry per group ({spec.n_groups})")
        out = []
        for g, sh in enumerate(shapes):
            if sh is None:
                out.append(None)
                continue
            ok = isinstance(sh, (tuple, list)) and len(sh) == 2 and all(
                isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1 for v in sh)
            if not ok or sh[0] * sh[1] != spec.columns[g].size:
                raise InputError(f"group_shapes[{g}] must be None or (channels, length) with channels x length = "
                                 f"{spec.columns[g].size} (the group's columns, channel-major), got {sh!r}")
            out.append((int(sh[0]), int(sh[1])))
        return out

    def _convs(self, shapes) -> list:
        convs = []
        for g, sh in enumerate(shapes):
            if sh is None:
                convs.append(None)
                continue
            if self.conv is None:
                cs = default_conv(sh)
            else:
                if not isinstance(self.conv, dict) or set(self.conv) - set(ConvSpec.__dataclass_fields__):
                    raise InputError(f"conv must be a dict with keys among {sorted(ConvSpec.__dataclass_fields__)}")
                cs = ConvSpec(**self.conv)
            L_out = conv_output_length(sh[1], cs.kernel, cs.stride) if cs.kernel <= sh[1] else 0
            if cs.pool not in ("none", "max", "avg") or L_out < 1 or L_out // max(cs.pool_size, 1) < 1 \
                    or min(cs.filters, cs.kernel, cs.stride, cs.pool_size) < 1:
                raise InputError(f"conv settings {cs} leave no output over group {g}'s window of length {sh[1]}")
            convs.append(cs)
        return convs

    def _stages(self, spec, order) -> tuple:
        if self.blocks is None:
            return tuple(StageSpec((g,), (g,), self.hidden) for g in order)
        if isinstance(self.blocks, (str, bytes, dict)) or not len(self.blocks):
            raise InputError("blocks must be a non-empty list of dicts {'groups': [...], 'width': int}")
        stages, paid = [], set()
        for i, blk in enumerate(self.blocks):
            if not isinstance(blk, dict) or set(blk) - {"groups", "width"}:
                raise InputError(f"blocks[{i}] must be a dict with keys 'groups' and 'width'")
            gs = []
            for ref in blk.get("groups", []):
                g = spec.names.index(ref) if isinstance(ref, str) and ref in spec.names else ref
                if isinstance(g, bool) or not isinstance(g, numbers.Integral) or not 0 <= g < spec.n_groups or g in paid:
                    raise InputError(f"blocks[{i}] names an unknown or already paid group {ref!r}")
                gs.append(int(g))
                paid.add(int(g))
            w = blk.get("width", self.hidden)
            if isinstance(w, bool) or not isinstance(w, numbers.Integral) or not 1 <= w <= MAX_HIDDEN:
                raise InputError(f"blocks[{i}]['width'] must be an integer in 1..{MAX_HIDDEN}, got {w!r}")
            if not gs and not stages:
                raise InputError("the first block must read at least one group")
            stages.append(StageSpec(tuple(gs), tuple(gs), int(w)))
        return tuple(stages)

    def _order(self, X, y, spec, progress) -> list[int]:
        if self.order == "given" or self.blocks is not None or spec.n_groups == 1:
            return list(range(spec.n_groups))
        from edgeseq.train.linear.regressor import AnytimeRegressor
        # classes: squared loss on one-hot class indicators, the papers' setup for classification. It
        # needs one statistics pass; the logistic refits of AnytimeClassifier took 53 s of CPU on
        # MNIST-5k's 28 row groups against 0.3 s, and picked the same first groups.
        Y = np.eye(int(y.max()) + 1)[y] if self._task == "classification" else y
        lin = AnytimeRegressor([c.tolist() for c in spec.columns], spec.costs.tolist(), group_names=list(spec.names))
        order = [int(g) for g in lin.fit(X, Y).sequence_]
        if progress is not None:
            progress(f"group order (linear CS-G-OMP): {', '.join(spec.names[g] for g in order)}")
        return order

    # ------------------------------------------------------------------ fit
    def _fit(self, X, y, targets, link, P, prior, output_names, progress):
        self._check_params()
        spec = check_groups(self.groups, self.costs, self.group_names, X.shape[1])
        used = np.concatenate(spec.columns)
        if not np.all(np.isfinite(X[:, used])):
            raise InputError("X contains NaN or Inf in columns of the groups; clean or impute them first")
        shapes = self._shapes(spec)
        convs = self._convs(shapes)
        order = self._order(X, y, spec, progress)
        net = NetSpec(tuple(c.tolist() for c in spec.columns), tuple(shapes), tuple(convs),
                      self._stages(spec, order), link, P)
        rng = np.random.default_rng(check_random_state(self.random_state).randint(1 << 31))
        n = X.shape[0]
        n_val = int(round(self.validation_fraction * n))
        perm = rng.permutation(n)
        if n_val >= 1 and n - n_val >= 2:
            tr, va = perm[n_val:], perm[:n_val]
        else:
            tr, va = perm, perm[:0]
        t = targets
        scaling = Scaling.fit(X[tr], net.columns, net.shapes, t[tr] if link == "identity" else None)
        if link == "identity":
            t = (t - scaling.y_mu) / scaling.y_sd
        Xs = scaling.apply(X)
        kw = dict(gamma=self.gamma, max_epochs=self.max_epochs, batch_size=self.batch_size,
                  learning_rate=self.learning_rate, patience=self.patience, rng=rng, progress=progress)
        X_val = Xs[va] if va.size else None
        t_val = t[va] if va.size else None
        commits = None
        if self.eann_base is None:
            if progress is not None:
                progress(f"training {len(net.stages)} stages on {tr.size:,} rows ({va.size:,} for early stopping), "
                         f"scheme {self.scheme}")
            scheme = getattr(self, "_exit_weights", None)  # set by `opt_networks` only
            res = train_net(net, Xs[tr], t[tr], X_val=X_val, t_val=t_val,
                            scheme=self.scheme if scheme is None else scheme, **kw)
            params, self.n_epochs_, weights = res.params, [res.best_epoch], res.weights
        else:
            depths = eann.member_depths(len(net.stages), float(self.eann_base))
            members, self.n_epochs_ = [], []
            for d in depths:
                if progress is not None:
                    progress(f"EANN member of depth {d} (of {depths})")
                res = train_net(eann.member_spec(net, d), Xs[tr], t[tr], X_val=X_val, t_val=t_val,
                                scheme=self.scheme, **kw)
                members.append(res.params)
                self.n_epochs_.append(res.best_epoch)
            net = eann.eann_spec(net, depths)
            params, weights = eann.merge_member_params(members), res.weights
        if self.commit == "improving" or (self.commit == "auto" and self.eann_base is not None):
            rows = va if va.size else tr
            prior_z = np.broadcast_to(self._scaled_prior(prior, scaling, link), (rows.size, P))
            commits = eann.commits_from_losses(head_loss(prior_z, t[rows], link)[0],
                                               exit_losses(net, params, Xs[rows], t[rows]))
        self.stage_model_ = to_stage_model(net, params, scaling, group_names=spec.names, costs=spec.costs,
                                           n_features=X.shape[1], prior=prior, output_names=output_names,
                                           cost_per_mac=self.cost_per_mac, commits=commits,
                                           classes=getattr(self, "classes_", None), group_shapes=shapes)
        self.cum_cost_ = self.stage_model_.cum_cost
        self.stage_groups_ = [list(s.new_groups) for s in self.stage_model_.stages]
        self.stage_macs_ = self.stage_model_.stage_macs
        self.sequence_ = np.array(order, np.int64)
        self.loss_weights_ = weights
        if progress is not None:
            progress(f"done: {len(self.stage_model_.stages) - 1} stages, epochs {self.n_epochs_}")
        return self

    @staticmethod
    def _scaled_prior(prior, scaling, link):
        if link == "identity":
            return (prior - scaling.y_mu) / scaling.y_sd
        return prior

    # ------------------------------------------------------------------ prediction
    def _model(self):
        return fitted_attribute(self, "stage_model_")

    def _rows(self, X, k: int) -> np.ndarray:
        X = _wrap_validation(lambda: validate_data(self, X, accept_sparse=False, ensure_all_finite=False,
                                                   dtype=(np.float64, np.float32), reset=False))
        return self._model().check_rows(X, k)

    def _decision(self, X, budget, stage):
        model = self._model()
        k = model.resolve_stage(budget, stage)
        warn_if_budget_affords_nothing(model.cum_cost, budget, stacklevel=4)
        return model, model.decision(self._rows(X, k), k)

    def _staged(self, X):
        model = self._model()
        X = self._rows(X, len(model.stages) - 1)
        yield from ((model, z) for z in model.staged_decision(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


_PARAMS_DOC = """
    Parameters
    ----------
    groups : list of lists of int, array of labels, or None, default=None
        Column indices of each feature group (``None``: one group per column).
    costs : sequence of float or None, default=None
        Extraction cost of each group (``None`` with ``groups=None``: unit costs).
    group_names : sequence of str, optional
        Names of the groups (default ``g0, g1, ...``).
    group_shapes : list of (None or (int, int)), optional
        Aligned with `groups`: ``None`` for a flat vector, or ``(channels, length)`` for a window whose
        columns are channel-major (channel c is columns c·L … c·L + L − 1). A window gets a conv branch.
    blocks : list of dict, optional
        The stages, each ``{"groups": [names or indices paid by the stage], "width": int}`` (a stage may
        pay no group: one more layer). ``None``: one stage per group, in the order below, `hidden` wide.
    scheme : {"const", "adaloss", "linear", "half_end", "sieve"}, default="const"
        Weights of the exits' losses (`edgeseq.loss_weights`). CONST, the plain sum, because on the
        benchmarks' small networks (digits, MNIST-5k, an IMU set) it was as good as or better than every
        other scheme at early budgets and at the last exit; AdaLoss suits deep networks whose exits'
        losses differ by orders of magnitude.
    order : {"linear", "given"}, default="linear"
        Group order without `blocks`: the linear CS-G-OMP order fitted on the same data (for classes,
        on one-hot class indicators with squared loss: one statistics pass), or as given.
    hidden : int, default=32
        Width of each dense block: two 32-float state buffers and 32 x 32 weights per stage fit the
        RAM and flash of a Cortex-M4 many times over.
    conv : dict, optional
        Settings of every conv branch (``filters``, ``kernel``, ``stride``, ``pool`` in
        {"none", "max", "avg"}, ``pool_size``); default 8 filters, kernel min(5, L), stride 1, max-pool 2.
    eann_base : float, optional
        Train an EANN instead: members of depth 1, b, b², … chained (each member's first stage resets
        the state).
    commit : {"auto", "improving", "every"}, default="auto"
        Which exits the budget rule may answer with. ``"improving"``: only an exit whose loss on the
        validation rows (the training rows when there are none) is below that of the prior and of
        every earlier committing exit; the others are exported with ``commit=False`` and still run,
        since later stages read their state. The committed answers then never get worse on the
        validation rows as the budget grows, which a single network does not promise by itself.
        ``"every"``: every exit commits. ``"auto"``: ``"improving"`` for an EANN (its members are
        trained apart, and a shallow member's exit after a deep one's is often worse) and
        ``"every"`` for a single network, because on a small validation split the rule can close a
        last exit that is better on the training rows and on new rows alike (scikit-learn's own
        estimator checks, 30 validation rows, fall below their training-accuracy bar with it).
    cost_per_mac : float, default=4e-8
        Cost of one multiply-accumulate in the groups' cost unit; a stage costs its new groups plus
        its MACs times this. The default is seconds on a 100 MHz Cortex-M4F (about 4 cycles per float MAC).
    max_epochs, batch_size, learning_rate : int, int, float, default=100, 128, 3e-3
        Minibatch Adam.
    validation_fraction : float, default=0.1
        Rows held out for early stopping and for the `commit` decisions.
    patience : int, default=20
        Epochs without a better validation objective (the scheme-weighted mean of the exits' losses;
        under AdaLoss the mean of their logarithms) before training stops; the best epoch's weights
        are kept. Generous because an early exit that cannot yet do better than the
        prior can hold the mean flat for a while before the deeper exits find their features.
    gamma : float, default=0.05
        AdaLoss's constant share γ.
    random_state : int or None, default=None
        Seed of the split, the initialisation and the minibatches.
"""


class AnytimeNetClassifier(ClassifierMixin, _AnytimeNetBase):
    __doc__ = """Anytime neural-network classifier: one dense block and exit per stage of costed feature groups.
""" + _PARAMS_DOC + """
    Learned attributes: ``stage_model_`` (`LayerBlockModel`), ``classes_``, ``cum_cost_``,
    ``stage_groups_``, ``stage_macs_``, ``sequence_`` (group order), ``loss_weights_`` (the last
    weights used), ``n_epochs_`` (best epoch per network trained).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeNetClassifier
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(300, 4)); y = (X[:, 0] * X[:, 2] > 0).astype(int)
    >>> clf = AnytimeNetClassifier([[0, 1], [2, 3]], [1.0, 2.0], order="given", hidden=16, random_state=0).fit(X, y)
    >>> [round(float(c), 4) for c in clf.cum_cost_]     # groups plus MACs x 4e-8
    [0.0, 1.0, 3.0]
    >>> [round(float(np.mean(p == y)), 1) for p in clf.staged_predict(X)][-1] >= 0.9   # XOR needs both groups
    True
    """

    _task = "classification"

    def fit(self, X, y, *, progress=None):
        """Train every stage's block and exit together; early stopping on a validation split.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Columns of the groups must be finite.
        y : array-like of shape (n_samples,)
            Class labels, at least two classes.
        progress : callable, optional
            Receives one line of text per phase and every 10 epochs.

        Returns
        -------
        AnytimeNetClassifier
            self.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeNetClassifier
        >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
        >>> lines = []
        >>> clf = AnytimeNetClassifier(max_epochs=5, random_state=0).fit(X, y, progress=lines.append)
        >>> lines[-1].startswith("done: 2 stages")
        True
        """
        X, y, classes, k = classification_targets(self, X, y)
        X = np.asarray(X, np.float64)
        self.classes_ = classes
        freq = np.maximum(np.bincount(k, minlength=classes.size) / k.size, 1e-12)
        if classes.size == 2:
            link, P, prior, names = "sigmoid", 1, np.array([np.log(freq[1] / freq[0])]), tuple(map(str, classes))
        else:
            link, P, prior, names = "softmax", classes.size, np.log(freq), tuple(map(str, classes))
        return self._fit(X, k, k, link, P, prior, names, progress)

    def decision_function(self, X, budget=None, stage=None):
        """Readout of the chosen stage: (n,) logit of classes_[1] (binary) or (n, n_classes).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeNetClassifier
        >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = AnytimeNetClassifier(max_epochs=5, random_state=0).fit(X, y)
        >>> clf.decision_function(X[:4]).shape
        (4,)
        """
        model, z = self._decision(X, budget, stage)
        return z[:, 0] if model.link == "sigmoid" else z

    def predict_proba(self, X, budget=None, stage=None):
        """Class probabilities (n, n_classes) of the last committing stage within `budget`, or of `stage`.

        Columns of groups the chosen stage does not need may be NaN (not extracted).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeNetClassifier
        >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = AnytimeNetClassifier([[0], [1]], [1.0, 1.0], order="given", max_epochs=5, random_state=0).fit(X, y)
        >>> X_cheap = X[:3].copy(); X_cheap[:, 1] = np.nan
        >>> clf.predict_proba(X_cheap, budget=1.5).shape
        (3, 2)
        """
        model, z = self._decision(X, budget, stage)
        return model.apply_link(z)

    def predict(self, X, budget=None, stage=None):
        """Most probable class of the last committing stage within `budget`, or of `stage` (default: the last).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeNetClassifier
        >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = AnytimeNetClassifier(max_epochs=5, random_state=0).fit(X, y)
        >>> clf.predict(X[:3], budget=0.0).tolist() == [clf.classes_[int(np.mean(y) > 0.5)]] * 3   # the prior
        True
        """
        proba = self.predict_proba(X, budget=budget, stage=stage)  # first: it refuses an unfitted estimator
        return self.classes_[np.argmax(proba, axis=1)]

    def staged_predict_proba(self, X):
        """Yield the class probabilities of stage 0, 1, ..., K (every stage, committing or not).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeNetClassifier
        >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = AnytimeNetClassifier(max_epochs=5, random_state=0).fit(X, y)
        >>> len(list(clf.staged_predict_proba(X))) == len(clf.cum_cost_)
        True
        """
        for model, z in self._staged(X):
            yield model.apply_link(z)

    def staged_predict(self, X):
        """Yield the predicted classes of stage 0, 1, ..., K.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeNetClassifier
        >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = (X[:, 0] > 0).astype(int)
        >>> clf = AnytimeNetClassifier(max_epochs=5, random_state=0).fit(X, y)
        >>> [p.shape for p in clf.staged_predict(X[:2])]
        [(2,), (2,), (2,)]
        """
        for proba in self.staged_predict_proba(X):
            yield self.classes_[np.argmax(proba, axis=1)]


class AnytimeNetRegressor(RegressorMixin, _AnytimeNetBase):
    __doc__ = """Anytime neural-network regressor: one dense block and exit per stage of costed feature groups.
""" + _PARAMS_DOC + """
    Learned attributes: ``stage_model_`` (`LayerBlockModel`), ``cum_cost_``, ``stage_groups_``,
    ``stage_macs_``, ``sequence_`` (group order), ``loss_weights_``, ``n_epochs_``.

    Examples
    --------
    A window of 2 channels x 8 steps (a conv branch) and a flat group:

    >>> import numpy as np
    >>> from edgeseq import AnytimeNetRegressor
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(400, 18))
    >>> y = X[:, :8].max(axis=1) + X[:, 16]
    >>> reg = AnytimeNetRegressor([list(range(16)), [16, 17]], [2.0, 1.0], group_shapes=[(2, 8), None],
    ...                           order="given", random_state=0).fit(X, y)
    >>> reg.stage_model_.stages[1].injections[0].conv.filters
    8
    >>> bool(reg.score(X, y) > 0.8)
    True
    """

    _task = "regression"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def fit(self, X, y, *, progress=None):
        """Train every stage's block and exit together; early stopping on a validation split.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Columns of the groups must be finite.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets.
        progress : callable, optional
            Receives one line of text per phase and every 10 epochs.

        Returns
        -------
        AnytimeNetRegressor
            self.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeNetRegressor
        >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = X[:, 0]
        >>> AnytimeNetRegressor(max_epochs=5, random_state=0).fit(X, y).cum_cost_.shape
        (3,)
        """
        X, y = _wrap_validation(lambda: validate_data(
            self, X, y, accept_sparse=False, ensure_all_finite=False, dtype=(np.float64, np.float32),
            multi_output=True, y_numeric=True, ensure_min_samples=1))
        if X.shape[0] < 2:
            raise InputError(f"n_samples={X.shape[0]}: need at least 2 samples to fit")
        X = np.asarray(X, np.float64)
        Y = np.asarray(y, np.float64)
        if not np.all(np.isfinite(Y)):
            raise InputError("y contains NaN or Inf")
        self._y_1d = Y.ndim == 1
        Y2 = Y.reshape(Y.shape[0], -1)
        names = ("y",) if Y2.shape[1] == 1 else tuple(f"y{i}" for i in range(Y2.shape[1]))
        return self._fit(X, Y, Y2, "identity", Y2.shape[1], Y2.mean(axis=0), names, progress)

    def predict(self, X, budget=None, stage=None):
        """Prediction of the last committing stage within `budget`, or of `stage` (default: the last).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeNetRegressor
        >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = X[:, 0]
        >>> reg = AnytimeNetRegressor(max_epochs=5, random_state=0).fit(X, y)
        >>> bool(np.allclose(reg.predict(X[:2], budget=0.0), y.mean()))   # stage 0: the training mean
        True
        """
        _, z = self._decision(X, budget, stage)
        return z[:, 0] if self._y_1d else z

    def staged_predict(self, X):
        """Yield the predictions of stage 0, 1, ..., K (every stage, committing or not).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeNetRegressor
        >>> X = np.random.default_rng(0).normal(size=(60, 2)); y = X[:, 0]
        >>> reg = AnytimeNetRegressor(max_epochs=5, random_state=0).fit(X, y)
        >>> [p.shape for p in reg.staged_predict(X[:2])]
        [(2,), (2,), (2,)]
        """
        for _, z in self._staged(X):
            yield z[:, 0] if self._y_1d else z


def opt_networks(est, X, y) -> list:
    """OPT: for each stage i of the fitted `est`, a network of its first i stages trained for exit i alone.

    The baseline an anytime network's exits are measured against (each OPT network has every weight
    on its last exit; the same groups, widths, seed and early stopping as `est`).

    Parameters
    ----------
    est : AnytimeNetClassifier or AnytimeNetRegressor
        Fitted, without `eann_base`.
    X, y : array-like
        The training data `est` was fitted on.

    Returns
    -------
    list of fitted estimators
        Element i - 1 has i stages; compare its last stage with stage i of `est`.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeNetRegressor
    >>> from edgeseq.train.neural.estimators import opt_networks
    >>> X = np.random.default_rng(0).normal(size=(80, 2)); y = X.sum(axis=1)
    >>> est = AnytimeNetRegressor(order="given", max_epochs=5, random_state=0).fit(X, y)
    >>> [len(o.stage_model_.stages) - 1 for o in opt_networks(est, X, y)]
    [1, 2]
    """
    from sklearn.base import clone

    model = fitted_attribute(est, "stage_model_")
    if est.eann_base is not None:
        raise InputError("OPT is the baseline of a single anytime network; fit it without eann_base")
    stages = model.stages[1:]
    out = []
    for i in range(1, len(stages) + 1):
        opt = clone(est).set_params(blocks=[{"groups": list(s.new_groups), "width": s.width} for s in stages[:i]])
        opt._exit_weights = np.eye(i)[-1]
        out.append(opt.fit(X, y))
    return out
