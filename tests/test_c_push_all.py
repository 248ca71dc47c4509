"""``es_push_all``: every remaining group pushed from one array, each stage committed as single pushes do.

The reference is the ``es_push_next`` loop on a second state of the same model: a probe pushes the first
g0 groups one by one (every g0), then the rest once with ``es_push_all`` and once with the loop, and
compares every commit the runtime's commit hook sees -- there it reads ``es_current`` as an interrupt
would right after each publish, so the sequence of stages an interrupt can observe, their predictions
and labels must be the same bits -- plus the final state (next group, features stored, stage, the
answer of ``es_next_group``). Linear (identity, sigmoid, softmax; link on commit and on read) and tree
models (node tables and code, both link modes), with and without per-input stopping (thresholds that
stop some rows early and some late). Every error status is checked with the state unchanged after it.
Host gcc and clang with ``-Wall -Wextra -Werror -pedantic`` and ASan/UBSan, and the emulated Cortex-M4F.
Negative control: a runtime whose ``es_push_all`` skips its last commit is caught.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from c_support import SAN, link_problem, sanitizer_compilers

from edgeseq.export.c_arm import TARGETS, build_arm, missing_tools, run_qemu
from edgeseq.export.c_harness import compile_c, runtime_dir

PROBE = r"""
#include <stdio.h>
#include <string.h>
#include "edgeseq_select.h"

#if ES_HAS_TREE_CODE
#define INIT(st, work) es_init_code((st), &ES_TREE_CODE, (work), ES_WORK_FLOATS)
#else
#define INIT(st, work) es_init((st), &ES_MODEL, (work), ES_WORK_FLOATS)
#endif
#define MAXLOG (ES_N_STAGES + 2)
#define ROWS 24u

typedef struct rec {
    uint32_t prefix;
    int32_t label;
    float pred[ES_N_PRED];
} rec;

static rec logs[2][MAXLOG];
static unsigned n_log[2];
static int which = -1; /* the log the hook writes, -1: none */
static int overrun = 0;

/* Called by the runtime right after each publish: what an interrupt firing then reads. */
void probe_on_commit(const es_state *s);
void probe_on_commit(const es_state *s)
{
    rec r;
    memset(&r, 0, sizeof r);
    if (which < 0) {
        return;
    }
    if (n_log[which] >= MAXLOG || es_current(s, r.pred, &r.prefix, &r.label) != ES_OK) {
        overrun = 1;
        return;
    }
    logs[which][n_log[which]++] = r;
}

static float work[2][ES_WORK_FLOATS];
static float row[ES_N_FEATURES];
static float thr[ES_N_STAGES];

/* Push up to g0 groups one by one; returns es_next_group's answer after them, *off the values used. */
static es_status head(es_state *st, uint32_t g0, uint32_t *off, es_group_info *g)
{
    es_status r = es_next_group(st, g);
    uint32_t k;
    *off = 0u;
    for (k = 0u; k < g0 && r == ES_OK; ++k) {
        const uint32_t at = *off;
        *off += g->dim;
        r = es_push_next(st, g->group, row + at, g->dim, g);
    }
    return r;
}

static int same_state(const es_state *a, const es_state *b)
{
    es_group_info ga, gb;
    const es_status ra = es_next_group(a, &ga), rb = es_next_group(b, &gb);
    return a->next == b->next && a->filled == b->filled && a->stage == b->stage && ra == rb &&
           a->confident == b->confident && (ra != ES_OK || ga.position == gb.position);
}

