"""Build the C runtime + generated models for Cortex-M cores and run them under qemu-system-arm.

The same test programs that run on the host (`runtime_c/tests/driver.c`, `budget_parity.c`) are
cross-compiled with arm-none-eabi-gcc and newlib, linked with a tiny start-up file and linker script
for qemu's MPS2 boards (`runtime_c/tests/qemu/`), and run bare-metal: semihosting carries the command
line, host files (feature rows, budgets) and printf output, so the host-side parsers of
`c_harness` read the results unchanged. Every qemu run is bounded by a timeout.

Targets: Cortex-M4F (mps2-an386, single-precision FPU, hard-float ABI) and Cortex-M3
(mps2-an385, no FPU: float arithmetic in libgcc's IEEE soft-float).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgeseq.export.c_harness import (STRICT_FLAGS, CCompilerError, CRun, CSweep, _parse, budget_program_sources,
                                      budget_queries, compile_c, model_consts, model_prefix, parse_budget_parity,
                                      parse_sweep, runtime_dir, write_budgets, write_rows)

ARM_CC = "arm-none-eabi-gcc"
ARM_SIZE = "arm-none-eabi-size"
QEMU = "qemu-system-arm"
QEMU_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ArmTarget:
    """A Cortex-M core: compiler flags and the qemu board that emulates it."""

    name: str
    cpu_flags: tuple
    machine: str
    qemu_cpu: str


TARGETS = {
    "cortex-m4f": ArmTarget("cortex-m4f", ("-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-mthumb"),
                            "mps2-an386", "cortex-m4"),
    "cortex-m3": ArmTarget("cortex-m3", ("-mcpu=cortex-m3", "-mfloat-abi=soft", "-mthumb"), "mps2-an385", "cortex-m3"),
}


def qemu_dir() -> Path:
    return runtime_dir() / "tests" / "qemu"


def missing_tools(run: bool = True) -> str | None:
    """Why Cortex-M builds (and, with `run`, emulated runs) cannot happen here, or None if they can."""
    tools = [ARM_CC, ARM_SIZE] + ([QEMU] if run else [])
    absent = [t for t in tools if shutil.which(t) is None]
    if absent:
        return f"{', '.join(absent)} not installed (Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)"
    try:
        specs = subprocess.run([ARM_CC, "-print-file-name=rdimon.specs"], capture_output=True, text=True,
                               timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{ARM_CC} cannot run: {exc}"
    if not Path(specs).is_file():
        return "newlib for arm-none-eabi (rdimon.specs) not installed (Debian: libnewlib-arm-none-eabi)"
    return None


def build_arm(sources, out_path, target: ArmTarget, *, include_dirs=(), defines=(), opt="-O2") -> Path:
    """Cross-compile `sources` + the qemu start-up into a bare-metal ELF with semihosting I/O."""
    qdir = qemu_dir()
    return compile_c([qdir / "startup.c", *sources], out_path, include_dirs=[qdir, *include_dirs], defines=defines,
                     compiler=ARM_CC, flags=STRICT_FLAGS,
                     extra=(*target.cpu_flags, opt, "-T", str(qdir / "mps2.ld"), "--specs=rdimon.specs"),
                     libs=("-lm",))


def run_qemu(elf, target: ArmTarget, args=(), *, cwd=None, timeout: float = QEMU_TIMEOUT_S,
             check: bool = True, extra=()) -> subprocess.CompletedProcess:
    """Run `elf` on the emulated core; argv[0] is the ELF's name, `args` follow (no commas).

    Host files named in `args` are opened relative to `cwd` through semihosting. CCompilerError when
    the run exceeds `timeout` seconds or (with `check`) exits non-zero.
    """
    semi = ",".join(["enable=on", "target=native", f"arg={Path(elf).name}", *(f"arg={a}" for a in args)])
    cmd = [QEMU, "-M", target.machine, "-cpu", target.qemu_cpu, "-nographic", "-monitor", "none", "-serial", "none",
           *extra, "-semihosting-config", semi, "-kernel", str(elf)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise CCompilerError(f"{target.name}: qemu run exceeded {timeout:g} s ({' '.join(cmd)})") from exc
    if check and proc.returncode != 0:
        raise CCompilerError(f"{target.name}: {Path(elf).name} exited {proc.returncode}:\n"
                             f"{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    return proc


def build_driver_arm(model_dir, build_dir, target: ArmTarget) -> Path:
    """runtime + the model in `model_dir` + tests/driver.c as a bare-metal ELF for `target`."""
    model_dir, rdir = Path(model_dir), runtime_dir()
    return build_arm([rdir / "edgeseq_runtime.c", model_dir / "edgeseq_model.c", rdir / "tests" / "driver.c"],
                     Path(build_dir) / f"driver_{target.name}.elf", target, include_dirs=[model_dir, rdir],
                     defines=[f"ES_PREFIX={model_prefix(model_dir)}"])


def run_driver_arm(model_dir, X_groups, target: ArmTarget, budgets=None) -> tuple[CRun, CSweep | None]:
    """Every prefix of every row on the emulated core (as `c_harness.run_c_model`), and with
    `budgets` the firmware loop's answer for every row and budget (as `driver sweep`)."""
    consts = model_consts(model_dir)
    with tempfile.TemporaryDirectory(prefix="edgeseq_arm_") as tmp:
        X = write_rows(model_dir, X_groups, Path(tmp) / "rows.bin")
        elf = build_driver_arm(model_dir, tmp, target)
        run = _parse(run_qemu(elf, target, ["predict", "rows.bin"], cwd=tmp).stdout, X.shape[0],
                     consts["N_GROUPS"] + 1, consts["N_PRED"])
        sweep = None
        if budgets is not None:
            write_budgets(budgets, Path(tmp) / "budgets.txt")
            text = run_qemu(elf, target, ["sweep", "rows.bin", "budgets.txt"], cwd=tmp).stdout
            sweep = parse_sweep(text, X.shape[0], len(np.ravel(budgets)), consts["N_PRED"])
    return run, sweep


