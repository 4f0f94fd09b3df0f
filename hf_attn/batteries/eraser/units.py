"""What ERASER removes (DeYoung et al. 2020, §4), for any classifier the engine accepts: the
**units** of a tokenized text are its tokens except the special tokens the tokenizer *adds*
(``[CLS]`` … ``[SEP]``, ``<s>`` … ``</s>``, J&W's ``<SOS>`` … ``<EOS>`` markers; found from the word
ids: an added special token has none, so an ``[UNK]`` of the text is a unit). The papers' models
without markers have no special tokens: every token is a unit.

Removing units deletes them from the input: the kept units stay in order and the sequence is
re-framed with the same specials (``[CLS] kept [SEP]``: shorter, not masked; positions re-numbered),
so the specials are never removed and the classifier always reads its ``[CLS]``. Removing every unit
leaves the specials alone (``[CLS] [SEP]``, the model's own "empty input"); a model without specials
reads one ``[PAD]`` (:func:`hf_attn.methods.eraser.erasure_variants`). This framing is
:class:`FramedClassifier`, a thin module the unchanged :func:`hf_attn.methods.eraser.eraser_scores`
runs on. Units are tokens (word pieces for transformers), not words: a word split into pieces can be
partly removed.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from hf_attn.methods.eraser import DEFAULT_FRACTIONS, EraserResult, eraser_scores

DEFAULT_TOKEN_BUDGET = 16384  # padded tokens per forward (attention, LOO chunks ×1, ERASER variants ×4)
DEFAULT_GRADIENT_TOKEN_BUDGET = 4096  # padded tokens per forward + backward (gradient, IG)


# ----------------------------------------------------------------------------------------------
# units: the word pieces between the tokenizer's added special tokens


def encode(tokenizer, texts, max_length: int = 512, keep: str = "start"
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokenize single texts → ``(input_ids (N, T), attention_mask (N, T), units (N, T) bool)``,
    right-padded; a text longer than ``max_length`` tokens is cut keeping its ``"start"`` (encoders)
    or its ``"end"`` (decoders, whose head reads the last token), with one
    :class:`~hf_attn.adapters.contract.TruncationWarning` naming the texts and the tokens dropped;
    ``units`` marks the word pieces of the text (real positions that are not special tokens the
    tokenizer added)."""
    from hf_attn.adapters.contract import tokenize_texts

    sequences, word_ids = tokenize_texts(tokenizer, list(texts), max_length, keep=keep)
    width = max(len(s) for s in sequences)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(sequences), width), int(pad), dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    special = torch.ones((len(sequences), width), dtype=torch.bool)
    for i, row in enumerate(sequences):
        ids[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = 1
        # the tokenizer's added specials have no word (an [UNK] of the text has one: it is a unit)
        special[i, :len(row)] = torch.tensor([w is None for w in word_ids[i]], dtype=torch.bool)
    units = mask.bool() & ~special
    return ids, mask, units


def special_frame(input_ids: torch.Tensor, attention_mask: torch.Tensor, units: torch.Tensor
                  ) -> tuple[list[int], list[int]]:
    """The special tokens framing the units — ``(prefix, suffix)`` id lists, e.g. ``([CLS], [SEP])`` —
    read off the first row and checked (batched) to frame every row the same way (one segment per
    text; sentence pairs are not supported)."""
    mask = attention_mask.bool()
    row_units = units[0].nonzero().flatten()
    if len(row_units) == 0:
        raise ValueError("the first text has no word pieces")
    first, last, length = int(row_units[0]), int(row_units[-1]), int(mask[0].sum())
    prefix, suffix = input_ids[0, :first].tolist(), input_ids[0, last + 1:length].tolist()
    counts = units.sum(1)
    # every row: its units contiguous right after the same prefix, then the same suffix
    starts = torch.where(units.any(1), units.float().argmax(1), torch.full_like(counts, len(prefix)))
    ok = (starts == len(prefix)) & (mask.sum(1) == len(prefix) + counts + len(suffix))
    if len(prefix):
        ok &= (input_ids[:, :len(prefix)] == torch.tensor(prefix)).all(1)
    if len(suffix):
        position = (len(prefix) + counts).unsqueeze(1) + torch.arange(len(suffix))
        ok &= (input_ids.gather(1, position.clamp_max(input_ids.shape[1] - 1)) == torch.tensor(suffix)).all(1)
    if not bool(ok.all()):
        bad = int((~ok).nonzero()[0])
        raise ValueError(f"text {bad} is not framed like text 0 ({prefix} … {suffix}): ERASER on transformers "
                         "takes single texts (one segment)")
    return prefix, suffix


def content_layout(input_ids: torch.Tensor, units: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The units of each row left-aligned: ``(ids (N, Tc), mask (N, Tc) bool, index (N, Tc))`` with
    ``index`` the position in the tokenized row (to gather per-position importances), Tc the most
    units of a row; ids on pads are 0."""
    order = torch.sort((~units).to(torch.int8), dim=1, stable=True).indices  # units first, in order
    width = max(int(units.sum(1).max()), 1)
    index = order[:, :width]
    mask = units.gather(1, index)
    return torch.where(mask, input_ids.gather(1, index), torch.zeros_like(index)), mask, index


class FramedClassifier(torch.nn.Module):
    """``content pieces (B, Tc) → model([prefix] pieces [suffix]).logits``: what ERASER's removal
    means on a transformer (module docstring). The real pieces of a row are its mask's positions
    whose id is not ``config.pad_token_id`` (so the one ``[PAD]`` :func:`erasure_variants` uses for
    an empty input gives ``[CLS] [SEP]``); they must be left-aligned. ``config``, ``parameters()``
    and ``eval()`` are the model's, so :func:`hf_attn.methods.eraser.eraser_scores` runs on it
    unchanged."""

    def __init__(self, model, prefix: Sequence[int], suffix: Sequence[int]):
        super().__init__()
        self.model = model
        self.config = model.config
        self.prefix = torch.as_tensor(list(prefix), dtype=torch.long)
        self.suffix = torch.as_tensor(list(suffix), dtype=torch.long)
        self.train(model.training)  # a new Module starts in training mode; follow the model's

    def frame(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, Tc)`` content → framed ``(B, P + Tc + S)`` ids and mask (right-padded); without
        specials the rows as they are (an emptied row keeps its one ``[PAD]``)."""
        if not len(self.prefix) and not len(self.suffix):
            return input_ids, attention_mask
        pad = int(getattr(self.config, "pad_token_id", 0) or 0)
        real = attention_mask.bool() & (input_ids != pad)
        count = real.sum(1)
        batch, width = input_ids.shape
        p, s = len(self.prefix), len(self.suffix)
        ids = torch.full((batch, p + width + s), pad, dtype=torch.long, device=input_ids.device)
        ids[:, :p] = self.prefix.to(ids.device)
        ids[:, p:p + width] = torch.where(real, input_ids, torch.full_like(input_ids, pad))
        if s:
            where = p + count.unsqueeze(1) + torch.arange(s, device=ids.device)
            ids.scatter_(1, where, self.suffix.to(ids.device).expand(batch, s))
        mask = torch.arange(p + width + s, device=ids.device) < (p + count + s).unsqueeze(1)
        return ids, mask.long()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs):
        ids, mask = self.frame(input_ids, attention_mask)
        device = next(self.model.parameters()).device  # the model's device; results come back
        out = self.model(input_ids=ids.to(device), attention_mask=mask.to(device), **kwargs)
        out.logits = out.logits.float().to(input_ids.device)
        return out


def framed_eraser_scores(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, units: torch.Tensor,
                              importance: torch.Tensor, fractions: Sequence[float] = DEFAULT_FRACTIONS, *,
                              token_budget: int = 4 * DEFAULT_TOKEN_BUDGET, progress: bool = False) -> EraserResult:
    """ERASER comprehensiveness / sufficiency (DeYoung et al. 2020 §4) of ``importance`` ``(N, T)``
    (per position of the tokenized rows; only the units are ranked) for any classifier:
    :func:`hf_attn.methods.eraser.eraser_scores` on the units (:func:`content_layout`) through
    :class:`FramedClassifier`. ``lengths`` of the result count units."""
    prefix, suffix = special_frame(input_ids, attention_mask, units)
    ids, mask, index = content_layout(input_ids, units)
    scores = torch.as_tensor(importance).double().gather(1, index)
    return eraser_scores(FramedClassifier(model, prefix, suffix), ids, mask.long(), scores, fractions,
                         token_budget=token_budget, progress=progress)


__all__ = ["DEFAULT_GRADIENT_TOKEN_BUDGET", "DEFAULT_TOKEN_BUDGET", "FramedClassifier", "content_layout", "encode",
           "framed_eraser_scores", "special_frame"]
