"""Batching shared by every battery and method: length-sorted batches under a padded-token budget,
right-padding of id sequences (torch) and of ragged float arrays (NumPy).

Sorting by length before cutting batches keeps padding small: a batch of n instances whose longest
has T tokens costs n·T padded positions (n·T·(T−1) for the T leave-one-out copies of each).
"""

from __future__ import annotations

import numpy as np
import torch

from hf_attn.core.deadline import check

COSTS = ("tokens", "deletions")

# Padded tokens per forward pass without gradients on a CPU. Measured on MiniLM-L6 (one thread, rows of
# 24 and 96 tokens, scripts/bench/peers.py's setting): 1024 tokens per forward ran 1.2–1.3× faster
# than 8192 and 65536 (the intermediate activations of a large forward leave the caches), and bounds
# the memory of every scoring loop. On a GPU the caller's budget is used as given.
CPU_FORWARD_TOKENS = 1024
# Padded tokens per forward + backward of integrated gradients on a CPU (the activations a backward
# keeps): 100 SST sentences × 50 nodes on MiniLM-L6, one thread, ran in 74.4 / 74.1 s at 512 tokens
# and 72.3 / 72.6 s at 1024, with a peak RSS of 657–704 MB against 794–835 MB (2048: 70.5 s, 1014 MB).
CPU_BACKWARD_TOKENS = 512


def _on_cpu(device) -> bool:
    """Whether ``device`` (a torch.device, a string such as ``"cuda:0"``, or None) is the CPU; None is."""
    return device is None or str(getattr(device, "type", device)).split(":")[0] == "cpu"


def forward_tokens(token_budget: int, device=None, backward: bool = False) -> int:
    """Padded tokens per forward (``backward=True``: per forward + backward of integrated gradients):
    ``token_budget``, capped at :data:`CPU_FORWARD_TOKENS` (:data:`CPU_BACKWARD_TOKENS`) when
    ``device`` is a CPU (or None). Rows are independent, so the cap changes no result."""
    if _on_cpu(device):
        return max(1, min(int(token_budget), CPU_BACKWARD_TOKENS if backward else CPU_FORWARD_TOKENS))
    return max(1, int(token_budget))


# Growth of the resident set since the last trim that :func:`release_freed_memory` lets pass: a lower
# value trims more often (each trim's freed pages are faulted in again by the next passes, which costs
# time), a higher one lets the heap grow further; docs/benchmarks/heap_trim.json measures this value
RESIDENT_GROWTH_KEPT = 64 * 2**20
_TRIM = {}


def _resident_bytes(page: int | None = None) -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * (page or _TRIM["page"])


