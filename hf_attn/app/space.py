"""One sentence, every explanation: the logic behind the Gradio explorer (``spaces_app/app.py``).

For a sentence x, :func:`explain_sentence` computes with one model forward plus the J&W methods
of :mod:`hf_attn.methods` (nothing re-implemented here):

- the prediction ŷ and the attention α (J&W §2);
- gradient importance g_t = |∂ŷ/∂e_t · e_t| with α detached (J&W Alg. 1);
- leave-one-out Δŷ_t = TVD(ŷ(x₋t), ŷ(x)) (J&W §4.1);
- Δŷ for random permutations of α (J&W Alg. 2);
- k adversarial attentions (J&W Alg. 3) and the one shown: the largest-JSD adversary with
  TVD ≤ ε (if none is feasible, the smallest-TVD one, flagged;
  :func:`hf_attn.methods.adversary.best_feasible_adversary`);
- per-token prediction probabilities p̂_t = decoder(h_t) alone, i.e. all attention on t
  (Tutek & Šnajder 2020, §5 / Fig. 2), for the predicted class;
- the sentence's Kendall τ of attention vs gradient, attention vs leave-one-out and gradient vs
  leave-one-out (J&W Table 2's statistic, :func:`hf_attn.core.measures.kendall_tau` with the battery's
  tie tolerance :attr:`hf_attn.batteries.jw.common.JWSettings.tie_tolerance`);
- the words as typed: each token's substring of the text (from the tokenizer's offsets), so the
  page shows "Don't" and an unknown word as typed, marked, instead of ``[UNK]``.

The input limit is the model's ``config.max_tokens`` (at most :data:`MAX_TOKENS_LIMIT`).
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
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from hf_attn.batteries.faithfulness import FaithfulnessSettings
from hf_attn.batteries.jw.common import JWSettings
from hf_attn.methods.adversary import adversarial_attention, best_feasible_adversary
from hf_attn.methods.gradient import gradient_importance
from hf_attn.methods.leave_one_out import leave_one_out
from hf_attn.methods.permutation import permutation_tvd
from hf_attn.models.loading import (SINGLE_MODEL_TYPE, ModelFolderError, check_finite_weights, load_model_folder,
                                    model_type_of)
from hf_attn.core.measures import kendall_tau

LOGGER = logging.getLogger(__name__)

REGULARISED_VARIANTS = ("residual", "tying", "mlm", "concat")

# Server-side bounds of every numeric setting of explain_sentence (name: (lowest, highest)). A visitor
# can call the API with any number, and the cost grows with k · steps and the permutations: these keep
# the worst request to seconds. The app's widgets show the same bounds.
INT_LIMITS = {"steps": (0, 2000), "k": (1, 20), "num_permutations": (1, 1000), "seed": (0, 2**31 - 1),
              "max_tokens": (1, 512)}
FLOAT_LIMITS = {"eps": (0.0, 1.0), "lam": (0.0, 1e5), "lr": (1e-6, 10.0)}
# The longest sentence explained: the model's config.max_tokens (hf_attn's default is 512), never more
# than this bound of the server's work.
MAX_TOKENS_LIMIT = INT_LIMITS["max_tokens"][1]
# Checked before tokenising (the token limit alone would tokenise any text first); generous enough
# that the token limit, not this one, stops any real sentence (512 tokens of English take ~2,500).
MAX_TEXT_CHARS = 20000
# Importances within this (absolute) distance are tied before Kendall τ, as in the J&W battery.
TIE_TOLERANCE = JWSettings.tie_tolerance


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
                   max_tokens=None) -> dict:
    """The numeric settings of :func:`explain_sentence`, checked against :data:`INT_LIMITS` and
    :data:`FLOAT_LIMITS` and returned as plain ints/floats. Raises :class:`ExplainError` (a message for
    the visitor naming the setting and its range) for a missing, non-numeric, non-finite, fractional
    (integer settings) or out-of-range value. ``max_tokens=None`` (the model's own limit) stays None."""
    given = dict(num_permutations=num_permutations, k=k, lam=lam, eps=eps, steps=steps, lr=lr, seed=seed,
                 max_tokens=max_tokens)
    checked = {}
    for name, value in given.items():
        if name == "max_tokens" and value is None:
            checked[name] = None
            continue
        integer = name in INT_LIMITS
        low, high = INT_LIMITS[name] if integer else FLOAT_LIMITS[name]
        checked[name] = _bounded(name, value, low, high, integer)
    return checked


@dataclass
class SentenceExplanation:
    """Everything the explorer shows for one sentence (T real tokens, C classes, k adversaries,
    P permutations). Arrays are numpy float64."""

    text: str
    tokens: list[str]  # (T,) the model's tokens
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
    # (T,) the text each token came from, as typed (tokens made from one typed word, e.g. "cannot" →
    # "can" "not", share it); tokens the tokenizer adds (<SOS>) keep their own text.
    words: list[str] = field(default_factory=list)
    # (T,) [start, end) of ``words[t]`` in ``text``; None for added tokens.
    spans: list[list[int] | None] = field(default_factory=list)
    unknown: list[bool] = field(default_factory=list)  # (T,) read as [UNK] (not in the vocabulary)
    special: list[bool] = field(default_factory=list)  # (T,) added by the tokenizer (<SOS>, <EOS>)
    # Kendall τ-b and p of this sentence (J&W Table 2): "attention_gradient", "attention_loo",
    # "gradient_loo" → {"tau", "pvalue"} (NaN when undefined: < 2 tokens or a constant ranking).
    kendall: dict[str, dict[str, float]] = field(default_factory=dict)
    tie_tolerance: float = TIE_TOLERANCE
    max_tokens: int | None = None  # the input limit applied (the model's)
    explained: str | None = None  # which attention rows (transformers: from the adapter's facts)

    @property
    def regularised(self) -> bool:
        return self.variant in REGULARISED_VARIANTS

    @property
    def permutation_median(self) -> float:
        return float(np.median(self.permutation_tvd))

    @property
    def gradient_share(self) -> np.ndarray:
        """g_t / Σ g: the gradient importance as a distribution over the tokens, comparable with α."""
        return _share(self.gradient)

    @property
    def loo_share(self) -> np.ndarray:
        """Δŷ_t / Σ Δŷ: leave-one-out as a distribution over the tokens (NaN if undefined)."""
        return _share(self.loo)

    def to_dict(self) -> dict:
        """JSON-ready (lists, no NaN: NaN → None)."""
        def clean(value):
            if isinstance(value, np.ndarray):
                return [clean(v) for v in value.tolist()]
            if isinstance(value, (list, tuple)):
                return [clean(v) for v in value]
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, float) and not np.isfinite(value):
                return None
            return value

        payload = {k: clean(v) for k, v in asdict(self).items()}
        payload["prediction"] = self.label_names[self.predicted]
        payload["permutation_median"] = self.permutation_median
        payload["gradient_share"] = clean(self.gradient_share)
        payload["loo_share"] = clean(self.loo_share)
        return payload


