"""Human rationales: texts, labels and a 0/1 mark per whitespace word saying whether people (or the
treebank's phrase labels) point at that word as a reason for the label. Plausibility metrics
(:mod:`hf_attn.core.plausibility`) compare an explanation's word scores with these marks.

Every loader returns one :class:`RationaleDataset`:

* :func:`load_sst_rationales` — binary SST (the bundled PTB trees, 6920 / 872 / 1821 sentences) with
  token rationales derived from the sentiment label of every phrase, by the procedure of Carton,
  Rathore & Tan (2020), ``scripts/download_and_process_sst.py`` of BoulderDS/evaluating-human-rationales
  (MIT) with the binarisation of their ``dataset/dataset.py`` (:func:`sst_phrase_strengths`).
* :func:`load_eraser` — a local folder in ERASER's format (DeYoung et al. 2020; ``docs/`` or
  ``docs.jsonl`` + ``{train,val,test}.jsonl`` of annotations with evidence spans, as read by
  ``rationale_benchmark/utils.py`` of jayded/eraserbenchmark).
* :func:`load_hatexplain` — HateXplain's ``dataset.json`` (Mathew et al. 2021; hate-alert/HateXplain).
* :func:`load_label_studio` — a Label Studio JSON export with character spans.

A text is its words joined by single spaces, so ``text.split()`` gives the words the marks belong
to. A source token holding whitespace (three SST leaves hold a no-break space, ``8 1\\/2``) becomes
several words that share its mark; an empty token (ERASER's ``split(' ')`` of a doubled space)
becomes none. A malformed file raises a one-line :class:`~hf_attn.data.task.DataError` (a
``ValueError``) naming the file and the line or record at fault.
"""

from __future__ import annotations

import collections
import json
import os
import re
from dataclasses import dataclass, field

import numpy as np

from hf_attn.data.task import DataError
from hf_attn.data.tasks import _PTB_ESCAPES, _decoded, _sst_lines

SPLIT_ALIASES = {"dev": "validation", "valid": "validation", "val": "validation"}
VOTES = ("union", "majority")

# Carton, Rathore & Tan (2020), scripts/download_and_process_sst.py (BoulderDS/evaluating-human-rationales):
SST_NEUTRAL_LABEL = 2  # root label 2 sentences are skipped ("Skip neutral items"); labels < 2 neg, > 2 pos
SST_LABEL_CENTRE = 2.0  # normalize_label(label) = (label - 2) / 2: phrase sentiment on [-1, 1]
SST_LABEL_HALF_RANGE = 2.0
# ... and dataset/dataset.py, binarize_rationale: a word is in the rationale when its phrase's
# strength |normalize_label| is >= 0.5, i.e. when the phrase's label is not neutral (2).
SST_RATIONALE_THRESHOLD = 0.5


# ----------------------------------------------------------------------------------------------
# the typed object


