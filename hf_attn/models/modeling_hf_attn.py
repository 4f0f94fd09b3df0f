"""Attentive text classifiers: embedding → encoder (BiLSTM / CNN / Average) → attention → linear decoder.

Jain & Wallace 2019 §2 and appendix A (encoders, additive and scaled-dot attention), Wiegreffe &
Pinter 2019 §3.2 (frozen uniform attention), Tutek & Šnajder 2020 §3 (concat / residual / tying /
MLM regularisers). Shapes: B batch, T tokens, d embedding size, D = size of the states attention
weighs, K = decoder units (1 for binary tasks, C otherwise).

Copied verbatim next to ``config.json`` by ``save_pretrained`` (with ``configuration_hf_attn.py``)
so that a saved folder loads with ``trust_remote_code=True`` without ``hf_attn``: it must only
import torch, transformers and its sibling configuration file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

from .configuration_hf_attn import AttnClassifierConfig


@dataclass
class AttnClassifierOutput(SequenceClassifierOutput):
    r"""Output of :class:`AttnClassifierForSequenceClassification`.

    Args:
        loss: ``()`` classification loss + regularisation loss (when ``labels`` are given).
        logits: ``(B, C)``. Binary models have one decoder unit z and return ``[0, z]`` so that
            ``logits.softmax(-1)`` equals ``[1 − σ(z), σ(z)]``; ``logits[:, 1]`` is the raw logit.
        attentions: ``(B, T)`` attention weights α; exactly 0 on pads, each row sums to 1.
        hidden_states: ``(B, T, D)`` the states h'_t attention weighs (``output_hidden_states=True``).
        embeddings: ``(B, T, d)`` input embeddings e_t (``output_embeddings=True``).
        classification_loss, regularization_loss: the two parts of ``loss``.
    """

    embeddings: torch.FloatTensor | None = None
    classification_loss: torch.FloatTensor | None = None
    regularization_loss: torch.FloatTensor | None = None


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim where ``mask`` is True; masked entries get exactly 0."""
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)


def exclude_first_last(mask: torch.Tensor) -> torch.Tensor:
    """Right-padded bool mask ``(B, T)`` → the same mask without each row's first and last real
    position (J&W's ``<SOS>``/``<EOS>`` markers, ``BatchHolder.masks`` in their code). Rows with
    fewer than 3 real tokens have no word between the markers and keep their mask (so attention is
    never a softmax over nothing)."""
    lengths = mask.sum(1, keepdim=True)
    positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)
    inner = mask & (positions > 0) & (positions < lengths - 1)
    return torch.where(lengths >= 3, inner, mask)


def expand_binary_logits(raw: torch.Tensor) -> torch.Tensor:
    """``(..., 1)`` sigmoid logit z → ``(..., 2)`` ``[0, z]`` so softmax gives ``[1−σ(z), σ(z)]``."""
    return torch.cat([torch.zeros_like(raw), raw], dim=-1)


class AdditiveAttention(nn.Module):
    """φ(h_t) = vᵀ tanh(W h_t + b) (J&W §2, "tanh" attention)."""

    def __init__(self, input_size: int, attention_hidden_size: int):
        super().__init__()
        self.proj = nn.Linear(input_size, attention_hidden_size)
        self.v = nn.Linear(attention_hidden_size, 1, bias=False)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:  # (B, T, D) → (B, T)
        return self.v(torch.tanh(self.proj(hidden))).squeeze(-1)


