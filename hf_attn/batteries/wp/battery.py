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

import argparse
from dataclasses import dataclass, field

import numpy as np
import torch

from hf_attn.training import wp as wpt
from hf_attn.core.batching import ragged_to_padded
from hf_attn.core.io import save_figure_atomic
from hf_attn.batteries.jw.figures import class_colour, class_label
from hf_attn.core.measures import jsd, tvd
from hf_attn.core.arguments import check_count, count, finite_float, positive_int
from hf_attn.core.settings_cli import data_option, option
from hf_attn.batteries.jw.common import DEVICE_OPTION, PRECISION_OPTION, heads_option

# Same code as the NumPy measures every evaluate module ships (one source: that file, which must
# stay self-contained to load from the Hub without hf_attn).
from hf_attn.core.numpy_measures import binned_summary, divergence_summary  # noqa: F401

MAX_ATTENTION_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)
# W&P Table 2 (SST, LSTM): base vs uniform F1; §3.2 calls SST "borderline".
ORDERING = ("base", "trained", "uniform", "adversary")  # W&P: base LSTM ≥ trained ≥ uniform > adversary


# ---------------------------------------------------------------------------------------------
# settings
def _float_list(text: str) -> list[float]:
    """``--wp-lambdas 0.1,1``: comma-separated numbers >= 0."""
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from err
    if not values or any(not v >= 0 or v == float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"expected finite numbers >= 0, got {text!r}")
    return values


def _also(flag: str, metadata: dict) -> dict:
    """``metadata`` (one field's option) with one more flag."""
    from dataclasses import replace

    cli = metadata["cli"]
    return {"cli": replace(cli, aliases=cli.aliases + (flag,))}


