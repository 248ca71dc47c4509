"""Layer-block stages: an anytime neural network as plain, validated numpy arrays.

This is the intermediate form of the third stage kind (after affine prefixes and tree stages): what
training produces and what exporters read. It needs only numpy, so a device-side tool can load and
check it without the training stack.

Stage k >= 1 of a `LayerBlockModel` computes, from the carried state s_{k-1} (the previous stage's
hidden vector) and the groups it reads,

    h_k = relu(s_{k-1} W_k + Σ_{injections} u_g U_{k,g} + b_k),     ŷ_k = link(h_k V_k + c_k),

and carries s_k = h_k. An injection's input u_g is either the raw columns of group g (a flat group)
or, for a group declared a window of shape (channels, length) — channel c is columns
c·L … c·L + L − 1, as a sensor delivers it — the flattened output of a conv branch:
relu(conv1d(x_g)) with its own kernel and stride, optionally max- or average-pooled over
non-overlapping windows. A stage with ``W is None`` ignores the state (the first stage, and the
first stage of each member of an ensemble of networks, which *resets* the state). Stage 0 is the
constant prior link(c_0).

A stage may be marked ``commit=False``: it still runs (later stages need its state) but the budget
rule skips its answer: at budget B the prediction is that of the last *committing* stage whose
cumulative cost is <= B.

Every shape and index the forward pass follows is checked by `LayerBlockModel.validate`, so a
corrupted model is refused with one line rather than failing inside a matrix product.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from edgeseq.budget import resolve_prefix
from edgeseq.errors import InputError, ModelFormatError
from edgeseq.forms.linear import LINKS, renamed
from edgeseq.forms.trees import TreeStageModel

POOLS = ("none", "max", "avg")
MAX_WIDTH = 1 << 16  # bounds one layer's width, a window's length and a kernel, so shapes stay allocatable


def conv_output_length(length: int, kernel: int, stride: int) -> int:
    """Positions of a valid (unpadded) 1-D convolution: ``(length − kernel) // stride + 1``.

    Examples
    --------
    >>> from edgeseq.forms.layer_blocks import conv_output_length
    >>> conv_output_length(8, 3, 1), conv_output_length(8, 3, 2)
    (6, 3)
    """
    return (int(length) - int(kernel)) // int(stride) + 1


def conv1d_patches(x: np.ndarray, kernel: int, stride: int) -> np.ndarray:
    """The receptive fields of a valid 1-D convolution: x (n, C, L) -> (n, C, L_out, kernel).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.layer_blocks import conv1d_patches
    >>> conv1d_patches(np.arange(5.0).reshape(1, 1, 5), 2, 2)[0, 0].tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    L_out = conv_output_length(x.shape[2], kernel, stride)
    idx = stride * np.arange(L_out)[:, None] + np.arange(kernel)[None, :]
    return x[:, :, idx]


def pool_windows(a: np.ndarray, size: int) -> np.ndarray:
    """Non-overlapping pooling windows (floor mode, as ONNX pooling): (n, F, L) -> (n, F, L // size, size).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.layer_blocks import pool_windows
    >>> pool_windows(np.arange(5.0).reshape(1, 1, 5), 2)[0, 0].tolist()   # the odd last position is dropped
    [[0.0, 1.0], [2.0, 3.0]]
    """
    Lp = a.shape[2] // size
    return a[:, :, :Lp * size].reshape(a.shape[0], a.shape[1], Lp, size)


