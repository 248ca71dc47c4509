"""The documentation is part of the product: it builds strictly, its code runs, its links resolve.

* ``mkdocs build --strict`` succeeds (skipped, with the reason, when mkdocs is not installed);
* every ```python block of README.md and docs/*.md runs, the blocks of one page in order and in one
  namespace, in a scratch working directory; a block may be skipped only by an HTML comment
  ``<!-- no-test: reason -->`` on the line before it;
* every relative link and image in README.md and docs/ points to an existing file and, with a
  ``#fragment``, to an existing heading of that page;
* README.md stays at most 150 lines; no page, no ``--help`` text and no generated report points to a
  design document outside the repository.

The checkers are tested on hand-made bad input too, so they cannot pass by finding nothing.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
MARKDOWN = [ROOT / "README.md", *PAGES]
README_MAX_LINES = 150

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
NO_TEST = re.compile(r"<!--\s*no-test\b[^>]*-->\s*$")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


# ----------------------------------------------------------------------------- helpers
def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, source) of every ```python block not marked ``<!-- no-test ... -->``."""
    out = []
    for m in FENCE.finditer(text):
        if m.group(1) != "python":
            continue
        before = text[:m.start()].rstrip("\n").splitlines()
        if before and NO_TEST.search(before[-1]):
            continue
        out.append((text.count("\n", 0, m.start()) + 2, m.group(2)))
    return out


def strip_code(text: str, inline: bool = True) -> str:
    """The text with fenced blocks (and inline code) removed: links inside code are not links."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return re.sub(r"`[^`\n]*`", "", text) if inline else text


def slug(heading: str) -> str:
    """The anchor mkdocs' toc gives a heading (Python-Markdown's default slugify)."""
    import unicodedata

    text = re.sub(r"`|\*\*|__", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    """Anchors of a markdown page: slugs of its headings and explicit ``{#id}`` attributes."""
    text = strip_code(path.read_text(encoding="utf-8"), inline=False)
    out = set(re.findall(r"\{\s*#([\w-]+)\s*\}", text))
    for line in text.splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*(\{[^}]*\})?\s*$", line)
        if m:
            out.add(slug(m.group(1)))
    return out


