"""The finiteness tests of the C runtime's hot loops: a pushed group's values and a stage's scores.

On Thumb-2 cores (Cortex-M3/M4/M7/M33 under GCC or Clang) ``es_copy_checked`` and ``es_any_nonfinite``
test two values a step in a few instructions of inline assembly (a compare-add of the bit pattern
shifted past its sign, whose carry is the NaN/Inf test); elsewhere, and with ``-DES_PORTABLE_C``, a C
loop. These tests hold both to the same answers, written down here in Python: a linear model of four
groups (1, 5, 2 and 3 values: odd and even lengths, one value, several pairs) and five outputs
(one value before the pairs, then two pairs). Every NaN/Inf bit pattern (quiet, signalling, negative,
+-Inf) at every position of every group is refused by ``es_push_next`` (ES_ERR_NOT_FINITE, the state
unchanged) and of every remaining suffix by ``es_push_all``, while the finite extremes (+-FLT_MAX, the
smallest subnormal, -0) pass; a score overflowing to +-Inf at each of the five outputs is refused
(ES_ERR_OVERFLOW) and 3e38 is not. Run on the host under ASan/UBSan (the C loop), on the emulated
Cortex-M4F (the assembly) and there with ``-DES_PORTABLE_C``; negative controls: assembly that tests
only the first value of each pair is caught, for the values and for the scores.
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from c_support import SAN, link_problem

from edgeseq.export.c_arm import TARGETS, build_arm, missing_tools, run_qemu
from edgeseq.export.c_harness import compile_c, runtime_dir
from edgeseq.export.kinds.affine.c_float import write_c_model
from edgeseq.forms.linear import FittedSequence

DIMS = (1, 5, 2, 3)  # group sizes in sequence order
P = 5  # outputs
BAD = ("0x7f800000u", "0xff800000u", "0x7fc00000u", "0x7f800001u", "0xffffffffu", "0x7fbfffffu")
GOOD = ("0x7f7fffffu", "0xff7fffffu", "0x00000001u", "0x80000000u", "0x3f800000u")

PROBE = r"""
#include <stdio.h>
#include <string.h>
#include "edgeseq_model.h"

static float work[m_WORK_FLOATS];
static const float zeros[m_N_FEATURES];
static const uint32_t bad[] = {%(bad)s};
static const uint32_t good[] = {%(good)s};
#define N_BAD (sizeof bad / sizeof bad[0])
#define N_GOOD (sizeof good / sizeof good[0])