int main(void)
{
    es_state st[2];
    es_group_info g;
    uint32_t r, g0, i, off = 0u;
    unsigned commits = 0u, stops = 0u, cases = 0u;
    int bad = 0, mode;
    const float level[6] = {0.0f, 0.02f, 0.08f, 0.3f, 0.6f, 0.9f}; /* stop thresholds, low to high */
    bad |= INIT(&st[0], work[0]) != ES_OK || INIT(&st[1], work[1]) != ES_OK;
    for (mode = 0; mode < 6; ++mode) { /* 0: no stopping; 1..5: stop thresholds, low to high */
        for (i = 0u; i < ES_N_STAGES; ++i) {
            thr[i] = level[mode] + 0.01f * (float)(i % 3u);
        }
        for (r = 0u; r < ROWS; ++r) {
            for (i = 0u; i < ES_N_FEATURES; ++i) {
                row[i] = (float)((i * 7u + r * 13u + (unsigned)mode) % 17u) * 0.5f - 3.0f;
            }
            for (g0 = 0u; g0 < ES_N_GROUPS; ++g0) {
                es_status ra, rb, ha, hb;
                uint32_t off_b = 0u;
                int k;
                for (k = 0; k < 2; ++k) {
                    bad |= es_set_stop(&st[k], mode == 0 ? NULL : thr) != ES_OK;
                }
                ha = head(&st[0], g0, &off, &g);
                hb = head(&st[1], g0, &off_b, &g);
                if (ha != hb || off != off_b) {
                    bad = 1;
                    continue;
                }
                if (ha != ES_OK) { /* confident before g0: both loops are over */
                    continue;
                }
                n_log[0] = n_log[1] = 0u;
                which = 0;
                ra = ES_OK;
                while (ra == ES_OK) {
                    const uint32_t at = off;
                    off += g.dim;
                    ra = es_push_next(&st[0], g.group, row + at, g.dim, &g);
                }
                which = 1;
                rb = es_push_all(&st[1], row + off_b, ES_N_FEATURES - off_b);
                which = -1;
                bad |= ra != ES_DONE || rb != ES_DONE || n_log[0] != n_log[1] || n_log[0] == 0u ||
                       memcmp(logs[0], logs[1], n_log[0] * sizeof(rec)) != 0 || !same_state(&st[0], &st[1]);
                commits += n_log[1];
                stops += (unsigned)(es_confident(&st[1]) && es_prefix(&st[1]) + 1u < ES_N_STAGES);
                cases += 1u;
            }
        }
    }
    printf("%s %u %u %u %d\n", bad || overrun ? "FAIL" : "ok", cases, commits, stops, ES_N_GROUPS);
    return 0;
}
"""

# every error: the status, then whether the state and committed prediction were left as they were
ERRORS = r"""
#include <stdio.h>
#include <string.h>
#include "edgeseq_select.h"

#if ES_HAS_TREE_CODE
#define INIT(st, work) es_init_code((st), &ES_TREE_CODE, (work), ES_WORK_FLOATS)
#else
#define INIT(st, work) es_init((st), &ES_MODEL, (work), ES_WORK_FLOATS)
#endif
void probe_on_commit(const es_state *s);
static unsigned n_commits;
void probe_on_commit(const es_state *s) { (void)s; ++n_commits; }

static float work[ES_WORK_FLOATS];
static float row[ES_N_FEATURES + 1];

static int unchanged(const es_state *st, uint32_t next, uint32_t filled, uint32_t prefix, unsigned commits)
{
    return st->next == next && st->filled == filled && es_prefix(st) == prefix && n_commits == commits;
}

