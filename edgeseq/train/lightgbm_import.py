"""`from_lightgbm`: an anytime stage sequence from a LightGBM model the user already trained.

A boosted ensemble's output is the sum of its trees, and that sum is order-free: every prefix of
the trees is itself a predictor. Given the user's feature groups and their costs, we keep LightGBM's
boosting order and close a stage whenever a tree first splits on a group no earlier tree used; that
tree and the ones after it (until the next such tree) form the stage, whose readout is the plain
ensemble's (identity, scaled by the binary objective's sigmoid coefficient). The last stage is the
whole model, so it reproduces LightGBM's ``predict`` / ``predict_proba``.

We read the model through its JSON dump (``Booster.dump_model()``), so LightGBM itself is needed
only to train, not to import, and the reader can be tested on crafted dumps. Everything a later
emitter will index is checked here (via `TreeEnsemble`); unsupported content fails with one line.

Thresholds: LightGBM compares ``double(x) <= threshold`` (a double). Devices feed float32 features,
so each threshold becomes the largest float32 not above it; then for every float32 x,
``x <= t32`` exactly when ``double(x) <= t`` — the imported model decides like LightGBM on every
float32 input, boundary values included.
"""

from __future__ import annotations

import numpy as np

from edgeseq.errors import GroupSpecError, InputError, InputTypeError, ModelFormatError
from edgeseq.messages import brief
from edgeseq.sequence import check_feature_names
from edgeseq.train.groups import check_groups
from edgeseq.train.trees import MAX_DEPTH, MAX_NODES, TreeEnsemble, TreeStage, TreeStageModel

# objectives whose raw score is the prediction (identity link)
IDENTITY_OBJECTIVES = ("regression", "regression_l1", "huber", "fair", "quantile", "mape")
MAX_TREES = 100_000


def from_lightgbm(model, groups, costs, group_names=None, feature_names=None) -> TreeStageModel:
    """Stage sequence of a trained LightGBM model (Booster or scikit-learn wrapper).

    Parameters
    ----------
    model : ``lightgbm.Booster``, ``LGBMRegressor`` or ``LGBMClassifier`` (fitted). Supported
        objectives: regression-type with identity output, ``binary``, ``multiclass`` (softmax).
    groups, costs, group_names : the feature groups (column indices of the model's features) and
        their extraction costs, as for the other edgeseq estimators.
    feature_names : sequence of str, optional
        Names of the model's columns, recorded so tables are matched by name. Default: the
        booster's own feature names (from a data frame or ``feature_name=``), or none when the
        booster has only LightGBM's placeholders ``Column_0, Column_1, ...``. Names that differ
        from real booster names are refused.

    Returns
    -------
    TreeStageModel whose last stage reproduces the model's predictions (raw score, or class
    probabilities through the sigmoid/softmax link).

    Raises
    ------
    InputTypeError
        If `model` is not a trained LightGBM Booster or estimator.
    ModelFormatError, GroupSpecError
        As `from_lightgbm_dump`.

    Examples
    --------
    The last stage predicts exactly what LightGBM predicts (here the first tree already splits on
    both groups, so there is a single paid stage):

    >>> import numpy as np
    >>> import lightgbm
    >>> from edgeseq.train.lightgbm_import import from_lightgbm
    >>> rng = np.random.default_rng(0); X = rng.normal(size=(200, 3)); y = X[:, 0] + 2 * X[:, 2]
    >>> lgbm = lightgbm.LGBMRegressor(n_estimators=10, num_leaves=4, verbose=-1).fit(X, y)
    >>> model = from_lightgbm(lgbm, groups=[[0, 1], [2]], costs=[1.0, 3.0])
    >>> model.cum_cost.tolist(), np.allclose(model.predict(X)[:, 0], lgbm.predict(X))
    ([0.0, 4.0], True)
    """
    booster = getattr(model, "booster_", model)
    if not hasattr(booster, "dump_model"):
        raise InputTypeError(f"expected a trained LightGBM Booster or LGBM* estimator, got {type(model).__name__}")
    classes = getattr(model, "classes_", None)
    return from_lightgbm_dump(booster.dump_model(), groups, costs, group_names, classes=classes,
                              feature_names=feature_names)


