"""Sentence-pair attentive classifier (NLI): attention over the premise tokens conditioned on the
encoded hypothesis (Jain & Wallace 2019 §2–3; SNLI in their Tables 1–2).

It is also J&W's QA model (bAbI tasks 1–3, CNN; :mod:`hf_attn.data.babi`): the passage is the
premise (the attended text), the question the hypothesis (Q = its encoding, φ(h_t, Q)), and the
classes are the answers (bAbI answer words, CNN entity ids). The J&W code builds both from the same
modules (``AttnDecoderQA``), so one class serves both.

    premise ids  → embedding → premise encoder    → h_t (B, T, D)
    hypothesis   → embedding → hypothesis encoder → Q   (B, D)
    α = softmax_t φ(h_t, Q) over real premise tokens,  c = Σ_t α_t h_t,  logits = Dec(c, Q)

Choices (J&W §2 for φ; the J&W code ``Question_Answering.py`` / ``AttnDecoderQA`` elsewhere):

* two encoders of the same kind (``Pencoder`` / ``Qencoder`` in the J&W code), each with its own
  embedding matrix unless ``config.share_embeddings``; one tokenizer vocabulary.
* Q = the hypothesis encoder's summary: BiLSTM ``[h→_last; h←_first]`` (the final states of both
  directions, ``torch.cat([h[0], h[1]])`` in the J&W code), CNN max-pooling over real tokens (J&W
  code), Average mean over real tokens (the J&W code averages over pads too; we do not, so
  outputs never depend on padding).
* φ additive vᵀ tanh(W₁h_t + W₂Q) or scaled dot h_tᵀQ/√D (J&W §2), or frozen uniform.
* Dec ``"tanh"`` (J&W code): W_o tanh(W_c c + W_q Q + b) + b_o; ``"linear"``: W_c c + W_q Q + b.

Fast counterfactual path. Dec is nonlinear in c for ``"tanh"``, but its first layer is affine in c
and Σ_t α_t = 1, so W_c c + W_q Q + b = Σ_t α_t u_t with u_t = W_c h_t + W_q Q + b. ``token_logits``
returns u (B, T, K′) once per instance and ``logits_from_token_logits(u, α)`` = out(tanh(Σ α u)):
exact, O(T·K′) per α (K′ = decoder_hidden_size for ``"tanh"``, the number of decoder units for
``"linear"``). It needs Σ α = 1 (true for every attention distribution); ``decode`` is the general
reference path.

Copied next to ``config.json`` by ``save_pretrained`` (with ``modeling_hf_attn.py`` and both
configuration files, its relative imports) so a saved folder loads with ``trust_remote_code=True``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .configuration_hf_attn_pair import AttnPairClassifierConfig
from .modeling_hf_attn import (ENCODER_CLASSES, AttnClassifierForSequenceClassification,
                               AttnClassifierOutput, AttnClassifierPreTrainedModel, _check_mask,
                               _check_finite_embeddings, expand_binary_logits, masked_softmax)


@dataclass
class AttnPairClassifierOutput(AttnClassifierOutput):
    r"""Output of :class:`AttnPairClassifierForSequenceClassification`.

    Args:
        logits: ``(B, C)`` (binary: ``[0, z]``, softmax = ``[1 − σ(z), σ(z)]``).
        attentions: ``(B, T)`` α over the premise tokens; exactly 0 on premise pads.
        hidden_states: ``(B, T, D)`` premise states h_t (``output_hidden_states=True``).
        query: ``(B, D)`` the hypothesis query Q (``output_hidden_states=True``).
        embeddings / hypothesis_embeddings: ``(B, T, d)`` / ``(B, U, d)`` (``output_embeddings=True``).
    """

    query: torch.FloatTensor | None = None
    hypothesis_embeddings: torch.FloatTensor | None = None


class PairAdditiveAttention(nn.Module):
    """φ(h_t, Q) = vᵀ tanh(W₁h_t + W₂Q) (J&W §2, Bahdanau et al. 2014)."""

    def __init__(self, input_size: int, attention_hidden_size: int):
        super().__init__()
        self.proj = nn.Linear(input_size, attention_hidden_size)
        self.query_proj = nn.Linear(input_size, attention_hidden_size, bias=False)
        self.v = nn.Linear(attention_hidden_size, 1, bias=False)

    def forward(self, hidden: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """``(B, T, D)``, ``(B, D)`` → scores ``(B, T)``."""
        return self.v(torch.tanh(self.proj(hidden) + self.query_proj(query).unsqueeze(1))).squeeze(-1)


class PairDotAttention(nn.Module):
    """φ(h_t, Q) = h_tᵀQ / √D (J&W §2, Vaswani et al. 2017); no parameters."""

    def __init__(self, input_size: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(input_size)

    def forward(self, hidden: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        return torch.einsum("btd,bd->bt", hidden, query) * self.scale


class PairUniformAttention(nn.Module):
    """Frozen uniform attention over the real premise tokens (W&P §3.2)."""

    def forward(self, hidden: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        return hidden.new_zeros(hidden.shape[:2])


class PairDecoder(nn.Module):
    """Dec(c, Q): ``"tanh"`` W_o tanh(W_c c + W_q Q + b) + b_o (J&W code), ``"linear"`` W_c c + W_q Q + b."""

    def __init__(self, config: AttnPairClassifierConfig):
        super().__init__()
        size = config.output_size
        self.nonlinear = config.pair_decoder == "tanh"
        width = config.decoder_hidden_size if self.nonlinear else config.num_outputs
        self.premise_proj = nn.Linear(size, width)
        self.query_proj = nn.Linear(size, width, bias=False)
        self.output = nn.Linear(width, config.num_outputs) if self.nonlinear else None

    def pre_activation(self, context: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """W_c x + W_q Q + b for ``x`` ``(B, ..., D)`` and ``query`` ``(B, D)`` → ``(B, ..., K′)``."""
        q = self.query_proj(query)
        return self.premise_proj(context) + q.view(q.shape[0], *([1] * (context.dim() - 2)), q.shape[-1])

    def finish(self, pre_activation: torch.Tensor) -> torch.Tensor:
        """``(..., K′)`` → raw decoder units ``(..., K)``."""
        return self.output(torch.tanh(pre_activation)) if self.nonlinear else pre_activation


PAIR_ATTENTIONS = {"additive": lambda c: PairAdditiveAttention(c.output_size, c.attention_hidden_size),
                   "dot": lambda c: PairDotAttention(c.output_size),
                   "uniform": lambda c: PairUniformAttention()}


class AttnPairClassifierForSequenceClassification(AttnClassifierPreTrainedModel):
    """Premise attention conditioned on the hypothesis. ``input_ids``/``attention_mask``/
    ``inputs_embeds``/``attention_weights`` refer to the PREMISE (the attended sequence), so the
    single-sequence contract carries over; the hypothesis comes as ``hypothesis_input_ids`` +
    ``hypothesis_attention_mask`` (or ``hypothesis_inputs_embeds``). Both right-padded."""

    config_class = AttnPairClassifierConfig
    keys_to_ignore_at_inference = ["attentions", "hidden_states", "embeddings", "classification_loss",
                                   "regularization_loss", "query", "hypothesis_embeddings"]

    def __init__(self, config: AttnPairClassifierConfig):
        super().__init__(config)
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim,
                                      padding_idx=config.pad_token_id)
        self.hypothesis_embedding = (None if config.share_embeddings else
                                     nn.Embedding(config.vocab_size, config.embedding_dim,
                                                  padding_idx=config.pad_token_id))
        self.encoder = ENCODER_CLASSES[config.encoder](config)
        self.hypothesis_encoder = ENCODER_CLASSES[config.encoder](config)
        self.attention = PAIR_ATTENTIONS[config.attention](config)
        self.decoder = PairDecoder(config)
        self.post_init()

    # ----------------------------------------------------------------------------------------
    # building blocks, exposed for the analyses
    def get_input_embeddings(self) -> nn.Embedding:
        return self.embedding

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embedding = value

    def get_hypothesis_embeddings(self) -> nn.Embedding:
        return self.embedding if self.hypothesis_embedding is None else self.hypothesis_embedding

    def embed_hypothesis(self, hypothesis_input_ids: torch.Tensor) -> torch.Tensor:
        """``(B, U)`` ids → ``(B, U, d)`` with the hypothesis embedding matrix."""
        return self.get_hypothesis_embeddings()(hypothesis_input_ids)

    def encode(self, embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Premise ``(B, T, d)`` embeddings → ``(B, T, D)`` states h_t (pads zeroed)."""
        keep = mask.unsqueeze(-1).to(embeddings.dtype)
        return self.encoder(embeddings * keep, mask) * keep

    def encode_query(self, embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Hypothesis ``(B, U, d)`` embeddings → query Q ``(B, D)`` (see the module docstring)."""
        keep = mask.unsqueeze(-1).to(embeddings.dtype)
        states = self.hypothesis_encoder(embeddings * keep, mask)
        if self.config.encoder == "lstm":
            size = self.config.hidden_size
            last = (mask.sum(1) - 1).long()
            forward_last = states[torch.arange(states.shape[0], device=states.device), last, :size]
            return torch.cat([forward_last, states[:, 0, size:]], dim=-1)
        if self.config.encoder == "cnn":
            return states.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=1)
        return (states * keep).sum(1) / keep.sum(1)

    def attend(self, hidden: torch.Tensor, mask: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """``(B, T, D)``, mask ``(B, T)``, Q ``(B, D)`` → α ``(B, T)``, exactly 0 on pads."""
        return masked_softmax(self.attention(hidden, query), mask)

    def expand_logits(self, raw: torch.Tensor) -> torch.Tensor:
        """Decoder units ``(..., K)`` → class logits ``(..., C)``."""
        return expand_binary_logits(raw) if self.config.num_outputs == 1 else raw

    def decode(self, hidden: torch.Tensor, attention: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """Decoder-only reference path: h ``(B, T, D)``, α ``(B, ..., T)``, Q ``(B, D)`` → logits
        ``(B, ..., C)`` with c = Σ_t α_t h_t (any α, normalised or not)."""
        context = torch.einsum("b...t,btd->b...d", attention, hidden)
        return self.expand_logits(self.decoder.finish(self.decoder.pre_activation(context, query)))

    def token_logits(self, hidden: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """Per-token decoder pre-activations u_t = W_c h_t + W_q Q + b: ``(B, T, D)`` → ``(B, T, K′)``.
        Feed them to :meth:`logits_from_token_logits`; for the ``"linear"`` decoder they are also
        the raw decoder units of token t alone (all attention on t)."""
        return self.decoder.pre_activation(hidden, query)

    def logits_from_token_logits(self, token_logits: torch.Tensor,
                                 attention: torch.Tensor) -> torch.Tensor:
        """Fast exact counterfactual decoder for α summing to 1: u ``(B, T, K′)``, α ``(B, ..., T)``
        → logits ``(B, ..., C)``. O(T·K′) per α instead of O(T·D)."""
        mixed = torch.einsum("b...t,btk->b...k", attention, token_logits)
        return self.expand_logits(self.decoder.finish(mixed))

    # ----------------------------------------------------------------------------------------
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        hypothesis_input_ids: torch.LongTensor | None = None,
        hypothesis_attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        attention_weights: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        hypothesis_inputs_embeds: torch.Tensor | None = None,
        detach_attention: bool = False,
        output_hidden_states: bool | None = None,
        output_embeddings: bool = False,
        return_dict: bool | None = None,
        **kwargs,
    ) -> AttnPairClassifierOutput:
        r"""
        Args:
            input_ids / inputs_embeds: premise ``(B, T)`` ids or ``(B, T, d)`` embeddings (exactly one).
            attention_mask: ``(B, T)`` premise mask (1 real, 0 pad; right-padded).
            hypothesis_input_ids / hypothesis_inputs_embeds: hypothesis ``(B, U)`` / ``(B, U, d)``.
            hypothesis_attention_mask: ``(B, U)``.
            labels: ``(B,)`` class ids → class-weighted loss.
            attention_weights: ``(B, T)`` override α over the premise (pads are zeroed).
            detach_attention: cut the graph at α (J&W appendix B).
            output_hidden_states / output_embeddings: also return h_t and Q / e_t of both texts.
        """
        premise = self._embed("input_ids", input_ids, "inputs_embeds", inputs_embeds,
                              attention_mask, self.embedding)
        hypothesis = self._embed("hypothesis_input_ids", hypothesis_input_ids,
                                 "hypothesis_inputs_embeds", hypothesis_inputs_embeds,
                                 hypothesis_attention_mask, self.get_hypothesis_embeddings(),
                                 "hypothesis_attention_mask")
        embeddings, mask = premise
        hypothesis_embeddings, hypothesis_mask = hypothesis
        if hypothesis_embeddings.shape[0] != embeddings.shape[0]:
            raise ValueError(f"{embeddings.shape[0]} premises but {hypothesis_embeddings.shape[0]} "
                             f"hypotheses")
        hidden = self.encode(embeddings, mask)
        query = self.encode_query(hypothesis_embeddings, hypothesis_mask)
        if attention_weights is not None:
            if attention_weights.shape != mask.shape:
                raise ValueError(f"attention_weights has shape {tuple(attention_weights.shape)}, "
                                 f"expected the premise shape {tuple(mask.shape)}")
            attention = attention_weights.to(hidden.dtype) * mask.to(hidden.dtype)
        else:
            attention = self.attend(hidden, mask, query)
        logits = self.decode(hidden, attention.detach() if detach_attention else attention, query)

        loss = classification_loss = regularization_loss = None
        if labels is not None:
            classification_loss = AttnClassifierForSequenceClassification.classification_loss(
                self, logits, labels)
            regularization_loss = logits.new_zeros(())
            loss = classification_loss
        return AttnPairClassifierOutput(
            loss=loss, logits=logits, attentions=attention,
            hidden_states=hidden if output_hidden_states else None,
            query=query if output_hidden_states else None,
            embeddings=embeddings if output_embeddings else None,
            hypothesis_embeddings=hypothesis_embeddings if output_embeddings else None,
            classification_loss=classification_loss, regularization_loss=regularization_loss)

    def _embed(self, ids_name: str, ids: torch.Tensor | None, embeds_name: str,
               embeds: torch.Tensor | None, attention_mask: torch.Tensor | None,
               table: nn.Embedding, mask_name: str = "attention_mask") -> tuple[torch.Tensor, torch.Tensor]:
        if (ids is None) == (embeds is None):
            raise ValueError(f"pass exactly one of {ids_name} and {embeds_name} (the pair model "
                             f"needs both a premise and a hypothesis)")
        if ids is not None:
            if ids.dim() != 2:
                raise ValueError(f"{ids_name} must be (batch, tokens), got shape {tuple(ids.shape)}")
            mask = _check_mask(ids.shape, attention_mask, ids.device, self._max_tokens(), ids_name, mask_name)
            if bool((ids >= self.config.vocab_size).any()) or bool((ids < 0).any()):
                raise ValueError(f"{ids_name} outside the vocabulary [0, {self.config.vocab_size})")
            return table(ids), mask
        if embeds.dim() != 3:
            raise ValueError(f"{embeds_name} must be (batch, tokens, embedding_dim), got shape "
                             f"{tuple(embeds.shape)}")
        mask = _check_mask(embeds.shape[:2], attention_mask, embeds.device, self._max_tokens(), embeds_name,
                           mask_name)
        _check_finite_embeddings(embeds_name, embeds)
        return embeds, mask


__all__ = ["AttnPairClassifierForSequenceClassification", "AttnPairClassifierOutput"]
