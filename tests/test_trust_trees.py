"""Untrusted tree model files and tree / int16 exports (issue 24, items 1, 3, 8, 9, 11, 13, 14).

Every crafted input is built here from a valid model; each must be refused with one short
EdgeseqError line, within a time and memory bound, and the same builder without the hostile edit
must load, export and verify (the negative control).
"""

from __future__ import annotations

import json
import time
import tracemalloc

import numpy as np
import pytest
from hostile import edited_tree as edited
from hostile import tree_field_cases
from hostile import tree_model_bytes as model_bytes

from edgeseq.errors import EdgeseqError, ModelFormatError
from edgeseq.evaluate.verify import verify_export
from edgeseq.export.kinds.trees.c_float import _demo_model
from edgeseq.export.writer import export_model
from edgeseq.format import MAX_UNUSED_TRAILING
from edgeseq.io.model_io import as_exportable, loads_model
from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel

MAX_MESSAGE = 400


@pytest.fixture(autouse=True, scope="module")
def _warm():
    """Load one valid file first: the loader imports scikit-learn lazily, which is not the file's cost."""
    loads_model(model_bytes(_demo_model()))


def refused(call, error=EdgeseqError, *, max_seconds: float = 5.0, max_bytes: int = 16 << 20) -> str:
    """`call()` raises `error` with one short line, quickly and without a large allocation."""
    t0 = time.perf_counter()
    tracemalloc.start()
    try:
        with pytest.raises(error) as info:
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    seconds = time.perf_counter() - t0
    msg = str(info.value)
    assert "\n" not in msg and len(msg) <= MAX_MESSAGE, msg[:1000]
    assert seconds < max_seconds, seconds
    assert peak < max_bytes, peak
    return msg


# ---------------------------------------------------------------- item 1: n_features unrelated to the groups

@pytest.mark.parametrize("n_features", [262_144, 1 << 24])
def test_a_tree_file_claiming_many_features_is_refused_at_load(n_features, tmp_path):
    """Before: 262,144 features loaded (77 MB) and export took 50 s and 1.7 GB; 2**24 asked numpy for
    64 GiB. Now: refused on load, before anything is sized by the claimed width."""
    data = model_bytes(edited(ensemble={"n_features": n_features}))
    assert len(data) < 4096
    msg = refused(lambda: export_model(as_exportable(loads_model(data)), tmp_path / "out"), ModelFormatError)
    assert f"{n_features} features" in msg and "no group" in msg


def test_the_width_bound_counts_every_unused_column_not_only_trailing_ones(tmp_path):
    """Groups naming column 0 and column 2**24 - 1 satisfy a 'trailing columns' rule, yet justify
    only two columns."""
    m = edited(ensemble={"n_features": 1 << 24}, group_columns=(np.array([0]), np.array([(1 << 24) - 1])))
    refused(lambda: loads_model(model_bytes(m)), ModelFormatError)


def test_a_tree_model_at_the_width_bound_loads_and_exports(tmp_path):
    """Negative control: 2 named columns + MAX_UNUSED_TRAILING unused ones export (and one more does not)."""
    width = 2 + MAX_UNUSED_TRAILING
    model = as_exportable(loads_model(model_bytes(edited(ensemble={"n_features": width}))))
    assert model.ensemble.n_features == width
    m = export_model(model, tmp_path / "out")
    assert m["n_features_in"] == width
    refused(lambda: loads_model(model_bytes(edited(ensemble={"n_features": width + 1}))), ModelFormatError)


# ---------------------------------------------------------------- item 8: fields validate did not check

def _classifier():
    ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
                       value=[0, -1.0, 1.0], roots=[0], target=[0], n_features=1, n_targets=1)
    return TreeStageModel(("a",), ([0],), [1.0], ens, (TreeStage((), 0.0, 0, 0, np.zeros((1, 1)), np.zeros(1)),
                                                        TreeStage((0,), 1.0, 0, 1, np.ones((1, 1)), np.zeros(1))),
                          "sigmoid", ("no", "yes"), np.array([3, 5]))


def _classes_cases():
    return {"2-D classes": np.array([[3, 5]]), "three classes for two outputs": np.array([3, 5, 7]),
            "repeated class": np.array([3, 3]), "NaN class": np.array([0.0, np.nan]),
            "object classes": np.array([3, None], dtype=object), "classes a list of arrays": (np.zeros(3), 1)}


