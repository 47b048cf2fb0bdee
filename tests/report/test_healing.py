"""REPORT's healing-curve paragraph: which rule judged the curve, what the rule as first written would have picked
where that differs, and each model's time."""

from __future__ import annotations

from depthprune.experiments.healing_curve import REVISION
from depthprune.report.healing import curve_lines

# the real curve of record's shape (archive/healing-curve-real.json): each doubling recovers more than the last
RISING = {"4096": 3.121, "8192": 2.924, "16384": 2.592, "32768": 2.208}


def curve(grid: str, **extra) -> dict:
    return {"grid": grid, "mean_gap": RISING, "budget": 32768, "cap": 32768, "why": "the cap", "jobs": 43,
            "limit_s": 21600, "cap_from": {"tokens_per_second": 171.5}, "points": [], "revision": REVISION,
            "points_seconds": 2213.1, **extra}


def test_a_curve_judged_after_the_revision_says_what_the_first_rule_would_have_picked():
    text = "\n".join(curve_lines(curve("real")))
    assert "revised 2026-12-07" in text and "before this curve ran" in text
    assert "As first written the rule would have picked 4,096 tokens here." in text
    # a curve read before the revision says so in its own words, once
    tiny = "\n".join(curve_lines(curve("tiny")))
    assert "not a blind choice" in tiny and "would have picked" not in tiny


def test_each_models_time_is_printed_where_the_curve_records_it():
    text = "\n".join(curve_lines(curve("real", model_seconds={"gemma3-270m": 1376.7, "smollm2-135m": 953.6})))
    assert "(per model, the dense evaluation included: gemma3-270m 22.9 min, smollm2-135m 15.9 min)." in text
    assert "each timed when it ran." in "\n".join(curve_lines(curve("real")))


N = 4000  # items: nested outcomes, so that the evaluation's noise is small (as tests/report/test_claims_healing.py)


def _items(acc: float) -> dict:
    k = round(acc * N)
    return {"t": {"acc": "1" * k + "0" * (N - k)}}


def _healed(removed: list[int], acc: float, ppl: float, method: str = "lora", items: bool = True, seed: int = 0,
            grid: str = "g"):
    from depthprune.results.schema import Result, to_json
    from tests.fixtures import result_v2

    r = to_json(result_v2("m", "ppl", "oneshot", removed, 1.0, budget=len(removed), grid=grid,
                          metrics={"avg_acc": acc, "c4_ppl": ppl}))
    r["identity"] = {**r["identity"], "heal": f"{method}-t4096-s{seed}"}
    protocol = {"zero_shot": {"headline_metric": {"t": "acc"}}}
    r["healing"] = {"before_float32": {"metrics": {"avg_acc": 0.5, "c4_ppl": 30.0}, "item_outcomes": {},
                                       "window_nll": {}}}
    if items:
        r.update(item_outcomes=_items(acc), evaluation_protocol=protocol)
    return Result.of(r)


def _text(rows, tmp_path) -> str:
    from depthprune.report.healing import section

    return "\n".join(section(rows, [], tmp_path, str))


def test_a_second_method_stands_beside_the_first_and_out_of_its_table_and_figure(tmp_path):
    rows = [_healed([1, 2], 0.55, 20.0), _healed([3, 4], 0.60, 25.0),
            _healed([1, 2], 0.58, 22.0, method="lora-hidden")]
    text = _text(rows, tmp_path)
    main_table = text.split("**A second method beside the first**")[0]
    assert "lora-t4096-s0" in main_table and "lora-hidden" not in main_table
    assert "| g | m | [1, 2] | lora-hidden-t4096-s0 | 30 → 20 → 22 | 0.5 → 0.55 → 0.58 |" in text
    assert ("`g, lora-hidden`, over 1 sets (m), the other method's avg accuracy minus the main method's: mean +0.0300; "
            "higher on 1") in text
    # a second method's heal with no main heal of its set has nothing to stand beside
    alone = _text([_healed([5, 6], 0.5, 30.0, method="lora-hidden")], tmp_path)
    assert "A second method" not in alone


def test_the_methods_difference_carries_its_interval_and_mde_and_can_come_out_either_way(tmp_path):
    def rows(gain: float) -> list:
        out = []
        for i, acc in enumerate((0.50, 0.55, 0.60, 0.65)):
            out += [_healed([i, 9], acc, 20.0), _healed([i, 9], acc + gain, 20.0, method="lora-hidden")]
        return out

    far, near, below = _text(rows(0.05), tmp_path), _text(rows(0.0), tmp_path), _text(rows(-0.05), tmp_path)
    assert "mean +0.0500" in far and "(lies above 0)" in far and "smallest detectable difference" in far
    assert "mean +0.0000" in near and "(contains 0)" in near
    assert "mean -0.0500" in below and "(lies below 0)" in below
    # a second seed of the main method widens the MDE: its spread is the heals' seed noise
    mde = float(far.split("smallest detectable difference ")[1].split()[0])
    seeded = rows(0.05) + [_healed([i, 9], acc + 0.04, 20.0, seed=1) for i, acc in enumerate((0.50, 0.55, 0.60, 0.65))]
    assert float(_text(seeded, tmp_path).split("smallest detectable difference ")[1].split()[0]) > mde


def test_a_grids_method_difference_reads_the_seed_noise_of_its_own_heals_only(tmp_path):
    """Another grid's heals on two seeds measure other models: they leave this grid's MDE as it is (REPORT's real
    line read the tiny grid's seed pairs until 2026-12-07)."""
    def mde(text: str, label: str) -> float:
        return float(text.split(f"`{label}`")[1].split("smallest detectable difference ")[1].split()[0])

    base = []
    for i, acc in enumerate((0.50, 0.55, 0.60, 0.65)):
        base += [_healed([i, 9], acc, 20.0), _healed([i, 9], acc + 0.05, 20.0, method="lora-hidden")]
    other = [_healed([i, 8], acc, 20.0, grid=grid, seed=seed)
             for grid, seed, acc in (("h", 0, 0.50), ("h", 1, 0.60)) for i in range(3)]
    assert mde(_text(base + other, tmp_path), "g, lora-hidden") == mde(_text(base, tmp_path), "g, lora-hidden")


def test_without_per_item_outcomes_the_noise_is_not_measured(tmp_path):
    text = _text([_healed([1, 2], 0.55, 20.0, items=False),
                  _healed([1, 2], 0.58, 22.0, method="lora-hidden", items=False)], tmp_path)
    assert "Its noise is not measured: a heal lacks per-item outcomes. Not judged." in text
