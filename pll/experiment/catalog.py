"""What a user chooses from: the names of the methods, feature pipelines and noise models, with one line each,
and what a run takes when the user chooses nothing.

The command line lists and checks these names before anything heavy is
imported (its ``--help`` must answer at once); the registries that map a
name to code (:data:`pll.methods.METHODS`, :data:`pll.preprocessing.FEATURE_PIPELINES`,
:data:`pll.noise.NOISE_MODELS`, :data:`pll.data.PROTOCOLS`) hold the same
names, which ``tests/e2e/test_cli.py`` checks.  The kNN backends are listed in
:mod:`pll.neighbors.registry`, as light as this module.  The defaults below
are the only copy: the command line, the flows and the grid read them.
"""

from types import MappingProxyType

METHODS = {
    "pl_knn": "PL-kNN: distance-weighted candidate votes, Hellman's reject rule",
    "dst_pll": "DST-PLL: Yager-combined evidence of the neighbors' bags, belief/plausibility reject rule",
    "pl_aknn": "PL A-kNN: adaptive neighborhoods that widen until one label clearly leads",
    "ipal": "IPAL: label propagation over a reconstruction graph, then minimum-error reconstruction",
    "pl_classifier": "any scikit-learn classifier (parameter estimator) trained by cross-fitted disambiguation",
    "proden": "PRODEN: a neural network on every candidate, reweighted each epoch by its own probabilities",
    "crosel": "CroSel: two networks, each trained on the rows the other is confidently and stably sure of",
    "vi_pll": "VI-PLL: a Dirichlet posterior over two networks' logits, fitted against a CVAE p(x|y) and a prior",
    "soft_voting": "soft voting: the mean probabilities of several learners (default PRODEN and VI-PLL)",
}

FEATURE_PIPELINES = {
    "minmax": "scale each feature to [0, 1]",
    "standard": "zero mean, unit variance per feature",
    "pca": "standardize, keep the principal components explaining 95% of the variance",
    "pl_aknn_real": "PL A-kNN's preprocessing, real-world variant",
    "pl_aknn_vision": "PL A-kNN's preprocessing, vision variant",
}

NOISE_MODELS = {
    "uniform": "each row gets r wrong labels with probability p",
    "class_dependent": "wrong labels favour each class's random partner (Cour et al.)",
    "instance_dependent": "confusable labels join the bag more often (Zhang et al.)",
    "cluster_dependent": "per k-means cluster and label, a random chance to join the bag (PL A-kNN paper)",
    "remove_true_label": "drop the true label from a bag with probability nu",
}
# Noise choices that are no model: keep the bags, or pick by the data.
NOISE_CHOICES = ("auto", "none", *NOISE_MODELS)

PROTOCOLS = {
    "none": "use the data as loaded",
    "dst-pll": "prepare real-world data as the DST-PLL paper does",
}

PRESETS = {
    "paper_text": "the DST-PLL paper's text: uniform 3 labels on 70 % of rows, class-dependent adds the partner, "
    "eq. (1) risks, paired t-tests",
    "authors_code": "the DST-PLL authors' code: uniform 2 labels on 50 %, class-dependent with eps 0.7, their "
    "SGD-trained noise network, their plotting script's risks, unpaired t-tests",
}
"""Readings of the DST-PLL paper's protocol (``--preset``, a grid's ``preset``; :mod:`pll.experiment.presets`)."""
RISK_AGGREGATIONS = {
    "eq1": "R_lambda of eq. (1) per run, then its mean",
    "authors_script": "1 - mean covered accuracy + lambda * mean rejection rate at the authors' script's operating point",
}
TTESTS = {"paired": "paired by data set and seed (the paper's text)", "unpaired": "two-sample (the authors' script)"}
"""How ``pll report`` aggregates risks and tests differences (:mod:`pll.experiment.presets`)."""

DEFAULT_DATASET = "digits"
DEFAULT_PROTOCOL = "none"
DEFAULT_NOISE = "auto"
DEFAULT_FEATURES = "minmax"
DEFAULT_METHODS = ("pl_knn", "dst_pll", "pl_aknn")
"""What ``pll run`` runs: the three methods with a reject option of their own from the papers (the others on request)."""
DEFAULT_METHOD = "pl_knn"
"""What ``pll train`` fits."""
DEFAULT_METHOD_FEATURES = MappingProxyType({"pl_aknn": "pl_aknn_real"})
"""Methods that run on features of their own unless the caller says otherwise: PL A-kNN on its paper's preprocessing."""
DEFAULT_EXPERIMENT = "pll"
"""The MLflow experiment of runs, training and scoring."""
DEFAULT_GRID_EXPERIMENT = "pll-benchmark"
"""The MLflow experiment of a benchmark grid that names none."""
DEFAULT_CONFORMAL_ALPHA = 0.1
"""Miscoverage of the conformal prediction sets a run evaluates (``pll.reject.conformal``); None leaves the option out."""
STAGE_TASKS_MIN_ROWS = 10_000
"""From this many rows a pipeline run has a Prefect task per stage; below, one task runs the whole protocol.

On small data every stage takes milliseconds and a task costs more in
orchestration (about 50 ms each, some 30 per run) than it computes; above,
stages take seconds to hours and are worth caching, tracking and running in
parallel one by one."""
