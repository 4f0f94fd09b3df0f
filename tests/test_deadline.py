"""Time budgets that running computations honour (hf_attn/core/deadline.py): the deadline is checked in
loops and in every module forward, a loop that cannot finish stops at once, a budget belongs to its
own thread, and a method that runs out is reported as not run, never with partial scores.

Time-based assertions keep wide margins (the test machine is shared): they check that a computation
stopped early and said so, not how many milliseconds it took."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from conftest import needs_minilm
from hf_attn.core import deadline
from hf_attn.core.deadline import BudgetExceeded, check, paced, time_budget


def test_check_raises_only_once_the_deadline_has_passed():
    check()  # no budget: nothing to check
    with time_budget(60):
        check()
        assert 50 < deadline.remaining() <= 60
    with time_budget(0.05, "this test"):
        time.sleep(0.1)
        with pytest.raises(BudgetExceeded, match="this test's time budget of 0.05 s ran out"):
            check()
    assert deadline.current() is None  # the budget ends with its block
    for bad in (0, -1, float("nan"), float("inf"), "10", True):
        with pytest.raises(ValueError, match="positive number of seconds"):
            with time_budget(bad):
                pass


def test_the_earlier_of_nested_budgets_binds():
    with time_budget(0.05):
        with time_budget(100):  # cannot extend the outer one
            assert deadline.remaining() <= 0.05
    with time_budget(100):
        with time_budget(0.05):
            assert deadline.remaining() <= 0.05
        assert deadline.remaining() > 50


def test_a_budget_is_not_an_ordinary_error():
    """``except Exception`` fallbacks on the way (a probe that says "fails on this model") must not
    turn a budget that ran out into a finished result."""
    with time_budget(0.01):
        time.sleep(0.05)
        with pytest.raises(BudgetExceeded):
            try:
                check()
            except Exception:  # noqa: BLE001 - what a fallback would do
                pytest.fail("a budget that ran out was caught as an ordinary error")


def test_paced_stops_a_loop_that_cannot_finish_at_once():
    """Ten steps of 0.1 s under a 0.3 s budget: after the first step the remaining nine need ~0.9 s,
    so the loop stops there, long before the budget runs out, saying how long it would need."""
    done = []
    began = time.perf_counter()
    with time_budget(0.3):
        with pytest.raises(BudgetExceeded, match=r"would run out: 1 of 10 steps took .* the other 9 need about"):
            for step in paced(range(10)):
                time.sleep(0.1)
                done.append(step)
    assert done == [0]
    assert time.perf_counter() - began < 0.3
    assert list(paced(range(3))) == [0, 1, 2]  # without a budget: the steps as they are
    with time_budget(60):
        assert list(paced([5, 6])) == [5, 6]


def test_every_module_forward_checks_the_budget_of_its_own_thread():
    """Any torch module stops within one forward once its thread's budget is spent; a thread without
    a budget (another visitor's request) is not affected."""
    layer = torch.nn.Linear(4, 4)
    x = torch.ones(1, 4)
    layer(x)
    other_ran = []

    def other_request():
        for _ in range(20):
            layer(x)
        other_ran.append(True)

    with time_budget(0.01):
        time.sleep(0.05)
        thread = threading.Thread(target=other_request)
        thread.start()
        with pytest.raises(BudgetExceeded):
            layer(x)
        thread.join()
    assert other_ran == [True]
    layer(x)  # after the budget: as before


# ------------------------------------------------------------------------ methods stop and say so
def _minilm():
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from hf_attn.models.pretrained import resolve_base_model

    folder = resolve_base_model("minilm-l6")
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2).eval()
    return model, AutoTokenizer.from_pretrained(folder)


LONG_TEXT = " ".join("the film was a gorgeous witty but rather slow story and not that fun".split() * 36)  # 506 tokens


@needs_minilm
@pytest.mark.usefixtures("one_torch_thread")
def test_alti_and_integrated_gradients_stop_within_a_small_budget():
    """ALTI and integrated gradients on a ~500-token sentence take seconds each on one CPU thread
    (ALTI ~10 s); under a 0.2 s budget each is reported as not run within a fraction of that, with
    the reason, and no score of it is kept. Without a budget the same call gives them both."""
    from hf_attn import Explainer

    model, tokenizer = _minilm()
    explainer = Explainer(model, tokenizer, device="cpu")
    assert 480 <= len(tokenizer(LONG_TEXT)["input_ids"]) <= 512
    for method in ("alti", "integrated_gradients"):
        began = time.perf_counter()
        result = explainer.attributions([LONG_TEXT], methods=[method], time_budget=0.2)
        took = time.perf_counter() - began
        assert result.methods == [] and method not in result.values
        assert result.skipped[method].startswith("not run: budget: this request's time budget of 0.2 s")
        assert took < 4.0, f"{method} took {took:.1f} s under a 0.2 s budget"
    short = explainer.attributions(["a gorgeous , witty film"], methods=["alti", "integrated_gradients"])
    assert short.methods == ["alti", "integrated_gradients"] and not short.skipped


@needs_minilm
@pytest.mark.usefixtures("one_torch_thread")
def test_leave_one_out_stops_inside_its_batch():
    """Leave-one-out on ~500 tokens needs ~500 forwards of ~500 tokens (about a minute on one thread,
    in batches of several seconds each): under a 2 s budget it stops inside its first batch (every
    forward checks the budget) and is reported as not run, with how long it ran."""
    from hf_attn import Explainer

    model, tokenizer = _minilm()
    explainer = Explainer(model, tokenizer, device="cpu")
    began = time.perf_counter()
    result = explainer.attributions([LONG_TEXT], methods=["leave_one_out"], time_budget=2.0)
    took = time.perf_counter() - began
    assert result.skipped["leave_one_out"].startswith("not run: budget: this request's time budget of 2 s ran out")
    assert "stopped after" in result.skipped["leave_one_out"] and "leave_one_out" not in result.values
    assert took < 8.0, f"the request took {took:.1f} s under a 2 s budget"


def test_the_module_hook_is_held_only_while_a_budget_is_open():
    """Forwards outside every budget keep torch's hook-free path: the global pre-hook is there while a
    budget is open (nested ones included) and gone with the last."""
    from torch.nn.modules import module as torch_module

    from hf_attn.core import deadline

    before = len(torch_module._global_forward_pre_hooks)
    with deadline.time_budget(60):
        assert len(torch_module._global_forward_pre_hooks) == before + 1
        with deadline.time_budget(30):
            assert len(torch_module._global_forward_pre_hooks) == before + 1
        assert len(torch_module._global_forward_pre_hooks) == before + 1
    assert len(torch_module._global_forward_pre_hooks) == before
    with pytest.raises(deadline.BudgetExceeded):
        with deadline.time_budget(1e-9):
            torch.nn.Linear(2, 2)(torch.zeros(1, 2))
    assert len(torch_module._global_forward_pre_hooks) == before
