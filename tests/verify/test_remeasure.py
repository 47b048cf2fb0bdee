"""Re-measurement's checks (depthprune.verify.remeasure) and bands (depthprune.verify.bands), on an
archived cell with a stand-in score function: the model-free half of ``depthprune verify``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chi2, norm

from depthprune.verify import bands
from depthprune.verify.remeasure import FAILED, NOT_VERIFIED, VERIFIED, check_cell
from depthprune.verify.run import select_cells

ARCHIVE = Path(__file__).resolve().parents[2] / "archive"
HERE = "fp32/cpu-avx2"


@pytest.fixture(scope="module")
def greedy() -> dict:
    return next(r for r in select_cells([ARCHIVE], ["tiny"]) if r["cell"] == "tiny-llama3-ppl-greedy-M3")


def recorded_score(cell: dict, shift: dict | None = None):
    """The recorded losses, each moved by ``shift[set]`` (default 0): what a machine would measure."""
    losses = {frozenset(s): v for s, v in cell["trace"]}
    return lambda sets: [losses[s] + (shift or {}).get(s, 0.0) for s in sets]


def band(nats: float):
    """``band_for``: the same band for every loss."""
    return lambda loss: bands.Band("bf16/amx | fp32/cpu-avx2", "ppl", "tiny-llama3", loss, nats, "test")


def test_the_recorded_losses_verify_and_near_ties_are_forks(greedy):
    check = check_cell(greedy, recorded_score(greedy), band(3e-4), HERE)
    assert check.status == VERIFIED and check.sets_checked >= 1 + 2 * 3
    assert check.forks and all(f.decision.gap <= 3e-4 for f in check.forks)
    assert check.label.startswith("VERIFIED WITH")
    assert check_cell(greedy, recorded_score(greedy), band(1e-9), HERE).label == "VERIFIED"


def test_a_loss_moved_past_the_band_fails_naming_the_set(greedy):
    removed = frozenset(greedy["removed"])
    check = check_cell(greedy, recorded_score(greedy, {removed: 1e-3}), band(3e-4), HERE)
    assert check.status == FAILED and str(sorted(removed)) in check.disagreement
    assert "3.33x it" in check.disagreement  # how far past the band, for a reader weighing rounding's tail


def test_a_decided_decision_that_turns_fails(greedy):
    """The final decision's rival made better here than the answer, past the band: not rounding."""
    check = check_cell(greedy, recorded_score(greedy), band(1e-9), HERE)
    final = next(d for d in check.replay.decisions if d.kind == "final")
    turned = {frozenset(final.rival): -(final.gap + 1e-6)}
    check = check_cell(greedy, recorded_score(greedy, turned), band(final.gap / 2 + 1e-6 + final.gap), HERE)
    assert check.status == VERIFIED  # inside a wide band: a fork, reported, not a failure
    assert any(f.flipped for f in check.forks)
    check = check_cell(greedy, recorded_score(greedy, turned), band(final.gap / 2), HERE)
    assert check.status == FAILED


def test_no_band_is_not_verified_and_a_replay_failure_fails(greedy):
    assert check_cell(greedy, recorded_score(greedy), lambda loss: None, HERE).status == NOT_VERIFIED
    edited = greedy.replace(calibration_loss=greedy["calibration_loss"] + 1.0)
    check = check_cell(edited, recorded_score(greedy), band(1.0), HERE)
    assert check.status == FAILED and check.disagreement.startswith("replay:")


def _rule4(diffs: list[float], checks: int) -> float:
    """Rule 4's band, computed here from its written form (docs/verify.md), not by the module."""
    rms = math.sqrt(sum(d * d for d in diffs) / len(diffs))
    return rms * math.sqrt(len(diffs) / chi2.ppf(0.05, len(diffs))) * norm.ppf(1 - 0.05 / (2 * checks))


