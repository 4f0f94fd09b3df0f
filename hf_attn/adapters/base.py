"""The adapter contract: what every method needs from a model, and nothing else.

A method (gradient, leave-one-out, integrated gradients, permutation, adversary, erasure, rollout…)
is written once against :class:`AttentionAdapter`; an adapter wraps one model family:

- :class:`hf_attn.adapters.transformer.TransformersAdapter` — any ``*ForSequenceClassification``
  whose attention goes through transformers' attention interface;
- :class:`hf_attn.adapters.hf_attn_model.HfAttnAdapter` — the papers' attentive BiLSTM / CNN /
  Average models, with their exact fast paths (logits from cached states under any attention).

Shapes: B instances, T positions (padded), H heads, L layers, C classes, R candidate rows per
instance, E embedding size.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import Literal, Protocol, runtime_checkable

import torch

from hf_attn.core.texts import nothing_to_explain as _nothing_to_explain  # the one test of an empty text

Heads = Literal["mean"] | int
Query = Literal["auto", "first", "last", "mean"]


def checked_texts(texts) -> list[str]:
    """A string, a list of strings or any iterable of strings (e.g. a ``datasets`` column) → a
    non-empty list of strings that each hold something to explain; anything else is a
    ``ValueError`` naming the item. A mapping (a dict, a ``datasets`` row) is refused rather than
    having its keys explained; a text of only whitespace or invisible characters (zero-width
    spaces, a byte-order mark) is refused as empty."""
    if isinstance(texts, str):
        texts = [texts]
    if isinstance(texts, (Mapping, bytes, bytearray)):
        raise ValueError(f"texts must be a string or a list of strings, got a {type(texts).__name__} "
                         "(pass its text column, e.g. texts['text'])")
    try:
        items = list(texts)
    except TypeError:
        raise ValueError(f"texts must be a string or an iterable of strings, got {type(texts).__name__}") from None
    if not items:
        raise ValueError("texts is empty")
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ValueError(f"texts[{i}] is a {type(text).__name__}, not a string")
        if not text.strip():
            raise ValueError(f"texts[{i}] is empty")
        if _nothing_to_explain(text):
            raise ValueError(f"texts[{i}] holds only invisible characters (zero-width spaces, a byte-order "
                             "mark, control characters): nothing to explain")
    return items


class UnsupportedModelError(ValueError):
    """A model the engine cannot intervene on exactly; the message says why."""


@dataclass(frozen=True)
class AttentionSpec:
    """Which attention is explained.

    ``layer``: the layer (attention call in forward order; negative counts from the end; default
    −1, the last layer, the only one whose rows the classification head reads directly).
    ``heads``: ``"mean"`` (the rows of all heads averaged) or one head index.
    ``query``: the query rows explained — ``"auto"`` (the rows the classification head reads,
    found by the adapter: the first position for ``[CLS]``-pooled encoders, the last non-pad token
    for decoders, every real row for mean-pooled heads), or ``"first"``, ``"last"``, ``"mean"``."""

    layer: int = -1
    heads: Heads = "mean"
    query: Query = "auto"

    def __post_init__(self):
        if not isinstance(self.layer, int) or isinstance(self.layer, bool):
            raise ValueError(f"layer must be an int, got {self.layer!r}")
        if self.heads != "mean" and not (isinstance(self.heads, int) and not isinstance(self.heads, bool)
                                         and self.heads >= 0):
            raise ValueError(f"heads must be 'mean' or a head index ≥ 0, got {self.heads!r}")
        if self.query not in ("auto", "first", "last", "mean"):
            raise ValueError(f"query must be 'auto', 'first', 'last' or 'mean', got {self.query!r}")

    def layer_index(self, num_layers: int) -> int:
        index = self.layer + num_layers if self.layer < 0 else self.layer
        if not 0 <= index < num_layers:
            raise ValueError(f"layer {self.layer} out of range for a model with {num_layers} layers")
        return index

    def describe(self) -> str:
        heads = "mean over heads" if self.heads == "mean" else f"head {self.heads}"
        query = {"auto": "the query row(s) the head reads", "first": "first query row",
                 "last": "last query row", "mean": "every query row"}[self.query]
        return f"layer {self.layer}, {query}, {heads}"


@dataclass
class Batch:
    """Encoded instances on the adapter's device.

    ``input_ids`` / ``attention_mask`` ``(B, T)``; ``content`` ``(B, T)`` bool: the positions of
    the text's own tokens (what the methods rank, permute, delete — not special tokens, not pads);
    ``query`` ``(B, T)`` bool: the explained query rows; ``position_ids`` ``(B, T)`` or None;
    ``word_ids``: per instance, per position, the index of the word the token belongs to (None for
    special tokens and pads); ``texts``: the source texts when known."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    content: torch.Tensor
    query: torch.Tensor
    position_ids: torch.Tensor | None = None
    word_ids: list[list[int | None]] | None = None
    texts: list[str] | None = None

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def trimmed(self, width: int, left: bool = False) -> "Batch":
        """The batch cut to ``width`` positions: right padding keeps the first positions, left
        padding (``left``) the last."""
        cut = slice(self.input_ids.shape[1] - width, None) if left else slice(0, width)
        return replace(self, input_ids=self.input_ids[:, cut], attention_mask=self.attention_mask[:, cut],
                       content=self.content[:, cut], query=self.query[:, cut],
                       position_ids=None if self.position_ids is None else self.position_ids[:, cut],
                       word_ids=None if self.word_ids is None else [w[cut] for w in self.word_ids])

    def select(self, rows) -> "Batch":
        """The instances ``rows`` (a list or a 1-D index tensor), same padding."""
        index = torch.as_tensor(rows, dtype=torch.long, device=self.input_ids.device)
        pick = [int(i) for i in index.tolist()]
        return replace(self, input_ids=self.input_ids[index], attention_mask=self.attention_mask[index],
                       content=self.content[index], query=self.query[index],
                       position_ids=None if self.position_ids is None else self.position_ids[index],
                       word_ids=None if self.word_ids is None else [self.word_ids[i] for i in pick],
                       texts=None if self.texts is None else [self.texts[i] for i in pick])


