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

The explorer runs as a public Space, so everything a visitor sends is untrusted:

- models: a :class:`ModelPolicy` (the operator's allow-list, :func:`model_policy`) decides which names
  may be opened at all, with one message for every refused name (so the app does not reveal which
  server paths exist); models are loaded only through hf_attn's own classes (never remote code), after
  their ``config.json`` says ``model_type == "hf_attn"``; :class:`ModelCache` keeps at most a few;
- numbers: :func:`check_settings` bounds every numeric setting (steps, k, permutations, ε, …) on the
  server, whatever the widget allowed, so one request cannot keep a worker busy for hours.
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from .analysis.jw import adversarial_attention, gradient_importance, leave_one_out, permutation_tvd
from .loading import SINGLE_MODEL_TYPE, ModelFolderError, load_model_folder, model_type_of

LOGGER = logging.getLogger(__name__)

REGULARISED_VARIANTS = ("residual", "tying", "mlm", "concat")
DEFAULT_MAX_TOKENS = 100

# Server-side bounds of every numeric setting of explain_sentence (name: (lowest, highest)). A visitor
# can call the API with any number, and the cost grows with k · steps and the permutations: these keep
# the worst request to seconds. The app's widgets show the same bounds.
INT_LIMITS = {"steps": (0, 2000), "k": (1, 20), "num_permutations": (1, 1000), "seed": (0, 2**31 - 1),
              "max_tokens": (1, 512)}
FLOAT_LIMITS = {"eps": (0.0, 1.0), "lam": (0.0, 1e5), "lr": (1e-6, 10.0)}
MAX_TEXT_CHARS = 5000  # checked before tokenising: the token limit alone would tokenise any text first


class ExplainError(ValueError):
    """Input the explorer cannot explain (empty, too long, ...): the message is shown to the user."""


class ModelNotAllowed(ExplainError):
    """A model name outside the explorer's allow-list (always :data:`NOT_ALLOWED_MESSAGE`)."""


def _number_text(number: float) -> str:
    """A short rendering for messages: whole numbers in full (2000, 10000000), others with %g."""
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:g}"


def _bounded(name: str, value, low: float, high: float, integer: bool) -> int | float:
    """``value`` as an int/float within [low, high]; :class:`ExplainError` naming ``name`` otherwise."""
    kind = "a whole number" if integer else "a number"
    span = f"from {_number_text(float(low))} to {_number_text(float(high))}"
    if value is None:
        raise ExplainError(f"{name} is missing: it must be {kind} {span}.")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ExplainError(f"{name} must be {kind} {span} (got a {type(value).__name__}).")
    number = float(value)
    if not math.isfinite(number):
        raise ExplainError(f"{name} must be a finite number {span} (got {number}).")
    if integer and not number.is_integer():
        raise ExplainError(f"{name} must be a whole number {span} (got {number:g}).")
    if not low <= number <= high:
        raise ExplainError(f"{name} must be {span} (got {_number_text(number)}).")
    return int(value) if integer else number


