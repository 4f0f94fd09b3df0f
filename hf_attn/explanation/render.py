"""The renderings of the one explanation object (:mod:`hf_attn.explanation`): the heatmap page that a
notebook's ``_repr_html_`` and the Space both show (:func:`heatmap_html`, :func:`explanation_html`),
the Space's Markdown summary (:func:`summary_markdown`), the printed summary of ``hf-attn explain``
and :meth:`SentenceExplanation.summary` (:func:`summary_text`), the permutation histogram
(:func:`permutation_figure`) and the side-by-side methods heatmap (:func:`methods_heatmap_html`).

**Units.** Every view shows the same quantities in the same units: raw values by default (the
gradient g_t = |∂ŷ/∂e_t · e_t|, the LOO-TVD Δŷ_t, integrated gradients, as the explanation holds
them and ``hf-attn explain`` prints them); ``shares=True`` (the Space's checkbox, ``hf-attn explain
--shares``) shows the gradient and the LOO-TVD as shares of their sum over the tokens (g/Σg,
Δŷ/ΣΔŷ), which sum to 1 like the attention. Attention, p̂_t, rollout and integrated gradients are
shown as they are in both.

The heatmap's colour scales (a legend gives each): α and the adversarial α share one (0 to the
largest α); raw, the gradient and the LOO-TVD each have their own (0 to their largest); as shares,
α, g/Σg, Δŷ/ΣΔŷ and the adversarial α share one, from 0 to the largest of the first three (each of
them sums to 1 over the tokens, so they compare); rollout has its own (0 to its largest), p̂_t goes
from 0 to 1, integrated gradients (signed) run from −max|IG| (blue) to +max|IG| (red). Under the
token table, the word-level sums (a word's value is the sum of its tokens') when a word has more than
one token.
"""

from __future__ import annotations

import html
import math

import numpy as np

from hf_attn.core.measure_names import LOO_DROP, LOO_TVD, LOO_TVD_DEFINITION
from hf_attn.explanation import SentenceExplanation, token_groups

WEIGHT_COLOUR = (31, 119, 180)  # the shared scale of α, adversarial α and the normalised g and Δŷ
PROBABILITY_COLOUR = (230, 115, 0)  # p̂_t, 0 … 1
POSITIVE_COLOUR, NEGATIVE_COLOUR = (214, 39, 40), (31, 119, 180)  # signed scores (integrated gradients, methods)
ROWS = (  # (data-row, title, values, scale): one colour scale per kind of row; gradient and LOO as shares
    ("attention", "attention α", lambda e: e.attention, "weight"),
    ("gradient", "gradient g / Σg", lambda e: e.gradient_share, "weight"),
    ("loo", "LOO-TVD Δŷ / ΣΔŷ", lambda e: e.loo_share, "weight"),
    ("adversary_attention", "adversarial α", lambda e: e.adversary_attention, "weight"),
    ("token_probability", "per-token p̂_t", lambda e: e.token_probability, "probability"),
    ("rollout", "attention rollout", lambda e: e.rollout, "rollout"),
    ("ig", "integrated gradients", lambda e: e.ig, "ig"),
)
# the rows in raw values (the default): the gradient and the LOO-TVD as computed, each on its own scale
RAW_ROWS = tuple((row, "gradient g = |∂ŷ/∂e·e|", lambda e: e.gradient, "gradient") if row == "gradient" else
                 (row, "LOO-TVD Δŷ = TVD(ŷ(x₋t), ŷ(x))", lambda e: e.loo, "loo") if row == "loo" else
                 (row, title, get, kind) for row, title, get, kind in ROWS)
RAW_VALUES = {"gradient": ("|∂ŷ/∂e·e|", lambda e: e.gradient), "loo": ("TVD(ŷ(x₋t), ŷ(x))", lambda e: e.loo)}
SHARE_VALUES = {"gradient": ("g/Σg", lambda e: e.gradient_share), "loo": ("Δŷ/ΣΔŷ", lambda e: e.loo_share)}
SHARES_LABEL = "show gradient and leave-one-out as shares of their sum (g/Σg, Δŷ/ΣΔŷ) instead of raw values"
KENDALL_ROWS = (("attention_gradient", "attention vs gradient"), ("attention_loo", f"attention vs {LOO_TVD}"),
                ("gradient_loo", f"gradient vs {LOO_TVD}"))
