"""Partial-label noise models: candidate bags made from true labels, for benchmark data.

Uniform, class-dependent (Cour et al.), instance-dependent (Zhang et al., with the DST-PLL
authors' noise network), cluster-dependent (PL A-kNN paper) and the removal of true labels;
:func:`apply_noise` applies one by name with checked parameters. 
"""

from ._models import (
    NOISE_CLASSIFIERS,
    NOISE_MODELS,
    apply_noise,
    authors_noise_classifier,
    check_noise,
    check_noise_applies,
    class_dependent,
    class_probabilities,
    cluster_alpha,
    cluster_assignments,
    cluster_bags,
    cluster_dependent,
    default_noise_classifier,
    describe_noise,
    instance_dependent,
    instance_flip_probabilities,
    noise_parameters,
    partner_classes,
    remove_true_label,
    uniform,
)

__all__ = [
    "NOISE_CLASSIFIERS",
    "NOISE_MODELS",
    "apply_noise",
    "authors_noise_classifier",
    "check_noise",
    "check_noise_applies",
    "class_dependent",
    "class_probabilities",
    "cluster_alpha",
    "cluster_assignments",
    "cluster_bags",
    "cluster_dependent",
    "default_noise_classifier",
    "describe_noise",
    "instance_dependent",
    "instance_flip_probabilities",
    "noise_parameters",
    "partner_classes",
    "remove_true_label",
    "uniform",
]
