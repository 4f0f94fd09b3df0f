"""The adapter for the papers' attentive classifiers (``model_type = "hf_attn"``: BiLSTM, CNN or
Average encoder + additive/dot/uniform attention, Jain & Wallace 2019 appendix A).

The explained attention is the model's one attention distribution α over the tokens (one layer,
one head, read by the decoder). Its exact fast paths sit behind the adapter contract:

- logits under any attention: the decoder is linear and Σα = 1, so the logits under α are
  Σ_t α_t (W h_t + b) from the cached states (``model.logits_from_token_logits``, Tutek & Šnajder
  2020 Eq. 9): permutations and adversaries never rerun the encoder;
- the gradient and leave-one-out shortcuts of :mod:`hf_attn.methods.gradient` and
  :mod:`hf_attn.methods.leave_one_out` (hand-written BiLSTM backward and partial reruns).

These models run on the CPU in float32 (the papers' arithmetic; their shortcuts are CPU code):
any other device or precision is refused with that reason.
"""

from __future__ import annotations

import torch

from hf_attn.adapters.base import AttentionSpec, Batch, Forward, UnsupportedModelError, checked_texts
from hf_attn.adapters.contract import check_adapter_counts, check_model_contract, tokenize_texts
from hf_attn.adapters.device import check_weights_dtype, dtype_name, frozen_parameters, running_dtype


def checked_own_model(model, spec, device, precision, token_budget, max_length, model_type: str, kind: str,
                      models: str):
    """``(spec, token_budget, max_length)`` checked for one of hf_attn's own models (``model_type``:
    ``hf_attn`` or ``hf_attn_pair``; ``kind`` / ``models`` name it in the errors): one attention
    distribution (one layer, one head), the CPU, float32 (the papers' arithmetic), the model's own type,
    counts within bounds, the model contract."""
    spec = spec or AttentionSpec()
    if spec.layer not in (0, -1) or spec.heads not in ("mean", 0) or spec.query not in ("auto", "mean"):
        raise ValueError(f"{spec}: a {kind} has one attention distribution (one layer, one head); "
                         "use layer=-1, heads='mean', query='auto'")
    if device not in ("auto", "cpu", None) and str(device) != "cpu":
        raise ValueError(f"device {device!r}: hf_attn's own {models} run on the CPU (their exact fast paths are "
                         "CPU code); devices apply to transformers models")
    if precision not in ("float32", None, torch.float32):
        raise ValueError(f"precision {precision!r}: hf_attn's own models are analysed in float32, the papers' "
                         "arithmetic")
    if getattr(getattr(model, "config", None), "model_type", None) != model_type:
        raise UnsupportedModelError(f"{type(model).__name__} is not a {kind}")
    token_budget, max_length = check_adapter_counts(token_budget, max_length)  # within bounds, the reason told
    check_model_contract(model)
    return spec, token_budget, max_length


