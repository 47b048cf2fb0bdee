"""Repository-wide pytest configuration: markers, thread count, grid options.

Torch uses at most 2 threads so results and timings are comparable between the
2-core CI machine and a laptop; set DEPTHPRUNE_THREADS to change that.
"""

from __future__ import annotations

import os

import torch

torch.set_num_threads(int(os.environ.get("DEPTHPRUNE_THREADS", "2")))
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach for the Hub
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_report_header(config):
    """The kernels this run's numbers come from (a capped run says so: ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY)."""
    from depthprune.precision import cpu_kernels

    k = cpu_kernels()
    return (f"depthprune kernels: ATen {k.capability}, bf16 matmul {k.bf16_matmul_kernel}, "
            f"ONEDNN_MAX_CPU_ISA={k.onednn_max_cpu_isa}, ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY')}")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skips without one)")
    config.addinivalue_line("markers", "slow: long-running (full grid cells, exhaustive ground truth)")
    config.addinivalue_line("markers", "tiny: runs on the shipped tiny model family (CPU)")
    config.addinivalue_line("markers", "rehearsal: a paper cell on stand-ins (bench/test_rehearsal.py, tox -e rehearsal)")
