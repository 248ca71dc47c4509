"""The fitted sequence: the single intermediate form between training and everything downstream.

Training decides the group order and one affine map per prefix in *raw* feature space (whitening
and scaling already folded in). The ONNX, C and manifest emitters and both runtimes consume only
this object, so none of them recomputes what training decided (the m2cgen pattern:
model -> intermediate form -> emitters).

Conventions
-----------
* Groups keep their original index ``0..J-1`` (``group_names``, ``group_columns``, ``costs``).
* ``order`` lists group indices in computation order; prefix ``j`` uses ``order[:j]``.
* ``coefs[j]`` has shape ``(d_j, P)`` where ``d_j`` is the total size of the groups in ``order[:j]``;
  its rows follow the *concatenation of those groups' raw columns in sequence order*
  (``prefix_columns(j)``). ``intercepts[j]`` has shape ``(P,)``. Prefix 0 has an empty coef.
* The linear output ``z = x_prefix @ coefs[j] + intercepts[j]`` is the prediction for
  ``link == "identity"``; ``"sigmoid"`` (P == 1, binary: probability of ``classes[1]``) and
  ``"softmax"`` (P == n_classes) turn it into probabilities.
"""

from __future__ import annotations

import warnings
from dataclasses import MISSING, dataclass, field, fields

import numpy as np

from edgeseq.errors import InputError
from edgeseq.format import MAX_UNUSED_TRAILING
from edgeseq.messages import brief
from edgeseq.budget import check_prefix_index, resolve_prefix

LINKS = ("identity", "sigmoid", "softmax")
# A name (group, output) is stored as one C string literal; C99 compilers need only accept 4095 bytes.
MAX_NAME_BYTES = 1024


# bound on the values of drawn sample rows (rows x features): a wide model (its width is vouched for
# by its own per-feature arrays) gets fewer rows rather than an allocation 512 times its file size
MAX_SAMPLE_VALUES = 1 << 22


