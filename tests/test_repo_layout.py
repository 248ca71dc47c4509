"""The repository's top level is the layout the user asked for, and nothing else is committed there.

A doctest or a script that writes into the working directory leaves files at the top of a checkout;
once such leftovers were committed by mistake (exports and C models of examples). This test names
every tracked top-level entry, so a new one has to be added here on purpose.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {".ci", ".gitignore", "LICENSE", "Makefile", "README.md", "bench", "constraints.txt", "docs",
           "edgeseq", "examples", "export", "mkdocs.yml", "pyproject.toml", "runtime_c", "tests"}


def tracked_top_level(root: Path) -> set[str]:
    """The first path component of every file git tracks under `root`."""
    out = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True).stdout
    return {line.split("/", 1)[0] for line in out.splitlines() if line}


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_only_the_agreed_top_level_entries_are_tracked():
    extra = tracked_top_level(ROOT) - ALLOWED
    assert not extra, f"unexpected files committed at the repository root: {sorted(extra)}"


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_the_check_sees_a_new_top_level_file(tmp_path):
    """Negative control: a stray file committed at the top of a repository is reported."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "README.md").write_text("x")
    (tmp_path / "demo_export").mkdir()
    (tmp_path / "demo_export" / "manifest.json").write_text("{}")
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    assert tracked_top_level(tmp_path) - ALLOWED == {"demo_export"}
