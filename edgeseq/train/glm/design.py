"""The GLM working design Z = (X_used − μ) T, read chunk by chunk and never materialised.

A GLM's gradient depends on every row, so each loss/gradient evaluation is a pass over the data. Holding
the whole working design (n × k float64) as well as the user's X doubled the memory before anything
else, and copies of it (selected columns in selection order, a float32 copy) tripled it: at the thesis's
shape that no longer fits on one machine. Here the transform is moved onto the weights instead of the
rows, because T is block diagonal and tiny next to X:

    Z_S W = (X_S − μ_S) (T_S W),        Z_Sᵀ R = T_Sᵀ ((X_S − μ_S)ᵀ R),

so a pass reads, one row chunk at a time, only the raw columns of the selected groups and runs the
forward product, the link and the backward product on that chunk: one pass over the rows per
evaluation, and memory O(chunk) beyond X. The same class wraps an already materialised working design
(`WorkingDesign.from_array`, identity transforms), so small problems and the tests run the same code.

Centring without a copy. Centring every chunk in a buffer cost about 40 % of a pass (a read and a
write of the chunk beside the two products). The centring is moved onto the products instead, as a
rank-one correction: (X_g − 1μ_gᵀ) W_g = X_g W_g − 1 (μ_gᵀ W_g) (a constant added to the intercept)
and (X_g − 1μ_gᵀ)ᵀ R = X_gᵀ R − μ_g (1ᵀR); the products read the raw columns of X in place (a
column slice of a row-major X is a strided view BLAS takes as is), and groups that are neighbours in
X are read as one slice. The correction cancels digits when a column's mean is large against its
spread (relative error ≈ eps·|μ|/σ), so, as in the statistics pass (`chunk_moments.SHIFT_RATIO`), a
group with any column whose mean exceeds SHIFT_RATIO standard deviations is still centred in a
copy, as is a group whose columns are not one run of X (reading it gathers a copy anyway).

Rounding differs from the materialised design ((X T) W against X (T W)) only at the level of
machine precision times the condition of T; the refits stop on a gradient tolerance far above that.
"""

from __future__ import annotations

import numpy as np

from edgeseq.train.linear.basis import WorkingProblem
from edgeseq.train.linear.chunk_moments import SHIFT_RATIO
from edgeseq.train.products import narrow_product, transposed_product

CHUNK_BYTES = 8 * 2**20  # bytes of selected columns per row chunk: small enough to stay in cache between products
MIN_CHUNK_ROWS = 256  # at least this many rows per chunk: fewer, larger products (Python overhead per product)


def _as_index(cols: np.ndarray):
    """A slice when the columns are one increasing run (a strided view, no gather), else the index array."""
    cols = np.asarray(cols, dtype=np.int64)
    if cols.size and np.array_equal(cols, np.arange(cols[0], cols[0] + cols.size)):
        return slice(int(cols[0]), int(cols[0]) + cols.size)
    return cols


