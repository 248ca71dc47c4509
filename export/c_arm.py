"""Build the C runtime + generated models for Cortex-M cores and run them under qemu-system-arm.

The same test programs that run on the host (`runtime_c/tests/driver.c`, `budget_parity.c`) are
cross-compiled with arm-none-eabi-gcc and newlib, linked with a tiny start-up file and linker script
for qemu's MPS2 boards (`runtime_c/tests/qemu/`), and run bare-metal: semihosting carries the command
line, host files (feature rows, budgets) and printf output, so the host-side parsers of
`c_harness` read the results unchanged. Every qemu run is bounded by a timeout.

Targets: Cortex-M4F (mps2-an386, single-precision FPU, hard-float ABI) and Cortex-M3
(mps2-an385, no FPU: float arithmetic in libgcc's IEEE soft-float); for the integer (int16) models
also Cortex-M0 (qemu's `microbit`: ARMv6-M, no FPU, 16 KB RAM, 256 KB flash) in `INT_TARGETS`. The
M0 is kept out of `TARGETS`, whose float test programs load whole row files and are not sized for
16 KB of RAM.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgeseq.export.c_harness import (DRIVER_DEFINES, STRICT_FLAGS, CCompilerError, CRun, CSweep, _parse,
                                      budget_program_sources, budget_queries, compile_c, model_consts, model_prefix,
                                      n_stages, parse_budget_parity, parse_sweep, runtime_dir, write_budgets,
                                      write_rows)
from edgeseq.format import C_HEADER

ARM_CC = "arm-none-eabi-gcc"
ARM_SIZE = "arm-none-eabi-size"
QEMU = "qemu-system-arm"
QEMU_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ArmTarget:
    """A Cortex-M core: compiler flags and the qemu board that emulates it.

    Examples
    --------
    >>> from edgeseq.export.c_arm import TARGETS
    >>> m3 = TARGETS["cortex-m3"]
    >>> m3.machine, "-mfloat-abi=soft" in m3.cpu_flags  # no FPU: IEEE soft-float
    ('mps2-an385', True)
    """

    name: str
    cpu_flags: tuple
    machine: str
    qemu_cpu: str
    linker_script: str = "mps2.ld"  # in runtime_c/tests/qemu
    defines: tuple = ()  # for the start-up file (e.g. the stack top of a smaller RAM)


TARGETS = {
    "cortex-m4f": ArmTarget("cortex-m4f", ("-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-mthumb"),
                            "mps2-an386", "cortex-m4"),
    "cortex-m3": ArmTarget("cortex-m3", ("-mcpu=cortex-m3", "-mfloat-abi=soft", "-mthumb"), "mps2-an385", "cortex-m3"),
}

CORTEX_M0 = ArmTarget("cortex-m0", ("-mcpu=cortex-m0", "-mthumb", "-mfloat-abi=soft"), "microbit", "cortex-m0",
                      linker_script="microbit.ld", defines=("ES_STACK_TOP=0x20004000u",))
# cores without an FPU, where the int16 models are meant to run
INT_TARGETS = {"cortex-m0": CORTEX_M0, "cortex-m3": TARGETS["cortex-m3"]}


def qemu_dir() -> Path:
    """Directory of the qemu start-up file and linker script (``runtime_c/tests/qemu``).

    Examples
    --------
    >>> from edgeseq.export.c_arm import qemu_dir
    >>> sorted(p.name for p in qemu_dir().iterdir() if p.name in ("startup.c", "mps2.ld"))
    ['mps2.ld', 'startup.c']
    """
    return runtime_dir() / "tests" / "qemu"


def missing_tools(run: bool = True) -> str | None:
    """Why Cortex-M builds (and, with `run`, emulated runs) cannot happen here, or None if they can.

    Tests and benchmarks use it to skip with a reason (naming the Debian packages) instead of failing.

    Examples
    --------
    >>> from edgeseq.export.c_arm import missing_tools
    >>> reason = missing_tools()
    >>> reason is None or "not installed" in reason or "cannot run" in reason
    True
    """
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
    r"""Cross-compile `sources` + the qemu start-up into a bare-metal ELF with semihosting I/O.

    Returns
    -------
    pathlib.Path
        `out_path`.

    Raises
    ------
    CCompilerError
        If the compiler fails (warnings are errors).

    Examples
    --------
    A program built for the Cortex-M3 prints through semihosting on the emulated board:

    >>> import pathlib, tempfile
    >>> from edgeseq.export.c_arm import TARGETS, build_arm, run_qemu
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "hello.c").write_text('#include <stdio.h>\nint main(void) { printf("%d\\n", 6 * 7); return 0; }\n')
    >>> elf = build_arm([d / "hello.c"], d / "hello.elf", TARGETS["cortex-m3"])
    >>> run_qemu(elf, TARGETS["cortex-m3"]).stdout
    '42\n'
    """
    qdir = qemu_dir()
    return compile_c([qdir / "startup.c", *sources], out_path, include_dirs=[qdir, *include_dirs],
                     defines=(*target.defines, *defines), compiler=ARM_CC, flags=STRICT_FLAGS,
                     extra=(*target.cpu_flags, opt, "-T", str(qdir / target.linker_script), "--specs=rdimon.specs"),
                     libs=("-lm",))


def run_qemu(elf, target: ArmTarget, args=(), *, cwd=None, timeout: float = QEMU_TIMEOUT_S,
             check: bool = True, extra=()) -> subprocess.CompletedProcess:
    r"""Run `elf` on the emulated core; argv[0] is the ELF's name, `args` follow (no commas).

    Host files named in `args` are opened relative to `cwd` through semihosting. CCompilerError when
    the run exceeds `timeout` seconds or (with `check`) exits non-zero.

    Returns
    -------
    subprocess.CompletedProcess
        With the program's printf output in ``stdout``.

    Examples
    --------
    The exit status and argv arrive through semihosting:

    >>> import pathlib, tempfile
    >>> from edgeseq.export.c_arm import TARGETS, build_arm, run_qemu
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "argc.c").write_text("int main(int argc, char **argv) { (void)argv; return argc; }\n")
    >>> elf = build_arm([d / "argc.c"], d / "argc.elf", TARGETS["cortex-m4f"])
    >>> run_qemu(elf, TARGETS["cortex-m4f"], ["x", "y"], check=False).returncode
    3
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


