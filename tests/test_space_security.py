"""The explorer Space against hostile visitors.

1. A typed model name never runs code: a folder (or Hub repo) with ``auto_map`` and a Python module
   that writes a marker file when imported is refused, through the app and through
   ``hf_attn.app.space.load_model``, with the operator's free-Hub-id flag on or off; names off the
   allow-list all get one message, so the app does not reveal which server paths exist; a Hub id a
   visitor types is loaded from the Hub even when a folder of that name exists (the operator's names
   are folders when such a folder exists); the model cache is bounded.
2. Numeric settings are bounded on the server, and unexpected errors reach the visitor as a clear
   message (the server logs one line with the exception).

The apps run for real (``spaces_app/app.py`` in a subprocess, see tests/test_app.py); the Hub is the
loopback server of tests/hub_server.py.
"""

import importlib.util
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import needs_space
from hub_server import HubServer, StoredFile
from test_app import REPO_ROOT, SENTENCE, default_app_env, free_port, running_app

from hf_attn.app.space import (NOT_ALLOWED_MESSAGE, ExplainError, ModelCache, ModelNotAllowed, ModelPolicy,
                               check_settings, explain_sentence, load_model, model_policy)

EVIL_MODULE = """import pathlib
pathlib.Path({marker!r}).write_text("remote code ran")  # what an attacker's module does on import


class EvilConfig:
    pass


class EvilModel:
    pass
"""


def make_attack_folder(folder: Path, marker: Path, model_type: str = "hf_attn", base: str | None = None) -> Path:
    """A model folder whose ``auto_map`` points at ``evil_code.py``, which writes ``marker`` when
    imported (what ``trust_remote_code=True`` would do). ``base``: a real model folder to copy first."""
    if base:
        shutil.copytree(base, folder)
        config = json.loads((folder / "config.json").read_text())
    else:
        folder.mkdir(parents=True)
        config = {"vocab_size": 10}
    config.update(model_type=model_type, architectures=["EvilModel"],
                  auto_map={"AutoConfig": "evil_code.EvilConfig",
                            "AutoModelForSequenceClassification": "evil_code.EvilModel"})
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": ["evil_code.EvilModel",
                                                                                          None]}}))
    (folder / "evil_code.py").write_text(EVIL_MODULE.format(marker=str(marker)))
    return folder


@pytest.fixture(scope="module")
def attack(tmp_path_factory):
    """Two attack folders (model_type "hf_attn" and "evil") and the marker their code would write."""
    root = tmp_path_factory.mktemp("attack")
    marker = root / "MARKER-remote-code-ran"
    return {"marker": marker,
            "hf_attn": str(make_attack_folder(root / "typed-hf_attn", marker)),
            "evil": str(make_attack_folder(root / "typed-evil", marker, model_type="evil"))}


