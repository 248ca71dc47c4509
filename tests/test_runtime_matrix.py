"""`ExportedModel.predict`'s fast paths: the features as one matrix laid out as in training, and the
dict of float32 group arrays whose shapes were seen before.

The matrix path runs the joined linear graph with its weight rows in the matrix's column order
(`joined_prefix(..., columns=...)`), so it must agree with the dict path, the prefix graph the
anytime loop runs and the estimator's float64 prediction, for every budget, both dtypes, any
memory layout, in the bound (small and large) buffers. The input forms it must not take (other
dtypes, a prefix that reads some columns only, one row as 1-D) must give the dict path's answer
or its error, and a NaN/Inf in a column the prefix reads is refused naming the group. Negative
controls: a matrix graph built with the columns as the groups lie side by side (not as in
training) fails the same comparison, and a group of the wrong width after its shapes were cached
is still refused."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from edgeseq.errors import RuntimeInputError
from edgeseq.export.writer import export_model
from edgeseq.runtime.fuse import FuseError, joined_prefix
from edgeseq.runtime.model import _SHAPES_KEPT, ClassifierPrediction, ExportedModel
from edgeseq.runtime.ort import BIND_MAX_ROWS, PrefixRunner
from test_runtime_joined_linear import _answer, _close, _feats, _staged
from test_runtime_joined_linear import exported  # noqa: F401  (the fixture: random linear exports)

def _columns(sess: ExportedModel) -> list[int]:
    return [c for g in sess.manifest["groups"] for c in g["columns"]]


def _layouts(X: np.ndarray, dtype) -> list[np.ndarray]:
    """X as C order, Fortran order and a strided view of a wider array, all of `dtype`."""
    wide = np.zeros((X.shape[0], 2 * X.shape[1]), dtype)
    wide[:, ::2] = X
    return [np.ascontiguousarray(X, dtype), np.asfortranarray(X, dtype), wide[:, ::2]]


@pytest.mark.parametrize("n", [1, 7, BIND_MAX_ROWS + 1, 300])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_matrix_agrees_with_the_dict_the_prefix_graphs_and_the_estimator(exported, n, dtype):
    seq, out, rng = exported
    sess = ExportedModel(out)
    assert _columns(sess) != sorted(_columns(sess)) or len(sess.groups) < 2  # the layouts differ (seeds chosen so)
    X = rng.normal(size=(n, seq.n_features_in)).astype(np.float32).astype(np.float64)
    feats = _feats(seq, X)
    budgets = [0.0, *rng.uniform(0, sess.cum_cost[-1], size=2), float(sess.cum_cost[-1]), None]
    full = sess.n_prefixes - 1
    for budget in budgets:
        j = sess.prefix_for_budget(budget if budget is not None else np.inf)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # prefix 0 warns that the budget affords nothing
            by_dict = sess.predict(feats, budget=budget)
            preds = [sess.predict(M, budget=budget) for M in _layouts(X, dtype)]
        want, want_score = _staged(sess, feats, j)
        own = seq.apply_link(seq.linear(X, j)).reshape(n, -1)
        for pred in preds:
            got, score = _answer(pred)
            assert _close(got, want) and _close(score, want_score), (budget, j)
            assert _close(got, _answer(by_dict)[0]) and _close(got, own, rtol=2e-5), (budget, j)
            if isinstance(pred, ClassifierPrediction):
                assert np.array_equal(pred.label_index, pred.proba.argmax(axis=1)) and pred.prefix == j
        # the matrix graph runs exactly when the prefix reads every column
        assert (sess._matrix_runners.get((j, dtype is np.float64)) is not None) == (j == full), (budget, j)
    runner = sess._matrix_runners[full, dtype is np.float64][n > BIND_MAX_ROWS]
    assert n in runner._bindings  # bound at every size here (up to 4 MB of input), not only up to 64 rows


@pytest.mark.parametrize("n", [3, 300])
def test_a_float64_matrix_answers_as_its_float32_cast(exported, n):
    """The float64 graphs cast in onnxruntime as numpy's astype does: the same answer bit for bit."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    X = rng.normal(size=(n, seq.n_features_in)) * 10.0 ** rng.integers(-3, 4, size=(n, seq.n_features_in))
    got, want = (_answer(sess.predict(M))[1] for M in (X, X.astype(np.float32)))
    assert np.array_equal(got, want)
    assert sess._matrix_runners[sess.n_prefixes - 1, True] is not None


