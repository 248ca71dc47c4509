"""The export format contract: file names, manifest.json canonical form, checksums and every check.

Both sides of the format use this module: the exporters write manifests with `dump_manifest` and
`manifest_checksum`, and the runtimes read them back with `read_verified`. It depends only on the
standard library, numpy-free JSON and (lazily) jsonschema, so a device runtime can import it
without the training or export code.

The manifest is the only file a runtime must parse. It lists every other file of the export with
its sha256 and carries `manifest_sha256`, the sha256 of the canonical JSON (sorted keys, no
whitespace, UTF-8) of everything else; the file itself must be byte-identical to `dump_manifest`
of its content. Together a change of any single byte anywhere in out/ is detected. This protects
against corruption and careless edits; it is NOT a signature (anyone can recompute the sums).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from edgeseq.errors import IntegrityError
from edgeseq.messages import brief, clip

MANIFEST = "manifest.json"
FORMAT = "edgeseq-export"
FORMAT_VERSION = 2  # 2: prefix 0's input `n` is [N, 1] (was [N, 0]); format 1 exports still load
METHODS = ("omp", "fr", "single", "gomp")  # selection methods a model may record in its provenance
PREFIX0_INPUT = "n"  # prefix 0 reads no group: its only input carries the number of rows
PREFIX0_WIDTH = 1  # columns of `n` in format 2 exports (format 1: 0, a zero-size tensor OpenVINO cannot load)
BIAS_NAME = "b"  # the intercept initializer of every prefix graph
STAGE_KINDS = ("affine", "trees", "layer_blocks")  # `stage_kind`; absent means affine (every export before tree stages)
STATE_IN = "state_in"  # tree stage graphs: the carried state [N, S] in ...
STATE_OUT = "state_out"  # ... and out (stage 0 has neither: its state is zero)
# bounds on what a tree-stage manifest may claim, so a reader sizes nothing from an absurd number
MAX_STATE_WIDTH = 1 << 16
MAX_TREES = 1 << 20  # trees of one export (all stages together)
MAX_TREE_NODES = 1 << 24  # nodes of one export (the bound of edgeseq.forms.trees.MAX_NODES)
MAX_TREE_DEPTH = 32  # comparisons on a root-to-leaf path (edgeseq.forms.trees.MAX_DEPTH)
TREE_STAGE_FIELDS = ("new_groups", "cost", "n_trees", "n_nodes", "max_depth")
LAYER_STAGE_FIELDS = ("new_groups", "cost", "commit", "width", "macs")  # layer-block stages (neural networks)
C_HEADER = "edgeseq_model.h"
C_SOURCE = "edgeseq_model.c"
# Without per-feature arrays (names, statistics) nothing in a model file or manifest vouches for
# columns past the last one a group uses; allow this many unused trailing columns, so the claimed
# width stays bounded (model files and manifests use the same bound).
MAX_UNUSED_TRAILING = 1024


def prefix_file(j: int, n_prefixes: int) -> str:
    """File name of prefix j's ONNX graph: zero-padded to at least 3 digits, so names sort in order.

    Examples
    --------
    >>> prefix_file(2, 5), prefix_file(7, 1500)
    ('prefix_002.onnx', 'prefix_0007.onnx')
    >>> names = [prefix_file(j, 12) for j in range(12)]
    >>> sorted(names) == names                   # lexical order is prefix order
    True
    """
    width = max(3, len(str(n_prefixes - 1)))
    return f"prefix_{j:0{width}d}.onnx"


MAX_DEPTH = 32  # a real manifest nests 5 levels (provenance may add a few)


def _depth(obj) -> int:
    """Nesting depth of parsed JSON, without recursion (later code walks it recursively)."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:
                stack.extend((v, d + 1) for v in (x.values() if isinstance(x, dict) else x))
    return deepest


