"""``pll``'s allocator thresholds (flows/memory.py): blocks a run frees go back to the system."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A process that frees one 16 MiB array (glibc then serves blocks below 16 MiB from its heaps), then
# allocates a hundred 4 MiB blocks, each followed by a small object that stays, and frees the blocks.
# It prints how many MiB of resident memory the freed blocks leave behind.
FREED_BLOCKS = """
import sys
import numpy as np
from flows.memory import return_freed_memory

def resident_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

if sys.argv[1] == "pll":
    assert return_freed_memory()
big = np.ones(2 << 20)
del big
before = resident_mib()
blocks, kept = [], []
for _ in range(100):
    blocks.append(np.ones(1 << 19))
    kept.append(bytearray(4096))
del blocks
print(resident_mib() - before)
"""


def left_behind(mode, **env):
    # Without the thresholds others set (distributed sets MALLOC_TRIM_THRESHOLD_ for its workers in os.environ).
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", FREED_BLOCKS, mode], cwd=ROOT, capture_output=True, text=True,
                          env={**inherited, "PYTHONPATH": str(ROOT), **env}, check=True)
    return float(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_blocks_return_to_the_system_unless_the_user_set_the_threshold():
    assert left_behind("default") >= 300  # glibc's own thresholds keep them: what a long run piled up
    assert left_behind("pll") <= 20
    # A threshold the user set at start-up is theirs: pll leaves it alone.
    assert left_behind("pll", MALLOC_MMAP_THRESHOLD_=str(32 << 20)) >= 300
