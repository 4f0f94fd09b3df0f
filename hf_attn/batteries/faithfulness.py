"""One faithfulness table: every attribution method (rows) scored by every faithfulness metric
(columns) on one model and one set of texts, with each method's time and peak memory per sentence.

:func:`run_faithfulness` works on any adapter that keeps the adapter contract
(:class:`hf_attn.adapters.base.AttentionAdapter`). Methods that read transformer internals (flow,
attention norm, ALTI, value zeroing) are skipped for models that lack them, with the reason in
:attr:`FaithfulnessResult.skipped` (never silently).

Metrics (:mod:`hf_attn.core.faithfulness`):

- ``comprehensiveness`` ↑ / ``sufficiency`` ↓: ERASER AOPC over the bins ``fractions`` (DeYoung et
  al. 2020, §4): the text's top-k tokens deleted / the only ones kept (special tokens always kept;
  sequences shortened, not masked; ties by position; k = ceil(f·n) in [1, n]);
- ``soft_comprehensiveness`` ↑ / ``soft_sufficiency`` ↑: Soft-NC / Soft-NS (Zhao & Aletras 2023,
  §3) as the authors' code computes them (``casszhao/multilingual-faith``,
  ``src/models/bert_components.py`` and ``src/common_code/metrics.py``): each element of a text
  token's vector at the embedding layer's output kept with the token's min–max-normalised importance
  (sufficiency) or 1 − it (comprehensiveness), normalised by the null input (every input id 0),
  clipped to [0, 1]. Special tokens are never masked (the authors' code masks them with their own
  normalised score). Each sentence draws its masks from a seed of its own tokens, so its value never
  depends on the other texts, their order or the batch size; the cell's Monte-Carlo standard error
  is reported and kept under ``soft_stderr`` by adding draws. ``soft_variant="embedding"`` is the
  other measurement (the word embeddings masked, the text's embeddings zeroed as the null input,
  unclipped and unbounded);
- ``naopc_comprehensiveness`` ↑ / ``naopc_sufficiency`` ↓: normalised AOPC (Edin et al. 2024, §3):
  the AOPC over **every** k = 1..N of deleting the tokens in descending (comprehensiveness) or
  ascending (sufficiency) order of importance, rescaled by the lowest and highest AOPC of any
  ordering. Bounds exact by dynamic programming over subsets for short sentences, by the paper's
  beam search (§4, ranked by the AOPC itself) for longer ones, and for the longest the extremes over
  the table's own orderings; the method of each sentence is in ``metric_details["naopc"]``
  (:mod:`hf_attn.core.naopc`; the authors' code: ``JoakimEdin/naopc``, ``aopc/aopc/methods.py``);
- ``tau_loo`` ↑: Kendall τ-b with leave-one-out (Jain & Wallace 2019, §3);
- ``agreement``: the mean over the other methods of the mean Kendall τ-b with them (Krishna et al.
  2022's rank agreement); the full matrix is :attr:`FaithfulnessResult.agreement`.

Every column reports its mean, interval, median, the sentences it covers and those where it is
undefined (``undefined``), and for every method a paired Wilcoxon test against the random floor
(``vs_random``). Rankings let ties share a rank and leave undefined values out.

Sharing: every deletion input (ERASER variants of every method and bin, the NAOPC searches, the
full inputs) is a token tuple scored once (:class:`_ProbabilityCache`): identical inputs across
methods and bins run one forward; ``result.forwards`` counts requested and unique inputs.

Cost: seconds per sentence (wall clock of the method over all batches / sentences) and peak memory
per sentence: for each batch, the peak resident-set size above the level at the batch's start
(psutil, sampled every 5 ms in a thread; on CUDA ``torch.cuda.max_memory_allocated`` above the
start), divided by the batch's sentences and averaged over batches.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
import warnings
import zlib
from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np
import torch

from hf_attn.adapters.base import UnsupportedModelError
from hf_attn.adapters.interface import InterventionError
from hf_attn.core.batching import length_batches, padding_bounded_batches
from hf_attn.core import faithfulness as fm
from hf_attn.core.numpy_measures import check_number, check_whole
from hf_attn.methods.eraser import DEFAULT_FRACTIONS, tokens_per_fraction

# name: (description with the paper, needs transformer internals)
METHODS = {
    "attention": ("raw attention α of the query row(s), adapter's layer/heads (Jain & Wallace 2019 §2)", False),
    "rollout": ("attention rollout (Abnar & Zuidema 2020 §3)", False),
    "attention_flow": ("attention flow, max-flow on the attention graph (Abnar & Zuidema 2020 §3)", True),
    "attention_norm": ("‖Σ_h α f(x)‖, explained layer (Kobayashi et al. 2020 §3)", True),
    "alti": ("ALTI contributions rolled out (Ferrando et al. 2022)", True),
    "value_zeroing": ("value zeroing rolled out (Mohebbi et al. 2023)", True),
    "saliency": ("‖∂ŷ_c/∂e_t‖₂ (Simonyan et al. 2014; Li et al. 2016)", False),
    "gradient_x_input": ("Σ_d e ∂ŷ_c/∂e, signed (Shrikumar et al. 2016)", False),
    "integrated_gradients": ("integrated gradients, signed, zero-embedding baseline (Sundararajan et al. 2017)",
                             False),
    "leave_one_out": ("ŷ_c(x) − ŷ_c(x₋t), token deleted (Li et al. 2016)", False),
    "kernel_shap": ("Kernel SHAP via captum (Lundberg & Lee 2017), optional extra", False),
    "deeplift": ("DeepLift rescale rule via captum where its hooks reach (Shrikumar et al. 2017), optional extra",
                 False),
    "random": ("uniform random scores (the floor)", False),
}
ATTENTION_FAMILY = ("attention", "rollout", "attention_flow", "attention_norm", "alti", "value_zeroing")
DEFAULT_METHODS = tuple(METHODS)
METRICS = ("comprehensiveness", "sufficiency", "soft_comprehensiveness", "soft_sufficiency",
           "naopc_comprehensiveness", "naopc_sufficiency", "tau_loo", "agreement")
HIGHER_IS_BETTER = {"comprehensiveness": True, "sufficiency": False, "soft_comprehensiveness": True,
                    "soft_sufficiency": True, "naopc_comprehensiveness": True, "naopc_sufficiency": False,
                    "tau_loo": True, "agreement": True}
UNDEFINED = {
    "comprehensiveness": "no tokens to delete", "sufficiency": "no tokens to delete",
    "soft_comprehensiveness": "ŷ(x) ≤ ŷ(null input): the normaliser 1 − S(x, ŷ, 0) is 0",
    "soft_sufficiency": "ŷ(x) ≤ ŷ(null input): the normaliser 1 − S(x, ŷ, 0) is 0",
    "naopc_comprehensiveness": "AOPC_min = AOPC_max (one token, or no deletion moves ŷ)",
    "naopc_sufficiency": "AOPC_min = AOPC_max (one token, or no deletion moves ŷ)",
    "tau_loo": "fewer than 2 tokens or constant scores", "agreement": "fewer than 2 tokens or constant scores"}


SOFT_VARIANTS = ("reference", "embedding")
NAOPC_PERTURBATIONS = ("delete", "mask")


@dataclass(frozen=True)
class FaithfulnessSettings:
    """What :func:`run_faithfulness` computes (module docstring).

    ``methods``: names from :data:`METHODS`; ``metrics``: the columns (a subset of :data:`METRICS`;
    ``tau_loo`` exists only when ``leave_one_out`` is among the methods); ``fractions``: ERASER bins.

    Integrated gradients: ``ig_rule`` quadrature (Gauss–Legendre by default) starting from
    ``ig_steps`` nodes; with ``ig_target`` (default 0.01) each sentence's nodes are doubled until its
    completeness gap |Σ_t IG_t − (f(x) − f(x'))| is within ``ig_target`` · |f(x) − f(x')| or
    ``ig_max_steps`` is reached (the sentences that miss it are counted); ``ig_target=None``: exactly
    ``ig_steps`` nodes. ``gradient_target``: f of saliency, gradient × input and IG,
    ``"probability"`` ŷ_c (default) or ``"logit"`` z_c (ferret's and inseq's choice);
    ``ig_baseline``: ``"zero"`` or ``"pad"`` (the pad token's embedding).

    Soft metrics: ``soft_variant`` ``"reference"`` (default: Zhao & Aletras's code — the mask on the
    embedding layer's output, the null input every id 0, scores clipped to [0, 1]) or
    ``"embedding"`` (the mask on the word embeddings, the null input the text's embeddings zeroed,
    no clipping); every sentence draws its own Bernoulli masks from a seed of its tokens, ``seed``
    and the method, ``soft_draws`` of them, doubled while a cell's Monte-Carlo standard error
    exceeds ``soft_stderr`` and the draws stay within ``soft_max_draws``.

    NAOPC (Edin et al. 2024): ``naopc_beam`` the beam width (0: no NAOPC columns); bounds exact for
    sentences of at most ``naopc_exact_max`` tokens (2^n forwards), by beam search up to
    ``naopc_beam_max`` tokens, beyond that the extremes over the table's own orderings (every
    method's, both directions) — each sentence's method is recorded; sentences over
    ``naopc_every_k_max`` tokens average that many evenly spaced k's instead of every k (an
    approximation, counted); ``naopc_perturbation``
    ``"delete"`` (default) or ``"mask"`` (the tokenizer's mask token, as the authors' code).

    ``flow_normalise``: attention flow divided per output row by its sum over the input tokens (the
    authors' code; default) or raw. ``shap_samples``: Kernel SHAP coalitions; ``batch_tokens``:
    padded tokens per method batch; ``seed``: the random floor and the soft draws; ``confidence``:
    of the intervals and the significance level (1 − confidence) of the paired tests."""

    methods: tuple[str, ...] = DEFAULT_METHODS
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    ig_steps: int = 16
    ig_rule: str = "gauss-legendre"
    ig_target: float | None = 0.01
    ig_max_steps: int = 256
    soft_variant: str = "reference"
    soft_draws: int = 10
    soft_max_draws: int = 40
    soft_stderr: float = 0.01
    naopc_beam: int = 1
    naopc_exact_max: int = 10
    naopc_beam_max: int = 32
    naopc_every_k_max: int = 64
    naopc_perturbation: str = "delete"
    flow_normalise: bool = True
    shap_samples: int = 64
    batch_tokens: int = 1024
    seed: int = 0
    confidence: float = 0.95
    metrics: tuple[str, ...] = METRICS
    gradient_target: str = "probability"
    ig_baseline: str = "zero"

    def __post_init__(self):
        for name in ("methods", "fractions", "metrics"):
            value = getattr(self, name)
            if not isinstance(value, (tuple, list)):
                raise ValueError(f"{name} must be a tuple, got {value!r}")
            if len(set(value)) != len(value):
                raise ValueError(f"{name} lists an item twice: {list(value)}")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ValueError(f"methods must be a non-empty subset of {list(METHODS)}, got {list(self.methods)}")
        if not self.fractions:
            raise ValueError(f"fractions must be a non-empty list of numbers in (0, 1], got {self.fractions!r}")
        for i, f in enumerate(self.fractions):
            check_number(f"fractions[{i}]", f, 0, 1, low_open=True)
        for name in ("ig_steps", "ig_max_steps", "soft_draws", "soft_max_draws", "shap_samples", "batch_tokens"):
            check_whole(name, getattr(self, name), 1)
        for name in ("naopc_beam", "naopc_exact_max", "naopc_beam_max", "seed"):
            check_whole(name, getattr(self, name), 0)
        check_whole("naopc_every_k_max", self.naopc_every_k_max, 2)
        if max(self.naopc_exact_max, self.naopc_beam_max) > self.naopc_every_k_max:
            raise ValueError(f"naopc_exact_max and naopc_beam_max must be ≤ naopc_every_k_max "
                             f"({self.naopc_every_k_max}): their bounds are over every k")
        from hf_attn.core.naopc import EXACT_LIMIT

        if self.naopc_exact_max > EXACT_LIMIT:
            raise ValueError(f"naopc_exact_max must be ≤ {EXACT_LIMIT} (2^n forwards per sentence), got "
                             f"{self.naopc_exact_max}")
        if self.ig_max_steps < self.ig_steps:
            raise ValueError(f"ig_max_steps ({self.ig_max_steps}) must be ≥ ig_steps ({self.ig_steps})")
        if self.soft_max_draws < self.soft_draws:
            raise ValueError(f"soft_max_draws ({self.soft_max_draws}) must be ≥ soft_draws ({self.soft_draws})")
        for name in ("ig_target", "soft_stderr", "confidence"):  # ig_target None: a fixed node count
            if name != "ig_target" or self.ig_target is not None:
                check_number(name, getattr(self, name), 0, 1, low_open=True, high_open=True)
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown or not self.metrics:
            raise ValueError(f"metrics must be a non-empty subset of {list(METRICS)}, got {list(self.metrics)}")
        choices = {"gradient_target": ("probability", "logit"), "ig_baseline": ("zero", "pad"),
                   "soft_variant": SOFT_VARIANTS, "naopc_perturbation": NAOPC_PERTURBATIONS}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {list(allowed)}, got {getattr(self, name)!r}")
        if not isinstance(self.flow_normalise, bool):
            raise ValueError(f"flow_normalise must be True or False, got {self.flow_normalise!r}")


# ------------------------------------------------------------------------------------------------
# running the methods


def _method_function(name: str, settings: FaithfulnessSettings):
    from hf_attn.methods import (adapter_integrated_gradients, alti, attention_flow, attention_norm, deletion,
                                 gradient_x_input, raw_attention, rollout, saliency, value_zeroing)

    if name == "random":
        generator = torch.Generator().manual_seed(settings.seed)

        def random_scores(adapter, batch):
            scores = torch.rand(batch.input_ids.shape, generator=generator).to(batch.input_ids.device)
            return torch.where(batch.content, scores, torch.zeros((), device=scores.device))
        return random_scores
    if name in ("kernel_shap", "deeplift"):  # the optional captum extra
        from hf_attn.methods.captum_attributions import captum_attribution, captum_available, deeplift_attribution

        reason = captum_available()
        if reason:
            raise ImportError(reason)
        if name == "deeplift":
            return deeplift_attribution
        return lambda adapter, batch: captum_attribution(adapter, batch, "kernel_shap", settings.shap_samples,
                                                         seed=settings.seed)
    target = settings.gradient_target
    if name == "integrated_gradients":
        return _IntegratedGradients(settings)
    if name in ("saliency", "gradient_x_input"):
        function = saliency.saliency if name == "saliency" else gradient_x_input.gradient_x_input
        return lambda adapter, batch: function(adapter, batch, target=target)
    return {"attention": raw_attention.raw_attention, "rollout": rollout.rollout_importance,
            "attention_flow": lambda adapter, batch: attention_flow.attention_flow(
                adapter, batch, normalise=settings.flow_normalise),
            "attention_norm": attention_norm.attention_norm,
            "alti": alti.alti, "value_zeroing": value_zeroing.value_zeroing,
            "leave_one_out": deletion.leave_one_out_deletion}[name]


class _IntegratedGradients:
    """The table's integrated gradients: each sentence's nodes doubled from ``ig_steps`` until its
    completeness gap is within ``ig_target`` of |f(x) − f(x')| (or ``ig_max_steps``), per batch;
    each sentence's final result is kept for :meth:`completeness`."""

    def __init__(self, settings: FaithfulnessSettings):
        self.settings = settings
        self.gaps, self.differences, self.steps = [], [], []

    def __call__(self, adapter, batch):
        from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution

        s = self.settings
        steps = s.ig_steps
        result = integrated_gradients_attribution(adapter, batch, steps, s.ig_rule, target=s.gradient_target,
                                                  baseline=s.ig_baseline)
        attributions = result.attributions.clone()
        gap = result.completeness_gap.double().cpu().clone()
        difference = (result.target_input - result.target_baseline).double().cpu().clone()
        used = torch.full((len(batch),), steps)
        while s.ig_target is not None and steps < s.ig_max_steps:
            missing = (gap.abs() > s.ig_target * difference.abs()) & (gap.abs() > 1e-9)
            if not bool(missing.any()):
                break
            steps = min(2 * steps, s.ig_max_steps)
            rows = missing.nonzero().flatten().tolist()
            again = integrated_gradients_attribution(adapter, batch.select(rows), steps, s.ig_rule,
                                                     target=s.gradient_target, baseline=s.ig_baseline)
            index = torch.tensor(rows)
            attributions[index.to(attributions.device)] = again.attributions
            gap[index] = again.completeness_gap.double().cpu()
            difference[index] = (again.target_input - again.target_baseline).double().cpu()
            used[index] = steps
        self.gaps.append(gap.numpy())
        self.differences.append(difference.numpy())
        self.steps.append(used.numpy())
        return attributions

    def completeness(self) -> dict:
        """Mean |gap|, mean |f(x) − f(x')|, the share of sentences within 1 % (and within the
        target), the nodes used (mean, max) and the sentences that missed the target at the cap."""
        gaps, differences = np.abs(np.concatenate(self.gaps)), np.abs(np.concatenate(self.differences))
        steps = np.concatenate(self.steps)
        s = self.settings
        within = gaps <= np.maximum(0.01 * differences, 1e-9)
        out = {"completeness_gap_mean_abs": float(gaps.mean()), "output_difference_mean_abs": float(differences.mean()),
               "completeness_within_1pct_share": float(np.mean(within)),
               "ig_steps_mean": float(steps.mean()), "ig_steps_max": int(steps.max())}
        if s.ig_target is not None:
            met = gaps <= np.maximum(s.ig_target * differences, 1e-9)
            out |= {"ig_target": s.ig_target, "ig_target_missed": int((~met).sum())}
        return out


class _SharedGradient:
    """Saliency (‖∂f/∂e_t‖₂) and gradient × input (Σ_d e ∂f/∂e) of a batch from one forward +
    backward: the saliency pass keeps gradient × input's scores per batch (keyed by its token ids),
    the gradient × input pass (``reuse``) reads them."""

    def __init__(self, target: str, store: dict, reuse: bool = False):
        self.target, self.store, self.reuse = target, store, reuse

    def __call__(self, adapter, batch):
        from hf_attn.methods.gradient_x_input import gradient_times_input
        from hf_attn.methods.saliency import embedding_gradient, saliency_from_gradient

        key = (tuple(batch.input_ids.shape), batch.input_ids.cpu().numpy().tobytes())
        if self.reuse and key in self.store:
            return self.store.pop(key)
        embeddings, grad, _ = embedding_gradient(adapter, batch, None, self.target)
        times_input = gradient_times_input(batch, embeddings, grad)
        if self.reuse:
            return times_input
        self.store[key] = times_input.detach()
        return saliency_from_gradient(batch, grad)


ROLLOUT_OF_ONE_LAYER = ("one attention layer over a recurrent, convolutional or averaging encoder: its rollout is "
                        "the attention row itself (the attention method)")


def _refusal(adapter, name: str) -> str | None:
    """Why ``name`` is not run on ``adapter`` before trying it (None: try it)."""
    if name == "rollout" and getattr(adapter, "num_layers", 1) == 1 and not hasattr(adapter, "_model_call"):
        return ROLLOUT_OF_ONE_LAYER
    return None


def attribution_scores(adapter, batch, method: str, settings: FaithfulnessSettings | None = None) -> torch.Tensor:
    """``(B, T)`` scores of one method of :data:`METHODS` (the battery's rows: each method's paper
    and equation are in its module under :mod:`hf_attn.methods`) on ``batch``, 0 on pads and special
    tokens. ``settings``: the method knobs of :class:`FaithfulnessSettings` (``ig_steps``,
    ``ig_rule``, ``shap_samples``, ``seed``). Raises :class:`UnsupportedModelError` with the reason
    where the method does not apply to the model (the battery's "skipped"), ``ImportError`` with the
    install hint for a captum method without captum, ``ValueError`` for an unknown ``method``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    reason = _refusal(adapter, method)
    if reason:
        raise UnsupportedModelError(reason)
    return _method_function(method, settings or FaithfulnessSettings())(adapter, batch)


class _PeakMemory:
    """Peak memory above the level at entry (module docstring: psutil RSS sampled in a thread, or
    CUDA's allocator peak)."""

    def __init__(self, device):
        self.cuda = getattr(device, "type", str(device)) == "cuda"
        self.peak = 0

    def __enter__(self):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
            return self
        import psutil

        self.process = psutil.Process()
        self.start = self.process.memory_info().rss
        self.top = self.start
        self.running = True

        def sample():
            while self.running:
                self.top = max(self.top, self.process.memory_info().rss)
                time.sleep(0.005)
        self.thread = threading.Thread(target=sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.peak = torch.cuda.max_memory_allocated() - self.start
            return False
        self.running = False
        self.thread.join()
        self.top = max(self.top, self.process.memory_info().rss)
        self.peak = self.top - self.start
        return False


class _ProbabilityCache:
    """ŷ of token-id tuples, each distinct tuple scored once, in length-sorted batched forwards."""

    def __init__(self, adapter, budget: int):
        self.adapter, self.budget = adapter, budget
        self.store: dict[tuple, np.ndarray] = {}
        self.requested = 0

    def get(self, sequences) -> np.ndarray:
        sequences = [tuple(s) for s in sequences]
        self.requested += len(sequences)
        missing = list(dict.fromkeys(s for s in sequences if s not in self.store))
        if missing:
            lengths = np.array([len(s) for s in missing])
            for group in length_batches(lengths, self.budget):
                rows = [list(missing[i]) for i in group]
                with torch.no_grad():
                    probs = self.adapter.logits(self.adapter.from_token_lists(rows)).softmax(-1).double().cpu().numpy()
                for i, p in zip(group, probs):
                    self.store[missing[i]] = p
        return np.stack([self.store[s] for s in sequences])


@dataclass
class _Instance:
    tokens: np.ndarray  # real positions' ids
    content: np.ndarray  # bool over real positions


def _instances(adapter, batch) -> list[_Instance]:
    out = []
    for b in range(len(batch)):
        real = batch.attention_mask[b].bool()
        out.append(_Instance(batch.input_ids[b][real].cpu().numpy(), batch.content[b][real].cpu().numpy()))
    return out


def _real_scores(batch, scores: torch.Tensor) -> list[np.ndarray]:
    return [scores[b][batch.attention_mask[b].bool()].detach().double().cpu().numpy() for b in range(len(batch))]


def _subset(instance: _Instance, keep_content: np.ndarray, pad: int) -> tuple:
    """The instance's tokens with only the content positions in ``keep_content`` (bool over the content
    tokens) kept, special tokens always kept; an empty result is one pad token."""
    keep = ~instance.content.copy()
    keep[np.flatnonzero(instance.content)[keep_content]] = True
    tokens = tuple(int(t) for t in instance.tokens[keep])
    return tokens or (pad,)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Rank (0 = most important) of each content token, ties by position."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=int)
    ranks[order] = np.arange(len(scores))
    return ranks


# ------------------------------------------------------------------------------------------------
# the result


@dataclass
class FaithfulnessResult:
    """Rows = methods, columns = metrics (module docstring).

    ``table[method][metric]``: ``{"mean", "low", "high", "n"}`` (interval over sentences; soft metrics
    add ``seed_low`` / ``seed_high`` over the seeds); ``cost[method]``: ``seconds_per_sentence``,
    ``peak_mb_per_sentence``, ``seconds``; ``skipped[method]``: why it did not run; ``agreement``:
    mean Kendall τ between methods; ``per_instance[method][metric]``: the per-sentence values;
    ``attributions[method]``: per sentence, the scores over its real positions; ``content``: per
    sentence, which real positions are the text's; ``forwards``: requested / unique erasure inputs."""

    methods: list[str]
    table: dict
    cost: dict
    skipped: dict
    agreement: dict
    per_instance: dict
    attributions: dict
    content: list
    settings: dict
    model: dict = field(default_factory=dict)
    num_instances: int = 0
    forwards: dict = field(default_factory=dict)
    texts: list = field(default_factory=list)
    metric_details: dict = field(default_factory=dict)

    def to_pandas(self):
        """DataFrame: one row per method that ran; per metric its mean, interval, median, the
        sentences it covers and the paired test's p against random, then the cost."""
        import pandas as pd

        rows = []
        for method in self.methods:
            row = {"method": method}
            for metric in METRICS:
                cell = self.table[method].get(metric)
                if cell is not None:
                    row[metric] = cell["mean"]
                    row[f"{metric}_low"] = cell["low"]
                    row[f"{metric}_high"] = cell["high"]
                    row[f"{metric}_median"] = cell.get("median", math.nan)
                    row[f"{metric}_n"] = cell.get("n", 0)
                    if "vs_random" in cell:
                        row[f"{metric}_p_vs_random"] = cell["vs_random"]["p"]
            row |= self.cost.get(method, {})
            rows.append(row)
        return pd.DataFrame(rows).set_index("method")

    def tidy(self):
        """Long-format DataFrame: one row per (method, metric) with ``mean``, ``low``, ``high``,
        ``median``, ``n`` and ``p_vs_random`` (NaN where the paired test did not run); the cost of each
        method as rows of metric ``"seconds"`` etc. is left to :meth:`to_pandas`."""
        import pandas as pd

        rows = []
        for method in self.methods:
            for metric in METRICS:
                cell = self.table[method].get(metric)
                if cell is None:
                    continue
                rows.append({"method": method, "metric": metric, "mean": cell["mean"], "low": cell["low"],
                             "high": cell["high"], "median": cell.get("median", math.nan), "n": cell.get("n", 0),
                             "p_vs_random": cell.get("vs_random", {}).get("p", math.nan)})
        return pd.DataFrame(rows, columns=["method", "metric", "mean", "low", "high", "median", "n", "p_vs_random"])

    @property
    def alpha(self) -> float:
        """The significance level of the paired tests: 1 − the intervals' confidence."""
        return 1 - float(self.settings.get("confidence", 0.95))

    def _mean(self, method: str, metric: str) -> float:
        return self.table.get(method, {}).get(metric, {}).get("mean", math.nan)

    def ranks(self, metric: str) -> dict:
        """{method: rank} on ``metric`` (1 = best): ties share a rank, undefined means get none (NaN)."""
        return fm.shared_ranks({m: self._mean(m, metric) for m in self.methods}, HIGHER_IS_BETTER[metric])

    def ranking(self, metric: str) -> list[str]:
        """Methods with a defined value on ``metric``, best first (tied methods in table order)."""
        ranks = self.ranks(metric)
        return sorted((m for m in self.methods if not math.isnan(ranks[m])), key=lambda m: ranks[m])

    def _ranked_metrics(self) -> list[str]:
        """The faithfulness metrics (agreement excluded) that can rank: at least two methods with a
        defined mean, and not all equal (one-token texts give every method the same score)."""
        out = []
        for metric in METRICS:
            if metric == "agreement":
                continue
            values = [v for v in (self._mean(m, metric) for m in self.methods) if math.isfinite(v)]
            if len(values) >= 2 and max(values) - min(values) > 1e-12:
                out.append(metric)
        return out

    def mean_rank(self, metrics=None) -> dict:
        """Each method's mean rank (1 = best; ties share a rank) over ``metrics`` (default: the
        metrics that can rank, :meth:`_ranked_metrics`), the random floor included; a metric where a
        method is undefined does not count for it."""
        metrics = [m for m in (metrics or self._ranked_metrics()) if m in self._ranked_metrics()]
        collected = {m: [] for m in self.methods}
        for metric in metrics:
            for method, rank in self.ranks(metric).items():
                if not math.isnan(rank):
                    collected[method].append(rank)
        return {m: float(np.mean(r)) if r else math.nan for m, r in collected.items()}

    def compare(self, a: str, b: str, metric: str) -> dict | None:
        """Paired Wilcoxon test of methods ``a`` and ``b`` on ``metric`` over the sentences where
        both are defined: ``{"p", "n", "median_difference", "better"}`` (``better``: which of the two
        is better when p < :attr:`alpha`, else None); None without per-sentence values."""
        values = self.per_instance
        if metric not in values.get(a, {}) or metric not in values.get(b, {}):
            # a result read back without its per-sentence values: the tests the run stored
            stored = self.metric_details.get("paired", {}).get(metric, {}).get(a, {}).get(b)
            if stored is None and b == "random":
                stored = self.table.get(a, {}).get(metric, {}).get("vs_random")
            if stored is None:
                return None
            test = dict(stored)
            mean_difference = test.pop("mean_difference", test.get("median_difference", math.nan))
        else:
            test = _paired(values[a][metric], values[b][metric])
            mean_difference = test.pop("mean_difference")
        test.pop("better", None)
        better = None
        if math.isfinite(test["p"]) and test["p"] < self.alpha and mean_difference != 0:
            better = a if (mean_difference > 0) == HIGHER_IS_BETTER[metric] else b
        return test | {"better": better}

    def below_random(self) -> list[tuple[str, str, float]]:
        """(method, metric, p) where a method is significantly *worse* than the random floor."""
        out = []
        for method in self.methods:
            if method == "random":
                continue
            for metric in self._ranked_metrics():
                test = self.compare(method, "random", metric)
                if test and test["better"] == "random":
                    out.append((method, metric, test["p"]))
        return out

    def sentence(self) -> str:
        """What the table says about attention vs the other methods, computed from the numbers: mean
        ranks (ties shared), and only the differences a paired test finds significant."""
        attention = [m for m in self.methods if m in ATTENTION_FAMILY]
        others = [m for m in self.methods if m not in ATTENTION_FAMILY and m != "random"]
        if "attention" not in self.methods or not others:
            return "The table has no raw attention row or no other method to compare it with."
        ranked = self._ranked_metrics()
        if not ranked:
            return (f"Over {self.num_instances} sentences every method scores alike on every metric (or no metric "
                    "is defined, e.g. one-token texts): the table cannot rank them.")
        ranks = self.mean_rank()
        order = sorted((m for m in self.methods if not math.isnan(ranks[m])), key=lambda m: ranks[m])
        best = order[0]
        floor = (f"; the random floor {ranks['random']:.1f}" if not math.isnan(ranks.get("random", math.nan)) else "")
        parts = [f"Over {self.num_instances} sentences, raw attention has mean rank {ranks['attention']:.1f} of "
                 f"{len(order)} methods across {len(ranked)} faithfulness metrics (1 = best, ties share a rank"
                 f"{floor}); the best overall is {best} ({ranks[best]:.1f})."]
        parts += self._comprehensiveness_claims()
        best_family = min(attention, key=lambda m: (math.isnan(ranks[m]), ranks[m]))
        best_other = min(others, key=lambda m: (math.isnan(ranks[m]), ranks[m]))
        claim = f"The best attention-family method is {best_family} ({ranks[best_family]:.1f}), the best of the " \
                f"others {best_other} ({ranks[best_other]:.1f})"
        test = self.compare(best_family, best_other, "comprehensiveness") if "comprehensiveness" in ranked else None
        if test is None or not math.isfinite(test["p"]):
            parts.append(claim + ".")
        elif test["better"] is None:
            parts.append(claim + f"; their comprehensiveness does not differ significantly (p = {test['p']:.2g}).")
        else:
            parts.append(claim + f"; by comprehensiveness {test['better']} is the more faithful (p = {test['p']:.2g}).")
        below = self.below_random()
        if below:
            parts.append("Below the random floor (paired test, p < " + f"{self.alpha:.2g}): "
                         + ", ".join(f"{m} on {k} (p = {p:.2g})" for m, k, p in below) + ".")
        tau = self._mean("attention", "tau_loo")
        if math.isfinite(tau):
            parts.append(f"Attention's Kendall τ with leave-one-out is {tau:.2f}.")
        return " ".join(parts)

    def _comprehensiveness_claims(self) -> list[str]:
        """Attention against the random floor and against the most comprehensive method, each only as
        far as a paired test carries it."""
        if "comprehensiveness" not in self._ranked_metrics():
            return []
        att = self.table["attention"]["comprehensiveness"]
        out = []
        if "random" in self.methods:
            test = self.compare("attention", "random", "comprehensiveness")
            if test and math.isfinite(test["p"]):
                verdict = ("not distinguishable from" if test["better"] is None else
                           "more comprehensive than" if test["better"] == "attention" else "less comprehensive than")
                out.append(f"By ERASER comprehensiveness attention ({att['mean']:.3f}) is {verdict} the random floor "
                           f"({self._mean('random', 'comprehensiveness'):.3f}; paired Wilcoxon p = {test['p']:.2g}).")
        top = next((m for m in self.ranking("comprehensiveness") if m not in ("attention", "random")), None)
        if top is not None:
            test = self.compare("attention", top, "comprehensiveness")
            if test and math.isfinite(test["p"]):
                if test["better"] is None:
                    out.append(f"Attention and {top}, the most comprehensive other method "
                               f"({self._mean(top, 'comprehensiveness'):.3f}), do not differ significantly "
                               f"(p = {test['p']:.2g}).")
                else:
                    out.append(f"{test['better']} is the more comprehensive of attention and {top} "
                               f"({att['mean']:.3f} vs {self._mean(top, 'comprehensiveness'):.3f}, p = {test['p']:.2g}).")
        return out

    def coverage(self) -> list[str]:
        """Per column: the sentences it covers, and why the others are undefined."""
        lines = []
        for metric in METRICS:
            cells = [self.table[m][metric] for m in self.methods if metric in self.table[m]]
            if not cells or metric == "agreement":  # agreement averages over methods, not sentences
                continue
            undefined = max(c.get("undefined", 0) for c in cells)
            line = f"{metric}: {min(c.get('n', 0) for c in cells)}–{max(c.get('n', 0) for c in cells)} of " \
                   f"{self.num_instances} sentences"
            if undefined:
                line += f" (up to {undefined} undefined: {UNDEFINED[metric]})"
            lines.append(line)
        return lines

    def summary(self) -> str:
        """Markdown: the table (mean [interval], median), coverage, the cost, the skipped methods and
        :meth:`sentence`."""
        metrics = [m for m in METRICS if any(m in self.table[x] for x in self.methods)]
        arrows = {m: "↑" if HIGHER_IS_BETTER[m] else "↓" for m in metrics}
        lines = ["| method | " + " | ".join(f"{m} {arrows[m]}" for m in metrics) + " | s / sentence | peak MB / sentence |",
                 "|---" * (len(metrics) + 3) + "|"]
        for method in self.methods:
            cells = []
            for metric in metrics:
                c = self.table[method].get(metric)
                if c is None or math.isnan(c["mean"]):
                    cells.append("–")
                    continue
                text = f"{c['mean']:.3f}" if math.isnan(c["low"]) else f"{c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"
                if math.isfinite(c.get("median", math.nan)):
                    text += f" med {c['median']:.3f}"
                if c.get("vs_random", {}).get("p", 1.0) < self.alpha:
                    text += " *"
                cells.append(text)
            cost = self.cost.get(method, {})
            lines.append(f"| {method} | " + " | ".join(cells)
                         + f" | {cost.get('seconds_per_sentence', math.nan):.4f} | {cost.get('peak_mb_per_sentence', math.nan):.2f} |")
        conf = int(round(100 * self.settings.get("confidence", 0.95)))
        lines += ["", f"{self.num_instances} sentences; [low, high] = {conf} % interval over sentences (Student t); "
                      f"med = median; * = differs from the random floor (paired Wilcoxon, p < {self.alpha:.2g}). "
                      f"Erasure inputs (leave-one-out's deletions among them): {self.forwards.get('requested', 0)} "
                      f"requested, {self.forwards.get('unique', 0)} unique forwards "
                      f"({100 * self.forwards.get('saved_share', 0.0):.0f} % shared)."]
        lines += [f"- {line}" for line in self.coverage()]
        lines += self._detail_lines()
        for method, reason in self.skipped.items():
            lines.append(f"- skipped {method}: {reason}")
        lines += ["", self.sentence()]
        return "\n".join(lines)

    def _detail_lines(self) -> list[str]:
        """How the soft metrics, NAOPC and integrated gradients were computed in this run."""
        lines = []
        soft = self.metric_details.get("soft")
        if soft:
            target = self.settings.get("soft_stderr", 0.01)
            lines.append(f"- soft metrics ({soft['variant']}): {soft['draws']} Bernoulli draws per sentence, largest "
                         f"Monte-Carlo standard error of a cell {soft['max_mc_stderr']:.3g}"
                         + (f" (above the {target:g} target at soft_max_draws; more sentences or draws lower it)"
                            if soft["max_mc_stderr"] > target else ""))
        naopc = self.metric_details.get("naopc")
        if naopc:
            b = naopc["bounds"]
            lines.append(f"- NAOPC bounds ({naopc['perturbation']}): exact on {b['exact']} sentences (≤ "
                         f"{naopc['exact_max_tokens']} tokens), beam search (width {naopc['beam_width']}, an "
                         f"approximation) on {b['beam']}, the extremes of the table's orderings (an approximation) "
                         f"on {b['orderings']}"
                         + (f"; {naopc['k_grid_sentences']} sentences over {naopc['every_k_max_tokens']} tokens "
                            f"average {naopc['every_k_max_tokens']} evenly spaced k's, not every k"
                            if naopc.get("k_grid_sentences") else ""))
        ig = self.cost.get("integrated_gradients", {})
        if "completeness_gap_mean_abs" in ig:
            text = (f"- integrated gradients ({self.settings.get('ig_rule')}, {ig.get('ig_steps_mean', math.nan):.0f} "
                    f"nodes on average, at most {ig.get('ig_steps_max', '?')}): |completeness gap| within 1 % of "
                    f"|f(x) − f(x')| on {100 * ig['completeness_within_1pct_share']:.0f} % of the sentences (mean |gap| "
                    f"{ig['completeness_gap_mean_abs']:.2g}, mean |f(x) − f(x')| {ig['output_difference_mean_abs']:.2g})")
            if "ig_target_missed" in ig:
                text += f"; {ig['ig_target_missed']} sentences missed the target at {self.settings.get('ig_max_steps')} nodes"
            lines.append(text)
        return lines

    def plot(self, path: str | None = None):
        """Heatmap methods × metrics (each column scaled to [0, 1] with 1 = best, the mean printed);
        saved atomically to ``path`` when given. Returns the figure."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        metrics = [m for m in METRICS if any(m in self.table[x] for x in self.methods)]
        values = np.array([[self.table[m].get(k, {}).get("mean", np.nan) for k in metrics] for m in self.methods])
        scaled = np.full_like(values, np.nan)
        for j, metric in enumerate(metrics):
            column = values[:, j]
            if np.isfinite(column).sum() >= 2 and np.nanmax(column) > np.nanmin(column):
                s = (column - np.nanmin(column)) / (np.nanmax(column) - np.nanmin(column))
                scaled[:, j] = s if HIGHER_IS_BETTER[metric] else 1 - s
        fig, ax = plt.subplots(figsize=(1.3 * len(metrics) + 2.5, 0.45 * len(self.methods) + 1.5))
        ax.imshow(np.ma.masked_invalid(scaled), cmap="viridis", vmin=0, vmax=1, aspect="auto")
        for i in range(len(self.methods)):
            for j in range(len(metrics)):
                if np.isfinite(values[i, j]):
                    ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if (np.isfinite(scaled[i, j]) and scaled[i, j] < 0.5) else "black")
        ax.set_xticks(range(len(metrics)), [f"{m} {'↑' if HIGHER_IS_BETTER[m] else '↓'}" for m in metrics],
                      rotation=35, ha="right", fontsize=8)
        ax.set_yticks(range(len(self.methods)), self.methods, fontsize=8)
        name = os.path.basename(str(self.model.get("name", "")).rstrip("/"))  # no local path in a figure
        ax.set_title(f"faithfulness, {name} ({self.num_instances} sentences); colour: 1 = best",
                     fontsize=9)
        fig.tight_layout()
        if path is not None:
            from hf_attn.core.io import save_figure_atomic
            save_figure_atomic(fig, path, dpi=130)
        return fig

    def save(self, directory: str) -> str:
        """``results.json`` (everything but the attributions) and ``attributions.npz``, both written
        atomically, plus ``faithfulness.md``; returns the folder."""
        from hf_attn.core.io import atomic_write, write_json_atomic, write_text_atomic

        os.makedirs(directory, exist_ok=True)
        payload = {k: v for k, v in asdict(self).items() if k not in ("attributions", "content", "per_instance")}
        payload["per_instance"] = {m: {k: np.asarray(v, dtype=float).tolist() for k, v in d.items()}
                                   for m, d in self.per_instance.items()}
        arrays = {}
        for method, rows in self.attributions.items():
            arrays[f"{method}__values"] = np.concatenate(rows) if rows else np.zeros(0)
        arrays["content__values"] = np.concatenate(self.content) if self.content else np.zeros(0, bool)
        arrays["lengths"] = np.array([len(c) for c in self.content])
        with atomic_write(os.path.join(directory, "attributions.npz"), "wb", encoding=None) as f:
            np.savez(f, **arrays)
        write_json_atomic(os.path.join(directory, "results.json"), payload)
        write_text_atomic(os.path.join(directory, "faithfulness.md"), self.summary() + "\n")
        return directory

    @classmethod
    def load(cls, directory: str) -> "FaithfulnessResult":
        with open(os.path.join(directory, "results.json"), encoding="utf-8") as f:
            payload = json.load(f)
        with np.load(os.path.join(directory, "attributions.npz")) as data:
            cuts = np.cumsum(data["lengths"])[:-1]
            content = [c.astype(bool) for c in np.split(data["content__values"], cuts)]
            attributions = {k[: -len("__values")]: np.split(data[k], cuts) for k in data.files
                            if k.endswith("__values") and k != "content__values"}
        return cls.from_payload(payload, attributions, content)

    @classmethod
    def from_payload(cls, payload: dict, attributions: dict | None = None, content: list | None = None
                     ) -> "FaithfulnessResult":
        """The result from the content of its ``results.json`` (extra keys of the folder battery such
        as ``request`` ignored; missing per-sentence values and attributions empty), enough for
        :meth:`summary`, :meth:`sentence`, :meth:`to_pandas` and :meth:`plot`."""
        names = {f.name for f in fields(cls)} - {"attributions", "content"}
        missing = sorted({"methods", "table", "cost", "skipped", "settings"} - set(payload))
        if missing:
            raise ValueError(f"payload is not a faithfulness result: it lacks {missing}")
        kept = {k: v for k, v in payload.items() if k in names}
        kept["per_instance"] = {m: {k: np.asarray(v, dtype=float) for k, v in d.items()}
                                for m, d in (payload.get("per_instance") or {}).items()}
        kept.setdefault("agreement", {})
        kept.setdefault("metric_details", {})
        for key in ("table", "agreement", "cost", "metric_details"):  # JSON wrote NaN as null
            kept[key] = _nan_for_none(kept[key])
        return cls(attributions=attributions or {}, content=content or [], **kept)


def _nan_for_none(value):
    if isinstance(value, dict):
        return {k: _nan_for_none(v) for k, v in value.items()}
    return math.nan if value is None else value


# ------------------------------------------------------------------------------------------------
# the battery


def _erasure(cache, instances, scores, counts, pad):
    """ERASER drops (N, K) comprehensiveness and sufficiency of one method."""
    removed, kept = [], []
    for inst, s, ks in zip(instances, scores, counts):
        ranks = _ranks(s[inst.content])
        for k in ks:
            top = ranks < k
            removed.append(_subset(inst, ~top, pad))
            kept.append(_subset(inst, top, pad))
    n, bins = len(instances), counts.shape[1]
    p_removed = cache.get(removed).reshape(n, bins, -1)
    p_kept = cache.get(kept).reshape(n, bins, -1)
    return p_removed, p_kept


def _perturbed(instance: _Instance, removed: int, pad: int, mask_id: int | None) -> tuple:
    """The instance's tokens with the content tokens in the bit mask ``removed`` deleted (``mask_id``
    None) or replaced by ``mask_id``; special tokens always kept; an empty result is one pad token."""
    content = np.flatnonzero(instance.content)
    hit = np.array([bool(removed >> t & 1) for t in range(len(content))], dtype=bool)
    if mask_id is not None:
        tokens = instance.tokens.copy()
        tokens[content[hit]] = mask_id
        return tuple(int(t) for t in tokens)
    return _subset(instance, ~hit, pad)


class _Drops:
    """d(S) = ŷ_c(x) − ŷ_c(x with S perturbed) for bit masks S over each instance's content tokens,
    through the shared probability cache (one forward per distinct input)."""

    def __init__(self, cache, instances, p_full, predicted, pad, mask_id):
        self.cache, self.instances, self.p_full, self.predicted = cache, instances, p_full, predicted
        self.pad, self.mask_id = pad, mask_id

    def __call__(self, requests: list[tuple[int, int]]) -> np.ndarray:
        """``requests``: (instance, bit mask) pairs → their drops."""
        if not requests:
            return np.zeros(0)
        inputs = [_perturbed(self.instances[i], mask, self.pad, self.mask_id) for i, mask in requests]
        probs = self.cache.get(inputs)
        rows = np.array([i for i, _ in requests])
        return self.p_full[rows] - probs[np.arange(len(requests)), self.predicted[rows]]


def _paired(a, b) -> dict:
    """:func:`hf_attn.core.faithfulness.paired_test` plus the mean paired difference a − b."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = np.isfinite(a) & np.isfinite(b)
    return fm.paired_test(a, b) | {"mean_difference": float((a[both] - b[both]).mean()) if both.any() else math.nan}


def _cached_leave_one_out(cache, instances, p_full, predicted, pad) -> list[np.ndarray]:
    """Leave-one-out ŷ_c(x) − ŷ_c(x₋t) per text token (Li et al. 2016; the ``leave_one_out`` method's
    definition) with every deletion scored through the shared cache, so the ERASER and NAOPC inputs
    that delete one token reuse these forwards. Per instance, over its real positions (0 on specials)."""
    requests, owners = [], []
    for i, inst in enumerate(instances):
        size = int(inst.content.sum())
        for t in range(size):
            keep = np.ones(size, bool)
            keep[t] = False
            requests.append(_subset(inst, keep, pad))
            owners.append((i, t))
    probs = cache.get(requests)
    out = [np.zeros(len(inst.tokens)) for inst in instances]
    positions = [np.flatnonzero(inst.content) for inst in instances]
    for (i, t), p in zip(owners, probs):
        out[i][positions[i][t]] = p_full[i] - p[predicted[i]]
    return out


def naopc_sizes(n: int, every_k_max: int) -> np.ndarray:
    """The k's an AOPC averages for a sentence of ``n`` tokens: every k = 1..n (Edin et al. §3) up to
    ``every_k_max`` tokens; beyond, ``every_k_max`` k's evenly spaced from 1 to n (an approximation
    that keeps a 512-token sentence to a few hundred forwards per ordering, recorded)."""
    if n <= every_k_max:
        return np.arange(1, n + 1)
    return np.unique(np.round(np.linspace(1, n, every_k_max)).astype(np.int64))


def _ordering_aopcs(drops: _Drops, orders: list[np.ndarray], every_k_max: int) -> np.ndarray:
    """AOPC of one ordering per instance over the k's of :func:`naopc_sizes`: ``(N,)``."""
    from hf_attn.core.naopc import ordering_masks

    requests, spans = [], []
    for i, order in enumerate(orders):
        masks = ordering_masks(order)
        chosen = [masks[k - 1] for k in naopc_sizes(len(order), every_k_max)]
        spans.append((len(requests), len(chosen)))
        requests += [(i, m) for m in chosen]
    values = drops(requests)
    return np.array([values[at:at + count].mean() if count else math.nan for at, count in spans])


def _naopc_bounds(drops: _Drops, sizes: np.ndarray, settings, own: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """AOPC_min and AOPC_max per instance (:mod:`hf_attn.core.naopc`), with the method used:
    ``"exact"`` (n ≤ ``naopc_exact_max``), ``"beam"`` (n ≤ ``naopc_beam_max``), else
    ``"orderings"``; ``own`` ``(M, N)``: the AOPC of the table's orderings, which every bound is
    widened to contain (each is an ordering too)."""
    from hf_attn.core.naopc import BeamSearch, all_subsets, exact_bounds

    n = len(sizes)
    low, high = own.min(0).copy(), own.max(0).copy()
    how = ["orderings"] * n
    exact = [i for i in range(n) if sizes[i] <= settings.naopc_exact_max]
    requests = [(i, m) for i in exact for m in all_subsets(int(sizes[i]))[1:]]
    values = drops(requests)
    at = 0
    for i in exact:
        count = (1 << int(sizes[i])) - 1
        lo, hi = exact_bounds(int(sizes[i]), np.concatenate([[0.0], values[at:at + count]]))
        low[i], high[i], how[i] = min(lo, low[i]), max(hi, high[i]), "exact"
        at += count
    searches = {(i, highest): BeamSearch(int(sizes[i]), settings.naopc_beam, highest)
                for i in range(n) if settings.naopc_exact_max < sizes[i] <= settings.naopc_beam_max
                for highest in (True, False)}
    while any(not b.done for b in searches.values()):
        asked = {key: b.requests() for key, b in searches.items() if not b.done}
        values = drops([(key[0], m) for key, masks in asked.items() for m in masks])
        at = 0
        for key, masks in asked.items():
            searches[key].update(values[at:at + len(masks)])
            at += len(masks)
    for (i, highest), search in searches.items():
        if highest:
            high[i] = max(high[i], search.value)
        else:
            low[i] = min(low[i], search.value)
        how[i] = "beam"
    return low, high, how


def _naopc_columns(cache, instances, scores, methods, p_full, predicted, settings, pad, mask_id) -> dict:
    """Per method ``{"naopc_comprehensiveness", "naopc_sufficiency"}`` ``(N,)`` and the bounds'
    provenance (Edin et al. 2024 §3–4; :mod:`hf_attn.core.naopc`)."""
    start = time.perf_counter()
    drops = _Drops(cache, instances, p_full, predicted, pad, mask_id)
    sizes = np.array([int(i.content.sum()) for i in instances])
    descending, ascending = {}, {}
    for method in methods:
        content_scores = [row[inst.content] for row, inst in zip(scores[method], instances)]
        every = settings.naopc_every_k_max
        descending[method] = _ordering_aopcs(drops, [np.argsort(-c, kind="stable") for c in content_scores], every)
        ascending[method] = _ordering_aopcs(drops, [np.argsort(c, kind="stable") for c in content_scores], every)
    own = np.stack([descending[m] for m in methods] + [ascending[m] for m in methods])
    low, high, how = _naopc_bounds(drops, sizes, settings, own)
    columns = {m: {"naopc_comprehensiveness": fm.normalised_aopc(descending[m], low, high),
                   "naopc_sufficiency": fm.normalised_aopc(ascending[m], low, high)} for m in methods}
    info = {"bounds": {k: how.count(k) for k in ("exact", "beam", "orderings")},
            "bound_method": how, "aopc_min": low.tolist(), "aopc_max": high.tolist(),
            "perturbation": settings.naopc_perturbation, "exact_max_tokens": settings.naopc_exact_max,
            "beam_max_tokens": settings.naopc_beam_max, "beam_width": settings.naopc_beam,
            "every_k_max_tokens": settings.naopc_every_k_max,
            "k_grid_sentences": int((sizes > settings.naopc_every_k_max).sum()),
            "seconds": time.perf_counter() - start}
    return {"columns": columns, "info": info}


def _sentence_generator(settings, method: str, tokens: np.ndarray, kind: str, draw: int) -> torch.Generator:
    """A generator seeded by the sentence's own tokens, the method, the kind of mask and the draw
    (never by its place in a batch)."""
    material = np.random.SeedSequence([settings.seed, zlib.crc32(method.encode()), zlib.crc32(kind.encode()),
                                       zlib.crc32(np.asarray(tokens, dtype=np.int64).tobytes()), draw])
    return torch.Generator().manual_seed(int(material.generate_state(1, dtype=np.uint64)[0] >> 1))


def _soft_null(adapter, batch, variant: str) -> torch.Tensor:
    """ŷ of the null input ``(B, C)``: every input id 0 (the authors' code), or the text's word
    embeddings zeroed (``"embedding"``)."""
    with torch.no_grad():
        if variant == "reference":
            return adapter.logits(replace(batch, input_ids=torch.zeros_like(batch.input_ids))).float().softmax(-1)
        embeddings = adapter.embeddings(batch).detach()
        zeroed = torch.where(batch.content.unsqueeze(-1), torch.zeros_like(embeddings), embeddings)
        return adapter.logits_from_embeddings(batch, zeroed).float().softmax(-1)


def _soft_draws(adapter, batch, instances_of_rows, keep, settings, method, kind, draws: range) -> np.ndarray:
    """ŷ ``(D, B, C)`` under the Bernoulli draws ``draws`` of one method and kind: each element of a
    token's vector (the embedding layer's output, or the word embedding) kept with probability
    ``keep`` ``(B, T)`` (1 on specials and pads), each draw seeded per sentence
    (:func:`_sentence_generator`). Every draw of every sentence of the batch goes through the same
    forwards (the batch repeated once per draw, chunked by the adapter's token budget)."""
    real = batch.attention_mask.bool().cpu()
    size, draws = len(batch), list(draws)
    repeated = batch.select(list(range(size)) * len(draws))

    def transform(hidden, rows=slice(None)):
        mask = torch.ones(hidden.shape, dtype=hidden.dtype)
        for j, big in enumerate(range(len(repeated))[rows]):
            r, draw = big % size, draws[big // size]
            positions = real[r].nonzero().flatten()
            p = keep[r, positions].unsqueeze(-1).expand(len(positions), hidden.shape[-1]).float()
            generator = _sentence_generator(settings, method, instances_of_rows[r].tokens, kind, draw)
            mask[j, positions] = torch.bernoulli(p, generator=generator).to(hidden.dtype)
        return hidden * mask.to(hidden.device)

    with torch.no_grad():
        if settings.soft_variant == "reference":
            logits = adapter.logits_with_embedding_output(repeated, transform)
        else:
            logits = adapter.logits_from_embeddings(repeated, transform(adapter.embeddings(repeated).detach()))
    return logits.float().softmax(-1).cpu().numpy().reshape(len(draws), size, -1)


def _soft_columns(adapter, full_batch, instances, groups, lengths, scores, methods, predicted, p_full, settings) -> dict:
    """Soft-NC / Soft-NS per method (Zhao & Aletras 2023 §3): per sentence the mean over its draws,
    draws added (doubling) while a cell's Monte-Carlo standard error exceeds ``soft_stderr``."""
    start = time.perf_counter()
    n = len(instances)
    null = np.zeros(n)
    draws = {m: {"kept": [[] for _ in range(n)], "removed": [[] for _ in range(n)]} for m in methods}
    batches = []
    for group in groups:
        batch = _trim(full_batch.select(group.tolist()), int(lengths[group].max()), adapter)
        null[group] = _soft_null(adapter, batch, settings.soft_variant)[np.arange(len(group)), predicted[group]].cpu().numpy()
        real = batch.attention_mask.bool().cpu()
        keeps = {}
        for method in methods:
            keep = torch.ones(batch.input_ids.shape, dtype=torch.float64)
            for r, i in enumerate(group):
                row = scores[method][i]
                content = instances[i].content
                p = fm.soft_keep_probabilities(row[content][None], np.ones((1, int(content.sum())), bool))[0]
                values = np.ones(len(row))
                values[content] = p
                keep[r, real[r]] = torch.as_tensor(values)
            keeps[method] = keep
        batches.append((group, batch, keeps))
    clip = settings.soft_variant == "reference"
    done, count = 0, settings.soft_draws
    while True:
        for group, batch, keeps in batches:
            rows = [instances[i] for i in group]
            for method in methods:
                for kind, keep in (("kept", keeps[method]), ("removed", 1 - keeps[method])):
                    if kind == "removed":  # specials and pads stay whole in both masks
                        keep = torch.where(batch.content.cpu(), keep, torch.ones_like(keep))
                    probs = _soft_draws(adapter, batch, rows, keep, settings, method, kind, range(done, count))
                    for r, i in enumerate(group):
                        draws[method][kind][i] += probs[:, r, predicted[i]].astype(float).tolist()
        done = count
        per_sentence, stderr = _soft_values(draws, methods, p_full, null, clip)
        if max(stderr.values()) <= settings.soft_stderr or count >= settings.soft_max_draws:
            break
        count = min(2 * count, settings.soft_max_draws)
    return {"columns": per_sentence, "stderr": stderr, "draws": count, "null": null,
            "seconds": time.perf_counter() - start}


def _soft_values(draws, methods, p_full, null, clip) -> tuple[dict, dict]:
    """Per method and column the per-sentence means over the draws, and each cell's Monte-Carlo
    standard error sqrt(Σ_i var_i / D) / n over the defined sentences."""
    columns, stderr = {}, {}
    for method in methods:
        kept = np.array(draws[method]["kept"]).T  # (D, N)
        removed = np.array(draws[method]["removed"]).T
        ns = fm.soft_normalised_sufficiency(p_full, np.clip(kept, 0, 1), null, clip=clip)
        nc = fm.soft_normalised_comprehensiveness(p_full, np.clip(removed, 0, 1), null, clip=clip)
        columns[method] = {}
        for name, values in (("soft_comprehensiveness", nc), ("soft_sufficiency", ns)):
            defined = np.isfinite(values).all(0)
            mean = np.where(defined, np.nanmean(np.where(np.isfinite(values), values, 0), 0), np.nan)
            columns[method][name] = mean
            d = values.shape[0]
            var = values[:, defined].var(0, ddof=1) if d > 1 else np.zeros(int(defined.sum()))
            stderr[(method, name)] = float(np.sqrt(var.sum() / d) / max(int(defined.sum()), 1))
    return columns, stderr


@dataclass
class MethodRun:
    """Every method's scores on a batch of texts: ``scores[method]`` per text its scores over the
    text's real positions (specials included, 0 there); ``cost``, ``skipped`` as in
    :class:`FaithfulnessResult`; ``padding``: padded / real tokens of the method batches."""

    scores: dict
    cost: dict
    skipped: dict
    padding: float


def length_groups(full_batch, budget: int) -> list[np.ndarray]:
    """The texts of ``full_batch`` in groups of similar length, whatever order the caller gave
    (:func:`hf_attn.core.batching.padding_bounded_batches`: at most ``budget`` padded tokens and
    1.1 padded tokens per real one; each group is trimmed to its longest text)."""
    return padding_bounded_batches(full_batch.attention_mask.sum(1).cpu().numpy(), budget)


def run_methods(adapter, full_batch, settings: FaithfulnessSettings, progress: bool = False,
                groups=None, time_budget: float | None = None) -> MethodRun:
    """Run ``settings.methods`` on ``full_batch`` (any order, any lengths) in length-sorted groups of
    at most ``settings.batch_tokens`` padded tokens, each trimmed to its longest text; the table,
    ``Explainer.attributions`` and the Space all go through here. A method that does not apply is
    in ``skipped`` with the reason; with ``time_budget`` (seconds) the methods after the budget is
    spent are skipped too, saying so (an interactive request stays bounded)."""
    began = time.perf_counter()
    groups = length_groups(full_batch, settings.batch_tokens) if groups is None else groups
    count = len(full_batch)
    real_tokens = int(full_batch.attention_mask.sum())
    padded = sum(len(g) * int(full_batch.attention_mask[torch.as_tensor(g)].sum(1).max()) for g in groups)
    scores: dict[str, list] = {}
    cost, skipped = {}, {}
    shared = {}  # saliency and gradient × input from one backward: group → gradient × input's scores
    both = {"saliency", "gradient_x_input"} <= set(settings.methods)
    for name in settings.methods:
        reason = _refusal(adapter, name)
        if time_budget is not None and time.perf_counter() - began > time_budget:
            reason = f"not run: this request's time budget of {time_budget:g} s was spent by the methods before it"
        if reason:
            skipped[name] = reason
            continue
        try:
            function = _method_function(name, settings)
        except ImportError as error:
            skipped[name] = str(error)
            continue
        if both and name == "saliency":
            function = _SharedGradient(settings.gradient_target, shared)
        elif both and name == "gradient_x_input" and "saliency" in scores:
            function = _SharedGradient(settings.gradient_target, shared, reuse=True)
        per_instance: list = [None] * count
        seconds, memory = 0.0, []
        try:
            for group in groups:
                batch = full_batch.select(group.tolist())
                batch = _trim(batch, int(batch.attention_mask.sum(1).max()), adapter)
                with _PeakMemory(adapter.device) as peak:
                    start = time.perf_counter()
                    values = function(adapter, batch)
                    if adapter.device.type == "cuda":
                        torch.cuda.synchronize()
                    seconds += time.perf_counter() - start
                memory.append(peak.peak / len(group) / 2**20)
                for i, row in zip(group, _real_scores(batch, values)):
                    per_instance[i] = row
        except (UnsupportedModelError, InterventionError) as error:
            skipped[name] = f"{type(error).__name__}: {error}"
            continue
        if progress:
            print(f"{name}: {seconds:.1f} s")
        scores[name] = per_instance
        cost[name] = {"seconds": seconds, "seconds_per_sentence": seconds / count,
                      "peak_mb_per_sentence": float(np.mean(memory)) if memory else 0.0}
        if isinstance(function, _SharedGradient):
            cost[name]["shared_backward"] = "saliency and gradient_x_input from one forward + backward"
        if isinstance(function, _IntegratedGradients):
            cost[name] |= function.completeness()
    return MethodRun(scores, cost, skipped, padded / max(real_tokens, 1))


def _mask_token(adapter) -> int:
    """The tokenizer's mask token id (NAOPC's "mask" perturbation), or a one-line refusal."""
    tokenizer = getattr(adapter, "tokenizer", None)
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if mask_id is None:
        raise ValueError("naopc_perturbation='mask' needs a tokenizer with a mask token; this model's has none "
                         "(use naopc_perturbation='delete')")
    return int(mask_id)


def run_faithfulness(adapter, texts, settings: FaithfulnessSettings | None = None, progress: bool = False
                     ) -> FaithfulnessResult:
    """The faithfulness table of ``adapter``'s model on ``texts`` (module docstring)."""
    settings = settings or FaithfulnessSettings()
    if isinstance(texts, str) or not len(texts):
        raise ValueError("texts must be a non-empty list of strings")
    texts = list(texts)
    full_batch = adapter.encode(texts)
    keep = full_batch.content.any(1).cpu()
    if not bool(keep.all()):
        dropped = [i for i, k in enumerate(keep.tolist()) if not k]
        raise ValueError(f"texts {dropped[:5]} have no tokens of their own (only special tokens): nothing to rank")
    instances = _instances(adapter, full_batch)
    lengths = np.array([len(i.tokens) for i in instances])
    groups = length_groups(full_batch, settings.batch_tokens)
    pad = int(getattr(adapter, "pad_id", 0))
    cache = _ProbabilityCache(adapter, max(settings.batch_tokens * 4, 2048))
    full = cache.get([tuple(int(t) for t in i.tokens) for i in instances])
    predicted = full.argmax(1)
    p_full = full[np.arange(len(instances)), predicted]

    # leave-one-out through the erasure cache: its deletions are the k = 1 erasures of every method
    runner = replace(settings, methods=tuple(m for m in settings.methods if m != "leave_one_out") or ("random",))
    run = run_methods(adapter, full_batch, runner, progress=progress, groups=groups)
    scores, cost, skipped = run.scores, run.cost, run.skipped
    if "leave_one_out" in settings.methods:
        with _PeakMemory(adapter.device) as peak:
            start = time.perf_counter()
            scores["leave_one_out"] = _cached_leave_one_out(cache, instances, p_full, predicted, pad)
            seconds = time.perf_counter() - start
        cost["leave_one_out"] = {"seconds": seconds, "seconds_per_sentence": seconds / len(instances),
                                 "peak_mb_per_sentence": peak.peak / len(instances) / 2**20,
                                 "shared_forwards": "deletions scored through the erasure inputs' cache"}
    if "random" not in settings.methods:
        scores.pop("random", None), cost.pop("random", None)
    scores = {m: scores[m] for m in settings.methods if m in scores}  # the requested order
    methods = list(scores)

    counts = tokens_per_fraction([int(i.content.sum()) for i in instances], settings.fractions)
    table: dict = {m: {} for m in methods}
    per_metric: dict = {m: {} for m in methods}

    def cell(method, metric, values):
        values = np.asarray(values, dtype=float)
        per_metric[method][metric] = values
        finite = values[np.isfinite(values)]
        table[method][metric] = fm.mean_ci(values, settings.confidence) | {
            "median": float(np.median(finite)) if len(finite) else math.nan,
            "undefined": int(len(values) - len(finite))}

    rows = np.arange(len(instances))
    for method in methods:
        content_scores = scores[method]
        p_removed, p_kept = _erasure(cache, instances, content_scores, counts, pad)
        comp = fm.erasure_differences(p_full, p_removed[rows, :, predicted])
        suff = fm.erasure_differences(p_full, p_kept[rows, :, predicted])
        cell(method, "comprehensiveness", fm.aopc(comp))
        cell(method, "sufficiency", fm.aopc(suff))

    extra = {}
    soft_wanted = {"soft_comprehensiveness", "soft_sufficiency"} & set(settings.metrics)
    if soft_wanted and settings.soft_variant == "reference" and not hasattr(adapter, "logits_with_embedding_output"):
        raise ValueError(f"{type(adapter).__name__} cannot reach its model's embedding-layer output "
                         "(logits_with_embedding_output): use soft_variant='embedding' or leave the soft metrics out")
    if soft_wanted:
        soft = _soft_columns(adapter, full_batch, instances, groups, lengths, scores, methods, predicted, p_full,
                             settings)
        for method in methods:
            for metric, values in soft["columns"][method].items():
                cell(method, metric, values)
                table[method][metric]["mc_stderr"] = soft["stderr"][(method, metric)]
                table[method][metric]["draws"] = soft["draws"]
        extra["soft"] = {"variant": settings.soft_variant, "draws": soft["draws"], "seconds": soft["seconds"],
                         "max_mc_stderr": max(soft["stderr"].values()),
                         "null_probability": soft["null"].tolist()}
    if settings.naopc_beam > 0 and {"naopc_comprehensiveness", "naopc_sufficiency"} & set(settings.metrics):
        mask_id = _mask_token(adapter) if settings.naopc_perturbation == "mask" else None
        naopc = _naopc_columns(cache, instances, scores, methods, p_full, predicted, settings, pad, mask_id)
        for method in methods:
            for metric, values in naopc["columns"][method].items():
                cell(method, metric, values)
        extra["naopc"] = naopc["info"]

    masks = [i.content for i in instances]
    width = max(int(m.sum()) for m in masks)

    def dense_content(method):
        out = np.zeros((len(instances), width))
        mask = np.zeros((len(instances), width), bool)
        for i, (row, m) in enumerate(zip(scores[method], masks)):
            out[i, :m.sum()] = row[m]
            mask[i, :m.sum()] = True
        return out, mask

    dense = {m: dense_content(m) for m in methods}
    agreement = {a: {} for a in methods}
    for a in methods:
        for b in methods:
            if a != b:
                tau = fm.rank_agreement(dense[a][0], dense[b][0], dense[a][1])
                with np.errstate(invalid="ignore"):
                    agreement[a][b] = float(np.nanmean(tau)) if np.isfinite(tau).any() else math.nan
    for method in methods:
        if "leave_one_out" in dense and method != "leave_one_out" and "tau_loo" in settings.metrics:
            cell(method, "tau_loo", fm.rank_agreement(dense[method][0], dense["leave_one_out"][0], dense[method][1]))
        others = [agreement[method][b] for b in methods if b != method and b != "random"
                  and not math.isnan(agreement[method][b])]
        table[method]["agreement"] = {"mean": float(np.mean(others)) if others else math.nan, "low": math.nan,
                                      "high": math.nan, "n": len(others)}
    if "random" in per_metric:  # a paired test of every method against the random floor, per column
        for method in methods:
            if method == "random":
                continue
            for metric, values in per_metric[method].items():
                if metric in per_metric["random"]:
                    table[method][metric]["vs_random"] = _paired(values, per_metric["random"][metric])
    # every pair on comprehensiveness, stored so the sentence can be rebuilt from results.json alone
    if "comprehensiveness" in settings.metrics:
        extra["paired"] = {"comprehensiveness": {
            a: {b: _paired(per_metric[a]["comprehensiveness"], per_metric[b]["comprehensiveness"])
                for b in methods if b != a} for a in methods}}
    wanted = set(settings.metrics)
    table = {m: {k: v for k, v in row.items() if k in wanted} for m, row in table.items()}
    per_metric = {m: {k: v for k, v in row.items() if k in wanted} for m, row in per_metric.items()}
    describe = adapter.describe() if hasattr(adapter, "describe") else {}
    model = {"name": getattr(adapter, "name", type(adapter).__name__), **describe}
    return FaithfulnessResult(
        methods=methods, table=table, cost=cost, skipped=skipped, agreement=agreement, per_instance=per_metric,
        attributions={m: scores[m] for m in methods}, content=masks,
        settings=asdict(settings) | {"descriptions": {m: METHODS[m][0] for m in settings.methods},
                                     "naopc_seconds": extra.get("naopc", {}).get("seconds", 0.0),
                                     "memory": "peak RSS above each batch's start (psutil, 5 ms samples) / sentences "
                                               "in the batch; CUDA: allocator peak"},
        model=model, num_instances=len(instances),
        forwards={"requested": cache.requested, "unique": len(cache.store),
                  "saved_share": 1 - len(cache.store) / max(cache.requested, 1)},
        texts=texts, metric_details=extra)


def erasure_scores(adapter, texts, attributions, fractions=DEFAULT_FRACTIONS) -> dict:
    """ERASER comprehensiveness and sufficiency ``(N, K)`` (DeYoung et al. 2020 §4) of attributions
    computed anywhere (captum, ferret, inseq, …): ``attributions`` per text, one score per position
    of ``adapter.encode([text])`` (special tokens included, ignored) or one per text token
    (``batch.content``). Returns ``{"comprehensiveness", "sufficiency", "fractions"}``, ready for
    the ``eraser_faithfulness`` evaluate module."""
    batch = adapter.encode(list(texts))
    instances = _instances(adapter, batch)
    if len(attributions) != len(instances):
        raise ValueError(f"attributions has {len(attributions)} rows for {len(instances)} texts")
    scores = []
    for i, (inst, row) in enumerate(zip(instances, attributions)):
        row = np.asarray(row, dtype=np.float64)
        if len(row) == inst.content.sum():
            full_row = np.zeros(len(inst.tokens))
            full_row[inst.content] = row
            row = full_row
        if len(row) != len(inst.tokens):
            raise ValueError(f"attributions[{i}] has {len(row)} scores; text {i} has {len(inst.tokens)} positions "
                             f"({int(inst.content.sum())} text tokens)")
        scores.append(row)
    cache = _ProbabilityCache(adapter, 4096)
    full = cache.get([tuple(int(t) for t in i.tokens) for i in instances])
    predicted = full.argmax(1)
    rows = np.arange(len(instances))
    counts = tokens_per_fraction([int(i.content.sum()) for i in instances], fractions)
    p_removed, p_kept = _erasure(cache, instances, scores, counts, int(getattr(adapter, "pad_id", 0)))
    p_full = full[rows, predicted]
    return {"comprehensiveness": fm.erasure_differences(p_full, p_removed[rows, :, predicted]),
            "sufficiency": fm.erasure_differences(p_full, p_kept[rows, :, predicted]), "fractions": list(fractions)}


def _trim(batch, width: int, adapter):
    """A batch cut to ``width`` positions (its longest row): right padding keeps the first
    positions, left padding the last."""
    left = bool(getattr(adapter, "left_padding", False))
    cut = slice(batch.input_ids.shape[1] - width, None) if left else slice(0, width)
    return replace(batch, input_ids=batch.input_ids[:, cut], attention_mask=batch.attention_mask[:, cut],
                   content=batch.content[:, cut], query=batch.query[:, cut],
                   position_ids=None if batch.position_ids is None else batch.position_ids[:, cut],
                   word_ids=None if batch.word_ids is None else [w[cut] for w in batch.word_ids])


__all__ = ["ATTENTION_FAMILY", "DEFAULT_METHODS", "METHODS", "METRICS", "FaithfulnessResult", "FaithfulnessSettings",
           "MethodRun", "attribution_scores", "erasure_scores", "length_groups", "run_faithfulness", "run_methods"]
