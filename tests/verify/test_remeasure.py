"""Re-measurement's checks (depthprune.verify.remeasure) and bands (depthprune.verify.bands), on an
archived cell with a stand-in score function: the model-free half of ``depthprune verify``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chi2, norm

from depthprune.verify import bands
from depthprune.verify.losses import run_losses
from depthprune.verify.remeasure import FAILED, NOT_VERIFIED, VERIFIED, check_cell
from depthprune.verify.run import select_cells

ARCHIVE = Path(__file__).resolve().parents[2] / "archive"
HERE = "fp32/cpu-avx2"


@pytest.fixture(scope="module")
def greedy() -> dict:
    return next(r for r in select_cells([ARCHIVE], ["tiny"]) if r["cell"] == "tiny-llama3-ppl-greedy-M3")


def recorded_score(cell: dict, shift: dict | None = None):
    """The recorded losses, each moved by ``shift[set]`` (default 0): what a machine would measure."""
    losses = run_losses(cell)
    return lambda sets: [losses[s] + (shift or {}).get(s, 0.0) for s in sets]


def band(nats: float):
    """``band_for``: the same band for every set and loss."""
    return lambda removed, loss: bands.Band("bf16/amx | fp32/cpu-avx2", "ppl", "tiny-llama3", loss, nats, "test")


def test_the_recorded_losses_verify_and_near_ties_are_forks(greedy):
    check = check_cell(greedy, recorded_score(greedy), band(3e-4), HERE)
    # every set the run recorded: the dense model, the 16 singles of its prior, its trace
    assert check.status == VERIFIED and check.sets_checked == len(run_losses(greedy)) > 1 + 16
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
    assert check_cell(greedy, recorded_score(greedy), lambda removed, loss: None, HERE).status == NOT_VERIFIED
    edited = greedy.replace(calibration_loss=greedy["calibration_loss"] + 1.0)
    check = check_cell(edited, recorded_score(greedy), band(1.0), HERE)
    assert check.status == FAILED and check.disagreement.startswith("replay:")


def test_a_single_moved_past_its_band_fails_though_the_removed_set_agrees(greedy):
    """Issue 59: the singles of the prior are checked like every other set, not only the removed one."""
    check = check_cell(greedy, recorded_score(greedy, {frozenset([1]): 1e-3}), band(3e-4), HERE)
    assert check.status == FAILED and check.disagreement.startswith("set [1]:")


def _upper(diffs: list[float], checks: int) -> float:
    """Rule 4's and 5's ``s_up * z``, computed here from its written form (docs/verify.md), not by the module."""
    rms = math.sqrt(sum(d * d for d in diffs) / len(diffs))
    return rms * math.sqrt(len(diffs) / chi2.ppf(0.05, len(diffs))) * norm.ppf(1 - 0.05 / (2 * checks))


def _sets_of_fold(model: str, f: int, count: int) -> list[tuple[int, ...]]:
    found = [(i, j) for i in range(16) for j in range(i + 1, 16) if bands.fold(model, (i, j)) == f]
    return found[:count]


def test_rule_5_weighs_a_set_by_its_distance_from_the_dense_loss_and_measures_it_on_the_other_fold():
    """Each fold's band is measured on the other fold's sets only, their differences divided by their weights
    ``1 + |L - L0| / |L0|``; a set's band is that times its own weight (module docstring of bands)."""
    pair, model, dense = "bf16/amx | fp32/cpu-avx2", "tiny-llama3", -2.0
    zero, one = _sets_of_fold(model, 0, 3), _sets_of_fold(model, 1, 2)
    # fold 0: weights 1, 2 and 3 (losses -2, -4, 2), weighted differences 0.01, 0.01, 0.02
    diffs = [(pair, "margin", model, s, loss, loss + d, dense)
             for s, loss, d in zip(zero, (-2.0, -4.0, 2.0), (0.01, -0.02, 0.06))]
    diffs += [(pair, "margin", model, s, -2.0, -2.0 + d, dense) for s, d in zip(one, (0.5, -0.5))]  # fold 1: large
    checks = {(pair, "margin", model, 1): 300, (pair, "margin", model, 0): 40}
    table = bands.measure(diffs, {"command": "test"}, checks=checks)
    assert {(r["rule"], r["fold"], r["kind"]) for r in table["bands"]} == {(5, 0, "distance"), (5, 1, "distance")}
    row0 = next(r for r in table["bands"] if r["fold"] == 0)
    assert row0["band"] == pytest.approx(_upper([0.01, 0.01, 0.02], 300)) and row0["sets"] == 3
    assert [tuple(m[0]) for m in row0["measuring_sets"]] == sorted(zero)  # kept, to recompute a later rule from
    target = one[0]  # a set of fold 1 is checked against fold 0's band
    far = bands.loss_band(table, "bf16/amx", "fp32/cpu-avx2", "margin", model, -7.0, target, dense)
    assert far.rule == 5 and far.weight == pytest.approx(3.5) and far.nats == pytest.approx(row0["band"] * 3.5)
    assert far.measured_for.endswith("rule 5, measured on fold 0") and far.flagged is None
    near = bands.loss_band(table, "bf16/amx", "fp32/cpu-avx2", "margin", model, dense, target, dense)
    assert near.nats == pytest.approx(row0["band"])
    row1 = next(r for r in table["bands"] if r["fold"] == 1)
    other = bands.loss_band(table, "bf16/amx", "fp32/cpu-avx2", "margin", model, dense, zero[0], dense)
    assert other.nats == pytest.approx(row1["band"]) and other.nats > near.nats
    assert bands.loss_band(table, "bf16/amx", "fp32/cpu-avx2", "margin", model, 1.0, target, 0.0) is None  # no scale


