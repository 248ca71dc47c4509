"""`edgeseq.runtime.ort.session_calls`: the private fast path of onnxruntime's compiled session and its
public fallback give the same answers on both call paths (IO binding for small batches, `run` above),
and the fallback is taken when the private attribute is absent (an onnxruntime that renamed it)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgeseq import AnytimeRegressor, export_model
from edgeseq.runtime.ort import BIND_MAX_ROWS, PrefixRunner, load_verified_bytes, session_calls


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 6)).astype(np.float32)
    est = AnytimeRegressor(groups=[[0, 1], [2, 3, 4], [5]], costs=[1.0, 2.0, 3.0]).fit(X, X @ rng.normal(size=6))
    out = tmp_path_factory.mktemp("ortcalls") / "out"
    export_model(est.fitted_sequence_, out)
    p = json.loads((out / "manifest.json").read_text())["prefixes"][-1]
    return out, p, X, est


def _runner(graph, private: bool) -> PrefixRunner:
    out, p, _, _ = graph
    r = PrefixRunner(load_verified_bytes(out / p["file"], p["sha256"]), p["inputs"], ["y"], p["file"], squeeze=True)
    r._run, r._run_io, r._inner = session_calls(r.session, private=private)
    return r


@pytest.mark.parametrize("n", [1, BIND_MAX_ROWS, BIND_MAX_ROWS + 1, 250])
def test_private_and_public_calls_agree(graph, n):
    fast, public = _runner(graph, True), _runner(graph, False)
    assert fast._inner and not public._inner  # this onnxruntime has the private attribute
    arrays = [np.ascontiguousarray(graph[2][:n, :d]) for d in fast._dims]
    (a,), fin_a = fast.call(arrays, n)
    (b,), fin_b = public.call(arrays, n)
    assert fin_a and fin_b and a.shape == (n,) and np.array_equal(a, b)


def test_fallback_when_the_private_attribute_is_missing(graph):
    real = _runner(graph, True).session

    class PublicOnly:  # what a future onnxruntime without `_sess` would look like from here
        def run(self, names, feeds):
            return real.run(names, feeds)

        def run_with_iobinding(self, binding):
            return real.run_with_iobinding(binding)

    run, run_bound, used = session_calls(PublicOnly())
    assert used is False
    p = graph[1]
    feeds = {name: np.ones((2, d), np.float32) for name, d in zip(p["inputs"], _runner(graph, True)._dims)}
    assert np.array_equal(run(["y"], feeds, None)[0], real.run(["y"], feeds)[0])
    # negative control: an object whose `_sess` lacks the methods is not taken for the compiled session
    broken = PublicOnly()
    broken._sess = object()
    assert session_calls(broken)[2] is False
