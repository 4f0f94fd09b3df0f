"""hf_attn: the "is attention explanation?" experiments (Jain & Wallace 2019, Wiegreffe & Pinter
2019, Tutek & Šnajder 2020) as Hugging Face models, Trainer runs and evaluate modules."""

from transformers import AutoConfig, AutoModelForSequenceClassification

from .configuration_hf_attn import AttnClassifierConfig
from .modeling_hf_attn import (AttnClassifierForSequenceClassification, AttnClassifierOutput,
                               AttnClassifierPreTrainedModel)
from .configuration_hf_attn_pair import AttnPairClassifierConfig
from .modeling_hf_attn_pair import AttnPairClassifierForSequenceClassification, AttnPairClassifierOutput

__version__ = "0.1.0"

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

__all__ = ["AttnClassifierConfig", "AttnClassifierForSequenceClassification",
           "AttnClassifierOutput", "AttnClassifierPreTrainedModel", "AttnPairClassifierConfig",
           "AttnPairClassifierForSequenceClassification", "AttnPairClassifierOutput", "__version__"]
