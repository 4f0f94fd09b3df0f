"""One sentence, every explanation: the logic behind the Gradio explorer (``spaces_app/app.py``).

For a sentence x, :func:`explain_sentence` computes with one model forward plus the J&W battery
functions of :mod:`hf_attn.analysis.jw` (nothing re-implemented here):

- the prediction ŷ and the attention α (J&W §2);
- gradient importance g_t = |∂ŷ/∂e_t · e_t| with α detached (J&W Alg. 1);
- leave-one-out Δŷ_t = TVD(ŷ(x₋t), ŷ(x)) (J&W §4.1);
- Δŷ for random permutations of α (J&W Alg. 2);
- k adversarial attentions (J&W Alg. 3) and the one shown: the largest-JSD adversary with
  TVD ≤ ε (if none is feasible, the smallest-TVD one, flagged);
- per-token prediction probabilities p̂_t = decoder(h_t) alone, i.e. all attention on t
  (Tutek & Šnajder 2020, §5 / Fig. 2), for the predicted class.

:func:`heatmap_html` and :func:`permutation_figure` render it; :func:`load_model`,
:func:`find_local_model` and :func:`default_model` pick the model the app opens.
"""

from __future__ import annotations

import html
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from .analysis.jw import adversarial_attention, gradient_importance, leave_one_out, permutation_tvd

REGULARISED_VARIANTS = ("residual", "tying", "mlm", "concat")
DEFAULT_MAX_TOKENS = 100


class ExplainError(ValueError):
    """Input the explorer cannot explain (empty, too long, ...): the message is shown to the user."""


@dataclass
class SentenceExplanation:
    """Everything the explorer shows for one sentence (T real tokens, C classes, k adversaries,
    P permutations). Arrays are numpy float64."""

    text: str
    tokens: list[str]  # (T,)
    label_names: list[str]  # (C,)
    probabilities: np.ndarray  # (C,) ŷ
    predicted: int
    attention: np.ndarray  # (T,) α
    gradient: np.ndarray  # (T,) g
    loo: np.ndarray  # (T,) Δŷ_t (NaN for a one-token sentence)
    permutation_tvd: np.ndarray  # (P,)
    adversary_attention: np.ndarray  # (T,) the adversary shown
    adversary_tvd: float  # its Δŷ = TVD(ŷ(α_adv), ŷ)
    adversary_jsd: float  # its JSD(α_adv, α)
    adversary_probabilities: np.ndarray  # (C,) ŷ(α_adv)
    adversary_feasible: bool  # TVD ≤ ε
    adversaries_tvd: np.ndarray  # (k,)
    adversaries_jsd: np.ndarray  # (k,)
    eps: float
    eps_max_jsd: float
    token_probability: np.ndarray  # (T,) p̂_t of the predicted class
    variant: str
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def regularised(self) -> bool:
        return self.variant in REGULARISED_VARIANTS

    @property
    def permutation_median(self) -> float:
        return float(np.median(self.permutation_tvd))

    def to_dict(self) -> dict:
        """JSON-ready (lists, no NaN: NaN → None)."""
        def clean(value):
            if isinstance(value, np.ndarray):
                return [clean(v) for v in value.tolist()]
            if isinstance(value, list):
                return [clean(v) for v in value]
            if isinstance(value, float) and not np.isfinite(value):
                return None
            return value

        payload = {k: clean(v) for k, v in asdict(self).items()}
        payload["prediction"] = self.label_names[self.predicted]
        payload["permutation_median"] = self.permutation_median
        return payload


@torch.no_grad()
def _token_probability(model, hidden_states: torch.Tensor, predicted: int) -> torch.Tensor:
    """T&Š Fig. 2: p̂_t = softmax(decoder(h_t)) — one-hot attention on each token t, exact through
    ``logits_from_token_logits`` (linear decoder, Σα = 1). ``hidden_states`` (1, T, D) → (T,)."""
    length = hidden_states.shape[1]
    one_hot = torch.eye(length, dtype=hidden_states.dtype).unsqueeze(0)  # (1, T, T)
    logits = model.logits_from_token_logits(model.token_logits(hidden_states), one_hot)  # (1, T, C)
    return logits.softmax(-1)[0, :, predicted]


