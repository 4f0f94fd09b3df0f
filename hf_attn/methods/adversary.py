"""Adversarial attention (Jain & Wallace 2019, §4.2.2, Alg. 3 and Eq. 1–2).

k attention distributions α(i) per instance, as different as possible from the model's α̂ and from
each other (JSD), whose output stays within ε of the original (TVD), the encoder states h fixed.
J&W's statistic is the ε-max JSD: the largest JSD(α(i), α̂) among the adversaries with TVD ≤ ε
(:func:`best_feasible_adversary`). Sentence pairs: the premise attention with the hypothesis query
Q fixed; the gradient of the TVD penalty goes through the (possibly nonlinear) pair decoder.

Shapes: B instances, T tokens (right-padded), k adversaries, K decoder units (K′ for the pair
decoder), C classes, D hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hf_attn.adapters.pair import PairBatch
from hf_attn.core import deadline
from hf_attn.core.measures import jsd, tvd


@dataclass
class AdversaryResult:
    """k adversarial attention distributions per instance (J&W §4.2.2).

    attention: ``(B, k, T)`` adversaries α(i) (0 on pads); tvd: ``(B, k)`` TVD(ŷ(α(i)), ŷ(α̂));
    jsd: ``(B, k)`` JSD(α(i), α̂); eps_max_jsd: ``(B,)`` max JSD over adversaries with TVD ≤ ε
    (0 if none, J&W Alg. 3); feasible: ``(B, k)`` TVD ≤ ε; probabilities: ``(B, k, C)`` ŷ(α(i)).
    """

    attention: torch.Tensor
    tvd: torch.Tensor
    jsd: torch.Tensor
    eps_max_jsd: torch.Tensor
    feasible: torch.Tensor
    probabilities: torch.Tensor


@dataclass
class FeasibleAdversary:
    """The best feasible adversary of each instance (J&W Alg. 3). ``index`` ``(B,)``: the adversary of
    maximal JSD among those with TVD ≤ ε, or the smallest-TVD adversary if none is feasible;
    ``eps_max_jsd`` ``(B,)``: its JSD, 0 if none is feasible; ``any_feasible`` ``(B,)``."""

    index: torch.Tensor
    eps_max_jsd: torch.Tensor
    any_feasible: torch.Tensor


def best_feasible_adversary(adversary_tvd: torch.Tensor, adversary_jsd: torch.Tensor,
                            eps: float) -> FeasibleAdversary:
    """J&W's ε-max JSD selection from the adversaries' output TVDs and attention JSDs ``(B, k)``:
    among the adversaries with TVD ≤ ε, the one of maximal JSD(α(i), α̂) (the first of equal ones).
    An instance without a feasible adversary has ε-max JSD 0 and, for display, the adversary closest
    in output (smallest TVD). NaN TVDs are never feasible; a NaN JSD of a feasible one propagates."""
    feasible = adversary_tvd <= eps
    any_feasible = feasible.any(-1)
    if adversary_tvd.shape[-1] == 0:  # no adversaries at all: none feasible
        zeros = adversary_tvd.new_zeros(adversary_tvd.shape[:-1])
        return FeasibleAdversary(zeros.long(), zeros, any_feasible)
    eps_max_jsd = torch.where(feasible, adversary_jsd, torch.zeros_like(adversary_jsd)).max(-1).values
    # −1 < any JSD: a feasible adversary of JSD 0 still beats every infeasible one
    best = torch.where(feasible, adversary_jsd, torch.full_like(adversary_jsd, -1.0)).argmax(-1)
    index = torch.where(any_feasible, best, adversary_tvd.argmin(-1))
    return FeasibleAdversary(index, eps_max_jsd, any_feasible)


def adversary_objective(adversaries: torch.Tensor, attention: torch.Tensor, output_tvd: torch.Tensor,
                        lam: float = 500.0, eps: float = 0.01) -> torch.Tensor:
    """Relaxed Eq. 1–2 per instance ``(B,)`` (to be maximised), with autograd-friendly ops:
    Σ_i JSD(α(i), α̂) + 1/(k(k−1)) Σ_{i<j} JSD(α(i), α(j)) − (λ/k) Σ_i max(0, TVD_i − ε).
    ``adversaries (B, k, T)``, ``attention (B, T)``, ``output_tvd (B, k)``. The reference that the
    closed-form gradient of :func:`adversarial_attention` is tested against."""
    k = adversaries.shape[1]
    to_original = jsd(adversaries, attention.unsqueeze(1)).sum(-1)
    pairwise = jsd(adversaries.unsqueeze(1), adversaries.unsqueeze(2))  # (B, k, k), symmetric
    diversity = torch.triu(pairwise, diagonal=1).sum((-1, -2)) / max(k * (k - 1), 1)
    penalty = (lam / k) * torch.relu(output_tvd - eps).sum(-1)
    return to_original + diversity - penalty


def _divergence_gradient(log_adv: torch.Tensor, adv: torch.Tensor, log_mid0: torch.Tensor) -> torch.Tensor:
    """∂/∂α(i) of Σ_i JSD(α(i), α̂) + c Σ_{i<j} JSD(α(i), α(j)), c = 1/(k(k−1)), ``(B, k, T)``, exact
    up to a per-row constant (which the softmax Jacobian removes). With ∂JSD(p, q)/∂p = ½ log(p/m),
    m = (p + q)/2: ½(log α(i) − log m(i,0)) + c/2 ((k−1) log α(i) − Σ_{j≠i} log(α(i) + α(j))).
    ``log_mid0`` = log(α(i) + α̂) (log 2 is a constant). Each of the k(k−1)/2 pair sums is formed
    and logged once, from slices (no gathers): few ops, since this runs at every Adam step."""
    k = adv.shape[1]
    c = 1.0 / max(k * (k - 1), 1)
    grad = torch.mul(log_adv, 0.5 + 0.5 * c * (k - 1))
    grad.sub_(log_mid0, alpha=0.5)
    if k > 1:
        pairs = adv.new_empty(adv.shape[0], k * (k - 1) // 2, adv.shape[2])
        spans, offset = [], 0
        for d in range(1, k):  # pairs (i, i+d), i < k−d
            torch.add(adv[:, : k - d], adv[:, d:], out=pairs[:, offset: offset + k - d])
            spans.append((d, offset))
            offset += k - d
        pairs.clamp_min_(1e-30).log_()
        for d, offset in spans:
            block = pairs[:, offset: offset + k - d]
            grad[:, : k - d].sub_(block, alpha=0.5 * c)
            grad[:, d:].sub_(block, alpha=0.5 * c)
    return grad


def _adversary_logit_gradient(model, logits: torch.Tensor, token_logits: torch.Tensor,
                              attention_floor: torch.Tensor, original: torch.Tensor, lam: float,
                              eps: float) -> torch.Tensor:
    """∂(relaxed Eq. 1–2 objective)/∂(adversary logits) ``(B, k, T)`` in closed form, from the
    adversaries' logits (B, k, T; pads ≤ −1e4), per-token decoder units (B, T, K),
    α̂ floored at 1e-30 ``(B, 1, T)`` and ŷ ``(B, C)``; tested against autograd on
    :func:`adversary_objective`. The penalty part is −(λ/k)·1[TVD_i > ε]·∂TVD_i/∂α(i) through
    ŷ(i) = softmax(expand(Σ_t α_t tok_t)); the softmax Jacobian maps ∂/∂α to ∂/∂logits."""
    k = logits.shape[1]
    adv, log_adv = logits.softmax(-1), logits.log_softmax(-1)  # (exp of −1e4 pads is slow: no .exp())
    grad = _divergence_gradient(log_adv, adv, (adv + attention_floor).log_())
    output_logits = model.logits_from_token_logits(token_logits, adv)  # (B, k, C)
    if model.config.num_outputs == 1:  # binary, logits [0, z]: TVD = |σ(z) − σ(z₀)|, ∂/∂z = sign·σ(1−σ)
        probability = output_logits[..., 1:].sigmoid()  # (B, k, 1)
        difference = probability - original[:, None, 1:]
        active = (difference.abs() > eps).to(adv.dtype)  # TVD_i > ε
        penalty = difference.sign_().mul_(probability - probability * probability).mul_(active * (lam / k))
    else:
        probabilities = output_logits.softmax(-1)
        difference = probabilities - original.unsqueeze(1)
        over = 0.5 * difference.sign()  # ∂TVD/∂ŷ(i)
        d_logits = probabilities * (over - (probabilities * over).sum(-1, keepdim=True))
        active = (0.5 * difference.abs().sum(-1) > eps).to(adv.dtype) * (lam / k)  # TVD_i > ε
        penalty = d_logits * active.unsqueeze(-1)  # (B, k, K)
    if penalty.shape[-1] == 1:  # one decoder unit: an outer product (batched 1×1 matmuls are slow)
        grad.addcmul_(penalty, token_logits.transpose(1, 2), value=-1.0)
    else:
        grad.baddbmm_(penalty, token_logits.transpose(1, 2), alpha=-1.0)
    return grad.sub_(torch.linalg.vecdot(adv, grad).unsqueeze(-1)).mul_(adv)  # α ⊙ (g − Σ_t α g)


class _AmsgradAscent:
    """J&W's optimiser — Adam with amsgrad (β = 0.9, 0.999, ε = 1e-8) — ascending the objective for
    one tensor of logits. It calls torch's fused Adam kernel directly: on these small tensors
    ``torch.optim``'s per-step bookkeeping costs more than the kernel itself. The arithmetic is
    ``torch.optim.Adam(amsgrad=True, maximize=True, fused=True)``'s, which is the fallback."""

    def __init__(self, parameter: torch.Tensor, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.parameter, self.lr, self.betas, self.eps = parameter, lr, betas, eps
        self.kernel = getattr(torch, "_fused_adam_", None)
        self.moments = [torch.zeros_like(parameter) for _ in range(3)]  # m, v, max v
        self.steps = torch.zeros((), dtype=torch.float32, device=parameter.device)
        self.optimizer = None
        if self.kernel is None or parameter.dtype not in (torch.float32, torch.float64):
            self.optimizer = torch.optim.Adam([parameter.requires_grad_(True)], lr=lr, betas=betas, eps=eps,
                                              amsgrad=True, maximize=True)

    def step(self, gradient: torch.Tensor) -> None:
        if self.optimizer is not None:
            self.parameter.grad = gradient
            self.optimizer.step()
            return
        self.steps += 1
        m, v, v_max = self.moments
        self.kernel([self.parameter], [gradient], [m], [v], [v_max], [self.steps], lr=self.lr,
                    beta1=self.betas[0], beta2=self.betas[1], weight_decay=0.0, eps=self.eps,
                    amsgrad=True, maximize=True)


def _initial_adversary_logits(mask: torch.Tensor, k: int, init_scale: float, noise: torch.Tensor | None,
                              generator: torch.Generator | None, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Adversary logits ``(B, k, T)`` at the start of the search (J&W code): log-uniform plus
    ``init_scale``·N(0, 1) noise over the real tokens, −1e4 on pads (probability exactly 0, and so
    is their gradient). ``noise`` ``(B, k, T)`` overrides the draw (otherwise from ``generator``,
    or a generator seeded with ``seed``)."""
    batch, length = mask.shape
    if noise is None:
        if generator is None:
            generator = torch.Generator(device=mask.device).manual_seed(seed)
        noise = torch.randn((batch, k, length), generator=generator, device=mask.device, dtype=dtype)
    elif noise.shape != (batch, k, length):
        raise ValueError(f"noise must have shape {(batch, k, length)}, got {tuple(noise.shape)}")
    lengths = mask.sum(1, keepdim=True).to(dtype)
    logits = (-lengths.log()).unsqueeze(1) + init_scale * noise.to(dtype)  # log-uniform + noise
    return logits.masked_fill(~mask.unsqueeze(1), -1e4)


def adversarial_attention(model, hidden_states: torch.Tensor, attention: torch.Tensor,
                          attention_mask: torch.Tensor, k: int = 5, lam: float = 500.0,
                          eps: float = 0.01, steps: int = 500, lr: float = 0.01, seed: int = 0,
                          init_scale: float = 3.0, generator: torch.Generator | None = None,
                          noise: torch.Tensor | None = None) -> AdversaryResult:
    """J&W Alg. 3 / Eq. 1–2: k adversarial attention distributions per instance that maximise
    Σ_i JSD(α(i), α̂) + 1/(k(k−1)) Σ_{i<j} JSD(α(i), α(j)) − (λ/k) Σ_i max(0, TVD(ŷ(α(i)), ŷ) − ε)
    with h fixed. α(i) = softmax of free logits over the real tokens, initialised at uniform +
    ``init_scale``·N(0, 1) noise in logit space, optimised with Adam (amsgrad) for ``steps`` steps
    (J&W code: λ = 500, lr 0.01, 500 steps, k = 5). ε-max JSD = max JSD over adversaries with
    TVD ≤ ε after the last step (0 if none). ``noise`` ``(B, k, T)`` overrides the N(0, 1) draw
    (otherwise from ``generator``, or a generator seeded with ``seed``).

    Paper vs. code: the J&W code penalises with weight λ (not λ/k) and sums the pairwise term over
    both orders; we follow the paper's Eq. 2 (pass ``lam=500*k`` for the code's penalty weight).

    Every adversary of the batch is one ``(B, k, T)`` tensor optimised together; instances are
    independent (the objective is a sum and Adam is element-wise), so the result equals a
    per-instance run with the same initial noise. The gradient is computed in closed form
    (:func:`_adversary_logit_gradient`, tested against autograd on :func:`adversary_objective`).
    """
    if k < 1 or steps < 0:
        raise ValueError(f"need k >= 1 and steps >= 0, got k={k}, steps={steps}")
    mask = attention_mask.bool()
    dtype = hidden_states.dtype
    with torch.no_grad():
        token_logits = model.token_logits(hidden_states).detach()  # (B, T, K)
        attention = attention.detach().to(dtype)
        original = model.logits_from_token_logits(token_logits, attention).softmax(-1)  # (B, C)
    logits = _initial_adversary_logits(mask, k, init_scale, noise, generator, seed, dtype)
    mask3 = mask.unsqueeze(1)
    optimizer = _AmsgradAscent(logits, lr)
    attention_floor = attention.clamp_min(1e-30).unsqueeze(1)
    with torch.no_grad():
        for _ in range(steps):
            deadline.check()  # a time budget, if one is set (hf_attn.core.deadline)
            optimizer.step(_adversary_logit_gradient(model, logits, token_logits, attention_floor,
                                                     original, lam, eps))
    return adversary_result(model, logits, mask3, token_logits, attention, original, eps)


@torch.no_grad()
def adversary_result(model, logits: torch.Tensor, mask3: torch.Tensor, token_logits: torch.Tensor,
                     attention: torch.Tensor, original: torch.Tensor, eps: float) -> AdversaryResult:
    """Optimised adversary logits ``(B, k, T)`` → α = softmax over real tokens (``mask3`` (B, 1, T)),
    their ŷ (via ``token_logits``), TVD to the original ŷ ``(B, C)``, JSD to α̂ ``(B, T)`` and the
    ε-max JSD (max JSD over adversaries with TVD ≤ ε, 0 if none). Shared by the single-sequence
    and the sentence-pair adversaries."""
    adv = logits.detach().masked_fill(~mask3, float("-inf")).softmax(-1)
    probabilities = model.logits_from_token_logits(token_logits, adv).softmax(-1)
    output_tvd = tvd(probabilities, original.unsqueeze(1))
    divergence = jsd(adv, attention.unsqueeze(1), mask3)
    feasible = output_tvd <= eps
    eps_max = best_feasible_adversary(output_tvd, divergence, eps).eps_max_jsd
    return AdversaryResult(attention=adv, tvd=output_tvd, jsd=divergence, eps_max_jsd=eps_max,
                           feasible=feasible, probabilities=probabilities)


def _pair_adversary_logit_gradient(model, logits: torch.Tensor, mask3: torch.Tensor,
                                   attention: torch.Tensor, units: torch.Tensor,
                                   original: torch.Tensor, lam: float, eps: float) -> torch.Tensor:
    """∂(relaxed Eq. 1–2 objective)/∂(adversary logits) ``(B, k, T)`` for free logits ``(B, k, T)``,
    premise mask ``(B, 1, T)``, α̂ ``(B, T)``, per-token pre-activations u ``(B, T, K′)`` and ŷ
    ``(B, C)``. The divergence part is the closed form of :func:`_divergence_gradient`; the TVD part
    goes through the pair decoder (autograd on the ``(B, k, K′)`` mixed pre-activations only)."""
    k = logits.shape[1]
    with torch.no_grad():
        adv = logits.masked_fill(~mask3, float("-inf")).softmax(-1)
        log_adv = adv.clamp_min(1e-30).log()
        log_mid0 = (adv + attention.unsqueeze(1)).clamp_min(1e-30).log()
        divergence_grad = _divergence_gradient(log_adv, adv, log_mid0)
        mixed = torch.einsum("bit,btj->bij", adv, units)
    with torch.enable_grad():
        mixed.requires_grad_(True)
        probabilities = model.expand_logits(model.decoder.finish(mixed)).softmax(-1)
        output_tvd = tvd(probabilities, original.unsqueeze(1))  # (B, k)
        (d_mixed,) = torch.autograd.grad(output_tvd.sum(), mixed)
    with torch.no_grad():
        tvd_grad = torch.einsum("bij,btj->bit", d_mixed, units)
        active = (output_tvd.detach() > eps).to(adv.dtype).unsqueeze(-1) * (lam / k)
        grad = divergence_grad - active * tvd_grad
        return adv * (grad - (adv * grad).sum(-1, keepdim=True))  # softmax Jacobian


def pair_adversarial_attention(model, hidden_states, attention, attention_mask, query, k: int = 5,
                               lam: float = 500.0, eps: float = 0.01, steps: int = 500,
                               lr: float = 0.01, seed: int = 0, init_scale: float = 3.0,
                               generator: torch.Generator | None = None,
                               noise: torch.Tensor | None = None) -> AdversaryResult:
    """J&W Alg. 3 / Eq. 1–2 over the premise attention with h and Q fixed; the same objective,
    initialisation and optimiser as :func:`adversarial_attention` (equal to it for the ``"linear"``
    pair decoder, via :func:`hf_attn.methods.pair_query.bind_query`); h ``(B, T, D)``, α̂ and mask
    ``(B, T)``, Q ``(B, D)``. The TVD penalty's gradient goes through the (possibly nonlinear) pair
    decoder: per step, one autograd pass through decoder.finish on the mixed pre-activations
    ``(B, k, K′)`` (exact), then the chain rule to α via the per-token pre-activations u ``(B, T, K′)``."""
    if k < 1 or steps < 0:
        raise ValueError(f"need k >= 1 and steps >= 0, got k={k}, steps={steps}")
    mask = attention_mask.bool()
    dtype = hidden_states.dtype
    with torch.no_grad():
        units = model.token_logits(hidden_states, query).detach()  # (B, T, K′)
        attention = attention.detach().to(dtype)
        original = model.logits_from_token_logits(units, attention).softmax(-1)  # (B, C)
    logits = _initial_adversary_logits(mask, k, init_scale, noise, generator, seed, dtype)
    optimizer = _AmsgradAscent(logits, lr)
    mask3 = mask.unsqueeze(1)
    for _ in range(steps):
        deadline.check()  # a time budget, if one is set (hf_attn.core.deadline)
        optimizer.step(_pair_adversary_logit_gradient(model, logits, mask3, attention, units, original,
                                                      lam, eps))
    return adversary_result(model, logits, mask3, units, attention, original, eps)


__all__ = ["AdversaryResult", "FeasibleAdversary", "adversarial_attention", "adversary_objective",
           "adversary_result", "best_feasible_adversary", "pair_adversarial_attention"]


# ----------------------------------------------------------------------------------------------
# over an adapter (any transformers classifier): the explained rows of one layer


@dataclass
class RowAdversaryResult:
    """k adversaries per instance over an adapter. ``attention`` (B, k, T): the explained (head
    mean, or the chosen head's) row of each adversary, as compared (see ``divergence_on``);
    ``head_rows`` (B, k, H, T): what replaced the layer's query rows; ``tvd`` / ``jsd`` /
    ``feasible`` (B, k); ``eps_max_jsd`` (B,) (max JSD over adversaries with TVD ≤ ε, 0 if none);
    ``probabilities`` (B, k, C); ``jsd_row`` (B, k): the JSD of the full rows (special tokens
    included)."""

    attention: torch.Tensor
    head_rows: torch.Tensor
    tvd: torch.Tensor
    jsd: torch.Tensor
    eps_max_jsd: torch.Tensor
    feasible: torch.Tensor
    probabilities: torch.Tensor
    jsd_row: torch.Tensor | None = None


def restrict_to_content(attention: torch.Tensor, content: torch.Tensor) -> torch.Tensor:
    """Attention ``(…, T)`` restricted to the content tokens (``content`` broadcastable bool) and
    renormalised to sum to 1 there: the distribution over the sentence's own tokens."""
    kept = attention * content.to(attention.dtype)
    return kept / kept.sum(-1, keepdim=True).clamp_min(1e-30)


def adversarial_rows(adapter, batch, forward, k: int = 5, lam: float = 500.0, eps: float = 0.01,
                     steps: int = 500, lr: float = 0.01, init_scale: float = 3.0,
                     generator: torch.Generator | None = None, divergence_on: str = "content") -> RowAdversaryResult:
    """J&W Alg. 3 over an adapter: maximise Σ_i JSD(α(i), α̂) + 1/(k(k−1)) Σ_{i<j} JSD(α(i), α(j))
    − (λ/k) Σ_i max(0, TVD(ŷ(i), ŷ) − ε) (Eq. 1–2, :func:`adversary_objective`) with Adam (amsgrad,
    lr 0.01) for ``steps`` steps.

    Parameterisation: each adversary has free logits per head (``heads="mean"``: every head;
    one head: that head) over the content tokens, initialised at uniform + ``init_scale``·N(0, 1)
    (drawn on the CPU generator, so a seed gives the same start on every device); a head's new
    row keeps its own mass on the special tokens and spreads its content mass by softmax(logits).
    α(i) is the explained row of the result (head mean, or the head); ŷ(i) comes from
    ``adapter.logits_under`` (the exact fast path where it applies). All B·k adversaries are
    optimised together (independent rows; Adam is element-wise).

    ``divergence_on="content"`` (default) compares attention restricted to the content tokens and
    renormalised — the distribution a heatmap shows; ``"row"`` compares the full rows."""
    if divergence_on not in ("content", "row"):
        raise ValueError(f"divergence_on must be 'content' or 'row', got {divergence_on!r}")
    content = batch.content
    rows = forward.head_rows.detach().float()  # (B, H, T)
    heads_mode = adapter.spec.heads
    if getattr(adapter, "exact_model_methods", False):  # the papers' models: the closed-form search
        return _exact_model_rows(adapter, batch, forward, k, lam, eps, steps, lr, init_scale, generator)
    if heads_mode != "mean":
        rows = rows[:, int(heads_mode):int(heads_mode) + 1]
    count, heads, length = rows.shape
    movable = content.unsqueeze(1)  # (B, 1, T)
    fixed = rows * (~movable)  # special tokens keep their mass; pads are 0 already
    mass = (rows * movable).sum(-1, keepdim=True)  # (B, H, 1) content mass per head
    counts = content.sum(1).clamp_min(1).to(rows.dtype)
    noise = torch.randn((count, k, heads, length), generator=generator, dtype=rows.dtype).to(rows.device)
    logits = (-counts.log()).view(count, 1, 1, 1) + init_scale * noise
    logits = logits.masked_fill(~content.view(count, 1, 1, length), -1e4).requires_grad_(True)
    original = forward.probabilities.detach()

    def compared(a):  # (B, ..., T) → what JSD compares
        if divergence_on == "row":
            return a
        return restrict_to_content(a, content.view(count, *([1] * (a.dim() - 2)), length))

    explained_row = forward.attention.detach().float()
    explained = compared(explained_row)

    def build(free):
        spread = free.masked_fill(~content.view(count, 1, 1, length), float("-inf")).softmax(-1)
        spread = torch.nan_to_num(spread, nan=0.0)  # instances without content tokens
        new_rows = fixed.unsqueeze(1) + mass.unsqueeze(1) * spread  # (B, k, H', T)
        return new_rows, new_rows.mean(2)  # per-head rows, explained row (B, k, T)

    def output(new_rows):
        if heads_mode == "mean":
            return adapter.logits_under(batch, new_rows, True, forward)
        return adapter.logits_under(batch, new_rows[:, :, 0], False, forward)

    optimizer = torch.optim.Adam([logits], lr=lr, amsgrad=True, maximize=True)
    for _ in range(steps):
        deadline.check()  # a time budget, if one is set (hf_attn.core.deadline)
        new_rows, alpha = build(logits)
        output_tvd = tvd(output(new_rows).float().softmax(-1), original.unsqueeze(1))
        value = adversary_objective(compared(alpha), explained, output_tvd, lam=lam, eps=eps).sum()
        # autograd.grad: only the logits' gradient (the model's parameters accumulate nothing)
        (logits.grad,) = torch.autograd.grad(value, [logits])
        optimizer.step()
    with torch.no_grad():
        new_rows, alpha = build(logits.detach())
        probabilities = output(new_rows).float().softmax(-1)
        output_tvd = tvd(probabilities, original.unsqueeze(1))
        divergence = jsd(compared(alpha), explained.unsqueeze(1))
        row_divergence = jsd(alpha, explained_row.unsqueeze(1))
        feasible = output_tvd <= eps
        eps_max = torch.where(feasible, divergence, torch.zeros_like(divergence)).max(-1).values
    return RowAdversaryResult(attention=compared(alpha), head_rows=new_rows, tvd=output_tvd, jsd=divergence,
                              eps_max_jsd=eps_max, feasible=feasible, probabilities=probabilities,
                              jsd_row=row_divergence)


def _exact_model_rows(adapter, batch, forward, k, lam, eps, steps, lr, init_scale, generator) -> RowAdversaryResult:
    """:func:`adversarial_rows` on an adapter over the papers' one-attention models
    (``adapter.exact_model_methods``): the same objective and optimiser, run by
    :func:`adversarial_attention` (closed-form gradient from the cached states, no autograd; a sentence
    pair's batch by :func:`pair_adversarial_attention`, through the pair decoder with Q fixed). The
    one head's row is the model's α over its attended tokens (J&W's markers, if any, get no
    attention), so the content and row divergences are the same number. The start is drawn as
    :func:`adversarial_rows` draws it (``(B, k, 1, T)`` from ``generator``)."""
    content = batch.content
    count, length = content.shape
    noise = torch.randn((count, k, 1, length), generator=generator, dtype=torch.float32)[:, :, 0]
    options = dict(k=k, lam=lam, eps=eps, steps=steps, lr=lr, init_scale=init_scale, noise=noise)
    if isinstance(batch, PairBatch):  # a sentence pair: h and the hypothesis query Q cached, Q fixed
        hidden, query = forward.cache
        result = pair_adversarial_attention(adapter.model, hidden, forward.attention, content, query, **options)
    else:
        result = adversarial_attention(adapter.model, forward.cache, forward.attention, content, **options)
    return RowAdversaryResult(attention=result.attention, head_rows=result.attention.unsqueeze(2), tvd=result.tvd,
                              jsd=result.jsd, eps_max_jsd=result.eps_max_jsd, feasible=result.feasible,
                              probabilities=result.probabilities, jsd_row=result.jsd)
