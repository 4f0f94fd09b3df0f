"""Transformers classifiers through the adapter engine: the J&W methods (gradient, leave-one-out,
permutation, adversary) against slow explicit references, rollout, word-piece merging, the battery
runner, training, the CLI and the explorer, on a tiny random BertConfig with a WordPiece tokenizer
built here (no download). The architecture matrix of the engine itself is tests/test_adapters.py."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

from hf_attn.adapters import adapter_for
from hf_attn.adapters.interface import Intervention
from hf_attn.batteries.jw import battery as jwt
from hf_attn.batteries.jw.summary import strip_arrays
from hf_attn.core.measures import jsd, tvd
from hf_attn.methods.adversary import adversarial_rows, restrict_to_content
from hf_attn.methods.gradient import attention_fixed_gradient
from hf_attn.methods.leave_one_out import deletion_importance
from hf_attn.methods.permutation import content_permutations, permuted_attention_tvd
from hf_attn.methods.rollout import attention_rollout
from hf_attn.models import pretrained
from hf_attn.adapters import transformer_attention as ta
from hf_attn.adapters.transformer_attention import merge_word_pieces
from conftest import needs_minilm

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "a", "good", "bad", "movie", "film", "not", "very", "fun", "plot", "act", "dull",
         "##s", "##ing", "##ly", "great", "boring", "and", "but", "story"]
TEXTS = ["the good movies", "not very fun acting , but a great story", "dull",
         "a boring film and a dull plot", "very good acting"]


def bert_tokenizer() -> PreTrainedTokenizerFast:
    """The tiny WordPiece tokenizer of these tests (BERT's normaliser, pre-tokeniser and
    [CLS] … [SEP] template; no download). Shared by the other BERT-family test files."""
    vocab = {t: i for i, t in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


@pytest.fixture(scope="module")
def tokenizer():
    return bert_tokenizer()


def tiny_model(tokenizer, layers=2, seed=0, dtype=torch.float32, **config_extra):
    """A tiny random BERT classifier (``config_extra``: more BertConfig fields, e.g. label names)."""
    torch.manual_seed(seed)
    # a large init makes the attention peaky and the output sensitive to it (a meaningful test)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=2, initializer_range=0.5,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **config_extra)
    ta.register_override_attention()
    return BertForSequenceClassification(config).eval().to(dtype)


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_model(tokenizer)


@pytest.fixture(scope="module")
def adapter(model, tokenizer):
    return adapter_for(model, tokenizer, device="cpu")


@pytest.fixture(scope="module")
def batch(tokenizer):
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


def full_logits(adapter, encoded, weights, head=None):
    """Logits through the full forward with the last layer's query rows replaced (no fast path)."""
    intervention = Intervention(layer=adapter.layer, query=encoded.query, weights=weights, head=head)
    with torch.no_grad():
        return adapter._model_call(encoded.input_ids, encoded.attention_mask, None, intervention).logits


def test_tokenizer_pads_and_splits_pieces(tokenizer, batch):
    ids, mask = batch
    assert (mask.sum(1) < ids.shape[1]).any()  # the batch is padded
    assert tokenizer("the good movies").word_ids() == [None, 0, 1, 2, 2, None]


def test_rollout_hand_computed():
    """Abnar & Zuidema 2020 on 2 layers, 2 tokens (+ a pad that must not matter)."""
    # two heads whose mean is [[.5, .5], [.2, .8]]
    layer1 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.4, 0.6]]]).unsqueeze(0)
    layer2 = torch.tensor([[[0.9, 0.1], [0.4, 0.6]]] * 2).unsqueeze(0)
    # Ã1 = [[.75,.25],[.1,.9]], Ã2 = [[.95,.05],[.2,.8]], R = Ã2 Ã1
    expected = torch.tensor([[0.7175, 0.2825], [0.23, 0.77]])
    torch.testing.assert_close(attention_rollout((layer1, layer2))[0], expected, atol=1e-6, rtol=0)
    padded = [torch.nn.functional.pad(a, (0, 1, 0, 1)) for a in (layer1, layer2)]
    for a in padded:
        a[..., 2, 2] = 1.0  # a pad row's own softmax output must be ignored
    rolled = attention_rollout(padded, torch.tensor([[1, 1, 0]]))[0]
    torch.testing.assert_close(rolled[:2, :2], expected, atol=1e-6, rtol=0)
    assert rolled[0, 2] == 0


