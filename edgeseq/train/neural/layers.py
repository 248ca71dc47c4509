"""Hand-written forward and backward passes of the closed layer set, in float64, and Adam.

The forward computations are the intermediate form's own (`edgeseq.forms.layer_blocks`): training calls
the same patch extraction and pooling windows the fitted model runs, so what is trained is what is
exported. Each backward here takes the gradient of the loss with respect to a layer's output and
returns the gradients of its inputs and parameters; tests check every one against central
differences (tests/test_neural_train.py).

Losses are means over rows: squared ½·mean‖ŷ − y‖² (identity link), binary cross-entropy on the
logit (sigmoid), softmax cross-entropy (softmax). For each the gradient with respect to the logit is
(link(z) − y) / n, which is why the head returns it directly.
"""

from __future__ import annotations

import numpy as np

from edgeseq.forms.layer_blocks import conv1d_patches, conv_output_length, pool_windows
from edgeseq.forms.linear import sigmoid


# ---------------------------------------------------------------------- dense block with injection
def dense_forward(terms, b: np.ndarray):
    """z = Σ_i a_i M_i + b, h = relu(z); `terms` is a list of (input a_i, weight M_i).

    Returns ``(h, z)``; z is the cache the backward pass needs.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.layers import dense_forward
    >>> h, z = dense_forward([(np.array([[1.0, -2.0]]), np.eye(2))], np.zeros(2))
    >>> h.tolist(), z.tolist()
    ([[1.0, 0.0]], [[1.0, -2.0]])
    """
    z = np.broadcast_to(b, (terms[0][0].shape[0], b.shape[0])).copy()
    for a, M in terms:
        z += a @ M
    return np.maximum(z, 0.0), z


def dense_backward(dh: np.ndarray, z: np.ndarray, terms):
    """Gradients through relu(Σ a_i M_i + b): ([(da_i, dM_i) per term], db).

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.layers import dense_backward
    >>> grads, db = dense_backward(np.ones((1, 2)), np.array([[1.0, -2.0]]), [(np.array([[3.0, 4.0]]), np.eye(2))])
    >>> grads[0][1].tolist(), db.tolist()   # the negative unit passes no gradient
    ([[3.0, 0.0], [4.0, 0.0]], [1.0, 0.0])
    """
    dz = dh * (z > 0)
    return [(dz @ M.T, a.T @ dz) for a, M in terms], dz.sum(axis=0)


# ---------------------------------------------------------------------- conv1d branch
def conv_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray, stride: int, pool: str, pool_size: int):
    """relu(conv1d(x)) pooled and flattened, as `ConvBranch.forward`, plus the backward cache.

    x is (n, C, L); W (F, C, K). Returns ``(out (n, F·Lp), cache)``.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.layers import conv_forward
    >>> out, _ = conv_forward(np.arange(4.0).reshape(1, 1, 4), np.ones((1, 1, 2)), np.zeros(1), 1, "max", 3)
    >>> out.tolist()
    [[5.0]]
    """
    K = W.shape[2]
    P = conv1d_patches(x, K, stride)
    a = np.einsum("nclk,fck->nfl", P, W, optimize=True) + b[:, None]
    r = np.maximum(a, 0.0)
    arg = None
    if pool == "max":
        win = pool_windows(r, pool_size)
        arg = win.argmax(axis=3)
        out = np.take_along_axis(win, arg[..., None], axis=3)[..., 0]
    elif pool == "avg":
        out = pool_windows(r, pool_size).mean(axis=3)
    else:
        out = r
    return out.reshape(out.shape[0], -1), (x.shape, P, a, arg, out.shape)


def conv_backward(dout: np.ndarray, W: np.ndarray, stride: int, pool: str, pool_size: int, cache):
    """Gradients of `conv_forward`: (dx (n, C, L), dW, db).

    Max pooling routes the gradient to the first maximum of each window (what argmax picks); average
    pooling spreads it evenly; positions dropped by floor-mode pooling get none.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.layers import conv_forward, conv_backward
    >>> x = np.arange(4.0).reshape(1, 1, 4); W = np.ones((1, 1, 2)); b = np.zeros(1)
    >>> out, cache = conv_forward(x, W, b, 1, "none", 1)
    >>> dx, dW, db = conv_backward(np.ones_like(out), W, 1, "none", 1, cache)
    >>> dx.ravel().tolist(), dW.ravel().tolist(), db.tolist()
    ([1.0, 2.0, 2.0, 1.0], [3.0, 6.0], [3.0])
    """
    xshape, P, a, arg, oshape = cache
    n, F, L_out = a.shape
    d = dout.reshape(oshape)
    dr = np.zeros_like(a)
    if pool == "max":
        Lp = oshape[2]
        win = np.zeros((n, F, Lp, pool_size))
        np.put_along_axis(win, arg[..., None], d[..., None], axis=3)
        dr[:, :, :Lp * pool_size] = win.reshape(n, F, Lp * pool_size)
    elif pool == "avg":
        Lp = oshape[2]
        dr[:, :, :Lp * pool_size] = np.repeat(d / pool_size, pool_size, axis=2)
    else:
        dr = d
    da = dr * (a > 0)
    dW = np.einsum("nfl,nclk->fck", da, P, optimize=True)
    db = da.sum(axis=(0, 2))
    dP = np.einsum("nfl,fck->nclk", da, W, optimize=True)
    dx = np.zeros(xshape)
    K = W.shape[2]
    pos = stride * np.arange(conv_output_length(xshape[2], K, stride))
    for k in range(K):  # for one tap k the positions pos + k are distinct, so a fancy-indexed += is exact
        dx[:, :, pos + k] += dP[:, :, :, k]
    return dx, dW, db