class DotAttention(nn.Module):
    """φ(h_t) = q·h_t / √D with a learned query q ~ N(0, 1) (J&W §2; T&Š appendix C: PyTorch's
    default init of q collapses attention to uniform)."""

    def __init__(self, input_size: int):
        super().__init__()
        self.query = nn.Parameter(torch.randn(input_size))
        self.scale = 1.0 / math.sqrt(input_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ self.query * self.scale


class UniformAttention(nn.Module):
    """Frozen uniform attention 1/T_real (W&P §3.2): constant scores, no parameters."""

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden.new_zeros(hidden.shape[:2])


def reverse_within_length(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Reverse the real tokens of each row of ``(B, T, …)`` in place of one another; pads stay."""
    batch, steps = mask.shape
    positions = torch.arange(steps, device=mask.device).expand(batch, steps)
    lengths = mask.sum(dim=1, keepdim=True)
    index = torch.where(mask, lengths - 1 - positions, positions)
    index = index.view(batch, steps, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class LSTMEncoder(nn.Module):
    """Bidirectional LSTM, exactly as over packed sequences (pads never reach a real token's state).

    Each layer runs two unidirectional ``nn.LSTM``s on the padded batch: the forward one reads the
    tokens left to right (right pads come after every real token), the backward one reads each row
    reversed within its length. This is the packed-sequence result, ~4× faster on CPU because the
    padded batch takes PyTorch's fused kernel while a ``PackedSequence`` runs step by step (tests
    compare with a packed ``nn.LSTM(bidirectional=True)``).
    """

    def __init__(self, config: AttnClassifierConfig):
        super().__init__()
        sizes = [config.embedding_dim] + [2 * config.hidden_size] * (config.num_layers - 1)
        self.forward_layers = nn.ModuleList(nn.LSTM(s, config.hidden_size, batch_first=True) for s in sizes)
        self.backward_layers = nn.ModuleList(nn.LSTM(s, config.hidden_size, batch_first=True) for s in sizes)

    def forward(self, embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = embeddings
        for forward_rnn, backward_rnn in zip(self.forward_layers, self.backward_layers):
            left_to_right, _ = forward_rnn(x)
            right_to_left, _ = backward_rnn(reverse_within_length(x, mask))
            x = torch.cat([left_to_right, reverse_within_length(right_to_left, mask)], dim=-1)
            x = x * mask.unsqueeze(-1).to(x.dtype)
        return x


class CNNEncoder(nn.Module):
    """Conv1d with kernels (1, 3, 5, 7) × 64 filters, "same" zero padding, ReLU (J&W A.2)."""

    def __init__(self, config: AttnClassifierConfig):
        super().__init__()
        for k in config.cnn_kernel_sizes:
            if k % 2 == 0:
                raise ValueError(f"CNN kernel sizes must be odd for 'same' padding, got {k}")
        self.convs = nn.ModuleList(
            nn.Conv1d(config.embedding_dim, config.cnn_filters, k, padding=k // 2)
            for k in config.cnn_kernel_sizes)

    def forward(self, embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = embeddings.transpose(1, 2)  # pads are zeroed by the caller: "same" padding semantics
        return torch.cat([F.relu(conv(x)) for conv in self.convs], dim=1).transpose(1, 2)


class AverageEncoder(nn.Module):
    """Per-token Linear(d → H) + ReLU (J&W A.3; their code uses tanh), no context mixing.
    Also W&P's diagnostic MLP encoder (§3.4, with tanh)."""

    def __init__(self, config: AttnClassifierConfig):
        super().__init__()
        self.proj = nn.Linear(config.embedding_dim, config.hidden_size)
        self.activation = torch.relu if config.average_activation == "relu" else torch.tanh

    def forward(self, embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.activation(self.proj(embeddings))


ENCODER_CLASSES = {"lstm": LSTMEncoder, "cnn": CNNEncoder, "average": AverageEncoder}


def _check_mask(input_shape: torch.Size, attention_mask: torch.Tensor | None,
                device: torch.device, max_tokens: int | None = None, name: str = "input_ids",
                mask_name: str = "attention_mask") -> torch.Tensor:
    """Validate ``attention_mask`` (only 0/1, right-padded, ≥ 1 real token per row) → bool mask.
    With ``max_tokens``, rows with more real tokens are an error (wider padding is fine). Cheap:
    a few vectorised reductions; the length check runs only when the input is wider than the limit."""
    if len(input_shape) < 2 or input_shape[1] == 0:
        raise ValueError(f"empty input of shape {tuple(input_shape)}: every sequence needs at least one "
                         "token (empty text?)")
    if attention_mask is None:
        mask = torch.ones(input_shape, dtype=torch.bool, device=device)
    else:
        if attention_mask.dtype != torch.bool and bool(((attention_mask != 0) & (attention_mask != 1)).any()):
            bad = attention_mask[(attention_mask != 0) & (attention_mask != 1)][0].item()
            raise ValueError(f"{mask_name} must hold only 0 (pad) and 1 (real token), got {bad!r}: "
                             "fractional or other values are not a mask (to weigh tokens, pass "
                             "attention_weights)")
        mask = attention_mask.bool()
        if mask.shape != input_shape:
            raise ValueError(f"{mask_name} has shape {tuple(mask.shape)}, inputs {tuple(input_shape)}")
        if mask.shape[1] == 0 or not bool(mask[:, 0].all()):
            raise ValueError("every sequence needs at least one real token (empty text?) and pads "
                             "must be on the right")
        if not bool((mask[:, 1:] <= mask[:, :-1]).all()):
            raise ValueError(f"{mask_name} must be right-padded (1…1 0…0 per row)")
    if max_tokens is not None and mask.shape[1] > max_tokens and bool(mask[:, max_tokens].any()):
        longest = int(mask.sum(1).max())
        raise ValueError(f"{name} has {longest} tokens, more than the model's max_tokens={max_tokens}: "
                         f"truncate the input (tokenizer(..., truncation=True, max_length={max_tokens}))")
    return mask


def _check_finite_embeddings(name: str, embeddings: torch.Tensor) -> None:
    """``inputs_embeds`` must be finite (NaN/inf would silently poison every output). One sum is
    the cheap test (NaN and ±inf propagate into it, ~40× faster than an elementwise check); only a
    non-finite sum (or an overflowing one) triggers the exact elementwise check."""
    embeddings = embeddings.detach()
    if not bool(torch.isfinite(embeddings.sum())) and not bool(torch.isfinite(embeddings).all()):
        bad = (~torch.isfinite(embeddings)).nonzero()[0].tolist()
        raise ValueError(f"{name} contains NaN or inf (first at index {tuple(bad)}): embeddings must be "
                         "finite")


def _check_attention_override(attention: torch.Tensor, mask: torch.Tensor, tolerance: float = 1e-3) -> None:
    """A supplied α must be a distribution over each row's real tokens (pads are already zeroed)."""
    if not bool(torch.isfinite(attention).all()):
        raise ValueError("attention_weights contain NaN or inf on real tokens")
    if bool((attention < 0).any()):
        raise ValueError(f"attention_weights must be >= 0, got min {float(attention.min()):.4g}")
    sums = attention.sum(-1)
    off = (sums - 1).abs() > tolerance
    if bool(off.any()):
        row = int(off.nonzero()[0, 0])
        raise ValueError(f"attention_weights row {row} sums to {float(sums[row]):.6g} over its real tokens, "
                         f"not 1: pass a distribution (e.g. a softmax), not raw scores")


class AttnClassifierPreTrainedModel(PreTrainedModel):
    config_class = AttnClassifierConfig
    base_model_prefix = "hf_attn"
    main_input_name = "input_ids"

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """``PreTrainedModel.from_pretrained`` with clear errors for a folder without ``config.json``
        and for a corrupt or truncated weights file."""
        import os

        path = (os.fspath(pretrained_model_name_or_path)
                if isinstance(pretrained_model_name_or_path, (str, os.PathLike)) else None)
        if (path and os.path.isdir(path) and kwargs.get("config") is None
                and not os.path.exists(os.path.join(path, "config.json"))):
            raise FileNotFoundError(f"{path} has no config.json: not a model folder written by "
                                    "save_pretrained / hf-attn train")
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        except Exception as err:  # safetensors raises its own SafetensorError (not an OSError)
            if type(err).__name__ == "SafetensorError" or "deserializ" in str(err).lower():
                raise OSError(f"{path or pretrained_model_name_or_path}: the weights file "
                              f"(model.safetensors) is corrupt or truncated ({err}); re-save, "
                              "re-download or retrain the model") from err
            raise

    def _max_tokens(self) -> int | None:
        """``config.max_tokens`` (the longest input the model accepts), None if unset."""
        limit = getattr(self.config, "max_tokens", None)
        return int(limit) if limit else None

    def _init_weights(self, module: nn.Module) -> None:
        # J&W appendix A: words without a pretrained vector ~ N(0, 1); PyTorch defaults elsewhere,
        # except the dot-attention query (N(0, 1), T&Š appendix C).
        if isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 1.0)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, DotAttention):
            nn.init.normal_(module.query, 0.0, 1.0)
        elif isinstance(module, (nn.Linear, nn.Conv1d, nn.LSTM)):
            module.reset_parameters()


class AttnClassifierForSequenceClassification(AttnClassifierPreTrainedModel):
    """Attentive classifier. ``forward`` computes α from the encoder unless ``attention_weights``
    overrides it; :meth:`decode` and :meth:`token_logits` run only the decoder on cached states
    (the linear decoder makes logits under any α equal Σ_t α_t (W h_t + b), T&Š Eq. 9)."""

    keys_to_ignore_at_inference = ["attentions", "hidden_states", "embeddings",
                                   "classification_loss", "regularization_loss"]

    def __init__(self, config: AttnClassifierConfig):
        super().__init__(config)
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_dim,
                                      padding_idx=config.pad_token_id)
        self.encoder = ENCODER_CLASSES[config.encoder](config)
        if config.attention == "additive":
            self.attention = AdditiveAttention(config.output_size, config.attention_hidden_size)
        elif config.attention == "dot":
            self.attention = DotAttention(config.output_size)
        else:
            self.attention = UniformAttention()
        self.decoder = nn.Linear(config.output_size, config.num_outputs)
        self.post_init()

    # ----------------------------------------------------------------------------------------
    # building blocks, exposed for the analyses
    def get_input_embeddings(self) -> nn.Embedding:
        return self.embedding

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embedding = value

    def encode(self, embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``(B, T, d)`` embeddings (pads zeroed here) → ``(B, T, D)`` states h'_t after the variant."""
        embeddings = embeddings * mask.unsqueeze(-1).to(embeddings.dtype)
        return self.apply_variant(self.encoder(embeddings, mask), embeddings, mask)

    def apply_variant(self, encoder_states: torch.Tensor, embeddings: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
        """Encoder outputs ``(B, T, 2H)`` and pad-zeroed embeddings ``(B, T, d)`` → h'_t ``(B, T, D)``:
        [h; e] for ``concat``, h + e for ``residual``, h otherwise; pads zeroed."""
        hidden = encoder_states
        if self.config.variant == "concat":
            hidden = torch.cat([hidden, embeddings], dim=-1)
        elif self.config.variant == "residual":
            hidden = hidden + embeddings
        return hidden * mask.unsqueeze(-1).to(hidden.dtype)

    def attended_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """The positions attention is over: ``mask`` (real tokens), without the sentence markers
        (first and last real token) when ``config.attention_exclude_first_last``."""
        if getattr(self.config, "attention_exclude_first_last", False):
            return exclude_first_last(mask)
        return mask

    def attend(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``(B, T, D)`` → α ``(B, T)``: softmax of φ(h) over real tokens (markers excluded, see
        :meth:`attended_mask`), exactly 0 on pads."""
        return masked_softmax(self.attention(hidden), self.attended_mask(mask))

    def expand_logits(self, raw: torch.Tensor) -> torch.Tensor:
        """Decoder units ``(..., K)`` → class logits ``(..., C)``."""
        return expand_binary_logits(raw) if self.config.num_outputs == 1 else raw

    def decode(self, hidden: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """Decoder-only path: cached states ``(B, T, D)`` and α ``(B, T)`` → logits ``(B, C)``."""
        context = torch.einsum("bt,btd->bd", attention, hidden)
        return self.expand_logits(self.decoder(context))

    def token_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Decoder applied to each h'_t alone: ``(B, T, D)`` → ``(B, T, K)`` raw decoder units.
        With α summing to 1, Σ_t α_t token_logits_t equals the decoder on Σ_t α_t h'_t."""
        return self.decoder(hidden)

    def logits_from_token_logits(self, token_logits: torch.Tensor,
                                 attention: torch.Tensor) -> torch.Tensor:
        """Fast counterfactual decoder: ``(B, T, K)`` and α ``(B, ..., T)`` → logits ``(B, ..., C)``.
        Costs O(T·K) per α instead of O(T·D): used for permutations and adversaries."""
        return self.expand_logits(torch.einsum("b...t,btk->b...k", attention, token_logits))

    # ----------------------------------------------------------------------------------------
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        attention_weights: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        detach_attention: bool = False,
        output_hidden_states: bool | None = None,
        output_embeddings: bool = False,
        return_dict: bool | None = None,
        **kwargs,
    ) -> AttnClassifierOutput:
        r"""
        Args:
            input_ids: ``(B, T)`` token ids, right-padded; at most ``config.max_tokens`` real
                tokens per row (truncate longer texts with the tokenizer), else ``ValueError``.
            attention_mask: ``(B, T)`` 1 for real tokens, 0 for pads (only 0/1: a fractional mask
                is a ``ValueError``).
            labels: ``(B,)`` class ids → ``loss`` (class-weighted if ``config.class_weights``).
            attention_weights: ``(B, T)`` override α (each row a distribution over real tokens;
                pads, and the markers of ``config.attention_exclude_first_last``, are zeroed). The
                model's own attention is then not used.
            inputs_embeds: ``(B, T, d)`` embeddings to use instead of looking up ``input_ids``
                (gradients w.r.t. the embeddings); must be finite (NaN/inf → ``ValueError``).
            detach_attention: cut the graph at α (J&W appendix B, gradient importance).
            output_hidden_states / output_embeddings: also return h'_t / e_t.
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        if input_ids is not None:
            if input_ids.dim() != 2:
                raise ValueError(f"input_ids must be (batch, tokens), got shape {tuple(input_ids.shape)}")
            mask = _check_mask(input_ids.shape, attention_mask, input_ids.device, self._max_tokens())
            if bool((input_ids >= self.config.vocab_size).any()) or bool((input_ids < 0).any()):
                raise ValueError(f"input_ids outside the vocabulary [0, {self.config.vocab_size})")
            embeddings = self.embedding(input_ids)
        else:
            if inputs_embeds.dim() != 3:
                raise ValueError(f"inputs_embeds must be (batch, tokens, embedding_dim), got shape "
                                 f"{tuple(inputs_embeds.shape)}")
            mask = _check_mask(inputs_embeds.shape[:2], attention_mask, inputs_embeds.device,
                               self._max_tokens(), "inputs_embeds")
            _check_finite_embeddings("inputs_embeds", inputs_embeds)
            embeddings = inputs_embeds
        hidden = self.encode(embeddings, mask)
        if attention_weights is not None:
            if attention_weights.shape != mask.shape:
                raise ValueError(f"attention_weights has shape {tuple(attention_weights.shape)}, "
                                 f"expected {tuple(mask.shape)}")
            attended = self.attended_mask(mask)
            attention = attention_weights.to(hidden.dtype).masked_fill(~attended, 0.0)  # pads: any value
            _check_attention_override(attention.detach(), attended)
        else:
            attention = self.attend(hidden, mask)
        decoder_attention = attention.detach() if detach_attention else attention
        logits = self.decode(hidden, decoder_attention)

        loss = classification_loss = regularization_loss = None
        if labels is not None:
            classification_loss = self.classification_loss(logits, labels)
            regularization_loss = self.regularization_loss(input_ids, embeddings, hidden, mask)
            loss = classification_loss + regularization_loss
        return AttnClassifierOutput(
            loss=loss, logits=logits, attentions=attention,
            hidden_states=hidden if output_hidden_states else None,
            embeddings=embeddings if output_embeddings else None,
            classification_loss=classification_loss, regularization_loss=regularization_loss)

    # ----------------------------------------------------------------------------------------
    def classification_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean of w[y]·loss: BCE on the single logit (binary) or cross-entropy (C > 2)."""
        labels = labels.long()
        if bool((labels < 0).any()) or bool((labels >= self.config.num_labels).any()):
            raise ValueError(f"labels must be in [0, {self.config.num_labels}), "
                             f"got {sorted(set(labels.tolist()))}")
        if self.config.num_outputs == 1:
            per_example = F.binary_cross_entropy_with_logits(logits[:, 1], labels.to(logits.dtype),
                                                             reduction="none")
        else:
            per_example = F.cross_entropy(logits, labels, reduction="none")
        if self.config.class_weights is not None:
            weights = torch.tensor(self.config.class_weights, dtype=logits.dtype, device=logits.device)
            per_example = per_example * weights[labels]
        return per_example.mean()

    def regularization_loss(self, input_ids: torch.Tensor | None, embeddings: torch.Tensor,
                            hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """T&Š §3: tying δ·mean_t‖h_t − e_t‖² over real tokens; MLM η·CE (training only)."""
        variant = self.config.variant
        if variant == "tying":
            squared = ((hidden - embeddings) ** 2).sum(-1)
            return self.config.tying_delta * squared[mask].mean()
        if variant == "mlm" and self.training and input_ids is not None:
            return self.config.mlm_weight * self.mlm_loss(input_ids, mask)
        return hidden.new_zeros(())

    def mlm_loss(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked-LM loss (T&Š §3.3): choose real positions with p; 80 % → [MASK], 10 % → random
        token, 10 % unchanged; predict the original token from ĥ_t with the embedding matrix as a
        frozen, tied decoder (no gradient reaches the embeddings through the decoder)."""
        mask = mask.bool()
        p = self.config.mlm_probability
        chosen = (torch.rand(input_ids.shape, device=input_ids.device) < p) & mask
        if not bool(chosen.any()):
            return self.embedding.weight.new_zeros(())
        roll = torch.rand(input_ids.shape, device=input_ids.device)
        masked_ids = input_ids.clone()
        masked_ids[chosen & (roll < 0.8)] = self.config.mask_token_id
        to_random = chosen & (roll >= 0.8) & (roll < 0.9)
        num_special = max(self.config.pad_token_id, self.config.unk_token_id,
                          self.config.mask_token_id) + 1
        random_ids = torch.randint(num_special, max(num_special + 1, self.config.vocab_size),
                                   input_ids.shape, device=input_ids.device)
        masked_ids[to_random] = random_ids[to_random].clamp_max(self.config.vocab_size - 1)
        masked_embeddings = self.embedding(masked_ids) * mask.unsqueeze(-1).to(self.embedding.weight.dtype)
        masked_hidden = self.encoder(masked_embeddings, mask)
        vocab_logits = F.linear(masked_hidden[chosen], self.embedding.weight.detach())
        return F.cross_entropy(vocab_logits, input_ids[chosen])


__all__ = ["AttnClassifierForSequenceClassification", "AttnClassifierPreTrainedModel",
           "AttnClassifierOutput", "masked_softmax", "expand_binary_logits", "exclude_first_last"]
