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
from edgeseq.model_io import MODEL_FORMAT, as_sequence, load_model, loads_model, save_model


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
    assert all(r.split()[0] in ("numpy", "numpy._core.multiarray", "edgeseq.regressor", "edgeseq.sequence",
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
