"""Integer (int16) tree-stage C models (issue 13 "Integer C models ... and the tree stages").

The threshold rule ``x_q <= t_q`` with ``t_q = floor(t * 2**s) - O`` is checked against brute force over
every int16 value (and is not vacuous: ``<``, ``rint`` or ``ceil`` are caught); the leaves' int32
headroom bound is maximal and refuses crafted leaves that would lose their precision. For an AFR
binary model, an AFR multiclass model on digits, LightGBM regression and multiclass imports and
random models with group-less and multi-group stages, the int16 C (host gcc and clang under
ASan/UBSan, and the emulated Cortex-M0 `microbit` and Cortex-M3) gives at every stage and over a budget sweep
predictions and labels bit-identical to `quantize_trees.simulate_trees`; the per-stage accuracy loss
on digits and breast cancer is checked against the issue's 0.5 pp target; es16_init refuses
hand-edited tables; a Cortex-M0 image of a tree model links no soft-float routine.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from c_support import (SAN, boundary_budgets, in_place_commit_runtime, reseal, sanitizer_compilers,
                       systick_counts)

from edgeseq.budget import resolve_prefix
from edgeseq.errors import ExportError
from edgeseq.export.kinds.trees import quantize as qt
from edgeseq.export.c_arm import INT_TARGETS, missing_tools
from edgeseq.export.c_harness import CCompilerError, runtime_dir
from edgeseq.export.c_int16_run import firmware_image, run_int16_arm, run_int16_host, soft_float_symbols
from edgeseq.export.kinds.trees.c_int16 import write_c_int16_tree_model
from edgeseq.export.kinds.trees.quantize import quantize_tree_features, quantize_trees, simulate_trees, threshold_q
from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tree_models import afr_model, data, lightgbm_model, random_tree_model  # noqa: E402

ACCURACY_TARGET_PP = 0.5  # issue 13: accuracy loss <= 0.5 percentage points at every stage
_ARM = missing_tools()
_ARM_BUILD = missing_tools(run=False)
_ALL_XQ = np.arange(-32768, 32768, dtype=np.int64)


# ------------------------------------------------------------------ the threshold rule

def _grid_decision(t32: np.float32, s: int, O: int) -> np.ndarray:
    """The float decision on the dequantised value of every int16 x_q: ``(x_q + O) * 2**-s <= t``
    (exact in float64: an integer below 2**32 times a power of two), against the float32 t."""
    return np.ldexp((_ALL_XQ + O).astype(np.float64), -s) <= np.float64(t32)


def _threshold_cases(rng):
    """(t, s, O): grid points, one quantum either side, random values, beyond both int16 ends."""
    cases = []
    for s, O in [(0, 0), (4, 100), (11, 16384), (-3, -7), (20, 3 << 20), (15, -32768)]:
        q = 2.0 ** -s
        centre = O * q
        for t in (centre, centre + q, centre - q, centre + 0.5 * q, centre + 40000 * q, centre - 40000 * q,
                  centre + 32767 * q, centre - 32768 * q, centre - 32769 * q, *(centre + rng.normal(size=4) * 5000 * q)):
            t32 = np.float32(t)
            if np.isfinite(t32):
                cases.append((t32, s, O))
                cases.append((np.nextafter(t32, np.float32(np.inf)), s, O))
                cases.append((np.nextafter(t32, np.float32(-np.inf)), s, O))
    return cases


def _mismatches(rule) -> int:
    bad = 0
    for t32, s, O in _threshold_cases(np.random.default_rng(0)):
        tq = int(rule(np.float32([t32]), np.array([s]), np.array([O]))[0])
        bad += int(np.count_nonzero((_ALL_XQ <= tq) != _grid_decision(t32, s, O)))
    return bad


def test_threshold_rule_equals_the_float_decision_on_every_int16_value():
    assert _mismatches(threshold_q) == 0
    tq = threshold_q(np.float32([1e30, -1e30]), np.array([0, 0]), np.array([0, 0]))
    assert tq.tolist() == [32767, -32769]  # always left / never left, the int16 ends saturated


@pytest.mark.parametrize("wrong", ["rint", "ceil", "unsaturated_low"])
def test_threshold_check_catches_another_rounding(wrong):
    """Negative controls: the brute-force comparison above fails for t_q rounded to nearest, rounded up,
    or saturated to int16 at the low end (then x_q = -32768 would wrongly go left)."""
    def rule(t, s, O):
        scaled = np.ldexp(np.asarray(t, np.float64), s)
        if wrong == "rint":
            v = np.rint(scaled) - O
        elif wrong == "ceil":
            v = np.ceil(scaled) - O
        else:
            return np.clip(np.floor(scaled) - O, -32768, 32767).astype(np.int64)
        return np.clip(v, -32769, 32767).astype(np.int64)
    assert _mismatches(rule) > 0


def test_raw_rows_on_a_threshold_take_the_float_branch():
    """A feature exactly on t, and one quantum either side: the quantised row goes where float32 goes
    (the calibration puts t's neighbours on the grid)."""
    ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.3125, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
                       value=[0, -1.0, 1.0], roots=[0], target=[0], n_features=1, n_targets=1)
    one = np.ones((1, 1))
    model = TreeStageModel(("a",), ([0],), [1.0], ens, (TreeStage((), 0.0, 0, 0, one, np.zeros(1)),
                                                       TreeStage((0,), 1.0, 0, 1, one, np.zeros(1))), "identity", ("y",))
    X = np.array([[-1.0], [1.0]])
    qm = quantize_trees(model, X)
    q = 2.0 ** -int(qm.feature_shift[0])
    rows = np.array([[0.3125], [0.3125 - q], [0.3125 + q], [-5.0], [5.0]])
    pred = simulate_trees(qm, quantize_tree_features(qm, rows))[1][0][:, 0]
    assert np.sign(pred).tolist() == np.sign(model.predict(rows, stage=1)[:, 0]).tolist() == [-1, -1, 1, -1, 1]


