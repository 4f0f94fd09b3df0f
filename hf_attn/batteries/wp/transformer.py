"""Wiegreffe & Pinter (2019)'s sections (§3.2–3.4) over an adapter, and what only transformers
classifiers need: the one W&P driver (:func:`hf_attn.runs.wp.run_wp`) reads every model — the papers'
included — through :func:`split_forward` and the sections below; for a transformer the explained
attention is the ``[CLS]`` query row of one layer (default the last), mean over heads
(:class:`hf_attn.adapters.AttentionSpec`); interventions go through the model's adapter
(:mod:`hf_attn.adapters`).
Divergences between attention distributions are measured, as in the J&W battery on transformers
(:mod:`hf_attn.batteries.jw.battery`), on the explained row restricted to the *content* word
pieces (not ``[CLS]``/``[SEP]``/``[UNK]``/pads) and renormalised there.

1. **Uniform attention (W&P §3.2).** W&P train a second model whose attention is frozen to uniform
   and compare test F1 (positive class for binary tasks, as :mod:`hf_attn.batteries.wp.battery`). A
   transformer's attention cannot be removed and the model retrained cheaply, so here the uniform
   variant is an *intervention* on the fine-tuned model: the explained layer's ``[CLS]`` row of
   every head is replaced by the uniform distribution over the real (non-padding) tokens (specials
   included). Reported: F1 / macro F1 / accuracy of the model vs the uniform variant, and per
   instance TVD(ŷ_uniform, ŷ). Two further variants, both one batched forward: ``uniform_content``
   (each head keeps its own mass on the special tokens and spreads the rest uniformly over the
   content pieces — the convention of the J&W permutation/adversary on transformers) and
   ``uniform_every_layer`` (the ``[CLS]`` row of *every* layer uniform over the real tokens). The
   intervention is a stronger perturbation than W&P's retrained uniform model (the model never
   learned to work without its attention), so a large drop says the model *uses* the row, not that
   a model without attention would be worse.
2. **Seed variance (W&P §3.3).** Given fine-tuned models that differ from the base only in the
   fine-tuning seed (``seed_model_dirs``, or the ``seed-*`` folders of the runs folder), per
   instance JSD(α_seed, α_base) of the explained attention and TVD(ŷ_seed, ŷ_base); the max (W&P
   paper) or median (W&P code) over seeds against the max base attention, per gold class
   (``seed_variance.png`` = W&P Fig. 3, via :func:`hf_attn.batteries.wp.battery.plot_seed_variance`).
   No seed models: the section says ``"not run: no seed models given"``. Seeds are never trained here.
3. **Diagnostic MLP (W&P §3.4).** W&P's MLP: token embeddings → per-token affine + tanh (no
   context) → average weighted by a fixed per-instance *guide* distribution (in training and
   testing) → linear classifier. The same model class and training engine as the papers' models'
   MLP (:func:`hf_attn.training.wp.mlp_settings`, the ``attention_weights`` override fed by a guide
   column, :func:`hf_attn.training.engine.train` with :class:`~hf_attn.training.engine.TrainingHooks`)
   on the transformer's **content word pieces**, with the embedding matrix initialised from the
   transformer's own input word-piece embeddings and **trained** (as W&P's MLP, whose embeddings
   are trainable, and the papers' models'; ``mlp_freeze_embeddings`` freezes them). Guides:
   UNIFORM (1/n over the pieces), TRANSFORMER (the explained ``[CLS]`` row over the content pieces,
   renormalised; the analogue of W&P's BASE LSTM guide) and TRAINED MLP (the MLP's own learned
   additive attention). Test F1 per guide (``diagnostic_mlp.png``).

W&P §4 (the model-consistent adversary) is not part of this battery: it retrains the base
architecture against the base, i.e. fine-tunes new transformers. J&W's per-instance adversary on
transformers is in ``hf-attn analyze DIR --battery jw``.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import time
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from hf_attn.batteries.data import is_transformer_model_dir
from hf_attn.methods.adversary import restrict_to_content
from hf_attn.core.measures import jsd, tvd
from hf_attn.adapters import AttentionSpec

SPLITS = ("train", "validation", "test")
MLP_GUIDES = ("uniform", "transformer", "trained")
MLP_GUIDE_NAMES = {"uniform": "UNIFORM", "transformer": "TRANSFORMER [CLS]", "trained": "TRAINED MLP"}
SEED_STATUS_NOT_RUN = "not run: no seed models given"


# ----------------------------------------------------------------------------------------------
# settings


@dataclass
class TransformerWPSettings:
    """The transformer sections' view of :class:`~hf_attn.batteries.wp.battery.WPSettings`
    (:func:`settings_from_wp`, used by :func:`hf_attn.runs.wp.run_wp`).

    layer / heads: the explained row (:class:`hf_attn.adapters.AttentionSpec`; default the last
    layer, mean over heads). split: the split analysed (§3.2, §3.3). max_instances: only the first N
    instances of the split (None: all; the MLP is trained and tested on the full splits anyway).
    dataset: data of a folder without ``run.json`` (a name or path for
    :func:`hf_attn.data.tasks.load_task`). batch_size: instances per forward.
    uniform_every_layer: also the "uniform ``[CLS]`` row at every layer" variant (one more forward).
    seed_model_dirs: fine-tuned models differing from the base only in seed (W&P §3.3); empty: the
    ``seed-*`` folders of ``runs_dir`` (at most ``num_seeds``), none there: §3.3 not run.
    seed_statistic: "max" over seeds (W&P paper) or "median" (W&P code).
    diagnostic_mlp: run §3.4. mlp_guides: a subset of :data:`MLP_GUIDES`. mlp_epochs / mlp_seed:
    of every MLP (None: :class:`hf_attn.training.engine.TrainSettings`' 8 epochs, the BiLSTM MLP's).
    mlp_freeze_embeddings: keep the transformer's word-piece embeddings fixed (default: trained, as
    W&P). runs_dir: where the MLPs are trained and seed folders looked up (None: ``OUT/models``).
    train_missing: train missing MLPs (else a missing one is an error). progress: progress bars.
    """

    layer: int = -1
    heads: Literal["mean"] | int = "mean"
    split: str = "test"
    max_instances: int | None = None
    dataset: str = "sst"
    text_column: str = "text"
    label_column: str = "label"
    batch_size: int = 64
    uniform_every_layer: bool = True
    seed_model_dirs: tuple[str, ...] = ()
    num_seeds: int = 8
    seed_statistic: str = "max"
    diagnostic_mlp: bool = True
    mlp_guides: tuple[str, ...] = MLP_GUIDES
    mlp_epochs: int | None = None
    mlp_seed: int = 0
    mlp_freeze_embeddings: bool = False
    runs_dir: str | None = None
    train_missing: bool = True
    progress: bool = True
    device: str = "auto"
    precision: str = "float32"

    @property
    def spec(self) -> AttentionSpec:
        return AttentionSpec(layer=self.layer, heads=self.heads)

    def adapter(self, model, tokenizer, max_length: int | None = 512):
        """The adapter these settings describe (layer, heads, device, precision)."""
        from hf_attn.adapters import adapter_for

        return adapter_for(model, tokenizer, layer=self.layer, heads=self.heads, device=self.device,
                           precision=self.precision, max_length=max_length)

    def validate(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split must be train, validation or test, got {self.split!r}")
        if self.heads != "mean" and not (isinstance(self.heads, int) and self.heads >= 0):
            raise ValueError(f"heads must be 'mean' or a head index, got {self.heads!r}")
        if self.seed_statistic not in ("max", "median"):
            raise ValueError(f"seed_statistic must be 'max' or 'median', got {self.seed_statistic!r}")
        if self.batch_size < 1 or self.num_seeds < 0:
            raise ValueError(f"batch_size must be >= 1 and num_seeds >= 0, got {self.batch_size}, {self.num_seeds}")
        if self.max_instances is not None and self.max_instances < 1:
            raise ValueError(f"max_instances must be >= 1, got {self.max_instances}")
        if self.mlp_epochs is not None and self.mlp_epochs < 1:
            raise ValueError(f"mlp_epochs must be >= 1, got {self.mlp_epochs}")
        unknown = [g for g in self.mlp_guides if g not in MLP_GUIDES]
        if unknown or not self.mlp_guides:
            raise ValueError(f"mlp_guides must be a non-empty subset of {MLP_GUIDES}, got {tuple(self.mlp_guides)}")
        if isinstance(self.seed_model_dirs, str):
            raise ValueError("seed_model_dirs must be a tuple of folders, not one string")


def settings_from_wp(wp) -> TransformerWPSettings:
    """The battery's :class:`hf_attn.batteries.wp.battery.WPSettings` (what ``hf-attn analyze
    --battery wp`` parses) → :class:`TransformerWPSettings`: split, progress, runs folder, number of
    seeds, seed statistic, epochs (of the MLPs), ``--wp-no-train``, ``seed`` (the MLPs' seed) and
    the transformer fields (layer, heads, every-layer uniform, seed folders, instance limit,
    dataset) carry over; the λ sweep and the per-instance adversary options do not apply."""
    heads = "mean" if wp.transformer_heads == "mean" else int(wp.transformer_heads)
    return replace(TransformerWPSettings(), split=wp.split, progress=wp.progress, runs_dir=wp.runs_dir,
                   num_seeds=wp.num_seeds, seed_statistic=wp.seed_statistic, mlp_epochs=wp.epochs,
                   train_missing=wp.train_missing, mlp_seed=wp.seed, layer=wp.transformer_layer, heads=heads,
                   uniform_every_layer=wp.uniform_every_layer, seed_model_dirs=tuple(wp.seed_model_dirs),
                   max_instances=wp.max_instances, text_column=wp.text_column, label_column=wp.label_column,
                   device=wp.device, precision=wp.precision, batch_size=wp.batch_size,
                   diagnostic_mlp=wp.diagnostic_mlp, mlp_guides=tuple(wp.mlp_guides),
                   mlp_freeze_embeddings=wp.mlp_freeze_embeddings,
                   **({"dataset": wp.dataset} if wp.dataset is not None else {}))


# ----------------------------------------------------------------------------------------------
# §3.2: uniform [CLS] rows


def uniform_cls_rows(attention_mask: torch.Tensor, content: torch.Tensor | None = None,
                     own_rows: torch.Tensor | None = None) -> torch.Tensor:
    """W&P §3.2's uniform attention as a ``[CLS]`` row.

    Without ``content``: ``(B, T)`` uniform over the real (non-padding) tokens, 0 on pads. With
    ``content`` ``(B, T)`` bool and the layer's own rows ``own_rows`` ``(B, H, T)``: per head, the
    special tokens keep their own mass and the rest is spread uniformly over the content pieces
    (``(B, H, T)``; an instance without content pieces keeps its own row)."""
    real = attention_mask.to(torch.float32)
    if content is None:
        return real / real.sum(-1, keepdim=True).clamp_min(1.0)
    if own_rows is None:
        raise ValueError("uniform_cls_rows with content needs the layer's own rows (B, H, T)")
    own = own_rows.to(torch.float32)
    content_f = content.to(torch.float32).unsqueeze(1)  # (B, 1, T)
    special = (real.unsqueeze(1) - content_f).clamp_min(0.0)
    special_mass = (own * special).sum(-1, keepdim=True)  # (B, H, 1)
    count = content_f.sum(-1, keepdim=True)
    spread = (1.0 - special_mass) / count.clamp_min(1.0)
    rows = own * special + content_f * spread
    return torch.where(count > 0, rows, own)


def _pad_id(tokenizer) -> int:
    return int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)


def encode_texts(tokenizer, texts, max_length: int, keep: str = "start") -> list[list[int]]:
    """Texts → word-piece ids with the model's specials, cut to ``max_length`` keeping the
    ``"start"`` or (decoders) the ``"end"``, with the shared
    :class:`~hf_attn.adapters.contract.TruncationWarning` when a text is cut."""
    from hf_attn.adapters.contract import tokenize_texts

    texts = list(texts)
    if not texts:
        raise ValueError("no texts to analyse")
    return tokenize_texts(tokenizer, texts, max_length, keep=keep)[0]


def _length_batches(lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    order = np.argsort(lengths, kind="stable")
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


@torch.no_grad()
def forward_batch(adapter, batch, uniform: bool = True, every_layer: bool = True) -> dict[str, torch.Tensor]:
    """One padded batch through ``adapter``: the model's class probabilities (``probabilities``
    (B, C)), the explained row (``row`` (B, T)) and the same restricted to the content tokens and
    renormalised (``attention``); with ``uniform`` also the probabilities with the chosen layer's
    query rows of every head uniform over the real tokens (``uniform``), with the special tokens'
    own mass kept and the content uniform (``uniform_content``) and, with ``every_layer``, with the
    query rows of every layer uniform over the real tokens (``uniform_every_layer``). The last layer
    uses the adapter's exact fast path where it applies, other layers the full forward."""
    forward = adapter.forward(batch, rollout=False)
    row = forward.attention
    out = {"probabilities": forward.probabilities, "row": row,
           "attention": restrict_to_content(row, batch.content)}
    if not uniform:
        return out
    real_rows = uniform_cls_rows(batch.attention_mask)
    content_rows = uniform_cls_rows(batch.attention_mask, batch.content, forward.head_rows)
    heads = forward.head_rows.shape[1]
    out["uniform"] = adapter.logits_under(batch, real_rows.unsqueeze(1).unsqueeze(2).expand(-1, 1, heads, -1),
                                          True, forward)[:, 0].float().softmax(-1)
    out["uniform_content"] = adapter.logits_under(batch, content_rows.unsqueeze(1), True,
                                                  forward)[:, 0].float().softmax(-1)
    if every_layer:
        out["uniform_every_layer"] = adapter.logits_under_every_layer(batch, real_rows).float().softmax(-1)
    return out