def test_attack_folder_is_live(tmp_path):
    """The fixture is a real attack: transformers with trust_remote_code=True runs its code."""
    marker = tmp_path / "marker"
    folder = make_attack_folder(tmp_path / "attack", marker)
    script = ("from transformers import AutoConfig\n"
              f"AutoConfig.from_pretrained({str(folder)!r}, trust_remote_code=True)\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, timeout=300)
    assert marker.is_file()


# ------------------------------------------------------------------------- load_model, in process
def test_load_model_refuses_names_off_the_allow_list(attack, trained_model_dir, tmp_path):
    existing_not_listed = [attack["hf_attn"], attack["evil"], trained_model_dir, str(tmp_path), "/etc"]
    missing = [str(tmp_path / "no-such-model"), "/nonexistent/model", "../../../etc/passwd", "./runs/x", "~/x"]
    for policy in (ModelPolicy(("tester/lstm-sst",)), ModelPolicy((), allow_any_hub_id=True)):
        for name in existing_not_listed + missing:
            with pytest.raises(ModelNotAllowed) as refused:
                load_model(name, policy)
            assert str(refused.value) == NOT_ALLOWED_MESSAGE, name
    assert not attack["marker"].exists()


def test_allowed_or_trusted_folders_never_run_their_code(attack):
    """Even a folder the operator lists (or passes to load_model without a policy) is loaded only
    through hf_attn's classes: the model type is refused from config.json alone, and an
    "hf_attn"-typed folder's auto_map is ignored."""
    policy = ModelPolicy((attack["hf_attn"], attack["evil"]))
    for given in (policy, None):
        with pytest.raises(ExplainError, match="is a 'evil' model; the explorer needs a single-sentence hf_attn"):
            load_model(attack["evil"], given)
        with pytest.raises(ExplainError, match="no model weights"):
            load_model(attack["hf_attn"], given)
    assert not attack["marker"].exists()


def test_a_visitors_hub_id_is_never_a_local_folder(attack, monkeypatch, tmp_path):
    """"tester/decoy" exists as a folder in the working directory, but a Hub id a visitor types (the
    free-Hub-id flag) is fetched from the Hub (offline here: a clear "cannot download", nothing read
    from the folder). The same name on the operator's list is that folder, loaded only through
    hf_attn's classes (its auto_map ignored: the attack's code never runs)."""
    make_attack_folder(tmp_path / "tester" / "decoy", attack["marker"])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ExplainError, match="Cannot download 'tester/decoy' from the Hugging Face Hub"):
        load_model("tester/decoy", ModelPolicy((), allow_any_hub_id=True))
    for given in (ModelPolicy(("tester/decoy",)), None):
        with pytest.raises(ExplainError, match="Cannot load model 'tester/decoy': .*no model weights"):
            load_model("tester/decoy", given)
    assert not attack["marker"].exists()


# ------------------------------------------------------------------------- bounds and cache
@pytest.mark.parametrize("setting, value, message", [
    ("steps", 10**7, "steps must be from 0 to 2000 (got 10000000)."),
    ("steps", -1, "steps must be from 0 to 2000"),
    ("steps", 2.5, "steps must be a whole number"),
    ("steps", None, "steps is missing"),
    ("steps", "500", "steps must be a whole number from 0 to 2000 (got a str)"),
    ("k", 21, "k must be from 1 to 20"),
    ("k", 0, "k must be from 1 to 20"),
    ("num_permutations", 1001, "num_permutations must be from 1 to 1000"),
    ("eps", -0.1, "eps must be from 0 to 1"),
    ("eps", 1.5, "eps must be from 0 to 1"),
    ("eps", math.nan, "eps must be a finite number"),
    ("eps", math.inf, "eps must be a finite number"),
    ("lam", math.inf, "lam must be a finite number"),
    ("lr", 0.0, "lr must be from 1e-06 to 10"),
    ("seed", -1, "seed must be from 0 to"),
    ("seed", 2**40, "seed must be from 0 to"),
    ("max_tokens", 10**6, "max_tokens must be from 1 to 512"),
])
def test_settings_are_bounded(setting, value, message):
    with pytest.raises(ExplainError) as refused:
        check_settings(**{setting: value})
    assert message in str(refused.value)


def test_explain_sentence_enforces_the_bounds(trained_model_dir):
    """explain_sentence itself refuses, at once, what would run for hours."""
    from transformers import PreTrainedTokenizerFast

    from hf_attn import AttnClassifierForSequenceClassification

    model = AttnClassifierForSequenceClassification.from_pretrained(trained_model_dir).eval()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(trained_model_dir)
    start = time.perf_counter()
    for settings in ({"steps": 10**7}, {"k": 10**4}, {"num_permutations": 10**8}, {"eps": math.nan}):
        with pytest.raises(ExplainError, match=next(iter(settings))):
            explain_sentence(model, tokenizer, SENTENCE, **settings)
    with pytest.raises(ExplainError, match="too long: 1000000 characters, the limit is 20000"):
        explain_sentence(model, tokenizer, "a" * 10**6)
    assert time.perf_counter() - start < 2


