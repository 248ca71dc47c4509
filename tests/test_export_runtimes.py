"""Every prefix graph of an export in other ONNX runtimes, against numpy: `onnx.reference` (always),
OpenVINO with the f32 inference-precision hint and tract (when the `openvino` / `tract` extras are
installed).

Prefix 0 takes a one-column input `n` (format 2): no zero-size tensor anywhere, which OpenVINO needs.
The negative control keeps a format 1 export (prefix 0 fed [N, 0]) that OpenVINO cannot load, and
checks that edgeseq's own runtime still loads and runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from sequences import random_sequence
from test_runtime_support import exported

from edgeseq.export.onnx_runners import RuntimeUnavailable, prefix_feed, run_graph
from edgeseq.format import read_verified
from edgeseq.export.onnx_graphs import prefix0_width
from edgeseq.runtime.session import AnytimeSession

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FORMAT1 = FIXTURES / "export_format1"
U32 = 2.0 ** -24
CASES = [("identity", (2, 3, 1), 2), ("sigmoid", (3, 5, 2, 1), 1), ("softmax", (4, 2, 6), 5)]


def _feeds(manifest, X):
    return [prefix_feed(manifest, X, p["index"]) for p in manifest["prefixes"]]


def _bound(seq, X, j):
    """float32 bound of the prefix's output (c_support.float32_bound's reasoning, doubled for
    runtimes that may sum in another order)."""
    cols = seq.prefix_columns(j)
    mag = np.abs(X[:, cols]) @ np.abs(seq.coefs[j]) + np.abs(seq.intercepts[j])
    bound = 4 * (len(cols) + 3) * U32 * mag.max(axis=1, keepdims=True) + 1e-30
    return bound + (2.0 ** -20 if seq.link != "identity" else 0.0)


def _check(seq, X, j, outs: dict):
    ref_y = seq.linear(X, j)
    np.testing.assert_array_less(np.abs(outs["y"] - ref_y), _bound(seq, X, j) + 0 * ref_y)
    if seq.link != "identity":
        ref_p = seq.apply_link(ref_y)
        np.testing.assert_array_less(np.abs(outs["proba"] - ref_p), _bound(seq, X, j) + 0 * ref_p)
        top2 = np.sort(ref_p, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 1e-4
        assert np.array_equal(np.asarray(outs["label"])[clear], ref_p[clear].argmax(axis=1))


def _run(runtime, path, feed):
    try:
        return run_graph(runtime, path, feed)
    except RuntimeUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def export(request, tmp_path_factory):
    link, sizes, P = request.param
    rng = np.random.default_rng(len(sizes) * 7 + P)
    seq = random_sequence(rng, sizes, n_outputs=P, link=link)
    out = exported(seq, tmp_path_factory.mktemp(link))
    X = np.vstack([rng.normal(size=(9, seq.n_features_in)), 1e3 * rng.normal(size=(2, seq.n_features_in))])
    return seq, out, read_verified(out), X


def test_no_zero_size_tensor_in_any_graph(export):
    seq, out, m, _ = export
    assert m["format_version"] == 2
    for p in m["prefixes"]:
        g = onnx.load(str(out / p["file"])).graph
        for t in g.initializer:
            assert all(d > 0 for d in t.dims), (p["file"], t.name, list(t.dims))
        for i in g.input:
            assert all(d.dim_value > 0 for d in i.type.tensor_type.shape.dim[1:]), (p["file"], i.name)


@pytest.mark.parametrize("runtime", ["onnx-reference", "openvino", "tract"])
def test_every_prefix_in_other_runtimes(export, runtime):
    """OpenVINO is compiled with the f32 precision hint (run_graph checks that it was accepted)."""
    seq, out, m, X = export
    for p, feed in zip(m["prefixes"], _feeds(m, X)):
        _check(seq, X, p["index"], _run(runtime, out / p["file"], feed))


def _format1_expected():
    exp = json.loads((FIXTURES / "export_format1_expected.json").read_text())
    return np.array(exp["X"]), [np.array(p) for p in exp["proba"]]


def test_format1_export_still_loads_and_runs():
    """An export written by format 1 (prefix 0 input [N, 0]) loads in the session; every prefix matches."""
    m = read_verified(FORMAT1)
    assert m["format_version"] == 1 and prefix0_width(1) == 0
    X, expected = _format1_expected()
    feats = {g["name"]: X[:, g["columns"]] for g in m["groups"]}
    with AnytimeSession(FORMAT1) as sess:
        for j, ref in enumerate(expected):  # prefix 0 takes the number of rows from the features given
            np.testing.assert_allclose(sess.predict(feats, prefix=j).proba, ref, atol=1e-5)
        extractors = {name: (lambda _inp, v=v: v[0]) for name, v in feats.items()}
        assert sess.run(extractors, budget=0.0).prefix == 0  # the anytime loop commits prefix 0 first


def test_negative_control_openvino_rejects_format1_prefix0():
    """Why format 2 exists: OpenVINO cannot load the zero-size prefix 0 graph of a format 1 export."""
    m = read_verified(FORMAT1)
    X, _ = _format1_expected()
    _run("openvino", FORMAT1 / "prefix_001.onnx", prefix_feed(m, X, 1))  # the other prefixes do load
    with pytest.raises(Exception, match="(?i)scalar|ArgMax|convert|shape"):  # noqa: B017 -- OpenVINO's own errors
        run_graph("openvino", FORMAT1 / "prefix_000.onnx", prefix_feed(m, X, 0))