def split_forward(adapter, sequences, batch_size: int = 64, uniform: bool = True, every_layer: bool = True,
                  progress: bool = False, desc: str = "forward", cache_dir: str | None = None,
                  accelerator="auto", record: dict | None = None) -> dict[str, np.ndarray]:
    """:func:`forward_batch` over ``sequences`` (id lists with specials) in length-sorted batches →
    numpy arrays in input order, each row's real positions first (padding on the right whatever the
    model's padding side): ``probabilities`` (and the uniform variants) ``(N, C)``, ``row`` /
    ``attention`` ``(N, W)``, ``content`` / ``real`` ``(N, W)``.

    Each batch is one shard of :func:`hf_attn.core.sharding.run_sharded`: under ``accelerate launch``
    the batches are split between the processes and gathered on every one (the same values as one
    process); with ``cache_dir`` each finished batch is kept there (keyed by the model's weights, the
    ids and the request) so a rerun resumes. ``record`` (a dict) receives the shards and the process
    that computed each (``shards``, ``shard_instances``, ``shards_by_process``)."""
    from hf_attn.core.sharding import cache_key, current_accelerator, run_sharded

    if accelerator == "auto":
        accelerator = current_accelerator()
    process = 0 if accelerator is None else int(accelerator.process_index)

    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    width = int(lengths.max())
    batches = _length_batches(lengths, batch_size)
    key = None
    if cache_dir is not None:
        from hf_attn.batteries.jw.common import weights_checksum

        ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences])
        key = cache_key("wp-forward", weights_checksum(adapter.model), lengths.tolist(),
                        hashlib.sha256(ids.tobytes()).hexdigest(), batch_size, uniform, every_layer,
                        adapter.describe()["text"], adapter.describe()["precision"])

    def compute(number: int, rows: np.ndarray) -> dict:
        batch = adapter.from_token_lists([sequences[int(r)] for r in rows])
        values = forward_batch(adapter, batch, uniform, every_layer)
        real = batch.attention_mask.bool().cpu().numpy()
        out = {"content": [c[m] for c, m in zip(batch.content.cpu().numpy(), real)]}
        for name, value in values.items():
            value = value.double().cpu().numpy()
            out[name] = [v[m] for v, m in zip(value, real)] if name in ("row", "attention") else value
        return out | {"process": np.asarray(process)}

    results = run_sharded(batches, compute, cache_dir=cache_dir, key=key, accelerator=accelerator,
                          progress=progress, desc=desc)
    result: dict[str, np.ndarray] = {"content": np.zeros((len(sequences), width), dtype=bool),
                                     "real": np.zeros((len(sequences), width), dtype=bool)}
    by_process: dict[int, list[int]] = {}
    for number, (rows, values) in enumerate(zip(batches, results)):
        by_process.setdefault(int(values["process"]), []).append(number)
        for name, value in values.items():
            if name in ("content", "process"):
                continue
            if name not in result:
                shape = (len(sequences), width) if name in ("row", "attention") else (len(sequences), value.shape[1])
                result[name] = np.zeros(shape)
            if name in ("row", "attention"):
                for j, r in enumerate(rows):
                    result[name][r, :lengths[r]] = value[j]
            else:
                result[name][rows] = value
        for j, r in enumerate(rows):
            result["content"][r, :lengths[r]] = values["content"][j]
            result["real"][r, :lengths[r]] = True
    if record is not None:
        record.update({"shards": len(batches), "shard_instances": batch_size,
                       "shards_by_process": {str(k): v for k, v in sorted(by_process.items())}})
    return result


