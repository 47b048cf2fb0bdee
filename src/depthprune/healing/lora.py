"""A heal: LoRA through PEFT on a pruned model's blocks, trained on token windows, then merged.

PEFT does the adapter (``LoraConfig``, ``get_peft_model``, ``merge_and_unload``); this module picks its
targets, runs the optimizer over a fixed token budget, and checks the merge: the merged model's logits
must equal the unmerged model's within :data:`~depthprune.healing.lora.MERGE_BOUND` (PEFT users have reported the two disagreeing),
or the heal fails instead of saving a model that is not the one trained.

Deterministic for a given seed on one machine: the adapter's initialisation, its dropout and the window
order all draw from the seed, and training runs in float32 (:func:`heal` refuses another dtype).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from depthprune.healing.config import HealConfig
from depthprune.model.decoder_layers import find_decoder_layers

#: the largest |merged - unmerged| logit allowed, relative to the largest |logit| of the probe batch. The
#: merge adds B@A into W in float32; the unmerged model computes Wx + B(Ax): the two differ by float32
#: re-association alone, ~1e-6 of a logit's size (measured: docs/measurements.md, "Healing")
MERGE_BOUND = 1e-4


class MergeMismatch(RuntimeError):
    """The merged model's logits are not the unmerged model's (beyond :data:`~depthprune.healing.lora.MERGE_BOUND`)."""


def block_linear_names(model: nn.Module) -> dict[str, list[str]]:
    """The linear layers inside the decoder blocks: last name part (``q_proj``) -> their full names."""
    layers = find_decoder_layers(model).layers
    by_block = {id(block): i for i, block in enumerate(layers)}
    prefix = {}
    for name, module in model.named_modules():
        if id(module) in by_block:
            prefix[name] = by_block[id(module)]
    out: dict[str, list[str]] = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and any(name.startswith(p + ".") for p in prefix):
            out.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    return out


def resolve_targets(available: Iterable[str], wanted: tuple[str, ...]) -> list[str]:
    """The module kinds to adapt: ``wanted`` (each must exist) or, where empty, every one ``available``."""
    have = sorted(set(available))
    if not have:
        raise ValueError("healing: the model's blocks hold no linear layer to adapt")
    missing = [w for w in wanted if w not in have]
    if missing:
        raise ValueError(f"healing: target_modules {', '.join(missing)}: the model's blocks have no such "
                         f"linear layer; allowed: {', '.join(have)}")
    return list(wanted) or have


@dataclass
class HealReport:
    """What a heal did: recorded with its result (``healing`` field)."""

    config: dict[str, Any]
    targets: list[str]
    trainable_parameters: int
    steps: int
    tokens: int
    losses: list[float]  # the training loss of every step
    seconds: float
    merge_max_abs_diff: float  # |merged - unmerged| logits on the probe batch, the largest
    merge_max_abs_logit: float
    windows: dict[str, Any] = field(default_factory=dict)  # how the training windows were cut

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "targets": self.targets, "trainable_parameters": self.trainable_parameters,
                "steps": self.steps, "tokens": self.tokens, "losses": self.losses, "seconds": round(self.seconds, 3),
                "tokens_per_second": round(self.tokens_per_second, 2),
                "merge_max_abs_diff": self.merge_max_abs_diff, "merge_max_abs_logit": self.merge_max_abs_logit,
                "merge_bound": MERGE_BOUND, "windows": self.windows}


def _schedule(optimizer: torch.optim.Optimizer, cfg: HealConfig) -> Any:
    from transformers import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    warmup = int(cfg.warmup_ratio * cfg.steps)
    if cfg.schedule == "cosine":
        return get_cosine_schedule_with_warmup(optimizer, warmup, cfg.steps)
    return get_constant_schedule_with_warmup(optimizer, warmup)


def last_hidden(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """The model's last hidden states (after its final norm: what the output head reads), without the head."""
    return find_decoder_layers(model).owner(input_ids=input_ids, use_cache=False).last_hidden_state


def dense_hidden(model: nn.Module, windows: torch.Tensor, batch_size: int) -> torch.Tensor:
    """``lora-hidden``'s targets: the (dense) model's last hidden states on every window, in float32 on the CPU."""
    device = next(model.parameters()).device
    with torch.no_grad():
        return torch.cat([last_hidden(model, windows[i:i + batch_size].to(device)).float().cpu()
                          for i in range(0, windows.shape[0], batch_size)])


