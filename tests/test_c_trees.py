"""Tree-stage models in generated C: every stage of the compiled runtime equals
`TreeStageModel.predict` (numpy, float64) within a derived float32 bound, for hand-made, AFR and
LightGBM-imported models; splits agree with float32 ``x <= t`` at the boundary values (exactly, and
a runtime comparing ``<`` is caught); budgets pick Python's stage; corrupt models are refused by the
generator and corrupt descriptors by es_init; interrupt reads are never torn.

Bound (per row, stage k and output p; u = 2^-24): leaf values are rounded to float32 (u |v| each)
and summed per state dimension i in tree order in float32, so |s~_i - s_i| <= E_i = (n_i + 2) u A_i
with n_i trees into dimension i so far and A_i the sum of their |leaf|. The readout is a float32
dot product of length S: |z~_p - z_p| <= sum_i |W_ip| E_i + (S + 3) u (sum_i (|s_i| + E_i)|W_ip| + |b_p|).
We allow twice the largest over p, plus float32's subnormal spacing, plus 2^-20 after a sigmoid
or softmax (at most 1/2-Lipschitz per logit; expf and the division add a few ulp of values <= 1).
The decisions themselves are exact: C and numpy compare the same float32 x with the same float32 t.
"""

import re
import subprocess
import zlib

import numpy as np
import pytest
from c_support import SAN, U32, boundary_budgets, in_place_commit_runtime, sanitizer_compilers
from tree_models import boundary_rows, random_tree_model, rows

from edgeseq.errors import ExportError
from edgeseq.export.c_harness import (build_driver, compile_c, run_c, run_c_budgets, run_c_trees,
                                      runtime_dir, sweep_c_trees)
from edgeseq.export.kinds.trees.c_float import tree_feature_order, tree_preorder, write_c_tree_model
from edgeseq.forms.trees import TreeStage, TreeStageModel


def tree_bound(model: TreeStageModel, X: np.ndarray, k: int) -> np.ndarray:
    """Per-row bound on |C - numpy| at stage k (shape (n, 1)); see the module docstring."""
    ens, stage = model.ensemble, model.stages[k]
    S = ens.n_targets
    leaves = ens.tree_outputs(X, range(stage.tree_stop))
    A, s, count = np.zeros((X.shape[0], S)), np.zeros((X.shape[0], S)), np.zeros(S)
    for t in range(stage.tree_stop):
        A[:, ens.target[t]] += np.abs(leaves[:, t])
        s[:, ens.target[t]] += leaves[:, t]
        count[ens.target[t]] += 1
    E = (count + 2) * U32 * A
    W = np.abs(stage.W)
    err = E @ W + (S + 3) * U32 * ((np.abs(s) + E) @ W + np.abs(stage.b))
    bound = 2 * err.max(axis=1, keepdims=True) + (S + 1) * 2.0 ** -149
    return bound + (2.0 ** -20 if model.link != "identity" else 0.0)


def assert_stages_match(model: TreeStageModel, X: np.ndarray, run) -> None:
    assert len(run.predictions) == len(model.stages)
    for k, got in enumerate(run.predictions):
        ref = model.predict(X, stage=k)
        err, bound = np.abs(got - ref), tree_bound(model, X, k)
        worst = np.unravel_index(np.argmax(err - bound), err.shape)
        assert np.all(err <= bound), f"stage {k}: |C - numpy| = {err[worst]:.3g} > {bound[worst[0], 0]:.3g}"
        if model.link == "identity":
            assert np.all(run.labels[k] == -1)
        else:  # C's label is the first maximum of its own probabilities; numpy's where clearly apart
            assert np.array_equal(run.labels[k], got.argmax(axis=1))
            top2 = np.sort(ref, axis=1)[:, -2:]
            clear = top2[:, 1] - top2[:, 0] > 1e-4
            assert np.array_equal(run.labels[k][clear], ref[clear].argmax(axis=1))


# (link, group sizes, groups per stage -- () is a stage without new groups --, trees per stage, S, P)
CASES = [
    ("identity", (2, 3, 1), ((0,), (1, 2)), (2, 3), 2, 1),
    ("identity", (1, 2, 2, 1), ((1,), (), (0, 3), (2,)), (1, 2, 4, 3), 3, 2),
    ("sigmoid", (3, 1, 2), ((2,), (0,), (), (1,)), (3, 1, 2, 2), 3, 1),
    ("softmax", (2, 2, 3), ((0, 1), (), (2,)), (4, 2, 5), 4, 3),
    ("softmax", (1, 1), ((), (0,), (1,)), (2, 3, 1), 1, 5),  # a constant stage right after stage 0
]


