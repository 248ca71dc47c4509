"""Integer (int16) C models (docs/integer-models.md, issue 13 "Integer C models").

For a regression (diabetes), a binary (breast cancer) and a multiclass (digits) model -- the reference
models of bench/c_footprint.py, calibrated on their training rows -- the int16 C (host gcc and clang
under ASan/UBSan, and the emulated Cortex-M0 `microbit` and Cortex-M3) gives, at every prefix and
over a budget sweep at every boundary budget, predictions and labels bit-identical to the Python
simulation `edgeseq.export.kinds.affine.quantize.simulate`, including on rows that saturate every feature. The
simulation is not vacuous (a different table rounding is detected), the accuracy target holds
(<= 0.5 percentage points at every prefix for digits and breast cancer), the int32 headroom proof
lowers the weight scale or refuses, the runtime rejects a descriptor whose bound fails, and a
Cortex-M0 image links no soft-float routine (while the float build does: the negative control).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from c_support import (SAN, boundary_budgets, in_place_commit_runtime, interrupt_model, reseal,
                       sanitizer_compilers, systick_counts)
from click.testing import CliRunner

from edgeseq.budget import resolve_prefix
from edgeseq.cli import main
from edgeseq.errors import ExportError
from edgeseq.export import quantize
from edgeseq.export.c_arm import INT_TARGETS, missing_tools
from edgeseq.export.kinds.affine.c_float import write_c_model
from edgeseq.export.c_harness import CCompilerError, runtime_dir
from edgeseq.export.kinds.affine.c_int16 import write_c_int16_model
from edgeseq.export.c_int16_run import firmware_image, run_int16_arm, run_int16_host, soft_float_symbols
from edgeseq.export.kinds.affine.quantize import quantize_features, quantize_sequence, simulate
from edgeseq.forms.linear import FittedSequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from c_footprint import N_TEST, reference_model  # noqa: E402

ACCURACY_TARGET_PP = 0.5  # issue 13: accuracy loss <= 0.5 percentage points at every prefix
_ARM = missing_tools()
_ARM_BUILD = missing_tools(run=False)


def _data(kind: str):
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
    return {"regression": load_diabetes, "binary": load_breast_cancer, "multiclass": load_digits}[kind](return_X_y=True)


def _extreme_rows(n_feat: int, rng) -> np.ndarray:
    """Rows at the int16 limits, where the headroom bound is tight."""
    return np.stack([np.full(n_feat, 32767), np.full(n_feat, -32768), np.resize([32767, -32768], n_feat),
                     rng.integers(-32768, 32768, n_feat), rng.integers(-32768, 32768, n_feat)]).astype(np.int16)


@pytest.fixture(scope="module", params=["regression", "binary", "multiclass"])
def model(request, tmp_path_factory):
    kind = request.param
    seq, X_test = reference_model(kind)
    X, y = _data(kind)
    qm = quantize_sequence(seq, X[:-N_TEST], y[:-N_TEST])
    d = tmp_path_factory.mktemp(f"i16_{kind}")
    write_c_int16_model(seq, qm, d, kind[:3])
    cols = seq.prefix_columns(seq.n_groups)
    xq = np.vstack([quantize_features(qm, X_test[:, cols]), quantize_features(qm, 10 * X_test[:3, cols]),
                    _extreme_rows(cols.size, np.random.default_rng(0))])
    budgets = boundary_budgets(seq.cum_cost, np.random.default_rng(1))
    return seq, qm, d, xq, budgets


def _assert_bit_identical(seq, qm, xq, budgets, run, sweep):
    for j in range(seq.n_prefixes):
        pred, label = simulate(qm, xq, j)
        np.testing.assert_array_equal(run.pred[j], pred, err_msg=f"prefix {j}")
        np.testing.assert_array_equal(run.label[j], label, err_msg=f"prefix {j}")
    want = np.array([resolve_prefix(seq.cum_cost, budget=b) for b in budgets])
    np.testing.assert_array_equal(sweep.rule, np.broadcast_to(want, sweep.rule.shape))
    np.testing.assert_array_equal(sweep.prefix, sweep.rule)  # the firmware loop stops where the rule says
    for j in np.unique(want):
        cols = np.flatnonzero(want == j)
        np.testing.assert_array_equal(sweep.pred[:, cols], np.repeat(simulate(qm, xq, j)[0][:, None], cols.size, 1))


@pytest.mark.parametrize("cc", sanitizer_compilers())
def test_host_build_is_bit_identical_to_the_simulation(model, cc):
    seq, qm, d, xq, budgets = model
    run, sweep = run_int16_host(d, xq, budgets, compiler=cc, flags=SAN, extra=("-O1",))
    _assert_bit_identical(seq, qm, xq, budgets, run, sweep)


@pytest.mark.skipif(_ARM is not None, reason=f"emulated Cortex-M tests skipped: {_ARM}")
@pytest.mark.parametrize("target", list(INT_TARGETS))
def test_emulated_core_is_bit_identical_to_the_simulation(model, target):
    seq, qm, d, xq, budgets = model
    rows = np.vstack([xq[:12], xq[-5:]])
    run, sweep = run_int16_arm(d, rows, INT_TARGETS[target], budgets)
    _assert_bit_identical(seq, qm, rows, budgets, run, sweep)


def test_accuracy_or_explained_variance_loss_per_prefix(model):
    seq, qm, *_ = model
    if seq.task == "regression":
        ev = [p["explained_variance_loss"] for p in qm.loss]
        print(f"\nint16 explained-variance loss per prefix: {[f'{v:.1e}' for v in ev]}")
        assert max(abs(v) for v in ev) < 1e-3
        return
    loss = [p["accuracy_loss_pp"] for p in qm.loss]
    print(f"\nint16 {seq.link} accuracy loss (pp) per prefix: {loss}; label agreement "
          f"{[round(p['label_agreement'], 4) for p in qm.loss]}")
    assert all(p["reference"] == "targets" for p in qm.loss)
    assert max(loss) <= ACCURACY_TARGET_PP, f"prefixes over the target: {loss}"


def test_a_different_rounding_in_the_simulation_is_detected(model, monkeypatch):
    """Negative control: the comparison above would catch a simulation that rounds the table index
    to nearest instead of down (classifiers; the identity link has no rounding to vary)."""
    seq, qm, d, xq, _ = model
    if seq.link == "identity":
        pytest.skip("the identity link does no rounding of its own")
    run, _ = run_int16_host(d, xq)
    exact = quantize.table_index

    def nearest(u, shift):
        d_ = int(shift) - quantize.TABLE_SHIFT
        u = np.asarray(u, dtype=np.int64)
        return exact(u + (1 << (d_ - 1)), shift) if d_ > 0 else exact(u, shift)

    monkeypatch.setattr(quantize, "table_index", nearest)
    assert any(not np.array_equal(run.pred[j], simulate(qm, xq, j)[0]) for j in range(seq.n_prefixes))


def _wide_sequence(n_feat: int, weight: float, intercept: float) -> FittedSequence:
    coefs = (np.zeros((0, 1)), np.full((n_feat, 1), weight))
    return FittedSequence(task="regression", link="identity", n_features_in=n_feat, group_names=("all",),
                          group_columns=(np.arange(n_feat),), costs=[1.0], order=[0], coefs=coefs,
                          intercepts=np.array([[0.0], [intercept]]), output_names=("y",))


def test_headroom_lowers_the_weight_scale_and_holds_at_the_int16_limits(tmp_path):
    """64 equal weights: at full scale 64 * 32767 * 32768 > 2^31, so the scale drops ~6 bits; the C build
    under UBSan (signed overflow is undefined behaviour) then runs rows at +-32768 without a report."""
    rng = np.random.default_rng(3)
    seq = _wide_sequence(64, 1.0, 0.5)
    X = rng.uniform(-1, 1, (50, 64))
    qm = quantize_sequence(seq, X)
    assert qm.reduced_bits[1] >= 5 and qm.headroom[1] <= 2**31 - 1  # log2(64) bits, less what the ranges give
    assert quantize.headroom(2 * qm.coefs[1], 2 * qm.intercepts[1]) > 2**31 - 1  # one bit more would not fit
    write_c_int16_model(seq, qm, tmp_path, "wide")
    xq = _extreme_rows(64, rng)
    run, _ = run_int16_host(tmp_path, xq, flags=SAN, extra=("-O1",))
    np.testing.assert_array_equal(run.pred[1], simulate(qm, xq, 1)[0])


def test_headroom_refuses_when_the_weights_would_lose_their_precision():
    """A huge intercept against tiny weights: int32 fits only at a scale where the largest weight keeps
    fewer than MIN_WEIGHT_BITS bits -- one clear error instead of a silently useless model."""
    seq = _wide_sequence(4, 1e-3, 1e9)
    with pytest.raises(ExportError, match=r"^prefix 1: int32 headroom leaves the largest weight") as exc:
        quantize_sequence(seq, np.random.default_rng(0).uniform(-1, 1, (20, 4)))
    assert "\n" not in str(exc.value)


def test_the_runtime_rejects_a_descriptor_whose_headroom_fails(model, tmp_path):
    """es16_init re-checks the bound: the full prefix's last intercept set to INT32_MAX (its weights then
    push the bound past 2^31 - 1) is refused, not run; the unedited copy runs (the control)."""
    seq, qm, d, xq, _ = model
    for f in ("edgeseq_model.h", "edgeseq_model.c"):
        (tmp_path / f).write_text((d / f).read_text())
    run_int16_host(tmp_path, xq[:2])
    src = (tmp_path / "edgeseq_model.c").read_text()
    head, body = src.split("_intercept[] = {\n", 1)
    table, tail = body.split("\n};", 1)
    values = table.rstrip(",").rsplit(",", 1)[0] if "," in table.rstrip(",") else ""
    new_table = (values + "," if values else "") + " 2147483647,"
    (tmp_path / "edgeseq_model.c").write_text(head + "_intercept[] = {\n" + new_table + "\n};" + tail)
    with pytest.raises(CCompilerError, match="ERR init|exited 3"):
        run_int16_host(tmp_path, xq[:2])


@pytest.mark.parametrize("cc", sanitizer_compilers())
def test_status_codes_budget_bits_and_tight_headroom_in_c(cc, tmp_path):
    """runtime_c/tests/status_i16.c: error codes leave the state unchanged; -0.0, +inf, NaN and negative
    budgets; refused descriptors; exact sums at the int16 limits of a model at the bound (ASan/UBSan)."""
    import subprocess
    from edgeseq.export.c_harness import compile_c
    exe = compile_c([runtime_dir() / "edgeseq_runtime_i16.c", runtime_dir() / "tests" / "status_i16.c"],
                    tmp_path / "status_i16", include_dirs=[runtime_dir()], compiler=cc, flags=SAN, libs=())
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "status_i16 ok", proc.stdout + proc.stderr


def _code_only(text: str) -> str:
    """C text without comments and string literals (names may say anything)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def test_no_float_type_in_the_integer_path(model):
    seq, qm, d, *_ = model
    rdir = runtime_dir()
    for path in (d / "edgeseq_model.c", d / "edgeseq_model.h", rdir / "edgeseq_runtime_i16.c",
                 rdir / "edgeseq_runtime_i16.h", rdir / "edgeseq_seqlock.h"):
        assert not re.search(r"\b(float|double)\b|\d\.\d|\d[eE][+-]?\d", _code_only(path.read_text())), path.name


