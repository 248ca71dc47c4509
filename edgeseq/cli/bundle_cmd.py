"""`edgeseq bundle` (export directory -> drop-in firmware library folder)."""

from __future__ import annotations

from pathlib import Path

import click

from edgeseq.cli._main import main


@main.command("bundle")
@click.argument("export_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace OUT_DIR if it is an earlier edgeseq bundle (never any other non-empty directory).")
@click.option("--no-measure", is_flag=True, help="Do not measure flash with arm-none-eabi-gcc/-size (the model card then says 'not measured').")
def bundle_command(export_dir, out_dir, force, no_measure):
    """Write OUT_DIR: a firmware library of the export in EXPORT_DIR (runtime + model in src/,
    CMakeLists.txt, PlatformIO library.json, Arduino library.properties, Zephyr module, example, model card).

    EXPORT_DIR is verified first (checksums, no extra files); only its C model is copied. OUT_DIR
    appears atomically.
    """
    from edgeseq.export.firmware_bundle import write_firmware_bundle

    index = write_firmware_bundle(export_dir, out_dir, force=force, measure=not no_measure)
    flash = ("flash not measured" if index["sizes"] is None
             else f"{index['sizes']['flash_bytes']} bytes of flash and {index['sizes']['state_ram_bytes']} bytes of "
                  "state RAM (Cortex-M4F, -Os)")
    click.echo(f"wrote {out_dir}: {index['dtype']} library '{index['library']}', {len(index['files'])} files, {flash}")
