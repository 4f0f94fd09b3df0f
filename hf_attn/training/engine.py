"""Training with ``transformers.Trainer`` (J&W appendix A, T&Š table 4 defaults).

Adam (amsgrad, as in the J&W code) lr 1e-3 with L2 weight decay 1e-5, batch 32, gradient clipping 5,
8 epochs, class-balanced loss (w = #neg/#pos for the positive class), the checkpoint with the best
dev ROC-AUC is kept. Resumes from the last checkpoint in ``DIR/checkpoints`` when rerun.

One engine for every run: what depends on the task (single texts or sentence pairs) comes from a
:class:`TaskPieces`, what a run built on another model adds (the W&P helper models: a given
vocabulary, extra per-instance columns, another Trainer, another checkpoint selection) from
:class:`TrainingHooks`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch
from accelerate.utils import DistributedType
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast, Trainer, TrainingArguments
from transformers.trainer_callback import PrinterCallback, ProgressCallback, TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
from hf_attn.data.datasets import BUILTIN_DATASETS, TaskData, load_task
from hf_attn.data.embeddings import embedding_dim_of, pretrained_matrix
from hf_attn.core.environment import environment_versions  # noqa: F401 (re-exported)
from hf_attn.core.arguments import bounded_list, MAX_EMBEDDING_DIM, MAX_HIDDEN_SIZE, MAX_LENGTH, MAX_NUM_LAYERS
from hf_attn.core.io import LOCK_NAME, exclusive_output_folder, read_json, write_json_atomic
from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
from hf_attn.data.tokenization import build_tokenizer
from hf_attn.training import pair
from hf_attn.training.weighting import class_weights_for

logger = logging.getLogger(__name__)


@dataclass
class TrainSettings:
    """Everything ``hf-attn train`` takes; recorded in ``DIR/run.json``."""

    dataset: str = "sst"
    data_path: str | None = None
    text_column: str = "text"
    label_column: str = "label"
    encoder: str = "lstm"
    attention: str = "additive"
    variant: str = "base"
    embeddings: str = "glove-6b-50d"
    embedding_dim: int = 300  # random init only; GloVe fixes d = 50
    hidden_size: int | None = None
    num_layers: int = 1
    tying_delta: float = 1.0
    mlm_probability: float = 0.15
    mlm_weight: float = 1.0
    average_activation: str = "relu"
    min_count: int = 1
    max_length: int = 512
    seed: int = 0
    data_seed: int = 0
    epochs: int = 8
    batch_size: int = 32
    learning_rate: float = 1e-3
    weight_decay: float = 1e-5
    max_grad_norm: float = 5.0
    class_balanced: bool = True
    model_selection: str = "roc_auc"
    # Lazy Adam on the embedding rows of each batch's words (LazyEmbeddingAdam): faster, NOT the
    # papers' dense Adam + L2 update; off by default (README, Training: measured accuracy).
    sparse_embedding_updates: bool = False
    # bfloat16 autocast of forward and backward (Trainer's ``bf16``): faster on CPUs with bf16
    # instructions, NOT the papers' float32 arithmetic; weights, optimiser and checkpoints stay float32.
    bf16: bool = False
    # "jw": Jain & Wallace's SST preprocessing (hf_attn.data.datasets.load_sst_jw: punctuation stripped,
    # their length filter, <SOS>/<EOS> read by the encoder and excluded from attention).
    preprocessing: str = "default"
    extra_config: dict = field(default_factory=dict)

    def validate(self) -> None:
        for name in ("epochs", "batch_size", "min_count", "max_length", "num_layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.weight_decay < 0 or self.max_grad_norm <= 0:
            raise ValueError("weight_decay must be >= 0 and max_grad_norm > 0")
        if self.model_selection not in ("roc_auc", "accuracy", "macro_f1", "f1"):
            raise ValueError(f"model_selection must be roc_auc/accuracy/macro_f1/f1, got {self.model_selection}")
        if self.preprocessing not in ("default", "jw"):
            raise ValueError(f"preprocessing must be 'default' or 'jw', got {self.preprocessing!r}")
        for name, limit in (("hidden_size", MAX_HIDDEN_SIZE), ("embedding_dim", MAX_EMBEDDING_DIM),
                            ("num_layers", MAX_NUM_LAYERS), ("max_length", MAX_LENGTH)):
            value = getattr(self, name)
            if value is not None and not 1 <= value <= limit:
                raise ValueError(f"{name} (--{name.replace('_', '-')}) must be between 1 and {limit}, got {value}")
        needed, available = 16 * self.estimated_encoder_parameters(), _physical_memory()
        if available and needed > available:
            raise ValueError(f"--hidden-size {self.hidden_size} / --num-layers {self.num_layers} / --embedding-dim "
                             f"{self.embedding_dim}: the encoder alone would need about {needed / 2**30:.1f} GiB for "
                             f"its weights, gradients and optimiser state; this machine has {available / 2**30:.1f} GiB")

    def estimated_encoder_parameters(self) -> int:
        """Parameters of the encoder these settings build (an estimate: the vocabulary is not known yet)."""
        d = 50 if self.embeddings == "glove-6b-50d" else self.embedding_dim
        h = self.hidden_size or (d // 2 if self.variant in ("residual", "tying", "mlm") else 128)
        if self.encoder == "lstm":
            return sum(2 * 4 * h * ((d if layer == 0 else 2 * h) + h + 2) for layer in range(self.num_layers))
        if self.encoder == "cnn":
            return 4 * 64 * 7 * d
        return d * h + h


def _physical_memory() -> int | None:
    """Bytes of RAM of this machine, or None if unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def classification_metrics(probabilities: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """accuracy, f1 (positive class; macro for C > 2), macro_f1 and ROC-AUC (one-vs-rest for C > 2)."""
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score  # 1.4 s import: only when used

    probabilities = np.asarray(probabilities, dtype=np.float64)
    labels = np.asarray(labels)
    predictions = probabilities.argmax(-1)
    num_classes = probabilities.shape[-1]
    metrics = {"accuracy": float(accuracy_score(labels, predictions)),
               "macro_f1": float(f1_score(labels, predictions, average="macro",
                                          labels=list(range(num_classes)), zero_division=0))}
    if num_classes == 2:
        metrics["f1"] = float(f1_score(labels, predictions, pos_label=1, zero_division=0))
        scores = probabilities[:, 1]
        metrics["roc_auc"] = (float(roc_auc_score(labels, scores)) if len(set(labels.tolist())) == 2
                              else float("nan"))
    else:
        metrics["f1"] = metrics["macro_f1"]
        present = sorted(set(labels.tolist()))
        metrics["roc_auc"] = (float(roc_auc_score(labels, probabilities, multi_class="ovr",
                                                  labels=list(range(num_classes))))
                              if len(present) == num_classes else float("nan"))
    return metrics


def _compute_metrics(eval_pred) -> dict[str, float]:
    logits = eval_pred.predictions[0] if isinstance(eval_pred.predictions, tuple) else eval_pred.predictions
    probabilities = torch.from_numpy(np.asarray(logits, dtype=np.float32)).softmax(-1).numpy()
    return classification_metrics(probabilities, eval_pred.label_ids)


def _adam_functional(*args, **kwargs):
    from torch.optim.adam import adam  # the functional form behind torch.optim.Adam

    return adam(*args, **kwargs)


def _fused_adam_available(params) -> bool:
    """torch's fused Adam kernel (one pass over each tensor) takes CPU/CUDA floating tensors."""
    return all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)


