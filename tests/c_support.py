"""Shared helpers of the tests/test_c_*.py files: compilers, flags, and the float32 error bound."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from edgeseq.export.c_harness import SANITIZE_FLAGS, STRICT_FLAGS, runtime_dir

U32 = 2.0 ** -24  # unit roundoff of float32


def compilers() -> list:
    """gcc always (the CI image has it); clang when installed (skipped cleanly otherwise)."""
    return [pytest.param(cc, marks=pytest.mark.skipif(shutil.which(cc) is None, reason=f"{cc} not installed"))
            for cc in ("gcc", "clang")]


@functools.lru_cache(maxsize=None)
def link_problem(cc: str, flags: tuple = SANITIZE_FLAGS) -> str | None:
    """Why `cc` cannot build and run a trivial program with `flags` here, or None when it can.

    Probed once per (compiler, flags) and process: clang installed without its compiler-rt package
    (Debian's libclang-rt-N-dev) compiles sanitized code but cannot link it ("cannot find
    libclang_rt.asan_static-x86_64.a"), which says nothing about the code under test.
    """
    path = shutil.which(cc)
    if path is None:
        return f"{cc} not installed"
    with tempfile.TemporaryDirectory(prefix="edgeseq_probe_") as d:
        src, exe = Path(d) / "probe.c", Path(d) / "probe"
        src.write_text("int main(void) { return 0; }\n")
        proc = subprocess.run([path, *flags, str(src), "-o", str(exe)], capture_output=True, text=True)
        if proc.returncode != 0:
            err = proc.stderr.splitlines()  # the linker's own line names the missing runtime
            lines = [ln for ln in err if "cannot find" in ln] or [ln for ln in err if "error" in ln] or err or ["?"]
            return f"{cc} cannot link {' '.join(flags[:1])} programs here: {lines[0].strip()[:200]}"
        run = subprocess.run([str(exe)], capture_output=True, text=True)
        if run.returncode != 0:
            return f"{cc}'s {' '.join(flags[:1])} programs do not run here: {run.stderr.strip()[:200]}"
    return None


def sanitizer_compilers() -> list:
    """`compilers()` for tests built with SANITIZE_FLAGS: a compiler whose ASan/UBSan runtime is
    missing is skipped with the linker's reason (as `make check` skips it), not failed."""
    return [pytest.param(cc, marks=pytest.mark.skipif(link_problem(cc) is not None, reason=str(link_problem(cc))))
            for cc in ("gcc", "clang")]


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} not installed")
    return path


SAN = (*STRICT_FLAGS, *SANITIZE_FLAGS)


def float32_bound(seq, X, j) -> np.ndarray:
    """Per-row bound on |C float32 - numpy float64| for prefix j (shape (n, 1), broadcasts over outputs).

    Rounding x and W to float32 and a float32 dot product of length d give at most (d + 3) u of
    sum |x_i w_i| + |b| (Higham's gamma_d plus the two input roundings); we allow twice that.
    Sigmoid and softmax are at most 1/2-Lipschitz per logit, and expf / division add a few ulp of
    probabilities <= 1 (2^-20 covers them). Tiny magnitudes add float32's subnormal spacing.
    """
    cols = seq.prefix_columns(j)
    d = len(cols)
    mag = np.abs(X[:, cols]) @ np.abs(seq.coefs[j]) + np.abs(seq.intercepts[j])
    bound = 2 * (d + 3) * U32 * mag.max(axis=1, keepdims=True) + (d + 1) * 2.0 ** -149
    if seq.link != "identity":
        bound = bound + 2.0 ** -20
    return bound


def assert_matches_numpy(seq, X, preds) -> None:
    """Every prefix of the C output equals seq.apply_link(seq.linear(X, j)) within float32_bound."""
    assert len(preds) == seq.n_prefixes
    for j, got in enumerate(preds):
        ref = seq.apply_link(seq.linear(X, j))
        err = np.abs(got - ref)
        bound = float32_bound(seq, X, j)
        worst = np.unravel_index(np.argmax(err - bound), err.shape)
        assert np.all(err <= bound), (f"prefix {j}: |C - numpy| = {err[worst]:.3g} > bound {bound[worst[0], 0]:.3g} "
                                      f"(row {worst[0]})")


