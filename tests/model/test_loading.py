"""Registry, weight location and generic layer discovery."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from depthprune.model import (
    MODELS,
    WeightsUnavailable,
    find_decoder_layers,
    find_final_norm,
    locate,
    resolve,
    resolve_dtype,
)
from tests.fixtures import random_model


def test_registry_has_the_paper_models():
    assert MODELS["llama3-8b"].source == "meta-llama/Meta-Llama-3-8B"
    assert MODELS["llama3.1-8b"].source == "meta-llama/Llama-3.1-8B"
    assert MODELS["qwen3-8b"].n_layers == 36
    assert {"tiny-llama3", "tiny-llama3.1", "tiny-qwen3"} <= set(MODELS)


def test_resolve_local_dir_and_hub_ids(llama_dir, tmp_path):
    assert resolve(str(llama_dir)).source == str(llama_dir.resolve())
    assert resolve("someone/some-model").source == "someone/some-model"
    with pytest.raises(ValueError, match="unknown model"):
        resolve("not-a-model")
    with pytest.raises(WeightsUnavailable, match="no config.json"):
        resolve(str(tmp_path))


def test_paper_weights_absent_here_give_a_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("DEPTHPRUNE_MODELS_DIR", raising=False)
    with pytest.raises(WeightsUnavailable, match="meta-llama/Meta-Llama-3-8B"):
        locate("llama3-8b")
    assert locate("llama3-8b", allow_download=True) == "meta-llama/Meta-Llama-3-8B"


def test_models_dir_is_searched(monkeypatch, tmp_path, llama_dir):
    (tmp_path / "qwen3-8b").symlink_to(llama_dir)
    monkeypatch.setenv("DEPTHPRUNE_MODELS_DIR", str(tmp_path))
    assert locate("qwen3-8b") == str(tmp_path / "qwen3-8b")


@pytest.mark.parametrize("arch", ["llama", "qwen3", "mistral"])
def test_layers_found_generically(arch):
    model = random_model(arch, n_layers=5)
    dec = find_decoder_layers(model)
    assert dec.attr == "layers" and len(dec) == 5
    assert find_final_norm(model) is model.model.norm


def test_layers_found_on_other_layouts():
    model = GPT2LMHeadModel(GPT2Config(n_layer=3, n_embd=16, n_head=2, vocab_size=50))
    dec = find_decoder_layers(model)
    assert dec.owner is model.transformer and dec.attr == "h"
    assert find_final_norm(model) is model.transformer.ln_f


def test_dtype_resolution():
    # auto on a CPU asks the machine (tests/model/test_precision.py); here only that it is one of the two
    assert resolve_dtype("auto", "cpu") in (torch.float32, torch.bfloat16)
    assert resolve_dtype("auto", "cuda") == torch.bfloat16
    with pytest.raises(ValueError, match="allowed"):
        resolve_dtype("int3", "cpu")
