"""The code form of float C tree stages (``c_trees="code"``): each stage a generated function of branch
chains, handed to the runtime by ``es_set_tree_code``, against the table walk and independent references.

The ensembles are those of tests/test_c_tree_layout.py (scrambled node order, thresholds at 0, -0,
subnormals, +-3e38, rows on every threshold and a float32 step either side, single leaves, stumps,
deep chains) with their integer leaves replaced by floats of magnitudes 1e-6 .. 1e6, so a float32
sum depends on the order its leaves are added in: the code form must give the table walk's bits
exactly (same leaves, same order), and the numpy walk in tree order (float32 state) gives them too.
Negative controls: an emitter that adds a stage's trees in reverse order, and generated code that
compares ``<`` instead of ``<=``, are caught by the same checks.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from unittest import mock

import numpy as np
import pytest
from c_support import SAN, link_problem
from test_c_tree_layout import edge_model, edge_rows, numpy_walk, small_lightgbm

from edgeseq.errors import ExportError
from edgeseq.export.c_arm import TARGETS, missing_tools, run_driver_arm
from edgeseq.export.c_harness import STRICT_FLAGS, compile_c, run_c_model, runtime_dir
from edgeseq.export.kinds.trees import c_float
from edgeseq.export.kinds.trees.c_float import (CODE_AUTO_MAX_NODES, resolve_c_trees, tree_feature_order,
                                                write_c_tree_model)
from edgeseq.forms.trees import TreeEnsemble, TreeStageModel


def float_leaf_model(seed: int) -> TreeStageModel:
    """`edge_model(seed)` with leaves of random sign and magnitude 1e-6 .. 1e6 (inexact sums)."""
    model = edge_model(seed)
    ens = model.ensemble
    rng = np.random.default_rng(100 + seed)
    value = rng.choice([-1.0, 1.0], ens.n_nodes) * 10.0 ** rng.uniform(-6, 6, ens.n_nodes)
    fields = {f.name: getattr(ens, f.name) for f in dataclasses.fields(TreeEnsemble)}
    return dataclasses.replace(model, ensemble=TreeEnsemble(**{**fields, "value": value}))


@pytest.fixture(scope="module", params=[0, 1])
def case(request):
    model = float_leaf_model(request.param)
    X = edge_rows(model, request.param)
    return model, X, [numpy_walk(model, X, k) for k in range(len(model.stages))]


def _run(model, X, tmp_path, *, form="code", extra=("-O1",), flags=STRICT_FLAGS, compiler=None):
    d = tmp_path / f"m_{form}_{len(list(tmp_path.iterdir()))}"
    d.mkdir()
    write_c_tree_model(model, d, "chk", c_trees=form)
    run = run_c_model(d, X[:, tree_feature_order(model)], compiler=compiler, flags=flags, extra=extra)
    return run, d


def _same(run, want) -> bool:
    return all(np.array_equal(g.astype(np.float32), r) for g, r in zip(run.predictions, want))


def test_the_float_leaves_make_the_order_matter(case):
    """Negative control for the fixture: adding each stage's trees in reverse changes some float32 sum."""
    model, X, want = case
    ens = model.ensemble
    rev = [t for s in model.stages for t in reversed(range(s.tree_start, s.tree_stop))]
    x32 = X.astype(np.float32)
    state = np.zeros((X.shape[0], ens.n_targets), np.float32)
    for t in rev:
        for r in range(X.shape[0]):
            i = int(ens.roots[t])
            while ens.feature[i] >= 0:
                i = int(ens.left[i] if x32[r, ens.feature[i]] <= np.float32(ens.threshold[i]) else ens.right[i])
            state[r, ens.target[t]] += np.float32(ens.value[i])
    assert not np.array_equal(state[:, :1], want[-1])