def test_model_cache_is_bounded():
    loads = []

    def loader(name, policy):
        loads.append(name)
        return (f"model {name}", f"tokenizer {name}")

    cache = ModelCache(ModelPolicy(("a/1", "a/2", "a/3"), cache_size=2), loader)
    assert cache.get("a/1") == ("model a/1", "tokenizer a/1")
    cache.get("a/2")
    cache.get("a/1")  # a/1 is now the most recently used ...
    cache.get("a/3")  # ... so a/2 is dropped
    assert cache.names() == ["a/1", "a/3"] and loads == ["a/1", "a/2", "a/3"]
    cache.get("a/2")
    assert cache.names() == ["a/3", "a/2"] and loads[-1] == "a/2"
    with pytest.raises(ModelNotAllowed):
        cache.get("/etc")  # refused before the loader is asked
    assert len(loads) == 4


def test_model_policy_from_config_and_environment(tmp_path, monkeypatch):
    for name in ("HF_ATTN_MODEL", "HF_ATTN_MODELS", "HF_ATTN_ALLOW_ANY_MODEL", "HF_ATTN_MODEL_CACHE_SIZE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "space_config.json").write_text(json.dumps({"default_model": "user/default",
                                                            "models": ["user/a", "user/default"]}))
    assert model_policy(tmp_path) == ModelPolicy(("user/default", "user/a"), False, 4)
    monkeypatch.setenv("HF_ATTN_MODEL", "user/env")
    monkeypatch.setenv("HF_ATTN_MODELS", f"user/b,user/c{os.pathsep}/srv/models/d")
    monkeypatch.setenv("HF_ATTN_ALLOW_ANY_MODEL", "1")
    monkeypatch.setenv("HF_ATTN_MODEL_CACHE_SIZE", "2")
    policy = model_policy(tmp_path, extra=["/srv/found"])
    assert policy.models == ("user/env", "user/b", "user/c", "/srv/models/d", "user/default", "user/a",
                             "/srv/found")
    assert policy.allow_any_hub_id and policy.cache_size == 2
    assert policy.resolve("someone/else") == ("someone/else", True)  # free Hub ids with the flag ...
    assert policy.resolve("/srv/models/d") == ("/srv/models/d", False)
    with pytest.raises(ModelNotAllowed):
        policy.resolve("/srv/models/other")  # ... but never unlisted paths
    monkeypatch.setenv("HF_ATTN_MODEL_CACHE_SIZE", "0")
    with pytest.raises(ValueError, match="HF_ATTN_MODEL_CACHE_SIZE"):
        model_policy(tmp_path)


# ------------------------------------------------------------------------- the app, default policy
@pytest.fixture(scope="module")
def client(trained_model_dir, tmp_path_factory):
    """A gradio_client on the app started as in tests/test_app.py (only the trained model allowed)."""
    from gradio_client import Client

    with running_app(default_app_env(trained_model_dir), tmp_path_factory.mktemp("app") / "app.log") as url:
        yield Client(url, verbose=False)


@needs_space
def test_app_never_runs_code_of_a_typed_model(client, attack):
    from gradio_client.exceptions import AppError

    for folder in (attack["hf_attn"], attack["evil"]):
        for args, api_name in (((folder, SENTENCE, 0.01, 500, 0), "/explain"), ((folder,), "/load_model")):
            with pytest.raises(AppError) as refused:
                client.predict(*args, api_name=api_name)
            assert not attack["marker"].exists(), f"{folder}: its code ran inside the server"
            assert str(refused.value) == NOT_ALLOWED_MESSAGE


