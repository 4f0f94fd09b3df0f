"""hf_attn: the "is attention explanation?" experiments (Jain & Wallace 2019, Wiegreffe & Pinter
2019, Tutek & Šnajder 2020) as Hugging Face models, Trainer runs and evaluate modules."""

from transformers import AutoConfig, AutoModelForSequenceClassification

from .configuration_hf_attn import AttnClassifierConfig
from .modeling_hf_attn import (AttnClassifierForSequenceClassification, AttnClassifierOutput,
                               AttnClassifierPreTrainedModel)

__version__ = "0.1.0"

# `from_pretrained(dir)` without trust_remote_code when hf_attn is installed ...
AutoConfig.register(AttnClassifierConfig.model_type, AttnClassifierConfig, exist_ok=True)
AutoModelForSequenceClassification.register(AttnClassifierConfig,
                                            AttnClassifierForSequenceClassification, exist_ok=True)
# ... and `save_pretrained` writes auto_map + these modelling files for trust_remote_code=True.
AttnClassifierConfig.register_for_auto_class()
AttnClassifierForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = ["AttnClassifierConfig", "AttnClassifierForSequenceClassification",
           "AttnClassifierOutput", "AttnClassifierPreTrainedModel", "__version__"]
