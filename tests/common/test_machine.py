"""release_free_memory: pages a finished phase freed go back to the OS under the CPU environments' tunables."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from depthprune.common.machine import device_memory, local_workers
from depthprune.scoring.scorer import _default_cache_bytes

SCRIPT = """
import torch
from depthprune.common.machine import release_free_memory

def rss_mb():
    with open("/proc/self/status") as fh:
        return int(next(line for line in fh if line.startswith("VmRSS")).split()[1]) // 1024

x = torch.ones(256, 1 << 20)  # 1 GiB: from the heap, as mmap_max=0 allows no mapping of its own
del x
held = rss_mb()
ok = release_free_memory()
print(held, rss_mb(), ok)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim; elsewhere it is a no-op")
def test_release_free_memory_hands_freed_heap_pages_back():
    env = {**os.environ, "GLIBC_TUNABLES": "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    held, after, ok = out.stdout.split()
    assert ok == "True", out.stdout
    assert int(held) - int(after) > 800, out.stdout  # the freed GiB stayed resident until the trim


def test_a_cpu_cache_budget_is_split_among_the_local_workers(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    assert local_workers() == 1 and _default_cache_bytes(cpu) == int(device_memory(cpu) * 0.25)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    assert local_workers() == 4 and _default_cache_bytes(cpu) == int(device_memory(cpu) * 0.25 / 4)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "many")
    assert local_workers() == 1
