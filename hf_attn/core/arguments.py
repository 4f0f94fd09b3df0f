"""Command-line value types and bounded messages, shared by every command and battery.

Counts and limits are checked where they are parsed, the same way for every battery: a count that
cannot be meant (``--jw-max-instances 0``, ``-5``, ``--hidden-size 10000000``) is refused by
``argparse`` with a one-line error naming the flag (exit code 2) instead of silently meaning
"all" or "all but the last five". The dataclass settings check the same bounds for Python callers
(:func:`check_count`). Error messages name the first few items of a long list and how many there
are (:func:`bounded_list`, :func:`bounded_text`), so a 1 MB CSV header never fills a terminal.

This module imports neither torch nor numpy (``hf-attn --help`` stays fast).
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


def count(minimum: int = 1, maximum: int | None = None):
    """An ``argparse`` type: an integer in ``[minimum, maximum]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
        return value

    parse.__name__ = "count"  # argparse names the type in "invalid count value"
    parse.spec = ["count", minimum, maximum]  # how to make it again (hf-attn's stored parsers, cli_help.json)
    return parse


positive_int = count(1)
non_negative_int = count(0)


def type_spec(kind) -> list | None:
    """An ``argparse`` type as JSON (None: one this module cannot make again): ``["str"]`` for none,
    ``["int"]`` / ``["float"]``, ``["count", min, max]`` / ``["finite_float", min, strictly_above]``,
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


def check_count(name: str, value, minimum: int = 1, allow_none: bool = True) -> None:
    """The Python-API twin of :func:`count`: ``ValueError`` naming ``name`` unless ``value`` is a
    whole number ``>= minimum`` (or None when ``allow_none``)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}{' or None' if allow_none else ''}, "
                         f"got {value!r}")


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


__all__ = ["count", "positive_int", "non_negative_int", "finite_float", "check_count", "bounded_list",
           "bounded_text", "MAX_HIDDEN_SIZE", "MAX_EMBEDDING_DIM", "MAX_NUM_LAYERS", "MAX_LENGTH"]
