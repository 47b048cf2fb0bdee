"""The real models' cards (``assets/real/models/<id>/``) are written by code, never by hand: the
shipped README.md and card.json are what :func:`depthprune.cards.card.write` makes from the card's
identity and its stored measurements (:func:`depthprune.cards.measure.render`), and every card says
where its numbers are shown that they are of dequantised 4-bit weights. No model is loaded."""

from __future__ import annotations

import json

import pytest

import depthprune.cards.card as card
from depthprune.cards.measure import render
from depthprune.model import REAL_MODELS


@pytest.mark.parametrize("model_id", sorted(REAL_MODELS))
def test_the_shipped_card_is_what_the_code_writes(model_id, tmp_path, monkeypatch):
    shipped = card.card_dir(model_id)
    stored = json.loads((shipped / "card.json").read_text(encoding="utf-8"))
    measured = stored.get("measured")
    monkeypatch.setattr(card, "CARDS", tmp_path)
    card.write(measured, render(measured, model_id) if measured else "", model_id)
    assert (tmp_path / model_id / "README.md").read_text(encoding="utf-8") == \
        (shipped / "README.md").read_text(encoding="utf-8")
    assert json.loads((tmp_path / model_id / "card.json").read_text(encoding="utf-8")) == stored
    readme = (shipped / "README.md").read_text(encoding="utf-8")
    assert stored["id"] == model_id and "4-bit weights dequantised" in readme.split("## Measured")[-1]


def test_an_unknown_model_has_no_card():
    with pytest.raises(ValueError, match="no card identity"):
        card.identity("llama3-8b")