def _case_model(case):
    link, sizes, stage_groups, trees, S, P = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    return random_tree_model(rng, sizes, stage_groups, trees, n_state=S, n_outputs=P, link=link), rng


@pytest.mark.parametrize("cc", sanitizer_compilers())
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{len(c[2])}stages" for c in CASES])
def test_every_stage_matches_numpy(case, cc):
    model, rng = _case_model(case)
    X = rows(rng, model)
    X = np.vstack([X, boundary_rows(model, X, limit=30)])
    assert_stages_match(model, X, run_c_trees(model, X, compiler=cc))


@pytest.mark.parametrize("case", CASES[1:4], ids=["identity", "sigmoid", "softmax"])
def test_every_stage_matches_numpy_under_asan_ubsan(case):
    model, rng = _case_model(case)
    X = rows(rng, model, n=15)
    assert_stages_match(model, X, run_c_trees(model, X, flags=SAN, extra=("-O1", "-g")))


def test_afr_models_binary_and_multiclass():
    from sklearn.datasets import load_breast_cancer, load_digits

    from edgeseq.train.trees.afr import AFRClassifier
    X, y = load_breast_cancer(return_X_y=True)
    fast = dict(n_dims=2, n_trees=3, max_blocks=8)  # ~0.3 s each; several stages, one with two groups
    binary = AFRClassifier([[i, i + 10, i + 20] for i in range(10)], np.arange(1.0, 11.0), **fast).fit(X, y)
    Xd, yd = load_digits(return_X_y=True)
    keep = yd < 3
    multi = AFRClassifier([list(range(r * 8, r * 8 + 8)) for r in range(8)], np.ones(8), **fast).fit(
        Xd[keep][:300], yd[keep][:300])
    for clf, Xt in ((binary, X[::7]), (multi, Xd[keep][300:360])):
        model = clf.stage_model_
        assert model.ensemble.n_trees > 0 and len(model.stages) > 2
        run = run_c_trees(model, Xt)
        assert_stages_match(model, Xt, run)
        np.testing.assert_allclose(run.predictions[-1], clf.predict_proba(Xt), atol=1e-5)


@pytest.fixture(scope="module")
def lightgbm_models():
    lgb = pytest.importorskip("lightgbm", reason="LightGBM is an optional extra")
    from edgeseq.train.trees.lightgbm_import import from_lightgbm
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 8)).round(2)
    score = X[:, 0] + X[:, 2] * X[:, 3] + 0.5 * X[:, 5] - X[:, 7] ** 2
    groups, costs = [[0, 1], [2, 3], [4], [5, 6, 7]], [1.0, 2.0, 4.0, 8.0]
    params = dict(n_estimators=25, num_leaves=7, learning_rate=0.2, min_child_samples=5, verbose=-1,
                  deterministic=True, force_row_wise=True, n_jobs=1)
    reg = lgb.LGBMRegressor(**params).fit(X, score)
    binary = lgb.LGBMClassifier(**params).fit(X, score > 0)
    multi = lgb.LGBMClassifier(**params).fit(X, np.digitize(score, [-1.0, 0.5]))
    return X, {"regression": (reg, reg.predict), "binary": (binary, binary.predict_proba),
               "multiclass": (multi, multi.predict_proba)}, lambda m: from_lightgbm(m, groups, costs)


@pytest.mark.parametrize("kind", ["regression", "binary", "multiclass"])
def test_lightgbm_imports(lightgbm_models, kind):
    X, models, convert = lightgbm_models
    lgbm, predict = models[kind]
    model = convert(lgbm)
    Xt = np.vstack([X[:40], boundary_rows(model, X, limit=40)])
    run = run_c_trees(model, Xt)
    assert_stages_match(model, Xt, run)
    ref = predict(Xt.astype(np.float32).astype(np.float64))
    last = run.predictions[-1][:, 0] if kind == "regression" else run.predictions[-1]
    np.testing.assert_allclose(last, ref, rtol=1e-5, atol=1e-5)  # LightGBM itself, float32 precision


