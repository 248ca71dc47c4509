"""Model files that can be passed around safely: pickle with a format version, restricted unpickling.

`save_model` wraps the object as ``{"format": "edgeseq-model", "format_version": 1, ...}``.
`load_model` also accepts a bare ``pickle.dump(est, f)`` of a fitted estimator or FittedSequence.
Either way the unpickler resolves only an explicit allowlist of globals: edgeseq's own model classes
and checked stand-ins for the few functions their pickles call (numpy's array/dtype/scalar rebuilders,
copyreg._reconstructor, _codecs.encode), which accept only the arguments real model pickles use, so
no builtin such as list/range/bytes can be called to blow a tiny file up into gigabytes. Files over
MAX_MODEL_BYTES (1 GiB; configurable) are refused before they are read. Anything else (``os.system``,
``builtins.eval``, ``subprocess.Popen``, sklearn internals...) raises ModelFormatError naming the
forbidden global, before it is ever called.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import math
import os
import pickle
import re
import struct

import numpy as np

from edgeseq.errors import InputError, ModelFormatError
from edgeseq.io.atomic import atomic_write_bytes
from edgeseq.io.bounded import read_bounded
from edgeseq.io.cost_provenance import check_cost_provenance
from edgeseq.io.plain_data import check_plain, plain_dtype
from edgeseq.messages import brief, clip
from edgeseq.forms.linear import FittedSequence

MODEL_FORMAT = "edgeseq-model"
MODEL_FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)

MAX_MODEL_BYTES = 1 << 30  # default cap on a model file's size; override with max_bytes= or the env var
MAX_BYTES_ENV = "EDGESEQ_MAX_MODEL_BYTES"


class _ObjectBase:
    """Stands in for builtins.object, which pickles name only as the `base` argument of
    copyreg._reconstructor; handing out the real (callable) object is not needed."""

    def __call__(self, *args):
        _refuse("builtins.object")


_OBJECT_BASE = _ObjectBase()


class _NdarrayClass:
    """Stands in for numpy.ndarray, which pickles name only as the class argument of `_reconstruct`.
    Handing out the real class would let a file call ``ndarray(shape, dtype)`` itself and allocate
    whatever the shape says (a 38-byte file asking for gigabytes)."""

    def __call__(self, *args):
        _refuse("numpy.ndarray")


_NDARRAY = _NdarrayClass()


def _refuse(what: str):
    raise ModelFormatError(f"model file calls {what} with arguments no edgeseq model pickle uses; "
                           "refusing to load it")


def _reconstructor(cls, base, state):
    """copyreg._reconstructor as protocols 0-1 use it: object.__new__ of an edgeseq model class."""
    if base is not _OBJECT_BASE or state is not None or not _is_edgeseq_model_class(cls):
        _refuse("copyreg._reconstructor")
    return object.__new__(cls)


def _encode(text, encoding):
    """_codecs.encode(str, "latin1"): how protocols 0-2 write bytes (output never longer than input)."""
    if type(text) is not str or encoding not in ("latin1", "latin-1"):
        _refuse("_codecs.encode")
    return text.encode("latin1")


def _empty_bytes(*args):
    """builtins.bytes(): protocols 0-2 write b"" as a call without arguments; bytes(N) would allocate."""
    if args:
        _refuse("builtins.bytes")
    return b""


# a dtype spec as numpy pickles it: plain bool/int/float/complex/str/bytes, no object, no subarray
_DTYPE_SPEC = re.compile(r"[<>=|]?(b1|[iu][1248]|f[248]|c(8|16)|[US][0-9]{1,9})")


def _dtype(spec, align=False, copy=True):
    if type(spec) is not str or not _DTYPE_SPEC.fullmatch(spec) or type(align) is not bool \
            or type(copy) is not bool:
        _refuse(f"numpy.dtype({spec!r:.40})")
    return np.dtype(spec, align, copy)


def _reconstruct(cls, shape, code):
    """numpy's array __reduce__ always writes _reconstruct(ndarray, (0,), b"b"): an empty array that
    BUILD then fills from the file's bytes (numpy checks their length against the shape)."""
    if cls is not _NDARRAY or shape != (0,) or code != b"b":
        _refuse("numpy _reconstruct")
    return np.ndarray.__new__(np.ndarray, (0,), "b")