TREE_CASES = tree_field_cases()


@pytest.mark.parametrize("case", sorted(TREE_CASES))
def test_crafted_tree_model_files_are_refused_in_one_line(case):
    """The corpus of tests/hostile.py: fields validate did not check (item 8) and widths no group
    justifies (item 1)."""
    data = TREE_CASES[case]
    assert len(data) < (110 << 10)
    msg = refused(lambda: loads_model(data), ModelFormatError)
    assert "tree model" in msg


@pytest.mark.parametrize("case", sorted(_classes_cases()))
def test_bad_classes_are_refused_in_one_line(case):
    """Through the loader's own re-check (`check_tree_model`): an object array never even unpickles."""
    from edgeseq.io.model_io import check_tree_model

    msg = refused(lambda: check_tree_model(edited(_classifier(), classes=_classes_cases()[case])), ModelFormatError)
    assert "classes" in msg


def test_the_item8_builders_without_the_edit_load_report_and_predict():
    """Negative control: the same models, unedited, load and predict."""
    for model in (_demo_model(), _classifier()):
        back = loads_model(model_bytes(model))
        X = np.zeros((2, back.ensemble.n_features))
        assert back.predict(X).shape[0] == 2


# ---------------------------------------------------------------- item 13: valid models that failed their own verify

def _verify_ok(model, tmp_path):
    export_model(model, tmp_path / "out")
    rep = verify_export(tmp_path / "out", use_c=True)
    assert rep.ok, [(c.prefix, c.onnx_ratio, c.c_ratio) for c in rep.checks]
    return rep


def test_a_non_zero_stage0_readout_exports_and_verifies(tmp_path):
    """Before: validate accepted W_0 != 0, export wrote it into the C model, verify regenerated the C
    from the graphs (where stage 0 has no state, so no W_0) and said "edgeseq_model.c differs".
    Stage 0 reads a zero state, so W_0 never matters: it is kept as zeros."""
    base = _demo_model()
    s0 = base.stages[0]
    model = TreeStageModel(base.group_names, base.group_columns, base.costs, base.ensemble,
                           (TreeStage((), 0.0, 0, 0, np.full((1, 1), 7.0), s0.b), *base.stages[1:]), "identity",
                           ("y",))
    X = np.array([[0.0, 0.0], [1.0, 0.0]])
    assert np.array_equal(model.predict(X), base.predict(X))
    _verify_ok(model, tmp_path)


def test_thresholds_at_the_float32_limit_export_and_verify(tmp_path):
    """Before: verify drew rows by nudging every threshold, 3.4e38 + a nudge overflowed float32 and
    verify refused its own rows ("beyond float32 range"). Now the rows stay inside float32."""
    big = float(np.finfo(np.float32).max)
    ens = TreeEnsemble(feature=[0, -1, -1, 0, -1, -1], threshold=[big, 0, 0, -big, 0, 0], left=[1, -1, -1, 4, -1, -1],
                       right=[2, -1, -1, 5, -1, -1], value=[0, 1.0, 2.0, 0, 3.0, 4.0], roots=[0, 3], target=[0, 0],
                       n_features=1, n_targets=1)
    one, zero = np.ones((1, 1)), np.zeros(1)
    model = TreeStageModel(("a",), ([0],), [1.0], ens, (TreeStage((), 0.0, 0, 0, 0 * one, zero),
                                                         TreeStage((0,), 1.0, 0, 2, one, zero)), "identity", ("y",))
    _verify_ok(model, tmp_path)


# ---------------------------------------------------------------- item 9: onnxruntime failures are one line

def _invoke(*args):
    from click.testing import CliRunner

    from edgeseq.cli import main
    return CliRunner().invoke(main, [str(a) for a in args])


def _edited_graph(tmp_path, attribute: str, edit):
    """The demo export with one TreeEnsembleRegressor attribute of stage 1 edited and the checksums
    resealed (the manifest is integrity, not a signature)."""
    import onnx
    from hostile import reseal

    out = tmp_path / "out"
    export_model(_demo_model(), out)
    g = onnx.load(str(out / "prefix_001.onnx"))
    node = next(n for n in g.graph.node if n.op_type == "TreeEnsembleRegressor")
    edit(next(a for a in node.attribute if a.name == attribute))
    (out / "prefix_001.onnx").write_bytes(g.SerializeToString())
    reseal(out, lambda m: None)
    return out


