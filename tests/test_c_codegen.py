"""Generated C model: prefixes, float literals, hostile group names, compile-time budgets, two models in one binary."""

import subprocess

import numpy as np
import pytest
from c_support import compilers
from sequences import random_sequence

from edgeseq.export.c_harness import STRICT_FLAGS, build_driver, compile_c, runtime_dir
from edgeseq.errors import ExportError, InputError
from edgeseq.export.c_codegen import c_float, default_c_prefix, validate_c_prefix
from edgeseq.export.kinds.affine.c_float import write_c_model

HOSTILE = ['quote"d', "back\\slash", "end */ comment", "multi\nline\r\n", "naïve 温度 🌡", "int", "while",
           "a-b", "a b", "a_b", "??=trigraph??/", "/* open", "1starts_with_digit", "", "_", "es_init",
           "trailing\\", "tab\there", "*/", "x/", "%s%d"]


def _dump(exe):
    return subprocess.run([str(exe), "dump"], capture_output=True, text=True, check=True).stdout.splitlines()


def _hex(s: str) -> str:
    return s.encode("utf-8").hex() or "-"


@pytest.mark.parametrize("cc", compilers())
def test_hostile_names_compile_and_round_trip(tmp_path, cc):
    """Names with quotes, backslashes, */, newlines, non-ASCII, keywords and sanitising collisions."""
    rng = np.random.default_rng(11)
    seq = random_sequence(rng, [1 + i % 3 for i in range(len(HOSTILE))], n_outputs=2, link="softmax",
                          names=HOSTILE)
    model = tmp_path / "model"
    write_c_model(seq, model, "hostile", model_name='my "model" */ \n')
    exe = build_driver(model, tmp_path, compiler=cc)
    lines = _dump(exe)
    assert lines[0] == "name " + _hex('my "model" */ \n')
    group_lines = [ln.split() for ln in lines if ln.startswith("group ")]
    assert [int(t[3]) for t in group_lines] == seq.order.tolist()
    for t, g in zip(group_lines, seq.order):
        assert t[7] == _hex(seq.group_names[g]), f"group {g} name did not round-trip"
        assert int(t[5]) == seq.group_sizes[g]
    # the identifiers in the header are sanitised and unique even where names collide ("a-b", "a b", "a_b")
    header = (model / "edgeseq_model.h").read_text()
    macros = [ln.split()[1] for ln in header.splitlines() if ln.startswith("#define hostile_GROUP_")]
    assert len(macros) == len(set(macros)) == len(HOSTILE)


def test_floats_round_trip_bit_exactly(tmp_path):
    """Every coefficient, intercept and cost the C compiler reads equals the float32 of the model."""
    rng = np.random.default_rng(5)
    seq = random_sequence(rng, (3, 2, 4), n_outputs=2)
    specials = np.array([1.0, -0.0, 1e-45, 3.4028235e38, -1.1754944e-38, 0.1, 1 / 3, 16777217.0, 1e-7])
    seq.coefs[-1].ravel()[:len(specials)] = specials  # subnormal, max, min normal, non-representable
    model = tmp_path / "m"
    write_c_model(seq, model, "bits")
    lines = _dump(build_driver(model, tmp_path))

    def bits(a):
        return [f"{b:08x}" for b in np.asarray(a, dtype=np.float32).ravel().view(np.uint32)]

    prefix_lines = [ln.split() for ln in lines if ln.startswith("prefix ")]
    for j, t in enumerate(prefix_lines):
        coef_at = t.index("coef")
        assert t[3:coef_at] == bits(seq.intercepts[j])
        assert t[coef_at + 1:] == bits(seq.coefs[j])
    cost = next(ln.split()[1:] for ln in lines if ln.startswith("cum_cost"))
    # cumulative costs are the float64 values of Python's budget rule, bit for bit
    assert cost == [f"{b:016x}" for b in np.asarray(seq.cum_cost, dtype=np.float64).view(np.uint64)]


@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, 2.0, 1e-45, 1.5e-40, 3.4028235e38, 0.1, 123456789.0, -7e-12])
def test_c_float_literal_round_trips(value):
    text = c_float(value)
    assert text.endswith("f") and ("." in text or "e" in text)
    assert np.float32(float(text[:-1])).tobytes() == np.float32(value).tobytes()


