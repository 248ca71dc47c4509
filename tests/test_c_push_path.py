"""The short commit path of the C runtime's tree stages (``es_tree_run``, ``s->fast_stage``).

A code-form stage whose scores are committed as they are (an identity link, or a link applied on read)
and no per-input stopping writes its scores straight into the unpublished slot; the runtime then only
tests them for NaN/Inf and publishes. These tests pin what that path must keep: an overflowing stage
is still refused (ES_ERR_OVERFLOW, the previous stage stays committed, the sample ends) through both
loops (``es_push`` and ``es_push_next``), with a negative control -- a runtime whose test of the scores
is disabled commits the infinity and is caught; turning per-input stopping on and off again moves a
state off and back onto the path with the same bits as a state that never stopped; and ``es_current``
without a label (the softmax then skips its argmax pass) returns the very probabilities it returns
with one, on the host under ASan/UBSan and on the emulated Cortex-M4F.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from c_support import SAN, link_problem

from edgeseq.export.c_arm import TARGETS, build_arm, missing_tools, run_qemu
from edgeseq.export.c_harness import STRICT_FLAGS, compile_c, runtime_dir
from edgeseq.export.kinds.trees.c_float import _demo_model, write_c_tree_model

CC = "gcc" if link_problem("gcc") is None else None
FLAGS = SAN if CC is not None else STRICT_FLAGS

OVERFLOW_PROBE = r"""
#include <stdio.h>
#include "edgeseq_model.h"
static float work[m_WORK_FLOATS];
int main(void)
{
    const float a[1] = {0.7f}, b[1] = {0.0f};
    es_state st;
    es_group_info g;
    uint32_t stage = 99u;
    float out[1];
    int s1, s2, s3, n1, n2, n3;
    es_init_code(&st, &m_tree_code, work, m_WORK_FLOATS);
    s1 = (int)es_push(&st, 0u, a, 1u);
    s2 = (int)es_push(&st, 1u, b, 1u);
    s3 = (int)es_push(&st, 1u, b, 1u);
    es_current(&st, out, &stage, NULL);
    printf("%d %d %d %u %g ", s1, s2, s3, (unsigned)stage, (double)out[0]);
    es_reset(&st); /* the one-call loop, the same story */
    es_next_group(&st, &g);
    n1 = (int)es_push_next(&st, g.group, a, g.dim, &g);
    n2 = (int)es_push_next(&st, g.group, b, g.dim, &g);
    n3 = (int)es_push_next(&st, g.group, b, g.dim, &g);
    es_current(&st, out, &stage, NULL);
    printf("%d %d %d %u %g\n", n1, n2, n3, (unsigned)stage, (double)out[0]);
    return 0;
}
"""

# the runtime's one test of committed raw scores (es_publish_raw), disabled by the negative control
SCORE_TEST = "if (es_any_nonfinite(z, n_out) != 0u) { /* an output overflowed */"


def _overflowing_code_model(d):
    """The demo regression in code form with two leaves hand-edited to 3e38: stage 1 commits 3e38,
    stage 2 adds another 3e38 -- an overflow the generator's bound would have refused."""
    write_c_tree_model(_demo_model(), d, "m", c_trees="code")
    src = (d / "edgeseq_model.c").read_text()
    for old in ("leaf = 2.0f;", "leaf = 10.0f;"):
        assert src.count(old) == 1
        src = src.replace(old, "leaf = 3.0e38f;")
    (d / "edgeseq_model.c").write_text(src)
    (d / "probe.c").write_text(OVERFLOW_PROBE)


def _probe(d, runtime, name):
    exe = compile_c([runtime, d / "edgeseq_model.c", d / "probe.c"], d / name, include_dirs=[d, runtime_dir()],
                    compiler=CC, flags=FLAGS, extra=("-O1",))
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()


def test_an_overflowing_code_stage_is_refused_on_the_short_path(tmp_path):
    _overflowing_code_model(tmp_path)
    out = _probe(tmp_path, runtime_dir() / "edgeseq_runtime.c", "probe")
    # ES_OK, ES_ERR_OVERFLOW, ES_ERR_FINISHED, stage 1 kept with its 3e38 -- through es_push, then es_push_next
    assert out == ["0", "-9", "-5", "1", "3e+38"] * 2


def test_a_runtime_without_the_score_test_is_caught(tmp_path):
    """Negative control: with the test of committed scores disabled, the infinity is committed."""
    src = (runtime_dir() / "edgeseq_runtime.c").read_text()
    assert src.count(SCORE_TEST) == 1
    broken = tmp_path / "broken_runtime.c"
    broken.write_text(src.replace(SCORE_TEST, "if (0u * es_any_nonfinite(z, n_out) != 0u) {"))
    _overflowing_code_model(tmp_path)
    out = _probe(tmp_path, broken, "broken")
    assert out[:5] != ["0", "-9", "-5", "1", "3e+38"] and out[4] == "inf"


