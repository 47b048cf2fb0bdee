"""The grid's check across precisions (depthprune.verify.forks): an archived cell as the reference's run, and
a run "here" made by its own searcher on the recorded losses moved by chosen amounts (so it replays)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from depthprune.grid.reference import read_reference
from depthprune.results.schema import Result, to_json
from depthprune.search import get_searcher
from depthprune.verify.bands import pair_key
from depthprune.verify.forks import archived_run, check_across
from depthprune.verify.replay import replay
from depthprune.verify.run import select_cells

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "archive"
RECORDED, HERE = "bf16/amx", "fp32/cpu-avx512"


@pytest.fixture(scope="module")
def greedy() -> Result:
    return next(r for r in select_cells([ARCHIVE], ["tiny"]) if r["cell"] == "tiny-llama3-ppl-greedy-M3")


def table(relative: float, rate: float = 0.02, window: float = 0.01) -> dict:
    """A bands table for the pair: ppl bands ``relative`` x the loss; evaluation bands for both folds."""
    pair = pair_key(RECORDED, HERE)
    return {"rule": 3, "bands": [{"pair": pair, "objective": "ppl", "model": "tiny-llama3", "kind": "relative",
                                  "band": relative}],
            "evaluation": [{"pair": pair, "model": "tiny-llama3", "fold": f, "rate": rate,
                            "windows": {"c4": window, "wikitext2": window}} for f in (0, 1)]}


class _Logged:
    """A score function that records what it is asked, in order: a run's trace."""

    def __init__(self, loss):
        self.loss, self.trace = loss, []

    def __call__(self, s):
        value = self.loss(frozenset(s))
        self.trace.append([sorted(s), value])
        return value

    def many(self, sets):
        return [self(s) for s in sets]


def run_here(ref: Result, shift: dict[frozenset, float] | None = None) -> Result:
    """The reference's cell run again by its searcher on its recorded losses moved by ``shift``; sets it never
    scored get an additive stand-in (dense + the singles' increments), as a fork explores elsewhere."""
    shift = shift or {}
    recorded = {frozenset(s): v for s, v in ref["trace"]}
    dense, prior = ref["dense_calibration_loss"], ref["prior"]

    def loss(s: frozenset) -> float:
        base = recorded[s] if s in recorded else dense + sum(prior[i] - dense for i in s)
        return base + shift.get(s, 0.0)

    here = copy.deepcopy(to_json(ref))  # the stored form, to edit
    here["prior"] = [p + shift.get(frozenset([i]), 0.0) for i, p in enumerate(prior)]
    score = _Logged(loss)
    found = get_searcher(ref.identity.search, **(ref.get("search_params") or {})).search(
        n_layers=ref["n_layers"], budget=len(ref["removed"]), score=score, seed=ref.identity.search_seed,
        protected=frozenset((ref.get("settings") or {}).get("protected") or ()), prior=here["prior"])
    here.update(trace=score.trace, removed=list(found.removed), calibration_loss=found.loss)
    here["cost"] = {**here["cost"], "search_evaluations": found.evaluations}
    here["environment"] = {**here["environment"], "dtype": "torch.float32",
                           "kernels": {**here["environment"]["kernels"], "capability": "AVX512"}}
    assert replay(here).status == "replayed"
    return Result(here)


def closest_step(ref: dict):
    return min((d for d in replay(ref).decisions if d.kind == "step"), key=lambda d: d.gap)


def test_the_reference_run_is_found_in_the_archive_by_its_set_and_loss(greedy):
    reference = read_reference(ROOT / "reference", greedy["cell"], "bfloat16")
    assert archived_run(reference, [ARCHIVE])["cell"] == greedy["cell"]
    assert archived_run({**reference, "calibration_loss": reference["calibration_loss"] + 1e-9}, [ARCHIVE]) is None
    assert archived_run({**reference, "dtype": "float32"}, [ARCHIVE]) is None


def test_the_same_set_within_its_bands_passes_and_its_items_are_compared(greedy):
    check = check_across(run_here(greedy), greedy, table(1e-3))
    assert not check.problems and check.fork is None
    assert (check.recorded_class, check.here_class) == (RECORDED, HERE)
    assert check.sets_compared == len({frozenset(s) for s, _ in greedy["trace"]} | {frozenset()}
                                      | {frozenset([i]) for i in range(len(greedy["prior"]))})
    assert any("same removed set" in n and "0 disagree" in n for n in check.notes)


def test_a_loss_moved_past_its_band_fails_naming_the_set(greedy):
    s = frozenset(greedy["trace"][5][0])
    check = check_across(run_here(greedy, {s: 0.01}), greedy, table(1e-4))
    assert check.problems and f"set {sorted(s)}" in check.problems[0]


def test_flipped_items_beyond_the_item_band_fail(greedy):
    here = run_here(greedy)
    task = sorted(here["item_outcomes"])[0]
    outcomes = here["item_outcomes"][task]["acc"]
    here["item_outcomes"][task]["acc"] = "".join("1" if c == "0" else "0" for c in outcomes[:60]) + outcomes[60:]
    assert check_across(here, greedy, table(1e-3)).problems
    assert not check_across(here, greedy, table(1e-3, rate=0.5)).problems