def build_driver_arm(model_dir, build_dir, target: ArmTarget, defines=()) -> Path:
    """runtime + the model in `model_dir` + tests/driver.c as a bare-metal ELF for `target`; `defines`
    are added to the build (e.g. ``ES_TREE_LANES=8`` to run the host's tree walk on the core).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> from edgeseq.export.kinds.affine.c_float import write_c_model
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=2, group_names=("a", "b"),
    ...                      group_columns=([0], [1]), costs=[1.0, 2.0], order=[0, 1],
    ...                      coefs=(np.zeros((0, 1)), np.array([[2.0]]), np.array([[2.0], [3.0]])),
    ...                      intercepts=np.ones((3, 1)), output_names=("y",))
    >>> from edgeseq.export.c_arm import TARGETS, build_driver_arm
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = write_c_model(seq, d, "demo")
    >>> build_driver_arm(d, d, TARGETS["cortex-m4f"]).name
    'driver_cortex-m4f.elf'
    """
    model_dir, rdir = Path(model_dir), runtime_dir()
    return build_arm([rdir / "edgeseq_runtime.c", model_dir / "edgeseq_model.c", rdir / "tests" / "driver.c"],
                     Path(build_dir) / f"driver_{target.name}.elf", target, include_dirs=[model_dir, rdir],
                     defines=[f"ES_PREFIX={model_prefix(model_dir)}", *DRIVER_DEFINES, *defines])


