"""Plan a grid before it runs: layer-forwards, FLOPs, GPU-hours and memory, per cell and in total.

    depthprune plan --grid paper --gpu h100-80gb --gpus 8 [--json plan.json]

Counting uses the code that runs. A searcher's requests are produced by running the
searcher itself on a *loss landscape* and are counted with :func:`depthprune.scoring.replay_cost`,
the function that counts every result's ``cost`` (the same memo and prefix-cache policy,
the prior charged the same way), so a plan and a result count the same thing:

* evaluations — from the settings alone where they fix them (``oneshot``, ``greedy``, ``cbo``:
  exact), otherwise bounds from the settings (``beam``: each pair of beam sets shares at
  most one child; ``fbs``: its rounds; ``ga``, ``bo``: their evaluation limits);
* layer-forwards — which layers a searcher removes decides how much of the prefix cache
  it re-uses, so the count depends on the losses, even for ``oneshot``. The planner runs each
  searcher on ``landscapes`` synthetic loss landscapes (:class:`SyntheticLandscape`, ours) and
  reports their mean and range beside the bound that needs no losses at all (every set from
  the embeddings). ``bo`` is not simulated (a GP fit per evaluation): its count is the bound,
  scaled by the prefix-cache ratio measured in ``measured`` results when there are any;
* on recorded losses (a result's dense loss, prior and trace: :func:`recorded_losses`) the
  simulation reproduces a run exactly for every searcher whose path is a function of the
  losses (``oneshot``, ``greedy``, ``beam``, ``ga``, ``fbs``): :func:`check_result` compares the two,
  which is how a rehearsal's counted layer-forwards check the planner (and a test checks it
  on the tiny model).

FLOPs use the real models' shapes (:data:`SHAPES`, from their ``config.json``), tokens the
case file's calibration and evaluation sizes, time a named GPU (:data:`GPUS`) at an assumed
model-FLOPs utilisation, and memory the scorer's own prefix-cache budget
(:func:`depthprune.scoring._default_cache_bytes`: 40 % of free GPU memory). Every assumption is
a field of :class:`Assumptions` and is printed with the plan (:func:`assumption_lines`).
"""

from __future__ import annotations

import heapq
import json
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from depthprune.grid.cases import Cell, Grid
from depthprune.objectives.base import grad_chunk_rows
from depthprune.scoring import ENERGY, Request, replay_cost
from depthprune.search import SEARCHERS, get_searcher
from depthprune.search.base import Bounds, Searcher

GIB = 1 << 30

# -- hardware and model shapes -----------------------------------------------------------------


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


@dataclass(frozen=True)
class ModelShape:
    """The shapes that decide a decoder's FLOPs and memory."""

    model: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    source: str

    @property
    def layer_params(self) -> int:
        attn = self.hidden * self.heads * self.head_dim * 2 + 2 * self.hidden * self.kv_heads * self.head_dim
        return attn + 3 * self.hidden * self.intermediate + 2 * self.hidden  # SwiGLU MLP, two RMSNorms

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    def layer_flops_per_token(self, seq_len: int) -> float:
        """One block, forward: 2 FLOPs per weight, plus QKᵀ and AV over a causal context
        (on average seq_len/2 keys: 2 matmuls x 2 FLOPs x seq_len/2 x heads x head_dim)."""
        return 2.0 * self.layer_params + 2.0 * seq_len * self.heads * self.head_dim

    @property
    def head_flops_per_token(self) -> float:
        return 2.0 * self.hidden * self.vocab


#: Shapes of the models whose weights are not shipped, from each checkpoint's config.json.
SHAPES: dict[str, ModelShape] = {
    s.model: s
    for s in (
        ModelShape("llama3-8b", 32, 4096, 14336, 32, 8, 128, 128256, False, "meta-llama/Meta-Llama-3-8B config.json"),
        ModelShape("llama3.1-8b", 32, 4096, 14336, 32, 8, 128, 128256, False, "meta-llama/Llama-3.1-8B config.json"),
        ModelShape("qwen3-8b", 36, 4096, 12288, 32, 8, 128, 151936, False, "Qwen/Qwen3-8B config.json"),
        ModelShape("smollm2-135m", 30, 576, 1536, 9, 3, 64, 49152, True,
                   "HuggingFaceTB/SmolLM2-135M-Instruct config.json"),
        # attention FLOPs counted as full attention (15 of its 18 blocks attend within 512 tokens)
        ModelShape("gemma3-270m", 18, 640, 2048, 4, 1, 256, 262144, True,
                   "the config transformers reads from gemma-3-270m-q4_k_m.gguf (google/gemma-3-270m)"),
    )
}


def model_shape(model: str) -> ModelShape:
    """The table's shape, else the one read from the model's local ``config.json`` (tiny family)."""
    if model in SHAPES:
        return SHAPES[model]
    from transformers import AutoConfig

    from depthprune.models import locate

    config = AutoConfig.from_pretrained(locate(model))
    config = getattr(config, "text_config", None) or config
    heads = int(config.num_attention_heads)
    return ModelShape(
        model, int(config.num_hidden_layers), int(config.hidden_size), int(config.intermediate_size), heads,
        int(getattr(config, "num_key_value_heads", None) or heads),
        int(getattr(config, "head_dim", None) or config.hidden_size // heads), int(config.vocab_size),
        bool(getattr(config, "tie_word_embeddings", False)), f"{locate(model)}/config.json")


# -- measured throughput (depthprune.device_check) ---------------------------------------------------

#: The format ``depthprune measure device`` writes (``throughput.json``).
THROUGHPUT_SCHEMA = "depthprune-throughput/1"
#: Phases of a throughput file whose work is no-grad scoring (the forward rate) ...
FORWARD_PHASES = ("dense", "prior", "oneshot", "greedy")
#: ... and the one that is a gate-gradient pass (cbo's energy: the gradient rate).
GRADIENT_PHASE = "gate_gradient"
MEASURED_STATUSES = ("complete", "bounded")  # phases whose counted work really ran and was timed
PHASE_STATUSES = (*MEASURED_STATUSES, "skipped", "failed")

#: Substrings of a device name (as torch reports it) -> the GPUS entry it is.
_GPU_NAMES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("H200",), "h200-141gb"), (("H100", "PCIE"), "h100-pcie-80gb"), (("H100",), "h100-80gb"),
    (("A100", "40GB"), "a100-40gb"), (("A100",), "a100-80gb"), (("L40S",), "l40s-48gb"))


def gpu_kind(device_name: str) -> str | None:
    """The :data:`GPUS` key of a device name such as ``NVIDIA H200``, or None if none fits."""
    name = device_name.upper()
    return next((kind for parts, kind in _GPU_NAMES if all(p in name for p in parts)), None)