@dataclass(frozen=True)
class RationaleExamples:
    """One split: ``ids``, ``texts`` (words joined by single spaces), ``labels`` (indices into the
    dataset's label names) and ``rationales`` (one ``(W_i,)`` int8 0/1 array per text, W_i =
    ``len(texts[i].split())``), all of length N."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    labels: tuple[int, ...]
    rationales: tuple[np.ndarray, ...]

    def __post_init__(self):
        n = len(self.texts)
        if not (len(self.ids) == len(self.labels) == len(self.rationales) == n):
            raise ValueError(f"ids, texts, labels, rationales: {len(self.ids)}, {n}, {len(self.labels)}, "
                             f"{len(self.rationales)} entries; they must be as many")
        for i, (text, marks) in enumerate(zip(self.texts, self.rationales)):
            if len(text.split()) != len(marks):
                raise ValueError(f"example {i} ({self.ids[i]}): {len(text.split())} words but "
                                 f"{len(marks)} rationale marks")

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class RationaleDataset:
    """A data set with human rationales: its splits (each a :class:`RationaleExamples`), its label
    names (index = label id), where it came from and notes on what was left out. Read like
    :class:`hf_attn.datasets.TextDataset`: ``texts(split)``, ``labels(split)``, ``to_pandas(split)``,
    plus ``rationales(split)`` and ``ids(split)``."""

    name: str
    label_names: list[str]
    splits: dict[str, RationaleExamples]
    source: str
    notes: list[str] = field(default_factory=list)
    is_pair: bool = False  # single texts; the attribute TextDataset callers test

    @property
    def split_names(self) -> list[str]:
        return list(self.splits)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    def examples(self, split: str = "test") -> RationaleExamples:
        """The :class:`RationaleExamples` of ``split`` (``dev`` / ``val`` also name ``validation``)."""
        name = SPLIT_ALIASES.get(split, split)
        if name not in self.splits:
            raise KeyError(f"{self.name} has no split {split!r}; its splits: {', '.join(self.splits)}")
        return self.splits[name]

    def __getitem__(self, split: str):
        """``split`` as a ``datasets.Dataset`` with columns ``id``, ``text``, ``label``, ``rationale``."""
        from datasets import Dataset

        data = self.examples(split)
        return Dataset.from_dict({"id": list(data.ids), "text": list(data.texts), "label": list(data.labels),
                                  "rationale": [m.tolist() for m in data.rationales]})

    def texts(self, split: str = "test") -> list[str]:
        """The texts of ``split``, in order (words joined by single spaces)."""
        return list(self.examples(split).texts)

    def labels(self, split: str = "test") -> list[int]:
        """The gold labels of ``split`` (indices into :attr:`label_names`)."""
        return list(self.examples(split).labels)

    def rationales(self, split: str = "test") -> list[np.ndarray]:
        """One ``(W,)`` int8 0/1 array per text of ``split``: 1 marks a word of the human rationale."""
        return [m.copy() for m in self.examples(split).rationales]

    def ids(self, split: str = "test") -> list[str]:
        """The examples' ids in their source (SST: ``split-line``, ERASER: annotation id, …)."""
        return list(self.examples(split).ids)

    def to_pandas(self, split: str = "test"):
        """``split`` as a DataFrame: ``id``, ``text``, ``label``, ``label_name``, ``rationale`` (list
        of 0/1 per word), ``words`` and ``marked`` (how many words are marked)."""
        import pandas as pd

        data = self.examples(split)
        return pd.DataFrame({"id": list(data.ids), "text": list(data.texts), "label": list(data.labels),
                             "label_name": [self.label_names[i] for i in data.labels],
                             "rationale": [m.tolist() for m in data.rationales],
                             "words": [len(m) for m in data.rationales],
                             "marked": [int(m.sum()) for m in data.rationales]})

    def __len__(self) -> int:
        return sum(len(d) for d in self.splits.values())

    def __repr__(self) -> str:
        sizes = ", ".join(f"{split} {len(data):,}" for split, data in self.splits.items())
        return f"RationaleDataset({self.name!r}: {sizes}; labels {', '.join(self.label_names)})"


def rationale_statistics(dataset: RationaleDataset) -> dict[str, dict]:
    """Per split: ``sentences``, ``words``, ``marked_words``, ``share_marked`` (marked / all words),
    ``mean_share_marked`` (the mean over texts of each text's marked share, Carton et al.'s
    ``mean_rationale_percent``), ``mean_marked_words``, ``without_rationale`` (texts with no marked
    word), ``fully_marked`` (every word marked), and ``labels`` (texts per label name)."""
    out = {}
    for split, data in dataset.splits.items():
        marked = np.array([int(m.sum()) for m in data.rationales], dtype=np.int64)
        words = np.array([len(m) for m in data.rationales], dtype=np.int64)
        n = len(words)
        out[split] = {
            "sentences": n,
            "words": int(words.sum()),
            "marked_words": int(marked.sum()),
            "share_marked": float(marked.sum() / words.sum()) if n else None,
            "mean_share_marked": float(np.mean(marked / words)) if n else None,
            "mean_marked_words": float(marked.mean()) if n else None,
            "without_rationale": int((marked == 0).sum()),
            "fully_marked": int((marked == words).sum()),
            "labels": {name: int(sum(1 for y in data.labels if y == i)) for i, name in enumerate(dataset.label_names)},
        }
    return out


