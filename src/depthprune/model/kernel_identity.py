"""Kernel identity from the bits: what a result records of its kernels, and whether two records ran the same.

Banners describe kernels; they do not identify them. On an AMD CPU oneMKL's banner names no ISA and MKL
picks its own code paths, so two records that both say ``capability AVX512`` may round differently, and a
cap can change one library's bits and leave another's alone. So a run's kernel record carries a
*fingerprint*: each product below run once on fixed seeded inputs, at the shapes and dtypes the suite runs
(the tiny family's, smollm2's and gemma3's block products, an output-head chunk, attention, the norm,
the MLP's activation, the loss's reductions), and its output's bytes hashed. Two records with equal
fingerprints ran the same kernels; unequal ones ran others, whatever their banners say
(:func:`same_kernels`).

A float32 run's fingerprint covers the float32 products only; a bf16 run's covers every product, since a
bf16 run also runs float32 steps (the head's accumulation, cbo's gates, the losses). Thread counts split
some products differently (oneDNN's AMX kernels at 2 threads, MKL's AVX2 ones, a long sum), so a fingerprint
is taken at the process's thread count and hashes it with the bits: equal fingerprints mean equal threads too. A product that fails (a hybrid of caps no CPU is: ATen capped
to AVX2 beside oneDNN's AVX-512 bf16 attention raises) hashes its error message instead: the probe never
raises (DESIGN.md, "Machine probes").
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import asdict
from functools import cache, partial
from typing import Any

import torch
from torch.nn import functional as F  # noqa: N812 (torch's idiom)

from depthprune.model import precision
from depthprune.model.precision import onednn_bf16_fpmath

#: bumped when the products change: fingerprints of another version are never compared
VERSION = 1
#: (rows, inner, columns) of the block products: tiny family (hidden 160, MLP 512), smollm2-135m (576, 1536),
#: gemma3-270m (640, 2048)
MATMUL_SHAPES = ((64, 160, 512), (64, 576, 1536), (64, 640, 2048))
HEAD_SHAPE = (64, 576, 8192)  # an output-head chunk: tokens x hidden x vocabulary slice
ATTENTION_SHAPE = (2, 4, 64, 64)  # batch, heads, tokens, head dim


def _products(generator: torch.Generator) -> dict[str, Callable[[], torch.Tensor]]:
    """The products, by name: ``fp32:`` ones run in every fingerprint, ``bf16:`` ones in a bf16 run's only."""

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator)

    out: dict[str, Callable[[], torch.Tensor]] = {}
    for m, k, n in MATMUL_SHAPES:
        a, b = r(m, k), r(k, n)
        out[f"fp32:matmul {m}x{k}x{n}"] = partial(torch.matmul, a, b)
        out[f"bf16:matmul {m}x{k}x{n}"] = partial(torch.matmul, a.bfloat16(), b.bfloat16())
    t, h, v = HEAD_SHAPE
    hidden, weight = r(t, h), r(v, h)
    out["fp32:head"] = lambda: F.linear(hidden, weight)
    out["bf16:head"] = lambda: _bf16_head(hidden, weight)
    q, k_, v_ = r(*ATTENTION_SHAPE), r(*ATTENTION_SHAPE), r(*ATTENTION_SHAPE)
    out["fp32:attention"] = lambda: F.scaled_dot_product_attention(q, k_, v_, is_causal=True)
    out["bf16:attention"] = lambda: F.scaled_dot_product_attention(q.bfloat16(), k_.bfloat16(), v_.bfloat16(),
                                                                     is_causal=True)
    x = r(64, 576) * 3
    out["fp32:rms norm"] = lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    out["fp32:silu"] = lambda: F.silu(x) * x
    out["bf16:silu"] = lambda: F.silu(x.bfloat16()) * x.bfloat16()
    logits = r(64, 8192) * 4
    out["fp32:logsumexp"] = lambda: torch.logsumexp(logits, -1)
    out["fp32:log_softmax"] = lambda: torch.log_softmax(logits, -1)
    long = r(1 << 20)
    out["fp32:sum"] = lambda: long.sum().reshape(1)  # a reduction ATen splits by thread count
    return out


def _bf16_head(hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The head's product as a bf16 run computes it: oneDNN's bf16 kernels accumulating in float32
    (``OutputHead._product``'s fpmath mode)."""
    with onednn_bf16_fpmath(True):
        return F.linear(hidden.bfloat16().float(), weight.bfloat16().float())


def _digest(fn: Callable[[], torch.Tensor]) -> str:
    try:
        with torch.no_grad():
            out = fn().detach().contiguous()
        return hashlib.sha256(out.view(torch.uint8).numpy().tobytes()).hexdigest()[:16]
    except Exception as err:  # noqa: BLE001 (the probe never raises: its answer says what failed)
        return "error: " + hashlib.sha256(f"{type(err).__name__}: {err}".encode()).hexdigest()[:16]


def _combine(digests: dict[str, str], prefixes: tuple[str, ...], threads: int) -> str:
    chosen = "\n".join(f"{name}={d}" for name, d in sorted(digests.items()) if name.startswith(prefixes))
    return hashlib.sha256(f"v{VERSION}\nthreads={threads}\n{chosen}".encode()).hexdigest()[:16]


@cache
def _at(threads: int) -> dict[str, object]:
    digests = {name: _digest(fn) for name, fn in _products(torch.Generator().manual_seed(0)).items()}
    return {"version": VERSION, "threads": threads,
            "float32": _combine(digests, ("fp32:",), threads),
            "bfloat16": _combine(digests, ("fp32:", "bf16:"), threads),
            "products": digests}


def fingerprint() -> dict[str, object]:
    """This process's fingerprint at its current torch thread count (computed once per count): ``float32``
    and ``bfloat16`` (the hash a run in that dtype compares), ``threads``, ``version`` and each product's
    digest (``products``: which product differs, where two fingerprints do)."""
    return dict(_at(torch.get_num_threads()))


def kernel_record(device: str) -> dict[str, object]:
    """What a result records of the kernels behind it: on a CPU the probes' descriptions
    (:func:`depthprune.model.precision.cpu_kernels`) and the :func:`fingerprint`; a CUDA run records its GPU."""
    if device.startswith("cuda"):
        return {"cuda": torch.version.cuda, "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}
    return {**asdict(precision.cpu_kernels()), "fingerprint": fingerprint()}  # looked up here: a patched probe holds


def _key(dtype: object) -> str:
    return "float32" if str(dtype).removeprefix("torch.") in ("float32", "fp32") else "bfloat16"


def run_fingerprint(environment: Mapping[str, Any]) -> str | None:
    """The fingerprint an environment record's run is identified by (its dtype's), or None where the record
    has none (made before records carried one, or on a GPU)."""
    found = (environment.get("kernels") or {}).get("fingerprint")
    if not isinstance(found, Mapping) or found.get("version") != VERSION:
        return None
    value = found.get(_key(environment.get("dtype")))
    return str(value) if value else None


def same_kernels(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool | None:
    """Whether two environment records (a result's or a reference's ``environment``) ran the same kernels at
    the same thread count: their fingerprints decide, whatever the banners say. None where either record has
    no fingerprint of this version (the caller's older rule decides, and says so)."""
    fa, fb = run_fingerprint(a), run_fingerprint(b)
    if fa is None or fb is None:
        return None
    return fa == fb and _key(a.get("dtype")) == _key(b.get("dtype"))
