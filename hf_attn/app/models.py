"""The explorer Space's models: which ones visitors may open (:class:`ModelPolicy`, the operator's
allow-list, :func:`model_policy`), how they are loaded (:func:`load_model`: hf_attn's own classes or
transformers' own classes for the config's ``model_type``, never remote code, never pickled weights),
how many are held (:class:`ModelCache`), how a visitor's Hub model is bounded in bytes before it is
downloaded and visitors' downloads on disk in all (:class:`VisitorDownloads`), and which model the app
opens first (:func:`default_model`, :func:`find_local_model`). The errors a visitor sees
(:class:`ExplainError`) are defined here and re-exported by :mod:`hf_attn.app.space`, which holds the
request limits and the explain calls.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from hf_attn.models.loading import (SINGLE_MODEL_TYPE, ModelFolderError, check_finite_weights, load_model_folder,
                                    model_type_of)

LOGGER = logging.getLogger(__name__)



class ExplainError(ValueError):
    """Input the explorer cannot explain (empty, too long, ...): the message is shown to the user."""


class ModelNotAllowed(ExplainError):
    """A model name outside the explorer's allow-list (always :data:`NOT_ALLOWED_MESSAGE`)."""


# --------------------------------------------------------------------------------------- models
ALLOW_ANY_MODEL_ENV = "HF_ATTN_ALLOW_ANY_MODEL"
CACHE_SIZE_ENV = "HF_ATTN_MODEL_CACHE_SIZE"
DEFAULT_CACHE_SIZE = 4
# Visitors' Hub models (HF_ATTN_ALLOW_ANY_MODEL=1) on disk: each at most MAX_MODEL_BYTES (its files
# as the Hub lists them, checked before anything is downloaded), all of them together at most
# VISITOR_DISK_BYTES, the least recently used removed first; kept in their own folder, so that the
# operator's models are never removed.
MAX_MODEL_BYTES_ENV = "HF_ATTN_MAX_MODEL_BYTES"
DEFAULT_MAX_MODEL_BYTES = 2 * 10**9
VISITOR_DISK_ENV = "HF_ATTN_VISITOR_DISK_BYTES"
DEFAULT_VISITOR_DISK_BYTES = 8 * 10**9
VISITOR_DIR_ENV = "HF_ATTN_VISITOR_MODELS_DIR"
# One message for every refused name: whether the name is a path that exists on the server, a Hub id
# or nonsense must not show through.
NOT_ALLOWED_MESSAGE = "This model is not offered by this explorer. Please pick one of the models in the list."
# What a Hub snapshot may bring onto the server: weights, config, tokenizer and hf-attn's run.json (the
# data set the model was trained on: which human rationales apply, hf_attn.app.rationale). Never *.py
# (remote code) nor pickles (pytorch_model.bin can run code when unpickled).
HUB_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
             "special_tokens_map.json", "run.json")