def _f1s(metrics: dict) -> dict:
    return {"f1": metrics["f1"], "macro_f1": metrics["macro_f1"], "accuracy": metrics["accuracy"]}


UNIFORM_VARIANTS = {
    "uniform": "chosen layer, the explained row of every head uniform over the real tokens (special tokens "
               "included)",
    "uniform_content": "chosen layer, the explained row of every head: special tokens keep their own mass, the "
                       "rest uniform over the content tokens",
    "uniform_every_layer": "every layer, the explained row of every head uniform over the real tokens"}


def uniform_section(outputs: dict[str, np.ndarray], labels, split: str = "test") -> dict:
    """W&P §3.2 from :func:`split_forward` outputs: F1 (positive class; macro for C > 2), macro F1
    and accuracy of the model and of each uniform variant (computed by
    :func:`hf_attn.training.engine.classification_metrics`, as for the papers' models), the gaps, and
    per-instance TVD(ŷ_uniform, ŷ) (mean/median/std, share of changed predictions). The top-level
    ``uniform`` / ``f1_gap`` are the main variant (chosen layer, uniform over the real tokens)."""
    from hf_attn.training.engine import classification_metrics

    labels = np.asarray(labels)
    base = classification_metrics(outputs["probabilities"], labels)
    predictions = outputs["probabilities"].argmax(-1)
    variants = {}
    for name, description in UNIFORM_VARIANTS.items():
        if name not in outputs:
            continue
        m = classification_metrics(outputs[name], labels)
        distance = tvd(torch.from_numpy(outputs[name]), torch.from_numpy(outputs["probabilities"])).numpy()
        variants[name] = {"description": description, **_f1s(m), "f1_gap": base["f1"] - m["f1"],
                          "macro_f1_gap": base["macro_f1"] - m["macro_f1"],
                          "accuracy_gap": base["accuracy"] - m["accuracy"],
                          "tvd": {"mean": float(distance.mean()), "median": float(np.median(distance)),
                                  "std": float(distance.std()), "max": float(distance.max())},
                          "fraction_prediction_changed": float((outputs[name].argmax(-1) != predictions).mean())}
    main = variants["uniform"]
    return {"split": split, "base": _f1s(base) | {"roc_auc": base["roc_auc"]},
            "uniform": {k: main[k] for k in ("f1", "macro_f1", "accuracy")},
            "f1_gap": main["f1_gap"], "macro_f1_gap": main["macro_f1_gap"], "accuracy_gap": main["accuracy_gap"],
            "mean_tvd": main["tvd"]["mean"], "variants": variants,
            "note": "W&P §3.2/Table 2 retrain a model with frozen uniform attention; here the model's explained "
                    "row is replaced at test time (an intervention, not a retrained model). F1 = "
                    "positive-class F1 for binary tasks (W&P), macro F1 otherwise."}


