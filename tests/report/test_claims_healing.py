"""The healing claims on constructed healed results: each verdict comes out either way with the data, and only
healed results are read (the paper's claims never see them)."""

from __future__ import annotations

import pytest

from depthprune.report import claims
from depthprune.results.schema import Result, to_json
from tests.fixtures import result_v2

T = claims.load_thresholds()
SEVEN = ["oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs"]
N = 4000


def _items(acc: float) -> dict:
    k = round(acc * N)
    return {"t": {"acc": "1" * k + "0" * (N - k)}}


def healed(objective: str, search: str, removed: list[int], acc_before: float, acc_after: float, *,
           loss: float = 1.0, model: str = "m", seed: int = 0, method: str = "lora") -> Result:
    """A healed result whose set scored ``acc_before`` unhealed and ``acc_after`` healed (nested items: solutions
    differ only on the items between their accuracies, so the evaluation's noise is small)."""
    r = to_json(result_v2(model, objective, search, removed, loss, budget=len(removed), grid="g",
                          metrics={"avg_acc": acc_after}))
    protocol = {"zero_shot": {"headline_metric": {"t": "acc"}}}
    r["identity"] = {**r["identity"], "heal": f"{method}-t4096-s{seed}"}
    r.update(item_outcomes=_items(acc_after), evaluation_protocol=protocol,
             healing={"before_float32": {"metrics": {"avg_acc": acc_before}, "item_outcomes": _items(acc_before),
                                         "window_nll": {}, "evaluation_protocol": protocol}})
    return Result.of(r)


def grid(margin_before=0.60, ppl_before=0.50, margin_after=0.70, ppl_after=0.62, search_gain=0.0):
    rows = []
    for i, s in enumerate(SEVEN):
        extra = search_gain if s != "oneshot" else 0.0
        rows.append(healed("margin", s, [1, 2 + i % 3], margin_before, margin_after + extra))
        rows.append(healed("ppl", s, [5, 6 + i % 3], ppl_before, ppl_after + extra))
    return rows


def verdict(claim_id: str, rows) -> claims.Verdict:
    (v,) = claims.CLAIMS[claim_id].verdicts(rows, claims.with_threshold(T, claim_id, "n_resamples", 200))
    return v


def test_the_objective_gap_survives_shrinks_or_flips_as_the_healed_gap_says():
    assert verdict("heal-objective", grid()).outcome == claims.HELD
    shrunk = verdict("heal-objective", grid(margin_after=0.63, ppl_after=0.62))
    assert shrunk.outcome == claims.NOT_HELD and shrunk.reason.startswith("SHRINKS")
    flipped = verdict("heal-objective", grid(margin_after=0.55, ppl_after=0.62))
    assert flipped.outcome == claims.NOT_HELD and flipped.reason.startswith("FLIPS")


def test_search_after_a_heal_buys_little_or_much_as_the_healed_gains_say():
    assert verdict("heal-search", grid()).outcome == claims.HELD
    assert verdict("heal-search", grid(search_gain=0.05)).outcome == claims.NOT_HELD


def test_the_calibration_loss_predicts_the_healed_accuracy_or_not():
    def sets(sign: int):
        return [healed(obj, "greedy" if k % 2 else "ga", [k, k + 7], 0.5, 0.70 - 0.02 * k, loss=1.0 + sign * 0.1 * k)
                for obj in ("ppl", "margin") for k in range(6)]
    assert verdict("heal-rank", sets(+1)).outcome == claims.HELD  # higher loss, lower healed accuracy
    assert verdict("heal-rank", sets(-1)).outcome == claims.NOT_HELD


def test_healing_claims_read_only_healed_results_and_the_papers_only_unhealed_ones():
    unhealed = [Result.of({**to_json(r), "identity": {k: v for k, v in r["identity"].items() if k != "heal"}})
                for r in grid()]
    assert not claims.CLAIMS["heal-objective"].verdicts(unhealed, T)
    assert not claims.CLAIMS["5.1a"].verdicts(grid(), T)
    assert claims.CLAIMS["5.1a"].verdicts(unhealed, T)


@pytest.mark.parametrize("claim_id", ["heal-objective", "heal-search"])
def test_a_second_seed_widens_the_mde(claim_id):
    one_seed = verdict(claim_id, grid())
    noisy = grid() + [healed("margin", "oneshot", [1, 2], 0.60, 0.60, seed=1),
                      healed("ppl", "oneshot", [5, 6], 0.50, 0.72, seed=1)]
    two = verdict(claim_id, noisy)
    key = "healed_gap_mde" if claim_id == "heal-objective" else "ratio_mde"
    assert two.statistic[key] > one_seed.statistic[key]


@pytest.mark.parametrize("claim_id", ["heal-objective", "heal-search"])
def test_another_methods_heals_are_measured_beside_and_read_by_no_claim(claim_id):
    # (heal-rank reads the same rows, through the same selection)
    # lora-hidden's heals of the same sets, every one flipping the objective's gap and with large search gains
    beside = [healed(r.identity.objective, r.identity.search, list(r["removed"]), 0.5, 0.9 if r.identity.search
                     != "oneshot" else 0.1, method="lora-hidden") for r in grid()]
    alone, with_beside = verdict(claim_id, grid()), verdict(claim_id, grid() + beside)
    assert (with_beside.outcome, with_beside.statistic) == (alone.outcome, alone.statistic)
