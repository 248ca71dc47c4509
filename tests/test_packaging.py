"""A NON-editable install works (docs/design.md, "The pipeline": one installable package).

The wheel is built from a copy of the working tree (never in place: setuptools' stale `build/lib`
would leak removed files into it), its file list is checked against the source tree, and it is
installed into a fresh venv with no edgeseq in it. Third-party dependencies come from the running
interpreter's site-packages through a `.pth` file: paths listed in a `.pth` are added to sys.path
but the `.pth` files *inside* them are not executed, so the editable edgeseq finder of the
development environment stays out. Everything then runs from a directory outside the checkout:
imports resolve inside the new venv, `import export` finds nothing, the console script runs, and a
fitted model is exported and verified with the schema and C sources read from the installed package.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# source directory -> where its files land in the wheel (pyproject.toml [tool.setuptools] package-dir)
MAPPED = {"edgeseq": "edgeseq", "export": "edgeseq/export", "runtime_c": "edgeseq/runtime_c"}
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__",
                                     ".pytest_cache", ".hypothesis", "out", "*.o", "*.so", "results")
# pip could not obtain the build backend (offline, no local index): a reason to skip, not a defect
_NO_BACKEND = re.compile(r"Could not find a version that satisfies the requirement (setuptools|wheel)|"
                         r"No matching distribution found for (setuptools|wheel)|"
                         r"(Failed to establish a new connection|Temporary failure in name resolution)")


def _clean_env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(cmd, *, cwd, timeout=120, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env or _clean_env(), capture_output=True,
                          text=True, timeout=timeout)


def _can_build_in_place() -> bool:
    """setuptools>=68 (pyproject's build requirement) and `wheel` already here: no build env needed."""
    try:
        import setuptools
    except ImportError:
        return False
    major = int(setuptools.__version__.split(".")[0])
    return importlib.util.find_spec("wheel") is not None and major >= 68


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("pkg")
    src = work / "src"
    shutil.copytree(ROOT, src, ignore=COPY_IGNORE)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work / "dist", src]
    if _can_build_in_place():
        cmd.insert(4, "--no-build-isolation")
    env = _clean_env() | {"PIP_RETRIES": "0", "PIP_DEFAULT_TIMEOUT": "15", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        r = _run(cmd, cwd=work, timeout=240, env=env)
    except subprocess.TimeoutExpired:
        pytest.skip("building the wheel timed out (no reachable package index for the build backend?)")
    if r.returncode != 0 and _NO_BACKEND.search(r.stdout + r.stderr):
        pytest.skip("cannot build a wheel offline: pip found no setuptools>=68/wheel for the build "
                    "environment\n" + (r.stdout + r.stderr)[-1500:])
    assert r.returncode == 0, f"pip wheel failed:\n{r.stdout}\n{r.stderr}"
    wheels = list((work / "dist").glob("edgeseq-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _expected_files() -> set[str]:
    """Every file the installed package needs, as wheel paths, derived from the source tree."""
    out = set()
    for src_dir, dest in MAPPED.items():
        base = ROOT / src_dir
        for p in base.rglob("*.py"):
            rel = p.relative_to(base)
            if "__pycache__" in rel.parts or (src_dir == "edgeseq" and rel.parts[0] in ("export", "runtime_c")):
                continue
            if (p.parent / "__init__.py").exists():  # only files inside packages are installed
                out.add(f"{dest}/{rel.as_posix()}")
    patterns = {"edgeseq": ["schema/*.json", "extractors/data/*.json"],
                "runtime_c": ["*.c", "*.h", "Makefile", "tests/*.c", "tests/*.h", "examples/*.c",
                              "tests/qemu/*.c", "tests/qemu/*.h", "tests/qemu/*.ld"]}
    for src_dir, globs in patterns.items():
        for g in globs:
            found = list((ROOT / src_dir).glob(g))
            assert found, f"the source tree has no {src_dir}/{g}; update this test"
            out |= {f"{MAPPED[src_dir]}/{p.relative_to(ROOT / src_dir).as_posix()}" for p in found}
    return out


def test_wheel_file_list(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = _expected_files() - names
    assert not missing, f"the wheel lacks {sorted(missing)}; fix [tool.setuptools] in pyproject.toml"
    tops = {n.split("/")[0] for n in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"edgeseq"}, f"top-level entries besides edgeseq: {sorted(tops - dist_info)}"
    assert not [n for n in names if "__pycache__" in n or n.endswith((".o", ".so", ".pyc"))]
    for needed in ("edgeseq/schema/manifest.schema.json", "edgeseq/runtime_c/edgeseq_runtime.c",
                   "edgeseq/runtime_c/edgeseq_runtime.h", "edgeseq/runtime_c/tests/driver.c"):
        assert needed in names
    (info,) = dist_info
    entry_points = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert re.search(r"^edgeseq\s*=\s*edgeseq\.cli:main$", entry_points, re.M), entry_points
    assert re.search(r"^edgeseq-run\s*=\s*edgeseq\.device:main$", entry_points, re.M), entry_points


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh venv holding only the wheel; dependencies reach it through a .pth (see module doc)."""
    vdir = tmp_path_factory.mktemp("venv") / "v"
    r = _run([sys.executable, "-m", "venv", "--without-pip", vdir], cwd=vdir.parent)
    assert r.returncode == 0, r.stderr
    py = vdir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    r = _run([sys.executable, "-m", "pip", "--python", py, "install", "--no-deps", "--no-index", "-q",
              wheel], cwd=vdir.parent)
    assert r.returncode == 0, f"installing the wheel failed:\n{r.stdout}\n{r.stderr}"
    purelib = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   cwd=vdir.parent).stdout.strip()
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    deps = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    lines = list(dict.fromkeys([*here, *deps]))
    (Path(purelib) / "_edgeseq_test_deps.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return vdir


CHILD = textwrap.dedent("""
    import importlib.util, sys
    from importlib import resources
    from pathlib import Path

    venv, checkout = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    import edgeseq, edgeseq.cli, edgeseq.export, edgeseq.export.writer, edgeseq.runtime_c
    for mod in (edgeseq, edgeseq.cli, edgeseq.export, edgeseq.export.writer, edgeseq.runtime_c):
        f = Path(mod.__file__).resolve()
        assert venv in f.parents, f"{mod.__name__} imported from {f}, not from the venv"
    for name in ("export", "runtime_c"):
        assert importlib.util.find_spec(name) is None, f"a top-level {name!r} module is importable"
    assert not [m for m in sys.modules if m.startswith("__editable__")], "the editable finder is active"
    assert not [p for p in sys.path if p and Path(p).resolve() == checkout], "the checkout is on sys.path"
    schema = Path(str(resources.files("edgeseq.schema").joinpath("manifest.schema.json")))
    assert venv in schema.resolve().parents and schema.is_file(), schema
    assert (edgeseq.runtime_c.source_dir() / "tests" / "driver.c").is_file()

    import numpy as np
    from edgeseq import AnytimeRegressor
    from edgeseq.format import read_verified
    from edgeseq.export.writer import export_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 5))
    y = X @ np.array([1.0, 2.0, 0.0, -1.0, 0.5]) + 0.1 * rng.normal(size=80)
    est = AnytimeRegressor(groups=[[0, 1], [2], [3, 4]], costs=[1.0, 2.0, 3.0],
                           group_names=["a", "b", "c"]).fit(X, y)
    export_model(est.fitted_sequence_, "out")
    m = read_verified("out")
    assert [p["index"] for p in m["prefixes"]] == [0, 1, 2, 3], m["prefixes"]
    print("installed-ok", edgeseq.__file__)
""")


def _bin(vdir: Path, name: str) -> Path:
    return vdir / ("Scripts" if os.name == "nt" else "bin") / name


def test_installed_package_runs_outside_the_checkout(venv, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = _run([_bin(venv, "python"), "-c", CHILD, venv, ROOT], cwd=elsewhere)
    assert r.returncode == 0 and "installed-ok" in r.stdout, f"{r.stdout}\n{r.stderr}"

    script = _bin(venv, "edgeseq")
    assert script.is_file(), "the console script was not installed"
    r = _run([script, "--help"], cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    assert "train" in r.stdout and "export" in r.stdout

    # the installed CLI verifies the export: numpy vs onnxruntime, and the C runtime compiled from the
    # sources inside the venv (runtime_c/*.c and tests/driver.c) when a compiler exists
    cmd = [script, "verify", elsewhere / "out"]
    have_cc = any(shutil.which(c) for c in (os.environ.get("CC"), "gcc", "cc", "clang") if c)
    r = _run(cmd + (["--require-c"] if have_cc else ["--no-c"]), cwd=elsewhere)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"


RUNTIME_CHILD = textwrap.dedent("""
    import importlib.util, sys
    import numpy as np
    for absent in ("sklearn", "scipy", "onnx", "skl2onnx", "threadpoolctl", "click"):
        assert importlib.util.find_spec(absent) is None, f"{absent} is installed in the runtime-only venv"
    from edgeseq.runtime import AnytimeSession
    out, X = sys.argv[1], np.load(sys.argv[2])
    with AnytimeSession(out) as s:
        feats = {"a": X[:, :2], "b": X[:, 2:3], "c": X[:, 3:]}
        y = s.predict(feats)
        r = s.run({k: (lambda row, v=v: v[0]) for k, v in feats.items()}, budget=3.0)
        assert r.prefix == 2 and r.stopped_by == "budget", r
    np.save(sys.argv[3], y)
    try:
        import edgeseq.train.linear.regressor
    except ImportError as exc:
        print("trainer unavailable:", exc)
    print("runtime-only-ok")
""")


def test_runtime_only_install(wheel, tmp_path):
    """A device install: numpy, onnxruntime and jsonschema (what the format reader needs) + the wheel
    without its dependencies, in a venv that has nothing else, runs AnytimeSession on an export."""
    import numpy as np

    from edgeseq import AnytimeRegressor, export_model

    vdir = tmp_path / "device"
    assert _run([sys.executable, "-m", "venv", vdir], cwd=tmp_path, timeout=240).returncode == 0
    pip = [_bin(vdir, "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    env = _clean_env() | {"PIP_RETRIES": "0", "PIP_DEFAULT_TIMEOUT": "15"}
    r = _run(pip + ["-c", ROOT / "constraints.txt", "numpy", "onnxruntime", "jsonschema"], cwd=tmp_path,
             timeout=400, env=env)
    if r.returncode != 0 and _NO_BACKEND.search(r.stdout + r.stderr.replace("setuptools", "numpy")):
        pytest.skip("no package index reachable for numpy/onnxruntime/jsonschema")
    assert r.returncode == 0, r.stdout + r.stderr
    r = _run(pip + ["--no-deps", wheel], cwd=tmp_path, timeout=240, env=env)
    assert r.returncode == 0, r.stdout + r.stderr

    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 5))
    est = AnytimeRegressor(groups=[[0, 1], [2], [3, 4]], costs=[1.0, 2.0, 3.0], group_names=["a", "b", "c"])
    Xt = rng.normal(size=(80, 5))  # a signal that makes the order a, b, c (the budget checks below rely on it)
    est.fit(Xt, 2 * Xt[:, 0] + Xt[:, 2] + 0.5 * Xt[:, 3] + 0.1 * rng.normal(size=80))
    assert list(est.sequence_) == [0, 1, 2]
    export_model(est.fitted_sequence_, tmp_path / "out")
    np.save(tmp_path / "X.npy", X.astype(np.float32))
    r = _run([_bin(vdir, "python"), "-c", RUNTIME_CHILD, tmp_path / "out", tmp_path / "X.npy",
              tmp_path / "y.npy"], cwd=tmp_path, timeout=240)
    assert r.returncode == 0 and "runtime-only-ok" in r.stdout, r.stdout + r.stderr
    assert "trainer unavailable" in r.stdout  # negative control: the venv really lacks the trainer
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), est.predict(X), rtol=1e-5, atol=1e-5)

    # the README's device command: `edgeseq-run` (no click here), and `python -m edgeseq.device`
    header = "a0,a1,b,c0,c1"
    np.savetxt(tmp_path / "rows.csv", X, delimiter=",", header=header, comments="")
    r = _run([_bin(vdir, "edgeseq-run"), tmp_path / "out", tmp_path / "rows.csv", "--budget", "3",
              "-o", tmp_path / "preds.csv"], cwd=tmp_path, timeout=240)
    assert r.returncode == 0 and "wrote 6 predictions" in r.stderr, r.stdout + r.stderr
    got = np.genfromtxt(tmp_path / "preds.csv", delimiter=",", names=True)
    assert got["prefix"].tolist() == [2] * 6  # groups a and b cost 3
    np.testing.assert_allclose(got["y"], est.predict(X, prefix=2), rtol=1e-5, atol=1e-5)
    r = _run([_bin(vdir, "python"), "-m", "edgeseq.device", tmp_path / "missing", tmp_path / "rows.csv"],
             cwd=tmp_path, timeout=240)
    assert r.returncode == 1 and r.stderr.startswith("Error: ") and "Traceback" not in r.stderr, r.stderr
    # negative control: the full command line does need click, which this venv lacks
    r = _run([_bin(vdir, "edgeseq"), "--help"], cwd=tmp_path, timeout=240)
    assert r.returncode != 0 and "click" in r.stderr, r.stdout + r.stderr


def test_checkout_root_imports_with_a_regular_install(venv):
    """From the repository root the source folder `edgeseq/` shadows the installed package; it has no
    `export/` inside, so `edgeseq.export` must still resolve (to the checkout's top-level folder)."""
    code = ("import edgeseq, edgeseq.export, edgeseq.runtime_c, edgeseq.export.writer; "
            "print(edgeseq.__file__); print(edgeseq.export.__file__); print(edgeseq.runtime_c.__file__)")
    r = _run([_bin(venv, "python"), "-c", code], cwd=ROOT)
    assert r.returncode == 0, r.stderr
    pkg, export, runtime_c = (Path(line).resolve() for line in r.stdout.split())
    assert pkg == ROOT / "edgeseq" / "__init__.py"  # the checkout's source folder, as Python resolves it
    assert export == ROOT / "export" / "__init__.py" and runtime_c == ROOT / "runtime_c" / "__init__.py"
