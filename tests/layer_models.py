"""Small random layer-block models shared by the layer-block export, runtime and verify tests.

Built directly as `LayerBlockModel`s (no training: seconds matter) with every feature the C and ONNX
emitters must get right: scattered raw columns, two windowed groups (channel-major in Python) with
conv branches using stride, max and average pooling, a flat read of a windowed group (its U columns
must be permuted for the time-major C layout), a stage with no new group that does not commit, a reset
stage that re-reads a group paid earlier, and a last state-only stage.
"""

from __future__ import annotations

import numpy as np

from edgeseq.forms.layer_blocks import ConvBranch, Injection, LayerBlockModel, LayerBlockStage

N_FEATURES = 29
COST_PER_MAC = 1e-3


def _n(rng, *shape, scale=0.5):
    return rng.normal(scale=scale, size=shape)


def rich_model(link: str = "softmax", seed: int = 0, commit_all: bool = False) -> LayerBlockModel:
    """The model described in the module docstring; `link` in identity (2 outputs), sigmoid, softmax (3)."""
    rng = np.random.default_rng(seed)
    P = {"identity": 2, "sigmoid": 1, "softmax": 3}[link]
    perm = rng.permutation(N_FEATURES)
    cols = (perm[0:3], perm[3:21], perm[21:27], perm[27:29])
    costs = np.array([0.1, 0.7, 0.2, 0.3])
    b = lambda h: rng.normal(loc=0.2, scale=0.3, size=h)  # noqa: E731  (mostly positive: few dead ReLUs)
    head = lambda h: (_n(rng, h, P), _n(rng, P, scale=0.1))  # noqa: E731
    conv1 = ConvBranch(2, 9, 3, 2, "max", 2, _n(rng, 3, 2, 3), _n(rng, 3, scale=0.1))   # 4 positions -> 2
    conv2 = ConvBranch(1, 6, 2, 1, "avg", 2, _n(rng, 2, 1, 2), _n(rng, 2, scale=0.1))   # 5 positions -> 2
    specs = [
        ((0,), None, (Injection(0, _n(rng, 3, 5)),), 5, True),
        ((1,), _n(rng, 5, 6), (Injection(1, _n(rng, conv1.out_width, 6), conv1),), 6, True),
        ((), _n(rng, 6, 4), (Injection(1, _n(rng, 18, 4, scale=0.2)),), 4, commit_all),
        ((2, 3), None, (Injection(2, _n(rng, conv2.out_width, 7), conv2), Injection(3, _n(rng, 2, 7)),
                        Injection(0, _n(rng, 3, 7))), 7, True),
        ((), _n(rng, 7, 3), (), 3, True),
    ]
    stages = [LayerBlockStage((), 0.0, None, (), np.zeros(0), np.zeros((0, P)), _n(rng, P, scale=0.3))]
    for new, W, inj, H, commit in specs:
        V, c = head(H)
        st = LayerBlockStage(new, 0.0, W, inj, b(H), V, c, commit)
        cost = float(sum(costs[g] for g in new)) + st.macs * COST_PER_MAC
        stages.append(LayerBlockStage(new, cost, W, inj, st.b, V, c, commit))
    names = {"identity": ("y0", "y1"), "sigmoid": ("no", "yes"), "softmax": ("a", "b", "c")}[link]
    classes = None if link == "identity" else np.array(names)
    return LayerBlockModel(("flat", "imu", "mic", "pair"), cols, costs, tuple(stages), link, names,
                           n_features=N_FEATURES, classes=classes, group_shapes=(None, (2, 9), (1, 6), None))


def rows(n: int, seed: int = 1) -> np.ndarray:
    """n random rows of N_FEATURES (float64, exactly representable in float32)."""
    return np.random.default_rng(seed).normal(size=(n, N_FEATURES)).astype(np.float32).astype(np.float64)