def run_driver_arm(model_dir, X_groups, target: ArmTarget, budgets=None,
                   defines=()) -> tuple[CRun, CSweep | None]:
    """Every prefix of every row on the emulated core (as `c_harness.run_c_model`), and with
    `budgets` the firmware loop's answer for every row and budget (as `driver sweep`); `defines` as
    `build_driver_arm`.

    Returns
    -------
    tuple of (CRun, CSweep or None)

    Examples
    --------
    Prefix 2 of the model below is 1 + 2a + 3b; the emulated M4F computes exactly that, and a budget
    of 1 buys group "a" only:

    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> from edgeseq.export.kinds.affine.c_float import write_c_model
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=2, group_names=("a", "b"),
    ...                      group_columns=([0], [1]), costs=[1.0, 2.0], order=[0, 1],
    ...                      coefs=(np.zeros((0, 1)), np.array([[2.0]]), np.array([[2.0], [3.0]])),
    ...                      intercepts=np.ones((3, 1)), output_names=("y",))
    >>> from edgeseq.export.c_arm import TARGETS, run_driver_arm
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = write_c_model(seq, d, "demo")
    >>> X = np.array([[1.0, 2.0], [0.5, -1.0]])
    >>> run, sweep = run_driver_arm(d, X, TARGETS["cortex-m4f"], budgets=[0.0, 1.0, 3.0])
    >>> run.predictions[2].ravel().tolist(), (1 + 2 * X[:, 0] + 3 * X[:, 1]).tolist()
    ([9.0, -1.0], [9.0, -1.0])
    >>> sweep.prefix.tolist()
    [[0, 1, 2], [0, 1, 2]]
    """
    consts = model_consts(model_dir)
    with tempfile.TemporaryDirectory(prefix="edgeseq_arm_") as tmp:
        X = write_rows(model_dir, X_groups, Path(tmp) / "rows.bin")
        elf = build_driver_arm(model_dir, tmp, target, defines)
        run = _parse(run_qemu(elf, target, ["predict", "rows.bin"], cwd=tmp).stdout, X.shape[0],
                     n_stages(consts), consts["N_PRED"])
        sweep = None
        if budgets is not None:
            write_budgets(budgets, Path(tmp) / "budgets.txt")
            text = run_qemu(elf, target, ["sweep", "rows.bin", "budgets.txt"], cwd=tmp).stdout
            sweep = parse_sweep(text, X.shape[0], len(np.ravel(budgets)), consts["N_PRED"])
    return run, sweep


def run_budgets_arm(seqs, budgets, target: ArmTarget) -> np.ndarray:
    """`c_harness.run_c_budgets` on the emulated core: (rule, loop) prefixes per budget.

    The budget rule must pick the same prefix on a soft-float core as in Python; this checks it.

    Parameters
    ----------
    seqs : list of FittedSequence
    budgets : list of array-like
        ``budgets[i]`` are the budgets asked of model i.
    target : ArmTarget

    Returns
    -------
    numpy.ndarray
        (n_queries, 2): the prefix of the C budget rule and of the firmware loop.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> from edgeseq.export.kinds.affine.c_float import write_c_model
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=2, group_names=("a", "b"),
    ...                      group_columns=([0], [1]), costs=[1.0, 2.0], order=[0, 1],
    ...                      coefs=(np.zeros((0, 1)), np.array([[2.0]]), np.array([[2.0], [3.0]])),
    ...                      intercepts=np.ones((3, 1)), output_names=("y",))
    >>> from edgeseq.export.c_arm import TARGETS, run_budgets_arm
    >>> run_budgets_arm([seq], [np.array([0.5, 1.0, 2.9, 3.0])], TARGETS["cortex-m3"]).tolist()
    [[0, 0], [1, 1], [1, 1], [2, 2]]
    """
    with tempfile.TemporaryDirectory(prefix="edgeseq_armbudget_") as tmp:
        elf = build_arm(budget_program_sources(seqs, tmp), Path(tmp) / "budget_parity.elf", target,
                        include_dirs=[runtime_dir()])
        (Path(tmp) / "budgets.txt").write_text(budget_queries(budgets), encoding="ascii")
        return parse_budget_parity(run_qemu(elf, target, ["budgets.txt"], cwd=tmp).stdout)


