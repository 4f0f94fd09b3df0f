"""Resumable, multi-process analysis runs: split the work into shards, compute each shard once,
cache it atomically, gather the results.

A *shard* is a fixed group of instance indices (e.g. one length-sorted, token-budgeted batch of
:func:`hf_attn.batteries.jw.battery.length_batches`). :func:`run_sharded` calls ``compute(number, indices)``
for every shard that is not cached yet and

* writes each shard's result atomically to ``cache_dir/shard-<key>-<number>.npz`` (temporary file +
  ``os.replace``), so a run killed at any moment resumes from the shards it finished and never reads
  a half-written one; the ``key`` (settings, model weights, inputs) keeps stale shards from being
  reused after anything changed;
* under ``accelerate launch`` (``WORLD_SIZE`` > 1) splits the shard numbers between the processes
  with ``Accelerator.split_between_processes`` and gathers every shard's result on every process
  (``accelerate.utils.gather_object``); the caller writes the output files on the main process only.

Same results whatever the number of processes: the shards are planned once from all instances
(not per process), and ``compute`` must depend only on ``(number, indices)`` — e.g. seed its random
generators with ``seed + number`` — never on the process or on what ran before it.

Shard results are ``dict[str, value]``: a numpy array / scalar, or a list of arrays of different
shapes (ragged per-instance arrays, stored flattened with their shapes).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import hashlib
import json
import logging
import os
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from hf_attn.core.io import umask_mode

logger = logging.getLogger(__name__)

# What loading a damaged shard raises: a truncated or overwritten .npz fails its zip structure
# (BadZipFile, EOFError) or a member's CRC-32 / deflate stream (BadZipFile, zlib.error), or holds
# arrays of the wrong layout (ValueError, KeyError).
DAMAGED_SHARD_ERRORS = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error)

_RAGGED_FLAT = "::ragged_flat"
_RAGGED_SHAPES = "::ragged_shapes"


# ----------------------------------------------------------------------------------------------
# shard files


def save_shard_atomic(path: str, result: dict) -> None:
    """Write a shard result (``dict[str, array | scalar | list of arrays]``) as ``.npz``, atomically."""
    arrays: dict[str, np.ndarray] = {}
    for name, value in result.items():
        if "::" in name:
            raise ValueError(f"shard field names may not contain '::': {name!r}")
        if isinstance(value, (list, tuple)):
            parts = [np.asarray(v) for v in value]
            dtype = np.result_type(*parts) if parts else np.float64
            arrays[name + _RAGGED_FLAT] = (np.concatenate([p.ravel() for p in parts]).astype(dtype)
                                          if parts else np.zeros(0, dtype))
            ndim = parts[0].ndim if parts else 1
            if any(p.ndim != ndim for p in parts):
                raise ValueError(f"shard field {name!r}: ragged arrays must have the same ndim")
            arrays[name + _RAGGED_SHAPES] = np.array([p.shape for p in parts], dtype=np.int64
                                                     ).reshape(len(parts), ndim)
        else:
            value = np.asarray(value)
            if value.dtype == object:
                raise ValueError(f"shard field {name!r}: object arrays cannot be cached")
            arrays[name] = value
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-shard-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:  # a file object: np.savez does not append ".npz"
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, umask_mode())  # mkstemp makes 0600; results follow the umask like any file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_shard(path: str) -> dict:
    """Inverse of :func:`save_shard_atomic` (ragged fields come back as lists of arrays)."""
    out: dict = {}
    with np.load(path, allow_pickle=False) as data:
        names = list(data.files)
        for name in names:
            if name.endswith(_RAGGED_SHAPES):
                continue
            if name.endswith(_RAGGED_FLAT):
                base = name[: -len(_RAGGED_FLAT)]
                flat, shapes = data[name], data[base + _RAGGED_SHAPES]
                sizes = np.prod(shapes, axis=1).astype(np.int64) if len(shapes) else np.zeros(0, np.int64)
                offsets = np.concatenate([[0], np.cumsum(sizes)])
                out[base] = [flat[offsets[i]:offsets[i + 1]].reshape(shape)
                             for i, shape in enumerate(map(tuple, shapes))]
            else:
                value = data[name]
                out[name] = value[()] if value.ndim == 0 else value
    return out


def cache_key(*parts) -> str:
    """A short hash of JSON-serialisable ``parts`` (settings, a weight checksum, the inputs' lengths…)."""
    payload = json.dumps(parts, sort_keys=True, default=lambda v: np.asarray(v).tolist())
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def shard_path(cache_dir: str, key: str, number: int) -> str:
    return os.path.join(cache_dir, f"shard-{key}-{number:05d}.npz")


def clear_cache(cache_dir: str, key: str | None = None) -> None:
    """Remove the shard files of ``key`` (all keys if None), the temporaries, and the folder if empty."""
    if not os.path.isdir(cache_dir):
        return
    for path in glob.glob(os.path.join(cache_dir, f"shard-{key or '*'}-*.npz")) + \
            glob.glob(os.path.join(cache_dir, ".tmp-shard-*")):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    try:
        os.rmdir(cache_dir)
    except OSError:
        pass


# ----------------------------------------------------------------------------------------------
# processes


def distributed_world_size() -> int:
    """Number of processes of the current launch (``accelerate launch`` / ``torchrun`` set WORLD_SIZE)."""
    for name in ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if os.environ.get(name):
            return int(os.environ[name])
    return 1


_ACCELERATOR = None
_ENDED = False  # end_process_group destroyed the launch's group


def current_accelerator():
    """The shared ``accelerate.Accelerator`` when launched with several processes, else None.

    ``cpu=True`` when there is no GPU, so ``accelerate launch --multi_gpu --num_processes N`` on a
    CPU-only machine runs N processes with the gloo backend.
    """
    global _ACCELERATOR
    if distributed_world_size() <= 1:
        return None
    if _ENDED:
        raise RuntimeError("this launch's process group has ended (hf_attn.core.sharding.end_process_group): "
                           "work split between processes needs a new launch")
    if _ACCELERATOR is None:
        import torch
        from accelerate import Accelerator

        _ACCELERATOR = Accelerator(cpu=not torch.cuda.is_available())
        end_process_group_at_exit()
    return _ACCELERATOR


_END_REGISTERED = False


def end_process_group_at_exit() -> None:
    """Destroy this process's ``torch.distributed`` process group, if one is alive, when the
    interpreter exits (an ``atexit`` handler, registered once; a no-op without a group).

    A process that exits with its group alive leaves the group's threads to the interpreter's
    teardown, where a launched process was seen to abort now and then ("terminate called without an
    active exception", SIGABRT) after every result was written, and the launcher then failed the
    run; PyTorch asks every process to destroy its group before it exits. ``atexit`` handlers run
    before that teardown. The group is kept until then, so a script that runs several commands, or
    :func:`run_sharded` and ``Explainer`` after a command, in one launched process keeps its group
    and the cached Accelerator that holds it.
    """
    global _END_REGISTERED
    if not _END_REGISTERED:
        atexit.register(end_process_group)
        _END_REGISTERED = True


def end_process_group() -> None:
    """Destroy this process's ``torch.distributed`` process group now, if one was started: for the
    end of a launched process (:func:`end_process_group_at_exit` calls it). The launch's work across
    processes is over then: :func:`current_accelerator` refuses to start another group in place of
    one it started (a second rendezvous of the same launch was seen to hang), so work split between
    processes is refused; :func:`is_main_process` still answers (from ``RANK``).

    With gloo (the CPU backend) destroying is local, so a process that is done may call it while
    another is still writing its files; other backends may wait for the other processes. Idempotent;
    a no-op in one process.
    """
    global _ENDED
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        _ENDED = _ENDED or _ACCELERATOR is not None  # a group hf_attn started (another's may be started again)


def is_main_process(accelerator=None) -> bool:
    if accelerator is None and _ENDED:  # the group has ended: the launcher's rank says
        return os.environ.get("RANK", "0") == "0"
    accelerator = accelerator if accelerator is not None else current_accelerator()
    return accelerator is None or accelerator.is_main_process


def wait_for_everyone(accelerator=None) -> None:
    accelerator = accelerator if accelerator is not None else current_accelerator()
    if accelerator is not None:
        accelerator.wait_for_everyone()


def run_sharded(shards: Sequence[np.ndarray], compute: Callable[[int, np.ndarray], dict],
                cache_dir: str | None = None, key: str | None = None, accelerator="auto",
                progress: bool = True, desc: str = "shards") -> list[dict]:
    """``[compute(number, shards[number]) for number in range(len(shards))]``, resumable and
    split between processes.

    Args:
        shards: instance-index arrays, planned from *all* instances (identical on every process).
        compute: ``(shard number, indices) -> dict`` of arrays / ragged lists; deterministic given
            its arguments (seed with the shard number, never with the process index).
        cache_dir: where finished shards are kept (``shard-<key>-<number>.npz``); None: no cache.
        key: identifies the inputs and settings; shards of another key are never read.
        accelerator: an ``accelerate.Accelerator``, None (one process), or "auto"
            (:func:`current_accelerator`).

    Returns every shard's result in shard order, on every process. Cached shards are loaded
    instead of computed, so a rerun after a kill computes only the missing ones.
    """
    from tqdm.auto import tqdm

    if accelerator == "auto":
        accelerator = current_accelerator()
    if cache_dir is not None and key is None:
        raise ValueError("run_sharded: a cache_dir needs a key identifying the inputs and settings")
    numbers = list(range(len(shards)))
    if accelerator is not None and accelerator.num_processes > 1:
        with accelerator.split_between_processes(numbers) as mine:
            mine = list(mine)
    else:
        accelerator, mine = None, numbers
    if cache_dir is not None:
        os.makedirs(cache_dir, exist_ok=True)
    local: list[tuple[int, dict]] = []
    bar = tqdm(mine, desc=desc, unit="shard", disable=not progress or not is_main_process(accelerator))
    for number in bar:
        path = shard_path(cache_dir, key, number) if cache_dir is not None else None
        if path is not None and os.path.exists(path):
            try:
                local.append((number, load_shard(path)))
                continue
            except DAMAGED_SHARD_ERRORS as err:  # truncated / corrupted (disk fault): redo it
                logger.warning("cache file %s is damaged (%s: %s); discarded, recomputing it", path,
                               type(err).__name__, " ".join(str(err).split())[:200])
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        result = compute(number, np.asarray(shards[number]))
        if path is not None:
            save_shard_atomic(path, result)
            result = load_shard(path)  # the same representation whether cached or fresh
        local.append((number, result))
    if accelerator is not None:
        from accelerate.utils import gather_object

        gathered = gather_object(local)
    else:
        gathered = local
    by_number = dict(gathered)
    missing = [n for n in numbers if n not in by_number]
    if missing:
        raise RuntimeError(f"shards {missing[:5]} were not computed by any process")
    return [by_number[n] for n in numbers]


def scatter_rows(shards: Sequence[np.ndarray], results: Sequence[dict], num_items: int) -> list[dict]:
    """Per-shard results → per-instance rows: row ``i`` holds ``{field: value[j]}`` where ``i`` is
    the ``j``-th index of its shard (each field's first axis / list runs over the shard's instances)."""
    rows: list[dict | None] = [None] * num_items
    for indices, result in zip(shards, results):
        for j, i in enumerate(np.asarray(indices).tolist()):
            rows[i] = {name: value[j] for name, value in result.items()}
    if any(r is None for r in rows):
        raise RuntimeError(f"{sum(r is None for r in rows)} instances are in no shard")
    return rows


__all__ = ["run_sharded", "scatter_rows", "save_shard_atomic", "load_shard", "cache_key", "shard_path",
           "clear_cache", "current_accelerator", "distributed_world_size", "end_process_group",
           "is_main_process", "wait_for_everyone"]