class WorkingDesign:
    """Row-chunked access to the working design of a `WorkingProblem` over raw rows X.

    Parameters
    ----------
    X : array (n, D)
        Raw rows (read, never copied whole nor modified).
    used : array of int
        Raw column of every entry of the statistics' column order (group after group).
    prob : WorkingProblem
    chunk_rows : int, optional
        Rows per chunk; by default as many as fit `CHUNK_BYTES` of centred buffer.

    Examples
    --------
    The chunked passes equal products with the materialised design:

    >>> import numpy as np
    >>> from edgeseq.train.linear.basis import build_working_problem
    >>> from edgeseq.train.glm.design import WorkingDesign
    >>> from edgeseq.train.glm.select import working_design
    >>> from edgeseq.train.linear.stats import sufficient_statistics
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 4)) + 100.0; R = rng.normal(size=(50, 2))
    >>> prob = build_working_problem(sufficient_statistics(X, R), [2, 2], whiten=True)
    >>> design = WorkingDesign(X, np.arange(4), prob, chunk_rows=7)
    >>> Z = working_design(X, np.arange(4), prob)
    >>> bool(np.allclose(design.gradient(R), Z.T @ R)), bool(np.allclose(design.columns([1, 0]), Z[:, [2, 3, 0, 1]]))
    (True, True)
    """

    def __init__(self, X, used: np.ndarray, prob: WorkingProblem, chunk_rows: int | None = None):
        used = np.asarray(used, dtype=np.int64)
        blocks = [(_as_index(used[rs]), prob.x_mean[rs], T) for T, rs in zip(prob.transforms, prob.raw_slices)]
        self._init(X, blocks, prob.slices, chunk_rows)
        self.copied = [not isinstance(cols, slice) or bool(np.any(np.abs(prob.x_mean[rs]) > SHIFT_RATIO * prob.x_std[rs]))
                       for (cols, _, _), rs in zip(blocks, prob.raw_slices)]

    @classmethod
    def from_array(cls, Z: np.ndarray, prob: WorkingProblem, chunk_rows: int | None = None) -> WorkingDesign:
        """Wrap a materialised working design (columns already centred and transformed).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.design import WorkingDesign
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> Z = np.random.default_rng(0).normal(size=(10, 3))
        >>> prob = build_working_problem(sufficient_statistics(Z, Z[:, 0]), [1, 2], whiten=False)
        >>> bool(np.array_equal(WorkingDesign.from_array(Z, prob).columns([1]), Z[:, 1:3]))
        True
        """
        self = cls.__new__(cls)
        blocks = [(s, None, None) for s in prob.slices]
        self._init(np.asarray(Z), blocks, prob.slices, chunk_rows)
        return self

    @classmethod
    def centred(cls, X, used: np.ndarray, x_mean: np.ndarray, chunk_rows: int | None = None) -> WorkingDesign:
        """The used raw columns, centred, as one group with no transform (what the `single` score reads).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.glm.design import WorkingDesign
        >>> X = np.arange(6.0).reshape(3, 2)
        >>> WorkingDesign.centred(X, np.array([1]), np.array([3.0])).columns().ravel().tolist()
        [-2.0, 0.0, 2.0]
        """
        self = cls.__new__(cls)
        used = np.asarray(used, dtype=np.int64)
        self._init(X, [(_as_index(used), x_mean, None)], [slice(0, used.size)], chunk_rows)
        return self

    def on_rows(self, X) -> WorkingDesign:
        """The same design (columns, means, transforms) over other rows, e.g. one partition on a worker.

        A design built over zero rows is what a cluster sends to its workers once: O(Σ k_g² + D)
        numbers, after which each pass needs only the weights.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.glm.design import WorkingDesign
        >>> X = np.arange(12.0).reshape(6, 2)
        >>> template = WorkingDesign.centred(X[:0], np.array([0, 1]), np.array([5.0, 6.0]))  # no rows
        >>> template.on_rows(X[4:]).columns().tolist()       # the last two rows, centred
        [[3.0, 3.0], [5.0, 5.0]]
        """
        other = type(self).__new__(type(self))
        other._init(X, self._blocks, self.slices, self.chunk_rows)
        return other

    def _init(self, X, blocks, slices, chunk_rows):
        self.X = X
        self._blocks = blocks  # per group: (raw columns of X, mean or None, transform or None = identity)
        self.slices = list(slices)
        self.n = X.shape[0]
        self.k = slices[-1].stop if slices else 0
        self.chunk_rows = chunk_rows
        self.passes = 0  # full passes over the rows so far (what the benchmark reports per step)
        # per group: centred in a copy (offset columns, or columns scattered over X) rather than read in place
        self.copied = [False] * len(blocks)

    # ------------------------------------------------------------------ helpers
    def _raw_width(self, groups) -> int:
        return sum(self._width(g) for g in groups)

    def _width(self, g: int) -> int:
        cols = self._blocks[g][0]
        return cols.stop - cols.start if isinstance(cols, slice) else cols.size

    def _row_chunks(self, width: int):
        rows = self.chunk_rows or max(MIN_CHUNK_ROWS, CHUNK_BYTES // (8 * max(1, width)))
        self.passes += 1
        for start in range(0, self.n, rows):
            yield slice(start, min(self.n, start + rows))

    def _centred(self, rows: slice, groups, out: np.ndarray) -> np.ndarray:
        """Raw columns of `groups` on `rows`, centred, side by side in `out` (no other temporary)."""
        c = 0
        for g in groups:
            cols, mu, _ = self._blocks[g]
            w = self._width(g)
            dst = out[:rows.stop - rows.start, c:c + w]
            src = self.X[rows, cols] if isinstance(cols, slice) else self.X[rows][:, cols]
            if mu is None:
                dst[...] = src
            else:
                np.subtract(src, mu, out=dst)
            c += w
        return out[:rows.stop - rows.start, :c]

    def to_raw(self, groups, W: np.ndarray) -> np.ndarray:
        """T_S W: working weights (rows of `groups` in order) as weights on the centred raw columns.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.design import WorkingDesign
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(30, 2))
        >>> prob = build_working_problem(sufficient_statistics(X, X[:, 0]), [2], whiten=False)
        >>> w = WorkingDesign(X, np.arange(2), prob).to_raw([0], np.ones((2, 1)))  # standardised: 1 / sd
        >>> bool(np.allclose(w.ravel(), 1 / X.std(axis=0)))
        True
        """
        return self._blockwise(groups, W, to_raw=True)

    def to_working(self, groups, G_raw: np.ndarray) -> np.ndarray:
        """T_Sᵀ G_raw: a gradient on the centred raw columns of `groups` in the working basis.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.design import WorkingDesign
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(30, 2))
        >>> prob = build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 1], whiten=False)
        >>> WorkingDesign(X, np.arange(2), prob).to_working([1], np.ones((1, 1))).shape
        (1, 1)
        """
        return self._blockwise(groups, G_raw, to_raw=False)

    def _blockwise(self, groups, M: np.ndarray, to_raw: bool) -> np.ndarray:
        """Apply T_g (to_raw) or T_gᵀ to each group's rows of M: the block-diagonal transform, never formed."""
        out, r = [], 0
        for g in groups:
            T = self._blocks[g][2]
            rows = self.slices[g].stop - self.slices[g].start if to_raw else self._width(g)
            block = M[r:r + rows]
            out.append(block if T is None else (T @ block if to_raw else T.T @ block))
            r += rows
        return np.vstack(out) if out else np.zeros((0, M.shape[1]))

    def _plan(self, groups):
        """How a pass reads `groups` (W_raw's rows in that order): raw segments and copied groups.

        Returns ``(segments, copied, copy_rows)``: each segment is ``(X columns (slice), rows of W_raw,
        means or None)`` for neighbouring in-place groups merged into one slice of X (in X's order);
        `copied` the groups centred in a buffer, whose rows of W_raw are `copy_rows`.
        """
        starts = np.cumsum([0] + [self._width(g) for g in groups])
        inplace, copied, copy_rows = [], [], []
        for g, lo, hi in zip(groups, starts[:-1], starts[1:]):
            if self.copied[g]:
                copied.append(g)
                copy_rows.append(np.arange(lo, hi))
            elif hi > lo:
                inplace.append((self._blocks[g][0], np.arange(lo, hi), self._blocks[g][1]))
        inplace.sort(key=lambda item: item[0].start)
        segments = []
        for cols, rows, mu in inplace:
            if segments and segments[-1][0].stop == cols.start:
                prev = segments[-1]
                means = None if mu is None else np.concatenate([prev[2], mu])
                segments[-1] = (slice(prev[0].start, cols.stop), np.concatenate([prev[1], rows]), means)
            else:
                segments.append((cols, rows, mu))
        copy_rows = np.concatenate(copy_rows) if copy_rows else np.zeros(0, dtype=np.int64)
        return segments, copied, copy_rows

    def _products(self, groups, width: int, P: int, forward=None):
        """Generator behind the passes: per row chunk, F = Z_S,rows W (if `forward` = W_raw) then Z_Sᵀ R.

        Yields ``(rows, F or None)`` and receives R (rows × P) back through ``send``; returns the
        accumulated centred Z_Sᵀ R in raw-column space (the rank-one mean corrections applied once at
        the end). The forward product's mean correction, −Σ μ_gᵀ W_g, is already added to F.
        """
        segments, copied, copy_rows = self._plan(groups)
        G_raw = np.zeros((width, P))
        seg_G = [np.zeros((rws.size, P)) for _, rws, _ in segments]
        copy_G = np.zeros((copy_rows.size, P))
        shift = np.zeros(P)
        if forward is not None:
            for _, rws, mu in segments:
                if mu is not None:
                    shift -= mu @ forward[rws]
            seg_W = [np.ascontiguousarray(forward[rws]) for _, rws, _ in segments]
            copy_W = forward[copy_rows]
        total_R = np.zeros(P)
        buf = None
        for rows in self._row_chunks(width):
            m = rows.stop - rows.start
            xc = None
            if copied:
                if buf is None:
                    buf = np.empty((m, copy_rows.size))
                xc = self._centred(rows, copied, buf)
            F = None
            if forward is not None:
                F = np.empty((m, P))
                F[...] = shift
                for (cols, _, _), Wseg in zip(segments, seg_W):
                    F += narrow_product(self.X[rows, cols], Wseg)
                if xc is not None:
                    F += narrow_product(xc, copy_W)
            R = yield rows, F
            total_R += R.sum(axis=0)
            for (cols, _, _), Gseg in zip(segments, seg_G):
                Gseg += transposed_product(self.X[rows, cols], R)
            if xc is not None:
                copy_G += transposed_product(xc, R)
        for (_, rws, mu), Gseg in zip(segments, seg_G):
            G_raw[rws] = Gseg if mu is None else Gseg - np.outer(mu, total_R)
        G_raw[copy_rows] = copy_G
        return G_raw

    # ------------------------------------------------------------------ passes over the rows
    def fused_pass(self, groups, W: np.ndarray, b: np.ndarray, residual) -> tuple[np.ndarray, np.ndarray]:
        """One pass: f = Z_S W + b, then Z_Sᵀ residual(f) per chunk while the chunk is in cache.

        Parameters
        ----------
        groups : list of int
            Selected groups, in the order of W's rows.
        W : array (m, P)
        b : array (P,)
        residual : callable
            ``residual(f_chunk, rows) -> R_chunk`` (e.g. probabilities minus targets of those rows).

        Returns
        -------
        f : array (n, P)
        G : array (m, P)
            Z_Sᵀ R (not divided by n).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.design import WorkingDesign
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(40, 3))
        >>> prob = build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 2], whiten=True)
        >>> d = WorkingDesign(X, np.arange(3), prob, chunk_rows=9)
        >>> W, b = np.ones((2, 1)), np.zeros(1)
        >>> f, G = d.fused_pass([1], W, b, lambda f, rows: f)
        >>> Zs = d.columns([1])
        >>> bool(np.allclose(f, Zs @ W)), bool(np.allclose(G, Zs.T @ (Zs @ W)))
        (True, True)
        """
        P = W.shape[1]
        W_raw = self.to_raw(groups, W)
        f = np.empty((self.n, P))
        G_raw = _drive(self._products(groups, W_raw.shape[0], P, forward=W_raw),
                       lambda rows, F: residual(_store(f, rows, F, b), rows))
        return f, self.to_working(groups, G_raw)

    def gradient(self, R: np.ndarray, groups=None) -> np.ndarray:
        """Zᵀ R (k, P) over the working columns of `groups` (default: all), in working-column order.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.design import WorkingDesign
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(20, 2))
        >>> prob = build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 1], whiten=True)
        >>> G = WorkingDesign(X, np.arange(2), prob).gradient(np.ones((20, 3)))  # centred columns
        >>> G.shape, bool(np.allclose(G, 0.0))
        ((2, 3), True)
        """
        groups = list(range(len(self.slices))) if groups is None else list(groups)
        G_raw = _drive(self._products(groups, self._raw_width(groups), R.shape[1]), lambda rows, F: R[rows])
        return self.to_working(groups, G_raw)

    def chunks(self, groups=None):
        """Yield (rows, Z chunk) of the working columns of `groups` (default all), in that order.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.design import WorkingDesign
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(20, 2))
        >>> prob = build_working_problem(sufficient_statistics(X, X[:, 0]), [1, 1], whiten=True)
        >>> [z.shape for _, z in WorkingDesign(X, np.arange(2), prob, chunk_rows=8).chunks()]
        [(8, 2), (8, 2), (4, 2)]
        """
        groups = list(range(len(self.slices))) if groups is None else list(groups)
        width = self._raw_width(groups)
        buf = np.empty((0, width))
        for rows in self._row_chunks(width):
            if buf.shape[0] < rows.stop - rows.start:
                buf = np.empty((rows.stop - rows.start, width))
            xc = self._centred(rows, groups, buf)
            parts, c = [], 0
            for g in groups:
                T, w = self._blocks[g][2], self._width(g)
                parts.append(xc[:, c:c + w] if T is None else xc[:, c:c + w] @ T)
                c += w
            yield rows, np.hstack(parts) if parts else np.zeros((rows.stop - rows.start, 0))

    def columns(self, groups=None) -> np.ndarray:
        """The working columns of `groups` materialised (n × k_S): for small problems and tests.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.linear.basis import build_working_problem
        >>> from edgeseq.train.glm.design import WorkingDesign
        >>> from edgeseq.train.linear.stats import sufficient_statistics
        >>> X = np.random.default_rng(0).normal(size=(20, 3))
        >>> prob = build_working_problem(sufficient_statistics(X, X[:, 0]), [2, 1], whiten=True)
        >>> WorkingDesign(X, np.arange(3), prob).columns([1]).shape
        (20, 1)
        """
        out = None
        for rows, z in self.chunks(groups):
            out = np.empty((self.n, z.shape[1])) if out is None else out
            out[rows] = z
        return out


def _store(f: np.ndarray, rows: slice, F: np.ndarray, b: np.ndarray) -> np.ndarray:
    """f[rows] = F + b (F is the chunk's centred product), returned as the view the residual reads."""
    np.add(F, b, out=f[rows])
    return f[rows]


def _drive(products, respond) -> np.ndarray:
    """Run a `WorkingDesign._products` generator: answer each chunk with ``respond(rows, F)``; its result."""
    try:
        rows, F = next(products)
        while True:
            rows, F = products.send(respond(rows, F))
    except StopIteration as done:
        return done.value
