"""manifest.json: build, canonicalise, checksum, validate, and read back with every check.

The manifest is the only file a runtime must parse. It lists every other file of the export with
its sha256 and carries `manifest_sha256`, the sha256 of the canonical JSON (sorted keys, no
whitespace, UTF-8) of everything else; the file itself must be byte-identical to `dump_manifest`
of its content. Together a change of any single byte anywhere in out/ is detected. This protects
against corruption and careless edits; it is NOT a signature (anyone can recompute the sums).
"""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources
from pathlib import Path

import jsonschema
import numpy as np

from edgeseq.errors import InputError, IntegrityError
from edgeseq.sequence import FittedSequence

from .onnx_graphs import read_prefix_weights

MANIFEST = "manifest.json"
FORMAT = "edgeseq-export"
FORMAT_VERSION = 1


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def canonical_json(obj) -> bytes:
    """Sorted keys, no whitespace, UTF-8, finite numbers only: the bytes the checksum covers."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def manifest_checksum(manifest: dict) -> str:
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return hashlib.sha256(canonical_json(body)).hexdigest()


def dump_manifest(manifest: dict) -> bytes:
    """The exact bytes of manifest.json (readers re-serialise and compare, so no byte is free)."""
    return (json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False)
            + "\n").encode("ascii")


def load_schema() -> dict:
    text = resources.files("edgeseq.export").joinpath("schema/manifest.schema.json").read_text("utf-8")
    return json.loads(text)


@functools.lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    """The schema is checked once per process; validation itself is then cheap."""
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate_manifest(manifest: dict) -> None:
    """JSON-Schema validation plus the cross-field rules a schema cannot express."""
    validator = _validator()
    if not validator.is_valid(manifest):
        exc = jsonschema.exceptions.best_match(validator.iter_errors(manifest))
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise IntegrityError(f"{MANIFEST} does not match the schema at {where}: {exc.message}")
    groups, prefixes = manifest["groups"], manifest["prefixes"]
    if len(prefixes) != len(groups) + 1:
        raise IntegrityError(f"{MANIFEST}: {len(groups)} groups need {len(groups) + 1} prefixes, "
                             f"found {len(prefixes)}")
    if sorted(g["index"] for g in groups) != list(range(len(groups))):
        raise IntegrityError(f"{MANIFEST}: group indices must be a permutation of 0..{len(groups) - 1}")
    for j, p in enumerate(prefixes):
        want = [g["input_name"] for g in groups[:j]] or ["n"]
        if p["index"] != j or p["inputs"] != want:
            raise IntegrityError(f"{MANIFEST}: prefix entry {j} has index {p['index']} and inputs "
                                 f"{p['inputs']}, expected index {j} and inputs {want}")
    for g in groups:
        if g["dim"] != len(g["columns"]) or max(g["columns"]) >= manifest["n_features_in"]:
            raise IntegrityError(f"{MANIFEST}: group {g['name']!r} has inconsistent dim/columns")
    names = [f["file"] for f in listed_files(manifest)]
    if len(set(names)) != len(names):
        raise IntegrityError(f"{MANIFEST}: a file is listed twice")


def listed_files(manifest: dict) -> list[dict]:
    """Every (file, sha256) entry the manifest vouches for: the prefix graphs and the other files."""
    return ([{"file": p["file"], "sha256": p["sha256"]} for p in manifest["prefixes"]]
            + list(manifest["files"]))


def read_verified(out_dir) -> dict:
    """Load manifest.json and check everything before anyone trusts the directory.

    Checks: valid JSON in canonical layout, schema, the manifest's own checksum, every listed file
    present with the right sha256, and no unlisted file or directory. Raises IntegrityError naming
    the file and the problem.
    """
    out = Path(out_dir)
    mpath = out / MANIFEST
    if not out.is_dir():
        raise IntegrityError(f"{out} is not a directory (expected an edgeseq export directory)")
    if not mpath.is_file():
        raise IntegrityError(f"{mpath} is missing: not an edgeseq export directory")
    raw = mpath.read_bytes()
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IntegrityError(f"{mpath} is not valid JSON ({exc}); re-export the model") from None
    if not isinstance(manifest, dict):
        raise IntegrityError(f"{mpath} must hold a JSON object")
    validate_manifest(manifest)
    if manifest_checksum(manifest) != manifest["manifest_sha256"]:
        raise IntegrityError(f"{mpath}: manifest_sha256 does not match its content (edited or corrupted)")
    if dump_manifest(manifest) != raw:
        raise IntegrityError(f"{mpath} is not byte-identical to its canonical form (edited or corrupted)")
    for entry in listed_files(manifest):
        path = out / entry["file"]
        if not path.is_file():
            raise IntegrityError(f"{path} is listed in {MANIFEST} but missing")
        if sha256_file(path) != entry["sha256"]:
            raise IntegrityError(f"{path}: sha256 does not match {MANIFEST} (modified or corrupted)")
    expected = {MANIFEST} | {e["file"] for e in listed_files(manifest)}
    extra = sorted(p.name for p in out.iterdir() if p.name not in expected)
    if extra:
        raise IntegrityError(f"{out} holds files not listed in {MANIFEST}: {', '.join(extra)}")
    return manifest


def sequence_from_export(out_dir) -> FittedSequence:
    """Rebuild the FittedSequence of a verified export (weights are the float32 values, upcast)."""
    import onnx

    out = Path(out_dir)
    m = read_verified(out)
    groups = m["groups"]
    coefs, intercepts = [], []
    for p in m["prefixes"]:
        try:
            model = onnx.load(str(out / p["file"]))
            coef, b = read_prefix_weights(model, p["inputs"])
        except Exception as exc:  # a graph that passed its sha256 but was written by something else
            raise IntegrityError(f"{out / p['file']}: cannot read prefix weights ({exc})") from None
        coefs.append(coef)
        intercepts.append(b)
    try:
        return _rebuild(m, groups, coefs, intercepts)
    except InputError as exc:  # consistent checksums but graphs that disagree with the manifest
        raise IntegrityError(f"{out}: prefix graphs do not match {MANIFEST} ({exc})") from None


def _rebuild(m: dict, groups: list, coefs: list, intercepts: list) -> FittedSequence:
    by_index = sorted(groups, key=lambda g: g["index"])
    outs = m["outputs"]
    classes = None if outs["classes"] is None else np.array(outs["classes"])
    train = [p["metrics"]["train"] for p in m["prefixes"]]
    stats = {k: None if m[k] is None else np.array(m[k], dtype=np.float64)
             for k in ("feature_mean", "feature_std")}
    return FittedSequence(
        task=m["task"], link=m["link"], n_features_in=m["n_features_in"],
        group_names=tuple(g["name"] for g in by_index),
        group_columns=tuple(np.array(g["columns"], dtype=np.int64) for g in by_index),
        costs=np.array([g["cost"] for g in by_index], dtype=np.float64),
        order=np.array([g["index"] for g in groups], dtype=np.int64),
        coefs=tuple(coefs), intercepts=np.vstack(intercepts),
        output_names=tuple(outs["names"]), classes=classes,
        feature_names=None if m["feature_names"] is None else tuple(m["feature_names"]),
        train_metrics=[] if all(t is None for t in train) else [t or {} for t in train],
        doubling_violations=tuple(m["doubling_violations"]), provenance=dict(m["provenance"]),
        y_was_1d=outs["y_was_1d"], **stats)
