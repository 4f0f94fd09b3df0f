"""Jain & Wallace 2019's battery (§4) on any classifier the engine accepts, through its adapter
(:mod:`hf_attn.adapters`): the papers' BiLSTM/CNN/Average models and any ``transformers`` sequence
classifier go through this one driver.

The explained attention is the row the classification head reads (:class:`hf_attn.adapters.AttentionSpec`):
the papers' models' one attention distribution α; for a transformer the query row(s) of one layer
(default the last: ``[CLS]`` for encoders, the last token for decoders, every row for mean-pooled
heads), averaged over heads or one head. All analyses run on **tokens** and only over the *content*
tokens (not special tokens, pads or J&W's ``<SOS>``/``<EOS>`` markers): those are what τ ranks, what a
permutation shuffles and what leave-one-out deletes; special tokens keep their own attention mass in
every intervention, so the row still sums to 1. The per-instance ``attention`` arrays are the
explained row over the content tokens, renormalised to sum to 1 (the specials' share is reported as
``special_token_mass``; the papers' models put none there).

Every analysis is a method of :mod:`hf_attn.methods` written once against the adapter; an adapter
over the papers' models (``adapter.exact_model_methods``) lets each method take its exact
model-level shortcut (hand-written BiLSTM backward, partial reruns, the closed-form adversary over
cached states):

- gradient (Alg. 1, :func:`hf_attn.methods.gradient.attention_fixed_gradient`);
- leave-one-out as LOO-TVD, TVD(ŷ(x₋t), ŷ(x)) (§4.1, :func:`hf_attn.methods.leave_one_out.deletion_importance`;
  not the faithfulness table's LOO-drop, :mod:`hf_attn.core.measure_names`);
- Kendall τ of attention vs gradient / LOO-TVD and gradient vs LOO-TVD with
  :data:`hf_attn.batteries.jw.summary.TIE_TOLERANCE`; for models with more than one layer also the
  τ of attention vs rollout (Abnar & Zuidema 2020) and τ per layer;
- permutation (Alg. 2, :func:`hf_attn.methods.permutation.permuted_attention_tvd`);
- adversary (Alg. 3, Eq. 1–2, :func:`hf_attn.methods.adversary.adversarial_rows`).

Shapes: B instances, T tokens (right-padded), P permutations, k adversaries, C classes.

Sentence-pair (NLI, QA) models run on this driver too, through :class:`hf_attn.adapters.pair.PairAdapter`:
its texts are ``(premise, hypothesis)`` pairs and its batches carry the hypothesis (the question) beside
the premise (the passage), the attended sequence every analysis works on; the pair-specific pieces
(the split, J&W's published values, QA's ε) are :mod:`hf_attn.batteries.jw.pair`'s.
``hf-attn analyze DIR --battery jw`` is :func:`hf_attn.runs.jw.run`.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np
import torch

from hf_attn.batteries.data import load_model_and_split  # noqa: F401 (its name stays importable here)
from hf_attn.batteries.jw.common import (WINDOW, JWInstances, JWRunSettings, JWSettings, battery_summary, format_summary,
                                         weights_checksum)
from hf_attn.core.batching import length_batches, pad_batch
from hf_attn.core.sharding import cache_key, run_sharded, scatter_rows
from hf_attn.methods.adversary import AdversaryResult, adversarial_attention, adversarial_rows, adversary_objective
from hf_attn.methods.adversary import restrict_to_content
from hf_attn.methods.gradient import attention_fixed_gradient, gradient_importance
from hf_attn.methods.leave_one_out import deletion_batch, deletion_importance, deletion_reference, leave_one_out
from hf_attn.methods.permutation import permutation_tvd, permuted_attention_tvd, random_permutations
from hf_attn.models.masks import attended_mask

# per-instance scalars (every other field is a per-instance array)
FLOAT_FIELDS = ("eps_max_jsd",)


@torch.no_grad()
def predict(model, input_ids: torch.Tensor, attention_mask: torch.Tensor):
    """One forward of a papers' model: ``(probabilities (B, C), attention (B, T), hidden_states (B, T, D))``."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return out.logits.softmax(-1), out.attentions, out.hidden_states


