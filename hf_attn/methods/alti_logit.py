"""ALTI-Logit (Ferrando, Gállego, Tsiamas & Costa-jussà 2023, "Explaining How Transformers Use Context
to Build Predictions", ACL 2023): each input token's contribution to the explained class's **logit**.

A pre-LN model's residual stream at the read-out position t (the position the classification head
reads: the last real token of a decoder, the first of a first-position head) is a sum of updates,
x^L_t = x^0_t + Σ_l (Attn^l_t + b^l_O + MLP^l_t), and the logit of class w is
logit_w = U_w · LN_f(x^L_t) + b_w (U_w: the head's row of w, LN_f the final norm). With the final
norm's scale σ_t fixed at the unmodified forward, LN_f(z) = L_f(z) + β_f is affine in z:
L_f(z) = γ_f ⊙ (z − mean(z)) / σ_t for a LayerNorm (GPT-2), L_f(z) = γ_f ⊙ z / σ_t for an RMSNorm
(Llama, Qwen2, Mistral; σ_t the root mean square, ε included). So the logit splits exactly into
per-update terms, and the attention block's update splits per input token j through ALTI's
transformed vectors without the residual, T^l_t(x_j) = Σ_h α^h_tj f^h(x_j) (f^h(x) = (LN^l(x) W^h_V +
b^h_V) W^h_O, :func:`hf_attn.adapters.internals.head_contributions`):

- the logit update of layer l by token j: Δ^l_j = U_w · L_f(T^l_t(x^{l−1}_j));
- carried back to the input tokens s by ALTI's contributions of the earlier layers
  (:func:`hf_attn.methods.alti.alti_contributions`, rolled out without an added identity):
  Δ^l_{←s} = Σ_j Δ^l_j M^{l−1}_{js}, M^{l−1} = C^{l−1} ··· C^1, M^0 = I;
- ALTI-Logit_s = Σ_l Δ^l_{←s} + [s = t] U_w · L_f(x^0_t) (the read-out token's own embedding:
  its position mixes nothing before layer 1).

Each row of M sums to 1 over the real tokens, so the scores add up to Σ_l Σ_j Δ^l_j + U_w · L_f(x^0_t)
and **conservation** holds exactly (:class:`AltiLogitTerms`): logit_w = Σ_s ALTI-Logit_s +
Σ_l U_w · L_f(b^l_O) + Σ_l U_w · L_f(MLP^l_t) + U_w · β_f + b_w. The terms not attributed to any
token, as in the paper: the attention output biases b^l_O, the feed-forward updates at t (the MLPs
act on one position; the paper studies them apart), the final norm's β_f and the head's bias.
The biases inside T (the norm's β^l and b_V, spread by α) are attributed, as in the authors'
"affine" transformed vectors. A contrastive explanation (``foil_class``) explains
logit_w − logit_f with U_w − U_f (the paper's contrastive explanations).

Code followed: ``mt-upc/logit-explanations`` (the authors' release), ``src/contributions.py``
(``ModelWrapper.get_logit_contributions``: ``l_transform`` is L_f with σ of the pre-final-norm state,
``aff_x_j`` the affine transformed vectors, ``init_logit`` / ``b_o_logits_layers`` / ``mlp_logit_layers``
the other terms) and ``extract_explanations.py`` (``track2input_tokens``: layer 1's update kept as it
is, layer l's multiplied by the rollout of layers 1…l−1; the contrastive difference summed over
layers). Where this module departs from that code: (1) the embedding term U_w · L_f(x^0_t) is added
to the read-out token (the code computes it, ``init_logit``, but leaves it out of the explanation);
(2) RMSNorm models are linearised without the centring (the code's ``l_transform`` always centres;
an RMSNorm has no mean subtraction, so centring would not be its linearisation); (3) a classifier's
head row U_w replaces the language model's unembedding column. The projection through L_f is done
once per head, Σ_h α^h_tj (f^h(x_j) · g)/σ_t with g = γ_f ⊙ U_w (centred for a LayerNorm), which
equals U_w · L_f(T^l_t(x_j)) exactly.

Applies to pre-LN blocks (:data:`hf_attn.adapters.internals.LAYOUTS` kind "pre") whose final norm
feeds a linear head reading one position (:data:`FINAL_NORMS`: Llama, Qwen2, Mistral, GPT-2 with
their ``score`` head). Refused with the reason (:class:`UnsupportedModelError`): post-LN encoders
(BERT and its family: every layer's norm rescales the whole stream with its own σ and the tanh
pooler is not linear, so the logit is not a sum of per-layer updates; the paper's decomposition
does not reach it), ModernBERT (a dense + activation + norm head), mean-pooled heads, and models
without transformer layers (the papers' BiLSTM classifiers: no attention blocks to decompose).

Shapes: B instances, T positions, H heads, D model size, L layers, C classes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hf_attn.adapters.base import UnsupportedModelError
from hf_attn.adapters.internals import (LAYOUTS, content_only, head_contributions, record_internals, require_internals,
                                        this_thread_only)
from hf_attn.adapters.readout import read_rows
from hf_attn.core import deadline
from hf_attn.methods.alti import alti_contributions

# model_type → the final norm's attribute on the base model (the head is the classifier's ``score``)
FINAL_NORMS = {"llama": "norm", "qwen2": "norm", "mistral": "norm", "gpt2": "ln_f"}
WHY_NOT = {"post": "a post-LN encoder: every layer's norm rescales the whole residual stream with its own σ and "
                   "its pooler (tanh) is not linear, so the logit is not a sum of per-layer updates",
           "modernbert": "its head (dense, activation, norm) is not linear in the final norm's output"}


@dataclass
class Readout:
    """The path from the residual stream x^L to the logits: the final ``norm`` module with its scale
    ``gamma`` ``(D,)``, shift ``beta`` ``(D,)`` (None without), ``eps`` and ``centred`` (LayerNorm:
    mean subtracted; RMSNorm: not); the head's ``weight`` ``(C, D)`` and ``bias`` ``(C,)`` or None;
    ``head`` the head module."""

    norm: torch.nn.Module
    gamma: torch.Tensor | None
    beta: torch.Tensor | None
    eps: float
    centred: bool
    head: torch.nn.Module
    weight: torch.Tensor
    bias: torch.Tensor | None


def readout(adapter) -> Readout:
    """The :class:`Readout` of ``adapter``'s model, or :class:`UnsupportedModelError` with the reason
    (module docstring) where the logit is not linear in the final norm's output at one position."""
    require_internals(adapter, "ALTI-Logit")
    model = adapter.model
    model_type = getattr(model.config, "model_type", type(model).__name__)
    rule = LAYOUTS.get(model_type)
    if model_type not in FINAL_NORMS:
        why = WHY_NOT.get(model_type) or (WHY_NOT["post"] if rule is not None and rule.kind == "post" else None)
        raise UnsupportedModelError(f"ALTI-Logit does not apply to {model_type!r} models: "
                                    + (why or f"the path from its residual stream to the logits is not known (known: "
                                              f"{', '.join(sorted(FINAL_NORMS))})"))
    if getattr(adapter, "pooling", None) not in ("first", "last"):
        raise UnsupportedModelError(f"ALTI-Logit needs a head that reads one position; this one reads "
                                    f"{getattr(adapter, 'pooling', 'an unknown set of')} rows")
    norm = getattr(getattr(model, "base_model", model), FINAL_NORMS[model_type], None)
    head = getattr(model, "score", None)
    if norm is None or not isinstance(head, torch.nn.Linear):
        raise UnsupportedModelError(f"{type(model).__name__} has no final norm {FINAL_NORMS[model_type]!r} and linear "
                                    "head 'score': not the classifier ALTI-Logit decomposes")
    centred = isinstance(norm, torch.nn.LayerNorm)
    if not centred and not type(norm).__name__.endswith("RMSNorm"):
        raise UnsupportedModelError(f"ALTI-Logit linearises a LayerNorm or an RMSNorm; the final norm is "
                                    f"{type(norm).__name__}")
    eps = getattr(norm, "eps", getattr(norm, "variance_epsilon", None))

    def tensor(module, name):  # float32 on the adapter's device (None: the module has none)
        value = getattr(module, name, None)
        if isinstance(value, torch.Tensor) and value.device.type == "meta":
            raise UnsupportedModelError(f"ALTI-Logit reads the {type(module).__name__}'s {name}, which is offloaded "
                                        "(a meta tensor): load the final norm and the head on a device")
        return None if value is None else value.detach().to(adapter.device).float()
    return Readout(norm, tensor(norm, "weight"), tensor(norm, "bias"), float(eps), centred, head,
                   tensor(head, "weight"), tensor(head, "bias"))


