"""Uploads through ``huggingface_hub`` (``HfApi.create_repo`` + ``HfApi.upload_folder``), so
``HF_ENDPOINT`` / ``HF_TOKEN`` behave as everywhere in the ecosystem."""

from __future__ import annotations

from pathlib import Path


def _api(token=None, endpoint=None):
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint, token=token)


def _upload(folder: Path, repo_id: str, repo_type: str, private: bool, message: str, token=None,
            endpoint=None, space_sdk: str | None = None, replace: tuple[str, ...] = ()):
    """Upload ``folder`` in one commit; repo files matching ``replace`` that the folder does not hold
    are deleted in the same commit (a re-push leaves no stale analysis beside the new weights)."""
    api = _api(token, endpoint)
    url = api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True, space_sdk=space_sdk)
    info = api.upload_folder(repo_id=url.repo_id, repo_type=repo_type, folder_path=str(folder),
                             commit_message=message, delete_patterns=list(replace) or None)
    return info
