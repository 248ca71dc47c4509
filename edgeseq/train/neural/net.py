"""A multi-exit network over feature groups: architecture, float64 training, and the fitted form.

`NetSpec` describes the architecture (which groups each stage reads and pays, its width, whether it
resets the state, the conv branch of each windowed group); `train_net` fits its parameters with
minibatch Adam on Σ_i B_i ℓ_i and early stopping; `to_stage_model` folds the input standardisation
(and, for regression, the target scaling) into the weights and returns the `LayerBlockModel` that
prediction and export use.

Inputs are standardised during training (each flat column by its own mean and spread; a window by
one mean and spread per *channel*, so the shift is the same at every position and folds exactly
into the convolution's weights and bias).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from edgeseq.forms.layer_blocks import ConvBranch, Injection, LayerBlockModel, LayerBlockStage, conv_output_length
from edgeseq.train.neural.layers import Adam, conv_backward, conv_forward, dense_backward, dense_forward, head_loss
from edgeseq.train.neural.schemes import AdaLossWeights, loss_weights


@dataclass(frozen=True)
class ConvSpec:
    """Settings of the conv branch over one windowed group.

    Examples
    --------
    >>> from edgeseq.train.neural.net import ConvSpec
    >>> ConvSpec(filters=4, kernel=3).pool
    'max'
    """

    filters: int = 8
    kernel: int = 5
    stride: int = 1
    pool: str = "max"
    pool_size: int = 2


@dataclass(frozen=True)
class StageSpec:
    """One stage: groups read, groups paid (a subset of those read), width, and whether it resets the state.

    Examples
    --------
    >>> from edgeseq.train.neural.net import StageSpec
    >>> StageSpec(reads=(0,), new=(0,), width=16).reset
    False
    """

    reads: tuple
    new: tuple
    width: int
    reset: bool = False


@dataclass(frozen=True)
class NetSpec:
    """The architecture of a multi-exit network over groups of columns.

    Examples
    --------
    >>> from edgeseq.train.neural.net import NetSpec, StageSpec
    >>> spec = NetSpec(columns=([0, 1], [2]), shapes=(None, None), convs=(None, None),
    ...                stages=(StageSpec((0,), (0,), 4), StageSpec((1,), (1,), 4)), link="identity", n_outputs=1)
    >>> spec.input_width(0, 0), spec.stage_has_state(1)
    (2, True)
    """

    columns: tuple  # raw column indices of each group
    shapes: tuple  # per group: None or (channels, length)
    convs: tuple  # per group: ConvSpec or None (flat)
    stages: tuple  # StageSpec, stages 1..K
    link: str
    n_outputs: int  # P (1 for sigmoid)

    def stage_has_state(self, i: int) -> bool:
        """Whether stage i (0-based among stages 1..K) reads the previous stage's state.

        The first stage and a stage that starts a new EANN member (``reset``) have no state input.

        Examples
        --------
        >>> from edgeseq.train.neural.net import NetSpec, StageSpec
        >>> spec = NetSpec(([0], [1]), (None, None), (None, None),
        ...                (StageSpec((0,), (0,), 4), StageSpec((1,), (1,), 4)), "identity", 1)
        >>> spec.stage_has_state(0), spec.stage_has_state(1)
        (False, True)
        """
        return i > 0 and not self.stages[i].reset

    def input_width(self, i: int, g: int) -> int:
        """Width of group g's injection into stage i: its columns, or its conv branch's output.

        Examples
        --------
        >>> from edgeseq.train.neural.net import ConvSpec, NetSpec, StageSpec
        >>> spec = NetSpec(([0, 1], list(range(2, 18))), (None, (2, 8)), (None, ConvSpec(filters=4, kernel=3)),
        ...                (StageSpec((0, 1), (0, 1), 4),), "identity", 1)
        >>> spec.input_width(0, 0), spec.input_width(0, 1)   # 2 columns; 4 filters x pooled length
        (2, 12)
        """
        cs = self.convs[g]
        if cs is None:
            return len(self.columns[g])
        C, L = self.shapes[g]
        return cs.filters * (conv_output_length(L, cs.kernel, cs.stride) // cs.pool_size)


def default_conv(shape) -> ConvSpec:
    """A conv branch that fits any window: 8 filters, kernel min(5, L), max-pooling by 2 where possible.

    Examples
    --------
    >>> from edgeseq.train.neural.net import default_conv
    >>> default_conv((8, 8)), default_conv((2, 1)).pool
    (ConvSpec(filters=8, kernel=5, stride=1, pool='max', pool_size=2), 'none')
    """
    C, L = shape
    k = min(5, L)
    pool = "max" if conv_output_length(L, k, 1) >= 2 else "none"
    return ConvSpec(8, k, 1, pool, 2 if pool == "max" else 1)


def init_params(spec: NetSpec, rng: np.random.Generator) -> dict:
    """He-normal weights, zero biases, zero heads' biases.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.net import NetSpec, StageSpec, init_params
    >>> spec = NetSpec(([0, 1],), (None,), (None,), (StageSpec((0,), (0,), 3),), "identity", 1)
    >>> sorted(init_params(spec, np.random.default_rng(0)))
    ['0/U0', '0/V', '0/b', '0/c']
    """
    p = {}
    prev = 0
    for i, st in enumerate(spec.stages):
        H = st.width
        fan_in = (prev if spec.stage_has_state(i) else 0) + sum(spec.input_width(i, g) for g in st.reads)
        scale = np.sqrt(2.0 / max(fan_in, 1))
        if spec.stage_has_state(i):
            p[f"{i}/W"] = rng.normal(0, scale, (prev, H))
        for g in st.reads:
            cs = spec.convs[g]
            if cs is not None:
                C = spec.shapes[g][0]
                p[f"{i}/cw{g}"] = rng.normal(0, np.sqrt(2.0 / (C * cs.kernel)), (cs.filters, C, cs.kernel))
                p[f"{i}/cb{g}"] = np.zeros(cs.filters)
            p[f"{i}/U{g}"] = rng.normal(0, scale, (spec.input_width(i, g), H))
        p[f"{i}/b"] = np.zeros(H)
        p[f"{i}/V"] = rng.normal(0, np.sqrt(1.0 / H), (H, spec.n_outputs))
        p[f"{i}/c"] = np.zeros(spec.n_outputs)
        prev = H
    return p


def forward(spec: NetSpec, p: dict, X: np.ndarray):
    """Logits of every exit (list of (n, P)) and the cache `backward` needs; X is standardised rows.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.net import NetSpec, StageSpec, init_params, forward
    >>> spec = NetSpec(([0, 1],), (None,), (None,), (StageSpec((0,), (0,), 3),), "identity", 1)
    >>> z, _ = forward(spec, init_params(spec, np.random.default_rng(0)), np.ones((5, 2)))
    >>> [a.shape for a in z]
    [(5, 1)]
    """
    logits, cache = [], []
    s = None
    for i, st in enumerate(spec.stages):
        terms, convc = [], {}
        if spec.stage_has_state(i):
            terms.append((s, p[f"{i}/W"]))
        for g in st.reads:
            x = X[:, spec.columns[g]]
            cs = spec.convs[g]
            if cs is not None:
                C, L = spec.shapes[g]
                x, convc[g] = conv_forward(x.reshape(-1, C, L), p[f"{i}/cw{g}"], p[f"{i}/cb{g}"], cs.stride,
                                           cs.pool, cs.pool_size)
            terms.append((x, p[f"{i}/U{g}"]))
        h, z = dense_forward(terms, p[f"{i}/b"])
        logits.append(h @ p[f"{i}/V"] + p[f"{i}/c"])
        cache.append((terms, z, h, convc))
        s = h
    return logits, cache


def backward(spec: NetSpec, p: dict, cache, dlogits) -> dict:
    """Gradients of Σ_i <dlogits_i, logits_i> with respect to every parameter.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.net import NetSpec, StageSpec, init_params, forward, backward
    >>> spec = NetSpec(([0, 1],), (None,), (None,), (StageSpec((0,), (0,), 3),), "identity", 1)
    >>> p = init_params(spec, np.random.default_rng(0)); z, cache = forward(spec, p, np.ones((5, 2)))
    >>> backward(spec, p, cache, [np.ones((5, 1))])["0/c"].tolist()
    [5.0]
    """
    grads = {}
    ds = None  # gradient reaching this stage's hidden vector from the next stage
    for i in range(len(spec.stages) - 1, -1, -1):
        st = spec.stages[i]
        terms, z, h, convc = cache[i]
        d = dlogits[i]
        grads[f"{i}/V"] = h.T @ d
        grads[f"{i}/c"] = d.sum(axis=0)
        dh = d @ p[f"{i}/V"].T
        if ds is not None:
            dh = dh + ds
        tgrads, grads[f"{i}/b"] = dense_backward(dh, z, terms)
        j = 0
        ds = None
        if spec.stage_has_state(i):
            ds, grads[f"{i}/W"] = tgrads[0]
            j = 1
        for g, (da, dU) in zip(st.reads, tgrads[j:]):
            grads[f"{i}/U{g}"] = dU
            cs = spec.convs[g]
            if cs is not None:
                _, dW, db = conv_backward(da, p[f"{i}/cw{g}"], cs.stride, cs.pool, cs.pool_size, convc[g])
                grads[f"{i}/cw{g}"], grads[f"{i}/cb{g}"] = dW, db
    return grads


def exit_losses(spec: NetSpec, p: dict, X: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Mean loss of every exit on (standardised) rows X with training targets t.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.net import NetSpec, StageSpec, exit_losses
    >>> spec = NetSpec(([0],), (None,), (None,), (StageSpec((0,), (0,), 1),), "identity", 1)
    >>> p = {"0/U0": np.ones((1, 1)), "0/b": np.zeros(1), "0/V": np.ones((1, 1)), "0/c": np.zeros(1)}
    >>> exit_losses(spec, p, np.array([[2.0]]), np.array([[1.0]])).tolist()   # ½ (2 − 1)²
    [0.5]
    """
    logits, _ = forward(spec, p, X)
    return np.array([head_loss(z, t, spec.link)[0] for z in logits])


