"""Numeric precision: what ``dtype = "auto"`` chooses, and the float32 steps inside a bf16 run.

The two steps a bf16 model would otherwise run in bf16 are the output head's product and the
gate product that cbo's J is differentiated through (depthprune.objectives.base, gates). Each is
checked against the same computation in float64 on the same bf16 blocks, so only the step under
test differs, and against a naive all-bf16 version that must miss the same bound. Bounds:

* calibration loss, relative: 1e-5, a tenth of the tiny grid's reference tolerance (1e-4,
  cases/tiny.toml). Measured on tiny-llama3: float32 head 2e-8 (ppl), 3e-7 (margin); bf16 head
  3e-4 and 1.5e-3, beyond the grid's own tolerance.
* J, relative Frobenius error: 1e-4. Measured: float32 gates ~1e-7; bf16 gates 0.8% (ppl) and
  4.7% (margin), with entries changing sign.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch
from torch.nn import functional as F  # noqa: N812 (torch's idiom)

from depthprune.model import precision
from depthprune.model.output_head import OutputHead
from depthprune.model.precision import CpuKernels, auto_dtype, resolve_dtype
from depthprune.objectives import make_objective
from depthprune.scoring.calibration import CalibrationData
from depthprune.scoring.gates import gate_gradient, reduce_weights

LOSS_BOUND = 1e-5
J_BOUND = 1e-4


def _kernels(**over) -> CpuKernels:
    base = dict(amx_tile=True, avx512_bf16=True, onednn_max_cpu_isa=None,
                bf16_matmul_kernel="brg_matmul:avx10_1_512_amx", capability="AVX512", fp32_matmul_isa="avx512")
    return CpuKernels(**{**base, **over})


@pytest.mark.parametrize("kernels, want", [
    (_kernels(), torch.bfloat16),
    (_kernels(onednn_max_cpu_isa="AVX512_CORE_BF16", bf16_matmul_kernel="brg_matmul:avx512_core_bf16"), torch.float32),
    (_kernels(amx_tile=False, bf16_matmul_kernel="brg_matmul:avx512_core_bf16"), torch.float32),
    (_kernels(amx_tile=False, avx512_bf16=False, bf16_matmul_kernel="unknown (torch built without oneDNN)"), torch.float32),
])
def test_auto_on_cpu_is_bf16_only_where_bf16_matmuls_run_on_amx(monkeypatch, kernels, want):
    monkeypatch.setattr(precision, "cpu_kernels", lambda: kernels)
    dtype, why = auto_dtype("cpu")
    assert dtype == want and why.startswith(f"auto on CPU: {str(want).removeprefix('torch.')}")
    assert auto_dtype("cuda")[0] == torch.bfloat16 and resolve_dtype("auto", "cuda:1") == torch.bfloat16
    assert resolve_dtype("float32", "cpu") == torch.float32 and resolve_dtype("bf16", "cpu") == torch.bfloat16
    with pytest.raises(ValueError, match="allowed: auto, float32"):
        resolve_dtype("int3", "cpu")


def test_the_choice_is_announced_once_and_bf16_without_amx_warns(monkeypatch, capsys):
    monkeypatch.setattr(precision, "_announced", set())
    monkeypatch.setattr(precision, "cpu_kernels", lambda: _kernels(amx_tile=False, bf16_matmul_kernel="brg_matmul:avx512_core_bf16"))
    resolve_dtype("auto", "cpu", announce=True)
    resolve_dtype("auto", "cpu", announce=True)
    err = capsys.readouterr().err
    assert err.count("depthprune: dtype float32 (auto on CPU: float32, since this CPU has no AMX tiles") == 1
    with pytest.warns(UserWarning, match="AMX forbidden, but ran 1.9x as fast on an AMD EPYC"):
        resolve_dtype("bfloat16", "cpu", announce=True)
    monkeypatch.setattr(precision, "cpu_kernels", lambda: _kernels())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve_dtype("bfloat16", "cpu", announce=True)  # AMX: no warning


@pytest.mark.parametrize("kernel, want", [
    ("brg_matmul:avx10_1_512_amx", "amx"),
    ("brg_matmul:avx512_core_amx", "amx"),
    ("brg_matmul:avx512_core_bf16", "avx512-bf16"),
    ("none (oneDNN ran no bf16 matmul: ATen's own kernel did)", "emulated"),  # says "bf16", is no bf16 kernel
    ("unknown (torch built without oneDNN)", "emulated"),
    ("gemm:jit", "unknown"),
    (None, "unknown"),
])
def test_bf16_kernel_class(kernel, want):
    assert precision.bf16_class(kernel) == want
    assert want == "unknown" or want in precision.BF16_CLASSES


_PROBE = ("from depthprune.model.precision import cpu_kernels, auto_dtype; k = cpu_kernels(); "
          "print(k.amx_tile, k.bf16_matmul_kernel, auto_dtype('cpu')[0], sep='|')")


def test_the_isa_caps_reach_the_tests():
    """CI on one CPU emulates the others with ONEDNN_MAX_CPU_ISA and ATEN_CPU_CAPABILITY: tox must pass both
    through (it once passed only oneDNN's, so a capped run capped bf16 matmuls but not ATen's own kernels)."""
    import configparser
    from pathlib import Path

    tox = configparser.ConfigParser(interpolation=None)
    tox.read(Path(__file__).resolve().parents[2] / "tox.ini")
    passed = tox["testenv"]["passenv"].split()
    assert "ONEDNN_*" in passed and "ATEN_*" in passed and "MKL_ENABLE_INSTRUCTIONS" in passed
    cap = os.environ.get("ATEN_CPU_CAPABILITY")
    if cap and cap.lower() != "default":  # a capped run: torch's kernels are the capped ones
        assert torch.backends.cpu.get_cpu_capability().lower() == cap.lower()
    mkl = os.environ.get("MKL_ENABLE_INSTRUCTIONS")
    isa = precision.cpu_kernels().fp32_matmul_isa
    # and MKL's float32 products too (precision.py's docstring), where MKL names its ISA (an AMD CPU's names none)
    if mkl and not isa.startswith("unknown"):
        assert isa in (mkl.lower().replace("_", ""), "avx2"), mkl


def test_the_probe_reads_the_isa_mkl_really_runs():
    """ONEDNN_MAX_CPU_ISA and ATEN_CPU_CAPABILITY leave MKL's float32 products alone; MKL_ENABLE_INSTRUCTIONS caps
    them, and the probe sees it (AVX2 is the lowest class these CPUs come in, so the cap holds on each) wherever
    MKL's banner names an ISA. oneMKL on an AMD CPU names none (its banner: tests/model/vendor_outputs.py): there
    the probe says "unknown" and this skips, saying so; the parser's test covers that banner on every CPU."""
    if not torch.backends.mkl.is_available():
        pytest.skip("torch built without MKL: its float32 products are another library's")
    probe = "from depthprune.model.precision import cpu_kernels; print(cpu_kernels().fp32_matmul_isa)"
    env = {**os.environ, "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    if out.strip().startswith("unknown"):
        pytest.skip(f"MKL named no ISA here ({out.strip()}): nothing to check the cap against on this CPU")
    assert out.strip() == "avx2"


@pytest.mark.parametrize("name, want", [
    ("MKL_INTEL_AVX512", "avx512"),
    ("MKL_INTEL_CAPPED_AVX2", "avx2"),
    ("MKL_AMD_EPYC", precision.NO_MKL_ISA),
    ("", precision.NO_MKL_BANNER),
])
def test_the_mkl_parser_reads_every_vendors_banner(name, want):
    """Both paths run on every machine: the vendors' real banners are fed to the parser (DESIGN.md, "Machine
    probes"), an AMD EPYC's, which names no ISA, among them."""
    from tests.model import vendor_outputs

    assert precision.parse_mkl_isa(getattr(vendor_outputs, name) if name else "") == want


@pytest.mark.parametrize("name, want", [
    ("ONEDNN_INTEL_AMX", "brg_matmul:avx10_1_512_amx"),
    ("ONEDNN_AVX512_BF16", "brg_matmul:avx512_core_bf16"),
    ("ONEDNN_AVX2", precision.NO_ONEDNN_MATMUL),
])
def test_the_onednn_parser_reads_every_kernel_line(name, want):
    from tests.model import vendor_outputs

    got = precision.parse_onednn_kernel(getattr(vendor_outputs, name))
    assert got == want
    assert precision.bf16_class(got) == {"ONEDNN_INTEL_AMX": "amx", "ONEDNN_AVX512_BF16": "avx512-bf16",
                                         "ONEDNN_AVX2": "emulated"}[name]


def test_a_probe_whose_library_fails_answers_unknown_and_never_raises(monkeypatch):
    """The rule for every machine probe (DESIGN.md, "Machine probes"): silence and failure are answers."""

    def broken(backend, dtype):
        raise OSError("no file descriptor 1")

    monkeypatch.setattr(precision, "_verbose_output", broken)
    k = precision.cpu_kernels.__wrapped__()  # uncached: this process's cached record stays as it was
    if torch.backends.mkl.is_available():
        assert k.fp32_matmul_isa == "unknown (MKL probe failed: OSError: no file descriptor 1)"
    if torch.backends.mkldnn.is_available():
        assert k.bf16_matmul_kernel.startswith("unknown (oneDNN probe failed: OSError")
        assert precision.bf16_class(k.bf16_matmul_kernel) == "emulated" and not k.bf16_on_amx
    for parse in (precision.parse_mkl_isa, precision.parse_onednn_kernel):
        assert parse("").startswith(("unknown", "none")) and parse(None).startswith(("unknown", "none"))


@pytest.mark.parametrize("cap", [None, "AVX512_CORE_BF16", "AVX2"])
def test_the_probe_reads_the_kernel_onednn_really_runs(cap):
    """ONEDNN_MAX_CPU_ISA is invisible to torch's CPUID checks; the probe sees it in the kernel."""
    env = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")}
    if cap:
        env["ONEDNN_MAX_CPU_ISA"] = cap
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True).stdout
    amx, kernel, dtype = out.strip().split("|")
    if cap == "AVX2":  # no native bf16 at all: ATen's own kernel
        assert precision.bf16_class(kernel) == "emulated"
    if cap or amx == "False":
        assert "amx" not in kernel and dtype == "torch.float32"
    else:
        assert "amx" in kernel and dtype == "torch.bfloat16"


