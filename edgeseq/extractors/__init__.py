"""Feature-extractor banks with measured costs, and the calibration that measures them.

`calibrate.calibrate_bank` times any bank (see its docstring for the bank protocol); `digits` is the embedded
default bank (numpy + scipy, scikit-learn's bundled 8x8 digits, stored costs); `mnist` is a ~45-group
scikit-image bank on 5,000 MNIST images (optional extra `images`).
"""

from edgeseq.extractors.calibrate import Extractor, as_bank, calibrate_bank, extract, read_calibration, write_groups_json

__all__ = ["Extractor", "as_bank", "calibrate_bank", "extract", "read_calibration", "write_groups_json"]
