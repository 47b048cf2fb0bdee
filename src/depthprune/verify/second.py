"""The second opinion: a cell that failed across precisions, checked again in its recorded precision here.

A band pooled over measuring sets cannot say how far rounding moves *one* set: the whole real archive, checked
in float32 against bf16 records, failed by sets that remove gemma3-270m's block 1, up to 15 of rounding's RMS
differences past the pooled spread (rule 4, docs/verify.md), a tail no pooled band sizes. Such a failure asks
the question verification exists for: did the code do something else, or do float32 and bf16 differ there?

Written down on 2026-12-05 with this code, before it ran on an archive: where a cell FAILS on a machine whose precision is not
the recorded one, and the machine can run the recorded precision, the model is opened a second time in that
precision and the cell is checked again, whole (its sets and decisions re-scored, its sample re-evaluated),
against the bands of the recorded class against that second class, by the same rules. Code that changed fails
in both precisions; a difference of precision alone verifies in the recorded one. The cell is then **VERIFIED IN
ITS RECORDED PRECISION**: reported with the first check's failure (how far the other precision moved it) and the
second check. (Since 2026-12-07 a second check whose sets fail is not evaluated: no evaluation lifts a
failure. Since 2026-12-07, on an AMD EPYC, neither is one whose first check's evaluation verified across
precisions: that evaluation stands, as it always did in the grid's check, which never re-evaluates; so the two
checks decide a cell alike, and an AVX2-only CPU no longer spends a second evaluation in emulated bf16 on it.)
Where the second check fails too, or cannot be made (no band for the second pair), the cell stays
FAILED. On a CPU without native bf16 the second opinion runs on ATen's emulated bf16 (slow: only failed cells
ask for it); ``depthprune verify --no-second-opinion`` skips it.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from depthprune.model.precision import SHORT_NAMES, dtype_name
from depthprune.verify.bands import numeric_class


def precision(environment: dict[str, Any]) -> str | None:
    """The ``Session.open`` dtype of a result's or session's environment record (None: none it can open)."""
    name = dtype_name(environment.get("dtype", ""))
    return name if name in SHORT_NAMES else None  # its keys are the dtype names Session.open takes


def resuming_pays(sets: Collection[frozenset[int]], n_layers: int) -> bool:
    """Whether a dense pass pays for itself over ``sets``. With it, a set resumes from the dense states at its
    first removed block and saves the ``min(s)`` blocks before it. What the pass adds, in blocks: the dense run
    (``n_layers``; nothing where the dense model is one of ``sets``, whose own run it is) and the scorer's
    start-up self-check, which runs on its first batch (:meth:`depthprune.scoring.scorer.Scorer._verify`; taken
    as half the model: measured 2026-12-07 at 0.43 of a dense run on smollm2-135m's ppl calibration, whose first
    batch is a quarter of it, and 0.19 on gemma3-270m's margin, a sixteenth). Resuming pays where the saved
    blocks add up to at least that. CI's sample (:data:`depthprune.verify.remeasure.CI`) holds the dense model:
    on gemma3-270m margin its other sets save 17 of 18 blocks (the pass), on smollm2-135m ppl 5 of 30 (none)."""
    extra = (0 if frozenset() in sets else n_layers) + n_layers / 2
    return sum(min(s) for s in sets if s) >= extra


def check_scorer(session: Any, key: tuple[str, str, str], sets: Collection[frozenset[int]] | None = None) -> Any:
    """A scorer of the condition ``key`` (model, objective, its parameters as JSON) on ``session``'s model, no
    prior (verify scores no measuring set unless it measures bands). It makes the dense pass unless ``sets``, the
    sets it will check, are too few for resuming from the dense states to pay (:func:`resuming_pays`); then every
    set runs from the embeddings (``Scorer(dense_pass=False)``). ``sets=None`` (not known yet) and KL, whose
    reference is the dense run, always have it."""
    from depthprune.objectives import make_objective
    from depthprune.scoring.scorer import Scorer

    objective = make_objective(key[1], session.profile, **json.loads(key[2]))
    dense = sets is None or objective.needs_reference or resuming_pays(sets, session.n_layers)
    return Scorer(session.model, objective.prepare(session.tokenizer, session.profile, session.batch_size), objective,
                  dense_pass=dense)


class SecondOpinion:
    """One model opened in another precision on first use, with a scorer per condition, for failed cells
    (:func:`depthprune.verify.remeasure.second_check` checks a cell with it)."""

    def __init__(self, model: str, dtype: str) -> None:
        self.model, self.dtype = model, dtype
        self._session: Any = None
        self._scorers: dict[tuple[str, str, str], Any] = {}
        self.here_class = ""

    @property
    def session(self) -> Any:
        if self._session is None:
            from depthprune.recipe import Session
            from depthprune.results.provenance import environment

            self._session = Session.open(self.model, device="cpu", dtype=self.dtype)
            self.here_class = numeric_class(environment(self._session.device, self._session.dtype))
        return self._session

    def scorer(self, key: tuple[str, str, str]) -> Any:
        """The condition's scorer in this precision, with its dense pass (:func:`check_scorer`): second opinions are few."""
        if key not in self._scorers:
            self._scorers[key] = check_scorer(self.session, key)
        return self._scorers[key]

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
        self._scorers.clear()
