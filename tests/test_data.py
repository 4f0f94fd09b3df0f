"""Data loaders and the tokenizer: real corpus sizes, PTB parsing, bad input, round trips."""

import json
import os
import re

import numpy as np
import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from hf_attn.data.tasks import (DataError, load_agnews, load_local, load_sst, load_task, parse_ptb_tree,
                          seeded_split)
from hf_attn.data.tokenization import build_tokenizer

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
    with pytest.raises(FileNotFoundError, match="unknown dataset 'no/such/file.csv': no such file"):
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


# ----------------------------------------------------------------------------------------------
# valid data accepted, invalid data named by file and 1-based line


def _csv(path, body):
    path.write_text("text,label\n" + body, encoding="utf-8")
    return str(path)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _all(task, column):
    return [v for split in task.splits.values() for v in split[column]]


def test_labels_written_as_whole_floats_are_class_ids(tmp_path):
    rows = "".join(f"text number {i},{float(i % 2)}\n" for i in range(20))  # 0.0 / 1.0
    task = load_task(_csv(tmp_path / "float.csv", rows))
    assert task.label_names == ["0", "1"]
    assert sorted(_all(task, "label")) == [0] * 10 + [1] * 10
    task = load_task(_jsonl(tmp_path / "float.jsonl", [{"text": f"t {i}", "label": float(i % 2)}
                                                       for i in range(20)]))
    assert task.label_names == ["0", "1"] and sorted(_all(task, "label")) == [0] * 10 + [1] * 10
    # 1, 1.0 and "1.0" are one class; the text keeps its own row
    mixed = _csv(tmp_path / "mixed.csv", "".join(f"t {i},{['0', '1.0', '0.0', '1'][i % 4]}\n" for i in range(20)))
    assert load_task(mixed).label_names == ["0", "1"]


def test_non_whole_numeric_label_names_file_and_line(tmp_path):
    # line 1 header, lines 2-21 rows, a record spanning lines 22-23, the bad label on line 24
    body = "".join(f"text number {i},{i % 2}\n" for i in range(20)) + '"two\nlines",1\nbad row,0.5\n'
    path = _csv(tmp_path / "half.csv", body)
    with pytest.raises(DataError, match=rf"^{re.escape(path)}, line 24: label '0.5' is not a whole number"):
        load_task(path)
    path = _jsonl(tmp_path / "half.jsonl", [{"text": f"t {i}", "label": i % 2} for i in range(20)]
                  + [{"text": "bad", "label": 0.5}])
    with pytest.raises(DataError, match=rf"^{re.escape(path)}, line 21: label 0.5 is not a whole number"):
        load_task(path)


def test_errors_name_the_file_line_not_the_shuffled_row(tmp_path):
    body = "".join(f"text number {i},{i % 2}\n" for i in range(30))
    body = body.replace("text number 17,1\n", "text number 17,\n")  # 18th data row: line 19
    path = _csv(tmp_path / "gap.csv", body)
    with pytest.raises(DataError, match=rf"^{re.escape(path)}, line 19: missing label$"):
        load_task(path)
    path = _csv(tmp_path / "blank.csv", body.replace("text number 17,\n", '"  ",1\n'))
    with pytest.raises(DataError, match=rf"^{re.escape(path)}, line 19: empty or whitespace-only text"):
        load_task(path)
    rows = [{"text": f"t {i}", "label": i % 2} for i in range(30)]
    rows[11]["text"] = None  # JSON null: missing
    path = _jsonl(tmp_path / "null.jsonl", rows)
    with pytest.raises(DataError, match=rf"^{re.escape(path)}, line 12: missing \(empty\) text"):
        load_task(path)
    # a folder: the file of the split and its line, plus the split
    folder = tmp_path / "folder"
    folder.mkdir()
    for split in ("train", "dev"):
        _csv(folder / f"{split}.csv", "good one,pos\nbad one,neg\n")
    test = _csv(folder / "test.csv", "good one,pos\n\"a\nb\",neg\nmeh one,neutral\n")
    with pytest.raises(DataError, match=rf"^{re.escape(test)}, line 5 \[test\]: label 'neutral' is not in "
                                        r"the label set \['neg', 'pos'\]"):
        load_task(str(folder))


@pytest.mark.parametrize("value", ["None", "NA", "null", "N/A", "NaN", "nan", "#N/A", "n/a", "NULL"])
def test_na_like_strings_are_text_and_labels(tmp_path, value):
    rows = "".join(f"{value},{i % 2}\n" if i < 4 else f"text {i},{i % 2}\n" for i in range(20))
    task = load_task(_csv(tmp_path / "na.csv", rows))
    assert _all(task, "text").count(value) == 4
    task = load_task(_jsonl(tmp_path / "na.jsonl", [{"text": value, "label": i % 2} for i in range(20)]))
    assert _all(task, "text") == [value] * 20
    labels = "".join(f"text {i},{value if i % 2 else 'other'}\n" for i in range(20))
    task = load_task(_csv(tmp_path / "na_labels.csv", labels))
    assert task.label_names == sorted([value, "other"])
    # only a truly empty cell is missing
    with pytest.raises(DataError, match=r"line 2: missing \(empty\) text"):
        load_task(_csv(tmp_path / "empty.csv", ",1\n" + rows))


@pytest.mark.parametrize("name", ["./x.csv", "data/x.csv", "./mydata", "../elsewhere", "a/b/c", "x.tsv",
                                  "data.jsonl", "my data", "-bad-", "dir\\x"])
def test_missing_path_like_names_say_no_such_file(tmp_path, monkeypatch, name):
    import hf_attn.data.tasks as data

    def no_hub(*args, **kwargs):
        raise AssertionError(f"{name!r} was looked up on the Hub")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(data, "load_hub", no_hub)
    with pytest.raises(FileNotFoundError, match=rf"no such file or folder .*{re.escape(os.path.basename(name))}"):
        load_task(name)


def test_hub_shaped_name_that_fails_says_no_local_file_either(tmp_path, monkeypatch):
    import hf_attn.data.tasks as data

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'someone/reviews' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(data, "load_hub", offline)
    with pytest.raises(FileNotFoundError, match=r"unknown dataset 'someone/reviews'.*no such file or folder"
                                                r".*Hub dataset id failed \(ConnectionError"):
        load_task("someone/reviews")


def test_a_bundled_name_never_reads_a_local_folder_of_that_name(tmp_path, monkeypatch, caplog):
    """``sst`` is the bundled SST whatever the working directory holds (results record "sst", so
    that is what must be read); ``./sst`` is the local folder."""
    import logging

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sst").mkdir()
    for split in ("train", "dev", "test"):
        _csv(tmp_path / "sst" / f"{split}.csv", "".join(f"local text {i},{'ab'[i % 2]}\n" for i in range(6)))
    with caplog.at_level(logging.WARNING, logger="hf_attn.data.tasks"):
        task = load_task("sst")
    assert task.label_names != ["a", "b"] and len(task.splits["train"]) > 6
    assert "is not read" in caplog.text and str(tmp_path / "sst") in caplog.text
    local = load_task("./sst")
    assert local.label_names == ["a", "b"] and len(local.splits["train"]) == 6