def sha256_file(path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks (an ONNX graph can be large).

    Examples
    --------
    >>> import hashlib, tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "f.bin"
    >>> _ = p.write_bytes(b"edgeseq")
    >>> sha256_file(p) == hashlib.sha256(b"edgeseq").hexdigest()
    True
    """
    import hashlib  # here and below: loading OpenSSL is not free, and imports stay cheap

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def canonical_json(obj) -> bytes:
    r"""Sorted keys, no whitespace, UTF-8, finite numbers only: the bytes the checksum covers.

    One form for one content, so a checksum does not depend on how a writer ordered its keys.

    Examples
    --------
    >>> canonical_json({"b": 1, "a": [1.5, "é"]})
    b'{"a":[1.5,"\xc3\xa9"],"b":1}'
    >>> canonical_json({"x": float("nan")})
    Traceback (most recent call last):
    ...
    ValueError: Out of range float values are not JSON compliant...
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def manifest_checksum(manifest: dict) -> str:
    """The sha256 (hex) of the canonical JSON of everything in `manifest` but ``manifest_sha256``.

    Examples
    --------
    >>> import hashlib
    >>> m = {"format": "edgeseq-export", "manifest_sha256": "ignored"}
    >>> manifest_checksum(m) == hashlib.sha256(b'{"format":"edgeseq-export"}').hexdigest()
    True
    >>> manifest_checksum({**m, "manifest_sha256": "other"}) == manifest_checksum(m)
    True
    """
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    import hashlib

    return hashlib.sha256(canonical_json(body)).hexdigest()


def dump_manifest(manifest: dict) -> bytes:
    r"""The exact bytes of manifest.json (readers re-serialise and compare, so no byte is free).

    Examples
    --------
    >>> import json
    >>> raw = dump_manifest({"b": 1, "a": "é"})
    >>> raw
    b'{\n  "a": "\\u00e9",\n  "b": 1\n}\n'
    >>> dump_manifest(json.loads(raw)) == raw      # what a reader checks
    True
    """
    return (json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False)
            + "\n").encode("ascii")


def load_schema() -> dict:
    """The manifest's JSON Schema (Draft 2020-12), as shipped inside the package.

    Examples
    --------
    >>> schema = load_schema()
    >>> schema["type"], "manifest_sha256" in schema["properties"]
    ('object', True)
    """
    from importlib import resources

    text = resources.files("edgeseq.schema").joinpath("manifest.schema.json").read_text("utf-8")
    return json.loads(text)


@functools.lru_cache(maxsize=1)
def _validator():
    """The schema is checked once per process; validation itself is then cheap."""
    import jsonschema  # imported on first use: `import edgeseq.runtime` stays light

    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate_manifest(manifest: dict) -> None:
    """JSON-Schema validation plus the cross-field rules a schema cannot express.

    A manifest whose checksums were recomputed after an edit passes the sha256 checks, so everything a
    runtime indexes or trusts (lengths, columns, costs, outputs, file list) is checked for consistency
    here; each violation is an IntegrityError naming the field.

    Examples
    --------
    >>> import json
    >>> from pathlib import Path
    >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
    >>> out = Path(out)
    >>> manifest = json.loads((out / "manifest.json").read_text())
    >>> validate_manifest(manifest)                 # a fresh export: nothing to say
    >>> validate_manifest({**manifest, "format": "other"})
    Traceback (most recent call last):
    ...
    edgeseq.errors.IntegrityError: manifest.json does not match the schema at format: ...
    """
    _check_schema(manifest)
    check_cross_fields(manifest)


def _check_schema(manifest: dict) -> None:
    import jsonschema

    validator = _validator()
    if not validator.is_valid(manifest):
        exc = jsonschema.exceptions.best_match(validator.iter_errors(manifest))
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise IntegrityError(f"{MANIFEST} does not match the schema at {clip(where)}: {clip(exc.message)}")