def validation_score(val_losses, fixed_weights=None) -> float:
    """The training objective measured on validation rows, for early stopping.

    Under fixed weights (a static scheme, or OPT's one-hot weights) it is the weighted mean of the
    exits' losses, so an exit with weight 0 cannot stop training; under AdaLoss, whose weights make
    the objective behave like Σ_i log ℓ_i, it is the mean of the losses' logarithms.

    Examples
    --------
    >>> from edgeseq.train.neural.net import validation_score
    >>> validation_score([5.0, 1.0], [0.0, 1.0]), round(validation_score([1.0, 0.01]), 3)
    (1.0, -2.303)
    """
    v = np.maximum(np.asarray(val_losses, np.float64), 1e-300)
    if fixed_weights is None:
        return float(np.mean(np.log(v)))
    w = np.asarray(fixed_weights, np.float64)
    return float(w @ v / w.sum())


@dataclass
class TrainResult:
    """What `train_net` returns: the best parameters and the history of the run.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.net import TrainResult
    >>> TrainResult(params={}, epochs=3, best_epoch=2, val_losses=None, weights=np.ones(2), seconds=0.1).best_epoch
    2
    """

    params: dict
    epochs: int
    best_epoch: int
    val_losses: np.ndarray | None  # per exit, at the best epoch
    weights: np.ndarray  # the last loss weights used
    seconds: float


