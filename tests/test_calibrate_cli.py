"""`edgeseq calibrate` on hostile input: every failure is one edgeseq error line (no traceback), nothing
half-written; bank imports resolve against the working directory / the bank file's directory;
`--bank NAME SAMPLES`; variable widths (the CSV of features: tests/test_calibrate.py)."""

import numpy as np
import pytest
from click.testing import CliRunner

from edgeseq.cli import main
from edgeseq.extractors.calibrate import read_calibration

GOOD = "import numpy as np\nBANK = {'total': lambda x: np.array([x.sum()]), 'square': lambda x: (x ** 2).ravel()}\n"


def _run(args):
    return CliRunner().invoke(main, ["calibrate", *map(str, args), "--repeats", "1", "--warmup", "0", "--quiet"])


def _refused(res, *needles, kind="InputError"):
    """A clean edgeseq error: click exited (SystemExit, not an escaped exception), non-zero, one line."""
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code != 0
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {kind}: "), res.output
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.fixture
def samples(tmp_path):
    np.save(tmp_path / "s.npy", np.arange(24.0).reshape(6, 2, 2))
    return tmp_path / "s.npy"


@pytest.mark.parametrize("fname, text, needles", [
    ("syntaxbank.py", "def broken(:\n", ["syntaxbank.py", "SyntaxError"]),
    ("raisebank.py", "raise RuntimeError('boom at import')\n", ["raisebank.py", "RuntimeError", "boom at import"]),
    ("bank.txt", GOOD, ["bank.txt", "must be a Python source file"]),
    ("factorybank.py", "def BANK():\n    raise KeyError('no config')\n", ["factory", "KeyError", "no config"]),
    ("extbank.py", "def f(x):\n    raise ValueError('bad pixel')\nBANK = {'feat': f}\n",
     ["extractor 'feat'", "ValueError", "bad pixel", "item 0"]),
])
def test_a_broken_bank_file_is_one_error_line_naming_it(tmp_path, samples, fname, text, needles):
    (tmp_path / fname).write_text(text)
    out = tmp_path / "g.json"
    res = _run([f"{tmp_path / fname}:BANK", samples, "-o", out])
    _refused(res, *needles)
    assert not out.exists()


def test_a_dotted_module_raising_at_import_is_one_error_line(tmp_path, samples, monkeypatch):
    (tmp_path / "calraise_mod.py").write_text("x = 1 / 0\n")
    monkeypatch.chdir(tmp_path)
    _refused(_run(["calraise_mod:BANK", samples, "-o", tmp_path / "g.json"]),
             "calraise_mod", "ZeroDivisionError")


@pytest.mark.parametrize("which", ["output", "features"])
def test_unwritable_outputs_are_one_error_line_and_leave_nothing(tmp_path, samples, which):
    (tmp_path / "bank.py").write_text(GOOD)
    (tmp_path / "afile").write_text("a file, so nothing can be created below it")
    bad = tmp_path / "afile" / ("g.json" if which == "output" else "X.npy")
    out = bad if which == "output" else tmp_path / "g.json"
    feats = bad if which == "features" else tmp_path / "X.npy"
    res = _run([f"{tmp_path / 'bank.py'}:BANK", samples, "-o", out, "--features-out", feats])
    _refused(res, str(bad), kind="OutputError")
    assert not (tmp_path / "g.json").exists() and not (tmp_path / "X.npy").exists()


@pytest.mark.parametrize("suffix", [".csv", ".npy"])
def test_failed_groups_write_keeps_an_existing_features_file(tmp_path, samples, suffix):
    """Issue 11 item 7: -o unwritable with --features-out X: an existing X is neither overwritten
    nor deleted, and no temporary is left beside it."""
    (tmp_path / "bank.py").write_text(GOOD)
    (tmp_path / "afile").write_text("a file, so nothing can be created below it")
    feats = tmp_path / f"X{suffix}"
    feats.write_bytes(b"earlier features")
    res = _run([f"{tmp_path / 'bank.py'}:BANK", samples, "-o", tmp_path / "afile" / "g.json",
                "--features-out", feats])
    _refused(res, "g.json", kind="OutputError")
    assert feats.read_bytes() == b"earlier features"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_a_non_python_file_in_the_working_directory_is_named(tmp_path, samples, monkeypatch):
    (tmp_path / "notbank.txt").write_text(GOOD)
    monkeypatch.chdir(tmp_path)  # a bare file name, no directory part
    _refused(_run(["notbank.txt:BANK", samples, "-o", tmp_path / "g.json"]), "notbank.txt", ".py")