def test_explained_rows_select_layer_and_head(model, tokenizer, batch):
    ids, mask = batch
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    finally:
        ta.register_override_attention()
        model.set_attn_implementation(ta.ATTN_IMPLEMENTATION)
    last = adapter_for(model, tokenizer, device="cpu")
    encoded = last.encode(TEXTS)
    torch.testing.assert_close(last.forward(encoded).attention, out.attentions[-1][:, :, 0].mean(1))
    first_head1 = adapter_for(model, tokenizer, layer=0, heads=1, device="cpu")
    torch.testing.assert_close(first_head1.forward(encoded).attention, out.attentions[0][:, 1, 0])
    with pytest.raises(ValueError, match="heads=7"):
        adapter_for(model, tokenizer, heads=7, device="cpu")


def test_merge_word_pieces(tokenizer):
    enc = tokenizer("the good movies")
    words = enc.word_ids()  # [None, 0, 1, 2, 2, None]
    values = np.array([0.3, 0.1, 0.2, 0.15, 0.05, 0.2])
    np.testing.assert_allclose(merge_word_pieces(values, words), [0.1, 0.2, 0.2])
    stacked = np.stack([values, values[::-1]])
    np.testing.assert_allclose(merge_word_pieces(stacked, words), [[0.1, 0.2, 0.2], [0.05, 0.15, 0.3]])
    assert ta.words_of(enc["input_ids"], words, tokenizer) == ["the", "good", "movies"]


@pytest.mark.parametrize("heads", ["mean", 1])
def test_gradient_matches_finite_differences(tokenizer, heads):
    """J&W Alg. 1: g_t = |Σ_d ∂ŷ/∂e_t,d e_t,d| is the derivative of ŷ along e_t (scaling e_t by 1 + h),
    with the explained [CLS] row held fixed; float64 central differences."""
    model = tiny_model(tokenizer, dtype=torch.float64)
    adapter = adapter_for(model, tokenizer, heads=heads, device="cpu")
    encoded = adapter.encode([TEXTS[1]])
    gradient = attention_fixed_gradient(adapter, encoded)
    embeddings = adapter.embeddings(encoded).detach()
    mask = encoded.attention_mask
    forward = adapter.forward(encoded)
    own = forward.head_rows  # held fixed: what "detached" means
    predicted = int(forward.logits.argmax(-1))
    fixed = (dict(layer=1, query=encoded.query, weights=own) if heads == "mean"
             else dict(layer=1, query=encoded.query, weights=own[:, heads], head=heads))
    h = 1e-6
    with torch.no_grad():
        for t in range(encoded.input_ids.shape[1]):
            scale = torch.ones(1, mask.shape[1], 1, dtype=torch.float64)
            scale[0, t] += h
            up = adapter._model_call(None, mask, embeddings * scale, Intervention(**fixed)).logits.softmax(-1)
            scale[0, t] -= 2 * h
            down = adapter._model_call(None, mask, embeddings * scale, Intervention(**fixed)).logits.softmax(-1)
            numeric = abs(float(up[0, predicted] - down[0, predicted]) / (2 * h))
            expected = numeric if encoded.content[0, t] else 0.0  # special tokens are not ranked
            assert gradient[0, t].item() == pytest.approx(expected, rel=1e-5, abs=1e-9)
    # without the detachment the gradient differs: the detachment is real
    embeddings.requires_grad_(True)
    p = adapter.logits_from_embeddings(encoded, embeddings).softmax(-1)[0, predicted]
    (free,) = torch.autograd.grad(p, embeddings)
    free_importance = (free * embeddings).sum(-1).abs() * encoded.content
    assert not torch.allclose(free_importance.float(), gradient, atol=1e-8)


