"""Untrusted model files (issue 11 items 1, 3-5, 9, 11, 13): every crafted file from tests/hostile.py
is refused with one short ModelFormatError line, quickly and without a large allocation; the same
builders without the hostile change load and export (negative control)."""

from __future__ import annotations

import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hostile import field_cases, shadowed_validate, valid_model_bytes, valid_sequence

from edgeseq.errors import EdgeseqError, ExportError, ModelFormatError
from edgeseq.io.model_io import as_sequence, loads_model
from edgeseq.forms.linear import FittedSequence

CASES = field_cases()
MAX_MESSAGE = 400
EDGESEQ = Path(sys.executable).parent / "edgeseq"


def _refused(data: bytes) -> str:
    t0 = time.perf_counter()
    tracemalloc.start()
    try:
        with pytest.raises(ModelFormatError) as info:
            as_sequence(loads_model(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    msg = str(info.value)
    assert "\n" not in msg and len(msg) <= MAX_MESSAGE, msg[:1000]
    assert time.perf_counter() - t0 < 20
    assert peak < 64 * len(data) + (64 << 20), peak  # bounded by the file's size, not by what it claims
    return msg


@pytest.mark.parametrize("name", sorted(CASES))
def test_crafted_model_file_is_one_short_error(name):
    _refused(CASES[name])


def test_negative_control_valid_files_load_on_every_protocol():
    for protocol in range(2, 6):
        seq = as_sequence(loads_model(valid_model_bytes(protocol=protocol)))
        assert type(seq) is FittedSequence
    for link, p in (("sigmoid", 1), ("softmax", 3)):
        as_sequence(loads_model(valid_model_bytes(valid_sequence(link, p))))


def test_shadowed_validate_is_named():
    msg = _refused(shadowed_validate())
    assert "validate" in msg and "replaces" in msg


def test_validate_is_called_through_the_class(monkeypatch):
    """An instance attribute named validate is never what runs: export uses the class's method."""
    from edgeseq.export.kinds.affine.c_float import write_c_model

    seq = valid_sequence()
    J = len(seq.order)
    seq.__dict__["validate"] = lambda: None
    seq.intercepts = np.zeros((J + 1, 8))
    seq.output_names = tuple(f"y{i}" for i in range(8))
    with pytest.raises(EdgeseqError):
        write_c_model(seq, "/nonexistent-never-written", "m")


def test_c_emitter_rechecks_what_it_indexes(tmp_path):
    """Even with validation bypassed, the emitter refuses tables the runtime would over-read."""
    from edgeseq.export.kinds.affine import c_float

    seq = valid_sequence()
    seq.intercepts = np.zeros((len(seq.order) + 1, 8))
    with pytest.raises(ExportError, match="would read"):
        c_float._check_indexed_sizes(seq)
    c_float._check_indexed_sizes(valid_sequence())  # negative control


def test_ndarray_constructor_is_not_callable_and_allocates_nothing():
    msg = _refused(CASES["ndarray_bomb"])
    assert "numpy.ndarray" in msg


def test_export_cli_refuses_shadowed_model_without_traceback(tmp_path):
    model = tmp_path / "evil.pkl"
    model.write_bytes(shadowed_validate())
    proc = subprocess.run([str(EDGESEQ), "export", "--quiet", str(model), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "ModelFormatError" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_long_group_name_is_refused_at_train_time():
    from edgeseq.errors import GroupSpecError
    from edgeseq.forms.groups import check_groups

    with pytest.raises(GroupSpecError, match="bytes of UTF-8"):
        check_groups([[0], [1]], [1, 1], ["x" * 2000, "b"], 2)
    with pytest.raises(GroupSpecError, match="surrogate"):
        check_groups([[0], [1]], [1, 1], ["\ud800", "b"], 2)
    with pytest.raises(GroupSpecError, match="at least"):
        check_groups([[0], [1]], [1e-310, 1], ["a", "b"], 2)
    check_groups([[0], [1]], [1e-300, 1], ["x" * 1024, "b"], 2)  # negative control: at the limit


def test_c_string_literal_limit_and_bad_model_name(tmp_path):
    from edgeseq.export.kinds.affine.c_float import write_c_model

    seq = valid_sequence()
    with pytest.raises(ExportError, match="bytes of UTF-8"):
        write_c_model(seq, tmp_path, "m", model_name="n" * 5000)
    with pytest.raises(ExportError, match="Unicode"):
        write_c_model(seq, tmp_path, "m", model_name="bad\udcff")


def test_estimator_classes_must_agree_with_its_sequence():
    import pickle

    from edgeseq import AnytimeClassifier

    X = np.random.default_rng(0).normal(size=(40, 3))
    est = AnytimeClassifier(groups=[[0], [1, 2]], costs=[1, 2]).fit(X, (X[:, 0] > 0).astype(int))
    loads_model(pickle.dumps(est))  # negative control
    est.classes_ = est.classes_[:1]
    msg = _refused(pickle.dumps(est))
    assert "classes_" in msg


def test_sample_rows_of_a_wide_model_are_bounded():
    from edgeseq.export.kinds.affine.writer import sample_inputs
    from edgeseq.forms.linear import MAX_SAMPLE_VALUES

    seq = valid_sequence()
    D = 200_000
    seq.__dict__.update(n_features_in=D, feature_mean=np.zeros(D), feature_std=np.ones(D))
    FittedSequence.validate(seq)
    X = sample_inputs(seq)
    assert X.shape[1] == D and X.size <= MAX_SAMPLE_VALUES
    assert sample_inputs(valid_sequence()).shape[0] == 512  # negative control: narrow models unchanged


def test_an_attribute_named_by_an_object_is_refused_in_one_line_without_its_repr():
    """A file whose instance state has a non-string key (found by the byte-level fuzz: an estimator
    object as the key) is refused naming the key's type only: its repr (an estimator's spans lines)
    is not run. Negative control: the same model without the key loads."""
    import pickle

    from edgeseq.export.kinds.trees.c_float import _demo_model
    from edgeseq.train.trees.afr import AFRClassifier

    model = _demo_model()
    loads_model(pickle.dumps(model))
    key = AFRClassifier(groups=[[0, 1], [2, 3]], costs=[1.0, 2.0], group_names=["cheap", "costly"])
    assert "\n" in repr(key)  # what the message used to quote
    model.__dict__[key] = 1
    with pytest.raises(ModelFormatError) as err:
        loads_model(pickle.dumps(model))
    msg = str(err.value)
    assert "an attribute whose name is of type AFRClassifier, not a string" in msg
    assert "\n" not in msg and len(msg) <= MAX_MESSAGE