def _exact_stumps(seed=3):
    """Stumps (every split is a root, so every boundary row tests its split), integer leaves and an
    identity readout: every float32 sum is exact, so C must equal numpy bit for bit."""
    rng = np.random.default_rng(seed)
    return random_tree_model(rng, (2, 2, 1), ((0,), (1,), (2,)), (6, 6, 4), n_state=2, n_outputs=2, depth=1,
                             integer_leaves=True, identity_readout=True), rng


def _boundary_mismatches(model, X, predictions) -> int:
    return sum(int(np.sum(predictions[k] != model.predict(X, stage=k))) for k in range(len(model.stages)))


def test_threshold_boundaries_agree_with_float32_leq():
    model, rng = _exact_stumps()
    X = boundary_rows(model, rows(rng, model, n=8))
    on = X[:, model.ensemble.feature[model.ensemble.feature >= 0][0]]
    assert X.shape[0] >= 3 * 16 and np.any(on == model.ensemble.threshold[0])
    assert _boundary_mismatches(model, X, run_c_trees(model, X).predictions) == 0


def test_boundary_test_catches_a_strict_comparison(tmp_path):
    """Negative control: a runtime comparing x < t (not <=) disagrees on the rows that sit on a threshold."""
    model, rng = _exact_stumps()
    X = boundary_rows(model, rows(rng, model, n=8))
    src = (runtime_dir() / "edgeseq_runtime.c").read_text()
    leq = "x[nd->feature] <= nd->value"
    assert src.count(leq) == 1
    broken = tmp_path / "rt"
    broken.mkdir()
    (broken / "edgeseq_runtime.c").write_text(src.replace(leq, "x[nd->feature] < nd->value"))
    (broken / "edgeseq_runtime.h").write_text((runtime_dir() / "edgeseq_runtime.h").read_text())
    write_c_tree_model(model, tmp_path / "m", "m")
    exe = compile_c([broken / "edgeseq_runtime.c", tmp_path / "m" / "edgeseq_model.c",
                     runtime_dir() / "tests" / "driver.c"], tmp_path / "driver",
                    include_dirs=[tmp_path / "m", broken, runtime_dir()],
                    defines=["ES_PREFIX=m", "ES_ON_COMMIT=es_driver_on_commit"])
    Xc = X[:, tree_feature_order(model)].astype(np.float32)
    Xc.tofile(tmp_path / "rows.bin")
    out = subprocess.run([str(exe), "predict", str(tmp_path / "rows.bin")], capture_output=True, text=True,
                         check=True).stdout
    from edgeseq.export.c_harness import _parse
    run = _parse(out, X.shape[0], len(model.stages), 2)
    assert _boundary_mismatches(model, X, run.predictions) > 0


def _costed_model(seed=5):
    """Costs whose float sums are inexact (0.1 + 0.2 ...) and a group-less stage sharing a cumulative cost."""
    rng = np.random.default_rng(seed)
    return random_tree_model(rng, (1, 2, 1, 2), ((0,), (1,), (), (2, 3)), (2, 2, 1, 3), n_state=2,
                             costs=[0.1, 0.2, 0.7, 1e-3]), rng


def test_budgets_pick_pythons_stage():
    model, rng = _costed_model()
    budgets = boundary_budgets(model.cum_cost, rng)
    X = rows(rng, model, n=4)
    sweep = sweep_c_trees(model, X, budgets)
    run = run_c_trees(model, X)
    for b, budget in enumerate(budgets):
        want = model.prefix_for_budget(float(budget))
        assert np.all(sweep.prefix[:, b] == want), (budget.hex(), sweep.prefix[:, b], want)
        assert np.array_equal(sweep.predictions[:, b], run.predictions[want])
    # es_prefix_for_budget (the rule) and the firmware loop, linked with a linear model in one program
    from sequences import random_sequence
    seq = random_sequence(rng, (1, 2), n_outputs=1)
    got = run_c_budgets([model, seq], [budgets, boundary_budgets(seq.cum_cost, rng)])
    want = [model.prefix_for_budget(float(b)) for b in budgets]
    assert got[:len(budgets), 0].tolist() == want and got[:len(budgets), 1].tolist() == want


def _corrupt(model, **changes):
    ens = model.ensemble
    for name, fn in changes.items():
        arr = np.array(getattr(ens, name))
        fn(arr)
        object.__setattr__(ens, name, arr)  # bypassing validation, as a crafted pickle could
    return model