def test_a_rule_4_row_serves_a_caller_without_a_set_and_a_set_without_a_rule_5_row():
    """The report's firmness asks without a set (rule 4); a pair measured only under rule 4 still answers."""
    pair = "bf16/amx | fp32/cpu-avx2"
    rule4 = {"pair": pair, "objective": "ppl", "model": "m", "kind": "relative", "band": 0.01, "rms_upper": 0.003,
             "rule": 4, "measured_by": "m1"}
    rule5 = {"pair": pair, "objective": "ppl", "model": "m", "kind": "distance", "band": 0.5, "rms_upper": 0.1,
             "rule": 5, "fold": 1 - bands.fold("m", (3,)), "measured_by": "m2"}
    table = {"bands": [rule4, rule5]}
    assert bands.loss_band(table, "bf16/amx", "fp32/cpu-avx2", "ppl", "m", 2.0).nats == pytest.approx(0.02)
    assert bands.loss_band(table, "bf16/amx", "fp32/cpu-avx2", "ppl", "m", 2.0, (3,), 2.0).nats == pytest.approx(0.5)
    no_row = next(s for s in [(i,) for i in range(16)] if bands.fold("m", s) != bands.fold("m", (3,)))
    fallback = bands.loss_band(table, "bf16/amx", "fp32/cpu-avx2", "ppl", "m", 2.0, no_row, 2.0)
    assert fallback.rule == 4 and fallback.nats == pytest.approx(0.02)


def test_more_checks_widen_a_band():
    pair = "a | b"
    sets = _sets_of_fold("m", 0, 3)
    diffs = [(pair, "margin", "m", s, 1.0, 1.0 + d, 1.0) for s, d in zip(sets, (0.01, -0.02, 0.015))]
    few, many = (next(r for r in bands.measure(diffs, {"command": "t"}, checks={(pair, "margin", "m", 1): k})["bands"]
                      if r["fold"] == 0)["band"] for k in (10, 10_000))
    assert few < many


@pytest.mark.parametrize("tail, at_most, at_least", [("normal", 0.05, 0.0), ("t3", 1.0, 0.5)])
def test_rule_5_fails_normal_rounding_at_most_alpha_and_a_heavy_tail_often(tail, at_most, at_least):
    """Where weighted differences are normal, a band measured on 50 of them fails a 1,000-check verification in
    at most ALPHA of draws (the rules' promise), whatever the sets' distances from the dense loss; Student's t
    with 3 degrees of freedom fails most: the z-scores show it."""
    rng = np.random.default_rng(0)
    draw = (lambda n: rng.normal(0, 1, n)) if tail == "normal" else (lambda n: rng.standard_t(3, n))
    pair, runs, failed, dense = "a | b", 400, 0, 1.0
    sets = _sets_of_fold("m", 0, 50)
    for _ in range(runs):
        losses = rng.uniform(1.0, 9.0, 50)  # weights 1 to 9
        weights = [bands.weight(float(x), dense) for x in losses]
        diffs = [(pair, "margin", "m", s, float(x), float(x + w * d), dense)
                 for s, x, w, d in zip(sets, losses, weights, draw(50))]
        table = bands.measure(diffs, {"command": "t"}, checks={(pair, "margin", "m", 1): 1000})
        row = next(r for r in table["bands"] if r["fold"] == 0)
        checked_weights = rng.uniform(1.0, 9.0, 1000)
        failed += bool((np.abs(draw(1000) * checked_weights) > row["band"] * checked_weights).any())
    assert at_least <= failed / runs <= at_most


def test_a_rule_3_row_still_serves_and_says_so():
    row = {"pair": "a | b", "objective": "ppl", "model": "m", "kind": "relative", "band": 0.01, "rule": 3,
           "measured_by": "m1"}
    band = bands.loss_band({"bands": [row]}, "a", "b", "ppl", "m", 2.0)
    assert band.nats == pytest.approx(0.02) and band.rule == 3 and band.sigma is None and band.z(1.0) is None
    assert band.measured_for.endswith("| rule 3")


