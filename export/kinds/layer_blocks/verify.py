"""`edgeseq verify` for layer-block exports (anytime neural networks).

The model is read back from the export's own graphs (`layer_model_from_export`: every weight from the
initializers, every convolution and pooling shape from the nodes' attributes, through
`LayerBlockModel`'s checks), and every stage graph and the C model are regenerated from it and must be
byte-identical to the shipped files, so only edgeseq's own output is ever loaded or compiled. Then, per
stage with the state chained stage to stage: numpy in float64 (`LayerBlockModel.predict`) against
onnxruntime (`AnytimeSession`) and against the regenerated C compiled with the runtime (`es_step`).

Bound: float32 weights and a float32 forward pass of a few small layers stay within a relative error of
about 1e-6 of the exit's magnitude; a runtime passes a stage when its worst difference from numpy is at
most ``REL_TOL`` (1e-5) times the stage's largest reference value (at least 1e-6, so an all-zero exit
does not demand exact zeros), and no row whose two top classes are clearly apart gets another label.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgeseq.errors import InputError, IntegrityError, ModelFormatError
from edgeseq.export.verify_checks import (N_SAMPLES, VerifyReport, _missing_compiler, checked_rows,
                                            prefix_check)
from edgeseq.export.kinds.trees.verify import _regenerated_c
from edgeseq.io.feature_rows import group_arrays
from edgeseq.format import BIAS_NAME, MANIFEST, STATE_IN, labels_of, read_verified
from edgeseq.runtime.session import AnytimeSession

REL_TOL = 1e-5


FILES_LINE = ("generated files ok: every stage graph and the C model are byte-identical to what edgeseq generates "
              "from the weights read back from the export")

def _node(graph, output: str):
    return next((n for n in graph.node if output in n.output), None)


def _ints(node, name: str) -> list:
    return next(list(a.ints) for a in node.attribute if a.name == name)


def layer_model_from_export(out_dir):
    """Rebuild the LayerBlockModel of a verified layer-block export from its graphs (float32 values, upcast).

    Raises
    ------
    IntegrityError
        If a graph cannot be read, lacks a tensor its stage needs, or disagrees with the manifest.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> from edgeseq.export.writer import export_model
    >>> model = _example_model(); out = tempfile.mkdtemp() + "/net"
    >>> _ = export_model(model, out)
    >>> back = layer_model_from_export(out)
    >>> X = np.random.default_rng(0).normal(size=(5, 6))
    >>> back.cum_cost.tolist() == model.cum_cost.tolist(), bool(np.allclose(back.predict(X), model.predict(X), rtol=1e-6))
    (True, True)
    """
    import onnx
    from onnx import numpy_helper

    from edgeseq.forms.layer_blocks import ConvBranch, Injection, LayerBlockModel, LayerBlockStage

    out = Path(out_dir)
    m = read_verified(out)
    if m.get("stage_kind") != "layer_blocks":
        raise IntegrityError(f"{out}: not a layer-block export")
    by_input = {g["input_name"]: g for g in m["groups"]}
    pools = {"MaxPool": "max", "AveragePool": "avg"}
    try:
        stages = []
        for k, p in enumerate(m["prefixes"]):
            graph = onnx.load(str(out / p["file"]), load_external_data=False).graph  # never read other files
            init = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in graph.initializer}
            c = init[BIAS_NAME]
            if k == 0:
                stages.append(LayerBlockStage((), 0.0, None, (), np.zeros(0), np.zeros((0, c.size)), c))
                continue
            injections = []
            for name in p["inputs"]:
                if name == STATE_IN:
                    continue
                g = by_input[name]["index"]
                conv = None
                if f"g{g}/conv_w" in init:
                    node, pool = _node(graph, f"g{g}/conv"), _node(graph, f"g{g}/pool")
                    _, C, L = (int(v) for v in init[f"g{g}/shape"])
                    conv = ConvBranch(C, L, _ints(node, "kernel_shape")[0], _ints(node, "strides")[0],
                                      "none" if pool is None else pools[pool.op_type],
                                      1 if pool is None else _ints(pool, "kernel_shape")[0],
                                      init[f"g{g}/conv_w"], init[f"g{g}/conv_b"])
                injections.append(Injection(g, init[f"g{g}/U"], conv))
            stages.append(LayerBlockStage(tuple(by_input[n]["index"] for n in p["new_groups"]), p["cost"],
                                          init.get("state/W"), tuple(injections), init["block/b"], init["head/V"],
                                          c, bool(p["commit"])))
        by_index = sorted(m["groups"], key=lambda g: g["index"])
        classes = m["outputs"]["classes"]
        model = LayerBlockModel(tuple(g["name"] for g in by_index), tuple(g["columns"] for g in by_index),
                                [g["cost"] for g in by_index], tuple(stages), m["link"], tuple(m["outputs"]["names"]),
                                n_features=m["n_features_in"], classes=None if classes is None else np.array(classes),
                                group_shapes=tuple(tuple(g["shape"]) if "shape" in g else None for g in by_index))
        for k, p in enumerate(m["prefixes"]):
            s = model.stages[k]
            if p["width"] != s.width or p["macs"] != s.macs:
                raise ValueError(f"stage {k}'s graph has width {s.width} and {s.macs} MACs, the manifest says "
                                 f"{p['width']} and {p['macs']}")
        return model
    except (ModelFormatError, InputError, KeyError, IndexError, ValueError, TypeError, StopIteration,
            AttributeError) as exc:
        raise IntegrityError(f"{out}: the stage graphs do not match {MANIFEST} or are not edgeseq layer-block "
                             f"stages ({str(exc)[:300]})") from None


def check_generated_layer_graphs(out_dir, manifest: dict, model) -> None:
    """Regenerate every stage graph from the rebuilt model; IntegrityError unless byte-identical.

    Examples
    --------
    >>> import tempfile
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> from edgeseq.export.writer import export_model
    >>> out = tempfile.mkdtemp() + "/net"
    >>> m = export_model(_example_model(), out)
    >>> check_generated_layer_graphs(out, m, layer_model_from_export(out))   # silent: identical
    """
    from edgeseq.export.kinds.affine.regenerate import require_identical
    from edgeseq.export.kinds.layer_blocks.onnx import build_layer_block_graph

    names = [g["input_name"] for g in sorted(manifest["groups"], key=lambda g: g["index"])]
    for k, p in enumerate(manifest["prefixes"]):
        graph = build_layer_block_graph(model, k, names, model_name=manifest["model_name"],
                                        batch_size=manifest.get("batch_size"), labels=labels_of(manifest))
        require_identical(Path(out_dir) / p["file"], graph.SerializeToString(), "stage graph")


class _StageRun:
    """The C column in the shape `prefix_check` reads: predictions[k] and labels[k] of every stage (a
    ``commit: false`` stage's own exit from its z, since es_current keeps the committed one)."""

    def __init__(self, model, run):
        self.predictions, self.labels = [], []
        self.stop = None  # (stage, label) of the C stopping loop, for an export with stopping
        for k, s in enumerate(model.stages):
            if s.commit:
                self.predictions.append(run.pred[k])
                self.labels.append(run.label[k])
            else:
                proba = model.apply_link(run.z[k])
                self.predictions.append(proba)
                self.labels.append(np.argmax(proba, axis=1) if model.link != "identity" else np.full(len(proba), -1))


def layer_c_predictions(out_dir, manifest: dict, model, X: np.ndarray, *, use_c: bool, require_c: bool,
                        compiler=None):
    """(C run, None) or (None, note): the C column of a layer-block verify.

    The C model is regenerated from `model` and the shipped ``.h``/``.c`` must be byte-identical to it;
    only the regenerated copy is compiled, with `runtime_c/tests/driver_layers.c`.

    Raises
    ------
    IntegrityError
        The shipped C differs from what edgeseq generates.
    CCompilerError
        C is required but no compiler works.

    Examples
    --------
    >>> import numpy as np
    >>> layer_c_predictions(".", {}, None, np.zeros((1, 1)), use_c=False, require_c=False)
    (None, 'C column skipped (--no-c)')
    """
    if not use_c:
        return None, "C column skipped (--no-c)"
    from edgeseq.export.kinds.layer_blocks.c_float import write_c_layer_blocks
    from edgeseq.export.kinds.layer_blocks.c_float import layer_block_feature_order
    from edgeseq.export.kinds.layer_blocks.c_run import build_layer_driver, run_layer_steps

    write = lambda c_dir: write_c_layer_blocks(model, c_dir, manifest["c"]["prefix"],  # noqa: E731
                                               model_name=manifest["model_name"])
    with _regenerated_c(out_dir, manifest, write, "C model") as c_dir:
        missing = _missing_compiler(compiler, require_c)
        if missing:
            return None, missing
        exe = build_layer_driver(c_dir, c_dir, compiler=compiler)
        run = _StageRun(model, run_layer_steps(model, exe, X, c_dir))
        if "stopping" in manifest:  # the es_set_stop loop on the same regenerated model
            from edgeseq.export.stopping import c_stop_stages

            run.stop = c_stop_stages(c_dir, manifest, X, compiler=compiler, order=layer_block_feature_order(model))
        return run, None


def verify_layer_export(out_dir, X: np.ndarray | None = None, *, source: str = "", use_c: bool = True,
                        require_c: bool = False, compiler=None) -> VerifyReport:
    """`verify_export` for a layer-block export (it dispatches here): numpy vs onnxruntime vs C per stage.

    Default rows: seeded standard-normal rows (a network's inputs are standardised in training).

    Examples
    --------
    >>> import tempfile
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> from edgeseq.export.writer import export_model
    >>> out = tempfile.mkdtemp() + "/net"
    >>> _ = export_model(_example_model(), out)
    >>> rep = verify_layer_export(out)
    >>> rep.ok, [c.prefix for c in rep.checks], rep.files_line == FILES_LINE
    (True, [0, 1, 2], True)
    """
    m = read_verified(out_dir)
    model = layer_model_from_export(out_dir)
    check_generated_layer_graphs(out_dir, m, model)  # before anything is loaded
    if X is None:
        X = np.random.default_rng(0).normal(size=(N_SAMPLES, m["n_features_in"]))
        source = f"{N_SAMPLES} standard-normal rows"
    X32 = checked_rows(X, m, source).astype(np.float64)
    crun, note = layer_c_predictions(out_dir, m, model, X32, use_c=use_c, require_c=require_c, compiler=compiler)
    report = VerifyReport(X.shape[0], source, c_note=note, files_line=FILES_LINE)
    feats = group_arrays(m, X32)
    names = {g["input_name"]: g["name"] for g in m["groups"]}
    with AnytimeSession(out_dir) as sess:
        for k, p in enumerate(m["prefixes"]):
            ref = model.predict(X32, stage=k)
            bound = np.full((X32.shape[0], 1), REL_TOL * max(float(np.abs(ref).max(initial=0.0)), 1e-6))
            report.checks.append(prefix_check(k, ", ".join(names[n] for n in p["new_groups"]) or None,
                                              p["cum_cost"], sess.predict(feats, prefix=k), ref, bound, crun))
        if "stopping" in m and crun is not None:  # Python vs C stopping stages, from the regenerated C's run
            from edgeseq.export.verify_stopping import check_stopping

            check_stopping(report, None, m, sess, X32, compiler, c_stages=crun.stop)
    return report