def _cut(values: torch.Tensor, content: torch.Tensor) -> list[np.ndarray]:
    """``(B, …, T)`` → per instance ``(…, n_content)`` float64 arrays (content positions only)."""
    keep = content.cpu().numpy()
    return [v[..., k] for v, k in zip(values.detach().double().cpu().numpy(), keep)]


def _in_chunks(fn, batch, budget: int):
    """``fn(sub_batch) → (b, T)`` over chunks of at most ``budget`` padded tokens, concatenated."""
    rows = max(1, budget // max(int(batch.input_ids.shape[1]), 1))
    if rows >= len(batch):
        return fn(batch)
    return torch.cat([fn(batch.select(list(range(start, min(start + rows, len(batch))))))
                      for start in range(0, len(batch), rows)])


def _length_batches(lengths: np.ndarray, batch_size: int, token_budget: int) -> list[np.ndarray]:
    """Length-sorted batches of at most ``token_budget`` padded tokens
    (:func:`hf_attn.core.batching.length_batches`), each cut to at most ``batch_size`` instances."""
    return [chunk for batch in length_batches(lengths, token_budget)
            for chunk in np.array_split(batch, -(-len(batch) // batch_size))]


def _length_limit(adapter, settings: JWSettings) -> int:
    """The settings' length (:meth:`JWSettings.length_for`; for the papers' models, single-text and pair
    alike, ``max_length`` or their own limit) within the adapter's limit: one of the two is always set
    (the papers' models always have a limit; a transformer's length is set)."""
    if getattr(adapter, "exact_model_methods", False):
        own = None if settings.max_length == WINDOW else settings.max_length
    else:
        own = settings.length_for(adapter.model)
    limits = [v for v in (own, adapter.max_length) if v is not None]
    if not limits:  # --max-length window on a model without a window: every token of every text
        return None
    return min(limits)


def run_jw_battery(adapter, texts, labels=None, settings: JWSettings | None = None,
                   progress: bool = True, cache_dir: str | None = None) -> tuple[JWInstances, dict]:
    """The whole J&W battery on ``texts`` through ``adapter`` → ``(per-instance results, summary)``
    (:class:`JWInstances` over each instance's content tokens, and :func:`jw_summary`). For a
    sentence-pair adapter (:class:`hf_attn.adapters.pair.PairAdapter`) ``texts`` are ``(premise,
    hypothesis)`` pairs and the content tokens the premise's.

    Texts are tokenized (cut to ``settings.max_length`` tokens, at most the model's limit, keeping
    the end the head reads, with a warning: :meth:`adapter.tokenize`), sorted by length and batched;
    every analysis is batched over instances (and permutations / adversaries as rows). Tensors stay
    on the adapter's device until each batch's results are cut out. Empty texts (no tokens) are an
    error. ``labels`` (optional) only add the accuracy to the summary.

    With ``cache_dir`` each finished batch is saved there atomically, so a killed run resumes where
    it stopped (the cache is keyed by the settings, the model's weights and the token ids), and under
    ``accelerate launch`` the batches are split between the processes and gathered on every one
    (:func:`hf_attn.core.sharding.run_sharded`). Every batch is seeded by its number only, so the
    results do not depend on the number of processes or on resuming.

    One pass per batch through the four analyses in J&W's order; the adversary runs in its own,
    larger batches (its cost is per step, not per instance); then the summaries
    (:func:`jw_summary`)."""
    settings = settings or JWSettings()
    settings.validate()
    if (settings.layer, settings.heads) != (adapter.spec.layer, adapter.spec.heads):
        raise ValueError(f"settings explain layer {settings.layer}, heads {settings.heads!r} but the adapter "
                         f"explains layer {adapter.spec.layer}, heads {adapter.spec.heads!r}: build the adapter "
                         "with settings.adapter(model, tokenizer)")
    precision = adapter.describe()["precision"]
    if settings.precision != precision:
        raise ValueError(f"settings ask for precision {settings.precision} but the adapter runs in {precision}: "
                         "build the adapter with settings.adapter(model, tokenizer)")
    texts = list(texts)
    if not texts:
        raise ValueError("no texts to analyse")
    encoded, word_ids = adapter.tokenize(texts, _length_limit(adapter, settings))
    lengths = np.array([len(e) for e in encoded])
    if (lengths == 0).any():
        raise ValueError(f"{int((lengths == 0).sum())} text(s) have no tokens, e.g. index "
                         f"{int(np.flatnonzero(lengths == 0)[0])}: remove empty texts first")
    previous = torch.get_num_threads()
    if settings.num_threads:  # on an oversubscribed CPU one thread avoids OpenMP barrier stalls
        torch.set_num_threads(settings.num_threads)
    try:
        return _run_all(adapter, texts, labels, settings, progress, cache_dir, encoded, word_ids, lengths)
    finally:
        torch.set_num_threads(previous)


def _main_rows(adapter, batch, settings: JWSettings, seed: int, timed) -> dict:
    """Forward, gradient, leave-one-out and permutation of one batch → per-instance numpy rows."""
    content = batch.content
    several_layers = adapter.num_layers > 1
    fwd = timed("forward", lambda: adapter.forward(batch, rollout=several_layers))
    grad = timed("gradient", lambda: _in_chunks(lambda b: attention_fixed_gradient(adapter, b), batch,
                                                settings.gradient_token_budget))
    reference = deletion_reference(adapter, fwd.probabilities)
    loo = timed("leave_one_out", lambda: deletion_importance(adapter, batch, reference, settings.loo_token_budget))
    generator = torch.Generator().manual_seed(seed)
    perm = timed("permutation", lambda: permuted_attention_tvd(adapter, batch, fwd, settings.num_permutations,
                                                               generator))
    mask = batch.attention_mask.bool()
    # the explained attention over the content tokens, renormalised (τ is unaffected; the heatmaps,
    # max-attention bins and the adversary's JSD compare this distribution)
    rows = {"attention": _cut(restrict_to_content(fwd.attention, content), content),
            "gradient": _cut(grad, content), "loo": _cut(loo, content),
            "probabilities": fwd.probabilities.double().cpu().numpy(),
            "permutation_tvd": perm.double().cpu().numpy(),
            "special_mass": (fwd.attention * (mask & ~content)).sum(-1).double().cpu().numpy(),
            "content": [c[m] for c, m in zip(content.cpu().numpy(), mask.cpu().numpy())]}
    if several_layers:  # one attention layer: rollout and the per-layer rows are α itself
        rows |= {"rollout": _cut(fwd.rollout, content), "layer_rows": _cut(fwd.layer_rows, content)}
    return rows


def _adversary_rows(adapter, batch, settings: JWSettings, seed: int, timed) -> dict:
    """J&W's adversaries (Alg. 3) of one batch → per-instance numpy rows."""
    content = batch.content
    fwd = adapter.forward(batch, rollout=False)
    generator = torch.Generator().manual_seed(seed)
    adv = timed("adversary", lambda: adversarial_rows(
        adapter, batch, fwd, k=settings.k, lam=settings.lam, eps=settings.eps, steps=settings.steps,
        lr=settings.lr, init_scale=settings.init_scale, generator=generator, divergence_on=settings.divergence_on))
    return {"adversary_attention": _cut(adv.attention, content),
            "adversary_tvd": adv.tvd.double().cpu().numpy(), "adversary_jsd": adv.jsd.double().cpu().numpy(),
            "adversary_jsd_row": adv.jsd_row.double().cpu().numpy(),
            "eps_max_jsd": adv.eps_max_jsd.double().cpu().numpy(),
            "adversary_probabilities": adv.probabilities.double().cpu().numpy()}


def _run_all(adapter, texts, labels, settings: JWSettings, progress, cache_dir, encoded, word_ids, lengths):
    from dataclasses import asdict

    from hf_attn.batteries.jw.common import timer

    timings: dict[str, float] = {}
    timed = timer(timings)

    def encode(rows):
        return adapter.from_token_lists([encoded[i] for i in rows], word_ids=[word_ids[i] for i in rows])

    def main_batch(number, rows):  # seeded by the batch number only: the same draws in any process
        return _main_rows(adapter, encode(rows), settings, settings.seed * 1_000_003 + 2 * number, timed)

    def adversary_batch(number, rows):
        return _adversary_rows(adapter, encode(rows), settings, settings.seed * 1_000_003 + 2 * number + 1, timed)

    key = None
    if cache_dir is not None:
        token_key = getattr(adapter, "token_key", None)  # a pair adapter's: premises and hypotheses
        if token_key is None:
            ids = np.concatenate([np.asarray(e, dtype=np.int64) for e in encoded])
            digest = hashlib.sha256(ids.tobytes()).hexdigest()
        else:
            digest = token_key(encoded)
        recorded = asdict(settings) | {"num_threads": None}
        key = cache_key("jw", recorded, weights_checksum(adapter.model), lengths.tolist(), digest,
                        adapter.describe()["text"])
    started = time.perf_counter()
    batches = _length_batches(lengths, settings.batch_size, settings.token_budget)
    adversary_batches = _length_batches(lengths, settings.adversary_batch_size, settings.token_budget)
    main = run_sharded(batches, main_batch, cache_dir=cache_dir, key=None if key is None else key + "-m",
                       progress=progress, desc="J&W battery")
    adversary = run_sharded(adversary_batches, adversary_batch, cache_dir=cache_dir,
                            key=None if key is None else key + "-a", progress=progress, desc="J&W adversary")
    total = time.perf_counter() - started
    per = [row | extra for row, extra in zip(scatter_rows(batches, main, len(texts)),
                                             scatter_rows(adversary_batches, adversary, len(texts)))]
    results = {name: [np.asarray(row[name]) if name not in FLOAT_FIELDS else float(row[name]) for row in per]
               for name in per[0]}
    content = results["content"]
    results["input_ids"] = [np.asarray(e)[c] for e, c in zip(encoded, content)]
    results["word_ids"] = [[w for w, c in zip(word_ids[i], content[i]) if c] for i in range(len(texts))]
    results["labels"] = None if labels is None else np.asarray(list(labels), dtype=np.int64)
    instances = jw_instances(results)
    return instances, jw_summary(instances, settings, total, timings, adapter)


def jw_summary(instances: JWInstances, settings: JWSettings, total: float, timings: dict, adapter) -> dict:
    """The battery's summary (:func:`hf_attn.batteries.jw.common.battery_summary`: J&W Table 2 per
    predicted class, the permutation and adversary summaries, timings; it also sets the per-instance
    predictions and Kendall τ) over the content tokens, plus, for a transformer, the ε-max JSD of the
    full explained rows and the specials' share of the row, and for a model with several layers the
    rollout τ and the τ per layer."""
    from hf_attn.batteries.jw.summary import correlation_summary

    lengths = np.array([len(a) for a in instances.attention])
    summary = battery_summary(instances, lengths, settings, total, timings)
    own = getattr(adapter, "exact_model_methods", False)
    summary["length"]["unit"] = ("tokens (J&W's <SOS>/<EOS> markers excluded)" if own
                                 else "content tokens (special tokens excluded)")
    if not own:
        summary["adversary_row_jsd"] = {
            "eps_max_mean": _eps_max_mean(instances.adversary_tvd, instances.adversary_jsd_row, settings.eps, lengths),
            "note": "ε-max JSD of the full explained rows (special tokens included)"}
        summary["special_token_mass"] = {"mean": float(np.mean(instances.special_mass)),
                                         "note": "attention of the explained row on special tokens (not ranked)"}
    if instances.rollout is not None:
        def corr(x, y):
            return correlation_summary(x, y, instances.predictions, summary["num_classes"], settings.alpha,
                                       tie_tolerance=settings.tie_tolerance)

        summary |= {"tau_rollout": corr(instances.attention, instances.rollout),
                    "tau_rollout_gradient": corr(instances.rollout, instances.gradient),
                    "tau_rollout_loo": corr(instances.rollout, instances.loo),
                    "per_layer": _per_layer(instances, settings, adapter.num_layers)}
    return summary


def _per_layer(instances: JWInstances, settings: JWSettings, num_layers: int) -> list[dict]:
    """Mean τ of each layer's explained row against the gradient and LOO-TVD."""
    from hf_attn.batteries.jw.summary import kendall_per_instance

    per_layer = []
    for layer in range(num_layers):
        rows = [r[layer] for r in instances.layer_rows]
        entry = {"layer": layer}
        for name, other in (("tau_gradient", instances.gradient), ("tau_loo", instances.loo)):
            k = kendall_per_instance(rows, other, tie_tolerance=settings.tie_tolerance)
            entry[name] = float(np.nanmean(np.where(k["valid"], k["tau"], np.nan)))
            entry[name + "_fraction_significant"] = float((k["pvalue"][k["valid"]] < settings.alpha).mean())
        per_layer.append(entry)
    return per_layer


def _eps_max_mean(adversary_tvd, adversary_jsd, eps: float, lengths: np.ndarray) -> float | None:
    """Mean over instances with ≥ 2 content tokens of the ε-max JSD (0 where no adversary is feasible)."""
    values = [float(np.where(t <= eps, j, 0.0).max()) for t, j, n in zip(adversary_tvd, adversary_jsd, lengths)
              if n >= 2]
    return float(np.mean(values)) if values else None


def jw_instances(results: dict) -> JWInstances:
    """The per-instance results (ragged lists and stacked arrays) as :class:`JWInstances`; the summary
    (:func:`jw_summary`) adds the predictions and the per-instance Kendall τ."""
    return JWInstances(
        input_ids=results["input_ids"], labels=results["labels"], probabilities=np.stack(results["probabilities"]),
        attention=results["attention"], gradient=results["gradient"], loo=results["loo"],
        permutation_tvd=np.stack(results["permutation_tvd"]), adversary_attention=results["adversary_attention"],
        adversary_probabilities=np.stack(results["adversary_probabilities"]),
        adversary_tvd=np.stack(results["adversary_tvd"]), adversary_jsd=np.stack(results["adversary_jsd"]),
        eps_max_jsd=np.array(results["eps_max_jsd"]), word_ids=results["word_ids"],
        special_mass=np.array(results["special_mass"], dtype=np.float64),
        adversary_jsd_row=np.stack(results["adversary_jsd_row"]),
        rollout=results.get("rollout"), layer_rows=results.get("layer_rows"))


# ----------------------------------------------------------------------------------------------
# `hf-attn analyze DIR --battery jw` on a folder trained by `hf-attn train`


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


__all__ = ["JWInstances", "JWRunSettings", "JWSettings", "AdversaryResult",
           "adversarial_attention", "adversary_objective", "attended_mask", "deletion_batch", "format_summary",
           "gradient_importance", "jw_instances", "jw_summary", "leave_one_out", "length_batches",
           "load_model_and_split", "pad_batch", "permutation_tvd", "predict", "random_permutations",
           "run_jw_battery"]
