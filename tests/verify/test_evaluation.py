"""Evaluation re-measurement (depthprune.verify.evaluation, rule E1) on an archived cell with a stand-in
measurement: the sample rule, the item and window checks, cross-fitted bands, and what a cell's status
becomes. Model-free: ``depthprune verify`` runs the same checks on outcomes evaluated here."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
from scipy.stats import beta, binom, chi2, hypergeom, norm

from depthprune.verify import bands
from depthprune.verify import evaluation as ev
from depthprune.verify.losses import run_losses
from depthprune.verify.remeasure import FAILED, NOT_VERIFIED, VERIFIED, check_cell
from depthprune.verify.run import select_cells

ARCHIVE = Path(__file__).resolve().parents[2] / "archive"
PAIR = "bf16/amx | fp32/cpu-avx2"


@pytest.fixture(scope="module")
def tiny() -> list[dict]:
    return select_cells([ARCHIVE], ["tiny"])


@pytest.fixture(scope="module")
def cell(tiny) -> dict:
    return next(r for r in tiny if r["cell"] == "tiny-llama3-ppl-greedy-M3")


def as_recorded(result: dict, seed: int = 0) -> ev.Measured:
    """What a machine that reproduces the recorded outcomes exactly would measure on the sample."""
    items, windows = ev.sample(result, seed)
    return ev.Measured(
        {t: {m: {i: int(result["item_outcomes"][t][m][i]) for i in idx} for m in result["item_outcomes"][t]}
         for t, idx in items.items()},
        {name: {i: result["window_nll"][name][i] for i in idx} for name, idx in windows.items()})


def band(rate: float = 0.0, relative: float = 1e-3) -> ev.EvalBand:
    return ev.EvalBand(PAIR, "tiny-llama3", 1, rate, {"c4": relative, "wikitext2": relative}, "test")


@pytest.mark.parametrize("population", [32, 88, 250, 1700, 1809])
def test_the_sample_catches_a_one_percent_change_with_95_percent(population):
    n = ev.sample_size(population)
    changed = max(1, -(-population // 100))
    assert hypergeom.pmf(0, population, changed, n) <= 0.05 < hypergeom.pmf(0, population, changed, n - 1)
    assert ev.detectable_change(population, n, allowed=0) <= changed / population + 1e-12


def test_the_sample_is_seeded_by_the_removed_set_not_the_cell(tiny, cell):
    twin = next(r for r in tiny if r.identity.model == cell.identity.model and r["removed"] == cell["removed"]
                and r["cell"] != cell["cell"])
    assert ev.sample(twin) == ev.sample(cell)  # one evaluation serves both
    assert ev.sample(cell, seed=1) != ev.sample(cell)
    items, windows = ev.sample(cell)
    assert sum(map(len, items.values())) == ev.sample_size(sum(ev.item_counts(cell).values()))
    assert set(windows) == set(cell["window_nll"])


def test_the_recorded_outcomes_verify(cell):
    check = ev.check_evaluation(cell, as_recorded(cell), band())
    assert check.status == ev.VERIFIED and check.disagreements == 0 and check.agreement == 1.0
    assert check.items == ev.sample_size(check.population) and check.detectable <= 0.011


def test_an_edited_item_outcome_in_the_sample_fails_naming_it(cell):
    items, _ = ev.sample(cell)
    task = sorted(items)[0]
    doc = items[task][0]
    edited = copy.deepcopy(cell)
    outcomes = edited["item_outcomes"][task]["acc"]
    edited["item_outcomes"][task]["acc"] = outcomes[:doc] + str(1 - int(outcomes[doc])) + outcomes[doc + 1:]
    check = ev.check_evaluation(edited, as_recorded(cell), band())
    assert check.status == ev.FAILED and f"{task} item {doc} acc" in check.disagreement
    # a band that allows rounding's flips lets one through, and says what it can still catch
    lenient = ev.check_evaluation(edited, as_recorded(cell), band(rate=0.01))
    assert lenient.status == ev.VERIFIED and lenient.disagreements == 1 and lenient.allowed >= 1
    assert lenient.detectable > check.detectable


def test_a_window_past_its_band_fails_and_a_missing_band_is_not_verified(cell):
    measured = as_recorded(cell)
    first = next(iter(measured.windows["c4"]))
    recorded = cell["window_nll"]["c4"][first]
    measured.windows["c4"][first] += 1.5e-3 * recorded  # 1.5 times a relative band of 1e-3
    failed = ev.check_evaluation(cell, measured, band(relative=1e-3))
    assert failed.status == ev.FAILED and failed.disagreement.startswith("c4 window")
    assert "1.50x it" in failed.disagreement
    # the band scales with the window's recorded NLL: twice as wide a relative band lets it through
    assert ev.check_evaluation(cell, measured, band(relative=2e-3)).status == ev.VERIFIED
    assert ev.check_evaluation(cell, measured, None).status == ev.NOT_VERIFIED
    no_c4 = ev.EvalBand(PAIR, "tiny-llama3", 1, 0.0, {"wikitext2": 1.0}, "test")
    assert ev.check_evaluation(cell, as_recorded(cell), no_c4).status == ev.NOT_VERIFIED


def test_bands_are_cross_fitted_and_measured_once_per_measurement(cell):
    """Rule E3: a fold's item band is the Clopper-Pearson upper bound on its pooled disagreement rate, its window
    band rule 4's over all its windows; a cell is checked against the other fold's."""
    mine = bands.fold(cell.identity.model, cell["removed"])
    model = cell.identity.model
    rows = [(PAIR, model, mine, 50, 100, {"c4": [1.0]}), (PAIR, model, 1 - mine, 1, 100, {"c4": [0.002, 0.0]}),
            (PAIR, model, 1 - mine, 2, 100, {"c4": [0.001]})]
    checks = {(PAIR, model): {"evaluations": 40, "windows": {"c4": 900}}}
    table = bands.measure([(PAIR, "ppl", model, (1,), 3.0, 3.0003, 3.0)], {"command": "test"}, None, rows, {}, checks)
    got = ev.evaluation_band(table, "bf16/amx", "fp32/cpu-avx2", model, cell["removed"])
    assert got.fold == 1 - mine and got.rate == pytest.approx(beta.ppf(0.95, 3 + 1, 200 - 3)) and got.rule == "E3"
    rms = math.sqrt((0.002 ** 2 + 0.001 ** 2) / 3)
    s_up = rms * math.sqrt(3 / chi2.ppf(0.05, 3))
    assert got.window_sigma["c4"] == pytest.approx(s_up) and got.flagged is None
    assert got.windows["c4"] == pytest.approx(s_up * norm.ppf(1 - 0.05 / 1800))
    assert got.allowed(263) == binom.ppf(1 - 0.05 / 40, 263, got.rate) > got.rate * 263
    other = ev.evaluation_band(table, "bf16/amx", "fp32/cpu-avx512", "tiny-qwen3", [0])
    assert other.flagged and other.rate == pytest.approx(beta.ppf(0.95, 51, 50))
    assert ev.evaluation_band(table, "bf16/amx", "bf16/avx512-bf16", cell.identity.model, cell["removed"]) is None
    again = bands.measure([(PAIR, "ppl", "tiny-qwen3", (1,), 3.0, 3.0003, 3.0)], {"command": "again"}, table, [])
    assert set(again["measurements"]) == {"m1", "m2"}
    assert {r["measured_by"] for r in again["bands"]} == {"m1", "m2"}
    next_model = bands.measure([(PAIR, "ppl", "tiny-llama3.1", (1,), 3.0, 3.0003, 3.0)], {"command": "again"}, again, [])
    assert set(next_model["measurements"]) == {"m1", "m2"}  # the same run's next model: kept once


def test_an_e2_row_still_serves_and_says_so(cell):
    row = {"pair": PAIR, "model": cell.identity.model, "fold": 1 - bands.fold(cell.identity.model, cell["removed"]),
           "rate": 0.02, "windows": {"c4": 0.01}, "rule": "E2"}
    got = ev.evaluation_band({"evaluation": [row]}, "bf16/amx", "fp32/cpu-avx2", cell.identity.model, cell["removed"])
    assert got.rule == "E2" and got.allowed(263) == 5 and got.items_z(9, 263) is None
    assert got.measured_for.endswith("| rule E2")


def test_item_disagreements_report_their_z_score(cell):
    band = ev.EvalBand(PAIR, "m", 0, 0.01, {}, "test", rule="E3", evaluations=58)
    assert band.items_z(12, 263) == pytest.approx((12 - 2.63) / math.sqrt(263 * 0.01 * 0.99))


def test_the_evaluation_decides_the_cells_status(cell):
    losses = run_losses(cell)
    sets_ok = check_cell(cell, lambda sets: [losses[s] for s in sets],
                         lambda removed, loss: bands.Band(PAIR, "ppl", "tiny-llama3", loss, 1e-3, "test"),
                         "fp32/cpu-avx2")
    assert sets_ok.status == VERIFIED
    failed, unchecked = copy.deepcopy(sets_ok), copy.deepcopy(sets_ok)
    failed.add_evaluation(ev.EvalCheck(status=ev.FAILED, disagreement="c4 window 3: ..."))
    assert failed.status == FAILED and failed.disagreement == "evaluation: c4 window 3: ..."
    unchecked.add_evaluation(ev.check_evaluation(cell, as_recorded(cell), None))
    assert unchecked.status == NOT_VERIFIED and unchecked.to_dict()["evaluation"]["status"] == "NOT VERIFIED"


def test_the_ci_sample_takes_no_item_and_a_fifth_of_the_windows(cell):
    """CI's rule (remeasure.CI): windows that catch a change to 20% of them, with 95%; no item (its first
    version's 58 items failed by rounding flips alone: remeasure.Sample's docstring)."""
    from depthprune.verify.remeasure import CI

    items, windows = ev.sample(cell, 0, CI.item_change, CI.window_change)
    assert items == {}
    for name, nll in cell["window_nll"].items():
        n = len(windows[name])
        assert n == ev.sample_size(len(nll), 0.20) < ev.sample_size(len(nll))
        assert hypergeom.pmf(0, len(nll), -(-len(nll) * 20 // 100), n) <= 0.05
    check = ev.check_evaluation(cell, ev.Measured(
        {}, {name: {i: cell["window_nll"][name][i] for i in idx} for name, idx in windows.items()}), band())
    assert check.status == ev.VERIFIED and check.items == 0 and check.windows == sum(map(len, windows.values()))