def test_the_matrix_graph_in_the_grouped_column_order_is_caught(exported):
    """Negative control: the same graph with the weight rows left as the groups lie side by side
    answers differently from the prefix graphs, so the comparison above checks the placement."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    cols = _columns(sess)
    X = rng.normal(size=(40, seq.n_features_in)).astype(np.float32)
    want = _staged(sess, _feats(seq, X), j)[1]
    p = sess.manifest["prefixes"][j]
    graph = (out / p["file"]).read_bytes()
    right = sess._matrix_runner(j, False)[0]
    model, name = joined_prefix(graph, columns=list(range(len(cols))))
    wrong = PrefixRunner(model, [name], right.outputs, "grouped", sess._squeeze, signed=right._signed)
    for runner, ok in ((right, True), (wrong, False)):
        outs, _ = runner.call([X], 40)
        assert _close(np.asarray(outs[0], np.float64).reshape(40, -1), want) == ok


def test_columns_must_be_a_permutation(exported):
    _, out, _ = exported
    sess = ExportedModel(out)
    p = sess.manifest["prefixes"][-1]
    graph = (out / p["file"]).read_bytes()
    d = sum(g.dim for g in sess.groups)
    for bad in ([0] * d, list(range(1, d + 1)), list(range(d - 1))):
        with pytest.raises(FuseError, match="permutation"):
            joined_prefix(graph, columns=bad)


@pytest.mark.parametrize("n", [1, 300])
def test_other_matrix_forms_take_the_dict_path(exported, n):
    """Integers, one row as 1-D and a partial prefix are not the fast path and answer as the dict
    does; wrong widths, other ranks and non-numbers are refused."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    Xi = rng.integers(-3, 4, size=(n, seq.n_features_in))
    want = _answer(sess.predict(_feats(seq, Xi.astype(np.float64)), prefix=j))[0]
    assert _close(_answer(sess.predict(Xi, prefix=j))[0], want)
    one = _answer(sess.predict(Xi[0].astype(np.float32), prefix=j))[0]
    assert _close(one, want[:1])
    X = rng.normal(size=(n, seq.n_features_in))
    part = sess.predict(X, prefix=j - 1)
    assert _close(_answer(part)[0], _answer(sess.predict(_feats(seq, X), prefix=j - 1))[0])
    assert sess._matrix_runners[j - 1, True] is None
    for bad, what in ((X[:, :-1], "must have shape"), (X[None], "must have shape"),
                      (np.full((n, seq.n_features_in), "a"), "numeric"),
                      (np.zeros((0, seq.n_features_in), np.float32), "no rows")):
        with pytest.raises(RuntimeInputError, match=what):
            sess.predict(bad, prefix=j)


@pytest.mark.parametrize("n", [1, 300])
@pytest.mark.parametrize("dtype, bad", [(np.float32, np.nan), (np.float32, np.inf), (np.float64, np.nan),
                                        (np.float64, -np.inf), (np.float64, 1e300)])
def test_a_non_finite_value_in_a_read_column_is_refused(exported, n, dtype, bad):
    """A NaN/Inf (or, in float64, a value beyond float32) in a column the prefix reads is refused,
    naming its group, with no numpy warning even when warnings are errors; in a column the prefix
    does not read it changes nothing."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    X = rng.normal(size=(n, seq.n_features_in)).astype(dtype)
    g = sess.groups[int(rng.integers(len(sess.groups)))]
    col = sess.manifest["groups"][sess.group_names.index(g.name)]["columns"][-1]
    X[n - 1, col] = bad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeInputError, match=repr(g.name)):
            sess.predict(X, prefix=j)
    last = sess.manifest["groups"][-1]  # read by the last prefix only
    if g.name == last["name"]:
        clean = X.copy()
        clean[n - 1, col] = 0.5
        assert np.array_equal(_answer(sess.predict(X, prefix=j - 1))[0], _answer(sess.predict(clean, prefix=j - 1))[0])


def test_the_dict_shape_cache_keeps_every_check(exported):
    """After a batch size's shapes are cached, a float64 group takes the converting path (same
    answer), a group of the wrong width is refused naming it (negative control: the cache does not
    wave it through), and the cache holds at most `_SHAPES_KEPT` batch sizes."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    X = rng.normal(size=(5, seq.n_features_in)).astype(np.float32)
    feats = _feats(seq, X)
    want = _answer(sess.predict(feats, prefix=j))[0]
    assert tuple(feats[name].shape for name, _ in sess._plan[j]) in sess._rows_of[j]
    as64 = {k: v.astype(np.float64) for k, v in feats.items()}
    assert _close(_answer(sess.predict(as64, prefix=j))[0], want)
    strided = {k: np.repeat(v, 2, axis=0)[::2] for k, v in feats.items()}  # non-contiguous float32 views
    assert _close(_answer(sess.predict(strided, prefix=j))[0], want)
    name, dim = sess._plan[j][-1]
    wrong = dict(feats, **{name: np.zeros((5, dim + 1), np.float32)})
    with pytest.raises(RuntimeInputError, match=repr(name)):
        sess.predict(wrong, prefix=j)
    short = dict(feats, **{name: feats[name][:4]})
    with pytest.raises(RuntimeInputError, match="different numbers of rows"):
        sess.predict(short, prefix=j)
    for n in range(1, _SHAPES_KEPT + 3):
        sess.predict(_feats(seq, X[:1].repeat(n, axis=0)), prefix=j)
    assert 1 <= len(sess._rows_of[j]) <= _SHAPES_KEPT


