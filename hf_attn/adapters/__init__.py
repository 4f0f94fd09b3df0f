"""Adapters: the one seam between a model and the methods (see :mod:`hf_attn.adapters.base`)."""

from hf_attn.adapters.base import AttentionAdapter, AttentionSpec, Batch, Forward, UnsupportedModelError
from hf_attn.adapters.device import resolve_device, resolve_precision
from hf_attn.adapters.interface import InterventionError

__all__ = ["AttentionAdapter", "AttentionSpec", "Batch", "Forward", "InterventionError", "UnsupportedModelError",
           "adapter_for", "resolve_device", "resolve_precision"]


def adapter_for(model, tokenizer, *, layer: int = -1, heads="mean", query="auto", device="auto",
                precision="float32", token_budget: int = 8192, max_length: int | None = 512):
    """The adapter for ``model``: :class:`~hf_attn.adapters.hf_attn_model.HfAttnAdapter` for the
    papers' BiLSTM/CNN/Average models, :class:`~hf_attn.adapters.pair.PairAdapter` for their
    sentence-pair (NLI, QA) models, :class:`~hf_attn.adapters.transformer.TransformersAdapter`
    for any other ``transformers`` sequence classifier. A model that cannot be intervened on is
    refused here with the reason (:class:`UnsupportedModelError`)."""
    spec = AttentionSpec(layer=layer, heads=heads, query=query)
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type == "hf_attn_pair":
        from hf_attn.adapters.pair import PairAdapter

        return PairAdapter(model, tokenizer, spec=spec, device=device, precision=precision,
                           token_budget=token_budget, max_length=max_length)
    if model_type == "hf_attn":
        from hf_attn.adapters.hf_attn_model import HfAttnAdapter

        return HfAttnAdapter(model, tokenizer, spec=spec, device=device, precision=precision,
                             token_budget=token_budget, max_length=max_length)
    from hf_attn.adapters.transformer import TransformersAdapter

    return TransformersAdapter(model, tokenizer, spec=spec, device=device, precision=precision,
                               token_budget=token_budget, max_length=max_length)
