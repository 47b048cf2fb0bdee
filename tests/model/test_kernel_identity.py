"""Kernel identity from the bits (depthprune.model.kernel_identity): the fingerprint is the same wherever the kernels
are, and differs wherever a cap changes what a model computes.

The cap test runs one small Llama forward (random weights, the tiny family's width) in float32 and in bf16
under each cap, beside the fingerprint, in a process of its own. Whatever this CPU is, a cap that changes the
forward's bits must change that dtype's fingerprint; a cap that changes nothing here may leave it equal (on an
AMD EPYC, MKL's AVX2 cap changes no float32 product's bits: issue 59). ``tools/fingerprint_caps.py`` measures
the same on a shipped model's calibration losses, at both thread counts, over repeated runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from depthprune.model import kernel_identity
from depthprune.model.kernel_identity import VERSION, fingerprint, kernel_record, run_fingerprint, same_kernels

_PROBE = """
import hashlib, json, sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
from depthprune.model.kernel_identity import fingerprint
torch.manual_seed(0)
model = LlamaForCausalLM(LlamaConfig(hidden_size=160, intermediate_size=512, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, vocab_size=512)).eval()
ids = torch.randint(0, 512, (2, 48), generator=torch.Generator().manual_seed(1))
out = {}
for threads in (1, 2):  # the suite's thread counts: 1 per grid worker, 2 for one process
    torch.set_num_threads(threads)
    out[threads] = {"fingerprint": fingerprint()}
    for dtype in ("float32", "bfloat16"):
        try:
            with torch.no_grad():
                logits = model.to(getattr(torch, dtype))(ids).logits.float()
            out[threads][dtype] = hashlib.sha256(logits.numpy().tobytes()).hexdigest()[:16]
        except Exception as err:  # a hybrid of caps no CPU is may raise: that is other bits too
            out[threads][dtype] = f"error: {type(err).__name__}"
print(json.dumps(out))
"""

#: caps that change a library's kernels on some CPU (precision.CAP_VARIABLES): MKL's float32 products, oneDNN's
#: bf16 ones, ATen's own vector kernels
CAPS = {"uncapped": {}, "MKL AVX2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
        "oneDNN AVX512_CORE_BF16": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"},
        "ATen avx2": {"ATEN_CPU_CAPABILITY": "avx2"}}


def _run(cap: dict[str, str]) -> dict:
    from depthprune.model.precision import CAP_VARIABLES

    env = {k: v for k, v in os.environ.items() if k not in CAP_VARIABLES}
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**env, **cap}, capture_output=True, text=True,
                         check=True).stdout
    return {int(t): run for t, run in json.loads(out.strip().splitlines()[-1]).items()}


#: the tests that read ``runs`` on one xdist worker, so its four processes (~22 s of a worker) start once, not on
#: both workers (a .ci/run-like profile on an AMD EPYC, 2026-12-07, ran them twice)
_ONE_WORKER = pytest.mark.xdist_group("kernel-identity-caps")


@pytest.fixture(scope="module")
def runs() -> dict[str, dict]:
    """Each cap's process: the fingerprint and a forward's bits at 1 and 2 threads (one process per cap)."""
    return {name: _run(cap) for name, cap in CAPS.items()}


@_ONE_WORKER
def test_a_cap_that_changes_a_forwards_bits_changes_the_fingerprint(runs):
    for threads in (1, 2):
        base = runs["uncapped"][threads]
        for name, run in runs.items():
            for dtype in ("float32", "bfloat16"):
                if run[threads][dtype] != base[dtype]:
                    assert run[threads]["fingerprint"][dtype] != base["fingerprint"][dtype], (
                        f"{name} at {threads} threads changed a {dtype} forward's bits but not the {dtype} "
                        f"fingerprint: {run[threads]['fingerprint']['products']} vs {base['fingerprint']['products']}")


@_ONE_WORKER
def test_the_fingerprint_is_the_same_in_another_process_at_each_thread_count(runs):
    """Equal across processes at the suite's thread counts (1 per grid worker, 2 for a single process); the
    thread count is part of it, so a record made at 1 thread never counts as one made at 2."""
    from depthprune.model.precision import cap_prefix

    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            here = fingerprint()
            if cap_prefix() == "":  # the other process ran uncapped: compare only where this one is too
                assert runs["uncapped"][threads]["fingerprint"] == here
            assert here["threads"] == threads and fingerprint() == here
        assert runs["uncapped"][1]["fingerprint"]["float32"] != runs["uncapped"][2]["fingerprint"]["float32"]
    finally:
        torch.set_num_threads(before)


def _env(dtype: str, fp32: str | None = "a", bf16: str | None = "b", version: int = VERSION) -> dict:
    kernels = {"capability": "AVX512"}
    if fp32 is not None:
        kernels["fingerprint"] = {"version": version, "threads": 1, "float32": fp32, "bfloat16": bf16}
    return {"dtype": f"torch.{dtype}", "kernels": kernels}


def test_same_kernels_reads_the_runs_own_dtypes_fingerprint():
    assert same_kernels(_env("float32"), _env("float32", bf16="other")) is True  # a float32 run runs no bf16 kernel
    assert same_kernels(_env("bfloat16"), _env("bfloat16", bf16="other")) is False
    assert same_kernels(_env("float32"), _env("float32", fp32="other")) is False
    assert same_kernels(_env("float32"), _env("bfloat16")) is False  # another precision is never the same
    assert same_kernels(_env("float32"), _env("float32", fp32=None)) is None  # an older record: the old rule
    assert same_kernels(_env("float32"), _env("float32", version=VERSION + 1)) is None
    assert run_fingerprint(_env("bfloat16")) == "b" and run_fingerprint({"dtype": "torch.float32"}) is None


def test_a_failing_product_is_an_answer_not_an_exception(monkeypatch):
    def broken() -> torch.Tensor:
        raise RuntimeError("pack_vnni2 is only supported when avx512 is supported")

    assert kernel_identity._digest(broken).startswith("error: ")
    assert kernel_identity._digest(broken) == kernel_identity._digest(broken)


def test_results_record_the_fingerprint():
    rec = kernel_record("cpu")
    assert rec["fingerprint"] == fingerprint() and len(rec["fingerprint"]["float32"]) == 16
    assert "fingerprint" not in kernel_record("cuda")