def _share(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    total = values.sum()
    if not np.isfinite(total) or total <= 0:
        return np.full(values.shape, np.nan)
    return values / total


def typed_spans(text: str, tokens: list[str], offsets, special: list[bool], unknown: list[bool]
                ) -> list[list[int] | None]:
    """Each token's ``[start, end)`` in ``text`` as typed, from the tokenizer's ``offsets``; None for
    the tokens the tokenizer adds. The offsets of hf_attn's tokenizer are exact except where a
    normaliser rule rewrote the text (``don't`` → ``do n't``, ``1999`` → ``qqq``, ``cannot`` → ``can
    not``): there ``tokenizers`` maps the rewritten characters to the last original one, so a token
    whose offsets do not spell it is widened back to where the previous token ended (whitespace
    skipped). Tokens that end where the previous one ends came from the same typed word and share its
    span. Characters no token covers (punctuation a tokenizer drops) belong to no span."""
    spans: list[list[int] | None] = []
    previous_end, previous_span = 0, None
    for token, (start, end), added, unk in zip(tokens, offsets, special, unknown):
        start, end = int(start), int(end)
        if added or end <= start:
            spans.append(None)
            continue
        if previous_span is not None and end <= previous_span[1]:  # more tokens from the same typed word
            spans.append(previous_span)
            continue
        start = max(start, previous_end)
        if not unk and text[start:end].lower() != token.lower():  # rewritten: widen back
            first = previous_end
            while first < start and text[first].isspace():
                first += 1
            start = first
        previous_span = [start, end]
        previous_end = end
        spans.append(previous_span)
    return spans


def _encode(tokenizer, text: str):
    """``(ids, offsets or None, special-token flags)`` of ``text``."""
    try:
        encoded = tokenizer(text, add_special_tokens=True, truncation=False, return_offsets_mapping=True,
                            return_special_tokens_mask=True)
        offsets = encoded["offset_mapping"]
    except (NotImplementedError, ValueError, TypeError, KeyError):  # a tokenizer without offsets
        encoded = tokenizer(text, add_special_tokens=True, truncation=False, return_special_tokens_mask=True)
        offsets = None
    ids = list(encoded["input_ids"])
    special = [bool(f) for f in encoded.get("special_tokens_mask", [0] * len(ids))]
    return ids, offsets, special


def sentence_kendall(attention, gradient, loo, tie_tolerance: float = TIE_TOLERANCE) -> dict:
    """This sentence's Kendall τ-b and p-value (J&W Table 2's per-instance statistic) of attention vs
    gradient, attention vs leave-one-out and gradient vs leave-one-out, by
    :func:`hf_attn.core.measures.kendall_tau` after tying values within ``tie_tolerance`` (as the J&W
    battery does). NaN where τ is undefined (fewer than 2 tokens, a constant ranking, NaN values)."""
    pairs = {"attention_gradient": (attention, gradient), "attention_loo": (attention, loo),
             "gradient_loo": (gradient, loo)}
    result = {}
    for name, (x, y) in pairs.items():
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        tau = pvalue = float("nan")
        if x.size >= 2 and np.isfinite(x).all() and np.isfinite(y).all():
            kendall = kendall_tau(x[None], y[None], tie_tolerance=tie_tolerance)
            if bool(kendall.valid[0]):
                tau, pvalue = float(kendall.tau[0]), float(kendall.pvalue[0])
        result[name] = {"tau": tau, "pvalue": pvalue}
    return result


def model_max_tokens(model) -> int:
    """The longest sentence the explorer takes for ``model``: its ``config.max_tokens`` (the forward
    refuses more), for a transformers classifier its position table less two special tokens
    (:func:`hf_attn.adapters.contract.model_token_limit` − 2), at most :data:`MAX_TOKENS_LIMIT`."""
    from hf_attn.adapters.contract import model_token_limit

    config = getattr(model, "config", None)
    limit = getattr(config, "max_tokens", None)
    positions = model_token_limit(model) if is_transformer_model(model) else None  # offsets included
    if isinstance(positions, int) and positions > 2:
        limit = min(int(limit), positions - 2) if limit else positions - 2
    return min(int(limit), MAX_TOKENS_LIMIT) if limit else MAX_TOKENS_LIMIT


@torch.no_grad()
def _token_probability(model, hidden_states: torch.Tensor, predicted: int) -> torch.Tensor:
    """T&Š Fig. 2: p̂_t = softmax(decoder(h_t)) — one-hot attention on each token t, exact through
    ``logits_from_token_logits`` (linear decoder, Σα = 1). ``hidden_states`` (1, T, D) → (T,)."""
    length = hidden_states.shape[1]
    one_hot = torch.eye(length, dtype=hidden_states.dtype).unsqueeze(0)  # (1, T, T)
    logits = model.logits_from_token_logits(model.token_logits(hidden_states), one_hot)  # (1, T, C)
    return logits.softmax(-1)[0, :, predicted]


def is_transformer_model(model) -> bool:
    """A transformers classifier (explained through its adapter), not one of hf_attn's own models."""
    from hf_attn.batteries.jw.transformer import OWN_MODEL_TYPES

    return getattr(getattr(model, "config", None), "model_type", None) not in (None, *OWN_MODEL_TYPES)


_ADAPTERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _adapter_of(model, tokenizer):
    """One adapter per loaded model (building it probes the model once)."""
    from hf_attn.adapters import adapter_for

    adapter = _ADAPTERS.get(model)
    if adapter is None or adapter.tokenizer is not tokenizer:
        try:
            adapter = _ADAPTERS[model] = adapter_for(model, tokenizer, device="cpu")
        except ValueError as err:  # a model the engine refuses: the reason, in one line, for the visitor
            raise ExplainError(f"This model cannot be explained here: {' '.join(str(err).split())}") from None
    return adapter


EXPLAINED_ROWS = {"first": "the first token's row (the position its classification head reads)",
                  "last": "the last token's row (the position its decoder head reads)",
                  "mean": "every token's row, averaged (its head pools every position)"}


def explained_attention(model, tokenizer) -> str:
    """Which attention is explained for a transformers classifier, from its adapter's facts (the
    layer, the query row(s) its head reads, the heads), never a fixed description."""
    adapter = _adapter_of(model, tokenizer)
    rows = EXPLAINED_ROWS.get(adapter.query_rule, f"the {adapter.query_rule} row(s)")
    heads = "mean over" if adapter.spec.heads == "mean" else f"head {adapter.spec.heads} of"
    layer = "the last layer" if adapter.layer == adapter.num_layers - 1 else f"layer {adapter.layer}"
    return f"{layer}'s attention (of {adapter.num_layers}), {rows}, {heads} {adapter.num_heads} heads"


def _explain_transformer_sentence(model, tokenizer, text: str, ids: list, offsets, special: list,
                                  settings: dict, limit: int) -> "SentenceExplanation":
    """:func:`explain_sentence` for a BERT-family classifier: J&W's measures on the word pieces between
    [CLS] and [SEP], for the last layer's [CLS] attention averaged over heads (renormalised over those
    pieces), by :mod:`hf_attn.batteries.jw.transformer` on this one sentence. The per-token p̂_t row is
    T&Š's BiLSTM read-out and does not exist here (NaN)."""
    from hf_attn.batteries.jw.transformer import TransformerJWSettings, run_transformer_jw_battery
    from hf_attn.methods.adversary import best_feasible_adversary

    jw_settings = TransformerJWSettings(num_permutations=settings["num_permutations"], k=settings["k"],
                                        lam=settings["lam"], eps=settings["eps"], steps=settings["steps"],
                                        lr=settings["lr"], seed=settings["seed"])
    start = time.perf_counter()
    results, summary = run_transformer_jw_battery(_adapter_of(model, tokenizer), [text], settings=jw_settings,
                                                  progress=False)
    seconds = {"total": time.perf_counter() - start}
    content = [i for i, flag in enumerate(special) if not flag]
    tokens = tokenizer.convert_ids_to_tokens([ids[i] for i in content])
    unk_id = getattr(tokenizer, "unk_token_id", None)
    unknown = [ids[i] == unk_id for i in content]
    spans = [None if offsets is None else [int(offsets[i][0]), int(offsets[i][1])] for i in content]
    words = [token if span is None else text[span[0]:span[1]] for token, span in zip(tokens, spans)]
    f64 = lambda values: np.asarray(values, dtype=np.float64)  # noqa: E731
    probabilities = f64(results["probabilities"][0])
    attention, gradient, loo = f64(results["attention"][0]), f64(results["gradient"][0]), f64(results["loo"][0])
    tvds, jsds = f64(results["adversary_tvd"][0]), f64(results["adversary_jsd"][0])
    eps = settings["eps"]
    chosen = int(best_feasible_adversary(torch.from_numpy(tvds)[None], torch.from_numpy(jsds)[None], eps).index[0])
    label_names = [str(model.config.id2label.get(i, i)) for i in range(len(probabilities))]
    return SentenceExplanation(
        text=text, tokens=tokens, label_names=label_names, probabilities=probabilities,
        predicted=int(probabilities.argmax()), attention=attention, gradient=gradient, loo=loo,
        permutation_tvd=f64(results["permutation_tvd"][0]),
        adversary_attention=f64(results["adversary_attention"][0])[chosen], adversary_tvd=float(tvds[chosen]),
        adversary_jsd=float(jsds[chosen]),
        adversary_probabilities=f64(results["adversary_probabilities"][0])[chosen],
        adversary_feasible=bool(tvds[chosen] <= eps), adversaries_tvd=tvds, adversaries_jsd=jsds, eps=eps,
        eps_max_jsd=float(results["eps_max_jsd"][0]), token_probability=np.full(len(tokens), np.nan),
        variant=f"{model.config.model_type} (transformers)", seconds=seconds, words=words, spans=spans, unknown=unknown,
        special=[False] * len(tokens), kendall=sentence_kendall(attention, gradient, loo),
        tie_tolerance=TIE_TOLERANCE, max_tokens=limit, explained=explained_attention(model, tokenizer))


def _checked_sentence(model, tokenizer, text: str, max_tokens: int | None):
    """``(ids, offsets, special flags, token limit)`` of a visitor's ``text``; :class:`ExplainError`
    (one line for the visitor) for empty text, more than :data:`MAX_TEXT_CHARS` characters, no token,
    or more tokens than the limit (``max_tokens``, at most the model's :func:`model_max_tokens`;
    a transformer's [CLS] and [SEP] do not count)."""
    if not isinstance(text, str) or not text.strip():
        raise ExplainError("Please type a sentence: the text is empty.")
    if len(text) > MAX_TEXT_CHARS:
        raise ExplainError(f"The text is too long: {len(text)} characters, the limit is {MAX_TEXT_CHARS}. "
                           "Please shorten it.")
    ids, offsets, special = _encode(tokenizer, text)
    if len(ids) == 0:
        raise ExplainError("The sentence has no tokens after tokenisation (only punctuation or spaces?).")
    limit = model_max_tokens(model) if max_tokens is None else min(max_tokens, model_max_tokens(model))
    if is_transformer_model(model):
        if len(ids) > limit + 2:  # [CLS] and [SEP] do not count
            raise ExplainError(f"The sentence is too long: {len(ids) - 2} word pieces, the limit is {limit}. "
                               "Please shorten it.")
    elif len(ids) > limit:
        raise ExplainError(f"The sentence is too long: {len(ids)} tokens, the limit is {limit}. "
                           "Please shorten it.")
    return ids, offsets, special, limit


def explain_sentence(model, tokenizer, text: str, max_tokens: int | None = None,
                     num_permutations: int = 100, k: int = 5, lam: float = 500.0, eps: float = 0.01,
                     steps: int = 500, lr: float = 0.01, seed: int = 0) -> SentenceExplanation:
    """Explain one sentence (see the module docstring). Raises :class:`ExplainError` with a message
    meant for the user for empty text, text with more tokens than the limit (``max_tokens``, default
    and at most the model's ``config.max_tokens``, :func:`model_max_tokens`) or no known word.
    Seeded: the same call gives the same permutations and adversaries. The numeric settings must lie
    within :data:`INT_LIMITS` / :data:`FLOAT_LIMITS` (:func:`check_settings`), the text within
    :data:`MAX_TEXT_CHARS` characters.

    Long on purpose: the measures the Space shows, one short step each and in the order it shows them
    (checks, forward, gradient, leave-one-out, τ, permutations, adversary), over the same tensors."""
    settings = check_settings(num_permutations=num_permutations, k=k, lam=lam, eps=eps, steps=steps, lr=lr,
                              seed=seed, max_tokens=max_tokens)
    num_permutations, k, lam, eps = settings["num_permutations"], settings["k"], settings["lam"], settings["eps"]
    steps, lr, seed, max_tokens = settings["steps"], settings["lr"], settings["seed"], settings["max_tokens"]
    ids, offsets, special, limit = _checked_sentence(model, tokenizer, text, max_tokens)
    if is_transformer_model(model):  # a transformers classifier: the rows its head reads, via its adapter
        return _explain_transformer_sentence(model, tokenizer, text, ids, offsets, special, settings, limit)
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
    chosen = int(best_feasible_adversary(adversaries.tvd, adversaries.jsd, eps).index[0])

    def numpy(t: torch.Tensor) -> np.ndarray:
        return t.detach().to(torch.float64).cpu().numpy()

    tokens = tokenizer.convert_ids_to_tokens(ids)
    unk_id = getattr(tokenizer, "unk_token_id", None)
    unknown = [unk_id is not None and i == unk_id and not added for i, added in zip(ids, special)]
    if offsets is None:
        spans: list[list[int] | None] = [None] * len(ids)
        words = list(tokens)
    else:
        spans = typed_spans(text, tokens, offsets, special, unknown)
        words = [token if span is None else text[span[0]:span[1]] for token, span in zip(tokens, spans)]
    attention_np, gradient_np, loo_np = numpy(attention[0]), numpy(gradient), numpy(loo)
    label_names = [str(model.config.id2label.get(i, i)) for i in range(len(probabilities))]
    return SentenceExplanation(
        text=text, tokens=tokens, label_names=label_names, probabilities=numpy(probabilities),
        predicted=predicted, attention=attention_np, gradient=gradient_np, loo=loo_np,
        permutation_tvd=numpy(permutation), adversary_attention=numpy(adversaries.attention[0, chosen]),
        adversary_tvd=float(tvds[chosen]), adversary_jsd=float(jsds[chosen]),
        adversary_probabilities=numpy(adversaries.probabilities[0, chosen]),
        adversary_feasible=bool(feasible[chosen]), adversaries_tvd=numpy(tvds), adversaries_jsd=numpy(jsds),
        eps=eps, eps_max_jsd=float(adversaries.eps_max_jsd[0]), token_probability=numpy(token_probability),
        variant=str(getattr(model.config, "variant", "base")), seconds=seconds, words=words, spans=spans,
        unknown=unknown, special=list(special), kendall=sentence_kendall(attention_np, gradient_np, loo_np),
        tie_tolerance=TIE_TOLERANCE, max_tokens=limit)


# --------------------------------------------------------------------------------------- rendering
WEIGHT_COLOUR = (31, 119, 180)  # the shared scale of α, adversarial α and the normalised g and Δŷ
PROBABILITY_COLOUR = (230, 115, 0)  # p̂_t, 0 … 1
ROWS = (  # (data-row, title, values, scale): one colour scale per kind of row
    ("attention", "attention α", lambda e: e.attention, "weight"),
    ("gradient", "gradient g / Σg", lambda e: e.gradient_share, "weight"),
    ("loo", "leave-one-out Δŷ / ΣΔŷ", lambda e: e.loo_share, "weight"),
    ("adversary_attention", "adversarial α", lambda e: e.adversary_attention, "weight"),
    ("token_probability", "per-token p̂_t", lambda e: e.token_probability, "probability"),
)
RAW_VALUES = {"gradient": ("|∂ŷ/∂e·e|", lambda e: e.gradient), "loo": ("Δŷ", lambda e: e.loo)}
KENDALL_ROWS = (("attention_gradient", "attention vs gradient"), ("attention_loo", "attention vs leave-one-out"),
                ("gradient_loo", "gradient vs leave-one-out"))
# Estimated width of the token columns of one line of the heatmap, after which it wraps: with the row
# labels (~190 px) a line fits a page ~900 px wide (a 1050 px window); narrower pages scroll the line.
LINE_WIDTH_PX = 700
LONG_WORD = 28  # characters: a longer word may break inside its header cell
UNKNOWN_TITLE = "not in the model's vocabulary: the model reads it as [UNK]"
HEATMAP_STYLE = (
    "<style>"
    ".hfa-heatmaps{font-family:sans-serif;font-size:13px;color:#111;background:#fff;padding:6px;"
    "border-radius:6px;max-width:100%}"
    ".hfa-line{max-width:100%;overflow-x:auto;margin:0 0 10px 0}"
    ".hfa-heatmap{border-collapse:collapse;margin:0}"
    ".hfa-heatmap th,.hfa-heatmap td{border:1px solid #ccc;padding:3px 5px;text-align:center;color:#111;"
    "background:#fff;font-variant-numeric:tabular-nums;min-width:40px;white-space:nowrap}"
    ".hfa-heatmap th.hfa-row{text-align:right;white-space:nowrap;background:#f4f4f4;font-weight:600;"
    "min-width:0}"
    ".hfa-heatmap th.hfa-row small{font-weight:400;color:#444}"
    ".hfa-heatmaps .hfa-heatmap th.hfa-tok{font-weight:600;text-align:center}"
    ".hfa-heatmaps .hfa-heatmap th.hfa-long{white-space:normal;overflow-wrap:anywhere;max-width:240px}"
    ".hfa-heatmaps .hfa-heatmap td.hfa-cell{text-align:center}"
    ".hfa-unk{text-decoration:underline dotted #c00 2px;text-underline-offset:3px;cursor:help}"
    ".hfa-added{color:#777;font-weight:400}"
    ".hfa-legend{display:flex;flex-wrap:wrap;gap:6px 22px;align-items:center;margin:2px 0 10px 0}"
    ".hfa-legend span{display:inline-flex;align-items:center;gap:6px}"
    ".hfa-bar{display:inline-block;width:110px;height:12px;border:1px solid #bbb}"
    "</style>")


def _blend(colour: tuple[int, int, int], strength: float) -> tuple[int, int, int]:
    """``colour`` at ``strength`` in [0, 1] over white, as an opaque RGB (readable in dark mode too)."""
    return tuple(round(255 - strength * (255 - c)) for c in colour)


def _number(value: float, digits: int = 2) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def _p_value(p: float) -> str:
    if p is None or not np.isfinite(p):
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _kendall_text(e: SentenceExplanation, name: str) -> str:
    result = e.kendall.get(name, {})
    tau, p = result.get("tau", float("nan")), result.get("pvalue", float("nan"))
    if not np.isfinite(tau):
        return "τ undefined"
    return f"τ = {tau:.2f} (p {'= ' if p >= 0.001 else ''}{_p_value(p)})"


def token_groups(explanation: SentenceExplanation) -> list[tuple[int, int]]:
    """``[start, stop)`` token ranges that came from one typed word (one range per token unless a word
    gave several tokens, e.g. "cannot" → "can" "not")."""
    spans = explanation.spans or [None] * len(explanation.tokens)
    groups: list[tuple[int, int]] = []
    for t, span in enumerate(spans):
        if groups and span is not None and spans[groups[-1][0]] == span:
            groups[-1] = (groups[-1][0], t + 1)
        else:
            groups.append((t, t + 1))
    return groups


def _word_header(e: SentenceExplanation, start: int, stop: int) -> str:
    words = e.words or e.tokens
    tokens = " · ".join(e.tokens[start:stop])
    word = html.escape(words[start])
    special = e.special[start] if e.special else False
    if special:
        return (f'<th class="hfa-tok" colspan="{stop - start}" title="added by the tokenizer">'
                f'<span class="hfa-added">{word}</span></th>')
    unknown = e.unknown[start:stop] if e.unknown else []
    title = f"model token{'s' if stop - start > 1 else ''}: {tokens}"
    long = " hfa-long" if len(words[start]) > LONG_WORD else ""
    if any(unknown):
        title = f"{UNKNOWN_TITLE} ({title})"
        word = f'<span class="hfa-unk">{word}</span>'
    return f'<th class="hfa-tok{long}" colspan="{stop - start}" title="{html.escape(title)}">{word}</th>'


def _lines(e: SentenceExplanation, groups: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """The word groups split into lines of at most about :data:`LINE_WIDTH_PX` (estimated from the
    words' lengths) and of similar widths, so that a long sentence wraps instead of overflowing."""
    words = e.words or e.tokens
    widths = [max(8 * min(len(words[start]), LONG_WORD) + 16, 56 * (stop - start)) for start, stop in groups]
    count = max(1, math.ceil(sum(widths) / LINE_WIDTH_PX))
    target = min(LINE_WIDTH_PX, sum(widths) / count + 28)  # balanced lines (a little slack for the last)
    lines: list[list[tuple[int, int]]] = [[]]
    used = 0
    for group, width in zip(groups, widths):
        if lines[-1] and used + width > target:
            lines.append([])
            used = 0
        lines[-1].append(group)
        used += width
    return lines


def heatmap_html(explanation: SentenceExplanation) -> str:
    """Aligned token heatmaps under the words as typed (unknown words dotted-underlined), one row per
    measure: attention α, gradient and leave-one-out normalised to sum 1 (so all three are
    distributions over the tokens), the adversarial α, and p̂_t. Rows of one kind share one colour
    scale (a legend gives it): α, g/Σg, Δŷ/ΣΔŷ and the adversarial α from 0 to the largest of α, g/Σg
    and Δŷ/ΣΔŷ (an adversarial weight above it is drawn at full strength), p̂_t from 0 to 1. Each cell
    prints its value (raw values in the tooltip); the gradient and leave-one-out labels give the
    sentence's Kendall τ with α. Long sentences wrap onto several lines, each with the row labels."""
    e = explanation
    values = {row: np.asarray(get(e), dtype=np.float64) for row, _, get, _ in ROWS}
    compared = np.concatenate([values["attention"], values["gradient"], values["loo"]])
    compared = compared[np.isfinite(compared)]
    weight_top = float(compared.max()) if compared.size and compared.max() > 0 else 1.0
    tops = {"weight": weight_top, "probability": 1.0}
    colours = {"weight": WEIGHT_COLOUR, "probability": PROBABILITY_COLOUR}
    label_name = html.escape(e.label_names[e.predicted])
    labels = {"attention": "attention α",
              "gradient": f"gradient g/Σg<br><small>vs α: {_kendall_text(e, 'attention_gradient')}</small>",
              "loo": f"leave-one-out Δŷ/ΣΔŷ<br><small>vs α: {_kendall_text(e, 'attention_loo')}</small>",
              "adversary_attention": f"adversarial α<br><small>Δŷ {e.adversary_tvd:.4f} · JSD "
                                     f"{e.adversary_jsd:.3f}</small>",
              "token_probability": f"per-token p̂_t<br><small>P({label_name})</small>"}
    words = e.words or e.tokens
    tables = []
    for number, line in enumerate(_lines(e, token_groups(e))):
        head = "".join(_word_header(e, start, stop) for start, stop in line)
        columns = [t for start, stop in line for t in range(start, stop)]
        rows = []
        for row, _, _, scale in ROWS:
            if not np.isfinite(values[row]).any() and row == "token_probability":
                continue  # T&Š's per-token read-out: BiLSTM models only
            cells = []
            for t in columns:
                value = values[row][t]
                title = f"{words[t]} ({e.tokens[t]})" if words[t] != e.tokens[t] else words[t]
                if not np.isfinite(value):
                    cells.append(f'<td class="hfa-cell" title="{html.escape(title)}: undefined">–</td>')
                    continue
                strength = min(max(value / tops[scale], 0.0), 1.0)
                r, g, b = _blend(colours[scale], strength)
                text_colour = "#fff" if strength > 0.6 else "#111"
                title += f": {value:.4g}"
                if row in RAW_VALUES:
                    raw_name, raw = RAW_VALUES[row]
                    title += f" (raw {raw_name} = {raw(e)[t]:.4g})"
                cells.append(f'<td class="hfa-cell" style="background:rgb({r},{g},{b});color:{text_colour}" '
                             f'title="{html.escape(title)}">{value:.3f}</td>')
            rows.append(f'<tr data-row="{row}"><th class="hfa-row">{labels[row]}</th>{"".join(cells)}</tr>')
        tables.append(f'<div class="hfa-line"><table class="hfa-heatmap" data-line="{number}"><tr>'
                      f'<th class="hfa-row">word</th>{head}</tr>{"".join(rows)}</table></div>')
    weight_bar = f"linear-gradient(to right, rgb{_blend(WEIGHT_COLOUR, 0)}, rgb{_blend(WEIGHT_COLOUR, 1)})"
    probability_bar = (f"linear-gradient(to right, rgb{_blend(PROBABILITY_COLOUR, 0)}, "
                       f"rgb{_blend(PROBABILITY_COLOUR, 1)})")
    saturated = (" (adversarial weights above it at full colour)"
                 if values["adversary_attention"].max() > weight_top else "")
    legend = [f'<span>α, g/Σg, Δŷ/ΣΔŷ and adversarial α: 0 <span class="hfa-bar" '
              f'style="background:{weight_bar}"></span> {weight_top:.3f}{saturated}</span>',
              f'<span>p̂_t: 0 <span class="hfa-bar" style="background:{probability_bar}"></span> 1</span>']
    if any(e.unknown):
        legend.append(f'<span><span class="hfa-unk" title="{UNKNOWN_TITLE}">word</span> not in the vocabulary '
                      "(read as [UNK])</span>")
    return (f'{HEATMAP_STYLE}<div class="hfa-heatmaps" id="hfa-heatmap">'
            f'<div class="hfa-legend" id="hfa-legend">{"".join(legend)}</div>{"".join(tables)}</div>')


# ------------------------------------------------------------------ every attribution method, side by side
# The rows of the method comparison (hf_attn.batteries.faithfulness.METHODS; each method's paper and
# equation are in its module): all that take well under a second for one sentence on a CPU. Kernel
# SHAP and DeepLift (optional captum extra) and the random floor are left out.
# Cheapest first: a long sentence spends the request's time budget on the costly ones last.
COMPARE_METHODS = ("attention", "rollout", "saliency", "gradient_x_input", "attention_norm", "alti",
                   "integrated_gradients", "leave_one_out", "value_zeroing", "attention_flow")
COMPARE_SECONDS = 10.0  # time budget of one compare request: the methods after it are listed as not run
COMPARE_TITLES = {"attention": "attention α", "rollout": "attention rollout", "attention_flow": "attention flow",
                  "attention_norm": "attention norm ‖αf(x)‖", "alti": "ALTI", "value_zeroing": "value zeroing",
                  "saliency": "saliency ‖∂ŷ/∂e‖", "gradient_x_input": "gradient × input",
                  "integrated_gradients": "integrated gradients", "leave_one_out": "leave-one-out Δŷ"}
COMPARE_IG_STEPS = FaithfulnessSettings.ig_steps  # Gauss–Legendre nodes of integrated gradients (the table's default)
POSITIVE_COLOUR, NEGATIVE_COLOUR = (214, 39, 40), (31, 119, 180)


def compare_methods(model, tokenizer, text: str, max_tokens: int | None = None):
    """Every method of :data:`COMPARE_METHODS` on one sentence, through
    :meth:`hf_attn.explainer.Explainer.attributions` on the model's adapter (one per loaded model):
    a :class:`hf_attn.explainer.MethodAttributions` of one text, the methods that do not apply to the
    model in its ``skipped``. The same input checks and limits as :func:`explain_sentence`
    (:class:`ExplainError` for the visitor)."""
    from hf_attn.explainer import Explainer

    _checked_sentence(model, tokenizer, text, max_tokens)
    model.eval()
    explainer = Explainer.from_adapter(_adapter_of(model, tokenizer))
    return explainer.attributions([text], methods=COMPARE_METHODS, ig_steps=COMPARE_IG_STEPS,
                                  time_budget=COMPARE_SECONDS)


def methods_heatmap_html(comparison) -> str:
    """The methods of ``comparison`` (a :class:`hf_attn.explainer.MethodAttributions` of one text) as
    one token heatmap: one row per method, one column per token, each row on its own colour scale
    (strength = |value| / the row's largest |value|; red positive, blue negative), the raw value in
    each cell's ``data-value`` and tooltip; the methods that did not run are listed with the reason."""
    tokens = comparison.tokens[0]
    head = "".join(f'<th class="hfa-tok">{html.escape(t)}</th>' for t in tokens)
    rows = []
    for method in comparison.methods:
        values = np.asarray(comparison.values[method][0], dtype=np.float64)
        finite = values[np.isfinite(values)]
        scale = float(np.abs(finite).max()) if finite.size else 0.0
        cells = []
        for token, value in zip(tokens, values):
            if not np.isfinite(value):
                cells.append(f'<td class="hfa-cell" data-value="nan" title="{html.escape(token)}: undefined">–</td>')
                continue
            strength = min(abs(value) / scale, 1.0) if scale > 0 else 0.0
            r, g, b = _blend(POSITIVE_COLOUR if value >= 0 else NEGATIVE_COLOUR, strength)
            text_colour = "#fff" if strength > 0.6 else "#111"
            shown = value / scale if scale > 0 else 0.0
            cells.append(f'<td class="hfa-cell" data-value="{value:.9g}" style="background:rgb({r},{g},{b});'
                         f'color:{text_colour}" title="{html.escape(token)}: {value:.4g}">{shown:.2f}</td>')
        title = COMPARE_TITLES.get(method, method)
        rows.append(f'<tr data-row="{method}"><th class="hfa-row">{html.escape(title)}<br><small>max |value| '
                    f'{scale:.3g}</small></th>{"".join(cells)}</tr>')
    label = html.escape(comparison.label_names[comparison.predicted[0]])
    notes = [f"<p>Explained: the predicted class <b>{label}</b>. Each row on its own scale: a cell shows its value "
             "divided by the row's largest |value| (red positive, blue negative); the raw value is in the tooltip.</p>"]
    if comparison.skipped:
        items = "".join(f"<li><b>{html.escape(m)}</b>: {html.escape(reason)}</li>"
                        for m, reason in comparison.skipped.items())
        notes.append(f'<p>Not shown for this model:</p><ul class="hfa-skipped">{items}</ul>')
    return (f'{HEATMAP_STYLE}<div class="hfa-heatmaps" id="hfa-methods"><div class="hfa-line">'
            f'<table class="hfa-heatmap hfa-methods"><tr><th class="hfa-row">token</th>{head}</tr>{"".join(rows)}'
            f'</table></div>{"".join(notes)}</div>')


_MARKDOWN_SPECIALS = str.maketrans({c: "\\" + c for c in "\\`*_{}[]()#+!|~"})


def markdown_text(value) -> str:
    """``value`` as literal text inside Markdown: HTML escaped (``<script>`` shows as text, whatever
    the renderer's sanitiser does) and Markdown's own markup characters backslash-escaped. Model
    label names and words typed by visitors go through it before they reach a Markdown block."""
    return html.escape(str(value), quote=False).translate(_MARKDOWN_SPECIALS)


def summary_markdown(explanation: SentenceExplanation) -> str:
    """The prediction, the sentence's Kendall τ table and one line each on the adversary, the
    permutations, p̂_t and the unknown words."""
    e = explanation
    feasible = "" if e.adversary_feasible else " (no adversary reached TVD ≤ ε; the closest is shown)"
    limit = f" (limit {e.max_tokens})" if e.max_tokens else ""
    kendall_rows = []
    for name, title in KENDALL_ROWS:
        result = e.kendall.get(name, {})
        tau, p = result.get("tau", float("nan")), result.get("pvalue", float("nan"))
        kendall_rows.append(f"| {title} | {_number(tau)} | {_p_value(p)} |")
    unknown = [w for w, u in zip(e.words or e.tokens, e.unknown) if u]
    lines = [
        f"**Prediction: {markdown_text(e.label_names[e.predicted])}** (p = {e.probabilities[e.predicted]:.3f}), "
        f"{len(e.tokens)} token{'s' if len(e.tokens) != 1 else ''}{limit}, model variant `{e.variant}`.",
        "",
        "| Kendall τ of this sentence | τ | p |",
        "|---|---|---|",
        *kendall_rows,
        "",
        f"τ-b and its p-value as in J&W Table 2 (importances within {e.tie_tolerance:g} of each other tied).",
        "",
        f"- Adversarial attention: Δŷ = TVD = {e.adversary_tvd:.4f}, JSD to α = {e.adversary_jsd:.3f} "
        f"(of ln 2 ≈ 0.693); ε = {e.eps}, ε-max JSD = {e.eps_max_jsd:.3f}{feasible}.",
        f"- Permutations: median Δŷ = {e.permutation_median:.4f} over {len(e.permutation_tvd)} "
        f"random permutations of α (max {e.permutation_tvd.max():.4f}).",
        (f"- Per-token p̂_t of the predicted class: mean {e.token_probability.mean():.3f}"
         + (" (regularised model: T&Š Fig. 2)" if e.regularised else
            " (base model; T&Š regularisers lower it)") + ".")
        if np.isfinite(e.token_probability).any() else
        f"- Explained: {e.explained or 'the attention'} over the word pieces (no per-token p̂_t: "
        "that is T&Š's BiLSTM read-out).",
    ]
    if unknown:
        shown = ", ".join(f"“{markdown_text(w)}”" for w in dict.fromkeys(unknown))
        lines.append(f"- Not in the vocabulary (read as [UNK]): {shown}.")
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
    path (absolute, ``./``, ``../``, ``~``, two or more ``/``). Spelling only: whether a name the
    operator gave means a folder or a Hub repo is :func:`names_hub_repo`'s question."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if name.startswith((".", "~")) or os.path.isabs(name) or name.count("/") > 1 or "\\" in name:
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def names_hub_repo(name: str) -> bool:
    """Whether a trusted name (the operator's list, a script) means a Hub repo: spelled like a Hub id
    and no folder of that name exists here. An existing folder always wins (``runs/sst-lstm`` is
    the folder, ``./`` is never needed). Names visitors type are never looked up on disk: they are
    Hub ids or nothing (:meth:`ModelPolicy.resolve`)."""
    return is_hub_id(name) and not os.path.isdir(os.path.expanduser(name))


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
        if name in self.models:  # the operator's: an existing folder wins over a Hub id
            return name, names_hub_repo(name)
        if self.allow_any_hub_id and is_hub_id(name):  # a visitor's: a Hub id, even if such a folder exists
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
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if model_type != SINGLE_MODEL_TYPE and (model_type not in CONFIG_MAPPING_NAMES or model_type.startswith("hf_attn")):
        raise ExplainError(f"{name!r} is a {model_type!r} model; the explorer needs a single-sentence "
                           f"{SINGLE_MODEL_TYPE} classifier or a transformers sequence classifier.")


def _download_hub_model(repo_id: str) -> str:
    """A local snapshot of the Hub repo ``repo_id`` (through huggingface_hub, so ``HF_ENDPOINT`` /
    ``HF_HUB_OFFLINE`` apply): config.json first, checked, then only :data:`HUB_FILES`."""
    from huggingface_hub import hf_hub_download, snapshot_download

    try:
        config_path = hf_hub_download(repo_id, "config.json")
    except Exception as err:  # network, missing or private repo, offline cache miss: all "cannot download"
        LOGGER.warning("cannot download config.json of %r: %s: %s", repo_id, type(err).__name__,
                       " ".join(str(err).split())[:300])
        raise ExplainError(f"Cannot download {repo_id!r} from the Hugging Face Hub (is it a public hf_attn "
                           "model repository?).") from err
    _check_model_type(os.path.dirname(config_path), repo_id)
    try:
        return snapshot_download(repo_id, allow_patterns=list(HUB_FILES))
    except Exception as err:
        LOGGER.warning("cannot download %r: %s: %s", repo_id, type(err).__name__, " ".join(str(err).split())[:300])
        raise ExplainError(f"Cannot download {repo_id!r} from the Hugging Face Hub.") from err


def load_model(name_or_path: str, policy: ModelPolicy | None = None):
    """An hf_attn classifier + tokenizer (eval mode) from a local folder or a Hub id.

    With a ``policy`` (the app), a name it does not allow raises :class:`ModelNotAllowed` before
    anything is read; ``policy=None`` means the caller (a script, the operator) trusts the name. In
    both cases no code from the model is ever run: ``config.json`` must say ``model_type ==
    "hf_attn"`` before anything else is loaded, and loading goes through
    :func:`hf_attn.models.loading.load_model_folder` (our concrete classes, safetensors only, so ``auto_map``
    and bundled Python files are ignored, as with ``trust_remote_code=False``). Hub ids
    (:func:`names_hub_repo`: spelled like one, and no such folder here) are downloaded from the Hub,
    anything else is a local folder."""
    if policy is None:
        name = (name_or_path or "").strip() if isinstance(name_or_path, str) else ""
        if not name:
            raise ExplainError("Please give a model: a local folder or a Hub id (USER/NAME).")
        hub = names_hub_repo(name)
    else:
        name, hub = policy.resolve(name_or_path)
    folder = _download_hub_model(name) if hub else os.path.expanduser(name)
    _check_model_type(folder, name)
    try:
        if model_type_of(folder) != SINGLE_MODEL_TYPE:  # BERT-family: transformers' own classes, no remote code
            from hf_attn.adapters.transformer_attention import load_transformer_classifier

            # transformers' own class for the config's model_type; an auto_map (remote code) is never followed
            weights = os.path.join(folder, "model.safetensors")
            if os.path.isfile(weights):
                check_finite_weights(weights)
            model, tokenizer = load_transformer_classifier(folder, trust_remote_code=False)
            from hf_attn.adapters.contract import check_model_contract

            check_model_contract(model)  # regression / multi-label heads: refused with the reason
            return model.eval(), tokenizer
        model, tokenizer = load_model_folder(folder, expected_type=SINGLE_MODEL_TYPE)
    except (ValueError, OSError) as err:  # not a complete model, pickled weights, corrupt weights, a refused head
        message = " ".join(str(err).replace(folder, name).split())
        LOGGER.warning("cannot load model %r: %s: %s", name, type(err).__name__, message)  # one line
        raise ExplainError(f"Cannot load model {name!r}: {message}") from None
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
    reused by :func:`hf_attn.training.engine.train`."""
    from hf_attn.training.engine import TrainSettings, train

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


__all__ = ["explain_sentence", "markdown_text", "SentenceExplanation", "ExplainError", "ModelNotAllowed", "check_settings",
           "INT_LIMITS", "FLOAT_LIMITS", "MAX_TEXT_CHARS", "MAX_TOKENS_LIMIT", "TIE_TOLERANCE", "model_max_tokens",
           "sentence_kendall", "typed_spans", "token_groups", "NOT_ALLOWED_MESSAGE", "heatmap_html",
           "summary_markdown", "permutation_figure", "is_hub_id", "names_hub_repo", "ModelPolicy", "model_policy",
           "configured_models", "load_model", "ModelCache", "find_local_model", "default_model",
           "train_quick_model"]
