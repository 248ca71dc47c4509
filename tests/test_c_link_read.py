"""The C link on read (``c_link="read"``) and the one-call loop ``es_push_next``.

With the link on read every stage commits its raw scores through the same double-buffered commit and
``es_current`` applies the link, by the function a commit applies otherwise: every stage must give the
default mode's bits and labels, for tree models (code and table forms, softmax and sigmoid) and linear
models, on the host under ASan/UBSan and on the emulated Cortex-M4F, and agree with LightGBM / numpy.
The driver's predict mode runs the ``es_push_next`` loop and its sweep mode ``es_next_group`` +
``es_push``, so both loops are checked against the references. Negative control: a runtime whose
``es_current`` forgets the link on read returns the raw scores, which the comparison catches.
"""

from __future__ import annotations

import shutil
import subprocess
from unittest import mock

import numpy as np
import pytest
from c_support import SAN, assert_matches_numpy, link_problem

from edgeseq.errors import ExportError
from edgeseq.export import c_harness
from edgeseq.export.c_arm import TARGETS, missing_tools, run_driver_arm
from edgeseq.export.c_harness import STRICT_FLAGS, compile_c, run_c_model, runtime_dir, sweep_c_model
from edgeseq.export.kinds.affine.c_float import write_c_model
from edgeseq.export.kinds.trees.c_float import tree_feature_order, write_c_tree_model

CC = "gcc" if link_problem("gcc") is None else None
FLAGS = SAN if CC is not None else STRICT_FLAGS


def _lightgbm(n_classes: int):
    """(LightGBM classifier, edgeseq model, float32 rows): digits pixels, `n_classes` classes, 3 groups."""
    lgb = pytest.importorskip("lightgbm")
    from sklearn.datasets import load_digits

    from edgeseq import from_lightgbm
    X, y = load_digits(n_class=n_classes, return_X_y=True)
    X = X[:, :24].astype(np.float32).astype(np.float64)
    clf = lgb.LGBMClassifier(n_estimators=6, num_leaves=7, min_child_samples=3, verbose=-1, n_jobs=1,
                             deterministic=True).fit(X, y)
    model = from_lightgbm(clf, [list(range(8 * g, 8 * g + 8)) for g in range(3)], [1.0, 1.0, 1.0])
    return clf, model, X[:40]


def _linear(link: str):
    from sequences import random_sequence
    seq = random_sequence(np.random.default_rng(5), (3, 2, 4), n_outputs=1 if link == "sigmoid" else 4, link=link)
    X = np.random.default_rng(6).normal(size=(30, seq.n_features_in)).astype(np.float32).astype(np.float64)
    return seq, X


def _write(model, d, c_link, form):
    d.mkdir()
    if form == "linear":
        write_c_model(model, d, "chk", c_link=c_link)
    else:
        write_c_tree_model(model, d, "chk", c_trees=form, c_link=c_link)
    return d


def _rows(model, X, form):
    return X[:, model.prefix_columns(len(model.order))] if form == "linear" else X[:, tree_feature_order(model)]


def _assert_same(a, b):
    for k, (pa, pb, la, lb) in enumerate(zip(a.predictions, b.predictions, a.labels, b.labels)):
        assert np.array_equal(pa, pb), f"stage {k}: the link on read changed the bits"  # %.9g: float32 exact
        assert np.array_equal(la, lb), f"stage {k}: labels differ"


@pytest.mark.parametrize("n_classes, form", [(4, "code"), (4, "table"), (2, "code")])
def test_trees_read_gives_the_commit_bits_and_lightgbm(n_classes, form, tmp_path):
    clf, model, X = _lightgbm(n_classes)
    rows = _rows(model, X, form)
    runs = {}
    for c_link in ("commit", "read"):
        d = _write(model, tmp_path / c_link, c_link, form)
        runs[c_link] = run_c_model(d, rows, compiler=CC, flags=FLAGS, extra=("-O1",))
    enum = "ES_LINK_SOFTMAX_ON_READ" if n_classes > 2 else "ES_LINK_SIGMOID_ON_READ"
    assert enum in (tmp_path / "read" / "edgeseq_model.c").read_text()
    assert "_ON_READ" not in (tmp_path / "commit" / "edgeseq_model.c").read_text()
    _assert_same(runs["commit"], runs["read"])
    np.testing.assert_allclose(runs["read"].predictions[-1], clf.predict_proba(X), rtol=1e-6, atol=1e-6)
    assert np.array_equal(runs["read"].labels[-1], clf.predict(X))


