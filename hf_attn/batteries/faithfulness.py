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
  §3), the embedding elements kept with the min–max-normalised importance (sufficiency) or 1 − it
  (comprehensiveness), one Bernoulli draw per seed of ``soft_seeds``; intervals over sentences and,
  separately, over the seeds;
- ``naopc_comprehensiveness`` ↑ / ``naopc_sufficiency`` ↑: the ERASER AOPC normalised by the best and
  worst AOPC of any ordering of the instance's tokens (Edin et al. 2024, §3), the bounds found by a
  beam search of width ``naopc_beam`` over one-token extensions (Edin et al. §4 also search;
  width 1 = greedy, the default: approximate bounds), widened to include every method's own AOPC
  (each ranking is an ordering too). For sufficiency (lower AOPC is better) the
  score is (max − AOPC) / (max − min), so 1 is the best ordering for both;
- ``tau_loo`` ↑: Kendall τ-b with leave-one-out (Jain & Wallace 2019, §3);
- ``agreement``: the mean over the other methods of the mean Kendall τ-b with them (Krishna et al.
  2022's rank agreement); the full matrix is :attr:`FaithfulnessResult.agreement`.

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
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import torch

from hf_attn.adapters.base import UnsupportedModelError
from hf_attn.adapters.interface import InterventionError
from hf_attn.core.batching import length_batches
from hf_attn.core import faithfulness as fm
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
                    "soft_sufficiency": True, "naopc_comprehensiveness": True, "naopc_sufficiency": True,
                    "tau_loo": True, "agreement": True}


@dataclass(frozen=True)
class FaithfulnessSettings:
    """What :func:`run_faithfulness` computes (module docstring). ``methods``: names from
    :data:`METHODS`; ``fractions``: ERASER bins; ``ig_steps`` / ``ig_rule``: integrated gradients'
    quadrature (default 50 Gauss–Legendre nodes, captum's default: on MiniLM fine-tuned on SST, 50
    sentences, 16 nodes left a completeness gap above 1 % of f(x) − f(x') on 24 % of the sentences,
    50 nodes on 6 %; the table reports the gap of its run); ``soft_seeds``: one Bernoulli draw per
    seed; ``naopc_beam``: 0 skips NAOPC;
    ``shap_samples``: coalitions per instance for Kernel SHAP; ``batch_tokens``: padded tokens per
    method batch; ``soft_clip``: clip Soft-NC / Soft-NS to [0, 1] (default False: the formula as
    printed; instances whose zeroed input ŷ(0) is almost as confident as ŷ(x) give large values);
    ``seed``: the random floor; ``confidence``: of the intervals. ``metrics``: the columns computed
    (a subset of :data:`METRICS`; the soft and NAOPC columns cost the most forwards; ``tau_loo``
    exists only when ``leave_one_out`` is among the methods).
    ``gradient_target``: f of saliency, gradient × input and integrated gradients, ``"probability"``
    ŷ_c (default) or ``"logit"`` z_c (ferret's and inseq's choice); ``ig_baseline``: ``"zero"`` (the
    text's embeddings replaced by 0, default) or ``"pad"`` (by the pad token's embedding)."""

    methods: tuple[str, ...] = DEFAULT_METHODS
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    ig_steps: int = 50
    ig_rule: str = "gauss-legendre"
    soft_seeds: tuple[int, ...] = (0, 1, 2)
    naopc_beam: int = 1
    shap_samples: int = 64
    batch_tokens: int = 1024
    soft_clip: bool = False
    seed: int = 0
    confidence: float = 0.95
    metrics: tuple[str, ...] = METRICS
    gradient_target: str = "probability"
    ig_baseline: str = "zero"

    def __post_init__(self):
        for name in ("methods", "fractions", "soft_seeds", "metrics"):
            if isinstance(getattr(self, name), (str, int, float)):
                raise ValueError(f"{name} must be a tuple, got {getattr(self, name)!r}")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ValueError(f"methods must be a non-empty subset of {list(METHODS)}, got {list(self.methods)}")
        if not self.fractions or any(not 0 < float(f) <= 1 for f in self.fractions):
            raise ValueError(f"fractions must be a non-empty list of numbers in (0, 1], got {self.fractions!r}")
        for name in ("ig_steps", "shap_samples", "batch_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.naopc_beam, int) or self.naopc_beam < 0:
            raise ValueError(f"naopc_beam must be an int ≥ 0 (0: no NAOPC), got {self.naopc_beam!r}")
        if not self.soft_seeds or any(not isinstance(s, int) for s in self.soft_seeds):
            raise ValueError(f"soft_seeds must be a non-empty tuple of ints, got {self.soft_seeds!r}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence!r}")
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown or not self.metrics:
            raise ValueError(f"metrics must be a non-empty subset of {list(METRICS)}, got {list(self.metrics)}")
        if self.gradient_target not in ("probability", "logit"):
            raise ValueError(f"gradient_target must be 'probability' or 'logit', got {self.gradient_target!r}")
        if self.ig_baseline not in ("zero", "pad"):
            raise ValueError(f"ig_baseline must be 'zero' or 'pad', got {self.ig_baseline!r}")


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
            "attention_flow": attention_flow.attention_flow, "attention_norm": attention_norm.attention_norm,
            "alti": alti.alti, "value_zeroing": value_zeroing.value_zeroing,
            "leave_one_out": deletion.leave_one_out_deletion}[name]


