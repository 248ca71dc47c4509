"""`edgeseq calibrate`: measure each feature group's extraction time and write GROUPS.json.

Users get costs measured on their own machine instead of guesses. The bank protocol (a mapping
name -> callable, a list of (name, callable) pairs, or a factory returning one; each callable maps
ONE input item to a fixed-length 1-D float array) is documented in `edgeseq.extractors.calibrate`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import click
import numpy as np

from ..errors import InputError
from ._main import main

BUILTIN_BANKS = ("digits",)


def load_bank_spec(spec: str):
    """Resolve ``MODULE:ATTR`` (a dotted module or a path to a .py file) to the bank object."""
    if ":" not in spec:
        raise InputError(f"bank {spec!r} must look like MODULE:BANK (e.g. mypkg.features:BANK "
                         f"or path/to/features.py:BANK)")
    mod_name, attr = spec.rsplit(":", 1)
    if mod_name.endswith(".py") or "/" in mod_name:
        path = Path(mod_name)
        if not path.is_file():
            raise InputError(f"bank module file {path} does not exist")
        mspec = importlib.util.spec_from_file_location(f"_edgeseq_bank_{path.stem}", path)
        module = importlib.util.module_from_spec(mspec)
        sys.modules[mspec.name] = module
        mspec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(mod_name)
        except ImportError as exc:
            raise InputError(f"cannot import bank module {mod_name!r}: {exc}") from exc
    if not hasattr(module, attr):
        raise InputError(f"module {mod_name!r} has no attribute {attr!r}")
    return getattr(module, attr)


def load_samples(path: Path) -> list:
    """Sample inputs from .npy (items along axis 0), .npz (its only array) or .csv (one item a row)."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                if len(z.files) != 1:
                    raise InputError(f"{path} holds arrays {z.files}; give an .npz with exactly one array")
                arr = z[z.files[0]]
        elif suffix == ".csv":
            arr = np.loadtxt(path, delimiter=",", ndmin=2)
        else:
            raise InputError(f"sample file {path} must be .npy, .npz or .csv")
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read samples from {path}: {exc}") from exc
    if arr.ndim < 1 or arr.shape[0] == 0:
        raise InputError(f"{path} holds no samples")
    return list(arr)


@main.command("calibrate")
@click.argument("bank_spec", metavar="MODULE:BANK", required=False)
@click.argument("samples", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@click.option("--bank", "builtin", type=click.Choice(BUILTIN_BANKS),
              help="Use a built-in bank (its bundled data are the samples unless SAMPLES is given).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="GROUPS.json to write (groups, columns, measured costs, machine).")
@click.option("--repeats", default=5, show_default=True, help="Timed passes; the median is kept.")
@click.option("--warmup", default=1, show_default=True, help="Untimed passes first.")
@click.option("--max-samples", default=200, show_default=True, help="Time on at most this many items.")
@click.option("--features-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the features of all SAMPLES (.npy or .csv), columns as in GROUPS.json.")
@click.option("--quiet", is_flag=True, help="No progress output.")
def calibrate_command(bank_spec, samples, builtin, output, repeats, warmup, max_samples, features_out, quiet):
    """Time every extractor of a bank single-threaded and write GROUPS.json.

    \b
    edgeseq calibrate mypkg.features:BANK samples.npy -o groups.json
    edgeseq calibrate --bank digits -o groups.json
    """
    from ..extractors.calibrate import calibrate_bank, extract, write_groups_json

    if (bank_spec is None) == (builtin is None):
        raise InputError("give either MODULE:BANK SAMPLES or --bank NAME (not both)")
    if builtin == "digits":
        from ..extractors import digits

        bank = digits.bank()
        items = load_samples(samples) if samples else list(digits.load_images()[0])
    else:
        if samples is None:
            raise InputError("SAMPLES is required with MODULE:BANK (a .npy/.npz/.csv of inputs)")
        bank, items = load_bank_spec(bank_spec), load_samples(samples)
    if max_samples < 1:
        raise InputError("--max-samples must be >= 1")
    say = None if quiet else (lambda m: click.echo(m, err=True))
    doc = calibrate_bank(bank, items[:max_samples], repeats=repeats, warmup=warmup, progress=say)
    write_groups_json(doc, output)
    if features_out:
        X, _ = extract(bank, items)
        if features_out.suffix.lower() == ".csv":
            np.savetxt(features_out, X, delimiter=",", fmt="%.17g")
        else:
            np.save(features_out, X)
    if not quiet:
        click.echo(f"wrote {output}: {len(doc['groups'])} groups, measured on "
                   f"{doc['measured_on']['cpu']} ({doc['cost_unit']})", err=True)
