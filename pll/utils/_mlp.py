"""Layers of the two numpy networks, Proden's (:mod:`pll.methods._perceptron`) and the noise model's (:mod:`pll.noise._network`).

Both are ``Linear → ReLU → BatchNorm`` stacks under a softmax, initialised
as PyTorch does; the dense layers, the activations and the batch
normalisation's scale and shift are written once here.  The normalisation
itself stays with each network: they compute it in forms equal only up to
rounding, and their numbers must not move.  Here, not in either package,
since neither the methods nor the noise package imports the other.
"""

from __future__ import annotations

import math

import numpy as np

BN_EPS = 1e-5
"""PyTorch's ``BatchNorm1d`` eps: added to the variance before its square root."""
BN_MOMENTUM = 0.1
"""PyTorch's ``BatchNorm1d`` momentum: share of each batch's statistics in the running ones."""


def init_linear(rng, fan_in, fan_out):
    """A dense layer's weights (fan_in, fan_out) and bias (fan_out,) as PyTorch's ``Linear``: uniform in ``±1/sqrt(fan_in)``.

    Drawn from ``rng``, weights first, in float64.
    """
    bound = 1 / math.sqrt(fan_in)
    return rng.uniform(-bound, bound, (fan_in, fan_out)), rng.uniform(-bound, bound, fan_out)


def dense(h, W, b):
    """A dense layer's output ``h @ W + b`` for the rows ``h``."""
    return h @ W + b


def dense_backward(h, grad, W, out=None, input_grad=True):
    """Gradients of a dense layer with input ``h`` and weights ``W``, given ``grad`` at its output.

    Returns ``(dW, db, dh)``; ``dh`` is None without ``input_grad`` (the
    first layer's input needs none).  ``out``: arrays ``(dW, db)`` to write
    the weights' gradients into, else new ones.
    """
    if out is None:
        dW, db = h.T @ grad, grad.sum(axis=0)
    else:
        dW, db = out
        np.matmul(h.T, grad, out=dW)
        db[:] = grad.sum(axis=0)
    return dW, db, grad @ W.T if input_grad else None


def relu(z):
    return np.maximum(z, 0)


def relu_backward(grad, z):
    """The gradient at a ReLU's input ``z`` from ``grad`` at its output."""
    return grad * (z > 0)


def scale_shift_backward(grad, normed):
    """Gradients of batch normalisation's scale and shift, given ``grad`` at its output and its normalised input."""
    return (grad * normed).sum(axis=0), grad.sum(axis=0)


def softmax(logits):
    """Each row's softmax, shifted by its largest logit first."""
    P = np.exp(logits - logits.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    return P
