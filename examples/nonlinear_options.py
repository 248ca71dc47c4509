"""The three nonlinear options side by side on breast cancer, then the chosen one exported and run.

Breast cancer's 10 measurements are the groups (mean, standard error and worst value each); as an
illustration they cost 1, 2, ..., 10 in column order (no published costs exist for this data). The
options:

* AFR (`edgeseq.AFRClassifier`): trees grown for the budget, a linear readout per stage;
* a LightGBM ensemble imported in boosting order (`edgeseq.from_lightgbm`), and the same ensemble
  ordered by gain per cost on held-out rows (`edgeseq.sequence_trees`);
* LightGBM's own cost-efficient gradient boosting (CEGB: `cegb_penalty_feature_coupled`, each feature
  charged its group's cost), imported in boosting order;

and the linear CS-G-OMP classifier for reference. Each is scored by held-out accuracy at the full
budget and its accuracy-timeliness (the mean accuracy of a budget drawn uniformly from 0 to the total
cost). The cost-sequenced ensemble is then exported (ONNX stage graphs + C), verified, and run by the
Python runtime and the C firmware demo.

    python examples/nonlinear_options.py [OUT_DIR]
"""

import sys
from pathlib import Path

import lightgbm as lgb  # pip install "edgeseq[trees]"
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

import edgeseq
from edgeseq.evaluate.verify import verify_export
from edgeseq import export_model
from edgeseq.runtime.session import AnytimeSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _firmware import firmware_demo  # noqa: E402

out = Path(sys.argv[1] if len(sys.argv) > 1 else "out/examples/nonlinear")

data = load_breast_cancer()
names = [n.removeprefix("mean ") for n in data.feature_names[:10]]
groups = [[i, i + 10, i + 20] for i in range(10)]
costs = np.arange(1.0, 11.0)
X_train, X_test, y_train, y_test = train_test_split(data.data, data.target, test_size=0.3, random_state=0,
                                                    stratify=data.target)
X_fit, X_val, y_fit, y_val = train_test_split(X_train, y_train, test_size=0.25, random_state=0, stratify=y_train)


def timeliness(cum_cost, staged_labels) -> tuple[float, float]:
    """(mean accuracy over budgets uniform in [0, total cost], full-budget accuracy)."""
    acc = [float(np.mean(labels == y_test)) for labels in staged_labels]
    edges = np.append(np.minimum(cum_cost, costs.sum()), costs.sum())
    return float(np.sum(np.diff(edges) * acc) / costs.sum()), acc[-1]


def tree_labels(model, classes):
    return [classes[np.argmax(model.apply_link(z), axis=1)] for z in model.staged_decision(X_test)]


params = dict(n_estimators=100, num_leaves=15, learning_rate=0.1, verbose=-1, n_jobs=1, deterministic=True,
              force_row_wise=True)
clf = lgb.LGBMClassifier(**params).fit(X_fit, y_fit)
boosting = edgeseq.from_lightgbm(clf, groups, costs, group_names=names)
sequenced = edgeseq.sequence_trees(boosting, X_val, y_val)
feature_cost = np.zeros(X_train.shape[1])
for g, cols in enumerate(groups):
    feature_cost[cols] = costs[g]
cegb = lgb.LGBMClassifier(**params, cegb_tradeoff=1.0,
                          cegb_penalty_feature_coupled=(feature_cost / feature_cost.sum()).tolist()).fit(X_fit, y_fit)
cegb_model = edgeseq.from_lightgbm(cegb, groups, costs, group_names=names)
afr = edgeseq.AFRClassifier(groups, costs, group_names=names).fit(X_train, y_train)
linear = edgeseq.AnytimeClassifier(groups, costs, group_names=names).fit(X_train, y_train)

rows = {"AFR": timeliness(afr.cum_cost_, afr.staged_predict(X_test)),
        "LightGBM, boosting order": timeliness(boosting.cum_cost, tree_labels(boosting, clf.classes_)),
        "LightGBM, cost-sequenced": timeliness(sequenced.cum_cost, tree_labels(sequenced, clf.classes_)),
        "LightGBM-CEGB": timeliness(cegb_model.cum_cost, tree_labels(cegb_model, cegb.classes_)),
        "CS-G-OMP (linear)": timeliness(linear.cum_cost_, linear.staged_predict(X_test))}
print(f"{'method':<26} {'timeliness':>10} {'full-budget accuracy':>21}")
for method, (t, full) in rows.items():
    print(f"{method:<26} {t:>10.3f} {full:>21.3f}")
print("cost-sequenced order:", [" + ".join(names[g] for g in s.new_groups) for s in sequenced.stages[1:]])

export_model(sequenced, out, force=True)
report = verify_export(out)
print(f"verify: {'ok' if report.ok else 'MISMATCH'} ({len(report.checks)} stages; {report.c_note or 'C compared'})")
with AnytimeSession(out) as session:
    features = {names[g]: X_test[:, groups[g]] for g in range(10)}
    for budget in (11, 20, 30, 55):
        pred = session.predict(features, budget=budget)
        print(f"Python runtime, budget {budget:>2}: stage {pred.prefix}, accuracy {np.mean(pred.label == y_test):.3f}")

for text in firmware_demo(out, seeds=(2,)) or ["(no C compiler: skipped the firmware demo)"]:
    print("C firmware demo:", text.strip().splitlines()[-1])