# ---------------------------------------------------------------------- exit heads and losses
def head_loss(z: np.ndarray, y: np.ndarray, link: str):
    """(mean loss, d loss / d z) of an exit's logits z (n, P) against targets y.

    `y` is (n, P) values for "identity", (n,) 0/1 for "sigmoid" (P = 1), (n,) class indices for
    "softmax".

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.layers import head_loss
    >>> loss, g = head_loss(np.zeros((2, 1)), np.array([0, 1]), "sigmoid")
    >>> round(loss, 6), g.ravel().tolist()   # log 2, (p - y) / n
    (0.693147, [0.25, -0.25])
    """
    n = z.shape[0]
    if link == "identity":
        r = z - y.reshape(z.shape)
        return 0.5 * float(np.sum(r * r)) / n, r / n
    if link == "sigmoid":
        t = y.reshape(n, 1).astype(np.float64)
        zz = z[:, :1]
        # log(1 + e^z) − t z, stable for both signs
        loss = float(np.mean(np.logaddexp(0.0, zz) - t * zz))
        return loss, (sigmoid(zz) - t) / n
    m = z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
    idx = np.asarray(y, np.int64)
    loss = float(np.mean(lse - z[np.arange(n), idx]))
    p = np.exp(z - lse[:, None])
    p[np.arange(n), idx] -= 1.0
    return loss, p / n


# ---------------------------------------------------------------------- Adam
class Adam:
    """Adam (Kingma & Ba) over a dict of float64 arrays, updated in place.

    The parameters are moved into one flat buffer (the dict's entries become views of it), so a step
    is a handful of vector operations however many arrays the network has.

    Parameters
    ----------
    params : dict of str to ndarray
        Rebound to views of the flat buffer.
    lr : float, default=3e-3
    beta1, beta2, eps : float
        The usual defaults 0.9, 0.999, 1e-8.

    Examples
    --------
    Minimising (w − 3)² from 0:

    >>> import numpy as np
    >>> from edgeseq.train.neural.layers import Adam
    >>> p = {"w": np.zeros(1)}; opt = Adam(p, lr=0.1)
    >>> for _ in range(300):
    ...     opt.step({"w": 2 * (p["w"] - 3)})
    >>> round(float(p["w"][0]), 2)
    3.0
    """

    def __init__(self, params: dict, lr: float = 3e-3, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, beta1, beta2, eps
        self.slices, offset = {}, 0
        for k, v in params.items():
            self.slices[k] = (slice(offset, offset + v.size), v.shape)
            offset += v.size
        self.flat = np.zeros(offset)
        for k, v in params.items():
            sl, shape = self.slices[k]
            self.flat[sl] = v.ravel()
            params[k] = self.flat[sl].reshape(shape)
        self.grad = np.zeros(offset)
        self.m, self.v = np.zeros(offset), np.zeros(offset)
        self.t = 0

    def step(self, grads: dict) -> None:
        """Apply one update with `grads` (same keys as the parameters; a missing key counts as zero).

        Examples
        --------
        >>> import numpy as np
        >>> from edgeseq.train.neural.layers import Adam
        >>> p = {"w": np.zeros(1)}; Adam(p, lr=0.5).step({"w": np.ones(1)}); p["w"].round(6).tolist()
        [-0.5]
        """
        self.t += 1
        self.grad[:] = 0.0
        for k, g in grads.items():
            self.grad[self.slices[k][0]] = g.ravel()
        g = self.grad
        self.m *= self.b1
        self.m += (1 - self.b1) * g
        self.v *= self.b2
        self.v += (1 - self.b2) * (g * g)
        c1, c2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        self.flat -= (self.lr / c1) * self.m / (np.sqrt(self.v / c2) + self.eps)
