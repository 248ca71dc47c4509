"""Build and run the int16 C model (runtime_c/edgeseq_runtime_i16.c + tests/driver_i16.c) on the host or on an
emulated Cortex-M, and build its minimal firmware image for sizes and the no-soft-float check.

The driver prints integers only, so a run is compared with `edgeseq.export.kinds.affine.quantize.simulate` for
bit-identity, not within a tolerance. Host and qemu runs share the row/budget writers and parsers.
"""

from __future__ import annotations

import re
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgeseq.errors import InputError
from edgeseq.export.c_harness import STRICT_FLAGS, CCompilerError, compile_c, runtime_dir
from edgeseq.format import C_HEADER

_PREFIX_RE = re.compile(r"extern const es16_model (\w+)_model;")
MAX_BUDGETS = 128  # tests/driver_i16.c holds this many budgets (1 KB of a 16 KB micro:bit's RAM)
SOFT_FLOAT = re.compile(r"__aeabi_[fd]\w*|__(add|sub|mul|div)[sd]f3|__float\w*|__fix\w*|__extendsfdf2|__truncdfsf2")


@dataclass
class Int16Run:
    """Every prefix of every row: ``pred`` (J+1, n, n_pred) and ``label`` (J+1, n), int64.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.c_int16_run import Int16Run
    >>> Int16Run(np.zeros((2, 3, 1), np.int64), np.zeros((2, 3), np.int64)).pred.shape
    (2, 3, 1)
    """

    pred: np.ndarray
    label: np.ndarray


@dataclass
class Int16Sweep:
    """Per row and budget: the budget rule's prefix, the loop's prefix, label and prediction.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.c_int16_run import Int16Sweep
    >>> z = np.zeros((1, 2), np.int64)
    >>> Int16Sweep(z, z, z, np.zeros((1, 2, 1), np.int64)).rule.shape
    (1, 2)
    """

    rule: np.ndarray
    prefix: np.ndarray
    label: np.ndarray
    pred: np.ndarray


def int16_prefix(model_dir) -> str:
    """The C prefix of the int16 model in `model_dir` (from its header).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from edgeseq.export.c_int16_run import int16_prefix
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "edgeseq_model.h").write_text("extern const es16_model m_model;")
    >>> int16_prefix(d)
    'm'
    """
    m = _PREFIX_RE.search((Path(model_dir) / C_HEADER).read_text(encoding="ascii"))
    if m is None:
        raise InputError(f"{model_dir} holds no int16 C model (export it with --c-dtype int16)")
    return m.group(1)


def toy_int16_model(out_dir, n_rows: int = 20):
    """(seq, qm, xq): a two-group regression fitted on seeded rows, quantised, its int16 C written to
    `out_dir` (prefix "demo"), and its int16 feature rows -- for examples and smoke tests.

    Examples
    --------
    >>> from edgeseq.export.c_int16_run import toy_int16_model
    >>> import tempfile
    >>> seq, qm, xq = toy_int16_model(tempfile.mkdtemp())
    >>> seq.n_prefixes, xq.shape, xq.dtype.name
    (3, (20, 2), 'int16')
    """
    from edgeseq import AnytimeRegressor
    from edgeseq.export.kinds.affine.c_int16 import write_c_int16_model
    from edgeseq.export.kinds.affine.quantize import quantize_features, quantize_sequence

    X = np.random.default_rng(0).normal(size=(n_rows, 2))
    seq = AnytimeRegressor([[0], [1]], [1.0, 2.0]).fit(X, X[:, 0]).fitted_sequence_
    qm = quantize_sequence(seq, X)
    write_c_int16_model(seq, qm, out_dir, "demo")
    return seq, qm, quantize_features(qm, X[:, seq.prefix_columns(2)])


