"""Jain & Wallace's battery (J&W 2019 §4) on BERT-family classifiers (issue 18, SPEC §11).

The explained attention is the ``[CLS]`` query row of one layer (default the last), averaged over
heads or one head (:class:`hf_attn.models.transformer_attention.TransformerAttentionSpec`). All
analyses run on **word pieces** and only over the *content* pieces (not ``[CLS]``/``[SEP]``/pads):
those are what τ ranks, what a permutation shuffles and what leave-one-out deletes; the special
tokens keep their own attention mass in every intervention, so the row still sums to 1. The
per-instance ``attention`` arrays are the explained row over the content pieces, renormalised to
sum to 1 (the specials' share is reported as ``special_token_mass``).

- gradient (Alg. 1): |Σ_d ∂ŷ/∂e_t,d · e_t,d| on the word-piece embeddings, ŷ = predicted-class
  probability, with the explained ``[CLS]`` row detached through the attention-interface override;
- leave-one-out: TVD(ŷ(x₋t), ŷ(x)) with content piece t deleted (sequence shortened), every
  deletion of a batch in one padded forward;
- Kendall τ of attention vs gradient / LOO, gradient vs LOO, and of attention vs rollout
  (Abnar & Zuidema 2020), with :data:`hf_attn.analysis.jw.summary.TIE_TOLERANCE`; per-layer τ
  (the ``[CLS]`` row of every layer, head mean) vs gradient and LOO;
- permutation (Alg. 2): the same random permutation of the content pieces applied to every
  head's ``[CLS]`` row of the chosen layer (so the head mean is permuted), median output TVD;
- adversary (Alg. 3, Eq. 1–2): k adversaries per instance, each a full set of the chosen layer's
  ``[CLS]`` rows (every head; one head for ``heads=int``) with the content mass redistributed by
  free logits; JSD is measured on the explained (head-mean) row restricted to the content pieces
  and renormalised (the distribution a word-piece heatmap shows), the output on the model. On the
  last layer both run on the exact cheap path (cached V and residual,
  :func:`hf_attn.models.transformer_attention.cls_logits_from_attention`); on other layers
  through the full forward with the override.

:func:`transformer_jw_battery_runner` writes ``results.json`` with the BiLSTM battery's top-level
keys, ``instances.jsonl`` and the figures (J&W Figs 2–5 + τ per layer).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from hf_attn.core.measures import jsd, tvd
from hf_attn.models.transformer_attention import (
    ClsAttentionOverride, ClsReadout, TransformerAttentionSpec, attention_rollout, cls_logits_from_attention,
    encoder_layers, model_forward)


# ----------------------------------------------------------------------------------------------
# batching helpers


def content_mask(input_ids: torch.Tensor, attention_mask: torch.Tensor, special_ids) -> torch.Tensor:
    """``(B, T)`` bool: real (non-pad) positions that are not special tokens — the word pieces the
    analyses rank, permute and delete."""
    special = torch.as_tensor(sorted(set(int(i) for i in special_ids)), dtype=input_ids.dtype)
    return attention_mask.bool() & ~torch.isin(input_ids, special)


def pad_rows(sequences, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """List of id lists → right-padded ``(B, T)`` ids and attention mask (int64)."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, :len(s)] = torch.as_tensor(s, dtype=torch.long)
        mask[i, :len(s)] = 1
    return ids, mask


def _probabilities(logits: torch.Tensor) -> torch.Tensor:
    return logits.float().softmax(-1)


# ----------------------------------------------------------------------------------------------
# forward: attention, rollout, per-layer rows


@dataclass
class TransformerForward:
    """One batch's unmodified forward: ``probabilities`` (B, C), ``attention`` (B, T) (the explained
    row), ``head_rows`` (B, H, T) (the chosen layer's ``[CLS]`` rows, all heads), ``layer_rows``
    (B, L, T) (head-mean ``[CLS]`` row of every layer), ``rollout`` (B, T) (``[CLS]`` row of the
    rollout) and the last layer's :class:`ClsReadout` (cheap path)."""

    probabilities: torch.Tensor
    attention: torch.Tensor
    head_rows: torch.Tensor
    layer_rows: torch.Tensor
    rollout: torch.Tensor
    readout: ClsReadout


@torch.no_grad()
def transformer_forward(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        spec: TransformerAttentionSpec = TransformerAttentionSpec()) -> TransformerForward:
    """The forward the battery starts from (see :class:`TransformerForward`), in one model call."""
    from hf_attn.models.transformer_attention import cache_cls_readout

    readout, output = cache_cls_readout(model, input_ids, attention_mask)
    attentions = output.attentions
    layer = spec.layer_index(len(attentions))
    head_rows = attentions[layer][:, :, 0, :]
    return TransformerForward(
        probabilities=_probabilities(output.logits), attention=spec.select(attentions), head_rows=head_rows,
        layer_rows=torch.stack([a[:, :, 0, :].mean(1) for a in attentions], 1),
        rollout=attention_rollout(attentions, attention_mask)[:, 0], readout=readout)