def phase_flops(shape: ModelShape, seq_len: int, tokens: int, layer_forwards: float, layer_backwards: float,
                head_passes: float) -> float:
    """FLOPs of measured work as a plan counts them (:func:`plan_cell`): per token, each layer-forward one
    block, each layer-backward two, each head pass (a set scored) the output head once."""
    per_token = shape.layer_flops_per_token(seq_len)
    return tokens * ((layer_forwards + 2 * layer_backwards) * per_token + head_passes * shape.head_flops_per_token)


class ThroughputError(ValueError):
    """A throughput file the planner cannot use; the message names the file and the field."""


@dataclass(frozen=True)
class MeasuredRate:
    """What one stand-in shape of a throughput file achieved, in FLOPs as a plan counts them."""

    label: str  # the shape's name in the file, e.g. "llama3.1-8b"
    shape: ModelShape
    seq_len: int
    batch_size: int
    forward: float  # FLOP/s of the no-grad scoring phases (FORWARD_PHASES) together
    gradient: float | None  # FLOP/s of a gate-gradient pass; None where the file has none
    layer_forwards_per_second: float  # over the same forward phases
    phases: tuple[str, ...]  # the phases the forward rate comes from


@dataclass(frozen=True)
class Throughput:
    """A ``throughput.json`` read for planning: where, on what and when it was measured."""

    file: str
    gpu: str  # the device's name as torch reported it
    date: str
    rates: tuple[MeasuredRate, ...]
    finished: bool = True  # False: the run was stopped before its end (the file holds what it measured)

    @property
    def kind(self) -> str | None:
        return gpu_kind(self.gpu)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "gpu": self.gpu, "gpu_kind": self.kind, "date": self.date, "finished": self.finished,
                "rates": [{**asdict(r), "shape": asdict(r.shape)} for r in self.rates]}


class _Fields:
    """Typed reads of a JSON document; every error names the file and the field (``shapes[1].name``)."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, where: str, problem: str) -> NoReturn:
        raise ThroughputError(f"{self.file}: field {where}: {problem}")

    def get(self, obj: dict[str, Any], where: str) -> Any:
        key = where.rsplit(".", 1)[-1]
        if key not in obj:
            self.fail(where, "missing")
        return obj[key]

    def mapping(self, obj: dict[str, Any], where: str) -> dict[str, Any]:
        value = self.get(obj, where)
        if not isinstance(value, dict):
            self.fail(where, f"expected an object, got {value!r:.60}")
        return value

    def text(self, obj: dict[str, Any], where: str) -> str:
        value = self.get(obj, where)
        if not isinstance(value, str) or not value:
            self.fail(where, f"expected a non-empty string, got {value!r:.60}")
        return value

    def integer(self, obj: dict[str, Any], where: str, minimum: int = 0) -> int:
        value = self.get(obj, where)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(where, f"expected an integer >= {minimum}, got {value!r:.60}")
        return value

    def positive(self, obj: dict[str, Any], where: str) -> float:
        value = self.get(obj, where)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            self.fail(where, f"expected a number > 0, got {value!r:.60}")
        return float(value)


def _read_shape(f: _Fields, obj: dict[str, Any], where: str, label: str) -> ModelShape:
    dims = {k: f.integer(obj, f"{where}.{k}", 1) for k in ("layers", "hidden", "intermediate", "heads", "kv_heads",
                                                            "head_dim", "vocab")}
    tied = f.get(obj, f"{where}.tied")
    if not isinstance(tied, bool):
        f.fail(f"{where}.tied", f"expected true or false, got {tied!r:.60}")
    return ModelShape(label, dims["layers"], dims["hidden"], dims["intermediate"], dims["heads"], dims["kv_heads"],
                      dims["head_dim"], dims["vocab"], tied, f"{f.file}: {where}")


def _read_rate(f: _Fields, obj: dict[str, Any], where: str) -> MeasuredRate:
    """One shape's rates: the FLOPs of its measured phases (:func:`phase_flops`) over their seconds."""
    if not isinstance(obj, dict):
        f.fail(where, f"expected an object, got {obj!r:.60}")
    label = f.text(obj, f"{where}.name")
    shape = _read_shape(f, f.mapping(obj, f"{where}.shape"), f"{where}.shape", label)
    calib = f.mapping(obj, f"{where}.calibration")
    seq_len = f.integer(calib, f"{where}.calibration.seq_len", 1)
    batch_size = f.integer(calib, f"{where}.calibration.batch_size", 1)
    tokens = f.integer(calib, f"{where}.calibration.tokens", 1)
    phases = f.mapping(obj, f"{where}.phases")
    flops = seconds = forwards = 0.0
    used: list[str] = []
    gradient = None
    for name in (*FORWARD_PHASES, GRADIENT_PHASE):
        if name not in phases:
            continue
        at = f"{where}.phases.{name}"
        rec = f.mapping(phases, at)
        status = f.get(rec, f"{at}.status")
        if status not in PHASE_STATUSES:
            f.fail(f"{at}.status", f"expected one of {', '.join(PHASE_STATUSES)}, got {status!r:.60}")
        if status not in MEASURED_STATUSES:
            continue
        sec = f.positive(rec, f"{at}.seconds")
        work = [f.integer(rec, f"{at}.{k}") for k in ("layer_forwards", "layer_backwards", "evaluations")]
        done = phase_flops(shape, seq_len, tokens, *work)
        if name == GRADIENT_PHASE:
            gradient = done / sec if done > 0 else None
        elif work[0] > 0:
            flops, seconds, forwards = flops + done, seconds + sec, forwards + work[0]
            used.append(name)
    if not used:
        f.fail(f"{where}.phases", f"no measured forward phase (one of {', '.join(FORWARD_PHASES)} with status "
                                  f"{' or '.join(MEASURED_STATUSES)} and layer_forwards > 0)")
    return MeasuredRate(label, shape, seq_len, batch_size, flops / seconds, gradient, forwards / seconds, tuple(used))