def write_int16_rows(xq, path) -> np.ndarray:
    """Write int16 rows as the driver reads them (native order); return them as int16.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from edgeseq.export.c_int16_run import write_int16_rows
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.bin"
    >>> write_int16_rows(np.array([[1, -2]]), p).tolist(), p.stat().st_size
    ([[1, -2]], 4)
    """
    xq = np.ascontiguousarray(xq)
    if xq.ndim != 2 or np.abs(xq.astype(np.int64)).max(initial=0) > 32768 or xq.min(initial=0) < -32768 \
            or xq.max(initial=0) > 32767:
        raise InputError("int16 rows must be a 2-D array of values in [-32768, 32767]")
    rows = xq.astype(np.int16)
    rows.tofile(path)
    return rows


def write_budget_bits(budgets, path) -> None:
    """One line per budget: the two 32-bit halves of its binary64 bit pattern, hex (what the driver reads).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from edgeseq.export.c_int16_run import write_budget_bits
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "b.txt"; write_budget_bits([1.0, -0.0], p); p.read_text()
    '3ff00000 00000000\\n80000000 00000000\\n'
    """
    lines = []
    if np.size(budgets) > MAX_BUDGETS:
        raise InputError(f"{np.size(budgets)} budgets; the int16 test driver takes at most {MAX_BUDGETS}")
    for b in np.ravel(np.asarray(budgets, dtype=np.float64)):
        bits = struct.unpack("<Q", struct.pack("<d", float(b)))[0]
        lines.append(f"{bits >> 32:08x} {bits & 0xFFFFFFFF:08x}\n")
    Path(path).write_text("".join(lines), encoding="ascii")


def _lines(text: str) -> list[list[str]]:
    rows = [ln.split() for ln in text.splitlines() if ln.strip()]
    if not rows or rows[-1] != ["done"]:
        raise CCompilerError(f"the int16 driver did not finish:\n{text[-1500:]}")
    bad = [r for r in rows if "ERR" in r]
    if bad:
        raise CCompilerError(f"the int16 driver reported an error: {' '.join(bad[0])}")
    return rows[:-1]


def parse_predict(text: str, n_rows: int, n_stages: int, n_pred: int) -> Int16Run:
    """Parse `driver_i16 predict` output ("row j label v...").

    Examples
    --------
    >>> from edgeseq.export.c_int16_run import parse_predict
    >>> r = parse_predict("0 0 -1 5\\n0 1 -1 7\\ndone\\n", 1, 2, 1)
    >>> r.pred[:, 0, 0].tolist(), r.label.tolist()
    ([5, 7], [[-1], [-1]])
    """
    pred = np.zeros((n_stages, n_rows, n_pred), np.int64)
    label = np.zeros((n_stages, n_rows), np.int64)
    seen = np.zeros((n_stages, n_rows), bool)
    for t in _lines(text):
        r, j = int(t[0]), int(t[1])
        label[j, r] = int(t[2])
        pred[j, r] = [int(v) for v in t[3:3 + n_pred]]
        seen[j, r] = True
    if not seen.all():
        raise CCompilerError("the int16 driver's output misses prefixes")
    return Int16Run(pred, label)


def parse_sweep(text: str, n_rows: int, n_budgets: int, n_pred: int) -> Int16Sweep:
    """Parse `driver_i16 sweep` output ("row b rule prefix label v...").

    Examples
    --------
    >>> from edgeseq.export.c_int16_run import parse_sweep
    >>> s = parse_sweep("0 0 1 1 -1 9\\ndone\\n", 1, 1, 1)
    >>> s.rule.tolist(), s.prefix.tolist(), s.pred[0, 0].tolist()
    ([[1]], [[1]], [9])
    """
    z = np.zeros((n_rows, n_budgets), np.int64)
    rule, prefix, label = z.copy(), z.copy(), z.copy()
    pred = np.zeros((n_rows, n_budgets, n_pred), np.int64)
    rows = _lines(text)
    if len(rows) != n_rows * n_budgets:
        raise CCompilerError(f"the int16 driver printed {len(rows)} sweep lines, expected {n_rows * n_budgets}")
    for t in rows:
        r, b = int(t[0]), int(t[1])
        rule[r, b], prefix[r, b], label[r, b] = int(t[2]), int(t[3]), int(t[4])
        pred[r, b] = [int(v) for v in t[5:5 + n_pred]]
    return Int16Sweep(rule, prefix, label, pred)


