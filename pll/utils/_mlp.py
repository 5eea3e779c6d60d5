"""pll's networks on PyTorch: ``Linear → ReLU → BatchNorm`` stacks whose parameters live in one flat buffer.

Proden, CroSel, VI-PLL and the authors' noise network train such networks on
minibatches of 16 to 256 rows, where PyTorch's overhead per step, not its
arithmetic, decides the time: ``torch.optim.Adam`` loops over the parameter
tensors in Python (0.3 ms a step of Proden's 300-300-300 network, against
0.9 ms for the whole step).  So the parameters are views into one buffer
(and Adam's moments into two more), and each step calls PyTorch's fused Adam
kernel once, on all of them.  Autograd computes every gradient; nothing here
differentiates by hand.

Import it through :func:`pll.utils._deep.networks`, which names the ``deep``
extra when PyTorch is missing; importing torch costs two seconds, which
``import pll`` does not pay.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F

BN_EPS = 1e-5
"""PyTorch's ``BatchNorm1d`` eps: added to the variance before its square root."""
BN_MOMENTUM = 0.1
"""PyTorch's ``BatchNorm1d`` momentum: share of each batch's statistics in the running ones."""
DTYPE = np.float32


def init_linear(rng, fan_in, fan_out):
    """A dense layer's weights (fan_in, fan_out) and bias (fan_out,) as PyTorch's ``Linear``: uniform in ``±1/sqrt(fan_in)``.

    Drawn from the numpy ``rng``, weights first, in float64, so that a seed
    gives the same network as before the move to PyTorch.
    """
    bound = 1 / math.sqrt(fan_in)
    return rng.uniform(-bound, bound, (fan_in, fan_out)), rng.uniform(-bound, bound, fan_out)


def subnormals_flushed():
    """Whether this thread flushes subnormal floats to zero: PyTorch sets the flag but has no getter, so a probe."""
    return torch.tensor([1e-39]).mul(1.0).item() == 0.0


@contextmanager
def cpu_settings(threads=1):
    """PyTorch's CPU settings for a fit, restored after: ``threads`` threads, and subnormal floats flushed to zero.

    One thread: minibatch products are too small to share, and one thread
    makes a CPU fit deterministic for its seed (a split matrix product sums in
    another order).  Flushing: a confident network's softmax underflows to
    subnormal floats (below 1.2e-38), and every product that meets one runs
    tens of times slower; PRODEN at 1,000,000 rows slowed to a twentieth of
    its speed from its third epoch on.  The flag belongs to the calling thread.
    """
    before, flushing = torch.get_num_threads(), subnormals_flushed()
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_num_threads(before)
        torch.set_flush_denormal(flushing)


def as_tensor(X, device, dtype=torch.float32):
    """``X`` (numpy) on ``device`` in ``dtype``, sharing memory where it can."""
    return torch.as_tensor(np.ascontiguousarray(X), dtype=dtype, device=device)


class FlatParameters:
    """Parameters that are views into one flat buffer, ``params``: what :class:`Adam` updates in one fused call.

    ``views`` are the parameters (leaves of autograd) in the order of
    ``_shapes()``, which a subclass gives; a ``loss.backward()`` after
    :meth:`zero_grad` fills their ``.grad`` by handing its own tensors over
    rather than adding them to zeros (0.1 ms a step of Proden's network).
    """

    def _shapes(self):
        raise NotImplementedError

    def _bind(self, params, device):
        """``params`` (numpy) as a tensor on ``device``, and the parameters' views into it."""
        self.device = torch.device(device)
        self.params = torch.tensor(params, device=self.device)
        self.views = [view.requires_grad_() for view in self.views_of(self.params)]

    def views_of(self, buffer):
        """Views into ``buffer`` (the size of ``params``) shaped as the parameters, in their order."""
        views, start = [], 0
        for s in self._shapes():
            stop = start + math.prod(s)
            views.append(buffer[start:stop].view(s))
            start = stop
        return views

    def zero_grad(self):
        """Forget the last gradients: the next ``backward`` hands its own tensors over, with nothing to add to."""
        for view in self.views:
            view.grad = None

    @property
    def grads(self):
        """The gradients of the last ``backward`` (zero where none) in the layout of ``params``: a copy."""
        return torch.cat([(v.grad if v.grad is not None else torch.zeros_like(v)).reshape(-1) for v in self.views])

    def sgd_step(self, lr):
        """Plain gradient descent from the last gradients: ``params −= lr · grads``."""
        with torch.no_grad():
            torch._foreach_add_(self.views, [v.grad for v in self.views], alpha=-lr)


