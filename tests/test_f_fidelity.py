"""F-Fidelity (hf_attn.batteries.faithfulness.f_fidelity): the fine-tuning's random removal drawn as
the paper's (hand-checked on a seeded example), the stochastic removal's cap, the fine-tuned copy
cached per model and settings, and a tiny end-to-end run whose tables hold every method's row."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from architectures import TEXTS, tiny_classifier
from hf_attn.batteries.faithfulness.f_fidelity import (CHEAP_METHODS, FFidelitySettings, MaskingCollator,
                                                       cache_key, finetuned_copy, ranks, removal_count,
                                                       removal_probability, run_f_fidelity, weights_digest)

ROOT = Path(__file__).resolve().parents[1]
TRAIN = (TEXTS * 2, [i % 2 for i in range(2 * len(TEXTS))])
TINY = FFidelitySettings(samples=3, batch_size=4, epochs=1.0)


def test_removal_count_is_beta_n_rounded_stochastically():
    """β·n whole: exactly β·n every draw; β·n = 1.7: 1 or 2, 2 with frequency ≈ 0.7 (mean β·n)."""
    rng = np.random.default_rng(0)
    assert {removal_count(20, 0.1, rng) for _ in range(50)} == {2}
    assert {removal_count(30, 0.1, rng) for _ in range(50)} == {3}  # 0.1·30 counts as 3, not 2.9999…
    draws = np.array([removal_count(17, 0.1, rng) for _ in range(4000)])
    assert set(draws.tolist()) == {1, 2}
    assert abs(draws.mean() - 1.7) < 0.03
    assert removal_count(1, 1.0, rng) == 1 and removal_count(0, 0.5, rng) == 0


def test_masking_collator_hand_checked_seeded_example():
    """A [CLS] t1 … t10 [SEP] row at β = 0.3: three content tokens deleted, drawn by the collator's
    seeded generator exactly as replayed here by hand (count, then positions without replacement);
    [CLS] and [SEP] never deleted; padding and labels as the training engine's collator makes them."""
    ids = [101] + list(range(1, 11)) + [102]
    content = [False] + [True] * 10 + [False]
    collator = MaskingCollator(pad_token_id=0, beta=0.3, seed=7)
    batch = collator([{"input_ids": ids, "content": content, "label": 1},
                      {"input_ids": [101, 5, 102], "content": [False, True, False], "label": 0}])
    rng = np.random.default_rng(7)  # the same draws, by hand
    share = 0.3 * 10
    count = 3 + int(rng.random() < share - 3)  # 3.0 exactly: the extra token's draw is taken, never met
    assert count == 3
    hit = set(rng.choice(np.arange(1, 11), size=3, replace=False).tolist())
    expected = [t for p, t in enumerate(ids) if p not in hit]
    assert batch["input_ids"][0].tolist() == expected and len(expected) == 9
    assert expected[0] == 101 and expected[-1] == 102
    # second row: 0.3 · 1 = 0.3 → 0 or 1 token, by the next draw
    extra = rng.random() < 0.3
    second = [101, 102] if extra else [101, 5, 102]
    assert batch["input_ids"][1].tolist()[:len(second)] == second
    assert batch["attention_mask"][1].sum().item() == len(second)
    assert batch["labels"].tolist() == [1, 0]


def test_masking_collator_never_deletes_special_tokens_and_keeps_the_ratio():
    collator = MaskingCollator(pad_token_id=0, beta=0.5, seed=1)
    ids = [101] + list(range(1, 21)) + [102]
    content = [False] + [True] * 20 + [False]
    for _ in range(30):
        row = collator.masked(ids, content)
        assert row[0] == 101 and row[-1] == 102
        assert len(row) == 2 + 10  # exactly β·n = 10 of the 20 content tokens deleted
        assert set(row[1:-1]) <= set(range(1, 21))
    assert collator.masked([7], [True]) == [7]  # a one-token text without specials keeps its token


def test_removal_probability_caps_the_expected_count_at_beta_n():
    """α·k ≤ β·n: α; beyond, β·n / k (the authors' use_max), so α'·k = β·n."""
    assert removal_probability(0.5, 0.1, 2, 40) == 0.5  # 1 ≤ 4
    assert removal_probability(0.5, 0.1, 20, 40) == pytest.approx(0.2)  # 10 > 4: 4 / 20
    assert removal_probability(0.5, 0.1, 0, 40) == 0.0