# ------------------------------------------------------------------ leaves and headroom

def _one_dim_model(leaves_per_tree, n_features: int = 1) -> TreeStageModel:
    """Trees of one split each (feature 0 at 0) into one state dimension, with the given leaf pairs."""
    feature, threshold, left, right, value, roots = [], [], [], [], [], []
    for a, b in leaves_per_tree:
        i = len(feature)
        roots.append(i)
        feature += [0, -1, -1]
        threshold += [0.0, 0.0, 0.0]
        left += [i + 1, -1, -1]
        right += [i + 2, -1, -1]
        value += [0.0, a, b]
    ens = TreeEnsemble(feature=feature, threshold=threshold, left=left, right=right, value=value, roots=roots,
                       target=[0] * len(roots), n_features=n_features, n_targets=1)
    one = np.ones((1, 1))
    return TreeStageModel(("a",), ([0],), [1.0], ens, (TreeStage((), 0.0, 0, 0, one, np.zeros(1)),
                                                      TreeStage((0,), 1.0, 0, len(roots), one, np.zeros(1))),
                          "identity", ("y",))


def test_leaf_scale_is_the_largest_within_the_int32_bound():
    model = _one_dim_model([(0.75, -3.0), (1.0, 2.5), (-0.001, 0.002)] * 20)
    qm = quantize_trees(model, np.array([[-1.0], [1.0]]))
    L, A = int(qm.leaf_shift[0]), int(qm.state_bound[0])
    leaves = model.ensemble.value[model.ensemble.feature < 0].astype(np.float32).astype(np.float64)
    per_tree = np.abs(np.rint(np.ldexp(leaves, L + 1))).reshape(-1, 2).max(axis=1).sum()
    assert A <= 2**31 - 1 < per_tree  # one more bit would break the bound
    assert int(qm.state_shift[0]) == qt.state_shift(A) and (A >> int(qm.state_shift[0])) <= 32767


def test_leaves_that_would_lose_their_precision_are_refused():
    """A leaf of 1e6 and one of 1e-4 in the same state: at the scale the big one allows, the small tree
    keeps < 8 bits -- one clear ExportError, not a silently useless tree."""
    with pytest.raises(ExportError, match=r"^state dimension 0: the int32 headroom .* tree 1's largest leaf") as exc:
        quantize_trees(_one_dim_model([(1e6, -1e6), (1e-4, -1e-4)]), np.array([[-1.0], [1.0]]))
    assert "\n" not in str(exc.value)
    quantize_trees(_one_dim_model([(1e6, -1e6), (1e-1, -1e-1)]), np.array([[-1.0], [1.0]]))  # the control