@dataclass
class AltiLogitTerms:
    """Every term of the explained logit (module docstring), all ``(B,)`` but ``tokens``:
    ``tokens`` ``(B, T)`` ALTI-Logit_s (embedding term included, pads 0, special tokens kept);
    ``layers`` ``(L, B, T)`` each layer's Δ^l_{←s}; ``embedding`` U_w · L_f(x^0_t);
    ``attention_bias`` Σ_l U_w · L_f(b^l_O); ``mlp`` Σ_l U_w · L_f(MLP^l_t); ``norm_bias`` U_w · β_f;
    ``head_bias`` b_w; ``logit`` the explained logit of the forward (logit_w, or logit_w − logit_f);
    ``target`` / ``foil`` the classes ``(B,)`` (foil None without one); ``position`` t ``(B,)``.
    Conservation: ``tokens.sum(-1) + rest() == logit``."""

    tokens: torch.Tensor
    layers: torch.Tensor
    embedding: torch.Tensor
    attention_bias: torch.Tensor
    mlp: torch.Tensor
    norm_bias: torch.Tensor
    head_bias: torch.Tensor
    logit: torch.Tensor
    target: torch.Tensor
    foil: torch.Tensor | None
    position: torch.Tensor

    def rest(self) -> torch.Tensor:
        """``(B,)`` the terms attributed to no token: b_O, the MLPs, β_f and the head's bias."""
        return self.attention_bias + self.mlp + self.norm_bias + self.head_bias


