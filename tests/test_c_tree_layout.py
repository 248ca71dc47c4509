"""The C tree layout (pre-order 8-byte nodes, leaves in place) and both of its walks (eight trees in
lockstep, ``ES_TREE_LANES=8``, the host default; one tree at a time, ``ES_TREE_LANES=1``, the
Cortex-M default) against independent references, on random ensembles built for the edges:

* trees stored in a scrambled order (breadth-first, children visited in random order), so the
  generator's re-layout into pre-order is exercised -- a layout bug changes the leaf reached;
* thresholds at 0, -0, the smallest normal and subnormal floats, +-3e38, with rows on each threshold
  and one float32 step either side (x == t goes left, as LightGBM and ONNX BRANCH_LEQ);
* single-leaf trees, depth-1 stumps, deep unbalanced chains, stages of 0, 1, 7, 8, 13 trees (the
  lockstep loop and its remainder);
* integer leaves and an identity readout, so every float32 sum is exact and C must equal the numpy
  walk of the ensemble in its original order bit for bit (the result of the layout before, which
  walked the ensemble's own arrays);

under ASan/UBSan with each walk, on the emulated Cortex-M4F with each walk, and a LightGBM model
against LightGBM's own predict.
"""

from __future__ import annotations

import numpy as np
import pytest
from c_support import SAN, sanitizer_compilers
from tree_models import boundary_rows

from edgeseq.export.c_arm import TARGETS, missing_tools, run_driver_arm
from edgeseq.export.c_harness import run_c_trees
from edgeseq.export.kinds.trees.c_float import tree_feature_order, tree_preorder, write_c_tree_model
from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel

EDGE_THRESHOLDS = np.array([0.0, -0.0, 1.1754944e-38, -1.1754944e-38, 1.4e-45, -1.4e-45, 3.0e38, -3.0e38,
                            0.5, -0.25], np.float32)
LANES = ["ES_TREE_LANES=1", "ES_TREE_LANES=8"]


def _tree(rng, n_features, shape):
    """One tree as (feature, threshold, left, right, value) lists in pre-order, local indices."""
    nodes = []

    def grow(depth, chain):
        i = len(nodes)
        nodes.append([-1, 0.0, -1, -1, float(rng.integers(-40, 40))])
        if depth == 0:
            return i
        nodes[i][0] = int(rng.integers(n_features))
        nodes[i][1] = float(rng.choice(EDGE_THRESHOLDS)) if rng.random() < 0.5 else float(rng.integers(-3, 4) / 2)
        if chain:  # a deep unbalanced tree: one side a leaf, the other goes on
            go_left = rng.random() < 0.5
            nodes[i][2] = grow(depth - 1, True) if go_left else grow(0, False)
            nodes[i][3] = grow(0, False) if go_left else grow(depth - 1, True)
        else:
            nodes[i][2] = grow(depth - 1 if rng.random() < 0.8 else 0, False)
            nodes[i][3] = grow(depth - 1 if rng.random() < 0.8 else 0, False)
        return i

    grow(*shape)
    return nodes


def _scrambled(nodes, rng):
    """The same tree breadth-first with children visited in random order (children stay after parents)."""
    order, queue = [], [0]
    while queue:
        i = queue.pop(0)
        order.append(i)
        kids = [k for k in nodes[i][2:4] if k >= 0]
        queue += [kids[j] for j in rng.permutation(len(kids))]
    place = {old: new for new, old in enumerate(order)}
    return [[f, t, place[left] if left >= 0 else -1, place[r] if r >= 0 else -1, v]
            for f, t, left, r, v in (nodes[i] for i in order)]


