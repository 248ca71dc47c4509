"""The hand-written backward passes against a second, independent oracle: autograd's reverse mode.

tests/test_neural_train.py checks the same gradients with central differences; a finite difference
is only as good as its step (about 1e-7 relative here), and it shares nothing with the code under test
but the forward. autograd differentiates a forward written again below with `autograd.numpy` (its
own convolution loop, pooling and losses, none of edgeseq's helpers), exactly, so the analytic
gradients must match it to rounding (1e-9 relative in float64). Biases are random so no ReLU input
sits on its kink. Each comparison has a negative control: a deliberately wrong backward (transposed
weight gradient, flipped kernel, a ReLU mask forgotten) must fail the same check.

autograd is in the ``test`` extra only (pure Python on numpy); it is never a dependency of edgeseq.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from autograd.scipy.special import logsumexp

from edgeseq.train.neural import net as net_module
from edgeseq.train.neural.layers import conv_backward, conv_forward, dense_backward, dense_forward, head_loss
from edgeseq.train.neural.net import ConvSpec, NetSpec, StageSpec, backward, forward, init_params

TOL = 1e-9


def rel_err(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), np.max(np.abs(b)), 1e-300))


def assert_matches(analytic: dict, oracle: dict) -> None:
    assert set(analytic) == set(oracle)
    worst = {k: rel_err(analytic[k], oracle[k]) for k in oracle}
    assert max(worst.values()) < TOL, worst


# ---------------------------------------------------------------------- the reference forward, in autograd.numpy
def ref_conv(x, W, b, stride, pool, size):
    """relu(valid conv1d) pooled and flattened filter-major, written with one loop over output positions."""
    n, C, L = x.shape
    F, _, K = W.shape
    L_out = (L - K) // stride + 1
    cols = [anp.tensordot(x[:, :, t * stride:t * stride + K], W, axes=([1, 2], [1, 2])) for t in range(L_out)]
    r = anp.maximum(anp.stack(cols, axis=2) + anp.reshape(b, (1, F, 1)), 0.0)
    if pool != "none":
        Lp = L_out // size
        win = anp.reshape(r[:, :, :Lp * size], (n, F, Lp, size))
        r = anp.max(win, axis=3) if pool == "max" else anp.mean(win, axis=3)
    return anp.reshape(r, (n, -1))


def ref_loss(z, y, link):
    """Mean loss over rows: ½‖z − y‖², binary cross-entropy on the logit, softmax cross-entropy."""
    n = z.shape[0]
    if link == "identity":
        return 0.5 * anp.sum((z - y) ** 2) / n
    if link == "sigmoid":
        t = np.asarray(y, np.float64).reshape(n, 1)
        return anp.mean(anp.logaddexp(0.0, z) - t * z)
    onehot = np.eye(z.shape[1])[np.asarray(y)]
    return anp.mean(logsumexp(z, axis=1) - anp.sum(z * onehot, axis=1))


def ref_net_loss(p, spec: NetSpec, X, y, weights):
    """Σ_i w_i ℓ_i of a multi-exit network: state carried, groups injected, convs on windows, resets."""
    total, s = 0.0, None
    for i, st in enumerate(spec.stages):
        z = anp.reshape(p[f"{i}/b"], (1, -1))
        if spec.stage_has_state(i):
            z = z + anp.dot(s, p[f"{i}/W"])
        for g in st.reads:
            x = X[:, spec.columns[g]]
            cs = spec.convs[g]
            if cs is not None:
                x = ref_conv(x.reshape((-1,) + tuple(spec.shapes[g])), p[f"{i}/cw{g}"], p[f"{i}/cb{g}"],
                             cs.stride, cs.pool, cs.pool_size)
            z = z + anp.dot(x, p[f"{i}/U{g}"])
        s = anp.maximum(z, 0.0)
        total = total + weights[i] * ref_loss(anp.dot(s, p[f"{i}/V"]) + p[f"{i}/c"], y, spec.link)
    return total


# ---------------------------------------------------------------------- layers
def _dense_case(square: bool = False):
    rng = np.random.default_rng(10)
    H = 4 if square else 5
    s, x = rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    W, U, b = rng.normal(size=(4, H)), rng.normal(size=(3, H)), rng.normal(size=H)
    G = rng.normal(size=(6, H))

    def f(q):
        return anp.sum(anp.maximum(anp.dot(q["s"], q["W"]) + anp.dot(q["x"], q["U"]) + q["b"], 0.0) * G)

    return dict(s=s, x=x, W=W, U=U, b=b), G, f


def test_dense_block_with_injection_matches_autograd():
    q, G, f = _dense_case()
    _, z = dense_forward([(q["s"], q["W"]), (q["x"], q["U"])], q["b"])
    ((ds, dW), (dx, dU)), db = dense_backward(G, z, [(q["s"], q["W"]), (q["x"], q["U"])])
    assert_matches(dict(s=ds, x=dx, W=dW, U=dU, b=db), grad(f)(q))


def test_a_transposed_dense_weight_gradient_fails_the_comparison():
    q, G, f = _dense_case(square=True)
    _, z = dense_forward([(q["s"], q["W"]), (q["x"], q["U"])], q["b"])
    ((ds, dW), (dx, dU)), db = dense_backward(G, z, [(q["s"], q["W"]), (q["x"], q["U"])])
    with pytest.raises(AssertionError):
        assert_matches(dict(s=ds, x=dx, W=dW.T, U=dU, b=db), grad(f)(q))


@pytest.mark.parametrize("pool,size,stride", [("none", 1, 1), ("max", 2, 1), ("avg", 3, 2), ("max", 3, 2),
                                              ("avg", 2, 3)])
def test_conv1d_relu_pooling_matches_autograd(pool, size, stride):
    rng = np.random.default_rng(11)
    q = dict(x=rng.normal(size=(4, 3, 13)), W=rng.normal(size=(5, 3, 3)), b=rng.normal(size=5))
    out, cache = conv_forward(q["x"], q["W"], q["b"], stride, pool, size)
    np.testing.assert_allclose(out, ref_conv(q["x"], q["W"], q["b"], stride, pool, size), rtol=1e-12)
    G = rng.normal(size=out.shape)
    dx, dW, db = conv_backward(G, q["W"], stride, pool, size, cache)
    oracle = grad(lambda r: anp.sum(ref_conv(r["x"], r["W"], r["b"], stride, pool, size) * G))(q)
    assert_matches(dict(x=dx, W=dW, b=db), oracle)
    # negative control: the kernel gradient read back to front
    with pytest.raises(AssertionError):
        assert_matches(dict(x=dx, W=dW[:, :, ::-1], b=db), oracle)


@pytest.mark.parametrize("link", ["identity", "sigmoid", "softmax"])
def test_exit_losses_match_autograd(link):
    rng = np.random.default_rng(12)
    P = 1 if link == "sigmoid" else 3
    z = rng.normal(size=(7, P)) * 3
    y = {"identity": rng.normal(size=(7, 3)), "sigmoid": rng.integers(0, 2, 7), "softmax": rng.integers(0, 3, 7)}[link]
    loss, dz = head_loss(z, y, link)
    assert loss == pytest.approx(float(ref_loss(z, y, link)), rel=1e-12)
    oracle = grad(lambda zz: ref_loss(zz, y, link))(z)
    assert rel_err(dz, oracle) < TOL
    # negative control: the gradient of the sum instead of the mean over rows
    assert rel_err(dz * z.shape[0], oracle) > 1e-3


# ---------------------------------------------------------------------- the whole network
def _spec(link: str, P: int, widths=(4, 5, 4, 3, 4)) -> NetSpec:
    """Flat group 0 (2 columns), window group 1 (2 channels x 9, conv + max pool), flat group 2
    (3 columns); a stage without new groups, a reset stage (an EANN member's start) that reads an
    already paid group again, and a last stage re-reading the window."""
    cols = ([0, 1], list(range(2, 20)), [20, 21, 22])
    w = widths
    return NetSpec(cols, (None, (2, 9), None), (None, ConvSpec(3, 3, 2, "max", 2), None),
                   (StageSpec((0,), (0,), w[0]), StageSpec((1,), (1,), w[1]), StageSpec((), (), w[2]),
                    StageSpec((0, 2), (2,), w[3], reset=True), StageSpec((1,), (), w[4])), link, P)


def _net_case(link: str, P: int, widths=(4, 5, 4, 3, 4)):
    rng = np.random.default_rng(13)
    spec = _spec(link, P, widths)
    p = init_params(spec, rng)
    for k in p:  # random biases: no ReLU input sits on its kink
        if k.endswith(("/b", "/c")) or "/cb" in k:
            p[k] = p[k] + rng.normal(size=p[k].shape)
    X = rng.normal(size=(9, 23))
    y = {"softmax": rng.integers(0, 3, 9), "sigmoid": rng.integers(0, 2, 9), "identity": rng.normal(size=(9, 2))}[link]
    w = rng.uniform(0.2, 1.0, len(spec.stages))
    return spec, p, X, y, w


def _analytic(spec, p, X, y, w):
    logits, cache = forward(spec, p, X)
    return backward(spec, p, cache, [wi * head_loss(z, y, spec.link)[1] for wi, z in zip(w, logits)])


@pytest.mark.parametrize("link,P", [("softmax", 3), ("sigmoid", 1), ("identity", 2)])
def test_whole_multi_exit_network_with_group_injection_matches_autograd(link, P):
    spec, p, X, y, w = _net_case(link, P)
    loss = sum(wi * head_loss(z, y, link)[0] for wi, z in zip(w, forward(spec, p, X)[0]))
    assert loss == pytest.approx(float(ref_net_loss(p, spec, X, y, w)), rel=1e-12)
    assert_matches(_analytic(spec, p, X, y, w), grad(ref_net_loss)(p, spec, X, y, w))


def test_a_wrong_backward_inside_the_network_fails_the_comparison(monkeypatch):
    """Equal widths make the state weights square, so a transposed weight gradient has the right shape
    and only the values can give it away; forgetting the ReLU mask is the other classic slip."""
    spec, p, X, y, w = _net_case("softmax", 3, widths=(4, 4, 4, 4, 4))
    oracle = grad(ref_net_loss)(p, spec, X, y, w)
    assert_matches(_analytic(spec, p, X, y, w), oracle)  # the right backward passes on this case

    def transposed(dh, z, terms):
        dz = dh * (z > 0)
        return [(dz @ M.T, (a.T @ dz).T if M.shape[0] == M.shape[1] else a.T @ dz) for a, M in terms], dz.sum(axis=0)

    def no_relu_mask(dh, z, terms):
        return [(dh @ M.T, a.T @ dh) for a, M in terms], dh.sum(axis=0)

    for wrong in (transposed, no_relu_mask):
        monkeypatch.setattr(net_module, "dense_backward", wrong)
        with pytest.raises(AssertionError):
            assert_matches(_analytic(spec, p, X, y, w), oracle)
