"""Checks for arrays supplied by users (``evaluate`` modules, analysis functions): each raises
``ValueError`` with a message that names the argument, the instance and the problem.

Rows may be ragged (one ``(T_i,)`` or ``(k, T_i)`` array per instance). Used at API boundaries,
not inside hot loops.

One source: the checks live in ``hf_attn/core/numpy_measures.py``, the self-contained NumPy file
that every ``evaluate`` module ships as a generated copy (``scripts/generate_metric_copies.py``).
"""

from __future__ import annotations

from hf_attn.core.numpy_measures import (SUM_TOLERANCE, _rows, check_class_ids,  # noqa: F401
                                         check_distributions, check_finite, check_range,
                                         check_same_count, check_same_shapes)

__all__ = ["check_finite", "check_distributions", "check_range", "check_same_count", "check_same_shapes",
           "check_class_ids", "SUM_TOLERANCE"]