static float f(uint32_t u)
{
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* row: finite extremes everywhere (zeros in group 1, whose coefficients are 3e38) */
static void fill(float *row, uint32_t n, uint32_t from)
{
    uint32_t i;
    for (i = 0u; i < n; ++i) {
        row[i] = (from + i >= 1u && from + i < 6u) ? 0.0f : f(good[(from + i) %% N_GOOD]);
    }
}

int main(void)
{
    es_state st;
    es_group_info g, g2;
    float row[m_N_FEATURES];
    uint32_t j, i, b, k, off;
    es_init(&st, &m_model, work, m_WORK_FLOATS);
    /* es_push_next: every group, every position, every NaN/Inf pattern; then the finite group */
    for (j = 0u, off = 0u; j < m_N_GROUPS; off += g.dim, ++j) {
        es_reset(&st);
        es_next_group(&st, &g);
        for (k = 0u; k < j; ++k) {
            es_push_next(&st, g.group, zeros, g.dim, &g);
        }
        for (i = 0u; i < g.dim; ++i) {
            for (b = 0u; b < N_BAD; ++b) {
                fill(row, g.dim, off);
                row[i] = f(bad[b]);
                g2 = g;
                putchar(es_push_next(&st, g.group, row, g.dim, &g2) == ES_ERR_NOT_FINITE ? 'N' : 'o');
                putchar(es_next_group(&st, &g2) == ES_OK && g2.position == j ? '.' : '!');
            }
        }
        fill(row, g.dim, off);
        putchar(es_push_next(&st, g.group, row, g.dim, &g2) == ES_ERR_NOT_FINITE ? 'N' : 'o');
        putchar('|');
    }
    putchar(' ');
    /* es_push_all: every start, every position of the suffix, every pattern; then the finite suffix */
    for (j = 0u; j < m_N_GROUPS; ++j) {
        uint32_t start = 0u, n;
        for (k = 0u; k < j; ++k) {
            start += m_model.group_dim[k];
        }
        n = m_N_FEATURES - start;
        for (i = 0u; i < n; ++i) {
            for (b = 0u; b < N_BAD; ++b) {
                es_reset(&st);
                es_next_group(&st, &g);
                for (k = 0u; k < j; ++k) {
                    es_push_next(&st, g.group, zeros, g.dim, &g);
                }
                fill(row, n, start);
                row[i] = f(bad[b]);
                putchar(es_push_all(&st, row, n) == ES_ERR_NOT_FINITE ? 'N' : 'o');
            }
        }
        es_reset(&st);
        es_next_group(&st, &g);
        for (k = 0u; k < j; ++k) {
            es_push_next(&st, g.group, zeros, g.dim, &g);
        }
        fill(row, n, start);
        putchar(es_push_all(&st, row, n) == ES_ERR_NOT_FINITE ? 'N' : 'o');
        putchar('|');
    }
    putchar(' ');
    /* scores: output k of prefix 2 is 3e38 * (value k of group 1): +-10 overflows it, 1 does not */
    for (k = 0u; k < m_N_PRED; ++k) {
        static const float scale[3] = {10.0f, -10.0f, 1.0f};
        for (b = 0u; b < 3u; ++b) {
            float one[1] = {0.0f}, five[5] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            es_status r;
            uint32_t prefix = 99u;
            es_reset(&st);
            es_next_group(&st, &g);
            es_push_next(&st, g.group, one, g.dim, &g);
            five[k] = scale[b];
            r = es_push_next(&st, g.group, five, g.dim, &g);
            es_current(&st, NULL, &prefix, NULL);
            printf("%%d:%%u", (int)r, (unsigned)prefix);
            putchar(k + 1u < m_N_PRED || b < 2u ? ',' : '\n');
        }
    }
    return 0;
}
"""


def _want() -> list:
    """The probe's output, from the rules: N for a refused NaN/Inf, '.' for a state left where it was."""
    pushes = "".join(("N." * (d * len(BAD))) + "o|" for d in DIMS)
    alls = "".join("N" * (sum(DIMS[j:]) * len(BAD)) + "o|" for j in range(len(DIMS)))
    scores = ",".join(f"{r}:{p}" for k in range(P) for r, p in (("-9", 1), ("-9", 1), ("0", 2)))
    return [pushes, alls, scores]


def _write(d) -> None:
    cols, at = [], 0
    for n in DIMS:
        cols.append(np.arange(at, at + n))
        at += n
    coefs = [np.zeros((0, P))]
    for j in range(1, len(DIMS) + 1):
        w = np.zeros((sum(DIMS[:j]), P))
        if j >= 2:
            w[1:6, :] = 3e38 * np.eye(P)  # group 1's value k drives output k alone
        coefs.append(w)
    seq = FittedSequence(task="regression", link="identity", n_features_in=at,
                         group_names=tuple(f"g{j}" for j in range(len(DIMS))), group_columns=tuple(cols),
                         costs=np.ones(len(DIMS)), order=np.arange(len(DIMS)), coefs=tuple(coefs),
                         intercepts=np.zeros((len(DIMS) + 1, P)), output_names=tuple(f"y{k}" for k in range(P)),
                         y_was_1d=False)
    write_c_model(seq, d, "m")
    (d / "probe.c").write_text(PROBE % {"bad": ", ".join(BAD), "good": ", ".join(GOOD)})


PAIR_B = "cmn %[k], %[b], lsl #1"  # the test of each pair's second value (twice: values, scores)


def _broken_runtime(d):
    """Negative control: the assembly tests the first value of each pair twice and the second never."""
    src = (runtime_dir() / "edgeseq_runtime.c").read_text()
    assert src.count(PAIR_B) == 2
    rt = d / "broken_runtime.c"
    rt.write_text(src.replace(PAIR_B, "cmn %[k], %[a], lsl #1"))
    return rt


@pytest.mark.skipif(link_problem("gcc") is not None, reason=str(link_problem("gcc")))
def test_the_c_loops_refuse_every_nonfinite_value_on_the_host(tmp_path):
    _write(tmp_path)
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", tmp_path / "edgeseq_model.c", tmp_path / "probe.c"],
                    tmp_path / "probe", include_dirs=[tmp_path, runtime_dir()], compiler="gcc", flags=SAN,
                    extra=("-O1",))
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert out == _want()


@pytest.mark.skipif(missing_tools() is not None, reason=f"emulated Cortex-M tests skipped: {missing_tools()}")
def test_the_thumb2_pairs_and_the_portable_loop_agree_on_the_emulated_m4f(tmp_path):
    target = TARGETS["cortex-m4f"]
    _write(tmp_path)
    sources = [runtime_dir() / "edgeseq_runtime.c", tmp_path / "edgeseq_model.c", tmp_path / "probe.c"]
    for name, defines in (("pairs", []), ("portable", ["ES_PORTABLE_C"])):
        elf = build_arm(sources, tmp_path / f"{name}.elf", target, include_dirs=[tmp_path, runtime_dir()],
                        defines=defines)
        assert run_qemu(elf, target).stdout.split() == _want(), name
    # the assembly is in the M4F image, and the portable build has none
    dis = {name: subprocess.run(["arm-none-eabi-objdump", "-d", str(tmp_path / f"{name}.elf")], capture_output=True,
                                text=True, check=True).stdout for name in ("pairs", "portable")}
    pair_test = re.compile(r"cmn\.w\s+\w+, \w+, lsl #1")
    assert pair_test.search(dis["pairs"]) and not pair_test.search(dis["portable"])


@pytest.mark.skipif(missing_tools() is not None, reason=f"emulated Cortex-M tests skipped: {missing_tools()}")
def test_pairs_that_test_one_value_in_two_are_caught(tmp_path):
    target = TARGETS["cortex-m4f"]
    _write(tmp_path)
    elf = build_arm([_broken_runtime(tmp_path), tmp_path / "edgeseq_model.c", tmp_path / "probe.c"],
                    tmp_path / "broken.elf", target, include_dirs=[tmp_path, runtime_dir()])
    out = run_qemu(elf, target).stdout.split()
    want = _want()
    assert len(out) == 3 and out[0] != want[0] and out[1] != want[1] and out[2] != want[2]
