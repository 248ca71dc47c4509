"""edgeseq: anytime prediction with cost-sensitive feature-group sequencing.

Learns the order in which to compute costly feature groups and one (generalized) linear predictor
per prefix of that order, then exports ONNX graphs, a manifest and C code for devices.
"""

from edgeseq.train.classifier import AnytimeClassifier
from edgeseq.errors import EdgeseqError
from edgeseq.train.regressor import AnytimeRegressor
from edgeseq.sequence import FittedSequence

__all__ = ["AnytimeClassifier", "AnytimeRegressor", "EdgeseqError", "FittedSequence"]
__version__ = "0.1.0"
