"""Small tree-stage models for the export/runtime tests (LightGBM imports and fast AFR fits); the
float32 bound their ONNX stages are compared with is verify's (`tree_stage_bound`, derived there)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from edgeseq.evaluate.verify_trees import tree_stage_bound as stage_bound  # noqa: F401 (the tests' bound)
from edgeseq.train.trees import TreeEnsemble, TreeStage, TreeStageModel

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
    from edgeseq.train.lightgbm_import import from_lightgbm

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
    from edgeseq.train.afr import AFRClassifier

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
