"""C runtime safety: status codes, interrupt/thread reads never torn, fuzzing, the Makefile, the demo.

`make -C runtime_c check MODEL_DIR=...` is the single entry point for the C-side checks (status
test, firmware demo, interrupt test in signal and thread mode, fallback fuzzer), built with gcc and
clang (when present) under the strict flags and -fsanitize=address,undefined.
"""

import shutil
import subprocess

import pytest
from c_support import in_place_commit_runtime, interrupt_model, link_problem, require

from edgeseq.errors import CCompilerError
from edgeseq.export.c_harness import compile_c, runtime_dir


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return interrupt_model(tmp_path_factory.mktemp("cmodel"))


def _make(*args, timeout=240):
    make = require("make")
    proc = subprocess.run([make, "--no-print-directory", "-C", str(runtime_dir()), *args],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_make_check_with_sanitizers(model_dir, tmp_path):
    out = _make("check", f"MODEL_DIR={model_dir}", f"BUILD={tmp_path}", "FUZZ_SECONDS=1.5")
    n_cc = 1 + (shutil.which("clang") is not None) - out.count("sanitizers unavailable for")
    if n_cc == 0:
        pytest.skip("no compiler here links the ASan/UBSan runtime")
    assert out.count("status_test ok") == n_cc
    assert out.count("torn 0") == 2 * n_cc  # signal and thread mode
    assert out.count("no finding") == n_cc
    assert out.count("answer at tick") == n_cc


def _interrupt_binary(model_dir, tmp_path, runtime_source, name):
    return compile_c([runtime_source, model_dir / "edgeseq_model.c", runtime_dir() / "tests" / "interrupt_test.c"],
                     tmp_path / name, include_dirs=[model_dir, runtime_dir()], defines=["ES_PREFIX=safety"],
                     libs=("-lm", "-lpthread"))


def test_interrupt_test_catches_an_in_place_commit(model_dir, tmp_path):
    """The interrupt test can fail: a runtime that writes the published slot in place is caught tearing."""
    exe = _interrupt_binary(model_dir, tmp_path, in_place_commit_runtime(tmp_path), "broken")
    # signal mode does not depend on two threads getting two cores on a loaded machine
    proc = subprocess.run([str(exe), "signal", "0.6"], capture_output=True, text=True)
    torn = int(proc.stdout.split("torn")[1])
    assert proc.returncode == 1 and torn > 0, proc.stdout
    good = _interrupt_binary(model_dir, tmp_path, runtime_dir() / "edgeseq_runtime.c", "good")
    proc = subprocess.run([str(good), "signal", "0.6"], capture_output=True, text=True)
    assert proc.returncode == 0 and "torn 0" in proc.stdout, proc.stdout


def test_libfuzzer_bounded_run(model_dir, tmp_path):
    """libFuzzer (clang) drives init/push/current/reset with arbitrary bytes for ~6 s: no finding."""
    clang = require("clang")
    sources = [runtime_dir() / "edgeseq_runtime.c", model_dir / "edgeseq_model.c",
               runtime_dir() / "tests" / "fuzz_runtime.c"]
    try:
        exe = compile_c(sources, tmp_path / "fuzz", include_dirs=[model_dir, runtime_dir()],
                        defines=["ES_PREFIX=safety", "ES_LIBFUZZER"], compiler=clang,
                        extra=("-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all"))
    except CCompilerError as exc:  # clang without its libFuzzer runtime: the fallback in `make check` still ran
        if "fuzzer" not in str(exc).split("\n", 1)[-1]:
            raise
        pytest.skip(f"clang cannot link libFuzzer targets here: {exc}")
    proc = subprocess.run([str(exe), "-max_total_time=6", "-seed=1", f"-artifact_prefix={tmp_path}/"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Done" in proc.stderr


def test_fuzzer_catches_a_missing_nan_check(model_dir, tmp_path):
    """The fuzz harness can fail: a runtime without the NaN/Inf check of pushed values is found."""
    src = (runtime_dir() / "edgeseq_runtime.c").read_text()
    check = "bad |= es_nonfinite_bit("
    assert src.count(check) == 2  # the P == 1 and the P > 1 paths
    (tmp_path / "edgeseq_runtime.c").write_text(src.replace(check, "bad |= 0u * es_nonfinite_bit("))
    exe = compile_c([tmp_path / "edgeseq_runtime.c", model_dir / "edgeseq_model.c",
                     runtime_dir() / "tests" / "fuzz_runtime.c"], tmp_path / "fz",
                    include_dirs=[model_dir, runtime_dir()], defines=["ES_PREFIX=safety"])
    proc = subprocess.run([str(exe), "5", "1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "fuzz finding: push status" in proc.stderr


def test_demo_requires_a_model_dir():
    make = require("make")
    proc = subprocess.run([make, "-C", str(runtime_dir()), "demo"], capture_output=True, text=True)
    assert proc.returncode != 0 and "MODEL_DIR" in proc.stdout


def test_sanitizer_probe_names_what_cannot_be_linked():
    """The probe that makes sanitizer tests skip (not fail) on a compiler without its runtime: it says
    yes to what links, and names the missing piece otherwise (negative control: a library that does not
    exist), so it cannot skip everything by answering no."""
    require("gcc")
    assert link_problem("gcc", ("-std=c99",)) is None
    why = link_problem("gcc", ("-lno_such_runtime_edgeseq",))
    assert why is not None and "no_such_runtime_edgeseq" in why, why
    assert link_problem("no-such-cc-edgeseq") == "no-such-cc-edgeseq not installed"
