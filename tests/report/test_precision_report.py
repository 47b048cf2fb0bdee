"""The precision control section: bf16 cells against the float32 references of the same cells."""

from __future__ import annotations

from depthprune.grid.cases import Tolerance
from depthprune.grid.reference import make_reference, write_reference
from depthprune.report.precision import float32_view, grid_rows, pairs, render_precision
from depthprune.results.schema import Result
from tests.fixtures import stored_identity


def _result(cell: str, removed, loss, acc, dtype="torch.bfloat16"):
    model, objective, search, budget = cell.rsplit("-", 3)
    ident = stored_identity(grid="tiny", model=model, objective=objective, search=search, budget=int(budget[1:]),
                            calibration_seed=0, search_seed=0, variant="default")
    return Result({"cell": cell, "identity": ident, "removed": removed, "calibration_loss": loss, "fingerprint": "f",
                   "metrics": {"avg_acc": acc, "c4_ppl": 10.0}, "environment": {"dtype": dtype},
                   "item_outcomes": {"t": {"acc": "0101"}}, "n_layers": 16,
                   "cost": {"evaluations": 1, "layer_forwards": 1, "seconds": 1.0}, "trace": []})


def test_sets_losses_and_accuracies_are_compared_cell_by_cell(tmp_path):
    fp32 = [_result("m-ppl-greedy-M2", [3, 7], 2.0, 0.50, "torch.float32"),
            _result("m-ppl-oneshot-M2", [3, 7], 2.0, 0.50, "torch.float32"),
            _result("m-margin-greedy-M2", [1, 2], 1.0, 0.40, "torch.float32")]
    for r in fp32:
        write_reference(tmp_path, make_reference(r, Tolerance(near_tie_rel=1e-3), "t"))
    bf16 = [_result("m-ppl-greedy-M2", [3, 7], 2.002, 0.52),   # same set, loss +0.1%, acc +2 pt
            _result("m-ppl-oneshot-M2", [3, 8], 2.001, 0.45),  # set moved, a near tie (0.05%)
            _result("m-margin-greedy-M2", [1, 5], 1.5, 0.30),  # set moved, far
            _result("m-margin-beam-M2", [1, 5], 1.5, 0.30)]    # no float32 reference: not counted
    found = pairs(bf16, tmp_path)
    assert list(found) == ["tiny"] and len(found["tiny"]) == 3
    row = grid_rows(found["tiny"])
    assert row[0] == 3 and row[1] == "2 (1 near ties)"
    assert row[2] == "0.002 / 0.002" and row[4] == "2 pt / 2 pt"
    view = float32_view(bf16, {f["cell"]: f for _, f in found["tiny"]})
    assert [v["removed"] for v in view] == [[3, 7], [3, 7], [1, 2]] and "item_outcomes" not in view[0]
    text = "\n".join(render_precision(bf16, tmp_path))
    assert "**Finding:** 2 of 3 cells (66.7%) removed a different set in bf16 than in float32" in text
    assert "| m-margin-greedy-M2 |" in text


def test_no_bf16_results_or_no_references_give_no_section(tmp_path):
    assert render_precision([_result("m-ppl-greedy-M2", [3], 1.0, 0.5, "torch.float32")], tmp_path) == []
    assert render_precision([_result("m-ppl-greedy-M2", [3], 1.0, 0.5)], tmp_path) == []
