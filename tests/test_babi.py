"""QA data (generated bAbI tasks 1–3, the released bAbI files, CNN) and the QA path end to end:
the pair model trained on generated task 1 and the J&W battery on it with J&W's QA ε = 0.05."""

from __future__ import annotations

import argparse
import json
import os
import re

import pytest

from hf_attn.data.babi import (GENERATED_NOTE, PLACES, generate_babi, is_qa_task, load_cnn_folder,
                               parse_babi_file)
from hf_attn.data.tasks import BUILTIN_DATASETS, DataError, load_task

_MOVE = re.compile(r"^(\w+) (?:moved to|went to|journeyed to|travelled to|went back to) the (\w+)$")
_GET = re.compile(r"^(\w+) (?:got|grabbed|picked up|took) the (\w+) there$")
_DROP = re.compile(r"^(\w+) (?:dropped|discarded|put down|left) the (\w+)$")


def solve(passage: str, question: str) -> str:
    """An independent reader of the generated stories: replays the statements' text."""
    actor_at, held_by, lies_at, trail = {}, {}, {}, {}

    def note(obj, place):
        if not trail.setdefault(obj, []) or trail[obj][-1] != place:
            trail[obj].append(place)

    for sentence in passage.split(". "):
        sentence = sentence.rstrip(".")
        if m := _MOVE.match(sentence):
            actor_at[m[1]] = m[2]
            for obj, actor in held_by.items():
                if actor == m[1]:
                    note(obj, m[2])
        elif m := _GET.match(sentence):
            assert m[2] not in held_by, sentence
            held_by[m[2]] = m[1]
            lies_at.pop(m[2], None)
            note(m[2], actor_at[m[1]])
        elif m := _DROP.match(sentence):
            assert held_by.pop(m[2]) == m[1], sentence
            lies_at[m[2]] = actor_at[m[1]]
        else:
            raise AssertionError(f"unknown statement {sentence!r}")
    if m := re.fullmatch(r"Where is (\w+)", question):
        return actor_at[m[1]]
    if m := re.fullmatch(r"Where is the (\w+)", question):
        return actor_at[held_by[m[1]]] if m[1] in held_by else lies_at[m[1]]
    m = re.fullmatch(r"Where was the (\w+) before the (\w+)", question)
    places = trail[m[1]]
    assert places.count(m[2]) == 1
    return places[places.index(m[2]) - 1]


@pytest.mark.parametrize("task", [1, 2, 3])
def test_generated_questions_are_answered_by_their_story_and_seeded(task):
    examples = generate_babi(task, 60, seed=3)
    assert len(examples) == 60
    assert [(e.passage, e.question, e.answer) for e in examples] == \
        [(e.passage, e.question, e.answer) for e in generate_babi(task, 60, seed=3)]
    assert [e.passage for e in examples] != [e.passage for e in generate_babi(task, 60, seed=4)]
    for e in examples:
        assert e.answer in PLACES
        assert solve(e.passage, e.question) == e.answer, (e.passage, e.question)
        assert all(0 <= i < len(e.statements) for i in e.support)
    question = {1: r"Where is [A-Z]\w+", 2: r"Where is the \w+", 3: r"Where was the \w+ before the \w+"}[task]
    assert all(re.fullmatch(question, e.question) for e in examples)
    if task == 2:  # the two-supporting-facts task: holders move with the objects
        assert any(_GET.match(s) for e in examples for s in e.statements)


def test_generated_task_is_labelled_and_has_the_standard_sizes():
    task = load_task("babi1", seed=0)
    assert task.is_pair and task.name == "babi1-generated"
    assert task.notes[0] == GENERATED_NOTE
    assert {k: len(v) for k, v in task.splits.items()} == {"train": 900, "validation": 100, "test": 1000}
    assert task.label_names == sorted(PLACES)
    row = task.splits["test"][0]
    assert row["premise"].endswith(".") and row["hypothesis"].startswith("Where is")
    assert {"babi1", "babi2", "babi3", "cnn-qa"} <= set(BUILTIN_DATASETS)
    assert is_qa_task("babi1-generated") and is_qa_task("cnn-qa") and not is_qa_task("snli")


BABI_TRAIN = """1 Mary moved to the bathroom.
2 John went to the hallway.
3 Where is Mary? \tbathroom\t1
4 Daniel went back to the hallway.
5 Sandra moved to the garden.
6 Where is Daniel? \thallway\t4
1 Sandra travelled to the office.
2 Where is Sandra? \toffice\t1
"""
BABI_TEST = """1 John moved to the kitchen.
2 Where is John? \tkitchen\t1
"""