def load_throughput(path: str | Path) -> Throughput:
    """Read and check a ``throughput.json`` (:mod:`depthprune.device_check`); raises :class:`ThroughputError`."""
    file = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise ThroughputError(f"{file}: cannot be read ({err.strerror or err})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ThroughputError(f"{file}: not a JSON file ({err})") from None
    f = _Fields(file)
    if not isinstance(data, dict):
        f.fail("(top level)", f"expected an object, got {type(data).__name__}")
    schema = f.get(data, "schema")
    if schema != THROUGHPUT_SCHEMA:
        f.fail("schema", f"expected {THROUGHPUT_SCHEMA!r}, got {schema!r:.60}")
    gpu = f.text(f.mapping(data, "environment"), "environment.device_name")
    shapes = f.get(data, "shapes")
    if not isinstance(shapes, list) or not shapes:
        f.fail("shapes", f"expected a non-empty list, got {shapes!r:.60}")
    rates = tuple(_read_rate(f, s, f"shapes[{i}]") for i, s in enumerate(shapes))
    finished = f.get(data, "finished")
    if not isinstance(finished, bool):
        f.fail("finished", f"expected true or false, got {finished!r:.60}")
    return Throughput(file, gpu, f.text(data, "created"), rates, finished)


@dataclass(frozen=True)
class Rate:
    """FLOP per hour a plan assumes for one model: forward work, and gate-gradient passes (cbo)."""

    forward: float
    gradient: float
    source: str = ""  # where it comes from, one sentence (empty: the assumed MFU)


def _dims(s: ModelShape) -> tuple[int, ...]:
    return s.layers, s.hidden, s.intermediate, s.heads, s.kv_heads, s.head_dim, s.vocab


def _describe(s: ModelShape) -> str:
    return f"{s.layers} layers, hidden {s.hidden}, MLP {s.intermediate}, heads {s.heads}/{s.kv_heads}, vocab {s.vocab}"


def _times(x: float) -> str:
    return f"{x:.2f}x" if x < 10 else f"{x:,.0f}x"


def measured_rate(shape: ModelShape, gpu: GPU, t: Throughput) -> Rate:
    """``shape``'s rate from the file: the measurement at the same shape, else the one nearest in block
    size, its achieved FLOP/s applied to this model's FLOPs; scaled by dense bf16 peaks where the file
    was measured on another GPU kind than the plan's. The sentence says which and how."""
    same = [r for r in t.rates if _dims(r.shape) == _dims(shape)]
    r = same[0] if same else min(t.rates, key=lambda m: abs(math.log(m.shape.layer_params / shape.layer_params)))
    if same:
        how = "measured at this shape" + ("" if r.label == shape.model else f" (the file's {r.label})")
    else:
        seq = r.seq_len
        how = (f"not measured at this shape: {r.label}'s ({_describe(r.shape)}) achieved FLOP/s applied to "
               f"{shape.model}'s FLOPs ({_describe(shape)}; per token, its block "
               f"{_times(shape.layer_flops_per_token(seq) / r.shape.layer_flops_per_token(seq))} and its head "
               f"{_times(shape.head_flops_per_token / r.shape.head_flops_per_token)} the measured shape's)")
    scale, on = 1.0, ""
    kind = t.kind
    if kind is None:
        on = f"; measured on {t.gpu!r}, which is no --gpu kind: used as is for the {gpu.name}"
    elif GPUS[kind] != gpu:
        scale = gpu.bf16_tflops / GPUS[kind].bf16_tflops
        on = f"; scaled from the {GPUS[kind].name} to the {gpu.name} by their dense bf16 peaks (x{scale:.2f})"
    forward = r.forward * scale
    gradient = (r.gradient if r.gradient is not None else r.forward) * scale
    grad_text = (f"{gradient / 1e12:,.3g} TFLOP/s in gate-gradient passes" if r.gradient is not None
                 else "gate-gradient passes at the forward rate (none measured)")
    source = (f"{shape.model}: {forward / 1e12:,.3g} TFLOP/s forward ({forward / (gpu.bf16_tflops * 1e10):.3g} % of "
              f"the {gpu.name}'s peak; {r.layer_forwards_per_second * scale:,.3g} layer-forwards/s of "
              f"{r.batch_size} x {r.seq_len} tokens, from {', '.join(r.phases)}), {grad_text}; {how}{on}")
    return Rate(forward * 3600, gradient * 3600, source)


def throughput_lines(t: Throughput, rates: dict[str, Rate], micro: dict[str, tuple[int, int]]) -> list[str]:
    """What the time estimate rests on when it comes from a measurement: file, GPU, date, per model."""
    lines = [f"Throughput: measured, not assumed (--mfu is not used): {t.file}, {t.gpu}, {t.date}; FLOPs counted as "
             "this plan counts them, over the seconds of the suite's own scoring phases on random-weight stand-ins "
             "(depthprune.device_check)." + ("" if t.finished else " The run did not reach its end (stopped or "
                                                "killed): its file holds the phases it finished."),
             *(f"Measured rate, {rate.source}." for rate in rates.values())]
    measured = sorted({(r.batch_size, r.seq_len) for r in t.rates})
    other = {o: bs for o, bs in micro.items() if bs not in measured}
    if other:
        lines.append("Measured micro-batches differ: " + ", ".join(f"{b} x {s}" for b, s in measured)
                     + " tokens, this grid's " + ", ".join(f"{o} {b} x {s}" for o, (b, s) in other.items())
                     + "; rates are taken as they are (smaller micro-batches usually run at a lower rate).")
    return lines


# -- evaluation sizes ----------------------------------------------------------------------------

#: Paper-profile evaluation tasks: (documents, loglikelihood requests per document, tokens per
#: request). Documents: the split lm-eval scores (hellaswag/piqa/boolq/winogrande validation,
#: ARC test, lambada_openai test). Tokens per request (context + continuation, Llama-3 tokenizer)
#: are our rough guesses, not measured.
EVAL_TASKS: dict[str, tuple[int, int, int]] = {
    "hellaswag": (10042, 4, 110),
    "winogrande": (1267, 2, 30),
    "arc_easy": (2376, 4, 50),
    "arc_challenge": (1172, 4, 55),
    "piqa": (1838, 2, 60),
    "boolq": (3270, 2, 170),
    "lambada": (5153, 1, 80),
}
#: WikiText-2 (raw) test: ~287k tokens with GPT-2's tokenizer (the Hugging Face perplexity
#: guide); taken as the Llama-3/Qwen3 count too (not measured here).
WIKITEXT2_TEST_TOKENS = 287_000


# -- assumptions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assumptions:
    """Everything the plan assumes; printed with it. Defaults are ours unless a field says so."""

    gpu: str = "h100-80gb"
    gpus: int = 8
    mfu: float = 0.35  # model-FLOPs utilisation of the GPU's dense bf16 peak (ours; batch-8 inference)
    dtype_bytes: int = 2  # bf16 weights and hidden states (the paper grid's dtype)
    landscapes: int = 4  # synthetic loss landscapes each simulated searcher runs on
    margin_tokens_per_item: int = 160  # padded tokens per margin item, options packed after the prompt (guess)
    cuda_context_gib: float = 1.0  # CUDA context + allocator slack per process (ours)
    cache_fraction: float = 0.4  # scoring._default_cache_bytes on CUDA: 40 % of free memory
    keep_best: int = 4  # the Scorer's default keep_best (states kept per set size)
    measured: tuple[str, ...] = ()  # result directories whose prefix-cache ratios replace the bo bound


def assumption_lines(a: Assumptions, gpu: GPU) -> list[str]:
    """Every assumption of a plan, one sentence each."""
    return [
        f"GPU: {a.gpus} x {gpu.name}, {gpu.bf16_tflops:g} TFLOP/s dense bf16 peak ({gpu.source}), "
        f"{gpu.memory_gib:g} GiB; one worker (one model loaded) per GPU.",
        f"Throughput: {a.mfu:.0%} of that peak on every forward and backward (--mfu); model loading, "
        "tokenisation, lm-eval's bookkeeping and GP fits (bo) are not counted.",
        "FLOPs per token and block: 2 x block weights + causal attention (2 x seq_len x heads x head_dim); "
        "the output head (2 x hidden x vocab) once per token of every evaluated set; a backward pass "
        "(cbo's gate gradients, weights frozen) costs as much as its forward.",
        "Layer-forwards as results count them (scoring.replay_cost: as if alone, the prior charged, the prefix "
        "cache's byte budget not binding). 'bound' = every set run from the embeddings (needs no losses).",
        f"Expected layer-forwards: the searcher's own code run on {a.landscapes} synthetic loss landscapes "
        "(U-shaped single-removal losses with noise, adjacent removals interact); bo is not simulated: "
        "its bound, times the prefix-cache ratio of measured bo results when --measured gives any.",
        f"Tokens: ppl/kl = windows x seq_len; margin = items x {a.margin_tokens_per_item} padded tokens "
        "(--margin-tokens, a guess; a measured result's tokens_per_pass replaces it).",
        f"Evaluation (paper profile): WikiText-2 test ~{WIKITEXT2_TEST_TOKENS // 1000}k tokens, C4 windows x "
        "seq_len, lm-eval documents x requests x tokens per request (EVAL_TASKS, tokens guessed); every cell "
        "evaluated once plus the dense model once per model (the evaluation cache is not credited).",
        f"Memory per worker: weights (params x {a.dtype_bytes} B) + the prefix cache (its demand: the dense "
        f"states and {a.keep_best} sets of each size at every boundary, capped by scoring._default_cache_bytes: "
        f"{a.cache_fraction:.0%} of the memory free after loading) + the largest of: a search run's captured states "
        "(capped by the same budget: a run captures before the cache trims) and one micro-batch's block and "
        "2048-token head activations; an evaluation batch through a block and one 2048-token head chunk (the head "
        "is chunked); cbo's gate-gradient backward (blocks and head chunks recomputed in the backward: two "
        "boundary states per block for one micro-batch, one block's activations, one head chunk of at most "
        "objectives.base.GRAD_CHUNK_BYTES of float32 logits) + "
        f"{a.cuda_context_gib:g} GiB CUDA context.",
        "Grid-run totals share the dense pass and the prior per model and objective (cells report them as "
        "if alone); sets re-used between a condition's searches are not subtracted (an upper bound).",
        "Wall clock: tasks (a model's or a model and objective's cells) placed longest-first on the GPUs.",
    ]


# -- loss landscapes and request simulation -------------------------------------------------------

Losses = Callable[[frozenset[int]], float]


class SyntheticLandscape:
    """A seeded stand-in for a calibration loss over removal sets (ours).

    f(S) = f0 + Σ_{i∈S} p_i + γ Σ_{adjacent i, i+1 ∈ S} √(p_i p_{i+1}) + ε(S): single-removal
    losses p high at the first and last blocks and low in between (the usual shape), with
    log-normal noise; removing neighbours costs extra, so f is not additive; ε < 1e-6 breaks ties.
    """

    def __init__(self, n_layers: int, seed: int, f0: float = 2.0, gamma: float = 0.5) -> None:
        rng = random.Random(seed)
        last = n_layers - 1
        self.p = [(0.05 + 2.0 * math.exp(-i / 1.5) + 1.0 * math.exp(-(last - i))) * math.exp(0.6 * rng.gauss(0, 1))
                  for i in range(n_layers)]
        self.f0, self.gamma, self.seed = f0, gamma, seed

    def __call__(self, s: frozenset[int]) -> float:
        layers = sorted(s)
        value = self.f0 + sum(self.p[i] for i in layers)
        value += self.gamma * sum(math.sqrt(self.p[i] * self.p[i + 1]) for i in layers if i + 1 in s)
        return value + 1e-7 * random.Random(hash((self.seed, *layers))).random()


class NotRecorded(KeyError):
    """A simulated searcher asked for a set the recorded run never scored (its path differs)."""


class RecordedLosses:
    """The losses a run recorded; asking for any other set raises :class:`NotRecorded`."""

    def __init__(self, losses: dict[frozenset[int], float]) -> None:
        self.losses = losses

    def __call__(self, s: frozenset[int]) -> float:
        try:
            return self.losses[s]
        except KeyError:
            raise NotRecorded(f"the run never scored {sorted(s)}") from None


def recorded_losses(result: dict[str, Any]) -> RecordedLosses:
    """A result's dense loss, prior (single removals) and trace as a loss function."""
    losses: dict[frozenset[int], float] = {frozenset(): float(result["dense_calibration_loss"])}
    losses.update({frozenset([i]): math.nan if v is None else float(v) for i, v in enumerate(result["prior"])})
    losses.update({frozenset(s): math.nan if v is None else float(v) for s, v in result["trace"]})
    return RecordedLosses(losses)


class _RecordingScore:
    """The score callable a searcher gets, logging requests exactly as :class:`~depthprune.scoring.Scorer`
    does (every call, memo hits included; ``energy()`` logs ENERGY, then the dense set and the singles)."""

    def __init__(self, losses: Losses, n_layers: int) -> None:
        self.losses, self.n_layers = losses, n_layers
        self.requests: list[Request] = []
        self.memo: dict[frozenset[int], float] = {}

    def __call__(self, removed: Iterable[int]) -> float:
        s = frozenset(removed)
        self.requests.append(s)
        if s not in self.memo:
            self.memo[s] = float(self.losses(s))
        return self.memo[s]

    def many(self, sets: Iterable[Iterable[int]]) -> list[float]:
        return [self(s) for s in sets]

    def energy(self) -> tuple[list[float], list[list[float]]]:
        if isinstance(self.losses, RecordedLosses):
            raise NotRecorded("cbo's energy comes from gate gradients, which a result does not record")
        self.requests.append(ENERGY)
        base = self(frozenset())
        h = [self(frozenset([i])) - base for i in range(self.n_layers)]
        f = self.losses  # pair terms from the landscape itself (the Scorer gets them from gradients)
        j = [[0.0 if a == b else (f(frozenset([a, b])) - h[a] - h[b] - base) / 2.0 for b in range(self.n_layers)]
             for a in range(self.n_layers)]
        return h, j


@dataclass(frozen=True)
class Simulated:
    """What one run of a searcher on a loss landscape costs, counted as results count it."""

    evaluations: int
    layer_forwards: int
    layer_backwards: int
    removed: tuple[int, ...]


def simulate(searcher: str, params: dict[str, Any], n_layers: int, budget: int, losses: Losses, seed: int = 0,
             use_prior: bool = True, protected: Sequence[int] = (), keep_best: int = 4) -> Simulated:
    """Run ``searcher`` on ``losses`` and count its requests with :func:`~depthprune.scoring.replay_cost`.

    Mirrors :meth:`depthprune.recipe.Calibration.search`: the prior is given when ``use_prior``
    and charged (its singles first) when the searcher asks for it.
    """
    score = _RecordingScore(losses, n_layers)
    prior = [float(losses(frozenset([i]))) for i in range(n_layers)] if use_prior else None
    result = get_searcher(searcher, **params).search(n_layers=n_layers, budget=budget, score=score, seed=seed,
                                                     protected=frozenset(protected), prior=prior)
    singles = [frozenset([i]) for i in range(n_layers)] if result.info.get("used_given_prior") else []
    known = {**score.memo, **{s: float(losses(s)) for s in singles}}
    replay = replay_cost([*singles, *score.requests], known, n_layers, keep_best, final_norm=True)
    return Simulated(replay.evaluations, replay.layer_forwards, replay.layer_backwards, result.removed)


def check_result(result: dict[str, Any], keep_best: int = 4) -> tuple[Simulated, dict[str, int]]:
    """(the planner's count on the run's recorded losses, the run's own count).

    Equal for every searcher whose path is a function of the losses; raises
    :class:`NotRecorded` where the simulated searcher leaves the recorded path.
    """
    settings = result.get("settings", {})
    ident = result["identity"]
    sim = simulate(ident["search"], result["search_params"], int(result["n_layers"]), int(ident["budget"]),
                   recorded_losses(result), seed=int(ident["search_seed"]),
                   use_prior=bool(settings.get("use_prior", True)), protected=settings.get("protected", ()),
                   keep_best=keep_best)
    cost = result["cost"]
    return sim, {"evaluations": int(cost["evaluations"]), "layer_forwards": int(cost["layer_forwards"]),
                 "layer_backwards": int(cost["layer_backwards"])}


# -- evaluations from the settings ---------------------------------------------------------------

#: Searchers the planner does not simulate (a GP fit per evaluation): bounds only.
NOT_SIMULATED = ("bo",)


def evaluation_bounds(searcher: str, params: dict[str, Any], n_layers: int, budget: int) -> Bounds:
    """Fewest and most distinct sets a grid cell's cost counts: the searcher's own rule
    (:meth:`depthprune.search.base.Searcher.evaluation_bounds`), with the budget checked."""
    s = get_searcher(searcher, **params)
    if not 0 < budget < n_layers:
        raise ValueError(f"budget {budget} is out of range for {n_layers} layers; allowed 1..{n_layers - 1}")
    try:
        return s.evaluation_bounds(n_layers, budget)
    except NotImplementedError:
        raise ValueError(f"searcher {searcher!r} has no planning rule (Searcher.evaluation_bounds); "
                         f"those with one: {', '.join(n for n in SEARCHERS.names() if _has_rule(n))}") from None


def _has_rule(name: str) -> bool:
    return SEARCHERS[name].evaluation_bounds is not Searcher.evaluation_bounds


def forwards_bound(n_layers: int, bounds: Bounds) -> int:
    """Layer-forwards with no prefix sharing at the most evaluations (needs no losses): the dense
    pass, every set from the embeddings, cbo's gate-gradient passes."""
    from depthprune.gates import energy_passes

    total = n_layers + sum(count * (n_layers - size) for size, count in bounds.sizes.items() if size > 0)
    return total + (energy_passes(n_layers)[0] if bounds.energy else 0)


# -- the plan ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """GiB one worker holds at its peak, by component, and the prefix cache's budget and demand.

    Besides the weights and the prefix cache, a worker holds at one time the largest of: a search
    run's captured states (up to the cache's budget again: a run captures before the cache trims)
    plus one micro-batch's activations; an evaluation batch's logits; cbo's gate-gradient backward.
    """

    weights: float
    prefix_cache: float  # what the cache holds: its demand, capped by its budget
    in_flight: float  # the largest phase below
    phase: str  # "search" | "evaluation" | "cbo backward"
    cuda_context: float
    cache_budget: float  # scoring._default_cache_bytes
    cache_demand: float  # dense states + keep_best sets of each size, every boundary

    @property
    def peak(self) -> float:
        return self.weights + self.prefix_cache + self.in_flight + self.cuda_context


@dataclass
class CellPlan:
    cell: str
    model: str
    objective: str
    search: str
    budget: int
    n_layers: int
    calibration_tokens: int
    evaluations: tuple[int, int]  # (fewest, most) from the settings
    layer_forwards: float  # expected (see basis)
    layer_forwards_range: tuple[int, int]  # over the landscapes (the bound where not simulated)
    layer_forwards_bound: int  # every set from the embeddings, at the most evaluations
    layer_backwards: int
    basis: str
    search_tflop: float
    eval_tflop: float | None  # None: the profile's tasks are not in EVAL_TASKS
    shared_tflop: float  # the dense pass and the prior, which a grid run computes once per condition
    gpu_hours: float
    gpu_hours_bound: float
    memory: Memory
    measured: dict[str, Any] | None = None


@dataclass
class GridPlan:
    grid: str
    assumptions: Assumptions
    gpu: GPU
    shapes: dict[str, ModelShape]
    cells: list[CellPlan]
    totals: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, dict[str, float]] = field(default_factory=dict)  # split -> task -> GPU-hours
    notes: list[str] = field(default_factory=list)
    throughput: Throughput | None = None  # measured rates replace the assumed MFU (plan_grid)
    rates: dict[str, Rate] = field(default_factory=dict)  # model -> its measured rate (with throughput only)
    micro_batches: dict[str, tuple[int, int]] = field(default_factory=dict)  # objective -> (batch, tokens)

    def assumption_text(self) -> list[str]:
        lines = assumption_lines(self.assumptions, self.gpu)
        if self.throughput is not None:  # the measurement replaces the MFU sentence
            at = next(i for i, line in enumerate(lines) if line.startswith("Throughput:"))
            lines[at:at + 1] = throughput_lines(self.throughput, self.rates, self.micro_batches)
        return lines

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "grid": self.grid, "assumptions": asdict(self.assumptions), "gpu": asdict(self.gpu),
            "assumption_text": self.assumption_text(),
            "shapes": {k: {**asdict(v), "params": v.params} for k, v in self.shapes.items()},
            "cells": [{**asdict(c), "peak_gib": c.memory.peak} for c in self.cells],
            "totals": self.totals, "tasks": self.tasks, "notes": self.notes,
        }
        if self.throughput is not None:
            out["throughput"] = {**self.throughput.to_dict(),
                                 "per_model": {m: {"forward_tflops": r.forward / 3600 / 1e12,
                                                   "gradient_tflops": r.gradient / 3600 / 1e12, "source": r.source}
                                               for m, r in self.rates.items()}}
        return out


def calibration_tokens(grid: Grid, objective: str, a: Assumptions,
                       measured_tokens: int | None = None) -> tuple[int, int]:
    """(tokens of one pass over the calibration set, tokens per sequence), from the case file."""
    from depthprune.objectives import make_objective
    from depthprune.profiles import get_profile

    obj = make_objective(objective, get_profile("paper"), **grid.objective_params.get(objective, {})).params()
    if "n_samples" in obj and "seq_len" in obj:
        return int(obj["n_samples"]) * int(obj["seq_len"]), int(obj["seq_len"])
    items = int(obj.get("n_items", obj.get("n_samples", 1)))
    per_item = a.margin_tokens_per_item if not measured_tokens else max(1, round(measured_tokens / items))
    return items * per_item, per_item


def eval_tokens(grid: Grid, profile: str) -> tuple[int, int] | None:
    """(tokens one evaluation reads, its window length); None where the tasks are not tabled."""
    cfg = grid.eval_config(profile)
    if profile != "paper" or any(t not in EVAL_TASKS for t in cfg.tasks):
        return None
    tokens = 0
    if "wikitext2" in cfg.perplexity:
        tokens += (WIKITEXT2_TEST_TOKENS // cfg.seq_len) * cfg.seq_len
    if "c4" in cfg.perplexity:
        tokens += cfg.c4_windows * cfg.seq_len
    for task in (*cfg.tasks, *(("lambada",) if cfg.lambada else ())):
        docs, requests, per = EVAL_TASKS[task]
        tokens += min(docs, cfg.limit or docs) * requests * per
    return tokens, cfg.seq_len


def worker_memory(shape: ModelShape, grid: Grid, a: Assumptions, gpu: GPU, calib_tokens: int, seq: int,
                  search: str, budget: int, profile: str) -> Memory:
    """One worker's peak by component (see :class:`Memory` and :func:`assumption_lines`)."""
    b = a.dtype_bytes
    weights = shape.params * b
    budget_bytes = max(0.0, a.cache_fraction * (gpu.memory_gib * GIB - weights - a.cuda_context_gib * GIB))
    state = calib_tokens * shape.hidden * b  # one boundary's states over the calibration set
    demand = (shape.layers + a.keep_best * sum(shape.layers - s for s in range(1, budget + 1))) * state
    micro = grid.batch_size * seq
    logits = shape.vocab * (b + 8)  # per token: logits, their float copy, log-softmax / logsumexp
    block = (6 * shape.hidden + 3 * shape.intermediate) * b  # per token through one block (hidden- and MLP-sized)
    phases = {  # one micro-batch through a block + a 2048-token head chunk
        "search": min(budget_bytes, shape.layers * state) + micro * block + 2048 * logits}
    ev = grid.eval_config(profile)
    phases["evaluation"] = ev.batch_size * ev.seq_len * block + 2048 * logits  # the head is chunked
    if search == "cbo":  # gate gradients, weights frozen, blocks and head chunks recomputed (gates.py):
        # per block its input and gated update are kept; one block's norm, q/k/v/out, MLP and gate
        # inputs live at a time in the backward, and one head chunk's logits
        per_layer = 5 * shape.hidden + 2 * shape.kv_heads * shape.head_dim + 3 * shape.intermediate
        grad_rows = grad_chunk_rows(shape.vocab, 2048)
        phases["cbo backward"] = (2 * shape.layers * micro * shape.hidden * b + micro * per_layer * b
                                  + grad_rows * logits)
    phase = max(phases, key=phases.__getitem__)
    return Memory(weights / GIB, min(budget_bytes, demand) / GIB, phases[phase] / GIB, phase, a.cuda_context_gib,
                  budget_bytes / GIB, demand / GIB)


