"""What a device check (:mod:`depthprune.plan.device_check`) runs and records: its sizes (stand-in shapes,
calibration set, time budget), the random-weight stand-ins and their calibration batches, the deadline a
bounded phase stops at and the scorer watched through it, and each phase's and shape's record."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from depthprune.objectives.base import Batch
from depthprune.plan.shapes import SHAPES, ModelShape
from depthprune.plan.throughput import phase_flops
from depthprune.scoring.scorer import Scorer

DTYPE = torch.bfloat16


@dataclass(frozen=True)
class Size:
    """A run's stand-ins, calibration set and time budget."""

    shapes: tuple[ModelShape, ...]
    samples: int
    seq_len: int
    batch_size: int
    budget_s: float  # after start-up: when the bounded phases (greedy, cbo) of the last shape stop
    slack_s: float  # the hard stop (the prior's only bound) comes this much later
    shares: tuple[float, ...]  # of the budget, per shape


SIZES: dict[str, Size] = {
    "gpu": Size((SHAPES["smollm2-135m"], SHAPES["llama3.1-8b"]), 128, 2048, 8, 360.0, 70.0, (1.0, 9.0)),
    "tiny": Size((ModelShape("tiny-64", 8, 64, 128, 4, 2, 16, 512, True, "device_check tiny stand-in"),
                  ModelShape("tiny-96", 8, 96, 256, 6, 2, 16, 768, False, "device_check tiny stand-in")),
                 2, 32, 1, 120.0, 30.0, (1.0, 1.0)),
}


class OutOfTime(Exception):
    """A bounded phase reached its deadline (raised before a new set is scored, never inside one)."""


class Deadline:
    """When the current phase must stop; it always lets one new set run, so every phase measures."""

    def __init__(self) -> None:
        self.at = math.inf
        self.ran = 0

    def arm(self, at: float) -> None:
        self.at, self.ran = at, 0

    def check(self) -> None:
        if self.ran and time.perf_counter() > self.at:
            raise OutOfTime
        self.ran += 1


class Watched:
    """A :class:`~depthprune.scoring.scorer.Scorer` seen through a :class:`Deadline`: a new set past it raises :class:`OutOfTime`.

    Everything else is the scorer's own (attributes are delegated), so ``Calibration.search`` runs
    unchanged on it; its forks are watched too and kept, so a stopped search's counters can be read.
    """

    def __init__(self, scorer: Scorer, deadline: Deadline) -> None:
        self.scorer = scorer
        self.deadline = deadline
        self.forks: list[Watched] = []

    def __getattr__(self, name: str) -> Any:
        if name in ("scorer", "deadline", "forks"):  # not set yet (e.g. during copying): no recursion
            raise AttributeError(name)
        return getattr(self.scorer, name)

    def __call__(self, removed: Iterable[int]) -> float:
        s = frozenset(removed)
        if s not in self.scorer.memo:
            self.deadline.check()
        return self.scorer(s)

    def many(self, sets: Iterable[Iterable[int]]) -> list[float]:
        return [self(s) for s in sets]

    def fork(self, known: dict[frozenset[int], float] | None = None,
             energy: tuple[list[float], list[list[float]]] | None = None,
             sink: Callable[[frozenset[int], float, float], None] | None = None,
             reuse: Watched | Scorer | None = None) -> Watched:
        own = reuse.scorer if isinstance(reuse, Watched) else reuse
        twin = Watched(self.scorer.fork(known=known, energy=energy, sink=sink, reuse=own), self.deadline)
        self.forks.append(twin)
        return twin


@dataclass
class Phase:
    """One phase's measurement (:mod:`depthprune.plan.device_check`'s docstring says what each count means)."""

    name: str
    status: str = "complete"  # complete | bounded (stopped at its deadline) | skipped | failed
    seconds: float = 0.0  # time of the counted work (the scorer's own timer where it has one)
    wall_seconds: float = 0.0  # the whole phase, synchronised
    layer_forwards: int = 0  # blocks run over the whole calibration set, in this process
    layer_backwards: int = 0
    evaluations: int = 0  # sets run through the model: one output-head pass each
    peak_memory_bytes: int | None = None
    memory: str = ""  # what peak_memory_bytes measures
    counted_layer_forwards: int | None = None  # as a result counts them (replay_cost), complete searches only
    removed: list[int] | None = None
    note: str = ""
    extrapolated: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    def rates(self, shape: ModelShape, tokens: int, seq_len: int) -> dict[str, float | None]:
        """Per second: layer-forwards, full-depth tokens, TFLOP (as the planner counts FLOPs)."""
        none: dict[str, float | None] = {"layer_forwards_per_second": None, "tokens_per_second": None, "achieved_tflops": None}
        if self.seconds <= 0 or self.status not in ("complete", "bounded"):
            return none
        flops = phase_flops(shape, seq_len, tokens, self.layer_forwards, self.layer_backwards, self.evaluations)
        if not self.layer_forwards:  # the head alone, or no work (build)
            return {**none, "achieved_tflops": flops / self.seconds / 1e12 if flops else None}
        return {"layer_forwards_per_second": self.layer_forwards / self.seconds,
                "tokens_per_second": tokens * self.layer_forwards / shape.layers / self.seconds,
                "achieved_tflops": flops / self.seconds / 1e12}


@dataclass
class ShapeRun:
    """Everything measured on one stand-in shape."""

    shape: ModelShape
    calibration: dict[str, int]
    phases: dict[str, Phase] = field(default_factory=dict)
    params: int | None = None
    dense_loss: float | None = None
    deadline_s: float | None = None  # seconds after start by which its bounded phases stop

    def to_dict(self, peak_flops: float | None) -> dict[str, Any]:
        tokens, seq = self.calibration["tokens"], self.calibration["seq_len"]
        phases = {}
        for name, p in self.phases.items():
            rates = p.rates(self.shape, tokens, seq)
            tflops = rates["achieved_tflops"]
            mfu = None if tflops is None or peak_flops is None else tflops * 1e12 / peak_flops
            phases[name] = {**asdict(p), **rates, "mfu": mfu}
        return {"name": self.shape.model, "shape": asdict(self.shape), "planned_params": self.shape.params,
                "params": self.params, "calibration": self.calibration, "dense_loss": self.dense_loss,
                "deadline_s": self.deadline_s, "phases": phases}


# -- building ------------------------------------------------------------------------------------------


def build_model(shape: ModelShape, device: str, seq_len: int) -> torch.nn.Module:
    """A random-weight LLaMA of ``shape``, created on ``device`` directly, in bf16, SDPA attention."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
                         num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                         num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim,
                         max_position_embeddings=max(2048, seq_len), tie_word_embeddings=shape.tied, use_cache=False)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPE, attn_implementation="sdpa")
    if next(model.parameters()).dtype != DTYPE:  # an older from_config that ignored dtype
        model = model.to(DTYPE)
    return model.eval()


def calibration_batches(vocab: int, samples: int, seq_len: int, batch_size: int, seed: int = 0) -> list[Batch]:
    """Random token ids cut into micro-batches as ``PerplexityObjective.prepare`` cuts its windows."""
    ids = torch.randint(0, vocab, (samples, seq_len), generator=torch.Generator().manual_seed(seed))
    return [Batch(ids[i : i + batch_size]) for i in range(0, samples, batch_size)]