def uniform_divergence(outputs: dict[str, np.ndarray]) -> np.ndarray:
    """Per instance JSD(uniform over the content pieces, explained attention over them) — the
    uniform model's point on W&P's JSD axis."""
    content = torch.from_numpy(outputs["content"])
    uniform = content.double() / content.double().sum(-1, keepdim=True).clamp_min(1.0)
    return jsd(uniform, torch.from_numpy(outputs["attention"]), content).numpy()


# ----------------------------------------------------------------------------------------------
# §3.3: seed variance


def find_seed_model_dirs(runs_dir: str | None, limit: int) -> list[str]:
    """The BERT-family ``seed-*`` folders of ``runs_dir`` (sorted by seed), at most ``limit``."""
    if not runs_dir or not os.path.isdir(runs_dir) or limit < 1:
        return []

    def seed_of(path):
        tail = os.path.basename(path)[len("seed-"):]
        return (0, int(tail)) if tail.isdigit() else (1, tail)

    found = [p for p in glob.glob(os.path.join(runs_dir, "seed-*"))
             if os.path.isdir(p) and is_transformer_model_dir(p)]
    return sorted(found, key=seed_of)[:limit]


def seed_variance_section(base_outputs: dict[str, np.ndarray], seed_outputs: list[dict[str, np.ndarray]],
                          labels, seed_names: list[str], statistic: str = "max", label_names=None) -> dict:
    """W&P §3.3 from :func:`split_forward` outputs of the base and of each seed model (same
    sequences): per instance JSD of the explained attention over the content pieces and TVD of the
    outputs (:func:`hf_attn.batteries.wp.battery.seed_variance_statistics`), max/median over seeds,
    per-seed summaries and the per-(class, max-attention bin) table of W&P Fig. 3."""
    from hf_attn.batteries.wp.battery import binned_summary, divergence_summary, seed_variance_statistics
    from hf_attn.training.engine import classification_metrics

    labels = np.asarray(labels)
    stats = seed_variance_statistics(base_outputs["attention"], np.stack([s["attention"] for s in seed_outputs]),
                                     base_outputs["probabilities"],
                                     np.stack([s["probabilities"] for s in seed_outputs]), base_outputs["content"])
    values = stats[f"{statistic}_jsd"]
    per_seed = [{"seed_model": name, **divergence_summary(stats["jsd"][i], stats["tvd"][i]),
                 **_f1s(classification_metrics(seed_outputs[i]["probabilities"], labels))}
                for i, name in enumerate(seed_names)]
    return {"run": True, "seeds": seed_names, "statistic": statistic, "per_seed": per_seed,
            "summary": {"mean_max_jsd": float(stats["max_jsd"].mean()),
                        "mean_median_jsd": float(stats["median_jsd"].mean()),
                        "mean_max_tvd": float(stats["max_tvd"].mean()),
                        "mean_median_tvd": float(stats["median_tvd"].mean()),
                        "f1_mean": float(np.mean([p["f1"] for p in per_seed])),
                        "f1_std": float(np.std([p["f1"] for p in per_seed]))},
            "by_class_and_max_attention": binned_summary(values, stats["max_attention"], labels,
                                                         label_names=label_names),
            "_arrays": {"values": values, "max_attention": stats["max_attention"], "jsd": stats["jsd"],
                        "tvd": stats["tvd"]}}


