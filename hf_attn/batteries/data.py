"""What a classifier is analysed on, shared by the batteries' runs (``hf-attn analyze``, ``hf-attn
eraser``, ``hf-attn faithfulness``): which folders hold a transformers classifier rather than one of
hf_attn's own models, the texts and labels each is analysed on (an hf_attn model: its ``run.json``'s
dataset; a transformers classifier: its ``run.json``'s dataset, a named dataset, or one data file
analysed whole), and :func:`load_classifier_and_data`, which loads both for either kind."""

from __future__ import annotations

import os

# ----------------------------------------------------------------------------------------------
# which folders are transformers classifiers (`hf-attn analyze DIR --battery jw` asks)

OWN_MODEL_TYPES = ("hf_attn", "hf_attn_pair")


def is_transformer_model_dir(model_dir: str) -> bool:
    """True for a transformers classifier that is not one of hf_attn's own models: a folder whose
    ``config.json`` has another ``model_type``, or a Hub id (``owner/name`` that is not a local
    path). Whether the engine can intervene on it is decided when its adapter is built (a model it
    cannot is refused there with the reason)."""
    config = os.path.join(model_dir, "config.json")
    if not os.path.isdir(model_dir):  # a Hub id is owner/name whose owner is no local folder
        import re

        return (re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", model_dir) is not None
                and not os.path.exists(model_dir.split("/")[0]))
    if not os.path.isfile(config):
        return False
    from hf_attn.core.io import read_json

    model_type = read_json(config).get("model_type")
    return model_type not in (None, *OWN_MODEL_TYPES)


# ----------------------------------------------------------------------------------------------
# the data a transformers classifier is analysed on (shared with `hf-attn eraser`)


def recorded_task(model_dir: str, run: dict | None = None, text_column: str | None = None,
                  label_column: str | None = None):
    """The task a folder trained by ``hf-attn train --base-model`` was trained on, loaded again as its
    ``run.json`` records it: the dataset (or data file, recorded relative to the folder), its data path,
    columns, split seed and class names (``--label-names``), so that the same sentences get the same
    splits and names. ``run``: the folder's record when already read. Without one (a model trained
    elsewhere, a Hub id) this is a ``ValueError`` asking for ``--dataset``."""
    from hf_attn.data.tasks import load_task

    if run is None:
        from hf_attn.training.transformer import read_transformer_run

        run = read_transformer_run(model_dir) if os.path.isdir(model_dir) else None
    if run is None:
        raise ValueError(f"{model_dir}: not trained by hf-attn (no run.json of a transformer run): name "
                         "the data to analyse with --dataset (sst, a CSV/JSON(L) file or folder, or a Hub "
                         "dataset id) and, if needed, --text-column/--label-column")
    s = run.get("settings", {})

    def located(value):  # a data path recorded relative to the run folder, usable from here
        if isinstance(value, str) and not os.path.isabs(value):
            candidate = os.path.normpath(os.path.join(model_dir, value))
            if os.path.exists(candidate):
                return candidate
        return value

    source = located(s.get("dataset")) or run["dataset"]
    return load_task(source, seed=int(s.get("data_seed", 0)), data_path=located(s.get("data_path")),
                     text_column=text_column or s.get("text_column") or "text",
                     label_column=label_column or s.get("label_column") or "label",
                     label_names=s.get("label_names"))


def load_analysis_data(model_dir: str, dataset: str | None = None, split: str = "test",
                       text_column: str | None = None, label_column: str | None = None, model_names=None):
    """``(texts, labels, label_names, dataset name)`` to analyse a BERT-family classifier on.

    - ``dataset`` given: loaded with :func:`hf_attn.data.tasks.load_task` (a bundled name, a
      CSV/JSON(L) folder with train/validation/test files or a Hub dataset id: its ``split``), with
      ``text_column`` / ``label_column`` (default ``text`` / ``label``). **A single CSV/JSON(L) file
      is analysed whole, in file order** (it is the data to analyse, not a corpus to split;
      ``split`` does not apply), read by the same row checks as ``load_task``.
    - no ``dataset``: the folder's ``run.json`` (trained by ``hf-attn train --base-model``) names
      the dataset, its data path, columns and split seed; without one (a model trained elsewhere,
      a Hub id) this is a ``ValueError`` asking for ``--dataset``.

    A missing column is a one-line :class:`hf_attn.data.tasks.DataError` naming the column and
    the file (or Hub id). Without ``model_names`` labels are class ids as ``load_task`` numbers them
    (into the returned names, in sorted order). With ``model_names`` (the classifier's ``id2label``
    names, one per class) they are the model's class ids (:func:`model_class_ids`: an integer label
    is the model's class id, a class name is matched by name) and the names returned are the model's."""
    from hf_attn.data.tasks import load_task

    if dataset is None:
        task = recorded_task(model_dir, text_column=text_column, label_column=label_column)
    elif os.path.isfile(dataset) and dataset.lower().endswith((".csv", ".jsonl", ".json")):
        return _whole_file(dataset, text_column or "text", label_column or "label", model_names)
    else:
        task = load_task(dataset, text_column=text_column or "text", label_column=label_column or "label")
    if task.is_pair:
        raise ValueError(f"{task.name}: sentence-pair data (premise/hypothesis); the BERT-family analyses "
                         "take single texts (--text-column)")
    if split not in task.splits:
        raise ValueError(f"{task.name}: no split {split!r} (has {list(task.splits)})")
    data = task.splits[split]
    if model_names is not None:
        keys = [str(task.label_names[int(y)]) for y in data["label"]]
        labels = model_class_ids(keys, model_names, lambda row: f"{task.name} [{split}] row {row}")
        return list(data["text"]), labels, [str(n) for n in model_names], task.name
    return list(data["text"]), list(data["label"]), list(task.label_names), task.name


