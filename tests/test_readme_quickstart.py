"""The README's command-line quick start, run verbatim (minus the venv line: the test already runs
inside an environment with edgeseq installed) in a scratch directory."""

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


def test_quickstart_runs_verbatim(tmp_path):
    cmds = quickstart_commands()
    assert any(c.startswith("edgeseq verify") for c in cmds) and any(c.startswith("edgeseq run") for c in cmds)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for cmd in cmds:
        res = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"{cmd}\n{res.stdout}\n{res.stderr}"
    preds = (tmp_path / "preds.csv").read_text().splitlines()
    assert preds[0].startswith("row,prefix") and len(preds) == 570