def logits_under_cls_attention(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                               spec: TransformerAttentionSpec, weights: torch.Tensor, per_head: bool,
                               readout: ClsReadout | None = None, row_budget: int = 4096) -> torch.Tensor:
    """Logits ``(B, R, C)`` with the chosen layer's ``[CLS]`` row replaced by each of R candidate
    rows ``weights`` (``(B, R, H, T)`` with ``per_head``, else ``(B, R, T)`` shared by the heads or
    only head ``spec.heads`` when it is an int). The "logits from attention" callable of the
    permutation and the adversary: the cheap exact path on the last layer (``readout`` given),
    else the full forward with the override, the B·R rows in chunks of ``row_budget``."""
    layers = len(encoder_layers(model))
    layer = spec.layer_index(layers)
    head = None if per_head or spec.heads == "mean" else int(spec.heads)
    if layer == layers - 1 and readout is not None:
        return cls_logits_from_attention(model, readout, weights, per_head=per_head, head=head)
    batch, rows = weights.shape[:2]
    flat = weights.reshape(batch * rows, *weights.shape[2:])
    ids = input_ids.repeat_interleave(rows, 0)
    mask = attention_mask.repeat_interleave(rows, 0)
    out = []
    for start in range(0, len(ids), row_budget):
        stop = start + row_budget
        override = ClsAttentionOverride(layer=layer, weights=flat[start:stop], head=head)
        out.append(model_forward(model, ids[start:stop], mask[start:stop], override).logits)
    return torch.cat(out).view(batch, rows, -1)


# ----------------------------------------------------------------------------------------------
# 1. gradient (Alg. 1) and 2. leave-one-out


def gradient_importance(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        spec: TransformerAttentionSpec = TransformerAttentionSpec()) -> torch.Tensor:
    """J&W Alg. 1 on word pieces: g_t = |Σ_d (∂ŷ/∂e_t,d) · e_t,d| ``(B, T)`` (0 on pads), e_t the
    word-piece embedding (before position/type embeddings and LayerNorm), ŷ the predicted class's
    probability; the explained ``[CLS]`` row (spec's layer; every head for ``heads="mean"``, else
    that head) is detached through the
    attention-interface override, so no gradient flows through the attention being explained. One
    backward for the batch (instances are independent)."""
    embeddings = model.base_model.embeddings.word_embeddings(input_ids).detach().requires_grad_(True)
    layer = spec.layer_index(len(encoder_layers(model)))
    head = None if spec.heads == "mean" else int(spec.heads)
    override = ClsAttentionOverride(layer=layer, detach=True, head=head)
    with torch.enable_grad():
        logits = model_forward(model, None, attention_mask, override, inputs_embeds=embeddings).logits
        probabilities = logits.softmax(-1)
        predicted = probabilities.detach().argmax(-1, keepdim=True)
        (grad,) = torch.autograd.grad(probabilities.gather(1, predicted).sum(), embeddings)
    return (grad * embeddings.detach()).sum(-1).abs() * attention_mask.to(grad.dtype)


def deletion_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor, content: torch.Tensor):
    """Every single-piece deletion of the batch as one padded batch: ``(ids (N, T−1), mask (N, T−1),
    instance (N,), position (N,))``, one row per content position (instance, position), that piece
    removed and the rest shifted left (the sequence is one shorter, not masked)."""
    instance, position = content.nonzero(as_tuple=True)
    steps = input_ids.shape[1]
    j = torch.arange(steps - 1).unsqueeze(0)
    source = j + (j >= position.unsqueeze(1)).long()  # skip the deleted position
    return input_ids[instance].gather(1, source), attention_mask[instance].gather(1, source), instance, position


