"""Data loaders and the tokenizer: real corpus sizes, PTB parsing, bad input, round trips."""

import json
import os

import numpy as np
import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from hf_attn.data import (DataError, load_agnews, load_local, load_sst, load_task, parse_ptb_tree,
                          seeded_split)
from hf_attn.tokenization import build_tokenizer

AG_NEWS = "/work/shared/data/ag_news/test.csv"


def test_sst_binary_sizes_and_labels(sst):
    sizes = {s: len(d) for s, d in sst.splits.items()}
    assert sizes == {"train": 6920, "validation": 872, "test": 1821}
    assert sst.label_names == ["negative", "positive"]
    assert set(sst.splits["test"]["label"]) == {0, 1}


def test_sst_five_class_keeps_every_tree():
    sst5 = load_sst(binary=False)
    assert {s: len(d) for s, d in sst5.splits.items()} == {"train": 8544, "validation": 1101, "test": 2210}
    assert set(sst5.splits["train"]["label"]) == {0, 1, 2, 3, 4}


def test_ptb_tree_parsing_undoes_bracket_escapes():
    label, tokens = parse_ptb_tree("(3 (2 (2 -LRB-) (2 Great)) (3 (2 film) (2 -RRB-)))")
    assert label == 3
    assert tokens == ["(", "Great", "film", ")"]
    with pytest.raises(DataError, match="not a PTB tree"):
        parse_ptb_tree("just text")


def test_first_sst_sentence_is_the_rock(sst):
    assert sst.splits["train"][0]["text"].startswith("The Rock is destined to be the 21st Century 's new")


@pytest.mark.skipif(not os.path.exists(AG_NEWS), reason="offline AG News copy not on this machine")
def test_agnews_world_vs_business_seeded_split():
    a = load_agnews(AG_NEWS, seed=0)
    b = load_agnews(AG_NEWS, seed=0)
    c = load_agnews(AG_NEWS, seed=1)
    assert sum(len(d) for d in a.splits.values()) == 3800
    assert a.splits["test"]["text"][:5] == b.splits["test"]["text"][:5]
    assert a.splits["test"]["text"][:5] != c.splits["test"]["text"][:5]
    assert a.label_names == ["world", "business"]
    assert a.notes and "seed 0" in a.notes[0]


def test_seeded_split_partitions():
    parts = seeded_split(101, seed=3)
    joined = np.sort(np.concatenate(list(parts.values())))
    assert np.array_equal(joined, np.arange(101))


def test_local_csv_and_jsonl(tmp_path):
    rows = [{"sentence": f"text number {i} is {'good' if i % 2 else 'bad'}", "y": "pos" if i % 2 else "neg"}
            for i in range(40)]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    task = load_local(tmp_path / "d.jsonl", text_column="sentence", label_column="y", seed=0)
    assert task.label_names == ["neg", "pos"]
    assert sum(len(d) for d in task.splits.values()) == 40
    import pandas as pd

    folder = tmp_path / "folder"
    folder.mkdir()
    for split in ("train", "dev", "test"):
        pd.DataFrame({"text": ["a b", "c d", "e f"], "label": [0, 1, 2]}).to_csv(folder / f"{split}.csv", index=False)
    task = load_task(str(folder))
    assert task.label_names == ["0", "1", "2"]
    assert len(task.splits["validation"]) == 3


def test_local_file_errors(tmp_path):
    import pandas as pd

    pd.DataFrame({"txt": ["a"] * 20, "label": [0, 1] * 10}).to_csv(tmp_path / "nocol.csv", index=False)
    with pytest.raises(DataError, match=r"missing column\(s\) \['text'\]"):
        load_task(str(tmp_path / "nocol.csv"))
    pd.DataFrame({"text": ["fine"] * 19 + ["   "], "label": [0, 1] * 10}).to_csv(tmp_path / "empty.csv", index=False)
    with pytest.raises(DataError, match="empty or whitespace-only text"):
        load_task(str(tmp_path / "empty.csv"))
    folder = tmp_path / "labels"
    folder.mkdir()
    pd.DataFrame({"text": ["a", "b"], "label": ["x", "y"]}).to_csv(folder / "train.csv", index=False)
    pd.DataFrame({"text": ["a", "b"], "label": ["x", "y"]}).to_csv(folder / "dev.csv", index=False)
    pd.DataFrame({"text": ["a", "b"], "label": ["x", "z"]}).to_csv(folder / "test.csv", index=False)
    with pytest.raises(DataError, match=r"label 'z' is not in the label set \['x', 'y'\]"):
        load_task(str(folder))
    (tmp_path / "bad.csv").write_bytes(b"text,label\n\xff\xfe broken,0\n")
    with pytest.raises(DataError, match="not valid UTF-8"):
        load_task(str(tmp_path / "bad.csv"))
    with pytest.raises(FileNotFoundError, match="unknown dataset"):
        load_task("no/such/file.csv")
    with pytest.raises(DataError, match="--data-path"):
        load_task("agnews")


def test_tokenizer_normalises_like_jain_wallace():
    tok = build_tokenizer(["The film cost 10 million dollars , sadly .", "A GREAT film !"], min_count=1)
    tokens = tok.convert_ids_to_tokens(tok("The 3.5-star film , 1990s style!")["input_ids"])
    assert tokens == ["the", "qqq", "film", ",", "qqq", "[UNK]", "!"]
    assert tok.convert_ids_to_tokens([0, 1, 2]) == ["[PAD]", "[UNK]", "[MASK]"]
    assert tok.pad_token_id == 0 and tok.unk_token_id == 1 and tok.mask_token_id == 2


def test_tokenizer_min_count_and_round_trip(tmp_path, sst):
    texts = list(sst.splits["train"]["text"])
    tok1 = build_tokenizer(texts, min_count=1)
    tok2 = build_tokenizer(texts, min_count=2)
    assert len(tok2) < len(tok1)
    tok1.save_pretrained(tmp_path)
    for loaded in (PreTrainedTokenizerFast.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)):
        for text in list(sst.splits["test"]["text"])[:50]:
            assert loaded(text)["input_ids"] == tok1(text)["input_ids"]
    # SST leaves are tokens already: one id per leaf
    text = sst.splits["test"][0]["text"]
    assert len(tok1(text)["input_ids"]) == len(text.split())


def test_tokenizer_truncates_at_model_max_length():
    tok = build_tokenizer(["a b c"], max_length=4)
    assert len(tok("a b c a b c a b", truncation=True)["input_ids"]) == 4


def test_tokenizer_needs_a_vocabulary():
    with pytest.raises(ValueError, match="no word reaches min_count"):
        build_tokenizer(["only once"], min_count=5)