def _measured_index(dirs: Sequence[str]) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Measured results by (grid, cell), and each searcher's counted / bound layer-forwards ratio."""
    from depthprune.grid.results import iter_results

    by_cell: dict[str, dict[str, Any]] = {}
    sums: dict[str, list[float]] = {}
    for stand_in in (False, True):
        for r in iter_results(dirs, stand_in=stand_in):
            ident = r["identity"]
            n, m = int(r["n_layers"]), int(ident["budget"])
            try:
                bound = forwards_bound(n, evaluation_bounds(ident["search"], r["search_params"], n, m))
            except (TypeError, ValueError):
                continue
            by_cell.setdefault(r["cell"], {
                "grid": ident["grid"], "stand_in": bool(ident["stand_in"]), "n_layers": n,
                "evaluations": r["cost"]["evaluations"], "layer_forwards": r["cost"]["layer_forwards"],
                "tokens_per_pass": (r.get("calibration_protocol") or {}).get("tokens_per_pass")})
            acc = sums.setdefault(ident["search"], [0.0, 0.0])
            acc[0] += r["cost"]["layer_forwards"]
            acc[1] += bound
    return by_cell, {k: v[0] / v[1] for k, v in sums.items() if v[1] > 0}


def plan_cell(grid: Grid, cell: Cell, shape: ModelShape, a: Assumptions, gpu: GPU,
              measured: dict[str, Any] | None = None, ratios: dict[str, float] | None = None,
              memo: dict[tuple, list[Simulated]] | None = None, rate: Rate | None = None) -> CellPlan:
    """One cell's counts, FLOPs, GPU-hours and memory (``memo``: simulations shared between cells;
    ``rate``: a measured one, :func:`measured_rate`, instead of the GPU's peak at the assumed MFU)."""
    from depthprune.models import MODELS

    params = grid.search_params(cell)  # the cell's variant too (the real grid's rank panel samples 512 sets)
    n, m = shape.layers, cell.budget
    bounds = evaluation_bounds(cell.search, params, n, m)
    bound = forwards_bound(n, bounds)
    backwards, evaluations = 0, (bounds.low + bounds.high) / 2
    ratio = (ratios or {}).get(cell.search)
    if cell.search == "bi":  # no loss search: the dense pass and the chosen set, fixed by the settings
        expected, spread, basis, evaluations = float(bound), (bound, bound), "fixed (no loss search)", bounds.high
    elif cell.search in NOT_SIMULATED:
        expected = bound * ratio if ratio else float(bound)
        spread = (round(expected), round(expected))
        basis = f"bound x measured {ratio:.2f}" if ratio else "bound (not simulated)"
        evaluations = bounds.high
    else:
        key = (cell.search, repr(sorted(params.items())), n, m, cell.seed, a.landscapes, a.keep_best)
        memo = {} if memo is None else memo
        if key not in memo:
            memo[key] = [simulate(cell.search, params, n, m, SyntheticLandscape(n, seed), seed=cell.seed,
                                  keep_best=a.keep_best) for seed in range(a.landscapes)]
        runs = memo[key]
        counts = [r.layer_forwards for r in runs]
        expected, spread = sum(counts) / len(counts), (min(counts), max(counts))
        backwards = max(r.layer_backwards for r in runs)
        evaluations = sum(r.evaluations for r in runs) / len(runs)
        basis = f"simulated x{a.landscapes}"
        outside = [r.evaluations for r in runs if not bounds.low <= r.evaluations <= bounds.high]
        if outside:  # the settings' bounds are derived from the code the simulation runs: they must hold
            raise AssertionError(f"{cell.id}: simulated evaluations {outside} outside [{bounds.low}, {bounds.high}]")
    tokens, seq = calibration_tokens(grid, cell.objective, a, (measured or {}).get("tokens_per_pass"))
    per_token, head = shape.layer_flops_per_token(seq), shape.head_flops_per_token
    search = tokens * ((expected + 2 * backwards) * per_token + (evaluations + 1) * head)
    search_bound = tokens * ((bound + 2 * backwards) * per_token + (bounds.high + 1) * head)
    shared = tokens * ((n + math.comb(n, 2)) * per_token + (n + 1) * head)  # dense pass + prior from the dense states
    profile = MODELS[cell.model].profile if cell.model in MODELS else "paper"
    ev = eval_tokens(grid, profile)
    evaluation = None if ev is None else ev[0] * ((n - m) * shape.layer_flops_per_token(ev[1]) + head)
    if rate is None:
        assumed = gpu.bf16_tflops * 1e12 * a.mfu * 3600
        hours = (search + (evaluation or 0.0)) / assumed
        hours_bound = (search_bound + (evaluation or 0.0)) / assumed
    else:  # gate-gradient passes (cbo: each L forwards + L backwards) at their own measured rate
        gradient = tokens * 3 * backwards * per_token
        hours = (search - gradient + (evaluation or 0.0)) / rate.forward + gradient / rate.gradient
        hours_bound = (search_bound - gradient + (evaluation or 0.0)) / rate.forward + gradient / rate.gradient
    return CellPlan(
        cell=cell.id, model=cell.model, objective=cell.objective, search=cell.search, budget=m, n_layers=n,
        calibration_tokens=tokens, evaluations=(bounds.low, bounds.high), layer_forwards=expected,
        layer_forwards_range=spread, layer_forwards_bound=bound, layer_backwards=backwards, basis=basis,
        search_tflop=search / 1e12, eval_tflop=None if evaluation is None else evaluation / 1e12,
        shared_tflop=shared / 1e12, gpu_hours=hours, gpu_hours_bound=hours_bound,
        memory=worker_memory(shape, grid, a, gpu, tokens, seq, cell.search, m, profile), measured=measured)


