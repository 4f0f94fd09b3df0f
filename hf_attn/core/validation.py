"""Checks for arrays supplied by users (``evaluate`` modules, analysis functions): each raises
``ValueError`` with a message that names the argument, the instance and the problem.

Rows may be ragged (one ``(T_i,)`` or ``(k, T_i)`` array per instance). Used at API boundaries,
not inside hot loops.

One source: the checks live in ``hf_attn/metrics/_hf_attn_measures.py``, the NumPy file every
``evaluate`` module ships (it must be self-contained to load from the Hub without hf_attn); the
library imports them from there instead of keeping a copy that could drift.
"""

from __future__ import annotations

from hf_attn.metrics._hf_attn_measures import (SUM_TOLERANCE, _rows, check_class_ids,  # noqa: F401
                                               check_distributions, check_finite, check_range,
                                               check_same_count, check_same_shapes)

__all__ = ["check_finite", "check_distributions", "check_range", "check_same_count", "check_same_shapes",
           "check_class_ids", "SUM_TOLERANCE"]
