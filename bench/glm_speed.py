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
from edgeseq.train.linear.basis import build_working_problem
from edgeseq.train.glm.select import GLMState, working_design
from edgeseq.train.linear.stats import sufficient_statistics


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
    ap.add_argument("--own-process", action="store_true",
                    help="fit each method in a fresh process of its own (generating the same data there), so "
                         "each method's peak resident memory is its own: what goal 1's memory bound is about")
    ap.add_argument("--methods", nargs="+", choices=("omp", "fr"), default=["omp", "fr"],
                    help="with --own-process: fit only these; the others' figures are kept from the recorded run "
                         "of the same shape (each method records its own date and load)")
    ap.add_argument("--only", choices=("omp", "fr"), help=argparse.SUPPRESS)  # the child of --own-process
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
    if args.own_process:
        return speed_in_own_processes(args)
    if args.only:
        return speed_child(args)
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


def speed_child(args):
    """Generate the data, fit one method, and print its figures (with this process's peak RSS) as JSON."""
    import json
    import resource

    X, y, groups, costs = synthetic(args.n, args.groups, args.dim, args.classes)
    clf, wall, cpu = timed_fit(args.only, X, y, groups, costs, args.quiet)
    figures = per_method(clf, wall, cpu)
    figures["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    figures["sequence"] = [int(g) for g in clf.sequence_]
    print(CHILD_TAG + json.dumps({"X_bytes": int(X.nbytes), "D": int(X.shape[1]), "method": figures}), flush=True)


def speed_in_own_processes(args):
    """Each method in its own child process (same data: the generator is seeded); the parent records both."""
    import json
    import subprocess
    import sys

    figures = {}
    for method in args.methods:
        cmd = [sys.executable, __file__, "--n", str(args.n), "--groups", str(args.groups), "--dim", str(args.dim),
               "--classes", str(args.classes), "--skip-hessian", "--only", method] + (["--quiet"] if args.quiet else [])
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        print(out.replace(CHILD_TAG, "figures: "), end="")
        figures[method] = json.loads(next(line for line in out.splitlines() if line.startswith(CHILD_TAG))[len(CHILD_TAG):])
        m = figures[method]["method"]
        m.update(date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), load_end=list(os.getloadavg()))
        print(f"{method}: wall {m['wall_seconds']:.1f} s, cpu {m['cpu_seconds']:.1f} s, peak RSS "
              f"{m['peak_rss_bytes'] / 1e9:.2f} GB for X = {figures[method]['X_bytes'] / 1e9:.2f} GB", flush=True)
    if args.write:
        kept = [r for r in previous_runs() if r.get("own_process") and (r["n"], r["groups"], r["dim"], r["classes"])
                == (args.n, args.groups, args.dim, args.classes)]
        for method in {"omp", "fr"} - set(figures):
            if not kept:
                raise SystemExit(f"no recorded --own-process run of this shape to keep the {method} figures from")
            figures[method] = {"X_bytes": kept[0]["X_bytes"], "D": kept[0]["D"], "method": kept[0][method]}
        omp, fr = figures["omp"], figures["fr"]
        run = {"n": args.n, "D": omp["D"], "groups": args.groups, "dim": args.dim, "classes": args.classes,
               "X_bytes": omp["X_bytes"], "own_process": True,
               "peak_rss_bytes": max(omp["method"]["peak_rss_bytes"], fr["method"]["peak_rss_bytes"]),
               "command": command_line(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "load_start": LOAD_START, "load_end": list(os.getloadavg()), "omp": omp["method"], "fr": fr["method"]}
        print(f"wrote {write_result('glm_speed', payload_with(run, previous_runs()), command_line())}")


CHILD_TAG = "GLM_SPEED_CHILD "


def per_method(clf, wall, cpu):
    """One method's figures: time, passes over the rows per selection step and per refit."""
    refits = clf.n_evals_[1:]  # refits of prefixes 1..J (prefix 0 is the prior)
    passes = clf.n_passes_  # every pass over the rows of each selection step: scores and refit
    return {"wall_seconds": wall, "cpu_seconds": cpu, "steps": int(passes.size),
            "seconds_per_step": wall / max(1, passes.size),
            "refit_passes_mean": float(refits.mean()), "refit_passes_max": int(refits.max()),
            "passes_per_step_mean": float(passes.mean()), "passes_per_step_max": int(passes.max()),
            "final_train_accuracy": float(clf.train_accuracy_[-1])}


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
    def key(r):
        return r["n"], r["D"], r["classes"], bool(r.get("own_process"))

    runs = [r for r in runs if key(r) != key(run)] + [run]
    runs.sort(key=key)

    def load(value):  # the 1-minute figure (older files recorded all three as one string)
        return value.split(",")[0].strip() if isinstance(value, str) else (f"{value[0]:.1f}" if value else "")

    rows = [[name, r["n"], r["D"], r["classes"], m["wall_seconds"], m["cpu_seconds"], m["seconds_per_step"],
             m["passes_per_step_mean"], m["passes_per_step_max"], m["refit_passes_mean"],
             m.get("peak_rss_bytes", r["peak_rss_bytes"]) / 1e9,
             r["X_bytes"] / 1e9, f"{load(r['load_start'])}; {load(m.get('load_end', r['load_end']))}",
             m.get("date", r["date"])]
            for r in runs for name, m in (("CS-G-OMP", r["omp"]), ("CS-G-FR", r["fr"]))]
    title = ("Multinomial CS-G-OMP and CS-G-FR, one row pair per recorded run (peak RSS: the method's own process "
             "with its data in an --own-process run, else one process holding the data and both fits; the load "
             "average is the 1-minute one of this shared 2-core machine)")
    return {"runs": runs, "tables": [{"title": title, "columns": COLUMNS, "rows": rows}]}


if __name__ == "__main__":
    main()
