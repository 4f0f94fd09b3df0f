"""The faithfulness table in shards (hf_attn.batteries.faithfulness.shards): one shard gives exactly
the table of one call; many shards give the same per-sentence values (float32 rounding) and cells
recomputed from them; finished shards are cached and a rerun computes only the missing ones; the
battery records its processes and shards. Two processes under ``accelerate launch``:
tests/test_multiprocess.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from architectures import TEXTS, tiny_classifier
from hf_attn.adapters import adapter_for
from hf_attn.batteries.faithfulness import FaithfulnessSettings, run_faithfulness
from hf_attn.batteries.faithfulness import shards as sharding
from hf_attn.core import faithfulness as fm

SETTINGS = FaithfulnessSettings(ig_steps=4, ig_target=None, soft_draws=2, soft_max_draws=4, shap_samples=16,
                                batch_tokens=64, naopc_beam=2, naopc_exact_max=4, naopc_beam_max=8,
                                naopc_every_k_max=8)
TEN = TEXTS * 2
RATIONALES = [[0, 1, 0], [1, 0, 0, 0, 0, 0, 0, 1, 0], [1], [0, 1, 0, 0, 0, 1, 1], [0, 0, 0]] * 2


@pytest.fixture(scope="module")
def adapter():
    model, tokenizer = tiny_classifier("bert")
    return adapter_for(model, tokenizer, device="cpu")


@pytest.fixture(scope="module")
def whole(adapter):
    return run_faithfulness(adapter, TEN, SETTINGS, rationales=RATIONALES)


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_plan_shards_covers_every_text_once():
    plan = sharding.plan_shards(10, 4)
    assert [p.tolist() for p in plan] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    with pytest.raises(ValueError, match="shard_sentences must be a positive int"):
        sharding.plan_shards(10, 0)


def test_one_shard_is_exactly_the_table_of_one_call(adapter, whole):
    merged, info = sharding.run_faithfulness_sharded(adapter, TEN, SETTINGS, rationales=RATIONALES,
                                                     shard_sentences=len(TEN), accelerator=None)
    assert info == {"processes": 1, "shards": 1, "shard_sentences": 10, "shards_by_process": {"0": [0]}}
    assert merged.methods == whole.methods
    assert _same(merged.table, whole.table)
    assert merged.undefined_reasons == whole.undefined_reasons and merged.undefined == whole.undefined
    assert merged.sentence() == whole.sentence()
    for key in ("plausibility", "paired"):
        assert _same(merged.metric_details[key], whole.metric_details[key])
    soft, whole_soft = dict(merged.metric_details["soft"]), dict(whole.metric_details["soft"])
    soft.pop("seconds"), whole_soft.pop("seconds")
    assert _same(soft, whole_soft)
    assert merged.forwards == whole.forwards


def test_many_shards_keep_each_sentences_values_and_recompute_the_cells(adapter, whole):
    merged, info = sharding.run_faithfulness_sharded(adapter, TEN, SETTINGS, rationales=RATIONALES,
                                                     shard_sentences=3, accelerator=None)
    assert info["shards"] == 4 and info["shards_by_process"] == {"0": [0, 1, 2, 3]}
    assert merged.texts == TEN and merged.num_instances == 10
    for method in whole.methods:
        for metric, values in whole.per_instance[method].items():
            np.testing.assert_allclose(merged.per_instance[method][metric], values, atol=1e-5, equal_nan=True)
            cell = merged.table[method][metric]
            again = fm.mean_ci(merged.per_instance[method][metric], SETTINGS.confidence)
            assert cell["mean"] == pytest.approx(again["mean"], nan_ok=True) and cell["n"] == again["n"]
            assert cell["undefined"] == whole.table[method][metric]["undefined"]
        for ours, theirs in zip(merged.attributions[method], whole.attributions[method]):
            np.testing.assert_allclose(ours, theirs, atol=1e-5, equal_nan=True)
    assert merged.undefined_reasons == whole.undefined_reasons
    naopc = merged.metric_details["naopc"]
    assert sum(naopc["bounds"].values()) == 10 and len(naopc["aopc_min"]) == 10
    assert len(merged.metric_details["soft"]["null_probability"]) == 10
    assert merged.metric_details["plausibility"]["k_fraction"] == whole.metric_details["plausibility"]["k_fraction"]
    cost = merged.cost["integrated_gradients"]
    assert cost["ig_steps_max"] == 4 and cost["seconds_per_sentence"] == pytest.approx(cost["seconds"] / 10)


def test_finished_shards_are_cached_and_a_rerun_computes_only_the_missing(adapter, tmp_path, monkeypatch):
    from hf_attn.batteries.faithfulness import table

    calls = []
    real = table.run_faithfulness

    def counted(adapter, texts, *args, **kwargs):
        calls.append(list(texts))
        return real(adapter, texts, *args, **kwargs)

    monkeypatch.setattr(table, "run_faithfulness", counted)
    cache = str(tmp_path / "cache")
    first, _ = sharding.run_faithfulness_sharded(adapter, TEN, SETTINGS, shard_sentences=4, cache_dir=cache,
                                                 key="k1", accelerator=None)
    assert len(calls) == 3
    shards = sorted((tmp_path / "cache").glob("shard-k1-*.npz"))
    assert len(shards) == 3
    shards[1].unlink()  # as if the run had been killed before the second shard was written
    calls.clear()
    again, _ = sharding.run_faithfulness_sharded(adapter, TEN, SETTINGS, shard_sentences=4, cache_dir=cache,
                                                 key="k1", accelerator=None)
    assert calls == [TEN[4:8]]
    assert _same(again.table, first.table) and again.sentence() == first.sentence()


def test_the_battery_records_its_processes_and_shards(trained_model_dir, tmp_path, capsys):
    from hf_attn.cli import main

    out = tmp_path / "out"
    args = ["analyze", trained_model_dir, "--battery", "faithfulness", "--quiet", "--threads", "1",
            "--faith-methods", "attention,gradient_x_input,random", "--faith-naopc-beam", "0",
            "--faith-metrics", "comprehensiveness,sufficiency", "--faith-max-instances", "9",
            "--faith-shard-sentences", "4", "--output-dir", str(out)]
    assert main(args) == 0, capsys.readouterr().err
    payload = json.loads((out / "results.json").read_text())
    assert payload["processes"] == 1
    assert payload["sharding"] == {"processes": 1, "shards": 3, "shard_sentences": 4,
                                   "shards_by_process": {"0": [0, 1, 2]}}
    assert payload["request"]["shard_sentences"] == 4 and payload["num_instances"] == 9
    assert not (out / "cache").exists()  # finished: the shards were only kept to resume
    capsys.readouterr()
    try:  # a count is refused by argparse (a SystemExit, exit code 2)
        code = main(args[:-4] + ["--faith-shard-sentences", "0", "--output-dir", str(tmp_path / "bad")])
    except SystemExit as exit:
        code = exit.code
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "--faith-shard-sentences" in err[0]


def test_the_explainer_computes_its_table_in_shards():
    """``Explainer.faithfulness(..., shard_sentences=k)``: the shards' table, every sentence's values those
    of the one-shard table (float32 rounding)."""
    from hf_attn import Explainer

    model, tokenizer = tiny_classifier("bert")
    explainer = Explainer(model, tokenizer, device="cpu")
    settings = dict(methods=("attention", "gradient_x_input", "random"), metrics=("comprehensiveness", "sufficiency"),
                    naopc_beam=0)
    whole = explainer.faithfulness(TEN, **settings)
    shards = explainer.faithfulness(TEN, shard_sentences=3, **settings)
    for method in whole.methods:
        for metric, values in whole.per_instance[method].items():
            np.testing.assert_allclose(shards.per_instance[method][metric], values, atol=1e-5)
    with pytest.raises(ValueError, match="shard_sentences must be a positive int"):
        explainer.faithfulness(TEN, shard_sentences=0, **settings)


def test_method_groups_computed_apart_give_the_same_scores(adapter):
    """What each process of a launch computes (its length groups, alone) gives every text the scores
    of the one-process run; the costs sum (two processes: tests/test_multiprocess.py)."""
    from hf_attn.batteries.faithfulness import length_groups, run_methods

    settings = FaithfulnessSettings(methods=("attention", "integrated_gradients", "leave_one_out", "random"),
                                    ig_steps=4, ig_target=None)
    batch = adapter.encode(TEN)
    groups = length_groups(batch, settings.batch_tokens)
    assert len(groups) > 1
    one = run_methods(adapter, batch, settings, groups=groups)
    apart = sharding.run_methods_sharded(adapter, batch, settings, groups, accelerator=None)
    assert list(apart.scores) == list(one.scores) and apart.skipped == one.skipped
    for method in one.scores:
        for ours, theirs in zip(apart.scores[method], one.scores[method]):
            np.testing.assert_array_equal(ours, theirs)
    assert apart.cost["integrated_gradients"]["seconds_per_sentence"] == pytest.approx(
        apart.cost["integrated_gradients"]["seconds"] / len(TEN))
