"""onnxruntime sessions for prefix graphs: single-threaded, created once, called on the fastest path.

Latency on a device matters more than throughput, and a runtime that spins up thread pools per
session competes with the feature extractors for the cores. So every session is single-threaded
(intra/inter-op threads 1, sequential execution, no spinning). The call path is
IO binding for small batches and for a joined linear graph's transposed input up to 4 MB (see
`PrefixRunner`), and otherwise the compiled session's `run` (what
`InferenceSession.run` calls after re-validating its arguments, which we validated once at load
time) with a pre-built output-name list. The compiled session is onnxruntime's private attribute, so
it is reached in one place, `session_calls`, which falls back to the public methods; what it saves
per call is measured by bench/ort_private_call.py (see the benchmarks page).
"""

from __future__ import annotations

import math
import re
import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort

from edgeseq.errors import EdgeseqError, IntegrityError
from edgeseq.format import PREFIX0_INPUT  # float32 [N, 1] ([N, 0] in format 1): carries the batch size
from edgeseq.messages import clip

# a C++ source location and function signature onnxruntime puts in its messages ("/src/x.h:624 void
# f(...) const [with T = float] "): meaningless to a user, and long
_CPP_SIGNATURE = re.compile(r"\S+\.(?:h|hpp|cc|cpp|cu):\d+ .*?(?:\]|\)(?: const)?) (?=[A-Z])")
_ORT_PREFIX = re.compile(r"\[ONNXRuntimeError\] : \d+ : \w+ : ")


def _run_failure(where: str, exc: Exception) -> Exception:
    """What a failed run raises: our own errors as they are, onnxruntime's as `ort_error`."""
    return exc if isinstance(exc, EdgeseqError) else ort_error(where, "run", exc)


def ort_error(where: str, what: str, exc: BaseException) -> IntegrityError:
    """One line for any onnxruntime failure: where, what failed, and onnxruntime's reason without the C++.

    Every session edgeseq creates or runs goes through this module, so this is the one place an
    onnxruntime exception (RuntimeError, its own Fail/InvalidArgument classes, multi-line C++
    signatures) becomes an edgeseq error.

    Examples
    --------
    >>> e = ort_error("prefix_001.onnx", "run", RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : "
    ...     "Non-zero status. /src/tree.h:624 void f(int) const [with T = float] One path requests feature 7\\n"))
    >>> str(e)
    'prefix_001.onnx: onnxruntime cannot run it (Non-zero status. One path requests feature 7)'
    """
    text = _ORT_PREFIX.sub("", " ".join(str(exc).split()))
    return IntegrityError(f"{where}: onnxruntime cannot {what} it ({clip(_CPP_SIGNATURE.sub('', text), 240)})")


def session_options() -> ort.SessionOptions:
    """Options for low-latency single-threaded inference (shared with the benchmark's bare baseline).

    One thread and no spinning: on a device the feature extractors need the other cores more than
    a tiny linear graph does.

    Examples
    --------
    >>> so = session_options()
    >>> so.intra_op_num_threads, so.inter_op_num_threads
    (1, 1)
    >>> so.get_session_config_entry("session.intra_op.allow_spinning")
    '0'
    """
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    so.log_severity_level = 3
    return so


def load_verified_bytes(path: Path, sha256: str) -> bytes:
    """The file's bytes, re-checked against the manifest, so the graph we run is the one verified.

    Closes the window between `read_verified` hashing a file and onnxruntime loading it.

    Raises
    ------
    IntegrityError
        When the bytes no longer match `sha256`.

    Examples
    --------
    >>> import hashlib, tempfile
    >>> from pathlib import Path
    >>> p = Path(tempfile.mkdtemp()) / "g.onnx"
    >>> _ = p.write_bytes(b"graph")
    >>> load_verified_bytes(p, hashlib.sha256(b"graph").hexdigest())
    b'graph'
    >>> _ = p.write_bytes(b"graph, edited")
    >>> load_verified_bytes(p, hashlib.sha256(b"graph").hexdigest())
    Traceback (most recent call last):
    ...
    edgeseq.errors.IntegrityError: ...sha256 changed after verification...
    """
    data = Path(path).read_bytes()
    import hashlib  # at load time, not import time

    if hashlib.sha256(data).hexdigest() != sha256:
        raise IntegrityError(f"{path}: sha256 changed after verification (modified while loading)")
    return data


