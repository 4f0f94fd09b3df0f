"""Models: every encoder × attention × variant builds, trains, round-trips; exactness of the
fast paths against the reference paths; masking; bad inputs."""

import itertools
import json

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers import AutoConfig, AutoModelForSequenceClassification

from hf_attn import AttnClassifierConfig, AttnClassifierForSequenceClassification
from hf_attn.models.modeling_hf_attn import LSTMEncoder
from remote_code import remote_code_logits

VOCAB = 30


def make_config(encoder, attention, variant, num_labels=2, **kw):
    size = {}
    if variant in ("residual", "tying", "mlm"):
        # 2H = d for the LSTM; encoder output = d for CNN (4 kernels × 4 filters) and Average
        size = {"lstm": dict(embedding_dim=16, hidden_size=8),
                "cnn": dict(embedding_dim=16, cnn_filters=4),
                "average": dict(embedding_dim=16, hidden_size=16)}[encoder]
    else:
        size = dict(embedding_dim=16, hidden_size=8, cnn_filters=4)
    return AttnClassifierConfig(vocab_size=VOCAB, encoder=encoder, attention=attention,
                                variant=variant, num_labels=num_labels, **size, **kw)


def batch(b=4, t=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([t, 5, 1, 3][:b])
    mask = (torch.arange(t)[None] < lengths[:, None]).long()
    ids = torch.randint(3, VOCAB, (b, t), generator=g) * mask
    return ids, mask


GRID = list(itertools.product(["lstm", "cnn", "average"], ["additive", "dot", "uniform"],
                              ["base", "concat", "residual", "tying", "mlm"]))


@pytest.mark.parametrize("encoder,attention,variant", GRID)
def test_every_model_trains_a_step_and_round_trips(tmp_path, encoder, attention, variant):
    torch.manual_seed(0)
    model = AttnClassifierForSequenceClassification(make_config(encoder, attention, variant))
    ids, mask = batch()
    labels = torch.tensor([0, 1, 1, 0])
    model.train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    changed = [n for n, p in model.named_parameters() if not torch.equal(before[n], p)]
    assert any(n.startswith("decoder") for n in changed)
    if attention != "uniform":
        assert any(n.startswith("attention") for n in changed)
    if variant in ("tying", "mlm"):
        assert out.regularization_loss > 0

    model.eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert type(loaded) is AttnClassifierForSequenceClassification
    with torch.no_grad():
        a = model(input_ids=ids, attention_mask=mask)
        b = loaded(input_ids=ids, attention_mask=mask)
    assert torch.equal(a.logits, b.logits)
    assert torch.equal(a.attentions, b.attentions)


@pytest.mark.parametrize("encoder,attention", itertools.product(["lstm", "cnn", "average"],
                                                                ["additive", "dot", "uniform"]))
def test_pads_get_zero_attention_and_do_not_change_outputs(encoder, attention):
    model = AttnClassifierForSequenceClassification(make_config(encoder, attention, "base")).eval()
    ids, mask = batch()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        assert torch.all(out.attentions[mask == 0] == 0)
        torch.testing.assert_close(out.attentions.sum(-1), torch.ones(4))
        # the same sentences alone, without any padding, give the same logits and attention
        for row in range(4):
            n = int(mask[row].sum())
            alone = model(input_ids=ids[row:row + 1, :n])
            torch.testing.assert_close(alone.logits, out.logits[row:row + 1], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(alone.attentions[0], out.attentions[row, :n], rtol=1e-5, atol=1e-6)


def test_uniform_attention_is_one_over_length():
    model = AttnClassifierForSequenceClassification(make_config("lstm", "uniform", "base")).eval()
    ids, mask = batch()
    att = model(input_ids=ids, attention_mask=mask).attentions
    expected = mask / mask.sum(-1, keepdim=True)
    torch.testing.assert_close(att, expected.float())
    assert not any(n.startswith("attention") for n, _ in model.named_parameters())


def test_dot_query_initialised_standard_normal():
    torch.manual_seed(0)
    config = AttnClassifierConfig(vocab_size=VOCAB, embedding_dim=50, hidden_size=250, attention="dot")
    q = AttnClassifierForSequenceClassification(config).attention.query.detach()
    assert q.shape == (500,)
    assert abs(q.std().item() - 1.0) < 0.1  # Kaiming-uniform would give ~0.08


@pytest.mark.parametrize("num_layers", [1, 2])
def test_lstm_encoder_equals_packed_bidirectional_lstm(num_layers):
    config = AttnClassifierConfig(vocab_size=VOCAB, embedding_dim=6, hidden_size=5, num_layers=num_layers)
    ours = LSTMEncoder(config)
    ref = torch.nn.LSTM(6, 5, num_layers=num_layers, bidirectional=True, batch_first=True)
    with torch.no_grad():
        for layer in range(num_layers):
            for suffix, mod in (("", ours.forward_layers[layer]), ("_reverse", ours.backward_layers[layer])):
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(ref, f"{name}_l{layer}{suffix}").copy_(getattr(mod, f"{name}_l0"))
    x = torch.randn(3, 7, 6)
    lengths = torch.tensor([7, 3, 1])
    mask = torch.arange(7)[None] < lengths[:, None]
    packed, _ = ref(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    expected, _ = pad_packed_sequence(packed, batch_first=True, total_length=7)
    torch.testing.assert_close(ours(x, mask), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("encoder,variant,num_labels", [("lstm", "base", 2), ("cnn", "concat", 2),
                                                        ("average", "residual", 2), ("lstm", "base", 4)])
def test_override_and_decoder_only_paths_equal_full_forward(encoder, variant, num_labels):
    model = AttnClassifierForSequenceClassification(
        make_config(encoder, "additive", variant, num_labels=num_labels)).eval()
    ids, mask = batch()
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        assert full.logits.shape == (4, num_labels)
        overridden = model(input_ids=ids, attention_mask=mask, attention_weights=full.attentions)
        decoded = model.decode(full.hidden_states, full.attentions)
        fast = model.logits_from_token_logits(model.token_logits(full.hidden_states), full.attentions)
        # several α per instance at once: (B, k, T)
        stacked = model.logits_from_token_logits(model.token_logits(full.hidden_states),
                                                 full.attentions[:, None].expand(4, 3, -1))
    torch.testing.assert_close(overridden.logits, full.logits)
    torch.testing.assert_close(decoded, full.logits)
    torch.testing.assert_close(fast, full.logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(stacked[:, 2], full.logits, rtol=1e-5, atol=1e-6)


def test_override_changes_prediction_and_is_used():
    model = AttnClassifierForSequenceClassification(make_config("lstm", "additive", "base")).eval()
    ids, mask = batch()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        one_hot = torch.zeros_like(out.attentions)
        one_hot[:, 0] = 1.0
        forced = model(input_ids=ids, attention_mask=mask, attention_weights=one_hot)
        expected = model.expand_logits(model.decoder(out.hidden_states[:, 0]))
    torch.testing.assert_close(forced.logits, expected)
    assert torch.equal(forced.attentions, one_hot)


def test_binary_head_is_one_logit_and_softmax_is_sigmoid():
    model = AttnClassifierForSequenceClassification(make_config("lstm", "additive", "base")).eval()
    assert model.decoder.out_features == 1
    ids, mask = batch()
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
    assert torch.all(logits[:, 0] == 0)
    torch.testing.assert_close(logits.softmax(-1)[:, 1], torch.sigmoid(logits[:, 1]))


def test_class_weighted_loss_matches_hand_computation():
    config = make_config("average", "additive", "base", class_weights=[1.0, 3.0])
    model = AttnClassifierForSequenceClassification(config).eval()
    ids, mask = batch()
    labels = torch.tensor([0, 1, 1, 0])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
    p = torch.sigmoid(out.logits[:, 1])
    bce = -(labels * p.log() + (1 - labels) * (1 - p).log())
    expected = (bce * torch.tensor([1.0, 3.0, 3.0, 1.0])).mean()
    torch.testing.assert_close(out.loss, expected)


def test_tying_loss_is_mean_squared_distance_over_real_tokens():
    model = AttnClassifierForSequenceClassification(
        make_config("lstm", "additive", "tying", tying_delta=10.0)).eval()
    ids, mask = batch()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, labels=torch.tensor([0, 1, 1, 0]),
                    output_hidden_states=True, output_embeddings=True)
    diffs = [((out.hidden_states[b, t] - out.embeddings[b, t]) ** 2).sum()
             for b in range(4) for t in range(9) if mask[b, t]]
    torch.testing.assert_close(out.regularization_loss, 10.0 * torch.stack(diffs).mean())


def test_mlm_decoder_is_tied_and_frozen():
    model = AttnClassifierForSequenceClassification(make_config("lstm", "additive", "mlm")).train()
    ids, mask = batch()
    loss = model.mlm_loss(ids, mask)
    loss.backward()
    # the only path from the MLM loss to the embedding matrix is through the encoder inputs
    assert model.embedding.weight.grad is not None
    grad_rows = model.embedding.weight.grad.abs().sum(-1).nonzero().flatten().tolist()
    used = set(ids[mask.bool()].tolist()) | {model.config.mask_token_id}
    assert set(grad_rows) <= used | set(range(3, VOCAB))  # random replacements may add rows
    assert len(grad_rows) < VOCAB  # a trainable decoder would touch every row


def test_config_errors_are_clear():
    with pytest.raises(ValueError, match="encoder must be one of"):
        AttnClassifierConfig(encoder="gru")
    with pytest.raises(ValueError, match="2H = d"):
        AttnClassifierConfig(embedding_dim=50, hidden_size=128, variant="tying")
    assert AttnClassifierConfig(embedding_dim=50, variant="residual").hidden_size == 25
    assert AttnClassifierConfig(embedding_dim=300, variant="mlm").hidden_size == 150
    with pytest.raises(ValueError, match="class_weights"):
        AttnClassifierConfig(num_labels=3, class_weights=[1.0, 2.0])


def test_bad_inputs_raise_clear_errors():
    model = AttnClassifierForSequenceClassification(make_config("lstm", "additive", "base")).eval()
    ids, mask = batch()
    empty = mask.clone()
    empty[2] = 0
    with pytest.raises(ValueError, match="at least one real token"):
        model(input_ids=ids, attention_mask=empty)
    left = mask.flip(-1)
    with pytest.raises(ValueError, match="right-padded|at least one"):
        model(input_ids=ids, attention_mask=left)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(input_ids=ids + VOCAB, attention_mask=mask)
    with pytest.raises(ValueError, match="labels must be in"):
        model(input_ids=ids, attention_mask=mask, labels=torch.tensor([0, 1, 2, 0]))
    with pytest.raises(ValueError, match="attention_weights has shape"):
        model(input_ids=ids, attention_mask=mask, attention_weights=torch.ones(4, 3))


def test_forward_rejects_nonfinite_embeds_fractional_mask_and_too_long_input():
    """NaN/inf inputs_embeds, a mask that is not 0/1 and more real tokens than
    config.max_tokens raise ValueError (before: NaN logits or silently accepted)."""
    model = AttnClassifierForSequenceClassification(make_config("lstm", "additive", "base",
                                                                max_tokens=9)).eval()
    ids, mask = batch()  # width 9 = max_tokens: accepted
    model(input_ids=ids, attention_mask=mask)
    embeds = model.get_input_embeddings()(ids).detach()
    model(inputs_embeds=embeds, attention_mask=mask)
    for bad in (float("nan"), float("inf"), -float("inf")):
        poisoned = embeds.clone()
        poisoned[1, 2, 3] = bad
        with pytest.raises(ValueError, match=r"inputs_embeds contains NaN or inf.*\(1, 2, 3\)"):
            model(inputs_embeds=poisoned, attention_mask=mask)
    for value in (0.5, 2, -1):
        soft = mask.clone().float()
        soft[0, 1] = value
        with pytest.raises(ValueError, match=f"attention_mask must hold only 0.*got {value}"):
            model(input_ids=ids, attention_mask=soft)
    model(input_ids=ids, attention_mask=mask.float())  # 0.0/1.0 floats and bools are masks
    model(input_ids=ids, attention_mask=mask.bool())
    long_ids = torch.randint(3, VOCAB, (2, 12))
    with pytest.raises(ValueError, match="input_ids has 12 tokens, more than the model's max_tokens=9"):
        model(input_ids=long_ids)
    with pytest.raises(ValueError, match="inputs_embeds has 12 tokens.*max_tokens=9"):
        model(inputs_embeds=model.get_input_embeddings()(long_ids).detach())
    # padding wider than the limit is fine as long as no row has more than max_tokens real tokens
    wide_mask = torch.zeros(2, 12, dtype=torch.long)
    wide_mask[:, :9] = 1
    model(input_ids=long_ids * wide_mask, attention_mask=wide_mask)
    wide_mask[1, 9] = 1
    with pytest.raises(ValueError, match="10 tokens, more than the model's max_tokens=9"):
        model(input_ids=long_ids * wide_mask, attention_mask=wide_mask)


def test_pair_forward_rejects_nonfinite_embeds_fractional_mask_and_too_long_input():
    from hf_attn.models.configuration_hf_attn_pair import AttnPairClassifierConfig
    from hf_attn.models.modeling_hf_attn_pair import AttnPairClassifierForSequenceClassification

    config = AttnPairClassifierConfig(vocab_size=VOCAB, embedding_dim=16, hidden_size=8, num_labels=3,
                                      max_tokens=9)
    model = AttnPairClassifierForSequenceClassification(config).eval()
    ids, mask = batch()
    model(input_ids=ids, attention_mask=mask, hypothesis_input_ids=ids, hypothesis_attention_mask=mask)
    embeds = model.get_hypothesis_embeddings()(ids).detach()
    embeds[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="hypothesis_inputs_embeds contains NaN or inf"):
        model(input_ids=ids, attention_mask=mask, hypothesis_inputs_embeds=embeds,
              hypothesis_attention_mask=mask)
    soft = mask.float()
    soft[0, 0] = 0.3
    with pytest.raises(ValueError, match="hypothesis_attention_mask must hold only 0"):
        model(input_ids=ids, attention_mask=mask, hypothesis_input_ids=ids, hypothesis_attention_mask=soft)
    with pytest.raises(ValueError, match="attention_mask must hold only 0"):
        model(input_ids=ids, attention_mask=soft, hypothesis_input_ids=ids, hypothesis_attention_mask=mask)
    long_ids = torch.randint(3, VOCAB, (4, 10))
    with pytest.raises(ValueError, match="hypothesis_input_ids has 10 tokens.*max_tokens=9"):
        model(input_ids=ids, attention_mask=mask, hypothesis_input_ids=long_ids)
    with pytest.raises(ValueError, match="^input_ids has 10 tokens.*max_tokens=9"):
        model(input_ids=long_ids, hypothesis_input_ids=ids, hypothesis_attention_mask=mask)


def test_from_pretrained_rejects_a_config_of_another_model_type(tmp_path):
    model = AttnClassifierForSequenceClassification(make_config("lstm", "additive", "base"))
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["model_type"] = "bert"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(Exception):
        AttnClassifierForSequenceClassification.from_pretrained(tmp_path)


def test_trust_remote_code_loads_without_hf_attn(tmp_path):
    model = AttnClassifierForSequenceClassification(make_config("lstm", "dot", "concat")).eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "modeling_hf_attn.py").exists()
    assert (tmp_path / "configuration_hf_attn.py").exists()
    assert "auto_map" in json.loads((tmp_path / "config.json").read_text())
    ids, mask = batch()
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits
    logits = remote_code_logits(tmp_path, {"input_ids": ids, "attention_mask": mask}, str(tmp_path))
    assert torch.equal(logits, expected)


def test_auto_config_is_registered():
    config = AutoConfig.for_model("hf_attn", vocab_size=10)
    assert isinstance(config, AttnClassifierConfig)