def model_class_ids(keys, model_names, where) -> list[int]:
    """Canonical data labels ``keys`` (one per row, as the loaders read them: ``"2"``, ``"pos"``) →
    class ids of a model whose classes are named ``model_names`` (its ``id2label``), never renumbered
    by sort order:

    - integer labels are the model's class ids, kept as they are; one outside ``[0, num_labels)`` is
      a :class:`~hf_attn.data.tasks.DataError` naming its row (``where(row)``: file and line);
    - class names are matched to the model's names (so are integers when the model names its classes
      by such numbers, e.g. a model trained here on labels 0 and 2); a name the model does not have
      is refused with its row — except that a model with transformers' placeholder names
      (``LABEL_0``, …) takes the data's names in sorted order, refused when there are more of them
      than the model has classes."""
    import re

    from hf_attn.core.arguments import bounded_list, bounded_text
    from hf_attn.core.validation import _default_names
    from hf_attn.data.tasks import DataError, _label_set

    names = [str(n) for n in model_names]
    count = len(names)
    keys = [str(k) for k in keys]
    placeholder = _default_names(names)
    numbered = not placeholder and all(re.fullmatch(r"-?\d+", n) for n in names)
    by_name = {n: i for i, n in enumerate(names)}
    if not numbered and all(re.fullmatch(r"-?\d+", k) for k in keys):
        out = []
        for row, key in enumerate(keys):
            if not 0 <= int(key) < count:
                raise DataError(f"{where(row)}: label {key} is outside the model's {count} classes [0, {count}) "
                                "(integer labels are the model's class ids)")
            out.append(int(key))
        return out
    if all(k in by_name for k in keys):
        return [by_name[k] for k in keys]
    if not placeholder:
        row = next(r for r, k in enumerate(keys) if k not in by_name)
        raise DataError(f"{where(row)}: label {bounded_text(repr(keys[row]), 80)} is not a class of the model "
                        f"({bounded_list(names)}); name the classes as the model's id2label does")
    order = _label_set(keys)
    if len(order) > count:
        raise DataError(f"the data has {len(order)} classes ({bounded_list(order)}) but the model only {count} "
                        f"({bounded_list(names)})")
    index = {k: i for i, k in enumerate(order)}
    return [index[k] for k in keys]


def analysis_split(dataset: str | None, split: str) -> str:
    """The split to record: ``"all"`` when ``dataset`` is a single data file (analysed whole)."""
    if dataset and os.path.isfile(dataset) and dataset.lower().endswith((".csv", ".jsonl", ".json")):
        return "all"
    return split


def _whole_file(path: str, text_column: str, label_column: str, model_names=None):
    """Every row of one CSV/JSON(L) file, in file order, checked like ``load_task`` does (missing
    columns, empty texts and bad labels are errors naming the file and line); with ``model_names``
    the labels are the model's class ids (:func:`model_class_ids`)."""
    from hf_attn.data import tasks as d

    table = d._checked_rows(d._read_table(path), {"text": text_column}, label_column)
    if model_names is not None:
        labels = model_class_ids(table.data["label"], model_names, table.where)
        return list(table.data["text"]), labels, [str(n) for n in model_names], os.path.basename(path)
    names = d._label_set(table.data["label"])
    data = d._encode_labels({"all": table}, names)["all"]
    return list(data["text"]), list(data["label"]), names, os.path.basename(path)


# ----------------------------------------------------------------------------------------------
# the model and its data, for either kind