@pytest.mark.parametrize("link", ["sigmoid", "softmax"])
def test_linear_read_gives_the_commit_bits_and_numpy(link, tmp_path):
    seq, X = _linear(link)
    rows = _rows(seq, X, "linear")
    runs = {c: run_c_model(_write(seq, tmp_path / c, c, "linear"), rows, compiler=CC, flags=FLAGS, extra=("-O1",))
            for c in ("commit", "read")}
    _assert_same(runs["commit"], runs["read"])
    assert_matches_numpy(seq, X, runs["read"].predictions)


def test_the_budget_loop_of_es_next_group_and_es_push_agrees(tmp_path):
    """The driver's sweep mode (es_next_group + es_push) on both modes: same prefix, label and bits."""
    _, model, X = _lightgbm(4)
    rows = _rows(model, X, "code")
    budgets = [0.0, 1.0, 2.5, np.inf]
    sweeps = [sweep_c_model(_write(model, tmp_path / c, c, "code"), rows, budgets, compiler=CC, flags=FLAGS,
                            extra=("-O1",)) for c in ("commit", "read")]
    run = run_c_model(tmp_path / "read", rows, compiler=CC, flags=FLAGS, extra=("-O1",))
    assert np.array_equal(sweeps[0].prefix, sweeps[1].prefix)
    assert np.array_equal(sweeps[0].predictions, sweeps[1].predictions)
    assert np.array_equal(sweeps[1].predictions[:, -1], run.predictions[-1])  # the loops agree


def test_a_runtime_that_forgets_the_link_on_read_is_caught(tmp_path):
    _, model, X = _lightgbm(4)
    rows = _rows(model, X, "code")
    src = (runtime_dir() / "edgeseq_runtime.c").read_text()
    line = "const int32_t lab = es_link_into(s->model, out, out, label != NULL ? ES_LINK_LABEL : 0u);"
    assert src.count(line) == 1
    broken = tmp_path / "rt"
    shutil.copytree(runtime_dir(), broken)
    (broken / "edgeseq_runtime.c").write_text(src.replace(line, "const int32_t lab = -1;"))
    commit = run_c_model(_write(model, tmp_path / "commit", "commit", "code"), rows, extra=("-O1",))
    d = _write(model, tmp_path / "read", "read", "code")
    with mock.patch.object(c_harness, "runtime_dir", lambda: broken):
        raw = run_c_model(d, rows, extra=("-O1",))
    assert not np.array_equal(commit.predictions[-1], raw.predictions[-1])


