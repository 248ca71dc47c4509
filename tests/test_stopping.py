"""Per-input early stopping: the calibrated bound holds on fresh rows (and the uncorrected rule does
not), Python and C stop every row at the same stage, manifests old and hostile, the anytime loop.

The statistical tests run the calibration on a synthetic stage sequence whose logits are a random
walk (each stage adds independent noise to the last): a stage's margin says something about the final
answer but never settles it, so disagreement grows smoothly as the threshold falls -- the hard case
for a threshold tuned on a finite sample.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from edgeseq import AnytimeClassifier, AnytimeRegressor
from edgeseq.errors import ExportError, IntegrityError, RuntimeInputError
from edgeseq.export.c_harness import SANITIZE_FLAGS, STRICT_FLAGS, find_c_compiler
from edgeseq.export.stopping import (c_stop_stages, calibrate_stopping, clopper_pearson_upper, group_features,
                                     rows_needed, scaled_split, staged_outputs, staged_proba)
from edgeseq.export.writer import export_model
from edgeseq.format import MANIFEST, dump_manifest, manifest_checksum, read_verified
from edgeseq.runtime.model import ExportedModel
from edgeseq.runtime.session import AnytimeSession
from edgeseq.runtime.stopping import NEVER, NEVER_GAP, logit_gap, stop_stages, top2_margin

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def random_walk_stages(rng, n, n_stages=5, n_classes=3, step=1.2, logits=False):
    """Per stage (n, n_classes) probabilities of logits that are a random walk over the stages (and,
    with `logits`, the logits too)."""
    drift = np.zeros(n_classes)
    drift[0] = 0.3
    walk = np.cumsum(rng.normal(size=(n_stages, n, n_classes)) * step + drift, axis=0)
    z = [np.zeros((n, n_classes), np.float32)] + [w.astype(np.float32) for w in walk]
    probas = [np.full((n, n_classes), 1.0 / n_classes, np.float32)] + [_softmax(w) for w in walk]
    return (probas, z) if logits else probas


def fresh_disagreement(rule, probas, scores=None):
    margins = np.stack([top2_margin(p) for p in probas] if scores is None else [logit_gap(z) for z in scores])
    labels = np.stack([p.argmax(axis=1) for p in probas])
    stages = stop_stages(margins, rule.thresholds)
    return float(np.mean(labels[stages, np.arange(labels.shape[1])] != labels[-1]))


def test_clopper_pearson_matches_its_definition():
    """The upper bound U solves P(Binomial(n, U) <= k) = 1 - confidence (scipy's binomial CDF)."""
    from scipy.stats import binom

    for k, n in ((0, 50), (3, 400), (17, 1000)):
        u = clopper_pearson_upper(k, n, 0.95)
        assert binom.cdf(k, n, u) == pytest.approx(0.05, abs=1e-9)
    assert clopper_pearson_upper(5, 5) == 1.0


def test_bound_holds_on_fresh_rows_and_the_uncorrected_rule_breaks_it():
    """Over 40 calibrations (fixed seeds) the corrected rule exceeds δ on fresh rows at most as often
    as its 5 % error allows; the empirical rule (boldest threshold with calibration rate <= δ), on the
    same rows, exceeds it in a large share of them -- the finite-sample correction is what holds."""
    delta, reps, n_cal, n_fresh = 0.05, 40, 1500, 20000
    rng = np.random.default_rng(2026)
    fresh = random_walk_stages(rng, n_fresh)
    cost = np.arange(len(fresh), dtype=float)
    over = {True: 0, False: 0}
    saved = []
    for _ in range(reps):
        cal = random_walk_stages(rng, n_cal)
        for corrected in (True, False):
            rule = calibrate_stopping(cal, cost, delta, corrected=corrected)
            over[corrected] += fresh_disagreement(rule, fresh) > delta
            if corrected:
                saved.append(rule.mean_cost / rule.full_cost)
    assert over[True] <= 4, over           # expected <= 2 of 40 at 95 % confidence
    assert over[False] >= 8, over          # negative control: without the correction the bound fails
    assert np.mean(saved) < 0.9            # and the corrected rule still stops early


def test_scaled_logit_gap_rule_holds_on_fresh_rows_and_the_uncorrected_one_breaks_it():
    """The default rule and statistic ("scaled" thresholds on the logit gap, shaped on a seeded part and
    λ scanned on the rest): over 40 calibrations its disagreement on fresh rows exceeds δ at most as
    often as the 5 % error allows; the same rule without the correction exceeds it far more often."""
    delta, reps, n_cal, n_fresh = 0.05, 40, 1500, 20000
    rng = np.random.default_rng(7)
    fresh, fresh_z = random_walk_stages(rng, n_fresh, logits=True)
    cost = np.arange(len(fresh), dtype=float)
    over = {True: 0, False: 0}
    saved = []
    for _ in range(reps):
        cal, cal_z = random_walk_stages(rng, n_cal, logits=True)
        for corrected in (True, False):
            rule = calibrate_stopping(cal, cost, delta, corrected=corrected, statistic="logit_gap",
                                      scores_by_stage=cal_z)
            assert rule.rule == "scaled" and rule.n_test == 750 and rule.statistic == "logit_gap"
            over[corrected] += fresh_disagreement(rule, fresh, fresh_z) > delta
            if corrected:
                saved.append(rule.mean_cost / rule.full_cost)
    assert over[True] <= 4, over           # expected <= 2 of 40 at 95 % confidence
    assert over[False] >= 8, over          # negative control: without the correction the bound fails
    assert np.mean(saved) < 0.9


def test_scaled_split_sizes_follow_delta_and_n():
    """The scan part holds at least the rows δ needs at d = 0 (598 at δ = 0.005), else half; below
    MIN_SHAPE shaping rows the "auto" rule falls back to "shared" (and says so)."""
    assert rows_needed(0.005) == 598 and clopper_pearson_upper(0, 598) <= 0.005 < clopper_pearson_upper(0, 597)
    assert scaled_split(899, 0.005) == (301, 598) and scaled_split(4000, 0.005) == (2000, 2000)
    assert scaled_split(650, 0.005) is None
    p, z = random_walk_stages(np.random.default_rng(1), 650, logits=True)
    rule = calibrate_stopping(p, np.arange(6.0), 0.005, statistic="logit_gap", scores_by_stage=z)
    assert rule.rule == "shared" and rule.n_test == 650


def test_logit_gap_does_not_saturate_where_the_margin_does():
    """Scores 20 and 40 apart: both probability margins round to 1 in float32, the gaps stay apart;
    the logit gap of a sigmoid score is its absolute value."""
    z = np.array([[20.0, 0.0], [40.0, 0.0]], np.float32)
    assert top2_margin(_softmax(z)).tolist() == [1.0, 1.0]
    assert logit_gap(z).tolist() == [20.0, 40.0] and logit_gap(np.array([[-3.0]])).tolist() == [3.0]


def test_too_few_rows_never_stop():
    """With fewer rows than the bound needs at d = 0 (598 for δ = 0.005), every threshold is NEVER."""
    rule = calibrate_stopping(random_walk_stages(np.random.default_rng(0), 500), np.arange(6.0), 0.005)
    assert np.all(rule.thresholds == np.float32(NEVER)) and rule.stop_share[-1] == 1.0


def test_bad_arguments_are_refused():
    p = random_walk_stages(np.random.default_rng(0), 10)
    for bad in (0.0, 1.0, float("nan"), True, "0.1"):
        with pytest.raises(ExportError, match="max_disagreement"):
            calibrate_stopping(p, np.arange(6.0), bad)
    with pytest.raises(ExportError, match="one"):
        calibrate_stopping(p, np.arange(3.0))


# ---- exports: Python vs C, manifests, the anytime loop -------------------------------------------
@pytest.fixture(scope="module")
def digits_export(tmp_path_factory):
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(X))
    tr, cal, te = idx[:700], idx[700:1450], idx[1450:]
    est = AnytimeClassifier([list(range(8 * i, 8 * i + 8)) for i in range(8)], [1.0] * 8).fit(X[tr], y[tr])
    out = tmp_path_factory.mktemp("stop") / "digits"
    m = export_model(est.fitted_sequence_, out, stop_data=(X[cal], y[cal]), max_disagreement=0.01)
    return est, out, m, X[te]


