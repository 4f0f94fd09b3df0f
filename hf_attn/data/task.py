"""A loaded task (:class:`TaskData`) and the error bad data raises (:class:`DataError`): the types
every loader returns (:mod:`hf_attn.data.tasks`, :mod:`hf_attn.data.babi`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from datasets import DatasetDict

PAIR_COLUMNS = ("premise", "hypothesis")


class DataError(ValueError):
    """A dataset does not have the shape the library needs (missing column, empty text, …)."""


@dataclass
class TaskData:
    """A loaded task: the splits, the label names (index = class id) and where it came from."""

    splits: DatasetDict
    label_names: list[str]
    name: str
    notes: list[str] = field(default_factory=list)
    # Texts the vocabulary is built from, when not the train split (J&W preprocessing: the
    # train split before their length filter); and the tokenizer preprocessing they need.
    vocabulary_texts: list[str] | None = None
    preprocessing: str = "default"
    # The seed the train/validation/test split was cut with (all of it, or a part such as a dev split
    # carved from train), or None when the data came with its own splits (SST, a folder of files).
    split_seed: int | None = None

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def is_pair(self) -> bool:
        """Sentence-pair task (``premise``/``hypothesis`` columns) rather than single texts."""
        return all(c in self.splits["train"].column_names for c in PAIR_COLUMNS)


__all__ = ["PAIR_COLUMNS", "DataError", "TaskData"]
