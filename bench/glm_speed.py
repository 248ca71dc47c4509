"""Speed of multinomial CS-G-OMP and CS-G-FR (AnytimeClassifier) on a 10-class synthetic problem.

Default size is the issue's target: n = 60,000 rows, D = 2,000 columns in 50 groups of 40, 10 classes.
Both methods run side by side in one process on the same data; the script prints wall and process
CPU times (BLAS runs single-threaded in fit, so on a shared machine CPU time is the fair figure),
the FR/OMP ratio, passes over the rows per refit and the machine. A second, small part measures the multinomial FR
curvature choice: rank agreement of the Böhning-bound and per-class-weight score tests with exact
refit gains, and their time.

    /work/venv/bin/python bench/glm_speed.py            # full size (a few minutes)
    /work/venv/bin/python bench/glm_speed.py --n 5000 --groups 10 --quiet   # quick look
    python bench/glm_speed.py --n 20000 --groups 54 --dim 204 --classes 10 --skip-hessian --write
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from scipy.stats import spearmanr
from threadpoolctl import threadpool_limits

from _results import command_line, write_result  # noqa: E402  (bench/ is on sys.path; records the load at start)
from edgeseq import AnytimeClassifier
from edgeseq.train.basis import build_working_problem
from edgeseq.train.glm_select import GLMState, working_design
from edgeseq.train.stats import sufficient_statistics


def synthetic(n: int, n_groups: int, dim: int, n_classes: int, seed: int = 0, scale: float = 0.25):
    """Classes differ by group-specific mean patterns of decaying strength; groups share latent noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    shared = rng.normal(size=(n, 8))
    strength = scale * rng.uniform(0.2, 1.0, size=n_groups) ** 2
    X = np.empty((n, n_groups * dim))
    for g in range(n_groups):
        means = rng.normal(size=(n_classes, dim)) * strength[g]
        block = rng.normal(size=(n, dim)) + shared @ rng.normal(size=(8, dim)) * 0.5
        block += means[y]
        X[:, g * dim:(g + 1) * dim] = block @ rng.normal(size=(dim, dim)) / np.sqrt(dim)  # mixed basis
    costs = np.exp(rng.normal(size=n_groups))
    groups = [list(range(g * dim, (g + 1) * dim)) for g in range(n_groups)]
    return X, y, groups, costs


def timed_fit(method: str, X, y, groups, costs, quiet: bool):
    clf = AnytimeClassifier(groups=groups, costs=costs, method=method)
    t0, c0 = time.perf_counter(), time.process_time()
    clf.fit(X, y)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    if not quiet:
        print(f"  {method}: wall {dt:7.1f} s, cpu {cpu:7.1f} s (load {os.getloadavg()[0]:.1f});  final train accuracy {clf.train_accuracy_[-1]:.4f}  "
              f"max grad norm {clf.grad_norms_.max():.2e}, passes over the rows per refit mean "
              f"{clf.n_evals_[1:].mean():.1f} max {clf.n_evals_.max():.0f}, per selection step (scores + refit) "
              f"mean {clf.n_passes_.mean():.1f} max {clf.n_passes_.max()}")
    return clf, dt, cpu


def hessian_measurement(scale: float, seed: int = 1, steps: int = 4):
    """Spearman rank correlation and top-1 agreement of FR score tests vs exact refit gains."""
    X, y, groups, costs = synthetic(4000, 16, 12, 10, seed, scale)
    Y = np.eye(10)[y]
    used = np.concatenate(groups)
    stats = sufficient_statistics(X, Y, columns=used)
    prob = build_working_problem(stats, [len(g) for g in groups], True)
    Z = working_design(X, used, prob)
    out = {h: {"rho": [], "top1": [], "time": 0.0} for h in ("bohning", "diag")}
    rng = np.random.default_rng(seed)
    base = GLMState(prob, Z, Y, "softmax", 1e-4)
    for _ in range(steps):
        cands = [g for g in range(len(groups)) if g not in base.order]
        exact = []
        for g in cands:
            trial = GLMState(prob, Z, Y, "softmax", 1e-4)
            for h in base.order:
                trial.add(h)
            before = trial.fit.loss + 0.5 * 1e-4 * np.sum(trial.fit.W ** 2)
            trial.add(g)
            exact.append(before - trial.fit.loss - 0.5 * 1e-4 * np.sum(trial.fit.W ** 2))
        exact = np.array(exact)
        for h in out:
            base.fr_hessian = h
            base._bound = None
            t0 = time.perf_counter()
            sc = base.scores("fr", cands, np.ones(len(groups)))
            out[h]["time"] += time.perf_counter() - t0
            out[h]["rho"].append(spearmanr(sc, exact).statistic)
            out[h]["top1"].append(int(np.argmax(sc) == np.argmax(exact)))
        base.add(cands[int(rng.integers(len(cands)))])  # random path: measure at varied selected sets
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=60_000)
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--dim", type=int, default=40)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--skip-hessian", action="store_true", help="skip the FR curvature measurement")
    ap.add_argument("--skip-speed", action="store_true", help="only the FR curvature measurement")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--write", action="store_true", help="write the figures to bench/results/glm_speed.json")
    args = ap.parse_args()
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.1f}, python {platform.python_version()}, numpy {np.__version__}")
    if not args.skip_speed:
        speed(args)
    if not args.skip_hessian:
        for scale in (0.25, 1.0, 3.0):  # class separation: weak (near-quadratic) to nearly separable
            with threadpool_limits(limits=1, user_api="blas"):  # as inside fit
                res = hessian_measurement(scale)
            for h, r in res.items():
                print(f"separation {scale:4.2f}, FR curvature {h:8s}: Spearman rho vs exact refit gains mean {np.mean(r['rho']):.3f} "
                      f"(min {np.min(r['rho']):.3f}), top-1 agreement {sum(r['top1'])}/{len(r['top1'])}, "
                      f"score time {r['time']:.2f} s")


