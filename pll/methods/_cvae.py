"""VI-PLL's conditional VAE ``p(x | y)``, on PyTorch: import it after :func:`pll.utils._deep.networks`.

Its own module, not :mod:`pll.methods._vi_pll`'s, so that importing the
estimator does not import torch (two seconds).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..utils._mlp import DenseLayers

KL_SHARE = 0.01
"""Weight of ``log p(z) − log q(z | x, y)`` in the importance weights of ``log p(x | y)`` (the authors')."""


class Cvae(DenseLayers):
    """The authors' conditional VAE ``p(x | y)``: ``[x, y] → h → (μ, log σ²)``, ``[z, y] → h → hardsigmoid → x``.

    One hidden ReLU layer each way, no batch normalisation.  Layers in
    buffer order: encoder hidden, μ, log σ², decoder hidden, decoder output.
    """

    def __init__(self, n_features, n_classes, latent, hidden, rng, device="cpu"):
        d, l, z, h = n_features, n_classes, latent, hidden
        self.sizes = (d, l, z, h)
        super().__init__([(d + l, h), (h, z), (h, z), (z + l, h), (h, d)], rng, device)

    def __getstate__(self):
        return {**super().__getstate__(), "sizes": self.sizes}

    def __setstate__(self, state):
        self.sizes = state["sizes"]
        super().__setstate__(state)

    def encode(self, x, y):
        """``(μ, log σ²)`` of ``q(z | x, y)`` for rows ``x`` (B, d) and label vectors ``y`` (B, l)."""
        (W1, b1), (Wm, bm), (Wv, bv) = self.layers[:3]
        h = F.relu(torch.addmm(b1, torch.cat((x, y), dim=1), W1))
        return torch.addmm(bm, h, Wm), torch.addmm(bv, h, Wv)

    def decode(self, z, y):
        """The reconstruction of latent rows ``z`` (B, latent) under label vectors ``y`` (B, l)."""
        (W1, b1), (W2, b2) = self.layers[3:]
        h = F.relu(torch.addmm(b1, torch.cat((z, y), dim=1), W1))
        return F.hardsigmoid(torch.addmm(b2, h, W2))

    def loss(self, x, y, eps):
        """The authors' CVAE loss: mean squared reconstruction error plus the KL term, both averaged over entries.

        ``eps`` (B, latent): the standard normal draws of the reparametrisation.
        Returns ``(loss, reconstruction MSE)``.
        """
        mu, logvar = self.encode(x, y)
        recon = self.decode(mu + eps * torch.exp(0.5 * logvar), y)
        mse = torch.mean((recon - x) ** 2)
        kl = -0.5 * torch.mean(1 + logvar - mu**2 - logvar.exp())
        return mse + kl, mse

    def log_likelihood(self, x, sigma, eps):
        """The importance-weighted estimate of ``log p(x | y = c)`` for every row and class, shape (B, l).

        ``eps`` (K, B, l, latent): standard normal draws, ``K`` samples per
        row and class.  As the authors: with ``z_k = μ + ε_k σ_z`` from the
        encoder of ``(x, e_c)``, ``w_k = log N(x; x̂(z_k, e_c), σ²)`` (the
        squared error averaged over features) ``+ 0.01 (log p(z_k) − log q(z_k | x, e_c))``
        (both averaged over latent dimensions), the estimate is
        ``logsumexp_k w_k − log K``.  The encoder's first layer sees ``x``
        once and adds each class's column block (a one-hot ``y`` selects it),
        the same numbers as the authors' repeated rows.
        """
        d, l, _, _ = self.sizes
        (W1, b1), (Wm, bm), (Wv, bv), (V1, c1), (V2, c2) = self.layers
        h = F.relu((x @ W1[:d] + b1)[:, None, :] + W1[d:][None, :, :])  # (B, l, h)
        mu, logvar = h @ Wm + bm, h @ Wv + bv  # (B, l, z)
        z = mu + eps * torch.exp(0.5 * logvar)  # (K, B, l, z)
        K, B = eps.shape[:2]
        g = (z.reshape(-1, z.shape[-1]) @ V1[:-l]).view(K, B, l, -1)
        g = F.relu(g + (V1[-l:] + c1)).view(K * B * l, -1)  # row c of V1's label block for class c
        recon = F.hardsigmoid(torch.addmm(c2, g, V2)).view(K, B, l, d)
        mse = ((recon - x[None, :, None, :]) ** 2).mean(dim=-1)
        log_p_x = -0.5 * (mse / sigma**2 + math.log(2 * math.pi * sigma**2))
        log_p_z = -0.5 * (z**2 + math.log(2 * math.pi)).mean(dim=-1)
        log_q_z = -0.5 * ((z - mu) ** 2 / torch.exp(logvar) + logvar + math.log(2 * math.pi)).mean(dim=-1)
        w = log_p_x + KL_SHARE * (log_p_z - log_q_z)
        return torch.logsumexp(w, dim=0) - math.log(eps.shape[0])