class HfAttnAdapter:
    """Adapter over an :class:`hf_attn.models.modeling_hf_attn.AttnClassifierForSequenceClassification`
    (see the module docstring); the same contract as
    :class:`hf_attn.adapters.transformer.TransformersAdapter`."""

    num_layers = 1
    num_heads = 1
    layer = 0
    query_rule = "attention"
    pooling = "attention"
    left_padding = False
    fast_path = True
    fast_path_reason = "linear decoder: logits under any attention from cached states"
    # the methods' exact model-level versions apply (hf_attn.methods.gradient.gradient_importance,
    # hf_attn.methods.leave_one_out.leave_one_out on ``self.model``): used instead of the generic loops
    exact_model_methods = True

    def __init__(self, model, tokenizer, spec: AttentionSpec | None = None, device="auto", precision="float32",
                 token_budget: int = 16384, max_length: int | None = None):
        spec, token_budget, max_length = checked_own_model(model, spec, device, precision, token_budget, max_length,
                                                           "hf_attn", "single-sentence hf_attn model",
                                                           "BiLSTM/CNN/Average models")
        self.spec = spec
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.weights_dtype = check_weights_dtype(model, self.dtype, self.device)  # half precision: refused in one line
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.token_budget = token_budget
        own = int(getattr(model.config, "max_tokens", 512))  # the forward refuses longer inputs
        self.max_length = own if max_length is None else min(int(max_length), own)
        self.name = getattr(model.config, "_name_or_path", "") or "hf_attn"
        self.model_type = "hf_attn"
        self.pad_id = int(tokenizer.pad_token_id or 0)

    # ------------------------------------------------------------------------------------------
    # encoding

    kept_end = "start"

    def tokenize(self, texts, limit: int | None = None, first_index: int = 0):
        """``(token id lists, word id lists)``, each cut to ``limit`` (default: the model's
        ``max_tokens``) keeping the start, with a :class:`~hf_attn.adapters.contract.TruncationWarning`."""
        return tokenize_texts(self.tokenizer, list(texts), self.max_length if limit is None else limit, "start",
                              first_index)

    def encode(self, texts, max_length: int | None = None, first_index: int = 0) -> Batch:
        texts = checked_texts(texts)
        limit = self.max_length if max_length is None else min(max_length, self.max_length)
        sequences, word_ids = self.tokenize(texts, limit, first_index)
        empty = [i for i, s in enumerate(sequences) if not s]
        if empty:
            raise ValueError(f"text {empty[0]} has no tokens ({len(empty)} empty text(s)): remove empty texts first")
        return self.from_token_lists(sequences, texts=texts, word_ids=word_ids)

    def from_token_lists(self, sequences, texts=None, word_ids=None) -> Batch:
        from hf_attn.models.masks import attended_mask

        sequences = [list(map(int, s)) for s in sequences]
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for i, s in enumerate(sequences):
            ids[i, :len(s)] = torch.as_tensor(s, dtype=torch.long)
            mask[i, :len(s)] = 1
        content = attended_mask(self.model, mask.bool())
        if word_ids is None:
            word_ids = [list(range(len(s))) for s in sequences]
        padded = [list(w) + [None] * (width - len(w)) for w in word_ids]
        return Batch(input_ids=ids, attention_mask=mask, content=content, query=mask.bool(), word_ids=padded,
                     texts=None if texts is None else list(texts))

    def batch_from_tensors(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Batch:
        from hf_attn.models.masks import attended_mask

        width = int(attention_mask.sum(1).max())
        ids, mask = input_ids[:, :width], attention_mask[:, :width]
        return Batch(input_ids=ids, attention_mask=mask, content=attended_mask(self.model, mask.bool()),
                     query=mask.bool())

    def tokens(self, batch: Batch, index: int) -> list[str]:
        return self.tokenizer.convert_ids_to_tokens(batch.input_ids[index][batch.content[index]].tolist())

    # ------------------------------------------------------------------------------------------
    # forwards

    @torch.no_grad()
    def logits(self, batch: Batch) -> torch.Tensor:
        return self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits.float()

    @torch.no_grad()
    def forward(self, batch: Batch, rollout: bool = True) -> Forward:
        """The unmodified forward: α (B, T) is the explained attention, the one head's row and the
        one layer's row; there is no rollout (one attention layer: rollout is α itself)."""
        out = self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
        attention = out.attentions.float()
        logits = out.logits.float()
        return Forward(logits=logits, probabilities=logits.softmax(-1), attention=attention,
                       head_rows=attention.unsqueeze(1), layer_rows=attention.unsqueeze(1),
                       rollout=attention if rollout else None, cache=out.hidden_states)

    def logits_under(self, batch: Batch, weights: torch.Tensor, per_head: bool,
                     forward: Forward | None = None) -> torch.Tensor:
        """``(B, R, C)`` logits with α replaced by each of R rows (``(B, R, T)``, or ``(B, R, 1, T)``
        per head), exactly, from the cached states: Σ_t α_t (W h_t + b)."""
        if per_head:
            weights = weights[:, :, 0]
        hidden = forward.cache if forward is not None and forward.cache is not None else \
            self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       output_hidden_states=True).hidden_states
        return self.model.logits_from_token_logits(self.model.token_logits(hidden), weights.to(hidden.dtype))

    def embeddings(self, batch: Batch) -> torch.Tensor:
        return self.model.get_input_embeddings()(batch.input_ids)

    def logits_from_embeddings(self, batch: Batch, embeddings: torch.Tensor,
                               detach_attention: bool = False) -> torch.Tensor:
        with frozen_parameters(self.model):  # the weights need no gradient here
            return self.model(inputs_embeds=embeddings, attention_mask=batch.attention_mask,
                              detach_attention=detach_attention).logits.float()

    @torch.no_grad()
    def logits_with_embedding_output(self, batch: Batch, transform) -> torch.Tensor:
        """``(B, C)`` logits with the embedding layer's output (the word embeddings: the papers'
        models add no positions) replaced by ``transform(h, rows)`` (``rows``: a slice of the batch)."""
        embeddings = self.embeddings(batch)
        return self.logits_from_embeddings(batch, transform(embeddings, slice(0, len(batch))))

    def describe(self) -> dict:
        config = self.model.config
        return {"model_type": "hf_attn", "layer": -1, "num_layers": 1, "num_heads": 1, "heads": "mean",
                "query": "attention", "pooling": "attention", "padding": "right", "fast_path": True,
                "fast_path_reason": self.fast_path_reason, "device": "cpu",
                "precision": dtype_name(running_dtype(self.dtype, self.weights_dtype)),
                "weights_dtype": dtype_name(self.weights_dtype), "text": f"{config.encoder} encoder, {config.attention} attention"}
