"""Training side of the Wiegreffe & Pinter (2019) battery: which helper models, with which settings,
into which folders. Every one is trained by ``hf_attn.training.engine.train`` (same optimiser,
checkpoints, kill-safe resume, output files); what a helper run adds goes in its
:class:`~hf_attn.training.engine.TrainingHooks`.

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
  :func:`train_consistent_adversary`; the objective itself is in
  :mod:`hf_attn.methods.consistent_adversary`). The base's predictions and attention are
  precomputed once per split and fed as dataset columns. ``divergence="jsd"`` selects Tutek &
  Šnajder's Eq. 6 instead, L = TVD(ŷ_a, ŷ_b) − λ·JSD(α_a, α_b) (their Fig. 1); W&P's KL stays the
  default. ``protocol="wp"`` trains it as W&P's code does (≤ 80 epochs, early stopping on the
  training objective, ½·TVD, class-weighted; see ``ADVERSARY_PROTOCOLS``); ``protocol="fast"``
  (this function's default; the reproduce report uses "wp") is the base's epochs, dev-objective
  selection, full TVD, unweighted.

All models are saved like ``hf_attn.training.engine.train`` saves them (model + tokenizer + ``metrics.json``
+ ``run.json``); a folder with ``metrics.json`` is a finished run and is returned as is.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import replace

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import EarlyStoppingCallback

from hf_attn.core.published import WP_TABLE3_SST  # noqa: F401 (W&P Table 3: the diagnostic MLP's SST F1)
from hf_attn.data.tasks import TaskData
from hf_attn.methods.consistent_adversary import (ADVERSARY_DIVERGENCES, ADVERSARY_PROTOCOLS,  # noqa: F401
                                                  BASE_ATTENTION_FLOOR, adversary_protocol,
                                                  attention_divergence, check_divergence,
                                                  consistent_adversary_loss, distances_to_base,
                                                  protocol_tag)
from hf_attn.models.loading import load_model_folder
from hf_attn.training.engine import (AttnTrainer, ColumnPaddingCollator, TrainingHooks,  # noqa: F401
                                     TrainSettings, class_weights_for, classification_metrics,
                                     settings_from_run, task_of, tokenize_splits, train)

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
GUIDES = ("uniform", "trained", "base", "adversary")
DEFAULT_LAMBDAS = (0.001, 0.01, 0.1, 1.0, 10.0)


# ---------------------------------------------------------------------------------------------
# model outputs
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
        self.divergence = check_divergence(divergence)
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


def adversary_run_dir(runs_dir: str, lam: float, seed: int | None = None, tag: str = "") -> str:
    """``adversary-lambda-λ`` (the base's seed), ``…-seedS`` for another seed; a protocol
    :func:`protocol_tag` ``tag`` is inserted after λ (``adversary-lambda-0.001-wp-seed1``)."""
    return os.path.join(runs_dir, f"adversary-lambda-{lam:g}" + (f"-{tag}" if tag else "")
                        + ("" if seed is None else f"-seed{seed}"))


def divergence_to_base(model, base_attention, base_probs, encoded_split) -> dict[str, np.ndarray]:
    """Per-instance JSD(α_m, α_b), TVD(ŷ_m, ŷ_b) and KL(α_m‖α_b) of ``model`` to precomputed base
    outputs (``base_attention`` a list of ``(T_i,)``, ``base_probs (N, C)``), with the model's own
    ``probs`` and ``attention`` (:func:`hf_attn.methods.consistent_adversary.distances_to_base`)."""
    attention, probs = model_outputs(model, encoded_split)
    return distances_to_base(attention, probs, base_attention, base_probs) | {"probs": probs,
                                                                              "attention": attention}


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
                               class_weighted: bool | None = None, selection: str | None = None,
                               keep_checkpoints: bool = False) -> dict:
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
    ``class_weighted`` and ``selection`` override single fields (``max_epochs`` wins over ``epochs``).
    ``keep_checkpoints``: keep ``output_dir/checkpoints`` after the run (as ``engine.train``)."""
    check_divergence(divergence)
    proto = adversary_protocol(protocol, max_epochs=max_epochs, patience=patience, tvd_scale=tvd_scale,
                               class_weighted=class_weighted, selection=selection)
    finished = _finished_adversary(output_dir, divergence, proto)
    if finished is not None:
        return finished
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

    # "loss" on dev is the trainer's objective; lower is better for both
    metric = "train_objective" if proto["selection"] == "train_objective" else "loss"
    hooks = TrainingHooks(
        tokenizer=tokenizer, columns=columns, token_columns=("base_attention",),
        vector_columns=("base_probs",), trainer_class=ConsistentAdversaryTrainer,
        trainer_kwargs={"lam": lam, "divergence": divergence, "tvd_scale": scale, "class_weights": class_weights},
        selection=(metric, False), callbacks=tuple(callbacks), test_metrics=test_hook,
        run_record={"selection": {"metric": metric, "greater_is_better": False},
                    "wp": {"kind": "consistent_adversary", "lambda": lam, "divergence": divergence,
                           "protocol": proto, "base_dir": os.path.abspath(base_dir)}})
    return train(settings, output_dir, task=task, progress=progress, keep_checkpoints=keep_checkpoints,
                 hooks=hooks)


def _finished_adversary(output_dir: str, divergence: str, proto: dict) -> dict | None:
    """The metrics of a finished adversary in ``output_dir``, or None if there is none; an adversary
    trained with another divergence or protocol is refused (its folder is not this run's)."""
    if not os.path.exists(os.path.join(output_dir, "metrics.json")):
        return None
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
                     hidden_size: int | None = None, progress: bool = True,
                     keep_checkpoints: bool = False) -> dict:
    """W&P §3.4: train the diagnostic MLP with ``guide`` ∈ uniform | trained | base | adversary.

    ``base``/``adversary`` take the attention of the model in ``guide_source_dir`` (the base
    BiLSTM, resp. the λ = 0.001 consistent adversary) on every split; ``uniform`` is 1/T; for
    ``trained`` the MLP learns its own attention. The guide is passed as ``attention_weights``
    in training, model selection (dev ROC-AUC, whatever the base's ``model_selection``) and testing."""
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
    hooks = TrainingHooks(
        tokenizer=tokenizer, columns=columns, token_columns=("attention_weights",) if columns else (),
        selection=("roc_auc", True),
        run_record={"selection": {"metric": "roc_auc", "greater_is_better": True},
                    "wp": {"kind": "diagnostic_mlp", "guide": guide,
                           "guide_source_dir": os.path.abspath(guide_source_dir) if guide_source_dir else None,
                           "base_dir": os.path.abspath(base_dir)}})
    return train(settings, output_dir, task=task, progress=progress, keep_checkpoints=keep_checkpoints,
                 hooks=hooks)


# The objective's names (hf_attn.methods.consistent_adversary) and the collator (hf_attn.training.engine)
# stay importable from here.
__all__ = ["consistent_adversary_loss", "attention_divergence", "ADVERSARY_DIVERGENCES", "ADVERSARY_PROTOCOLS",
           "BASE_ATTENTION_FLOOR", "adversary_protocol", "protocol_tag", "ConsistentAdversaryTrainer",
           "ColumnPaddingCollator", "train_seeds", "train_consistent_adversary", "train_guided_mlp",
           "uniform_settings", "mlp_settings", "model_outputs", "divergence_to_base", "base_columns",
           "load_model", "classification_metrics", "seed_run_dir", "adversary_run_dir", "guide_run_dir",
           "DEFAULT_LAMBDAS", "WP_TABLE3_SST", "GUIDES", "SPLITS"]