# ----------------------------------------------------------------------------------------------
# §3.4: the diagnostic MLP guided by the transformer's attention


def content_columns(outputs: dict[str, np.ndarray], sequences) -> tuple[list[list[int]], list[np.ndarray]]:
    """The MLP's inputs from :func:`split_forward` outputs: per instance the content word-piece ids
    (specials dropped) and the TRANSFORMER guide (the explained row over them, renormalised)."""
    ids, guides = [], []
    for i, seq in enumerate(sequences):
        keep = outputs["content"][i, :len(seq)]
        if not keep.any():
            raise ValueError(f"instance {i} has no word pieces besides special tokens: the MLP has nothing to read")
        ids.append([int(t) for t, k in zip(seq, keep) if k])
        guide = outputs["attention"][i, :len(seq)][keep]
        guides.append(guide / guide.sum())
    return ids, guides


def uniform_columns(ids: list[list[int]]) -> list[np.ndarray]:
    """The UNIFORM guide: 1/n over each instance's n pieces (:func:`hf_attn.training.wp.uniform_guide`)."""
    from hf_attn.training import wp as wpt

    return wpt.uniform_guide(len(x) for x in ids)


def mlp_train_settings(task_name: str, embedding_dim: int, max_length: int, epochs: int | None = None,
                       seed: int = 0):
    """W&P §3.4's MLP settings (:func:`hf_attn.training.wp.mlp_settings`: per-token affine + tanh,
    additive attention for the TRAINED guide) on the transformer's d-dimensional word pieces; every
    other field the papers' models' default (Adam 1e-3, batch 32, 8 epochs, class-balanced loss)."""
    from hf_attn.training import wp as wpt
    from hf_attn.training.engine import TrainSettings

    base = TrainSettings(dataset=task_name, embeddings="random", embedding_dim=int(embedding_dim),
                         max_length=int(max_length), seed=int(seed))
    settings = wpt.mlp_settings(base)
    return replace(settings, epochs=epochs or settings.epochs)


