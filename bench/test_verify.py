"""``pytest bench --grid G --verify``: each archived cell of the selected grids replayed, one test per cell.

The same check as ``depthprune verify --replay-only`` (:mod:`depthprune.verify.replay`): the cell's
searcher, run on its recorded trace with no model, asks for the recorded sets in order and returns the
recorded answer. A part a result does not let replay (bo's GP fits, cbo's energy in results made before
they were recorded) is reported as the test's note, not failed. Without ``--verify`` this file skips.
"""

from __future__ import annotations

from depthprune.verify.replay import FAILED, PARTIAL, replay


def test_replay(verify_cell, request):
    outcome = replay(verify_cell)
    if outcome.status == PARTIAL:
        request.node.user_properties.append(("not replayed", outcome.not_replayed))
    assert outcome.status != FAILED, f"{outcome.grid}/{outcome.cell}: {outcome.disagreement}"