def _consts(model_dir) -> dict:
    header = (Path(model_dir) / C_HEADER).read_text(encoding="ascii")
    prefix = int16_prefix(model_dir)
    return {k: int(v) for k, v in re.findall(rf"#define {prefix}_(N_\w+) (\d+)u", header)}


def _driver_defines(model_dir) -> list[str]:
    return [f"ES16_PREFIX={int16_prefix(model_dir)}", "ES16_ON_COMMIT=driver_on_commit"]


def driver_sources(model_dir) -> list[Path]:
    """The driver's sources: runtime, model, tests/driver_i16.c.

    Examples
    --------
    >>> from edgeseq.export.c_int16_run import driver_sources
    >>> [p.name for p in driver_sources(".")]
    ['edgeseq_runtime_i16.c', 'edgeseq_model.c', 'driver_i16.c']
    """
    rdir = runtime_dir()
    return [rdir / "edgeseq_runtime_i16.c", Path(model_dir) / "edgeseq_model.c", rdir / "tests" / "driver_i16.c"]


def _run_all(model_dir, xq, budgets, execute) -> tuple[Int16Run, Int16Sweep | None]:
    """Write rows (and budgets), run `execute(args, tmp)` -> stdout for predict and sweep, parse both."""
    c = _consts(model_dir)
    with tempfile.TemporaryDirectory(prefix="edgeseq_i16_") as tmp:
        rows = write_int16_rows(xq, Path(tmp) / "rows.bin")
        if rows.shape[1] != c["N_FEATURES"]:
            raise InputError(f"rows have {rows.shape[1]} columns; the int16 model expects {c['N_FEATURES']}")
        run = parse_predict(execute(["predict", "rows.bin"], tmp), rows.shape[0], c["N_STAGES"], c["N_PRED"])
        sweep = None
        if budgets is not None:
            write_budget_bits(budgets, Path(tmp) / "budgets.txt")
            sweep = parse_sweep(execute(["sweep", "rows.bin", "budgets.txt"], tmp), rows.shape[0],
                                len(np.ravel(budgets)), c["N_PRED"])
    return run, sweep


def run_int16_host(model_dir, xq, budgets=None, *, compiler=None, flags=STRICT_FLAGS,
                   extra=("-O2",)) -> tuple[Int16Run, Int16Sweep | None]:
    """Every prefix of every int16 row (and with `budgets` the firmware loop per budget) on the host.

    Returns
    -------
    tuple of (Int16Run, Int16Sweep or None)

    Examples
    --------
    >>> from edgeseq.export.kinds.affine.quantize import simulate
    >>> from edgeseq.export.c_int16_run import run_int16_host, toy_int16_model
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> seq, qm, xq = toy_int16_model(d)
    >>> run, sweep = run_int16_host(d, xq, budgets=[0.0, 1.0, 3.0])
    >>> bool((run.pred[2] == simulate(qm, xq, 2)[0]).all()), sweep.prefix[0].tolist()
    (True, [0, 1, 2])
    """
    with tempfile.TemporaryDirectory(prefix="edgeseq_i16_build_") as build:
        exe = compile_c(driver_sources(model_dir), Path(build) / "driver_i16",
                        include_dirs=[Path(model_dir), runtime_dir()],
                        defines=_driver_defines(model_dir), compiler=compiler, flags=flags,
                        extra=extra, libs=())

        def execute(args, cwd):
            proc = subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, timeout=120)
            if proc.returncode != 0:
                raise CCompilerError(f"driver_i16 exited {proc.returncode}: {proc.stdout[-800:]}{proc.stderr[-1500:]}")
            return proc.stdout

        return _run_all(model_dir, xq, budgets, execute)


