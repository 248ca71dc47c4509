"""Quality of anytime neural networks against OPT and the linear and tree models, on three data sets.

    python bench/neural_quality.py [--seeds 3] [--datasets digits mnist basic_motions] [--max-epochs 40]

Data sets, groups and costs (the same for every method):

- digits: scikit-learn's 8x8 digits, each image row one step (a group of 8 values), unit costs.
- mnist: MNIST-5k (`edgeseq.extractors.mnist`), 7 groups of 4 image rows (112 pixels each), unit
  costs. To keep the run short the methods train on 1,000 rows per seed (subsampled, stratified) and
  are tested on 1,500 others: on 2,000 rows the linear model alone took two minutes per seed on the
  shared machine, the tree model longer.
- basic_motions: BasicMotions (smart-watch IMU, 4 activities, 80 windows of 6 channels x 100 steps at
  10 Hz) read out of the sktime wheel (`bench/_sensor_data.py`; the optional ``bench`` extra). Four
  windowed groups of shape (3 channels, 50 steps): the accelerometer and the gyroscope over the first
  and the second 5 seconds; a gyroscope half costs 3, an accelerometer half 1 (a MEMS gyroscope draws
  several times an accelerometer's current). Split 50/50 per seed: 40 training windows.

For each seed (a stratified split; the methods' seed) the anytime network (`AnytimeNetClassifier`, 32
units per stage, group order from the linear CS-G-OMP fit) is trained under every scheme (CONST,
LINEAR, Half-End, SIEVE, AdaLoss), as an EANN (base 2, AdaLoss), with AdaLoss over a random group
order, and as OPT (for each depth a network trained for its last exit alone); against them the
linear `AnytimeClassifier` and the tree `AnytimeBoostingClassifier` on the same groups and costs.
Networks stop after at most ``--max-epochs`` epochs (default 40, patience 10; the estimator's
defaults are 100 and 20) to keep the whole run short on a shared 2-core machine.

Recorded per method: test accuracy at budgets k + 0.5 (k = 1 .. total group cost; a network's
compute is priced at 4e-8 per multiply-accumulate, so a stage whose groups fit is affordable), the
step timeliness (mean test accuracy over budgets uniform in [0, total group cost], the answer at
budget B being the last committing stage with cumulative cost <= B), the final accuracy and its gap
to OPT's last network, and whether the committed curve is monotone on the network's own validation
rows (log-loss non-increasing over committing stages: EANN, and a network with commit="improving",
commit an exit only when it is).
Writes bench/results/neural_quality.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
import warnings

import numpy as np
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)
from afr_trees import step_timeliness
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state

from edgeseq import AnytimeBoostingClassifier, AnytimeClassifier, AnytimeNetClassifier
from edgeseq.train.neural.estimators import opt_networks

SCHEMES = ["const", "linear", "half_end", "sieve", "adaloss"]
IMPROVING = "const, commit=improving"
NETS = SCHEMES + [IMPROVING, "EANN (b=2, AdaLoss)", "AdaLoss, random order"]
RESULT = Path(__file__).resolve().parent / "results" / "neural_quality.json"
METHODS = NETS + ["OPT", "linear (AnytimeClassifier)", "tree (AnytimeBoostingClassifier)"]


def digits():
    X, y = load_digits(return_X_y=True)
    groups = [list(range(8 * r, 8 * r + 8)) for r in range(8)]
    return X, y, groups, [1.0] * 8, [f"row{r}" for r in range(8)], None, dict(test_size=0.3), {}


def mnist_5k():
    from edgeseq.extractors import mnist
    images, y = mnist.load_mnist(None)
    groups = [list(range(112 * r, 112 * r + 112)) for r in range(7)]
    return (images.reshape(len(images), -1), y, groups, [1.0] * 7, [f"rows{4 * r}-{4 * r + 3}" for r in range(7)],
            None, dict(train_size=1000, test_size=1500), {})


def basic_motions():
    from _sensor_data import load_basic_motions
    X, y, info = load_basic_motions()
    L = info["length"]

    def cols(channels, t0):  # channel-major inside the group, as the window declares
        return [c * L + t for c in channels for t in range(t0, t0 + L // 2)]
    groups = [cols([0, 1, 2], 0), cols([3, 4, 5], 0), cols([0, 1, 2], L // 2), cols([3, 4, 5], L // 2)]
    names = ["acc 0-5 s", "gyro 0-5 s", "acc 5-10 s", "gyro 5-10 s"]
    # 40 training windows: minibatches of 8 so that an epoch is a few Adam steps, not one, and a quarter
    # held out for early stopping (the default tenth would be 4 windows, 1 per class)
    return (X, y, groups, [1.0, 3.0, 1.0, 3.0], names, [(3, L // 2)] * 4, dict(test_size=0.5),
            dict(batch_size=8, validation_fraction=0.25))


DATASETS = {"digits": digits, "mnist": mnist_5k, "basic_motions": basic_motions}


def validation_rows(n: int, random_state: int, fraction: float = 0.1) -> np.ndarray:
    """The rows `AnytimeNetClassifier.fit` holds out for early stopping (and EANN's commits).

    Re-derived from its seed; `committed_monotone` checks the derivation against EANN's commits.
    """
    rng = np.random.default_rng(check_random_state(random_state).randint(1 << 31))
    return rng.permutation(n)[:int(round(fraction * n))]


def staged(est, X, y):
    """Per stage 0..K: accuracy and log-loss on (X, y), and whether the stage commits."""
    acc, ll = [], []
    idx = np.searchsorted(est.classes_, y)
    for p in est.staged_predict_proba(X):
        acc.append(float(np.mean(est.classes_[p.argmax(axis=1)] == y)))
        ll.append(float(-np.mean(np.log(np.clip(p[np.arange(len(y)), idx], 1e-15, None)))))
    model = getattr(est, "stage_model_", None)
    commits = [bool(getattr(s, "commit", True)) for s in model.stages] if hasattr(model, "stages") else [True] * len(acc)
    if len(commits) != len(acc):
        commits = [True] * len(acc)
    return np.array(acc), np.array(ll), np.array(commits)


def rule_curve(cum_cost, acc, commits):
    """Accuracy of the budget rule at each stage's cumulative cost: the last committing stage so far."""
    out, last = [], acc[0]
    for a, c in zip(acc, commits):
        last = a if c else last
        out.append(float(last))
    return np.asarray(cum_cost, float), np.array(out)


def at_budgets(cc, rule_acc, budgets):
    return [float(rule_acc[np.searchsorted(cc, b, side="right") - 1]) for b in budgets]


def committed_monotone(est, X, y, seed: int) -> bool:
    """Log-loss on the net's validation rows never rises from one committing stage to the next."""
    va = validation_rows(len(y), seed, est.validation_fraction)
    _, ll, commits = staged(est, X[va], y[va])
    if est.eann_base is not None or est.commit == "improving":  # the re-derived rows must be the ones the commits were decided on
        from edgeseq.train.neural.eann import commits_from_losses
        if commits_from_losses(ll[0], ll[1:]) != list(commits[1:]):
            raise SystemExit("validation rows re-derived wrongly: EANN's commits do not follow from them")
    seq = ll[commits]
    return bool(np.all(np.diff(seq) <= 1e-12))


def run_seed(name, X, y, groups, costs, names, shapes, split, net_kw, seed, max_epochs, log):
    Xa, Xt, ya, yt = train_test_split(X, y, stratify=y, random_state=seed, **split)
    total = float(np.sum(costs))
    budgets = [k + 0.5 for k in range(1, int(np.ceil(total)) + 1)]
    out = {}

    def record(label, est, seconds):
        acc, _, commits = staged(est, Xt, yt)
        cc, rule = rule_curve(est.cum_cost_, acc, commits)
        rec = {"fit_s": seconds, "cum_cost": cc.tolist(), "accuracy": rule.tolist(),
               "at_budgets": at_budgets(cc, rule, budgets), "final_accuracy": float(rule[-1]),
               "step_timeliness": step_timeliness(cc, rule, total)}
        if isinstance(est, AnytimeNetClassifier):
            rec["monotone_on_validation"] = committed_monotone(est, Xa, ya, seed)
            rec["epochs"] = list(est.n_epochs_)
            rec["order"] = [est.group_names[g] for g in est.sequence_]
        if hasattr(est, "model_kind_"):
            rec["model_kind"] = est.model_kind_  # the boosting estimator keeps its linear model when trees do not win
        out[label] = rec
        log(f"{name} seed {seed} {label}: final {rec['final_accuracy']:.3f}, timeliness {rec['step_timeliness']:.3f}, "
            f"{seconds:.1f} s")

    base = dict(group_names=names, group_shapes=shapes, max_epochs=max_epochs, patience=10, random_state=seed,
                **net_kw)
    ada = None
    for label in NETS:
        kw = dict(base)
        g, c = groups, costs
        if label in SCHEMES:
            kw["scheme"] = label
        elif label == IMPROVING:  # the same CONST network, only the exits that improve on validation commit
            kw.update(scheme="const", commit="improving")
        elif label.startswith("EANN"):
            kw.update(eann_base=2, scheme="adaloss")
        else:  # a random group order, given as the order of the groups
            kw["scheme"] = "adaloss"
            perm = np.random.default_rng(1000 + seed).permutation(len(groups))
            g, c = [groups[i] for i in perm], [costs[i] for i in perm]
            kw.update(order="given", group_names=[names[i] for i in perm],
                      group_shapes=None if shapes is None else [shapes[i] for i in perm])
        t = time.perf_counter()
        est = AnytimeNetClassifier(g, c, **kw).fit(Xa, ya)
        record(label, est, time.perf_counter() - t)
        if label == "adaloss":
            ada = est
    t = time.perf_counter()
    opts = opt_networks(ada, Xa, ya)
    seconds = time.perf_counter() - t
    acc = [float(np.mean(o.predict(Xt) == yt)) for o in opts]
    cc = np.asarray(ada.cum_cost_, float)  # OPT network i has the same groups and widths as ada's first i stages
    prior = staged(ada, Xt, yt)[0][0]
    rule = np.array([prior] + acc)
    out["OPT"] = {"fit_s": seconds, "cum_cost": cc.tolist(), "accuracy": rule.tolist(),
                  "at_budgets": at_budgets(cc, rule, budgets), "final_accuracy": float(rule[-1]),
                  "step_timeliness": step_timeliness(cc, rule, total)}
    log(f"{name} seed {seed} OPT: final {rule[-1]:.3f}, {seconds:.1f} s")
    for label, make in (("linear (AnytimeClassifier)", lambda: AnytimeClassifier(groups, costs, group_names=names)),
                        ("tree (AnytimeBoostingClassifier)",
                         lambda: AnytimeBoostingClassifier(groups, costs, group_names=names, n_jobs=1,
                                                           random_state=seed))):
        t = time.perf_counter()
        est = make().fit(Xa, ya)
        record(label, est, time.perf_counter() - t)
    return out, budgets


def ms(values, fmt="{:.3f}"):
    a = np.asarray(values, float)
    return f"{fmt.format(a.mean())} ± {fmt.replace('+', '').format(a.std())}"


def tables(results: dict) -> list[dict]:
    out = []
    for name, res in results.items():
        runs, budgets = res["runs"], res["budgets"]
        opt_final = np.array([r["OPT"]["final_accuracy"] for r in runs])
        rows, curve_rows = [], []
        for m in METHODS:
            recs = [r[m] for r in runs]
            fin = np.array([r["final_accuracy"] for r in recs])
            mono = [r.get("monotone_on_validation") for r in recs]
            kinds = sorted({r["model_kind"] for r in recs if "model_kind" in r})
            label = f"{m}: kept {' / '.join(kinds)}" if kinds else m
            rows.append([label, ms([r["step_timeliness"] for r in recs]), ms(fin),
                         "—" if m == "OPT" else ms(100 * (fin - opt_final), "{:+.2f}"),
                         "n/a" if None in mono else f"{sum(mono)}/{len(mono)}",
                         f"{np.mean([r['fit_s'] for r in recs]):.1f}"])
            a = np.array([r["at_budgets"] for r in recs])
            curve_rows.append([m, *(f"{v:.3f}" for v in a.mean(axis=0))])
        out.append({"title": f"{name}: step timeliness (mean test accuracy over budgets in [0, total cost]), final "
                             f"accuracy, gap to OPT, committed curve monotone on validation (seeds), fit time; "
                             f"mean ± std over {len(runs)} seeds",
                    "columns": ["method", "step timeliness", "final accuracy", "final − OPT (pp)",
                                "monotone on validation", "fit s"], "rows": rows})
        out.append({"title": f"{name}: test accuracy at budget B (mean over {len(runs)} seeds)",
                    "columns": ["method", *(f"B={b:g}" for b in budgets)], "rows": curve_rows})
    return out


def superseded(entries: dict, redone) -> dict:
    """The entries (one per run, keyed by the data sets it ran, oldest first) that still describe a record.

    A run whose every data set was run again, by this run (`redone`) or a later one, describes no
    record left in the file, so its command, wall time and load are dropped.

    >>> superseded({"digits mnist": 1, "mnist": 2}, ["digits"])
    {'mnist': 2}
    >>> superseded({"digits mnist": 1}, ["digits"])
    {'digits mnist': 1}
    """
    keys = list(entries)
    return {k: entries[k] for i, k in enumerate(keys)
            if not set(k.split()) <= set(redone).union(*(later.split() for later in keys[i + 1:]))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--max-epochs", type=int, default=40)
    ap.add_argument("--merge", action="store_true",
                    help="keep the data sets of the committed result file that this run does not redo "
                         "(to run the data sets in separate processes)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    results = {}
    for name in args.datasets:
        X, y, groups, costs, names, shapes, split, net_kw = DATASETS[name]()
        runs, budgets = [], None
        for seed in range(args.seeds):
            r, budgets = run_seed(name, X, y, groups, costs, names, shapes, split, net_kw, seed, args.max_epochs,
                                  lambda s: print(s, flush=True))
            runs.append(r)
        results[name] = {"runs": runs, "budgets": budgets, "groups": names, "costs": costs,
                         "shapes": shapes, "split": split, "network_settings": net_kw}
    key = " ".join(args.datasets)
    info = machine_info()
    wall, commands = {key: time.perf_counter() - t0}, {key: command_line()}
    loads = {key: {"load_start": info["load_start"], "load_end": info["load_end"]}}
    if args.merge and RESULT.is_file():
        old = json.loads(RESULT.read_text(encoding="utf-8"))
        wall = {**superseded(old.get("wall_seconds", {}), args.datasets), **wall}
        commands = {**superseded(old.get("commands", {}), args.datasets), **commands}
        loads = {**superseded(old.get("loads", {}), args.datasets), **loads}
        results = {**{k: v for k, v in old["results"].items() if k not in results}, **results}
        results = {k: results[k] for k in DATASETS if k in results}
    write_result("neural_quality", {
        "tables": tables(results), "results": results, "seeds": args.seeds, "max_epochs": args.max_epochs,
        "patience": 10, "wall_seconds": wall, "commands": commands, "loads": loads,
        "notes": "networks capped at --max-epochs with patience 10 (estimator defaults 100 / 20); MNIST-5k "
                 "subsampled to 1,000 training and 1,500 test rows per seed; BasicMotions split 50/50 "
                 "(40 training windows)"}, command_line(), info)


if __name__ == "__main__":
    main()