def _scalar(dt, data=None):
    if not plain_dtype(dt) or type(data) is not bytes or len(data) != dt.itemsize:
        _refuse("numpy scalar")
    return np.frombuffer(data, dtype=dt)[0]


def _frombuffer(buf, dt, shape, order):
    """Protocol 5 arrays: a view of bytes already in the file, so the size is the file's."""
    if (not isinstance(buf, (bytes, bytearray)) or not plain_dtype(dt) or type(shape) is not tuple
            or not all(type(n) is int and n >= 0 for n in shape) or order not in ("C", "F")
            or math.prod(shape) * dt.itemsize != len(buf)):
        _refuse("numpy _frombuffer")
    return np.frombuffer(buf, dtype=dt).reshape(shape, order=order)


def _check_dtype_state(dt: np.dtype, state) -> None:
    """numpy's dtype.__setstate__ trusts its argument (a crafted one corrupts the dtype and crashes
    the interpreter later), so only the exact state numpy itself writes for this plain dtype is
    accepted - in either byte order."""
    if type(state) is tuple and len(state) == 8 and all(type(v) in (int, str, type(None)) for v in state) \
            and state[1] in ("<", ">", "|"):
        want = dt if state[1] == "|" else dt.newbyteorder(state[1])
        if want.__reduce__()[2] == state:
            return
    _refuse(f"numpy dtype state {clip(repr(state), 60)}")


def _check_array_state(state) -> None:
    """The state numpy writes for an array: (1, shape, plain dtype, fortran flag, raw bytes) with as
    many bytes as the shape needs (checked here, before numpy sees it)."""
    if type(state) is tuple and len(state) == 5:
        version, shape, dt, fortran, raw = state
        if (version == 1 and type(version) is int and type(shape) is tuple
                and all(type(n) is int and n >= 0 for n in shape) and plain_dtype(dt)
                and type(fortran) is bool and type(raw) is bytes and math.prod(shape) * dt.itemsize == len(raw)):
            return
    _refuse("numpy array state")


# Every global that pickles of FittedSequence, the estimators and the save_model wrapper reference,
# on every protocol (found by recording find_class while unpickling them; see tests/test_model_io.py):
# each maps to a checked stand-in that accepts only the arguments those pickles use, so no builtin
# (list, range, bytes(N), ...) can be called to turn a few bytes into gigabytes.
_ALLOWED = {("copyreg", "_reconstructor"): _reconstructor, ("copy_reg", "_reconstructor"): _reconstructor,
            ("_codecs", "encode"): _encode,
            ("builtins", "object"): _OBJECT_BASE, ("__builtin__", "object"): _OBJECT_BASE,
            ("builtins", "bytes"): _empty_bytes, ("__builtin__", "bytes"): _empty_bytes,
            ("numpy", "dtype"): _dtype, ("numpy", "ndarray"): _NDARRAY}
for _mod in ("numpy.core", "numpy._core"):
    _ALLOWED.update({(f"{_mod}.multiarray", "_reconstruct"): _reconstruct,
                     (f"{_mod}.multiarray", "scalar"): _scalar,
                     (f"{_mod}.numeric", "_frombuffer"): _frombuffer})


# Where edgeseq 0.1.0 (a flat package) defined the classes its model files name; files written then
# load into the same classes at their current home.
LEGACY_MODULES = {"edgeseq.regressor": "edgeseq.train.linear.regressor", "edgeseq.classifier": "edgeseq.train.linear.classifier",
                  "edgeseq.groups": "edgeseq.forms.groups", "edgeseq._base": "edgeseq.train.base"}
