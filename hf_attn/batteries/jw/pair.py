"""Jain & Wallace 2019 battery on sentence-pair models (J&W §3–4, SNLI and QA rows of Tables 1–2):
attention, gradient importance and leave-one-out over the PREMISE tokens (the passage, for QA), the
hypothesis query Q (the question) held fixed; permutations and adversaries of the premise attention;
TVD over the classes (3 for NLI, the answers for QA; J&W's QA threshold ε = 0.05, :data:`QA_EPS`).

The analyses are the pair methods of :mod:`hf_attn.methods` (``pair_gradient_importance``,
``pair_leave_one_out``, ``pair_permutation_tvd``, ``pair_adversarial_attention``; their names stay
importable from here); batching, per-instance rows, summaries and figures are the single-sequence
battery's (:mod:`hf_attn.core.batching`, :mod:`.common`, :mod:`.summary`, :mod:`.figures`). What
differs from the single-sequence battery:

* every forward also takes the hypothesis (``hypothesis_input_ids`` / ``hypothesis_attention_mask``);
  leave-one-out deletes premise tokens only and repeats each hypothesis for its deletions;
* the gradient is w.r.t. the premise embeddings, attention detached (J&W appendix B);
* the J&W decoder for NLI is nonlinear in the context (W_o tanh(W_c c + W_q Q + b), the J&W code),
  so ``pair_adversarial_attention`` back-propagates the TVD penalty through it (autograd on the
  tiny decoder only). With ``pair_decoder="linear"`` it equals the single-sequence adversary.

``hf-attn analyze DIR --battery jw`` (:func:`hf_attn.runs.jw.run`) dispatches to
:func:`hf_attn.runs.jw.run_pair` for a folder holding an ``hf_attn_pair`` model. This module does not
import :mod:`.battery`.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from hf_attn.batteries.jw.common import (JWInstances, JWSettings, adversary_options, batch_rows, battery_summary,
                                         instance_fields, settings_key, timer)
from hf_attn.core.published import JW_QA_SUMMARY, JW_SNLI_SUMMARY
from hf_attn.core.batching import length_batches, pad_batch
from hf_attn.methods.adversary import pair_adversarial_attention
from hf_attn.methods.gradient import pair_gradient_importance
from hf_attn.methods.leave_one_out import pair_leave_one_out
from hf_attn.methods.pair_query import bind_query
from hf_attn.methods.permutation import pair_permutation_tvd

PUBLISHED_SNLI = JW_SNLI_SUMMARY  # J&W Tables 1–2, SNLI (hf_attn.core.published)
QA_EPS = 0.05  # J&W §4.2.2: the adversary's TVD threshold on QA datasets (0.01 for classification)


def published_for(dataset: str | None) -> dict | None:
    """J&W's published values for a pair task: SNLI (per class), bAbI 1–3 / CNN (overall; for
    generated bAbI data the values of the released data, to compare with, not to grade against)."""
    if dataset == "snli":
        return PUBLISHED_SNLI
    from hf_attn.data.babi import is_qa_task

    if not is_qa_task(dataset):
        return None
    key = "cnn" if dataset == "cnn-qa" else dataset.split("-")[0]
    return {**JW_QA_SUMMARY[key], "notes": JW_QA_SUMMARY["notes"]}


@torch.no_grad()
def pair_predict(model, input_ids, attention_mask, hypothesis_input_ids, hypothesis_attention_mask):
    """One forward → ``(probabilities (B, C), α (B, T), premise states h (B, T, D), Q (B, D))``."""
    out = model(input_ids=input_ids, attention_mask=attention_mask,
                hypothesis_input_ids=hypothesis_input_ids,
                hypothesis_attention_mask=hypothesis_attention_mask, output_hidden_states=True)
    return out.logits.softmax(-1), out.attentions, out.hidden_states, out.query


# ----------------------------------------------------------------------------------------------
# the battery over a split of pairs


@dataclass
class PairJWInstances(JWInstances):
    """:class:`JWInstances` (premise-side arrays) plus each instance's hypothesis token ids."""

    hypothesis_ids: list = field(default_factory=list)


def _run_pair_batch(model, ids, mask, hyp_ids, hyp_mask, settings: JWSettings, batch_seed: int,
                    timings: dict) -> dict:
    timed = timer(timings)
    probabilities, attention, hidden, query = timed(
        "forward", lambda: pair_predict(model, ids, mask, hyp_ids, hyp_mask))
    gradient = timed("gradient", lambda: pair_gradient_importance(model, ids, mask, hyp_ids, hyp_mask))
    loo = timed("leave_one_out", lambda: pair_leave_one_out(
        model, ids, mask, hyp_ids, hyp_mask, settings.loo_token_budget, probabilities))
    perm = timed("permutation", lambda: pair_permutation_tvd(
        model, hidden, attention, mask, query, settings.num_permutations,
        torch.Generator().manual_seed(batch_seed)))
    adv = timed("adversary", lambda: pair_adversarial_attention(
        model, hidden, attention, mask, query, **adversary_options(settings, batch_seed)))
    return batch_rows(mask, probabilities, attention, gradient, loo, perm, adv)


def run_pair_jw_battery(model, tokenizer, premises, hypotheses, labels=None,
                        settings: JWSettings | None = None, progress: bool = True,
                        cache_dir: str | None = None) -> tuple[PairJWInstances, dict]:
    """:func:`hf_attn.batteries.jw.battery.run_jw_battery` for pairs: the battery over the premise tokens of
    every (premise, hypothesis) pair, in premise-length-sorted batches bounded by
    ``settings.token_budget`` padded premise tokens; resumable through ``cache_dir``. Same summary
    keys as the single-sequence battery (per predicted class, here 3 classes for NLI)."""
    from hf_attn.core.sharding import run_sharded, scatter_rows

    settings = settings or JWSettings()
    settings.validate()
    premises, hypotheses = list(premises), list(hypotheses)
    if not premises:
        raise ValueError("no pairs to analyse")
    if len(premises) != len(hypotheses):
        raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
    max_length = settings.max_length or int(getattr(model.config, "max_tokens", 512))
    from hf_attn.adapters.contract import tokenize_texts

    encoded = tokenize_texts(tokenizer, premises, max_length)[0]
    hyp_encoded = tokenize_texts(tokenizer, hypotheses, max_length)[0]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    hyp_lengths = np.array([len(e) for e in hyp_encoded], dtype=np.int64)
    for name, values in (("premise", lengths), ("hypothesis", hyp_lengths)):
        if (values == 0).any():
            raise ValueError(f"{int((values == 0).sum())} {name}(s) have no tokens, e.g. index "
                             f"{int(np.flatnonzero(values == 0)[0])}: remove empty texts first")
    model.eval()
    batches = length_batches(lengths, settings.token_budget)
    key = settings_key(settings, model, np.concatenate([lengths, hyp_lengths])) if cache_dir else None
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
        **instance_fields(per_row))
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
    from hf_attn.core.io import read_json

    config = read_json(path)  # not JSON: a ValueError naming the file
    return isinstance(config, dict) and config.get("model_type") == "hf_attn_pair"


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


__all__ = ["PUBLISHED_SNLI", "QA_EPS", "published_for", "bind_query", "pair_predict", "pair_gradient_importance",
           "pair_leave_one_out", "pair_permutation_tvd", "pair_adversarial_attention",
           "run_pair_jw_battery", "PairJWInstances", "is_pair_model_dir", "load_pair_model_and_split"]
