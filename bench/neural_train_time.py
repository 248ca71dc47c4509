"""Training time of the default anytime neural network on MNIST-5k (5,000 x 784 pixels, 28 rows as steps).

    python bench/neural_train_time.py

Fits `AnytimeNetClassifier` with its defaults (group order from the linear CS-G-OMP fit, 32 units
per stage, CONST weights, early stopping) on the 5,000 MNIST images, each image row one group of unit
cost, and records the wall-clock and CPU time of the fit (the CPU time is what an idle machine's
wall time would be: the training is single-threaded numpy), the epochs run and the accuracy of the
last exit on the rows. Run it with OMP_NUM_THREADS=1 under nice on a shared machine; the load
average is recorded. Writes bench/results/neural_train_time.json.
"""

from __future__ import annotations

import time

import numpy as np
from _results import command_line, machine_info, write_result  # noqa: I001  (bench/ is on sys.path)

from edgeseq import AnytimeNetClassifier
from edgeseq.extractors import mnist


def main() -> None:
    images, y = mnist.load_mnist(None)
    X = images.reshape(len(images), -1).astype(np.float64)
    groups = [list(range(28 * r, 28 * r + 28)) for r in range(28)]
    wall, cpu = time.perf_counter(), time.process_time()
    clf = AnytimeNetClassifier(groups, [1.0] * 28, group_names=[f"row{r}" for r in range(28)],
                               random_state=0).fit(X, y)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    acc = [float(np.mean(p == y)) for p in clf.staged_predict(X)]
    rows = [["default AnytimeNetClassifier, 28 stages x 32 units", X.shape[0], X.shape[1], round(wall, 1),
             round(cpu, 1), clf.n_epochs_[0], round(acc[-1], 4)]]
    write_result("neural_train_time", {
        "tables": [{"title": "Fit time of the default network on MNIST-5k (limit: 60 s)",
                    "columns": ["model", "rows", "columns", "wall s", "CPU s", "best epoch", "last exit accuracy (rows)"],
                    "rows": rows}],
        "wall_seconds": wall, "cpu_seconds": cpu, "staged_accuracy": acc}, command_line(), machine_info())
    print(rows)


if __name__ == "__main__":
    main()
