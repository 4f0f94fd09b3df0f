"""Token masks shared by the methods: which positions are real tokens, and which of them the model
attends over (Jain & Wallace 2019, §4 and their code: τ, permutations, leave-one-out and adversaries
are computed on the attended tokens only, without J&W's ``<SOS>``/``<EOS>`` markers).

Shapes: B instances, T tokens (right-padded).
"""

from __future__ import annotations

import torch


def input_mask(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor:
    """Bool ``(B, T)`` real-token mask: ``attention_mask`` as bool, or all True when it is None."""
    if attention_mask is None:
        return torch.ones(input_ids.shape[:2], dtype=torch.bool, device=input_ids.device)
    return attention_mask.bool()


def attended_mask(model, mask: torch.Tensor) -> torch.Tensor:
    """The positions the model attends over: ``mask`` without J&W's ``<SOS>``/``<EOS>`` markers
    for a model with ``config.attention_exclude_first_last`` (``model.attended_mask``), else
    ``mask`` itself. Every analysis works on these positions: J&W's code computes τ, permutations,
    leave-one-out deletions and adversaries on tokens 1…L−2 only (``Trainers/PlottingBC.py``
    ``[1:L-1]``, ``modelUtils.BatchHolder.generate_permutation``, ``remove_and_run``)."""
    select = getattr(model, "attended_mask", None)
    return mask if select is None else select(mask)


__all__ = ["attended_mask", "input_mask"]