def read_out_position(adapter, attention_mask: torch.Tensor) -> torch.Tensor:
    """``(B,)`` the position t the head reads: the first or the last real token (``adapter.pooling``)."""
    return read_rows(attention_mask, adapter.pooling)


def _recorded(adapter, batch, out: Readout):
    """One recording forward: the layers' internals and, at every position, the final norm's input
    x^L and output ``(B, T, D)`` and the head's input, from hooks: the last calls that together hold
    the batch's rows (the recording's set-up forward on one row, if any, comes before them)."""
    seen: dict[str, list] = {"x": [], "normed": [], "head": []}

    def norm_hook(module, args, output):  # returns None: the output stays the model's
        seen["x"].append(args[0])
        seen["normed"].append(output)

    def head_hook(module, args):
        seen["head"].append(args[0])
    handles = [out.norm.register_forward_hook(this_thread_only(norm_hook)),  # another thread's calls not taken
               out.head.register_forward_pre_hook(this_thread_only(head_hook))]
    try:
        layers = record_internals(adapter, batch)
    finally:
        for handle in handles:
            handle.remove()
    count, width = batch.input_ids.shape
    picked = {}
    for key, calls in seen.items():
        rows, start = 0, len(calls)
        while start > 0 and rows < count:
            start -= 1
            rows += calls[start].shape[0]
        if rows != count or any(c.shape[1] != width for c in calls[start:]):
            raise UnsupportedModelError("ALTI-Logit: the final norm and the head were not called on the whole input")
        picked[key] = torch.cat([c.to(adapter.device).float() for c in calls[start:]])
    return layers, picked["x"], picked["normed"], picked["head"]


def _direction(out: Readout, target: torch.Tensor, foil: torch.Tensor | None):
    """``(u, g, bias)``: u = U_w (− U_f) ``(B, D)``, g = γ_f ⊙ u, centred for a LayerNorm, so that
    U_w · L_f(z) = (z · g)/σ_t; the head's bias b_w (− b_f) ``(B,)``."""
    u = out.weight[target] - (0.0 if foil is None else out.weight[foil])
    g = u * out.gamma if out.gamma is not None else u
    if out.centred:
        g = g - g.mean(-1, keepdim=True)
    bias = torch.zeros(len(target), device=u.device) if out.bias is None else (
        out.bias[target] - (0.0 if foil is None else out.bias[foil]))
    return u, g, bias


