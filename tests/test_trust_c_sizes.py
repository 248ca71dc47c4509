"""Issue 11 item 14: every size the C runtime derives from a descriptor is overflow-checked. A 64-bit
host cannot wrap a size_t with uint32 fields, so the runtime is built with ES_SIZE_MAX = 2^32 - 1 to
behave as on a 32-bit target; a descriptor whose work buffer would wrap is then refused."""

from __future__ import annotations

import subprocess

import pytest

from edgeseq.export.c_harness import CCompilerError, compile_c, find_c_compiler, runtime_dir

PROBE = r"""
#include <stdio.h>
#include "edgeseq_runtime.h"

static const uint32_t index_[1] = {0u};
static const uint32_t dim[1] = {DIM};
static const double cum[2] = {0.0, 1.0};
static const float zero[1] = {0.0f};
static const float *const coef[2] = {0, zero};
static const float intercept[2 * NOUT] = {0.0f};
static const char *const names[1] = {"g"};
static const es_model model = {ES_ABI_VERSION, "m", ES_LINK_IDENTITY, 1u, NOUT, NOUT, DIM, index_, dim,
                               cum, coef, intercept, names, 0, ES_KIND_LINEAR, 0, 0};

int main(void)
{
    static float work[64];
    es_state st;
    printf("%lu %d\n", (unsigned long)es_work_floats(&model), (int)es_init(&st, &model, work, 64u));
    return 0;
}
"""


def _probe(tmp_path, dim: int, n_out: int) -> tuple[int, int]:
    try:
        find_c_compiler()
    except CCompilerError as exc:
        pytest.skip(str(exc))
    (tmp_path / "probe.c").write_text(PROBE)
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", tmp_path / "probe.c"], tmp_path / "probe",
                    include_dirs=[runtime_dir()],
                    defines=["ES_SIZE_MAX=0xFFFFFFFFu", f"DIM={dim}u", f"NOUT={n_out}u"],
                    flags=("-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"))
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), int(out[1])


def test_work_buffer_size_that_would_wrap_is_refused(tmp_path):
    floats, status = _probe(tmp_path, 0xFFFFFFF0, 8)  # 0xFFFFFFF0 + 8 + 16 wraps a 32-bit size_t to 8
    assert floats == 0
    assert status == -6  # ES_ERR_BAD_MODEL, not ES_OK with an 8-float buffer


def test_negative_control_small_descriptor_is_accepted(tmp_path):
    floats, status = _probe(tmp_path, 3, 2)
    assert (floats, status) == (3 + 2 + 4, 0)