def test_released_babi_files_are_read_as_jw_did(tmp_path):
    folder = tmp_path / "tasks_1-20_v1-2" / "en"
    folder.mkdir(parents=True)
    for split, text in (("train", BABI_TRAIN * 5), ("test", BABI_TEST)):
        (folder / f"qa1_single-supporting-fact_{split}.txt").write_text(text)
    examples = parse_babi_file(str(folder / "qa1_single-supporting-fact_train.txt"))
    assert len(examples) == 15
    second = examples[1]  # earlier questions are not part of the passage
    assert second.passage == ("Mary moved to the bathroom. John went to the hallway. "
                              "Daniel went back to the hallway. Sandra moved to the garden.")
    assert second.question == "Where is Daniel" and second.answer == "hallway" and second.support == (2,)
    assert examples[2].passage == "Sandra travelled to the office."
    task = load_task("babi1", data_path=str(tmp_path))  # the folder above tasks_1-20_v1-2 works
    assert task.name == "babi1" and GENERATED_NOTE not in task.notes
    assert len(task.splits["train"]) + len(task.splits["validation"]) == 15
    assert task.label_names == ["bathroom", "hallway", "kitchen", "office"]
    assert task.splits["test"][0]["label"] == task.label_names.index("kitchen")
    with pytest.raises(FileNotFoundError, match="qa2_two-supporting-facts_train.txt"):
        load_task("babi2", data_path=str(tmp_path))
    (folder / "qa1_single-supporting-fact_test.txt").write_text("1 Where is John? kitchen 1\n")
    with pytest.raises(DataError, match="question before any statement|no questions|question line"):
        load_task("babi1", data_path=str(folder))


def _question_file(path, passage, question, answer, entities):
    mapping = "\n".join(f"{e}:Name {i}" for i, e in enumerate(entities))
    path.write_text(f"http://www.cnn.com/x\n\n{passage}\n\n{question}\n\n{answer}\n\n{mapping}\n")


def test_cnn_question_folders_and_jw_csv(tmp_path):
    base = tmp_path / "cnn" / "questions"
    for split, folder in (("train", "training"), ("dev", "validation"), ("test", "test")):
        (base / folder).mkdir(parents=True)
        for i in range(3):
            _question_file(base / folder / f"{split}{i}.question",
                           f"@entity{i} met @entity{i + 1} in @entity7 .",
                           "@placeholder met someone", f"@entity{i}", [f"@entity{i}", f"@entity{i + 1}"])
    task = load_task("cnn-qa", data_path=str(tmp_path / "cnn"))
    assert task.is_pair and task.name == "cnn-qa"
    assert {k: len(v) for k, v in task.splits.items()} == {"train": 3, "validation": 3, "test": 3}
    assert task.label_names == ["@entity0", "@entity1", "@entity2"]
    assert task.splits["train"][1]["premise"] == "@entity1 met @entity2 in @entity7 ."
    assert task.splits["train"][1]["hypothesis"] == "@placeholder met someone"

    table = tmp_path / "cnn.csv"
    rows = ["paragraph,question,answer,exp_split"] + [
        f"@entity{i} ran @entity{i + 10} .,@placeholder ran,@entity{i},{split}"
        for split in ("train", "dev", "test") for i in range(2)]
    table.write_text("\n".join(rows) + "\n")
    task = load_cnn_folder(str(table))
    assert {k: len(v) for k, v in task.splits.items()} == {"train": 2, "validation": 2, "test": 2}
    with pytest.raises(DataError, match="needs --data-path"):
        load_task("cnn-qa")
    table.write_text("paragraph,question,answer\na,b,c\n")
    with pytest.raises(DataError, match="exp_split"):
        load_cnn_folder(str(table))


def test_train_on_generated_babi1_and_run_the_jw_battery_with_the_qa_eps(tmp_path):
    from hf_attn.cli.analyze import _run, add_parser
    from hf_attn.training.engine import TrainSettings, train

    out = str(tmp_path / "qa")
    metrics = train(TrainSettings(dataset="babi1", embeddings="random", embedding_dim=16, hidden_size=8,
                                  epochs=1, batch_size=50), out, progress=False)
    assert 0.0 <= metrics["test_accuracy"] <= 1.0
    assert json.load(open(os.path.join(out, "config.json")))["model_type"] == "hf_attn_pair"
    run_info = json.load(open(os.path.join(out, "run.json")))
    assert run_info["task"] == "babi1-generated" and run_info["model_selection"] == "accuracy"

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    analysis = str(tmp_path / "jw")
    _run(parser.parse_args(["analyze", out, "--battery", "jw", "--output-dir", analysis, "--quiet",
                            "--jw-permutations", "5", "--jw-adversaries", "2", "--jw-steps", "5",
                            "--jw-max-instances", "10"]))
    results = json.load(open(os.path.join(analysis, "results.json")))
    assert results["dataset"] == "babi1-generated" and results["data"] == GENERATED_NOTE
    assert results["parameters"]["eps"] == 0.05  # J&W's QA threshold when --jw-eps is left out
    assert results["attended"].startswith("passage tokens")
    assert results["published"]["lstm"]["tau_gradient"]["mean"] == 0.25
    summary = results["summary"]
    assert summary["num_instances"] == 10
    rows = [json.loads(line) for line in open(os.path.join(analysis, "instances.jsonl"))]
    assert rows[0]["hypothesis_tokens"][:2] == ["where", "is"]
    assert abs(sum(rows[0]["attention"]) - 1) < 1e-6

    again = str(tmp_path / "jw-eps")
    _run(parser.parse_args(["analyze", out, "--battery", "jw", "--output-dir", again, "--quiet",
                            "--jw-permutations", "2", "--jw-adversaries", "1", "--jw-steps", "1",
                            "--jw-max-instances", "2", "--jw-eps", "0.01"]))
    assert json.load(open(os.path.join(again, "results.json")))["parameters"]["eps"] == 0.01