# Where edgeseq 0.2 defined them before the intermediate forms left train/ and train/ was split into
# family subpackages (linear, glm, trees, distributed): model files written then name these modules.
LEGACY_MODULES |= {
    "edgeseq.sequence": "edgeseq.forms.linear",
    "edgeseq.train.groups": "edgeseq.forms.groups",
    "edgeseq.train.trees": "edgeseq.forms.trees",
    "edgeseq.neural_stages": "edgeseq.forms.layer_blocks",
    "edgeseq.train.selection": "edgeseq.train.linear.selection",
    "edgeseq.train.regressor": "edgeseq.train.linear.regressor",
    "edgeseq.train.classifier": "edgeseq.train.linear.classifier",
    "edgeseq.train.basis": "edgeseq.train.linear.basis",
    "edgeseq.train.kernel": "edgeseq.train.linear.kernel",
    "edgeseq.train.sparse": "edgeseq.train.linear.sparse",
    "edgeseq.train.stats": "edgeseq.train.linear.stats",
    "edgeseq.train.fold": "edgeseq.train.linear.fold",
    "edgeseq.train.chunk_moments": "edgeseq.train.linear.chunk_moments",
    "edgeseq.train.group_stats": "edgeseq.train.linear.group_stats",
    "edgeseq.train.functional": "edgeseq.train.linear.functional",
    "edgeseq.train.auto": "edgeseq.train.linear.auto",
    "edgeseq.train.releasable": "edgeseq.train.linear.releasable",
    "edgeseq.train.glm_design": "edgeseq.train.glm.design",
    "edgeseq.train.glm_fit": "edgeseq.train.glm.fit",
    "edgeseq.train.glm_select": "edgeseq.train.glm.select",
    "edgeseq.train.afr": "edgeseq.train.trees.afr",
    "edgeseq.train.afr_svm": "edgeseq.train.trees.afr_svm",
    "edgeseq.train.cost_cart": "edgeseq.train.trees.cost_cart",
    "edgeseq.train.lightgbm_import": "edgeseq.train.trees.lightgbm_import",
    "edgeseq.train.stagewise_boosting": "edgeseq.train.trees.stagewise_boosting",
    "edgeseq.train.tree_sequencing": "edgeseq.train.trees.tree_sequencing",
    "edgeseq.train.dask_glm": "edgeseq.train.distributed.glm",
    "edgeseq.train.dask_logging": "edgeseq.train.distributed.logs",
    "edgeseq.train.dask_stats": "edgeseq.train.distributed.stats",
}


def _is_edgeseq_model_class(obj) -> bool:
    """Only edgeseq's own data classes: FittedSequence, the group spec, the tree-stage classes and the
    estimators."""
    if not isinstance(obj, type) or not obj.__module__.startswith("edgeseq."):
        return False
    from sklearn.base import BaseEstimator

    from edgeseq.forms.groups import GroupSpec
    from edgeseq.forms.layer_blocks import ConvBranch, Injection, LayerBlockModel, LayerBlockStage
    from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    return issubclass(obj, (FittedSequence, GroupSpec, BaseEstimator, TreeEnsemble, TreeStage, TreeStageModel,
                            LayerBlockModel, LayerBlockStage, Injection, ConvBranch))


