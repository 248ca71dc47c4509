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

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hostile import mutate, reseal, valid_model_bytes, valid_sequence

from edgeseq.errors import IntegrityError, ModelFormatError
from edgeseq.io.model_io import as_sequence, loads_model
from edgeseq.forms.linear import FittedSequence

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
    from edgeseq.export.kinds.affine.reader import read_verified, sequence_from_export

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
    from edgeseq.export.kinds.trees.verify import tree_model_from_export
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


def _fuzz_manifest(export_dir, tmp_path_factory, data, read, under: tuple = (), error=IntegrityError) -> None:
    """Reseal a copy of `export_dir` with 1-3 random edits of its manifest (of the part at `under`, when
    given); `read` it within bounds."""
    base = json.loads((export_dir / "manifest.json").read_text())
    paths = [p for p in _paths(base) if p and p[:len(under)] == under]
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
    _bounded(lambda: read(out), size, error)


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
    from edgeseq.train.trees.lightgbm_import import from_lightgbm_text

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
    from edgeseq.train.trees.lightgbm_import import from_lightgbm_dump

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
    from edgeseq.train.trees.lightgbm_import import from_lightgbm_text

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


# ---------------------------------------------------------------- tree model files and int16 exports (issue 24)

def _tree_seeds():
    from tree_models import afr_model, lightgbm_model

    from edgeseq.export.kinds.trees.c_float import _demo_model

    return [valid_model_bytes(m, protocol=proto) for m in (_demo_model(), lightgbm_model("softmax"), afr_model(2))
            for proto in (2, 5)]


TREE_SEEDS = _tree_seeds()


def _load_tree(data: bytes):
    from edgeseq.io.model_io import as_exportable, check_tree_model

    model = as_exportable(loads_model(data))
    check_tree_model(model)  # whatever loaded is consistent, and predicts
    model.predict(np.zeros((2, model.ensemble.n_features)))
    return model


@FUZZ
@given(st.data())
def test_mutated_tree_model_files_load_or_fail_cleanly(data):
    """Byte-level mutations of tree model files (a TreeStageModel, a LightGBM import, a fitted AFRClassifier)."""
    seed = data.draw(st.sampled_from(TREE_SEEDS))
    blob = mutate(seed, lambda lo, hi: data.draw(st.integers(lo, hi)))
    _bounded(lambda: _load_tree(blob), len(blob), ModelFormatError)


_FIELD_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(), st.text(max_size=30),
                          st.lists(st.integers(-3, 2**25), max_size=5).map(tuple),
                          st.lists(st.integers(-3, 2**25), max_size=5).map(lambda v: np.array(v)),
                          st.lists(st.floats(), min_size=1, max_size=3).map(lambda v: np.array(v)))
_TREE_FIELDS = ["group_names", "group_columns", "costs", "link", "output_names", "classes"]
_ENSEMBLE_FIELDS = ["feature", "threshold", "left", "right", "value", "roots", "target", "n_features", "n_targets"]


@settings(FUZZ, max_examples=120)
@given(st.data())
def test_tree_model_files_with_mutated_fields_load_or_fail_cleanly(data):
    """Field-level mutations (seeded, bounded values) of a tree model's and its ensemble's attributes,
    written as a model file: loaded consistent, or one ModelFormatError line."""
    import pickle

    from edgeseq.export.kinds.trees.c_float import _demo_model

    model = copy.deepcopy(_demo_model())
    for _ in range(data.draw(st.integers(1, 3))):
        target, field = data.draw(st.sampled_from([(model, f) for f in _TREE_FIELDS]
                                                  + [(model.ensemble, f) for f in _ENSEMBLE_FIELDS]))
        object.__setattr__(target, field, data.draw(_FIELD_VALUES))
    try:
        blob = valid_model_bytes(model, protocol=5)
    except (pickle.PicklingError, TypeError, ValueError):
        return
    _bounded(lambda: _load_tree(blob), len(blob), ModelFormatError)


@pytest.fixture(scope="module")
def int16_export_dirs(tmp_path_factory):
    """An int16 tree export (LightGBM binary) and an int16 linear export (softmax), with their calibration."""
    from tree_models import data, lightgbm_model

    from edgeseq import AnytimeClassifier
    from edgeseq.export.writer import export_model

    d = tmp_path_factory.mktemp("fuzz_int16")
    X, s = data()
    export_model(lightgbm_model("sigmoid"), d / "trees", c_dtype="int16", calibration=(X, None))
    Xl = np.random.default_rng(0).normal(size=(200, 4))
    est = AnytimeClassifier(groups=[[0], [1, 2], [3]], costs=[1, 1, 2]).fit(Xl, np.digitize(Xl[:, 0], [-0.5, 0.5]))
    export_model(est.fitted_sequence_, d / "linear", c_dtype="int16", calibration=(Xl, None))
    return d


def _int16_read(out):
    """What verify does with an int16 manifest before any C: rebuild the integer model from the recorded
    scales and check the recorded figures (`tree_int16_figures` / `linear_int16_figures`)."""
    from edgeseq.export.kinds.affine.verify import linear_int16_figures, manifest_sample_rows
    from edgeseq.export.kinds.trees.verify import tree_int16_figures, tree_model_from_export
    from edgeseq.export.kinds.affine.reader import read_verified, sequence_from_export
    from edgeseq.export.kinds.trees.writer import threshold_rows

    m = read_verified(out)
    if m.get("stage_kind") == "trees":
        model = tree_model_from_export(out)
        return tree_int16_figures(m, model, threshold_rows(model, 64))
    return linear_int16_figures(m, sequence_from_export(out), manifest_sample_rows(m, 64))


@settings(FUZZ, max_examples=25)  # each example copies, reseals and re-quantises an export
@given(st.data())
def test_resealed_mutated_int16_manifests_read_or_fail_cleanly(int16_export_dirs, tmp_path_factory, data):
    """Edits of the ``c.int16`` entry (scales, shifts, headroom, losses, state scales) of tree and linear
    int16 exports, resealed: the figures check passes or one EdgeseqError line, within bounds."""
    from edgeseq.errors import EdgeseqError

    kind = data.draw(st.sampled_from(["trees", "linear"]))
    _fuzz_manifest(int16_export_dirs / kind, tmp_path_factory, data, _int16_read, under=("c", "int16"),
                   error=EdgeseqError)
