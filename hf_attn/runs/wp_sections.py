"""The W&P battery's analyses for every model kind (:func:`hf_attn.runs.wp.run_wp`): the base's
outputs through its adapter, §3.3 seed variance over the seed models' adapters, J&W's per-instance
adversary on W&P's axes, and the figures. Divergences compare the explained attention over the
*content* tokens (not special tokens, pads or J&W's markers), renormalised there
(:func:`hf_attn.batteries.wp.transformer.split_forward`)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from hf_attn.batteries.wp.battery import (WPSettings, binned_summary, divergence_summary, plot_seed_variance,
                                          plot_tradeoff)
from hf_attn.batteries.wp.transformer import (SEED_STATUS_NOT_RUN, plot_uniform, seed_variance_section,
                                              split_forward)
from hf_attn.core.batching import length_batches
from hf_attn.core.measures import tvd

# per-instance adversary batches: at most this many padded tokens (B·k rows per step) and
# settings.adversary_shard_instances instances (default ADVERSARY_BATCH)
ADVERSARY_BATCH = 256
ADVERSARY_TOKEN_BUDGET = 16384


@dataclass
class WPBase:
    """The base model on the analysed instances: its adapter, the token id lists (specials included),
    gold labels, class names and :func:`split_forward` outputs (explained attention ``attention``
    over the real positions, its ``content`` mask, ``probabilities`` and the uniform variants)."""

    adapter: object
    sequences: list
    labels: np.ndarray
    label_names: list
    outputs: dict
    split: str
    dataset: str
    cache_dir: str | None = None  # where finished batches are kept for resuming (None: nowhere)
    sharding: dict = field(default_factory=dict)  # the shards of the forwards and the adversary, and who computed them

    @property
    def attention(self) -> np.ndarray:
        return self.outputs["attention"]

    @property
    def content(self) -> np.ndarray:
        return self.outputs["content"]

    @property
    def probabilities(self) -> np.ndarray:
        return self.outputs["probabilities"]

    @property
    def max_attention(self) -> np.ndarray:
        return np.where(self.content, self.attention, 0.0).max(1)

    def metrics(self) -> dict:
        from hf_attn.training.engine import classification_metrics

        return classification_metrics(self.probabilities, self.labels)

    def metrics_summary(self) -> dict:
        m = self.metrics()
        return {"f1": m["f1"], "macro_f1": m["macro_f1"], "accuracy": m["accuracy"], "roc_auc": m["roc_auc"]}

    def outputs_of(self, adapter, batch_size: int, desc: str = "forward", progress: bool = False) -> dict:
        """Another model's :func:`split_forward` outputs on the same token ids (same vocabulary)."""
        if adapter.tokenizer.get_vocab() != self.adapter.tokenizer.get_vocab():
            raise ValueError(f"{getattr(adapter.model.config, '_name_or_path', 'a model')} has another vocabulary "
                             "than the base model: attention would not line up")
        return split_forward(adapter, self.sequences, batch_size, uniform=False, progress=progress, desc=desc,
                             cache_dir=self.cache_dir)


def base_outputs(adapter, sequences, labels, label_names, split: str, dataset: str, settings: WPSettings,
                 cache_dir: str | None = None) -> WPBase:
    """One batched pass of the base (its uniform intervention included; every layer's only for a model
    with several layers and ``settings.uniform_every_layer``). Every forward over the instances and
    the per-instance adversary run batch by batch as shards (split between the processes of
    ``accelerate launch``; cached in ``cache_dir`` for resuming)."""
    every_layer = settings.uniform_every_layer and adapter.num_layers > 1
    record: dict = {}
    outputs = split_forward(adapter, sequences, settings.batch_size, uniform=True, every_layer=every_layer,
                            progress=settings.progress, desc="wp: the model and its uniform variants",
                            cache_dir=cache_dir, record=record)
    return WPBase(adapter, sequences, np.asarray(labels, dtype=np.int64), list(label_names), outputs, split, dataset,
                  cache_dir, {"forward": record})


def seed_variance(base: WPBase, seed_models: list[tuple], settings: WPSettings) -> tuple[dict, list[dict], dict | None]:
    """W&P §3.3 over ``seed_models`` (``(name, load adapter)`` pairs): the section, one point per seed
    and the arrays the figure plots; "not run" without seed models."""
    if not seed_models:
        return {"run": False, "status": SEED_STATUS_NOT_RUN if settings.num_seeds else "not run: num_seeds=0"}, [], None
    outputs = []
    for name, load in tqdm(seed_models, desc="wp: seed models", disable=not settings.progress):
        adapter = load()
        outputs.append(base.outputs_of(adapter, settings.batch_size))
        del adapter
    names = [name for name, _ in seed_models]
    section = seed_variance_section(base.outputs, outputs, base.labels, names, settings.seed_statistic,
                                    base.label_names)
    arrays = section.pop("_arrays")
    points = [{k: p[k] for k in ("seed_model", "mean_jsd", "mean_tvd", "f1")} for p in section["per_seed"]]
    return section, points, arrays