# ----------------------------------------------------------------------------------------------
# shared pieces


def _words(tokens, marks) -> tuple[str, np.ndarray]:
    """Source tokens and their marks → (text, (W,) int8 marks) over whitespace words: a token holding
    whitespace becomes several words sharing its mark; an empty token becomes none."""
    words, out = [], []
    for token, mark in zip(tokens, marks):
        pieces = str(token).split()
        words.extend(pieces)
        out.extend([int(mark)] * len(pieces))
    return " ".join(words), np.asarray(out, dtype=np.int8)


def _vote(lists: list[np.ndarray], vote: str, length: int) -> np.ndarray:
    """Several annotators' 0/1 marks → one: ``union`` (any annotator) or ``majority`` (more than half)."""
    if not lists:
        return np.zeros(length, dtype=np.int8)
    stacked = np.stack(lists).astype(np.int64)
    if vote == "union":
        return (stacked.sum(0) > 0).astype(np.int8)
    return (2 * stacked.sum(0) > len(lists)).astype(np.int8)


def _check_vote(vote: str) -> None:
    if vote not in VOTES:
        raise ValueError(f"vote must be one of {VOTES}, got {vote!r}")


def _json_file(path: str):
    try:
        return json.loads(_decoded(path))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}, line {err.lineno}: could not parse ({err.msg})") from err


def _encode(raw: dict[str, list[tuple[str, str, np.ndarray, str]]], name: str, source: str,
            label_names: list[str] | None, notes: list[str]) -> RationaleDataset:
    """``{split: [(id, text, marks, label string)]}`` → a :class:`RationaleDataset` (label names
    sorted unless given)."""
    names = label_names or sorted({row[3] for rows in raw.values() for row in rows})
    index = {n: i for i, n in enumerate(names)}
    splits = {}
    for split, rows in raw.items():
        splits[split] = RationaleExamples(tuple(r[0] for r in rows), tuple(r[1] for r in rows),
                                          tuple(index[r[3]] for r in rows), tuple(r[2] for r in rows))
    return RationaleDataset(name, list(names), splits, source, notes)


# ----------------------------------------------------------------------------------------------
# SST: phrase labels → token rationales (Carton, Rathore & Tan 2020)


def parse_labelled_tree(line: str, where: str = "tree"):
    """One SST PTB tree → nested ``(label, children, leaf_text)`` tuples (``leaf_text`` None for an
    inner node, ``children`` empty for a leaf). Leaf text keeps inner spaces (the no-break spaces of
    three SST leaves); ``where`` names the tree in errors."""
    stack, root = [], None
    for chunk in re.findall(r"\(|\)|[^()]+", line.strip()):
        if chunk == "(":
            stack.append([None, [], None])
        elif chunk == ")":
            if not stack or stack[-1][0] is None:
                raise DataError(f"{where}: not a PTB tree (unbalanced ')' or a node without a label)")
            label, children, text = stack.pop()
            node = (label, tuple(children), text)
            if stack:
                stack[-1][1].append(node)
            elif root is None:
                root = node
            else:
                raise DataError(f"{where}: not a PTB tree (text after the root)")
        elif chunk.strip():
            if not stack or stack[-1][0] is not None or stack[-1][1]:
                raise DataError(f"{where}: not a PTB tree (text {chunk.strip()[:30]!r} outside a node label)")
            head, _, text = chunk.lstrip().partition(" ")
            if not head.isdigit() or not 0 <= int(head) <= 4:
                raise DataError(f"{where}: not a PTB tree (label {head[:10]!r} is not 0-4)")
            stack[-1][0] = int(head)
            stack[-1][2] = text.strip() or None
    if stack or root is None:
        raise DataError(f"{where}: not a PTB tree (unbalanced '(')")
    return root


def _strength(label: int) -> float:
    """``abs(normalize_label(label))`` of download_and_process_sst.py: 0 (neutral), 0.5, 1 (extreme)."""
    return abs((label - SST_LABEL_CENTRE) / SST_LABEL_HALF_RANGE)