def check_cross_fields(manifest: dict) -> None:
    """The rules between fields of a schema-valid manifest.

    Examples
    --------
    >>> import json
    >>> from pathlib import Path
    >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
    >>> out = Path(out)
    >>> manifest = json.loads((out / "manifest.json").read_text())
    >>> check_cross_fields(manifest)
    >>> manifest["prefixes"][1]["cum_cost"] = 99.0     # schema-valid, but not the sum of the costs
    >>> check_cross_fields(manifest)
    Traceback (most recent call last):
    ...
    edgeseq.errors.IntegrityError: ...
    """
    _stage_checks(manifest)[0](manifest)
    _check_features(manifest)
    _check_groups(manifest)
    _check_costs(manifest)
    _check_outputs(manifest)
    _check_files(manifest)
    _check_c_int16(manifest)
    _check_stopping(manifest)


def stage_kind(manifest: dict) -> str:
    """How the export's stages compute: ``"affine"`` (linear prefixes; also when absent) or ``"trees"``.

    Exports written before tree stages existed carry no ``stage_kind``; they are affine.

    Examples
    --------
    >>> stage_kind({}), stage_kind({"stage_kind": "trees"})
    ('affine', 'trees')
    """
    return manifest.get("stage_kind", "affine")


def stage_group_counts(manifest: dict) -> list[int]:
    """Per stage k, how many groups (a prefix of ``groups``, in order) are computed once k has run.

    Affine prefix j needs the first j groups; a tree stage needs those its own and earlier stages
    list in ``new_groups`` (zero, one or several per stage).

    Examples
    --------
    >>> stage_group_counts({"prefixes": [{}, {}, {}]})
    [0, 1, 2]
    >>> stage_group_counts({"stage_kind": "trees", "prefixes": [{"new_groups": []}, {"new_groups": ["a", "b"]},
    ...                                                          {"new_groups": []}]})
    [0, 2, 2]
    """
    if not all("new_groups" in p for p in manifest["prefixes"]):  # one group per stage (affine prefixes)
        return list(range(len(manifest["prefixes"])))
    counts, n = [], 0
    for p in manifest["prefixes"]:
        n += len(p["new_groups"])
        counts.append(n)
    return counts

def _bad(field: str, problem: str) -> IntegrityError:
    return IntegrityError(f"{MANIFEST}: {field} {problem}")


def c_dtype(manifest: dict) -> str:
    """Number type of the export's C model: ``"float32"`` (also when absent: every export before the
    integer models) or ``"int16"``.

    Examples
    --------
    >>> from edgeseq.format import c_dtype
    >>> c_dtype({"c": {"prefix": "m"}}), c_dtype({"c": {"dtype": "int16"}}), c_dtype({"c": None})
    ('float32', 'int16', 'float32')
    """
    return (manifest.get("c") or {}).get("dtype", "float32")


def _check_c_int16(m: dict) -> None:
    """dtype int16 comes with its int16 entry (and only then), one entry per prefix and per feature."""
    c = m["c"] or {}
    if (c_dtype(m) == "int16") != ("int16" in c):
        raise _bad("c.int16", "must be present exactly when c.dtype is int16")
    if "int16" not in c:
        return
    q = c["int16"]
    if [p["index"] for p in q["prefixes"]] != list(range(len(m["prefixes"]))):
        raise _bad("c.int16.prefixes", f"must list prefixes 0..{len(m['prefixes']) - 1} in order")
    used = stage_group_counts(m)[-1] if m["prefixes"] else 0  # tree exports list unused groups last
    if len(q["features"]) != sum(g["dim"] for g in m["groups"][:used]):
        raise _bad("c.int16.features", "must have one entry per feature of the full prefix")
    if ("state" in q) != ("state_width" in m) or len(q.get("state", [])) != m.get("state_width", 0):
        raise _bad("c.int16.state", "must have one entry per state dimension exactly in a tree-stage export")