@torch.no_grad()
def leave_one_out(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, content: torch.Tensor,
                  probabilities: torch.Tensor, token_budget: int = 16384) -> torch.Tensor:
    """Leave-one-out importance ``(B, T)``: TVD(ŷ(x₋t), ŷ(x)) for each content word piece t (0
    elsewhere), ``probabilities`` (B, C) = ŷ(x). All deletions of the batch are one padded batch
    (:func:`deletion_rows`), run in chunks of ``token_budget`` padded tokens, each chunk trimmed
    to its longest row."""
    ids, mask, instance, position = deletion_rows(input_ids, attention_mask, content)
    out = torch.zeros(content.shape, dtype=torch.float32)
    if len(ids) == 0:
        return out
    lengths = mask.sum(1)
    order = lengths.argsort()
    rows = max(1, token_budget // max(int(lengths.max()), 1))
    for start in range(0, len(order), rows):
        chunk = order[start:start + rows]
        width = int(lengths[chunk].max())
        p = _probabilities(model_forward(model, ids[chunk, :width], mask[chunk, :width]).logits)
        out[instance[chunk], position[chunk]] = tvd(p, probabilities[instance[chunk]]).float()
    return out


# ----------------------------------------------------------------------------------------------
# 3. permutation (Alg. 2)


def content_permutations(content: torch.Tensor, num_permutations: int,
                         generator: torch.Generator | None = None) -> torch.Tensor:
    """``(B, P, T)`` index tensors: each row permutes the content positions of its instance among
    themselves (uniformly at random) and maps every other position (specials, pads) to itself."""
    batch, steps = content.shape
    keys = torch.rand((batch, num_permutations, steps), generator=generator)
    positions = torch.arange(steps)
    order = torch.where(content.unsqueeze(1), keys, torch.full_like(keys, 2.0)).argsort(-1)  # content first
    slots = torch.where(content, positions, steps + positions).argsort(-1)  # content positions, then the rest
    # the j-th content slot receives the j-th shuffled content position; the rest stay in place
    permutation = positions.expand(batch, num_permutations, steps).clone()
    count = content.sum(1)  # (B,)
    take = positions.unsqueeze(0) < count.unsqueeze(1)  # (B, T): the first `count` slots
    target = slots.unsqueeze(1).expand_as(order)
    permutation.scatter_(-1, target, torch.where(take.unsqueeze(1), order, target))
    return permutation


@torch.no_grad()
def permutation_tvd(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, forward: TransformerForward,
                    content: torch.Tensor, spec: TransformerAttentionSpec = TransformerAttentionSpec(),
                    num_permutations: int = 100, generator: torch.Generator | None = None,
                    permutations: torch.Tensor | None = None) -> torch.Tensor:
    """J&W Alg. 2: TVD(ŷ(α_p), ŷ) ``(B, P)`` for P random permutations of the content pieces of
    the chosen layer's ``[CLS]`` row (the same permutation for every head: the head mean is
    permuted; ``heads=int``: only that head's row), everything else unchanged. Δŷ_med is the
    median over P. ``permutations`` (B, P, T) overrides the draw."""
    if permutations is None:
        permutations = content_permutations(content, num_permutations, generator)
    batch, count, steps = permutations.shape
    rows = forward.head_rows  # (B, H, T)
    if spec.heads == "mean":
        index = permutations.unsqueeze(2).expand(batch, count, rows.shape[1], steps)
        weights = rows.unsqueeze(1).expand(batch, count, *rows.shape[1:]).gather(-1, index)  # (B, P, H, T)
        per_head = True
    else:
        weights = rows[:, int(spec.heads)].unsqueeze(1).expand(batch, count, steps).gather(-1, permutations)
        per_head = False
    logits = logits_under_cls_attention(model, input_ids, attention_mask, spec, weights, per_head, forward.readout)
    return tvd(_probabilities(logits), forward.probabilities.unsqueeze(1))


# ----------------------------------------------------------------------------------------------
# 4. adversarial attention (Alg. 3, Eq. 1–2)


def _adversary_objective():
    """J&W Eq. 1–2's relaxed objective (the one the BiLSTM adversary is tested against)."""
    from hf_attn.methods.adversary import adversary_objective

    return adversary_objective


@dataclass
class TransformerAdversaryResult:
    """k adversaries per instance. ``attention`` (B, k, T): the explained (head-mean, or the
    chosen head's) row of each adversary; ``head_rows`` (B, k, H, T): what replaced the layer's
    ``[CLS]`` rows; ``tvd`` / ``jsd`` / ``feasible`` (B, k); ``eps_max_jsd`` (B,) (max JSD over
    adversaries with TVD ≤ ε, 0 if none); ``probabilities`` (B, k, C)."""

    attention: torch.Tensor
    head_rows: torch.Tensor
    tvd: torch.Tensor
    jsd: torch.Tensor
    eps_max_jsd: torch.Tensor
    feasible: torch.Tensor
    probabilities: torch.Tensor
    jsd_row: torch.Tensor | None = None


def restrict_to_content(attention: torch.Tensor, content: torch.Tensor) -> torch.Tensor:
    """Attention ``(…, T)`` restricted to the content pieces (``content`` broadcastable bool) and
    renormalised to sum to 1 there: the distribution over the sentence's word pieces."""
    kept = attention * content.to(attention.dtype)
    return kept / kept.sum(-1, keepdim=True).clamp_min(1e-30)


def adversarial_attention(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                          forward: TransformerForward, content: torch.Tensor,
                          spec: TransformerAttentionSpec = TransformerAttentionSpec(), k: int = 5,
                          lam: float = 500.0, eps: float = 0.01, steps: int = 500, lr: float = 0.01,
                          init_scale: float = 3.0, generator: torch.Generator | None = None,
                          divergence_on: str = "content") -> TransformerAdversaryResult:
    """J&W Alg. 3: maximise Σ_i JSD(α(i), α̂) + 1/(k(k−1)) Σ_{i<j} JSD(α(i), α(j)) − (λ/k) Σ_i
    max(0, TVD(ŷ(i), ŷ) − ε) with Adam (amsgrad, lr 0.01) for ``steps`` steps.

    Parameterisation: each adversary has free logits per head (``heads="mean"``: all H heads;
    ``heads=int``: that head) over the content pieces, initialised at uniform + ``init_scale``·N(0, 1);
    a head's new row keeps its own mass on the special tokens and spreads its content mass m_h by
    softmax(logits). α(i) is the explained row of the result (head mean, or the head), so JSD and
    the diversity term compare what a reader of the attention sees; ŷ(i) comes from
    :func:`logits_under_cls_attention` (cheap exact path on the last layer). All B·k adversaries
    are optimised together (independent rows; Adam is element-wise).

    ``divergence_on="content"`` (default) compares attention restricted to the content pieces and
    renormalised — the distribution over the sentence's pieces a heatmap shows, comparable with the
    BiLSTM's attention over words; the special tokens' (fixed) mass would otherwise cap the JSD.
    ``"row"`` compares the full rows (specials included). ``attention`` and ``jsd`` of the result
    follow this choice; ``jsd_row`` is always the full-row JSD."""
    objective = _adversary_objective()
    rows = forward.head_rows.detach()  # (B, H, T)
    if spec.heads != "mean":
        rows = rows[:, int(spec.heads):int(spec.heads) + 1]
    batch, heads, length = rows.shape
    movable = content.unsqueeze(1)  # (B, 1, T)
    fixed = rows * (~movable)  # specials keep their mass; pads are 0 already
    mass = (rows * movable).sum(-1, keepdim=True)  # (B, H, 1) content mass per head
    counts = content.sum(1).clamp_min(1).to(rows.dtype)
    noise = torch.randn((batch, k, heads, length), generator=generator, dtype=rows.dtype)
    logits = (-counts.log()).view(batch, 1, 1, 1) + init_scale * noise
    logits = logits.masked_fill(~content.view(batch, 1, 1, length), -1e4).requires_grad_(True)
    original = forward.probabilities.detach()
    if divergence_on not in ("content", "row"):
        raise ValueError(f"divergence_on must be 'content' or 'row', got {divergence_on!r}")

    def compared(a):  # (B, ..., T) → what JSD compares
        if divergence_on == "row":
            return a
        return restrict_to_content(a, content.view(batch, *([1] * (a.dim() - 2)), length))

    explained_row = forward.attention.detach()
    explained = compared(explained_row)

    def build(free):
        spread = free.masked_fill(~content.view(batch, 1, 1, length), float("-inf")).softmax(-1)
        spread = torch.nan_to_num(spread, nan=0.0)  # instances without content pieces
        new_rows = fixed.unsqueeze(1) + mass.unsqueeze(1) * spread  # (B, k, H', T)
        return new_rows, new_rows.mean(2)  # per-head rows, explained row (B, k, T)

    def output(new_rows):
        if spec.heads == "mean":
            return logits_under_cls_attention(model, input_ids, attention_mask, spec, new_rows, True, forward.readout)
        return logits_under_cls_attention(model, input_ids, attention_mask, spec, new_rows[:, :, 0], False,
                                          forward.readout)

    optimizer = torch.optim.Adam([logits], lr=lr, amsgrad=True, maximize=True)
    for _ in range(steps):
        new_rows, alpha = build(logits)
        output_tvd = tvd(_probabilities(output(new_rows)), original.unsqueeze(1))
        value = objective(compared(alpha), explained, output_tvd, lam=lam, eps=eps).sum()
        # autograd.grad: only the logits' gradient (the model's parameters accumulate nothing)
        (logits.grad,) = torch.autograd.grad(value, [logits])
        optimizer.step()
    with torch.no_grad():
        new_rows, alpha = build(logits.detach())
        probabilities = _probabilities(output(new_rows))
        output_tvd = tvd(probabilities, original.unsqueeze(1))
        divergence = jsd(compared(alpha), explained.unsqueeze(1))
        row_divergence = jsd(alpha, explained_row.unsqueeze(1))
        feasible = output_tvd <= eps
        eps_max = torch.where(feasible, divergence, torch.zeros_like(divergence)).max(-1).values
    return TransformerAdversaryResult(attention=compared(alpha), head_rows=new_rows, tvd=output_tvd,
                                      jsd=divergence, eps_max_jsd=eps_max, feasible=feasible,
                                      probabilities=probabilities, jsd_row=row_divergence)


# ----------------------------------------------------------------------------------------------
# the battery over a split


@dataclass
class TransformerJWSettings:
    """Parameters of :func:`run_transformer_jw_battery` (recorded in results.json); J&W §4 / code
    defaults, plus which attention is explained."""

    layer: int = -1
    heads: str | int = "mean"
    num_permutations: int = 100
    k: int = 5
    lam: float = 500.0
    eps: float = 0.01
    steps: int = 500
    lr: float = 0.01
    init_scale: float = 3.0
    seed: int = 0
    alpha: float = 0.05
    tie_tolerance: float = 1e-6  # hf_attn.analysis.jw.summary.TIE_TOLERANCE
    divergence_on: str = "content"  # the adversary's JSD: content pieces renormalised, or the full "row"
    batch_size: int = 64  # instances per batch (forward, gradient, permutation)
    adversary_batch_size: int = 256  # instances per adversary batch (B·k rows per step)
    loo_token_budget: int = 16384
    max_length: int = 512
    num_threads: int | None = None

    @property
    def spec(self) -> TransformerAttentionSpec:
        return TransformerAttentionSpec(layer=self.layer, heads=self.heads)


def _cut(values: torch.Tensor, content: torch.Tensor) -> list[np.ndarray]:
    """``(B, …, T)`` → per instance ``(…, n_content)`` float64 arrays (content positions only)."""
    keep = content.numpy()
    return [v[..., k] for v, k in zip(values.double().numpy(), keep)]


def run_transformer_jw_battery(model, tokenizer, texts, labels=None, settings: TransformerJWSettings | None = None,
                               progress: bool = True) -> tuple[dict, dict]:
    """The whole J&W battery on ``texts`` → ``(per-instance results, summary)``. Texts are
    tokenized (fast tokenizer; truncated to ``max_length`` pieces), sorted by length and batched;
    every analysis is batched over instances (and permutations / adversaries as rows).

    Long on purpose, like the BiLSTM battery's batch loop: one pass per batch through the five
    analyses in J&W's order, each a call into this module's batched functions, then the summaries."""
    settings = settings or TransformerJWSettings()
    spec = settings.spec
    spec.validate(model.config.num_attention_heads)
    texts = list(texts)
    encoding = tokenizer(texts, truncation=True, max_length=settings.max_length)
    encoded = encoding["input_ids"]
    word_ids = [encoding.word_ids(i) for i in range(len(texts))]
    lengths = np.array([len(e) for e in encoded])
    order = np.argsort(lengths, kind="stable")
    model.eval()
    previous = torch.get_num_threads()
    if settings.num_threads:
        torch.set_num_threads(settings.num_threads)
    timings: dict[str, float] = {}

    def timed(name, fn):
        start = time.perf_counter()
        value = fn()
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
        return value

    per: dict[int, dict] = {}
    started = time.perf_counter()
    special = tokenizer.all_special_ids
    try:
        batches = [order[i:i + settings.batch_size] for i in range(0, len(order), settings.batch_size)]
        for number, rows in enumerate(batches):
            ids, mask = pad_rows([encoded[i] for i in rows], tokenizer.pad_token_id or 0)
            content = content_mask(ids, mask, special)
            fwd = timed("forward", lambda: transformer_forward(model, ids, mask, spec))
            grad = timed("gradient", lambda: gradient_importance(model, ids, mask, spec))
            loo = timed("leave_one_out", lambda: leave_one_out(model, ids, mask, content, fwd.probabilities,
                                                               settings.loo_token_budget))
            generator = torch.Generator().manual_seed(settings.seed * 1_000_003 + 2 * number)
            perm = timed("permutation", lambda: permutation_tvd(model, ids, mask, fwd, content, spec,
                                                                 settings.num_permutations, generator))
            # the explained attention over the content pieces, renormalised (τ is unaffected; the
            # heatmaps, max-attention bins and the adversary's JSD compare this distribution)
            per_batch = {"attention": _cut(restrict_to_content(fwd.attention, content), content),
                         "gradient": _cut(grad, content),
                         "loo": _cut(loo, content), "rollout": _cut(fwd.rollout, content),
                         "layer_rows": _cut(fwd.layer_rows, content),
                         "probabilities": list(fwd.probabilities.double().numpy()),
                         "permutation_tvd": list(perm.double().numpy()),
                         "special_mass": list((fwd.attention * (mask.bool() & ~content)).sum(-1).double().numpy())}
            for j, i in enumerate(rows):
                per[int(i)] = {name: values[j] for name, values in per_batch.items()}
                per[int(i)]["content"] = content[j, :int(mask[j].sum())].numpy()
            # the adversary in larger batches (its cost is per step, not per instance)
            if progress:
                print(f"\rJ&W transformer battery: batch {number + 1}/{len(batches)}", end="", flush=True)
        adversary_batches = [order[i:i + settings.adversary_batch_size]
                             for i in range(0, len(order), settings.adversary_batch_size)]
        for number, rows in enumerate(adversary_batches):
            ids, mask = pad_rows([encoded[i] for i in rows], tokenizer.pad_token_id or 0)
            content = content_mask(ids, mask, special)
            fwd = transformer_forward(model, ids, mask, spec)
            generator = torch.Generator().manual_seed(settings.seed * 1_000_003 + 2 * number + 1)
            adv = timed("adversary", lambda: adversarial_attention(
                model, ids, mask, fwd, content, spec, k=settings.k, lam=settings.lam, eps=settings.eps,
                steps=settings.steps, lr=settings.lr, init_scale=settings.init_scale, generator=generator,
                divergence_on=settings.divergence_on))
            cut = _cut(adv.attention, content)
            for j, i in enumerate(rows):
                per[int(i)].update(adversary_attention=cut[j], adversary_tvd=adv.tvd[j].double().numpy(),
                                   adversary_jsd=adv.jsd[j].double().numpy(),
                                   adversary_jsd_row=adv.jsd_row[j].double().numpy(),
                                   eps_max_jsd=float(adv.eps_max_jsd[j]),
                                   adversary_probabilities=adv.probabilities[j].double().numpy())
            if progress:
                print(f"\rJ&W transformer battery: adversary batch {number + 1}/{len(adversary_batches)}",
                      end="", flush=True)
        if progress:
            print()
    finally:
        torch.set_num_threads(previous)
    total = time.perf_counter() - started
    results = {name: [per[i][name] for i in range(len(texts))] for name in per[0]}
    results["input_ids"] = [np.asarray(e)[per[i]["content"]] for i, e in enumerate(encoded)]
    results["word_ids"] = [[w for w, c in zip(word_ids[i], per[i]["content"]) if c] for i in range(len(texts))]
    results["labels"] = None if labels is None else np.asarray(list(labels), dtype=np.int64)
    summary = transformer_summary(results, settings, total, timings, model.config.num_hidden_layers)
    return results, summary


def transformer_summary(results: dict, settings: TransformerJWSettings, total: float, timings: dict,
                        num_layers: int) -> dict:
    """J&W Table 2 / permutation / adversary summaries (the BiLSTM battery's keys, computed by
    :mod:`hf_attn.analysis.jw.summary`) over the content word pieces, plus the rollout τ and the
    per-layer τ."""
    from hf_attn.analysis.jw.summary import adversary_summary, correlation_summary, permutation_summary

    probabilities = np.stack(results["probabilities"])
    predictions = probabilities.argmax(-1)
    num_classes = probabilities.shape[1]
    lengths = np.array([len(a) for a in results["attention"]])
    max_attention = np.array([float(a.max()) if len(a) else 0.0 for a in results["attention"]])
    ties = settings.tie_tolerance

    def corr(x, y):
        return correlation_summary(x, y, predictions, num_classes, settings.alpha, tie_tolerance=ties)

    summary = {
        "num_instances": len(lengths), "num_classes": num_classes,
        "length": {"mean": float(lengths.mean()), "max": int(lengths.max()), "single_token": int((lengths < 2).sum()),
                   "unit": "content word pieces ([CLS]/[SEP] excluded)"},
        "predicted_class_counts": np.bincount(predictions, minlength=num_classes).tolist(),
        "tau_gradient": corr(results["attention"], results["gradient"]),
        "tau_loo": corr(results["attention"], results["loo"]),
        "tau_gradient_loo": corr(results["gradient"], results["loo"]),
        "permutation": permutation_summary(np.stack(results["permutation_tvd"]), max_attention, predictions,
                                           num_classes, lengths=lengths),
        "adversary": adversary_summary(results["adversary_tvd"], results["adversary_jsd"], max_attention,
                                       predictions, settings.eps, num_classes, lengths=lengths),
        "tau_rollout": corr(results["attention"], results["rollout"]),
        "tau_rollout_gradient": corr(results["rollout"], results["gradient"]),
        "tau_rollout_loo": corr(results["rollout"], results["loo"]),
        "adversary_row_jsd": {"eps_max_mean": _eps_max_mean(results["adversary_tvd"], results["adversary_jsd_row"],
                                                            settings.eps, lengths),
                              "note": "ε-max JSD of the full [CLS] rows (specials included)"},
        "special_token_mass": {"mean": float(np.mean(results["special_mass"])),
                               "note": "attention of the explained [CLS] row on [CLS]/[SEP] (not ranked)"},
    }
    from hf_attn.analysis.jw.summary import kendall_per_instance

    per_layer = []
    for layer in range(num_layers):
        rows = [r[layer] for r in results["layer_rows"]]
        entry = {"layer": layer}
        for name, other in (("tau_gradient", results["gradient"]), ("tau_loo", results["loo"])):
            k = kendall_per_instance(rows, other, tie_tolerance=ties)
            entry[name] = float(np.nanmean(np.where(k["valid"], k["tau"], np.nan)))
            entry[name + "_fraction_significant"] = float((k["pvalue"][k["valid"]] < settings.alpha).mean())
        per_layer.append(entry)
    summary["per_layer"] = per_layer
    summary["seconds"] = {"total": total, **timings}
    if results.get("labels") is not None:
        summary["accuracy"] = float((predictions == results["labels"]).mean())
    return summary


def _eps_max_mean(adversary_tvd, adversary_jsd, eps: float, lengths: np.ndarray) -> float | None:
    """Mean over instances with ≥ 2 content pieces of the ε-max JSD (0 where no adversary is feasible)."""
    values = [float(np.where(t <= eps, j, 0.0).max()) for t, j, n in zip(adversary_tvd, adversary_jsd, lengths)
              if n >= 2]
    return float(np.mean(values)) if values else None


# ----------------------------------------------------------------------------------------------
# figures and the runner


def per_layer_figure(summary: dict, path: str, title: str = "") -> str:
    """τ(attention, gradient) and τ(attention, LOO) per layer ([CLS] row, head mean), with the
    rollout's τ as dashed lines; saved atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hf_attn.core.io import save_figure_atomic

    layers = [e["layer"] + 1 for e in summary["per_layer"]]
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    ax.plot(layers, [e["tau_gradient"] for e in summary["per_layer"]], "o-", color="#2980b9",
            label="τ(attention, gradient)")
    ax.plot(layers, [e["tau_loo"] for e in summary["per_layer"]], "s-", color="#c0392b", label="τ(attention, LOO)")
    ax.axhline(summary["tau_rollout_gradient"]["overall"]["mean"], color="#2980b9", ls="--", lw=1,
               label="τ(rollout, gradient)")
    ax.axhline(summary["tau_rollout_loo"]["overall"]["mean"], color="#c0392b", ls="--", lw=1, label="τ(rollout, LOO)")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("layer ([CLS] attention row, mean over heads)")
    ax.set_ylabel("mean Kendall τ")
    ax.set_xticks(layers)
    ax.set_title(title or "Attention vs importance by layer")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    try:
        return save_figure_atomic(fig, path, dpi=130)
    finally:
        plt.close(fig)


def _jw_instances(results: dict, summary: dict):
    """The per-instance results as the BiLSTM battery's ``JWInstances`` (for its figures)."""
    from hf_attn.analysis.jw.common import JWInstances

    instances = JWInstances(
        input_ids=results["input_ids"], labels=results["labels"], probabilities=np.stack(results["probabilities"]),
        attention=results["attention"], gradient=results["gradient"], loo=results["loo"],
        permutation_tvd=np.stack(results["permutation_tvd"]), adversary_attention=results["adversary_attention"],
        adversary_probabilities=np.stack(results["adversary_probabilities"]),
        adversary_tvd=np.stack(results["adversary_tvd"]), adversary_jsd=np.stack(results["adversary_jsd"]),
        eps_max_jsd=np.array(results["eps_max_jsd"]))
    instances.predictions = instances.probabilities.argmax(-1)
    return instances


def _instance_rows(results: dict, summary: dict, tokenizer):
    from hf_attn.models.transformer_attention import merge_word_pieces

    taus = {name: summary[key]["tau"] for name, key in (("attention_gradient", "tau_gradient"),
                                                        ("attention_loo", "tau_loo"),
                                                        ("gradient_loo", "tau_gradient_loo"),
                                                        ("attention_rollout", "tau_rollout"))}
    for i in range(len(results["attention"])):
        ids, words = results["input_ids"][i], results["word_ids"][i]
        yield {"index": i, "tokens": tokenizer.convert_ids_to_tokens([int(t) for t in ids]),
               "word_ids": words,
               "label": None if results["labels"] is None else int(results["labels"][i]),
               "prediction": int(np.argmax(results["probabilities"][i])),
               "probabilities": results["probabilities"][i].tolist(),
               "attention": results["attention"][i].tolist(), "gradient": results["gradient"][i].tolist(),
               "loo": results["loo"][i].tolist(), "rollout": results["rollout"][i].tolist(),
               "word_attention": merge_word_pieces(results["attention"][i], words).tolist() if words else [],
               "permutation_tvd_median": float(np.median(results["permutation_tvd"][i])),
               "adversary_tvd": results["adversary_tvd"][i].tolist(),
               "adversary_jsd": results["adversary_jsd"][i].tolist(),
               "eps_max_jsd": float(results["eps_max_jsd"][i]),
               "kendall_tau": {n: (None if not np.isfinite(t[i]) else float(t[i])) for n, t in taus.items()}}


def transformer_jw_battery_runner(model_dir: str, output_dir: str, texts=None, labels=None,
                                  settings: TransformerJWSettings | None = None, dataset: str | None = None,
                                  split: str = "test", max_instances: int | None = None,
                                  label_names=None, progress: bool = True, text_column: str | None = None,
                                  label_column: str | None = None) -> dict:
    """``hf-attn analyze DIR --battery jw`` for a BERT-family classifier folder (or Hub id): run the
    battery on ``texts`` (default: the data :func:`load_analysis_data` finds for ``dataset`` /
    ``split`` / ``text_column`` / ``label_column``, first ``max_instances``) and write
    ``OUT/results.json`` (the BiLSTM battery's top-level keys; atomic), ``OUT/instances.jsonl`` and
    the figures (J&W Figs 2–5 via :func:`hf_attn.analysis.jw.figures.write_jw_figures`, plus
    ``fig_tau_per_layer.png``)."""
    from hf_attn.core.io import write_json_atomic, write_jsonl_atomic
    from hf_attn.analysis.jw.summary import PUBLISHED_SST, strip_arrays
    from hf_attn.models.transformer_attention import load_transformer_classifier
    from hf_attn.core.environment import environment_versions
    from hf_attn.training.transformer import read_transformer_run

    settings = settings or TransformerJWSettings()
    run = read_transformer_run(model_dir) if os.path.isdir(model_dir) else None
    if texts is None:  # the data first: a bad --dataset / column fails before the model loads
        texts, labels, label_names, name = load_analysis_data(model_dir, dataset, split, text_column,
                                                              label_column)
        dataset, split = name, analysis_split(dataset, split)
    model, tokenizer = load_transformer_classifier(model_dir)
    if max_instances:
        texts = texts[:max_instances]
        labels = None if labels is None else labels[:max_instances]
    os.makedirs(output_dir, exist_ok=True)
    results, summary = run_transformer_jw_battery(model, tokenizer, texts, labels, settings, progress)
    figures = {"fig_tau_per_layer": per_layer_figure(summary, os.path.join(output_dir, "fig_tau_per_layer.png"),
                                                     f"{os.path.basename(os.path.normpath(model_dir))}: τ by layer")}
    instances = _jw_instances(results, summary)
    if instances is not None:
        try:
            from hf_attn.analysis.jw.figures import write_jw_figures

            figures |= write_jw_figures(instances, summary, output_dir, tokenizer, label_names,
                                        model_name=f"{model.config.model_type}, {settings.spec.describe()}")
        except (ImportError, KeyError, ValueError) as error:  # figures are extras; say why they are missing
            figures["error"] = f"J&W figures not written: {error}"
    write_jsonl_atomic(os.path.join(output_dir, "instances.jsonl"), _instance_rows(results, summary, tokenizer))
    record = {
        "battery": "jw", "paper": "Jain & Wallace 2019, Attention is not Explanation, §4 (on a transformer)",
        "model_dir": os.path.abspath(model_dir) if os.path.isdir(model_dir) else model_dir,
        "dataset": dataset, "split": split, "label_names": label_names,
        "model": {"encoder": "transformer", "architecture": type(model).__name__, "model_type": model.config.model_type,
                  "attention": settings.spec.describe(), "variant": "base",
                  "num_layers": model.config.num_hidden_layers, "num_heads": model.config.num_attention_heads,
                  "base_model": run["settings"]["base_model"] if run else None},
        "attention_spec": {"layer": settings.layer, "heads": settings.heads, "query": "[CLS]",
                           "units": "word pieces (content only; [CLS]/[SEP] keep their mass, are not ranked)",
                           "rollout": "Abnar & Zuidema 2020 (½A + ½I, head mean, product over layers)"},
        "parameters": asdict(settings) | {"max_instances": max_instances},
        "summary": strip_arrays(summary),
        "published": PUBLISHED_SST if dataset == "sst" else None,
        "figures": {n: (os.path.basename(p) if n != "error" else p) for n, p in figures.items()},
        "instances_file": "instances.jsonl", "processes": 1, "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), record)
    return record


# ----------------------------------------------------------------------------------------------
# CLI glue (for `hf-attn analyze DIR --battery jw` once the CLI dispatches here)

BERT_FAMILY_MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "electra", "camembert")


def is_transformer_model_dir(model_dir: str) -> bool:
    """True for a BERT-family classifier: a folder whose ``config.json`` has a BERT-family
    ``model_type`` (written by :func:`hf_attn.training.transformer.train_transformer_classifier` or
    not), or a Hub id (anything that is not a local folder, e.g. ``owner/name``). A folder of another
    transformers model type (e.g. DistilBERT, whose layers the ``[CLS]`` override and the cheap path
    do not know) is a ``ValueError`` naming it."""
    import json

    config = os.path.join(model_dir, "config.json")
    if not os.path.isdir(model_dir):  # a Hub id is owner/name whose owner is no local folder
        import re

        return (re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", model_dir) is not None
                and not os.path.exists(model_dir.split("/")[0]))
    if not os.path.isfile(config):
        return False
    with open(config, encoding="utf-8") as f:
        model_type = json.load(f).get("model_type")
    if model_type in BERT_FAMILY_MODEL_TYPES:
        return True
    if model_type not in (None, "hf_attn", "hf_attn_pair"):  # e.g. distilbert: another module layout
        raise ValueError(f"{model_dir}: model_type {model_type!r} is not supported; the batteries take "
                         f"hf_attn models and BERT-family classifiers ({', '.join(BERT_FAMILY_MODEL_TYPES)})")
    return False


def settings_from_jw(run) -> TransformerJWSettings:
    """The J&W battery's typed settings (:class:`hf_attn.analysis.jw.common.JWRunSettings`, from
    ``hf-attn analyze --battery jw``) → :class:`TransformerJWSettings`: the same algorithm parameters,
    and the attention chosen by ``--jw-layer`` / ``--jw-heads``."""
    a = run.algorithm
    heads = run.transformer_heads
    return TransformerJWSettings(
        layer=run.transformer_layer, heads=heads if heads == "mean" else int(heads),
        num_permutations=a.num_permutations, k=a.k, lam=a.lam, eps=a.eps, steps=a.steps, lr=a.lr,
        init_scale=a.init_scale, seed=a.seed, alpha=a.alpha, tie_tolerance=a.tie_tolerance,
        loo_token_budget=a.loo_token_budget, num_threads=a.num_threads)


def run_transformer(model_dir: str, output_dir: str, run) -> dict:
    """``hf-attn analyze DIR --battery jw`` for a BERT-family folder or Hub id (dispatched by
    :func:`hf_attn.analysis.jw.battery.run` with its ``JWRunSettings``): the data of
    :func:`load_analysis_data` (``run.dataset`` with ``run.text_column`` / ``run.label_column``, or
    the folder's own run.json; split ``run.split``), the first ``run.max_instances``."""
    return transformer_jw_battery_runner(model_dir, output_dir, settings=settings_from_jw(run),
                                         dataset=run.dataset, split=run.split,
                                         max_instances=run.max_instances, progress=run.progress,
                                         text_column=run.text_column, label_column=run.label_column)


# ----------------------------------------------------------------------------------------------
# the data a BERT-family classifier is analysed on (shared with `hf-attn eraser`)


def load_analysis_data(model_dir: str, dataset: str | None = None, split: str = "test",
                       text_column: str | None = None, label_column: str | None = None):
    """``(texts, labels, label_names, dataset name)`` to analyse a BERT-family classifier on.

    - ``dataset`` given: loaded with :func:`hf_attn.data.datasets.load_task` (a bundled name, a
      CSV/JSON(L) folder with train/validation/test files or a Hub dataset id: its ``split``), with
      ``text_column`` / ``label_column`` (default ``text`` / ``label``). **A single CSV/JSON(L) file
      is analysed whole, in file order** (it is the data to analyse, not a corpus to split;
      ``split`` does not apply), read by the same row checks as ``load_task``.
    - no ``dataset``: the folder's ``run.json`` (trained by ``hf-attn train --base-model``) names
      the dataset, its data path, columns and split seed; without one (a model trained elsewhere,
      a Hub id) this is a ``ValueError`` asking for ``--dataset``.

    A missing column is a one-line :class:`hf_attn.data.datasets.DataError` naming the column and
    the file (or Hub id). Labels are class ids as ``load_task`` numbers them (integer labels are
    their own ids; strings in sorted order)."""
    from hf_attn.data.datasets import load_task

    if dataset is None:
        from hf_attn.training.transformer import read_transformer_run

        run = read_transformer_run(model_dir) if os.path.isdir(model_dir) else None
        if run is None:
            raise ValueError(f"{model_dir}: not trained by hf-attn (no run.json of a transformer run): name "
                             "the data to analyse with --dataset (sst, a CSV/JSON(L) file or folder, or a Hub "
                             "dataset id) and, if needed, --text-column/--label-column")
        s = run.get("settings", {})
        task = load_task(run["dataset"], seed=int(s.get("data_seed", 0)), data_path=s.get("data_path"),
                         text_column=text_column or s.get("text_column") or "text",
                         label_column=label_column or s.get("label_column") or "label")
    elif os.path.isfile(dataset) and dataset.lower().endswith((".csv", ".jsonl", ".json")):
        return _whole_file(dataset, text_column or "text", label_column or "label")
    else:
        task = load_task(dataset, text_column=text_column or "text", label_column=label_column or "label")
    if task.is_pair:
        raise ValueError(f"{task.name}: sentence-pair data (premise/hypothesis); the BERT-family analyses "
                         "take single texts (--text-column)")
    if split not in task.splits:
        raise ValueError(f"{task.name}: no split {split!r} (has {list(task.splits)})")
    data = task.splits[split]
    return list(data["text"]), list(data["label"]), list(task.label_names), task.name


def analysis_split(dataset: str | None, split: str) -> str:
    """The split to record: ``"all"`` when ``dataset`` is a single data file (analysed whole)."""
    if dataset and os.path.isfile(dataset) and dataset.lower().endswith((".csv", ".jsonl", ".json")):
        return "all"
    return split


def _whole_file(path: str, text_column: str, label_column: str):
    """Every row of one CSV/JSON(L) file, in file order, checked like ``load_task`` does (missing
    columns, empty texts and bad labels are errors naming the file and line)."""
    from hf_attn.data import datasets as d

    table = d._checked_rows(d._read_table(path), {"text": text_column}, label_column)
    names = d._label_set(table.data["label"])
    data = d._encode_labels({"all": table}, names)["all"]
    return list(data["text"]), list(data["label"]), names, os.path.basename(path)
