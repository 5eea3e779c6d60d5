"""Without the deep extra, a deep learner fails in one line that names the extra; with it, a bad device is refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

WITHOUT_TORCH = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):  # as if the deep extra were not installed
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoTorch())
"""
DATA = "import numpy as np, pll\nX, y = np.random.default_rng(0).random((30, 3)), np.arange(30) % 3\n"


@pytest.mark.parametrize("call, name", [
    ("pll.Proden().fit(X, y)", "Proden"),
    ("pll.CroSel().fit(X, y)", "CroSel"),
    ("pll.ViPll().fit(X, y)", "ViPll"),
    ("pll.SoftVoting().fit(X, y)", "Proden"),  # the first member that needs it
    ("from pll.noise._network import SquaredLossMLP; SquaredLossMLP().fit(X, y)", "SquaredLossMLP"),
    ("pll.audit.audit_bags(X, np.eye(3, dtype=bool)[y], n_neighbors=3)", "Proden"),
])
def test_a_deep_learner_without_pytorch_names_the_extra_in_one_line(call, name):
    done = subprocess.run([sys.executable, "-c", WITHOUT_TORCH + DATA + call], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"pll.errors.MissingExtraError: {name} needs the 'deep' extra (PyTorch): pip install 'pll-reject[deep]'"
    )


def test_importing_pll_and_its_deep_learners_does_not_import_pytorch():
    """``import torch`` costs two seconds; a command that fits no network does not pay for it."""
    code = ("import sys, pll, pll.noise._network, pll.audit; pll.Proden, pll.CroSel, pll.ViPll, pll.SoftVoting(); "
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
