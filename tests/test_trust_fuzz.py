"""Property-based fuzzing of the two untrusted-input readers (issue 11): mutated model files and
resealed mutated manifests. The only outcomes allowed are a valid object or one short EdgeseqError
line, within a time and memory bound. Bounded to a few seconds per test; derandomized under CI
(tests/conftest.py)."""

from __future__ import annotations

import copy
import functools
import json
import shutil
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hostile import mutate, reseal, valid_model_bytes, valid_sequence

from edgeseq.errors import IntegrityError, ModelFormatError
from edgeseq.io.model_io import as_sequence, loads_model
from edgeseq.sequence import FittedSequence

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.function_scoped_fixture])


def _estimators():
    import numpy as np

    from edgeseq import AnytimeClassifier, AnytimeRegressor

    X = np.random.default_rng(0).normal(size=(60, 4))
    return [AnytimeRegressor(groups=[[0, 1], [2], [3]], costs=[1, 2, 3]).fit(X, X @ [1.0, 2.0, 0.5, -1.0]),
            AnytimeClassifier(groups=[[0], [1, 2], [3]], costs=[1, 1, 2]).fit(X, (X[:, 0] > 0).astype(int))]


SEEDS = [valid_model_bytes(valid_sequence(link, p), protocol=proto)
         for link, p in (("identity", 1), ("sigmoid", 1), ("softmax", 3)) for proto in (2, 5)] + \
        [valid_model_bytes(est, protocol=proto) for est in _estimators() for proto in (2, 5)]


def _bounded(call, size: int, error):
    """Run `call`; it may return or raise `error` (one short line) - nothing else, in bounded time
    and memory (a generous multiple of the input's size)."""
    t0 = time.perf_counter()
    tracemalloc.start()
    try:
        result = call()
    except error as exc:
        msg = str(exc)
        assert "\n" not in msg and len(msg) <= 600, msg[:800]
        result = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 5
    assert peak < 200 * size + (32 << 20), peak
    return result


@st.composite
def mutated(draw):
    return mutate(draw(st.sampled_from(SEEDS)), lambda lo, hi: draw(st.integers(lo, hi)))


@FUZZ
@given(mutated())
def test_mutated_model_files_load_or_fail_cleanly(data):
    def load():
        seq = as_sequence(loads_model(data))
        FittedSequence.validate(seq)  # whatever loaded is consistent
        return seq
    _bounded(load, len(data), ModelFormatError)


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    from test_runtime_support import exported
    return exported(valid_sequence("softmax", 3), tmp_path_factory.mktemp("fuzz_export"), "out")


_json = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                     | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=4),
                     max_leaves=12)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k != "manifest_sha256":
                yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@settings(FUZZ, max_examples=60)  # each example copies and reseals a directory
@given(st.data())
def test_resealed_mutated_manifests_read_or_fail_cleanly(export_dir, tmp_path_factory, data):
    from edgeseq.export.manifest import read_verified, sequence_from_export

    _fuzz_manifest(export_dir, tmp_path_factory, data, lambda out: (read_verified(out), sequence_from_export(out)))


@pytest.fixture(scope="module")
def tree_export_dir(tmp_path_factory):
    from tree_models import lightgbm_model

    from edgeseq.export.writer import export_model

    out = tmp_path_factory.mktemp("fuzz_tree_export") / "out"
    export_model(lightgbm_model("softmax"), out)
    return out


@settings(FUZZ, max_examples=60)
@given(st.data())
def test_resealed_mutated_tree_manifests_read_or_fail_cleanly(tree_export_dir, tmp_path_factory, data):
    """The same for a tree-stage export: the reader, the model rebuilt from the graphs and the runtime."""
    from edgeseq.evaluate.verify_trees import tree_model_from_export
    from edgeseq.runtime.model import ExportedModel

    _fuzz_manifest(tree_export_dir, tmp_path_factory, data,
                   lambda out: (tree_model_from_export(out), ExportedModel(out)))


def _set_paths(obj, edits) -> None:
    """Set each (path, value) of `edits` inside the nested dicts/lists `obj` (a copy of value)."""
    for path, value in edits:
        node = obj
        try:
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = copy.deepcopy(value)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier edit changed the shape: skip


def _fuzz_manifest(export_dir, tmp_path_factory, data, read) -> None:
    """Reseal a copy of `export_dir` with 1-3 random edits of its manifest; `read` it within bounds."""
    base = json.loads((export_dir / "manifest.json").read_text())
    paths = [p for p in _paths(base) if p]
    edits = data.draw(st.lists(st.tuples(st.sampled_from(paths), _json), min_size=1, max_size=3))

    def edit(m):
        _set_paths(m, edits)
    out = tmp_path_factory.mktemp("fz") / "out"
    shutil.copytree(export_dir, out)
    try:
        reseal(out, edit)
    except (TypeError, ValueError):  # not even serialisable as a manifest (e.g. lost "files")
        return
    except (KeyError, IndexError):
        return
    size = (out / "manifest.json").stat().st_size
    _bounded(lambda: read(out), size, IntegrityError)


