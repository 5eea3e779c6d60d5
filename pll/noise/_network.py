"""The network the DST-PLL authors train to make instance-dependent noise, in plain numpy.

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

from ..utils._mlp import (
    BN_EPS,
    BN_MOMENTUM,
    dense,
    dense_backward,
    init_linear,
    relu,
    relu_backward,
    scale_shift_backward,
    softmax,
)
from ..utils._random import seed_to_int


def _loss_and_gradients(coefs, intercepts, gammas, betas, X, T):
    """Squared loss of one training-mode batch and its gradients.

    ``coefs[i]`` has shape (fan_in, fan_out); hidden layer ``i`` is
    ``BatchNorm(ReLU(h @ coefs[i] + intercepts[i]))`` with scale ``gammas[i]``
    and shift ``betas[i]``, normalised with the batch's biased variance; the
    last layer is ``softmax(h @ coefs[-1] + intercepts[-1])``.  The loss is
    ``mean_rows sum_classes (T − P)²``.

    Returns
    -------
    loss : float
    grads : tuple (coefs, intercepts, gammas, betas) of lists shaped like the arguments
    stats : tuple (means, unbiased variances) of the batch, one per hidden layer
    """
    n = X.shape[0]
    h, cache, means, variances = X, [], [], []
    for W, b, g, be in zip(coefs[:-1], intercepts[:-1], gammas, betas):
        z = dense(h, W, b)
        a = relu(z)
        mu, var = a.mean(axis=0), a.var(axis=0)
        std = np.sqrt(var + BN_EPS)
        xhat = (a - mu) / std
        cache.append((h, z, xhat, std))
        means.append(mu)
        variances.append(var * n / (n - 1))
        h = g * xhat + be
    P = softmax(dense(h, coefs[-1], intercepts[-1]))
    loss = float(((T - P) ** 2).sum(axis=1).mean())

    dP = 2.0 * (P - T) / n
    dz = P * (dP - (dP * P).sum(axis=1, keepdims=True))  # through the softmax
    dW, db, dh = dense_backward(h, dz, coefs[-1])
    gW, gb, gg, gbe = [dW], [db], [], []
    for i in range(len(cache) - 1, -1, -1):
        h, z, xhat, std = cache[i]
        dg, dbe = scale_shift_backward(dh, xhat)
        gg.append(dg)
        gbe.append(dbe)
        dx = dh * gammas[i]
        da = (dx - dx.mean(axis=0) - xhat * (dx * xhat).mean(axis=0)) / std
        dW, db, dh = dense_backward(h, relu_backward(da, z), coefs[i], input_grad=i > 0)
        gW.append(dW)
        gb.append(db)
    grads = tuple(lst[::-1] for lst in (gW, gb, gg, gbe))
    return loss, grads, (means, variances)


class SquaredLossMLP(ClassifierMixin, BaseEstimator):
    """Softmax network with batch-normalised ReLU layers, trained by SGD on a squared loss.

    ``Linear → ReLU → BatchNorm1d`` for each hidden width, then
    ``Linear → Softmax``, initialised as PyTorch does (Linear weights and
    biases uniform in ±1/sqrt(fan_in); BatchNorm scale 1, shift 0, running
    mean 0, running variance 1, momentum 0.1, eps 1e-5).  Training minimises
    the batch mean of ``sum_classes (onehot(y) − softmax)²`` by plain SGD on
    mini-batches of rows shuffled every epoch; BatchNorm normalises with the
    batch's biased variance and updates its running variance with the
    unbiased one.  A final batch of one row, on which PyTorch's BatchNorm
    raises, is skipped.  Prediction uses the running statistics (eval mode).
    Computation is in float64.

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
    coefs_, intercepts_ : lists of ndarray
        Linear layers, weights of shape (fan_in, fan_out); the last is the output layer.
    bn_weights_, bn_biases_, running_means_, running_vars_ : lists of ndarray
        BatchNorm parameters and running statistics, one per hidden layer.
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
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, y = np.unique(y, return_inverse=True)
        T = np.eye(self.classes_.size)[y]
        rng = np.random.default_rng(seed_to_int(self.random_state))

        sizes = [X.shape[1], *widths, self.classes_.size]
        self.coefs_, self.intercepts_ = [], []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            W, b = init_linear(rng, fan_in, fan_out)
            self.coefs_.append(W)
            self.intercepts_.append(b)
        self.bn_weights_ = [np.ones(w) for w in widths]
        self.bn_biases_ = [np.zeros(w) for w in widths]
        self.running_means_ = [np.zeros(w) for w in widths]
        self.running_vars_ = [np.ones(w) for w in widths]

        params = (self.coefs_, self.intercepts_, self.bn_weights_, self.bn_biases_)
        for _ in range(self.epochs):
            order = rng.permutation(X.shape[0])
            for start in range(0, order.size, self.batch_size):
                rows = order[start : start + self.batch_size]
                if rows.size < 2:  # PyTorch's BatchNorm1d raises on one row in training
                    continue
                _, grads, (means, variances) = _loss_and_gradients(*params, X[rows], T[rows])
                for arrays, gradients in zip(params, grads):
                    for p, g in zip(arrays, gradients):
                        p -= self.learning_rate * g
                for i, (mu, var) in enumerate(zip(means, variances)):
                    self.running_means_[i] = (1 - BN_MOMENTUM) * self.running_means_[i] + BN_MOMENTUM * mu
                    self.running_vars_[i] = (1 - BN_MOMENTUM) * self.running_vars_[i] + BN_MOMENTUM * var
        return self

    def predict_proba(self, X):
        """Class probabilities of shape (n, n_classes), BatchNorm in eval mode."""
        check_is_fitted(self)
        h = validate_data(self, X, dtype=np.float64, reset=False)
        bn = zip(self.bn_weights_, self.bn_biases_, self.running_means_, self.running_vars_)
        for W, b, (g, be, mu, var) in zip(self.coefs_, self.intercepts_, bn):
            h = g * (relu(dense(h, W, b)) - mu) / np.sqrt(var + BN_EPS) + be
        return softmax(dense(h, self.coefs_[-1], self.intercepts_[-1]))

    def predict(self, X):
        """The most probable class of each row (a label of ``classes_``)."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]
