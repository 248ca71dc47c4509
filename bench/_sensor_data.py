"""A real sensor-window data set for the benchmarks: BasicMotions, read out of the installed `sktime` wheel.

BasicMotions (the UEA multivariate archive) is four students wearing a smart watch while standing,
walking, running and playing badminton: 80 windows of 10 s at 10 Hz, 6 channels (a 3-axis
accelerometer, then a 3-axis gyroscope), 4 classes, split 40 / 40 by its authors. It is the kind of
input edgeseq's windowed groups are for (IMU windows on a microcontroller), and sktime (like aeon)
ships it inside its wheel, so nothing is downloaded at run time.

Only the bench needs it: `sktime` is in the optional ``bench`` extra (pinned in constraints.txt), never
a dependency of edgeseq. sktime rather than aeon because aeon 1.6 caps numba below the releases that
support the pinned numpy, so pip cannot install it beside edgeseq's test set. The loader does not
import either package: it locates the installed package's folder (an aeon install works as well) and
parses the ``.ts`` text format itself, bounded in size.

Used as ``from _sensor_data import load_basic_motions`` by scripts run as ``python bench/<name>.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

MAX_BYTES = 4 << 20  # each BasicMotions file is about 230 KB; refuse anything far larger
CHANNELS = ("acc_x", "acc_y", "acc_z", "gyro_x", "gyro_y", "gyro_z")


def _data_dir(name: str) -> Path:
    for package in ("sktime", "aeon"):
        spec = importlib.util.find_spec(package)  # finds the package without running its __init__
        if spec is not None and spec.submodule_search_locations:
            d = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / name
            if d.is_dir():
                return d
    raise SystemExit(f"this benchmark reads {name} out of the sktime wheel: pip install -c constraints.txt -e '.[bench]'")


def read_ts(path: Path) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Parse an equal-length multivariate ``.ts`` file: (X (n, channels, length), labels (n,), class names).

    Each data line is ``c1v1,c1v2,...:c2v1,...:label``; header lines start with ``@``, comments with ``#``.
    """
    if path.stat().st_size > MAX_BYTES:
        raise SystemExit(f"{path} is larger than {MAX_BYTES} bytes; not the BasicMotions file this loader expects")
    rows, labels, classes, in_data = [], [], (), False
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        low = line.lower()
        if not in_data:
            if low.startswith("@classlabel"):
                classes = tuple(line.split()[2:])
            elif low.startswith("@data"):
                in_data = True
            continue
        *dims, label = line.split(":")
        rows.append([np.array(d.split(","), dtype=np.float64) for d in dims])
        labels.append(label)
    try:
        X = np.array(rows, dtype=np.float64)
    except ValueError:
        X = np.zeros(0)
    if X.ndim != 3 or not np.all(np.isfinite(X)):
        raise SystemExit(f"{path}: expected equal-length series without missing values")  # ragged rows too
    return X, np.array(labels), classes


def load_basic_motions() -> tuple[np.ndarray, np.ndarray, dict]:
    """All 80 BasicMotions windows as flat rows (channel-major, 6 x 100 = 600 columns) and labels.

    Returns
    -------
    X : ndarray of shape (80, 600)
        Column c·100 + t is channel c (``CHANNELS``) at time step t: a window group's layout.
    y : ndarray of shape (80,)
        Class index into ``info["classes"]``.
    info : dict
        ``classes``, ``channels``, ``length`` (100), ``n_train`` (40: the first 40 rows are the
        authors' training split) and ``source`` (the files read).
    """
    d = _data_dir("BasicMotions")
    Xtr, ltr, classes = read_ts(d / "BasicMotions_TRAIN.ts")
    Xte, lte, _ = read_ts(d / "BasicMotions_TEST.ts")
    X3 = np.concatenate([Xtr, Xte])
    labels = np.concatenate([ltr, lte])
    classes = tuple(classes) or tuple(sorted(set(labels)))
    y = np.array([classes.index(v) for v in labels], np.int64)
    n, C, L = X3.shape
    return X3.reshape(n, C * L), y, {"classes": classes, "channels": CHANNELS[:C], "length": L,
                                     "n_train": len(Xtr), "source": f"{d.parents[2].name} wheel: datasets/data/BasicMotions/*.ts"}
