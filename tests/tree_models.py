"""Tree-stage models for the tests: small LightGBM imports and fast AFR fits (the float32 bound their
ONNX stages are compared with is verify's, `tree_stage_bound`, derived there), and models built
directly without training (`random_tree_model`), so the C tree tests can cover shapes, links,
multi-group and group-less stages, several state dimensions and exact-arithmetic models
independently of AFR and LightGBM."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from edgeseq.export.kinds.trees.verify import tree_stage_bound as stage_bound  # noqa: F401 (the tests' bound)
from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel

GROUPS = [[0, 1], [2, 3], [4], [5, 6, 7]]
COSTS = [1.0, 2.0, 4.0, 8.0]
NAMES = ["cheap", "pair", "single", "costly"]
PARAMS = dict(n_estimators=12, num_leaves=5, learning_rate=0.3, min_child_samples=5, verbose=-1,
              deterministic=True, force_row_wise=True, n_jobs=1)


def data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8)).round(2).astype(np.float32).astype(np.float64)
    score = X[:, 0] + X[:, 2] * X[:, 3] + 0.5 * X[:, 5] - X[:, 7] ** 2
    return X, score


@functools.lru_cache(maxsize=None)
def lightgbm_model(kind: str) -> TreeStageModel:
    """identity (regression), sigmoid (binary) or softmax (3 classes) LightGBM import."""
    lgb = pytest.importorskip("lightgbm")
    from edgeseq.train.trees.lightgbm_import import from_lightgbm

    X, s = data()
    if kind == "identity":
        est = lgb.LGBMRegressor(**PARAMS).fit(X, s)
    elif kind == "sigmoid":
        est = lgb.LGBMClassifier(**PARAMS).fit(X, s > 0)
    else:
        est = lgb.LGBMClassifier(**PARAMS).fit(X, np.digitize(s, [-0.5, 0.5]))
    return from_lightgbm(est, GROUPS, COSTS, group_names=NAMES)


@functools.lru_cache(maxsize=None)
def afr_model(n_classes: int = 2):
    """A fast AFR fit (a fitted AFRClassifier) on the same data."""
    from edgeseq.train.trees.afr import AFRClassifier

    X, s = data(200)
    y = (s > 0).astype(int) if n_classes == 2 else np.digitize(s, [-0.5, 0.5])
    return AFRClassifier(GROUPS, COSTS, group_names=NAMES, n_dims=1, n_trees=2, max_blocks=3).fit(X, y)


def boundary_rows(model: TreeStageModel, X: np.ndarray, limit: int = 60) -> np.ndarray:
    """Rows whose split feature sits exactly on, and one float32 step either side of, each threshold."""
    ens = model.ensemble
    rows = []
    for i in np.flatnonzero(ens.feature >= 0)[:limit]:
        for t in (ens.threshold[i], np.nextafter(ens.threshold[i], np.float32(np.inf)),
                  np.nextafter(ens.threshold[i], np.float32(-np.inf))):
            r = X[i % X.shape[0]].copy()
            r[ens.feature[i]] = float(t)
            rows.append(r)
    return np.array(rows)


def toy_model(link: str = "identity") -> TreeStageModel:
    """Two groups, hand-made trees, thresholds on round numbers (boundary tests)."""
    ens = TreeEnsemble(feature=[0, -1, 1, -1, -1, 2, -1, -1], threshold=[0.5, 0, 0.25, 0, 0, -1.0, 0, 0],
                       left=[1, -1, 3, -1, -1, 6, -1, -1], right=[2, -1, 4, -1, -1, 7, -1, -1],
                       value=[0, 1.0, 0, 2.0, 3.0, 0, -4.0, 8.0], roots=[0, 5], target=[0, 0],
                       n_features=3, n_targets=1)
    P = 1
    W = np.ones((1, P))
    stages = (TreeStage((), 0.0, 0, 0, W, np.full(P, 0.5)), TreeStage((0,), 1.0, 0, 1, W, np.zeros(P)),
              TreeStage((1,), 2.0, 1, 2, 0.5 * W, np.ones(P)))
    outputs = ("no", "yes") if link == "sigmoid" else ("y",)
    return TreeStageModel(("ab", "c"), ([0, 1], [2]), [1.0, 2.0], ens, stages, link, outputs)


def _grow(rng, arrays, allowed, depth, leaf_value, root=True):
    """Append one tree in preorder (children after their parent); return its root index."""
    i = len(arrays["feature"])
    for name in arrays:
        arrays[name].append(-1 if name in ("feature", "left", "right") else 0.0)
    if depth == 0 or (not root and rng.random() < 0.15):
        arrays["value"][i] = leaf_value()
        return i
    arrays["feature"][i] = int(rng.choice(allowed))
    arrays["threshold"][i] = float(np.float32(np.round(rng.normal(), 2)))
    arrays["left"][i] = _grow(rng, arrays, allowed, depth - 1, leaf_value, root=False)
    arrays["right"][i] = _grow(rng, arrays, allowed, depth - 1, leaf_value, root=False)
    return i


def random_tree_model(rng: np.random.Generator, group_sizes=(2, 3, 1), stage_groups=((0,), (1, 2)),
                      trees_per_stage=(2, 3), n_state: int = 2, n_outputs: int = 1, link: str = "identity",
                      depth: int = 3, costs=None, integer_leaves: bool = False,
                      identity_readout: bool = False) -> TreeStageModel:
    """A random but valid TreeStageModel.

    Columns are shuffled (raw layout != sequence order) and one column belongs to no group. Stage
    k (k >= 1) needs ``stage_groups[k-1]`` (possibly empty: then it costs 0) and holds
    ``trees_per_stage[k-1]`` trees that split only on groups paid by then. Thresholds and, by
    default, the rows the tests use are rounded to 2 decimals so rows often sit exactly on a
    threshold. `integer_leaves` with `identity_readout` makes every float32 sum exact (small
    integers), so C must equal Python bit for bit.
    """
    sizes = list(group_sizes)
    D = sum(sizes) + 1
    perm = rng.permutation(D)
    cols, start = [], 0
    for s in sizes:
        cols.append(np.sort(perm[start:start + s]))
        start += s
    costs = rng.uniform(0.1, 1.0, len(sizes)).round(3) if costs is None else np.asarray(costs, float)
    P = 1 if link == "sigmoid" else n_outputs
    if integer_leaves:
        def leaf_value():
            return float(rng.integers(-50, 50))
    else:
        def leaf_value():
            return float(rng.normal())
    arrays = {name: [] for name in ("feature", "threshold", "left", "right", "value")}
    roots, target, paid = [], [], []
    stages = [TreeStage((), 0.0, 0, 0, _readout(rng, n_state, P, identity_readout), _bias(rng, P, identity_readout))]
    for k, (groups, n_trees) in enumerate(zip(stage_groups, trees_per_stage), start=1):
        paid += list(groups)
        allowed = np.concatenate([cols[g] for g in paid]) if paid else np.zeros(0, np.int64)
        start_tree = len(roots)
        for _ in range(n_trees):
            roots.append(_grow(rng, arrays, allowed, depth if allowed.size else 0, leaf_value))
            target.append(int(rng.integers(n_state)))
        stages.append(TreeStage(tuple(groups), float(sum(costs[g] for g in groups)), start_tree, len(roots),
                                _readout(rng, n_state, P, identity_readout), _bias(rng, P, identity_readout)))
    ens = TreeEnsemble(**arrays, roots=roots, target=target, n_features=D, n_targets=n_state)
    outputs = ("neg", "pos") if link == "sigmoid" else tuple(f"out{p}" for p in range(P))
    return TreeStageModel(group_names=tuple(f"group {g}" for g in range(len(sizes))), group_columns=tuple(cols),
                          costs=costs, ensemble=ens, stages=tuple(stages), link=link, output_names=outputs)


def _readout(rng, S, P, identity):
    if identity:
        return np.eye(S, P)
    return rng.normal(size=(S, P))


def _bias(rng, P, identity):
    return np.zeros(P) if identity else rng.normal(size=P)


def rows(rng, model: TreeStageModel, n: int = 40) -> np.ndarray:
    """Rows of the model's raw width, rounded to 2 decimals like the thresholds (many exact ties)."""
    return rng.normal(size=(n, model.ensemble.n_features)).round(2)
