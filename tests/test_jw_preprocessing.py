"""Jain & Wallace's SST preprocessing (``--preprocessing jw``), checked against
their repository (successar/AttentionExplanation): the committed ``preprocess/SST/sst_dataset.csv``
(digests below), the split sizes of their length filter (6355 / 821 / 1725, their Table 1 and
``Trainers/DatasetBC.py``), their vocabulary (13826 with their 4 specials), and the markers
``<SOS>``/``<EOS>``: read by the encoder, exactly 0 attention, and outside every J&W analysis
(gradient/LOO/τ/permutation/adversary work on tokens 1…L−2, as their ``Trainers/PlottingBC.py``)."""

import hashlib
import json
import os

import numpy as np
import pytest
import torch
from datasets import DatasetDict
from scipy.stats import kendalltau

from hf_attn.batteries.jw import battery as jw
from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
from hf_attn.data.tasks import (DataError, TaskData, jw_length_filter, jw_sst_rows, load_sst, load_sst_jw,
                          load_task)
from hf_attn.core.measures import merge_near_ties
from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification, exclude_first_last
from hf_attn.data.tokenization import EOS, SOS, build_tokenizer, jw_clean

# sha256 of "\n".join(text) per split of J&W's committed preprocess/SST/sst_dataset.csv
# (successar/AttentionExplanation @ 425a89a), rows of one exp_split in file order; labels likewise
# ("".join(labels), first 16 hex digits).
JW_CSV_TEXT_SHA256 = {
    "train": "44ecdfef2ee828f3f5de2bd58ecbbb36ffd6466280bb217caedb4bc7832a3bae",
    "validation": "3387b0633166823b470e5f5a9ef2b70b94a128291f02d716545a88e9e475ed5b",
    "test": "30b95a4a981a2109f2b236e60d807a5c96e227c74aaffc2a29eacb2c17ee8221",
}
JW_CSV_LABEL_SHA256 = {"train": "7db830e571565705", "validation": "bf7837769667c1cf", "test": "c33f99a9c7a33ce7"}
JW_MIRROR_CSV = "/work/.mirror/successar+AttentionExplanation/repo"


@pytest.fixture(scope="module")
def jw_task() -> TaskData:
    return load_sst_jw()


def test_preprocessing_reproduces_jw_committed_csv_exactly():
    sizes = {}
    for split in ("train", "validation", "test"):
        texts, labels = jw_sst_rows(split)
        sizes[split] = len(texts)
        assert hashlib.sha256("\n".join(texts).encode()).hexdigest() == JW_CSV_TEXT_SHA256[split], split
        assert hashlib.sha256("".join(map(str, labels)).encode()).hexdigest()[:16] == JW_CSV_LABEL_SHA256[split]
    assert sizes == {"train": 6920, "validation": 872, "test": 1821}  # neutral dropped, before the filter


@pytest.mark.skipif(not os.path.isdir(JW_MIRROR_CSV), reason="no local mirror of J&W's repository")
def test_preprocessing_equals_the_csv_in_a_local_mirror_of_their_repository():
    import csv
    import io
    import subprocess

    raw = subprocess.run(["git", "-C", JW_MIRROR_CSV, "show", "HEAD:preprocess/SST/sst_dataset.csv"],
                         capture_output=True, text=True, check=True).stdout
    rows = list(csv.DictReader(io.StringIO(raw)))
    for split, name in (("train", "train"), ("validation", "dev"), ("test", "test")):
        texts, labels = jw_sst_rows(split)
        assert texts == [r["text"] for r in rows if r["exp_split"] == name]
        assert labels == [int(r["label"]) for r in rows if r["exp_split"] == name]


def test_jw_clean_examples():
    # punctuation (every non-word character) → space, lower-case, numbers kept, brackets dropped
    assert jw_clean("It 's a -LRB- good -RRB- , funny film ... 21st century !") == "it s a good funny film 21st century"
    assert jw_clean("I do n't know") == "i do n t know"
    assert jw_clean("café , naïve") == "café naïve"  # \W is Unicode-aware: accented letters stay
    # the spaCy tokenizer effects that occur in binary SST (case-sensitive, before lower-casing)
    assert jw_clean("you 're gonna like this") == "you re gon na like this"
    assert jw_clean("over a 28K modem") == "over a 28 k modem"
    assert jw_clean("3D goggles in the 1950s") == "3d goggles in the 1950s"
    assert jw_clean("8\xa01\\/2") == "8 1 2"  # the no-break-space leaf the default loader skips


