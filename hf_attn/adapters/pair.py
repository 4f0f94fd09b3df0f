"""The adapter for the papers' sentence-pair models (``model_type = "hf_attn_pair"``: J&W's NLI model on
SNLI and their QA model on bAbI / CNN, Jain & Wallace 2019 §2–3).

The explained attention is the model's one distribution α over the **premise** (the passage, for QA),
conditioned on the encoded hypothesis (the question) Q. The adapter carries the second text in the
batch (:class:`PairBatch`: ``hypothesis_input_ids`` / ``hypothesis_attention_mask`` beside the
premise's ``input_ids`` / ``attention_mask``), so a method sees an ordinary batch of the attended
sequence: it ranks, permutes, deletes and re-weights premise tokens, and every forward also reads the
hypothesis, unchanged. Its texts are ``(premise, hypothesis)`` pairs.

Its exact fast paths sit behind the contract as the single-sentence models' do
(:class:`hf_attn.adapters.hf_attn_model.HfAttnAdapter`, ``exact_model_methods``): logits under any
attention come from the cached premise states h and Q (Σ α = 1 and the decoder's first layer is affine
in the context: ``model.logits_from_token_logits(model.token_logits(h, Q), α)``, exact for the tanh
decoder too), and the methods' exact pair versions apply (gradient w.r.t. the premise embeddings,
leave-one-out over premise tokens, the adversary through the pair decoder).

Shapes: B pairs, T premise tokens, U hypothesis tokens (both right-padded), R rows per pair, C classes.
These models run on the CPU in float32, as the single-sentence ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import torch

from hf_attn.adapters.base import AttentionSpec, Batch, Forward
from hf_attn.adapters.contract import tokenize_texts
from hf_attn.adapters.hf_attn_model import checked_own_model
from hf_attn.adapters.device import check_weights_dtype, dtype_name, frozen_parameters, running_dtype


class PairTokens(list):
    """One pair's premise token ids (the list: what is batched, ranked and deleted) with its
    hypothesis's token ids (``hypothesis``)."""

    def __init__(self, premise, hypothesis):
        super().__init__(int(t) for t in premise)
        self.hypothesis = [int(t) for t in hypothesis]


@dataclass
class PairBatch(Batch):
    """A :class:`~hf_attn.adapters.base.Batch` of premises (``input_ids`` … ``(B, T)``) with each
    pair's hypothesis: ``hypothesis_input_ids`` / ``hypothesis_attention_mask`` ``(B, U)``, right-padded
    to the batch's longest hypothesis. Selecting pairs selects their hypotheses; trimming cuts premise
    positions only."""

    hypothesis_input_ids: torch.Tensor | None = None
    hypothesis_attention_mask: torch.Tensor | None = None

    def select(self, rows) -> "PairBatch":
        index = torch.as_tensor(rows, dtype=torch.long, device=self.input_ids.device)
        return replace(super().select(rows), hypothesis_input_ids=self.hypothesis_input_ids[index],
                       hypothesis_attention_mask=self.hypothesis_attention_mask[index])

    def hypothesis(self) -> dict:
        """The hypothesis as the pair model's keyword arguments."""
        return {"hypothesis_input_ids": self.hypothesis_input_ids,
                "hypothesis_attention_mask": self.hypothesis_attention_mask}


