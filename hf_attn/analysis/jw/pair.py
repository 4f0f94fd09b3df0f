"""Jain & Wallace 2019 battery on sentence-pair (NLI) models (J&W §3–4, SNLI rows of Tables 1–2):
attention, gradient importance and leave-one-out over the PREMISE tokens, the hypothesis query Q
held fixed; permutations and adversaries of the premise attention; TVD over the three classes.

The single-sequence functions of :mod:`hf_attn.analysis.jw.battery` are reused wherever the pair model
fits their contract (batching, deletion batches, permutation draws, summaries, figures). What
differs:

* every forward also takes the hypothesis (``hypothesis_input_ids`` / ``hypothesis_attention_mask``);
  leave-one-out deletes premise tokens only and repeats each hypothesis for its deletions;
* the gradient is w.r.t. the premise embeddings, attention detached (J&W appendix B);
* the J&W decoder for NLI is nonlinear in the context (W_o tanh(W_c c + W_q Q + b), the J&W code),
  so :func:`pair_adversarial_attention` back-propagates the TVD penalty through it (autograd on
  the tiny decoder only; the divergence part is the closed form of ``jw._divergence_gradient``).
  With ``pair_decoder="linear"`` it equals :func:`hf_attn.analysis.jw.battery.adversarial_attention`.

``hf-attn analyze DIR --battery jw`` dispatches here for a folder holding an ``hf_attn_pair`` model.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from hf_attn.core.measures import tvd
from hf_attn.analysis.jw.battery import (AdversaryResult, JWInstances, JWSettings, _adversary_options, _AmsgradAscent, _batch_rows,
                 _divergence_gradient, _initial_adversary_logits, _instance_analysis_row, _instance_fields,
                 _settings_key, _timer, adversary_result, battery_summary, deletion_batch, length_batches,
                 pad_batch, permutation_tvd, settings_from_options, write_jsonl_atomic)

# J&W Table 2, SNLI test, BiLSTM + additive attention, classes 0 / 1 / 2 = neutral / contradiction /
# entailment (Table 1's class sizes 3219 / 3237 / 3368 fix this order); Table 1: micro-F1 0.78.
PUBLISHED_SNLI = {
    "lstm": {"tau_gradient": {"mean": [0.31, 0.33, 0.31], "std": [0.23, 0.21, 0.21],
                              "fraction_significant": [0.36, 0.38, 0.36]},
             "tau_loo": {"mean": [0.16, 0.36, 0.34], "std": [0.26, 0.19, 0.20],
                         "fraction_significant": [0.20, 0.44, 0.40]},
             "test_micro_f1": 0.78},
    "average": {"tau_gradient": {"mean": [0.59, 0.58, 0.57], "std": [0.18, 0.19, 0.19],
                                 "fraction_significant": [0.80, 0.80, 0.80]}},
    "notes": "J&W 2019 Tables 1-2 (full SNLI train, GloVe 840B 300-d); classes by predicted label "
             "neutral / contradiction / entailment. Appendix C: SNLI is the one dataset where "
             "gradient and LOO do not agree with each other more than with attention.",
}


class _BoundQuery:
    """The single-sequence decoder contract of ``jw`` (``token_logits(h)``,
    ``logits_from_token_logits``, ``config``) for a batch whose hypothesis query Q is fixed."""

    def __init__(self, model, query: torch.Tensor):
        self.model, self.query, self.config = model, query, model.config

    def token_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.token_logits(hidden, self.query)

    def logits_from_token_logits(self, token_logits: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        return self.model.logits_from_token_logits(token_logits, attention)


def bind_query(model, query: torch.Tensor) -> _BoundQuery:
    """A view of a pair model with Q fixed, usable by ``jw.permutation_tvd`` (and, for the
    ``"linear"`` pair decoder, ``jw.adversarial_attention``)."""
    return _BoundQuery(model, query)


@torch.no_grad()
def pair_predict(model, input_ids, attention_mask, hypothesis_input_ids, hypothesis_attention_mask):
    """One forward → ``(probabilities (B, C), α (B, T), premise states h (B, T, D), Q (B, D))``."""
    out = model(input_ids=input_ids, attention_mask=attention_mask,
                hypothesis_input_ids=hypothesis_input_ids,
                hypothesis_attention_mask=hypothesis_attention_mask, output_hidden_states=True)
    return out.logits.softmax(-1), out.attentions, out.hidden_states, out.query


def pair_gradient_importance(model, input_ids, attention_mask, hypothesis_input_ids,
                             hypothesis_attention_mask) -> torch.Tensor:
    """J&W Alg. 1 over the premise ``(B, T)``: g_t = |Σ_dims (∂ŷ/∂e_t) · e_t| for the premise
    embeddings e_t, ŷ the predicted class probability, α detached; 0 on premise pads."""
    mask = attention_mask.bool()
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            embeddings = model.get_input_embeddings()(input_ids).detach().requires_grad_(True)
            out = model(inputs_embeds=embeddings, attention_mask=mask,
                        hypothesis_input_ids=hypothesis_input_ids,
                        hypothesis_attention_mask=hypothesis_attention_mask, detach_attention=True)
            predicted = out.logits.softmax(-1).max(-1).values
            (grad,) = torch.autograd.grad(predicted.sum(), embeddings)
    finally:
        model.train(was_training)
    return ((grad * embeddings).sum(-1).abs() * mask).detach()


@torch.no_grad()
def pair_leave_one_out(model, input_ids, attention_mask, hypothesis_input_ids,
                       hypothesis_attention_mask, token_budget: int = 32768,
                       probabilities: torch.Tensor | None = None) -> torch.Tensor:
    """Δŷ_t = TVD(ŷ(x₋t, hyp), ŷ(x, hyp)) for every premise token t ``(B, T)`` (premise shortened;
    the hypothesis unchanged). Pads 0; single-token premises NaN (skipped downstream)."""
    mask = attention_mask.bool()
    hyp_mask = hypothesis_attention_mask.bool()
    model.eval()
    if probabilities is None:
        probabilities = model(input_ids=input_ids, attention_mask=mask,
                              hypothesis_input_ids=hypothesis_input_ids,
                              hypothesis_attention_mask=hyp_mask).logits.softmax(-1)
    ids, new_mask, instance, position = deletion_batch(input_ids, mask)
    result = torch.zeros(mask.shape, dtype=probabilities.dtype, device=input_ids.device)
    result[mask.sum(1) == 1] = float("nan")
    result[~mask] = 0.0
    if len(instance) == 0:
        return result
    width = ids.shape[1] + hypothesis_input_ids.shape[1]
    rows_per_chunk = max(1, token_budget // max(width, 1))
    lengths, hyp_lengths = new_mask.sum(1), hyp_mask.sum(1)
    for start in range(0, len(instance), rows_per_chunk):
        sl = slice(start, start + rows_per_chunk)
        rows = instance[sl]
        chunk_width, hyp_width = int(lengths[sl].max()), int(hyp_lengths[rows].max())
        out = model(input_ids=ids[sl, :chunk_width], attention_mask=new_mask[sl, :chunk_width],
                    hypothesis_input_ids=hypothesis_input_ids[rows, :hyp_width],
                    hypothesis_attention_mask=hyp_mask[rows, :hyp_width])
        result[rows, position[sl]] = tvd(out.logits.softmax(-1), probabilities[rows])
    return result


def pair_permutation_tvd(model, hidden_states, attention, attention_mask, query,
                         num_permutations: int = 100, generator: torch.Generator | None = None,
                         permutations: torch.Tensor | None = None) -> torch.Tensor:
    """J&W Alg. 2 on the premise attention, Q fixed → ``(B, P)`` TVDs (``jw.permutation_tvd``)."""
    return permutation_tvd(bind_query(model, query), hidden_states, attention, attention_mask,
                           num_permutations, generator, permutations)


def _pair_adversary_logit_gradient(model, logits: torch.Tensor, mask3: torch.Tensor,
                                   attention: torch.Tensor, units: torch.Tensor,
                                   original: torch.Tensor, lam: float, eps: float) -> torch.Tensor:
    """∂(relaxed Eq. 1–2 objective)/∂(adversary logits) ``(B, k, T)`` for free logits ``(B, k, T)``,
    premise mask ``(B, 1, T)``, α̂ ``(B, T)``, per-token pre-activations u ``(B, T, K′)`` and ŷ
    ``(B, C)``. The divergence part is the closed form of ``jw._divergence_gradient``; the TVD part
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
    initialisation and optimiser as :func:`hf_attn.analysis.jw.battery.adversarial_attention`. The TVD
    penalty's gradient goes through the (possibly nonlinear) pair decoder: per step, one autograd
    pass through decoder.finish on the mixed pre-activations ``(B, k, K′)`` (exact), then the chain
    rule to α via the per-token pre-activations u ``(B, T, K′)``."""
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
        optimizer.step(_pair_adversary_logit_gradient(model, logits, mask3, attention, units, original,
                                                      lam, eps))
    return adversary_result(model, logits, mask3, units, attention, original, eps)


# ----------------------------------------------------------------------------------------------
# the battery over a split of pairs


@dataclass
class PairJWInstances(JWInstances):
    """:class:`JWInstances` (premise-side arrays) plus each instance's hypothesis token ids."""

    hypothesis_ids: list = field(default_factory=list)