class DenseLayers(FlatParameters):
    """Dense layers, each ``(W, b)`` with weights (fan_in, fan_out), initialised as PyTorch's ``Linear``; float32.

    ``layers[i]`` is the pair of the ``i``-th ``(fan_in, fan_out)`` of
    ``shapes``; how they connect is the subclass's (VI-PLL's CVAE).
    """

    def __init__(self, shapes, rng, device="cpu"):
        self.shapes = [tuple(s) for s in shapes]
        parts = [a.ravel() for fan_in, fan_out in self.shapes for a in init_linear(rng, fan_in, fan_out)]
        self._bind(np.concatenate(parts).astype(DTYPE), device)

    def _shapes(self):
        return [s for fan_in, fan_out in self.shapes for s in ((fan_in, fan_out), (fan_out,))]

    def _bind(self, params, device):
        super()._bind(params, device)
        self.layers = list(zip(self.views[::2], self.views[1::2]))

    def __getstate__(self):
        return {"shapes": self.shapes, "params": self.params.detach().cpu().numpy().copy()}

    def __setstate__(self, state):
        self.shapes = state["shapes"]
        self._bind(state["params"], "cpu")


class Perceptron(FlatParameters):
    """Hidden layers of ``Linear → ReLU → BatchNorm``, then a linear layer; parameters in one buffer (float32 unless told).

    ``params`` holds each layer's weights (fan_in, fan_out) and bias, then
    each hidden layer's normalisation scale and shift.  Initialised as PyTorch's defaults: weights and
    biases uniform in ``±1/sqrt(fan_in)``, scales 1, shifts 0.  Batch
    normalisation is PyTorch's: the batch's biased variance in training, its
    unbiased one in the running statistics, which inference uses.

    A pickle holds numpy arrays on the CPU (the layout of the numpy network
    that pll 0.2 pickled, which therefore still loads).
    """

    def __init__(self, n_features, n_classes, hidden, rng, device="cpu", dtype=DTYPE):
        self.sizes = (n_features, *hidden, n_classes)
        params = np.empty(sum(math.prod(s) for s in self._shapes()), dtype)
        start = 0
        for a, c in zip(self.sizes[:-1], self.sizes[1:]):
            W, b = init_linear(rng, a, c)
            params[start:start + a * c], params[start + a * c:start + a * c + c] = W.ravel(), b
            start += a * c + c
        for h in hidden:
            params[start:start + h], params[start + h:start + 2 * h] = 1, 0
            start += 2 * h
        self._load(params, [np.zeros(h, dtype) for h in hidden], [np.ones(h, dtype) for h in hidden], device)

    def _shapes(self):
        """Shapes of the parameters in buffer order: each layer's weights and bias, then each hidden layer's scale and shift."""
        pairs = zip(self.sizes[:-1], self.sizes[1:])
        return [s for a, c in pairs for s in ((a, c), (c,))] + [(h,) for h in self.sizes[1:-1] for _ in range(2)]

    def _load(self, params, running_mean, running_var, device):
        """Tensors on ``device`` from numpy arrays; the layers' views into ``params``."""
        self._bind(params, device)
        self.running_mean = [torch.tensor(r, device=self.device) for r in running_mean]
        self.running_var = [torch.tensor(r, device=self.device) for r in running_var]
        n_linear = 2 * (len(self.sizes) - 1)
        self._linear, self._norm = self.views[:n_linear], self.views[n_linear:]

    def __getstate__(self):
        return {
            "sizes": self.sizes,
            "params": self.params.detach().cpu().numpy().copy(),
            "running_mean": [r.cpu().numpy().copy() for r in self.running_mean],
            "running_var": [r.cpu().numpy().copy() for r in self.running_var],
        }

    def __setstate__(self, state):
        self.sizes = state["sizes"]
        self._load(state["params"], state["running_mean"], state["running_var"], "cpu")

    def logits(self, X, train=False):
        """The output layer's logits for the rows ``X`` (a tensor on ``device``).

        ``train`` normalises by the batch's statistics and moves the running
        ones; otherwise the running statistics normalise, and no graph is kept
        unless the caller asks for one.
        """
        W, b = self._linear[::2], self._linear[1::2]
        h = X
        for i, (scale, shift) in enumerate(zip(self._norm[::2], self._norm[1::2])):
            h = F.relu(torch.addmm(b[i], h, W[i]))
            h = F.batch_norm(h, self.running_mean[i], self.running_var[i], scale, shift,
                             training=train, momentum=BN_MOMENTUM, eps=BN_EPS)
        return torch.addmm(b[-1], h, W[-1])

    def predict_proba(self, Z, dtype=np.float64):
        """Softmax probabilities of the rows ``Z`` (numpy), inference mode, computed in ``dtype`` on the CPU.

        In float64 a row's probabilities do not depend on which rows share
        its block, as they would in their last float32 digit.
        """
        same = self.params.dtype == torch.from_numpy(np.empty(0, dtype)).dtype and self.device.type == "cpu"
        net = self if same else self.cast(dtype)
        with torch.no_grad():
            return torch.softmax(net.logits(as_tensor(Z, "cpu", net.params.dtype)), dim=1).numpy()

    def cast(self, dtype):
        """A copy of this network on the CPU in ``dtype``, for inference."""
        state = self.__getstate__()
        copy = object.__new__(type(self))
        copy.sizes = self.sizes
        copy._load(np.asarray(state["params"], dtype), [np.asarray(r, dtype) for r in state["running_mean"]],
                   [np.asarray(r, dtype) for r in state["running_var"]], "cpu")
        return copy


