"""Write scikit-learn's bundled breast-cancer data as a CSV plus a GROUPS.json for the CLI quick start.

Ten measurement groups (mean, standard error, worst of radius, texture, ...). No published costs
exist for these measurements, so the costs here are ILLUSTRATIVE: 1 for the cheap size/shape
measurements and 3 for the texture-like ones, to give the order something to trade off.

    python examples/breast_cancer_csv.py data.csv groups.json
"""

import csv
import json
import sys

from sklearn.datasets import load_breast_cancer

data_path, groups_path = (sys.argv[1:3] + ["data.csv", "groups.json"][len(sys.argv[1:3]):])
bc = load_breast_cancer()
columns = [name.replace(" ", "_") for name in bc.feature_names]
with open(data_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(columns + ["malignant"])
    for row, label in zip(bc.data, bc.target):
        w.writerow([repr(float(v)) for v in row] + [int(label == 0)])
measures = [name.removeprefix("mean ") for name in bc.feature_names[:10]]
costly = {"texture", "smoothness", "compactness", "concavity", "concave points", "symmetry", "fractal dimension"}
groups = [{"name": m, "columns": [columns[i], columns[i + 10], columns[i + 20]], "cost": 3.0 if m in costly else 1.0}
          for i, m in enumerate(measures)]
with open(groups_path, "w") as f:
    json.dump({"groups": groups}, f, indent=1)
print(f"wrote {data_path} ({len(bc.data)} rows) and {groups_path} ({len(groups)} groups)")