def _check_stopping(m: dict) -> None:
    """The optional stopping entry: a classifier's, one finite float32 threshold and share per stage."""
    import math
    import struct

    st = m.get("stopping")
    if st is None:
        return
    if m["task"] == "regression":
        raise _bad("stopping", "is only defined for classifiers")
    n = len(m["prefixes"])
    for key in ("thresholds", "stop_share"):
        if len(st[key]) != n:
            raise _bad(f"stopping.{key}", f"has {len(st[key])} entries; the export has {n} stages")
    numbers = [st[k] for k in ("max_disagreement", "confidence", "disagreement", "disagreement_bound",
                               "mean_cost", "full_cost")] + st["thresholds"] + st["stop_share"]
    if not all(math.isfinite(v) for v in numbers):
        raise _bad("stopping", "holds a value that is not finite")
    bad = [t for t in st["thresholds"] if struct.unpack("f", struct.pack("f", t))[0] != t]
    if bad:
        raise _bad("stopping.thresholds", f"must be float32 values (the runtimes compare in float32), got {brief(bad[0])}")
    if abs(sum(st["stop_share"]) - 1.0) > 1e-6 or st["mean_cost"] > st["full_cost"] * (1 + 1e-9) + 1e-12:
        raise _bad("stopping", "has stop shares that do not sum to 1 or a mean cost above the full cost")
    if st.get("statistic") == "logit_gap" and m.get("c") and c_dtype(m) == "int16":
        raise _bad("stopping.statistic", "logit_gap needs a float C model (the int16 runtime compares the "
                                         "probability margin)")


def _check_prefixes(m: dict) -> None:
    groups, prefixes = m["groups"], m["prefixes"]
    if m["c"] is None:
        raise _bad("c", "is null; only a tree-stage export may come without its C model")
    stray = [f for p in prefixes for f in TREE_STAGE_FIELDS if f in p] + (["state_width"] if "state_width" in m else [])
    if stray:
        raise _bad("prefixes", f"carry tree-stage field(s) {brief(sorted(set(stray)))} in an affine export")
    if len(prefixes) != len(groups) + 1:
        raise _bad("prefixes", f"has {len(prefixes)} entries; {len(groups)} groups need {len(groups) + 1}")
    if sorted(g["index"] for g in groups) != list(range(len(groups))):
        raise _bad("groups[].index", f"must be a permutation of 0..{len(groups) - 1}")
    for j, p in enumerate(prefixes):
        want = [g["input_name"] for g in groups[:j]] or [PREFIX0_INPUT]
        if p["index"] != j or p["inputs"] != want:
            raise _bad(f"prefixes[{j}]", f"has index {brief(p['index'])} and inputs {brief(p['inputs'])}, "
                                         f"expected index {j} and inputs {brief(want)}")


def _check_tree_stages(m: dict) -> None:
    """Tree stages: every stage describes itself fully, groups are required in list order, each once,
    and the sizes a runtime or emitter will trust stay within the format's bounds."""
    groups, stages = m["groups"], m["prefixes"]
    if not isinstance(m.get("state_width"), int):
        raise _bad("state_width", "is required in a tree-stage export")
    if sorted(g["index"] for g in groups) != list(range(len(groups))):
        raise _bad("groups[].index", f"must be a permutation of 0..{len(groups) - 1}")
    names = [g["input_name"] for g in groups]
    if STATE_IN in names or STATE_OUT in names:
        raise _bad("groups[].input_name", f"uses {STATE_IN!r} or {STATE_OUT!r}, the state's names")
    required, total_trees, total_nodes = [], 0, 0
    for k, p in enumerate(stages):
        missing = [f for f in TREE_STAGE_FIELDS if f not in p]
        if missing:
            raise _bad(f"prefixes[{k}]", f"lacks {brief(missing)}, which a tree stage must give")
        required += p["new_groups"]
        if required != names[:len(required)]:
            raise _bad(f"prefixes[{k}].new_groups", f"is {brief(p['new_groups'])}; stages must require the "
                                                   f"groups in list order, each once")
        if k and not required:
            raise _bad(f"prefixes[{k}]", "requires no group although it is not the prior (stage 0)")
        want = [PREFIX0_INPUT] if k == 0 else [*required, STATE_IN]
        if p["index"] != k or p["inputs"] != want:
            raise _bad(f"prefixes[{k}]", f"has index {brief(p['index'])} and inputs {brief(p['inputs'])}, "
                                         f"expected index {k} and inputs {brief(want)}")
        if k == 0 and (p["new_groups"] or p["n_trees"] or p["cost"] != 0):
            raise _bad("prefixes[0]", "must require no group, hold no tree and cost nothing")
        if (p["n_trees"] == 0) != (p["n_nodes"] == 0) or p["n_nodes"] < p["n_trees"] \
                or (p["n_trees"] == 0 and p["max_depth"] != 0) or p["n_nodes"] > p["n_trees"] << p["max_depth"] + 1:
            raise _bad(f"prefixes[{k}]", f"claims {brief(p['n_trees'])} trees, {brief(p['n_nodes'])} nodes and "
                                         f"depth {brief(p['max_depth'])}, which no set of binary trees has")
        total_trees += p["n_trees"]
        total_nodes += p["n_nodes"]
    if total_trees > MAX_TREES or total_nodes > MAX_TREE_NODES:
        raise _bad("prefixes", f"hold {total_trees} trees with {total_nodes} nodes; at most {MAX_TREES} trees "
                               f"and {MAX_TREE_NODES} nodes are supported")


