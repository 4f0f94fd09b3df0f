"""``transformers.Trainer`` as the runs use it (:class:`AttnTrainer`: J&W's optimiser, class-weighted
loss, length-sorted evaluation) and the classification metrics every evaluation reports."""

from __future__ import annotations

import os

import numpy as np
import torch
from accelerate.utils import DistributedType
from transformers import Trainer

from hf_attn.training.optim import LazyEmbeddingAdam, _embedding_weights, jw_adam


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