def sst_phrase_strengths(tree) -> tuple[list[str], list[float]]:
    """Carton, Rathore & Tan's token rationale of one labelled tree (``scripts/
    download_and_process_sst.py``, functions ``count_leaves_and_extreme_descendants``,
    ``explanatory_phrase``, ``assemble_rationale_phrases``): a node is an *explanatory phrase* when
    it is a leaf, or when its sentiment is strictly more extreme (``|(label - 2) / 2|``) than that of
    its most positive and of its most negative descendant (a phrase whose sentiment its parts do not
    explain). Walking down from the root, the first explanatory node on each path is a phrase; each
    of its leaves gets the phrase's strength ``|(label - 2) / 2|`` ∈ {0, 0.5, 1}. Returns (leaf texts,
    strengths), both of length L; ``dataset/dataset.py`` (``binarize_rationale``) then marks the
    leaves whose strength is ≥ :data:`SST_RATIONALE_THRESHOLD`."""
    leaves, strengths = [], []

    def extremes(node) -> tuple[int, int]:  # (min, max) label over the node's descendants (a leaf: its own)
        label, children, _ = node
        if not children:
            return label, label
        low = min(c[0] for c in children)
        high = max(c[0] for c in children)
        for child in children:
            cl, ch = extremes(child)
            low, high = min(low, cl), max(high, ch)
        return low, high

    def leaf_texts(node) -> list[str]:
        return [node[2] or ""] if not node[1] else [t for c in node[1] for t in leaf_texts(c)]

    def assemble(node) -> None:
        label, children, _ = node
        explanatory = not children
        if children:
            low, high = extremes(node)
            explanatory = _strength(label) > _strength(high) and _strength(label) > _strength(low)
        if explanatory:
            texts = leaf_texts(node)
            leaves.extend(texts)
            strengths.extend([_strength(label)] * len(texts))
        else:
            for child in children:
                assemble(child)

    assemble(tree)
    return leaves, strengths


def _sst_token(leaf: str) -> str:
    # the bundled sst dataset's spelling of a leaf (hf_attn.data.tasks.parse_ptb_tree): bracket escapes undone
    return _PTB_ESCAPES.get(leaf, leaf)


def sst_tree_rationale(line: str, where: str = "tree") -> tuple[int, str, np.ndarray]:
    """One SST PTB tree → (root label 0-4, text, ``(W,)`` int8 marks): the leaves spelled as
    ``load("sst")`` spells them, each marked when its phrase's strength (:func:`sst_phrase_strengths`)
    is ≥ :data:`SST_RATIONALE_THRESHOLD`; a leaf holding a no-break space gives several words."""
    tree = parse_labelled_tree(line, where=where)
    leaves, strengths = sst_phrase_strengths(tree)
    text, marks = _words([_sst_token(leaf) for leaf in leaves], [s >= SST_RATIONALE_THRESHOLD for s in strengths])
    return tree[0], text, marks


def load_sst_rationales() -> RationaleDataset:
    """Binary SST from the bundled PTB trees (neutral roots dropped, 0-1 → negative, 3-4 → positive:
    6920 / 872 / 1821 sentences) with a 0/1 rationale per whitespace word by Carton, Rathore & Tan's
    procedure (:func:`sst_phrase_strengths`, binarised at ≥ :data:`SST_RATIONALE_THRESHOLD`). The
    words are spelled as in ``hf_attn.datasets.load("sst")`` (``-LRB-`` → ``(``, case kept; Carton et al.
    lowercase their ``text`` column but keep ``original_text``, and the marks do not depend on case),
    except that the leaves holding a no-break space (``8 1\\/2``), which ``load("sst")`` skips, are kept
    as two words sharing the leaf's mark. Ids are ``split-line`` (1-based line of the tree file)."""
    raw: dict[str, list] = {}
    for split in ("train", "validation", "test"):
        rows = []
        for number, line in enumerate(_sst_lines(split), start=1):
            label, text, rationale = sst_tree_rationale(line, where=f"sst {split} tree {number}")
            if label == SST_NEUTRAL_LABEL:
                continue
            rows.append((f"{split}-{number}", text, rationale, "positive" if label > 2 else "negative"))
        raw[split] = rows
    note = ("token rationales from SST's phrase labels by Carton, Rathore & Tan (2020), "
            "BoulderDS/evaluating-human-rationales scripts/download_and_process_sst.py, binarised at >= 0.5 "
            "as their dataset/dataset.py")
    return _encode(raw, "sst_rationales", "bundled SST PTB trees", ["negative", "positive"], [note])