def _feature_7(a):
    a.ints[0] = 7


def _bad_mode(a):
    a.strings[0] = b"BRANCH_NOWHERE"


@pytest.mark.parametrize("attribute, edit, what", [("nodes_featureids", _feature_7, "run"),
                                                   ("nodes_modes", _bad_mode, "load")])
def test_onnxruntime_failures_are_one_edgeseq_line(tmp_path, attribute, edit, what):
    """Before: a feature id past the input width made `AnytimeSession.predict` raise a bare RuntimeError
    (`edgeseq run`: a 38-line traceback) and a graph onnxruntime cannot load gave a 4-line message of
    C++ signatures."""
    from edgeseq.runtime.session import AnytimeSession

    out = _edited_graph(tmp_path, attribute, edit)

    def predict():
        with AnytimeSession(out) as s:
            s.predict({"a": np.zeros((2, 1))}, prefix=1)

    msg = refused(predict, EdgeseqError, max_seconds=30, max_bytes=64 << 20)
    assert f"onnxruntime cannot {what} it" in msg and "::" not in msg and "/onnxruntime_src" not in msg, msg
    data = tmp_path / "rows.csv"
    data.write_text("a,b\n0.25,1\n")
    r = _invoke("run", out, data)
    assert r.exit_code != 0 and r.output.strip().count("\n") == 0 and "onnxruntime cannot" in r.output, r.output
    assert len(r.output) < 600


def test_the_unedited_graph_runs(tmp_path):
    """Negative control: the same export with an edit that changes nothing runs and predicts."""
    from edgeseq.runtime.session import AnytimeSession

    out = _edited_graph(tmp_path, "nodes_featureids", lambda a: None)
    with AnytimeSession(out) as s:
        assert s.predict({"a": np.array([[0.25], [0.75]])}, prefix=1).tolist() == [1.0, 2.0]


# ---------------------------------------------------------------- item 11: cost provenance in a model file

def _with_provenance(measured_on) -> bytes:
    from hostile import valid_model_bytes, valid_sequence

    seq = valid_sequence()
    seq.__dict__["provenance"] = {**seq.provenance, "costs_measured_on": measured_on, "cost_unit": "ms"}
    return valid_model_bytes(seq)


@pytest.mark.parametrize("measured_on", [{"machine": "pi4", "t": float("nan")}, {"machine": "pi4", "n": 10**400},
                                         {"machine": "pi4", "cpu": float("inf")}, {"machine": 5}, "pi4"])
def test_a_model_files_cost_provenance_is_checked_on_load(measured_on, tmp_path):
    """Before: NaN exported as null and a 401-digit integer went into the manifest unchecked."""
    msg = refused(lambda: export_model(as_exportable(loads_model(_with_provenance(measured_on))), tmp_path / "o"),
                  ModelFormatError)
    assert "measured_on" in msg


def test_a_measured_cost_provenance_loads_and_reaches_the_manifest(tmp_path):
    """Negative control."""
    m = export_model(as_exportable(loads_model(_with_provenance({"machine": "pi4", "n": 2**53}))), tmp_path / "o")
    assert m["provenance"]["costs_measured_on"] == {"machine": "pi4", "n": 2**53}


# ---------------------------------------------------------------- item 14: verify refuses on the counts first

def _complete_tree_model(depth: int) -> TreeStageModel:
    """The demo's groups with one complete binary tree of `depth` on feature 0 (2**(depth+1) - 1 nodes)."""
    n = 2 ** (depth + 1) - 1
    inner = n // 2
    idx = np.arange(n)
    split = idx < inner
    ens = TreeEnsemble(feature=np.where(split, 0, -1), threshold=np.where(split, np.linspace(-1, 1, n), 0),
                       left=np.where(split, 2 * idx + 1, -1), right=np.where(split, 2 * idx + 2, -1),
                       value=np.where(split, 0.0, idx % 7), roots=[0], target=[0], n_features=2, n_targets=1)
    one, zero = np.ones((1, 1)), np.zeros(1)
    return TreeStageModel(("a", "b"), ([0], [1]), [1.0, 2.0], ens,
                          (TreeStage((), 0.0, 0, 0, 0 * one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)),
                          "identity", ("y",))