def is_hub_id(name: str) -> bool:
    """Whether ``name`` is spelled like a Hub repo id (``NAME`` or ``USER/NAME``) rather than a local
    path (absolute, ``./``, ``../``, ``~``, two or more ``/``). Spelling only: whether a name the
    operator gave means a folder or a Hub repo is :func:`names_hub_repo`'s question."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if name.startswith((".", "~")) or os.path.isabs(name) or name.count("/") > 1 or "\\" in name:
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def names_hub_repo(name: str) -> bool:
    """Whether a trusted name (the operator's list, a script) means a Hub repo: spelled like a Hub id
    and no folder of that name exists here. An existing folder always wins (``runs/sst-lstm`` is
    the folder, ``./`` is never needed). Names visitors type are never looked up on disk: they are
    Hub ids or nothing (:meth:`ModelPolicy.resolve`)."""
    return is_hub_id(name) and not os.path.isdir(os.path.expanduser(name))


@dataclass(frozen=True)
class ModelPolicy:
    """Which models visitors of the explorer may open.

    ``models`` is the operator's allow-list (Hub ids and local folders, offered in the app's dropdown);
    names are compared exactly. With ``allow_any_hub_id`` (``HF_ATTN_ALLOW_ANY_MODEL=1``) any other
    Hub id may be typed too, but never a local path that is not on the list. Whatever the policy, a
    model runs only through hf_attn's own classes (no remote code). ``cache_size`` bounds
    :class:`ModelCache`. A visitor's Hub model is downloaded only if its files take at most
    ``max_model_bytes``, into ``visitor_dir`` (None: ``hf_attn-visitor-models`` in the Hugging Face
    home folder), where all of them together take at most ``visitor_disk_bytes``
    (:class:`VisitorDownloads`)."""

    models: tuple[str, ...] = ()
    allow_any_hub_id: bool = False
    cache_size: int = DEFAULT_CACHE_SIZE
    max_model_bytes: int = DEFAULT_MAX_MODEL_BYTES
    visitor_disk_bytes: int = DEFAULT_VISITOR_DISK_BYTES
    visitor_dir: str | None = None

    def is_visitor_model(self, name: str) -> bool:
        """Whether ``name`` (as :meth:`resolve` returns it) is a visitor's Hub id, not the operator's."""
        return name not in self.models

    def resolve(self, name) -> tuple[str, bool]:
        """``(name stripped, whether it is a Hub id)`` if the policy allows ``name``; otherwise
        :class:`ModelNotAllowed` with :data:`NOT_ALLOWED_MESSAGE`. Reads nothing from disk or network,
        so a refusal says nothing about what exists."""
        name = name.strip() if isinstance(name, str) else ""
        if not name:
            raise ExplainError("Please choose a model.")
        if name in self.models:  # the operator's: an existing folder wins over a Hub id
            return name, names_hub_repo(name)
        if self.allow_any_hub_id and is_hub_id(name):  # a visitor's: a Hub id, even if such a folder exists
            return name, True
        raise ModelNotAllowed(NOT_ALLOWED_MESSAGE)


def _split_names(value: str | None) -> list[str]:
    """``HF_ATTN_MODELS``-style lists: separated by os.pathsep or commas, blanks dropped."""
    return [part.strip() for chunk in (value or "").split(os.pathsep) for part in chunk.split(",") if part.strip()]


def _space_config(app_dir) -> dict:
    """``space_config.json`` next to the app (``{}`` when there is none)."""
    if app_dir is None or not (Path(app_dir) / "space_config.json").is_file():
        return {}
    path = Path(app_dir) / "space_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    models = config.get("models", []) if isinstance(config, dict) else None
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise ValueError(f"{path}: expected an object whose \"models\" is a list of model names")
    return config


def configured_models(app_dir=None) -> list[str]:
    """The operator's models in order, without repeats: ``HF_ATTN_MODEL``, ``HF_ATTN_MODELS``
    (os.pathsep- or comma-separated), then ``space_config.json``'s ``"default_model"`` and
    ``"models"``."""
    config = _space_config(app_dir)
    names = [*_split_names(os.environ.get("HF_ATTN_MODEL")), *_split_names(os.environ.get("HF_ATTN_MODELS")),
             *([config["default_model"]] if isinstance(config.get("default_model"), str) else []),
             *config.get("models", [])]
    return list(dict.fromkeys(name.strip() for name in names if name.strip()))


def model_policy(app_dir=None, extra: Iterable[str] = ()) -> ModelPolicy:
    """The explorer's :class:`ModelPolicy`: :func:`configured_models` plus ``extra`` (e.g. the local
    model the app found or trained); ``HF_ATTN_ALLOW_ANY_MODEL=1`` also allows any Hub id;
    ``HF_ATTN_MODEL_CACHE_SIZE`` (default 4) bounds the loaded models; ``HF_ATTN_MAX_MODEL_BYTES``
    (default 2 GB) a visitor's model, ``HF_ATTN_VISITOR_DISK_BYTES`` (default 8 GB) all visitors'
    models on disk, kept in ``HF_ATTN_VISITOR_MODELS_DIR`` (:class:`VisitorDownloads`)."""
    models = list(dict.fromkeys([*configured_models(app_dir), *(e for e in extra if e)]))
    allow_any = os.environ.get(ALLOW_ANY_MODEL_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    cache_size = _whole_setting(CACHE_SIZE_ENV, DEFAULT_CACHE_SIZE, 1)
    max_bytes = _whole_setting(MAX_MODEL_BYTES_ENV, DEFAULT_MAX_MODEL_BYTES, 1)
    disk_bytes = _whole_setting(VISITOR_DISK_ENV, max(DEFAULT_VISITOR_DISK_BYTES, max_bytes), 1)
    if disk_bytes < max_bytes:
        raise ValueError(f"{VISITOR_DISK_ENV} ({disk_bytes}) must be at least {MAX_MODEL_BYTES_ENV} ({max_bytes}): "
                         "one visitor's model must fit")
    return ModelPolicy(tuple(models), allow_any, cache_size, max_bytes, disk_bytes,
                       os.environ.get(VISITOR_DIR_ENV, "").strip() or None)


def _whole_setting(name: str, default: int, lowest: int) -> int:
    """The environment variable ``name`` as a whole number ≥ ``lowest`` (``default`` when unset);
    ValueError naming it otherwise."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number") from None
    if number < lowest:
        raise ValueError(f"{name} must be at least {lowest}")
    return number