def jw_adam(params, lr: float, weight_decay: float) -> torch.optim.Adam:
    """The J&W optimiser: ``torch.optim.Adam(amsgrad=True)`` with L2 ``weight_decay`` added to the
    gradient (not AdamW), computed by torch's fused kernel where it exists: the same update as
    the default per-tensor loop (equal to float rounding, tested), 8× faster on the 16k × 300
    embedding matrix, which every step updates in full (the L2 term reaches every row)."""
    params = list(params)
    fused = _fused_adam_available(params) or None
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, amsgrad=True, fused=fused)


class LazyEmbeddingAdam(torch.optim.Optimizer):
    """``--sparse-embedding-updates``: Adam (amsgrad) + L2 as :func:`jw_adam` for every parameter
    except the word-embedding matrices, whose update is lazy (as TensorFlow's ``LazyAdam``): only
    the rows with a non-zero gradient in this step — the batch's words — get the Adam update (their
    L2 term, moments and amsgrad maximum included); the other rows and their moments stay as they
    are, instead of decaying towards 0 and moving by their momentum as in the papers' dense Adam.
    Bias correction uses the global step. NOT the papers' optimisation: a documented option with
    its measured accuracy (README, Training)."""

    def __init__(self, dense_params, lazy_params, lr: float, weight_decay: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        groups = [{"params": list(dense_params), "lazy": False}, {"params": list(lazy_params), "lazy": True}]
        groups = [g for g in groups if g["params"]]
        super().__init__(groups, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                                  "amsgrad": True})

    def _state(self, p: torch.Tensor) -> dict:
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            for name in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
                state[name] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self._state(p) for p in params]
            beta1, beta2 = group["betas"]
            if not group["lazy"]:
                _adam_functional(
                    params, [p.grad for p in params], [s["exp_avg"] for s in states],
                    [s["exp_avg_sq"] for s in states], [s["max_exp_avg_sq"] for s in states],
                    [s["step"] for s in states], fused=_fused_adam_available(params) or None,
                    amsgrad=True, beta1=beta1, beta2=beta2, lr=group["lr"],
                    weight_decay=group["weight_decay"], eps=group["eps"], maximize=False)
                continue
            for p, state in zip(params, states):
                self._lazy_rows_step(p, state, group, beta1, beta2)
        return loss

    @staticmethod
    def _lazy_rows_step(p, state, group, beta1: float, beta2: float) -> None:
        grad = p.grad.coalesce() if p.grad.is_sparse else p.grad
        if grad.is_sparse:
            rows, values = grad.indices()[0], grad.values()
        else:
            rows = grad.ne(0).any(dim=1).nonzero().squeeze(1)
            values = grad.index_select(0, rows)
        state["step"] += 1
        step = float(state["step"])
        if rows.numel() == 0:
            return
        weight = p.index_select(0, rows)
        if group["weight_decay"]:
            values = values.add(weight, alpha=group["weight_decay"])
        m = state["exp_avg"].index_select(0, rows).lerp_(values, 1 - beta1)
        v = state["exp_avg_sq"].index_select(0, rows).mul_(beta2).addcmul_(values, values, value=1 - beta2)
        v_max = torch.maximum(state["max_exp_avg_sq"].index_select(0, rows), v)
        bias1, bias2 = 1 - beta1 ** step, 1 - beta2 ** step
        denom = (v_max.sqrt() / bias2 ** 0.5).add_(group["eps"])
        weight.addcdiv_(m, denom, value=-group["lr"] / bias1)
        p.index_copy_(0, rows, weight)
        state["exp_avg"].index_copy_(0, rows, m)
        state["exp_avg_sq"].index_copy_(0, rows, v)
        state["max_exp_avg_sq"].index_copy_(0, rows, v_max)


