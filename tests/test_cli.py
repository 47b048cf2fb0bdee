"""The prune command: a working run, and bad input that exits 2 having written nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from importlib import metadata

from transformers import AutoModelForCausalLM

from depthprune.cli import main


@pytest.fixture
def data_env(monkeypatch, text_file):
    monkeypatch.setenv("DEPTHPRUNE_DATA_C4_TRAIN", str(text_file))


def _prune_args(model_dir, *extra):
    return ["prune", "--model", str(model_dir), "--objective", "ppl", "--search", "greedy", "--budget", "2",
            "--calib-samples", "4", "--seq-len", "32", "--quiet", *extra]


def test_prune_saves_a_standard_smaller_checkpoint(llama_dir, data_env, tmp_path, capsys):
    out_json, out_dir = tmp_path / "r.json", tmp_path / "pruned"
    assert main(_prune_args(llama_dir, "--json", str(out_json), "--save", str(out_dir))) == 0
    printed = capsys.readouterr().out
    result = json.loads(out_json.read_text())
    assert len(result["removed"]) == 2 and f"removed    {','.join(map(str, result['removed']))}" in printed
    assert result["cost"]["evaluations"] == 6 + 5 and result["cost"]["layer_forwards"] > 0
    assert result["environment"]["packages"]["torch"] == metadata.version("torch")
    assert result["calibration_protocol"]["n_samples"] == 4 and result["calibration_protocol"]["seq_len"] == 32
    reloaded = AutoModelForCausalLM.from_pretrained(out_dir)
    assert reloaded.config.num_hidden_layers == 4
    assert reloaded.config.depthprune_removed_layers == result["removed"]
    assert (out_dir / "tokenizer.json").exists() and (out_dir / "depthprune.json").exists()


@pytest.mark.parametrize(
    "change, message",
    [
        (("--budget", "6"), "--budget 6 is out of range: .* has 6 layers; allowed 0..5"),
        (("--budget", "-1"), "--budget -1 is out of range"),
        (("--objective", "bleu"), "--objective 'bleu' is unknown; allowed: .*ppl"),
        (("--search", "annealing"), "--search 'annealing' is unknown; allowed: .*greedy"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(llama_dir, data_env, tmp_path, capsys, change, message):
    args = _prune_args(llama_dir, "--json", str(tmp_path / "r.json"), "--save", str(tmp_path / "out"))
    i = args.index(change[0])
    args[i + 1] = change[1]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    import re

    assert re.search(message, err), err
    assert list(tmp_path.iterdir()) == []


def test_unreadable_model_path(tmp_path, capsys):
    assert main(["prune", "--model", str(tmp_path / "nope"), "--budget", "1"]) == 2
    assert "unknown model" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["prune", "--model", str(empty), "--budget", "1"]) == 2
    assert "no config.json" in capsys.readouterr().err


def test_console_script_is_installed(llama_dir, text_file, tmp_path):
    env = {**os.environ, "DEPTHPRUNE_DATA_C4_TRAIN": str(text_file)}
    exe = os.path.join(os.path.dirname(sys.executable), "depthprune")
    done = subprocess.run([exe, *_prune_args(llama_dir, "--budget", "9")], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and "allowed 0..5" in done.stderr
