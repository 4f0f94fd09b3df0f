"""The one explanation object: :class:`SentenceExplanation` (one text) and :class:`Explanation`
(several), computed by :meth:`hf_attn.explainer.Explainer.explain` and rendered three ways by
:mod:`hf_attn.explanation.render`: a notebook's ``_repr_html_``, the Space's page and the CLI's printed
summary (``hf-attn explain``).

**Tokens and words.** ``tokens`` are the text's own tokens (special tokens and pads left out);
``typed`` gives each token's text as typed (from the tokenizer's offsets: "Don't" rather than
"do n't", an unknown word as typed rather than ``[UNK]``) and ``spans`` its ``[start, end)`` in the
text; ``word_ids`` numbers the word each token belongs to and ``words`` lists those words. A word's
value is the **sum** of its tokens' values (:meth:`SentenceExplanation.word_values`): summing keeps a
distribution a distribution (attention over tokens → attention over words, same total) and an
additive attribution additive (integrated gradients' completeness survives).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from hf_attn.batteries.jw.common import JWSettings
from hf_attn.core.io import write_text_atomic
from hf_attn.core.measure_names import LOO_TVD_DEFINITION
from hf_attn.core.measures import kendall_tau

# The per-token rows an explanation may hold, in the order they are shown.
EXPLANATION_ROWS = ("attention", "gradient", "loo", "ig", "rollout")
# Importances within this (absolute) distance are tied before Kendall τ, as in the J&W battery.
TIE_TOLERANCE = JWSettings.tie_tolerance
REGULARISED_VARIANTS = ("residual", "tying", "mlm", "concat")
KENDALL_PAIRS = ("attention_gradient", "attention_loo", "gradient_loo")


@dataclass
class SentenceExplanation:
    """Everything known about one text (T tokens, C classes, k adversaries, P permutations); arrays
    are numpy float64.

    Prediction: ``probabilities`` (C,), ``predicted``, ``label_names``. Per token: ``attention`` α
    (the explained rows over the text's tokens, J&W §2), ``gradient`` g_t = |∂ŷ/∂e_t · e_t| with α
    held fixed (J&W Alg. 1), ``loo`` the LOO-TVD Δŷ_t = TVD(ŷ(x₋t), ŷ(x)) (J&W §4.1), ``ig`` integrated
    gradients and ``rollout`` (None where not computed or where a model has none),
    ``token_probability`` p̂_t of the predicted class with all attention on t (T&Š Fig. 2; NaN where
    a model has no such read-out). The adversary (J&W Alg. 3): ``adversaries_tvd`` / ``_jsd`` (k,),
    the one shown (``adversary_attention``, ``_tvd``, ``_jsd``, ``_probabilities``, ``_feasible``:
    the largest-JSD adversary within ``eps`` TVD, else the closest), ``eps_max_jsd`` (0 = none
    feasible); ``permutation_tvd`` (P,) (J&W Alg. 2). ``kendall``: this text's τ-b and p of attention
    vs gradient, attention vs LOO-TVD and gradient vs LOO-TVD (J&W Table 2's statistic,
    NaN where undefined). ``explained``: which attention rows, in words, from the adapter's facts.
    ``undefined``: row → why its values are NaN (a one-token text's leave-one-out on a model without
    an empty input, its Kendall τ: :mod:`hf_attn.methods.one_token`)."""

    text: str
    tokens: list[str]
    label_names: list[str]
    probabilities: np.ndarray
    predicted: int
    attention: np.ndarray
    gradient: np.ndarray
    loo: np.ndarray
    ig: np.ndarray | None = None
    rollout: np.ndarray | None = None
    ig_completeness_gap: float | None = None
    token_probability: np.ndarray | None = None
    permutation_tvd: np.ndarray | None = None
    adversary_attention: np.ndarray | None = None
    adversary_tvd: float | None = None
    adversary_jsd: float | None = None
    adversary_probabilities: np.ndarray | None = None
    adversary_feasible: bool | None = None
    adversaries_tvd: np.ndarray | None = None
    adversaries_jsd: np.ndarray | None = None
    eps: float | None = None
    eps_max_jsd: float | None = None
    word_ids: list[int | None] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    typed: list[str] = field(default_factory=list)
    spans: list[list[int] | None] = field(default_factory=list)
    unknown: list[bool] = field(default_factory=list)
    special: list[bool] = field(default_factory=list)
    kendall: dict[str, dict[str, float]] = field(default_factory=dict)
    tie_tolerance: float = TIE_TOLERANCE
    variant: str = "base"
    explained: str | None = None
    max_tokens: int | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    undefined: dict[str, str] = field(default_factory=dict)

    @property
    def values(self) -> dict[str, list[float] | None]:
        """Per row of :data:`EXPLANATION_ROWS`: one value per token (None where there is none)."""
        return {name: (None if getattr(self, name) is None else np.asarray(getattr(self, name)).tolist())
                for name in EXPLANATION_ROWS}

    def word_values(self, name: str) -> list[float] | None:
        """Per word: the sum of its tokens' values (the rule in the module docstring)."""
        values = getattr(self, name, None)
        if values is None:
            return None
        out = [0.0] * len(self.words)
        for value, word in zip(values, self.word_ids):
            if word is not None and word < len(out):
                out[word] += float(value)
        return out

    @property
    def regularised(self) -> bool:
        return self.variant in REGULARISED_VARIANTS

    @property
    def permutation_median(self) -> float | None:
        return None if self.permutation_tvd is None else float(np.median(self.permutation_tvd))

    @property
    def gradient_share(self) -> np.ndarray:
        """g_t / Σ g: the gradient importance as a distribution over the tokens, comparable with α."""
        return share(self.gradient)

    @property
    def loo_share(self) -> np.ndarray:
        """Δŷ_t / Σ Δŷ: the LOO-TVD as a distribution over the tokens (NaN if undefined)."""
        return share(self.loo)

    def to_dict(self) -> dict:
        """JSON-ready (lists, no NaN: NaN → None)."""
        payload = {k: _clean(v) for k, v in asdict(self).items()}
        payload["prediction"] = self.label_names[self.predicted]
        payload["permutation_median"] = self.permutation_median
        payload["gradient_share"] = _clean(self.gradient_share)
        payload["loo_share"] = _clean(self.loo_share)
        payload["measure_definitions"] = {"loo": LOO_TVD_DEFINITION}  # J&W's leave-one-out, not the LOO-drop
        return payload

    def summary(self, shares: bool = False) -> str:
        """The printed summary (what ``hf-attn explain`` prints): :func:`hf_attn.explanation.render.summary_text`;
        ``shares``: gradient and leave-one-out as shares of their sum instead of raw values."""
        from hf_attn.explanation.render import summary_text

        return summary_text(self, shares=shares)

    def to_html(self, shares: bool = False) -> str:
        """The heatmap page (:func:`hf_attn.explanation.render.heatmap_html`): raw values, or with
        ``shares`` gradient and leave-one-out as shares of their sum."""
        from hf_attn.explanation.render import heatmap_html

        return heatmap_html(self, shares=shares)

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:
        """One line, no arrays: ``SentenceExplanation('the film is great', prediction='positive' (0.93),
        5 tokens, methods: attention, gradient, loo, ig; adversary JSD 0.041)``."""
        methods = [n for n in EXPLANATION_ROWS if getattr(self, n) is not None]
        label = self.label_names[self.predicted] if self.predicted < len(self.label_names) else self.predicted
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        line = (f"SentenceExplanation({text!r}, prediction={str(label)!r} "
                f"({float(self.probabilities[self.predicted]):.2f}), {len(self.tokens)} "
                f"token{'' if len(self.tokens) == 1 else 's'}, methods: {', '.join(methods)}")
        if self.eps_max_jsd is not None:
            line += f"; adversary JSD {self.eps_max_jsd:.3f}"
        return line + ")"


def _clean(value):
    if isinstance(value, np.ndarray):
        return [_clean(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (float, np.floating)) and not np.isfinite(value):
        return None
    if isinstance(value, np.floating):
        return float(value)
    return value


def share(values) -> np.ndarray:
    """``values / Σ values`` (NaN everywhere when the sum is not positive)."""
    values = np.asarray(values, dtype=np.float64)
    total = values.sum()
    if not np.isfinite(total) or total <= 0:
        return np.full(values.shape, np.nan)
    return values / total


def sentence_kendall(attention, gradient, loo, tie_tolerance: float = TIE_TOLERANCE) -> dict:
    """This sentence's Kendall τ-b and p-value (J&W Table 2's per-instance statistic) of attention vs
    gradient, attention vs LOO-TVD and gradient vs LOO-TVD (J&W's leave-one-out), by
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


def token_groups(explanation: SentenceExplanation) -> list[tuple[int, int]]:
    """``[start, stop)`` token ranges that came from one typed word (one range per token unless a word
    gave several tokens with one span, e.g. "cannot" → "can" "not")."""
    spans = explanation.spans or [None] * len(explanation.tokens)
    groups: list[tuple[int, int]] = []
    for t, span in enumerate(spans):
        if groups and span is not None and spans[groups[-1][0]] == span:
            groups[-1] = (groups[-1][0], t + 1)
        else:
            groups.append((t, t + 1))
    return groups


@dataclass
class Explanation:
    """The explanations of several texts: ``sentences`` (:class:`SentenceExplanation`) and
    ``model`` (what was explained). ``to_pandas()`` has one row per token (``level="token"``) or
    per word (``level="word"``), ``to_pandas(long=True)`` one row per (text, unit, measure);
    ``_repr_html_`` shows each text's heatmap (with its legend and word-level sums);
    ``summary()`` the printed summary; ``save_html(path)`` writes the page."""

    sentences: list[SentenceExplanation]
    model: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.sentences)

    def __repr__(self) -> str:
        """One line: how many texts, of which model, the first text's :class:`SentenceExplanation` line."""
        model = self.model.get("name") or self.model.get("text") or "a model"
        first = f"; first: {self.sentences[0]!r}" if self.sentences else ""
        count = len(self.sentences)
        return f"Explanation({count} text{'' if count == 1 else 's'} of {str(model)!r}{first})"

    def __getitem__(self, index: int) -> SentenceExplanation:
        return self.sentences[index]

    def to_pandas(self, level: str = "token", long: bool = False):
        import pandas as pd

        if level not in ("token", "word"):
            raise ValueError(f"level must be 'token' or 'word', got {level!r}")
        rows = []
        for i, s in enumerate(self.sentences):
            units = s.tokens if level == "token" else s.words
            values = {n: (getattr(s, n) if level == "token" else s.word_values(n)) for n in EXPLANATION_ROWS}
            for j, unit in enumerate(units):
                row = {"text": i, "position": j, level: unit, "predicted": s.label_names[s.predicted]}
                if level == "token":
                    row["word"] = s.word_ids[j] if j < len(s.word_ids) else None
                if long:
                    rows += [row | {"measure": n, "value": float(v[j])} for n, v in values.items() if v is not None]
                else:
                    rows.append(row | {n: (None if v is None else float(v[j])) for n, v in values.items()})
        return pd.DataFrame(rows)

    def summary(self, shares: bool = False) -> str:
        """Every text's printed summary (:meth:`SentenceExplanation.summary`)."""
        from hf_attn.explanation.render import summary_text

        return "\n\n".join(summary_text(s, shares=shares) for s in self.sentences)

    def to_dict(self) -> dict:
        """JSON-ready: ``model``, ``settings`` and each text's :meth:`SentenceExplanation.to_dict`."""
        return {"model": _clean(self.model), "settings": _clean(self.settings),
                "sentences": [s.to_dict() for s in self.sentences]}

    def to_html(self, shares: bool = False) -> str:
        """The notebook's page (:func:`hf_attn.explanation.render.explanation_html`)."""
        from hf_attn.explanation.render import explanation_html

        return explanation_html(self, shares=shares)

    def _repr_html_(self) -> str:
        return self.to_html()

    def save_html(self, path: str, shares: bool = False) -> str:
        page = ("<!doctype html><html><head><meta charset='utf-8'><title>hf_attn explanation</title></head>"
                f"<body>{self.to_html(shares=shares)}</body></html>")
        write_text_atomic(path, page)
        return path


__all__ = ["EXPLANATION_ROWS", "Explanation", "KENDALL_PAIRS", "SentenceExplanation", "TIE_TOLERANCE", "sentence_kendall",
           "share", "token_groups", "typed_spans"]
