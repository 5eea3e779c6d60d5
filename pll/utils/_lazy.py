"""Package attributes imported on first use (PEP 562).

``import pll.errors`` or the command line's ``--help`` should not pay for
scikit-learn, scipy and numba; a package lists its public names and the
modules that define them, and each is imported when first read.
"""

from importlib import import_module


def lazy_attributes(package, table):
    """``(__getattr__, __dir__)`` for ``package`` (its ``__name__``) from ``table``: name -> module.

    A module path is relative to ``package`` when it starts with a dot; a
    name that is the module itself (``"noise": ".noise"``) yields the module.
    """

    def __getattr__(name):
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = import_module(table[name], package)
        value = module if module.__name__.rpartition(".")[2] == name else getattr(module, name)
        setattr(import_module(package), name, value)
        return value

    def __dir__():
        return sorted(set(vars(import_module(package))) | set(table))

    return __getattr__, __dir__
