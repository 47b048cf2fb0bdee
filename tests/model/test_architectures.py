"""More decoder architectures through the whole mechanism: load, find, view == prune, score.

Each architecture is a random tiny model (4 blocks, hidden 32) saved with the character
tokenizer of :mod:`tests.fixtures` and loaded through :func:`depthprune.model.loading.load_model`
like any user checkpoint. The set covers the layouts and features the generic mechanism
has to get right without naming models:

* block lists in other places: ``transformer.h`` (GPT-2, BLOOM), ``gpt_neox.layers``,
  ``model.decoder.layers`` (OPT);
* per-layer attention kinds (``config.layer_types``): Gemma-2 and Gemma-3 alternate
  sliding/global layers, Qwen2 has full-then-sliding layers; windows of 8 tokens on
  24-token inputs, so the windows matter;
* no SDPA path (Gemma-2, BLOOM): loaded with the eager fallback;
* final-logit softcapping (Gemma-2), alibi (BLOOM), learned positions (GPT-2, OPT),
  partial rotary and parallel residuals (GPT-NeoX, Phi, StableLM), QK-norm (OLMo-2),
  fused projections (Phi-3), scaled residuals and embeddings (Granite).
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    BloomConfig,
    CohereConfig,
    Gemma2Config,
    Gemma3TextConfig,
    GPT2Config,
    GPTNeoXConfig,
    GraniteConfig,
    MistralConfig,
    Olmo2Config,
    OPTConfig,
    Phi3Config,
    PhiConfig,
    Qwen2Config,
    StableLmConfig,
)

from depthprune.model import find_decoder_layers, load_model
from depthprune.model.masking import prune_layers, skip_layers
from depthprune.objectives import make_objective
from depthprune.objectives.base import Batch
from depthprune.scoring.scorer import Scorer
from tests.fixtures import char_tokenizer

VOCAB = 96
N_LAYERS = 4
SEQ = 24
WINDOW = 8  # < SEQ: sliding-window layers really differ from global ones
REMOVED = [1]  # shifts every later block by one: layer_types must follow their blocks

_KW = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=N_LAYERS,
           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
           bos_token_id=1, eos_token_id=2, pad_token_id=0)
_ALT = ["sliding_attention", "full_attention"] * (N_LAYERS // 2)

CONFIGS = {
    # no SDPA (attention-logit softcapping); sliding/global alternation; final-logit softcapping
    # small enough that it visibly bends the tiny model's logits
    "gemma2": lambda: Gemma2Config(**_KW, head_dim=8, sliding_window=WINDOW, query_pre_attn_scalar=8,
                                   attn_logit_softcapping=1.0, final_logit_softcapping=0.3),
    # per-layer-type rotary (local vs global base frequency), QK-norm, explicit layer_types
    "gemma3": lambda: Gemma3TextConfig(**_KW, head_dim=8, sliding_window=WINDOW, query_pre_attn_scalar=8,
                                       layer_types=list(_ALT)),
    "phi3": lambda: Phi3Config(**_KW),
    # full layers first, then sliding ones (max_window_layers)
    "qwen2": lambda: Qwen2Config(**_KW, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=2),
    "mistral": lambda: MistralConfig(**_KW, sliding_window=WINDOW),
    "gpt_neox": lambda: GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=N_LAYERS, num_attention_heads=4,
                                      max_position_embeddings=128, rotary_pct=0.5, use_parallel_residual=True,
                                      bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "gpt2": lambda: GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=N_LAYERS, n_head=4, n_positions=128,
                               bos_token_id=1, eos_token_id=2, pad_token_id=0),
    # no SDPA; alibi positions
    "bloom": lambda: BloomConfig(vocab_size=VOCAB, hidden_size=32, n_layer=N_LAYERS, n_head=4,
                                 bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "opt": lambda: OPTConfig(vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=N_LAYERS,
                             num_attention_heads=4, max_position_embeddings=128, word_embed_proj_dim=32,
                             bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "olmo2": lambda: Olmo2Config(**_KW),
    "stablelm": lambda: StableLmConfig(**_KW, partial_rotary_factor=0.5),
    "phi": lambda: PhiConfig(**_KW, partial_rotary_factor=0.5),
    # Granite-3-like multipliers, including logits_scaling (the model divides its logits by it)
    "granite": lambda: GraniteConfig(**_KW, embedding_multiplier=12.0, residual_multiplier=0.22,
                                     attention_multiplier=0.125, logits_scaling=8.0),
    # Command-R-like: the model multiplies its logits by logit_scale
    "cohere": lambda: CohereConfig(**_KW, logit_scale=0.0625, use_qk_norm=False),
}
ARCHS = list(CONFIGS)

#: where each architecture keeps its blocks (dotted path from the top model)
LAYER_PATHS = {"gpt_neox": "gpt_neox.layers", "gpt2": "transformer.h", "bloom": "transformer.h",
               "opt": "model.decoder.layers"}
#: architectures whose classes have no SDPA path: load_model falls back to eager
NO_SDPA = {"gemma2": "Gemma2ForCausalLM", "bloom": "BloomForCausalLM"}

#: architectures the Scorer cannot score yet, with the precise reason (none at present; Granite's
#: logits_scaling and Cohere's logit_scale are applied by OutputHead)
SCORER_UNSUPPORTED: dict[str, str] = {}


def _ids(seed: int, b: int = 2) -> torch.Tensor:
    return torch.randint(4, VOCAB, (b, SEQ), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """arch -> (saved directory, logits of the in-memory source model on ``_ids(0)``), built on demand."""
    made: dict[str, tuple] = {}

    def get(arch: str):
        if arch not in made:
            torch.manual_seed(0)
            model = AutoModelForCausalLM.from_config(CONFIGS[arch](), attn_implementation="eager").eval()
            path = tmp_path_factory.mktemp(arch)
            model.save_pretrained(path)
            char_tokenizer().save_pretrained(path)
            with torch.no_grad():
                made[arch] = (path, model(_ids(0), use_cache=False).logits)
        return made[arch]

    return get


def _load(arch: str, path):
    """load_model as a user calls it; checks the attention fallback (and only there) warns."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, tokenizer = load_model(str(path), device="cpu", dtype="float32")
    fallback = [w for w in caught if "does not support attn_implementation" in str(w.message)]
    if arch in NO_SDPA:
        assert len(fallback) == 1, [str(w.message) for w in caught]
        assert NO_SDPA[arch] in str(fallback[0].message) and "'eager'" in str(fallback[0].message)
        assert model.config._attn_implementation == "eager"
    else:
        assert not fallback, [str(w.message) for w in fallback]
        assert model.config._attn_implementation == "sdpa"
    return model, tokenizer


