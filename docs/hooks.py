"""mkdocs hook: the benchmark tables are generated from ``bench/results/*.json`` when the site is built.

Why a hook: a measured figure typed into a page goes stale the moment the code changes; a table
rendered from the file the benchmark wrote cannot disagree with it. The page ``benchmarks.md`` holds
the marker ``<!-- bench-results -->``; :func:`on_page_markdown` replaces it with one section per
benchmark script in ``bench/`` (and per result file without a script), each naming the command that
produces it and the machine the result file records.

A result file may carry ``"command"`` (str) and ``"machine"`` (str or dict) at its top level, and
``"tables"`` (a list of ``{"title", "columns", "rows"}``) to choose its own layout. Files without
``tables`` are shown by a renderer written for them (:data:`RENDERERS`) or, failing that, as a
table of their scalar fields. A missing, unreadable or unexpected file never breaks the build: its
section says so and gives the command to (re)run.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

MARKER = "<!-- bench-results -->"
VERDICT_MARKER = "<!-- tree-orders-verdict -->"
CHOICE_MARKER = "<!-- tree-orders-choice -->"  # "Which model should I use?": every method ranked per data set
# a figure in prose: <!-- tree-orders: data set / method or "best linear" / score [/ vs] --> (see below)
FIGURE_MARKER = re.compile(r"<!-- tree-orders: *([^/>]+?) */ *([^/>]+?) */ *([a-z_]+)(?: */ *(vs))? *-->")
LINEAR = ("CS-G-OMP (linear)", "CS-G-FR (linear)")
NONLINEAR = ("AFR", "LightGBM (cost-sequenced)", "LightGBM (boosting order)", "LightGBM-CEGB", "LightGBM-CEGB (tuned)",
             "AnytimeBoosting (stagewise)", "AnytimeBoosting (stagewise, no refit)")
ROOT = Path(__file__).resolve().parents[1]
MAX_GENERIC_ROWS = 60
# one benchmark's declared tables inside another page: <!-- bench-tables: name --> (bench/results/name.json);
# <!-- bench-tables: name / Title start --> keeps only the tables whose title starts so
TABLES_MARKER = re.compile(r"<!-- bench-tables: *([a-z0-9_]+) *(?:/ *([^>]+?) *)?-->")


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001  (mkdocs hook signature)
    """Replace the benchmarks marker with the generated sections; resolve lazy top-level names."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, render_benchmarks(ROOT / "bench"))
    if VERDICT_MARKER in markdown:
        markdown = markdown.replace(VERDICT_MARKER, render_tree_order_verdict(ROOT / "bench" / "results"
                                                                              / "tree_orders.json"))
    if CHOICE_MARKER in markdown:
        markdown = markdown.replace(CHOICE_MARKER, render_tree_order_choice(ROOT / "bench" / "results"
                                                                            / "tree_orders.json"))
    if FIGURE_MARKER.search(markdown):
        markdown = render_tree_order_figures(markdown, ROOT / "bench" / "results" / "tree_orders.json")
    if TABLES_MARKER.search(markdown):
        markdown = TABLES_MARKER.sub(lambda m: render_result_tables(ROOT / "bench", m.group(1), m.group(2)), markdown)
    return resolve_lazy_names(markdown)


def render_result_tables(bench_dir: Path, name: str, title_start: str | None = None) -> str:
    """The tables of ``bench/results/<name>.json`` with its command and machine, for a page of its own;
    with `title_start`, only the tables whose title starts with it (one table of a long file).

    >>> import json, tempfile
    >>> d = Path(tempfile.mkdtemp()); (d / "results").mkdir()
    >>> _ = (d / "results" / "x.json").write_text(json.dumps({"tables": [{"title": "T", "columns": ["a"],
    ...     "rows": [[1.5]]}], "command": "python bench/x.py", "machine": "m"}))
    >>> print(render_result_tables(d, "x"))
    Command: `python bench/x.py`; machine: m.
    <BLANKLINE>
    ### T
    <BLANKLINE>
    | a |
    |---|
    | 1.5 |
    <BLANKLINE>
    >>> render_result_tables(d, "y")
    '**Not yet measured**: there is no `bench/results/y.json`; run `python bench/y.py`.\\n'
    >>> "### T" in render_result_tables(d, "x", "T"), "### T" in render_result_tables(d, "x", "U")
    (True, False)
    """
    path = Path(bench_dir) / "results" / f"{name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        body = render_declared_tables([t for t in data["tables"] if title_start is None
                                       or str(t.get("title", "")).startswith(title_start)])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return f"**Not yet measured**: there is no `bench/results/{name}.json`; run `python bench/{name}.py`.\n"
    command = data.get("command") or f"python bench/{name}.py"
    return "\n".join([f"Command: `{command}`; machine: {machine_text(data, path.with_suffix('.md'))}.", "", *body])


