"""The prune command: a working run, and bad input that exits 2 having written nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata

import pytest
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


# -- flags that do not apply, bad values, destinations, exit status -----------------------------


def _run(capsys, args):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_flag_that_does_not_apply_is_refused_by_its_name(llama_dir, data_env, capsys):
    args = ["prune", "--model", str(llama_dir), "--objective", "margin", "--budget", "1", "--seq-len", "32"]
    code, _, err = _run(capsys, args)
    assert code == 2
    assert "--seq-len does not apply to --objective margin" in err and "applies to: kl, ppl" in err


def test_calib_samples_zero_names_the_flag(llama_dir, data_env, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(_prune_args(llama_dir)[:-5] + ["--calib-samples", "0", "--quiet"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--calib-samples" in err and "must be >= 1, got 0" in err and "n_samples" not in err


def test_margin_takes_calib_samples_as_its_item_count(llama_dir, capsys, monkeypatch, tmp_path):
    from depthprune.cli import build_parser, objective_params_from_flags

    args = build_parser().parse_args(["prune", "--model", "x", "--objective", "margin", "--budget", "1",
                                      "--calib-samples", "7", "--calib-seed", "3"])
    assert objective_params_from_flags(args) == {"n_items": 7, "seed": 3}


@pytest.mark.parametrize("where", ["proc", "under-a-file", "directory"])
def test_an_unwritable_json_destination_fails_before_any_work(llama_dir, data_env, tmp_path, capsys, where):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    target = {"proc": "/proc/nope/x.json", "under-a-file": str(blocker / "sub" / "x.json"),
              "directory": str(tmp_path)}[where]
    code, out, err = _run(capsys, _prune_args(llama_dir, "--json", target))
    assert code == 2 and out == "", (out, err)
    assert err.startswith("depthprune prune: error: --json ") and len(err.strip().splitlines()) == 1


def test_a_failure_during_the_run_exits_1_with_its_reason(llama_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEPTHPRUNE_DATA_C4_TRAIN", str(tmp_path / "missing.jsonl"))
    code, _, err = _run(capsys, _prune_args(llama_dir))
    assert code == 1
    assert "depthprune prune: failed: DataUnavailable: data file not found" in err


# -- one recipe: `depthprune prune` with a cell's settings reproduces the cell -------------------

_GRID = """
[grid]
name = "mini"
models = ["tiny-llama3"]
objectives = ["ppl"]
searchers = ["greedy", "oneshot"]
budgets = [2]
device = "cpu"
dtype = "auto"
batch_size = 32
[objective.ppl]
n_samples = 8
seq_len = 64
[evaluation]
tasks = ["piqa"]
lambada = false
perplexity = []
limit = 8
"""


@pytest.mark.parametrize("searcher", ["greedy", "oneshot"])
def test_prune_reproduces_a_grid_cell_removed_set_loss_and_cost(tmp_path, capsys, searcher):
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "mini.toml").write_text(_GRID)
    cell = f"tiny-llama3-ppl-{searcher}-M2"
    code, out, err = _run(capsys, ["cell", cell, "--cases", str(cases), "--results", str(tmp_path / "results"),
                                   "--reference-dir", str(tmp_path / "none")])
    assert code == 0, err
    stored = json.loads((tmp_path / "results" / "mini" / f"{cell}.json").read_text())
    code, printed, err = _run(capsys, ["prune", "--model", "tiny-llama3", "--objective", "ppl", "--search", searcher,
                                       "--budget", "2", "--calib-samples", "8", "--seq-len", "64", "--quiet",
                                       "--json", str(tmp_path / "cli.json")])
    assert code == 0, err
    cli = json.loads((tmp_path / "cli.json").read_text())
    assert cli["removed"] == stored["removed"] and cli["calibration_loss"] == stored["calibration_loss"]
    for key in ("evaluations", "layer_forwards", "layer_backwards", "prior_evaluations", "search_evaluations"):
        assert cli["cost"][key] == stored["cost"][key], key
    assert {k: v for k, v in cli["identity"].items() if k != "grid"} == \
        {k: v for k, v in stored["identity"].items() if k != "grid"}
    cost_line = next(line for line in printed.splitlines() if line.startswith("cost"))
    assert f"{stored['cost']['evaluations']} evaluations, {stored['cost']['layer_forwards']} layer-forwards" in cost_line
    # oneshot is charged the shared prior it ranks by (16 singles + its answer); greedy scores them itself
    assert stored["cost"]["evaluations"] == (17 if searcher == "oneshot" else 16 + 15)
    assert stored["cost"]["prior_evaluations"] == (16 if searcher == "oneshot" else 0)
    # a second run resumes the stored cell instead of recomputing it
    code, out, _ = _run(capsys, ["cell", cell, "--cases", str(cases), "--results", str(tmp_path / "results"),
                                 "--reference-dir", str(tmp_path / "none")])
    assert code == 0 and "(resumed)" in out


def test_cell_names_an_unknown_id(tmp_path, capsys):
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "mini.toml").write_text(_GRID)
    code, _, err = _run(capsys, ["cell", "tiny-llama3-ppl-greedy-M9", "--cases", str(cases)])
    assert code == 2 and "is in no grid" in err


def test_durations_names_the_flag_when_there_is_nothing_to_record(tmp_path, capsys):
    code, _, err = _run(capsys, ["durations", "--grid", "tiny", "--results", str(tmp_path / "absent")])
    assert code == 2 and "--results" in err and "not a directory" in err
    code, _, err = _run(capsys, ["durations", "--grid", "tiny", "--results", str(tmp_path),
                                 "--out", str(tmp_path / "d.json")])
    assert code == 2 and "--grid tiny: no finished result" in err and not (tmp_path / "d.json").exists()
