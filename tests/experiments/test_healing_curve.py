"""The healing curve's rule, on gaps made up to sit on each side of it: the budget is the first doubling that
recovers less than 10% of the gap left once the returns diminish, a heal that reaches the dense model stops it,
and the cap bounds it."""

from __future__ import annotations

from depthprune.experiments.healing_curve import cap_tokens, choose_budget, curve_sets
from depthprune.results.schema import validate
from tests.fixtures import result_v2


def test_the_budget_is_the_first_doubling_that_recovers_under_a_tenth_of_the_gap_left_as_returns_diminish():
    gaps = {4096: 1.0, 8192: 0.6, 16384: 0.4, 32768: 0.37, 65536: 0.36}
    assert choose_budget(gaps, cap=65536)[0] == 16384  # 40%, 33%, then 0.4 -> 0.37 recovers 7.5% < 10%
    assert choose_budget({**gaps, 32768: 0.35}, cap=65536)[0] == 32768  # 12.5% at 16384; 0.35 -> 0.36 at 32768
    assert choose_budget({4096: 1.0, 8192: 0.5, 16384: 0.25}, cap=16384) == (
        16384, "no doubling below the cap 16384 recovered less than 10% of the gap left with the returns "
               "diminishing: the cap")
    assert choose_budget({4096: 0.5, 8192: -0.01, 16384: -0.02}, cap=16384)[0] == 8192
    assert choose_budget(gaps, cap=8192)[0] == 8192  # the points past the cap are not read


def test_a_curve_whose_returns_still_grow_is_not_cut_where_it_starts():
    # the tiny curve of record (archive/healing-curve-tiny.json): each doubling recovers 0.8%, 1.7%, 3.4%, 7.7%
    rising = {4096: 0.390, 8192: 0.387, 16384: 0.380, 32768: 0.367, 65536: 0.339}
    assert choose_budget(rising, cap=65536)[0] == 65536
    # the first point has no doubling before it to show diminishing returns: it never ends the curve alone
    assert choose_budget({4096: 1.0, 8192: 0.99, 16384: 0.5}, cap=16384)[0] == 16384
    # once the returns fall, a share under 10% ends it
    assert choose_budget({**rising, 65536: 0.35, 131072: 0.349}, cap=131072)[0] == 65536


def test_the_cap_is_the_largest_doubling_whose_heals_fit_the_limit():
    # 10 jobs, 1000 tokens/s, 5 s per evaluation: T fits when 10 * (T/1000 + 10) <= limit
    assert cap_tokens(10, 1000.0, 5.0, limit_s=10 * (8192 / 1000 + 10)) == 8192
    assert cap_tokens(10, 1000.0, 5.0, limit_s=10 * (8191 / 1000 + 10)) == 4096
    assert cap_tokens(10, 1000.0, 5.0, limit_s=1.0) == 4096  # the start, even where nothing fits


def test_the_curve_heals_the_one_shot_sets_of_the_largest_budget_under_both_objectives():
    rows = [validate(result_v2("m", obj, search, removed, 1.0, budget=b, grid="g"), "made")
            for obj, search, removed, b in [("ppl", "oneshot", [1, 2], 2), ("margin", "oneshot", [3, 4], 2),
                                            ("ppl", "oneshot", [1], 1), ("ppl", "greedy", [5, 6], 2),
                                            ("margin", "oneshot", [1, 2], 2)]]
    assert curve_sets(rows, "g") == {"m": [(1, 2), (3, 4)]}


class _StubPoints:
    """Points as the curve journals them, made up: every heal at 1,000 tokens/s and every evaluation 2 s; C4
    perplexity falls with the tokens healed."""

    def __init__(self, model, profile, eval_cfg, out, quiet) -> None:
        self.model = model

    def point(self, removed, tokens):
        healed = {"heal_seconds": tokens / 1000, "tokens_per_second": 1000.0} if tokens else {}
        ppl = 10.0 if not removed else 10.0 * (1 + 4096 / (4096 + tokens))
        return {"model": self.model, "removed": list(removed), "tokens": tokens, "eval_seconds": 2.0,
                "metrics": {"c4_ppl": ppl, "avg_acc": 0.5}, **healed}

    def close(self) -> None:
        pass


def test_a_curve_records_each_models_own_seconds_beside_its_cap_and_budget(tmp_path, monkeypatch, capsys):
    import argparse
    from pathlib import Path

    from depthprune.common.jsonio import read_json
    from depthprune.experiments import healing_curve

    monkeypatch.setattr(healing_curve, "_ModelPoints", _StubPoints)
    archive = Path(__file__).resolve().parents[2] / "archive"
    # the tiny grid's 47 heals, each with two evaluations, fit 600 s at 8,192 tokens (47 x (8.2 + 4) s = 573 s), not
    # at 16,384 (958 s)
    args = argparse.Namespace(grid="tiny", source=[str(archive)], out=str(tmp_path), limit=600.0, archive=None,
                              models=None, quiet=True)
    assert healing_curve.run(args) == 0
    curve = read_json(tmp_path / "curve.json")
    assert curve["cap"] == 8192 and curve["jobs"] == 47
    # per model: the dense evaluation, then per set the unhealed point and the heals at 4,096 and 8,192 tokens
    per_model = 2.0 + 2 * (2.0 + (4.096 + 2.0) + (8.192 + 2.0))
    assert curve["model_seconds"] == {m: round(per_model, 1) for m in ("tiny-llama3", "tiny-llama3.1", "tiny-qwen3")}
    assert curve["points_seconds"] == round(3 * (per_model - 2.0), 1)  # its points: the dense ones are not listed
    assert "tiny-qwen3 0.6 min" in capsys.readouterr().out