def test_headroom_holds_at_the_bound_in_c(tmp_path):
    """Many trees with full-scale leaves: every row lands on the extreme leaves, the state reaches the
    proved bound exactly, and the UBSan build (signed overflow is undefined) runs it bit-identically."""
    model = _one_dim_model([(-7.5, 7.5)] * 64)
    qm = quantize_trees(model, np.array([[-1.0], [1.0]]))
    write_c_int16_tree_model(model, qm, tmp_path, "wide")
    xq = np.array([[-32768], [32767], [0], [1]], dtype=np.int16)
    run, _ = run_int16_host(tmp_path, xq, flags=SAN, extra=("-O1",))
    state = qt.tree_leaves_q(qm, xq, range(64)).sum(axis=1)
    assert np.abs(state).max() == qm.state_bound[0]
    np.testing.assert_array_equal(run.pred[1], simulate_trees(qm, xq)[1][0])


# ------------------------------------------------------------------ C == simulation

@functools.lru_cache(maxsize=None)
def _digits_afr():
    from sklearn.datasets import load_digits

    from edgeseq.train.trees.afr import AFRClassifier
    X, y = load_digits(return_X_y=True)
    n = len(X) - 300
    clf = AFRClassifier([list(range(r * 8, r * 8 + 8)) for r in range(8)], np.ones(8), random_state=0)
    return clf.fit(X[:n], y[:n]).stage_model_, X, y, n


@functools.lru_cache(maxsize=None)
def _cancer_afr():
    from sklearn.datasets import load_breast_cancer

    from edgeseq.train.trees.afr import AFRClassifier
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(X))
    X, y = X[perm], y[perm]
    n = len(X) - 150
    clf = AFRClassifier([list(range(i, 30, 10)) for i in range(10)], np.arange(1, 11, dtype=float), random_state=0)
    return clf.fit(X[:n], y[:n]).stage_model_, X, y, n


def _case(name):
    X, s = data()
    if name.startswith("lightgbm"):
        return lightgbm_model(name.split("-")[1]), X, None, 200
    if name == "afr-binary":
        return afr_model(2).stage_model_, X, (s > 0).astype(int), 200
    if name == "afr-digits":
        return _digits_afr()
    rng = np.random.default_rng(7)
    m = random_tree_model(rng, group_sizes=(2, 3, 1, 2), stage_groups=((0,), (), (1, 2), (3,)),
                          trees_per_stage=(3, 2, 4, 2), n_state=3, n_outputs=3, link="softmax", depth=4,
                          costs=[0.1, 0.7, 0.3, 0.2])
    return m, rng.normal(size=(120, 9)).round(2), None, 80


CASES = ["afr-binary", "afr-digits", "lightgbm-identity", "lightgbm-softmax", "lightgbm-sigmoid", "random"]


def _boundary_xq(qm, n: int = 40) -> np.ndarray:
    """int16 rows whose split features sit exactly on t_q and one step above (where <= and < differ)."""
    rng = np.random.default_rng(5)
    splits = np.flatnonzero(qm.node_feature >= 0)
    rows = rng.integers(-300, 300, size=(2 * min(n, splits.size), qm.columns.size))
    for r, i in enumerate(splits[:n]):
        t = int(np.clip(qm.node_value[i], -32768, 32767))
        rows[2 * r, qm.node_feature[i]] = t
        rows[2 * r + 1, qm.node_feature[i]] = min(t + 1, 32767)
    return rows.astype(np.int16)