def section_sizes(paths) -> dict:
    r"""{file name: {"text", "data", "bss"}} from arm-none-eabi-size (Berkeley format).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from edgeseq.export.c_arm import ARM_CC, TARGETS, section_sizes
    >>> from edgeseq.export.c_harness import compile_c
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "table.c").write_text("const int table[4] = {1, 2, 3, 4};\nint counter;\n")
    >>> obj = compile_c([d / "table.c"], d / "table.o", compiler=ARM_CC,
    ...                 extra=("-c", *TARGETS["cortex-m3"].cpu_flags), libs=())
    >>> sizes = section_sizes([obj])["table.o"]
    >>> sizes["text"] >= 16, sizes["bss"] + sizes["data"] < 16
    (True, True)
    """
    proc = subprocess.run([ARM_SIZE, *map(str, paths)], capture_output=True, text=True, check=True)
    sizes = {}
    for line in proc.stdout.splitlines()[1:]:
        t = line.split()
        sizes[Path(t[5]).name] = {"text": int(t[0]), "data": int(t[1]), "bss": int(t[2])}
    return sizes


def footprint(model_dir, target: ArmTarget, build_dir, *, identity_only: bool = False,
              linear_only: bool = False) -> dict:
    """Flash and RAM of runtime + model in a minimal firmware image (runtime_c/examples/m4_footprint.c:
    static state, one anytime pass, an interrupt-style read), built -Os with nano newlib and
    --gc-sections, as `arm-none-eabi-size` reports them: flash = text + data, RAM = data + bss.
    `identity_only` builds the runtime with -DES_IDENTITY_ONLY (regression: no expf, no libm),
    `linear_only` with -DES_LINEAR_ONLY (no tree-stage code), as such a model's firmware would be.
    A layer-block model (its header emits ``<prefix>_MACS_PER_STEP_MAX``) is driven with es_next /
    es_step (-DES_FOOTPRINT_STEPS), so that its stage code is linked and counted.

    Returns
    -------
    dict
        ``runtime_text``, ``model_flash``, ``image_flash`` and ``image_ram``, in bytes.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> from edgeseq.export.kinds.affine.c_float import write_c_model
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=2, group_names=("a", "b"),
    ...                      group_columns=([0], [1]), costs=[1.0, 2.0], order=[0, 1],
    ...                      coefs=(np.zeros((0, 1)), np.array([[2.0]]), np.array([[2.0], [3.0]])),
    ...                      intercepts=np.ones((3, 1)), output_names=("y",))
    >>> from edgeseq.export.c_arm import TARGETS, footprint
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = write_c_model(seq, d, "demo")
    >>> fp = footprint(d, TARGETS["cortex-m4f"], d + "/build", identity_only=True)
    >>> sorted(fp), fp["model_flash"] < fp["image_flash"] < 16384
    (['image_flash', 'image_ram', 'model_flash', 'runtime_text'], True)
    """
    model_dir, rdir, build = Path(model_dir), runtime_dir(), Path(build_dir)
    build.mkdir(parents=True, exist_ok=True)
    flags = (*target.cpu_flags, "-Os", "-ffunction-sections", "-fdata-sections")
    inc = [model_dir, rdir]
    dfn = [f"ES_PREFIX={model_prefix(model_dir)}", *(["ES_IDENTITY_ONLY"] if identity_only else []),
           *(["ES_LINEAR_ONLY"] if linear_only else [])]
    prefix = model_prefix(model_dir)
    if f"#define {prefix}_MACS_PER_STEP_MAX " in (model_dir / C_HEADER).read_text(encoding="ascii"):
        dfn.append("ES_FOOTPRINT_STEPS")
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
