"""The stage-kind registry: a toy kind registered only here exports, verifies and runs through the spine.

The toy kind ("offset") is a form the package does not know: stage j's output is stage j-1's output plus
a constant ``offsets[j]`` (it reads no feature value, only pays for the groups). It is registered with
`edgeseq.export.kinds.register`, and the manifest contract accepts its name for the duration of a test
(the schema's ``stage_kind`` enum is the one line a new kind adds to the format). Its stage graphs are
written with the affine kind's graph writer (an affine map with zero weights and the running offset as
intercept), so the C runtime would run them as linear stages; the C runtime has no table layout for an
unknown kind, so only the Python runtime and verify are exercised here. Negative controls: an
unregistered kind name gives one clear line, from the registry and from ``verify_export``.

It also counts the files outside ``edgeseq/train/`` that branch on the kind (the grep of issue 19), so
the mechanism cannot regress into per-kind branches.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from sequences import random_sequence

import edgeseq.format as fmt
from edgeseq.errors import EdgeseqError, ExportError
from edgeseq.export import kinds
from edgeseq.export.verify_checks import PrefixCheck, VerifyReport
from edgeseq.export.writer import export_model
from edgeseq.evaluate.verify import verify_export
from edgeseq.forms.linear import FittedSequence
from edgeseq.io.atomic import atomic_write_bytes
from edgeseq.io.feature_rows import group_arrays
from edgeseq.runtime.session import AnytimeSession

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class OffsetStages:
    """The toy form: the groups, order and costs of `base`, and one constant added per stage."""

    base: FittedSequence
    offsets: np.ndarray  # (J + 1,)

    @property
    def link(self) -> str:
        return "identity"

    def stage_values(self) -> np.ndarray:
        return np.cumsum(self.offsets)

    def as_affine(self) -> FittedSequence:
        s = self.base
        return dataclasses.replace(s, coefs=tuple(np.zeros_like(c) for c in s.coefs),
                                   intercepts=self.stage_values()[:, None], feature_mean=None, feature_std=None)


def _offset_writer(form, request):
    inner = kinds.kind_named("affine").writer(form.as_affine(), request)  # the affine kind's graph writer

    def write(tmp):
        m = inner(tmp)
        m["stage_kind"] = "offset"
        m["manifest_sha256"] = fmt.manifest_checksum(m)
        atomic_write_bytes(Path(tmp) / fmt.MANIFEST, fmt.dump_manifest(m))
        fmt.read_verified(tmp)  # the spine's own checks, with the kind's name in it
        return m
    return write


def _offset_read_back(out_dir):
    return _REFERENCE[fmt.read_verified(out_dir)["model_name"]]


def _offset_verify(out_dir, X=None, *, source="", use_c=True, require_c=False, compiler=None):
    m = fmt.read_verified(out_dir)
    X = np.random.default_rng(0).normal(size=(16, m["n_features_in"])) if X is None else X
    cum_cost = np.array([p["cum_cost"] for p in m["prefixes"]])
    report = VerifyReport(X.shape[0], source or "toy rows", c_note="C column skipped (toy kind)",
                          files_line="generated files: toy kind, not regenerated")
    offsets = _offset_read_back(out_dir)
    with AnytimeSession(out_dir) as sess:
        feats = group_arrays(m, X)
        for j in range(sess.n_prefixes):
            got = np.asarray(sess.predict(feats, prefix=j), dtype=np.float64).reshape(-1)
            diff = float(np.max(np.abs(got - offsets[j])))
            bound = 4 * np.finfo(np.float32).eps * max(1.0, abs(offsets[j]))
            report.checks.append(PrefixCheck(j, None, float(cum_cost[j]), diff, diff / bound))
    return report


def OffsetKind():
    """The toy kind: a name, its form and three functions; C, row order and inspect rows keep the defaults."""
    return kinds.StageKind("offset", "offset-stage", OffsetStages, writer=_offset_writer,
                           read_back=_offset_read_back, verify=_offset_verify)


_REFERENCE: dict = {}  # model name -> the toy form's stage values (the reference verify compares against)


@pytest.fixture
def offset_kind(monkeypatch):
    """Register the toy kind and let the manifest contract accept its name (for this test only)."""
    schema = fmt.load_schema()
    schema["properties"]["stage_kind"]["enum"] = [*schema["properties"]["stage_kind"]["enum"], "offset", "wavelets"]
    import jsonschema

    monkeypatch.setattr(fmt, "_validator", lambda: jsonschema.Draft202012Validator(schema))
    # the kind's line in the format contract: its stages are checked as affine prefixes are
    monkeypatch.setitem(fmt._STAGE_CHECKS, "offset", fmt._STAGE_CHECKS["affine"])
    kind = kinds.register(OffsetKind())
    yield kind
    kinds.unregister("offset")


def _toy(seed=0):
    rng = np.random.default_rng(seed)
    base = random_sequence(rng, group_sizes=(2, 1, 3))
    return OffsetStages(base, rng.normal(size=base.n_prefixes))


def test_toy_kind_exports_verifies_and_runs(offset_kind, tmp_path):
    form = _toy()
    assert kinds.kind_of_model(form) == (offset_kind, form)
    out = tmp_path / "toy"
    _REFERENCE["toy"] = form.stage_values()
    m = export_model(form, out)
    assert m["stage_kind"] == "offset" and fmt.read_verified(out)["stage_kind"] == "offset"
    assert kinds.kind_of_manifest(m) is offset_kind
    rep = verify_export(out, use_c=False)
    assert rep.ok and [c.prefix for c in rep.checks] == list(range(form.base.n_prefixes))
    # the Python runtime runs every stage of the unknown-to-it kind: each adds its constant
    X = np.random.default_rng(3).normal(size=(5, form.base.n_features_in))
    with AnytimeSession(out) as sess:
        got = [np.asarray(sess.predict(group_arrays(m, X), prefix=j)).reshape(-1) for j in range(sess.n_prefixes)]
    assert np.allclose(np.diff([g[0] for g in got]), form.offsets[1:], atol=1e-5)
    # negative control: a wrong reference fails verify
    _REFERENCE["toy"] = form.stage_values() + 1.0
    assert not verify_export(out, use_c=False).ok


def test_unregistered_kind_is_one_clear_line(offset_kind, tmp_path):
    out = tmp_path / "toy"
    _REFERENCE["toy"] = _toy().stage_values()
    m = export_model(_toy(), out)
    m["stage_kind"] = "wavelets"  # schema-valid here, but no kind of that name is registered
    m["manifest_sha256"] = fmt.manifest_checksum(m)
    (out / fmt.MANIFEST).write_bytes(fmt.dump_manifest(m))
    with pytest.raises(EdgeseqError) as err:  # the format contract has no line for it: one clear line
        verify_export(out, use_c=False)
    text = str(err.value)
    assert "\n" not in text and len(text) < 300 and "stage_kind is 'wavelets'" in text
    with pytest.raises(ExportError) as err:  # nor has the registry
        kinds.kind_of_manifest(m)
    text = str(err.value)
    assert "\n" not in text and len(text) < 200 and "unknown stage kind 'wavelets'" in text
    assert "'offset'" in text  # the message lists what is known, registered kinds included


def test_an_unknown_object_is_refused_by_export(tmp_path):
    with pytest.raises(ExportError, match="export_model needs a fitted model of a known stage kind"):
        export_model(object(), tmp_path / "x")


def test_unknown_kind_in_a_real_manifest_is_refused_by_the_schema(tmp_path):
    """Without the test's registration the format contract refuses the name itself (one line)."""
    out = tmp_path / "lin"
    m = export_model(_toy().base, out)
    m["stage_kind"] = "wavelets"
    m["manifest_sha256"] = fmt.manifest_checksum(m)
    (out / fmt.MANIFEST).write_bytes(fmt.dump_manifest(m))
    with pytest.raises(EdgeseqError) as err:
        verify_export(out, use_c=False)
    assert "\n" not in str(err.value) and "stage_kind" in str(err.value)


