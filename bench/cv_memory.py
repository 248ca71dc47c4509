"""Memory of the classifier's cross-validated l2/whiten choice against the working width.

    .venv/bin/python bench/cv_memory.py [--widths 512 1024 2048] [--rows 1500]

The GLM cross-validation (`edgeseq.train.linear.auto.glm_cv_losses`) holds, for each of its K = 5 folds at
once, the fold's training rows of the working design and their width x width Gram (the refit's
preconditioner). Its peak memory is therefore about K·8·w² + K·8·n·w bytes for n sample rows of w
working columns. This script measures the peak (Python's tracemalloc, which numpy reports to) of
one basis and a two-penalty path at a few widths, compares it with that model, and extrapolates
the model, scaled by the measured/model ratio at the widest width, to the thesis-shaped softmax problem (11,016 columns; 60,000 rows sampled every 27th,
2,223 rows): the figure that decides whether "auto" may run there within X + 2 GB. Above
`edgeseq.train.linear.auto.CV_MAX_WIDTH` columns the estimators skip the choice (a warning says so), and the
last row measures that path at 11,016 columns.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings

import numpy as np
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from threadpoolctl import threadpool_limits

from edgeseq.train.linear.auto import CV_MAX_WIDTH, N_FOLDS, choose_glm, glm_cv_losses
from edgeseq.train.linear.stats import sufficient_statistics

THESIS = {"rows": 60_000 // 27 + 1, "width": 11_016, "classes": 10}


def peak_bytes(n: int, w: int, P: int, seed: int = 0) -> tuple[int, float]:
    """(peak traced bytes, seconds) of one basis's GLM cross-validation on n x w standard normal rows."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, w))
    Y = np.eye(P)[rng.integers(0, P, size=n)]
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        glm_cv_losses(Z, Y, "softmax", (1.0, 0.1), N_FOLDS)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[512, 1024, 2048])
    ap.add_argument("--rows", type=int, default=1500)
    args = ap.parse_args()
    load_start = machine_info()["load_start"]
    rows, meas = [], []
    for w in args.widths:
        peak, secs = peak_bytes(args.rows, w, THESIS["classes"])
        model = N_FOLDS * 8 * (w * w + args.rows * w)
        meas.append((w, peak))
        rows.append([args.rows, w, f"{peak / 1e6:.1f}", f"{model / 1e6:.1f}", f"{secs:.1f}"])
    # the model scaled by what the widest measurement shows (the model leaves out small arrays and
    # the temporaries of the refit, which grow like n·w as well)
    w_max, p_max = meas[-1]
    ratio = p_max / (N_FOLDS * 8 * (w_max * w_max + args.rows * w_max))
    n, w = THESIS["rows"], THESIS["width"]
    predicted = ratio * N_FOLDS * 8 * (w * w + n * w)
    # the path the estimators take at that width: the warning and the fallback, no folds
    X = np.random.default_rng(0).normal(size=(50, w))
    Y = np.eye(2)[np.arange(50) % 2]
    stats = sufficient_statistics(X[:, :8], Y)  # only the fallback's shape check reads the width
    tracemalloc.start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        choice = choose_glm(X, Y, stats, [8], "sigmoid", l2="auto", whiten="auto")
    fallback_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rows.append([n, w, f"{predicted / 1e6:.0f} (extrapolated)", f"{N_FOLDS * 8 * (w * w + n * w) / 1e6:.0f}", "n/a"])
    rows.append([n, w, f"{fallback_peak / 1e6:.1f} (width > {CV_MAX_WIDTH}: no folds)", "0", "n/a"])
    payload = {"measured_over_model": ratio, "thesis_shape": THESIS, "extrapolated_peak_bytes": predicted,
               "fallback": {"l2": choice.l2, "whiten": choice.whiten, "n_folds": choice.n_folds,
                            "warning": str(caught[0].message) if caught else None, "peak_bytes": fallback_peak},
               "cv_max_width": CV_MAX_WIDTH,
               "tables": [{"title": "Peak memory of the GLM cross-validation (one basis, two penalties), MB; "
                                    "model: 5 folds x 8 bytes x (w² + n·w)",
                           "columns": ["sample rows n", "working width w", "measured peak (MB)", "model (MB)",
                                       "seconds"], "rows": rows}]}
    write_result("cv_memory", payload, command_line(), machine=machine_info(load_start))


if __name__ == "__main__":
    main()