def broken_links(path: Path) -> list[str]:
    """Relative links of one markdown file that do not resolve (file or heading)."""
    problems = []
    for target in LINK.findall(strip_code(path.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
            continue
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{path.name}: {target} (no such file)")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            problems.append(f"{path.name}: {target} (no heading #{fragment})")
    return problems


def run_blocks(blocks: list[tuple[int, str]], name: str) -> int:
    """Execute blocks in order in one namespace; return how many ran."""
    namespace: dict = {"__name__": f"docs_{name}"}
    for line, src in blocks:
        code = compile(src, f"{name}, block at line {line}", "exec")
        exec(code, namespace)  # noqa: S102  (the docs' own examples)
    return len(blocks)


# ----------------------------------------------------------------------------- the checks
def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """`make docs`'s build (``mkdocs build --strict``, nothing hidden) of `config` into `site`."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})


def build_problems(res: subprocess.CompletedProcess) -> list[str]:
    """Why a build fails `make docs`: a non-zero exit, and every WARNING or ERROR line it logged (under
    --strict a warning aborts the build, so a test that ran with --quiet saw rc 0 and no reason)."""
    lines = [ln.strip() for ln in (res.stdout + res.stderr).splitlines()
             if re.match(r"^\s*(WARNING|ERROR)\b", ln)]
    return ([f"mkdocs exited with {res.returncode}"] if res.returncode else []) + lines


def test_mkdocs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    res = mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert build_problems(res) == [], (res.stdout + res.stderr)[-5000:]
    bench = (tmp_path / "site" / "benchmarks" / "index.html").read_text(encoding="utf-8")
    assert "bench-results" not in bench  # the marker was replaced by generated tables
    for script in sorted((ROOT / "bench").glob("[!_]*.py")):  # _x.py: helpers shared by the benchmarks
        assert f"python bench/{script.name}" in bench, f"no section with the command for {script.name}"
    assert "edgeseq train" in (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
    # the API pages render docstrings: none of them may point outside the repository either
    pages = [p for p in (tmp_path / "site").rglob("*.html") if "DESIGN" in p.read_text(encoding="utf-8")]
    assert pages == []


WITH_CODE = [p for p in MARKDOWN if python_blocks(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("path", WITH_CODE, ids=lambda p: p.name)
def test_python_blocks_run(path, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib").use("Agg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    blocks = python_blocks(path.read_text(encoding="utf-8"))
    assert run_blocks(blocks, path.name) == len(blocks)


def test_pages_that_teach_code_have_running_blocks():
    # a parser that finds nothing would make the test above pass vacuously
    assert ROOT / "README.md" in WITH_CODE
    for name in ("getting-started", "training", "classification", "evaluation", "export-format",
                 "python-runtime", "own-data"):
        assert python_blocks((DOCS / f"{name}.md").read_text(encoding="utf-8")), name


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: p.name)
def test_relative_links_resolve(path):
    assert broken_links(path) == []


def test_readme_is_short():
    n = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES})"


def test_nothing_points_to_an_outside_design_document():
    offenders = [p.name for p in MARKDOWN if "DESIGN" in p.read_text(encoding="utf-8")]
    sources = [*(ROOT / "edgeseq" / "cli").glob("*.py"), ROOT / "edgeseq" / "evaluate" / "report.py",
               ROOT / "examples" / "demo.py", DOCS / "hooks.py", DOCS / "gen_figures.py"]
    offenders += [str(p.relative_to(ROOT)) for p in sources if "DESIGN" in p.read_text(encoding="utf-8")]
    assert offenders == []


OUTSIDE_DESIGN = re.compile("DESIGN" + r"(\.md|'s| section)")  # split: this file would match itself


def test_no_source_file_cites_an_outside_design_document():
    """Code comments and docstrings cite the docs pages, never the design document outside the repository."""
    files = [p for d in ("edgeseq", "export", "runtime_c", "tests", "bench", "examples", "docs")
             for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".c", ".h", ".md")]
    assert len(files) > 100  # the walk found the tree
    offenders = [str(p.relative_to(ROOT)) for p in files if OUTSIDE_DESIGN.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
    assert OUTSIDE_DESIGN.search("see " + "DESIGN" + ".md §3")  # negative control


def test_help_texts_do_not_point_to_a_design_document():
    from click.testing import CliRunner

    from edgeseq.cli import main

    runner = CliRunner()
    for args in [["--help"]] + [[name, "--help"] for name in main.list_commands(None)]:
        res = runner.invoke(main, args)
        assert res.exit_code == 0, res.output
        assert "DESIGN" not in res.output, args


def test_generated_report_does_not_point_to_a_design_document(tmp_path):
    from edgeseq.evaluate import AnytimeCurve
    from edgeseq.evaluate.report import write_report

    curve = AnytimeCurve([0.0, 1.0, 3.0], [0.0, 0.5, 0.9], ("a", "b"), label="m")
    write_report({"m": curve}, tmp_path / "r", reference=curve, plots=False)
    texts = [p.read_text(encoding="utf-8") for p in (tmp_path / "r").iterdir() if p.is_file()]
    assert texts and not any("DESIGN" in t for t in texts)


# ----------------------------------------------------------------------------- negative controls
def test_block_extraction_and_skip_marker():
    text = ("# t\n\n```python\nx = 1\n```\n\n<!-- no-test: needs hardware -->\n```python\nraise SystemExit\n```\n"
            "\n```bash\nexit 1\n```\n\n```python\ny = x + 1\n```\n")
    blocks = python_blocks(text)
    assert [src for _, src in blocks] == ["x = 1\n", "y = x + 1\n"]
    assert [line for line, _ in blocks] == [4, 17]
    assert run_blocks(blocks, "t") == 2


def test_a_failing_block_fails():
    with pytest.raises(ZeroDivisionError):
        run_blocks(python_blocks("```python\n1 / 0\n```\n"), "bad")


def test_link_checker_reports_broken_links(tmp_path):
    (tmp_path / "a.md").write_text("# Title here\n\n## Second `part`\n", encoding="utf-8")
    page = tmp_path / "p.md"
    page.write_text("[ok](a.md) [ok](a.md#second-part) [ok](#own) [web](https://example.com)\n"
                    "[bad](missing.md) [bad](a.md#nope) ![img](img/none.png)\n"
                    "`[code](ignored.md)`\n\n## Own\n", encoding="utf-8")
    assert broken_links(page) == ["p.md: missing.md (no such file)", "p.md: a.md#nope (no heading #nope)",
                                  "p.md: img/none.png (no such file)"]


def test_benchmark_tables_are_generated_from_result_files(tmp_path):
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    bench = tmp_path / "bench"
    (bench / "results").mkdir(parents=True)
    (bench / "fast.py").write_text('"""Fast thing."""\nOUT = "bench/results/fast.json"\n')
    (bench / "quiet.py").write_text('"""Prints only."""\n')
    (bench / "results" / "fast.json").write_text(
        '{"command": "python bench/fast.py --n 3", "machine": "box, 2 cores", "speed": {"ratio": 1.23456}}')
    (bench / "results" / "broken.json").write_text("{not json")
    (bench / "results" / "older.json").write_text('{"x": 2}')
    (bench / "results" / "older.md").write_text("Measured by `python bench/older.py` (oldbox, 4 cores).\n")
    (bench / "results" / "bare.json").write_text('{"y": 3}')
    md = hooks.render_benchmarks(bench)
    assert "Machine: oldbox, 4 cores (recorded by the same run in `bench/results/older.md`)." in md
    assert "Machine: the run's machine is not recorded in the file." in md  # bare.json: said, not invented
    assert "`python bench/fast.py --n 3`" in md and "box, 2 cores" in md and "1.235" in md
    assert "**Could not read** `bench/results/broken.json`" in md
    assert "**Not yet measured**" in md and "run `python bench/quiet.py` to see them" in md
    # the real anytime-quality file: its figures come from the JSON, not from text
    real = ROOT / "bench" / "results" / "anytime_quality.json"
    if real.exists():
        import json

        data = json.loads(real.read_text())
        ds, r = next(iter(data.items()))
        m, s = hooks.mean_std([split["CS-G-OMP"]["step"] for split in r["timeliness"]])
        assert f"{m:.4f} ± {s:.4f}" in hooks.render_benchmarks(ROOT / "bench")


def test_tree_order_verdict_follows_the_result_file(tmp_path):
    """The nonlinear page's "beats the linear models" table is computed from the per-split records."""
    import json

    spec = importlib.util.spec_from_file_location("docs_hooks_verdict", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)

    def rec(a, s):
        return {"alpha_timeliness": a, "step_timeliness": s}

    def page(afr, omp):
        runs = {"toy": {"AFR": {"splits": [rec(*x) for x in afr]}, "CS-G-OMP (linear)": {"splits": [rec(*x) for x in omp]}}}
        path = tmp_path / "tree_orders.json"
        path.write_text(json.dumps({"runs": runs}))
        return hooks.render_tree_order_verdict(path)

    md = page(afr=[(0.9, 0.5), (0.8, 0.5)], omp=[(0.5, 0.9), (0.5, 0.7)])
    row = next(line for line in md.splitlines() if line.startswith("| toy | AFR"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "0.850 ± 0.050" and cells[4] == "CS-G-OMP (linear): 0.500 ± 0.000" and cells[5] == "higher"
    assert cells[6] == "0.500 ± 0.000" and cells[8] == "lower"
    # negative control: overlapping spreads are not called a win
    md = page(afr=[(0.9, 0.5), (0.5, 0.5)], omp=[(0.6, 0.5), (0.6, 0.5)])
    assert "within the spread" in md and "higher" not in md
    assert "Not yet measured" in hooks.render_tree_order_verdict(tmp_path / "missing.json")


def test_tree_order_figures_in_prose_come_from_the_result_file(tmp_path):
    """Inline ``<!-- tree-orders: ... -->`` markers become the JSON's mean ± std and comparison words."""
    import json

    spec = importlib.util.spec_from_file_location("docs_hooks_figures", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    runs = {"toy": {"LightGBM (cost-sequenced)": {"splits": [{"alpha_timeliness": 0.9}, {"alpha_timeliness": 0.8}]},
                    "CS-G-OMP (linear)": {"splits": [{"alpha_timeliness": 0.5}, {"alpha_timeliness": 0.5}]},
                    "CS-G-FR (linear)": {"splits": [{"alpha_timeliness": 0.6}, {"alpha_timeliness": 0.6}]}}}
    path = tmp_path / "tree_orders.json"
    path.write_text(json.dumps({"runs": runs}))
    text = ("seq <!-- tree-orders: toy / LightGBM (cost-sequenced) / alpha_timeliness -->, "
            "<!-- tree-orders: toy / LightGBM (cost-sequenced) / alpha_timeliness / vs --> "
            "<!-- tree-orders: toy / best linear / alpha_timeliness -->.")
    assert hooks.render_tree_order_figures(text, path) == \
        "seq 0.850 ± 0.050 (2 splits), higher than 0.600 ± 0.000 (2 splits)."
    # negative controls: a score or data set the file lacks is said, not guessed; a tie is not a win
    assert hooks.render_tree_order_figures("<!-- tree-orders: toy / AFR / fit_s -->", path) == "(not measured)"
    assert hooks.render_tree_order_figures("<!-- tree-orders: other / AFR / fit_s / vs -->", path) == "(not measured)"
    runs["toy"]["CS-G-FR (linear)"]["splits"] = [{"alpha_timeliness": 0.95}, {"alpha_timeliness": 0.7}]
    path.write_text(json.dumps({"runs": runs}))
    assert hooks.render_tree_order_figures(
        "<!-- tree-orders: toy / LightGBM (cost-sequenced) / alpha_timeliness / vs -->", path) == "within the spread of"
    # the real page: every marker it carries is one the hook understands (none left in the built text)
    page = (DOCS / "nonlinear.md").read_text(encoding="utf-8")
    assert "<!-- tree-orders:" not in hooks.render_tree_order_figures(page, ROOT / "bench" / "results" / "tree_orders.json")


def test_build_check_fails_on_a_docstring_warning(tmp_path):
    """Negative control: a docstring section griffe warns about fails the check (it passed with --quiet)."""
    if importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    (tmp_path / "docs").mkdir()
    (tmp_path / "badmod.py").write_text(
        'def f(x):\n    """One.\n\n    Parameters\n    ----------\n    y : int\n        Not a parameter of f.\n    """\n')
    (tmp_path / "docs" / "index.md").write_text("# Bad\n\n::: badmod.f\n")
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: bad\nplugins:\n  - mkdocstrings:\n      handlers:\n        python:\n"
        "          paths: [.]\n          options:\n            docstring_style: numpy\n")
    res = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    problems = build_problems(res)
    assert problems and any("WARNING" in p for p in problems), res.stdout + res.stderr
    (tmp_path / "badmod.py").write_text('def f(x):\n    """One."""\n')  # the same site, fixed: no problem
    assert build_problems(mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")) == []


def test_public_verbs_at_the_top_level():
    """export_model, save_model and load_model are importable from edgeseq itself, are the functions
    the API page documents, and the README uses the short import."""
    import edgeseq
    from edgeseq.export.writer import export_model
    from edgeseq.io.model_io import load_model, save_model

    assert (edgeseq.export_model, edgeseq.save_model, edgeseq.load_model) == (export_model, save_model, load_model)
    assert {"export_model", "save_model", "load_model"} <= set(dir(edgeseq))
    api = (DOCS / "api.md").read_text(encoding="utf-8")
    for name in ("export.writer.export_model", "edgeseq.save_model", "edgeseq.load_model"):
        assert f"::: {name}" in api, name
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "edgeseq.export.writer" not in readme and re.search(r"from edgeseq import .*export_model", readme)
    with pytest.raises(AttributeError):  # negative control: the lazy lookup does not invent names
        edgeseq.export_everything
