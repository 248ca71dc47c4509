"""Training speed at Yahoo! LTR scale: statistics pass, CS-G-OMP, CS-G-FR, a per-candidate-refit FR
(the papers' approach) and a bare X.T @ X as the floor, all measured in one run on this machine.

    python bench/train_speed.py                 # n = 500,000, D = 500, 100 groups of 5
    python bench/train_speed.py --n 50000       # quicker
    python bench/train_speed.py --n 300000 --threads 2 --result train_speed_threads2   # two BLAS threads

Ratios are what to compare across machines; absolute seconds depend on the BLAS and the load. On a
shared machine the load moves while the benchmark runs, so the timed steps are interleaved in rounds
(Gram, statistics pass, the previous centred-copy pass, OMP fit, FR fit, the FR fit's parts beyond
its statistics pass, then again) and each keeps its fastest round: every ratio compares figures measured side by side under the same load. Results
go to bench/results/<name>.json (``--result``, train_speed by default) with n, D, the machine and the
load average at start and end.
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
from _results import command_line, write_result
from _results import machine_info as bench_machine
from edgeseq.forms.groups import check_groups
from edgeseq.train.linear.auto import choose_ridge, fold_statistics, merge_folds, n_folds_for
from edgeseq.train.linear.basis import build_working_problem
from edgeseq.train.linear.functional import fit_sequence
from edgeseq.train.linear.selection import select_sequence
from edgeseq.train.linear.stats import finish_statistics, shifted_statistics, sufficient_statistics

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


def timed_cpu(fn):
    """(wall seconds, CPU seconds of this process over all threads, result) of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


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


def centred_copy_pass(X, y, used):
    """The previous algorithm, for comparison: every chunk centred in a copy before its Gram."""
    chunks = ((X[i:i + 16_000], y[i:i + 16_000]) for i in range(0, X.shape[0], 16_000))
    return finish_statistics(*shifted_statistics(chunks, used, fast=False))


def interleaved(steps: dict, rounds: int):
    """Fastest of `rounds` rounds for each step (wall and CPU), the steps run in turn inside each round.

    CPU time is what the step cost this process whatever the other users of the machine did; wall time
    is what a user waits, which other processes on a shared machine inflate.
    """
    wall = {k: np.inf for k in steps}
    cpu = {k: np.inf for k in steps}
    outs = {}
    for _ in range(rounds):
        for name, fn in steps.items():
            w, c, outs[name] = timed_cpu(fn)
            wall[name], cpu[name] = min(wall[name], w), min(cpu[name], c)
    return wall, cpu, outs


