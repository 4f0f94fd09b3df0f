"""The soft columns: Soft-NC and Soft-NS (Zhao & Aletras 2023), each sentence's masks drawn from
a seed of its own tokens, draws added until the Monte-Carlo standard error is small enough."""

from __future__ import annotations

import time
import zlib
from dataclasses import replace

import numpy as np
import torch

from hf_attn.core import faithfulness as fm
from hf_attn.batteries.faithfulness.inputs import _trim


def _sentence_generator(settings, method: str, tokens: np.ndarray, kind: str, draw: int) -> torch.Generator:
    """A generator seeded by the sentence's own tokens, the method, the kind of mask and the draw
    (never by its place in a batch)."""
    material = np.random.SeedSequence([settings.seed, zlib.crc32(method.encode()), zlib.crc32(kind.encode()),
                                       zlib.crc32(np.asarray(tokens, dtype=np.int64).tobytes()), draw])
    return torch.Generator().manual_seed(int(material.generate_state(1, dtype=np.uint64)[0] >> 1))


def _soft_null(adapter, batch, variant: str) -> torch.Tensor:
    """ŷ of the null input ``(B, C)``: every input id 0 (the authors' code), or the text's word
    embeddings zeroed (``"embedding"``)."""
    with torch.no_grad():
        if variant == "reference":
            return adapter.logits(replace(batch, input_ids=torch.zeros_like(batch.input_ids))).float().softmax(-1)
        embeddings = adapter.embeddings(batch).detach()
        zeroed = torch.where(batch.content.unsqueeze(-1), torch.zeros_like(embeddings), embeddings)
        return adapter.logits_from_embeddings(batch, zeroed).float().softmax(-1)


def _soft_draws(adapter, batch, instances_of_rows, keep, settings, method, kind, draws: range) -> np.ndarray:
    """ŷ ``(D, B, C)`` under the Bernoulli draws ``draws`` of one method and kind: each element of a
    token's vector (the embedding layer's output, or the word embedding) kept with probability
    ``keep`` ``(B, T)`` (1 on specials and pads), each draw seeded per sentence
    (:func:`_sentence_generator`). Every draw of every sentence of the batch goes through the same
    forwards (the batch repeated once per draw, chunked by the adapter's token budget)."""
    real = batch.attention_mask.bool().cpu()
    size, draws = len(batch), list(draws)
    repeated = batch.select(list(range(size)) * len(draws))

    def transform(hidden, rows=slice(None)):
        mask = torch.ones(hidden.shape, dtype=hidden.dtype)
        for j, big in enumerate(range(len(repeated))[rows]):
            r, draw = big % size, draws[big // size]
            positions = real[r].nonzero().flatten()
            p = keep[r, positions].unsqueeze(-1).expand(len(positions), hidden.shape[-1]).float()
            generator = _sentence_generator(settings, method, instances_of_rows[r].tokens, kind, draw)
            mask[j, positions] = torch.bernoulli(p, generator=generator).to(hidden.dtype)
        return hidden * mask.to(hidden.device)

    with torch.no_grad():
        if settings.soft_variant == "reference":
            logits = adapter.logits_with_embedding_output(repeated, transform)
        else:
            logits = adapter.logits_from_embeddings(repeated, transform(adapter.embeddings(repeated).detach()))
    return logits.float().softmax(-1).cpu().numpy().reshape(len(draws), size, -1)


def _soft_columns(adapter, full_batch, instances, groups, lengths, scores, methods, predicted, p_full, settings) -> dict:
    """Soft-NC / Soft-NS per method (Zhao & Aletras 2023 §3): per sentence the mean over its draws,
    draws added (doubling) while a cell's Monte-Carlo standard error exceeds ``soft_stderr``."""
    start = time.perf_counter()
    n = len(instances)
    null = np.zeros(n)
    draws = {m: {"kept": [[] for _ in range(n)], "removed": [[] for _ in range(n)]} for m in methods}
    batches = []
    for group in groups:
        batch = _trim(full_batch.select(group.tolist()), int(lengths[group].max()), adapter)
        null[group] = _soft_null(adapter, batch, settings.soft_variant)[np.arange(len(group)), predicted[group]].cpu().numpy()
        real = batch.attention_mask.bool().cpu()
        keeps = {}
        for method in methods:
            keep = torch.ones(batch.input_ids.shape, dtype=torch.float64)
            for r, i in enumerate(group):
                row = scores[method][i]
                content = instances[i].content
                p = fm.soft_keep_probabilities(row[content][None], np.ones((1, int(content.sum())), bool))[0]
                values = np.ones(len(row))
                values[content] = p
                keep[r, real[r]] = torch.as_tensor(values)
            keeps[method] = keep
        batches.append((group, batch, keeps))
    clip = settings.soft_variant == "reference"
    done, count = 0, settings.soft_draws
    while True:
        for group, batch, keeps in batches:
            rows = [instances[i] for i in group]
            for method in methods:
                for kind, keep in (("kept", keeps[method]), ("removed", 1 - keeps[method])):
                    if kind == "removed":  # specials and pads stay whole in both masks
                        keep = torch.where(batch.content.cpu(), keep, torch.ones_like(keep))
                    probs = _soft_draws(adapter, batch, rows, keep, settings, method, kind, range(done, count))
                    for r, i in enumerate(group):
                        draws[method][kind][i] += probs[:, r, predicted[i]].astype(float).tolist()
        done = count
        per_sentence, stderr = _soft_values(draws, methods, p_full, null, clip)
        if max(stderr.values()) <= settings.soft_stderr or count >= settings.soft_max_draws:
            break
        count = min(2 * count, settings.soft_max_draws)
    return {"columns": per_sentence, "stderr": stderr, "draws": count, "null": null,
            "seconds": time.perf_counter() - start}


def _soft_values(draws, methods, p_full, null, clip) -> tuple[dict, dict]:
    """Per method and column the per-sentence means over the draws, and each cell's Monte-Carlo
    standard error sqrt(Σ_i var_i / D) / n over the defined sentences."""
    columns, stderr = {}, {}
    for method in methods:
        kept = np.array(draws[method]["kept"]).T  # (D, N)
        removed = np.array(draws[method]["removed"]).T
        ns = fm.soft_normalised_sufficiency(p_full, np.clip(kept, 0, 1), null, clip=clip)
        nc = fm.soft_normalised_comprehensiveness(p_full, np.clip(removed, 0, 1), null, clip=clip)
        columns[method] = {}
        for name, values in (("soft_comprehensiveness", nc), ("soft_sufficiency", ns)):
            defined = np.isfinite(values).all(0)
            mean = np.where(defined, np.nanmean(np.where(np.isfinite(values), values, 0), 0), np.nan)
            columns[method][name] = mean
            d = values.shape[0]
            var = values[:, defined].var(0, ddof=1) if d > 1 else np.zeros(int(defined.sum()))
            stderr[(method, name)] = float(np.sqrt(var.sum() / d) / max(int(defined.sum()), 1))
    return columns, stderr