def check_settings(*, num_permutations=100, k=5, lam=500.0, eps=0.01, steps=500, lr=0.01, seed=0,
                   max_tokens=DEFAULT_MAX_TOKENS) -> dict:
    """The numeric settings of :func:`explain_sentence`, checked against :data:`INT_LIMITS` and
    :data:`FLOAT_LIMITS` and returned as plain ints/floats. Raises :class:`ExplainError` (a message for
    the visitor naming the setting and its range) for a missing, non-numeric, non-finite, fractional
    (integer settings) or out-of-range value."""
    given = dict(num_permutations=num_permutations, k=k, lam=lam, eps=eps, steps=steps, lr=lr, seed=seed,
                 max_tokens=max_tokens)
    checked = {}
    for name, value in given.items():
        integer = name in INT_LIMITS
        low, high = INT_LIMITS[name] if integer else FLOAT_LIMITS[name]
        checked[name] = _bounded(name, value, low, high, integer)
    return checked


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
    Seeded: the same call gives the same permutations and adversaries. The numeric settings must lie
    within :data:`INT_LIMITS` / :data:`FLOAT_LIMITS` (:func:`check_settings`), the text within
    :data:`MAX_TEXT_CHARS` characters."""
    settings = check_settings(num_permutations=num_permutations, k=k, lam=lam, eps=eps, steps=steps, lr=lr,
                              seed=seed, max_tokens=max_tokens)
    num_permutations, k, lam, eps = settings["num_permutations"], settings["k"], settings["lam"], settings["eps"]
    steps, lr, seed, max_tokens = settings["steps"], settings["lr"], settings["seed"], settings["max_tokens"]
    if not isinstance(text, str) or not text.strip():
        raise ExplainError("Please type a sentence: the text is empty.")
    if len(text) > MAX_TEXT_CHARS:
        raise ExplainError(f"The text is too long: {len(text)} characters, the limit is {MAX_TEXT_CHARS}. "
                           "Please shorten it.")
    encoded = tokenizer(text, add_special_tokens=True, truncation=False)
    ids = encoded["input_ids"]
    if len(ids) == 0:
        raise ExplainError("The sentence has no tokens after tokenisation (only punctuation or spaces?).")
    limit = min(max_tokens, getattr(model.config, "max_tokens", None) or max_tokens)
    if len(ids) > limit:
        raise ExplainError(f"The sentence is too long: {len(ids)} tokens, the limit is {limit}. "
                           "Please shorten it.")
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
ALLOW_ANY_MODEL_ENV = "HF_ATTN_ALLOW_ANY_MODEL"
CACHE_SIZE_ENV = "HF_ATTN_MODEL_CACHE_SIZE"
DEFAULT_CACHE_SIZE = 4
# One message for every refused name: whether the name is a path that exists on the server, a Hub id
# or nonsense must not show through.
NOT_ALLOWED_MESSAGE = "This model is not offered by this explorer. Please pick one of the models in the list."
# What a Hub snapshot may bring onto the server: weights, config and tokenizer. Never *.py (remote
# code) nor pickles (pytorch_model.bin can run code when unpickled).
HUB_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
             "special_tokens_map.json")


def is_hub_id(name: str) -> bool:
    """Whether ``name`` is spelled like a Hub repo id (``NAME`` or ``USER/NAME``) rather than a local
    path (absolute, ``./``, ``../``, ``~``, two or more ``/``). A Hub id is always loaded from the Hub,
    even when a folder of that name exists in the working directory; write ``./runs/x`` to mean the
    folder."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if name.startswith((".", "~")) or os.path.isabs(name) or name.count("/") > 1 or "\\" in name:
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


@dataclass(frozen=True)
class ModelPolicy:
    """Which models visitors of the explorer may open.

    ``models`` is the operator's allow-list (Hub ids and local folders, offered in the app's dropdown);
    names are compared exactly. With ``allow_any_hub_id`` (``HF_ATTN_ALLOW_ANY_MODEL=1``) any other
    Hub id may be typed too, but never a local path that is not on the list. Whatever the policy, a
    model runs only through hf_attn's own classes (no remote code). ``cache_size`` bounds
    :class:`ModelCache`."""

    models: tuple[str, ...] = ()
    allow_any_hub_id: bool = False
    cache_size: int = DEFAULT_CACHE_SIZE

    def resolve(self, name) -> tuple[str, bool]:
        """``(name stripped, whether it is a Hub id)`` if the policy allows ``name``; otherwise
        :class:`ModelNotAllowed` with :data:`NOT_ALLOWED_MESSAGE`. Reads nothing from disk or network,
        so a refusal says nothing about what exists."""
        name = name.strip() if isinstance(name, str) else ""
        if not name:
            raise ExplainError("Please choose a model.")
        if name in self.models:
            return name, is_hub_id(name)
        if self.allow_any_hub_id and is_hub_id(name):
            return name, True
        raise ModelNotAllowed(NOT_ALLOWED_MESSAGE)


