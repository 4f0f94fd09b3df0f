"""The versions every results file records (so a number can be traced to the software that made it)."""

from __future__ import annotations

import platform


def environment_versions() -> dict[str, str]:
    """Versions of hf_attn, torch, transformers, datasets, NumPy and Python."""
    import datasets
    import numpy as np
    import torch
    import transformers

    from hf_attn import __version__

    return {"hf_attn": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "datasets": datasets.__version__, "numpy": np.__version__, "python": platform.python_version()}


__all__ = ["environment_versions"]