def _embedding_weights(model) -> list[torch.Tensor]:
    return [m.weight for m in model.modules() if isinstance(m, torch.nn.Embedding) and m.weight.requires_grad]


class _LengthSortedSampler(torch.utils.data.Sampler):
    """Evaluation order by length (longest first): batches of similar lengths, little padding.
    Every metric here is a function of the set of (prediction, label) pairs, so the order does not
    change them; each text's outputs do not depend on the other texts of its batch."""

    def __init__(self, lengths):
        self.order = sorted(range(len(lengths)), key=lambda i: -lengths[i])

    def __iter__(self):
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)


def _lengths_of(dataset, column: str = "input_ids") -> list[int]:
    if isinstance(dataset, list):
        return [len(row[column]) for row in dataset]
    return [len(ids) for ids in dataset[column]]


class AttnTrainer(Trainer):
    """``Trainer`` with the J&W optimiser (Adam + amsgrad, L2 weight decay, not AdamW) and the
    T&Š regularisers' losses logged beside the classification loss.

    ``sparse_embedding_updates``: :class:`LazyEmbeddingAdam` instead (not the papers' semantics).
    ``sorted_evaluation``: evaluate in length-sorted batches (same metrics, less padding)."""

    def __init__(self, *args, sparse_embedding_updates: bool = False, sorted_evaluation: bool = False,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.sparse_embedding_updates = sparse_embedding_updates
        self.sorted_evaluation = sorted_evaluation
        self._flops_per_token = None

    def create_optimizer(self, model=None):
        if self.optimizer is None:
            model = model or self.model
            params = [p for p in model.parameters() if p.requires_grad]
            if getattr(self, "sparse_embedding_updates", False):
                lazy = {id(w) for w in _embedding_weights(model)}
                if self.args.world_size <= 1:  # sparse gradients: no dense (V, d) gradient at all
                    for module in model.modules():
                        if isinstance(module, torch.nn.Embedding) and id(module.weight) in lazy:
                            module.sparse = True
                self.optimizer = LazyEmbeddingAdam([p for p in params if id(p) not in lazy],
                                                   [p for p in params if id(p) in lazy],
                                                   lr=self.args.learning_rate,
                                                   weight_decay=self.args.weight_decay)
            else:
                self.optimizer = jw_adam(params, lr=self.args.learning_rate,
                                         weight_decay=self.args.weight_decay)
        return self.optimizer

    def _clip_grad_norm(self, model):
        """``clip_grad_norm_``'s global-norm clipping, in one process on CPU without its pass over
        every gradient when nothing is clipped (it multiplies them by exactly 1.0 then: torch's
        own comment calls that redundant, done only to avoid a device sync) — the 16k × d embedding
        gradient is the largest tensor of a step. Also takes the sparse embedding gradients of
        ``sparse_embedding_updates``, which ``clip_grad_norm_`` does not."""
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        sparse = any(g.is_sparse for g in grads)
        plain = (self.accelerator.distributed_type == DistributedType.NO and self.accelerator.scaler is None
                 and all(g.device.type == "cpu" for g in grads))
        if not grads or not (sparse or plain):
            return super()._clip_grad_norm(model)
        if sparse:
            for p in model.parameters():
                if p.grad is not None and p.grad.is_sparse:
                    p.grad = p.grad.coalesce()
            grads = [p.grad._values() if p.grad.is_sparse else p.grad
                     for p in model.parameters() if p.grad is not None]
        total = torch.nn.utils.get_total_norm(grads, 2.0)
        coefficient = torch.clamp(self.args.max_grad_norm / (total + 1e-6), max=1.0)
        if bool(coefficient < 1.0):
            torch._foreach_mul_(grads, coefficient)
        return total

    def _get_eval_sampler(self, eval_dataset):
        if getattr(self, "sorted_evaluation", False) and self.args.world_size <= 1:
            name = self.processing_class.model_input_names[0] if self.processing_class is not None else "input_ids"
            return _LengthSortedSampler(_lengths_of(eval_dataset, name))
        return super()._get_eval_sampler(eval_dataset)

    def floating_point_ops(self, inputs) -> int:
        """``Trainer``'s estimate (6 × tokens × non-embedding parameters) with the parameter count
        computed once instead of on every step."""
        main_input = getattr(self.model, "main_input_name", "input_ids")
        if main_input not in inputs:
            return super().floating_point_ops(inputs)
        if self._flops_per_token is None:
            self._flops_per_token = super().floating_point_ops({main_input: torch.zeros(1, 1)})
        return self._flops_per_token * inputs[main_input].numel()

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        loss = outputs.loss
        if model.training and outputs.regularization_loss is not None:
            sums = getattr(self, "_loss_parts", None) or {"classification_loss": 0.0,
                                                          "regularization_loss": 0.0, "n": 0}
            sums["classification_loss"] += float(outputs.classification_loss.detach())
            sums["regularization_loss"] += float(outputs.regularization_loss.detach())
            sums["n"] += 1
            self._loss_parts = sums
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        parts = getattr(self, "_loss_parts", None)
        if parts and parts["n"] and "loss" in logs:
            logs["classification_loss"] = round(parts["classification_loss"] / parts["n"], 4)
            logs["regularization_loss"] = round(parts["regularization_loss"] / parts["n"], 4)
            self._loss_parts = None
        super().log(logs, *args, **kwargs)


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


def _best_checkpoint_dev_metrics(trainer: Trainer) -> dict[str, float] | None:
    """The dev metrics of the kept (best) checkpoint as the Trainer logged them when it evaluated
    that checkpoint — the same weights and batches, so the same numbers as evaluating again —
    renamed ``dev_*``; None when the log does not hold them (then the caller evaluates)."""
    state = trainer.state
    if not trainer.args.load_best_model_at_end or not state.best_model_checkpoint:
        return None
    try:
        best_step = int(os.path.basename(os.path.normpath(state.best_model_checkpoint)).rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return None
    metric = trainer.args.metric_for_best_model or "loss"
    key = metric if metric.startswith("eval_") else f"eval_{metric}"
    for entry in state.log_history:
        if entry.get("step") == best_step and key in entry:
            return {f"dev_{name[5:]}": value for name, value in entry.items() if name.startswith("eval_")}
    return None


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


# ---------------------------------------------------------------------------------------------
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


class RunSettingsMismatch(ValueError):
    """``output_dir`` holds a run (finished or not) trained with other settings."""


def _normalised_settings(settings: TrainSettings) -> dict:
    return json.loads(json.dumps(asdict(settings)))  # JSON round trip: tuples → lists, as stored


PATH_SETTINGS = ("dataset", "data_path")  # settings that may name a local file or folder


def _is_local_data(value) -> bool:
    return isinstance(value, str) and value not in BUILTIN_DATASETS and os.path.exists(value)


def stored_paths(settings: TrainSettings, output_dir: str) -> TrainSettings:
    """``settings`` as ``run.json`` records them: a local data file or folder (``--dataset``,
    ``--data-path``) relative to the run folder ``output_dir`` (POSIX separators), never as typed,
    so the run folder can be analysed from any directory and moved together with its data."""
    changes = {}
    for name in PATH_SETTINGS:
        value = getattr(settings, name)
        if _is_local_data(value):
            relative = os.path.relpath(os.path.abspath(value), os.path.abspath(output_dir))
            changes[name] = relative.replace(os.sep, "/")
    return replace(settings, **changes) if changes else settings


def _resolved_paths(settings: TrainSettings, output_dir: str) -> TrainSettings:
    """Inverse of :func:`stored_paths`: a recorded data path relative to the run folder, made usable
    from the current directory (a path recorded by an older version, relative to wherever it was
    typed, is kept as it is)."""
    changes = {}
    for name in PATH_SETTINGS:
        value = getattr(settings, name)
        if isinstance(value, str) and value not in BUILTIN_DATASETS and not os.path.isabs(value):
            candidate = os.path.normpath(os.path.join(output_dir, value))
            if os.path.exists(candidate):
                changes[name] = candidate
    return replace(settings, **changes) if changes else settings


def settings_difference(stored: dict, requested: TrainSettings) -> dict[str, tuple]:
    """``{key: (stored, requested)}`` for every setting that differs; a key missing from an older
    ``stored`` counts as its dataclass default."""
    wanted = _normalised_settings(requested)
    defaults = _normalised_settings(TrainSettings())
    return {key: (stored.get(key, defaults.get(key)), wanted.get(key))
            for key in sorted(set(stored) | set(wanted))
            if stored.get(key, defaults.get(key)) != wanted.get(key)}


def _format_difference(difference: dict[str, tuple]) -> str:
    return ", ".join(f"{key}: {old!r} → {new!r}" for key, (old, new) in difference.items())


def _read_json_file(path: str) -> dict | None:
    """A JSON file's content, or None if it is missing, empty or not JSON (killed mid-write)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


REQUEST_FILE = "train_request.json"  # in DIR/checkpoints: the settings a started run was asked for


def _check_existing_run(settings: TrainSettings, output_dir: str, task: TaskData | None,
                        overwrite: bool) -> dict | None:
    """What is already in ``output_dir``: the metrics of a finished run with the same settings (to
    return as is), or None to train (fresh, or resuming a run started with the same settings).
    A run with other settings is refused (:class:`RunSettingsMismatch`) or, with ``overwrite``,
    cleared."""
    metrics_path = os.path.join(output_dir, "metrics.json")
    checkpoints = os.path.join(output_dir, "checkpoints")
    request_path = os.path.join(checkpoints, REQUEST_FILE)
    if os.path.exists(metrics_path):
        run = _read_json_file(os.path.join(output_dir, "run.json")) or {}
        stored, what = run.get("settings"), "a finished run"
        stored_task = run.get("task")
    elif os.path.exists(request_path):
        request = _read_json_file(request_path) or {}
        stored, what = request.get("settings"), "an unfinished run"
        stored_task = request.get("task")
    elif os.path.isdir(checkpoints) and os.listdir(checkpoints):
        stored, what, stored_task = None, "an unfinished run of unknown settings", None
    else:
        return None
    if stored is None:
        difference = {"settings": ("unknown", "requested")}
    else:
        difference = settings_difference(stored, stored_paths(settings, output_dir))
        if task is not None and stored_task is not None and stored_task != task.name:
            difference["task"] = (stored_task, task.name)
    if not difference:
        if os.path.exists(metrics_path):
            metrics = _read_json_file(metrics_path)
            if metrics is None:
                raise ValueError(f"{metrics_path} is not valid JSON; use --overwrite to train again")
            return metrics
        return None
    if not overwrite:
        raise RunSettingsMismatch(
            f"{output_dir} holds {what} with other settings ({_format_difference(difference)}); "
            "use --overwrite to replace it, or choose another --output-dir")
    logger.warning("--overwrite: replacing %s in %s (%s)", what, output_dir, _format_difference(difference))
    for name in ("metrics.json", "run.json"):  # metrics.json first: its presence marks a finished run
        if os.path.exists(os.path.join(output_dir, name)):
            os.unlink(os.path.join(output_dir, name))
    shutil.rmtree(checkpoints, ignore_errors=True)
    return None


def train(settings: TrainSettings, output_dir: str, task: TaskData | None = None,
          progress: bool = True, keep_checkpoints: bool = False, overwrite: bool = False,
          pieces: TaskPieces | None = None, hooks: TrainingHooks | None = None) -> dict:
    """Train one model into ``output_dir`` (model + tokenizer + ``metrics.json`` + ``run.json``).

    Rerunning with the same ``output_dir`` and the same settings resumes from the last complete
    Trainer checkpoint; a finished run is returned as is. A folder holding a run with other
    settings is refused (:class:`RunSettingsMismatch`, naming the differing keys) unless
    ``overwrite``. One writer per folder: a second process training into ``output_dir`` at the
    same time fails at once (:class:`hf_attn.core.io.OutputFolderBusy`).

    ``pieces``: the task's parts (default :func:`task_pieces` of the task); ``hooks``: what a run
    built on another model changes (:class:`TrainingHooks`; None: a plain run).
    """
    settings.validate()
    if hooks is not None:
        hooks.validate()
    processes, main_process = _launch_processes()
    run = (settings, output_dir, task, progress, keep_checkpoints, processes, main_process, pieces, hooks)
    if not main_process:  # accelerate/torchrun workers: the main process holds the folder
        return _train(*run)
    with exclusive_output_folder(output_dir):
        fresh = not [name for name in os.listdir(output_dir) if name != LOCK_NAME]
        finished = _check_existing_run(settings, output_dir, task, overwrite)
        if finished is not None:
            return finished
        try:
            return _train(*run)
        except BaseException:
            if fresh and last_complete_checkpoint(os.path.join(output_dir, "checkpoints")) is None:
                _remove_started_run(output_dir)  # nothing to resume: leave no half-made folder
            raise


def _remove_started_run(output_dir: str) -> None:
    """Remove what a run that failed before its first checkpoint wrote into its new folder."""
    for name in os.listdir(output_dir):
        if name == LOCK_NAME:
            continue
        path = os.path.join(output_dir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _run_tokenizer(settings: TrainSettings, task: TaskData, pieces: TaskPieces, output_dir: str,
                   main_process: bool) -> PreTrainedTokenizerFast:
    """The run's vocabulary: the one saved in ``DIR/checkpoints/tokenizer`` when resuming, else
    built from the task's training texts (and saved there by the main process)."""
    tokenizer_dir = os.path.join(output_dir, "checkpoints", "tokenizer")
    if os.path.exists(os.path.join(tokenizer_dir, "tokenizer.json")):
        return PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)  # resume: same vocabulary
    if getattr(task, "preprocessing", "default") != settings.preprocessing:
        raise ValueError(f"the task was loaded with preprocessing {task.preprocessing!r} but the "
                         f"settings say {settings.preprocessing!r}")
    tokenizer = build_tokenizer(pieces.vocabulary_texts(task), min_count=settings.min_count,
                                max_length=settings.max_length, preprocessing=settings.preprocessing)
    if main_process:  # the others build the same vocabulary; only one writes it
        tokenizer.save_pretrained(tokenizer_dir)
    return tokenizer


def _training_arguments(settings: TrainSettings, output_dir: str, metric: str, greater: bool,
                        progress: bool, processes: int, remove_unused_columns: bool) -> TrainingArguments:
    return TrainingArguments(
        output_dir=os.path.join(output_dir, "checkpoints"),
        per_device_train_batch_size=settings.batch_size, per_device_eval_batch_size=256,
        num_train_epochs=settings.epochs, learning_rate=settings.learning_rate,
        weight_decay=settings.weight_decay, max_grad_norm=settings.max_grad_norm,
        lr_scheduler_type="constant", warmup_steps=0,
        eval_strategy="epoch", save_strategy="epoch", save_total_limit=1,
        load_best_model_at_end=True, metric_for_best_model=metric,
        greater_is_better=greater, seed=settings.seed, data_seed=settings.seed,
        logging_strategy="steps", logging_steps=50, report_to="none",
        disable_tqdm=not progress, dataloader_num_workers=0, use_cpu=not torch.cuda.is_available(),
        bf16=settings.bf16,
        save_only_model=False, include_num_input_tokens_seen="non_padding",
        # extra columns (TrainingHooks.columns) must reach the collator
        remove_unused_columns=remove_unused_columns,
        # Batches of similar length, as the J&W code does: less padding, same estimator.
        train_sampling_strategy="group_by_length",
        # Several processes (accelerate launch / torchrun): each global batch of batch_size examples
        # is drawn exactly as with one process and split between the processes, so data order and
        # effective batch size are those of a one-process run (see _launch_processes).
        accelerator_config={"split_batches": True} if processes > 1 else None)


def _rows(encoded, columns: dict[str, dict[str, list]]) -> dict[str, list[dict]]:
    """Encoded splits as in-memory rows (indexing a Python list costs ~1 µs, an Arrow row ~30 µs;
    same rows, order, batches) with the extra ``columns`` added as float32-valued lists."""
    rows = {split: data.to_list() for split, data in encoded.items()}
    for split, named in columns.items():
        for name, values in named.items():
            if len(values) != len(rows[split]):
                raise ValueError(f"{split}: column {name!r} has {len(values)} rows, split {len(rows[split])}")
            for row, value in zip(rows[split], values):
                row[name] = np.asarray(value, dtype=np.float32).tolist()
    return rows


def _log_line(logs: dict) -> str:
    """A Trainer log dict as one readable line: ``loss 0.6812, grad_norm 0.41, epoch 0.23``."""
    def fmt(value):
        try:
            return f"{float(value):.4g}"
        except (TypeError, ValueError):
            return str(value)
    return ", ".join(f"{key} {fmt(value)}" for key, value in logs.items())


class _TrainingLog(TrainerCallback):
    """Trainer's periodic logs (loss, dev metrics per epoch) go to the run's log file, not the console
    (``console=False``: hf-attn's console handler drops them), instead of a raw dict per line."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            logger.info("step %d/%d: %s", state.global_step, state.max_steps, _log_line(logs),
                        extra={"console": False})


class _TrainingBar(ProgressCallback):
    """One progress bar for the training steps: Trainer's, without its nested evaluation bars."""

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        pass

    def on_log(self, args, state, control, logs=None, **kwargs):
        pass


class _WithoutMtimeNotice(logging.Filter):
    """transformers warns "mtime may not be reliable on this filesystem" whenever two checkpoints are
    saved within a second (short epochs), and then orders them by step number: what hf_attn wants
    anyway, so not a warning to show."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "mtime may not be reliable" not in str(record.msg)


def _readable_console(trainer: Trainer, progress: bool) -> None:
    """Replace Trainer's console output (a raw log dict per line, nested bars, a notice about
    checkpoint times) by one training bar (``progress``) and log lines in the run's log file."""
    notices = logging.getLogger("transformers.trainer_utils")
    if not any(isinstance(f, _WithoutMtimeNotice) for f in notices.filters):
        notices.addFilter(_WithoutMtimeNotice())
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    if progress:
        trainer.add_callback(_TrainingBar())
    trainer.add_callback(_TrainingLog())