def _check_model_type(folder: str, name: str) -> None:
    """Refuse anything but a single-sentence hf_attn model, from ``config.json`` alone (before any
    weights or tokenizer are read)."""
    try:
        model_type = model_type_of(folder)
    except ModelFolderError as err:
        raise ExplainError(f"Cannot load model {name!r}: {str(err).replace(folder, name)}") from err
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if model_type != SINGLE_MODEL_TYPE and (model_type not in CONFIG_MAPPING_NAMES or model_type.startswith("hf_attn")):
        raise ExplainError(f"{name!r} is a {model_type!r} model; the explorer needs a single-sentence "
                           f"{SINGLE_MODEL_TYPE} classifier or a transformers sequence classifier.")


def _size_text(size: int) -> str:
    """Bytes for messages: 1.5 GB, 340 MB, 12 kB, 80 bytes (powers of 1000, as the Hub shows sizes)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def _folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (each file once: the Hub cache's snapshots link to its blobs)."""
    seen, total = set(), 0
    for path in folder.rglob("*"):
        try:
            stat = path.stat()  # follows links: a snapshot's file is its blob
        except OSError:
            continue
        if path.is_file() and (stat.st_dev, stat.st_ino) not in seen:
            seen.add((stat.st_dev, stat.st_ino))
            total += stat.st_size
    return total