def run_int16_arm(model_dir, xq, target, budgets=None) -> tuple[Int16Run, Int16Sweep | None]:
    """`run_int16_host` on an emulated core (`edgeseq.export.c_arm` target, e.g. INT_TARGETS["cortex-m0"]).

    Examples
    --------
    >>> from edgeseq.export.kinds.affine.quantize import simulate
    >>> from edgeseq.export.c_arm import INT_TARGETS
    >>> from edgeseq.export.c_int16_run import run_int16_arm, toy_int16_model
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> seq, qm, xq = toy_int16_model(d)
    >>> run, _ = run_int16_arm(d, xq, INT_TARGETS["cortex-m0"])
    >>> bool((run.pred[2] == simulate(qm, xq, 2)[0]).all())
    True
    """
    from edgeseq.export.c_arm import build_arm, run_qemu

    with tempfile.TemporaryDirectory(prefix="edgeseq_i16_arm_") as build:
        elf = build_arm(driver_sources(model_dir), Path(build) / f"driver_i16_{target.name}.elf", target,
                        include_dirs=[Path(model_dir), runtime_dir()],
                        defines=_driver_defines(model_dir))
        return _run_all(model_dir, xq, budgets, lambda args, cwd: run_qemu(elf, target, args, cwd=cwd).stdout)


def firmware_image(model_dir, target, build_dir, *, int16: bool = True, identity_only: bool = False,
                   trees: bool = False) -> Path:
    """The minimal firmware ELF (-Os, nano newlib, --gc-sections) of the model in `model_dir`:
    runtime_c/examples/i16_footprint.c with the int16 runtime (-DES16_LINEAR_ONLY unless `trees`), or
    (``int16=False``, a float export)
    m4_footprint.c with the float runtime (-DES_LINEAR_ONLY unless `trees`, and -DES_IDENTITY_ONLY with
    `identity_only`, as a regression model's float firmware would be built). For sizes and the
    soft-float symbol check.

    Examples
    --------
    >>> from edgeseq.export.c_arm import INT_TARGETS
    >>> from edgeseq.export.c_int16_run import firmware_image, soft_float_symbols, toy_int16_model
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = toy_int16_model(d)
    >>> soft_float_symbols(firmware_image(d, INT_TARGETS["cortex-m0"], d + "/build"))
    []
    """
    from edgeseq.export.c_arm import ARM_CC
    from edgeseq.export.c_harness import model_prefix

    model_dir, rdir, build = Path(model_dir), runtime_dir(), Path(build_dir)
    build.mkdir(parents=True, exist_ok=True)
    flags = (*target.cpu_flags, "-Os", "-ffunction-sections", "-fdata-sections")
    if int16:
        srcs = [rdir / "edgeseq_runtime_i16.c", model_dir / "edgeseq_model.c", rdir / "examples" / "i16_footprint.c"]
        dfn = [f"ES16_PREFIX={int16_prefix(model_dir)}", *([] if trees else ["ES16_LINEAR_ONLY"])]
    else:
        srcs = [rdir / "edgeseq_runtime.c", model_dir / "edgeseq_model.c", rdir / "examples" / "m4_footprint.c"]
        dfn = [f"ES_PREFIX={model_prefix(model_dir)}", *([] if trees else ["ES_LINEAR_ONLY"]),
               *(["ES_IDENTITY_ONLY"] if identity_only else [])]
    objs = [compile_c([src], build / f"{src.stem}.o", include_dirs=[model_dir, rdir], defines=dfn, compiler=ARM_CC,
                      flags=STRICT_FLAGS, extra=("-c", *flags), libs=()) for src in srcs]
    return compile_c(objs, build / "firmware.elf", compiler=ARM_CC, flags=(),
                     extra=(*flags, "--specs=nano.specs", "--specs=nosys.specs", "-Wl,--gc-sections"), libs=("-lm",))


def soft_float_symbols(elf) -> list[str]:
    """The soft-float routines (``__aeabi_f*``, ``__aeabi_d*``, libgcc's ``__addsf3`` family) linked into `elf`.

    Examples
    --------
    >>> from edgeseq.export.c_int16_run import SOFT_FLOAT
    >>> bool(SOFT_FLOAT.fullmatch("__aeabi_fmul")), bool(SOFT_FLOAT.fullmatch("__aeabi_uidiv"))
    (True, False)
    """
    out = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    names = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return sorted(n for n in names if SOFT_FLOAT.fullmatch(n))