def _check_layer_stages(m: dict) -> None:
    """Layer-block stages: groups are paid in list order, each once; stage k's graph reads some of the
    groups paid by then (in list order) and, unless it resets, the previous stage's state; widths chain;
    the prior commits, costs nothing and has no state."""
    groups, stages = m["groups"], m["prefixes"]
    if sorted(g["index"] for g in groups) != list(range(len(groups))):
        raise _bad("groups[].index", f"must be a permutation of 0..{len(groups) - 1}")
    names = [g["input_name"] for g in groups]
    if STATE_IN in names or STATE_OUT in names:
        raise _bad("groups[].input_name", f"uses {STATE_IN!r} or {STATE_OUT!r}, the state's names")
    required, prev = [], 0
    for k, p in enumerate(stages):
        missing = [f for f in LAYER_STAGE_FIELDS if f not in p]
        if missing or any(f in p for f in ("n_trees", "n_nodes", "max_depth")):
            raise _bad(f"prefixes[{k}]", f"must give exactly the layer-block fields {brief(list(LAYER_STAGE_FIELDS))}")
        required += p["new_groups"]
        if required != names[:len(required)]:
            raise _bad(f"prefixes[{k}].new_groups", f"is {brief(p['new_groups'])}; stages must require the "
                                                   f"groups in list order, each once")
        reads = [i for i in p["inputs"] if i != STATE_IN]
        state = p["inputs"][len(reads):] == [STATE_IN] and STATE_IN not in reads
        ok_inputs = [PREFIX0_INPUT] if k == 0 else None
        if k == 0 and (p["index"] != 0 or p["inputs"] != ok_inputs or p["new_groups"] or p["cost"] != 0 or not p["commit"]
                       or p["width"] != 0):
            raise _bad("prefixes[0]", "must read only n, require no group, cost nothing, commit and carry no state")
        if k and (p["index"] != k or not (reads or state) or [n for n in required if n in reads] != reads
                  or (STATE_IN in p["inputs"] and not state) or (state and prev == 0) or p["width"] < 1):
            raise _bad(f"prefixes[{k}]", f"has index {brief(p['index'])}, inputs {brief(p['inputs'])} and width "
                                         f"{brief(p['width'])}: a stage reads groups paid by then (in list order) "
                                         f"and/or the previous state, last")
        prev = p["width"]


def _check_features(m: dict) -> None:
    D = m["n_features_in"]
    for key in ("feature_names", "feature_mean", "feature_std"):
        if m[key] is not None and len(m[key]) != D:
            raise _bad(key, f"has {len(m[key])} entries, n_features_in is {D}")
    if all(m[key] is None for key in ("feature_names", "feature_mean", "feature_std")):
        top = max((max(g["columns"]) for g in m["groups"]), default=-1)
        if D > top + 1 + MAX_UNUSED_TRAILING:  # the same bound as for model files
            raise _bad("n_features_in", f"is {D}, but the groups use columns up to {top} and no per-feature "
                                        f"list vouches for more than {MAX_UNUSED_TRAILING} unused trailing columns")
    if m["feature_names"] is not None and len(set(m["feature_names"])) != D:
        raise _bad("feature_names", "repeats a name (columns are matched by name)")