@pytest.fixture(scope="module", params=CASES)
def case(request, tmp_path_factory):
    model, X, y, n = _case(request.param)
    qm = quantize_trees(model, X[:n], None if y is None else y[:n])
    d = tmp_path_factory.mktemp(f"t16_{request.param}")
    write_c_int16_tree_model(model, qm, d, "t16")
    extreme = np.array([np.full(qm.columns.size, 32767), np.full(qm.columns.size, -32768)], dtype=np.int16)
    xq = np.vstack([quantize_tree_features(qm, X[n:n + 30]), quantize_tree_features(qm, 10 * X[n:n + 2]), extreme,
                    _boundary_xq(qm)])
    budgets = boundary_budgets(model.cum_cost, np.random.default_rng(1))
    return request.param, model, qm, d, xq, budgets


def _assert_bit_identical(model, qm, xq, budgets, run, sweep):
    sims = simulate_trees(qm, xq)
    for k, (pred, label) in enumerate(sims):
        np.testing.assert_array_equal(run.pred[k], pred, err_msg=f"stage {k}")
        np.testing.assert_array_equal(run.label[k], label, err_msg=f"stage {k}")
    want = np.array([resolve_prefix(model.cum_cost, budget=b) for b in budgets])
    np.testing.assert_array_equal(sweep.rule, np.broadcast_to(want, sweep.rule.shape))
    np.testing.assert_array_equal(sweep.prefix, sweep.rule)  # the firmware loop stops where the rule says
    for k in np.unique(want):
        cols = np.flatnonzero(want == k)
        np.testing.assert_array_equal(sweep.pred[:, cols], np.repeat(sims[k][0][:, None], cols.size, 1))


@pytest.mark.parametrize("cc", sanitizer_compilers())
def test_host_build_is_bit_identical_to_the_simulation(case, cc):
    name, model, qm, d, xq, budgets = case
    run, sweep = run_int16_host(d, xq, budgets, compiler=cc, flags=SAN, extra=("-O1",))
    _assert_bit_identical(model, qm, xq, budgets, run, sweep)


def test_a_strict_comparison_in_the_simulation_is_detected(case, monkeypatch):
    """Negative control: the rows sitting on t_q make a simulation that splits on ``<`` disagree with the C."""
    name, model, qm, d, xq, _ = case
    run, _ = run_int16_host(d, xq)
    strict = dataclasses.replace(qm, node_value=np.where(qm.node_feature >= 0, qm.node_value - 1, qm.node_value))
    assert any(not np.array_equal(run.pred[k], pred) for k, (pred, _) in enumerate(simulate_trees(strict, xq)))


@pytest.mark.skipif(_ARM is not None, reason=f"emulated Cortex-M tests skipped: {_ARM}")
@pytest.mark.parametrize("target", list(INT_TARGETS))
def test_emulated_core_is_bit_identical_to_the_simulation(case, target):
    name, model, qm, d, xq, budgets = case
    rows = np.vstack([xq[:8], xq[-6:]])
    run, sweep = run_int16_arm(d, rows, INT_TARGETS[target], budgets[:24])
    _assert_bit_identical(model, qm, rows, budgets[:24], run, sweep)