def _first_split(model):
    return int(np.flatnonzero(model.ensemble.feature >= 0)[0])


@pytest.mark.parametrize("what", ["child out of range", "child backwards", "feature out of range",
                                  "target out of range", "threshold NaN"])
def test_corrupt_arrays_are_refused_at_generation(tmp_path, what):
    model, _ = _case_model(CASES[0])
    i = _first_split(model)
    edit = {"child out of range": {"right": lambda a: a.__setitem__(i, 10 ** 6)},
            "child backwards": {"left": lambda a: a.__setitem__(i, i)},
            "feature out of range": {"feature": lambda a: a.__setitem__(i, model.ensemble.n_features)},
            "target out of range": {"target": lambda a: a.__setitem__(0, model.ensemble.n_targets)},
            "threshold NaN": {"threshold": lambda a: a.__setitem__(i, np.nan)}}[what]
    with pytest.raises(ExportError, match="cannot generate C") as info:
        write_c_tree_model(_corrupt(model, **edit), tmp_path, "m")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "edgeseq_model.c").exists()


def test_models_c_cannot_run_as_python_does_are_refused(tmp_path):
    model, _ = _case_model(CASES[0])
    ens, st = model.ensemble, model.stages
    paid_twice = TreeStageModel(model.group_names, model.group_columns, model.costs, ens,
                                (*st[:2], TreeStage((), 0.5, st[2].tree_start, st[2].tree_start, st[2].W, st[2].b),
                                 TreeStage(st[2].new_groups, st[2].cost, st[2].tree_start, st[2].tree_stop, st[2].W,
                                           st[2].b)), model.link, model.output_names)
    with pytest.raises(ExportError, match="needs no new group but costs 0.5"):
        write_c_tree_model(paid_twice, tmp_path, "m")
    huge = TreeStageModel(model.group_names, model.group_columns, model.costs, ens,
                          (*st[:2], TreeStage(st[2].new_groups, st[2].cost, st[2].tree_start, st[2].tree_stop,
                                              st[2].W, np.full_like(st[2].b, 3e38))),  # finite in float32
                          model.link, model.output_names)
    with pytest.raises(ExportError, match="overflow float32"):
        write_c_tree_model(huge, tmp_path, "m")
    write_c_tree_model(model, tmp_path, "m")  # control: the unaltered model is accepted


PROBE = """
#include <stdio.h>
#include "edgeseq_model.h"
int main(void)
{
    static float work[m_WORK_FLOATS];
    es_state st;
    printf("%d\\n", (int)es_init(&st, &m_model, work, m_WORK_FLOATS));
    return 0;
}
"""


def _init_status(tmp_path, source: str) -> int:
    (tmp_path / "edgeseq_model.c").write_text(source)
    (tmp_path / "probe.c").write_text(PROBE)
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", tmp_path / "edgeseq_model.c", tmp_path / "probe.c"],
                    tmp_path / "probe", include_dirs=[tmp_path, runtime_dir()], flags=SAN, extra=("-O1",))
    return int(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout)


@pytest.mark.parametrize("old,new", [
    ("{0.5f, 0u, 2u}", "{0.5f, 0u, 3u}"),                   # right child in the next tree
    ("{0.5f, 0u, 2u}", "{0.5f, 1u, 2u}"),                   # stage 1 reads group b, pushed only for stage 2
    ("{0.5f, 0u, 2u}", "{0.5f, 65534u, 2u}"),               # neither a pushed feature nor a leaf
    ("{2.0f, 0u, 0u}", "{2.0f, 0u, 1u}"),                   # the last node of a tree splits: left child beyond it
    ("{2.0f, 0u, 0u}", "{2.0f, 1u, 0u}"),                   # a leaf naming a feature
    ("m_tree_target[] = { 0u, 0u }", "m_tree_target[] = { 0u, 1u }"),  # state has one float
    ("m_group_stage[] = { 1u, 2u }", "m_group_stage[] = { 2u, 1u }"),  # group order decreasing
    ("m_stage_tree[] = { 0u, 0u, 1u, 2u }", "m_stage_tree[] = { 0u, 0u, 1u, 3u }"),  # past the last tree
    ("0x1.8000000000000p+1", "0x1.0000000000000p+0"),  # control: a different cost is fine
])
def test_es_init_refuses_hand_edited_tree_tables(tmp_path, old, new):
    """Defence in depth: a generated file edited by hand cannot make the walk leave its arrays."""
    from edgeseq.export.kinds.trees.c_float import _demo_model
    write_c_tree_model(_demo_model(), tmp_path, "m")
    src = (tmp_path / "edgeseq_model.c").read_text()
    assert src.count(old) == 1
    assert _init_status(tmp_path, src) == 0  # ES_OK as generated
    want = 0 if new.startswith("0x") else -6  # ES_ERR_BAD_MODEL
    assert _init_status(tmp_path, src.replace(old, new)) == want


