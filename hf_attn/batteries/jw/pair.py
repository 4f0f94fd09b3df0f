"""Jain & Wallace 2019 battery on sentence-pair models (J&W §3–4, SNLI and QA rows of Tables 1–2):
attention, gradient importance and leave-one-out over the PREMISE tokens (the passage, for QA), the
hypothesis query Q (the question) held fixed; permutations and adversaries of the premise attention;
TVD over the classes (3 for NLI, the answers for QA; J&W's QA threshold ε = 0.05, :data:`QA_EPS`).

The battery is the one J&W driver, :func:`hf_attn.batteries.jw.battery.run_jw_battery`, through the
pair adapter (:class:`hf_attn.adapters.pair.PairAdapter`): its batches are batches of premises that
carry each pair's hypothesis, and every analysis takes the exact pair version of its method
(:mod:`hf_attn.methods`: ``pair_gradient_importance``, w.r.t. the premise embeddings with α detached,
J&W appendix B; ``pair_leave_one_out``, premise tokens deleted, the hypothesis unchanged;
``pair_adversarial_attention``, the TVD penalty back-propagated through the nonlinear J&W decoder
W_o tanh(W_c c + W_q Q + b); permutations from the cached states and Q). Their names stay importable
from here. What this module adds: :func:`run_pair_jw_battery` (pairs in, the hypotheses' token ids
and mean length recorded), J&W's published values (:func:`published_for`), QA's ε, and loading a
pair model's split (:func:`load_pair_model_and_split`).

``hf-attn analyze DIR --battery jw`` (:func:`hf_attn.runs.jw.run`) dispatches to
:func:`hf_attn.runs.jw.run_pair` for a folder holding an ``hf_attn_pair`` model.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, fields, replace

import numpy as np

from hf_attn.batteries.jw.common import WINDOW, JWInstances, JWSettings
from hf_attn.core.published import JW_QA_SUMMARY, JW_SNLI_SUMMARY
from hf_attn.methods.adversary import pair_adversarial_attention
from hf_attn.methods.gradient import pair_gradient_importance
from hf_attn.methods.leave_one_out import pair_leave_one_out
from hf_attn.methods.pair_query import bind_query
from hf_attn.methods.permutation import pair_permutation_tvd

PUBLISHED_SNLI = JW_SNLI_SUMMARY  # J&W Tables 1–2, SNLI (hf_attn.core.published)
QA_EPS = 0.05  # J&W §4.2.2: the adversary's TVD threshold on QA datasets (0.01 for classification)
# the most pairs in one batch (JWSettings' bound on batch_size): pairs are batched by token_budget alone
MAX_PAIRS_PER_BATCH = 65_536


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


# ----------------------------------------------------------------------------------------------
# the battery over a split of pairs


@dataclass
class PairJWInstances(JWInstances):
    """:class:`JWInstances` (premise-side arrays) plus each instance's hypothesis token ids."""

    hypothesis_ids: list = field(default_factory=list)


def run_pair_jw_battery(model, tokenizer, premises, hypotheses, labels=None,
                        settings: JWSettings | None = None, progress: bool = True,
                        cache_dir: str | None = None) -> tuple[PairJWInstances, dict]:
    """The J&W battery over the premise tokens of every (premise, hypothesis) pair: the one driver
    (:func:`hf_attn.batteries.jw.battery.run_jw_battery`) through the pair adapter, resumable through
    ``cache_dir``. Pairs are batched in premise-length-sorted batches bounded by
    ``settings.token_budget`` padded premise tokens alone (``batch_size`` and ``adversary_batch_size``
    do not cut them: each batch's number seeds its permutations and adversaries, so these are the
    batches, and the draws, of the recorded SNLI and bAbI runs). Same summary keys as the
    single-sequence battery (per predicted class, here 3 classes for NLI), plus the hypotheses' mean
    length."""
    from hf_attn.adapters.contract import TruncationWarning
    from hf_attn.adapters.pair import PairAdapter
    from hf_attn.batteries.jw.battery import run_jw_battery

    settings = settings or JWSettings()
    settings.validate()
    premises, hypotheses = list(premises), list(hypotheses)
    if not premises:
        raise ValueError("no pairs to analyse")
    if len(premises) != len(hypotheses):
        raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses")
    adapter = PairAdapter(model, tokenizer, spec=settings.spec, device=settings.device, precision=settings.precision,
                          token_budget=settings.token_budget,
                          max_length=None if settings.max_length == WINDOW else settings.max_length)
    pairs = list(zip(premises, hypotheses))
    whole = min(len(pairs), MAX_PAIRS_PER_BATCH)
    instances, summary = run_jw_battery(adapter, pairs, labels,
                                        replace(settings, batch_size=whole, adversary_batch_size=whole),
                                        progress=progress, cache_dir=cache_dir)
    with warnings.catch_warnings():  # the same cut as the battery's, already reported
        warnings.simplefilter("ignore", TruncationWarning)
        encoded = adapter.tokenize(pairs)[0]
    hypothesis_ids = [np.asarray(e.hypothesis) for e in encoded]
    instances = PairJWInstances(**{f.name: getattr(instances, f.name) for f in fields(JWInstances)},
                                hypothesis_ids=hypothesis_ids)
    summary["length"]["hypothesis_mean"] = float(np.mean([len(h) for h in hypothesis_ids]))
    summary["length"]["unit"] = "premise tokens (the passage's, for QA)"
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


__all__ = ["PUBLISHED_SNLI", "QA_EPS", "published_for", "bind_query", "pair_gradient_importance",
           "pair_leave_one_out", "pair_permutation_tvd", "pair_adversarial_attention",
           "run_pair_jw_battery", "PairJWInstances", "is_pair_model_dir", "load_pair_model_and_split"]