def test_length_filter_leaves_jw_counts(jw_task):
    assert {s: len(d) for s, d in jw_task.splits.items()} == {"train": 6355, "validation": 821, "test": 1725}
    assert len(jw_task.vocabulary_texts) == 6920  # their vocabulary: every training sentence
    for split in jw_task.splits.values():
        lengths = [len(t.split()) for t in split["text"]]
        assert min(lengths) >= 6
    assert jw_task.preprocessing == "jw" and jw_task.name == "sst"
    # filterbylength: strict at both ends, the split's own maximum when max_length is None
    assert jw_length_filter([5, 6, 7, 9, 9, 8]) == [1, 2, 5]
    assert jw_length_filter([3, 6, 9], min_length=None, max_length=None) == [1]
    assert jw_length_filter([3, 6, 9], max_length=10) == [1, 2]


def test_vocabulary_matches_jw(jw_task):
    tokenizer = build_tokenizer(jw_task.vocabulary_texts, preprocessing="jw")
    vocab = tokenizer.get_vocab()
    # J&W: 13826 = 13822 words + <0> <UNK> <SOS> <EOS>; here [PAD] [UNK] [MASK] <SOS> <EOS>
    assert len(vocab) == 13822 + 5
    assert [vocab[t] for t in ("[PAD]", "[UNK]", "[MASK]", SOS, EOS)] == [0, 1, 2, 3, 4]
    assert "qqq" not in vocab and "21st" in vocab and "," not in vocab


def test_jw_tokenizer_wraps_markers_and_applies_the_rules_to_raw_text(jw_task, tmp_path):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tokenizer = build_tokenizer(jw_task.vocabulary_texts, preprocessing="jw", max_length=8)
    full = build_tokenizer(jw_task.vocabulary_texts, preprocessing="jw")
    tokens = full.convert_ids_to_tokens(full("It's a GOOD film, isn't it?")["input_ids"])
    assert tokens == [SOS, "it", "s", "a", "good", "film", "[UNK]", "t", "it", EOS]  # "isn" (J&W: SST has "is n't")
    # truncation keeps both markers
    truncated = tokenizer("a b c d e f g h i j k", truncation=True, max_length=8)["input_ids"]
    assert len(truncated) == 8 and truncated[0] == 3 and truncated[-1] == 4
    # the tokenizer applies J&W's preprocessing itself: raw SST text → the same ids as their text
    raw = load_sst().splits["test"]["text"][:300]
    clean, _ = jw_sst_rows("test")
    nbsp = {i for i, t in enumerate(clean[:300]) if len(t.split()) != len(jw_clean(raw[i]).split())}
    assert len(nbsp) <= 3  # the leaves with a no-break space, which the default loader skips
    assert ([ids for i, ids in enumerate(full(raw)["input_ids"]) if i not in nbsp]
            == [ids for i, ids in enumerate(full(clean[:300])["input_ids"]) if i not in nbsp])
    # saved and reloaded (plain tokenizers JSON: no hf_attn needed), markers still added
    full.save_pretrained(tmp_path)
    for loaded in (PreTrainedTokenizerFast.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)):
        assert loaded("A good film!")["input_ids"] == full("a good film")["input_ids"]
    # the default tokenizer is untouched: no markers, punctuation kept, numbers → qqq
    default = build_tokenizer(["a good film , 21st"])
    tokens = default.convert_ids_to_tokens(default("a good film , 21st")["input_ids"])
    assert tokens == ["a", "good", "film", ",", "qqq"]


def test_jw_preprocessing_only_for_sst():
    with pytest.raises(DataError, match="sst"):
        load_task("sst5", preprocessing="jw")
    with pytest.raises(DataError, match="preprocessing"):
        load_task("sst", preprocessing="spacy")
    from hf_attn.training.engine import TrainSettings

    with pytest.raises(ValueError, match="preprocessing"):
        TrainSettings(preprocessing="nope").validate()
    from hf_attn.cli import build_parser

    args = build_parser().parse_args(["train", "--preprocessing", "jw", "--output-dir", "x"])
    assert args.preprocessing == "jw"
    assert build_parser().parse_args(["train", "--output-dir", "x"]).preprocessing == "default"