def makespan(hours: Iterable[float], gpus: int) -> float:
    """Wall-clock hours of tasks placed longest-first, each on the least loaded of ``gpus`` GPUs."""
    loads = [0.0] * gpus
    heapq.heapify(loads)
    for h in sorted(hours, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + h)
    return max(loads)


def plan_grid(grid: Grid, assumptions: Assumptions | None = None, throughput: Throughput | None = None) -> GridPlan:
    """Every cell of ``grid`` planned, with totals, per-task GPU-hours and the warnings that apply.

    ``throughput`` (:func:`load_throughput`): time from measured rates instead of the assumed MFU.
    """
    from depthprune.models import MODELS

    a = assumptions or Assumptions()
    if a.gpu not in GPUS:
        raise ValueError(f"gpu {a.gpu!r} is unknown; allowed: {', '.join(GPUS)}")
    if not 0 < a.mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {a.mfu}")
    if a.gpus < 1 or a.landscapes < 1:
        raise ValueError(f"gpus and landscapes must be >= 1, got {a.gpus} and {a.landscapes}")
    gpu = GPUS[a.gpu]
    measured, ratios = _measured_index(a.measured) if a.measured else ({}, {})
    shapes = {m: model_shape(m) for m in sorted({c.model for c in grid.cells()})}  # [[cells]] blocks add models
    for m, shape in shapes.items():
        known = MODELS[m].n_layers if m in MODELS else None
        if known is not None and known != shape.layers:
            raise ValueError(f"{m}: the shape table says {shape.layers} layers, the registry {known}")
    rate = gpu.bf16_tflops * 1e12 * a.mfu * 3600
    rates = {m: Rate(rate, rate) if throughput is None else measured_rate(shape, gpu, throughput)
             for m, shape in shapes.items()}
    cells = []
    runs: dict[tuple, list[Simulated]] = {}  # a landscape depends on the depth only: simulate once per shape
    for cell in grid.cells():
        mine = measured.get(cell.id)
        if mine is not None and mine["n_layers"] != shapes[cell.model].layers:
            mine = None  # measured on a model of another depth: not this cell
        cells.append(plan_cell(grid, cell, shapes[cell.model], a, gpu, mine, ratios, runs,
                               None if throughput is None else rates[cell.model]))
    groups: dict[tuple[str, str], list[CellPlan]] = {}
    for c in cells:
        groups.setdefault((c.model, c.objective), []).append(c)
    dense_eval = {m: next(c for c in cells if c.model == m) for m in shapes}
    dense_hours = {}
    for m, c in dense_eval.items():  # the dense model's evaluation, once per model: L blocks instead of L - M
        dense_hours[m] = (0.0 if c.eval_tflop is None
                          else c.eval_tflop * c.n_layers / (c.n_layers - c.budget) * 1e12 / rates[m].forward)
    run_hours = {k: sum(c.gpu_hours for c in v) - (len(v) - 1) * v[0].shared_tflop * 1e12 / rates[k[0]].forward
                 for k, v in groups.items()}
    per_model = {m: sum(h for (mm, _), h in run_hours.items() if mm == m) + dense_hours[m] for m in shapes}
    per_group = {f"{m}/{o}": h + dense_hours[m] for (m, o), h in run_hours.items()}
    plan = GridPlan(grid.name, a, gpu, shapes, cells)
    if throughput is not None:
        plan.throughput, plan.rates = throughput, rates
        plan.micro_batches = {o: (grid.batch_size, calibration_tokens(grid, o, a)[1]) for o in grid.objectives}
    plan.tasks = {"model": per_model, "objective": per_group}
    alone = sum(c.gpu_hours for c in cells)
    plan.totals = {
        "cells": len(cells),
        "evaluations": [sum(c.evaluations[0] for c in cells), sum(c.evaluations[1] for c in cells)],
        "layer_forwards": sum(c.layer_forwards for c in cells),
        "layer_forwards_bound": sum(c.layer_forwards_bound for c in cells),
        "search_tflop": sum(c.search_tflop for c in cells),
        "eval_tflop": sum(c.eval_tflop or 0.0 for c in cells),
        "gpu_hours_as_if_alone": alone,
        "gpu_hours_bound": sum(c.gpu_hours_bound for c in cells),
        "gpu_hours_grid_run": sum(per_model.values()),
        "wall_hours_per_model": makespan(per_model.values(), a.gpus),
        "wall_hours_per_objective": makespan(per_group.values(), a.gpus),
        "peak_gib_per_worker": {m: max(c.memory.peak for c in cells if c.model == m) for m in shapes},
    }
    plan.notes = _notes(plan)
    return plan


