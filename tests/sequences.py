"""Build FittedSequence objects directly (no training), so export/runtime tests can cover shapes,
links and hostile names independently of the training code."""

from __future__ import annotations

import numpy as np

from edgeseq.forms.linear import FittedSequence


def random_sequence(rng: np.random.Generator, group_sizes=(2, 3, 1), n_outputs: int = 1,
                    link: str = "identity", names=None, n_unused: int = 1,
                    scale: float = 1.0) -> FittedSequence:
    """A random but valid FittedSequence: shuffled columns, random order, random costs and weights.

    `link="sigmoid"` forces one output (binary); `"softmax"` uses `n_outputs` classes.
    """
    sizes = list(group_sizes)
    J = len(sizes)
    D = sum(sizes) + n_unused
    perm = rng.permutation(D)
    cols, start = [], 0
    for s in sizes:
        cols.append(np.sort(perm[start:start + s]))
        start += s
    order = rng.permutation(J)
    P = 1 if link == "sigmoid" else n_outputs
    coefs, d = [], 0
    for j in range(J + 1):
        if j:
            d += sizes[order[j - 1]]
        coefs.append(rng.normal(size=(d, P)) * scale)
    intercepts = rng.normal(size=(J + 1, P))
    if link == "identity":
        task, out_names, classes = "regression", tuple(f"y{p}" for p in range(P)), None
    else:
        task = "classification"
        k = 2 if link == "sigmoid" else P
        classes = np.array([f"c{i}" for i in range(k)])
        out_names = tuple(classes.tolist())
    return FittedSequence(
        task=task, link=link, n_features_in=D,
        group_names=tuple(names) if names is not None else tuple(f"g{i}" for i in range(J)),
        group_columns=tuple(cols), costs=rng.uniform(0.5, 5.0, size=J), order=order,
        coefs=tuple(coefs), intercepts=intercepts, output_names=out_names, classes=classes,
        provenance={"method": "synthetic"}, y_was_1d=(P == 1 and link == "identity"))
