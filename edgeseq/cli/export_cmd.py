"""`edgeseq export` (model file -> out/) and `edgeseq inspect` (out/ -> table or JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import click

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
@click.option("--quiet", is_flag=True, help="Print nothing but errors (no progress on stderr, no summary).")
def export_command(model, out_dir, c_prefix, model_name, force, batch_size, ort, quiet):
    """Write OUT_DIR: one ONNX graph per prefix, edgeseq_model.h/.c and manifest.json.

    The directory appears atomically (written beside it, verified, then renamed). Progress goes to
    stderr, the one-line summary to stdout.
    """
    from edgeseq.export.writer import export_model
    from edgeseq.io.model_io import as_sequence, load_model
    from edgeseq.cli.progress import Progress

    progress = Progress(quiet)
    with progress.stage("load model", str(model)):
        seq = as_sequence(load_model(model))
    with progress.stage("export", f"{seq.n_prefixes} prefix graphs, C model and manifest to {out_dir}"):
        m = export_model(seq, out_dir, c_prefix=c_prefix, force=force, model_name=model_name or model.stem,
                         batch_size=batch_size, ort=ort)
    if quiet:
        return
    size = sum(p.stat().st_size for p in Path(out_dir).iterdir())
    worst = max(p["float32_max_abs_diff"] for p in m["prefixes"])
    click.echo(f"wrote {out_dir}: {len(m['prefixes'])} prefix graphs, C prefix {m['c']['prefix']!r}, "
               f"{size} bytes; worst float32-vs-float64 prediction difference {worst:.3g}")


def manifest_table(m: dict) -> list[str]:
    """The manifest as readable lines: header facts, then one row per prefix."""
    outs = m["outputs"]
    lines = [f"model {m['model_name']!r}: {m['task']}, link {m['link']}, {m['n_features_in']} features, "
             f"outputs {outs['names']}" + (f", classes {outs['classes']}" if outs["classes"] else ""),
             f"onnx opset {m['onnx']['opset']}, IR {m['onnx']['ir_version']}, dtype {m['dtype']}; "
             f"C prefix {m['c']['prefix']!r} ({m['c']['header']}, {m['c']['source']})",
             f"batch size {m.get('batch_size') or 'dynamic'}; ORT-format files "
             + (f"yes (operators: {m['ort']['operators_config']})" if m.get("ort") else "no"),
             cost_summary(m["provenance"]),
             f"provenance: {json.dumps(m['provenance'], sort_keys=True)}"]
    if m["doubling_violations"]:
        lines.append(f"doubling violations at steps {m['doubling_violations']}")
    head = f"{'step':>4}  {'group':<20} {'input':<20} {'dim':>4} {'cost':>9} {'cum_cost':>9} " \
           f"{'f32 diff':>9}  {'file':<16} train"
    lines += [head, "-" * len(head)]
    for p in m["prefixes"]:
        j = p["index"]
        g = m["groups"][j - 1] if j else None
        train = p["metrics"]["train"]
        tm = "" if not train else ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                            for k, v in sorted(train.items()))
        lines.append(f"{j:>4}  {(g['name'] if g else '-')[:20]!s:<20} {(g['input_name'] if g else 'n')[:20]:<20} "
                     f"{(g['dim'] if g else 0):>4} {(g['cost'] if g else 0):>9.4g} {p['cum_cost']:>9.4g} "
                     f"{p['float32_max_abs_diff']:>9.2g}  {p['file']:<16} {tm}")
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
