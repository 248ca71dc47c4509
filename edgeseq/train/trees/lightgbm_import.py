"""`from_lightgbm`: an anytime stage sequence from a LightGBM model the user already trained.

A boosted ensemble's output is the sum of its trees, and that sum is order-free: every prefix of
the trees is itself a predictor. Given the user's feature groups and their costs, we keep LightGBM's
boosting order and close a stage whenever a tree first splits on a group no earlier tree used; that
tree and the ones after it (until the next such tree) form the stage, whose readout is the plain
ensemble's (identity, scaled by the binary objective's sigmoid coefficient). The last stage is the
whole model, so it reproduces LightGBM's ``predict`` / ``predict_proba`` on float32 rows (below).
Only objectives whose prediction is the raw score through one of edgeseq's links (identity,
sigmoid, softmax) are imported; every other objective, or objective parameter (``reg_sqrt``), is
refused with one line, never imported approximately.

We read the model as LightGBM's text (``Booster.model_to_string()``: a few lines of numbers per tree,
parsed with array operations) or its JSON dump (``Booster.dump_model()``), so LightGBM itself is
needed only to train, not to import, and both readers can be tested on crafted input. Everything a
later emitter will index is checked here (via `TreeEnsemble`); unsupported content fails with one
line.

Thresholds: LightGBM compares ``double(x) <= threshold`` (a double). Devices feed float32 features,
so each threshold becomes the largest float32 not above it; then for every float32 x,
``x <= t32`` exactly when ``double(x) <= t`` — the imported model decides like LightGBM on every
float32 input, boundary values included. (LightGBM's ``predict`` reads any |x| <= 1e-35 as 0; a
threshold inside that band is moved to its edge, so the band goes the way 0 goes, as in LightGBM.)

The contract is float32: `TreeStageModel.predict`, the ONNX graphs and the C runtime all round a
float64 row to float32 first, so a float64 value strictly between a threshold and its float32
rounding can go the other way in LightGBM's own float64 ``predict``; equality with LightGBM holds
for rows that are float32 values (what a device feeds).

Bounds, checked before the work they bound: at most `MAX_CLASSES` classes (and no more than the
trees present), `MAX_TREES` trees and `MAX_NODES` nodes (the model's own per-tree leaf counts are
summed before any tree is read); every number is finite and inside float32's range.
"""

from __future__ import annotations

import re

import numpy as np

from edgeseq.errors import GroupSpecError, InputError, InputTypeError, ModelFormatError
from edgeseq.messages import brief
from edgeseq.forms.linear import check_feature_names
from edgeseq.forms.groups import check_groups
from edgeseq.forms.trees import MAX_DEPTH, MAX_NODES, TreeEnsemble, TreeStage, TreeStageModel

# objectives whose prediction is the raw score (identity link): LightGBM's predict returns it unchanged
IDENTITY_OBJECTIVES = ("regression", "regression_l1", "huber", "fair", "quantile", "mape", "lambdarank",
                       "rank_xendcg")
# objectives whose prediction no edgeseq link (identity, sigmoid, softmax) reproduces: why, and what to do
_EXP = ("predicts exp(raw score)", "train a raw-score objective instead (e.g. regression on log(y))")
REFUSED_OBJECTIVES = {
    "poisson": _EXP, "gamma": _EXP, "tweedie": _EXP,
    "multiclassova": ("predicts one independent sigmoid per class, not a softmax",
                      "train with objective='multiclass'"),
    "cross_entropy_lambda": ("predicts log(1 + exp(raw score))", "train with objective='cross_entropy'"),
}
MAX_TREES = 100_000
MAX_CLASSES = 1_000  # bounds the (classes x classes) identity readout each stage carries (8 MB)
F32_MAX = float(np.finfo(np.float32).max)
K_ZERO = float(np.float32(1e-35))  # LightGBM's kZeroThreshold: its predict reads |x| <= this as 0


