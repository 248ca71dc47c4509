"""Hostile group names: unique valid identifiers, and C strings/comments that a strict real compiler
accepts and that reproduce the original UTF-8 bytes exactly."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sequences import random_sequence

from edgeseq.format import read_verified
from edgeseq.export.kinds.affine.reader import sequence_from_export
from edgeseq.export.names import (C_KEYWORDS, RESERVED_ONNX_NAMES, c_comment_text, c_identifier,
                                  c_identifiers, c_string_literal, onnx_input_names)
from edgeseq.export.writer import export_model

HOSTILE = ['say "hi"', "back\\slash", "trailing\\", "end */ comment", "/* nested", "a/*/b", "line\nbreak",
           "cr\r\nlf", "tab\there", "trigraph ??/ ??= ???", "naïve µ 日本", "emoji 😀", "int", "while",
           "3d", "_Reserved", "__x", "a b", "a-b", "a_b", "\\", "?", "*", "/", " ", "y", "n", "label",
           "%s%d", "\x7f\x01"]
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]
IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
RUNTIME_C = Path(__file__).resolve().parents[1] / "runtime_c"


def compilers():
    found = [c for c in ("gcc", "clang") if shutil.which(c)]
    return found or [pytest.param(None, marks=pytest.mark.skip(reason="no C compiler (gcc/clang) found"))]


def test_identifiers_are_valid_unique_and_not_reserved():
    ids = c_identifiers(HOSTILE)
    assert len(set(ids)) == len(ids)
    for i in ids:
        assert IDENT.match(i) and i not in C_KEYWORDS
    onnx = onnx_input_names(HOSTILE)
    assert len(set(onnx)) == len(onnx) and not set(onnx) & RESERVED_ONNX_NAMES
    assert c_identifier("int") == "int_" and c_identifier("3d") == "g_3d" and c_identifier("a b") == "a_b"
    assert c_identifiers(["a b", "a_b", "a_b_2"]) == ["a_b", "a_b_2", "a_b_2_2"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1).filter(lambda s: "\x00" not in s), min_size=1, max_size=8, unique=True))
def test_identifier_mapping_is_injective_for_any_names(names):
    for ids in (c_identifiers(names), onnx_input_names(names)):
        assert len(set(ids)) == len(names) and all(IDENT.match(i) for i in ids)


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1).filter(lambda s: "\x00" not in s))
def test_comment_text_can_never_close_nest_or_splice(name):
    text = c_comment_text(name)
    assert ("/* " + text + " */").count("*/") == 1
    assert "/*" not in text and "??" not in text and "\n" not in text and "\r" not in text
    assert all(" " <= ch <= "~" for ch in text)


def test_string_literal_is_plain_ascii():
    for name in HOSTILE:
        lit = c_string_literal(name)
        assert lit[0] == lit[-1] == '"' and all(" " <= ch <= "~" for ch in lit) and "??" not in lit


@pytest.mark.parametrize("cc", compilers())
def test_strings_and_comments_round_trip_through_a_strict_compiler(cc, tmp_path):
    lines = ["#include <stdio.h>"]
    for i, name in enumerate(HOSTILE):
        lines.append(f"/* group {i}: {c_comment_text(name)} */")
        lines.append(f"static const char s{i}[] = {c_string_literal(name)}; /* {c_comment_text(name)} */")
        lines.append(f"static const int {c_identifiers(HOSTILE)[i]} = {i};")
    lines.append("int main(void) {")
    for i, ident in enumerate(c_identifiers(HOSTILE)):
        lines.append(f"  fwrite(s{i}, 1, sizeof s{i}, stdout); if ({ident} != {i}) return 1;")
    lines.append("  return 0;\n}")
    src = tmp_path / "names.c"
    src.write_text("\n".join(lines) + "\n", encoding="ascii")
    exe = tmp_path / "names"
    subprocess.run([cc, *STRICT, str(src), "-o", str(exe)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True).stdout
    assert out.split(b"\0")[:-1] == [n.encode("utf-8") for n in HOSTILE]


@pytest.mark.parametrize("cc", compilers())
def test_export_with_hostile_names_compiles_and_round_trips(cc, tmp_path):
    names = HOSTILE[:12] + ["a b", "a_b", "int"]
    seq = random_sequence(np.random.default_rng(5), [1 + i % 3 for i in range(len(names))], names=names)
    out = tmp_path / "o"
    m = export_model(seq, out, model_name='evil */ "model"\n')
    inputs = [g["input_name"] for g in m["groups"]]
    assert len(set(inputs)) == len(inputs) and all(IDENT.match(i) for i in inputs)
    assert read_verified(out)["model_name"] == 'evil */ "model"\n'
    assert sequence_from_export(out).group_names == tuple(names)
    subprocess.run([cc, *STRICT, f"-I{RUNTIME_C}", "-c", str(out / "edgeseq_model.c"), "-o",
                    str(tmp_path / "model.o")], check=True, capture_output=True)