def _code_only(text: str) -> str:
    """C text without comments, string literals and hex constants (a cost's bit pattern may read "2e0")."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"\b0[xX][0-9a-fA-F]+", "0", text)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def test_no_float_type_in_the_generated_tree_model(case):
    d = case[3]
    for path in (d / "edgeseq_model.c", d / "edgeseq_model.h", runtime_dir() / "edgeseq_runtime_i16.c"):
        assert not re.search(r"\b(float|double)\b|\d\.\d|\d[eE][+-]?\d", _code_only(path.read_text())), path.name


@pytest.mark.skipif(_ARM_BUILD is not None, reason=f"Cortex-M builds skipped: {_ARM_BUILD}")
def test_cortex_m0_image_of_a_tree_model_links_no_soft_float_but_the_float_build_does(tmp_path):
    from edgeseq.export.kinds.trees.c_float import write_c_tree_model
    model, X, y, n = _digits_afr()
    write_c_int16_tree_model(model, quantize_trees(model, X[:n]), tmp_path / "i16", "dig")
    m0 = INT_TARGETS["cortex-m0"]
    assert soft_float_symbols(firmware_image(tmp_path / "i16", m0, tmp_path / "b16", trees=True)) == []
    write_c_tree_model(model, tmp_path / "f32", "dig")
    linked = soft_float_symbols(firmware_image(tmp_path / "f32", m0, tmp_path / "b32", int16=False, trees=True))
    assert any(s.startswith("__aeabi_f") for s in linked), linked  # negative control: the check can fail


# ------------------------------------------------------------------ accuracy on the reference data sets

@pytest.mark.parametrize("which", ["digits", "breast-cancer"])
def test_accuracy_loss_per_stage_on_held_out_rows(which):
    """Calibrated on the training rows, measured on held-out rows against the true labels; the issue's
    target is <= 0.5 pp at every stage. Printed so the figures are visible in the test log."""
    model, X, y, n = _digits_afr() if which == "digits" else _cancer_afr()
    qm = quantize_trees(model, X[:n], y[:n])
    held = qt.stage_losses(model, qm, X[n:], y[n:])
    loss = [round(e["accuracy_loss_pp"], 3) for e in held]
    print(f"\n{which}: int16 AFR accuracy loss (pp) per stage, held out: {loss}; calibration rows: "
          f"{[round(e['accuracy_loss_pp'], 3) for e in qm.loss]}")
    assert all(e["reference"] == "targets" for e in qm.loss)
    assert max(e["accuracy_loss_pp"] for e in qm.loss) <= ACCURACY_TARGET_PP, qm.loss
    assert max(loss) <= ACCURACY_TARGET_PP, loss


# ------------------------------------------------------------------ es16_init re-validates

def _edited(tmp_path, d, old: str, new: str) -> Path:
    out = tmp_path / "edited"
    out.mkdir()
    (out / "edgeseq_model.h").write_text((d / "edgeseq_model.h").read_text())
    src = (d / "edgeseq_model.c").read_text()
    assert old in src, old
    (out / "edgeseq_model.c").write_text(src.replace(old, new, 1))
    return out


@pytest.mark.parametrize("what", ["child", "feature", "leaf", "state_shift"])
def test_es16_init_refuses_hand_edited_tree_tables(tmp_path, what):
    """A child pointing backwards, a split on a feature not pushed by its stage, a leaf that breaks the
    state's int32 bound, a state shift leaving int16: es16_init refuses (the driver exits 3), the
    unedited model runs (the control)."""
    model = _one_dim_model([(-7.5, 7.5), (1.0, 2.0)])
    qm = quantize_trees(model, np.array([[-1.0], [1.0]]))
    d = tmp_path / "m"
    write_c_int16_tree_model(model, qm, d, "ed")
    xq = np.array([[0], [1]], dtype=np.int16)
    run_int16_host(d, xq)
    src = (d / "edgeseq_model.c").read_text()
    first = re.search(r"\{0, (-?\d+), \{1u, 2u\}\}", src).group(0)
    leaf = re.search(r"\{-1, (-?\d+), \{0u, 0u\}\}", src).group(0)
    old, new = {"child": (first, first.replace("{1u, 2u}", "{0u, 2u}")),
                "feature": (first, first.replace("{0, ", "{1, ", 1)),
                "leaf": (leaf, "{-1, 2147483647, {0u, 0u}}"),
                "state_shift": ("_state_shift[] = {\n    ", "_state_shift[] = {\n    -1 + ")}[what]
    with pytest.raises(CCompilerError, match="ERR init|exited 3"):
        run_int16_host(_edited(tmp_path, d, old, new), xq)


# ------------------------------------------------------------------ CLI export, manifest, inspect, verify

def _invoke(*args):
    from click.testing import CliRunner

    from edgeseq.cli import main
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def tree_export(tmp_path_factory):
    """An AFR binary model exported with --c-dtype int16 through the CLI."""
    from edgeseq.io.model_io import save_model
    d = tmp_path_factory.mktemp("cli_t16")
    X, s = data(200)
    np.savez(d / "cal.npz", X=X, y=(s > 0).astype(int))
    save_model(afr_model(2), d / "afr.model")
    res = _invoke("export", d / "afr.model", d / "out", "--c-dtype", "int16", "--calibration-data", d / "cal.npz",
                  "--quiet")
    assert res.exit_code == 0, res.output
    return d


def test_cli_int16_tree_export_manifest_inspect_and_verify(tree_export):
    import json

    from edgeseq.evaluate.verify import verify_export
    out = tree_export / "out"
    m = json.loads((out / "manifest.json").read_text())
    q = m["c"]["int16"]
    assert m["stage_kind"] == "trees" and m["c"]["dtype"] == "int16" and q["calibration_rows"] == 200
    assert len(q["prefixes"]) == len(m["prefixes"]) and len(q["state"]) == m["state_width"]
    assert all(p["headroom"] <= 2**31 - 1 and "accuracy_loss_pp" in p for p in q["prefixes"])
    assert all(s["bound"] <= 2**31 - 1 and (s["bound"] >> s["shift"]) <= 32767 for s in q["state"])
    assert "ES16_KIND_TREES" in (out / "edgeseq_model.c").read_text()
    shown = _invoke("inspect", out)
    assert shown.exit_code == 0 and "int16 C model" in shown.output and "tree state: dim 0" in shown.output
    assert "tree stages" in shown.output
    rep = verify_export(out, require_c=True)  # int16 C regenerated from the graphs + recorded scales, then run
    assert rep.ok and "bit-identical to the integer simulation at every stage" in rep.c_note, rep.c_note
    assert all(c.c_diff == 0.0 and c.c_ratio == 0.0 for c in rep.checks)
    r = _invoke("verify", out, "--require-c")
    assert r.exit_code == 0 and "bit-identical" in r.output, r.output


def test_verify_refuses_edited_int16_tree_c_or_scales(tree_export, tmp_path):
    """Negative controls: a threshold edited in the shipped C, or a recorded state shift or feature offset
    changed, with every checksum recomputed, is refused before anything is compiled."""
    import json
    import shutil

    from edgeseq.errors import IntegrityError
    from edgeseq.evaluate.verify import verify_export
    out = tmp_path / "out"
    shutil.copytree(tree_export / "out", out)
    src = out / "edgeseq_model.c"
    original = src.read_text()
    node = re.search(r"\{(\d+), (-?\d+), \{(\d+)u, (\d+)u\}\}", original)
    src.write_text(original.replace(node.group(0), node.group(0).replace(f", {node.group(2)},",
                                                                         f", {int(node.group(2)) + 1},", 1), 1))
    reseal(out)
    with pytest.raises(IntegrityError, match="differs from the int16 C model edgeseq generates"):
        verify_export(out, require_c=True)
    src.write_text(original)
    m = json.loads((out / "manifest.json").read_text())
    m["c"]["int16"]["state"][0]["shift"] += 1
    reseal(out, m)
    with pytest.raises(IntegrityError, match="recorded state scales"):
        verify_export(out, require_c=True)
    m["c"]["int16"]["state"][0]["shift"] -= 1
    m["c"]["int16"]["features"][0]["offset"] += 1  # every threshold on that feature moves with it
    reseal(out, m)
    with pytest.raises(IntegrityError, match="differs from the int16 C model"):
        verify_export(out, require_c=True)


def test_a_hand_shortened_depth_adds_nothing_instead_of_a_threshold(tmp_path):
    """stage_depth is not re-derived in C; if a hand-made model stops a walk on a split, the walk adds
    nothing (not the split's t_q, which the state bound does not cover): the UBSan build runs cleanly
    and stage 1's state stays 0, so its prediction is the readout of an empty state."""
    model = _one_dim_model([(-7.5, 7.5)] * 64)
    qm = quantize_trees(model, np.array([[-1.0], [1.0]]))
    d = tmp_path / "m"
    write_c_int16_tree_model(model, qm, d, "sh")
    src = (d / "edgeseq_model.c").read_text()
    assert "_stage_depth[] = { 0u, 1u };" in src
    edited = _edited(tmp_path, d, "_stage_depth[] = { 0u, 1u };", "_stage_depth[] = { 0u, 0u };")
    xq = np.array([[-32768], [32767]], dtype=np.int16)
    run, _ = run_int16_host(edited, xq, flags=SAN, extra=("-O1",))
    assert run.pred[1].ravel().tolist() == [int(qm.intercepts[1, 0])] * 2


@pytest.mark.parametrize("cc", sanitizer_compilers()[:1])
def test_linear_only_int16_build_refuses_tree_models_and_runs_linear_ones(tmp_path, cc):
    """-DES16_LINEAR_ONLY (the linear firmware images) drops the tree code: es16_init then refuses a tree
    model (the driver exits 3) while a linear int16 model still runs bit-identically."""
    import subprocess

    from edgeseq.export.c_harness import compile_c
    from edgeseq.export.c_int16_run import driver_sources, int16_prefix, toy_int16_model, write_int16_rows
    from edgeseq.export.kinds.affine.quantize import simulate
    model = _one_dim_model([(-1.0, 1.0)])
    write_c_int16_tree_model(model, quantize_trees(model, np.array([[-1.0], [1.0]])), tmp_path / "tree", "tr")
    seq, qm, xq = toy_int16_model(tmp_path / "lin")
    codes = {}
    for name, rows in (("tree", np.zeros((1, 1), np.int16)), ("lin", xq)):
        d = tmp_path / name
        exe = compile_c(driver_sources(d), tmp_path / f"drv_{name}", include_dirs=[d, runtime_dir()], compiler=cc,
                        defines=[f"ES16_PREFIX={int16_prefix(d)}", "ES16_ON_COMMIT=driver_on_commit",
                                 "ES16_LINEAR_ONLY"], flags=SAN, libs=())
        write_int16_rows(rows, tmp_path / f"{name}.bin")
        proc = subprocess.run([str(exe), "predict", str(tmp_path / f"{name}.bin")], capture_output=True, text=True,
                              timeout=60)
        codes[name] = proc.returncode
        if name == "lin":
            last = [ln.split() for ln in proc.stdout.splitlines() if ln.split()[:2] == ["0", "2"]][0]
            assert int(last[3]) == int(simulate(qm, xq[:1], 2)[0][0, 0])
    assert codes == {"tree": 3, "lin": 0}, codes


# ------------------------------------------------------------------ the shared commit under interrupts

def _systick_trees(tmp_path, target, runtime_source, model_dir):
    hook = "es_test_on_commit"  # read_check.h records every stage's commit, also those inside one push
    return systick_counts(tmp_path / f"systick_t16_{runtime_source.parent.name}.elf", INT_TARGETS[target],
                          [runtime_source, model_dir / "edgeseq_model.c"], [model_dir, runtime_dir()],
                          ["ES16_PREFIX=t16", f"ES16_ON_COMMIT={hook}", f"ES_ON_COMMIT={hook}"])


@pytest.mark.skipif(_ARM is not None, reason=f"emulated Cortex-M tests skipped: {_ARM}")
@pytest.mark.parametrize("target", list(INT_TARGETS))
def test_systick_reads_of_an_int16_tree_model_are_never_torn(tmp_path, target):
    """A tree model (with a group-less stage committed inside its predecessor's push) read from SysTick
    during pushes: every read matches a committed stage bit for bit; the in-place-commit copy of the
    runtime is caught (the control)."""
    model, X, _, n = _case("random")
    d = tmp_path / "model"
    write_c_int16_tree_model(model, quantize_trees(model, X[:n]), d, "t16")
    rc, counts = _systick_trees(tmp_path, target, runtime_dir() / "edgeseq_runtime_i16.c", d)
    print(f"\n{target} int16 trees: {counts}")
    assert rc == 0 and counts["torn"] == 0 and counts["during_push"] >= 100, counts
    broken = tmp_path / "broken"
    broken.mkdir()
    rc, counts = _systick_trees(tmp_path, target, in_place_commit_runtime(broken, "edgeseq_runtime_i16.c"), d)
    print(f"{target} int16 trees, in-place commit: {counts}")
    assert rc == 1 and counts["torn"] > 0, counts


def test_int16_tree_export_without_calibration_is_one_clear_error(tmp_path):
    from edgeseq.export.writer import export_model
    with pytest.raises(ExportError, match="--calibration-data") as exc:
        export_model(lightgbm_model("softmax"), tmp_path / "out", c_dtype="int16")
    assert "\n" not in str(exc.value) and not (tmp_path / "out").exists()
