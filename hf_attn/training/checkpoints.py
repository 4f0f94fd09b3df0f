"""Checkpoints that survive a kill: the newest completely written one, the training clock each
records (seconds trained across resumes), and the JSON files a killed run may leave half-written."""

from __future__ import annotations

import logging
import json
import os
import shutil
import time

from transformers.trainer_callback import TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

from hf_attn.core.io import write_json_atomic


# The training engine's log: its records keep the name "hf_attn.training.engine" (the console and the
# run's log file show it).
logger = logging.getLogger("hf_attn.training.engine")


def _read_json_file(path: str) -> dict | None:
    """A JSON file's content, or None if it is missing, empty or not JSON (killed mid-write)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


CLOCK_FILE = "hf_attn_clock.json"  # in each checkpoint: training seconds and tokens up to it


class _TrainingClock(TrainerCallback):
    """Training time across resumes: each checkpoint records the seconds trained up to it (earlier
    sessions included); a resumed run starts from the recorded seconds and tokens of the checkpoint
    it resumes, so ``train_seconds`` is the whole run's and the throughput is tokens over seconds of
    the same session, never all tokens over the resumed seconds only."""

    def __init__(self):
        self.earlier_seconds, self.earlier_tokens, self.start = 0.0, 0, None
        self.tokens_per_second = None

    def resume(self, checkpoint: str | None) -> None:
        if checkpoint is not None:
            clock = _read_json_file(os.path.join(checkpoint, CLOCK_FILE)) or {}
            state = _read_json_file(os.path.join(checkpoint, "trainer_state.json")) or {}
            self.earlier_seconds = float(clock.get("train_seconds") or 0.0)
            self.earlier_tokens = int(state.get("num_input_tokens_seen") or 0)
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return self.earlier_seconds + (time.perf_counter() - self.start if self.start is not None else 0.0)

    def on_save(self, args, state, control, **kwargs):
        folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        if state.is_world_process_zero and os.path.isdir(folder):
            write_json_atomic(os.path.join(folder, CLOCK_FILE), {"train_seconds": self.elapsed()})

    def stop(self, tokens_seen) -> float:
        session = time.perf_counter() - self.start
        session_tokens = int(tokens_seen or 0) - self.earlier_tokens
        self.tokens_per_second = round(session_tokens / session, 1) if session > 0 and session_tokens > 0 else None
        return self.earlier_seconds + session


def last_complete_checkpoint(folder: str) -> str | None:
    """The newest ``checkpoint-N`` under ``folder`` that was completely written, or None.

    ``Trainer`` writes ``trainer_state.json`` last, so a checkpoint whose state file is missing,
    empty or not valid JSON was interrupted mid-save (process killed): it is deleted so that
    ``Trainer`` resumes from the previous one (a 0-byte state file otherwise fails every rerun).
    """
    if not os.path.isdir(folder):
        return None
    while True:
        last = get_last_checkpoint(folder)
        if last is None or _read_json_file(os.path.join(last, "trainer_state.json")) is not None:
            return last
        logger.warning("removing incomplete checkpoint %s (interrupted while saving)", last)
        shutil.rmtree(last, ignore_errors=True)  # another process may be removing it too
        if os.path.isdir(last):  # could not be removed: do not loop forever on it
            raise OSError(f"cannot remove the incomplete checkpoint {last}")
