"""The explorer Space's limits on what a visitor sends (hf_attn/app/space.py), without a browser:

- the sentence length counts the model's own special tokens, from its tokenizer (two for BERT,
  one for Llama's <s>, none for GPT-2): a sentence at the limit is explained whole, one over it is
  refused with its true count, and nothing is ever cut;
- an explanation that would outrun its time budget is refused in one line;
- a visitor's Hub model (``HF_ATTN_ALLOW_ANY_MODEL=1``) is refused before download when its files
  exceed the byte limit, and visitors' downloads stay within a disk budget, the least recently used
  removed first, the operator's models never (against the loopback Hub of tests/hub_server.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from architectures import tiny_classifier
from hf_attn.adapters.contract import TruncationWarning
from hf_attn.app.space import (NOTHING_TO_EXPLAIN, ExplainError, ModelPolicy, VisitorDownloads, _adapter_of,
                               compare_methods, explain_sentence, model_max_tokens, model_policy, special_token_count)

REPO_ROOT = Path(__file__).resolve().parents[1]
QUICK = dict(steps=2, num_permutations=2, k=2)


# ------------------------------------------------------------------------------ sentence length
@pytest.mark.parametrize("name, specials, limit", [
    ("bert", 2, 38),    # [CLS] … [SEP], 40 positions
    ("gpt2", 0, 64),    # no special tokens, 64 positions
    ("llama", 1, 63),   # <s> …, 64 positions
])
def test_the_limit_counts_the_models_own_special_tokens(name, specials, limit):
    """At the limit the whole sentence is explained (every word, no TruncationWarning: the adapter cut
    nothing); one and two tokens over are refused with the true count of the visitor's tokens. The
    first word is "bad", so a cut that kept the end would silently lose it."""
    model, tokenizer = tiny_classifier(name)
    assert special_token_count(tokenizer) == specials
    assert model_max_tokens(model, tokenizer) == limit
    assert _adapter_of(model, tokenizer).max_length == limit + specials  # what the adapter would cut at
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        text = "bad " + "film " * (limit - 1)
        explanation = explain_sentence(model, tokenizer, text, **QUICK)
        assert explanation.tokens == ["bad"] + ["film"] * (limit - 1)
        assert explanation.max_tokens == limit
        assert compare_methods(model, tokenizer, text).tokens[0][0] == "bad"
    for over in (1, 2):
        text = "bad " + "film " * (limit - 1 + over)
        for view in (lambda: explain_sentence(model, tokenizer, text, **QUICK),
                     lambda: compare_methods(model, tokenizer, text)):
            with pytest.raises(ExplainError, match=rf"^The sentence is too long: {limit + over} word pieces, "
                                                   rf"the limit is {limit}\. Please shorten it\.$"):
                view()


def test_a_visitors_max_tokens_and_nothing_to_explain():
    model, tokenizer = tiny_classifier("gpt2")
    with pytest.raises(ExplainError, match="too long: 6 word pieces, the limit is 5"):
        explain_sentence(model, tokenizer, "good " * 6, max_tokens=5, **QUICK)
    assert explain_sentence(model, tokenizer, "good " * 5, max_tokens=5, **QUICK).max_tokens == 5
    for text in ("\u200b", "\u200b\ufeff\u2060", "\u00ad\u200e"):
        with pytest.raises(ExplainError, match=f"^{NOTHING_TO_EXPLAIN.replace('(', '[(]').replace(')', '[)]')}$"):
            explain_sentence(model, tokenizer, text, **QUICK)
        with pytest.raises(ExplainError, match="^Nothing to explain"):
            compare_methods(model, tokenizer, text)


def test_an_explanation_over_its_budget_is_refused_in_one_line():
    """The main view is one whole: when its computations outrun the budget it is refused with one
    line naming the budget and the sentence's length, never shown in part."""
    model, tokenizer = tiny_classifier("bert")
    began = time.perf_counter()
    with pytest.raises(ExplainError, match=r"^This explanation would take longer than the 1e-06 s this explorer gives "
                                           r"one request \(3 word pieces on this model\): please shorten the sentence"):
        explain_sentence(model, tokenizer, "a good film", steps=2000, seconds=1e-6)
    assert time.perf_counter() - began < 10
    assert explain_sentence(model, tokenizer, "a good film", **QUICK).tokens == ["a", "good", "film"]