@pytest.fixture(scope="module")
def digits_margin_export(digits_export, tmp_path_factory):
    """The digits model exported with the probability-margin statistic and the shared rule (the
    earlier defaults, still selectable)."""
    est, _, _, Xte = digits_export
    X, y = load_digits(return_X_y=True)
    cal = np.random.default_rng(0).permutation(len(X))[700:1450]
    out = tmp_path_factory.mktemp("stop") / "margin"
    m = export_model(est.fitted_sequence_, out, stop_data=(X[cal], y[cal]), max_disagreement=0.01,
                     stop_rule="shared", stop_statistic="top2_margin")
    return est, out, m, Xte


def test_manifest_records_the_rule(digits_export):
    _, out, m, _ = digits_export
    st = m["stopping"]
    assert st["rule"] == "scaled" and st["n_test"] == 375 and st["statistic"] == "logit_gap"
    assert st["thresholds"][0] == NEVER_GAP  # stage 0 (the prior) is the same for every row: never
    assert st["n_calibration"] == 750 and st["max_disagreement"] == 0.01 and st["bound"] == "clopper-pearson"
    assert st["disagreement_bound"] <= 0.01 and st["mean_cost"] < st["full_cost"]
    assert len(st["thresholds"]) == len(m["prefixes"]) and all(float(np.float32(t)) == t for t in st["thresholds"])
    assert "_stop_threshold[9]" in (out / "edgeseq_model.h").read_text()
    assert "_stop_statistic = 1u; /* ES_STOP_LOGIT_GAP */" in (out / "edgeseq_model.c").read_text()