def _run_pair_batch(model, ids, mask, hyp_ids, hyp_mask, settings: JWSettings, batch_seed: int,
                    timings: dict) -> dict:
    timed = _timer(timings)
    probabilities, attention, hidden, query = timed(
        "forward", lambda: pair_predict(model, ids, mask, hyp_ids, hyp_mask))
    gradient = timed("gradient", lambda: pair_gradient_importance(model, ids, mask, hyp_ids, hyp_mask))
    loo = timed("leave_one_out", lambda: pair_leave_one_out(
        model, ids, mask, hyp_ids, hyp_mask, settings.loo_token_budget, probabilities))
    perm = timed("permutation", lambda: pair_permutation_tvd(
        model, hidden, attention, mask, query, settings.num_permutations,
        torch.Generator().manual_seed(batch_seed)))
    adv = timed("adversary", lambda: pair_adversarial_attention(
        model, hidden, attention, mask, query, **_adversary_options(settings, batch_seed)))
    return _batch_rows(mask, probabilities, attention, gradient, loo, perm, adv)


def run_pair_jw_battery(model, tokenizer, premises, hypotheses, labels=None,
                        settings: JWSettings | None = None, progress: bool = True,
                        cache_dir: str | None = None) -> tuple[PairJWInstances, dict]:
    """:func:`hf_attn.analysis.jw.battery.run_jw_battery` for pairs: the battery over the premise tokens of
    every (premise, hypothesis) pair, in premise-length-sorted batches bounded by
    ``settings.token_budget`` padded premise tokens; resumable through ``cache_dir``. Same summary
    keys as the single-sequence battery (per predicted class, here 3 classes for NLI)."""
    from hf_attn.analysis.sharding import run_sharded, scatter_rows

    settings = settings or JWSettings()
    settings.validate()
    premises, hypotheses = list(premises), list(hypotheses)
    if not premises:
        raise ValueError("no pairs to analyse")
    if len(premises) != len(hypotheses):
        raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
    max_length = settings.max_length or int(getattr(model.config, "max_tokens", 512))
    encoded = tokenizer(premises, truncation=True, max_length=max_length)["input_ids"]
    hyp_encoded = tokenizer(hypotheses, truncation=True, max_length=max_length)["input_ids"]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    hyp_lengths = np.array([len(e) for e in hyp_encoded], dtype=np.int64)
    for name, values in (("premise", lengths), ("hypothesis", hyp_lengths)):
        if (values == 0).any():
            raise ValueError(f"{int((values == 0).sum())} {name}(s) have no tokens, e.g. index "
                             f"{int(np.flatnonzero(values == 0)[0])}: remove empty texts first")
    model.eval()
    batches = length_batches(lengths, settings.token_budget)
    key = _settings_key(settings, model, np.concatenate([lengths, hyp_lengths])) if cache_dir else None
    pad_id = tokenizer.pad_token_id or 0
    timings: dict[str, float] = {}
    started = time.perf_counter()

    def compute(number, rows):  # seeded by the batch number only: the same draws in any process
        ids, mask = pad_batch([encoded[i] for i in rows], pad_id)
        hyp_ids, hyp_mask = pad_batch([hyp_encoded[i] for i in rows], pad_id)
        return _run_pair_batch(model, ids, mask, hyp_ids, hyp_mask, settings,
                               settings.seed * 1_000_003 + 2 * number, timings)

    # The same cache as the single-sequence battery: .npz shards (no pickle), written atomically.
    results = run_sharded(batches, compute, cache_dir=cache_dir, key=key, progress=progress,
                          desc="J&W battery (pairs)")
    per_row = scatter_rows(batches, results, len(premises))
    total = time.perf_counter() - started

    instances = PairJWInstances(
        input_ids=[np.asarray(e) for e in encoded],
        hypothesis_ids=[np.asarray(e) for e in hyp_encoded],
        labels=None if labels is None else np.asarray(list(labels), dtype=np.int64),
        **_instance_fields(per_row))
    summary = battery_summary(instances, lengths, settings, total, timings)
    summary["length"]["hypothesis_mean"] = float(hyp_lengths.mean())
    return instances, summary


