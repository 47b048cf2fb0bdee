"""Re-measurement: archived cells' losses scored again on this machine, checked against a band.

Each model is loaded once and each condition (model, objective and its recorded parameters) is
calibrated once; its scorer serves every cell of the condition, so a set scored for one cell is
not scored again for another. Per cell: **every set its run recorded** (the dense model, the singles of
its prior, its trace and its removed set: :func:`depthprune.verify.losses.run_losses`), the same sets the
grid's check across precisions compares (:mod:`depthprune.verify.forks`), through the same comparison
(:func:`depthprune.verify.losses.compare_losses`), so the two checks of a cell give one verdict on its losses.
(Until rule 5 this checked the removed set, the decisions' sets and four sampled trace sets: on an AMD EPYC
the grid's check of the real CI slice's gemma3 margin oneshot M4 cell failed on a single that this never
checked, and verify said VERIFIED: issue 59.)

Every loss must lie within its set's band (rule 5 of :mod:`depthprune.verify.bands`: scaled by the set's
distance from the dense loss, measured on the other fold of measuring sets; each set's z-score is kept, the
cell's largest reported). A decision whose recorded gap is wider than the band (the wider of its two sets')
must come out the same way here; one inside the band is a *numeric fork*: reported with both losses, never a
failure. ``--measure-bands`` measures each model's bands on its measuring sets (dense, singles, the held-out
sets: :func:`held_out`) before it checks that model's cells; without it the table is read.

The measuring sets are drawn from every cell of the condition in the results (``population``), not from
the selected ones only, so a cell's checked sample is the same whatever else is selected.

Then the removed set's evaluation: a seeded sample of its task items and perplexity windows evaluated
again and compared one by one (rule E3, :mod:`depthprune.verify.evaluation`), once per removed set of a
model whatever the number of cells that removed it.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from depthprune.common.jsonio import canonical
from depthprune.results.schema import Result, calibration_of
from depthprune.verify import evaluation as ev
from depthprune.verify.bands import Band, Difference, EvalRow, fold, loss_band, numeric_class, pair_key
from depthprune.verify.losses import BandFor, compare_losses, run_losses, set_order
from depthprune.verify.replay import FAILED as REPLAY_FAILED
from depthprune.verify.replay import Decision, Replay, replay


@dataclass(frozen=True)
class Sample:
    """How much of a cell is re-measured: which of its recorded sets, and the share of changed items and
    windows the evaluation sample must catch with probability ``evaluation.CATCH``.

    ``FULL`` (``depthprune verify``'s default) re-scores every set the run recorded, as the grid's check across
    precisions compares them (module docstring), and catches a change to 1% of the items and windows. ``CI`` is
    the smaller rule the suite's CI runs on every CPU (``tests/real/test_verify_sample.py``: the real CI slice's
    cells), since re-scoring a gemma3 cell's every single costs minutes of a CPU without AMX: the cell's answer
    (its removed set and the final decision's rival), the dense model, and the ``farthest`` sets whose recorded
    losses lie farthest from the dense one, the sets whose rounding rule 5's bands stretch furthest
    (:mod:`depthprune.verify.bands`; on the slice's gemma3 margin cell the single [1] that failed the grid's
    check on an AMD EPYC, issue 59); each is compared as the full rule compares it, so on these sets CI decides
    as the documented slice does. Its windows catch a change to 20% of a dataset's windows. Its first version
    also sampled the items that catch a change to 5% of them (58 of the real grid's 1,809); its first run, on
    AMX against AMX records, failed both gemma3 cells by 1 and 2 item flips of 58 where the item band allowed
    none: re-evaluating a sample batches the items otherwise, and bf16 rounds near-tied options the other way
    in 0.3-0.8% of the items even on the records' own kernels (``--measure-bands`` there: docs/verify.md). A
    zero allowance on 58 items cannot tell that from a change, so CI samples no items (``item_change`` None);
    the full sample checks them."""

    name: str
    farthest: int | None  # None: every recorded set; else the answer, the dense model and this many farthest
    item_change: float | None  # None: no item is re-evaluated
    window_change: float


FULL = Sample("full", None, 0.01, 0.01)
CI = Sample("ci", 2, None, 0.20)
SAMPLES = {s.name: s for s in (FULL, CI)}
VERIFIED = "verified"
FAILED = "failed"
NOT_VERIFIED = "not verified"
#: failed here in another precision, verified by the second opinion in the recorded one (:mod:`depthprune.verify.second`)
BY_PRECISION = "verified in its recorded precision"


@dataclass
class InsideDecision:
    """A decision inside the band: both sets' losses as recorded and as measured here."""

    decision: Decision
    chosen_here: float
    rival_here: float
    band: float  # the band it is inside (nats)

    @property
    def flipped(self) -> bool:
        return (self.rival_here - self.chosen_here) * (self.decision.rival_loss - self.decision.chosen_loss) < 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.decision.to_dict(), "chosen_here": self.chosen_here, "rival_here": self.rival_here,
                "flipped_here": self.flipped, "band": self.band}


@dataclass
class CellCheck:
    """What re-measuring one cell showed."""

    grid: str
    cell: str
    model: str
    objective: str
    recorded_class: str
    here_class: str
    replay: Replay
    status: str = VERIFIED
    band: Band | None = None
    sets_checked: int = 0
    largest_difference: float = 0.0
    largest_z: float | None = None  # rule 4: the largest |difference| / s_up of the cell's sets
    forks: list[InsideDecision] = field(default_factory=list)
    disagreement: str | None = None  # the first, where FAILED; the reason, where NOT VERIFIED
    evaluation: ev.EvalCheck | None = None  # the removed set's items and windows (None: not re-evaluated)
    failed_sets: list[frozenset[int]] = field(default_factory=list)  # every set outside its band
    turned: int = 0  # decisions outside their band that came out the other way here
    elapsed: float = 0.0  # seconds since the verification began, when this cell's check was done
    second: CellCheck | None = None  # the second opinion in the recorded precision, where this check failed

    def add_evaluation(self, check: ev.EvalCheck) -> None:
        """Fold the evaluation's outcome into the cell's: a failure fails the cell; an evaluation that
        could not be checked leaves a cell whose sets verified NOT VERIFIED, saying why."""
        self.evaluation = check
        if check.status == ev.FAILED and self.status != FAILED:
            self.status, self.disagreement = FAILED, f"evaluation: {check.disagreement}"
        elif check.status == ev.NOT_VERIFIED and self.status == VERIFIED:
            self.status, self.disagreement = NOT_VERIFIED, f"evaluation: {check.disagreement}"

    @property
    def label(self) -> str:
        if self.status == BY_PRECISION:
            return "VERIFIED IN ITS RECORDED PRECISION"
        if self.status == VERIFIED and self.forks:
            return f"VERIFIED WITH {len(self.forks)} NUMERIC FORK{'S' if len(self.forks) > 1 else ''}"
        return self.status.upper()

    def to_dict(self) -> dict[str, Any]:
        return {"grid": self.grid, "cell": self.cell, "model": self.model, "objective": self.objective,
                "status": self.label, "recorded": self.recorded_class, "here": self.here_class,
                "band": self.band.to_dict() if self.band else None, "sets_checked": self.sets_checked,
                "largest_difference": self.largest_difference, "largest_z": self.largest_z, "forks": [f.to_dict() for f in self.forks],
                "disagreement": self.disagreement, "replay": self.replay.to_dict(),
                "evaluation": self.evaluation.to_dict() if self.evaluation else None,
                "elapsed_seconds": round(self.elapsed, 3),
                "second_opinion": self.second.to_dict() if self.second else None}


def _answers(result: Result, rep: Replay) -> list[frozenset[int]]:
    """A cell's removed set, then both sets of each final or step decision: the sets the measuring sets were
    never drawn from (:func:`held_out`; until rule 5 they were the sets a cell always checked)."""
    out = [frozenset(result["removed"])]
    for d in rep.decisions:
        if d.kind in ("final", "step"):
            out += [frozenset(d.chosen), frozenset(d.rival)]
    return list(dict.fromkeys(out))


def held_out(cells: Sequence[Result], replays: Sequence[Replay], seed: int) -> list[frozenset[int]]:
    """A condition's measuring sets of size >= 2 (:mod:`depthprune.verify.bands`): per size,
    ``HELD_OUT`` trace sets that are no cell's removed set and no decision's set, drawn with a seed."""
    from depthprune.verify.bands import HELD_OUT

    protected = {s for r, rep in zip(cells, replays) for s in _answers(r, rep)}
    pool = sorted({frozenset(s) for r in cells for s, _ in r["trace"] if len(s) >= 2} - protected,
                  key=lambda s: (len(s), sorted(s)))
    condition = "|".join(map(str, calibration_of(cells[0])))
    rng = random.Random(f"band:{seed}:{condition}")
    out: list[frozenset[int]] = []
    for size in sorted({len(s) for s in pool}):
        same = [s for s in pool if len(s) == size]
        out += rng.sample(same, min(HELD_OUT, len(same)))
    return out


def sets_to_check(result: Result, sample: Sample = FULL, rep: Replay | None = None) -> list[frozenset[int]]:
    """The sets of ``result``'s run that ``sample`` re-scores, in :func:`depthprune.verify.losses.set_order`:
    every set it recorded, or (:data:`CI`) its answer, the dense model and the ``farthest`` sets from it."""
    losses = run_losses(result)
    if sample.farthest is None:
        return sorted(losses, key=set_order)
    dense = losses[frozenset()]
    finals = [d for d in (rep or replay(result)).decisions if d.kind == "final"]
    chosen = {frozenset(), frozenset(result["removed"]), *(frozenset(s) for d in finals for s in (d.chosen, d.rival))}
    by_distance = sorted((s for s in losses if s not in chosen and math.isfinite(losses[s])),
                         key=lambda s: (-abs(losses[s] - dense), set_order(s)))
    return sorted(chosen | set(by_distance[:sample.farthest]), key=set_order)


def calibration_requests(cells: Sequence[Result], sample: Sample = FULL) -> list[frozenset[int]]:
    """The sets checked over ``cells``, every cell of one condition, in the cells' order (repeats kept): what
    :func:`remeasure` scores for them (``tools/verify_floor.py`` counts them, ``bench/test_bench_scoring.py``
    times them)."""
    return [s for r in cells for s in sets_to_check(r, sample)]


def set_bands(table: Mapping[str, Any], recorded_class: str, here_class: str, result: Result) -> BandFor:
    """The band of each set of ``result``'s condition, its recorded class against ``here_class``: rule 5's,
    with the set, its recorded loss and the run's recorded dense loss (:func:`depthprune.verify.bands.loss_band`)."""
    objective, model = result.identity.objective, result.identity.model
    dense = float(result["dense_calibration_loss"])

    def band_for(s: frozenset[int], loss: float) -> Band | None:
        return loss_band(table, recorded_class, here_class, objective, model, loss, s, dense)

    return band_for


def check_cell(result: Result, score: Callable[[list[frozenset[int]]], list[float]], band_for: BandFor,
               here_class: str, rep: Replay | None = None, sample: Sample = FULL) -> CellCheck:
    """Replay one cell, then re-score the sets ``sample`` takes of its run (every set, by default) with ``score``
    and check each against ``band_for(the set, its recorded loss)``
    (:func:`depthprune.verify.losses.compare_losses`)."""
    rep = rep or replay(result)
    removed = frozenset(result["removed"])
    check = CellCheck(str(result.identity.grid), result["cell"], result.identity.model, result.identity.objective,
                      numeric_class(result["environment"]), here_class, rep,
                      band=band_for(removed, float(result["calibration_loss"])))
    if rep.status == REPLAY_FAILED:
        check.status, check.disagreement = FAILED, f"replay: {rep.disagreement}"
        return check
    if check.band is None:
        check.status = NOT_VERIFIED
        check.disagreement = (f"no band measured for {pair_key(check.recorded_class, here_class)} "
                              f"({check.objective}): re-measuring cannot tell rounding from a change")
        return check
    recorded = run_losses(result)
    sets = sets_to_check(result, sample, rep)
    here = dict(zip(sets, score(sets)))
    seen = compare_losses(recorded, here, band_for)
    check.sets_checked, check.largest_difference, check.largest_z = (seen.sets_compared, seen.largest_difference,
                                                                     seen.largest_z)
    check.failed_sets = seen.failed
    if seen.failure is not None:
        check.status, check.disagreement = FAILED, seen.failure
    elif seen.no_band is not None:
        check.status, check.disagreement = NOT_VERIFIED, f"{seen.no_band}: rounding cannot be told from a change"
    for d in rep.decisions:
        chosen, rival = frozenset(d.chosen), frozenset(d.rival)
        bands = [band_for(chosen, d.chosen_loss), band_for(rival, d.rival_loss)]
        if chosen not in here or rival not in here or None in bands:
            continue
        a, b = here[chosen], here[rival]
        width = max(band.nats for band in bands if band is not None)
        if d.gap <= width:
            check.forks.append(InsideDecision(d, a, b, width))
            continue
        if (b - a) * (d.rival_loss - d.chosen_loss) >= 0:
            continue
        check.turned += 1
        if check.status != FAILED:
            check.status = FAILED
            check.disagreement = (f"{d.kind} decision after evaluation {d.position}: recorded {list(d.chosen)} "
                                  f"{d.chosen_loss:.6g} against {list(d.rival)} {d.rival_loss:.6g} (gap {d.gap:.3g} > "
                                  f"band {width:.3g}); here {a:.6g} against {b:.6g}: the other way")
    return check


def band_differences(results: Sequence[Result], measured: dict[frozenset[int], float],
                     here_class: str) -> list[Difference]:
    """Recorded and here's loss of a condition's measuring sets (``measured``: set -> loss here; the empty set
    is the dense model), per recorded class, with each set and the recorded dense loss."""
    out = []
    seen: set[str] = set()
    for r in results:
        recorded_class = numeric_class(r["environment"])
        if recorded_class in seen:
            continue
        seen.add(recorded_class)
        pair, objective, model = pair_key(recorded_class, here_class), r.identity.objective, r.identity.model
        dense = float(r["dense_calibration_loss"])
        recorded: dict[frozenset[int], float] = {}
        for rr in results:
            if numeric_class(rr["environment"]) == recorded_class:
                recorded.update(run_losses(rr))
        for s, loss in measured.items():
            if s in recorded and math.isfinite(recorded[s]) and math.isfinite(loss):
                out.append((pair, objective, model, tuple(sorted(s)), recorded[s], loss, dense))
    return out


def second_check(opinion: Any, result: Result, key: tuple[str, str, str], table: dict[str, Any], seed: int,
                 sample: Sample, evaluate: bool) -> CellCheck:
    """``result`` checked again in ``opinion``'s precision (:mod:`depthprune.verify.second`), against the bands of
    its recorded class against that one: every set and decision, and its sample re-evaluated where ``evaluate``."""
    recorded_class, model = numeric_class(result["environment"]), result.identity.model
    scorer = opinion.scorer(key)  # opens the second session: its class is known after it

    def score(sets: list[frozenset[int]]) -> list[float]:  # in prefix order, as the first opinion's
        scorer.prefetch(sets)
        return scorer.many(sets)

    check = check_cell(result, score, set_bands(table, recorded_class, opinion.here_class, result),
                       opinion.here_class, sample=sample)
    # a second opinion whose sets already failed stays FAILED whatever its evaluation says (add_evaluation never
    # lifts a failure), so it is not evaluated: on an AVX512-BF16 CPU that is gemma3's bf16 windows, in CI too
    if evaluate and check.replay.status != REPLAY_FAILED and check.status != FAILED:
        items, windows = ev.sample(result, seed, sample.item_change, sample.window_change)
        measured = ev.measure_here(opinion.session, result, items, windows)
        check.add_evaluation(ev.check_evaluation(
            result, measured, ev.evaluation_band(table, recorded_class, opinion.here_class, model, result["removed"])))
    return check


def second_opinion(result: Result, table: dict[str, Any], here_dtype: str, sample: Sample = FULL) -> CellCheck | None:
    """``result``'s sets checked once more, in its recorded precision on this machine (:mod:`depthprune.verify.second`),
    for a check that failed across precisions elsewhere than in :func:`remeasure` (the grid's, depthprune.verify.forks);
    None where this machine already runs the recorded precision (``here_dtype``) or it is not known. Its sets
    only: the evaluation is the failed check's to compare."""
    from depthprune.verify.second import SecondOpinion, precision

    want = precision(result["environment"])
    if want is None or want == precision({"dtype": here_dtype}):
        return None
    opinion = SecondOpinion(result.identity.model, want)
    try:
        return second_check(opinion, result, calibration_of(result), table, 0, sample, evaluate=False)
    finally:
        opinion.close()


#: how many checks each band faces over the archive (rule 5): sets per (pair, objective, model, fold of the
#: checked sets), and per (pair, model) the evaluations and each dataset's windows
Checks = tuple[dict[tuple[str, str, str, int], int], dict[tuple[str, str], dict[str, Any]]]


def count_checks(population: Sequence[Result], here_class: str, model_weights: str, seed: int, evaluate: bool,
                 checks: Checks) -> None:
    """Add one condition's checks (every cell of ``population``, whatever the selection) to ``checks``: rule 5
    sizes each band for them (:mod:`depthprune.verify.bands`)."""
    sets, evaluations = checks
    for r in population:
        pair = pair_key(numeric_class(r["environment"]), here_class)
        for s in sets_to_check(r):
            key = (pair, r.identity.objective, r.identity.model, fold(r.identity.model, s))
            sets[key] = sets.get(key, 0) + 1
        if evaluate and r.get("evaluated") and (r.get("item_outcomes") or r.get("window_nll")) \
                and r.identity.weights == model_weights:
            row = evaluations.setdefault((pair, r.identity.model), {"evaluations": 0, "windows": {}})
            row["evaluations"] += 1
            for name, idx in ev.sample(r, seed, FULL.item_change, FULL.window_change)[1].items():
                row["windows"][name] = row["windows"].get(name, 0) + len(idx)


def remeasure(results: Sequence[Result], table: dict[str, Any], seed: int = 0, progress: bool = True,
              measure_bands: Callable[[list[Difference], list[EvalRow], Checks], dict[str, Any]]
              | None = None, population: Sequence[Result] | None = None, evaluate: bool = True,
              dtype: str = "auto", sample: Sample = FULL,
              on_check: Callable[[CellCheck], None] | None = None,
              second_opinion: bool = True) -> tuple[list[CellCheck], list[Difference]]:
    """Every cell of ``results`` checked on this machine; also the measuring sets' differences (for bands).

    ``measure_bands``: given a model's set differences, evaluation measurements (:data:`depthprune.verify.bands.EvalRow`) and the
    checks each band faces over the population (:func:`count_checks`), returns the table to check that
    model's cells with (``--measure-bands``: its bands measured first, then its cells checked).
    ``population``: every cell the measuring sets are drawn from (default ``results``; the CLI passes
    all cells of the selected grids). ``evaluate``: also re-evaluate each removed set (rule E2).
    ``dtype``: the precision re-measured in (``auto``: what the machine runs; ``bfloat16`` on a CPU without AMX
    measures bf16 on its own kernels against another machine's). ``sample``: how much of each cell is
    re-measured (:data:`FULL`, or :data:`CI`'s smaller rule); bands are measured on the same sets either way.
    ``on_check``: hears of each cell's check as soon as it is done (a long run shows, and keeps, what it has
    decided so far: the CLI prints it and rewrites ``--json``). ``second_opinion``: a cell that fails in
    another precision than its recorded one is checked again in the recorded one (:mod:`depthprune.verify.second`).
    """
    import time

    from tqdm.auto import tqdm

    from depthprune.recipe import Session
    from depthprune.results.provenance import environment
    from depthprune.verify.second import SecondOpinion, check_scorer, precision

    by_model: dict[str, dict[tuple[str, str, str], list[Result]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        by_model[r.identity.model][calibration_of(r)].append(r)
    everyone: dict[tuple[str, str, str], dict[tuple[str, str], Result]] = defaultdict(dict)
    for r in [*results, *(population or ())]:  # the selected cells, then the rest of their population
        everyone[calibration_of(r)].setdefault((str(r.identity.grid), r["cell"]), r)
    checks: list[CellCheck] = []
    differences: list[Difference] = []
    bar = tqdm(total=len(results), desc="verify", unit="cell", disable=not progress, leave=False)
    start = time.perf_counter()
    for model, conditions in sorted(by_model.items()):
        session = Session.open(model, device="cpu", dtype=dtype)
        seconds: dict[str, SecondOpinion] = {}  # recorded precision -> the model opened in it, on first need
        try:
            here_class = numeric_class(environment(session.device, session.dtype))
            prepared = {}
            model_differences: list[Difference] = []
            checks_faced: Checks = ({}, {})
            # rule 5 counts the checks of every condition of the model in the population, selected or not
            unselected = sorted(k for k in everyone if k[0] == model and k not in conditions)
            for key in unselected if measure_bands is not None else []:
                count_checks(list(everyone[key].values()), here_class, session.weights, seed, evaluate, checks_faced)
            for key, cells in sorted(conditions.items()):
                pool = list(everyone[key].values())
                pool_replays = {(r.identity.grid, r["cell"]): replay(r) for r in pool}  # each cell replayed once
                replays = [pool_replays[r.identity.grid, r["cell"]] for r in cells]
                held = held_out(pool, list(pool_replays.values()), seed)
                if measure_bands is not None:  # the measuring sets: dense, singles (the prior), held-out
                    count_checks(pool, here_class, session.weights, seed, evaluate, checks_faced)
                    calib = session.calibrate(key[1], **json.loads(key[2]))
                    scorer = calib.scorer.fork(known={frozenset([i]): p for i, p in enumerate(calib.prior)})
                    measured = {frozenset(): calib.dense_loss, **{frozenset([i]): p for i, p in enumerate(calib.prior)}}
                    scorer.prefetch(held, f"{model} {key[1]}: measuring sets" if progress else None)
                    measured.update(zip(held, scorer.many(held)))
                    # recorded losses of the measuring sets: from every cell of the condition they were drawn from
                    recorded_here = [r for r in pool if r.identity.weights == session.weights]
                    if recorded_here:
                        model_differences += band_differences(recorded_here, measured, here_class)
                checked = {s for r, rep in zip(cells, replays) if r.identity.weights == session.weights
                           for s in sets_to_check(r, sample, rep)}
                if measure_bands is None:  # no prior, no measuring set: a dense pass only where it pays
                    scorer = check_scorer(session, key, checked)
                prepared[key] = (scorer, replays, checked)
            differences += model_differences
            evaluated: dict[tuple[str, str], ev.Measured] = {}

            def measured_for(r: Result) -> ev.Measured:
                k = (canonical(sorted(r["removed"])), canonical(r["evaluation_protocol"]["config"]))
                if k not in evaluated:
                    items, windows = ev.sample(r, seed, sample.item_change, sample.window_change)
                    evaluated[k] = ev.measure_here(session, r, items, windows)
                return evaluated[k]

            def evaluable(r: Result) -> bool:
                return evaluate and bool(r.get("evaluated")) and bool(r.get("item_outcomes") or r.get("window_nll")) \
                    and r.identity.weights == session.weights

            if measure_bands is not None:
                eval_rows: list[EvalRow] = []
                seen: set[tuple[str, str]] = set()
                for r in (r for cells in conditions.values() for r in cells if evaluable(r)):
                    pair = pair_key(numeric_class(r["environment"]), here_class)
                    if (pair, str(sorted(r["removed"]))) in seen:
                        continue
                    seen.add((pair, str(sorted(r["removed"]))))
                    seen_here = ev.compare(r, measured_for(r))
                    eval_rows.append((pair, model, fold(model, r["removed"]), seen_here.disagreements,
                                      seen_here.items, seen_here.relative))
                table = measure_bands(model_differences, eval_rows, checks_faced)
            for key, cells in sorted(conditions.items()):
                scorer, replays, checked = prepared[key]
                scorer.prefetch(checked, f"{model} {key[1]}: sets" if progress else None)  # in prefix order
                for r, rep in zip(cells, replays):
                    recorded_class = numeric_class(r["environment"])

                    band_for = set_bands(table, recorded_class, here_class, r)

                    if r.identity.weights != session.weights:
                        check = CellCheck(str(r.identity.grid), r["cell"], model, key[1], recorded_class, here_class,
                                          rep,
                                          status=NOT_VERIFIED,
                                          band=band_for(frozenset(r["removed"]), float(r["calibration_loss"])))
                        check.disagreement = (f"recorded on weights {r.identity.weights}; this machine's "
                                              f"{model} is {session.weights}")
                    else:
                        check = check_cell(r, scorer.many, band_for, here_class, rep, sample)
                        if evaluable(r) and check.replay.status != REPLAY_FAILED:
                            check.add_evaluation(ev.check_evaluation(
                                r, measured_for(r), ev.evaluation_band(table, recorded_class, here_class, model, r["removed"])))
                    want = precision(r["environment"])
                    if second_opinion and check.status == FAILED and check.replay.status != REPLAY_FAILED \
                            and want is not None and want != precision({"dtype": session.dtype}):
                        opinion = seconds.setdefault(want, SecondOpinion(model, want))
                        # its evaluation only where this one's did not verify: one that verified across
                        # precisions is not asked again (the grid's check never re-evaluates: verify.second)
                        evaluation_verified = check.evaluation is not None and check.evaluation.status == ev.VERIFIED
                        check.second = second_check(opinion, r, key, table, seed, sample,
                                                    evaluable(r) and not evaluation_verified)
                        if check.second.status == VERIFIED:
                            check.status = BY_PRECISION
                    check.elapsed = time.perf_counter() - start
                    checks.append(check)
                    bar.update(1)
                    if on_check is not None:
                        on_check(check)
        finally:
            for opinion in seconds.values():
                opinion.close()
            session.close()
    bar.close()
    return checks, differences
