"""How firmly each set is decided (depthprune.report.firmness) on constructed cells and bands.

A decision is inside a band or not by its gap; a borrowed band is not a measurement; a searcher's
chunked batches are not decisions; a cell's rival answer is known only where the decisions inside
are its final one or oneshot's cut; and a verdict flips when, and only when, its cells' rivals
change the statistic across the threshold. Pure Python on dicts: no model is loaded.
"""

from __future__ import annotations

import pytest

from depthprune.report import claims, firmness, verdicts
from depthprune.verify.replay import PARTIAL, REPLAYED, Decision
from tests.fixtures import result_v2

BAND = "bf16 against fp32"
AMX = {"device": "cpu", "dtype": "torch.bfloat16", "kernels": {"bf16_matmul_kernel": "brg_matmul:avx10_1_512_amx"}}


def table(model: str = "m", objective: str = "ppl", band: float = 0.1) -> dict:
    return {"rule": 3, "bands": [{"pair": "bf16/amx | fp32/cpu-avx512", "objective": objective, "model": model,
                                  "kind": "absolute", "band": band}]}


def cell(search: str = "greedy", removed=(1, 2, 3), objective: str = "ppl", **kw) -> dict:
    r = result_v2("m", objective, search, list(removed), 2.0, budget=len(removed), **kw)
    return r.replace(environment={**r["environment"], **AMX})


def final(gap: float, chosen=(1, 2, 3), rival=(1, 2, 4)) -> Decision:
    return Decision("final", tuple(chosen), 2.0, tuple(rival), 2.0 + gap, 30)


def step(gap: float, position: int = 10) -> Decision:
    return Decision("step", (1,), 3.0, (2,), 3.0 + gap, position)


def test_a_decision_inside_the_band_and_one_outside():
    inside = firmness.cell_firmness(cell(), [step(0.5), final(0.05)], REPLAYED, BAND, table())
    assert inside.status == firmness.INSIDE and inside.inside == (final(0.05),) and inside.rival == (1, 2, 4)
    assert inside.ratio == pytest.approx(0.5)
    firm = firmness.cell_firmness(cell(), [step(0.5), final(0.15)], REPLAYED, BAND, table())
    assert firm.status == firmness.FIRM and firm.rival is None and firm.ratio == pytest.approx(1.5)


def test_a_step_inside_the_band_leaves_the_rival_answer_unknown():
    c = firmness.cell_firmness(cell(), [step(0.01), final(0.05)], REPLAYED, BAND, table())
    assert c.status == firmness.INSIDE and c.rival is None and c.smallest == step(0.01)


def test_batches_of_an_enumeration_or_population_are_not_decisions():
    assert firmness.decisive(cell("ga"), [step(0.01), final(0.5)]) == [final(0.5)]
    assert firmness.decisive(cell("greedy"), [step(0.01), final(0.5)]) == [step(0.01), final(0.5)]
    c = firmness.cell_firmness(cell("rank"), [step(0.01), final(0.5)], REPLAYED, BAND, table())
    assert c.status == firmness.FIRM


def test_oneshot_cut_inside_the_band_swaps_the_two_singles():
    cut = Decision("prior", (3,), 0.50, (7,), 0.52, 0)
    c = firmness.cell_firmness(cell("oneshot"), [cut], REPLAYED, BAND, table())
    assert c.status == firmness.INSIDE and c.rival == (1, 2, 7)
    greedy = firmness.cell_firmness(cell("greedy"), [cut], REPLAYED, BAND, table())
    assert greedy.status == firmness.INSIDE and greedy.rival is None  # the cut only starts its path


def test_no_measured_band_is_not_measured_and_a_borrowed_one_does_not_count():
    other_model = firmness.cell_firmness(cell(), [final(0.01)], REPLAYED, BAND, table(model="other"))
    assert other_model.status == firmness.UNKNOWN and "no band measured" in other_model.why
    fp32 = cell()
    fp32 = fp32.replace(environment={**fp32["environment"], "dtype": "torch.float32", "kernels": {}})
    assert firmness.cell_firmness(fp32, [final(0.01)], REPLAYED, BAND, table()).status == firmness.UNKNOWN
    assert firmness.cell_firmness(cell(), [final(0.01)], "failed", BAND, table()).status == firmness.UNKNOWN


def test_a_partial_replay_is_said():
    c = firmness.cell_firmness(cell("bo"), [final(0.01)], PARTIAL, BAND, table())
    assert c.status == firmness.INSIDE and c.partial


def test_substitution_takes_the_rivals_evaluation_from_the_cell_that_removed_it():
    mine = cell("greedy", (1, 2, 3), metrics={"avg_acc": 0.5})
    twin = cell("beam", (1, 2, 4), metrics={"avg_acc": 0.7}).replace(calibration_loss=2.05)
    other = cell("ga", (5, 6, 7), metrics={"avg_acc": 0.6})
    c = firmness.cell_firmness(mine, [final(0.05)], REPLAYED, BAND, table())
    out, n = firmness.substitute([mine, twin, other], [c])
    assert out[0]["removed"] == [1, 2, 4] and out[0]["metrics"] == {"avg_acc": 0.7}
    assert out[0]["calibration_loss"] == 2.05 and out[0].identity.search == "greedy" and n["substituted"] == 1
    assert out[1:] == [twin, other] and mine["removed"] == [1, 2, 3]  # nothing else changed, nothing mutated
    alone, n = firmness.substitute([mine, other], [c])
    assert alone[0] is mine and n["rival not evaluated"] == 1
    sets, n = firmness.substitute([mine, other], [c], evaluation=False)
    assert sets[0]["removed"] == [1, 2, 4] and sets[0]["calibration_loss"] == 2.05 and n["substituted"] == 1


