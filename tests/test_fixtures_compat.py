"""Model files and exports written by an earlier version load, run and export byte for byte the same.

The fixtures (one model file per stage kind, each with a float32-C and an int16-C export) were written
by `tests/fixtures/make_fixtures.py`, which the tests never run. Exporting the committed model file
again must reproduce every committed file, manifest included (a manifest records no date or
version). One thing in it is measured on the machine that exports: each prefix's
``float32_max_abs_diff``, the largest difference between onnxruntime's float32 answer and the float64
reference, whose last bits depend on which kernels onnxruntime picks for the CPU (the fixtures were
written on an AMD EPYC; an Intel Xeon rounds a few answers the other way). Those values (and the
manifest's own checksum, which covers them) must agree within `MEASURED_ATOL`; every other byte must
be the same. The committed exports must load in `ExportedModel`, agree with the
model file's own predictions and pass `verify`. The model file itself is not compared byte for byte:
it records the edgeseq version that wrote it. A one-byte change of a committed graph must be caught.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgeseq.errors import EdgeseqError
from edgeseq.evaluate.verify import verify_export
from edgeseq.io.model_io import load_model
from edgeseq.runtime.model import ExportedModel
from edgeseq.forms.linear import FittedSequence
from edgeseq.forms.trees import TreeStageModel

FIXTURES = Path(__file__).resolve().parent / "fixtures"
_spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
EXPORTS = [(kind, folder, c_dtype) for kind, (_, exports) in make.FIXTURES.items() for folder, c_dtype in exports.items()]
IDS = [folder for _, folder, _ in EXPORTS]


def _model(kind: str):
    return load_model(FIXTURES / make.FIXTURES[kind][0])


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# a manifest's measured float32 differences: a few float32 rounding steps of answers near 1 apart at most
MEASURED_ATOL = 1e-6
_MEASURED = re.compile(rb'"float32_max_abs_diff": ([-+0-9.eE]+)')
_CHECKSUM = re.compile(rb'"manifest_sha256": "[0-9a-f]{64}"')


def _manifest_apart(data: bytes) -> tuple[bytes, list[float]]:
    """(the manifest with its measured values and checksum blanked, the measured values in order)."""
    values = [float(v) for v in _MEASURED.findall(data)]
    blank = _CHECKSUM.sub(b'"manifest_sha256": ""', _MEASURED.sub(b'"float32_max_abs_diff": 0', data))
    return blank, values


def test_fixtures_are_small():
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file() and p.name.startswith("compat_")
                or p.parent.name.startswith("compat_"))
    assert 0 < total < 200_000


@pytest.mark.parametrize("kind", list(make.FIXTURES))
def test_model_file_loads(kind):
    model = _model(kind)
    assert type(model) is {"linear": FittedSequence, "trees": TreeStageModel}[kind]
    assert np.array_equal(model.cum_cost, np.cumsum([0.0] + make.COSTS)[:model.cum_cost.size])


@pytest.mark.parametrize("kind, folder, c_dtype", EXPORTS, ids=IDS)
def test_export_again_is_byte_identical(kind, folder, c_dtype, tmp_path):
    out = tmp_path / folder
    make.export(_model(kind), kind, out, c_dtype)
    committed, again = _files(FIXTURES / folder), _files(out)
    assert sorted(again) == sorted(committed)
    differ = [name for name in committed if name != "manifest.json" and again[name] != committed[name]]
    assert not differ, f"re-exporting {folder} changed {differ}"
    (text, measured), (text_was, measured_was) = map(_manifest_apart, (again["manifest.json"],
                                                                       committed["manifest.json"]))
    assert text == text_was, f"re-exporting {folder} changed manifest.json beyond its measured values"
    assert len(measured) == len(measured_was) > 0
    np.testing.assert_allclose(measured, measured_was, rtol=0, atol=MEASURED_ATOL)


def test_the_manifest_comparison_sees_a_changed_field_and_a_far_measured_value():
    """Negative controls for the exemption above: a changed cost is a changed manifest, and a measured
    difference far from the committed one fails the tolerance."""
    data = (FIXTURES / "compat_trees" / "manifest.json").read_bytes()
    text, measured = _manifest_apart(data)
    changed, _ = _manifest_apart(data.replace(b'"cost": 2.0', b'"cost": 2.5', 1))
    assert b'"cost": 2.0' in data and changed != text
    far = _MEASURED.sub(b'"float32_max_abs_diff": 0.001', data, count=1)
    assert _manifest_apart(far)[0] == text
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(_manifest_apart(far)[1], measured, rtol=0, atol=MEASURED_ATOL)


@pytest.mark.parametrize("kind, folder, c_dtype", EXPORTS, ids=IDS)
def test_committed_export_runs_and_verifies(kind, folder, c_dtype):
    model, exported = _model(kind), ExportedModel(FIXTURES / folder)
    X, _ = make.data(24, seed=5)
    by_group = {name: X[:, cols] for name, cols in zip(exported.group_names, make.GROUPS)}
    for k in range(exported.n_prefixes):
        pred = exported.predict(by_group, prefix=k)
        got = np.asarray(getattr(pred, "proba", pred), np.float64)
        if kind == "linear":
            want = model.apply_link(model.linear(X, k))
        else:
            want = model.predict(X, stage=k)
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-4)
    report = verify_export(FIXTURES / folder, use_c=False)
    assert report.ok, report


def test_one_changed_byte_of_a_graph_is_caught(tmp_path):
    """Negative control: the byte comparison and the runtime's checksums both see a one-byte change."""
    out = tmp_path / "compat_trees"
    shutil.copytree(FIXTURES / "compat_trees", out)
    graph = out / "prefix_001.onnx"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0x01
    graph.write_bytes(bytes(data))
    assert _files(out) != _files(FIXTURES / "compat_trees")
    with pytest.raises(EdgeseqError):
        ExportedModel(out)
