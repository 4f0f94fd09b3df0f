"""The explorer shows the human rationale of a sentence under its explanation: for a model whose
run.json names a data set with bundled rationales (SST → sst_rationales), a sentence of that data
gets a row with exactly its marked words highlighted, its split and the share marked; another
sentence gets one "no human rationale" line; a model of another data set gets nothing. Words are
HTML-escaped. The lookup rules (whitespace, case, splits) are checked on a hand-made data set."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import needs_space

from hf_attn.app.rationale import (NOT_KNOWN, RUN_FILE_MAX_BYTES, RationaleIndex, model_dataset, rationale_examples,
                                   rationale_html, rationale_index, recorded_dataset, row_title)
from hf_attn.data.rationales import RationaleDataset, RationaleExamples
from hf_attn.datasets import rationale_dataset_for

SST_TITLE = "human rationale (SST phrase labels, Carton et al. 2020)"


def _marked_words(page: str) -> list[str]:
    """The words of the rationale row that are highlighted (data-marked="1"), HTML unescaped."""
    import html

    row = re.search(r'<div data-row="rationale">(.*?)</div>', page).group(1)
    return [html.unescape(w) for w in re.findall(r'<span class="hfa-rword" data-marked="1"[^>]*>(.*?)</span>', row)]


def _all_words(page: str) -> list[str]:
    import html

    row = re.search(r'<div data-row="rationale">(.*?)</div>', page).group(1)
    return [html.unescape(w) for w in re.findall(r'<span class="hfa-rword" data-marked="[01]"[^>]*>(.*?)</span>', row)]


# ------------------------------------------------------------------------------ the mapping and lookup
def test_rationale_dataset_for_names_the_bundled_rationales():
    assert rationale_dataset_for("sst") == "sst_rationales"
    assert rationale_dataset_for("imdb") is None and rationale_dataset_for("sst5") is None
    assert rationale_dataset_for(None) is None
    with pytest.raises(ValueError, match="dataset_name must be"):
        rationale_dataset_for(3)


def _toy() -> RationaleDataset:
    rows = {"train": (["a good film .", "Great <b>fun</b> & more"], [(0, 1, 1, 0), (1, 1, 0, 0)]),
            "test": (["A good film .", "dull as dishwater"], [(1, 1, 0, 0), (1, 0, 1)])}
    splits = {split: RationaleExamples(tuple(f"{split}-{i}" for i in range(len(texts))), tuple(texts),
                                       (1,) * len(texts), tuple(np.asarray(m, dtype=np.int8) for m in marks))
              for split, (texts, marks) in rows.items()}
    return RationaleDataset("toy", ["neg", "pos"], splits, "hand-made")


def test_lookup_rules_whitespace_case_and_splits():
    index = RationaleIndex(_toy())
    exact = index.find("  A good\tfilm  . ")  # whitespace normalised, the case as written: test
    assert (exact.split, exact.index, exact.marks, exact.ignoring_case) == ("test", 0, (1, 1, 0, 0), False)
    assert exact.words == ("A", "good", "film", ".") and exact.marked == 2 and exact.share == 0.5
    lower = index.find("a good film .")  # exact in train (the test sentence lower-cased matches too: exact wins)
    assert (lower.split, lower.marks, lower.ignoring_case) == ("train", (0, 1, 1, 0), False)
    folded = index.find("dull as dishwater".lower())
    assert folded.split == "test" and not folded.ignoring_case
    typed_lower = index.find("great <b>fun</b> & more")  # typed in lower case: matched with the case ignored
    assert (typed_lower.split, typed_lower.marks, typed_lower.ignoring_case) == ("train", (1, 1, 0, 0), True)
    assert index.find("GREAT <b>fun</b> & more") is None  # other capitals do not match
    assert index.find("a good film") is None
    with pytest.raises(ValueError, match="text must be a string"):
        index.find(None)


def test_the_row_escapes_the_words_and_states_split_and_share():
    match = RationaleIndex(_toy()).find("Great <b>fun</b> & more")
    from hf_attn.app.rationale import match_html

    page = match_html(match)
    assert "<b>fun</b> &" not in page and "&lt;b&gt;fun&lt;/b&gt;" in page and "&amp;" in page
    assert _marked_words(page) == ["Great", "<b>fun</b>"] and _all_words(page) == ["Great", "<b>fun</b>", "&", "more"]
    assert 'data-split="train"' in page and "2 of 4 words marked (50%)" in page
    assert row_title("toy") in page


def test_recorded_dataset_reads_run_json(tmp_path):
    assert recorded_dataset(tmp_path) is None and recorded_dataset(None) is None
    (tmp_path / "run.json").write_text(json.dumps({"dataset": "sst"}))  # a transformers run
    assert recorded_dataset(tmp_path) == "sst"
    (tmp_path / "run.json").write_text(json.dumps({"task": "sst", "settings": {}}))  # one of hf_attn's models
    assert recorded_dataset(str(tmp_path)) == "sst"
    (tmp_path / "run.json").write_text("{not json")
    assert recorded_dataset(tmp_path) is None
    (tmp_path / "run.json").write_text(json.dumps({"task": "sst", "pad": "x" * RUN_FILE_MAX_BYTES}))
    assert recorded_dataset(tmp_path) is None  # too large to read


def test_rationale_html_on_sst_sentences():
    data = rationale_index("sst_rationales").dataset
    text, marks = data.texts("test")[5], data.rationales("test")[5]
    page = rationale_html("sst", text)
    assert SST_TITLE in page and 'data-split="test"' in page
    assert _marked_words(page) == [w for w, m in zip(text.split(), marks) if m]
    assert f"{int(marks.sum())} of {len(marks)} words marked" in page
    assert NOT_KNOWN.format(name="sst_rationales") in rationale_html("sst", "not a sentence of the treebank")
    assert rationale_html("imdb", text) == "" and rationale_html(None, text) == ""
    examples = rationale_examples("sst")
    assert len(examples) == 4 and all(e in data.texts("test") for e in examples)
    assert rationale_examples("imdb") == []


# ------------------------------------------------------------------------------ through the Space
def _model_folder(folder, texts, dataset: str | None) -> str:
    """A tiny BiLSTM + additive hf_attn model folder, its run.json recording ``dataset``."""
    import torch

    from hf_attn.data.tokenization import build_tokenizer
    from hf_attn.models.configuration_hf_attn import AttnClassifierConfig
    from hf_attn.models.modeling_hf_attn import AttnClassifierForSequenceClassification

    tokenizer = build_tokenizer(texts, max_length=64)
    config = AttnClassifierConfig(vocab_size=len(tokenizer.get_vocab()), embedding_dim=8, encoder="lstm",
                                  hidden_size=4, num_labels=2, max_tokens=64, pad_token_id=0, unk_token_id=1,
                                  mask_token_id=2)
    torch.manual_seed(0)
    AttnClassifierForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if dataset is not None:
        (folder / "run.json").write_text(json.dumps({"task": dataset, "settings": {"dataset": dataset}}))
    return str(folder)


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    """The app's explain handler over two tiny model folders: one trained on "sst", one on "imdb"."""
    from test_space_security import load_app_module

    from hf_attn.app.space import ModelCache, ModelPolicy

    app = load_app_module()
    data = rationale_index("sst_rationales").dataset
    texts = data.texts("test")[:50]
    root = tmp_path_factory.mktemp("rationale-models")
    sst = _model_folder(root / "sst-model", texts, "sst")
    imdb = _model_folder(root / "imdb-model", texts, "imdb")
    policy = ModelPolicy((sst, imdb))
    names = app.display_names(policy.models)
    cache = ModelCache(policy)
    _, explain, _ = app.make_handlers(cache, names)
    return app, explain, cache, data, {"sst": "local:sst-model", "imdb": "local:imdb-model"}, (sst, imdb)


