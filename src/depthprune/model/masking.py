"""One layer-removal mechanism, used reversibly (a view) and permanently (a prune).

Removing blocks from a Hugging Face decoder takes four edits that must stay in step:
the block list itself, ``config.num_hidden_layers``, per-layer config lists such as
``config.layer_types`` (sliding vs full attention), and the ``layer_idx`` that each
attention module uses to address its KV-cache slot. :func:`keep_only` makes all four
edits; :func:`skip_layers` undoes them on exit, so thousands of candidates are scored
on one loaded model without copying a weight; :func:`prune_layers` keeps them, so
``save_pretrained`` writes a standard, smaller checkpoint that plain
``AutoModelForCausalLM.from_pretrained`` loads with identical logits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from depthprune.model.decoder_layers import DecoderLayers, find_decoder_layers

# Config attributes that hold one entry per decoder layer.
PER_LAYER_CONFIG_KEYS = ("layer_types", "no_rope_layers")


@dataclass
class _Undo:
    decoder: DecoderLayers
    layers: nn.ModuleList
    config_values: dict[tuple[int, str], tuple[Any, Any]]  # (id(config), key) -> (config, its value before)
    layer_idx: list[tuple[nn.Module, int]] = field(default_factory=list)


def _configs(model: nn.Module) -> list[Any]:
    """The config objects that describe the decoder (the top one and a text sub-config)."""
    config = model.config
    out = [config]
    text = getattr(config, "text_config", None)
    if text is not None and text is not config:
        out.append(text)
    return out


def hidden_of(output: Any) -> Any:
    """The hidden states of a decoder block's output (a tensor, or a tuple that starts with one)."""
    return output[0] if isinstance(output, (tuple, list)) else output


def check_removed(removed: Iterable[int], n_layers: int) -> frozenset[int]:
    """Validate a removal set against a layer count; never remove every layer."""
    s = frozenset(int(i) for i in removed)
    bad = sorted(i for i in s if i < 0 or i >= n_layers)
    if bad:
        raise ValueError(f"layers {bad} out of range 0..{n_layers - 1}")
    if len(s) >= n_layers:
        raise ValueError(f"cannot remove all {n_layers} layers")
    return s


def keep_only(model: nn.Module, kept: list[int]) -> _Undo:
    """Make the model run only the blocks ``kept`` (original indices, in order).

    Returns what is needed to undo it. Blocks are not copied; they are renumbered
    (``layer_idx`` 0..len(kept)-1) so a KV cache built from the edited config lines up.
    """
    dec = find_decoder_layers(model)
    old = dec.layers
    n = len(old)
    undo = _Undo(dec, old, {})
    for cfg in _configs(model):
        if getattr(cfg, "num_hidden_layers", None) == n:
            undo.config_values[(id(cfg), "num_hidden_layers")] = (cfg, n)
            cfg.num_hidden_layers = len(kept)
        for key in PER_LAYER_CONFIG_KEYS:
            value = getattr(cfg, key, None)
            if isinstance(value, (list, tuple)) and len(value) == n:
                undo.config_values[(id(cfg), key)] = (cfg, value)
                setattr(cfg, key, type(value)(value[i] for i in kept))
    for new_idx, i in enumerate(kept):
        for module in old[i].modules():
            idx = getattr(module, "layer_idx", None)
            if isinstance(idx, int) and not isinstance(idx, bool):
                undo.layer_idx.append((module, idx))
                module.layer_idx = new_idx
    setattr(dec.owner, dec.attr, nn.ModuleList([old[i] for i in kept]))
    return undo


def restore(model: nn.Module, undo: _Undo) -> None:
    """Undo :func:`keep_only` exactly."""
    setattr(undo.decoder.owner, undo.decoder.attr, undo.layers)
    for (_, key), (cfg, value) in undo.config_values.items():
        setattr(cfg, key, value)
    for module, idx in undo.layer_idx:
        module.layer_idx = idx


@contextmanager
def skip_layers(model: nn.Module, removed: Iterable[int]) -> Iterator[nn.Module]:
    """Within the block, ``model`` behaves as if the ``removed`` blocks were deleted.

    Reversible and weight-free: on exit (also on error) the model is exactly as before.
    """
    n = len(find_decoder_layers(model))
    s = check_removed(removed, n)
    undo = keep_only(model, [i for i in range(n) if i not in s])
    try:
        yield model
    finally:
        restore(model, undo)


def prune_layers(model: nn.Module, removed: Iterable[int]) -> nn.Module:
    """Delete the ``removed`` blocks for good and record what was done in the config.

    The result saves with ``save_pretrained`` as an ordinary checkpoint of the same
    architecture with fewer layers. ``config.depthprune_removed_layers`` keeps the
    original indices (transformers preserves extra config keys) for provenance.
    """
    n = len(find_decoder_layers(model))
    s = check_removed(removed, n)
    keep_only(model, [i for i in range(n) if i not in s])
    previous = list(getattr(model.config, "depthprune_removed_layers", []) or [])
    if previous:
        # Map this prune's indices back to the original model's numbering.
        original_kept = [i for i in range(n + len(previous)) if i not in set(previous)]
        s = frozenset(original_kept[i] for i in s) | frozenset(previous)
    model.config.depthprune_removed_layers = sorted(s)
    return model
