"""`edgeseq bundle`: the drop-in firmware library folder, built the way its consumers build it.

* host CMake: a consumer project that does ``add_subdirectory(bundle)`` and links the example; its
  per-stage output is compared with the Python runtime (onnxruntime) on the same row;
* arm-none-eabi-gcc through CMake for Cortex-M4F (mps2-an386) and Cortex-M0 (microbit), run under
  qemu-system-arm with semihosting (the qemu start-up file and linker script come from the test side);
* PlatformIO and Arduino layouts: every ``.c`` under the declared source folder compiled with the
  declared include paths and flags (the tools themselves cannot fetch toolchains here);
* an int16 export: host CMake build compared bit for bit with the Python simulation of the int16 C;
* trust: a tampered export is refused, a non-empty OUT is refused without --force, --force replaces
  only an earlier bundle.
Each tool-dependent test skips with the reason when its tool is missing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from edgeseq import AnytimeClassifier, AnytimeRegressor
from edgeseq.cli import main
from edgeseq.errors import ExportError, IntegrityError
from edgeseq.export.c_arm import CORTEX_M0, TARGETS, missing_tools, qemu_dir, run_qemu
from edgeseq.export.firmware_bundle import example_row, quantized_row, sequence_columns, write_firmware_bundle
from edgeseq.export.writer import export_model
from edgeseq.runtime import ExportedModel

STRICT = "-std=c99 -Wall -Wextra -Werror -pedantic -Wdouble-promotion -Wconversion"
GROUPS = [[0, 1], [2], [3, 4]]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 5)) * [1.0, 2.0, 0.5, 1.0, 3.0] + [0.0, 1.0, -1.0, 2.0, 0.0]
    return X, X[:, 0] + 0.5 * X[:, 2] - 0.2 * X[:, 4]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, data):
    """(export dir, bundle dir, fitted estimator) for a float classifier, a float regressor, an int16 classifier."""
    X, t = data
    root = tmp_path_factory.mktemp("fw")
    clf = AnytimeClassifier(groups=GROUPS, costs=[1.0, 2.0, 3.0]).fit(X, (t > 0.3).astype(int))
    reg = AnytimeRegressor(groups=GROUPS, costs=[1.0, 2.0, 3.0]).fit(X, t)
    out = {}
    for name, est, kw in (("clf", clf, {}), ("reg", reg, {}),
                          ("clf16", clf, {"c_dtype": "int16", "calibration": (X, (t > 0.3).astype(int))})):
        export_model(est.fitted_sequence_, root / f"{name}_export", c_prefix=f"fw_{name}", **kw)
        write_firmware_bundle(root / f"{name}_export", root / f"{name}_bundle")
        out[name] = (root / f"{name}_export", root / f"{name}_bundle", est)
    # tree stages: stage 2 needs groups 1 and 2, so pushing group 1 commits no new stage
    from tree_models import random_tree_model
    trees = random_tree_model(np.random.default_rng(5), stage_groups=((0,), (1, 2)))
    export_model(trees, root / "tree_export", c_prefix="fw_tree")
    write_firmware_bundle(root / "tree_export", root / "tree_bundle")
    out["tree"] = (root / "tree_export", root / "tree_bundle", trees)
    export_model(trees, root / "tree_code_export", c_prefix="fw_tree_code", c_trees="code")  # es_init_code
    write_firmware_bundle(root / "tree_code_export", root / "tree_code_bundle")
    out["tree_code"] = (root / "tree_code_export", root / "tree_code_bundle", trees)
    return out


def _stages(text: str) -> list[tuple[int, int, list[float]]]:
    lines = text.strip().splitlines()
    assert lines and lines[-1] == "done", text[-500:]
    rows = []
    for line in lines[:-1]:
        parts = line.split()
        assert parts[0] == "stage" and parts[2] == "label" and parts[4] == "pred", line
        rows.append((int(parts[1]), int(parts[3]), [float(v) for v in parts[5:]]))
    return rows


def _python_stages(export_dir, manifest) -> list[tuple[int, list[float]]]:
    """Per stage the Python runtime's (label index or -1, prediction) on the example row."""
    model = ExportedModel(export_dir)
    raw = example_row(manifest)
    feats = {g["name"]: raw[g["columns"]][None, :] for g in manifest["groups"]}
    out = []
    for j in range(model.n_prefixes):
        p = model.predict(feats, prefix=j)
        if manifest["task"] == "regression":
            out.append((-1, np.atleast_1d(np.asarray(p, dtype=np.float64).ravel()).tolist()))
        else:
            out.append((int(p.label_index[0]), p.proba[0].astype(np.float64).tolist()))
    return out