def from_lightgbm_dump(dump: dict, groups, costs, group_names=None, classes=None,
                       feature_names=None) -> TreeStageModel:
    """`from_lightgbm` on an already dumped model (the dict ``Booster.dump_model()`` returns).

    Needs no LightGBM installation, so a model trained elsewhere can be imported from its JSON.

    Parameters
    ----------
    dump : dict
        ``Booster.dump_model()``'s result (or its JSON, parsed).
    groups, costs, group_names
        The feature groups and their costs, as for `from_lightgbm`.
    classes : array-like, optional
        Class labels of a classifier (default ``0..n_classes-1``).
    feature_names : sequence of str, optional
        As for `from_lightgbm` (default: the dump's ``feature_names`` unless LightGBM's placeholders).

    Returns
    -------
    TreeStageModel

    Raises
    ------
    ModelFormatError
        On content that is not supported or not a well-formed tree (categorical or zero-as-missing
        splits, linear leaves, random forests, NaN thresholds, cycles, too deep or too many trees).
    GroupSpecError
        If a tree splits on a feature in none of the groups.

    Examples
    --------
    A hand-written dump of two stumps, one per group; a stage closes when a tree first uses a group:

    >>> from edgeseq.train.lightgbm_import import from_lightgbm_dump
    >>> leaf = lambda v: {"leaf_value": v}
    >>> dump = {"max_feature_idx": 1, "objective": "regression", "tree_info": [
    ...     {"tree_structure": {"split_feature": 0, "threshold": 0.5, "left_child": leaf(-1.0), "right_child": leaf(1.0)}},
    ...     {"tree_structure": {"split_feature": 1, "threshold": 0.0, "left_child": leaf(-0.5), "right_child": leaf(0.5)}}]}
    >>> model = from_lightgbm_dump(dump, groups=[[0], [1]], costs=[1.0, 2.0])
    >>> model.cum_cost.tolist(), [model.predict([[1.0, 1.0]], stage=k).item() for k in range(3)]
    ([0.0, 1.0, 3.0], [0.0, 1.0, 1.5])
    >>> dump["tree_info"][0]["tree_structure"]["decision_type"] = "=="
    >>> from_lightgbm_dump(dump, groups=[[0], [1]], costs=[1.0, 2.0])
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: LightGBM tree 0: categorical split ('==') is not supported; ...
    """
    if not isinstance(dump, dict) or not isinstance(dump.get("tree_info"), list):
        raise ModelFormatError("not a LightGBM model dump (no 'tree_info' list)")
    n_features = _int(dump.get("max_feature_idx"), "max_feature_idx", 0, MAX_NODES) + 1
    per_iter = _int(dump.get("num_tree_per_iteration", 1), "num_tree_per_iteration", 1, 10_000)
    link, scale = _link(dump, per_iter)
    if dump.get("average_output"):
        raise ModelFormatError("random-forest LightGBM models (average_output) are not supported; "
                               "train with boosting='gbdt'")
    trees = dump["tree_info"]
    if len(trees) > MAX_TREES:
        raise ModelFormatError(f"the model has {len(trees)} trees; at most {MAX_TREES} are supported")
    try:
        spec = check_groups(groups, costs, group_names, n_features)
    except GroupSpecError as exc:
        raise GroupSpecError(f"{exc} (the LightGBM model has {n_features} features)") from None
    owner = np.full(n_features, -1)
    for g, cols in enumerate(spec.columns):
        owner[cols] = g

    arrays = {k: [] for k in ("feature", "threshold", "left", "right", "value")}
    roots, targets, tree_groups = [], [], []
    for t, info in enumerate(trees):
        if not isinstance(info, dict) or not isinstance(info.get("tree_structure"), dict):
            raise ModelFormatError(f"tree {t} of the dump has no 'tree_structure'")
        roots.append(len(arrays["feature"]))
        targets.append(t % per_iter)
        tree_groups.append(_read_tree(info["tree_structure"], t, arrays, owner, n_features))
        if len(arrays["feature"]) > MAX_NODES:
            raise ModelFormatError(f"the model has more than {MAX_NODES} nodes")
    if not trees:
        raise ModelFormatError("the LightGBM model has no trees")
    ens = TreeEnsemble(**{k: np.array(v) for k, v in arrays.items()}, roots=np.array(roots, np.int64),
                       target=np.array(targets, np.int64), n_features=n_features, n_targets=per_iter)
    stages = _boosting_order_stages(ens, tree_groups, spec.costs, per_iter, scale)
    if link == "identity":
        names = ("y",) if per_iter == 1 else tuple(f"y{i}" for i in range(per_iter))
    else:
        n_cls = 2 if link == "sigmoid" else per_iter
        classes = np.arange(n_cls) if classes is None else np.asarray(classes)
        names = tuple(str(c) for c in classes)
    return TreeStageModel(spec.names, spec.columns, spec.costs, ens, stages, link, names,
                          classes=None if link == "identity" else classes,
                          feature_names=booster_feature_names(dump, n_features, feature_names))


