"""The heal itself, on random tiny models: PEFT's LoRA trained over a budget, merged and checked.

A heal must learn (its loss falls where there is something to learn), touch only what it targets, give the same
model for the same seed, and merge into a model whose logits are the unmerged model's."""

from __future__ import annotations

import pytest
import torch

from depthprune.data.sources import training_windows
from depthprune.healing.config import HealConfig
from depthprune.healing.lora import MERGE_BOUND, block_linear_names, dense_hidden, heal, last_hidden, resolve_targets
from depthprune.model.loading import block_linear_kinds
from depthprune.model.masking import prune_layers
from tests.fixtures import char_tokenizer, random_model, random_text


def _windows(cfg: HealConfig, texts: list[str] | None = None, seed: int = 0) -> torch.Tensor:
    texts = texts or random_text(40, 60, seed=1)
    return training_windows(texts, char_tokenizer(), cfg.seq_len, cfg.steps * cfg.batch_size, seed)[0]


def _heal(cfg: HealConfig, arch: str = "llama", texts: list[str] | None = None):
    model = random_model(arch, n_layers=4)
    return heal(model, _windows(cfg, texts, cfg.seed), cfg)


def test_the_same_seed_heals_the_same_model_and_another_seed_another():
    cfg = HealConfig(tokens=2048, seq_len=32, batch_size=4, seed=0)
    a, ra = _heal(cfg)
    b, rb = _heal(cfg)
    c, _ = _heal(HealConfig(tokens=2048, seq_len=32, batch_size=4, seed=1))
    assert ra.losses == rb.losses
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_the_merged_model_is_a_plain_model_whose_logits_are_the_unmerged_ones(arch):
    cfg = HealConfig(tokens=1024, seq_len=32, batch_size=4, lr=1e-2)
    healed, report = _heal(cfg, arch)
    assert not any("lora" in name for name, _ in healed.named_modules())
    assert type(healed).__name__.endswith("ForCausalLM")
    assert 0 < report.merge_max_abs_diff <= MERGE_BOUND * report.merge_max_abs_logit


def test_a_heal_learns_what_there_is_to_learn():
    cfg = HealConfig(tokens=32 * 4 * 40, seq_len=32, batch_size=4, lr=1e-2, warmup_ratio=0.0)
    _, report = _heal(cfg, texts=["abc abd abe. " * 40] * 20)
    first, last = sum(report.losses[:5]) / 5, sum(report.losses[-5:]) / 5
    # one periodic text: every window the same task, so the loss moves by what is learned (its step-to-step
    # noise is ~0.05 nats here), and a frozen adapter's would not fall at all
    assert last < first - 0.2, report.losses


def test_only_the_targeted_layers_change():
    cfg = HealConfig(tokens=1024, seq_len=32, batch_size=4, lr=1e-2, target_modules=("q_proj", "down_proj"))
    before = random_model("llama", n_layers=4).state_dict()
    healed, report = _heal(cfg)
    assert report.targets == ["q_proj", "down_proj"]
    changed = {k.rsplit(".", 2)[-2] for k, v in healed.state_dict().items() if not torch.equal(v, before[k])}
    assert changed == {"q_proj", "down_proj"}


def test_targets_are_the_blocks_linear_layers_and_an_absent_one_is_refused():
    model = random_model("llama", n_layers=3)
    names = block_linear_names(model)
    assert sorted(names) == block_linear_kinds(model.config)
    assert len(names["q_proj"]) == 3 and "lm_head" not in names
    assert resolve_targets(names, ()) == sorted(names)
    with pytest.raises(ValueError, match="target_modules c_attn: the model's blocks have no such linear layer; allowed: "
                                         "down_proj, gate_proj"):
        resolve_targets(names, ("c_attn",))


def test_a_heal_refuses_a_model_that_is_not_float32():
    cfg = HealConfig(tokens=256, seq_len=32, batch_size=4)
    model = random_model("llama", n_layers=2).to(torch.bfloat16)
    with pytest.raises(ValueError, match="float32"):
        heal(model, _windows(cfg), cfg)


def test_training_windows_are_seeded_and_an_epoch_repeats_no_window():
    tok = char_tokenizer()
    texts = random_text(5, 30, seed=2)
    a, proto = training_windows(texts, tok, 16, 10, seed=0)
    b, _ = training_windows(texts, tok, 16, 10, seed=0)
    c, _ = training_windows(texts, tok, 16, 10, seed=1)
    assert torch.equal(a, b) and not torch.equal(a, c)
    available = proto.extra["windows_available"]
    full, _ = training_windows(texts, tok, 16, available, seed=0)
    assert len({tuple(w.tolist()) for w in full}) == available


def test_the_hidden_state_method_moves_the_pruned_model_towards_the_dense_models_states():
    cfg = HealConfig(tokens=32 * 4 * 20, seq_len=32, batch_size=4, lr=1e-2, warmup_ratio=0.0, method="lora-hidden")
    windows = _windows(cfg)
    dense = random_model("llama", n_layers=4)
    targets = dense_hidden(dense, windows, cfg.batch_size)
    pruned = random_model("llama", n_layers=4)
    prune_layers(pruned, [2])
    with torch.no_grad():
        before = float((last_hidden(pruned, windows) - targets).pow(2).mean())
    healed, report = heal(pruned, windows, cfg, dense_states=targets)
    with torch.no_grad():
        after = float((last_hidden(healed, windows) - targets).pow(2).mean())
    # the loss is the error relative to the targets' mean square: it starts where the pruned model is, and falls
    assert report.losses[0] == pytest.approx(before / float(targets.pow(2).mean()), rel=0.05)
    assert after < 0.8 * before, (before, after, report.losses)
    again, report2 = heal(random_model("llama", n_layers=4), windows, cfg, dense_states=dense_hidden(
        random_model("llama", n_layers=4), windows, cfg.batch_size))
    assert report2.losses[0] == pytest.approx(0.0, abs=1e-9)  # a model that is its own target: nothing to learn


def test_the_hidden_state_method_refuses_to_run_without_its_targets():
    cfg = HealConfig(tokens=1024, seq_len=32, batch_size=4, method="lora-hidden")
    windows = _windows(cfg)
    with pytest.raises(ValueError, match="lora-hidden needs the dense model's last hidden states"):
        heal(random_model("llama", n_layers=4), windows, cfg)
    with pytest.raises(ValueError, match="lora-hidden needs the dense model's last hidden states"):
        heal(random_model("llama", n_layers=4), windows, cfg, dense_states=torch.zeros(1, 32, 8))