def release_freed_memory(device=None) -> bool:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim(0)``) when ``device`` is
    a CPU (or None) and the process's resident set grew by more than :data:`RESIDENT_GROWTH_KEPT`
    since the last trim; elsewhere, without glibc, or where another allocator replaces glibc's malloc
    (``LD_PRELOAD`` of jemalloc or tcmalloc), nothing. Returns whether it trimmed.

    Passes of changing shapes (one per text length and node count) leave freed activations scattered
    over the heap, where glibc keeps them and grows the heap for the next shape instead
    (docs/benchmarks/heap_trim.json: the peak RSS of integrated gradients with and without it). No
    value changes: it only returns memory no tensor holds."""
    if not _on_cpu(device):
        return False
    if not _TRIM:
        import ctypes
        import os

        try:
            if not os.confstr("CS_GNU_LIBC_VERSION") or not os.path.exists("/proc/self/statm"):
                raise OSError("not glibc on Linux")
            libc = ctypes.CDLL("libc.so.6")
            address = lambda function: ctypes.cast(function, ctypes.c_void_p).value  # noqa: E731
            if address(ctypes.CDLL(None).malloc) != address(libc.malloc):
                raise OSError("the process's malloc is not glibc's (jemalloc, tcmalloc, … preloaded)")
            page = os.sysconf("SC_PAGE_SIZE")
            found = {"trim": libc.malloc_trim, "page": page, "after": _resident_bytes(page)}
        except (OSError, AttributeError, ValueError):
            found = {"trim": None}
        _TRIM.update(found)  # in one step: another thread never sees half of it
    if _TRIM["trim"] is None or _resident_bytes() <= _TRIM["after"] + RESIDENT_GROWTH_KEPT:
        return False
    _TRIM["trim"](0)
    _TRIM["after"] = _resident_bytes()
    return True


def length_batches(lengths, token_budget: int, cost: str = "tokens", rows_per_item: int = 1,
                   max_rows: int | None = None) -> list[np.ndarray]:
    """Instance indices sorted by length (stable) and cut into consecutive batches whose padded cost
    stays within ``token_budget`` and, with ``max_rows``, that hold at most that many instances; a
    batch always holds at least one instance.

    ``cost="tokens"``: an instance of length T costs ``rows_per_item · T`` (one forward per row);
    ``cost="deletions"``: ``rows_per_item · T·(T−1)`` (its T leave-one-out copies of length T−1).
    A batch's cost is its size times the cost of its last (longest) instance.
    """
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    if rows_per_item < 1:
        raise ValueError(f"rows_per_item must be >= 1, got {rows_per_item}")
    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    per = sorted_lengths if cost == "tokens" else sorted_lengths * np.maximum(sorted_lengths - 1, 1)
    per = per * rows_per_item
    batches, start = [], 0
    # ascending, so the padded cost of order[start:i+1] is (i+1−start)·per[i]: monotone in i
    while start < len(order):
        count = np.arange(1, len(order) - start + 1) * per[start:]
        fits = int(np.searchsorted(count, token_budget, side="right"))
        stop = start + max(1, fits if max_rows is None else min(fits, max_rows))
        batches.append(order[start:stop])
        start = stop
    return batches


def pad_batch(sequences, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """List of 1-D id sequences → right-padded ``input_ids (B, T)`` (long) and bool ``attention_mask (B, T)``."""
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    width = int(lengths.max()) if len(sequences) else 0
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
    if width:
        ids[mask] = torch.as_tensor(np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences]))
    return ids, mask


def ragged_to_padded(arrays, fill: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """List of 1-D arrays → ``(N, T_max)`` float64 values (``fill`` beyond each length) and bool mask ``(N, T_max)``."""
    arrays = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    width = int(lengths.max()) if len(arrays) else 0
    values = np.full((len(arrays), width), fill, dtype=np.float64)
    mask = np.arange(width)[None, :] < lengths[:, None]
    if len(arrays) and width:
        values[mask] = np.concatenate(arrays)
    return values, mask


def row_chunks(mask: torch.Tensor, token_budget: int):
    """``(begin, end, width)`` of consecutive row chunks of a padded batch ``(B, T)``, each of at most
    ``token_budget`` padded tokens (a chunk's cost: its rows × its longest row, ``width``); a row
    longer than the budget is a chunk alone."""
    lengths = mask.sum(1).cpu().numpy()
    begin = 0
    while begin < len(lengths):
        check()  # a time budget, if one is set, is checked between chunks (hf_attn.core.deadline)
        cost = np.arange(1, len(lengths) - begin + 1) * np.maximum.accumulate(lengths[begin:])  # nondecreasing
        end = begin + max(1, int(np.searchsorted(cost, token_budget, side="right")))
        yield begin, end, max(int(lengths[begin:end].max()), 1)
        begin = end


def in_row_chunks(analysis, ids: torch.Tensor, mask: torch.Tensor, token_budget: int) -> torch.Tensor:
    """``analysis(ids, mask) → (B, T)`` on consecutive row chunks of a padded batch ``(B, T)``, each of
    at most ``token_budget`` padded tokens (:func:`row_chunks`) and trimmed to its longest row;
    results re-padded into a float32 ``(B, T)`` (0 beyond each chunk's width).
    For analyses whose memory grows faster than a forward's (e.g. a backward per chunk)."""
    out = torch.zeros(mask.shape, dtype=torch.float32, device=ids.device)
    for begin, end, width in row_chunks(mask, token_budget):
        out[begin:end, :width] = analysis(ids[begin:end, :width], mask[begin:end, :width])
    return out


MAX_PADDING = 1.1  # padded / real tokens of a batch of padding_bounded_batches


def padding_bounded_batches(lengths, token_budget: int, max_padding: float = MAX_PADDING) -> list[np.ndarray]:
    """Instance indices sorted by length (longest first) and cut into batches of at most
    ``token_budget`` padded tokens whose padded / real tokens stay ≤ ``max_padding`` (a batch is
    padded to its longest instance); a batch always holds at least one instance. Unlike
    :func:`length_batches`, mixed lengths never pad a batch beyond ``max_padding``."""
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    batches, current, width, real = [], [], 0, 0
    for i in order:
        n = int(lengths[i])
        rows = len(current) + 1
        if current and (rows * width > token_budget or rows * width > max_padding * (real + n)):
            batches.append(np.array(current))
            current, real = [], 0
        if not current:
            width = n
        current.append(int(i))
        real += n
    if current:
        batches.append(np.array(current))
    return batches


__all__ = ["CPU_BACKWARD_TOKENS", "CPU_FORWARD_TOKENS", "MAX_PADDING", "forward_tokens", "release_freed_memory", "length_batches", "padding_bounded_batches", "pad_batch", "ragged_to_padded", "row_chunks", "in_row_chunks", "COSTS"]
