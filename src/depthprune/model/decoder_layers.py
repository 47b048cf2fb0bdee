"""Where a model keeps its decoder blocks and its final norm, found without matching model names.

The usual attribute names are tried first, then the one ``ModuleList`` whose length is the
config's layer count, so any decoder-only architecture in transformers works. Every part that
removes, views or hooks blocks (masking, calibration, the scorer) starts here.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn


@dataclass
class DecoderLayers:
    """Where a model keeps its decoder blocks: ``getattr(owner, attr)`` is the ModuleList."""

    owner: nn.Module
    attr: str

    @property
    def layers(self) -> nn.ModuleList:
        return getattr(self.owner, self.attr)

    def __len__(self) -> int:
        return len(self.layers)


_LAYER_ATTRS = ("layers", "h", "blocks", "block", "decoder_layers")


def _num_layers(config) -> int | None:
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if isinstance(getattr(config, key, None), int):
            return getattr(config, key)
    return None


def find_decoder_layers(model: nn.Module) -> DecoderLayers:
    """Find the decoder's block list without matching model names.

    The usual attribute names are tried on the decoder (``model.get_decoder()``) first;
    otherwise the ModuleList whose length equals ``config.num_hidden_layers`` is taken.
    """
    config = getattr(model, "config", None)
    n = _num_layers(config) if config is not None else None
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    for owner in (decoder, getattr(model, "model", None), model):
        if owner is None:
            continue
        for attr in _LAYER_ATTRS:
            cand = getattr(owner, attr, None)
            if isinstance(cand, nn.ModuleList) and len(cand) > 0 and (n is None or len(cand) == n):
                return DecoderLayers(owner, attr)
    matches = []
    for name, module in model.named_modules():
        for attr, child in module.named_children():
            if isinstance(child, nn.ModuleList) and len(child) > 0 and (n is None or len(child) == n):
                matches.append((name, attr, module))
    if len(matches) == 1:
        return DecoderLayers(matches[0][2], matches[0][1])
    raise ValueError(
        f"cannot find the decoder layer list of {type(model).__name__}: "
        f"{len(matches)} ModuleLists of length {n} (expected exactly one)"
    )


def find_final_norm(model: nn.Module) -> nn.Module | None:
    """The norm applied after the last block (None if the decoder has no such attribute)."""
    owner = find_decoder_layers(model).owner
    for attr in ("norm", "final_layernorm", "final_layer_norm", "ln_f", "norm_f", "final_norm"):
        mod = getattr(owner, attr, None)
        if isinstance(mod, nn.Module):
            return mod
    return None
