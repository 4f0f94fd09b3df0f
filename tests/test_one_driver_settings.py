"""What the one driver per battery refuses or chooses for each model kind: settings given twice,
options of one kind set for the other, the transformer length cap and the W&P adversary batches."""

import numpy as np
import pytest

from hf_attn.batteries.jw.common import JWRunSettings, JWSettings, TRANSFORMER_MAX_LENGTH


def test_jw_run_settings_carry_one_value_per_field():
    from hf_attn.runs.jw import settings_from_jw

    chosen = settings_from_jw(JWRunSettings(transformer_layer=2, algorithm=JWSettings(precision="bfloat16")))
    assert (chosen.layer, chosen.precision) == (2, "bfloat16")  # each from where it was set
    with pytest.raises(ValueError, match="layer: the run settings say 2 but its algorithm settings say 3"):
        settings_from_jw(JWRunSettings(transformer_layer=2, algorithm=JWSettings(layer=3)))


def test_sentence_pair_models_refuse_what_they_do_not_have():
    from hf_attn.runs.jw import _check_pair_settings, settings_from_jw

    for run, message in ((JWRunSettings(device="cuda"), "--device cuda"),
                         (JWRunSettings(precision="bfloat16"), "--precision bfloat16"),
                         (JWRunSettings(transformer_layer=2), "one attention distribution"),
                         (JWRunSettings(dataset="reviews.csv"), "--dataset")):
        with pytest.raises(ValueError, match=message):
            _check_pair_settings(settings_from_jw(run), run)
    _check_pair_settings(settings_from_jw(JWRunSettings()), JWRunSettings())  # the defaults run


def test_transformers_are_cut_at_512_tokens_unless_asked_the_papers_models_keep_their_own_limit():
    from types import SimpleNamespace

    transformer = SimpleNamespace(config=SimpleNamespace(model_type="modernbert"))
    papers = SimpleNamespace(config=SimpleNamespace(model_type="hf_attn"))
    assert JWSettings().length_for(transformer) == TRANSFORMER_MAX_LENGTH == 512
    assert JWSettings().length_for(papers) is None
    assert JWSettings(max_length=2048).length_for(transformer) == 2048


def test_wp_on_a_papers_model_refuses_the_transformer_options(trained_model_dir, tmp_path):
    from hf_attn.runs.wp import run_wp

    for overrides, message in (({"transformer_layer": 3}, "transformer_layer=3 applies to transformers"),
                               ({"max_instances": 10}, "max_instances=10 applies to transformers"),
                               ({"diagnostic_mlp": False}, "diagnostic_mlp=False applies to transformers")):
        with pytest.raises(ValueError, match=message):
            run_wp(trained_model_dir, str(tmp_path / "wp"), progress=False, **overrides)
    with pytest.raises(ValueError, match="texts / labels apply to transformers"):
        run_wp(trained_model_dir, str(tmp_path / "wp"), progress=False, texts=["good"], labels=[1])
    assert not (tmp_path / "wp" / "models").exists()  # refused before anything was trained


def test_eraser_on_a_papers_model_refuses_a_device_before_reusing_a_finished_table(trained_model_dir, tmp_path):
    from hf_attn.runs.eraser import run_eraser

    out = str(tmp_path / "eraser")
    first = run_eraser(trained_model_dir, out, max_instances=4, ig_steps=2, progress=False)
    assert first["request"]["max_length"] is None  # the model's own limit
    with pytest.raises(ValueError, match="run on the CPU"):
        run_eraser(trained_model_dir, out, max_instances=4, ig_steps=2, progress=False, device="cuda")


def test_wp_adversary_batches_by_hand():
    from hf_attn.core.batching import length_batches

    lengths = np.array([5, 1, 3, 2, 9, 4])
    # at most 2 instances and 8 padded tokens: sorted [1, 2, 3, 4, 5, 9] → [1, 2], [3, 4], [5], [9]
    batches = length_batches(lengths, 8, max_rows=2)
    assert [lengths[b].tolist() for b in batches] == [[1, 2], [3, 4], [5], [9]]
    assert sorted(np.concatenate(batches).tolist()) == list(range(6))
    # short texts: plain slices of the sorted order, as many as allowed
    assert [len(b) for b in length_batches(np.ones(600, dtype=int), 16384, max_rows=256)] == [256, 256, 88]
    with pytest.raises(ValueError, match="max_rows"):
        length_batches(lengths, 8, max_rows=0)