@pytest.mark.skipif(_ARM_BUILD is not None, reason=f"Cortex-M builds skipped: {_ARM_BUILD}")
def test_cortex_m0_image_links_no_soft_float_but_the_float_build_does(model, tmp_path):
    seq, qm, d, *_ = model
    m0 = INT_TARGETS["cortex-m0"]
    assert soft_float_symbols(firmware_image(d, m0, tmp_path / "i16")) == []
    write_c_model(seq, tmp_path / "float", seq.link[:3])
    linked = soft_float_symbols(firmware_image(tmp_path / "float", m0, tmp_path / "f32", int16=False))
    assert any(s.startswith("__aeabi_f") for s in linked), linked  # negative control: the check can fail


# ------------------------------------------------------------------ CLI and manifest

def _invoke(*args):
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:
        runner = CliRunner()
    return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    from edgeseq import AnytimeClassifier
    from edgeseq.io.model_io import save_model
    X, y = _data("binary")
    d = tmp_path_factory.mktemp("cli16")
    np.savez(d / "cal.npz", X=X, y=y)
    save_model(AnytimeClassifier([list(range(i, i + 6)) for i in range(0, 30, 6)], [1.0] * 5).fit(X, y),
               d / "bc.model")
    return d


def test_cli_int16_export_manifest_and_inspect(cli_files, tmp_path):
    d = cli_files
    res = _invoke("export", d / "bc.model", tmp_path / "out", "--c-dtype", "int16", "--calibration-data",
                  d / "cal.npz", "--quiet")
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    q = m["c"]["int16"]
    assert m["c"]["dtype"] == "int16" and q["feature_source"] == "calibration-data" and q["calibration_rows"] == 569
    assert len(q["prefixes"]) == len(m["prefixes"]) and len(q["features"]) == 30
    assert all(p["headroom"] <= 2**31 - 1 and "accuracy_loss_pp" in p for p in q["prefixes"])
    assert "extern const es16_model" in (tmp_path / "out" / "edgeseq_model.h").read_text()
    shown = _invoke("inspect", tmp_path / "out")
    assert shown.exit_code == 0 and "int16 C model" in shown.output and "accuracy +" in shown.output
    from edgeseq.evaluate.verify import verify_export
    rep = verify_export(tmp_path / "out", require_c=True)  # int16 C regenerated from graphs + scales, then run
    assert rep.ok and "bit-identical to the integer simulation" in rep.c_note
    assert all(c.c_diff == 0.0 and c.c_ratio == 0.0 for c in rep.checks)
    r = _invoke("verify", tmp_path / "out", "--require-c")
    assert r.exit_code == 0 and "int16 C model, bit-identical" in r.output, r.output


