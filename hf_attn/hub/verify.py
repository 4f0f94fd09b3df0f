"""The packaged model folder loaded as a Hub user would load it and run on one tokenized sentence
before anything is uploaded; every failure is one line."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from hf_attn.hub.files import HubError, _read_json

# The sentence the packaged model is run on before anything is uploaded.
VERIFY_SENTENCE = "a gorgeous , witty , seductive movie ."


def _one_line(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _check_loading_info(info: dict) -> None:
    """``from_pretrained(..., output_loading_info=True)``'s report → a HubError listing every
    mismatched, missing or unexpected weight (the packaged config and weights must agree exactly)."""
    problems = [f"{key}: weights {_shape(saved)} vs config {_shape(built)}"
                for key, saved, built in sorted(info.get("mismatched_keys") or ())]
    problems += [f"{key} missing from the weights" for key in sorted(info.get("missing_keys") or ())]
    problems += [f"{key} in the weights but not in the model the config builds"
                 for key in sorted(info.get("unexpected_keys") or ())]
    problems += [_one_line(msg) for msg in info.get("error_msgs") or ()]
    if problems:
        shown = "; ".join(problems[:4]) + (f"; ... ({len(problems)} in all)" if len(problems) > 4 else "")
        raise HubError(f"config.json and model.safetensors disagree: {shown}. Re-save the trained model "
                       "with save_pretrained instead of editing config.json")


def _shape(size) -> str:
    return "[" + ", ".join(str(n) for n in size) + "]"


def verify_model_folder(folder: str | os.PathLike) -> None:
    """Load a packaged model folder exactly as a user would (``from_pretrained`` with the classes hf_attn
    registers, no ``trust_remote_code``; the tokenizer from its own files) and run one forward on a
    tokenized sentence. HubError (one line) if the folder does not load, if config.json and
    model.safetensors disagree (missing, unexpected or differently shaped weights) or if the forward fails."""
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.configuration_hf_attn_pair import AttnPairClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
    from hf_attn.models.modeling_hf_attn_pair import AttnPairClassifierForSequenceClassification

    folder = Path(folder)
    model_type = _read_json(folder / "config.json").get("model_type")
    classes = {"hf_attn": (AttnClassifierConfig, AttnClassifierForSequenceClassification),
               "hf_attn_pair": (AttnPairClassifierConfig, AttnPairClassifierForSequenceClassification)}
    if model_type not in classes:
        raise HubError(f"config.json has model_type {model_type!r}; expected one of {sorted(classes)}")
    config_class, model_class = classes[model_type]

    def inputs_of(batch):
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        if model_type == "hf_attn_pair":  # premise and hypothesis: the same sentence
            inputs.update(hypothesis_input_ids=batch["input_ids"], hypothesis_attention_mask=batch["attention_mask"])
        return inputs

    with _transformers_quiet():
        try:
            config = config_class.from_pretrained(folder)
        except Exception as err:
            raise HubError(f"the packaged config.json does not load: {_one_line(err)}") from err
        try:
            model, info = model_class.from_pretrained(folder, config=config, output_loading_info=True,
                                                      ignore_mismatched_sizes=True)
        except Exception as err:
            raise HubError(f"the packaged model does not load (config.json and model.safetensors disagree?): "
                           f"{_one_line(err)}") from err
        _check_loading_info(info)
        _check_packaged_forward(model, folder, max(config.num_labels, 2), inputs_of)


@contextlib.contextmanager
def _transformers_quiet():
    """transformers' load reports and progress bars off (a one-line HubError replaces them), restored after."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _check_packaged_forward(model, folder: Path, num_labels: int, inputs_of=dict) -> None:
    """One forward of a packaged model on :data:`VERIFY_SENTENCE`, tokenized by the folder's own
    tokenizer (no remote code) and turned into the model's keyword arguments by ``inputs_of``:
    HubError (one line) unless it runs and returns finite logits of shape ``(1, num_labels)``."""
    import torch
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
        inputs = inputs_of(tokenizer([VERIFY_SENTENCE], return_tensors="pt"))
        with torch.no_grad():
            logits = model.eval()(**inputs).logits
    except Exception as err:
        raise HubError(f"the packaged model does not run on a tokenized sentence "
                       f"(tokenizer, config and weights disagree?): {_one_line(err)}") from err
    expected = (1, num_labels)
    if tuple(logits.shape) != expected or not torch.isfinite(logits).all():
        raise HubError(f"the packaged model returns logits of shape {tuple(logits.shape)} "
                       f"(expected {expected}, finite) on a tokenized sentence")


def verify_transformer_folder(folder: str | os.PathLike) -> None:
    """Load a packaged BERT-family folder as a Hub user would, with nothing but transformers:
    ``AutoModelForSequenceClassification`` / ``AutoTokenizer.from_pretrained(folder,
    trust_remote_code=False)``, a model class of transformers itself, weights matching config.json,
    and finite logits of shape (1, num_labels) on a tokenized sentence. HubError (one line) otherwise."""
    from transformers import AutoModelForSequenceClassification

    folder = Path(folder)
    with _transformers_quiet():
        try:
            model, info = AutoModelForSequenceClassification.from_pretrained(
                folder, trust_remote_code=False, output_loading_info=True)
        except Exception as err:
            raise HubError(f"the packaged model does not load with AutoModelForSequenceClassification "
                           f"(config.json and model.safetensors disagree?): {_one_line(err)}") from err
        if not type(model).__module__.startswith("transformers.models."):
            raise HubError(f"the packaged model loads as {type(model).__module__}.{type(model).__name__}, not "
                           "as one of transformers' own classes")
        _check_loading_info(info)
        _check_packaged_forward(model, folder, model.config.num_labels)