SEVEN = ["oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs"]


def convergence_grid(ppl_sets, margin_sets):
    """search-convergence's rows: one condition per objective, the sets given per searcher."""
    rows = []
    for i, s in enumerate(SEVEN):
        rows.append(cell(s, ppl_sets[i], "ppl"))
        rows.append(cell(s, margin_sets[i], "margin"))
    return rows


def test_a_verdict_flips_when_the_rivals_cross_its_threshold_and_holds_when_they_do_not():
    # each condition: 3 searchers remove one set, 4 another: mean pairwise Jaccard 9/21 = 0.43 < 0.5 (NOT HELD);
    # if ppl's 4 took the 3's set as their rival, ppl's would be 1.0 and the median (0.71) would hold
    t = claims.load_thresholds()
    rows = convergence_grid([(8, 9, 10)] * 3 + [(0, 1, 2)] * 4, [(1, 4, 7)] * 3 + [(0, 5, 11)] * 4)
    before = claims.CLAIMS["search-convergence"].verdicts(rows, t)[0]
    assert before.outcome == claims.NOT_HELD
    rivals = [firmness.cell_firmness(r, [final(0.05, r["removed"], (8, 9, 10))], REPLAYED, BAND, table())
              for r in rows if r["removed"] == [0, 1, 2]]
    after = firmness.rejudge(rows, [before], {BAND: rivals}, t)[0]
    assert after.changed == {("search-convergence", before.grid): (claims.NOT_HELD, claims.HELD)}
    assert firmness.flippable([after]) == {("search-convergence", before.grid)}
    # the same rivals outside the band: nothing is substituted, nothing changes
    firm = [firmness.cell_firmness(r, [final(0.5, r["removed"], (8, 9, 10))], REPLAYED, BAND, table())
            for r in rows if r["removed"] == [0, 1, 2]]
    assert firmness.rejudge(rows, [before], {BAND: firm}, t)[0].changed == {}
    # a claim that reads the evaluation takes no rival that no cell evaluated (none is, here)
    assert all(not claims.CLAIMS[claim].reads_evaluation for claim, _ in after.changed)


def test_the_matrix_marks_a_flippable_verdict_and_says_so():
    rows = convergence_grid([(8, 9, 10)] * 7, [(1, 4, 7)] * 7)
    vs = claims.judge_all(rows, claims.load_thresholds())
    plain = "\n".join(verdicts.matrix(vs, []))
    marked = "\n".join(verdicts.matrix(vs, [], {("search-convergence", vs[0].grid)}))
    assert verdicts.FLIP_MARK not in plain and marked.count(verdicts.FLIP_MARK) == 2  # the cell and the legend
    assert "rounding can flip" in marked


def test_the_page_and_section_render_every_band():
    rows = [cell(s, (1, 2, 3)) for s in ("greedy", "oneshot")]
    assessed = {band: [firmness.cell_firmness(rows[0], [final(0.05)], REPLAYED, band, table()),
                       firmness.cell_firmness(rows[1], [final(0.5)], REPLAYED, band, table())] for band in firmness.BANDS}
    rj = firmness.rejudge(rows, claims.judge_all(rows, claims.load_thresholds()), assessed, claims.load_thresholds())
    page = "\n".join(firmness.page(assessed, rj))
    assert all(f"## {band}" in page for band in firmness.BANDS) and "[1, 2, 4]" in page
    section = "\n".join(firmness.section(assessed, rj, "reports/firmness.md"))
    assert "reports/firmness.md" in section and "| 2 " in section  # the grid's two cells


def test_a_followed_rival_is_taken_from_the_rivals_file_and_a_path_that_came_back_is_said():
    from depthprune.verify.firmness import decision_key, turned

    mine = cell("greedy", (1, 2, 3), metrics={"avg_acc": 0.5})
    c = firmness.cell_firmness(mine, [step(0.01), final(0.5)], REPLAYED, BAND, table())
    key = (mine["cell"], decision_key(turned(c)))
    assert firmness.substitute([mine], [c])[1]["rival unknown"] == 1
    record = {"removed": [4, 5, 6], "calibration_loss": 2.2, "evaluated": True, "metrics": {"avg_acc": 0.9}}
    out, n = firmness.substitute([mine], [c], rivals={key: record})
    assert out[0]["removed"] == [4, 5, 6] and out[0]["metrics"] == {"avg_acc": 0.9}
    assert n["substituted"] == n["evaluated here"] == 1
    unevaluated = {key: {"removed": [4, 5, 6], "calibration_loss": 2.2}}
    assert firmness.substitute([mine], [c], rivals=unevaluated)[1]["rival not evaluated"] == 1
    assert firmness.substitute([mine], [c], False, unevaluated)[0][0]["removed"] == [4, 5, 6]
    back = {key: {"removed": [1, 2, 3], "calibration_loss": 2.0}}
    out, n = firmness.substitute([mine], [c], rivals=back)
    assert out[0] is mine and n["same set"] == 1
