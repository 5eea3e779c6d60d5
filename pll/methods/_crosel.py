"""CroSel (Tian et al., 2024): two networks, each trained on the pseudo labels the other is sure of."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..utils._random import seed_to_int
from ..utils.progress import blocks, track
from ._bag_weights import restricted
from ._cleaning import CLEANING_START, calibration_rows, calibration_scores, cleaned_bags
from ._network_base import REPORT_ROWS, NetworkClassifier, training_proba

LARGE_DATA_ROWS = 5000
"""From this many training rows ``batch_size="auto"`` takes 256 rows per step instead of 64."""
SMALL_BATCH, LARGE_BATCH = 64, 256
"""``batch_size="auto"``: the VI-PLL study's 64 rows below :data:`LARGE_DATA_ROWS` rows, the UAI study's 256 from there."""
HISTORY = 3
"""Epochs of each network's probabilities kept (the memory bank): the selection reads the last three."""
WARMUP_LEARNING_RATE = 1e-3
"""The warm-up's step size: PyTorch's Adam default, constant, without weight decay (the authors' warm-up)."""
MIN_SELECTED_SHARE = 0.05
"""The pseudo-label term is used only when more than this share of the rows is selected (the authors' rule)."""
SMALL_REMAINDER = 5
"""A last selected batch of at most this many rows is dropped when there are full batches (the authors' rule)."""
LOG_EPS = 1e-10
"""Added to probabilities before their logarithm, as the authors' losses do."""


def selection(history, bags, threshold):
    """CroSel's selection from a network's last three epochs of probabilities: (mask, pseudo labels), shape (n,) each.

    ``history``: a tensor (3, n, l), the probabilities of epochs ``t − 3``,
    ``t − 2``, ``t − 1`` in that order; ``bags``: a bool tensor (n, l).  A row
    is selected iff (1) a class of its bag reaches (within ``torch.isclose``)
    the top probability of epoch ``t − 1``, (2) the top class (the first of
    tied ones) is the same in all three epochs, and (3) the largest
    probability averaged over the three epochs exceeds ``threshold``.  Its
    pseudo label is the top class of epoch ``t − 1``.
    """
    import torch

    last = history[-1]
    top = last.max(dim=1, keepdim=True).values
    in_bag = (torch.isclose(last, top) & bags).any(dim=1)
    tops = history.argmax(dim=2)
    stable = (tops[0] == tops[1]) & (tops[1] == tops[2])
    sure = history.mean(dim=0).max(dim=1).values > threshold
    return in_bag & stable & sure, tops[2]


def step_loss(net, Z_batch, targets, lam, Z_selected=None, pseudo=None):
    """The loss one training step of CroSel minimises for ``net``, a torch scalar with its graph.

    ``lam · mean_i Σ_c targets_ic (−log(p_ic + 1e-10))`` over the batch
    ``Z_batch`` (``targets``: the bags, cleaned, times the other network's
    previous probabilities, renormalised unless cleaning is off), plus, with ``Z_selected``, the
    authors' cross-entropy of the selected rows' pseudo labels computed on
    the softmax probabilities (``nn.CrossEntropyLoss`` applied to them):
    ``mean_j −log softmax(p_j)_{ŷ_j}``.  Each part has its own forward pass in
    training mode (its own batch statistics), as in the authors' code.
    """
    import torch
    import torch.nn.functional as F

    P = torch.softmax(net.logits(Z_batch, train=True), dim=1)
    loss = lam * (targets * -torch.log(P + LOG_EPS)).sum(dim=1).mean()
    if Z_selected is not None:
        P_selected = torch.softmax(net.logits(Z_selected, train=True), dim=1)
        loss = F.cross_entropy(P_selected, pseudo) + loss
    return loss, P


def cc_loss(P, bags):
    """The warm-up's classifier-consistent loss ``mean_i −log(Σ_{c ∈ S_i} p_ic + 1e-10)`` (torch)."""
    import torch

    return -torch.log((bags * P).sum(dim=1) + LOG_EPS).mean()