def train_net(spec: NetSpec, X: np.ndarray, t: np.ndarray, *, X_val=None, t_val=None, scheme="adaloss",
              gamma: float = 0.05, max_epochs: int = 100, batch_size: int = 64, learning_rate: float = 3e-3,
              patience: int = 10, rng: np.random.Generator, progress=None, params=None) -> TrainResult:
    """Minibatch Adam on Σ_i B_i ℓ_i over standardised rows; early stopping on the validation rows.

    Parameters
    ----------
    spec : NetSpec
    X, t : ndarray
        Standardised training rows and targets (values (n, P), 0/1 labels or class indices).
    X_val, t_val : ndarray, optional
        Validation rows: training stops after `patience` epochs without a lower `validation_score`
        on them and the best epoch's parameters are kept. Without them all `max_epochs` run.
    scheme : str or array_like
        A name of `loss_weights`, or fixed weights (one per exit; OPT trains one exit alone this way).
    progress : callable, optional
        Receives one line per 10 epochs and one at the end.

    Examples
    --------
    A one-stage net learns y = relu(x):

    >>> import numpy as np
    >>> from edgeseq.train.neural.net import NetSpec, StageSpec, train_net, exit_losses
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 1)); t = np.maximum(X, 0)
    >>> spec = NetSpec(([0],), (None,), (None,), (StageSpec((0,), (0,), 8),), "identity", 1)
    >>> res = train_net(spec, X, t, max_epochs=60, rng=rng)
    >>> bool(exit_losses(spec, res.params, X, t)[0] < 0.01)
    True
    """
    t0 = time.perf_counter()
    L = len(spec.stages)
    p = init_params(spec, rng) if params is None else params
    opt = Adam(p, lr=learning_rate)
    ada = AdaLossWeights(L, gamma) if isinstance(scheme, str) and scheme == "adaloss" else None
    fixed = None if ada is not None else (loss_weights(scheme, L) if isinstance(scheme, str)
                                          else np.asarray(scheme, np.float64))
    w = fixed if fixed is not None else np.ones(L)
    n = X.shape[0]
    best, best_p, best_epoch, best_val, since = np.inf, None, 0, None, 0
    epoch = 0
    for epoch in range(1, max_epochs + 1):
        order = rng.permutation(n)
        for a in range(0, n, batch_size):
            rows = order[a:a + batch_size]
            logits, cache = forward(spec, p, X[rows])
            pairs = [head_loss(z, t[rows], spec.link) for z in logits]
            if ada is not None:
                w = ada.update([lo for lo, _ in pairs])
            opt.step(backward(spec, p, cache, [wi * g for wi, (_, g) in zip(w, pairs)]))
        if X_val is not None and len(X_val):
            val = exit_losses(spec, p, X_val, t_val)
            score = validation_score(val, fixed)
            if score < best - 1e-9:
                best, best_p, best_epoch, best_val, since = score, {k: v.copy() for k, v in p.items()}, epoch, val, 0
            else:
                since += 1
            if progress is not None and epoch % 10 == 0:
                progress(f"epoch {epoch}: validation loss per exit {np.array2string(val, precision=3)}")
            if since >= patience:
                break
        elif progress is not None and epoch % 10 == 0:
            progress(f"epoch {epoch}")
    if best_p is not None:
        p.clear()
        p.update(best_p)
    else:
        best_epoch = epoch
    return TrainResult(p, epoch, best_epoch, best_val, np.asarray(w, np.float64), time.perf_counter() - t0)