def _compare_float(text, export_dir):
    manifest = json.loads((export_dir / "manifest.json").read_text())
    c = _stages(text)
    py = _python_stages(export_dir, manifest)
    stages = [s for s, _, _ in c]
    assert len(stages) == len(manifest["groups"]) + 1  # stage 0, then one line per group pushed
    if manifest.get("stage_kind") == "trees":  # a push commits its stage once the stage has all its groups
        assert stages[0] == 0 and stages[-1] == len(py) - 1 and stages == sorted(stages)
    else:
        assert stages == list(range(len(py)))
    for stage, label, pred in c:
        py_label, py_pred = py[stage]
        np.testing.assert_allclose(pred, py_pred, rtol=1e-5, atol=1e-6, err_msg=f"stage {stage}")
        if manifest["task"] != "regression":
            assert label == py_label, stage
    return c


def _consumer(tmp, bundle, prefix, *, arm=None) -> str:
    """A consumer project: add_subdirectory(bundle) + the example linked against the library."""
    tmp.mkdir(parents=True, exist_ok=True)
    qdir = qemu_dir()
    extra = ""
    if arm is not None:
        defines = " ".join(arm.defines)
        extra = (f'target_sources(example PRIVATE "{qdir}/startup.c")\n'
                 f'target_include_directories(example PRIVATE "{qdir}")\n'
                 + (f"target_compile_definitions(example PRIVATE {defines})\n" if defines else "")
                 + f'target_link_options(example PRIVATE -T "{qdir / arm.linker_script}" --specs=rdimon.specs)\n')
    (tmp / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(consumer C)\n"
        f'add_subdirectory("{bundle}" bundle)\n'
        f'add_executable(example "{bundle}/examples/main.c")\n'
        f"target_link_libraries(example PRIVATE {prefix})\n" + extra)
    return str(tmp)


def _cmake_build(src, build, cache=()):
    for cmd in (["cmake", "-S", src, "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", *cache],
                ["cmake", "--build", str(build)]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])


def _host_cc():
    return shutil.which("gcc") or shutil.which("cc")


needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None or _host_cc() is None,
                                 reason="cmake and a host C compiler are needed")


def test_bundle_layout_checksums_and_model_card(bundles):
    export_dir, bundle, _ = bundles["clf"]
    index = json.loads((bundle / "bundle.json").read_text())
    on_disk = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())
    assert sorted([*index["files"], "bundle.json"]) == on_disk
    for rel, digest in index["files"].items():
        assert hashlib.sha256((bundle / rel).read_bytes()).hexdigest() == digest, rel
    # only the float runtime, and the generated model byte for byte as the export has it
    src = sorted(p.name for p in (bundle / "src").iterdir())
    assert "edgeseq_runtime_i16.c" not in src and "edgeseq_runtime.c" in src
    assert (bundle / "src/edgeseq_model.c").read_bytes() == (export_dir / "edgeseq_model.c").read_bytes()
    src16 = sorted(p.name for p in (bundles["clf16"][1] / "src").iterdir())
    assert "edgeseq_runtime.c" not in src16 and "edgeseq_runtime_i16.c" in src16
    readme = (bundle / "README.md").read_text()
    m = json.loads((export_dir / "manifest.json").read_text())
    for g in m["groups"]:
        assert f"| {g['name']} |" in readme
    assert readme.count("\n| ") >= len(m["prefixes"]) + len(m["groups"])
    for rel, digest in index["files"].items():
        if rel != "README.md":
            assert f"| {rel} | `{digest}` |" in readme
    if index["sizes"] is None:
        assert "Not measured" in readme
    else:  # the card's figures are the measured ones
        total = sum(r["text"] + r["data"] for r in index["sizes"]["objects"].values())
        assert total == index["sizes"]["flash_bytes"] > 0 and f"Flash total: {total} bytes." in readme
        ram = index["sizes"]["state_ram_bytes"]  # sizeof(es_state) + 4 * WORK_FLOATS: more than the work alone
        assert f"State RAM on this core: {ram} bytes" in readme and ram > 4 * (5 + 1 + 2 * 2)
    assert json.loads((bundle / "library.json").read_text())["build"]["srcDir"] == "src"
    assert "name=fw_clf" in (bundle / "library.properties").read_text()
    assert "cmake: zephyr" in (bundle / "zephyr/module.yml").read_text()