def _notes(plan: GridPlan) -> list[str]:
    notes = []
    gpu = plan.gpu
    for (m, o), c in {(c.model, c.objective): c for c in plan.cells}.items():
        mem = c.memory
        if mem.cache_demand > mem.cache_budget:
            notes.append(f"{m} {o}: the prefix cache wants {mem.cache_demand:.1f} GiB (boundary states of "
                         f"{c.calibration_tokens:,} tokens), its budget is {mem.cache_budget:.1f} GiB: it evicts, so this "
                         "GPU runs more layer-forwards than results count (at most the bound).")
    over: dict[tuple[str, str, str], list[str]] = {}
    for c in plan.cells:
        if c.memory.peak > gpu.memory_gib:
            over.setdefault((c.model, c.memory.phase, f"{c.memory.peak:.1f}"), []).append(c.cell)
    for (_model, phase, peak), ids in over.items():
        notes.append(f"{', '.join(ids)}: estimated peak {peak} GiB ({phase}) exceeds the {gpu.memory_gib:g} GiB "
                     f"of an {gpu.name}.")
    if any(c.eval_tflop is None for c in plan.cells):
        notes.append("evaluation FLOPs are not estimated for profiles whose tasks are not in EVAL_TASKS.")
    n_tasks = len(plan.tasks["objective"])
    if n_tasks < plan.assumptions.gpus:
        notes.append(f"{n_tasks} model x objective tasks leave {plan.assumptions.gpus - n_tasks} of "
                     f"{plan.assumptions.gpus} GPUs idle.")
    return notes


