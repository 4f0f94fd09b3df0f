"""What a training shows: one progress bar on the console, Trainer's periodic logs as readable
lines in the run's log file."""

from __future__ import annotations

import logging

from transformers import Trainer
from transformers.trainer_callback import PrinterCallback, ProgressCallback, TrainerCallback


# The training engine's log: its records keep the name "hf_attn.training.engine" (the console and the
# run's log file show it).
logger = logging.getLogger("hf_attn.training.engine")


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