def test_bands_are_measured_and_an_unmeasured_pair_borrows_the_widest_flagged():
    """Rule 4: a ppl band is relative to the recorded loss and pools every size; a margin band is in nats; each
    is the upper bound on the RMS difference times z for the checks it faces."""
    pair = "bf16/amx | fp32/cpu-avx2"
    diffs = [(pair, "ppl", "tiny-llama3", 1, 3.0, 3.0 + d) for d in (3e-4, -9e-4)]  # 1e-4 and 3e-4 relative
    diffs += [(pair, "ppl", "tiny-llama3", 3, 8.0, 8.0016)]  # 2e-4 relative, whatever its size
    diffs += [(pair, "ppl", "tiny-qwen3", 1, 2.0, 2.002)]  # 1e-3 relative
    diffs += [(pair, "margin", "tiny-llama3", 2, 0.01, 0.03), (pair, "margin", "tiny-llama3", 0, -1.5, -1.51)]
    checks = {(pair, "ppl", "tiny-llama3"): 400, (pair, "margin", "tiny-llama3"): 30}
    table = bands.measure(diffs, {"command": "test"}, checks=checks)
    assert {r["kind"] for r in table["bands"]} == {"relative", "absolute"} and {r["rule"] for r in table["bands"]} == {4}
    exact = bands.lookup(table, "bf16/amx", "fp32/cpu-avx2", "ppl", "tiny-llama3", 3.0)
    rel = _rule4([1e-4, 3e-4, 2e-4], 400)
    assert exact.nats == pytest.approx(rel * 3.0) and exact.flagged is None and exact.rule == 4
    assert exact.z(exact.nats) == pytest.approx(norm.ppf(1 - 0.05 / 800))  # the band is z s_up
    deeper = bands.lookup(table, "bf16/amx", "fp32/cpu-avx2", "ppl", "tiny-llama3", 8.4)  # grows with the loss
    assert deeper.nats == pytest.approx(rel * 8.4) and deeper.flagged is None
    margin = bands.lookup(table, "bf16/amx", "fp32/cpu-avx2", "margin", "tiny-llama3", 0.001)
    assert margin.nats == pytest.approx(_rule4([0.02, 0.01], 30))  # absolute: the same near 0 as far from it
    assert bands.lookup(table, "bf16/amx", "fp32/cpu-avx2", "margin", "tiny-llama3", -7.0).nats == margin.nats
    other = bands.lookup(table, "bf16/amx", "fp32/cpu-avx512", "ppl", "smollm2-135m", 2.5)
    assert other.nats == pytest.approx(_rule4([1e-3], 1) * 2.5) and "no band measured" in other.flagged
    assert bands.lookup(table, "bf16/amx", "bf16/avx512-bf16", "ppl", "tiny-llama3", 3.0) is None
    assert bands.lookup(table, "bf16/amx", "fp32/cpu-avx2", "margin", "tiny-qwen3", 1.0).flagged


def test_more_checks_widen_a_band():
    pair = "a | b"
    diffs = [(pair, "margin", "m", 1, 0.0, d) for d in (0.01, -0.02, 0.015)]
    few, many = (bands.measure(diffs, {"command": "t"}, checks={(pair, "margin", "m"): k})["bands"][0]["band"]
                 for k in (10, 10_000))
    assert few < many


@pytest.mark.parametrize("tail, at_most, at_least", [("normal", 0.05, 0.0), ("t3", 1.0, 0.5)])
def test_rule_4_fails_normal_rounding_at_most_alpha_and_a_heavy_tail_often(tail, at_most, at_least):
    """Where differences are normal, a band measured on 50 of them fails a 1,000-check verification in at most
    ALPHA of draws (rule 4's promise); Student's t with 3 degrees of freedom fails most: the z-scores show it."""
    rng = np.random.default_rng(0)
    draw = (lambda n: rng.normal(0, 1, n)) if tail == "normal" else (lambda n: rng.standard_t(3, n))
    pair, runs, failed = "a | b", 400, 0
    for _ in range(runs):
        table = bands.measure([(pair, "margin", "m", 1, 0.0, float(d)) for d in draw(50)], {"command": "t"},
                              checks={(pair, "margin", "m"): 1000})
        failed += bool((np.abs(draw(1000)) > table["bands"][0]["band"]).any())
    assert at_least <= failed / runs <= at_most


def test_a_rule_3_row_still_serves_and_says_so():
    row = {"pair": "a | b", "objective": "ppl", "model": "m", "kind": "relative", "band": 0.01, "rule": 3,
           "measured_by": "m1"}
    band = bands.lookup({"bands": [row]}, "a", "b", "ppl", "m", 2.0)
    assert band.nats == pytest.approx(0.02) and band.rule == 3 and band.sigma is None and band.z(1.0) is None
    assert band.measured_for.endswith("| rule 3")


def test_measuring_sets_are_never_checked(greedy):
    """Rule 2: the held-out sets are no removed set and no decision's set, and the checks' sample avoids them."""
    from depthprune.verify.remeasure import _sets_to_check, held_out
    from depthprune.verify.replay import replay

    rep = replay(greedy)
    held = held_out([greedy], [rep], seed=0)
    assert held and all(len(s) >= 2 for s in held)
    checked = _sets_to_check(greedy, rep, 0, set(held))
    assert not set(held) & set(checked) and frozenset(greedy["removed"]) in checked


def test_numeric_classes():
    amx = {"dtype": "torch.bfloat16", "kernels": {"bf16_matmul_kernel": "brg_matmul:avx10_1_512_amx"}}
    assert bands.numeric_class(amx) == "bf16/amx"
    assert bands.numeric_class({"dtype": "torch.float32", "kernels": {"capability": "AVX2"}}) == "fp32/cpu-avx2"
    # MKL's products on the ISA ATen's kernels use: the class of a real CPU; on another (ATen capped alone), a
    # class of its own, so no band measured on a real AVX2 CPU is taken for it, and none measured on it serves one
    same = {"capability": "AVX2", "fp32_matmul_isa": "avx2"}
    hybrid = {"capability": "AVX2", "fp32_matmul_isa": "avx512"}
    assert bands.numeric_class({"dtype": "torch.float32", "kernels": same}) == "fp32/cpu-avx2"
    assert bands.numeric_class({"dtype": "torch.float32", "kernels": hybrid}) == "fp32/cpu-avx2+mkl-avx512"
    assert bands.numeric_class({"dtype": "torch.bfloat16", "kernels": {**hybrid, **amx["kernels"]}}) == "bf16/amx"
    assert bands.numeric_class({"dtype": "torch.bfloat16", "device": "cuda:0"}) == "bf16/cuda"