def test_results_record_the_kernels(monkeypatch):
    from depthprune.results.provenance import environment

    monkeypatch.setattr(precision, "cpu_kernels", lambda: _kernels())
    rec = environment("cpu", "torch.bfloat16")["kernels"]
    assert rec["bf16_matmul_kernel"] == "brg_matmul:avx10_1_512_amx" and rec["amx_tile"] is True


@pytest.fixture(scope="module")
def bf16_tiny():
    from depthprune.recipe import Session

    session = Session.open("tiny-llama3", device="cpu", dtype="bfloat16", batch_size=8)
    yield session
    session.close()


def _data(session, name: str, size: int | None = None) -> CalibrationData:
    """``size``: samples (ppl) or items (margin), default 8 and 16."""
    params = {"ppl": dict(dataset="c4_train", n_samples=size or 8, seq_len=64, seed=0),
              "margin": dict(dataset="commonsense170k", n_items=size or 16, seed=0, answer="cloze")}[name]
    objective = make_objective(name, session.profile, **params)
    return CalibrationData.build(session.model, objective.prepare(session.tokenizer, session.profile, 8), objective)


def _loss(data: CalibrationData) -> float:
    with torch.no_grad():
        stats = [data.objective.batch_stats(data.decoder.owner(**b.model_inputs("cpu"), use_cache=False)
                                            .last_hidden_state, b, data.head) for b in data.batches]
    return float(data.objective.reduce(stats))


