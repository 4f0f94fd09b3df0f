"""What differs between runs: the task's pieces (:class:`TaskPieces`: vocabulary texts, encoded
splits, collator, model, checkpoint selection; single texts or sentence pairs) and the hooks of a
run built on another model (:class:`TrainingHooks`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
from hf_attn.data.tasks import TaskData
from hf_attn.data.embeddings import embedding_dim_of, pretrained_matrix
from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
from hf_attn.training import pair
from hf_attn.training.weighting import class_weights_for
from hf_attn.training.trainer import AttnTrainer
from hf_attn.training.settings import TrainSettings


# The training engine's log: its records keep the name "hf_attn.training.engine" (the console and the
# run's log file show it).
logger = logging.getLogger("hf_attn.training.engine")


def _column_lengths(data, column: str) -> np.ndarray:
    """Lengths of a list column of a ``datasets.Dataset``, read from Arrow (iterating the rows
    through ``datasets`` costs ~20 µs each)."""
    import pyarrow.compute as pc

    return np.asarray(pc.list_value_length(data.with_format("arrow")[column]).to_numpy(zero_copy_only=False),
                      dtype=np.int64)


def tokenize_splits(task: TaskData, tokenizer: PreTrainedTokenizerFast, max_length: int):
    """``text`` → ``input_ids``/``attention_mask`` (truncated to ``max_length`` with a warning)."""

    def encode(batch):
        return tokenizer(batch["text"], truncation=True, max_length=max_length)

    encoded = task.splits.map(encode, batched=True, remove_columns=["text"], desc="tokenizing")
    for split, data in encoded.items():
        lengths = _column_lengths(data, "input_ids")
        if (lengths >= max_length).any():
            logger.warning("%s: %d texts truncated to max_length=%d tokens", split,
                           int((lengths >= max_length).sum()), max_length)
    return encoded


class PaddingCollator:
    """Right-pads ``input_ids`` / ``attention_mask`` rows into int64 tensors and stacks ``label``
    into ``labels``: the batch ``DataCollatorWithPadding`` builds for these columns, without its
    per-batch tokenizer round trip."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = int(pad_token_id)

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        lengths = [len(f["input_ids"]) for f in features]
        width = max(lengths)
        ids = np.full((len(features), width), self.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(features), width), dtype=np.int64)
        for row, (feature, length) in enumerate(zip(features, lengths)):
            ids[row, :length] = feature["input_ids"]
            mask[row, :length] = feature["attention_mask"] if "attention_mask" in feature else 1
        batch = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}
        for key in ("label", "labels", "label_ids"):
            if key in features[0] and features[0][key] is not None:
                batch["labels"] = torch.tensor([f[key] for f in features])
                break
        return batch


def build_model(settings: TrainSettings, tokenizer: PreTrainedTokenizerFast, task: TaskData
                ) -> tuple[AttnClassifierForSequenceClassification, dict]:
    """Config + model for ``settings``, with the embedding matrix initialised."""
    vocab = tokenizer.get_vocab()
    d = embedding_dim_of(settings.embeddings, settings.embedding_dim)
    labels = np.asarray(task.splits["train"]["label"])
    config = AttnClassifierConfig(
        vocab_size=len(vocab), embedding_dim=d, encoder=settings.encoder,
        hidden_size=settings.hidden_size, num_layers=settings.num_layers,
        attention=settings.attention, variant=settings.variant, tying_delta=settings.tying_delta,
        mlm_probability=settings.mlm_probability, mlm_weight=settings.mlm_weight,
        average_activation=settings.average_activation, max_tokens=settings.max_length,
        num_labels=task.num_labels,
        id2label=dict(enumerate(task.label_names)),
        label2id={n: i for i, n in enumerate(task.label_names)},
        class_weights=class_weights_for(labels, task.num_labels) if settings.class_balanced else None,
        pad_token_id=tokenizer.pad_token_id, unk_token_id=tokenizer.unk_token_id,
        mask_token_id=tokenizer.mask_token_id,
        **{**({"attention_exclude_first_last": True} if settings.preprocessing == "jw" else {}),
           **settings.extra_config})
    torch.manual_seed(settings.seed)
    model = AttnClassifierForSequenceClassification(config)
    info = {"embeddings": settings.embeddings, "embedding_dim": d}
    if settings.embeddings != "random":
        matrix, coverage = pretrained_matrix(vocab, settings.embeddings, seed=settings.seed,
                                             pad_id=tokenizer.pad_token_id)
        with torch.no_grad():
            model.embedding.weight.copy_(matrix)
        info["pretrained_coverage"] = round(coverage, 4)
    return model, info


# what differs between runs: the task's pieces and a helper run's hooks
@dataclass(frozen=True)
class TaskPieces:
    """The task-specific parts of a run: the texts the vocabulary is built from, texts → encoded
    splits (``datasets.DatasetDict``), the batch collator (built from the pad id), the model with
    its ``run.json`` info, and the dev metric that keeps the best checkpoint. :func:`task_pieces`
    chooses :data:`SINGLE_TEXT` or :data:`SENTENCE_PAIR` from the task."""

    name: str
    vocabulary_texts: Callable[[TaskData], Sequence[str]]
    tokenize: Callable[[TaskData, PreTrainedTokenizerFast, int], Any]
    collator: Callable[[int], Callable[[list[dict]], dict]]
    build_model: Callable[[TrainSettings, PreTrainedTokenizerFast, TaskData], tuple[torch.nn.Module, dict]]
    model_selection: Callable[[TrainSettings, TaskData], str]