def test_overflowing_weights_are_refused(tmp_path):
    seq = random_sequence(np.random.default_rng(0), (2, 2))
    seq.coefs[2][0, 0] = 1e39
    with pytest.raises(ExportError, match="overflow float32"):
        write_c_model(seq, tmp_path, "big")
    with pytest.raises(ExportError):
        c_float(float("nan"))


@pytest.mark.parametrize("bad", ["", "1abc", "a-b", "int", "es", "es_model", "_x", "x" * 21, "naïve", None])
def test_invalid_prefixes_are_refused(bad):
    with pytest.raises(InputError):
        validate_c_prefix(bad)


@pytest.mark.parametrize("name,expected", [("My model-2", "my_model_2"), ("2fast", "g_2fast"), ("es", "m_es"),
                                           ("int", "m_int"), ("", "model"), (None, "model"),
                                           ("a" * 40, "a" * 20), ("温度", "g")])
def test_default_prefix(name, expected):
    got = default_c_prefix(name)
    assert validate_c_prefix(got) == got
    assert got == expected


def test_budget_constants_in_header(tmp_path):
    """The header's worst-case multiply-adds and work size follow from the sequence; RAM compiles as a constant."""
    seq = random_sequence(np.random.default_rng(2), (4, 1, 7), n_outputs=3, link="softmax")
    write_c_model(seq, tmp_path, "budget")
    header = (tmp_path / "edgeseq_model.h").read_text()
    assert "#define budget_MACS_PER_PUSH_MAX 36u" in header  # (4 + 1 + 7) features x 3 outputs
    assert "#define budget_WORK_FLOATS (12u + 3u + 2u * 3u)" in header
    main = tmp_path / "ram.c"
    main.write_text('#include "edgeseq_model.h"\ntypedef char ram_is_constant[budget_STATE_RAM_BYTES > 0 ? 1 : -1];\n'
                    "static float work[budget_WORK_FLOATS];\nstatic es_state st;\n"
                    "int main(void) { return es_init(&st, &budget_model, work, budget_WORK_FLOATS) == ES_OK"
                    " && sizeof(ram_is_constant) == 1 ? 0 : 1; }\n")
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", tmp_path / "edgeseq_model.c", main], tmp_path / "ram",
                    include_dirs=[tmp_path, runtime_dir()])
    assert subprocess.run([str(exe)]).returncode == 0


def test_two_models_link_into_one_binary(tmp_path):
    """Two exports with different prefixes (same file names, different directories) in one firmware."""
    rng = np.random.default_rng(9)
    a = random_sequence(rng, (2, 3), n_outputs=1)
    b = random_sequence(rng, (1, 1, 2), n_outputs=3, link="softmax")
    write_c_model(a, tmp_path / "a", "alpha")
    write_c_model(b, tmp_path / "b", "beta")
    main = tmp_path / "main.c"
    main.write_text("""#include <stdio.h>
#include "a/edgeseq_model.h"
#include "b/edgeseq_model.h"
static float wa[alpha_WORK_FLOATS], wb[beta_WORK_FLOATS];
int main(void) {
    es_state sa, sb; float out[beta_N_PRED]; uint32_t pa, pb; unsigned i;
    if (es_init(&sa, &alpha_model, wa, alpha_WORK_FLOATS) != ES_OK) return 1;
    if (es_init(&sb, &beta_model, wb, beta_WORK_FLOATS) != ES_OK) return 1;
    es_current(&sa, out, &pa, NULL); printf("%.9g", (double)out[0]);
    es_current(&sb, out, &pb, NULL);
    for (i = 0; i < beta_N_PRED; ++i) printf(" %.9g", (double)out[i]);
    printf(" %u %u\\n", (unsigned)alpha_N_GROUPS, (unsigned)beta_N_GROUPS);
    return (int)(pa + pb);
}
""")
    exe = compile_c([runtime_dir() / "edgeseq_runtime.c", tmp_path / "a" / "edgeseq_model.c",
                     tmp_path / "b" / "edgeseq_model.c", main], tmp_path / "two",
                    include_dirs=[tmp_path, runtime_dir()], flags=STRICT_FLAGS)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    np.testing.assert_allclose(float(out[0]), a.intercepts[0, 0], rtol=1e-6)
    np.testing.assert_allclose([float(v) for v in out[1:4]], b.apply_link(b.intercepts[:1])[0], rtol=1e-6)
    assert out[4:] == ["2", "3"]