# ----------------------------------------------------------------------------------------------
# `hf-attn analyze DIR --battery jw` on a pair model


def is_pair_model_dir(model_dir: str) -> bool:
    """True if ``model_dir/config.json`` is an ``hf_attn_pair`` model."""
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("model_type") == "hf_attn_pair"


def load_pair_model_and_split(model_dir: str, split: str = "test"):
    """``(model, tokenizer, premises, hypotheses, labels, label_names, dataset)`` for a folder
    written by ``hf-attn train`` on a pair task."""
    from hf_attn.models.loading import load_model_folder
    from hf_attn.training.engine import settings_from_run, task_of

    run = settings_from_run(model_dir, needed_by="the jw battery")
    model, tokenizer = load_model_folder(model_dir, "hf_attn_pair")
    task = task_of(run)
    if not task.is_pair:
        raise ValueError(f"{task.name} is not a sentence-pair task but the model is a pair model")
    if split not in task.splits:
        raise ValueError(f"split {split!r} not in {list(task.splits)}")
    data = task.splits[split]
    return (model, tokenizer, list(data["premise"]), list(data["hypothesis"]), list(data["label"]),
            task.label_names, task.name)


def _pair_instance_rows(instances: PairJWInstances, tokenizer):
    for i in range(len(instances.attention)):
        yield {"index": i,
               "premise_tokens": tokenizer.convert_ids_to_tokens([int(t) for t in instances.input_ids[i]]),
               "hypothesis_tokens": tokenizer.convert_ids_to_tokens(
                   [int(t) for t in instances.hypothesis_ids[i]]),
               **_instance_analysis_row(instances, i)}


