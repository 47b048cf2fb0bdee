"""Facts of the machine a run is on, and switches read from its environment: what a run may use (memory, its
workers), how it hands memory back, and the thread count a build stage leaves. Not provenance: nothing here is
recorded in a result (:mod:`depthprune.results.provenance` records that).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


def keeps_torch_threads(fn: _F) -> _F:
    """``fn`` may set torch's thread count for its own work; its caller gets its count back. A build stage
    run in a test process (tiny's train and check) otherwise left the process at its count."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import torch

        before = torch.get_num_threads()
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return wrapper  # type: ignore[return-value]


def device_memory(device: Any) -> int:
    """The bytes a ``torch.device`` offers a budget: free memory on CUDA, physical memory on a CPU (8 GiB
    where the OS does not say). The scorer's prefix cache and cbo's gradient passes each take a share."""
    if device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def local_workers() -> int:
    """How many processes of this run share the machine's memory: pytest-xdist's workers
    (``PYTEST_XDIST_WORKER_COUNT``, set in each), else 1. CPU memory budgets are split among them."""
    try:
        return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return 1


def release_free_memory() -> bool:
    """Hand the allocator's free pages back to the OS (glibc's ``malloc_trim(0)``, which also returns
    free pages inside the heap); False where there is no glibc. Under the CPU environments'
    ``GLIBC_TUNABLES`` (tox.ini) freed blocks stay in the heap, which spares a cell's chunks their page
    faults, but makes a process's RSS its high-water mark: memory a finished search or evaluation no
    longer uses that the other worker on the machine may need (in the gemma3 run at 4037b34 a worker held
    14.8 GB and the kernel swapped 4.9 GB of its neighbour; how much of it was free blocks was not measured). The grid runner calls it between a cell's phases."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(trim(0))


def switch(name: str) -> bool:
    """An on/off switch read from the environment variable ``name`` (unset: on). ``off``, ``0``, ``false``,
    ``no`` turn it off; ``on``, ``1``, ``true``, ``yes`` and empty keep it on; anything else raises, so that a
    typo stops a run before it loads anything instead of being read as either."""
    value = os.environ.get(name, "on").strip().lower()
    if value in ("off", "0", "false", "no"):
        return False
    if value in ("on", "1", "true", "yes", ""):
        return True
    raise ValueError(f"{name}={os.environ[name]!r}: allowed values are 'on' and 'off'")