def booster_feature_names(dump: dict, n_features: int, given=None) -> tuple[str, ...] | None:
    """The column names an imported model records: `given`, else the booster's own names.

    LightGBM names the columns of an unnamed array ``Column_0, Column_1, ...``; those are
    placeholders, not names a table could be matched by, so they count as no names.

    Raises
    ------
    InputError
        When `given` differs from real booster names, or the names are not valid.

    Examples
    --------
    >>> booster_feature_names({"feature_names": ["ax", "ay"]}, 2)
    ('ax', 'ay')
    >>> booster_feature_names({"feature_names": ["Column_0", "Column_1"]}, 2) is None
    True
    >>> booster_feature_names({"feature_names": ["Column_0", "Column_1"]}, 2, given=["ax", "ay"])
    ('ax', 'ay')
    >>> booster_feature_names({"feature_names": ["ax", "ay"]}, 2, given=["ay", "ax"])
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: feature_names ('ay', 'ax') differ from the LightGBM model's feature names ('ax', 'ay')
    """
    own = dump.get("feature_names")
    if not isinstance(own, list) or len(own) == n_features and all(n == f"Column_{i}" for i, n in enumerate(own)):
        own = None
    else:
        own = check_feature_names(own, n_features, "the LightGBM model's feature_names")
    if given is None:
        return own
    given = check_feature_names(given, n_features)
    if own is not None and given != own:
        raise InputError(f"feature_names {brief(given)} differ from the LightGBM model's feature names {brief(own)}")
    return given


