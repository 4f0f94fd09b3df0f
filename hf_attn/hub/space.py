"""The explorer Space: its folder (the files of ``spaces_app/``, the rendered card, the models
visitors may pick and a vendored hf_attn) and its push; the Space metadata metric Spaces share."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from hf_attn.core.arguments import bounded_text
from hf_attn.hub.files import SPACE_APP_DIR, SPACE_FILES, HubError, _allowed_files, _vendor_package
from hf_attn.hub.upload import _api, _upload

# gradio is the `space` extra (pyproject.toml pins GRADIO_PIN; a test keeps the two equal): the
# explorer Space needs it, the library does not.
GRADIO_PIN = "6.31.0"
SPACE_EXTRA_INSTALL = 'pip install "hf_attn[space]"'


def require_space_extra(what: str = "the explorer Space") -> None:
    """:class:`HubError` naming ``pip install "hf_attn[space]"`` when gradio is not installed."""
    import importlib.util

    if importlib.util.find_spec("gradio") is None:
        raise HubError(f"{what} needs gradio, which is not installed: {SPACE_EXTRA_INSTALL}")


def _gradio_version() -> str:
    """The Spaces' ``sdk_version``: the installed gradio's, else :data:`GRADIO_PIN` (a metric Space
    can be built without the `space` extra)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gradio")
    except PackageNotFoundError:
        return GRADIO_PIN


def _space_metadata(title: str, emoji: str, description: str, tags: list[str], extra: dict | None = None) -> dict:
    meta = {"title": title, "emoji": emoji, "colorFrom": "blue", "colorTo": "red", "sdk": "gradio",
            "sdk_version": _gradio_version(), "app_file": "app.py", "pinned": False,
            "license": "apache-2.0", "tags": tags, "short_description": description[:60]}
    meta.update(extra or {})
    return meta


def _space_models(default_model: str | None = None, models=()) -> list[str]:
    """The Space's allow-list in order, without repeats or blanks: ``default_model`` first (the model
    it opens), then ``models`` (one name or several)."""
    if isinstance(models, str):
        models = [models]
    names = [default_model, *(models or ())]
    return list(dict.fromkeys(n.strip() for n in names if isinstance(n, str) and n.strip()))


_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(?:/[A-Za-z0-9][A-Za-z0-9_.-]*)?")


def _checked_hub_model_ids(models: list[str]) -> list[str]:
    """``models`` if each is a Hub model id (``NAME`` or ``USER/NAME``); a local path in any form
    (absolute, relative, ``~``, ``file://``, ``\\\\server``, an existing local folder) is a
    :class:`HubError`: what the Space is given is published, and a local path names nothing there."""
    for name in models:
        if not _HUB_ID.fullmatch(name) or ".." in name or name.endswith((".", "-")) or os.path.exists(name):
            raise HubError(f"--model: the Space's models must be Hub model ids (USER/NAME), not local paths "
                           f"({bounded_text(repr(name), 120)}); push the model first (hf-attn push) and pass its id")
    return models


def render_space_card(default_model: str | None = None, title: str = "Is attention explanation?",
                      models=(), template: str | os.PathLike | None = None) -> str:
    """README.md of the explorer Space (from the template ``spaces_app/README.md``): the models visitors pick from
    (``default_model`` first, then ``models``), also in the ``models`` metadata that links the Space to
    their Hub pages."""
    from huggingface_hub import CardData, RepoCard

    models = _space_models(default_model, models)
    hub_models = [m for m in models if not Path(m).exists()]
    meta = _space_metadata(title, "🔍", "Attention vs gradient, LOO-TVD and adversaries",
                           ["hf_attn", "attention", "interpretability", "explainability"],
                           {"models": hub_models or None})
    meta = {k: v for k, v in meta.items() if v is not None}
    card = RepoCard.from_template(CardData(**meta), template_path=str(template or SPACE_APP_DIR / "README.md"),
                                  title=title, default_model=models[0] if models else None, models=models)
    return str(card)


def build_space_folder(out_dir: str | os.PathLike, default_model: str | None = None,
                       app_dir: str | os.PathLike = SPACE_APP_DIR, vendor_package: bool = True,
                       models=()) -> Path:
    """The explorer Space: the files of ``spaces_app/`` (app.py, requirements.txt, and README.md
    rendered from it as a card template) + a vendored hf_attn + ``space_config.json`` with the models visitors
    may pick (``"models"``: ``default_model`` then ``models``) and the one it opens first
    (``"default_model"``, the first of them; the Space's ``HF_ATTN_MODEL`` variable overrides it)."""
    require_space_extra()
    app_dir, out_dir = Path(app_dir), Path(out_dir)
    if not (app_dir / "app.py").is_file():
        raise HubError(f"{app_dir} has no app.py")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise HubError(f"{out_dir} exists and is not empty")
    models = _checked_hub_model_ids(_space_models(default_model, models))
    copies = _allowed_files(app_dir, SPACE_FILES, app_dir.resolve())
    out_dir.mkdir(parents=True, exist_ok=True)
    for item, real in copies:
        shutil.copy2(real, out_dir / item.name)
    template = app_dir / "README.md" if (app_dir / "README.md").is_file() else None  # checked above: no symlink
    (out_dir / "README.md").write_text(render_space_card(models=models, template=template), encoding="utf-8")
    if models:
        config = {"default_model": models[0], "models": models}
        (out_dir / "space_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    if vendor_package:
        _vendor_package(out_dir)
    return out_dir


def push_space(repo_id: str, default_model: str | None = None, private: bool = False, token=None,
               endpoint=None, app_dir=SPACE_APP_DIR, commit_message: str = "Upload hf_attn explorer",
               models=()):
    """Create (or reuse) the Space ``repo_id`` and upload the folder of :func:`build_space_folder`
    offering ``default_model`` and ``models`` (Hub ids that exist on the Hub; the first opens).
    Returns the ``CommitInfo``."""
    require_space_extra()
    _checked_hub_model_ids(_space_models(default_model, models))
    api = _api(token, endpoint)
    for name in _space_models(default_model, models):  # a Space whose model is missing would not start
        if not api.repo_exists(name, repo_type="model"):
            raise HubError(f"model {name} does not exist on the Hub (or is not visible with this token): "
                           f"push it first (hf-attn push RUN_DIR --repo-id {name}) or check the name")
    with tempfile.TemporaryDirectory(prefix="hf-attn-push-") as tmp:
        folder = build_space_folder(Path(tmp) / "repo", default_model, app_dir, models=models)
        return _upload(folder, repo_id, "space", private, commit_message, token, endpoint, space_sdk="gradio")