def _train(settings: TrainSettings, output_dir: str, task: TaskData | None, progress: bool,
           keep_checkpoints: bool, processes: int, main_process: bool, pieces: TaskPieces | None,
           hooks: TrainingHooks | None) -> dict:
    """The training itself (see :func:`train`), in a folder that is ours."""
    metrics_path = os.path.join(output_dir, "metrics.json")
    task = task or task_of(settings)
    pieces = pieces or task_pieces(task)
    plain, hooks = hooks is None, hooks or TrainingHooks()
    os.makedirs(os.path.join(output_dir, "checkpoints"), exist_ok=True)
    if main_process:
        write_json_atomic(os.path.join(output_dir, "checkpoints", REQUEST_FILE),
                          {"settings": asdict(stored_paths(settings, output_dir)), "task": task.name})
    if settings.batch_size % processes:
        raise ValueError(f"batch_size {settings.batch_size} must be divisible by the {processes} processes "
                         "(each process gets batch_size / processes examples of every batch)")
    tokenizer = (hooks.tokenizer if hooks.tokenizer is not None
                 else _run_tokenizer(settings, task, pieces, output_dir, main_process))
    encoded = pieces.tokenize(task, tokenizer, settings.max_length)
    model, info = pieces.build_model(settings, tokenizer, task)
    selection_note = None
    if hooks.selection is None:
        metric, selection_note = _usable_model_selection(pieces.model_selection(settings, task), task)
        greater = True
    else:
        metric, greater = hooks.selection
    args = _training_arguments(settings, output_dir, metric, greater, progress, processes,
                               remove_unused_columns=plain)
    rows = _rows(encoded, hooks.columns)
    collator = pieces.collator(tokenizer.pad_token_id)
    if hooks.token_columns or hooks.vector_columns:
        collator = ColumnPaddingCollator(collator, hooks.token_columns, hooks.vector_columns)
    clock = _TrainingClock()
    trainer = hooks.trainer_class(
        model=model, args=args, train_dataset=rows["train"], eval_dataset=rows["validation"],
        data_collator=collator, processing_class=tokenizer, compute_metrics=_compute_metrics,
        callbacks=[*hooks.callbacks, clock], sparse_embedding_updates=settings.sparse_embedding_updates,
        sorted_evaluation=plain or hooks.sorted_evaluation, **hooks.trainer_kwargs)
    _readable_console(trainer, progress)
    last = last_complete_checkpoint(args.output_dir)
    importlib.import_module("sklearn.metrics")  # used by every evaluation: imported before the clock starts

    clock.resume(last)
    trainer.train(resume_from_checkpoint=last)
    train_seconds = clock.stop(trainer.state.num_input_tokens_seen)

    test = trainer.predict(rows["test"], metric_key_prefix="test")
    dev = _best_checkpoint_dev_metrics(trainer) or trainer.evaluate(rows["validation"],
                                                                    metric_key_prefix="dev")
    trainer.save_model(output_dir)  # best-on-dev model (load_best_model_at_end)
    tokenizer.save_pretrained(output_dir)
    metrics = _run_metrics(trainer, test.metrics, dev, train_seconds, last, with_objective=not plain,
                           tokens_per_second=clock.tokens_per_second)
    if hooks.test_metrics is not None:
        metrics.update(hooks.test_metrics(trainer.model, encoded["test"]))
    run = {"settings": asdict(stored_paths(settings, output_dir)), "task": task.name, "label_names": task.label_names,
           "split_sizes": {s: len(d) for s, d in task.splits.items()}, "notes": task.notes,
           "model_selection": metric, "model_selection_note": selection_note,
           "model": info | {"encoder": model.config.encoder, "attention": model.config.attention,
                            "variant": model.config.variant, "hidden_size": model.config.hidden_size,
                            "parameters": sum(p.numel() for p in model.parameters())},
           "versions": environment_versions(), "processes": processes,
           "torch_threads": torch.get_num_threads()} | hooks.run_record
    if not main_process:
        return metrics
    write_json_atomic(os.path.join(output_dir, "run.json"), run)
    write_json_atomic(metrics_path, metrics)  # last: its presence marks a finished run
    if not keep_checkpoints:  # finished: the optimizer states are only needed to resume
        shutil.rmtree(args.output_dir, ignore_errors=True)
    return metrics


