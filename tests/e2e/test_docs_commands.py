"""The shell blocks of README.md and docs/ that are not marked skip, run as written from the repository root.

They are cheap ``pll`` commands (tests/unit/test_docs.py refuses any other unmarked block); each must exit 0,
print something, and print no traceback.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_blocks import ROOT, all_blocks, shell_commands

BIN = Path(sys.executable).parent
COMMANDS = [(block, command) for block in all_blocks() if block.lang == "sh" and block.skip is None
            for command in shell_commands(block)]


@pytest.mark.parametrize(("block", "command"), COMMANDS, ids=[f"{b}:{c}" for b, c in COMMANDS])
def test_documented_command_runs(block, command):
    # `.venv/bin/pll` as the pages write it, from the environment the tests run in.
    argv = command.replace(".venv/bin/", f"{BIN}/", 1) if command.startswith(".venv/bin/") else command
    out = subprocess.run(["bash", "-c", argv], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"})
    assert out.returncode == 0, f"{block}: {command}\n{out.stderr}"
    assert out.stdout.strip(), f"{block}: {command} printed nothing"
    assert "Traceback" not in out.stdout + out.stderr