def edge_model(seed: int) -> TreeStageModel:
    """Three groups, stages of 0, 1, 7, 8 and 13 trees of every edge shape, exact integer sums."""
    rng = np.random.default_rng(seed)
    sizes = (3, 2, 4)
    cols = [list(range(0, 3)), list(range(3, 5)), list(range(5, 9))]
    shapes = [(0, False), (1, False), (3, False), (6, False), (25, True)]  # leaf, stump, small, full-ish, chain
    arrays = {k: [] for k in ("feature", "threshold", "left", "right", "value")}
    roots, target, stages = [], [], [TreeStage((), 0.0, 0, 0, np.eye(2, 1), np.zeros(1))]
    plan = [((), 1), ((0,), 7), ((1,), 8), ((), 0), ((2,), 13)]
    paid = []
    for groups, n_trees in plan:
        paid += [c for g in groups for c in cols[g]]
        start = len(roots)
        for _ in range(n_trees):
            shape = shapes[int(rng.integers(len(shapes)))] if paid else (0, False)
            nodes = _scrambled(_tree(rng, max(len(paid), 1), shape), rng)
            base = len(arrays["feature"])
            roots.append(base)
            target.append(int(rng.integers(2)))
            for f, t, left, r, v in nodes:
                arrays["feature"].append(paid[f] if f >= 0 else -1)
                arrays["threshold"].append(t)
                arrays["left"].append(base + left if left >= 0 else -1)
                arrays["right"].append(base + r if r >= 0 else -1)
                arrays["value"].append(v)
        cost = 0.0 if not groups else 1.0
        stages.append(TreeStage(tuple(groups), cost, start, len(roots), np.eye(2, 1), np.zeros(1)))
    ens = TreeEnsemble(**arrays, roots=roots, target=target, n_features=sum(sizes), n_targets=2)
    return TreeStageModel(("a", "b", "c"), tuple(np.array(c) for c in cols), [1.0, 1.0, 1.0], ens, tuple(stages),
                          "identity", ("y",))


def edge_rows(model: TreeStageModel, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.choice(np.concatenate([EDGE_THRESHOLDS, [-1.0, 1.0, 2.0, -2.0]]), size=(20, 9)).astype(np.float64)
    return np.vstack([base, boundary_rows(model, base, limit=400)])


def numpy_walk(model: TreeStageModel, X: np.ndarray, k: int) -> np.ndarray:
    """Stage k's prediction walking the ensemble's own arrays (original order) in float32: exact here."""
    ens = model.ensemble
    x32 = X.astype(np.float32)
    state = np.zeros((X.shape[0], ens.n_targets), np.float32)
    for t in range(model.stages[k].tree_stop):
        for r in range(X.shape[0]):
            i = int(ens.roots[t])
            while ens.feature[i] >= 0:
                i = int(ens.left[i] if x32[r, ens.feature[i]] <= np.float32(ens.threshold[i]) else ens.right[i])
            state[r, ens.target[t]] += np.float32(ens.value[i])
    return state @ model.stages[k].W.astype(np.float32) + model.stages[k].b.astype(np.float32)


@pytest.fixture(scope="module", params=[0, 1])
def case(request):
    model = edge_model(request.param)
    X = edge_rows(model, request.param)
    return model, X, [numpy_walk(model, X, k) for k in range(len(model.stages))]


def test_the_edge_models_reach_every_edge(case):
    """Negative control for the fixtures: scrambled order, ties on thresholds, every shape present."""
    model, X, _ = case
    ens = model.ensemble
    order, _ = tree_preorder(model)
    assert not np.array_equal(order, np.arange(ens.n_nodes))  # the re-layout really permutes
    sizes = np.diff(np.append(ens.roots, ens.n_nodes))
    assert sizes.min() == 1 and ens.depth.max() >= 20 and 1 in ens.depth.tolist()
    split = np.flatnonzero(ens.feature >= 0)
    ties = (X[:, ens.feature[split]].astype(np.float32) == ens.threshold[split].astype(np.float32)).sum()
    assert ties > 50


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("cc", sanitizer_compilers())
def test_both_walks_equal_the_ensemble_bit_for_bit_under_sanitizers(case, lanes, cc):
    model, X, want = case
    run = run_c_trees(model, X, compiler=cc, flags=SAN, extra=("-O1", f"-D{lanes}"))
    for k, (got, ref) in enumerate(zip(run.predictions, want)):
        assert np.array_equal(got.astype(np.float32), ref), f"stage {k} ({lanes}, {cc})"


def test_a_walk_comparing_less_than_is_caught(case, tmp_path):
    """Negative control: the same check fails for a runtime that sends x == t right."""
    import shutil
    from unittest import mock

    from edgeseq.export.c_harness import runtime_dir
    model, X, want = case
    rdir = tmp_path / "runtime"
    shutil.copytree(runtime_dir(), rdir)
    src = (rdir / "edgeseq_runtime.c").read_text()
    assert src.count("x[nd->feature] <= nd->value") == 1
    (rdir / "edgeseq_runtime.c").write_text(src.replace("x[nd->feature] <= nd->value", "x[nd->feature] < nd->value"))
    with mock.patch("edgeseq.export.c_harness.runtime_dir", return_value=rdir):
        run = run_c_trees(model, X, extra=("-O1", "-DES_TREE_LANES=1"))
    assert any(not np.array_equal(g.astype(np.float32), r) for g, r in zip(run.predictions, want))


def small_lightgbm():
    """(LightGBM regressor, its edgeseq model, rows incl. each threshold's neighbours): 21 trees x 15 leaves."""
    lgb = pytest.importorskip("lightgbm")
    from edgeseq import from_lightgbm
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 8)).astype(np.float32).astype(np.float64)
    y = X[:, 0] * X[:, 1] + np.sin(X[:, 2]) + (X[:, 3] > 0.3)
    reg = lgb.LGBMRegressor(n_estimators=21, num_leaves=15, min_child_samples=3, verbose=-1, n_jobs=1,
                            deterministic=True).fit(X, y)
    model = from_lightgbm(reg, [[0, 1, 2, 3], [4, 5, 6, 7]], [1.0, 1.0])
    return reg, model, np.vstack([X[:60], boundary_rows(model, X[:60], limit=80)])


