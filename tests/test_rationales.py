"""Human-rationale data: SST rationales by Carton, Rathore & Tan's procedure, and the loaders of
ERASER folders, HateXplain's dataset.json and Label Studio exports, each on a hand-written fixture
in that format (tests/data/rationales/) and refusing malformed files in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import hf_attn.datasets
from hf_attn.data.rationales import (SST_RATIONALE_THRESHOLD, RationaleDataset, load_eraser, load_hatexplain,
                                     load_label_studio, parse_labelled_tree, rationale_statistics,
                                     sst_phrase_strengths, sst_tree_rationale)
from hf_attn.data.task import DataError

DATA = Path(__file__).parent / "data" / "rationales"
ROOT = Path(__file__).resolve().parents[1]


def marks(dataset: RationaleDataset, split: str) -> list[list[int]]:
    return [m.tolist() for m in dataset.rationales(split)]


# ----------------------------------------------------------------------------------------------
# SST: the procedure on hand-made trees


def test_explanatory_phrase_marks_every_leaf_below_it():
    # root 1 is not explanatory (descendant 0 is more extreme); (2 The plot) is neutral: its leaves are
    # phrases of strength 0; (0 is dull and slow) is strictly more extreme than every descendant
    # (at most |1-2|/2 = 0.5): one phrase of strength 1 covering its four leaves
    tree = parse_labelled_tree("(1 (2 (2 The) (2 plot)) (0 (2 is) (1 (1 (1 dull) (2 and)) (2 slow))))")
    assert sst_phrase_strengths(tree) == (["The", "plot", "is", "dull", "and", "slow"], [0, 0, 1, 1, 1, 1])


def test_equal_extremity_is_not_explanatory_and_leaves_keep_their_own_label():
    # |3-2|/2 = 0.5 is not strictly above the leaf "good" (0.5): the walk goes down to the leaves
    assert sst_phrase_strengths(parse_labelled_tree("(3 (3 good) (2 film))")) == (["good", "film"], [0.5, 0])
    # the most negative descendant (0: strength 1) blocks the root 4 too; (4 (3 but) (2 fun)) is a phrase
    tree = parse_labelled_tree("(4 (0 awful) (4 (3 but) (2 fun)))")
    assert sst_phrase_strengths(tree) == (["awful", "but", "fun"], [1, 1, 1])


def test_binarised_at_one_half_and_nbsp_leaf_gives_two_words():
    assert SST_RATIONALE_THRESHOLD == 0.5
    label, text, m = sst_tree_rationale("(3 (3 (2 8\xa01\\/2) (3 good)) (2 -LRB-))")
    assert (label, text, m.tolist()) == (3, "8 1\\/2 good (", [0, 0, 1, 0])


def test_malformed_tree_is_one_line_error_naming_it():
    for bad in ["(3 (2 a)", "(3 (2 a)))", "(7 a)", "(3 (2 a) b)"]:
        with pytest.raises(DataError, match=r"^t 9: not a PTB tree") as err:
            parse_labelled_tree(bad, where="t 9")
        assert "\n" not in str(err.value)


def carton_reference(line: str) -> list[float]:
    """Carton et al.'s functions (scripts/download_and_process_sst.py, MIT), transcribed onto a
    minimal node class, then binarize_rationale (dataset/dataset.py): an independent path."""

    class Node:
        def __init__(self, label, children):
            self.label, self.children = label, children

    def build(t):
        return Node(t[0], [build(c) for c in t[1]])

    def normalize_label(label):
        return (label - 2) / 2

    def count_leaves_and_extreme_descendants(tree):
        if len(tree.children) == 0:
            tcount = 1
            tmax = tmin = tree.label
        else:
            tcount = 0
            child_labels = [child.label for child in tree.children]
            tmax, tmin = max(child_labels), min(child_labels)
            for child in tree.children:
                ccount, cmax, cmin = count_leaves_and_extreme_descendants(child)
                tcount += ccount
                tmax, tmin = max(tmax, cmax), min(tmin, cmin)
        tree.num_leaves, tree.max_descendant, tree.min_descendant = tcount, tmax, tmin
        return tcount, tmax, tmin

    def explanatory_phrase(tree):
        if len(tree.children) == 0:
            return True
        label = normalize_label(tree.label)
        return (abs(label) > abs(normalize_label(tree.max_descendant))
                and abs(label) > abs(normalize_label(tree.min_descendant)))

    def assemble_rationale_phrases(tree, phrases):
        if explanatory_phrase(tree):
            phrases.append(tree)
        else:
            for child in tree.children:
                assemble_rationale_phrases(child, phrases)

    item = build(parse_labelled_tree(line))
    count_leaves_and_extreme_descendants(item)
    phrases, rationale = [], []
    assemble_rationale_phrases(item, phrases)
    for phrase in phrases:
        rationale.extend([np.abs(normalize_label(phrase.label))] * phrase.num_leaves)
    return [1.0 if x >= 0.5 else 0.0 for x in rationale]


@pytest.fixture(scope="module")
def sst_rationales():
    return hf_attn.datasets.load("sst_rationales")


def test_sst_rationales_match_the_transcribed_procedure_on_the_dev_trees(sst_rationales):
    from hf_attn.data.tasks import _sst_lines

    lines = [line for line in _sst_lines("validation") if line.strip()[1] != "2"]
    assert len(lines) == 872
    for line, m in zip(lines, sst_rationales.rationales("dev")):
        assert m.tolist() == carton_reference(line)


def test_sst_rationales_align_with_the_sst_dataset(sst_rationales):
    sst = hf_attn.datasets.load("sst")
    assert sst_rationales.label_names == sst.label_names == ["negative", "positive"]
    assert [len(sst_rationales.texts(s)) for s in ("train", "validation", "test")] == [6920, 872, 1821]
    for split in ("train", "validation", "test"):
        assert sst_rationales.labels(split) == sst.labels(split)
        ours, theirs = sst_rationales.texts(split), sst.texts(split)
        differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
        # the only differences: the three train leaves holding a no-break space, which load("sst") skips
        assert len(differ) == (3 if split == "train" else 0)
        for i in differ:
            assert "1\\/2" in ours[i] and ours[i].replace(" 8 1\\/2", "").replace(" 2 1\\/2", "") == theirs[i]
        assert all(len(t.split()) == len(m) for t, m in zip(ours, sst_rationales.rationales(split)))
    frame = sst_rationales.to_pandas("test")
    assert list(frame.columns) == ["id", "text", "label", "label_name", "rationale", "words", "marked"]
    assert frame.loc[0, "text"].startswith("If you sometimes like to go to the movies")
    # hand-traced from test tree 2: "go to the movies" (a phrase of label 3 over neutral words), "fun",
    # "good" are marked
    assert frame.loc[0, "rationale"] == [0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0]
    assert sst_rationales["test"].column_names == ["id", "text", "label", "rationale"]


def test_statistics_record_is_current(sst_rationales):
    record = json.loads((ROOT / "docs" / "plausibility" / "sst_rationales.json").read_text())
    assert record["splits"] == rationale_statistics(sst_rationales)
    assert record["splits"]["test"]["without_rationale"] == 0


def test_statistics_hand_computed():
    data = load_eraser(DATA / "eraser_docs")
    stats = rationale_statistics(data)
    assert stats["train"] == {"sentences": 1, "words": 9, "marked_words": 4, "share_marked": 4 / 9,
                              "mean_share_marked": 4 / 9, "mean_marked_words": 4.0, "without_rationale": 0,
                              "fully_marked": 0, "labels": {"NEG": 1, "POS": 0}}
    assert stats["test"]["without_rationale"] == 1 and stats["test"]["share_marked"] == 0


def test_load_names_and_unknown_split(sst_rationales):
    assert "sst_rationales" in hf_attn.datasets.names()
    with pytest.raises(KeyError, match="has no split 'nope'"):
        sst_rationales.texts("nope")
    with pytest.raises(DataError, match="does not apply to sst_rationales"):
        hf_attn.datasets.load("sst_rationales", preprocessing="jw")


# ----------------------------------------------------------------------------------------------
# ERASER


def test_eraser_docs_folder():
    data = load_eraser(DATA / "eraser_docs")
    assert data.split_names == ["train", "validation", "test"] and data.label_names == ["NEG", "POS"]
    assert data.texts("train") == ["the film is dull . it never ends ."]
    assert marks(data, "train") == [[0, 0, 1, 1, 0, 0, 1, 1, 0]]  # two evidence groups: [2, 4) and [6, 8)
    # docs/ drops the empty token of a doubled space before indexing: evidence [1, 4) = "warm , funny"
    assert data.texts("val") == ["a warm , funny film"] and data.labels("val") == [1]
    assert marks(data, "val") == [[0, 1, 1, 1, 0]]
    # no evidence, no docids: the document named like the annotation, no rationale
    assert (data.ids("test"), marks(data, "test")) == (["negR_002.txt"], [[0, 0, 0, 0]])


def test_eraser_docs_jsonl_keeps_erasers_token_indices():
    data = load_eraser(DATA / "eraser_docsjsonl")
    # docs.jsonl: split(' ') keeps the empty token, so [0, 3) is "great", "", "acting"
    assert data.texts("test") == ["great acting weak plot", "a dull , slow mess"]
    assert marks(data, "test") == [[1, 1, 0, 0], [0, 1, 0, 0, 1]]


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    if (DATA / name).is_dir():
        shutil.copytree(DATA / name, target)
    else:
        shutil.copy(DATA / name, target)
    return target


@pytest.mark.parametrize("line, message", [
    ('{"annotation_id": "x", "classification": "NEG", "evidences": [[{"docid": "negR_000.txt", '
     '"start_token": 7, "end_token": 12}]]}', r"evidence tokens \[7, 12\) outside document"),
    ('{"annotation_id": "x", "classification": "NEG", "evidences": [[{"docid": "missing.txt", '
     '"start_token": 0, "end_token": 1}]]}', "document 'missing.txt' is not in the document store"),
    ('{"annotation_id": "x", "evidences": []}', "has no classification string"),
    ('{"annotation_id": "x", "classification": "NEG", "evidences": [[{"docid": "negR_000.txt", "start_token": 0, '
     '"end_token": 1}], [{"docid": "posR_001.txt", "start_token": 0, "end_token": 1}]]}', "has 2 documents"),
    ('{"annotation_id": "x", "classification": ', "could not parse"),
])
def test_eraser_malformed_line_is_named(tmp_path, line, message):
    folder = _copy(tmp_path, "eraser_docs")
    good = (folder / "train.jsonl").read_text()
    (folder / "train.jsonl").write_text(good + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message) as err:
        load_eraser(folder)
    assert str(err.value).startswith(f"{folder / 'train.jsonl'}, line 3: ") and "\n" not in str(err.value)


def test_eraser_folder_problems(tmp_path):
    with pytest.raises(FileNotFoundError, match="no train.jsonl, val.jsonl or test.jsonl"):
        load_eraser(tmp_path)
    folder = _copy(tmp_path, "eraser_docs")
    (folder / "docs.jsonl").write_text("")
    with pytest.raises(DataError, match="both docs.jsonl and docs/ exist"):
        load_eraser(folder)


# ----------------------------------------------------------------------------------------------
# HateXplain


def test_hatexplain_majority_label_union_rationale_and_divisions():
    data = load_hatexplain(DATA / "hatexplain")
    assert data.label_names == ["hatespeech", "normal", "offensive"]
    assert [data.ids(s) for s in data.split_names] == [["1_gab"], ["2_twitter"], ["4_twitter"]]
    assert data.labels("train") == [0] and data.labels("test") == [2]
    # union of [0,1,1,0], [0,0,1,0], [0,0,1,1]; the normal post has no rationale; 3_gab (three labels) is out
    assert marks(data, "train") == [[0, 1, 1, 1]] and marks(data, "val") == [[0, 0, 0, 0]]
    assert marks(data, "test") == [[0, 1, 1]]
    assert data.notes[0].startswith("1 post(s) without a majority label")


def test_hatexplain_majority_vote_and_two_classes(tmp_path):
    data = load_hatexplain(DATA / "hatexplain" / "dataset.json", vote="majority")
    assert marks(data, "train") == [[0, 0, 1, 0]] and marks(data, "test") == [[0, 1, 0]]  # > half of 3, of 2
    two = load_hatexplain(DATA / "hatexplain", two_classes=True)
    assert two.label_names == ["non-toxic", "toxic"] and two.labels("train") == [1] and two.labels("val") == [0]
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(DATA / "hatexplain" / "dataset.json", alone / "dataset.json")
    assert load_hatexplain(alone).split_names == ["test"]  # no divisions file: every post in test
    with pytest.raises(ValueError, match="vote must be one of"):
        load_hatexplain(alone, vote="any")


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["4_twitter"]["rationales"].append([0, 1]),
     r"rationales must be lists of 0/1, one per post token \(3\)"),
    (lambda d: d["4_twitter"].update(post_tokens=[]), "post_tokens must be a non-empty list of strings"),
    (lambda d: d["4_twitter"].update(annotators=[{"annotator_id": 1}]), "annotators must be a non-empty list"),
])
def test_hatexplain_malformed_record_is_named(tmp_path, edit, message):
    content = json.loads((DATA / "hatexplain" / "dataset.json").read_text())
    edit(content)
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match=message) as err:
        load_hatexplain(path)
    assert str(err.value).startswith(f"{path}, record 4 (post 4_twitter): ") and "\n" not in str(err.value)


def test_hatexplain_unparsable_file_names_the_line(tmp_path):
    path = tmp_path / "dataset.json"
    path.write_text('{\n  "1_gab": {\n    "post_id": \n}')
    with pytest.raises(ValueError, match=rf"^{path}, line 4: could not parse"):
        load_hatexplain(path)


# ----------------------------------------------------------------------------------------------
# Label Studio


def test_label_studio_spans_to_words():
    data = load_label_studio(DATA / "label_studio.json")
    assert data.ids("test") == ["11", "12"] and data.label_names == ["negative", "positive"]
    # "awful" [8, 13) marks the word "awful,"; the cancelled annotation is skipped; label from choices
    assert data.texts("test")[0] == "A truly awful, boring film." and data.labels("test") == [0, 1]
    # two annotations, union: "Great" | "clever", "plot." (a span of any label)
    assert marks(data, "test") == [[0, 0, 1, 1, 0], [1, 0, 0, 0, 1, 1]]
    assert data.notes[0].startswith("1 task(s) without an annotation")
    only = load_label_studio(DATA / "label_studio.json", rationale_labels=["rationale"])
    assert marks(only, "test")[1] == [1, 0, 0, 0, 1, 0]
    majority = load_label_studio(DATA / "label_studio.json", vote="majority")
    assert marks(majority, "test") == [[0, 0, 1, 1, 0], [0, 0, 0, 0, 0, 0]]  # more than half of 2: none


@pytest.mark.parametrize("edit, message", [
    (lambda t: t[1]["annotations"][0]["result"][0]["value"].update(end=99),
     r"task 1, annotation 0, result 0: span \[0, 99\) outside the text of 29 characters"),
    (lambda t: t[1]["annotations"][1]["result"][0]["value"].update(text="clover"),
     r"task 1, annotation 1, result 0: span text 'clover' is not the text at \[17, 23\)"),
    (lambda t: t[0]["data"].pop("text"), "task 0: expected a data object with a non-empty 'text' string"),
    (lambda t: t[0]["annotations"][0]["result"].pop(), "task 0: no label"),
])
def test_label_studio_malformed_task_is_named(tmp_path, edit, message):
    tasks = json.loads((DATA / "label_studio.json").read_text())
    edit(tasks)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks))
    with pytest.raises(ValueError, match=message) as err:
        load_label_studio(path)
    assert str(err.value).startswith(f"{path}, task ") and "\n" not in str(err.value)