def sample_count(n: int, n_features: int) -> int:
    """How many of `n` requested sample rows of `n_features` values fit MAX_SAMPLE_VALUES (>= 8).

    A very wide model gets fewer check rows rather than an allocation far larger than the model.

    Examples
    --------
    >>> from edgeseq.forms.linear import sample_count, MAX_SAMPLE_VALUES
    >>> sample_count(512, 10)
    512
    >>> sample_count(512, MAX_SAMPLE_VALUES // 100), sample_count(512, 10**9)
    (100, 8)
    """
    return max(8, min(n, MAX_SAMPLE_VALUES // max(n_features, 1)))


def sample_rows(n_features: int, n: int, *, mean=None, std=None, seed: int = 0,
                extreme_scale: float | None = None) -> np.ndarray:
    """Seeded synthetic rows N(mean, std) (standard normal without statistics) for numerical checks.

    The export's float32 check and `edgeseq verify` draw their rows here, so both see the same
    distribution. With `extreme_scale` s, the first eighth of the rows is multiplied by s and the
    second eighth by 1/s, so a check also covers magnitudes far from the training data.

    Examples
    --------
    >>> sample_rows(3, 4, mean=[10.0, 0.0, 0.0], std=[0.0, 1.0, 1.0])[:, 0].tolist()
    [10.0, 10.0, 10.0, 10.0]
    """
    Z = np.random.default_rng(seed).standard_normal((n, n_features))
    X = Z if mean is None or std is None else np.asarray(mean, dtype=np.float64) + Z * np.asarray(std)
    if extreme_scale is not None:
        k = n // 8
        X[:k] *= extreme_scale
        X[k:2 * k] /= extreme_scale
    return X


def sigmoid(z: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function.

    ``1 / (1 + exp(-z))`` overflows ``exp`` for very negative z; this form never does.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([-2.0, 0.0, 3.0])
    >>> bool(np.allclose(sigmoid(z), 1 / (1 + np.exp(-z))))
    True
    >>> sigmoid(np.array([-1000.0, 1000.0])).tolist()   # no overflow warning, no nan
    [0.0, 1.0]
    """
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax with the max subtracted first (no overflow).

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([[0.0, 1.0, 2.0]])
    >>> bool(np.allclose(softmax(z), np.exp(z) / np.exp(z).sum()))
    True
    >>> softmax(np.array([[1000.0, 1000.0]])).tolist()
    [[0.5, 0.5]]
    """
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def apply_link(link: str, z: np.ndarray) -> np.ndarray:
    """Map linear outputs (n, P) to predictions: identity, or class probabilities (n, n_classes).

    A sigmoid model has one linear output (the log-odds of ``classes[1]``) but predicts two columns,
    so every link returns one column per class.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([[0.0], [2.0]])
    >>> apply_link("identity", z) is z
    True
    >>> p = apply_link("sigmoid", z)
    >>> p.shape, bool(np.allclose(p.sum(axis=1), 1.0)), bool(np.allclose(p[:, 1], sigmoid(z[:, 0])))
    ((2, 2), True, True)
    """
    if link == "identity":
        return z
    if link == "sigmoid":
        p1 = sigmoid(z[:, 0])
        return np.column_stack([1.0 - p1, p1])
    return softmax(z)


@dataclass
class FittedSequence:
    """Order, costs, per-prefix raw-space affine maps and link of a fitted anytime model.

    The one intermediate form between training and everything after it: exporters, runtimes and
    evaluation read a model only through this object (an estimator's ``fitted_sequence_``).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq import AnytimeRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 4))
    >>> y = X[:, 2] + 0.1 * rng.normal(size=100)
    >>> seq = AnytimeRegressor(groups=[[0, 1], [2, 3]], costs=[1.0, 5.0]).fit(X, y).fitted_sequence_
    >>> seq.task, seq.link, seq.n_prefixes
    ('regression', 'identity', 3)
    >>> seq.cum_cost.tolist(), seq.prefix_for_budget(5.0)
    ([0.0, 5.0, 6.0], 1)
    >>> seq.prefix_columns(1).tolist()           # raw columns the prefix-1 model reads
    [2, 3]
    >>> seq.linear(X[:3], 0).shape               # prefix 0: the training mean, one output
    (3, 1)
    """

    task: str  # "regression" or "classification"
    link: str  # one of LINKS
    n_features_in: int
    group_names: tuple[str, ...]
    group_columns: tuple[np.ndarray, ...]
    costs: np.ndarray
    order: np.ndarray
    coefs: tuple[np.ndarray, ...]
    intercepts: np.ndarray  # (J+1, P)
    output_names: tuple[str, ...]  # regression: one name per output; classification: class labels as str
    classes: np.ndarray | None = None  # classification: the original labels
    feature_names: tuple[str, ...] | None = None  # raw column names, when known (CSV header)
    train_metrics: list[dict] = field(default_factory=list)  # one dict per prefix 0..J
    doubling_violations: tuple[int, ...] = ()  # steps (1-based prefix index) where Doubling had no eligible group
    provenance: dict = field(default_factory=dict)  # method, l2, whiten, n_samples, data fingerprint, ...
    y_was_1d: bool = True  # regression: predict returns (n,) rather than (n, 1)
    # training-data column statistics (length D, float64), so exporters and `verify` can draw realistic
    # sample inputs; None when unknown
    feature_mean: np.ndarray | None = None
    feature_std: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.order = np.asarray(self.order, dtype=np.int64)
        self.costs = np.asarray(self.costs, dtype=np.float64)
        self.intercepts = np.asarray(self.intercepts, dtype=np.float64)
        self.coefs = tuple(np.asarray(c, dtype=np.float64) for c in self.coefs)
        self.group_columns = tuple(np.asarray(c, dtype=np.int64) for c in self.group_columns)
        for name in ("feature_mean", "feature_std"):
            if getattr(self, name) is not None:
                setattr(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        FittedSequence.validate(self)

    # ----------------------------------------------------------------- structure
    @property
    def n_groups(self) -> int:
        """Number of feature groups J (in their original index order, not computation order).

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> seq.n_groups, len(seq.order)
        (2, 2)
        """
        return len(self.group_names)

    @property
    def n_prefixes(self) -> int:
        """J + 1: prefix 0 (nothing computed) to prefix J (all groups).

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> seq.n_prefixes == seq.n_groups + 1 == len(seq.coefs)
        True
        """
        return len(self.order) + 1

    @property
    def n_outputs(self) -> int:
        """Number P of linear outputs per row (1 for regression on one target and for sigmoid).

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> seq.n_outputs, seq.linear(np.ones((4, 3)), 2).shape
        (1, (4, 1))
        """
        return int(self.intercepts.shape[1])

    @property
    def cum_cost(self) -> np.ndarray:
        """Cumulative cost of each prefix, starting at 0.0 (length J + 1).

        Costs are summed in computation order (``order``), not in the groups' index order.

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> seq.cum_cost.tolist()                    # group "b" (cost 4) is computed first
        [0.0, 4.0, 5.0]
        """
        return np.concatenate([[0.0], np.cumsum(self.costs[self.order])])

    @property
    def group_sizes(self) -> np.ndarray:
        """Number of raw columns in each group, by original group index.

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> seq.group_sizes.tolist()
        [1, 2]
        """
        return np.array([len(c) for c in self.group_columns], dtype=np.int64)

    def prefix_columns(self, j: int) -> np.ndarray:
        """Raw column indices used by prefix j, in the row order of ``coefs[j]``.

        Raises
        ------
        InputError
            When `j` is not a prefix index.

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> seq.prefix_columns(1).tolist(), seq.prefix_columns(2).tolist()
        ([1, 2], [1, 2, 0])
        >>> all(len(seq.prefix_columns(j)) == seq.coefs[j].shape[0] for j in range(seq.n_prefixes))
        True
        """
        self._check_prefix(j)
        if j == 0:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([self.group_columns[g] for g in self.order[:j]])

    def prefix_for_budget(self, budget: float) -> int:
        """Longest prefix whose cumulative cost is <= budget (inclusive).

        The same rule as `edgeseq.budget.resolve_prefix`, which every runtime uses; the tree and
        layer-block forms answer the same question under the same name, through the same function.

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> [seq.prefix_for_budget(b) for b in (0.0, 3.9, 4.0, 100.0)]
        [0, 0, 1, 2]
        """
        return resolve_prefix(self.cum_cost, budget=budget)

    def validate(self) -> None:
        """Every cross-field invariant, before anything indexes the object.

        Called as ``FittedSequence.validate(seq)`` (never ``seq.validate()``) on objects rebuilt from
        files, so an instance cannot bring its own. Types are checked before values (a file can put
        anything in any field), every size is checked against the arrays that carry it, and messages
        quote values only through `brief`.

        Raises
        ------
        InputError
            Naming the first field that breaks an invariant.

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> FittedSequence.validate(seq)              # a valid object: nothing happens
        >>> seq.order = np.array([0, 0])
        >>> FittedSequence.validate(seq)
        Traceback (most recent call last):
        ...
        edgeseq.errors.InputError: FittedSequence.order must be a permutation of the 2 groups, got [...]
        """
        _validate(self)

    def _check_prefix(self, j) -> None:
        check_prefix_index(j, self.n_prefixes)

    # ----------------------------------------------------------------- prediction
    def linear_from_prefix_features(self, j: int, x_prefix: np.ndarray) -> np.ndarray:
        """Linear output of prefix j from the concatenated prefix features (n, d_j) -> (n, P).

        For callers that only ever computed the prefix's groups (the anytime runtimes): the columns
        must be in the order of `prefix_columns`.

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> x_b = np.array([[1.0, 1.0]])              # group "b" only: raw columns 1 and 2
        >>> seq.linear_from_prefix_features(1, x_b).tolist()   # 2*1 + 3*1 + 0
        [[5.0]]
        """
        self._check_prefix(j)
        x_prefix = np.asarray(x_prefix, dtype=np.float64)
        return x_prefix @ self.coefs[j] + self.intercepts[j]

    def linear(self, X: np.ndarray, j: int) -> np.ndarray:
        """Linear output of prefix j from full raw rows X (n, D) -> (n, P).

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> X = np.array([[10.0, 1.0, 1.0]])
        >>> seq.linear(X, 0).tolist(), seq.linear(X, 2).tolist()   # prior; then 2*1 + 3*1 + 1*10
        ([[0.5]], [[15.0]])
        >>> bool(np.allclose(seq.linear(X, 1), X[:, [1, 2]] @ seq.coefs[1] + seq.intercepts[1]))
        True
        """
        return self.linear_from_prefix_features(j, np.asarray(X)[:, self.prefix_columns(j)])

    @property
    def stage_names(self) -> tuple[str, ...]:
        """One name per stage after the prior: the group each prefix adds, in order.

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeRegressor
        >>> X = np.random.default_rng(0).normal(size=(30, 2))
        >>> est = AnytimeRegressor(groups=[[0], [1]], costs=[1.0, 1.0], group_names=["u", "v"]).fit(X, X[:, 1])
        >>> est.fitted_sequence_.stage_names
        ('v', 'u')
        """
        return tuple(self.group_names[g] for g in self.order)

    def staged_decision(self, X):
        """Yield the linear output (n, P) of prefixes 0..J on raw rows X (the stage protocol's name).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq import AnytimeRegressor
        >>> X = np.random.default_rng(0).normal(size=(30, 2))
        >>> seq = AnytimeRegressor().fit(X, X[:, 0]).fitted_sequence_
        >>> z = list(seq.staged_decision(X[:2]))
        >>> len(z) == seq.n_prefixes, bool(np.allclose(z[1], seq.linear(X[:2], 1)))
        (True, True)
        """
        return (self.linear(X, j) for j in range(self.n_prefixes))

    def apply_link(self, z: np.ndarray) -> np.ndarray:
        """Map linear outputs to predictions: identity, or class probabilities (n, n_classes).

        Examples
        --------
    >>> import numpy as np
    >>> from edgeseq.forms.linear import FittedSequence
    >>> seq = FittedSequence(task="regression", link="identity", n_features_in=3,
    ...     group_names=("a", "b"), group_columns=(np.array([0]), np.array([1, 2])),
    ...     costs=[1.0, 4.0], order=[1, 0],                  # group "b" first
    ...     coefs=(np.zeros((0, 1)), np.array([[2.0], [3.0]]), np.array([[2.0], [3.0], [1.0]])),
    ...     intercepts=[[0.5], [0.0], [0.0]], output_names=("y",))
    >>> z = seq.linear(np.ones((2, 3)), 2)
        >>> seq.apply_link(z) is z                  # identity link: the linear output is the prediction
        True
        """
        return apply_link(self.link, z)


# ----------------------------------------------------------------------------- validation
def _bad(field: str, problem: str) -> InputError:
    return InputError(f"FittedSequence.{field} {problem}")


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def renamed(old: str, new: str) -> None:
    """Warn (DeprecationWarning) that the method `old` is now called `new`, from inside the old name.

    Every intermediate form answers the stage protocol under one set of names (`prefix_for_budget`,
    `prefix_columns`, as the runtimes do); a form's earlier names stay as thin aliases that call the
    new ones and say so once per call site.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     renamed("Model.old_name", "new_name")
    >>> str(caught[0].message)
    'Model.old_name is deprecated; use new_name (the name every stage form shares)'
    """
    warnings.warn(f"{old} is deprecated; use {new} (the name every stage form shares)", DeprecationWarning,
                  stacklevel=3)


def check_name(name, what: str, max_bytes: int = MAX_NAME_BYTES, allow_empty: bool = False) -> None:
    """A name that every emitter can write: a str (non-empty unless `allow_empty`), valid Unicode,
    no NUL, at most `max_bytes` of UTF-8.

    Names become JSON strings, ONNX names and C string literals, so anything that one of those
    cannot carry is refused here, once, rather than by each emitter.

    Raises
    ------
    InputError
        Saying which rule `name` breaks, with `what` naming it.

    Examples
    --------
    >>> check_name("temperature", "group name")
    >>> check_name("a" + chr(0) + "b", "group name")
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: group name ... contains a NUL character
    """
    if type(name) is not str or not (name or allow_empty):
        raise InputError(f"{what} must be a non-empty string, got {brief(name)}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise InputError(f"{what} {brief(name)} is not valid Unicode text (lone surrogate)") from None
    if "\x00" in name:
        raise InputError(f"{what} {brief(name)} contains a NUL character")
    if size > max_bytes:
        raise InputError(f"{what} {brief(name, max_chars=40)} is {size} bytes of UTF-8; at most {max_bytes} "
                         "are allowed (the name becomes a C string literal)")


def _array(seq, field: str, kind: str, ndim: int):
    a = getattr(seq, field)
    if type(a) is not np.ndarray or a.dtype.kind not in kind or a.ndim != ndim:
        raise _bad(field, f"must be a {ndim}-D numpy array of kind {kind!r}, got {brief(a)}")
    return a


def _names(seq, field: str, n: int, what: str) -> None:
    names = getattr(seq, field)
    if type(names) is not tuple or len(names) != n:
        raise _bad(field, f"must be a tuple of {n} names, got {brief(names)}")
    for i, name in enumerate(names):
        check_name(name, f"{what} {i}", allow_empty=True)


def _validate_groups(seq) -> tuple[int, int]:
    names = seq.group_names
    if type(names) is not tuple:
        raise _bad("group_names", f"must be a tuple, got {type(names).__name__}")
    J = len(names)
    _names(seq, "group_names", J, "group name")
    if len(set(names)) != J:
        raise _bad("group_names", "repeats a name")
    D = seq.n_features_in
    if not _is_int(D) or D < 1:
        raise _bad("n_features_in", f"must be a positive integer, got {brief(D)}")
    cols = seq.group_columns
    if type(cols) is not tuple or len(cols) != J:
        raise _bad("group_columns", f"must be a tuple with one array per group ({J}), got {brief(cols)}")
    seen = 0
    top = -1
    for g, c in enumerate(cols):
        if type(c) is not np.ndarray or c.dtype.kind not in "iu" or c.ndim != 1 or c.size == 0:
            raise _bad(f"group_columns[{g}]", f"must be a non-empty 1-D integer array, got {brief(c)}")
        if c.min() < 0 or c.max() >= D:
            raise _bad(f"group_columns[{g}]", f"has column {brief(int(c.max()) if c.min() >= 0 else int(c.min()))}"
                                              f" outside 0..{D - 1} (n_features_in {D})")
        seen += c.size
        top = max(top, int(c.max()))
    if seen and np.unique(np.concatenate(cols)).size != seen:
        raise _bad("group_columns", "repeats a column (groups must be disjoint)")
    has_width = seq.feature_names is not None or seq.feature_mean is not None or seq.feature_std is not None
    if not has_width and D > top + 1 + MAX_UNUSED_TRAILING:
        raise _bad("n_features_in", f"is {D}, but the groups use columns up to {top} and no per-feature "
                                    f"array (names, statistics) vouches for more than {MAX_UNUSED_TRAILING} "
                                    "unused trailing columns")
    costs = _array(seq, "costs", "f", 1)
    if costs.shape != (J,) or not np.all(np.isfinite(costs)) or np.any(costs < np.finfo(np.float64).tiny):
        raise _bad("costs", f"must hold one finite cost >= {np.finfo(np.float64).tiny:.3g} per group ({J}), "
                            f"got {brief(costs)}")
    with np.errstate(over="ignore"):
        total = costs.sum()
    if not np.isfinite(total):
        raise _bad("costs", "sum beyond the float64 range")
    order = _array(seq, "order", "iu", 1)
    if order.shape != (J,) or not np.array_equal(np.sort(order), np.arange(J)):
        raise _bad("order", f"must be a permutation of the {J} groups, got {brief(order)}")
    return J, D


def _validate_weights(seq, J: int) -> int:
    icpt = _array(seq, "intercepts", "f", 2)
    P = icpt.shape[1]
    if icpt.shape[0] != J + 1 or P < 1:
        raise _bad("intercepts", f"must have shape ({J + 1}, P >= 1), got {icpt.shape}")
    coefs = seq.coefs
    if type(coefs) is not tuple or len(coefs) != J + 1:
        raise _bad("coefs", f"must be a tuple of {J + 1} arrays (one per prefix), got {brief(coefs)}")
    d = 0
    for j, c in enumerate(coefs):
        if j > 0:
            d += seq.group_columns[int(seq.order[j - 1])].size
        if type(c) is not np.ndarray or c.dtype.kind != "f" or c.shape != (d, P):
            raise _bad(f"coefs[{j}]", f"must be a float array of shape {(d, P)}, got {brief(c)}")
    return P


def _validate_outputs(seq, P: int) -> None:
    if type(seq.link) is not str or seq.link not in LINKS:
        raise _bad("link", f"must be one of {LINKS}, got {brief(seq.link)}")
    if type(seq.task) is not str or seq.task not in ("regression", "classification"):
        raise _bad("task", f"must be 'regression' or 'classification', got {brief(seq.task)}")
    if (seq.task == "regression") != (seq.link == "identity"):
        raise _bad("link", f"{seq.link!r} does not fit task {seq.task!r} (regression uses identity)")
    if seq.link == "sigmoid" and P != 1:
        raise _bad("intercepts", f"have {P} columns; a sigmoid model has one linear output")
    if seq.link == "softmax" and P < 2:
        raise _bad("intercepts", f"have {P} column; a softmax model has one output per class (>= 2)")
    n_names = 2 if seq.link == "sigmoid" else P
    _names(seq, "output_names", n_names, "output name")
    if seq.task == "regression":
        if seq.classes is not None:
            raise _bad("classes", "must be None for a regression model")
    else:
        c = seq.classes
        if type(c) is not np.ndarray or c.ndim != 1 or c.shape[0] != n_names or (c.dtype.hasobject and not all(
                type(v) in (str, int, float, bool) for v in c.tolist())):
            raise _bad("classes", f"must be a 1-D array of {n_names} labels, got {brief(c)}")
        if np.unique(c).size != c.size:
            raise _bad("classes", f"repeats a label: {brief(c)}")
    if len(set(seq.output_names)) != n_names:
        raise _bad("output_names", "repeats a name")


def check_feature_names(names, n_features: int, what: str = "feature_names") -> tuple[str, ...] | None:
    """`names` as a tuple of `n_features` distinct, writable names, or None when there are none.

    Every model kind records the names of its raw columns with this one check, because data are
    matched to a model by column name wherever names exist (`edgeseq run`, `verify`, `predict` on a
    data frame); a repeated name would make that matching ambiguous.

    Parameters
    ----------
    names : sequence of str or None
        One name per raw column; numpy strings are converted to `str`.
    n_features : int
        The model's number of raw columns.
    what : str, default="feature_names"
        How the caller names the field, for the message.

    Raises
    ------
    InputError
        On a wrong count, a repeated name, or a name no emitter can write.

    Examples
    --------
    >>> import numpy as np
    >>> check_feature_names(np.array(["ax", "ay"]), 2)
    ('ax', 'ay')
    >>> check_feature_names(None, 2) is None
    True
    >>> check_feature_names(["ax", "ax"], 2)
    Traceback (most recent call last):
    ...
    edgeseq.errors.InputError: feature_names repeats a name ('ax', 'ax') (columns are matched by name)
    """
    if names is None:
        return None
    if isinstance(names, (str, bytes)) or not hasattr(names, "__len__") or len(names) != n_features:
        raise InputError(f"{what} must be {n_features} names, one per column of X, got {brief(names)}")
    out = tuple(str(n) if isinstance(n, np.str_) else n for n in names)
    for i, name in enumerate(out):
        check_name(name, f"{what}[{i}]", allow_empty=True)
    if len(set(out)) != len(out):
        raise InputError(f"{what} repeats a name {brief(out)} (columns are matched by name)")
    return out


def _validate_extras(seq, J: int, D: int) -> None:
    if seq.feature_names is not None:
        if type(seq.feature_names) is not tuple:
            raise _bad("feature_names", f"must be a tuple of {D} names, got {brief(seq.feature_names)}")
        check_feature_names(seq.feature_names, D, "FittedSequence.feature_names")
    for name in ("feature_mean", "feature_std"):
        v = getattr(seq, name)
        if v is not None and (type(v) is not np.ndarray or v.shape != (D,) or v.dtype.kind != "f"
                              or not np.all(np.isfinite(v))):
            raise _bad(name, f"must be a finite float array with one entry per feature ({D}), got {brief(v)}")
    tm = seq.train_metrics
    if type(tm) is not list or len(tm) > J + 1 or any(
            type(d) is not dict or not all(type(k) is str for k in d) for d in tm):
        raise _bad("train_metrics", f"must be a list of at most {J + 1} dicts keyed by metric name")
    dv = seq.doubling_violations
    if type(dv) is not tuple or not all(_is_int(v) and 1 <= v <= J for v in dv):
        raise _bad("doubling_violations", f"must be a tuple of steps in 1..{J}, got {brief(dv)}")
    if type(seq.provenance) is not dict or not all(type(k) is str for k in seq.provenance):
        raise _bad("provenance", "must be a dict keyed by strings")
    if not isinstance(seq.y_was_1d, (bool, np.bool_)):
        raise _bad("y_was_1d", f"must be True or False, got {brief(seq.y_was_1d)}")


def _validate(seq: FittedSequence) -> None:
    state = vars(seq)
    missing = [f.name for f in fields(FittedSequence) if f.name not in state and f.default is MISSING]
    if missing:  # a file can drop attributes; only a plain default (a class attribute) stands in
        raise InputError(f"FittedSequence lacks the field(s) {brief(missing)}")
    J, D = _validate_groups(seq)
    P = _validate_weights(seq, J)
    _validate_outputs(seq, P)
    _validate_extras(seq, J, D)