def test_thresholds_and_leaves_round_trip_bit_exactly(tmp_path):
    model, _ = _case_model(CASES[3])
    write_c_tree_model(model, tmp_path / "m", "m")
    lines = subprocess.run([str(build_driver(tmp_path / "m", tmp_path)), "dump"], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    ens = model.ensemble
    nodes = [ln.split() for ln in lines if ln.startswith("node ")]
    assert len(nodes) == ens.n_nodes
    order, _ = tree_preorder(model)  # C position -> ensemble node
    want = np.where(ens.feature >= 0, ens.threshold, ens.value.astype(np.float32)).astype(np.float32)[order]
    assert [int(t[-1], 16) for t in nodes] == want.view(np.uint32).tolist()
    position = np.full(ens.n_features, -1)  # raw column -> place among the pushed features
    position[tree_feature_order(model)] = np.arange(tree_feature_order(model).size)
    want_feature = np.where(ens.feature >= 0, position[np.maximum(ens.feature, 0)], -1)[order]
    assert [int(t[3]) for t in nodes] == want_feature.tolist() and min(want_feature[want_feature != -1]) >= 0
    # the children the C walks are the ensemble's children, moved by the same permutation
    place = np.argsort(order)
    split = ens.feature[order] >= 0
    assert [int(t[5]) for t in nodes if int(t[3]) >= 0] == place[ens.left[order][split]].tolist()
    assert [int(t[7]) for t in nodes if int(t[3]) >= 0] == place[ens.right[order][split]].tolist()


def _interrupt_tree_model(d):
    """Many deep trees over wide groups, softmax over 8 classes: pushes long enough for interrupts."""
    rng = np.random.default_rng(9)
    model = random_tree_model(rng, (20, 20, 20, 20), ((0,), (1,), (), (2, 3)), (60, 60, 20, 60), n_state=8,
                              n_outputs=8, link="softmax", depth=7)
    write_c_tree_model(model, d, "safety")
    return d


@pytest.mark.parametrize("runtime", ["in-place commit (control)", "runtime"])
def test_interrupt_reads_of_a_tree_model_are_never_torn(tmp_path, runtime):
    model_dir = _interrupt_tree_model(tmp_path / "m")
    source = in_place_commit_runtime(tmp_path) if runtime.startswith("in-place") else runtime_dir() / "edgeseq_runtime.c"
    exe = compile_c([source, model_dir / "edgeseq_model.c", runtime_dir() / "tests" / "interrupt_test.c"],
                    tmp_path / "interrupt", include_dirs=[model_dir, runtime_dir()],
                    defines=["ES_PREFIX=safety", "ES_ON_COMMIT=es_test_on_commit"], libs=("-lm", "-lpthread"))
    proc = subprocess.run([str(exe), "signal", "0.6"], capture_output=True, text=True, timeout=60)
    if runtime.startswith("in-place"):
        assert proc.returncode == 1 and int(proc.stdout.split("torn")[1]) > 0, proc.stdout
    else:
        assert proc.returncode == 0 and "torn 0" in proc.stdout, proc.stdout


def test_cortex_m4_runs_a_tree_model():
    from edgeseq.export.c_arm import TARGETS, missing_tools, run_driver_arm
    if missing_tools():
        pytest.skip(missing_tools())
    model, rng = _costed_model()
    X = rows(rng, model, n=6)
    budgets = boundary_budgets(model.cum_cost, rng)[:40]
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        write_c_tree_model(model, d, "arm")
        run, sweep = run_driver_arm(d, X[:, tree_feature_order(model)], TARGETS["cortex-m4f"], budgets=budgets)
    assert_stages_match(model, X, run)
    host = run_c(model, X[:, tree_feature_order(model)])
    for k in range(len(model.stages)):  # same IEEE float32 operations in the same order: same bits
        np.testing.assert_array_equal(run.predictions[k], host.predictions[k])
    for b, budget in enumerate(budgets):
        assert np.all(sweep.prefix[:, b] == model.prefix_for_budget(float(budget)))


def _longest_path(ens, node: int) -> int:
    """Comparisons on the longest root-to-leaf path below `node`, by recursion (independent of
    TreeEnsemble.depth, which the generator uses)."""
    if ens.feature[node] < 0:
        return 0
    return 1 + max(_longest_path(ens, int(ens.left[node])), _longest_path(ens, int(ens.right[node])))


def test_work_per_push_constants_bound_every_push(tmp_path):
    """The header's worst push: node visits = sum over the push's trees of (longest path + 1), readout
    multiply-adds = S x P per stage run; recounted here from the trees themselves."""
    model, _ = _case_model(CASES[1])
    write_c_tree_model(model, tmp_path, "m")
    header = (tmp_path / "edgeseq_model.h").read_text()
    consts = {f"m_{k}": int(v) for k, v in re.findall(r"#define m_(\w+) (\d+)u\n", header)}
    ens, P = model.ensemble, model.n_outputs
    order = [g for s in model.stages for g in s.new_groups]
    stage_of = [k for k, s in enumerate(model.stages) for _ in s.new_groups]
    pushes = []  # (visits, macs) of each push: the stages from its own up to the next group's stage - 1
    for j in range(len(order)):
        last = stage_of[j + 1] - 1 if j + 1 < len(order) else len(model.stages) - 1
        run = range(stage_of[j], last + 1) if j + 1 == len(order) or stage_of[j + 1] != stage_of[j] else range(0)
        trees = [t for k in run for t in range(model.stages[k].tree_start, model.stages[k].tree_stop)]
        pushes.append((sum(_longest_path(ens, int(ens.roots[t])) + 1 for t in trees), len(run) * ens.n_targets * P))
    assert consts["m_NODE_VISITS_PER_PUSH_MAX"] == max(v for v, _ in pushes) > 0
    assert consts["m_MACS_PER_PUSH_MAX"] == max(m for _, m in pushes)
    assert consts["m_WORK_PER_PUSH_MAX"] == max(v + m for v, m in pushes)


OVERFLOW_PROBE = """
#include <stdio.h>
#include "edgeseq_model.h"
int main(void)
{
    static float work[m_WORK_FLOATS];
    const float a[1] = {0.7f}, b[1] = {0.0f};
    es_state st;
    uint32_t stage = 99u;
    float out[1];
    int s1, s2, s3;
    es_init(&st, &m_model, work, m_WORK_FLOATS);
    s1 = (int)es_push(&st, 0u, a, 1u);
    s2 = (int)es_push(&st, 1u, b, 1u);
    s3 = (int)es_push(&st, 1u, b, 1u);
    es_current(&st, out, &stage, NULL);
    printf("%d %d %d %u %g\\n", s1, s2, s3, (unsigned)stage, (double)out[0]);
    return 0;
}
"""


def test_an_overflowing_hand_edited_model_stops_the_sample(tmp_path):
    """A hand-edited leaf the generator would refuse: the stage that overflows is not committed, the
    previous stage stays, and further pushes say ES_ERR_FINISHED (until es_reset)."""
    from edgeseq.export.kinds.trees.c_float import _demo_model
    write_c_tree_model(_demo_model(), tmp_path, "m")
    src = (tmp_path / "edgeseq_model.c").read_text()
    edits = [("{2.0f, 0u, 0u}", "{3.0e38f, 0u, 0u}"), ("{10.0f, 0u, 0u}", "{3.0e38f, 0u, 0u}")]
    for old, new in edits:
        assert src.count(old) == 1
        src = src.replace(old, new)
    (tmp_path / "edgeseq_model.c").write_text(src)
    (tmp_path / "probe.c").write_text(OVERFLOW_PROBE)
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", tmp_path / "edgeseq_model.c", tmp_path / "probe.c"],
                    tmp_path / "probe", include_dirs=[tmp_path, runtime_dir()], flags=SAN, extra=("-O1",))
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "-9", "-5", "1", "3e+38"]  # ES_OK, ES_ERR_OVERFLOW, ES_ERR_FINISHED; stage 1 kept


