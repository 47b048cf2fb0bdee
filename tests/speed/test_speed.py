"""``depthprune speed``'s machinery, not its numbers (speed is measured in bench/test_bench_speed.py):
the rebuilt model computes what the masked view computes, the cost table predicts exactly 1.0 for the
dense model and fits what it is given, bad input exits 2 before any weight loads and writes nothing,
and one tiny run (a shipped model, a saved checkpoint, a random stand-in) writes its record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from depthprune.cli import main
from depthprune.model import TINY_MODELS, WeightsUnavailable, load_model
from depthprune.model.masking import prune_layers, skip_layers
from depthprune.speed import costs
from depthprune.speed.compare import rebuild
from depthprune.speed.timing import Workload, run_decode, spread
from tests.fixtures import random_model, result_v2

TINY = "tiny-llama3"
FAST = ["--threads", "1", "--contexts", "8,16", "--batches", "1", "--new-tokens", "2", "--rounds", "1", "--warmup", "0",
        "--device", "cpu", "--dtype", "float32", "--quiet"]


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread for these tests (restored after): on a shared machine two threads that wait on each
    other stall whenever another process takes a core, and these tests time nothing."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    assert torch.get_num_threads() == 1  # `speed --threads` restored what it found
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny():
    try:
        model, _ = load_model(TINY, device="cpu", dtype="float32")
    except WeightsUnavailable as err:  # pragma: no cover - the tiny family ships with the package
        pytest.skip(str(err))
    return model


def test_tiny_model_is_shipped():
    assert TINY in TINY_MODELS


@pytest.mark.parametrize("arch", ["qwen3"])
def test_rebuilt_model_equals_masked_view_random(arch):
    """On a model with per-layer types (half sliding-window): prefill logits and KV-cached decode agree."""
    model = random_model(arch, n_layers=6)
    removed = (1, 4)
    ids = torch.randint(0, model.config.vocab_size, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), skip_layers(model, removed):
        masked = model(ids, use_cache=False).logits
    pruned = rebuild(model, removed)
    with torch.no_grad():
        rebuilt = pruned(ids, use_cache=False).logits
    torch.testing.assert_close(rebuilt, masked, rtol=0, atol=0)
    assert len(costs.block_types(pruned.config)) == 4  # layer_types follow the deletion
    assert len(costs.block_types(model.config)) == 6  # the dense model is left whole


def test_rebuilt_tiny_model_equals_masked_view(tiny):
    removed = (2, 6, 7)
    ids = torch.randint(0, tiny.config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), skip_layers(tiny, removed):
        masked = tiny(ids, use_cache=False).logits
    pruned = rebuild(tiny, removed)
    assert sum(p.numel() for p in pruned.parameters()) < sum(p.numel() for p in tiny.parameters())
    with torch.no_grad():
        torch.testing.assert_close(pruned(ids, use_cache=False).logits, masked, rtol=0, atol=0)
    assert run_decode(pruned, ids[:, :8], 2, "cpu") >= 0.0  # the KV cache of the renumbered blocks works


def _table(types: list[str], fixed: float, per: dict[str, float]) -> dict:
    return {"block_types": types, "phases": {"prefill@8": {"fixed_s": fixed, "block_s": per}}}


def test_dense_prediction_is_exactly_one():
    table = _table(["sliding_attention"] * 5 + ["full_attention"], 0.37, {"sliding_attention": 0.011,
                                                                        "full_attention": 0.029})
    assert costs.predict(table, "prefill@8", ()) == 1.0
    assert costs.dense_check(table)
    assert costs.predict(table, "decode@8", (1,)) is None  # a phase the table lacks: no prediction
    # full-attention blocks cost more, so removing one buys more than removing a sliding one
    assert costs.predict(table, "prefill@8", (5,)) > costs.predict(table, "prefill@8", (0,)) > 1.0
    assert costs.blocks_only(6, 2) == 1.5


@pytest.mark.parametrize("path", sorted(costs.TABLE_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_shipped_tables_predict_one_for_dense(path):
    table = json.loads(path.read_text())
    assert costs.dense_check(table)
    assert table["model"] == path.stem and len(table["block_types"]) == table["n_layers"]
    assert {"machine", "command", "date", "revision"} <= set(table)


def test_fit_recovers_costs():
    types = ["a", "a", "b", "a", "b", "a"]
    sets = costs.probe_sets(types)
    assert sets[0] == tuple(range(6)) and (0,) in sets and (2,) in sets
    truth = {"a": 2.0, "b": 5.0}
    seconds = [1.5 + sum(truth[types[i]] for i in kept) for kept in sets]
    fixed, per = costs.fit(types, sets, seconds)
    assert fixed == pytest.approx(1.5) and per == pytest.approx(truth)
    assert costs.probe_sets(["decoder"] * 4) == [(0, 1, 2, 3), (0,), (0, 1)]


def test_measure_table_on_random_model():
    model = random_model("qwen3", n_layers=4)
    table = costs.measure_table(model, "random", (8, 16), new_tokens=2, rounds=1, warmup=0, device="cpu",
                                progress=False)
    assert set(table["phases"]) == {"prefill@8", "prefill@16", "decode@8"}
    assert costs.dense_check(table)


def test_spread_and_workload_names():
    s = spread([3.0, 1.0, 2.0, 4.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (2.5, 1.0, 4.0, 4)
    assert Workload("decode", 4, 64, 16).name == "decode b4 c64 +16"
    assert Workload("prefill", 1, 512).phase == "prefill@512"


# -- bad input: exit 2, one line naming the flag or file, nothing written --------------------------------


def _refused(argv: list[str], tmp_path: Path, capsys, *words: str) -> None:
    out = tmp_path / "out.json"
    status = main(["speed", *argv, "--json", str(out), *FAST])
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert err.startswith("depthprune speed: error:") and len(err.splitlines()) == 1, err
    for word in words:
        assert word in err, err
    assert not out.exists()


@pytest.mark.parametrize("remove, words", [
    ("16", ("--remove", "out of range", "0..15")),
    ("3,99", ("--remove", "99", "0..15")),
    ("", ("--remove", "empty")),
    (",".join(map(str, range(16))), ("--remove", "all 16 blocks", "at most 15")),
])
def test_bad_removed_set_refused(remove, words, tmp_path, capsys):
    _refused(["--model", TINY, "--remove", remove], tmp_path, capsys, *words)


def test_result_of_another_model_refused(tmp_path, capsys):
    from depthprune.results.store import write_result

    path = tmp_path / "cell.json"
    write_result(path, result_v2("tiny-qwen3", "ppl", "greedy", [1, 2], 1.0, budget=2))
    _refused(["--model", TINY, "--result", str(path)], tmp_path, capsys, "--result", "tiny-qwen3", TINY)


def test_context_longer_than_model_refused(tmp_path, capsys):
    out = tmp_path / "out.json"
    status = main(["speed", "--model", TINY, "--remove", "3", "--json", str(out), "--contexts", "64,4096",
                   "--device", "cpu"])
    err = capsys.readouterr().err
    assert status == 2 and "--contexts" in err and "512" in err and not out.exists()


@pytest.mark.parametrize("argv, words", [
    (["--model", TINY], ("exactly one of",)),
    (["--model", TINY, "--remove", "1", "--checkpoint", "x"], ("--remove, --checkpoint",)),
    (["--stand-in", "llama9", "--remove", "1"], ("--stand-in", "llama3.1-8b")),
    (["--model", TINY, "--checkpoint", "/nonexistent-dir"], ("--checkpoint", "config.json")),
    (["--model", TINY, "--cost-table"], ("--out",)),
])
def test_other_bad_input_refused(argv, words, tmp_path, capsys):
    _refused(argv, tmp_path, capsys, *words)


# -- one tiny run each way -------------------------------------------------------------------------------


def test_speed_run_writes_record(tmp_path, capsys):
    out = tmp_path / "speed.json"
    assert main(["speed", "--model", TINY, "--remove", "2,6,7", "--json", str(out), *FAST]) == 0
    record = json.loads(out.read_text())
    assert record["removed"] == [2, 6, 7] and record["n_kept"] == 13 and record["model"] == TINY
    assert record["params"]["pruned"] < record["params"]["dense"]
    assert [w["workload"] for w in record["workloads"]] == ["prefill b1 c8", "prefill b1 c16", "decode b1 c8 +2"]
    assert record["workloads"][0]["predicted"]["blocks_only"] == pytest.approx(16 / 13)
    assert "flags" in record["machine"]["cpu"] or record["machine"]["cpu"]["machine"]
    assert "speedup" in capsys.readouterr().out


def test_speed_from_checkpoint(tmp_path, tiny):
    import copy

    pruned = prune_layers(copy.deepcopy(tiny), (1, 2))
    pruned.save_pretrained(tmp_path / "ckpt")
    out = tmp_path / "speed.json"
    assert main(["speed", "--model", TINY, "--checkpoint", str(tmp_path / "ckpt"), "--json", str(out), *FAST]) == 0
    record = json.loads(out.read_text())
    assert record["removed"] == [1, 2] and record["rebuilt"] == "loaded checkpoint"


def test_speed_on_stand_in(tmp_path):
    """The GPU script's path (a random-weight stand-in at a shape), at a tiny shape on the CPU."""
    out = tmp_path / "speed.json"
    assert main(["speed", "--stand-in", "tiny-64", "--remove", "1,2", "--json", str(out), *FAST]) == 0
    record = json.loads(out.read_text())
    assert record["stand_in"] == "tiny-64" and record["workloads"][0]["predicted"]["cost_table"] is None


