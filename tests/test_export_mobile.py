"""`edgeseq export --batch-size N`: fixed shapes, so mobile execution providers can take the graphs.

onnxruntime's own mobile usability checker (onnxruntime.tools.mobile_helpers) counts the nodes NNAPI
and CoreML would run: none of a graph with a dynamic batch dimension (the negative control), every
node but ArgMax (which neither supports) once the batch size is fixed, and every node once the
labels are left to the runtime (`--labels runtime`). edgeseq's runtime pads and splits batches to the
fixed size and must give the dynamic export's predictions (and labels) for any row count.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from sequences import random_sequence
from test_runtime_support import group_features

from edgeseq.cli import main
from edgeseq.errors import ExportError
from edgeseq.format import read_verified
from edgeseq.export.writer import export_model
from edgeseq.io.model_io import save_model
from edgeseq.runtime.session import AnytimeSession

B = 4
CASES = [("identity", (2, 3, 1), 2), ("sigmoid", (3, 2), 1), ("softmax", (4, 2, 6), 5)]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def exports(request, tmp_path_factory):
    link, sizes, P = request.param
    seq = random_sequence(np.random.default_rng(P), sizes, n_outputs=P, link=link)
    d = tmp_path_factory.mktemp(link)
    export_model(seq, d / "dyn")
    export_model(seq, d / "fixed", batch_size=B)
    if link != "identity":
        export_model(seq, d / "mobile", batch_size=B, labels="runtime", ort=True)
    return seq, d / "dyn", d / "fixed"


def _checker():
    return pytest.importorskip("onnxruntime.tools.mobile_helpers.usability_checker",
                               reason="this onnxruntime has no mobile usability checker")


def _supported(uc, path):
    """(nodes, NNAPI-supported, CoreML-supported, unsupported ops) with shapes as the graph states them."""
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    nnapi = uc.check_nnapi_partitions(model, True)
    coreml = uc.check_coreml_partitions(model, True, "coreml_supported_mlprogram_ops.md")
    return nnapi.num_nodes, nnapi.num_supported_nodes, coreml.num_supported_nodes, nnapi.unsupported_ops


def test_fixed_shapes_in_graphs_and_manifest(exports):
    seq, dyn, fixed = exports
    assert read_verified(fixed)["batch_size"] == B and read_verified(dyn)["batch_size"] is None
    for p in read_verified(fixed)["prefixes"]:
        g = onnx.load(str(fixed / p["file"])).graph
        for v in [*g.input, *g.output]:
            assert v.type.tensor_type.shape.dim[0].dim_value == B, (p["file"], v.name)


def test_mobile_execution_providers_take_the_fixed_graphs(exports):
    uc = _checker()
    seq, dyn, fixed = exports
    for p in read_verified(fixed)["prefixes"]:
        n, nnapi, coreml, _ = _supported(uc, dyn / p["file"])
        assert nnapi == 0 and coreml == 0  # negative control: a dynamic batch dimension blocks both
        n, nnapi, coreml, unsupported = _supported(uc, fixed / p["file"])
        n_argmax = 0 if seq.link == "identity" else 1
        assert nnapi == coreml == n - n_argmax, (p["file"], nnapi, coreml, n, unsupported)
        assert unsupported <= {"ai.onnx:ArgMax"}


@pytest.mark.parametrize("rows", [1, 3, B, 2 * B + 1])
def test_runtime_pads_and_splits_to_the_fixed_batch(exports, rows):
    seq, dyn, fixed = exports
    X = np.random.default_rng(rows).normal(size=(rows, seq.n_features_in))
    feats = group_features(seq, X)
    with AnytimeSession(dyn) as a, AnytimeSession(fixed) as b:
        for j in range(seq.n_prefixes):
            pa, pb = a.predict(feats, prefix=j), b.predict(feats, prefix=j)
            if seq.link == "identity":
                np.testing.assert_allclose(pb, pa, rtol=1e-6, atol=1e-6)
                assert np.shape(pb)[0] == rows
            else:
                np.testing.assert_allclose(pb.proba, pa.proba, rtol=1e-6, atol=1e-7)
                assert np.array_equal(pb.label_index, pa.label_index) and len(pb.label) == rows
        extractors = {name: (lambda _inp, v=v: v[0]) for name, v in feats.items()}
        ra, rb = a.run(extractors), b.run(extractors)  # the anytime loop feeds one row at a time
        assert ra.prefix == rb.prefix == seq.n_groups


def test_cli_batch_size(tmp_path):
    seq = random_sequence(np.random.default_rng(0), (2, 1), n_outputs=1)
    save_model(seq, tmp_path / "m.pkl")
    res = CliRunner().invoke(main, ["export", str(tmp_path / "m.pkl"), str(tmp_path / "out"), "--batch-size", "8"])
    assert res.exit_code == 0, res.output
    assert read_verified(tmp_path / "out")["batch_size"] == 8
    assert "batch size 8; ORT-format files no" in CliRunner().invoke(main, ["inspect", str(tmp_path / "out")]).output
    res = CliRunner().invoke(main, ["export", str(tmp_path / "m.pkl"), str(tmp_path / "o2"), "--batch-size", "0"])
    assert res.exit_code != 0 and "batch-size" in res.output
    with pytest.raises(ExportError, match="batch size"):
        export_model(seq, tmp_path / "o3", batch_size=True)


def test_with_labels_left_to_the_runtime_the_providers_take_every_node(exports):
    uc = _checker()
    seq, dyn, fixed = exports
    if seq.link == "identity":
        pytest.skip("a regression has no labels")
    mobile = fixed.parent / "mobile"
    m = read_verified(mobile)
    assert m["labels"] == "runtime" and "labels" not in read_verified(fixed)
    for p in m["prefixes"]:
        n, nnapi, coreml, unsupported = _supported(uc, mobile / p["file"])
        assert nnapi == coreml == n and not unsupported, (p["file"], nnapi, coreml, n, unsupported)
        assert [o.name for o in onnx.load(str(mobile / p["file"])).graph.output] == ["y", "proba"]
    ops = (mobile / m["ort"]["operators_config"]).read_text()
    assert "ArgMax" not in ops and ("Sigmoid" if seq.link == "sigmoid" else "Softmax") in ops
    assert "ArgMax" in (fixed.parent / "mobile").parent.joinpath("fixed", p["file"]).read_bytes().decode("latin-1")


def test_runtime_labels_are_the_graphs_labels_ties_included(exports):
    seq, dyn, fixed = exports
    if seq.link == "identity":
        pytest.skip("a regression has no labels")
    X = np.random.default_rng(7).normal(size=(50, seq.n_features_in))
    X[:5] = 0.0  # every prefix sees the same row: exact ties where the weights are symmetric
    feats = group_features(seq, X)
    with AnytimeSession(dyn) as a, AnytimeSession(fixed.parent / "mobile") as b:
        for j in range(seq.n_prefixes):
            pa, pb = a.predict(feats, prefix=j), b.predict(feats, prefix=j)
            np.testing.assert_allclose(pb.proba, pa.proba, rtol=1e-6, atol=1e-7)
            assert np.array_equal(pb.label_index, pa.label_index) and np.array_equal(pb.label, pa.label)
    from edgeseq.evaluate.verify import verify_export
    assert verify_export(fixed.parent / "mobile", use_c=False).ok


def test_prefix0_ties_pick_the_first_class_in_both(tmp_path):
    """A prior with equal class probabilities: ArgMax and the runtime both take class 0."""
    seq = random_sequence(np.random.default_rng(1), (2, 1), n_outputs=3, link="softmax")
    seq.intercepts[0][...] = 0.0
    export_model(seq, tmp_path / "graph")
    export_model(seq, tmp_path / "runtime", labels="runtime")
    feats = group_features(seq, np.zeros((2, seq.n_features_in)))
    with AnytimeSession(tmp_path / "graph") as a, AnytimeSession(tmp_path / "runtime") as b:
        assert a.predict(feats, prefix=0).label_index.tolist() == b.predict(feats, prefix=0).label_index.tolist() \
            == [0, 0]


def test_labels_option_is_checked(tmp_path):
    seq = random_sequence(np.random.default_rng(0), (2, 1), n_outputs=1)
    with pytest.raises(ExportError, match="a regression model has no labels"):
        export_model(seq, tmp_path / "o", labels="runtime")
    with pytest.raises(ExportError, match="labels must be one of graph, runtime"):
        export_model(random_sequence(np.random.default_rng(0), (2, 1), n_outputs=3, link="softmax"),
                     tmp_path / "o", labels="argmax")
    clf = random_sequence(np.random.default_rng(0), (2, 1), n_outputs=3, link="softmax")
    save_model(clf, tmp_path / "c.pkl")
    res = CliRunner().invoke(main, ["export", str(tmp_path / "c.pkl"), str(tmp_path / "out"), "--labels", "runtime"])
    assert res.exit_code == 0, res.output
    assert "labels chosen by the runtime" in CliRunner().invoke(main, ["inspect", str(tmp_path / "out")]).output


def test_a_manifest_claiming_runtime_labels_for_a_regression_is_refused(tmp_path):
    import json
    from edgeseq.errors import IntegrityError
    from edgeseq.format import dump_manifest, manifest_checksum
    export_model(random_sequence(np.random.default_rng(0), (2, 1), n_outputs=1), tmp_path / "out")
    path = tmp_path / "out" / "manifest.json"
    for value, message in (("runtime", "a regression model has no labels"), ("argmax", "labels")):
        m = json.loads(path.read_text())
        m["labels"] = value
        m["manifest_sha256"] = manifest_checksum(m)
        path.write_bytes(dump_manifest(m))
        with pytest.raises(IntegrityError, match=message):
            read_verified(tmp_path / "out")


def test_tree_stages_leave_the_labels_to_the_runtime_too(tmp_path):
    from tree_models import lightgbm_model
    model = lightgbm_model("softmax")
    export_model(model, tmp_path / "graph")
    export_model(model, tmp_path / "runtime", labels="runtime")
    from edgeseq.evaluate.verify import verify_export
    assert verify_export(tmp_path / "runtime", use_c=False).ok
    X = np.random.default_rng(3).normal(size=(40, model.ensemble.n_features))
    feats = {n: X[:, c] for n, c in zip(model.group_names, model.group_columns)}
    with AnytimeSession(tmp_path / "graph") as a, AnytimeSession(tmp_path / "runtime") as b:
        for k in range(len(model.stages)):
            assert np.array_equal(a.predict(feats, prefix=k).label_index, b.predict(feats, prefix=k).label_index)
    for p in read_verified(tmp_path / "runtime")["prefixes"]:
        assert "ArgMax" not in [n.op_type for n in onnx.load(str(tmp_path / "runtime" / p["file"])).graph.node]
