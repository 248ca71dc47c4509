"""Compile a generated layer-block C model with the runtime and run it from Python.

Used by the C tests and by `edgeseq verify` for layer-block exports: a real compiler builds
`runtime_c/edgeseq_runtime.c` + `edgeseq_model.c` + `runtime_c/tests/driver_layers.c`, which runs the
firmware loop (es_next, es_push, es_step) and prints every stage's exit with ``%.9g`` (exact for
float32); this module parses the lines back. Rows are given as the model's raw columns; they are
reordered here into what the C runtime takes (`c_layer_blocks.layer_block_feature_order`: groups in
sequence order, windowed groups time-major).
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgeseq.errors import CCompilerError
from edgeseq.format import C_SOURCE
from edgeseq.export.c_harness import STRICT_FLAGS, compile_c, model_prefix, runtime_dir, write_budgets
from edgeseq.export.kinds.layer_blocks.c_float import layer_block_feature_order, write_c_layer_blocks


@dataclass
class LayerRun:
    """What the C runtime did on each row.

    Attributes
    ----------
    z : list of ndarray
        ``z[k]`` (n, n_outputs): stage k's exit before the link (index 0: the prior, NaN: not printed).
    pred, label, prefix : list of ndarray
        After es_step ran stage k: the committed prediction (n, n_pred), its label (n,) and its stage
        (n,) -- for a ``commit: false`` stage that of the last committing stage before it.
    push_prefix : ndarray of shape (n, n_groups)
        The committed stage right after each push (a push never commits).

    Examples
    --------
    >>> import numpy as np
    >>> run = LayerRun(z=[np.zeros((1, 1))], pred=[], label=[], prefix=[], push_prefix=np.zeros((1, 0)))
    >>> run.z[0].shape
    (1, 1)
    """

    z: list
    pred: list
    label: list
    prefix: list
    push_prefix: np.ndarray


def build_layer_driver(model_dir, build_dir, *, compiler=None, flags=STRICT_FLAGS, extra=("-O2",)) -> Path:
    """Build runtime + model + tests/driver_layers.c into build_dir/driver_layers and return its path.

    Examples
    --------
    >>> import tempfile
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> d = tempfile.mkdtemp()
    >>> _ = write_c_layer_blocks(_example_model(), d, "demo")
    >>> build_layer_driver(d, d, extra=("-O0",)).name
    'driver_layers'
    """
    model_dir, rdir = Path(model_dir), runtime_dir()
    return compile_c([rdir / "edgeseq_runtime.c", model_dir / C_SOURCE, rdir / "tests" / "driver_layers.c"],
                     Path(build_dir) / "driver_layers", include_dirs=[model_dir, rdir],
                     defines=[f"ES_PREFIX={model_prefix(model_dir)}"], compiler=compiler, flags=flags, extra=extra)


def _run(exe: Path, *args) -> list:
    proc = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or not lines or lines[-1] != "done":
        raise CCompilerError(f"the C driver failed (exit {proc.returncode}): {proc.stderr.strip()[:500]}")
    return [ln.split() for ln in lines[:-1]]


def _rows(model, X, path: Path) -> int:
    X = np.asarray(X, np.float64)
    np.ascontiguousarray(X[:, layer_block_feature_order(model)], dtype=np.float32).tofile(path)
    return X.shape[0]


def run_layer_steps(model, exe, X, work_dir) -> LayerRun:
    """Run driver `exe` (built for `model`) in "steps" mode on rows X (raw columns) and parse it.

    Raises
    ------
    CCompilerError
        The driver failed or a call in it returned an error.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> model, d = _example_model(), tempfile.mkdtemp()
    >>> _ = write_c_layer_blocks(model, d, "demo")
    >>> run = run_layer_steps(model, build_layer_driver(d, d, extra=("-O0",)), np.ones((2, 6)), d)
    >>> bool(np.allclose(run.z[2], model.decision(np.ones((2, 6)), 2), rtol=1e-5))
    True
    """
    path = Path(work_dir) / "rows.bin"
    n = _rows(model, X, path)
    return parse_layer_steps(model, _run(exe, "steps", path), n)


def parse_layer_steps(model, lines: list, n: int) -> LayerRun:
    """The `LayerRun` of the driver's "steps" output (`lines`: its lines split into words, without the
    final "done") for `n` rows; shared by the host run and the emulated Cortex-M run.

    Raises
    ------
    CCompilerError
        When a line reports a refused call.

    Examples
    --------
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> run = parse_layer_steps(_example_model(), [["0", "0", "S", "0", "0", "-1", "0.5", "|"]], 1)
    >>> run.pred[0].tolist(), run.prefix[0].tolist()
    ([[0.5]], [0])
    """
    K, P = len(model.stages), model.n_outputs
    n_pred = 2 if model.link == "sigmoid" else P
    z = [np.full((n, P), np.nan) for _ in range(K)]
    pred = [np.full((n, n_pred), np.nan) for _ in range(K)]
    label, prefix = [np.full(n, -9) for _ in range(K)], [np.full(n, -1) for _ in range(K)]
    n_groups = sum(len(s.new_groups) for s in model.stages)
    pushes = np.full((n, n_groups), -1)
    seen = np.zeros(n, np.int64)
    for parts in lines:
        r = int(parts[0])
        if parts[2] == "E":
            raise CCompilerError(f"the C runtime refused row {r} at action {parts[1]}: status {parts[3]}")
        if parts[2] == "P":
            pushes[r, seen[r]] = int(parts[3])
            seen[r] += 1
            continue
        k, bar = int(parts[3]), parts.index("|")
        prefix[k][r], label[k][r] = int(parts[4]), int(parts[5])
        pred[k][r] = [float(v) for v in parts[6:bar]]
        if k:
            z[k][r] = [float(v) for v in parts[bar + 1:]]
    z[0][:] = model.stages[0].c  # the prior's z is the model's (C's softmax reuses it as scratch)
    return LayerRun(z, pred, label, prefix, pushes)


def run_layer_sweep(model, exe, X, budgets, work_dir) -> tuple:
    """Run driver `exe` in "sweep" mode: per row and budget, the firmware loop under that budget.

    Returns ``(prefix, pred, rule)``: the committed stage (n, B), its prediction (n, B, n_pred) and
    es_prefix_for_budget's answer per budget (B,) (-1 where it returned an error).

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> model, d = _example_model(), tempfile.mkdtemp()
    >>> _ = write_c_layer_blocks(model, d, "demo")
    >>> exe = build_layer_driver(d, d, extra=("-O0",))
    >>> prefix, _, rule = run_layer_sweep(model, exe, np.ones((1, 6)), [0.0, 1.0, 2.9, 3.0], d)
    >>> prefix.tolist(), rule.tolist()
    ([[0, 1, 1, 2]], [0, 1, 1, 2])
    """
    path, bpath = Path(work_dir) / "rows.bin", Path(work_dir) / "budgets.txt"
    n = _rows(model, X, path)
    budgets = np.ravel(np.asarray(budgets, np.float64))
    write_budgets(budgets, bpath)
    n_pred = 2 if model.link == "sigmoid" else model.n_outputs
    prefix = np.full((n, budgets.size), -1)
    pred = np.full((n, budgets.size, n_pred), np.nan)
    rule = np.full(budgets.size, -2)
    for parts in _run(exe, "sweep", path, bpath):
        r, b = int(parts[0]), int(parts[1])
        if parts[2] == "E":
            raise CCompilerError(f"the C runtime refused row {r} under budget {b}: status {parts[3]}")
        bar = parts.index("|")
        prefix[r, b] = int(parts[2])
        pred[r, b] = [float(v) for v in parts[4:bar]]
        rule[b] = int(parts[bar + 2]) if int(parts[bar + 1]) == 0 else -1
    return prefix, pred, rule


def run_c_layer_blocks(model, X, budgets=None, *, compiler=None, flags=STRICT_FLAGS, extra=("-O2",),
                       prefix: str = "chk"):
    """Generate C for `model`, compile it with the driver and run every stage on X (and, with
    `budgets`, the budget sweep). Returns the `LayerRun`, or ``(LayerRun, sweep)`` with budgets.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.forms.layer_blocks import _example_model
    >>> run = run_c_layer_blocks(_example_model(), np.zeros((3, 6)), extra=("-O0",))
    >>> [z.shape for z in run.z]
    [(3, 1), (3, 1), (3, 1)]
    """
    with tempfile.TemporaryDirectory(prefix="edgeseq_layers_") as tmp:
        d = Path(tmp)
        write_c_layer_blocks(model, d, prefix)
        exe = build_layer_driver(d, d, compiler=compiler, flags=flags, extra=extra)
        run = run_layer_steps(model, exe, X, d)
        if budgets is None:
            return run
        return run, run_layer_sweep(model, exe, X, budgets, d)