def _padded(sequences, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Id lists → right-padded ids ``(B, W)`` (long) and bool mask ``(B, W)``."""
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    width = int(lengths.max())
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
    ids[mask] = torch.as_tensor(np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences]))
    return ids, mask


def checked_pairs(pairs) -> list[tuple[str, str]]:
    """``(premise, hypothesis)`` pairs (any iterable of 2-item sequences of strings) → a non-empty list
    of tuples; anything else is a ``ValueError`` naming the item."""
    items = list(pairs)
    if not items:
        raise ValueError("no pairs to analyse")
    checked = []
    for i, pair in enumerate(items):
        if isinstance(pair, str) or len(pair) != 2 or not all(isinstance(t, str) for t in pair):
            raise ValueError(f"pairs[{i}] must be a (premise, hypothesis) pair of strings, got {pair!r:.80}")
        checked.append((pair[0], pair[1]))
    return checked


class PairAdapter:
    """Adapter over an :class:`hf_attn.models.modeling_hf_attn_pair.AttnPairClassifierForSequenceClassification`
    (see the module docstring); the contract of :class:`hf_attn.adapters.base.AttentionAdapter` with
    ``(premise, hypothesis)`` pairs for texts."""

    num_layers = 1
    num_heads = 1
    layer = 0
    query_rule = "attention"
    pooling = "attention"
    left_padding = False
    fast_path = True
    fast_path_reason = "affine first decoder layer: logits under any premise attention from cached states and Q"
    exact_model_methods = True  # the methods' exact pair versions apply
    kept_end = "start"

    def __init__(self, model, tokenizer, spec: AttentionSpec | None = None, device="auto", precision="float32",
                 token_budget: int = 16384, max_length: int | None = None):
        spec, token_budget, max_length = checked_own_model(model, spec, device, precision, token_budget, max_length,
                                                           "hf_attn_pair", "sentence-pair hf_attn model",
                                                           "sentence-pair models")
        self.spec = spec
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.weights_dtype = check_weights_dtype(model, self.dtype, self.device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.token_budget = token_budget
        own = int(getattr(model.config, "max_tokens", 512))  # the forward refuses longer inputs
        self.max_length = own if max_length is None else min(int(max_length), own)
        self.name = getattr(model.config, "_name_or_path", "") or "hf_attn_pair"
        self.model_type = "hf_attn_pair"
        self.pad_id = int(tokenizer.pad_token_id or 0)

    # ------------------------------------------------------------------------------------------
    # encoding

    def tokenize(self, pairs, limit: int | None = None, first_index: int = 0):
        """``(PairTokens per pair, premise word id lists)``: premise and hypothesis each cut to ``limit``
        tokens (default: the model's ``max_tokens``) keeping the start, with a
        :class:`~hf_attn.adapters.contract.TruncationWarning`. A premise or hypothesis without tokens is
        a ``ValueError`` naming the first."""
        pairs = checked_pairs(pairs)
        limit = self.max_length if limit is None else limit
        premises, word_ids = tokenize_texts(self.tokenizer, [p for p, _ in pairs], limit, "start", first_index)
        hypotheses = tokenize_texts(self.tokenizer, [h for _, h in pairs], limit, "start", first_index)[0]
        for name, sequences in (("premise", premises), ("hypothesis", hypotheses)):
            empty = [i for i, s in enumerate(sequences) if not s]
            if empty:
                raise ValueError(f"{len(empty)} {name}(s) have no tokens, e.g. index {empty[0] + first_index}: "
                                 "remove empty texts first")
        return [PairTokens(p, h) for p, h in zip(premises, hypotheses)], word_ids

    def encode(self, pairs, max_length: int | None = None, first_index: int = 0) -> PairBatch:
        pairs = checked_pairs(pairs)
        limit = self.max_length if max_length is None else min(max_length, self.max_length)
        sequences, word_ids = self.tokenize(pairs, limit, first_index)
        return self.from_token_lists(sequences, texts=[p for p, _ in pairs], word_ids=word_ids)

    def from_token_lists(self, sequences, texts=None, word_ids=None) -> PairBatch:
        """A :class:`PairBatch` of :class:`PairTokens` (premise ids with their hypothesis ids)."""
        missing = [i for i, s in enumerate(sequences) if not isinstance(getattr(s, "hypothesis", None), list)]
        if missing:
            raise ValueError(f"sequence {missing[0]} has no hypothesis: a sentence-pair adapter batches PairTokens "
                             "(its tokenize's output)")
        ids, mask = _padded(sequences, self.pad_id)
        hypothesis_ids, hypothesis_mask = _padded([s.hypothesis for s in sequences], self.pad_id)
        width = ids.shape[1]
        if word_ids is None:
            word_ids = [list(range(len(s))) for s in sequences]
        padded = [list(w) + [None] * (width - len(w)) for w in word_ids]
        return PairBatch(input_ids=ids, attention_mask=mask, content=mask.clone(), query=mask.clone(),
                         word_ids=padded, texts=None if texts is None else list(texts),
                         hypothesis_input_ids=hypothesis_ids, hypothesis_attention_mask=hypothesis_mask)

    def token_key(self, sequences) -> str:
        """A digest of every id a batch of ``sequences`` is made of (premises and hypotheses): part of a
        batch cache's key."""
        digest = hashlib.sha256()
        for s in sequences:
            digest.update(np.asarray(s, dtype=np.int64).tobytes() + b"|"
                          + np.asarray(s.hypothesis, dtype=np.int64).tobytes() + b";")
        return digest.hexdigest()

    def tokens(self, batch: PairBatch, index: int) -> list[str]:
        return self.tokenizer.convert_ids_to_tokens(batch.input_ids[index][batch.content[index]].tolist())

    # ------------------------------------------------------------------------------------------
    # forwards

    def _run(self, batch: PairBatch, **kwargs):
        return self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, **batch.hypothesis(),
                          **kwargs)

    @torch.no_grad()
    def logits(self, batch: PairBatch) -> torch.Tensor:
        return self._run(batch).logits.float()

    @torch.no_grad()
    def forward(self, batch: PairBatch, rollout: bool = True) -> Forward:
        """The unmodified forward: α ``(B, T)`` over the premise is the explained attention (the one
        head's row, the one layer's row; rollout is α itself); ``cache`` = (premise states h
        ``(B, T, D)``, query Q ``(B, D)``)."""
        out = self._run(batch, output_hidden_states=True)
        attention = out.attentions.float()
        logits = out.logits.float()
        return Forward(logits=logits, probabilities=logits.softmax(-1), attention=attention,
                       head_rows=attention.unsqueeze(1), layer_rows=attention.unsqueeze(1),
                       rollout=attention if rollout else None, cache=(out.hidden_states, out.query))

    @torch.no_grad()
    def logits_under(self, batch: PairBatch, weights: torch.Tensor, per_head: bool,
                     forward: Forward | None = None) -> torch.Tensor:
        """``(B, R, C)`` logits with α replaced by each of R rows (``(B, R, T)``, or ``(B, R, 1, T)`` per
        head), exactly, from the cached h and Q (the hypothesis unchanged)."""
        if per_head:
            weights = weights[:, :, 0]
        if forward is None or forward.cache is None:
            forward = self.forward(batch, rollout=False)
        hidden, query = forward.cache
        return self.model.logits_from_token_logits(self.model.token_logits(hidden, query), weights.to(hidden.dtype))

    def embeddings(self, batch: PairBatch) -> torch.Tensor:
        """The premise embeddings ``(B, T, E)`` (the hypothesis keeps its own)."""
        return self.model.get_input_embeddings()(batch.input_ids)

    def logits_from_embeddings(self, batch: PairBatch, embeddings: torch.Tensor,
                               detach_attention: bool = False) -> torch.Tensor:
        with frozen_parameters(self.model):
            return self.model(inputs_embeds=embeddings, attention_mask=batch.attention_mask, **batch.hypothesis(),
                              detach_attention=detach_attention).logits.float()

    @torch.no_grad()
    def logits_with_embedding_output(self, batch: PairBatch, transform) -> torch.Tensor:
        """``(B, C)`` logits with the premise embeddings replaced by ``transform(h, rows)``."""
        return self.logits_from_embeddings(batch, transform(self.embeddings(batch), slice(0, len(batch))))

    def describe(self) -> dict:
        config = self.model.config
        return {"model_type": "hf_attn_pair", "layer": -1, "num_layers": 1, "num_heads": 1, "heads": "mean",
                "query": "attention", "pooling": "attention", "padding": "right", "fast_path": True,
                "fast_path_reason": self.fast_path_reason, "device": "cpu",
                "precision": dtype_name(running_dtype(self.dtype, self.weights_dtype)),
                "weights_dtype": dtype_name(self.weights_dtype),
                "text": f"{config.encoder} encoder, {config.attention} attention over the premise given the "
                        f"hypothesis, {config.pair_decoder} decoder"}


__all__ = ["PairAdapter", "PairBatch", "PairTokens", "checked_pairs"]
