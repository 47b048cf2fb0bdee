"""HealConfig: every field checked when built (the CLI's exit 2 rests on it), a tag that names the heal."""

from __future__ import annotations

import pytest

from depthprune.healing.config import SOURCES, HealConfig


@pytest.mark.parametrize("field, value, allowed", [
    ("rank", 0, "rank must be an integer >= 1"),
    ("tokens", 0, "tokens must be an integer >= 1"),
    ("alpha", -1, "alpha must be an integer >= 1"),
    ("seq_len", 1, "seq_len must be an integer >= 2"),
    ("dropout", 1.0, "dropout must be in [0, 1)"),
    ("lr", 0.0, "lr must be > 0"),
    ("method", "qlora", "method must be one of 'lora', 'lora-hidden'"),
    ("schedule", "linear", "schedule must be one of 'cosine', 'constant'"),
])
def test_a_bad_value_names_its_field(field, value, allowed):
    kwargs = {"tokens": 1024, field: value}
    with pytest.raises(ValueError, match=f"healing: {allowed}".replace("[", r"\[").replace("(", r"\(")
                       .replace(")", r"\)")):
        HealConfig(**kwargs)


def test_the_defaults_are_the_peers_recipe_and_each_names_its_source():
    cfg = HealConfig(tokens=4096)
    assert (cfg.rank, cfg.alpha, cfg.dropout, cfg.lr) == (8, 16, 0.05, 1e-4)
    assert not cfg.target_modules  # every linear layer of the blocks
    for name in ("rank", "alpha", "dropout", "lr", "target_modules", "tokens"):
        assert name in SOURCES


def test_steps_spend_the_budget_in_whole_micro_batches():
    assert HealConfig(tokens=4096, seq_len=256, batch_size=4).steps == 4
    assert HealConfig(tokens=4097, seq_len=256, batch_size=4).steps == 5
    assert HealConfig(tokens=1, seq_len=256, batch_size=4).steps == 1


def test_the_record_round_trips_and_the_tag_names_method_budget_and_seed():
    cfg = HealConfig(tokens=8192, seed=3, target_modules=("q_proj", "v_proj"))
    assert HealConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.tag == "lora-t8192-s3"
    with pytest.raises(ValueError, match="unknown field"):
        HealConfig.from_dict({**cfg.to_dict(), "epochs": 2})


def test_a_tag_reads_back_whatever_the_method_is_called():
    for cfg in (HealConfig(tokens=8192, seed=3), HealConfig(tokens=65536, method="lora-hidden")):
        assert HealConfig.parse_tag(cfg.tag) == (cfg.method, cfg.tokens, cfg.seed)
    assert HealConfig.parse_tag("lora-hidden-t4096-s1") == ("lora-hidden", 4096, 1)
    for bad in ("lora", "lora-t4096", "-t4096-s0", "lora-tx-s0"):
        with pytest.raises(ValueError, match="not a heal's tag"):
            HealConfig.parse_tag(bad)