def test_a_budget_warning_names_the_caller(exported):
    """Prefix 0's warning points at the line that called predict, for a dict and for a matrix."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    X = rng.normal(size=(3, seq.n_features_in))
    for features in (_feats(seq, X), X):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            sess.predict(features, budget=0.0)
        assert [w.filename for w in got] == [__file__]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_large_matrix_read_in_place_answers_as_its_copy(exported, dtype):
    """From `_in_place_rows` rows a C-contiguous matrix of the graph's dtype is bound where it lies
    (lowered here so that a small test reaches it): the same answer bit for bit as the copy into
    the bound buffer. Negative control: a Fortran-order matrix of the same rows bound next is
    copied into our buffer, which is bound again (were it not, the graph would read the previous,
    different matrix)."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    j, n = sess.n_prefixes - 1, BIND_MAX_ROWS + 6
    X1, X2 = (rng.normal(size=(n, seq.n_features_in)).astype(dtype) for _ in range(2))
    want1, want2 = (_answer(sess.predict(X, prefix=j))[1] for X in (X1, X2))  # copied (rows below the bar)
    assert not np.array_equal(want1, want2)
    runner = sess._matrix_runners[j, dtype is np.float64][1]
    assert runner._in_place_rows > n and runner._bindings[n].own
    runner._in_place_rows = n
    assert np.array_equal(_answer(sess.predict(X1, prefix=j))[1], want1)
    assert not runner._bindings[n].own  # X1 itself was bound
    assert np.array_equal(_answer(sess.predict(np.asfortranarray(X2), prefix=j))[1], want2)
    assert runner._bindings[n].own
    assert np.array_equal(_answer(sess.predict(X2, prefix=j))[1], want2)
    small = sess._matrix_runners[j, dtype is np.float64][0]
    assert small._in_place_rows > 1 << 40  # up to BIND_MAX_ROWS rows the matrix is always copied