def resolve_lazy_names(markdown: str) -> str:
    """``::: edgeseq.Name`` -> ``::: <defining module>.Name`` for the names ``edgeseq`` loads lazily.

    The package exposes its estimators through PEP 562 ``__getattr__`` (so a device never imports
    the trainer), which static documentation tools cannot follow; the package's own table of lazy
    names says where each one is defined, so the pages can keep the public spelling.
    """
    import edgeseq

    lazy = getattr(edgeseq, "_LAZY", {})
    for name, module in lazy.items():
        markdown = markdown.replace(f"::: edgeseq.{name}\n", f"::: {module}.{name}\n")
    return markdown


# ----------------------------------------------------------------------------- discovery
def render_benchmarks(bench_dir: Path) -> str:
    """Markdown for every benchmark script and every result file under ``bench_dir``."""
    bench_dir = Path(bench_dir)
    results = bench_dir / "results"
    scripts = {p.stem: p for p in sorted(bench_dir.glob("*.py")) if not p.stem.startswith("_")}  # _x.py: helpers
    jsons = {p.stem: p for p in sorted(results.glob("*.json"))} if results.is_dir() else {}
    parts = []
    for name in sorted(set(scripts) | set(jsons)):
        script = scripts.get(name)
        parts.append(render_one(name, script, jsons.get(name), results / f"{name}.json"))
    if not parts:
        return "No benchmark scripts or result files were found.\n"
    return "\n".join(parts)


def script_summary(script: Path | None) -> str:
    """First line of the script's module docstring (read with ``ast``, never imported)."""
    if script is None:
        return ""
    try:
        doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8")))
    except (OSError, SyntaxError, ValueError):
        return ""
    return md_cell(doc.strip().splitlines()[0]) if doc else ""


def writes_results(script: Path) -> bool:
    """Whether the script's source mentions the results folder (so running it writes the file)."""
    try:
        return "results" in script.read_text(encoding="utf-8")
    except OSError:
        return False


def render_one(name: str, script: Path | None, result: Path | None, expected: Path) -> str:
    """One section: title, what the script measures, command, machine and the tables."""
    default_cmd = f"python bench/{name}.py" if script is not None else None
    lines = [f"## {name}", ""]
    summary = script_summary(script)
    if summary:
        lines += [summary, ""]
    rel = f"bench/results/{expected.name}"
    if result is None:
        lines += [f"**Not yet measured**: there is no `{rel}`."]
        if default_cmd and writes_results(script):
            lines += ["", f"Produce it with `{default_cmd}`.", ""]
        elif default_cmd:
            lines += [f"This benchmark prints its figures but does not write `{rel}` yet; run "
                      f"`{default_cmd}` to see them.", ""]
        return "\n".join(lines)
    try:
        data = json.loads(result.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        lines += [f"**Could not read** `{rel}` ({md_cell(type(exc).__name__)}); re-run the benchmark"
                  + (f": `{default_cmd}`." if default_cmd else "."), ""]
        return "\n".join(lines)
    command = data.get("command") if isinstance(data, dict) and isinstance(data.get("command"), str) else default_cmd
    lines += [f"Command: `{command}`" if command else "Command: not recorded.", "",
              f"Machine: {machine_text(data, result.with_suffix('.md'))}", "", f"Source: `{rel}`.", ""]
    try:
        if isinstance(data, dict) and isinstance(data.get("tables"), list):
            body = render_declared_tables(data["tables"])
        elif name in RENDERERS:
            body = RENDERERS[name](data)
        else:
            body = render_generic(data)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        body = [f"The file's layout is not the one this page knows ({md_cell(type(exc).__name__)}: "
                f"{md_cell(exc)}); its scalar fields:", "", *render_generic(data)]
    return "\n".join(lines + body + [""])


# ----------------------------------------------------------------------------- formatting
def md_cell(value) -> str:
    """Text safe inside a markdown table cell or paragraph (no pipes, no newlines, no raw HTML)."""
    text = str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return text.replace("<", "&lt;").replace(">", "&gt;")


def machine_text(data, sibling_md: Path | None = None) -> str:
    """The machine the result file records, or a plain statement that it records none.

    Benchmarks that predate the ``"machine"`` key wrote it only into the Markdown summary they
    produce in the same run (``Measured by `CMD` (MACHINE).``); that line is used then, and the text
    says where it comes from.
    """
    machine = data.get("machine") if isinstance(data, dict) else None
    if isinstance(machine, str) and machine.strip():
        return md_cell(machine)
    if isinstance(machine, dict) and machine:
        return md_cell(", ".join(f"{k}: {v}" for k, v in machine.items() if not isinstance(v, (dict, list))))
    run = summary_machine(sibling_md)
    parts = [md_cell(run) + f" (recorded by the same run in `bench/results/{sibling_md.name}`)" if run
             else "the run's machine is not recorded in the file"]
    # per-dataset records of where the costs were measured (anytime_quality writes these)
    if isinstance(data, dict):
        for key, sub in data.items():
            m = sub.get("costs_measured_on") if isinstance(sub, dict) else None
            if isinstance(m, dict):
                parts.append(md_cell(f"{key}: costs measured on {m.get('cpu', '?')}, {m.get('machine', '?')} "
                                     f"({str(m.get('date', '?'))[:10]})"))
    return "; ".join(parts) + "."


def summary_machine(md: Path | None) -> str:
    """MACHINE from a first line ``Measured by `...` (MACHINE).`` of a benchmark's Markdown summary."""
    try:
        first = md.read_text(encoding="utf-8").splitlines()[0] if md is not None and md.is_file() else ""
    except (OSError, UnicodeDecodeError, IndexError):
        return ""
    m = re.match(r"Measured by `[^`]*` \((.+)\)\.\s*$", first)
    return m.group(1) if m else ""


def fmt(x) -> str:
    """A number with 4 significant digits (integers as they are)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return md_cell(x)
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return str(x)
    return f"{x:.4g}"


def mean_std(values) -> tuple[float, float]:
    """Mean and population standard deviation (ddof 0, numpy's default, as the benchmark reports)."""
    vals = [float(v) for v in values]
    mean = sum(vals) / len(vals)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))