@dataclass(frozen=True)
class ConvBranch:
    """relu(conv1d) over a windowed group, then optional pooling; output flattened filter-major.

    Parameters
    ----------
    channels, length : int
        The window's shape (C, L); the group's columns are channel-major.
    kernel, stride : int
        Convolution kernel width and stride (no padding).
    pool : {"none", "max", "avg"}
        Pooling over non-overlapping windows of `pool_size` positions (a trailing partial window is dropped).
    pool_size : int
        Pooling window (1 with ``pool="none"``).
    W : ndarray of shape (filters, channels, kernel)
    b : ndarray of shape (filters,)

    Examples
    --------
    One channel of length 4, one filter summing pairs, max-pooled by 2:

    >>> import numpy as np
    >>> from edgeseq.forms.layer_blocks import ConvBranch
    >>> br = ConvBranch(1, 4, kernel=2, stride=1, pool="max", pool_size=2, W=np.ones((1, 1, 2)), b=np.zeros(1))
    >>> br.forward(np.array([[1.0, 2.0, -5.0, 3.0]])).tolist(), br.out_width, br.macs
    ([[3.0]], 1, 6)
    """

    channels: int
    length: int
    kernel: int
    stride: int
    pool: str
    pool_size: int
    W: np.ndarray
    b: np.ndarray

    def __post_init__(self) -> None:
        for name in ("channels", "length", "kernel", "stride", "pool_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 1 <= v <= MAX_WIDTH:
                raise ModelFormatError(f"conv branch: {name} must be an integer in 1..{MAX_WIDTH}, got {v!r}")
            object.__setattr__(self, name, int(v))
        if self.pool not in POOLS or (self.pool == "none" and self.pool_size != 1):
            raise ModelFormatError(f"conv branch: pool must be one of {POOLS} (pool_size 1 with 'none'), "
                                   f"got {self.pool!r} with size {self.pool_size}")
        object.__setattr__(self, "W", np.asarray(self.W, np.float64))
        object.__setattr__(self, "b", np.asarray(self.b, np.float64))
        if self.kernel > self.length or self.pooled_length < 1:
            raise ModelFormatError(f"conv branch: kernel {self.kernel}, stride {self.stride} and pool "
                                   f"{self.pool_size} leave no output over a window of length {self.length}")
        if self.W.ndim != 3 or self.W.shape[1:] != (self.channels, self.kernel) or not 1 <= self.W.shape[0] <= MAX_WIDTH \
                or self.b.shape != (self.W.shape[0],):
            raise ModelFormatError(f"conv branch: weights must have shapes (filters, {self.channels}, "
                                   f"{self.kernel}) and (filters,), got {self.W.shape} and {self.b.shape}")
        if not (np.all(np.isfinite(self.W)) and np.all(np.isfinite(self.b))):
            raise ModelFormatError("conv branch: a weight is NaN or Inf")

    @property
    def filters(self) -> int:
        """Number of filters F.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import ConvBranch
        >>> ConvBranch(1, 4, 2, 1, "none", 1, np.ones((3, 1, 2)), np.zeros(3)).filters
        3
        """
        return int(self.W.shape[0])

    @property
    def conv_length(self) -> int:
        """Positions of the convolution's output.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import ConvBranch
        >>> ConvBranch(1, 9, 3, 2, "none", 1, np.ones((1, 1, 3)), np.zeros(1)).conv_length
        4
        """
        return conv_output_length(self.length, self.kernel, self.stride)

    @property
    def pooled_length(self) -> int:
        """Positions after pooling (floor mode).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import ConvBranch
        >>> ConvBranch(1, 9, 3, 1, "avg", 2, np.ones((1, 1, 3)), np.zeros(1)).pooled_length
        3
        """
        return self.conv_length // self.pool_size

    @property
    def out_width(self) -> int:
        """Width of the flattened output, filters × pooled length.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import ConvBranch
        >>> ConvBranch(1, 9, 3, 1, "avg", 2, np.ones((2, 1, 3)), np.zeros(2)).out_width
        6
        """
        return self.filters * self.pooled_length

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the convolution (pooling and ReLU are not counted).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import ConvBranch
        >>> ConvBranch(2, 9, 3, 1, "none", 1, np.ones((4, 2, 3)), np.zeros(4)).macs   # 4 * 2 * 3 * 7
        168
        """
        return self.filters * self.channels * self.kernel * self.conv_length

    def conv(self, x: np.ndarray, dtype=np.float64) -> np.ndarray:
        """Pre-activation convolution output (n, F, L_out) of rows x (n, C·L).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import ConvBranch
        >>> br = ConvBranch(1, 3, 2, 1, "none", 1, np.array([[[1.0, -1.0]]]), np.zeros(1))
        >>> br.conv(np.array([[1.0, 3.0, 2.0]])).tolist()
        [[[-2.0, 1.0]]]
        """
        x = np.asarray(x, dtype).reshape(-1, self.channels, self.length)
        P = conv1d_patches(x, self.kernel, self.stride)
        return np.einsum("nclk,fck->nfl", P, self.W.astype(dtype), optimize=True) + self.b.astype(dtype)[:, None]

    def forward(self, x: np.ndarray, dtype=np.float64) -> np.ndarray:
        """relu(conv), pooled and flattened: (n, F · pooled_length) in `dtype`.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import ConvBranch
        >>> br = ConvBranch(1, 5, 1, 1, "avg", 2, np.ones((1, 1, 1)), np.zeros(1))
        >>> br.forward(np.array([[1.0, 3.0, -2.0, 4.0, 9.0]])).tolist()
        [[2.0, 2.0]]
        """
        a = np.maximum(self.conv(x, dtype), 0)
        if self.pool == "max":
            a = pool_windows(a, self.pool_size).max(axis=3)
        elif self.pool == "avg":
            a = pool_windows(a, self.pool_size).mean(axis=3, dtype=dtype)
        return a.reshape(a.shape[0], -1)


@dataclass(frozen=True)
class Injection:
    """One group read by a dense block: its raw columns (``conv=None``) or a conv branch over them, times U.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.layer_blocks import Injection
    >>> Injection(group=0, U=np.ones((2, 3))).U.shape
    (2, 3)
    """

    group: int
    U: np.ndarray  # (input width, H)
    conv: ConvBranch | None = None


@dataclass(frozen=True)
class LayerBlockStage:
    """Stage k: the groups it pays for, its cost, its dense block and its exit head.

    Parameters
    ----------
    new_groups : tuple of int
        Groups first extracted by this stage (their cost is part of `cost`).
    cost : float
        Extraction cost of `new_groups` plus the stage's compute (MACs × cost per MAC).
    W : ndarray of shape (S_prev, H) or None
        State weights; None ignores the incoming state (stage 1, or a reset).
    injections : tuple of Injection
        Groups read by the block (already paid or paid by this stage).
    b : ndarray of shape (H,)
    V : ndarray of shape (H, P)
    c : ndarray of shape (P,)
    commit : bool, default=True
        False: the stage runs but the budget rule never answers with it.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.layer_blocks import Injection, LayerBlockStage
    >>> s = LayerBlockStage((0,), 2.0, None, (Injection(0, np.ones((3, 4))),), np.zeros(4), np.ones((4, 1)), np.zeros(1))
    >>> s.width, s.macs   # 3 * 4 (block) + 4 * 1 (head)
    (4, 16)
    """

    new_groups: tuple[int, ...]
    cost: float
    W: np.ndarray | None
    injections: tuple[Injection, ...]
    b: np.ndarray
    V: np.ndarray
    c: np.ndarray
    commit: bool = True

    @property
    def width(self) -> int:
        """Width H of the stage's hidden vector (its carried state); 0 for the prior.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import LayerBlockStage
        >>> LayerBlockStage((), 0.0, None, (), np.zeros(0), np.zeros((0, 2)), np.zeros(2)).width
        0
        """
        return int(self.b.shape[0])

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the stage: conv branches, the dense block and the head.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import LayerBlockStage
        >>> LayerBlockStage((), 1.0, np.ones((4, 4)), (), np.zeros(4), np.ones((4, 2)), np.zeros(2)).macs
        24
        """
        H = self.width
        m = (0 if self.W is None else self.W.shape[0] * H) + H * self.V.shape[1]
        for inj in self.injections:
            m += inj.U.shape[0] * H + (inj.conv.macs if inj.conv is not None else 0)
        return int(m)


def _example_model():
    """A two-group model for the examples: a flat group "a" (2 columns) and a window "w" (1 × 4)."""
    rng = np.random.default_rng(0)
    br = ConvBranch(1, 4, 2, 1, "max", 3, rng.normal(size=(2, 1, 2)), rng.normal(size=2))
    stages = (LayerBlockStage((), 0.0, None, (), np.zeros(0), np.zeros((0, 1)), np.array([0.5])),
              LayerBlockStage((0,), 1.0, None, (Injection(0, rng.normal(size=(2, 3))),), rng.normal(size=3),
                              rng.normal(size=(3, 1)), np.zeros(1)),
              LayerBlockStage((1,), 2.0, rng.normal(size=(3, 3)), (Injection(1, rng.normal(size=(2, 3)), br),),
                              rng.normal(size=3), rng.normal(size=(3, 1)), np.zeros(1)))
    return LayerBlockModel(("a", "w"), ([0, 1], [2, 3, 4, 5]), [1.0, 2.0], stages, "identity", ("y",), n_features=6)


@dataclass(frozen=True)
class LayerBlockModel:
    """A layer-block anytime model: groups, stages 0..K (stage 0 the prior) and the link.

    Answers the same questions as the tree-stage form (`cum_cost`, `prefix_for_budget`,
    `prefix_columns`, `staged_decision`, `predict`, `validate`), so evaluation and runtimes treat the
    two kinds alike. Weights are float64; ``staged_decision(X, dtype=np.float32)`` runs the same
    computation in float32, as the exported graphs do.

    Examples
    --------
    A flat group "a" and a window "w" of 1 channel × 4 steps read by a conv branch:

    >>> import numpy as np
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> model = _example_model()
    >>> model.cum_cost.tolist(), [len(model.prefix_columns(k)) for k in range(3)]
    ([0.0, 1.0, 3.0], [0, 2, 6])
    >>> X = np.random.default_rng(1).normal(size=(4, 6))
    >>> z64 = list(model.staged_decision(X)); z32 = list(model.staged_decision(X, dtype=np.float32))
    >>> bool(np.allclose(z64[2], z32[2], rtol=1e-5, atol=1e-6)), z32[2].dtype
    (True, dtype('float32'))
    >>> X[:, 2:] = np.nan   # the window not extracted: stage 1 still answers
    >>> model.predict(X, budget=2.0).shape
    (4, 1)
    """

    group_names: tuple[str, ...]
    group_columns: tuple[np.ndarray, ...]
    costs: np.ndarray
    stages: tuple[LayerBlockStage, ...]
    link: str
    output_names: tuple[str, ...]
    n_features: int = 0
    classes: np.ndarray | None = None
    group_shapes: tuple = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "costs", np.asarray(self.costs, dtype=np.float64))
        object.__setattr__(self, "group_columns", tuple(np.asarray(c, np.int64) for c in self.group_columns))
        f64 = lambda a: None if a is None else np.asarray(a, np.float64)  # noqa: E731
        stages = tuple(LayerBlockStage(tuple(int(g) for g in s.new_groups), float(s.cost), f64(s.W),
                                       tuple(Injection(int(i.group), f64(i.U), i.conv) for i in s.injections),
                                       f64(s.b), f64(s.V), f64(s.c), bool(s.commit))
                       for s in self.stages)
        object.__setattr__(self, "stages", stages)
        self.validate()

    # ------------------------------------------------------------------ the anytime rule
    @property
    def n_outputs(self) -> int:
        """Number of readout outputs P.

        Examples
        --------
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> _example_model().n_outputs
        1
        """
        return int(self.stages[0].c.shape[0])

    @property
    def n_features_in(self) -> int:
        """Number of raw feature columns the model reads rows of (the stage protocol's name).

        Examples
        --------
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> _example_model().n_features_in == _example_model().n_features
        True
        """
        return int(self.n_features)

    @property
    def stage_names(self) -> tuple[str, ...]:
        """One name per stage after the prior: the groups it pays for (joined with " + ").

        Examples
        --------
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> len(_example_model().stage_names) == len(_example_model().stages) - 1
        True
        """
        return tuple(" + ".join(self.group_names[g] for g in s.new_groups) or "(no new group)"
                     for s in self.stages[1:])

    @property
    def provenance(self) -> dict:
        """What produced the stages, as far as the form knows (the estimator keeps its training settings).

        Examples
        --------
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> _example_model().provenance
        {'method': 'layer blocks'}
        """
        return {"method": "layer blocks"}

    @property
    def cum_cost(self) -> np.ndarray:
        """Cumulative cost after each stage (stage 0 costs nothing).

        Examples
        --------
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> _example_model().cum_cost.tolist()
        [0.0, 1.0, 3.0]
        """
        return np.cumsum([s.cost for s in self.stages])

    @property
    def committing(self) -> np.ndarray:
        """Indices of the stages the budget rule may answer with (stage 0 always).

        Examples
        --------
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> _example_model().committing.tolist()
        [0, 1, 2]
        """
        return np.array([k for k, s in enumerate(self.stages) if s.commit], np.int64)

    def prefix_for_budget(self, budget: float) -> int:
        """The last committing stage whose cumulative cost is <= budget (the anytime rule).

        The budget is checked and compared by `edgeseq.budget` (the rule every form and runtime
        uses), then rounded down to a stage that answers. ``None`` means no limit.

        Raises
        ------
        InputError
            If `budget` is not a number >= 0.

        Examples
        --------
        >>> import dataclasses
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> model = _example_model()
        >>> [model.prefix_for_budget(b) for b in (0, 0.5, 1.0, 2.9, 3.0, 100)]
        [0, 0, 1, 1, 2, 2]
        >>> quiet = dataclasses.replace(model, stages=model.stages[:2] + (dataclasses.replace(model.stages[2], commit=False),))
        >>> quiet.prefix_for_budget(100)   # stage 2 runs but does not answer
        1
        """
        k = resolve_prefix(self.cum_cost, budget=budget)
        ok = self.committing
        return int(ok[ok <= k][-1])

    def stage_for_budget(self, budget: float) -> int:
        """Deprecated alias of `prefix_for_budget` (the name every stage form shares).

        Examples
        --------
        >>> import warnings
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore", DeprecationWarning)
        ...     _example_model().stage_for_budget(1.0)
        1
        """
        renamed("LayerBlockModel.stage_for_budget", "prefix_for_budget")
        return self.prefix_for_budget(budget)

    def resolve_stage(self, budget=None, stage=None) -> int:
        """The stage to use: `stage` itself, the one `budget` buys, or (neither) the last committing one.

        Raises
        ------
        InputError
            If both are given or `stage` is out of range.

        Examples
        --------
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> model = _example_model()
        >>> model.resolve_stage(), model.resolve_stage(budget=1.5), model.resolve_stage(stage=0)
        (2, 1, 0)
        """
        if budget is not None and stage is not None:
            raise InputError("give either budget or stage, not both")
        if stage is not None:
            if isinstance(stage, (bool, np.bool_)) or not isinstance(stage, numbers.Integral) \
                    or not 0 <= stage < len(self.stages):
                raise InputError(f"stage must be an integer in 0..{len(self.stages) - 1}, got {stage!r}")
            return int(stage)
        if budget is not None:
            return self.prefix_for_budget(budget)
        return int(self.committing[-1])

    # the stage bookkeeping every stage kind shares: the tree kind's implementation, not a copy
    groups_required = TreeStageModel.groups_required
    prefix_columns = TreeStageModel.prefix_columns
    columns_required = TreeStageModel.columns_required  # deprecated alias, as on the tree form
    apply_link = TreeStageModel.apply_link

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Shapes, finiteness, costs, and "a stage reads only groups paid by then".

        Called on construction; exposed so a loader can re-check an object it did not build.

        Raises
        ------
        ModelFormatError
            Naming the first inconsistency found.

        Examples
        --------
        >>> import dataclasses
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> model = _example_model()
        >>> model.validate()   # silent when consistent
        >>> s1, s2 = model.stages[1], model.stages[2]
        >>> dataclasses.replace(model, stages=(model.stages[0], dataclasses.replace(s1, injections=s2.injections), s2))
        Traceback (most recent call last):
        ...
        edgeseq.errors.ModelFormatError: layer-block model: stage 1 reads group 1, which is not computed by then
        """
        J, D = len(self.group_names), self.n_features
        pre = "layer-block model: "
        if self.link not in LINKS:
            raise ModelFormatError(f"{pre}unknown link {self.link!r}; expected one of {LINKS}")
        if isinstance(D, bool) or not isinstance(D, numbers.Integral) or D < 1:
            raise ModelFormatError(f"{pre}n_features must be a positive integer, got {D!r}")
        if len(self.group_columns) != J or self.costs.shape != (J,) or not np.all(np.isfinite(self.costs)) \
                or np.any(self.costs <= 0):
            raise ModelFormatError(f"{pre}need one column list and one positive finite cost per group")
        owner = np.full(D, -1)
        for g, cols in enumerate(self.group_columns):
            if cols.size == 0 or cols.min() < 0 or cols.max() >= D or np.any(owner[cols] >= 0):
                raise ModelFormatError(f"{pre}group {g} has empty, out-of-range or shared columns")
            owner[cols] = g
        if self.group_shapes and len(self.group_shapes) != J:
            raise ModelFormatError(f"{pre}group_shapes must have one entry per group")
        s0 = self.stages[0] if self.stages else None
        if s0 is None or s0.new_groups or s0.injections or s0.W is not None or s0.width != 0 or not s0.commit:
            raise ModelFormatError(f"{pre}stage 0 must exist, commit, and hold only the prior")
        P = s0.c.shape[0] if s0.c.ndim == 1 else -1
        if P < 1 or s0.V.shape != (0, P) or not np.all(np.isfinite(s0.c)):
            raise ModelFormatError(f"{pre}the prior must be a finite non-empty vector")
        if len(self.output_names) != (2 if self.link == "sigmoid" else P) or (self.link == "sigmoid" and P != 1):
            raise ModelFormatError(f"{pre}output names must match the outputs (both classes for sigmoid)")
        paid: set[int] = set()
        prev = 0
        for k, s in enumerate(self.stages[1:], start=1):
            for g in s.new_groups:
                if not 0 <= g < J or g in paid:
                    raise ModelFormatError(f"{pre}stage {k} requires unknown or already computed group {g}")
                paid.add(g)
            expect = sum(float(self.costs[g]) for g in s.new_groups)
            if not np.isfinite(s.cost) or s.cost < expect * (1 - 1e-12):
                raise ModelFormatError(f"{pre}stage {k} costs {s.cost!r}, less than its groups' {expect!r}")
            H = s.width
            if s.b.ndim != 1 or not 1 <= H <= MAX_WIDTH or s.V.shape != (H, P) or s.c.shape != (P,):
                raise ModelFormatError(f"{pre}stage {k}'s bias and head must have shapes (H,), (H, {P}), ({P},)")
            if s.W is None and not s.injections:
                raise ModelFormatError(f"{pre}stage {k} reads neither the state nor a group")
            if s.W is not None and (k == 1 or s.W.shape != (prev, H)):
                raise ModelFormatError(f"{pre}stage {k}'s state weights must have shape ({prev}, {H}) "
                                       f"(and stage 1 has no incoming state)")
            arrays = [s.b, s.V, s.c] + ([] if s.W is None else [s.W])
            for inj in s.injections:
                if not 0 <= inj.group < J or inj.group not in paid:
                    raise ModelFormatError(f"{pre}stage {k} reads group {inj.group}, which is not computed by then")
                size = self.group_columns[inj.group].size
                if inj.conv is not None:
                    if not isinstance(inj.conv, ConvBranch) or inj.conv.channels * inj.conv.length != size:
                        raise ModelFormatError(f"{pre}stage {k}: the conv branch over group {inj.group} must be "
                                               f"a ConvBranch whose window covers its {size} columns")
                    size = inj.conv.out_width
                if inj.U.shape != (size, H):
                    raise ModelFormatError(f"{pre}stage {k}: injection of group {inj.group} must have shape "
                                           f"({size}, {H}), got {inj.U.shape}")
                arrays.append(inj.U)
            if not all(np.all(np.isfinite(a)) for a in arrays):
                raise ModelFormatError(f"{pre}stage {k} holds a NaN or Inf weight")
            prev = H

    # ------------------------------------------------------------------ prediction
    def step(self, k: int, X: np.ndarray, state: np.ndarray | None, dtype=np.float64):
        """Run stage k alone: (state_out (n, H_k), readout (n, P)) from rows X and the incoming state.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> model = _example_model(); X = np.ones((2, 6))
        >>> s1, _ = model.step(1, X, None)
        >>> s2, z2 = model.step(2, X, s1)
        >>> bool(np.allclose(z2, model.decision(X, 2)))
        True
        """
        s = self.stages[k]
        if k == 0:
            n = np.asarray(X).shape[0]
            return np.zeros((n, 0), dtype), np.broadcast_to(s.c.astype(dtype), (n, s.c.shape[0])).copy()
        z = np.broadcast_to(s.b.astype(dtype), (np.asarray(X).shape[0], s.width)).copy()
        if s.W is not None:
            z += np.asarray(state, dtype) @ s.W.astype(dtype)
        for inj in s.injections:
            u = np.asarray(X[:, self.group_columns[inj.group]], dtype)
            if inj.conv is not None:
                u = inj.conv.forward(u, dtype)
            z += u @ inj.U.astype(dtype)
        h = np.maximum(z, 0)
        return h, h @ s.V.astype(dtype) + s.c.astype(dtype)

    def staged_decision(self, X, dtype=np.float64):
        """Yield the readout (n, P) of stages 0..K, carrying the state across stages.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> [z.shape for z in _example_model().staged_decision(np.zeros((3, 6)))]
        [(3, 1), (3, 1), (3, 1)]
        """
        X = np.asarray(X)
        state = None
        for k in range(len(self.stages)):
            h, z = self.step(k, X, state, dtype)
            if k:
                state = h
            yield z

    def decision(self, X, k: int, dtype=np.float64) -> np.ndarray:
        """Readout of stage k (n, P); runs stages 1..k only.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> _example_model().decision(np.zeros((1, 6)), 0).tolist()
        [[0.5]]
        """
        if not 0 <= k < len(self.stages):
            raise InputError(f"stage must be in 0..{len(self.stages) - 1}, got {k!r}")
        X = np.asarray(X)
        state, z = None, None
        for j in range(k + 1):
            h, z = self.step(j, X, state, dtype)
            if j:
                state = h
        return z

    def check_rows(self, X, k: int) -> np.ndarray:
        """X as float64 (n, n_features), refused when a column stage k reads is NaN or Inf.

        Raises
        ------
        InputError
            On a wrong shape or a non-finite value in a column stage k needs.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> _example_model().check_rows(np.full((1, 6), np.nan), 2)
        Traceback (most recent call last):
        ...
        edgeseq.errors.InputError: X contains NaN or Inf in columns this stage uses; clean or impute them first
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise InputError(f"X must have shape (n, {self.n_features}), got {X.shape}")
        cols = self.prefix_columns(k)
        if cols.size and not np.all(np.isfinite(X[:, cols])):
            raise InputError("X contains NaN or Inf in columns this stage uses; clean or impute them first")
        return X

    def predict(self, X, budget=None, stage=None) -> np.ndarray:
        """Prediction of a stage: values (identity link) or class probabilities (n, n_classes).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> _example_model().predict(np.zeros((1, 6)), budget=0.0).tolist()
        [[0.5]]
        """
        k = self.resolve_stage(budget, stage)
        return self.apply_link(self.decision(self.check_rows(X, k), k))

    @property
    def stage_macs(self) -> np.ndarray:
        """Multiply-accumulates of each stage (0 for the prior).

        Examples
        --------
        >>> from edgeseq.forms.layer_blocks import _example_model
        >>> _example_model().stage_macs.tolist()
        [0, 9, 30]
        """
        return np.array([s.macs for s in self.stages], np.int64)