@pytest.mark.parametrize("objective", ["ppl", "margin"])
def test_bf16_calibration_loss_matches_a_float64_head_and_a_bf16_head_does_not(bf16_tiny, monkeypatch, objective):
    data = _data(bf16_tiny, objective)
    ours = _loss(data)
    monkeypatch.setattr(OutputHead, "_product", lambda self, h: F.linear(h.double(), self.head.weight.double()))
    exact = _loss(data)
    monkeypatch.setattr(OutputHead, "_product", lambda self, h: self.head(h))  # naive: logits rounded to bf16
    naive = _loss(data)
    assert abs(ours - exact) <= LOSS_BOUND * abs(exact)
    assert abs(naive - exact) > LOSS_BOUND * abs(exact)


@pytest.mark.parametrize("objective", ["ppl", "margin"])
def test_bf16_cbo_j_matches_float64_gates_and_bf16_gates_do_not(bf16_tiny, objective):
    # half the loss test's data and two columns: on ATen's emulated bf16 (a CPU without AVX512-BF16) the test took
    # 60 s (margin) and 28 s (ppl) of a CI worker with 16 items / 8 samples and three columns; both errors stay
    # ~3 orders of magnitude from J_BOUND either way (measured capped to AVX2: float32 1e-7, bf16 1e-2 - 4e-2)
    data = _data(bf16_tiny, objective, size={"ppl": 4, "margin": 8}[objective])
    weights = reduce_weights(data)
    probe = (3, 12)  # two columns of J: (g_j - g0) / 2

    def columns(dtype: torch.dtype) -> torch.Tensor:
        # recompute=False: the same gradient without the blocks' second forward (tests/scoring/test_scorer.py
        # holds the two equal), 9 passes here
        g0 = gate_gradient(data, frozenset(), weights, recompute=False, gate_dtype=dtype)
        return torch.stack([(gate_gradient(data, frozenset([j]), weights, recompute=False, gate_dtype=dtype) - g0) / 2
                            for j in probe])

    exact = columns(torch.float64)
    err = {d: float((columns(d) - exact).norm() / exact.norm()) for d in (torch.float32, torch.bfloat16)}
    assert err[torch.float32] <= J_BOUND, err
    assert err[torch.bfloat16] > J_BOUND, err


