"""``--threads N|auto``: how many torch intra-op threads a command uses.

On a CPU shared with other busy processes, torch's default (one thread per core) makes OpenMP
threads spin against each other: ``hf-attn train`` ran 27× slower with 2 threads than with 1 on a
busy 2-core machine. ``auto`` (the default) therefore takes only the cores that the 1-minute load
average says are free, at least one. A number is at most the ``threads`` bound of
:data:`hf_attn.core.numpy_measures.COUNT_LIMITS` (4096), the reason told: more threads than cores only
spin, and OpenMP allocates every thread's state up front (a billion threads asked for 216 GB).
"""

from __future__ import annotations

import argparse
import os


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def auto_threads(cores: int | None = None, load: float | None = None) -> int:
    """Cores not taken by other work: ``cores − round(1-minute load average)``, between 1 and ``cores``."""
    cores = available_cores() if cores is None else cores
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    return max(1, min(cores, cores - int(round(load))))


def threads_argument(text: str) -> str | int:
    """argparse type: a positive integer or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 or 'auto', got {value}")
    from hf_attn.core.numpy_measures import COUNT_LIMITS  # when a value is checked: --help loads no NumPy

    bound, why = COUNT_LIMITS["threads"]
    if value > bound:
        raise argparse.ArgumentTypeError(f"must be <= {bound} or 'auto', got {value}: {why}")
    return value


def check_threads(value, name: str = "num_threads", allow_none: bool = True) -> int | None:
    """The Python API's thread settings: None (when ``allow_none``: torch's own setting) or a whole
    number in ``[1, 4096]`` (:data:`~hf_attn.core.numpy_measures.COUNT_LIMITS`, the reason told);
    a ``ValueError`` naming ``name`` otherwise. Returns it as an int."""
    if value is None and allow_none:
        return None
    from hf_attn.core.numpy_measures import check_whole

    return check_whole(name, value, 1, limit="threads")


def threads_setting(spec: str | int | None, flag: str = "--threads") -> int | None:
    """A command's ``--threads`` value → a settings class's thread count (``num_threads``): None for
    ``auto`` or None (the command has set torch's threads already: leave them), else the number,
    checked (a ``ValueError`` naming ``flag``)."""
    if spec is None or spec == "auto":
        return None
    return check_threads(spec, flag, allow_none=False)


def resolve_threads(spec: str | int | None) -> int | None:
    """``spec`` (``"auto"``, an int, or None for torch's own default) → a thread count or None."""
    if spec is None:
        return None
    return auto_threads() if spec == "auto" else check_threads(spec, "threads", allow_none=False)


def apply_threads(spec: str | int | None) -> int:
    """Set torch's intra-op threads from ``spec``; returns the number in use."""
    import torch

    threads = resolve_threads(spec)
    if threads is not None:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


__all__ = ["auto_threads", "threads_argument", "threads_setting", "check_threads", "resolve_threads", "apply_threads", "available_cores"]