def test_bundle_refuses_tampered_export_and_foreign_out(bundles, tmp_path):
    export_dir, bundle, _ = bundles["reg"]
    bad = tmp_path / "bad"
    shutil.copytree(export_dir, bad)
    src = bad / "edgeseq_model.c"
    src.write_text(src.read_text() + "\n/* injected */\n")
    with pytest.raises(IntegrityError, match="edgeseq_model.c"):
        write_firmware_bundle(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="not empty"):
        write_firmware_bundle(export_dir, foreign)
    with pytest.raises(ExportError, match="earlier edgeseq bundle"):
        write_firmware_bundle(export_dir, foreign, force=True)
    assert (foreign / "keep.txt").read_text() == "mine"
    again = tmp_path / "again"
    shutil.copytree(bundle, again)
    write_firmware_bundle(bundles["clf"][0], again, force=True, measure=False)  # an earlier bundle: replaced
    assert "fw_clf" in (again / "CMakeLists.txt").read_text()
    assert "fw_reg" not in (again / "CMakeLists.txt").read_text()


def test_cli_bundle(bundles, tmp_path):
    export_dir = bundles["reg"][0]
    res = CliRunner().invoke(main, ["bundle", str(export_dir), str(tmp_path / "b"), "--no-measure"])
    assert res.exit_code == 0, res.output
    assert "float32 library 'fw_reg'" in res.output and "flash not measured" in res.output
    res = CliRunner().invoke(main, ["bundle", str(export_dir), str(tmp_path / "b")])
    assert res.exit_code != 0 and "not empty" in res.output and "Traceback" not in res.output