CLOCK_FILE = "hf_attn_clock.json"  # in each checkpoint: training seconds and tokens up to it


class _TrainingClock(TrainerCallback):
    """Training time across resumes: each checkpoint records the seconds trained up to it (earlier
    sessions included); a resumed run starts from the recorded seconds and tokens of the checkpoint
    it resumes, so ``train_seconds`` is the whole run's and the throughput is tokens over seconds of
    the same session, never all tokens over the resumed seconds only."""

    def __init__(self):
        self.earlier_seconds, self.earlier_tokens, self.start = 0.0, 0, None
        self.tokens_per_second = None

    def resume(self, checkpoint: str | None) -> None:
        if checkpoint is not None:
            clock = _read_json_file(os.path.join(checkpoint, CLOCK_FILE)) or {}
            state = _read_json_file(os.path.join(checkpoint, "trainer_state.json")) or {}
            self.earlier_seconds = float(clock.get("train_seconds") or 0.0)
            self.earlier_tokens = int(state.get("num_input_tokens_seen") or 0)
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return self.earlier_seconds + (time.perf_counter() - self.start if self.start is not None else 0.0)

    def on_save(self, args, state, control, **kwargs):
        folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        if state.is_world_process_zero and os.path.isdir(folder):
            write_json_atomic(os.path.join(folder, CLOCK_FILE), {"train_seconds": self.elapsed()})

    def stop(self, tokens_seen) -> float:
        session = time.perf_counter() - self.start
        session_tokens = int(tokens_seen or 0) - self.earlier_tokens
        self.tokens_per_second = round(session_tokens / session, 1) if session > 0 and session_tokens > 0 else None
        return self.earlier_seconds + session