@needs_space
def test_app_does_not_reveal_which_paths_exist(client, attack, trained_model_dir, tmp_path):
    from gradio_client.exceptions import AppError

    names = {"existing hf_attn model, not listed": str(Path(trained_model_dir).parent),
             "existing attack folder": attack["hf_attn"], "existing system folder": "/etc",
             "existing file": "/etc/passwd", "nonexistent folder": str(tmp_path / "no-such-model"),
             "relative nonexistent": "../no/such/model"}
    messages = {}
    for what, name in names.items():
        with pytest.raises(AppError) as refused:
            client.predict(name, SENTENCE, 0.01, 500, 0, api_name="/explain")
        messages[what] = str(refused.value)
    assert set(messages.values()) == {NOT_ALLOWED_MESSAGE}, messages


@needs_space
def test_app_bounds_settings_on_the_server(client, trained_model_dir):
    """steps=10**7 is refused at once (unbounded, it would keep the worker busy for hours)."""
    from gradio_client.exceptions import AppError

    start = time.perf_counter()
    job = client.submit(trained_model_dir, SENTENCE, 0.01, 10**7, 0, api_name="/explain")
    with pytest.raises(AppError, match=r"steps must be from 0 to 2000 \(got 10000000\)"):
        job.result(timeout=60)
    with pytest.raises(AppError, match=r"seed must be from 0 to 2147483647 \(got -5\)"):
        client.predict(trained_model_dir, SENTENCE, 0.01, 500, -5, api_name="/explain")
    assert time.perf_counter() - start < 30


