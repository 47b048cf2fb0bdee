"""One loaded model and one scorer per condition for a module's verify runs (fixture ``shared_scorers``).

``depthprune verify`` opens a model and scores a condition's sets afresh on each call, as it must: a user's run
re-measures. Tests that run it several times on the same cell ask the same model for the same losses again
(test_verify_cli.py: a finished run, a stopped one and two band measurements, all of tiny-llama3 ppl;
test_second_opinion.py: three runs of one cell, in float32 and in bf16), and what they test is what verify
decides from those losses: the bands, the statuses, the lines and files written. So within a module the
fixture keeps each opened model (``Session.open``, by its arguments; its ``close`` waits for the module's end)
and each scorer ``check_scorer`` makes (by session, condition and sets): a later run reads from the scorer's
memo the losses an earlier one computed, the same bits, and a calibration (dense pass, prior) is built once
per session. Its modules run on one xdist worker (their ``xdist_group``), or each worker would build its own.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def shared_scorers():
    from depthprune import recipe
    from depthprune.verify import second

    sessions: dict[tuple[Any, ...], Any] = {}
    scorers: dict[tuple[Any, ...], Any] = {}
    real_open, real_close, real_check_scorer = recipe.Session.open.__func__, recipe.Session.close, second.check_scorer

    def open_once(cls, model, *args: Any, **kwargs: Any):
        key = (model, args, tuple(sorted(kwargs.items())))
        if key not in sessions:
            sessions[key] = real_open(cls, model, *args, **kwargs)
        return sessions[key]

    def close_later(self) -> None:
        if not any(s is self for s in sessions.values()):
            real_close(self)

    def scorer_once(session, key, sets=None):
        k = (id(session), key, None if sets is None else frozenset(sets))
        if k not in scorers:
            scorers[k] = real_check_scorer(session, key, sets)
        return scorers[k]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(recipe.Session, "open", classmethod(open_once))
        mp.setattr(recipe.Session, "close", close_later)
        mp.setattr(second, "check_scorer", scorer_once)
        yield
    scorers.clear()
    for session in sessions.values():
        real_close(session)