KIND_BRANCH = re.compile(r'isinstance\([^)]*(TreeStageModel|FittedSequence|LayerBlockModel)|stage_kind ?==|== ?"trees"'
                         r'|"affine"|kind == ')


def _files_with_kind_branches() -> list[str]:
    found = []
    for folder in ("edgeseq", "export"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("edgeseq/train/"):
                continue
            if KIND_BRANCH.search(path.read_text(encoding="utf-8")):
                found.append(rel)
    return found


# Files outside train/ the pattern matches, each with why. At most three hold a real branch between kinds
# (issue 19's goal): the registry, the format contract and the model-file reader. A kind's own folder
# (export/kinds/<kind>/) names its kind and checks its own form type; that is not a branch between kinds.
# Three matches are not about stage kinds at all. The set is compared both ways, so it can only shrink.
REAL_BRANCHES = {
    "export/kinds/__init__.py",  # the registry itself: BUILTIN names the built-in kinds
    "edgeseq/format.py",  # the format contract: STAGE_KINDS and the per-kind manifest layout checks
    "edgeseq/io/model_io.py",  # the model-file reader re-checks each unpickled form through its own class
}
OWN_FOLDER = {"export/kinds/affine/kind.py", "export/kinds/affine/reader.py",
              "export/kinds/trees/c_float.py", "export/kinds/trees/c_int16.py",
              "export/kinds/layer_blocks/c_float.py"}
NOT_STAGE_KINDS = {
    "edgeseq/metrics/timeliness.py",  # `kind == "step"`: the curve's interpolation
    "edgeseq/cli/train_cmd.py",  # `model_kind == "linear"`: the training family of `edgeseq train --model`
    "edgeseq/forms/trees.py",  # `classes.dtype.kind == "U"`: a numpy dtype
}
KNOWN_BRANCHES = REAL_BRANCHES | OWN_FOLDER | NOT_STAGE_KINDS


def test_kind_branches_stay_in_few_files():
    found = set(_files_with_kind_branches())
    assert len(REAL_BRANCHES) <= 3
    assert found - KNOWN_BRANCHES == set(), f"new kind branches: {sorted(found - KNOWN_BRANCHES)}"
    assert KNOWN_BRANCHES - found == set(), f"fixed, remove from KNOWN_BRANCHES: {sorted(KNOWN_BRANCHES - found)}"


def test_branch_count_can_fail(tmp_path):
    """Negative control: the pattern sees the branches it is meant to see."""
    assert KIND_BRANCH.search('if stage_kind(m) == "trees":') and KIND_BRANCH.search("isinstance(x, TreeStageModel)")
    assert not KIND_BRANCH.search("kind = kind_of_manifest(m)")