# -- printing ----------------------------------------------------------------------------------------


def _span(lo: float, hi: float) -> str:
    return f"{lo:,.0f}" if lo == hi else f"{lo:,.0f}-{hi:,.0f}"


def format_plan(plan: GridPlan) -> str:
    """The plan as text: per-cell table, totals, memory per worker, tasks, assumptions, notes."""
    from tabulate import tabulate

    rows = []
    for c in plan.cells:
        lo, hi = c.layer_forwards_range
        rows.append([c.cell, _span(*c.evaluations), f"{c.layer_forwards:,.0f}", _span(lo, hi),
                     f"{c.layer_forwards_bound:,}", c.basis, f"{c.search_tflop:,.0f}",
                     "-" if c.eval_tflop is None else f"{c.eval_tflop:,.0f}", f"{c.gpu_hours:.2f}",
                     f"{c.gpu_hours_bound:.2f}", f"{c.memory.peak:.1f}",
                     "" if not c.measured else f"{c.measured['evaluations']} / {c.measured['layer_forwards']:,}"])
    headers = ["cell", "evals", "layer-fwd", "range", "bound", "basis", "search TFLOP", "eval TFLOP", "GPU-h",
               "GPU-h bound", "peak GiB", "measured evals / fwd"]
    if not any(c.measured for c in plan.cells):
        headers, rows = headers[:-1], [r[:-1] for r in rows]
    t = plan.totals
    a = plan.assumptions
    pace = (f"{a.mfu:.0%} MFU" if plan.throughput is None else
            f"measured throughput ({plan.throughput.file}: {plan.throughput.gpu}, {plan.throughput.date})")
    out = [f"plan for grid {plan.grid}: {t['cells']} cells on {a.gpus} x {plan.gpu.name} at {pace}", "",
           tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), ""]
    totals = [
        ["evaluations", _span(*t["evaluations"])],
        ["layer-forwards (expected / bound)", f"{t['layer_forwards']:,.0f} / {t['layer_forwards_bound']:,}"],
        ["search / evaluation TFLOP", f"{t['search_tflop']:,.0f} / {t['eval_tflop']:,.0f}"],
        ["GPU-hours, cells as if alone (as results report)", f"{t['gpu_hours_as_if_alone']:.1f}"],
        ["GPU-hours, cells as if alone, bound", f"{t['gpu_hours_bound']:.1f}"],
        ["GPU-hours, this grid run (dense pass + prior once per condition)", f"{t['gpu_hours_grid_run']:.1f}"],
        [f"wall-clock h on {a.gpus} GPUs, one task per model", f"{t['wall_hours_per_model']:.1f}"],
        [f"wall-clock h on {a.gpus} GPUs, one task per model x objective", f"{t['wall_hours_per_objective']:.1f}"],
    ]
    out += [tabulate(totals, headers=["total", "value"], tablefmt="github", disable_numparse=True), ""]
    mem_rows = []
    for model, shape in plan.shapes.items():
        worst = max((c for c in plan.cells if c.model == model), key=lambda c: c.memory.peak)
        mm = worst.memory
        mem_rows.append([model, f"{shape.params / 1e9:.2f}B", f"{mm.weights:.1f}", f"{mm.prefix_cache:.1f}",
                         f"{mm.cache_budget:.1f}", f"{mm.cache_demand:,.0f}", f"{mm.in_flight:.1f} ({mm.phase})",
                         f"{mm.peak:.1f}", worst.cell])
    out += ["memory per worker (GiB; the cell with the highest peak)",
            tabulate(mem_rows, headers=["model", "params", "weights", "prefix cache", "cache budget", "cache demand",
                                        "in flight", "peak", "at"], tablefmt="github", disable_numparse=True), ""]
    task_rows = [[split, name, f"{h:.1f}"] for split, tasks in plan.tasks.items() for name, h in tasks.items()]
    out += [tabulate(task_rows, headers=["task per", "task", "GPU-h"], tablefmt="github", disable_numparse=True), ""]
    out += ["assumptions:"] + [f"  - {line}" for line in plan.assumption_text()]
    out += [f"  - shapes: {s.model} {s.layers} layers, hidden {s.hidden}, MLP {s.intermediate}, heads {s.heads}/"
            f"{s.kv_heads} kv, vocab {s.vocab} ({s.source})" for s in plan.shapes.values()]
    if plan.notes:
        out += ["", "notes:"] + [f"  - {n}" for n in plan.notes]
    return "\n".join(out)


__all__ = ["Assumptions", "CellPlan", "EVAL_TASKS", "FORWARD_PHASES", "GPU", "GPUS", "GRADIENT_PHASE",
           "GridPlan", "MeasuredRate", "Memory", "ModelShape", "NotRecorded", "Rate", "RecordedLosses", "SHAPES",
           "Simulated", "SyntheticLandscape", "THROUGHPUT_SCHEMA", "Throughput", "ThroughputError",
           "assumption_lines", "check_result", "evaluation_bounds", "format_plan", "forwards_bound", "gpu_kind",
           "load_throughput", "makespan", "measured_rate", "model_shape", "phase_flops", "plan_cell", "plan_grid",
           "recorded_losses", "simulate", "throughput_lines"]
