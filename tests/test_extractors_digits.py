"""The embedded digits bank: shape contract, stored costs, and extractors against independent references."""

import numpy as np
import pytest

from edgeseq.errors import ModelFormatError
from edgeseq.extractors import digits
from edgeseq.extractors.calibrate import extract, read_calibration, write_groups_json


@pytest.fixture(scope="module")
def sample():
    images, y = digits.load_images(n=120, seed=3)
    X, cols = digits.features(images)
    return images, y, X, cols


def _fn(name):
    return dict((e.name, e.fn) for e in digits.bank())[name]


def test_bank_has_many_distinct_groups_with_fixed_finite_outputs(sample):
    images, y, X, cols = sample
    names = [e.name for e in digits.bank()]
    assert len(names) >= 12 and len(set(names)) == len(names)
    assert X.shape == (120, sum(len(c) for c in cols)) and np.all(np.isfinite(X))
    # every group carries signal: no group is constant over 120 digits
    assert all(np.ptp(X[:, c], axis=0).max() > 0 for c in cols)


def test_subsample_is_seeded_and_labelled(sample):
    images, y, _, _ = sample
    all_images, all_y = digits.load_images()
    assert all_images.shape == (1797, 8, 8)
    again, y2 = digits.load_images(n=120, seed=3)
    np.testing.assert_array_equal(again, images)
    idx = [int(np.nonzero((all_images == im).all(axis=(1, 2)))[0][0]) for im in images[:5]]
    np.testing.assert_array_equal(all_y[idx], y[:5])


def test_stored_costs_fit_the_bank_and_record_where_measured(sample):
    _, _, _, cols = sample
    doc = digits.stored_costs()
    assert [g["columns"] for g in doc["groups"]] == cols
    costs = np.array([g["cost"] for g in doc["groups"]])
    assert np.all(costs > 0) and costs.max() / costs.min() > 100  # clearly different costs
    m = doc["measured_on"]
    assert m["threads"] == 1 and m["cpu"] and m["date"] and "numpy" in m["versions"]


def test_stored_costs_for_another_bank_layout_are_refused(tmp_path):
    doc = digits.stored_costs()
    doc["groups"] = doc["groups"][::-1]
    with pytest.raises(ModelFormatError, match="recalibrate"):
        digits.stored_costs(write_groups_json(doc, tmp_path / "g.json"))


def test_hu_moments_match_scikit_image(sample):
    measure = pytest.importorskip("skimage.measure")
    for img in sample[0][:10]:
        ref = measure.moments_hu(measure.moments_normalized(measure.moments_central(img, order=3), 3))
        # scikit-image's first moment index runs along rows, ours along columns: compare on the transpose
        np.testing.assert_allclose(_fn("moments")(img.T)[9:], ref, rtol=1e-6, atol=1e-15)


def test_projections_zoning_and_fft_dc_against_direct_formulas(sample):
    img = sample[0][0]
    np.testing.assert_array_equal(_fn("row_projection")(img), [img[i].sum() for i in range(8)])
    np.testing.assert_array_equal(_fn("col_projection")(img), [img[:, j].sum() for j in range(8)])
    np.testing.assert_allclose(_fn("zoning_2x2")(img), [img[:4, :4].mean(), img[:4, 4:].mean(),
                                                        img[4:, :4].mean(), img[4:, 4:].mean()])
    assert _fn("fft_bands")(img)[0] == pytest.approx(abs(img.sum()))  # band 0 is the DC term alone


def test_topology_counts_holes_of_synthetic_shapes():
    ring = np.zeros((8, 8))
    ring[1:7, 1:7] = 16
    ring[2:6, 2:6] = 0
    two = ring.copy()
    two[1:7, 4] = 16  # a bar splits the hole in two
    bar = np.zeros((8, 8))
    bar[1:7, 3] = 16
    holes = [_fn("topology")(im)[1] for im in (bar, ring, two)]
    assert holes == [0, 1, 2]


def test_distance_map_matches_brute_force(sample):
    img = sample[0][7]
    fg = np.argwhere(img > 4)
    dist = np.array([[0.0 if img[i, j] > 4 else np.min(np.hypot(*(fg - [i, j]).T)) for j in range(8)]
                     for i in range(8)])
    np.testing.assert_allclose(_fn("distance_map")(img), dist.reshape(4, 2, 4, 2).mean(axis=(1, 3)).ravel())


