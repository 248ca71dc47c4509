"""Breast cancer (scikit-learn's bundled WDBC): 10 measurement groups -> AnytimeClassifier -> export -> runtimes.

Each of the 10 cell-nucleus measurements (radius, texture, ...) comes as mean, standard error and
worst value; a group is those 3 columns. No published per-measurement costs exist for this data, so
every group costs 1 (the order then ranks measurements by how much each adds).

    python examples/breast_cancer_pipeline.py [OUT_DIR]
"""

import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from edgeseq import AnytimeClassifier
from edgeseq import export_model
from edgeseq.runtime.session import AnytimeSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _firmware import firmware_demo  # noqa: E402

out = Path(sys.argv[1] if len(sys.argv) > 1 else "out/examples/breast_cancer")

data = load_breast_cancer()
names = [n.removeprefix("mean ") for n in data.feature_names[:10]]  # "radius", "texture", ...
groups = [[i, i + 10, i + 20] for i in range(10)]  # mean, standard error, worst
X_train, X_test, y_train, y_test = train_test_split(data.data, data.target, test_size=0.3, random_state=0,
                                                    stratify=data.target)

model = AnytimeClassifier(groups, costs=np.ones(10), method="omp", group_names=names).fit(X_train, y_train)
seq = model.fitted_sequence_
print("measurement order:", [names[g] for g in seq.order])
for j in range(seq.n_prefixes):
    print(f"  {j:>2} measurements: held-out accuracy {np.mean(model.predict(X_test, prefix=j) == y_test):.3f}")

export_model(seq, out, force=True)
with AnytimeSession(out) as session:
    features = {names[g]: X_test[:, groups[g]] for g in range(10)}
    for budget in (1, 3, 10):
        pred = session.predict(features, budget=budget)
        print(f"Python runtime, budget {budget:>2}: accuracy {np.mean(pred.label == y_test):.3f}")

for text in firmware_demo(out, seeds=(2,)) or ["(no C compiler: skipped the firmware demo)"]:
    print("C firmware demo:", text.strip().splitlines()[-1])