@pytest.mark.parametrize("which", ["digits_export", "digits_margin_export"])
def test_python_and_c_stop_at_the_same_stage_on_every_row(which, request):
    """100 % of the test rows, compiled with ASan/UBSan: same stage, same label; stages vary -- with
    the logit gap (the default) and with the probability margin."""
    _, out, m, Xte = request.getfixturevalue(which)
    py = ExportedModel(out).predict(group_features(m, Xte), stop="confident")
    cc = find_c_compiler("clang")
    stage, label = c_stop_stages(out, m, Xte, compiler=cc, flags=STRICT_FLAGS + SANITIZE_FLAGS, extra=("-O1",))
    assert np.array_equal(stage, py.prefix) and np.array_equal(label, py.label_index)
    assert len(set(stage.tolist())) > 2


def test_c_refuses_an_unknown_statistic(digits_export, tmp_path):
    """es_set_stop_statistic with a statistic that is neither ES_STOP_MARGIN nor ES_STOP_LOGIT_GAP
    returns ES_ERR_BAD_MODEL and leaves stopping off; the two known ones are accepted."""
    import re
    import subprocess

    from edgeseq.export.c_harness import compile_c, runtime_dir

    _, out, _, _ = digits_export
    prefix = re.search(r"extern const es_model (\w+)_model;", (out / "edgeseq_model.h").read_text()).group(1)
    main_c = tmp_path / "main.c"
    main_c.write_text(f"""#include <stdio.h>
#include "edgeseq_model.h"
static float work[{prefix}_WORK_FLOATS];
int main(void)
{{
    es_state st;
    int bad, off, gap, margin;
    if (es_init(&st, &{prefix}_model, work, {prefix}_WORK_FLOATS) != ES_OK) return 1;
    bad = (int)es_set_stop_statistic(&st, {prefix}_stop_threshold, 7u);
    off = st.stop_threshold == NULL;
    gap = (int)es_set_stop_statistic(&st, {prefix}_stop_threshold, ES_STOP_LOGIT_GAP);
    margin = (int)es_set_stop_statistic(&st, {prefix}_stop_threshold, ES_STOP_MARGIN);
    printf("%d %d %d %d\\n", bad, off, gap, margin);
    return 0;
}}
""")
    rdir = runtime_dir()
    exe = compile_c([rdir / "edgeseq_runtime.c", out / "edgeseq_model.c", main_c], tmp_path / "m",
                    include_dirs=[out, rdir], flags=STRICT_FLAGS, extra=("-O1",))
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert got == ["-6", "1", "0", "0"]


