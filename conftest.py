"""Repository-wide pytest configuration: thread count, the kind of every test (tests/kinds.py).

Torch uses at most 2 threads so results and timings are comparable between the
2-core CI machine and a laptop; set DEPTHPRUNE_THREADS to change that.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach for the Hub
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.hookimpl(tryfirst=True)  # before bench/conftest.py's share of the cores per xdist worker
def pytest_configure(config):
    """Torch's threads, set here and not when this file is imported: tests/test_kinds.py loads this file into a
    stand-in repository's run inside a worker, and an import-time setting left that worker at 2 threads."""
    torch.set_num_threads(int(os.environ.get("DEPTHPRUNE_THREADS", "2")))


def pytest_report_header(config):
    """The kernels this run's numbers come from (a capped run says so: depthprune.model.precision.CAP_VARIABLES), and
    their fingerprint at the session's thread count (depthprune.model.kernel_identity): the class of machine a log proves."""
    from depthprune.model.kernel_identity import fingerprint
    from depthprune.model.precision import cap_prefix, cpu_kernels

    k, f = cpu_kernels(), fingerprint()
    caps = cap_prefix().strip() or "no caps"
    return [f"depthprune kernels: ATen {k.capability}, bf16 matmul {k.bf16_matmul_kernel}, "
            f"float32 matmul MKL {k.fp32_matmul_isa}; AMX tiles {k.amx_tile}, AVX512-BF16 {k.avx512_bf16}; {caps}",
            f"depthprune kernel fingerprint at {f['threads']} torch threads: float32 {f['float32']}, "
            f"bfloat16 {f['bfloat16']}"]


ROOT = Path(__file__).resolve().parent


class _Unlisted(pytest.File):
    """A test file the kind table does not list: collecting it fails with the reason."""

    reason = ""

    def collect(self):
        raise self.CollectError(self.reason)


def pytest_collect_file(file_path, parent):
    from tests.kinds import unlisted

    reason = unlisted(file_path, ROOT, parent.config.getini("python_files"))
    if reason:
        node = _Unlisted.from_parent(parent, path=file_path)
        node.reason = reason
        return node
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Mark every test with its kind (unit, integration, docs, grid, benchmark, property) from the one table,
    tests/kinds.py: ``pytest -m unit`` is the inner loop. Markers select; none deselects by default. A wrapper:
    the kinds are marked before any other hook reads them (pytest's ``-m``), and the tests are ordered by kind,
    longest kinds first, after every other hook has selected and ordered them (bench/conftest.py's grid cells)."""
    from tests.kinds import longest_kinds_first, mark_kinds

    mark_kinds(items, ROOT)
    yield
    longest_kinds_first(items)


#: torch's thread count for every test of this process: what the configuration settled on before the first
#: test (this file's DEPTHPRUNE_THREADS, then bench/conftest.py's share of the cores per xdist worker)
_THREADS: list[int] = []


@pytest.fixture(autouse=True)
def _torch_threads_kept():
    """Every test starts at the session's thread count and must leave it there. A .ci/run on AMX (8e110eb) ran
    two grid cells in one worker at 2 threads beside the other worker's 1 (their results say torch_threads 2):
    the cores oversubscribed, and tiny-llama3 ppl bi M3 took 105 s where it had taken 19.5 s at 1 thread. The
    leaker, found by this check in the next .ci/run: tests/test_kinds.py's stand-in run, which imported this file."""
    if not _THREADS:
        _THREADS.append(torch.get_num_threads())
    want = _THREADS[0]
    if torch.get_num_threads() != want:
        torch.set_num_threads(want)
    yield
    after = torch.get_num_threads()
    if after != want:
        torch.set_num_threads(want)
        pytest.fail(f"this test left torch at {after} threads (it started at {want}): restore them", pytrace=False)
