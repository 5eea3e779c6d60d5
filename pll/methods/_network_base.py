"""What the deep learners (Proden, CroSel, VI-PLL) share around their networks: the checks and the scaling."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import InvalidParameterError

from ..utils._deep import networks, resolve_device
from ..utils.progress import blocks
from ..utils.validation import check_X, check_params, empty_as_all, encode_bags
from ._bag_weights import BagWeightClassifier

REPORT_ROWS = 2**16
"""Rows of minibatches between two progress reports."""
PREDICT_ROWS = 2**14
"""Rows per block when a network predicts: its hidden activations stay near 20 MiB per 300 units."""


def training_proba(nets, Z):
    """The mean softmax probabilities of networks ``nets`` for rows ``Z`` (numpy), inference mode, float32.

    Block by block, for the decisions a learner takes while it trains (the
    calibration scores of candidate cleaning); :meth:`NetworkClassifier._mean_proba`
    predicts with the fitted networks.
    """
    return np.concatenate([sum(net.predict_proba(Z[b], np.float32) for net in nets) / len(nets)
                           for b in blocks(Z.shape[0], PREDICT_ROWS)])


class NetworkClassifier(BagWeightClassifier):
    """Base of the learners that train PyTorch networks on weights over each bag.

    ``fit`` starts with :meth:`_start_fit`, which checks what every such
    learner checks, in the same order and with the same messages, and scales
    the features to [0, 1] on the training rows (:meth:`_scaling_of`,
    :meth:`_scaled`; the networks' input).  Subclasses have the parameters
    ``hidden_layer_sizes`` and ``device``.
    """

    def _validate_params(self):
        """scikit-learn's checks of ``_parameter_constraints``, and positive layer sizes, which they cannot say.

        So that :func:`pll.utils.validation.check_params` (``fit``, a grid, the
        command line) refuses ``(0,)`` before anything runs, not the network
        at its first epoch.
        """
        super()._validate_params()
        sizes = self.hidden_layer_sizes
        if not (len(sizes) > 0 and all(isinstance(h, Integral) and not isinstance(h, bool) and h >= 1 for h in sizes)):
            raise InvalidParameterError(
                f"The 'hidden_layer_sizes' parameter of {type(self).__name__} must be a non-empty tuple of "
                f"positive ints. Got {sizes!r} instead."
            )

    def _start_fit(self, X, S):
        """Check the parameters, ``X``, the deep extra, the device and ``S``; set the fitted attributes they give.

        Sets ``offset_``, ``scale_``, ``S_train_``, ``classes_``, ``n_classes_``
        (and which classes some bag holds: a class in no bag gets no
        probability).  Returns ``(nets, device, X, bags)``: the networks'
        module (:mod:`pll.utils._mlp`), the ``torch.device``, the checked
        features and the bags with an empty one standing for all classes.
        """
        check_params(self)
        X = check_X(self, X, reset=True)
        nets = networks(type(self).__name__)
        device = resolve_device(self.device, type(self).__name__)
        S_train, classes = encode_bags(S, X.shape[0])
        bags = empty_as_all(S_train)
        self.offset_, self.scale_ = self._scaling_of(X)
        self.S_train_, self.classes_, self.n_classes_ = S_train, classes, len(classes)
        self._inner_classes = np.flatnonzero(bags.any(axis=0))
        return nets, device, X, bags

    def _scaling_of(self, X):
        """``(offset, scale)`` of the features, shape (d,) each: the training rows' minimum and range (1 if constant)."""
        low, spread = X.min(axis=0), np.ptp(X, axis=0)
        return low, np.where(spread > 0.0, spread, 1.0)

    def _mean_proba(self, X):
        """The networks' mean softmax probabilities for checked ``X``, block by block, rows summing to 1.

        In float64, each network cast once: in float32 a row's probabilities
        would depend in their last digit on which rows share its block.  A
        class in no bag gets 0.
        """
        P = np.zeros((X.shape[0], self.n_classes_))
        casts = [net.cast(np.float64) for net in self.networks_]
        for b in blocks(X.shape[0], PREDICT_ROWS):
            Z = self._scaled(X[b], np.float64)
            for net in casts:
                P[b, self._inner_classes] += net.predict_proba(Z)[:, self._inner_classes]
        return P / P.sum(axis=1, keepdims=True)

    def _scaled(self, X, dtype=np.float32):
        """The networks' input ``(X − offset_) / scale_``, in float32 (the networks' precision) unless told."""
        return ((X - self.offset_) / self.scale_).astype(dtype)