def _heatmaps(explain, model: str, text: str) -> str:
    return explain(model, text, steps=0, ig=False)[2]


@needs_space
def test_the_space_shows_the_rationale_of_an_sst_sentence(space):
    _, explain, cache, data, models, (sst, _) = space
    i = 7
    text, marks = data.texts("test")[i], data.rationales("test")[i]
    page = _heatmaps(explain, models["sst"], text)
    assert page.index('id="hfa-heatmap"') < page.index('id="hfa-rationale"')  # under the explanation
    assert SST_TITLE in page and 'data-split="test"' in page and f"(sentence {i + 1})" in page
    assert _all_words(page) == text.split()
    assert _marked_words(page) == [w for w, m in zip(text.split(), marks) if m]
    assert f"{int(marks.sum())} of {len(marks)} words marked ({100 * marks.mean():.0f}%)" in page
    assert model_dataset(cache.loaded(sst)[0]) == "sst"  # read from the loaded folder's run.json


@needs_space
def test_an_unknown_sentence_gets_one_line(space):
    _, explain, _, _, models, _ = space
    page = _heatmaps(explain, models["sst"], "a film of no rationale at all")
    assert page.count('class="hfa-rationale"') == 1 and 'data-found="false"' in page
    assert NOT_KNOWN.format(name="sst_rationales") in page and 'data-row="rationale"' not in page


@needs_space
def test_a_model_of_another_dataset_gets_no_row(space):
    _, explain, _, data, models, _ = space
    page = _heatmaps(explain, models["imdb"], data.texts("test")[7])
    assert "hfa-rationale" not in page and "human rationale" not in page.lower()


@needs_space
def test_html_characters_of_a_sentence_are_escaped(space):
    _, explain, _, data, models, _ = space
    i = next(i for i, t in enumerate(data.texts("test")) if "S&M" in t)
    text, marks = data.texts("test")[i], data.rationales("test")[i]
    rationale = _heatmaps(explain, models["sst"], text).split('id="hfa-rationale"')[1]
    assert "S&amp;M" in rationale and "S&M" not in rationale
    assert _marked_words('id="hfa-rationale"' + rationale) == [w for w, m in zip(text.split(), marks) if m]
    page = _heatmaps(explain, models["sst"], "a <script>alert(1)</script> & film")
    assert "<script>" not in page and 'data-found="false"' in page


@needs_space
def test_examples_offer_rationale_sentences_for_an_sst_model(space):
    app, _, cache, _, _, (sst, imdb) = space
    assert app.examples_for(cache, sst) == [*rationale_examples("sst"), *app.EXAMPLES]
    assert app.examples_for(cache, imdb) == app.EXAMPLES
    assert app.examples_for(cache, None) == app.EXAMPLES