class _RestrictedUnpickler(pickle._Unpickler):
    """The pure-Python unpickler, because only it lets BUILD be checked: the C one would let a file
    `setattr` on an allowed *class* (e.g. FittedSequence.validate = None) for the whole process."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def _load_build(self):
        target = self.stack[-2] if len(self.stack) >= 2 else None
        if isinstance(target, type) or not (isinstance(target, (np.ndarray, np.dtype))
                                            or _is_edgeseq_model_class(type(target))):
            raise ModelFormatError(f"model file sets the state of a {type(target).__name__} object; only "
                                   "edgeseq model instances and numpy arrays/dtypes are rebuilt that way, "
                                   "refusing to load it")
        if isinstance(target, np.dtype):
            _check_dtype_state(target, self.stack[-1])
        elif isinstance(target, np.ndarray):
            _check_array_state(self.stack[-1])
        elif type(self.stack[-1]) is not dict:
            # a (dict, slots) pair would be applied with setattr, running the class's descriptors
            raise ModelFormatError(f"model file sets the state of a {type(target).__name__} with a "
                                   f"{type(self.stack[-1]).__name__}, not an attribute dictionary; "
                                   "refusing to load it")
        pickle._Unpickler.load_build(self)

    dispatch[pickle.BUILD[0]] = _load_build

    def __init__(self, data: bytes):
        super().__init__(io.BytesIO(data))
        self._size = len(data)

    def _load_bytearray8(self):
        """BYTEARRAY8 as pickle does it, except that the declared length is checked against the file
        before the buffer is allocated (pickle allocates first: 11 bytes could ask for 2 GB)."""
        (n,) = struct.unpack("<Q", self.read(8))
        if n > self._size:
            raise ModelFormatError(f"model file declares a {n}-byte array but is only {self._size} bytes; "
                                   "refusing to load it")
        buf = bytearray(n)
        self.readinto(buf)
        self.append(buf)

    dispatch[pickle.BYTEARRAY8[0]] = _load_bytearray8

    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        module = LEGACY_MODULES.get(module, module)
        if (module == "edgeseq" or module.startswith("edgeseq.")) and "." not in name:
            try:
                obj = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError):
                raise ModelFormatError(f"model file references {module}.{name}, which this edgeseq "
                                       "version does not have; re-train or upgrade edgeseq") from None
            if _is_edgeseq_model_class(obj):
                return obj
        if module.split(".")[0] == "lightgbm":
            raise ModelFormatError(f"model file holds a pickled LightGBM {name}, not an edgeseq model; import it "
                                   f"first: {LIGHTGBM_HINT}")
        raise ModelFormatError(f"model file references the forbidden global {module}.{name}; "
                               "refusing to load it (only edgeseq models and numpy arrays)")


# where a LightGBM model given in place of an edgeseq model is sent
LIGHTGBM_HINT = ("edgeseq import-lightgbm MODEL.txt --groups GROUPS.json -o model.pkl "
                 "(Python: edgeseq.from_lightgbm(booster, groups, costs))")


def is_lightgbm_file(data: bytes) -> bool:
    r"""True for the start of a LightGBM model: the text of ``Booster.save_model`` or the JSON of
    ``dump_model`` (both name the model "tree" and give ``num_tree_per_iteration`` near the top).

    Examples
    --------
    >>> is_lightgbm_file(b"tree\nversion=v4\nnum_class=1\n"), is_lightgbm_file(b"\x80\x05...")
    (True, False)
    >>> is_lightgbm_file(b'{"name": "tree", "version": "v4", "num_tree_per_iteration": 1}')
    True
    """
    head = data[:2048]
    return head.startswith(b"tree\n") and b"version=" in head or \
        head.lstrip().startswith(b"{") and b'"num_tree_per_iteration"' in head


def read_lightgbm_file(path, max_bytes: int | None = None) -> dict | str:
    """The content of a LightGBM model file: the dict of a ``Booster.dump_model()`` JSON, or the text of
    ``Booster.save_model``.

    Neither is handed to LightGBM: the text is read by edgeseq's own bounded reader
    (`edgeseq.train.trees.lightgbm_import.from_lightgbm_text`), so a hostile file never reaches LightGBM's C++
    parser, and no LightGBM installation is needed. The size is checked first, as for model files.

    Raises
    ------
    ModelFormatError
        For a missing, oversized or unreadable file, or one that is not a LightGBM model.

    Examples
    --------
    >>> import json, tempfile
    >>> p = tempfile.mkdtemp() + "/m.json"
    >>> with open(p, "w") as f:
    ...     json.dump({"name": "tree", "num_tree_per_iteration": 1, "tree_info": []}, f)
    >>> sorted(read_lightgbm_file(p))
    ['name', 'num_tree_per_iteration', 'tree_info']
    """
    import json

    data = read_bounded(path, _size_cap(max_bytes), "LightGBM model file", ModelFormatError,
                        hint=f"if it is trusted, raise the limit (max_bytes=... or {MAX_BYTES_ENV})")
    if not is_lightgbm_file(data):
        raise ModelFormatError(f"{clip(str(path))} is not a LightGBM model file (the text of Booster.save_model "
                               "or the JSON of Booster.dump_model)")
    if data.lstrip().startswith(b"{"):
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise ModelFormatError(f"{clip(str(path))} is not valid JSON: {clip(exc)}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelFormatError(f"{clip(str(path))} is a LightGBM text model that is not UTF-8 text") from None


def _size_cap(max_bytes) -> int:
    if max_bytes is None:
        env = os.environ.get(MAX_BYTES_ENV)
        try:
            max_bytes = MAX_MODEL_BYTES if env is None else int(env)
        except ValueError:
            raise ModelFormatError(f"{MAX_BYTES_ENV}={env!r} is not a whole number of bytes") from None
    return max_bytes


def _check_size(size: int, max_bytes, what: str) -> None:
    cap = _size_cap(max_bytes)
    if size > cap:
        raise ModelFormatError(f"{what} is {size} bytes, over the {cap}-byte limit for model files; if it "
                               f"is trusted, raise the limit (max_bytes=... or {MAX_BYTES_ENV})")


def loads_model(data: bytes, max_bytes: int | None = None):
    """Restricted-unpickle `data` and return the estimator or FittedSequence inside.

    `max_bytes`: refuse larger data (default MAX_MODEL_BYTES, or the EDGESEQ_MAX_MODEL_BYTES env var).

    For model bytes that do not come from a file (a database, a network message); `load_model`
    reads a file and calls this.

    Raises
    ------
    ModelFormatError
        For oversized, corrupt or foreign data, an unsupported format version, or any global
        outside the allowlist (raised before it is called).

    Examples
    --------
    >>> import pickle
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> X = np.random.default_rng(0).normal(size=(40, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
    >>> loads_model(pickle.dumps(seq)).n_prefixes              # a bare pickle is accepted too
    3
    >>> loads_model(pickle.dumps(seq), max_bytes=100)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: ...
    >>> loads_model(pickle.dumps(print))
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: ...
    """
    _check_size(len(data), max_bytes, "model data")
    try:
        obj = _RestrictedUnpickler(data).load()
    except ModelFormatError:
        raise
    except Exception as exc:  # truncated/corrupted streams raise many different types
        if is_lightgbm_file(data):
            raise ModelFormatError(f"this is a LightGBM model file, not an edgeseq model; import it first: "
                                   f"{LIGHTGBM_HINT}") from None
        raise ModelFormatError(f"not a readable edgeseq model file ({type(exc).__name__}: "
                               f"{clip(exc)})") from None
    check_plain(obj, _is_edgeseq_model_class)
    if type(obj) is dict and type(obj.get("format")) is str and obj["format"] == MODEL_FORMAT:
        version = obj.get("format_version")
        if type(version) is not int or version not in SUPPORTED_VERSIONS:
            raise ModelFormatError(f"model file has format_version {brief(version)}; this edgeseq reads "
                                   f"{list(SUPPORTED_VERSIONS)} - upgrade edgeseq or re-train the model")
        obj = obj.get("model")
    if not (isinstance(obj, FittedSequence) or _is_edgeseq_model_class(type(obj))):
        raise ModelFormatError(f"model file holds a {type(obj).__name__}, not an edgeseq model "
                               "(expected a fitted estimator or FittedSequence)")
    seq = obj if isinstance(obj, FittedSequence) else vars(obj).get("fitted_sequence_")
    if seq is not None:
        _check_sequence(seq)
        if seq is not obj:
            _check_estimator(vars(obj), seq)
    layers = _layer_model_in(obj)
    trees = None if layers is not None else _tree_model_in(obj)
    if layers is not None:
        check_layer_model(layers)
    elif _is_layer_class(type(obj)):
        raise ModelFormatError(f"model file holds a bare {type(obj).__name__}; save the LayerBlockModel or the "
                               "fitted estimator instead")
    if trees is not None:
        check_tree_model(trees)
        if trees is not obj:
            _check_tree_estimator(vars(obj), trees)
    elif _is_tree_class(type(obj)):
        raise ModelFormatError(f"model file holds a bare {type(obj).__name__}; save the TreeStageModel or the "
                               "fitted estimator instead")
    return obj


def _is_tree_class(cls) -> bool:
    from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    return cls in (TreeEnsemble, TreeStage, TreeStageModel)


def _is_layer_class(cls) -> bool:
    from edgeseq.forms.layer_blocks import ConvBranch, Injection, LayerBlockModel, LayerBlockStage
    return cls in (LayerBlockModel, LayerBlockStage, Injection, ConvBranch)


def _layer_model_in(obj):
    """The LayerBlockModel `obj` is or holds as ``stage_model_`` (a fitted AnytimeNet estimator); else None."""
    from edgeseq.forms.layer_blocks import LayerBlockModel

    model = obj if not hasattr(obj, "__dict__") or isinstance(obj, FittedSequence) else \
        (obj if type(obj) is LayerBlockModel else vars(obj).get("stage_model_"))
    return model if type(model) is LayerBlockModel else None


def check_layer_model(model, what: str = "model file") -> None:
    """Re-establish every invariant of a LayerBlockModel that was unpickled rather than built: every
    part's type exactly, then the classes' own construction checks (through the classes, so an
    instance cannot bring its own).

    Raises
    ------
    ModelFormatError
        Naming what is inconsistent or malformed.

    Examples
    --------
    >>> import dataclasses
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> from edgeseq.io.model_io import check_layer_model
    >>> model = _example_model()
    >>> check_layer_model(model)   # silent when consistent
    >>> object.__setattr__(model.stages[2].injections[0], "U", model.stages[2].injections[0].U[:1])
    >>> check_layer_model(model)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: model file is inconsistent: layer-block model: stage 2: injection of group 1 must have shape (2, 3), got (1, 3)
    """
    from edgeseq.forms.layer_blocks import ConvBranch, Injection, LayerBlockModel, LayerBlockStage

    stages = vars(model).get("stages")
    ok = type(model) is LayerBlockModel and type(stages) is tuple and all(
        type(s) is LayerBlockStage and type(s.injections) is tuple
        and all(type(i) is Injection and (i.conv is None or type(i.conv) is ConvBranch) for i in s.injections)
        for s in stages)
    if not ok:
        raise ModelFormatError(f"{what}'s layer-block model is not made of LayerBlockStage, Injection and "
                               f"ConvBranch objects")
    try:
        for s in stages:
            for inj in s.injections:
                if inj.conv is not None:
                    ConvBranch.__post_init__(inj.conv)
        LayerBlockModel.__post_init__(model)
    except (InputError, ModelFormatError) as exc:
        raise ModelFormatError(f"{what} is inconsistent: {exc}") from None
    except (AttributeError, TypeError, ValueError, OverflowError) as exc:
        raise ModelFormatError(f"{what}'s layer-block model is malformed ({type(exc).__name__}: {clip(exc)})") from None


def _tree_model_in(obj):
    """The TreeStageModel `obj` is or holds as ``stage_model_`` (a fitted AFRClassifier); else None."""
    from edgeseq.forms.trees import TreeStageModel

    if type(obj) is TreeStageModel:
        return obj
    return vars(obj).get("stage_model_") if not isinstance(obj, FittedSequence) and hasattr(obj, "__dict__") else None


def check_tree_model(model, what: str = "model file") -> None:
    """Re-establish every invariant of a TreeStageModel that was unpickled (or edited) rather than built.

    Unpickling fills an object's attributes without running its checks, so the classes' own
    construction steps are run again through the classes (an instance cannot bring its own): the
    ensemble's arrays are re-converted and every index re-validated (depths recomputed), then the
    stages. A crafted file with an out-of-range child index or a NaN threshold ends here.

    Parameters
    ----------
    model : TreeStageModel
    what : str
        What the model came from, for the message (the exporter passes "tree model").

    Raises
    ------
    ModelFormatError
        One line naming the first inconsistency.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.io.model_io import check_tree_model
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, 2.0], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> check_tree_model(model)       # a model built normally passes
    >>> object.__setattr__(ens, "left", np.array([7, -1, -1]))   # what a crafted file could hold
    >>> check_tree_model(model)
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: model file is inconsistent: tree ensemble: a left child points backwards or outside its tree ...
    """
    from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel

    state = vars(model)
    ens, stages = state.get("ensemble"), state.get("stages")
    if type(model) is not TreeStageModel or type(ens) is not TreeEnsemble or type(stages) is not tuple \
            or not all(type(s) is TreeStage for s in stages):
        raise ModelFormatError(f"{what}'s tree model is not made of TreeEnsemble and TreeStage objects")
    try:
        TreeEnsemble.__post_init__(ens)
        TreeStageModel.__post_init__(model)
    except (InputError, ModelFormatError) as exc:
        raise ModelFormatError(f"{what} is inconsistent: {exc}") from None
    except (AttributeError, TypeError, ValueError, OverflowError) as exc:
        raise ModelFormatError(f"{what}'s tree model is malformed ({type(exc).__name__}: {clip(exc)})") from None


def _check_tree_estimator(state: dict, model) -> None:
    """A fitted tree estimator's own attributes that prediction reads must agree with its model."""
    if "n_features_in_" in state and state["n_features_in_"] != model.ensemble.n_features:
        raise ModelFormatError("model file is inconsistent: the estimator's n_features_in_ "
                               f"{brief(state['n_features_in_'])} differs from its tree model's "
                               f"{model.ensemble.n_features}")
    classes = state.get("classes_")
    n_classes = 2 if model.link == "sigmoid" else model.n_outputs
    if classes is not None and (type(classes) is not np.ndarray or classes.shape != (n_classes,)):
        raise ModelFormatError(f"model file is inconsistent: the estimator's classes_ {brief(classes)} do not "
                               f"match its tree model's {n_classes} outputs")


def _check_estimator(state: dict, seq: FittedSequence) -> None:
    """A fitted estimator's own learned attributes that prediction reads must agree with its sequence
    (a file could keep a valid sequence but shrink `classes_`, and predict would index past it)."""
    if "n_features_in_" in state and state["n_features_in_"] != seq.n_features_in:
        raise ModelFormatError("model file is inconsistent: the estimator's n_features_in_ "
                               f"{brief(state['n_features_in_'])} differs from its sequence's {seq.n_features_in}")
    if seq.classes is not None:
        classes = state.get("classes_")
        if type(classes) is not np.ndarray or classes.shape != seq.classes.shape \
                or not np.array_equal(classes, seq.classes):
            raise ModelFormatError(f"model file is inconsistent: the estimator's classes_ {brief(classes)} "
                                   "differ from its sequence's classes")


def _check_sequence(seq) -> None:
    """Every invariant, through the class (the instance's state was just proven to be data only)."""
    if type(seq) is not FittedSequence:
        raise ModelFormatError(f"model file's fitted sequence is a {type(seq).__name__}, not a FittedSequence")
    try:
        FittedSequence.validate(seq)
        check_cost_provenance(seq.provenance, "model file's cost provenance")
    except InputError as exc:
        raise ModelFormatError(f"model file is inconsistent: {exc}") from None


def load_model(path, max_bytes: int | None = None):
    """Load a model file written by `save_model`, `edgeseq train` or a plain `pickle.dump`.

    The file must be a regular file (not a device or FIFO) and its size is checked before anything is
    read (see `loads_model` for `max_bytes`). Only edgeseq's
    model classes and the numpy pieces they contain can be constructed; anything else in the file
    is a `ModelFormatError` naming the forbidden global, raised before it is called.

    Examples
    --------
    >>> import pickle, tempfile
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.errors import ModelFormatError
    >>> from edgeseq.io.model_io import load_model, save_model
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> est = AnytimeRegressor().fit(X, X[:, 0])
    >>> path = tempfile.mkdtemp() + "/model.pkl"
    >>> save_model(est, path)
    >>> load_model(path).sequence_.tolist() == est.sequence_.tolist()
    True
    >>> with open(path, "wb") as f:
    ...     pickle.dump(print, f)                     # a file that would call something
    >>> try:
    ...     load_model(path)
    ... except ModelFormatError:
    ...     print("refused")
    refused
    """
    data = read_bounded(path, _size_cap(max_bytes), "model file", ModelFormatError,
                        hint=f"if it is trusted, raise the limit (max_bytes=... or {MAX_BYTES_ENV})")
    return loads_model(data, max_bytes)


def as_exportable(obj):
    """What `export_model` writes for a loaded model: its TreeStageModel (tree models) or its
    FittedSequence (linear estimators and sequences).

    Raises
    ------
    ModelFormatError
        When `obj` is an estimator that was never fitted.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.io.model_io import as_exportable
    >>> X = np.random.default_rng(0).normal(size=(40, 2))
    >>> est = AnytimeRegressor().fit(X, X[:, 0])
    >>> as_exportable(est) is est.fitted_sequence_
    True
    """
    layers = _layer_model_in(obj)
    if layers is not None:  # an anytime neural network: its labels are the estimator's
        classes = None if layers is obj else vars(obj).get("classes_")
        return layers if classes is None else dataclasses.replace(layers, classes=classes)
    trees = _tree_model_in(obj)
    if trees is not None and trees.classes is None and trees is not obj and trees.link != "identity":
        classes = vars(obj).get("classes_")  # a file saved before the stage model carried its labels
        if classes is not None:  # checked against the model's outputs when the file was loaded
            trees = dataclasses.replace(trees, classes=classes)
    return trees if trees is not None else as_sequence(obj)


def save_model(est, path) -> None:
    """Pickle an estimator or FittedSequence together with the model format version.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.io.model_io import load_model, save_model
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> seq = AnytimeRegressor().fit(X, X[:, 1]).fitted_sequence_
    >>> path = tempfile.mkdtemp() + "/seq.pkl"
    >>> save_model(seq, path)
    >>> load_model(path).n_prefixes
    3
    """
    if not (isinstance(est, FittedSequence) or _is_edgeseq_model_class(type(est))) or _is_tree_class(type(est)) \
            and _tree_model_in(est) is None:
        raise ModelFormatError(f"save_model needs an edgeseq estimator, FittedSequence or TreeStageModel, got "
                               f"{type(est).__name__}")
    if _is_layer_class(type(est)) and _layer_model_in(est) is None:
        raise ModelFormatError(f"save_model needs an edgeseq estimator or model, got a bare {type(est).__name__}")
    from edgeseq import __version__
    payload = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION,
               "edgeseq_version": __version__, "model": est}
    atomic_write_bytes(path, pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))  # never half a file


def as_sequence(obj) -> FittedSequence:
    """The FittedSequence of a loaded model (the estimator's `fitted_sequence_`).

    Lets commands accept either a saved estimator or a saved FittedSequence.

    Raises
    ------
    ModelFormatError
        When `obj` is an estimator that was never fitted.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> X = np.random.default_rng(0).normal(size=(40, 2))
    >>> est = AnytimeRegressor().fit(X, X[:, 0])
    >>> as_sequence(est) is est.fitted_sequence_, as_sequence(est.fitted_sequence_) is est.fitted_sequence_
    (True, True)
    >>> as_sequence(AnytimeRegressor())
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: the AnytimeRegressor in the model file is not fitted; ...
    """
    seq = obj if isinstance(obj, FittedSequence) else vars(obj).get("fitted_sequence_")
    if seq is None and _tree_model_in(obj) is not None:
        raise ModelFormatError(f"the model file holds a tree model ({type(obj).__name__}); this needs a linear "
                               "edgeseq model (export, verify and run take tree models)")
    if seq is None:
        raise ModelFormatError(f"the {type(obj).__name__} in the model file is not fitted; "
                               "fit it before saving (or use `edgeseq train`)")
    _check_sequence(seq)
    return seq
