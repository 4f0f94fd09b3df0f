"""The class names of a task and the split it was cut into, as ``hf-attn train`` reports and records
them.

- Class names: string labels in the data are the class names, in sorted order (integer-looking
  labels numerically first, then the others alphabetically: ``neg`` < ``pos``); class id ``i`` is
  the ``i``-th name. Integer labels (``0``, ``1``, …) are class ids whose names are the numbers
  themselves, unless :func:`with_label_names` (``--label-names neg,pos``) names them, in the order
  of the sorted ids. The names end up in the trained model's ``config.id2label`` / ``label2id``.
- The split: :func:`split_line` says how many rows each split holds and whether the data came with
  its own splits (``given``: SST, a folder of train/dev/test files) or was cut with a seed
  (``seed 0``: one CSV/JSONL file, 70 / 10 / 20 with ``--data-seed``).
"""

from __future__ import annotations

import re
from dataclasses import replace

from hf_attn.core.arguments import bounded_list, bounded_text
from hf_attn.data.task import DataError, TaskData

LABEL_NAMES_OPTION = "--label-names"


def parse_label_names(text: str | list | tuple | None) -> list[str] | None:
    """``"neg,pos"`` (or a list of names) → ``["neg", "pos"]``; None / empty → None. Names are
    stripped; an empty or repeated name is a :class:`DataError` naming ``--label-names``."""
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else [str(n) for n in text]
    names = [n.strip() for n in items]
    if names == [""]:
        return None
    if any(not n for n in names):
        raise DataError(f"{LABEL_NAMES_OPTION}: an empty class name in {bounded_text(repr(text), 120)}; "
                        "give one name per class, separated by commas (e.g. neg,pos)")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise DataError(f"{LABEL_NAMES_OPTION}: class name(s) {bounded_list(repeated)} given more than once")
    return names


def _integer_ids(names: list[str]) -> bool:
    return all(re.fullmatch(r"-?\d+", str(n)) for n in names)


def with_label_names(task: TaskData, names) -> TaskData:
    """``task`` with its classes named ``names`` (class id ``i`` → ``names[i]``; the rows keep
    their ids). Only integer labels can be named: data whose labels are already names (``neg``,
    ``pos``; SST's ``negative``, ``positive``) is refused, as is a number of names other than the
    number of classes — each a one-line :class:`DataError` naming ``--label-names``."""
    names = parse_label_names(names)
    if names is None:
        return task
    current = [str(n) for n in task.label_names]
    if not _integer_ids(current):
        raise DataError(f"{LABEL_NAMES_OPTION}: the labels of {task.name} already have names "
                        f"({bounded_list(current)}); {LABEL_NAMES_OPTION} names integer class ids (0, 1, …)")
    if len(names) != len(current):
        raise DataError(f"{LABEL_NAMES_OPTION} gives {len(names)} name(s) ({bounded_list(names)}) but {task.name} "
                        f"has {len(current)} classes (labels {bounded_list(current)}): give one name per class, "
                        "in the order of the sorted labels")
    return replace(task, label_names=list(names))


def split_kind(task: TaskData) -> str:
    """``"seed N"`` when the task's splits were cut with seed N, ``"given"`` when they came with the data."""
    seed = getattr(task, "split_seed", None)
    return "given" if seed is None else f"seed {seed}"


def split_record(task: TaskData) -> dict:
    """What ``run.json`` records of the split: ``{"split": "seed 0" | "given", "split_sizes": {…}}``."""
    return {"split": split_kind(task), "split_sizes": {s: len(d) for s, d in task.splits.items()}}


def split_line(source: str, kind: str, sizes: dict, label_names=None) -> str:
    """``split of my.csv (seed 0): 700 train / 100 dev / 200 test; classes neg, pos``: the line
    ``hf-attn train`` prints and logs (``kind``: :func:`split_kind`; ``sizes``: rows per split)."""
    parts = [f"{sizes[s]} {short}" for s, short in (("train", "train"), ("validation", "dev"), ("test", "test"))
             if s in sizes]
    line = f"split of {source} ({kind}): {' / '.join(parts)}"
    if label_names:
        line += f"; classes {', '.join(str(n) for n in label_names)}"
    return line


def task_split_line(source: str, task: TaskData) -> str:
    """:func:`split_line` of a loaded task."""
    record = split_record(task)
    return split_line(source, record["split"], record["split_sizes"], task.label_names)


__all__ = ["LABEL_NAMES_OPTION", "parse_label_names", "with_label_names", "split_kind", "split_record",
           "split_line", "task_split_line"]
