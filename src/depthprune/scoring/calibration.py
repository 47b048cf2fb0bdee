"""What every forward over the calibration set needs, bundled once per model and objective.

:class:`CalibrationData` is read-only after construction and shared: by the scoring
engine and all its forks, and by the gate gradients of :mod:`depthprune.scoring.gates`. It holds
the model, the objective's micro-batches, and where the model keeps its blocks, final
norm and output head (found generically, :mod:`depthprune.model.loading`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from depthprune.model.decoder_layers import DecoderLayers, find_decoder_layers, find_final_norm
from depthprune.model.output_head import OutputHead
from depthprune.objectives.base import Batch, Objective


@dataclass(frozen=True, eq=False)
class CalibrationData:
    model: nn.Module
    batches: tuple[Batch, ...]
    objective: Objective
    decoder: DecoderLayers
    head: OutputHead
    final_norm: nn.Module | None
    device: torch.device

    @classmethod
    def build(cls, model: nn.Module, batches: Sequence[Batch], objective: Objective) -> CalibrationData:
        if not batches:
            raise ValueError("no calibration batches")
        return cls(model, tuple(batches), objective, find_decoder_layers(model), OutputHead(model),
                   find_final_norm(model), next(model.parameters()).device)

    @property
    def n_layers(self) -> int:
        return len(self.decoder)