@needs_cmake
@pytest.mark.parametrize("name", ["clf", "reg", "tree", "tree_code"])
def test_host_cmake_add_subdirectory_matches_python_runtime(bundles, tmp_path, name):
    export_dir, bundle, _ = bundles[name]
    src = _consumer(tmp_path / "consumer", bundle, f"fw_{name}")
    _cmake_build(src, tmp_path / "build", [f"-DCMAKE_C_FLAGS={STRICT}", f"-DCMAKE_C_COMPILER={_host_cc()}"])
    r = subprocess.run([str(tmp_path / "build" / "example")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout
    stages = _compare_float(r.stdout, export_dir)
    assert len({tuple(p) for _, _, p in stages}) > 1  # the row moves the prediction: not a vacuous match
    if name.startswith("tree"):  # group 1 alone completes no stage: the committed stage stays 1 after its push
        assert [s for s, _, _ in stages] == [0, 1, 1, 2]


def test_python_comparison_can_fail(bundles):
    """Negative control: a C output off by 1e-3 at one stage is caught."""
    export_dir = bundles["reg"][0]
    m = json.loads((export_dir / "manifest.json").read_text())
    py = _python_stages(export_dir, m)
    lines = [f"stage {j} label -1 pred " + " ".join(f"{v + (1e-3 if j == 2 else 0):.9g}" for v in p)
             for j, (_, p) in enumerate(py)]
    with pytest.raises(AssertionError):
        _compare_float("\n".join(lines + ["done"]), export_dir)


def _arm_cache(arm):
    """CMake cache entries of a bare-metal arm-none-eabi-gcc build for `arm` (what a toolchain file sets)."""
    flags = " ".join([*arm.cpu_flags, "-Os", STRICT])
    return ["-DCMAKE_SYSTEM_NAME=Generic", "-DCMAKE_C_COMPILER=arm-none-eabi-gcc",
            "-DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY", f"-DCMAKE_C_FLAGS={flags}"]


ARM_CASES = {"cortex-m4f": TARGETS["cortex-m4f"], "cortex-m0": CORTEX_M0}


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is needed")
@pytest.mark.skipif(missing_tools() is not None, reason=str(missing_tools()))
@pytest.mark.parametrize("target", sorted(ARM_CASES))
def test_arm_cmake_build_runs_under_qemu(bundles, tmp_path, target):
    arm = ARM_CASES[target]
    export_dir, bundle, _ = bundles["clf"]
    src = _consumer(tmp_path / "consumer", bundle, "fw_clf", arm=arm)
    _cmake_build(src, tmp_path / "build", _arm_cache(arm))
    proc = run_qemu(tmp_path / "build" / "example", arm)
    _compare_float(proc.stdout, export_dir)


def _compile_layout(tmp_path, bundle, src_dir, include_dirs, flags, libs=("-lm",), cc="gcc"):
    """Compile every .c under src_dir (recursively, as PlatformIO and Arduino do), then link the example."""
    tmp_path.mkdir()
    objs = []
    for k, c in enumerate(sorted((bundle / src_dir).rglob("*.c"))):
        obj = tmp_path / f"{k}_{c.stem}.o"
        cmd = [cc, *STRICT.split(), *flags, *(f"-I{bundle / d}" for d in include_dirs), "-c", str(c), "-o", str(obj)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-2000:]
        objs.append(str(obj))
    exe = tmp_path / "example"
    r = subprocess.run([cc, *STRICT.split(), *flags, *(f"-I{bundle / d}" for d in include_dirs),
                        str(bundle / "examples/main.c"), *objs, "-o", str(exe), *libs],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(r.stderr[-2000:])
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=30).stdout


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_platformio_and_arduino_layouts_build(bundles, tmp_path, cc):
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed")
    export_dir, bundle, _ = bundles["reg"]
    lib = json.loads((bundle / "library.json").read_text())["build"]
    out = _compile_layout(tmp_path / "pio", bundle, lib["srcDir"], [lib["includeDir"]],
                          [f for f in lib["flags"] if f != "-std=c99"], cc=cc)
    _compare_float(out, export_dir)
    props = dict(line.split("=", 1) for line in (bundle / "library.properties").read_text().splitlines())
    assert props["includes"] == "edgeseq_model.h" and (bundle / "src" / props["includes"]).is_file()
    _compare_float(_compile_layout(tmp_path / "arduino", bundle, "src", ["src"], [], cc=cc), export_dir)
    # negative control: a layout that lost a runtime source does not link
    broken = tmp_path / "broken"
    shutil.copytree(bundle, broken)
    (broken / "src" / "edgeseq_runtime.c").unlink()
    with pytest.raises(AssertionError, match="es_init|undefined"):
        _compile_layout(tmp_path / "b", broken, "src", ["src"], [], cc=cc)


def _int16_reason(where):
    if shutil.which("cmake") is None or _host_cc() is None:
        return "cmake and a host C compiler are needed"
    return missing_tools() if where == "cortex-m0" else None


@pytest.mark.parametrize("where", ["host", "cortex-m0"])
def test_int16_bundle_matches_the_python_simulation(bundles, tmp_path, where):
    """The int16 library on the host and on an emulated Cortex-M0 (no FPU), bit for bit against the
    Python simulation of the integer runtime at every stage."""
    from edgeseq.export.kinds.affine.quantize import quantize_from_manifest, simulate

    if _int16_reason(where):
        pytest.skip(_int16_reason(where))
    export_dir, bundle, est = bundles["clf16"]
    m = json.loads((export_dir / "manifest.json").read_text())
    arm = CORTEX_M0 if where == "cortex-m0" else None
    src = _consumer(tmp_path / "consumer", bundle, "fw_clf16", arm=arm)
    if arm is None:
        _cmake_build(src, tmp_path / "build", [f"-DCMAKE_C_FLAGS={STRICT}", f"-DCMAKE_C_COMPILER={_host_cc()}"])
        text = subprocess.run([str(tmp_path / "build" / "example")], capture_output=True, text=True,
                              timeout=30).stdout
    else:
        _cmake_build(src, tmp_path / "build", _arm_cache(arm))
        text = run_qemu(tmp_path / "build" / "example", arm).stdout
    c = _stages(text)
    qm = quantize_from_manifest(est.fitted_sequence_, m["c"]["int16"])
    xq = quantized_row(m, example_row(m))[None, :]
    assert [s for s, _, _ in c] == list(range(len(m["prefixes"])))
    for stage, label, pred in c:
        z, lab = simulate(qm, xq, stage)
        assert pred == z[0].tolist() and label == int(lab[0]), stage
    assert len({tuple(p) for _, _, p in c}) > 1
    assert sequence_columns(m) == [f["column"] for f in m["c"]["int16"]["features"]]


@pytest.mark.skipif(missing_tools(run=False) is not None, reason=str(missing_tools(run=False)))
def test_a_crafted_directive_is_never_compiled(bundles, tmp_path):
    """An export re-signed after an #include of a host file was added: it verifies (its checksums are
    consistent), is bundled as is, but the size measurement refuses to compile it."""
    from edgeseq.format import dump_manifest, manifest_checksum, sha256_file

    export_dir, _, _ = bundles["reg"]
    crafted = tmp_path / "crafted"
    shutil.copytree(export_dir, crafted)
    src = crafted / "edgeseq_model.c"
    src.write_text('#include "/etc/hostname"\n' + src.read_text())
    m = json.loads((crafted / "manifest.json").read_text())
    for e in m["files"]:
        e["sha256"] = sha256_file(crafted / e["file"])
    m.pop("manifest_sha256")
    m["manifest_sha256"] = manifest_checksum(m)
    (crafted / "manifest.json").write_bytes(dump_manifest(m))
    index = write_firmware_bundle(crafted, tmp_path / "b")
    assert index["sizes"] is None and "Not measured" in (tmp_path / "b" / "README.md").read_text()
    # control: the untouched export is measured by the same call
    assert write_firmware_bundle(export_dir, tmp_path / "c")["sizes"]["flash_bytes"] > 0


def _zephyr_consumer(tmp, bundle, prefix, cmake_dir: str, config: bool) -> str:
    """A plain CMake project standing in for Zephyr's build: it defines the three Zephyr CMake
    functions the module's zephyr/CMakeLists.txt calls (as Zephyr's extensions do: one library per
    zephyr_library() scope, include directories on the shared zephyr_interface target, relative paths
    taken from the module's folder), sets the module's Kconfig symbol when `config`, adds the folder
    module.yml names and links the example against what it defined."""
    tmp.mkdir(parents=True, exist_ok=True)
    sym = f"CONFIG_EDGESEQ_{prefix.upper()}"
    (tmp / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(zephyr_stand_in C)\n"
        "add_library(zephyr_interface INTERFACE)\n"
        "macro(zephyr_library)\n  set(ZEPHYR_CURRENT_LIBRARY module_lib)\n  add_library(module_lib STATIC)\n"
        "  target_link_libraries(module_lib PUBLIC zephyr_interface)\nendmacro()\n"
        "function(zephyr_library_sources)\n  target_sources(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})\nendfunction()\n"
        "function(zephyr_include_directories)\n  foreach(d ${ARGN})\n"
        "    get_filename_component(a ${d} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})\n"
        "    target_include_directories(zephyr_interface INTERFACE ${a})\n  endforeach()\nendfunction()\n"
        + (f"set({sym} y)\n" if config else "")
        + f'add_subdirectory("{bundle}/{cmake_dir}" zephyr_module)\n'
        f'add_executable(example "{bundle}/examples/main.c")\n'
        "target_link_libraries(example PRIVATE module_lib zephyr_interface m)\n")
    return str(tmp)


@needs_cmake
@pytest.mark.parametrize("name", ["clf", "tree"])
def test_zephyr_module_builds_with_plain_cmake_and_matches_python(bundles, tmp_path, name):
    export_dir, bundle, _ = bundles[name]
    module = dict(line.split(":", 1) for line in (bundle / "zephyr/module.yml").read_text().splitlines()
                  if line.startswith("  "))
    cmake_dir, kconfig = module["  cmake"].strip(), module["  kconfig"].strip()
    assert (bundle / cmake_dir / "CMakeLists.txt").is_file() and (bundle / kconfig).is_file()
    assert f"config EDGESEQ_FW_{name.upper()}" in (bundle / kconfig).read_text()
    src = _zephyr_consumer(tmp_path / "zephyr", bundle, f"fw_{name}", cmake_dir, config=True)
    _cmake_build(src, tmp_path / "build", [f"-DCMAKE_C_FLAGS={STRICT}", f"-DCMAKE_C_COMPILER={_host_cc()}"])
    r = subprocess.run([str(tmp_path / "build" / "example")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout
    _compare_float(r.stdout, export_dir)
    # negative control: without the module's Kconfig symbol the module defines no library to link
    src = _zephyr_consumer(tmp_path / "off", bundle, f"fw_{name}", cmake_dir, config=False)
    with pytest.raises(AssertionError):
        _cmake_build(src, tmp_path / "build_off", [f"-DCMAKE_C_COMPILER={_host_cc()}"])
