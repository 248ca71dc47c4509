"""The import graph of edgeseq's own modules, read from the source with `ast` (nothing is imported).

Every module under ``edgeseq/`` and ``export/`` (installed as ``edgeseq.export``) is a node; an edge
``a -> b`` means a statement in ``a`` imports ``b`` -- at module level or inside a function, since a
function-level import is a dependency all the same, only a later one. ``from pkg import name`` counts
as an import of ``pkg.name`` when that is a module, else of ``pkg``; relative imports are resolved.

Run it as a script to print the cycles and the imports that go against the layer order::

    python tests/import_graph.py

`tests/test_layering.py` asserts both lists are empty (up to its commented allow-list).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# source folder -> the package name it is installed as
SOURCE_FOLDERS = {"edgeseq": "edgeseq", "export": "edgeseq.export"}

# The layer order, lowest first. A module may import modules of its own layer or of a lower one, never
# of a higher one. The most specific prefix names a module's layer.
#   0 contract: errors, messages, the format contract, the budget rule (what every other layer shares)
#   1 intermediate forms (edgeseq.forms: numpy-only fitted models, their group description), the anytime
#     metrics (edgeseq.metrics, numpy-only) and the Python runtime
#   2 training and I/O (model files, data, device costs), the feature extractors and the device tool
#   3 exporters (ONNX, C, int16)
#   4 evaluation (verify, curves, reports)
#   5 the command line
LAYERS = {
    "edgeseq": 0, "edgeseq._source_tree": 0, "edgeseq.errors": 0, "edgeseq.messages": 0, "edgeseq.format": 0,
    "edgeseq.budget": 0, "edgeseq.schema": 0,
    "edgeseq.forms": 1, "edgeseq.metrics": 1,
    "edgeseq.runtime": 1,
    "edgeseq.train": 2, "edgeseq.io": 2, "edgeseq.extractors": 2, "edgeseq.device": 2,
    "edgeseq.export": 3,
    "edgeseq.evaluate": 4,
    "edgeseq.cli": 5,
}
LAYER_NAMES = ("contract", "intermediate forms + runtime", "train, io", "export", "evaluate", "cli")
# modules that are a layer of their own inside a package of another layer (for the package-level graph)
FORM_MODULES: tuple = ()  # every form lives in edgeseq.forms now, a unit of its own


def modules(root: Path = ROOT, folders: dict = SOURCE_FOLDERS) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` under the mapped source folders."""
    out = {}
    for folder, package in folders.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def _owner(name: str, known) -> str | None:
    """The longest known module that `name` is or lies inside (None for third-party names)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the set of known modules it imports anywhere in its source."""
    graph = {}
    for module, path in mods.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(_owner(a.name, mods) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    deps.add(sub if sub in mods else _owner(target, mods))
        deps.discard(None)
        deps.discard(module)
        graph[module] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (each holds at least one cycle)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):  # Tarjan; the graph has about 200 nodes, recursion depth is no concern
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer_of(module: str) -> int:
    """The layer of `module` by its most specific prefix in LAYERS (KeyError for an unplaced module)."""
    owner = _owner(module, LAYERS)
    if owner is None:
        raise KeyError(f"{module} has no layer: add it to LAYERS in tests/import_graph.py")
    return LAYERS[owner]


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every edge (a, b) where b lies in a higher layer than a."""
    return {(a, b) for a, deps in graph.items() for b in deps if layer_of(b) > layer_of(a)}


def unit_of(module: str) -> str:
    """The module's package-level unit: an intermediate form is its own unit, else its subpackage."""
    owner = _owner(module, FORM_MODULES)
    if owner is not None:
        return owner
    parts = module.split(".")
    return ".".join(parts[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph collapsed to package-level units (``edgeseq.train``, ``edgeseq.io``, ...)."""
    out: dict[str, set[str]] = {}
    for a, deps in graph.items():
        out.setdefault(unit_of(a), set()).update(unit_of(b) for b in deps if unit_of(b) != unit_of(a))
    return out


if __name__ == "__main__":
    g = import_graph(modules())
    print("module cycles:", cycles(g) or "none")
    print("package cycles:", cycles(package_graph(g)) or "none")
    for a, b in sorted(upward_imports(g)):
        print(f"upward: {a} ({LAYER_NAMES[layer_of(a)]}) imports {b} ({LAYER_NAMES[layer_of(b)]})")