@dataclass
class WPSettings:
    """Settings of the W&P battery (``hf-attn analyze DIR --battery wp``, :func:`hf_attn.runs.wp.run_wp`); the field
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
    batch_size: instances per forward of the analyses. num_seeds 0: §3.3 not run.
    BERT-family classifiers only (:mod:`hf_attn.batteries.wp.transformer`): diagnostic_mlp: run §3.4
    (the papers' models always train their guided MLPs); mlp_guides / mlp_freeze_embeddings: which
    MLP guides, and whether the word-piece embeddings stay fixed; transformer_layer /
    transformer_heads: the explained ``[CLS]`` attention (layer index, ``"mean"`` or a head index);
    uniform_every_layer: also make the ``[CLS]`` row uniform at every layer; seed_model_dirs:
    fine-tuning seeds for §3.3 (besides ``seed-*`` folders in ``runs_dir``); max_instances: analyse
    the first N instances; dataset (text_column, label_column): the data of a folder without
    run.json.
    """

    # ``metadata=option(...)``: the field's ``hf-attn analyze --wp-*`` option (hf_attn.core.settings_cli)
    split: str = field(default="test", metadata=option(command="split"))
    seed: int = field(default=0, metadata=option(command="seed"))
    progress: bool = field(default=True, metadata=option(command="quiet", negate=True))
    runs_dir: str | None = field(default=None, metadata=option(
        "where the helper models (uniform, seeds, adversaries, MLPs) live", aliases=("--runs-dir",),
        default_text="OUT/models"))
    num_seeds: int = field(default=8, metadata=option("seed models", aliases=("--num-seeds",),
                                                      type=count(1, limit="seed_models")))
    lambdas: tuple[float, ...] = field(default=wpt.DEFAULT_LAMBDAS, metadata=option(
        "λ sweep of the consistent adversary", aliases=("--lambdas",), type=_float_list,
        type_text="comma-separated numbers ≥ 0"))
    guide_lambda: float = field(default=0.001, metadata=option(
        "λ of the adversary whose attention guides the diagnostic MLP (as W&P)", type=finite_float(0)))
    guide_seeds: int = field(default=1, metadata=option(
        "seeds of the guide adversary (one guided MLP each; F1 = their mean; as W&P)",
        type=count(1, limit="seed_models")))
    seed_statistic: str = field(default="max", metadata=option(
        "max over seeds (W&P paper) or median (W&P code)", choices=("max", "median")))
    epochs: int | None = field(default=None, metadata=option("epochs of helper models",
                                                             type=count(1, limit="epochs"), default_text="the base's"))
    train_missing: bool = field(default=True, metadata=option("fail instead of training missing models",
                                                              flag="no-train", negate=True))
    adversary_k: int = 5
    adversary_steps: int = field(default=500, metadata=option(
        "optimisation steps of the J&W per-instance adversary", type=count(0, limit="steps")))
    adversary_eps: float = 0.01
    adversary_lambda: float = 500.0
    per_instance_adversary: bool = field(default=True, metadata=option(
        "skip the J&W per-instance adversary (§3.3)", flag="skip-per-instance-adversary", negate=True))
    adversary_shard_instances: int = field(default=256, metadata=option(
        "instances per batch of the J&W per-instance adversary (its seed is the batch's number); each batch is "
        "one shard, the shards split between the processes of `accelerate launch` and cached in OUT/cache for "
        "resuming", type=count(1, limit="batch_size")))
    adversary_protocol: str = field(default="fast", metadata=option(
        "consistent adversary: 'wp' = W&P's code (≤ 80 epochs, early stopping on the training objective, ½·TVD, "
        "class-weighted) or 'fast' (base's epochs, dev selection)", choices=tuple(sorted(wpt.ADVERSARY_PROTOCOLS))))
    adversary_max_epochs: int | None = field(default=None, metadata=option(
        "epoch cap of the 'wp' protocol", type=count(1, limit="epochs"),
        default_text=str(wpt.ADVERSARY_PROTOCOLS["wp"]["max_epochs"])))
    transformer_layer: int = field(default=-1, metadata=option(
        "BERT-family models: the layer whose [CLS] attention is explained (-1: the last)", flag="layer", type=int))
    transformer_heads: str = field(default="mean", metadata=option(
        "BERT-family models: 'mean' or one head index", flag="heads", convert=heads_option))
    device: str = field(default="auto", metadata=_also("--wp-device", DEVICE_OPTION))
    precision: str = field(default="float32", metadata=_also("--wp-precision", PRECISION_OPTION))
    uniform_every_layer: bool = field(default=True, metadata=option(
        "BERT-family models: skip the uniform [CLS] row at every layer (§3.2 extra)", flag="no-uniform-every-layer",
        negate=True))
    seed_model_dirs: tuple[str, ...] = field(default=(), metadata=option(
        "BERT-family models: fine-tuning seeds of the same model for §3.3 (folders)", nargs="+", metavar="DIR",
        type_text="folders"))
    max_instances: int | None = field(default=None, metadata=option(
        "BERT-family models: analyse only the first N instances of the split", type=positive_int, default_text="all"))
    dataset: str | None = field(default=None, metadata=data_option("dataset"))
    text_column: str = field(default="text", metadata=data_option("text_column"))
    label_column: str = field(default="label", metadata=data_option("label_column"))
    batch_size: int = 64
    diagnostic_mlp: bool = True
    mlp_guides: tuple[str, ...] = ("uniform", "transformer", "trained")
    mlp_freeze_embeddings: bool = False

    def validate(self) -> None:
        if self.split not in ("train", "validation", "test"):
            raise ValueError(f"split must be train, validation or test, got {self.split!r}")
        if self.seed_statistic not in ("max", "median"):
            raise ValueError(f"seed_statistic must be 'max' or 'median', got {self.seed_statistic!r}")
        if self.num_seeds < 0 or self.guide_seeds < 1:
            raise ValueError(f"num_seeds must be >= 0 and guide_seeds >= 1, got {self.num_seeds}, {self.guide_seeds}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {self.batch_size!r}")
        if any(x < 0 for x in self.lambdas) or self.guide_lambda < 0:
            raise ValueError("lambdas must be >= 0")
        if self.epochs is not None and self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        from hf_attn.core.validation import check_whole

        counts = {"num_seeds": ("seed_models", 0), "guide_seeds": ("seed_models", 1), "epochs": ("epochs", 1),
                  "adversary_k": ("adversaries", 1), "adversary_steps": ("steps", 0),
                  "adversary_max_epochs": ("epochs", 1), "batch_size": ("batch_size", 1),
                  "adversary_shard_instances": ("batch_size", 1)}
        for name, (limit, low) in counts.items():  # every count up to its upper bound, with the reason
            if getattr(self, name) is not None:
                check_whole(name, getattr(self, name), low, limit=limit)
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


__all__ = ["WPSettings", "format_wp_summary",
           "seed_variance_statistics", "seed_variance_summary", "consistent_adversary_summary",
           "binned_summary", "divergence_summary", "ordering_holds",
           "plot_seed_variance", "plot_tradeoff", "plot_diagnostic_mlp"]
