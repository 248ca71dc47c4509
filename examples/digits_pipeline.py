"""Digits, end to end: measured feature costs -> CS-G-OMP -> export -> Python runtime -> C firmware.

    python examples/digits_pipeline.py [OUT_DIR]
"""

import sys
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from edgeseq import AnytimeRegressor
from edgeseq import export_model
from edgeseq.extractors.datasets import digits_data
from edgeseq.runtime.session import AnytimeSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _firmware import firmware_demo  # noqa: E402

out = Path(sys.argv[1] if len(sys.argv) > 1 else "out/examples/digits")

# 1. features of 17 extractor groups and their costs (us per image, measured and shipped with edgeseq)
data = digits_data()
train, test = train_test_split(np.arange(len(data.y)), test_size=0.3, random_state=0)
X_train, X_test, y_train, y_test = data.X[train], data.X[test], data.y[train], data.y[test]

# 2. learn the order of the groups and one linear model per prefix (one-hot targets, squared loss)
model = AnytimeRegressor(data.columns, data.costs, method="omp", group_names=data.names)
model.fit(X_train, np.eye(10)[y_train])
print("order:", [data.names[g] for g in model.fitted_sequence_.order])

# 3. export: one ONNX graph per prefix, a manifest, and C code
export_model(model.fitted_sequence_, out, force=True)

# 4. Python runtime: batch accuracy per budget, then the anytime loop on one image with real extractors
with AnytimeSession(out) as session:
    features = {name: X_test[:, cols] for name, cols in zip(data.names, data.columns)}
    for budget in (5, 50, 200, 2000):
        scores = session.predict(features, budget=budget)
        print(f"budget {budget:>5} us: prefix {session.prefix_for_budget(budget):>2}, "
              f"accuracy {np.mean(scores.argmax(axis=1) == y_test):.3f}")
    result = session.run(data.extractors, budget=100, inputs=data.images[test[0]])
    print(f"anytime loop on one held-out image: label {int(np.argmax(result.prediction))} (true {y_test[0]}), "
          f"{result.prefix} groups in {result.elapsed_s * 1e3:.2f} ms")

# 5. the C runtime as firmware: a simulated timer interrupt reads the committed prediction
for text in firmware_demo(out, seeds=(1,)) or ["(no C compiler: skipped the firmware demo)"]:
    print(text.strip().splitlines()[-1])
