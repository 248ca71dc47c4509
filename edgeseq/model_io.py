"""Model files that can be passed around safely: pickle with a format version, restricted unpickling.

`save_model` wraps the object as ``{"format": "edgeseq-model", "format_version": 1, ...}``.
`load_model` also accepts a bare ``pickle.dump(est, f)`` of a fitted estimator or FittedSequence.
Either way the unpickler resolves only an explicit allowlist of globals: edgeseq's own model classes,
the numpy functions/types that rebuild arrays, and a few plain builtins. Anything else (``os.system``,
``builtins.eval``, ``subprocess.Popen``, sklearn internals...) raises ModelFormatError naming the
forbidden global, before it is ever called.
"""

from __future__ import annotations

import importlib
import io
import pickle
from pathlib import Path

from .errors import ModelFormatError
from .sequence import FittedSequence

MODEL_FORMAT = "edgeseq-model"
MODEL_FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)

# what pickles of FittedSequence and the estimators reference (checked with pickletools.dis):
# arrays (protocols 2-5, numpy 1.x and 2.x module paths), numpy scalars and dtypes.
_NUMPY_ALLOWED = {
    (mod, name)
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray")
    for name in ("_reconstruct", "scalar")
} | {
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
}
# protocol 0-2 pickles write bytes as _codecs.encode(str, "latin1") and protocols 0-1 rebuild objects
# with copyreg._reconstructor(cls, object, None); all of these only construct data
_BUILTINS_ALLOWED = {"bytes", "bytearray", "tuple", "list", "dict", "set", "frozenset", "int", "float",
                     "complex", "bool", "str", "slice", "range", "object"}
_OTHER_ALLOWED = {("_codecs", "encode"), ("copyreg", "_reconstructor"), ("copy_reg", "_reconstructor")}


def _is_edgeseq_model_class(obj) -> bool:
    """Only edgeseq's own data classes: FittedSequence, the group spec and the estimators."""
    if not isinstance(obj, type) or not obj.__module__.startswith("edgeseq."):
        return False
    from sklearn.base import BaseEstimator

    from .groups import GroupSpec
    return issubclass(obj, (FittedSequence, GroupSpec, BaseEstimator))


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module in ("builtins", "__builtin__") and name in _BUILTINS_ALLOWED:
            return super().find_class(module, name)
        if (module, name) in _NUMPY_ALLOWED or (module, name) in _OTHER_ALLOWED:
            return super().find_class(module, name)
        if (module == "edgeseq" or module.startswith("edgeseq.")) and "." not in name:
            try:
                obj = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError):
                raise ModelFormatError(f"model file references {module}.{name}, which this edgeseq "
                                       "version does not have; re-train or upgrade edgeseq") from None
            if _is_edgeseq_model_class(obj):
                return obj
        raise ModelFormatError(f"model file references the forbidden global {module}.{name}; "
                               "refusing to load it (only edgeseq models, numpy arrays and builtins)")


def loads_model(data: bytes):
    """Restricted-unpickle `data` and return the estimator or FittedSequence inside."""
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    except ModelFormatError:
        raise
    except Exception as exc:  # truncated/corrupted streams raise many different types
        raise ModelFormatError(f"not a readable edgeseq model file ({type(exc).__name__}: {exc})") from None
    if isinstance(obj, dict) and obj.get("format") == MODEL_FORMAT:
        version = obj.get("format_version")
        if version not in SUPPORTED_VERSIONS:
            raise ModelFormatError(f"model file has format_version {version!r}; this edgeseq reads "
                                   f"{list(SUPPORTED_VERSIONS)} - upgrade edgeseq or re-train the model")
        obj = obj.get("model")
    if isinstance(obj, FittedSequence) or _is_edgeseq_model_class(type(obj)):
        return obj
    raise ModelFormatError(f"model file holds a {type(obj).__name__}, not an edgeseq model "
                           "(expected a fitted estimator or FittedSequence)")


def load_model(path):
    """Load a model file written by `save_model`, `edgeseq train` or a plain `pickle.dump`."""
    p = Path(path)
    if not p.is_file():
        raise ModelFormatError(f"model file {p} does not exist")
    return loads_model(p.read_bytes())


def save_model(est, path) -> None:
    """Pickle an estimator or FittedSequence together with the model format version."""
    if not (isinstance(est, FittedSequence) or _is_edgeseq_model_class(type(est))):
        raise ModelFormatError(f"save_model needs an edgeseq estimator or FittedSequence, got {type(est).__name__}")
    from . import __version__
    payload = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION,
               "edgeseq_version": __version__, "model": est}
    Path(path).write_bytes(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))


def as_sequence(obj) -> FittedSequence:
    """The FittedSequence of a loaded model (the estimator's `fitted_sequence_`)."""
    if isinstance(obj, FittedSequence):
        obj.validate()
        return obj
    seq = getattr(obj, "fitted_sequence_", None)
    if not isinstance(seq, FittedSequence):
        raise ModelFormatError(f"the {type(obj).__name__} in the model file is not fitted; "
                               "fit it before saving (or use `edgeseq train`)")
    seq.validate()
    return seq