def _split_names(value: str | None) -> list[str]:
    """``HF_ATTN_MODELS``-style lists: separated by os.pathsep or commas, blanks dropped."""
    return [part.strip() for chunk in (value or "").split(os.pathsep) for part in chunk.split(",") if part.strip()]


def _space_config(app_dir) -> dict:
    """``space_config.json`` next to the app (``{}`` when there is none)."""
    if app_dir is None or not (Path(app_dir) / "space_config.json").is_file():
        return {}
    path = Path(app_dir) / "space_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    models = config.get("models", []) if isinstance(config, dict) else None
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise ValueError(f"{path}: expected an object whose \"models\" is a list of model names")
    return config


def configured_models(app_dir=None) -> list[str]:
    """The operator's models in order, without repeats: ``HF_ATTN_MODEL``, ``HF_ATTN_MODELS``
    (os.pathsep- or comma-separated), then ``space_config.json``'s ``"default_model"`` and
    ``"models"``."""
    config = _space_config(app_dir)
    names = [*_split_names(os.environ.get("HF_ATTN_MODEL")), *_split_names(os.environ.get("HF_ATTN_MODELS")),
             *([config["default_model"]] if isinstance(config.get("default_model"), str) else []),
             *config.get("models", [])]
    return list(dict.fromkeys(name.strip() for name in names if name.strip()))


