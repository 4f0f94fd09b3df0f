"""Training with ``transformers.Trainer`` (J&W appendix A, T&Š table 4 defaults).

Adam (amsgrad, as in the J&W code) lr 1e-3 with L2 weight decay 1e-5, batch 32, gradient clipping 5,
8 epochs, class-balanced loss (w = #neg/#pos for the positive class), the checkpoint with the best
dev ROC-AUC is kept. Resumes from the last checkpoint in ``DIR/checkpoints`` when rerun.

One engine for every run: what depends on the task (single texts or sentence pairs) comes from a
:class:`TaskPieces`, what a run built on another model adds (the W&P helper models: a given
vocabulary, extra per-instance columns, another Trainer, another checkpoint selection) from
:class:`TrainingHooks`.

This module runs a training (:func:`train`); its pieces live beside it: :mod:`~hf_attn.training.settings`,
:mod:`~hf_attn.training.pieces`, :mod:`~hf_attn.training.trainer`, :mod:`~hf_attn.training.optim`,
:mod:`~hf_attn.training.checkpoints` and :mod:`~hf_attn.training.console`.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
from dataclasses import asdict

import numpy as np
import torch
from transformers import PreTrainedTokenizerFast, Trainer, TrainingArguments

from hf_attn.data.classes import split_record, task_split_line
from hf_attn.data.tasks import TaskData
from hf_attn.core.environment import environment_versions
from hf_attn.core.io import LOCK_NAME, exclusive_output_folder, write_json_atomic
from hf_attn.data.tokenization import build_tokenizer
from hf_attn.training.settings import (RunSettingsMismatch, TrainSettings, _format_difference, settings_difference,
                                       stored_paths, task_of)
from hf_attn.training.settings import settings_from_run  # noqa: F401 (re-exported)
from hf_attn.training.optim import LazyEmbeddingAdam, jw_adam  # noqa: F401 (re-exported)
from hf_attn.training.trainer import _best_checkpoint_dev_metrics, _compute_metrics
from hf_attn.training.trainer import (AttnTrainer, _LengthSortedSampler,  # noqa: F401 (re-exported)
                                      classification_metrics)
from hf_attn.training.pieces import ColumnPaddingCollator, TaskPieces, TrainingHooks, task_pieces
from hf_attn.training.pieces import (SENTENCE_PAIR, SINGLE_TEXT, PaddingCollator,  # noqa: F401 (re-exported)
                                     build_model, tokenize_splits)
from hf_attn.training.checkpoints import _TrainingClock, last_complete_checkpoint, _read_json_file
from hf_attn.training.checkpoints import CLOCK_FILE  # noqa: F401 (re-exported)
from hf_attn.training.console import _readable_console
from hf_attn.training.weighting import class_weights_for  # noqa: F401 (re-exported)

logger = logging.getLogger(__name__)

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
    if processes > 1:  # the Trainer starts the launch's process group: it ends before the interpreter does
        from hf_attn.core.sharding import end_process_group_at_exit

        end_process_group_at_exit()
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


def _train(settings: TrainSettings, output_dir: str, task: TaskData | None, progress: bool,
           keep_checkpoints: bool, processes: int, main_process: bool, pieces: TaskPieces | None,
           hooks: TrainingHooks | None) -> dict:
    """The training itself (see :func:`train`), in a folder that is ours."""
    metrics_path = os.path.join(output_dir, "metrics.json")
    source = task.name if task is not None else settings.dataset
    task = task or task_of(settings)
    if main_process:
        logger.info("%s", task_split_line(source, task))
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
           **split_record(task), "notes": task.notes,
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

__all__ = ["TrainSettings", "AttnTrainer", "train", "classification_metrics", "build_model",
           "tokenize_splits", "write_json_atomic", "class_weights_for", "environment_versions",
           "settings_from_run", "task_of", "last_complete_checkpoint", "RunSettingsMismatch",
           "settings_difference", "TaskPieces", "SINGLE_TEXT", "SENTENCE_PAIR", "task_pieces",
           "TrainingHooks", "ColumnPaddingCollator", "PaddingCollator"]