def test_features_out_needs_a_known_suffix(tmp_path, samples):
    (tmp_path / "bank.py").write_text(GOOD)
    res = _run([f"{tmp_path / 'bank.py'}:BANK", samples, "-o", tmp_path / "g.json",
                "--features-out", tmp_path / "X.bin"])
    _refused(res, "X.bin", ".npy or .csv")


def test_dotted_bank_resolves_against_the_working_directory(tmp_path, samples, monkeypatch):
    """The README's `edgeseq calibrate mypkg.features:BANK` from a checkout, mypkg not installed."""
    pkg = tmp_path / "proj" / "calpkg_cwd"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "features.py").write_text(GOOD)
    monkeypatch.chdir(tmp_path / "proj")
    res = _run(["calpkg_cwd.features:BANK", samples, "-o", tmp_path / "g.json"])
    assert res.exit_code == 0, res.output
    assert [g["name"] for g in read_calibration(tmp_path / "g.json")["groups"]] == ["total", "square"]


def test_bank_file_can_import_a_sibling_module(tmp_path, samples, monkeypatch):
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    (sub / "calhelper_sib.py").write_text("import numpy as np\ndef total(x):\n    return np.array([x.sum()])\n")
    (sub / "bank.py").write_text("from calhelper_sib import total\nBANK = {'total': total}\n")
    monkeypatch.chdir(tmp_path)  # not the file's directory: only the file's own directory makes this work
    res = _run([f"{sub / 'bank.py'}:BANK", samples, "-o", tmp_path / "g.json"])
    assert res.exit_code == 0, res.output
    assert read_calibration(tmp_path / "g.json")["groups"][0]["name"] == "total"


def test_builtin_bank_with_own_samples(tmp_path):
    from edgeseq.extractors import digits

    images = digits.load_images(n=4, seed=1)[0]
    np.save(tmp_path / "mine.npy", images)
    out, feats = tmp_path / "g.json", tmp_path / "X.npy"
    res = _run(["--bank", "digits", tmp_path / "mine.npy", "-o", out, "--features-out", feats])
    assert res.exit_code == 0, res.output
    assert read_calibration(out, bank=digits.bank())["measured_on"]["n_samples"] == 4
    np.testing.assert_array_equal(np.load(feats), digits.features(images)[0])
    _refused(_run(["--bank", "digits", tmp_path / "missing.npy", "-o", out]), "missing.npy", "does not exist")
    _refused(_run(["--bank", "digits", "x:BANK", tmp_path / "mine.npy", "-o", out]), "not both")


VARIABLE = "import numpy as np\nBANK = {'ok': lambda x: x[:1], 'var': lambda x: np.zeros(1 if x[0] < {cut} else 2)}\n"


@pytest.mark.parametrize("max_samples", [6, 2])  # the wider item among the timed ones / only among the untimed ones
def test_variable_width_is_refused_before_anything_is_written(tmp_path, max_samples):
    (tmp_path / "bank.py").write_text(VARIABLE.replace("{cut}", "3"))
    np.save(tmp_path / "s.npy", np.arange(6.0).reshape(6, 1))  # items 0..2 give width 1, items 3..5 width 2
    out, feats = tmp_path / "g.json", tmp_path / "X.csv"
    res = _run([f"{tmp_path / 'bank.py'}:BANK", tmp_path / "s.npy", "-o", out, "--features-out", feats,
                "--max-samples", max_samples])
    _refused(res, "extractor 'var'", "different lengths [1, 2]", "item 3")
    assert not out.exists() and not feats.exists()
