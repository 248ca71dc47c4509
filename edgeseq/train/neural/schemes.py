"""Exit-loss weights of an anytime network: CONST, LINEAR, Half-End, SIEVE and AdaLoss.

Training minimises Σ_i B_i ℓ_i over the exits i = 1..L. The static schemes fix B in advance; AdaLoss
(adaptive loss balancing) sets B_i ∝ 1/ℓ̂_i from a running estimate ℓ̂ of each exit's loss, which
makes the objective behave like Σ_i ln ℓ_i: every exit's *relative* improvement counts the same, so
the shallow exits (large losses) cannot dominate the gradient and the deep ones are not starved. The
regularised form mixes in a constant: B_i = (1 − γ)·min_j ℓ̂_j / ℓ̂_i + γ, which keeps every weight
at least γ (an exit whose loss stays large still gets trained) and the largest weight at 1.
"""

from __future__ import annotations

import numbers

import numpy as np

from edgeseq.errors import InputError

SCHEMES = ("const", "linear", "half_end", "sieve", "adaloss")
EMA_MOMENTUM = 0.9  # the thesis's momentum for ℓ̂ (its ablation finds 0.99 no better)


def loss_weights(scheme: str, n_exits: int, losses=None, gamma: float = 0.05) -> np.ndarray:
    """The weight B_i of each exit's loss under `scheme`, scaled so the largest weight is 1.

    Parameters
    ----------
    scheme : {"const", "linear", "half_end", "sieve", "adaloss"}
        CONST: all equal. LINEAR: from 0.25 to 1 evenly. Half-End: half of the total weight on the
        last exit, the rest spread evenly. SIEVE: for step = 1, 2, 4, … < L add 1 to every step-th exit
        counted from the last, then give the last exit the sum of the others. AdaLoss:
        (1 − γ)·min_j ℓ_j / ℓ_i + γ from the (averaged) `losses`.
    n_exits : int
        Number of exits L >= 1.
    losses : array_like of float, optional
        One positive loss estimate per exit; required by (and only used by) "adaloss".
    gamma : float, default=0.05
        AdaLoss's constant share γ in [0, 1], the thesis's choice.

    Returns
    -------
    ndarray of shape (n_exits,)
        Non-negative weights, largest 1.

    Raises
    ------
    InputError
        On an unknown scheme, a bad count, or missing / non-positive losses for AdaLoss.

    Examples
    --------
    >>> from edgeseq import loss_weights
    >>> loss_weights("sieve", 4).tolist()
    [0.25, 0.5, 0.25, 1.0]
    >>> loss_weights("linear", 4).tolist()
    [0.25, 0.5, 0.75, 1.0]
    >>> loss_weights("half_end", 3).tolist()   # the last exit carries half of the total weight
    [0.5, 0.5, 1.0]
    >>> loss_weights("adaloss", 2, losses=[2.0, 0.5]).tolist()   # 0.95 * 0.5 / 2 + 0.05
    [0.2875, 1.0]
    """
    if scheme not in SCHEMES:
        raise InputError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    if isinstance(n_exits, bool) or not isinstance(n_exits, numbers.Integral) or not 1 <= n_exits <= 1 << 16:
        raise InputError(f"n_exits must be an integer in 1..65536, got {n_exits!r}")
    L = int(n_exits)
    if scheme == "const":
        w = np.ones(L)
    elif scheme == "linear":
        w = np.linspace(0.25, 1.0, L) if L > 1 else np.ones(1)
    elif scheme == "half_end":
        w = np.ones(L)
        w[-1] = max(L - 1, 1)
    elif scheme == "sieve":
        w = np.zeros(L)
        step = 1
        while step < L:
            w[L - 1::-step] += 1.0
            step *= 2
        w[-1] = w[:-1].sum() if L > 1 else 1.0
    else:
        if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not 0 <= gamma <= 1:
            raise InputError(f"gamma must be a number in [0, 1], got {gamma!r}")
        if losses is None:
            raise InputError("scheme 'adaloss' needs the exits' losses")
        ell = np.asarray(losses, dtype=np.float64)
        if ell.shape != (L,) or not np.all(np.isfinite(ell)) or np.any(ell <= 0):
            raise InputError(f"losses must be {L} positive finite numbers, got {losses!r:.200}")
        w = (1.0 - gamma) * ell.min() / ell + gamma
    return w / w.max()


class AdaLossWeights:
    """AdaLoss weights from an exponential moving average of each exit's training loss.

    ℓ̂ ← m·ℓ̂ + (1 − m)·ℓ at every step (m = 0.9). Initialisation (the thesis leaves it open): ℓ̂
    starts at the first minibatch's losses themselves, not at zero, so the first weights already
    reflect the exits' relative losses and there is no start-up bias to correct.

    Examples
    --------
    >>> import numpy as np
    >>> from edgeseq.train.neural.schemes import AdaLossWeights
    >>> ada = AdaLossWeights(2)
    >>> ada.update([1.0, 1.0]).tolist()      # the first losses initialise the average
    [1.0, 1.0]
    >>> ada.ema.tolist(), ada.update([2.0, 1.0]).round(4).tolist()
    ([1.0, 1.0], [0.9136, 1.0])
    """

    def __init__(self, n_exits: int, gamma: float = 0.05, momentum: float = EMA_MOMENTUM):
        self.n_exits, self.gamma, self.momentum = n_exits, gamma, momentum
        self.ema: np.ndarray | None = None

    def update(self, losses) -> np.ndarray:
        """Fold one step's exit losses into ℓ̂ and return the new weights (largest 1).

        Examples
        --------
        >>> from edgeseq.train.neural.schemes import AdaLossWeights
        >>> AdaLossWeights(3, gamma=0.0).update([4.0, 2.0, 1.0]).tolist()
        [0.25, 0.5, 1.0]
        """
        ell = np.maximum(np.asarray(losses, np.float64), 1e-12)  # a perfect exit must not divide by zero
        self.ema = ell.copy() if self.ema is None else self.momentum * self.ema + (1 - self.momentum) * ell
        return loss_weights("adaloss", self.n_exits, self.ema, self.gamma)
