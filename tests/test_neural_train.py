"""The neural training core: hand-written gradients against central differences, weight schemes with
the thesis's numbers, EANN's chaining and Prop. 4.4.1's arithmetic.

Gradients are checked in float64 with random (non-zero) biases: with zero biases many ReLU inputs sit
exactly on the kink at 0, where a central difference straddles both slopes and fakes an error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgeseq import loss_weights
from edgeseq.errors import InputError
from edgeseq.train.neural import eann
from edgeseq.train.neural.layers import Adam, conv_backward, conv_forward, dense_backward, dense_forward, head_loss
from edgeseq.train.neural.net import (ConvSpec, NetSpec, StageSpec, backward, forward, init_params, train_net)
from edgeseq.train.neural.schemes import AdaLossWeights

EPS = 1e-6


def numeric_grad(f, arr: np.ndarray) -> np.ndarray:
    """Central differences of the scalar f() with respect to every entry of `arr` (perturbed in place)."""
    g = np.zeros_like(arr)
    it = np.nditer(arr, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        old = arr[i]
        arr[i] = old + EPS
        up = f()
        arr[i] = old - EPS
        down = f()
        arr[i] = old
        g[i] = (up - down) / (2 * EPS)
    return g


def rel_err(a, b) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), np.max(np.abs(b)), 1e-12))


def test_dense_block_with_injection_gradients():
    rng = np.random.default_rng(0)
    s, x = rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    W, U, b = rng.normal(size=(4, 5)), rng.normal(size=(3, 5)), rng.normal(size=5)
    G = rng.normal(size=(6, 5))

    def f():
        return float(np.sum(dense_forward([(s, W), (x, U)], b)[0] * G))

    h, z = dense_forward([(s, W), (x, U)], b)
    (ds, dW), (dx, dU) = dense_backward(G, z, [(s, W), (x, U)])[0]
    db = dense_backward(G, z, [(s, W), (x, U)])[1]
    for ana, arr in ((ds, s), (dW, W), (dx, x), (dU, U), (db, b)):
        assert rel_err(ana, numeric_grad(f, arr)) < 1e-7


@pytest.mark.parametrize("pool,size,stride", [("none", 1, 1), ("max", 2, 1), ("avg", 3, 2), ("max", 2, 3)])
def test_conv1d_branch_gradients(pool, size, stride):
    rng = np.random.default_rng(1)
    x, W, b = rng.normal(size=(4, 3, 11)), rng.normal(size=(5, 3, 3)), rng.normal(size=5)
    out, _ = conv_forward(x, W, b, stride, pool, size)
    G = rng.normal(size=out.shape)

    def f():
        return float(np.sum(conv_forward(x, W, b, stride, pool, size)[0] * G))

    _, cache = conv_forward(x, W, b, stride, pool, size)
    dx, dW, db = conv_backward(G, W, stride, pool, size, cache)
    for ana, arr in ((dx, x), (dW, W), (db, b)):
        assert rel_err(ana, numeric_grad(f, arr)) < 1e-6


def test_conv_forward_is_the_fitted_forms_forward():
    """Training and the intermediate form compute the same branch (one implementation of the maths)."""
    from edgeseq.forms.layer_blocks import ConvBranch
    rng = np.random.default_rng(2)
    x, W, b = rng.normal(size=(4, 2, 9)), rng.normal(size=(3, 2, 4)), rng.normal(size=3)
    for pool, size in (("none", 1), ("max", 2), ("avg", 2)):
        br = ConvBranch(2, 9, 4, 2, pool, size, W, b)
        np.testing.assert_allclose(conv_forward(x, W, b, 2, pool, size)[0], br.forward(x.reshape(4, -1)), rtol=1e-13)


@pytest.mark.parametrize("link", ["identity", "sigmoid", "softmax"])
def test_head_loss_gradients(link):
    rng = np.random.default_rng(3)
    P = 1 if link == "sigmoid" else 3
    z = rng.normal(size=(7, P))
    y = {"identity": rng.normal(size=(7, 3)), "sigmoid": rng.integers(0, 2, 7), "softmax": rng.integers(0, 3, 7)}[link]
    assert rel_err(head_loss(z, y, link)[1], numeric_grad(lambda: head_loss(z, y, link)[0], z)) < 1e-7


def _multi_exit_spec(link="softmax", P=3) -> NetSpec:
    """Flat group 0 (2 columns), window group 1 (2 channels x 9), flat group 2 (3 columns); a stage
    without groups, a reset stage (as an EANN member start), and a stage reading an already paid group."""
    cols = ([0, 1], list(range(2, 20)), [20, 21, 22])
    return NetSpec(cols, (None, (2, 9), None), (None, ConvSpec(3, 3, 2, "max", 2), None),
                   (StageSpec((0,), (0,), 4), StageSpec((1,), (1,), 5), StageSpec((), (), 4),
                    StageSpec((0, 2), (2,), 3, reset=True), StageSpec((1,), (), 4)), link, P)


@pytest.mark.parametrize("link,P", [("softmax", 3), ("sigmoid", 1), ("identity", 2)])
def test_whole_multi_exit_network_gradients(link, P):
    rng = np.random.default_rng(4)
    spec = _multi_exit_spec(link, P)
    p = init_params(spec, rng)
    for k in p:  # random biases: no ReLU input sits on its kink
        if k.endswith("/b") or k.endswith("/c") or "/cb" in k:
            p[k] += rng.normal(size=p[k].shape)
    X = rng.normal(size=(8, 23))
    y = {"softmax": rng.integers(0, 3, 8), "sigmoid": rng.integers(0, 2, 8), "identity": rng.normal(size=(8, 2))}[link]
    w = rng.uniform(0.2, 1.0, len(spec.stages))

    def loss():
        return sum(wi * head_loss(z, y, link)[0] for wi, z in zip(w, forward(spec, p, X)[0]))

    logits, cache = forward(spec, p, X)
    grads = backward(spec, p, cache, [wi * head_loss(z, y, link)[1] for wi, z in zip(w, logits)])
    assert set(grads) == set(p)
    worst = max(rel_err(grads[k], numeric_grad(loss, p[k])) for k in p)
    assert worst < 1e-6, worst
    # negative control: the check sees a gradient that ignores one exit's weight
    wrong = backward(spec, p, cache, [head_loss(z, y, link)[1] for z in logits])
    assert max(rel_err(wrong[k], numeric_grad(loss, p[k])) for k in ("0/U0", "1/U1")) > 1e-3


def test_adam_fits_a_small_net():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)  # XOR-like: no linear model does better than chance
    spec = NetSpec(([0, 1], [2, 3]), (None, None), (None, None),
                   (StageSpec((0,), (0,), 16), StageSpec((1,), (1,), 16)), "sigmoid", 1)
    res = train_net(spec, X, y, max_epochs=80, learning_rate=1e-2, rng=rng)
    z = forward(spec, res.params, X)[0][-1][:, 0]
    assert np.mean((z > 0) == y) > 0.9
    p = {"w": np.zeros(2)}
    opt = Adam(p, lr=0.05)
    for _ in range(500):
        opt.step({"w": 2 * (p["w"] - [1.0, -2.0])})
    np.testing.assert_allclose(p["w"], [1.0, -2.0], atol=1e-3)


# ---------------------------------------------------------------------- schemes
def test_static_schemes_have_the_thesis_numbers():
    np.testing.assert_allclose(loss_weights("sieve", 4), [0.25, 0.5, 0.25, 1.0])
    # L = 8: steps 1, 2, 4 add [1]*8, then every 2nd and 4th from the end; the last gets the rest's sum
    raw = np.array([1, 2, 1, 3, 1, 2, 1, 0], float)
    raw[-1] = raw[:-1].sum()
    np.testing.assert_allclose(loss_weights("sieve", 8), raw / raw.max())
    np.testing.assert_allclose(loss_weights("linear", 4), [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(loss_weights("const", 3), [1, 1, 1])
    w = loss_weights("half_end", 5)
    assert w[-1] == pytest.approx(w.sum() / 2) and np.ptp(w[:-1]) == 0
    for scheme in ("const", "linear", "half_end", "sieve"):
        assert loss_weights(scheme, 1).tolist() == [1.0]


def test_adaloss_is_eq_4_7_with_the_max_weight_one():
    ell = np.array([2.0, 1.0, 0.25, 0.5])
    w = loss_weights("adaloss", 4, losses=ell, gamma=0.05)
    np.testing.assert_allclose(w, 0.95 * 0.25 / ell + 0.05)
    assert w.max() == 1.0 and w.argmax() == 2
    np.testing.assert_allclose(loss_weights("adaloss", 4, losses=ell, gamma=0.0) * ell, 0.25)  # ∝ 1/ℓ
    with pytest.raises(InputError):
        loss_weights("adaloss", 4)
    with pytest.raises(InputError):
        loss_weights("adaloss", 2, losses=[1.0, 0.0])
    with pytest.raises(InputError):
        loss_weights("cosine", 2)


def test_adaloss_ema_momentum_and_initialisation():
    ada = AdaLossWeights(2, gamma=0.0)
    np.testing.assert_allclose(ada.update([4.0, 1.0]), [0.25, 1.0])  # initialised at the first losses
    ada.update([2.0, 1.0])
    np.testing.assert_allclose(ada.ema, [0.9 * 4 + 0.1 * 2, 1.0])


# ---------------------------------------------------------------------- EANN
def test_prop_4_4_1_arithmetic_at_b_2():
    sup_c, mean_bound = eann.prop_4_4_1_bounds(2)
    assert sup_c == 3.0
    assert mean_bound == pytest.approx(1 - 1 / 4 + 1 + math.log(2)) and mean_bound <= 2.44 + 5e-3
    # the ratio itself: supremum approached from below, expectation (z uniform within a member) below the bound
    sups, means = [], []
    for n in range(1, 14):
        z = np.linspace(1e-9, 2.0 ** n, 20001)[1:]
        c = np.array([eann.cost_inflation(2, n, zi) for zi in z])
        sups.append(c.max())
        means.append(c.mean())
    assert max(sups) < 3.0 and max(sups) > 2.999
    assert max(means) <= mean_bound
    # a regular (non-anytime) exponential sequence is worse: sup C >= 4 (the thesis's contrast)
    assert (2 ** 2) / (2 - 1) >= 4


def test_eann_chain_resets_and_pays_each_group_once():
    full = NetSpec(([0], [1], [2], [3], [4]), (None,) * 5, (None,) * 5,
                   tuple(StageSpec((g,), (g,), 4) for g in range(5)), "identity", 1)
    depths = eann.member_depths(5, 2)
    assert depths == [1, 2, 4, 5]
    chain = eann.eann_spec(full, depths)
    assert len(chain.stages) == 12
    assert [s.reset for s in chain.stages][:4] == [True, True, False, True]
    assert sorted(g for s in chain.stages for g in s.new) == [0, 1, 2, 3, 4]
    assert eann.commits_from_losses(1.0, [1.0, 0.9, 0.95, 0.1]) == [False, True, False, True]


def test_docs_hook_renders_a_results_tables_marker(tmp_path):
    """The neural page shows its figures through a marker the docs hook fills from bench/results."""
    import importlib.util
    import json
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("docs_hooks_neural", root / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "demo.json").write_text(json.dumps(
        {"tables": [{"title": "Accuracy", "columns": ["method", "acc"], "rows": [["adaloss", 0.9123]]}],
         "command": "python bench/demo.py", "machine": "here"}))
    md = hooks.render_result_tables(tmp_path, "demo")
    assert "### Accuracy" in md and "| adaloss | 0.9123 |" in md and "python bench/demo.py" in md
    assert "Not yet measured" in hooks.render_result_tables(tmp_path, "missing")
    assert "<!-- bench-tables" in (root / "docs" / "neural.md").read_text(encoding="utf-8")
