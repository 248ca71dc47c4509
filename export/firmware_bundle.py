"""A drop-in firmware library from an export: runtime + generated model + build files for the usual tools.

`write_firmware_bundle` turns a verified export directory into a folder that a firmware project adds
as it is: ``src/`` holds the C runtime the model needs (the float one or the int16 one, never both)
and the generated model; beside it a ``CMakeLists.txt`` for ``add_subdirectory`` (plain CMake, the
Zephyr, ESP-IDF, Pico SDK and STM32Cube builds), a PlatformIO ``library.json``, an Arduino
``library.properties``, a Zephyr module (``zephyr/module.yml``, ``zephyr/CMakeLists.txt``,
``zephyr/Kconfig``), an example ``examples/main.c`` that runs the model on one embedded row and
prints the committed prediction after every push, a model card ``README.md`` and ``bundle.json``
(every file's sha256).

Trust: only the two C files the export's manifest vouches for are taken from the export, and the
bytes copied are the bytes whose sha256 was checked (read once, checked, written). The runtime files
come from this installation of edgeseq. Flash and RAM are measured with ``arm-none-eabi-gcc -c`` +
``arm-none-eabi-size`` only when the tools are installed and the generated files hold no
preprocessor directive other than the generator's own (so a hostile export cannot make the measuring
compiler read host files); nothing is ever linked or run at bundle time.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from edgeseq.errors import ExportError, IntegrityError
from edgeseq.format import c_dtype, read_verified, stage_group_counts
from edgeseq.io.cost_provenance import cost_summary
from edgeseq.io.atomic import atomic_write_bytes
from edgeseq.messages import clip

BUNDLE_FORMAT = "edgeseq-firmware-bundle"
BUNDLE_INDEX = "bundle.json"
FLOAT_RUNTIME = ("edgeseq_runtime.h", "edgeseq_runtime.c", "edgeseq_seqlock.h", "edgeseq_select.h",
                 "edgeseq_layers.h", "edgeseq_layers_run.h")
INT16_RUNTIME = ("edgeseq_runtime_i16.h", "edgeseq_runtime_i16.c", "edgeseq_seqlock.h", "edgeseq_select_i16.h")
M4F_FLAGS = ("-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-mthumb")
SIZE_TIMEOUT_S = 60.0
# the only preprocessor lines a generated model may hold before it is compiled for the size report
_ALLOWED_DIRECTIVE = re.compile(r'#\s*(include\s+("edgeseq_(model|runtime|runtime_i16)\.h"|<std(int|def)\.h>)'
                                r'|ifndef\s+\w+|define\s+\w+( .*)?|endif\b.*|ifdef\s+__cplusplus|else\b.*)$')


def example_row(manifest: dict) -> np.ndarray:
    """The raw feature row the bundle's example embeds: the training mean, moved half a standard
    deviation up on even columns and down on odd ones (so no stage sees an all-average input).

    Without recorded means (models trained on unstandardised data) the row is +-0.5 per column.

    Parameters
    ----------
    manifest : dict
        A verified export manifest.

    Returns
    -------
    numpy.ndarray
        float64, shape (n_features_in,).

    Examples
    --------
    >>> from edgeseq.export.firmware_bundle import example_row
    >>> example_row({"n_features_in": 3, "feature_mean": [1.0, 2.0, 3.0], "feature_std": [2.0, 2.0, 2.0]}).tolist()
    [2.0, 1.0, 4.0]
    >>> example_row({"n_features_in": 2, "feature_mean": None, "feature_std": None}).tolist()
    [0.5, -0.5]
    """
    n = int(manifest["n_features_in"])
    sign = np.where(np.arange(n) % 2 == 0, 0.5, -0.5)
    mean, std = manifest.get("feature_mean"), manifest.get("feature_std")
    if mean is None or std is None:
        return sign.copy()
    return np.asarray(mean, dtype=np.float64) + sign * np.asarray(std, dtype=np.float64)


def sequence_columns(manifest: dict) -> list[int]:
    """Raw column indices in the order the C model takes its features: group after group, as pushed.

    Examples
    --------
    >>> from edgeseq.export.firmware_bundle import sequence_columns
    >>> sequence_columns({"groups": [{"columns": [2]}, {"columns": [0, 1]}]})
    [2, 0, 1]
    """
    return [int(c) for g in manifest["groups"] for c in g["columns"]]


def quantized_row(manifest: dict, raw: np.ndarray) -> np.ndarray:
    """`raw` as the int16 C model takes it: ``sat16(rint(x * 2**shift) - offset)`` per feature, C order.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.export.firmware_bundle import quantized_row
    >>> m = {"c": {"int16": {"features": [{"column": 1, "shift": 8, "offset": 3},
    ...                                   {"column": 0, "shift": 20, "offset": 0}]}}}
    >>> quantized_row(m, np.array([1.0, 0.5])).tolist()       # 128 - 3, then saturated
    [125, 32767]
    """
    feats = manifest["c"]["int16"]["features"]
    x = np.array([raw[f["column"]] for f in feats], dtype=np.float64)
    q = np.rint(np.ldexp(x, [int(f["shift"]) for f in feats])) - np.array([f["offset"] for f in feats])
    return np.clip(q, -32768, 32767).astype(np.int16)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _verified_c_files(export_dir: Path, manifest: dict) -> dict:
    """The export's C header and source, read once and checked against the manifest's sha256."""
    if manifest["c"] is None:
        raise ExportError(f"{clip(export_dir)} has no C model (a tree-stage export written without one); "
                          "re-export it with a C model to bundle it")
    sums = {e["file"]: e["sha256"] for e in manifest["files"]}
    out = {}
    for key in ("header", "source"):
        name = manifest["c"][key]
        data = (export_dir / name).read_bytes()
        if _sha(data) != sums.get(name):
            raise IntegrityError(f"{clip(export_dir / name)} changed after it was verified (sha256 mismatch)")
        out[name] = data
    return out


def _c_floats(values) -> str:
    return ", ".join(f"{float(v):.9g}f" if np.isfinite(v) else "0.0f" for v in np.asarray(values, np.float32))


def example_source(manifest: dict) -> str:
    """``examples/main.c``: run the model on the embedded row, print the committed stage after every push.

    Output lines: ``stage K label L pred V...`` (stage 0 before any push; one line per push after it;
    L is -1 for a regression; V are the float predictions, or the int16 runtime's int32 outputs).

    Examples
    --------
    >>> from edgeseq.export.firmware_bundle import example_source
    >>> m = {"n_features_in": 1, "feature_mean": None, "feature_std": None, "groups": [{"columns": [0]}],
    ...      "c": {"prefix": "demo"}}
    >>> src = example_source(m)
    >>> "es_push(" in src and "-DES_PREFIX" not in src and "#define ES_PREFIX demo" in src
    True
    """
    raw = example_row(manifest)
    prefix = manifest["c"]["prefix"]
    if c_dtype(manifest) == "int16":
        row = ", ".join(str(int(v)) for v in quantized_row(manifest, raw))
        return _EXAMPLE_I16.replace("@PREFIX@", prefix).replace("@ROW@", row)
    row = _c_floats(raw[sequence_columns(manifest)])
    return _EXAMPLE_F32.replace("@PREFIX@", prefix).replace("@ROW@", row)


_EXAMPLE_F32 = """\
/* Runs the model on one embedded row (written by `edgeseq bundle`) and prints the committed
   prediction after every push: "stage K label L pred V..." (label -1 for a regression). */
#include <stdio.h>

#define ES_PREFIX @PREFIX@
#include "edgeseq_select.h"

static const float test_row[ES_N_FEATURES] = {@ROW@};
static float work[ES_WORK_FLOATS];
static float pred[ES_N_PRED];
static es_state st;

static void print_current(void)
{
    uint32_t stage = 0u, p;
    int32_t label = -1;
    es_current(&st, pred, &stage, &label);
    printf("stage %u label %d pred", (unsigned)stage, (int)label);
    for (p = 0u; p < ES_N_PRED; ++p) {
        printf(" %.9g", (double)pred[p]);
    }
    printf("\\n");
}

int main(void)
{
    es_group_info g;
    uint32_t filled = 0u;
#if ES_HAS_TREE_CODE /* a tree model exported with --c-trees code starts with es_init_code */
    if (es_init_code(&st, &ES_TREE_CODE, work, ES_WORK_FLOATS) != ES_OK) {
#else
    if (es_init(&st, &ES_MODEL, work, ES_WORK_FLOATS) != ES_OK) {
#endif
        printf("es_init failed\\n");
        return 1;
    }
    print_current();
    while (es_next_group(&st, &g) == ES_OK) {
        if (es_push(&st, g.group, test_row + filled, g.dim) != ES_OK) {
            printf("es_push failed\\n");
            return 1;
        }
        filled += g.dim;
        print_current();
    }
    printf("done\\n");
    return 0;
}
"""

_EXAMPLE_I16 = """\
/* Runs the int16 model on one embedded, already quantised row (written by `edgeseq bundle`) and prints
   the committed prediction after every push: "stage K label L pred V..." (int32 outputs; label -1
   for a regression, whose real value is V * 2^-es16_output_shift(model, K)). */
#include <stdio.h>

#define ES16_PREFIX @PREFIX@
#include "edgeseq_select_i16.h"

static const int16_t test_row[ES16_N_FEATURES] = {@ROW@};
static int16_t x[ES16_N_FEATURES];
static int32_t work[ES16_WORK_WORDS];
static int32_t pred[ES16_N_PRED];
static es16_state st;

static void print_current(void)
{
    uint32_t stage = 0u, p;
    int32_t label = -1;
    es16_current(&st, pred, &stage, &label);
    printf("stage %u label %d pred", (unsigned)stage, (int)label);
    for (p = 0u; p < ES16_N_PRED; ++p) {
        printf(" %ld", (long)pred[p]);
    }
    printf("\\n");
}

int main(void)
{
    es16_group_info g;
    uint32_t filled = 0u;
    if (es16_init(&st, &ES16_MODEL, x, ES16_N_FEATURES, work, ES16_WORK_WORDS) != ES16_OK) {
        printf("es16_init failed\\n");
        return 1;
    }
    print_current();
    while (es16_next_group(&st, &g) == ES16_OK) {
        if (es16_push(&st, g.group, test_row + filled, g.dim) != ES16_OK) {
            printf("es16_push failed\\n");
            return 1;
        }
        filled += g.dim;
        print_current();
    }
    printf("done\\n");
    return 0;
}
"""


# target names CMake reserves for itself (a library may not take them)
_CMAKE_RESERVED = frozenset({"all", "clean", "help", "install", "test", "package", "package_source", "edit_cache",
                             "rebuild_cache", "depend", "list_install_components", "install_strip", "install_local"})


def library_name(prefix: str) -> str:
    """The library's name in CMake, PlatformIO and Arduino: the C prefix, unless CMake reserves it.

    Examples
    --------
    >>> from edgeseq.export.firmware_bundle import library_name
    >>> library_name("robot"), library_name("test"), library_name("ALL_BUILD")
    ('robot', 'edgeseq_test', 'edgeseq_ALL_BUILD')
    """
    reserved = prefix.lower() in _CMAKE_RESERVED or prefix.upper() in ("ALL_BUILD", "ZERO_CHECK", "RUN_TESTS",
                                                                      "INSTALL", "PACKAGE")
    return f"edgeseq_{prefix}" if reserved else prefix


def _cmake(name: str, sources: list[str], float_runtime: bool) -> str:
    srcs = "\n".join(f"    ${{CMAKE_CURRENT_LIST_DIR}}/src/{s}" for s in sources)
    libm = ("\n# expf of the sigmoid and softmax links (libm; MSVC has it in its C library)\n"
            f"if(NOT MSVC)\n    target_link_libraries({name} PUBLIC m)\nendif()\n" if float_runtime else "")
    return f"""# edgeseq model library "{name}" (written by `edgeseq bundle`). In your project:
#   add_subdirectory(path/to/this/folder)
#   target_link_libraries(your_app PRIVATE {name})
cmake_minimum_required(VERSION 3.13)
project({name} LANGUAGES C)

if(NOT TARGET {name})
add_library({name} STATIC
{srcs}
)
add_library(edgeseq::{name} ALIAS {name})
target_include_directories({name} PUBLIC ${{CMAKE_CURRENT_LIST_DIR}}/src)
set_target_properties({name} PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON)
{libm}endif()
"""


def _zephyr_files(prefix: str, sources: list[str]) -> dict:
    sym = f"EDGESEQ_{prefix.upper()}"
    srcs = " ".join(f"../src/{s}" for s in sources)
    return {
        "zephyr/module.yml": f"name: {prefix}\nbuild:\n  cmake: zephyr\n  kconfig: zephyr/Kconfig\n",
        "zephyr/CMakeLists.txt": (f"if(CONFIG_{sym})\n  zephyr_library()\n  zephyr_library_sources({srcs})\n"
                                  f"  zephyr_include_directories(../src)\nendif()\n"),
        "zephyr/Kconfig": (f"config {sym}\n\tbool \"edgeseq model {prefix}\"\n\thelp\n"
                           f"\t  The edgeseq runtime and the generated model {prefix} (C99, no heap).\n"),
    }


def _library_json(prefix: str, manifest: dict, version: str) -> str:
    return json.dumps({
        "name": prefix, "version": _semver(version),
        "description": f"edgeseq anytime model {manifest['model_name']} ({manifest['task']}) with its C runtime",
        "keywords": ["edgeseq", "anytime", "tinyml"], "frameworks": "*", "platforms": "*",
        "build": {"srcDir": "src", "includeDir": "src", "flags": ["-std=c99"]},
        "headers": ["edgeseq_model.h"],
    }, indent=2) + "\n"


def _semver(version: str) -> str:
    """PlatformIO and Arduino want MAJOR.MINOR.PATCH; a development suffix is dropped."""
    nums = re.findall(r"\d+", version.split(".dev")[0].split("+")[0])[:3]
    return ".".join((nums + ["0", "0", "0"])[:3])


def _library_properties(prefix: str, manifest: dict, version: str) -> str:
    return (f"name={prefix}\nversion={_semver(version)}\nauthor=edgeseq bundle\nmaintainer=edgeseq bundle\n"
            f"sentence=edgeseq anytime model {manifest['model_name']} with its C runtime.\n"
            f"paragraph=Generated by edgeseq {version}; see README.md.\ncategory=Data Processing\n"
            f"url=\narchitectures=*\nincludes=edgeseq_model.h\n")


def measure_arm_size(src_dir: Path, sources: list[str], prefix: str) -> dict | None:
    """Flash and state RAM of the library for a Cortex-M4F (``-Os``), from ``arm-none-eabi-size``.

    Returns ``{"target", "objects": {source: {"text", "data", "bss"}}, "flash_bytes", "state_ram_bytes"}``
    (flash = text + data of the objects, before the linker drops unused functions; state RAM =
    ``<prefix>_STATE_RAM_BYTES`` as the cross compiler evaluates it, read from the size of an array of
    that many bytes), or None when the tools are missing, fail, or the generated files hold a
    preprocessor line the generator does not write (the bundle then says "not measured").

    Examples
    --------
    >>> from pathlib import Path
    >>> from edgeseq.export.firmware_bundle import measure_arm_size
    >>> measure_arm_size(Path("."), [], "demo") is None      # nothing to measure
    True
    """
    cc, size = shutil.which("arm-none-eabi-gcc"), shutil.which("arm-none-eabi-size")
    if not sources or cc is None or size is None:
        return None
    for name in ("edgeseq_model.h", "edgeseq_model.c"):
        for line in (src_dir / name).read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lstrip().startswith("#") and not _ALLOWED_DIRECTIVE.match(line.strip()):
                return None
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "state_ram_probe.c"
        probe.write_text(f'#include "edgeseq_model.h"\nunsigned char es_probe[{prefix}_STATE_RAM_BYTES];\n')
        objs = []
        try:
            for c in [*(src_dir / s for s in sources), probe]:
                objs.append(Path(tmp) / (c.stem + ".o"))
                subprocess.run([cc, "-std=c99", "-Os", *M4F_FLAGS, "-ffunction-sections", "-fdata-sections",
                                "-fno-common", "-I", str(src_dir), "-c", str(c), "-o", str(objs[-1])],
                               check=True, capture_output=True, timeout=SIZE_TIMEOUT_S)
            out = subprocess.run([size, *map(str, objs)], check=True, capture_output=True, text=True,
                                 timeout=SIZE_TIMEOUT_S).stdout
        except (OSError, subprocess.SubprocessError):
            return None
    rows = {}
    for line in out.splitlines()[1:]:
        parts = line.split()
        rows[Path(parts[-1]).stem + ".c"] = {"text": int(parts[0]), "data": int(parts[1]), "bss": int(parts[2])}
    ram = rows.pop("state_ram_probe.c")["bss"]
    return {"target": "cortex-m4f", "objects": rows, "flash_bytes": sum(r["text"] + r["data"] for r in rows.values()),
            "state_ram_bytes": ram}


def _metric_columns(manifest: dict) -> list[str]:
    keys = []
    for p in manifest["prefixes"]:
        for k, v in sorted(((p.get("metrics") or {}).get("train") or {}).items()):
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in keys:
                keys.append(k)
    return keys[:4]


def _stage_rows(manifest: dict) -> list[str]:
    """The anytime curve: per stage its cumulative cost, the groups it has, its recorded metrics."""
    keys = _metric_columns(manifest)
    counts = stage_group_counts(manifest)
    head = "| stage | cumulative cost | groups computed | " + " | ".join(f"{k} (train)" for k in keys) + " |"
    lines = [head, "|" + "---|" * (3 + len(keys))]
    for p, c in zip(manifest["prefixes"], counts):
        train = (p.get("metrics") or {}).get("train") or {}
        vals = " | ".join(f"{train[k]:.4g}" if k in train else "-" for k in keys)
        lines.append(f"| {p['index']} | {p['cum_cost']:.6g} | {c} | {vals} |")
    if not keys:
        lines.append("")
        lines.append("The export records no per-stage metrics (the model was not trained with them).")
    return lines


def _const_int(expr: str) -> int:
    """The value of a generated ``#define`` made of unsigned literals, + and * (0 for anything else).

    Examples
    --------
    >>> from edgeseq.export.firmware_bundle import _const_int
    >>> _const_int("(5u + 1u + 2u * 2u)"), _const_int("(sizeof(es_state) + 4u)")
    (10, 0)
    """
    text = re.sub(r"(\d+)[uU]\b", r"\1", expr.split("/*")[0]).strip()
    if not re.fullmatch(r"[\d\s+*()]{1,200}", text) or "**" in text:
        return 0
    try:
        return int(eval(compile(ast.parse(text, mode="eval"), "<define>", "eval"), {"__builtins__": {}}))
    except (SyntaxError, ValueError, TypeError):
        return 0


def _readme(manifest: dict, prefix: str, dtype: str, sizes: dict | None, version: str, sums: dict,
            header: str) -> str:
    m = manifest
    lines = [f"# {prefix}: edgeseq anytime model `{m['model_name']}`", "",
             f"Generated by edgeseq {version} with `edgeseq bundle` from a verified export. Task: {m['task']}, "
             f"link {m['link']}, {m['n_features_in']} raw features, C runtime: "
             + ("int16 (integer-only, for cores without an FPU)" if dtype == "int16" else "float32") + ".", "",
             "## Feature groups, in the order the device computes them", "",
             f"Group costs ({cost_summary(m.get('provenance') or {})}).", "",
             "| # | group | dim | cost | cumulative cost | raw columns |", "|---|---|---|---|---|---|"]
    for k, g in enumerate(m["groups"]):
        cols = ", ".join(g["column_names"] or map(str, g["columns"]))
        lines.append(f"| {k + 1} | {g['name']} | {g['dim']} | {g['cost']:.6g} | {g['cum_cost']:.6g} | {cols} |")
    lines += ["", "## Stages and the anytime curve", "",
              "Stage 0 is the prior (no features); each later stage is committed once its groups are pushed.", "",
              *_stage_rows(m), ""]
    if dtype == "int16":
        lines += ["## Accuracy of the int16 model versus float", "", "| stage | loss versus float |", "|---|---|"]
        for p in m["c"]["int16"]["prefixes"]:
            loss = (f"accuracy {p['accuracy_loss_pp']:+.2f} pp" if "accuracy_loss_pp" in p
                    else f"explained variance {p.get('explained_variance_loss', 0.0):+.2e}")
            lines.append(f"| {p['index']} | {loss} |")
        lines.append("")
    lines += ["## Flash and RAM", ""]
    if sizes is None:
        lines += ["Not measured: arm-none-eabi-gcc / arm-none-eabi-size were missing or failed when the bundle "
                  "was written, measuring was switched off, or the generated files hold a preprocessor line "
                  "that edgeseq's generator does not write (such files are never compiled while bundling).", ""]
    else:
        lines += ["Measured at bundle time: `arm-none-eabi-gcc -Os -mcpu=cortex-m4 -mfpu=fpv4-sp-d16 "
                  "-mfloat-abi=hard -ffunction-sections -fdata-sections -c`, then `arm-none-eabi-size` "
                  "(bytes; flash = text + data, before the linker drops unused functions).", "",
                  "| object | text | data | bss |", "|---|---|---|---|"]
        for name, r in sizes["objects"].items():
            lines.append(f"| {name} | {r['text']} | {r['data']} | {r['bss']} |")
        lines += ["", f"Flash total: {sizes['flash_bytes']} bytes. State RAM on this core: "
                  f"{sizes['state_ram_bytes']} bytes (`{prefix}_STATE_RAM_BYTES`).", ""]
    consts = {k: _const_int(v) for k, v in re.findall(rf"#define {re.escape(prefix)}_(\w+) (.+)", header)}
    if dtype == "int16":
        ram = (f"`sizeof(es16_state)` + {2 * consts.get('N_FEATURES', 0)} bytes of int16 features "
               f"(`{prefix}_N_FEATURES`) + {4 * consts.get('WORK_WORDS', 0)} bytes of int32 work "
               f"(`{prefix}_WORK_WORDS`)")
    else:
        ram = (f"`sizeof(es_state)` + {4 * consts.get('WORK_FLOATS', 0)} bytes of float work "
               f"(`{prefix}_WORK_FLOATS`)")
    ram += ("; all in the caller's static memory (the runtime has no globals and no heap), plus the stack "
            "of a push (not measured)")
    lines += [f"RAM: {ram}.", "", "## C API in ten lines", "", "```c"]
    if dtype == "int16":
        lines += ['#include "edgeseq_model.h"',
                  f"static int16_t x[{prefix}_N_FEATURES]; static int32_t work[{prefix}_WORK_WORDS]; "
                  "static es16_state st;",
                  f"es16_init(&st, &{prefix}_model, x, {prefix}_N_FEATURES, work, {prefix}_WORK_WORDS);",
                  "es16_group_info g;",
                  "while (es16_next_group(&st, &g) == ES16_OK) {",
                  "    extract_group_q(g.group, feats);  /* g.dim int16: sat16(rint(x * 2^shift) - offset) */",
                  "    es16_push(&st, g.group, feats, g.dim);",
                  "}",
                  "/* any time, even in an interrupt: */ es16_current(&st, out, &stage, &label);", ""]
    else:
        lines += ['#include "edgeseq_model.h"',
                  f"static float work[{prefix}_WORK_FLOATS]; static es_state st;",
                  (f"es_init_code(&st, &{prefix}_tree_code, work, {prefix}_WORK_FLOATS);  /* trees as code */"
                   if f"#define {prefix}_TREE_CODE 1" in header else
                   f"es_init(&st, &{prefix}_model, work, {prefix}_WORK_FLOATS);"),
                  "es_group_info g;",
                  "while (es_next_group(&st, &g) == ES_OK) {",
                  "    compute_group(g.group, feats);      /* g.dim floats, the group's columns */",
                  "    es_push(&st, g.group, feats, g.dim);",
                  "}",
                  "/* any time, even in an interrupt: */ es_current(&st, out, &stage, &label);", ""]
    lines += ["```", "", "`examples/main.c` runs the model on one embedded row and prints the committed "
              "prediction after every push.", "",
              "## Using the folder", "",
              f"- CMake (also Zephyr, ESP-IDF, Pico SDK, STM32Cube): `add_subdirectory(<folder>)`, then "
              f"`target_link_libraries(app PRIVATE {library_name(prefix)})`.",
              "- PlatformIO: put the folder in `lib/` (`library.json`).",
              "- Arduino: put the folder in `libraries/` (`library.properties`, sources in `src/`).",
              f"- Zephyr module: list the folder in `ZEPHYR_EXTRA_MODULES` and set `CONFIG_EDGESEQ_{prefix.upper()}=y`.",
              "", "## Files (sha256)", "", "| file | sha256 |", "|---|---|"]
    lines += [f"| {name} | `{digest}` |" for name, digest in sorted(sums.items())]
    return "\n".join(lines) + "\n"


def _is_bundle(out: Path) -> str | None:
    """Why `out` is not an earlier bundle --force may replace (None when it is one)."""
    try:
        index = json.loads((out / BUNDLE_INDEX).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"has no readable {BUNDLE_INDEX}"
    if not isinstance(index, dict) or index.get("format") != BUNDLE_FORMAT or not isinstance(index.get("files"), dict):
        return f'has a {BUNDLE_INDEX} without "format": "{BUNDLE_FORMAT}"'
    listed = set(index["files"]) | {BUNDLE_INDEX}
    for root, dirs, files in os.walk(out):
        for f in files:
            rel = Path(root, f).relative_to(out).as_posix()
            if rel not in listed:
                return f"holds {rel}, which its {BUNDLE_INDEX} does not list"
    return None


def write_firmware_bundle(export_dir, out_dir, *, force: bool = False, measure: bool = True) -> dict:
    """Write the drop-in firmware library for the export in `export_dir` to `out_dir`, atomically.

    Parameters
    ----------
    export_dir : str or path-like
        An ``edgeseq export`` directory; verified in full (schema, checksums, no extra files) first.
    out_dir : str or path-like
        Where the library folder appears (written beside it, then renamed into place).
    force : bool, default=False
        Replace `out_dir` when it is an earlier bundle (never any other non-empty directory).
    measure : bool, default=True
        Measure flash with arm-none-eabi-gcc/-size when they are installed; the model card says
        "not measured" otherwise.

    Returns
    -------
    dict
        The bundle index (``bundle.json``): format, prefix, dtype, edgeseq version, sizes (or None)
        and the sha256 of every file.

    Raises
    ------
    IntegrityError
        The export fails verification.
    ExportError
        The export has no C model, or `out_dir` is non-empty and not replaceable.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from pathlib import Path
    >>> from edgeseq import AnytimeRegressor
    >>> from edgeseq.export.writer import export_model
    >>> from edgeseq.export.firmware_bundle import write_firmware_bundle
    >>> X = np.random.default_rng(0).normal(size=(60, 3))
    >>> est = AnytimeRegressor(groups=[[0], [1, 2]], costs=[1.0, 2.0]).fit(X, X[:, 0])
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = export_model(est.fitted_sequence_, root / "exp", c_prefix="demo")
    >>> index = write_firmware_bundle(root / "exp", root / "lib", measure=False)
    >>> sorted(p for p in index["files"] if p.startswith("src/"))
    ['src/edgeseq_layers.h', 'src/edgeseq_layers_run.h', 'src/edgeseq_model.c', 'src/edgeseq_model.h', 'src/edgeseq_runtime.c', 'src/edgeseq_runtime.h', 'src/edgeseq_select.h', 'src/edgeseq_seqlock.h']
    >>> (root / "lib" / "CMakeLists.txt").is_file(), index["dtype"]
    (True, 'float32')
    """
    from edgeseq import __version__
    from edgeseq.export.c_harness import runtime_dir

    from edgeseq.export.writer import _write_atomically

    export_dir = Path(export_dir)
    manifest = read_verified(export_dir)
    model_files = _verified_c_files(export_dir, manifest)
    dtype = c_dtype(manifest)
    prefix = manifest["c"]["prefix"]
    runtime = INT16_RUNTIME if dtype == "int16" else FLOAT_RUNTIME
    files = {f"src/{name}": data for name, data in model_files.items()}
    rdir = runtime_dir()
    for name in runtime:
        files[f"src/{name}"] = (rdir / name).read_bytes()
    sources = sorted(Path(f).name for f in files if f.endswith(".c"))
    files["examples/main.c"] = example_source(manifest).encode()
    name = library_name(prefix)
    files["CMakeLists.txt"] = _cmake(name, sources, dtype != "int16").encode()
    files["library.json"] = _library_json(name, manifest, __version__).encode()
    files["library.properties"] = _library_properties(name, manifest, __version__).encode()
    files.update({k: v.encode() for k, v in _zephyr_files(prefix, sources).items()})

    def write(tmp: Path) -> dict:
        for rel, data in files.items():
            atomic_write_bytes(tmp / rel, data, make_parents=True)
        sizes = measure_arm_size(tmp / "src", sources, prefix) if measure else None
        sums = {rel: _sha(data) for rel, data in files.items()}
        readme = _readme(manifest, prefix, dtype, sizes, __version__, sums,
                         model_files[manifest["c"]["header"]].decode("ascii", "replace")).encode()
        atomic_write_bytes(tmp / "README.md", readme)
        sums["README.md"] = _sha(readme)
        index = {"format": BUNDLE_FORMAT, "edgeseq_version": __version__, "prefix": prefix, "library": name,
                 "dtype": dtype, "model_name": manifest["model_name"],
                 "export_manifest_sha256": manifest["manifest_sha256"],
                 "sizes": sizes, "files": dict(sorted(sums.items()))}
        atomic_write_bytes(tmp / BUNDLE_INDEX, (json.dumps(index, indent=2, sort_keys=True) + "\n").encode())
        return index

    index = _write_atomically(Path(out_dir).absolute(), force, write, _is_bundle, "bundle")
    return index