@pytest.mark.parametrize("seed, cc", [(0, "gcc"), (1, "clang")])
def test_code_form_equals_the_table_walk_bit_for_bit_under_sanitizers(seed, cc, tmp_path):
    """One fixture per compiler, each under ASan/UBSan and the strict flags."""
    if link_problem(cc) is not None:
        pytest.skip(str(link_problem(cc)))
    model = float_leaf_model(seed)
    X = edge_rows(model, seed)
    want = [numpy_walk(model, X, k) for k in range(len(model.stages))]
    code, d = _run(model, X, tmp_path, compiler=cc, flags=SAN)
    assert "chk_TREE_CODE 1" in (d / "edgeseq_model.h").read_text()
    assert "es_tree_node" not in (d / "edgeseq_model.c").read_text()  # code only: no node tables
    table, _ = _run(model, X, tmp_path, form="table", compiler=cc, flags=SAN)
    for k, (got, ref, tab) in enumerate(zip(code.predictions, want, table.predictions)):
        assert np.array_equal(got, tab), f"stage {k} ({cc}): code form differs from the table walk"
        assert np.array_equal(got.astype(np.float32), ref), f"stage {k} ({cc})"


def test_the_table_form_carries_no_code_and_matches(case, tmp_path):
    model, X, want = case
    run, d = _run(model, X, tmp_path, form="table", extra=("-O2",))
    assert "_TREE_CODE" not in (d / "edgeseq_model.h").read_text()
    assert _same(run, want)


def test_an_emitter_adding_trees_in_another_order_is_caught(case, tmp_path):
    model, X, want = case
    real = c_float._stage_trees
    with mock.patch.object(c_float, "_stage_trees", lambda st: list(reversed(real(st)))):
        run, _ = _run(model, X, tmp_path)
    assert not _same(run, want)


def test_code_comparing_less_than_is_caught(case, tmp_path):
    model, X, want = case
    d = tmp_path / "lt"
    d.mkdir()
    write_c_tree_model(model, d, "chk", c_trees="code")
    src = (d / "edgeseq_model.c").read_text()
    assert src.count(") > ") + src.count(") < 0x") > 20  # the integer compares of "not x <= t"
    # "x < t" instead: not (x < t) is "pattern >= t's" for t >= 0, "pattern <= t's" (unsigned) for t < 0
    (d / "edgeseq_model.c").write_text(src.replace(") > ", ") >= ").replace(") < 0x", ") <= 0x"))
    run = run_c_model(d, X[:, tree_feature_order(model)], extra=("-O1",))
    assert not _same(run, want)


def _chunk_calls(src: str, k: int) -> list[str]:
    return re.findall(rf"^    s\d+ = chk_stage{k}_\d+\(x, s\d+\);$", src, re.M)


def _chunked(per_chunk: int):
    """The code form in chunks of `per_chunk` trees for every stage of more trees, however small."""
    return mock.patch.multiple(c_float, CODE_CHUNK_TREES=per_chunk, CODE_CHUNK_MIN_NODES=0)