def test_leave_one_out_matches_slow_loop(adapter):
    encoded = adapter.encode(TEXTS)
    probabilities = adapter.logits(encoded).softmax(-1)
    fast = deletion_importance(adapter, encoded, probabilities, token_budget=40)  # several chunks
    ids, mask = encoded.input_ids, encoded.attention_mask
    for b in range(len(ids)):
        n = int(mask[b].sum())
        for t in range(ids.shape[1]):
            if not encoded.content[b, t]:
                assert fast[b, t] == 0
                continue
            kept = torch.cat([ids[b, :t], ids[b, t + 1:n]]).unsqueeze(0)
            with torch.no_grad():
                p = adapter.model(input_ids=kept, attention_mask=torch.ones_like(kept)).logits.softmax(-1)
            assert fast[b, t].item() == pytest.approx(float(tvd(p[0], probabilities[b])), abs=1e-5)


def test_permutations_and_permutation_tvd(adapter):
    encoded = adapter.encode(TEXTS)
    ids, content = encoded.input_ids, encoded.content
    perms = content_permutations(content, 7, torch.Generator().manual_seed(0))
    assert perms.shape == (len(ids), 7, ids.shape[1])
    positions = torch.arange(ids.shape[1])
    for b in range(len(ids)):
        for p in range(7):
            row = perms[b, p]
            assert sorted(row.tolist()) == positions.tolist()  # a permutation
            assert torch.equal(row[~content[b]], positions[~content[b]])  # specials and pads fixed
            assert content[b][row[content[b]]].all()  # content maps to content
    forward = adapter.forward(encoded)
    result = permuted_attention_tvd(adapter, encoded, forward, permutations=perms)
    assert result.shape == (len(ids), 7)
    identity = positions.expand(len(ids), 1, -1)
    assert permuted_attention_tvd(adapter, encoded, forward, permutations=identity).abs().max() < 1e-6
    # one permutation checked against the full forward with the override
    rows = forward.head_rows.gather(-1, perms[:, 3].unsqueeze(1).expand_as(forward.head_rows))
    full = full_logits(adapter, encoded, rows).softmax(-1)
    torch.testing.assert_close(result[:, 3], tvd(full, forward.probabilities), atol=1e-5, rtol=0)
    assert result.max() > 1e-3  # permuting does something in this model


@pytest.mark.parametrize("heads", ["mean", 0])
def test_adversary_shapes_and_epsilon(model, tokenizer, heads):
    adapter = adapter_for(model, tokenizer, heads=heads, device="cpu")
    encoded = adapter.encode(TEXTS)
    ids, mask, content = encoded.input_ids, encoded.attention_mask, encoded.content
    forward = adapter.forward(encoded)
    eps = 0.01
    adv = adversarial_rows(adapter, encoded, forward, k=3, eps=eps, steps=60, lr=0.05,
                           generator=torch.Generator().manual_seed(0))
    b, t = ids.shape
    heads_replaced = 2 if heads == "mean" else 1
    assert adv.attention.shape == (b, 3, t) and adv.head_rows.shape == (b, 3, heads_replaced, t)
    assert adv.tvd.shape == adv.jsd.shape == adv.feasible.shape == (b, 3) and adv.eps_max_jsd.shape == (b,)
    torch.testing.assert_close(adv.head_rows.sum(-1), torch.ones(b, 3, heads_replaced), atol=1e-5, rtol=0)
    special = (mask.bool() & ~content).view(b, 1, 1, t)
    own = forward.head_rows if heads == "mean" else forward.head_rows[:, :1]
    torch.testing.assert_close(adv.head_rows * special, (own.unsqueeze(1) * special).expand_as(adv.head_rows))
    assert adv.feasible.any() and (adv.jsd[adv.feasible] > 0.01).any()
    # attention / JSD compare the explained row over the content pieces, renormalised
    torch.testing.assert_close(adv.attention.sum(-1), torch.ones(b, 3), atol=1e-5, rtol=0)
    assert (adv.attention * (~content).unsqueeze(1)).abs().max() == 0
    explained = restrict_to_content(forward.attention, content)
    torch.testing.assert_close(adv.jsd, jsd(adv.attention, explained.unsqueeze(1)), atol=1e-6, rtol=0)
    mean_rows = adv.head_rows.mean(2)
    torch.testing.assert_close(adv.attention, restrict_to_content(mean_rows, content.unsqueeze(1)))
    assert (adv.jsd_row <= adv.jsd + 1e-6).all()  # the fixed special mass can only shrink the divergence
    # the reported outputs are the model's: recomputed through the full forward with the override
    for i in range(3):
        weights, head = (adv.head_rows[:, i], None) if heads == "mean" else (adv.head_rows[:, i, 0], 0)
        p = full_logits(adapter, encoded, weights, head).softmax(-1)
        torch.testing.assert_close(tvd(p, forward.probabilities), adv.tvd[:, i], atol=1e-5, rtol=0)
        assert (tvd(p, forward.probabilities)[adv.feasible[:, i]] <= eps + 1e-5).all()
    best = torch.where(adv.feasible, adv.jsd, torch.zeros_like(adv.jsd)).max(-1).values
    torch.testing.assert_close(adv.eps_max_jsd, best)


