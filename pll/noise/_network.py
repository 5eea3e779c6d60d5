"""The network the DST-PLL authors train to make instance-dependent noise, on PyTorch (the ``deep`` extra).

The DST-PLL authors' released code trains this network for 10 epochs of
plain SGD (learning rate 1e-3) on a squared loss.  Unless the classes are
separable at a glance, so little training barely moves it from its
initialisation: its class probabilities stay close to uniform, and the
instance-dependent noise built on them
(:func:`pll.noise.instance_flip_probabilities`) is close to uniform over the
wrong labels, each joining a bag with probability about ``0.3·l/(l−1)``.  The
project's default noise classifier (:func:`pll.noise.default_noise_classifier`,
an MLP trained with Adam) fits the labels and gives very different bags.  Pass
``SquaredLossMLP(random_state=...)`` as the ``estimator`` of
:func:`pll.noise.instance_dependent` to reproduce the authors' setting.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..utils._deep import networks
from ..utils._random import seed_to_int


def squared_loss(logits, T):
    """The authors' loss of one batch: ``mean_rows sum_classes (T − softmax(logits))²`` (tensors)."""
    import torch

    return ((T - torch.softmax(logits, dim=1)) ** 2).sum(dim=1).mean()


class SquaredLossMLP(ClassifierMixin, BaseEstimator):
    """Softmax network with batch-normalised ReLU layers, trained by SGD on a squared loss.

    ``Linear → ReLU → BatchNorm1d`` for each hidden width, then
    ``Linear → Softmax``, initialised as PyTorch does (Linear weights and
    biases uniform in ±1/sqrt(fan_in); BatchNorm scale 1, shift 0, running
    mean 0, running variance 1, momentum 0.1, eps 1e-5): the network of
    :class:`pll.utils._mlp.Perceptron`.  Training minimises the batch mean of
    ``sum_classes (onehot(y) − softmax)²`` by plain SGD on mini-batches of
    rows shuffled every epoch, on the CPU on one thread.  A final batch of
    one row, on which PyTorch's BatchNorm raises, is skipped.  Prediction uses
    the running statistics (eval mode).  Computation is in float64.

    Parameters
    ----------
    hidden : tuple of int, default=(300, 300, 300)
        Widths of the hidden layers.
    epochs : int, default=10
    batch_size : int, default=64
    learning_rate : float, default=1e-3
    random_state : int or None, default=None
        Seed of ``np.random.default_rng`` (initialisation, then shuffling);
        None draws fresh randomness.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    network_ : pll.utils._mlp.Perceptron
        The fitted network.
    """

    _parameter_constraints = {
        "hidden": ["array-like"],
        "epochs": [Interval(Integral, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 2, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
    }

    def __init__(self, hidden=(300, 300, 300), *, epochs=10, batch_size=64, learning_rate=1e-3, random_state=None):
        self.hidden = hidden
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Train on features ``X`` of shape (n, d) and labels ``y`` of shape (n,)."""
        widths = list(np.asarray(self.hidden, dtype=object).ravel())
        if not all(isinstance(w, Integral) and not isinstance(w, bool) and w >= 1 for w in widths):
            raise ValueError(f"hidden must be a sequence of positive integers, got {self.hidden!r}")
        nets = networks(type(self).__name__)
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, y = np.unique(y, return_inverse=True)
        rng = np.random.default_rng(seed_to_int(self.random_state))
        net = nets.Perceptron(X.shape[1], self.classes_.size, tuple(widths), rng, dtype=np.float64)
        X_t = nets.as_tensor(X, "cpu", None)
        T_t = nets.as_tensor(np.eye(self.classes_.size)[y], "cpu", None)
        with nets.cpu_settings(1):
            for _ in range(self.epochs):
                order = rng.permutation(X.shape[0])
                for start in range(0, order.size, self.batch_size):
                    rows = order[start : start + self.batch_size]
                    if rows.size < 2:  # PyTorch's BatchNorm1d raises on one row in training
                        continue
                    net.zero_grad()
                    squared_loss(net.logits(X_t[rows], train=True), T_t[rows]).backward()
                    net.sgd_step(self.learning_rate)
        self.network_ = net
        return self

    def predict_proba(self, X):
        """Class probabilities of shape (n, n_classes), BatchNorm in eval mode."""
        check_is_fitted(self)
        return self.network_.predict_proba(validate_data(self, X, dtype=np.float64, reset=False))

    def predict(self, X):
        """The most probable class of each row (a label of ``classes_``)."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]
