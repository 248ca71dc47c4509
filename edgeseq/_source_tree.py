"""Make a source checkout importable as it stands.

The repository keeps ``export/`` and ``runtime_c/`` at its top level (the pipeline layout) while the
installed distribution places them inside the package as ``edgeseq.export`` and
``edgeseq.runtime_c``. A Python started in the repository root imports the *source* folder
``edgeseq/``, which has no ``export/`` inside, so without help ``import edgeseq.export`` would fail
there even when edgeseq is installed. This module adds a finder for exactly those two names, and only
when ``edgeseq`` is being imported from a checkout; an installed package never needs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_ROOT = _PACKAGE_DIR.parent
# subpackage -> the top-level folder of the checkout that holds it
MAPPED_FOLDERS = {"edgeseq.export": "export", "edgeseq.runtime_c": "runtime_c"}


class SourceTreeFinder:
    """Finds ``edgeseq.export`` and ``edgeseq.runtime_c`` in the checkout's top-level folders.

    Examples
    --------
    >>> SourceTreeFinder.find_spec("edgeseq.forms.linear") is None  # any other name: not ours
    True
    """

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        """The spec of ``edgeseq.export`` / ``edgeseq.runtime_c`` from the checkout; None for any other name.

        Part of the `importlib.abc.MetaPathFinder` protocol; returning None lets the normal finders
        handle every other module.

        Examples
        --------
        >>> SourceTreeFinder.find_spec("json") is None
        True
        >>> spec = SourceTreeFinder.find_spec("edgeseq.export")
        >>> spec.name, Path(spec.origin).name, Path(spec.origin).parent.name
        ('edgeseq.export', '__init__.py', 'export')
        """
        folder = MAPPED_FOLDERS.get(fullname)
        if folder is None:
            return None
        import importlib.util

        init = _ROOT / folder / "__init__.py"
        return importlib.util.spec_from_file_location(fullname, init,
                                                      submodule_search_locations=[str(init.parent)])


def in_checkout() -> bool:
    """True when this ``edgeseq`` is the source folder of a checkout (no ``export/`` inside it).

    Examples
    --------
    >>> import edgeseq.export
    >>> in_checkout() == (Path(edgeseq.export.__file__).parent.parent == _ROOT)
    True
    """
    return (not (_PACKAGE_DIR / "export").is_dir()
            and all((_ROOT / f / "__init__.py").is_file() for f in MAPPED_FOLDERS.values()))


def install() -> None:
    """Register the finder once, ahead of the path finders, when importing from a checkout.

    ``import edgeseq`` calls it; calling it again changes nothing.

    Examples
    --------
    >>> before = list(sys.meta_path)
    >>> install()
    >>> sys.meta_path == before                     # already done on import (or not needed)
    True
    >>> sum(f is SourceTreeFinder for f in sys.meta_path) == (1 if in_checkout() else 0)
    True
    """
    if in_checkout() and not any(isinstance(f, type) and issubclass(f, SourceTreeFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceTreeFinder)
