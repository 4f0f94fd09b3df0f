"""Training side of the Wiegreffe & Pinter (2019) battery.

* §3.2 uniform baseline: the base settings with ``attention="uniform"`` (:func:`uniform_settings`).
* §3.3 seed variance: N models that differ from the base only in ``seed`` (:func:`train_seeds`,
  ``hf-attn train-seeds``; resumable: finished runs are skipped).
* §3.4 diagnostic MLP: per-token affine + tanh encoder whose token scores are weighted by a FIXED
  per-instance distribution (a "guide") in training AND testing (:func:`train_guided_mlp`). The guide
  is a dataset column padded by :class:`ColumnPaddingCollator` and passed to the model as its
  ``attention_weights`` override, so no gradient can reach it. The TRAINED MLP guide is the MLP's own
  learned additive attention (no override).
* §4 model-consistent adversary: a new model M_a trained against a fixed base M_b with
  L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a ‖ α_b) (:class:`ConsistentAdversaryTrainer`,
  :func:`train_consistent_adversary`). The base's predictions and attention are precomputed once per
  split and fed as dataset columns. ``divergence="jsd"`` selects Tutek & Šnajder's Eq. 6 instead,
  L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b) (their Fig. 1); W&P's KL stays the default. ``protocol="wp"``
  trains it as W&P's code does (≤ 80 epochs, early stopping on the training objective, ½·TVD,
  class-weighted; see ``ADVERSARY_PROTOCOLS``); ``protocol="fast"`` (this function's default; the
  reproduce report uses "wp") is the base's epochs, dev-objective selection, full TVD, unweighted.

All models are saved like ``hf_attn.training.engine.train`` saves them (model + tokenizer + ``metrics.json``
+ ``run.json``); a folder with ``metrics.json`` is a finished run and is returned as is.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import asdict, replace

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import (DataCollatorWithPadding, EarlyStoppingCallback,
                          PreTrainedTokenizerFast, TrainingArguments)
from transformers.trainer_utils import get_last_checkpoint

from hf_attn.data.datasets import TaskData
from hf_attn.models.loading import load_model_folder
from hf_attn.core.measures import jsd, kl_divergence, tvd
from hf_attn.training.engine import (AttnTrainer, TrainSettings, _compute_metrics, build_model, class_weights_for,
                       classification_metrics,
                       environment_versions, settings_from_run, task_of, tokenize_splits, train,
                       write_json_atomic)

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
GUIDES = ("uniform", "trained", "base", "adversary")
DEFAULT_LAMBDAS = (0.001, 0.01, 0.1, 1.0, 10.0)
# Published positive-class F1 of the diagnostic MLP on SST (W&P Table 3).
WP_TABLE3_SST = {"uniform": 0.812, "trained": 0.817, "base": 0.824, "adversary": 0.592}
# Where the base attention underflowed to exactly 0 on a real token, KL(α_a‖α_b) would be +inf:
# floor the base there (float32 softmax underflow only; ordinary values are untouched).
BASE_ATTENTION_FLOOR = 1e-12


# ---------------------------------------------------------------------------------------------
# the W&P §4 objective (and T&Š's Eq. 6 variant)
# divergence of the attention term: W&P §4 use KL(α_a‖α_b); T&Š §3.3 Eq. 6 (their Fig. 1) use
# JSD(α_a, α_b) in the same objective ("L = TVD(ŷa, ŷb) − λJSD(αa, αb)").
ADVERSARY_DIVERGENCES = {"kl": "W&P §4: L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a‖α_b)",
                         "jsd": "T&Š Eq. 6: L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b)"}


def _check_divergence(divergence: str) -> str:
    if divergence not in ADVERSARY_DIVERGENCES:
        raise ValueError(f"divergence must be one of {sorted(ADVERSARY_DIVERGENCES)}, got {divergence!r}")
    return divergence


def attention_divergence(adversary_attention: torch.Tensor, base_attention: torch.Tensor,
                         mask: torch.Tensor, divergence: str = "kl") -> torch.Tensor:
    """Per-instance ``(B,)`` KL(α_a‖α_b) (base floored at ``BASE_ATTENTION_FLOOR`` where it
    underflowed to 0 on a real token) or JSD(α_a, α_b) (natural log, ≤ ln 2; finite without a
    floor), over the real tokens of ``mask`` only."""
    mask = mask.bool()
    if _check_divergence(divergence) == "jsd":
        return jsd(adversary_attention, base_attention, mask)
    floored = torch.where(mask & (base_attention <= 0),
                          torch.full_like(base_attention, BASE_ATTENTION_FLOOR), base_attention)
    return kl_divergence(adversary_attention, floored, mask)


# Training protocols of the consistent adversary (issue 15). "wp" is W&P's own code
# (github.com/sarahwie/attention @ d867a2b):
# * schedule: run_adversarial.sh passes ``--n_iters 80`` (80 epochs); Trainers/TrainerBC.py
#   ``train_adversarial`` (l. 63–124) keeps the epoch with the lowest TRAINING loss (``loss_tr <
#   best_loss``, l. 89) and stops after 10 epochs without a decrease (``n_fail >= 10``, l. 99–100;
#   ``break``, l. 123–124); no dev set is used for selection.
# * TVD scale: common_code/metrics.py l. 12–13 ``batch_tvd = (0.5 * |σ(z_a) − ŷ_b|).sum()`` on the
#   positive-class probability only, i.e. half the binary TVD ½Σ_c|p_c − q_c| = |p − q| that
#   :func:`hf_attn.core.measures.tvd` computes. Their L = ½·TVD − λ·KL is ½·(TVD − 2λ·KL): W&P's λ is our
#   "fast" λ/2 (model/Binary_Classification.py l. 125–127; both terms are batch sums, KLDivLoss
#   with reduction="sum", so the λ ratio equals the per-instance-mean one).
# * class weighting: model/Binary_Classification.py l. 132–133 ``weight = y·pos_weight + (1 − y)``,
#   ``loss = (loss_orig * weight).mean(1).sum()`` with the scalar batch objective ``loss_orig``: the
#   whole batch objective is multiplied by Σ_i w_i (gold labels y, pos_weight = #neg/#pos of the
#   training split, Trainers/DatasetBC.py l. 23–25). Here: mean_i(w_i) · mean_i(ℓ_i) (their value
#   divided by B², a constant that Adam ignores).
# "fast" is this package's earlier protocol: the base's epochs (8 on SST), full TVD, no class
# weights, the checkpoint with the lowest dev objective.
ADVERSARY_PROTOCOLS = {
    "wp": {"max_epochs": 80, "patience": 10, "tvd_scale": 0.5, "class_weighted": True,
           "selection": "train_objective"},
    "fast": {"max_epochs": None, "patience": None, "tvd_scale": 1.0, "class_weighted": False,
             "selection": "dev_objective"},
}


def adversary_protocol(protocol: str = "fast", **overrides) -> dict:
    """The settings of ``protocol`` ("wp" or "fast", see ``ADVERSARY_PROTOCOLS``) with explicit
    ``overrides`` (``max_epochs``, ``patience``, ``tvd_scale``, ``class_weighted``, ``selection``;
    None leaves the protocol's value). ``max_epochs`` None = the base's epochs."""
    if protocol not in ADVERSARY_PROTOCOLS:
        raise ValueError(f"protocol must be one of {sorted(ADVERSARY_PROTOCOLS)}, got {protocol!r}")
    out = dict(ADVERSARY_PROTOCOLS[protocol], name=protocol)
    for key, value in overrides.items():
        if key not in out or key == "name":
            raise ValueError(f"unknown adversary protocol field {key!r}")
        if value is not None:
            out[key] = value
    if out["selection"] not in ("train_objective", "dev_objective"):
        raise ValueError(f"selection must be 'train_objective' or 'dev_objective', got {out['selection']!r}")
    if out["tvd_scale"] <= 0:
        raise ValueError(f"tvd_scale must be > 0, got {out['tvd_scale']}")
    if out["max_epochs"] is not None and out["max_epochs"] < 1:
        raise ValueError(f"max_epochs must be >= 1, got {out['max_epochs']}")
    if out["patience"] is not None and out["patience"] < 1:
        raise ValueError(f"patience must be >= 1, got {out['patience']}")
    return out


def consistent_adversary_loss(adversary_probs: torch.Tensor, base_probs: torch.Tensor,
                              adversary_attention: torch.Tensor, base_attention: torch.Tensor,
                              mask: torch.Tensor, lam: float, reduction: str = "mean",
                              divergence: str = "kl", tvd_scale: float = 1.0,
                              weights: torch.Tensor | None = None):
    """W&P §4 Eq. (3): L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a ‖ α_b) per instance; with
    ``divergence="jsd"`` T&Š Eq. 6: L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b).

    Args:
        adversary_probs, base_probs: ``(B, C)`` class probabilities.
        adversary_attention, base_attention: ``(B, T)`` distributions over the real tokens.
        mask: ``(B, T)`` True on real tokens: pads are dropped before the log (0·log 0 = 0).
        lam: λ ≥ 0.
        reduction: ``"mean"`` → ``()``, ``"none"`` → ``(B,)``.
        divergence: ``"kl"`` (W&P, the default) or ``"jsd"`` (T&Š).
        tvd_scale: factor on the TVD term: 1 (full TVD ½Σ_c|p_c − q_c|) or 0.5 (W&P's code:
            ½|p_1 − q_1| = half the binary TVD), so L = tvd_scale·TVD − λ·div.
        weights: optional ``(B,)`` class weights (W&P: 1 for negatives, #neg/#pos for positives);
            with ``reduction="mean"`` the loss is mean(weights)·mean(L), W&P's batch-level
            weighting (their code multiplies the scalar batch objective by Σ_i w_i).

    Returns ``(loss, tvd (B,), divergence (B,))`` (the KL or the JSD). Never NaN: for KL, where the
    base attention is exactly 0 on a real token it is floored at ``BASE_ATTENTION_FLOOR`` (KL stays
    finite); JSD is finite as it is.
    """
    if lam < 0:
        raise ValueError(f"lambda must be >= 0, got {lam}")
    if tvd_scale <= 0:
        raise ValueError(f"tvd_scale must be > 0, got {tvd_scale}")
    div = attention_divergence(adversary_attention, base_attention, mask, divergence)
    distance = tvd(adversary_probs, base_probs)
    loss = tvd_scale * distance - lam * div
    if reduction == "mean":
        loss = loss.mean()
        if weights is not None:
            loss = loss * weights.to(loss.dtype).mean()
    elif reduction != "none":
        raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")
    elif weights is not None:
        raise ValueError("weights (W&P's batch-level class weighting) need reduction='mean'")
    return loss, distance, div


# ---------------------------------------------------------------------------------------------
# data plumbing: extra per-instance columns (guides, base outputs), padded per batch
class ColumnPaddingCollator:
    """``DataCollatorWithPadding`` plus float columns: per-token columns (``token_columns``, lists
    of length T_i) are right-padded with 0 to the batch's T; per-instance vectors
    (``vector_columns``) are stacked. Shapes: ``(B, T)`` and ``(B, C)``."""

    def __init__(self, tokenizer, token_columns=(), vector_columns=()):
        self.base = DataCollatorWithPadding(tokenizer)
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


@torch.no_grad()
def model_outputs(model, encoded_split, batch_size: int = 256, progress: bool = False,
                  desc: str = "model outputs") -> tuple[list[np.ndarray], np.ndarray]:
    """Attention (a list of ``(T_i,)`` arrays, real tokens only) and class probabilities
    ``(N, C)`` of ``model`` on an encoded split (in dataset order). Batched by length."""
    model.eval()
    ids = encoded_split["input_ids"]
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    order = np.argsort(lengths, kind="stable")
    attention: list[np.ndarray | None] = [None] * len(ids)
    probs = np.zeros((len(ids), model.config.num_labels), dtype=np.float64)
    starts = range(0, len(order), batch_size)
    for start in tqdm(starts, desc=desc, disable=not progress, leave=False):
        rows = order[start:start + batch_size]
        width = int(lengths[rows].max())
        input_ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for j, r in enumerate(rows):
            input_ids[j, :lengths[r]] = torch.as_tensor(ids[int(r)])
            mask[j, :lengths[r]] = 1
        out = model(input_ids=input_ids, attention_mask=mask)
        alpha = out.attentions.double().numpy()
        probs[rows] = out.logits.double().softmax(-1).numpy()
        for j, r in enumerate(rows):
            attention[int(r)] = alpha[j, :lengths[r]].copy()
    return attention, probs


def load_model(model_dir: str):
    """An hf_attn model folder → (model in eval mode, its tokenizer)."""
    return load_model_folder(model_dir, expected_type=None)


# ---------------------------------------------------------------------------------------------
# a Trainer run with extra columns (shared by the guided MLP and the adversary)
def _train_with_columns(settings: TrainSettings, output_dir: str, task: TaskData,
                        tokenizer: PreTrainedTokenizerFast, columns: dict[str, dict[str, list]],
                        token_columns=(), vector_columns=(), trainer_class=AttnTrainer,
                        trainer_kwargs=None, selection=("roc_auc", True), extra_run=None,
                        test_hook=None, progress: bool = True, callbacks=()) -> dict:
    """Like :func:`hf_attn.training.engine.train` (same optimiser, defaults, checkpoints, resume, output
    files) but with the tokenizer given (so that columns line up with the tokens) and per-split
    extra ``columns`` ({split: {name: values}}) handed to the model/trainer by the collator."""
    settings.validate()
    metrics_path = os.path.join(output_dir, "metrics.json")
    if os.path.exists(metrics_path):
        with open(metrics_path, encoding="utf-8") as f:
            return json.load(f)
    os.makedirs(output_dir, exist_ok=True)
    encoded = tokenize_splits(task, tokenizer, settings.max_length)
    for split, named in columns.items():
        for name, values in named.items():
            if len(values) != len(encoded[split]):
                raise ValueError(f"{split}: column {name!r} has {len(values)} rows, split {len(encoded[split])}")
            encoded[split] = encoded[split].add_column(name, [np.asarray(v, dtype=np.float32).tolist()
                                                              for v in values])
    model, info = build_model(settings, tokenizer, task)
    metric, greater = selection
    args = TrainingArguments(
        output_dir=os.path.join(output_dir, "checkpoints"),
        per_device_train_batch_size=settings.batch_size, per_device_eval_batch_size=256,
        num_train_epochs=settings.epochs, learning_rate=settings.learning_rate,
        weight_decay=settings.weight_decay, max_grad_norm=settings.max_grad_norm,
        lr_scheduler_type="constant", warmup_steps=0,
        eval_strategy="epoch", save_strategy="epoch", save_total_limit=1,
        load_best_model_at_end=True, metric_for_best_model=metric, greater_is_better=greater,
        seed=settings.seed, data_seed=settings.seed, logging_strategy="steps", logging_steps=50,
        report_to="none", disable_tqdm=not progress, dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(), remove_unused_columns=False,
        train_sampling_strategy="group_by_length")
    trainer = trainer_class(
        model=model, args=args, train_dataset=encoded["train"], eval_dataset=encoded["validation"],
        data_collator=ColumnPaddingCollator(tokenizer, token_columns, vector_columns),
        processing_class=tokenizer, compute_metrics=_compute_metrics, callbacks=list(callbacks) or None,
        **(trainer_kwargs or {}))
    last = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=last)
    train_seconds = time.perf_counter() - start
    test = trainer.predict(encoded["test"], metric_key_prefix="test")
    dev = trainer.evaluate(encoded["validation"], metric_key_prefix="dev")
    trainer.save_model(output_dir)
    tokenizer.save_pretrained(output_dir)
    wanted = ("accuracy", "f1", "macro_f1", "roc_auc")
    metrics = {f"{prefix}_{name}": float(values[f"{prefix}_{name}"])
               for prefix, values in (("test", test.metrics), ("dev", dev)) for name in wanted}
    for prefix, values in (("test", test.metrics), ("dev", dev)):
        if f"{prefix}_loss" in values:
            metrics[f"{prefix}_loss"] = float(values[f"{prefix}_loss"])
    if test_hook is not None:
        metrics.update(test_hook(trainer.model, encoded["test"]))
    metrics.update({"best_checkpoint": os.path.basename(trainer.state.best_model_checkpoint or ""),
                    "train_seconds": round(train_seconds, 2),
                    "epochs_trained": round(float(trainer.state.epoch or 0), 2),
                    "resumed_from": os.path.basename(last) if last else None})
    run = {"settings": asdict(settings), "task": task.name, "label_names": task.label_names,
           "split_sizes": {s: len(d) for s, d in task.splits.items()}, "notes": task.notes,
           "model": info | {"encoder": model.config.encoder, "attention": model.config.attention,
                            "variant": model.config.variant, "hidden_size": model.config.hidden_size,
                            "parameters": sum(p.numel() for p in model.parameters())},
           "selection": {"metric": metric, "greater_is_better": greater},
           "versions": environment_versions()} | (extra_run or {})
    write_json_atomic(os.path.join(output_dir, "run.json"), run)
    write_json_atomic(metrics_path, metrics)
    shutil.rmtree(args.output_dir, ignore_errors=True)
    return metrics


def _task_for(settings: TrainSettings, task: TaskData | None) -> TaskData:
    return task or task_of(settings)


# ---------------------------------------------------------------------------------------------
# §3.2 uniform baseline and §3.3 seed models
def uniform_settings(base: TrainSettings) -> TrainSettings:
    """W&P §3.2: the base setup with attention frozen to uniform."""
    return replace(base, attention="uniform")


def seed_run_dir(runs_dir: str, seed: int) -> str:
    return os.path.join(runs_dir, f"seed-{seed}")


def train_seeds(base_dir: str, runs_dir: str, num_seeds: int = 8, task: TaskData | None = None,
                progress: bool = True, first_seed: int | None = None) -> dict[int, dict]:
    """W&P §3.3: train ``num_seeds`` models identical to the base except for ``seed`` (seeds
    base+1 … base+N unless ``first_seed``) into ``runs_dir/seed-S``. Finished runs are skipped, a
    half-finished one resumes. Returns {seed: metrics}."""
    if num_seeds < 1:
        raise ValueError(f"num_seeds must be >= 1, got {num_seeds}")
    base = settings_from_run(base_dir)
    start = base.seed + 1 if first_seed is None else first_seed
    seeds = list(range(start, start + num_seeds))
    results = {}
    bar = tqdm(seeds, desc="seed models", disable=not progress)
    for seed in bar:
        bar.set_postfix(seed=seed)
        out = seed_run_dir(runs_dir, seed)
        if not os.path.exists(os.path.join(out, "metrics.json")):
            task = _task_for(base, task)
        results[seed] = train(replace(base, seed=seed), out, task=task, progress=False)
        bar.set_postfix(seed=seed, test_f1=round(results[seed]["test_f1"], 3))
    return results


# ---------------------------------------------------------------------------------------------
# §4 model-consistent adversary
class ConsistentAdversaryTrainer(AttnTrainer):
    """W&P §4: trains M_a against a fixed base M_b with L = TVD(ŷ_a, ŷ_b) − λ·KL(α_a ‖ α_b)
    (``divergence="jsd"``: T&Š Eq. 6, L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b)).

    The batch carries the base's class probabilities ``base_probs (B, C)`` and attention
    ``base_attention (B, T)`` (precomputed once, padded by :class:`ColumnPaddingCollator`). Gold
    labels are not used by the loss. On evaluation the same objective is the ``eval_loss`` (the
    dev objective selects the checkpoint)."""

    def __init__(self, *args, lam: float = 0.001, divergence: str = "kl", tvd_scale: float = 1.0,
                 class_weights=None, **kwargs):
        super().__init__(*args, **kwargs)
        if lam < 0:
            raise ValueError(f"lambda must be >= 0, got {lam}")
        self.lam = float(lam)
        self.divergence = _check_divergence(divergence)
        self.tvd_scale = float(tvd_scale)
        # W&P's class weights per gold label (None: unweighted); see ADVERSARY_PROTOCOLS
        self.adv_class_weights = None if class_weights is None else torch.as_tensor(class_weights, dtype=torch.float32)
        self._epoch_objective = [0.0, 0]  # running training objective since the last evaluation

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        inputs = dict(inputs)
        base_probs = inputs.pop("base_probs")
        base_attention = inputs.pop("base_attention")
        labels = inputs.pop("labels", None)
        outputs = model(**inputs)
        divergence = getattr(self, "divergence", "kl")
        class_weights = getattr(self, "adv_class_weights", None)
        weights = None
        if class_weights is not None and labels is not None:
            weights = class_weights.to(labels.device)[labels.long()]
        loss, distance, div = consistent_adversary_loss(
            outputs.logits.softmax(-1), base_probs, outputs.attentions, base_attention,
            inputs["attention_mask"], self.lam, divergence=divergence,
            tvd_scale=getattr(self, "tvd_scale", 1.0), weights=weights)
        if model.training:
            sums = getattr(self, "_adv_parts", None) or {"tvd": 0.0, "div": 0.0, "n": 0}
            sums["tvd"] += float(distance.detach().mean())
            sums["div"] += float(div.detach().mean())
            sums["n"] += 1
            self._adv_parts = sums
            running = getattr(self, "_epoch_objective", None) or [0.0, 0]
            running[0] += float(loss.detach())
            running[1] += 1
            self._epoch_objective = running
        return (loss, outputs) if return_outputs else loss

    def evaluation_loop(self, *args, **kwargs):
        """Adds ``{prefix}_train_objective`` to the evaluation metrics (before the callbacks see
        them): the mean (class-weighted) training objective over the batches since the previous
        evaluation, i.e. over the epoch just finished. W&P keep the epoch with the lowest training
        loss and stop after 10 epochs without a decrease (Trainers/TrainerBC.py l. 89–100, 123–124)."""
        output = super().evaluation_loop(*args, **kwargs)
        total, count = getattr(self, "_epoch_objective", None) or [0.0, 0]
        if count:
            prefix = kwargs.get("metric_key_prefix", args[4] if len(args) > 4 else "eval")
            output.metrics[f"{prefix}_train_objective"] = total / count
            self._epoch_objective = [0.0, 0]
        return output

    def log(self, logs, *args, **kwargs):
        parts = getattr(self, "_adv_parts", None)
        if parts and parts["n"] and "loss" in logs:
            logs["tvd_to_base"] = round(parts["tvd"] / parts["n"], 4)
            logs[f"{getattr(self, 'divergence', 'kl')}_to_base"] = round(parts["div"] / parts["n"], 4)
            self._adv_parts = None
        super().log(logs, *args, **kwargs)


def protocol_tag(protocol: str = "fast", max_epochs: int | None = None) -> str:
    """Folder-name tag of an adversary protocol: "" for "fast" (the folders of earlier versions),
    "wp" for W&P's, "wp-e30" for W&P's with another epoch cap."""
    proto = adversary_protocol(protocol, max_epochs=max_epochs)
    if proto["name"] == "fast":
        return ""
    default = ADVERSARY_PROTOCOLS[proto["name"]]["max_epochs"]
    return proto["name"] + ("" if proto["max_epochs"] == default else f"-e{proto['max_epochs']}")


def adversary_run_dir(runs_dir: str, lam: float, seed: int | None = None, tag: str = "") -> str:
    """``adversary-lambda-λ`` (the base's seed), ``…-seedS`` for another seed; a protocol
    :func:`protocol_tag` ``tag`` is inserted after λ (``adversary-lambda-0.001-wp-seed1``)."""
    return os.path.join(runs_dir, f"adversary-lambda-{lam:g}" + (f"-{tag}" if tag else "")
                        + ("" if seed is None else f"-seed{seed}"))


def divergence_to_base(model, base_attention, base_probs, encoded_split) -> dict[str, np.ndarray]:
    """Per-instance JSD(α_m, α_b), TVD(ŷ_m, ŷ_b) and KL(α_m‖α_b) of ``model`` to precomputed base
    outputs (``base_attention`` a list of ``(T_i,)``, ``base_probs (N, C)``)."""
    attention, probs = model_outputs(model, encoded_split)
    a, mask = pad_ragged(attention)
    b, _ = pad_ragged(base_attention)
    floored = np.where(mask & (b <= 0), BASE_ATTENTION_FLOOR, b)
    return {"jsd": jsd(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(mask)).numpy(),
            "kl": kl_divergence(torch.from_numpy(a), torch.from_numpy(floored), torch.from_numpy(mask)).numpy(),
            "tvd": tvd(torch.from_numpy(probs), torch.from_numpy(np.asarray(base_probs))).numpy(),
            "probs": probs, "attention": attention}


def pad_ragged(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """List of ``(T_i,)`` arrays → ``(N, T_max)`` float64 zero-padded array and its bool mask."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    out = np.zeros((len(rows), int(lengths.max()) if len(rows) else 0), dtype=np.float64)
    mask = np.arange(out.shape[1])[None, :] < lengths[:, None]
    out[mask] = np.concatenate(rows) if len(rows) else []
    return out, mask


def base_columns(base_dir: str, task: TaskData, progress: bool = True):
    """The base's tokenizer, settings and per-split outputs {split: (attention list, probs)}."""
    model, tokenizer = load_model(base_dir)
    settings = settings_from_run(base_dir)
    encoded = tokenize_splits(task, tokenizer, settings.max_length)
    outputs = {split: model_outputs(model, encoded[split], progress=progress, desc=f"base on {split}")
               for split in SPLITS}
    return tokenizer, settings, outputs


def train_consistent_adversary(base_dir: str, output_dir: str, lam: float, task: TaskData | None = None,
                               epochs: int | None = None, seed: int | None = None,
                               progress: bool = True, _base=None, divergence: str = "kl",
                               protocol: str = "fast", max_epochs: int | None = None,
                               patience: int | None = None, tvd_scale: float | None = None,
                               class_weighted: bool | None = None, selection: str | None = None) -> dict:
    """W&P §4: train M_a (the base's architecture and settings, fresh initialisation) against the
    fixed base in ``base_dir``. ``metrics.json`` adds test ``mean_jsd_to_base``,
    ``mean_tvd_to_base``, ``mean_kl_to_base``, the objective, ``divergence`` and ``protocol``.
    ``divergence="jsd"`` trains with T&Š's Eq. 6 (TVD − λ·JSD) instead of W&P's TVD − λ·KL (the
    default); give it its own ``output_dir``: a finished folder is returned as is.

    ``protocol`` (see ``ADVERSARY_PROTOCOLS``): ``"fast"`` (default here) trains the base's epochs
    (``epochs`` overrides) with L = TVD − λ·KL and keeps the checkpoint with the lowest dev
    objective; ``"wp"`` is W&P's code: up to 80 epochs, the epoch with the lowest training objective
    kept, stopped after 10 epochs without a decrease, L = ½·TVD − λ·KL (W&P's λ = fast λ / 2),
    class-weighted (W&P's batch-level weights). ``max_epochs``, ``patience``, ``tvd_scale``,
    ``class_weighted`` and ``selection`` override single fields (``max_epochs`` wins over ``epochs``)."""
    _check_divergence(divergence)
    proto = adversary_protocol(protocol, max_epochs=max_epochs, patience=patience, tvd_scale=tvd_scale,
                               class_weighted=class_weighted, selection=selection)
    if os.path.exists(os.path.join(output_dir, "metrics.json")):
        with open(os.path.join(output_dir, "metrics.json"), encoding="utf-8") as f:
            metrics = json.load(f)
        if metrics.get("divergence", "kl") != divergence:
            raise ValueError(f"{output_dir} holds an adversary trained with divergence "
                             f"{metrics.get('divergence', 'kl')!r}, not {divergence!r}: use another folder")
        found = metrics.get("protocol", {"name": "fast"})
        if found.get("name") != proto["name"] or (proto["max_epochs"] and found.get("max_epochs") != proto["max_epochs"]):
            raise ValueError(f"{output_dir} holds an adversary trained with protocol {found.get('name')!r} "
                             f"(max_epochs {found.get('max_epochs')}), not {proto['name']!r} (max_epochs "
                             f"{proto['max_epochs']}): use another folder (see protocol_tag)")
        return metrics
    base_settings = settings_from_run(base_dir)
    task = _task_for(base_settings, task)
    tokenizer, base_settings, outputs = _base or base_columns(base_dir, task, progress)
    run_epochs = proto["max_epochs"] or epochs or base_settings.epochs
    settings = replace(base_settings, epochs=run_epochs,
                       seed=base_settings.seed if seed is None else seed, model_selection="roc_auc")
    proto["epochs"] = run_epochs
    columns = {split: {"base_attention": outputs[split][0], "base_probs": list(outputs[split][1])}
               for split in SPLITS}
    class_weights = None
    if proto["class_weighted"]:
        class_weights = class_weights_for(np.asarray(task.splits["train"]["label"]), task.num_labels)
        proto["class_weights"] = [float(w) for w in class_weights]
    scale = proto["tvd_scale"]
    callbacks = []
    if proto["patience"]:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=int(proto["patience"])))
    objective = ADVERSARY_DIVERGENCES[divergence]
    if scale != 1.0:
        objective = objective.replace("L = TVD", f"L = {scale:g}·TVD")

    def test_hook(model, encoded_test):
        d = divergence_to_base(model, outputs["test"][0], outputs["test"][1], encoded_test)
        return {"mean_jsd_to_base": float(d["jsd"].mean()), "mean_tvd_to_base": float(d["tvd"].mean()),
                "mean_kl_to_base": float(d["kl"].mean()),
                "test_objective": float((scale * d["tvd"] - lam * d[divergence]).mean()), "lambda": lam,
                "divergence": divergence, "objective": objective, "protocol": proto}

    metric = "train_objective" if proto["selection"] == "train_objective" else "loss"
    return _train_with_columns(
        settings, output_dir, task, tokenizer, columns, token_columns=("base_attention",),
        vector_columns=("base_probs",), trainer_class=ConsistentAdversaryTrainer,
        trainer_kwargs={"lam": lam, "divergence": divergence, "tvd_scale": scale, "class_weights": class_weights},
        selection=(metric, False), test_hook=test_hook, callbacks=callbacks,
        extra_run={"wp": {"kind": "consistent_adversary", "lambda": lam, "divergence": divergence,
                          "protocol": proto, "base_dir": os.path.abspath(base_dir)}}, progress=progress)


