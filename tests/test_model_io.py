"""Model files: versioned save/load, plain pickles accepted, and nothing but allowlisted globals
ever resolved (a crafted pickle that would run a command is refused before anything runs)."""

from __future__ import annotations

import os
import pickle
import pickletools
import subprocess

import numpy as np
import pytest
from sequences import random_sequence

from edgeseq.errors import ModelFormatError
from edgeseq.io.model_io import MODEL_FORMAT, as_sequence, load_model, loads_model, save_model


@pytest.fixture(scope="module")
def est():
    from sklearn.datasets import load_diabetes

    from edgeseq import AnytimeRegressor

    X, y = load_diabetes(return_X_y=True)
    return AnytimeRegressor(groups=[[0, 1], [2], [3, 4, 5], [6, 7, 8, 9]], costs=[1, 2, 3, 4]).fit(X, y), X


def test_save_load_estimator_predicts_identically(tmp_path, est):
    model, X = est
    save_model(model, tmp_path / "m.pkl")
    back = load_model(tmp_path / "m.pkl")
    assert type(back) is type(model)
    for j in range(model.fitted_sequence_.n_prefixes):
        np.testing.assert_array_equal(back.predict(X, prefix=j), model.predict(X, prefix=j))


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_plain_pickle_of_estimator_and_sequence(tmp_path, est, protocol):
    model, X = est
    back = loads_model(pickle.dumps(model, protocol=protocol))
    np.testing.assert_array_equal(back.predict(X), model.predict(X))
    seq = random_sequence(np.random.default_rng(0), (2, 3), n_outputs=3, link="softmax")
    back_seq = as_sequence(loads_model(pickle.dumps(seq, protocol=protocol)))
    assert back_seq.order.tolist() == seq.order.tolist() and back_seq.classes.tolist() == seq.classes.tolist()


def test_pickles_reference_only_expected_globals(est):
    """What the allowlist has to admit, read from the opcode stream (documents the need)."""
    model, _ = est
    import io
    import re

    text = io.StringIO()
    pickletools.dis(pickle.dumps(model, protocol=2), out=text)
    refs = set(re.findall(r"GLOBAL\s+'([^']+)'", text.getvalue()))
    assert all(r.split()[0] in ("numpy", "numpy._core.multiarray", "edgeseq.train.linear.regressor", "edgeseq.forms.linear",
                                "_codecs", "__builtin__") for r in refs), refs


class _RunsCommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Subprocess:
    def __reduce__(self):
        return (subprocess.call, (["true"],))


class _Eval:
    def __reduce__(self):
        return (eval, ("1+1",))


@pytest.mark.parametrize("payload", ["system", "subprocess", "eval", "sklearn", "wrapped"])
def test_crafted_pickles_are_refused_without_running(tmp_path, payload):
    marker = tmp_path / "pwned"
    obj = {"system": _RunsCommand(marker), "subprocess": _Subprocess(), "eval": _Eval(),
           "wrapped": {"format": MODEL_FORMAT, "format_version": 1, "model": _RunsCommand(marker)}}.get(payload)
    if payload == "sklearn":
        from sklearn.linear_model import LinearRegression
        obj = LinearRegression()
    data = pickle.dumps(obj)
    path = tmp_path / "evil.pkl"
    path.write_bytes(data)
    with pytest.raises(ModelFormatError, match="forbidden global"):
        load_model(path)
    assert not marker.exists()
    if payload == "system":  # the same bytes really would run the command under plain pickle
        pickle.loads(data)
        assert marker.exists()


def test_unknown_version_and_bad_files(tmp_path, est):
    model, _ = est
    path = tmp_path / "m.pkl"
    path.write_bytes(pickle.dumps({"format": MODEL_FORMAT, "format_version": 99, "model": model}))
    with pytest.raises(ModelFormatError, match="format_version 99.*upgrade"):
        load_model(path)
    path.write_bytes(pickle.dumps({"just": "data"}))
    with pytest.raises(ModelFormatError, match="not an edgeseq model"):
        load_model(path)
    path.write_bytes(pickle.dumps(model)[:-20])
    with pytest.raises(ModelFormatError, match="not a readable"):
        load_model(path)
    with pytest.raises(ModelFormatError, match="does not exist"):
        load_model(tmp_path / "missing.pkl")


def test_unfitted_estimator_is_a_clear_error(tmp_path):
    from edgeseq import AnytimeRegressor

    save_model(AnytimeRegressor(), tmp_path / "u.pkl")
    with pytest.raises(ModelFormatError, match="not fitted"):
        as_sequence(load_model(tmp_path / "u.pkl"))