class VisitorDownloads:
    """The Hub models visitors opened (``HF_ATTN_ALLOW_ANY_MODEL=1``), on disk in a folder of their
    own (a Hugging Face cache: one ``models--USER--NAME`` folder per repo): a model whose files take
    more than ``max_model_bytes`` is refused before it is downloaded (:meth:`admit`), and all of them
    together take at most ``disk_bytes``: the least recently used are removed to make room
    (:meth:`make_room`). The operator's models live elsewhere and are never removed. Last use is the
    time of a marker file in each repo folder (:meth:`touch`), so copies left by an earlier run count
    and are removed first. Callers serialise downloads (:class:`ModelCache` loads one at a time)."""

    MARKER = ".hf_attn-last-used"

    def __init__(self, folder: str | os.PathLike, max_model_bytes: int, disk_bytes: int):
        self.folder = Path(folder)
        self.max_model_bytes = int(max_model_bytes)
        self.disk_bytes = int(disk_bytes)

    @classmethod
    def of(cls, policy: ModelPolicy) -> "VisitorDownloads":
        """The store of ``policy`` (its ``visitor_dir``, default ``hf_attn-visitor-models`` in the
        Hugging Face home folder, next to its ``hub`` cache)."""
        folder = policy.visitor_dir
        if folder is None:
            from huggingface_hub import constants

            folder = os.path.join(constants.HF_HOME, "hf_attn-visitor-models")
        return cls(os.path.expanduser(folder), policy.max_model_bytes, policy.visitor_disk_bytes)

    def repo_folder(self, repo_id: str) -> Path:
        from huggingface_hub.file_download import repo_folder_name

        return self.folder / repo_folder_name(repo_id=repo_id, repo_type="model")

    def stored(self) -> list[tuple[float, int, Path]]:
        """``(last use, bytes, folder)`` of every stored repo, least recently used first."""
        if not self.folder.is_dir():
            return []
        entries = []
        for folder in self.folder.iterdir():  # a repo's folder, never the cache's .locks
            if not folder.name.startswith("models--") or not folder.is_dir() or folder.is_symlink():
                continue
            marker = folder / self.MARKER
            used = (marker if marker.exists() else folder).stat().st_mtime
            entries.append((used, _folder_bytes(folder), folder))
        return sorted(entries, key=lambda entry: entry[0])

    def total_bytes(self) -> int:
        return sum(size for _, size, _ in self.stored())

    def touch(self, repo_id: str) -> None:
        """Record a use of ``repo_id`` (a no-op when it is not stored)."""
        folder = self.repo_folder(repo_id)
        if folder.is_dir():
            (folder / self.MARKER).touch()

    def admit(self, repo_id: str, size: int) -> None:
        """:class:`ExplainError` (one line for the visitor) when ``size`` bytes exceed the limit."""
        if size > self.max_model_bytes:
            raise ExplainError(f"{repo_id!r} is too large for this explorer: its model files take "
                               f"{_size_text(size)}, the limit is {_size_text(self.max_model_bytes)}.")

    def make_room(self, repo_id: str, size: int) -> list[Path]:
        """Remove the least recently used other repos until they and ``size`` bytes for ``repo_id``
        fit within ``disk_bytes``; the folders removed."""
        own = self.repo_folder(repo_id)
        entries = self.stored()
        total = sum(bytes_ for _, bytes_, folder in entries if folder != own) + size
        removed = []
        for _, bytes_, folder in entries:
            if total <= self.disk_bytes:
                break
            if folder == own:
                continue
            self._remove(folder)
            LOGGER.info("removed the visitor's model %s (%s) to keep visitors' downloads within %s", folder.name,
                        _size_text(bytes_), _size_text(self.disk_bytes))
            removed.append(folder)
            total -= bytes_
        return removed

    def remove(self, repo_id: str) -> None:
        self._remove(self.repo_folder(repo_id))

    def _remove(self, folder: Path) -> None:
        """A repo's folder and its download locks."""
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(self.folder / ".locks" / folder.name, ignore_errors=True)


def _hub_failure(repo_id: str, err: Exception, what: str = "") -> ExplainError:
    LOGGER.warning("cannot download %s%r: %s: %s", what, repo_id, type(err).__name__, " ".join(str(err).split())[:300])
    return ExplainError(f"Cannot download {repo_id!r} from the Hugging Face Hub (is it a public hf_attn "
                        "model repository?).")


def _download_hub_model(repo_id: str, downloads: VisitorDownloads | None = None) -> str:
    """A local snapshot of the Hub repo ``repo_id`` (through huggingface_hub, so ``HF_ENDPOINT`` /
    ``HF_HUB_OFFLINE`` apply): config.json first, checked, then only :data:`HUB_FILES`.

    ``downloads`` (a visitor's model): the repo's commit is fixed first, the sizes of its
    :data:`HUB_FILES` at that commit are checked against the limit before anything is downloaded
    (:meth:`VisitorDownloads.admit`), room is made by removing the least recently used visitors'
    models, and the snapshot goes to their folder; the operator's models (``downloads=None``) go to
    the Hugging Face cache as usual."""
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download
    from huggingface_hub.hf_api import RepoFile

    revision, where = None, {}
    if downloads is not None:
        try:
            api = HfApi()
            revision = api.model_info(repo_id).sha  # every later request reads this very commit
            listed = [entry for entry in api.list_repo_tree(repo_id, revision=revision)
                      if isinstance(entry, RepoFile) and entry.path in HUB_FILES]
        except Exception as err:  # network, missing or private repo, offline: all "cannot download"
            raise _hub_failure(repo_id, err, "the file list of ") from err
        size = sum(int(entry.lfs.size if entry.lfs else entry.size) for entry in listed)
        downloads.admit(repo_id, size)
        downloads.make_room(repo_id, size)
        where = {"cache_dir": str(downloads.folder), "revision": revision}
    try:
        config_path = hf_hub_download(repo_id, "config.json", **where)
    except Exception as err:  # network, missing or private repo, offline cache miss: all "cannot download"
        raise _hub_failure(repo_id, err, "config.json of ") from err
    _check_model_type(os.path.dirname(config_path), repo_id)
    try:
        folder = snapshot_download(repo_id, allow_patterns=list(HUB_FILES), **where)
    except Exception as err:
        LOGGER.warning("cannot download %r: %s: %s", repo_id, type(err).__name__, " ".join(str(err).split())[:300])
        raise ExplainError(f"Cannot download {repo_id!r} from the Hugging Face Hub.") from err
    if downloads is not None:
        stored = _folder_bytes(downloads.repo_folder(repo_id))
        if stored > downloads.max_model_bytes:  # more than the listing said: removed, refused
            downloads.remove(repo_id)
            downloads.admit(repo_id, stored)
        downloads.touch(repo_id)
    return folder


