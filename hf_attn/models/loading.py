"""Loading a local hf_attn model folder for analysis, with one clear error per way it can fail.

Every battery, the ERASER command and the W&P helpers load models through :func:`load_model_folder`:
it checks the folder before ``from_pretrained`` runs (config.json readable and of an hf_attn model
type, weights in safetensors, a ``tokenizer.json``) and turns the errors ``from_pretrained`` raises
for a config/weights mismatch or a refused pickle into :class:`ModelFolderError` (a ``ValueError``:
the CLI prints it as one line with exit code 2). Remote code is never trusted: the classes are ours.
"""

from __future__ import annotations

import json
import os
import pickle

SINGLE_MODEL_TYPE, PAIR_MODEL_TYPE = "hf_attn", "hf_attn_pair"


class ModelFolderError(ValueError):
    """A model folder that cannot be loaded (the message names the folder and the reason)."""


def model_type_of(model_dir: str | os.PathLike) -> str:
    """``model_type`` of ``model_dir/config.json``; :class:`ModelFolderError` if there is none."""
    model_dir = os.fspath(model_dir)
    if not os.path.isdir(model_dir):
        raise ModelFolderError(f"no model folder {model_dir!r}")
    config_path = os.path.join(model_dir, "config.json")
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except FileNotFoundError:
        raise ModelFolderError(f"{model_dir} has no config.json: not a model folder written by "
                               "`hf-attn train` / save_pretrained") from None
    except (OSError, ValueError) as err:
        raise ModelFolderError(f"{config_path} is not valid JSON ({err})") from None
    if not isinstance(config, dict):
        raise ModelFolderError(f"{config_path} is not a JSON object")
    return str(config.get("model_type", ""))