@pytest.mark.parametrize("per_chunk, cc", [(2, "gcc"), (3, "clang")])
def test_stages_in_chunks_of_trees_equal_the_table_walk_bit_for_bit(case, per_chunk, cc, tmp_path):
    """Stages of 0, 1, 7, 8 and 13 trees on two state entries in chunk functions of 2 or 3 trees (short
    last chunks, a stage of one chunk written inline, stages without trees), strict flags and
    ASan/UBSan: the table walk's bits."""
    if link_problem(cc) is not None:
        pytest.skip(str(link_problem(cc)))
    model, X, want = case
    ens = model.ensemble
    counts = [s.tree_stop - s.tree_start for s in model.stages]
    assert 0 in counts and 0 < min(n for n in counts if n) <= per_chunk  # stages of no trees, of one chunk
    with _chunked(per_chunk):
        code, d = _run(model, X, tmp_path, compiler=cc, flags=SAN, extra=("-O2",))
    src = (d / "edgeseq_model.c").read_text()
    assert "typedef char chk_code_reads_in_range[" in src  # the compile-time range assert is kept
    short = False
    for k, st in enumerate(model.stages):  # the chunks are there (a test of one function per stage would pass too)
        per_entry = np.bincount(ens.target[st.tree_start:st.tree_stop], minlength=ens.n_targets)
        short |= bool(counts[k] > per_chunk and (per_entry % per_chunk).any())
        chunks = int((-(-per_entry // per_chunk)).sum()) if counts[k] > per_chunk else 0
        assert len(re.findall(rf"^static float chk_stage{k}_\d+\(", src, re.M)) == chunks, f"stage {k}"
        assert [c.split("(")[0].split("_")[-1] for c in _chunk_calls(src, k)] == [str(c) for c in range(chunks)]
    assert short  # some entry's last chunk is short
    table, _ = _run(model, X, tmp_path, form="table", compiler=cc, flags=SAN, extra=("-O2",))
    for k, (got, ref, tab) in enumerate(zip(code.predictions, want, table.predictions)):
        assert np.array_equal(got, tab), f"stage {k} ({cc}): chunked code differs from the table walk"
        assert np.array_equal(got.astype(np.float32), ref), f"stage {k} ({cc})"


def test_small_stages_stay_one_function(case, tmp_path):
    """Below CODE_CHUNK_MIN_NODES a stage is one function whatever its tree count."""
    model, _, _ = case
    with mock.patch.object(c_float, "CODE_CHUNK_TREES", 2):
        write_c_tree_model(model, tmp_path, "chk", c_trees="code")
    assert model.ensemble.n_nodes <= c_float.CODE_CHUNK_MIN_NODES
    assert not re.search(r"^static float chk_stage", (tmp_path / "edgeseq_model.c").read_text(), re.M)


def test_chunks_called_in_another_order_are_caught(case, tmp_path):
    """Negative control for the chunked form: the last stage's chunks called in reverse order."""
    model, X, want = case
    d = tmp_path / "rev"
    d.mkdir()
    with _chunked(3):
        write_c_tree_model(model, d, "chk", c_trees="code")
    src = (d / "edgeseq_model.c").read_text()
    k = len(model.stages) - 1
    calls = _chunk_calls(src, k)
    assert len(calls) >= 5
    (d / "edgeseq_model.c").write_text(src.replace("\n".join(calls), "\n".join(reversed(calls))))
    run = run_c_model(d, X[:, tree_feature_order(model)], extra=("-O1",))
    assert _same(run, want[:k]) and not np.array_equal(run.predictions[k].astype(np.float32), want[k])


def test_code_form_agrees_with_lightgbm(tmp_path):
    reg, model, rows = small_lightgbm()
    code, _ = _run(model, rows, tmp_path, extra=("-O2",))
    table, _ = _run(model, rows, tmp_path, form="table", extra=("-O2",))
    assert all(np.array_equal(a, b) for a, b in zip(code.predictions, table.predictions))
    np.testing.assert_allclose(code.predictions[-1].ravel(), reg.predict(rows), rtol=1e-6, atol=1e-5)


INIT_CODE_PROGRAM = r"""
#include <stdio.h>
#include "a/edgeseq_model.h"
#include "b/edgeseq_model.h"
static void nothing(const float *x, float *state, float *z) { (void)x; (void)state; (void)z; }
int main(void)
{
    static float wa[a_WORK_FLOATS];
    static es_tree_stage_fn none[a_N_STAGES], all[a_N_STAGES];
    es_tree_code wrong = a_tree_code;
    es_state sa;
    uint32_t k;
    int bad = 0;
    for (k = 0u; k < a_N_STAGES; ++k) {
        all[k] = nothing;
    }
    bad |= es_init(&sa, &a_model, wa, a_WORK_FLOATS) != ES_ERR_BAD_MODEL; /* no tables to walk */
    bad |= es_init_code(&sa, NULL, wa, a_WORK_FLOATS) != ES_ERR_NULL;
    bad |= es_init_code(&sa, &b_tree_code, wa, 1u) != ES_ERR_BUFFER;
    wrong.n_stages = a_N_STAGES + 1u;
    bad |= es_init_code(&sa, &wrong, wa, a_WORK_FLOATS) != ES_ERR_BAD_MODEL;
    wrong = a_tree_code;
    wrong.stage = none; /* no function for the stages with trees, and no tables */
    bad |= es_init_code(&sa, &wrong, wa, a_WORK_FLOATS) != ES_ERR_BAD_MODEL;
    wrong.stage = all;
    bad |= es_init_code(&sa, &wrong, wa, a_WORK_FLOATS) != ES_OK; /* a function for every stage is enough */
    bad |= es_init_code(&sa, &a_tree_code, wa, a_WORK_FLOATS) != ES_OK || sa.tree_code != &a_tree_code;
    bad |= es_reset(&sa) != ES_OK || sa.tree_code != &a_tree_code; /* es_reset keeps it */
    printf("%s\n", bad ? "FAIL" : "ok");
    return bad;
}
"""


def test_es_init_refuses_a_code_model_and_es_init_code_checks_its_table(tmp_path):
    """es_init cannot walk a code-form model (it has no tables); es_init_code checks the table's shape."""
    for prefix, seed in (("a", 0), ("b", 1)):
        (tmp_path / prefix).mkdir()
        write_c_tree_model(float_leaf_model(seed), tmp_path / prefix, prefix, c_trees="code")
    (tmp_path / "main.c").write_text(INIT_CODE_PROGRAM)
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", tmp_path / "a" / "edgeseq_model.c",
                     tmp_path / "b" / "edgeseq_model.c", tmp_path / "main.c"], tmp_path / "prog",
                    include_dirs=[tmp_path, runtime_dir()], compiler="gcc" if link_problem("gcc") is None else None,
                    flags=SAN if link_problem("gcc") is None else STRICT_FLAGS,
                    extra=("-O1",))
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr


def test_auto_picks_code_up_to_the_node_cut_and_tables_beyond():
    model = float_leaf_model(0)
    assert resolve_c_trees(model) == "code" and resolve_c_trees(model, "table") == "table"
    with mock.patch.object(c_float, "CODE_AUTO_MAX_NODES", model.ensemble.n_nodes - 1):
        assert resolve_c_trees(model, "auto") == "table"
    assert CODE_AUTO_MAX_NODES > 0
    with pytest.raises(ExportError, match="not one of"):
        resolve_c_trees(model, "inline")


@pytest.mark.skipif(missing_tools() is not None, reason=f"emulated Cortex-M tests skipped: {missing_tools()}")
@pytest.mark.parametrize("per_chunk", [None, 3])
def test_code_form_on_the_emulated_m4f(per_chunk, tmp_path):
    """One function per stage, and chunk functions (a float passed and returned in FPU registers)."""
    model = float_leaf_model(2)
    X = edge_rows(model, 2)
    want = [numpy_walk(model, X, k) for k in range(len(model.stages))]
    with _chunked(per_chunk) if per_chunk else mock.patch.object(c_float, "CODE_CHUNK_TREES", 8):
        write_c_tree_model(model, tmp_path, "edge", c_trees="code")
    assert ("static float edge_stage" in (tmp_path / "edgeseq_model.c").read_text()) == bool(per_chunk)
    run, _ = run_driver_arm(tmp_path, X[:, tree_feature_order(model)], TARGETS["cortex-m4f"])
    for k, (got, ref) in enumerate(zip(run.predictions, want)):
        assert np.array_equal(got.astype(np.float32), ref), f"stage {k}"


@pytest.fixture(scope="module")
def code_export(tmp_path_factory):
    """A LightGBM regression exported with c_trees="code": (rows, its directory)."""
    from edgeseq.export.writer import export_model
    _, model, rows = small_lightgbm()
    out = tmp_path_factory.mktemp("code_export") / "m"
    m = export_model(model, out, c_trees="code")
    assert m["c"]["trees"] == "code"
    return rows, out


def test_verify_passes_a_code_export_and_its_c_runs_the_code(code_export):
    from edgeseq.evaluate.verify import verify_export
    rows, out = code_export
    src = (out / "edgeseq_model.c").read_text()
    assert "es_tree_node" not in src and "_tree_code = {" in src
    report = verify_export(out, rows[:40].astype(np.float32), require_c=True)
    assert report.ok, report


def test_verify_refuses_a_tampered_code_export(code_export, tmp_path):
    import shutil

    from c_support import reseal

    from edgeseq.errors import IntegrityError
    from edgeseq.evaluate.verify import verify_export
    rows, src_dir = code_export
    out = tmp_path / "m"
    shutil.copytree(src_dir, out)
    c = (out / "edgeseq_model.c").read_text()
    (out / "edgeseq_model.c").write_text(c.replace(" <= ", " < ", 1))  # one split sends its ties right
    reseal(out)
    with pytest.raises(IntegrityError, match="differs"):
        verify_export(out, rows[:10].astype(np.float32), require_c=True)
    # and a manifest that claims tables for this code (the C it regenerates would differ)
    shutil.copy(src_dir / "edgeseq_model.c", out / "edgeseq_model.c")
    import json
    m = json.loads((out / "manifest.json").read_text())
    del m["c"]["trees"]
    reseal(out, m)
    with pytest.raises(IntegrityError, match="differs"):
        verify_export(out, rows[:10].astype(np.float32), require_c=True)


def test_export_refuses_an_unknown_form_and_code_for_int16(tmp_path):
    from edgeseq.export.writer import export_model
    _, model, rows = small_lightgbm()
    with pytest.raises(ExportError, match="not one of"):
        export_model(model, tmp_path / "a", c_trees="inline")
    with pytest.raises(ExportError, match="int16"):
        export_model(model, tmp_path / "b", c_trees="code", c_dtype="int16", calibration=(rows, None))


def test_cli_export_c_trees_code(tmp_path):
    from click.testing import CliRunner

    from edgeseq.cli._main import main
    from edgeseq.io.model_io import save_model
    _, model, _ = small_lightgbm()
    save_model(model, tmp_path / "m.pkl")
    res = CliRunner().invoke(main, ["export", str(tmp_path / "m.pkl"), str(tmp_path / "out"), "--c-trees", "code",
                                    "--quiet"])
    assert res.exit_code == 0, res.output
    assert "m_TREE_CODE 1" in (tmp_path / "out" / "edgeseq_model.h").read_text()


ABOVE_PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
static int32_t bits(const float *p) { union { float f; int32_t i; } b; b.f = *p; return b.i; }
static const float xs[] = { %(xs)s };
int main(void)
{
    unsigned j;
    for (j = 0u; j < sizeof xs / sizeof xs[0]; ++j) {
        const float *x = xs + j;
        %(rows)s
    }
    return 0;
}
"""


def test_the_integer_compare_of_a_split_is_x_greater_than_t_on_every_finite_pair(tmp_path):
    """`_c_above` (the split's integer compare on bit patterns) against numpy's float32 ``not x <= t``
    on every pair of signed zeros, subnormals, FLT_MIN, +-FLT_MAX, +-1 and their float32 neighbours,
    and random values: compiled by a real C compiler, one output line per pair."""
    rng = np.random.default_rng(7)
    f32 = np.finfo(np.float32)
    base = np.array([0.0, -0.0, 1.4e-45, -1.4e-45, f32.tiny, -f32.tiny, f32.max, -f32.max, 1.0, -1.0, 0.5, -0.25],
                    np.float32)
    near = np.concatenate([base, np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf))])
    t = np.concatenate([near, (rng.standard_normal(20) * 10.0 ** rng.uniform(-30, 30, 20)).astype(np.float32)])
    t = t[np.isfinite(t)]
    x = np.concatenate([t, rng.standard_normal(20).astype(np.float32)])
    rows = "\n        ".join(f'putchar(({c_float._c_above(0, v, "bits")}) ? 49 : 48);' for v in t)
    (tmp_path / "above.c").write_text(ABOVE_PROGRAM % {
        "xs": ", ".join(c_float.c_float(v) for v in x), "rows": rows + '\n        putchar(10);'})
    exe = compile_c([tmp_path / "above.c"], tmp_path / "above", flags=STRICT_FLAGS, extra=("-O1",))
    got = np.array([[c == "1" for c in line] for line in
                    subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()])
    want = ~(x[:, None] <= t[None, :])
    assert got.shape == want.shape and want.any() and (~want).any()
    np.testing.assert_array_equal(got, want)