def _swapped_graph(tmp_path, depth: int):
    """A resealed export whose stage-1 graph is replaced by one with 2**(depth+1) - 1 nodes, while the
    manifest still states the original counts."""
    from hostile import reseal

    from edgeseq.export.kinds.trees.onnx import build_stage_graph

    small = _complete_tree_model(1)
    out = tmp_path / "out"
    export_model(small, out)
    big = build_stage_graph(_complete_tree_model(depth), 1, ["a", "b"], model_name=out.name)
    (out / "prefix_001.onnx").write_bytes(big.SerializeToString())
    reseal(out, lambda m: None)
    return out


def test_verify_refuses_a_graph_heavier_than_its_counts_before_parsing_it(tmp_path):
    """Before: verify parsed the whole graph (2 M nodes: 46 s, 950 MB) and only then compared it with
    the manifest's counts. Now a stat refuses it."""
    out = _swapped_graph(tmp_path, 15)  # 65,535 nodes where the manifest says 3
    assert (out / "prefix_001.onnx").stat().st_size > 1 << 20
    msg = refused(lambda: verify_export(out, use_c=False), max_seconds=5, max_bytes=4 << 20)
    assert "refusing to parse it" in msg and "3 nodes" in msg


def test_a_graph_of_the_stated_size_is_parsed_and_judged_by_its_content(tmp_path):
    """Negative control: a swapped graph of a size the counts allow is parsed, then refused for what it holds."""
    out = _swapped_graph(tmp_path, 2)  # 7 nodes where the manifest says 3: within the size bound
    msg = refused(lambda: verify_export(out, use_c=False), max_seconds=30, max_bytes=64 << 20)
    assert "refusing to parse" not in msg


# ---------------------------------------------------------------- item 3: a forged int16 export

def _int16_case(kind: str):
    """(model, calibration X, y): linear regression / classifier, LightGBM tree regression / binary."""
    from tree_models import data, lightgbm_model

    from edgeseq import AnytimeClassifier, AnytimeRegressor

    if kind.startswith("trees"):
        X, s = data()
        return lightgbm_model("identity" if kind == "trees-regression" else "sigmoid"), X, None
    X = np.random.default_rng(5).normal(size=(300, 4))
    if kind == "linear-regression":
        return AnytimeRegressor([[0, 1], [2], [3]], [1.0, 2.0, 3.0]).fit(X, X @ [1.0, -2.0, 0.5, 3.0]), X, None
    return AnytimeClassifier([[0, 1], [2], [3]], [1.0, 2.0, 3.0]).fit(X, (X @ [1.0, -2.0, 0.5, 3.0] > 0)), X, None


def _forge_int16(out) -> None:
    """What the red team did, with the project's own functions: scales re-chosen as if the calibration
    rows had spanned +-30,000 (every feature shift 0, offset 0), every recorded loss set to "no loss",
    the int16 C regenerated from those scales, every checksum recomputed."""
    from hostile import reseal

    from edgeseq.export.kinds.affine.c_int16 import int16_manifest_entry, write_c_int16_model
    from edgeseq.export.kinds.trees.c_int16 import tree_int16_manifest_entry, write_c_int16_tree_model
    from edgeseq.export.kinds.affine.reader import sequence_from_export
    from edgeseq.export.kinds.affine.quantize import quantize_sequence
    from edgeseq.export.kinds.trees.quantize import quantize_trees
    from edgeseq.export.kinds.trees.verify import tree_model_from_export

    m = json.loads((out / "manifest.json").read_text())
    wide = np.zeros((2, m["n_features_in"]))
    wide[0], wide[1] = -30_000.0, 30_000.0
    if m.get("stage_kind") == "trees":
        model = tree_model_from_export(out)
        qm = quantize_trees(model, wide)
        entry = tree_int16_manifest_entry(qm, 300)
        write_c_int16_tree_model(model, qm, out, m["c"]["prefix"], model_name=m["model_name"])
    else:
        seq = sequence_from_export(out)
        qm = quantize_sequence(seq, wide)
        entry = int16_manifest_entry(seq, qm, 300)
        write_c_int16_model(seq, qm, out, m["c"]["prefix"], model_name=m["model_name"])
    assert all(f["shift"] == 0 and f["offset"] == 0 for f in entry["features"])
    for p in entry["prefixes"]:
        p.update({k: v for k, v in {"explained_variance_loss": 0.0, "max_abs_error": 0.0, "accuracy_loss_pp": 0.0,
                                    "label_agreement": 1.0}.items() if k in p})
    reseal(out, lambda man: man["c"].update(int16=entry))