def test_hog_is_a_normalised_orientation_histogram(sample):
    img = sample[0][2]
    h = _fn("hog")(img).reshape(4, 9)
    gy, gx = np.gradient(img)
    cell = (slice(0, 4), slice(0, 4))
    ang = np.mod(np.degrees(np.arctan2(gy[cell], gx[cell])), 180)
    ref = np.zeros(9)
    for a, m in zip(ang.ravel(), np.hypot(gx[cell], gy[cell]).ravel()):
        ref[min(int(a // 20), 8)] += m
    np.testing.assert_allclose(h[0], ref / (np.linalg.norm(ref) + 1e-6), atol=1e-12)
    assert digits.features(np.zeros((1, 8, 8)))[0].shape[1] == sample[2].shape[1]


def test_features_equal_generic_extract(sample):
    X, cols = extract(digits.bank(), sample[0][:4])
    np.testing.assert_array_equal(X, sample[2][:4])
    assert read_calibration(digits.stored_costs_path(), bank=digits.bank())


def test_digits_data_refuses_costs_whose_dimensions_no_longer_match(monkeypatch):
    from edgeseq.extractors import datasets

    doc = digits.stored_costs()
    doc["groups"][0]["columns"] = doc["groups"][0]["columns"][:-1]
    monkeypatch.setattr(digits, "stored_costs", lambda path=None: doc)
    with pytest.raises(ModelFormatError, match="recalibrate"):
        datasets.digits_data(n=20)
    data = datasets.digits_data(n=20, recalibrate=True)  # measuring anew fits the bank by construction
    assert data.X.shape[0] == 20 and data.columns[-1][-1] == data.X.shape[1] - 1 and len(data.names) == 17
    assert data.measured_on["n_samples"] == 20


def _lbp_reference(img):
    """Plain loops: the 8 neighbours of each inner pixel in circular order, >= centre sets a bit;
    riu2 label = number of ones if at most 2 circular 0/1 transitions, else 9; histogram over 36 pixels."""
    ring = [(-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1)]
    hist = np.zeros(10)
    for i in range(1, 7):
        for j in range(1, 7):
            bits = [int(img[i + dy, j + dx] >= img[i, j]) for dy, dx in ring]
            transitions = sum(bits[k] != bits[k - 1] for k in range(8))
            hist[sum(bits) if transitions <= 2 else 9] += 1
    return hist / 36


def test_lbp_uses_all_eight_neighbours(sample):
    for img in sample[0][:15]:
        np.testing.assert_allclose(_fn("lbp")(img), _lbp_reference(img), rtol=0, atol=1e-15)
    # every neighbour counts: raising any one of them above the centre changes the histogram
    for dy, dx in [(-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1)]:
        img = np.zeros((8, 8))
        img[3, 3] = 5.0  # centre brighter than all neighbours: code 0
        before = _fn("lbp")(img)
        img[3 + dy, 3 + dx] = 9.0
        assert not np.array_equal(_fn("lbp")(img), before), (dy, dx)


def test_lbp_labels_match_scikit_image_uniform_for_all_256_patterns():
    """scikit-image samples the diagonals by bilinear interpolation; corners of +-100 against edge
    neighbours of +-1 make each interpolated diagonal take its corner's sign, so both see the same code."""
    feature = pytest.importorskip("skimage.feature")
    offsets = [(-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1)]
    for code in range(256):
        img = np.zeros((8, 8))
        for bit, (dy, dx) in enumerate(offsets):
            size = 100.0 if dy and dx else 1.0
            img[1 + dy, 1 + dx] = size if code >> bit & 1 else -size
        ours = digits._lbp_labels(img)[0, 0]
        assert ours == feature.local_binary_pattern(img.astype(np.int64), 8, 1, method="uniform")[1, 1], code


def test_stored_costs_refuse_a_changed_group_width(tmp_path):
    doc = digits.stored_costs()
    lbp = next(g for g in doc["groups"] if g["name"] == "lbp")
    lbp["columns"] = lbp["columns"] + [lbp["columns"][-1] + 1]  # as if lbp still had its old width
    lbp["dim"] = len(lbp["columns"])
    with pytest.raises(ModelFormatError, match="'lbp'.*recalibrate"):
        digits.stored_costs(write_groups_json(doc, tmp_path / "g.json"))
