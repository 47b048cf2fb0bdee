"""The inference-cost claim (report/claims/cost.py) and the speed section's data (report/speed.py) on
constructed cells: HELD, NOT HELD and NOT MEASURED each where the measured speedup's interval lands, and
the Pareto front marks exactly the cells nothing beats on both speed and accuracy. No model is timed."""

from __future__ import annotations

import json

from depthprune.report import claims
from depthprune.report import speed as report_speed
from tests.fixtures import result_v2

T = claims.load_thresholds()
SEARCHERS = ["oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs"]


def timed(prefill: list[float], decode: list[float], blocks_only: float = 1.25) -> dict:
    def spread(v):
        v = sorted(v)
        return {"rounds": v, "median": v[len(v) // 2], "q1": v[0], "q3": v[-1]}
    return {"measured": {"prefill b1 c512": {"speedup": spread(prefill)}, "decode b1 c64 +16": {"speedup": spread(decode)}},
            "predicted": {"blocks_only": blocks_only}}


def grid(prefill: list[float], decode: list[float], with_speed: bool = True) -> list[dict]:
    rows = []
    for i, s in enumerate(SEARCHERS):
        r = result_v2("m", "ppl", s, [1, 2, 3 + i], 2.0, metrics={"avg_acc": 0.6})
        rows.append(r.replace(speed=timed(prefill, decode)) if with_speed else r)
    return rows


def verdict(rows):
    [v] = claims.CLAIMS["inference-cost"].verdicts(rows, T)
    return v


def test_held_when_both_speedups_track_the_blocks_removed():
    v = verdict(grid([1.24, 1.25, 1.26], [1.22, 1.25, 1.27]))
    assert v.outcome == claims.HELD and abs(v.statistic["prefill"] - 1.0) < 0.01


def test_not_held_when_decode_buys_much_less_than_the_blocks_removed():
    v = verdict(grid([1.24, 1.25, 1.26], [0.80, 0.81, 0.82]))  # r = 0.65: the head dominates decode
    assert v.outcome == claims.NOT_HELD and v.statistic["decode_high"] < 0.8


def test_not_measured_when_the_rounds_straddle_the_tolerance_or_there_is_no_speed():
    noisy = verdict(grid([1.24, 1.25, 1.26], [0.7, 1.25, 1.8]))
    assert noisy.outcome == claims.NOT_MEASURED and "cannot decide" in noisy.reason
    none = verdict(grid([1.25], [1.25], with_speed=False))
    assert none.outcome == claims.NOT_MEASURED and "depthprune speed --results" in none.reason


def test_an_archive_without_rounds_is_not_measured_and_says_why():
    rows = grid([1.25], [1.25])
    for r in rows:
        for m in r["speed"]["measured"].values():
            del m["speedup"]["rounds"]
    v = verdict(rows)
    assert v.outcome == claims.NOT_MEASURED and "per-round" in v.reason


def test_speed_attaches_by_grid_model_and_set_and_single_runs_are_not_read(tmp_path):
    rows = grid([1.25], [1.25], with_speed=False)
    record = {"schema": report_speed.SPEED_SCHEMA, "grid": rows[0].identity.grid, "machine": {"dtype": "float32"},
              "sets": [{"model": "m", "removed": [3, 2, 1], **timed([1.3], [1.2])}]}
    (tmp_path / "speed-t.json").write_text(json.dumps(record))
    (tmp_path / "speed-one-run.json").write_text(json.dumps({"schema": "depthprune-speed/1", "model": "m"}))
    attached = report_speed.attach(rows, report_speed.read_speed([tmp_path]))
    assert [("speed" in r) for r in attached] == [True] + [False] * 6 and "speed" not in rows[0]


def test_the_pareto_front_is_the_cells_nothing_beats_on_both():
    rows = []
    for search, speed, acc in (("a", 1.2, 0.60), ("b", 1.5, 0.50), ("c", 1.4, 0.45), ("d", 1.1, 0.55)):
        r = result_v2("m", "ppl", search, [1, 2], 2.0, metrics={"avg_acc": acc})
        rows.append(r.replace(speed=timed([speed], [speed])))
    grid = rows[0].identity.grid
    pts = report_speed.points(rows, {(grid, "m"): {"metrics": {"avg_acc": 0.8}}}, grid)
    assert {p["search"]: p["front"] for p in pts} == {"a": True, "b": True, "c": False, "d": False}
    assert {p["search"]: round(p["retained"], 1) for p in pts}["a"] == 75.0