class _IntegratedGradients:
    """The table's integrated gradients: attributions per batch, each batch's result kept for
    :meth:`completeness`."""

    def __init__(self, settings: FaithfulnessSettings):
        self.settings, self.results = settings, []

    def __call__(self, adapter, batch):
        from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution

        s = self.settings
        result = integrated_gradients_attribution(adapter, batch, s.ig_steps, s.ig_rule, target=s.gradient_target,
                                                  baseline=s.ig_baseline)
        self.results.append(result)
        return result.attributions

    def completeness(self) -> dict:
        """:func:`hf_attn.methods.integrated_gradients.completeness_summary` of the run."""
        from hf_attn.methods.integrated_gradients import completeness_summary

        return completeness_summary(self.results)


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

    def to_pandas(self):
        """DataFrame: one row per method that ran; per metric its mean and interval, then the cost."""
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
            row |= self.cost.get(method, {})
            rows.append(row)
        return pd.DataFrame(rows).set_index("method")

    def ranking(self, metric: str) -> list[str]:
        """Methods from best to worst by ``metric`` (NaN last)."""
        sign = 1 if HIGHER_IS_BETTER[metric] else -1
        values = {m: self.table[m].get(metric, {}).get("mean", math.nan) for m in self.methods}
        return sorted(self.methods, key=lambda m: (math.isnan(values[m]), -sign * (values[m] if not math.isnan(values[m])
                                                                                       else 0)))

    def _ranked_metrics(self) -> list[str]:
        """The faithfulness metrics (agreement excluded) with at least one number in the table."""
        return [m for m in METRICS if m != "agreement" and not all(
            math.isnan(self.table[x].get(m, {}).get("mean", math.nan)) for x in self.methods)]

    def mean_rank(self, metrics=None) -> dict:
        """Each method's mean rank (1 = best) over ``metrics`` (default: the faithfulness metrics,
        agreement excluded), the random floor included."""
        metrics = metrics or [m for m in METRICS if m != "agreement"]
        ranks = {m: [] for m in self.methods}
        for metric in metrics:
            if all(math.isnan(self.table[m].get(metric, {}).get("mean", math.nan)) for m in self.methods):
                continue
            for position, method in enumerate(self.ranking(metric), 1):
                ranks[method].append(position)
        return {m: float(np.mean(r)) if r else math.nan for m, r in ranks.items()}

    def sentence(self) -> str:
        """What the table says about attention vs the other methods, computed from the numbers."""
        attention = [m for m in self.methods if m in ATTENTION_FAMILY]
        others = [m for m in self.methods if m not in ATTENTION_FAMILY and m != "random"]
        if "attention" not in self.methods or not others:
            return "The table has no raw attention row or no other method to compare it with."
        ranks = self.mean_rank()
        order = sorted((m for m in self.methods if not math.isnan(ranks[m])), key=lambda m: ranks[m])
        best = order[0]
        metric = "comprehensiveness"
        att, top = self.table["attention"][metric], self.table[best][metric]
        overlap = not (att["high"] < top["low"] or top["high"] < att["low"])
        best_family = min(attention, key=lambda m: ranks[m])
        best_other = min(others, key=lambda m: ranks[m])
        random_rank = ranks.get("random", math.nan)
        parts = [f"Over {self.num_instances} sentences, raw attention has mean rank {ranks['attention']:.1f} of "
                 f"{len(order)} methods across {len(self._ranked_metrics())} faithfulness metrics "
                 f"(1 = best; the random floor {random_rank:.1f}); the best overall is {best} ({ranks[best]:.1f}).",
                 f"By ERASER comprehensiveness, attention scores {att['mean']:.3f} [{att['low']:.3f}, {att['high']:.3f}] "
                 f"against {best}'s {top['mean']:.3f} [{top['low']:.3f}, {top['high']:.3f}]"
                 + (" (95 % intervals overlap)." if overlap else " (95 % intervals do not overlap)."),
                 f"The best attention-family method is {best_family} ({ranks[best_family]:.1f}), the best of the "
                 f"others {best_other} ({ranks[best_other]:.1f}): "
                 + ("attention-based explanations are competitive here." if ranks[best_family] <= ranks[best_other]
                    else "the other methods are more faithful than any attention-based explanation here.")]
        if "tau_loo" in self.table["attention"] and not math.isnan(self.table["attention"]["tau_loo"]["mean"]):
            parts.append(f"Attention's Kendall τ with leave-one-out is {self.table['attention']['tau_loo']['mean']:.2f}.")
        return " ".join(parts)

    def summary(self) -> str:
        """Markdown: the table (mean [interval]), the cost, the skipped methods and :meth:`sentence`."""
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
                elif math.isnan(c["low"]):
                    cells.append(f"{c['mean']:.3f}")
                else:
                    cells.append(f"{c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]")
            cost = self.cost.get(method, {})
            lines.append(f"| {method} | " + " | ".join(cells)
                         + f" | {cost.get('seconds_per_sentence', math.nan):.4f} | {cost.get('peak_mb_per_sentence', math.nan):.2f} |")
        conf = int(round(100 * self.settings.get("confidence", 0.95)))
        lines += ["", f"{self.num_instances} sentences; [low, high] = {conf} % interval over sentences (Student t). "
                      f"Erasure inputs: {self.forwards.get('requested', 0)} requested, {self.forwards.get('unique', 0)} "
                      "unique forwards."]
        for method, reason in self.skipped.items():
            lines.append(f"- skipped {method}: {reason}")
        ig = self.cost.get("integrated_gradients", {})
        if "completeness_gap_mean_abs" in ig:
            lines.append(f"- integrated gradients ({self.settings.get('ig_steps')} {self.settings.get('ig_rule')} nodes): "
                         f"|completeness gap| within 1 % of |f(x) − f(x')| on "
                         f"{100 * ig['completeness_within_1pct_share']:.0f} % of the sentences (mean |gap| "
                         f"{ig['completeness_gap_mean_abs']:.2g}, mean |f(x) − f(x')| {ig['output_difference_mean_abs']:.2g}); "
                         "more nodes (ig_steps) close the gap")
        lines += ["", self.sentence()]
        return "\n".join(lines)

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
        for key in ("table", "agreement", "cost"):  # JSON wrote NaN as null
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


