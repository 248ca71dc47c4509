"""Cross-compile runtime + a generated model for a Cortex-M4F and report flash/RAM (skipped without the toolchain)."""

import subprocess

import numpy as np
import pytest
from c_support import require
from sequences import random_sequence

from edgeseq.export.c_harness import runtime_dir
from edgeseq.export.kinds.affine.c_float import write_c_model


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


def test_missing_arm_tools_are_named(monkeypatch):
    """Where the emulator is absent, the qemu tests skip with this reason (it names what to install)."""
    import edgeseq.export.c_arm as c_arm
    monkeypatch.setattr(c_arm.shutil, "which", lambda tool: None if tool == c_arm.QEMU else "/usr/bin/" + tool)
    assert "qemu-system-arm not installed" in c_arm.missing_tools()
    assert "qemu" not in (c_arm.missing_tools(run=False) or "")


def test_footprint_from_the_build_on_both_cores(tmp_path):
    """c_arm.footprint (what bench/c_footprint.py records): sizes bounded below by what must be stored."""
    from edgeseq.export.c_arm import TARGETS, footprint, missing_tools
    missing = missing_tools(run=False)
    if missing:
        pytest.skip(missing)
    seq = random_sequence(np.random.default_rng(4), (8, 4, 16, 4), n_outputs=3, link="softmax")
    write_c_model(seq, tmp_path / "m", "fp")
    n_weights = sum(c.size for c in seq.coefs) + seq.intercepts.size
    for target in TARGETS.values():
        sizes = footprint(tmp_path / "m", target, tmp_path / target.name)
        # float32 weights + float64 cumulative costs in the model; state + work buffer in RAM
        assert sizes["model_flash"] >= 4 * n_weights + 8 * (seq.n_groups + 1)
        assert sizes["image_ram"] >= 4 * (32 + 3 + 2 * 3)
        # the image keeps the runtime's functions the firmware calls (--gc-sections drops the others,
        # e.g. es_push_next when it pushes with es_push), plus the whole model
        linked = _linked_text(tmp_path / target.name / "runtime.o", tmp_path / target.name / "firmware.elf")
        assert {"es_init", "es_push", "es_current"} <= set(linked)
        assert sizes["runtime_text"] >= sum(linked.values())
        assert sizes["image_flash"] >= sum(linked.values()) + sizes["model_flash"]


def _linked_text(obj, elf) -> dict:
    """Sizes of the object's functions (global and static) still in the linked image (arm-none-eabi-nm)."""
    import shutil
    import subprocess
    nm = shutil.which("arm-none-eabi-nm")
    if nm is None:
        pytest.skip("arm-none-eabi-nm not installed")
    in_obj = {}
    for line in subprocess.run([nm, "-S", "--defined-only", str(obj)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in ("T", "t"):
            in_obj[parts[3]] = int(parts[1], 16)
    in_elf = {line.split()[-1] for line in subprocess.run([nm, "--defined-only", str(elf)], capture_output=True,
                                                           text=True, check=True).stdout.splitlines()}
    return {name: size for name, size in in_obj.items() if name in in_elf}


def test_footprint_of_a_layer_block_model_links_its_stage_code(tmp_path):
    """A layer-block model's image is driven by es_next / es_step, so the stage code is linked and
    counted; negative control: the same model with the header's step marker removed is built as a
    push-only pass and links no es_step (a footprint that never steps would under-count flash)."""
    from edgeseq.export.c_arm import TARGETS, footprint, missing_tools
    from edgeseq.export.c_harness import write_c_for
    from edgeseq.forms.layer_blocks import _example_model
    missing = missing_tools(run=False)
    if missing:
        pytest.skip(missing)
    model = _example_model()
    write_c_for(model, tmp_path / "m", "lb")
    target = TARGETS["cortex-m4f"]
    stepped = footprint(tmp_path / "m", target, tmp_path / "stepped")
    arrays = [a for s in model.stages for a in (s.W, s.b, s.V, s.c, *(i.U for i in s.injections)) if a is not None]
    assert stepped["model_flash"] >= 4 * sum(a.size for a in arrays)
    header = tmp_path / "m" / "edgeseq_model.h"
    text = header.read_text()
    assert "#define lb_MACS_PER_STEP_MAX " in text
    header.write_text("\n".join(ln for ln in text.splitlines() if "_MACS_PER_STEP_MAX " not in ln) + "\n")
    pushed = footprint(tmp_path / "m", target, tmp_path / "pushed")

    def symbols(build):
        out = subprocess.run(["arm-none-eabi-nm", str(tmp_path / build / "firmware.elf")], capture_output=True,
                             text=True, check=True).stdout
        return {ln.split()[-1] for ln in out.splitlines()}
    assert "es_step" in symbols("stepped") and "es_step" not in symbols("pushed")
    assert stepped["image_flash"] > pushed["image_flash"]