STATUS_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include "edgeseq_model.h"
int main(void)
{
    static float work[chk_WORK_FLOATS];
    float v[chk_N_FEATURES + 1u] = {0};
    float out[chk_N_PRED];
    es_state st;
    es_group_info g, keep;
    uint32_t pre = 99u;
    int32_t lab = 99;
    int bad = 0;
    bad |= es_init(&st, &chk_model, work, chk_WORK_FLOATS) != ES_OK;
    bad |= es_next_group(&st, &g) != ES_OK;
    keep = g;
    bad |= es_push_next(&st, g.group, v, g.dim, NULL) != ES_ERR_NULL || es_prefix(&st) != 0u;
    bad |= es_push_next(NULL, g.group, v, g.dim, &g) != ES_ERR_NULL;
    bad |= es_push_next(&st, g.group + 1u, v, g.dim, &g) != ES_ERR_WRONG_GROUP;
    bad |= es_push_next(&st, g.group, v, g.dim + 1u, &g) != ES_ERR_WRONG_LENGTH;
    v[0] = NAN;
    bad |= es_push_next(&st, g.group, v, g.dim, &g) != ES_ERR_NOT_FINITE;
    v[0] = 0.0f;
    bad |= g.position != keep.position || g.group != keep.group; /* untouched on an error */
    while (es_push_next(&st, g.group, v, g.dim, &g) == ES_OK) {
    }
    bad |= es_prefix(&st) != chk_N_GROUPS;
    bad |= es_push_next(&st, keep.group, v, keep.dim, &g) != ES_ERR_FINISHED;
    bad |= es_current(&st, NULL, &pre, &lab) != (chk_model.link == ES_LINK_SOFTMAX_ON_READ ? ES_ERR_NULL : ES_OK);
    bad |= es_current(&st, out, &pre, &lab) != ES_OK || pre != chk_N_GROUPS || lab < 0;
    bad |= es_current(&st, NULL, &pre, NULL) != ES_OK;
    printf("%s\n", bad ? "FAIL" : "ok");
    return bad;
}
"""


@pytest.mark.parametrize("c_link", ["commit", "read"])
def test_es_push_next_statuses_and_the_label_on_read(c_link, tmp_path):
    seq, _ = _linear("softmax")
    d = _write(seq, tmp_path / "m", c_link, "linear")
    (tmp_path / "main.c").write_text(STATUS_PROGRAM)
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", d / "edgeseq_model.c", tmp_path / "main.c"],
                    tmp_path / "prog", include_dirs=[d, runtime_dir()], compiler=CC, flags=FLAGS, extra=("-O1",),
                    libs=("-lm",))
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr


def test_an_unknown_link_mode_is_refused(tmp_path):
    seq, _ = _linear("softmax")
    with pytest.raises(ExportError, match="not one of"):
        write_c_model(seq, tmp_path, "chk", c_link="later")
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(missing_tools() is not None, reason=f"emulated Cortex-M tests skipped: {missing_tools()}")
def test_read_gives_the_commit_bits_on_the_emulated_m4f(tmp_path):
    _, model, X = _lightgbm(4)
    rows = _rows(model, X[:12], "code")
    runs = [run_driver_arm(_write(model, tmp_path / c, c, "code"), rows, TARGETS["cortex-m4f"])[0]
            for c in ("commit", "read")]
    _assert_same(*runs)


def test_export_records_the_link_on_read_and_verify_regenerates_it(tmp_path):
    import json

    from c_support import reseal

    from edgeseq.errors import IntegrityError
    from edgeseq.evaluate.verify import verify_export
    from edgeseq.export.writer import export_model
    _, model, X = _lightgbm(4)
    out = tmp_path / "t"
    m = export_model(model, out, c_trees="code", c_link="read")
    assert m["c"]["link"] == "read" and "ES_LINK_SOFTMAX_ON_READ" in (out / "edgeseq_model.c").read_text()
    report = verify_export(out, X[:20].astype(np.float32), require_c=True)
    assert report.ok, report
    m = json.loads((out / "manifest.json").read_text())
    del m["c"]["link"]  # a manifest that claims commit for this C: the C it regenerates differs
    reseal(out, m)
    with pytest.raises(IntegrityError, match="differs"):
        verify_export(out, X[:20].astype(np.float32), require_c=True)
    seq, Xl = _linear("sigmoid")
    m = export_model(seq, tmp_path / "l", c_link="read")
    assert m["c"]["link"] == "read"
    assert verify_export(tmp_path / "l", Xl[:10].astype(np.float32), require_c=True).ok
    assert "link" not in export_model(seq, tmp_path / "c")["c"]  # the default manifest is unchanged


def test_export_refuses_the_link_on_read_where_it_does_not_apply(tmp_path):
    from edgeseq.export.writer import export_model
    _, model, X = _lightgbm(4)
    with pytest.raises(ExportError, match="not one of"):
        export_model(model, tmp_path / "a", c_link="later")
    with pytest.raises(ExportError, match="int16"):
        export_model(model, tmp_path / "b", c_link="read", c_dtype="int16", calibration=(X, None))


def test_cli_export_c_link_read(tmp_path):
    from click.testing import CliRunner

    from edgeseq.cli._main import main
    from edgeseq.io.model_io import save_model
    _, model, _ = _lightgbm(4)
    save_model(model, tmp_path / "m.pkl")
    res = CliRunner().invoke(main, ["export", str(tmp_path / "m.pkl"), str(tmp_path / "out"), "--c-link", "read",
                                    "--quiet"])
    assert res.exit_code == 0, res.output
    assert "ES_LINK_SOFTMAX_ON_READ" in (tmp_path / "out" / "edgeseq_model.c").read_text()


STOP_PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include "c/edgeseq_model.h"
#include "r/edgeseq_model.h"
/* run one row to the end of the es_push_next loop; returns the committed prefix, out = prediction */
static uint32_t run(es_state *st, const float *row, float *out)
{
    es_group_info g;
    const float *v = row;
    uint32_t pre = 0u;
    int32_t lab = 0;
    es_status r;
    es_reset(st);
    r = es_next_group(st, &g);
    while (r == ES_OK) {
        const float *cur = v;
        v += g.dim;
        r = es_push_next(st, g.group, cur, g.dim, &g);
    }
    es_current(st, out, &pre, &lab);
    return pre * 1000u + (uint32_t)lab;
}
int main(void)
{
    static float wc[c_WORK_FLOATS], wr[r_WORK_FLOATS];
    static float thr[c_N_GROUPS + 1u];
    static const float levels[] = {0.02f, 0.3f, 0.8f, 2.0f};
    float row[c_N_FEATURES], oc[c_N_PRED], or_[c_N_PRED];
    es_state sc, sr;
    uint32_t seed = 7u, stat, lv, k, n, early = 0u, full = 0u;
    int bad = es_init(&sc, &c_model, wc, c_WORK_FLOATS) != ES_OK || es_init(&sr, &r_model, wr, r_WORK_FLOATS) != ES_OK;
    for (stat = 0u; stat < 2u; ++stat) {
        for (lv = 0u; lv < 4u; ++lv) {
            for (k = 0u; k <= c_N_GROUPS; ++k) {
                thr[k] = levels[lv];
            }
            bad |= es_set_stop_statistic(&sc, thr, stat) != ES_OK || es_set_stop_statistic(&sr, thr, stat) != ES_OK;
            for (n = 0u; n < 200u; ++n) {
                uint32_t i, a, b;
                for (i = 0u; i < c_N_FEATURES; ++i) {
                    seed = seed * 1664525u + 1013904223u;
                    row[i] = (float)((int32_t)(seed >> 16) - 32768) / 8192.0f;
                }
                a = run(&sc, row, oc);
                b = run(&sr, row, or_);
                bad |= a != b || memcmp(oc, or_, sizeof oc) != 0 || es_confident(&sc) != es_confident(&sr);
                if (a / 1000u < c_N_GROUPS) { ++early; } else { ++full; }
            }
        }
    }
    printf("%s %u %u\n", bad ? "FAIL" : "ok", (unsigned)early, (unsigned)full);
    return bad;
}
"""


