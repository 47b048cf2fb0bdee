"""The GPU catalogue a plan prices time and memory on, and which entry a device name is."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    """One accelerator: dense bf16 tensor throughput (no sparsity) and memory."""

    name: str
    bf16_tflops: float
    memory_gib: float
    source: str


#: Peak dense bf16 tensor-core TFLOP/s (the datasheets' sparse figures halved) and memory.
GPUS: dict[str, GPU] = {
    "h100-80gb": GPU("NVIDIA H100 SXM5 80GB", 989.0, 80.0, "NVIDIA H100 datasheet (SXM5: 1979 sparse)"),
    "h100-pcie-80gb": GPU("NVIDIA H100 PCIe 80GB", 756.0, 80.0, "NVIDIA H100 datasheet (PCIe: 1513 sparse)"),
    "h200-141gb": GPU("NVIDIA H200 SXM 141GB", 989.0, 141.0, "NVIDIA H200 datasheet (1979 sparse)"),
    "a100-80gb": GPU("NVIDIA A100 SXM4 80GB", 312.0, 80.0, "NVIDIA A100 datasheet (624 sparse)"),
    "a100-40gb": GPU("NVIDIA A100 SXM4 40GB", 312.0, 40.0, "NVIDIA A100 datasheet (624 sparse)"),
    "l40s-48gb": GPU("NVIDIA L40S 48GB", 362.0, 48.0, "NVIDIA L40S datasheet (733 sparse)"),
}


#: Substrings of a device name (as torch reports it) -> the GPUS entry it is.
_GPU_NAMES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("H200",), "h200-141gb"), (("H100", "PCIE"), "h100-pcie-80gb"), (("H100",), "h100-80gb"),
    (("A100", "40GB"), "a100-40gb"), (("A100",), "a100-80gb"), (("L40S",), "l40s-48gb"))


def gpu_kind(device_name: str) -> str | None:
    """The :data:`GPUS` key of a device name such as ``NVIDIA H200``, or None if none fits."""
    name = device_name.upper()
    return next((kind for parts, kind in _GPU_NAMES if all(p in name for p in parts)), None)