def train_transformer_guided_mlp(output_dir: str, task, tokenizer, embedding_matrix: torch.Tensor,
                                 ids: dict[str, list[list[int]]], guides: dict[str, list] | None, settings,
                                 freeze_embeddings: bool = False, run_record: dict | None = None,
                                 progress: bool = False) -> dict:
    """Train one W&P §3.4 MLP through :func:`hf_attn.training.engine.train` (resumable; a finished
    folder is returned as is). ``ids``: per split the content word-piece ids; ``guides``: per split
    the guide distributions (fed as the model's ``attention_weights`` in training, model selection
    and testing, exactly as :func:`hf_attn.training.wp.train_guided_mlp`), or None for the TRAINED
    MLP (its own attention). The embedding rows are ``embedding_matrix`` (the transformer's input
    word-piece embeddings), trained unless ``freeze_embeddings``. Returns ``metrics.json``."""
    from datasets import Dataset, DatasetDict

    from hf_attn.training.engine import SINGLE_TEXT, TaskPieces, TrainingHooks, build_model, train

    vocab_size = len(tokenizer.get_vocab())
    if embedding_matrix.shape != (vocab_size, settings.embedding_dim):
        raise ValueError(f"embedding matrix {tuple(embedding_matrix.shape)} does not match the vocabulary "
                         f"({vocab_size}) and embedding_dim ({settings.embedding_dim})")
    encoded = DatasetDict({s: Dataset.from_dict({"input_ids": ids[s], "attention_mask": [[1] * len(x) for x in ids[s]],
                                                 "label": list(task.splits[s]["label"])}) for s in SPLITS})

    def build(train_settings, tok, data):
        model, info = build_model(train_settings, tok, data)
        with torch.no_grad():
            model.embedding.weight.copy_(embedding_matrix.to(model.embedding.weight.dtype))
        model.embedding.weight.requires_grad_(not freeze_embeddings)
        return model, info | {"embeddings": "transformer input word-piece embeddings",
                              "embeddings_trained": not freeze_embeddings}

    pieces = TaskPieces("transformer_word_pieces", SINGLE_TEXT.vocabulary_texts, lambda *_: encoded,
                        SINGLE_TEXT.collator, build, SINGLE_TEXT.model_selection)
    columns = {} if guides is None else {s: {"attention_weights": guides[s]} for s in SPLITS}
    record = run_record or {}
    hooks = TrainingHooks(tokenizer=tokenizer, columns=columns,
                          token_columns=("attention_weights",) if columns else (), selection=("roc_auc", True),
                          run_record={"selection": {"metric": "roc_auc", "greater_is_better": True}} | record)
    _check_guide_folder(output_dir, record)
    return train(settings, output_dir, task=task, progress=progress, pieces=pieces, hooks=hooks)


