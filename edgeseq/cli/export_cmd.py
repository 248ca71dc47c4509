"""`edgeseq export` (model file -> out/) and `edgeseq inspect` (out/ -> table or JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from edgeseq.format import labels_of
from edgeseq.io.cost_provenance import cost_summary
from edgeseq.cli._main import main


@main.command("export")
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--c-prefix", help="Prefix of every C symbol (a C identifier); default: from the model name.")
@click.option("--model-name", help="Name stored in the manifest; default: the model file's stem.")
@click.option("--force", is_flag=True, help="Replace OUT_DIR if it is an earlier edgeseq export (never any other non-empty directory).")
@click.option("--batch-size", type=click.IntRange(1, 1 << 16), default=None,
              help="Fix the number of rows of every ONNX graph (mobile execution providers such as NNAPI and "
                   "CoreML need fixed shapes); edgeseq's runtime pads and splits batches to it. Default: dynamic.")
@click.option("--ort", is_flag=True,
              help="Also write every graph in ORT format (.ort, for onnxruntime's minimal and mobile builds) and "
                   "required_operators.config, the operator list of a reduced onnxruntime build.")
@click.option("--labels", type=click.Choice(["graph", "runtime"]), default="graph", show_default=True,
              help="Classifiers: where the label is chosen. 'runtime' leaves the ArgMax out of the graphs "
                   "(NNAPI and CoreML run none) and edgeseq's runtime picks the first most probable class.")
@click.option("--c-dtype", type=click.Choice(["float32", "int16"]), default="float32", show_default=True,
              help="Number type of the generated C model. int16: integer-only C for cores without an FPU "
                   "(Cortex-M0/M0+): linear, GLM and tree-stage models; needs --calibration-data.")
@click.option("--calibration-data", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="--c-dtype int16: rows (CSV with a header, or .npz with X and y) with the model's raw columns; "
                   "the feature ranges and the recorded loss versus float come from them.")
@click.option("--target", help="Target column of a --calibration-data CSV (the loss is then measured on it).")
@click.option("--tree-ops", type=click.Choice(["ai-onnx-ml", "core"]), default="ai-onnx-ml", show_default=True,
              help="Tree-stage models: how the trees are written. 'core' uses core ONNX operators only (a "
                   "comparison, path and leaf matrix), which tract, OpenVINO and onnxruntime's mobile execution "
                   "providers run; 'ai-onnx-ml' is one TreeEnsembleRegressor per stage.")
@click.option("--stop-data", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Classifiers: held-out rows (CSV with a header and --target, or .npz with X and y) with the model's raw columns on "
                   "which per-input stopping thresholds are calibrated (see docs/early-stopping.md).")
@click.option("--c-trees", type=click.Choice(["table", "code", "auto"]), default="table", show_default=True,
              help="Float tree-stage C: 'table' (node tables the runtime walks, es_init), 'code' (each stage a "
                   "generated function, es_init_code: the same bits, faster on Cortex-M, more flash, slower to "
                   "compile) or 'auto' (code for small models, tables beyond; docs/c-runtime.md).")
@click.option("--c-link", type=click.Choice(["commit", "read"]), default="commit", show_default=True,
              help="Float C of sigmoid and softmax models: 'commit' (every stage commits probabilities) or 'read' "
                   "(every stage commits raw scores, es_current applies the link: the same bits, no expf per "
                   "stage, the link paid on each read; docs/c-runtime.md).")
@click.option("--max-disagreement", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=0.005,
              show_default=True, help="With --stop-data: the largest share of new rows whose early answer may "
                                      "differ from the full model's (held with 95 % confidence).")
@click.option("--stop-statistic", type=click.Choice(["auto", "logit_gap", "top2_margin"]), default="auto",
              show_default=True, help="With --stop-data: what the thresholds compare. 'logit_gap': the gap between "
                                      "the two largest raw scores (the float C default); 'top2_margin': between the "
                                      "two largest probabilities (int16 C models compare only this).")
@click.option("--stop-rule", type=click.Choice(["auto", "scaled", "shared", "per-stage"]), default="auto",
              show_default=True, help="With --stop-data: how the thresholds are chosen (see docs/early-stopping.md).")
@click.option("--quiet", is_flag=True, help="Print nothing but errors (no progress on stderr, no summary).")
def export_command(model, out_dir, c_prefix, model_name, force, batch_size, ort, labels, c_dtype, calibration_data,
                   target, tree_ops, stop_data, max_disagreement, stop_statistic, stop_rule, quiet, c_trees,
                   c_link):
    """Write OUT_DIR: one ONNX graph per prefix, edgeseq_model.h/.c and manifest.json.

    The directory appears atomically (written beside it, verified, then renamed). Progress goes to
    stderr, the one-line summary to stdout.
    """
    from edgeseq.export.target import prepare_target

    prepare_target(out_dir, force)  # refuse a bad target in milliseconds, before the model and ONNX load
    if calibration_data is not None and c_dtype != "int16":
        raise click.UsageError("--calibration-data is for --c-dtype int16")
    if not model.is_file():
        from edgeseq.errors import ModelFormatError
        raise ModelFormatError(f"model file {model} does not exist")

    from edgeseq.export.writer import export_model
    from edgeseq.io.model_io import as_exportable, load_model
    from edgeseq.cli.progress import Progress

    progress = Progress(quiet)
    with progress.stage("load model", str(model)):
        loaded = load_model(model)
        seq = as_exportable(loaded)
    calibration = None
    if calibration_data is not None:
        from edgeseq.io.data import in_model_order, read_data
        with progress.stage("read calibration data", str(calibration_data)):
            task = getattr(seq, "task", None) or ("regression" if seq.link == "identity" else "classification")
            ds = read_data(calibration_data, target, task)
            calibration = (in_model_order(ds, seq.feature_names, calibration_data), ds.y)
    stop_rows = None
    if stop_data is not None:
        from edgeseq.io.data import in_model_order, read_data
        with progress.stage("read stop data", str(stop_data)):
            ds = read_data(stop_data, target, "classification")
            stop_rows = in_model_order(ds, seq.feature_names, stop_data)
    what = (f"{len(seq.stages)} tree-stage graphs and manifest" if hasattr(seq, "stages")
            else f"{seq.n_prefixes} prefix graphs, {'int16 ' if c_dtype == 'int16' else ''}C model and manifest")
    with progress.stage("export", f"{what} to {out_dir}"):
        m = export_model(loaded if hasattr(seq, "stages") else seq, out_dir, c_prefix=c_prefix, force=force, model_name=model_name or model.stem,
                         batch_size=batch_size, ort=ort, labels=labels, c_dtype=c_dtype, calibration=calibration,
                         tree_ops=tree_ops, stop_data=stop_rows, max_disagreement=max_disagreement,
                         stop_rule=stop_rule, stop_statistic=stop_statistic, c_trees=c_trees,
                         c_link=c_link)
    if quiet:
        return
    size = sum(p.stat().st_size for p in Path(out_dir).iterdir())
    worst = max(p["float32_max_abs_diff"] for p in m["prefixes"])
    c_note = f"C prefix {m['c']['prefix']!r}" if m["c"] else "no C model"
    if m["c"] and m["c"].get("dtype") == "int16":
        worst_loss = max((p.get("accuracy_loss_pp", p.get("explained_variance_loss", 0.0))
                          for p in m["c"]["int16"]["prefixes"]), default=0.0)
        c_note += f" (int16; worst loss versus float {worst_loss:.3g}, see edgeseq inspect)"
    if "stopping" in m:
        st = m["stopping"]
        c_note += (f"; stopping at max disagreement {st['max_disagreement']:g}: mean cost "
                   f"{st['mean_cost']:.4g} of {st['full_cost']:.4g} on {st['n_calibration']} calibration rows")
    from edgeseq.export.kinds import kind_of_manifest

    click.echo(f"wrote {out_dir}: {len(m['prefixes'])} {kind_of_manifest(m).noun} graphs, {c_note}, "
               f"{size} bytes; worst float32-vs-float64 prediction difference {worst:.3g}")


def manifest_table(m: dict) -> list[str]:
    """The manifest as readable lines: header facts, then one row per prefix."""
    outs = m["outputs"]
    lines = [f"model {m['model_name']!r}: {m['task']}, link {m['link']}, {m['n_features_in']} features, "
             f"outputs {outs['names']}" + (f", classes {outs['classes']}" if outs["classes"] else ""),
             f"onnx opset {m['onnx']['opset']}, IR {m['onnx']['ir_version']}, dtype {m['dtype']}; "
             + (f"C prefix {m['c']['prefix']!r} ({m['c']['header']}, {m['c']['source']})" if m["c"] else "no C model"),
             f"batch size {m.get('batch_size') or 'dynamic'}; ORT-format files "
             + (f"yes (operators: {m['ort']['operators_config']})" if m.get("ort") else "no")
             + ("" if m["task"] == "regression" else f"; labels chosen by the {labels_of(m)}"),
             cost_summary(m["provenance"]),
             f"provenance: {json.dumps(m['provenance'], sort_keys=True)}"]
    if m["doubling_violations"]:
        lines.append(f"doubling violations at steps {m['doubling_violations']}")
    if (m["c"] or {}).get("dtype") == "int16":
        lines += _int16_rows(m["c"]["int16"])
    if "stopping" in m:
        st = m["stopping"]
        stat = st.get("statistic", "top2_margin")
        never = 3e38 if stat == "logit_gap" else 1.5
        lines.append(f"early stopping ({st.get('rule', 'shared')} rule on the {stat}): δ {st['max_disagreement']:g} at "
                     f"{st['confidence']:g} confidence from {st['n_calibration']} rows"
                     + (f" ({st['n_test']} of them scanned)" if "n_test" in st else "")
                     + f"; thresholds {[round(t, 6) if t < never else 'never' for t in st['thresholds']]}; "
                     f"calibration mean cost {st['mean_cost']:.4g} of {st['full_cost']:.4g}")
    from edgeseq.export.kinds import kind_of_manifest

    return lines + kind_of_manifest(m).manifest_rows(m)


def _int16_rows(q: dict) -> list[str]:
    """The int16 C model: where its scales came from, then per prefix weight shift, headroom and loss."""
    shifts = sorted({f["shift"] for f in q["features"]})
    lines = [f"int16 C model: features quantised with shifts {shifts[0] if shifts else '-'}..{shifts[-1] if shifts else '-'} "
             f"from {q['calibration_rows']} rows of {q['feature_source']}; {q['accumulator']} accumulation "
             f"(headroom proven per prefix); loss measured against {q['loss_reference']}"]
    if "state" in q:  # tree stages: int32 state per dimension, its leaf scale, proved bound, readout shift
        lines.append("tree state: " + "; ".join(f"dim {d} leaves at 2^{s['leaf_shift']}, |s| <= {s['bound']}, "
                                                f"readout >> {s['shift']}" for d, s in enumerate(q["state"][:8]))
                     + (f"; ... ({len(q['state'])} dims)" if len(q["state"]) > 8 else ""))
    head = f"{'prefix':>6} {'w shift':>7} {'headroom':>10} {'reduced':>7}  loss vs float"
    lines += [head, "-" * len(head)]
    for p in q["prefixes"]:
        if "accuracy_loss_pp" in p:
            loss = f"accuracy {p['accuracy_loss_pp']:+.2f} pp, labels agree {100 * p['label_agreement']:.1f} %"
        else:
            loss = f"explained variance {p['explained_variance_loss']:+.2e}, max |error| {p['max_abs_error']:.3g}"
        lines.append(f"{p['index']:>6} {p['weight_shift']:>7} {p['headroom']:>10} {p['reduced_bits']:>7}  {loss}")
    return lines


@main.command("inspect")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the verified manifest as JSON.")
def inspect_command(out_dir, as_json):
    """Verify OUT_DIR (schema, checksums, no extra files) and print its manifest."""
    from edgeseq.format import read_verified

    m = read_verified(out_dir)
    if as_json:
        click.echo(json.dumps(m, indent=2, sort_keys=True, ensure_ascii=False))
        return
    for line in manifest_table(m):
        click.echo(line)