# ------------------------------------------------------------------------------ visitors' downloads
def _stored(folder: Path, name: str, size: int, used: float) -> Path:
    repo = folder / f"models--tester--{name}"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "weights").write_bytes(b"\0" * size)
    (repo / VisitorDownloads.MARKER).touch()
    os.utime(repo / VisitorDownloads.MARKER, (used, used))
    return repo


def test_visitor_downloads_are_bounded_and_least_recently_used_go_first(tmp_path):
    store = VisitorDownloads(tmp_path / "visitors", max_model_bytes=1000, disk_bytes=2000)
    now = time.time()
    old = _stored(store.folder, "old", 900, now - 300)
    mid = _stored(store.folder, "mid", 900, now - 200)
    new = _stored(store.folder, "new", 600, now - 100)
    assert store.total_bytes() == 2400
    with pytest.raises(ExplainError, match=r"^'tester/huge' is too large for this explorer: its model files take "
                                           r"1\.5 kB, the limit is 1 kB\.$"):
        store.admit("tester/huge", 1500)
    store.admit("tester/fits", 1000)
    assert store.make_room("tester/fits", 1000) == [old, mid]  # 2400 + 1000 > 2000: until 600 + 1000 fit
    assert not old.exists() and not mid.exists() and new.exists()
    store.touch("tester/new")
    assert store.make_room("tester/new", 600) == []  # its own copy is never removed to make room for itself


HUB_SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from hf_attn.app.space import ExplainError, ModelCache, VisitorDownloads, model_policy

    policy = model_policy()
    cache = ModelCache(policy)
    store = VisitorDownloads.of(policy)
    log = {"policy": [policy.max_model_bytes, policy.visitor_disk_bytes, str(store.folder)], "steps": []}

    def stored():
        return sorted(p.name for p in store.folder.glob("models--*")) if store.folder.is_dir() else []

    for name in sys.argv[1:]:
        try:
            model, _ = cache.get(name)
            outcome = "loaded " + model.config.model_type
        except ExplainError as err:
            outcome = "refused: " + str(err)
        log["steps"].append([name, outcome, stored(), store.total_bytes()])
    print(json.dumps(log))
