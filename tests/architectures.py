"""Tiny random sequence classifiers of many ``transformers`` architectures, with a tiny word-level
WordPiece tokenizer built here (no download): the test matrix of the adapters.

``ENCODERS`` read the first row ([CLS]-style pooling), ``DECODERS`` the last non-pad token.
``ENCODER_DECODERS`` (BART, mBART) read the decoder's end-of-sentence row; their explained attention is
the last decoder layer's cross-attention over the input tokens. ``OWN_ATTENTION`` compute attention in
their own modules and are intervened on through hooks there (``hf_attn/adapters/own_attention.py``).
Every model is small (hidden 16–32, 2–3 layers) and initialised with a large range so attention
is peaky and the logits are sensitive to it: a meaningful test of interventions."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import (AlbertConfig, AutoModelForSequenceClassification, BartConfig, BertConfig, BloomConfig,
                          DebertaConfig, DebertaV2Config, DistilBertConfig, ElectraConfig, GPT2Config, LlamaConfig,
                          MBartConfig, MistralConfig, ModernBertConfig, MPNetConfig, NystromformerConfig,
                          PreTrainedTokenizerFast, Qwen2Config, RobertaConfig, XLMRobertaConfig)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>"]
WORDS = ["the", "a", "good", "bad", "movie", "film", "not", "very", "fun", "plot", "act", "dull",
         "##s", "##ing", "##ly", "great", "boring", "and", "but", "story", "is", "gripping", "wonderful",
         "##ed", "wonderfully", "acted", ","]
TEXTS = ["the good movies", "not very fun acting , but a great story", "dull",
         "a boring film and a dull plot", "very good acting"]

ENCODERS = ["bert", "roberta", "xlm-roberta", "electra", "distilbert", "albert", "modernbert"]
DECODERS = ["gpt2", "llama", "qwen2", "mistral"]
ENCODER_DECODERS = ["bart", "mbart"]
OWN_ATTENTION = ["deberta-v2", "deberta", "mpnet", "bloom"]
REFUSED = ["nystromformer"]  # approximate attention: no probability matrix over the tokens to intervene on
ARCHITECTURES = ENCODERS + DECODERS


def word_tokenizer(template: str = "cls") -> PreTrainedTokenizerFast:
    """``template``: ``"cls"`` ([CLS] … [SEP]), ``"bos"`` (<s> …) or ``"none"`` (no special tokens)."""
    vocab = {t: i for i, t in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    if template == "cls":
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    elif template == "bos":
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", vocab["<s>"])])
    extra = {"cls_token": "[CLS]", "sep_token": "[SEP]"} if template == "cls" else {"bos_token": "<s>"}
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", mask_token="[MASK]",
                                   **extra)


def tiny_config(name: str, vocab_size: int, layers: int = 2, **extra):
    common = dict(vocab_size=vocab_size, num_labels=3, initializer_range=0.5, pad_token_id=0, **extra)
    bert_like = dict(hidden_size=16, num_hidden_layers=layers, num_attention_heads=2, intermediate_size=32,
                     max_position_embeddings=40, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    decoder = dict(hidden_size=32, num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=48, max_position_embeddings=64, attention_dropout=0.0)
    if name == "bert":
        return BertConfig(**bert_like, **common)
    if name == "roberta":
        return RobertaConfig(**bert_like, **common)
    if name == "xlm-roberta":
        return XLMRobertaConfig(**bert_like, **common)
    if name == "electra":
        return ElectraConfig(embedding_size=12, **bert_like, **common)
    if name == "distilbert":
        return DistilBertConfig(dim=16, n_layers=layers, n_heads=2, hidden_dim=32, max_position_embeddings=40,
                                dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0, **common)
    if name == "albert":
        return AlbertConfig(embedding_size=12, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=40, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0, **common)
    if name == "modernbert":
        return ModernBertConfig(hidden_size=16, num_hidden_layers=layers + 1, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=64, reference_compile=False,
                                global_attn_every_n_layers=2, local_attention=8, classifier_dropout=0.0,
                                **common)
    if name == "deberta-v2":  # DeBERTa-v3's settings: disentangled attention, shared keys, log buckets
        return DebertaV2Config(**bert_like, relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8,
                               max_relative_positions=-1, norm_rel_ebd="layer_norm", share_att_key=True,
                               position_biased_input=False, pooler_hidden_size=16, pooler_dropout=0.0, **common)
    if name == "deberta":
        return DebertaConfig(**bert_like, relative_attention=True, pos_att_type=["c2p", "p2c"],
                             max_relative_positions=16, pooler_hidden_size=16, pooler_dropout=0.0, **common)
    if name == "mpnet":
        return MPNetConfig(**bert_like, **common)
    if name == "bloom":
        return BloomConfig(hidden_size=32, n_layer=layers, n_head=4, hidden_dropout=0.0, attention_dropout=0.0,
                           **common)
    if name in ("bart", "mbart"):  # [CLS] = bos, [SEP] = eos (the decoder's classification token)
        seq2seq = dict(d_model=16, encoder_layers=layers, decoder_layers=layers, encoder_attention_heads=2,
                       decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=40,
                       dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, classifier_dropout=0.0,
                       init_std=0.5, bos_token_id=2, eos_token_id=3, decoder_start_token_id=3, **common)
        return (BartConfig if name == "bart" else MBartConfig)(**seq2seq)
    if name == "nystromformer":
        return NystromformerConfig(**bert_like, num_landmarks=4, segment_means_seq_len=40, **common)
    if name == "gpt2":
        return GPT2Config(n_embd=32, n_layer=layers, n_head=4, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                          attn_pdrop=0.0, **common)
    if name == "llama":
        return LlamaConfig(**decoder, **common)
    if name == "qwen2":
        return Qwen2Config(**decoder, **common)
    if name == "mistral":
        return MistralConfig(**decoder, **common)
    raise KeyError(name)


def tiny_classifier(name: str, seed: int = 0, layers: int = 2, **extra):
    """``(model, tokenizer)`` for architecture ``name``, eval mode, float32."""
    template = "bos" if name in ("llama", "mistral") else ("none" if name in ("gpt2", "qwen2", "bloom") else "cls")
    tokenizer = word_tokenizer(template)
    torch.manual_seed(seed)
    config = tiny_config(name, len(tokenizer), layers=layers, **extra)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    return model.eval(), tokenizer


def saved_classifier(name: str, folder):
    """``tiny_classifier(name)`` saved in ``folder / name`` and :data:`TEXTS` as a JSON-lines data set
    (labels cycling over 3 classes) beside it: ``(model folder, data file)``, the inputs of
    ``hf-attn analyze DIR --dataset FILE``."""
    import json

    model, tokenizer = tiny_classifier(name)
    target = folder / name
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": i % 3}) + "\n" for i, t in enumerate(TEXTS)))
    return target, data