def session_calls(session, private: bool = True) -> tuple:
    """``(run, run_bound, private_used)``: the two calls a runner makes on an onnxruntime session.

    ``run(output_names, feeds, None)`` and ``run_bound(binding, None)`` behave as the session's public
    `run` and `run_with_iobinding`. The public methods re-validate names and feeds on every call, which
    a runner has done once at load; the compiled session behind them (``session._sess``, not public
    onnxruntime API) takes the same calls without that. It is used when `private` and when it has
    both methods with the expected names; otherwise (an onnxruntime that renamed it, or
    ``private=False``) the public methods are, with the same results. `private_used` says which:
    a binding then passes its ``_iobinding`` (private) or itself (public) to `run_bound`.

    Examples
    --------
    >>> import numpy as np
    >>> est, X, out, p = toy_prefix(2)  # toy_export() (float32 rows) and prefix 2's manifest entry
    >>> sess = ort.InferenceSession(str(out / p["file"]), providers=["CPUExecutionProvider"])
    >>> feeds = dict(zip(p["inputs"], [X[:3, [0]], X[:3, 1:]]))
    >>> fast, _, used = session_calls(sess)
    >>> public, _, unused = session_calls(sess, private=False)
    >>> used, unused, bool(np.array_equal(fast(["y"], feeds, None)[0], public(["y"], feeds, None)[0]))
    (True, False, True)
    """
    inner = getattr(session, "_sess", None) if private else None
    if inner is not None and callable(getattr(inner, "run", None)) \
            and callable(getattr(inner, "run_with_iobinding", None)):
        return inner.run, inner.run_with_iobinding, True
    return (lambda names, feeds, _opts: session.run(names, feeds),
            lambda binding, _opts: session.run_with_iobinding(binding), False)


BIND_MAX_ROWS = 64  # IO binding for batches up to this size (the latency regime); plain run above
_BIND_CACHE = 4     # batch sizes kept bound per prefix
_BIND_MAX_FLOATS = 1 << 20  # `call_transposed` binds inputs up to this size (4 MB), whatever the rows
# from this many input values (64 kB of float32) a `bind_large` runner binds the caller's array itself:
# in-process A/B on 30 columns, binding vs copying into the bound buffer, was 3-19% slower at 100 rows,
# even at 1,000 rows (0.95-1.01x) and 9-29% faster at 5,000
_IN_PLACE_MIN_FLOATS = 1 << 14