def test_linear_only_build_runs_linear_models_and_refuses_trees():
    """-DES_LINEAR_ONLY drops the tree code: a linear model still matches numpy, a tree model is refused."""
    from c_support import assert_matches_numpy
    from sequences import random_sequence

    from edgeseq.errors import CCompilerError
    rng = np.random.default_rng(4)
    seq = random_sequence(rng, (2, 3), n_outputs=2, link="softmax")
    X = rng.normal(size=(6, seq.n_features_in))
    flags = ("-O2", "-DES_LINEAR_ONLY")
    assert_matches_numpy(seq, X, run_c(seq, X[:, seq.prefix_columns(2)], extra=flags).predictions)
    model, rng = _case_model(CASES[0])
    assert len(run_c_trees(model, rows(rng, model, n=2)).predictions) == len(model.stages)  # control
    with pytest.raises(CCompilerError, match=r"es_init failed \(-6\)"):
        run_c_trees(model, rows(rng, model, n=2), extra=flags)


@pytest.mark.parametrize("seed", range(6))
def test_random_shapes_match_numpy(seed):
    """Random stage structures: leading, trailing and repeated group-less stages, 0..6 levels, 1..4
    state dimensions, every link."""
    rng = np.random.default_rng(1000 + seed)
    J = int(rng.integers(1, 5))
    sizes = tuple(int(s) for s in rng.integers(1, 4, J))
    order = rng.permutation(J).tolist()
    stage_groups, trees = [], []
    while order or not stage_groups:
        take = int(rng.integers(0, 3)) if order else 0
        stage_groups.append(tuple(order[:take]))
        order = order[take:]
        trees.append(int(rng.integers(0, 4)) if stage_groups[-1] or rng.random() < 0.5 else 1)
    link = ("identity", "sigmoid", "softmax")[seed % 3]
    model = random_tree_model(rng, sizes, tuple(stage_groups), tuple(trees), n_state=int(rng.integers(1, 5)),
                              n_outputs=int(rng.integers(2, 4)), link=link, depth=int(rng.integers(0, 7)))
    X = rows(rng, model, n=10)
    X = np.vstack([X, boundary_rows(model, X, limit=20)]) if np.any(model.ensemble.feature >= 0) else X
    assert_stages_match(model, X, run_c_trees(model, X, flags=SAN, extra=("-O1",)))


