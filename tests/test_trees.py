"""The tree-ensemble arrays: evaluator semantics (checked against onnxruntime's TreeEnsembleRegressor
at the float32 boundary values) and the validation an emitter relies on (each invariant broken once)."""

import numpy as np
import pytest

from edgeseq.errors import InputError, ModelFormatError
from edgeseq.forms.trees import MAX_DEPTH, TreeEnsemble, TreeStage, TreeStageModel

# tree 0: x0 <= 0.1 ? (x1 <= -2 ? 1 : 2) : 3      tree 1 (target 1): x2 <= 1e-8 ? -5 : 7     tree 2: leaf 0.25
T = np.float32(0.1)
ARRAYS = dict(feature=[0, 1, -1, -1, -1, 2, -1, -1, -1], threshold=[T, -2, 0, 0, 0, 1e-8, 0, 0, 0],
              left=[1, 2, -1, -1, -1, 6, -1, -1, -1], right=[4, 3, -1, -1, -1, 7, -1, -1, -1],
              value=[0, 0, 1, 2, 3, 0, -5, 7, 0.25], roots=[0, 5, 8], target=[0, 1, 0])


def ensemble(**changes):
    kw = {k: list(v) for k, v in ARRAYS.items()}
    kw.update(changes)
    return TreeEnsemble(**kw, n_features=3, n_targets=2)


def boundary_rows():
    t = np.float64(T)
    up32 = np.float64(np.nextafter(T, np.float32(np.inf)))
    rows = [[t, 0, 0],  # exactly the float32 threshold: left
            [up32, 0, 0],  # next float32 above: right
            [t + 1e-12, 0, 0],  # float64 above, but rounds to the threshold in float32: left
            [0.1, 0, 0],  # the float64 0.1 rounds to the float32 threshold: left
            [-1, -2, 0], [-1, np.nextafter(np.float32(-2), np.float32(0)), 0],
            [5, 5, 1e-8], [5, 5, np.float64(np.nextafter(np.float32(1e-8), np.float32(1)))], [5, 5, -0.0]]
    return np.array(rows)


