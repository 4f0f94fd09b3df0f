"""The baselines of integrated gradients (Sundararajan et al. 2017, §3: x' the input of "no signal")
and, per model, whether IG from a baseline can meet completeness.

- ``"zero"``: the text's token embeddings replaced by 0 (the paper's choice for text models);
- ``"pad"``: by the pad token's embedding (the zero vector where the embedding keeps the pad row at 0,
  as transformers initialises it);
- ``"mean"``: by the mean of the model's input-embedding rows (the "average token").

Special tokens and pads keep their embeddings: only the text moves.

Why a baseline can fail. Completeness, Σ_t IG_t = f(x) − f(x'), holds for the exact integral; the
quadrature approximates it well when the integrand is smooth along the path x' + a(x − x'). A
normalisation x / ‖x‖ (LayerNorm, RMSNorm) is singular at 0: where the first normalisation of a model
reads the word embeddings alone — no position or segment embedding added, as in Llama, Qwen2,
Mistral (RMSNorm) and ModernBERT (LayerNorm) — the zero baseline puts its input at that point, the
integrand is a spike of width ≈ √ε / ‖e‖ at a = 0 (ε the norm's epsilon), which the nodes resolve
slowly if at all. Measured on the tiny random models of the tests (4 seeds × 5 sentences each, float32,
the doubling rule ``ig_rule="gauss-legendre"`` from 16 nodes up to ``ig_max_steps``; ``docs/faithfulness.md``): from the zero
baseline 17 of 20 Llama sentences miss the 1 % target at 256 nodes and 7 at 1024, and all 20 Qwen2
sentences miss it at both (gaps of 100–1500 %); from the mean embedding, which is not at that point
(nor, in general, is its straight path to the text), 3 Llama sentences miss it at 256 nodes and
none at 1024, and no Qwen2 sentence at 256.
:func:`baseline_problem` says so per model with one forward at the baseline; the faithfulness table
reports it beside the completeness it measured, naming :data:`OFFERED`.
"""

from __future__ import annotations

import torch

BASELINES = ("zero", "pad", "mean")
OFFERED = "mean"  # the baseline offered where the chosen one sits at the model's normalisation's singular point
# the first normalisation's input at the baseline, relative to its size at the text, below which the
# path starts (within 1 %) at the normalisation's singular point
SINGULAR_SHARE = 0.01


def check_baseline(baseline: str) -> str:
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {list(BASELINES)}, got {baseline!r}")
    return baseline


def baseline_embeddings(adapter, batch, embeddings: torch.Tensor, baseline: str) -> torch.Tensor:
    """``(B, T, d)``: ``embeddings`` of ``batch`` with the text's tokens (``batch.content``) replaced
    by ``baseline``'s vector (module docstring); special tokens and pads unchanged."""
    check_baseline(baseline)
    if baseline == "zero":
        value = torch.zeros_like(embeddings)
    else:
        table = adapter.model.get_input_embeddings().weight.detach()
        row = table[adapter.pad_id] if baseline == "pad" else table.mean(0)
        value = row.to(device=embeddings.device, dtype=embeddings.dtype).expand_as(embeddings)
    return torch.where(batch.content.unsqueeze(-1), value, embeddings)


def _normalisations(model) -> list:
    return [m for m in model.modules() if type(m).__name__.endswith("Norm") and not list(m.children())]


def baseline_problem(adapter, batch, baseline: str, rows: int = 4) -> str | None:
    """Why integrated gradients from ``baseline`` cannot meet completeness on this model, or None.

    Runs the first ``rows`` texts of ``batch`` once at the baseline and once as they are, reading the
    input of the first normalisation layer the forward passes (a module whose class name ends in
    "Norm": LayerNorm, RMSNorm, …): where at some text position its size at the baseline is below
    :data:`SINGULAR_SHARE` of its size at the text, the path starts at the normalisation's singular
    point (module docstring) and the reason names the layer and the baseline to use instead."""
    check_baseline(baseline)
    model = getattr(adapter, "model", None)
    norms = _normalisations(model) if isinstance(model, torch.nn.Module) else []
    if not norms:
        return None
    sub = batch.select(list(range(min(rows, len(batch)))))
    seen: list = []

    def record(module, args):
        if not seen and args and torch.is_tensor(args[0]):
            seen.append((type(module).__name__, args[0].detach().float()))

    handles = [m.register_forward_pre_hook(record) for m in norms]
    try:
        with torch.no_grad():
            embeddings = adapter.embeddings(sub).detach()
            inputs = []
            for x in (baseline_embeddings(adapter, sub, embeddings, baseline), embeddings):
                seen.clear()
                adapter.logits_from_embeddings(sub, x)
                inputs.append(seen[0] if seen else None)
    finally:
        for handle in handles:
            handle.remove()
    if inputs[0] is None or inputs[1] is None or inputs[0][1].shape[:2] != sub.content.shape:
        return None  # no normalisation on the path, or one that does not read per token: nothing to tell
    name = inputs[0][0]
    at_base = inputs[0][1].pow(2).mean(-1).sqrt()
    at_text = inputs[1][1].pow(2).mean(-1).sqrt()
    content = sub.content.to(at_base.device)
    share = (at_base / at_text.clamp_min(torch.finfo(at_text.dtype).tiny))[content]
    if share.numel() == 0 or float(share.min()) >= SINGULAR_SHARE:
        return None
    offered = (f"; ig_baseline='{OFFERED}' (the mean input embedding) avoids that point and meets the target "
               f"(raise ig_max_steps to 1024 if a few sentences still miss it)" if baseline != OFFERED else "")
    return (f"the {baseline!r} baseline puts the input of this model's first normalisation ({name}), which "
            f"reads the word embeddings alone, at {float(share.min()):.0%} of its size at the text: at the "
            f"normalisation's singular point, where the integrand is a spike that the nodes resolve slowly if "
            f"at all, so the completeness target is not met within a practical node count{offered}")


__all__ = ["BASELINES", "OFFERED", "SINGULAR_SHARE", "baseline_embeddings", "baseline_problem", "check_baseline"]