def interleaved_steps(X, y, groups, costs, used, rounds):
    # the FR fit beyond its statistics pass, timed apart from the same folds' statistics (formed once):
    # the cross-validated choice of l2/whiten, then whitening + selection + folding with the chosen pair
    spec = check_groups(groups, costs, None, X.shape[1])
    folds = fold_statistics(X, y, used, n_folds_for(X.shape[0]))
    total = merge_folds(folds)
    chosen = choose_ridge(folds, spec.sizes, l2="auto", whiten="auto", total=total)
    return interleaved({
        "gram": lambda: X.T @ X,
        "stats": lambda: sufficient_statistics(X, y, columns=used),
        "stats_centred_copy": lambda: centred_copy_pass(X, y, used),
        "omp_fit": lambda: AnytimeRegressor(groups, costs, method="omp").fit(X, y),
        "fr_fit": lambda: AnytimeRegressor(groups, costs, method="fr").fit(X, y),
        # the fixed parameters that were the defaults before l2="auto" / whiten="auto": what the
        # cross-validated choice costs on top of one fit
        "omp_fit_fixed": lambda: AnytimeRegressor(groups, costs, method="omp", l2=1e-5, whiten=True).fit(X, y),
        "fr_fit_fixed": lambda: AnytimeRegressor(groups, costs, method="fr", l2=1e-5, whiten=True).fit(X, y),
        "fr_choice": lambda: choose_ridge(folds, spec.sizes, l2="auto", whiten="auto", total=total),
        "fr_selection": lambda: fit_sequence(total, spec, X.shape[1], method="fr", l2=chosen.l2, whiten=chosen.whiten,
                                             doubling=False, y_was_1d=True, provenance={}),
    }, rounds)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--d", type=int, default=500)
    ap.add_argument("--group-size", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None,
                    help="limit BLAS to this many threads for every step (default: BLAS's own choice). On a "
                         "machine whose load exceeds its cores, threaded BLAS timings swing by 2x from run "
                         "to run; --threads 1 gives ratios that do not")
    ap.add_argument("--result", default="train_speed",
                    help="name of the results file (bench/results/<name>.json): one per thread count, so the "
                         "one-thread and the two-thread runs are both kept")
    ap.add_argument("--naive-rows", type=int, default=20_000)
    ap.add_argument("--naive-steps", type=int, default=8)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))
    load_start = os.getloadavg()

    say(f"building n={args.n:,} D={args.d} ({args.n * args.d * 8 / 2**30:.2f} GiB) ...")
    X, y, groups, costs = make_problem(args.n, args.d, args.group_size)
    used = np.concatenate(groups)

    with threadpool_limits(limits=args.threads, user_api="blas"):
        best, cpu, outs = interleaved_steps(X, y, groups, costs, used, args.rounds)

    t_gram, t_stats, t_copy, t_omp, t_fr = (best[k] for k in
                                            ("gram", "stats", "stats_centred_copy", "omp_fit", "fr_fit"))
    omp, fr, stats = outs["omp_fit"], outs["fr_fit"], outs["stats"]
    tracemalloc.start()
    AnytimeRegressor(groups, costs, method="fr").fit(X, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    sizes = [len(g) for g in groups]

    def select(method):
        with threadpool_limits(limits=1, user_api="blas"):
            return select_sequence(build_working_problem(stats, sizes, True), costs, method=method)

    sel_omp, _ = timed(lambda: select("omp"), repeats=3)
    sel_fr, _ = timed(lambda: select("fr"), repeats=3)
    naive_meas, naive_extrap = naive_fr_time(X, y, groups, costs, 1e-5, min(args.naive_rows, args.n),
                                             args.naive_steps)

    print()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}, "
          f"numpy {np.__version__}; n={args.n:,}, D={args.d}, {len(groups)} groups of {args.group_size}")
    print("| step | seconds | ratio to bare X.T@X |")
    print("|---|---|---|")
    rows = [("bare X.T @ X (floor)", t_gram), ("statistics pass", t_stats),
            ("statistics pass, previous algorithm (each chunk centred in a copy)", t_copy),
            ("CS-G-OMP whole fit", t_omp), ("CS-G-FR whole fit", t_fr),
            ("CS-G-OMP selection only (whitening + selection, from the statistics)", sel_omp),
            ("CS-G-FR selection only (whitening + selection, from the statistics)", sel_fr),
            ("per-candidate-refit FR, EXTRAPOLATED from a subsample", naive_extrap)]
    for name, t in rows:
        print(f"| {name} | {t:.2f} | {t / t_gram:.2f} |")
    print()
    print(f"statistics pass / bare Gram: {t_stats / t_gram:.2f} wall, "
          f"{cpu['stats'] / cpu['gram']:.2f} CPU (target <= 1.2)")
    print(f"CS-G-FR whole fit / bare Gram: {t_fr / t_gram:.2f} wall, {cpu['fr_fit'] / cpu['gram']:.2f} CPU "
          f"(target <= 1.4)")
    print(f"FR/OMP whole-fit time ratio: {t_fr / t_omp:.2f}; selection alone: {sel_fr / sel_omp:.2f}")
    auto_ratio = {m: best[f"{m}_fit"] / best[f"{m}_fit_fixed"] for m in ("omp", "fr")}
    # CPU seconds as well: on a machine loaded beyond its cores the wall clock of one fit swings with
    # the other processes, while the CPU this process spent does not
    auto_ratio_cpu = {m: cpu[f"{m}_fit"] / cpu[f"{m}_fit_fixed"] for m in ("omp", "fr")}
    print(f"fit with l2/whiten chosen by cross-validation / fit with them fixed: OMP {auto_ratio['omp']:.2f}, "
          f"FR {auto_ratio['fr']:.2f} wall, OMP {auto_ratio_cpu['omp']:.2f}, FR {auto_ratio_cpu['fr']:.2f} CPU "
          f"(target <= 1.3); chosen l2={omp.l2_:g}, whiten={omp.whiten_}")
    print(f"peak memory traced during the FR fit, beyond the input array: {peak / 2**20:.0f} MiB (target <= 512)")
    print(f"per-candidate-refit FR / CS-G-FR: {naive_extrap / t_fr:.0f}x (extrapolated)")
    print(f"same sequence OMP vs FR: {omp.sequence_.tolist() == fr.sequence_.tolist()}")
    result = {
        "n": args.n, "D": args.d, "groups": len(groups), "group_size": args.group_size, "rounds": args.rounds,
        "load_average_start": list(load_start), "load_average_end": list(os.getloadavg()),
        "seconds": {"gram": t_gram, "statistics_pass": t_stats, "statistics_pass_centred_copy": t_copy,
                    "omp_fit": t_omp, "fr_fit": t_fr, "omp_fit_fixed": best["omp_fit_fixed"],
                    "fr_fit_fixed": best["fr_fit_fixed"], "omp_selection": sel_omp, "fr_selection": sel_fr,
                    "fr_choice_from_folds": best["fr_choice"], "fr_selection_chosen": best["fr_selection"],
                    "naive_fr_extrapolated": naive_extrap},
        "cpu_seconds": dict(cpu),
        "cpu_ratio_to_gram": {k: cpu[k] / cpu["gram"] for k in cpu},
        "ratio_to_gram": {"statistics_pass": t_stats / t_gram, "statistics_pass_centred_copy": t_copy / t_gram,
                          "omp_fit": t_omp / t_gram, "fr_fit": t_fr / t_gram},
        "targets": {"statistics_pass": 1.2, "fr_fit": 1.4, "auto_over_fixed_fit": 1.3},
        "auto_over_fixed_fit": auto_ratio, "auto_over_fixed_fit_cpu": auto_ratio_cpu,
        "chosen": {"l2": omp.l2_, "whiten": omp.whiten_},
        "fr_peak_traced_mib": peak / 2**20,
        "gram_rows_per_second": args.n / t_gram, "statistics_rows_per_second": args.n / t_stats,
    }
    result["tables"] = [{
        "title": f"Training speed at n = {args.n:,}, D = {args.d} ({len(groups)} groups of {args.group_size}): "
                 f"fastest of {args.rounds} interleaved rounds, BLAS threads {args.threads or 'default'}; "
                 "targets: statistics pass <= 1.2x, CS-G-FR fit <= 1.4x a bare Gram",
        "columns": ["step", "wall s", "wall / Gram", "CPU s", "CPU / Gram"],
        "rows": [[name, f"{result['seconds'][key]:.3g}", f"{result['seconds'][key] / t_gram:.2f}",
                  f"{cpu[ck]:.3g}" if ck in cpu else "", f"{cpu[ck] / cpu['gram']:.2f}" if ck in cpu else ""]
                 for name, key, ck in (("bare X.T @ X", "gram", "gram"),
                                       ("statistics pass", "statistics_pass", "stats"),
                                       ("previous centred-copy pass", "statistics_pass_centred_copy", "stats_centred_copy"),
                                       ("CS-G-OMP whole fit", "omp_fit", "omp_fit"),
                                       ("CS-G-FR whole fit", "fr_fit", "fr_fit"),
                                       ("CS-G-OMP whole fit, l2 and whiten fixed", "omp_fit_fixed", "omp_fit_fixed"),
                                       ("CS-G-FR whole fit, l2 and whiten fixed", "fr_fit_fixed", "fr_fit_fixed"),
                                       ("CS-G-FR: choice of l2/whiten from the folds' statistics", "fr_choice_from_folds",
                                        "fr_choice"),
                                       ("CS-G-FR: whitening, selection and folding with the chosen pair",
                                        "fr_selection_chosen", "fr_selection"))]}]
    machine = bench_machine() | {"blas_threads": args.threads or "default (all cores)"}
    say(f"wrote {write_result(args.result, result, command_line(), machine=machine)}")


if __name__ == "__main__":
    main()
