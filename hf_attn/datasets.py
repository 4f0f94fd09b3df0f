"""The data sets of hf_attn, for notebooks and scripts: the bundled SST (offline), SST-5, AG News, IMDB,
SNLI, a local CSV / JSON(L) file or folder, or a Hub dataset id, loaded and checked exactly as
``hf-attn train --dataset NAME`` loads them (:func:`hf_attn.data.tasks.load_task`)::

    import hf_attn
    sst = hf_attn.datasets.load("sst")     # binary SST, Jain & Wallace's split, bundled: no network
    texts = sst.texts("test")[:100]        # list[str], what Explainer.explain / .jw / .faithfulness take
    labels = sst.labels("test")[:100]      # list[int], indices into sst.label_names
    sst.label_names                        # ['negative', 'positive']
    sst["test"]                            # the datasets.Dataset itself (columns text, label)
    sst.to_pandas("test")                  # a DataFrame with the label's name beside it

``load("sst_rationales")`` is the same binary SST with a 0/1 human-rationale mark per word
(:mod:`hf_attn.data.rationales`: ``.rationales(split)``); local rationale data loads with
:func:`load_eraser`, :func:`load_hatexplain` and :func:`load_label_studio`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hf_attn.data.rationales import (RationaleDataset, load_eraser, load_hatexplain, load_label_studio,
                                     load_sst_rationales)
from hf_attn.data.tasks import BUILTIN_DATASETS, PAIR_COLUMNS, DataError, TaskData, load_task

RATIONALE_DATASETS = ("sst_rationales",)  # bundled data sets with human rationales (RationaleDataset)

SPLIT_ALIASES = {"dev": "validation", "valid": "validation", "val": "validation"}


@dataclass(frozen=True)
class TextDataset:
    """One loaded data set: its splits (``train``, ``validation``, ``test``, each a ``datasets.Dataset``
    with ``text`` — or ``premise`` / ``hypothesis`` — and ``label`` columns) and its label names."""

    name: str
    label_names: list[str]
    splits: object  # datasets.DatasetDict
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_task(cls, task: TaskData) -> "TextDataset":
        return cls(task.name, list(task.label_names), task.splits, list(task.notes))

    @property
    def split_names(self) -> list[str]:
        return list(self.splits)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def is_pair(self) -> bool:
        """A sentence-pair task (SNLI): :meth:`pairs` rather than :meth:`texts`."""
        return all(c in self.splits["train"].column_names for c in PAIR_COLUMNS)

    def __getitem__(self, split: str):
        """The ``datasets.Dataset`` of ``split`` (``dev`` also names ``validation``)."""
        name = SPLIT_ALIASES.get(split, split)
        if name not in self.splits:
            raise KeyError(f"{self.name} has no split {split!r}; its splits: {', '.join(self.splits)}")
        return self.splits[name]

    def texts(self, split: str = "test") -> list[str]:
        """The texts of ``split``, in order (a list of strings)."""
        if self.is_pair:
            raise DataError(f"{self.name} is a sentence-pair task: use .pairs({split!r})")
        return list(self[split]["text"])

    def pairs(self, split: str = "test") -> list[tuple[str, str]]:
        """``(premise, hypothesis)`` of each example of a sentence-pair task's ``split``."""
        if not self.is_pair:
            raise DataError(f"{self.name} is a single-text task: use .texts({split!r})")
        data = self[split]
        return list(zip(data["premise"], data["hypothesis"]))

    def labels(self, split: str = "test") -> list[int]:
        """The gold labels of ``split`` (indices into :attr:`label_names`)."""
        return [int(label) for label in self[split]["label"]]

    def to_pandas(self, split: str = "test"):
        """``split`` as a DataFrame, with the label's name beside its index (column ``label_name``)."""
        frame = self[split].to_pandas()
        frame["label_name"] = [self.label_names[i] for i in frame["label"]]
        return frame

    def __len__(self) -> int:
        return sum(len(d) for d in self.splits.values())

    def __repr__(self) -> str:
        sizes = ", ".join(f"{split} {len(data):,}" for split, data in self.splits.items())
        return f"TextDataset({self.name!r}: {sizes}; labels {', '.join(self.label_names)})"


def load(name: str = "sst", *, data_path: str | None = None, text_column: str = "text", label_column: str = "label",
         seed: int = 0, preprocessing: str = "default") -> TextDataset | RationaleDataset:
    """A data set by name: ``"sst"`` (binary SST, the J&W split: 6,920 / 872 / 1,821 sentences, bundled),
    ``"sst_rationales"`` (the same sentences with a 0/1 rationale per word: a :class:`RationaleDataset`),
    ``"sst5"``, ``"agnews"`` / ``"imdb"`` / ``"snli"`` (``data_path`` where they need one), a local
    CSV / JSON(L) file or a folder of ``train`` / ``validation`` / ``test`` files, or a Hub dataset id.
    ``seed`` splits data that comes without its own splits; ``preprocessing="jw"``: Jain & Wallace's
    SST preprocessing. Raises :class:`hf_attn.data.tasks.DataError` (a ``ValueError``) or
    ``FileNotFoundError`` with one line naming what is wrong."""
    if name == "sst_rationales":
        if preprocessing != "default":
            raise DataError(f"preprocessing {preprocessing!r} does not apply to sst_rationales "
                            f"(its words are the trees' leaves)")
        return load_sst_rationales()
    task = load_task(name, seed=seed, text_column=text_column, label_column=label_column, data_path=data_path,
                     preprocessing=preprocessing)
    return TextDataset.from_task(task)


def names() -> tuple[str, ...]:
    """The data sets known by name (any other name is a local path or a Hub dataset id)."""
    return (*BUILTIN_DATASETS, *RATIONALE_DATASETS)


def rationale_dataset_for(dataset_name: str | None) -> str | None:
    """The bundled data set of :data:`RATIONALE_DATASETS` that holds human rationales for the
    sentences of ``dataset_name`` (the name a model's ``run.json`` records), or None when there is
    none: ``"sst"`` → ``"sst_rationales"`` (the same sentences in the same splits). ``None`` (no
    recorded data set) gives None; a name that is not a string is a ``ValueError``."""
    if dataset_name is None:
        return None
    if not isinstance(dataset_name, str):
        raise ValueError(f"dataset_name must be a data set's name (a string), got a {type(dataset_name).__name__}")
    return {"sst": "sst_rationales"}.get(dataset_name)


__all__ = ["TextDataset", "RationaleDataset", "load", "names", "DataError", "load_eraser", "load_hatexplain",
           "load_label_studio", "rationale_dataset_for"]