def test_per_input_stopping_stops_at_the_same_stage_in_both_modes(tmp_path):
    """es_set_stop_statistic with both statistics: the same stage, label, bits and confidence per row."""
    seq, _ = _linear("softmax")
    for c_link, d in (("commit", "c"), ("read", "r")):
        (tmp_path / d).mkdir()
        write_c_model(seq, tmp_path / d, d, c_link=c_link)
    (tmp_path / "main.c").write_text(STOP_PROGRAM)
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", tmp_path / "c" / "edgeseq_model.c",
                     tmp_path / "r" / "edgeseq_model.c", tmp_path / "main.c"], tmp_path / "prog",
                    include_dirs=[tmp_path, runtime_dir()], compiler=CC, flags=FLAGS, extra=("-O1",))
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    word, early, full = out.stdout.split()
    assert out.returncode == 0 and word == "ok", out.stdout + out.stderr
    assert int(early) > 0 and int(full) > 0  # both outcomes occur: the comparison is not vacuous


@pytest.mark.parametrize("option", ["tree_ops", "c_dtype", "c_trees", "c_link"])
@pytest.mark.parametrize("value", ["x" * 5000, ["read"], None])
def test_every_export_choice_is_refused_in_one_bounded_line_before_anything_is_written(tmp_path, option, value):
    # the writer checks its fixed-choice options through one helper (export/choices.py): a 5,000-character
    # string (which the message repeated in full before), a list holding a valid name, or None each get one
    # short line, and no output directory is made
    from edgeseq.export.writer import export_model
    seq, _ = _linear("softmax")
    with pytest.raises(ExportError, match="is not one of") as err:
        export_model(seq, tmp_path / "out", **{option: value})
    assert len(str(err.value)) < 200 and "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()
