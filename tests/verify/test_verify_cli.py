"""``depthprune verify`` re-measuring on a shipped tiny model, as a user runs it: each cell's lines and
``--json`` as it is decided, so a long run that is stopped keeps every cell it decided, and the seconds per
model. The outcome (verified or not) depends on this machine's kernels and is not what is tested here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from depthprune.cli import main
from depthprune.verify import remeasure

ARCHIVE = Path(__file__).resolve().parents[2] / "archive"
CELLS = ["tiny-llama3-ppl-oneshot-M3", "tiny-llama3-ppl-oneshot-M5"]

# Its runs re-measure the same cells: one model load and one scorer per condition serve them all (conftest.py's
# shared_scorers), on one xdist worker.
pytestmark = [pytest.mark.xdist_group("verify-cli"), pytest.mark.usefixtures("shared_scorers")]


def _verify(tmp_path: Path) -> tuple[int, Path]:
    report = tmp_path / "verify.json"
    args = ["verify", "--results", str(ARCHIVE), "--grid", "tiny", *(a for c in CELLS for a in ("--cell", c)),
            "--no-evaluation", "--json", str(report)]
    return main(args), report


def test_a_finished_run_writes_every_cell_with_its_time_and_the_seconds_per_model(tmp_path, capsys):
    code, report = _verify(tmp_path)
    assert code in (0, 1)
    data = json.loads(report.read_text())
    assert data["complete"] is True and data["cells_selected"] == 2
    assert [c["cell"] for c in data["cells"]] == CELLS
    elapsed = [c["elapsed_seconds"] for c in data["cells"]]
    assert 0 < elapsed[0] <= elapsed[1] <= data["seconds"]
    assert data["model_seconds"] == {"tiny-llama3": pytest.approx(elapsed[1], abs=1e-9)}
    out, err = capsys.readouterr()
    assert "seconds per model: tiny-llama3" in out and "(2 cells)" in out
    assert "verify: 1/2 cells" in err and "verify: 2/2 cells" in err  # a log's progress (stderr is no terminal)


def test_a_stopped_run_keeps_the_cells_it_decided(tmp_path, monkeypatch, capsys):
    checked = []
    real_check = remeasure.check_cell

    def stop_at_the_second(*args, **kwargs):
        if checked:
            raise KeyboardInterrupt
        checked.append(args[0]["cell"])
        return real_check(*args, **kwargs)

    monkeypatch.setattr(remeasure, "check_cell", stop_at_the_second)
    code, _ = _verify(tmp_path)
    assert code == 130 and "depthprune verify: interrupted" in capsys.readouterr().err
    data = json.loads((tmp_path / "verify.json").read_text())
    assert data["complete"] is False and data["cells_selected"] == 2
    assert [c["cell"] for c in data["cells"]] == CELLS[:1]


def test_a_models_seconds_run_from_the_previous_models_last_cell_to_its_own_last():
    from types import SimpleNamespace as Check

    from depthprune.verify.run import model_seconds

    checks = [Check(model="a", elapsed=10.0), Check(model="a", elapsed=25.0), Check(model="b", elapsed=40.0),
              Check(model="b", elapsed=41.5)]
    assert model_seconds(checks) == {"a": 25.0, "b": 16.5}
    assert model_seconds([]) == {}


def test_measured_bands_face_the_archives_checks_whatever_the_selection(tmp_path):
    """Rule 5 sizes a band for the sets the full sample checks over every cell of the selected grids, so one
    cell or two measure the same bands, one per fold (docs/verify.md); the measuring sets are the population's
    too."""
    rows = []
    for cells in (CELLS[:1], CELLS):
        table = tmp_path / f"bands-{len(cells)}.json"
        args = ["verify", "--results", str(ARCHIVE), "--grid", "tiny", *(a for c in cells for a in ("--cell", c)),
                "--no-evaluation", "--measure-bands", "--bands", str(table)]
        assert main(args) in (0, 1)
        rows.append(json.loads(table.read_text())["bands"])
    one, two = rows
    assert [(r["rule"], r["fold"], r["model"], r["objective"]) for r in one] == [
        (5, 0, "tiny-llama3", "ppl"), (5, 1, "tiny-llama3", "ppl")]
    tiny_llama3_ppl = [r for r in remeasure_population() if r.identity.model == "tiny-llama3"
                       and r.identity.objective == "ppl"]
    assert one[0]["checks"] > 10 * len(tiny_llama3_ppl) // 2  # every cell of the condition, not one or two
    keep = ("rms", "m", "checks", "z", "band")
    assert [{k: r[k] for k in keep} for r in one] == [{k: r[k] for k in keep} for r in two]


def remeasure_population() -> list:
    from depthprune.verify.run import select_cells

    return select_cells([ARCHIVE], ["tiny"])
