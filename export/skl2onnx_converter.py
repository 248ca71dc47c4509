"""skl2onnx support: `skl2onnx.to_onnx(est_or_pipeline, X[:1].astype(np.float32))` for edgeseq estimators.

Registration happens on `import edgeseq.export` (which calls `register_skl2onnx()`; calling it again
is harmless). The graph works on the raw X: Gather (the prefix's columns, in sequence order) ->
MatMul -> Add, core domain only (no ai.onnx.ml), so it also works after e.g. a StandardScaler in a
Pipeline. Default: the full budget (all groups). Options pick a shorter prefix:
``to_onnx(est, X, options={id(est): {"prefix": 3}})`` or ``{"budget": 2.5}`` (cost units, inclusive).
Classifiers (if `AnytimeClassifier` exists) output `label` and `probabilities` like scikit-learn's
(pass ``"zipmap": False`` for a plain tensor).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from edgeseq.errors import ExportError
from edgeseq.budget import resolve_prefix

_OPTIONS = {"prefix": None, "budget": None}


def _prefix(seq, options) -> int:
    return resolve_prefix(seq.cum_cost, options.get("budget"), options.get("prefix"))


def _sequence(op):
    seq = getattr(op, "fitted_sequence_", None)
    if seq is None:
        raise ExportError(f"cannot convert an unfitted {type(op).__name__}; fit it first")
    return seq


def _float_type(operator):
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType
    return DoubleTensorType if isinstance(operator.inputs[0].type, DoubleTensorType) else FloatTensorType


def _shape_calculator(operator):
    seq = _sequence(operator.raw_operator)
    N = operator.inputs[0].get_first_dimension()
    tensor = _float_type(operator)
    if seq.task == "regression":
        operator.outputs[0].type = tensor([N, seq.n_outputs])
        return
    from skl2onnx.common.data_types import Int64TensorType, StringTensorType
    n_classes = 2 if seq.link == "sigmoid" else seq.n_outputs
    label = StringTensorType if np.asarray(seq.classes).dtype.kind in "US" else Int64TensorType
    operator.outputs[0].type = label([N])
    operator.outputs[1].type = tensor([N, n_classes])


def _affine(scope, operator, container, seq, j, out=None) -> str:
    """Gather the prefix's raw columns of X, MatMul, Add into `out` (default: a fresh name); returns it."""
    dt = np.float64 if _float_type(operator).__name__ == "DoubleTensorType" else np.float32
    proto = TensorProto.DOUBLE if dt is np.float64 else TensorProto.FLOAT
    cols = seq.prefix_columns(j)
    names = {k: scope.get_unique_variable_name(f"edgeseq_{k}") for k in
             ("cols", "W", "b", "gathered", "mm", "z")}
    names["z"] = out or names["z"]
    container.add_initializer(names["cols"], TensorProto.INT64, [len(cols)], cols.tolist())
    W = seq.coefs[j].astype(dt)
    container.add_initializer(names["W"], proto, list(W.shape), W.ravel().tolist())
    container.add_initializer(names["b"], proto, [seq.n_outputs], seq.intercepts[j].astype(dt).tolist())
    container.add_node("Gather", [operator.inputs[0].full_name, names["cols"]], names["gathered"], axis=1,
                       name=scope.get_unique_operator_name("EdgeseqGather"))
    container.add_node("MatMul", [names["gathered"], names["W"]], names["mm"],
                       name=scope.get_unique_operator_name("EdgeseqMatMul"))
    container.add_node("Add", [names["mm"], names["b"]], names["z"],
                       name=scope.get_unique_operator_name("EdgeseqAdd"))
    return names["z"]


def _converter(scope, operator, container):
    op = operator.raw_operator
    seq = _sequence(op)
    j = _prefix(seq, container.get_options(op, dict(prefix=None, budget=None)))
    if seq.task == "regression":
        _affine(scope, operator, container, seq, j, out=operator.outputs[0].full_name)
        return
    z = _affine(scope, operator, container, seq, j)
    proba = operator.outputs[1].full_name
    if seq.link == "sigmoid":
        p1, one, p0 = (scope.get_unique_variable_name(n) for n in ("edgeseq_p1", "edgeseq_one", "edgeseq_p0"))
        dt = TensorProto.DOUBLE if _float_type(operator).__name__ == "DoubleTensorType" else TensorProto.FLOAT
        container.add_initializer(one, dt, [1], [1.0])
        container.add_node("Sigmoid", [z], p1, name=scope.get_unique_operator_name("EdgeseqSigmoid"))
        container.add_node("Sub", [one, p1], p0, name=scope.get_unique_operator_name("EdgeseqSub"))
        container.add_node("Concat", [p0, p1], proba, axis=1, name=scope.get_unique_operator_name("EdgeseqConcat"))
    else:
        container.add_node("Softmax", [z], proba, axis=1, name=scope.get_unique_operator_name("EdgeseqSoftmax"))
    idx, classes = scope.get_unique_variable_name("edgeseq_idx"), scope.get_unique_variable_name("edgeseq_cls")
    container.add_node("ArgMax", [proba], idx, axis=1, keepdims=0, name=scope.get_unique_operator_name("EdgeseqArgMax"))
    labels = np.asarray(seq.classes)
    if labels.dtype.kind in "US":
        container.add_initializer(classes, TensorProto.STRING, [len(labels)], [s.encode("utf-8") for s in labels.tolist()])
    else:
        container.add_initializer(classes, TensorProto.INT64, [len(labels)], labels.astype(np.int64).tolist())
    container.add_node("Gather", [classes, idx], operator.outputs[0].full_name, axis=0,
                       name=scope.get_unique_operator_name("EdgeseqLabel"))


def register_skl2onnx() -> list[str]:
    """Register shape calculator + converter for every edgeseq estimator that exists; returns aliases."""
    from skl2onnx import update_registered_converter

    import edgeseq
    done = []
    for cls_name in ("AnytimeRegressor", "AnytimeClassifier"):
        cls = getattr(edgeseq, cls_name, None)
        if cls is None:
            continue
        alias = f"Edgeseq{cls_name}"
        opts = dict(_OPTIONS, zipmap=[True, False, "columns"], nocl=[False]) if cls_name == "AnytimeClassifier" \
            else _OPTIONS
        update_registered_converter(cls, alias, _shape_calculator, _converter, options=opts)
        done.append(alias)
    return done