TOGGLE_PROBE = r"""
#include <stdio.h>
#include <string.h>
#include "edgeseq_model.h"
static float work_a[chk_WORK_FLOATS], work_b[chk_WORK_FLOATS];
static const float always[16] = {0.0f}; /* margin >= 0: every stage is confident */

static es_status full(es_state *st, const float *row)
{
    es_group_info g;
    es_status r = es_next_group(st, &g);
    const float *v = row;
    while (r == ES_OK) {
        const float *const cur = v;
        v += g.dim;
        r = es_push_next(st, g.group, cur, g.dim, &g);
    }
    return r;
}

int main(void)
{
    static float row[chk_N_FEATURES];
    es_state a, b;
    es_group_info g;
    float pa[chk_N_PRED], pb[chk_N_PRED], pn[chk_N_PRED];
    uint32_t sa = 0u, sb = 0u, i, r;
    int32_t la = -7, lb = -7, ln = 7;
    int bad = 0, confident_seen = 0;
    bad |= es_init_code(&a, &chk_tree_code, work_a, chk_WORK_FLOATS) != ES_OK;
    bad |= es_init_code(&b, &chk_tree_code, work_b, chk_WORK_FLOATS) != ES_OK;
    bad |= es_set_stop(&a, always) != ES_OK;
    for (r = 0u; r < 32u; ++r) {
        for (i = 0u; i < chk_N_FEATURES; ++i) {
            row[i] = (float)((i * 7u + r * 13u) % 17u);
        }
        /* stopping on: stage 0 is confident, the loop is over before any push */
        bad |= es_reset(&a) != ES_OK || es_next_group(&a, &g) != ES_DONE;
        confident_seen += es_confident(&a);
        /* off again (es_set_stop restarts the sample): the whole row, as on a state that never stopped */
        bad |= es_set_stop(&a, NULL) != ES_OK || es_reset(&b) != ES_OK;
        bad |= full(&a, row) != ES_DONE || full(&b, row) != ES_DONE;
        bad |= es_current(&a, pa, &sa, &la) != ES_OK || es_current(&b, pb, &sb, &lb) != ES_OK;
        bad |= sa != sb || la != lb || memcmp(pa, pb, sizeof pa) != 0 || sa + 1u != chk_N_STAGES;
        /* no label asked: the same probabilities, bit for bit */
        bad |= es_current(&b, pn, NULL, NULL) != ES_OK || memcmp(pn, pb, sizeof pn) != 0;
        bad |= es_current(&b, pn, NULL, &ln) != ES_OK || ln != lb;
        bad |= es_set_stop(&a, always) != ES_OK;
    }
    printf("%s %d\n", bad ? "FAIL" : "ok", confident_seen);
    return bad;
}
"""


def _toggle_model(d):
    lgb = pytest.importorskip("lightgbm")
    from sklearn.datasets import load_digits

    from edgeseq import from_lightgbm
    X, y = load_digits(n_class=4, return_X_y=True)
    X = X[:, :24].astype(np.float32).astype(np.float64)
    clf = lgb.LGBMClassifier(n_estimators=6, num_leaves=7, min_child_samples=3, verbose=-1, n_jobs=1,
                             deterministic=True).fit(X, y)
    model = from_lightgbm(clf, [list(range(8 * g, 8 * g + 8)) for g in range(3)], [1.0, 1.0, 1.0])
    write_c_tree_model(model, d, "chk", c_trees="code", c_link="read")
    (d / "probe.c").write_text(TOGGLE_PROBE)


def test_stopping_on_then_off_returns_to_the_short_path_with_the_same_bits(tmp_path):
    _toggle_model(tmp_path)
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", tmp_path / "edgeseq_model.c", tmp_path / "probe.c"],
                    tmp_path / "toggle", include_dirs=[tmp_path, runtime_dir()], compiler=CC, flags=FLAGS,
                    extra=("-O1",), libs=("-lm",))
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == ["ok", "32"], out.stdout + out.stderr


@pytest.mark.skipif(missing_tools() is not None, reason=f"emulated Cortex-M tests skipped: {missing_tools()}")
def test_the_short_path_on_the_emulated_m4f(tmp_path):
    """The overflow probe and the stopping toggle, built for the Cortex-M4F and run under qemu."""
    target = TARGETS["cortex-m4f"]
    over, toggle = tmp_path / "over", tmp_path / "toggle"
    over.mkdir()
    toggle.mkdir()
    _overflowing_code_model(over)
    _toggle_model(toggle)
    for d, want in ((over, ["0", "-9", "-5", "1", "3e+38"] * 2), (toggle, ["ok", "32"])):
        elf = build_arm([runtime_dir() / "edgeseq_runtime.c", d / "edgeseq_model.c", d / "probe.c"], d / "p.elf",
                        target, include_dirs=[d, runtime_dir()])
        assert run_qemu(elf, target).stdout.split() == want
