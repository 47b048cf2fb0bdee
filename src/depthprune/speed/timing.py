"""The timed workloads of ``depthprune speed``: prefill and KV-cached decode, peak memory, statistics.

Prefill is one forward over ``batch x context`` random token ids that keeps the logits of the last
position only (``logits_to_keep=1``), as generation does: the output head then costs one row per
sequence, not one per token. Decode is ``new_tokens`` greedy steps, one token per sequence each,
on the KV cache a (untimed) prefill of the prompt built. Inputs are random ids from a seeded
generator, so the dense and the pruned model see the same ones.
"""

from __future__ import annotations

import gc
import inspect
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

#: the kinds of timed workload
KINDS = ("prefill", "decode")


@dataclass(frozen=True)
class Workload:
    """One timed thing: a prefill of ``batch x context`` tokens, or ``new_tokens`` decode steps after one."""

    kind: str
    batch: int
    context: int
    new_tokens: int = 0

    @property
    def name(self) -> str:
        """A stable key, e.g. ``prefill b1 c512`` or ``decode b4 c64 +16``."""
        tail = f" +{self.new_tokens}" if self.kind == "decode" else ""
        return f"{self.kind} b{self.batch} c{self.context}{tail}"

    @property
    def phase(self) -> str:
        """The cost table's phase this workload is predicted from (``prefill@512``, ``decode@64``)."""
        return f"{self.kind}@{self.context}"

    @property
    def tokens(self) -> int:
        """Tokens processed (prefill) or generated (decode) by one run."""
        return self.batch * (self.context if self.kind == "prefill" else self.new_tokens)


def workloads(contexts: tuple[int, int], batches: tuple[int, ...], new_tokens: int) -> list[Workload]:
    """The default set: prefill at every batch and both contexts, decode at every batch after the short prompt."""
    out = [Workload("prefill", b, c) for c in contexts for b in batches]
    out += [Workload("decode", b, contexts[0], new_tokens) for b in batches]
    return out


def token_ids(vocab: int, batch: int, length: int, device: str, seed: int = 0) -> torch.Tensor:
    """Seeded random token ids (the same for every model of a run)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, length), generator=gen).to(device)


def sync(device: str) -> None:
    """Wait for queued CUDA work, so a clock reading covers it."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _keeps_last(model: nn.Module) -> dict[str, Any]:
    """``logits_to_keep=1`` where the model's forward takes it (every decoder this suite runs does)."""
    params = inspect.signature(model.forward).parameters
    return {"logits_to_keep": 1} if "logits_to_keep" in params else {}


@torch.inference_mode()
def run_prefill(model: nn.Module, ids: torch.Tensor, device: str) -> float:
    """Seconds of one prefill forward (no cache kept, last position's logits only)."""
    sync(device)
    start = time.perf_counter()
    model(input_ids=ids, use_cache=False, **_keeps_last(model))
    sync(device)
    return time.perf_counter() - start


def _cache_name(model: nn.Module) -> str:
    """The name of the KV cache argument and output field: ``cache`` (transformers >= 5.25), else ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


@torch.inference_mode()
def run_decode(model: nn.Module, ids: torch.Tensor, new_tokens: int, device: str) -> float:
    """Seconds of ``new_tokens`` greedy decode steps on the KV cache of the prompt ``ids`` (its prefill untimed)."""
    name = _cache_name(model)
    out = model(input_ids=ids, use_cache=True, **_keeps_last(model))
    cache = getattr(out, name)
    nxt = out.logits[:, -1:].argmax(-1)
    sync(device)
    start = time.perf_counter()
    for _ in range(new_tokens):
        out = model(input_ids=nxt, use_cache=True, **{name: cache})
        cache = getattr(out, name)
        nxt = out.logits[:, -1:].argmax(-1)
    sync(device)
    return time.perf_counter() - start


def run(model: nn.Module, work: Workload, ids: torch.Tensor, device: str) -> float:
    """Seconds of one run of ``work`` on ``ids`` (``batch x context``)."""
    if work.kind == "prefill":
        return run_prefill(model, ids, device)
    return run_decode(model, ids, work.new_tokens, device)


# -- memory ------------------------------------------------------------------------------------------

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def _status_bytes(key: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak memory over a stretch of work: ``torch.cuda.max_memory_allocated`` on CUDA; on a CPU the
    process's peak resident set (``VmHWM``), reset for the stretch by writing 5 to
    ``/proc/self/clear_refs`` (Linux). Where that reset is refused, the process's lifetime peak
    (``ru_maxrss``) is all there is, and :attr:`how` says so."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.how = ("torch.cuda.max_memory_allocated" if device.startswith("cuda")
                    else "peak RSS (VmHWM) over the stretch, reset by /proc/self/clear_refs")
        self.before = 0
        self._hwm = not device.startswith("cuda")

    def start(self) -> None:
        """Begin a stretch: reset the peak and note what is held now."""
        gc.collect()
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.before = int(torch.cuda.memory_allocated())
            return
        try:
            _CLEAR_REFS.write_text("5")
        except OSError:
            self._hwm = False
            self.how = "the process's lifetime peak RSS (ru_maxrss): /proc/self/clear_refs refused a reset"
        self.before = _status_bytes("VmRSS") or 0

    def peak(self) -> tuple[int, int]:
        """``(peak bytes, peak minus what was held at start)`` of the stretch."""
        if self.device.startswith("cuda"):
            peak = int(torch.cuda.max_memory_allocated())
        else:
            hwm = _status_bytes("VmHWM") if self._hwm else None
            peak = hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return peak, max(0, peak - self.before)


# -- statistics --------------------------------------------------------------------------------------


def spread(values: list[float]) -> dict[str, float]:
    """Median, quartiles, min and max of a run's rounds (quartiles by the inclusive method)."""
    vals = sorted(values)
    if len(vals) >= 2:
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
    else:
        q1 = q3 = vals[0]
    return {"median": statistics.median(vals), "q1": q1, "q3": q3, "min": vals[0], "max": vals[-1], "n": len(vals)}


def _distinct_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Each parameter once: a tied embedding and head are one tensor."""
    return list({id(p): p for p in model.parameters()}.values())


def param_count(model: nn.Module) -> int:
    """Distinct parameters (a tied embedding and head count once)."""
    return sum(p.numel() for p in _distinct_parameters(model))


def param_bytes(model: nn.Module) -> int:
    """Bytes of the distinct parameters."""
    return sum(p.numel() * p.element_size() for p in _distinct_parameters(model))
