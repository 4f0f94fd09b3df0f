"""Command-line value types and bounded messages, shared by every command and battery.

Counts and limits are checked where they are parsed, the same way for every battery: a count that
cannot be meant (``--jw-max-instances 0``, ``-5``, ``--hidden-size 10000000``, ``--faith-ig-steps
10**9``: every count setting has an upper bound with its reason, :func:`count_limit`) is refused by
``argparse`` with a one-line error naming the flag (exit code 2) instead of silently meaning
"all" or "all but the last five". The dataclass settings check the same bounds for Python callers
(:func:`check_count`). Error messages name the first few items of a long list and how many there
are (:func:`bounded_list`, :func:`bounded_text`), so a 1 MB CSV header never fills a terminal.

This module imports neither torch nor numpy (``hf-attn --help`` stays fast); the count settings'
upper bounds are read from :mod:`hf_attn.core.numpy_measures` when a value is checked.
"""

from __future__ import annotations

import argparse
import math

# Upper bounds of the model sizes ``hf-attn train`` accepts: well above any model of the papers
# (H = 128, d = 300, 1 layer) and below sizes whose weights alone would not fit in memory.
MAX_HIDDEN_SIZE = 8192
MAX_EMBEDDING_DIM = 8192
MAX_NUM_LAYERS = 64
MAX_LENGTH = 1_000_000


def count_limit(limit: str) -> tuple[int, str]:
    """``(upper bound, reason)`` of a kind of count setting: the one table the settings classes, the
    ``Explainer`` and the ``evaluate`` modules check against
    (:data:`hf_attn.core.numpy_measures.COUNT_LIMITS`; imported when a value is checked, so that
    ``hf-attn --help`` loads no NumPy)."""
    from hf_attn.core.numpy_measures import COUNT_LIMITS

    return COUNT_LIMITS[limit]


def count(minimum: int = 1, maximum: int | None = None, limit: str | None = None):
    """An ``argparse`` type: an integer in ``[minimum, maximum]``; ``limit``: a kind of count setting
    whose upper bound (:func:`count_limit`) applies too, its reason told when a value exceeds it."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
        if limit is not None:
            bound, why = count_limit(limit)
            if value > bound:
                raise argparse.ArgumentTypeError(f"must be <= {bound}, got {value}: {why}")
        return value

    parse.__name__ = "count"  # argparse names the type in "invalid count value"
    # how to make it again (hf-attn's stored parsers, cli_help.json)
    parse.spec = ["count", minimum, maximum] + ([limit] if limit is not None else [])
    return parse


positive_int = count(1)
non_negative_int = count(0)
# a seed: a whole number in [0, 2^63 − 1], what torch and NumPy both accept (COUNT_LIMITS["seed"])
seed_int = count(0, limit="seed")


def type_spec(kind) -> list | None:
    """An ``argparse`` type as JSON (None: one this module cannot make again): ``["str"]`` for none,
    ``["int"]`` / ``["float"]``, ``["count", min, max]`` (``["count", min, max, limit]`` with a count
    setting's upper bound, :func:`count_limit`) / ``["finite_float", min, strictly_above]``,
    ``["threads"]`` for :func:`hf_attn.core.threads.threads_argument`."""
    if kind is None or kind is str:
        return ["str"]
    if kind in (int, float):
        return [kind.__name__]
    if getattr(kind, "__qualname__", "") == "threads_argument" and kind.__module__ == "hf_attn.core.threads":
        return ["threads"]
    spec = getattr(kind, "spec", None)
    return list(spec) if isinstance(spec, list) else None


def type_from_spec(spec: list | None):
    """The ``argparse`` type :func:`type_spec` described (None for ``["str"]`` or an unknown one)."""
    if not spec or spec[0] == "str":
        return None
    if spec[0] in ("int", "float"):
        return {"int": int, "float": float}[spec[0]]
    if spec[0] == "threads":
        from hf_attn.core.threads import threads_argument

        return threads_argument
    return {"count": count, "finite_float": finite_float}[spec[0]](*spec[1:])


def finite_float(minimum: float | None = None, strictly_above: bool = False):
    """An ``argparse`` type: a finite float, optionally ``>= minimum`` (``> minimum``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if minimum is not None and (value <= minimum if strictly_above else value < minimum):
            raise argparse.ArgumentTypeError(f"must be {'>' if strictly_above else '>='} {minimum:g}, got {value:g}")
        return value

    parse.__name__ = "number"
    parse.spec = ["finite_float", minimum, strictly_above]
    return parse


def check_count(name: str, value, minimum: int = 1, allow_none: bool = True, limit: str | None = None) -> None:
    """The Python-API twin of :func:`count`: ``ValueError`` naming ``name`` unless ``value`` is a
    whole number ``>= minimum`` (or None when ``allow_none``) and, with ``limit``, at most that kind
    of count's upper bound (:func:`count_limit`, the reason told)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}{' or None' if allow_none else ''}, "
                         f"got {value!r}")
    if limit is not None:
        bound, why = count_limit(limit)
        if value > bound:
            raise ValueError(f"{name} must be <= {bound}, got {value!r}: {why}")


def bounded_list(items, limit: int = 5, width: int = 60) -> str:
    """``'a', 'b', 'c', … (1234 in all)``: the first ``limit`` items (each cut at ``width``
    characters) and the count, for error messages about long lists."""
    items = list(items)
    shown = ", ".join(bounded_text(repr(item), width) for item in items[:limit])
    return shown + (f", … ({len(items)} in all)" if len(items) > limit else "")


def bounded_text(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters in all)"


__all__ = ["count", "count_limit", "positive_int", "non_negative_int", "seed_int", "finite_float", "check_count", "bounded_list",
           "bounded_text", "MAX_HIDDEN_SIZE", "MAX_EMBEDDING_DIM", "MAX_NUM_LAYERS", "MAX_LENGTH"]
