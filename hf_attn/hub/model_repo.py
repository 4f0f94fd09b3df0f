"""Trained runs as model repos: the checked run folder, exactly the files that are uploaded (weights,
config, tokenizer, run records, the analyses; modelling code for hf_attn's own models, none for
BERT-family classifiers), scrubbed of local paths, verified and given a model card; and the push."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hf_attn.hub.files import (MODEL_FILES, PICKLED_WEIGHTS, HubError, _allowed_files, _checked_source, _matches,
                               _read_json, _remove_partial)
from hf_attn.hub.scrub import SCRUBBED_FILES, UNSCRUBBED_FILES, _PathScrubber
from hf_attn.hub.analyses import _analysis_copies, summarise_analysis
from hf_attn.hub.verify import _one_line, verify_model_folder, verify_transformer_folder
from hf_attn.hub.upload import _upload
from hf_attn.hub.cards import build_model_card, build_transformer_model_card


def _checked_run_folder(run_dir: Path, out_dir: Path) -> tuple[Path, str]:
    """``(resolved run folder, model_type)`` after the checks every model folder passes: a folder with
    config.json (not a symlink out of it), no pickled weights, safetensors weights, an empty target."""
    if not run_dir.is_dir():
        raise HubError(f"{run_dir} is not a folder")
    root = run_dir.resolve()
    config_path = run_dir / "config.json"
    if not config_path.is_file():
        raise HubError(f"{run_dir} is not a trained model folder (no config.json)")
    model_type = str(_read_json(_checked_source(config_path, root)).get("model_type", ""))
    pickled = sorted(p.name for p in run_dir.iterdir() if _matches(p.name, PICKLED_WEIGHTS))
    if pickled:
        raise HubError(f"{run_dir} holds pickled weights ({', '.join(pickled)}), which can run arbitrary code "
                       "when loaded and are never published: re-save the model with safetensors "
                       "(from_pretrained(dir).save_pretrained(dir)) and delete them")
    if not (run_dir / "model.safetensors").exists() and not (run_dir / "model.safetensors.index.json").exists():
        raise HubError(f"{run_dir} has no model weights (model.safetensors); is the training finished?")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise HubError(f"{out_dir} exists and is not empty")
    return root, model_type


def _write_model_folder(run_dir: Path, out_dir: Path, copies, analysis_copies, verify, make_card,
                        unscrubbed=UNSCRUBBED_FILES) -> Path:
    """Copy the allowed files and analyses into ``out_dir``, scrub local paths (every text file but
    ``unscrubbed``), ``verify(out_dir)`` (None: skip), then write ``make_card(out_dir, analyses)`` as
    README.md (scrubbed too). Nothing is left behind on failure."""
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        for item, real in copies:
            shutil.copy2(real, out_dir / item.name)
        for name, _, files in analysis_copies:
            target = out_dir / "analysis" / name
            target.mkdir(parents=True)
            for item, real in files:
                shutil.copy2(real, target / item.name)
        scrubber = _PathScrubber(run_dir, [folder for _, folder, _ in analysis_copies])
        for path in sorted(out_dir.rglob("*")):
            if path.is_file() and _matches(path.name, SCRUBBED_FILES) and not _matches(path.name, unscrubbed):
                scrubber.file(path)
        if verify is not None:
            verify(out_dir)
        analyses = [summarise_analysis(out_dir / "analysis" / name, f"analysis/{name}")
                    for name, _, _ in analysis_copies]
        make_card(out_dir, analyses).save(out_dir / "README.md")
        scrubber.file(out_dir / "README.md")
    except BaseException:  # no half-built folder is left behind (--to-dir)
        _remove_partial(out_dir, created)
        raise
    return out_dir


def build_model_folder(run_dir: str | os.PathLike, out_dir: str | os.PathLike, repo_id: str,
                       analysis_dirs=(), template_path=None, license: str = "apache-2.0",
                       verify: bool = True) -> Path:
    """Write exactly the folder ``push_model`` uploads: model weights + config + modelling code
    (for ``trust_remote_code``) + tokenizer + metrics/run JSON + ``analysis/<name>/`` (results.json
    and figures of every analysis found) + the generated README.md model card.

    Only the files of ``MODEL_FILES`` (and ``ANALYSIS_FILES`` in analysis folders) are copied; a
    symlink resolving outside the run folder (or outside an ``analysis_dirs`` folder) is refused, as
    are pickled ``pytorch_model.bin`` weights; local absolute paths are scrubbed from every JSON /
    text file; and (``verify``) the packaged folder must load with ``from_pretrained`` and run.

    A BERT-family folder (``hf-attn train --base-model``: run.json kind "transformer") goes to
    :func:`build_transformer_model_folder` instead: no modelling code, transformers' own classes."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    root, model_type = _checked_run_folder(run_dir, out_dir)
    if _is_transformers_model_type(model_type):
        return build_transformer_model_folder(run_dir, out_dir, repo_id, analysis_dirs, template_path, license,
                                              verify)
    if not model_type.startswith("hf_attn"):
        raise HubError(f"{run_dir} holds a {model_type!r} model, neither an hf_attn model nor a model type "
                       "transformers defines")
    copies = _allowed_files(run_dir, MODEL_FILES, root)
    required = {"hf_attn": ("modeling_hf_attn.py", "configuration_hf_attn.py", "tokenizer.json"),
                "hf_attn_pair": ("modeling_hf_attn_pair.py", "configuration_hf_attn_pair.py", "tokenizer.json")}
    for name in required.get(model_type, ()):
        if not any(item.name == name for item, _ in copies):
            raise HubError(f"{run_dir} lacks {name}; re-save it with save_pretrained")
    analysis_copies = _analysis_copies(run_dir, root, analysis_dirs)
    return _write_model_folder(
        run_dir, out_dir, copies, analysis_copies, verify_model_folder if verify else None,
        lambda folder, analyses: build_model_card(folder, repo_id, analyses, template_path, license))