def test_a_near_tie_turned_by_rounding_is_a_numeric_fork(greedy):
    d = closest_step(greedy)
    moved = {frozenset(d.rival): -(d.gap * 1.01)}  # the rival now wins, by 1% of the gap
    width = d.gap * 1.5 / abs(d.rival_loss)  # a band wider than the gap and the move
    here = run_here(greedy, moved)
    assert sorted(here["removed"]) != sorted(greedy["removed"]) or here["trace"] != greedy["trace"]
    check = check_across(here, greedy, table(width))
    assert not check.problems, check.problems
    assert check.fork is not None and check.fork.kind == "step" and check.fork.position == d.position
    assert check.fork.reference_set == d.chosen and check.fork.here_set == d.rival
    assert check.fork.reference_gap == pytest.approx(d.gap)


def test_a_decision_turned_by_more_than_its_band_fails(greedy):
    """Each side moves within its band, but the gap they cross is wider than the band: not rounding."""
    d = closest_step(greedy)
    moved = {frozenset(d.chosen): 0.6 * d.gap, frozenset(d.rival): -0.6 * d.gap}
    width = 0.7 * d.gap / max(abs(d.chosen_loss), abs(d.rival_loss))
    check = check_across(run_here(greedy, moved), greedy, table(width))
    assert check.fork is not None and check.problems
    assert "a decision outside the band turned" in check.problems[0]


def test_no_band_for_the_pair_is_a_problem_not_a_pass(greedy):
    check = check_across(run_here(greedy), greedy, {"rule": 3, "bands": [], "evaluation": []})
    assert check.problems and "no band" in check.problems[0]


def test_the_switch_reads_on_and_off_and_refuses_anything_else(monkeypatch):
    from depthprune.verify.forks import ENV, across_enabled

    monkeypatch.delenv(ENV, raising=False)
    assert across_enabled()
    monkeypatch.setenv(ENV, "off")
    assert not across_enabled()
    monkeypatch.setenv(ENV, "sometimes")
    with pytest.raises(ValueError, match="allowed values are 'on' and 'off'"):
        across_enabled()


@pytest.mark.parametrize("moved", [0.0, 3e-4, 5e-3])
def test_the_grid_check_and_verify_give_a_cell_one_verdict_on_its_losses(greedy, moved):
    """Issue 59: both compare every set the two runs share, the singles of the prior included, with the same
    bands (depthprune.verify.losses.compare_losses). A single moved by ``moved``: within its band both pass,
    past it both fail on that single, whatever the removed set did."""
    from depthprune.verify.losses import run_losses
    from depthprune.verify.remeasure import FAILED, check_cell, set_bands

    single = frozenset([2])
    here = run_here(greedy, {single: moved})
    bands = table(1e-3)
    grid = check_across(here, greedy, bands)
    losses, recorded = run_losses(here), run_losses(greedy)  # verify re-scores every recorded set: as here
    verify = check_cell(greedy, lambda sets: [losses.get(s, recorded[s]) for s in sets],
                        set_bands(bands, RECORDED, HERE, greedy), HERE)
    assert verify.sets_checked == len(recorded) >= grid.sets_compared
    failed = moved > 1e-3 * abs(run_losses(greedy)[single])
    assert bool(grid.problems) == (verify.status == FAILED) == failed
    if failed:
        assert grid.problems[0].startswith("set [2]:") and verify.disagreement.startswith("set [2]:")


def test_a_second_opinion_settles_a_sets_failure_and_a_finding_is_what_is_left_alone():
    """depthprune.verify.forks.settle: the grid's check reads a second opinion as depthprune verify does."""
    from depthprune.verify.findings import FINDINGS
    from depthprune.verify.forks import ForkCheck, settle
    from depthprune.verify.remeasure import FAILED, VERIFIED, CellCheck

    f = FINDINGS[0]

    def failed(*extra: str) -> ForkCheck:
        c = ForkCheck(f.recorded, "fp32/cpu-avx512", failed_sets=[frozenset(s) for s in f.sets],
                      sets_problem="set [1]: ...")
        c.problems = [c.sets_problem, *extra]
        return c

    def second(status: str, sets: tuple = f.sets) -> CellCheck:
        s = CellCheck("real", f.cell, "gemma3-270m", "margin", f.recorded, "bf16/avx512-bf16", None, status=status)
        s.failed_sets = [frozenset(x) for x in sets]
        return s

    settled = failed()
    assert settle(settled, f.cell, second(VERIFIED, ())) is None and settled.problems == []
    assert any("in the recorded one: VERIFIED" in n for n in settled.notes)
    assert settle(failed(), f.cell, None) is f  # no second opinion here: the finding alone
    assert settle(failed(), f.cell, second(FAILED)) is f  # failed again in the recorded precision
    assert settle(failed(), f.cell, second(FAILED, ((1,), (4,)))) is f  # the second adds no failure
    assert settle(failed("same removed set; ... items disagree"), f.cell, None) is None  # something else failed
    other = failed()
    assert settle(other, "smollm2-135m-ppl-oneshot-M7", None) is None and other.problems