def _aligned_empty(shape, dtype, align: int = 64) -> np.ndarray:
    """An uninitialised array whose data starts on a cache-line boundary (numpy only guarantees 16
    bytes), so the kernels reading the bound buffers see the same alignment in every process."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(n + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + n].view(dtype).reshape(shape)


_concat = np.concatenate  # (a local name: one attribute lookup less per call)

_SUM_MAX = 8  # up to this many values a Python float sum is the cheapest finiteness test


def all_finite(y: np.ndarray) -> bool:
    """True when every value of float32 `y` is finite.

    Up to `_SUM_MAX` values: the float64 sum of the values as Python floats (it cannot overflow, so
    it is finite exactly when every value is), several times cheaper than numpy's ufunc + reduction
    machinery on a handful of values.

    Examples
    --------
    >>> import numpy as np
    >>> big = np.float32(3e38)
    >>> all_finite(np.array([big, big], np.float32))         # the sum overflows float32, not float64
    True
    >>> all_finite(np.array([1, np.nan], np.float32)), all_finite(np.ones(100, np.float32))
    (False, True)
    """
    if y.size <= _SUM_MAX:
        return math.isfinite(sum(y.ravel().tolist()))
    return bool(np.isfinite(y).all())


def _finite_test(buf: np.ndarray):
    """`all_finite` of a fixed buffer as a zero-argument callable, for the bound outputs.

    Above `_SUM_MAX` values: `isfinite` into a bool buffer made once, whose bytes are compared with
    all-ones — a quarter of the cost of `.all()`, whose reduction machinery dominates at these sizes
    (and unlike arithmetic tricks such as a dot product with zeros, `isfinite` raises no
    floating-point warning for NaN/Inf under any `np.seterr`)."""
    flat = buf.reshape(-1)  # a view: bound buffers are contiguous
    isfinite = math.isfinite
    if flat.size <= _SUM_MAX:
        tolist = flat.tolist
        return lambda: isfinite(sum(tolist()))
    flags = np.empty(flat.size, np.bool_)
    ufunc, as_bytes, all_true = np.isfinite, flags.tobytes, b"\x01" * flat.size

    def finite() -> bool:
        ufunc(flat, flags)
        return as_bytes() == all_true
    return finite


class _Binding:
    """One prefix's IO binding for one batch size: our own input and output buffers, bound once.

    `views` are what a call returns copies of (the first output as (n,) when squeezed, its second
    column when `signed`); `finite` tests the first output buffer. A `transposed` graph's input
    buffer is (d, n)."""

    def __init__(self, session, inputs: list[str], dims: list[int], outputs: list, n: int,
                 inner: bool, squeeze: bool, signed: bool = False, transposed: bool = False,
                 in_types: list | None = None):
        in_types = in_types or [np.float32] * len(dims)
        self.io = session.io_binding()
        self.arg = self.io._iobinding if inner else self.io  # what the run call takes
        self.inputs = [_aligned_empty((d, n) if transposed else (n, d), t) for d, t in zip(dims, in_types)]
        for name, buf in zip(inputs, self.inputs):
            self.io.bind_cpu_input(name, buf)
        # `PrefixRunner.call` may bind a caller's large array instead (one pybind call, no copy): `own`
        # says whether our input buffer is the one bound, and `bind_own` binds it back
        self.own, self.first_input = True, inputs[0] if inputs else None
        self.bind_in = self.io._iobinding.bind_input if inner else self.io.bind_cpu_input
        self.outputs = [_aligned_empty((n, *shape), dtype) for _, shape, dtype in outputs]
        for (name, _, _), buf in zip(outputs, self.outputs):
            self.io.bind_output(name, "cpu", 0, buf.dtype.type, list(buf.shape), buf.ctypes.data)
        first = self.outputs[0]
        self.views = [first[:, 0] if squeeze else first[:, 1:] if signed else first, *self.outputs[1:]]
        self.finite = _finite_test(self.outputs[0])
        self.input_finite = _finite_test(self.inputs[0])
        self.result = _copier(self.views, self.finite)
        self.copy_run = self.join_run = None  # set by `prepare`

    def prepare(self, run) -> "_Binding":
        """Make `copy_run` and `join_run`, the two ways a call runs these buffers through `run` (the
        session's ``run_bound``, `session_calls`); returns self.

        Both are closures over the buffers, so that a call per row pays no attribute look-ups: at one
        row those cost as much as onnxruntime's own run (bench/peers.py, the Python table).
        ``copy_run(arrays)`` copies each array into its input buffer (same shapes and dtypes: the
        caller checked), runs, and returns `result`. ``join_run(parts, axis, check_input)`` writes
        `parts` side by side along `axis` of the one input buffer (`PrefixRunner.call_joined`), runs,
        and returns `result`, whose flag with `check_input` also says whether that input is all
        finite."""
        bufs, arg, result, input_finite = self.inputs, self.arg, self.result, self.input_finite
        first = bufs[0] if len(bufs) == 1 else None
        binding = self

        def copy_run(arrays):
            if not binding.own:  # (a caller's array was bound last: our buffer again)
                binding.bind_own()
            if first is not None:
                first[...] = arrays[0]
            else:
                for buf, a in zip(bufs, arrays):
                    buf[...] = a
            run(arg, None)
            return result()

        def join_run(parts, axis, check_input):
            if not binding.own:
                binding.bind_own()
            _concat(parts, axis, first)
            run(arg, None)
            outs, finite = result()
            return outs, finite and (not check_input or input_finite())

        self.copy_run, self.join_run = copy_run, join_run
        return self

    def bind_own(self) -> None:
        """Bind our input buffer again after a caller's array was bound in its place."""
        self.bind_in(self.first_input, self.inputs[0])
        self.own = True


def _copier(views: list[np.ndarray], finite):
    """``result()``: copies of `views` (the outputs of the run just made, as a list) and ``finite()``,
    written out for one to three outputs (every graph the runtime builds): a list display of bound
    methods costs less per call than a comprehension over the views."""
    if len(views) == 1:
        c0 = views[0].copy
        return lambda: ([c0()], finite())
    if len(views) == 2:
        c0, c1 = (v.copy for v in views)
        return lambda: ([c0(), c1()], finite())
    if len(views) == 3:
        c0, c1, c2 = (v.copy for v in views)
        return lambda: ([c0(), c1(), c2()], finite())
    copies = [v.copy for v in views]
    return lambda: ([c() for c in copies], finite())


class PrefixRunner:
    """One prefix graph: its session, its input order and the outputs we read (`y` always first).

    Small batches go through IO binding: the caller's arrays are copied into buffers bound once per
    batch size, the graph writes into bound output buffers, and the caller gets copies. That
    measured faster than `run` even with both copies (bench/python_runtime_speed.py), because `run`
    wraps every input and output in new OrtValues on every call. The buffers make a runner stateful,
    so they are guarded by a lock; a call that finds it taken (another thread) takes `run` instead
    of waiting. With `squeeze`, the first output (one column) is returned as (N,). With `signed`, the
    first output is a joined sigmoid graph's ``[-y, y]`` (`edgeseq.runtime.fuse.SIGNED_LOGITS`) and
    ``y``, its second column, is returned. With `transposed`, the graph's one input is [d, N] and the
    runner is called by `call_transposed` only. With `bind_large`, `call` binds batches up to 4 MB of
    input too, not only up to `BIND_MAX_ROWS` rows (`ExportedModel.predict` on a feature matrix:
    one input, copied once into its buffer, and onnxruntime then allocates nothing per call); from
    `_IN_PLACE_MIN_FLOATS` values a C-contiguous input of the graph's dtype is bound itself instead
    (no copy; our buffer is bound back before the next copy into it).

    Raises
    ------
    IntegrityError
        When the bytes are not a loadable graph, or its inputs/outputs differ from the manifest's.

    Examples
    --------
    >>> import numpy as np
    >>> est, X, out, p = toy_prefix(2)  # toy_export() (float32 rows) and prefix 2's manifest entry
    >>> runner = PrefixRunner(load_verified_bytes(out / p["file"], p["sha256"]), p["inputs"], ["y"],
    ...                       p["file"], squeeze=True)
    >>> (y,), finite = runner.run([X[:5, [0]], X[:5, 1:]])
    >>> finite, bool(np.allclose(y, est.predict(X[:5]), atol=1e-4))
    (True, True)
    """

    joined = False  # True for a joined graph (`edgeseq.runtime.fuse`): called by `call_joined`
    check_inputs = False  # `call_joined` also reports a non-finite input (a graph without a guard)
    wide = None  # a runner of the same graph taking its input transposed, for batches above BIND_MAX_ROWS

    def __init__(self, model_bytes: bytes, inputs: list[str], outputs: list[str], where: str,
                 squeeze: bool = False, transposed: bool = False, signed: bool = False, bind_large: bool = False):
        try:
            self.session = ort.InferenceSession(model_bytes, sess_options=session_options(),
                                                providers=["CPUExecutionProvider"])
        except Exception as exc:  # a listed, checksummed file that still is not a loadable graph
            raise ort_error(where, "load", exc) from None
        self._where = where
        got = {i.name: i for i in self.session.get_inputs()}
        if list(got) != list(inputs):
            raise IntegrityError(f"{where}: graph inputs {list(got)} differ from the manifest's {list(inputs)}")
        have = {o.name: o for o in self.session.get_outputs()}
        if not set(outputs) <= set(have):
            raise IntegrityError(f"{where}: graph lacks output(s) {sorted(set(outputs) - set(have))}")
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self._dims = [int(got[n].shape[0 if transposed else 1]) for n in inputs]  # (transposed: `call_transposed`)
        self._in_types = [np.float64 if got[n].type == "tensor(double)" else np.float32 for n in inputs]
        first = got[inputs[0]].shape[1 if transposed else 0]
        self.batch = first if isinstance(first, int) else None  # an export with --batch-size: fixed rows
        self._out_spec = [(n, tuple(int(d) for d in have[n].shape[1:]),
                           np.int64 if have[n].type == "tensor(int64)" else np.float32) for n in outputs]
        if squeeze and self._out_spec[0][1] != (1,):
            raise IntegrityError(f"{where}: output {outputs[0]!r} has shape {have[outputs[0]].shape}, "
                                 f"not one column as the manifest's 1-D target says")
        self._squeeze = squeeze
        self._signed = signed
        self._transposed = transposed
        self._run, self._run_io, self._inner = session_calls(self.session)
        self._bindings: dict[int, _Binding] = {}
        self._lock = threading.Lock()
        self._bind_rows = max(BIND_MAX_ROWS, _BIND_MAX_FLOATS // max(sum(self._dims), 1)) if bind_large \
            else BIND_MAX_ROWS  # `call` binds batches up to this size
        # with `bind_large`, a batch of at least `_IN_PLACE_MIN_FLOATS` input values, C-contiguous and of
        # the graph's dtype, is bound where it lies instead of copied: rows from which binding costs
        # less than the copy (below, the copy into the buffer bound once is the cheaper)
        self._in_place_rows = -(-_IN_PLACE_MIN_FLOATS // max(sum(self._dims), 1)) \
            if bind_large and len(inputs) == 1 else 1 << 62

    def call(self, arrays: list[np.ndarray], n: int) -> tuple[list[np.ndarray], bool]:
        """Outputs for float32 (n, d_g) arrays in input order, and whether the first is all finite.

        The caller has already checked shapes and dtype (`ExportedModel.predict`); nothing is
        re-checked here, which is what makes the call cheap.

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out, p = toy_prefix(2)  # toy_export() (float32 rows) and prefix 2's manifest entry
        >>> runner = PrefixRunner(load_verified_bytes(out / p["file"], p["sha256"]), p["inputs"], ["y"],
        ...                       p["file"], squeeze=True)
        >>> (y,), finite = runner.call([X[:3, [0]], X[:3, 1:]], 3)
        >>> y.shape, finite, bool(np.allclose(y, est.predict(X[:3]), atol=1e-4))
        ((3,), True, True)
        >>> (big,), _ = runner.call([X[:100, [0]], X[:100, 1:]], 100)   # above BIND_MAX_ROWS: plain run
        >>> bool(np.allclose(big[:3], y))
        True
        """
        if self.batch is not None and n != self.batch:
            return self._call_in_batches(arrays, n)
        try:
            if n <= self._bind_rows and self._lock.acquire(False):  # (non-blocking)
                try:
                    b = self._bindings.get(n) or self._bind(n)
                    if n >= self._in_place_rows and arrays[0].flags.c_contiguous \
                            and arrays[0].dtype == b.inputs[0].dtype:
                        b.bind_in(self.inputs[0], arrays[0])  # read in place (rebound on every call)
                        b.own = False
                        self._run_io(b.arg, None)
                        return b.result()
                    return b.copy_run(arrays)  # a plain copy into our buffers, the run, copies out
                finally:
                    self._lock.release()
            outs = self._squeezed(self._run(self.outputs, dict(zip(self.inputs, map(np.ascontiguousarray, arrays))),
                                            None))
        except Exception as exc:  # a verified graph that onnxruntime still fails on (e.g. a crafted feature id)
            raise _run_failure(self._where, exc) from None
        return outs, all_finite(outs[0])

    def one_input_call(self, then, check_input: bool = False):
        """`call` of a one-input graph as a function ``(x, n, source=None) -> then(outputs, finite, x)``
        for x of n rows (``source`` instead of x when given: the array x was converted from, which the
        caller's error names).

        Up to the runner's bound size (`BIND_MAX_ROWS` rows, or 4 MB of input with ``bind_large``) and
        below its in-place size, the function goes straight to the bound buffers'
        `_Binding.copy_run`, with everything it needs bound in its closure, and hands the
        result to `then` (the caller's formatting): what `ExportedModel.predict` calls per row on a
        feature matrix, where each attribute look-up and call layer of `call` is a measurable share of
        a few microseconds. Other sizes, a busy lock (another thread) and fixed-batch graphs take
        `call`: the same answers either way. With `check_input`, ``finite`` is also False for a
        non-finite x (a graph whose output need not be NaN for a NaN input: a tree node).

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out, p = toy_prefix(1)  # prefix 1 reads one input: group "a", column 0
        >>> runner = PrefixRunner(load_verified_bytes(out / p["file"], p["sha256"]), p["inputs"], ["y"],
        ...                       p["file"], squeeze=True)
        >>> fast = runner.one_input_call(lambda outs, finite, x: (outs[0], finite))
        >>> y, finite = fast(X[:3, [0]], 3)
        >>> finite, bool(np.array_equal(y, runner.call([X[:3, [0]]], 3)[0][0]))
        (True, True)
        """
        call = self.call

        def slow(x: np.ndarray, n: int, source: np.ndarray | None = None):
            outs, finite = call([x], n)
            return then(outs, finite and (not check_input or all_finite(x)), x if source is None else source)
        if self.batch is not None or len(self.inputs) != 1:
            return slow
        acquire, release, bindings, bind = self._lock.acquire, self._lock.release, self._bindings, self._bind
        rows, where, runner = self._bind_rows, self._where, self

        def fast(x: np.ndarray, n: int, source: np.ndarray | None = None):
            if n <= rows and n < runner._in_place_rows and acquire(False):  # (in place: `call`)
                try:
                    b = bindings.get(n) or bind(n)
                    outs, finite = b.copy_run((x,))
                    if check_input and finite:
                        finite = b.input_finite()
                except Exception as exc:
                    raise _run_failure(where, exc) from None
                finally:
                    release()
                return then(outs, finite, x if source is None else source)
            return slow(x, n, source)
        return fast

    def call_joined(self, arrays: list[np.ndarray], n: int) -> tuple[list[np.ndarray], bool]:
        """`call` for a graph of one input that is `arrays` side by side (`edgeseq.runtime.fuse`'s
        joined graphs): they are written straight into the bound input buffer, so joining costs one
        copy, as feeding them separately would. With `check_inputs` (a graph whose ``y`` need not be
        NaN for a NaN input: joined tree stages), a non-finite input also makes the flag False.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.runtime.fuse import joined_prefix
        >>> est, X, out, p = toy_prefix(2)  # toy_export() (float32 rows) and prefix 2's manifest entry
        >>> model, name = joined_prefix(load_verified_bytes(out / p["file"], p["sha256"]))
        >>> runner = PrefixRunner(model, [name], ["y"], p["file"], squeeze=True)
        >>> (y,), finite = runner.call_joined([X[:3, [0]], X[:3, 1:]], 3)
        >>> finite, bool(np.allclose(y, est.predict(X[:3]), atol=1e-4))
        (True, True)
        """
        if n <= BIND_MAX_ROWS and self.batch is None:
            got = self._joined_bound(arrays, 1, n)
            if got is not None:
                return got
        if self.wide is not None and self.batch is None and n > BIND_MAX_ROWS:  # (a small batch whose
            return self.wide.call_transposed(arrays, n)  # binding is busy: this graph, as rounded alone)
        x = _concat(arrays, 1)
        outs, finite = self.call([x], n)
        return outs, finite and (not self.check_inputs or all_finite(x))

    def call_transposed(self, arrays: list[np.ndarray], n: int) -> tuple[list[np.ndarray], bool]:
        """`call_joined` for a graph that takes the joined input transposed, [d, N]
        (`joined_prefix(..., transposed=True)`): each (n, d_g) array is written as d_g rows, in one
        `np.concatenate` of the transposed views, a copy numpy does several times faster than
        placing narrow columns side by side. Up to `_BIND_MAX_FLOATS` input values it is IO-bound
        like a small batch in `call` (buffers kept per batch size, outputs copied out): onnxruntime
        then allocates nothing per call, which measured faster at 1,000 rows too.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.runtime.fuse import joined_prefix
        >>> est, X, out, p = toy_prefix(2)  # toy_export() (float32 rows) and prefix 2's manifest entry
        >>> model, name = joined_prefix(load_verified_bytes(out / p["file"], p["sha256"]), transposed=True)
        >>> runner = PrefixRunner(model, [name], ["y"], p["file"], squeeze=True, transposed=True)
        >>> (y,), finite = runner.call_transposed([X[:, [0]], X[:, 1:]], len(X))
        >>> finite, bool(np.allclose(y, est.predict(X), atol=1e-4))
        (True, True)
        """
        if n * self._dims[0] <= _BIND_MAX_FLOATS and self.batch is None:
            got = self._joined_bound([a.T for a in arrays], 0, n)
            if got is not None:
                return got
        x = _concat([a.T for a in arrays], 0, np.empty((self._dims[0], n), np.float32))
        try:
            outs = self._run(self.outputs, {self.inputs[0]: x}, None)
        except Exception as exc:
            raise ort_error(self._where, "run", exc) from None
        finite = all_finite(outs[0]) and (not self.check_inputs or all_finite(x))  # (contiguous: before squeezing)
        return self._squeezed(outs), finite

    def _joined_bound(self, parts: list[np.ndarray], axis: int, n: int):
        """(outputs, finite) of one run on the bound buffers for n rows, `parts` written side by side
        along `axis` of the one input buffer (kept per batch size: nothing is allocated per call), or
        None when another thread holds the buffers."""
        if not self._lock.acquire(False):
            return None
        try:
            return (self._bindings.get(n) or self._bind(n)).join_run(parts, axis, self.check_inputs)
        except Exception as exc:
            raise ort_error(self._where, "run", exc) from None
        finally:
            self._lock.release()

    def run(self, arrays: list[np.ndarray]) -> tuple[list[np.ndarray], bool]:
        """`call` for float32 (N, d_g) arrays in input order (prefix 0: pass an empty list).

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out, p = toy_prefix(2)  # toy_export() (float32 rows) and prefix 2's manifest entry
        >>> runner = PrefixRunner(load_verified_bytes(out / p["file"], p["sha256"]), p["inputs"], ["y"],
        ...                       p["file"], squeeze=True)
        >>> (y,), finite = runner.run([X[:1, [0]], X[:1, 1:]])
        >>> y.shape, finite
        ((1,), True)
        """
        if not arrays:
            outs = self.run_rows(1)
            return outs, all_finite(outs[0])
        return self.call(arrays, arrays[0].shape[0])

    def run_rows(self, n: int) -> list[np.ndarray]:
        """Prefix 0 for n rows (its only input carries the batch size).

        Examples
        --------
        >>> import numpy as np
        >>> est, X, out, p = toy_prefix(0)  # toy_export() (float32 rows) and prefix 0's manifest entry
        >>> runner = PrefixRunner(load_verified_bytes(out / p["file"], p["sha256"]), p["inputs"], ["y"],
        ...                       p["file"], squeeze=True)
        >>> (y,) = runner.run_rows(4)
        >>> y.shape, bool(np.allclose(y, est.predict(X[:4], prefix=0), atol=1e-5))   # the prior, 4 times
        ((4,), True)
        """
        width = self._dims[0]  # 1, or 0 in a format 1 export: the graph says which
        rows = n if self.batch is None else self.batch
        try:
            outs = self._squeezed(self._run(self.outputs, {PREFIX0_INPUT: np.zeros((rows, width), np.float32)}, None))
        except Exception as exc:
            raise ort_error(self._where, "run", exc) from None
        return outs if rows == n else [np.repeat(o[:1], n, axis=0) for o in outs]  # the same row for all

    def _call_in_batches(self, arrays: list[np.ndarray], n: int) -> tuple[list[np.ndarray], bool]:
        """A graph with a fixed batch size B: run the rows B at a time, the last batch padded with zero
        rows whose outputs are dropped (rows are independent, so padding changes no kept value)."""
        B, parts = self.batch, []
        for start in range(0, max(n, 1), B):
            chunk = [a[start:start + B] for a in arrays]
            m = chunk[0].shape[0]
            if m < B:
                chunk = [np.concatenate([c, np.zeros((B - m, c.shape[1]), np.float32)]) for c in chunk]
            outs, _ = self.call(chunk, B)
            parts.append([o[:m] for o in outs])
        outs = [np.concatenate(p) for p in zip(*parts)]
        return outs, all_finite(outs[0])

    def _squeezed(self, outs: list[np.ndarray]) -> list[np.ndarray]:
        if self._squeeze:
            outs[0] = outs[0][:, 0]
        elif self._signed:
            outs[0] = outs[0][:, 1:]
        return outs

    def _bind(self, n: int) -> _Binding:
        if len(self._bindings) >= _BIND_CACHE:
            self._bindings.pop(next(iter(self._bindings)))
        b = self._bindings[n] = _Binding(self.session, self.inputs, self._dims, self._out_spec, n,
                                         self._inner, self._squeeze, self._signed, self._transposed,
                                         self._in_types).prepare(self._run_io)
        return b