def explain_sentence(model, tokenizer, text: str, max_tokens: int = DEFAULT_MAX_TOKENS,
                     num_permutations: int = 100, k: int = 5, lam: float = 500.0, eps: float = 0.01,
                     steps: int = 500, lr: float = 0.01, seed: int = 0) -> SentenceExplanation:
    """Explain one sentence (see the module docstring). Raises :class:`ExplainError` with a message
    meant for the user for empty text, text with more than ``max_tokens`` tokens or no known word.
    Seeded: the same call gives the same permutations and adversaries."""
    if not isinstance(text, str) or not text.strip():
        raise ExplainError("Please type a sentence: the text is empty.")
    encoded = tokenizer(text, add_special_tokens=True, truncation=False)
    ids = encoded["input_ids"]
    if len(ids) == 0:
        raise ExplainError("The sentence has no tokens after tokenisation (only punctuation or spaces?).")
    limit = min(max_tokens, getattr(model.config, "max_tokens", None) or max_tokens)
    if len(ids) > limit:
        raise ExplainError(f"The sentence is too long: {len(ids)} tokens, the limit is {limit}. "
                           "Please shorten it.")
    if max(num_permutations, k, steps) < 0 or num_permutations < 1 or k < 1:
        raise ExplainError("num_permutations and k must be >= 1 and steps >= 0")
    model.eval()
    seconds: dict[str, float] = {}
    input_ids = torch.tensor([ids])
    mask = torch.ones_like(input_ids, dtype=torch.bool)

    start = time.perf_counter()
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
    probabilities = out.logits.softmax(-1)[0]
    predicted = int(probabilities.argmax())
    attention, hidden = out.attentions, out.hidden_states  # (1, T), (1, T, D)
    token_probability = _token_probability(model, hidden, predicted)
    seconds["prediction"] = time.perf_counter() - start

    start = time.perf_counter()
    gradient = gradient_importance(model, input_ids, mask)[0]
    seconds["gradient"] = time.perf_counter() - start

    start = time.perf_counter()
    with torch.no_grad():
        loo = leave_one_out(model, input_ids, mask, probabilities=probabilities.unsqueeze(0))[0]
    seconds["leave_one_out"] = time.perf_counter() - start

    start = time.perf_counter()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        permutation = permutation_tvd(model, hidden, attention, mask, num_permutations=num_permutations,
                                      generator=generator)[0]
    seconds["permutation"] = time.perf_counter() - start

    start = time.perf_counter()
    adversaries = adversarial_attention(model, hidden, attention, mask, k=k, lam=lam, eps=eps, steps=steps,
                                        lr=lr, seed=seed)
    seconds["adversary"] = time.perf_counter() - start
    tvds, jsds = adversaries.tvd[0], adversaries.jsd[0]
    feasible = adversaries.feasible[0]
    if bool(feasible.any()):
        chosen = int(torch.where(feasible, jsds, torch.full_like(jsds, -1.0)).argmax())
    else:
        chosen = int(tvds.argmin())

    def numpy(t: torch.Tensor) -> np.ndarray:
        return t.detach().to(torch.float64).cpu().numpy()

    tokens = tokenizer.convert_ids_to_tokens(ids)
    label_names = [str(model.config.id2label.get(i, i)) for i in range(len(probabilities))]
    return SentenceExplanation(
        text=text, tokens=tokens, label_names=label_names, probabilities=numpy(probabilities),
        predicted=predicted, attention=numpy(attention[0]), gradient=numpy(gradient), loo=numpy(loo),
        permutation_tvd=numpy(permutation), adversary_attention=numpy(adversaries.attention[0, chosen]),
        adversary_tvd=float(tvds[chosen]), adversary_jsd=float(jsds[chosen]),
        adversary_probabilities=numpy(adversaries.probabilities[0, chosen]),
        adversary_feasible=bool(feasible[chosen]), adversaries_tvd=numpy(tvds), adversaries_jsd=numpy(jsds),
        eps=eps, eps_max_jsd=float(adversaries.eps_max_jsd[0]), token_probability=numpy(token_probability),
        variant=str(getattr(model.config, "variant", "base")), seconds=seconds)


# --------------------------------------------------------------------------------------- rendering
ROWS = (  # (attribute, title, colour (r, g, b), how the colour is scaled)
    ("attention", "attention α", (31, 119, 180), "max"),
    ("gradient", "gradient |∂ŷ/∂e·e|", (214, 39, 40), "max"),
    ("loo", "leave-one-out Δŷ", (44, 160, 44), "max"),
    ("adversary_attention", "adversarial α", (148, 103, 189), "max"),
    ("token_probability", "per-token p̂_t", (255, 127, 14), "unit"),
)


