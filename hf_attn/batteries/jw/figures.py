"""Figures of the Jain & Wallace battery in the paper's style (matplotlib, Agg backend).

Fig. 1: original vs adversarial attention heatmap over one sentence; Fig. 2: histograms of
Kendall τ per predicted class; Fig. 3: median permutation Δŷ vs max attention; Fig. 4: ε-max JSD
histogram; Fig. 5: ε-max JSD vs max attention. Colours as in J&W: orange = predicted positive,
purple = predicted negative.
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from hf_attn.core.io import save_figure_atomic  # noqa: E402
from hf_attn.batteries.jw.summary import MAX_ATTENTION_BINS  # noqa: E402

# One colour per class id in every battery's figures (J&W's: purple = negative, orange = positive).
CLASS_COLOURS = ["#8e44ad", "#f39c12", "#27ae60", "#2980b9", "#c0392b"]  # purple, orange, …


def class_colour(c: int) -> str:
    return CLASS_COLOURS[int(c) % len(CLASS_COLOURS)]


def class_label(names, c, kind: str = "predicted class") -> str:
    """Legend text, e.g. ``"predicted class: negative"`` (``kind="gold label"`` for W&P's figures)."""
    name = names[c] if names and c < len(names) else f"class {c}"
    return f"{kind}: {name}"


_class_label = class_label


def _save(fig, path: str) -> str:
    try:
        save_figure_atomic(fig, path, dpi=150, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def class_histograms(values, predictions, path: str, xlabel: str, title: str, class_names=None,
                     value_range=(-1.0, 1.0), bins: int = 30) -> str:
    """J&W Figs 2 and 4: overlaid density histograms of ``values`` per predicted class."""
    values = np.asarray(values, dtype=np.float64)
    predictions = np.asarray(predictions)
    fig, ax = plt.subplots(figsize=(4.2, 3.0))
    edges = np.linspace(value_range[0], value_range[1], bins + 1)
    for c in np.unique(predictions):
        v = values[(predictions == c) & np.isfinite(values)]
        if len(v):
            ax.hist(v, bins=edges, density=True, alpha=0.55, color=class_colour(c),
                    edgecolor="white", linewidth=0.4, label=f"{_class_label(class_names, c)} (n={len(v)})")
    ax.set_xlim(*value_range)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _save(fig, path)


def violins_by_max_attention(values, max_attention, predictions, path: str, xlabel: str, title: str,
                             class_names=None, value_range=(0.0, None), bins=MAX_ATTENTION_BINS) -> str:
    """J&W Figs 3 and 5: horizontal violins of ``values`` (x) per max-attention bin (y), one per
    predicted class side by side. NaN values (instances a summary skipped) are left out."""
    values = np.asarray(values, dtype=np.float64)
    max_attention = np.asarray(max_attention, dtype=np.float64)
    predictions = np.asarray(predictions)
    finite = np.isfinite(values)
    values, max_attention, predictions = values[finite], max_attention[finite], predictions[finite]
    classes = list(np.unique(predictions))
    edges = np.asarray(bins)
    which = np.clip(np.searchsorted(edges, max_attention, side="right") - 1, 0, len(edges) - 2)
    fig, ax = plt.subplots(figsize=(4.2, 3.4))
    height = 0.8 / max(len(classes), 1)
    for ci, c in enumerate(classes):
        data, positions = [], []
        for b in range(len(edges) - 1):
            v = values[(which == b) & (predictions == c)]
            if len(v) >= 2 and np.ptp(v) > 0:
                data.append(v)
                positions.append(b - 0.4 + height * (ci + 0.5))
            elif len(v):
                ax.scatter(v, [b - 0.4 + height * (ci + 0.5)] * len(v), s=6,
                           color=class_colour(c))
        if data:
            parts = ax.violinplot(data, positions=positions, orientation="horizontal", widths=height * 0.95,
                                  showmedians=True, showextrema=False)
            for body in parts["bodies"]:
                body.set_facecolor(class_colour(c))
                body.set_edgecolor("black")
                body.set_linewidth(0.4)
                body.set_alpha(0.7)
            parts["cmedians"].set_color("black")
        ax.plot([], [], color=class_colour(c), lw=6, alpha=0.7,
                label=_class_label(class_names, c))
    ax.set_yticks(range(len(edges) - 1))
    ax.set_yticklabels([f"[{edges[b]:.2f}, {edges[b + 1]:.2f})" for b in range(len(edges) - 1)],
                       fontsize=8)
    ax.set_ylim(-0.5, len(edges) - 1.5)
    ax.set_ylabel("max attention")
    ax.set_xlabel(xlabel)
    lo, hi = value_range
    ax.set_xlim(lo, hi if hi is not None else max(float(np.nanmax(values, initial=0.0)) * 1.05, 1e-3))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    return _save(fig, path)


def attention_heatmap(tokens, original, adversarial, path: str, original_output: float,
                      adversarial_output: float, note: str = "", output_name: str = "ŷ") -> str:
    """J&W Fig. 1: the sentence twice, each word's background shaded by its attention weight:
    observed attention (left) and an adversarial attention (right), with their outputs ŷ
    (``output_name`` says which probability, e.g. ``"P(positive)"``)."""
    tokens = list(tokens)
    lines = 1
    for _ in range(3):  # lay out, then redo with the height the wrapped text needs
        fig, axes = plt.subplots(1, 2, figsize=(10.0, 0.32 * lines + 0.35))
        used = _heatmap_panels(fig, axes, tokens, original, adversarial, original_output,
                               adversarial_output, note, output_name)
        if used == lines:
            break
        plt.close(fig)
        lines = used
    return _save(fig, path)


def _heatmap_panels(fig, axes, tokens, original, adversarial, original_output, adversarial_output,
                    note, output_name="ŷ") -> int:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    cmap = plt.get_cmap("Reds")
    lines_used = 1
    panels = ((axes[0], original, f"Original attention  (ŷ = {output_name} = {original_output:.3f})"),
              (axes[1], adversarial, f"Adversarial attention  (ŷ = {output_name} = {adversarial_output:.3f}){note}"))
    for ax, weights, title in panels:
        ax.set_axis_off()
        weights = np.asarray(weights, dtype=np.float64)
        scale = weights.max() if weights.max() > 0 else 1.0
        box = ax.get_window_extent(renderer)
        line_height = 0.32 * fig.dpi / box.height
        x, y, lines = 0.0, 1.0, 1
        for token, w in zip(tokens, weights):
            text = ax.text(x, y, token, fontsize=10, va="top", ha="left", transform=ax.transAxes,
                           bbox={"boxstyle": "square,pad=0.15", "facecolor": cmap(0.9 * w / scale),
                                 "edgecolor": "none"},
                           color="white" if w / scale > 0.6 else "black")
            advance = (text.get_window_extent(renderer).width + 6) / box.width
            if x > 0 and x + advance > 1.0:  # wrap: move this word to the next line
                x, y, lines = 0.0, y - line_height, lines + 1
                text.set_position((x, y))
            x += advance
        ax.set_title(title, fontsize=10, loc="left")
        lines_used = max(lines_used, lines)
    return lines_used


def write_jw_figures(instances, summary: dict, output_dir: str, tokenizer, class_names=None,
                     model_name: str = "") -> dict[str, str]:
    """All J&W figures for a finished battery → ``{name: path}``."""
    os.makedirs(output_dir, exist_ok=True)
    predictions = instances.predictions
    max_attention = instances.max_attention
    suffix = f" ({model_name})" if model_name else ""
    paths = {
        "fig2_tau_gradient": class_histograms(
            summary["tau_gradient"]["tau"], predictions, os.path.join(output_dir, "fig2_tau_gradient.png"),
            "Kendall τ (attention, gradient)", f"τ_g{suffix}", class_names),
        "fig2_tau_loo": class_histograms(
            summary["tau_loo"]["tau"], predictions, os.path.join(output_dir, "fig2_tau_loo.png"),
            "Kendall τ (attention, LOO-TVD: TVD(ŷ(x₋t), ŷ(x)))", f"τ_loo{suffix}", class_names),
        "fig2_tau_gradient_loo": class_histograms(
            summary["tau_gradient_loo"]["tau"], predictions,
            os.path.join(output_dir, "fig2_tau_gradient_loo.png"),
            "Kendall τ (gradient, LOO-TVD: TVD(ŷ(x₋t), ŷ(x)))", f"τ(g, LOO-TVD){suffix}", class_names),
        "fig3_permutation": violins_by_max_attention(
            summary["permutation"]["median_tvd"], max_attention, predictions,
            os.path.join(output_dir, "fig3_permutation.png"), "median output difference Δŷ_med",
            f"Permutation{suffix}", class_names),
        "fig4_eps_max_jsd": class_histograms(
            summary["adversary"]["eps_max_jsd"], predictions,
            os.path.join(output_dir, "fig4_eps_max_jsd.png"), "ε-max JSD",
            f"Adversarial attention, ε = {summary['adversary']['eps']}{suffix}", class_names,
            value_range=(0.0, 0.7), bins=28),
        "fig5_eps_max_jsd_vs_max_attention": violins_by_max_attention(
            summary["adversary"]["eps_max_jsd"], max_attention, predictions,
            os.path.join(output_dir, "fig5_eps_max_jsd_vs_max_attention.png"), "ε-max JSD",
            f"Adversarial attention{suffix}", class_names, value_range=(0.0, 0.7)),
    }
    example = pick_example(instances)
    if example is not None:
        i, a = example
        tokens = tokenizer.convert_ids_to_tokens([int(t) for t in instances.input_ids[i]])
        paths["fig1_adversarial_heatmap"] = attention_heatmap(
            tokens, instances.attention[i], instances.adversary_attention[i][a],
            os.path.join(output_dir, "fig1_adversarial_heatmap.png"),
            float(instances.probabilities[i, -1]), float(instances.adversary_probabilities[i, a, -1]),
            note=f", JSD = {instances.adversary_jsd[i, a]:.2f}",
            output_name=f"P({class_names[-1] if class_names else 'class ' + str(len(instances.probabilities[i]) - 1)})")
    return paths


def pick_example(instances, min_length: int = 8, max_length: int = 24):
    """An instance like J&W Fig. 1: peaky attention and a feasible, very different adversary.
    Returns ``(instance, adversary)`` or None."""
    lengths = np.array([len(a) for a in instances.attention])
    score = instances.eps_max_jsd + instances.max_attention
    ok = (lengths >= min_length) & (lengths <= max_length) & (instances.eps_max_jsd > 0)
    if not ok.any():
        ok = instances.eps_max_jsd > 0
    if not ok.any():
        return None
    i = int(np.flatnonzero(ok)[np.argmax(score[ok])])
    a = int(np.argmin(np.abs(instances.adversary_jsd[i] - instances.eps_max_jsd[i])))
    return i, a


def per_layer_figure(summary: dict, path: str, title: str = "") -> str:
    """τ(attention, gradient) and τ(attention, LOO-TVD) per layer ([CLS] row, head mean), with the
    rollout's τ as dashed lines; saved atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hf_attn.core.io import save_figure_atomic

    layers = [e["layer"] + 1 for e in summary["per_layer"]]
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    ax.plot(layers, [e["tau_gradient"] for e in summary["per_layer"]], "o-", color="#2980b9",
            label="τ(attention, gradient)")
    ax.plot(layers, [e["tau_loo"] for e in summary["per_layer"]], "s-", color="#c0392b", label="τ(attention, LOO-TVD)")
    for key, color, label in (("tau_rollout_gradient", "#2980b9", "τ(rollout, gradient)"),
                              ("tau_rollout_loo", "#c0392b", "τ(rollout, LOO-TVD)")):
        mean = summary[key]["overall"]["mean"]
        if mean is not None and np.isfinite(mean):  # None when every instance's τ is undefined (all tied)
            ax.axhline(mean, color=color, ls="--", lw=1, label=label)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("layer ([CLS] attention row, mean over heads)")
    ax.set_ylabel("mean Kendall τ")
    ax.set_xticks(layers)
    ax.set_title(title or "Attention vs importance by layer")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    try:
        return save_figure_atomic(fig, path, dpi=130)
    finally:
        plt.close(fig)