def test_binary_logit_gap_stops_alike_in_python_and_c(tmp_path):
    """A binary (sigmoid) model: the logit gap is |z|, the C runtime's |z[0]| before its link; same
    stage and label on every row, under ASan/UBSan; rows stop at several stages."""
    X, y = load_digits(return_X_y=True)
    y = (y >= 5).astype(int)
    idx = np.random.default_rng(1).permutation(len(X))
    groups = [list(range(8 * i, 8 * i + 8)) for i in range(8)]
    est = AnytimeClassifier(groups, [1.0] * 8).fit(X[idx[:600]], y[idx[:600]])
    m = export_model(est.fitted_sequence_, tmp_path / "b", stop_data=X[idx[600:1400]], max_disagreement=0.02)
    assert m["stopping"]["statistic"] == "logit_gap"
    py = ExportedModel(tmp_path / "b").predict(group_features(m, X[idx[1400:]]), stop="confident")
    cc = find_c_compiler("clang")
    stage, label = c_stop_stages(tmp_path / "b", m, X[idx[1400:]], compiler=cc, flags=STRICT_FLAGS + SANITIZE_FLAGS,
                                 extra=("-O1",))
    assert np.array_equal(stage, py.prefix) and np.array_equal(label, py.label_index)
    assert len(set(stage.tolist())) > 2


def test_predict_stop_matches_the_rule_and_the_budget(digits_export):
    _, out, m, Xte = digits_export
    model = ExportedModel(out)
    feats = group_features(m, Xte)
    probas, scores = staged_outputs(model, Xte)
    assert all(np.array_equal(p, q) for p, q in zip(probas, staged_proba(model, Xte)))
    thr = np.asarray(m["stopping"]["thresholds"], np.float32)
    want = stop_stages(np.stack([logit_gap(z) for z in scores]), thr)
    got = model.predict(feats, stop="confident")
    assert np.array_equal(got.prefix, want)
    assert np.array_equal(got.label_index, np.stack([p.argmax(1) for p in probas])[want, np.arange(len(Xte))])
    capped = model.predict(feats, stop="confident", budget=2.0)
    assert np.array_equal(capped.prefix, np.minimum(want, 2))
    with pytest.raises(RuntimeInputError, match="stop must be"):
        model.predict(feats, stop="sure")


def test_session_run_stops_when_confident_and_keeps_the_deadline(digits_export):
    _, out, m, Xte = digits_export
    cols = {g["name"]: g["columns"] for g in m["groups"]}
    expected = ExportedModel(out).predict(group_features(m, Xte[:30]), stop="confident").prefix
    with AnytimeSession(out) as sess:
        fast = {name: (lambda c: lambda row: row[c])(c) for name, c in cols.items()}
        runs = [sess.run(fast, inputs=row, stop="confident") for row in Xte[:30]]
        assert [r.prefix for r in runs] == expected.tolist()
        early = [r for r, e in zip(runs, expected) if e < len(cols)]
        assert early and all(r.stopped_by == "confident" and r.spent_cost == r.prefix_cost for r in early)
        # a row that is not confident after stage 1: the deadline still ends the run on time
        row = Xte[int(np.argmax(expected > 1))]
        slow = {name: (lambda c: lambda r: (time.sleep(0.4), r[c])[1])(c) for name, c in cols.items()}
        t0 = time.perf_counter()
        r = sess.run(slow, inputs=row, deadline_s=0.6, stop="confident")
        assert time.perf_counter() - t0 < 0.6 + 0.25
        assert r.stopped_by == "timeout" and r.prefix == 1


def test_verify_rechecks_the_stopping_stages(digits_export):
    from edgeseq.evaluate.verify import format_report, verify_export

    _, out, _, Xte = digits_export
    rep = verify_export(out, Xte[:80])
    assert rep.ok and rep.stop_mismatches == 0
    assert any(line.startswith("stopping: Python and C stop at the same stage") and "80/80" in line
               for line in format_report(rep))


