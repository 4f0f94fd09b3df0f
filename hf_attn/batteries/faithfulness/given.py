"""Anyone's attributions on the table: scores computed elsewhere (captum, inseq, ferret, LXT, your own
code) become rows of the faithfulness table, scored by the same metrics, tests and coverage as the
table's own methods (:func:`hf_attn.batteries.faithfulness.table.run_faithfulness`'s
``attributions=``).

A row is ``{name: [scores of text 0, scores of text 1, …]}``, higher = more important (a signed
method keeps its sign, as the table's own rows do). Per text, at one ``level``:

- ``"token"``: one score per token of the model's tokenization of the text, either the text's own
  tokens only or every token the model reads, special tokens included (what captum and ferret return
  for ``input_ids``: the special tokens' scores are then dropped);
- ``"word"``: one score per whitespace word (``text.split()``, the words human rationales mark); each
  token gets the score of the word its characters fall in (the tokenizer's offsets,
  :func:`hf_attn.batteries.faithfulness.plausibility.content_word_ids`), so the erasure metrics
  delete a word's tokens together; a token in no word gets the text's lowest score.

A text the model reads cut (its length limit) has fewer tokens: token-level scores must then match
what it read; word-level scores of the words it never read are not used.
"""

from __future__ import annotations

import math

import numpy as np

from hf_attn.batteries.faithfulness.settings import METHODS

LEVELS = ("token", "word")


def checked_attributions(attributions, count: int) -> dict:
    """``attributions`` as ``{name: list of (n_i,) float arrays}`` (one per text); a one-line
    ``ValueError`` naming the row or the text at fault otherwise."""
    if attributions is None:
        return {}
    if not isinstance(attributions, dict) or not attributions:
        raise ValueError("attributions must be a non-empty dict {name: one array of scores per text}")
    out = {}
    for name, rows in attributions.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"attribution names must be non-empty strings, got {name!r}")
        if name in METHODS:
            raise ValueError(f"attributions row {name!r} has the name of one of the table's methods; name it "
                             f"otherwise (e.g. 'captum_{name}')")
        if isinstance(rows, (str, bytes)) or not hasattr(rows, "__len__") or len(rows) != count:
            size = len(rows) if hasattr(rows, "__len__") and not isinstance(rows, (str, bytes)) else "no list"
            raise ValueError(f"attributions row {name!r}: {size} score arrays for {count} texts; give one per text")
        arrays = []
        for i, row in enumerate(rows):
            array = np.asarray(row.detach().cpu() if hasattr(row, "detach") else row, dtype=np.float64)
            if array.ndim == 2 and array.shape[0] == 1:  # a batch of one (captum's (1, T))
                array = array[0]
            if array.ndim != 1:
                raise ValueError(f"attributions row {name!r}, text {i}: expected one score per token or word, got "
                                 f"shape {array.shape} (sum over the embedding dimension first)")
            arrays.append(array)
        out[name] = arrays
    return out


def token_scores(adapter, texts: list[str], instances, given: dict, level: str) -> dict:
    """``{name: per text its scores over the real positions}`` (special tokens 0), the layout of the
    table's own rows, from ``given`` at ``level`` (module docstring)."""
    if level not in LEVELS:
        raise ValueError(f"attributions_level must be one of {list(LEVELS)}, got {level!r}")
    word_ids = None
    if level == "word":
        from hf_attn.batteries.faithfulness.plausibility import content_word_ids

        word_ids = content_word_ids(adapter, texts, instances)
    out = {}
    for name, rows in given.items():
        converted = []
        for i, (row, instance) in enumerate(zip(rows, instances)):
            content = np.asarray(instance.content, dtype=bool)
            full = np.zeros(len(content))
            if level == "token":
                if row.size == len(content):
                    full[content] = row[content]
                elif row.size == int(content.sum()):
                    full[content] = row
                else:
                    raise ValueError(f"attributions row {name!r}, text {i}: {row.size} token scores, but the model "
                                     f"reads {int(content.sum())} tokens of the text ({len(content)} with its "
                                     "special tokens); give one of the two, or attributions_level='word'")
            else:
                words = len(texts[i].split())
                if row.size != words:
                    raise ValueError(f"attributions row {name!r}, text {i}: {row.size} word scores but the text has "
                                     f"{words} whitespace words")
                ids = word_ids[i]
                floor = float(row.min()) if row.size and np.isfinite(row).all() else math.nan
                full[content] = [row[w] if w is not None else floor for w in ids]
            converted.append(full)
        out[name] = converted
    return out


def given_cost() -> dict:
    """The cost columns of a given row: computed elsewhere, nothing here."""
    return {"seconds": 0.0, "seconds_per_sentence": 0.0, "peak_mb_per_sentence": 0.0,
            "given": "scores given by the caller, computed elsewhere"}


__all__ = ["LEVELS", "checked_attributions", "given_cost", "token_scores"]