def test_battery_runner_writes_results(model, tokenizer, tmp_path):
    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    settings = jwt.JWSettings(num_permutations=8, k=2, steps=10, batch_size=2, adversary_batch_size=3)
    out = tmp_path / "out"
    from hf_attn.runs.jw import jw_battery_runner

    record = jw_battery_runner(str(folder), str(out), texts=TEXTS, labels=[1, 0, 0, 0, 1],
                                               settings=settings, dataset="toy", label_names=["neg", "pos"],
                                               progress=False)
    on_disk = json.loads((out / "results.json").read_text())
    for key in ("battery", "paper", "model_dir", "dataset", "split", "label_names", "model", "parameters",
                "summary", "published", "figures", "instances_file", "processes", "versions"):
        assert key in on_disk
    s = on_disk["summary"]
    for key in ("tau_gradient", "tau_loo", "tau_gradient_loo", "permutation", "adversary", "tau_rollout",
                "per_layer", "accuracy", "seconds"):
        assert key in s
    assert len(s["per_layer"]) == 2 and s["num_instances"] == len(TEXTS)
    assert (out / "fig_tau_per_layer.png").stat().st_size > 0
    assert "error" not in record["figures"]
    lines = (out / "instances.jsonl").read_text().splitlines()
    assert len(lines) == len(TEXTS)
    first = json.loads(lines[0])
    assert first["tokens"] == ["the", "good", "movie", "##s"] and first["word_ids"] == [0, 1, 2, 2]
    assert sum(first["word_attention"]) == pytest.approx(sum(first["attention"]))


def _same_results(a, b) -> None:
    a, b = dict(vars(a)), dict(vars(b))
    assert a.keys() == b.keys()
    assert a.pop("word_ids") == b.pop("word_ids")
    ka, kb = a.pop("kendall"), b.pop("kendall")
    assert ka.keys() == kb.keys() and all(np.array_equal(x, y, equal_nan=True)
                                          for n in ka for x, y in zip(ka[n], kb[n], strict=True))
    for name in a:
        if a[name] is None:
            assert b[name] is None
            continue
        for x, y in zip(a[name], b[name], strict=True):
            x, y = np.asarray(x), np.asarray(y)
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y, equal_nan=True), name


