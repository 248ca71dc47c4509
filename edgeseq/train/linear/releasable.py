"""A float64 array whose rows can be handed back to the operating system while the rest stays in use.

Why: CS-G-FR's score keeps three k × k arrays (the working Gram K, the rows L⁻¹C_S,: of its
incremental factor, and the factor itself); at the thesis's width each is a gigabyte. Once a group
is selected, its rows of K and its columns of L⁻¹C_S,: are never read again, so the memory they hold
can go back to the system -- the live part of the two arrays then shrinks exactly as fast as the
factor grows, and the total stays near one k × k array instead of three.

numpy cannot free part of an array, so the buffer is an anonymous memory map and a released row
range is passed to ``madvise(MADV_DONTNEED)``: its pages stop counting as resident and read back as
zeros if touched (writing to them makes them resident again, which callers avoid or undo). Only
whole pages strictly inside the range are released, so neighbouring rows are never affected. Where
the platform has no ``madvise``, `release` does nothing: the results are the same, the memory is not
returned.
"""

from __future__ import annotations

import mmap

import numpy as np


class ReleasableRows:
    """A zero-initialised C-ordered float64 array (rows, cols) with `release(rows)`.

    Parameters
    ----------
    shape : tuple of int
        (rows, cols).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.linear.releasable import ReleasableRows
    >>> buf = ReleasableRows((4, 1024))
    >>> buf.array[:] = 1.0
    >>> buf.release(slice(1, 3))
    >>> float(buf.array[0].sum()), float(buf.array[3].sum())   # the other rows are intact
    (1024.0, 1024.0)
    >>> bool(buf.released[1]), bool(buf.released[0])
    (True, False)
    """

    def __init__(self, shape: tuple[int, int]):
        rows, cols = (int(v) for v in shape)
        self._map = mmap.mmap(-1, max(1, rows * cols * 8), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.array = np.frombuffer(self._map, dtype=np.float64, count=rows * cols).reshape(rows, cols)
        self.released = np.zeros(rows, dtype=bool)

    def release(self, rows: slice) -> None:
        """Give the pages of rows `rows` back (they read as zeros afterwards); mark them released.

        Examples
        --------
        >>> from edgeseq.train.linear.releasable import ReleasableRows
        >>> buf = ReleasableRows((2, 4096)); buf.array[:] = 3.0
        >>> buf.release(slice(0, 1)); float(buf.array[0].max()), float(buf.array[1].min())
        (0.0, 3.0)
        """
        start, stop, _ = rows.indices(self.array.shape[0])
        if stop <= start:
            return
        self.released[start:stop] = True
        self._advise(start, stop)

    def rerelease(self) -> None:
        """Release again every row marked released (after a write that touched them).

        Examples
        --------
        >>> from edgeseq.train.linear.releasable import ReleasableRows
        >>> buf = ReleasableRows((2, 4096)); buf.release(slice(1, 2))
        >>> buf.array[:, 0] = 5.0; buf.rerelease(); float(buf.array[1, 0]), float(buf.array[0, 0])
        (0.0, 5.0)
        """
        flags = np.r_[False, self.released, False].astype(np.int8)
        edges = np.flatnonzero(np.diff(flags))
        for start, stop in zip(edges[::2], edges[1::2]):
            self._advise(int(start), int(stop))

    def _advise(self, start: int, stop: int) -> None:
        if not hasattr(self._map, "madvise"):
            return
        row_bytes = self.array.shape[1] * 8
        page = mmap.PAGESIZE
        lo = -(-start * row_bytes // page) * page  # whole pages strictly inside the rows
        hi = stop * row_bytes // page * page
        if hi > lo:
            self._map.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


__all__ = ["ReleasableRows"]