# ---------------------------------------------------------------------------------------------
# §3.4 diagnostic MLP
def mlp_settings(base: TrainSettings, hidden_size: int | None = None) -> TrainSettings:
    """W&P §3.4: the base setup with the encoder replaced by a per-token affine layer + tanh
    (``encoder="average"``, ``average_activation="tanh"``) and additive attention (used only by
    the TRAINED MLP guide; with a fixed guide the override replaces it)."""
    return replace(base, encoder="average", average_activation="tanh", attention="additive",
                   variant="base", hidden_size=hidden_size)


def guide_run_dir(runs_dir: str, guide: str, seed: int | None = None, tag: str = "") -> str:
    """``mlp-guide-G``; ``…-seedS`` for the MLP guided by the adversary trained with seed S; the
    adversary protocol's ``tag`` (:func:`protocol_tag`) after G for the ADVERSARY guide."""
    return os.path.join(runs_dir, f"mlp-guide-{guide}" + (f"-{tag}" if tag and guide == "adversary" else "")
                        + ("" if seed is None else f"-seed{seed}"))


def uniform_guide(lengths) -> list[np.ndarray]:
    return [np.full(int(n), 1.0 / int(n)) for n in lengths]


def train_guided_mlp(base_dir: str, output_dir: str, guide: str, guide_source_dir: str | None = None,
                     task: TaskData | None = None, epochs: int | None = None,
                     hidden_size: int | None = None, progress: bool = True) -> dict:
    """W&P §3.4: train the diagnostic MLP with ``guide`` ∈ uniform | trained | base | adversary.

    ``base``/``adversary`` take the attention of the model in ``guide_source_dir`` (the base
    BiLSTM, resp. the λ = 0.001 consistent adversary) on every split; ``uniform`` is 1/T; for
    ``trained`` the MLP learns its own attention. The guide is passed as ``attention_weights``
    in training, model selection (dev) and testing."""
    if guide not in GUIDES:
        raise ValueError(f"guide must be one of {GUIDES}, got {guide!r}")
    if os.path.exists(os.path.join(output_dir, "metrics.json")):
        with open(os.path.join(output_dir, "metrics.json"), encoding="utf-8") as f:
            return json.load(f)
    base_settings = settings_from_run(base_dir)
    task = _task_for(base_settings, task)
    _, tokenizer = load_model(base_dir)
    encoded = tokenize_splits(task, tokenizer, base_settings.max_length)
    columns: dict[str, dict[str, list]] = {}
    if guide == "uniform":
        columns = {s: {"attention_weights": uniform_guide(len(x) for x in encoded[s]["input_ids"])}
                   for s in SPLITS}
    elif guide in ("base", "adversary"):
        if guide_source_dir is None:
            raise ValueError(f"guide {guide!r} needs guide_source_dir (the model whose attention guides)")
        source, source_tokenizer = load_model(guide_source_dir)
        if source_tokenizer.get_vocab() != tokenizer.get_vocab():
            raise ValueError(f"{guide_source_dir} has another vocabulary than {base_dir}: guides would "
                             "not line up with the tokens")
        columns = {s: {"attention_weights": model_outputs(source, encoded[s], progress=progress,
                                                          desc=f"{guide} guide on {s}")[0]}
                   for s in SPLITS}
    settings = replace(mlp_settings(base_settings, hidden_size), epochs=epochs or base_settings.epochs)
    return _train_with_columns(
        settings, output_dir, task, tokenizer, columns,
        token_columns=("attention_weights",) if columns else (),
        extra_run={"wp": {"kind": "diagnostic_mlp", "guide": guide,
                          "guide_source_dir": os.path.abspath(guide_source_dir) if guide_source_dir else None,
                          "base_dir": os.path.abspath(base_dir)}}, progress=progress)