def load_model_and_split(model_dir: str, split: str = "test", needed_by: str = "the jw battery"):
    """``(model, tokenizer, texts, labels, label_names, dataset name)`` for a folder written by
    ``hf-attn train`` (its run.json names the dataset)."""
    from hf_attn.models.loading import load_model_folder
    from hf_attn.training.engine import settings_from_run, task_of

    run = settings_from_run(model_dir, needed_by=needed_by)
    model, tokenizer = load_model_folder(model_dir, "hf_attn")
    task = task_of(run)
    if split not in task.splits:
        raise ValueError(f"split {split!r} not in {list(task.splits)}")
    data = task.splits[split]
    if "text" not in data.column_names:
        raise ValueError(f"{needed_by} needs single-text data; {task.name} has {data.column_names}")
    return model, tokenizer, list(data["text"]), list(data["label"]), task.label_names, task.name


def load_classifier(model_dir: str):
    """``(model, tokenizer)`` of a folder trained here or of a transformers classifier (folder or Hub id)."""
    if is_transformer_model_dir(model_dir):
        from hf_attn.adapters.transformer_attention import load_transformer_classifier

        return load_transformer_classifier(model_dir)
    from hf_attn.models.loading import load_model_folder

    return load_model_folder(model_dir, "hf_attn")


def model_class_names(config) -> list[str]:
    """A transformers config's class names, one per class (its ``id2label``; the id where it has none):
    the one reading of a model's classes for the batteries, the runs and the ``Explainer``."""
    id2label = getattr(config, "id2label", None) or {}
    return [str(id2label.get(i, id2label.get(str(i), i))) for i in range(int(config.num_labels))]


def class_index(names: list[str], value, what: str) -> int | None:
    """A class given by index or by name (one of ``names``, the model's classes) → its index; None
    stays None; anything else is a one-line ``ValueError`` naming ``what``."""
    import numpy as np

    if value is None:
        return None
    if isinstance(value, str):
        if value not in names:
            raise ValueError(f"{what} {value!r} is not one of the model's classes {names}")
        return names.index(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= int(value) < len(names):
        raise ValueError(f"{what} must be a class index in [0, {len(names)}) or one of {names}, got {value!r}")
    return int(value)


def _config_class_names(model_dir: str) -> list[str] | None:
    """The class names of a local classifier folder read from its ``config.json`` without loading the
    model (as transformers reads them: ``id2label``, else ``num_labels`` classes, else 2); None when
    it is no folder or its config cannot be read (the model is then loaded first)."""
    import json

    try:
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        id2label = config.get("id2label")
        classes = len(id2label) if isinstance(id2label, dict) and id2label else int(config.get("num_labels", 2))
        if config.get("problem_type") in ("regression", "multi_label_classification") or classes < 2:
            return None  # no class distribution: the model is loaded first and refused with the reason
        if isinstance(id2label, dict) and id2label:
            labels = {int(k): str(v) for k, v in id2label.items()}
            if sorted(labels) != list(range(len(labels))):
                return None
            return [labels[i] for i in range(len(labels))]
        count = int(config.get("num_labels", 2))
        return [f"LABEL_{i}" for i in range(count)] if count > 0 else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def load_classifier_and_data(model_dir: str, split: str = "test", dataset: str | None = None,
                             text_column: str | None = None, label_column: str | None = None,
                             needed_by: str = "the analysis"):
    """``(model, tokenizer, texts, labels, label_names, dataset name, recorded split)`` for either kind:
    an hf_attn model on the ``split`` of its run.json's dataset (a ``dataset`` or column option is
    refused: it would be ignored), a transformers classifier on :func:`load_analysis_data`'s data (loaded
    before the model, so a bad ``dataset`` or column fails fast; the recorded split is
    :func:`analysis_split`'s)."""
    if is_transformer_model_dir(model_dir):
        model_names = _config_class_names(model_dir)
        model = None
        if model_names is None:  # a Hub id (or an unreadable config): the model says how many classes
            from hf_attn.adapters.contract import check_model_contract

            model, tokenizer = load_classifier(model_dir)
            check_model_contract(model)  # a regression or multi-label head: refused before its data is read
            model_names = model_class_names(model.config)
        texts, labels, names, name = load_analysis_data(model_dir, dataset, split, text_column, label_column,
                                                        model_names)
        if model is None:
            model, tokenizer = load_classifier(model_dir)
        return model, tokenizer, texts, labels, names, name, analysis_split(dataset, split)
    given = [f for f, v in (("dataset", dataset), ("text_column", text_column), ("label_column", label_column))
             if v is not None]
    if given:
        raise ValueError(f"{model_dir}: --{given[0].replace('_', '-')} is for transformers classifiers; an hf_attn "
                         "model is analysed on the dataset of its run.json")
    model, tokenizer, texts, labels, names, name = load_model_and_split(model_dir, split, needed_by)
    return model, tokenizer, texts, labels, names, name, split
