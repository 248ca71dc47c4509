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


def firmware_demo(model_dir, seeds=(1, 2, 3)) -> list[str] | None:
    """Compile the firmware demo with the model in `model_dir`; its output for each seed (None: no compiler)."""
    try:
        find_c_compiler()
    except CCompilerError:
        return None
    model_dir, rdir = Path(model_dir), runtime_dir()
    with tempfile.TemporaryDirectory(prefix="edgeseq_fw_") as tmp:
        exe = compile_c([rdir / "edgeseq_runtime.c", model_dir / "edgeseq_model.c",
                         rdir / "examples" / "firmware_demo.c"], Path(tmp) / "firmware_demo",
                        include_dirs=[model_dir, rdir], defines=[f"ES_PREFIX={model_prefix(model_dir)}"])
        return [subprocess.run([str(exe), str(s)], capture_output=True, text=True, check=True).stdout
                for s in seeds]