# The files of a BERT-family folder written by ``hf-attn train --base-model`` (hf_attn.training.transformer)
# that are uploaded: the weights (safetensors only, possibly sharded), config.json, the tokenizer files
# (fast tokenizer.json and the vocabulary files of the BERT / RoBERTa families), run.json and
# eval_results.json. Never modelling code (*.py: the model loads with transformers' own classes), never
# Trainer state (checkpoints/, optimizer.pt, scheduler.pt, rng_state.pth, trainer_state.json,
# training_args.bin), never pickles.
TRANSFORMER_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "model-*-of-*.safetensors",
                     "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                     "vocab.txt", "vocab.json", "merges.txt", "run.json", "eval_results.json")

# Vocabularies are copied byte-identical (derived from the base model, not from this machine).
TRANSFORMER_UNSCRUBBED = (*UNSCRUBBED_FILES, "vocab.txt", "vocab.json", "merges.txt")


def _is_transformers_model_type(model_type: str) -> bool:
    """A model type transformers itself defines (so the folder loads without modelling code)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return model_type in CONFIG_MAPPING_NAMES and not model_type.startswith("hf_attn")


def _transformer_run(run_dir: Path, root: Path) -> dict:
    """run.json of a BERT-family folder trained by ``hf-attn train --base-model`` (kind "transformer")."""
    from hf_attn.training.transformer import RUN_FILE, RUN_KIND

    path = run_dir / RUN_FILE
    run = _read_json(_checked_source(path, root)) if path.is_file() else None
    if not isinstance(run, dict) or run.get("kind") != RUN_KIND:
        raise HubError(f"{run_dir} is a BERT-family folder without an hf_attn run.json (kind {RUN_KIND!r}): "
                       "hf-attn push publishes the folders `hf-attn train --base-model` writes, whose run.json "
                       "the model card is made from")
    return run


def _refuse_remote_code(run_dir: Path, copies) -> None:
    """A BERT-family repo loads with transformers' own classes: an ``auto_map`` in config.json or
    tokenizer_config.json (code in this or another repo, run with trust_remote_code) is refused."""
    for item, real in copies:
        if item.name in ("config.json", "tokenizer_config.json"):
            try:
                payload = _read_json(real)
            except ValueError as err:
                raise HubError(f"{item.name} of {run_dir} is not valid JSON: {_one_line(err)}") from err
            if isinstance(payload, dict) and payload.get("auto_map"):
                raise HubError(f"{item.name} of {run_dir} has an auto_map (custom code loaded with "
                               "trust_remote_code): a BERT-family model is published to load with transformers' "
                               "own classes only; remove auto_map (and re-save with save_pretrained)")


def build_transformer_model_folder(run_dir: str | os.PathLike, out_dir: str | os.PathLike, repo_id: str,
                                   analysis_dirs=(), template_path=None, license: str = "apache-2.0",
                                   verify: bool = True) -> Path:
    """The folder ``push_model`` uploads for a BERT-family classifier trained by ``hf-attn train
    --base-model`` (run.json kind "transformer"): only :data:`TRANSFORMER_FILES` (weights as
    safetensors, config.json, tokenizer files, run.json, eval_results.json), the analyses found (as for
    hf_attn models) and a generated model card. No modelling code and no ``auto_map`` (refused): the
    repo loads with plain ``AutoModelForSequenceClassification.from_pretrained(repo_id)``, which
    (``verify``) is checked on the packaged folder. Pickles, Trainer state and checkpoints are never
    uploaded; local paths are scrubbed from every JSON / text file but the vocabularies."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    root, model_type = _checked_run_folder(run_dir, out_dir)
    if not _is_transformers_model_type(model_type):
        raise HubError(f"{run_dir} holds a {model_type!r} model, not a model type transformers defines")
    _transformer_run(run_dir, root)
    copies = _allowed_files(run_dir, TRANSFORMER_FILES, root)
    names = {item.name for item, _ in copies}
    if "tokenizer.json" not in names:
        raise HubError(f"{run_dir} lacks tokenizer.json (the fast tokenizer hf_attn's analyses need); re-save "
                       "the tokenizer with save_pretrained")
    _refuse_remote_code(run_dir, copies)
    analysis_copies = _analysis_copies(run_dir, root, analysis_dirs)
    return _write_model_folder(
        run_dir, out_dir, copies, analysis_copies, verify_transformer_folder if verify else None,
        lambda folder, analyses: build_transformer_model_card(folder, repo_id, analyses, template_path, license),
        unscrubbed=TRANSFORMER_UNSCRUBBED)


# What a model push replaces whole: the analyses (the card lists exactly the ones uploaded).
REPLACED_ON_PUSH = ("analysis/**",)


def push_model(run_dir, repo_id: str, private: bool = False, analysis_dirs=(), token=None, endpoint=None,
               commit_message: str = "Upload hf_attn model"):
    """Create (or reuse) the model repo and upload the folder of ``build_model_folder``; analysis
    files the repo holds from an earlier push and this one does not are deleted in the same commit,
    so the repo holds exactly the analyses its card lists. Returns the ``CommitInfo``."""
    with tempfile.TemporaryDirectory(prefix="hf-attn-push-") as tmp:
        folder = build_model_folder(run_dir, Path(tmp) / "repo", repo_id, analysis_dirs)
        return _upload(folder, repo_id, "model", private, commit_message, token, endpoint,
                       replace=REPLACED_ON_PUSH)
