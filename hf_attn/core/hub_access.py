"""Whether a Hub model id can be loaded here, answered in about a second.

Without the network, ``from_pretrained("org/x")`` retries every request (five times, with back-off,
each retry logged) and ends after half a minute in a generic message. :func:`hub_model_location` asks
first, with one HTTP request to the Hub endpoint (``HF_ENDPOINT``; through the environment's proxy)
bounded by :data:`PROBE_SECONDS`:

- the endpoint answers: the id is returned unchanged and loads as usual (download or cache);
- it does not, or ``HF_HUB_OFFLINE=1``: a model in the local Hub cache loads from there (the
  snapshot folder is returned; offline, the id itself, which transformers reads from the cache); a
  model that is not cached is a one-line :class:`HubUnreachable` naming what would work instead:
  a local model folder, an offline alias, or downloading it once with the network and then
  ``HF_HUB_OFFLINE=1``.

A name that is a local folder is returned as it is: nothing is asked.
"""

from __future__ import annotations

import os
import re
import threading

PROBE_SECONDS = 1.5  # one HEAD request to the endpoint, name lookup included


class HubUnreachable(OSError):
    """A Hub model id that can be neither downloaded (no network, or ``HF_HUB_OFFLINE=1``) nor read
    from the local Hub cache."""


def _offline() -> bool:
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")


def _endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def unreachable_reason(endpoint: str, seconds: float = PROBE_SECONDS) -> str | None:
    """None when ``endpoint`` answers one HTTP ``HEAD`` request (any status; through the proxy the
    environment names, as the Hub client goes) within ``seconds``, name lookup included (the request
    runs in a thread that is given up on after ``seconds``); else why not (``"connection refused"``,
    ``"no answer in 1.5 s"``, …)."""
    outcome: list[str | None] = []

    def ask():
        import httpx

        try:
            httpx.head(endpoint, timeout=seconds, follow_redirects=False)
            outcome.append(None)
        except Exception as err:  # httpx.HTTPError, OSError, …: unreachable either way
            text = str(err) or type(err).__name__
            outcome.append(re.sub(r"^\[errno -?\d+\]\s*", "", text, flags=re.I))

    thread = threading.Thread(target=ask, name="hf-attn-hub-probe", daemon=True)
    thread.start()
    thread.join(seconds + 0.2)
    if not outcome:
        return f"no answer in {seconds:g} s"
    return None if outcome[0] is None else str(outcome[0]).lower()


def cached_snapshot(repo_id: str) -> str | None:
    """The local Hub cache's folder of ``repo_id`` (its ``main`` snapshot, holding ``config.json``),
    or None when it is not cached."""
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(repo_id, local_files_only=True)
    except Exception:  # not cached, or not a valid id: None either way
        return None
    return folder if os.path.isfile(os.path.join(folder, "config.json")) else None


def _hint(aliases, offline: bool) -> str:
    shown = ", ".join(aliases)
    then = ("unset HF_HUB_OFFLINE and download the model once (it then loads from the Hub cache)" if offline else
            "download the model once with network access (later runs load it from the Hub cache, also with "
            "HF_HUB_OFFLINE=1)")
    return "give a local model folder" + (f", an offline alias ({shown})" if shown else "") + f", or {then}"


def hub_model_location(name: str, aliases=(), seconds: float = PROBE_SECONDS) -> str:
    """``name`` (a Hub model id, or a local folder returned as it is) → what ``from_pretrained``
    loads without waiting for retries: the id itself when the Hub endpoint answers (or, offline,
    when the model is cached), the cache's snapshot folder when the endpoint does not answer but the
    model is cached. Otherwise a one-line :class:`HubUnreachable` with the hint (``aliases``: the
    offline aliases to name, e.g. ``minilm-l6``), within about ``seconds``."""
    if os.path.isdir(name):
        return name
    first = name.split("/")[0]
    local = f" (no local folder {name} either)" if "/" in name and os.path.isdir(first) else ""
    if _offline():
        if cached_snapshot(name) is not None:
            return name
        raise HubUnreachable(f"{name}: HF_HUB_OFFLINE=1 and the model is not in the local Hub cache{local}; "
                             + _hint(aliases, offline=True))
    endpoint = _endpoint()
    reason = unreachable_reason(endpoint, seconds)
    if reason is None:
        return name
    cached = cached_snapshot(name)
    if cached is not None:
        return cached
    raise HubUnreachable(f"{name}: the Hugging Face Hub at {endpoint} cannot be reached ({reason}) and the model "
                         f"is not in the local Hub cache{local}; {_hint(aliases, offline=False)}")


__all__ = ["HubUnreachable", "PROBE_SECONDS", "cached_snapshot", "hub_model_location", "unreachable_reason"]