@torch.no_grad()
def alti_logit_terms(adapter, batch, target_class: torch.Tensor | None = None,
                     foil_class: torch.Tensor | None = None) -> AltiLogitTerms:
    """Every term of the explained logit of ``batch`` (:class:`AltiLogitTerms`, module docstring).
    ``target_class`` ``(B,)``: the explained class (None: the predicted one); ``foil_class`` ``(B,)``
    or None: explain logit_target − logit_foil. One recording forward; refused with the reason where
    ALTI-Logit does not apply (:func:`readout`)."""
    out = readout(adapter)
    layers, x_last, normed, head_input = _recorded(adapter, batch, out)
    rows = torch.arange(len(batch), device=x_last.device)
    t = read_out_position(adapter, batch.attention_mask).to(x_last.device)
    if not torch.allclose(head_input[rows, t], normed[rows, t], rtol=1e-4, atol=1e-5):
        raise UnsupportedModelError("ALTI-Logit: the head does not read the final norm's output as it is")
    logits = torch.nn.functional.linear(normed[rows, t], out.weight, out.bias)  # (B, C): the model's logits
    # the head's own pooling must read position t: the whole forward (a pruned one replays row t itself)
    own = adapter.logits(batch, prune=False).float().to(logits.device)
    if not torch.allclose(logits.float(), own, rtol=1e-4, atol=1e-4 * (1.0 + float(own.abs().max()))):
        raise UnsupportedModelError("ALTI-Logit: the model's logits are not the head applied to the final norm's "
                                    "output at the read-out position (its pooling reads another position)")
    target = logits.argmax(-1) if target_class is None else target_class.to(logits.device).long()
    foil = None if foil_class is None else foil_class.to(logits.device).long()
    logit = logits[rows, target] - (0.0 if foil is None else logits[rows, foil])
    u, g, head_bias = _direction(out, target, foil)
    xt = x_last[rows, t]  # (B, D): x^L_t, the final norm's input
    centred = xt - xt.mean(-1, keepdim=True) if out.centred else xt
    sigma = torch.sqrt(centred.pow(2).mean(-1) + out.eps)  # (B,): σ_t of the unmodified forward
    project = lambda z: (z * g).sum(-1) / sigma  # noqa: E731  U_w · L_f(z), z (B, D)
    per_layer = []
    rollout = None  # M^{l−1} (B, T, T); None: the identity
    attention_bias = torch.zeros_like(logit)
    mlp = torch.zeros_like(logit)
    for index, layer in enumerate(deadline.paced(layers)):
        if layer.layout.kind != "pre":
            raise UnsupportedModelError(f"ALTI-Logit does not apply to a {layer.layout.kind}-LN block: {WHY_NOT['post']}")
        f = head_contributions(layer)  # (B, H, T, D)
        alpha = layer.probs[rows, :, t]  # (B, H, T): the read-out row of every head
        delta = (alpha * torch.einsum("bhjD,bD->bhj", f, g)).sum(1) / sigma[:, None]  # (B, T): Δ^l_j
        per_layer.append(delta if rollout is None else torch.einsum("bj,bjs->bs", delta, rollout))
        if layer.layout.bias is not None:
            attention_bias += project(layer.layout.bias.float().expand_as(xt))
        after = layers[index + 1].residual if index + 1 < len(layers) else x_last  # the stream after layer l
        mlp += project(after[rows, t] - layer.output[rows, t])
        if index + 1 < len(layers):  # the last layer's contributions carry nothing further
            contributions = alti_contributions(layer, batch.attention_mask)
            rollout = contributions if rollout is None else contributions @ rollout
    embedding = project(layers[0].residual[rows, t])
    stacked = torch.stack(per_layer)
    tokens = stacked.sum(0)
    tokens[rows, t] += embedding
    norm_bias = (u * out.beta).sum(-1) if out.beta is not None else torch.zeros_like(logit)
    return AltiLogitTerms(tokens, stacked, embedding, attention_bias, mlp, norm_bias, head_bias, logit, target, foil, t)


def alti_logit(adapter, batch, target_class: torch.Tensor | None = None,
               foil_class: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T)`` ALTI-Logit scores (module docstring): each token's signed share of the explained
    class's logit (positive: raises it), 0 on pads and special tokens. ``target_class`` /
    ``foil_class`` as in :func:`alti_logit_terms`."""
    return content_only(batch, alti_logit_terms(adapter, batch, target_class, foil_class).tokens)


__all__ = ["AltiLogitTerms", "FINAL_NORMS", "Readout", "alti_logit", "alti_logit_terms", "read_out_position",
           "readout"]