def test_battery_resumes_from_its_cache_and_recomputes_only_missing_batches(model, tokenizer, tmp_path, monkeypatch):
    """A killed run (batches missing from the cache) resumes: the finished batches are read back, only
    the missing ones are computed, and the results equal an uncached run bit for bit."""
    adapter = adapter_for(model, tokenizer)
    settings = jwt.JWSettings(num_permutations=6, k=2, steps=6, batch_size=2, adversary_batch_size=2)
    labels = [1, 0, 0, 0, 1]
    plain, plain_summary = jwt.run_jw_battery(adapter, TEXTS, labels, settings, progress=False)
    cache = tmp_path / "cache"
    cached, _ = jwt.run_jw_battery(adapter, TEXTS, labels, settings, progress=False, cache_dir=str(cache))
    _same_results(plain, cached)
    shards = sorted(cache.glob("shard-*.npz"))
    assert len(shards) == 3 + 3  # 5 texts in batches of 2: three main batches, three adversary batches
    for path in (shards[0], shards[-1]):
        path.unlink()
    calls = []
    original = jwt.deletion_importance
    monkeypatch.setattr(jwt, "deletion_importance", lambda *a, **k: calls.append(1) or original(*a, **k))
    resumed, resumed_summary = jwt.run_jw_battery(adapter, TEXTS, labels, settings, progress=False,
                                                              cache_dir=str(cache))
    assert len(calls) == 1  # one main batch recomputed, two read back
    _same_results(plain, resumed)
    assert json.dumps(strip_arrays(resumed_summary | {"seconds": 0}), sort_keys=True) == \
        json.dumps(strip_arrays(plain_summary | {"seconds": 0}), sort_keys=True)
    # other settings (or other texts) never read these batches
    other = jwt.JWSettings(num_permutations=7, k=2, steps=6, batch_size=2, adversary_batch_size=2)
    calls.clear()
    jwt.run_jw_battery(adapter, TEXTS, labels, other, progress=False, cache_dir=str(cache))
    assert len(calls) == 3
    calls.clear()
    jwt.run_jw_battery(adapter, TEXTS[::-1], labels[::-1], settings, progress=False, cache_dir=str(cache))
    assert len(calls) == 3


def test_battery_runner_cache_is_removed_when_finished_and_can_be_switched_off(model, tokenizer, tmp_path,
                                                                                monkeypatch):
    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    settings = jwt.JWSettings(num_permutations=4, k=2, steps=4, batch_size=2, adversary_batch_size=3)
    from hf_attn.runs import jw as runs_jw

    seen = []
    original = runs_jw.run_jw_battery
    monkeypatch.setattr(runs_jw, "run_jw_battery",
                        lambda *a, **k: seen.append(a[5] if len(a) > 5 else k.get("cache_dir")) or original(*a, **k))
    for use_cache, expected in ((True, str(tmp_path / "out" / "cache")), (False, None)):
        runs_jw.jw_battery_runner(str(folder), str(tmp_path / "out"), texts=TEXTS, labels=[1, 0, 0, 0, 1],
                                              settings=settings, dataset="toy", progress=False, use_cache=use_cache)
        assert seen[-1] == expected
        assert not (tmp_path / "out" / "cache").exists()


@needs_minilm
def test_resolve_base_model_finds_the_packaged_minilm():
    folder = ta.resolve_base_model("minilm-l6")
    assert os.path.isfile(os.path.join(folder, "config.json"))
    assert os.path.isfile(os.path.join(folder, "tokenizer.json"))


def test_resolve_base_model(tmp_path, monkeypatch):
    (tmp_path / "m").mkdir()
    with pytest.raises(ValueError, match="config.json"):
        ta.resolve_base_model(str(tmp_path / "m"))
    (tmp_path / "m" / "config.json").write_text("{}")
    assert ta.resolve_base_model(str(tmp_path / "m")) == str(tmp_path / "m")
    assert ta.resolve_base_model("someone/bert-sst2") == "someone/bert-sst2"
    monkeypatch.setattr(pretrained.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ta.MissingExtraError, match=r"hf_attn\[bert\]"):
        ta.resolve_base_model("minilm-l6")


