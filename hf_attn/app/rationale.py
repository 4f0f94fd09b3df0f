"""The human rationale the explorer shows under an explanation, when one is known.

A model trained by hf-attn records its data set in its ``run.json`` (``"dataset"`` for a
transformers classifier, ``"task"`` for hf_attn's own models; :func:`recorded_dataset`). When that
data set has a bundled rationale data set (:func:`hf_attn.datasets.rationale_dataset_for`: today
SST → ``sst_rationales``, the SST phrase labels turned into word rationales as Carton, Rathore &
Tan 2020 do) and the visitor's sentence is one of that data set's sentences, the Space shows under
the heatmaps one row, the sentence's words with the marked ones highlighted, which split the
sentence comes from and the share of its words marked (:func:`rationale_html`). A sentence that is
not in the data gets one line saying that no human rationale is known for it; a model whose data
set has no rationale data gets nothing.

Matching: the visitor's text and the data's texts are compared after whitespace normalisation
(``" ".join(text.split())``), case-sensitively as the data is written; a text that is all lower case
also matches a data sentence whose lower-cased text it equals (a sentence typed in lower case, or
lower-cased by J&W's SST preprocessing), and the row says the case was ignored. An exact match wins
over a lower-cased one; a sentence that occurs in several splits is reported from the first of
test, validation, train (the other splits are named). The rationale has one mark per whitespace
word, so the words shown are the visitor's own words, one per mark. The lookup of a rationale data
set is built once per process (:func:`rationale_index`, cached per data set name).
"""

from __future__ import annotations

import functools
import html
import json
import logging
import os
from dataclasses import dataclass

import numpy as np

LOGGER = logging.getLogger(__name__)

# A run.json larger than this is not read (a real one takes a few kilobytes; a visitor's Hub repo could
# hold a huge one).
RUN_FILE_MAX_BYTES = 1_000_000
# The title of the row, per rationale data set (another data set: "human rationale (NAME)").
ROW_TITLES = {"sst_rationales": "human rationale (SST phrase labels, Carton et al. 2020)"}
# The order in which splits are searched: the held-out splits first (a model's scores are reported on
# test, and the examples are test sentences).
SPLIT_ORDER = ("test", "validation", "train")
MARK_COLOUR = "#ffd54f"  # the highlight of a marked word (amber, readable in light and dark pages)
# The examples offered for a model with rationale data: test sentences of this many words, with at
# least one word marked and one not, evenly spaced over the split.
EXAMPLE_COUNT = 4
EXAMPLE_WORDS = (6, 20)


def normalised(text: str) -> str:
    """``text`` with its whitespace normalised: its words joined by single spaces."""
    return " ".join(text.split())


def recorded_dataset(folder) -> str | None:
    """The data set a model folder's ``run.json`` records (``"dataset"``, else ``"task"``), or None:
    no folder, no readable ``run.json`` (or one over :data:`RUN_FILE_MAX_BYTES`), no such name."""
    if not isinstance(folder, (str, os.PathLike)) or not str(folder) or not os.path.isdir(folder):
        return None
    path = os.path.join(folder, "run.json")
    try:
        if os.path.getsize(path) > RUN_FILE_MAX_BYTES:
            return None
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
    except (OSError, ValueError):
        return None
    name = (run.get("dataset") or run.get("task")) if isinstance(run, dict) else None
    return name if isinstance(name, str) and name else None


def model_dataset(model) -> str | None:
    """The data set ``model`` was trained on, from the ``run.json`` of the folder it was loaded from
    (``model.config.name_or_path``); None for a model built in memory or a folder without one."""
    return recorded_dataset(getattr(getattr(model, "config", None), "name_or_path", None))


def rationale_name(dataset_name: str | None) -> str | None:
    """The bundled rationale data set for ``dataset_name`` (:func:`hf_attn.datasets.rationale_dataset_for`),
    None when there is none or when the data sets cannot be loaded here (a Space without the
    ``datasets`` package: the explorer then shows no rationale)."""
    if dataset_name is None:
        return None
    try:
        from hf_attn.datasets import rationale_dataset_for
    except ImportError as err:
        LOGGER.warning("no human rationales: the data sets cannot be loaded (%s)", " ".join(str(err).split()))
        return None
    return rationale_dataset_for(dataset_name)


