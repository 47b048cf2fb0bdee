"""Which numeric precision a run uses, and why: ``dtype = "auto"`` asks the machine.

On CUDA, ``auto`` is bfloat16 (the paper's setting). On a CPU, bf16 is fast only where the
matrix products run on AMX tiles: measured on this project's machines (1 thread), a bf16
matmul ran 8.4x faster than fp32 with AMX, 0.6x without it (AVX512-BF16 only, AMX forbidden
by ``ONEDNN_MAX_CPU_ISA`` on that Intel CPU) and 0.015x without native bf16 (AVX2); a whole
smollm2-135m forward 3.8x faster with AMX and 0.69x without. So ``auto`` on a CPU means bf16
only where a bf16 matmul *is* an AMX kernel, the kernels the references were made on. (An AMD
EPYC with native AVX512-BF16 and no AMX later ran that forward 1.9x faster in bf16, at 2 threads,
and matmuls 2.1-2.4x at 1 thread: there the rule costs speed. But its bf16 results do not reproduce
the AMX references: the whole tiny grid in bf16 there failed 13 of 84 cells, 3 of them with another
removed set, so the rule stays; see DESIGN.md.)

That is asked, not assumed: CPUID (torch's ``_is_amx_tile_supported``) says whether the
processor has AMX tiles, but torch's capability checks ignore ``ONEDNN_MAX_CPU_ISA``, which
can forbid AMX to oneDNN, the library that runs bf16 matmuls on a CPU. So :func:`cpu_kernels`
runs one small bf16 matmul under oneDNN's verbose mode and reads the kernel it dispatched
(e.g. ``brg_matmul:avx10_1_512_amx`` or ``brg_matmul:avx512_core_bf16``).

float32 matrix products are a third library's: MKL's ``sgemm``, which dispatches by itself and obeys
neither cap; only ``MKL_ENABLE_INSTRUCTIONS`` caps it. Capped at ``ONEDNN_MAX_CPU_ISA=AVX2
ATEN_CPU_CAPABILITY=avx2`` alone, an AVX-512 CPU ran a hybrid no CPU is (ATen's AVX2 kernels, MKL's AVX-512
products: a one-matmul probe gave the uncapped bytes, and ``MKL_ENABLE_INSTRUCTIONS=AVX2`` others). So
:func:`cpu_kernels` also reads the ISA MKL announces under its verbose mode (``fp32_matmul_isa``), and
emulating an AVX2-only CPU takes all three caps (:data:`CAP_VARIABLES`). Results record all of it
(:func:`depthprune.model.kernel_identity.kernel_record`), so a number can be traced to the kernels that made it;
whether two records ran the *same* kernels is decided by their bits, not these descriptions
(:mod:`depthprune.model.kernel_identity`).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch

#: what bf16 against fp32 measured where bf16 matmuls do not run on AMX (module docstring): it depends on the CPU
NO_AMX_SPEED = ("a smollm2-135m forward took 1.45x as long as in float32 on AVX512-BF16 kernels of an Intel CPU with "
                "AMX forbidden, but ran 1.9x as fast on an AMD EPYC's native AVX512-BF16 (2 threads, bench/test_bench_dtype.py), "
                "and a matmul took ~65x as long without native bf16 (AVX2)")
#: what bf16 on non-AMX kernels measured against the AMX references (module docstring, DESIGN.md)
NO_AMX_REFERENCES = ("on an AMD EPYC's AVX512-BF16 kernels the whole tiny grid in bf16 failed 13 of its 84 AMX references "
                     "(3 removed another set; calibration losses moved up to 3.8e-3 relative, past other_kernels_loss_rel)")

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
          "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


#: the short names a numeric class writes a dtype with (``bf16/amx``, ``fp32/cpu-avx512``)
SHORT_NAMES = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}


def dtype_name(dtype: object) -> str:
    """``torch.bfloat16`` / ``"torch.bfloat16"`` / ``"bfloat16"`` -> ``"bfloat16"``: the name results, references and
    bands file a dtype under."""
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class CpuKernels:
    """What this process's CPU offers bf16 matrix products, and what oneDNN picked."""

    amx_tile: bool  # CPUID: the processor has AMX tiles
    avx512_bf16: bool  # CPUID: native bf16 vector instructions
    onednn_max_cpu_isa: str | None  # the environment's cap on oneDNN's ISA, if set
    bf16_matmul_kernel: str  # the implementation oneDNN ran for a bf16 matmul ("unknown" if not seen)
    capability: str  # ATen's vectorisation level (torch.backends.cpu.get_cpu_capability)
    fp32_matmul_isa: str = "unknown"  # the ISA MKL's float32 products run on ("avx2", "avx512"; module docstring)

    @property
    def bf16_on_amx(self) -> bool:
        return self.amx_tile and "amx" in self.bf16_matmul_kernel

    @property
    def bf16_class(self) -> str:
        """The class of kernel that runs this CPU's bf16 matmuls (:func:`bf16_class`)."""
        return bf16_class(self.bf16_matmul_kernel)