def _fuzz_binary(model_dir, tmp_path, runtime_source, name):
    return compile_c([runtime_source, model_dir / "edgeseq_model.c", runtime_dir() / "tests" / "fuzz_runtime.c"],
                     tmp_path / name, include_dirs=[model_dir, runtime_dir()], defines=["ES_PREFIX=fz"],
                     extra=SAN)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{len(c[2])}stages" for c in CASES])
def test_fuzzed_call_sequences_on_tree_models(case, tmp_path):
    """Random init/next_group/push/current/reset sequences (values include NaN, Inf, huge and
    subnormal bit patterns) on tree models under ASan/UBSan: every status matches the expected state
    machine and every committed prediction the harness's own double-precision walk of the trees."""
    model, _ = _case_model(case)
    write_c_tree_model(model, tmp_path / "m", "fz")
    exe = _fuzz_binary(tmp_path / "m", tmp_path, runtime_dir() / "edgeseq_runtime.c", "fuzz")
    proc = subprocess.run([str(exe), "1.5", "7"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "no finding" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    assert int(proc.stdout.split("fuzz fallback: ")[1].split()[0]) > 50  # it really ran (a few thousand runs on a quiet machine)


def test_tree_fuzzer_catches_a_runtime_that_drops_the_carried_state(tmp_path):
    """Negative control: a runtime that overwrites the state instead of adding to it is found."""
    src = (runtime_dir() / "edgeseq_runtime.c").read_text()
    add = "state[t->tree_target[tr]] += nd->value;"
    assert src.count(add) == 1
    (tmp_path / "edgeseq_runtime.c").write_text(src.replace(add, "state[t->tree_target[tr]] = nd->value;"))
    model, _ = _case_model(CASES[1])
    write_c_tree_model(model, tmp_path / "m", "fz")
    exe = _fuzz_binary(tmp_path / "m", tmp_path, tmp_path / "edgeseq_runtime.c", "broken")
    proc = subprocess.run([str(exe), "5", "7"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "fuzz finding: prediction differs from the double reference" in proc.stderr
