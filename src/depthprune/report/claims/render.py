"""The claims as markdown: the numbered quotes, per grid a verdict table, a measures table and
the reasons, then one sensitivity matrix (threshold value × grid → outcome) for REPORT.md."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from depthprune.report.claims import helpers
from depthprune.report.claims.base import CLAIMS, Measure, Verdict, judge_all, load_thresholds, sensitivity
from depthprune.results.schema import Result


def quote_numbers() -> dict[str, int]:
    """Claim id -> the number of its quote (claims that test one sentence share it), in CLAIMS order."""
    numbers: dict[str, int] = {}
    out = {}
    for c in CLAIMS.values():
        out[c.id] = numbers.setdefault(c.quote, len(numbers) + 1)
    return out


def render_quotes() -> list[str]:
    """The quotes as a numbered list, each with where it stands and the claims that test it."""
    numbers = quote_numbers()
    lines = []
    for number in sorted(set(numbers.values())):
        ids = [cid for cid, n in numbers.items() if n == number]
        c = CLAIMS[ids[0]]
        lines.append(f"{number}. “{c.quote}” ({c.source}; claim{'s' if len(ids) > 1 else ''} {', '.join(ids)})")
    return lines


def _interval_text(m: Measure) -> str:
    return "–" if m.low is None and m.high is None else f"[{helpers.fmt(m.low)}, {helpers.fmt(m.high)}]"


def _rule_text(v: Verdict, m: Measure) -> str:
    rule = v.claim.rule(m.name)
    if rule is None:
        return "reported"
    return f"{rule.test.format(helpers.fmt(v.threshold.get(rule.param)))} ({rule.param})"


def _grid_tables(grid: str, verdicts: Sequence[Verdict]) -> list[str]:
    """A grid's verdicts: one row per claim, then one row per measure, then each verdict's reason."""
    numbers = quote_numbers()
    vs = [v for v in verdicts if v.grid == grid]
    head = [[helpers.cell(x) for x in (v.claim.id, v.claim.section, f"[{numbers[v.claim.id]}]", f"**{v.outcome}**",
                                v.n_conditions, v.n_distinct)] for v in vs]
    measures = []
    for v in vs:
        for k, m in enumerate(v.measures):
            measures.append([helpers.cell(x) for x in (v.claim.id if k == 0 else "", m.name, helpers.fmt(m.value), _interval_text(m),
                                                helpers.fmt(m.mde), _rule_text(v, m))])
    return [
        helpers.table(head, ["claim", "section", "quote", "outcome", "n cond", "n distinct"]), "",
        helpers.table(measures, ["claim", "statistic", "value", "CI", "MDE", "held if"]), "",
        "Why, claim by claim (the verdict's own words, and the parameters it was judged with):", "",
        *(f"- **{v.claim.id}**: {v.reason}. Parameters: {helpers.fmt_dict(v.threshold)}." for v in vs),
    ]


def _sensitivity_matrix(sweeps: list[dict[str, Any]], grids: list[str], t: Mapping[str, Any]) -> str:
    """Rows: (claim, parameter, value) as swept; columns: grids; cells: the outcome at that value."""
    keys: list[tuple[str, str, Any]] = []
    outcome: dict[tuple[str, str, Any, str], str] = {}
    for r in sweeps:
        key: tuple[str, str, Any] = (r["claim"], r["param"], r["value"])
        if key not in keys:
            keys.append(key)
        outcome[(r["claim"], r["param"], r["value"], r["grid"])] = r["outcome"]
    body: list[list[Any]] = []
    last = None
    for claim_id, param, value in keys:
        judged = t.get(claim_id, {}).get(param) == value
        body.append([claim_id if claim_id != last else "", param if claim_id != last else "",
                     f"{helpers.fmt(value)}{' (judged)' if judged else ''}",
                     *(outcome.get((claim_id, param, value, g), "–") for g in grids)])
        last = claim_id
    return helpers.table(body, ["claim", "parameter", "value", *(f"`{g}`" for g in grids)])


def render_claims(results: Iterable[Result], thresholds: Mapping[str, Any] | None = None,
                  verdicts: Sequence[Verdict] | None = None) -> list[str]:
    """Markdown: the numbered quotes; per grid, the verdicts, their measures (value, interval, MDE,
    the test that decides) and reasons; then one sensitivity matrix (threshold value × grid)."""
    results = list(results)
    t = thresholds if thresholds is not None else load_thresholds()
    verdicts = list(verdicts) if verdicts is not None else judge_all(results, t)
    confidence: set[float] = {t[c]["confidence"] for c in CLAIMS if "confidence" in t[c]}
    power: set[float] = {t[c]["power"] for c in CLAIMS if "power" in t[c]}
    lines = ["Each claim is quoted from the paper's own text (v2) and judged on each grid separately, against "
             "thresholds fixed in `src/depthprune/report/claims.toml` before this report was generated "
             "(`docs/claims.md` explains each). n cond = conditions (or model-budget pairs) measured; n distinct = "
             "distinct pruned models (evaluated sets for 3.3) the verdict rests on. CI = the statistic's "
             f"{' / '.join(f'{100 * c:g}%' for c in sorted(confidence))} interval over the evaluation's noise and MDE "
             f"its minimum detectable effect at {' / '.join(f'{100 * p:g}%' for p in sorted(power))} power, where "
             "the claim has them.", "", "The quotes:", "", *render_quotes(), ""]
    if not verdicts:
        return lines + ["No results."]
    grids = sorted({v.grid for v in verdicts})
    sweeps = [row for claim_id, s in t.get("sweep", {}).items()
              for row in sensitivity(results, claim_id, s["param"], s["values"], t)]
    for grid in grids:
        moving = [c for c in CLAIMS if len({r["outcome"] for r in sweeps if r["grid"] == grid and r["claim"] == c}) > 1]
        lines += [f"### Claims on grid `{grid}`", "", *_grid_tables(grid, verdicts), "",
                  f"Sensitivity on grid `{grid}`: within the swept thresholds "
                  + (f"the verdicts of {', '.join(moving)} move; the others keep their outcome."
                     if moving else "no verdict moves.") + " The matrix below.", ""]
    if sweeps:
        lines += ["### Sensitivity: threshold value × grid → outcome", "",
                  "Each claim's verdict as one threshold moves over the range `[sweep]` in claims.toml names, the "
                  "others as fixed; (judged) marks the value the verdicts above use.", "",
                  _sensitivity_matrix(sweeps, grids, t), ""]
    return lines