def test_the_shipped_table_is_of_this_rule_and_says_how_it_was_measured():
    """verify reads bands.json: its bands must be this rule's, each naming a measurement (command, commit,
    machine, cells) that the table keeps; written by --measure-bands, never by hand."""
    import json

    table = json.loads(bands.BANDS_FILE.read_text())
    assert table["rule"] == bands.RULE and table["evaluation_rule"] == bands.EVAL_RULE
    assert all("rule" in r for r in table["bands"] + table["evaluation"])  # each row says its rule
    assert table == bands.load_table()  # a table of another rule would load empty
    rows = table["bands"] + table["evaluation"]
    assert rows and {r["measured_by"] for r in rows} == set(table["measurements"])
    for m in table["measurements"].values():
        caps, _, command = m["command"].partition("depthprune verify ")  # caps: the environment it ran under
        assert command and "--measure-bands" in command and all("=" in c for c in caps.split())
        assert len(m["commit"].removesuffix("+dirty")) == 40 and m["machine"] and m["cells"] and m["rule"] in bands.RULES
    for r in table["bands"]:
        assert r["kind"] == bands.KIND[r["objective"]] and r["rule"] == table["measurements"][r["measured_by"]]["rule"]
        if r["rule"] == 3:
            assert r["band"] == pytest.approx(r["factor"] * r["largest_difference"])
        else:
            assert r["m"] == r["sets"] and r["band"] == pytest.approx(r["rms_upper"] * r["z"])
            assert r["rms_upper"] == pytest.approx(r["rms"] * math.sqrt(r["m"] / chi2.ppf(0.05, r["m"])))


def test_a_zero_ppl_loss_adds_no_relative_difference():
    table = bands.measure([("a | b", "ppl", "m", 1, 0.0, 1e-3), ("a | b", "ppl", "m", 1, 2.0, 2.002)], {"command": "t"})
    assert table["bands"][0]["largest_difference"] == pytest.approx(1e-3) and table["bands"][0]["sets"] == 1


def test_the_ci_sample_checks_the_answer_only_and_still_catches_a_moved_loss(greedy):
    """CI's rule (remeasure.CI): the removed set and the final decision's rival, no step and no extra set;
    a loss moved past the band, or a final decision turned, still fails."""
    from depthprune.verify.remeasure import CI

    check = check_cell(greedy, recorded_score(greedy), band(1e-9), HERE, sample=CI)
    final = next(d for d in check.replay.decisions if d.kind == "final")
    assert check.status == VERIFIED and check.sets_checked == len({frozenset(final.chosen), frozenset(final.rival)})
    assert frozenset(final.chosen) == frozenset(greedy["removed"])
    assert check.sets_checked < check_cell(greedy, recorded_score(greedy), band(1e-9), HERE).sets_checked
    moved = check_cell(greedy, recorded_score(greedy, {frozenset(greedy["removed"]): 1e-3}), band(3e-4), HERE, sample=CI)
    assert moved.status == FAILED and str(sorted(greedy["removed"])) in moved.disagreement
    turned = {frozenset(final.rival): -(final.gap + 1e-6)}
    assert check_cell(greedy, recorded_score(greedy, turned), band(final.gap / 2), HERE, sample=CI).status == FAILED


def test_the_cli_offers_every_sample_rule():
    """``depthprune verify --sample``'s choices are written out (the CLI starts without torch); they stay
    remeasure.SAMPLES' names."""
    from depthprune.cli import build_parser
    from depthprune.verify.remeasure import SAMPLES

    verify = build_parser()._subparsers._group_actions[0].choices["verify"]
    [action] = [a for a in verify._actions if a.dest == "sample"]
    assert sorted(action.choices) == sorted(SAMPLES) and action.default == "full"


def test_a_dense_pass_is_paid_for_only_where_resuming_from_it_saves_as_many_blocks():
    from depthprune.verify.second import resuming_pays

    # CI's gemma3-270m ppl sample: its two sets resume at blocks 7 and 6, 13 of 18 blocks saved: no dense pass
    assert not resuming_pays([frozenset({7, 8, 9, 16}), frozenset({6, 7, 8, 9})], 18)
    assert resuming_pays([frozenset({7, 8, 9, 16}), frozenset({6, 7, 8, 9}), frozenset({5, 9})], 18)
    assert not resuming_pays([frozenset(), frozenset({17})], 18)  # the dense model saves nothing
    assert resuming_pays([frozenset({9}), frozenset({9, 10})], 18)  # 18 saved: the tie goes to the dense pass