def _layer_path(model) -> str:
    dec = find_decoder_layers(model)
    owner = next(name for name, module in model.named_modules() if module is dec.owner)
    return f"{owner}.{dec.attr}" if owner else dec.attr


def _rebuilt_without(model, removed):
    """Ground truth built independently: a fresh model with fewer blocks, weights copied by name."""
    n = len(find_decoder_layers(model))
    kept = [i for i in range(n) if i not in removed]
    cfg = copy.deepcopy(model.config)
    cfg.num_hidden_layers = len(kept)  # attribute_map turns this into n_layer where needed
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = [cfg.layer_types[i] for i in kept]
    fresh = AutoModelForCausalLM.from_config(cfg, attn_implementation=model.config._attn_implementation).eval()
    prefix = _layer_path(model) + "."
    sd = model.state_dict()
    new_sd = {}
    for key in fresh.state_dict():
        if key.startswith(prefix):
            idx, rest = key[len(prefix):].split(".", 1)
            new_sd[key] = sd[f"{prefix}{kept[int(idx)]}.{rest}"]
        else:
            new_sd[key] = sd[key]
    fresh.load_state_dict(new_sd)
    return fresh


@pytest.mark.parametrize("arch", ARCHS)
def test_loads_and_finds_its_blocks(arch, checkpoints):
    path, source_logits = checkpoints(arch)
    model, tokenizer = _load(arch, path)
    assert tokenizer.pad_token is not None
    dec = find_decoder_layers(model)
    assert len(dec) == N_LAYERS
    assert _layer_path(model) == LAYER_PATHS.get(arch, "model.layers")
    with torch.no_grad():
        logits = model(_ids(0), use_cache=False).logits
    # the source was built with eager attention; sdpa may differ in the last bits
    assert torch.allclose(logits, source_logits, atol=1e-5), (logits - source_logits).abs().max()
    if arch == "gemma2":  # the softcap is live: raw lm_head logits are not the model's logits
        with torch.no_grad():
            raw = model.lm_head(model.model(_ids(0)).last_hidden_state)
        assert not torch.allclose(raw, logits, atol=1e-3)


