"""The second opinion (depthprune.verify.second): a tiny cell that fails in float32 against its bf16 record is
checked again in bf16 here. Which way it goes is set by the bands given (one row per precision pair, which
every kernel class borrows, flagged), so the test holds on any CPU. The cell is checked on CI's sample of its sets
(its answer, the dense model and the two sets farthest from it): the decisions under test are the same on any
sample, and a second opinion in bf16 costs ~65x as much per matmul on a CPU without native bf16."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthprune.results.schema import calibration_of
from depthprune.verify import remeasure as remeasure_module
from depthprune.verify.bands import numeric_class
from depthprune.verify.remeasure import BY_PRECISION, CI, FAILED, remeasure, second_check
from depthprune.verify.replay import FAILED as REPLAY_FAILED
from depthprune.verify.replay import replay
from depthprune.verify.run import remeasure_lines, remeasure_summary, select_cells

ARCHIVE = Path(__file__).resolve().parents[2] / "archive"
CELL = "tiny-llama3-ppl-oneshot-M3"

# Its runs re-measure the same cells: one model load and one scorer per condition serve them all (conftest.py's
# shared_scorers), on one xdist worker.
pytestmark = [pytest.mark.xdist_group("second-opinion"), pytest.mark.usefixtures("shared_scorers")]


def table(across: float, same: float) -> dict:
    """Relative ppl bands: ``across`` for bf16 against fp32, ``same`` for bf16 against bf16."""
    def row(pair: str, band: float) -> dict:
        return {"pair": pair, "objective": "ppl", "model": "tiny-llama3", "kind": "relative", "band": band,
                "rule": 3, "measured_by": "test"}
    return {"rule": 3, "bands": [row("bf16/amx | fp32/cpu-avx512", across), row("bf16/amx | bf16/amx", same)],
            "evaluation": []}


@pytest.fixture(scope="module")
def cell() -> list:
    return [r for r in select_cells([ARCHIVE], ["tiny"]) if r["cell"] == CELL]


def check(cell: list, across: float, same: float, second_opinion: bool = True):
    checks, _ = remeasure(cell, table(across, same), progress=False, evaluate=False, dtype="float32",
                          sample=CI, second_opinion=second_opinion)
    return checks[0]


def test_a_difference_of_precision_alone_verifies_in_the_recorded_precision(cell):
    got = check(cell, across=-1.0, same=1.0)  # no difference fits a negative band; any bf16 one fits 100%
    assert got.status == BY_PRECISION and got.label == "VERIFIED IN ITS RECORDED PRECISION"
    assert got.disagreement.startswith("set ")  # the first check's failure is kept
    assert got.second.here_class.startswith("bf16/") and got.second.sets_checked == got.sets_checked
    lines = remeasure_lines([got])
    assert any(line.startswith("SECOND OPINION") and "VERIFIED" in line for line in lines)
    assert "in the recorded precision" in remeasure_summary([got])
    assert got.to_dict()["second_opinion"]["status"].startswith("VERIFIED")


def test_a_cell_that_fails_in_both_precisions_stays_failed(cell):
    got = check(cell, across=-1.0, same=-1.0)
    assert got.status == FAILED and got.second is not None and got.second.status == FAILED


def test_no_second_opinion_when_asked_not_to(cell):
    got = check(cell, across=-1.0, same=1.0, second_opinion=False)
    assert got.status == FAILED and got.second is None


def test_a_second_opinion_whose_sets_failed_is_not_evaluated(cell, monkeypatch):
    """Its evaluation could not lift the failure, so it is not run; one whose sets verify is evaluated."""
    [result] = cell
    assert replay(result).status != REPLAY_FAILED
    evaluated = []
    monkeypatch.setattr(remeasure_module.ev, "measure_here", lambda *a, **k: evaluated.append(a) or None)
    monkeypatch.setattr(remeasure_module.ev, "check_evaluation", lambda *a, **k: remeasure_module.ev.EvalCheck())

    class Opinion:  # a second session whose every loss is far from the record, or equal to it
        here_class, session = "bf16/amx", None

        def __init__(self, far: bool) -> None:
            self.far = far

        def scorer(self, key):
            recorded = remeasure_module.run_losses(result)

            class Scorer:
                def prefetch(self, sets):
                    pass

                def many(self_, sets):
                    return [recorded[s] + (1e3 if self.far else 0.0) for s in sets]
            return Scorer()

    bands = table(across=1.0, same=1.0)
    failed = second_check(Opinion(far=True), result, calibration_of(result), bands, 0, CI, evaluate=True)
    assert failed.status == FAILED and failed.evaluation is None and not evaluated
    verified = second_check(Opinion(far=False), result, calibration_of(result), bands, 0, CI, evaluate=True)
    assert verified.status != FAILED and len(evaluated) == 1
    assert numeric_class(result["environment"]) == failed.recorded_class


@pytest.mark.parametrize("first", ["verified", "failed"])
def test_the_second_opinion_re_evaluates_only_where_the_first_evaluation_did_not_verify(cell, monkeypatch, first):
    """An evaluation that verified across precisions stands (as in the grid's check, which never re-evaluates);
    one that failed is asked again in the recorded precision."""
    evaluated = []
    monkeypatch.setattr(remeasure_module.ev, "measure_here", lambda *a, **k: evaluated.append(a) or None)
    outcomes = iter([first, "verified"])  # the first check's evaluation, then the second's (where it is made)
    monkeypatch.setattr(remeasure_module.ev, "check_evaluation",
                        lambda *a, **k: remeasure_module.ev.EvalCheck(status=next(outcomes)))
    checks, _ = remeasure(cell, table(across=-1.0, same=1.0), progress=False, evaluate=True, dtype="float32",
                          sample=CI)
    got = checks[0]
    assert got.status == BY_PRECISION and got.evaluation.status == first
    if first == "verified":
        assert len(evaluated) == 1 and got.second.evaluation is None
    else:
        assert len(evaluated) == 2 and got.second.evaluation.status == "verified"