def _aopc_bounds(cache, instances, full, predicted, counts, pad, beam: int, keep: bool):
    """Lowest and highest AOPC (mean over the bins of ŷ_c(x) − ŷ_c(x̃)) over orderings of each
    instance's content tokens, by beam search over one-token extensions (``keep``: sufficiency, the
    ordered tokens are the only ones kept; else comprehensiveness, they are deleted). All instances'
    candidates of a step are scored in one batched call. Returns ``(lower (N,), upper (N,))``."""
    n = len(instances)
    out = np.zeros((2, n))
    for direction, sign in ((0, -1.0), (1, 1.0)):
        # a beam: list per instance of (score, chosen positions (content indices), drops at bins)
        beams = [[(0.0, (), {})] for _ in range(n)]
        steps = counts.max(1)
        for step in range(1, int(steps.max()) + 1):
            requests, owners = [], []
            for i, inst in enumerate(instances):
                if step > steps[i]:
                    continue
                size = int(inst.content.sum())
                for b, (_, chosen, _) in enumerate(beams[i]):
                    for t in range(size):
                        if t in chosen:
                            continue
                        mask = np.zeros(size, bool)
                        mask[list(chosen) + [t]] = True
                        requests.append(_subset(inst, mask if keep else ~mask, pad))
                        owners.append((i, b, t))
            if not requests:
                break
            probs = cache.get(requests)
            candidates: dict[int, list] = {}
            for (i, b, t), p in zip(owners, probs):
                score, chosen, drops = beams[i][b]
                drop = full[i] - p[predicted[i]]
                new = dict(drops)
                for bin_index in np.flatnonzero(counts[i] == step):
                    new[int(bin_index)] = drop
                # score: the drops at the bins reached, plus this step's drop as the look-ahead
                candidates.setdefault(i, []).append((sign * (sum(new.values()) + drop), chosen + (t,), new))
            for i, options in candidates.items():
                options.sort(key=lambda o: -o[0])
                unique, seen = [], set()
                for option in options:  # one state per (set so far, drops at the bins): no duplicates
                    key = (frozenset(option[1]), tuple(sorted(option[2].items())))
                    if key not in seen:
                        seen.add(key)
                        unique.append(option)
                    if len(unique) == beam:
                        break
                beams[i] = unique
        for i in range(n):
            drops = beams[i][0][2]
            out[direction, i] = np.mean([drops[k] for k in range(counts.shape[1])])
    return out[0], out[1]


