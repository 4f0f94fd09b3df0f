"""Sentence-pair (NLI) pieces of the ``Trainer`` path: ``hf_attn.training.pieces`` bundles these into the
engine's ``SENTENCE_PAIR`` :class:`~hf_attn.training.pieces.TaskPieces`, used when the task has
``premise``/``hypothesis`` columns (e.g. ``hf-attn train --dataset snli``). This module does not import
the engine (the engine's pieces import it).

* one word-level vocabulary built from the training premises AND hypotheses;
* premise → ``input_ids``/``attention_mask``, hypothesis → ``hypothesis_input_ids``/
  ``hypothesis_attention_mask`` (each truncated to ``max_length``);
* a collator that right-pads both sequences;
* :class:`AttnPairClassifierForSequenceClassification` with both embedding matrices initialised
  from the same pretrained vectors (J&W appendix A: GloVe 840B for SNLI; GloVe 6B 50d offline).

Model selection: J&W report micro-F1 (= accuracy for single-label classes) on SNLI, and ROC-AUC is
only one-vs-rest for three classes, so pair tasks with > 2 classes keep the checkpoint with the best
dev accuracy unless ``TrainSettings.model_selection`` is set to something other than the default.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from hf_attn.models.configuration_hf_attn_pair import AttnPairClassifierConfig
from hf_attn.data.tasks import PAIR_COLUMNS, TaskData
from hf_attn.data.embeddings import embedding_dim_of, pretrained_matrix
from hf_attn.models.modeling_hf_attn_pair import AttnPairClassifierForSequenceClassification
from hf_attn.training.weighting import class_weights_for

logger = logging.getLogger(__name__)

HYPOTHESIS_PREFIX = "hypothesis_"


def pair_training_texts(task: TaskData) -> list[str]:
    """Training premises then hypotheses: the texts the shared vocabulary is built from."""
    train = task.splits["train"]
    return list(train["premise"]) + list(train["hypothesis"])


def pair_model_selection(settings, task: TaskData) -> str:
    """Dev metric that picks the checkpoint: accuracy for > 2 classes if left at the ROC-AUC default."""
    if settings.model_selection == "roc_auc" and task.num_labels > 2:
        return "accuracy"
    return settings.model_selection


def tokenize_pair_splits(task: TaskData, tokenizer, max_length: int):
    """``premise``/``hypothesis`` → ``input_ids``/``attention_mask`` and ``hypothesis_input_ids``/
    ``hypothesis_attention_mask`` (truncated to ``max_length`` with a warning)."""

    def encode(batch):
        premise = tokenizer(list(batch["premise"]), truncation=True, max_length=max_length)
        hypothesis = tokenizer(list(batch["hypothesis"]), truncation=True, max_length=max_length)
        return {"input_ids": premise["input_ids"], "attention_mask": premise["attention_mask"],
                f"{HYPOTHESIS_PREFIX}input_ids": hypothesis["input_ids"],
                f"{HYPOTHESIS_PREFIX}attention_mask": hypothesis["attention_mask"]}

    encoded = task.splits.map(encode, batched=True, remove_columns=list(PAIR_COLUMNS),
                              desc="tokenizing pairs")
    for split, data in encoded.items():
        for column in ("input_ids", f"{HYPOTHESIS_PREFIX}input_ids"):
            lengths = np.fromiter((len(ids) for ids in data[column]), dtype=np.int64)
            if (lengths >= max_length).any():
                logger.warning("%s: %d %s truncated to max_length=%d tokens", split,
                               int((lengths >= max_length).sum()), column, max_length)
            if (lengths == 0).any():
                raise ValueError(f"{split}: {int((lengths == 0).sum())} texts have no tokens ({column})")
    return encoded


class PairDataCollator:
    """Right-pads premise and hypothesis ids of a list of features to ``(B, T)`` / ``(B, U)``."""

    def __init__(self, pad_token_id: int = 0):
        self.pad_token_id = int(pad_token_id)

    def _pad(self, sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = torch.tensor([len(s) for s in sequences])
        steps = int(lengths.max())
        ids = torch.full((len(sequences), steps), self.pad_token_id, dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, :len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        return ids, (torch.arange(steps)[None] < lengths[:, None]).long()

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        batch = {}
        for prefix in ("", HYPOTHESIS_PREFIX):
            ids, mask = self._pad([f[f"{prefix}input_ids"] for f in features])
            batch[f"{prefix}input_ids"], batch[f"{prefix}attention_mask"] = ids, mask
        key = "label" if "label" in features[0] else "labels" if "labels" in features[0] else None
        if key is not None:
            batch["labels"] = torch.tensor([int(f[key]) for f in features], dtype=torch.long)
        return batch


def build_pair_model(settings, tokenizer, task: TaskData
                     ) -> tuple[AttnPairClassifierForSequenceClassification, dict]:
    """Config + pair model for ``settings``; both embedding matrices get the pretrained vectors."""
    vocab = tokenizer.get_vocab()
    d = embedding_dim_of(settings.embeddings, settings.embedding_dim)
    labels = np.asarray(task.splits["train"]["label"])
    config = AttnPairClassifierConfig(
        vocab_size=len(vocab), embedding_dim=d, encoder=settings.encoder,
        hidden_size=settings.hidden_size, num_layers=settings.num_layers,
        attention=settings.attention, variant=settings.variant,
        average_activation=settings.average_activation, max_tokens=settings.max_length,
        num_labels=task.num_labels, id2label=dict(enumerate(task.label_names)),
        label2id={n: i for i, n in enumerate(task.label_names)},
        class_weights=class_weights_for(labels, task.num_labels) if settings.class_balanced else None,
        pad_token_id=tokenizer.pad_token_id, unk_token_id=tokenizer.unk_token_id,
        mask_token_id=tokenizer.mask_token_id, **settings.extra_config)
    torch.manual_seed(settings.seed)
    model = AttnPairClassifierForSequenceClassification(config)
    info = {"embeddings": settings.embeddings, "embedding_dim": d, "pair": True,
            "pair_decoder": config.pair_decoder, "share_embeddings": config.share_embeddings}
    if settings.embeddings != "random":
        matrix, coverage = pretrained_matrix(vocab, settings.embeddings, seed=settings.seed,
                                             pad_id=tokenizer.pad_token_id)
        with torch.no_grad():
            model.embedding.weight.copy_(matrix)
            if model.hypothesis_embedding is not None:
                model.hypothesis_embedding.weight.copy_(matrix)
        info["pretrained_coverage"] = round(coverage, 4)
    return model, info


__all__ = ["pair_training_texts", "pair_model_selection", "tokenize_pair_splits",
           "PairDataCollator", "build_pair_model"]
