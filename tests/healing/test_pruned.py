"""A removed set healed from a session, and the healed result made from the unhealed one: it says it is healed
in its identity, keeps the unhealed fingerprint it came from, and fingerprints the heal and its data."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthprune.healing.config import HealConfig
from depthprune.healing.pruned import heal_removed, healed_result
from depthprune.recipe import Session, identity, make_result
from depthprune.results.schema import Result, to_json, validate
from tests.fixtures import random_text, write_model_dir

DATA = {"source": "test", "sha256": "0" * 64, "rows": 30}


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Session:
    path = write_model_dir(Path(tmp_path_factory.mktemp("m")) / "model", n_layers=4)
    return Session.open(str(path), profile="tiny", dtype="float32")


def test_a_heal_leaves_the_session_model_whole_unless_asked(session):
    cfg = HealConfig(tokens=256, seq_len=32)
    healed, report = heal_removed(session, [1], cfg, random_text(30, 50), DATA)
    assert healed.config.num_hidden_layers == 3 and session.n_layers == 4
    assert report.windows["data"] == DATA and report.windows["kind"] == "contiguous-shuffled"


def test_the_healed_result_is_a_result_that_names_its_heal(session):
    calib = session.calibrate("ppl", n_samples=4, seq_len=32)
    outcome = calib.search("oneshot", 1, seed=0, progress=False)
    unhealed = to_json(make_result(session, calib, outcome, identity(session, calib, "oneshot", 1, 0)))
    cfg = HealConfig(tokens=256, seq_len=32, seed=2)
    _, report = heal_removed(session, outcome.removed, cfg, random_text(30, 50), DATA)
    healed = validate(to_json(healed_result(unhealed, report, None, None, session.device)), "healed")
    assert healed.identity.heal == "lora-t256-s2" and Result.of(unhealed).identity.heal is None
    assert "heal" not in unhealed["identity"]  # an unhealed identity is stored as before healing existed
    assert healed["removed"] == unhealed["removed"]
    assert healed["healing"]["unhealed_fingerprint"] == unhealed["fingerprint"] != healed["fingerprint"]
    assert healed["settings"]["healing_data"] == DATA
    other = healed_result(unhealed, heal_removed(session, outcome.removed, HealConfig(tokens=256, seq_len=32, seed=3),
                                                 random_text(30, 50), DATA)[1], None, None, session.device)
    assert other["fingerprint"] != healed["fingerprint"]


def test_the_hidden_state_targets_are_the_dense_models_and_made_once_per_model(session, monkeypatch):
    from depthprune.healing import pruned

    made = []
    real = pruned.dense_hidden

    def counting(model, windows, batch_size):
        made.append(model.config.num_hidden_layers)
        return real(model, windows, batch_size)

    monkeypatch.setattr(pruned, "dense_hidden", counting)
    cfg = HealConfig(tokens=256, seq_len=32, method="lora-hidden", seed=5)
    texts = random_text(30, 50)
    for removed in ([1], [2], [1, 3]):
        healed, report = heal_removed(session, removed, cfg, texts, DATA)
        assert healed.config.num_hidden_layers == 4 - len(removed) and report.config["method"] == "lora-hidden"
    assert made == [4]  # the dense model's, once for the three sets (their windows are the same)
    heal_removed(session, [1], HealConfig(tokens=256, seq_len=32, method="lora-hidden", seed=6), texts, DATA)
    assert made == [4, 4]  # another seed draws other windows: their targets are made once too


def test_a_heal_in_place_leaves_no_dense_targets_behind_for_the_model_it_pruned(tmp_path):
    from depthprune.healing import pruned

    own = Session.open(str(write_model_dir(tmp_path / "model", n_layers=4)), profile="tiny", dtype="float32")
    cfg = HealConfig(tokens=256, seq_len=32, method="lora-hidden")
    healed, _ = heal_removed(own, [1], cfg, random_text(30, 50), DATA, in_place=True)
    assert healed.config.num_hidden_layers == 3
    assert own.model not in pruned._TARGETS  # its states were the dense model's; the model is now pruned