def _run_metrics(trainer: Trainer, test: dict, dev: dict, train_seconds: float, resumed_from: str | None,
                 with_objective: bool, tokens_per_second: float | None = None) -> dict:
    """``metrics.json``: test and dev accuracy / F1 / macro-F1 / ROC-AUC, the kept checkpoint and
    the throughput; ``with_objective`` (runs with hooks): also the test/dev loss (the trainer's
    objective) and the epochs trained (early stopping may end a run before its last epoch)."""
    wanted = ("accuracy", "f1", "macro_f1", "roc_auc")
    metrics = {f"{prefix}_{name}": float(values[f"{prefix}_{name}"])
               for prefix, values in (("test", test), ("dev", dev)) for name in wanted}
    if with_objective:
        for prefix, values in (("test", test), ("dev", dev)):
            if f"{prefix}_loss" in values:
                metrics[f"{prefix}_loss"] = float(values[f"{prefix}_loss"])
    tokens = int(trainer.state.num_input_tokens_seen or 0)
    metrics.update({
        "best_checkpoint": os.path.basename(trainer.state.best_model_checkpoint or ""),
        "train_seconds": round(train_seconds, 2),
        "train_tokens": tokens,
        "train_tokens_per_second": (tokens_per_second if resumed_from else
                                    round(tokens / train_seconds, 1) if train_seconds and tokens else None),
        "resumed_from": os.path.basename(resumed_from) if resumed_from else None,
    })
    if with_objective:
        metrics["epochs_trained"] = round(float(trainer.state.epoch or 0), 2)
    return metrics


