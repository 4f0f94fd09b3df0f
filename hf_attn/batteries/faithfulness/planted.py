"""A test of the faithfulness metrics themselves: a real classifier whose prediction is a known
function of marked words, so the true attribution of every text is known exactly, and a check of
which metrics rank that truth first.

The model (:func:`planted_model`): hf_attn's own attentive classifier
(:class:`~hf_attn.models.modeling_hf_attn.AttnClassifierForSequenceClassification`) with the
Average encoder and frozen uniform attention (Wiegreffe & Pinter 2019 §3.2), every weight set by
hand, no training. A marked word ``v`` has the weight ``WEIGHTS[v]``: its embedding is ``(w, 0,
0)`` when ``w > 0`` and ``(0, −w, 0)`` when ``w < 0``; every other word has ``(0, 0, 1)``, which the
encoder reads and the decoder ignores; the encoder is the identity followed by ReLU, the decoder's
weights ``(1, −1, 0)`` with no bias. The one logit of a text of n tokens is then exactly

    z = (1/n) Σ_t w[token_t]        (0 for every unmarked token; softmax over [0, z])

and the true attribution of token t toward the predicted class c is ``d_t = sign(z) · w[token_t] /
n`` (:func:`true_attributions`, computed from the words alone, never from the model).

Why the truth is the best ordering there is: deleting any set D of k tokens leaves
z' = (n·z − Σ_{t∈D} w_t) / (n − k), whose denominator depends on k alone, so for every k the set
that lowers ŷ_c the most (comprehensiveness) is the k tokens of highest d and the set that keeps it
the highest (sufficiency) the k of highest d — the truth's own top-k, whatever the other tokens. So
on every sentence the truth's ERASER comprehensiveness is the highest and its sufficiency the lowest
of any attribution, its NAOPC comprehensiveness is 1 and its NAOPC sufficiency 0 (where the bounds
are exact). Leave-one-out deletes one token: ŷ_c(x₋t) falls as d_t rises (same n − 1 for every t),
so the LOO-drop ranks the tokens exactly as the truth: the truth's τ with it is 1, by construction
(``tau_loo`` here measures agreement with a method that is itself exact on this model, not
faithfulness directly). ``agreement`` is a consensus with the table's other rows: whether it ranks
the truth first depends on those rows, not on faithfulness. The soft metrics (Soft-NC / Soft-NS)
keep or drop each embedding element with the min–max normalised score: no attribution is optimal
for every draw, so whether the truth leads there is an empirical finding, which
:func:`planted_verdicts` records.

The controls (:func:`planted_rows`): ``anti_truth``, the truth negated (the exact reverse ranking),
given as a row next to ``truth``; and the table's own ``random`` floor. :func:`planted_verdicts`
states per metric whether the truth ranks first and the anti-truth last among the three, by the
means and by paired Wilcoxon tests (:meth:`FaithfulnessResult.compare`); ``scripts/planted_truth.py``
writes the record ``docs/faithfulness/planted_truth.json`` and its page.
"""

from __future__ import annotations

import math

import numpy as np

from hf_attn.batteries.faithfulness.settings import HIGHER_IS_BETTER, METRICS

# the marked words and their weights w (distinct magnitudes; an unmarked word has w = 0)
WEIGHTS = {"superb": 4.0, "good": 2.5, "fine": 1.0, "dull": -1.5, "bad": -3.0, "awful": -4.5}
FILLERS = ("the", "movie", "was", "a", "plot", "and", "film", "story", "actors", "it", "with", "very", "of",
           "this", "cast", "script")
CONTROLS = ("truth", "random", "anti_truth")
# why a metric need not rank the truth first for a reason of its own (the verdict is still measured)
CAVEATS = {
    "tau_loo": "τ with the LOO-drop, which on this additive model ranks the tokens exactly as the truth (by "
               "construction): a check of agreement with an exact method, not of faithfulness itself",
    "agreement": "consensus with the table's other rows (the anti-truth and the random floor among them): it "
                 "measures agreement between methods, not faithfulness",
}


def planted_texts(count: int = 48, seed: int = 0, min_words: int = 4, max_words: int = 10) -> list[str]:
    """``count`` short synthetic sentences (``min_words``–``max_words`` words, 1 to 3 marked), drawn from
    ``seed``; a sentence whose logit would be 0 (no predicted class) is drawn again."""
    if count < 1:
        raise ValueError(f"count must be ≥ 1, got {count}")
    if not 2 <= min_words <= max_words:
        raise ValueError(f"min_words and max_words must satisfy 2 ≤ min_words ≤ max_words, got {min_words}, "
                         f"{max_words}")
    rng = np.random.default_rng(seed)
    marked = sorted(WEIGHTS)
    texts: list[str] = []
    while len(texts) < count:
        n = int(rng.integers(min_words, max_words + 1))
        k = int(rng.integers(1, min(3, n - 1) + 1))
        words = [FILLERS[i] for i in rng.integers(0, len(FILLERS), n - k)]
        for word in rng.choice(marked, size=k):
            words.insert(int(rng.integers(0, len(words) + 1)), str(word))
        if abs(sum(WEIGHTS.get(w, 0.0) for w in words)) > 1e-9:
            texts.append(" ".join(words))
    return texts