def _check_guide_folder(output_dir: str, record: dict) -> None:
    """A finished MLP folder must be the same guide of the same attention (else: use another folder)."""
    path = os.path.join(output_dir, "run.json")
    if not record or not os.path.exists(os.path.join(output_dir, "metrics.json")) or not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        stored = json.load(f).get("wp", {})
    wanted = record.get("wp", {})
    for key in ("guide", "attention", "embeddings_trained"):
        if stored.get(key) != wanted.get(key):
            raise ValueError(f"{output_dir} holds an MLP with {key}={stored.get(key)!r}, not {wanted.get(key)!r}: "
                             "use another runs folder")


def guide_run_dir(runs_dir: str, guide: str, spec: AttentionSpec, frozen: bool) -> str:
    """``mlp-guide-G`` (the transformer guide tagged with its layer/heads), ``-frozen-embeddings``
    when the embeddings were not trained."""
    tag = f"-layer{spec.layer}-{spec.heads if spec.heads == 'mean' else 'head' + str(spec.heads)}" \
        if guide == "transformer" else ""
    return os.path.join(runs_dir, f"mlp-guide-{guide}{tag}" + ("-frozen-embeddings" if frozen else ""))


def diagnostic_mlp_section(adapter, task, settings: TransformerWPSettings, runs_dir: str,
                           max_length: int, model_label: str) -> dict:
    """W&P §3.4 on the transformer: the guides on every split (one batched pass each), one MLP per
    guide (:func:`train_transformer_guided_mlp`), test F1 per guide as in ``metrics.json``."""
    from hf_attn.training import wp as wpt

    spec = settings.spec
    tokenizer = adapter.tokenizer
    embeddings = adapter.model.get_input_embeddings().weight.detach().float().cpu()
    folders = {g: guide_run_dir(runs_dir, g, spec, settings.mlp_freeze_embeddings) for g in settings.mlp_guides}
    missing = [g for g, p in folders.items() if not os.path.exists(os.path.join(p, "metrics.json"))]
    if missing and not settings.train_missing:
        raise FileNotFoundError(f"diagnostic MLP(s) {', '.join(missing)} not trained in {runs_dir} "
                                "(run without --wp-no-train to train them)")
    train_seconds = 0.0
    if missing:
        ids, transformer_guides = {}, {}
        for split in SPLITS:
            sequences = encode_texts(tokenizer, task.splits[split]["text"], max_length,
                                     keep="end" if getattr(adapter, "left_padding", False) else "start")
            outputs = split_forward(adapter, sequences, settings.batch_size, uniform=False,
                                    progress=settings.progress, desc=f"guide on {split}")
            ids[split], transformer_guides[split] = content_columns(outputs, sequences)
        guide_columns = {"uniform": {s: uniform_columns(ids[s]) for s in SPLITS}, "transformer": transformer_guides,
                         "trained": None}
        train_settings = mlp_train_settings(task.name, embeddings.shape[1], max_length, settings.mlp_epochs,
                                            settings.mlp_seed)
        for guide in tqdm(missing, desc="wp: diagnostic MLPs", disable=not settings.progress):
            started = time.perf_counter()
            record = {"wp": {"kind": "diagnostic_mlp", "guide": guide, "base_model": model_label,
                             "attention": spec.describe() if guide == "transformer" else None,
                             "embeddings_trained": not settings.mlp_freeze_embeddings,
                             "units": "content word pieces of the transformer's tokenizer ([CLS]/[SEP]/[UNK] dropped)"}}
            train_transformer_guided_mlp(folders[guide], task, tokenizer, embeddings, ids, guide_columns[guide],
                                         train_settings, settings.mlp_freeze_embeddings, record, progress=False)
            train_seconds += time.perf_counter() - started
    guides = {}
    for guide, folder in folders.items():
        with open(os.path.join(folder, "metrics.json"), encoding="utf-8") as f:
            m = json.load(f)
        published = wpt.WP_TABLE3_SST.get({"transformer": "base"}.get(guide, guide)) if task.name == "sst" else None
        guides[guide] = {"name": MLP_GUIDE_NAMES[guide], "test_f1": m["test_f1"], "test_macro_f1": m["test_macro_f1"],
                         "test_accuracy": m["test_accuracy"], "dev_roc_auc": m.get("dev_roc_auc"),
                         "train_seconds": m.get("train_seconds"), "published_sst_f1_bilstm": published}
    f1 = {g: v["test_f1"] for g, v in guides.items()}
    checks = {}
    for a, b in (("transformer", "trained"), ("trained", "uniform"), ("transformer", "uniform")):
        if a in f1 and b in f1:
            checks[f"{a}>={b}"] = bool(f1[a] >= f1[b])
    return {"guides": guides, "split": "test (full split, whatever max_instances)",
            "embeddings": ("the transformer's input word-piece embeddings, " +
                           ("frozen" if settings.mlp_freeze_embeddings else "trained (as W&P's MLP)")),
            "units": "content word pieces ([CLS]/[SEP]/[UNK] dropped); TRANSFORMER guide = the explained [CLS] "
                     "row over them, renormalised",
            "attention": spec.describe(),
            "ordering": {"holds": all(checks.values()) if checks else None, "checks": checks},
            "published_table3": "W&P Table 3 (SST, BiLSTM): uniform 0.812, trained 0.817, base LSTM 0.824, "
                                "adversary 0.592 (the TRANSFORMER guide plays BASE LSTM's part)",
            "train_seconds_this_run": round(train_seconds, 1)}


