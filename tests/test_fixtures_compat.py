"""Model files and exports written by an earlier version load, run and export byte for byte the same.

The fixtures (one model file per stage kind, each with a float32-C and an int16-C export) were written
by `tests/fixtures/make_fixtures.py`, which the tests never run. Exporting the committed model file
again must reproduce every committed file, manifest included (a manifest records no date or
version, so nothing is exempt); the committed exports must load in `ExportedModel`, agree with the
model file's own predictions and pass `verify`. The model file itself is not compared byte for byte:
it records the edgeseq version that wrote it. A one-byte change of a committed graph must be caught.
"""

from __future__ import annotations

import importlib.util
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
    differ = [name for name in committed if again[name] != committed[name]]
    assert not differ, f"re-exporting {folder} changed {differ}"


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