def test_measuring_sets_are_drawn_off_the_answers_and_every_recorded_set_is_checked(greedy):
    """Rule 2's draw stays (no removed set, no decision's set); rule 5 checks every set, the measuring sets
    among them, each against the band of the other fold."""
    from depthprune.verify.remeasure import held_out, sets_to_check
    from depthprune.verify.replay import replay

    rep = replay(greedy)
    held = held_out([greedy], [rep], seed=0)
    assert held and all(len(s) >= 2 for s in held) and frozenset(greedy["removed"]) not in held
    checked = sets_to_check(greedy)
    assert set(held) <= set(checked) and checked[0] == frozenset() and frozenset(greedy["removed"]) in checked


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
    """verify reads bands.json: its newest bands must be this rule's, each naming a measurement (command,
    commit, machine, cells) that the table keeps; written by --measure-bands, never by hand."""
    import json

    table = json.loads(bands.BANDS_FILE.read_text())
    assert table["rule"] == bands.RULE and table["evaluation_rule"] == bands.EVAL_RULE
    assert all("rule" in r for r in table["bands"] + table["evaluation"])  # each row says its rule
    assert table == bands.load_table()  # a table of another rule would load empty
    rows = table["bands"] + table["evaluation"]
    assert rows and {r["measured_by"] for r in rows} == set(table["measurements"])
    assert any(r["rule"] == bands.RULE for r in table["bands"])
    for m in table["measurements"].values():
        caps, _, command = m["command"].partition("depthprune verify ")  # caps: the environment it ran under
        assert command and "--measure-bands" in command and all("=" in c for c in caps.split())
        assert len(m["commit"].removesuffix("+dirty")) == 40 and m["machine"] and m["cells"] and m["rule"] in bands.RULES
    for r in table["bands"]:
        assert r["rule"] == table["measurements"][r["measured_by"]]["rule"]
        if r["rule"] == 3:
            assert r["kind"] == bands.KIND[r["objective"]]
            assert r["band"] == pytest.approx(r["factor"] * r["largest_difference"])
            continue
        assert r["m"] == r["sets"] and r["band"] == pytest.approx(r["rms_upper"] * r["z"])
        assert r["rms_upper"] == pytest.approx(r["rms"] * math.sqrt(r["m"] / chi2.ppf(0.05, r["m"])))
        if r["rule"] == 4:
            assert r["kind"] == bands.KIND[r["objective"]]
            continue
        assert r["kind"] == bands.DISTANCE and all(bands.fold(r["model"], s) == r["fold"] for s, *_ in r["measuring_sets"])
        weighted = [abs(rec - here) / bands.weight(rec, dense) for _, rec, here, dense in r["measuring_sets"]]
        assert r["rms"] == pytest.approx(math.sqrt(sum(w * w for w in weighted) / len(weighted)))


def test_a_zero_dense_loss_has_no_scale_and_adds_no_difference():
    sets = _sets_of_fold("m", 0, 2)
    table = bands.measure([("a | b", "ppl", "m", sets[0], 1.0, 1.001, 0.0), ("a | b", "ppl", "m", sets[1], 2.0, 2.002, 1.0)],
                          {"command": "t"})
    row = next(r for r in table["bands"] if r["fold"] == 0)
    assert row["sets"] == 1 and row["largest_weighted"] == pytest.approx(0.002 / 2.0)


def test_the_ci_sample_rescores_every_set_and_samples_windows_only(greedy):
    """CI's rule (remeasure.CI) samples the evaluation only (windows, no item); its sets are every set, as the
    full rule's: a moved single fails it too."""
    from depthprune.verify.remeasure import CI, FULL

    assert CI.item_change is None and CI.window_change > FULL.window_change
    moved = check_cell(greedy, recorded_score(greedy, {frozenset([5]): 1e-3}), band(3e-4), HERE)
    assert moved.status == FAILED and moved.disagreement.startswith("set [5]:")


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

    # without the dense model, the pass costs its run and its self-check: 18 + 9 blocks of 18
    assert not resuming_pays([frozenset({7, 8, 9, 16}), frozenset({6, 7, 8, 9}), frozenset({5, 9})], 18)
    assert resuming_pays([frozenset({9}), frozenset({9, 10}), frozenset({9, 11})], 18)  # 27 saved: the tie goes to it
    # with the dense model among the sets, the pass is its own run: the self-check alone is to be saved
    assert resuming_pays([frozenset(), frozenset({1}), frozenset({3}), frozenset({13, 14, 16, 17})], 18)  # CI: gemma3
    assert not resuming_pays([frozenset(), frozenset({0}), frozenset({1}), frozenset({4, 5, 12, 25})], 30)  # smollm2
    assert not resuming_pays([frozenset(), frozenset({8})], 18)
    assert resuming_pays([frozenset(), frozenset({9})], 18)