def load_model(name_or_path: str, policy: ModelPolicy | None = None):
    """An hf_attn classifier + tokenizer (eval mode) from a local folder or a Hub id.

    With a ``policy`` (the app), a name it does not allow raises :class:`ModelNotAllowed` before
    anything is read; ``policy=None`` means the caller (a script, the operator) trusts the name. In
    both cases no code from the model is ever run: ``config.json`` must say ``model_type ==
    "hf_attn"`` before anything else is loaded, and loading goes through
    :func:`hf_attn.models.loading.load_model_folder` (our concrete classes, safetensors only, so ``auto_map``
    and bundled Python files are ignored, as with ``trust_remote_code=False``). Hub ids
    (:func:`names_hub_repo`: spelled like one, and no such folder here) are downloaded from the Hub,
    anything else is a local folder."""
    if policy is None:
        name = (name_or_path or "").strip() if isinstance(name_or_path, str) else ""
        if not name:
            raise ExplainError("Please give a model: a local folder or a Hub id (USER/NAME).")
        hub = names_hub_repo(name)
    else:
        name, hub = policy.resolve(name_or_path)
    if hub and policy is not None and policy.is_visitor_model(name):  # bounded in bytes, removed when least used
        folder = _download_hub_model(name, VisitorDownloads.of(policy))
    else:
        folder = _download_hub_model(name) if hub else os.path.expanduser(name)
    _check_model_type(folder, name)
    try:
        if model_type_of(folder) != SINGLE_MODEL_TYPE:  # BERT-family: transformers' own classes, no remote code
            from hf_attn.adapters.transformer_attention import load_transformer_classifier

            # transformers' own class for the config's model_type; an auto_map (remote code) is never followed
            weights = os.path.join(folder, "model.safetensors")
            if os.path.isfile(weights):
                check_finite_weights(weights)
            model, tokenizer = load_transformer_classifier(folder, trust_remote_code=False)
            from hf_attn.adapters.contract import check_model_contract

            check_model_contract(model)  # regression / multi-label heads: refused with the reason
            return model.eval(), tokenizer
        model, tokenizer = load_model_folder(folder, expected_type=SINGLE_MODEL_TYPE)
    except (ValueError, OSError) as err:  # not a complete model, pickled weights, corrupt weights, a refused head
        message = " ".join(str(err).replace(folder, name).split())
        LOGGER.warning("cannot load model %r: %s: %s", name, type(err).__name__, message)  # one line
        raise ExplainError(f"Cannot load model {name!r}: {message}") from None
    return model, tokenizer


class ModelCache:
    """The models a running explorer holds: at most ``policy.cache_size``, the least recently used
    dropped first, so visitors cannot fill the memory by opening model after model. Every name is
    checked against the policy before the cache or the disk is looked at; a visitor's model used
    again counts as a use of its copy on disk (:meth:`VisitorDownloads.touch`). Thread-safe (loads
    are serialised)."""

    def __init__(self, policy: ModelPolicy, loader: Callable[[str, ModelPolicy], tuple] | None = None):
        self.policy = policy
        self._loader = loader or load_model
        self._models: OrderedDict[str, tuple] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str) -> tuple:
        """``(model, tokenizer)`` of ``name`` (loaded if needed); :class:`ExplainError` if it is not
        allowed or cannot be loaded."""
        name, _ = self.policy.resolve(name)
        with self._lock:
            if name in self._models:
                self._models.move_to_end(name)
                if self.policy.allow_any_hub_id and self.policy.is_visitor_model(name):
                    VisitorDownloads.of(self.policy).touch(name)  # its copy on disk is in use
                return self._models[name]
            loaded = self._loader(name, self.policy)
            self._models[name] = loaded
            while len(self._models) > self.policy.cache_size:
                self._models.popitem(last=False)
            return loaded

    def loaded(self, name: str) -> tuple | None:
        """``(model, tokenizer)`` of ``name`` when the cache already holds it, else None: never loads,
        never downloads, and None for a name the policy refuses."""
        try:
            name, _ = self.policy.resolve(name)
        except ExplainError:
            return None
        with self._lock:
            return self._models.get(name)

    def names(self) -> list[str]:
        """The cached names, least recently used first."""
        with self._lock:
            return list(self._models)


