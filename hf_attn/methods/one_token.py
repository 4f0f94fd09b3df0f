"""What every method and faithfulness metric gives a text of **one** token: the one rule that
``Explainer.explain``, ``Explainer.attributions``, the ERASER battery (``hf-attn eraser``) and the
faithfulness table consult, so the four agree (same value, or undefined with the same reason).

Each name gets one of three statuses (:data:`ONE_TOKEN_RULES`):

- ``"defined"``: the method's definition applies to one token as it stands (attention over one
  position, a gradient, a Shapley value with one player, …);
- ``"empty input"``: the value needs the model on the text with its only token removed, the
  model's **empty input**: the special tokens the tokenizer adds, alone (``[CLS] [SEP]``,
  ``<s>``); for hf_attn's own models without markers one ``[PAD]``, whose embedding the model
  zeroes (the documented ERASER convention). A tokenizer that adds no special tokens (GPT-2,
  Qwen2) leaves zero tokens, which a model cannot read: the value is undefined, with
  :data:`NO_EMPTY_INPUT` as the reason (a ``[PAD]`` in its place would be a token the model
  reads, not the empty input);
- ``"undefined"``: the definition needs two tokens (a ranking's Kendall τ, NAOPC's bounds).

An undefined value is NaN in arrays (``null`` in JSON) with its reason beside it; a table's
aggregates leave it out and count it, never failing the other texts.
"""

from __future__ import annotations

DEFINED, EMPTY_INPUT, UNDEFINED = "defined", "empty input", "undefined"

NO_EMPTY_INPUT = ("removing the text's every token (a one-token text's only one) leaves zero tokens, since the "
                  "tokenizer adds no special tokens: an input the model cannot read (a [PAD] in its place would be a "
                  "token the model reads, not the empty input)")
NO_RANKING = "one-token text: a ranking of one token has no Kendall τ (it needs two tokens)"
ONE_ORDERING = "one-token text: one deletion order only, so AOPC_min = AOPC_max and NAOPC divides by 0"

# name → (status, what a one-token text gets). Names: the faithfulness table's methods (also
# Explainer.attributions), Explainer.explain's rows, the ERASER battery's measures, and the metrics.
ONE_TOKEN_RULES: dict[str, tuple[str, str]] = {
    # attribution methods (the table's rows, Explainer.attributions)
    "attention": (DEFINED, "α on the token (1 when the text has no special tokens); explain's row, renormalised "
                           "over the text's tokens, is 1"),
    "rollout": (DEFINED, "the token's entry of the rolled-out row"),
    "attention_flow": (DEFINED, "the token's max-flow to the read-out position"),
    "attention_norm": (DEFINED, "‖Σ_h α f(x)‖ of the token"),
    "alti": (DEFINED, "the token's rolled-out contribution"),
    "value_zeroing": (DEFINED, "the change of the read-out state when the token's values are zeroed"),
    "alti_logit": (DEFINED, "the token's logit terms: its embedding's and every attention block's update (every row "
                            "of the rollout is 1 on it)"),
    "attnlrp": (DEFINED, "the token's AttnLRP relevance of z_c (with the special tokens', the logit up to the "
                         "unconserved terms)"),
    "cp_lrp": (DEFINED, "the token's CP-LRP relevance of z_c"),
    "saliency": (DEFINED, "‖∂ŷ_c/∂e‖₂ at the token"),
    "gradient_x_input": (DEFINED, "Σ_d e ∂ŷ_c/∂e of the token"),
    "integrated_gradients": (DEFINED, "the path integral from the token's baseline embedding: f(x) − f(x') up to "
                                      "quadrature (completeness with one token)"),
    "leave_one_out": (EMPTY_INPUT, "ŷ_c(x) − ŷ_c(the model's empty input)"),
    "kernel_shap": (DEFINED, "Shapley value of one player, exactly f(x) − f(x') (x' the token's embedding zeroed), "
                             "computed directly (no coalitions to sample)"),
    "shapley_sampling": (DEFINED, "Shapley value of one player, exactly f(x) − f(x'), computed directly"),
    "deeplift": (DEFINED, "the token's contribution to t(x) − t(x') (summation-to-delta with one input)"),
    "random": (DEFINED, "a uniform random score"),
    # Explainer.explain's rows and the ERASER battery's measures (J&W's definitions)
    "gradient": (DEFINED, "|∂ŷ/∂e · e| of the token, attention held fixed"),
    "loo": (EMPTY_INPUT, "TVD(ŷ(the model's empty input), ŷ(x))"),
    "ig": (DEFINED, "integrated gradients of the token (f(x) − f(x') up to quadrature)"),
    "ig_abs": (DEFINED, "|integrated gradients| of the token"),
    "token_probability": (DEFINED, "p̂ with all attention on the token: the prediction itself"),
    "permutation": (DEFINED, "the only permutation of one token is itself: Δŷ 0"),
    "adversary": (DEFINED, "the only distribution over one token is 1 on it: ε-max JSD 0"),
    # faithfulness metrics (the table's columns, the ERASER battery)
    "comprehensiveness": (EMPTY_INPUT, "every bin removes the only token: ŷ_c(x) − ŷ_c(the model's empty input), "
                                       "the same for every method"),
    "sufficiency": (DEFINED, "every bin keeps the only token: 0 for every method"),
    "soft_comprehensiveness": (DEFINED, "equal scores keep each element with probability 1 − 1 = 0 (the token "
                                        "removed), the same for every method"),
    "soft_sufficiency": (DEFINED, "equal scores keep each element with probability 1 (the text itself), the same "
                                  "for every method"),
    "naopc_comprehensiveness": (UNDEFINED, ONE_ORDERING),
    "naopc_sufficiency": (UNDEFINED, ONE_ORDERING),
    "tau_loo": (UNDEFINED, NO_RANKING),
    "agreement": (UNDEFINED, NO_RANKING),
    "kendall": (UNDEFINED, NO_RANKING),
}