def heatmap_html(explanation: SentenceExplanation) -> str:
    """Aligned token heatmaps: one table, a column per token, a row per importance measure. Colour
    intensity is the value divided by the row's maximum (probabilities: the value itself); the number
    is printed in each cell."""
    e = explanation
    head = "".join(f'<th class="hfa-tok">{html.escape(t)}</th>' for t in e.tokens)
    rows = []
    for attribute, title, (r, g, b), scale in ROWS:
        values = np.asarray(getattr(e, attribute), dtype=float)
        finite = values[np.isfinite(values)]
        top = 1.0 if scale == "unit" else (float(finite.max()) if finite.size and finite.max() > 0 else 1.0)
        cells = []
        for value in values:
            if not np.isfinite(value):
                cells.append('<td class="hfa-cell">–</td>')
                continue
            alpha = min(max(value / top, 0.0), 1.0)
            text_colour = "#fff" if alpha > 0.6 else "#111"
            cells.append(f'<td class="hfa-cell" style="background: rgba({r},{g},{b},{alpha:.3f}); '
                         f'color: {text_colour}" title="{value:.4g}">{value:.3f}</td>')
        label = title
        if attribute == "adversary_attention":
            label += f"<br><small>Δŷ {e.adversary_tvd:.4f} · JSD {e.adversary_jsd:.3f}</small>"
        if attribute == "token_probability":
            label += f"<br><small>P({html.escape(e.label_names[e.predicted])})</small>"
        rows.append(f'<tr data-row="{attribute}"><th class="hfa-row">{label}</th>{"".join(cells)}</tr>')
    style = ("<style>.hfa-heatmap{border-collapse:collapse;font-family:sans-serif;font-size:13px}"
             ".hfa-heatmap th,.hfa-heatmap td{border:1px solid #ddd;padding:4px 6px;text-align:center}"
             ".hfa-row{text-align:right!important;white-space:nowrap}.hfa-tok{font-weight:600}"
             ".hfa-wrap{overflow-x:auto}</style>")
    return (f'{style}<div class="hfa-wrap"><table class="hfa-heatmap" id="hfa-heatmap">'
            f'<tr><th class="hfa-row">token</th>{head}</tr>{"".join(rows)}</table></div>')


def summary_markdown(explanation: SentenceExplanation) -> str:
    e = explanation
    feasible = "" if e.adversary_feasible else " (no adversary reached TVD ≤ ε; the closest is shown)"
    lines = [
        f"**Prediction: {e.label_names[e.predicted]}** (p = {e.probabilities[e.predicted]:.3f}), "
        f"{len(e.tokens)} tokens, model variant `{e.variant}`.",
        f"- Adversarial attention: Δŷ = TVD = {e.adversary_tvd:.4f}, JSD to α = {e.adversary_jsd:.3f} "
        f"(of ln 2 ≈ 0.693); ε = {e.eps}, ε-max JSD = {e.eps_max_jsd:.3f}{feasible}.",
        f"- Permutations: median Δŷ = {e.permutation_median:.4f} over {len(e.permutation_tvd)} "
        f"random permutations of α (max {e.permutation_tvd.max():.4f}).",
        f"- Per-token p̂_t of the predicted class: mean {e.token_probability.mean():.3f}"
        + (" (regularised model: T&Š Fig. 2)" if e.regularised else
           " (base model; T&Š regularisers lower it)") + ".",
        "- Seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in e.seconds.items()) + ".",
    ]
    return "\n".join(lines)


def permutation_figure(explanation: SentenceExplanation):
    """Histogram of the permutation Δŷ (J&W Alg. 2) with its median and the adversary's Δŷ."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    e = explanation
    figure = Figure(figsize=(6.4, 2.8), dpi=100, layout="constrained")
    ax = figure.add_subplot()
    values = e.permutation_tvd
    upper = max(float(values.max()), e.adversary_tvd, 1e-3)
    ax.hist(values, bins=np.linspace(0, upper * 1.05, 31), color="#1f77b4", alpha=0.8, label="permutations")
    ax.axvline(e.permutation_median, color="k", linestyle="--", label=f"median {e.permutation_median:.4f}")
    ax.axvline(e.adversary_tvd, color="#9467bd", label=f"adversary {e.adversary_tvd:.4f}")
    ax.set_xlabel("Δŷ = TVD(ŷ(permuted α), ŷ)")
    ax.set_ylabel("permutations")
    ax.set_title("Permutation Δŷ distribution (J&W Alg. 2)")
    ax.legend(fontsize=8)
    return figure


# --------------------------------------------------------------------------------------- models
def load_model(name_or_path: str):
    """An hf_attn classifier + tokenizer from a local folder or a Hub id (eval mode)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    name_or_path = (name_or_path or "").strip()
    if not name_or_path:
        raise ExplainError("Please give a model: a local folder or a Hub id (USER/NAME).")
    if os.path.sep in name_or_path or name_or_path.startswith("."):
        if not (Path(name_or_path) / "config.json").is_file():
            raise ExplainError(f"{name_or_path} is not a model folder (no config.json).")
    try:
        model = AutoModelForSequenceClassification.from_pretrained(name_or_path, trust_remote_code=True)
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=True)
    except (OSError, ValueError) as err:
        raise ExplainError(f"Cannot load model {name_or_path!r}: {err}") from err
    if not str(getattr(model.config, "model_type", "")) == "hf_attn":
        raise ExplainError(f"{name_or_path!r} is a {model.config.model_type!r} model; the explorer needs a "
                           "single-sentence hf_attn classifier.")
    return model.eval(), tokenizer


