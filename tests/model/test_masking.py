"""The one removal mechanism: reversible view == physical prune == saved checkpoint."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from depthprune.model import find_decoder_layers
from depthprune.model.masking import prune_layers, skip_layers
from tests.fixtures import random_model

ARCHS = ["llama", "qwen3", "mistral"]
REMOVED = [1, 4]


def _inputs(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, 30, (2, 40), generator=g)


def _rebuilt_without(model, removed):
    """Ground truth built independently: a fresh model with fewer layers, weights copied."""
    cfg = model.config.to_dict()
    n = cfg["num_hidden_layers"]
    kept = [i for i in range(n) if i not in removed]
    cfg["num_hidden_layers"] = len(kept)
    if cfg.get("layer_types"):
        cfg["layer_types"] = [cfg["layer_types"][i] for i in kept]
    fresh = AutoModelForCausalLM.from_config(type(model.config).from_dict(cfg), attn_implementation="sdpa").eval()
    sd = model.state_dict()
    new_sd = {}
    for key in fresh.state_dict():
        parts = key.split(".")
        if "layers" in parts:
            pos = parts.index("layers") + 1
            parts[pos] = str(kept[int(parts[pos])])
        new_sd[key] = sd[".".join(parts)]
    fresh.load_state_dict(new_sd)
    return fresh


@pytest.mark.parametrize("arch", ARCHS)
def test_view_is_reversible_and_matches_independent_rebuild(arch):
    model = random_model(arch)
    x = _inputs()
    with torch.no_grad():
        dense = model(x).logits
        with skip_layers(model, REMOVED):
            assert len(find_decoder_layers(model)) == 4
            viewed = model(x).logits
        after = model(x).logits
        truth = _rebuilt_without(model, REMOVED)(x).logits
    assert torch.equal(dense, after), "the view must leave the model exactly as it was"
    assert not torch.allclose(dense, viewed), "removing layers must change the output"
    assert torch.allclose(viewed, truth, atol=1e-5), (viewed - truth).abs().max()
    assert model.config.num_hidden_layers == 6


def test_view_restores_on_error():
    model = random_model("qwen3")
    types = list(model.config.layer_types)
    with pytest.raises(RuntimeError):
        with skip_layers(model, [0, 5]):
            raise RuntimeError("boom")
    assert model.config.layer_types == types
    assert [layer.self_attn.layer_idx for layer in model.model.layers] == list(range(6))


def test_view_subsets_per_layer_types():
    model = random_model("qwen3")
    assert model.config.layer_types[:3] == ["full_attention"] * 3  # the fixture mixes kinds
    assert "sliding_attention" in model.config.layer_types
    with skip_layers(model, [0, 1, 2]):
        assert model.config.layer_types == ["sliding_attention"] * 3
        assert [layer.self_attn.layer_idx for layer in model.model.layers] == [0, 1, 2]


@pytest.mark.parametrize("arch", ARCHS)
def test_saved_pruned_checkpoint_reloads_with_identical_logits(arch, tmp_path):
    model = random_model(arch)
    x = _inputs(1)
    with torch.no_grad():
        with skip_layers(model, REMOVED):
            viewed = model(x, use_cache=False).logits
        prune_layers(model, REMOVED)
        pruned = model(x, use_cache=False).logits
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert reloaded.config.num_hidden_layers == 4
    assert reloaded.config.depthprune_removed_layers == REMOVED
    assert len(find_decoder_layers(reloaded)) == 4
    with torch.no_grad():
        for use_cache in (True, False):
            got = reloaded(x, use_cache=use_cache).logits
            assert torch.equal(got, pruned), f"use_cache={use_cache}: {(got - pruned).abs().max()}"
        assert torch.equal(viewed, pruned)
        prompt = x[:1, :8]
        a = model.generate(prompt, max_new_tokens=12, do_sample=False, attention_mask=torch.ones_like(prompt))
        b = reloaded.generate(prompt, max_new_tokens=12, do_sample=False, attention_mask=torch.ones_like(prompt))
    assert torch.equal(a, b)


def test_generate_through_view_matches_pruned():
    model = random_model("mistral")
    prompt = _inputs(2)[:1, :8]
    mask = torch.ones_like(prompt)
    with torch.no_grad():
        with skip_layers(model, [0, 3]):
            viewed = model.generate(prompt, attention_mask=mask, max_new_tokens=10, do_sample=False)
        prune_layers(model, [0, 3])
        pruned = model.generate(prompt, attention_mask=mask, max_new_tokens=10, do_sample=False)
    assert torch.equal(viewed, pruned)


def test_second_prune_records_original_indices():
    model = random_model("llama", n_layers=8)
    prune_layers(model, [1, 2])  # kept: 0,3,4,5,6,7
    prune_layers(model, [0, 2])  # original 0 and 4
    assert model.config.depthprune_removed_layers == [0, 1, 2, 4]
    assert model.config.num_hidden_layers == 4


@pytest.mark.parametrize("removed, message", [([6], "out of range"), ([-1], "out of range"),
                                               (list(range(6)), "cannot remove all")])
def test_bad_removal_sets(removed, message):
    model = random_model("llama")
    with pytest.raises(ValueError, match=message):
        with skip_layers(model, removed):
            pass
    assert len(find_decoder_layers(model)) == 6