def pair_jw_battery_runner(model_dir: str, output_dir: str, options) -> dict:
    """The ``jw`` battery runner for pair models: ``OUT/results.json`` (summary with the published
    SNLI values beside it), ``OUT/instances.jsonl`` and the J&W figures (over premise tokens)."""
    from hf_attn.training.engine import environment_versions, write_json_atomic
    from hf_attn.analysis.jw.battery import format_summary
    from hf_attn.analysis.jw.figures import write_jw_figures
    from hf_attn.analysis.jw.summary import strip_arrays

    split = getattr(options, "split", "test")
    settings = settings_from_options(options)
    model, tokenizer, premises, hypotheses, labels, label_names, dataset = \
        load_pair_model_and_split(model_dir, split)
    limit = getattr(options, "jw_max_instances", None)
    if limit:
        premises, hypotheses, labels = premises[:limit], hypotheses[:limit], labels[:limit]
    os.makedirs(output_dir, exist_ok=True)
    progress = not getattr(options, "quiet", False)
    cache_dir = None if getattr(options, "jw_no_cache", False) else os.path.join(output_dir, "cache")
    instances, summary = run_pair_jw_battery(model, tokenizer, premises, hypotheses, labels, settings,
                                             progress=progress, cache_dir=cache_dir)
    figures = write_jw_figures(instances, summary, output_dir, tokenizer, label_names,
                               model_name=f"{model.config.encoder}+{model.config.attention}, premise")
    write_jsonl_atomic(os.path.join(output_dir, "instances.jsonl"),
                       _pair_instance_rows(instances, tokenizer))
    results = {
        "battery": "jw", "paper": "Jain & Wallace 2019, Attention is not Explanation, §4 (NLI: §3)",
        "model_dir": os.path.abspath(model_dir), "dataset": dataset, "split": split,
        "label_names": label_names, "pair": True,
        "attended": "premise tokens; query = encoded hypothesis",
        "model": {"encoder": model.config.encoder, "attention": model.config.attention,
                  "variant": model.config.variant, "pair_decoder": model.config.pair_decoder},
        "parameters": asdict(settings), "summary": strip_arrays(summary),
        "published": PUBLISHED_SNLI if dataset == "snli" else None,
        "figures": {name: os.path.basename(path) for name, path in figures.items()},
        "instances_file": "instances.jsonl", "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    if cache_dir:
        import shutil

        shutil.rmtree(cache_dir, ignore_errors=True)
    if progress:
        print(format_summary(results))
    return results


__all__ = ["PUBLISHED_SNLI", "bind_query", "pair_predict", "pair_gradient_importance",
           "pair_leave_one_out", "pair_permutation_tvd", "pair_adversarial_attention",
           "run_pair_jw_battery", "PairJWInstances", "is_pair_model_dir", "pair_jw_battery_runner"]
