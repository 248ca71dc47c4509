"""Input files that are not what their size says (issue 24 items 4, 6, 10): every reader of a device log,
GROUPS.json, model file, CSV or shard is bounded in time and memory, and refuses in one line.

`stat().st_size` is 0 for /dev/zero, a FIFO or a serial port, so a size check alone lets a reader
fill memory or wait forever. Each hostile input is made here (/dev/zero, a FIFO, a symbolic link to
/dev/zero, an oversize regular file, an endless CSV line, a lying .npy header) and read in a child
process with an address-space limit and an alarm, so a reader without the bounds fails the test
(MemoryError, timeout) instead of taking the machine or the test run down with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not (hasattr(os, "mkfifo") and Path("/dev/zero").exists()),
                                reason="needs POSIX FIFOs and /dev/zero")

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 10  # per read; a bounded reader answers in milliseconds
MEMORY_MB = 64  # growth of the child's peak RSS allowed per read (a read of /dev/zero would take GBs)
ADDRESS_SPACE_MB = 768  # above the child's size after imports: past it, an unbounded read is a MemoryError

_CHILD = textwrap.dedent("""
    import json, resource, signal, sys, time
    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    def vm():
        with open("/proc/self/status") as f:
            return int(next(l for l in f if l.startswith("VmSize")).split()[1]) * 1024
    class Timeout(BaseException):
        pass
    def alarm(*_):
        raise Timeout()
    spec = json.loads(sys.argv[1])
    env = {}
    exec(spec["setup"], env)
    run = env["run"]
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = vm() + spec["address_space_mb"] * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    signal.signal(signal.SIGALRM, alarm)
    out = []
    for path in spec["paths"]:
        before, t0 = peak(), time.monotonic()
        signal.alarm(spec["timeout"])
        try:
            try:
                result = "ok: " + str(run(path))
            finally:
                signal.alarm(0)  # before any handler runs: the alarm cannot interrupt one
        except Timeout:
            result = "TIMEOUT"
        except BaseException as exc:
            result = f"{type(exc).__name__}: {exc}"
        out.append({"path": path, "result": result, "seconds": time.monotonic() - t0, "mb": peak() - before})
    print(json.dumps(out))
""")


def read_in_child(setup: str, paths: list, timeout: int = TIMEOUT_S) -> list[dict]:
    """Run `run(path)` (defined by `setup`) on each path in one child process: the result line, the
    seconds it took and the growth of the child's peak RSS in MB."""
    spec = {"setup": textwrap.dedent(setup), "paths": [str(p) for p in paths], "timeout": timeout,
            "address_space_mb": ADDRESS_SPACE_MB}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], capture_output=True, text=True,
                          timeout=60 + timeout * len(paths), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _hostile_files(tmp_path: Path, oversize: int, suffix: str) -> dict:
    """/dev/zero itself, a FIFO nobody writes to, a link to /dev/zero and a regular file one byte over
    the reader's bound, each named with the reader's suffix."""
    fifo = tmp_path / f"fifo{suffix}"
    os.mkfifo(fifo)
    link = tmp_path / f"link{suffix}"
    link.symlink_to("/dev/zero")
    big = tmp_path / f"big{suffix}"
    with open(big, "wb") as f:  # sparse: no disk space or time spent on it
        f.truncate(oversize)
    return {"dev_zero": Path("/dev/zero"), "fifo": fifo, "link_to_dev_zero": link, "oversize": big}


def _check_refusals(results: list[dict], names: list[str], error: str, oversize_words: str):
    for name, r in zip(names, results):
        line = r["result"]
        assert line.startswith(f"{error}: "), (name, line)
        assert "\n" not in line and len(line) < 400, (name, line)
        assert r["seconds"] < TIMEOUT_S / 2 and r["mb"] < MEMORY_MB, (name, r)
        want = oversize_words if name == "oversize" else "not a regular file"
        assert want in line, (name, line)