def planted_model(max_tokens: int = 64):
    """``(model, tokenizer)``: the hand-set classifier of the module docstring (eval mode, CPU)."""
    import torch

    from hf_attn.data.tokenization import build_tokenizer
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification

    tokenizer = build_tokenizer([" ".join(sorted(WEIGHTS) + list(FILLERS))], max_length=max_tokens)
    vocab = tokenizer.get_vocab()
    config = AttnClassifierConfig(vocab_size=len(vocab), embedding_dim=3, hidden_size=3, encoder="average",
                                  attention="uniform", num_labels=2, max_tokens=max_tokens, pad_token_id=0,
                                  unk_token_id=1, mask_token_id=2, id2label={0: "negative", 1: "positive"},
                                  label2id={"negative": 0, "positive": 1})
    model = AttnClassifierForSequenceClassification(config).eval()
    embedding = torch.zeros(len(vocab), 3)
    for word, index in vocab.items():
        w = WEIGHTS.get(word)
        if w is not None:
            embedding[index, 0 if w > 0 else 1] = abs(w)
        elif word in FILLERS:
            embedding[index, 2] = 1.0
    with torch.no_grad():
        model.embedding.weight.copy_(embedding)
        model.encoder.proj.weight.copy_(torch.eye(3))
        model.encoder.proj.bias.zero_()
        model.decoder.weight.copy_(torch.tensor([[1.0, -1.0, 0.0]]))
        model.decoder.bias.zero_()
    return model, tokenizer


def planted_logit(tokenizer, text: str) -> float:
    """z of ``text`` by hand: the mean of its tokens' weights."""
    tokens = tokenizer.tokenize(text)
    return sum(WEIGHTS.get(t, 0.0) for t in tokens) / len(tokens)


def true_attributions(tokenizer, texts) -> list[np.ndarray]:
    """Per text, per token of the tokenizer's tokenization: ``d_t = sign(z) · w[token_t] / n``, the
    token's exact share of the predicted class's logit margin (module docstring)."""
    out = []
    for text in texts:
        tokens = tokenizer.tokenize(text)
        weights = np.array([WEIGHTS.get(t, 0.0) for t in tokens])
        z = weights.mean()
        if z == 0:
            raise ValueError(f"texts: {text!r} has logit 0 on the planted model (no predicted class)")
        out.append(np.sign(z) * weights / len(tokens))
    return out


def planted_rows(tokenizer, texts) -> dict:
    """The given rows: ``truth`` and ``anti_truth`` (the truth negated: its exact reverse ranking)."""
    truth = true_attributions(tokenizer, texts)
    return {"truth": truth, "anti_truth": [-row for row in truth]}


def _mean(result, method: str, metric: str) -> float:
    return float(result.table.get(method, {}).get(metric, {}).get("mean", math.nan))


def _test(result, a: str, b: str, metric: str) -> dict | None:
    """The paired Wilcoxon test of rows ``a`` and ``b`` on ``metric`` (None where the metric has no
    per-sentence values, as ``agreement``)."""
    if metric not in result.per_instance.get(a, {}) or metric not in result.per_instance.get(b, {}):
        return None
    test = result.compare(a, b, metric)
    return None if test is None else {"p": float(test["p"]), "n": int(test["n"]), "better": test["better"]}


def planted_verdicts(result, metrics=METRICS) -> dict:
    """Per metric of ``result`` (a table with the rows ``truth``, ``anti_truth`` and ``random``): the
    three means; ``truth_first`` / ``anti_last`` by the means (strictly, in the metric's direction);
    the paired Wilcoxon tests truth vs random, random vs anti-truth and truth vs anti-truth
    (``{"p", "n", "better"}``; None for a metric without per-sentence values, ``agreement``);
    ``passes``: truth first and anti-truth last, and every one of those tests significant in that
    direction (by the means alone where there are no tests); ``beaten_by``: ``{row: mean}`` of the
    table's other rows that score better than the truth, by a significant paired test (by more than
    1e-9 where there are no tests); and the caveat of a metric that measures something else
    (:data:`CAVEATS`)."""
    missing = [m for m in CONTROLS if m not in result.methods]
    if missing:
        raise ValueError(f"result lacks the control rows {missing}; run the table with attributions="
                         "planted_rows(...) and the 'random' method")
    out = {}
    for metric in metrics:
        if metric not in HIGHER_IS_BETTER or metric not in result.table["truth"]:
            continue
        sign = 1.0 if HIGHER_IS_BETTER[metric] else -1.0
        means = {m: _mean(result, m, metric) for m in CONTROLS}
        finite = all(math.isfinite(v) for v in means.values())
        truth_first = finite and all(sign * (means["truth"] - means[m]) > 0 for m in ("random", "anti_truth"))
        anti_last = finite and all(sign * (means[m] - means["anti_truth"]) > 0 for m in ("truth", "random"))
        pairs = (("truth", "random"), ("random", "anti_truth"), ("truth", "anti_truth"))
        tests = {f"{a}_vs_{b}": _test(result, a, b, metric) for a, b in pairs}
        if all(t is None for t in tests.values()):
            tests, significant = None, True
        else:
            significant = all(t is not None and t["better"] == name.split("_vs_")[0] for name, t in tests.items())
        beaten_by = {}
        for row in result.methods:
            value = _mean(result, row, metric)
            if row in CONTROLS or not math.isfinite(value) or sign * (value - means["truth"]) <= 1e-9:
                continue
            test = _test(result, row, "truth", metric)
            if test is None or test["better"] == row:
                beaten_by[row] = value
        out[metric] = {"higher_is_better": HIGHER_IS_BETTER[metric], "means": means, "truth_first": bool(truth_first),
                       "anti_last": bool(anti_last), "tests": tests,
                       "passes": bool(truth_first and anti_last and significant), "beaten_by": beaten_by,
                       "caveat": CAVEATS.get(metric)}
    return out


__all__ = ["CAVEATS", "CONTROLS", "FILLERS", "WEIGHTS", "planted_logit", "planted_model", "planted_rows",
           "planted_texts", "planted_verdicts", "true_attributions"]
