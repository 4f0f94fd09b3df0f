"""ERASER + integrated gradients for transformers classifiers: ``hf-attn eraser
DIR`` (:func:`hf_attn.runs.eraser.run_transformer_eraser`) on a folder (or Hub id) holding a
``transformers`` BERT/RoBERTa/… sequence classifier.

ERASER comprehensiveness, sufficiency and AOPC (DeYoung et al. 2020, "ERASER: A Benchmark to
Evaluate Rationalized NLP Models", §4) exactly as :mod:`hf_attn.methods.eraser` defines them for
hf_attn's own models — the same :func:`~hf_attn.methods.eraser.eraser_scores` (ranking, k =
ceil(fraction · n), ties by position, all 1 + 2K variants of an instance batched), the same
:func:`~hf_attn.methods.eraser.summarize_eraser` and AOPC — of these per-word-piece importances:

- ``attention``: the explained attention row (:class:`hf_attn.adapters.AttentionSpec`: by default
  the last layer, mean over heads; Jain & Wallace 2019 §2);
- ``rollout``: the ``[CLS]`` row of attention rollout (Abnar & Zuidema 2020, §3);
- ``gradient``: |Σ_d ∂ŷ_c/∂e_t,d · e_t,d| on the word-piece embeddings with the explained row
  detached (J&W Alg. 1; :func:`hf_attn.batteries.jw.transformer.gradient_importance`);
- ``loo``: TVD(ŷ(x₋t), ŷ(x)) with piece t deleted (J&W §4.1;
  :func:`hf_attn.batteries.jw.transformer.leave_one_out`);
- ``ig`` / ``ig_abs``: integrated gradients (Sundararajan et al. 2017, "Axiomatic Attribution for
  Deep Networks", Eq. 1) of ŷ_c on the word-piece input embeddings, signed / absolute
  (:func:`integrated_gradients_transformer`);
- ``random``: seeded uniform scores (the floor).

**Units and removal.** The ranked and removed units are the **word pieces** the tokenizer produces
for the text: every position except the special tokens the tokenizer *adds* (``[CLS]`` … ``[SEP]``,
``<s>`` … ``</s>``; found with ``return_special_tokens_mask``; an ``[UNK]`` piece of the text is a
unit). Removing pieces deletes them from the input: the kept pieces stay in order and the sequence
is re-framed as ``[CLS] kept [SEP]`` (shorter, not masked; positions re-numbered), so ``[CLS]`` and
``[SEP]`` are never removed and the classifier always reads its ``[CLS]``. Removing every piece
(comprehensiveness at 100 %, or k = n for one-piece texts) leaves ``[CLS] [SEP]`` — the model's own
"empty input" (where hf_attn's BiLSTM reads one ``[PAD]``). This framing is
:class:`FramedClassifier`, a thin module the unchanged :func:`hf_attn.methods.eraser.eraser_scores`
runs on. Word pieces, not words: a word split into pieces can be partly removed (the analyses of
the analyses run on pieces; only figures merge pieces into words).

**Integrated gradients.** Only the content pieces' word embeddings move along the path; the
specials' embeddings, the position and token-type embeddings (added inside the model, after
``inputs_embeds``) stay: x' = the same text with each content piece's word embedding replaced by the
baseline, zero (``"zero"``) or the ``[PAD]`` embedding (``"pad"``; BERT's ``[PAD]`` row is not zero).
The path integral is a Riemann sum over ``steps`` intervals (trapezoid; the nodes of
:mod:`hf_attn.methods.integrated_gradients`), all path points of a group of instances in one
forward + backward. Completeness (Sundararajan et al. §3): Σ_t IG_t = ŷ_c(x) − ŷ_c(x') up to the
quadrature error, recorded as ``ig_completeness`` and tested.

Shapes: N instances, T tokens of the tokenized inputs (specials included, right-padded),
Tc content pieces (left-aligned, right-padded), K fraction bins, m path intervals.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from hf_attn.batteries.eraser.battery import eraser_parameters, erase_each_measure, ig_scores, pairwise_correlations
from hf_attn.core.batching import length_batches
from hf_attn.methods.eraser import DEFAULT_FRACTIONS, EraserResult, eraser_scores
from hf_attn.methods.integrated_gradients import IntegratedGradientsResult

TRANSFORMER_MEASURES = ("attention", "rollout", "gradient", "loo", "ig", "ig_abs", "random")
TRANSFORMER_MEASURE_DESCRIPTIONS = {
    "attention": "the explained [CLS] attention row (J&W §2; layer/heads in attention_spec)",
    "rollout": "[CLS] row of attention rollout (Abnar & Zuidema 2020)",
    "gradient": "|∇ŷ_c · e_t| on word-piece embeddings, explained [CLS] row detached (J&W Alg. 1)",
    "loo": "leave-one-out TVD(ŷ(x₋t), ŷ(x)), one word piece deleted (J&W §4.1)",
    "ig": "integrated gradients on word-piece embeddings, signed (Sundararajan et al. 2017)",
    "ig_abs": "|integrated gradients|",
    "random": "uniform random scores (the floor)",
}
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
        """``(B, Tc)`` content → framed ``(B, P + Tc + S)`` ids and mask (right-padded)."""
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


def transformer_eraser_scores(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, units: torch.Tensor,
                              importance: torch.Tensor, fractions: Sequence[float] = DEFAULT_FRACTIONS, *,
                              token_budget: int = 4 * DEFAULT_TOKEN_BUDGET, progress: bool = False) -> EraserResult:
    """ERASER comprehensiveness / sufficiency (DeYoung et al. 2020 §4) of ``importance`` ``(N, T)``
    (per position of the tokenized rows; only the units are ranked) for a BERT-family classifier:
    :func:`hf_attn.methods.eraser.eraser_scores` on the units (:func:`content_layout`) through
    :class:`FramedClassifier`. ``lengths`` of the result count word pieces."""
    prefix, suffix = special_frame(input_ids, attention_mask, units)
    ids, mask, index = content_layout(input_ids, units)
    scores = torch.as_tensor(importance).double().gather(1, index)
    return eraser_scores(FramedClassifier(model, prefix, suffix), ids, mask.long(), scores, fractions,
                         token_budget=token_budget, progress=progress)


# ----------------------------------------------------------------------------------------------
# integrated gradients on the word-piece embeddings


_RULES = {"trapezoid": "trapezoid", "right": "riemann-right"}  # this command's rule names → the method's


def _adapter_batch(adapter, input_ids: torch.Tensor, attention_mask: torch.Tensor, units: torch.Tensor):
    """Right-padded rows → the adapter's :class:`~hf_attn.adapters.Batch` (its padding side), with
    ``content`` = the units."""
    lengths = attention_mask.sum(1).tolist()
    rows = [input_ids[i, :n].tolist() for i, n in enumerate(lengths)]
    words = [[j if u else None for j, u in enumerate(units[i, :n].tolist())] for i, n in enumerate(lengths)]
    return adapter.from_token_lists(rows, word_ids=words)


def _right_aligned(values: torch.Tensor, batch, width: int) -> torch.Tensor:
    """``(B, T')`` values on the adapter's positions → ``(B, width)`` on the right-padded rows."""
    out = torch.zeros((len(batch), width), dtype=torch.float64)
    real = batch.attention_mask.bool()
    for i in range(len(batch)):
        row = values[i][real[i]].detach().double().cpu()
        out[i, :len(row)] = row
    return out


def integrated_gradients_transformer(adapter, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                     units: torch.Tensor, *, steps: int = 50, baseline: str = "zero",
                                     rule: str = "trapezoid", target: str = "probability",
                                     token_budget: int = DEFAULT_GRADIENT_TOKEN_BUDGET,
                                     progress: bool = False) -> IntegratedGradientsResult:
    """Integrated gradients (Sundararajan et al. 2017, Eq. 1) of a transformers classifier (through
    its adapter) w.r.t. the token embeddings of the ``units`` (right-padded rows ``(B, T)``):

    IG_t = Σ_d (e_t − b)_d · Σ_j w_j ∂f(x' + a_j (x − x'))/∂e_t,d,

    x the token embeddings of the row, x' the same with every unit's embedding replaced by the
    baseline b (``"zero"``: 0; ``"pad"``: the pad token's embedding); special tokens and pads keep
    their embeddings, and position / token-type embeddings are added by the model as usual. f =
    ``target`` of the class c predicted for x (``"probability"`` ŷ_c, as ERASER ranks for;
    ``"logit"``), a_j, w_j the ``rule``'s nodes (``_path_points`` of
    :mod:`hf_attn.methods.integrated_gradients`). The model's own function (no attention detached),
    the setting in which completeness holds: Σ_t IG_t = f(x) − f(x') up to quadrature error,
    returned as ``completeness_gap``.

    Batched: instances in length-sorted groups of at most ``token_budget`` padded tokens counting
    every path point, all path points of a group in one forward + backward (split only if one
    instance's points exceed the budget), on the adapter's device. Returns
    :class:`hf_attn.methods.integrated_gradients.IntegratedGradientsResult` (``(B, T)`` signed
    attributions on the right-padded rows, 0 outside the units)."""
    if baseline not in ("zero", "pad"):
        raise ValueError(f"baseline must be 'zero' or 'pad', got {baseline!r}")
    if target not in ("probability", "logit"):
        raise ValueError(f"target must be 'probability' or 'logit', got {target!r}")
    from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution

    lengths = attention_mask.sum(1).cpu().numpy()
    attributions = torch.zeros(input_ids.shape, dtype=torch.float64)
    f_input = torch.empty(len(lengths), dtype=torch.float64)
    f_base = torch.empty(len(lengths), dtype=torch.float64)
    chosen = torch.empty(len(lengths), dtype=torch.long)
    groups = length_batches(lengths, token_budget, rows_per_item=steps + 1)
    if progress:
        from tqdm.auto import tqdm
        groups = tqdm(groups, desc="integrated gradients", unit="batch")
    for group in groups:
        index = torch.from_numpy(group)
        batch = _adapter_batch(adapter, input_ids[index], attention_mask[index], units[index])
        result = integrated_gradients_attribution(adapter, batch, steps=steps, rule=_RULES[rule], target=target,
                                                  baseline=baseline, token_budget=token_budget)
        attributions[index] = _right_aligned(result.attributions.double(), batch, input_ids.shape[1])
        f_input[index], f_base[index] = result.target_input.double(), result.target_baseline.double()
        chosen[index] = result.target_class
    gap = attributions.sum(1) - (f_input - f_base)
    return IntegratedGradientsResult(attributions, gap, f_input, f_base, chosen)


# ----------------------------------------------------------------------------------------------
# every importance measure, and the table


def transformer_importance_scores(adapter, input_ids: torch.Tensor, attention_mask: torch.Tensor, units: torch.Tensor,
                                  measures: Sequence[str] = TRANSFORMER_MEASURES, *,
                                  ig_steps: int = 50, ig_baseline: str = "zero", seed: int = 0,
                                  token_budget: int = DEFAULT_TOKEN_BUDGET,
                                  gradient_token_budget: int = DEFAULT_GRADIENT_TOKEN_BUDGET,
                                  progress: bool = False) -> tuple[dict, dict]:
    """``({measure: (N, T) float64}, {measure: seconds})``: the per-position importances of
    :data:`TRANSFORMER_MEASURES` (module docstring) on the tokenized right-padded rows, computed
    through ``adapter`` by the methods of :mod:`hf_attn.methods`; only the ``units`` are ranked
    later. Each measure runs over length-sorted batches within a token budget (forward-only
    measures ``token_budget``, gradient and IG ``gradient_token_budget``); IG also stores its
    completeness gaps (``"_ig_completeness_gap"``, ``(N,)``)."""
    from hf_attn.methods.gradient import attention_fixed_gradient
    from hf_attn.methods.leave_one_out import deletion_importance

    unknown = sorted(set(measures) - set(TRANSFORMER_MEASURES))
    if unknown:
        raise ValueError(f"unknown importance measure(s) {unknown} for a transformers model; choose from "
                         f"{list(TRANSFORMER_MEASURES)}")
    lengths = attention_mask.sum(1).numpy()
    out: dict[str, torch.Tensor] = {}
    seconds: dict[str, float] = {}

    def per_batch(names, fn, budget):
        start = time.perf_counter()
        results = {n: torch.zeros(input_ids.shape, dtype=torch.float64) for n in names}
        for rows in length_batches(lengths, budget):
            index = torch.from_numpy(rows)
            batch = _adapter_batch(adapter, input_ids[index], attention_mask[index], units[index])
            for n, v in zip(names, fn(batch)):
                results[n][index] = _right_aligned(v, batch, input_ids.shape[1])
        seconds[names[0]] = time.perf_counter() - start
        return results

    def attention_and_rollout(batch):
        forward = adapter.forward(batch)
        return forward.attention, forward.rollout

    if "attention" in measures or "rollout" in measures:
        both = per_batch(["attention", "rollout"], attention_and_rollout, token_budget)
        out |= {n: v for n, v in both.items() if n in measures}
    if "gradient" in measures:
        out |= per_batch(["gradient"], lambda b: [attention_fixed_gradient(adapter, b)], gradient_token_budget)
    if "loo" in measures:
        out |= per_batch(["loo"], lambda b: [deletion_importance(adapter, b, token_budget=token_budget)],
                         max(1, token_budget // 8))
    if "ig" in measures or "ig_abs" in measures:
        start = time.perf_counter()
        ig = integrated_gradients_transformer(adapter, input_ids, attention_mask, units, steps=ig_steps,
                                              baseline=ig_baseline, token_budget=gradient_token_budget,
                                              progress=progress)
        seconds["ig"] = time.perf_counter() - start
        out |= ig_scores(ig, measures)
        out["_ig_difference"] = ig.target_input - ig.target_baseline
    if "random" in measures:
        out["random"] = torch.rand(input_ids.shape, generator=torch.Generator().manual_seed(seed),
                                   dtype=torch.float64)
    return out, seconds


def _importance_correlations(scores: dict, units: torch.Tensor, predicted, num_classes: int) -> dict:
    """J&W Table 2-style Kendall τ (per predicted class) between every pair of measures over the
    units (as :func:`hf_attn.batteries.eraser.battery.eraser_table` reports them; rollout
    included)."""
    names = [n for n in ("attention", "rollout", "gradient", "loo", "ig_abs", "ig") if n in scores]
    keep = units.numpy()
    return pairwise_correlations({n: [row[k] for row, k in zip(scores[n].numpy(), keep)] for n in names},
                                 predicted, num_classes)


def transformer_eraser_table(adapter, input_ids: torch.Tensor, attention_mask: torch.Tensor, units: torch.Tensor,
                             measures: Sequence[str] = TRANSFORMER_MEASURES,
                             fractions: Sequence[float] = DEFAULT_FRACTIONS, *, ig_steps: int = 50,
                             ig_baseline: str = "zero", seed: int = 0, token_budget: int = DEFAULT_TOKEN_BUDGET,
                             gradient_token_budget: int = DEFAULT_GRADIENT_TOKEN_BUDGET,
                             progress: bool = False) -> dict:
    """The ERASER table of :func:`hf_attn.batteries.eraser.battery.eraser_table` (same keys:
    ``measures`` {name: :func:`summarize_eraser` + description}, ``kendall_tau``, ``parameters``,
    ``seconds``, ``ig_completeness``) for a transformers classifier (through its adapter) on tokenized
    rows (:func:`encode`)."""
    start = time.perf_counter()
    model, spec = adapter.model, adapter.spec
    scores, seconds = transformer_importance_scores(
        adapter, input_ids, attention_mask, units, measures, ig_steps=ig_steps, ig_baseline=ig_baseline,
        seed=seed, token_budget=token_budget, gradient_token_budget=gradient_token_budget, progress=progress)
    table, predicted = erase_each_measure(
        scores, measures, fractions, TRANSFORMER_MEASURE_DESCRIPTIONS, seconds,
        lambda importance: transformer_eraser_scores(model, input_ids, attention_mask, units, importance, fractions,
                                                     token_budget=4 * token_budget, progress=progress))
    out = {"measures": table,
           "kendall_tau": _importance_correlations(scores, units, predicted, model.config.num_labels),
           "parameters": {**eraser_parameters(fractions, ig_steps, ig_baseline, seed),
                          "units": "word pieces of the text (tokenizer-added specials excluded)",
                          "removal": "pieces deleted, the rest re-framed as [CLS] kept [SEP]; "
                                     "nothing left: [CLS] [SEP]",
                          "ig_path": "content word embeddings only; specials, positions, token types fixed"},
           "attention_spec": {"layer": spec.layer, "heads": spec.heads, "query": adapter.query_rule,
                              "description": spec.describe()},
           "seconds": seconds | {"total": time.perf_counter() - start}}
    if "_ig_completeness_gap" in scores:
        gap = scores["_ig_completeness_gap"].abs()
        difference = scores["_ig_difference"].abs()
        out["ig_completeness"] = {"mean_abs_gap": float(gap.mean()), "max_abs_gap": float(gap.max()),
                                  "mean_abs_difference": float(difference.mean()),
                                  "note": "|Σ_t IG_t − (ŷ_c(x) − ŷ_c(x'))| per instance; difference = "
                                          "|ŷ_c(x) − ŷ_c(x')|"}
    return out


__all__ = ["TRANSFORMER_MEASURES", "FramedClassifier", "content_layout", "encode", "integrated_gradients_transformer",
           "special_frame", "transformer_eraser_scores", "transformer_eraser_table",
           "transformer_importance_scores"]
