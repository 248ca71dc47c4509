"""The benchmark's reader of `.ts` sensor windows (bench/_sensor_data.py) on files the test writes.

The real file (BasicMotions) ships in the sktime wheel of the optional ``bench`` extra, which CI does
not install; the parser is checked here on generated text, channel-major layout included.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def sensor():
    spec = importlib.util.spec_from_file_location("bench_sensor_data", BENCH / "_sensor_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ts(X, labels, classes) -> str:
    head = ["# a comment", "@problemName Toy", "@univariate false", f"@dimensions {X.shape[1]}",
            f"@seriesLength {X.shape[2]}", "@classLabel true " + " ".join(classes), "@data"]
    lines = [":".join(",".join(repr(float(v)) for v in ch) for ch in row) + ":" + lab for row, lab in zip(X, labels)]
    return "\n".join(head + lines) + "\n"


def test_read_ts_returns_windows_labels_and_classes(sensor, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 3, 7))
    labels = ["walk", "run", "walk", "rest", "run"]
    path = tmp_path / "toy.ts"
    path.write_text(_ts(X, labels, ["rest", "walk", "run"]), encoding="utf-8")
    got, lab, classes = sensor.read_ts(path)
    np.testing.assert_array_equal(got, X)  # repr round-trips float64 exactly
    assert lab.tolist() == labels and classes == ("rest", "walk", "run")
    # flattened channel-major, as a window group declares: column c * L + t is channel c at step t
    assert got.reshape(5, -1)[1, 2 * 7 + 4] == X[1, 2, 4]


def test_read_ts_refuses_ragged_missing_and_oversized_files(sensor, tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2, 2, 4))
    path = tmp_path / "bad.ts"
    text = _ts(X, ["a", "b"], ["a", "b"])
    path.write_text(text.replace(repr(float(X[1, 0, 3])), "NaN"), encoding="utf-8")
    with pytest.raises(SystemExit, match="missing"):
        sensor.read_ts(path)
    path.write_text(text + "1.0,2.0:3.0:a\n", encoding="utf-8")  # a row of another length
    with pytest.raises(SystemExit, match="equal-length"):
        sensor.read_ts(path)
    path.write_text(text, encoding="utf-8")
    assert sensor.read_ts(path)[0].shape == (2, 2, 4)  # the control: the same file, intact, reads
    monkeypatch.setattr(sensor, "MAX_BYTES", 10)
    with pytest.raises(SystemExit, match="larger than"):
        sensor.read_ts(path)
