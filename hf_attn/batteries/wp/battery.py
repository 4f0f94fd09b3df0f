"""Wiegreffe & Pinter (2019) battery ("Attention is not not Explanation").

``hf-attn analyze BASE_DIR --battery wp --output-dir OUT`` (:mod:`hf_attn.runs.wp`) trains what is missing (resumable; one
training at a time) into ``--wp-runs-dir`` (default ``OUT/models``) and writes ``OUT/results.json``
plus figures:

1. §3.2 uniform as the adversary: test F1 (positive class) and macro F1 of the base vs. the same
   model with frozen uniform attention.
2. §3.3 variance within a model: N models that differ from the base only in seed; per instance
   JSD(α_seed, α_base) and TVD(ŷ_seed, ŷ_base); max over seeds (W&P paper; ``--wp-seed-statistic
   median`` for the W&P code) against max base attention, violins per gold class in bins of max
   attention, beside J&W's per-instance adversary (ε-max JSD) on the same axes
   (``seed_variance.png`` = W&P Fig. 3).
3. §3.4 diagnostic MLP: positive-class test F1 per guide (uniform, trained MLP, base LSTM,
   model-consistent adversary with λ = 0.001) beside W&P Table 3 (``diagnostic_mlp.png``).
4. §4 model-consistent adversary for a sweep of λ: test F1, mean JSD / TVD / KL to the base, and the
   JSD–TVD trade-off with the seed, uniform and per-instance-adversary points for contrast
   (``tradeoff.png`` = W&P Fig. 5).

The plain functions (:func:`seed_variance_statistics`, :func:`binned_summary`, ...) are what the
``wp_seed_variance`` / ``wp_consistent_adversary`` evaluate modules call.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
from tqdm.auto import tqdm

from hf_attn.training import wp as wpt
from hf_attn.core.batching import ragged_to_padded
from hf_attn.core.io import save_figure_atomic
from hf_attn.batteries.jw.figures import class_colour, class_label
from hf_attn.data.datasets import TaskData
from hf_attn.core.measures import jsd, tvd
from hf_attn.core.environment import environment_versions
from hf_attn.core.arguments import check_count
from hf_attn.core.io import write_json_atomic
from hf_attn.training.engine import classification_metrics, settings_from_run, task_of, tokenize_splits, train

# Same code as the NumPy measures every evaluate module ships (one source: that file, which must
# stay self-contained to load from the Hub without hf_attn).
from hf_attn.core.numpy_measures import binned_summary, divergence_summary  # noqa: F401

logger = logging.getLogger(__name__)

MAX_ATTENTION_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)
# W&P Table 2 (SST, LSTM): base vs uniform F1; §3.2 calls SST "borderline".
ORDERING = ("base", "trained", "uniform", "adversary")  # W&P: base LSTM ≥ trained ≥ uniform > adversary


# ---------------------------------------------------------------------------------------------
# settings
@dataclass
class WPSettings:
    """Settings of the W&P battery (``hf-attn analyze DIR --battery wp``, :func:`run_wp`); the field
    defaults are the battery's defaults (W&P's where the paper states one).

    split: the split analysed. seed: seed of the J&W per-instance adversary. progress: progress bars.
    runs_dir: where the helper models live (None: ``OUT/models``). num_seeds: §3.3 seed models.
    lambdas: λ sweep of the §4 consistent adversary. guide_lambda: λ of the adversary whose attention
    guides the diagnostic MLP (W&P: 0.001). guide_seeds: seeds of that adversary (one guided MLP
    each; W&P: 1). seed_statistic: "max" over seeds (W&P paper) or "median" (W&P code).
    epochs: epochs of every helper model (None: the base's). train_missing: train missing helper
    models (else fail). adversary_k / adversary_steps / adversary_eps / adversary_lambda: the J&W
    per-instance adversary (k, optimisation steps, ε, λ); per_instance_adversary: run it at all.
    adversary_protocol: "fast" or "wp" (``hf_attn.methods.consistent_adversary.ADVERSARY_PROTOCOLS``);
    adversary_max_epochs: epoch cap of the "wp" protocol (None: 80).
    BERT-family classifiers only (:mod:`hf_attn.batteries.wp.transformer`): transformer_layer /
    transformer_heads: the explained ``[CLS]`` attention (layer index, ``"mean"`` or a head index);
    uniform_every_layer: also make the ``[CLS]`` row uniform at every layer; seed_model_dirs:
    fine-tuning seeds for §3.3 (besides ``seed-*`` folders in ``runs_dir``); max_instances: analyse
    the first N instances; dataset (text_column, label_column): the data of a folder without
    run.json.
    """

    split: str = "test"
    seed: int = 0
    progress: bool = True
    runs_dir: str | None = None
    num_seeds: int = 8
    lambdas: tuple[float, ...] = wpt.DEFAULT_LAMBDAS
    guide_lambda: float = 0.001
    guide_seeds: int = 1
    seed_statistic: str = "max"
    epochs: int | None = None
    train_missing: bool = True
    adversary_k: int = 5
    adversary_steps: int = 500
    adversary_eps: float = 0.01
    adversary_lambda: float = 500.0
    per_instance_adversary: bool = True
    adversary_protocol: str = "fast"
    adversary_max_epochs: int | None = None
    transformer_layer: int = -1
    transformer_heads: str = "mean"
    device: str = "auto"
    precision: str = "float32"
    uniform_every_layer: bool = True
    seed_model_dirs: tuple[str, ...] = ()
    max_instances: int | None = None
    dataset: str | None = None
    text_column: str = "text"
    label_column: str = "label"

    def validate(self) -> None:
        if self.split not in ("train", "validation", "test"):
            raise ValueError(f"split must be train, validation or test, got {self.split!r}")
        if self.seed_statistic not in ("max", "median"):
            raise ValueError(f"seed_statistic must be 'max' or 'median', got {self.seed_statistic!r}")
        if self.num_seeds < 1 or self.guide_seeds < 1:
            raise ValueError(f"num_seeds and guide_seeds must be >= 1, got {self.num_seeds}, {self.guide_seeds}")
        if any(x < 0 for x in self.lambdas) or self.guide_lambda < 0:
            raise ValueError("lambdas must be >= 0")
        if self.epochs is not None and self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        check_count("max_instances (--wp-max-instances)", self.max_instances)
        wpt.adversary_protocol(self.adversary_protocol, max_epochs=self.adversary_max_epochs)  # raises if invalid


# ---------------------------------------------------------------------------------------------
# plain, tested functions
def seed_variance_statistics(base_attention, seed_attentions, base_probs, seed_probs, mask) -> dict:
    """W&P §3.3 per instance.

    Args:
        base_attention ``(B, T)``, seed_attentions ``(S, B, T)`` (0 on pads), base_probs ``(B, C)``,
        seed_probs ``(S, B, C)``, mask ``(B, T)`` True on real tokens.
    Returns numpy arrays: ``jsd``/``tvd`` ``(S, B)``; ``max_jsd``, ``median_jsd``, ``max_tvd``,
    ``median_tvd`` ``(B,)`` (median over seeds as ``np.median``: mean of the two middle values
    for an even S); ``max_attention`` ``(B,)`` of the base.
    """
    base_attention = torch.as_tensor(np.asarray(base_attention), dtype=torch.float64)
    seed_attentions = torch.as_tensor(np.asarray(seed_attentions), dtype=torch.float64)
    mask = torch.as_tensor(np.asarray(mask), dtype=torch.bool)
    if seed_attentions.dim() != 3 or seed_attentions.shape[1:] != base_attention.shape:
        raise ValueError(f"seed_attentions must be (S, B, T) with (B, T) = {tuple(base_attention.shape)}, "
                         f"got {tuple(seed_attentions.shape)}")
    base_probs = torch.as_tensor(np.asarray(base_probs), dtype=torch.float64)
    seed_probs = torch.as_tensor(np.asarray(seed_probs), dtype=torch.float64)
    divergences = jsd(seed_attentions, base_attention.unsqueeze(0), mask.unsqueeze(0)).numpy()
    distances = tvd(seed_probs, base_probs.unsqueeze(0)).numpy()
    return {"jsd": divergences, "tvd": distances,
            "max_jsd": divergences.max(0), "median_jsd": np.median(divergences, axis=0),
            "max_tvd": distances.max(0), "median_tvd": np.median(distances, axis=0),
            "max_attention": (base_attention * mask).max(-1).values.numpy()}


def ordering_holds(f1: dict[str, float]) -> dict:
    """W&P §3.4 finding: base LSTM ≥ trained MLP ≥ uniform > adversary (each comparison reported)."""
    checks = {"base>=trained": f1["base"] >= f1["trained"], "trained>=uniform": f1["trained"] >= f1["uniform"],
              "uniform>adversary": f1["uniform"] > f1["adversary"]}
    return {"holds": all(checks.values()), "checks": checks}


def seed_variance_summary(base_attention, seed_attentions, base_probabilities, seed_probabilities,
                          labels=None, statistic: str = "max", bins=MAX_ATTENTION_BINS) -> dict:
    """Ragged-input wrapper of :func:`seed_variance_statistics` (the ``wp_seed_variance`` metric).

    ``base_attention``: per instance a ``(T_i,)`` list; ``seed_attentions``: per instance ``(S, T_i)``;
    ``base_probabilities``: per instance ``(C,)``; ``seed_probabilities``: per instance ``(S, C)``;
    ``labels`` (optional): class per instance for the per-class/bin table."""
    if statistic not in ("max", "median"):
        raise ValueError(f"statistic must be 'max' or 'median', got {statistic!r}")
    base, mask = ragged_to_padded([np.asarray(a, dtype=np.float64) for a in base_attention])
    seeds = [np.asarray(s, dtype=np.float64) for s in seed_attentions]
    num_seeds = {s.shape[0] for s in seeds}
    if len(num_seeds) != 1:
        raise ValueError(f"every instance needs the same number of seed models, got {sorted(num_seeds)}")
    stacked = np.zeros((num_seeds.pop(),) + base.shape)
    for i, s in enumerate(seeds):
        if s.shape[1] != mask[i].sum():
            raise ValueError(f"instance {i}: seed attention has {s.shape[1]} tokens, base {mask[i].sum()}")
        stacked[:, i, :s.shape[1]] = s
    stats = seed_variance_statistics(base, stacked, np.asarray(base_probabilities, dtype=np.float64),
                                     np.transpose(np.asarray(seed_probabilities, dtype=np.float64), (1, 0, 2)),
                                     mask)
    values = stats[f"{statistic}_jsd"]
    out = {"statistic": statistic, "num_seeds": int(stacked.shape[0]),
           "mean_max_jsd": float(stats["max_jsd"].mean()), "mean_median_jsd": float(stats["median_jsd"].mean()),
           "mean_max_tvd": float(stats["max_tvd"].mean()), "mean_median_tvd": float(stats["median_tvd"].mean()),
           "jsd": values.tolist(), "tvd": stats[f"{statistic}_tvd"].tolist(),
           "max_attention": stats["max_attention"].tolist()}
    if labels is not None:
        out["by_class_and_max_attention"] = binned_summary(values, stats["max_attention"], labels, bins)
    return out


def consistent_adversary_summary(adversary_attention, base_attention, adversary_probabilities,
                                 base_probabilities, lam: float = 0.001) -> dict:
    """W&P §4 measures of an adversary M_a against the base M_b over a set of instances (the
    ``wp_consistent_adversary`` metric): mean JSD(α_a, α_b), TVD(ŷ_a, ŷ_b), KL(α_a‖α_b) and the
    objective TVD − λ·KL. Attention per instance as ``(T_i,)`` lists (the same T_i for a and b)."""
    a, mask = ragged_to_padded([np.asarray(x, dtype=np.float64) for x in adversary_attention])
    b, mask_b = ragged_to_padded([np.asarray(x, dtype=np.float64) for x in base_attention])
    if a.shape != b.shape or not (mask == mask_b).all():
        raise ValueError("adversary and base attention must have the same length per instance")
    loss, distance, kl = wpt.consistent_adversary_loss(
        torch.as_tensor(np.asarray(adversary_probabilities, dtype=np.float64)),
        torch.as_tensor(np.asarray(base_probabilities, dtype=np.float64)), torch.from_numpy(a),
        torch.from_numpy(b), torch.from_numpy(mask), lam, reduction="none")
    divergence = jsd(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(mask)).numpy()
    return {"lambda": float(lam), **divergence_summary(divergence, distance.numpy()),
            "mean_kl": float(kl.mean()), "objective": float(loss.mean()),
            "jsd": divergence.tolist(), "tvd": distance.numpy().tolist(), "kl": kl.numpy().tolist()}


# ---------------------------------------------------------------------------------------------
# figures
def _violin_panel(ax, values, max_attention, labels, label_names, bins, title, xlabel):
    edges = np.asarray(bins)
    which = np.clip(np.searchsorted(edges, max_attention, side="right") - 1, 0, len(edges) - 2)
    width = (edges[1] - edges[0]) * 0.4
    classes = sorted(set(np.asarray(labels).tolist()))
    for ci, c in enumerate(classes):
        # W&P Fig. 3: in each bin the negative class on top, the positive below
        offset = (0.5 - ci) * width * 0.6 if len(classes) == 2 else (ci - (len(classes) - 1) / 2) * width / len(classes)
        for b in range(len(edges) - 1):
            v = values[(labels == c) & (which == b)]
            centre = (edges[b] + edges[b + 1]) / 2 + offset
            if v.size >= 2 and np.ptp(v) > 0:
                parts = ax.violinplot([v], positions=[centre], orientation="horizontal", widths=width * 0.55,
                                      showmedians=True, showextrema=False)
                for body in parts["bodies"]:
                    body.set_facecolor(class_colour(c))
                    body.set_alpha(0.55)
                parts["cmedians"].set_color("black")
            elif v.size:
                ax.plot(v, np.full(v.shape, centre), "|", color=class_colour(c))
    ax.set_xlim(0, np.log(2) * 1.02)
    ax.set_ylim(edges[0], edges[-1])
    ax.set_yticks(edges)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    return [plt_patch(class_colour(c), class_label(label_names, c, kind="gold label")) for c in classes]


def plt_patch(color, label):
    from matplotlib.patches import Patch
    return Patch(facecolor=color, alpha=0.55, label=label)


def plot_seed_variance(path, seed_values, adversary_values, max_attention, labels, label_names,
                       statistic="max", bins=MAX_ATTENTION_BINS, num_seeds=None) -> None:
    """W&P Fig. 3: x = JSD to the base (max or median over seeds | J&W ε-max JSD), y = max base
    attention; violins per class in bins."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if adversary_values is not None else 1
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.4), sharey=True, squeeze=False)
    labels = np.asarray(labels)
    handles = _violin_panel(axes[0, 0], np.asarray(seed_values), max_attention, labels, label_names, bins,
                  f"(a) {num_seeds or ''} random seeds ({statistic} over seeds)",
                  f"{statistic} JSD(α_seed, α_base)")
    if adversary_values is not None:
        _violin_panel(axes[0, 1], np.asarray(adversary_values), max_attention, labels, label_names, bins,
                      "(b) J&W per-instance adversary", "ε-max JSD(α_adv, α_base)")
    axes[0, 0].set_ylabel("max base attention")
    fig.suptitle("W&P Fig. 3: attention divergence from the base model", fontsize=11)
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    save_figure_atomic(fig, path, dpi=130)
    plt.close(fig)