@pytest.mark.parametrize("arch", ARCHS)
def test_view_equals_rebuild_and_saved_prune(arch, checkpoints, tmp_path):
    model, _ = _load(arch, checkpoints(arch)[0])
    x = _ids(1)
    n_types = list(getattr(model.config, "layer_types", None) or [])
    with torch.no_grad():
        dense = model(x, use_cache=False).logits
        with skip_layers(model, REMOVED):
            assert len(find_decoder_layers(model)) == N_LAYERS - len(REMOVED)
            viewed = model(x, use_cache=False).logits
        after = model(x, use_cache=False).logits
        truth = _rebuilt_without(model, REMOVED)(x, use_cache=False).logits
    assert torch.equal(dense, after), "the view must leave the model exactly as it was"
    assert not torch.allclose(dense, viewed), "removing a block must change the output"
    assert torch.allclose(viewed, truth, atol=1e-5), (viewed - truth).abs().max()

    with torch.no_grad():
        prune_layers(model, REMOVED)
        pruned = model(x, use_cache=False).logits
    assert torch.equal(viewed, pruned)
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()  # plain transformers, default attention
    assert reloaded.config.num_hidden_layers == N_LAYERS - len(REMOVED)
    assert reloaded.config.depthprune_removed_layers == REMOVED
    assert len(find_decoder_layers(reloaded)) == N_LAYERS - len(REMOVED)
    if n_types:
        assert reloaded.config.layer_types == [t for i, t in enumerate(n_types) if i not in REMOVED]
    with torch.no_grad():
        for use_cache in (True, False):
            got = reloaded(x, use_cache=use_cache).logits
            assert torch.equal(got, pruned), f"use_cache={use_cache}: {(got - pruned).abs().max()}"
        # generation walks the KV cache, which is addressed by the renumbered layer_idx
        prompt = x[:1, :6]
        gen = dict(max_new_tokens=6, do_sample=False, attention_mask=torch.ones_like(prompt), pad_token_id=0)
        a = model.generate(prompt, **gen)
        b = reloaded.generate(prompt, **gen)
    assert torch.equal(a, b)


@pytest.mark.parametrize("arch", [
    pytest.param(a, marks=pytest.mark.xfail(strict=True, raises=ValueError, reason=SCORER_UNSUPPORTED[a]))
    if a in SCORER_UNSUPPORTED else a
    for a in ARCHS
])
def test_scorer_self_check_passes_and_cache_is_exact(arch, checkpoints):
    model, _ = _load(arch, checkpoints(arch)[0])
    batches = [Batch(_ids(10 + i, b=2)) for i in range(2)]
    objective = make_objective("ppl", profile="tiny")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="prefix cache disabled")
        try:
            cached = Scorer(model, batches, objective)
        except ValueError as err:  # the expected failure is this one, not any ValueError
            if arch in SCORER_UNSUPPORTED:
                assert "does not reproduce the model's logits" in str(err), err
            raise
    assert cached.prefix_cache is True
    plain = Scorer(model, batches, objective, prefix_cache=False)
    # {2}, then sets sharing its prefix; {0, 3} resumes from the dense state at block 3
    sets = [{2}, {2, 3}, {0}, {0, 3}, {1, 2}, {3}]
    for s in sets:
        assert cached(s) == plain(s), s
    assert cached.stats.resumed > 0
    assert cached.stats.layer_forwards < plain.stats.layer_forwards
    # and both are the model's own loss (its full forward and logits, softcap included)
    for s in ({1}, {0, 3}):
        nll, count = 0.0, 0
        with torch.no_grad(), skip_layers(model, s):
            for batch in batches:
                logits = model(batch.input_ids, use_cache=False).logits[:, :-1].float()
                targets = batch.input_ids[:, 1:]
                nll += torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1),
                                                         reduction="sum").item()
                count += targets.numel()
        assert cached(s) == pytest.approx(nll / count, rel=1e-5)


def test_attention_fallback_is_only_for_unsupported_implementations(checkpoints):
    gpt2 = checkpoints("gpt2")[0]
    # asked for explicitly and supported: used, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, _ = load_model(str(gpt2), device="cpu", dtype="float32", attn_implementation="eager")
    assert model.config._attn_implementation == "eager"
    # GPT-2 has no flex-attention path: the supported sdpa is used instead, and said so
    with pytest.warns(UserWarning, match=r"GPT2LMHeadModel does not support attn_implementation='flex_attention'.*'sdpa'"):
        model, _ = load_model(str(gpt2), device="cpu", dtype="float32", attn_implementation="flex_attention")
    assert model.config._attn_implementation == "sdpa"
    # anything else is not papered over
    with pytest.raises(ValueError, match="bogus"):
        load_model(str(gpt2), device="cpu", dtype="float32", attn_implementation="bogus")
