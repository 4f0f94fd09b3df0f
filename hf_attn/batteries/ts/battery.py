"""Tutek & Šnajder 2020 battery ("ts"): how faithful is the attention of base vs regularised models.

Measures (shapes: B instances, T tokens, K decoder units, C classes, d / D sizes of e_t / h'_t):

1. **Fragility** (T&Š §3.2, §4.1, Table 1): F1 with the trained attention (Tr.), and the change in
   F1 (percentage points) when α is replaced at test time by the uniform distribution over the real
   tokens (Un.) or by a random permutation of α within the real tokens (Pm.). Decoder-only: the
   decoder is linear and Σα = 1, so logits(α) = Σ_t α_t (W h_t + b) (T&Š Eq. 9) — one
   ``token_logits`` pass serves every α. Permutations are averaged over ``permutation_draws``
   seeded draws (T&Š draw one; the estimand is the same, the variance lower).
2. **Mutual information** (T&Š §3.4, Table 2, after Voita et al. 2019): 1000 word types, the most
   frequent (MF) or a seeded sample without replacement ∝ count^0.75 (RS); up to 1M occurrences
   (a seeded subset if more); e_t (input embedding) and h_t on each side are clustered with
   ``MiniBatchKMeans(n_clusters=1000, batch_size=100, random_state=seed)``; MI of the two label
   sequences with ``mutual_info_score`` (nats). h_t is the state attention weighs, *after* the
   variant (``model.encode``): T&Š call Residual "close to the best realistically obtainable MI
   score as the model explicitly includes the input embedding in the hidden state" (so h^res =
   e + rnn(e)) and could not report Concat "as the dimensionality of the hidden vector is larger
   than the input embedding". We report Concat too (clustering does not need equal sizes), marked.
   Counts and occurrences come from ``mi_split`` (default: train, the largest split).
3. **Per-token prediction probability** (T&Š §5, Eq. 9, Table 3, Fig. 2): p̂_t = softmax of the
   decoder on h_t alone (all attention on t); for the correctly classified instances, the mean over
   real tokens of p̂_t[ŷ] (ŷ the model's prediction), averaged over instances.
4. **Adversaries on the regularised models** (T&Š §3.3, §4.3, Fig. 1): the J&W per-instance
   adversary (``hf_attn.batteries.jw.battery.adversarial_attention``) — mean JSD(α_adv, α) and mean
   TVD(ŷ_adv, ŷ) per model; the model-consistent W&P adversary lives in ``hf_attn.batteries.wp.battery``.

``hf-attn analyze DIR --battery ts --output-dir OUT`` writes ``OUT/results.json`` and figures;
``hf-attn ts-report GRID`` aggregates a trained grid (mean ± std over seeds) into tables + figures;
both folder jobs are :mod:`hf_attn.runs.ts`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from hf_attn.core.arguments import check_count, count, positive_int
from hf_attn.core.settings_cli import option
from hf_attn.core.published import TS_SST
from hf_attn.core.io import save_figure_atomic

# Same code as the NumPy measures every evaluate module ships (one source: that file, which must
# stay self-contained to load from the Hub without hf_attn).
from hf_attn.core.numpy_measures import (cluster_labels, clustered_mutual_information,  # noqa: F401
                                         token_probability_score)

logger = logging.getLogger(__name__)

WORD_SET_METHODS = ("MF", "RS")
SPLITS = ("train", "validation", "test")


# ------------------------------------------------------------------------------------------
# settings
@dataclass
class TSSettings:
    """Settings of the T&Š battery (``hf-attn analyze DIR --battery ts``, :func:`run_battery`); the
    field defaults are the battery's defaults (T&Š's where the paper states one).

    split: the split analysed. seed: seed of the permutations, the word sampling, the k-means and
    the adversary. progress: progress bars. permutation_draws: random permutations of α per
    instance (F1 averaged over draws; T&Š draw one). mi: compute the (slow) mutual information;
    mi_split: the split whose word counts and occurrences it uses; mi_words: word types per set
    (T&Š: 1000); mi_clusters: k of the k-means (T&Š: 1000); mi_max_occurrences: occurrences kept
    (a seeded subset above; T&Š: 1M). adversary: run the J&W per-instance adversary;
    adversary_limit: on the first N instances of the split (None: all). batch_size: instances per
    length-sorted batch (one shard of the per-instance measures).
    """

    # ``metadata=option(...)``: the field's ``hf-attn analyze --ts-*`` option (hf_attn.core.settings_cli)
    split: str = field(default="test", metadata=option(command="split"))
    seed: int = field(default=0, metadata=option(command="seed"))
    progress: bool = field(default=True, metadata=option(command="quiet", negate=True))
    permutation_draws: int = field(default=10, metadata=option(
        "random permutations of α per instance (F1 averaged over draws)", type=count(1, limit="permutations")))
    mi: bool = field(default=True, metadata=option("skip the (slow) MI clustering", flag="skip-mi", negate=True))
    mi_split: str = field(default="train", metadata=option(
        "split whose word counts and occurrences the MI uses", choices=SPLITS))
    mi_words: int = field(default=1000, metadata=option("word types per set (as T&Š)",
                                                        type=count(1, limit="word_types")))
    mi_clusters: int = field(default=1000, metadata=option("k of the k-means (as T&Š)",
                                                           type=count(1, limit="clusters")))
    mi_max_occurrences: int = field(default=1_000_000, metadata=option(
        "occurrences the MI clusters (a seeded subset above)", type=count(1, limit="occurrences")))
    adversary: bool = field(default=True, metadata=option("skip the J&W per-instance adversary",
                                                          flag="skip-adversary", negate=True))
    adversary_limit: int | None = field(default=500, metadata=option(
        "run the J&W adversary on the first N instances of the split", type=positive_int))
    batch_size: int = field(default=256, metadata=option(
        "instances per length-sorted batch; each batch is one shard of the per-instance measures, the shards "
        "split between the processes of `accelerate launch` and cached in OUT/cache for resuming",
        type=count(1, limit="tokens")))

    def validate(self) -> None:
        for name in ("split", "mi_split"):
            if getattr(self, name) not in SPLITS:
                raise ValueError(f"{name} must be one of {SPLITS}, got {getattr(self, name)!r}")
        from hf_attn.core.validation import check_whole

        for name, limit in (("permutation_draws", "permutations"), ("mi_words", "word_types"),
                            ("mi_clusters", "clusters"), ("mi_max_occurrences", "occurrences")):
            check_whole(name, getattr(self, name), 1, limit=limit)  # up to its upper bound, with the reason
        # the limit of the J&W adversary: 0 or a negative number is no limit the adversary can run with
        # (it does not mean "all"); without the adversary it is unused (hf-attn reproduce records 0)
        check_count("adversary_limit (--ts-adversary-limit)", self.adversary_limit, minimum=1 if self.adversary else 0)
        check_count("batch_size (--ts-batch-size)", self.batch_size, allow_none=False, limit="tokens")


# ------------------------------------------------------------------------------------------
# batches of model states
@dataclass
class StateBatch:
    """One padded batch: ``index (B,)`` positions in the split, ``input_ids``/``mask (B, T)``,
    ``embeddings (B, T, d)``, ``hidden (B, T, D)`` (h'_t after the variant), ``attention (B, T)``,
    ``token_logits (B, T, K)``, ``logits (B, C)``."""

    index: np.ndarray
    input_ids: torch.Tensor
    mask: torch.Tensor
    embeddings: torch.Tensor
    hidden: torch.Tensor
    attention: torch.Tensor
    token_logits: torch.Tensor
    logits: torch.Tensor


def encode_texts(tokenizer, texts, max_length: int) -> list[list[int]]:
    """Token ids of each text, cut to ``max_length`` with the shared
    :class:`~hf_attn.adapters.contract.TruncationWarning` when a text is longer."""
    from hf_attn.adapters.contract import tokenize_texts

    return tokenize_texts(tokenizer, list(texts), max_length)[0]


def length_sorted_batches(id_lists: list[list[int]], batch_size: int, pad_id: int = 0):
    """Yield ``(index (B,), input_ids (B, T), mask (B, T))`` over batches of similar length
    (less padding; every instance exactly once)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    lengths = np.fromiter((len(ids) for ids in id_lists), dtype=np.int64, count=len(id_lists))
    if (lengths == 0).any():
        raise ValueError(f"{int((lengths == 0).sum())} texts have no tokens")
    order = np.argsort(lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        index = order[start:start + batch_size]
        width = int(lengths[index].max())
        ids = torch.full((len(index), width), pad_id, dtype=torch.long)
        for row, i in enumerate(index):
            ids[row, :lengths[i]] = torch.as_tensor(id_lists[i])
        mask = torch.arange(width)[None] < torch.as_tensor(lengths[index])[:, None]
        yield index, ids, mask


@torch.no_grad()
def model_states(model, id_lists: list[list[int]], batch_size: int = 256):
    """Yield a :class:`StateBatch` per length-sorted batch (one encoder pass per instance)."""
    model.eval()
    for index, ids, mask in length_sorted_batches(id_lists, batch_size, model.config.pad_token_id):
        embeddings = model.embedding(ids)
        hidden = model.encode(embeddings, mask)
        attention = model.attend(hidden, mask)
        token_logits = model.token_logits(hidden)
        logits = model.logits_from_token_logits(token_logits, attention)
        yield StateBatch(index, ids, mask, embeddings * mask.unsqueeze(-1), hidden, attention,
                         token_logits, logits)


# ------------------------------------------------------------------------------------------
# 1. fragility
def uniform_attention(mask: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` bool mask → uniform α over the real tokens, 0 on pads."""
    weights = mask.to(torch.float32)
    return weights / weights.sum(-1, keepdim=True)


def permute_attention(attention: torch.Tensor, mask: torch.Tensor,
                      generator: torch.Generator, draws: int = 1) -> torch.Tensor:
    """``draws`` independent uniformly random permutations of each row's α within its real tokens.

    ``attention``, ``mask``: ``(B, T)`` → ``(draws, B, T)``; pads stay 0. Batched: sort random keys
    with pads pushed last, then gather."""
    batch, steps = mask.shape
    keys = torch.rand((draws, batch, steps), generator=generator)
    keys = keys.masked_fill(~mask.unsqueeze(0), 2.0)  # pads sort after every real token
    source = keys.argsort(dim=-1)  # position t takes α from real position source[t]
    permuted = attention.unsqueeze(0).expand(draws, -1, -1).gather(-1, source)
    return permuted * mask.unsqueeze(0).to(permuted.dtype)


def f1_score_of(predictions: np.ndarray, labels: np.ndarray, num_labels: int) -> float:
    """F1 as ``train`` reports it: positive class for binary tasks, macro otherwise (in [0, 1])."""
    from sklearn.metrics import f1_score

    if num_labels == 2:
        return float(f1_score(labels, predictions, pos_label=1, zero_division=0))
    return float(f1_score(labels, predictions, average="macro", labels=list(range(num_labels)),
                          zero_division=0))


def fragility_predictions(model, token_logits: torch.Tensor, attention: torch.Tensor,
                          mask: torch.Tensor, generator: torch.Generator,
                          permutation_draws: int = 10) -> dict[str, torch.Tensor]:
    """Predicted classes with trained ``(B,)``, uniform ``(B,)`` and permuted ``(draws, B)`` α,
    from cached ``token_logits (B, T, K)`` (decoder-only, T&Š Eq. 9)."""
    with torch.no_grad():
        trained = model.logits_from_token_logits(token_logits, attention).argmax(-1)
        uniform = model.logits_from_token_logits(token_logits, uniform_attention(mask)).argmax(-1)
        permuted_alpha = permute_attention(attention, mask, generator, permutation_draws)
        permuted = model.logits_from_token_logits(token_logits, permuted_alpha.permute(1, 0, 2))
    return {"trained": trained, "uniform": uniform, "permuted": permuted.argmax(-1).T}


def fragility_scores(labels, trained, uniform, permuted, num_labels: int) -> dict[str, float]:
    """T&Š Table 1 row, in percent: ``f1_trained`` and the *signed* changes ``delta_uniform`` /
    ``delta_permuted`` = F1(modified) − F1(trained) (negative = F1 drops, as T&Š print them).

    ``labels``, ``trained``, ``uniform``: ``(N,)``; ``permuted``: ``(draws, N)`` (mean F1 over
    draws)."""
    labels = np.asarray(labels)
    permuted = np.atleast_2d(np.asarray(permuted))
    if not (len(labels) == len(trained) == len(uniform) == permuted.shape[1]):
        raise ValueError("labels and predictions must have the same length")
    if len(labels) == 0:
        raise ValueError("no instances")
    f1_trained = 100 * f1_score_of(np.asarray(trained), labels, num_labels)
    f1_uniform = 100 * f1_score_of(np.asarray(uniform), labels, num_labels)
    f1_permuted = [100 * f1_score_of(p, labels, num_labels) for p in permuted]
    return {"f1_trained": f1_trained, "f1_uniform": f1_uniform,
            "f1_permuted": float(np.mean(f1_permuted)),
            "f1_permuted_std_over_draws": float(np.std(f1_permuted)),
            "delta_uniform": f1_uniform - f1_trained,
            "delta_permuted": float(np.mean(f1_permuted)) - f1_trained,
            "permutation_draws": int(permuted.shape[0]), "instances": int(len(labels))}


# ------------------------------------------------------------------------------------------
# 3. per-token prediction probability
def token_class_probabilities(model, token_logits: torch.Tensor) -> torch.Tensor:
    """``(B, T, K)`` decoder units per token → ``(B, T, C)`` class probabilities p̂_t (as if all
    attention were on t)."""
    return model.expand_logits(token_logits).softmax(-1)


def per_token_prediction_probability(token_probabilities: torch.Tensor, predicted: torch.Tensor,
                                     mask: torch.Tensor) -> torch.Tensor:
    """Mean over real tokens of p̂_t[ŷ]: ``(B, T, C)``, ``(B,)``, ``(B, T)`` → ``(B,)``."""
    index = predicted.view(-1, 1, 1).expand(-1, token_probabilities.shape[1], 1)
    chosen = token_probabilities.gather(-1, index).squeeze(-1) * mask.to(token_probabilities.dtype)
    return chosen.sum(-1) / mask.sum(-1).to(chosen.dtype)


# ------------------------------------------------------------------------------------------
# 2. mutual information
def count_token_ids(id_lists: list[list[int]], vocab_size: int, exclude=()) -> np.ndarray:
    """``(V,)`` occurrence counts of each id (``exclude``: special ids, counted as 0)."""
    flat = np.fromiter((i for ids in id_lists for i in ids), dtype=np.int64)
    counts = np.bincount(flat, minlength=vocab_size)
    counts[list(exclude)] = 0
    return counts


def select_word_types(counts: np.ndarray, size: int = 1000, method: str = "MF", seed: int = 0,
                      power: float = 0.75) -> np.ndarray:
    """Ids of ``size`` word types among those with count > 0 (T&Š §3.4).

    MF: the most frequent (ties → smaller id first). RS: a seeded sample without replacement with
    probability ∝ count^power (footnote 6: unigram^¾). Fewer types than ``size`` → all of them."""
    counts = np.asarray(counts)
    present = np.flatnonzero(counts > 0)
    if len(present) == 0:
        raise ValueError("no word occurrences to choose from")
    size = min(size, len(present))
    if method == "MF":
        order = np.lexsort((present, -counts[present]))
        return np.sort(present[order[:size]])
    if method == "RS":
        weights = counts[present].astype(np.float64) ** power
        rng = np.random.default_rng(seed)
        return np.sort(rng.choice(present, size=size, replace=False, p=weights / weights.sum()))
    raise ValueError(f"method must be one of {WORD_SET_METHODS}, got {method!r}")


def collect_occurrences(model, id_lists: list[list[int]], word_ids: np.ndarray,
                        max_occurrences: int = 1_000_000, seed: int = 0, batch_size: int = 256,
                        progress: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """e_t ``(N, d)``, h'_t ``(N, D)`` and token ids ``(N,)`` of every occurrence of ``word_ids``
    (a seeded subset of ``max_occurrences`` if there are more), in a batched forward pass."""
    from tqdm.auto import tqdm

    vocab_size = model.config.vocab_size
    selected = torch.zeros(vocab_size, dtype=torch.bool)
    selected[torch.as_tensor(word_ids, dtype=torch.long)] = True
    embeddings, hidden, tokens = [], [], []
    n_batches = math.ceil(len(id_lists) / batch_size)
    for states in tqdm(model_states(model, id_lists, batch_size), total=n_batches,
                       desc="collecting states", disable=not progress, leave=False):
        keep = states.mask & selected[states.input_ids]
        embeddings.append(states.embeddings[keep].numpy())
        hidden.append(states.hidden[keep].numpy())
        tokens.append(states.input_ids[keep].numpy())
    e, h, t = (np.concatenate(x) for x in (embeddings, hidden, tokens))
    if len(t) > max_occurrences:
        keep = np.sort(np.random.default_rng(seed).choice(len(t), max_occurrences, replace=False))
        e, h, t = e[keep], h[keep], t[keep]
    return e, h, t


def mutual_information(model, id_lists: list[list[int]], special_ids=(), methods=WORD_SET_METHODS,
                       num_words: int = 1000, max_occurrences: int = 1_000_000,
                       n_clusters: int = 1000, batch_size: int = 100, seed: int = 0,
                       progress: bool = False) -> dict[str, dict]:
    """T&Š Table 2 for one model: ``{"MF": {"mi": nats, "types", "occurrences", …}, "RS": …}``."""
    counts = count_token_ids(id_lists, model.config.vocab_size, exclude=special_ids)
    results = {}
    for method in methods:
        start = time.perf_counter()
        words = select_word_types(counts, num_words, method, seed)
        e, h, _ = collect_occurrences(model, id_lists, words, max_occurrences, seed,
                                      progress=progress)
        k = min(n_clusters, len(e))
        results[method] = {"mi": clustered_mutual_information(e, h, k, batch_size, seed),
                           "types": int(len(words)), "occurrences": int(len(e)), "n_clusters": k,
                           "upper_bound_log_k": float(math.log(k)),
                           "seconds": round(time.perf_counter() - start, 2)}
    return results


# ------------------------------------------------------------------------------------------
# list-level versions (the ``evaluate`` modules wrap these)
def pad_token_logits(token_logits, attentions=None):
    """Ragged per-instance ``token_logits`` (each ``(T_i, K)`` or ``(T_i,)`` for K = 1) and
    ``attentions`` (each ``(T_i,)``) → padded ``(B, T, K)``, ``(B, T)`` and mask ``(B, T)``."""
    rows = [torch.as_tensor(np.asarray(x, dtype=np.float32)) for x in token_logits]
    if not rows:
        raise ValueError("no instances")
    rows = [r.unsqueeze(-1) if r.dim() == 1 else r for r in rows]
    k = rows[0].shape[-1]
    if any(r.dim() != 2 or r.shape[-1] != k or r.shape[0] == 0 for r in rows):
        raise ValueError("each token_logits entry must be a non-empty (tokens, K) array, same K")
    steps = max(r.shape[0] for r in rows)
    padded = torch.zeros((len(rows), steps, k))
    mask = torch.zeros((len(rows), steps), dtype=torch.bool)
    for i, r in enumerate(rows):
        padded[i, :len(r)] = r
        mask[i, :len(r)] = True
    alpha = None
    if attentions is not None:
        if len(attentions) != len(rows):
            raise ValueError(f"{len(attentions)} attentions for {len(rows)} token_logits")
        alpha = torch.zeros((len(rows), steps))
        for i, a in enumerate(attentions):
            a = torch.as_tensor(np.asarray(a, dtype=np.float32))
            if a.shape != (len(rows[i]),):
                raise ValueError(f"instance {i}: attention has {tuple(a.shape)}, expected ({len(rows[i])},)")
            alpha[i, :len(a)] = a
    return padded, alpha, mask


class _Decoder:
    """What the fast paths need from a model, for raw arrays: K = 1 → sigmoid logits ``[0, z]``."""

    def __init__(self, num_outputs: int):
        self.num_outputs = num_outputs

    def expand_logits(self, raw):
        from hf_attn.models.modeling_hf_attn import expand_binary_logits

        return expand_binary_logits(raw) if self.num_outputs == 1 else raw

    def logits_from_token_logits(self, token_logits, attention):
        return self.expand_logits(torch.einsum("b...t,btk->b...k", attention, token_logits))


def fragility_from_token_logits(token_logits, attentions, references, seed: int = 0,
                                permutation_draws: int = 10) -> dict[str, float]:
    """T&Š Table 1 from per-instance decoder outputs ``(T_i, K)`` and trained α ``(T_i,)``."""
    tok, alpha, mask = pad_token_logits(token_logits, attentions)
    decoder = _Decoder(tok.shape[-1])
    preds = fragility_predictions(decoder, tok, alpha, mask, torch.Generator().manual_seed(seed),
                                  permutation_draws)
    num_labels = 2 if tok.shape[-1] == 1 else tok.shape[-1]
    return fragility_scores(np.asarray(references), preds["trained"].numpy(),
                            preds["uniform"].numpy(), preds["permuted"].numpy(), num_labels)


def token_probability_from_token_logits(token_logits, attentions, references) -> dict[str, float]:
    """T&Š Table 3 from per-instance decoder outputs ``(T_i, K)`` and trained α ``(T_i,)``."""
    tok, alpha, mask = pad_token_logits(token_logits, attentions)
    decoder = _Decoder(tok.shape[-1])
    predicted = decoder.logits_from_token_logits(tok, alpha).argmax(-1)
    per_instance = per_token_prediction_probability(decoder.expand_logits(tok).softmax(-1),
                                                    predicted, mask)
    return token_probability_score(per_instance.numpy(), predicted.numpy() == np.asarray(references))


# ------------------------------------------------------------------------------------------
# 4. adversary (J&W's code, on this model)
def jw_adversary_summary(model, batches: list[StateBatch], seed: int = 0, **kwargs) -> dict:
    """J&W's per-instance adversary (``hf_attn.batteries.jw.battery.adversarial_attention``, J&W Alg. 3) on
    this model, summarised as T&Š Fig. 1 plots it: per instance the chosen adversary is the one with
    the largest JSD(α_adv, α) among those with TVD(ŷ_adv, ŷ) ≤ ε (the one with the smallest TVD
    when none is within ε); ``mean_jsd``/``mean_tvd`` average over instances. Also J&W's own
    summary, the mean ε-max JSD, and the fraction of instances with an adversary within ε.
    """
    from hf_attn.batteries.jw.common import JWSettings
    from hf_attn.methods.adversary import adversarial_attention, best_feasible_adversary

    jsd, tvd, eps_max, feasible = [], [], [], []
    for b in batches:
        result = adversarial_attention(model, b.hidden, b.attention, b.mask, seed=seed, **kwargs)
        chosen = best_feasible_adversary(result.tvd, result.jsd, kwargs.get("eps", JWSettings.eps))
        best = chosen.index[:, None]
        jsd.append(result.jsd.gather(-1, best).squeeze(-1).numpy())
        tvd.append(result.tvd.gather(-1, best).squeeze(-1).numpy())
        eps_max.append(result.eps_max_jsd.numpy())
        feasible.append(chosen.any_feasible.numpy())
    jsd, tvd, eps_max, feasible = (np.concatenate(x) for x in (jsd, tvd, eps_max, feasible))
    return adversary_summary({"jsd": jsd, "tvd": tvd, "eps_max_jsd": eps_max, "feasible": feasible}, kwargs)


def adversary_summary(values: dict, settings: dict) -> dict:
    """:func:`jw_adversary_summary`'s dict from the chosen adversaries' per-instance ``jsd``, ``tvd``,
    ``eps_max_jsd`` and ``feasible`` arrays."""
    return {"status": "ok", "mean_jsd": float(values["jsd"].mean()), "mean_tvd": float(values["tvd"].mean()),
            "mean_eps_max_jsd": float(values["eps_max_jsd"].mean()),
            "fraction_feasible": float(values["feasible"].mean()), "instances": int(len(values["jsd"])),
            "settings": settings}


# ------------------------------------------------------------------------------------------
# the per-instance measures shard by shard (hf_attn.core.sharding.run_sharded): one shard = one
# batch of length_sorted_batches; under `accelerate launch` split between the processes and gathered
# on every one, cached for resuming. The same values as one loop over the batches: the permutations
# of α are one seeded generator's draws over the batches in order, so every process replays those
# draws (random keys only, no model) and hands each shard the state its batch started from; the
# adversary is seeded per batch already.
def plan_state_batches(id_lists: list[list[int]], batch_size: int) -> list[np.ndarray]:
    """The instance indices of each batch :func:`~hf_attn.batteries.ts.battery.length_sorted_batches`
    yields, in its order (every instance once)."""
    lengths = np.fromiter((len(ids) for ids in id_lists), dtype=np.int64, count=len(id_lists))
    if (lengths == 0).any():
        raise ValueError(f"{int((lengths == 0).sum())} texts have no tokens")
    order = np.argsort(lengths, kind="stable")
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def _one_batch(model, id_lists, indices: np.ndarray, batch_size: int):
    """The :class:`~hf_attn.batteries.ts.battery.StateBatch` of one planned batch (its instances in
    the planned order: they are sorted by length already) and its instances' split indices."""
    states = next(model_states(model, [id_lists[int(i)] for i in indices], batch_size))
    return states, np.asarray(indices)[states.index]


def _by_process(results: list[dict]) -> dict[str, list[int]]:
    out: dict[int, list[int]] = {}
    for number, r in enumerate(results):
        out.setdefault(int(r["process"]), []).append(number)
    return {str(k): v for k, v in sorted(out.items())}


def fragility_shards(model, id_lists, *, seed: int, permutation_draws: int, batch_size: int,
                     cache_dir: str | None = None, key: str | None = None, accelerator=None,
                     progress: bool = False) -> tuple[dict, dict]:
    """``({"trained", "uniform", "token_probability": (N,), "permuted": (draws, N)}, sharding)``."""
    from hf_attn.core.sharding import run_sharded

    batches = plan_state_batches(id_lists, batch_size)
    lengths = [len(ids) for ids in id_lists]
    generator = torch.Generator().manual_seed(seed)
    starts = []  # the generator's state at each batch: the draws of one loop over the batches
    for rows in batches:
        starts.append(generator.get_state())
        torch.rand((permutation_draws, len(rows), max(lengths[int(i)] for i in rows)), generator=generator)
    process = 0 if accelerator is None else int(accelerator.process_index)

    def compute(number: int, indices: np.ndarray) -> dict:
        b, rows = _one_batch(model, id_lists, indices, batch_size)
        if not np.array_equal(rows, indices):
            raise RuntimeError("a planned T&Š batch is not in length order")
        state = torch.Generator()
        state.set_state(starts[number])
        preds = fragility_predictions(model, b.token_logits, b.attention, b.mask, state, permutation_draws)
        probabilities = token_class_probabilities(model, b.token_logits)
        return {"trained": preds["trained"].numpy(), "uniform": preds["uniform"].numpy(),
                "permuted": preds["permuted"].numpy().T,  # (B, draws): instances first
                "token_probability": per_token_prediction_probability(probabilities, preds["trained"],
                                                                      b.mask).numpy(),
                "process": np.asarray(process)}

    results = run_sharded(batches, compute, cache_dir=cache_dir, key=key, accelerator=accelerator,
                          progress=progress, desc="ts shards")
    n = len(id_lists)
    out = {"trained": np.empty(n, dtype=np.int64), "uniform": np.empty(n, dtype=np.int64),
           "token_probability": np.empty(n), "permuted": np.empty((permutation_draws, n), dtype=np.int64)}
    for rows, r in zip(batches, results):
        for name in ("trained", "uniform", "token_probability"):
            out[name][rows] = r[name]
        out["permuted"][:, rows] = np.asarray(r["permuted"]).T
    return out, {"shards": len(batches), "shard_instances": batch_size, "shards_by_process": _by_process(results)}


def adversary_shards(model, id_lists, *, seed: int, batch_size: int, adversary_kwargs: dict,
                     cache_dir: str | None = None, key: str | None = None, accelerator=None,
                     progress: bool = False) -> tuple[dict, dict]:
    """J&W's per-instance adversary per batch: ``({"jsd", "tvd", "eps_max_jsd", "feasible"}: arrays in
    the batches' order, as one loop over the batches concatenates them), sharding)``."""
    from hf_attn.batteries.jw.common import JWSettings
    from hf_attn.core.sharding import run_sharded
    from hf_attn.methods.adversary import adversarial_attention, best_feasible_adversary

    batches = plan_state_batches(id_lists, batch_size)
    process = 0 if accelerator is None else int(accelerator.process_index)

    def compute(number: int, indices: np.ndarray) -> dict:
        b, _ = _one_batch(model, id_lists, indices, batch_size)
        result = adversarial_attention(model, b.hidden, b.attention, b.mask, seed=seed, **adversary_kwargs)
        chosen = best_feasible_adversary(result.tvd, result.jsd, adversary_kwargs.get("eps", JWSettings.eps))
        best = chosen.index[:, None]
        return {"jsd": result.jsd.gather(-1, best).squeeze(-1).numpy(),
                "tvd": result.tvd.gather(-1, best).squeeze(-1).numpy(),
                "eps_max_jsd": result.eps_max_jsd.numpy(), "feasible": chosen.any_feasible.numpy(),
                "process": np.asarray(process)}

    results = run_sharded(batches, compute, cache_dir=cache_dir, key=key, accelerator=accelerator,
                          progress=progress, desc="ts adversary shards")
    out = {name: np.concatenate([np.asarray(r[name]) for r in results])
           for name in ("jsd", "tvd", "eps_max_jsd", "feasible")}
    return out, {"shards": len(batches), "shard_instances": batch_size, "shards_by_process": _by_process(results)}


# ------------------------------------------------------------------------------------------
# loading and the battery's summary line
def load_run(model_dir: str, split: str = "test"):
    """``(model, tokenizer, TaskData)`` of a folder written by ``hf-attn train``."""
    from hf_attn.models.loading import load_model_folder
    from hf_attn.training.engine import settings_from_run, task_of

    settings = settings_from_run(model_dir, needed_by="the ts battery")
    model, tokenizer = load_model_folder(model_dir, "hf_attn")
    task = task_of(settings)
    if split not in task.splits:
        raise ValueError(f"split {split!r} not in {list(task.splits)}")
    return model, tokenizer, task


def analyze_model(model, tokenizer, task, settings: TSSettings | None = None, mi_methods=WORD_SET_METHODS,
                  adversary_kwargs: dict | None = None, batch_size: int | None = None, cache_dir: str | None = None,
                  key: str | None = None, accelerator="auto", **overrides) -> dict:
    """Every T&Š measure for one model (see the module docstring) with ``settings`` (None:
    :class:`TSSettings` defaults) and keyword ``overrides`` of single fields; returns a JSON-able
    dict with per-instance arrays under ``"per_instance"``. Long: the three measures in sequence
    over the same batches of states.

    The per-instance measures (fragility, the per-token prediction probability, the adversary) run
    batch by batch as shards (:func:`fragility_shards`, :func:`adversary_shards`): under ``accelerate launch`` split
    between the processes and gathered on every one (the same values as one process; recorded under
    ``processes`` and ``sharding``); with ``cache_dir`` and ``key`` (naming the model, the data and the
    settings) each finished batch is kept so a rerun resumes. The MI (clustering) runs whole."""
    from hf_attn.core.sharding import current_accelerator

    settings = replace(settings or TSSettings(), **overrides)
    settings.validate()
    split, seed, permutation_draws = settings.split, settings.seed, settings.permutation_draws
    adversary, adversary_limit, progress = settings.adversary, settings.adversary_limit, settings.progress
    batch_size = settings.batch_size if batch_size is None else batch_size
    if accelerator == "auto":
        accelerator = current_accelerator()

    max_length = model.config.max_tokens
    texts = list(task.splits[split]["text"])
    labels = np.asarray(task.splits[split]["label"])
    ids = encode_texts(tokenizer, texts, max_length)
    n = len(ids)
    start = time.perf_counter()
    per, sharding = fragility_shards(model, ids, seed=seed, permutation_draws=permutation_draws, batch_size=batch_size,
                                     cache_dir=cache_dir, key=None if key is None else key + "-f",
                                     accelerator=accelerator, progress=progress)
    trained = per["trained"]
    results = {"split": split, "instances": n, "seed": seed,
               "fragility": fragility_scores(labels, trained, per["uniform"], per["permuted"], task.num_labels),
               "token_probability": token_probability_score(per["token_probability"], trained == labels)}
    results["seconds_fragility_and_token_probability"] = round(time.perf_counter() - start, 2)

    if adversary:
        start = time.perf_counter()
        # on the first instances of the split (all without a limit), batched by length
        chosen = ids if adversary_limit is None else ids[:min(adversary_limit, n)]
        values, sharding["adversary"] = adversary_shards(
            model, chosen, seed=seed, batch_size=batch_size, adversary_kwargs=adversary_kwargs or {},
            cache_dir=cache_dir, key=None if key is None else key + "-a", accelerator=accelerator, progress=progress)
        results["jw_adversary"] = adversary_summary(values, adversary_kwargs or {})
        results["jw_adversary"]["seconds"] = round(time.perf_counter() - start, 2)
    if settings.mi:
        mi_split = settings.mi_split
        specials = sorted({model.config.pad_token_id, model.config.unk_token_id,
                           model.config.mask_token_id})
        mi_ids = ids if mi_split == split else encode_texts(tokenizer, task.splits[mi_split]["text"],
                                                              max_length)
        results["mutual_information"] = mutual_information(
            model, mi_ids, specials, mi_methods, settings.mi_words, settings.mi_max_occurrences,
            settings.mi_clusters, 100, seed, progress)
        results["mutual_information"]["split"] = mi_split
        results["mutual_information"]["hidden_state"] = (
            "h'_t after the variant (model.encode): e+rnn(e) for residual, [rnn(e); e] for concat")
    processes = 1 if accelerator is None else int(accelerator.num_processes)
    results["processes"] = processes
    results["sharding"] = {"processes": processes, **sharding}
    results["per_instance"] = {"label": labels, "trained": trained, "uniform": per["uniform"],
                               "token_probability": per["token_probability"]}
    return results


def token_probability_curve(model, tokenizer, text: str) -> dict:
    """One sentence's tokens, per-token P(class) ``(T, C)`` and the model's P(class) ``(C,)``."""
    ids = encode_texts(tokenizer, [text], model.config.max_tokens)
    b = next(model_states(model, ids, 1))
    probabilities = token_class_probabilities(model, b.token_logits)[0]
    return {"tokens": tokenizer.convert_ids_to_tokens(ids[0]),
            "token_probabilities": probabilities.numpy(),
            "probabilities": b.logits.softmax(-1)[0].numpy()}


def plot_token_probabilities(curves: dict[str, dict], path: str, class_index: int = 1,
                             class_name: str = "positive", title: str | None = None) -> None:
    """T&Š Fig. 2: per-token P(class) of one sentence for several models (solid) and each
    model's own P(class) (dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tokens = next(iter(curves.values()))["tokens"]
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(tokens) + 2), 3.6))
    colours = ["tab:red", "tab:green", "tab:blue", "tab:purple", "tab:orange", "tab:brown"]
    x = np.arange(len(tokens))
    for colour, (name, curve) in zip(colours, curves.items()):
        ax.plot(x, curve["token_probabilities"][:, class_index], "o-", color=colour, label=name)
        ax.axhline(curve["probabilities"][class_index], color=colour, linestyle=":")
    ax.axhline(0.5, color="grey", linewidth=0.6)
    ax.set_xticks(x)
    ax.set_xticklabels(tokens, rotation=60, ha="right")
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel(f"P({class_name}) from h_t alone")
    ax.set_title(title or "Per-token prediction probability (T&Š Fig. 2); dotted: model P")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=120)
    plt.close(fig)


def pick_example(task, split: str = "validation", min_tokens: int = 8, max_tokens: int = 20) -> int:
    """Index of the first instance with ``min_tokens``–``max_tokens`` words (T&Š took theirs from
    the SST validation split)."""
    texts = list(task.splits[split]["text"])
    for i, text in enumerate(texts):
        if min_tokens <= len(text.split()) <= max_tokens:
            return i
    return 0


def _num(value, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def _signed(value) -> str:
    return f"{value:+.1f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def format_ts_summary(results: dict) -> str:
    """The short table ``hf-attn analyze --battery ts`` prints (every number is in results.json)."""
    model = results.get("model") or {}
    lines = [f"T&Š battery: {model.get('encoder', '?')} + {model.get('attention', '?')} attention, variant "
             f"{model.get('variant', '?')}; {results.get('instances', '?')} {results.get('split', '')} instances"]
    frag = results.get("fragility") or {}
    if frag:
        lines.append(f"  {'fragility, F1 ×100 (Table 1)':34s} trained {_num(frag.get('f1_trained'), 1)}; "
                     f"uniform α {_num(frag.get('f1_uniform'), 1)} (Δ {_signed(frag.get('delta_uniform'))}); "
                     f"permuted α {_num(frag.get('f1_permuted'), 1)} (Δ {_signed(frag.get('delta_permuted'))}, "
                     f"{frag.get('permutation_draws', '?')} draws)")
    prob = results.get("token_probability") or {}
    if prob:
        lines.append(f"  {'per-token probability (Table 3)':34s} {_num(prob.get('token_probability'))} over "
                     f"{prob.get('correct_instances', '?')} correctly classified instances")
    mi = results.get("mutual_information") or {}
    sets = [(name, mi[name]) for name in ("MF", "RS") if isinstance(mi.get(name), dict)]
    if sets:
        lines.append(f"  {'mutual information, nats (Table 2)':34s} " + "; ".join(
            f"{name} {_num(v.get('mi'))} ({v.get('types', '?')} types, {v.get('n_clusters', '?')} clusters)"
            for name, v in sets))
    adversary = results.get("jw_adversary") or {}
    if adversary.get("status") == "ok":
        lines.append(f"  {'J&W adversary (Fig. 1)':34s} mean ε-max JSD {_num(adversary.get('mean_eps_max_jsd'))}, "
                     f"mean TVD {_num(adversary.get('mean_tvd'), 4)}, feasible "
                     f"{_num(adversary.get('fraction_feasible'), 2)} ({adversary.get('instances', '?')} instances)")
    lines.append(f"  {'seconds':34s} {results.get('seconds', '?')}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# the grid's variants, in table order (``hf-attn ts-report``: :mod:`hf_attn.runs.ts`)
VARIANT_ORDER = ("base", "concat", "residual", "tying", "mlm")


PUBLISHED_SST = TS_SST  # T&Š Tables 1–3, SST (hf_attn.core.published)


__all__ = ["uniform_attention", "permute_attention", "fragility_predictions", "fragility_scores",
           "token_class_probabilities", "per_token_prediction_probability",
           "token_probability_score", "count_token_ids", "select_word_types",
           "collect_occurrences", "cluster_labels", "clustered_mutual_information",
           "mutual_information", "jw_adversary_summary", "adversary_summary", "adversary_shards",
           "fragility_shards", "plan_state_batches", "analyze_model",
           "load_run", "model_states", "length_sorted_batches", "token_probability_curve",
           "plot_token_probabilities", "f1_score_of", "pad_token_logits",
           "fragility_from_token_logits", "token_probability_from_token_logits",
           "PUBLISHED_SST", "VARIANT_ORDER", "TSSettings", "format_ts_summary"]