def plot_tradeoff(path, lambda_rows, seed_points, uniform_point, jw_point) -> None:
    """W&P Fig. 5: mean JSD (y) vs mean TVD (x) to the base per model variant."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.6))
    if lambda_rows:
        xs = [r["mean_tvd"] for r in lambda_rows]
        ys = [r["mean_jsd"] for r in lambda_rows]
        ax.plot(xs, ys, ":o", color="tab:purple", label="model-consistent adversary (λ sweep)")
        # points often crowd near the JSD bound: stagger the labels below the curve
        for i, r in enumerate(lambda_rows):
            ax.annotate(f"λ={r['lambda']:g}", (r["mean_tvd"], r["mean_jsd"]), fontsize=7,
                        xytext=(10 + 8 * (i % 4), -12 - 13 * (i % 4)), textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5})
    if seed_points:
        ax.plot([p["mean_tvd"] for p in seed_points], [p["mean_jsd"] for p in seed_points], "^",
                color="tab:green", label="random seeds")
    if uniform_point:
        ax.plot([uniform_point["mean_tvd"]], [uniform_point["mean_jsd"]], "s", color="tab:orange",
                label="uniform attention")
    if jw_point:
        ax.plot([jw_point["mean_tvd"]], [jw_point["mean_jsd"]], "o", color="black", markersize=8,
                label="J&W per-instance adversary")
    ax.axhline(np.log(2), color="grey", lw=0.8, ls="--")
    ax.text(0.0, np.log(2), " JSD bound ln 2", fontsize=7, va="bottom", color="grey")
    ax.set_xlabel("mean TVD(ŷ, ŷ_base)")
    ax.set_ylabel("mean JSD(α, α_base)")
    ax.set_ylim(0, 0.75)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center right")
    ax.set_title("W&P Fig. 5: JSD–TVD trade-off to the base model", fontsize=10)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=130)
    plt.close(fig)


def plot_diagnostic_mlp(path, measured: dict[str, float], published: dict[str, float] | None) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = {"uniform": "UNIFORM", "trained": "TRAINED MLP", "base": "BASE LSTM", "adversary": "ADVERSARY"}
    guides = [g for g in wpt.GUIDES if g in measured]
    x = np.arange(len(guides))
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.bar(x - 0.2, [measured[g] for g in guides], 0.4, label="measured", color="tab:blue")
    if published:
        ax.bar(x + 0.2, [published[g] for g in guides], 0.4, label="W&P Table 3 (SST)", color="tab:grey")
    for i, g in enumerate(guides):
        ax.text(i - 0.2, measured[g] + 0.01, f"{measured[g]:.3f}", ha="center", fontsize=8)
    ax.set_xticks(x, [names[g] for g in guides])
    ax.set_ylabel("test F1 (positive class)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8, loc="center right")
    ax.set_title("W&P §3.4 diagnostic MLP by guide", fontsize=10)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=130)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# the battery
def _per_instance_adversary(model, encoded, k, steps, eps, lam, seed, batch_size, progress):
    """J&W Alg. 3 on every instance (batched by length) via ``hf_attn.batteries.jw.battery``; returns the
    per-instance ε-max JSD and the TVD of the adversary attaining it (0, 0 when no adversary is
    within ε: the base attention is kept)."""
    from hf_attn.core.batching import pad_batch
    from hf_attn.methods.adversary import adversarial_attention, best_feasible_adversary

    ids = encoded["input_ids"]
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    order = np.argsort(lengths, kind="stable")
    eps_jsd = np.zeros(len(ids))
    eps_tvd = np.zeros(len(ids))
    for start in tqdm(range(0, len(order), batch_size), desc="J&W per-instance adversary",
                      disable=not progress, leave=False):
        rows = order[start:start + batch_size]
        input_ids, attended = pad_batch([ids[int(r)] for r in rows])
        mask = attended.long()
        with torch.no_grad():
            out = model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
        result = adversarial_attention(model, out.hidden_states, out.attentions, mask, k=k, lam=lam,
                                       eps=eps, steps=steps, seed=seed + start)
        best = best_feasible_adversary(result.tvd, result.jsd, eps)
        chosen_tvd = result.tvd.gather(1, best.index[:, None]).squeeze(1)
        eps_jsd[rows] = best.eps_max_jsd.double().numpy()
        eps_tvd[rows] = torch.where(best.any_feasible, chosen_tvd, torch.zeros_like(chosen_tvd)).double().numpy()
    return eps_jsd, eps_tvd


def _check_vocab(model_dir, tokenizer):
    from transformers import PreTrainedTokenizerFast
    other = PreTrainedTokenizerFast.from_pretrained(model_dir)
    if other.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"{model_dir} was trained with another vocabulary than the base model")


def _helper_plan(model_dir: str, runs_dir: str, settings: WPSettings, base_settings, helper, task: TaskData,
                 extra_guide_seeds, tag: str) -> list[tuple]:
    """Every helper model of the battery as ``(name, folder, train(folder))``: cheapest and most
    telling first (uniform, the guide adversary, the MLPs), seeds last."""
    base_cache = []  # the base's attention/probabilities on every split, computed once if needed
    guide_lambda = settings.guide_lambda

    def trained(train_settings):
        return lambda path: train(train_settings, path, task=task, progress=False)

    def adversary(lam, adversary_seed=None):
        def run(path):
            if not base_cache:
                base_cache.append(wpt.base_columns(model_dir, task, progress=False))
            wpt.train_consistent_adversary(model_dir, path, lam, task=task, epochs=helper.epochs,
                                           seed=adversary_seed, progress=False, _base=base_cache[0],
                                           protocol=settings.adversary_protocol,
                                           max_epochs=settings.adversary_max_epochs)
        return run

    def guided_mlp(guide, guide_seed=None):
        source = {"base": model_dir, "adversary": wpt.adversary_run_dir(runs_dir, guide_lambda, guide_seed, tag)}.get(guide)
        return lambda path: wpt.train_guided_mlp(model_dir, path, guide, source, task=task,
                                                 epochs=helper.epochs, progress=False)

    lambdas = sorted({float(x) for x in settings.lambdas})
    return ([("uniform", os.path.join(runs_dir, "uniform"), trained(wpt.uniform_settings(helper))),
             (f"adversary λ={guide_lambda:g}", wpt.adversary_run_dir(runs_dir, guide_lambda, tag=tag), adversary(guide_lambda))]
            + [(f"MLP guide {g}", wpt.guide_run_dir(runs_dir, g, tag=tag), guided_mlp(g)) for g in wpt.GUIDES]
            + [item for s in extra_guide_seeds for item in (
                (f"adversary λ={guide_lambda:g} seed {s}", wpt.adversary_run_dir(runs_dir, guide_lambda, s, tag),
                 adversary(guide_lambda, s)),
                (f"MLP guide adversary seed {s}", wpt.guide_run_dir(runs_dir, "adversary", s, tag),
                 guided_mlp("adversary", s)))]
            + [(f"adversary λ={lam:g}", wpt.adversary_run_dir(runs_dir, lam, tag=tag), adversary(lam))
               for lam in lambdas if lam != guide_lambda]
            + [(f"seed {s}", wpt.seed_run_dir(runs_dir, s), trained(replace(helper, seed=s)))
               for s in range(base_settings.seed + 1, base_settings.seed + 1 + settings.num_seeds)])


def _train_missing(plan: list[tuple], train_missing: bool, progress: bool) -> tuple[list[tuple], float]:
    """Train the helper models of ``plan`` without a ``metrics.json``, one after another; returns
    them and the seconds it took. ``train_missing=False``: a missing one is an error."""
    def need(path):
        if os.path.exists(os.path.join(path, "metrics.json")):
            return False
        if not train_missing:
            raise FileNotFoundError(f"{path} is not trained (run without --wp-no-train to train it)")
        return True

    start = time.perf_counter()
    todo = [item for item in plan if need(item[1])]
    bar = tqdm(todo, desc="wp: training helper models", disable=not progress)
    for name, path, train_it in bar:
        bar.set_postfix_str(name)
        logger.info("wp: training %s into %s", name, path)
        train_it(path)
    return todo, time.perf_counter() - start


def run_wp(model_dir: str, output_dir: str, settings: WPSettings | None = None,
           task: TaskData | None = None, **overrides) -> dict:
    """The whole W&P battery on the base model in ``model_dir`` (see the module docstring).
    ``settings`` (:class:`WPSettings`; None: its defaults) with keyword ``overrides`` of single fields
    (``run_wp(DIR, OUT, num_seeds=2)``). Helper models live in ``settings.runs_dir`` (default
    ``output_dir/models``); missing ones are trained (``train_missing``) one after another, finished
    ones reused. ``epochs`` overrides the base's epoch count for every helper model (default: the
    base's). ``task``: the base's task when already loaded. Returns the results dict.

    Long: the four W&P analyses (§3.2, §3.3, §4, §3.4) in sequence over the same base outputs, each
    section marked; the training of the helper models is :func:`_helper_plan` /
    :func:`_train_missing`.

    ``guide_seeds`` > 1 trains the λ = ``guide_lambda`` adversary with that many seeds and one MLP
    guided by each: the ADVERSARY guide's F1 is then their mean (± std, per seed in
    ``diagnostic_mlp.guides.adversary.seed_runs``). W&P report one run; with λ = 0.001 the KL
    term barely constrains the adversary's attention, so runs that differ only in seed (or in
    floating-point rounding) end at different attention and the guided F1 varies widely.

    ``adversary_protocol`` trains the consistent adversaries with ``"fast"`` (the base's epochs,
    L = TVD − λ·KL, dev-objective selection) or ``"wp"`` (W&P's code: up to 80 epochs, or
    ``adversary_max_epochs``, early stopping on the training objective with patience 10,
    L = ½·TVD − λ·KL class-weighted; see ``hf_attn.training.wp.ADVERSARY_PROTOCOLS``). Their
    folders (and the ADVERSARY-guided MLPs) carry the protocol's tag, so both can coexist."""
    settings = replace(settings or WPSettings(), **overrides)
    settings.validate()
    split, seed, progress = settings.split, settings.seed, settings.progress
    num_seeds, guide_lambda, guide_seeds = settings.num_seeds, settings.guide_lambda, settings.guide_seeds
    seed_statistic, per_instance_adversary = settings.seed_statistic, settings.per_instance_adversary
    adversary_k, adversary_steps = settings.adversary_k, settings.adversary_steps
    adversary_eps, adversary_lambda = settings.adversary_eps, settings.adversary_lambda
    adversary_protocol, adversary_max_epochs = settings.adversary_protocol, settings.adversary_max_epochs
    lambdas = sorted({float(x) for x in settings.lambdas})
    if not os.path.exists(os.path.join(model_dir, "run.json")):
        raise FileNotFoundError(f"{model_dir} has no run.json: the wp battery needs a folder written by "
                                "`hf-attn train` (it retrains the same setup with other seeds/attention)")
    wall_start = time.perf_counter()
    runs_dir = settings.runs_dir or os.path.join(output_dir, "models")
    os.makedirs(output_dir, exist_ok=True)
    base_settings = settings_from_run(model_dir)
    task = task or task_of(base_settings)
    if task.num_labels != 2:
        raise ValueError("the wp battery reports positive-class F1 (W&P): binary tasks only")
    helper = base_settings if settings.epochs is None else replace(base_settings, epochs=settings.epochs)
    tag = wpt.protocol_tag(adversary_protocol, adversary_max_epochs)
    protocol = wpt.adversary_protocol(adversary_protocol, max_epochs=adversary_max_epochs)

    # ---- training (resumable, one at a time) ----
    guide_seed_list = [None, *range(base_settings.seed + 1, base_settings.seed + guide_seeds)]
    plan = _helper_plan(model_dir, runs_dir, settings, base_settings, helper, task, guide_seed_list[1:], tag)
    todo, train_seconds = _train_missing(plan, settings.train_missing, progress)

    # ---- analysis on the split ----
    analysis_start = time.perf_counter()
    base_model, tokenizer = wpt.load_model(model_dir)
    encoded = tokenize_splits(task, tokenizer, base_settings.max_length)[split]
    labels = np.asarray(encoded["label"])
    label_names = list(task.label_names)
    base_att_list, base_probs = wpt.model_outputs(base_model, encoded)
    base_att, mask = ragged_to_padded(base_att_list)
    base_metrics = classification_metrics(base_probs, labels)

    def outputs_of(path):
        _check_vocab(path, tokenizer)
        model, _ = wpt.load_model(path)
        att, probs = wpt.model_outputs(model, encoded)
        return ragged_to_padded(att)[0], probs

    # 1. uniform baseline
    uni_att, uni_probs = outputs_of(os.path.join(runs_dir, "uniform"))
    uni_metrics = classification_metrics(uni_probs, labels)
    uniform = {"split": split, "base": _f1s(base_metrics), "uniform": _f1s(uni_metrics),
               "f1_gap": base_metrics["f1"] - uni_metrics["f1"],
               "macro_f1_gap": base_metrics["macro_f1"] - uni_metrics["macro_f1"],
               "note": "W&P §3.2/Table 2: a small gap makes the dataset no test of attention (SST: borderline)"}
    uniform_point = divergence_summary(jsd(torch.from_numpy(uni_att), torch.from_numpy(base_att),
                                           torch.from_numpy(mask)).numpy(),
                                       tvd(torch.from_numpy(uni_probs), torch.from_numpy(base_probs)).numpy())

    # 2. seed variance
    seeds = list(range(base_settings.seed + 1, base_settings.seed + 1 + num_seeds))
    seed_outputs = [outputs_of(wpt.seed_run_dir(runs_dir, s)) for s in
                    tqdm(seeds, desc="seed models", disable=not progress, leave=False)]
    stats = seed_variance_statistics(base_att, np.stack([a for a, _ in seed_outputs]), base_probs,
                                     np.stack([p for _, p in seed_outputs]), mask)
    seed_values = stats[f"{seed_statistic}_jsd"]
    seed_points = [dict(seed=s, **divergence_summary(stats["jsd"][i], stats["tvd"][i]),
                        **_f1s(classification_metrics(seed_outputs[i][1], labels)))
                   for i, s in enumerate(seeds)]
    seed_section = {
        "seeds": seeds, "statistic": seed_statistic, "per_seed": seed_points,
        "summary": {"mean_max_jsd": float(stats["max_jsd"].mean()),
                    "mean_median_jsd": float(stats["median_jsd"].mean()),
                    "mean_max_tvd": float(stats["max_tvd"].mean()),
                    "mean_median_tvd": float(stats["median_tvd"].mean()),
                    "f1_mean": float(np.mean([p["f1"] for p in seed_points])),
                    "f1_std": float(np.std([p["f1"] for p in seed_points]))},
        "by_class_and_max_attention": binned_summary(seed_values, stats["max_attention"], labels,
                                                     label_names=label_names)}

    # J&W per-instance adversary on the same axes
    jw_section, jw_point, adversary_values = None, None, None
    if per_instance_adversary:
        eps_jsd, eps_tvd = _per_instance_adversary(base_model, encoded, adversary_k, adversary_steps,
                                                   adversary_eps, adversary_lambda, seed, 256, progress)
        adversary_values = eps_jsd
        jw_point = divergence_summary(eps_jsd, eps_tvd)
        jw_section = {"available": True, "k": adversary_k, "steps": adversary_steps,
                      "eps": adversary_eps, "lambda": adversary_lambda,
                      "fraction_with_feasible_adversary": float((eps_jsd > 0).mean()),
                      **jw_point,
                      "by_class_and_max_attention": binned_summary(eps_jsd, stats["max_attention"], labels,
                                                                   label_names=label_names)}

    # 4. model-consistent adversary sweep
    lambda_rows = []
    for lam in sorted(set(lambdas) | {guide_lambda}):
        path = wpt.adversary_run_dir(runs_dir, lam, tag=tag)
        att, probs = outputs_of(path)
        with open(os.path.join(path, "metrics.json"), encoding="utf-8") as f:
            trained_as = json.load(f)
        j = jsd(torch.from_numpy(att), torch.from_numpy(base_att), torch.from_numpy(mask)).numpy()
        t = tvd(torch.from_numpy(probs), torch.from_numpy(base_probs)).numpy()
        _, _, kl = wpt.consistent_adversary_loss(torch.from_numpy(probs), torch.from_numpy(base_probs),
                                                 torch.from_numpy(att), torch.from_numpy(base_att),
                                                 torch.from_numpy(mask), lam)
        lambda_rows.append({"lambda": lam, "in_sweep": lam in lambdas,
                            **_f1s(classification_metrics(probs, labels)),
                            **divergence_summary(j, t), "mean_kl": float(kl.mean()),
                            "epochs_trained": trained_as.get("epochs_trained"),
                            "train_seconds": trained_as.get("train_seconds")})

    # 3. diagnostic MLP (test F1 as trained: the guide is needed at test time)
    mlp = {}
    for guide in wpt.GUIDES:
        with open(os.path.join(wpt.guide_run_dir(runs_dir, guide, tag=tag), "metrics.json"), encoding="utf-8") as f:
            m = json.load(f)
        mlp[guide] = {"test_f1": m["test_f1"], "test_macro_f1": m["test_macro_f1"],
                      "test_accuracy": m["test_accuracy"],
                      "published_sst_f1": wpt.WP_TABLE3_SST[guide] if base_settings.dataset == "sst" else None}
    if guide_seeds > 1:  # ADVERSARY guide: mean over the guide adversary's seeds
        runs = []
        for s in guide_seed_list:
            with open(os.path.join(wpt.guide_run_dir(runs_dir, "adversary", s, tag), "metrics.json"), encoding="utf-8") as f:
                m = json.load(f)
            with open(os.path.join(wpt.adversary_run_dir(runs_dir, guide_lambda, s, tag), "metrics.json"),
                      encoding="utf-8") as f:
                a = json.load(f)
            runs.append({"seed": base_settings.seed if s is None else s, "test_f1": m["test_f1"],
                         "test_macro_f1": m["test_macro_f1"], "test_accuracy": m["test_accuracy"],
                         "adversary_mean_jsd_to_base": a["mean_jsd_to_base"],
                         "adversary_mean_kl_to_base": a["mean_kl_to_base"],
                         "adversary_mean_tvd_to_base": a["mean_tvd_to_base"]})
        f1s = np.array([r["test_f1"] for r in runs])
        mlp["adversary"].update({"test_f1": float(f1s.mean()), "test_f1_std": float(f1s.std()),
                                 "test_macro_f1": float(np.mean([r["test_macro_f1"] for r in runs])),
                                 "test_accuracy": float(np.mean([r["test_accuracy"] for r in runs])),
                                 "seed_runs": runs})
    mlp_section = {"guides": mlp, "adversary_lambda": guide_lambda, "adversary_seeds": guide_seeds,
                   "split": "test",
                   "ordering": ordering_holds({g: v["test_f1"] for g, v in mlp.items()}),
                   "published_table3": "W&P Table 3 (SST): uniform 0.812, trained 0.817, base 0.824, "
                                       "adversary 0.592"}

    # figures
    figures = {"seed_variance": "seed_variance.png", "tradeoff": "tradeoff.png",
               "diagnostic_mlp": "diagnostic_mlp.png"}
    plot_seed_variance(os.path.join(output_dir, figures["seed_variance"]), seed_values, adversary_values,
                       stats["max_attention"], labels, label_names, statistic=seed_statistic,
                       num_seeds=num_seeds)
    plot_tradeoff(os.path.join(output_dir, figures["tradeoff"]), [r for r in lambda_rows if r["in_sweep"]],
                  seed_points, uniform_point, jw_point)
    plot_diagnostic_mlp(os.path.join(output_dir, figures["diagnostic_mlp"]),
                        {g: v["test_f1"] for g, v in mlp.items()},
                        wpt.WP_TABLE3_SST if base_settings.dataset == "sst" else None)
    analysis_seconds = time.perf_counter() - analysis_start

    helper_train_seconds = {}
    for _, path, _ in plan:
        with open(os.path.join(path, "metrics.json"), encoding="utf-8") as f:
            helper_train_seconds[os.path.relpath(path, runs_dir)] = json.load(f).get("train_seconds")
    results = {
        "battery": "wp", "paper": "Wiegreffe & Pinter 2019, Attention is not not Explanation",
        "model_dir": os.path.abspath(model_dir), "runs_dir": os.path.abspath(runs_dir), "split": split,
        "num_instances": int(len(labels)), "label_names": label_names,
        "base": _f1s(base_metrics) | {"roc_auc": base_metrics["roc_auc"]},
        "uniform_baseline": uniform, "seed_variance": seed_section, "per_instance_adversary": jw_section,
        "consistent_adversary": {"lambdas": lambdas, "guide_lambda": guide_lambda, "rows": lambda_rows,
                                 "protocol": protocol,
                                 "objective": ("L = TVD − λ·KL" if protocol["tvd_scale"] == 1.0 else
                                               f"L = {protocol['tvd_scale']:g}·TVD − λ·KL")
                                              + (", class-weighted (W&P's batch-level weights)"
                                                 if protocol["class_weighted"] else ""),
                                 "selection": ("epoch with the lowest training objective, early stopping after "
                                               f"{protocol['patience']} epochs without a decrease, at most "
                                               f"{protocol['max_epochs']} epochs (W&P's code)"
                                               if protocol["selection"] == "train_objective"
                                               else "checkpoint with the lowest dev objective")},
        "diagnostic_mlp": mlp_section,
        "tradeoff_points": {"uniform": uniform_point, "seeds": seed_points, "jw_per_instance": jw_point,
                            "consistent_adversary": lambda_rows},
        "figures": figures,
        "timing": {"training_seconds_this_run": round(train_seconds, 1),
                   "models_trained_this_run": len(todo),
                   "helper_train_seconds": helper_train_seconds,
                   "helper_train_seconds_total": round(sum(v or 0 for v in helper_train_seconds.values()), 1),
                   "analysis_seconds": round(analysis_seconds, 1),
                   "wall_seconds": round(time.perf_counter() - wall_start, 1)},
        "options": {"num_seeds": num_seeds, "guide_seeds": guide_seeds, "seed_statistic": seed_statistic,
                    "epochs": helper.epochs,
                    "adversary_k": adversary_k, "adversary_steps": adversary_steps, "seed": seed,
                    "adversary_protocol": adversary_protocol, "adversary_max_epochs": adversary_max_epochs},
        "versions": environment_versions()}
    write_json_atomic(os.path.join(output_dir, "results.json"), results)
    return results