# ---------------------------------------------------------------------------------------------
# markers in the model and the analyses


def _marker_batch(lengths, vocab=40, seed=0):
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.randint(5, vocab, (len(lengths), width), generator=generator)
    mask = torch.arange(width)[None] < torch.tensor(lengths)[:, None]
    ids[:, 0] = 3
    for b, n in enumerate(lengths):
        ids[b, n - 1] = 4
    return ids * mask, mask


def _model(encoder="lstm", exclude=True, seed=0, **kwargs):
    torch.manual_seed(seed)
    config = AttnClassifierConfig(vocab_size=40, embedding_dim=8, hidden_size=6, encoder=encoder,
                                  cnn_filters=3, num_labels=2, attention_exclude_first_last=exclude, **kwargs)
    return AttnClassifierForSequenceClassification(config).eval()


def test_exclude_first_last_mask():
    mask = torch.arange(6)[None] < torch.tensor([6, 4, 3, 2, 1])[:, None]
    expected = torch.tensor([[0, 1, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0],
                             [1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(exclude_first_last(mask), expected)  # < 3 tokens: no word inside, all kept


@pytest.mark.parametrize("encoder", ["lstm", "cnn", "average"])
def test_markers_are_read_by_the_encoder_but_never_attended(encoder):
    lengths = [9, 3, 5, 2, 7]
    ids, mask = _marker_batch(lengths)
    model = _model(encoder)
    out = model(input_ids=ids, attention_mask=mask)
    alpha = out.attentions
    for b, n in enumerate(lengths):
        if n >= 3:
            assert alpha[b, 0] == 0 and alpha[b, n - 1] == 0
    torch.testing.assert_close(alpha.sum(1), torch.ones(len(lengths)))
    assert torch.isfinite(out.logits).all()
    # the encoder reads the markers: another <SOS> vector changes the states and the output
    if encoder != "average":  # token-local: a marker's own state is unattended, so no effect
        with torch.no_grad():
            model.embedding.weight[3] += 1.0
        assert not torch.allclose(model(input_ids=ids, attention_mask=mask).logits, out.logits)
    # an attention override is a distribution over the words: markers are zeroed
    override = mask.float() / mask.sum(1, keepdim=True)
    with pytest.raises(ValueError, match="sums to"):
        model(input_ids=ids, attention_mask=mask, attention_weights=override)
    inner = exclude_first_last(mask).float()
    out2 = model(input_ids=ids, attention_mask=mask, attention_weights=inner / inner.sum(1, keepdim=True))
    assert (out2.attentions[~exclude_first_last(mask)] == 0).all()


def test_flag_off_is_the_model_without_it():
    ids, mask = _marker_batch([7, 4, 2])
    with_flag, without = _model(exclude=False), _model(exclude=False)
    config = without.config.to_dict()
    config.pop("attention_exclude_first_last")
    assert AttnClassifierConfig.from_dict(config).attention_exclude_first_last is False
    a, b = with_flag(input_ids=ids, attention_mask=mask), without(input_ids=ids, attention_mask=mask)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.attentions, b.attentions)
    assert with_flag.attended_mask(mask) is mask and jw.attended_mask(with_flag, mask) is mask


@pytest.mark.parametrize("encoder", ["lstm", "average", "cnn"])
def test_leave_one_out_deletes_words_only_and_keeps_the_markers(encoder):
    lengths = [9, 3, 5, 2, 7, 4]
    ids, mask = _marker_batch(lengths, seed=1)
    model = _model(encoder, seed=1)
    loo = jw.leave_one_out(model, ids, mask, token_budget=20)
    generic = jw.leave_one_out(model, ids, mask, method="generic")
    torch.testing.assert_close(torch.nan_to_num(loo, 9.0), torch.nan_to_num(generic, 9.0), atol=1e-6, rtol=0)
    with torch.no_grad():
        for b, n in enumerate(lengths):
            if n < 4:  # at most one word between the markers: no x₋t (NaN) or the fallback
                continue
            assert loo[b, 0] == 0 and loo[b, n - 1] == 0
            original = model(input_ids=ids[b:b + 1, :n]).logits.softmax(-1)
            for t in range(1, n - 1):  # J&W remove_and_run: delete position t, markers stay
                keep = [i for i in range(n) if i != t]
                deleted = model(input_ids=ids[b:b + 1, keep]).logits.softmax(-1)
                assert float(loo[b, t]) == pytest.approx(float(0.5 * (deleted - original).abs().sum()), abs=1e-6)
    assert torch.isnan(loo[1, 1])  # one word: no deletion leaves a word


def test_permutations_and_adversaries_leave_the_markers_alone():
    lengths = [9, 3, 5, 7]
    ids, mask = _marker_batch(lengths, seed=2)
    model = _model(seed=2)
    attended = jw.attended_mask(model, mask)
    perms = jw.random_permutations(attended, 50, torch.Generator().manual_seed(0))
    for b, n in enumerate(lengths):
        for p in perms[b]:
            assert p[0] == 0 and p[n - 1] == n - 1 and sorted(p[1:n - 1].tolist()) == list(range(1, n - 1))
            assert (p[n:] == torch.arange(n, mask.shape[1])).all()
    # a right-padded mask gives exactly the former permutations (argsort of the same keys)
    keys = torch.rand((4, 5, mask.shape[1]), generator=torch.Generator().manual_seed(1))
    keys = torch.where(mask.unsqueeze(1), keys, 2.0 + torch.arange(mask.shape[1], dtype=keys.dtype))
    assert torch.equal(jw.random_permutations(mask, 5, torch.Generator().manual_seed(1)), keys.argsort(-1))
    probabilities, attention, hidden = jw.predict(model, ids, mask)
    tvds = jw.permutation_tvd(model, hidden, attention, attended, 20, torch.Generator().manual_seed(0))
    assert tvds.shape == (4, 20) and torch.isfinite(tvds).all()
    adversary = jw.adversarial_attention(model, hidden, attention, attended, k=3, steps=20)
    assert (adversary.attention[~attended.unsqueeze(1).expand_as(adversary.attention)] == 0).all()
    torch.testing.assert_close(adversary.attention.sum(-1), torch.ones(4, 3))


def test_battery_on_a_marker_model_works_on_the_words(jw_task):
    small = TaskData(DatasetDict({s: jw_task.splits[s].select(range(0, len(jw_task.splits[s]), 40))
                                  for s in ("train", "validation", "test")}),
                     jw_task.label_names, "sst", vocabulary_texts=jw_task.vocabulary_texts, preprocessing="jw")
    tokenizer = build_tokenizer(small.vocabulary_texts, preprocessing="jw")
    torch.manual_seed(0)
    model = AttnClassifierForSequenceClassification(AttnClassifierConfig(
        vocab_size=len(tokenizer.get_vocab()), embedding_dim=8, hidden_size=6, num_labels=2,
        attention_exclude_first_last=True)).eval()
    texts, labels = list(small.splits["test"]["text"]), list(small.splits["test"]["label"])
    settings = jw.JWSettings(num_permutations=10, k=2, steps=10)
    instances, summary = jw.run_jw_battery(settings.adapter(model, tokenizer), texts, labels, settings, progress=False)
    words = [len(t.split()) for t in texts]
    assert [len(a) for a in instances.attention] == words  # markers dropped from every array
    assert [len(g) for g in instances.gradient] == words and [len(v) for v in instances.loo] == words
    assert [a.shape[-1] for a in instances.adversary_attention] == words
    assert all(SOS not in tokenizer.convert_ids_to_tokens(i.tolist()) for i in instances.input_ids)
    assert summary["length"]["mean"] == pytest.approx(np.mean(words))
    for i in range(len(texts)):
        np.testing.assert_allclose(instances.attention[i].sum(), 1.0, atol=1e-5)
    # τ over the words equals J&W's kendalltau(attn[1:L-1], grad[1:L-1]) on the full arrays
    ids, mask = jw.pad_batch(tokenizer(texts[:6])["input_ids"])
    gradient = jw.gradient_importance(model, ids, mask)
    _, attention, _ = jw.predict(model, ids, mask)
    tau, _ = instances.kendall["attention_gradient"]
    for b in range(6):
        n = int(mask[b].sum())
        np.testing.assert_allclose(instances.attention[b], attention[b, 1:n - 1].numpy(), atol=1e-6)
        np.testing.assert_allclose(instances.gradient[b], gradient[b, 1:n - 1].numpy(), atol=1e-6)
        a, g = (merge_near_ties(x[None], tolerance=settings.tie_tolerance)[0]
                for x in (instances.attention[b], instances.gradient[b]))
        assert tau[b] == pytest.approx(kendalltau(a, g).statistic, abs=1e-9)


def test_train_and_analyze_with_jw_preprocessing(jw_task, tmp_path):
    """hf-attn train --preprocessing jw → the config flag, the marker tokenizer, run.json; the
    battery CLI reloads the jw task from run.json (1725 test sentences)."""
    from hf_attn.cli import main
    from hf_attn.training.engine import TrainSettings, train

    small = TaskData(DatasetDict({s: jw_task.splits[s].select(range(0, len(jw_task.splits[s]), n))
                                  for s, n in (("train", 20), ("validation", 4), ("test", 4))}),
                     jw_task.label_names, "sst", vocabulary_texts=jw_task.vocabulary_texts, preprocessing="jw")
    out = str(tmp_path / "run")
    settings = TrainSettings(preprocessing="jw", epochs=1, embeddings="random", embedding_dim=16,
                             hidden_size=8, seed=0)
    with pytest.raises(ValueError, match="preprocessing"):
        train(TrainSettings(epochs=1, embeddings="random", embedding_dim=16), str(tmp_path / "bad"),
              task=small, progress=False)
    train(settings, out, task=small, progress=False)
    config = json.load(open(os.path.join(out, "config.json")))
    assert config["attention_exclude_first_last"] is True and config["vocab_size"] == 13827
    run = json.load(open(os.path.join(out, "run.json")))
    assert run["settings"]["preprocessing"] == "jw"
    from transformers import pipeline

    classify = pipeline("text-classification", model=out)
    assert classify("A GOOD, funny film!")[0]["label"] in ("negative", "positive")
    code = main(["analyze", out, "--battery", "jw", "--output-dir", str(tmp_path / "jw"), "--quiet",
                 "--jw-max-instances", "12", "--jw-permutations", "5", "--jw-adversaries", "2",
                 "--jw-steps", "5", "--threads", "1"])
    assert code == 0
    results = json.load(open(tmp_path / "jw" / "results.json"))
    assert results["summary"]["num_instances"] == 12
    rows = [json.loads(line) for line in open(tmp_path / "jw" / "instances.jsonl")]
    assert all(SOS not in r["tokens"] and EOS not in r["tokens"] and len(r["tokens"]) == len(r["attention"])
               for r in rows)


def test_committed_readme_is_the_generator_output_of_the_committed_records():
    """docs/reproduction/jw_preprocessing/README.md = scripts/jw_preprocessing_report.py on the
    committed summary.json, and every quoted number equals its record at the printed decimals."""
    import importlib.util
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    folder = root / "docs" / "reproduction" / "jw_preprocessing"
    spec = importlib.util.spec_from_file_location("jw_preprocessing_report",
                                                  root / "scripts" / "jw_preprocessing_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert text == report.readme(summary)
    marked = re.findall(r"([\d.]+)( %)?<!-- jwpre: (\S+)( ×100)? -->", text)
    assert len(marked) > 100
    for number, _, path, percent in marked:
        value = report._lookup(summary, path) * (100 if percent else 1)
        decimals = len(number.split(".")[1]) if "." in number else 0
        assert f"{value:.{decimals}f}" == number, path
    # the records the summary copies from
    for name in ("default", "jw"):
        results = json.loads((folder / name / "results.json").read_text(encoding="utf-8"))
        metrics = json.loads((folder / name / "metrics.json").read_text(encoding="utf-8"))
        tau = results["summary"]["tau_gradient"]["per_class"]["0"]["mean"]
        assert summary["tau"][name]["tau_gradient"]["0"]["mean"] == tau
        assert summary["models"][name]["test_f1"] == metrics["test_f1"]
    assert summary["tau"]["jw"]["num_instances"] == 1725 and summary["tau"]["default"]["num_instances"] == 1821