READERS = {
    # name: (setup defining run(path), exception class name, bound's module attribute, suffix)
    "device_log": ("from edgeseq.io.device_costs import read_device_log as run", "InputError",
                   ("edgeseq.io.device_costs", "MAX_LOG_BYTES"), ".log"),
    "groups_json": ("from edgeseq.io.data import read_groups_doc as run", "GroupSpecError",
                    ("edgeseq.io.data", "MAX_GROUPS_BYTES"), ".json"),
    "model_file": ("from edgeseq.io.model_io import load_model as run", "ModelFormatError",
                   ("edgeseq.io.model_io", "MAX_MODEL_BYTES"), ".pkl"),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_non_regular_and_oversize_inputs_are_refused_in_bounded_time_and_memory(tmp_path, reader):
    setup, error, (module, attr), suffix = READERS[reader]
    import importlib

    bound = getattr(importlib.import_module(module), attr)
    files = _hostile_files(tmp_path, bound + 1, suffix)
    results = read_in_child(setup, list(files.values()))
    _check_refusals(results, list(files), error, f"{bound + 1:,} bytes, over the {bound:,}-byte limit")


def test_the_child_harness_catches_an_unbounded_reader(tmp_path):
    """Negative control: a plain unbounded read of /dev/zero ends in MemoryError (or the alarm, on a
    busy machine), of a FIFO in the alarm: a reader without the bounds fails these tests, it does not
    take the test run down."""
    files = _hostile_files(tmp_path, 1, ".log")
    results = read_in_child("from pathlib import Path\ndef run(p):\n    return len(Path(p).read_bytes())",
                            [files["dev_zero"], files["fifo"]], timeout=2)
    outcome = [r["result"].split(":")[0] for r in results]
    assert outcome[0] in ("MemoryError", "TIMEOUT") and outcome[1] == "TIMEOUT", results  # never "ok"


def test_cli_from_device_and_train_groups_refuse_dev_zero_in_one_line(tmp_path):
    """What the red team ran: `calibrate --from-device /dev/zero` and `train --groups /dev/zero`."""
    (tmp_path / "d.csv").write_text("y,a,b\n1,0.5,2\n0,1.5,3\n2,2.5,1\n")
    (tmp_path / "g.json").write_text('{"groups": [{"name": "a", "columns": ["a"], "cost": 1},'
                                     ' {"name": "b", "columns": ["b"], "cost": 2}]}')
    fifo = tmp_path / "board.log"
    os.mkfifo(fifo)
    setup = f"""
        from click.testing import CliRunner
        from edgeseq.cli import main
        ARGS = {{"from_device": ["calibrate", "--from-device", "/dev/zero", "--groups", "{tmp_path}/g.json",
                                 "-o", "{tmp_path}/out.json"],
                "from_fifo": ["calibrate", "--from-device", "{fifo}", "--groups", "{tmp_path}/g.json",
                              "-o", "{tmp_path}/out.json"],
                "device_groups": ["calibrate", "--from-device", "{fifo}", "--groups", "/dev/zero",
                                  "-o", "{tmp_path}/out.json"],
                "train_groups": ["train", "{tmp_path}/d.csv", "--target", "y", "--task", "regression", "--groups", "/dev/zero",
                                 "-o", "{tmp_path}/m.pkl", "--quiet"]}}
        def run(name):
            r = CliRunner().invoke(main, ARGS[name])
            assert isinstance(r.exception, SystemExit) and r.exit_code == 1, (r.exception, r.output[-500:])
            return r.output.strip()
    """
    names = ["from_device", "from_fifo", "device_groups", "train_groups"]
    results = read_in_child(setup, names)
    for name, r in zip(names, results):
        assert r["result"].startswith("ok: Error: ") and "\n" not in r["result"], (name, r)
        assert "not a regular file" in r["result"] and r["seconds"] < TIMEOUT_S / 2 and r["mb"] < MEMORY_MB, r
    assert "device log" in results[0]["result"] and "groups file /dev/zero" in results[3]["result"]
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "m.pkl").exists()


def test_regular_files_and_links_to_them_still_read(tmp_path):
    """Negative control: the bounded reader accepts a file at its bound and a link to a regular file."""
    from edgeseq.io.bounded import read_bounded
    from edgeseq.io.data import read_groups_doc

    p = tmp_path / "g.json"
    p.write_text('{"groups": []}')
    (tmp_path / "link.json").symlink_to(p)
    assert read_groups_doc(tmp_path / "link.json") == {"groups": []}
    assert read_bounded(p, p.stat().st_size) == p.read_bytes()
    from edgeseq.errors import InputError

    with pytest.raises(InputError, match="14 bytes, over the 13-byte limit"):
        read_bounded(p, 13)


