"""Result archives: a round trip equals the live results, and the committed REPORT.md is what the
committed archives give (so a clean clone re-judges every reported grid without rerunning a cell)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from depthprune.results.archive import read_archive, write_archives
from depthprune.results.store import iter_dense, iter_results

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "archive"


def _result(cell: str, stand_in: bool = False) -> dict:
    from depthprune.results.schema import SCHEMA

    model, objective, search, budget = cell.rsplit("-", 3)
    identity = {"grid": "g", "model": model, "weights": "w", "profile": "tiny", "objective": objective,
                "dataset": "d", "answer": None, "calibration_seed": 0, "search": search, "variant": "default",
                "budget": int(budget[1:]), "search_seed": 0, "stand_in": stand_in}
    return {"schema": SCHEMA, "cell": cell, "identity": identity, "removed": [1], "calibration_loss": 1.0,
            "metrics": {"avg_acc": 0.5}, "fingerprint": "f", "environment": {}, "n_layers": 4,
            "evaluated": True, "objective_params": {}, "settings": {}, "item_outcomes": {"t": {"acc": "0110"}},
            "cost": {"evaluations": 1, "layer_forwards": 1, "layer_backwards": 0, "seconds": 1.0, "search_seconds": 1.0}}


def test_round_trip_keeps_every_finished_real_result_and_the_dense_files(tmp_path):
    grid = tmp_path / "results" / "g"
    (grid / "dense").mkdir(parents=True)
    for cell in ("m-ppl-greedy-M2", "m-margin-oneshot-M2"):
        (grid / f"{cell}.json").write_text(json.dumps(_result(cell)))
    (grid / "dense" / "m.json").write_text(json.dumps({"model": "m", "metrics": {"avg_acc": 0.6}}))
    cache = tmp_path / "results" / "eval-cache"  # the grids' shared evaluation cache (GridRunner.eval_cache)
    cache.mkdir()
    (cache / "0123abcd.json").write_text(json.dumps({"model": "m", "removed": [1], "metrics": {"avg_acc": 0.5}}))
    [path] = write_archives(tmp_path / "results", tmp_path / "archive")
    assert path.name == "g.jsonl.xz"
    kinds = [(k, n) for k, n, _ in read_archive(path)]
    assert kinds == [("result", "m-margin-oneshot-M2.json"), ("result", "m-ppl-greedy-M2.json"), ("dense", "m.json")]
    live = list(iter_results([tmp_path / "results"]))
    archived = list(iter_results([tmp_path / "archive"]))
    assert archived == live and archived[0]["item_outcomes"] == {"t": {"acc": "0110"}}
    assert list(iter_dense([tmp_path / "archive"])) == list(iter_dense([tmp_path / "results"]))
    before = path.read_bytes()
    write_archives(tmp_path / "results", tmp_path / "archive")
    assert path.read_bytes() == before  # same results, same bytes


def test_a_live_result_wins_over_its_archived_copy(tmp_path):
    write_dir = tmp_path / "results" / "g"
    write_dir.mkdir(parents=True)
    (write_dir / "m-ppl-greedy-M2.json").write_text(json.dumps(_result("m-ppl-greedy-M2")))
    write_archives(tmp_path / "results", tmp_path / "results")
    newer = {**_result("m-ppl-greedy-M2"), "calibration_loss": 2.0}
    (write_dir / "m-ppl-greedy-M2.json").write_text(json.dumps(newer))
    [r] = list(iter_results([tmp_path / "results"]))
    assert r["calibration_loss"] == 2.0


@pytest.mark.skipif(not ARCHIVE.is_dir(), reason="no committed archive/")
def test_committed_report_is_what_the_committed_archives_give(tmp_path, monkeypatch):
    """REPORT.md, its pages under reports/ and the names of its figures (the PNGs' bytes depend on
    the fonts and matplotlib of the machine; their names on the results)."""
    from matplotlib.figure import Figure

    from depthprune.report import write_report

    monkeypatch.chdir(ROOT)  # the report names the reference and case directories relative to the repository
    # only the figures' names are compared: each is plotted, not rendered (a third of the report's time)
    monkeypatch.setattr(Figure, "savefig", lambda self, path, **kw: Path(path).touch())
    monkeypatch.setattr(Figure, "tight_layout", lambda self, **kw: None)
    out = write_report([Path("archive")], tmp_path / "REPORT.md", tmp_path / "figures",
                       command="depthprune report --results archive --out REPORT.md")
    regenerate = "regenerate with `depthprune report --results archive --out REPORT.md` and commit what it writes"
    assert out.read_text() == (ROOT / "REPORT.md").read_text(), f"REPORT.md is not what archive/ gives: {regenerate}"
    pages = {p.name: p.read_text() for p in (tmp_path / "reports").glob("*.md")}
    assert pages == {p.name: p.read_text() for p in (ROOT / "reports").glob("*.md")}, \
        f"reports/ is not what archive/ gives: {regenerate}"
    assert sorted(p.name for p in (tmp_path / "figures").glob("*.png")) == \
        sorted(p.name for p in (ROOT / "figures").glob("*.png")), f"figures/ holds other files: {regenerate}"
