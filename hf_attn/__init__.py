"""hf_attn: the "is attention explanation?" experiments (Jain & Wallace 2019, Wiegreffe & Pinter
2019, Tutek & Šnajder 2020) as Hugging Face models, Trainer runs and evaluate modules."""

import os as _os
import sys as _sys

__version__ = "0.1.0"

# name → submodule, imported on first access (PEP 562) when not imported eagerly below
_LAZY = {
    "AttnClassifierConfig": "models.configuration_hf_attn",
    "AttnClassifierForSequenceClassification": "models.modeling_hf_attn",
    "AttnClassifierOutput": "models.modeling_hf_attn",
    "AttnClassifierPreTrainedModel": "models.modeling_hf_attn",
    "AttnPairClassifierConfig": "models.configuration_hf_attn_pair",
    "AttnPairClassifierForSequenceClassification": "models.modeling_hf_attn_pair",
    "AttnPairClassifierOutput": "models.modeling_hf_attn_pair",
    "Explainer": "explainer",
    "Explanation": "explainer",
    "BatteryResult": "explainer",
    "adapter_for": "adapters",
    "AttentionSpec": "adapters",
}
_registered = False


def register_auto_classes() -> None:
    """Register the model types with ``transformers`` (idempotent; imports torch + transformers).

    ``import hf_attn`` calls it, so that ``from_pretrained(dir)`` works without
    ``trust_remote_code`` and ``save_pretrained`` writes ``auto_map`` + the modelling files; the
    ``hf-attn`` command line calls it once a subcommand runs (``hf-attn --help`` imports no torch)."""
    global _registered
    if _registered:
        return
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.configuration_hf_attn_pair import AttnPairClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
    from hf_attn.models.modeling_hf_attn_pair import AttnPairClassifierForSequenceClassification

    # `from_pretrained(dir)` without trust_remote_code when hf_attn is installed ...
    AutoConfig.register(AttnClassifierConfig.model_type, AttnClassifierConfig, exist_ok=True)
    AutoModelForSequenceClassification.register(AttnClassifierConfig,
                                                AttnClassifierForSequenceClassification, exist_ok=True)
    # ... and `save_pretrained` writes auto_map + these modelling files for trust_remote_code=True.
    AttnClassifierConfig.register_for_auto_class()
    AttnClassifierForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
    # The sentence-pair (NLI) model: its own model_type "hf_attn_pair".
    AutoConfig.register(AttnPairClassifierConfig.model_type, AttnPairClassifierConfig, exist_ok=True)
    AutoModelForSequenceClassification.register(AttnPairClassifierConfig,
                                                AttnPairClassifierForSequenceClassification, exist_ok=True)
    AttnPairClassifierConfig.register_for_auto_class()
    AttnPairClassifierForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")
    _registered = True


def _running_the_command_line() -> bool:
    """This interpreter was started as ``hf-attn …`` (console script) or ``python -m hf_attn.cli``:
    then :mod:`hf_attn.cli` registers the model types itself, after parsing, so that
    ``hf-attn --help`` need not import torch. Any other process registers them at import."""
    name = _os.path.basename(_sys.argv[0]) if _sys.argv and _sys.argv[0] else ""
    if _os.path.splitext(name)[0] == "hf-attn":
        return True
    argv = list(getattr(_sys, "orig_argv", ()))
    return "-m" in argv and argv[argv.index("-m") + 1:argv.index("-m") + 2] == ["hf_attn.cli"]


# submodules reachable after a bare ``import hf_attn`` (``hf_attn.datasets.load("sst")``)
_SUBMODULES = ("datasets",)


def __getattr__(name: str):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        import importlib

        register_auto_classes()
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not _running_the_command_line():
    register_auto_classes()
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig  # noqa: E402
    from hf_attn.models.configuration_hf_attn_pair import AttnPairClassifierConfig  # noqa: E402
    from hf_attn.models.modeling_hf_attn import (AttnClassifierForSequenceClassification,  # noqa: E402
                                   AttnClassifierOutput, AttnClassifierPreTrainedModel)
    from hf_attn.models.modeling_hf_attn_pair import (AttnPairClassifierForSequenceClassification,  # noqa: E402
                                        AttnPairClassifierOutput)

__all__ = ["AttnClassifierConfig", "AttnClassifierForSequenceClassification",
           "AttnClassifierOutput", "AttnClassifierPreTrainedModel", "AttnPairClassifierConfig",
           "AttnPairClassifierForSequenceClassification", "AttnPairClassifierOutput", "__version__",
           "register_auto_classes"]
