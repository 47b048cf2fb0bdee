"""Broken result files and archives are bad input: every command that reads results exits 2 with one
line naming the file (and the archive line) and what is wrong, and writes nothing. Skipped, a broken
file would only leave its cells out of a report or a check without a word."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import pytest

from depthprune.cli import main
from depthprune.report.readme import END, START
from depthprune.results.schema import to_json
from depthprune.results.store import ResultFileError, iter_results, write_result
from tests.fixtures import result_v2

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "archive" / "tiny.jsonl.xz"
needs_archive = pytest.mark.skipif(not ARCHIVE.is_file(), reason="no committed archive/tiny.jsonl.xz")


def _cell(search: str = "greedy") -> dict:
    """A cell result's stored form, as a file holds it."""
    return to_json(result_v2("m", "ppl", search, [1, 2], 1.0, budget=2, grid="g", metrics={"avg_acc": 0.5}))


def _results(tmp_path: Path) -> Path:
    """A results directory with one good cell, beside which each test puts its broken file."""
    results = tmp_path / "results"
    write_result(results / "g" / "m-ppl-oneshot-M2.json", _cell("oneshot"))
    return results


def _out(tmp_path: Path) -> Path:
    """An output folder holding only a README with a verdict block, which a failed report must leave alone."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "README.md").write_text(f"# r\n\n{START}\nold\n{END}\n")
    return out


def _report(results: Path, out: Path, capsys) -> tuple[int, str]:
    """Run ``depthprune report`` in-process; (exit status, its stderr)."""
    status = main(["report", "--results", str(results), "--out", str(out / "REPORT.md"), "--cases", str(out / "none")])
    return status, capsys.readouterr().err.strip()


def _assert_refused(status: int, err: str, out: Path, where: str, what: str) -> None:
    """Exit 2, one line ``depthprune report: error: <where>: ...<what>...``, nothing written under ``out``."""
    assert status == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"depthprune report: error: {where}: "), err
    assert what in err, err
    assert sorted(p.name for p in out.iterdir()) == ["README.md"], "a refused report wrote something"
    assert (out / "README.md").read_text() == f"# r\n\n{START}\nold\n{END}\n"


def _half_archive(tmp_path: Path) -> Path:
    """The first half of the bytes of the committed tiny archive, in a folder of its own."""
    folder = tmp_path / "archive"
    folder.mkdir()
    data = ARCHIVE.read_bytes()
    (folder / ARCHIVE.name).write_bytes(data[: len(data) // 2])
    return folder


def _archive_with_line(tmp_path: Path, n: int, text: str) -> Path:
    """The committed tiny archive with its line ``n`` replaced by ``text``."""
    lines = lzma.decompress(ARCHIVE.read_bytes()).decode().splitlines(keepends=True)
    lines[n - 1] = text + "\n"
    folder = tmp_path / "archive"
    folder.mkdir()
    (folder / ARCHIVE.name).write_bytes(lzma.compress("".join(lines).encode()))
    return folder


@pytest.mark.parametrize("content, what", [
    ("{not json", "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2)"),
    (json.dumps(_cell())[:200], "truncated: the JSON stops after 200 characters"),
    ("", "empty, expected a JSON object"),
    (json.dumps({**_cell(), "schema": 1}), "schema 1 (this depthprune reads schema 2"),
    (json.dumps({k: v for k, v in _cell().items() if k != "cost"}), "missing field(s) cost"),
], ids=["not-json", "truncated", "empty", "old-schema", "missing-field"])
def test_report_refuses_a_broken_result_file(tmp_path, capsys, content, what):
    results = _results(tmp_path)
    bad = results / "g" / "m-ppl-greedy-M2.json"
    bad.write_text(content)
    status, err = _report(results, out := _out(tmp_path), capsys)
    _assert_refused(status, err, out, str(bad), what)


def test_report_refuses_a_dense_file_that_is_not_json(tmp_path, capsys):
    results = _results(tmp_path)
    bad = results / "g" / "dense" / "m.json"
    bad.parent.mkdir()
    bad.write_text('{"grid": "g", "model": "m", "metrics": {"avg_acc": 0.')
    status, err = _report(results, out := _out(tmp_path), capsys)
    _assert_refused(status, err, out, str(bad), "truncated")


@needs_archive
def test_report_refuses_a_truncated_archive(tmp_path, capsys):
    folder = _half_archive(tmp_path)
    status, err = _report(folder, out := _out(tmp_path), capsys)
    _assert_refused(status, err, out, str(folder / ARCHIVE.name), "not a complete xz archive")


@needs_archive
@pytest.mark.parametrize("line, text, what", [
    (7, '{"kind": "result", oops}', "not valid JSON (Expecting property name enclosed in double quotes: column 20)"),
    (3, '{"kind": "result", "name": "x.json", "data": {"sch', "truncated"),
    (4, '{"kind": "cell", "name": "x.json", "data": {}}', "not an archive record: expected a JSON object with kind"),
    (5, json.dumps({"kind": "result", "name": "x.json", "data": {"schema": 2}}), "x.json: missing field(s) cell"),
], ids=["not-json", "truncated", "unknown-kind", "not-a-result"])
def test_report_names_the_line_of_a_bad_archive_record(tmp_path, capsys, line, text, what):
    folder = _archive_with_line(tmp_path, line, text)
    status, err = _report(folder, out := _out(tmp_path), capsys)
    _assert_refused(status, err, out, f"{folder / ARCHIVE.name}:{line}", what)


def test_archive_command_refuses_a_broken_cell_and_writes_no_archive(tmp_path, capsys):
    results = _results(tmp_path)
    write_result(results / "a" / "m-ppl-oneshot-M2.json", _cell("oneshot"))  # a sound grid, read first
    bad = results / "g" / "m-ppl-greedy-M2.json"
    bad.write_text("{not json")
    assert main(["archive", "--results", str(results), "--out", str(tmp_path / "archive")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"depthprune archive: error: {bad}: not valid JSON"), err
    assert not (tmp_path / "archive").exists(), "an archive was written beside a broken cell"


@pytest.mark.parametrize("command", [["durations", "--grid", "g"], ["plan", "--check"]],
                         ids=["durations", "plan-check"])
def test_other_readers_of_results_refuse_a_broken_cell_too(tmp_path, capsys, command):
    results = _results(tmp_path)
    bad = results / "g" / "m-ppl-greedy-M2.json"
    bad.write_text(json.dumps(_cell())[:100])
    durations = command[0] == "durations"
    extra = ["--results", str(results), "--out", str(tmp_path / "d.json")] if durations else [str(results)]
    assert main([*command, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"depthprune {command[0]}: error: {bad}: truncated"), err
    assert not (tmp_path / "d.json").exists()


def test_files_that_are_no_results_are_still_skipped(tmp_path):
    """A guard, not a change: what the readers skip on purpose stays skipped (this passes before the change
    too). A calibration-curve summary, a throughput.json (its schema is a string), the evaluation cache
    and dot files (an atomic write's temporary) sit among results and are no cells."""
    results = _results(tmp_path)
    for curve in (ROOT / "archive").glob("calibration-curve-*.json"):
        shutil.copy(curve, results)
    (results / "calibration-curve-m.json").write_text(json.dumps({"config": {"model": "m"}, "rows": []}))
    (results / "throughput.json").write_text(json.dumps({"schema": "depthprune-throughput/1"}))
    (results / "eval-cache").mkdir()
    (results / "eval-cache" / "0123.json").write_text('{"metrics": {')
    (results / "g" / ".m-ppl-greedy-M2.json.x1.tmp.json").write_text("{")
    assert [r["cell"] for r in iter_results([results])] == ["m-ppl-oneshot-M2"]


def test_the_error_carries_the_file_and_the_line(tmp_path):
    """What a caller (report, verify) gets: the path and line as attributes, not only in the message."""
    err = ResultFileError(tmp_path / "a.jsonl.xz", "not valid JSON", 7)
    assert (err.path, err.line, err.problem) == (tmp_path / "a.jsonl.xz", 7, "not valid JSON")
    assert str(err) == f"{tmp_path / 'a.jsonl.xz'}:7: not valid JSON"


def test_an_unknown_score_store_switch_stops_a_cell_before_anything_loads(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DEPTHPRUNE_SCORE_STORE", "maybe")
    assert main(["cell", "tiny-llama3-ppl-greedy-M3", "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "DEPTHPRUNE_SCORE_STORE='maybe'" in err and "'on' and 'off'" in err
    assert not (tmp_path / "r").exists()