class CroSel(NetworkClassifier):
    """CroSel: two networks that pick confident pseudo labels for each other from their recent epochs.

    Cross selection of confident pseudo labels (Tian, Li, Zhang, Wang, Liu,
    CVPR 2024).  Both networks first learn 10 epochs from whole bags with the
    classifier-consistent loss ``−log Σ_{c ∈ S_i} p_c(x_i)``.  Each keeps a
    memory bank: its probabilities of every training row over its last three
    epochs (taken as the row was trained, in training mode).  At the start of
    every later epoch each network's bank selects rows for the *other*
    network: a row whose top class (within ``torch.isclose``) lies in its
    bag, stayed the top class for three epochs, and whose largest probability
    averaged over the three epochs exceeds ``selection_threshold`` (0.9),
    with that top class as its pseudo label.  A network's step then
    minimises ``CE(selected batch, pseudo labels) + λ_d · mean_i Σ_c w_ic
    (−log p_ic)`` over a batch of all rows, with weights ``w = S ⊙`` the
    other network's probabilities of the previous epoch (not renormalised;
    with candidate cleaning, below, renormalised on a narrowed ``S``) and
    ``λ_d = (1 − selected share) · pll_weight``; the pseudo-label term is
    left out while 5 % of the rows or fewer are selected.  Prediction
    averages the two networks' probabilities.  An empty bag counts as all
    classes.

    The network and the training are those of the UAI 2025 study of Fuchs &
    Kalinke (arXiv:2502.07661), which re-implements the authors' setup:
    ``Linear → ReLU → BatchNorm`` hidden layers (here one of 300 units, the
    VI-PLL study's network for CroSel) on features scaled to [0, 1] on the
    training rows; the warm-up with Adam at 1e-3; then Adam with weight
    decay on a one-cycle schedule peaking at ``learning_rate``; minibatches
    of 64 rows as in the VI-PLL study (256 from 5,000 rows on, the UAI
    study's rule), 300 epochs after the warm-up.

    Candidate cleaning (``cleaning_alpha=0.05``) is the UAI 2025 study's
    conformal CroSel, its best method on bird-song
    (:mod:`pll.methods._cleaning`): from the 10th epoch after the warm-up,
    while the pseudo-label term is on, the partial-label term's weights are
    the other network's previous probabilities on the bag narrowed to the two
    networks' conformal set, renormalised.  It is off by default because it
    helps some data and hurts other.  Test accuracy with it against without
    (``benchmarks/proden.py --method crosel --params '{"cleaning_alpha":
    0.05}'``; bird-song / msrc-v2 / lost, lost a real-world set the project
    does not ship):

    * the VI-PLL study's protocol (5 stratified folds, ``--protocol vi-pll``):
      74.6 / 55.1 / 74.4 % against 74.1 / 52.1 / 75.8 %; that study reports
      75.5 / 52.3 / 72.9 % for its CroSel;
    * the UAI study's protocol (80/20, 5 seeds, ``--protocol uai-2025``):
      75.9 / 56.2 / 76.6 % against 75.2 / 54.2 / 77.0 %; that study reports
      77.8 / 54.1 / 81.2 % for its conformal CroSel and 75.1 / 52.2 / 81.2 %
      for its CroSel;
    * the data as loaded (80/20, 5 seeds): 74.8 / 54.8 % against 74.6 / 52.4 %
      on bird-song and msrc-v2;
    * the UCI grid (ecoli, flare, mfeat-fourier, semeion with its
      class-dependent noise): 83.8 / 71.0 / 79.9 / 94.0 % against 84.7 /
      73.4 / 80.5 / 94.0 %; flare with uniform noise (3 seeds) 70.4 against
      71.1 %, with instance-dependent noise 72.9 against 72.7 %.

    A fit took 60 to 120 s on bird-song and 20 to 30 s on msrc-v2 on one
    thread of two cores shared with other work.  The UAI study's 16 rows a
    step with 100 epochs (no cleaning) reached 71.9, 48.4 and 79.4 % under
    its protocol; 32 rows with 200 epochs 51.7 % on msrc-v2 and 77.2 % on
    lost; three hidden layers of 300 units 50.1 % on msrc-v2 at 3.5 times the
    cost.  Each network selecting for itself, as the study's code does
    (below), with cleaning: 76.4 / 56.0 / 75.3 % under the UAI protocol.

    Where this differs from the re-implementation, on purpose:

    * *The selection crosses.*  In that code each network, after the
      warm-up, writes its probabilities into the bank that it itself
      selects from, so that from the fourth epoch on each network selects
      its own pseudo labels and weights; here each network's bank holds its
      own probabilities and feeds the other network, as the paper
      describes, and ``λ_d`` uses the share of rows selected *for* the
      network (the code took the other network's).
    * *Two initialisations.*  The code deep-copies one network, so both
      start from the same weights and differ only by the order of the rows;
      here each has its own seed.
    * *Fewer epochs.*  1,001 epochs (VI-PLL, constant step size) cost too
      much on a CPU; 300 on the UAI study's one-cycle schedule reach the
      published accuracy, and ``max_steps`` caps them on large data.  The
      order of the banks (first item) and the cross-entropy on logits
      instead of probabilities made no difference beyond the folds' spread
      on msrc-v2 (48.6 and 47.8 % against 48.4 %, 16 rows a step).
    * *Every row every epoch.*  Rows go to ``n // batch_size`` batches of
      nearly equal size, so every row's bank entry is refreshed each epoch;
      the selected rows are cycled in one shuffled order per epoch.

    Kept as in the code, although odd: the pseudo-label cross-entropy is
    applied to the softmax *probabilities* (``nn.CrossEntropyLoss`` on the
    network's first output), which bounds it and softens its pull; without
    cleaning the weights of the partial-label term are not renormalised
    (with it they are, as in the study's conformal CroSel); the bank holds
    training-mode probabilities; each network's warm-up optimiser is
    discarded and a fresh one starts the main phase.

    Its reject option is shared with :class:`pll.Proden`: accept iff the top
    probability is ``>= threshold``; reasons ``conflict`` (the runner-up
    within ``conflict_margin``) or ``low_score``.  :meth:`disambiguate`
    reads ``weights_``: the two networks' probabilities of the last epoch,
    averaged and restricted to the bag (the study's disambiguation).  It
    needs no neighbors (the ``neighbors`` arguments are accepted and ignored).

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(300,)
        Units of each hidden layer.
    alpha : float >= 0, default=1e-4
        Weight decay of the main phase: an L2 penalty added to the gradient.
    learning_rate : float > 0, default=1e-2
        The peak of the main phase's one-cycle step size.
    batch_size : int >= 2 or "auto", default="auto"
        Rows per step (all rows and the selected rows alike); ``"auto"``: 64
        below 5,000 training rows, 256 from there.  Fewer rows a step moved
        bird-song and msrc-v2 down and lost up (see above).
    max_epochs : int, default=300
        Epochs after the warm-up (bird-song: 62 steps an epoch, so 300 fit
        within ``max_steps``).
    warmup_epochs : int >= 3, default=10
        Epochs of the classifier-consistent warm-up (the selection needs three).
    max_steps : int, default=20000
        Fewer epochs where the warm-up and ``max_epochs`` would take more
        gradient steps per network: the epochs are cut to ``max_steps //
        steps_per_epoch`` (at least 4), of which the warm-up keeps
        ``min(warmup_epochs, max(3, half))``.  At 1,000,000 rows (3,906 steps
        an epoch) that is 3 warm-up epochs and 2 more.
    selection_threshold : float in (0, 1), default=0.9
        A row is selected when its largest probability, averaged over three
        epochs, exceeds this.
    pll_weight : float >= 0, default=2.0
        ``λ_cr``: the partial-label term's weight when no row is selected.
    cleaning_alpha : float in (0, 1) or None, default=None
        Candidate cleaning at this level, as the UAI 2025 study's conformal
        CroSel (:mod:`pll.methods._cleaning`): the partial-label term's
        weights become the other network's previous probabilities on the
        bag narrowed to the two networks' conformal set, renormalised, from
        the 10th epoch after the warm-up while the pseudo-label term is on;
        the study scores the batch in training mode, here in inference mode.
        None: no cleaning (and the weights not renormalised).
    threshold : float in [0, 1], default=0.9
        Accept iff the top probability is ``>= threshold``.
    conflict_margin : float in [0, 1], default=0.2
        ``conflict`` when the runner-up's probability is within this margin.
    device : str, default="cpu"
        ``"cpu"``, ``"cuda"`` (or ``"cuda:N"``), or ``"auto"``.  On the CPU a
        fit runs on one thread and is deterministic for its ``random_state``;
        prediction runs on the CPU in float64.
    random_state : int or None, default=None
        Seed of the networks' initial weights and of the rows' order.

    Attributes
    ----------
    classes_ : ndarray of shape (l,)
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (d,)
        Only when ``X`` was a data frame with string column names.
    S_train_ : ndarray of shape (n, l), bool
        The candidate sets over ``classes_`` (empty bags stay empty here).
    offset_, scale_ : ndarray of shape (d,)
        The network's input is ``(X - offset_) / scale_`` (min-max; a
        constant feature has scale 1).
    networks_ : list of two Perceptron
    weights_ : ndarray of shape (n, l), float64
        The networks' last-epoch probabilities, averaged and restricted to
        each row's bag.
    n_warmup_epochs_, n_epochs_ : int
        Warm-up epochs and epochs after it that each network ran.
    selected_shares_ : ndarray of shape (2, n_epochs_)
        Share of the rows selected for each network at each epoch after the
        warm-up.

    Notes
    -----
    Time is two networks × (warm-up + 2 × later epochs) passes over the
    rows (after the warm-up a step has two forward and backward passes: the
    batch of all rows and the selected batch).  Memory: ``X`` scaled
    (float32), the two memory banks (``2 × 3 × n × l`` float32: 480 MB at
    1,000,000 rows and 20 classes) and one minibatch's activations.

    Examples
    --------
    >>> import numpy as np, pll
    >>> from pll import CroSel
    >>> X = np.array([[0.0], [0.2], [0.4], [0.6], [1.0], [1.2], [1.4], [1.6]])
    >>> S = [{"a", "b"}, {"a"}, {"a", "c"}, {"a"}, {"b", "c"}, {"c"}, {"c"}, {"a", "c"}]
    >>> clf = CroSel(max_epochs=30, random_state=0).fit(X, S)
    >>> clf.classes_.tolist(), clf.predict([[0.1], [1.5]]).tolist()
    (['a', 'b', 'c'], ['a', 'c'])
    >>> r = clf.predict_with_reject([[0.1], [1.5]])
    >>> bool(((r.score >= clf.threshold) == r.accept).all())
    True
    """

    _parameter_constraints = {
        "hidden_layer_sizes": [tuple, list],  # of positive ints: _validate_params
        "alpha": [Interval(Real, 0, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 2, None, closed="left"), StrOptions({"auto"})],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "warmup_epochs": [Interval(Integral, HISTORY, None, closed="left")],
        "max_steps": [Interval(Integral, 1, None, closed="left")],
        "selection_threshold": [Interval(Real, 0, 1, closed="neither")],
        "pll_weight": [Interval(Real, 0, None, closed="left")],
        "cleaning_alpha": [Interval(Real, 0, 1, closed="neither"), None],
        "threshold": [Interval(Real, 0, 1, closed="both")],
        "conflict_margin": [Interval(Real, 0, 1, closed="both")],
        "device": [str],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
    }

    _crossed = True
    """Each network learns from the other's bank; False: from its own (what the re-implementation's bank order
    amounts to after three epochs), for comparisons only."""

    def __init__(
        self,
        hidden_layer_sizes=(300,),
        *,
        alpha=1e-4,
        learning_rate=1e-2,
        batch_size="auto",
        max_epochs=300,
        warmup_epochs=10,
        max_steps=20_000,
        selection_threshold=0.9,
        pll_weight=2.0,
        cleaning_alpha=None,
        threshold=0.9,
        conflict_margin=0.2,
        device="cpu",
        random_state=None,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.alpha = alpha
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.warmup_epochs = warmup_epochs
        self.max_steps = max_steps
        self.selection_threshold = selection_threshold
        self.pll_weight = pll_weight
        self.cleaning_alpha = cleaning_alpha
        self.threshold = threshold
        self.conflict_margin = conflict_margin
        self.device = device
        self.random_state = random_state

    def fit(self, X, S, neighbors=None):
        """Warm both networks up on the bags, then train each on the other's selection.

        Parameters
        ----------
        X : array-like of shape (n, d)
        S : candidate sets of the n rows
            A 0/1 or bool matrix of shape (n, l), dense or scipy sparse; a
            sequence of n label sets; or 1-d labels of shape (n,).
        neighbors : NeighborResult, optional
            Ignored.

        Returns
        -------
        self
        """
        nets, device, X, bags = self._start_fit(X, S)
        n, Z = X.shape[0], self._scaled(X)
        with nets.cpu_settings(1):  # as Proden: deterministic on the CPU, and faster for small batches
            self.networks_, last, self.selected_shares_ = self._train(nets, Z, bags, device, seed_to_int(self.random_state))
        self.n_warmup_epochs_ = self._epochs(n)[0]
        self.weights_ = restricted(last, bags)
        self.n_epochs_ = self.selected_shares_.shape[1]
        return self

    def _batch(self, n):
        """Rows per step: ``batch_size``, or for ``"auto"`` 64 below :data:`LARGE_DATA_ROWS` rows and 256 from there."""
        if self.batch_size == "auto":
            return SMALL_BATCH if n < LARGE_DATA_ROWS else LARGE_BATCH
        return self.batch_size

    def _steps_per_epoch(self, n):
        return max(1, n // self._batch(n))

    def _epochs(self, n):
        """(warm-up epochs, epochs after it) per network, cut by ``max_steps``; (0, 0) for one class."""
        if self.n_classes_ == 1:  # every row's one label is certain: nothing to learn
            return 0, 0
        budget = max(HISTORY + 1, self.max_steps // self._steps_per_epoch(n))
        warmup = min(self.warmup_epochs, max(HISTORY, budget // 2))
        return warmup, max(1, min(self.max_epochs, budget - warmup))

    def _train(self, nets, Z, bags, device, seed):
        """Both networks' warm-up, then the crossed epochs; (networks, last-epoch mean probabilities, selected shares)."""
        import torch

        n, l = bags.shape
        warmup, epochs = self._epochs(n)
        n_steps = self._steps_per_epoch(n)
        batch = self._batch(n)
        rngs = [np.random.default_rng([seed, k]) for k in range(2)]
        nets_ = [nets.Perceptron(Z.shape[1], l, tuple(self.hidden_layer_sizes), rngs[k], device) for k in range(2)]
        if warmup == 0:
            return nets_, bags / bags.sum(axis=1, keepdims=True), np.zeros((2, 0))
        Z_device = nets.as_tensor(Z, device)
        bags_device = torch.as_tensor(bags, device=device)
        bags_float = bags_device.to(torch.float32)
        banks = [torch.zeros((HISTORY, n, l), dtype=torch.float32, device=device) for _ in range(2)]
        edges = np.linspace(0, n, n_steps + 1).astype(np.int64)
        # Stages, each one pass over the rows: network 0's warm-up, network 1's, then per epoch network 0, network 1.
        stages = [(k, e) for k in range(2) for e in range(warmup)] + [
            (k, warmup + e) for e in range(epochs) for k in range(2)]
        parts = [slice(s * n + b.start, s * n + b.stop) for s in range(len(stages)) for b in blocks(n, REPORT_ROWS)]
        shares = np.zeros((2, epochs))
        optimisers = [None, None]
        calibration, scores = (None if self.cleaning_alpha is None else calibration_rows(bags, seed)), None
        what = f"CroSel 2 networks (rows x {warmup} warm-up and {epochs} epochs each)"
        for part in track(parts, what):
            stage, first = divmod(part.start, n)
            k, t = stages[stage]
            net, bank = nets_[k], banks[k]
            other = banks[1 - k] if self._crossed else bank
            if first == 0:
                order = rngs[k].permutation(n)
                order_device = torch.from_numpy(order).to(device)
                if t == 0:  # the warm-up's Adam: no weight decay; the main phase starts a fresh one
                    optimisers[k] = nets.Adam(net, 0.0)
                elif t == warmup:
                    optimisers[k] = nets.Adam(net, self.alpha)
                optimiser = optimisers[k]
                if t >= warmup:
                    if k == 0:  # both selections from the banks as they stand before this epoch
                        chosen = [self._selected(banks[1 - j if self._crossed else j], bags_device, t) for j in range(2)]
                        if calibration is not None and t - warmup >= CLEANING_START:
                            scores = calibration_scores(training_proba(nets_, Z[calibration]), bags[calibration])
                    mask, pseudo = chosen[k]
                    count = int(mask.sum())
                    shares[k, t - warmup] = count / n
                    lam = (1.0 - count / n) * self.pll_weight
                    selected, sel_batches = self._selected_batches(mask, rngs[k], batch, device)
                    previous = other[(t - 1) % HISTORY]
            last = part.stop - stage * n
            for b in range(np.searchsorted(edges[:-1], first), np.searchsorted(edges[:-1], last)):
                rows = order_device[edges[b]:edges[b + 1]]
                Zb = Z_device.index_select(0, rows)
                if t < warmup:
                    P = torch.softmax(net.logits(Zb, train=True), dim=1)
                    loss = cc_loss(P, bags_float.index_select(0, rows))
                    lr = WARMUP_LEARNING_RATE
                    beta1 = 0.9
                else:
                    earlier, bag = previous.index_select(0, rows), bags_float.index_select(0, rows)
                    if calibration is None:
                        targets = bag * earlier
                    else:  # cleaning: only while the pseudo-label term is on (the study's rule)
                        on = sel_batches and scores is not None
                        cleaning = (scores, bags[order[edges[b]:edges[b + 1]]]) if on else None
                        targets = self._cleaned_targets(nets_, Zb, earlier, bag, cleaning, t - warmup)
                    if sel_batches:
                        sel = selected[sel_batches[b % len(sel_batches)]]
                        loss, P = step_loss(net, Zb, targets, lam, Z_device.index_select(0, sel),
                                            pseudo.index_select(0, sel))
                    else:
                        loss, P = step_loss(net, Zb, targets, lam)
                    lr, beta1 = nets.one_cycle((t - warmup) * n_steps + b, epochs * n_steps, self.learning_rate)
                net.zero_grad()
                loss.backward()
                optimiser.step(lr, beta1)
                bank[t % HISTORY].index_copy_(0, rows, P.detach())
        last_probs = 0.5 * (banks[0][(warmup + epochs - 1) % HISTORY] + banks[1][(warmup + epochs - 1) % HISTORY])
        return nets_, last_probs.cpu().numpy().astype(np.float64), shares

    def _cleaned_targets(self, nets_, Zb, previous, bag, cleaning, epoch):
        """A batch's targets with candidate cleaning: the other network's previous probabilities on the cleaned bags.

        As the study's conformal CroSel: ``bag`` (float, on the device)
        narrowed by :func:`cleaned_bags` on the two networks' mean
        probabilities of the batch (here in inference mode), given
        ``cleaning = (scores, the batch's bool bags)`` once the pseudo-label
        term is on and from the 10th epoch after the warm-up (None: not
        yet); each row's targets renormalised to sum 1, a row whose targets
        vanish getting ``(previous + 0.001)`` on its whole bag.
        """
        import torch

        kept = bag
        if cleaning is not None:
            scores, batch_bags = cleaning
            with torch.no_grad():
                P = 0.5 * sum(torch.softmax(net.logits(Zb), dim=1) for net in nets_)
            allowed = cleaned_bags(P.cpu().numpy(), batch_bags, scores, self.cleaning_alpha, epoch)
            kept = torch.as_tensor(allowed, dtype=bag.dtype, device=bag.device)
        targets = previous * kept
        vanished = targets.sum(dim=1, keepdim=True) <= LOG_EPS
        targets = torch.where(vanished, (previous + 1e-3) * bag, targets)
        return targets / targets.sum(dim=1, keepdim=True)

    def _selected(self, bank, bags, t):
        """(mask, pseudo labels) from a bank at the start of epoch ``t``: its epochs ``t − 3 .. t − 1`` in order."""
        import torch

        history = bank[torch.tensor([(t - j) % HISTORY for j in range(HISTORY, 0, -1)], device=bank.device)]
        return selection(history, bags, self.selection_threshold)

    def _selected_batches(self, mask, rng, batch, device):
        """The selected rows shuffled (a tensor) and their batches (slices), empty when the pseudo-label term is off.

        Off while at most 5 % of the rows or fewer than 2 are selected (the
        authors' rule).  Batches of ``batch`` rows; a last batch of at most 5
        rows is dropped when there is a full one (batch statistics need rows).
        """
        import torch

        rows = np.flatnonzero(mask.cpu().numpy())
        if rows.size < 2 or rows.size / mask.shape[0] <= MIN_SELECTED_SHARE:
            return None, []
        rows = rng.permutation(rows)
        cuts = [slice(s, min(s + batch, rows.size)) for s in range(0, rows.size, batch)]
        if len(cuts) > 1 and cuts[-1].stop - cuts[-1].start <= SMALL_REMAINDER:
            cuts.pop()
        return torch.from_numpy(rows).to(device), cuts

    def _proba(self, X):
        """The two networks' mean probabilities for checked ``X``, block by block, rows summing to 1 in float64."""
        return self._mean_proba(X)

    def fit_summary(self):
        """How the training ended, for a run's log: epochs, warm-up epochs, the last epoch's mean selected share."""
        self._check_fitted()
        share = float(self.selected_shares_[:, -1].mean()) if self.n_epochs_ else 0.0
        return {"epochs": self.n_epochs_, "warmup_epochs": self.n_warmup_epochs_, "networks": 2,
                "selected_share": share}