def _check_groups(m: dict) -> None:
    D, names, seen = m["n_features_in"], m["feature_names"], set()
    for key in ("name", "input_name"):
        values = [g[key] for g in m["groups"]]
        if len(set(values)) != len(values):
            raise _bad(f"groups[].{key}", "repeats a value")
    for k, g in enumerate(m["groups"]):
        cols = g["columns"]
        if g["dim"] != len(cols):
            raise _bad(f"groups[{k}].dim", f"is {g['dim']} but the group lists {len(cols)} columns")
        if max(cols) >= D:
            raise _bad(f"groups[{k}].columns", f"has column {brief(max(cols))}, outside 0..{D - 1} "
                                               f"(n_features_in {D})")
        if len(set(cols)) != len(cols) or seen & set(cols):
            raise _bad(f"groups[{k}].columns", "repeats a column (groups must be disjoint)")
        seen |= set(cols)
        want = None if names is None else [names[c] for c in cols]
        if g.get("column_names", want) != want:
            raise _bad(f"groups[{k}].column_names", f"is {brief(g.get('column_names'))}, feature_names give "
                                                    f"{brief(want)}")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def _check_costs(m: dict) -> None:
    prefixes, total = m["prefixes"], 0.0
    if prefixes[0]["cum_cost"] != 0:
        raise _bad("prefixes[0].cum_cost", f"is {prefixes[0]['cum_cost']}, must be 0 (no group computed)")
    for k, g in enumerate(m["groups"]):
        total += g["cost"]
        if not _close(g["cum_cost"], total):
            raise _bad(f"groups[{k}].cum_cost", f"is {brief(g['cum_cost'])}, the running sum of the costs is "
                                                f"{total}")
    _stage_checks(m)[1](m)


def _check_prefix_costs(m: dict) -> None:
    """Affine prefixes: prefix k + 1 costs what the first k + 1 groups cost."""
    prefixes = m["prefixes"]
    for k, g in enumerate(m["groups"]):
        if not _close(prefixes[k + 1]["cum_cost"], g["cum_cost"]) or prefixes[k + 1]["cum_cost"] < prefixes[k]["cum_cost"]:
            raise _bad(f"prefixes[{k + 1}].cum_cost", f"is {brief(prefixes[k + 1]['cum_cost'])}, must equal "
                                                      f"groups[{k}].cum_cost {brief(g['cum_cost'])}")


def _stage_checks(m: dict):
    """(stage-list checks, stage-cost checks) of the manifest's stage kind: one lookup, no branch."""
    kind = stage_kind(m)
    if kind not in _STAGE_CHECKS:  # the schema's enum refuses it first; this keeps the line clear regardless
        raise _bad("stage_kind", f"is {brief(kind)}, a stage kind this edgeseq does not read "
                                 f"({', '.join(map(repr, _STAGE_CHECKS))}); upgrade edgeseq")
    return _STAGE_CHECKS[kind]


def _check_stage_costs(m: dict) -> None:
    """Tree stages: cum_cost is the running sum of the stage costs, each at least its groups' costs."""
    cost_of = {g["input_name"]: g["cost"] for g in m["groups"]}
    total = 0.0
    for k, p in enumerate(m["prefixes"]):
        total += p["cost"]
        floor = sum(cost_of[name] for name in p["new_groups"])
        if p["cost"] < floor and not _close(p["cost"], floor):
            raise _bad(f"prefixes[{k}].cost", f"is {brief(p['cost'])}, less than its new groups' {floor}")
        if not _close(p["cum_cost"], total):
            raise _bad(f"prefixes[{k}].cum_cost", f"is {brief(p['cum_cost'])}, the running sum of the stage "
                                                  f"costs is {total}")