def _search_roots() -> list[Path]:
    roots = [Path(p) for p in os.environ.get("HF_ATTN_MODEL_DIRS", "").split(os.pathsep) if p]
    repo = Path(__file__).resolve().parents[2]  # the checkout holding hf_attn/
    roots += [Path.cwd() / "runs", Path.cwd().parent / "runs", repo / "runs", repo.parent / "runs",
              quick_model_dir().parent]
    unique: dict[Path, None] = {}
    for root in roots:
        if root.is_dir():
            unique.setdefault(root.resolve(), None)
    return list(unique)


def find_local_model() -> str | None:
    """A trained SST model on this machine: folders up to two levels below the search roots
    (``HF_ATTN_MODEL_DIRS``, ``./runs``, ``../runs``, the checkout's sibling ``runs/``, the quick-model
    cache) with an hf_attn config and an SST run.json; BiLSTM + additive base models first, then by
    test accuracy."""
    best, best_key = None, None
    for root in _search_roots():
        for config_path in [*root.glob("*/config.json"), *root.glob("*/*/config.json")]:
            folder = config_path.parent
            try:
                config = json.loads(config_path.read_text())
                run = json.loads((folder / "run.json").read_text())
                metrics = json.loads((folder / "metrics.json").read_text())
            except (OSError, ValueError):
                continue
            if config.get("model_type") != "hf_attn" or run.get("task") != "sst":
                continue
            if not (folder / "model.safetensors").is_file():
                continue
            preferred = (config.get("encoder") == "lstm" and config.get("attention") == "additive"
                         and config.get("variant") == "base")
            key = (preferred, float(metrics.get("test_accuracy") or 0.0))
            if best_key is None or key > best_key:
                best, best_key = str(folder), key
    return best


def quick_model_dir() -> Path:
    cache = Path(os.environ.get("HF_ATTN_CACHE", Path.home() / ".cache" / "hf_attn"))
    return cache / "space-models" / "sst-lstm-additive-quick"


def train_quick_model(epochs: int = 3) -> str:
    """Train a small SST BiLSTM + additive model (GloVe-50d, ``epochs`` epochs, ~15 s on 2 CPU cores)
    into the cache, for an app started where no trained model exists. Resumable/finished runs are
    reused by :func:`hf_attn.training.engine.train`."""
    from hf_attn.training.engine import TrainSettings, train

    out = quick_model_dir()
    train(TrainSettings(dataset="sst", encoder="lstm", attention="additive", epochs=epochs, seed=0), str(out),
          progress=False)
    return str(out)


def default_model(app_dir: str | os.PathLike | None = None, train_if_missing: bool = True) -> str | None:
    """The model the app opens first: the first of :func:`configured_models` (``HF_ATTN_MODEL``,
    ``HF_ATTN_MODELS``, ``space_config.json`` next to the app, written by ``hf-attn push-space
    --model``), else a local SST model (:func:`find_local_model`), else a quickly trained one."""
    configured = configured_models(app_dir)
    if configured:
        return configured[0]
    found = find_local_model()
    if found or not train_if_missing:
        return found
    return train_quick_model()

__all__ = ["ExplainError", "ModelNotAllowed", "NOT_ALLOWED_MESSAGE", "HUB_FILES", "is_hub_id", "names_hub_repo", "ModelPolicy", "model_policy", "configured_models", "load_model", "ModelCache", "VisitorDownloads", "find_local_model", "default_model", "train_quick_model", "quick_model_dir"]
