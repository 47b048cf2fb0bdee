"""``depthprune heal``: bad input exits 2 naming the flag, before anything loads and with nothing written; a
heal saves a standard checkpoint that plain transformers loads, in a fresh process, to the same logits."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from depthprune.cli import main
from depthprune.data import healing_text
from depthprune.data.sources import training_windows
from depthprune.healing.config import HealConfig
from depthprune.healing.lora import heal
from depthprune.model.masking import prune_layers
from tests.fixtures import char_tokenizer, random_model, random_text, write_jsonl, write_model_dir

HEAL = ["--heal-tokens", "512", "--heal-seq-len", "32", "--quiet"]


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return write_model_dir(tmp_path / "model", n_layers=4)


@pytest.fixture
def texts(tmp_path: Path, monkeypatch) -> list[str]:
    texts = random_text(30, 50, seed=4)
    monkeypatch.setenv(healing_text.ENV, str(write_jsonl(tmp_path / "heal.jsonl", texts)))
    return texts


@pytest.fixture
def nothing_loads(monkeypatch):
    from depthprune.recipe import Session

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(Session, "open", classmethod(refuse))


def _refused(argv: list[str], capsys, flag: str, what: str) -> None:
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse's own range checks
        status = stop.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert flag in err and what in err, err


@pytest.mark.parametrize("extra, flag, what", [
    (["--lora-rank", "0"], "--lora-rank", "must be >= 1, got 0"),
    (["--heal-tokens", "0"], "--heal-tokens", "must be >= 1, got 0"),
    (["--heal-tokens", "-5"], "--heal-tokens", "must be >= 1, got -5"),
    (["--lora-targets", "q_proj,c_attn"], "--lora-targets", "c_attn: the model's blocks have no such linear layer; "
                                                             "allowed: down_proj, gate_proj, k_proj"),
    (["--dtype", "bfloat16"], "--dtype bfloat16", "float32"),
    (["--heal-method", "qlora"], "--heal-method", "invalid choice: 'qlora'"),
])
def test_a_bad_flag_exits_2_naming_it_before_anything_loads(model_dir, texts, nothing_loads, tmp_path, capsys,
                                                            extra, flag, what):
    out = tmp_path / "out"
    _refused(["heal", "--model", str(model_dir), "--remove", "1", *HEAL, *extra, "--save", str(out)], capsys, flag,
             what)
    assert not out.exists()


def test_missing_healing_data_exits_2_naming_the_file(model_dir, nothing_loads, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(healing_text.ENV, str(tmp_path / "nowhere.jsonl"))
    _refused(["heal", "--model", str(model_dir), *HEAL], capsys, "nowhere.jsonl", "is missing")


def test_corrupt_frozen_healing_data_exits_2_naming_the_file(model_dir, nothing_loads, monkeypatch, tmp_path, capsys):
    copy = tmp_path / "healing"
    shutil.copytree(healing_text.FROZEN["tiny"], copy)
    data = bytearray((copy / healing_text.TRAIN).read_bytes())
    data[100] = ord("#") if data[100] != ord("#") else ord("%")
    (copy / healing_text.TRAIN).write_bytes(bytes(data))
    monkeypatch.setitem(healing_text.FROZEN, "tiny", copy)
    monkeypatch.delenv(healing_text.ENV, raising=False)
    _refused(["heal", "--model", str(model_dir), "--profile", "tiny", *HEAL], capsys, str(copy / healing_text.TRAIN),
             "is corrupt")


def test_a_checkpoint_directory_that_is_not_empty_exits_2(model_dir, texts, nothing_loads, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    _refused(["heal", "--model", str(model_dir), *HEAL, "--save", str(out)], capsys, "--save", "not empty")
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


PROBE = """
import sys, torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1]).eval()
ids = torch.tensor([[1] + [5 + (i * 7) % 25 for i in range(31)]])
with torch.no_grad():
    torch.save(model(input_ids=ids).logits, sys.argv[2])
"""


def test_the_healed_checkpoint_loads_in_plain_transformers_with_the_logits_of_the_heal(model_dir, texts, tmp_path):
    out, record = tmp_path / "healed", tmp_path / "heal.json"
    assert main(["heal", "--model", str(model_dir), "--remove", "1,2", *HEAL, "--heal-seed", "5", "--save", str(out),
                 "--json", str(record)]) == 0
    logits = tmp_path / "logits.pt"
    subprocess.run([sys.executable, "-c", PROBE, str(out), str(logits)], check=True, timeout=300)
    fresh = torch.load(logits)
    # the same heal in this process (same seed, same machine): the saved model is the one trained, bit for bit
    cfg = HealConfig(tokens=512, seq_len=32, seed=5)
    model = prune_layers(random_model("llama", n_layers=4), [1, 2])
    windows = training_windows(texts, char_tokenizer(), cfg.seq_len, cfg.steps * cfg.batch_size, cfg.seed)[0]
    healed, report = heal(model, windows, cfg)
    ids = torch.tensor([[1] + [5 + (i * 7) % 25 for i in range(31)]])
    with torch.no_grad():
        assert torch.equal(healed(input_ids=ids).logits, fresh)
    saved = json.loads(record.read_text())
    assert saved["healing"]["losses"] == report.losses
    assert saved["healing_data"]["source"] == "user file"
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and config["depthprune_removed_layers"] == [1, 2]
    assert config["depthprune_healing"] == "lora-t512-s5"


def test_prune_heal_writes_a_healed_result_and_saves_the_healed_model(model_dir, texts, tmp_path):
    from depthprune.results.schema import read_result

    out, result = tmp_path / "pruned", tmp_path / "result.json"
    assert main(["prune", "--model", str(model_dir), "--profile", "tiny", "--objective", "ppl", "--calib-samples", "4",
                 "--seq-len", "32", "--search", "oneshot", "--budget", "1", "--heal", *HEAL, "--json", str(result),
                 "--save", str(out)]) == 0
    healed = read_result(result)
    assert healed.identity.heal == "lora-t512-s0" and healed["healing"]["steps"] == 4
    assert healed["settings"]["dtype"] == "torch.float32"
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 3 and config["depthprune_removed_layers"] == healed["removed"]


def test_the_hidden_state_method_heals_towards_the_dense_model_and_says_so(model_dir, texts, tmp_path):
    record = tmp_path / "heal.json"
    assert main(["heal", "--model", str(model_dir), "--remove", "1,2", *HEAL, "--heal-method", "lora-hidden",
                 "--json", str(record)]) == 0
    saved = json.loads(record.read_text())
    assert saved["healing"]["config"]["method"] == "lora-hidden"
    # its loss is the pruned model's hidden-state error relative to the dense model's: a share, not nats
    assert 0 < saved["healing"]["losses"][0] < 10