def _f1s(metrics: dict) -> dict:
    return {"f1": metrics["f1"], "macro_f1": metrics["macro_f1"], "accuracy": metrics["accuracy"]}


def _num(value, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def format_wp_summary(results: dict) -> str:
    """The labelled table ``hf-attn analyze --battery wp`` prints (every number is in results.json)."""
    uniform = results.get("uniform_baseline") or {}
    lines = [f"W&P battery: {results.get('num_instances', '?')} {results.get('split', '')} instances, "
             f"F1 of the model {_num((results.get('base') or {}).get('f1'))}"]
    lines.append(f"  {'uniform attention (§3.2)':32s} F1 trained {_num((uniform.get('base') or {}).get('f1'))}, "
                 f"frozen uniform {_num((uniform.get('uniform') or {}).get('f1'))}, gap {_num(uniform.get('f1_gap'))}")
    seeds = (results.get("seed_variance") or {}).get("summary") or {}
    lines.append(f"  {'seed variance (§3.3)':32s} mean max JSD {_num(seeds.get('mean_max_jsd'))}, "
                 f"mean max TVD {_num(seeds.get('mean_max_tvd'))}, F1 {_num(seeds.get('f1_mean'))} "
                 f"± {_num(seeds.get('f1_std'))}")
    for row in (results.get("consistent_adversary") or {}).get("rows", []):
        lines.append(f"  {'consistent adversary λ = ' + format(row['lambda'], 'g') + ' (§4)':32s} "
                     f"F1 {_num(row.get('f1'))}, mean JSD {_num(row.get('mean_jsd'))}, "
                     f"mean TVD {_num(row.get('mean_tvd'))}")
    mlp = results.get("diagnostic_mlp") or {}
    for guide, values in (mlp.get("guides") or {}).items():
        published = values.get("published_sst_f1")
        lines.append(f"  {'diagnostic MLP, ' + guide + ' guide (§3.4)':32s} F1 {_num(values.get('test_f1'))}"
                     + (f" (W&P SST {published:.3f})" if isinstance(published, (int, float)) else ""))
    ordering = (mlp.get("ordering") or {}).get("holds")
    if ordering is not None:
        lines.append(f"  {'W&P Table 3 ordering':32s} {'holds' if ordering else 'does not hold'}")
    seconds = (results.get("timing") or {}).get("wall_seconds")
    if seconds is not None:
        lines.append(f"  {'seconds':32s} {seconds}")
    return "\n".join(lines)


__all__ = ["run_wp", "WPSettings", "format_wp_summary",
           "seed_variance_statistics", "seed_variance_summary", "consistent_adversary_summary",
           "binned_summary", "divergence_summary", "ordering_holds",
           "plot_seed_variance", "plot_tradeoff", "plot_diagnostic_mlp"]
