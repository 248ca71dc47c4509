"""A runtime built with ``-DES_IDENTITY_ONLY`` (regression firmware: no expf, no libm).

Such a build accepts identity links alone, so its link tests are constants: the link, link-on-read and
per-input stopping code is not compiled in (the regression footprint image shrinks by about half a
kilobyte). These tests hold that build to the full one: the same committed bits at every push for a
linear model of five outputs and a tree model in code form, per-input stopping still never stopping a
regression, a sigmoid model refused by ``es_init`` -- on the host under ASan/UBSan. The symbol check
has its control in the full build, which does hold the functions the identity-only one must not.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from c_support import SAN, link_problem

from edgeseq.export.c_harness import compile_c, runtime_dir
from edgeseq.export.kinds.affine.c_float import write_c_model
from edgeseq.export.kinds.trees.c_float import _demo_model, write_c_tree_model
from edgeseq.forms.linear import FittedSequence

pytestmark = pytest.mark.skipif(link_problem("gcc") is not None, reason=str(link_problem("gcc")))

PROBE = r"""
#include <stdio.h>
#include "edgeseq_model.h"
static float work[m_WORK_FLOATS];
static float thr[m_N_STAGES];
int main(void)
{
    es_state st;
    es_group_info g;
    float out[m_N_PRED], v[m_N_FEATURES];
    uint32_t i, prefix, row;
    for (i = 0u; i < m_N_STAGES; ++i) {
        thr[i] = 0.0f; /* a classifier would stop at once: a regression never does */
    }
#if m_TREE_CODE
    printf("%d ", (int)es_init_code(&st, &m_tree_code, work, m_WORK_FLOATS));
#else
    printf("%d ", (int)es_init(&st, &m_model, work, m_WORK_FLOATS));
#endif
    for (row = 0u; row < 3u; ++row) {
        es_status r;
        if (row == 2u) {
            es_set_stop(&st, thr);
        }
        for (i = 0u; i < m_N_FEATURES; ++i) {
            v[i] = 0.37f * (float)(i + 1u) * (row == 1u ? -1.0f : 1.0f);
        }
        es_reset(&st);
        r = es_next_group(&st, &g);
        i = 0u;
        while (r == ES_OK) {
            const uint32_t at = i;
            i += g.dim;
            r = es_push_next(&st, g.group, v + at, g.dim, &g);
            es_current(&st, out, &prefix, NULL);
            printf("%d:%u:%a ", (int)r, (unsigned)prefix, (double)out[m_N_PRED - 1u]);
        }
    }
    printf("\n");
    return 0;
}
"""
SIGMOID_PROBE = r"""
#include <stdio.h>
#include "edgeseq_model.h"
static float work[m_WORK_FLOATS];
int main(void)
{
    es_state st;
    printf("%d\n", (int)es_init(&st, &m_model, work, m_WORK_FLOATS));
    return 0;
}
"""
COLD = ("es_current_on_read", "es_raw_stop", "es_link_stop", "es_stop_check")  # link and stop code


def _linear(d, link="identity", p=5):
    seq = FittedSequence(task="regression" if link == "identity" else "classification", link=link,
                         n_features_in=4, group_names=("a", "b", "c"),
                         group_columns=(np.array([0]), np.array([1, 2]), np.array([3])), costs=np.ones(3),
                         order=np.arange(3),
                         coefs=tuple(np.linspace(-1.0, 1.0, d_j * p).reshape(d_j, p) for d_j in (0, 1, 3, 4)),
                         intercepts=np.linspace(0.5, 1.5, 4 * p).reshape(4, p),
                         output_names=tuple(f"y{k}" for k in range(p)) if link == "identity" else ("0", "1"),
                         classes=None if link == "identity" else np.array([0, 1]), y_was_1d=False)
    write_c_model(seq, d, "m")


def _run(d, probe, defines):
    (d / "probe.c").write_text(probe)
    name = "probe_" + "_".join(x.lower() for x in defines) if defines else "probe_full"
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", d / "edgeseq_model.c", d / "probe.c"], d / name,
                    include_dirs=[d, runtime_dir()], compiler="gcc", flags=SAN, extra=("-O1",),
                    defines=defines)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()


@pytest.mark.parametrize("kind", ["linear", "trees-code"])
def test_an_identity_only_build_commits_the_same_bits(tmp_path, kind):
    if kind == "linear":
        _linear(tmp_path)
    else:
        write_c_tree_model(_demo_model(), tmp_path, "m", c_trees="code")
    full = _run(tmp_path, PROBE, [])
    assert full[0] == "0" and len(full) > 4 and all(not t.startswith("-") for t in full)  # no error, no stop
    assert _run(tmp_path, PROBE, ["ES_IDENTITY_ONLY"]) == full
    assert _run(tmp_path, PROBE, ["ES_IDENTITY_ONLY", "ES_LINEAR_ONLY"] if kind == "linear" else
                ["ES_IDENTITY_ONLY", "ES_PORTABLE_C"]) == full


def test_an_identity_only_build_refuses_a_sigmoid_model(tmp_path):
    _linear(tmp_path, link="sigmoid", p=1)
    assert _run(tmp_path, SIGMOID_PROBE, []) == ["0"]
    assert _run(tmp_path, SIGMOID_PROBE, ["ES_IDENTITY_ONLY"]) == ["-6"]  # ES_ERR_BAD_MODEL


def test_the_link_and_stop_code_is_left_out_of_an_identity_only_build(tmp_path):
    syms = {}
    for name, defines in (("full", ()), ("identity", ("-DES_IDENTITY_ONLY",))):
        obj = tmp_path / f"{name}.o"
        subprocess.run(["gcc", "-std=c99", "-O2", *defines, "-c", str(runtime_dir() / "edgeseq_runtime.c"),
                        "-o", str(obj)], check=True)
        out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
        syms[name] = {line.split()[-1].split(".")[0] for line in out.splitlines()}
    assert set(COLD) <= syms["full"]  # the control: the check would see them
    assert not set(COLD) & syms["identity"]