def _int(v, name: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise ModelFormatError(f"LightGBM dump: {name} must be an integer in {lo}..{hi}, got {v!r}")
    return int(v)


def _link(dump: dict, per_iter: int) -> tuple[str, float]:
    """(link, scale of the raw score) from the objective string, e.g. 'binary sigmoid:1'."""
    objective = str(dump.get("objective", ""))
    words = objective.split()
    name = words[0] if words else ""
    params = dict(w.split(":", 1) for w in words[1:] if ":" in w)
    if name in IDENTITY_OBJECTIVES and per_iter == 1:
        return "identity", 1.0
    if name == "binary" and per_iter == 1:
        try:
            s = float(params.get("sigmoid", 1.0))
        except ValueError:
            s = float("nan")
        if not np.isfinite(s) or s <= 0:
            raise ModelFormatError(f"LightGBM dump: bad sigmoid coefficient in objective {objective!r}")
        return "sigmoid", s
    if name == "multiclass" and per_iter >= 3:
        return "softmax", 1.0
    raise ModelFormatError(f"LightGBM objective {objective!r} is not supported (regression with identity "
                           f"output, binary and multiclass are)")


def _threshold32(t, where: str) -> np.float32:
    """Largest float32 <= t, so float32 x <= result exactly when double(x) <= t."""
    try:
        t = float(t)
    except (TypeError, ValueError):
        raise ModelFormatError(f"{where}: threshold {t!r} is not a number") from None
    if not np.isfinite(t):
        raise ModelFormatError(f"{where}: threshold is {t!r}; NaN/Inf thresholds are refused")
    with np.errstate(over="ignore"):
        t32 = np.float32(t)
    if np.isinf(t32):
        t32 = np.float32(np.finfo(np.float32).max) if t > 0 else t32
    if float(t32) > t:
        t32 = np.nextafter(t32, np.float32(-np.inf))
    if not np.isfinite(t32):
        raise ModelFormatError(f"{where}: threshold {t!r} is below the float32 range")
    return t32


def _read_tree(root: dict, t: int, arrays: dict, owner: np.ndarray, n_features: int) -> list[int]:
    """Append one tree (breadth-first, so children follow parents) and return the groups it uses."""
    used: list[int] = []
    seen: set[int] = set()  # ids of node objects: a parsed JSON tree never shares one
    queue = [(root, 0)]
    base = len(arrays["feature"])
    head = 0
    while head < len(queue):
        node, depth = queue[head]
        head += 1
        where = f"LightGBM tree {t}"
        if not isinstance(node, dict):
            raise ModelFormatError(f"{where}: a node is not an object")
        if id(node) in seen:
            raise ModelFormatError(f"{where}: a node is reached twice (a shared or cyclic structure, not a tree)")
        seen.add(id(node))
        if depth > MAX_DEPTH:
            raise ModelFormatError(f"{where}: deeper than {MAX_DEPTH} levels")
        if len(queue) + base > MAX_NODES:
            raise ModelFormatError(f"{where}: too many nodes")
        if "split_feature" not in node:
            if "leaf_coeff" in node:
                raise ModelFormatError(f"{where}: linear-tree leaves are not supported")
            v = node.get("leaf_value")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                raise ModelFormatError(f"{where}: leaf value {v!r} is not a finite number")
            for k, val in (("feature", -1), ("threshold", 0.0), ("left", -1), ("right", -1), ("value", float(v))):
                arrays[k].append(val)
            continue
        if node.get("decision_type", "<=") != "<=":
            raise ModelFormatError(f"{where}: categorical split ({node.get('decision_type')!r}) is not supported; "
                                   f"encode the category as numbers or train without categorical_feature")
        if node.get("missing_type", "None") == "Zero":
            raise ModelFormatError(f"{where}: zero-as-missing splits are not supported; train with "
                                   f"zero_as_missing=False")
        f = node.get("split_feature")
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or not 0 <= f < n_features:
            raise ModelFormatError(f"{where}: split feature {f!r} outside 0..{n_features - 1}")
        g = int(owner[f])
        if g < 0:
            raise GroupSpecError(f"{where} splits on feature {f}, which is in none of the given groups; "
                                 f"add it to a group")
        if g not in used:
            used.append(g)
        arrays["feature"].append(int(f))
        arrays["threshold"].append(_threshold32(node.get("threshold"), where))
        arrays["value"].append(0.0)
        kids = (node.get("left_child"), node.get("right_child"))
        arrays["left"].append(base + len(queue))
        queue.append((kids[0], depth + 1))
        arrays["right"].append(base + len(queue))
        queue.append((kids[1], depth + 1))
    return used


def _boosting_order_stages(ens: TreeEnsemble, tree_groups: list, costs: np.ndarray, n_targets: int,
                           scale: float) -> tuple:
    """Close a stage whenever a tree first uses a new group; readout = scale·I (the ensemble's own).

    Trees before the first split (constant trees, e.g. a boost-from-average start) join stage 1,
    and stage 0 predicts their sum, so every stage is exactly a prefix of the boosted ensemble.
    """
    W = scale * np.eye(n_targets)
    paid: set[int] = set()
    starts, new = [], []
    for t, used in enumerate(tree_groups):
        fresh = [g for g in used if g not in paid]
        if fresh:
            starts.append(t)
            new.append(tuple(fresh))
            paid.update(fresh)
    lead = starts[0] if starts else ens.n_trees
    const = ens.predict(np.zeros((1, ens.n_features)), range(lead))[0] if lead else np.zeros(n_targets)
    stages = [TreeStage((), 0.0, 0, 0, np.zeros((n_targets, n_targets)), scale * const)]
    if not starts:  # no tree splits at all: one stage of constant trees
        return tuple(stages + [TreeStage((), 0.0, 0, ens.n_trees, W, np.zeros(n_targets))])
    starts[0] = 0
    bounds = starts + [ens.n_trees]
    for k, groups in enumerate(new):
        stages.append(TreeStage(groups, float(sum(costs[g] for g in groups)), bounds[k], bounds[k + 1], W,
                                np.zeros(n_targets)))
    return tuple(stages)