def _single_text_vocabulary(task: TaskData) -> Sequence[str]:
    return task.vocabulary_texts or task.splits["train"]["text"]  # J&W: before their length filter


def _settings_model_selection(settings: TrainSettings, task: TaskData) -> str:
    return settings.model_selection


SINGLE_TEXT = TaskPieces("single_text", _single_text_vocabulary, tokenize_splits, PaddingCollator,
                         build_model, _settings_model_selection)
SENTENCE_PAIR = TaskPieces("sentence_pair", pair.pair_training_texts, pair.tokenize_pair_splits,
                           pair.PairDataCollator, pair.build_pair_model, pair.pair_model_selection)


def task_pieces(task: TaskData) -> TaskPieces:
    """:data:`SENTENCE_PAIR` for a task with premise/hypothesis columns, else :data:`SINGLE_TEXT`."""
    return SENTENCE_PAIR if task.is_pair else SINGLE_TEXT


class ColumnPaddingCollator:
    """A task collator (default :class:`PaddingCollator`) plus float columns: per-token columns
    (``token_columns``, lists of length T_i) are right-padded with 0 to the batch's T; per-instance
    vectors (``vector_columns``) are stacked. Shapes: ``(B, T)`` and ``(B, C)``.

    ``base``: a tokenizer (its pad id builds a :class:`PaddingCollator`) or a task collator."""

    def __init__(self, base, token_columns=(), vector_columns=()):
        self.base = PaddingCollator(base.pad_token_id) if isinstance(base, PreTrainedTokenizerBase) else base
        self.token_columns = tuple(token_columns)
        self.vector_columns = tuple(vector_columns)

    def __call__(self, features):
        features = [dict(f) for f in features]
        extra = {name: [f.pop(name) for f in features] for name in self.token_columns + self.vector_columns}
        batch = self.base(features)
        steps = batch["input_ids"].shape[1]
        for name in self.token_columns:
            padded = torch.zeros(len(features), steps, dtype=torch.float32)
            for row, values in enumerate(extra[name]):
                values = torch.as_tensor(values, dtype=torch.float32)
                if len(values) != int(batch["attention_mask"][row].sum()):
                    raise ValueError(f"column {name!r} has {len(values)} values for an instance of "
                                     f"{int(batch['attention_mask'][row].sum())} tokens")
                padded[row, :len(values)] = values
            batch[name] = padded
        for name in self.vector_columns:
            batch[name] = torch.as_tensor(np.asarray(extra[name], dtype=np.float32))
        return batch


@dataclass
class TrainingHooks:
    """What a run built on another model changes in :func:`train` (the W&P helper models of
    ``hf_attn.training.wp``: seed-model runs need none).

    tokenizer: the vocabulary to use (e.g. the base model's, so that columns line up with its
        tokens) instead of building one from the training texts.
    columns: extra per-instance float columns ``{split: {name: values}}`` (one entry per instance);
        ``token_columns`` names the per-token ones (padded to ``(B, T)``), ``vector_columns`` the
        per-instance vectors (stacked to ``(B, C)``); see :class:`ColumnPaddingCollator`.
    trainer_class, trainer_kwargs: the Trainer (:class:`AttnTrainer` or a subclass, e.g. the
        consistent adversary's) and its extra keyword arguments.
    selection: ``(metric, greater_is_better)`` that keeps the best checkpoint (``"loss"`` is the
        trainer's own objective on dev); None: the task's dev metric, higher is better.
    callbacks: extra ``TrainerCallback``s (e.g. early stopping).
    test_metrics: ``(model, encoded test split) -> dict`` merged into ``metrics.json``.
    run_record: merged into ``run.json`` (what the run is).
    sorted_evaluation: evaluate in length-sorted batches. Off: dataset order, as the W&P runs
        always did — a class-weighted adversary objective (mean weight × mean loss per batch)
        depends on which instances share a batch, so the order changes its dev value.

    A run with hooks also reports ``test_loss``, ``dev_loss`` and ``epochs_trained``.
    """

    tokenizer: PreTrainedTokenizerFast | None = None
    columns: dict[str, dict[str, list]] = field(default_factory=dict)
    token_columns: tuple[str, ...] = ()
    vector_columns: tuple[str, ...] = ()
    trainer_class: type = AttnTrainer
    trainer_kwargs: dict[str, Any] = field(default_factory=dict)
    selection: tuple[str, bool] | None = None
    callbacks: tuple = ()
    test_metrics: Callable[[torch.nn.Module, Any], dict] | None = None
    run_record: dict[str, Any] = field(default_factory=dict)
    sorted_evaluation: bool = False

    def validate(self) -> None:
        if not (isinstance(self.trainer_class, type) and issubclass(self.trainer_class, AttnTrainer)):
            raise TypeError(f"trainer_class must be AttnTrainer or a subclass, got {self.trainer_class!r}")
        declared = set(self.token_columns) | set(self.vector_columns)
        for split, named in self.columns.items():
            unknown = set(named) - declared
            if unknown:
                raise ValueError(f"{split}: columns {sorted(unknown)} are neither token_columns nor vector_columns")