def test_the_matrix_fast_path_answers_as_the_general_one(exported):
    """`predict`'s direct call of a prefix's matrix function (`_matrix_calls`) gives the general
    `_predict_matrix`'s answer bit for bit, labels included, for budgets, prefixes and both dtypes;
    a budget resolving to a prefix without a matrix graph takes the general path."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    for n in (1, 5, BIND_MAX_ROWS + 1):
        for dtype in (np.float32, np.float64):
            X = rng.normal(size=(n, seq.n_features_in)).astype(dtype)
            for kw in ({"prefix": j}, {}, {"budget": float(sess.cum_cost[-1])}):
                got, want = sess.predict(X, **kw), sess._predict_matrix(X, j)
                assert (j, dtype is np.float64) in sess._matrix_calls
                for a, b in zip(_parts(got), _parts(want)):
                    assert a.dtype == b.dtype and np.array_equal(a, b)
    assert (j - 1, False) not in sess._matrix_calls
    X = rng.normal(size=(3, seq.n_features_in))
    assert _close(_answer(sess.predict(X, prefix=j - 1))[0], _answer(sess.predict(_feats(seq, X), prefix=j - 1))[0])


@pytest.mark.parametrize("classes", [None, [3, 7, 8], ["no", "yes", "maybe"], [0.0, 1.0, 2.0]])
def test_the_matrix_labels_are_the_classes_of_the_indices(classes, tmp_path):
    """Classes 0..K-1 as int64 take the labels as a copy of the indices (not the same array), any
    other classes are looked up; either way label == classes[label_index]. Negative control:
    classes 3, 7, 8 are not the indices, so a shortcut taken there would fail the comparison."""
    from edgeseq import AnytimeClassifier
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 4))
    y = np.digitize(X @ [1.0, -1.0, 0.5, 2.0], [-0.5, 0.5])
    est = AnytimeClassifier([[0, 1], [2, 3]], [1.0, 1.0])
    est.fit(X, y if classes is None else np.array(classes)[y])
    export_model(est.fitted_sequence_, tmp_path / "out")
    sess = ExportedModel(tmp_path / "out")
    for n in (1, 9, BIND_MAX_ROWS + 3):
        pred = sess.predict(X[:n].astype(np.float32))
        assert (sess.n_prefixes - 1, False) in sess._matrix_calls
        assert np.array_equal(pred.label, sess.classes[pred.label_index])
        assert pred.label.dtype == sess.classes.dtype and not np.shares_memory(pred.label, pred.label_index)
        assert np.array_equal(pred.label, est.predict(X[:n]))
    if classes is not None and isinstance(classes[0], int):
        assert not np.array_equal(pred.label, pred.label_index)


def _parts(pred) -> list[np.ndarray]:
    if isinstance(pred, ClassifierPrediction):
        assert np.array_equal(pred.label_index, pred.proba.argmax(axis=1))
        return [pred.label, pred.label_index, pred.proba, pred.score, np.array(pred.prefix)]
    return [pred]


def test_threads_predicting_on_one_model_get_their_own_answers(exported):
    """Several threads calling predict on one model, on matrices of the bound sizes, in place or
    copied, each get the answer of their own rows (the buffers are locked; a busy one is skipped)."""
    from concurrent.futures import ThreadPoolExecutor
    seq, out, rng = exported
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    Xs = [rng.normal(size=(n, seq.n_features_in)).astype(np.float32) for n in (1, 1, 3, 90, 90, 90)]
    want = [_answer(sess.predict(X, prefix=j))[1] for X in Xs]
    sess._matrix_runners[j, False][1]._in_place_rows = 90

    def work(k: int) -> bool:
        return all(np.array_equal(_answer(sess.predict(Xs[k], prefix=j))[1], want[k]) for _ in range(30))
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, [k % len(Xs) for k in range(24)]))


def test_a_busy_binding_is_skipped_not_waited_for(exported):
    """While another caller holds a prefix's bound buffers (their lock held here), a matrix of the
    bound sizes is answered by a plain run, without waiting, with the same answer to the bit; once
    the lock is free the bound buffers answer again. Negative control: the bound buffers were used
    (their lock was taken) on the calls before."""
    seq, out, rng = exported
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    X = rng.normal(size=(3, seq.n_features_in)).astype(np.float32)
    want = _answer(sess.predict(X, prefix=j))
    small = sess._matrix_runners[j, False][0]
    assert 3 in small._bindings  # the first call bound them
    with small._lock:  # another caller's call in progress
        got = _answer(sess.predict(X, prefix=j))
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert all(np.array_equal(a, b) for a, b in zip(_answer(sess.predict(X, prefix=j)), want))


# ----------------------------------------------------------------------------------- tree exports
TREE_GROUPS = [[5, 6, 7], [0, 1], [4], [2, 3]]  # not in column order: the matrix's columns are permuted


@pytest.fixture(scope="module", params=["identity", "sigmoid", "softmax"])
def tree_export(request, tmp_path_factory):
    lgb = pytest.importorskip("lightgbm")
    from edgeseq.train.trees.lightgbm_import import from_lightgbm
    from tree_models import PARAMS, data
    X, s = data()
    y = {"identity": s, "sigmoid": s > 0, "softmax": np.digitize(s, [-0.5, 0.5])}[request.param]
    est = (lgb.LGBMRegressor if request.param == "identity" else lgb.LGBMClassifier)(**PARAMS).fit(X, y)
    model = from_lightgbm(est, TREE_GROUPS, [1.0, 2.0, 4.0, 8.0])
    out = tmp_path_factory.mktemp("trees") / "out"
    export_model(model, out)
    return model, out, X


@pytest.mark.parametrize("n", [1, BIND_MAX_ROWS + 1, 300])
def test_a_tree_matrix_answers_as_the_dict_bit_for_bit(tree_export, n):
    """Each split's feature index mapped to the matrix's column: every split compares the same value
    with the same threshold, so the answers are the dict's exactly, in float32 and float64 (rows
    that are float32 values) and any layout; a prefix that reads some columns takes the dict path."""
    model, out, X = tree_export
    sess = ExportedModel(out)
    full = sess.n_prefixes - 1
    assert _columns(sess) != sorted(_columns(sess))
    Xn = X[:n]
    feats = {g.name: Xn[:, c] for g, c in zip(sess.groups, (g["columns"] for g in sess.manifest["groups"]))}
    for j in range(1, sess.n_prefixes):
        want = _answer(sess.predict(feats, prefix=j))
        for dtype in (np.float32, np.float64):
            for M in _layouts(Xn, dtype):
                got = _answer(sess.predict(M, prefix=j))
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (j, dtype)
        assert (sess._matrix_runners.get((j, False)) is not None) == (j == full), j


def test_a_tree_matrix_names_a_float64_value_beyond_float32_as_the_groups_path_does(tree_export):
    """A float64 value too large for float32 is cast to Inf before the tree graph reads it; the error
    still names the value as given (the matrix, not its cast), on the first call and the later ones,
    as for the dict of groups. Negative control: the cast itself is Inf."""
    model, out, X = tree_export
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    g = sess.manifest["groups"][0]
    M = X[:5].astype(np.float64)
    M[4, g["columns"][0]] = 1e300
    assert np.isinf(M.astype(np.float32)).any()
    messages = []
    for features in (M, M, {h["name"]: M[:, h["columns"]] for h in sess.manifest["groups"]}):
        with pytest.raises(RuntimeInputError, match=repr(g["name"])) as err:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                sess.predict(features, prefix=j)
        messages.append(str(err.value))
    assert messages[0] == messages[1] == messages[2], messages


def test_a_tree_matrix_refuses_a_non_finite_value_and_its_graph_is_checked(tree_export, tmp_path):
    """A NaN/Inf anywhere in a full-prefix matrix is refused naming its group (the trees would route
    it silently), on the bound buffers (5 rows) and above them (300 rows), in float32 and float64,
    on the first call (which builds the graph) and on later ones (`_matrix_call`'s functions).
    Negative control: the tree graph without the column mapping answers differently."""
    from edgeseq.runtime.fuse import joined_tree_stages
    model, out, X = tree_export
    sess = ExportedModel(out)
    j = sess.n_prefixes - 1
    for g in sess.manifest["groups"]:
        for bad in (np.nan, -np.inf):
            for n, dtype in ((5, np.float32), (5, np.float64), (300, np.float32)):
                M = np.resize(X, (n, X.shape[1])).astype(dtype)
                M[n - 1, g["columns"][0]] = bad
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    with pytest.raises(RuntimeInputError, match=repr(g["name"])):
                        sess.predict(M, prefix=j)
    assert {(j, False), (j, True)} <= set(sess._matrix_calls)  # the later calls took the bound functions
    Xf = X[:50].astype(np.float32)
    right = sess._matrix_runners[j, False][0]
    stages = [(out / p["file"]).read_bytes() for p in sess.manifest["prefixes"][1:]]
    model_bytes, name = joined_tree_stages(stages, columns=list(range(X.shape[1])))
    wrong = PrefixRunner(model_bytes, [name], right.outputs, "unmapped", sess._squeeze)
    got = [np.asarray(r.call([Xf], 50)[0][0], np.float64).reshape(50, -1) for r in (right, wrong)]
    assert np.array_equal(got[0], _answer(sess.predict(Xf, prefix=j))[1]) and not np.allclose(got[0], got[1])
    with pytest.raises(FuseError, match="permutation"):
        joined_tree_stages(stages, columns=[0] * X.shape[1])


@pytest.mark.parametrize("link, n_outputs", [("sigmoid", 1), ("softmax", 3)])
def test_labels_left_to_the_runtime_answer_as_the_graphs_labels_on_a_matrix(tmp_path, link, n_outputs):
    """An export whose graphs end at the probabilities (``labels="runtime"``) takes the matrix path too
    (its function picks the label in numpy, `_matrix_call`): the same labels, probabilities and scores
    as the export whose graphs pick the label, on the bound buffers and above them, on the first call
    and the later ones. Negative control: the two exports do differ in how their graphs end."""
    from sequences import random_sequence
    rng = np.random.default_rng(3)
    seq = random_sequence(rng, (2, 3, 1), n_outputs=n_outputs, link=link, n_unused=0)  # (every column read)
    export_model(seq, tmp_path / "graph")
    export_model(seq, tmp_path / "runtime", labels="runtime")
    graph, runtime = ExportedModel(tmp_path / "graph"), ExportedModel(tmp_path / "runtime")
    assert graph._label_in_graph and not runtime._label_in_graph
    j = graph.n_prefixes - 1
    for n in (1, 5, 300):
        X = rng.normal(size=(n, seq.n_features_in)).astype(np.float32)
        for _ in range(2):
            a, b = graph.predict(X, prefix=j), runtime.predict(X, prefix=j)
            assert np.array_equal(a.label_index, b.label_index) and np.array_equal(a.label, b.label)
            assert np.array_equal(a.proba, b.proba) and np.array_equal(a.score, b.score)
    assert (j, False) in runtime._matrix_calls and (j, False) in graph._matrix_calls