int main(void)
{
    es_state st, blank;
    es_group_info g;
    uint32_t i, next, filled, prefix;
    unsigned c;
    union {
        uint32_t u;
        float f;
    } bits;
    float inf;
    bits.u = 0x7f800000u; /* +Inf from its bit pattern: no division by zero for UBSan to flag */
    inf = bits.f;
    memset(&blank, 0, sizeof blank);
    for (i = 0u; i <= ES_N_FEATURES; ++i) {
        row[i] = (float)(i % 5u) - 2.0f;
    }
    INIT(&st, work);
    /* one group pushed first (when there are two), so every check runs mid-sample */
    es_next_group(&st, &g);
    if (ES_N_GROUPS > 1) {
        es_push_next(&st, g.group, row, g.dim, &g);
    }
    next = st.next;
    filled = st.filled;
    prefix = es_prefix(&st);
    c = n_commits;
    printf("%d ", (int)es_push_all(NULL, row, ES_N_FEATURES - filled));
    printf("%d ", (int)es_push_all(&st, NULL, ES_N_FEATURES - filled));
    printf("%d ", (int)es_push_all(&blank, row, ES_N_FEATURES - filled));
    printf("%d ", (int)es_push_all(&st, row, ES_N_FEATURES - filled + 1u));
    printf("%d ", (int)es_push_all(&st, row, ES_N_FEATURES - filled - 1u));
    printf("%d ", (int)es_push_all(&st, row, ES_N_FEATURES)); /* the whole row: not where the sample is */
    printf("%d ", (int)es_push_all(&st, row, 0u));
    printf("%d ", unchanged(&st, next, filled, prefix, c));
    row[ES_N_FEATURES - filled - 1u] = 0.0f * inf; /* NaN in the last remaining value */
    printf("%d ", (int)es_push_all(&st, row, ES_N_FEATURES - filled));
    row[ES_N_FEATURES - filled - 1u] = 1.0f;
    row[0] = -inf;
    printf("%d ", (int)es_push_all(&st, row, ES_N_FEATURES - filled));
    printf("%d ", unchanged(&st, next, filled, prefix, c));
    row[0] = 1.0f; /* corrected values: the refused call can be retried */
    printf("%d ", (int)es_push_all(&st, row, ES_N_FEATURES - filled));
    printf("%d ", (int)es_push_all(&st, row, ES_N_FEATURES - filled));
    printf("%d %d\n", (int)es_next_group(&st, &g), st.next == ES_N_GROUPS && es_prefix(&st) + 1u == ES_N_STAGES);
    return 0;
}
"""
# NULL, NULL, NOT_INIT, WRONG_LENGTH x4, unchanged, NOT_FINITE x2, unchanged, DONE, FINISHED, DONE, all pushed
ERRORS_WANT = ["-1", "-1", "-8", "-3", "-3", "-3", "-3", "1", "-4", "-4", "1", "1", "-5", "1", "1"]

# the linear commit and the tree run of es_push_all, broken by the negative control
LINEAR_COMMIT = "st = es_publish(s, j + 1u, d, z); /* filled += d once published */"
TREE_RUN = "es_tree_run(s, s->stage + 1u, t->n_stages - 1u) : ES_OK;"


def _linear(d, link, c_link, n_outputs=1):
    from sequences import random_sequence

    from edgeseq.export.kinds.affine.c_float import write_c_model
    seq = random_sequence(np.random.default_rng(7), (3, 2, 4, 1), n_outputs=n_outputs, link=link, scale=0.3)
    write_c_model(seq, d, "m", c_link=c_link)


def _trees(d, c_trees, c_link, classes=4):
    lgb = pytest.importorskip("lightgbm")
    from sklearn.datasets import load_digits

    from edgeseq import from_lightgbm
    X, y = load_digits(n_class=classes or 10, return_X_y=True)
    X = X[:, :24].astype(np.float32).astype(np.float64) * 0.5 - 3.0
    groups = [list(range(6 * g, 6 * g + 6)) for g in range(4)]
    kw = dict(num_leaves=7, min_child_samples=3, verbose=-1, n_jobs=1, deterministic=True,
              interaction_constraints=groups)  # each tree reads one group: trees in every stage
    if classes == 0:  # regression
        est = lgb.LGBMRegressor(n_estimators=8, **kw).fit(X, X[:, 3] + X[:, 17])
    else:
        est = lgb.LGBMClassifier(n_estimators=6, learning_rate=0.5, **kw).fit(X, y)
    # four groups over three boosting rounds' stages: stages needing several groups and none
    model = from_lightgbm(est, groups, [1.0, 2.0, 1.0, 3.0])
    from edgeseq.export.kinds.trees.c_float import write_c_tree_model
    write_c_tree_model(model, d, "m", c_trees=c_trees, c_link=c_link)


MODELS = {
    "linear-identity": lambda d: _linear(d, "identity", "commit", 2),
    "linear-sigmoid-read": lambda d: _linear(d, "sigmoid", "read"),
    "linear-softmax-commit": lambda d: _linear(d, "softmax", "commit", 5),
    "linear-softmax-read": lambda d: _linear(d, "softmax", "read", 5),
    "trees-table-commit": lambda d: _trees(d, "table", "commit"),
    "trees-table-read": lambda d: _trees(d, "table", "read"),
    "trees-code-commit": lambda d: _trees(d, "code", "commit"),
    "trees-code-read": lambda d: _trees(d, "code", "read"),
    "trees-code-regression": lambda d: _trees(d, "code", "commit", classes=0),
    "trees-binary-code-read": lambda d: _trees(d, "code", "read", classes=2),
}
STOPS = {"linear-identity", "trees-code-regression"}  # regressions never stop


def _build(d, cc, runtime, src_name):
    return compile_c([runtime, d / "edgeseq_model.c", d / src_name], d / f"{src_name}.{cc}",
                     include_dirs=[d, runtime_dir()], compiler=cc, flags=SAN,
                     defines=["ES_PREFIX=m", "ES_ON_COMMIT=probe_on_commit"], extra=("-O1",), libs=("-lm",))


def _run(exe):
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()


def _write(d, name):
    MODELS[name](d)
    (d / "probe.c").write_text(PROBE)
    (d / "errors.c").write_text(ERRORS)


def _check_probe(out, name):
    assert out[0] == "ok", out
    cases, commits, stops, groups = map(int, out[1:])
    assert cases >= 4 * 24 and commits >= cases  # every case committed at least one stage
    if name not in STOPS:  # some rows stopped before the last stage: the stopping path ran
        assert stops > 0
    assert groups >= 2


@pytest.mark.parametrize("cc", sanitizer_compilers())
@pytest.mark.parametrize("name", sorted(MODELS))
def test_push_all_commits_what_the_loop_commits(tmp_path, cc, name):
    _write(tmp_path, name)
    rt = runtime_dir() / "edgeseq_runtime.c"
    _check_probe(_run(_build(tmp_path, cc, rt, "probe.c")), name)
    assert _run(_build(tmp_path, cc, rt, "errors.c")) == ERRORS_WANT


@pytest.mark.skipif(link_problem("gcc") is not None, reason=str(link_problem("gcc")))
@pytest.mark.parametrize("name", ["linear-softmax-read", "trees-code-read"])
def test_a_push_all_that_skips_its_last_commit_is_caught(tmp_path, name):
    """Negative control: the linear commit of the last group, or the tree model's last stage, left out."""
    src = (runtime_dir() / "edgeseq_runtime.c").read_text()
    assert src.count(LINEAR_COMMIT) == 1 and src.count(TREE_RUN) == 1
    broken = src.replace(LINEAR_COMMIT, "st = j + 1u == m->n_groups ? ES_OK : es_publish(s, j + 1u, d, z);")
    broken = broken.replace(TREE_RUN, "es_tree_run(s, s->stage + 1u, t->n_stages - 2u) : ES_OK;")
    rt = tmp_path / "broken_runtime.c"
    rt.write_text(broken)
    _write(tmp_path, name)
    assert _run(_build(tmp_path, "gcc", rt, "probe.c"))[0] == "FAIL"


@pytest.mark.skipif(missing_tools() is not None, reason=f"emulated Cortex-M tests skipped: {missing_tools()}")
@pytest.mark.parametrize("name", ["linear-softmax-read", "linear-sigmoid-read", "trees-code-read", "trees-table-commit"])
def test_push_all_on_the_emulated_m4f(tmp_path, name):
    target = TARGETS["cortex-m4f"]
    _write(tmp_path, name)
    for src, check in (("probe.c", lambda out: _check_probe(out, name)),
                       ("errors.c", lambda out: out == ERRORS_WANT or pytest.fail(str(out)))):
        elf = build_arm([runtime_dir() / "edgeseq_runtime.c", tmp_path / "edgeseq_model.c", tmp_path / src],
                        tmp_path / f"{src}.elf", target, include_dirs=[tmp_path, runtime_dir()],
                        defines=["ES_PREFIX=m", "ES_ON_COMMIT=probe_on_commit"])
        check(run_qemu(elf, target).stdout.split())