# ----------------------------------------------------------------------------------------------
# ERASER (DeYoung et al. 2020)

ERASER_SPLITS = {"train": "train", "val": "validation", "test": "test"}


def _eraser_documents(folder: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """ERASER's documents, flattened to tokens as ``load_flattened_documents`` (utils.py): from
    ``docs/`` (blank lines and empty tokens dropped) or ``docs.jsonl`` (``split('\\n')`` then
    ``split(' ')`` per line, nothing dropped). Returns (tokens per docid, where each doc was read)."""
    docs_dir, docs_file = os.path.join(folder, "docs"), os.path.join(folder, "docs.jsonl")
    if os.path.exists(docs_file) and os.path.exists(docs_dir):
        raise DataError(f"{folder}: both docs.jsonl and docs/ exist; ERASER reads one of them (remove the other)")
    documents, where = {}, {}
    if os.path.exists(docs_file):
        for number, line in enumerate(_decoded(docs_file).split("\n"), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{docs_file}, line {number}: could not parse ({err.msg}, column {err.colno})") from err
            if not isinstance(record, dict) or not isinstance(record.get("docid"), str) \
                    or not isinstance(record.get("document"), str):
                raise DataError(f"{docs_file}, line {number}: expected {{\"docid\": str, \"document\": str}}")
            documents[record["docid"]] = [t for s in record["document"].split("\n") for t in s.strip().split(" ")]
            where[record["docid"]] = f"{docs_file}, line {number}"
    elif os.path.isdir(docs_dir):
        for docid in sorted(os.listdir(docs_dir)):
            path = os.path.join(docs_dir, docid)
            lines = [s.strip() for s in _decoded(path).split("\n")]
            documents[docid] = [t for s in lines if s for t in s.split(" ") if t]
            where[docid] = path
    else:
        raise FileNotFoundError(f"{folder}: no docs/ folder or docs.jsonl (ERASER's document store)")
    return documents, where


def _eraser_annotation(record, documents: dict[str, list[str]], where: str) -> tuple[str, str, np.ndarray, str]:
    if not isinstance(record, dict) or not isinstance(record.get("annotation_id"), str):
        raise DataError(f"{where}: expected an annotation object with an annotation_id string")
    if not isinstance(record.get("classification"), str):
        raise DataError(f"{where}: annotation {record['annotation_id']!r} has no classification string")
    groups = record.get("evidences")
    if not isinstance(groups, list) or not all(isinstance(g, list) and all(isinstance(e, dict) for e in g)
                                               for g in groups):
        raise DataError(f"{where}: evidences must be a list of evidence groups (lists of evidence objects)")
    evidences = [e for g in groups for e in g]
    docids = record.get("docids") or sorted({e.get("docid") for e in evidences}) or [record["annotation_id"]]
    if len(docids) != 1:
        raise DataError(f"{where}: annotation {record['annotation_id']!r} has {len(docids)} documents "
                        f"({', '.join(map(str, docids[:3]))}); only single-document tasks are read")
    docid = docids[0]
    if docid not in documents:
        raise DataError(f"{where}: document {docid!r} is not in the document store")
    tokens = documents[docid]
    marks = np.zeros(len(tokens), dtype=np.int8)
    for e in evidences:  # every evidence of every group, as metrics.py PositionScoredDocument.from_results
        start, end = e.get("start_token"), e.get("end_token")
        if e.get("docid") != docid:
            raise DataError(f"{where}: evidence in document {e.get('docid')!r}, not {docid!r}")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(tokens)):
            raise DataError(f"{where}: evidence tokens [{start}, {end}) outside document {docid!r} of "
                            f"{len(tokens)} tokens")
        marks[start:end] = 1
    text, rationale = _words(tokens, marks)
    if not text:
        raise DataError(f"{where}: document {docid!r} has no words")
    return record["annotation_id"], text, rationale, record["classification"]


def load_eraser(path: str | os.PathLike, name: str | None = None) -> RationaleDataset:
    """A local ERASER data folder (jayded/eraserbenchmark ``rationale_benchmark/utils.py``:
    ``load_datasets``, ``load_documents``): ``{train,val,test}.jsonl`` (those present; ``val`` becomes
    ``validation``), one annotation per line — ``annotation_id``, ``classification``, ``evidences``
    (groups of ``{docid, start_token, end_token, text}``, end exclusive, over the document's flattened
    tokens), optional ``docids`` / ``query`` — and the documents in ``docs/`` or ``docs.jsonl``. The
    text is the annotation's document (its ``docids``, else its evidences' document, else the
    document named like the annotation — ERASER's movie reviews); the rationale marks every token of
    every evidence (all groups, as ERASER's scorer). Multi-document annotations (e-SNLI) are refused."""
    folder = os.fspath(path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: not a folder (an ERASER data folder holds train/val/test.jsonl and docs)")
    files = {split: os.path.join(folder, f"{file}.jsonl") for file, split in ERASER_SPLITS.items()}
    files = {split: f for split, f in files.items() if os.path.exists(f)}
    if not files:
        raise FileNotFoundError(f"{folder}: no train.jsonl, val.jsonl or test.jsonl")
    documents, _ = _eraser_documents(folder)
    raw = {}
    for split, file in files.items():
        rows, seen = [], set()
        for number, line in enumerate(_decoded(file).split("\n"), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{file}, line {number}: could not parse ({err.msg}, column {err.colno})") from err
            row = _eraser_annotation(record, documents, f"{file}, line {number}")
            if row[0] in seen:
                raise DataError(f"{file}, line {number}: annotation_id {row[0]!r} appears twice")
            seen.add(row[0])
            rows.append(row)
        raw[split] = rows
    return _encode(raw, name or os.path.basename(os.path.normpath(folder)), folder, None, [])


# ----------------------------------------------------------------------------------------------
# HateXplain (Mathew et al. 2021)

HATEXPLAIN_SPLITS = {"train": "train", "val": "validation", "test": "test"}
HATEXPLAIN_NORMAL = "normal"


def _hatexplain_label(annotators, where: str) -> str | None:
    """The majority label of a post (Preprocess/dataCollect.py ``get_annotated_data``: the most
    frequent annotator label; ``undecided`` — None here — when it was given only once or ties)."""
    if not isinstance(annotators, list) or not annotators or not all(
            isinstance(a, dict) and isinstance(a.get("label"), str) for a in annotators):
        raise DataError(f"{where}: annotators must be a non-empty list of objects with a label string")
    counts = collections.Counter(a["label"] for a in annotators).most_common()
    if counts[0][1] == 1 or (len(counts) > 1 and counts[1][1] == counts[0][1]):
        return None
    return counts[0][0]


def load_hatexplain(path: str | os.PathLike, divisions: str | os.PathLike | None = None,
                    vote: str = "union", two_classes: bool = False) -> RationaleDataset:
    """HateXplain's ``dataset.json`` (a file, or a folder holding it): ``{post_id: {post_tokens,
    annotators: [{label, …}], rationales: [[0/1 per token], …]}}``. The label is the annotators'
    majority (``Preprocess/dataCollect.py``); posts without one (``undecided``) are left out and
    counted in :attr:`RationaleDataset.notes`. The rationale is the ``union`` of the annotators' lists
    (``vote="union"``, what HateXplain scores plausibility against: Explainability_Calculation_NB.ipynb,
    ``convert_to_eraser_format``) or a word marked by more than half of them (``"majority"``); a post
    whose majority label is ``normal`` gets no rationale (HateXplain leaves those posts out of the
    plausibility scores), so the metrics count it as a text without one. ``divisions`` (default:
    ``post_id_divisions.json`` beside the file, if there) splits the posts into train / val / test;
    without it every post is in ``test``. ``two_classes``: hatespeech and offensive → ``toxic``,
    normal → ``non-toxic`` (their ``classes_two.npy``)."""
    _check_vote(vote)
    file = os.fspath(path)
    if os.path.isdir(file):
        file = os.path.join(file, "dataset.json")
    if not os.path.isfile(file):
        raise FileNotFoundError(f"{file}: no such file (HateXplain's Data/dataset.json)")
    if divisions is None and os.path.exists(os.path.join(os.path.dirname(file), "post_id_divisions.json")):
        divisions = os.path.join(os.path.dirname(file), "post_id_divisions.json")
    split_of = {}
    if divisions is not None:
        table = _json_file(os.fspath(divisions))
        if not isinstance(table, dict) or not all(isinstance(v, list) for v in table.values()):
            raise DataError(f"{divisions}: expected {{\"train\": [post ids], \"val\": […], \"test\": […]}}")
        for key, ids in table.items():
            if key not in HATEXPLAIN_SPLITS:
                raise DataError(f"{divisions}: unknown split {key!r} (expected train, val, test)")
            split_of.update({str(i): HATEXPLAIN_SPLITS[key] for i in ids})
    posts = _json_file(file)
    if not isinstance(posts, dict):
        raise DataError(f"{file}: expected an object {{post_id: post}}, got a JSON {type(posts).__name__}")
    raw: dict[str, list] = {s: [] for s in (HATEXPLAIN_SPLITS.values() if split_of else ["test"])}
    undecided = 0
    for number, (post_id, post) in enumerate(posts.items(), start=1):
        where = f"{file}, record {number} (post {post_id})"
        if not isinstance(post, dict):
            raise DataError(f"{where}: expected an object with post_tokens, annotators, rationales")
        tokens, lists = post.get("post_tokens"), post.get("rationales", [])
        if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
            raise DataError(f"{where}: post_tokens must be a non-empty list of strings")
        if not isinstance(lists, list) or not all(
                isinstance(r, list) and len(r) == len(tokens) and all(v in (0, 1) for v in r) for r in lists):
            raise DataError(f"{where}: rationales must be lists of 0/1, one per post token ({len(tokens)})")
        label = _hatexplain_label(post.get("annotators"), where)
        if label is None:
            undecided += 1
            continue
        marks = _vote([np.asarray(r, dtype=np.int8) for r in lists], vote, len(tokens))
        if label == HATEXPLAIN_NORMAL:
            marks = np.zeros(len(tokens), dtype=np.int8)
        if two_classes:
            label = "non-toxic" if label == HATEXPLAIN_NORMAL else "toxic"
        text, rationale = _words(tokens, marks)
        if not text:
            raise DataError(f"{where}: post_tokens hold no words")
        if split_of and post_id not in split_of:
            raise DataError(f"{where}: post id not in any split of {divisions}")
        raw[split_of.get(post_id, "test")].append((post_id, text, rationale, label))
    notes = [f"{undecided} post(s) without a majority label (HateXplain's 'undecided') left out",
             f"rationale: {vote} of the annotators' lists; posts labelled normal have none"]
    return _encode(raw, "hatexplain", file, None, notes)


# ----------------------------------------------------------------------------------------------
# Label Studio span exports


def _span_marks(text: str, spans: list[tuple[int, int]]) -> np.ndarray:
    """0/1 per whitespace word of ``text``: 1 when the word's characters overlap a ``[start, end)`` span."""
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    return np.asarray([int(any(ws < end and start < we for start, end in spans)) for ws, we in words], dtype=np.int8)


def _studio_annotation(annotation, text: str, rationale_labels, where: str) -> tuple[list, list]:
    """One annotation → (its ``[start, end)`` rationale spans, its choices)."""
    results = annotation.get("result", []) if isinstance(annotation, dict) else None
    if not isinstance(results, list):
        raise DataError(f"{where}: an annotation must be an object with a result list")
    spans, choices = [], []
    for j, result in enumerate(results):
        value = result.get("value") if isinstance(result, dict) else None
        if not isinstance(value, dict):
            raise DataError(f"{where}, result {j}: expected an object with a value object")
        if "choices" in value:
            choices.extend(str(c) for c in value["choices"])
            continue
        if "start" not in value and "end" not in value:
            continue  # other result types (ratings, text areas) carry no span
        start, end = value.get("start"), value.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
            raise DataError(f"{where}, result {j}: span [{start}, {end}) outside the text of {len(text)} characters")
        if "text" in value and value["text"] != text[start:end]:
            raise DataError(f"{where}, result {j}: span text {value['text'][:30]!r} is not the text at "
                            f"[{start}, {end}) ({text[start:end][:30]!r})")
        labels = value.get("labels", [])
        if rationale_labels is None or set(labels) & set(rationale_labels):
            spans.append((start, end))
    return spans, choices


def load_label_studio(path: str | os.PathLike, text_key: str = "text", label_key: str = "label",
                      rationale_labels: list[str] | None = None, vote: str = "union",
                      name: str | None = None) -> RationaleDataset:
    """A Label Studio JSON export: a list of tasks ``{"data": {text_key: …, label_key: …},
    "annotations": [{"result": [{"value": {"start", "end", "text", "labels"}}, …]}]}``. Each span
    (of any label, or of one of ``rationale_labels``) marks the words its characters overlap; the
    text's label is ``data[label_key]`` or else the annotations' majority ``choices``. Cancelled
    annotations are skipped; several annotations combine by ``vote`` (``union`` or ``majority``).
    Tasks without an annotation, or whose annotators' choices tie, are left out and counted in
    :attr:`RationaleDataset.notes`. Every task goes to the ``test`` split."""
    _check_vote(vote)
    file = os.fspath(path)
    tasks = _json_file(file)
    if not isinstance(tasks, list):
        raise DataError(f"{file}: expected a JSON array of tasks (Label Studio's JSON export)")
    rows, unannotated, undecided = [], 0, 0
    for number, task in enumerate(tasks):
        where = f"{file}, task {number}"
        data = task.get("data") if isinstance(task, dict) else None
        if not isinstance(data, dict) or not isinstance(data.get(text_key), str) or not data[text_key].strip():
            raise DataError(f"{where}: expected a data object with a non-empty {text_key!r} string")
        text = data[text_key]
        annotations = task.get("annotations", [])
        if not isinstance(annotations, list):
            raise DataError(f"{where}: annotations must be a list")
        marks, choices = [], []
        for a, annotation in enumerate(annotations):
            if isinstance(annotation, dict) and annotation.get("was_cancelled"):
                continue
            spans, chosen = _studio_annotation(annotation, text, rationale_labels, f"{where}, annotation {a}")
            marks.append(_span_marks(text, spans))
            choices.extend(chosen[:1])
        if not marks:
            unannotated += 1
            continue
        label = data.get(label_key)
        if label is None:
            counts = collections.Counter(choices).most_common()
            if not counts:
                raise DataError(f"{where}: no label: neither data[{label_key!r}] nor a choices result")
            if len(counts) > 1 and counts[1][1] == counts[0][1]:
                undecided += 1
                continue
            label = counts[0][0]
        task_id = str(task.get("id", number))
        text_out, rationale = _words(text.split(), _vote(marks, vote, len(text.split())))
        rows.append((task_id, text_out, rationale, str(label)))
    notes = [f"{unannotated} task(s) without an annotation and {undecided} with tied label choices left out",
             f"rationale: {vote} of the annotations' spans"]
    return _encode({"test": rows}, name or os.path.splitext(os.path.basename(file))[0], file, None, notes)


__all__ = ["RationaleDataset", "RationaleExamples", "load_eraser", "load_hatexplain", "load_label_studio",
           "load_sst_rationales", "parse_labelled_tree", "rationale_statistics", "sst_phrase_strengths",
           "sst_tree_rationale", "SST_RATIONALE_THRESHOLD"]