def _rewrite(out, change):
    m = json.loads((out / MANIFEST).read_text())
    change(m)
    if "NaN" in json.dumps(m):  # canonical JSON has no NaN: written as a hostile file would hold it
        (out / MANIFEST).write_text(json.dumps(m))
        return
    m["manifest_sha256"] = manifest_checksum(m)
    (out / MANIFEST).write_bytes(dump_manifest(m))


@pytest.mark.parametrize("change, message", [
    (lambda st: st["thresholds"].__setitem__(1, 0.1), "float32"),
    (lambda st: (st.__setitem__("statistic", "top2_margin"), st["thresholds"].__setitem__(1, 3.0)), "schema"),
    (lambda st: st.__setitem__("statistic", "p_value"), "schema"),
    (lambda st: st["thresholds"].__setitem__(1, float("nan")), "non-finite"),
    (lambda st: st["thresholds"].pop(), "stages"),
    (lambda st: st.__setitem__("max_disagreement", 1.5), "schema"),
    (lambda st: st["stop_share"].__setitem__(0, st["stop_share"][0] + 0.5), "sum to 1"),
])
def test_bad_stopping_entries_are_refused_in_one_line(digits_export, tmp_path, change, message):
    import shutil

    _, out, _, _ = digits_export
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    _rewrite(bad, lambda m: change(m["stopping"]))
    with pytest.raises(IntegrityError, match=message) as info:
        read_verified(bad)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_a_stopping_entry_without_a_statistic_means_the_margin(digits_margin_export, tmp_path):
    """Entries written before the statistic was recorded meant the probability margin: without the
    field, an export still verifies (Python and the regenerated C agree) and stops as the margin says."""
    import shutil

    from edgeseq.evaluate.verify import verify_export

    _, out, m, Xte = digits_margin_export
    old = tmp_path / "old"
    shutil.copytree(out, old)
    _rewrite(old, lambda mm: mm["stopping"].pop("statistic"))
    assert "statistic" not in read_verified(old)["stopping"]
    rep = verify_export(old, Xte[:60])
    assert rep.ok and rep.stop_mismatches == 0
    model = ExportedModel(old)
    want = stop_stages(np.stack([top2_margin(p) for p in staged_proba(model, Xte)]),
                       np.asarray(m["stopping"]["thresholds"], np.float32))
    assert np.array_equal(model.predict(group_features(m, Xte), stop="confident").prefix, want)


def test_old_manifests_load_and_refuse_stop():
    """The committed exports of an earlier version have no stopping entry: they load as before, and
    asking them to stop early is a clear error, not a silent full-budget answer."""
    model = ExportedModel(FIXTURES / "compat_linear")
    assert "stopping" not in model.manifest
    with pytest.raises(RuntimeInputError, match="stopping thresholds"):
        model.predict({g: np.zeros((1, d)) for g, d in zip(model.group_names, [g.dim for g in model.groups])},
                      stop="confident")


def test_regression_refuses_stop_data(tmp_path):
    X = np.random.default_rng(0).normal(size=(80, 2))
    seq = AnytimeRegressor([[0], [1]], [1.0, 1.0]).fit(X, X[:, 0]).fitted_sequence_
    with pytest.raises(ExportError, match="classifiers"):
        export_model(seq, tmp_path / "r", stop_data=X)
    assert not (tmp_path / "r").exists()