@dataclass
class Forward:
    """One batch's unmodified forward.

    ``logits`` / ``probabilities`` ``(B, C)`` (probabilities in float32); ``attention`` ``(B, T)``
    the explained attention (query rows averaged when several); ``head_rows`` ``(B, H, T)`` the
    explained layer's query rows of every head; ``layer_rows`` ``(B, L, T)`` the head-mean query row
    of every layer; ``rollout`` ``(B, T)`` the attention rollout's query row (Abnar & Zuidema 2020),
    or None where it does not apply; ``cache``: what the adapter's exact fast paths reuse."""

    logits: torch.Tensor
    probabilities: torch.Tensor
    attention: torch.Tensor
    head_rows: torch.Tensor
    layer_rows: torch.Tensor
    rollout: torch.Tensor | None = None
    cache: object = None
    extras: dict = field(default_factory=dict)


@runtime_checkable
class AttentionAdapter(Protocol):
    """The seam between a model and the methods (see the module docstring)."""

    device: torch.device
    spec: AttentionSpec
    num_layers: int
    num_heads: int

    def encode(self, texts, max_length: int | None = None) -> Batch: ...

    def from_token_lists(self, sequences, texts=None) -> Batch: ...

    def forward(self, batch: Batch) -> Forward: ...

    def logits(self, batch: Batch) -> torch.Tensor: ...

    def logits_under(self, batch: Batch, weights: torch.Tensor, per_head: bool,
                     forward: Forward | None = None) -> torch.Tensor: ...

    def embeddings(self, batch: Batch) -> torch.Tensor: ...

    def logits_from_embeddings(self, batch: Batch, embeddings: torch.Tensor,
                               detach_attention: bool = False) -> torch.Tensor:
        """``(B, C)`` logits from input embeddings ``(B, T, E)``, differentiable with respect to
        the embeddings only (the weights are frozen during the call)."""
        ...

    def logits_with_embedding_output(self, batch: Batch, transform) -> torch.Tensor:
        """``(B, C)`` logits with the embedding layer's output ``h`` (the input of the first layer)
        replaced by ``transform(h, rows)`` (the soft faithfulness metrics perturb it there)."""
        ...

    def tokens(self, batch: Batch, index: int) -> list[str]: ...