def _soft_probabilities(adapter, batch, keep_probabilities, predicted, seeds, budget):
    """ŷ_c under Bernoulli-masked embeddings: ``keep_probabilities`` ``(B, T)`` per token, one draw
    per seed and embedding element; returns ``(S, B)``."""
    embeddings = adapter.embeddings(batch).detach()
    out = np.zeros((len(seeds), len(batch)))
    for s, seed in enumerate(seeds):
        generator = torch.Generator().manual_seed(int(seed))
        p = keep_probabilities.unsqueeze(-1).expand(embeddings.shape).float().cpu()
        mask = torch.bernoulli(p, generator=generator).to(embeddings.device, embeddings.dtype)
        mask = torch.where(batch.content.unsqueeze(-1), mask, torch.ones_like(mask))
        with torch.no_grad():
            logits = adapter.logits_from_embeddings(batch, embeddings * mask)
        out[s] = logits.float().softmax(-1).gather(1, predicted[:, None]).squeeze(1).cpu().numpy()
    return out


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
    groups = length_batches(lengths, settings.batch_tokens)
    pad = int(getattr(adapter, "pad_id", 0))
    cache = _ProbabilityCache(adapter, max(settings.batch_tokens * 4, 2048))
    full = cache.get([tuple(int(t) for t in i.tokens) for i in instances])
    predicted = full.argmax(1)
    p_full = full[np.arange(len(instances)), predicted]

    scores: dict[str, list] = {}
    cost, skipped = {}, {}
    for name in settings.methods:
        description, internals = METHODS[name]
        reason = _refusal(adapter, name)
        if reason:
            skipped[name] = reason
            continue
        try:
            function = _method_function(name, settings)
        except ImportError as error:
            skipped[name] = str(error)
            continue
        per_instance: list = [None] * len(instances)
        seconds, memory = 0.0, []
        try:
            for group in groups:
                batch = full_batch.select(group.tolist())
                width = int(batch.attention_mask.sum(1).max())
                batch = _trim(batch, width, adapter)
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
        cost[name] = {"seconds": seconds, "seconds_per_sentence": seconds / len(instances),
                      "peak_mb_per_sentence": float(np.mean(memory)) if memory else 0.0}
        if isinstance(function, _IntegratedGradients):
            cost[name] |= function.completeness()
    methods = list(scores)

    counts = tokens_per_fraction([int(i.content.sum()) for i in instances], settings.fractions)
    table: dict = {m: {} for m in methods}
    per_metric: dict = {m: {} for m in methods}

    def cell(method, metric, values, seeds=None):
        per_metric[method][metric] = np.asarray(values, dtype=float)
        table[method][metric] = fm.mean_ci(values, settings.confidence)
        if seeds is not None:
            over = fm.mean_ci_over_seeds(seeds, settings.confidence)
            table[method][metric] |= {"seed_low": over["low"], "seed_high": over["high"], "seeds": over["seeds"]}

    rows = np.arange(len(instances))
    comp_aopc, suff_aopc = {}, {}
    for method in methods:
        content_scores = scores[method]
        p_removed, p_kept = _erasure(cache, instances, content_scores, counts, pad)
        comp = fm.erasure_differences(p_full, p_removed[rows, :, predicted])
        suff = fm.erasure_differences(p_full, p_kept[rows, :, predicted])
        comp_aopc[method], suff_aopc[method] = fm.aopc(comp), fm.aopc(suff)
        cell(method, "comprehensiveness", comp_aopc[method])
        cell(method, "sufficiency", suff_aopc[method])

    soft_wanted = {"soft_comprehensiveness", "soft_sufficiency"} & set(settings.metrics)
    # soft metrics: Bernoulli-masked embeddings, per group of instances, every method and seed
    soft = {m: {"kept": np.zeros((len(settings.soft_seeds), len(instances))),
                "removed": np.zeros((len(settings.soft_seeds), len(instances)))} for m in methods}
    null = np.zeros(len(instances))
    predicted_t = torch.as_tensor(predicted, device=adapter.device)
    for group in groups if soft_wanted else ():
        batch = _trim(full_batch.select(group.tolist()), int(lengths[group].max()), adapter)
        real = batch.attention_mask.bool()
        with torch.no_grad():
            embeddings = adapter.embeddings(batch).detach()
            zeroed = torch.where(batch.content.unsqueeze(-1), torch.zeros_like(embeddings), embeddings)
            null[group] = adapter.logits_from_embeddings(batch, zeroed).float().softmax(-1).gather(
                1, predicted_t[group][:, None]).squeeze(1).cpu().numpy()
        for method in methods:
            dense = torch.zeros(batch.input_ids.shape, dtype=torch.float64)
            mask_np = np.zeros(batch.input_ids.shape, bool)
            for r, i in enumerate(group):
                dense[r, real[r].cpu()] = torch.as_tensor(scores[method][i])
                mask_np[r, real[r].cpu().numpy()] = instances[i].content
            keep_p = torch.as_tensor(fm.soft_keep_probabilities(dense.numpy(), mask_np), device=adapter.device)
            soft[method]["kept"][:, group] = _soft_probabilities(adapter, batch, keep_p, predicted_t[group],
                                                                 settings.soft_seeds, settings.batch_tokens)
            soft[method]["removed"][:, group] = _soft_probabilities(adapter, batch, 1 - keep_p, predicted_t[group],
                                                                    [s + 10_000 for s in settings.soft_seeds],
                                                                    settings.batch_tokens)
    for method in methods if soft_wanted else ():
        nc = fm.soft_normalised_comprehensiveness(p_full, soft[method]["removed"], null)
        ns = fm.soft_normalised_sufficiency(p_full, soft[method]["kept"], null)
        if settings.soft_clip:
            nc, ns = np.clip(nc, 0, 1), np.clip(ns, 0, 1)
        with warnings.catch_warnings():  # an instance with ŷ(x) ≤ ŷ(0) is NaN for every seed
            warnings.simplefilter("ignore", RuntimeWarning)
            cell(method, "soft_comprehensiveness", np.nanmean(nc, 0), nc)
            cell(method, "soft_sufficiency", np.nanmean(ns, 0), ns)

    if settings.naopc_beam > 0 and {"naopc_comprehensiveness", "naopc_sufficiency"} & set(settings.metrics):
        start = time.perf_counter()
        comp_low, comp_high = _aopc_bounds(cache, instances, p_full, predicted, counts, pad, settings.naopc_beam, False)
        suff_low, suff_high = _aopc_bounds(cache, instances, p_full, predicted, counts, pad, settings.naopc_beam, True)
        naopc_seconds = time.perf_counter() - start
        # every method's ranking is an ordering too: the bounds are at least as extreme as all of them
        comp_all, suff_all = np.stack(list(comp_aopc.values())), np.stack(list(suff_aopc.values()))
        comp_low, comp_high = np.minimum(comp_low, comp_all.min(0)), np.maximum(comp_high, comp_all.max(0))
        suff_low, suff_high = np.minimum(suff_low, suff_all.min(0)), np.maximum(suff_high, suff_all.max(0))
        for method in methods:
            cell(method, "naopc_comprehensiveness", fm.normalised_aopc(comp_aopc[method], comp_low, comp_high))
            # lower sufficiency AOPC is better: (max − AOPC) / (max − min)
            cell(method, "naopc_sufficiency", 1 - fm.normalised_aopc(suff_aopc[method], suff_low, suff_high))
    else:
        naopc_seconds = 0.0

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
    wanted = set(settings.metrics)
    table = {m: {k: v for k, v in row.items() if k in wanted} for m, row in table.items()}
    per_metric = {m: {k: v for k, v in row.items() if k in wanted} for m, row in per_metric.items()}
    describe = adapter.describe() if hasattr(adapter, "describe") else {}
    model = {"name": getattr(adapter, "name", type(adapter).__name__), **describe}
    return FaithfulnessResult(
        methods=methods, table=table, cost=cost, skipped=skipped, agreement=agreement, per_instance=per_metric,
        attributions={m: scores[m] for m in methods}, content=masks,
        settings=asdict(settings) | {"descriptions": {m: METHODS[m][0] for m in settings.methods},
                                     "naopc_seconds": naopc_seconds,
                                     "memory": "peak RSS above each batch's start (psutil, 5 ms samples) / sentences "
                                               "in the batch; CUDA: allocator peak"},
        model=model, num_instances=len(instances),
        forwards={"requested": cache.requested, "unique": len(cache.store)}, texts=texts)


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
    from dataclasses import replace

    return replace(batch, input_ids=batch.input_ids[:, cut], attention_mask=batch.attention_mask[:, cut],
                   content=batch.content[:, cut], query=batch.query[:, cut],
                   position_ids=None if batch.position_ids is None else batch.position_ids[:, cut],
                   word_ids=None if batch.word_ids is None else [w[cut] for w in batch.word_ids])


__all__ = ["ATTENTION_FAMILY", "DEFAULT_METHODS", "METHODS", "METRICS", "FaithfulnessResult", "FaithfulnessSettings",
           "attribution_scores", "erasure_scores", "run_faithfulness"]