# ----------------------------------------------------------------------------------------------
# figures


def plot_uniform(path: str, section: dict, title: str = "") -> str:
    """W&P §3.2 on a transformer: F1 / accuracy of the model and each uniform variant (left) and
    the distribution of TVD(ŷ_uniform, ŷ) per variant (right); saved atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hf_attn.core.io import save_figure_atomic

    variants = section["variants"]
    names = ["model"] + list(variants)
    short = {"model": "model", "uniform": "uniform\n(layer)", "uniform_content": "uniform content\n(layer)",
             "uniform_every_layer": "uniform\n(every layer)"}
    f1 = [section["base"]["f1"]] + [variants[v]["f1"] for v in variants]
    acc = [section["base"]["accuracy"]] + [variants[v]["accuracy"] for v in variants]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    x = np.arange(len(names))
    axes[0].bar(x - 0.2, f1, 0.4, label="F1 (positive class)", color="tab:blue")
    axes[0].bar(x + 0.2, acc, 0.4, label="accuracy", color="tab:grey")
    for i, v in enumerate(f1):
        axes[0].text(i - 0.2, v + 0.01, f"{v:.3f}", ha="center", fontsize=7)
    axes[0].set_xticks(x, [short.get(n, n) for n in names], fontsize=8)
    axes[0].set_ylim(0, 1.15)
    axes[0].legend(fontsize=7, loc="upper center", ncol=2)
    axes[0].set_title("test performance with the explained row made uniform", fontsize=9)
    tvds = section.get("_tvd", {})
    bins = np.linspace(0, 1, 41)
    for name, values in tvds.items():
        axes[1].hist(values, bins=bins, histtype="step", linewidth=1.4, label=short.get(name, name).replace("\n", " "))
    axes[1].set_yscale("log")
    axes[1].set_xlabel("TVD(ŷ_uniform, ŷ)")
    axes[1].set_ylabel("instances")
    axes[1].legend(fontsize=7)
    axes[1].set_title("output change per instance", fontsize=9)
    fig.suptitle(title or "W&P §3.2: uniform attention (intervention)", fontsize=10)
    fig.tight_layout()
    try:
        return save_figure_atomic(fig, path, dpi=130)
    finally:
        plt.close(fig)


def plot_diagnostic_mlp(path: str, section: dict) -> str:
    """Test F1 of the diagnostic MLP per guide, beside W&P Table 3 (SST, BiLSTM) where given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hf_attn.core.io import save_figure_atomic

    guides = [g for g in MLP_GUIDES if g in section["guides"]]
    measured = [section["guides"][g]["test_f1"] for g in guides]
    published = [section["guides"][g]["published_sst_f1_bilstm"] for g in guides]
    x = np.arange(len(guides))
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.bar(x - 0.2, measured, 0.4, label="measured (transformer word pieces)", color="tab:blue")
    if all(p is not None for p in published):
        ax.bar(x + 0.2, published, 0.4, label="W&P Table 3 (SST, BiLSTM; BASE LSTM guide)", color="tab:grey")
    for i, v in enumerate(measured):
        ax.text(i - 0.2, v + 0.01, f"{v:.3f}", ha="center", fontsize=8)
    ax.set_xticks(x, [MLP_GUIDE_NAMES[g] for g in guides], fontsize=8)
    ax.set_ylabel("test F1 (positive class)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("W&P §3.4 diagnostic MLP by guide", fontsize=10)
    fig.tight_layout()
    try:
        return save_figure_atomic(fig, path, dpi=130)
    finally:
        plt.close(fig)


__all__ = ["TransformerWPSettings", "settings_from_wp", "uniform_cls_rows", "encode_texts",
           "forward_batch", "split_forward", "uniform_section", "uniform_divergence", "find_seed_model_dirs",
           "seed_variance_section", "content_columns", "uniform_columns", "mlp_train_settings",
           "train_transformer_guided_mlp", "guide_run_dir", "diagnostic_mlp_section", "plot_uniform",
           "plot_diagnostic_mlp", "MLP_GUIDES", "SEED_STATUS_NOT_RUN"]