@dataclass(frozen=True)
class RationaleMatch:
    """A visitor's sentence found in a rationale data set: its ``words`` (the visitor's, one per mark),
    the ``marks`` (0/1), the ``split`` and ``index`` it was found at, the other splits holding it,
    and whether it matched only with the case ignored."""

    dataset: str
    split: str
    index: int
    words: tuple[str, ...]
    marks: tuple[int, ...]
    ignoring_case: bool = False
    also_in: tuple[str, ...] = ()

    @property
    def marked(self) -> int:
        return int(sum(self.marks))

    @property
    def share(self) -> float:
        """The share of the words marked."""
        return self.marked / len(self.marks) if self.marks else 0.0


class RationaleIndex:
    """The sentences of one :class:`~hf_attn.data.rationales.RationaleDataset`, looked up by text
    (:meth:`find`, the module docstring's rules)."""

    def __init__(self, dataset):
        self.dataset = dataset
        order = sorted(dataset.split_names,
                       key=lambda s: SPLIT_ORDER.index(s) if s in SPLIT_ORDER else len(SPLIT_ORDER))
        self._exact: dict[str, list[tuple[str, int]]] = {}
        self._lower: dict[str, list[tuple[str, int]]] = {}
        for split in order:
            for i, text in enumerate(dataset.texts(split)):
                text = normalised(text)
                self._exact.setdefault(text, []).append((split, i))
                self._lower.setdefault(text.lower(), []).append((split, i))

    def find(self, text: str) -> RationaleMatch | None:
        """The rationale of ``text`` (whitespace normalised), or None when it is not in the data."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got a {type(text).__name__}")
        text = normalised(text)
        places, ignoring_case = self._exact.get(text), False
        if places is None:
            places, ignoring_case = self._lower.get(text), True
        if not places:
            return None
        split, index = places[0]
        marks = self.dataset.examples(split).rationales[index]
        words = tuple(text.split())
        if len(words) != len(marks):  # lower-casing changed the words (never for SST): no alignment
            return None
        also = tuple(dict.fromkeys(s for s, _ in places[1:] if s != split))
        return RationaleMatch(self.dataset.name, split, index, words, tuple(int(m) for m in marks),
                              ignoring_case, also)

    def examples(self, count: int = EXAMPLE_COUNT, split: str = "test") -> list[str]:
        """``count`` sentences of ``split`` to offer as examples: of :data:`EXAMPLE_WORDS` words, with
        a word marked and a word not, one from the middle of each of ``count`` equal parts of the
        split (deterministic)."""
        if split not in self.dataset.split_names:
            return []
        data = self.dataset.examples(split)
        low, high = EXAMPLE_WORDS
        fit = [i for i, marks in enumerate(data.rationales) if low <= len(marks) <= high and 0 < marks.sum() < len(marks)]
        if not fit or count < 1:
            return []
        count = min(count, len(fit))
        picks = np.unique(((np.arange(count) + 0.5) * len(fit) / count).astype(int))  # the middles of equal parts
        return [data.texts[fit[i]] for i in picks]


@functools.lru_cache(maxsize=4)
def rationale_index(name: str) -> RationaleIndex | None:
    """The :class:`RationaleIndex` of the bundled rationale data set ``name``, built once per process;
    None (logged) when it cannot be loaded here."""
    try:
        from hf_attn.datasets import load

        return RationaleIndex(load(name))
    except (ImportError, OSError, ValueError) as err:
        LOGGER.warning("no human rationales from %s: %s: %s", name, type(err).__name__, " ".join(str(err).split()))
        return None


def row_title(name: str) -> str:
    """The title of the rationale row for the rationale data set ``name``."""
    return ROW_TITLES.get(name, f"human rationale ({name})")


NOT_KNOWN = "No human rationale is known for this sentence: it is not one of the sentences of {name}."
STYLE = ("<style>.hfa-rationale{font-family:sans-serif;font-size:13px;color:#111;background:#fff;padding:6px;"
         "border-radius:6px;margin:6px 0 0 0}.hfa-rationale p{margin:4px 0 0 0}"
         ".hfa-rword{display:inline-block;padding:1px 4px;margin:1px;border:1px solid #ccc;border-radius:3px;"
         f"background:#fff;color:#111}}.hfa-rword[data-marked=\"1\"]{{background:{MARK_COLOUR};font-weight:600}}"
         "</style>")


def match_html(match: RationaleMatch) -> str:
    """The rationale row of ``match``: its title, the words with the marked ones highlighted (each a
    ``span`` with ``data-marked`` 1 or 0), the split it comes from and the share of words marked.
    Every word is HTML-escaped."""
    spans = []
    for word, mark in zip(match.words, match.marks):
        title = "marked: part of the human rationale" if mark else "not marked"
        spans.append(f'<span class="hfa-rword" data-marked="{int(mark)}" title="{title}">{html.escape(word)}</span>')
    where = f"the {match.split} split of {match.dataset} (sentence {match.index + 1})"
    if match.also_in:
        where += f", also in {', '.join(match.also_in)}"
    case = "; matched with the case ignored" if match.ignoring_case else ""
    note = (f"From {where}{case}. {match.marked} of {len(match.marks)} words marked "
            f"({100 * match.share:.0f}%); highlighted: the words the rationale marks.")
    return (f'{STYLE}<div class="hfa-rationale" id="hfa-rationale" data-found="true" '
            f'data-dataset="{html.escape(match.dataset)}" data-split="{html.escape(match.split)}" '
            f'data-marked="{match.marked}" data-words="{len(match.marks)}"><div data-row="rationale">'
            f'<b>{html.escape(row_title(match.dataset))}</b>: {"".join(spans)}</div>'
            f'<p class="hfa-units">{html.escape(note)}</p></div>')


def not_known_html(name: str) -> str:
    """The one line for a sentence that is not in the rationale data set ``name``."""
    return (f'{STYLE}<div class="hfa-rationale" id="hfa-rationale" data-found="false">'
            f'<p>{html.escape(NOT_KNOWN.format(name=name))}</p></div>')


def rationale_html(dataset_name: str | None, text: str) -> str:
    """What the explorer shows under the explanation of ``text`` for a model trained on
    ``dataset_name``: the rationale row (:func:`match_html`) when the sentence is in the data set's
    rationale data, the "no human rationale is known" line when it is not, and nothing (``""``)
    when the data set has no rationale data (or it cannot be loaded here)."""
    name = rationale_name(dataset_name)
    index = rationale_index(name) if name else None
    if index is None:
        return ""
    match = index.find(text)
    return match_html(match) if match else not_known_html(name)


def rationale_examples(dataset_name: str | None, count: int = EXAMPLE_COUNT) -> list[str]:
    """A few test sentences of the rationale data of ``dataset_name`` to offer as examples
    (:meth:`RationaleIndex.examples`); ``[]`` when it has none."""
    name = rationale_name(dataset_name)
    index = rationale_index(name) if name else None
    return index.examples(count) if index is not None else []


def served_dataset(cache, name: str) -> str | None:
    """The data set of the model ``name`` of ``cache`` (a :class:`hf_attn.app.models.ModelCache`)
    without loading or downloading anything: the loaded model's, else a local folder's ``run.json``."""
    loaded = cache.loaded(name) if isinstance(name, str) else None
    if loaded is not None:
        return model_dataset(loaded[0])
    if isinstance(name, str) and name.strip() in cache.policy.models:
        return recorded_dataset(os.path.expanduser(name.strip()))
    return None


__all__ = ["RationaleIndex", "RationaleMatch", "rationale_index", "rationale_html", "rationale_examples",
           "recorded_dataset", "model_dataset", "served_dataset", "match_html", "not_known_html", "row_title",
           "normalised", "ROW_TITLES", "NOT_KNOWN"]