def from_lightgbm(model, groups, costs, group_names=None, feature_names=None, *, progress=None) -> TreeStageModel:
    """Stage sequence of a trained LightGBM model (Booster or scikit-learn wrapper).

    Parameters
    ----------
    model : lightgbm.Booster, LGBMRegressor, LGBMClassifier or LGBMRanker
        A fitted model. Imported objectives: those whose prediction is the raw score
        (``regression``, ``regression_l1``, ``huber``, ``fair``, ``quantile``, ``mape``,
        ``lambdarank``, ``rank_xendcg``), ``binary`` (any ``sigmoid``) and ``cross_entropy``
        (sigmoid link), ``multiclass`` (softmax). Everything else is refused: ``reg_sqrt=True``
        (LightGBM squares the raw score), ``poisson`` / ``gamma`` / ``tweedie`` (exp),
        ``multiclassova``, ``cross_entropy_lambda`` and custom objective functions.
    groups, costs, group_names
        The feature groups (column indices of the model's features) and their extraction costs,
        as for the other edgeseq estimators.
    feature_names : sequence of str, optional
        Names of the model's columns, recorded so tables are matched by name. Default: the
        booster's own feature names (from a data frame or ``feature_name=``), or none when the
        booster has only LightGBM's placeholders ``Column_0, Column_1, ...``. Names that differ
        from real booster names are refused.
    progress : callable, optional
        Called with a text line as the import advances (a line per tenth of the trees), so a long
        import of a large ensemble shows that it is moving.

    Returns
    -------
    TreeStageModel
        Its last stage reproduces the model's predictions (raw score, or class probabilities
        through the sigmoid/softmax link) on float32 rows: every prediction rounds the row to
        float32 first, as the ONNX graphs and the C runtime do, so float64 values that fall between
        a threshold and its float32 neighbour are decided as their float32 rounding is.

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
    >>> from edgeseq.train.trees.lightgbm_import import from_lightgbm
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
    n_trees = booster.num_trees() if hasattr(booster, "num_trees") else 0
    if n_trees > MAX_TREES:  # refused before LightGBM prints the model (its dump costs ~25 us per node)
        raise ModelFormatError(f"the model has {n_trees} trees; at most {MAX_TREES} are supported")
    if progress is not None:
        progress("LightGBM import: printing the model")
    try:
        text = booster.model_to_string()  # several times faster than dump_model(), read without a step per node
    except Exception as exc:  # LightGBM's own failure, one line
        first = (str(exc).splitlines() or [""])[0][:200]
        raise ModelFormatError(f"LightGBM could not print the model ({type(exc).__name__}: {first})") from None
    return from_lightgbm_text(text, groups, costs, group_names, classes=classes,
                              feature_names=feature_names, progress=progress)


def from_lightgbm_dump(dump: dict, groups, costs, group_names=None, classes=None,
                       feature_names=None, *, progress=None) -> TreeStageModel:
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
    progress : callable, optional
        As `from_lightgbm`.

    Returns
    -------
    TreeStageModel

    Raises
    ------
    ModelFormatError
        On content that is not supported or not a well-formed tree (an objective no link reproduces,
        categorical or zero-as-missing splits, linear leaves, random forests, numbers that are not
        finite or outside float32's range, cycles, too deep, too many trees, nodes or classes).
    GroupSpecError
        If a tree splits on a feature in none of the groups.

    Examples
    --------
    A hand-written dump of two stumps, one per group; a stage closes when a tree first uses a group:

    >>> from edgeseq.train.trees.lightgbm_import import from_lightgbm_dump
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
    trees = dump["tree_info"]
    n_features, per_iter, link, scale = _header(dump, len(trees), _claimed_nodes(trees))
    spec, owner = _group_owner(groups, costs, group_names, n_features)
    arrays = {k: [] for k in ("feature", "threshold", "left", "right", "value")}
    roots, tree_groups = [], []
    report = _tree_reporter(progress, len(trees), _claimed_nodes(trees))
    for t, info in enumerate(trees):
        if not isinstance(info, dict) or not isinstance(info.get("tree_structure"), dict):
            raise ModelFormatError(f"tree {t} of the dump has no 'tree_structure'")
        roots.append(len(arrays["feature"]))
        tree_groups.append(_read_tree(info["tree_structure"], t, arrays, owner, n_features))
        leaves = (len(arrays["feature"]) - roots[-1] + 1) // 2
        if "num_leaves" in info and info["num_leaves"] != leaves:  # the count the node cap was checked on
            raise ModelFormatError(f"LightGBM tree {t}: num_leaves says {_show(info['num_leaves'])}, the tree "
                                   f"has {leaves} leaves")
        if len(arrays["feature"]) > MAX_NODES:
            raise ModelFormatError(f"the model has more than {MAX_NODES} nodes")
        if report is not None:
            report(t, len(arrays["feature"]))
    roots = np.array(roots, np.int64)
    thresholds = _thresholds32(np.array(arrays["threshold"], np.float64), roots)
    ens = TreeEnsemble(feature=np.array(arrays["feature"], np.int64), threshold=thresholds,
                       left=np.array(arrays["left"], np.int64), right=np.array(arrays["right"], np.int64),
                       value=np.array(arrays["value"], np.float64), roots=roots,
                       target=np.arange(len(trees), dtype=np.int64) % per_iter, n_features=n_features,
                       n_targets=per_iter)
    return _assemble(spec, ens, tree_groups, link, scale, classes,
                     booster_feature_names(dump, n_features, feature_names))


def from_lightgbm_text(text: str, groups, costs, group_names=None, classes=None, feature_names=None, *,
                       progress=None) -> TreeStageModel:
    """`from_lightgbm` on a LightGBM text model (``Booster.model_to_string()``, or a file written by
    ``Booster.save_model``).

    Why a second reader: the text format stores every tree as a few lines of numbers, so it is read
    with a handful of array operations per tree instead of a Python step per node, and LightGBM
    prints it about ten times faster than its JSON dump. `from_lightgbm` uses it for Boosters; it
    needs no LightGBM installation. Every count in the header and every ``num_leaves`` line is checked
    against the caps before any tree's numbers are parsed.

    Parameters
    ----------
    text : str
        The model text.
    groups, costs, group_names, classes, feature_names, progress
        As `from_lightgbm_dump` (the default names are the text's ``feature_names=`` line).

    Returns
    -------
    TreeStageModel
        The same predictions as `from_lightgbm_dump` on the same model's dump.

    Raises
    ------
    ModelFormatError, GroupSpecError
        As `from_lightgbm_dump`, and on text that is not a LightGBM model.

    Examples
    --------
    >>> from edgeseq.train.trees.lightgbm_import import from_lightgbm_text
    >>> text = "\\n".join(["tree", "version=v4", "num_class=1", "num_tree_per_iteration=1", "max_feature_idx=1",
    ...     "objective=regression", "", "Tree=0", "num_leaves=2", "num_cat=0", "split_feature=1",
    ...     "threshold=0.5", "decision_type=2", "left_child=-1", "right_child=-2", "leaf_value=-1 1",
    ...     "is_linear=0", "shrinkage=1", "", "end of trees"])
    >>> model = from_lightgbm_text(text, groups=[[0], [1]], costs=[1.0, 2.0])
    >>> model.predict([[0.0, 0.0], [0.0, 1.0]]).ravel().tolist()
    [-1.0, 1.0]
    >>> from_lightgbm_text(text.replace("regression", "regression sqrt"), groups=[[0], [1]], costs=[1.0, 2.0])
    Traceback (most recent call last):
    ...
    edgeseq.errors.ModelFormatError: LightGBM objective 'regression sqrt' (reg_sqrt=True) predicts the square ...
    """
    text = text.replace("\r\n", "\n") if isinstance(text, str) else text  # saved on Windows, decoded
    meta = text_header(text)
    _, sep, body = text.partition("\nTree=")
    body = body.partition("\nend of trees")[0]
    n_trees = body.count("\nTree=") + 1 if sep else 0
    blocks = body.split("\nTree=", MAX_TREES) if n_trees <= MAX_TREES else []
    counts = [_text_int(_leaves_line(b, t), "num_leaves") for t, b in enumerate(blocks)] if sep else []
    claimed = sum(2 * min(n, MAX_NODES) - 1 for n in counts)
    n_features, per_iter, link, scale = _header(meta, n_trees, claimed)
    spec, owner = _group_owner(groups, costs, group_names, n_features)
    report = _tree_reporter(progress, n_trees, claimed)
    parts = {k: [] for k in ("feature", "threshold", "left", "right", "value")}
    roots, tree_groups, offset = [], [], 0
    for t, block in enumerate(blocks):
        index, _, rest = block.partition("\n")
        if index.strip() != str(t):
            raise ModelFormatError(f"LightGBM text model: tree {t} is labelled {_show(index[:40])}")
        tree = dict(line.split("=", 1) for line in rest.split("\n") if "=" in line)
        arrays, groups_used = _text_tree(tree, t, counts[t], owner, n_features, offset)
        for k, v in arrays.items():
            parts[k].append(v)
        roots.append(offset)
        offset += arrays["value"].shape[0]
        tree_groups.append(groups_used)
        if report is not None:
            report(t, offset)
    roots = np.array(roots, np.int64)
    ens = TreeEnsemble(feature=np.concatenate(parts["feature"]),
                       threshold=_thresholds32(np.concatenate(parts["threshold"]), roots),
                       left=np.concatenate(parts["left"]), right=np.concatenate(parts["right"]),
                       value=np.concatenate(parts["value"]), roots=roots,
                       target=np.arange(n_trees, dtype=np.int64) % per_iter, n_features=n_features,
                       n_targets=per_iter)
    own = {"feature_names": meta["feature_names"]} if "feature_names" in meta else {}
    return _assemble(spec, ens, tree_groups, link, scale, classes,
                     booster_feature_names(own, n_features, feature_names))


def text_header(text: str) -> dict:
    r"""The header of a LightGBM text model (the lines before the first tree) as a dict.

    Counts are checked integers; ``feature_names`` is the list of names. Nothing of the trees is
    read, so a caller can match groups to the model's columns before importing it.

    Raises
    ------
    ModelFormatError
        When the text does not start like a LightGBM model, or a count is not a bounded integer.

    Examples
    --------
    >>> from edgeseq.train.trees.lightgbm_import import text_header
    >>> h = text_header("tree\nversion=v4\nmax_feature_idx=1\nfeature_names=ax ay\n\nTree=0\n")
    >>> h["max_feature_idx"], h["feature_names"]
    (1, ['ax', 'ay'])
    """
    if not isinstance(text, str) or not text.startswith(("tree\n", "tree\r\n")):
        raise ModelFormatError("not a LightGBM text model (it must start with a 'tree' line)")
    head = text.replace("\r\n", "\n").partition("\nTree=")[0]
    meta: dict = {}
    for line in head.split("\n")[1:]:
        key, eq, value = line.partition("=")
        if eq:
            meta[key] = value
        elif line == "average_output":
            meta["average_output"] = True
    for key in ("max_feature_idx", "num_tree_per_iteration", "num_class"):
        if key in meta:
            meta[key] = _text_int(meta[key], key)
    if "feature_names" in meta:
        meta["feature_names"] = meta["feature_names"].split(" ")
    return meta


def _leaves_line(block: str, t: int) -> str:
    """The value of a tree's ``num_leaves=`` line, found without parsing the rest of the tree."""
    at = block.find("\nnum_leaves=")
    if at < 0:
        raise ModelFormatError(f"LightGBM text model: tree {t} has no num_leaves line")
    return block[at + 12:block.find("\n", at + 12) if block.find("\n", at + 12) >= 0 else len(block)]


def _text_int(value: str, name: str) -> int:
    if not re.fullmatch(r"-?[0-9]{1,9}", value.strip()):
        raise ModelFormatError(f"LightGBM text model: {name} must be an integer of at most 9 digits, "
                               f"got {_show(value[:80])}")
    return int(value)


def _text_numbers(tree: dict, key: str, n: int, t: int, integer: bool = False) -> np.ndarray:
    """The n numbers of one line of a tree (an empty line for n == 0), parsed in one array operation
    (a 401-digit integer becomes inf; an integer field must hold integers below 2**31)."""
    tokens = tree.get(key, "").split()
    if len(tokens) != n:
        raise ModelFormatError(f"LightGBM tree {t}: {key} has {len(tokens)} values, expected {n}")
    try:
        values = np.array(list(map(float, tokens)), dtype=np.float64) if n else np.zeros(0)
    except ValueError:
        raise ModelFormatError(f"LightGBM tree {t}: {key} holds something that is not a number") from None
    if integer:
        if not np.all((np.abs(values) < 2 ** 31) & (values == np.round(values))):
            raise ModelFormatError(f"LightGBM tree {t}: {key} holds something that is not an integer")
        return values.astype(np.int64)
    return values


def _text_tree(tree: dict, t: int, n_leaves: int, owner: np.ndarray, n_features: int, offset: int):
    """One text tree as node arrays in edgeseq's layout (splits 0..L-2 as LightGBM numbers them, then
    the leaves; LightGBM numbers a new split after its parent, so children follow parents) and the
    groups it uses, in order of first use."""
    if not 1 <= n_leaves <= MAX_NODES:
        raise ModelFormatError(f"LightGBM tree {t}: num_leaves must be positive, got {n_leaves}")
    if tree.get("is_linear", "0").strip() != "0":
        raise ModelFormatError(f"LightGBM tree {t}: linear-tree leaves are not supported")
    if tree.get("num_cat", "0").strip() != "0":
        raise ModelFormatError(f"LightGBM tree {t}: categorical splits are not supported; encode the category "
                               f"as numbers or train without categorical_feature")
    m = n_leaves - 1
    value = _text_numbers(tree, "leaf_value", n_leaves, t)
    if not np.all(np.abs(value) <= F32_MAX):
        raise ModelFormatError(f"LightGBM tree {t}: a leaf value is not a finite number in float32's range")
    feature = _text_numbers(tree, "split_feature", m, t, integer=True)
    threshold = _text_numbers(tree, "threshold", m, t)
    decision = _text_numbers(tree, "decision_type", m, t, integer=True)
    kids = [_text_numbers(tree, k, m, t, integer=True) for k in ("left_child", "right_child")]
    if np.any(decision & 1):
        raise ModelFormatError(f"LightGBM tree {t}: categorical splits are not supported; encode the category "
                               f"as numbers or train without categorical_feature")
    if np.any((decision >> 2) & 3 == 1):
        raise ModelFormatError(f"LightGBM tree {t}: zero-as-missing splits are not supported; train with "
                               f"zero_as_missing=False")
    if np.any((feature < 0) | (feature >= n_features)):
        raise ModelFormatError(f"LightGBM tree {t}: a split feature is outside 0..{n_features - 1}")
    if not np.all(np.isfinite(threshold)):
        raise ModelFormatError(f"LightGBM tree {t}: a threshold is NaN or Inf (or too large); NaN/Inf thresholds "
                               f"are refused")
    g = np.where(feature < owner.shape[0], owner[np.minimum(feature, owner.shape[0] - 1)], -1) if m else feature
    if np.any(g < 0):
        f = int(feature[np.flatnonzero(g < 0)[0]])
        raise GroupSpecError(f"LightGBM tree {t} splits on feature {f}, which is in none of the given groups; "
                             f"add it to a group")
    # child c >= 0 is split c; c < 0 is leaf ~c, stored after the splits; out-of-range ones are left for
    # TreeEnsemble to refuse (it checks that every child follows its parent inside its tree)
    left, right = ((np.where(c >= 0, c, m + ~c) + offset) for c in kids)
    lone = -np.ones(n_leaves, np.int64)
    used = list(dict.fromkeys(g.tolist()))
    return {"feature": np.concatenate([feature, lone]), "threshold": np.concatenate([threshold, np.zeros(n_leaves)]),
            "left": np.concatenate([left, lone]), "right": np.concatenate([right, lone]),
            "value": np.concatenate([np.zeros(m), value])}, used


def _header(meta: dict, n_trees: int, claimed_nodes: int) -> tuple[int, int, str, float]:
    """(n_features, trees per round, link, scale) from the model-wide fields, every count checked
    (classes against the cap and the trees present, nodes against the cap) before any tree is read."""
    n_features = _int(meta.get("max_feature_idx"), "max_feature_idx", 0, MAX_NODES) + 1
    per_iter = _int(meta.get("num_tree_per_iteration", 1), "num_tree_per_iteration", 1, MAX_CLASSES)
    link, scale = _link(meta, per_iter)
    if meta.get("average_output"):
        raise ModelFormatError("random-forest LightGBM models (average_output) are not supported; "
                               "train with boosting='gbdt'")
    if n_trees > MAX_TREES:
        raise ModelFormatError(f"the model has {n_trees} trees; at most {MAX_TREES} are supported")
    if not n_trees:
        raise ModelFormatError("the LightGBM model has no trees")
    if n_trees % per_iter:  # LightGBM adds num_tree_per_iteration trees per round, always
        raise ModelFormatError(f"the model has {n_trees} trees, not a whole number of rounds of "
                               f"num_tree_per_iteration={per_iter} trees")
    if claimed_nodes > MAX_NODES:
        raise ModelFormatError(f"the model's trees have {claimed_nodes} nodes; at most {MAX_NODES} are supported")
    return n_features, per_iter, link, scale


def _group_owner(groups, costs, group_names, n_features: int):
    """(checked group spec, group of each column up to the last grouped one; -1 for none)."""
    try:
        spec = check_groups(groups, costs, group_names, n_features)
    except GroupSpecError as exc:
        raise GroupSpecError(f"{exc} (the LightGBM model has {n_features} features)") from None
    top = max(int(c.max()) for c in spec.columns) + 1  # columns past the groups' are in no group
    owner = np.full(top, -1)
    for g, cols in enumerate(spec.columns):
        owner[cols] = g
    return spec, owner


def _assemble(spec, ens: TreeEnsemble, tree_groups: list, link: str, scale: float, classes,
              feature_names) -> TreeStageModel:
    """The stage model of a read ensemble: boosting-order stages, output names, classes."""
    per_iter = ens.n_targets
    stages = _boosting_order_stages(ens, tree_groups, spec.costs, per_iter, scale)
    if link == "identity":
        names = ("y",) if per_iter == 1 else tuple(f"y{i}" for i in range(per_iter))
    else:
        n_cls = 2 if link == "sigmoid" else per_iter
        classes = np.arange(n_cls) if classes is None else np.asarray(classes)
        names = tuple(str(c) for c in classes)
    return TreeStageModel(spec.names, spec.columns, spec.costs, ens, stages, link, names,
                          classes=None if link == "identity" else classes,
                          feature_names=feature_names)


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
        raise ModelFormatError(f"LightGBM dump: {name} must be an integer in {lo}..{hi}, got {_show(v)}")
    return int(v)


def _show(v) -> str:
    """A bounded description of a value for an error line (a 401-digit integer is not printed)."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10 ** 30:
        return f"an integer of {len(str(abs(v))) if abs(v) < 10 ** 4000 else 'over 4000'} digits"
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _claimed_nodes(trees: list) -> int:
    """Nodes the dump's own per-tree ``num_leaves`` announce (2 L - 1 each), summed before any tree
    is read so an oversized model is refused at once; a tree without the count counts one node (the
    walk bounds it again)."""
    total = 0
    for info in trees:
        n = info.get("num_leaves") if isinstance(info, dict) else None
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            total += 2 * min(n, MAX_NODES) - 1
        else:
            total += 1
    return total


def _tree_reporter(progress, n_trees: int, n_nodes: int):
    """report(t, nodes_so_far): a progress line per tenth of the trees (None without a callback)."""
    if progress is None:
        return None
    done = [0]

    def report(t: int, nodes: int) -> None:
        tenth = (t + 1) * 10 // n_trees
        if tenth > done[0]:
            done[0] = tenth
            progress(f"LightGBM import: {t + 1:,}/{n_trees:,} trees, {nodes:,} of about {n_nodes:,} nodes")
    return report


def _link(dump: dict, per_iter: int) -> tuple[str, float]:
    """(link, scale of the raw score) from the WHOLE objective string, e.g. 'binary sigmoid:2'.

    LightGBM rebuilds the objective that transforms its raw score from this string when it predicts,
    so every word matters: 'regression sqrt' squares the raw score. A word this function does not
    know makes the model refused, never imported as if the word were absent.
    """
    objective = dump.get("objective")
    if objective is None:
        raise ModelFormatError("the LightGBM model names no objective (a custom objective function?): its "
                               "predict returns the raw score, whose meaning edgeseq cannot know; train with a "
                               "built-in objective")
    if not isinstance(objective, str) or len(objective) > 200:
        raise ModelFormatError(f"LightGBM dump: objective must be a short string, got {_show(objective)}")
    words = objective.split()
    name, params = (words[0] if words else ""), {}
    shown = _show(objective)
    for w in words[1:]:
        key, sep, value = w.partition(":")
        if key == "sqrt" and not sep:
            raise ModelFormatError(f"LightGBM objective {shown} (reg_sqrt=True) predicts the square of the raw "
                                   f"score, which edgeseq's links cannot reproduce; train with reg_sqrt=False "
                                   f"(e.g. on sqrt(y), squaring the prediction yourself)")
        if not sep or key in params:
            raise ModelFormatError(f"LightGBM objective {shown}: unknown or repeated parameter {_show(w)}; "
                                   f"refused rather than imported without it")
        params[key] = value
    if name in REFUSED_OBJECTIVES:
        why, fix = REFUSED_OBJECTIVES[name]
        raise ModelFormatError(f"LightGBM objective {shown} is refused: it {why}, which edgeseq's links "
                               f"(identity, sigmoid, softmax) cannot reproduce; {fix}")
    expect = {"binary": {"sigmoid"}, "multiclass": {"num_class"}}.get(name, set())
    known = name in IDENTITY_OBJECTIVES or name in ("binary", "cross_entropy", "multiclass")
    if known and set(params) != expect:
        raise ModelFormatError(f"LightGBM objective {shown}: parameters {sorted(params)} where LightGBM writes "
                               f"{sorted(expect)}; refused rather than guessed")
    n_class = dump.get("num_class", per_iter)
    if name in IDENTITY_OBJECTIVES and per_iter == 1 and n_class == 1:
        return "identity", 1.0
    if name in ("binary", "cross_entropy") and per_iter == 1 and n_class == 1:
        s = _param_float(params.get("sigmoid", "1"), objective)
        if not np.isfinite(s) or s <= 0 or s > 1e6:
            raise ModelFormatError(f"LightGBM dump: bad sigmoid coefficient in objective {shown}")
        return "sigmoid", s
    if name == "multiclass" and 2 <= per_iter:
        k = _param_float(params["num_class"], objective)
        if k != per_iter or n_class != per_iter:
            raise ModelFormatError(f"LightGBM objective {shown}: num_class disagrees with the model's "
                                   f"num_tree_per_iteration={per_iter}")
        return "softmax", 1.0
    if known:
        raise ModelFormatError(f"LightGBM objective {shown} with num_tree_per_iteration={per_iter} and num_class="
                               f"{_show(n_class)} is inconsistent")
    raise ModelFormatError(f"LightGBM objective {shown} is not supported (raw-score objectives such as regression, "
                           f"binary, cross_entropy and multiclass are)")


def _param_float(text: str, objective: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ModelFormatError(f"LightGBM objective {_show(objective)}: {_show(text)} is not a number") from None


def _number(v, what: str, t: int) -> float:
    """A JSON number as a float, refused when not finite or outside float32's range (the runtimes'
    type); huge integers (a 401-digit leaf) included, without printing them."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ModelFormatError(f"LightGBM tree {t}: {what} {_show(v)} is not a number")
    try:
        f = float(v)
    except OverflowError:
        f = float("inf")
    if not abs(f) <= F32_MAX:  # NaN fails too
        raise ModelFormatError(f"LightGBM tree {t}: {what} {_show(v)} is not a finite number in float32's range")
    return f