# ---------------------------------------------------------------------- standardisation and folding
@dataclass(frozen=True)
class Scaling:
    """Per-column input shift and scale (constant over each window channel), and the target's.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.net import Scaling
    >>> sc = Scaling.fit(np.array([[0.0, 1.0], [2.0, 3.0]]), ([0, 1],), ((1, 2),))
    >>> sc.mu.tolist(), sc.sd.tolist()    # one channel of two positions: one mean, one spread
    ([1.5, 1.5], [1.118033988749895, 1.118033988749895])
    """

    mu: np.ndarray
    sd: np.ndarray
    y_mu: np.ndarray | None = None
    y_sd: np.ndarray | None = None

    @classmethod
    def fit(cls, X: np.ndarray, columns, shapes, Y=None) -> "Scaling":
        """Means and spreads of the training rows (spreads of 0 become 1).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.neural.net import Scaling
        >>> Scaling.fit(np.array([[1.0, 5.0], [3.0, 5.0]]), ([0], [1]), (None, None)).sd.tolist()
        [1.0, 1.0]
        """
        mu, sd = np.zeros(X.shape[1]), np.ones(X.shape[1])
        for cols, shape in zip(columns, shapes):
            cols = np.asarray(cols, np.int64)
            if shape is None:
                mu[cols], sd[cols] = X[:, cols].mean(axis=0), X[:, cols].std(axis=0)
            else:
                C, L = shape
                block = X[:, cols].reshape(-1, C, L)
                mu[cols] = np.repeat(block.mean(axis=(0, 2)), L)
                sd[cols] = np.repeat(block.std(axis=(0, 2)), L)
        sd = np.where(sd > 1e-12 * np.maximum(np.abs(mu), 1.0), sd, 1.0)
        if Y is None:
            return cls(mu, sd)
        y_sd = Y.std(axis=0)
        return cls(mu, sd, Y.mean(axis=0), np.where(y_sd > 0, y_sd, 1.0))

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Standardised rows (columns outside every group stay as they are: zero mean shift, unit scale).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.neural.net import Scaling
        >>> Scaling(mu=np.array([1.0]), sd=np.array([2.0])).apply(np.array([[5.0]])).tolist()
        [[2.0]]
        """
        return (X - self.mu) / self.sd


def to_stage_model(spec: NetSpec, p: dict, scaling: Scaling, *, group_names, costs, n_features: int,
                   prior: np.ndarray, output_names, cost_per_mac: float, commits=None, classes=None,
                   group_shapes=()) -> LayerBlockModel:
    """The fitted `LayerBlockModel` over raw inputs: standardisation folded into the first weights.

    Stage cost = extraction cost of the groups it pays + its MACs × `cost_per_mac`. `prior` is the
    stage-0 readout (training mean of the target, or the log class prior).

    Examples
    --------
    Folding is exact: the model on raw rows equals the network on standardised rows.

    >>> import numpy as np
    >>> from edgeseq.train.neural.net import NetSpec, StageSpec, Scaling, init_params, forward, to_stage_model
    >>> rng = np.random.default_rng(0); X = rng.normal(3.0, 2.0, size=(20, 2))
    >>> spec = NetSpec(([0, 1],), (None,), (None,), (StageSpec((0,), (0,), 3),), "identity", 1)
    >>> p = init_params(spec, rng); p["0/b"] += 0.1; sc = Scaling.fit(X, spec.columns, spec.shapes)
    >>> m = to_stage_model(spec, p, sc, group_names=("g",), costs=[1.0], n_features=2, prior=np.zeros(1),
    ...                    output_names=("y",), cost_per_mac=0.0)
    >>> bool(np.allclose(m.decision(X, 1), forward(spec, p, sc.apply(X))[0][0]))
    True
    """
    costs = np.asarray(costs, np.float64)
    ys = 1.0 if scaling.y_sd is None else scaling.y_sd
    ym = 0.0 if scaling.y_mu is None else scaling.y_mu
    stages = [LayerBlockStage((), 0.0, None, (), np.zeros(0), np.zeros((0, len(prior))), np.asarray(prior, float))]
    for i, st in enumerate(spec.stages):
        b = p[f"{i}/b"].copy()
        injections = []
        for g in st.reads:
            cols = np.asarray(spec.columns[g], np.int64)
            mu, sd = scaling.mu[cols], scaling.sd[cols]
            U = p[f"{i}/U{g}"]
            cs = spec.convs[g]
            if cs is None:
                injections.append(Injection(g, U / sd[:, None]))
                b -= (mu / sd) @ U
            else:
                C, L = spec.shapes[g]
                mu_c, sd_c = mu.reshape(C, L)[:, 0], sd.reshape(C, L)[:, 0]
                Wc = p[f"{i}/cw{g}"] / sd_c[None, :, None]
                bc = p[f"{i}/cb{g}"] - np.einsum("fck,c->f", p[f"{i}/cw{g}"], mu_c / sd_c)
                injections.append(Injection(g, U.copy(), ConvBranch(C, L, cs.kernel, cs.stride, cs.pool,
                                                                    cs.pool_size, Wc, bc)))
        W = p[f"{i}/W"].copy() if spec.stage_has_state(i) else None
        V = p[f"{i}/V"] * ys
        c = p[f"{i}/c"] * ys + ym
        commit = True if commits is None else bool(commits[i])
        stage = LayerBlockStage(tuple(st.new), 0.0, W, tuple(injections), b, V, c, commit)
        cost = float(sum(costs[g] for g in st.new)) + stage.macs * float(cost_per_mac)
        stages.append(LayerBlockStage(stage.new_groups, cost, W, stage.injections, b, V, c, commit))
    return LayerBlockModel(tuple(group_names), tuple(np.asarray(c, np.int64) for c in spec.columns), costs,
                           tuple(stages), spec.link, tuple(output_names), n_features=n_features, classes=classes,
                           group_shapes=tuple(group_shapes))