INT16_KINDS = ["linear-regression", "linear-classifier", "trees-regression", "trees-classifier"]


@pytest.mark.parametrize("kind", INT16_KINDS)
def test_a_forged_int16_export_fails_verify(kind, tmp_path):
    """Before: verify said every prefix agrees (the int16 C is bit-identical to the simulation of the
    forged scales) and only noted the distance from float. Now the recorded loss is recomputed."""
    model, X, y = _int16_case(kind)
    out = tmp_path / "out"
    export_model(as_exportable(model), out, c_dtype="int16", calibration=(X, y))
    genuine = verify_export(out, use_c=False)  # negative control: the genuine export
    assert genuine.ok
    _forge_int16(out)
    for use_c in (False, True):
        msg = refused(lambda: verify_export(out, use_c=use_c), max_seconds=60, max_bytes=256 << 20)
        assert "recorded loss cannot be reproduced" in msg, msg
    assert "int16 figures ok" in genuine.c_note, genuine.c_note


def test_check_rows_of_a_wide_or_large_tree_model_are_capped():
    """The export's float32 check and verify keep, per row, every feature, one leaf per tree and the
    state: 512 rows of a model with 2**17 one-leaf trees would hold 512 MB of leaves. The row count is
    capped by the largest of those widths (the linear exports' `sample_count` rule)."""
    from edgeseq.forms.linear import MAX_SAMPLE_VALUES
    from edgeseq.export.kinds.trees.writer import N_CHECK_ROWS, check_row_count, threshold_rows

    T = 1 << 17
    ens = TreeEnsemble(feature=np.full(T, -1), threshold=np.zeros(T), left=np.full(T, -1), right=np.full(T, -1),
                       value=np.full(T, 1e-3), roots=np.arange(T), target=np.zeros(T, np.int64), n_features=2,
                       n_targets=1)
    one, zero = np.ones((1, 1)), np.zeros(1)
    many = TreeStageModel(("a", "b"), ([0], [1]), [1.0, 2.0], ens,
                          (TreeStage((), 0.0, 0, 0, 0 * one, zero), TreeStage((0,), 1.0, 0, T, one, zero)),
                          "identity", ("y",))
    wide = edited(ensemble={"n_features": 40_000}, group_columns=(np.array([0]), np.arange(1, 40_000)))
    for model, width in ((many, T), (wide, 40_000)):
        n = check_row_count(model, N_CHECK_ROWS)
        assert 8 <= n < N_CHECK_ROWS and n * width <= MAX_SAMPLE_VALUES
    assert threshold_rows(wide, check_row_count(wide, N_CHECK_ROWS)).nbytes <= 8 * MAX_SAMPLE_VALUES
    assert check_row_count(_demo_model(), N_CHECK_ROWS) == N_CHECK_ROWS  # small models keep every row



@pytest.mark.parametrize("bad_names", [
    lambda n: ("a",) * n,                                   # repeated
    lambda n: ("x" * 100_000,) + tuple(f"c{i}" for i in range(1, n)),  # oversized
    lambda n: ("a", "b") if n != 2 else ("a",),             # wrong count
    lambda n: tuple(range(n)),                              # not strings
    lambda n: [f"c{i}" for i in range(n)],                  # not a tuple
])
def test_loaded_tree_model_feature_names_are_validated(bad_names):
    """A model file skips __post_init__ when unpickled: validate must check feature_names itself, and
    a valid set passes (the control)."""
    import dataclasses

    from tree_models import toy_model

    model = toy_model()
    n = model.ensemble.n_features
    good = dataclasses.replace(model, feature_names=tuple(f"c{i}" for i in range(n)))
    good.validate()
    bad = object.__new__(type(model))  # as the unpickler builds it: no __post_init__
    for f in dataclasses.fields(model):
        object.__setattr__(bad, f.name, getattr(good, f.name))
    object.__setattr__(bad, "feature_names", bad_names(n))
    with pytest.raises(ModelFormatError):
        bad.validate()