def test_verify_refuses_edited_int16_c_or_scales(cli_files, tmp_path):
    """Negative controls: C edited after export, or a recorded weight scale changed, with every checksum
    recomputed, is refused before anything is compiled."""
    from edgeseq.errors import IntegrityError
    from edgeseq.evaluate.verify import verify_export
    out = tmp_path / "out"
    assert _invoke("export", cli_files / "bc.model", out, "--c-dtype", "int16", "--calibration-data",
                   cli_files / "cal.npz", "--quiet").exit_code == 0
    src = out / "edgeseq_model.c"
    original = src.read_text()
    src.write_text(original.replace("-", "+", 1))  # one weight's sign
    reseal(out)
    with pytest.raises(IntegrityError, match="differs from the int16 C model edgeseq generates"):
        verify_export(out, require_c=True)
    src.write_text(original)
    m = json.loads((out / "manifest.json").read_text())
    m["c"]["int16"]["prefixes"][2]["weight_shift"] -= 1  # a scale the C was not generated with
    reseal(out, m)
    with pytest.raises(IntegrityError, match="prefix 2's headroom|differs from the int16 C model"):
        verify_export(out, require_c=True)


def test_cli_int16_without_calibration_is_one_clear_error(cli_files, tmp_path):
    res = _invoke("export", cli_files / "bc.model", tmp_path / "out", "--c-dtype", "int16", "--quiet")
    assert res.exit_code != 0
    err = (res.stderr if hasattr(res, "stderr") else res.output).strip()
    assert "--calibration-data" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_float32_is_the_default_and_unchanged(cli_files, tmp_path):
    a = _invoke("export", cli_files / "bc.model", tmp_path / "a", "--model-name", "m", "--quiet")
    b = _invoke("export", cli_files / "bc.model", tmp_path / "b", "--model-name", "m", "--c-dtype", "float32", "--quiet")
    assert a.exit_code == 0 and b.exit_code == 0
    for f in ("edgeseq_model.c", "edgeseq_model.h", "manifest.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert "dtype" not in json.loads((tmp_path / "a" / "manifest.json").read_text())["c"]  # old layout, byte for byte


def test_manifest_int16_entry_must_match_dtype(cli_files, tmp_path):
    from edgeseq.errors import IntegrityError
    from edgeseq.format import check_cross_fields
    _invoke("export", cli_files / "bc.model", tmp_path / "o", "--c-dtype", "int16", "--calibration-data",
            cli_files / "cal.npz", "--quiet")
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    check_cross_fields(m)
    del m["c"]["dtype"]
    with pytest.raises(IntegrityError, match="c.int16"):
        check_cross_fields(m)


# ------------------------------------------------------------------ the shared commit under interrupts

SYSTICK_PERIOD = 499  # core cycles between interrupts (as tests/test_c_qemu.py)
SYSTICK_PASSES = 300


def _systick_i16(tmp_path, target, runtime_source):
    d = interrupt_model(tmp_path / "model", int16=True)
    return systick_counts(tmp_path / "systick_i16.elf", INT_TARGETS[target], [runtime_source, d / "edgeseq_model.c"],
                          [d, runtime_dir()], ["ES16_PREFIX=safety"], SYSTICK_PERIOD, SYSTICK_PASSES)


@pytest.mark.skipif(_ARM is not None, reason=f"emulated Cortex-M tests skipped: {_ARM}")
@pytest.mark.parametrize("target", list(INT_TARGETS))
def test_systick_reads_of_the_int16_runtime_are_never_torn(tmp_path, target):
    """The integer runtime commits through the float runtime's seqlock (edgeseq_seqlock.h): SysTick
    reads during pushes are checked bit for bit; the in-place-commit copy is caught (the control)."""
    rc, counts = _systick_i16(tmp_path, target, runtime_dir() / "edgeseq_runtime_i16.c")
    print(f"\n{target} int16: {counts}")
    assert rc == 0 and counts["torn"] == 0 and counts["during_push"] >= 100, counts
    rc, counts = _systick_i16(tmp_path, target, in_place_commit_runtime(tmp_path, "edgeseq_runtime_i16.c"))
    print(f"{target} int16, in-place commit: {counts}")
    assert rc == 1 and counts["torn"] > 0, counts


def test_calibration_problems_are_one_line_input_errors():
    from edgeseq.errors import InputError
    seq = _wide_sequence(2, 1.0, 0.0)
    with pytest.raises(InputError, match="beyond what an int16 feature"):
        quantize_sequence(seq, np.array([[-1e300, 0.0], [1e300, 1.0]]))
    X, y = _data("binary")
    seq, _ = reference_model("binary")
    with pytest.raises(InputError, match="calibration label '(benign|malignant)' is not one of the model's classes"):
        quantize_sequence(seq, X, np.where(y == 1, "benign", "malignant"))