def _proto2(*ops: bytes) -> bytes:
    return b"\x80\x02" + b"".join(ops) + b"."


def _global(mod: str, name: str) -> bytes:
    return b"c" + mod.encode() + b"\n" + name.encode() + b"\n"


_BIG = b"J" + (20_000_000).to_bytes(4, "little")  # BININT 2e7


def test_tiny_pickle_calling_builtins_is_refused_before_allocating():
    """49 bytes that unpickle to list(range(2e7)) (~800 MB) under plain pickle."""
    import tracemalloc

    data = _proto2(_global("__builtin__", "list"), _global("__builtin__", "range"), _BIG, b"\x85R\x85R")
    assert len(data) == 49
    tracemalloc.start()
    try:
        with pytest.raises(ModelFormatError, match="forbidden global __builtin__.list"):
            loads_model(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


@pytest.mark.parametrize("mod,name,args", [
    ("__builtin__", "bytes", _BIG + b"\x85"),  # bytes(2e7): the one builtin pickles do call, but only as bytes()
    ("builtins", "object", b")"),  # only ever the base argument of copyreg._reconstructor
    ("_codecs", "encode", b"X\x01\x00\x00\x00aX\x04\x00\x00\x00zlib\x86"),
    ("numpy._core.multiarray", "_reconstruct", _global("numpy", "ndarray") + b"(" + _BIG + b"tC\x01b\x87"),
    ("numpy", "dtype", b"X\x01\x00\x00\x00O\x85"),  # object arrays could hold anything
    ("copyreg", "_reconstructor", _global("edgeseq.train.linear.regressor", "AnytimeRegressor")
     + _global("edgeseq.train.linear.regressor", "AnytimeRegressor") + b"N\x87"),
])
def test_allowed_globals_accept_only_the_arguments_model_pickles_use(mod, name, args):
    with pytest.raises(ModelFormatError, match="refusing to load"):
        loads_model(_proto2(_global(mod, name), args, b"R"))


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("labels", ["int", "str", "multi"])
def test_classifier_pickles_load_on_every_protocol(labels, protocol):
    """The checked stand-ins still rebuild everything a classifier pickle holds (str classes, scalars)."""
    import warnings

    from edgeseq import AnytimeClassifier

    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 5))
    y = {"int": (X[:, 0] > 0).astype(int), "str": np.where(X[:, 0] > 0, "yes", "no"),
         "multi": np.array(["a", "b", "c"])[np.digitize(X[:, 0], [-0.5, 0.5])]}[labels]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AnytimeClassifier(groups=[[0, 1], [2], [3, 4]], costs=[1, 2, 3]).fit(X, y)
    data = pickle.dumps({"format": MODEL_FORMAT, "format_version": 1, "model": model}, protocol=protocol)
    back = loads_model(data)
    plain = pickle.loads(data)["model"]
    assert pickle.dumps(back, protocol=4) == pickle.dumps(plain, protocol=4)
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))


def test_model_file_size_cap(tmp_path, est, monkeypatch):
    model, X = est
    path = tmp_path / "m.pkl"
    save_model(model, path)
    size = path.stat().st_size
    with pytest.raises(ModelFormatError, match=f"{size:,} bytes, over the 1,000-byte limit"):
        load_model(path, max_bytes=1000)
    monkeypatch.setenv("EDGESEQ_MAX_MODEL_BYTES", "1000")
    with pytest.raises(ModelFormatError, match="EDGESEQ_MAX_MODEL_BYTES"):
        load_model(path)
    assert load_model(path, max_bytes=size).predict(X[:3]).shape == (3,)
    monkeypatch.setenv("EDGESEQ_MAX_MODEL_BYTES", "lots")
    with pytest.raises(ModelFormatError, match="not a whole number"):
        load_model(path)


@pytest.mark.parametrize("target", [_global("edgeseq.forms.linear", "FittedSequence"), _global("_codecs", "encode")])
def test_a_file_cannot_set_attributes_of_classes_or_functions(target):
    """BUILD with slot state would setattr on the allowed object itself, poisoning the whole process
    (e.g. FittedSequence.validate = None) even though the load then fails."""
    from edgeseq.forms.linear import FittedSequence

    validate = FittedSequence.__dict__["validate"]
    data = _proto2(target, b"N}X\x08\x00\x00\x00validateNs\x86b")  # (None, {"validate": None}) BUILD
    with pytest.raises(ModelFormatError, match="sets the state of a"):
        loads_model(data)
    assert FittedSequence.__dict__["validate"] is validate
