"""The explorer app as its operator and its visitors meet it (built in process, not launched; the
launched app is tests/test_app.py): it says which model it serves and why, refuses to start without
a loadable model in one line, shows model names rather than server paths, names its API outputs
and logs errors as one line."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import needs_space
from test_app import REPO_ROOT
from test_space_security import load_app_module

from hf_attn.app.space import ModelCache, ModelPolicy

pytestmark = needs_space  # every test here builds or starts the Gradio page

APP = REPO_ROOT / "spaces_app" / "app.py"
MODEL_ENV = ("HF_ATTN_MODEL", "HF_ATTN_MODELS", "HF_ATTN_ALLOW_ANY_MODEL")


@pytest.fixture(scope="module")
def app():
    return load_app_module()


@pytest.fixture
def no_model_env(monkeypatch):
    for name in MODEL_ENV:
        monkeypatch.delenv(name, raising=False)


def _never_loads(name, policy):
    raise AssertionError("nothing is loaded while the page is built")


def test_visitors_see_model_names_not_server_paths(app):
    policy = ModelPolicy(("tester/lstm-sst", "/srv/models/sst-lstm", "/other/sst-lstm/"))
    assert app.display_names(policy.models) == {"tester/lstm-sst": "tester/lstm-sst",
                                                "local:sst-lstm": "/srv/models/sst-lstm",
                                                "local:sst-lstm (2)": "/other/sst-lstm/"}
    demo = app.build_demo(policy, "/srv/models/sst-lstm", ModelCache(policy, _never_loads), served_because="set by X")
    config = json.dumps(demo.config)
    assert "/srv/models" not in config and "/other/sst-lstm" not in config
    assert "Serving **local:sst-lstm**, set by X; 2 other model(s) to choose from." in config


def test_api_outputs_are_named(app):
    policy = ModelPolicy(("tester/lstm-sst",))
    demo = app.build_demo(policy, cache=ModelCache(policy, _never_loads))
    endpoints = demo.get_api_info()["named_endpoints"]
    assert set(endpoints) == {"/explain", "/load_model", "/compare_methods"}
    labels = [r.get("label") for e in endpoints.values() for r in e["returns"]]
    assert all(labels) and not any(str(label).startswith("value_") for label in labels), labels
    assert [r["label"] for r in endpoints["/explain"]["returns"]] == ["Prediction ŷ", "summary", "Token heatmaps",
                                                                    "Permutation Δŷ", "explanation"]
    assert [r["label"] for r in endpoints["/compare_methods"]["returns"]] == ["Attribution methods"]


def test_handlers_map_shown_names_to_models(app):
    seen = []

    def loader(name, policy):
        seen.append(name)
        raise RuntimeError("stop here")

    policy = ModelPolicy(("/srv/models/sst-lstm",))
    describe_model, _, _ = app.make_handlers(ModelCache(policy, loader), app.display_names(policy.models))
    with pytest.raises(Exception):
        describe_model("local:sst-lstm")
    assert seen == ["/srv/models/sst-lstm"]


def test_startup_refuses_without_a_model_or_with_a_missing_one(app, no_model_env, monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="no model to serve: set HF_ATTN_MODEL"):
        app.startup(tmp_path)
    monkeypatch.setenv("HF_ATTN_MODEL", str(tmp_path / "missing-model"))
    with pytest.raises(ValueError) as refused:
        app.startup(tmp_path)
    message = str(refused.value)
    assert message.startswith("cannot serve local:missing-model: ") and "\n" not in message


def test_startup_names_why_the_model_is_served(app, no_model_env, monkeypatch, trained_model_dir, tmp_path):
    monkeypatch.setenv("HF_ATTN_MODEL", trained_model_dir)
    policy, cache, because = app.startup(tmp_path)
    assert policy.models == (trained_model_dir,) and because == "set by the HF_ATTN_MODEL variable"
    monkeypatch.delenv("HF_ATTN_MODEL")
    (tmp_path / "space_config.json").write_text(json.dumps({"default_model": "me/model", "models": ["me/model"]}))
    assert "space_config.json" in app.model_source("me/model", tmp_path)


def test_the_app_without_a_model_exits_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in MODEL_ENV}
    env.update(HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False", PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run([sys.executable, str(APP)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("hf_attn explorer: no model to serve") and not any("runs" in l for l in lines)
    assert not list(tmp_path.iterdir())  # nothing found, nothing trained


def test_errors_are_logged_as_one_line(app):
    formatter = app.OneLineFormatter("%(levelname)s %(name)s: %(message)s")
    try:
        raise OSError("cannot read\n/srv/x")
    except OSError:
        record = logging.getLogger("hf_attn.app.space").makeRecord("hf_attn.app.space", logging.WARNING, __file__, 1,
                                                                  "cannot load model %r", ("m",), sys.exc_info())
    line = formatter.format(record)
    assert line == "WARNING hf_attn.app.space: cannot load model 'm': OSError: cannot read /srv/x"


# ------------------------------------------------------------------------------ methods side by side
def _cells(page: str, method: str) -> list[float]:
    import re

    row = re.search(rf'<tr data-row="{method}">(.*?)</tr>', page).group(1)
    return [float(v) for v in re.findall(r'data-value="([^"]+)"', row)]


def test_compare_handler_gives_one_row_per_method_for_a_tiny_bert(app):
    """The handler of "Every attribution method side by side" on a tiny random BERT: one heatmap row
    per method of COMPARE_METHODS with finite values over the sentence's word pieces; the attention row
    is the last layer's [CLS] row averaged over heads (from the model's own attentions) and the
    leave-one-out row ŷ_c(x) − ŷ_c(x without the token), both recomputed here; visitor errors are
    one-line messages."""
    import gradio as gr
    import numpy as np
    import torch

    from architectures import tiny_classifier
    from hf_attn.app.space import COMPARE_METHODS

    model, tokenizer = tiny_classifier("bert")
    model.eval()
    policy = ModelPolicy(("tester/tiny-bert",))
    compare = app.make_compare_handler(ModelCache(policy, lambda name, policy: (model, tokenizer)))
    text = "not very fun acting , but a great story"
    page = compare("tester/tiny-bert", text)
    ids = tokenizer(text)["input_ids"]
    content = ids[1:-1]  # between [CLS] and [SEP]
    assert page.count("<tr data-row=") == len(COMPARE_METHODS)
    for method in COMPARE_METHODS:
        values = _cells(page, method)
        assert len(values) == len(content) and np.isfinite(values).all(), method
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_attentions=True)
        probabilities = out.logits.softmax(-1)[0]
        c = int(probabilities.argmax())
        attention = out.attentions[-1][0, :, 0, 1:-1].mean(0)
        deleted = [float(probabilities[c] - model(input_ids=torch.tensor([ids[:t] + ids[t + 1:]])).logits.softmax(-1)[0, c])
                   for t in range(1, len(ids) - 1)]
    np.testing.assert_allclose(_cells(page, "attention"), attention.numpy(), atol=1e-6)
    # the deletions run the fused attention kernel, this reference the eager arithmetic: equal to float32 rounding
    np.testing.assert_allclose(_cells(page, "leave_one_out"), deleted, atol=1e-5)
    with pytest.raises(gr.Error, match="the text is empty"):
        compare("tester/tiny-bert", "   ")
    # the tiny BERT has 40 positions: 38 word pieces besides [CLS] and [SEP]
    with pytest.raises(gr.Error, match="too long: 39 word pieces, the limit is 38"):
        compare("tester/tiny-bert", "good " * 39)
    assert len(_cells(compare("tester/tiny-bert", "good " * 38), "saliency")) == 38


def test_compare_on_the_papers_bilstm_lists_the_transformer_only_methods(app, trained_model_dir):
    """On one of the papers' BiLSTMs the methods that need transformer layers are listed with the
    reason instead of a row; the others have one finite value per token."""
    import numpy as np
    from transformers import AutoTokenizer

    from hf_attn import AttnClassifierForSequenceClassification

    model = AttnClassifierForSequenceClassification.from_pretrained(trained_model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_model_dir)
    policy = ModelPolicy((trained_model_dir,))
    compare = app.make_compare_handler(ModelCache(policy, lambda name, policy: (model, tokenizer)),
                                       app.display_names(policy.models))
    page = compare(next(iter(app.display_names(policy.models))), "a gorgeous , witty movie")
    for method in ("attention", "saliency", "gradient_x_input", "integrated_gradients", "leave_one_out"):
        assert np.isfinite(_cells(page, method)).all() and len(_cells(page, method)) >= 4, method
    for method in ("rollout", "attention_flow", "alti", "value_zeroing"):
        assert f'<tr data-row="{method}">' not in page and f"<li><b>{method}</b>: " in page
    assert trained_model_dir not in page


# ------------------------------------------------------------------------------ what visitors send
def test_invisible_text_is_refused_in_one_line_without_an_error_log(app, caplog):
    """A sentence of zero-width characters (or a byte-order mark, joiners, control characters) is
    refused with "nothing to explain" by both views; the server log has no ERROR line for it (the
    visitor's mistake is logged at INFO, in one line)."""
    import gradio as gr

    from architectures import tiny_classifier

    model, tokenizer = tiny_classifier("bert")
    policy = ModelPolicy(("tester/tiny-bert",))
    cache = ModelCache(policy, lambda name, policy: (model, tokenizer))
    _, explain, _ = app.make_handlers(cache)
    compare = app.make_compare_handler(cache)
    caplog.set_level(logging.INFO)
    for text in ("\u200b\u200b\u200b", "\ufeff", "\u200d \u2060\u200c", "\x00\x01"):
        with pytest.raises(gr.Error, match="Nothing to explain: the text holds no words"):
            explain("tester/tiny-bert", text, 0.01, 5, 0)
        with pytest.raises(gr.Error, match="Nothing to explain: the text holds no words"):
            compare("tester/tiny-bert", text)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    refusals = [r.getMessage() for r in caplog.records if "Nothing to explain" in r.getMessage()]
    assert len(refusals) == 8 and all(r.levelno == logging.INFO and "\n" not in r.getMessage()
                                      for r in caplog.records if "Nothing to explain" in r.getMessage())


# ------------------------------------------------------------------------------ budgets and load
def test_compare_lists_the_methods_its_budget_did_not_leave_time_for(app, monkeypatch):
    """The comparison under a budget too small for a 38-token sentence: every method that did not
    finish is listed on the page as "not run: budget" with the reason, none has a row."""
    from architectures import tiny_classifier
    from hf_attn.app import space

    model, tokenizer = tiny_classifier("bert")
    policy = ModelPolicy(("tester/tiny-bert",))
    monkeypatch.setattr(app, "compare_methods",
                        lambda model, tokenizer, text: space.compare_methods(model, tokenizer, text, seconds=1e-6))
    compare = app.make_compare_handler(ModelCache(policy, lambda name, policy: (model, tokenizer)))
    page = compare("tester/tiny-bert", "good " * 38)
    assert "<tr data-row=" not in page
    for method in space.COMPARE_METHODS:
        assert f"<li><b>{method}</b>: not run: budget: this request&#x27;s time budget of 1e-06 s" in page, method


def test_busy_requests_are_refused_at_once_and_waiting_is_bounded():
    """A gate with one turn and one waiting place: a third request is refused at once with the busy
    message; the waiting one gets the turn when it frees; a request that gets no turn within
    max_wait is refused then (not left waiting)."""
    from hf_attn.app.space import BUSY_MESSAGE, ExplainError, RequestGate

    gate = RequestGate(running=1, waiting=1, max_wait=60)
    release, holding, served = threading.Event(), threading.Event(), []

    def first():
        with gate.turn():
            holding.set()
            release.wait(30)

    def second():
        with gate.turn():
            served.append(time.perf_counter())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    assert holding.wait(30)
    threads[1].start()
    time.sleep(0.2)  # the second now waits for the turn
    began = time.perf_counter()
    with pytest.raises(ExplainError, match=f"^{BUSY_MESSAGE}$"):
        with gate.turn():
            pytest.fail("a third request got a turn")
    assert time.perf_counter() - began < 1.0
    assert not served
    release.set()
    for thread in threads:
        thread.join(30)
    assert len(served) == 1

    short = RequestGate(running=1, waiting=1, max_wait=0.3)
    with short.turn():
        began = time.perf_counter()
        with pytest.raises(ExplainError, match="busy"):
            with short.turn():
                pytest.fail("no turn was free")
        assert 0.25 < time.perf_counter() - began < 5.0
    with short.turn():  # free again
        pass


def test_the_page_refuses_requests_beyond_its_gates(app, monkeypatch):
    """The explanation and the comparison each have a gate: Gradio gives them more workers than the
    gate holds, so a request beyond it reaches the handler and is refused at once (a gr.Error with
    the busy message), never queued behind the others; the page's queue is bounded too."""
    import gradio as gr

    from hf_attn.app.space import BUSY_MESSAGE, RequestGate

    policy = ModelPolicy(("tester/x",))
    demo = app.build_demo(policy, cache=ModelCache(policy, _never_loads))
    limits = {f.api_name: (f.concurrency_limit, f.concurrency_id) for f in demo.fns.values()}
    gate = RequestGate()
    assert limits["compare_methods"] == (gate.capacity + app.REFUSERS, "compare_methods")
    assert limits["explain"] == limits["explain_1"] == (gate.capacity + app.REFUSERS, "explain")
    assert app.queued(demo)._queue.max_size == 32
    monkeypatch.setenv("HF_ATTN_QUEUE_SIZE", "5")
    assert app.queued(app.build_demo(policy, cache=ModelCache(policy, _never_loads)))._queue.max_size == 5

    started, release = threading.Event(), threading.Event()

    def slow_compare(model, tokenizer, text):
        started.set()
        release.wait(30)
        return None

    monkeypatch.setattr(app, "compare_methods", slow_compare)
    monkeypatch.setattr(app, "methods_heatmap_html", lambda result: "<p>done</p>")
    compare = app.make_compare_handler(ModelCache(policy, lambda name, policy: (None, None)),
                                       gate=RequestGate(running=1, waiting=0, max_wait=30))
    results = []
    thread = threading.Thread(target=lambda: results.append(compare("tester/x", "a film")))
    thread.start()
    assert started.wait(30)
    began = time.perf_counter()
    with pytest.raises(gr.Error, match="busy with other visitors"):
        compare("tester/x", "a film")
    assert time.perf_counter() - began < 1.0 and BUSY_MESSAGE.startswith("The explorer is busy")
    release.set()
    thread.join(30)
    assert results == ["<p>done</p>"]


def test_compare_stops_a_method_that_would_never_end_within_its_budget(monkeypatch):
    """A method that never returns on its own (forwards in an endless loop) is stopped by the compare
    view's budget inside its loop — every forward checks the deadline — and listed as "not run: budget";
    the methods before it keep their rows, those after it are listed too. Without the budget the call
    would never return, so finishing at all is the check; the elapsed time is only bounded loosely (the
    machine may be shared)."""
    import time

    import torch

    from architectures import tiny_classifier
    from hf_attn.app import space
    from hf_attn.batteries.faithfulness import methods as table_methods

    model, tokenizer = tiny_classifier("bert")
    real = table_methods._method_function
    calls = []

    def endless(adapter, batch):
        while True:  # a slow method: forward after forward, never finishing by itself
            with torch.no_grad():
                adapter.logits(batch)
            calls.append(1)

    monkeypatch.setattr(table_methods, "_method_function",
                        lambda name, settings, contrast=None: endless if name == "alti" else real(name, settings,
                                                                                                     contrast))
    started = time.perf_counter()
    result = space.compare_methods(model, tokenizer, "a good film with a dull plot", seconds=2.0)
    elapsed = time.perf_counter() - started
    assert calls, "the endless method never ran"
    assert "alti" not in result.methods and "budget" in result.skipped["alti"]
    assert {"attention", "rollout", "saliency", "gradient_x_input"} <= set(result.methods)
    order = space.COMPARE_METHODS
    for later in order[order.index("alti") + 1:]:
        assert later not in result.methods and "budget" in result.skipped[later], later
    assert elapsed < 60, elapsed  # stopped by the budget, not by anything else
