"""F-Fidelity (Zheng et al., "F-Fidelity: A Robust Framework for Faithfulness Evaluation of Explainable
AI", ICLR 2025, arXiv:2410.02970): removal-based faithfulness without the distribution shift.

Deleting the tokens an explainer ranks first puts the input out of the distribution the model was
trained on, so a drop in ŷ mixes "the tokens mattered" with "the input looks odd". F-Fidelity
(i) fine-tunes a copy of the model on training texts with random tokens removed, independently of
any explainer (so no explainer's ranking leaks into the copy, unlike ROAR), and (ii) evaluates with
a stochastic removal that never removes more than the fine-tuning did, in expectation.

The procedure followed, from the authors' repository (github.com/AslanDing/Finetune-Fidelity,
``code/train_model.py``, ``code/evaluation_model.py``, ``tools/image_example.py``):

- fine-tuning (``RandomPixelRemoval``): each time an example is drawn, ``int(β · n)`` of its ``n``
  features, chosen uniformly without replacement, are removed; Adam, learning rate 1e-4, L2 weight
  decay 1e-4; β = 0.1. Here: the removal is the table's (tokens deleted, special tokens kept,
  :mod:`~hf_attn.batteries.faithfulness.erasure`), through hf_attn's training path
  (:class:`hf_attn.training.trainer.AttnTrainer`, whose J&W optimiser is Adam with L2 decay) with
  the masking in the data collator (:class:`MaskingCollator`). One deviation: β · n is rounded
  stochastically (⌊β·n⌋ tokens, one more with probability β·n − ⌊β·n⌋), so the expected count is
  exactly β · n; ``int(β · n)`` would never remove a token of a sentence shorter than 1/β tokens
  (most SST sentences at β = 0.1 have under 20), and the evaluation does remove from those.
- evaluation (``ours_random_MoRF`` / ``ours_random_LeRF`` with ``use_max=True``): at explanation
  size k, each of the k candidate features is removed independently with probability α, lowered to
  β · n / k when α · k > β · n (so at most β · n removed in expectation, the fine-tuning's share);
  N = 50 draws; label-based: the score is the share of draws the copy still classifies correctly.
  FFid⁺ = 1[f(x) = y] − mean over draws of 1[f(x') = y] with the candidates the explanation's top k
  (higher is better); FFid⁻ the same with the candidates the tokens outside the top k (lower is
  better); both averaged over the explanation sizes. α = 0.5, β = 0.1, N = 50. Here the sizes are
  the table's ERASER fractions (k = ⌈f · n⌉, so the two tables are comparable; the authors sweep
  5 %…100 % of the pixels), and the probability-based variant the authors' example mentions (the
  drop in ŷ_y instead of in correctness) is reported beside the paper's label-based one.

:func:`run_f_fidelity` puts it together: each method's attributions computed once with the ORIGINAL
model (:meth:`hf_attn.Explainer.attributions`), then scored by the table's ERASER comprehensiveness
and sufficiency on the original and on the fine-tuned copy (the table's given-attributions path,
:mod:`~hf_attn.batteries.faithfulness.given`), and by FFid⁺ / FFid⁻ on the copy; each method's rank
under each. The copy is cached per model: a folder named by the source weights' SHA-256, the
fine-tuning settings, data and the adapter's ``max_length`` (the texts are fine-tuned on as it cuts
them, and the copy reads them with the same limit), written atomically, reused when all match
(:func:`finetuned_copy`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from hf_attn.methods.eraser import DEFAULT_FRACTIONS, tokens_per_fraction

# the table's cheaper methods (no transformer internals, no captum)
CHEAP_METHODS = ("attention", "rollout", "saliency", "gradient_x_input", "integrated_gradients", "leave_one_out",
                 "random")
FORMAT = 1  # of the cached copy's folder; a change makes every older copy stale
PAPER = {"beta": 0.1, "alpha": 0.5, "samples": 50, "finetune_optimizer": "Adam, lr 1e-4, weight decay 1e-4",
         "finetune_removal": "int(beta * n) features, uniform without replacement, redrawn per draw of an example",
         "finetune_epochs": 100, "sizes": "5 %, 10 %, …, 100 % of the features (authors' code)",
         "score": "label-based: 1[f(x) = y] − mean over draws of 1[f(x') = y]",
         "source": "github.com/AslanDing/Finetune-Fidelity: code/train_model.py, code/evaluation_model.py, "
                   "tools/image_example.py"}
# rank direction of every column: True when higher is better
HIGHER_IS_BETTER = {"comprehensiveness": True, "sufficiency": False, "ffid_plus": True, "ffid_minus": False,
                    "ffid_plus_probability": True, "ffid_minus_probability": False}


@dataclass(frozen=True)
class FFidelitySettings:
    """F-Fidelity's settings (module docstring). Fine-tuning: ``beta`` the share of a text's tokens
    deleted per draw, ``train_dataset`` / ``train_examples`` (None: the whole train split; else the
    first that many of a seeded shuffle) / ``epochs`` / ``learning_rate`` / ``weight_decay`` /
    ``batch_size`` / ``seed``. Evaluation: ``alpha`` the removal probability of a candidate token,
    ``samples`` the draws N, ``fractions`` the explanation sizes, ``methods`` the table's methods."""

    beta: float = 0.1
    alpha: float = 0.5
    samples: int = 50
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    methods: tuple[str, ...] = CHEAP_METHODS
    train_dataset: str = "sst"
    train_examples: int | None = None
    epochs: float = 1.0
    learning_rate: float = 1e-4
    weight_decay: float = 1e-4
    batch_size: int = 32
    seed: int = 0

    def __post_init__(self):
        from hf_attn.batteries.faithfulness.settings import METHODS

        for name in ("beta", "alpha"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 1:
                raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
        for name in ("samples", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a whole number ≥ 1, got {value!r}")
        if self.train_examples is not None and (not isinstance(self.train_examples, int) or self.train_examples < 1):
            raise ValueError(f"train_examples must be None or a whole number ≥ 1, got {self.train_examples!r}")
        if not isinstance(self.epochs, (int, float)) or not self.epochs > 0:
            raise ValueError(f"epochs must be a number > 0, got {self.epochs!r}")
        for name in ("learning_rate", "weight_decay"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0 or (name == "learning_rate" and value == 0):
                raise ValueError(f"{name} must be a number {'> 0' if name == 'learning_rate' else '≥ 0'}, got {value!r}")
        if not isinstance(self.fractions, tuple) or not self.fractions or not all(0 < f <= 1 for f in self.fractions):
            raise ValueError(f"fractions must be a non-empty tuple of numbers in (0, 1], got {self.fractions!r}")
        if not isinstance(self.methods, tuple) or not self.methods or any(m not in METHODS for m in self.methods):
            raise ValueError(f"methods must be a non-empty tuple of {list(METHODS)}, got {self.methods!r}")
        if not isinstance(self.train_dataset, str) or not self.train_dataset:
            raise ValueError(f"train_dataset must be a dataset name or folder, got {self.train_dataset!r}")

    def finetuning(self) -> dict:
        """The settings the fine-tuned copy depends on (its cache key)."""
        names = ("beta", "train_dataset", "train_examples", "epochs", "learning_rate", "weight_decay", "batch_size",
                 "seed")
        return {name: getattr(self, name) for name in names}


# ---------------------------------------------------------------- fine-tuning under random removal


def removal_count(n: int, beta: float, rng: np.random.Generator) -> int:
    """Tokens to delete from a text of ``n`` content tokens: ⌊β·n⌋, one more with probability
    β·n − ⌊β·n⌋ (expected exactly β·n; the module docstring says why not ``int(β·n)``)."""
    share = round(beta * n, 9)
    whole = int(math.floor(share))
    return min(n, whole + int(rng.random() < share - whole))


class MaskingCollator:
    """The fine-tuning's random removal (module docstring) on rows ``{"input_ids", "content",
    "label"}``: per row, :func:`removal_count` content tokens chosen uniformly without replacement
    are deleted (special tokens never), then the rows are padded as the training engine pads them
    (:class:`hf_attn.training.pieces.PaddingCollator`). A fresh draw every call, from ``seed``."""

    def __init__(self, pad_token_id: int, beta: float, seed: int = 0):
        from hf_attn.training.pieces import PaddingCollator

        self.padding = PaddingCollator(pad_token_id)
        self.beta = beta
        self.rng = np.random.default_rng(seed)

    def masked(self, ids, content) -> list[int]:
        """One row's ids with its drawn tokens deleted."""
        ids = np.asarray(ids, dtype=np.int64)
        positions = np.flatnonzero(np.asarray(content, dtype=bool))
        count = removal_count(len(positions), self.beta, self.rng)
        keep = np.ones(len(ids), dtype=bool)
        if count:
            keep[self.rng.choice(positions, size=count, replace=False)] = False
        if not keep.any():  # a one-token text without special tokens keeps its token
            keep[positions[0]] = True
        return ids[keep].tolist()

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        rows = [{"input_ids": self.masked(f["input_ids"], f["content"]), "label": f["label"]} for f in features]
        return self.padding(rows)


def weights_digest(model) -> str:
    """SHA-256 over the model's state dict (names, dtypes, shapes and bytes, in name order)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def data_digest(texts: list[str], labels: list[int]) -> str:
    """SHA-256 of the fine-tuning texts and labels, in order."""
    return hashlib.sha256(json.dumps([list(texts), [int(y) for y in labels]]).encode()).hexdigest()


def cache_key(digest: str, settings: FFidelitySettings, data: str = "") -> str:
    """The copy's folder name: the source weights' digest, the fine-tuning settings and the
    fine-tuning data's digest."""
    text = json.dumps({"format": FORMAT, "weights": digest, "data": data, **settings.finetuning()}, sort_keys=True)
    return f"{digest[:16]}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def default_cache_dir() -> str:
    """``$HF_ATTN_CACHE/f_fidelity``, else ``~/.cache/hf_attn/f_fidelity``."""
    root = os.environ.get("HF_ATTN_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "hf_attn")
    return os.path.join(root, "f_fidelity")


def training_data(settings: FFidelitySettings) -> tuple[list[str], list[int]]:
    """The fine-tuning texts and labels: ``settings.train_dataset``'s train split, or the first
    ``train_examples`` of it in an order shuffled by ``seed``."""
    from hf_attn import datasets

    data = datasets.load(settings.train_dataset)
    texts, labels = list(data.texts("train")), [int(y) for y in data.labels("train")]
    if settings.train_examples is not None and settings.train_examples < len(texts):
        order = np.random.default_rng(settings.seed).permutation(len(texts))[:settings.train_examples]
        texts, labels = [texts[i] for i in order], [labels[i] for i in order]
    return texts, labels


class _FineTuner:
    """:class:`AttnTrainer` whose loss is the model's own (transformers outputs have no
    regularisation term), built lazily so importing this module does not import transformers."""

    @staticmethod
    def make(**kwargs):
        from hf_attn.training.trainer import AttnTrainer

        class MaskedFineTuner(AttnTrainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                outputs = model(**inputs)
                return (outputs.loss, outputs) if return_outputs else outputs.loss

        return MaskedFineTuner(**kwargs)


def _fine_tune(explainer, settings: FFidelitySettings, texts: list[str], labels: list[int], folder: str,
               progress: bool) -> dict:
    """Trains a copy of ``explainer.model`` under :class:`MaskingCollator` and writes its weights
    (``model.safetensors``) to ``folder``; returns the training record."""
    from safetensors.torch import save_file
    from transformers import TrainingArguments, set_seed

    from hf_attn.batteries.faithfulness.inputs import _instances

    adapter = explainer.adapter
    instances = _instances(adapter, adapter.encode(texts))
    rows = [{"input_ids": i.tokens.tolist(), "content": i.content.tolist(), "label": y}
            for i, y in zip(instances, labels)]
    model = copy.deepcopy(explainer.model).to("cpu")
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    set_seed(settings.seed)
    args = TrainingArguments(
        output_dir=os.path.join(folder, "checkpoints"), per_device_train_batch_size=settings.batch_size,
        num_train_epochs=settings.epochs, learning_rate=settings.learning_rate, weight_decay=settings.weight_decay,
        lr_scheduler_type="constant", warmup_steps=0, eval_strategy="no", save_strategy="no", logging_steps=50,
        report_to="none", seed=settings.seed, data_seed=settings.seed, use_cpu=True, disable_tqdm=not progress,
        dataloader_num_workers=0, remove_unused_columns=False)
    pad = int(getattr(adapter, "pad_id", None) or getattr(adapter.tokenizer, "pad_token_id", None) or 0)
    trainer = _FineTuner.make(model=model, args=args, train_dataset=rows,
                              data_collator=MaskingCollator(pad, settings.beta, settings.seed))
    started = time.perf_counter()
    output = trainer.train()
    seconds = time.perf_counter() - started
    model.eval()
    save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},
              os.path.join(folder, "model.safetensors"))
    shutil.rmtree(os.path.join(folder, "checkpoints"), ignore_errors=True)
    return {"train_examples": len(rows), "steps": int(trainer.state.global_step),
            "train_loss": float(output.training_loss), "train_seconds": round(seconds, 1),
            "torch_threads": torch.get_num_threads()}


def finetuned_copy(explainer, settings: FFidelitySettings | None = None, cache_dir: str | None = None,
                   progress: bool = False, train_data: tuple | None = None):
    """``(copy, record)``: an :class:`hf_attn.Explainer` over ``explainer``'s model fine-tuned under
    random removal (module docstring), from the cache folder ``cache_dir/<weights digest>-<settings
    digest>`` when it holds a finished copy (``record["reused"]`` True), else trained and written
    there atomically (a temporary folder renamed into place once complete). ``train_data``:
    ``(texts, labels)`` to fine-tune on instead of ``settings.train_dataset``'s train split."""
    from safetensors.torch import load_file

    from hf_attn import Explainer
    from hf_attn.core.io import read_json, write_json_atomic

    settings = settings or FFidelitySettings()
    if train_data is not None:
        texts, labels = list(train_data[0]), [int(y) for y in train_data[1]]
        if not texts or len(texts) != len(labels):
            raise ValueError(f"train_data must be (texts, labels) of one length, got {len(texts)} texts and "
                             f"{len(labels)} labels")
        if settings.train_examples is not None:
            texts, labels = texts[:settings.train_examples], labels[:settings.train_examples]
    else:
        texts, labels = training_data(settings)
    digest = weights_digest(explainer.model)
    root = cache_dir or default_cache_dir()
    # the texts are fine-tuned on as the adapter cuts them: another max_length, another copy
    limit = getattr(explainer.adapter, "max_length", None)
    folder = os.path.join(root, cache_key(digest, settings, f"{data_digest(texts, labels)}|max_length={limit}"))
    record_path = os.path.join(folder, "f_fidelity_copy.json")
    reused = os.path.isfile(record_path) and os.path.isfile(os.path.join(folder, "model.safetensors"))
    if reused:
        record = read_json(record_path)
    else:
        os.makedirs(root, exist_ok=True)
        temporary = tempfile.mkdtemp(prefix=".partial-", dir=root)
        try:
            record = {"format": FORMAT, "source_weights_sha256": digest, "settings": settings.finetuning(),
                      "train_data_sha256": data_digest(texts, labels),
                      **_fine_tune(explainer, settings, texts, labels, temporary, progress)}
            write_json_atomic(os.path.join(temporary, "f_fidelity_copy.json"), record)
            try:
                os.replace(temporary, folder)
            except OSError:  # another process finished the same copy first: keep theirs
                if not os.path.isfile(record_path):
                    raise
        finally:
            shutil.rmtree(temporary, ignore_errors=True)
    model = copy.deepcopy(explainer.model).to("cpu")
    model.load_state_dict(load_file(os.path.join(folder, "model.safetensors")))
    model.eval()
    # the copy reads the texts as the original does (the given attributions have one score per content token)
    return (Explainer(model, explainer.tokenizer, device="cpu", max_length=limit),
            {**record, "folder": folder, "reused": reused})


# ---------------------------------------------------------------- the F-Fidelity score


def removal_probability(alpha: float, beta: float, candidates: int, n: int) -> float:
    """α, lowered to β·n / candidates when α · candidates > β · n (the authors' ``use_max``)."""
    if candidates == 0:
        return 0.0
    return beta * n / candidates if alpha * candidates > beta * n else alpha


def _draws(instance, candidates: np.ndarray, probability: float, samples: int, generator: torch.Generator,
           pad: int) -> list[tuple]:
    """``samples`` inputs with each candidate (content indices) deleted with ``probability``."""
    from hf_attn.batteries.faithfulness.inputs import _subset

    size = int(instance.content.sum())
    hits = torch.rand((samples, len(candidates)), generator=generator, dtype=torch.float64).numpy() < probability
    out = []
    for row in hits:
        keep = np.ones(size, dtype=bool)
        keep[candidates[row]] = False
        out.append(_subset(instance, keep, pad))
    return out


def f_fidelity_scores(adapter, texts: list[str], attributions: dict, settings: FFidelitySettings,
                      labels=None) -> dict:
    """FFid⁺ and FFid⁻ (module docstring) of each row of ``attributions`` (``{name: per text one
    score per content token}``) on ``adapter``'s model: per name ``{"ffid_plus", "ffid_minus",
    "ffid_plus_probability", "ffid_minus_probability", "per_fraction", "n"}`` (means over the
    texts). ``labels``: the true class per text (the paper's label-based score); None: the model's
    own prediction on the full text. Draws are seeded by each sentence's tokens, the row and
    ``settings.seed``, so a text's values do not depend on the other texts."""
    from hf_attn.batteries.faithfulness.inputs import (_ProbabilityCache, _instances, _ranks,
                                                       _sentence_generator)

    instances = _instances(adapter, adapter.encode(list(texts)))
    pad = int(getattr(adapter, "pad_id", 0) or 0)
    cache = _ProbabilityCache(adapter, 4096)
    full = cache.get([tuple(int(t) for t in i.tokens) for i in instances])
    if labels is None:
        labels = full.argmax(1)
    labels = np.asarray(labels, dtype=np.int64)
    if len(labels) != len(instances):
        raise ValueError(f"labels has {len(labels)} entries for {len(instances)} texts")
    sizes = np.array([int(i.content.sum()) for i in instances])
    counts = tokens_per_fraction(sizes, settings.fractions)
    out = {}
    for name, rows in attributions.items():
        if len(rows) != len(instances):
            raise ValueError(f"attributions row {name!r}: {len(rows)} score arrays for {len(instances)} texts")
        requests, spans = [], []
        for i, (inst, row) in enumerate(zip(instances, rows)):
            row = np.asarray(row, dtype=np.float64)
            if row.size != sizes[i]:
                raise ValueError(f"attributions row {name!r}, text {i}: {row.size} scores for {sizes[i]} content tokens")
            if not np.isfinite(row).all():  # undefined on this text (e.g. a one-token leave-one-out)
                spans.append(None)
                continue
            ranks = _ranks(row)
            generator = _sentence_generator(settings, name, inst.tokens, "f_fidelity", 0)
            for k in counts[i]:
                for kind, candidates in (("plus", np.flatnonzero(ranks < k)), ("minus", np.flatnonzero(ranks >= k))):
                    p = removal_probability(settings.alpha, settings.beta, len(candidates), int(sizes[i]))
                    drawn = _draws(inst, candidates, p, settings.samples, generator, pad)
                    spans.append((i, int(k), kind, len(requests), len(drawn)))
                    requests += drawn
        probabilities = cache.get(requests) if requests else np.zeros((0, full.shape[1]))
        per = {kind: {"label": np.full((len(instances), counts.shape[1]), np.nan),
                      "probability": np.full((len(instances), counts.shape[1]), np.nan)} for kind in ("plus", "minus")}
        column = {}
        for span in spans:
            if span is None:
                continue
            i, k, kind, at, many = span
            j = column.setdefault((i, kind), 0)
            column[(i, kind)] = j + 1
            p = probabilities[at:at + many]
            y = labels[i]
            per[kind]["label"][i, j] = float(full[i].argmax() == y) - float((p.argmax(1) == y).mean())
            per[kind]["probability"][i, j] = float(full[i, y]) - float(p[:, y].mean())
        defined = ~np.isnan(per["plus"]["label"][:, 0])
        out[name] = {
            "ffid_plus": float(np.nanmean(per["plus"]["label"].mean(1))) if defined.any() else math.nan,
            "ffid_minus": float(np.nanmean(per["minus"]["label"].mean(1))) if defined.any() else math.nan,
            "ffid_plus_probability": float(np.nanmean(per["plus"]["probability"].mean(1))) if defined.any() else math.nan,
            "ffid_minus_probability": (float(np.nanmean(per["minus"]["probability"].mean(1))) if defined.any()
                                       else math.nan),
            "per_fraction": {str(f): {"ffid_plus": float(np.nanmean(per["plus"]["label"][:, j])),
                                      "ffid_minus": float(np.nanmean(per["minus"]["label"][:, j]))}
                             for j, f in enumerate(settings.fractions)} if defined.any() else {},
            "n": int(defined.sum())}
    return {"scores": out, "forwards": {"requested": cache.requested, "unique": len(cache.store)},
            "accuracy": float((full.argmax(1) == labels).mean())}


# ---------------------------------------------------------------- the whole comparison


def ranks(values: dict, higher_is_better: bool) -> dict:
    """``{name: rank}``, 1 the best; ties share the best rank; NaN last."""
    def key(name):
        value = values[name]
        return math.inf if value is None or math.isnan(value) else (-value if higher_is_better else value)

    ordered = sorted(values, key=key)
    out = {}
    for name in ordered:
        out[name] = 1 + sum(1 for other in ordered if key(other) < key(name))
    return out


def _erasure_table(explainer, texts: list[str], given: dict, fractions) -> dict:
    """ERASER comprehensiveness / sufficiency cells of the given rows on ``explainer``'s model."""
    result = explainer.faithfulness(texts, attributions=given, methods=("random",),
                                    metrics=("comprehensiveness", "sufficiency"), fractions=tuple(fractions),
                                    naopc_beam=0)
    return {name: {metric: {k: result.table[name][metric].get(k) for k in ("mean", "low", "high", "n")}
                   for metric in ("comprehensiveness", "sufficiency")} for name in given}


def _accuracy(adapter, texts: list[str], labels) -> float | None:
    """The share of ``texts`` the model classifies as ``labels`` (None without labels)."""
    if labels is None:
        return None
    from hf_attn.batteries.faithfulness.inputs import _ProbabilityCache, _instances

    instances = _instances(adapter, adapter.encode(texts))
    full = _ProbabilityCache(adapter, 4096).get([tuple(int(t) for t in i.tokens) for i in instances])
    return float((full.argmax(1) == np.asarray(labels)).mean())


def _explainer(explainer_or_model_folder):
    from hf_attn import Explainer

    if isinstance(explainer_or_model_folder, Explainer):
        return explainer_or_model_folder
    if isinstance(explainer_or_model_folder, (str, os.PathLike)):
        return Explainer.from_pretrained(str(explainer_or_model_folder), device="cpu")
    raise ValueError(f"explainer_or_model_folder must be an hf_attn Explainer or a model folder, got "
                     f"{type(explainer_or_model_folder).__name__}")


def run_f_fidelity(explainer_or_model_folder, texts, settings: FFidelitySettings | None = None, labels=None,
                   cache_dir: str | None = None, attribution_settings: dict | None = None,
                   original_ffidelity: bool = False, train_data: tuple | None = None, progress: bool = False) -> dict:
    """The F-Fidelity comparison of one model (module docstring) on ``texts``: ``settings.methods``'
    attributions from the original model; their ERASER comprehensiveness / sufficiency on the
    original (``"plain"``) and on the fine-tuned copy (``"finetuned"``); FFid⁺ / FFid⁻ on the copy
    (``"ffidelity"``); every method's rank under each column (``"ranks"``); the copy's record
    (``"copy"``: folder, reused, training). ``labels``: the texts' true classes (the paper's
    label-based FFid; None: the copy's predictions). ``attribution_settings``: the method knobs of
    :meth:`hf_attn.Explainer.attributions` (e.g. ``{"ig_steps": 16}``). ``original_ffidelity``: also
    FFid⁺ / FFid⁻ on the original model (``"ffidelity_original_model"``: the stochastic removal
    without the fine-tuning). ``train_data``: ``(texts, labels)`` to fine-tune on
    (:func:`finetuned_copy`)."""
    from hf_attn.core.io import json_safe

    settings = settings or FFidelitySettings()
    if isinstance(texts, str) or not hasattr(texts, "__len__") or not len(texts):
        raise ValueError("texts must be a non-empty list of strings")
    texts = list(texts)
    if labels is not None and len(labels) != len(texts):
        raise ValueError(f"labels has {len(labels)} entries for {len(texts)} texts")
    original = _explainer(explainer_or_model_folder)
    offloaded = [n for n, p in original.model.named_parameters() if p.device.type == "meta"]
    if offloaded:  # before any attribution is computed
        raise ValueError(f"F-Fidelity fine-tunes a whole copy of the model, and {len(offloaded)} of its parameters "
                         f"(e.g. {offloaded[0]}) are offloaded by its device map: load it on devices that hold "
                         "all of its weights (a device_map without 'disk' or offloaded 'cpu' entries, or device=)")
    started = time.perf_counter()
    computed = original.attributions(texts, methods=list(settings.methods), **(attribution_settings or {}))
    attribution_seconds = time.perf_counter() - started
    methods = [m for m in settings.methods if m in computed.values]
    values = {m: [np.asarray(v, dtype=np.float64) for v in computed.values[m]] for m in methods}
    given = {f"{m} (original model)": values[m] for m in methods}
    finetuned, record = finetuned_copy(original, settings, cache_dir, progress, train_data)
    plain = _erasure_table(original, texts, given, settings.fractions)
    tuned = _erasure_table(finetuned, texts, given, settings.fractions)
    scored = f_fidelity_scores(finetuned.adapter, texts, values, settings, labels)
    plain_ff = f_fidelity_scores(original.adapter, texts, values, settings, labels) if original_ffidelity else None
    tables = {"plain": {m: {k: plain[f"{m} (original model)"][k]["mean"] for k in ("comprehensiveness", "sufficiency")}
                        for m in methods},
              "finetuned": {m: {k: tuned[f"{m} (original model)"][k]["mean"]
                                for k in ("comprehensiveness", "sufficiency")} for m in methods},
              "ffidelity": {m: dict(scored["scores"][m]) for m in methods}}
    if plain_ff is not None:
        tables["ffidelity_original_model"] = {m: {k: v for k, v in plain_ff["scores"][m].items() if k != "per_fraction"}
                                              for m in methods}
    ranked = {}
    for table in tables:
        columns = [c for c in HIGHER_IS_BETTER if c in tables[table][methods[0]]]
        ranked[table] = {c: ranks({m: tables[table][m][c] for m in methods}, HIGHER_IS_BETTER[c]) for c in columns}
    return json_safe({
        "settings": asdict(settings), "paper": PAPER, "methods": methods, "skipped": computed.skipped,
        "texts": len(texts), "labels": "given" if labels is not None else "the model's predictions",
        "attribution_seconds": round(attribution_seconds, 1),
        "intervals": {"plain": {m: plain[f"{m} (original model)"] for m in methods},
                      "finetuned": {m: tuned[f"{m} (original model)"] for m in methods}},
        "accuracy": {"original": _accuracy(original.adapter, texts, labels), "finetuned": scored["accuracy"]},
        "forwards": scored["forwards"],
        "copy": {k: v for k, v in record.items() if k != "folder"} | {"folder": os.path.basename(record["folder"])},
        **tables, "ranks": ranked})


__all__ = ["CHEAP_METHODS", "FFidelitySettings", "MaskingCollator", "cache_key", "data_digest", "f_fidelity_scores",
           "finetuned_copy", "ranks", "removal_count", "removal_probability", "run_f_fidelity", "weights_digest"]