def test_freeze_layers(tokenizer):
    from hf_attn.training.transformer import freeze_bottom

    model = tiny_model(tokenizer)
    counts = freeze_bottom(model, 1)
    assert not any(p.requires_grad for p in model.bert.embeddings.parameters())
    assert not any(p.requires_grad for p in model.bert.encoder.layer[0].parameters())
    assert all(p.requires_grad for p in model.bert.encoder.layer[1].parameters())
    assert all(p.requires_grad for p in model.classifier.parameters())
    assert counts["frozen"] + counts["trainable"] == sum(p.numel() for p in model.parameters())
    with pytest.raises(ValueError):
        freeze_bottom(tiny_model(tokenizer), 3)


def test_train_transformer_classifier_tiny(model, tokenizer, tmp_path):
    """A real Trainer run on a toy task from a local folder: run.json, the saved folder loads with the
    override attention, and --freeze-layers 1 leaves the embeddings and layer 0 untouched."""
    from datasets import Dataset, DatasetDict

    from hf_attn.data.tasks import TaskData
    from hf_attn.training.transformer import read_transformer_run, train_transformer_classifier

    base = tmp_path / "base"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    rows = {"text": TEXTS * 4, "label": [1, 0, 0, 0, 1] * 4}
    task = TaskData(DatasetDict({s: Dataset.from_dict(rows) for s in ("train", "validation", "test")}),
                    ["negative", "positive"], "toy")
    out = tmp_path / "run"
    record = train_transformer_classifier(str(base), task, str(out), epochs=1, freeze_layers=1, seed=0,
                                          batch_size=8, learning_rate=1e-2, progress=False)
    assert read_transformer_run(str(out))["test"]["accuracy"] == record["test"]["accuracy"]
    assert set(record["seconds"]) == {"train", "total"} and not (out / "checkpoints").exists()
    trained, _ = ta.load_transformer_classifier(str(out))
    assert trained.config._attn_implementation == ta.ATTN_IMPLEMENTATION
    before, after = model.state_dict(), trained.state_dict()
    embeddings = "bert.embeddings.word_embeddings.weight"
    assert torch.equal(before[embeddings], after[embeddings])
    assert torch.equal(before["bert.encoder.layer.0.attention.self.query.weight"],
                       after["bert.encoder.layer.0.attention.self.query.weight"])
    assert not torch.equal(before["classifier.weight"], after["classifier.weight"])


def test_cli_train_and_analyze_a_bert_family_folder(model, tokenizer, tmp_path, capsys):
    """`hf-attn analyze DIR --battery jw` on a BERT-family folder goes to the transformer battery with
    the typed J&W settings (--jw-layer/--jw-heads pick the attention; --dataset the data of a folder
    without run.json); `hf-attn train --freeze-layers` without --base-model is refused."""
    from hf_attn.cli import main

    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "validation", "test"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n"
                                                     for i, t in enumerate(TEXTS)))
    out = tmp_path / "out"
    code = main(["analyze", str(folder), "--battery", "jw", "--dataset", str(data), "--output-dir", str(out),
                 "--jw-layer", "0", "--jw-heads", "1", "--jw-permutations", "4", "--jw-adversaries", "2",
                 "--jw-steps", "5", "--quiet", "--threads", "1"])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert results["parameters"]["layer"] == 0 and results["parameters"]["heads"] == 1
    assert results["summary"]["num_instances"] == len(TEXTS)
    assert main(["analyze", str(folder), "--battery", "jw", "--output-dir", str(tmp_path / "o2"),
                 "--jw-heads", "all"]) == 2
    assert "--jw-heads must be 'mean' or a head index" in capsys.readouterr().err
    assert main(["train", "--freeze-layers", "2", "--output-dir", str(tmp_path / "t")]) == 2
    assert "--freeze-layers goes with --base-model" in capsys.readouterr().err


