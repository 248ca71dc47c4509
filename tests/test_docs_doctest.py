"""The Examples in the public API's docstrings run, and say what they show.

doctest runs on the modules that define the public entry points (the ones the API reference page
renders), not through a global pytest option, so the rest of the suite is unaffected. Every public
entry point must carry an Examples section with at least one example, so the test cannot pass by
finding none; a deliberately wrong example must fail.
"""

from __future__ import annotations

import doctest
import importlib
import types

import pytest

# public entry point -> defining module (where doctest finds its docstring)
PUBLIC = {
    "AnytimeRegressor": "edgeseq.train.linear.regressor",
    "AnytimeClassifier": "edgeseq.train.linear.classifier",
    "FittedSequence": "edgeseq.forms.linear",
    "AnytimeSession": "edgeseq.runtime.session",
    "anytime_curve": "edgeseq.evaluate.anytime",
    "AnytimeCurve": "edgeseq.metrics.curves",
    "oracle_curve": "edgeseq.metrics.curves",
    "alpha_stopping_cost": "edgeseq.metrics.timeliness",
    "plateau_alpha": "edgeseq.metrics.timeliness",
    "timeliness": "edgeseq.metrics.timeliness",
    "save_model": "edgeseq.io.model_io",
    "load_model": "edgeseq.io.model_io",
    "export_model": "edgeseq.export.writer",
    "EdgeseqError": "edgeseq.errors",
    "ExportedModel": "edgeseq.runtime.model",
    "sequence_from_gram": "edgeseq.train.linear.functional",
    "resolve_prefix": "edgeseq.budget",
    "sample_rows": "edgeseq.forms.linear",
    "fold_prefix": "edgeseq.train.linear.fold",
    "CholeskyFactor": "edgeseq.train.linear.kernel",
    "conclusion": "edgeseq.evaluate.report",
    "sequence_trees": "edgeseq.train.trees.tree_sequencing",
    "AnytimeNetClassifier": "edgeseq.train.neural.estimators",
    "AnytimeNetRegressor": "edgeseq.train.neural.estimators",
    "loss_weights": "edgeseq.train.neural.schemes",
    "LayerBlockModel": "edgeseq.forms.layer_blocks",
    "fold_statistics": "edgeseq.train.linear.auto",
}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def examples_of(obj) -> list[doctest.Example]:
    test = doctest.DocTestFinder(recurse=False).find(obj, obj.__name__)
    return [ex for t in test for ex in t.examples]


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_entry_point_has_a_numpydoc_examples_section(name):
    obj = getattr(importlib.import_module(PUBLIC[name]), name)
    doc = obj.__doc__ or ""
    assert "Examples\n    --------" in doc or "Examples\n--------" in doc, f"{name} has no Examples section"
    assert examples_of(obj), f"{name}'s Examples section has no runnable example"


@pytest.mark.parametrize("module", sorted(set(PUBLIC.values())))
def test_docstring_examples_run(module, tmp_path, monkeypatch, doctest_namespace):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    result = doctest.testmod(importlib.import_module(module), optionflags=FLAGS, report=True,
                             extraglobs=dict(doctest_namespace))  # toy_export (tests/conftest.py)
    assert result.attempted > 0 and result.failed == 0, result


def _all_modules() -> list[str]:
    import pkgutil

    import edgeseq
    import edgeseq.export

    names = []
    for pkg in (edgeseq, edgeseq.export):
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
    return sorted(set(names) - {"edgeseq.export.skl2onnx_converter"})  # imports skl2onnx converters on load


@pytest.mark.parametrize("module", _all_modules())
def test_every_example_in_the_package_runs(module, tmp_path, monkeypatch, doctest_namespace):
    """Not only the public entry points: any Examples section anywhere must stay true."""
    if module in ("edgeseq.export.c_arm", "edgeseq.export.c_int16_run"):
        from edgeseq.export.c_arm import missing_tools
        if missing_tools():  # its examples build and run firmware on an emulated core
            pytest.skip(missing_tools())
    monkeypatch.chdir(tmp_path)
    result = doctest.testmod(importlib.import_module(module), optionflags=FLAGS, report=True,
                             extraglobs=dict(doctest_namespace))
    assert result.failed == 0, result
    wrote = sorted(p.name for p in tmp_path.iterdir())
    assert wrote == [], f"{module}'s examples wrote {wrote} into the working directory (use a temporary directory)"


def test_a_wrong_example_fails():
    fake = types.ModuleType("fake")
    fake.__doc__ = ">>> 1 + 1\n3\n"
    result = doctest.testmod(fake, optionflags=FLAGS, report=False)
    assert result.failed == 1


# Modules whose every public class, function and method must carry a runnable Examples section
# (issue 10). Extend this list as more modules are brought up to the standard.
def _enforced_modules() -> list[str]:
    """Every module of edgeseq and edgeseq.export, except the click command modules (documented by the
    generated CLI reference) and the skl2onnx registration shim."""
    return [m for m in _all_modules() if not m.startswith("edgeseq.cli.") or m == "edgeseq.cli.progress"]


EXAMPLES_EVERYWHERE = _enforced_modules()


def _has_examples(obj) -> bool:
    doc = getattr(obj, "__doc__", None) or ""
    section = "Examples\n" in doc and "--------" in doc.split("Examples\n", 1)[1][:40]
    return section and bool(examples_of(obj))


def _public_members(module: types.ModuleType):
    """(qualified name, object) of every public class/function defined in `module`, and their public methods.

    Methods are those a class defines itself (its own ``__dict__``): methods inherited from
    scikit-learn or builtins need nothing. Properties count as methods (their getter's docstring).
    """
    for name in getattr(module, "_LAZY_CLASSES", ()):  # edgeseq.errors creates some classes on first access
        getattr(module, name)
    for name, obj in list(vars(module).items()):
        if name.startswith("_") or not (isinstance(obj, type) or isinstance(obj, types.FunctionType)):
            continue
        if getattr(obj, "__module__", None) != module.__name__:
            continue  # imported, not defined here
        yield name, obj
        if isinstance(obj, type):
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                elif isinstance(member, property):
                    member = member.fget
                if isinstance(member, types.FunctionType):
                    yield f"{name}.{attr}", member


def undocumented(module: types.ModuleType) -> list[str]:
    """Public members of `module` without an Examples section holding at least one ``>>>`` example."""
    return [f"{module.__name__}.{q}" for q, obj in _public_members(module) if not _has_examples(obj)]


def test_every_public_member_in_scope_has_a_runnable_example():
    missing = [name for mod in EXAMPLES_EVERYWHERE for name in undocumented(importlib.import_module(mod))]
    assert not missing, "public members without an Examples section with a >>> example:\n" + "\n".join(missing)


def test_the_examples_check_reports_an_undocumented_function_and_method():
    fake = types.ModuleType("fake_scope")
    src = '''
def documented():
    """Add.

    Examples
    --------
    >>> 1 + 1
    2
    """

def bare():
    """No example here."""

def _private():
    pass

class Thing:
    """A thing.

    Examples
    --------
    >>> Thing().size
    3
    """

    @property
    def size(self):
        """Three, without an example."""
        return 3

    def _hidden(self):
        pass

from os.path import join  # imported: not this module's to document
'''
    exec(compile(src, "fake_scope", "exec"), fake.__dict__)
    assert undocumented(fake) == ["fake_scope.bare", "fake_scope.Thing.size"]