def rule(name: str) -> tuple[str, str]:
    """``(status, meaning)`` of ``name`` for a one-token text (:data:`ONE_TOKEN_RULES`)."""
    if name not in ONE_TOKEN_RULES:
        raise KeyError(f"no one-token rule for {name!r}; known: {sorted(ONE_TOKEN_RULES)}")
    return ONE_TOKEN_RULES[name]


def empty_input_refusal(adapter) -> str | None:
    """Why a text without special tokens has no empty input on ``adapter``'s model (None: it has
    one). hf_attn's own models read one ``[PAD]``, whose embedding they zero (the "no information"
    input of their ERASER convention and integrated gradients' zero baseline); any other model
    would read zero tokens."""
    if getattr(adapter, "model_type", None) == "hf_attn":
        return None
    return NO_EMPTY_INPUT


def one_token_refusal(adapter, name: str, has_specials: bool) -> str | None:
    """Why ``name`` is undefined on a one-token text (None: defined), ``has_specials``: whether the
    text's encoding has special tokens around its token (then they alone are the empty input)."""
    status, meaning = rule(name)
    if status == DEFINED:
        return None
    if status == UNDEFINED:
        return meaning
    return None if has_specials else empty_input_refusal(adapter)


def row_refusals(adapter, content, real, name: str) -> list[str | None]:
    """Per row of a batch (``content`` / ``real`` ``(B, T)`` bool, tensors or arrays): why ``name``
    is undefined on it (None: defined, also for every row of two tokens or more)."""
    out = []
    for c, r in zip(content, real):
        count = int(c.sum())
        if count != 1:
            out.append(None)
            continue
        has_specials = bool((r & ~c).any())
        out.append(one_token_refusal(adapter, name, has_specials))
    return out


def batch_refusals(adapter, batch, name: str) -> list[str | None]:
    """:func:`row_refusals` of an adapter :class:`~hf_attn.adapters.base.Batch`."""
    return row_refusals(adapter, batch.content.bool().cpu(), batch.attention_mask.bool().cpu(), name)


def undefined_rows(adapter, name: str, rows, contents) -> list[str | None]:
    """Per text: why ``name``'s scores are undefined on it (None: finite on every text token).
    ``rows``: per text its scores over its real positions; ``contents``: bool masks over the same
    positions (the text's tokens; the other positions are special tokens). A one-token text gets
    the rule's reason; any other non-finite score says so."""
    import numpy as np

    out = []
    for row, content in zip(rows, contents):
        content = np.asarray(content, dtype=bool)
        values = np.asarray(row, dtype=np.float64)[content]
        if np.isfinite(values).all():
            out.append(None)
            continue
        reason = one_token_refusal(adapter, name, bool((~content).any())) if content.sum() == 1 else None
        out.append(reason or f"{name} gave NaN or inf on a token of this text")
    return out


class TextRefused(ValueError):
    """A method refuses one text (not the model): e.g. attention flow on a text past its length limit.
    The table and ``Explainer.attributions`` leave that text's scores undefined with this reason,
    even when every text of a call is refused (a method error on every text is raised instead)."""


def reasons_count(reasons) -> dict[str, int]:
    """``{reason: rows}`` of the non-None ``reasons`` (a table's count of its undefined rows)."""
    out: dict[str, int] = {}
    for reason in reasons:
        if reason is not None:
            out[reason] = out.get(reason, 0) + 1
    return out


__all__ = ["DEFINED", "TextRefused", "EMPTY_INPUT", "NO_EMPTY_INPUT", "NO_RANKING", "ONE_ORDERING", "ONE_TOKEN_RULES", "UNDEFINED",
           "batch_refusals", "empty_input_refusal", "one_token_refusal", "reasons_count", "row_refusals", "rule",
           "undefined_rows"]
