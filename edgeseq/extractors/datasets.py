"""Ready-to-train data sets from the banks: features, labels, groups and measured costs in one object.

The examples, `make demo` and `bench/anytime_quality.py` all start here, so the data preparation
(extraction, cost loading or calibration) is written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from edgeseq.errors import ModelFormatError
from edgeseq.extractors.calibrate import calibrate_bank, read_calibration, write_groups_json


@dataclass
class BankData:
    """Features X (n, D) of `images`, labels y, one group per extractor with its measured cost.

    Examples
    --------
    >>> from edgeseq.extractors.datasets import digits_data
    >>> data = digits_data(n=20)
    >>> data.X.shape[0], len(data.names) == len(data.columns) == len(data.costs), sorted(data.extractors) == sorted(data.names)
    (20, True, True)
    """

    X: np.ndarray
    y: np.ndarray
    columns: list[list[int]]
    costs: np.ndarray
    names: list[str]
    measured_on: dict
    images: np.ndarray
    extractors: dict  # group name -> callable(one image) -> features, for the anytime loop

    def groups_doc(self) -> dict:
        """The GROUPS.json document (`edgeseq train --groups`) for these features.

        Examples
        --------
        It can be written with `write_groups_json` and read back by ``edgeseq train --groups``:

        >>> from edgeseq.extractors.calibrate import read_calibration, write_groups_json
        >>> from edgeseq.extractors.datasets import digits_data
        >>> data = digits_data(n=20)
        >>> import tempfile
        >>> doc = read_calibration(write_groups_json(data.groups_doc(), tempfile.mkdtemp() + "/GROUPS.json"))
        >>> [g["name"] for g in doc["groups"]] == data.names
        True
        """
        return {"groups": [{"name": n, "columns": c, "cost": float(k)}
                           for n, c, k in zip(self.names, self.columns, self.costs)],
                "cost_unit": "microseconds per item", "measured_on": self.measured_on}

    def subset(self, idx) -> "BankData":
        """The rows `idx` (features, labels and images together), e.g. a train/test split.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.extractors.datasets import digits_data
        >>> data = digits_data(n=30)
        >>> test = data.subset(np.arange(20, 30))
        >>> test.X.shape[0], test.images.shape, bool((test.y == data.y[20:]).all())
        (10, (10, 8, 8), True)
        """
        idx = np.asarray(idx)
        return BankData(self.X[idx], self.y[idx], self.columns, self.costs, self.names, self.measured_on,
                        self.images[idx], self.extractors)


def _from_doc(doc: dict, X, y, images, bank) -> BankData:
    groups = doc["groups"]
    return BankData(X, y, [g["columns"] for g in groups], np.array([g["cost"] for g in groups], dtype=float),
                    [g["name"] for g in groups], doc["measured_on"], images, {e.name: e.fn for e in bank})


def digits_data(recalibrate: bool = False, n: int | None = None, seed: int = 0,
                progress: Callable[[str], None] | None = None) -> BankData:
    """The digits bank on scikit-learn's digits (all 1,797, or a seeded subsample of `n`).

    Costs come from the stored calibration unless `recalibrate` (then measured now on 200 images).

    Examples
    --------
    Train an anytime classifier on the bank with its stored costs:

    >>> from edgeseq import AnytimeClassifier
    >>> from edgeseq.extractors.datasets import digits_data
    >>> data = digits_data(n=60)
    >>> clf = AnytimeClassifier(groups=data.columns, costs=data.costs, group_names=data.names).fit(data.X, data.y)
    >>> bool(clf.train_accuracy_[-1] > clf.train_accuracy_[0])
    True
    """
    from edgeseq.extractors import digits

    images, y = digits.load_images(n=n, seed=seed)
    bank = digits.bank()
    if recalibrate:
        doc = calibrate_bank(bank, images[:200], repeats=5, progress=progress)
    else:
        doc = digits.stored_costs()
    X, columns = digits.features(images)
    if columns != [g["columns"] for g in doc["groups"]]:
        raise ModelFormatError("the stored digits costs list other columns than the bank extracts (a group's "
                               "dimension changed); recalibrate (digits_data(recalibrate=True))")
    return _from_doc(doc, X, y, images, bank)


def mnist_data(recalibrate: bool = False, cache: Path | None = None,
               progress: Callable[[str], None] | None = None) -> BankData:
    """The MNIST bank on the 5,000 images (features cached; costs measured once per code version).

    Examples
    --------
    The images come from a pinned, hash-checked file; a corrupt cached copy is refused rather than used:

    >>> import tempfile
    >>> from pathlib import Path
    >>> from edgeseq.errors import IntegrityError
    >>> from edgeseq.extractors.datasets import mnist_data
    >>> cache = Path(tempfile.mkdtemp()); _ = (cache / "mnist_5k.csv.gz").write_bytes(b"corrupt")
    >>> try:
    ...     mnist_data(cache=cache)
    ... except IntegrityError as exc:
    ...     print("does not match the pinned" in str(exc))
    True
    """
    from edgeseq.extractors import mnist

    images, y = mnist.load_mnist(cache)
    bank = mnist.bank()
    cost_path = (cache or mnist.cache_dir()) / f"mnist_costs_{mnist.fingerprint(images[:1])}.json"
    if recalibrate or not cost_path.exists():
        doc = calibrate_bank(bank, images[:30], repeats=3, progress=progress)
        write_groups_json(doc, cost_path)
    doc = read_calibration(cost_path, bank=bank, sample=images[0])  # a changed dimension is refused
    X, columns, _ = mnist.cached_features(images, cache, progress=progress)
    return _from_doc(doc, X, y, images, bank)