def median(values) -> float:
    vals = sorted(float(v) for v in values)
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else 0.5 * (vals[mid - 1] + vals[mid])


def table(columns, rows) -> list[str]:
    out = ["| " + " | ".join(md_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return out


# ----------------------------------------------------------------------------- renderers
def render_declared_tables(tables) -> list[str]:
    """Tables a result file lays out itself: ``[{"title", "columns", "rows"}, ...]``."""
    out = []
    for t in tables:
        out += [f"### {md_cell(t.get('title', ''))}", ""] if t.get("title") else []
        out += table(t["columns"], t["rows"]) + [""]
    return out


def render_anytime_quality(data: dict) -> list[str]:
    """Test α-timeliness (mean ± standard deviation over splits) of every method, per data set, plus fit times."""
    out = []
    for ds, r in data.items():
        methods = list(r["timeliness"][0])
        lo, hi = r["cost_range"]
        out += [f"### {md_cell(ds)}", "",
                f"{r['n']} samples, {r['groups']} groups, {r['features']} features, group costs "
                f"{fmt(lo)} to {fmt(hi)} (cost units of the bank's calibration). "
                f"λ = {fmt(r['l2'])} (chosen on a validation split); α per split: "
                f"{', '.join(fmt(a) for a in r['alphas'])}.", ""]
        rows = []
        for kind in ("step", "trapezoid"):
            stats = {m: mean_std([split[m][kind] for split in r["timeliness"]]) for m in methods}
            best = max(stats.values())[0]
            rows.append([kind] + [(f"**{s[0]:.4f}**" if s[0] == best else f"{s[0]:.4f}") + f" ± {s[1]:.4f}"
                                  for s in stats.values()])
        out += ["Test α-timeliness, mean ± standard deviation over the splits (best in bold):", "",
                "| timeliness | " + " | ".join(md_cell(m) for m in methods) + " |",
                "|" + "---|" * (len(methods) + 1)]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        out += [""]
        secs = r.get("fit_seconds") or {}
        if secs:
            out += ["Fit time, median over splits (seconds): "
                    + ", ".join(f"{md_cell(k)} {fmt(median(v))}" for k, v in secs.items()) + ".", ""]
    return out


def flatten(data, prefix="") -> list[tuple[str, object]]:
    """(dotted key, scalar) pairs of a JSON document."""
    if isinstance(data, dict):
        items = [(f"{prefix}.{k}" if prefix else str(k), v) for k, v in data.items()]
    elif isinstance(data, list):
        items = [(f"{prefix}[{i}]", v) for i, v in enumerate(data)]
    else:
        return [(prefix or "value", data)]
    out = []
    for key, value in items:
        if key in ("command", "machine"):
            continue
        out += flatten(value, key) if isinstance(value, (dict, list)) else [(key, value)]
    return out


def render_generic(data) -> list[str]:
    """A result file nobody wrote a renderer for: its scalar fields, as recorded."""
    pairs = flatten(data)
    if not pairs:
        return ["The file holds no figures."]
    out = table(["field", "value"], pairs[:MAX_GENERIC_ROWS])
    if len(pairs) > MAX_GENERIC_ROWS:
        out.append(f"\n({len(pairs) - MAX_GENERIC_ROWS} more fields in the file.)")
    return out


def verdict(a: tuple[float, float], b: tuple[float, float]) -> str:
    """"higher"/"lower" when mean a differs from mean b by more than their spreads combined, else a tie.

    Examples
    --------
    >>> verdict((0.9, 0.01), (0.8, 0.02)), verdict((0.8, 0.05), (0.82, 0.01)), verdict((0.7, 0.0), (0.8, 0.0))
    ('higher', 'within the spread', 'lower')
    """
    spread = math.hypot(a[1], b[1])
    if a[0] - b[0] > spread:
        return "higher"
    if b[0] - a[0] > spread:
        return "lower"
    return "within the spread"


def render_tree_order_verdict(path: Path) -> str:
    """Per data set: each nonlinear method's timeliness next to the better linear model's, and which is higher.

    Generated from the per-split records of ``bench/tree_orders.py`` so the page's statements follow
    the measurements; "higher"/"lower" need a difference larger than the two spreads over splits
    combined (one split has no spread, which the table says).
    """
    try:
        runs = json.loads(Path(path).read_text(encoding="utf-8"))["runs"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return f"**Not yet measured**: `bench/results/{Path(path).name}` has no per-split runs; run `python bench/tree_orders.py`.\n"
    cols = ["data set", "method", "splits", "α-timeliness", "best linear (α)", "vs linear (α)",
            "timeliness [0, total]", "best linear ([0, total])", "vs linear ([0, total])"]
    rows = []
    for name, by_method in runs.items():
        stats = {m: {k: mean_std([r[k] for r in v["splits"]]) for k in ("alpha_timeliness", "step_timeliness")}
                 for m, v in by_method.items()}
        linear = [m for m in LINEAR if m in stats]
        if not linear:
            continue
        for m in (m for m in NONLINEAR if m in stats):
            row = [name, m, len(by_method[m]["splits"])]
            for key in ("alpha_timeliness", "step_timeliness"):
                best = max(linear, key=lambda lm: stats[lm][key][0])
                mine, ref = stats[m][key], stats[best][key]
                row += [f"{mine[0]:.3f} ± {mine[1]:.3f}", f"{best}: {ref[0]:.3f} ± {ref[1]:.3f}", verdict(mine, ref)]
            rows.append(row)
    return "\n".join(table(cols, rows)) + "\n"


def render_tree_order_choice(path: Path) -> str:
    """Per data set, every method ranked by its mean timeliness over [0, total cost], with its
    α-timeliness, full-budget accuracy and the gap of each to the best method (a negative gap larger
    than the two spreads combined is marked "lower", per `verdict`).

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> rec = lambda s, a, f: {"step_timeliness": s, "alpha_timeliness": a, "final_accuracy": f}
    >>> runs = {"toy": {"A": {"splits": [rec(0.9, 0.8, 0.95)]}, "B": {"splits": [rec(0.7, 0.8, 0.96)]}}}
    >>> path = Path(tempfile.mkdtemp()) / "tree_orders.json"; _ = path.write_text(json.dumps({"runs": runs}))
    >>> print(render_tree_order_choice(path).splitlines()[3])
    | toy | 2 | B | 1 | 0.700 ± 0.000 (lower than A) | 0.800 ± 0.000 | 0.960 ± 0.000 |
    """
    try:
        runs = json.loads(Path(path).read_text(encoding="utf-8"))["runs"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return f"**Not yet measured**: `bench/results/{Path(path).name}` has no per-split runs.\n"
    keys = ("step_timeliness", "alpha_timeliness", "final_accuracy")
    cols = ["data set", "rank", "method", "splits", "timeliness [0, total]", "α-timeliness", "final accuracy"]
    rows = []
    for name, by_method in runs.items():
        stats = {m: {k: mean_std([r[k] for r in v["splits"]]) for k in keys} for m, v in by_method.items()}
        ranked = sorted(stats, key=lambda m: -stats[m]["step_timeliness"][0])
        for rank, m in enumerate(ranked, 1):
            st = stats[m]["step_timeliness"]
            best = stats[ranked[0]]["step_timeliness"]
            note = f" (lower than {ranked[0]})" if rank > 1 and verdict(st, best) == "lower" else ""
            rows.append([name, rank, m, len(by_method[m]["splits"]), f"{st[0]:.3f} ± {st[1]:.3f}{note}",
                         *(f"{stats[m][k][0]:.3f} ± {stats[m][k][1]:.3f}" for k in keys[1:])])
    return "\n".join(table(cols, rows)) + "\n"


def render_tree_order_figures(markdown: str, path: Path) -> str:
    """Replace every inline ``<!-- tree-orders: data set / method / score [/ vs] -->`` with its figure.

    Why: the prose that discusses the measurements must not carry a number typed by hand. The marker
    names a data set, a method (or ``best linear``: the linear model with the higher mean) and a score
    of the per-split records (``alpha_timeliness``, ``step_timeliness``, ``final_accuracy``, ``fit_s``);
    it becomes "mean ± std (n splits)", or with ``/ vs`` the method's comparison with the best linear
    model: "higher than", "lower than" or "within the spread of" (the rule of the verdict table). A
    figure the file does not hold renders as "(not measured)", never as a guess; a fit the benchmark
    stopped at its time limit (the file's ``unfinished`` key) renders its ``fit_s`` / ``fit_cpu_s``
    as a lower bound, "more than N (split s stopped after k stage lines)".

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> runs = {"toy": {"AFR": {"splits": [{"fit_s": 1.0}, {"fit_s": 3.0}]},
    ...                 "CS-G-OMP (linear)": {"splits": [{"fit_s": 9.0}, {"fit_s": 9.0}]}}}
    >>> path = Path(tempfile.mkdtemp()) / "tree_orders.json"; _ = path.write_text(json.dumps({"runs": runs}))
    >>> render_tree_order_figures("AFR took <!-- tree-orders: toy / AFR / fit_s --> s, "
    ...                           "<!-- tree-orders: toy / AFR / fit_s / vs --> <!-- tree-orders: toy / best linear / fit_s -->; "
    ...                           "<!-- tree-orders: toy / nope / fit_s -->", path)
    'AFR took 2.000 ± 1.000 (2 splits) s, lower than 9.000 ± 0.000 (2 splits); (not measured)'
    >>> _ = path.write_text(json.dumps({"runs": runs, "unfinished": {"toy": {"slow": {
    ...     "seed": 0, "wall_s": 700.4, "cpu_s": 650.0, "stages": [[1.0, 1.0, "stage 1"]]}}}}))
    >>> render_tree_order_figures("<!-- tree-orders: toy / slow / fit_s --> s", path)
    'more than 700 (split 0 stopped after 1 stage line) s'
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        runs, stopped = doc["runs"], doc.get("unfinished", {})
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        runs, stopped = {}, {}

    def stats(name: str, method: str, score: str):
        by_method = runs.get(name, {}) if isinstance(runs, dict) else {}
        if method == "best linear":
            linear = [m for m in LINEAR if stats(name, m, score) is not None]
            return max((stats(name, m, score) for m in linear), key=lambda st: st[0], default=None)
        try:
            values = [r[score] for r in by_method[method]["splits"]]
        except (KeyError, TypeError):
            return None
        return (*mean_std(values), len(values)) if values else None

    def figure(match) -> str:
        name, method, score, vs = match.groups()
        mine = stats(name, method, score)
        if vs:
            ref = stats(name, "best linear", score)
            if mine is None or ref is None:
                return "(not measured)"
            return {"higher": "higher than", "lower": "lower than"}.get(verdict(mine[:2], ref[:2]),
                                                                        "within the spread of")
        if mine is None:
            try:
                r = stopped[name][method]
                lines = len(r["stages"])
                return (f"more than {r[{'fit_s': 'wall_s', 'fit_cpu_s': 'cpu_s'}[score]]:.0f} (split {r['seed']} "
                        f"stopped after {lines} stage line{'s' if lines != 1 else ''})")
            except (KeyError, TypeError, ValueError):
                return "(not measured)"
        return f"{mine[0]:.3f} ± {mine[1]:.3f} ({mine[2]} split{'s' if mine[2] != 1 else ''})"

    return FIGURE_MARKER.sub(figure, markdown)


RENDERERS = {"anytime_quality": render_anytime_quality}
