"""README.md: at most 150 lines, its verdict block what the committed archives give, its quickstart
two one-line commands, its install lines those the test environments install, its links alive."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

from depthprune.report import readme as report_readme

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
ARCHIVE = ROOT / "archive"


def _text() -> str:
    return README.read_text(encoding="utf-8")


def test_readme_is_at_most_150_lines():
    assert len(_text().splitlines()) <= 150


@pytest.mark.skipif(not ARCHIVE.is_dir(), reason="no committed archive/")
def test_the_verdict_block_is_what_the_committed_archives_give(monkeypatch):
    from depthprune.report import readme_block

    monkeypatch.chdir(ROOT)
    assert report_readme.current(README) == readme_block([Path("archive")], README, ROOT / "REPORT.md", Path("cases")), \
        "README.md's verdict block is stale: regenerate with `depthprune report --results archive --out REPORT.md`"


def _fenced(section: str) -> list[str]:
    """The lines of the first fenced block under the ``## section`` heading."""
    body = _text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return body.split("```", 2)[1].splitlines()[1:]


def test_quickstart_is_the_main_job_and_the_tests_one_line_each():
    main_job, tests = [line.split("#", 1)[0].strip() for line in _fenced("Quickstart")]
    assert main_job == "tox -e tiny-grid" and re.fullmatch(r"tox (p )?-e py(,\w+)*", tests), (main_job, tests)
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    assert "depthprune report" in tox["testenv:tiny-grid"]["commands"]  # the main job ends in REPORT.md
    assert re.search(rf"tox {re.escape(tests[4:])}\b", (ROOT / ".ci" / "run").read_text())  # CI runs the tests


def test_install_lines_are_what_the_test_environments_install():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    torch = re.search(r"torch==[\w.]+", tox["testenv"]["deps"]).group(0)
    text = _text()
    assert f"pip install {torch} -e '.[all]'" in text and "pip install -e '.[all]'" in text
    for line in tox["testenv"]["commands_pre"].strip().splitlines():
        wheel = line.split("pip install", 1)[1].replace(" -q", "").strip()
        assert f"pip install {wheel}" in text, wheel


def test_every_local_link_exists():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", _text()):
        if "://" not in target:
            assert (ROOT / target).exists(), target


def test_the_block_is_rewritten_in_place_and_only_there(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(f"# x\n\nbefore\n{report_readme.START}\nold\n{report_readme.END}\nafter\n")
    assert report_readme.beside(tmp_path / "REPORT.md") == path
    assert report_readme.rewrite(path, [report_readme.START, "new", report_readme.END]) and not report_readme.rewrite(path, [report_readme.START, "new", report_readme.END])
    assert path.read_text() == f"# x\n\nbefore\n{report_readme.START}\nnew\n{report_readme.END}\nafter\n"
    bare = tmp_path / "bare" / "README.md"
    bare.parent.mkdir()
    bare.write_text("# no block\n")
    assert report_readme.beside(bare.parent / "REPORT.md") is None and not report_readme.has_block(bare)
    with pytest.raises(ValueError, match="no verdict block"):
        report_readme.rewrite(bare, [report_readme.START, report_readme.END])


def test_report_command_rewrites_the_readme_beside_it_unless_told_not_to(tmp_path):
    from depthprune.cli import main
    from depthprune.results.store import write_result
    from tests.fixtures import result_v2

    results = tmp_path / "results"
    write_result(results / "t" / "m-ppl-oneshot-M3.json",
                 result_v2("m", "ppl", "oneshot", [7, 8, 9], 2.0, metrics={"avg_acc": 0.4}, grid="t"))
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{report_readme.START}\n{report_readme.END}\n")
    base = ["report", "--results", str(results), "--out", str(tmp_path / "REPORT.md"), "--cases", str(tmp_path)]
    assert main([*base, "--no-readme"]) == 0 and readme.read_text() == f"# x\n{report_readme.START}\n{report_readme.END}\n"
    assert main(base) == 0
    block = report_readme.current(readme)
    assert block[0] == report_readme.START and any(line.startswith("| 5.1a ") for line in block) and "[REPORT.md](REPORT.md)" in block[-2]
    assert main([*base, "--readme", str(tmp_path / "nope.md")]) == 2