def test_ranks_one_is_best_and_ties_share():
    assert ranks({"a": 0.3, "b": 0.5, "c": 0.3}, True) == {"b": 1, "a": 2, "c": 2}
    assert ranks({"a": 0.3, "b": 0.5, "c": math.nan}, False) == {"a": 1, "b": 2, "c": 3}


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="beta"):
        FFidelitySettings(beta=0)
    with pytest.raises(ValueError, match="samples"):
        FFidelitySettings(samples=0)
    with pytest.raises(ValueError, match="methods"):
        FFidelitySettings(methods=("nope",))
    with pytest.raises(ValueError, match="explainer_or_model_folder"):
        run_f_fidelity(3, TEXTS, TINY)


@pytest.fixture(scope="module")
def explainer():
    from hf_attn import Explainer

    torch.manual_seed(0)
    model, tokenizer = tiny_classifier("bert")
    return Explainer(model, tokenizer, device="cpu")


def test_copy_is_cached_reused_and_invalidated_by_settings(explainer, tmp_path):
    """The second call reuses the folder (same weights); another β, another folder; the copy's
    weights differ from the source's, the source is untouched."""
    before = weights_digest(explainer.model)
    first, record = finetuned_copy(explainer, TINY, str(tmp_path), train_data=TRAIN)
    assert not record["reused"] and record["steps"] >= 1
    assert weights_digest(explainer.model) == before
    assert weights_digest(first.model) != before
    again, record2 = finetuned_copy(explainer, TINY, str(tmp_path), train_data=TRAIN)
    assert record2["reused"] and record2["folder"] == record["folder"]
    assert weights_digest(again.model) == weights_digest(first.model)
    other = FFidelitySettings(samples=3, batch_size=4, epochs=1.0, beta=0.2)
    assert cache_key(before, other) != cache_key(before, TINY)
    assert cache_key(before, FFidelitySettings(samples=9, batch_size=4, epochs=1.0)) == cache_key(before, TINY)
    _, record3 = finetuned_copy(explainer, other, str(tmp_path), train_data=TRAIN)
    assert not record3["reused"] and record3["folder"] != record["folder"]
    _, record4 = finetuned_copy(explainer, TINY, str(tmp_path), train_data=(TRAIN[0], TRAIN[1][::-1]))
    assert not record4["reused"]  # other training labels: another copy
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".partial-")) == []


def test_end_to_end_tiny_model_every_methods_row(explainer, tmp_path):
    labels = [i % 2 for i in range(len(TEXTS))]
    result = run_f_fidelity(explainer, TEXTS, TINY, labels=labels, cache_dir=str(tmp_path), train_data=TRAIN,
                            attribution_settings={"ig_steps": 4, "ig_target": None})
    assert result["methods"] == list(CHEAP_METHODS)
    for table in ("plain", "finetuned"):
        assert set(result[table]) == set(CHEAP_METHODS)
        for m in CHEAP_METHODS:
            assert all(math.isfinite(result[table][m][c]) for c in ("comprehensiveness", "sufficiency"))
    for m in CHEAP_METHODS:
        cells = result["ffidelity"][m]
        assert -1 <= cells["ffid_plus"] <= 1 and -1 <= cells["ffid_minus"] <= 1
        assert cells["n"] == len(TEXTS)
    assert sorted(result["ranks"]["finetuned"]["comprehensiveness"].values())[0] == 1
    assert result["copy"]["train_examples"] == len(TRAIN[0])


def test_report_check_matches_its_record():
    """docs/faithfulness/f_fidelity.md is what the script renders from f_fidelity.json."""
    if not (ROOT / "docs" / "faithfulness" / "f_fidelity.json").exists():
        pytest.skip("no f_fidelity.json record")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "f_fidelity_report.py"), "--check"],
                          capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr


def test_copy_keeps_the_original_max_length_and_is_keyed_by_it(explainer, tmp_path):
    """An explainer cutting texts at 6 tokens: its copy is fine-tuned on (and reads) the texts cut as
    the original cuts them, so it is another folder than the uncut explainer's copy, and its
    adapter's limit is the original's (the given attributions have one score per content token)."""
    from hf_attn import Explainer

    short = Explainer(explainer.model, explainer.tokenizer, device="cpu", max_length=6)
    long_text = "the plot was slow but the acting was very good and the ending was moving"
    assert short.adapter.max_length == 6 and len(explainer.tokenizer(long_text)["input_ids"]) > 6
    copy_short, record_short = finetuned_copy(short, TINY, str(tmp_path), train_data=TRAIN)
    assert copy_short.adapter.max_length == 6
    copy_full, record_full = finetuned_copy(explainer, TINY, str(tmp_path), train_data=TRAIN)
    assert copy_full.adapter.max_length == explainer.adapter.max_length
    assert record_full["folder"] != record_short["folder"] and not record_full["reused"]
    # the copy encodes a long text as the original does: the same content tokens
    assert torch.equal(copy_short.adapter.encode([long_text]).input_ids, short.adapter.encode([long_text]).input_ids)