def per_instance_adversary(base: WPBase, settings: WPSettings, arrays: dict | None
                           ) -> tuple[dict | None, dict | None, np.ndarray | None]:
    """J&W's per-instance adversary (Alg. 3, :func:`hf_attn.methods.adversary.adversarial_rows` through
    the base's adapter) on W&P's axes: ``(section, divergence point, ε-max JSD per instance)``; per
    instance the chosen adversary is the most divergent within ε (its TVD; 0, 0 where none is: the base
    attention is kept). All None when ``settings.per_instance_adversary`` is off."""
    if not settings.per_instance_adversary:
        return None, None, None
    from hf_attn.batteries.jw.common import weights_checksum
    from hf_attn.core.sharding import cache_key, current_accelerator, run_sharded
    from hf_attn.methods.adversary import adversarial_rows, best_feasible_adversary

    accelerator = current_accelerator()
    process = 0 if accelerator is None else int(accelerator.process_index)

    adapter = base.adapter
    lengths = np.fromiter((len(s) for s in base.sequences), dtype=np.int64, count=len(base.sequences))
    batches = length_batches(lengths, ADVERSARY_TOKEN_BUDGET, max_rows=settings.adversary_shard_instances)

    def compute(number: int, rows: np.ndarray) -> dict:  # seeded by the batch number: the same in any process
        batch = adapter.from_token_lists([base.sequences[int(r)] for r in rows])
        forward = adapter.forward(batch, rollout=False)
        result = adversarial_rows(adapter, batch, forward, k=settings.adversary_k, lam=settings.adversary_lambda,
                                  eps=settings.adversary_eps, steps=settings.adversary_steps,
                                  generator=torch.Generator().manual_seed(settings.seed * 1_000_003 + number))
        best = best_feasible_adversary(result.tvd, result.jsd, settings.adversary_eps)
        chosen = result.tvd.gather(1, best.index[:, None]).squeeze(1)
        return {"eps_jsd": best.eps_max_jsd.double().cpu().numpy(),
                "eps_tvd": torch.where(best.any_feasible, chosen, torch.zeros_like(chosen)).double().cpu().numpy(),
                "process": np.asarray(process)}

    key = None
    if base.cache_dir is not None:
        ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in base.sequences])
        key = cache_key("wp-adversary", weights_checksum(adapter.model), lengths.tolist(),
                        hashlib.sha256(ids.tobytes()).hexdigest(), settings.seed, settings.adversary_k,
                        settings.adversary_lambda, settings.adversary_eps, settings.adversary_steps,
                        settings.adversary_shard_instances, adapter.describe()["text"],
                        adapter.describe()["precision"])  # as the forwards' key: another precision, other rows
    results = run_sharded(batches, compute, cache_dir=base.cache_dir, key=key, accelerator=accelerator,
                          progress=settings.progress, desc="wp: J&W per-instance adversary")
    eps_jsd, eps_tvd = np.zeros(len(lengths)), np.zeros(len(lengths))
    by_process: dict[int, list[int]] = {}
    for number, (rows, r) in enumerate(zip(batches, results)):
        eps_jsd[rows], eps_tvd[rows] = r["eps_jsd"], r["eps_tvd"]
        by_process.setdefault(int(r["process"]), []).append(number)
    base.sharding["adversary"] = {"shards": len(batches), "shard_instances": settings.adversary_shard_instances,
                                  "token_budget": ADVERSARY_TOKEN_BUDGET,
                                  "shards_by_process": {str(k): v for k, v in sorted(by_process.items())}}
    point = divergence_summary(eps_jsd, eps_tvd)
    max_attention = arrays["max_attention"] if arrays is not None else base.max_attention
    section = {"available": True, "k": settings.adversary_k, "steps": settings.adversary_steps,
               "eps": settings.adversary_eps, "lambda": settings.adversary_lambda,
               "fraction_with_feasible_adversary": float((eps_jsd > 0).mean()), **point,
               "by_class_and_max_attention": binned_summary(eps_jsd, max_attention, base.labels,
                                                            label_names=base.label_names)}
    return section, point, eps_jsd


def figures(output_dir: str, base: WPBase, settings: WPSettings, arrays: dict | None, adversary_values,
            uniform: dict, lambda_rows: list[dict], seed_points: list[dict], uniform_point: dict, jw_point,
            mlp_section: dict, models) -> dict:
    """The battery's figures in ``output_dir`` (W&P Fig. 3 when seeds ran, Fig. 5's trade-off when
    consistent adversaries were trained, the diagnostic MLP when it ran, and the uniform-attention
    intervention); returns their file names."""
    out = {}
    if arrays is not None:
        out["seed_variance"] = "seed_variance.png"
        plot_seed_variance(os.path.join(output_dir, out["seed_variance"]), arrays["values"], adversary_values,
                           arrays["max_attention"], base.labels, base.label_names, statistic=settings.seed_statistic,
                           num_seeds=len(seed_points))
    if lambda_rows:
        out["tradeoff"] = "tradeoff.png"
        plot_tradeoff(os.path.join(output_dir, out["tradeoff"]), [r for r in lambda_rows if r["in_sweep"]],
                      seed_points, uniform_point, jw_point)
    if mlp_section.get("run", True) and mlp_section.get("guides"):
        out["diagnostic_mlp"] = "diagnostic_mlp.png"
        models.plot_mlp(os.path.join(output_dir, out["diagnostic_mlp"]), mlp_section)
    intervention = uniform.get("intervention", uniform)
    tvds = {name: tvd(torch.from_numpy(base.outputs[name]), torch.from_numpy(base.probabilities)).numpy()
            for name in intervention["variants"]}
    out["uniform_attention"] = "uniform_attention.png"
    plot_uniform(os.path.join(output_dir, out["uniform_attention"]), intervention | {"_tvd": tvds},
                 f"W&P §3.2 on {models.name()}: uniform attention (intervention)")
    return out
