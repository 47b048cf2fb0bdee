"""The machine a device check runs on (:mod:`depthprune.plan.device_check`): versions, the device, and the
numeric settings a throughput depends on, recorded in ``throughput.json`` and printed first."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch

from depthprune.plan.gpus import GPUS, gpu_kind


def _quiet(read: Callable[[], Any]) -> Any:
    """A setting's value, its deprecation warnings silenced (torch renames the TF32 switches)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return read()
        except Exception as err:  # noqa: BLE001 - an absent setting is recorded, not fatal
            return f"unavailable ({type(err).__name__})"


def _driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment_info(device: str) -> dict[str, Any]:
    """Versions, the device, and the numeric settings a throughput depends on (TF32, bf16, SDPA)."""
    import transformers

    info: dict[str, Any] = {
        "python": sys.version.split()[0], "platform": platform.platform(), "torch": torch.__version__,
        "transformers": transformers.__version__, "cuda": torch.version.cuda, "device": device,
        "torch_threads": torch.get_num_threads(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "tf32_matmul": _quiet(lambda: torch.backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": _quiet(lambda: torch.backends.cudnn.allow_tf32),
        "cudnn": _quiet(torch.backends.cudnn.version),
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update({
            "device_name": torch.cuda.get_device_name(0), "capability": list(torch.cuda.get_device_capability(0)),
            "memory_bytes": props.total_memory, "multiprocessors": props.multi_processor_count,
            "bf16_supported": torch.cuda.is_bf16_supported(), "driver": _driver(),
            "sdpa": {k: _quiet(getattr(torch.backends.cuda, f"{k}_sdp_enabled"))
                     for k in ("flash", "mem_efficient", "math", "cudnn")},
        })
    else:
        info.update({"device_name": f"cpu ({platform.processor() or platform.machine()})",
                     "bf16_supported": True, "cpu_count": os.cpu_count()})
    kind = gpu_kind(info["device_name"])
    info["gpu_kind"] = kind
    info["peak_bf16_tflops"] = GPUS[kind].bf16_tflops if kind else None
    try:  # the suite's own record (git revision, kernels); a module edited elsewhere must not stop the check
        from depthprune.results.provenance import environment

        info["suite"] = environment(device, "bfloat16")
    except Exception as err:  # noqa: BLE001
        info["suite"] = f"unavailable ({type(err).__name__}: {err})"
    return info


def environment_lines(info: dict[str, Any]) -> list[str]:
    return [
        f"device     {info['device_name']} ({info['device']}; GPUS kind {info['gpu_kind']}, "
        f"peak bf16 {info['peak_bf16_tflops']} TFLOP/s)",
        f"versions   python {info['python']}, torch {info['torch']}, transformers {info['transformers']}, "
        f"CUDA {info['cuda']}, cuDNN {info['cudnn']}, driver {info.get('driver')}",
        f"numerics   bf16 supported {info['bf16_supported']}; TF32 matmul {info['tf32_matmul']}, "
        f"TF32 cuDNN {info['tf32_cudnn']}, float32 matmul precision {info['float32_matmul_precision']}; "
        f"SDPA {info.get('sdpa', '-')}",
    ]
