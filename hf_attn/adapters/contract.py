"""What the engine asks of a model and of a text before anything is computed.

**The model contract** (:func:`check_model_contract`). Every diagnostic of the three papers explains
one *class distribution*: the prediction is its arg-max, the permutation's and the adversary's output
change is the total variation distance between two such distributions, and the adversary's ε bounds
that distance (Jain & Wallace 2019 §4, Alg. 2–3; Wiegreffe & Pinter 2019 §3–4). A regression head
(``num_labels=1`` or ``problem_type="regression"``: one unbounded score, softmax of which is always
1.0) and a multi-label head (``problem_type="multi_label_classification"``: independent sigmoids, not
one distribution) have none of these, so they are refused in one line when the adapter is built —
by the Python API, the CLI and the Space alike — rather than analysed as if they were classifiers.

**The length contract** (:func:`model_token_limit`, :func:`tokenize_texts`). A text is cut to the
model's limit: the smallest of the caller's ``max_length``, the tokenizer's ``model_max_length`` and
the model's position table (``max_position_embeddings`` / ``n_positions``, less the offset of
RoBERTa-style position ids that start after the padding index), so transformers never sees more
positions than the model has. Encoders whose head reads the first row keep the start of the text;
decoders, whose head reads the last token, keep the **end** (left truncation), the part the
prediction depends on. Every cut is reported in one :class:`TruncationWarning` per call: how many
texts, how many tokens each lost, and which end was kept.
"""

from __future__ import annotations

import threading
import warnings

from hf_attn.adapters.base import UnsupportedModelError

# A tokenizer's truncation side is an attribute: one lock serialises the calls that change it.
_TRUNCATION_LOCK = threading.Lock()


class TruncationWarning(UserWarning):
    """Texts longer than the model's limit were cut (the message says how much and which end)."""


def check_adapter_counts(token_budget, max_length, min_length: int = 1) -> tuple[int, int | None]:
    """An adapter's ``token_budget`` (a whole number in ``[1, 2^24]``) and ``max_length`` (None, or a
    whole number in ``[min_length, 10^6]``), up to their bounds in
    :data:`hf_attn.core.numpy_measures.COUNT_LIMITS` with the reason: a ``ValueError`` naming the
    setting otherwise. The one check of every adapter's constructor (and so of the ``Explainer``'s);
    returns both as ints (NumPy integers accepted)."""
    from hf_attn.core.numpy_measures import check_whole

    token_budget = check_whole("token_budget", token_budget, 1, limit="token_budget")
    if max_length is not None:
        max_length = check_whole("max_length", max_length, min_length, limit="tokens")
    return token_budget, max_length


def check_model_contract(model) -> None:
    """:class:`UnsupportedModelError` (a ``ValueError``, one line) unless ``model`` is a single-label
    classifier with at least two classes (see the module docstring)."""
    config = getattr(model, "config", None)
    name = type(model).__name__
    problem = getattr(config, "problem_type", None)
    count = getattr(config, "num_labels", None)
    if problem == "multi_label_classification":
        raise UnsupportedModelError(
            f"{name} is a multi-label model (problem_type='multi_label_classification': independent sigmoid "
            "labels); the diagnostics explain one softmax class distribution (its prediction, TVD and the "
            "adversary's ε), which such a model does not have")
    if problem == "regression" or (isinstance(count, int) and count < 2):
        raise UnsupportedModelError(
            f"{name} is a regression model (num_labels={count}, problem_type={problem!r}): the diagnostics "
            "explain a distribution over at least two classes (prediction, TVD, the adversary's ε), which a "
            "single score does not have")
    if problem not in (None, "single_label_classification"):
        raise UnsupportedModelError(f"{name}: problem_type={problem!r} is not single-label classification")
    if not isinstance(count, int):
        raise UnsupportedModelError(f"{name}: its config has no num_labels")


def _position_offset(model) -> int:
    """Positions a model's position table holds before the first token's: RoBERTa-style embeddings
    number positions from ``padding_idx + 1``."""
    for module in model.modules():
        index = getattr(module, "padding_idx", None)
        if hasattr(module, "position_embeddings") and isinstance(index, int) and index >= 0:
            return index + 1
    return 0


