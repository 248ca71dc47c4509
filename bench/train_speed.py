"""Training speed at Yahoo! LTR scale: statistics pass, CS-G-OMP, CS-G-FR, a per-candidate-refit FR
(the papers' approach) and a bare X.T @ X as the floor, all measured in one run on this machine.

    python bench/train_speed.py                 # n = 500,000, D = 500, 100 groups of 5
    python bench/train_speed.py --n 50000       # quicker

Ratios are what to compare across machines; absolute seconds depend on the BLAS and the load.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import tracemalloc

import numpy as np
from threadpoolctl import threadpool_limits

from edgeseq import AnytimeRegressor
from edgeseq.train.basis import build_working_problem
from edgeseq.train.selection import select_sequence
from edgeseq.train.stats import sufficient_statistics

COSTS = np.array([1, 5, 20, 50, 100, 150, 200], dtype=float)


def make_problem(n: int, D: int, group_size: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = np.empty((n, D))
    for start in range(0, n, 50_000):  # generate in slabs: no second n×D temporary
        X[start:start + 50_000] = rng.standard_normal((min(50_000, n - start), D), dtype=np.float64)
    mix = np.eye(group_size) + 0.5 * rng.standard_normal((group_size, group_size))
    for g in range(D // group_size):  # correlate columns inside each group, slab by slab
        sl = slice(g * group_size, (g + 1) * group_size)
        for start in range(0, n, 100_000):
            X[start:start + 100_000, sl] = X[start:start + 100_000, sl] @ mix
    w = rng.standard_normal(D) * (rng.random(D) < 0.3)
    y = X @ w + rng.standard_normal(n)
    groups = [list(range(g * group_size, (g + 1) * group_size)) for g in range(D // group_size)]
    costs = rng.choice(COSTS, size=len(groups))
    return X, y, groups, costs


def timed(fn, repeats=1):
    best = np.inf
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def naive_fr_time(X, y, groups, costs, l2, n_sub, steps):
    """Papers' FR: a fresh ridge solve on n rows for every candidate of every step (on a subsample).

    Returns (measured seconds for `steps` steps on n_sub rows, extrapolated seconds for all steps on all
    rows), extrapolating with the work model Σ_candidates n·(|S|+|g|)² fitted to the measured steps.
    """
    Xs = X[:n_sub] - X[:n_sub].mean(0)
    ys = (y[:n_sub] - y[:n_sub].mean()) / y[:n_sub].std()
    Z = []
    for g in groups:  # whiten each group on the subsample
        ev, U = np.linalg.eigh(Xs[:, g].T @ Xs[:, g] / n_sub)
        Z.append(Xs[:, g] @ (U / np.sqrt(ev)))
    order, work_done = [], 0.0
    t0 = time.perf_counter()
    for _ in range(steps):
        cols = np.hstack([Z[g] for g in order]) if order else np.zeros((n_sub, 0))
        best, best_g = -np.inf, None
        for g in range(len(groups)):
            if g in order:
                continue
            A = np.hstack([cols, Z[g]])
            w = np.linalg.solve(A.T @ A / n_sub + l2 * np.eye(A.shape[1]), A.T @ ys / n_sub)
            gain = 0.5 * (A.T @ ys / n_sub) @ w / costs[g]
            work_done += n_sub * A.shape[1] ** 2
            if gain > best:
                best, best_g = gain, g
        order.append(best_g)
    measured = time.perf_counter() - t0
    k = len(groups[0])
    total_work = sum((len(groups) - j) * X.shape[0] * ((j + 1) * k) ** 2 for j in range(len(groups)))
    return measured, measured / work_done * total_work


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--d", type=int, default=500)
    ap.add_argument("--group-size", type=int, default=5)
    ap.add_argument("--naive-rows", type=int, default=20_000)
    ap.add_argument("--naive-steps", type=int, default=8)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))

    say(f"building n={args.n:,} D={args.d} ({args.n * args.d * 8 / 2**30:.2f} GiB) ...")
    X, y, groups, costs = make_problem(args.n, args.d, args.group_size)
    used = np.concatenate(groups)

    t_gram, _ = timed(lambda: X.T @ X, repeats=2)
    say(f"bare X.T @ X: {t_gram:.2f} s")
    t_stats, stats = timed(lambda: sufficient_statistics(X, y, columns=used), repeats=2)
    say(f"statistics pass: {t_stats:.2f} s")
    t_omp, omp = timed(lambda: AnytimeRegressor(groups, costs, method="omp").fit(X, y))
    say(f"CS-G-OMP fit: {t_omp:.2f} s")
    tracemalloc.start()
    t_fr, fr = timed(lambda: AnytimeRegressor(groups, costs, method="fr").fit(X, y))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    say(f"CS-G-FR fit: {t_fr:.2f} s (peak extra memory {peak / 2**20:.0f} MiB)")
    sizes = [len(g) for g in groups]

    def select(method):
        with threadpool_limits(limits=1, user_api="blas"):
            return select_sequence(build_working_problem(stats, sizes, True), costs, method=method)

    sel_omp, _ = timed(lambda: select("omp"), repeats=3)
    sel_fr, _ = timed(lambda: select("fr"), repeats=3)
    naive_meas, naive_extrap = naive_fr_time(X, y, groups, costs, 1e-5, min(args.naive_rows, args.n),
                                             args.naive_steps)
    say(f"per-candidate-refit FR: {naive_meas:.2f} s for {args.naive_steps} steps on "
        f"{min(args.naive_rows, args.n):,} rows")

    print()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}, "
          f"numpy {np.__version__}; n={args.n:,}, D={args.d}, {len(groups)} groups of {args.group_size}")
    print("| step | seconds | ratio to bare X.T@X |")
    print("|---|---|---|")
    rows = [("bare X.T @ X (floor)", t_gram), ("statistics pass", t_stats),
            ("CS-G-OMP whole fit", t_omp), ("CS-G-FR whole fit", t_fr),
            ("CS-G-OMP selection only (whitening + selection, from the statistics)", sel_omp),
            ("CS-G-FR selection only (whitening + selection, from the statistics)", sel_fr),
            ("per-candidate-refit FR, EXTRAPOLATED from a subsample", naive_extrap)]
    for name, t in rows:
        print(f"| {name} | {t:.2f} | {t / t_gram:.2f} |")
    print()
    print(f"FR/OMP whole-fit time ratio: {t_fr / t_omp:.2f} (target <= 1.5); "
          f"selection alone: {sel_fr / sel_omp:.2f}")
    print(f"CS-G-FR whole fit / bare Gram: {t_fr / t_gram:.2f} (target <= 3)")
    print(f"peak memory traced during the FR fit, beyond the input array: {peak / 2**20:.0f} MiB (target <= 512)")
    print(f"per-candidate-refit FR / CS-G-FR: {naive_extrap / t_fr:.0f}x (extrapolated)")
    print(f"same sequence OMP vs FR: {omp.sequence_.tolist() == fr.sequence_.tolist()}")


if __name__ == "__main__":
    main()