def _check_outputs(m: dict) -> None:
    outs, link = m["outputs"], m["link"]
    P, names, classes = outs["n_outputs"], outs["names"], outs["classes"]
    if (m["task"] == "regression") != (link == "identity"):
        raise _bad("link", f"{brief(link)} does not fit task {brief(m['task'])} (regression uses identity)")
    if link == "identity":
        want_names, want_classes = P, None
    elif link == "sigmoid":
        if P != 1:
            raise _bad("outputs.n_outputs", f"is {P}; a sigmoid model has 1 output (the positive class)")
        want_names, want_classes = 2, 2
    else:
        if P < 2:
            raise _bad("outputs.n_outputs", f"is {P}; a softmax model has one output per class (>= 2)")
        want_names, want_classes = P, P
    if len(names) != want_names:
        raise _bad("outputs.names", f"has {len(names)} names, link {link} with n_outputs {P} needs {want_names}")
    if classes is not None and len({json.dumps(c, sort_keys=True) for c in classes}) != len(classes):
        raise _bad("outputs.classes", f"repeats a label: {brief(classes)}")
    if (classes is None) != (want_classes is None) or (classes is not None and len(classes) != want_classes):
        got = "null" if classes is None else f"{len(classes)} classes"
        raise _bad("outputs.classes", f"has {got}, link {link} with n_outputs {P} needs "
                                      f"{'null' if want_classes is None else want_classes}")
    if link == "identity" and labels_of(m) != "graph":
        raise _bad("labels", "is 'runtime', but a regression model has no labels")


def _check_files(m: dict) -> None:
    names = [f["file"] for f in listed_files(m)]
    if len(set(names)) != len(names):
        raise _bad("files", "lists a file twice")
    listed = {f["file"] for f in m["files"]}
    for key in ("header", "source") if m["c"] is not None else ():
        if m["c"][key] not in listed:
            raise _bad(f"c.{key}", f"names {brief(m['c'][key])}, which is not listed in files")
    ort = m.get("ort")
    if ort is not None:
        if len(ort["prefixes"]) != len(m["prefixes"]):
            raise _bad("ort.prefixes", "must name one ORT file per prefix")
        for name in [*ort["prefixes"], ort["operators_config"]]:
            if name not in listed:
                raise _bad("ort", f"names {brief(name)}, which is not listed in files")


def listed_files(manifest: dict) -> list[dict]:
    """Every (file, sha256) entry the manifest vouches for: the prefix graphs and the other files.

    Examples
    --------
    >>> import json
    >>> from pathlib import Path
    >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
    >>> out = Path(out)
    >>> manifest = json.loads((out / "manifest.json").read_text())
    >>> files = [e["file"] for e in listed_files(manifest)]
    >>> files[:3]
    ['prefix_000.onnx', 'prefix_001.onnx', 'prefix_002.onnx']
    >>> all(sha256_file(out / e["file"]) == e["sha256"] for e in listed_files(manifest))
    True
    """
    return ([{"file": p["file"], "sha256": p["sha256"]} for p in manifest["prefixes"]]
            + list(manifest["files"]))


def labels_entry(labels: str) -> dict:
    """The manifest's ``labels`` entry: present only when the runtime picks the labels (so exports with
    the in-graph ArgMax, the default, are byte-identical to those written before the option existed).

    Examples
    --------
    >>> from edgeseq.format import labels_entry
    >>> labels_entry("graph"), labels_entry("runtime")
    ({}, {'labels': 'runtime'})
    """
    return {} if labels == "graph" else {"labels": labels}


def labels_of(manifest: dict) -> str:
    """Where an export's classifier labels are chosen: "graph" (an ArgMax output ``label``, the default)
    or "runtime" (the graphs end at ``proba``; the runtime takes the first most probable class).

    Examples
    --------
    >>> from edgeseq.format import labels_of
    >>> labels_of({}), labels_of({"labels": "runtime"})
    ('graph', 'runtime')
    """
    return manifest.get("labels", "graph")