# the printed summary's column name of each row (the explanation's ``loo`` is J&W's LOO-TVD)
SUMMARY_COLUMNS = {"loo": LOO_TVD}
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
    ".hfa-words{border-collapse:collapse;margin:0}"
    ".hfa-words th,.hfa-words td{border:1px solid #ccc;padding:3px 5px;text-align:center;color:#111;"
    "background:#fff;font-variant-numeric:tabular-nums;min-width:40px;white-space:nowrap}"
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


def _word_header(e: SentenceExplanation, start: int, stop: int) -> str:
    words = e.typed or e.tokens
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
    words = e.typed or e.tokens
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


def _rows(shares: bool) -> tuple:
    """:data:`ROWS` (gradient and LOO-TVD as shares of their sum) or :data:`RAW_ROWS` (raw values)."""
    return ROWS if shares else RAW_ROWS


def _row_values(e: SentenceExplanation, shares: bool = False) -> dict[str, np.ndarray]:
    """The rows this explanation has, in :data:`ROWS` order (a row the model has none of is left out:
    p̂_t for transformers, rollout for one-layer models, the adversary when it was not run)."""
    values = {}
    for row, _, get, _ in _rows(shares):
        raw = get(e)
        if raw is None:
            continue
        array = np.asarray(raw, dtype=np.float64)
        if row == "token_probability" and not np.isfinite(array).any():
            continue  # T&Š's per-token read-out: BiLSTM models only
        values[row] = array
    return values


