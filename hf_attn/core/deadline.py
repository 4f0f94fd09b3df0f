"""Time budgets that running computations honour.

``with time_budget(10):`` sets a deadline for everything that runs inside it in this thread (or
asyncio task: the deadline is a :class:`contextvars.ContextVar`, so concurrent requests each have
their own). Computations look at it in three ways:

- :func:`check` raises :class:`BudgetExceeded` once the deadline has passed; loops of the costly
  methods call it once per step;
- every ``torch.nn.Module`` forward checks it too (one global forward pre-hook, held while a budget
  is open and removed with the last one), so a method stops within one layer's forward, whichever
  loop runs it;
- :func:`paced` wraps a loop of known length whose steps cost about the same: before each step it
  checks the deadline and, from the steps done so far, the time the remaining ones need; a loop
  that cannot finish in the time left stops at once instead of spending the rest of the budget on a
  result that would be thrown away.

:class:`BudgetExceeded` derives from ``BaseException``, as ``asyncio.CancelledError`` does: it is an
interruption, not a failure of the computation, so no ``except Exception`` fallback on its way turns
it into a different, finished result. Whoever sets the budget catches it and reports the computation
as not run, never a part of it.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from dataclasses import dataclass


class BudgetExceeded(BaseException):
    """A computation stopped because its time budget ran out (or would run out before it ends);
    the message says which, in one line."""


@dataclass(frozen=True)
class Deadline:
    """``end``: :func:`time.perf_counter` time it passes; ``seconds``: the budget that set it;
    ``what``: whose budget it is, for messages ("this request")."""

    end: float
    seconds: float
    what: str

    def remaining(self) -> float:
        return self.end - time.perf_counter()


_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("hf_attn_deadline", default=None)
_HOOK_LOCK = threading.Lock()
_HOOK = None
_HOOK_USERS = 0  # budgets open in this process (any thread): the hook is held while one is


def _module_check(module, args) -> None:
    if _DEADLINE.get() is not None:
        check()


@contextlib.contextmanager
def _module_hook():
    """One global forward pre-hook on every torch module (:func:`check`), held while at least one
    budget is open anywhere in the process and removed with the last, so that forwards outside any
    budget keep torch's hook-free fast path."""
    global _HOOK, _HOOK_USERS
    from torch.nn.modules.module import register_module_forward_pre_hook

    with _HOOK_LOCK:
        if _HOOK is None:
            _HOOK = register_module_forward_pre_hook(_module_check)
        _HOOK_USERS += 1
    try:
        yield
    finally:
        with _HOOK_LOCK:
            _HOOK_USERS -= 1
            if _HOOK_USERS == 0 and _HOOK is not None:
                _HOOK.remove()
                _HOOK = None


def current() -> Deadline | None:
    """The deadline in force here (None: no budget)."""
    return _DEADLINE.get()


def remaining() -> float | None:
    """Seconds left before the deadline (negative once passed); None without a budget."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline.remaining()


@contextlib.contextmanager
def time_budget(seconds: float | None, what: str = "this request"):
    """Everything inside runs under a deadline ``seconds`` from now (None: no new deadline). Nested
    budgets: the earlier deadline binds. Yields the :class:`Deadline` in force."""
    if seconds is None:
        yield _DEADLINE.get()
        return
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a time budget must be a positive number of seconds, got {seconds!r}")
    deadline = Deadline(time.perf_counter() + float(seconds), float(seconds), what)
    outer = _DEADLINE.get()
    if outer is not None and outer.end <= deadline.end:
        deadline = outer
    token = _DEADLINE.set(deadline)
    try:
        with _module_hook():
            yield deadline
    finally:
        _DEADLINE.reset(token)


def _spent(deadline: Deadline) -> str:
    return f"{deadline.what}'s time budget of {deadline.seconds:g} s ran out"


def check() -> None:
    """:class:`BudgetExceeded` once the deadline in force has passed; nothing without a budget."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.perf_counter() > deadline.end:
        raise BudgetExceeded(_spent(deadline))


def paced(steps):
    """The items of ``steps`` (a sized iterable: a list, a range, of steps of about equal cost, or of
    rising cost), checking the deadline before each: past it, or when the steps left would need more
    time than is left (at the mean pace of the steps done), :class:`BudgetExceeded` says so. Without
    a budget, ``steps`` as they are."""
    if _DEADLINE.get() is None:
        yield from steps
        return
    total = len(steps)
    began = time.perf_counter()
    for done, item in enumerate(steps):
        check()
        deadline = _DEADLINE.get()
        if done and deadline is not None:
            elapsed = time.perf_counter() - began
            needed = elapsed / done * (total - done)
            left = deadline.remaining()
            if needed > left:
                raise BudgetExceeded(f"{deadline.what}'s time budget of {deadline.seconds:g} s would run out: "
                                     f"{done} of {total} steps took {elapsed:.1f} s, the other {total - done} "
                                     f"need about {needed:.1f} s, {max(left, 0.0):.1f} s are left")
        yield item


__all__ = ["BudgetExceeded", "Deadline", "check", "current", "paced", "remaining", "time_budget"]