def test_int16_c_stops_as_the_integer_simulation(digits_export, tmp_path):
    """An int16 export calibrates on the integer model's own probabilities; its C stopping loop (under
    ASan/UBSan) matches the simulation with the manifest's thresholds on every test row, and verify
    re-checks it."""
    from edgeseq.evaluate.verify import verify_export
    from edgeseq.export.verify_checks import VerifyReport
    from edgeseq.export.verify_stopping import check_stopping_i16
    from edgeseq.export.kinds.affine.quantize import quantize_from_manifest

    est, _, _, Xte = digits_export
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(X))
    seq = est.fitted_sequence_
    m = export_model(seq, tmp_path / "q", c_dtype="int16", calibration=(X[idx[:700]], y[idx[:700]]),
                     stop_data=X[idx[700:1450]], max_disagreement=0.01)
    assert "const int32_t" in (tmp_path / "q" / "edgeseq_model.c").read_text().split("_stop_threshold")[-2][-40:]
    rep = VerifyReport(len(Xte), "test rows")
    qm = quantize_from_manifest(seq, m["c"]["int16"])
    check_stopping_i16(rep, tmp_path / "q", m, seq, qm, Xte, compiler=find_c_compiler("clang"))
    assert rep.stop_mismatches == 0 and f"{len(Xte)}/{len(Xte)} rows" in rep.stop_note
    assert np.count_nonzero(m["stopping"]["stop_share"][:-1]) >= 2  # rows do stop early, at several stages
    assert m["stopping"]["statistic"] == "top2_margin"  # "auto": the int16 runtime compares the margin
    assert verify_export(tmp_path / "q", Xte[:40]).ok
    with pytest.raises(ExportError, match="int16"):
        export_model(seq, tmp_path / "q2", c_dtype="int16", calibration=(X[idx[:700]], y[idx[:700]]),
                     stop_data=X[idx[700:1450]], max_disagreement=0.01, stop_statistic="logit_gap")


def test_tree_export_stops_alike_in_python_and_c(tmp_path):
    """An AFR classifier (tree stages, 3 classes): same stage and label in both runtimes on every test
    row, and the rows do stop at several stages (the comparison is not vacuous)."""
    from tree_models import COSTS, GROUPS, NAMES, data

    from edgeseq.train.trees.afr import AFRClassifier

    X, s = data(2000, seed=3)
    y = np.digitize(s, [-0.5, 0.5])
    est = AFRClassifier(GROUPS, COSTS, group_names=NAMES, n_dims=2, n_trees=4, max_blocks=10).fit(X[:600], y[:600])
    m = export_model(est, tmp_path / "t", stop_data=X[600:1600], max_disagreement=0.1)
    py = ExportedModel(tmp_path / "t").predict(group_features(m, X[1600:]), stop="confident")
    stage, label = c_stop_stages(tmp_path / "t", m, X[1600:])
    assert np.array_equal(stage, py.prefix) and np.array_equal(label, py.label_index)
    assert len(set(stage.tolist())) >= 3


def test_cortex_m4f_stops_at_the_same_stage_as_python(digits_export):
    """The stopping loop on the emulated Cortex-M4F (newlib's expf, the FPU's float32): every test row."""
    from edgeseq.export.c_arm import TARGETS, missing_tools

    missing = missing_tools()
    if missing is not None:
        pytest.skip(f"emulated Cortex-M skipped: {missing}")
    _, out, m, Xte = digits_export
    py = ExportedModel(out).predict(group_features(m, Xte), stop="confident")
    stage, label = c_stop_stages(out, m, Xte, target=TARGETS["cortex-m4f"])
    assert np.array_equal(stage, py.prefix) and np.array_equal(label, py.label_index)


def test_cli_export_with_stop_data(digits_export, tmp_path):
    """`edgeseq export --stop-data --max-disagreement` writes the entry and says what it bought; a δ
    outside (0, 1) is a usage error before anything is written."""
    from click.testing import CliRunner

    from edgeseq.cli import main
    from edgeseq.io.model_io import save_model

    est, _, _, _ = digits_export
    X, y = load_digits(return_X_y=True)
    save_model(est, tmp_path / "m.pkl")
    np.savez(tmp_path / "stop.npz", X=X[700:1450], y=y[700:1450])
    res = CliRunner().invoke(main, ["export", str(tmp_path / "m.pkl"), str(tmp_path / "out"), "--quiet",
                                    "--stop-data", str(tmp_path / "stop.npz"), "--max-disagreement", "0.01"])
    assert res.exit_code == 0, res.output
    st = read_verified(tmp_path / "out")["stopping"]
    assert st["max_disagreement"] == 0.01 and st["n_calibration"] == 750
    from edgeseq.cli.export_cmd import manifest_table

    line = next(x for x in manifest_table(read_verified(tmp_path / "out")) if x.startswith("early stopping"))
    assert "scaled rule on the logit_gap" in line and "375 of them scanned" in line and "'never'" in line
    res = CliRunner().invoke(main, ["export", str(tmp_path / "m.pkl"), str(tmp_path / "out3"), "--quiet",
                                    "--stop-data", str(tmp_path / "stop.npz"), "--max-disagreement", "0.01",
                                    "--stop-statistic", "top2_margin", "--stop-rule", "shared"])
    assert res.exit_code == 0, res.output
    st = read_verified(tmp_path / "out3")["stopping"]
    assert st["statistic"] == "top2_margin" and st["rule"] == "shared" and st["n_test"] == 750
    bad = CliRunner().invoke(main, ["export", str(tmp_path / "m.pkl"), str(tmp_path / "out2"),
                                    "--stop-data", str(tmp_path / "stop.npz"), "--max-disagreement", "1.5"])
    assert bad.exit_code == 2 and not (tmp_path / "out2").exists()


