"""Checks for arrays supplied by users (``evaluate`` modules, analysis functions): each raises
``ValueError`` with a message that names the argument, the instance and the problem.

Rows may be ragged (one ``(T_i,)`` or ``(k, T_i)`` array per instance). Used at API boundaries,
not inside hot loops.

One source: the checks live in ``hf_attn/core/numpy_measures.py``, the self-contained NumPy file
that every ``evaluate`` module ships as a generated copy (``scripts/generate_metric_copies.py``).

Settings use the same source: :func:`check_number` (finite, within bounds), :func:`check_whole`
(a whole number within bounds; with ``limit=``, a count setting up to its upper bound in
:data:`COUNT_LIMITS`, the reason told) and :func:`check_seed` (a seed in ``[0, MAX_SEED]``, what torch and NumPy
both accept), :func:`check_num_classes` (at most :data:`MAX_CLASSES`,
checked before any per-class table is allocated) serve the settings dataclasses, the ``Explainer``,
the explorer Space and the ``evaluate`` modules alike; :func:`check_within_bounds` checks values
against bounds computed along another float32 path (clipped within float32 rounding, refused
beyond); :func:`check_labels` checks labels against a model's classes.
"""

from __future__ import annotations

from hf_attn.core.numpy_measures import (COUNT_LIMITS, MAX_CLASSES, MAX_SEED, SUM_TOLERANCE, _rows,  # noqa: F401
                                         check_class_ids, check_distributions, check_finite, check_num_classes,
                                         check_number, check_range, check_same_count, check_same_shapes,
                                         check_seed, check_whole, check_within_bounds)


def check_labels(labels, count: int, num_classes: int, label_names=None, name: str = "labels") -> list[int]:
    """``labels`` (one per text) → class ids of a model with ``num_classes`` classes. A label is a
    class id (an int, or a float that is a whole number such as ``1.0``) in ``[0, num_classes)``, or
    one of the model's class names ``label_names`` (its ``id2label``); anything else — ``5`` or ``-1``
    for a 2-class model, ``0.7``, a name the model does not have — is a ``ValueError`` naming the
    item, never rounded or remapped."""
    import numpy as np

    if isinstance(labels, (str, bytes)) or isinstance(labels, dict):
        raise ValueError(f"{name} must be a list with one label per text, got a {type(labels).__name__}")
    items = list(labels)
    if len(items) != count:
        raise ValueError(f"{count} texts but {len(items)} {name}")
    names = [str(n) for n in (label_names or [])]
    out = []
    for i, label in enumerate(items):
        if isinstance(label, str):
            if label not in names:
                raise ValueError(f"{name}[{i}] = {label!r} is not one of the model's classes {names}")
            out.append(names.index(label))
            continue
        if isinstance(label, bool) or not isinstance(label, (int, float, np.integer, np.floating)):
            raise ValueError(f"{name}[{i}] must be a class id or a class name, got {label!r}")
        if not np.isfinite(float(label)) or float(label) != int(label):
            raise ValueError(f"{name}[{i}] = {label!r} is not a whole class id")
        if not 0 <= int(label) < num_classes:
            raise ValueError(f"{name}[{i}] = {int(label)} is outside the model's {num_classes} classes "
                             f"[0, {num_classes})")
        out.append(int(label))
    return out


def _default_names(names) -> bool:
    """transformers' placeholder class names (``LABEL_0``, ``LABEL_1``, …) or bare ids."""
    return all(str(n) in (f"LABEL_{i}", str(i)) for i, n in enumerate(names))


def align_labels(labels, data_names, model_names) -> tuple[list[int], list[str]]:
    """Labels of a data set (ids into ``data_names``, as the loaders number them) → ids of the model's
    classes ``model_names`` (its ``id2label``), and the model's names. A data set with more classes
    than the model is refused; named classes are matched by name when the model names its classes
    (a name the model does not have is refused, never mapped by sort order); with placeholder names
    (``LABEL_0``…) the ids are kept."""
    data_names = [str(n) for n in data_names]
    model_names = [str(n) for n in model_names]
    from hf_attn.core.arguments import bounded_list

    if len(data_names) > len(model_names):
        raise ValueError(f"the data has {len(data_names)} classes ({bounded_list(data_names)}) but the model only "
                         f"{len(model_names)} ({bounded_list(model_names)})")
    if _default_names(model_names) or _default_names(data_names) or data_names == model_names[:len(data_names)]:
        return [int(y) for y in labels], model_names
    missing = [n for n in data_names if n not in model_names]
    if missing:
        raise ValueError(f"label name(s) {bounded_list(missing)} of the data are not classes of the model "
                         f"({bounded_list(model_names)}); name the classes as the model's id2label does")
    to_model = [model_names.index(n) for n in data_names]
    return [to_model[int(y)] for y in labels], model_names


__all__ = ["align_labels", "check_finite", "check_distributions", "check_range", "check_same_count", "check_same_shapes",
           "check_class_ids", "check_number", "check_whole", "check_num_classes", "check_labels",
           "check_within_bounds", "check_seed", "COUNT_LIMITS", "MAX_CLASSES", "MAX_SEED", "SUM_TOLERANCE"]