# ------------------------------------------------------------------------- unexpected errors
def load_app_module():
    """spaces_app/app.py imported (not run) in this process."""
    spec = importlib.util.spec_from_file_location("hf_attn_space_app", REPO_ROOT / "spaces_app" / "app.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@needs_space
def test_unexpected_error_reaches_the_visitor_clearly(caplog):
    """An error nobody foresaw (here: the model loader crashes) gives the visitor a clear message
    through the real Gradio transport, not Gradio's bare "upstream exception"; the exception, which
    may name server paths, is logged on the server only, as one line."""
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    app = load_app_module()

    def crashing_loader(name, policy):
        raise RuntimeError("boom in /srv/secret/location")

    policy = ModelPolicy(("tester/lstm-sst",))
    demo = app.build_demo(policy, cache=ModelCache(policy, crashing_loader))
    app.launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        app_client = Client(demo.local_url, verbose=False)
        with caplog.at_level(logging.ERROR, logger="hf_attn.app"):
            for args, api_name in ((("tester/lstm-sst", SENTENCE, 0.01, 500, 0), "/explain"),
                                   (("tester/lstm-sst",), "/load_model")):
                with pytest.raises(AppError) as failed:
                    app_client.predict(*args, api_name=api_name)
                assert str(failed.value) == app.UNEXPECTED_MESSAGE
    finally:
        demo.close()
    assert "/srv/secret" not in app.UNEXPECTED_MESSAGE
    logged = [r for r in caplog.records if r.name == "hf_attn.app"]
    assert len(logged) == 2  # one line per error, with what the operator needs, no traceback
    assert all("RuntimeError: boom in /srv/secret/location" in r.getMessage() and r.exc_info is None
               for r in logged)


# ------------------------------------------------------------------------- the app, free Hub ids
def hub_files(folder) -> dict[str, StoredFile]:
    return {str(p.relative_to(folder)): StoredFile(p.read_bytes()) for p in Path(folder).rglob("*") if p.is_file()}


def add_hub_repo(hub: HubServer, repo_id: str, folder) -> None:
    repo = hub.state.create_repo("model", repo_id, private=False, sdk=None)
    hub.state.commit(repo, "upload", {**repo.resolve("main").files, **hub_files(folder)})


@pytest.fixture(scope="module")
def hub_app(trained_model_dir, attack, tmp_path_factory):
    """The app with ``HF_ATTN_ALLOW_ANY_MODEL=1`` against a loopback Hub holding the trained model
    (tester/lstm-sst) and two attack repos; in its working directory a decoy folder
    ``tester/lstm-sst`` (the trained model relabelled DECOY, with auto_map); its allow-list is the
    trained model's folder and a corrupt model folder (visitors type the Hub ids)."""
    root = tmp_path_factory.mktemp("hub-app")
    hub = HubServer().start()
    add_hub_repo(hub, "tester/lstm-sst", trained_model_dir)
    add_hub_repo(hub, "tester/evil-type", attack["evil"])
    add_hub_repo(hub, "tester/evil-hf-attn", attack["hf_attn"])
    workdir = root / "cwd"
    decoy = make_attack_folder(workdir / "tester" / "lstm-sst", attack["marker"], base=trained_model_dir)
    config = json.loads((decoy / "config.json").read_text())
    config.update(id2label={"0": "DECOY-0", "1": "DECOY-1"}, label2id={"DECOY-0": 0, "DECOY-1": 1})
    (decoy / "config.json").write_text(json.dumps(config))
    corrupt = root / "corrupt-model"
    shutil.copytree(trained_model_dir, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"\x10\0\0\0\0\0\0\0{not json" + b"\0" * 64)
    hf_home = root / "hf_home"
    env = {"HF_ATTN_MODEL": "", "HF_ATTN_MODELS": os.pathsep.join([str(trained_model_dir), str(corrupt)]),
           "HF_ATTN_ALLOW_ANY_MODEL": "1", "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.endpoint,
           "HF_HOME": str(hf_home), "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    log = root / "app.log"
    try:
        with running_app(env, log, cwd=workdir) as url:
            from gradio_client import Client

            yield {"client": Client(url, verbose=False), "hub": hub, "hf_home": hf_home, "log": log,
                   "corrupt": str(corrupt)}
    finally:
        hub.stop()


@needs_space
def test_free_hub_ids_never_run_code(hub_app, attack):
    from gradio_client.exceptions import AppError

    hub_client = hub_app["client"]
    with pytest.raises(AppError, match="'tester/evil-type' is a 'evil' model; the explorer needs"):
        hub_client.predict("tester/evil-type", api_name="/load_model")
    with pytest.raises(AppError, match="Cannot load model 'tester/evil-hf-attn': .*no model weights"):
        hub_client.predict("tester/evil-hf-attn", api_name="/load_model")
    for folder in (attack["hf_attn"], attack["evil"], "/etc"):  # the flag opens Hub ids, not server paths
        with pytest.raises(AppError) as refused:
            hub_client.predict(folder, SENTENCE, 0.01, 500, 0, api_name="/explain")
        assert str(refused.value) == NOT_ALLOWED_MESSAGE
    assert not attack["marker"].exists()
    assert not list(hub_app["hf_home"].rglob("*.py"))  # the attack code was never even downloaded
    fetched = {path for method, path, status in hub_app["hub"].state.requests}
    assert not any(path.endswith("evil_code.py") for path in fetched)


@needs_space
def test_hub_id_is_loaded_from_the_hub(hub_app, attack):
    hub_client = hub_app["client"]
    status = hub_client.predict("tester/lstm-sst", api_name="/load_model")
    assert "labels: negative, positive" in status and "DECOY" not in status
    label, *_ = hub_client.predict("tester/lstm-sst", SENTENCE, 0.01, 50, 0, api_name="/explain")
    assert label["label"] in ("negative", "positive")
    fetched = {path for method, path, status in hub_app["hub"].state.requests}
    assert any(path.startswith("/tester/lstm-sst/resolve/") and path.endswith("/model.safetensors")
               for path in fetched)
    assert not attack["marker"].exists()


@needs_space
def test_broken_allowed_model_gives_a_clear_message(hub_app):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="Cannot load model .*corrupt-model.*corrupt or truncated"):
        hub_app["client"].predict(hub_app["corrupt"], api_name="/load_model")