def test_single_bit_flips_sweep_has_both_outcomes():
    """Not vacuous: over every third byte of one file, a flipped bit sometimes still loads (inside a
    weight) and sometimes is refused - and nothing else ever happens."""
    seed = SEEDS[-1]
    loaded = refused = 0
    for i in range(0, len(seed), 3):
        data = bytearray(seed)
        data[i] ^= 0x10
        try:
            FittedSequence.validate(as_sequence(loads_model(bytes(data))))
            loaded += 1
        except ModelFormatError as exc:
            assert "\n" not in str(exc) and len(str(exc)) <= 600
            refused += 1
    assert loaded > 10 and refused > 10, (loaded, refused)


# ----------------------------------------------------------------------------- LightGBM text models and JSON dumps
LGBM_GROUPS, LGBM_COSTS = [[0, 1], [2, 3], [4], [5, 6, 7]], [1.0, 2.0, 4.0, 8.0]


@functools.lru_cache(maxsize=None)
def _lightgbm_seeds() -> tuple:
    """(text model, JSON dump text) of small regression, binary and 3-class LightGBM models."""
    lgb = pytest.importorskip("lightgbm")
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 8))
    s = X[:, 0] + X[:, 2] * X[:, 3] - X[:, 7]
    params = dict(num_leaves=4, min_data_in_leaf=5, verbose=-1, num_threads=1, deterministic=True)
    seeds = []
    for objective, y, extra in (("regression", s, {}), ("binary", (s > 0).astype(float), {}),
                                ("multiclass", np.digitize(s, [-1, 1]).astype(float), {"num_class": 3})):
        booster = lgb.train(dict(objective=objective, **params, **extra), lgb.Dataset(X, y), 3)
        text = booster.model_to_string()
        seeds.append((text[:text.index("end of trees")] + "end of trees\n", json.dumps(booster.dump_model())))
    return tuple(seeds)


@settings(FUZZ, max_examples=150)
@given(st.data())
def test_mutated_lightgbm_text_models_import_or_fail_cleanly(data):
    """Byte edits of a LightGBM text model: the reader returns a valid model or one EdgeseqError line."""
    from edgeseq.errors import EdgeseqError
    from edgeseq.train.lightgbm_import import from_lightgbm_text

    text, _ = data.draw(st.sampled_from(_lightgbm_seeds()))
    raw = mutate(text.encode(), lambda lo, hi: data.draw(st.integers(lo, hi)))
    _bounded(lambda: from_lightgbm_text(raw.decode("utf-8", "replace"), LGBM_GROUPS, LGBM_COSTS), len(raw),
             EdgeseqError)


@settings(FUZZ, max_examples=150)
@given(st.data())
def test_mutated_lightgbm_dumps_import_or_fail_cleanly(data):
    """A LightGBM JSON dump with 1-3 values replaced by arbitrary JSON (huge integers, strings, lists,
    objects...) or its text byte-edited: a valid model or one EdgeseqError line, bounded."""
    from edgeseq.errors import EdgeseqError
    from edgeseq.train.lightgbm_import import from_lightgbm_dump

    _, dump_text = data.draw(st.sampled_from(_lightgbm_seeds()))
    if data.draw(st.booleans()):
        raw = mutate(dump_text.encode(), lambda lo, hi: data.draw(st.integers(lo, hi)))
        try:
            dump = json.loads(raw)
        except ValueError:  # not JSON any more: the caller's json.loads refuses it, not the importer
            return
    else:
        dump = json.loads(dump_text)
        paths = [p for p in _paths(dump) if p]
        _set_paths(dump, data.draw(st.lists(st.tuples(st.sampled_from(paths),
                                                      _json | st.integers(-10 ** 400, 10 ** 400)),
                                            min_size=1, max_size=3)))
        raw = json.dumps(dump).encode()
    _bounded(lambda: from_lightgbm_dump(dump, LGBM_GROUPS, LGBM_COSTS), len(raw), EdgeseqError)


def test_lightgbm_fuzz_seeds_import_and_mutations_have_both_outcomes():
    """Not vacuous: the seeds import, and single-token edits both import (inside a number) and are refused."""
    import numpy as np

    from edgeseq.errors import EdgeseqError
    from edgeseq.train.lightgbm_import import from_lightgbm_text

    loaded = refused = 0
    for text, dump_text in _lightgbm_seeds():
        assert from_lightgbm_text(text, LGBM_GROUPS, LGBM_COSTS).ensemble.n_trees >= 3
        rng = np.random.default_rng(1)
        for i in rng.choice(len(text), 40, replace=False):
            edited = text[:i] + "7" + text[i + 1:]
            try:
                from_lightgbm_text(edited, LGBM_GROUPS, LGBM_COSTS)
                loaded += 1
            except EdgeseqError as exc:
                assert "\n" not in str(exc)
                refused += 1
    assert loaded > 10 and refused > 10, (loaded, refused)