#: the classes of CPU bf16 matmul kernel, each rounding its own way: AMX tiles, native AVX512-BF16
#: vector instructions (oneDNN's ``avx512_core_bf16``, no AMX), and ATen's own emulation (no oneDNN bf16
#: kernel: an AVX2-only CPU, where bf16 products are computed in float32 and rounded)
BF16_CLASSES = ("amx", "avx512-bf16", "emulated")


def bf16_class(kernel: str | None) -> str:
    """The kernel class of a recorded ``bf16_matmul_kernel`` string (a result's ``kernels``), or
    ``"unknown"`` where none was recorded. A bound measured on one class holds for that class only."""
    if not kernel:
        return "unknown"
    if kernel.startswith(("none", "unknown")):  # _probe_onednn_kernel's words for "no oneDNN bf16 kernel ran"
        return "emulated"
    if "amx" in kernel:
        return "amx"
    if "bf16" in kernel or "avx10" in kernel:
        return "avx512-bf16"
    return "unknown"


def _verbose_output(backend: Any, dtype: torch.dtype) -> str:
    """What ``backend``'s verbose mode prints for one 64x64 matmul in ``dtype`` (C code prints it on file
    descriptor 1, so fd 1 is redirected for the one product)."""
    a = torch.ones(64, 64, dtype=dtype)
    fd, path = tempfile.mkstemp(prefix="depthprune-verbose-")
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(fd, 1)
        with backend.verbose(backend.VERBOSE_ON):
            a @ a
        sys.stdout.flush()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(fd)
    try:
        with open(path) as fh:
            return fh.read()
    finally:
        os.unlink(path)


#: what a probe answers where the library printed nothing it can read (DESIGN.md, "Machine probes")
NO_ONEDNN_MATMUL = "none (oneDNN ran no bf16 matmul: ATen's own kernel did)"
NO_MKL_BANNER = "unknown (MKL printed no banner)"
NO_MKL_ISA = "unknown (MKL's banner names no ISA: on AMD CPUs oneMKL picks its own code paths)"


def parse_onednn_kernel(verbose: str) -> str:
    """The implementation oneDNN's verbose output names for a matmul (``brg_matmul:avx10_1_512_amx``), or
    :data:`NO_ONEDNN_MATMUL` where it names none (an AVX2-only CPU: oneDNN prints nothing at all)."""
    found = re.search(r"primitive,exec,cpu,matmul,([^,]+),", verbose or "")
    return found.group(1) if found else NO_ONEDNN_MATMUL


def parse_mkl_isa(verbose: str) -> str:
    """The ISA MKL's verbose banner names (``avx2``, ``avx512``), :data:`NO_MKL_BANNER` where it printed none,
    or :data:`NO_MKL_ISA` where its banner names no ISA (an AMD CPU: "... Intel(R) Architecture processors")."""
    if "MKL_VERBOSE" not in (verbose or ""):
        return NO_MKL_BANNER
    found = re.search(r"\(Intel\(R\) (AVX[-\w]*)\)", verbose)
    return found.group(1).lower().replace("-", "") if found else NO_MKL_ISA


def _probe(library: str, read: Callable[[], str], parse: Callable[[str], str]) -> str:
    """``parse(read())``, or ``"unknown (...)"`` where reading fails: a probe describes, it never raises."""
    try:
        return parse(read())
    except Exception as err:  # noqa: BLE001 (any library failure is an answer, not a crash)
        return f"unknown ({library} probe failed: {type(err).__name__}: {err})"


def _probe_onednn_kernel() -> str:
    """The oneDNN implementation of one 64x64 bf16 matmul, read from oneDNN's verbose output."""
    if not torch.backends.mkldnn.is_available():
        return "unknown (torch built without oneDNN)"
    return _probe("oneDNN", lambda: _verbose_output(torch.backends.mkldnn, torch.bfloat16), parse_onednn_kernel)