class Adam:
    """Adam on a network's flat buffer through PyTorch's fused kernel, one call a step.

    ``weight_decay`` is an L2 penalty added to the gradient, as
    ``torch.optim.Adam(weight_decay=...)``, or with ``decoupled`` subtracted
    from the weights, as ``torch.optim.AdamW``.  The step size and β1 are
    given each step, so that a schedule (:func:`one_cycle`) can move both.

    The kernel is the one ``torch.optim.Adam(fused=True)`` runs, called
    directly: the functional ``torch.optim.adam.adam`` first groups its
    tensors by device and type in Python, 0.1 ms a step, a tenth of a Proden
    step on bird-song.  ``tests/unit/test_mlp.py`` holds it equal to
    ``torch.optim.Adam`` and ``AdamW``.
    """

    def __init__(self, net, weight_decay=0.0, decoupled=False, beta2=0.999, eps=1e-8):
        self.net, self.weight_decay, self.decoupled, self.beta2, self.eps = net, weight_decay, decoupled, beta2, eps
        self.m, self.v = (net.views_of(torch.zeros_like(net.params)) for _ in range(2))
        self.t = torch.zeros((), dtype=net.params.dtype, device=net.params.device)

    def step(self, lr, beta1=0.9):
        """One update of the network's parameters in place, from its ``grads``."""
        kernel = torch._fused_adamw_ if self.decoupled else torch._fused_adam_
        with torch.no_grad():
            self.t += 1
            views = self.net.views
            kernel(views, [v.grad for v in views], self.m, self.v, [], [self.t] * len(views), lr=lr, beta1=beta1,
                   beta2=self.beta2, weight_decay=self.weight_decay, eps=self.eps, amsgrad=False, maximize=False)


def one_cycle(step, total, peak, warmup=0.3, start_div=25.0, final_div=1e4, momenta=(0.95, 0.85)):
    """Step size and Adam's β1 at ``step`` of ``total``: PyTorch's ``OneCycleLR`` defaults (Smith & Topin, 2019).

    The step size rises on a half cosine from ``peak / start_div`` to ``peak``
    over the first ``warmup`` share of the steps while β1 falls from 0.95 to
    0.85, then both return, the step size down to ``peak / start_div / final_div``.
    """
    rise = warmup * total - 1
    lo, end = peak / start_div, peak / start_div / final_div
    if step <= rise:
        t, (lr_a, lr_b), (m_a, m_b) = step / rise if rise > 0 else 1.0, (lo, peak), momenta
    else:
        t, (lr_a, lr_b), (m_a, m_b) = (step - rise) / max(total - 1 - rise, 1), (peak, end), momenta[::-1]
    c = (1 - math.cos(math.pi * min(t, 1.0))) / 2
    return lr_a + (lr_b - lr_a) * c, m_a + (m_b - m_a) * c
