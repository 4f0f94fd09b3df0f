"""Jain & Wallace's battery (J&W 2019 §4) on any transformers sequence classifier, through an
adapter (:mod:`hf_attn.adapters`).

The explained attention is the query row(s) the classification head reads (the first position for
``[CLS]``-pooled encoders, the last token for decoders, every row for mean-pooled heads) of one layer
(default the last), averaged over heads or one head (:class:`hf_attn.adapters.AttentionSpec`). All
analyses run on **tokens** (word pieces) and only over the *content* tokens (not special tokens or
pads): those are what τ ranks, what a permutation shuffles and what leave-one-out deletes; the
special tokens keep their own attention mass in every intervention, so the row still sums to 1. The
per-instance ``attention`` arrays are the explained row over the content tokens, renormalised to
sum to 1 (the specials' share is reported as ``special_token_mass``).

Every analysis is a method of :mod:`hf_attn.methods` written once against the adapter:

- gradient (Alg. 1, :func:`hf_attn.methods.gradient.attention_fixed_gradient`);
- leave-one-out (:func:`hf_attn.methods.leave_one_out.deletion_importance`);
- Kendall τ of attention vs gradient / LOO, gradient vs LOO, and of attention vs rollout
  (Abnar & Zuidema 2020), with :data:`hf_attn.batteries.jw.summary.TIE_TOLERANCE`; per-layer τ;
- permutation (Alg. 2, :func:`hf_attn.methods.permutation.permuted_attention_tvd`);
- adversary (Alg. 3, Eq. 1–2, :func:`hf_attn.methods.adversary.adversarial_rows`).

On the last layer the permutation and the adversary run on the adapter's exact query-only fast
path; elsewhere through the full forward with the intervention.

:func:`hf_attn.runs.jw.transformer_jw_battery_runner` writes ``results.json`` with the BiLSTM
battery's top-level keys, ``instances.jsonl`` and the figures (J&W Figs 2–5 + τ per layer).
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from hf_attn.adapters import AttentionSpec
from hf_attn.batteries.jw.common import JWAlgorithm, weights_checksum
from hf_attn.core.batching import length_batches
from hf_attn.core.sharding import cache_key, run_sharded, scatter_rows
from hf_attn.methods.adversary import adversarial_rows, restrict_to_content
from hf_attn.methods.gradient import attention_fixed_gradient
from hf_attn.methods.leave_one_out import deletion_importance
from hf_attn.methods.permutation import permuted_attention_tvd


@dataclass
class TransformerJWSettings(JWAlgorithm):
    """Parameters of :func:`run_transformer_jw_battery` (recorded in results.json): the analyses'
    (:class:`hf_attn.batteries.jw.common.JWAlgorithm`), which attention is explained, and where and
    how it runs.

    ``batch_size``: instances per batch of the forward, gradient and permutation, further bounded
    by ``token_budget`` padded tokens; ``gradient_token_budget`` bounds the gradient's backward
    (instances per chunk = budget // longest row); ``loo_token_budget`` the deletion forwards;
    ``adversary_batch_size`` instances per adversary batch (B·k rows per step). ``device``:
    ``auto|cpu|cuda|mps``; ``precision``: ``float32|bfloat16|float16`` (forwards under autocast)."""

    layer: int = -1
    heads: str | int = "mean"
    divergence_on: str = "content"  # the adversary's JSD: content pieces renormalised, or the full "row"
    batch_size: int = 64
    adversary_batch_size: int = 256
    token_budget: int = 16384
    gradient_token_budget: int = 16384
    loo_token_budget: int = 16384
    max_length: int = 512
    num_threads: int | None = None
    device: str = "auto"
    precision: str = "float32"

    def __post_init__(self):
        super().__post_init__()
        for name in ("num_permutations", "k", "steps", "batch_size", "adversary_batch_size", "token_budget",
                     "gradient_token_budget", "loo_token_budget", "max_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.divergence_on not in ("content", "row"):
            raise ValueError(f"divergence_on must be 'content' or 'row', got {self.divergence_on!r}")

    @property
    def spec(self) -> AttentionSpec:
        return AttentionSpec(layer=self.layer, heads=self.heads)

    def adapter(self, model, tokenizer):
        """The adapter these settings describe (layer, heads, device, precision, budgets)."""
        from hf_attn.adapters import adapter_for

        return adapter_for(model, tokenizer, layer=self.layer, heads=self.heads, device=self.device,
                           precision=self.precision, token_budget=self.token_budget, max_length=self.max_length)


def _cut(values: torch.Tensor, content: torch.Tensor) -> list[np.ndarray]:
    """``(B, …, T)`` → per instance ``(…, n_content)`` float64 arrays (content positions only)."""
    keep = content.cpu().numpy()
    return [v[..., k] for v, k in zip(values.detach().double().cpu().numpy(), keep)]


def _in_chunks(fn, batch, budget: int):
    """``fn(sub_batch) → (b, T)`` over chunks of at most ``budget`` padded tokens, concatenated."""
    rows = max(1, budget // max(int(batch.input_ids.shape[1]), 1))
    if rows >= len(batch):
        return fn(batch)
    return torch.cat([fn(batch.select(list(range(start, min(start + rows, len(batch))))))
                      for start in range(0, len(batch), rows)])


def _length_batches(lengths: np.ndarray, batch_size: int, token_budget: int) -> list[np.ndarray]:
    """Length-sorted batches of at most ``token_budget`` padded tokens
    (:func:`hf_attn.core.batching.length_batches`), each cut to at most ``batch_size`` instances."""
    return [chunk for batch in length_batches(lengths, token_budget)
            for chunk in np.array_split(batch, -(-len(batch) // batch_size))]


def run_transformer_jw_battery(adapter, texts, labels=None, settings: TransformerJWSettings | None = None,
                               progress: bool = True, cache_dir: str | None = None) -> tuple[dict, dict]:
    """The whole J&W battery on ``texts`` through ``adapter`` → ``(per-instance results, summary)``.
    Texts are tokenized (cut to ``max_length`` tokens, at most the model's limit, keeping the end the
    head reads, with a warning: :meth:`adapter.tokenize`), sorted by length and batched; every
    analysis is batched over instances (and permutations / adversaries as rows). Tensors stay on
    the adapter's device until each batch's results are cut out.

    With ``cache_dir`` each finished batch is saved there atomically, so a killed run resumes where
    it stopped (the cache is keyed by the settings, the model's weights and the token ids), and under
    ``accelerate launch`` the batches are split between the processes and gathered on every one
    (:func:`hf_attn.core.sharding.run_sharded`). Every batch is seeded by its number only, so
    the results do not depend on the number of processes or on resuming.

    One pass per batch through the four analyses in J&W's order, each a call into
    :mod:`hf_attn.methods`; the adversary runs in its own, larger batches (its cost is per step, not
    per instance); then the summaries."""
    settings = settings or TransformerJWSettings()
    texts = list(texts)
    if not texts:
        raise ValueError("no texts to analyse")
    # cut to the model's limit keeping the end its head reads, with a TruncationWarning (the adapter's rule)
    limit = settings.max_length if adapter.max_length is None else min(settings.max_length, adapter.max_length)
    encoded, word_ids = adapter.tokenize(texts, limit)
    lengths = np.array([len(e) for e in encoded])
    previous = torch.get_num_threads()
    if settings.num_threads:
        torch.set_num_threads(settings.num_threads)
    timings: dict[str, float] = {}

    def timed(name, fn):
        start = time.perf_counter()
        value = fn()
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
        return value

    def encode(rows):
        return adapter.from_token_lists([encoded[i] for i in rows], word_ids=[word_ids[i] for i in rows])

    def main_batch(number, rows):  # forward, gradient, leave-one-out, permutation
        batch = encode(rows)
        content = batch.content
        fwd = timed("forward", lambda: adapter.forward(batch))
        grad = timed("gradient", lambda: _in_chunks(lambda b: attention_fixed_gradient(adapter, b), batch,
                                                    settings.gradient_token_budget))
        loo = timed("leave_one_out", lambda: deletion_importance(adapter, batch, fwd.probabilities,
                                                                 settings.loo_token_budget))
        generator = torch.Generator().manual_seed(settings.seed * 1_000_003 + 2 * number)
        perm = timed("permutation", lambda: permuted_attention_tvd(adapter, batch, fwd,
                                                                   settings.num_permutations, generator))
        mask = batch.attention_mask.bool()
        # the explained attention over the content tokens, renormalised (τ is unaffected; the
        # heatmaps, max-attention bins and the adversary's JSD compare this distribution)
        return {"attention": _cut(restrict_to_content(fwd.attention, content), content),
                "gradient": _cut(grad, content),
                "loo": _cut(loo, content), "rollout": _cut(fwd.rollout, content),
                "layer_rows": _cut(fwd.layer_rows, content),
                "probabilities": fwd.probabilities.double().cpu().numpy(),
                "permutation_tvd": perm.double().cpu().numpy(),
                "special_mass": (fwd.attention * (mask & ~content)).sum(-1).double().cpu().numpy(),
                "content": [c[m] for c, m in zip(content.cpu().numpy(), mask.cpu().numpy())]}

    def adversary_batch(number, rows):
        batch = encode(rows)
        content = batch.content
        fwd = adapter.forward(batch, rollout=False)
        generator = torch.Generator().manual_seed(settings.seed * 1_000_003 + 2 * number + 1)
        adv = timed("adversary", lambda: adversarial_rows(
            adapter, batch, fwd, k=settings.k, lam=settings.lam, eps=settings.eps, steps=settings.steps,
            lr=settings.lr, init_scale=settings.init_scale, generator=generator,
            divergence_on=settings.divergence_on))
        return {"adversary_attention": _cut(adv.attention, content),
                "adversary_tvd": adv.tvd.double().cpu().numpy(), "adversary_jsd": adv.jsd.double().cpu().numpy(),
                "adversary_jsd_row": adv.jsd_row.double().cpu().numpy(),
                "eps_max_jsd": adv.eps_max_jsd.double().cpu().numpy(),
                "adversary_probabilities": adv.probabilities.double().cpu().numpy()}

    key = None
    if cache_dir is not None:
        ids = np.concatenate([np.asarray(e, dtype=np.int64) for e in encoded])
        key = cache_key("transformer-jw", asdict(settings) | {"num_threads": None}, weights_checksum(adapter.model),
                        lengths.tolist(), hashlib.sha256(ids.tobytes()).hexdigest(), adapter.describe()["text"])
    started = time.perf_counter()
    try:
        batches = _length_batches(lengths, settings.batch_size, settings.token_budget)
        adversary_batches = _length_batches(lengths, settings.adversary_batch_size, 1 << 62)
        main = run_sharded(batches, main_batch, cache_dir=cache_dir, key=None if key is None else key + "-m",
                           progress=progress, desc="J&W battery")
        adversary = run_sharded(adversary_batches, adversary_batch, cache_dir=cache_dir,
                                key=None if key is None else key + "-a", progress=progress, desc="J&W adversary")
    finally:
        torch.set_num_threads(previous)
    total = time.perf_counter() - started
    per = [row | extra for row, extra in zip(scatter_rows(batches, main, len(texts)),
                                             scatter_rows(adversary_batches, adversary, len(texts)))]
    results = {name: [np.asarray(row[name]) if name not in FLOAT_FIELDS else float(row[name]) for row in per]
               for name in per[0]}
    content = results["content"]
    results["input_ids"] = [np.asarray(e)[c] for e, c in zip(encoded, content)]
    results["word_ids"] = [[w for w, c in zip(word_ids[i], content[i]) if c] for i in range(len(texts))]
    results["labels"] = None if labels is None else np.asarray(list(labels), dtype=np.int64)
    summary = transformer_summary(results, settings, total, timings, adapter.num_layers)
    return results, summary


# per-instance scalars (every other field is a per-instance array)
FLOAT_FIELDS = ("eps_max_jsd",)


def transformer_summary(results: dict, settings: TransformerJWSettings, total: float, timings: dict,
                        num_layers: int) -> dict:
    """J&W Table 2 / permutation / adversary summaries (the BiLSTM battery's keys, computed by
    :mod:`hf_attn.batteries.jw.summary`) over the content word pieces, plus the rollout τ and the
    per-layer τ."""
    from hf_attn.batteries.jw.summary import adversary_summary, correlation_summary, permutation_summary

    probabilities = np.stack(results["probabilities"])
    predictions = probabilities.argmax(-1)
    num_classes = probabilities.shape[1]
    lengths = np.array([len(a) for a in results["attention"]])
    max_attention = np.array([float(a.max()) if len(a) else 0.0 for a in results["attention"]])
    ties = settings.tie_tolerance

    def corr(x, y):
        return correlation_summary(x, y, predictions, num_classes, settings.alpha, tie_tolerance=ties)

    summary = {
        "num_instances": len(lengths), "num_classes": num_classes,
        "length": {"mean": float(lengths.mean()), "max": int(lengths.max()), "single_token": int((lengths < 2).sum()),
                   "unit": "content word pieces ([CLS]/[SEP] excluded)"},
        "predicted_class_counts": np.bincount(predictions, minlength=num_classes).tolist(),
        "tau_gradient": corr(results["attention"], results["gradient"]),
        "tau_loo": corr(results["attention"], results["loo"]),
        "tau_gradient_loo": corr(results["gradient"], results["loo"]),
        "permutation": permutation_summary(np.stack(results["permutation_tvd"]), max_attention, predictions,
                                           num_classes, lengths=lengths),
        "adversary": adversary_summary(results["adversary_tvd"], results["adversary_jsd"], max_attention,
                                       predictions, settings.eps, num_classes, lengths=lengths),
        "tau_rollout": corr(results["attention"], results["rollout"]),
        "tau_rollout_gradient": corr(results["rollout"], results["gradient"]),
        "tau_rollout_loo": corr(results["rollout"], results["loo"]),
        "adversary_row_jsd": {"eps_max_mean": _eps_max_mean(results["adversary_tvd"], results["adversary_jsd_row"],
                                                            settings.eps, lengths),
                              "note": "ε-max JSD of the full [CLS] rows (specials included)"},
        "special_token_mass": {"mean": float(np.mean(results["special_mass"])),
                               "note": "attention of the explained [CLS] row on [CLS]/[SEP] (not ranked)"},
    }
    from hf_attn.batteries.jw.summary import kendall_per_instance

    per_layer = []
    for layer in range(num_layers):
        rows = [r[layer] for r in results["layer_rows"]]
        entry = {"layer": layer}
        for name, other in (("tau_gradient", results["gradient"]), ("tau_loo", results["loo"])):
            k = kendall_per_instance(rows, other, tie_tolerance=ties)
            entry[name] = float(np.nanmean(np.where(k["valid"], k["tau"], np.nan)))
            entry[name + "_fraction_significant"] = float((k["pvalue"][k["valid"]] < settings.alpha).mean())
        per_layer.append(entry)
    summary["per_layer"] = per_layer
    summary["seconds"] = {"total": total, **timings}
    if results.get("labels") is not None:
        summary["accuracy"] = float((predictions == results["labels"]).mean())
    return summary


def _eps_max_mean(adversary_tvd, adversary_jsd, eps: float, lengths: np.ndarray) -> float | None:
    """Mean over instances with ≥ 2 content pieces of the ε-max JSD (0 where no adversary is feasible)."""
    values = [float(np.where(t <= eps, j, 0.0).max()) for t, j, n in zip(adversary_tvd, adversary_jsd, lengths)
              if n >= 2]
    return float(np.mean(values)) if values else None


# ----------------------------------------------------------------------------------------------
# figures and the runner


def per_layer_figure(summary: dict, path: str, title: str = "") -> str:
    """τ(attention, gradient) and τ(attention, LOO) per layer ([CLS] row, head mean), with the
    rollout's τ as dashed lines; saved atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hf_attn.core.io import save_figure_atomic

    layers = [e["layer"] + 1 for e in summary["per_layer"]]
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    ax.plot(layers, [e["tau_gradient"] for e in summary["per_layer"]], "o-", color="#2980b9",
            label="τ(attention, gradient)")
    ax.plot(layers, [e["tau_loo"] for e in summary["per_layer"]], "s-", color="#c0392b", label="τ(attention, LOO)")
    for key, color, label in (("tau_rollout_gradient", "#2980b9", "τ(rollout, gradient)"),
                              ("tau_rollout_loo", "#c0392b", "τ(rollout, LOO)")):
        mean = summary[key]["overall"]["mean"]
        if mean is not None and np.isfinite(mean):  # None when every instance's τ is undefined (all tied)
            ax.axhline(mean, color=color, ls="--", lw=1, label=label)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("layer ([CLS] attention row, mean over heads)")
    ax.set_ylabel("mean Kendall τ")
    ax.set_xticks(layers)
    ax.set_title(title or "Attention vs importance by layer")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    try:
        return save_figure_atomic(fig, path, dpi=130)
    finally:
        plt.close(fig)


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


def load_analysis_data(model_dir: str, dataset: str | None = None, split: str = "test",
                       text_column: str | None = None, label_column: str | None = None):
    """``(texts, labels, label_names, dataset name)`` to analyse a BERT-family classifier on.

    - ``dataset`` given: loaded with :func:`hf_attn.data.datasets.load_task` (a bundled name, a
      CSV/JSON(L) folder with train/validation/test files or a Hub dataset id: its ``split``), with
      ``text_column`` / ``label_column`` (default ``text`` / ``label``). **A single CSV/JSON(L) file
      is analysed whole, in file order** (it is the data to analyse, not a corpus to split;
      ``split`` does not apply), read by the same row checks as ``load_task``.
    - no ``dataset``: the folder's ``run.json`` (trained by ``hf-attn train --base-model``) names
      the dataset, its data path, columns and split seed; without one (a model trained elsewhere,
      a Hub id) this is a ``ValueError`` asking for ``--dataset``.

    A missing column is a one-line :class:`hf_attn.data.datasets.DataError` naming the column and
    the file (or Hub id). Labels are class ids as ``load_task`` numbers them (integer labels are
    their own ids; strings in sorted order)."""
    from hf_attn.data.datasets import load_task

    if dataset is None:
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
        task = load_task(source, seed=int(s.get("data_seed", 0)), data_path=located(s.get("data_path")),
                         text_column=text_column or s.get("text_column") or "text",
                         label_column=label_column or s.get("label_column") or "label")
    elif os.path.isfile(dataset) and dataset.lower().endswith((".csv", ".jsonl", ".json")):
        return _whole_file(dataset, text_column or "text", label_column or "label")
    else:
        task = load_task(dataset, text_column=text_column or "text", label_column=label_column or "label")
    if task.is_pair:
        raise ValueError(f"{task.name}: sentence-pair data (premise/hypothesis); the BERT-family analyses "
                         "take single texts (--text-column)")
    if split not in task.splits:
        raise ValueError(f"{task.name}: no split {split!r} (has {list(task.splits)})")
    data = task.splits[split]
    return list(data["text"]), list(data["label"]), list(task.label_names), task.name


def analysis_split(dataset: str | None, split: str) -> str:
    """The split to record: ``"all"`` when ``dataset`` is a single data file (analysed whole)."""
    if dataset and os.path.isfile(dataset) and dataset.lower().endswith((".csv", ".jsonl", ".json")):
        return "all"
    return split


def _whole_file(path: str, text_column: str, label_column: str):
    """Every row of one CSV/JSON(L) file, in file order, checked like ``load_task`` does (missing
    columns, empty texts and bad labels are errors naming the file and line)."""
    from hf_attn.data import datasets as d

    table = d._checked_rows(d._read_table(path), {"text": text_column}, label_column)
    names = d._label_set(table.data["label"])
    data = d._encode_labels({"all": table}, names)["all"]
    return list(data["text"]), list(data["label"]), names, os.path.basename(path)