def _usable_model_selection(model_selection: str, task: TaskData) -> tuple[str, str | None]:
    """The dev metric that picks the best checkpoint, and a note if it had to change: ROC-AUC is
    undefined when the dev split lacks a class (every epoch would score NaN and the Trainer would
    silently keep the first checkpoint), so dev accuracy is used instead, with a warning."""
    if model_selection != "roc_auc":
        return model_selection, None
    present = np.unique(np.asarray(task.splits["validation"]["label"]))
    if len(present) >= task.num_labels:
        return model_selection, None
    note = (f"the dev split has only class(es) {[task.label_names[i] for i in present]} of "
            f"{task.label_names}: ROC-AUC is undefined there, so the best checkpoint is chosen by dev "
            "accuracy instead")
    logger.warning("%s", note)
    return "accuracy", note


def _launch_processes() -> tuple[int, bool]:
    """(number of processes, is this the main one) of an ``accelerate launch`` / ``torchrun`` run.

    Multi-process training (DDP; gloo on CPU) splits every batch of ``batch_size`` between the
    processes (``split_batches``): the sampler, its seed and hence the data order are those of one
    process, gradients are averaged over the processes, so it computes the same updates as a
    one-process run up to floating-point summation order (the mean loss of each process's part of
    the batch, averaged, instead of one mean), except for the last, incomplete batch of an epoch,
    which accelerate completes with examples from the epoch's start (``even_batches``; turning it
    off breaks the gathered evaluation) unless ``batch_size`` divides the training set."""
    return int(os.environ.get("WORLD_SIZE", "1")), os.environ.get("RANK", "0") == "0"