def _probe_mkl_isa() -> str:
    """The ISA MKL runs float32 products on, from the banner its verbose mode prints once per process
    ("... Intel(R) Advanced Vector Extensions 2 (Intel(R) AVX2) enabled processors ...")."""
    if not torch.backends.mkl.is_available():
        return "unknown (torch built without MKL)"
    return _probe("MKL", lambda: _verbose_output(torch.backends.mkl, torch.float32), parse_mkl_isa)


@lru_cache(maxsize=1)
def cpu_kernels() -> CpuKernels:
    cpu = torch.cpu
    return CpuKernels(
        amx_tile=bool(getattr(cpu, "_is_amx_tile_supported", lambda: False)()),
        avx512_bf16=bool(getattr(cpu, "_is_avx512_bf16_supported", lambda: False)()),
        onednn_max_cpu_isa=os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"),
        bf16_matmul_kernel=_probe_onednn_kernel(),
        capability=torch.backends.cpu.get_cpu_capability(),
        fp32_matmul_isa=_probe_mkl_isa(),
    )


#: Environment variables that cap the kernels a process may use (oneDNN's ISA, ATen's capability, MKL's
#: ISA); an AVX2-only CPU is emulated by all three: ``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
#: MKL_ENABLE_INSTRUCTIONS=AVX2`` (module docstring)
CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")


def cap_prefix() -> str:
    """The kernel caps set in this environment as a shell prefix (``"VAR=value ... "``, or ``""``), so that
    a recorded command re-runs on the kernels that made its numbers."""
    return "".join(f"{v}={os.environ[v]} " for v in CAP_VARIABLES if os.environ.get(v))


def auto_dtype(device: str) -> tuple[torch.dtype, str]:
    """``(dtype, why)`` that ``dtype = "auto"`` means on ``device`` (module docstring)."""
    if device.startswith("cuda"):
        return torch.bfloat16, "auto on CUDA: bfloat16 (the paper's setting)"
    k = cpu_kernels()
    if k.bf16_on_amx:
        return torch.bfloat16, f"auto on CPU: bfloat16, since bf16 matmuls run on AMX here ({k.bf16_matmul_kernel})"
    if not k.amx_tile:
        why = "this CPU has no AMX tiles"
    else:
        why = (f"AMX is present but oneDNN does not use it (ONEDNN_MAX_CPU_ISA={k.onednn_max_cpu_isa}; "
               f"bf16 matmul kernel {k.bf16_matmul_kernel})")
    return torch.float32, f"auto on CPU: float32, since {why} (bf16 without AMX: see DESIGN.md, Numeric precision)"


_announced: set[tuple[str, str]] = set()


def resolve_dtype(dtype: str | torch.dtype, device: str, announce: bool = False) -> torch.dtype:
    """The torch dtype a run uses. ``announce``: print once per process which dtype ``auto``
    chose and why, and warn when bf16 is asked for on a CPU whose bf16 matmuls avoid AMX."""
    if isinstance(dtype, torch.dtype):
        chosen, why = dtype, ""
    elif dtype == "auto":
        chosen, why = auto_dtype(device)
    elif dtype in DTYPES:
        chosen, why = DTYPES[dtype], ""
    else:
        raise ValueError(f"unknown dtype {dtype!r}; allowed: auto, {', '.join(DTYPES)}")
    if announce and (device, str(chosen)) not in _announced:
        _announced.add((device, str(chosen)))
        if why:
            print(f"depthprune: dtype {str(chosen).removeprefix('torch.')} ({why})", file=sys.stderr)
        if chosen == torch.bfloat16 and device == "cpu" and not cpu_kernels().bf16_on_amx:
            warnings.warn(f"bfloat16 on a CPU without AMX matmuls ({cpu_kernels().bf16_matmul_kernel}): measured, "
                          f"{NO_AMX_SPEED}; and {NO_AMX_REFERENCES}; "
                          "dtype auto would choose float32", UserWarning,
                          stacklevel=2)
    return chosen


@contextmanager
def onednn_bf16_fpmath(enabled: bool) -> Iterator[None]:
    """Let oneDNN run float32 matmuls on bf16 kernels (its "fpmath mode"), with float32 accumulation
    and output. Exact where every input is a bf16 value held in float32, which is the only place it
    is enabled (a bf16 head on a CPU): measured on smollm2's head shape, 1.6x the float32 speed with
    the same error against float64 (1.3e-6 vs 2.6e-6). Restored on exit; a no-op where torch lacks it."""
    matmul = getattr(torch.backends.mkldnn, "matmul", None)
    before = getattr(matmul, "fp32_precision", None) if enabled else None
    if matmul is None or before is None:
        yield
        return
    matmul.fp32_precision = "bf16"
    try:
        yield
    finally:
        matmul.fp32_precision = before
