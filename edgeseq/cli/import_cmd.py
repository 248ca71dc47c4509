"""`edgeseq import-lightgbm`: a LightGBM model file and GROUPS.json -> an edgeseq tree-stage model file."""

from __future__ import annotations

from pathlib import Path

import click

from edgeseq.cli._main import main


@main.command("import-lightgbm")
@click.argument("model_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--groups", "groups_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="GROUPS.json over the booster's columns: names (checked against the booster's feature names) "
                   "or 0-based indices.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="edgeseq model file to write (then: edgeseq export MODEL.pkl OUT_DIR).")
@click.option("--quiet", is_flag=True, help="Print nothing but errors.")
def import_lightgbm_command(model_file, groups_path, output, quiet):
    """Turn a trained LightGBM model into tree stages: a stage closes whenever a tree first splits on
    a group no earlier tree used; the last stage reproduces LightGBM's predictions.

    MODEL_FILE is the text of ``Booster.save_model`` or the JSON of ``Booster.dump_model()``; both
    are read by edgeseq itself (LightGBM need not be installed). The booster's feature names travel into the model and its export, so
    ``edgeseq run`` matches data columns by name.

    \b
    edgeseq import-lightgbm lgbm.txt --groups groups.json -o model.pkl
    edgeseq export model.pkl out/
    """
    import numpy as np

    from edgeseq.cli.train_cmd import tree_stage_table
    from edgeseq.io.data import Dataset, read_groups
    from edgeseq.io.model_io import read_lightgbm_file, save_model
    from edgeseq.train.trees.lightgbm_import import (booster_feature_names, from_lightgbm_dump, from_lightgbm_text,
                                               text_header)

    content = read_lightgbm_file(model_file)  # a dump_model() dict, or save_model() text
    head = text_header(content) if isinstance(content, str) else content
    n_features = head.get("max_feature_idx", -1) + 1 if isinstance(head.get("max_feature_idx"), int) else 0
    names = booster_feature_names(head, n_features) if n_features > 0 else None
    columns = Dataset(np.empty((0, max(n_features, 0))), np.empty(0), names, None, None)
    spec = read_groups(groups_path, columns)
    read = from_lightgbm_text if isinstance(content, str) else from_lightgbm_dump
    model = read(content, spec.columns, spec.costs, spec.names)
    save_model(model, output)
    if not quiet:
        for line in tree_stage_table(model):
            click.echo(line)
        click.echo(f"feature names: {'from the booster' if model.feature_names else 'none (columns matched by position)'}")
        click.echo(f"wrote {output}")