def load_model_folder(model_dir: str | os.PathLike, expected_type: str | None = SINGLE_MODEL_TYPE):
    """``(model in eval mode, tokenizer)`` of a local hf_attn model folder.

    Args:
        model_dir: a folder written by ``hf-attn train`` or ``save_pretrained``.
        expected_type: ``"hf_attn"`` (single sentence), ``"hf_attn_pair"`` (sentence pairs) or None
            (either).
    Raises:
        ModelFolderError: missing/invalid config, another model type, pickled weights only, no
            tokenizer, or config and weights that disagree.
    """
    from transformers import PreTrainedTokenizerFast

    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification
    from hf_attn.models.modeling_hf_attn_pair import AttnPairClassifierForSequenceClassification

    model_dir = os.fspath(model_dir)
    model_type = model_type_of(model_dir)
    classes = {SINGLE_MODEL_TYPE: AttnClassifierForSequenceClassification,
               PAIR_MODEL_TYPE: AttnPairClassifierForSequenceClassification}
    if model_type not in classes or (expected_type is not None and model_type != expected_type):
        wanted = expected_type or " or ".join(classes)
        raise ModelFolderError(f"{model_dir} holds a {model_type!r} model, not an {wanted!r} model")
    if not os.path.isfile(os.path.join(model_dir, "model.safetensors")):
        if os.path.isfile(os.path.join(model_dir, "pytorch_model.bin")):
            raise ModelFolderError(f"{model_dir} has only pickled weights (pytorch_model.bin), which are "
                                   "not loaded (a pickle can run code); re-save the model with "
                                   "save_pretrained(..., safe_serialization=True)")
        raise ModelFolderError(f"{model_dir} has no model weights (model.safetensors); "
                               "is the training finished?")
    if not os.path.isfile(os.path.join(model_dir, "tokenizer.json")):
        raise ModelFolderError(f"{model_dir} has no tokenizer.json: save the tokenizer with the model "
                               "(tokenizer.save_pretrained) or point at a folder written by `hf-attn train`")
    check_readable_weights(os.path.join(model_dir, "model.safetensors"))
    mismatches = shape_mismatches(model_dir, classes[model_type])
    if mismatches:
        raise ModelFolderError(f"{model_dir}: config.json and model.safetensors disagree (size mismatch for "
                               + "; ".join(mismatches[:3]) + (" …" if len(mismatches) > 3 else "") + ")")
    check_weight_names(model_dir, classes[model_type])
    check_finite_weights(os.path.join(model_dir, "model.safetensors"))
    try:
        model = classes[model_type].from_pretrained(model_dir)
    except (RuntimeError, pickle.UnpicklingError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelFolderError(f"{model_dir}: cannot load the model ({first})") from err
    try:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
    except (OSError, ValueError) as err:
        raise ModelFolderError(f"{model_dir}/tokenizer.json cannot be loaded ({err})") from err
    if len(tokenizer) > model.config.vocab_size:
        raise ModelFolderError(f"{model_dir}: the tokenizer has {len(tokenizer)} tokens but the model's "
                               f"embedding only {model.config.vocab_size}; they do not belong together")
    return model.eval(), tokenizer


def shape_mismatches(model_dir: str, model_class) -> list[str]:
    """``"name: weights (a, b) vs config (c, d)"`` for every tensor of ``model.safetensors`` whose shape
    differs from the one the folder's ``config.json`` builds (checked on the meta device: no memory,
    no weights read). Corrupt weights files are left to ``from_pretrained``'s own error."""
    import torch
    from safetensors import safe_open

    try:
        with safe_open(os.path.join(model_dir, "model.safetensors"), framework="pt") as f:
            stored = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    except Exception:  # noqa: BLE001 — corrupt/truncated: from_pretrained says so clearly
        return []
    config = model_class.config_class.from_pretrained(model_dir)
    with torch.device("meta"):
        expected = {name: tuple(t.shape) for name, t in model_class(config).state_dict().items()}
    return [f"{name}: weights {stored[name]} vs config {expected[name]}"
            for name in sorted(stored) if name in expected and stored[name] != expected[name]]


def _names(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f", … ({len(names)} in all)" if len(names) > 5 else "")


def check_weight_names(model_dir: str, model_class) -> None:
    """:class:`ModelFolderError` naming the tensors ``model.safetensors`` lacks (``from_pretrained``
    would initialise them at random and analyse a model nobody trained) or holds beyond those the
    folder's ``config.json`` builds (weights of another model). Corrupt files are left to
    ``from_pretrained``'s own error."""
    import torch
    from safetensors import safe_open

    path = os.path.join(model_dir, "model.safetensors")
    try:
        with safe_open(path, framework="pt") as f:
            stored = set(f.keys())
    except Exception:  # noqa: BLE001 — corrupt/truncated: from_pretrained says so clearly
        return
    config = model_class.config_class.from_pretrained(model_dir)
    with torch.device("meta"):
        expected = set(model_class(config).state_dict())
    missing, unexpected = sorted(expected - stored), sorted(stored - expected)
    if missing:
        raise ModelFolderError(f"{path} lacks tensor(s) {_names(missing)} that config.json's model has; "
                               "they would be initialised at random, so the folder is not loaded")
    if unexpected:
        raise ModelFolderError(f"{path} holds tensor(s) {_names(unexpected)} that config.json's model does "
                               "not have: the weights belong to another model")


def check_readable_weights(path: str) -> None:
    """:class:`ModelFolderError` naming the safetensors file ``path`` when it cannot be read
    (truncated or corrupt): one line instead of the reader's traceback."""
    from safetensors import safe_open

    try:
        with safe_open(path, framework="pt") as f:
            f.keys()
    except Exception as err:  # noqa: BLE001 — SafetensorError, OSError
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise ModelFolderError(f"{path} cannot be read ({first}): the weights file is corrupt or truncated; "
                               "copy or save the model again") from None


def check_finite_weights(path: str) -> None:
    """:class:`ModelFolderError` naming every tensor of the safetensors file ``path`` that holds NaN
    or infinite values (such a model predicts NaN: every analysis would be null)."""
    import torch
    from safetensors import safe_open

    bad = []
    try:
        with safe_open(path, framework="pt") as f:
            for name in f.keys():
                tensor = f.get_tensor(name)
                if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                    count = int((~torch.isfinite(tensor)).sum())
                    bad.append(f"{name} ({count} of {tensor.numel()} values)")
    except Exception:  # noqa: BLE001 — corrupt/truncated: from_pretrained says so clearly
        return
    if bad:
        raise ModelFolderError(f"{path}: tensor(s) {_names(bad)} hold NaN or infinite values; the model "
                               "cannot give meaningful predictions, so it is not loaded")


__all__ = ["load_model_folder", "model_type_of", "ModelFolderError", "check_weight_names", "check_finite_weights",
           "check_readable_weights"]
