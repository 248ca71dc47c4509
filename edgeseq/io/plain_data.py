"""Prove that an object rebuilt from an untrusted model file holds data only.

The restricted unpickler decides which *classes* a file may name; this module checks the *state* it
gave their instances. A file can otherwise put a callable into an instance's ``__dict__`` under the
name of a method (``validate``, ``predict``...), and every later ``obj.validate()`` would call the
file's choice instead of edgeseq's code. So after loading, every value reachable from the object must
be plain data - numbers, strings, bytes, bool, None, numpy arrays and scalars of a plain dtype,
tuples/lists/dicts of those, and edgeseq's own data classes - and no instance attribute may shadow
something its class defines (other than a dataclass field, whose default lives on the class).
The walk is iterative and bounded in depth, so hostile nesting gives one error, not a RecursionError.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from edgeseq.errors import ModelFormatError
from edgeseq.messages import brief

MAX_DEPTH = 40  # real model files nest a few levels (wrapper -> estimator -> sequence -> metrics)
_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_KEY_TYPES = (str, int, float, bool, type(None))


def plain_dtype(dt) -> bool:
    """A dtype whose values are bytes only: no Python objects, no fields, no sub-arrays.

    Only such arrays can come from a model file without running code when they are read.

    Examples
    --------
    >>> import numpy as np
    >>> plain_dtype(np.dtype("float32")), plain_dtype(np.dtype("<U5"))
    (True, True)
    >>> plain_dtype(np.dtype(object)), plain_dtype(np.dtype([("a", "f8")])), plain_dtype("float32")
    (False, False, False)
    """
    return isinstance(dt, np.dtype) and not dt.hasobject and dt.subdtype is None and dt.names is None


def _scalar(v, where: str) -> bool:
    """True for a plain scalar (checked: text must be valid Unicode, which every writer can encode)."""
    if type(v) not in _SCALARS:
        return False
    if type(v) is str:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            _refuse(where, "holds text that is not valid Unicode (a lone surrogate)")
    return True


def _refuse(where: str, problem: str):
    raise ModelFormatError(f"model file: {where} {problem}; refusing to load it")


def _instance_state(obj, where: str) -> dict:
    """The attributes of an edgeseq instance, after proving none replaces something of its class."""
    cls = type(obj)
    state = getattr(obj, "__dict__", None)
    if type(state) is not dict:
        _refuse(where, f"is a {cls.__name__} without a plain attribute dictionary")
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    for key in state:
        if type(key) is not str:  # named by its type only: the repr of an object from a file is not ours to run
            _refuse(where, f"gives its {cls.__name__} an attribute whose name is of type {type(key).__name__}, "
                           "not a string")
        if key.startswith("__"):
            _refuse(where, f"gives its {cls.__name__} the attribute {brief(key)}")
        if key not in fields and any(key in vars(k) for k in cls.__mro__):
            _refuse(f"{where}.{brief(key, max_chars=60)}",
                    f"replaces the {cls.__name__} class's own attribute (methods cannot come from a file)")
    return state


def check_plain(obj, is_data_class, root: str = "model") -> None:
    """Raise ModelFormatError unless everything reachable from `obj` is plain data (see module doc).

    `is_data_class(type)` says which classes are edgeseq's own data classes (their instances are
    walked attribute by attribute). Shared references are walked once; cycles are refused (a cyclic
    structure would send later recursive code into infinite recursion).

    Examples
    --------
    >>> import numpy as np
    >>> check_plain({"w": np.zeros(3), "names": ("a", "b"), "n": 3}, lambda cls: False)
    >>> check_plain({"hook": print}, lambda cls: False)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: model file: ... refusing to load it
    >>> loop = []; loop.append(loop)
    >>> check_plain(loop, lambda cls: False)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: ...
    """
    stack = [(obj, 0, root, False)]
    on_path: set[int] = set()
    done: set[int] = set()
    while stack:
        x, depth, where, leaving = stack.pop()
        if leaving:
            on_path.discard(id(x))
            done.add(id(x))
            continue
        t = type(x)
        if _scalar(x, where):
            continue
        if t is np.ndarray:
            if not plain_dtype(x.dtype):
                _refuse(where, f"is an array of dtype {brief(str(x.dtype))}")
            continue
        if isinstance(x, np.generic):
            if not plain_dtype(x.dtype) or t.__module__ != "numpy":
                _refuse(where, f"is a numpy scalar of type {t.__name__}")
            continue
        if depth >= MAX_DEPTH:
            _refuse(where, f"nests containers deeper than {MAX_DEPTH} levels")
        if id(x) in on_path:
            _refuse(where, "contains itself (a cyclic structure)")
        if id(x) in done:
            continue
        on_path.add(id(x))
        stack.append((x, depth, where, True))
        if t is list or t is tuple:  # scalars are checked in place: the stack holds only containers
            stack.extend((v, depth + 1, f"{where}[{i}]", False) for i, v in enumerate(x)
                         if not _scalar(v, where))
        elif t is dict:
            for k, v in x.items():
                if type(k) not in _KEY_TYPES or not _scalar(k, where):
                    _refuse(where, f"has a dictionary key of type {type(k).__name__}")
                if not _scalar(v, where):
                    stack.append((v, depth + 1, f"{where}[{brief(k, max_chars=40)}]", False))
        elif is_data_class(t):
            stack.extend((v, depth + 1, f"{where}.{k}", False)
                         for k, v in _instance_state(x, where).items())
        else:
            _refuse(where, f"holds a {t.__name__}, which is not plain data")
