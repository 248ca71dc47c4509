"""The README's command-line quick start, run verbatim as one shell script (minus the venv line: the
test already runs inside an environment with edgeseq installed) in a scratch checkout-like directory.

The quick start must work in a checkout where `make demo` and the examples have already written
their outputs (`out/demo/`, `out/examples/<name>/`), must leave those untouched, and must work when
run a second time.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("The command line, end to end")
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and "venv" not in line]


def run_quickstart(cwd: Path, only=None) -> subprocess.CompletedProcess:
    """Run the block as one script (as pasted into a shell: `cd` carries over); `only` filters lines."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cmds = [c for c in quickstart_commands() if only is None or only(c)]
    script = "set -euo pipefail\n" + "\n".join(cmds) + "\n"
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def fake_earlier_outputs(root: Path) -> dict[Path, bytes]:
    """What `make demo` and an example leave behind: a report and an export with a manifest."""
    files = {root / "out/demo/report/report.md": b"# demo report\n",
             root / "out/demo/models/cs-g-omp/manifest.json": b'{"format": "edgeseq-export"}\n',
             root / "out/examples/breast_cancer/manifest.json": b'{"format": "edgeseq-export"}\n'}
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def test_quickstart_runs_verbatim_next_to_the_demo_outputs(tmp_path):
    cmds = quickstart_commands()
    assert any(c.startswith("edgeseq verify") for c in cmds) and any(c.startswith("edgeseq run") for c in cmds)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    before = fake_earlier_outputs(tmp_path)
    res = run_quickstart(tmp_path)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    # running the block again meets the first run's export: only the export step could refuse that
    again = run_quickstart(tmp_path, only=lambda c: c.startswith(("mkdir", "edgeseq export")))
    assert again.returncode == 0, f"{again.stdout}\n{again.stderr}"
    preds = (tmp_path / "out/quickstart/preds.csv").read_text().splitlines()
    assert preds[0].startswith("row,prefix") and len(preds) == 570
    assert {p: p.read_bytes() for p in before} == before  # the demo's and examples' files are untouched
    written = {p.relative_to(tmp_path).parts[:2] for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert written == {("out", "demo"), ("out", "examples"), ("out", "quickstart")}


def test_quickstart_extraction_sees_every_command():
    # negative control for the extraction: the block's commands, in order, none dropped
    cmds = quickstart_commands()
    assert [c.split()[0] for c in cmds][:2] == ["mkdir", "python"]
    assert [c.split()[1] for c in cmds if c.startswith("edgeseq")] == ["train", "export", "inspect", "verify", "run"]


def test_getting_started_page_shows_the_same_quickstart():
    # the docs repeat the quick start; the copy this test runs must be the one the docs show
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    start = text.index("## The command line, end to end")
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S).group(1)
    assert [line for line in block.splitlines() if line.strip()] == quickstart_commands()