def test_explorer_explains_a_bert_family_sentence(model, tokenizer, tmp_path):
    """The Space's explain_sentence on a BERT-family folder: J&W's measures over the word pieces of the
    last layer's [CLS] attention, the same SentenceExplanation as for hf_attn models (no per-token p̂_t
    row), loaded without remote code; the attention shown is the model's own."""
    from hf_attn.app.space import explain_sentence, is_transformer_model, load_model
    from hf_attn.explanation.render import heatmap_html, summary_markdown

    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    loaded, tok = load_model(str(folder))
    assert is_transformer_model(loaded)
    e = explain_sentence(loaded, tok, "the good movies", num_permutations=6, k=2, steps=5)
    assert e.tokens == ["the", "good", "movie", "##s"] and e.typed == ["the", "good", "movie", "s"]
    assert e.spans == [[0, 3], [4, 8], [9, 14], [14, 15]]
    np.testing.assert_allclose(e.attention.sum(), 1.0, atol=1e-6)
    ids = tok("the good movies", return_tensors="pt")
    with torch.no_grad():
        out = loaded(**ids, output_attentions=True)
    own = out.attentions[-1][0, :, 0].mean(0)[1:-1]  # [CLS] row, mean over heads, content pieces
    np.testing.assert_allclose(e.attention, (own / own.sum()).numpy(), atol=1e-5)
    np.testing.assert_allclose(e.probabilities, out.logits.softmax(-1)[0].numpy(), atol=1e-5)
    assert len(e.permutation_tvd) == 6 and len(e.adversaries_tvd) == 2 and np.isnan(e.token_probability).all()
    html_text = heatmap_html(e)
    assert 'data-row="attention"' in html_text and 'data-row="token_probability"' not in html_text
    # which row is explained comes from the adapter's facts: BERT's head reads the first token ([CLS])
    assert "the first token's row" in summary_markdown(e)


def test_other_architectures_run_and_unsupported_ones_are_refused_with_the_reason(tmp_path, capsys):
    """A DistilBERT folder is a transformers classifier the engine runs; a Nyströmformer folder is
    refused at analyze with the reason (its attention bypasses transformers' attention interface),
    exit 2, one line; hf_attn folders are told apart as before."""
    from transformers import (DistilBertConfig, DistilBertForSequenceClassification, NystromformerConfig,
                              NystromformerForSequenceClassification)

    from hf_attn.batteries.data import is_transformer_model_dir
    from hf_attn.cli import main

    tokenizer = bert_tokenizer()
    DistilBertForSequenceClassification(DistilBertConfig(vocab_size=len(tokenizer), dim=16, n_layers=1, n_heads=2,
                                                         hidden_dim=32)).save_pretrained(tmp_path / "distil")
    assert is_transformer_model_dir(str(tmp_path / "distil"))
    deberta = tmp_path / "nystromformer"  # approximate attention in its own module, with no hook in hf_attn
    NystromformerForSequenceClassification(NystromformerConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        num_landmarks=4, segment_means_seq_len=40, max_position_embeddings=40)).save_pretrained(deberta)
    tokenizer.save_pretrained(deberta)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n" for i, t in enumerate(TEXTS)))
    capsys.readouterr()  # the saving above printed progress bars
    code = main(["analyze", str(deberta), "--battery", "jw", "--dataset", str(data), "--output-dir",
                 str(tmp_path / "out"), "--quiet"])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if "Loading weights" not in line]
    assert code == 2 and len(err) == 1
    assert "does not route its attention through transformers' attention interface" in err[0]
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text('{"model_type": "hf_attn"}')
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text('{"model_type": "bert"}')
    assert not is_transformer_model_dir(str(tmp_path / "hf")) and is_transformer_model_dir(str(tmp_path / "bert"))


