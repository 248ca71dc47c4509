"""`edgeseq verify` for tree-stage exports: rebuild the TreeStageModel from the files, regenerate every
stage graph from it (byte-identical or refused), then compare numpy with onnxruntime stage by stage.

The reference is `TreeStageModel.predict` in float64 on the model read back from the graphs (float32
thresholds, leaves and readouts, upcast) and float32-rounded inputs, so a difference measures only how
a runtime sums in float32. The bound of a row (`tree_stage_bound`): each reached leaf is rounded to
float32 and one state dimension sums at most T leaves in float32, so ``|Δs| <= (T + 1) eps A`` with
A the sum of the reached leaves' magnitudes; the readout (S terms and the bias, float32 weights) adds
``(S + 2) eps (A @ |W| + |b|)``, and Δs reaches y through |W|; a factor 2 covers second-order terms.
Probabilities get the largest bound of the row plus 4 eps (sigmoid and softmax are contractions in
the max-norm), and labels must agree wherever the top two probabilities are further apart than twice
that.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from edgeseq.errors import InputError, IntegrityError, ModelFormatError
from edgeseq.export.c_codegen import c_link_of, recorded_c_option
from edgeseq.export.verify_checks import (EPS32, N_SAMPLES, VerifyReport, _missing_compiler, check_int16_figures,
                                            checked_rows, inside_int16_ranges, int16_range_rows, prefix_check)
from edgeseq.format import MANIFEST, c_dtype, labels_of, read_verified, stage_kind
from edgeseq.io.feature_rows import group_arrays
from edgeseq.runtime.session import AnytimeSession

KIND_NAME = "trees"  # the manifest's stage_kind of the exports read here
FILES_LINE = ("generated files ok: every tree-stage graph is byte-identical to what edgeseq generates from the "
              "trees and readouts read back from the export")


def tree_stage_bound(model, X32: np.ndarray, k: int) -> np.ndarray:
    """Per row and output, how far a float32 evaluation of stage k may be from the float64 one.

    See the module docstring for the derivation.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel
    >>> from edgeseq.export.kinds.trees.verify import tree_stage_bound
    >>> ens = TreeEnsemble(feature=[0, -1, -1], threshold=[0.5, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
    ...                    value=[0, 1.0, -4.0], roots=[0], target=[0], n_features=1, n_targets=1)
    >>> one, zero = np.ones((1, 1)), np.zeros(1)
    >>> model = TreeStageModel(("a",), ([0],), [1.0], ens,
    ...     (TreeStage((), 0.0, 0, 0, one, zero), TreeStage((0,), 1.0, 0, 1, one, zero)), "identity", ("y",))
    >>> b = tree_stage_bound(model, np.array([[0.0], [1.0]], np.float32), 1)
    >>> bool(b[1, 0] == 4 * b[0, 0])      # the bound scales with the reached leaf
    True
    """
    ens, s = model.ensemble, model.stages[k]
    trees = np.arange(s.tree_stop)
    A = np.zeros((X32.shape[0], ens.n_targets))
    if trees.size:
        leaves = np.abs(ens.tree_outputs(X32, trees))
        for j, t in enumerate(trees.tolist()):
            A[:, ens.target[t]] += leaves[:, j]
    T, S = trees.size, ens.n_targets
    bound = 2 * (T + S + 4) * EPS32 * (A @ np.abs(s.W) + np.abs(s.b)) + 1e-37
    if model.link == "identity":
        return bound
    P = 2 if model.link == "sigmoid" else s.b.shape[0]
    return np.repeat(bound.max(axis=1, keepdims=True), P, axis=1) + 4 * EPS32


def _stage_ensemble_parts(att: dict, raw_of: np.ndarray, offset: int, n_trees: int):
    """One stage's `n_trees` trees from TreeEnsembleRegressor attributes, in the layout of `TreeEnsemble`
    (node indices shifted by `offset`, features mapped back to raw columns with `raw_of`).

    Linear in the number of nodes and bounded by what the file holds: every id is range-checked
    before it is used, so a crafted graph cannot make this loop over ids it does not contain."""
    keys = ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_values",
            "nodes_truenodeids", "nodes_falsenodeids")
    n = len(att["nodes_treeids"])
    if any(len(att[k]) != n for k in keys):
        raise ValueError("the node attributes have different lengths")
    tree_ids = np.asarray(att["nodes_treeids"], np.int64)
    node_ids = np.asarray(att["nodes_nodeids"], np.int64)
    if n and (tree_ids.min() < 0 or tree_ids.max() >= n_trees):
        raise ValueError(f"a node belongs to a tree outside 0..{n_trees - 1}")
    order = np.lexsort((node_ids, tree_ids))
    sizes = np.bincount(tree_ids, minlength=n_trees)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    if np.any(sizes == 0) or not np.array_equal(node_ids[order], np.arange(n) - np.repeat(starts, sizes)):
        raise ValueError("every tree's node ids must be 0..(its nodes - 1)")
    pick = lambda k: np.asarray(att[k])[order]  # noqa: E731
    modes, feat = pick("nodes_modes"), pick("nodes_featureids").astype(np.int64)
    branch = modes == "BRANCH_LEQ"
    if not np.all(branch | (modes == "LEAF")):
        raise ValueError("a node mode is neither BRANCH_LEQ nor LEAF")
    if np.any(branch & ((feat < 0) | (feat >= raw_of.size))):
        raise ValueError("a split reads a column outside the stage's inputs")
    root = offset + np.repeat(starts, sizes)
    leaf_at = {(int(t), int(i)): (int(d), float(w)) for t, i, d, w in
               zip(att["target_treeids"], att["target_nodeids"], att["target_ids"], att["target_weights"])}
    values, dims = np.zeros(n), [set() for _ in range(n_trees)]
    for j in np.flatnonzero(~branch).tolist():
        d, w = leaf_at[(int(tree_ids[order[j]]), int(node_ids[order[j]]))]
        values[j] = w
        dims[int(tree_ids[order[j]])].add(d)
    if any(len(d) != 1 for d in dims):
        raise ValueError("a tree's leaves must add to exactly one state dimension")
    cols = {"feature": np.where(branch, raw_of[np.where(branch, feat, 0)], -1),
            "threshold": np.where(branch, pick("nodes_values"), 0.0),
            "left": np.where(branch, root + pick("nodes_truenodeids"), -1),
            "right": np.where(branch, root + pick("nodes_falsenodeids"), -1), "value": values}
    return cols, (offset + starts).tolist(), [d.pop() for d in dims], offset + n


# What one stage graph may weigh for the counts its manifest entry states (the generated graphs hold
# 35-80 bytes per node; a node's seven attributes and its leaf's four take at most ~125 bytes unpacked)
GRAPH_BYTES_PER_NODE = 160
GRAPH_BYTES_BASE = 64 << 10
GRAPH_BYTES_PER_INPUT = 4096  # a name of at most 1,024 bytes, written at most twice, and its shape
GRAPH_BYTES_PER_OUTPUT = 2048  # an output or class label name
GRAPH_BYTES_PER_WEIGHT = 8


def check_stage_graph_size(path: Path, entry: dict, S: int, P: int, core: bool = False) -> None:
    """Refuse a stage graph larger than the counts its manifest entry states can justify, before parsing it.

    Parsing a graph costs time and memory in proportion to its size (tens of seconds and close to a
    gigabyte for millions of nodes), while the manifest's counts were already checked against their
    bounds; so a graph whose file is heavier than ``n_nodes`` nodes, its inputs and an (S, P) readout
    can be is refused on a `stat`, whatever it holds. A core-form graph (`core`) holds padded tables
    instead of node attributes: with T trees of n nodes, no tree has more than I = (n - T) / 2 splits,
    so its tables take at most 4 T I (I + 1) bytes of path matrix plus 28 bytes per padded node.

    Raises
    ------
    IntegrityError
        Naming the file, its size and the bound.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from edgeseq.export.kinds.trees.verify import check_stage_graph_size
    >>> p = Path(tempfile.mkdtemp()) / "prefix_001.onnx"
    >>> _ = p.write_bytes(b"x" * 80_000)
    >>> check_stage_graph_size(p, {"n_nodes": 100, "inputs": ["a", "state_in"]}, 1, 1)   # within the bound
    >>> check_stage_graph_size(p, {"n_nodes": 0, "inputs": ["n"]}, 1, 1)
    Traceback (most recent call last):
    ...
    edgeseq.errors.IntegrityError: ...prefix_001.onnx is 80000 bytes, more than a stage graph of 0 nodes ...
    """
    bound = (GRAPH_BYTES_BASE + GRAPH_BYTES_PER_NODE * entry["n_nodes"] + GRAPH_BYTES_PER_INPUT * len(entry["inputs"])
             + GRAPH_BYTES_PER_OUTPUT * (P + 2) + GRAPH_BYTES_PER_WEIGHT * (S + 1) * P)
    if core:
        T = entry.get("n_trees", 0)
        inner = max(1, (entry["n_nodes"] - T) // 2)
        bound += 4 * T * inner * (inner + 1) + 28 * T * (inner + 1) + 4 * T * S
    size = path.stat().st_size
    if size > bound:
        raise IntegrityError(f"{path} is {size} bytes, more than a stage graph of {entry['n_nodes']} nodes and "
                             f"{len(entry['inputs'])} inputs can take ({bound}); refusing to parse it")


def tree_model_from_export(out_dir):
    """Rebuild the TreeStageModel of a verified tree-stage export from its graphs (float32 values, upcast).

    The independent reading `edgeseq verify` compares the runtimes with: it trusts only what the
    files say, after their checksums were verified, and it goes through `TreeStageModel`'s own
    checks (every index, every stage's groups), so a graph that reads an uncomputed group is refused.

    Raises
    ------
    IntegrityError
        If a graph cannot be read or disagrees with the manifest.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> import lightgbm
    >>> from edgeseq import from_lightgbm
    >>> from edgeseq.export.writer import export_model
    >>> from edgeseq.export.kinds.trees.verify import tree_model_from_export
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 3)); y = X[:, 0] + 2 * X[:, 2]
    >>> model = from_lightgbm(lightgbm.LGBMRegressor(n_estimators=5, num_leaves=4, verbose=-1).fit(X, y),
    ...                       groups=[[0, 1], [2]], costs=[1.0, 3.0])
    >>> out = tempfile.mkdtemp() + "/out"
    >>> _ = export_model(model, out)
    >>> back = tree_model_from_export(out)
    >>> back.cum_cost.tolist() == model.cum_cost.tolist(), bool(np.allclose(back.predict(X), model.predict(X)))
    (True, True)
    """
    import onnx

    from edgeseq.export.kinds.trees.onnx import read_readout, read_stage_trees, stage_facts
    from edgeseq.forms.trees import TreeEnsemble, TreeStage, TreeStageModel

    out = Path(out_dir)
    m = read_verified(out)
    if stage_kind(m) != KIND_NAME:
        raise IntegrityError(f"{out}: not a tree-stage export")
    by_input = {g["input_name"]: g for g in m["groups"]}
    S, P = m["state_width"], m["outputs"]["n_outputs"]
    cols = {key: [] for key in ("feature", "threshold", "left", "right", "value")}
    roots, targets, stages, offset, n_trees = [], [], [], 0, 0
    try:
        for p in m["prefixes"]:  # every size first: nothing is parsed when one graph is larger than it claims
            check_stage_graph_size(out / p["file"], p, S, P, m["onnx"].get("tree_ops") == "core")
        for k, p in enumerate(m["prefixes"]):
            graph = onnx.load(str(out / p["file"]), load_external_data=False)  # never read other files
            W, b = read_readout(graph)
            att = read_stage_trees(graph)
            if att is not None:
                raw_of = np.concatenate([by_input[name]["columns"] for name in p["inputs"][:-1]]).astype(np.int64)
                part, r, t, offset = _stage_ensemble_parts(att, raw_of, offset, p["n_trees"])
                for key in cols:
                    cols[key].append(part[key])
                roots += r
                targets += t
            stop = len(roots)
            stages.append(TreeStage(tuple(by_input[n]["index"] for n in p["new_groups"]), p["cost"], n_trees, stop,
                                    np.zeros((S, P)) if W is None else W, b))
            n_trees = stop
        ens = TreeEnsemble(**{k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()},
                           roots=np.array(roots, np.int64),
                           target=np.array(targets, np.int64), n_features=m["n_features_in"], n_targets=S)
        by_index = sorted(m["groups"], key=lambda g: g["index"])
        classes = m["outputs"]["classes"]
        model = TreeStageModel(tuple(g["name"] for g in by_index), tuple(g["columns"] for g in by_index),
                              [g["cost"] for g in by_index], ens, tuple(stages), m["link"],
                              tuple(m["outputs"]["names"]), None if classes is None else np.array(classes),
                              None if m["feature_names"] is None else tuple(m["feature_names"]))
        for k, p in enumerate(m["prefixes"]):
            facts = stage_facts(model, k)
            if any(p[key] != v for key, v in facts.items()):
                raise ValueError(f"stage {k}'s graph holds {facts}, the manifest says otherwise")
        return model
    except (ModelFormatError, InputError, KeyError, IndexError, ValueError, TypeError) as exc:
        raise IntegrityError(f"{out}: the stage graphs do not match {MANIFEST} or are not edgeseq tree "
                             f"stages ({exc})") from None


def check_generated_stage_graphs(out_dir, manifest: dict, model) -> None:
    """Regenerate every stage graph from the rebuilt model; IntegrityError unless the shipped files are
    byte-identical (so onnxruntime only ever loads edgeseq's own output).

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> import lightgbm
    >>> from edgeseq import from_lightgbm
    >>> from edgeseq.export.writer import export_model
    >>> from edgeseq.format import read_verified
    >>> from edgeseq.export.kinds.trees.verify import check_generated_stage_graphs, tree_model_from_export
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 3)); y = X[:, 0] + 2 * X[:, 2]
    >>> model = from_lightgbm(lightgbm.LGBMRegressor(n_estimators=5, num_leaves=4, verbose=-1).fit(X, y),
    ...                       groups=[[0, 1], [2]], costs=[1.0, 3.0])
    >>> out = tempfile.mkdtemp() + "/out"
    >>> _ = export_model(model, out)
    >>> check_generated_stage_graphs(out, read_verified(out), tree_model_from_export(out))   # silent: identical
    """
    from edgeseq.export.kinds.affine.regenerate import require_identical
    from edgeseq.export.kinds.trees.onnx import build_stage_graph

    out = Path(out_dir)
    names = [g["input_name"] for g in sorted(manifest["groups"], key=lambda g: g["index"])]
    for k, p in enumerate(manifest["prefixes"]):
        graph = build_stage_graph(model, k, names, model_name=manifest["model_name"],
                                  batch_size=manifest.get("batch_size"), labels=labels_of(manifest),
                                  tree_ops=manifest["onnx"].get("tree_ops", "ai-onnx-ml"))
        require_identical(out / p["file"], graph.SerializeToString(), "stage graph")


def tree_c_predictions(out_dir, manifest: dict, model, X32: np.ndarray, *, use_c: bool, require_c: bool,
                       compiler=None):
    """(C run, None) or (None, note): the C column of a tree-stage verify.

    The C model is regenerated from `model` (the TreeStageModel rebuilt from the export's graphs) into a
    temporary directory and the shipped ``.h``/``.c`` must be byte-identical to it; only the
    regenerated copy is compiled (C that came inside an export never is). The run returns
    ``predictions[k]`` and ``labels[k]`` for every stage k.

    Raises
    ------
    IntegrityError
        The shipped C differs from what edgeseq generates.
    InputError, CCompilerError
        C is required but the export has none, or no compiler works.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.verify import tree_c_predictions
    >>> tree_c_predictions(".", {"c": None}, None, np.zeros((1, 1)), use_c=False, require_c=False)
    (None, 'C column skipped (--no-c)')
    """
    if not use_c:
        return None, "C column skipped (--no-c)"
    if manifest["c"] is None:
        if require_c:
            raise InputError("this export has no C model (it was written without one); run verify with --no-c")
        return None, "C column skipped: the export has no C model"
    from edgeseq.export.c_harness import run_c
    from edgeseq.export.kinds.trees.c_float import tree_feature_order, write_c_tree_model

    write = lambda c_dir: write_c_tree_model(model, c_dir, manifest["c"]["prefix"],  # noqa: E731
                                             model_name=manifest["model_name"], c_trees=c_trees_of(manifest),
                                             c_link=c_link_of(manifest))
    with _regenerated_c(out_dir, manifest, write, "C model") as c_dir:
        missing = _missing_compiler(compiler, require_c)
        if missing:
            return None, missing
        return run_c(c_dir, X32[:, tree_feature_order(model)], compiler=compiler), None


def c_trees_of(manifest: dict) -> str:
    """The form of a float tree export's C stages as recorded: ``c.trees`` ("table" or "code"), absent
    in exports written before the code form existed (tables).

    Examples
    --------
    >>> from edgeseq.export.kinds.trees.verify import c_trees_of
    >>> c_trees_of({"c": {"prefix": "m"}}), c_trees_of({"c": {"prefix": "m", "trees": "code"}})
    ('table', 'code')
    """
    return recorded_c_option(manifest, "trees", ("table", "code"))


@contextlib.contextmanager
def _regenerated_c(out_dir, manifest: dict, write, what: str):
    """A temporary directory holding the C `write(dir)` generates, once the shipped ``.h``/``.c`` are
    proved byte-identical to it (the only C verify ever compiles)."""
    import tempfile

    from edgeseq.export.kinds.affine.regenerate import require_identical

    with tempfile.TemporaryDirectory(prefix="edgeseq_verify_") as c_dir:
        write(c_dir)
        from edgeseq.export.stopping import append_stop_c
        append_stop_c(c_dir, manifest)  # the stopping table, as the exporter appends it
        for name in (manifest["c"]["header"], manifest["c"]["source"]):
            require_identical(Path(out_dir) / name, (Path(c_dir) / name).read_bytes(), what)
        yield c_dir


def tree_int16_c_column(out_dir, manifest: dict, model, X32: np.ndarray, *, use_c: bool, require_c: bool,
                        compiler=None):
    """(per-stage worst |C - simulation| in integer units, note) of an int16 tree export, or (None, note).

    As for a linear int16 export: the integer model is rebuilt from the trees read from the graphs and
    the scales the manifest records (`quantize_trees.quantize_trees_from_manifest`), its C regenerated
    into a temporary directory, the shipped ``.h``/``.c`` must be byte-identical to it, and only that
    copy is compiled; it runs the rows quantised with the recorded scales and must equal
    `quantize_trees.simulate_trees` bit for bit at every stage.

    Raises
    ------
    IntegrityError
        The recorded scales are not consistent with the trees, or the shipped C differs.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.verify import tree_int16_c_column
    >>> tree_int16_c_column(".", {"c": None}, None, np.zeros((1, 1)), use_c=False, require_c=False)
    (None, 'C column skipped (--no-c)')
    """
    if not use_c:
        return None, "C column skipped (--no-c)"
    from edgeseq.export.c_int16_run import run_int16_host
    from edgeseq.export.kinds.trees.c_int16 import write_c_int16_tree_model
    from edgeseq.export.quantize import dequantize
    from edgeseq.export.kinds.trees.quantize import quantize_tree_features, quantize_trees_from_manifest, simulate_trees

    qm = quantize_trees_from_manifest(model, manifest["c"]["int16"])
    write = lambda c_dir: write_c_int16_tree_model(model, qm, c_dir, manifest["c"]["prefix"],  # noqa: E731
                                                   model_name=manifest["model_name"])
    with _regenerated_c(out_dir, manifest, write, "int16 C model") as c_dir:
        missing = _missing_compiler(compiler, require_c)
        if missing:
            return None, missing
        xq = quantize_tree_features(qm, X32)
        run, _ = run_int16_host(c_dir, xq, compiler=compiler)
    diffs, far = [], 0.0
    for k, (sim, _) in enumerate(simulate_trees(qm, xq)):
        diffs.append(int(np.abs(run.pred[k] - sim).max(initial=0)))
        far = max(far, float(np.abs(dequantize(qm, sim, k) - model.predict(X32, stage=k)).max(initial=0.0)))
    verdict = "bit-identical to" if not any(diffs) else "DIFFERENT from"
    return diffs, (f"C column: the int16 C model, {verdict} the integer simulation at every stage "
                   f"(|C - simulation| in integer units); its largest distance from the float model is {far:.3g}")


def tree_int16_figures(manifest: dict, model, X: np.ndarray | None) -> str:
    """`verify_checks.check_int16_figures` for an int16 tree export: on the given rows `X` inside the recorded
    ranges (None: none), and on rows drawn inside those ranges where the trees decide (between each
    feature's extreme thresholds, widened by a tenth), where a scale coarser than the data shows as
    flipped branches.

    Why verify's own threshold rows are not passed here (`verify_tree_export` gives None unless the
    user gave rows): they put every feature on a threshold, or within 1e-7 of it, far below any
    int16 quantum. There the integer branch is not a measure of the scale's resolution but a coin
    per distinct threshold: ``x == t`` goes right in int16 exactly when ``t * 2**s`` rounds up (a
    fractional part above one half: the threshold rule in `quantize` floors it, the feature is rounded), so the recorded scales and the
    scales recalibrated on those rows (one bit finer) flip different coins, and with the few
    distinct thresholds LightGBM reuses the label disagreement of the two differed by more than the
    check's factor on honest exports (0.19 against 0.06 on the boosting test problem). Rows spread
    over the ranges, like the drawn ones and the calibration rows, measure the resolution.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.c_int16 import tree_int16_manifest_entry
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees
    >>> from edgeseq.export.kinds.trees.verify import tree_int16_figures
    >>> model, X = _demo_model(), np.random.default_rng(0).uniform(-1, 2, size=(50, 2))
    >>> m = {"c": {"int16": tree_int16_manifest_entry(quantize_trees(model, X), 50)}}
    >>> tree_int16_figures(m, model, X).startswith("int16 figures ok")
    True
    """
    from edgeseq.export.kinds.trees.quantize import quantize_trees, quantize_trees_from_manifest
    from edgeseq.export.kinds.trees.writer import check_row_count

    entry = manifest["c"]["int16"]
    qm = quantize_trees_from_manifest(model, entry)
    ens, cols = model.ensemble, qm.columns
    lo, hi = np.full(cols.size, np.inf), np.full(cols.size, -np.inf)
    for i, c in enumerate(cols.tolist()):
        t = ens.threshold[ens.feature == c].astype(np.float64)
        if t.size:
            pad = 0.1 * (max(float(t.max() - t.min()), float(np.abs(t).max())) or 10.0)
            lo[i], hi[i] = max(float(t.min()) - pad, -3e38), min(float(t.max()) + pad, 3e38)
    own = np.zeros((0, ens.n_features)) if X is None else X[inside_int16_ranges(X, cols, qm.feature_shift,
                                                                                qm.feature_offset)]
    drawn = int16_range_rows(cols, qm.feature_shift, qm.feature_offset, ens.n_features,
                             check_row_count(model, N_SAMPLES),
                             span=(lo, hi))
    near = np.zeros((0, ens.n_features))
    if model.link != "identity":  # see `near_threshold_rows` for why classifiers only
        near = near_threshold_rows(model, drawn, cols, hi - lo)
        near = near[inside_int16_ranges(near, cols, qm.feature_shift, qm.feature_offset)]
    return check_int16_figures(entry["prefixes"], model.link == "identity",
                               lambda q, rows: tree_int16_staged(model, q, rows), qm,
                               lambda rows: quantize_trees(model, rows),
                               [("of the given rows inside the recorded ranges", own),
                                ("rows drawn inside the recorded ranges around the thresholds", drawn),
                                ("rows drawn uniformly close to the thresholds", near)])


NEAR_WIDTH = 2.0 ** -10  # half-width of the near-threshold rows, as a share of the span the trees decide in


def near_threshold_rows(model, rows: np.ndarray, cols, width: np.ndarray, seed: int = 1) -> np.ndarray:
    """`rows` with every split feature moved close to one of its thresholds: ``t + u * NEAR_WIDTH * width``,
    u uniform in [-1, 1] (`width` per feature in the C order of `cols`).

    Why: a scale coarser than the data flips branches only within a quantum of a threshold, which
    rows spread over the whole range rarely reach; these rows are there, but spread continuously
    over a window 64 int16 quanta of the span wide, so the share of flipped branches measures the
    quantum (about a quarter of it over the window's width) instead of whether ``t * 2**s`` rounds up,
    as rows exactly on the thresholds would. A scale 64 times coarser than the span's flips about a
    quarter of the branches there, an honest one under one in a hundred. Classifiers only: their
    figure is the share of rows whose label changes, which grows with the flipped branches, while a
    regressor's is the 90 % quantile of the error, which jumps to a leaf's size once a tenth of the
    rows have one flipped branch among their dozens of near-threshold decisions; an honest scale
    several times coarser than the span (calibration rows wider than the thresholds) does that.
    On the boosting tests' three-class problem an honest export loses at most 1.2 % of the labels
    here, and scales 16 times coarser than the calibration rows' are refused.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.verify import near_threshold_rows
    >>> X = near_threshold_rows(_demo_model(), np.zeros((200, 2)), np.array([0, 1]), np.array([1024.0, 1024.0]))
    >>> bool(np.abs(X[:, 0] - 0.5).max() <= 1.0 and np.abs(X[:, 0] - 0.5).min() > 0)   # x0's split is at 0.5
    True
    """
    ens = model.ensemble
    rng = np.random.default_rng(seed)
    X = np.array(rows, dtype=np.float64)
    for i, c in enumerate(np.asarray(cols).tolist()):
        t = ens.threshold[ens.feature == c].astype(np.float64)
        if t.size and np.isfinite(width[i]):
            pick = t[rng.integers(0, t.size, X.shape[0])]
            X[:, c] = np.clip(pick + rng.uniform(-1.0, 1.0, X.shape[0]) * NEAR_WIDTH * width[i], -3e38, 3e38)
    return X.astype(np.float32).astype(np.float64)


def tree_int16_staged(model, qm, X: np.ndarray):
    """(float prediction, integer prediction, integer label) of every stage of an int16 tree model.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.kinds.trees.c_float import _demo_model
    >>> from edgeseq.export.kinds.trees.quantize import quantize_trees
    >>> from edgeseq.export.kinds.trees.verify import tree_int16_staged
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> [f.ravel().tolist() for f, _, _ in tree_int16_staged(_demo_model(), quantize_trees(_demo_model(), X), X)]
    [[0.0, 0.0], [1.0, 2.0], [11.0, 12.0]]
    """
    from edgeseq.export.kinds.trees.quantize import quantize_tree_features, simulate_trees

    sims = simulate_trees(qm, quantize_tree_features(qm, X))
    for z, (pred, label) in zip(model.staged_decision(X), sims):
        yield model.apply_link(z), pred, label


def verify_tree_export(out_dir, X: np.ndarray | None = None, *, source: str = "", use_c: bool = True,
                       require_c: bool = False, compiler=None) -> VerifyReport:
    """`verify_export` for a tree-stage export (it dispatches here): numpy vs onnxruntime per stage.

    Default rows: on and next to the trees' thresholds (`edgeseq.export.kinds.trees.writer.threshold_rows`),
    so both branches of every split and the boundary values are exercised.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> import lightgbm
    >>> from edgeseq import from_lightgbm
    >>> from edgeseq.export.writer import export_model
    >>> from edgeseq.export.kinds.trees.verify import verify_tree_export
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 3)); y = X[:, 0] + 2 * X[:, 2]
    >>> model = from_lightgbm(lightgbm.LGBMRegressor(n_estimators=5, num_leaves=4, verbose=-1).fit(X, y),
    ...                       groups=[[0, 1], [2]], costs=[1.0, 3.0])
    >>> out = tempfile.mkdtemp() + "/out"
    >>> _ = export_model(model, out)
    >>> rep = verify_tree_export(out, use_c=False)
    >>> rep.ok, [c.prefix for c in rep.checks]
    (True, [0, 1])
    """
    from edgeseq.export.kinds.trees.writer import check_row_count, threshold_rows

    m = read_verified(out_dir)
    model = tree_model_from_export(out_dir)
    check_generated_stage_graphs(out_dir, m, model)  # before anything is loaded
    given = X is not None  # the user's rows; verify's own threshold rows are not used for the int16 figures
    if X is None:
        X = threshold_rows(model, check_row_count(model, N_SAMPLES))
        source = f"{X.shape[0]} rows on and around the trees' thresholds"
    X32 = checked_rows(X, m, source)
    crun, int16_diffs = None, None
    if c_dtype(m) == "int16":  # integer predictions: bit-exact against simulate_trees, not numpy's bound
        figures = tree_int16_figures(m, model, X32.astype(np.float64) if given else None)
        int16_diffs, note = tree_int16_c_column(out_dir, m, model, X32.astype(np.float64), use_c=use_c,
                                                require_c=require_c, compiler=compiler)
        note = f"{note}; {figures}"
    else:
        crun, note = tree_c_predictions(out_dir, m, model, X32, use_c=use_c, require_c=require_c, compiler=compiler)
    report = VerifyReport(X.shape[0], source, c_note=note, files_line=FILES_LINE)
    feats = group_arrays(m, X32.astype(np.float64))
    names = {g["input_name"]: g["name"] for g in m["groups"]}
    with AnytimeSession(out_dir) as sess:
        for k, p in enumerate(m["prefixes"]):
            ref, bound = model.predict(X32.astype(np.float64), stage=k), tree_stage_bound(model, X32, k)
            report.checks.append(prefix_check(k, ", ".join(names[n] for n in p["new_groups"]) or None, p["cum_cost"],
                                              sess.predict(feats, prefix=k), ref, bound, crun))
            if int16_diffs is not None:  # exactness is the bound: any difference fails the stage
                report.checks[-1].c_diff = float(int16_diffs[k])
                report.checks[-1].c_ratio = np.inf if int16_diffs[k] else 0.0
        if "stopping" in m and crun is not None:  # Python vs C stopping stages, on the regenerated C
            from edgeseq.export.verify_stopping import check_stopping
            from edgeseq.export.kinds.trees.c_float import write_c_tree_model

            write = lambda c_dir: write_c_tree_model(model, c_dir, m["c"]["prefix"],  # noqa: E731
                                                     model_name=m["model_name"], c_trees=c_trees_of(m),
                                                     c_link=c_link_of(m))
            with _regenerated_c(out_dir, m, write, "C model") as c_dir:
                check_stopping(report, c_dir, m, sess, X32.astype(np.float64), compiler)
        elif "stopping" in m and int16_diffs is not None:  # the int16 C against the integer simulation
            from edgeseq.export.verify_stopping import check_stopping_i16
            from edgeseq.export.kinds.trees.c_int16 import write_c_int16_tree_model
            from edgeseq.export.kinds.trees.quantize import quantize_trees_from_manifest

            qm = quantize_trees_from_manifest(model, m["c"]["int16"])
            write = lambda c_dir: write_c_int16_tree_model(model, qm, c_dir, m["c"]["prefix"],  # noqa: E731
                                                           model_name=m["model_name"])
            with _regenerated_c(out_dir, m, write, "int16 C model") as c_dir:
                check_stopping_i16(report, c_dir, m, model, qm, X32.astype(np.float64), compiler)
    return report