# ---------------------------------------------------------------- item 6: one CSV row without end
def _csv_with_row(path: Path, row_chars: int) -> int:
    """A CSV whose second line is one data row of exactly `row_chars` characters, newline included:
    its cells are padded with spaces, which the reader strips, and each stays under the csv module's
    own field limit (131,072 characters). Returns the number of feature columns."""
    k = row_chars // 100_000 + 1
    cells = ["2"] * k
    pad = row_chars - len("1," + ",".join(cells) + "\n")
    cells = ["2" + " " * (pad // k + (i < pad % k)) for i in range(k)]
    path.write_text(",".join(["y"] + [f"a{i}" for i in range(k)]) + "\n1," + ",".join(cells) + "\n"
                    + "0," + ",".join(["3"] * k) + "\n")
    assert len(path.read_text().splitlines(keepends=True)[1]) == row_chars
    return k


def test_a_csv_row_at_the_bound_reads_and_one_past_it_is_refused_naming_the_bound(tmp_path):
    from edgeseq.errors import InputError
    from edgeseq.io.data import MAX_ROW_CHARS, read_csv

    p = tmp_path / "d.csv"
    k = _csv_with_row(p, MAX_ROW_CHARS)
    assert read_csv(p, "y").X.tolist() == [[2.0] * k, [3.0] * k]  # negative control: at the bound
    _csv_with_row(p, MAX_ROW_CHARS + 1)
    with pytest.raises(InputError) as info:
        read_csv(p, "y")
    msg = str(info.value)
    assert "line 2" in msg and f"{MAX_ROW_CHARS:,} characters" in msg and "\n" not in msg and len(msg) < 400
    # a row made long by quoted fields spanning many short lines counts as one row
    p.write_text('y,a\n1,' + ",".join(['"' + "\n" * 999 + '"'] * (MAX_ROW_CHARS // 1000 + 1)) + "\n")
    with pytest.raises(InputError, match=f"{MAX_ROW_CHARS:,} characters"):
        read_csv(p, "y")


def test_an_endless_csv_line_costs_bounded_memory_in_train(tmp_path):
    """What the red team ran with a 2 GiB line; 32 MiB shows the same: an unbounded reader holds the
    whole line (peak >= the line), the bounded one about one row's bound."""
    import tracemalloc

    from click.testing import CliRunner

    from edgeseq.cli import main
    from edgeseq.io.data import MAX_ROW_CHARS

    line = 32 << 20
    p = tmp_path / "d.csv"
    with open(p, "w") as f:
        f.write("y,a\n1,")
        f.write("9" * line)  # no newline, no comma: one field, one line
    (tmp_path / "g.json").write_text('{"groups": [{"name": "a", "columns": ["a"], "cost": 1}]}')
    tracemalloc.start()
    try:
        r = CliRunner().invoke(main, ["train", str(p), "--target", "y", "--groups", str(tmp_path / "g.json"),
                                      "-o", str(tmp_path / "m.pkl"), "--quiet"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.output[-500:]
    out = r.output.strip()
    assert "\n" not in out and f"{MAX_ROW_CHARS:,} characters" in out and "line 2" in out, out
    assert line >= 32 * MAX_ROW_CHARS and peak < 4 * MAX_ROW_CHARS, \
        f"peak {peak:,} bytes while reading a {line:,}-character line"
    assert not (tmp_path / "m.pkl").exists()


# ---------------------------------------------------------------- item 10: shard directories
@pytest.fixture
def shard_dir(tmp_path):
    d = tmp_path / "shards"
    d.mkdir()
    rng = np.random.default_rng(0)
    np.save(d / "part-000.npy", rng.normal(size=(40, 3)))
    return d


def _refused(source, *words):
    from edgeseq.errors import InputError
    from edgeseq.io.shards import open_shards

    with pytest.raises(InputError) as info:
        open_shards(source, None)
    msg = str(info.value)
    assert "\n" not in msg and len(msg) < 500 and all(w in msg for w in words), msg
    return msg


def test_a_npy_header_claiming_more_rows_than_the_file_holds_is_one_line(shard_dir):
    from edgeseq.errors import InputError
    from edgeseq.io.shards import ShardLoader

    with open(shard_dir / "part-001.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (10**12, 3)})
        f.write(np.zeros(3).tobytes())
    _refused(shard_dir, "part-001.npy", "(1000000000000, 3)", "24,000,000,000,000 bytes", "holds 24")
    # the worker's loader, should the file change after the headers were checked: one line, not a ValueError
    with pytest.raises(InputError, match="cannot read shard .*part-001.npy as .npy"):
        ShardLoader(str(shard_dir / "part-001.npy"), ".npy", 2, 3)()


def test_a_truncated_npy_shard_is_refused(shard_dir):
    raw = (shard_dir / "part-000.npy").read_bytes()
    (shard_dir / "part-001.npy").write_bytes(raw[:-8])
    _refused(shard_dir, "part-001.npy", "truncated")


@pytest.mark.parametrize("kind", ["fifo", "link_to_dev_zero", "directory"])
def test_shard_entries_that_are_not_regular_files_are_refused_not_skipped(shard_dir, kind):
    entry = shard_dir / "part-001.npy"
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "link_to_dev_zero":
        entry.symlink_to("/dev/zero")
    else:
        entry.mkdir()
    _refused(shard_dir, "part-001.npy", "not a regular file")
    _refused(shard_dir / "part-*.npy", "part-001.npy", "not a regular file")  # a glob pattern alike


def test_a_shard_link_leaving_its_directory_is_refused_and_one_inside_is_followed(shard_dir, tmp_path):
    from edgeseq.io.shards import open_shards

    (tmp_path / "elsewhere").mkdir()
    np.save(tmp_path / "elsewhere" / "x.npy", np.ones((5, 3)))
    (shard_dir / "part-001.npy").symlink_to(tmp_path / "elsewhere" / "x.npy")
    _refused(shard_dir, "part-001.npy", "symbolic link", "outside its directory")
    (shard_dir / "part-001.npy").unlink()
    (shard_dir / "part-001.npy").symlink_to("part-000.npy")  # negative control: a link inside is a shard
    assert open_shards(shard_dir, None).rows == [40, 40]


def test_a_csv_shard_with_an_endless_header_is_refused_with_the_bound(tmp_path):
    from edgeseq.io.data import MAX_ROW_CHARS

    d = tmp_path / "csv"
    d.mkdir()
    (d / "a.csv").write_text("x,t\n1,2\n")
    (d / "b.csv").write_text("x" * (MAX_ROW_CHARS + 1))
    from edgeseq.errors import InputError
    from edgeseq.io.shards import open_shards

    with pytest.raises(InputError, match=f"b.csv, line 1: a row longer than {MAX_ROW_CHARS:,}"):
        open_shards(d, "t")


@pytest.mark.parametrize("other, target", [
    (None, "missing"),                                                   # the target is not in a wide header
    (",".join(["y" * 50_000] * 8), "t"),                                 # headers that differ, of long names
], ids=["target_not_in_wide_header", "different_long_headers"])
def test_csv_shard_header_errors_quote_the_header_briefly(tmp_path, other, target):
    """Header errors quote the headers as a short summary, whatever their width or cell lengths.
    Negative control: the same directory with a matching header and a present target opens."""
    from edgeseq.errors import InputError
    from edgeseq.io.shards import open_shards

    d = tmp_path / "csv"
    d.mkdir()
    wide = ",".join(f"c{i}" for i in range(20_000)) + ",t"
    (d / "a.csv").write_text(wide + "\n" + ",".join(["1"] * 20_001) + "\n")
    (d / "b.csv").write_text((other or wide) + "\n")
    with pytest.raises(InputError) as err:
        open_shards(d, target)
    assert "\n" not in str(err.value) and len(str(err.value)) < 600
    (d / "b.csv").write_text(wide + "\n" + ",".join(["2"] * 20_001) + "\n")
    assert open_shards(d, "t").n_cols == 20_001


def test_cli_train_on_a_shard_directory_with_a_lying_header_is_one_line(shard_dir, tmp_path):
    from click.testing import CliRunner

    from edgeseq.cli import main

    with open(shard_dir / "part-001.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (10**12, 3)})
    (tmp_path / "g.json").write_text('{"groups": [{"name": "a", "columns": [0], "cost": 1},'
                                     ' {"name": "b", "columns": [1], "cost": 2}]}')
    r = CliRunner().invoke(main, ["train", str(shard_dir), "--groups", str(tmp_path / "g.json"),
                                  "-o", str(tmp_path / "m.pkl"), "--quiet"])
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.output[-800:]
    assert r.output.count("\n") == 1 and "part-001.npy" in r.output and "header says" in r.output, r.output


def test_the_threat_model_page_states_the_bounds_the_code_uses():
    from edgeseq.io.data import MAX_GROUPS_BYTES, MAX_ROW_CHARS
    from edgeseq.io.device_costs import MAX_LOG_BYTES

    page = (ROOT / "docs" / "threat-model.md").read_text(encoding="utf-8")
    assert MAX_LOG_BYTES == MAX_GROUPS_BYTES == 16 << 20
    assert "| Device log size | 16 MiB |" in page and "| `GROUPS.json` size | 16 MiB |" in page
    assert f"| One CSV row | {MAX_ROW_CHARS:,} characters |" in page
