"""The docs pages that restate the code: docs/claims.md holds every claim's quote and every
threshold as claims.toml sets it, under the claim's own heading; docs/measurements.md names only
commits that exist, each entry with a date."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from depthprune.report import claims

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _sections(text: str) -> dict[str, str]:
    """``## heading`` -> its body."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _toml_lines() -> dict[str, list[str]]:
    """Each claim section's ``name = value`` lines of claims.toml, as written there."""
    out: dict[str, list[str]] = {}
    section = None
    for line in claims.THRESHOLDS_FILE.read_text().splitlines():
        head = re.match(r'^\["?([^"\]]+)"?\]$', line)
        if head:
            section = head.group(1)
            continue
        m = re.match(r"^(\w+ = .+?)\s*(#.*)?$", line)
        if m and section in claims.CLAIMS:
            out.setdefault(section, []).append(m.group(1))
    return out


def test_the_claims_page_quotes_every_claim_and_states_its_thresholds_under_its_heading():
    sections = _sections((DOCS / "claims.md").read_text(encoding="utf-8"))
    toml = _toml_lines()
    for claim in claims.CLAIMS.values():
        heading = next((h for h in sections if claim.id in h), None) or \
            next(h for h in sections if claim.id.rsplit("-", 1)[0] in h)
        body = " ".join(re.sub(r"^> ?", "", line) for line in sections[heading].splitlines()).split()
        assert " ".join(claim.quote.split()) in " ".join(body), claim.id
        for assignment in toml[claim.id]:
            assert f"`{assignment}`" in sections[heading], (claim.id, assignment)


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def test_the_measurement_log_names_real_commits_and_dates_every_entry():
    text = (DOCS / "measurements.md").read_text(encoding="utf-8")
    dated = []  # the rows of every table with a date column: each has a date there
    for table in text.split("\n\n"):
        lines = [line for line in table.splitlines() if line.startswith("|")]
        if lines and "| date |" in lines[0]:
            column = [c.strip() for c in lines[0].split("|")].index("date")
            dated += [[c.strip() for c in row.split("|")][column] for row in lines[2:]]
    assert len(dated) >= 10 and all(re.fullmatch(r"20\d\d-\d\d-\d\d", d) for d in dated), dated
    try:
        shallow = _git("rev-parse", "--is-shallow-repository")
    except FileNotFoundError:
        pytest.skip("no git")
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a full git clone")
    for sha in sorted(set(re.findall(r"\b[0-9a-f]{7}\b", text))):
        assert _git("rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}").returncode == 0, sha