def test_layer_block_export_stops_alike_in_python_and_c(tmp_path):
    """A layer-block model (softmax, with a ``commit: false`` stage): `export_model(stop_data=...)`
    calibrates it, the C firmware loop (es_next / es_push / es_step with es_set_stop) stops every row
    at Python's stage with Python's label, rows stop at several stages, none at the unpublished stage,
    and `verify` re-checks it. The rows' two windowed groups must be pushed time-major: in sequence
    order instead, the C answers differ (a control that the comparison can fail). Negative control: calibrated without closing that stage, rows would
    stop there, where the C runtime publishes nothing."""
    from layer_models import rich_model, rows

    from edgeseq.evaluate.verify import verify_export
    from edgeseq.export.kinds.layer_blocks.c_float import layer_block_feature_order

    model = rich_model("softmax", seed=4)
    closed = [not s.commit for s in model.stages]
    assert any(closed)
    X = rows(2300, seed=7)
    out = tmp_path / "net"
    m = export_model(model, out, c_prefix="net", stop_data=X[:1500], max_disagreement=0.05)
    em = ExportedModel(out)
    feats = {name: X[1500:, model.group_columns[g]] for g, name in enumerate(model.group_names)}
    py = em.predict(feats, stop="confident")
    stage, label = c_stop_stages(out, m, X[1500:], order=layer_block_feature_order(model))
    assert np.array_equal(stage, py.prefix) and np.array_equal(label, py.label_index)
    assert len(set(stage.tolist())) >= 3
    assert m["stopping"]["statistic"] == "logit_gap"
    assert all(t == NEVER_GAP for t, c in zip(m["stopping"]["thresholds"], closed) if c)
    assert not np.any(np.asarray(closed)[stage])
    wrong = c_stop_stages(out, m, X[1500:], order=np.concatenate([model.group_columns[g] for g in range(4)]))
    assert not (np.array_equal(wrong[0], py.prefix) and np.array_equal(wrong[1], py.label_index))
    rep = verify_export(out, X[1500:1580])
    assert rep.ok and rep.stop_mismatches == 0 and "80/80 rows" in rep.stop_note
    open_rule = calibrate_stopping(staged_proba(em, X[:1500]), em.cum_cost, 0.05)  # the control: not closed
    assert open_rule.stop_share[np.asarray(closed)].sum() > 0


def test_layer_block_estimator_exports_with_stop_data(tmp_path):
    """A fitted AnytimeNetClassifier exports with `stop_data` (the estimator, not only its form)."""
    from edgeseq import AnytimeNetClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 10))
    y = np.where(X[:, 0] + X[:, 4] * X[:, 5] > 0, "hi", "lo")
    clf = AnytimeNetClassifier([[0, 1], list(range(2, 10))], [1.0, 3.0], group_shapes=[None, (2, 4)],
                               order="given", hidden=8, max_epochs=10, random_state=0).fit(X[:300], y[:300])
    m = export_model(clf, tmp_path / "clf", stop_data=X[300:], max_disagreement=0.05)
    assert m["stage_kind"] == "layer_blocks" and m["stopping"]["n_calibration"] == 700
    assert len(m["stopping"]["thresholds"]) == len(m["prefixes"])