def run_budgets_arm(seqs, budgets, target: ArmTarget) -> np.ndarray:
    """`c_harness.run_c_budgets` on the emulated core: (rule, loop) prefixes per budget."""
    with tempfile.TemporaryDirectory(prefix="edgeseq_armbudget_") as tmp:
        elf = build_arm(budget_program_sources(seqs, tmp), Path(tmp) / "budget_parity.elf", target,
                        include_dirs=[runtime_dir()])
        (Path(tmp) / "budgets.txt").write_text(budget_queries(budgets), encoding="ascii")
        return parse_budget_parity(run_qemu(elf, target, ["budgets.txt"], cwd=tmp).stdout)


def section_sizes(paths) -> dict:
    """{file name: {"text", "data", "bss"}} from arm-none-eabi-size (Berkeley format)."""
    proc = subprocess.run([ARM_SIZE, *map(str, paths)], capture_output=True, text=True, check=True)
    sizes = {}
    for line in proc.stdout.splitlines()[1:]:
        t = line.split()
        sizes[Path(t[5]).name] = {"text": int(t[0]), "data": int(t[1]), "bss": int(t[2])}
    return sizes


def footprint(model_dir, target: ArmTarget, build_dir, *, identity_only: bool = False) -> dict:
    """Flash and RAM of runtime + model in a minimal firmware image (runtime_c/examples/m4_footprint.c:
    static state, one anytime pass, an interrupt-style read), built -Os with nano newlib and
    --gc-sections, as `arm-none-eabi-size` reports them: flash = text + data, RAM = data + bss.
    `identity_only` builds the runtime with -DES_IDENTITY_ONLY (regression: no expf, no libm)."""
    model_dir, rdir, build = Path(model_dir), runtime_dir(), Path(build_dir)
    build.mkdir(parents=True, exist_ok=True)
    flags = (*target.cpu_flags, "-Os", "-ffunction-sections", "-fdata-sections")
    inc = [model_dir, rdir]
    dfn = [f"ES_PREFIX={model_prefix(model_dir)}", *(["ES_IDENTITY_ONLY"] if identity_only else [])]
    objs = {}
    for name, src in (("runtime", rdir / "edgeseq_runtime.c"), ("model", model_dir / "edgeseq_model.c"),
                      ("app", rdir / "examples" / "m4_footprint.c")):
        objs[name] = compile_c([src], build / f"{name}.o", include_dirs=inc, defines=dfn, compiler=ARM_CC,
                               flags=STRICT_FLAGS, extra=("-c", *flags), libs=())
    elf = compile_c(list(objs.values()), build / "firmware.elf", compiler=ARM_CC, flags=(),
                    extra=(*flags, "--specs=nano.specs", "--specs=nosys.specs", "-Wl,--gc-sections"), libs=("-lm",))
    sizes = section_sizes([*objs.values(), elf])
    image = sizes["firmware.elf"]
    return {"runtime_text": sizes["runtime.o"]["text"],
            "model_flash": sizes["model.o"]["text"] + sizes["model.o"]["data"],
            "image_flash": image["text"] + image["data"], "image_ram": image["data"] + image["bss"]}