def model_policy(app_dir=None, extra: Iterable[str] = ()) -> ModelPolicy:
    """The explorer's :class:`ModelPolicy`: :func:`configured_models` plus ``extra`` (e.g. the local
    model the app found or trained); ``HF_ATTN_ALLOW_ANY_MODEL=1`` also allows any Hub id;
    ``HF_ATTN_MODEL_CACHE_SIZE`` (default 4) bounds the loaded models."""
    models = list(dict.fromkeys([*configured_models(app_dir), *(e for e in extra if e)]))
    allow_any = os.environ.get(ALLOW_ANY_MODEL_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    try:
        cache_size = int(os.environ.get(CACHE_SIZE_ENV, DEFAULT_CACHE_SIZE))
    except ValueError:
        raise ValueError(f"{CACHE_SIZE_ENV} must be a whole number") from None
    if cache_size < 1:
        raise ValueError(f"{CACHE_SIZE_ENV} must be at least 1")
    return ModelPolicy(tuple(models), allow_any, cache_size)


def _check_model_type(folder: str, name: str) -> None:
    """Refuse anything but a single-sentence hf_attn model, from ``config.json`` alone (before any
    weights or tokenizer are read)."""
    try:
        model_type = model_type_of(folder)
    except ModelFolderError as err:
        raise ExplainError(f"Cannot load model {name!r}: {str(err).replace(folder, name)}") from err
    if model_type != SINGLE_MODEL_TYPE:
        raise ExplainError(f"{name!r} is a {model_type!r} model; the explorer needs a single-sentence "
                           f"{SINGLE_MODEL_TYPE} classifier.")


def _download_hub_model(repo_id: str) -> str:
    """A local snapshot of the Hub repo ``repo_id`` (through huggingface_hub, so ``HF_ENDPOINT`` /
    ``HF_HUB_OFFLINE`` apply): config.json first, checked, then only :data:`HUB_FILES`."""
    from huggingface_hub import hf_hub_download, snapshot_download

    try:
        config_path = hf_hub_download(repo_id, "config.json")
    except Exception as err:  # network, missing or private repo, offline cache miss: all "cannot download"
        LOGGER.warning("cannot download config.json of %r", repo_id, exc_info=True)
        raise ExplainError(f"Cannot download {repo_id!r} from the Hugging Face Hub (is it a public hf_attn "
                           "model repository?).") from err
    _check_model_type(os.path.dirname(config_path), repo_id)
    try:
        return snapshot_download(repo_id, allow_patterns=list(HUB_FILES))
    except Exception as err:
        LOGGER.warning("cannot download %r", repo_id, exc_info=True)
        raise ExplainError(f"Cannot download {repo_id!r} from the Hugging Face Hub.") from err


def load_model(name_or_path: str, policy: ModelPolicy | None = None):
    """An hf_attn classifier + tokenizer (eval mode) from a local folder or a Hub id.

    With a ``policy`` (the app), a name it does not allow raises :class:`ModelNotAllowed` before
    anything is read; ``policy=None`` means the caller (a script, the operator) trusts the name. In
    both cases no code from the model is ever run: ``config.json`` must say ``model_type ==
    "hf_attn"`` before anything else is loaded, and loading goes through
    :func:`hf_attn.loading.load_model_folder` (our concrete classes, safetensors only, so ``auto_map``
    and bundled Python files are ignored, as with ``trust_remote_code=False``). Hub ids
    (:func:`is_hub_id`) are downloaded from the Hub, anything else is a local folder."""
    if policy is None:
        name = (name_or_path or "").strip() if isinstance(name_or_path, str) else ""
        if not name:
            raise ExplainError("Please give a model: a local folder or a Hub id (USER/NAME).")
        hub = is_hub_id(name)
    else:
        name, hub = policy.resolve(name_or_path)
    folder = _download_hub_model(name) if hub else os.path.expanduser(name)
    _check_model_type(folder, name)
    try:
        model, tokenizer = load_model_folder(folder, expected_type=SINGLE_MODEL_TYPE)
    except (ModelFolderError, OSError) as err:  # a folder that is not a complete model; corrupt weights
        LOGGER.warning("cannot load model %r", name, exc_info=True)
        raise ExplainError(f"Cannot load model {name!r}: {str(err).replace(folder, name)}") from err
    return model, tokenizer


class ModelCache:
    """The models a running explorer holds: at most ``policy.cache_size``, the least recently used
    dropped first, so visitors cannot fill the memory by opening model after model. Every name is
    checked against the policy before the cache or the disk is looked at. Thread-safe (loads are
    serialised)."""

    def __init__(self, policy: ModelPolicy, loader: Callable[[str, ModelPolicy], tuple] | None = None):
        self.policy = policy
        self._loader = loader or load_model
        self._models: OrderedDict[str, tuple] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str) -> tuple:
        """``(model, tokenizer)`` of ``name`` (loaded if needed); :class:`ExplainError` if it is not
        allowed or cannot be loaded."""
        name, _ = self.policy.resolve(name)
        with self._lock:
            if name in self._models:
                self._models.move_to_end(name)
                return self._models[name]
            loaded = self._loader(name, self.policy)
            self._models[name] = loaded
            while len(self._models) > self.policy.cache_size:
                self._models.popitem(last=False)
            return loaded

    def names(self) -> list[str]:
        """The cached names, least recently used first."""
        with self._lock:
            return list(self._models)


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
    """The model the app opens first: the first of :func:`configured_models` (``HF_ATTN_MODEL``,
    ``HF_ATTN_MODELS``, ``space_config.json`` next to the app, written by ``hf-attn push-space
    --model``), else a local SST model (:func:`find_local_model`), else a quickly trained one."""
    configured = configured_models(app_dir)
    if configured:
        return configured[0]
    found = find_local_model()
    if found or not train_if_missing:
        return found
    return train_quick_model()


__all__ = ["explain_sentence", "SentenceExplanation", "ExplainError", "ModelNotAllowed", "check_settings",
           "INT_LIMITS", "FLOAT_LIMITS", "MAX_TEXT_CHARS", "NOT_ALLOWED_MESSAGE", "heatmap_html",
           "summary_markdown", "permutation_figure", "is_hub_id", "ModelPolicy", "model_policy",
           "configured_models", "load_model", "ModelCache", "find_local_model", "default_model",
           "train_quick_model"]