def in_place_commit_runtime(dst_dir, name: str = "edgeseq_runtime.c"):
    """A copy of runtime `name` (edgeseq_runtime.c or edgeseq_runtime_i16.c, which share the commit)
    that commits in place (writes the published slot and keeps it published): the negative control
    every interrupt test must catch tearing. Returns its path."""
    src = (runtime_dir() / name).read_text()
    broken = src.replace("const uint32_t target = (s->seq + 1u) & 1u;", "const uint32_t target = s->seq & 1u;")
    # publish twice (seq + 2): the same slot stays published while the next commit writes into it
    broken = broken.replace("ES_SEQLOCK_PUBLISH(s->seq);", "ES_SEQLOCK_PUBLISH(s->seq); ES_SEQLOCK_PUBLISH(s->seq);")
    assert broken.count("target = s->seq & 1u") == 1 and broken.count("ES_SEQLOCK_PUBLISH(s->seq);") == 2
    path = dst_dir / name
    path.write_text(broken)
    return path


def boundary_budgets(cum: np.ndarray, rng) -> np.ndarray:
    """Budgets that test the rule cum_cost <= budget hardest: every cumulative cost, its float64
    neighbours, its float32 roundings and their neighbours, midpoints, 0, inf and a few random."""
    with np.errstate(over="ignore"):
        f32 = cum.astype(np.float32)
        cand = [cum, np.nextafter(cum, -np.inf), np.nextafter(cum, np.inf), f32.astype(np.float64),
                np.nextafter(f32, np.float32(-np.inf)).astype(np.float64),
                np.nextafter(f32, np.float32(np.inf)).astype(np.float64),
                (cum[:-1] + cum[1:]) / 2, [0.0, np.inf], rng.uniform(0, cum[-1] * 1.1 + 1e-300, 8)]
    b = np.concatenate([np.ravel(c) for c in cand])
    return np.unique(b[np.isfinite(b) & (b >= 0) | (b == np.inf)])


def interrupt_model(d, int16: bool = False):
    """A softmax model with wide groups, C prefix `safety`: pushes take long enough for interrupts
    to land inside them. Written into `d` (with `int16`, its integer C, calibrated on seeded normal
    rows), which is returned."""
    from sequences import random_sequence

    from edgeseq.export.kinds.affine.c_float import write_c_model
    seq = random_sequence(np.random.default_rng(21), (40, 30, 50, 20), n_outputs=8, link="softmax",
                          names=["imu", "audio \"raw\"", "camera */", "gps"])
    if int16:
        from edgeseq.export.kinds.affine.c_int16 import write_c_int16_model
        from edgeseq.export.kinds.affine.quantize import quantize_sequence
        rows = np.random.default_rng(22).normal(size=(64, seq.n_features_in))
        write_c_int16_model(seq, quantize_sequence(seq, rows), d, "safety")
        return d
    write_c_model(seq, d, "safety")
    return d


def reseal(out, manifest=None):
    """Recompute every checksum of an export after an edit (what an attacker can always do)."""
    import json

    from edgeseq.format import dump_manifest, manifest_checksum, sha256_file
    m = manifest or json.loads((out / "manifest.json").read_text())
    for f in m["files"]:
        f["sha256"] = sha256_file(out / f["file"])
    m["manifest_sha256"] = manifest_checksum(m)
    (out / "manifest.json").write_bytes(dump_manifest(m))


def systick_counts(elf_path, target, sources, include_dirs, defines, period: int = 499, passes: int = 300):
    """Build runtime_c/tests/qemu/systick_test.c with `sources` for the emulated `target` and run it:
    (exit code, {"reads", "during_push", "torn"}) -- the interrupt test of the int16 runtime."""
    from edgeseq.export.c_arm import build_arm, run_qemu
    elf = build_arm([*sources, runtime_dir() / "tests" / "qemu" / "systick_test.c"], elf_path, target,
                    include_dirs=include_dirs, defines=defines)
    proc = run_qemu(elf, target, [str(period), str(passes)], check=False, extra=("-icount", "shift=3"))
    tok = proc.stdout.split()
    counts = {tok[i]: int(tok[i + 1]) for i in range(0, len(tok) - 1, 2) if tok[i] in ("reads", "during_push", "torn")}
    return proc.returncode, counts