def _top(values) -> float:
    """The largest finite |value| (1.0 when there is none above 0)."""
    finite = np.abs(np.asarray(values, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def _scales(values: dict[str, np.ndarray], shares: bool = False) -> dict[str, tuple[float, tuple, tuple]]:
    """Per scale kind: (top, colour of positive values, colour of negative values)."""
    compared = ("attention", "gradient", "loo") if shares else ("attention",)
    weight_top = _top(np.concatenate([values[r] for r in compared if r in values] or [np.zeros(0)]))
    scales = {"weight": (weight_top, WEIGHT_COLOUR, WEIGHT_COLOUR), "probability": (1.0, PROBABILITY_COLOUR,
                                                                                    PROBABILITY_COLOUR)}
    for row in ("rollout", "ig") if shares else ("rollout", "ig", "gradient", "loo"):
        scales[row] = (_top(values.get(row, np.zeros(0))),
                       *((POSITIVE_COLOUR, NEGATIVE_COLOUR) if row == "ig" else (WEIGHT_COLOUR, WEIGHT_COLOUR)))
    return scales


def _cell(value: float, scale: tuple, title: str, digits: int = 3, cls: str = "hfa-cell", spec: str = "") -> str:
    """One heatmap cell: its colour from ``value`` on ``scale`` (top, positive colour, negative
    colour), the value printed (``spec``: a format, e.g. ``".4f"``; default ``digits`` decimals), the
    title (with the value) as tooltip, the value in ``data-value``."""
    if not np.isfinite(value):
        return f'<td class="{cls}" title="{html.escape(title)}: undefined">–</td>'
    top, positive, negative = scale
    signed = positive is not negative
    strength = min(abs(value) / top, 1.0) if signed else min(max(value / top, 0.0), 1.0)
    r, g, b = _blend(positive if value >= 0 or not signed else negative, strength)
    text_colour = "#fff" if strength > 0.6 else "#111"
    return (f'<td class="{cls}" style="background:rgb({r},{g},{b});color:{text_colour}" '
            f'title="{html.escape(title)}" data-value="{value:.9g}">{value:{spec or f".{digits}f"}}</td>')


def _row_labels(e: SentenceExplanation, shares: bool = False) -> dict[str, str]:
    label_name = html.escape(e.label_names[e.predicted])
    adversary = ("" if e.adversary_tvd is None else
                 f"<br><small>Δŷ {e.adversary_tvd:.4f} · JSD {e.adversary_jsd:.3f}</small>")
    gap = ("" if e.ig_completeness_gap is None or not np.isfinite(e.ig_completeness_gap) else
           f"<br><small>completeness gap {e.ig_completeness_gap:.3g}</small>")
    return {"attention": "attention α",
            "gradient": (f"gradient {'g/Σg' if shares else 'g = |∂ŷ/∂e·e|'}<br><small>vs α: "
                         f"{_kendall_text(e, 'attention_gradient')}</small>"),
            "loo": (f"{LOO_TVD} {'Δŷ/ΣΔŷ' if shares else 'Δŷ'}<br><small>vs α: "
                    f"{_kendall_text(e, 'attention_loo')}</small>"),
            "adversary_attention": f"adversarial α{adversary}",
            "token_probability": f"per-token p̂_t<br><small>P({label_name})</small>",
            "rollout": "attention rollout", "ig": f"integrated gradients{gap}"}


def _line_table(e: SentenceExplanation, number: int, line, values, scales, labels, shares: bool = False) -> str:
    """One line of the token heatmap: the typed words as header, one row per measure."""
    words = e.typed or e.tokens
    head = "".join(_word_header(e, start, stop) for start, stop in line)
    columns = [t for start, stop in line for t in range(start, stop)]
    rows = []
    other = RAW_VALUES if shares else SHARE_VALUES  # the tooltip gives the other unit too
    for row, _, _, kind in _rows(shares):
        if row not in values:
            continue
        cells = []
        for t in columns:
            value = values[row][t]
            title = f"{words[t]} ({e.tokens[t]})" if words[t] != e.tokens[t] else words[t]
            if np.isfinite(value):
                title += f": {value:.4g}"
                if row in other:
                    other_name, get = other[row]
                    title += f" ({'raw ' if shares else 'share '}{other_name} = {get(e)[t]:.4g})"
            cells.append(_cell(value, scales[kind], title, spec="" if shares or row not in RAW_VALUES else ".4f"))
        rows.append(f'<tr data-row="{row}"><th class="hfa-row">{labels[row]}</th>{"".join(cells)}</tr>')
    return (f'<div class="hfa-line"><table class="hfa-heatmap" data-line="{number}"><tr>'
            f'<th class="hfa-row">word</th>{head}</tr>{"".join(rows)}</table></div>')


def _bar(colour_low: tuple, colour_high: tuple, middle: tuple | None = None) -> str:
    stops = [colour_low, (255, 255, 255), colour_high] if middle else [colour_low, colour_high]
    stops = ", ".join(f"rgb{c}" for c in stops)
    return f'<span class="hfa-bar" style="background:linear-gradient(to right, {stops})"></span>'


def _legend(e: SentenceExplanation, values, scales, shares: bool = False) -> str:
    """Every colour scale of the heatmap, with its range."""
    weight_top = scales["weight"][0]
    saturated = (" (adversarial weights above it at full colour)"
                 if "adversary_attention" in values and values["adversary_attention"].max() > weight_top else "")
    adversary = " and adversarial α" if "adversary_attention" in values else ""
    shared = "α, g/Σg, Δŷ/ΣΔŷ" if shares else "α"
    legend = [f'<span>{shared}{adversary}: 0 {_bar(_blend(WEIGHT_COLOUR, 0), WEIGHT_COLOUR)} '
              f'{weight_top:.3f}{saturated}</span>']
    if not shares:
        for row, name in (("gradient", "gradient g (raw)"), ("loo", f"{LOO_TVD} Δŷ (raw)")):
            if row in values:
                legend.append(f'<span>{name}: 0 {_bar(_blend(WEIGHT_COLOUR, 0), WEIGHT_COLOUR)} '
                              f'{scales[row][0]:.3g}</span>')
    if "rollout" in values:
        legend.append(f'<span>rollout: 0 {_bar(_blend(WEIGHT_COLOUR, 0), WEIGHT_COLOUR)} {scales["rollout"][0]:.3f}'
                      "</span>")
    if "ig" in values:
        top = scales["ig"][0]
        legend.append(f'<span>integrated gradients: −{top:.3g} {_bar(NEGATIVE_COLOUR, POSITIVE_COLOUR, (255,) * 3)} '
                      f'+{top:.3g}</span>')
    if "token_probability" in values:
        legend.append(f'<span>p̂_t: 0 {_bar(_blend(PROBABILITY_COLOUR, 0), PROBABILITY_COLOUR)} 1</span>')
    if any(e.unknown):
        legend.append(f'<span><span class="hfa-unk" title="{UNKNOWN_TITLE}">word</span> not in the vocabulary '
                      "(read as [UNK])</span>")
    return f'<div class="hfa-legend" id="hfa-legend">{"".join(legend)}</div>'


def word_table_html(e: SentenceExplanation, values=None, scales=None, shares: bool = False) -> str:
    """The word-level aggregation: per word (the tokenizer's words), the sum of its tokens' values of
    each row that sums over tokens (α, g/Σg, Δŷ/ΣΔŷ, rollout, integrated gradients), on the token
    heatmap's scales. Empty when every word is one token (the token heatmap already shows it)."""
    if not e.words or len(e.words) >= len([w for w in e.word_ids if w is not None]):
        return ""
    values = values if values is not None else _row_values(e, shares)
    scales = scales if scales is not None else _scales(values, shares)
    kinds = {row: kind for row, _, _, kind in _rows(shares)}
    head = "".join(f'<th class="hfa-wtok">{html.escape(w)}</th>' for w in e.words)
    rows = []
    for row in ("attention", "gradient", "loo", "rollout", "ig"):
        if row not in values:
            continue
        sums = [0.0] * len(e.words)
        for value, word in zip(values[row], e.word_ids):
            if word is not None and word < len(sums):
                sums[word] += float(value)
        spec = "" if shares or row not in RAW_VALUES else ".4f"  # as hf-attn explain prints them
        cells = "".join(_cell(v, scales[kinds[row]], f"{w}: {v:.4g}", cls="hfa-wcell", spec=spec)
                        for w, v in zip(e.words, sums))
        title = dict((r, t) for r, t, _, _ in _rows(shares))[row]
        rows.append(f'<tr data-word-row="{row}"><th class="hfa-row">{html.escape(title)}</th>{cells}</tr>')
    return (f'<div class="hfa-line"><p>Per word (the sum of its tokens):</p><table class="hfa-words">'
            f'<tr><th class="hfa-row">word</th>{head}</tr>{"".join(rows)}</table></div>')


def heatmap_html(explanation: SentenceExplanation, shares: bool = False) -> str:
    """Aligned token heatmaps under the words as typed (unknown words dotted-underlined), one row per
    measure: attention α, gradient and leave-one-out (the LOO-TVD) in raw values (``shares``: as
    shares of their sum, so all three are distributions over the tokens), the adversarial α, p̂_t,
    rollout and integrated gradients where the explanation has them. Rows of one kind share one
    colour scale and a legend gives every scale (module docstring). Each cell prints its value (the
    value shown in ``data-value``, the other unit in the tooltip); the gradient and leave-one-out
    labels give the sentence's Kendall τ with α. Long sentences wrap onto several lines, each with
    the row labels; the word-level sums follow (:func:`word_table_html`)."""
    e = explanation
    values = _row_values(e, shares)
    scales = _scales(values, shares)
    labels = _row_labels(e, shares)
    tables = [_line_table(e, number, line, values, scales, labels, shares)
              for number, line in enumerate(_lines(e, token_groups(e)))]
    unit = ("gradient and LOO-TVD as shares of their sum over the tokens" if shares
            else "raw values (gradient |∂ŷ/∂e·e|, LOO-TVD TVD(ŷ(x₋t), ŷ(x)))")
    return (f'{HEATMAP_STYLE}<div class="hfa-heatmaps" id="hfa-heatmap" data-units="{"shares" if shares else "raw"}">'
            f'{_legend(e, values, scales, shares)}<p class="hfa-units">Shown: {html.escape(unit)}.</p>'
            f'{"".join(tables)}{word_table_html(e, values, scales, shares)}</div>')


def explanation_html(explanation, shares: bool = False) -> str:
    """A notebook's view of an :class:`hf_attn.explanation.Explanation`: what was explained, then per
    text its prediction and :func:`heatmap_html` (``shares`` as there)."""
    model = explanation.model or {}
    parts = [f"<div class='hf-attn'><p><b>{html.escape(str(model.get('text', '')))}</b></p>"]
    for s in explanation.sentences:
        line = f"{html.escape(s.label_names[s.predicted])} ({s.probabilities[s.predicted]:.3f})"
        if s.eps_max_jsd is not None:
            line += f"; adversarial attention within ε = {s.eps:g}: ε-max JSD {s.eps_max_jsd:.3f}"
        if s.permutation_median is not None:
            line += f"; permutations: median Δŷ {s.permutation_median:.4f}"
        parts.append(f"<p>{line}</p>{heatmap_html(s, shares)}")
    parts.append("</div>")
    return "".join(parts)


# ------------------------------------------------------------------ every attribution method, side by side
COMPARE_TITLES = {"attention": "attention α", "rollout": "attention rollout", "attention_flow": "attention flow",
                  "attention_norm": "attention norm ‖αf(x)‖", "alti": "ALTI", "value_zeroing": "value zeroing",
                  "alti_logit": "ALTI-Logit (logit per token)",
                  "saliency": "saliency ‖∂ŷ/∂e‖", "gradient_x_input": "gradient × input",
                  "integrated_gradients": "integrated gradients", "attnlrp": "AttnLRP (logit)",
                  "cp_lrp": "CP-LRP (logit)",
                  "leave_one_out": f"leave-one-out drop ({LOO_DROP}) ŷ_c(x) − ŷ_c(x₋t)"}


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
                why = (getattr(comparison, "undefined", None) or {}).get(method, {}).get(0)
                said = f"undefined ({why})" if why else "undefined"
                cells.append(f'<td class="hfa-cell" data-value="nan" title="{html.escape(token)}: {html.escape(said)}">'
                             '–</td>')
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
        notes.append(f'<p>Not shown, with the reason:</p><ul class="hfa-skipped">{items}</ul>')
    return (f'{HEATMAP_STYLE}<div class="hfa-heatmaps" id="hfa-methods"><div class="hfa-line">'
            f'<table class="hfa-heatmap hfa-methods"><tr><th class="hfa-row">token</th>{head}</tr>{"".join(rows)}'
            f'</table></div>{"".join(notes)}</div>')


_MARKDOWN_SPECIALS = str.maketrans({c: "\\" + c for c in "\\`*_{}[]()#+!|~"})


def markdown_text(value) -> str:
    """``value`` as literal text inside Markdown: HTML escaped (``<script>`` shows as text, whatever
    the renderer's sanitiser does) and Markdown's own markup characters backslash-escaped. Model
    label names and words typed by visitors go through it before they reach a Markdown block."""
    return html.escape(str(value), quote=False).translate(_MARKDOWN_SPECIALS)


def _adversary_line(e: SentenceExplanation) -> str | None:
    if e.adversary_tvd is None:
        return None
    feasible = "" if e.adversary_feasible else " (no adversary reached TVD ≤ ε; the closest is shown)"
    return (f"Adversarial attention: Δŷ = TVD = {e.adversary_tvd:.4f}, JSD to α = {e.adversary_jsd:.3f} "
            f"(of ln 2 ≈ 0.693); ε = {e.eps}, ε-max JSD = {e.eps_max_jsd:.3f}{feasible}.")


def _permutation_line(e: SentenceExplanation) -> str | None:
    if e.permutation_tvd is None or not len(e.permutation_tvd):
        return None
    return (f"Permutations: median Δŷ = {e.permutation_median:.4f} over {len(e.permutation_tvd)} "
            f"random permutations of α (max {np.max(e.permutation_tvd):.4f}).")


def _read_out_line(e: SentenceExplanation) -> str:
    if e.token_probability is not None and np.isfinite(e.token_probability).any():
        return (f"Per-token p̂_t of the predicted class: mean {np.nanmean(e.token_probability):.3f}"
                + (" (regularised model: T&Š Fig. 2)" if e.regularised else " (base model; T&Š regularisers lower it)")
                + ".")
    return (f"Explained: {e.explained or 'the attention'} over the word pieces (no per-token p̂_t: "
            "that is T&Š's BiLSTM read-out).")


def summary_markdown(explanation: SentenceExplanation) -> str:
    """The Space's summary: the prediction, the sentence's Kendall τ table and one line each on the
    adversary, the permutations, p̂_t and the unknown words."""
    e = explanation
    limit = f" (limit {e.max_tokens})" if e.max_tokens else ""
    kendall_rows = []
    for name, title in KENDALL_ROWS:
        result = e.kendall.get(name, {})
        tau, p = result.get("tau", float("nan")), result.get("pvalue", float("nan"))
        kendall_rows.append(f"| {title} | {_number(tau)} | {_p_value(p)} |")
    unknown = [w for w, u in zip(e.typed or e.tokens, e.unknown) if u]
    lines = [
        f"**Prediction: {markdown_text(e.label_names[e.predicted])}** (p = {e.probabilities[e.predicted]:.3f}), "
        f"{len(e.tokens)} token{'s' if len(e.tokens) != 1 else ''}{limit}, model variant `{e.variant}`.",
        "",
        "| Kendall τ of this sentence | τ | p |",
        "|---|---|---|",
        *kendall_rows,
        "",
        f"τ-b and its p-value as in J&W Table 2 (importances within {e.tie_tolerance:g} of each other tied); "
        f"{LOO_TVD_DEFINITION}.",
        "",
        *(f"- {line}" for line in (_adversary_line(e), _permutation_line(e), _read_out_line(e)) if line),
    ]
    if unknown:
        shown = ", ".join(f"“{markdown_text(w)}”" for w in dict.fromkeys(unknown))
        lines.append(f"- Not in the vocabulary (read as [UNK]): {shown}.")
    return "\n".join(lines)


def summary_text(explanation: SentenceExplanation, shares: bool = False) -> str:
    """The printed summary of one explanation (``hf-attn explain``, :meth:`SentenceExplanation.summary`):
    the prediction, one line per token with every row's value (4 decimals; raw values, or with
    ``shares`` the gradient and the LOO-TVD as shares of their sum, columns ``g/Σg`` and ``Δŷ/ΣΔŷ``),
    the word-level sums when a word has several tokens, the sentence's Kendall τ, the adversary and
    the permutations."""
    e = explanation
    names = [n for n in ("attention", "gradient", "loo", "ig", "rollout") if getattr(e, n) is not None]
    shown = {n: (SHARE_VALUES[n][1](e) if shares and n in SHARE_VALUES else np.asarray(getattr(e, n), dtype=np.float64))
             for n in names}
    columns = {n: (SHARE_VALUES[n][0] if shares and n in SHARE_VALUES else SUMMARY_COLUMNS.get(n, n)) for n in names}
    probabilities = ", ".join(f"{n} {p:.4f}" for n, p in zip(e.label_names, e.probabilities))
    lines = [f"{e.text}", f"prediction: {e.label_names[e.predicted]} ({probabilities})"]
    if e.explained:
        lines.append(f"explained: {e.explained}")
    if shares and ("gradient" in names or "loo" in names):
        lines.append("gradient and LOO-TVD as shares of their sum over the tokens (g/Σg, Δŷ/ΣΔŷ)")
    width = max([len(t) for t in e.tokens] + [5])
    lines.append(f"{'token':<{width}}  " + "  ".join(f"{columns[n]:>9}" for n in names))
    undefined = getattr(e, "undefined", None) or {}

    def cell(name, value) -> str:  # a value undefined by the one-token rule is said so, not printed as nan
        return f"{'undefined':>9}" if name in undefined and not np.isfinite(value) else f"{float(value):>9.4f}"

    for t, token in enumerate(e.tokens):
        lines.append(f"{token:<{width}}  " + "  ".join(cell(n, shown[n][t]) for n in names))
    if e.words and len(e.words) < len([w for w in e.word_ids if w is not None]):
        lines.append("per word (the sum of its tokens):")
        sums = {n: _word_sums(e, shown[n]) for n in names}
        width = max([len(w) for w in e.words] + [5])
        lines += [f"{word:<{width}}  " + "  ".join(cell(n, sums[n][w]) for n in names) for w, word in enumerate(e.words)]
    taus = "; ".join(f"{title} {_number(e.kendall.get(name, {}).get('tau', float('nan')), 4)}"
                     for name, title in KENDALL_ROWS)
    lines.append(f"Kendall τ: {taus}")
    if "loo" in names:
        lines.append(LOO_TVD_DEFINITION)
    lines += [f"undefined {name}: {reason}" for name, reason in undefined.items()]
    lines += [line for line in (_adversary_line(e), _permutation_line(e)) if line]
    return "\n".join(lines)


def _word_sums(e: SentenceExplanation, values) -> list[float]:
    """Per word: the sum of its tokens' ``values`` (:meth:`SentenceExplanation.word_values`' rule)."""
    out = [0.0] * len(e.words)
    for value, word in zip(values, e.word_ids):
        if word is not None and word < len(out):
            out[word] += float(value)
    return out


def permutation_figure(explanation: SentenceExplanation):
    """Histogram of the permutation Δŷ (J&W Alg. 2) with its median and the adversary's Δŷ."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    e = explanation
    figure = Figure(figsize=(6.4, 2.8), dpi=100, layout="constrained")
    ax = figure.add_subplot()
    values = e.permutation_tvd if e.permutation_tvd is not None else np.zeros(0)
    upper = max(float(values.max()) if values.size else 0.0, e.adversary_tvd or 0.0, 1e-3)
    ax.hist(values, bins=np.linspace(0, upper * 1.05, 31), color="#1f77b4", alpha=0.8, label="permutations")
    if values.size:
        ax.axvline(e.permutation_median, color="k", linestyle="--", label=f"median {e.permutation_median:.4f}")
    if e.adversary_tvd is not None:
        ax.axvline(e.adversary_tvd, color="#9467bd", label=f"adversary {e.adversary_tvd:.4f}")
    ax.set_xlabel("Δŷ = TVD(ŷ(permuted α), ŷ)")
    ax.set_ylabel("permutations")
    ax.set_title("Permutation Δŷ distribution (J&W Alg. 2)")
    ax.legend(fontsize=8)
    return figure

