"""What an objective is: calibration batches in, one scalar loss (lower is better) out.

An objective builds its micro-batches once (:meth:`Objective.prepare`), then, for every
candidate removal set, the scoring engine hands it the final (normed) hidden states of
each micro-batch and an :class:`~depthprune.model.output_head.OutputHead` that turns hidden states into log-probs.
The objective returns a small *stats* tensor per micro-batch (e.g. summed NLL and token
count) and combines them in :meth:`Objective.reduce`. Keeping the statistics small is
what lets the engine stay memory-bounded on 128k-token vocabularies: log-probs are
computed in chunks and never stored.

``reduce`` must be differentiable in the stats (it is used for gate gradients), and
every built-in objective is *linear* in them, so gradients accumulate over micro-batches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from depthprune.common.plugins import Registry
from depthprune.model.output_head import OutputHead

if TYPE_CHECKING:  # pragma: no cover
    from depthprune.data.profiles import Profile


@dataclass
class Batch:
    """One micro-batch: token ids (right-padded) and whatever the objective needs."""

    input_ids: torch.Tensor  # [b, t] long, on CPU until the engine moves it
    payload: dict[str, Any] = field(default_factory=dict)
    #: extra keyword arguments of the model's forward (e.g. a 4D attention mask, position ids)
    forward_kwargs: dict[str, torch.Tensor] = field(default_factory=dict)

    def model_inputs(self, device: torch.device | str) -> dict[str, torch.Tensor]:
        return {"input_ids": self.input_ids.to(device), **{k: v.to(device) for k, v in self.forward_kwargs.items()}}


@dataclass
class Objective(ABC):
    """Base class; subclasses are dataclasses whose fields are recorded with results."""

    name: ClassVar[str] = ""
    #: the engine runs the dense model once and calls :meth:`set_reference` per batch
    needs_reference: ClassVar[bool] = False

    def params(self) -> dict[str, Any]:
        return asdict(self)

    @abstractmethod
    def prepare(self, tokenizer, profile: Profile, batch_size: int) -> list[Batch]:
        """Build the calibration micro-batches (deterministic given the fields); ``profile``
        says where the named dataset comes from."""

    @abstractmethod
    def batch_stats(self, hidden: torch.Tensor, batch: Batch, head: OutputHead) -> torch.Tensor:
        """Statistics of one micro-batch from its final hidden states [b, t, H]."""

    @abstractmethod
    def reduce(self, stats: list[torch.Tensor]) -> torch.Tensor:
        """Combine the statistics of all micro-batches into the scalar loss."""

    def set_reference(self, index: int, hidden: torch.Tensor, batch: Batch, head: OutputHead) -> None:  # noqa: B027
        """Receive the dense model's hidden states of micro-batch ``index`` (if needed; optional, so not abstract)."""

    def protocol(self) -> dict[str, Any]:
        """How the calibration data was built (recorded with results)."""
        return {}


#: name -> objective class. Each module of ``depthprune.objectives`` registers its class
#: with ``@register``; ``depthprune.objectives`` imports them all.
OBJECTIVES: Registry[type[Objective]] = Registry("objective")
register = OBJECTIVES.register