def read_verified(out_dir) -> dict:
    """The manifest of export directory `out_dir`, after every check; IntegrityError otherwise.

    Checks: valid JSON in canonical layout, schema, the manifest's own checksum, the cross-field
    rules of `validate_manifest`, every listed file present with the right sha256, and no unlisted
    file or directory. A manifest nested too deeply for the JSON reader, or holding a lone
    surrogate, is one IntegrityError too.

    Raises
    ------
    IntegrityError
        Naming the file and the problem.

    Examples
    --------
    >>> import json
    >>> from pathlib import Path
    >>> est, X, out = toy_export()  # groups "a" (col 0, cost 1), "b" (cols 1-2, cost 2), exported to a temp dir
    >>> out = Path(out)
    >>> manifest = json.loads((out / "manifest.json").read_text())
    >>> read_verified(out) == manifest
    True
    >>> _ = (out / "notes.txt").write_text("hi")    # any unlisted file is refused
    >>> read_verified(out)
    Traceback (most recent call last):
    ...
    edgeseq.errors.IntegrityError: ...notes.txt...
    """
    try:
        return _read_verified(out_dir)
    except RecursionError:
        raise IntegrityError(f"{Path(out_dir) / MANIFEST} nests JSON too deeply to be an edgeseq "
                             "manifest") from None
    except UnicodeEncodeError:  # JSON can escape a lone surrogate, which has no UTF-8 form to checksum
        raise IntegrityError(f"{Path(out_dir) / MANIFEST} holds text that is not valid Unicode (a lone "
                             "surrogate escape)") from None


def _read_verified(out_dir) -> dict:
    """Load manifest.json and check everything before anyone trusts the directory.

    Checks: valid JSON in canonical layout, schema, the manifest's own checksum, the cross-field rules
    of `validate_manifest`, every listed file present with the right sha256, and no unlisted file or
    directory. Raises IntegrityError naming
    the file and the problem.
    """
    out = Path(out_dir)
    mpath = out / MANIFEST
    if not out.is_dir():
        raise IntegrityError(f"{out} is not a directory (expected an edgeseq export directory)")
    if not mpath.is_file():
        raise IntegrityError(f"{mpath} is missing: not an edgeseq export directory")
    raw = mpath.read_bytes()
    def _no_constant(name):  # NaN / Infinity: not JSON, and never in a manifest edgeseq writes
        raise IntegrityError(f"{mpath} holds the non-finite number {name}; re-export the model")

    try:
        manifest = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IntegrityError(f"{mpath} is not valid JSON ({clip(exc)}); re-export the model") from None
    if not isinstance(manifest, dict):
        raise IntegrityError(f"{mpath} must hold a JSON object")
    if _depth(manifest) > MAX_DEPTH:
        raise IntegrityError(f"{mpath} nests JSON deeper than {MAX_DEPTH} levels; not an edgeseq manifest")
    _check_schema(manifest)
    if manifest_checksum(manifest) != manifest["manifest_sha256"]:
        raise IntegrityError(f"{mpath}: manifest_sha256 does not match its content (edited or corrupted)")
    if dump_manifest(manifest) != raw:
        raise IntegrityError(f"{mpath} is not byte-identical to its canonical form (edited or corrupted)")
    check_cross_fields(manifest)  # after the checksums, so a plain edit is reported as one
    for entry in listed_files(manifest):
        path = out / entry["file"]
        if not path.is_file():
            raise IntegrityError(f"{path} is listed in {MANIFEST} but missing")
        if sha256_file(path) != entry["sha256"]:
            raise IntegrityError(f"{path}: sha256 does not match {MANIFEST} (modified or corrupted)")
    expected = {MANIFEST} | {e["file"] for e in listed_files(manifest)}
    extra = sorted(p.name for p in out.iterdir() if p.name not in expected)
    if extra:
        raise IntegrityError(f"{out} holds files not listed in {MANIFEST}: {brief(extra)}")
    return manifest


# The per-kind part of the manifest contract: how each stage kind's stage list and stage costs are
# checked (the rest of the manifest is checked alike for every kind). A new kind adds one line here,
# with its name in STAGE_KINDS and the schema's `stage_kind` enum.
_STAGE_CHECKS = {"affine": (_check_prefixes, _check_prefix_costs),
                 "trees": (_check_tree_stages, _check_stage_costs),
                 "layer_blocks": (_check_layer_stages, _check_stage_costs)}
