"""README links into docs/ read right outside the built site: a page whose measured figures are filled in
by the docs hook (`docs/hooks.py`) is marked as such, and the README says how to build the site."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "*(figures: built site)*"


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def has_figure_markers(text: str, hooks) -> bool:
    """True when the page holds a marker the hook replaces with a measured figure or table."""
    return hooks.MARKER in text or hooks.VERDICT_MARKER in text or bool(hooks.FIGURE_MARKER.search(text))


def unmarked_links(readme: str, hooks) -> list[str]:
    """docs pages with hook markers that the README links without saying they need the built site."""
    bad = []
    for m in re.finditer(r"\]\((docs/[^)#]+\.md)[^)]*\)", readme):
        page = ROOT / m.group(1)
        if page.is_file() and has_figure_markers(page.read_text(encoding="utf-8"), hooks):
            if not readme[m.end():].lstrip().startswith(MARK):
                bad.append(m.group(1))
    return bad


def test_readme_marks_every_linked_page_whose_figures_need_the_built_site():
    hooks = _hooks()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make docs" in readme and "site/index.html" in readme
    assert unmarked_links(readme, hooks) == []
    # negative control: the checker finds a marked page once its mark is gone, and the page has markers
    assert has_figure_markers((ROOT / "docs" / "nonlinear.md").read_text(encoding="utf-8"), hooks)
    stripped = readme.replace(f"(docs/nonlinear.md) {MARK}", "(docs/nonlinear.md)")
    assert unmarked_links(stripped, hooks) == ["docs/nonlinear.md"]
