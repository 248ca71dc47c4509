"""`edgeseq calibrate`: measure each feature group's extraction time and write GROUPS.json.

Users get costs measured on their own machine instead of guesses. The bank protocol (a mapping
name -> callable, a list of (name, callable) pairs, or a factory returning one; each callable maps
ONE input item to a fixed-length 1-D float array) is documented in `edgeseq.extractors.calibrate`.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import os
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path

import click

from edgeseq.errors import InputError
from edgeseq.cli._main import main
from edgeseq.io.atomic import atomic_output

BUILTIN_BANKS = ("digits",)


def bank_search_dir(spec: str) -> Path:
    """The directory a bank spec's imports resolve against: the file's own directory for
    ``path/to/file.py:BANK`` (so it can import a sibling helper), else the current directory (so
    ``mypkg.features:BANK`` works from a project checkout without installing mypkg, as ``python -m``)."""
    mod_name = spec.rsplit(":", 1)[0]
    if _is_file_spec(mod_name):
        return Path(mod_name).resolve().parent
    return Path.cwd()


@contextmanager
def on_sys_path(directory: Path):
    """Put `directory` first on sys.path while the bank is imported and run, then restore sys.path."""
    entry = str(directory)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        if entry in sys.path:  # the bank may have edited sys.path itself
            sys.path.remove(entry)


def _is_file_spec(mod_name: str) -> bool:
    return mod_name.endswith(".py") or "/" in mod_name or os.sep in mod_name or Path(mod_name).is_file()


def load_bank_spec(spec: str):
    """Resolve ``MODULE:ATTR`` (a dotted module or a path to a .py file) to the bank object.

    Any failure of the user's module (missing, syntax error, raising at import) is an InputError
    naming it; call inside :func:`on_sys_path` (``bank_search_dir(spec)``) for its own imports.
    """
    if ":" not in spec:
        raise InputError(f"bank {spec!r} must look like MODULE:BANK (e.g. mypkg.features:BANK "
                         f"or path/to/features.py:BANK)")
    mod_name, attr = spec.rsplit(":", 1)
    if _is_file_spec(mod_name):
        module = _import_file(Path(mod_name))
    else:
        try:
            module = importlib.import_module(mod_name)
        except Exception as exc:  # ImportError, SyntaxError, or whatever the module raises
            raise InputError(f"cannot import bank module {mod_name!r}: {type(exc).__name__}: {exc}") from exc
    if not hasattr(module, attr):
        raise InputError(f"module {mod_name!r} has no attribute {attr!r}")
    return getattr(module, attr)


def _import_file(path: Path):
    if path.suffix != ".py":
        raise InputError(f"bank module file {path} must be a Python source file ending in .py")
    if not path.is_file():
        raise InputError(f"bank module file {path} does not exist")
    mspec = importlib.util.spec_from_file_location(f"_edgeseq_bank_{path.stem}", path)
    if mspec is None or mspec.loader is None:
        raise InputError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(mspec)
    sys.modules[mspec.name] = module
    try:
        mspec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[mspec.name]
        raise InputError(f"cannot import bank module file {path}: {type(exc).__name__}: {exc}") from exc
    return module


def load_samples(path: Path) -> list:
    """Sample inputs from .npy (items along axis 0), .npz (its only array) or .csv (one item a row)."""
    import numpy as np  # here, not at import: `edgeseq --help` stays fast

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


def resolve_inputs(bank_spec, samples, builtin):
    """Sort the positionals out: with --bank, a single positional is SAMPLES, not MODULE:BANK."""
    if builtin is not None and bank_spec is not None:
        if samples is not None or (":" in bank_spec and not Path(bank_spec).is_file()):
            raise InputError("give either MODULE:BANK SAMPLES or --bank NAME [SAMPLES] (not both)")
        bank_spec, samples = None, bank_spec
    if bank_spec is None and builtin is None:
        raise InputError("give either MODULE:BANK SAMPLES or --bank NAME [SAMPLES]")
    if bank_spec is not None and samples is None:
        raise InputError("SAMPLES is required with MODULE:BANK (a .npy/.npz/.csv of inputs)")
    if samples is not None and not Path(samples).is_file():
        raise InputError(f"sample file {samples} does not exist")
    return bank_spec, None if samples is None else Path(samples)


def write_features(X, header: list[str], f, csv_format: bool) -> None:
    """The features as .npy, or as .csv with a header row of `header` (what `edgeseq train` reads),
    into the open (temporary) file `f`."""
    import numpy as np  # here, not at import: `edgeseq --help` stays fast

    if csv_format:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows([repr(v) for v in row] for row in X.tolist())  # shortest round-trip
    else:
        np.save(f, X)


@main.command("calibrate")
@click.argument("bank_spec", metavar="[MODULE:BANK]", required=False)
@click.argument("samples", metavar="[SAMPLES]", required=False)
@click.option("--bank", "builtin", type=click.Choice(BUILTIN_BANKS),
              help="Use a built-in bank (its bundled data are the samples unless SAMPLES is given).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="GROUPS.json to write (groups, columns, measured costs, machine).")
@click.option("--repeats", default=5, show_default=True, help="Timed passes; the median is kept.")
@click.option("--warmup", default=1, show_default=True, help="Untimed passes first.")
@click.option("--max-samples", default=200, show_default=True, help="Time on at most this many items.")
@click.option("--features-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the features of all SAMPLES: .npy, or .csv with a header row "
                   "<group>_<k> (columns as in GROUPS.json).")
@click.option("--from-device", "device_log", type=click.Path(dir_okay=False, path_type=Path),
              help="Instead of timing here: read the EDGESEQ_COSTS line a board printed "
                   "(runtime_c/edgeseq_costs.h) and write --groups with the board's costs.")
@click.option("--groups", "groups_in", type=click.Path(dir_okay=False, path_type=Path),
              help="With --from-device: the GROUPS.json whose costs the device measured.")
@click.option("--quiet", is_flag=True, help="No progress output.")
def calibrate_command(bank_spec, samples, builtin, output, repeats, warmup, max_samples, features_out, device_log,
                      groups_in, quiet):
    """Time every extractor of a bank single-threaded and write GROUPS.json.

    \b
    edgeseq calibrate mypkg.features:BANK samples.npy -o groups.json
    edgeseq calibrate path/to/features.py:BANK samples.npy -o groups.json
    edgeseq calibrate --bank digits -o groups.json
    edgeseq calibrate --bank digits my_images.npy -o groups.json
    edgeseq calibrate --from-device board.log --groups groups.json -o groups.board.json

    A dotted MODULE is imported with the current directory first on sys.path, a .py file with its
    own directory first (so it can import sibling modules). With --from-device nothing is timed
    here: the costs are those the board measured, and measured_on names the board.
    """
    if device_log is not None or groups_in is not None:
        if device_log is None or groups_in is None:
            raise InputError("--from-device and --groups go together: the board's log and the GROUPS.json it measured")
        if bank_spec or samples or builtin or features_out:
            raise InputError("--from-device takes no bank, samples or --features-out: the board did the timing")
        _from_device(device_log, groups_in, output, quiet)
        return
    bank_spec, samples = resolve_inputs(bank_spec, samples, builtin)
    if max_samples < 1:
        raise InputError("--max-samples must be >= 1")
    if features_out is not None:
        if features_out.suffix.lower() not in (".npy", ".csv"):
            raise InputError(f"--features-out {features_out} must end in .npy or .csv")
        if features_out.resolve() == output.resolve():
            raise InputError("--features-out and -o must be different files")
    with on_sys_path(bank_search_dir(bank_spec)) if bank_spec else nullcontext():
        _calibrate(bank_spec, samples, builtin, output, repeats, warmup, max_samples, features_out, quiet)


def _calibrate(bank_spec, samples, builtin, output, repeats, warmup, max_samples, features_out, quiet):
    """Measure, extract (if asked) and only then write: a failure leaves no half-written result."""
    from edgeseq.extractors.calibrate import calibrate_bank, column_names, extract, write_groups_json

    if builtin == "digits":
        from edgeseq.extractors import digits

        bank = digits.bank()
        items = load_samples(samples) if samples else list(digits.load_images()[0])
    else:
        bank, items = load_bank_spec(bank_spec), load_samples(samples)
    say = None if quiet else (lambda m: click.echo(m, err=True))
    doc = calibrate_bank(bank, items[:max_samples], repeats=repeats, warmup=warmup, progress=say)
    if not features_out:
        write_groups_json(doc, output)
    else:
        X, _ = extract(bank, items)  # refuses a width that varies on the untimed items too
        as_csv = features_out.suffix.lower() == ".csv"
        # the features stay in a temporary file until GROUPS.json is written: if that fails, the
        # temporary goes and an existing features file is untouched
        with atomic_output(features_out, "w" if as_csv else "wb", make_parents=True,
                           **({"newline": "", "encoding": "utf-8"} if as_csv else {})) as f:
            write_features(X, column_names(doc), f, as_csv)
            write_groups_json(doc, output)
    if not quiet:
        click.echo(f"wrote {output}: {len(doc['groups'])} groups, measured on "
                   f"{doc['measured_on']['cpu']} ({doc['cost_unit']})", err=True)


def _from_device(device_log: Path, groups_in: Path, output: Path, quiet: bool) -> None:
    """GROUPS.json with the costs a board measured; the input file is never modified."""
    from edgeseq.extractors.calibrate import write_groups_json
    from edgeseq.io.cost_provenance import read_cost_provenance
    from edgeseq.io.data import read_groups_doc
    from edgeseq.io.device_costs import apply_device_costs, read_device_log

    device = read_device_log(device_log)
    doc = read_groups_doc(groups_in)
    new = apply_device_costs(doc, device)
    read_cost_provenance(new, output)  # what `edgeseq train` will check
    write_groups_json(new, output)
    if not quiet:
        click.echo(f"wrote {output}: {len(new['groups'])} groups, costs measured on {device.machine} "
                   f"({device.unit})", err=True)