def speed(args):
    t0 = time.perf_counter()
    X, y, groups, costs = synthetic(args.n, args.groups, args.dim, args.classes)
    print(f"data: n={args.n} D={X.shape[1]} groups={args.groups} classes={args.classes} "
          f"(generated in {time.perf_counter() - t0:.1f} s)")
    omp, t_omp, c_omp = timed_fit("omp", X, y, groups, costs, args.quiet)
    fr, t_fr, c_fr = timed_fit("fr", X, y, groups, costs, args.quiet)
    print(f"CS-G-OMP whole sequence: wall {t_omp:.1f} s, cpu {c_omp:.1f} s; CS-G-FR: wall {t_fr:.1f} s, cpu "
          f"{c_fr:.1f} s (goal at the thesis's shape: <= {GOAL_SECONDS} s each); FR/OMP = {t_fr / t_omp:.2f} wall, "
          f"{c_fr / c_omp:.2f} cpu")
    print(f"sequences agree on the first {np.argmin(np.r_[omp.sequence_ == fr.sequence_, False])} groups; "
          f"final train accuracy OMP {omp.train_accuracy_[-1]:.4f} FR {fr.train_accuracy_[-1]:.4f}")
    if args.write:
        write_json(args, X, omp, fr, (t_omp, c_omp, t_fr, c_fr))


def write_json(args, X, omp, fr, times):
    """The figures of this run (bench/_results format): time, passes over the rows per selection step,
    and the peak resident memory beside the size of X.

    Runs of different shapes are kept side by side (``runs``, one per (n, D, classes)): a quick
    n = 5,000 run must not erase the thesis-shape one, nor the other way round. Each run keeps its own
    command, date and load average, since the machine is shared.
    """
    import resource

    t_omp, c_omp, t_fr, c_fr = times
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def per_method(clf, wall, cpu):
        refits = clf.n_evals_[1:]  # refits of prefixes 1..J (prefix 0 is the prior)
        passes = clf.n_passes_  # every pass over the rows of each selection step: scores and refit
        return {"wall_seconds": wall, "cpu_seconds": cpu, "steps": int(passes.size),
                "seconds_per_step": wall / max(1, passes.size),
                "refit_passes_mean": float(refits.mean()), "refit_passes_max": int(refits.max()),
                "passes_per_step_mean": float(passes.mean()), "passes_per_step_max": int(passes.max()),
                "final_train_accuracy": float(clf.train_accuracy_[-1])}

    run = {"n": args.n, "D": int(X.shape[1]), "groups": args.groups, "dim": args.dim, "classes": args.classes,
           "X_bytes": int(X.nbytes), "peak_rss_bytes": peak, "command": command_line(),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_start": LOAD_START,
           "load_end": list(os.getloadavg()), "omp": per_method(omp, t_omp, c_omp), "fr": per_method(fr, t_fr, c_fr)}
    path = write_result("glm_speed", payload_with(run, previous_runs()), command_line())
    print(f"wrote {path}")


LOAD_START = list(os.getloadavg())
GOAL_SECONDS = 600  # issue 14, goal 1: each method within 10 minutes at n = 60,000, D = 11,016, 10 classes
COLUMNS = ["method", "n", "D", "classes", "wall s", "CPU s", "s per step", "passes per step (mean)",
           "passes per step (max)", "refit passes (mean)", "peak RSS GB (process)", "X GB", "load avg (start; end)",
           "date"]


def previous_runs() -> list[dict]:
    """Runs already recorded in bench/results/glm_speed.json (a file from before ``runs`` counts as one run)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent / "results" / "glm_speed.json"
    if not path.exists():
        return []
    old = json.loads(path.read_text(encoding="utf-8"))
    if "runs" in old:
        return old["runs"]
    machine = old.get("machine", {})
    return [{**{k: old[k] for k in ("n", "D", "groups", "dim", "classes", "X_bytes", "peak_rss_bytes", "omp", "fr")},
             "command": old.get("command", ""), "date": old.get("date", ""),
             "load_start": machine.get("load_start", ""), "load_end": old.get("load_average_end", [])}]


def payload_with(run: dict, runs: list[dict]) -> dict:
    """The JSON document: every run (this one replaces a previous run of the same shape) and one table."""
    key = ("n", "D", "classes")
    runs = [r for r in runs if tuple(r[k] for k in key) != tuple(run[k] for k in key)] + [run]
    runs.sort(key=lambda r: tuple(r[k] for k in key))

    def load(value):  # the 1-minute figure (older files recorded all three as one string)
        return value.split(",")[0].strip() if isinstance(value, str) else (f"{value[0]:.1f}" if value else "")

    rows = [[name, r["n"], r["D"], r["classes"], m["wall_seconds"], m["cpu_seconds"], m["seconds_per_step"],
             m["passes_per_step_mean"], m["passes_per_step_max"], m["refit_passes_mean"], r["peak_rss_bytes"] / 1e9,
             r["X_bytes"] / 1e9, f"{load(r['load_start'])}; {load(r['load_end'])}", r["date"]]
            for r in runs for name, m in (("CS-G-OMP", r["omp"]), ("CS-G-FR", r["fr"]))]
    title = ("Multinomial CS-G-OMP and CS-G-FR in one process, one row pair per recorded run (peak RSS covers "
             "both fits and the data; the load average is the 1-minute one of this shared 2-core machine)")
    return {"runs": runs, "tables": [{"title": title, "columns": COLUMNS, "rows": rows}]}


if __name__ == "__main__":
    main()
