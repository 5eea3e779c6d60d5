"""The validation layer's checks of evaluated arrays, and its parameter checks added from above (pll.utils.validation)."""

import subprocess
import sys

import numpy as np
import pytest

from pll.errors import InvalidDataError, InvalidParameterError
from pll.evaluation.metric_names import risk_name
from pll.utils.validation import (
    check_labels,
    check_lambdas,
    check_mask,
    check_nonempty,
    check_scores,
    check_vector,
)


def test_check_lambdas_refuses_exactly_what_metric_names_would_merge():
    assert check_lambdas((0, 0.1)) == [0.0, 0.1]
    assert check_lambdas(np.array([[0.2]])) == [0.2]
    for lambdas in ([0.1, 0.101], [0.05, 0.054], [0.1, 0.12], [0.004, 0.0]):
        merged = len({risk_name(lam) for lam in lambdas}) < len(lambdas)
        if merged:
            with pytest.raises(InvalidParameterError, match=r"coincide at two decimals$"):
                check_lambdas(lambdas)
        else:
            assert check_lambdas(lambdas) == [float(lam) for lam in lambdas]
    with pytest.raises(InvalidParameterError, match=r"^lambdas must be numbers, got \['a'\]$"):
        check_lambdas(["a"])
    for bad in ([], [-0.1], [np.nan], [np.inf]):
        with pytest.raises(InvalidParameterError, match=r"^lambdas must be finite numbers >= 0, got "):
            check_lambdas(bad)


def test_checks_of_evaluated_arrays_name_what_is_wrong():
    with pytest.raises(InvalidDataError, match=r"^labels must be a 1-d array, got shape \(1, 2\)$"):
        check_vector([[0, 1]], "labels")
    with pytest.raises(InvalidDataError, match=r"^lengths differ: accept has 2 rows, expected 3$"):
        check_vector([True, False], "accept", 3)
    assert check_labels([0.0, 2.0], "labels", 2, 3).dtype == np.int64
    with pytest.raises(InvalidDataError, match=r"^labels must hold integer class indices, got dtype float64$"):
        check_labels([0.5], "labels")
    with pytest.raises(InvalidDataError, match=r"^y_true\[1\] = 3 is not a class index \[0, 3\)$"):
        check_labels([0, 3], "y_true", n_classes=3)
    with pytest.raises(InvalidDataError, match=r"^labels\[0\] = -1 is not a class index >= 0$"):
        check_labels([-1], "labels")
    with pytest.raises(InvalidDataError, match=r"^accept must be a boolean array, got dtype int64$"):
        check_mask(np.array([1, 0]), "accept", 2)
    assert check_scores([1, 2], "score").dtype == np.float64
    with pytest.raises(InvalidDataError, match=r"^score\[1\] = nan is not a finite score$"):
        check_scores([0.0, np.nan], "score")
    check_nonempty(1)
    with pytest.raises(InvalidDataError, match=r"^no rows to evaluate$"):
        check_nonempty(0)


def test_an_estimators_knn_backend_is_checked_by_check_params():
    """The registry adds its check to check_params (the validation layer does not import it)."""
    from pll.methods import PlKnn
    from pll.reject.trust_score import TrustScore
    from pll.utils.validation import check_params

    check_params(PlKnn(knn="exact"))
    with pytest.raises(InvalidParameterError, match=r"^PlKnn: unknown kNN backend 'faiss': choose one of "):
        check_params(PlKnn(knn="faiss"))
    with pytest.raises(InvalidParameterError, match=r"^TrustScore: kNN backend 'exact' has no option 'n_trees'"):
        check_params(TrustScore(knn="exact", knn_options={"n_trees": 3}))


def test_the_validation_layer_loads_nothing_of_the_library_above_it():
    script = (
        "import sys, pll.utils.validation\n"
        "print(sorted(m for m in sys.modules if m.startswith('pll.') and not m.startswith(('pll.utils', 'pll.errors'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