def _thresholds32(t: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """Largest float32 <= t (elementwise), so float32 x <= result exactly when double(x) <= t.

    Near zero LightGBM's predict first reads |x| <= 1e-35 as 0, and so does the result.

    Thresholds above float32's range become its largest value (every finite float32 goes left, as
    in LightGBM); thresholds below it are refused (naming the tree).
    """
    with np.errstate(over="ignore"):
        t32 = t.astype(np.float32)
    t32[t > F32_MAX] = np.float32(F32_MAX)
    down = t32.astype(np.float64) > t
    t32[down] = np.nextafter(t32[down], np.float32(-np.inf))
    # LightGBM's predict reads |x| <= K_ZERO as 0 (a missing sparse entry): a threshold inside that band
    # decides the whole band as 0 does, so it moves to the band's edge on 0's side
    t32[(t >= -K_ZERO) & (t < 0)] = np.nextafter(np.float32(-K_ZERO), np.float32(-np.inf))
    t32[(t >= 0) & (t < K_ZERO)] = np.float32(K_ZERO)
    low = np.flatnonzero(np.isneginf(t32))
    if low.size:
        tree = int(np.searchsorted(roots, low[0], side="right")) - 1
        raise ModelFormatError(f"LightGBM tree {tree}: threshold {float(t[low[0]])!r} is below the float32 range")
    return t32


def _read_tree(root: dict, t: int, arrays: dict, owner: np.ndarray, n_features: int) -> list[int]:
    """Append one tree (breadth-first, so children follow parents) and return the groups it uses.

    Thresholds are appended as float64 (checked finite here, rounded to float32 for the whole model
    at once); everything an error names is computed only on the error path, which keeps the walk
    at a few microseconds per node.
    """
    used: list[int] = []
    seen: set[int] = set()  # ids of node objects: a parsed JSON tree never shares one
    queue = [(root, 0)]
    base = len(arrays["feature"])
    head = 0
    feature, threshold, left, right, value = (arrays[k] for k in ("feature", "threshold", "left", "right", "value"))
    top = owner.shape[0]
    while head < len(queue):
        node, depth = queue[head]
        head += 1
        if not isinstance(node, dict):
            raise ModelFormatError(f"LightGBM tree {t}: a node is not an object")
        if id(node) in seen:
            raise ModelFormatError(f"LightGBM tree {t}: a node is reached twice (a shared or cyclic structure, "
                                   f"not a tree)")
        seen.add(id(node))
        if depth > MAX_DEPTH:
            raise ModelFormatError(f"LightGBM tree {t}: deeper than {MAX_DEPTH} levels")
        if len(queue) + base > MAX_NODES:
            raise ModelFormatError(f"LightGBM tree {t}: too many nodes")
        if "split_feature" not in node:
            if "leaf_coeff" in node:
                raise ModelFormatError(f"LightGBM tree {t}: linear-tree leaves are not supported")
            feature.append(-1)
            threshold.append(0.0)
            left.append(-1)
            right.append(-1)
            value.append(_number(node.get("leaf_value"), "leaf value", t))
            continue
        if node.get("decision_type", "<=") != "<=":
            raise ModelFormatError(f"LightGBM tree {t}: categorical split ({_show(node.get('decision_type'))}) is "
                                   f"not supported; encode the category as numbers or train without "
                                   f"categorical_feature")
        if node.get("missing_type", "None") == "Zero":
            raise ModelFormatError(f"LightGBM tree {t}: zero-as-missing splits are not supported; train with "
                                   f"zero_as_missing=False")
        f = node["split_feature"]
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or not 0 <= f < n_features:
            raise ModelFormatError(f"LightGBM tree {t}: split feature {_show(f)} outside 0..{n_features - 1}")
        f = int(f)
        g = int(owner[f]) if f < top else -1
        if g < 0:
            raise GroupSpecError(f"LightGBM tree {t} splits on feature {f}, which is in none of the given groups; "
                                 f"add it to a group")
        if g not in used:
            used.append(g)
        thr = node.get("threshold")
        if isinstance(thr, bool) or not isinstance(thr, (int, float)):
            raise ModelFormatError(f"LightGBM tree {t}: threshold {_show(thr)} is not a number")
        try:
            thr = float(thr)
        except OverflowError:
            thr = float("inf")
        if thr != thr or thr in (float("inf"), float("-inf")):
            raise ModelFormatError(f"LightGBM tree {t}: threshold is {_show(node.get('threshold'))}; NaN/Inf "
                                   f"thresholds are refused")
        feature.append(f)
        threshold.append(thr)
        value.append(0.0)
        left.append(base + len(queue))
        queue.append((node.get("left_child"), depth + 1))
        right.append(base + len(queue))
        queue.append((node.get("right_child"), depth + 1))
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
    const = np.zeros(n_targets)  # the trees before the first split are single leaves: add them up
    np.add.at(const, ens.target[:lead], ens.value[ens.roots[:lead]])
    stages = [TreeStage((), 0.0, 0, 0, np.zeros((n_targets, n_targets)), scale * const)]
    if not starts:  # no tree splits at all: one stage of constant trees
        return tuple(stages + [TreeStage((), 0.0, 0, ens.n_trees, W, np.zeros(n_targets))])
    starts[0] = 0
    bounds = starts + [ens.n_trees]
    for k, groups in enumerate(new):
        stages.append(TreeStage(groups, float(sum(costs[g] for g in groups)), bounds[k], bounds[k + 1], W,
                                np.zeros(n_targets)))
    return tuple(stages)