def test_grid_results_measured_once_per_set(tmp_path, capsys):
    """``--results DIR --grid G``: two cells that removed the same set are measured once, listed together."""
    from depthprune.results.store import write_result

    results = tmp_path / "results"
    for search, removed in (("greedy", [2, 6]), ("oneshot", [2, 6]), ("beam", [3, 6])):
        write_result(results / "g" / f"{TINY}-ppl-{search}-M2.json",
                     result_v2(TINY, "ppl", search, removed, 1.0, budget=2, grid="g"))
    out = tmp_path / "speed-g.json"
    assert main(["speed", "--results", str(results), "--grid", "g", "--json", str(out), *FAST]) == 0
    record = json.loads(out.read_text())
    assert [(r["removed"], len(r["cells"])) for r in record["sets"]] == [([2, 6], 2), ([3, 6], 1)]
    assert record["machine"]["torch"] and record["grid"] == "g"
    # a speed record beside results (archive/speed-<grid>.json) is no result to the results readers
    from depthprune.results.store import iter_results

    (results / "speed-g.json").write_text(out.read_text())
    assert len(list(iter_results([results]))) == 3
    capsys.readouterr()
    _refused(["--results", str(results), "--grid", "nope"], tmp_path, capsys, "--grid nope", "g")


def test_a_stopped_grid_run_resumes_from_its_journal(tmp_path, capsys, monkeypatch):
    """A grid run stopped after its first set keeps that row in ``<json>.partial``; the rerun measures
    only the rest, the journal goes once the archive is written, and a journal of other settings is refused."""
    from depthprune.results.store import write_result
    from depthprune.speed import cells

    results = tmp_path / "results"
    for search, removed in (("greedy", [2, 6]), ("beam", [3, 6])):
        write_result(results / "g" / f"{TINY}-ppl-{search}-M2.json",
                     result_v2(TINY, "ppl", search, removed, 1.0, budget=2, grid="g"))
    out = tmp_path / "speed-g.json"
    argv = ["speed", "--results", str(results), "--grid", "g", "--json", str(out), *FAST]
    real_pair, timed = cells.time_pair, []

    def stop_at_second_set(dense, pruned, work, *rest):
        if len(timed) == 2:  # two workloads per set: the second set's first
            raise KeyboardInterrupt
        timed.append(work)
        return real_pair(dense, pruned, work, *rest)

    monkeypatch.setattr(cells, "time_pair", stop_at_second_set)
    assert main(argv) == 130  # the CLI's answer to Ctrl-C
    journal = Path(str(out) + ".partial")
    assert not out.exists() and len(journal.read_text().splitlines()) == 2  # settings + the first set
    first = json.loads(journal.read_text().splitlines()[1])
    monkeypatch.setattr(cells, "time_pair", lambda *a: timed.append(a[2]) or real_pair(*a))
    assert main(argv) == 0
    assert len(timed) == 4 and not journal.exists()  # the rerun timed only the second set
    record = json.loads(out.read_text())
    assert [r["removed"] for r in record["sets"]] == [[2, 6], [3, 6]] and record["sets"][0]["measured"] == first["measured"]
    assert record["machine"]["torch_threads"] == 1  # recorded with the threads it measured with
    journal.write_text(json.dumps({"settings": {"rounds": 99}}) + "\n")
    capsys.readouterr()
    assert main(argv) == 2 and "other settings" in capsys.readouterr().err
