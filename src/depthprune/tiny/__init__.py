"""The tiny model family: a generated world, its corpus, tokenizer, three small
trained models and offline stand-ins for every dataset of the paper.

Build everything with ``depthprune build tiny all`` (see
:mod:`depthprune.tiny.build`); outputs go to ``depthprune/assets/tiny/``:

* ``models/{tiny-llama3,tiny-llama3.1,tiny-qwen3}/`` -- Hugging Face model dirs
* ``tokenizer/`` -- the shared tokenizer
* ``data/{c4,wikitext,lambada,commonsense}/`` -- text and calibration fixtures
* ``tasks/`` -- lm-eval task YAMLs (``TaskManager(include_path=TASKS_DIR)``)
"""

from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parents[1] / "assets" / "tiny"
MODELS_DIR = ASSETS_DIR / "models"
DATA_DIR = ASSETS_DIR / "data"
TASKS_DIR = ASSETS_DIR / "tasks"
TOKENIZER_DIR = ASSETS_DIR / "tokenizer"
MODEL_NAMES = ("tiny-llama3", "tiny-llama3.1", "tiny-qwen3")

__all__ = ["ASSETS_DIR", "MODELS_DIR", "DATA_DIR", "TASKS_DIR", "TOKENIZER_DIR", "MODEL_NAMES"]
