"""A bank of 17 feature extractors over scikit-learn's bundled 8x8 digits — the embedded default.

No download and no extra package (numpy + scipy only), so `make demo` runs anywhere. The groups are
chosen to cost clearly different amounts, from a slice of pixels (~1 us) to rotations, upsampled
HOG and Gabor filtering (hundreds of us), the way real pipelines mix cheap and expensive features.
Measured costs for this bank ship in ``data/digits_costs.json`` (see :func:`stored_costs`).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
from scipy import fft as sfft
from scipy import ndimage as ndi

from edgeseq.extractors.calibrate import Extractor, extract, read_calibration

STORED_COSTS = "digits_costs.json"
_BINS9 = np.linspace(0.0, np.pi, 10)


def _ink(img):
    return np.array([img.sum(), img.std(), np.count_nonzero(img > 4), img.max()])


def _pixels_centre(img):
    return img[2:6, 2:6].ravel()


def _pixels_half(img):
    """The image at half resolution (4x4 means of 2x2 blocks)."""
    return img.reshape(4, 2, 4, 2).mean(axis=(1, 3)).ravel()


def _row_projection(img):
    return img.sum(axis=1)


def _col_projection(img):
    return img.sum(axis=0)


def _zoning_2x2(img):
    return img.reshape(2, 4, 2, 4).mean(axis=(1, 3)).ravel()


def _moments(img):
    """Centroid, second/third-order central moments and the 7 Hu invariants."""
    total = img.sum() + 1e-9
    yy, xx = np.mgrid[0:8, 0:8].astype(np.float64)
    cy, cx = (yy * img).sum() / total, (xx * img).sum() / total
    dy, dx = yy - cy, xx - cx

    def eta(p, q):
        return (dx ** p * dy ** q * img).sum() / total ** (1 + (p + q) / 2)

    n20, n02, n11 = eta(2, 0), eta(0, 2), eta(1, 1)
    n30, n03, n21, n12 = eta(3, 0), eta(0, 3), eta(2, 1), eta(1, 2)
    a, b = n30 + n12, n21 + n03
    hu = [n20 + n02, (n20 - n02) ** 2 + 4 * n11 ** 2, (n30 - 3 * n12) ** 2 + (3 * n21 - n03) ** 2,
          a ** 2 + b ** 2,
          (n30 - 3 * n12) * a * (a ** 2 - 3 * b ** 2) + (3 * n21 - n03) * b * (3 * a ** 2 - b ** 2),
          (n20 - n02) * (a ** 2 - b ** 2) + 4 * n11 * a * b,
          (3 * n21 - n03) * a * (a ** 2 - 3 * b ** 2) - (n30 - 3 * n12) * b * (3 * a ** 2 - b ** 2)]
    return np.array([cy, cx, n20, n02, n11, n30, n03, n21, n12] + hu)


def _fft_bands(img):
    """Mean FFT magnitude in 5 radial frequency bands."""
    mag = np.abs(np.fft.fftshift(np.fft.fft2(img)))
    yy, xx = np.mgrid[-4:4, -4:4]
    r = np.hypot(yy, xx)
    return np.array([mag[(r >= lo) & (r < hi)].mean() for lo, hi in
                     ((0, 1), (1, 2), (2, 3), (3, 4), (4, 6))])


def _dct_low(img):
    return sfft.dctn(img, norm="ortho")[:4, :4].ravel()


def _hog_cells(img, cell):
    """HOG: unsigned gradient orientations, 9 bins, per `cell` x `cell` cell, L2-normalised."""
    gy, gx = np.gradient(img)
    mag, ang = np.hypot(gx, gy), np.mod(np.arctan2(gy, gx), np.pi)
    n = img.shape[0] // cell
    feats = []
    for i in range(n):
        for j in range(n):
            sl = (slice(i * cell, (i + 1) * cell), slice(j * cell, (j + 1) * cell))
            h, _ = np.histogram(ang[sl], bins=_BINS9, weights=mag[sl])
            feats.append(h / (np.linalg.norm(h) + 1e-6))
    return np.concatenate(feats)


def _hog(img):
    return _hog_cells(img, 4)


def _hog_upsampled(img):
    """HOG on the image upsampled 4x by cubic splines: finer gradients at a much higher cost."""
    return _hog_cells(ndi.zoom(img, 4, order=3), 8)


# The 8 neighbours in circular order (a ring, so bit transitions between consecutive entries count).
_RING8 = ((-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1))


@lru_cache(maxsize=1)
def _uniform_labels() -> np.ndarray:
    """Map each of the 256 8-bit codes to its rotation-invariant uniform label (Ojala's riu2): a code
    with at most 2 circular 0/1 transitions gets its number of ones (0..8), every other code 9."""
    codes = np.arange(256)
    bits = (codes[:, None] >> np.arange(8)) & 1
    transitions = np.count_nonzero(bits != np.roll(bits, 1, axis=1), axis=1)
    return np.where(transitions <= 2, bits.sum(axis=1), 9)


def _lbp_labels(img):
    """riu2 LBP label of each inner pixel (6x6): all 8 neighbours >= centre set one bit each."""
    c = img[1:-1, 1:-1]
    code = np.zeros(c.shape, dtype=np.int64)
    for bit, (dy, dx) in enumerate(_RING8):
        code |= (img[1 + dy:7 + dy, 1 + dx:7 + dx] >= c).astype(np.int64) << bit
    return _uniform_labels()[code]


def _lbp(img):
    """Histogram of 8-neighbour local binary patterns over the inner 6x6 pixels, 10 bins: the
    rotation-invariant uniform patterns (riu2, as scikit-image's method='uniform'). All 256 codes
    count, folded to 10 labels, so a 36-pixel histogram is not spread over mostly empty bins."""
    return np.bincount(_lbp_labels(img).ravel(), minlength=10) / 36.0


def _edges(img):
    """Sobel magnitude pooled on a 4x4 grid plus its total."""
    mag = np.hypot(ndi.sobel(img, axis=0), ndi.sobel(img, axis=1))
    pooled = mag.reshape(4, 2, 4, 2).mean(axis=(1, 3)).ravel()
    return np.append(pooled, mag.sum())


def _distance_map(img):
    """Distance of every background pixel to the stroke, pooled on a 4x4 grid."""
    dist = ndi.distance_transform_edt(img <= 4)
    return dist.reshape(4, 2, 4, 2).mean(axis=(1, 3)).ravel()


def _topology(img):
    """Strokes (components), holes (enclosed background) and their sizes, at two thresholds."""
    out = []
    for thr in (4, 8):
        fg = np.pad(img > thr, 1)
        _, n_fg = ndi.label(fg)
        bg_lab, n_bg = ndi.label(~fg)
        holes = np.bincount(bg_lab.ravel())[2:] if n_bg > 1 else np.zeros(0)
        out += [n_fg, n_bg - 1, holes.sum(), fg.sum()]
    return np.array(out, dtype=np.float64)


def _rotated_projections(img):
    """Row projections of the image rotated by 6 angles (a coarse Radon transform)."""
    return np.concatenate([ndi.rotate(img, a, reshape=False, order=1).sum(axis=1)
                           for a in (15, 30, 45, 60, 75, 90)])


@lru_cache(maxsize=1)
def _gabor_kernels():
    yy, xx = np.mgrid[-3:4, -3:4].astype(np.float64)
    kernels = []
    for theta in np.arange(4) * np.pi / 4:
        xr = xx * np.cos(theta) + yy * np.sin(theta)
        for freq in (0.25, 0.5):
            kernels.append(np.exp(-(xx ** 2 + yy ** 2) / 4.5) * np.cos(2 * np.pi * freq * xr))
    return tuple(kernels)


def _gabor(img):
    """Mean and std of the responses to 8 Gabor filters (4 orientations x 2 frequencies)."""
    out = []
    for k in _gabor_kernels():
        r = ndi.convolve(img, k, mode="constant")
        out += [np.abs(r).mean(), r.std()]
    return np.array(out)


_BANK = (
    ("ink", _ink), ("pixels_centre", _pixels_centre), ("pixels_half", _pixels_half),
    ("row_projection", _row_projection), ("col_projection", _col_projection),
    ("zoning_2x2", _zoning_2x2), ("moments", _moments), ("fft_bands", _fft_bands),
    ("dct_low", _dct_low), ("hog", _hog), ("lbp", _lbp), ("edges", _edges),
    ("distance_map", _distance_map), ("topology", _topology),
    ("rotated_projections", _rotated_projections), ("gabor", _gabor),
    ("hog_upsampled", _hog_upsampled),
)


def bank() -> tuple[Extractor, ...]:
    """The digits bank: one extractor per group, each mapping an (8, 8) float image to 1-D features.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.extractors import digits
    >>> b = digits.bank()
    >>> len(b), b[0].name, b[0].fn(np.zeros((8, 8))).shape
    (17, 'ink', (4,))
    """
    return tuple(Extractor(name, fn) for name, fn in _BANK)


def load_images(n: int | None = None, seed: int = 0):
    """scikit-learn's digits as (images (n, 8, 8) float64, labels); a seeded subsample if `n` given.

    Examples
    --------
    >>> from edgeseq.extractors.digits import load_images
    >>> images, y = load_images(n=5, seed=1)
    >>> images.shape, y.dtype.name
    ((5, 8, 8), 'int64')
    >>> bool((load_images(n=5, seed=1)[1] == y).all())  # the subsample is reproducible
    True
    """
    from sklearn.datasets import load_digits

    d = load_digits()
    images, y = d.images.astype(np.float64), d.target.astype(np.int64)
    if n is not None and n < len(y):
        idx = np.sort(np.random.default_rng(seed).choice(len(y), size=n, replace=False))
        images, y = images[idx], y[idx]
    return images, y


def features(images) -> tuple[np.ndarray, list[list[int]]]:
    """The digits bank applied to every image: (X (n, D), group columns).

    Examples
    --------
    >>> from edgeseq.extractors.digits import features, load_images
    >>> X, columns = features(load_images(n=3)[0])
    >>> X.shape[0], len(columns), X.shape[1] == sum(len(c) for c in columns)
    (3, 17, True)
    """
    return extract(bank(), images)


def stored_costs_path() -> Path:
    """Where the measured costs of the digits bank ship inside the package.

    Examples
    --------
    >>> from edgeseq.extractors.digits import stored_costs_path
    >>> p = stored_costs_path()
    >>> p.name, p.is_file()
    ('digits_costs.json', True)
    """
    return Path(str(resources.files("edgeseq.extractors").joinpath("data", STORED_COSTS)))


def stored_costs(path=None) -> dict:
    """The shipped (or given) calibration of this bank, checked against the bank's current groups and widths.

    Raises
    ------
    ModelFormatError
        The file does not match the bank (a group was renamed, added or changed width).

    Examples
    --------
    >>> from edgeseq.extractors.digits import bank, stored_costs
    >>> doc = stored_costs()
    >>> [g["name"] for g in doc["groups"]] == [e.name for e in bank()], doc["cost_unit"]
    (True, 'microseconds per item')
    """
    # an all-zero image as the sample: the widths do not depend on the content, and it is always valid
    return read_calibration(path or stored_costs_path(), bank=bank(), sample=np.zeros((8, 8)))
