"""Jain & Wallace 2019 battery (J&W §4): gradient importance, leave-one-out, attention
permutation and k-adversary attention over a whole split, batched over many instances per tensor
operation.

Shapes: B instances, T tokens (right-padded), P permutations, k adversaries, K decoder units,
C classes. ŷ is the class-probability vector ``logits.softmax(-1)`` (binary: ``[1 − σ(z), σ(z)]``).

The analyses are the plain tensor functions of :mod:`hf_attn.methods` (their names stay importable
from here); :func:`run_jw_battery` walks a whole split in length-sorted batches bounded by a token
budget (so IMDB-length inputs stay bounded in memory); sentence-pair (NLI) models go to
:mod:`hf_attn.batteries.jw.pair`. The ``hf-attn analyze DIR --battery jw`` folder entry, with typed
:class:`JWRunSettings`, is :func:`hf_attn.runs.jw.run`.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from hf_attn.batteries.jw.common import (JWInstances, JWRunSettings, JWSettings, adversary_options, batch_rows,
                                         battery_summary, format_summary, instance_fields, settings_key, timer)
from hf_attn.core.batching import in_row_chunks, length_batches, pad_batch
from hf_attn.methods.adversary import AdversaryResult, adversarial_attention, adversary_objective
from hf_attn.methods.gradient import gradient_importance
from hf_attn.methods.leave_one_out import deletion_batch, leave_one_out
from hf_attn.models.masks import attended_mask
from hf_attn.methods.permutation import permutation_tvd, random_permutations

# The old private name, kept for scripts/benchmark.py.
_in_row_chunks = in_row_chunks


# ----------------------------------------------------------------------------------------------
# the battery over a whole split


@torch.no_grad()
def predict(model, input_ids: torch.Tensor, attention_mask: torch.Tensor):
    """One forward: ``(probabilities (B, C), attention (B, T), hidden_states (B, T, D))``."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return out.logits.softmax(-1), out.attentions, out.hidden_states


def _run_batch(model, ids: torch.Tensor, mask: torch.Tensor, settings: JWSettings, batch_seed: int,
               timings: dict) -> dict:
    """Every analysis on one padded batch → per-row numpy results."""
    timed = timer(timings)
    probabilities, attention, hidden = timed("forward", lambda: predict(model, ids, mask))
    attended = attended_mask(model, mask)  # J&W's markers (if any) out of every analysis
    gradient = timed("gradient", lambda: in_row_chunks(
        lambda i, m: gradient_importance(model, i, m), ids, mask, settings.gradient_token_budget))
    loo = timed("leave_one_out", lambda: leave_one_out(model, ids, mask, settings.loo_token_budget,
                                                       probabilities))
    generator = torch.Generator().manual_seed(batch_seed)
    perm = timed("permutation", lambda: permutation_tvd(model, hidden, attention, attended,
                                                         settings.num_permutations, generator))
    adv = timed("adversary", lambda: adversarial_attention(
        model, hidden, attention, attended, **adversary_options(settings, batch_seed)))
    return batch_rows(mask, probabilities, attention, gradient, loo, perm, adv,
                      None if attended is mask else attended)


def run_jw_battery(model, tokenizer, texts, labels=None, settings: JWSettings | None = None,
                   progress: bool = True, cache_dir: str | None = None
                   ) -> tuple[JWInstances, dict]:
    """Run the whole J&W battery (§4) on ``texts`` → ``(per-instance arrays, summary)``.

    Texts are tokenized, sorted by length and processed in batches of at most
    ``settings.token_budget`` padded tokens; every analysis handles a batch in a few tensor ops.
    With ``cache_dir`` each batch's results are saved there, so a killed run resumes where it
    stopped (the cache is keyed by settings, model weights and the tokenized lengths). Empty texts
    (no tokens) are an error. ``labels`` (optional) only add the accuracy to the summary.
    """
    settings = settings or JWSettings()
    settings.validate()
    texts = list(texts)
    if not texts:
        raise ValueError("no texts to analyse")
    own = int(getattr(model.config, "max_tokens", 512))  # the forward refuses longer inputs
    max_length = own if settings.max_length is None else min(settings.max_length, own)
    from hf_attn.adapters.contract import tokenize_texts

    # documented policy: truncate to the model's limit and say so (a TruncationWarning per call)
    encoded, _ = tokenize_texts(tokenizer, texts, max_length, "start")
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    if (lengths == 0).any():
        raise ValueError(f"{int((lengths == 0).sum())} text(s) have no tokens, e.g. index "
                         f"{int(np.flatnonzero(lengths == 0)[0])}: remove empty texts first")
    model.eval()
    previous_threads = torch.get_num_threads()
    if settings.num_threads:  # on an oversubscribed CPU one thread avoids OpenMP barrier stalls
        torch.set_num_threads(settings.num_threads)
    try:
        return _run_all(model, tokenizer, texts, labels, settings, progress, cache_dir, encoded, lengths)
    finally:
        torch.set_num_threads(previous_threads)