def heal(model: nn.Module, windows: torch.Tensor, cfg: HealConfig, progress: bool | str = False,
         window_protocol: dict[str, Any] | None = None,
         dense_states: torch.Tensor | None = None) -> tuple[nn.Module, HealReport]:
    """Train LoRA adapters on ``windows`` (``cfg.steps`` micro-batches of ``cfg.batch_size``), merge them, and
    return the merged plain model (the same modules as ``model``, adapted in place) with the report.
    ``dense_states``: for ``lora-hidden``, the dense model's last hidden states on the same windows
    (:func:`~depthprune.healing.lora.dense_hidden`), the targets; the loss is the mean squared error over their
    mean square, so it reads as a share of their size whatever the model."""
    from peft import LoraConfig, get_peft_model
    from tqdm.auto import tqdm

    dtype = next(model.parameters()).dtype
    if dtype != torch.float32:
        raise ValueError(f"healing runs in float32 on every machine, so heals compare; the model is {dtype}")
    need = cfg.steps * cfg.batch_size
    if windows.shape[0] < need or windows.shape[1] != cfg.seq_len:
        raise ValueError(f"healing: need {need} windows of {cfg.seq_len} tokens, got {tuple(windows.shape)}")
    target = dense_states if cfg.method == "lora-hidden" else None  # None: the language-model loss
    if cfg.method == "lora-hidden" and (target is None or tuple(target.shape[:2]) != tuple(windows.shape)):
        got = None if target is None else tuple(target.shape)
        raise ValueError(f"healing: method lora-hidden needs the dense model's last hidden states on the "
                         f"{tuple(windows.shape)} windows, got {got}")
    scale = float(target[:need].pow(2).mean()) if target is not None else 1.0
    linear = block_linear_names(model)
    targets = resolve_targets(linear, cfg.target_modules)
    names = [n for kind, full in sorted(linear.items()) if kind in targets for n in full]
    device = next(model.parameters()).device
    # torch's thread count set explicitly, even to the count it has: a process left at its default (2 on 2 cores)
    # and one that set 2 healed the CI set to probe NLLs that differ in the last bits (measured 2026-12-06), so a
    # heal and what follows it run in the explicit state whoever calls them (pytest's conftest sets it too)
    torch.set_num_threads(torch.get_num_threads())
    torch.manual_seed(cfg.seed)  # the adapters' initialisation and dropout
    lora = LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout, target_modules=names,
                      bias="none", task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lora)
    trainable = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=0.0)
    scheduler = _schedule(optimizer, cfg)
    losses: list[float] = []
    peft_model.train()
    start = time.perf_counter()
    bar = tqdm(total=cfg.steps, desc=progress if isinstance(progress, str) else "heal", unit="step",
               disable=not progress, leave=False)
    for step in range(cfg.steps):
        rows = slice(step * cfg.batch_size, (step + 1) * cfg.batch_size)
        batch = windows[rows].to(device)
        if target is not None:  # the same modules, adapted in place: the backbone runs the adapters
            loss = (last_hidden(model, batch) - target[rows].to(device)).pow(2).mean() / scale
        else:
            loss = peft_model(input_ids=batch, labels=batch).loss
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"healing: the training loss is {loss.item()} at step {step}")
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(round(float(loss.item()), 6))
        bar.update(1)
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    bar.close()
    seconds = time.perf_counter() - start
    peft_model.eval()
    probe = windows[: min(cfg.batch_size, windows.shape[0])].to(device)
    with torch.no_grad():
        unmerged = peft_model(input_ids=probe).logits
        merged_model = peft_model.merge_and_unload()
        merged = merged_model(input_ids=probe).logits
    diff = float((merged - unmerged).abs().max())
    scale = float(unmerged.abs().max())
    if not diff <= MERGE_BOUND * max(scale, 1.0):
        raise MergeMismatch(f"healing: the merged model's logits differ from the unmerged model's by {diff:.3g} "
                            f"(largest |logit| {scale:.3g}; allowed {MERGE_BOUND:g} of it)")
    merged_model.eval()
    for p in merged_model.parameters():
        p.requires_grad_(False)
    report = HealReport(cfg.to_dict(), targets, sum(p.numel() for p in trainable), cfg.steps,
                        cfg.steps * cfg.batch_size * cfg.seq_len, losses, seconds, diff, scale,
                        window_protocol or {})
    return merged_model, report