def test_lightgbm_both_walks_agree_with_lightgbm():
    reg, model, rows = small_lightgbm()
    runs = [run_c_trees(model, rows, extra=("-O2", f"-D{lanes}")) for lanes in LANES]
    assert all(np.array_equal(a, b) for a, b in zip(runs[0].predictions, runs[1].predictions))
    want = reg.predict(rows)
    np.testing.assert_allclose(runs[1].predictions[-1].ravel(), want, rtol=1e-6, atol=1e-5)


def test_the_generator_refuses_what_16_bit_fields_cannot_hold(tmp_path):
    from edgeseq.errors import ExportError
    n = 70_000
    ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
                       value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=n, n_targets=1)
    model = TreeStageModel(("a",), (np.arange(n),), [1.0], ens,
                           (TreeStage((), 0.0, 0, 0, np.ones((1, 1)), np.zeros(1)),
                            TreeStage((0,), 1.0, 0, 1, np.ones((1, 1)), np.zeros(1))), "identity", ("y",))
    with pytest.raises(ExportError, match="16-bit"):
        write_c_tree_model(model, tmp_path, "m")
    assert tree_feature_order(model).size == n


@pytest.mark.skipif(missing_tools() is not None, reason=f"emulated Cortex-M tests skipped: {missing_tools()}")
@pytest.mark.parametrize("lanes", LANES)
def test_both_walks_on_the_emulated_m4f(tmp_path, lanes):
    model = edge_model(2)
    X = edge_rows(model, 2)
    want = [numpy_walk(model, X, k) for k in range(len(model.stages))]
    write_c_tree_model(model, tmp_path, "edge")
    run, _ = run_driver_arm(tmp_path, X[:, tree_feature_order(model)], TARGETS["cortex-m4f"], defines=[lanes])
    for k, (got, ref) in enumerate(zip(run.predictions, want)):
        assert np.array_equal(got.astype(np.float32), ref), f"stage {k} ({lanes})"