def _search_roots() -> list[Path]:
    roots = [Path(p) for p in os.environ.get("HF_ATTN_MODEL_DIRS", "").split(os.pathsep) if p]
    repo = Path(__file__).resolve().parents[1]
    roots += [Path.cwd() / "runs", Path.cwd().parent / "runs", repo / "runs", repo.parent / "runs",
              quick_model_dir().parent]
    unique: dict[Path, None] = {}
    for root in roots:
        if root.is_dir():
            unique.setdefault(root.resolve(), None)
    return list(unique)


def find_local_model() -> str | None:
    """A trained SST model on this machine: folders up to two levels below the search roots
    (``HF_ATTN_MODEL_DIRS``, ``./runs``, ``../runs``, the checkout's sibling ``runs/``, the quick-model
    cache) with an hf_attn config and an SST run.json; BiLSTM + additive base models first, then by
    test accuracy."""
    best, best_key = None, None
    for root in _search_roots():
        for config_path in [*root.glob("*/config.json"), *root.glob("*/*/config.json")]:
            folder = config_path.parent
            try:
                config = json.loads(config_path.read_text())
                run = json.loads((folder / "run.json").read_text())
                metrics = json.loads((folder / "metrics.json").read_text())
            except (OSError, ValueError):
                continue
            if config.get("model_type") != "hf_attn" or run.get("task") != "sst":
                continue
            if not (folder / "model.safetensors").is_file():
                continue
            preferred = (config.get("encoder") == "lstm" and config.get("attention") == "additive"
                         and config.get("variant") == "base")
            key = (preferred, float(metrics.get("test_accuracy") or 0.0))
            if best_key is None or key > best_key:
                best, best_key = str(folder), key
    return best


def quick_model_dir() -> Path:
    cache = Path(os.environ.get("HF_ATTN_CACHE", Path.home() / ".cache" / "hf_attn"))
    return cache / "space-models" / "sst-lstm-additive-quick"


def train_quick_model(epochs: int = 3) -> str:
    """Train a small SST BiLSTM + additive model (GloVe-50d, ``epochs`` epochs, ~15 s on 2 CPU cores)
    into the cache, for an app started where no trained model exists. Resumable/finished runs are
    reused by :func:`hf_attn.training.train`."""
    from .training import TrainSettings, train

    out = quick_model_dir()
    train(TrainSettings(dataset="sst", encoder="lstm", attention="additive", epochs=epochs, seed=0), str(out),
          progress=False)
    return str(out)


def default_model(app_dir: str | os.PathLike | None = None, train_if_missing: bool = True) -> str | None:
    """The model the app opens first: ``HF_ATTN_MODEL`` (folder or Hub id), else ``space_config.json``
    next to the app (written by ``hf-attn push-space --model``), else a local SST model
    (:func:`find_local_model`), else a quickly trained one."""
    if os.environ.get("HF_ATTN_MODEL"):
        return os.environ["HF_ATTN_MODEL"]
    if app_dir is not None and (Path(app_dir) / "space_config.json").is_file():
        configured = json.loads((Path(app_dir) / "space_config.json").read_text()).get("default_model")
        if configured:
            return configured
    found = find_local_model()
    if found or not train_if_missing:
        return found
    return train_quick_model()


__all__ = ["explain_sentence", "SentenceExplanation", "ExplainError", "heatmap_html", "summary_markdown",
           "permutation_figure", "load_model", "find_local_model", "default_model", "train_quick_model"]