@pytest.mark.parametrize("damage", ["missing", "nan"])
def test_damaged_classifier_weights_are_refused_naming_the_tensor(model, tokenizer, tmp_path, damage):
    """A transformers folder whose weights lack a tensor (it would be random) or hold NaN is refused
    when loaded, naming the tensor; the Explainer and the batteries load through the same check."""
    from safetensors.torch import load_file, save_file

    from hf_attn import Explainer

    folder = tmp_path / "damaged"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    weights = load_file(folder / "model.safetensors")
    if damage == "missing":
        del weights["classifier.weight"]
    else:
        weights["classifier.weight"] = torch.full_like(weights["classifier.weight"], float("nan"))
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    expected = "missing tensors classifier.weight" if damage == "missing" else "non-finite values .* classifier.weight"
    with pytest.raises(ValueError, match=expected):
        ta.load_transformer_classifier(str(folder))
    with pytest.raises(ValueError, match=expected):
        Explainer.from_pretrained(str(folder))


def test_transformer_run_stores_paths_relative_and_is_analysed_from_anywhere(model, tokenizer, tmp_path,
                                                                             monkeypatch):
    """run.json records a local dataset relative to the run folder and no machine path of the base
    model; `analyze` then finds the data from any working directory."""
    from hf_attn.cli import main
    from hf_attn.training.transformer import train_transformer_classifier

    base = tmp_path / "base"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "validation", "test"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps({"text": t, "label": i % 2}) + "\n"
                                                     for i, t in enumerate(TEXTS * 2)))
    out = tmp_path / "runs" / "tiny"
    train_transformer_classifier(str(base), str(data), str(out), epochs=1, batch_size=8, progress=False)
    run = json.loads((out / "run.json").read_text())
    assert run["settings"]["dataset"] == "../../data" and run["base_model_path"] is None
    assert str(tmp_path) not in (out / "run.json").read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["analyze", str(out), "--battery", "jw", "--output-dir", str(tmp_path / "jw"), "--jw-permutations",
                 "3", "--jw-adversaries", "2", "--jw-steps", "2", "--quiet", "--threads", "1"]) == 0
    assert json.loads((tmp_path / "jw" / "results.json").read_text())["summary"]["num_instances"] == len(TEXTS) * 2


def test_deleting_a_texts_only_token_is_undefined_not_a_crash():
    """A decoder whose tokenizer adds no special tokens (GPT-2) has nothing to run on once a
    one-token text loses its token: that Δŷ is NaN, the other rows are unaffected, and the battery
    skips the instance in τ (a single token has no ranking)."""
    from architectures import tiny_classifier

    model, tok = tiny_classifier("gpt2")
    adapter = adapter_for(model, tok)
    both = adapter.encode(["dull", "the good movies"])
    loo = deletion_importance(adapter, both)
    alone = deletion_importance(adapter, adapter.encode(["the good movies"]))
    assert torch.isnan(loo[0][both.content[0]]).all() and not torch.isnan(loo[1]).any()
    torch.testing.assert_close(loo[1][both.content[1]], alone[0][adapter.encode(["the good movies"]).content[0]])
    settings = jwt.JWSettings(num_permutations=4, k=2, steps=4)
    _, summary = jwt.run_jw_battery(adapter, ["dull", "the good movies", "very good acting"], [0, 1, 1],
                                                settings, progress=False)
    assert summary["tau_loo"]["overall"]["skipped"] == 1 and summary["tau_loo"]["overall"]["count"] == 2


def test_fine_tuning_uses_sdpa_where_the_architecture_has_it_and_eager_where_not(tmp_path):
    """MPNet has no SDPA path (transformers refuses it with a ValueError): its fine-tuning loads in
    eager attention; BERT keeps SDPA."""
    from transformers import BertConfig, BertForSequenceClassification, MPNetConfig, MPNetForSequenceClassification

    from hf_attn.training.transformer import _training_classifier

    small = dict(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    for name, config, cls, expected in (("mpnet", MPNetConfig(**small), MPNetForSequenceClassification, "eager"),
                                        ("bert", BertConfig(**small), BertForSequenceClassification, "sdpa")):
        cls(config).save_pretrained(tmp_path / name)
        model = _training_classifier(str(tmp_path / name), num_labels=2)
        assert type(model).__name__ == cls.__name__ and model.config.num_labels == 2
        assert model.config._attn_implementation == expected
