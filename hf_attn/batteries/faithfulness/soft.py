"""The soft columns: Soft-NC and Soft-NS (Zhao & Aletras 2023 §3), per sentence: each (sentence,
method) cell draws its Bernoulli masks from a seed of the sentence's own tokens and adds draws until
its own Monte-Carlo standard error is small enough, and the null input keeps the sentence's length
and the position its head reads, so a sentence's values do not depend on the other texts."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import torch

from hf_attn.core import faithfulness as fm
from hf_attn.core.batching import padding_bounded_batches
from hf_attn.batteries.faithfulness.inputs import _draw_generator, _sentence_key, _trim

SOFT_COLUMNS = ("soft_comprehensiveness", "soft_sufficiency")


def _soft_null(adapter, batch, variant: str) -> torch.Tensor:
    """ŷ of the null input ``(B, C)`` (S(x, ŷ, 0) of Zhao & Aletras 2023 §3), each row the sentence's
    own length, attention mask and positions: every id of the sentence 0 (``"reference"``, the
    authors' code, ``torch.zeros_like(input_ids)`` in ``casszhao/multilingual-faith``), pads left
    as pads; or the text's word embeddings zeroed (``"embedding"``).

    A head that reads the last token finds it as the last id that is not the pad id; with every id
    0 on a model whose pad id is 0 (GPT-2, Llama) it would find none and read position 0 (padding
    in a left-padded batch), so its null input is read at the sentence's last real token
    (:meth:`~hf_attn.adapters.transformer.TransformersAdapter.logits_at_last_position`), where that
    head reads the sentence itself. Heads that read the first row (BERT family) read position 0 as
    the authors' code does."""
    with torch.no_grad():
        if variant == "reference":
            ids = batch.input_ids
            null = replace(batch, input_ids=torch.where(batch.attention_mask.bool(), torch.zeros_like(ids), ids))
            last = getattr(adapter, "logits_at_last_position", None)
            if last is not None and getattr(adapter, "left_padding", False):
                return last(null).float().softmax(-1)
            return adapter.logits(null).float().softmax(-1)
        embeddings = adapter.embeddings(batch).detach()
        zeroed = torch.where(batch.content.unsqueeze(-1), torch.zeros_like(embeddings), embeddings)
        return adapter.logits_from_embeddings(batch, zeroed).float().softmax(-1)


def _soft_draws(adapter, batch, rows, keep, settings, kind, draws: range) -> np.ndarray:
    """ŷ ``(D, B, C)`` under the Bernoulli draws ``draws`` of one kind of mask: each element of a
    token's vector (the embedding layer's output, or the word embedding) kept with probability
    ``keep`` ``(B, T)`` (1 on specials and pads); row r's draws seeded by its method and its
    sentence's tokens, ``rows[r]`` = (method, tokens)
    (:func:`~hf_attn.batteries.faithfulness.inputs._sentence_generator`), so a row's masks do not
    depend on the rows beside it. Every draw of every row goes through the same
    forwards (the batch repeated once per draw, chunked by the adapter's token budget)."""
    real = batch.attention_mask.bool().cpu()
    size, draws = len(batch), list(draws)
    repeated = batch.select(list(range(size)) * len(draws))
    positions = [real[r].nonzero().flatten() for r in range(size)]
    chances = [keep[r, positions[r]].float().unsqueeze(-1) for r in range(size)]
    keys = [_sentence_key(settings, method, tokens, kind) for method, tokens in rows]

    def transform(hidden, chunk=slice(None)):
        mask = torch.ones(hidden.shape, dtype=hidden.dtype)
        for j, big in enumerate(range(len(repeated))[chunk]):
            r, draw = big % size, draws[big // size]
            p = chances[r].expand(len(positions[r]), hidden.shape[-1])
            mask[j, positions[r]] = torch.bernoulli(p, generator=_draw_generator(keys[r], draw)).to(hidden.dtype)
        return hidden * mask.to(hidden.device)

    with torch.no_grad():
        if settings.soft_variant == "reference":
            logits = adapter.logits_with_embedding_output(repeated, transform)
        else:
            logits = adapter.logits_from_embeddings(repeated, transform(adapter.embeddings(repeated).detach()))
    return logits.float().softmax(-1).cpu().numpy().reshape(len(draws), size, -1)


def _keep_probabilities(scores: np.ndarray, content: np.ndarray) -> np.ndarray:
    """A sentence's keep probabilities over its real positions (Zhao & Aletras 2023 §3): its text
    tokens' scores min–max normalised over the sentence, 1 on special tokens."""
    values = np.ones(len(scores))
    values[content] = fm.soft_keep_probabilities(scores[content][None], np.ones((1, int(content.sum())), bool))[0]
    return values


def _soft_columns(adapter, full_batch, instances, groups, lengths, scores, methods, predicted, p_full, settings) -> dict:
    """Soft-NC / Soft-NS per method and sentence (Zhao & Aletras 2023 §3): the mean over the
    sentence's draws, each (sentence, method) cell on its own.

    The null input ŷ(0) of every sentence (:func:`_soft_null`, in the table's length groups);
    where ŷ(x) ≤ ŷ(0) both columns are undefined and the cell draws nothing. Every other cell starts
    with ``soft_draws`` draws and doubles them, up to ``soft_max_draws``, while the Monte-Carlo
    standard error of its own mean, sd / √D over its D draws, exceeds ``soft_stderr`` in a column
    asked for. Each round draws the cells still short of the target together — every method's rows
    in one set of length-sorted batches of at most ``batch_tokens`` padded tokens — and all of them
    the same draw numbers, so a cell's draws, its values and its stopping point are those it has
    alone. Returns the per-sentence values, their standard errors and draw counts, and the null
    probabilities."""
    start = time.perf_counter()
    n = len(instances)
    null = np.zeros(n)
    for group in groups:
        batch = _trim(full_batch.select(group.tolist()), int(lengths[group].max()), adapter)
        probs = _soft_null(adapter, batch, settings.soft_variant)
        null[group] = probs[np.arange(len(group)), predicted[group]].cpu().numpy()
    clip = settings.soft_variant == "reference"
    defined = np.maximum(0.0, p_full - null) > 1e-12  # the normaliser 1 − S(x, ŷ, 0) (fm.soft_normalised_*)
    keeps = {m: [_keep_probabilities(np.asarray(scores[m][i], dtype=float), instances[i].content) for i in range(n)]
             for m in methods}
    # a method that scores every text token of a sentence alike (two tokens or more) ranks nothing: its
    # keep probability 1 everywhere would keep the whole text (Soft-NS) and remove it whole (Soft-NC), the
    # best value of both columns; such a cell is undefined, with EQUAL_SCORES as the reason
    unranked = {m: np.array([_all_equal(np.asarray(scores[m][i], dtype=float), instances[i].content)
                             for i in range(n)], dtype=bool) for m in methods}
    samples = {kind: {m: [[] for _ in range(n)] for m in methods} for kind in ("kept", "removed")}
    values = {m: {c: np.full(n, math.nan) for c in SOFT_COLUMNS} for m in methods}
    stderr = {m: {c: np.full(n, math.nan) for c in SOFT_COLUMNS} for m in methods}
    used = {m: np.zeros(n, dtype=np.int64) for m in methods}
    wanted = [c for c in SOFT_COLUMNS if c in settings.metrics] or list(SOFT_COLUMNS)  # the targets that stop
    pending = [(m, i) for m in methods for i in range(n) if defined[i] and not unranked[m][i]]
    done, count, forwards = 0, settings.soft_draws, 0
    while pending:
        forwards += 2 * len(pending) * (count - done)
        _draw_cells(adapter, full_batch, instances, lengths, keeps, pending, range(done, count), settings,
                    samples, predicted)
        cell_values = _cell_values(samples, pending, p_full, null, clip)
        still = []
        for j, (m, i) in enumerate(pending):
            used[m][i] = count
            for c in SOFT_COLUMNS:
                draw_values = cell_values[c][:, j]
                values[m][c][i] = float(draw_values.mean())
                stderr[m][c][i] = _mc_stderr(draw_values)
            errors = [stderr[m][c][i] for c in wanted]
            if count < settings.soft_max_draws and not all(e <= settings.soft_stderr for e in errors):
                still.append((m, i))
        pending, done, count = still, count, min(2 * count, settings.soft_max_draws)
    return {"columns": values, "stderr": stderr, "draws": used, "null": null, "forwards": forwards,
            "seconds": time.perf_counter() - start, "unranked": unranked, "defined": defined}


EQUAL_SCORES = ("the method gives every text token the same score: the soft masks rank nothing (keep probability 1 "
                "everywhere would score the best value of both soft columns)")


def _all_equal(scores: np.ndarray, content: np.ndarray) -> bool:
    """Whether the sentence's text tokens (two or more) all have the same score. A one-token text is
    left to the one-token rule (the same value for every method)."""
    text = scores[content]
    return len(text) >= 2 and bool(np.all(text == text[0]))


def _draw_cells(adapter, full_batch, instances, lengths, keeps, cells, draws: range, settings, samples, predicted
                ) -> None:
    """The draws ``draws`` of every (method, sentence) cell of ``cells``, kept and removed masks, into
    ``samples[kind][method][sentence]`` (ŷ of the sentence's predicted class per draw): the cells'
    rows in length-sorted batches of at most ``batch_tokens`` padded tokens, whatever their method."""
    row_lengths = np.array([lengths[i] for _, i in cells])
    for group in padding_bounded_batches(row_lengths, settings.batch_tokens):
        chosen = [cells[j] for j in group]
        batch = _trim(full_batch.select([i for _, i in chosen]), int(row_lengths[group].max()), adapter)
        real = batch.attention_mask.bool().cpu()
        keep = torch.ones(batch.input_ids.shape, dtype=torch.float64)
        for r, (m, i) in enumerate(chosen):
            keep[r, real[r]] = torch.as_tensor(keeps[m][i])
        rows = [(m, instances[i].tokens) for m, i in chosen]
        content = batch.content.cpu()
        for kind, probability in (("kept", keep), ("removed", 1 - keep)):
            if kind == "removed":  # specials and pads stay whole in both masks
                probability = torch.where(content, probability, torch.ones_like(probability))
            probs = _soft_draws(adapter, batch, rows, probability, settings, kind, draws)
            for r, (m, i) in enumerate(chosen):
                samples[kind][m][i] += probs[:, r, predicted[i]].astype(float).tolist()


def _cell_values(samples, cells, p_full, null, clip) -> dict:
    """Per soft column the per-draw values ``(D, P)`` of the cells ``cells`` (all with D draws):
    Soft-NC from the removed masks, Soft-NS from the kept ones (:mod:`hf_attn.core.faithfulness`)."""
    rows = np.array([i for _, i in cells])
    kept = np.array([samples["kept"][m][i] for m, i in cells]).T
    removed = np.array([samples["removed"][m][i] for m, i in cells]).T
    return {"soft_comprehensiveness": fm.soft_normalised_comprehensiveness(p_full[rows], np.clip(removed, 0, 1),
                                                                           null[rows], clip=clip),
            "soft_sufficiency": fm.soft_normalised_sufficiency(p_full[rows], np.clip(kept, 0, 1), null[rows],
                                                               clip=clip)}


def _mc_stderr(draw_values: np.ndarray) -> float:
    """The Monte-Carlo standard error of one sentence's mean over its draws, sd (ddof 1) / √D; NaN
    for a single draw (nothing to estimate it from)."""
    d = len(draw_values)
    return float(draw_values.std(ddof=1) / math.sqrt(d)) if d > 1 else math.nan


def cell_stderr(stderr: np.ndarray) -> float:
    """The Monte-Carlo standard error of a cell's mean over its defined sentences, each with its own
    draws (independent): √(Σ_i se_i²) / n; NaN where a sentence's is unknown (one draw)."""
    stderr = np.asarray(stderr, dtype=float)
    return float(np.sqrt(np.sum(stderr ** 2)) / len(stderr)) if len(stderr) else math.nan
