"""Cross-compile runtime + a generated model for a Cortex-M4F and report flash/RAM (skipped without the toolchain)."""

import subprocess

import numpy as np
from c_support import require
from sequences import random_sequence

from edgeseq.export.c_harness import runtime_dir
from edgeseq.export.c_codegen import write_c_model


def test_cortex_m4_footprint(tmp_path):
    require("arm-none-eabi-gcc")
    require("arm-none-eabi-size")
    require("make")
    seq = random_sequence(np.random.default_rng(4), (8, 4, 16, 4), n_outputs=1)  # 32 features, 4 prefixes
    write_c_model(seq, tmp_path / "m", "m4")
    proc = subprocess.run(["make", "--no-print-directory", "-C", str(runtime_dir()), "cortex-m4",
                           f"MODEL_DIR={tmp_path / 'm'}", f"BUILD={tmp_path / 'b'}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sizes = {}
    for line in proc.stdout.splitlines():
        t = line.split()
        if len(t) == 6 and t[0].isdigit():
            sizes[t[5].rsplit("/", 1)[-1]] = tuple(int(v) for v in t[:3])
    text, data, bss = sizes["footprint_m4.elf"]
    print(f"\nCortex-M4F (-Os): runtime {sizes['runtime_m4.o'][0]} B, model {sizes['model_m4.o'][0]} B flash; "
          f"firmware image flash {text + data} B, RAM {data + bss} B")
    # the model's flash holds at least its float32 weights; the state's RAM at least its work buffer
    n_weights = sum(c.size for c in seq.coefs) + seq.intercepts.size
    assert sizes["model_m4.o"][0] >= 4 * n_weights
    assert sizes["footprint_m4.o"][2] >= 4 * (32 + 1 + 2)