def model_token_limit(model, tokenizer=None, max_length: int | None = None) -> int | None:
    """The most tokens (special tokens included) a text may have for ``model``: the smallest of
    ``max_length``, the tokenizer's ``model_max_length`` (when it is a real limit) and the model's
    position table less its offset; None when none of them is known."""
    config = getattr(model, "config", None)
    limits = [max_length] if max_length is not None else []
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and not isinstance(positions, bool) and positions > 0:
        limits.append(positions - _position_offset(model))
    own = getattr(tokenizer, "model_max_length", None)
    if isinstance(own, int) and 0 < own < 1_000_000:
        limits.append(own)
    if not limits:
        return None
    limit = min(limits)
    if limit < 2:
        raise UnsupportedModelError(f"{type(model).__name__} has room for {limit} token(s) only")
    return limit


def encode_as_text(tokenizer, texts, **kwargs):
    """``tokenizer(texts, **kwargs)`` with typed text read as text: a special token's literal string
    typed in a text (``"[CLS]"``, ``"<s>"``, ``"[PAD]"``) is split into ordinary pieces
    (``split_special_tokens=True``), never read as the special token itself, which would be
    explained as a token of the text (or make the text the same input as the empty one). A tokenizer
    that does not take ``split_special_tokens`` is called as before, after texts holding a special
    token's literal string are refused with the reason (``ValueError``)."""
    try:
        return tokenizer(texts, split_special_tokens=True, **kwargs)
    except TypeError as error:
        if "split_special_tokens" not in str(error):
            raise
    literals = [t for t in getattr(tokenizer, "all_special_tokens", []) if isinstance(t, str) and t]
    for text in ([texts] if isinstance(texts, str) else texts):
        found = next((t for t in literals if t in text), None)
        if found is not None:
            raise ValueError(f"the text contains {found!r}, the literal string of one of the tokenizer's special "
                             "tokens, and this tokenizer cannot read it as ordinary text; remove or reword it")
    return tokenizer(texts, **kwargs)


def tokenize_texts(tokenizer, texts: list[str], limit: int | None, keep: str = "start", first_index: int = 0):
    """``(token id lists, word id lists)`` of ``texts``, each cut to ``limit`` tokens (special tokens
    included) keeping its ``"start"`` or its ``"end"``; word ids count from 0 in what is kept. One
    :class:`TruncationWarning` names the texts cut (numbered from ``first_index``), the tokens each
    lost and the end kept."""
    if keep not in ("start", "end"):
        raise ValueError(f"keep must be 'start' or 'end', got {keep!r}")
    full = encode_as_text(tokenizer, list(texts), truncation=False, verbose=False)
    sequences = [list(s) for s in full["input_ids"]]
    word_ids = [list(full.word_ids(i)) for i in range(len(texts))]
    long = [i for i, s in enumerate(sequences) if limit is not None and len(s) > limit]
    if long:
        with _TRUNCATION_LOCK:
            side = tokenizer.truncation_side
            tokenizer.truncation_side = "left" if keep == "end" else "right"
            try:
                cut = encode_as_text(tokenizer, [texts[i] for i in long], truncation=True, max_length=limit)
            finally:
                tokenizer.truncation_side = side
        dropped = []
        for j, i in enumerate(long):
            dropped.append((i + first_index, len(sequences[i]) - len(cut["input_ids"][j])))
            sequences[i] = list(cut["input_ids"][j])
            words = list(cut.word_ids(j))
            first = min((w for w in words if w is not None), default=0)
            word_ids[i] = [None if w is None else w - first for w in words]
        shown = ", ".join(f"text {i}: {n} token(s) dropped" for i, n in dropped[:5])
        more = f", … ({len(dropped)} texts in all)" if len(dropped) > 5 else ""
        end = ("the end of each text was kept (the last token is what the model's head reads)" if keep == "end"
               else "the start of each text was kept")
        warnings.warn(f"{len(dropped)} of {len(texts)} text(s) longer than the model's limit of {limit} tokens "
                      f"were cut ({shown}{more}); {end}", TruncationWarning, stacklevel=3)
    return sequences, word_ids


__all__ = ["TruncationWarning", "check_model_contract", "encode_as_text", "model_token_limit", "tokenize_texts"]
