"""hf_attn: the "is attention explanation?" experiments (Jain & Wallace 2019, Wiegreffe & Pinter
2019, Tutek & Šnajder 2020) as Hugging Face models, Trainer runs and evaluate modules."""

from hf_attn.models.auto_registration import register_when_auto_classes_load as _register_when_auto_classes_load

__version__ = "0.1.0"

# name → submodule, imported on first access (PEP 562): `import hf_attn` itself imports neither torch nor
# transformers (tests/test_import_time.py); the model types reach the Auto classes through the hook at the end
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
_configs_registered = False
_registering = False


def _register_configs_with(configuration_auto) -> None:
    """Register the two config classes with ``configuration_auto.AutoConfig`` (the import hook's
    callback, :mod:`hf_attn.models.auto_registration`)."""
    global _configs_registered
    if _configs_registered:
        return
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.configuration_hf_attn_pair import AttnPairClassifierConfig

    for config_class in (AttnClassifierConfig, AttnPairClassifierConfig):
        configuration_auto.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        # `save_pretrained` writes auto_map + the configuration file for trust_remote_code=True
        config_class.register_for_auto_class()
    _configs_registered = True


def register_configs() -> None:
    """Register the two config classes with ``AutoConfig`` now (idempotent; imports transformers'
    Auto classes, not its modelling code).

    Rarely needed by hand: ``import hf_attn`` registers them as soon as transformers' Auto classes
    are imported (:mod:`hf_attn.models.auto_registration`), and the models on the first hf_attn
    config made (:func:`register_auto_classes`)."""
    if _configs_registered:
        return
    from transformers.models.auto import configuration_auto  # the import hook may register them here

    _register_configs_with(configuration_auto)


def register_auto_classes() -> None:
    """Register the configs and the models with ``transformers`` (idempotent; imports the models,
    so transformers' modelling utilities).

    Called when the first hf_attn config is made (``from_pretrained(dir)`` makes the config before it
    looks the model class up) and on first access to a model class through ``hf_attn.X``, so that
    ``from_pretrained(dir)`` works without ``trust_remote_code`` and ``save_pretrained`` writes
    ``auto_map`` + the modelling files, while ``import hf_attn`` imports neither torch nor
    transformers (and ``hf-attn --help`` no torch)."""
    global _registered, _registering
    if _registered or _registering:
        return
    _registering = True  # importing the models must not come back here through a config made meanwhile
    try:
        register_configs()
        from transformers import AutoModelForSequenceClassification

        from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
        from hf_attn.models.modeling_hf_attn_pair import AttnPairClassifierForSequenceClassification

        # `from_pretrained(dir)` without trust_remote_code when hf_attn is installed ...
        for model_class in (AttnClassifierForSequenceClassification, AttnPairClassifierForSequenceClassification):
            AutoModelForSequenceClassification.register(model_class.config_class, model_class, exist_ok=True)
            # ... and `save_pretrained` writes auto_map + these modelling files for trust_remote_code=True.
            model_class.register_for_auto_class("AutoModelForSequenceClassification")
        _registered = True
    finally:
        _registering = False


# submodules reachable after a bare ``import hf_attn`` (``hf_attn.datasets.load("sst")``)
_SUBMODULES = ("datasets",)


def __getattr__(name: str):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        import importlib

        if _LAZY[name].startswith("models.modeling"):
            register_auto_classes()
        else:
            register_configs()
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# the configs join AutoConfig as soon as transformers' Auto classes are imported (now, if they already are)
_register_when_auto_classes_load(_register_configs_with)

__all__ = ["AttnClassifierConfig", "AttnClassifierForSequenceClassification",
           "AttnClassifierOutput", "AttnClassifierPreTrainedModel", "AttnPairClassifierConfig",
           "AttnPairClassifierForSequenceClassification", "AttnPairClassifierOutput", "__version__",
           "register_auto_classes", "register_configs"]