def _run_all(model, tokenizer, texts, labels, settings, progress, cache_dir, encoded, lengths):
    from hf_attn.core.sharding import run_sharded, scatter_rows

    batches = length_batches(lengths, settings.token_budget)
    key = settings_key(settings, model, lengths) if cache_dir else None
    timings: dict[str, float] = {}
    started = time.perf_counter()

    def compute(number, rows):  # seeded by the batch number only: the same draws in any process
        ids, mask = pad_batch([encoded[i] for i in rows], tokenizer.pad_token_id or 0)
        return _run_batch(model, ids, mask, settings, settings.seed * 1_000_003 + 2 * number, timings)

    # Batches are cached atomically in cache_dir (a killed run resumes) and, under
    # `accelerate launch`, split between the processes and gathered on every one (hf_attn.core.sharding).
    results = run_sharded(batches, compute, cache_dir=cache_dir, key=key, progress=progress,
                          desc="J&W battery")
    per_row = scatter_rows(batches, results, len(texts))
    total = time.perf_counter() - started

    keep = _attended_positions(model, lengths)  # J&W's markers dropped from ids and lengths
    instances = JWInstances(
        input_ids=[np.asarray(e) if k is None else np.asarray(e)[k] for e, k in zip(encoded, keep)],
        labels=None if labels is None else np.asarray(list(labels), dtype=np.int64),
        **instance_fields(per_row))
    if keep[0] is not None:
        lengths = np.array([int(k.sum()) for k in keep], dtype=np.int64)
    summary = battery_summary(instances, lengths, settings, total, timings)
    return instances, summary


def _attended_positions(model, lengths: np.ndarray) -> list:
    """Per instance, the boolean positions of its tokens that the model attends over (None for
    all of them: a model without J&W's markers)."""
    width = int(lengths.max())
    mask = torch.arange(width).unsqueeze(0) < torch.as_tensor(lengths).unsqueeze(1)
    attended = attended_mask(model, mask)
    if attended is mask:
        return [None] * len(lengths)
    return [row[:n] for row, n in zip(attended.numpy(), lengths.tolist())]


# ----------------------------------------------------------------------------------------------
# `hf-attn analyze DIR --battery jw`


def load_model_and_split(model_dir: str, split: str = "test"):
    """``(model, tokenizer, texts, labels, label_names, dataset name)`` for a folder written by
    ``hf-attn train`` (its run.json names the dataset)."""
    from hf_attn.models.loading import load_model_folder
    from hf_attn.training.engine import settings_from_run, task_of

    run = settings_from_run(model_dir, needed_by="the jw battery")
    model, tokenizer = load_model_folder(model_dir, "hf_attn")
    task = task_of(run)
    if split not in task.splits:
        raise ValueError(f"split {split!r} not in {list(task.splits)}")
    data = task.splits[split]
    if "text" not in data.column_names:
        raise ValueError(f"the jw battery needs single-text data; {task.name} has {data.column_names}")
    return model, tokenizer, list(data["text"]), list(data["label"]), task.label_names, task.name


def check_papers_model_device(device: str, precision: str) -> None:
    """The papers' BiLSTM/CNN/Average batteries run on the CPU in float32 (their exact fast paths
    are CPU tensor code and the papers' numbers are float32): ``--device auto``/``cpu`` and
    ``--precision float32`` run; anything else is refused with this reason, never ignored."""
    if device not in ("auto", "cpu"):
        raise ValueError(f"--device {device}: the batteries of hf_attn's own BiLSTM/CNN/Average models run on the "
                         "CPU (their exact fast paths are CPU code); --device applies to transformers models")
    if precision != "float32":
        raise ValueError(f"--precision {precision}: hf_attn's own models are analysed in float32, the papers' "
                         "arithmetic; --precision applies to transformers models")


__all__ = ["JWInstances", "JWRunSettings", "JWSettings", "AdversaryResult", "adversarial_attention",
           "adversary_objective", "attended_mask", "battery_summary", "deletion_batch", "format_summary",
           "gradient_importance", "leave_one_out", "length_batches", "load_model_and_split", "pad_batch",
           "permutation_tvd", "predict", "random_permutations", "run_jw_battery"]