def test_float32_model_head_is_the_model_head_unchanged():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1, vocab_size=97)).eval()
    hidden = torch.randn(5, 32)
    assert torch.equal(OutputHead(model).logits(hidden), model.lm_head(hidden))
    model.to(torch.bfloat16)
    got = OutputHead(model).logits(hidden.bfloat16())
    exact = hidden.bfloat16().double() @ model.lm_head.weight.double().t()
    assert got.dtype == torch.float32
    # float32 accuracy (oneDNN's bf16 kernels accumulate in float32), not bf16's 8 bits
    assert (got.double() - exact).abs().max() <= 1e-5 * exact.abs().max()
    assert (model.lm_head(hidden.bfloat16()).double() - exact).abs().max() > 1e-3 * exact.abs().max()
    assert torch.backends.mkldnn.matmul.fp32_precision != "bf16"  # the fpmath mode is restored


@pytest.mark.parametrize("softcap, scaling", [(30.0, None), (None, 4.0), (None, None)])
def test_bf16_head_converts_its_weight_once_and_scales_in_place_bit_identically(softcap, scaling):
    """The cached float32 copy of the weight and the in-place softcap / scaling are speed-ups only: the
    logits equal the plain out-of-place computation bit for bit, and a changed weight is re-read."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from depthprune.model.precision import onednn_bf16_fpmath

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, vocab_size=1031)).eval()
    model.config.final_logit_softcapping = softcap
    model.config.logits_scaling = scaling
    model.to(torch.bfloat16)
    head = OutputHead(model, chunk_tokens=16)

    def plain(hidden: torch.Tensor) -> torch.Tensor:
        with onednn_bf16_fpmath(True):
            x = F.linear(hidden.float(), model.lm_head.weight.float())
        x = x / scaling if scaling else x
        return torch.tanh(x / softcap) * softcap if softcap else x

    hidden, targets = torch.randn(37, 32).bfloat16(), torch.randint(0, 1031, (37,))
    with torch.no_grad():
        for _ in range(2):
            assert torch.equal(head.logits(hidden), plain(hidden))
        want = plain(hidden).gather(-1, targets[:, None]).squeeze(-1) - torch.logsumexp(plain(hidden), -1)
        assert torch.equal(head.target_logprobs(hidden, targets), want)
        model.lm_head.weight.mul_(2)  # the cached copy must follow the weight
        assert torch.equal(head.logits(hidden), plain(hidden))
    from depthprune.model.output_head import _logsumexp_

    edge = torch.randn(6, 50) * 30
    edge[1, 3], edge[2, :] = float("inf"), float("-inf")  # torch reads an infinite max as 0
    edge[3, 7] = float("nan")
    assert torch.allclose(_logsumexp_(edge.clone()), torch.logsumexp(edge, -1), rtol=0, atol=0, equal_nan=True)
    grad_in = hidden.clone().requires_grad_()  # with gradients: out of place, same values, a backward
    out = head.logits(grad_in)
    out.sum().backward()
    assert grad_in.grad is not None and torch.equal(out.detach(), plain(hidden))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("softcap, scaling", [(30.0, None), (None, 4.0), (None, None)])
def test_head_reductions_on_row_slices_are_bit_identical_to_whole_chunks(monkeypatch, softcap, scaling, threads):
    """OutputHead.logit_rows hands the log-softmax / logsumexp cache-sized slices of a chunk's rows (a
    speed-up only): the scored log-probabilities and argmax equal those of one whole-chunk pass bit for
    bit, whatever the slice and thread count; slices of 3 rows here, a partial one last."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from depthprune.evaluation.lm_adapter import SharedPrefixLM
    from depthprune.model import output_head as base

    torch.manual_seed(0)
    vocab = 4099
    model = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, vocab_size=vocab)).eval()
    model.config.final_logit_softcapping = softcap
    model.config.logits_scaling = scaling
    model.to(torch.bfloat16)
    hidden, targets = torch.randn(41, 32).bfloat16(), torch.randint(0, vocab, (41,))
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            whole = OutputHead(model, chunk_tokens=16)
            monkeypatch.setattr(base, "ROW_SLICE_BYTES", 3 * vocab * 4 + 7)
            sliced = OutputHead(model, chunk_tokens=16)
            assert [rows.shape[0] for _, rows in sliced.logit_rows(hidden[:16])] == [3, 3, 3, 3, 3, 1]
            logits = torch.cat([whole.logits(hidden[s:s + 16]) for s in range(0, 41, 16)])
            want = logits.gather(-1, targets[:, None]).squeeze(-1) - torch.logsumexp(logits, -1)
            assert torch.equal(sliced.target_logprobs(hidden, targets), want)
            lsm = torch.cat([torch.log_softmax(whole.logits(hidden[s:s + 16]), -1) for s in range(0, 41, 16)])
            lp, greedy = SharedPrefixLM._target_logprobs(sliced, hidden, targets)
            assert torch.equal(lp, lsm.gather(-1, targets[:, None]).squeeze(-1))
            assert torch.equal(greedy, lsm.argmax(-1) == targets)
            assert torch.equal(sliced.target_logprobs(hidden[:0], targets[:0]), torch.zeros(0))
    finally:
        torch.set_num_threads(before)


def test_a_recorded_command_carries_the_kernel_caps(monkeypatch):
    """Bands measured under a cap must say so in their command, or a re-run measures other kernels."""
    for v in precision.CAP_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    assert precision.cap_prefix() == ""
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    assert precision.cap_prefix() == "ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 "