def last_complete_checkpoint(folder: str) -> str | None:
    """The newest ``checkpoint-N`` under ``folder`` that was completely written, or None.

    ``Trainer`` writes ``trainer_state.json`` last, so a checkpoint whose state file is missing,
    empty or not valid JSON was interrupted mid-save (process killed): it is deleted so that
    ``Trainer`` resumes from the previous one (a 0-byte state file otherwise fails every rerun).
    """
    if not os.path.isdir(folder):
        return None
    while True:
        last = get_last_checkpoint(folder)
        if last is None or _read_json_file(os.path.join(last, "trainer_state.json")) is not None:
            return last
        logger.warning("removing incomplete checkpoint %s (interrupted while saving)", last)
        shutil.rmtree(last, ignore_errors=True)  # another process may be removing it too
        if os.path.isdir(last):  # could not be removed: do not loop forever on it
            raise OSError(f"cannot remove the incomplete checkpoint {last}")


def settings_from_run(output_dir: str, needed_by: str | None = None) -> TrainSettings:
    """The settings a finished run was trained with. ``needed_by`` (e.g. "the jw battery") names
    the caller in the error for a folder that was not written by ``hf-attn train``."""
    if needed_by is not None:
        if not os.path.isdir(output_dir):
            raise FileNotFoundError(f"no model folder {output_dir!r}")
        if not os.path.exists(os.path.join(output_dir, "run.json")):
            raise FileNotFoundError(f"{output_dir} has no run.json: {needed_by} needs a folder "
                                    f"written by `hf-attn train` (to know its dataset)")
    path = os.path.join(output_dir, "run.json")
    run = read_json(path)
    if not isinstance(run, dict) or not isinstance(run.get("settings"), dict):
        raise ValueError(f"{path} has no \"settings\" object: not a run.json written by `hf-attn train`")
    known = {f.name for f in fields(TrainSettings)}
    unknown = sorted(set(run["settings"]) - known)
    if unknown:
        raise ValueError(f"{path}: unknown settings {bounded_list(unknown)}")
    return _resolved_paths(TrainSettings(**run["settings"]), output_dir)


def task_of(settings: TrainSettings) -> TaskData:
    """The task, with the same splits, that a run with ``settings`` trains on."""
    return load_task(settings.dataset, seed=settings.data_seed, text_column=settings.text_column,
                     label_column=settings.label_column, data_path=settings.data_path,
                     preprocessing=getattr(settings, "preprocessing", "default"))


__all__ = ["TrainSettings", "AttnTrainer", "train", "classification_metrics", "build_model",
           "tokenize_splits", "write_json_atomic", "class_weights_for", "environment_versions",
           "settings_from_run", "task_of", "last_complete_checkpoint", "RunSettingsMismatch",
           "settings_difference", "TaskPieces", "SINGLE_TEXT", "SENTENCE_PAIR", "task_pieces",
           "TrainingHooks", "ColumnPaddingCollator", "PaddingCollator"]