# ---------------------------------------------------------------------------------------------
# CLI: hf-attn train-seeds
def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "train-seeds", help="train N copies of a model that differ only in seed (W&P §3.3)",
        description="Train N models identical to BASE_DIR's settings except the seed (base+1 … base+N) "
                    "into OUTPUT_DIR/seed-S. Rerun to resume; finished runs are skipped.")
    p.add_argument("base_dir")
    p.add_argument("--num-seeds", type=int, default=8)
    p.add_argument("--first-seed", type=int, default=None)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_run_train_seeds)


def _run_train_seeds(args) -> int:
    results = train_seeds(args.base_dir, args.output_dir, args.num_seeds, progress=not args.quiet,
                          first_seed=args.first_seed)
    print(json.dumps({seed: {k: round(v, 4) for k, v in m.items() if k in ("test_f1", "test_macro_f1",
                                                                           "test_accuracy")}
                      for seed, m in results.items()}, indent=2))
    return 0


__all__ = ["consistent_adversary_loss", "attention_divergence", "ADVERSARY_DIVERGENCES", "ADVERSARY_PROTOCOLS",
           "adversary_protocol", "protocol_tag",
           "ConsistentAdversaryTrainer", "ColumnPaddingCollator", "train_seeds", "train_consistent_adversary", "train_guided_mlp", "uniform_settings",
           "mlp_settings", "model_outputs", "pad_ragged", "divergence_to_base", "base_columns",
           "load_model", "classification_metrics", "DEFAULT_LAMBDAS", "WP_TABLE3_SST", "GUIDES"]
