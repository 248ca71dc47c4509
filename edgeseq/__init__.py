"""edgeseq: anytime prediction with cost-sensitive feature-group sequencing.

Learns the order in which to compute costly feature groups and one predictor per stage of that
order, then exports ONNX graphs, a manifest and C code for devices.

The estimators are imported on first use (PEP 562), so ``import edgeseq.runtime`` on a device and
``edgeseq --help`` never pay for scikit-learn and scipy.
"""

from __future__ import annotations

import importlib

from edgeseq import _source_tree

_source_tree.install()

__version__ = "0.2.0.dev0"

# public name -> module that defines it
_LAZY = {"AFRClassifier": "edgeseq.train.trees.afr",
         "AnytimeBoostingClassifier": "edgeseq.train.trees.stagewise_boosting",
         "AnytimeBoostingRegressor": "edgeseq.train.trees.stagewise_boosting",
         "AnytimeClassifier": "edgeseq.train.linear.classifier", "AnytimeRegressor": "edgeseq.train.linear.regressor",
         "EdgeseqError": "edgeseq.errors", "FittedSequence": "edgeseq.forms.linear",
         "from_lightgbm": "edgeseq.train.trees.lightgbm_import", "sequence_from_gram": "edgeseq.train.linear.functional",
         "sequence_trees": "edgeseq.train.trees.tree_sequencing",
         # the verbs between a fitted model and a device: the export directory and the model file
         "export_model": "edgeseq.export.writer", "load_model": "edgeseq.io.model_io",
         "save_model": "edgeseq.io.model_io"}
_LAZY |= {"AnytimeNetClassifier": "edgeseq.train.neural.estimators",
          "AnytimeNetRegressor": "edgeseq.train.neural.estimators", "loss_weights": "edgeseq.train.neural.schemes"}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'edgeseq' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
