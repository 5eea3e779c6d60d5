"""Checks of an estimator's parameters that a layer above :mod:`pll.utils` adds to
:func:`pll.utils.validation.check_params`.

The validation layer imports nothing of the library above it; a check that needs a
higher layer (the kNN backends of :mod:`pll.neighbors.registry`) is added here by
that layer when it is imported.  Only the standard library is imported here, so
that adding a check costs the adding module nothing (the registry loads for
``pll --help`` without numpy).
"""

PARAMETER_CHECKS = {}
"""Parameter name -> ``check(params)``, called by :func:`~pll.utils.validation.check_params`."""


def add_parameter_check(parameter, check):
    """Have :func:`~pll.utils.validation.check_params` call ``check(params)`` for every estimator with ``parameter``.

    ``params`` is the estimator's ``get_params(deep=False)``; an
    :class:`~pll.errors.InvalidParameterError` from ``check`` comes back
    prefixed with the estimator's class name.
    """
    PARAMETER_CHECKS[parameter] = check