def onnx_reference(ens, X):
    """onnxruntime's ai.onnx.ml TreeEnsembleRegressor (opset 3) on the same arrays: the independent reference."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    a = dict(nodes_treeids=[], nodes_nodeids=[], nodes_featureids=[], nodes_values=[], nodes_modes=[],
             nodes_truenodeids=[], nodes_falsenodeids=[], target_treeids=[], target_nodeids=[], target_ids=[],
             target_weights=[])
    for t in range(ens.n_trees):
        a0, b0 = ens.tree_range(t)
        for i in range(a0, b0):
            leaf = ens.feature[i] < 0
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(i - a0)
            a["nodes_featureids"].append(0 if leaf else int(ens.feature[i]))
            a["nodes_values"].append(float(ens.threshold[i]))
            a["nodes_modes"].append("LEAF" if leaf else "BRANCH_LEQ")
            a["nodes_truenodeids"].append(0 if leaf else int(ens.left[i]) - a0)
            a["nodes_falsenodeids"].append(0 if leaf else int(ens.right[i]) - a0)
            if leaf:
                a["target_treeids"].append(t)
                a["target_nodeids"].append(i - a0)
                a["target_ids"].append(int(ens.target[t]))
                a["target_weights"].append(float(ens.value[i]))
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", n_targets=ens.n_targets,
                            aggregate_function="SUM", post_transform="NONE", **a)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, ens.n_features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, ens.n_targets])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)],
                              ir_version=10)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": X.astype(np.float32)})[0]


def test_boundary_values_follow_float32_leq():
    ens = ensemble()
    out = ens.predict(boundary_rows())
    np.testing.assert_array_equal(out[:, 0], [2.25, 3.25, 2.25, 2.25, 1.25, 2.25, 3.25, 3.25, 3.25])
    np.testing.assert_array_equal(out[:, 1], [-5, -5, -5, -5, -5, -5, -5, 7, -5])


def test_matches_onnxruntime_tree_ensemble_at_boundaries_and_random_rows():
    ens = ensemble()
    rng = np.random.default_rng(0)
    X = np.vstack([boundary_rows(), rng.normal(size=(200, 3))])
    np.testing.assert_allclose(ens.predict(X), onnx_reference(ens, X), rtol=0, atol=1e-6)
    # negative control: a strict "<" evaluator would disagree on the first boundary row
    assert ens.predict(boundary_rows()[:1])[0, 0] != 3.25


def test_depths_select_and_features():
    ens = ensemble()
    assert ens.depth.tolist() == [2, 1, 0]
    assert ens.features_of_trees([0]).tolist() == [0, 1] and ens.features_of_trees([2]).tolist() == []
    sub = ens.select([1, 2])
    X = np.random.default_rng(1).normal(size=(50, 3))
    np.testing.assert_array_equal(sub.predict(X), ens.predict(X, trees=[1, 2]))
    with pytest.raises(InputError, match="rows of 3 features"):
        ens.predict(X[:, :2])


@pytest.mark.parametrize("changes, message", [
    (dict(left=[1, 2, -1, -1, -1, 6, -1, -1, -1], right=[0, 3, -1, -1, -1, 7, -1, -1, -1]), "backwards"),
    (dict(left=[1, 2, -1, -1, -1, 6, -1, -1, -1], right=[4, 2, -1, -1, -1, 7, -1, -1, -1]), "one parent"),
    (dict(right=[4, 3, -1, -1, -1, 8, -1, -1, -1]), "outside its tree"),
    (dict(feature=[0, 3, -1, -1, -1, 2, -1, -1, -1]), "feature 3"),
    (dict(threshold=[np.nan, -2, 0, 0, 0, 1e-8, 0, 0, 0]), "NaN or Inf"),
    (dict(threshold=[1e39, -2, 0, 0, 0, 1e-8, 0, 0, 0]), "NaN or Inf"),  # overflows float32
    (dict(value=[0, 0, 1, np.inf, 3, 0, -5, 7, 0.25]), "leaf value"),
    (dict(left=[1, 2, 4, -1, -1, 6, -1, -1, -1]), "leaf has children"),
    (dict(target=[0, 2, 0]), "target dimension"),
    (dict(roots=[0, 8, 5]), "roots"),
    (dict(feature=[0.5, 1, -1, -1, -1, 2, -1, -1, -1]), "integers"),
])
def test_invalid_ensembles_are_refused(changes, message):
    with pytest.raises(ModelFormatError, match=message):
        ensemble(**changes)


def test_depth_bound():
    n = MAX_DEPTH + 1  # a chain of n splits
    feature = [0] * n + [-1] * (n + 1)
    left, right = [], []
    for i in range(n):
        left.append(n + i)  # leaf
        right.append(i + 1 if i + 1 < n else 2 * n)
    # renumber so that children follow parents: split i at 2i, its leaf at 2i+1
    order = []
    for i in range(n):
        order += [i, n + i]
    order.append(2 * n)
    pos = {old: new for new, old in enumerate(order)}
    f = [feature[o] for o in order]
    lf = [pos[left[o]] if o < n else -1 for o in order]
    rt = [pos[right[o]] if o < n else -1 for o in order]
    kw = dict(feature=f, threshold=[0.0] * len(f), left=lf, right=rt, value=[1.0] * len(f), roots=[0], target=[0],
              n_features=1, n_targets=1)
    with pytest.raises(ModelFormatError, match="depth"):
        TreeEnsemble(**kw)
    kw_ok = {**kw, "feature": f[2:], "threshold": kw["threshold"][2:], "value": kw["value"][2:],
             "left": [c - 2 if c >= 0 else -1 for c in lf[2:]], "right": [c - 2 if c >= 0 else -1 for c in rt[2:]]}
    assert TreeEnsemble(**kw_ok).depth[0] == MAX_DEPTH  # one level less is accepted


def test_arrays_are_private_and_read_only():
    feat = np.array(ARRAYS["feature"])
    ens = ensemble(feature=feat)
    feat[0] = 99
    assert ens.feature[0] == 0
    with pytest.raises(ValueError):
        ens.feature[0] = 2


def stage_model(stage1_trees=(0, 1), stage1_groups=(0,), **kw):
    ens = ensemble()
    W = np.ones((2, 1))
    stages = (TreeStage((), 0.0, 0, 0, np.zeros((2, 1)), np.zeros(1)),
              TreeStage(stage1_groups, 1.0, *stage1_trees, W, np.zeros(1)),
              TreeStage((1,), 2.0, stage1_trees[1], 3, W, np.array([0.5])))
    args = dict(group_names=("a", "b"), group_columns=(np.array([0, 2]), np.array([1])), costs=np.array([1.0, 2.0]),
                ensemble=ens, stages=stages, link="sigmoid", output_names=("n", "p"))
    args.update(kw)
    return TreeStageModel(**args)


def test_stage_model_reads_only_computed_groups():
    with pytest.raises(ModelFormatError, match="feature 1, which belongs to no group computed"):
        stage_model()  # tree 0 splits on x1 (group b) in stage 1, which computes only group a
    model = stage_model(stage1_trees=(0, 0), stage1_groups=(0,))
    X = np.random.default_rng(2).normal(size=(30, 3))
    z = list(model.staged_decision(X))
    np.testing.assert_allclose(z[2][:, 0], ensemble().predict(X).sum(axis=1) + 0.5)
    assert model.prefix_for_budget(2.9) == 1 and model.prefix_for_budget(3.0) == 2
    assert model.prefix_columns(1).tolist() == [0, 2]


def two_stages(groups, cost, start, stop):
    return TreeStageModel(("a", "b"), (np.array([0, 2]), np.array([1])), np.array([1.0, 2.0]), ensemble(),
                          (TreeStage((), 0.0, 0, 0, np.zeros((2, 1)), np.zeros(1)),
                           TreeStage(groups, cost, start, stop, np.ones((2, 1)), np.zeros(1))), "sigmoid", ("n", "p"))


def test_stage_model_refuses_inconsistent_stages():
    assert two_stages((0, 1), 3.0, 0, 3).cum_cost.tolist() == [0.0, 3.0]  # the control: consistent
    with pytest.raises(ModelFormatError, match="continue where"):
        two_stages((0, 1), 3.0, 1, 3)
    with pytest.raises(ModelFormatError, match="less than its groups"):
        two_stages((0, 1), 2.0, 0, 3)
    with pytest.raises(ModelFormatError, match="cover 2 of the 3"):
        two_stages((0, 1), 3.0, 0, 2)
    with pytest.raises(ModelFormatError, match="unknown or already computed group 5"):
        two_stages((0, 5), 3.0, 0, 3)
