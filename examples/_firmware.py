"""Build and run `runtime_c/examples/firmware_demo.c` against an exported model (shared by the examples).

The firmware demo is the C runtime as a device uses it: static state, features pushed group by
group, and a simulated timer interrupt that reads the committed prediction at a random moment.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from edgeseq.errors import CCompilerError
from edgeseq.export.c_harness import compile_c, find_c_compiler, model_prefix, runtime_dir


def _compilers() -> list[str]:
    """Every distinct C compiler here among $CC, gcc and clang (each build is run and labelled)."""
    found = []
    for name in (None, "gcc", "clang"):
        try:
            cc = find_c_compiler(name)
        except CCompilerError:
            continue
        if cc not in found:
            found.append(cc)
    return found


def _version(cc: str) -> str:
    out = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0].strip() if out else Path(cc).name


def firmware_demo(model_dir, seeds=(1, 2, 3)) -> list[str] | None:
    """Build the firmware demo with the model in `model_dir` with every compiler found (gcc, clang) and
    return its output for each seed, each starting with a line naming the build (None: no compiler)."""
    compilers = _compilers()
    if not compilers:
        return None
    model_dir, rdir = Path(model_dir), runtime_dir()
    outputs = []
    with tempfile.TemporaryDirectory(prefix="edgeseq_fw_") as tmp:
        for k, cc in enumerate(compilers):
            exe = compile_c([rdir / "edgeseq_runtime.c", model_dir / "edgeseq_model.c",
                             rdir / "examples" / "firmware_demo.c"], Path(tmp) / f"firmware_demo_{k}",
                            include_dirs=[model_dir, rdir], defines=[f"ES_PREFIX={model_prefix(model_dir)}"],
                            compiler=cc)
            build = f"build: {_version(cc)}, strict C99 flags, -O2\n"
            outputs += [build + subprocess.run([str(exe), str(s)], capture_output=True, text=True,
                                               check=True).stdout for s in seeds]
    return outputs