""")


def test_visitors_hub_models_are_bounded_in_bytes_and_evicted(hub, tmp_path):
    """Against the loopback Hub, through the Space's ModelCache with ``HF_ATTN_ALLOW_ANY_MODEL=1``:
    a repo whose listed files exceed ``HF_ATTN_MAX_MODEL_BYTES`` is refused before any of them is
    downloaded; visitors' models stay within ``HF_ATTN_VISITOR_DISK_BYTES`` in their own folder, the
    least recently used removed first (a copy left by an earlier run included; a model used again
    from memory counts as used), while the operator's Hub model, in the Hugging Face cache, stays."""
    from hub_server import StoredFile

    from architectures import saved_classifier

    folder, _ = saved_classifier("bert", tmp_path / "model")
    files = {p.name: StoredFile(p.read_bytes()) for p in folder.iterdir() if p.is_file()}
    size = sum(len(f.content) for name, f in files.items() if name in ("config.json", "model.safetensors",
                                                                       "tokenizer.json", "tokenizer_config.json",
                                                                       "special_tokens_map.json"))
    for repo_id in ("tester/operator", "tester/a", "tester/b", "tester/c"):
        repo = hub.state.create_repo("model", repo_id, private=False, sdk=None)
        hub.state.commit(repo, "upload", {**repo.resolve("main").files, **files})
    huge = hub.state.create_repo("model", "tester/huge", private=False, sdk=None)
    hub.state.commit(huge, "upload", {**huge.resolve("main").files, "config.json": files["config.json"],
                                      "model.safetensors": StoredFile(b"\0" * (3 * size))})
    visitors = tmp_path / "visitors"
    leftover = _stored(visitors, "leftover", size, time.time() - 3600)  # from an earlier run
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HUB_DISABLE_XET="1", HF_HOME=str(tmp_path / "hf_home"),
               HF_HUB_OFFLINE="0", HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1",
               HF_ATTN_MODELS="tester/operator", HF_ATTN_ALLOW_ANY_MODEL="1",
               HF_ATTN_MAX_MODEL_BYTES=str(2 * size), HF_ATTN_VISITOR_DISK_BYTES=str(int(2.5 * size)),
               HF_ATTN_VISITOR_MODELS_DIR=str(visitors), PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    names = ["tester/operator", "tester/huge", "tester/a", "tester/b", "tester/a", "tester/c"]
    done = subprocess.run([sys.executable, "-c", HUB_SCRIPT, *names], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    log = json.loads(done.stdout.strip().splitlines()[-1])
    assert log["policy"] == [2 * size, int(2.5 * size), str(visitors)]
    steps = {i: step for i, step in enumerate(log["steps"])}
    assert steps[0][1] == "loaded bert" and steps[0][2] == [leftover.name]  # the operator's: not a visitor's
    assert steps[1][1].startswith("refused: 'tester/huge' is too large for this explorer: its model files take ")
    assert steps[1][2] == [leftover.name]  # nothing of it was stored ...
    fetched = [path for method, path, status in hub.state.requests if "tester/huge" in path]
    assert not any("/resolve/" in path for path in fetched), fetched  # ... nor downloaded
    assert steps[2][1] == "loaded bert" and steps[2][2] == sorted([leftover.name, "models--tester--a"])
    assert steps[3][2] == ["models--tester--a", "models--tester--b"]  # the leftover went first
    assert steps[4][2] == ["models--tester--a", "models--tester--b"]  # a, used again from memory
    assert steps[5][2] == ["models--tester--a", "models--tester--c"]  # b, the least recently used, went
    assert all(total <= 2.5 * size for *_, total in log["steps"])
    operator = tmp_path / "hf_home" / "hub" / "models--tester--operator"
    assert (operator / "snapshots").is_dir() and list(operator.rglob("model.safetensors"))


def test_download_limits_from_the_environment(monkeypatch, tmp_path):
    for name in ("HF_ATTN_MAX_MODEL_BYTES", "HF_ATTN_VISITOR_DISK_BYTES", "HF_ATTN_VISITOR_MODELS_DIR"):
        monkeypatch.delenv(name, raising=False)
    policy = model_policy(tmp_path)
    assert (policy.max_model_bytes, policy.visitor_disk_bytes, policy.visitor_dir) == (2 * 10**9, 8 * 10**9, None)
    monkeypatch.setenv("HF_ATTN_MAX_MODEL_BYTES", "500_000_000")
    monkeypatch.setenv("HF_ATTN_VISITOR_MODELS_DIR", str(tmp_path / "v"))
    policy = model_policy(tmp_path)
    assert policy.max_model_bytes == 500_000_000 and VisitorDownloads.of(policy).folder == tmp_path / "v"
    monkeypatch.setenv("HF_ATTN_VISITOR_DISK_BYTES", "100")
    with pytest.raises(ValueError, match="HF_ATTN_VISITOR_DISK_BYTES .* must be at least HF_ATTN_MAX_MODEL_BYTES"):
        model_policy(tmp_path)
    monkeypatch.setenv("HF_ATTN_MAX_MODEL_BYTES", "lots")
    with pytest.raises(ValueError, match="HF_ATTN_MAX_MODEL_BYTES must be a whole number"):
        model_policy(tmp_path)
    assert ModelPolicy(("a/b",)).is_visitor_model("c/d") and not ModelPolicy(("a/b",)).is_visitor_model("a/b")
